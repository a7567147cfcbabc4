/*
 * test_cpu_kernels.c — the fast CPU backend against the reference ops.
 *
 * Every ISA level this machine runs is tested (scalar always; AVX2 and
 * AVX-512 when present), for every weight type the fast matmul accepts.
 * Bounds asserted, per output element y = sum_i w_i x_i:
 *   f32 activations (F32/F16/BF16 weights):
 *       |y - ref| <= (k + 64) * 2^-22 * sum_i |w_i x_i|            (f32 summation order)
 *   int8 activations (Q8_0/Q4_0 via 32-blocks, Q4_K/Q5_K/Q6_K via Q8_K):
 *       |y - ref| <= 0.501 * sum_i |w_i| d(i) + (k + 64) * 2^-22 * (sum |w_i x_i| + sum |w_i| d(i))
 *       where d(i) = amax(activation block of i) / 127, i.e. the provable rounding
 *       error of the activation codes (|x - d q| <= d/2) plus f32 rounding;
 *   SIMD vs the scalar int8 kernels (identical integer sums):
 *       |y - y_scalar| <= (k + 64) * 2^-22 * (sum |w_i x_i| + sum |w_i| d(i)).
 * Attention: |out - ref| <= 1e-4 (V in [-1, 1]; outputs are convex combinations).
 * Small ops: bit-identical to cpu_ref.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "backend/backend.h"
#include "cpu/backend_cpu.h"
#include "cpu/cpu_kern.h"
#include "cpu/cpu_ref.h"
#include "cpu/pool.h"
#include "quant/quant.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }
static int irand(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

/* ---- pool ------------------------------------------------------------------ */

struct pool_probe {
    struct pool *pool;
    _Atomic int calls[64];
    int stage[64];
    int round;
    _Atomic int bad;
};

static void probe_task(void *arg, int ith, int nth)
{
    struct pool_probe *p = arg;
    atomic_fetch_add(&p->calls[ith], 1);
    for (int step = 1; step <= 3; step++) {
        p->stage[ith] = p->round * 4 + step;
        pool_barrier(p->pool);
        for (int j = 0; j < nth; j++)   /* everyone must have written this step */
            if (p->stage[j] != p->round * 4 + step)
                atomic_fetch_add(&p->bad, 1);
        pool_barrier(p->pool);
    }
}

static void test_pool_many_thread_counts(void)
{
    const int counts[] = {1, 2, 3, 5, 8, 17, 33, 64};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int n = counts[c];
        struct pool_probe *p = calloc(1, sizeof *p);
        struct glim_err err = {0};
        CHECK_EQ(pool_new(n, &p->pool, &err), GLIM_OK);
        CHECK_EQ(pool_size(p->pool), n);
        int rounds = n <= 8 ? 300 : 20;
        for (p->round = 0; p->round < rounds; p->round++)
            pool_run(p->pool, probe_task, p);
        for (int i = 0; i < n; i++)
            CHECK_EQ(atomic_load(&p->calls[i]), rounds);
        CHECK_EQ(atomic_load(&p->bad), 0);
        pool_free(p->pool);
        free(p);
    }
    pool_free(NULL);
}

static void test_pool_split_covers(void)
{
    for (int n = 0; n < 50; n++)
        for (int nth = 1; nth < 9; nth++) {
            int64_t next = 0;
            for (int i = 0; i < nth; i++) {
                int64_t r0, r1;
                pool_split(n, i, nth, &r0, &r1);
                CHECK_EQ(r0, next);
                CHECK(r1 >= r0 && r1 - r0 <= n / nth + 1);
                next = r1;
            }
            CHECK_EQ(next, n);
        }
}

/* ---- weights ------------------------------------------------------------------ */

static const uint32_t TYPES[] = {GLIM_TYPE_F32, GLIM_TYPE_F16, GLIM_TYPE_BF16, GLIM_TYPE_Q8_0,
                                 GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q6_K};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static int block_elems(uint32_t t) { return quant_traits(t)->block_elems; }
static int act_block(uint32_t t)
{
    return t == GLIM_TYPE_Q8_0 || t == GLIM_TYPE_Q4_0 ? 32 : t >= GLIM_TYPE_Q2_K && t <= GLIM_TYPE_Q8_K ? 256 : 0;
}

static uint16_t small_half(void) { return f32_to_fp16(frand(-0.02f, 0.02f)); }

