/*
 * test_quantize.c — the searched quantizers beat min/max, keep bounded
 * error, agree across thread counts, reject NaN; the per-tensor type rules
 * of the llama.cpp mixes; and on real data the search quantizer is at least
 * as good as the llama.cpp-made Q4_K_M file of glimmer-tiny.
 */
#include "harness.h"

#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quantize.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static float rng_gauss(void) { return test_rng_gauss(&rng_state); }

/* relative RMSE of dequant(quantize(x)) */
static double rel_rmse(uint32_t type, quant_from_f32_fn q, const float *x, int64_t n)
{
    void *buf = malloc(quant_row_bytes(type, n));
    float *y = malloc((size_t)n * sizeof *y);
    double se = 0, sx = 0;
    if (!buf || !y) {
        CHECK(!"out of memory");
        goto out;
    }
    q(x, buf, n);
    quant_traits(type)->to_f32(buf, y, n);
    for (int64_t i = 0; i < n; i++) {
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
out:
    free(buf);
    free(y);
    return sx > 0 ? sqrt(se / sx) : 0;
}

/* Bounds (N(0,1) data): min/max Q4_K ~0.08, Q5_K ~0.038, Q6_K ~0.020 (see
 * test_quant.c); the searched ones must be strictly better and inside these. */
static void test_search_beats_minmax(void)
{
    static const struct { uint32_t type; double bound; } cases[] = {
        {GLIM_TYPE_Q4_K, 0.085}, {GLIM_TYPE_Q5_K, 0.040}, {GLIM_TYPE_Q6_K, 0.020},
    };
    const int64_t n = 64 * QK_K;
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) {
        CHECK(!"out of memory");
        return;
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_gauss() * (0.5f + (float)(i / QK_K % 4));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t t = cases[c].type;
        double simple = rel_rmse(t, quant_traits(t)->from_f32, x, n);
        double search = rel_rmse(t, quantize_row_fn(t), x, n);
        printf("  %-5s relative RMSE: min/max %.5f, search %.5f\n", quant_type_name(t), simple, search);
        CHECK(search < simple);
        CHECK(search > 0 && search < cases[c].bound);
    }
    free(x);
}

/* A block whose values sit on an exact K-quant grid comes back nearly
 * exactly (the search must find the grid); a constant block too. */
static void test_search_exact_grid(void)
{
    float x[QK_K], y[QK_K];
    struct block_q4_k b4;
    struct block_q6_k b6;
    for (int i = 0; i < QK_K; i++)
        x[i] = 0.25f * (float)(i * 7 % 16) - 1.0f;   /* s = 0.25, m = 1, all codes used */
    quantize_row_q4_k_search(x, &b4, QK_K);
    quant_traits(GLIM_TYPE_Q4_K)->to_f32(&b4, y, QK_K);
    double maxe = 0;
    for (int i = 0; i < QK_K; i++)
        maxe = fmax(maxe, fabs(x[i] - y[i]));
    CHECK(maxe < 1e-3);
    for (int i = 0; i < QK_K; i++)
        x[i] = 0.5f * (float)(i * 5 % 64 - 32);   /* Q6_K grid, s = 0.5 */
    quantize_row_q6_k_search(x, &b6, QK_K);
    quant_traits(GLIM_TYPE_Q6_K)->to_f32(&b6, y, QK_K);
    maxe = 0;
    for (int i = 0; i < QK_K; i++)
        maxe = fmax(maxe, fabs(x[i] - y[i]));
    CHECK(maxe < 1e-2);
    for (int i = 0; i < QK_K; i++)
        x[i] = 3.0f;
    struct block_q5_k b5;
    quantize_row_q5_k_search(x, &b5, QK_K);
    quant_traits(GLIM_TYPE_Q5_K)->to_f32(&b5, y, QK_K);
    maxe = 0;
    for (int i = 0; i < QK_K; i++)
        maxe = fmax(maxe, fabs(x[i] - y[i]));
    CHECK(maxe < 3.0 * 2e-3);
}

