/* test_gemv_mma_lane.c — GEMV v5's lane code (src/cuda/gemv_mma_lane.h, the code the GPU kernel
 * runs) on the CPU: 32 threads are the warp, the mma exchanges fragments between two barriers
 * with the PTX ISA layout of m16n8k32, and the tile's row sums must match the CPU dequantizer's
 * dot product with the same int8 activations. The 16-row tile layout (quant_t16_repack, read by
 * the *_fetch_t16) must give every lane the bytes the row-major fetchers give it, so the same
 * sums bit for bit. Runs without a GPU (CI). */
#include "harness.h"

#include <pthread.h>

#include "quant/quant.h"

#include "v5_host.h"   /* CUDA's vector types and v5's load primitives on the host */

/* ---- the warp: lane i is thread i; an mma publishes each lane's fragments, waits for all 32,
 * adds its own C entries, and waits again before the arrays are reused */
static pthread_barrier_t warp_bar;
static _Thread_local int emu_lane;
static uint32_t frag_a[32][4], frag_b[32][2];
static int mma_calls;   /* lane 0's count, for the test to see the mma ran */

static int byte_of(uint32_t w, int e, int sgn)
{
    int v = (int)((w >> (8 * e)) & 0xffu);
    return sgn && v > 127 ? v - 256 : v;
}

/* A[row][k]: lane 4 (row % 8) + (k % 16) / 4, register (row >= 8) + 2 (k >= 16), byte k % 4 */
static int elem_a(int row, int k, int sgn)
{
    return byte_of(frag_a[4 * (row % 8) + (k % 16) / 4][(row >= 8) + 2 * (k >= 16)], k % 4, sgn);
}

/* B[k][col]: lane 4 col + (k % 16) / 4, register k >= 16, byte k % 4 */
static int elem_b(int k, int col)
{
    return byte_of(frag_b[4 * col + (k % 16) / 4][k >= 16], k % 4, 1);
}

static void v5_mma(int *c, int sgn, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
    int l = emu_lane, g = l >> 2, t = l & 3;
    frag_a[l][0] = a0, frag_a[l][1] = a1, frag_a[l][2] = a2, frag_a[l][3] = a3;
    frag_b[l][0] = b0, frag_b[l][1] = b1;
    pthread_barrier_wait(&warp_bar);
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; i++) {
        int s = 0;
        for (int k = 0; k < 32; k++)
            s += elem_a(rows[i], k, sgn) * elem_b(k, cols[i]);
        c[i] += s;
    }
    if (l == 0)
        mma_calls++;
    pthread_barrier_wait(&warp_bar);
}

#include "cuda/gemv_mma_lane.h"

/* ---- the fixture: a tile of 16 rows (rows r0.. of n), n_sb super-blocks, K45 int8 x */
static int64_t k45_pos(int64_t n)   /* cuda_util.cuh cuda_xq_pos_k45 */
{
    int r = (int)((n >> 4) & 15), rr = r & 3;
    int at = rr < 2 ? 2 * (r >> 2) + rr : 8 + 2 * (r >> 2) + rr - 2;
    return (n & ~(int64_t)255) + 16 * at + (n & 15);
}

/* the GPU quantizer's rule: per 32 values d = amax / 127, q = rint(x / d), xd = {d, d * sum(q)} */
static void quantize_x(const float *x, int64_t k, int8_t *xq, float2 *xd, int8_t *q_nat)
{
    for (int64_t b = 0; b < k / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[32 * b + i]));
        float d = amax / 127.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            int q = amax > 0 ? (int)lrintf(x[32 * b + i] / d) : 0;
            q_nat[32 * b + i] = (int8_t)q;
            xq[k45_pos(32 * b + i)] = (int8_t)q;
            sum += q;
        }
        xd[b].x = d;
        xd[b].y = d * (float)sum;
    }
}

