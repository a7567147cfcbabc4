/*
 * test_golden_glimmer.c — glimmer-tiny (8 layers, window 16, 3 sliding + 1
 * global) in F32, Q8_0, Q6_K and Q4_K_M against the upstream PyTorch reference
 * (../shared/testdata/glimmer-tiny/README.md): with the reference kernels every
 * logit of prefill (chunks of 16 and one chunk of 80), one-token decode and the
 * 32-step greedy run within 1e-3, and the 32 greedy ids equal the golden's.
 */
#include "golden_util.h"

static const char *VARIANTS[] = {"F32", "Q8_0", "Q6_K", "Q4_K_M"};

static float *load_golden(const char *variant, const char *what, size_t want)
{
    char rel[256];
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.torch.%s.f32", variant, what);
    size_t n = 0;
    float *f = g_read_f32(testdata(rel), &n);
    CHECK(f != NULL);
    CHECK_EQ(n, want);
    return f;
}

static void check_variant(const char *v, const int32_t *prompt, int n_prompt)
{
    enum { V = 512, NG = 32 };
    char rel[256];
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.gguf", v);
    struct glim_model *m = g_load(testdata(rel), GLIM_KERNELS_REF);
    CHECK(m != NULL);
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.golden.json", v);
    char *json = g_read_file(testdata(rel), NULL);
    float *pre = load_golden(v, "prefill", (size_t)80 * V), *dec = load_golden(v, "decode", (size_t)80 * V),
          *gre = load_golden(v, "greedy", (size_t)NG * V);
    float *out = malloc(sizeof(float) * 80 * V), *rows = malloc(sizeof(float) * NG * V);
    if (!m || !json || !pre || !dec || !gre || !out || !rows)
        goto done;
    int32_t want[NG], got[NG];
    CHECK_EQ(g_parse_ids_after(strstr(json, "\"greedy\"") ? strstr(json, "\"greedy\"") : json,
                               "\"torch\":", want, NG), NG);
    CHECK_EQ(g_eval_all(m, prompt, n_prompt, 16, GLIM_KV_F32, out), 0);
    double d_pre = g_maxabs(out, pre, (size_t)80 * V);
    CHECK_EQ(g_eval_all(m, prompt, n_prompt, 80, GLIM_KV_F32, out), 0);
    double d_one = g_maxabs(out, pre, (size_t)80 * V);
    CHECK_EQ(g_eval_all(m, prompt, n_prompt, 1, GLIM_KV_F32, out), 0);
    double d_dec = g_maxabs(out, dec, (size_t)80 * V);
    CHECK_EQ(g_greedy(m, prompt, n_prompt, NG, GLIM_KV_F32, got, rows), 0);
    double d_gre = g_maxabs(rows, gre, (size_t)NG * V);
    int same = 0;
    while (same < NG && got[same] == want[same])
        same++;
    printf("  %-7s prefill(16) %.2e  prefill(80) %.2e  decode %.2e  greedy %.2e  ids %d/%d\n", v, d_pre,
           d_one, d_dec, d_gre, same, NG);
    CHECK(d_pre <= 1e-3);
    CHECK(d_one <= 1e-3);
    CHECK(d_dec <= 1e-3);
    CHECK(d_gre <= 1e-3);
    CHECK_EQ(same, NG);
done:
    free(out);
    free(rows);
    free(pre);
    free(dec);
    free(gre);
    free(json);
    glim_model_free(m);
}


static void check_variant_fast(const char *v, const int32_t *prompt, int n_prompt)
{
    char rel[128];
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.gguf", v);
    struct glim_model *m = g_load(testdata(rel), GLIM_KERNELS_AUTO);
    g_check_glimmer_tol(m, v, "fast path", prompt, n_prompt);
    glim_model_free(m);
}

/* Run check on every variant with the 80-id prompt. */
static void for_each_variant(void (*check)(const char *v, const int32_t *prompt, int n))
{
    char *ids_txt = g_read_file(testdata("glimmer-tiny/prompt.ids"), NULL);
    CHECK(ids_txt != NULL);
    if (!ids_txt)
        return;
    int32_t prompt[128];
    int n = g_parse_ids_after(ids_txt, "", prompt, 128);
    CHECK_EQ(n, 80);
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++)
        check(VARIANTS[i], prompt, n);
    free(ids_txt);
}

static void test_glimmer_tiny(void) { for_each_variant(check_variant); }
static void test_glimmer_tiny_fast(void) { for_each_variant(check_variant_fast); }

int main(void)
{
    RUN(test_glimmer_tiny);
    RUN(test_glimmer_tiny_fast);
    return DONE();
}