static void test_tensor_threads(void)
{
    const int64_t rows = 37, cols = 512;
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    uint16_t *xh = malloc((size_t)(rows * cols) * sizeof *xh);
    size_t nb = quant_row_bytes(GLIM_TYPE_Q5_K, cols) * (size_t)rows;
    uint8_t *a = malloc(nb), *b = malloc(nb);
    if (!x || !xh || !a || !b) {
        CHECK(!"out of memory");
        goto out;
    }
    for (int64_t i = 0; i < rows * cols; i++) {
        xh[i] = f32_to_bf16(rng_gauss());
        x[i] = bf16_to_f32(xh[i]);
    }
    struct quantize_stats s1, s4, sb;
    struct glim_err err = {0};
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q5_K, a, GLIM_TYPE_F32, x, rows, cols, 1, &s1, &err), GLIM_OK);
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q5_K, b, GLIM_TYPE_F32, x, rows, cols, 4, &s4, &err), GLIM_OK);
    CHECK(memcmp(a, b, nb) == 0);
    CHECK(s1.sum_sq_err == s4.sum_sq_err || fabs(s1.sum_sq_err - s4.sum_sq_err) < 1e-9 * s1.sum_sq_err);
    CHECK_EQ(s1.n, rows * cols);
    CHECK(s1.sum_sq_err > 0 && sqrt(s1.sum_sq_err / s1.sum_sq_src) < 0.04);
    /* a BF16 source gives the same bytes as its f32 image */
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q5_K, b, GLIM_TYPE_BF16, xh, rows, cols, 3, &sb, &err), GLIM_OK);
    CHECK(memcmp(a, b, nb) == 0);
    /* more threads than rows */
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q5_K, b, GLIM_TYPE_F32, x, 2, cols, 16, NULL, &err), GLIM_OK);
    CHECK(memcmp(a, b, 2 * quant_row_bytes(GLIM_TYPE_Q5_K, cols)) == 0);
    /* a NaN is refused with the row named */
    x[5 * cols + 17] = NAN;
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q4_K, b, GLIM_TYPE_F32, x, rows, cols, 4, NULL, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "row 5") != NULL);
    /* bad shapes and types */
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q4_K, b, GLIM_TYPE_F32, x, 1, 100, 1, NULL, &err), GLIM_EINVAL);
    CHECK_EQ(quantize_tensor(GLIM_TYPE_IQ2_XS, b, GLIM_TYPE_F32, x, 1, 256, 1, NULL, &err), GLIM_EINVAL);
    CHECK_EQ(quantize_tensor(GLIM_TYPE_Q4_K, b, GLIM_TYPE_IQ2_XS, x, 1, 256, 1, NULL, &err), GLIM_EINVAL);
out:
    free(x);
    free(xh);
    free(a);
    free(b);
}

static void test_use_more_bits(void)
{
    /* n = 52 (the 30B): 0-5, 8, 11, ..., 44, 45-51 = 26 layers (model.md §3.3) */
    int count = 0;
    for (int i = 0; i < 52; i++)
        count += quantize_use_more_bits(i, 52);
    CHECK_EQ(count, 26);
    CHECK(quantize_use_more_bits(5, 52) && !quantize_use_more_bits(6, 52) && !quantize_use_more_bits(7, 52));
    CHECK(quantize_use_more_bits(8, 52) && quantize_use_more_bits(44, 52) && quantize_use_more_bits(45, 52));
    CHECK(!quantize_use_more_bits(43, 52));
    /* n = 8 (glimmer-tiny): 0, 3, 6, 7 */
    int want8[8] = {1, 0, 0, 1, 0, 0, 1, 1};
    for (int i = 0; i < 8; i++)
        CHECK_EQ(quantize_use_more_bits(i, 8), want8[i]);
}