struct emu {
    int                   q6;    /* 0: Q4_K rows, 1: Q6_K SoA */
    int                   t16;   /* the weights are quant_t16_repack's tiles (r0 % 16 == 0) */
    const struct v5_part *P;
    int64_t               r0, n_sb;
    const int8_t         *xq;
    const float2         *xd;
    float                 acc[32][2];
};

static struct emu *emu_job;

/* a lane's Q4_K super-block from the tiles or the row-major blocks (both emulated lanes) */
static void fetch_q4k(const struct v5_part *P, int t16, int64_t lg, int64_t lg8, int64_t n_sb, int64_t sb, int t,
                      struct v5_q4k_raw *r)
{
    if (t16)
        v5_q4k_fetch_t16(P, lg, lg8, n_sb, sb, t, r);
    else
        v5_q4k_fetch(P, lg, lg8, n_sb, sb, t, r);
}

static void *lane_main(void *arg)
{
    int l = (int)(intptr_t)arg, g = l >> 2, t = l & 3;
    const struct emu *e = emu_job;
    emu_lane = l;
    float ag = 0, ag8 = 0;
    int64_t n = e->P->n, rg = e->r0 + g, rg8 = rg + 8;
    int64_t lg = v5_row_loaded(rg, n, e->t16), lg8 = v5_row_loaded(rg8, n, e->t16);
    for (int64_t sb = 0; sb < e->n_sb; sb++) {
        if (e->q6) {
            struct v5_q6k_raw r;
            if (e->t16)
                v5_q6k_fetch_t16(e->P, lg, lg8, e->n_sb, sb, t, &r);
            else
                v5_q6k_fetch(e->P, lg, lg8, e->n_sb, sb, t, &r);
            v5_q6k_compute(&r, e->xq, e->xd, sb, g, t, &ag, &ag8);
        } else {
            struct v5_q4k_raw r;
            fetch_q4k(e->P, e->t16, lg, lg8, e->n_sb, sb, t, &r);
            v5_q4k_compute(&r, e->xq, e->xd, sb, g, t, &ag, &ag8);
        }
    }
    emu_job->acc[l][0] = ag, emu_job->acc[l][1] = ag8;
    return NULL;
}

static float *rand_floats(int64_t n, unsigned *seed)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)rand_r(seed) / RAND_MAX * 2.0f - 1.0f;
    return x;
}

/* run the warp on the tile at r0 of P; acc[lane][row g, g + 8] */
static void run_warp(struct emu *e)
{
    emu_job = e;
    mma_calls = 0;
    pthread_t th[32];
    pthread_barrier_init(&warp_bar, NULL, 32);
    for (int l = 0; l < 32; l++)
        pthread_create(&th[l], NULL, lane_main, (void *)(intptr_t)l);
    for (int l = 0; l < 32; l++)
        pthread_join(th[l], NULL);
    pthread_barrier_destroy(&warp_bar);
}

/* one tile: rows r0..r0+15 of an n-row matrix of type (Q4_K or Q6_K), k = 256 n_sb; rows past
 * n are not checked against the reference. When r0 is a tile start, again on the T16 copy: the
 * same sums bit for bit, and 0 for its padded rows. */
