// ctest-label: gpu
/*
 * test_golden_gpu.c — the goldens through the CUDA backend: muse-glimmer-tiny
 * (1e-4 with F32 weights and KV, any chunking), glimmer-tiny in all four types
 * (F32 within 1e-3; quantized within the MANIFEST tolerances, greedy choice equal
 * where the golden's margin exceeds them, teacher-forced), muse-glimmer-synth's 16
 * greedy ids and stories260K's 64, all with the fused ops (default); and the logits with
 * them equal bit for bit those without (GLIM_CUDA_FUSE=0). Skips without a CUDA device or
 * CUDA build.
 */
#include "golden_util.h"
#include "../src/backend/backend.h"
#include "../src/model/model.h"
#include "../src/runtime/dflash.h"

static struct glim_model *load_cuda(const char *rel)
{
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.device = "cuda";
    struct glim_model *m = NULL;
    struct glim_err err = {0};
    if (glim_model_load(testdata(rel), &mp, &m, &err) != GLIM_OK)
        fprintf(stderr, "load %s: %s\n", rel, err.msg);
    return m;
}

static int32_t *ids_of(const char *rel, const char *key, int max, int *n)
{
    char *txt = g_read_file(testdata(rel), NULL);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)max);
    *n = txt ? g_parse_ids_after(txt, key, ids, max) : 0;
    free(txt);
    return ids;
}

static void test_muse_glimmer_tiny(void)
{
    int n;
    int32_t *ids = ids_of("muse-glimmer-tiny/tokens.txt", "", 64, &n);
    size_t nr = 0;
    float *ref = g_read_f32(testdata("muse-glimmer-tiny/logits_batch.f32"), &nr);
    struct glim_model *m = load_cuda("muse-glimmer-tiny/muse-glimmer-tiny.gguf");
    CHECK(m && ref && n == 40);
    float *out = malloc(sizeof(float) * 40 * 256);
    const int chunks[] = {40, 7, 1};
    for (int c = 0; m && ref && c < 3; c++) {
        CHECK_EQ(g_eval_all(m, ids, n, chunks[c], GLIM_KV_F32, out), 0);
        double d = g_maxabs(out, ref, (size_t)40 * 256);
        printf("  muse-glimmer-tiny cuda chunk %d: maxabs %.3g\n", chunks[c], d);
        CHECK(d <= 1e-4);
    }
    free(out);
    free(ref);
    free(ids);
    glim_model_free(m);
}


static void check_glimmer(const char *v, const int32_t *prompt, int np)
{
    char rel[128];
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.gguf", v);
    struct glim_model *m = load_cuda(rel);
    g_check_glimmer_tol(m, v, "cuda", prompt, np);
    glim_model_free(m);
}

static void test_glimmer_tiny(void)
{
    int n;
    int32_t *prompt = ids_of("glimmer-tiny/prompt.ids", "", 128, &n);
    CHECK_EQ(n, 80);
    const char *vs[] = {"F32", "Q8_0", "Q6_K", "Q4_K_M"};
    for (int i = 0; i < 4; i++)
        check_glimmer(vs[i], prompt, n);
    free(prompt);
}

static void greedy_ids(const char *model, const int32_t *prompt, int np, const char *golden, int ng)
{
    int n;
    int32_t *want = ids_of(golden, "gen_ids=", ng, &n), got[64];
    struct glim_model *m = load_cuda(model);
    CHECK(m && n == ng);
    if (m) {
        CHECK_EQ(g_greedy(m, prompt, np, ng, GLIM_KV_F32, got, NULL), 0);
        int same = 0;
        while (same < ng && got[same] == want[same])
            same++;
        printf("  %s cuda: %d/%d greedy ids\n", model, same, ng);
        CHECK_EQ(same, ng);
    }
    free(want);
    glim_model_free(m);
}

static void test_greedy_small(void)
{
    int32_t p[20];
    for (int i = 0; i < 20; i++)
        p[i] = (i * 37 + 11) % 256;
    greedy_ids("models/muse-glimmer-synth.gguf", p, 20, "goldens/muse-glimmer-synth.greedy16.txt", 16);
    const int32_t sp[] = {1, 403, 407, 261, 378};
    greedy_ids("models/stories260K.gguf", sp, 5, "goldens/stories260K.greedy64.txt", 64);
}

