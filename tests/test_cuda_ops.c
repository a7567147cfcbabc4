// ctest-label: gpu
/*
 * test_cuda_ops.c — every CUDA backend op against the CPU reference op
 * (src/cpu/cpu_ref.c) on random inputs and shapes. Without a CUDA build or
 * device it prints "skipped: no CUDA device" and passes.
 *
 * Tolerances (relative L2 error ||gpu - ref|| / ||ref||, and every element
 * within 10x that bound times the reference's RMS):
 *   f32 paths (exact GEMV n_rows <= 16, F32 GEMM, norms, rope, attention): 1e-5
 *   int8-activation GEMV (quantized weights, n_rows <= 16, default):     1e-2
 *   bf16 GEMM (n_rows > 16, quantized/F16/BF16 weights):                 1e-2
 * The matmul tests run twice: default backend, and exact mode (backend_cuda_set_exact).
 *   get_rows, kv_store, copy_rows: exact (dequant is bit-exact).
 * Attention with F16/BF16 caches uses the same cache values and the same
 * rounded query on both sides, so it keeps the f32 bound.
 * Attention runs on v4 (tensor cores, default for F16/BF16), with it switched off
 * (v2: backend_cuda_set_attn_tc/_dec_tc, GLIM_CUDA_ATTN_TC/_DEC_TC=0) and on v1
 * (backend_cuda_set_new / GLIM_CUDA_NEW=0); the Q4_K/Q5_K decoded-scale GEMV must be
 * bit-equal to the old one.
 * Fused ops (add_rmsnorm, attn_prep): 1e-5 against the CPU composition, caches exact,
 * and every output bit-equal to the separate CUDA ops they replace.
 * test_t16: Q4_K/Q6_K weights in 16-row tiles (backend_cuda_set_t16) give the row-major
 * layout's bits on every path that has the same arithmetic (exact GEMV, dp4a v2/v3, persistent
 * v3, bf16 GEMM, get_rows, multi-part jobs), v5 within its 1e-5.
 * GLIM_CUDA_T16=1 runs the whole file with tiles (test_k45_aux keeps row-major: no table then).
 * test_v5s: GEMV v5s (the one-row default, GLIM_CUDA_V5S=0: v5) has bits of its own: the same every
 * run, 1e-5 of v5, and tiles and row-major blocks give the same bits; with its pool (default 50 %)
 * too, whichever CTA takes a pooled tile, in CTAs of 16, 8 or 4 warps and with the first claims
 * early or late.
 */
#include "harness.h"

#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu/cpu_ref.h"
#include "quant/quant.h"

#ifndef GLIM_HAVE_CUDA
int main(void)
{
    printf("skipped: no CUDA device (built without GLIM_CUDA)\n");
    return 0;
}
#else

static struct backend *be;
static bool exact_mode;     /* backend_cuda_set_exact(be, true) is in effect */
static double q8_worst;     /* largest rel. L2 error seen on the int8-activation path */

/* src/cuda/backend_cuda.cu (not in backend.h yet) */
int backend_cuda_set_exact(struct backend *be_, bool exact);
int backend_cuda_set_new(struct backend *be_, bool on);   /* attention v2 (default) or v1 */
int backend_cuda_set_gemv(struct backend *be_, int version);              /* GEMV 2, 3 (default) or 5 */
int backend_cuda_set_gemv_persist(struct backend *be_, int ctas_per_sm);   /* persistent v3, 0 = off */
int backend_cuda_get_gemv_persist(struct backend *be_);                    /* default 4 on sm_90 */
int backend_cuda_get_gemv(struct backend *be_);                            /* 3 unless set */
int backend_cuda_get_v5_nr_rows(struct backend *be_);   /* 1: 2..16 rows of row-major Q4_K/Q6_K on v5 */
int backend_cuda_set_attn_tc(struct backend *be_, bool on);       /* v4 for n_tokens > 16 (default on) */
int backend_cuda_set_attn_dec_tc(struct backend *be_, bool on);   /* v4 for n_tokens <= 16 (default on) */
int backend_cuda_set_t16(struct backend *be_, bool on);   /* Q4_K/Q6_K uploaded in 16-row tiles (default off) */
int backend_cuda_set_glu_fuse(struct backend *be_, bool on);   /* matmul_pair_glu makes the SwiGLU copy */
int backend_cuda_set_v5s(struct backend *be_, int chunk);      /* one-row GEMVs on v5s (0: v5) */
int backend_cuda_get_v5s(struct backend *be_);                 /* 4 (HBM < 4 TB/s) or 0 unless set */
int backend_cuda_set_v5s_pool(struct backend *be_, int pct);   /* v5s's last pct % of tiles claimed at run time */
int backend_cuda_get_v5s_pool(struct backend *be_);            /* 50 unless set */
int backend_cuda_set_v5s_ahead(struct backend *be_, int n);   /* v5s's pool claims ahead of need */
int backend_cuda_get_v5s_ahead(struct backend *be_);           /* 2 unless set */
int backend_cuda_set_v5s_warps(struct backend *be_, int warps); /* v5s's warps a CTA: 4, 8 or 16 */
int backend_cuda_get_v5s_warps(struct backend *be_);           /* 16 unless set */
int backend_cuda_set_v5_mix(struct backend *be_, int on);     /* Q4_K and Q6_K parts in one v5/v5s launch */
long backend_cuda_glu_used(struct backend *be_);                /* matmuls that took that copy */
int backend_cuda_set_prep_fold(struct backend *be_, bool on);  /* matmul_attn_prep: the GEMV runs attn_prep */
long backend_cuda_prep_used(struct backend *be_);              /* ... times it did */
int backend_cuda_set_gate_side(struct backend *be_, int ctas_per_sm);   /* the gate GEMV on a side stream */
int backend_cuda_get_gate_side(struct backend *be_);
long backend_cuda_side_used(struct backend *be_);
int backend_cuda_set_gate_fold(struct backend *be_, bool on);   /* attention's combine quantizes Wo's gated input */
int backend_cuda_get_gate_fold(struct backend *be_);
int backend_cuda_set_norm_scratch(struct backend *be_, bool on);   /* the fused norms leave o and h unwritten */
int backend_cuda_get_norm_scratch(struct backend *be_);
long backend_cuda_att_used(struct backend *be_);
int backend_cuda_set_attn_short(struct backend *be_, bool on);   /* attn_short.cu at short contexts (default on) */
int backend_cuda_set_short_poll(struct backend *be_, bool on);   /* ... polling the side gate's flag (default on) */
long backend_cuda_short_used(struct backend *be_);               /* attentions it took */
int backend_cuda_attention_prep(struct backend *be_, const struct be_attn_prep_args *p,
                                const struct be_attn_args *a);  /* attention v4 doing attn_prep: 1 = ran */
int backend_cuda_rope_table(struct backend *be_, float *cs, const int32_t *pos, int n_tokens, int n_rot,
                            float base);                        /* the rope_table op; -1: not CUDA */
#define DT_Q6_K_SOA 0x102   /* src/cuda/cuda_util.cuh enum cuda_dev_type */
#define DT_Q4_K_T16 0x103
#define DT_Q6_K_T16 0x104
/* the newest attention kernel the tests enable (older ones run where it does not apply) */
enum { ATTN_V1 = 1, ATTN_V2 = 2, ATTN_V4 = 4 };
static int attn_path = ATTN_V4;
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rndf(void)   /* uniform in [-1, 1) */
{
    return (float)(rnd() % 2000001) / 1000000.0f - 1.0f;
}

static int rndi(int lo, int hi)   /* inclusive */
{
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

static float *rand_vec(int64_t n, float amp)
{
    float *v = malloc((size_t)n * sizeof(float) + 16);
    for (int64_t i = 0; i < n; i++)
        v[i] = amp * rndf();
    return v;
}

static void *to_dev(const void *h, size_t nbytes)
{
    struct glim_err err = {0};
    void *d = be->i->alloc(be, nbytes ? nbytes : 4);
    if (!d)
        return NULL;
    if (nbytes && be->i->upload(be, d, h, nbytes, &err) != GLIM_OK)
        fprintf(stderr, "upload: %s\n", err.msg);
    return d;
}

static void from_dev(void *h, const void *d, size_t nbytes)
{
    struct glim_err err = {0};
    int rc = be->i->download(be, h, d, nbytes, &err);
    CHECK_EQ(rc, GLIM_OK);
    if (rc != GLIM_OK)
        fprintf(stderr, "download: %s\n", err.msg);
}

static double last_rel;   /* rel. L2 error of the last close_enough call */

/* relative L2 error plus a per-element bound; NaN never passes */
static bool close_enough(const float *got, const float *ref, int64_t n, double tol, const char *what)
{
    double num = 0, den = 0, worst = 0;
    int64_t worst_i = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        if (got[i] != got[i]) {
            fprintf(stderr, "%s: NaN at %lld\n", what, (long long)i);
            return false;
        }
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > worst) {
            worst = fabs(d);
            worst_i = i;
        }
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    last_rel = rel;
    double rms = n ? sqrt(den / n) : 0;
    bool ok = rel <= tol && worst <= 10 * tol * (rms > 0 ? rms : 1);
    if (!ok)
        fprintf(stderr, "%s: rel L2 %.3g (tol %.1g), worst |d| %.3g at %lld (got %g want %g)\n", what, rel, tol,
                worst, (long long)worst_i, got[worst_i], ref[worst_i]);
    return ok;
}

/* With the default GEMV (v3, sm_80+) one activation row of tiled Q4_K/Q6_K weights runs on v5
 * (gemv_mma.cu cuda_gemv5), whose sums match v2's, or a matmul of other parts', to float order
 * only: true when the GEMV version ver does that for dw (GLIM_CUDA_T16=1 runs the file on tiles) */
static bool v5_takes(const struct be_weight *dw, int n_rows, int ver)
{
    bool tiled = dw->dev_type == DT_Q4_K_T16 || dw->dev_type == DT_Q6_K_T16;
    /* 2..16 rows: row-major Q4_K/Q6_K go to v5 too (backend_cuda_get_v5_nr_rows), whose split
     * depends on the job's other parts */
    if (n_rows >= 2 && n_rows <= 16 && !exact_mode && backend_cuda_get_v5_nr_rows(be) == 1 &&
        (dw->dev_type == GLIM_TYPE_Q4_K || dw->dev_type == DT_Q6_K_SOA))
        return true;
    if (n_rows != 1 || exact_mode || !tiled)
        return false;
    if (ver == 5)
        return true;
    int cur = backend_cuda_get_gemv(be);
    if (ver != 3 || backend_cuda_set_gemv(be, 5) != GLIM_OK)
        return false;
    CHECK_EQ(backend_cuda_set_gemv(be, cur), GLIM_OK);
    return true;
}

/* ---- weights ---- */

static const uint32_t TYPES[] = {GLIM_TYPE_F32,  GLIM_TYPE_F16,  GLIM_TYPE_BF16, GLIM_TYPE_Q8_0,
                                 GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q6_K};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])

/* host weight of random values quantized with the reference quantizer */
static struct be_weight make_weight(uint32_t type, int64_t k, int64_t n)
{
    const struct quant_traits *qt = quant_traits(type);
    struct be_weight w = {0};
    w.name = "test";
    w.type = type;
    w.k = k;
    w.n = n;
    w.nbytes = quant_row_bytes(type, k) * (size_t)n;
    void *h = malloc(w.nbytes);
    float *f = rand_vec(k, 1.0f);
    for (int64_t r = 0; r < n; r++) {
        for (int64_t i = 0; i < k; i++)
            f[i] = rndf() * (1.0f + (float)(r % 3));
        qt->from_f32(f, (uint8_t *)h + r * quant_row_bytes(type, k), k);
    }
    free(f);
    w.host = h;
    w.dev = (void *)h;
    w.dev_type = type;
    return w;
}

/* n device weights made from make_weight's host weights: cleared (a failed init left dev NULL),
 * and the host values freed */
static void weights_free(struct be_weight *dw, struct be_weight *hw, int n)
{
    for (int i = 0; i < n; i++) {
        be->i->weight_clear(be, &dw[i]);
        free((void *)hw[i].host);
    }
}

/* weight types that take the int8-activation (dp4a) GEMV unless exact */
static bool is_q8_type(uint32_t type)
{
    return type == GLIM_TYPE_Q8_0 || type == GLIM_TYPE_Q4_0 || type == GLIM_TYPE_Q4_K ||
           type == GLIM_TYPE_Q5_K || type == GLIM_TYPE_Q6_K;
}

/* GLIM_CUDA_PREP_FOLD=1: the backend was created with attn_prep folded into the q/k/v GEMV */
static bool prep_env(void)
{
    const char *e = getenv("GLIM_CUDA_PREP_FOLD");
    return e && strcmp(e, "1") == 0;
}

/* GLIM_CUDA_T16=1: the backend was created with the T16 layout on */
static bool t16_env(void)
{
    const char *e = getenv("GLIM_CUDA_T16");
    return e && strcmp(e, "1") == 0;
}

static int64_t rand_k(uint32_t type)
{
    int be_ = quant_traits(type)->block_elems;
    if (be_ == 1)
        return rnd() % 3 == 0 ? rndi(1, 300) : 8 * rndi(1, 200);   /* ragged rows for plain types */
    return (int64_t)be_ * rndi(1, be_ == 256 ? 12 : 40);
}

static void check_matmul(uint32_t type, int64_t k, int64_t n, int n_rows, int x_off)
{
    struct glim_err err = {0};
    struct be_weight hw = make_weight(type, k, n), dw = hw;
    int rc = be->i->weight_init(be, &dw, &err);
    CHECK_EQ(rc, GLIM_OK);
    if (rc != GLIM_OK) {
        fprintf(stderr, "weight_init: %s\n", err.msg);
        free((void *)hw.host);
        return;
    }
    float *x = rand_vec((int64_t)n_rows * k + x_off, 1.0f);
    float *ref = malloc((size_t)n_rows * n * sizeof(float)), *got = malloc((size_t)n_rows * n * sizeof(float));
    cpu_ref_matmul(ref, &hw, x + x_off, n_rows);
    float *dx = to_dev(x, ((size_t)n_rows * k + x_off) * sizeof(float));
    float *dy = be->i->alloc(be, (size_t)n_rows * n * sizeof(float));
    be->i->matmul(be, dy, &dw, dx + x_off, n_rows);
    from_dev(got, dy, (size_t)n_rows * n * sizeof(float));
    bool q8 = !exact_mode && n_rows <= 16 && is_q8_type(type);
    double tol = q8 ? 1e-2 : (n_rows <= 16 || type == GLIM_TYPE_F32) ? 1e-5 : 1e-2;
    char what[128];
    snprintf(what, sizeof what, "matmul %s k=%lld n=%lld rows=%d off=%d", quant_type_name(type), (long long)k,
             (long long)n, n_rows, x_off);
    CHECK(close_enough(got, ref, (int64_t)n_rows * n, tol, what));
    if (q8 && last_rel > q8_worst)
        q8_worst = last_rel;
    be->i->release(be, dx);
    be->i->release(be, dy);
    be->i->weight_clear(be, &dw);
    free(x);
    free(ref);
    free(got);
    free((void *)hw.host);
}

static void test_matmul_all_types(void)
{
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int n_rows = 1; n_rows <= 40; n_rows++)
            check_matmul(TYPES[ti], rand_k(TYPES[ti]), rndi(1, 300), n_rows, 0);
}

static void test_matmul_exact(void)
{
    CHECK_EQ(backend_cuda_set_exact(be, true), GLIM_OK);
    exact_mode = true;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int n_rows = 1; n_rows <= 17; n_rows += (n_rows < 4 ? 1 : 4))
            check_matmul(TYPES[ti], rand_k(TYPES[ti]), rndi(1, 300), n_rows, rndi(0, 1) * 3);
    check_matmul(GLIM_TYPE_Q4_K, 6656, 259, 1, 0);
    check_matmul(GLIM_TYPE_Q6_K, 6656, 130, 9, 1);
    CHECK_EQ(backend_cuda_set_exact(be, false), GLIM_OK);
    exact_mode = false;
}

/* every quantized type, 1..16 rows, ragged N (not a multiple of the rows per block), K up to 12 super-blocks */
static void test_matmul_q8(void)
{
    static const uint32_t QT[] = {GLIM_TYPE_Q8_0, GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q6_K};
    for (int ti = 0; ti < 5; ti++)
        for (int n_rows = 1; n_rows <= 16; n_rows++)
            check_matmul(QT[ti], rand_k(QT[ti]), rndi(1, 300), n_rows, rndi(0, 3));
    /* Muse Glimmer row lengths, N a multiple of 8 and not, misaligned x */
    check_matmul(GLIM_TYPE_Q4_K, 6656, 2048 + 7, 1, 0);
    check_matmul(GLIM_TYPE_Q5_K, 6656, 4104, 2, 1);
    check_matmul(GLIM_TYPE_Q6_K, 19968, 263, 3, 0);
    check_matmul(GLIM_TYPE_Q4_K, 19968, 40, 16, 2);
    check_matmul(GLIM_TYPE_Q8_0, 6656, 4099, 5, 0);
    printf("  int8-activation GEMV: worst rel. L2 error %.3g (tol 1e-2)\n", q8_worst);
}

/* Q4_K/Q5_K with the decoded-scale table (be_weight.aux, default) must give the same
 * bits as without it (same float ops, scales read from elsewhere); also the other
 * ops that read the weight (get_rows, bf16 GEMM for > 16 rows) ignore the table. */
static void check_k45_aux(uint32_t type, int64_t k, int64_t n, int n_rows)
{
    struct glim_err err = {0};
    struct be_weight hw = make_weight(type, k, n), with = hw, without = hw;
    CHECK_EQ(backend_cuda_set_t16(be, false), GLIM_OK);   /* the table is for the row-major blocks */
    CHECK_EQ(backend_cuda_set_new(be, false), GLIM_OK);
    CHECK_EQ(be->i->weight_init(be, &without, &err), GLIM_OK);
    CHECK_EQ(backend_cuda_set_new(be, true), GLIM_OK);
    CHECK_EQ(be->i->weight_init(be, &with, &err), GLIM_OK);
    CHECK_EQ(backend_cuda_set_t16(be, t16_env()), GLIM_OK);
    CHECK(without.aux == NULL && with.aux != NULL);
    float *x = rand_vec((int64_t)n_rows * k, 1.0f);
    size_t y_bytes = (size_t)n_rows * n * sizeof(float);
    float *a = malloc(y_bytes), *b = malloc(y_bytes), *ref = malloc(y_bytes);
    float *dx = to_dev(x, (size_t)n_rows * k * sizeof(float)), *dy = be->i->alloc(be, y_bytes);
    be->i->matmul(be, dy, &with, dx, n_rows);
    from_dev(a, dy, y_bytes);
    be->i->matmul(be, dy, &without, dx, n_rows);
    from_dev(b, dy, y_bytes);
    if (n_rows <= 16)   /* the dp4a GEMV; more rows run the bf16 GEMM on the same blocks */
        CHECK(memcmp(a, b, y_bytes) == 0);
    cpu_ref_matmul(ref, &hw, x, n_rows);
    char what[128];
    snprintf(what, sizeof what, "matmul aux %s k=%lld n=%lld rows=%d", quant_type_name(type), (long long)k,
             (long long)n, n_rows);
    CHECK(close_enough(a, ref, (int64_t)n_rows * n, 1e-2, what));
    /* get_rows reads the GGUF blocks in front of the table: still exact */
    int32_t ids[3] = {0, (int32_t)(n / 2), (int32_t)(n - 1)};
    int32_t *dids = to_dev(ids, sizeof ids);
    float *drows = be->i->alloc(be, 3 * k * sizeof(float));
    float *grows = malloc(3 * k * sizeof(float)), *rrows = malloc(3 * k * sizeof(float));
    be->i->get_rows(be, drows, &with, dids, 3);
    from_dev(grows, drows, 3 * k * sizeof(float));
    cpu_ref_get_rows(rrows, &hw, ids, 3);
    CHECK(memcmp(grows, rrows, 3 * k * sizeof(float)) == 0);
    be->i->release(be, dx), be->i->release(be, dy), be->i->release(be, dids), be->i->release(be, drows);
    be->i->weight_clear(be, &with), be->i->weight_clear(be, &without);
    CHECK(with.aux == NULL);
    free(x), free(a), free(b), free(ref), free(grows), free(rrows), free((void *)hw.host);
}

static void test_k45_aux(void)
{
    static const uint32_t QT[] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q5_K};
    for (int ti = 0; ti < 2; ti++) {
        for (int n_rows = 1; n_rows <= 16; n_rows += 1 + n_rows / 4)
            check_k45_aux(QT[ti], 256 * rndi(1, 30), rndi(1, 300), n_rows);
        check_k45_aux(QT[ti], 6656, 4224 + 8, 1);   /* 2 weight rows per warp (Q4_K) */
        check_k45_aux(QT[ti], 6656, 4224 + 3, 3);
        check_k45_aux(QT[ti], 19968, 64, 2);
        check_k45_aux(QT[ti], 512, 40, 17);         /* bf16 GEMM path */
    }
}

/* the int8-activation tests again without the new kernels (GLIM_CUDA_NEW=0) */
static void test_matmul_q8_old(void)
{
    CHECK_EQ(backend_cuda_set_new(be, false), GLIM_OK);
    test_matmul_q8();
    CHECK_EQ(backend_cuda_set_new(be, true), GLIM_OK);
}

/* GEMV v3 (deep loads, several weights per launch) must give v2's bits: the same slot
 * arithmetic in the same order per lane. */