/* random bytes everywhere (every code pattern occurs), sane fp16 scales */
static void *make_weight(uint32_t type, int64_t k, int64_t n, size_t *nbytes)
{
    size_t row = quant_row_bytes(type, k);
    *nbytes = row * (size_t)n;
    uint8_t *p = malloc(*nbytes);
    for (size_t i = 0; i < *nbytes; i++)
        p[i] = (uint8_t)rnd();
    int64_t nel = k * n;
    switch (type) {
    case GLIM_TYPE_F32:
        for (int64_t i = 0; i < nel; i++)
            ((float *)p)[i] = frand(-1, 1);
        break;
    case GLIM_TYPE_F16:
        for (int64_t i = 0; i < nel; i++)
            ((uint16_t *)p)[i] = f32_to_fp16(frand(-1, 1));
        break;
    case GLIM_TYPE_BF16:
        for (int64_t i = 0; i < nel; i++)
            ((uint16_t *)p)[i] = f32_to_bf16(frand(-1, 1));
        break;
    case GLIM_TYPE_Q8_0:
        for (int64_t b = 0; b < nel / 32; b++)
            ((struct block_q8_0 *)p)[b].d = small_half();
        break;
    case GLIM_TYPE_Q4_0:
        for (int64_t b = 0; b < nel / 32; b++)
            ((struct block_q4_0 *)p)[b].d = small_half();
        break;
    case GLIM_TYPE_Q4_K:
        for (int64_t b = 0; b < nel / 256; b++)
            ((struct block_q4_k *)p)[b].d = small_half(), ((struct block_q4_k *)p)[b].dmin = small_half();
        break;
    case GLIM_TYPE_Q5_K:
        for (int64_t b = 0; b < nel / 256; b++)
            ((struct block_q5_k *)p)[b].d = small_half(), ((struct block_q5_k *)p)[b].dmin = small_half();
        break;
    case GLIM_TYPE_Q6_K:
        for (int64_t b = 0; b < nel / 256; b++)
            ((struct block_q6_k *)p)[b].d = small_half();
        break;
    }
    return p;
}

static int64_t random_k(uint32_t type)
{
    int be = block_elems(type);
    if (be == 1)
        return irand(1, 700);            /* ragged SIMD tails */
    if (be == 32)
        return 32 * irand(1, 40);
    return 256 * irand(1, 5);
}