static void check_tile(uint32_t type, int64_t n, int64_t r0, int64_t n_sb, unsigned seed)
{
    int64_t k = 256 * n_sb;
    const struct quant_traits *qt = quant_traits(type);
    size_t row_bytes = (size_t)quant_row_bytes(type, k);
    float *w = rand_floats(n * k, &seed), *x = rand_floats(k, &seed);
    uint8_t *blocks = malloc((size_t)n * row_bytes), *dev = malloc((size_t)n * row_bytes);
    for (int64_t r = 0; r < n; r++)
        qt->from_f32(w + r * k, blocks + r * row_bytes, k);
    if (type == GLIM_TYPE_Q6_K)   /* the CUDA backend's device layout */
        quant_soa_repack(type, blocks, dev, k, n);
    else
        memcpy(dev, blocks, (size_t)n * row_bytes);
    int8_t *xq = malloc((size_t)k), *q_nat = malloc((size_t)k);
    float2 *xd = malloc((size_t)(k / 32) * sizeof *xd);
    quantize_x(x, k, xq, xd, q_nat);

    struct v5_part P = {dev, NULL, n, 0, 0};
    struct emu e = {type == GLIM_TYPE_Q6_K, 0, &P, r0, n_sb, xq, xd, {{0}}};
    run_warp(&e);
    CHECK_EQ(mma_calls, 8 * n_sb);
    if (r0 % 16 == 0) {
        uint8_t *tiles = malloc(quant_t16_bytes(type, k, n));
        quant_t16_repack(type, blocks, tiles, k, n);
        struct v5_part PT = {tiles, NULL, n, 0, 0};
        struct emu et = {e.q6, 1, &PT, r0, n_sb, xq, xd, {{0}}};
        run_warp(&et);
        for (int l = 0; l < 32; l++)
            for (int hi = 0; hi < 2; hi++) {
                bool real = r0 + (l >> 2) + 8 * hi < n;
                if (real ? memcmp(&et.acc[l][hi], &e.acc[l][hi], sizeof(float)) != 0 : et.acc[l][hi] != 0.0f)
                    fprintf(stderr, "%s n=%lld r0=%lld lane %d row %d: T16 %.9g, row-major %.9g\n",
                            quant_type_name(type), (long long)n, (long long)r0, l, (l >> 2) + 8 * hi,
                            et.acc[l][hi], e.acc[l][hi]);
                CHECK(real ? memcmp(&et.acc[l][hi], &e.acc[l][hi], sizeof(float)) == 0 : et.acc[l][hi] == 0.0f);
            }
        free(tiles);
    }

    float *row = malloc((size_t)k * sizeof *row);
    for (int i = 0; i < 16 && r0 + i < n; i++) {
        int g = i % 8, hi = i >= 8;
        double ref = 0, mag = 0;
        qt->to_f32(blocks + (r0 + i) * row_bytes, row, k);
        for (int64_t j = 0; j < k; j++) {
            double term = (double)row[j] * xd[j / 32].x * q_nat[j];
            ref += term;
            mag += fabs(term);
        }
        double got = 0;
        for (int t = 0; t < 4; t++)
            got += e.acc[4 * g + t][hi];
        if (!(fabs(got - ref) <= 1e-5 * mag + 1e-12))
            fprintf(stderr, "%s n=%lld r0=%lld n_sb=%lld row %d: v5 lane code %.9g, reference %.9g\n",
                    quant_type_name(type), (long long)n, (long long)r0, (long long)n_sb, i, got, ref);
        CHECK(fabs(got - ref) <= 1e-5 * mag + 1e-12);
    }
    free(w), free(x), free(blocks), free(dev), free(xq), free(q_nat), free(xd), free(row);
}

static void test_q4k_tiles(void)
{
    check_tile(GLIM_TYPE_Q4_K, 16, 0, 1, 1);
    check_tile(GLIM_TYPE_Q4_K, 40, 16, 3, 2);   /* a tile past the first: row offsets */
    check_tile(GLIM_TYPE_Q4_K, 33, 8, 2, 3);
    check_tile(GLIM_TYPE_Q4_K, 37, 32, 2, 7);   /* the last tile, 5 real rows */
}

static void test_q6k_tiles(void)
{
    check_tile(GLIM_TYPE_Q6_K, 16, 0, 1, 4);
    check_tile(GLIM_TYPE_Q6_K, 40, 16, 3, 5);   /* SoA: nb = 120 blocks, the tile's start mid-array */
    check_tile(GLIM_TYPE_Q6_K, 37, 20, 2, 6);
    check_tile(GLIM_TYPE_Q6_K, 43, 32, 3, 8);   /* the last tile, 11 real rows */
}

/* ---- Q4_K and Q6_K times 2..16 activation rows (v5_q4k_compute_nr, v5_q6k_compute_nr) */
struct emu_nr {
    int                   q6, t16, nr;
    const struct v5_part *P;
    int64_t               r0, n_sb;
    const int8_t         *xq;
    const float2         *xd;
    float                 acc[32][2][2][2];
};