/* a synthetic 4-layer name list through the plan */
static void test_plan_rules(void)
{
    const char *names[] = {"token_embd.weight", "output_norm.weight", "output.weight",
                           "blk.0.attn_v.weight", "blk.0.ffn_down.weight", "blk.0.attn_q.weight",
                           "blk.0.attn_norm.weight", "blk.1.attn_v.weight", "blk.1.ffn_down.weight",
                           "blk.2.attn_v.weight", "blk.2.ffn_down.weight", "blk.3.attn_v.weight",
                           "blk.3.ffn_down.weight"};
    int n = (int)(sizeof names / sizeof names[0]);
    const int64_t mat[2] = {256, 64}, vec[1] = {256}, odd[2] = {96, 64}, odder[2] = {100, 64};
    struct quantize_plan p;
    const struct quantize_mix *m = quantize_mix_find("q4_k_m");
    CHECK(m && m->ftype == 15 && m->base == GLIM_TYPE_Q4_K);
    CHECK(quantize_mix_find("Q4_K") == m);
    CHECK(quantize_mix_find("Q5_K")->ftype == 17);
    CHECK(quantize_mix_find("Q6_K")->ftype == 18);
    CHECK(quantize_mix_find("Q8_0")->ftype == 7);
    CHECK(quantize_mix_find("Q4_0")->ftype == 2);
    CHECK(quantize_mix_find("IQ2_XS") == NULL);
    quantize_plan_init(&p, m, false, names, n);
    CHECK_EQ(p.n_attn_v, 4);
    CHECK_EQ(p.n_ffn_down, 4);
    CHECK(p.has_output);
    /* n = 4: use_more_bits -> i < 0 no; i >= 3 yes; (i-0)%3 == 2 -> 2: layers 2, 3 */
    uint32_t want[] = {GLIM_TYPE_Q4_K, GLIM_TYPE_F32, GLIM_TYPE_Q6_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K,
                       GLIM_TYPE_Q4_K, GLIM_TYPE_F32, GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K,
                       GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K};
    for (int i = 0; i < n; i++) {
        bool is_vec = strstr(names[i], "norm") != NULL;
        uint32_t t = quantize_plan_type(&p, names[i], is_vec ? 1 : 2, is_vec ? vec : mat, GLIM_TYPE_F32);
        if (t != want[i])
            fprintf(stderr, "  %s: got %s, want %s\n", names[i], quant_type_name(t), quant_type_name(want[i]));
        CHECK_EQ(t, want[i]);
    }
    /* --pure: every matrix gets the base type, 1-D stays */
    quantize_plan_init(&p, m, true, names, n);
    CHECK_EQ(quantize_plan_type(&p, "output.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_Q4_K);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_v.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_Q4_K);
    CHECK_EQ(quantize_plan_type(&p, "output_norm.weight", 1, vec, GLIM_TYPE_F32), GLIM_TYPE_F32);
    CHECK_EQ(quantize_plan_type(&p, "output_norm.weight", 1, vec, GLIM_TYPE_F16), GLIM_TYPE_F16);
    /* row fallbacks: 96 -> Q8_0, 100 -> F16 */
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_q.weight", 2, odd, GLIM_TYPE_F32), GLIM_TYPE_Q8_0);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_q.weight", 2, odder, GLIM_TYPE_F32), GLIM_TYPE_F16);
    /* a 2-D norm, a non-weight, an already-quantized source: untouched */
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_norm.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_F32);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_q.bias", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_F32);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_q.weight", 2, mat, GLIM_TYPE_Q8_0), GLIM_TYPE_Q8_0);
    /* Q8_0 mix: output stays Q8_0; Q4_0: output Q6_K, output with odd rows Q8_0 */
    quantize_plan_init(&p, quantize_mix_find("Q8_0"), false, names, n);
    CHECK_EQ(quantize_plan_type(&p, "output.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_Q8_0);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_v.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_Q8_0);
    quantize_plan_init(&p, quantize_mix_find("Q4_0"), false, names, n);
    CHECK_EQ(quantize_plan_type(&p, "output.weight", 2, mat, GLIM_TYPE_BF16), GLIM_TYPE_Q6_K);
    CHECK_EQ(quantize_plan_type(&p, "output.weight", 2, odd, GLIM_TYPE_BF16), GLIM_TYPE_Q8_0);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.ffn_down.weight", 2, mat, GLIM_TYPE_BF16), GLIM_TYPE_Q4_0);
    /* no output.weight: the tied token_embd gets the output's Q6_K */
    quantize_plan_init(&p, quantize_mix_find("Q5_K_M"), false, names + 3, n - 3);
    CHECK(!p.has_output);
    CHECK_EQ(quantize_plan_type(&p, "token_embd.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_Q6_K);
    CHECK_EQ(quantize_plan_type(&p, "blk.0.attn_q.weight", 2, mat, GLIM_TYPE_F32), GLIM_TYPE_Q5_K);
}

/* Real data: for every tensor llama.cpp quantized in the glimmer-tiny
 * Q4_K_M / Q6_K / Q8_0 files, our quantizer's squared error against the F32
 * weights is no worse than llama.cpp's (2% slack for rounding luck), and
 * llama.cpp's weights, read by our decoders, are close to F32. */
static double max_rel(uint32_t type)
{
    return type == GLIM_TYPE_Q4_K ? 0.08 : type == GLIM_TYPE_Q6_K ? 0.02 : 0.008;
}

static void vs_llama_cpp(const char *file, int want_checked)
{
    struct gguf_file *f32 = NULL, *q = NULL;
    struct glim_err err = {0};
    if (gguf_open(testdata("glimmer-tiny/glimmer-tiny-F32.gguf"), &f32, &err) ||
        gguf_open(testdata(file), &q, &err)) {
        fprintf(stderr, "  cannot open glimmer-tiny: %s\n", err.msg);
        CHECK(!"glimmer-tiny GGUFs open");
        goto out;
    }
    int n_checked = 0;
    double se_ours = 0, se_llama = 0;
    for (int64_t i = 0; i < gguf_tensor_count(q); i++) {
        const struct gguf_tensor *tq = gguf_tensor_at(q, i);
        const struct gguf_tensor *tf = gguf_tensor_find(f32, tq->name);
        CHECK(tf != NULL);
        if (!tf || tq->type == GLIM_TYPE_F32)
            continue;
        CHECK_EQ(tf->type, GLIM_TYPE_F32);
        CHECK_EQ(tf->n_elems, tq->n_elems);
        float *ref = malloc((size_t)tq->n_elems * sizeof *ref);
        void *mine = malloc(tq->nbytes);
        struct quantize_stats st;
        if (!ref || !mine) {
            CHECK(!"out of memory");
            free(ref);
            free(mine);
            break;
        }
        quant_traits(tq->type)->to_f32(tq->data, ref, tq->n_elems);
        double sl = 0;
        const float *x = tf->data;
        for (int64_t k = 0; k < tq->n_elems; k++)
            sl += ((double)x[k] - ref[k]) * ((double)x[k] - ref[k]);
        CHECK_EQ(quantize_tensor(tq->type, mine, GLIM_TYPE_F32, x, tq->n_elems / tq->ne[0], tq->ne[0], 2,
                                 &st, &err), GLIM_OK);
        if (st.sum_sq_err > sl * 1.02)
            fprintf(stderr, "  %s %s: RMSE ours %.6g > llama.cpp %.6g\n", tq->name, quant_type_name(tq->type),
                    sqrt(st.sum_sq_err / st.n), sqrt(sl / st.n));
        CHECK(st.sum_sq_err <= sl * 1.02);
        CHECK(sqrt(sl / st.sum_sq_src) < max_rel(tq->type));
        se_ours += st.sum_sq_err;
        se_llama += sl;
        n_checked++;
        free(ref);
        free(mine);
    }
    CHECK_EQ(n_checked, want_checked);
    printf("  %s: squared error ours/llama.cpp = %.4f\n", file, se_ours / se_llama);
out:
    gguf_close(f32);
    gguf_close(q);
}

static void test_vs_llama_cpp(void)
{
    vs_llama_cpp("glimmer-tiny/glimmer-tiny-Q4_K_M.gguf", 66);
    vs_llama_cpp("glimmer-tiny/glimmer-tiny-Q6_K.gguf", 66);
    vs_llama_cpp("glimmer-tiny/glimmer-tiny-Q8_0.gguf", 66);
}

int main(void)
{
    RUN(test_search_beats_minmax);
    RUN(test_search_exact_grid);
    RUN(test_tensor_threads);
    RUN(test_use_more_bits);
    RUN(test_plan_rules);
    RUN(test_vs_llama_cpp);
    return DONE();
}