/* per-element bounds (see the top of the file) */
static void bounds(uint32_t type, const float *wf, const float *x, int64_t k, double *b_quant,
                   double *b_round)
{
    int ab = act_block(type);
    double swx = 0, swd = 0;
    for (int64_t i0 = 0; i0 < k; i0 += ab ? ab : k) {
        int64_t i1 = ab ? i0 + ab : k;
        float amax = 0;
        for (int64_t i = i0; i < i1; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        double d = ab ? amax / 127.0 : 0;
        for (int64_t i = i0; i < i1; i++) {
            swx += fabs((double)wf[i] * x[i]);
            swd += fabs((double)wf[i]) * d;
        }
    }
    *b_quant = 0.501 * swd;
    *b_round = (k + 64) * ldexp(1.0, -22) * (swx + swd) + 1e-30;
}

struct mm_case {
    uint32_t type;
    int64_t k, n;
    int n_rows;
};

static int run_mm_case(const struct mm_case *c, struct backend **bes, int n_be)
{
    size_t nbytes;
    void *wdata = make_weight(c->type, c->k, c->n, &nbytes);
    struct be_weight w = {.name = "test", .type = c->type, .k = c->k, .n = c->n, .nbytes = nbytes,
                          .host = wdata};
    float *x = malloc(sizeof(float) * (size_t)(c->k * c->n_rows));
    for (int64_t i = 0; i < c->k * c->n_rows; i++)
        x[i] = frand(-1, 1) * (i % 97 == 0 ? 8.0f : 1.0f);   /* a few outliers stress amax */
    size_t ny = (size_t)(c->n * c->n_rows);
    float *ref = malloc(sizeof(float) * ny), *y = malloc(sizeof(float) * ny);
    float *y0 = malloc(sizeof(float) * ny), *wf = malloc(sizeof(float) * (size_t)(c->k * c->n));
    cpu_ref_matmul(ref, &w, x, c->n_rows);
    quant_traits(c->type)->to_f32(wdata, wf, c->k * c->n);
    int fails = 0;
    for (int bi = 0; bi < n_be; bi++) {
        struct be_weight wb = w;
        struct glim_err err = {0};
        CHECK_EQ(bes[bi]->i->weight_init(bes[bi], &wb, &err), GLIM_OK);
        memset(y, 0xff, sizeof(float) * ny);
        bes[bi]->i->matmul(bes[bi], y, &wb, x, c->n_rows);
        if (bi == 0)
            memcpy(y0, y, sizeof(float) * ny);
        for (int r = 0; r < c->n_rows; r++)
            for (int64_t j = 0; j < c->n; j++) {
                double bq, br;
                bounds(c->type, wf + j * c->k, x + (size_t)r * c->k, c->k, &bq, &br);
                size_t o = (size_t)r * c->n + j;
                int ok = fabs((double)y[o] - ref[o]) <= bq + br &&
                         fabs((double)y[o] - y0[o]) <= br * (act_block(c->type) ? 1 : 2);
                if (!ok && fails++ < 3)
                    fprintf(stderr, "  %s %s k=%lld n=%lld rows=%d: y[%d][%lld] = %.8g, ref %.8g, "
                            "scalar %.8g (bound %.3g + %.3g)\n", bes[bi]->desc, quant_type_name(c->type),
                            (long long)c->k, (long long)c->n, c->n_rows, r, (long long)j, y[o], ref[o],
                            y0[o], bq, br);
            }
        bes[bi]->i->weight_clear(bes[bi], &wb);
    }
    free(wdata), free(x), free(ref), free(y), free(y0), free(wf);
    return fails;
}

static struct backend *bes_all[CPU_LEVEL_COUNT * 2];
static int n_bes;

static void open_backends(void)
{
    /* index 0 is the scalar level: the SIMD levels must match its integer sums */
    for (int l = 0; l < CPU_LEVEL_COUNT; l++)
        for (int t = 0; t < 2; t++) {
            if (!cpu_kern_get(l))
                continue;
            struct glim_err err = {0};
            struct backend *be = NULL;
            CHECK_EQ(backend_cpu_new_level(t == 0 ? 3 : 1, l, &be, &err), GLIM_OK);
            if (be)
                bes_all[n_bes++] = be;
        }
    for (int i = 0; i < n_bes; i++)
        printf("  backend: %s\n", bes_all[i]->desc);
}

static void test_matmul_every_type_and_level(void)
{
    const int rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 40};
    for (size_t ti = 0; ti < N_TYPES; ti++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            struct mm_case c = {TYPES[ti], random_k(TYPES[ti]), irand(1, 37), rows[ri]};
            CHECK_EQ(run_mm_case(&c, bes_all, n_bes), 0);
        }
}

static void test_matmul_tiles(void)
{
    /* more weight rows than one tile, more activation rows than one tile */
    struct mm_case c1 = {GLIM_TYPE_Q4_K, 512, 70, 67};
    struct mm_case c2 = {GLIM_TYPE_Q8_0, 96, 41, 130};
    struct mm_case c3 = {GLIM_TYPE_F16, 77, 53, 66};
    CHECK_EQ(run_mm_case(&c1, bes_all, n_bes), 0);
    CHECK_EQ(run_mm_case(&c2, bes_all, n_bes), 0);
    CHECK_EQ(run_mm_case(&c3, bes_all, n_bes), 0);
}

static void test_matmul_unaccelerated_type_falls_back(void)
{
    /* Q8_K weights have no fast kernel: the backend must give the reference's result */
    int64_t k = 256, n = 5;
    struct block_q8_k *wd = calloc((size_t)n, sizeof *wd);
    float xf[256 * 5];
    for (int i = 0; i < 256 * 5; i++)
        xf[i] = frand(-1, 1);
    cpu_quant_q8_k_ref(xf, wd, k * n);
    struct be_weight w = {.name = "q8k", .type = GLIM_TYPE_Q8_K, .k = k, .n = n, .host = wd};
    float x[256 * 2], ref[10], y[10];
    for (int i = 0; i < 512; i++)
        x[i] = frand(-1, 1);
    cpu_ref_matmul(ref, &w, x, 2);
    for (int bi = 0; bi < n_bes; bi++) {
        struct be_weight wb = w;
        bes_all[bi]->i->weight_init(bes_all[bi], &wb, NULL);
        bes_all[bi]->i->matmul(bes_all[bi], y, &wb, x, 2);
        CHECK(memcmp(y, ref, sizeof y) == 0);
    }
    free(wd);
}