static struct emu_nr *emu_nr_job;

static void *lane_main_nr(void *arg)
{
    int l = (int)(intptr_t)arg, g = l >> 2, t = l & 3;
    struct emu_nr *e = emu_nr_job;
    emu_lane = l;
    float acc[2][2][2] = {{{0}}};
    int64_t n = e->P->n, rg = e->r0 + g, rg8 = rg + 8;
    int64_t lg = v5_row_loaded(rg, n, e->t16), lg8 = v5_row_loaded(rg8, n, e->t16);
    for (int64_t sb = 0; sb < e->n_sb; sb++) {
        if (e->q6) {
            struct v5_q6k_nr_raw r;
            if (e->t16)
                v5_q6k_fetch_nr_t16(e->P, lg, lg8, e->n_sb, sb, t, &r);
            else
                v5_q6k_fetch_nr(e->P, lg, lg8, e->n_sb, sb, t, &r);
            v5_q6k_compute_nr(&r, e->t16, e->xq, e->xd, 256 * e->n_sb, e->nr, sb, g, t, acc);
        } else {
            struct v5_q4k_raw r;
            fetch_q4k(e->P, e->t16, lg, lg8, e->n_sb, sb, t, &r);
            v5_q4k_compute_nr(&r, e->t16, e->xq, e->xd, 256 * e->n_sb, e->nr, sb, g, t, acc);
        }
    }
    memcpy(e->acc[l], acc, sizeof acc);
    return NULL;
}

static void check_tile_nr(uint32_t type, int64_t n, int64_t r0, int64_t n_sb, int nr, int t16, unsigned seed)
{
    int64_t k = 256 * n_sb;
    bool q6 = type == GLIM_TYPE_Q6_K;
    const struct quant_traits *qt = quant_traits(type);
    size_t row_bytes = (size_t)quant_row_bytes(type, k);
    float *w = rand_floats(n * k, &seed), *x = rand_floats(nr * k, &seed);
    uint8_t *blocks = malloc((size_t)n * row_bytes), *tiles = malloc(quant_t16_bytes(type, k, n));
    uint8_t *soa = malloc((size_t)n * row_bytes);
    for (int64_t r = 0; r < n; r++)
        qt->from_f32(w + r * k, blocks + r * row_bytes, k);
    quant_t16_repack(type, blocks, tiles, k, n);
    quant_soa_repack(type, blocks, soa, k, n);   /* Q6_K's row-major device layout */
    int8_t *xq = malloc((size_t)(nr * k)), *q_nat = malloc((size_t)(nr * k));
    float2 *xd = malloc((size_t)(nr * k / 32) * sizeof *xd);
    for (int c = 0; c < nr; c++)
        quantize_x(x + c * k, k, xq + c * k, xd + c * (k / 32), q_nat + c * k);
    struct v5_part P = {t16 ? tiles : q6 ? soa : blocks, NULL, n, 0, 0};
    static struct emu_nr e;
    memset(&e, 0, sizeof e);
    e.q6 = q6, e.t16 = t16, e.nr = nr, e.P = &P, e.r0 = r0, e.n_sb = n_sb, e.xq = xq, e.xd = xd;
    emu_nr_job = &e;
    mma_calls = 0;
    pthread_t th[32];
    pthread_barrier_init(&warp_bar, NULL, 32);
    for (int l = 0; l < 32; l++)
        pthread_create(&th[l], NULL, lane_main_nr, (void *)(intptr_t)l);
    for (int l = 0; l < 32; l++)
        pthread_join(th[l], NULL);
    pthread_barrier_destroy(&warp_bar);
    CHECK_EQ(mma_calls, (q6 ? 16 : 8) * n_sb * ((nr + 7) / 8));
    float *row = malloc((size_t)k * sizeof *row);
    for (int i = 0; i < 16 && r0 + i < n; i++) {
        qt->to_f32(blocks + (r0 + i) * row_bytes, row, k);
        for (int c = 0; c < 16; c++) {
            float got = e.acc[4 * (i % 8) + (c % 8) / 2][c / 8][i / 8][c % 2];
            if (c >= nr) {   /* columns past the activation rows stay untouched */
                CHECK(got == 0.0f);
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t j = 0; j < k; j++) {
                double term = (double)row[j] * xd[c * (k / 32) + j / 32].x * q_nat[c * k + j];
                ref += term;
                mag += fabs(term);
            }
            if (!(fabs(got - ref) <= 1e-5 * mag + 1e-12))
                fprintf(stderr, "%s nr=%d t16=%d n=%lld r0=%lld row %d x row %d: v5 %.9g, reference %.9g\n",
                        quant_type_name(type), nr, t16, (long long)n, (long long)r0, i, c, got, ref);
            CHECK(fabs(got - ref) <= 1e-5 * mag + 1e-12);
        }
    }
    free(w), free(x), free(blocks), free(tiles), free(soa), free(xq), free(q_nat), free(xd), free(row);
}