static void check_vs_v2(int ver, uint32_t type, int64_t k, int64_t n, int n_rows)
{
    struct glim_err err = {0};
    struct be_weight hw = make_weight(type, k, n), dw = hw;
    CHECK_EQ(be->i->weight_init(be, &dw, &err), GLIM_OK);
    float *x = rand_vec((int64_t)n_rows * k, 1.0f);
    size_t y_bytes = (size_t)n_rows * n * sizeof(float);
    float *a = malloc(y_bytes), *b = malloc(y_bytes), *ref = malloc(y_bytes);
    float *dx = to_dev(x, (size_t)n_rows * k * sizeof(float)), *dy = be->i->alloc(be, y_bytes);
    CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
    be->i->matmul(be, dy, &dw, dx, n_rows);
    from_dev(a, dy, y_bytes);
    CHECK_EQ(backend_cuda_set_gemv(be, 2), GLIM_OK);
    be->i->matmul(be, dy, &dw, dx, n_rows);
    from_dev(b, dy, y_bytes);
    CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
    char what[128];
    snprintf(what, sizeof what, "v%d == v2 %s k=%lld n=%lld rows=%d", ver, quant_type_name(type), (long long)k,
             (long long)n, n_rows);
    if (v5_takes(&dw, n_rows, ver)) {
        CHECK(close_enough(a, b, (int64_t)n_rows * n, 1e-5, what));
    } else {
        if (memcmp(a, b, y_bytes) != 0)
            fprintf(stderr, "FAIL %s\n", what);
        CHECK(memcmp(a, b, y_bytes) == 0);
    }
    cpu_ref_matmul(ref, &hw, x, n_rows);
    if ((int64_t)n_rows * n >= 16)   /* a relative L2 error over a handful of outputs is noise */
        CHECK(close_enough(a, ref, (int64_t)n_rows * n, 1e-2, what));
    be->i->release(be, dx), be->i->release(be, dy), be->i->weight_clear(be, &dw);
    free(x), free(a), free(b), free(ref), free((void *)hw.host);
}

static void test_gemv_v3(void)   /* v3 runs one activation row (more rows take v2) */
{
    static const uint32_t QT[] = {GLIM_TYPE_Q8_0, GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q6_K};
    int persist0 = backend_cuda_get_gemv_persist(be);   /* the default: restored at the end */
    CHECK(persist0 >= 0);
    CHECK_EQ(backend_cuda_set_gemv_persist(be, 0), GLIM_OK);   /* first the plain v3 */
    for (int ti = 0; ti < 5; ti++) {
        for (int i = 0; i < 4; i++)
            check_vs_v2(3, QT[ti], rand_k(QT[ti]), rndi(1, 300), 1);
        /* more slots than one batch of loads (K = 19968: 624 slots of 32), 2 rows per warp */
        check_vs_v2(3, QT[ti], 19968, rndi(1, 70), 1);
        check_vs_v2(3, QT[ti], 6656, 4224 + 5, 1);
        check_vs_v2(3, QT[ti], 4096, 130, 1);
    }
    /* rows of 1..40 super-blocks (odd block counts: Q6_K's 2-byte scales start mid-word), more
     * rows than the grid has warps */
    for (int i = 0; i < 6; i++) {
        check_vs_v2(3, GLIM_TYPE_Q4_K, 256 * rndi(1, 40), rndi(1, 3000), 1);
        check_vs_v2(3, GLIM_TYPE_Q6_K, 256 * rndi(1, 40), rndi(1, 3000), 1);
    }
    check_vs_v2(3, GLIM_TYPE_Q6_K, 256 * 17, 2111, 1);
    check_vs_v2(3, GLIM_TYPE_Q4_K, 256 * 33, 1, 1);
    /* the persistent v3 (one weight kind per kernel): more tasks than the grid's warps, 1 and
     * 2 rows per warp, and a kind it does not take (Q5_K: the plain v3) */
    for (int k = 1; k <= 4; k += 3) {
        CHECK_EQ(backend_cuda_set_gemv_persist(be, k), GLIM_OK);
        check_vs_v2(3, GLIM_TYPE_Q4_K, 6656, 4224 + 5, 1);
        check_vs_v2(3, GLIM_TYPE_Q4_K, 256 * rndi(1, 40), rndi(1, 3000), 1);
        check_vs_v2(3, GLIM_TYPE_Q6_K, 256 * rndi(1, 40), rndi(1, 3000), 1);
        check_vs_v2(3, GLIM_TYPE_Q8_0, 32 * rndi(1, 300), rndi(1, 3000), 1);
        check_vs_v2(3, GLIM_TYPE_Q5_K, 256 * rndi(1, 12), rndi(1, 300), 1);
    }
    CHECK_EQ(backend_cuda_set_gemv_persist(be, persist0), GLIM_OK);
}

/* GEMV v5 (tensor cores, Q4_K and Q6_K; gemv_mma.cu): n weights of k sharing x in one matmul_n
 * (types: NULL = all Q4_K; other types go to v3 in the same call), each Q4_K/Q6_K output close to
 * v2's (another float order: 1e-5 relative) and to the CPU's, the others bit-equal to v2's, and a
 * second run bit-equal to the first (the split-K sums are added in chunk order whatever the timing) */
static void check_v5(int n, const int64_t *ns, int64_t k, const uint32_t *types)
{
    struct glim_err err = {0};
    struct be_weight hw[4], dw[4];
    const struct be_weight *wp[4];
    float *dy[4];
    float *x = rand_vec(k, 1.0f);
    float *dx = to_dev(x, (size_t)k * sizeof(float));
    for (int i = 0; i < n; i++) {
        hw[i] = make_weight(types ? types[i] : GLIM_TYPE_Q4_K, k, ns[i]), dw[i] = hw[i];
        CHECK_EQ(be->i->weight_init(be, &dw[i], &err), GLIM_OK);
        wp[i] = &dw[i];
        dy[i] = be->i->alloc(be, (size_t)ns[i] * sizeof(float));
    }
    CHECK_EQ(backend_cuda_set_gemv(be, 5), GLIM_OK);
    be->i->matmul_n(be, n, dy, wp, dx, 1);
    for (int i = 0; i < n; i++) {
        size_t yb = (size_t)ns[i] * sizeof(float);
        float *a = malloc(yb), *a2 = malloc(yb), *b = malloc(yb), *ref = malloc(yb);
        from_dev(a, dy[i], yb);
        be->i->matmul_n(be, n, dy, wp, dx, 1);   /* again: the same bits */
        from_dev(a2, dy[i], yb);
        CHECK(memcmp(a, a2, yb) == 0);
        CHECK_EQ(backend_cuda_set_gemv(be, 2), GLIM_OK);
        be->i->matmul(be, dy[i], &dw[i], dx, 1);
        from_dev(b, dy[i], yb);
        CHECK_EQ(backend_cuda_set_gemv(be, 5), GLIM_OK);
        char what[128];
        snprintf(what, sizeof what, "v5 ~ v2 part %d/%d %s k=%lld n=%lld", i, n, quant_type_name(hw[i].type),
                 (long long)k, (long long)ns[i]);
        if (hw[i].type == GLIM_TYPE_Q4_K || hw[i].type == GLIM_TYPE_Q6_K)
            CHECK(close_enough(a, b, ns[i], 1e-5, what));
        else
            CHECK(memcmp(a, b, yb) == 0);
        cpu_ref_matmul(ref, &hw[i], x, 1);
        if (ns[i] >= 16)
            CHECK(close_enough(a, ref, ns[i], 1e-2, what));
        free(a), free(a2), free(b), free(ref);
    }
    CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
    for (int i = 0; i < n; i++)
        be->i->release(be, dy[i]), be->i->weight_clear(be, &dw[i]), free((void *)hw[i].host);
    be->i->release(be, dx);
    free(x);
}

static void test_gemv_v5(void)
{
    if (backend_cuda_set_gemv(be, 5) != GLIM_OK) {   /* int8 mma: sm_80 and later */
        fprintf(stderr, "  GEMV v5 needs sm_80: skipped\n");
        return;
    }
    CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
    /* ragged tiles (n % 16), one and many chunks per row (k = 256: one super-block; k = 19968
     * with few tiles: dozens of chunks), more tasks than the grid has warps, 1-4 parts */
    for (int i = 0; i < 6; i++) {
        int64_t n1[1] = {rndi(1, 300)};
        check_v5(1, n1, 256 * rndi(1, 40), NULL);
    }
    int64_t a[1] = {17}, b[1] = {70000}, c[3] = {4096, 256, 4096}, d[2] = {19968, 19968}, e[1] = {6656 + 5};
    check_v5(1, a, 19968, NULL);
    check_v5(1, b, 256, NULL);
    check_v5(1, b, 512, NULL);
    check_v5(3, c, 6656, NULL);
    check_v5(2, d, 6656, NULL);
    check_v5(1, e, 19968, NULL);
    /* Q6_K: the same shapes; the output head's shape (cut: 20000 rows) */
    static const uint32_t q6[1] = {GLIM_TYPE_Q6_K};
    for (int i = 0; i < 4; i++) {
        int64_t n1[1] = {rndi(1, 300)};
        check_v5(1, n1, 256 * rndi(1, 40), q6);
    }
    int64_t f[1] = {20000};
    check_v5(1, a, 19968, q6);
    check_v5(1, e, 19968, q6);
    check_v5(1, f, 6656, q6);
    check_v5(1, b, 256, q6);
    /* a Q4_K_M layer's q/k/v/gate: one launch per type; and a Q8_0 part, which takes v3 */
    int64_t qkvg[4] = {4096, 256, 256, 4096};
    static const uint32_t mix[4] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K};
    check_v5(4, qkvg, 6656, mix);
    /* ... and in one launch (GLIM_CUDA_V5_MIX), on v5s and on plain v5; a Q6_K part first */
    int c0 = backend_cuda_get_v5s(be);
    static const uint32_t mix6[3] = {GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K};
    int64_t n6[3] = {rndi(1, 600), 256 + 7, rndi(1, 3000)};
    CHECK_EQ(backend_cuda_set_v5_mix(be, 1), GLIM_OK);
    for (int v5s = 0; v5s < 2; v5s++) {
        CHECK_EQ(backend_cuda_set_v5s(be, v5s ? (c0 ? c0 : 4) : 0), GLIM_OK);
        check_v5(4, qkvg, 6656, mix);
        check_v5(3, n6, 256 * rndi(1, 30), mix6);
    }
    CHECK_EQ(backend_cuda_set_v5_mix(be, 0), GLIM_OK);
    CHECK_EQ(backend_cuda_set_v5s(be, c0), GLIM_OK);
    int64_t q8n[2] = {300, 77};
    static const uint32_t mix8[2] = {GLIM_TYPE_Q8_0, GLIM_TYPE_Q4_K};
    check_v5(2, q8n, 4096, mix8);
}

/* matmul_n: weights sharing x in one launch, each output equal to its own matmul */
static void check_matmul_n(int n, const uint32_t *types, const int64_t *ns, int64_t k, int n_rows)
{
    struct glim_err err = {0};
    struct be_weight hw[4], dw[4];
    const struct be_weight *wp[4];
    float *dy[4], *ysep[4], *y[4];
    float *x = rand_vec((int64_t)n_rows * k, 1.0f);
    float *dx = to_dev(x, (size_t)n_rows * k * sizeof(float));
    for (int i = 0; i < n; i++) {
        hw[i] = make_weight(types[i], k, ns[i]), dw[i] = hw[i];
        CHECK_EQ(be->i->weight_init(be, &dw[i], &err), GLIM_OK);
        wp[i] = &dw[i];
        dy[i] = be->i->alloc(be, (size_t)n_rows * ns[i] * sizeof(float));
        ysep[i] = malloc((size_t)n_rows * ns[i] * sizeof(float));
        y[i] = malloc((size_t)n_rows * ns[i] * sizeof(float));
        be->i->matmul(be, dy[i], &dw[i], dx, n_rows);
        from_dev(ysep[i], dy[i], (size_t)n_rows * ns[i] * sizeof(float));
    }
    be->i->matmul_n(be, n, dy, wp, dx, n_rows);
    for (int i = 0; i < n; i++) {
        size_t yb = (size_t)n_rows * ns[i] * sizeof(float);
        from_dev(y[i], dy[i], yb);
        bool v5 = v5_takes(&dw[i], n_rows, backend_cuda_get_gemv(be));   /* then float order only */
        CHECK(v5 ? close_enough(y[i], ysep[i], n_rows * ns[i], 1e-5, "matmul_n ~ matmul (v5)")
                 : memcmp(y[i], ysep[i], yb) == 0);
        float *y2 = malloc(yb);   /* the default GEMV (v3 for one row) == v2 */
        CHECK_EQ(backend_cuda_set_gemv(be, 2), GLIM_OK);
        be->i->matmul(be, dy[i], &dw[i], dx, n_rows);
        CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
        from_dev(y2, dy[i], yb);
        CHECK(v5 ? close_enough(y[i], y2, n_rows * ns[i], 1e-5, "matmul_n ~ v2 (v5)") : memcmp(y[i], y2, yb) == 0);
        free(y2);
        float *ref = malloc(yb);
        cpu_ref_matmul(ref, &hw[i], x, n_rows);
        char what[128];
        snprintf(what, sizeof what, "matmul_n part %d/%d %s k=%lld n=%lld rows=%d", i, n, quant_type_name(types[i]),
                 (long long)k, (long long)ns[i], n_rows);
        CHECK(close_enough(y[i], ref, (int64_t)n_rows * ns[i], 1e-2, what));
        free(ref);
        be->i->release(be, dy[i]), be->i->weight_clear(be, &dw[i]);
        free(ysep[i]), free(y[i]), free((void *)hw[i].host);
    }
    be->i->release(be, dx);
    free(x);
}

static void test_matmul_n(void)
{
    /* q, k, v, gate of the 30B shapes (Q4_K_M: v in Q6_K), ragged row counts */
    const uint32_t qkvg[4] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K};
    const int64_t n_qkvg[4] = {4096 + 3, 256, 256 + 1, 4224 + 9};
    for (int nr = 1; nr <= 16; nr += 5)
        check_matmul_n(4, qkvg, n_qkvg, 6656, nr);
    const uint32_t gate_up[2] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K};   /* one kind: the persistent v3 */
    const int64_t n_gate_up[2] = {4224 + 7, 4224 + 7};
    int persist0 = backend_cuda_get_gemv_persist(be);
    CHECK_EQ(backend_cuda_set_gemv_persist(be, 0), GLIM_OK);
    check_matmul_n(2, gate_up, n_gate_up, 512, 1);   /* plain v3 */
    CHECK_EQ(backend_cuda_set_gemv_persist(be, 2), GLIM_OK);
    check_matmul_n(2, gate_up, n_gate_up, 512, 1);
    check_matmul_n(4, qkvg, n_qkvg, 6656, 1);   /* Q4_K then Q6_K parts: the two-kind persistent v3 */
    CHECK_EQ(backend_cuda_set_gemv_persist(be, 0), GLIM_OK);
    check_matmul_n(4, qkvg, n_qkvg, 6656, 1);   /* mixed kinds, plain v3 */
    CHECK_EQ(backend_cuda_set_gemv_persist(be, persist0), GLIM_OK);
    const uint32_t k5[3] = {GLIM_TYPE_Q5_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K};
    const int64_t n_k5[3] = {77, 130, 5};
    check_matmul_n(3, k5, n_k5, 512, 2);
    const uint32_t plain[2] = {GLIM_TYPE_Q8_0, GLIM_TYPE_Q4_0};
    const int64_t n_plain[2] = {300, 41};
    check_matmul_n(2, plain, n_plain, 96, 3);
    /* mixed activation layouts or > 16 rows: one matmul each */
    const uint32_t mixed[3] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q8_0, GLIM_TYPE_F16};
    const int64_t n_mixed[3] = {64, 65, 66};
    check_matmul_n(3, mixed, n_mixed, 256, 1);
    check_matmul_n(2, qkvg, n_qkvg, 512, 17);
}

/* ---- T16: Q4_K/Q6_K in 16-row tiles (CUDA_DT_Q4_K_T16 / _Q6_K_T16, quant_t16_repack) ----
 * Every reader of the tiles shares the row-major readers' arithmetic, so a matmul or get_rows
 * of the same weight in both layouts must give the same bits; the padded rows of the last tile
 * (n % 16) must not show. */

/* weight_init of hw into *dw with the T16 layout on or off; GLIM_OK or the failure (checked) */
static int init_layout(struct be_weight *dw, const struct be_weight *hw, bool t16)
{
    struct glim_err err = {0};
    *dw = *hw;
    CHECK_EQ(backend_cuda_set_t16(be, t16), GLIM_OK);
    int rc = be->i->weight_init(be, dw, &err);
    CHECK_EQ(backend_cuda_set_t16(be, t16_env()), GLIM_OK);
    CHECK_EQ(rc, GLIM_OK);
    if (rc != GLIM_OK) {
        fprintf(stderr, "weight_init (t16 %d): %s\n", t16, err.msg);
        return rc;
    }
    if (t16) {
        uint32_t want = hw->type == GLIM_TYPE_Q4_K ? DT_Q4_K_T16 : hw->type == GLIM_TYPE_Q6_K ? DT_Q6_K_T16 : 0;
        if (want)
            CHECK_EQ(dw->dev_type, want);
        else
            CHECK(dw->dev_type < 0x103);   /* other types keep their layout */
        if (want)
            CHECK(dw->aux == NULL);         /* no decoded-scale table for tiles */
    }
    return rc;
}

/* one weight of type, k x n, times n_rows rows: T16 == row-major bit for bit (default path,
 * and exact mode for <= 16 rows), close to the CPU; get_rows of the first, last and random rows */
/* The GEMV version under which the row-major weights give the tiled run's bits, 0 = the same:
 * with the default v3 (sm_80+) one activation row of tiles goes to v5 (gemv_mma.cu cuda_gemv5),
 * so the row-major twin runs v5 too (v5 on tiles and on rows: same arithmetic, same order). */
static int t16_v5_twin(int n_rows, bool exact)
{
    if (n_rows != 1 || exact || backend_cuda_get_gemv(be) != 3)
        return 0;
    if (backend_cuda_set_gemv(be, 5) != GLIM_OK)
        return 0;   /* below sm_80: v3 reads the tiles */
    CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
    return 5;
}

/* 2..16 activation rows of Q4_K/Q6_K tiles run on the tensor cores (v5, sm_80+, unless
 * GLIM_CUDA_V5_NR=0), whose sums differ from v2's on rows in float order only */
static bool t16_v5_nr(uint32_t type, int n_rows, bool exact)
{
    const char *e = getenv("GLIM_CUDA_V5_NR");
    if ((e && atoi(e) <= 0) || (type != GLIM_TYPE_Q4_K && type != GLIM_TYPE_Q6_K) || n_rows < 2 || n_rows > 16 ||
        exact)
        return false;
    int ver = backend_cuda_get_gemv(be);
    if (backend_cuda_set_gemv(be, 5) != GLIM_OK)
        return false;   /* below sm_80: v2 */
    CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
    return true;
}

static void check_t16_matmul(uint32_t type, int64_t k, int64_t n, int n_rows)
{
    struct be_weight hw = make_weight(type, k, n), rm, tl;
    if (init_layout(&rm, &hw, false) != GLIM_OK || init_layout(&tl, &hw, true) != GLIM_OK) {
        free((void *)hw.host);
        return;
    }
    size_t y_bytes = (size_t)n_rows * n * sizeof(float);
    float *x = rand_vec((int64_t)n_rows * k, 1.0f);
    float *a = malloc(y_bytes), *b = malloc(y_bytes), *ref = malloc(y_bytes);
    float *dx = to_dev(x, (size_t)n_rows * k * sizeof(float)), *dy = be->i->alloc(be, y_bytes);
    cpu_ref_matmul(ref, &hw, x, n_rows);
    for (int exact = 0; exact <= (n_rows <= 16); exact++) {
        CHECK_EQ(backend_cuda_set_exact(be, exact), GLIM_OK);
        be->i->matmul(be, dy, &tl, dx, n_rows);
        from_dev(a, dy, y_bytes);
        int ver = backend_cuda_get_gemv(be), ver_rm = t16_v5_twin(n_rows, exact);
        CHECK_EQ(backend_cuda_set_gemv(be, ver_rm ? ver_rm : ver), GLIM_OK);
        be->i->matmul(be, dy, &rm, dx, n_rows);
        CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
        from_dev(b, dy, y_bytes);
        char what[128];
        snprintf(what, sizeof what, "t16 %s k=%lld n=%lld rows=%d exact=%d", quant_type_name(type), (long long)k,
                 (long long)n, n_rows, exact);
        if (t16_v5_nr(type, n_rows, exact)) {
            CHECK(close_enough(a, b, (int64_t)n_rows * n, 1e-5, what));
        } else {
            if (memcmp(a, b, y_bytes) != 0)
                fprintf(stderr, "FAIL %s: T16 != row-major\n", what);
            CHECK(memcmp(a, b, y_bytes) == 0);
        }
        double tol = exact ? 1e-5 : 1e-2;
        if ((int64_t)n_rows * n >= 16)   /* a relative L2 error over a handful of outputs is noise */
            CHECK(close_enough(a, ref, (int64_t)n_rows * n, tol, what));
    }
    CHECK_EQ(backend_cuda_set_exact(be, exact_mode), GLIM_OK);
    int32_t ids[6] = {0, (int32_t)(n - 1), (int32_t)(n / 2), (int32_t)(rnd() % n), (int32_t)(rnd() % n),
                      (int32_t)(n - 1 - (n - 1) % 16)};   /* the last tile's first row */
    size_t r_bytes = 6 * (size_t)k * sizeof(float);
    int32_t *dids = to_dev(ids, sizeof ids);
    float *drows = be->i->alloc(be, r_bytes), *grows = malloc(r_bytes), *rrows = malloc(r_bytes);
    be->i->get_rows(be, drows, &tl, dids, 6);
    from_dev(grows, drows, r_bytes);
    cpu_ref_get_rows(rrows, &hw, ids, 6);
    if (memcmp(grows, rrows, r_bytes) != 0)
        fprintf(stderr, "FAIL t16 get_rows %s k=%lld n=%lld\n", quant_type_name(type), (long long)k, (long long)n);
    CHECK(memcmp(grows, rrows, r_bytes) == 0);
    be->i->release(be, dx), be->i->release(be, dy), be->i->release(be, dids), be->i->release(be, drows);
    be->i->weight_clear(be, &rm), be->i->weight_clear(be, &tl);
    free(x), free(a), free(b), free(ref), free(grows), free(rrows), free((void *)hw.host);
}

