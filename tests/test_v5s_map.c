/* test_v5s_map.c — GEMV v5s's split arithmetic (src/cuda/gemv_v5s_map.h, the code the GPU kernel
 * runs) on the CPU. For the 30B shapes and random ones, over chunk sizes and pool shares: every
 * unit of every tile is summed exactly once; each chunk stays in its tile, its CTA's range and its
 * slots; the units a CTA adds to a tile's count equal the count's target, and the chunk slots the
 * summing warp reads are exactly the ones written; the CTAs' claim caps can take the whole pool.
 * Runs without a GPU (CI). */
#include "harness.h"

#include <stdlib.h>

#include "v5_host.h"

/* gemv_mma_lane.h asks for the warp's mma; nothing here runs it */
static void v5_mma(int *c, int sgn, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    (void)c, (void)sgn, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
    abort();
}

#include "cuda/gemv_mma_lane.h"
#include "cuda/gemv_v5s_map.h"

static unsigned seed = 12345u;
static int64_t rnd(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rand_r(&seed) % (unsigned)(hi - lo + 1));
}

/* one slot's chunks: units added, and which chunk indices were written */
struct slot_acc {
    int64_t tile;
    int     need, units;
    unsigned char wrote[128];   /* chunk indices written (cpt <= 90 here) */
};

/* a chunk into its slot: the same tile and target as the slot's other chunks, a chunk index once */
static void slot_add(struct slot_acc *sa, const struct v5s_item *it, int cpt)
{
    CHECK(it->j >= 0 && it->j < cpt && it->j < 128);
    if (it->j < 0 || it->j >= 128)
        return;
    if (sa->units == 0 && sa->need == 0)
        sa->tile = it->tile, sa->need = it->need;
    CHECK_EQ(sa->tile, it->tile);
    CHECK_EQ(sa->need, it->need);
    CHECK(!sa->wrote[it->j]);
    sa->wrote[it->j] = 1;
    sa->units += (int)(it->s1 - it->s0);
}

/* the summing warp reads slots 0 .. ceil(need / C) - 1: exactly those written, and the count
 * reaches its target */
static void slot_done(const struct slot_acc *sa, int C, int cpt)
{
    if (sa->units == 0 && sa->need == 0)
        return;
    CHECK(sa->need > 0);
    CHECK_EQ(sa->units, sa->need);
    int nch = (sa->need + C - 1) / C;
    for (int j = 0; j < cpt && j < 128; j++)
        CHECK_EQ(sa->wrote[j], j < nch);
}

static void check_map(int64_t n_tiles, int64_t n_sb, int C, int pct, int64_t n_sm)
{
    struct v5s_pool_shape ps = v5s_pool_shape_of(n_tiles, n_sb, C, pct, n_sm);
    int64_t units = (n_tiles - ps.pool) * n_sb, n_cta = units < n_sm ? units : n_sm;
    int cpt = (int)((n_sb + C - 1) / C);
    int64_t tmax = v5s_tiles_max(units, n_cta, n_sb);
    unsigned char *seen = calloc((size_t)(n_tiles * n_sb), 1);
    struct slot_acc *sa = calloc((size_t)tmax, sizeof *sa);
    if (!seen || !sa) {
        CHECK(0);
        free(seen), free(sa);
        return;
    }
    if (ps.pool) {   /* a pool: tiles of <= 16 chunks, a CTA keeps units of its own */
        CHECK(cpt <= 16 && ps.pool < n_tiles && units >= n_sm);
        CHECK(ps.cap >= 1 && ps.cap <= ps.pool && (int64_t)ps.cap * n_sm >= ps.pool);   /* the CTAs can take them all */
    }
    for (int64_t cta = 0; cta < n_cta; cta++) {
        struct v5s_range R = v5s_range_of(cta, units, n_cta, n_sb, C);
        CHECK(R.b > R.a);
        CHECK_EQ(R.cpt, cpt);
        for (int64_t i = 0; i < tmax; i++)
            memset(&sa[i], 0, sizeof sa[i]);
        for (int64_t k = 0; k < R.total; k++) {
            struct v5s_item it = v5s_own_item(&R, k, n_sb, C);
            CHECK(it.lt >= 0 && it.lt < tmax);
            CHECK(it.s0 >= 0 && it.s0 < it.s1 && it.s1 <= n_sb && it.s1 - it.s0 <= C);
            CHECK(it.tile * n_sb + it.s0 >= R.a && it.tile * n_sb + it.s1 <= R.b);
            CHECK_EQ(it.tile, R.t0 + it.lt);
            for (int64_t u = it.s0; u < it.s1; u++)
                seen[it.tile * n_sb + u]++;
            if (it.lt >= 0 && it.lt < tmax)
                slot_add(&sa[it.lt], &it, cpt);
        }
        for (int64_t i = 0; i < tmax; i++)
            slot_done(&sa[i], C, cpt);
    }
    for (int64_t pt = 0; pt < ps.pool; pt++) {   /* each pooled tile, in whichever slot */
        struct slot_acc one;
        memset(&one, 0, sizeof one);
        int64_t lt = tmax + pt % (ps.cap ? ps.cap : 1);
        for (int64_t j = 0; j < cpt; j++) {
            struct v5s_item it = v5s_pool_item(pt, j, lt, n_tiles, ps.pool, n_sb, C);
            CHECK_EQ(it.lt, lt);
            CHECK(it.tile >= n_tiles - ps.pool && it.tile < n_tiles);
            CHECK(it.s0 >= 0 && it.s0 < it.s1 && it.s1 <= n_sb && it.s1 - it.s0 <= C);
            for (int64_t u = it.s0; u < it.s1; u++)
                seen[it.tile * n_sb + u]++;
            slot_add(&one, &it, cpt);
        }
        slot_done(&one, C, cpt);
    }
    int64_t bad = 0;
    for (int64_t u = 0; u < n_tiles * n_sb; u++)
        bad += seen[u] != 1;
    if (bad)
        fprintf(stderr, "FAIL tiles=%lld n_sb=%lld C=%d pct=%d sms=%lld: %lld units not summed once\n",
                (long long)n_tiles, (long long)n_sb, C, pct, (long long)n_sm, (long long)bad);
    CHECK_EQ(bad, 0);
    free(seen), free(sa);
}

static void test_30b_shapes(void)
{
    /* q (4096 rows), Wo (6656 x 4096), gate/up (2 x 19968), down (6656 x 19968), the head */
    static const int64_t tiles[5] = {256, 416, 2496, 416, 12628}, sbs[5] = {26, 16, 26, 78, 26};
    static const int pcts[5] = {0, 15, 50, 70, 90};
    for (int s = 0; s < 5; s++)
        for (int C = 1; C <= 8; C++)
            for (int p = 0; p < 5; p++)
                check_map(tiles[s], sbs[s], C, pcts[p], s == 4 && C > 2 ? 114 : 132);
}

static void test_random_shapes(void)
{
    for (int i = 0; i < 400; i++) {
        int64_t n_sb = rnd(1, 90), n_tiles = rnd(1, 3000 / n_sb + 4);
        check_map(n_tiles, n_sb, (int)rnd(1, 8), (int)rnd(0, 90), rnd(1, 140));
    }
}

int main(void)
{
    RUN(test_30b_shapes);
    RUN(test_random_shapes);
    return DONE();
}