static void test_rows(void)
{
    for (int ti = 0; ti < 2; ti++) {
        uint32_t type = ti ? GLIM_TYPE_Q6_K : GLIM_TYPE_Q4_K;
        check_tile_nr(type, 16, 0, 1, 2, 0, 11);
        check_tile_nr(type, 40, 16, 2, 8, 0, 12);    /* Q6_K SoA: the tile's start mid-array */
        check_tile_nr(type, 37, 32, 2, 5, 1, 13);    /* the last tile, 5 real rows, tiles */
        check_tile_nr(type, 48, 16, 3, 16, 1, 14);   /* two passes of 8 activation rows */
        check_tile_nr(type, 33, 16, 1, 11, 0, 15);
        check_tile_nr(type, 43, 32, 2, 3, 1, 16);
    }
}

/* ---- T16: every lane's fetched bytes, tile by tile, against the row-major fetchers */

static bool raw_same(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

/* the bytes of rows g (i = 0) and g + 8 (i = 1) in a raw struct; a padded row's must be 0 */
static bool q4k_row_ok(const struct v5_q4k_raw *t, const struct v5_q4k_raw *m, int i, bool real)
{
    struct v5_q4k_raw z;
    memset(&z, 0, sizeof z);
    const struct v5_q4k_raw *w = real ? m : &z;
    return raw_same(t->q[i], w->q[i], sizeof t->q[i]) && raw_same(&t->h[i], &w->h[i], sizeof t->h[i]);
}

static bool q6k_row_ok(const struct v5_q6k_raw *t, const struct v5_q6k_raw *m, int i, bool real)
{
    struct v5_q6k_raw z;
    memset(&z, 0, sizeof z);
    const struct v5_q6k_raw *w = real ? m : &z;
    return raw_same(t->ql[i], w->ql[i], sizeof t->ql[i]) && raw_same(t->qh[i], w->qh[i], sizeof t->qh[i]) &&
           t->sc[i] == w->sc[i] && t->d[i] == w->d[i];
}

static void check_t16_fetch(uint32_t type, int64_t n, int64_t n_sb, unsigned seed)
{
    int64_t k = 256 * n_sb, n_tiles = (n + 15) / 16;
    const struct quant_traits *qt = quant_traits(type);
    size_t row_bytes = quant_row_bytes(type, k);
    float *w = rand_floats(n * k, &seed);
    uint8_t *blocks = malloc((size_t)n * row_bytes), *soa = malloc((size_t)n * row_bytes);
    for (int64_t r = 0; r < n; r++)
        qt->from_f32(w + r * k, blocks + r * row_bytes, k);
    quant_soa_repack(type, blocks, soa, k, n);
    size_t tb = quant_t16_bytes(type, k, n);
    CHECK_EQ(tb, (size_t)n_tiles * 16 * row_bytes);
    uint8_t *tiles = malloc(tb);
    memset(tiles, 0xa5, tb);   /* the padding must be written */
    quant_t16_repack(type, blocks, tiles, k, n);
    bool q6 = type == GLIM_TYPE_Q6_K;
    struct v5_part PM = {q6 ? soa : blocks, NULL, n, 0, 0}, PT = {tiles, NULL, n, 0, 0};
    int bad = 0;
    for (int64_t tile = 0; tile < n_tiles; tile++)
        for (int64_t sb = 0; sb < n_sb; sb++)
            for (int l = 0; l < 32; l++) {
                int g = l >> 2, t = l & 3;
                int64_t rg = 16 * tile + g, rg8 = rg + 8;
                /* the row-major fetchers only see real rows (the kernel clamps); padded rows: 0 */
                int64_t lg = v5_row_loaded(rg, n, 0), lg8 = v5_row_loaded(rg8, n, 0);
                bool ok;
                if (q6) {
                    struct v5_q6k_raw a, b;
                    v5_q6k_fetch_t16(&PT, rg, rg8, n_sb, sb, t, &a);
                    v5_q6k_fetch(&PM, lg, lg8, n_sb, sb, t, &b);
                    ok = q6k_row_ok(&a, &b, 0, rg < n) && q6k_row_ok(&a, &b, 1, rg8 < n);
                } else {
                    struct v5_q4k_raw a, b;
                    v5_q4k_fetch_t16(&PT, rg, rg8, n_sb, sb, t, &a);
                    v5_q4k_fetch(&PM, lg, lg8, n_sb, sb, t, &b);
                    ok = q4k_row_ok(&a, &b, 0, rg < n) && q4k_row_ok(&a, &b, 1, rg8 < n);
                }
                if (!ok && bad++ < 5)
                    fprintf(stderr, "%s n=%lld n_sb=%lld tile %lld sb %lld lane %d: T16 fetch differs\n",
                            quant_type_name(type), (long long)n, (long long)n_sb, (long long)tile, (long long)sb, l);
            }
    CHECK_EQ(bad, 0);
    free(w), free(blocks), free(soa), free(tiles);
}

static void test_t16_fetch(void)
{
    static const uint32_t types[2] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K};
    for (int i = 0; i < 2; i++) {
        check_t16_fetch(types[i], 16, 1, 11);
        check_t16_fetch(types[i], 48, 3, 12);   /* several tiles and super-blocks */
        check_t16_fetch(types[i], 37, 2, 13);   /* n % 16 = 5: a padded last tile */
        check_t16_fetch(types[i], 7, 4, 14);    /* one tile, 9 padded rows */
        check_t16_fetch(types[i], 57, 5, 15);
    }
    CHECK_EQ(quant_t16_bytes(GLIM_TYPE_Q4_K, 512, 17), 2 * 2 * 2304);
    CHECK_EQ(quant_t16_bytes(GLIM_TYPE_Q6_K, 256, 16), 3360);
    CHECK_EQ(quant_t16_bytes(GLIM_TYPE_Q5_K, 256, 16), 0);   /* no T16 layout */
    CHECK_EQ(quant_t16_bytes(GLIM_TYPE_Q4_K, 300, 16), 0);   /* k % 256 */
}