/* n weights sharing x (matmul_n: one job) in both layouts, GEMV version ver (3: v3, persistent
 * or not as set; 5: v5 takes the row-major Q4_K/Q6_K, maybe not the tiles: 1e-5, its tolerance
 * against v2/v3) */
static void check_t16_matmul_n(int ver, int n, const uint32_t *types, const int64_t *ns, int64_t k, int n_rows)
{
    struct be_weight hw[4], rm[4], tl[4];
    const struct be_weight *wr[4], *wt[4];
    float *dy[4];
    int ok = 0;
    for (; ok < n; ok++) {
        hw[ok] = make_weight(types[ok], k, ns[ok]);
        if (init_layout(&rm[ok], &hw[ok], false) != GLIM_OK) {
            free((void *)hw[ok].host);
            break;
        }
        if (init_layout(&tl[ok], &hw[ok], true) != GLIM_OK) {
            be->i->weight_clear(be, &rm[ok]);
            free((void *)hw[ok].host);
            break;
        }
        wr[ok] = &rm[ok], wt[ok] = &tl[ok];
        dy[ok] = be->i->alloc(be, (size_t)n_rows * ns[ok] * sizeof(float));
    }
    float *x = rand_vec((int64_t)n_rows * k, 1.0f);
    float *dx = to_dev(x, (size_t)n_rows * k * sizeof(float));
    if (ok == n) {
        float *a[4], *b[4];
        CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
        be->i->matmul_n(be, n, dy, wt, dx, n_rows);
        for (int i = 0; i < n; i++) {
            a[i] = malloc((size_t)n_rows * ns[i] * sizeof(float));
            from_dev(a[i], dy[i], (size_t)n_rows * ns[i] * sizeof(float));
        }
        int twin = ver == 3 ? t16_v5_twin(n_rows, false) : 0;
        CHECK_EQ(backend_cuda_set_gemv(be, twin ? twin : ver), GLIM_OK);
        be->i->matmul_n(be, n, dy, wr, dx, n_rows);
        CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
        for (int i = 0; i < n; i++) {
            size_t yb = (size_t)n_rows * ns[i] * sizeof(float);
            b[i] = malloc(yb);
            from_dev(b[i], dy[i], yb);
            char what[128];
            snprintf(what, sizeof what, "t16 matmul_n v%d part %d/%d %s k=%lld n=%lld rows=%d", ver, i, n,
                     quant_type_name(types[i]), (long long)k, (long long)ns[i], n_rows);
            /* v5 on tiles and v5 on rows do the same arithmetic in the same order: bit-equal too */
            if (t16_v5_nr(types[i], n_rows, false)) {
                CHECK(close_enough(a[i], b[i], (int64_t)n_rows * ns[i], 1e-5, what));
            } else {
                if (memcmp(a[i], b[i], yb) != 0)
                    fprintf(stderr, "FAIL %s: T16 != row-major\n", what);
                CHECK(memcmp(a[i], b[i], yb) == 0);
            }
            float *ref = malloc(yb);
            cpu_ref_matmul(ref, &hw[i], x, n_rows);
            if ((int64_t)n_rows * ns[i] >= 16)
                CHECK(close_enough(a[i], ref, (int64_t)n_rows * ns[i], 1e-2, what));
            free(ref), free(a[i]), free(b[i]);
        }
    }
    for (int i = 0; i < ok; i++) {
        be->i->release(be, dy[i]), be->i->weight_clear(be, &rm[i]), be->i->weight_clear(be, &tl[i]);
        free((void *)hw[i].host);
    }
    be->i->release(be, dx);
    free(x);
}

/* matmul_glu (the gate applied while quantizing x, or in place before the GEMM): both layouts */
static void check_t16_glu(uint32_t type, int64_t k, int64_t n, int n_rows, int act)
{
    struct be_weight hw = make_weight(type, k, n), rm, tl;
    if (init_layout(&rm, &hw, false) != GLIM_OK || init_layout(&tl, &hw, true) != GLIM_OK) {
        free((void *)hw.host);
        return;
    }
    int64_t nx = (int64_t)n_rows * k;
    size_t yb = (size_t)n_rows * n * sizeof(float);
    float *x = rand_vec(nx, 2.0f), *g = rand_vec(nx, 4.0f), *a = malloc(yb), *b = malloc(yb);
    float *dx = to_dev(x, nx * sizeof(float)), *dg = to_dev(g, nx * sizeof(float)), *dy = be->i->alloc(be, yb);
    struct glim_err err = {0};
    be->i->matmul_glu(be, dy, &tl, dx, dg, act, n_rows);
    from_dev(a, dy, yb);
    CHECK_EQ(be->i->upload(be, dx, x, nx * sizeof(float), &err), GLIM_OK);   /* x may have been gated in place */
    int ver = backend_cuda_get_gemv(be), twin = t16_v5_twin(n_rows, exact_mode);
    CHECK_EQ(backend_cuda_set_gemv(be, twin ? twin : ver), GLIM_OK);
    be->i->matmul_glu(be, dy, &rm, dx, dg, act, n_rows);
    CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
    from_dev(b, dy, yb);
    if (t16_v5_nr(type, n_rows, exact_mode)) {
        CHECK(close_enough(a, b, (int64_t)n_rows * n, 1e-5, "t16 matmul_glu, v5 rows"));
    } else {
        if (memcmp(a, b, yb) != 0)
            fprintf(stderr, "FAIL t16 matmul_glu %s k=%lld n=%lld rows=%d\n", quant_type_name(type), (long long)k,
                    (long long)n, n_rows);
        CHECK(memcmp(a, b, yb) == 0);
    }
    be->i->release(be, dx), be->i->release(be, dg), be->i->release(be, dy);
    be->i->weight_clear(be, &rm), be->i->weight_clear(be, &tl);
    free(x), free(g), free(a), free(b), free((void *)hw.host);
}

/* does the default GEMV (v3) hand one-row tiles to v5 here (sm_80+)? */
static bool v5_takes_tiles(void)
{
    int ver = backend_cuda_get_gemv(be);
    bool v5 = ver == 3 && backend_cuda_set_gemv(be, 5) == GLIM_OK;
    CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
    return v5;
}

/* an FFN's weights in tiles on the device: gate and up (type, k -> n), down (dtype, n -> n2);
 * false (checked) if one failed (weights_free clears them all the same) */
static bool ffn_weights(uint32_t type, uint32_t dtype, int64_t k, int64_t n, int64_t n2, struct be_weight *hw,
                        struct be_weight *dw)
{
    CHECK_EQ(backend_cuda_set_t16(be, true), GLIM_OK);
    hw[0] = make_weight(type, k, n), hw[1] = make_weight(type, k, n), hw[2] = make_weight(dtype, n, n2);
    struct glim_err err = {0};
    bool ok = true;
    for (int i = 0; i < 3; i++) {   /* every one: a failed init leaves dev NULL, for weight_clear */
        dw[i] = hw[i];
        ok = be->i->weight_init(be, &dw[i], &err) == GLIM_OK && ok;
    }
    CHECK(ok);
    CHECK_EQ(backend_cuda_set_t16(be, t16_env()), GLIM_OK);
    return ok;
}

/* The FFN (gate/up Q4_K or Q6_K tiles k -> n, down dtype n -> n2, one row) as matmul_pair_glu +
 * matmul_glu with the GLU fold on, then off, every output bit for bit the same: on, the gate/up
 * GEMV (v5) quantizes silu(gate) * up itself and matmul_glu launches no quantizer (taken once
 * where v5 runs); off, never */
static void check_glu_fuse(uint32_t type, uint32_t dtype, int64_t k, int64_t n, int64_t n2, bool v5)
{
    struct be_weight hw[3], dw[3];
    bool ok = ffn_weights(type, dtype, k, n, n2, hw, dw);
    float *x = rand_vec(k, 1.0f), *out[2];
    size_t fb = (size_t)n * sizeof(float), yb = (size_t)n2 * sizeof(float), all = 2 * fb + yb;
    float *dx = to_dev(x, (size_t)k * sizeof(float)), *df1 = be->i->alloc(be, fb), *df2 = be->i->alloc(be, fb);
    float *dy = be->i->alloc(be, yb);
    long used[2];
    for (int pass = 0; ok && pass < 2; pass++) {   /* on, then off */
        CHECK_EQ(backend_cuda_set_glu_fuse(be, pass == 0), GLIM_OK);
        long used0 = backend_cuda_glu_used(be);
        float *fs[2] = {df1, df2};
        const struct be_weight *ws[3] = {&dw[0], &dw[1], &dw[2]};
        be->i->matmul_pair_glu(be, fs, ws, dx, 1, BE_GLU_SILU);
        be->i->matmul_glu(be, dy, &dw[2], df2, df1, BE_GLU_SILU, 1);
        out[pass] = malloc(all);
        from_dev(out[pass], df1, fb);
        from_dev(out[pass] + n, df2, fb);
        from_dev(out[pass] + 2 * n, dy, yb);
        used[pass] = backend_cuda_glu_used(be) - used0;
    }
    CHECK_EQ(backend_cuda_set_glu_fuse(be, true), GLIM_OK);   /* the default */
    if (ok) {
        CHECK_EQ(used[0], v5 ? 1 : 0);
        CHECK_EQ(used[1], 0);
        if (memcmp(out[0], out[1], all) != 0)
            fprintf(stderr, "FAIL glu_fuse %s/%s k=%lld n=%lld n2=%lld\n", quant_type_name(type),
                    quant_type_name(dtype), (long long)k, (long long)n, (long long)n2);
        CHECK(memcmp(out[0], out[1], all) == 0);
        free(out[0]), free(out[1]);
    }
    be->i->release(be, dx), be->i->release(be, df1), be->i->release(be, df2), be->i->release(be, dy);
    weights_free(dw, hw, 3);
    free(x);
}

static void test_glu_fuse(void)
{
    if (!be->i->matmul_pair_glu || exact_mode) {
        fprintf(stderr, "  no matmul_pair_glu (GLIM_CUDA_FUSE=0) or exact: skipped\n");
        return;
    }
    bool v5 = v5_takes_tiles();
    for (int i = 0; i < 24; i++)   /* ragged k; n a multiple of 256 (the down projection's k) */
        check_glu_fuse(i % 2 ? GLIM_TYPE_Q6_K : GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, 256 * rndi(1, 8), 256 * rndi(1, 4),
                       rndi(1, 300), v5);
    /* more units than warps: uneven pieces */
    check_glu_fuse(GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, 4096, 4096, 512, v5);
}

/* GEMV v5s (units shared out at run time in each SM, chunks of C units): its own bits, the same
 * every run, within v5's 1e-5 of plain v5 and v5's 1e-2 of the CPU. One row of a tiled weight. */
static void check_v5s(uint32_t type, int64_t k, int64_t n, int C)
{
    struct be_weight hw = make_weight(type, k, n), tl, rm;
    if (init_layout(&tl, &hw, true) != GLIM_OK || init_layout(&rm, &hw, false) != GLIM_OK) {
        free((void *)hw.host);
        return;
    }
    size_t y_bytes = (size_t)n * sizeof(float);
    float *x = rand_vec(k, 1.0f), *a = malloc(y_bytes), *b = malloc(y_bytes), *v = malloc(y_bytes), *ref = malloc(y_bytes);
    float *r = malloc(y_bytes);
    float *dx = to_dev(x, (size_t)k * sizeof(float)), *dy = be->i->alloc(be, y_bytes);
    cpu_ref_matmul(ref, &hw, x, 1);
    int c0 = backend_cuda_get_v5s(be), ver = backend_cuda_get_gemv(be);
    CHECK_EQ(backend_cuda_set_v5s(be, C), GLIM_OK);
    be->i->matmul(be, dy, &tl, dx, 1);
    from_dev(a, dy, y_bytes);
    be->i->matmul(be, dy, &tl, dx, 1);
    from_dev(b, dy, y_bytes);
    CHECK_EQ(backend_cuda_set_gemv(be, 5), GLIM_OK);   /* v5 (so v5s) takes the row-major blocks too */
    be->i->matmul(be, dy, &rm, dx, 1);
    from_dev(r, dy, y_bytes);
    CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
    CHECK_EQ(backend_cuda_set_v5s(be, 0), GLIM_OK);
    be->i->matmul(be, dy, &tl, dx, 1);
    from_dev(v, dy, y_bytes);
    CHECK_EQ(backend_cuda_set_v5s(be, c0), GLIM_OK);
    char what[128];
    snprintf(what, sizeof what, "v5s %s k=%lld n=%lld C=%d", quant_type_name(type), (long long)k, (long long)n, C);
    if (memcmp(a, b, y_bytes) != 0)
        fprintf(stderr, "FAIL %s: two runs differ\n", what);
    CHECK(memcmp(a, b, y_bytes) == 0);
    if (memcmp(a, r, y_bytes) != 0)
        fprintf(stderr, "FAIL %s: tiles != row-major\n", what);
    CHECK(memcmp(a, r, y_bytes) == 0);
    CHECK(close_enough(a, v, n, 1e-5, what));
    if (n >= 16)
        CHECK(close_enough(a, ref, n, 1e-2, what));
    be->i->release(be, dx), be->i->release(be, dy);
    be->i->weight_clear(be, &rm);
    weights_free(&tl, &hw, 1);
    free(x), free(a), free(b), free(v), free(ref), free(r);
}

/* v5s's pool (the last pct % of tiles claimed whole by CTAs at run time): whoever takes a tile, the
 * bits are the same, run after run (70 launches: the pool's counts, zeroed by each launch's last
 * CTA, are reused), and within v5's 1e-5 of plain v5. Each run writes into NaNs, so a tile no CTA
 * took cannot pass as the last run's. */
static void check_v5s_pool(uint32_t type, int64_t k, int64_t n, int C, int pct, int runs)
{
    struct be_weight hw = make_weight(type, k, n), tl;
    if (init_layout(&tl, &hw, true) != GLIM_OK) {
        free((void *)hw.host);
        return;
    }
    size_t y_bytes = (size_t)n * sizeof(float);
    float *x = rand_vec(k, 1.0f), *a = malloc(y_bytes), *b = malloc(y_bytes), *v = malloc(y_bytes), *nan = malloc(y_bytes);
    for (int64_t i = 0; i < n; i++)
        nan[i] = NAN;
    float *dx = to_dev(x, (size_t)k * sizeof(float)), *dy = to_dev(nan, y_bytes);
    int c0 = backend_cuda_get_v5s(be), p0 = backend_cuda_get_v5s_pool(be);
    CHECK_EQ(backend_cuda_set_v5s(be, 0), GLIM_OK);
    be->i->matmul(be, dy, &tl, dx, 1);
    from_dev(v, dy, y_bytes);
    CHECK_EQ(backend_cuda_set_v5s(be, C), GLIM_OK);
    CHECK_EQ(backend_cuda_set_v5s_pool(be, pct), GLIM_OK);
    char what[128];
    snprintf(what, sizeof what, "v5s pool %s k=%lld n=%lld C=%d pct=%d", quant_type_name(type), (long long)k,
             (long long)n, C, pct);
    int differ = 0;
    for (int r = 0; r < runs; r++) {
        struct glim_err err = {0};
        CHECK_EQ(be->i->upload(be, dy, nan, y_bytes, &err), GLIM_OK);
        be->i->matmul(be, dy, &tl, dx, 1);
        from_dev(r ? b : a, dy, y_bytes);
        differ += r && memcmp(a, b, y_bytes) != 0;
    }
    CHECK_EQ(backend_cuda_set_v5s_pool(be, p0), GLIM_OK);
    CHECK_EQ(backend_cuda_set_v5s(be, c0), GLIM_OK);
    if (differ)
        fprintf(stderr, "FAIL %s: %d of %d runs differ from the first\n", what, differ, runs - 1);
    CHECK(differ == 0);
    CHECK(close_enough(a, v, n, 1e-5, what));
    be->i->release(be, dx), be->i->release(be, dy);
    weights_free(&tl, &hw, 1);
    free(x), free(a), free(b), free(v), free(nan);
}

static void test_v5s(void)
{
    if (!v5_takes_tiles() || exact_mode) {
        fprintf(stderr, "  v5 does not take tiles here (sm < 80) or exact: skipped\n");
        return;
    }
    static const uint32_t QT[2] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K};
    for (int ti = 0; ti < 2; ti++) {
        for (int i = 0; i < 6; i++)   /* ragged n, fewer and more units than SMs */
            check_v5s(QT[ti], 256 * rndi(1, 16), rndi(1, 600), rndi(1, 8));
        check_v5s(QT[ti], 256, 16, 2);             /* one tile */
        check_v5s(QT[ti], 6656, 4224 + 5, 2);      /* tiles cut between CTAs */
        check_v5s(QT[ti], 19968, 416 + 3, 3);      /* down's shape: long tiles, chunks of 3 */
        check_v5s(QT[ti], 6656, 2 * 1024, 1);
    }
    for (int ti = 0; ti < 2; ti++) {   /* the pool: every claim order, its counts reused */
        check_v5s_pool(QT[ti], 6656, 4224 + 5, 4, 15, 70);
        check_v5s_pool(QT[ti], 19968, 416 + 3, 3, 30, 8);
        check_v5s_pool(QT[ti], 256 * rndi(1, 16), rndi(1, 3000), rndi(1, 8), rndi(1, 50), 4);
        check_v5s_pool(QT[ti], 256, 16 * 200, 2, 50, 4);   /* one unit a tile */
    }
    int a0 = backend_cuda_get_v5s_ahead(be);   /* claims 1 and 6 ahead (GLIM_CUDA_V5S_AHEAD) */
    CHECK(backend_cuda_set_v5s_ahead(be, 0) != GLIM_OK);
    for (int ahead = 1; ahead <= 6; ahead += 5) {
        CHECK_EQ(backend_cuda_set_v5s_ahead(be, ahead), GLIM_OK);
        for (int ti = 0; ti < 2; ti++) {
            check_v5s_pool(QT[ti], 6656, 4224 + 5, 4, 50, 40);
            check_v5s_pool(QT[ti], 256 * rndi(1, 16), rndi(1, 3000), rndi(1, 8), rndi(1, 90), 4);
        }
    }
    CHECK_EQ(backend_cuda_set_v5s_ahead(be, a0), GLIM_OK);
    /* CTAs of 8 and 4 warps (2 and 4 an SM): the same checks on their own split */
    int w0 = backend_cuda_get_v5s_warps(be);
    CHECK(backend_cuda_set_v5s_warps(be, 12) != GLIM_OK);
    for (int w = 8; w >= 4; w /= 2) {
        CHECK_EQ(backend_cuda_set_v5s_warps(be, w), GLIM_OK);
        for (int ti = 0; ti < 2; ti++) {
            check_v5s(QT[ti], 256 * rndi(1, 16), rndi(1, 600), rndi(1, 8));
            check_v5s(QT[ti], 6656, 4224 + 5, 4);
            check_v5s(QT[ti], 19968, 416 + 3, 4);
            check_v5s_pool(QT[ti], 6656, 4224 + 5, 4, 50, 40);
            check_v5s_pool(QT[ti], 256 * rndi(1, 16), rndi(1, 3000), rndi(1, 8), rndi(1, 90), 4);
        }
    }
    CHECK_EQ(backend_cuda_set_v5s_warps(be, w0), GLIM_OK);
    /* the SwiGLU fold on v5s: bit for bit the quantizer it replaces (check_glu_fuse's own test) */
    int c0 = backend_cuda_get_v5s(be), p0 = backend_cuda_get_v5s_pool(be);
    CHECK_EQ(backend_cuda_set_v5s(be, 2), GLIM_OK);
    CHECK_EQ(backend_cuda_set_v5s_pool(be, 0), GLIM_OK);
    check_glu_fuse(GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, 4096, 4096, 512, true);
    check_glu_fuse(GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K, 6656, 2048, 300, true);
    check_glu_fuse(GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, 256 * rndi(1, 8), 256 * rndi(1, 4), rndi(1, 300), true);
    CHECK_EQ(backend_cuda_set_v5s_pool(be, 20), GLIM_OK);   /* ... and with the pool */
    check_glu_fuse(GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, 4096, 4096, 512, true);
    check_glu_fuse(GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K, 6656, 19968, 300, true);
    CHECK_EQ(backend_cuda_set_v5s_pool(be, p0), GLIM_OK);
    CHECK_EQ(backend_cuda_set_v5s(be, c0), GLIM_OK);
}