/* matmul_n (several weights, one input) gives exactly what separate matmuls give: fused
 * when the weights share an activation format (Q4_K + Q6_K + Q5_K: Q8_K), one at a time
 * otherwise (F32 next to Q4_K), with 1..7 input rows and ragged output row counts. */
static void test_matmul_n_equals_separate(void)
{
    const uint32_t sets[][4] = {
        {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K},
        {GLIM_TYPE_Q4_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K},
        {GLIM_TYPE_Q8_0, GLIM_TYPE_Q4_0, GLIM_TYPE_Q8_0, GLIM_TYPE_Q8_0},
        {GLIM_TYPE_F32, GLIM_TYPE_Q4_K, GLIM_TYPE_F16, GLIM_TYPE_Q6_K},
    };
    const int64_t k = 512, ns[4] = {37, 5, 64, 19};
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        for (int n_w = 2; n_w <= 4; n_w++) {
            for (int rows = 1; rows <= 7; rows += 3) {
                void *data[4];
                size_t nb;
                struct be_weight w[4];
                float *y1[4], *y2[4], *x = malloc(sizeof(float) * (size_t)(k * rows));
                for (int64_t i = 0; i < k * rows; i++)
                    x[i] = frand(-1, 1);
                for (int i = 0; i < n_w; i++) {
                    data[i] = make_weight(sets[si][i], k, ns[i], &nb);
                    w[i] = (struct be_weight){.name = "w", .type = sets[si][i], .k = k, .n = ns[i],
                                              .nbytes = nb, .host = data[i]};
                    y1[i] = malloc(sizeof(float) * (size_t)(ns[i] * rows));
                    y2[i] = malloc(sizeof(float) * (size_t)(ns[i] * rows));
                }
                for (int bi = 0; bi < n_bes; bi++) {
                    struct backend *be = bes_all[bi];
                    if (!be->i->matmul_n)
                        continue;
                    const struct be_weight *wp[4];
                    struct be_weight wb[4];
                    for (int i = 0; i < n_w; i++) {
                        wb[i] = w[i];
                        be->i->weight_init(be, &wb[i], NULL);
                        wp[i] = &wb[i];
                        be->i->matmul(be, y1[i], &wb[i], x, rows);
                    }
                    be->i->matmul_n(be, n_w, y2, wp, x, rows);
                    for (int i = 0; i < n_w; i++)
                        CHECK(memcmp(y1[i], y2[i], sizeof(float) * (size_t)(ns[i] * rows)) == 0);
                }
                for (int i = 0; i < n_w; i++) {
                    free(data[i]);
                    free(y1[i]);
                    free(y2[i]);
                }
                free(x);
            }
        }
    }
}

/* ---- activation quantizers --------------------------------------------------------- */

static void test_quant_act_bounds(void)
{
    float x[512];
    for (int i = 0; i < 512; i++)
        x[i] = frand(-3, 3) * (i == 100 ? 20.0f : 1.0f);
    x[7] = 0.0f;
    struct block_q8_k qk[2];
    struct cpu_q8_32 q32[16];
    cpu_quant_q8_k_ref(x, qk, 512);
    cpu_quant_q8_32_ref(x, q32, 512);
    for (int i = 0; i < 512; i++) {
        const struct block_q8_k *b = &qk[i / 256];
        CHECK(b->qs[i % 256] >= -127);
        CHECK(fabsf(x[i] - b->d * b->qs[i % 256]) <= 0.501f * b->d);
        const struct cpu_q8_32 *c = &q32[i / 32];
        CHECK(fabsf(x[i] - c->d * c->qs[i % 32]) <= 0.501f * c->d);
    }
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += qk[b].qs[16 * j + i];
            CHECK_EQ(qk[b].bsums[j], s);
        }
    for (int b = 0; b < 16; b++) {
        int s = 0;
        for (int i = 0; i < 32; i++)
            s += q32[b].qs[i];
        CHECK_EQ(q32[b].sum, s);
    }
    float zero[256] = {0};
    cpu_quant_q8_k_ref(zero, qk, 256);
    CHECK(qk[0].d == 0.0f && qk[0].qs[0] == 0 && qk[0].bsums[3] == 0);
}

/* ---- attention ------------------------------------------------------------------------ */

static void fill_cache(void *c, uint32_t type, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = frand(-1, 1);
        if (type == GLIM_TYPE_F32)
            ((float *)c)[i] = v;
        else if (type == GLIM_TYPE_F16)
            ((uint16_t *)c)[i] = f32_to_fp16(v);
        else
            ((uint16_t *)c)[i] = f32_to_bf16(v);
    }
}