/* v5's work split (v5_split_*): the warps' ranges cover the units once, in order, each of the
 * first n_warps warps gets at least one; the warps that meet a tile are exactly warp_of(its
 * first unit) .. warp_of(its last), each piece index below the stride; this is what lets the
 * last piece to arrive find every partial sum (gemv_mma.cu v5_store). */
static void check_split(int64_t n_tiles, int64_t n_sb, int64_t warps)
{
    int64_t units = n_tiles * n_sb, n_warps = warps < units ? warps : units;
    int stride = v5_split_stride(n_sb, units, n_warps);
    int64_t grid = (n_warps + 3) / 4 * 4;   /* whole CTAs of 4 warps: some past n_warps */
    int *seen = calloc((size_t)n_tiles, sizeof(int));
    int64_t next = 0;
    bool ok = true;
    for (int64_t w = 0; w < grid && ok; w++) {
        int64_t a = v5_split_lo(w, units, n_warps), b = v5_split_lo(w + 1, units, n_warps);
        ok = a == next && (w < n_warps ? b > a : b == a);
        next = b;
        for (int64_t x = a; x < b && ok;) {   /* the kernel's loop over its tiles */
            int64_t tile = x / n_sb, tend = (tile + 1) * n_sb, e = tend < b ? tend : b;
            int64_t w0 = v5_split_warp_of(tile * n_sb, units, n_warps), w1 = v5_split_warp_of(tend - 1, units, n_warps);
            int piece = (int)(w - w0), pieces = (int)(w1 - w0 + 1);
            ok = ok && v5_split_warp_of(x, units, n_warps) == w && piece >= 0 && piece < pieces && pieces <= stride;
            ok = ok && seen[tile] == piece;   /* the pieces of a tile come from consecutive warps */
            seen[tile]++;
            x = e;
        }
    }
    for (int64_t t = 0; t < n_tiles && ok; t++) {
        int64_t w0 = v5_split_warp_of(t * n_sb, units, n_warps), w1 = v5_split_warp_of((t + 1) * n_sb - 1, units, n_warps);
        ok = seen[t] == (int)(w1 - w0 + 1);
    }
    if (!ok || next != units)
        fprintf(stderr, "FAIL split tiles=%lld n_sb=%lld warps=%lld\n", (long long)n_tiles, (long long)n_sb,
                (long long)warps);
    CHECK(ok && next == units);
    free(seen);
}