static void test_t16(void)
{
    static const uint32_t QT[2] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K};
    int persist0 = backend_cuda_get_gemv_persist(be);
    for (int ti = 0; ti < 2; ti++) {
        /* 1 row (v5 on sm_80+, else v3), 2..16 (v2), 17 and 40 (bf16 GEMM); ragged n */
        for (int n_rows = 1; n_rows <= 16; n_rows++)
            check_t16_matmul(QT[ti], 256 * rndi(1, 12), rndi(1, 300), n_rows);
        check_t16_matmul(QT[ti], 512, 16 * rndi(1, 8) + rndi(1, 15), 17);
        check_t16_matmul(QT[ti], 1024, 100, 40);
        /* one tile exactly, fewer rows than a tile, n % 16 = 15, many slots, 2 rows per warp */
        check_t16_matmul(QT[ti], 256, 16, 1);
        check_t16_matmul(QT[ti], 512, 3, 2);
        check_t16_matmul(QT[ti], 2048, 16 * 9 + 15, 1);
        check_t16_matmul(QT[ti], 19968, 40, 1);
        check_t16_matmul(QT[ti], 6656, 4224 + 5, 1);
        check_t16_matmul(QT[ti], 6656, 259, 3);
        /* the plain v3 grid and v2 for one row */
        CHECK_EQ(backend_cuda_set_gemv_persist(be, 0), GLIM_OK);
        check_t16_matmul(QT[ti], 6656, 4224 + 5, 1);
        check_t16_matmul(QT[ti], 256 * rndi(1, 40), rndi(1, 3000), 1);
        CHECK_EQ(backend_cuda_set_gemv_persist(be, persist0), GLIM_OK);
        CHECK_EQ(backend_cuda_set_gemv(be, 2), GLIM_OK);
        check_t16_matmul(QT[ti], 6656, 4224 + 5, 1);
        CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
        for (int act = BE_GLU_SIGMOID; act <= BE_GLU_SILU; act++)
            if (be->i->matmul_glu) {
                check_t16_glu(QT[ti], 4096, 333, 1, act);
                check_t16_glu(QT[ti], 512, 64, 17, act);
            }
    }
    /* q/k/v/gate of a Q4_K_M layer (mixed kinds: the plain v3), gate/up (one kind: the
     * persistent v3 when on), 1, 6, 16 and 17 rows; with a Q5_K and a Q8_0 part (no tiles) */
    const uint32_t qkvg[4] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K};
    const int64_t n_qkvg[4] = {4096 + 3, 256, 256 + 1, 4224 + 9};
    for (int nr = 1; nr <= 17; nr += nr == 16 ? 1 : 5)
        check_t16_matmul_n(3, 4, qkvg, n_qkvg, 6656, nr);
    const uint32_t gate_up[2] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K}, v6[2] = {GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K};
    const int64_t n_gate_up[2] = {4224 + 7, 4224 + 7};
    for (int p = 0; p <= 1; p++) {
        CHECK_EQ(backend_cuda_set_gemv_persist(be, p ? (persist0 ? persist0 : 4) : 0), GLIM_OK);
        check_t16_matmul_n(3, 2, gate_up, n_gate_up, 512, 1);
        check_t16_matmul_n(3, 2, v6, n_gate_up, 768, 1);
        check_t16_matmul_n(3, 4, qkvg, n_qkvg, 6656, 1);
    }
    CHECK_EQ(backend_cuda_set_gemv_persist(be, persist0), GLIM_OK);
    const uint32_t k5[4] = {GLIM_TYPE_Q5_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K};
    const int64_t n_k5[4] = {77, 130, 5, 19};
    check_t16_matmul_n(3, 4, k5, n_k5, 512, 1);
    check_t16_matmul_n(3, 4, k5, n_k5, 512, 2);
    const uint32_t q8k4[2] = {GLIM_TYPE_Q8_0, GLIM_TYPE_Q4_K};
    const int64_t n_q8k4[2] = {300, 77};
    check_t16_matmul_n(3, 2, q8k4, n_q8k4, 4096, 1);   /* layouts differ: one matmul each */
    /* GEMV v5 (sm_80): the tiles and the rows read by v5 give the same bits; by default (v3) one
     * activation row of tiles goes to v5 (gemv_mma.cu cuda_gemv5; t16_v5_twin): the FFN gate/up,
     * down (Q4_K and Q6_K) and output head shapes, ragged n */
    if (backend_cuda_set_gemv(be, 5) == GLIM_OK) {
        check_t16_matmul_n(5, 4, qkvg, n_qkvg, 6656, 1);
        check_t16_matmul_n(5, 2, v6, n_gate_up, 768, 1);
        check_t16_matmul_n(5, 2, q8k4, n_q8k4, 4096, 1);
        check_t16_matmul_n(5, 4, k5, n_k5, 512, 1);
        const int64_t n_ffn[2] = {6656 + 7, 6656 + 9}, n_down[1] = {4096 + 5}, n_out[1] = {32000 + 3};
        check_t16_matmul_n(3, 2, gate_up, n_ffn, 6656, 1);
        check_t16_matmul_n(3, 1, gate_up, n_down, 19968, 1);
        check_t16_matmul_n(3, 1, v6, n_down, 19968, 1);
        check_t16_matmul_n(3, 1, v6, n_out, 3072, 1);
    }
    CHECK_EQ(backend_cuda_set_gemv(be, 3), GLIM_OK);
}

/* matmul_glu: y = (x * act(g)) . W^T against the CPU reference (mul_sigmoid / swiglu, matmul) */
static void check_matmul_glu(uint32_t type, int64_t k, int64_t n, int n_rows, int act)
{
    struct glim_err err = {0};
    struct be_weight hw = make_weight(type, k, n), dw = hw;
    CHECK_EQ(be->i->weight_init(be, &dw, &err), GLIM_OK);
    int64_t nx = (int64_t)n_rows * k;
    float *x = rand_vec(nx, 2.0f), *g = rand_vec(nx, 4.0f);
    size_t yb = (size_t)n_rows * n * sizeof(float);
    float *ref = malloc(yb), *got = malloc(yb);
    float *dx = to_dev(x, nx * sizeof(float)), *dg = to_dev(g, nx * sizeof(float)), *dy = be->i->alloc(be, yb);
    be->i->matmul_glu(be, dy, &dw, dx, dg, act, n_rows);
    from_dev(got, dy, yb);
    if (act == BE_GLU_SIGMOID)
        cpu_ref_mul_sigmoid(x, g, nx);
    else
        cpu_ref_swiglu(x, g, x, nx);
    cpu_ref_matmul(ref, &hw, x, n_rows);
    bool q8 = n_rows <= 16 && is_q8_type(type);
    char what[128];
    snprintf(what, sizeof what, "matmul_glu %s act=%d k=%lld n=%lld rows=%d", quant_type_name(type), act,
             (long long)k, (long long)n, n_rows);
    CHECK(close_enough(got, ref, (int64_t)n_rows * n, q8 || type != GLIM_TYPE_F32 ? 1e-2 : 1e-5, what));
    be->i->release(be, dx), be->i->release(be, dg), be->i->release(be, dy), be->i->weight_clear(be, &dw);
    free(x), free(g), free(ref), free(got), free((void *)hw.host);
}

static void test_matmul_glu(void)
{
    CHECK(be->i->matmul_glu != NULL);   /* offered unless GLIM_CUDA_FUSE=0 */
    if (!be->i->matmul_glu)
        return;
    for (int act = BE_GLU_SIGMOID; act <= BE_GLU_SILU; act++) {
        check_matmul_glu(GLIM_TYPE_Q4_K, 4096, 333, 1, act);
        check_matmul_glu(GLIM_TYPE_Q6_K, 19968, 70, 1, act);
        check_matmul_glu(GLIM_TYPE_Q8_0, 512, 100, 4, act);
        check_matmul_glu(GLIM_TYPE_Q5_K, 768, 50, 16, act);
        check_matmul_glu(GLIM_TYPE_Q4_K, 512, 64, 17, act);   /* GEMM: gate applied in place first */
        check_matmul_glu(GLIM_TYPE_F32, 300, 40, 2, act);
    }
}

/* matmul_glu (sigmoid gate, one row) on tiles equals mul_sigmoid then matmul bit for bit: the gated
 * quantizer makes the same int8 copy of x * sigmoid(g) with the same functions. */
static void check_glu_gated(uint32_t type, int64_t k, int64_t n)
{
    struct be_weight hw = make_weight(type, k, n), tl;
    if (init_layout(&tl, &hw, true) != GLIM_OK) {
        free((void *)hw.host);
        return;
    }
    float *x = rand_vec(k, 2.0f), *g = rand_vec(k, 4.0f);
    size_t yb = (size_t)n * sizeof(float);
    float *a = malloc(yb), *b = malloc(yb), *ref = malloc(yb);
    float *dx = to_dev(x, k * sizeof(float)), *dg = to_dev(g, k * sizeof(float)), *dy = be->i->alloc(be, yb);
    be->i->matmul_glu(be, dy, &tl, dx, dg, BE_GLU_SIGMOID, 1);
    from_dev(a, dy, yb);
    be->i->mul_sigmoid(be, dx, dg, k);
    be->i->matmul(be, dy, &tl, dx, 1);
    from_dev(b, dy, yb);
    char what[128];
    snprintf(what, sizeof what, "glu gated %s k=%lld n=%lld", quant_type_name(type), (long long)k, (long long)n);
    if (memcmp(a, b, yb) != 0)
        fprintf(stderr, "FAIL %s: matmul_glu != mul_sigmoid + matmul\n", what);
    CHECK(memcmp(a, b, yb) == 0);
    cpu_ref_mul_sigmoid(x, g, k);
    cpu_ref_matmul(ref, &hw, x, 1);
    CHECK(close_enough(a, ref, n, 1e-2, what));
    be->i->release(be, dx), be->i->release(be, dg), be->i->release(be, dy), be->i->weight_clear(be, &tl);
    free(x), free(g), free(a), free(b), free(ref), free((void *)hw.host);
}

static void test_glu_gated(void)
{
    if (!be->i->matmul_glu || exact_mode) {
        fprintf(stderr, "  no matmul_glu (GLIM_CUDA_FUSE=0) or exact: skipped\n");
        return;
    }
    for (int i = 0; i < 12; i++)   /* ragged n; k a multiple of 256 */
        check_glu_gated(i % 2 ? GLIM_TYPE_Q6_K : GLIM_TYPE_Q4_K, 256 * rndi(1, 20), rndi(1, 700));
    check_glu_gated(GLIM_TYPE_Q4_K, 4096, 6656);   /* the 30B's Wo */
}

/* The int8 copy of x is reused by the next matmul of the same x; an upload to x,
 * any other op, or a matmul writing into x must make it requantize. */
static void test_matmul_xcache(void)
{
    struct glim_err err = {0};
    const int64_t k = 512, n = 96;
    const int nr = 2;
    struct be_weight h4 = make_weight(GLIM_TYPE_Q4_K, k, n), h6 = make_weight(GLIM_TYPE_Q6_K, k, n);
    struct be_weight hsq = make_weight(GLIM_TYPE_Q4_K, k, k);
    struct be_weight d4 = h4, d6 = h6, dsq = hsq;
    CHECK_EQ(be->i->weight_init(be, &d4, &err), GLIM_OK);
    CHECK_EQ(be->i->weight_init(be, &d6, &err), GLIM_OK);
    CHECK_EQ(be->i->weight_init(be, &dsq, &err), GLIM_OK);
    float *x = rand_vec(nr * k, 1.0f), *x2 = rand_vec(nr * k, 2.0f);
    float *ref = malloc((size_t)nr * k * 4), *got = malloc((size_t)nr * k * 4), *tmp = malloc((size_t)nr * k * 4);
    float *dx = to_dev(x, (size_t)nr * k * 4), *dy = be->i->alloc(be, (size_t)nr * k * 4);
    /* q (Q4_K), v (Q6_K), k (Q4_K) of one x: layouts alternate */
    const struct be_weight *hw[3] = {&h4, &h6, &h4}, *dw[3] = {&d4, &d6, &d4};
    for (int i = 0; i < 3; i++) {
        cpu_ref_matmul(ref, hw[i], x, nr);
        be->i->matmul(be, dy, dw[i], dx, nr);
        from_dev(got, dy, (size_t)nr * n * 4);
        CHECK(close_enough(got, ref, nr * n, 1e-2, "xcache same x"));
    }
    /* new contents of x by upload */
    be->i->upload(be, dx, x2, (size_t)nr * k * 4, &err);
    cpu_ref_matmul(ref, &h4, x2, nr);
    be->i->matmul(be, dy, &d4, dx, nr);
    from_dev(got, dy, (size_t)nr * n * 4);
    CHECK(close_enough(got, ref, nr * n, 1e-2, "xcache after upload"));
    /* x overwritten by another op (copy_rows of a matmul result), then used again */
    be->i->matmul(be, dy, &dsq, dx, nr);            /* dy = x2 . Wsq^T; caches x2 */
    be->i->copy_rows(be, dx, k, dy, k, nr, (int)k);  /* x = dy */
    from_dev(tmp, dx, (size_t)nr * k * 4);
    cpu_ref_matmul(ref, &h4, tmp, nr);
    be->i->matmul(be, dy, &d4, dx, nr);
    from_dev(got, dy, (size_t)nr * n * 4);
    CHECK(close_enough(got, ref, nr * n, 1e-2, "xcache after copy_rows"));
    be->i->release(be, dx), be->i->release(be, dy);
    be->i->weight_clear(be, &d4), be->i->weight_clear(be, &d6), be->i->weight_clear(be, &dsq);
    free((void *)h4.host), free((void *)h6.host), free((void *)hsq.host);
    free(x), free(x2), free(ref), free(got), free(tmp);
}

/* graph_begin/end/launch: a captured step (matmuls + rmsnorm + add) replays with new
 * inputs uploaded between launches; scratch growth during capture fails cleanly. */
static void test_graph(void)
{
    struct glim_err err = {0};
    const int64_t k = 1024, n = 1024;
    struct be_weight h4 = make_weight(GLIM_TYPE_Q4_K, k, n), h6 = make_weight(GLIM_TYPE_Q6_K, n, k);
    struct be_weight d4 = h4, d6 = h6;
    CHECK_EQ(be->i->weight_init(be, &d4, &err), GLIM_OK);
    CHECK_EQ(be->i->weight_init(be, &d6, &err), GLIM_OK);
    float *dx = be->i->alloc(be, k * 4), *dh = be->i->alloc(be, n * 4), *dy = be->i->alloc(be, k * 4);
    float *h = malloc(n * 4), *ref = malloc(k * 4), *got = malloc(k * 4), *eager = malloc(k * 4);
    void *graph = NULL;
    for (int it = 0; it < 4; it++) {
        float *x = rand_vec(k, 1.0f);
        CHECK_EQ(be->i->upload(be, dx, x, k * 4, &err), GLIM_OK);
        if (it == 0) {   /* eager step: sizes the scratch; its result is the reference for replays */
            be->i->rmsnorm(be, dy, dx, NULL, 1, (int)k, 1e-5f);
            be->i->matmul(be, dh, &d4, dy, 1);
            be->i->matmul(be, dy, &d6, dh, 1);
            be->i->add(be, dy, dx, k);
            from_dev(eager, dy, k * 4);
            CHECK_EQ(be->i->graph_begin(be, &err), GLIM_OK);
            be->i->rmsnorm(be, dy, dx, NULL, 1, (int)k, 1e-5f);
            be->i->matmul(be, dh, &d4, dy, 1);
            be->i->matmul(be, dy, &d6, dh, 1);
            be->i->add(be, dy, dx, k);
            CHECK_EQ(be->i->graph_end(be, &graph, &err), GLIM_OK);
            CHECK(graph != NULL);
        }
        if (!graph)
            break;
        CHECK_EQ(be->i->graph_launch(be, graph, &err), GLIM_OK);
        from_dev(got, dy, k * 4);
        cpu_ref_rmsnorm(ref, x, NULL, 1, (int)k, 1e-5f);
        cpu_ref_matmul(h, &h4, ref, 1);
        cpu_ref_matmul(ref, &h6, h, 1);
        cpu_ref_add(ref, x, k);
        CHECK(close_enough(got, ref, k, 1e-2, "graph replay"));
        if (it == 0)
            CHECK(memcmp(got, eager, k * 4) == 0);   /* same kernels, same order: same bits */
        free(x);
    }
    be->i->graph_free(be, graph);
    /* 16 rows of K = 65536: more int8 scratch than any earlier test: refused during capture */
    const int64_t kb = 65536;
    struct be_weight hb = make_weight(GLIM_TYPE_Q4_K, kb, 8), db = hb;
    CHECK_EQ(be->i->weight_init(be, &db, &err), GLIM_OK);
    float *dbig = be->i->alloc(be, 16 * kb * 4), *dbo = be->i->alloc(be, 16 * 8 * 4);
    CHECK_EQ(be->i->graph_begin(be, &err), GLIM_OK);
    be->i->matmul(be, dbo, &db, dbig, 16);
    graph = NULL;
    CHECK_EQ(be->i->graph_end(be, &graph, &err), GLIM_EBACKEND);
    CHECK(graph == NULL && strstr(err.msg, "capture") != NULL);
    CHECK_EQ(be->i->sync(be, &err), GLIM_OK);   /* not sticky: eager ops still run */
    be->i->matmul(be, dbo, &db, dbig, 16);
    CHECK_EQ(be->i->sync(be, &err), GLIM_OK);
    be->i->release(be, dbig), be->i->release(be, dbo);
    be->i->weight_clear(be, &db);
    free((void *)hb.host);
    be->i->release(be, dx), be->i->release(be, dh), be->i->release(be, dy);
    be->i->weight_clear(be, &d4), be->i->weight_clear(be, &d6);
    free((void *)h4.host), free((void *)h6.host);
    free(h), free(ref), free(got), free(eager);
}

static void test_matmul_shapes(void)
{
    /* Muse Glimmer-like rows (K = 6656), a misaligned x view, N not a multiple of the block of 4 warps */
    check_matmul(GLIM_TYPE_Q4_K, 6656, 259, 1, 0);
    check_matmul(GLIM_TYPE_Q6_K, 6656, 130, 3, 0);
    check_matmul(GLIM_TYPE_Q5_K, 4096, 67, 2, 0);
    check_matmul(GLIM_TYPE_Q4_K, 512, 33, 5, 1);
    check_matmul(GLIM_TYPE_F16, 64, 33, 2, 3);
    check_matmul(GLIM_TYPE_Q8_0, 2048, 513, 24, 0);
    check_matmul(GLIM_TYPE_Q6_K, 1024, 1000, 64, 0);
}

static void test_get_rows(void)
{
    struct glim_err err = {0};
    for (int ti = 0; ti < N_TYPES; ti++) {
        int64_t k = rand_k(TYPES[ti]), n = rndi(1, 50);
        struct be_weight hw = make_weight(TYPES[ti], k, n), dw = hw;
        CHECK_EQ(be->i->weight_init(be, &dw, &err), GLIM_OK);
        int n_ids = rndi(1, 9);
        int32_t ids[9];
        for (int i = 0; i < n_ids; i++)
            ids[i] = (int32_t)(rnd() % n);
        float *ref = malloc((size_t)n_ids * k * sizeof(float)), *got = malloc((size_t)n_ids * k * sizeof(float));
        cpu_ref_get_rows(ref, &hw, ids, n_ids);
        int32_t *dids = to_dev(ids, sizeof ids);
        float *dy = be->i->alloc(be, (size_t)n_ids * k * sizeof(float));
        be->i->get_rows(be, dy, &dw, dids, n_ids);
        from_dev(got, dy, (size_t)n_ids * k * sizeof(float));
        int bad = 0;
        for (int64_t i = 0; i < n_ids * k; i++)
            bad += got[i] != ref[i];
        if (bad)
            fprintf(stderr, "get_rows %s: %d of %lld values differ\n", quant_type_name(TYPES[ti]), bad,
                    (long long)(n_ids * k));
        CHECK_EQ(bad, 0);
        be->i->release(be, dids);
        be->i->release(be, dy);
        be->i->weight_clear(be, &dw);
        free(ref);
        free(got);
        free((void *)hw.host);
    }
}

static void test_rmsnorm(void)
{
    struct glim_err err = {0};
    static const int NS[] = {1, 7, 128, 1000, 6659, 1024, 4100, 6656, 8192};   /* >= 1024, % 4: vector kernel */
    for (int ni = 0; ni < 9; ni++)
        for (int weighted = 0; weighted < 2; weighted++) {
            int n = NS[ni], rows = rndi(1, 6);
            float *x = rand_vec((int64_t)rows * n, 3.0f), *g = rand_vec(n, 2.0f);
            float *ref = malloc((size_t)rows * n * sizeof(float)), *got = malloc((size_t)rows * n * sizeof(float));
            struct be_weight hw = {.name = "norm", .type = GLIM_TYPE_F32, .k = n, .n = 1,
                                   .nbytes = (size_t)n * 4, .host = g, .dev = g, .dev_type = GLIM_TYPE_F32};
            struct be_weight dw = hw;
            CHECK_EQ(be->i->weight_init(be, &dw, &err), GLIM_OK);
            cpu_ref_rmsnorm(ref, x, weighted ? &hw : NULL, rows, n, 1e-5f);
            float *dx = to_dev(x, (size_t)rows * n * 4), *dy = be->i->alloc(be, (size_t)rows * n * 4);
            be->i->rmsnorm(be, dy, dx, weighted ? &dw : NULL, rows, n, 1e-5f);
            from_dev(got, dy, (size_t)rows * n * 4);
            CHECK(close_enough(got, ref, (int64_t)rows * n, 1e-5, "rmsnorm"));
            be->i->release(be, dx);
            be->i->release(be, dy);
            be->i->weight_clear(be, &dw);
            free(x), free(g), free(ref), free(got);
        }
}