static int attn_case(uint32_t kv_type, int n_head, int n_head_kv, int D, int window, int p0,
                     int n_tokens, int block)
{
    int kv_dim = n_head_kv * D;
    int64_t n_slots = window > 0 ? window + n_tokens + 2 : p0 + n_tokens + 3;
    size_t esz = kv_type == GLIM_TYPE_F32 ? 4 : 2, qn = (size_t)n_tokens * n_head * D;
    void *kc = malloc(esz * n_slots * kv_dim), *vc = malloc(esz * n_slots * kv_dim);
    fill_cache(kc, kv_type, (size_t)n_slots * kv_dim);
    fill_cache(vc, kv_type, (size_t)n_slots * kv_dim);
    float *q = malloc(qn * 4), *ref = malloc(qn * 4), *out = malloc(qn * 4);
    for (size_t i = 0; i < qn; i++)
        q[i] = frand(-2, 2);
    int32_t pos[64];
    for (int t = 0; t < n_tokens; t++)
        pos[t] = p0 + t;
    struct be_attn_args a = {.out = ref, .q = q, .k_cache = kc, .v_cache = vc, .kv_type = kv_type,
                             .n_slots = n_slots, .n_tokens = n_tokens, .pos = pos, .pos_host0 = p0,
                             .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = D, .window = window,
                             .scale = 1.0f / sqrtf((float)D), .block = block};
    cpu_ref_attention(&a);
    int fails = 0;
    for (int bi = 0; bi < n_bes; bi++) {
        a.out = out;
        memset(out, 0xff, qn * 4);
        bes_all[bi]->i->attention(bes_all[bi], &a);
        for (size_t i = 0; i < qn; i++)
            if (!(fabsf(out[i] - ref[i]) <= 1e-4f) && fails++ < 3)
                fprintf(stderr, "  attn %s kv=%s H=%d/%d D=%d win=%d p0=%d T=%d block=%d: out[%zu] %g ref %g\n",
                        bes_all[bi]->desc, quant_type_name(kv_type), n_head, n_head_kv, D, window, p0,
                        n_tokens, block, i, out[i], ref[i]);
    }
    free(kc), free(vc), free(q), free(ref), free(out);
    return fails;
}

static void test_attention_vs_ref(void)
{
    const uint32_t kv_types[] = {GLIM_TYPE_F32, GLIM_TYPE_F16, GLIM_TYPE_BF16};
    const int heads[][2] = {{4, 4}, {4, 2}, {8, 1}, {6, 2}};
    const int p0s[] = {0, 3, 70, 200};
    for (int kt = 0; kt < 3; kt++)
        for (int h = 0; h < 4; h++)
            for (int pi = 0; pi < 4; pi++) {
                int D = (pi & 1) ? 40 : 64, T = 1 + (pi + h) % 5;
                CHECK_EQ(attn_case(kv_types[kt], heads[h][0], heads[h][1], D, 0, p0s[pi], T, 0), 0);
                CHECK_EQ(attn_case(kv_types[kt], heads[h][0], heads[h][1], D, 16, p0s[pi], T, 0), 0);
                CHECK_EQ(attn_case(kv_types[kt], heads[h][0], heads[h][1], D, 0, p0s[pi], T + 2, 2), 0);
            }
    /* long context: several online-softmax chunks */
    CHECK_EQ(attn_case(GLIM_TYPE_F16, 8, 2, 128, 0, 700, 3, 0), 0);
    CHECK_EQ(attn_case(GLIM_TYPE_BF16, 8, 2, 128, 300, 700, 2, 0), 0);
}

/* ---- small ops: bit-identical ------------------------------------------------------------ */