static void test_split(void)
{
    /* the 30B shapes on 132 SMs x 16 warps, then small and ragged jobs, more warps than units */
    check_split(2 * 1248, 26, 2112);   /* FFN gate/up */
    check_split(416, 78, 2112);        /* FFN down */
    check_split(12628, 26, 2112);      /* output head */
    check_split(256 + 16 + 256, 26, 2112);
    check_split(1, 1, 2112);
    check_split(3, 1, 4);
    unsigned r = 12345;
    for (int i = 0; i < 2000; i++) {
        r = r * 1103515245u + 12345u;
        int64_t tiles = 1 + (r >> 8) % 300, n_sb = 1 + (r >> 4) % 80;
        r = r * 1103515245u + 12345u;
        check_split(tiles, n_sb, 1 + (r >> 8) % 3000);
    }
}

/* the threaded repack writes what the one-thread repack writes (every byte, padding included) */
static void test_t16_threads(void)
{
    for (int ti = 0; ti < 2; ti++) {
        uint32_t type = ti ? GLIM_TYPE_Q6_K : GLIM_TYPE_Q4_K;
        int64_t k = 512, n = 16 * 37 + 5;
        size_t row_bytes = quant_row_bytes(type, k), bytes = quant_t16_bytes(type, k, n);
        uint8_t *src = malloc((size_t)n * row_bytes), *one = malloc(bytes), *many = malloc(bytes);
        unsigned seed = 21 + ti;
        for (size_t i = 0; i < (size_t)n * row_bytes; i++)
            src[i] = (uint8_t)rand_r(&seed);
        quant_t16_repack_mt(type, src, one, k, n, 1);
        for (int th = 2; th <= 40; th += 19) {   /* 2, 21 (> the 16 it takes at most), 40 > tiles */
            memset(many, 0xa5, bytes);
            quant_t16_repack_mt(type, src, many, k, n, th);
            CHECK(memcmp(one, many, bytes) == 0);
        }
        free(src), free(one), free(many);
    }
}

int main(void)
{
    RUN(test_q4k_tiles);
    RUN(test_q6k_tiles);
    RUN(test_t16_fetch);
    RUN(test_split);
    RUN(test_rows);
    RUN(test_t16_threads);
    return DONE();
}