static void test_rope(void)
{
    for (int it = 0; it < 12; it++) {
        int rows = rndi(1, 5), n_head = rndi(1, 6), head_dim = 32 * rndi(1, 4);
        int n_rot = it % 3 == 0 ? head_dim / 2 : head_dim;
        bool neox = it % 2;
        float base = it % 4 < 2 ? 10000.0f : 500000.0f;
        int32_t pos[5];
        int32_t p0 = it % 3 == 2 ? 131000 : rndi(0, 5000);
        for (int r = 0; r < rows; r++)
            pos[r] = p0 + r;
        int64_t n = (int64_t)rows * n_head * head_dim;
        float *x = rand_vec(n, 1.0f), *got = malloc((size_t)n * 4);
        float *dx = to_dev(x, (size_t)n * 4);
        int32_t *dpos = to_dev(pos, sizeof pos);
        cpu_ref_rope(x, rows, n_head, head_dim, n_rot, pos, base, neox);
        be->i->rope(be, dx, rows, n_head, head_dim, n_rot, dpos, base, neox);
        from_dev(got, dx, (size_t)n * 4);
        CHECK(close_enough(got, x, n, 1e-5, "rope"));
        be->i->release(be, dx);
        be->i->release(be, dpos);
        free(x), free(got);
    }
}

static void test_elementwise(void)
{
    int64_t n = rndi(1, 5000) + 100000;
    float *a = rand_vec(n, 8.0f), *b = rand_vec(n, 8.0f), *c = rand_vec(n, 3.0f), *got = malloc((size_t)n * 4);
    float *ref = malloc((size_t)n * 4);
    float *da = to_dev(a, (size_t)n * 4), *db = to_dev(b, (size_t)n * 4), *dc = to_dev(c, (size_t)n * 4);
    float *dy = be->i->alloc(be, (size_t)n * 4);

    memcpy(ref, a, (size_t)n * 4);
    cpu_ref_add(ref, b, n);
    be->i->upload(be, dy, a, (size_t)n * 4, NULL);
    be->i->add(be, dy, db, n);
    from_dev(got, dy, (size_t)n * 4);
    CHECK(close_enough(got, ref, n, 1e-6, "add"));

    memcpy(ref, a, (size_t)n * 4);
    cpu_ref_mul_sigmoid(ref, b, n);
    be->i->upload(be, dy, a, (size_t)n * 4, NULL);
    be->i->mul_sigmoid(be, dy, db, n);
    from_dev(got, dy, (size_t)n * 4);
    CHECK(close_enough(got, ref, n, 1e-6, "mul_sigmoid"));

    cpu_ref_swiglu(ref, a, c, n);
    be->i->swiglu(be, dy, da, dc, n);
    from_dev(got, dy, (size_t)n * 4);
    CHECK(close_enough(got, ref, n, 1e-6, "swiglu"));

    for (int capped = 0; capped < 2; capped++) {
        memcpy(ref, a, (size_t)n * 4);
        cpu_ref_scale_softcap(ref, n, 0.19611613513f, capped ? 20.0f : 0.0f);
        be->i->upload(be, dy, a, (size_t)n * 4, NULL);
        be->i->scale_softcap(be, dy, n, 0.19611613513f, capped ? 20.0f : 0.0f);
        from_dev(got, dy, (size_t)n * 4);
        CHECK(close_enough(got, ref, n, 1e-6, "scale_softcap"));
    }

    /* copy_rows: 7 rows of 100 from stride 130 into stride 111 (exact) */
    memcpy(ref, c, (size_t)n * 4);
    be->i->upload(be, dy, c, (size_t)n * 4, NULL);
    cpu_ref_copy_rows(ref + 5, 111, a + 3, 130, 7, 100);
    be->i->copy_rows(be, dy + 5, 111, da + 3, 130, 7, 100);
    from_dev(got, dy, (size_t)n * 4);
    CHECK(memcmp(got, ref, (size_t)n * 4) == 0);

    be->i->release(be, da), be->i->release(be, db), be->i->release(be, dc), be->i->release(be, dy);
    free(a), free(b), free(c), free(got), free(ref);
}

/* ---- attention ---- */

struct attn_case {
    uint32_t kv_type;
    int n_head, n_head_kv, head_dim;
    int64_t n_slots;
    int window, block;
    int n_tokens;
    int32_t p_last;    /* position of the last query */
    int q_off;         /* floats: q and out start this far into their buffers (1 = not 16-byte aligned) */
};

static size_t kv_elem(uint32_t t)
{
    return t == GLIM_TYPE_F32 ? 4 : 2;
}

/* GLIM_TEST_QUICK: the caches past 10000 slots (their CPU references take minutes) are left out */
static bool attn_quick_skip(int64_t n_slots)
{
    if (!test_quick() || n_slots <= 10000)
        return false;
    printf("  attention over %lld slots: left out because GLIM_TEST_QUICK=1 asked for the quick subset "
           "(its CPU reference takes minutes; the default run includes it)\n",
           (long long)n_slots);
    return true;
}

static void check_attention(struct attn_case ac)
{
    if (attn_quick_skip(ac.n_slots))
        return;
    int kv_dim = ac.n_head_kv * ac.head_dim, q_dim = ac.n_head * ac.head_dim;
    size_t cache_bytes = (size_t)ac.n_slots * kv_dim * kv_elem(ac.kv_type);
    void *hk = calloc(1, cache_bytes), *hv = calloc(1, cache_bytes);
    void *dk = be->i->alloc(be, cache_bytes), *dv = be->i->alloc(be, cache_bytes);
    /* store positions 0..p_last in chunks of up to 64 tokens, as a prefill would */
    int32_t first = GLIM_MAX(0, ac.p_last + 1 - (int32_t)GLIM_MIN(ac.n_slots, 100000));
    for (int32_t p0 = first; p0 <= ac.p_last; p0 += 64) {
        int nt = (int)GLIM_MIN(64, ac.p_last + 1 - p0);
        int32_t pos[64];
        for (int t = 0; t < nt; t++)
            pos[t] = p0 + t;
        float *k = rand_vec((int64_t)nt * kv_dim, 3.0f), *v = rand_vec((int64_t)nt * kv_dim, 2.0f);
        cpu_ref_kv_store(hk, hv, ac.kv_type, ac.n_slots, k, v, nt, pos, kv_dim);
        float *dkk = to_dev(k, (size_t)nt * kv_dim * 4), *dvv = to_dev(v, (size_t)nt * kv_dim * 4);
        int32_t *dpos = to_dev(pos, (size_t)nt * 4);
        be->i->kv_store(be, dk, dv, ac.kv_type, ac.n_slots, dkk, dvv, nt, dpos, kv_dim);
        be->i->release(be, dkk), be->i->release(be, dvv), be->i->release(be, dpos);
        free(k), free(v);
    }
    void *gk = malloc(cache_bytes), *gv = malloc(cache_bytes);
    from_dev(gk, dk, cache_bytes);
    from_dev(gv, dv, cache_bytes);
    CHECK(memcmp(gk, hk, cache_bytes) == 0 && memcmp(gv, hv, cache_bytes) == 0);

    int32_t pos[256];   /* n_tokens <= 256 */
    for (int t = 0; t < ac.n_tokens; t++)
        pos[t] = ac.p_last - ac.n_tokens + 1 + t;
    float *q = rand_vec((int64_t)ac.n_tokens * q_dim, 1.0f);
    float *ref = malloc((size_t)ac.n_tokens * q_dim * 4), *got = malloc((size_t)ac.n_tokens * q_dim * 4);
    struct be_attn_args a = {.out = ref, .q = q, .k_cache = hk, .v_cache = hv, .kv_type = ac.kv_type,
                             .n_slots = ac.n_slots, .n_tokens = ac.n_tokens, .pos = pos, .pos_host0 = pos[0],
                             .n_head = ac.n_head, .n_head_kv = ac.n_head_kv, .head_dim = ac.head_dim,
                             .window = ac.window, .scale = 1.0f / sqrtf((float)ac.head_dim), .block = ac.block};
    cpu_ref_attention(&a);
    float *dq = be->i->alloc(be, ((size_t)ac.n_tokens * q_dim + ac.q_off) * 4);
    float *dout = be->i->alloc(be, ((size_t)ac.n_tokens * q_dim + ac.q_off) * 4);
    int32_t *dpos = to_dev(pos, (size_t)ac.n_tokens * 4);
    struct glim_err err = {0};
    CHECK_EQ(be->i->upload(be, dq + ac.q_off, q, (size_t)ac.n_tokens * q_dim * 4, &err), GLIM_OK);
    a.out = dout + ac.q_off, a.q = dq + ac.q_off, a.k_cache = dk, a.v_cache = dv, a.pos = dpos;
    be->i->attention(be, &a);
    from_dev(got, dout + ac.q_off, (size_t)ac.n_tokens * q_dim * 4);
    char what[200];
    snprintf(what, sizeof what,
             "attention v%d %s heads %d/%d dim %d slots %lld window %d block %d tokens %d p %d q_off %d",
             attn_path, quant_type_name(ac.kv_type), ac.n_head, ac.n_head_kv, ac.head_dim,
             (long long)ac.n_slots, ac.window, ac.block, ac.n_tokens, ac.p_last, ac.q_off);
    CHECK(close_enough(got, ref, (int64_t)ac.n_tokens * q_dim, 1e-5, what));
    if (ac.p_last >= 8000)   /* long contexts: show the error (every version should be alike) */
        printf("  %s: rel L2 %.3g\n", what, last_rel);
    be->i->release(be, dq), be->i->release(be, dout), be->i->release(be, dpos);
    be->i->release(be, dk), be->i->release(be, dv);
    free(hk), free(hv), free(gk), free(gv), free(q), free(ref), free(got);
}

static void test_attention(void)
{
    static const uint32_t KV[] = {GLIM_TYPE_F32, GLIM_TYPE_F16, GLIM_TYPE_BF16};
    for (int i = 0; i < 3; i++) {
        uint32_t kt = KV[i];
        /* decode, global, GQA 16:1 (Muse Glimmer shape), several positions */
        check_attention((struct attn_case){kt, 32, 2, 128, 3000, 0, 0, 1, 0, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 3000, 0, 0, 1, 37, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 3000, 0, 0, 1, 2999, 0});
        /* sliding window on a ring that has wrapped several times */
        check_attention((struct attn_case){kt, 8, 2, 64, 96, 48, 0, 1, 1000, 0});
        check_attention((struct attn_case){kt, 8, 2, 64, 96, 48, 0, 7, 517, 0});
        check_attention((struct attn_case){kt, 4, 4, 80, 64, 16, 0, 3, 10, 0});
        /* prefill chunks, global and windowed, MHA and GQA */
        check_attention((struct attn_case){kt, 6, 3, 64, 700, 0, 0, 40, 650, 0});
        check_attention((struct attn_case){kt, 16, 1, 128, 2100, 0, 0, 33, 2049, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 4096, 2048, 0, 17, 6000, 0});
        /* DFlash block (bidirectional tail), head_dim 256, more than 16 heads per KV head */
        check_attention((struct attn_case){kt, 8, 2, 128, 512, 0, 5, 5, 300, 0});
        check_attention((struct attn_case){kt, 8, 2, 64, 96, 32, 4, 6, 500, 0});
        check_attention((struct attn_case){kt, 40, 1, 256, 300, 0, 0, 2, 200, 0});
        if (attn_path == ATTN_V1)   /* v1 keeps its original cases */
            continue;
        /* v2 split plan edges: key counts around the 64-key minimum split and the 32-key tile */
        for (int p = 30; p <= 130; p += 1 + p / 16)
            check_attention((struct attn_case){kt, 32, 2, 128, 4160, 0, 0, 1, p, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 4160, 0, 0, 1, 4095, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 4160, 0, 0, 1, 4159, 0});
        /* long context decode (Muse Glimmer shapes): global, window 2048 on a wrapped ring */
        check_attention((struct attn_case){kt, 32, 2, 128, 33000, 0, 0, 1, 32999, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2560, 2048, 0, 1, 9999, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2560, 2048, 0, 1, 2047, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2560, 2048, 0, 1, 2048, 0});
        /* long prefill chunk / DFlash block at long context, global and windowed */
        check_attention((struct attn_case){kt, 32, 2, 128, 5000, 0, 0, 8, 4999, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2600, 2048, 0, 16, 9000, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 5000, 0, 8, 8, 3999, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2600, 2048, 16, 16, 9000, 0});
        /* shapes v2 leaves to v1: head_dim % 8 != 0, q/out not 16-byte aligned */
        check_attention((struct attn_case){kt, 8, 2, 68, 600, 0, 0, 2, 500, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 3000, 0, 0, 3, 2500, 1});
        /* head_dim 64/80/256 with long ranges (several splits) */
        check_attention((struct attn_case){kt, 8, 2, 64, 5000, 0, 0, 1, 4999, 0});
        check_attention((struct attn_case){kt, 10, 2, 80, 3000, 1000, 0, 2, 2999, 0});
        check_attention((struct attn_case){kt, 40, 1, 256, 3000, 0, 0, 1, 2999, 0});
    }
}

/* enable the attention kernels up to path: v4 on/off for both batch sizes, v2 vs v1 */
static void attn_use(int path)
{
    attn_path = path;
    CHECK_EQ(backend_cuda_set_new(be, path >= ATTN_V2), GLIM_OK);
    CHECK_EQ(backend_cuda_set_attn_tc(be, path >= ATTN_V4), GLIM_OK);
    CHECK_EQ(backend_cuda_set_attn_dec_tc(be, path >= ATTN_V4), GLIM_OK);
}

/* v4 switched off (GLIM_CUDA_ATTN_TC=0 GLIM_CUDA_ATTN_DEC_TC=0): every case on v2 */
static void test_attention_v2(void)
{
    attn_use(ATTN_V2);
    test_attention();
    attn_use(ATTN_V4);
}

/* the original cases on attention v1 (GLIM_CUDA_NEW=0), and one long context to compare */
static void test_attention_v1(void)
{
    attn_use(ATTN_V1);
    test_attention();
    check_attention((struct attn_case){GLIM_TYPE_F16, 32, 2, 128, 33000, 0, 0, 1, 32999, 0});   /* error vs v2 */
    attn_use(ATTN_V4);
}

/* v4 (tensor cores; F16/BF16, head_dim 64..128 in steps of 16, <= 16 heads per KV head)
 * beyond the shared cases: decode and verify at long depth, its split plan, token groups that
 * straddle a DFlash block, prefill chunks; and the shapes it leaves to v2/v1 */
static void test_attention_v4(void)
{
    static const uint32_t KV[] = {GLIM_TYPE_F16, GLIM_TYPE_BF16};
    for (int i = 0; i < 2; i++) {
        uint32_t kt = KV[i];
        /* decode, global cache of 41000 slots: near the end, in the middle; GQA 16:1 and 8:1 */
        check_attention((struct attn_case){kt, 32, 2, 128, 41000, 0, 0, 1, 40999, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 41000, 0, 0, 1, 20011, 0});
        check_attention((struct attn_case){kt, 16, 2, 128, 41000, 0, 0, 1, 40000, 0});
        /* verify batches (1, 2 and 4 tokens per CTA) at depth */
        check_attention((struct attn_case){kt, 32, 2, 128, 41000, 0, 0, 4, 40990, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 20000, 0, 0, 16, 19999, 0});
        check_attention((struct attn_case){kt, 16, 2, 128, 9000, 0, 0, 2, 8001, 0});
        check_attention((struct attn_case){kt, 16, 2, 128, 9000, 0, 0, 3, 8999, 0});
        check_attention((struct attn_case){kt, 8, 1, 64, 9000, 0, 0, 16, 7000, 0});
        /* DFlash: block = the batch (verify), and a token group straddling the block start */
        check_attention((struct attn_case){kt, 32, 2, 128, 21000, 0, 16, 16, 20999, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 5000, 0, 5, 9, 4000, 0});
        check_attention((struct attn_case){kt, 16, 2, 64, 300, 100, 3, 7, 1234, 0});
        /* window 2048 on a wrapped ring (the sliding layers): decode, verify, block */
        check_attention((struct attn_case){kt, 32, 2, 128, 2560, 2048, 0, 1, 50000, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2600, 2048, 0, 16, 30017, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2600, 2048, 16, 16, 30017, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2600, 2048, 0, 4, 2050, 0});
        /* split plan edges: ranges around multiples of the 64-key stage, 1..2 splits */
        static const int32_t ps[] = {0, 1, 62, 63, 64, 65, 127, 128, 129, 8447, 8448};
        for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
            check_attention((struct attn_case){kt, 32, 2, 128, 9000, 0, 0, 1, ps[k], 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 9000, 0, 0, 4, 66, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 9000, 0, 0, 16, 15, 0});
        /* prefill chunks (4 tokens per CTA, one split or a few): global, from 0, window ring */
        check_attention((struct attn_case){kt, 32, 2, 128, 1200, 0, 0, 130, 1100, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 2000, 0, 0, 128, 127, 0});
        check_attention((struct attn_case){kt, 32, 2, 128, 700, 512, 0, 150, 5000, 0});
        check_attention((struct attn_case){kt, 16, 2, 128, 6000, 0, 0, 17, 5999, 0});
        check_attention((struct attn_case){kt, 16, 1, 128, 400, 0, 16, 133, 350, 0});
        check_attention((struct attn_case){kt, 8, 2, 64, 600, 0, 0, 129, 300, 0});
        /* head_dim 80, 96, 112: decode at depth, verify with a window, a prefill chunk */
        check_attention((struct attn_case){kt, 10, 2, 80, 9000, 0, 0, 1, 8999, 0});
        check_attention((struct attn_case){kt, 12, 1, 96, 700, 300, 4, 6, 2000, 0});
        check_attention((struct attn_case){kt, 28, 2, 112, 3000, 0, 0, 40, 2999, 0});
    }
    /* left to v2: F32, head_dim 72 / 48 / 256, > 16 heads per KV head; unaligned q: v1 */
    check_attention((struct attn_case){GLIM_TYPE_F32, 32, 2, 128, 700, 0, 0, 130, 650, 0});
    check_attention((struct attn_case){GLIM_TYPE_F16, 10, 2, 72, 300, 0, 0, 130, 200, 0});
    check_attention((struct attn_case){GLIM_TYPE_BF16, 8, 2, 48, 300, 0, 0, 3, 200, 0});
    check_attention((struct attn_case){GLIM_TYPE_BF16, 4, 1, 256, 3000, 0, 0, 1, 2999, 0});
    check_attention((struct attn_case){GLIM_TYPE_F16, 34, 1, 64, 3000, 0, 0, 2, 2999, 0});
    check_attention((struct attn_case){GLIM_TYPE_F16, 8, 1, 64, 700, 0, 0, 130, 650, 1});
}

/* A decode (or verify) step's attention captured once (at a short position) and replayed at
 * other positions after uploading pos: the launch shape must not depend on the position.
 * Each replay must equal an eager call bit for bit, and the CPU reference within tolerance. */
static void check_attention_graph(uint32_t kt, int64_t n_slots, int window, int n_tokens, int32_t n_fill,
                                  const int32_t *ps, int n_ps)
{
    if (attn_quick_skip(n_slots))
        return;
    const int H = 32, HKV = 2, D = 128, kv_dim = HKV * D, q_dim = H * D;
    struct glim_err err = {0};
    size_t cache_bytes = (size_t)n_slots * kv_dim * kv_elem(kt), out_bytes = (size_t)n_tokens * q_dim * 4;
    void *hk = calloc(1, cache_bytes), *hv = calloc(1, cache_bytes);
    int32_t *fill = malloc((size_t)n_fill * 4), pos[16];
    for (int32_t i = 0; i < n_fill; i++)
        fill[i] = i;
    float *k = rand_vec((int64_t)n_fill * kv_dim, 3.0f), *v = rand_vec((int64_t)n_fill * kv_dim, 2.0f);
    cpu_ref_kv_store(hk, hv, kt, n_slots, k, v, n_fill, fill, kv_dim);
    void *dk = to_dev(hk, cache_bytes), *dv = to_dev(hv, cache_bytes);
    float *q = rand_vec((int64_t)n_tokens * q_dim, 1.0f), *ref = malloc(out_bytes), *got = malloc(out_bytes);
    float *eager = malloc(out_bytes);
    float *dq = to_dev(q, out_bytes), *dout = be->i->alloc(be, out_bytes), *dout2 = be->i->alloc(be, out_bytes);
    for (int t = 0; t < n_tokens; t++)
        pos[t] = ps[0] - n_tokens + 1 + t;
    int32_t *dpos = to_dev(pos, (size_t)n_tokens * 4);
    struct be_attn_args a = {.out = dout, .q = dq, .k_cache = dk, .v_cache = dv, .kv_type = kt,
                             .n_slots = n_slots, .n_tokens = n_tokens, .pos = dpos, .pos_host0 = pos[0],
                             .n_head = H, .n_head_kv = HKV, .head_dim = D, .window = window,
                             .scale = 1.0f / sqrtf((float)D), .block = 0};
    be->i->attention(be, &a);   /* eager: sizes the scratch */
    void *graph = NULL;
    CHECK_EQ(be->i->graph_begin(be, &err), GLIM_OK);
    be->i->attention(be, &a);
    CHECK_EQ(be->i->graph_end(be, &graph, &err), GLIM_OK);
    for (int i = 0; graph && i < n_ps; i++) {
        for (int t = 0; t < n_tokens; t++)
            pos[t] = ps[i] - n_tokens + 1 + t;
        CHECK_EQ(be->i->upload(be, dpos, pos, (size_t)n_tokens * 4, &err), GLIM_OK);
        CHECK_EQ(be->i->graph_launch(be, graph, &err), GLIM_OK);
        from_dev(got, dout, out_bytes);
        struct be_attn_args e = a;
        e.out = dout2, e.pos_host0 = pos[0];
        be->i->attention(be, &e);
        from_dev(eager, dout2, out_bytes);
        struct be_attn_args r = a;
        r.out = ref, r.q = q, r.k_cache = hk, r.v_cache = hv, r.pos = pos, r.pos_host0 = pos[0];
        cpu_ref_attention(&r);
        char what[160];
        snprintf(what, sizeof what, "attention graph v%d %s slots %lld window %d tokens %d p %d", attn_path,
                 quant_type_name(kt), (long long)n_slots, window, n_tokens, ps[i]);
        CHECK(close_enough(got, ref, (int64_t)n_tokens * q_dim, 1e-5, what));
        if (memcmp(got, eager, out_bytes) != 0)
            fprintf(stderr, "%s: replay differs from an eager call\n", what);
        CHECK(memcmp(got, eager, out_bytes) == 0);
    }
    be->i->graph_free(be, graph);
    be->i->release(be, dk), be->i->release(be, dv), be->i->release(be, dq), be->i->release(be, dout);
    be->i->release(be, dout2), be->i->release(be, dpos);
    free(hk), free(hv), free(fill), free(k), free(v), free(q), free(ref), free(got), free(eager);
}