static void test_small_ops_identical(void)
{
    enum { N = 40000 };
    float *a = malloc(N * 4), *b = malloc(N * 4), *y1 = malloc(N * 4), *y2 = malloc(N * 4), *g = malloc(N * 4);
    for (int i = 0; i < N; i++)
        a[i] = frand(-4, 4), b[i] = frand(-4, 4), g[i] = frand(0.5f, 1.5f);
    struct be_weight gw = {.name = "g", .type = GLIM_TYPE_F32, .k = 1000, .n = 1, .host = g};
    int32_t pos[40];
    for (int i = 0; i < 40; i++)
        pos[i] = 5 * i + 1;
    for (int bi = 0; bi < n_bes; bi++) {
        struct backend *be = bes_all[bi];
        memcpy(y1, a, N * 4), memcpy(y2, a, N * 4);
        cpu_ref_add(y1, b, N), be->i->add(be, y2, b, N);
        CHECK(memcmp(y1, y2, N * 4) == 0);
        cpu_ref_mul_sigmoid(y1, b, N), be->i->mul_sigmoid(be, y2, b, N);
        CHECK(memcmp(y1, y2, N * 4) == 0);
        cpu_ref_swiglu(y1, a, b, N), be->i->swiglu(be, y2, a, b, N);
        CHECK(memcmp(y1, y2, N * 4) == 0);
        cpu_ref_scale_softcap(y1, N, 0.7f, 3.0f), be->i->scale_softcap(be, y2, N, 0.7f, 3.0f);
        CHECK(memcmp(y1, y2, N * 4) == 0);
        cpu_ref_scale_softcap(y1, N, 0.5f, 0.0f), be->i->scale_softcap(be, y2, N, 0.5f, 0.0f);
        CHECK(memcmp(y1, y2, N * 4) == 0);
        cpu_ref_rmsnorm(y1, a, &gw, 40, 1000, 1e-6f), be->i->rmsnorm(be, y2, a, &gw, 40, 1000, 1e-6f);
        CHECK(memcmp(y1, y2, 40000 * 4) == 0);
        cpu_ref_rmsnorm(y1, a, NULL, 1, 1000, 1e-6f), be->i->rmsnorm(be, y2, a, NULL, 1, 1000, 1e-6f);
        CHECK(memcmp(y1, y2, 1000 * 4) == 0);
        for (int neox = 0; neox < 2; neox++) {
            memcpy(y1, a, N * 4), memcpy(y2, a, N * 4);
            cpu_ref_rope(y1, 40, 8, 125 - 1, 96, pos, 10000.0f, neox);
            be->i->rope(be, y2, 40, 8, 125 - 1, 96, pos, 10000.0f, neox);
            CHECK(memcmp(y1, y2, N * 4) == 0);
            cpu_ref_rope(y1, 1, 8, 64, 64, pos + 3, 500000.0f, neox);
            be->i->rope(be, y2, 1, 8, 64, 64, pos + 3, 500000.0f, neox);
            CHECK(memcmp(y1, y2, N * 4) == 0);
        }
    }
    free(a), free(b), free(y1), free(y2), free(g);
}

static void test_levels(void)
{
    const struct cpu_features *f = cpu_features_get();
    CHECK(f->n_physical_cores >= 1);
    CHECK(f->level <= f->level_supported);
    CHECK(f->level <= CPU_LEVEL_AVX2);   /* main() capped it through GLIM_CPU_LEVEL */
    CHECK_EQ(cpu_kern_best()->level, f->level);
    CHECK(cpu_kern_get(CPU_LEVEL_SCALAR) != NULL);
    CHECK(cpu_kern_get(CPU_LEVEL_COUNT) == NULL);
    CHECK_EQ(cpu_level_from_name("AVX2"), CPU_LEVEL_AVX2);
    CHECK_EQ(cpu_level_from_name("neon9"), -1);
    struct backend *be = NULL;
    struct glim_err err = {0};
    CHECK_EQ(backend_cpu_new(0, &be, &err), GLIM_OK);
    if (be)
        CHECK(strstr(be->desc, cpu_kern_best()->name) != NULL);
    backend_free(be);
    for (int l = 0; l < CPU_LEVEL_COUNT; l++)
        printf("  level %-6s %s\n", cpu_level_name(l), cpu_kern_get(l) ? "tested" : "not on this CPU");
}

int main(void)
{
    setenv("GLIM_CPU_LEVEL", "avx2", 1);   /* read once, by the first cpu_features_get() */
    RUN(test_levels);
    RUN(test_pool_split_covers);
    RUN(test_pool_many_thread_counts);
    open_backends();
    RUN(test_quant_act_bounds);
    RUN(test_matmul_every_type_and_level);
    RUN(test_matmul_tiles);
    RUN(test_matmul_unaccelerated_type_falls_back);
    RUN(test_matmul_n_equals_separate);
    RUN(test_attention_vs_ref);
    RUN(test_small_ops_identical);
    for (int i = 0; i < n_bes; i++)
        backend_free(bes_all[i]);
    return DONE();
}
