/* test_gemv_ring_walk.c — the loader walk of GEMV v5r (src/cuda/gemv_ring_walk.h, the code the
 * GPU's loader warp runs) on the CPU. For random jobs (1-4 parts of Q4_K- or Q6_K-sized records,
 * ragged tiles, any warp count and records a page) every warp's pages are "copied" with memcpy
 * from part buffers whose records carry their unit's number, and the consumer's reading order
 * (gemv_ring.cuh v5r_consume: tile and super-block counted from the range's start, a record's
 * size from its part's kind) must find each of its units, in order, at the offset it reads; a
 * page's announced bytes must be what was copied and fit the warp's slot. Runs without a GPU (CI). */
#include "harness.h"

#include "v5_host.h"

static void v5_mma(int *c, int sgn, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    (void)c, (void)sgn, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
    abort();   /* the walk never multiplies */
}

#define V5R_COPY(dst, src, bytes, bar) (memcpy((dst), (src), (bytes)), (*(int *)(bar))++)

#include "cuda/gemv_mma_lane.h"
#include "cuda/gemv_ring_walk.h"

static uint32_t seed = 12345;
static int rndi(int lo, int hi)   /* [lo, hi] */
{
    seed = seed * 1103515245u + 12345u;
    return lo + (int)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

/* the unit whose record starts at p (each record's first 8 bytes) */
static int64_t unit_at(const uint8_t *p)
{
    int64_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

static void check_job(int n_parts, int mixed, int64_t n_sb, int64_t n_warps_want, int recs)
{
    enum { BA = 2304, BB = 3360 };
    struct v5_part parts[4];
    uint8_t *buf[4];
    int64_t n_tiles = 0;
    for (int i = 0; i < n_parts; i++) {
        int64_t rows = rndi(1, 70), tiles = (rows + 15) / 16;
        int kind = mixed ? rndi(0, 1) : 0, rec = kind ? BB : BA;
        buf[i] = malloc((size_t)(tiles * n_sb * rec));
        for (int64_t u = 0; u < tiles * n_sb; u++) {   /* unit numbers of the whole job */
            int64_t id = n_tiles * n_sb + u;
            memset(buf[i] + u * rec, 0xa5, (size_t)rec);
            memcpy(buf[i] + u * rec, &id, sizeof id);
        }
        parts[i] = (struct v5_part){buf[i], NULL, rows, n_tiles, kind};
        n_tiles += tiles;
    }
    struct v5r_parts J = {parts, n_parts, n_tiles, n_sb, BA, BB};
    int64_t units = n_tiles * n_sb, n_warps = n_warps_want < units ? n_warps_want : units;
    int slot = recs * (mixed ? BB : BA);
    int64_t most = (units + n_warps - 1) / n_warps, n_pages = (most + recs - 1) / recs;
    uint8_t *page = malloc((size_t)slot);
    int64_t seen = 0;
    int bad = 0;
    for (int64_t w = 0; w < n_warps + 2 && !bad; w++) {   /* (+2: warps past n_warps have no units) */
        int64_t a = v5_split_lo(w, units, n_warps), b = v5_split_lo(w + 1, units, n_warps);
        struct v5r_cursor c;
        v5r_cursor_init(&J, &c, a, b);
        int64_t tile = a < b ? a / n_sb : 0, sb = a - tile * n_sb;   /* the consumer's counters */
        for (int64_t p = 0; p < n_pages && !bad; p++) {
            struct v5r_cursor peek = c;
            unsigned bytes = v5r_take(&J, &peek, recs, NULL, NULL);
            int copies = 0;
            memset(page, 0, (size_t)slot);
            unsigned got = v5r_take(&J, &c, recs, page, &copies);
            bad |= got != bytes || got > (unsigned)slot || (got && !copies) || copies > n_parts;
            int64_t x0 = a + p * recs, x1 = x0 + recs < b ? x0 + recs : b;
            unsigned off = 0;
            for (int64_t x = x0; x < x1; x++, sb++) {
                if (sb == n_sb)
                    tile++, sb = 0;
                int kind = parts[0].kind;
                for (int i = 1; i < n_parts; i++)
                    if (tile >= parts[i].tile0)
                        kind = parts[i].kind;
                if (off + 8 > got || unit_at(page + off) != tile * n_sb + sb || tile * n_sb + sb != x) {
                    bad = 1;
                    break;
                }
                off += kind ? BB : BA;
                seen++;
            }
            bad |= off != (x1 > x0 ? got : 0u);
        }
        bad |= c.x != b;
    }
    if (bad || seen != units)
        fprintf(stderr, "FAIL ring walk: %d parts mixed=%d n_sb=%lld warps=%lld recs=%d (units %lld, seen %lld)\n",
                n_parts, mixed, (long long)n_sb, (long long)n_warps, recs, (long long)units, (long long)seen);
    CHECK(!bad);
    CHECK_EQ(seen, units);
    free(page);
    for (int i = 0; i < n_parts; i++)
        free(buf[i]);
}

static void test_ring_walk(void)
{
    for (int i = 0; i < 400; i++)
        check_job(rndi(1, 4), rndi(0, 1), rndi(1, 30), rndi(1, 300), rndi(1, 4));
    check_job(2, 0, 26, 1056, 1);   /* the 30B FFN gate/up's shape class: two parts, 8 warps an SM */
    check_job(4, 1, 26, 1056, 2);   /* q/k/v/gate with a Q6_K part */
}

int main(void)
{
    RUN(test_ring_walk);
    return DONE();
}