static void test_attention_graph(void)
{
    static const int32_t global_ps[] = {40, 63, 64, 65, 129, 1000, 4097, 5999, 7};
    static const int32_t ring_ps[] = {9999, 9600, 9487, 9998};
    static const int32_t deep_ps[] = {100, 40999, 20000, 64, 39000};
    static const int paths[] = {ATTN_V4, ATTN_V2, ATTN_V1};
    for (int i = 0; i < 3; i++) {
        attn_use(paths[i]);
        check_attention_graph(GLIM_TYPE_F16, 6000, 0, 1, 6000, global_ps, 9);
        check_attention_graph(GLIM_TYPE_BF16, 2560, 2048, 1, 10000, ring_ps, 4);
        if (paths[i] != ATTN_V4)
            continue;
        check_attention_graph(GLIM_TYPE_F16, 41000, 0, 1, 41000, deep_ps, 5);
        check_attention_graph(GLIM_TYPE_F16, 41000, 0, 4, 41000, deep_ps, 5);
        check_attention_graph(GLIM_TYPE_BF16, 2600, 2048, 16, 10000, ring_ps, 4);
    }
    attn_use(ATTN_V4);
}

/* ---- fused ops (add_rmsnorm, attn_prep): against the CPU reference composition, and
 * bit for bit against the separate CUDA ops they replace (GLIM_CUDA_FUSE=0 runs those) ---- */

/* F32 norm weight g[n]: host view for cpu_ref (hw) and its device copy (dw) */
static void norm_weight(float *g, int n, struct be_weight *hw, struct be_weight *dw)
{
    struct glim_err err = {0};
    *hw = (struct be_weight){.name = "norm", .type = GLIM_TYPE_F32, .k = n, .n = 1, .nbytes = (size_t)n * 4,
                             .host = g, .dev = g, .dev_type = GLIM_TYPE_F32};
    *dw = *hw;
    CHECK_EQ(be->i->weight_init(be, dw, &err), GLIM_OK);
}

static bool same_bytes(const void *fused, const void *separate, size_t n, const char *what, const char *which)
{
    if (memcmp(fused, separate, n) == 0)
        return true;
    fprintf(stderr, "%s: %s differs between the fused op and the separate ops\n", what, which);
    return false;
}

struct add_norm_case {
    int rows, n;
    bool w_o, w_h;      /* weighted norms (else weightless) */
    int off_o, off_x;   /* floats: o, and x and h, start this far into their buffers (1 = misaligned) */
};

static void check_add_rmsnorm(struct add_norm_case ac)
{
    const float eps_o = 1e-8f, eps_h = 1e-6f;   /* Muse Glimmer's post-norm and norm eps */
    int64_t len = (int64_t)ac.rows * ac.n;
    size_t bytes = (size_t)len * 4;
    float *x = rand_vec(len, 4.0f), *o = rand_vec(len, 50.0f), *go = rand_vec(ac.n, 2.0f), *gh = rand_vec(ac.n, 2.0f);
    struct be_weight hwo, dwo, hwh, dwh;
    norm_weight(go, ac.n, &hwo, &dwo);
    norm_weight(gh, ac.n, &hwh, &dwh);
    const struct be_weight *wo = ac.w_o ? &dwo : NULL, *wh = ac.w_h ? &dwh : NULL;
    float *ref[3] = {malloc(bytes), malloc(bytes), malloc(bytes)};   /* x, h, o */
    memcpy(ref[0], x, bytes);
    cpu_ref_rmsnorm(ref[2], o, ac.w_o ? &hwo : NULL, ac.rows, ac.n, eps_o);
    cpu_ref_add(ref[0], ref[2], len);
    cpu_ref_rmsnorm(ref[1], ref[0], ac.w_h ? &hwh : NULL, ac.rows, ac.n, eps_h);
    float *got[2][3];   /* [fused, separate][x, h, o] */
    for (int pass = 0; pass < 2; pass++) {
        float *dx = be->i->alloc(be, bytes + 64), *dh = be->i->alloc(be, bytes + 64);
        float *dob = be->i->alloc(be, bytes + 64);
        float *X = dx + ac.off_x, *H = dh + ac.off_x, *O = dob + ac.off_o;
        struct glim_err err = {0};
        CHECK_EQ(be->i->upload(be, X, x, bytes, &err), GLIM_OK);
        CHECK_EQ(be->i->upload(be, O, o, bytes, &err), GLIM_OK);
        if (pass == 0) {
            be->i->add_rmsnorm(be, X, H, O, wo, eps_o, wh, eps_h, ac.rows, ac.n);
        } else {
            be->i->rmsnorm(be, O, O, wo, ac.rows, ac.n, eps_o);
            be->i->add(be, X, O, len);
            be->i->rmsnorm(be, H, X, wh, ac.rows, ac.n, eps_h);
        }
        const float *dev[3] = {X, H, O};
        for (int i = 0; i < 3; i++) {
            got[pass][i] = malloc(bytes);
            from_dev(got[pass][i], dev[i], bytes);
        }
        be->i->release(be, dx), be->i->release(be, dh), be->i->release(be, dob);
    }
    char what[128];
    snprintf(what, sizeof what, "add_rmsnorm rows %d n %d weights %d/%d offsets %d/%d", ac.rows, ac.n, ac.w_o,
             ac.w_h, ac.off_o, ac.off_x);
    static const char *names[3] = {"x", "h", "o"};
    for (int i = 0; i < 3; i++) {
        CHECK(close_enough(got[0][i], ref[i], len, 1e-5, what));
        CHECK(same_bytes(got[0][i], got[1][i], bytes, what, names[i]));
        free(got[0][i]), free(got[1][i]), free(ref[i]);
    }
    be->i->weight_clear(be, &dwo), be->i->weight_clear(be, &dwh);
    free(x), free(o), free(go), free(gh);
}

static void test_add_rmsnorm(void)
{
    if (!be->i->add_rmsnorm) {
        printf("  add_rmsnorm: not offered (GLIM_CUDA_FUSE=0?), skipped\n");
        return;
    }
    /* Muse Glimmer width on the float4 kernel, 1..5 rows, weighted or not */
    for (int rows = 1; rows <= 5; rows++)
        check_add_rmsnorm((struct add_norm_case){rows, 6656, true, rows != 3, 0, 0});
    check_add_rmsnorm((struct add_norm_case){2, 6656, false, true, 0, 0});
    /* float4 kernel edges (1024, 8192, partial last pass) and strided rows (ragged,
     * short, > 8192) */
    static const int NS[] = {1024, 8192, 4100, 6659, 1000, 64, 7, 130, 4096, 12288};
    for (int i = 0; i < 10; i++)
        check_add_rmsnorm((struct add_norm_case){rndi(1, 5), NS[i], true, true, 0, 0});
    /* misaligned: both norms strided; or only one of them (the op runs the sequence) */
    check_add_rmsnorm((struct add_norm_case){3, 6656, true, true, 1, 1});
    check_add_rmsnorm((struct add_norm_case){2, 6656, true, true, 0, 1});
    check_add_rmsnorm((struct add_norm_case){2, 6656, true, true, 1, 0});
}

/* add_rmsnorm also writes h's int8 copy for the next matmul (n % 256 == 0, float4 kernel):
 * the matmul that reuses it must give the bits of one that quantizes h itself. */
static void check_add_rmsnorm_xq(int rows, uint32_t type, int64_t n_out)
{
    const int n = 6656;
    struct glim_err err = {0};
    int64_t len = (int64_t)rows * n;
    size_t bytes = (size_t)len * 4, yb = (size_t)rows * n_out * 4;
    float *x = rand_vec(len, 4.0f), *o = rand_vec(len, 50.0f), *gw = rand_vec(n, 2.0f);
    struct be_weight hwn, dwn, hw = make_weight(type, n, n_out), dw = hw;
    norm_weight(gw, n, &hwn, &dwn);
    CHECK_EQ(be->i->weight_init(be, &dw, &err), GLIM_OK);
    float *X = to_dev(x, bytes), *O = to_dev(o, bytes), *H = be->i->alloc(be, bytes), *H2 = be->i->alloc(be, bytes);
    float *Y = be->i->alloc(be, yb), *Y2 = be->i->alloc(be, yb);
    be->i->add_rmsnorm(be, X, H, O, &dwn, 1e-8f, &dwn, 1e-6f, rows, n);
    be->i->matmul(be, Y, &dw, H, rows);                 /* reuses the fused copy */
    be->i->copy_rows(be, H2, n, H, n, rows, n);         /* same h elsewhere: quantized anew */
    be->i->matmul(be, Y2, &dw, H2, rows);
    float *a = malloc(yb), *b = malloc(yb), *hh = malloc(bytes), *ref = malloc(yb);
    from_dev(a, Y, yb), from_dev(b, Y2, yb), from_dev(hh, H, bytes);
    char what[96];
    snprintf(what, sizeof what, "add_rmsnorm int8 copy rows %d %s", rows, quant_type_name(type));
    if (memcmp(a, b, yb) != 0)
        fprintf(stderr, "FAIL %s: reused copy differs\n", what);
    CHECK(memcmp(a, b, yb) == 0);
    cpu_ref_matmul(ref, &hw, hh, rows);
    CHECK(close_enough(a, ref, (int64_t)rows * n_out, 1e-2, what));
    be->i->release(be, X), be->i->release(be, O), be->i->release(be, H), be->i->release(be, H2);
    be->i->release(be, Y), be->i->release(be, Y2), be->i->weight_clear(be, &dw), be->i->weight_clear(be, &dwn);
    free(x), free(o), free(gw), free(a), free(b), free(hh), free(ref), free((void *)hw.host);
}

static void test_add_rmsnorm_xq(void)
{
    if (!be->i->add_rmsnorm)
        return;
    check_add_rmsnorm_xq(1, GLIM_TYPE_Q4_K, 4096 + 3);
    check_add_rmsnorm_xq(3, GLIM_TYPE_Q6_K, 256);
    check_add_rmsnorm_xq(2, GLIM_TYPE_Q5_K, 100);
    check_add_rmsnorm_xq(1, GLIM_TYPE_Q8_0, 70);   /* other layout: quantized anew, still right */
}

struct prep_case {
    uint32_t kv_type;
    int n_head, n_head_kv, head_dim;
    int n_rot;                 /* 0 = no RoPE */
    bool neox, q_norm, k_norm;
    bool keys_only;            /* q = NULL (DFlash context injection) */
    float base;
    int64_t n_slots;
    int n_tokens;              /* <= 8 */
    int32_t p0;                /* positions p0 .. p0 + n_tokens - 1 */
    bool graph;                /* fused op captured, positions uploaded after the capture */
    bool table;                /* fused op reads the step's RoPE table (rope_table) */
};

/* one GPU run of a prep case: fused (attn_prep) or the separate ops; out = q, k, k cache, v cache */
static void run_attn_prep(struct prep_case pc, bool fused, const float *const in[3], const void *cache0,
                          const int32_t *pos, const struct be_weight *wq, const struct be_weight *wk, void *out[4])
{
    struct glim_err err = {0};
    int T = pc.n_tokens, D = pc.head_dim, H = pc.n_head, Hkv = pc.n_head_kv;
    size_t qb = (size_t)T * H * D * 4, kb = (size_t)T * Hkv * D * 4;
    size_t cb = (size_t)pc.n_slots * Hkv * D * kv_elem(pc.kv_type);
    float *dq = to_dev(in[0], qb), *dk = to_dev(in[1], kb), *dv = to_dev(in[2], kb);
    void *dkc = to_dev(cache0, cb), *dvc = to_dev((const uint8_t *)cache0 + cb, cb);
    int32_t *dpos = be->i->alloc(be, (size_t)T * 4);
    float eps = 1e-6f;
    if (!pc.graph || !fused)   /* a captured op reads the positions uploaded after the capture */
        CHECK_EQ(be->i->upload(be, dpos, pos, (size_t)T * 4, &err), GLIM_OK);
    if (fused) {
        struct be_attn_prep_args a = {
            .q = pc.keys_only ? NULL : dq, .k = dk, .v = dv, .q_norm = pc.q_norm ? wq : NULL,
            .k_norm = pc.k_norm ? wk : NULL, .eps = eps, .rope = pc.n_rot > 0, .neox = pc.neox,
            .n_rot = pc.n_rot, .rope_base = pc.base, .k_cache = dkc, .v_cache = dvc, .kv_type = pc.kv_type,
            .n_slots = pc.n_slots, .n_tokens = T, .pos = dpos, .n_head = H, .n_head_kv = Hkv, .head_dim = D,
        };
        void *graph = NULL;
        float *cs = pc.table ? be->i->alloc(be, (size_t)T * (pc.n_rot / 2) * 8) : NULL;
        if (pc.graph)
            CHECK_EQ(be->i->graph_begin(be, &err), GLIM_OK);
        if (cs) {
            CHECK_EQ(backend_cuda_rope_table(be, cs, dpos, T, pc.n_rot, pc.base), 0);
            a.rope_cs = cs;
        }
        be->i->attn_prep(be, &a);
        if (pc.graph) {
            CHECK_EQ(be->i->graph_end(be, &graph, &err), GLIM_OK);
            CHECK_EQ(be->i->upload(be, dpos, pos, (size_t)T * 4, &err), GLIM_OK);
            if (graph)
                CHECK_EQ(be->i->graph_launch(be, graph, &err), GLIM_OK);
            be->i->graph_free(be, graph);
        }
        be->i->release(be, cs);
    } else {
        bool q = !pc.keys_only;
        if (q && pc.q_norm)
            be->i->rmsnorm(be, dq, dq, wq, (int64_t)T * H, D, eps);
        if (pc.k_norm)
            be->i->rmsnorm(be, dk, dk, wk, (int64_t)T * Hkv, D, eps);
        if (pc.n_rot > 0) {
            if (q)
                be->i->rope(be, dq, T, H, D, pc.n_rot, dpos, pc.base, pc.neox);
            be->i->rope(be, dk, T, Hkv, D, pc.n_rot, dpos, pc.base, pc.neox);
        }
        be->i->kv_store(be, dkc, dvc, pc.kv_type, pc.n_slots, dk, dv, T, dpos, Hkv * D);
    }
    const void *dev[4] = {dq, dk, dkc, dvc};
    size_t nb[4] = {qb, kb, cb, cb};
    for (int i = 0; i < 4; i++) {
        out[i] = malloc(nb[i]);
        from_dev(out[i], dev[i], nb[i]);
    }
    be->i->release(be, dq), be->i->release(be, dk), be->i->release(be, dv);
    be->i->release(be, dkc), be->i->release(be, dvc), be->i->release(be, dpos);
}

static void check_attn_prep(struct prep_case pc)
{
    int T = pc.n_tokens, D = pc.head_dim, H = pc.n_head, Hkv = pc.n_head_kv;
    int64_t qn = (int64_t)T * H * D, kn = (int64_t)T * Hkv * D;
    size_t cb = (size_t)pc.n_slots * Hkv * D * kv_elem(pc.kv_type);
    int32_t pos[8];
    for (int t = 0; t < T; t++)
        pos[t] = pc.p0 + t;
    float *q = rand_vec(qn, 3.0f), *k = rand_vec(kn, 3.0f), *v = rand_vec(kn, 2.0f);
    float *gq = rand_vec(D, 2.0f), *gk = rand_vec(D, 2.0f);
    uint8_t *cache0 = malloc(2 * cb);   /* k cache, then v cache: old contents stay where not stored */
    for (size_t i = 0; i < 2 * cb; i++)
        cache0[i] = (uint8_t)rnd();
    struct be_weight hwq, dwq, hwk, dwk;
    norm_weight(gq, D, &hwq, &dwq);
    norm_weight(gk, D, &hwk, &dwk);
    /* CPU: the op sequence the fused op replaces */
    float *rq = malloc((size_t)qn * 4), *rk = malloc((size_t)kn * 4);
    memcpy(rq, q, (size_t)qn * 4);
    memcpy(rk, k, (size_t)kn * 4);
    if (pc.q_norm && !pc.keys_only)
        cpu_ref_rmsnorm(rq, rq, &hwq, (int64_t)T * H, D, 1e-6f);
    if (pc.k_norm)
        cpu_ref_rmsnorm(rk, rk, &hwk, (int64_t)T * Hkv, D, 1e-6f);
    if (pc.n_rot > 0) {
        if (!pc.keys_only)
            cpu_ref_rope(rq, T, H, D, pc.n_rot, pos, pc.base, pc.neox);
        cpu_ref_rope(rk, T, Hkv, D, pc.n_rot, pos, pc.base, pc.neox);
    }
    const float *in[3] = {q, k, v};
    void *f[4], *sep[4];   /* q, k, k cache, v cache */
    run_attn_prep(pc, true, in, cache0, pos, &dwq, &dwk, f);
    run_attn_prep(pc, false, in, cache0, pos, &dwq, &dwk, sep);
    char what[200];
    snprintf(what, sizeof what,
             "attn_prep %s heads %d/%d dim %d rot %d%s norms %d/%d%s slots %lld tokens %d p0 %d%s",
             quant_type_name(pc.kv_type), H, Hkv, D, pc.n_rot, pc.neox ? " neox" : "", pc.q_norm, pc.k_norm,
             pc.keys_only ? " keys only" : "", (long long)pc.n_slots, T, pc.p0, pc.graph ? " graph" : "");
    if (!pc.keys_only)
        CHECK(close_enough(f[0], rq, qn, 1e-5, what));
    CHECK(close_enough(f[1], rk, kn, 1e-5, what));
    /* the caches: exactly kv_store of the k it returned, elsewhere untouched */
    cpu_ref_kv_store(cache0, cache0 + cb, pc.kv_type, pc.n_slots, f[1], v, T, pos, Hkv * D);
    CHECK(memcmp(f[2], cache0, cb) == 0 && memcmp(f[3], cache0 + cb, cb) == 0);
    size_t nb[4] = {(size_t)qn * 4, (size_t)kn * 4, cb, cb};
    static const char *names[4] = {"q", "k", "k cache", "v cache"};
    void *tab[4] = {NULL, NULL, NULL, NULL};   /* with the step's RoPE table: the same bits */
    if (pc.n_rot > 0) {
        struct prep_case pt = pc;
        pt.table = true;
        run_attn_prep(pt, true, in, cache0, pos, &dwq, &dwk, tab);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(same_bytes(f[i], sep[i], nb[i], what, names[i]));
        if (tab[i])
            CHECK(same_bytes(tab[i], sep[i], nb[i], what, i ? names[i] : "q (rope table)"));
        free(f[i]), free(sep[i]), free(tab[i]);
    }
    be->i->weight_clear(be, &dwq), be->i->weight_clear(be, &dwk);
    free(q), free(k), free(v), free(gq), free(gk), free(cache0), free(rq), free(rk);
}