/* The fused ops (add_rmsnorm, attn_prep) change no bit: every position's logits, in
 * prefill chunks and in one-token steps (replayed CUDA graphs), equal those of a model
 * loaded with GLIM_CUDA_FUSE=0 (read at backend creation: the separate ops). */
static void check_fused_equal(const char *rel, int kv_type)
{
    enum { N = 40 };
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 37 + 11) % 256;
    setenv("GLIM_CUDA_ATTN_SHORT", "0", 1);   /* the short kernel's sums are its own (test_cuda_ops) */
    struct glim_model *fused = load_cuda(rel);
    unsetenv("GLIM_CUDA_ATTN_SHORT");
    setenv("GLIM_CUDA_FUSE", "0", 1);
    struct glim_model *plain = load_cuda(rel);
    unsetenv("GLIM_CUDA_FUSE");
    CHECK(fused && plain);
    const int chunks[] = {N, 7, 1};
    for (int c = 0; fused && plain && c < 3; c++) {
        size_t n = (size_t)N * glim_model_n_vocab(fused);
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        CHECK_EQ(g_eval_all(fused, ids, N, chunks[c], kv_type, a), 0);
        CHECK_EQ(g_eval_all(plain, ids, N, chunks[c], kv_type, b), 0);
        bool same = memcmp(a, b, n * sizeof(float)) == 0;
        printf("  %s kv %d chunk %d: fused %s unfused\n", rel, kv_type, chunks[c], same ? "==" : "!=");
        CHECK(same);
        free(a), free(b);
    }
    glim_model_free(fused);
    glim_model_free(plain);
}

static void test_fused_equal(void)
{
    check_fused_equal("muse-glimmer-tiny/muse-glimmer-tiny.gguf", GLIM_KV_F32);
    check_fused_equal("glimmer-tiny/glimmer-tiny-Q4_K_M.gguf", GLIM_KV_F16);
    check_fused_equal("glimmer-tiny/glimmer-tiny-F32.gguf", GLIM_KV_BF16);
    check_fused_equal("models/stories260K.gguf", GLIM_KV_F16);   /* llama: attn_prep, RoPE only */
}

/* DFlash on the GPU is lossless: greedy with the glimmer-tiny drafter equals plain greedy. */
static void test_dflash_lossless(void)
{
    enum { NG = 64 };
    int n;
    int32_t *prompt = ids_of("glimmer-tiny/prompt.ids", "", 128, &n);
    struct glim_model *m = load_cuda("glimmer-tiny/glimmer-tiny-F32.gguf"), *d = NULL;
    struct glim_err err = {0};
    CHECK(m != NULL);
    if (m)
        CHECK_EQ(glim_draft_load(m, testdata("glimmer-tiny/dflash/glimmer-tiny-dflash-BF16.gguf"), &d, &err), 0);
    int32_t want[NG], got[NG];
    if (!m || !d)
        goto done;
    CHECK_EQ(g_greedy(m, prompt, n, NG, GLIM_KV_F32, want, NULL), 0);
    const int Bs[] = {2, 4, 8};   /* the drafter's block_size is 8 */
    for (int b = 0; b < 3; b++) {
        struct glim_session *s = g_session(m, 0, GLIM_KV_F32);
        struct dflash_params p;
        dflash_params_init(&p);
        p.block_length = Bs[b];
        struct dflash *df = NULL;
        CHECK_EQ(dflash_new(m, d, s, &p, &df, &err), 0);
        CHECK_EQ(dflash_prefill(df, prompt, n, &err), 0);
        int k = 0;
        bool eos = false;
        while (df && k < NG && !eos && dflash_next(df, &got[k], &eos, &err) == GLIM_OK)
            k++;
        int same = 0;
        while (same < k && got[same] == want[same])
            same++;
        printf("  dflash cuda B=%d: %d/%d ids equal to plain greedy\n", Bs[b], same, NG);
        CHECK_EQ(same, NG);
        dflash_free(df);
        glim_session_free(s);
    }
done:
    free(prompt);
    glim_model_free(d);
    glim_model_free(m);
}

int main(void)
{
    if (!backend_cuda_available()) {
        printf("skipped: no CUDA device (or glim built without -DGLIM_CUDA=ON)\n");
        return 0;
    }
    RUN(test_muse_glimmer_tiny);
    RUN(test_glimmer_tiny);
    RUN(test_greedy_small);
    RUN(test_dflash_lossless);
    RUN(test_fused_equal);
    return DONE();
}
