/*
 * test_model_fold.c — how Muse Glimmer's forward hands its residual steps to a backend's fused
 * ops (add_rmsnorm_attn, add_rmsnorm_ffn), checked on the CPU, where no backend offers them: the
 * CPU backend's table with those ops (and matmul_attn_prep) added as the compositions the model
 * would otherwise run must give the same logits and taps bit for bit, and the model must call
 * add_rmsnorm_attn at every layer boundary (n_layer - 1 times a forward) except where a tap reads
 * the residual stream entering a layer, and add_rmsnorm_ffn once a layer. A backend that folds
 * these steps into one launch relies on this order; the CUDA backend's bits are test_cuda_ops's.
 */
#include <math.h>

#include "golden_util.h"
#include "../src/model/arch_common.h"
#include "../src/runtime/session.h"

static const struct backend_i *cpu_ops;   /* the CPU backend's own table */
static struct backend_i fold_ops;          /* ... with the fused ops added */
static long n_attn, n_ffn, n_prep;

static void matmul_n(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws, const float *x,
                     int T)
{
    if (cpu_ops->matmul_n) {
        cpu_ops->matmul_n(be, n, ys, ws, x, T);
        return;
    }
    for (int i = 0; i < n; i++)
        cpu_ops->matmul(be, ys[i], ws[i], x, T);
}

/* = matmul_n then attn_prep, as arch_attend runs them without this op */
static void w_matmul_attn_prep(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                               const float *x, int T, const struct be_attn_prep_args *p)
{
    n_prep++;
    matmul_n(be, n, ys, ws, x, T);
    arch_attn_prep(be, p);
}

/* backend.h: a fused op's o and h are scratch afterwards, so a backend may leave them unwritten;
 * here they are overwritten with NaN, so a model that read them again would fail the comparison */
static void scribble(const struct be_res_norm *r, int T)
{
    for (size_t i = 0; i < (size_t)T * r->n; i++)
        r->o[i] = r->h[i] = NAN;
}

static void w_add_rmsnorm_attn(struct backend *be, const struct be_res_norm *r, int n, float *const *ys,
                               const struct be_weight *const *ws, int T, const struct be_attn_prep_args *p)
{
    n_attn++;
    CHECK(r->h != NULL);
    arch_res_norm(be, r, T);
    n_prep--;   /* (counted as the fused op, not as matmul_attn_prep) */
    w_matmul_attn_prep(be, n, ys, ws, r->h, T, p);
    scribble(r, T);
}

/* = the residual step then arch_ffn's plain path (matmul_n, swiglu, matmul) */
static void w_add_rmsnorm_ffn(struct backend *be, const struct be_res_norm *r, float *y, float *const *fs,
                              const struct be_weight *const *ws, int T, int act)
{
    n_ffn++;
    CHECK_EQ(act, BE_GLU_SILU);
    arch_res_norm(be, r, T);
    matmul_n(be, 2, fs, ws, r->h, T);
    scribble(r, T);   /* (before down writes y, which is o) */
    cpu_ops->swiglu(be, fs[0], fs[0], fs[1], (int64_t)T * ws[0]->n);
    cpu_ops->matmul(be, y, ws[2], fs[0], T);
}

static void use_fold(struct glim_model *m, bool on)
{
    m->be->i = on ? &fold_ops : cpu_ops;
    n_attn = n_ffn = n_prep = 0;
}

/* logits of every position of ids (chunks of `chunk`), with and without the fused ops */
static void check_eval(struct glim_model *m, const int32_t *ids, int n, int chunk)
{
    int V = glim_model_n_vocab(m), L = m->hp.n_layer;
    float *a = malloc((size_t)n * V * 4), *b = malloc((size_t)n * V * 4);
    use_fold(m, false);
    CHECK_EQ(g_eval_all(m, ids, n, chunk, GLIM_KV_F32, a), 0);
    use_fold(m, true);
    CHECK_EQ(g_eval_all(m, ids, n, chunk, GLIM_KV_F32, b), 0);
    int passes = (n + chunk - 1) / chunk;
    printf("  chunk %d: %d passes, add_rmsnorm_attn %ld, add_rmsnorm_ffn %ld, matmul_attn_prep %ld\n", chunk, passes,
           n_attn, n_ffn, n_prep);
    CHECK_EQ(n_attn, (long)passes * (L - 1));
    CHECK_EQ(n_ffn, (long)passes * L);
    CHECK_EQ(n_prep, passes);   /* layer 0's h is the embedding's norm */
    CHECK(memcmp(a, b, (size_t)n * V * 4) == 0);
    use_fold(m, false);
    free(a), free(b);
}

/* taps (DFlash's target forward): a tapped layer's residual step runs before the tap */
static void check_taps(struct glim_model *m, const int32_t *ids, int n)
{
    int V = glim_model_n_vocab(m), E = m->hp.n_embd, L = m->hp.n_layer;
    int taps[3] = {1, L / 2, L};
    size_t tb = (size_t)n * 3 * E * 4, lb = (size_t)V * 4;
    float *ta = malloc(tb), *tbuf = malloc(tb), *la = malloc(lb), *lbuf = malloc(lb);
    struct glim_err err = {0};
    for (int on = 0; on < 2; on++) {
        use_fold(m, on);
        struct glim_session *s = g_session(m, n, GLIM_KV_F32);
        CHECK(s != NULL);
        if (s)
            CHECK_EQ(session_eval_taps(s, ids, n, on ? lbuf : la, NULL, 1, 3, taps, on ? tbuf : ta, &err), 0);
        glim_session_free(s);
    }
    /* layers 1 and L / 2 take the residual step first; L (after the last layer) is no boundary */
    CHECK_EQ(n_attn, L - 1 - 2);
    CHECK_EQ(n_prep, 1 + 2);
    CHECK(memcmp(ta, tbuf, tb) == 0);
    CHECK(memcmp(la, lbuf, lb) == 0);
    use_fold(m, false);
    free(ta), free(tbuf), free(la), free(lbuf);
}

static void test_glimmer_tiny(void)
{
    struct glim_model *m = g_load(testdata("glimmer-tiny/glimmer-tiny-Q4_K_M.gguf"), GLIM_KERNELS_AUTO);
    CHECK(m != NULL);
    if (!m)
        return;
    cpu_ops = m->be->i;
    CHECK(cpu_ops->add_rmsnorm_attn == NULL && cpu_ops->add_rmsnorm_ffn == NULL);   /* else not a composition */
    fold_ops = *cpu_ops;
    fold_ops.add_rmsnorm_attn = w_add_rmsnorm_attn;
    fold_ops.add_rmsnorm_ffn = w_add_rmsnorm_ffn;
    fold_ops.matmul_attn_prep = w_matmul_attn_prep;
    fold_ops.attention_prep = NULL;
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (int32_t)((i * 37 + 11) % glim_model_n_vocab(m));
    check_eval(m, ids, 40, 16);   /* prefill in chunks */
    check_eval(m, ids, 12, 1);    /* one token a pass: the decode steps */
    check_taps(m, ids, 9);
    m->be->i = cpu_ops;
    glim_model_free(m);
}

int main(void)
{
    RUN(test_glimmer_tiny);
    return DONE();
}