static void test_attn_prep(void)
{
    if (!be->i->attn_prep) {
        printf("  attn_prep: not offered (GLIM_CUDA_FUSE=0?), skipped\n");
        return;
    }
    static const uint32_t KV[] = {GLIM_TYPE_F32, GLIM_TYPE_F16, GLIM_TYPE_BF16};
    /* kv, heads, kv heads, head_dim, n_rot, neox, q/k norm, keys only, base, slots, tokens, p0, graph */
#define PREP(...) check_attn_prep((struct prep_case){__VA_ARGS__, false})
    for (int i = 0; i < 3; i++) {
        uint32_t kt = KV[i];
        /* Muse Glimmer: sliding layer (QK-norm + NORM RoPE) on a wrapped ring, decode and
         * prefill rows; global layer (QK-norm, NoPE) at positions up to 131000 */
        PREP(kt, 32, 2, 128, 128, false, true, true, false, 10000, 2560, 1, 9999, false);
        PREP(kt, 32, 2, 128, 128, false, true, true, false, 10000, 2560, 5, 2558, false);
        PREP(kt, 32, 2, 128, 0, false, true, true, false, 0, 4096, 3, 130998, false);
        PREP(kt, 32, 2, 128, 128, false, true, true, false, 1e6f, 4096, 2, 131000, false);
        /* GQA 16:1, head_dim 64 and 256, NEOX; odd head_dim 80 */
        PREP(kt, 16, 1, 64, 64, true, true, true, false, 10000, 300, 4, 130990, false);
        PREP(kt, 8, 2, 256, 256, false, true, true, false, 500000, 96, 2, 1000, false);
        PREP(kt, 8, 2, 256, 256, true, true, false, false, 10000, 64, 3, 5, false);
        PREP(kt, 10, 2, 80, 80, false, false, true, false, 10000, 200, 1, 77, false);
        /* llama: no QK-norm, partial rotary (NEOX 64 of 128, NORM 32 of 128); then no norm
         * and no RoPE: kv_store only */
        PREP(kt, 8, 8, 128, 64, true, false, false, false, 10000, 512, 5, 700, false);
        PREP(kt, 8, 8, 128, 32, false, false, false, false, 10000, 512, 1, 0, false);
        PREP(kt, 4, 2, 64, 0, false, false, false, false, 0, 64, 3, 10, false);
        /* DFlash context injection: keys only, k-norm + NEOX */
        PREP(kt, 32, 8, 128, 128, true, false, true, true, 10000, 300, 5, 250, false);
    }
    /* replayed as a graph: positions read at launch */
    PREP(GLIM_TYPE_F16, 32, 2, 128, 128, false, true, true, false, 10000, 2560, 1, 4242, true);
#undef PREP
}

/* matmul_attn_prep (q/k/v/gate GEMV + attn_prep; folded into the GEMV for one token) against
 * matmul_n then attn_prep: q, k, v, gate and both caches bit for bit, and the fold taken where
 * it should be (one token, GEMV v3) */
/* What matmul_attn_prep may fold or fork must not change a bit: FOLD runs attn_prep in the GEMV
 * (GLIM_CUDA_PREP_FOLD), SIDE and SIDE_GRAPH the gate part's GEMV on the side stream
 * (GLIM_CUDA_GATE_SIDE) eagerly or from a graph, followed by attention and an op that reads the gate
 * (the join). Pass 0 has the feature on, pass 1 off; want: pass 0 takes it. */
enum { FOLD, SIDE, SIDE_GRAPH, GFOLD, GFOLD_GRAPH, SHORT, SHORT_GRAPH };

static long prep_feature(int mode, bool on)   /* the switch; returns its use count */
{
    if (mode == FOLD) {
        CHECK_EQ(backend_cuda_set_prep_fold(be, on), GLIM_OK);
        return backend_cuda_prep_used(be);
    }
    if (mode >= SHORT) {   /* the short kernel (attn_short.cu): its bits are its own */
        CHECK_EQ(backend_cuda_set_attn_short(be, on), GLIM_OK);
        return backend_cuda_short_used(be);
    }
    if (mode >= GFOLD) {   /* the gate on the side stream both times */
        CHECK_EQ(backend_cuda_set_gate_side(be, 2), GLIM_OK);
        CHECK_EQ(backend_cuda_set_gate_fold(be, on), GLIM_OK);
        return backend_cuda_att_used(be);
    }
    CHECK_EQ(backend_cuda_set_gate_side(be, on ? 2 : 0), GLIM_OK);
    return backend_cuda_side_used(be);
}

/* q, k, v and the output gate of H query heads and Hkv KV heads (head_dim D) over rows of k on the
 * device, v of vtype, the rest Q4_K, their row counts in rows; tiled: bit i puts weight i in 16-row
 * tiles (-1: as the backend's setting has it). false (checked) if one failed (weights_free clears
 * them all the same) */
static bool qkvg_weights(uint32_t vtype, int H, int Hkv, int D, int64_t k, int tiled, int64_t rows[4],
                         struct be_weight *hw, struct be_weight *dw)
{
    struct glim_err err = {0};
    uint32_t types[4] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, vtype, GLIM_TYPE_Q4_K};
    int64_t r[4] = {(int64_t)H * D, (int64_t)Hkv * D, (int64_t)Hkv * D, (int64_t)H * D};
    bool ok = true;
    for (int i = 0; i < 4; i++) {
        if (tiled >= 0)
            CHECK_EQ(backend_cuda_set_t16(be, (tiled >> i) & 1), GLIM_OK);
        rows[i] = r[i];
        hw[i] = make_weight(types[i], k, rows[i]);
        dw[i] = hw[i];
        ok = be->i->weight_init(be, &dw[i], &err) == GLIM_OK && ok;
    }
    if (tiled >= 0)
        CHECK_EQ(backend_cuda_set_t16(be, t16_env()), GLIM_OK);
    CHECK(ok);
    return ok;
}

static int fold_window;   /* the attention's window in check_prep_fold_t (test_attn_short sets it) */

/* max |a - b| <= rel * max |b| over n floats, else the worst element printed */
static bool close_floats(const float *a, const float *b, size_t n, double rel, const char *what, const char *which)
{
    double mx = 0.0, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst))   /* NaN too */
            worst = d, at = i;
    }
    if (worst <= rel * mx)
        return true;
    fprintf(stderr, "%s: %s differs by %.3g at %zu (%g vs %g; max |x| %.3g, allowed %.3g)\n", what, which, worst, at,
            a[at], b[at], mx, rel * mx);
    return false;
}

static void check_prep_fold_t(int tiled, int mode, uint32_t vtype, int H, int Hkv, int D, int n_rot, bool neox,
                              bool norms, int64_t k, int T, int32_t p0, uint32_t kv_type, bool want)
{
    struct glim_err err = {0};
    int window = fold_window;
    int64_t rows[4];
    struct be_weight hw[4], dw[4];
    bool ok = qkvg_weights(vtype, H, Hkv, D, k, tiled, rows, hw, dw);
    float *gq = rand_vec(D, 2.0f), *gk = rand_vec(D, 2.0f), *h = rand_vec(k * T, 1.0f);
    struct be_weight hwq, dwq, hwk, dwk;
    norm_weight(gq, D, &hwq, &dwq);
    norm_weight(gk, D, &hwk, &dwk);
    int64_t n_slots = 300;
    size_t cb = (size_t)n_slots * Hkv * D * kv_elem(kv_type), yb[8];
    uint8_t *cache0 = malloc(2 * cb);
    for (size_t i = 0; i < 2 * cb; i++)
        cache0[i] = (uint8_t)rnd();
    if (mode >= SHORT) {   /* finite keys and values: the comparison is within a tolerance, not of bytes */
        int64_t kv_dim = (int64_t)Hkv * D;
        float *fk = rand_vec(n_slots * kv_dim, 3.0f), *fv = rand_vec(n_slots * kv_dim, 2.0f);
        int32_t *fill = malloc((size_t)n_slots * 4);
        for (int64_t i = 0; i < n_slots; i++)
            fill[i] = (int32_t)i;
        cpu_ref_kv_store(cache0, cache0 + cb, kv_type, n_slots, fk, fv, (int)n_slots, fill, kv_dim);
        free(fk), free(fv), free(fill);
    }
    int32_t pos[4];
    for (int t = 0; t < T; t++)
        pos[t] = p0 + t;
    void *out[2][8];
    long used[2];
    /* q, k, v, gate, the caches (, attention * sigmoid(gate); with the gate fold attention, then Wo
     * of attention * sigmoid(gate): matmul_glu, whose input the fold makes) */
    int n_out = mode == FOLD ? 6 : mode >= GFOLD ? 8 : 7;
    struct be_weight hwo = {0}, dwo = {0};
    if (mode >= GFOLD) {
        hwo = dwo = make_weight(GLIM_TYPE_Q4_K, rows[0], k);
        ok = be->i->weight_init(be, &dwo, &err) == GLIM_OK && ok;
    }
    for (int pass = 0; ok && pass < 2; pass++) {
        long used0 = prep_feature(mode, pass == 0);
        float *dh = to_dev(h, (size_t)k * T * 4), *ys[5];
        for (int i = 0; i < 5; i++) {
            yb[i < 4 ? i : 6] = (size_t)rows[i < 4 ? i : 0] * T * 4;
            ys[i] = be->i->alloc(be, yb[i < 4 ? i : 6]);
        }
        void *dkc = to_dev(cache0, cb), *dvc = to_dev(cache0 + cb, cb);
        int32_t *dpos = to_dev(pos, (size_t)T * 4);
        struct be_attn_prep_args a = {
            .q = ys[0], .k = ys[1], .v = ys[2], .q_norm = norms ? &dwq : NULL, .k_norm = norms ? &dwk : NULL,
            .eps = 1e-6f, .rope = n_rot > 0, .neox = neox, .n_rot = n_rot, .rope_base = 10000.0f,
            .k_cache = dkc, .v_cache = dvc, .kv_type = kv_type, .n_slots = n_slots, .n_tokens = T, .pos = dpos,
            .n_head = H, .n_head_kv = Hkv, .head_dim = D, .pos_host0 = p0,
        };
        struct be_attn_args aa = {.out = ys[4], .q = ys[0], .k_cache = dkc, .v_cache = dvc, .kv_type = kv_type,
                                  .n_slots = n_slots, .n_tokens = T, .pos = dpos, .pos_host0 = p0, .n_head = H,
                                  .n_head_kv = Hkv, .head_dim = D, .window = window,
                                  .scale = 1.0f / sqrtf((float)D), .block = 0};
        const struct be_weight *ws[4] = {&dw[0], &dw[1], &dw[2], &dw[3]};
        void *graph = NULL;
        bool graphed = (mode == SIDE_GRAPH || mode == GFOLD_GRAPH || mode == SHORT_GRAPH) && pass == 0;
        float *ywo = mode >= GFOLD ? be->i->alloc(be, (size_t)k * T * 4) : NULL;
        if (graphed)
            CHECK_EQ(be->i->graph_begin(be, &err), GLIM_OK);
        be->i->matmul_attn_prep(be, 4, ys, ws, dh, T, &a);
        if (mode >= GFOLD) {
            be->i->attention(be, &aa);
            be->i->matmul_glu(be, ywo, &dwo, ys[4], ys[3], BE_GLU_SIGMOID, T);
        } else if (mode != FOLD) {
            be->i->attention(be, &aa);
            be->i->mul_sigmoid(be, ys[4], ys[3], (int64_t)rows[0] * T);   /* reads the gate: joins */
        }
        used[pass] = prep_feature(mode, false) - used0;
        if (graphed) {
            CHECK_EQ(be->i->graph_end(be, &graph, &err), GLIM_OK);
            CHECK(graph != NULL);
            if (graph)
                CHECK_EQ(be->i->graph_launch(be, graph, &err), GLIM_OK);
        }
        yb[4] = yb[5] = cb, yb[7] = (size_t)k * T * 4;
        void *src[8] = {ys[0], ys[1], ys[2], ys[3], dkc, dvc, ys[4], ywo};
        for (int i = 0; i < n_out; i++) {
            out[pass][i] = malloc(yb[i]);
            from_dev(out[pass][i], src[i], yb[i]);
        }
        be->i->graph_free(be, graph);
        for (int i = 0; i < 5; i++)
            be->i->release(be, ys[i]);
        be->i->release(be, dh), be->i->release(be, dkc), be->i->release(be, dvc), be->i->release(be, dpos);
        be->i->release(be, ywo);
    }
    if (ok) {
        char what[160];
        static const char *mode_names[] = {"prep_fold", "gate_side", "gate_side graph", "gate_fold", "gate_fold graph",
                                           "attn_short", "attn_short graph"};
        snprintf(what, sizeof what, "%s v %s heads %d/%d dim %d rot %d%s norms %d k %lld tokens %d p0 %d %s",
                 mode_names[mode], quant_type_name(vtype),
                 H, Hkv, D, n_rot, neox ? " neox" : "", norms, (long long)k, T, (int)p0, quant_type_name(kv_type));
        CHECK_EQ(used[0], want ? 1 : 0);
        CHECK_EQ(used[1], 0);
        const char *names[8] = {"q", "k", "v", "gate", "k cache", "v cache", "attention * gate", "Wo"};
        if (mode >= GFOLD)
            names[6] = "attention";
        for (int i = 0; i < n_out; i++) {
            if (mode >= SHORT && i < 2)    /* q and k: scratch after the attention (backend.h) */
                ;
            else if (mode >= SHORT && i == 6)   /* another summation order; Wo's int8 input may round apart */
                CHECK(close_floats(out[0][i], out[1][i], yb[i] / 4, 3e-4, what, names[i]));
            else if (mode >= SHORT && i == 7)
                CHECK(close_floats(out[0][i], out[1][i], yb[i] / 4, 2e-2, what, names[i]));
            else
                CHECK(same_bytes(out[0][i], out[1][i], yb[i], what, names[i]));
            free(out[0][i]), free(out[1][i]);
        }
    }
    be->i->weight_clear(be, &dwq), be->i->weight_clear(be, &dwk);
    weights_free(dw, hw, 4);
    weights_free(&dwo, &hwo, mode >= GFOLD);
    free(gq), free(gk), free(h), free(cache0);
}

/* row-major weights (v3's, whatever GLIM_CUDA_T16 says; the side stream takes no weight in tiles) */
static void check_prep_fold(int mode, uint32_t vtype, int H, int Hkv, int D, int n_rot, bool neox, bool norms,
                            int64_t k, int T, int32_t p0, uint32_t kv_type, bool want)
{
    check_prep_fold_t(0, mode, vtype, H, Hkv, D, n_rot, neox, norms, k, T, p0, kv_type, want);
}

static void test_prep_fold(void)
{
    if (!be->i->matmul_attn_prep || exact_mode) {
        printf("  matmul_attn_prep: not offered (GLIM_CUDA_FUSE=0?) or exact, skipped\n");
        return;
    }
    int ver = backend_cuda_get_gemv(be), persist0 = backend_cuda_get_gemv_persist(be);
    bool v3 = ver == 3;   /* the fold lives in GEMV v3 (plain and persistent) */
    for (int p = 0; p <= 1; p++) {
        CHECK_EQ(backend_cuda_set_gemv_persist(be, p ? (persist0 ? persist0 : 4) : 0), GLIM_OK);
        /* Muse Glimmer: a sliding layer (QK-norm, NORM RoPE; v Q6_K: mixed kinds, the plain v3), a
         * global one (NoPE), one kind (the persistent v3 when on) */
        check_prep_fold(FOLD, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 1, 4242, GLIM_TYPE_BF16, v3);
        check_prep_fold(FOLD, GLIM_TYPE_Q6_K, 32, 2, 128, 0, false, true, 1024, 1, 299, GLIM_TYPE_BF16, v3);
        check_prep_fold(FOLD, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 2048, 1, 7, GLIM_TYPE_F16, v3);
        /* head_dim 64 NEOX, 256, 80 (rows per warp divide it); no norms (llama); F32 cache */
        check_prep_fold(FOLD, GLIM_TYPE_Q4_K, 16, 1, 64, 64, true, true, 512, 1, 1000, GLIM_TYPE_F32, v3);
        check_prep_fold(FOLD, GLIM_TYPE_Q6_K, 8, 2, 256, 256, false, true, 512, 1, 5, GLIM_TYPE_BF16, v3);
        check_prep_fold(FOLD, GLIM_TYPE_Q4_K, 10, 2, 80, 80, false, false, 256, 1, 77, GLIM_TYPE_F16, v3);
        check_prep_fold(FOLD, GLIM_TYPE_Q4_K, 8, 8, 128, 32, false, false, 256, 1, 3, GLIM_TYPE_F32, v3);
        /* more than one token: the two ops */
        check_prep_fold(FOLD, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 3, 100, GLIM_TYPE_BF16, false);
    }
    CHECK_EQ(backend_cuda_set_gemv_persist(be, persist0), GLIM_OK);
    /* q/k/v and the gate in tiles (v5's): v5 does not fold attn_prep, the two ops give the same bits */
    check_prep_fold_t(15, FOLD, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 2048, 1, 7, GLIM_TYPE_BF16, false);
    check_prep_fold_t(15, FOLD, GLIM_TYPE_Q6_K, 32, 2, 128, 0, false, true, 1024, 1, 299, GLIM_TYPE_F16, false);
    check_prep_fold_t(15, FOLD, GLIM_TYPE_Q4_K, 4, 2, 64, 0, false, false, 256, 1, 10, GLIM_TYPE_F32, false);   /* keys only */
    check_prep_fold_t(7, FOLD, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 1024, 1, 7, GLIM_TYPE_BF16, false);   /* gate row-major */
    check_prep_fold_t(15, FOLD, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 1024, 3, 100, GLIM_TYPE_BF16, false);
    if (backend_cuda_set_gemv(be, 2) == GLIM_OK)   /* v2: no fold, same bits */
        check_prep_fold(FOLD, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 1, 4242, GLIM_TYPE_BF16, false);
    CHECK_EQ(backend_cuda_set_gemv(be, ver), GLIM_OK);
}

/* the output gate's GEMV on the side stream (GLIM_CUDA_GATE_SIDE): one token of a one-row v3 job
 * only; the Muse Glimmer shapes, a Q4_K v (one kind), and more tokens (not taken) */
static void test_gate_side(void)
{
    if (!be->i->matmul_attn_prep || exact_mode || backend_cuda_get_gemv(be) != 3) {
        printf("  matmul_attn_prep: not offered (GLIM_CUDA_FUSE=0?), exact or not GEMV v3: skipped\n");
        return;
    }
    int side0 = backend_cuda_get_gate_side(be);
    for (int mode = SIDE; mode <= SIDE_GRAPH; mode++) {
        check_prep_fold(mode, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 1, 4242, GLIM_TYPE_BF16, true);
        check_prep_fold(mode, GLIM_TYPE_Q6_K, 32, 2, 128, 0, false, true, 2048, 1, 299, GLIM_TYPE_F16, true);
        check_prep_fold(mode, GLIM_TYPE_Q4_K, 16, 1, 64, 64, true, true, 512, 1, 1000, GLIM_TYPE_BF16, true);
    }
    check_prep_fold(SIDE, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 3, 100, GLIM_TYPE_BF16, false);
    CHECK_EQ(backend_cuda_set_gate_side(be, side0), GLIM_OK);
}

/* The gate fold (GLIM_CUDA_GATE_FOLD): attention's combine makes Wo's int8 input, out * sigmoid(gate)
 * with the side stream's gate, which matmul_glu takes instead of quantizing: the attention, Wo's
 * output and everything before them bit for bit against the fold off, eagerly and in a graph. One
 * token and head_dim 128 only (several splits, one split, a global layer); more tokens and
 * head_dim 64 are not taken. */
static void test_gate_fold(void)
{
    if (!be->i->matmul_attn_prep || !be->i->matmul_glu || exact_mode || backend_cuda_get_gemv(be) != 3) {
        printf("  matmul_attn_prep / matmul_glu: not offered, exact or not GEMV v3: skipped\n");
        return;
    }
    int side0 = backend_cuda_get_gate_side(be), fold0 = backend_cuda_get_gate_fold(be);
    for (int mode = GFOLD; mode <= GFOLD_GRAPH; mode++) {
        check_prep_fold(mode, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 1, 4242, GLIM_TYPE_BF16, true);
        check_prep_fold(mode, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 2048, 1, 40, GLIM_TYPE_F16, true);
        check_prep_fold(mode, GLIM_TYPE_Q6_K, 32, 2, 128, 0, false, true, 2048, 1, 299, GLIM_TYPE_F16, true);
    }
    check_prep_fold(GFOLD, GLIM_TYPE_Q6_K, 32, 2, 128, 128, false, true, 1024, 3, 100, GLIM_TYPE_BF16, false);
    check_prep_fold(GFOLD, GLIM_TYPE_Q4_K, 16, 1, 64, 64, true, true, 512, 1, 1000, GLIM_TYPE_BF16, false);
    CHECK_EQ(backend_cuda_set_gate_fold(be, fold0 == 1), GLIM_OK);
    CHECK_EQ(backend_cuda_set_gate_side(be, side0), GLIM_OK);
}

/* The short kernel (attn_short.cu, GLIM_CUDA_ATTN_SHORT): one decode token at a position below
 * CUDA_SHORT_KEYS takes attn_prep, attention and the output gate into Wo's int8 input in one launch
 * after matmul_attn_prep; against the split kernels, v, the gate and both caches bit for bit (q and k
 * are scratch after the attention),
 * the attention within 3e-4 of its largest value (another order of sums: ~1e-5 with QK-norm, ~1e-4
 * without, where the scores are large; H200 2026-12-05) and Wo within 2e-2 (its
 * int8 input may round apart), eagerly and in a graph; with the gate on the side stream or in the
 * q/k/v job. Not taken: more tokens, a position past the limit, head_dim 64, an F32 cache. */
