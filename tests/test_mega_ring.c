/* test_mega_ring.c — the persistent decode span's index rules (src/cuda/mega_ring.h, the code the
 * GPU kernel runs) on the CPU. A warp's ring: records asked for in order against records read in
 * order never overlap, never pass the end, wait only while the ring is full, and fill it (5 Q4_K
 * or 3 Q6_K records). The CTA-local merge: for the 30B shapes and the test's small ones, over
 * several warp counts, no two pieces of one job share a warp's slot and no two cut tiles share a
 * count. Runs without a GPU (CI). */
#include "harness.h"

#include "v5_host.h"

/* gemv_mma_lane.h asks for the warp's mma; nothing here runs it */
static void v5_mma(int *c, int sgn, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    (void)c, (void)sgn, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
    abort();
}

#include "cuda/gemv_mma_lane.h"
#include "cuda/mega_ring.h"

#define Q4 2304u
#define Q6 3360u

/* one ring, n records of the sizes given: ask while mg_room says so, read the oldest whenever
 * read_every says; every record asked for is checked against the unread ones */
static void run_ring(const unsigned *rec, int n, unsigned seed, int *most_out)
{
    struct mg_fill f = {0, 0, 0};
    unsigned offs[64], seq = 0;
    int next = 0, most = 0;
    while ((int)seq < n) {
        unsigned off;
        while (next < n && mg_room(&f, f.issued - seq, rec[next], &off)) {
            CHECK(off + rec[next] <= MG_RB);
            for (unsigned r = seq; r < f.issued; r++)   /* no unread record overlaps it */
                CHECK(off + rec[next] <= offs[r % 64] || offs[r % 64] + rec[r] <= off);
            offs[f.issued % 64] = off;
            mg_took(&f, seq, off, rec[next]);
            next++;
        }
        int out = (int)(f.issued - seq);
        most = out > most ? out : most;
        CHECK(out >= 1 && out <= MG_NB);   /* never empty while records remain: it always has room for one */
        CHECK_EQ(f.r_off, offs[seq % 64]);   /* the oldest unread is where it was put */
        unsigned reads = 1 + (rand_r(&seed) % 3);   /* read one to three, then ask again */
        for (unsigned i = 0; i < reads && seq < f.issued; i++) {
            seq++;
            if (f.issued != seq)
                f.r_off = offs[seq % 64];
        }
    }
    CHECK_EQ(next, n);
    *most_out = most;
}

static void test_ring(void)
{
    static unsigned rec[2000];
    int most;
    for (int i = 0; i < 2000; i++)
        rec[i] = Q4;
    run_ring(rec, 2000, 1, &most);
    CHECK_EQ(most, 5);   /* a ring of Q4_K records holds 5 */
    for (int i = 0; i < 2000; i++)
        rec[i] = Q6;
    run_ring(rec, 2000, 2, &most);
    CHECK_EQ(most, 3);
    for (unsigned s = 3; s < 60; s++) {   /* runs of each kind, as the span's jobs come */
        unsigned seed = s;
        for (int i = 0; i < 2000;) {
            unsigned r = rand_r(&seed) & 1 ? Q4 : Q6;
            for (int k = 1 + (int)(rand_r(&seed) % 40); k > 0 && i < 2000; k--)
                rec[i++] = r;
        }
        run_ring(rec, 2000, s, &most);
        CHECK(most >= 3);
    }
}

/* every cut tile of one job whose pieces lie in one CTA of cw warps: its pieces' (warp, slot)
 * pairs are distinct across the job, and so are the first warps that keep the counts; returns how
 * many tiles are merged so */
static int64_t check_slots(int64_t tiles, int64_t n_sb, int64_t warps, int cw)
{
    int64_t units = tiles * n_sb, nw = warps < units ? warps : units;
    unsigned char *used = calloc((size_t)nw * 2, 1), *first = calloc((size_t)nw, 1);
    int64_t cut = 0;
    for (int64_t t = 0; t < tiles; t++) {
        int64_t w0 = v5_split_warp_of(t * n_sb, units, nw), w1 = v5_split_warp_of((t + 1) * n_sb - 1, units, nw);
        if (w0 == w1 || w0 / cw != w1 / cw)
            continue;
        cut++;
        CHECK(!first[w0]);
        first[w0] = 1;
        for (int64_t w = w0; w <= w1; w++) {
            int s = mg_slot_of(w, t, units, nw, n_sb);
            CHECK(!used[w * 2 + s]);
            used[w * 2 + s] = 1;
            CHECK(s == 0 || t == (v5_split_lo(w + 1, units, nw) - 1) / n_sb);   /* slot 1: its last tile */
            CHECK(w == w0 || s == 0);   /* the merge reads the later warps' pieces from slot 0 */
            CHECK(s == (v5_split_lo(w, units, nw) == t * n_sb || w > w0 ? 0 : 1));   /* ... and w0's so */
        }
    }
    free(used), free(first);
    return cut;
}

static void test_merge_slots(void)
{
    /* the 30B span: Wo (6656 rows, k 4096), gate/up (2 x 19968 rows, k 6656), down (6656, k 19968),
     * q/k/gate (4096 + 256 + 4096 rows, k 6656), v (256 rows); test_mega's small shape */
    static const int64_t shapes[][2] = {{416, 16}, {2496, 26}, {416, 78}, {528, 26}, {16, 26},
                                        {64, 4},   {256, 4},   {64, 8},   {40, 4},   {2, 4}};
    static const int64_t warps[] = {132 * 16, 114 * 16, 78 * 16, 16, 48};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < sizeof warps / sizeof warps[0]; j++)
            check_slots(shapes[i][0], shapes[i][1], warps[j], 16);
    /* on 132 SMs 1920 of gate/up's 2496 tiles are cut between warps, 120 of them between CTAs:
     * 1800 merge in shared memory */
    CHECK_EQ(check_slots(2496, 26, 132 * 16, 16), 1800);
}

int main(void)
{
    RUN(test_ring);
    RUN(test_merge_slots);
    return DONE();
}