static void test_attn_short(void)
{
    if (!be->i->matmul_attn_prep || !be->i->matmul_glu || exact_mode || backend_cuda_get_gemv(be) != 3) {
        printf("  matmul_attn_prep / matmul_glu: not offered, exact or not GEMV v3: skipped\n");
        return;
    }
    static const struct {
        uint32_t v, kv;
        int      H, rot, window;
        bool     neox, norms;
        int64_t  k;
        int32_t  p0;
    } cases[] = {
        /* Muse Glimmer: sliding (QK-norm, NORM RoPE) and global (NoPE) layers, v Q6_K or Q4_K, the
         * first position, the last the kernel takes, a warp's 32 keys and one more */
        {GLIM_TYPE_Q6_K, GLIM_TYPE_BF16, 32, 128, 0, false, true, 1024, 200},
        {GLIM_TYPE_Q4_K, GLIM_TYPE_F16, 32, 128, 0, false, true, 2048, 0},
        {GLIM_TYPE_Q6_K, GLIM_TYPE_F16, 32, 0, 0, false, true, 2048, 255},
        {GLIM_TYPE_Q4_K, GLIM_TYPE_BF16, 32, 0, 0, false, true, 1024, 31},
        {GLIM_TYPE_Q4_K, GLIM_TYPE_F16, 32, 0, 0, false, true, 1024, 32},
        /* NEOX, partial rotation, no norms, 8 heads a group; a window that hides the first keys */
        {GLIM_TYPE_Q4_K, GLIM_TYPE_BF16, 16, 64, 0, true, false, 1024, 100},
        {GLIM_TYPE_Q4_K, GLIM_TYPE_F16, 32, 128, 100, false, true, 1024, 222},
    };
    int side0 = backend_cuda_get_gate_side(be);
    for (int side = 3; side >= 0; side--) {   /* the side gate's flag polled (3: 2 CTAs an SM) or joined (2), in the job (0) */
        if (side == 1)
            continue;
        CHECK_EQ(backend_cuda_set_short_poll(be, side == 3), GLIM_OK);
        for (int mode = SHORT; mode <= SHORT_GRAPH; mode++) {
            CHECK_EQ(backend_cuda_set_gate_side(be, side == 3 ? 2 : side), GLIM_OK);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                fold_window = cases[i].window;
                check_prep_fold(mode, cases[i].v, cases[i].H, 2, 128, cases[i].rot, cases[i].neox, cases[i].norms,
                                cases[i].k, 1, cases[i].p0, cases[i].kv, true);
            }
            fold_window = 0;
        }
    }
    CHECK_EQ(backend_cuda_set_gate_side(be, 2), GLIM_OK);
    check_prep_fold(SHORT, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 1024, 1, 256, GLIM_TYPE_F16, false);
    check_prep_fold(SHORT, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 1024, 3, 10, GLIM_TYPE_F16, false);
    check_prep_fold(SHORT, GLIM_TYPE_Q4_K, 16, 1, 64, 64, true, true, 512, 1, 10, GLIM_TYPE_BF16, false);
    check_prep_fold(SHORT, GLIM_TYPE_Q4_K, 32, 2, 128, 128, false, true, 1024, 1, 10, GLIM_TYPE_F32, false);
    CHECK_EQ(backend_cuda_set_attn_short(be, false), GLIM_OK);
    CHECK_EQ(backend_cuda_set_short_poll(be, true), GLIM_OK);
    CHECK_EQ(backend_cuda_set_gate_side(be, side0), GLIM_OK);
}

/* end the open capture, replay the graph once and free it (each step checked) */
static void graph_end_replay(void)
{
    struct glim_err err = {0};
    void *graph = NULL;
    CHECK_EQ(be->i->graph_end(be, &graph, &err), GLIM_OK);
    CHECK(graph != NULL);
    if (graph)
        CHECK_EQ(be->i->graph_launch(be, graph, &err), GLIM_OK);
    be->i->graph_free(be, graph);
}

/* add_rmsnorm_attn (a layer's residual, the next attention norm, q/k/v/gate in 16-row tiles and
 * attn_prep) against add_rmsnorm then matmul_attn_prep on the same inputs, each followed by
 * attention and an op that reads the gate (the side stream's join): x, h, o, q, k, v, the gate,
 * both caches and attention * sigmoid(gate) bit for bit, the op run and captured in a graph and
 * replayed. side: a row-major gate, whose GEMV runs on the side stream; else a gate in tiles, in
 * the q/k/v job. skip (GLIM_CUDA_NORM_SCRATCH): the op may leave o and h unwritten (backend.h: scratch
 * afterwards), so everything but them. */
static void check_norm_qkv(uint32_t vtype, int H, int Hkv, int D, int64_t n, int T, bool side, bool weights,
                           bool skip)
{
    int ns0 = backend_cuda_get_norm_scratch(be);
    CHECK_EQ(backend_cuda_set_norm_scratch(be, skip), GLIM_OK);
    struct glim_err err = {0};
    int64_t rows[4];
    struct be_weight hw[4], dw[4];
    bool ok = qkvg_weights(vtype, H, Hkv, D, n, side ? 7 : 15, rows, hw, dw);
    int side0 = backend_cuda_get_gate_side(be);
    CHECK_EQ(backend_cuda_set_gate_side(be, side ? 2 : 0), GLIM_OK);
    float *x = rand_vec(n * T, 4.0f), *o = rand_vec(n * T, 50.0f), *go = rand_vec(n, 2.0f), *gh = rand_vec(n, 2.0f);
    float *gq = rand_vec(D, 2.0f), *gk = rand_vec(D, 2.0f);
    struct be_weight hwo, dwo, hwh, dwh, hwq, dwq, hwk, dwk;
    norm_weight(go, (int)n, &hwo, &dwo);
    norm_weight(gh, (int)n, &hwh, &dwh);
    norm_weight(gq, D, &hwq, &dwq);
    norm_weight(gk, D, &hwk, &dwk);
    int64_t n_slots = 300;
    size_t cb = (size_t)n_slots * Hkv * D * 2, nb = (size_t)n * T * 4, yb[11];
    uint8_t *cache0 = malloc(2 * cb);
    for (size_t i = 0; i < 2 * cb; i++)
        cache0[i] = (uint8_t)rnd();
    int32_t pos[4];
    for (int t = 0; t < T; t++)
        pos[t] = 1000 + t;
    void *out[3][11];
    CHECK_EQ(backend_cuda_set_prep_fold(be, false), GLIM_OK);
    for (int pass = 0; ok && pass < 3; pass++) {   /* the op, the op captured and replayed, the two ops */
        float *dx = to_dev(x, nb), *dh = be->i->alloc(be, nb), *dov = to_dev(o, nb), *ys[5];
        float *cs = be->i->alloc(be, (size_t)T * (D / 2) * 8);   /* the step's RoPE table, as the model has */
        for (int i = 0; i < 5; i++) {
            yb[i] = (size_t)rows[i < 4 ? i : 0] * T * 4;
            ys[i] = be->i->alloc(be, yb[i]);
        }
        void *dkc = to_dev(cache0, cb), *dvc = to_dev(cache0 + cb, cb);
        int32_t *dpos = to_dev(pos, (size_t)T * 4);
        struct be_attn_prep_args a = {
            .q = ys[0], .k = ys[1], .v = ys[2], .q_norm = &dwq, .k_norm = &dwk, .eps = 1e-6f, .rope = true,
            .n_rot = D, .rope_base = 10000.0f, .k_cache = dkc, .v_cache = dvc, .kv_type = GLIM_TYPE_BF16,
            .n_slots = n_slots, .n_tokens = T, .pos = dpos, .n_head = H, .n_head_kv = Hkv, .head_dim = D,
        };
        struct be_attn_args aa = {.out = ys[4], .q = ys[0], .k_cache = dkc, .v_cache = dvc,
                                  .kv_type = GLIM_TYPE_BF16, .n_slots = n_slots, .n_tokens = T, .pos = dpos,
                                  .pos_host0 = pos[0], .n_head = H, .n_head_kv = Hkv, .head_dim = D, .window = 0,
                                  .scale = 1.0f / sqrtf((float)D), .block = 0};
        const struct be_weight *ws[4] = {&dw[0], &dw[1], &dw[2], &dw[3]};
        const struct be_weight *wo = weights ? &dwo : NULL, *wh = weights ? &dwh : NULL;
        struct be_res_norm r = {dx, dh, dov, wo, wh, 1e-8f, 1e-6f, (int)n};
        if (pass == 1)
            CHECK_EQ(be->i->graph_begin(be, &err), GLIM_OK);
        CHECK_EQ(backend_cuda_rope_table(be, cs, dpos, T, D, 10000.0f), 0);
        a.rope_cs = cs;
        if (pass < 2) {
            be->i->add_rmsnorm_attn(be, &r, 4, ys, ws, T, &a);
        } else {
            be->i->add_rmsnorm(be, dx, dh, dov, wo, 1e-8f, wh, 1e-6f, T, (int)n);
            be->i->matmul_attn_prep(be, 4, ys, ws, dh, T, &a);
        }
        be->i->attention(be, &aa);
        be->i->mul_sigmoid(be, ys[4], ys[3], rows[0] * T);   /* reads the gate: joins */
        if (pass == 1) {
            graph_end_replay();
        }
        yb[5] = yb[6] = cb, yb[7] = yb[8] = yb[9] = nb;
        void *src[10] = {ys[0], ys[1], ys[2], ys[3], ys[4], dkc, dvc, dx, dh, dov};
        for (int i = 0; i < 10; i++) {
            out[pass][i] = malloc(yb[i]);
            from_dev(out[pass][i], src[i], yb[i]);
        }
        for (int i = 0; i < 5; i++)
            be->i->release(be, ys[i]);
        be->i->release(be, dx), be->i->release(be, dh), be->i->release(be, dov), be->i->release(be, cs);
        be->i->release(be, dkc), be->i->release(be, dvc), be->i->release(be, dpos);
    }
    if (ok) {
        char what[160];
        snprintf(what, sizeof what, "norm_qkv v %s heads %d/%d dim %d n %lld tokens %d side %d weights %d skip %d",
                 quant_type_name(vtype), H, Hkv, D, (long long)n, T, side, weights, skip);
        static const char *names[10] = {"q", "k", "v", "gate", "attention * gate", "k cache", "v cache", "x", "h", "o"};
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < (skip ? 8 : 10); i++)
                CHECK(same_bytes(out[pass][i], out[2][i], yb[i], what, names[i]));
        for (int pass = 0; pass < 3; pass++)
            for (int i = 0; i < 10; i++)
                free(out[pass][i]);
    }
    CHECK_EQ(backend_cuda_set_gate_side(be, side0), GLIM_OK);
    CHECK_EQ(backend_cuda_set_prep_fold(be, prep_env()), GLIM_OK);
    CHECK_EQ(backend_cuda_set_norm_scratch(be, ns0 == 1), GLIM_OK);
    be->i->weight_clear(be, &dwo), be->i->weight_clear(be, &dwh);
    be->i->weight_clear(be, &dwq), be->i->weight_clear(be, &dwk);
    weights_free(dw, hw, 4);
    free(x), free(o), free(go), free(gh), free(gq), free(gk), free(cache0);
}

static void test_norm_qkv(void)
{
    if (!be->i->add_rmsnorm_attn || exact_mode || backend_cuda_get_gemv(be) != 3) {
        fprintf(stderr, "  no add_rmsnorm_attn (GLIM_CUDA_FUSE=0), exact or not GEMV v3: skipped\n");
        return;
    }
    for (int skip = 0; skip < 2; skip++) {   /* o and h stored, or left out (GLIM_CUDA_NORM_SCRATCH) */
        /* the 30B shapes: v Q6_K or Q4_K, the gate on the side stream or in the job */
        check_norm_qkv(GLIM_TYPE_Q4_K, 32, 2, 128, 6656, 1, true, true, skip);
        check_norm_qkv(GLIM_TYPE_Q4_K, 32, 2, 128, 6656, 1, false, true, skip);
        check_norm_qkv(GLIM_TYPE_Q6_K, 32, 2, 128, 6656, 1, true, true, skip);
        check_norm_qkv(GLIM_TYPE_Q6_K, 32, 2, 128, 6656, 1, false, false, skip);
        /* smaller rows, head_dim 64 */
        check_norm_qkv(GLIM_TYPE_Q4_K, 8, 2, 128, 1024, 1, true, false, skip);
        check_norm_qkv(GLIM_TYPE_Q6_K, 16, 4, 64, 2048 + 256, 1, false, true, skip);
        /* a v whose matmul reads h itself (Q8_0: another int8 layout), so h must be stored */
        check_norm_qkv(GLIM_TYPE_Q8_0, 8, 2, 128, 1024, 1, true, true, skip);
        /* rows the float4 norm does not take, more than one token */
        check_norm_qkv(GLIM_TYPE_Q4_K, 8, 2, 64, 512, 1, true, true, skip);
        check_norm_qkv(GLIM_TYPE_Q4_K, 32, 2, 128, 6656, 3, true, true, skip);
    }
}

/* attention_prep (GLIM_CUDA_ATTN_PREP=1): attention v4 doing attn_prep's work for one decode
 * token gives the output and both caches bit for bit as attn_prep then attention do; shapes v4
 * does not take are refused with nothing launched */
static void check_attention_prep(uint32_t kv_type, int H, int Hkv, int D, int n_rot, bool neox, bool norms,
                                 int64_t n_slots, int window, int32_t p, bool want)
{
    struct glim_err err = {0};
    int kv_dim = Hkv * D, q_dim = H * D;
    size_t cb = (size_t)n_slots * kv_dim * kv_elem(kv_type);
    uint8_t *hc = malloc(2 * cb);
    float *fk = rand_vec(n_slots * kv_dim, 3.0f), *fv = rand_vec(n_slots * kv_dim, 2.0f);
    int32_t *fill = malloc((size_t)n_slots * 4);
    for (int64_t i = 0; i < n_slots; i++)
        fill[i] = (int32_t)i;
    cpu_ref_kv_store(hc, hc + cb, kv_type, n_slots, fk, fv, (int)n_slots, fill, kv_dim);
    float *q = rand_vec(q_dim, 2.0f), *k = rand_vec(kv_dim, 2.0f), *v = rand_vec(kv_dim, 2.0f);
    float *gq = rand_vec(D, 2.0f), *gk = rand_vec(D, 2.0f);
    struct be_weight hwq, dwq, hwk, dwk;
    norm_weight(gq, D, &hwq, &dwq);
    norm_weight(gk, D, &hwk, &dwk);
    uint8_t *got[2][3];
    size_t nb[3] = {(size_t)q_dim * 4, cb, cb};
    int ran = -1;
    for (int pass = 0; pass < 2; pass++) {   /* one launch, then the two ops */
        float *dq = to_dev(q, (size_t)q_dim * 4), *dk = to_dev(k, (size_t)kv_dim * 4), *dv = to_dev(v, (size_t)kv_dim * 4);
        void *dkc = to_dev(hc, cb), *dvc = to_dev(hc + cb, cb);
        int32_t *dpos = to_dev(&p, 4);
        float *dout = be->i->alloc(be, (size_t)q_dim * 4);
        CHECK_EQ(be->i->upload(be, dout, q, (size_t)q_dim * 4, &err), GLIM_OK);   /* not zeros */
        struct be_attn_prep_args pa = {
            .q = dq, .k = dk, .v = dv, .q_norm = norms ? &dwq : NULL, .k_norm = norms ? &dwk : NULL, .eps = 1e-6f,
            .rope = n_rot > 0, .neox = neox, .n_rot = n_rot, .rope_base = 10000.0f, .k_cache = dkc, .v_cache = dvc,
            .kv_type = kv_type, .n_slots = n_slots, .n_tokens = 1, .pos = dpos, .n_head = H, .n_head_kv = Hkv,
            .head_dim = D,
        };
        struct be_attn_args aa = {.out = dout, .q = dq, .k_cache = dkc, .v_cache = dvc, .kv_type = kv_type,
                                  .n_slots = n_slots, .n_tokens = 1, .pos = dpos, .pos_host0 = p, .n_head = H,
                                  .n_head_kv = Hkv, .head_dim = D, .window = window,
                                  .scale = 1.0f / sqrtf((float)D), .block = 0};
        if (pass == 0) {
            ran = backend_cuda_attention_prep(be, &pa, &aa);
        } else {
            be->i->attn_prep(be, &pa);
            be->i->attention(be, &aa);
        }
        void *src[3] = {dout, dkc, dvc};
        for (int i = 0; i < 3; i++) {
            got[pass][i] = malloc(nb[i]);
            from_dev(got[pass][i], src[i], nb[i]);
        }
        be->i->release(be, dq), be->i->release(be, dk), be->i->release(be, dv), be->i->release(be, dkc);
        be->i->release(be, dvc), be->i->release(be, dpos), be->i->release(be, dout);
    }
    char what[160];
    snprintf(what, sizeof what, "attention_prep %s heads %d/%d dim %d rot %d%s norms %d slots %lld window %d p %d",
             quant_type_name(kv_type), H, Hkv, D, n_rot, neox ? " neox" : "", norms, (long long)n_slots, window,
             (int)p);
    CHECK_EQ(ran, want ? 1 : 0);
    if (ran == 1) {
        static const char *names[3] = {"out", "k cache", "v cache"};
        for (int i = 0; i < 3; i++)
            CHECK(same_bytes(got[0][i], got[1][i], nb[i], what, names[i]));
    } else {   /* refused: nothing ran (the output is still q, the caches as they were) */
        CHECK(same_bytes(got[0][0], q, nb[0], what, "out untouched"));
        CHECK(same_bytes(got[0][1], hc, cb, what, "k cache untouched"));
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 3; i++)
            free(got[pass][i]);
    be->i->weight_clear(be, &dwq), be->i->weight_clear(be, &dwk);
    free(hc), free(fk), free(fv), free(fill), free(q), free(k), free(v), free(gq), free(gk);
}

static void test_attention_prep(void)
{
    const char *dec_tc = getenv("GLIM_CUDA_ATTN_DEC_TC");
    bool v4 = !(dec_tc && strcmp(dec_tc, "0") == 0);
    static const uint32_t KV[2] = {GLIM_TYPE_F16, GLIM_TYPE_BF16};
    for (int i = 0; i < 2; i++) {
        uint32_t kt = KV[i];
        /* Muse Glimmer: a sliding layer (QK-norm, NORM RoPE) on a ring that wrapped, a global
         * layer (QK-norm, NoPE) at the first position, a few keys, and many splits */
        check_attention_prep(kt, 32, 2, 128, 128, false, true, 64, 64, 500, v4);
        check_attention_prep(kt, 32, 2, 128, 128, false, true, 64, 64, 63, v4);
        check_attention_prep(kt, 32, 2, 128, 0, false, true, 3000, 0, 0, v4);
        check_attention_prep(kt, 32, 2, 128, 0, false, true, 3000, 0, 37, v4);
        check_attention_prep(kt, 32, 2, 128, 0, false, true, 3000, 0, 2999, v4);
        /* NEOX RoPE, partial rotation, no norms; head_dim 64 with 4 heads a group */
        check_attention_prep(kt, 32, 2, 128, 64, true, false, 3000, 0, 1234, v4);
        check_attention_prep(kt, 8, 2, 64, 64, false, true, 500, 0, 321, v4);
    }
    /* refused: F32 cache (v4 needs F16/BF16), head_dim 96, nothing to prepare in q */
    check_attention_prep(GLIM_TYPE_F32, 32, 2, 128, 128, false, true, 64, 64, 100, false);
    check_attention_prep(GLIM_TYPE_F16, 8, 2, 96, 96, false, true, 300, 0, 50, false);
    check_attention_prep(GLIM_TYPE_F16, 8, 2, 64, 0, false, false, 300, 0, 50, false);
}

static void test_errors(void)
{
    struct glim_err err = {0};
    struct be_weight w = {.name = "blk.0.bad", .type = GLIM_TYPE_Q2_K, .k = 256, .n = 1, .nbytes = 84};
    static uint8_t junk[84];
    w.host = junk;
    CHECK_EQ(be->i->weight_init(be, &w, &err), GLIM_EUNSUPPORTED);
    CHECK(strstr(err.msg, "blk.0.bad") != NULL);
    CHECK_EQ(be->i->sync(be, &err), GLIM_OK);
}

int main(void)
{
    if (!backend_cuda_available()) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    struct glim_err err = {0};
    if (backend_cuda_new(0, &be, &err) != GLIM_OK) {
        fprintf(stderr, "backend_cuda_new: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", be->desc);
    /* the other tests compare the split kernels' bits: the short kernel only in test_attn_short */
    CHECK_EQ(backend_cuda_set_attn_short(be, false), GLIM_OK);
    RUN(test_get_rows);
    RUN(test_matmul_shapes);
    RUN(test_matmul_all_types);
    RUN(test_matmul_q8);
    RUN(test_matmul_q8_old);
    RUN(test_gemv_v3);
    RUN(test_matmul_n);
    RUN(test_gemv_v5);
    RUN(test_matmul_glu);
    RUN(test_k45_aux);
    RUN(test_t16);
    RUN(test_glu_fuse);
    RUN(test_v5s);
    RUN(test_glu_gated);
    RUN(test_matmul_exact);
    RUN(test_matmul_xcache);
    RUN(test_graph);
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_elementwise);
    RUN(test_attention);
    RUN(test_attention_v4);
    RUN(test_attention_v2);
    RUN(test_attention_v1);
    RUN(test_attention_graph);
    RUN(test_add_rmsnorm);
    RUN(test_add_rmsnorm_xq);
    RUN(test_attn_prep);
    RUN(test_prep_fold);
    RUN(test_gate_side);
    RUN(test_gate_fold);
    RUN(test_attn_short);
    RUN(test_norm_qkv);
    RUN(test_attention_prep);
    RUN(test_errors);
    CHECK_EQ(be->i->sync(be, &err), GLIM_OK);
    backend_free(be);
    return DONE();
}
#endif
