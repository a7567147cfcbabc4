/*
 * arch_muse_glimmer.c — the Muse Glimmer text model.
 *
 * Every hyperparameter comes from the GGUF metadata (spec/gguf-contract.md
 * §1.2); the forward pass is §2.3 of that contract:
 *   embedding → weightless RMSNorm →
 *   52 × [ attention with QK-norm, RoPE on sliding layers only (NoPE on the
 *          global ones), window mask, sigmoid output gate, sandwich norm;
 *          SwiGLU FFN with sandwich norm ] →
 *   final norm → lm head × logit_scale → soft-cap.
 * Sliding layers keep their K/V in a ring (runtime/kv.c); global layers in
 * a flat cache. Runs on whatever backend the model was loaded on.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../base/alloc.h"
#include "arch_common.h"

#define POST_NORM_EPS 1e-8f   /* sandwich norms; hard-coded upstream (gguf-contract §1.2) */

/* sliding_window_pattern: BOOL/INT array of length n_layer (nonzero = sliding), or a
 * u32 period P (layer l slides iff l % P < P - 1). */
static int read_swa_pattern(struct glim_model *m, struct glim_err *err)
{
    struct model_hparams *hp = &m->hp;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", hp->arch);
    const struct gguf_kv *kv = gguf_kv_find(m->gguf, key);
    if (!kv)
        return glim_fail(err, GLIM_EFORMAT, "required metadata key '%s' is missing", key);
    if (kv->type != GGUF_VT_ARRAY) {
        int64_t P;
        if (gguf_kv_int(kv, &P) != GLIM_OK || P < 0 || P > GLIM_MAX_LAYERS)
            return glim_fail(err, GLIM_EFORMAT, "%s: expected a bool array or a layer period", key);
        for (int l = 0; l < hp->n_layer; l++)
            hp->is_swa[l] = P == 0 ? true : (l % P < P - 1);
        return GLIM_OK;
    }
    if (kv->arr_n != (uint64_t)hp->n_layer)
        return glim_fail(err, GLIM_EFORMAT, "%s: expected %d entries (block_count), got %llu", key,
                         hp->n_layer, (unsigned long long)kv->arr_n);
    for (int l = 0; l < hp->n_layer; l++) {
        int64_t v;
        if (gguf_arr_int(kv, (uint64_t)l, &v) != GLIM_OK)
            return glim_fail(err, GLIM_EFORMAT, "%s: expected bool or integer entries, got %s", key,
                             gguf_vtype_name(kv->arr_type));
        hp->is_swa[l] = v != 0;
    }
    return GLIM_OK;
}

static int mg_load_hparams(struct glim_model *m, struct glim_err *err)
{
    struct model_hparams *hp = &m->hp;
    int rc = arch_read_common(m, err);
    if (rc != GLIM_OK)
        return rc;
    uint32_t n_swa = 0;
    if ((rc = model_get_u32(m, "attention.sliding_window", &n_swa, true, err)))
        return rc;
    if (n_swa == 0)
        return glim_fail(err, GLIM_EFORMAT, "%s.attention.sliding_window: expected > 0", hp->arch);
    hp->n_swa = (int)GLIM_MIN(n_swa, 0x7fffffffu);
    if ((rc = read_swa_pattern(m, err)))
        return rc;
    hp->rope_base = 10000.0f;
    if ((rc = model_get_f32(m, "rope.freq_base", &hp->rope_base, false, err)))
        return rc;
    hp->rope_base_swa = hp->rope_base;
    if ((rc = model_get_f32(m, "rope.freq_base_swa", &hp->rope_base_swa, false, err)))
        return rc;
    if ((rc = model_get_f32(m, "logit_scale", &hp->logit_scale, true, err)))
        return rc;
    hp->softcap = 30.0f;   /* absent means 30, a stored 0 disables (gguf-contract §1.2) */
    if ((rc = model_get_f32(m, "final_logit_softcapping", &hp->softcap, false, err)))
        return rc;
    uint32_t n_rot = (uint32_t)hp->head_dim;
    if ((rc = model_get_u32(m, "rope.dimension_count", &n_rot, false, err)))
        return rc;
    if (n_rot != (uint32_t)hp->head_dim)
        return glim_fail(err, GLIM_EUNSUPPORTED, "rope.dimension_count %u: only full rotary (%d) is supported",
                         n_rot, hp->head_dim);
    if (!(hp->rope_base > 0) || !(hp->rope_base_swa > 0) || hp->softcap < 0 || !isfinite(hp->logit_scale))
        return glim_fail(err, GLIM_EFORMAT, "rope bases must be > 0, soft-cap >= 0, logit_scale finite");
    hp->post_eps = POST_NORM_EPS;
    hp->has_embd_norm = true;
    hp->rope_neox = false;   /* rows were un-permuted at conversion: NORM pairs (§2.2) */
    return GLIM_OK;
}

static int mg_load_tensors(struct glim_model *m, struct glim_err *err)
{
    const struct model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, D = hp->head_dim, QD = (int64_t)hp->n_head * D;
    int rc;
    if ((rc = model_bind(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, true, err)) ||
        (rc = model_bind(m, &m->output_norm, "output_norm.weight", E, 0, true, err)) ||
        /* no tied-embedding fallback for this arch (gguf-contract §2.1) */
        (rc = model_bind(m, &m->output, "output.weight", E, hp->n_vocab, true, err)))
        return rc;
    m->layers = glim_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return glim_fail(err, GLIM_ENOMEM, "out of memory for %d layers", hp->n_layer);
    char name[96];
    for (int il = 0; il < hp->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        if ((rc = arch_bind_layer_common(m, il, err)))
            return rc;
        const struct blk_tensor t[] = {
            {offsetof(struct model_layer, q_norm), "attn_q_norm", D, 0},
            {offsetof(struct model_layer, k_norm), "attn_k_norm", D, 0},
            {offsetof(struct model_layer, post_attn_norm), "post_attention_norm", E, 0},
            {offsetof(struct model_layer, post_ffw_norm), "post_ffw_norm", E, 0},
        };
        if ((rc = model_bind_blk(m, il, t, 4, true, err)))
            return rc;
        /* the output gate: 30B files say attn_gate, older ones attn_output_gate (model.md §3.2) */
        snprintf(name, sizeof name, "blk.%d.attn_gate.weight", il);
        if ((rc = model_bind(m, &L->attn_gate, name, E, QD, false, err)))
            return rc;
        snprintf(name, sizeof name, "blk.%d.attn_output_gate.weight", il);
        bool has_old = model_tensor(m, name) != NULL;
        if (L->attn_gate.host && has_old)
            return glim_fail(err, GLIM_EFORMAT, "layer %d has both attn_gate and attn_output_gate", il);
        if (!L->attn_gate.host && (rc = model_bind(m, &L->attn_gate, name, E, QD, true, err)))
            return glim_fail(err, GLIM_EFORMAT, "required tensor 'blk.%d.attn_gate.weight' is missing", il);
    }
    return GLIM_OK;
}

/* Attention sub-block from h = attn_norm(x): o = Wo · (attn(rope?(qknorm(Wq h)), ...) ⊙ σ(Wg h)).
 * pre: the residual step that makes h, when it has not run yet (arch_attend runs it, or the
 * backend with the projections). */
static void attention_block(struct glim_model *m, struct kv_cache *kv, int il, int T, int32_t pos0,
                            struct fwd_scratch *s, const struct be_res_norm *pre)
{
    const struct model_hparams *hp = &m->hp;
    const struct model_layer *L = &m->layers[il];
    struct backend *be = m->be;
    bool swa = hp->is_swa[il];
    /* RoPE only on sliding layers; global layers are NoPE and see the whole context */
    struct attend_opts o = {.rope = swa, .rope_base = hp->rope_base_swa, .neox = hp->rope_neox,
                            .window = swa ? hp->n_swa : 0, .gate = &L->attn_gate, .pre = pre};

    arch_attend(m, kv, il, T, pos0, s, &o);                 /* gate, QK-norm, RoPE, window */
    const struct backend_i *op = be->i;
    if (op->matmul_glu) {   /* gate before Wo, folded into Wo's input */
        op->matmul_glu(be, s->o, &L->wo, s->a, s->g, BE_GLU_SIGMOID, T);
    } else {
        op->mul_sigmoid(be, s->a, s->g, (int64_t)T * hp->n_head * hp->head_dim);
        op->matmul(be, s->o, &L->wo, s->a, T);
    }
}

/* Sandwich norm and residual of a sub-block, then the next sub-block's input norm:
 * x += rmsnorm(o) · post;  h = rmsnorm(x) · next (no h when next is NULL). */
static struct be_res_norm residual(const struct glim_model *m, struct fwd_scratch *s, const struct be_weight *post,
                                   const struct be_weight *next)
{
    const struct model_hparams *hp = &m->hp;
    return (struct be_res_norm){.x = s->x, .h = next ? s->h : NULL, .o = s->o, .w_o = post, .w_h = next,
                                .eps_o = hp->post_eps, .eps_h = hp->eps, .n = hp->n_embd};
}

/* The attention's residual, the FFN's input norm and the FFN: one backend call when it offers
 * them together (add_rmsnorm_ffn), else the residual step then the FFN */
static void norm_ffn(struct glim_model *m, int il, int T, struct fwd_scratch *s)
{
    const struct model_layer *L = &m->layers[il];
    struct backend *be = m->be;
    struct be_res_norm r = residual(m, s, &L->post_attn_norm, &L->ffn_norm);
    if (be->i->add_rmsnorm_ffn) {
        float *fs[2] = {s->f1, s->f2};
        const struct be_weight *ws[3] = {&L->ffn_gate, &L->ffn_up, &L->ffn_down};
        be->i->add_rmsnorm_ffn(be, &r, s->o, fs, ws, T, BE_GLU_SILU);
        return;
    }
    arch_res_norm(be, &r, T);
    arch_ffn(m, il, T, s);
}

static int mg_body(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                   struct fwd_scratch *s, struct glim_err *err)
{
    const struct model_hparams *hp = &m->hp;
    struct backend *be = m->be;
    int T = b->n_tokens, rc;
    be->i->get_rows(be, s->x, &m->tok_embd, s->ids, T);
    be->i->rmsnorm(be, s->x, s->x, NULL, T, hp->n_embd, hp->eps);   /* weightless embedding norm */
    if ((rc = arch_splice_embd(m, b, s, err)))                       /* image rows come normalized */
        return rc;
    /* layer 0's attn_norm here; every later one comes with the previous layer's residual,
     * which waits for the next layer's projections when the backend takes the two together
     * (add_rmsnorm_attn). The last layer's output is normed by the head (arch_common.c). */
    be->i->rmsnorm(be, s->h, s->x, &m->layers[0].attn_norm, T, hp->n_embd, hp->eps);
    struct be_res_norm pend;
    const struct be_res_norm *pre = NULL;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct model_layer *L = &m->layers[il];
        if (pre && arch_tapped(b, il)) {   /* a tap reads x entering the layer */
            arch_res_norm(be, pre, T);
            pre = NULL;
        }
        if ((rc = arch_tap(m, b, il, s, err)))   /* x entering layer il (h is its norm) */
            return rc;
        attention_block(m, kv, il, T, b->pos0, s, pre);
        norm_ffn(m, il, T, s);
        bool last = il + 1 == hp->n_layer;
        pend = residual(m, s, &L->post_ffw_norm, last ? NULL : &m->layers[il + 1].attn_norm);
        pre = !last && be->i->add_rmsnorm_attn ? &pend : NULL;
        if (!pre)
            arch_res_norm(be, &pend, T);
    }
    return arch_tap(m, b, hp->n_layer, s, err);
}

const struct arch_ops arch_muse_glimmer = {
    .name = "muse-glimmer",
    .load_hparams = mg_load_hparams,
    .load_tensors = mg_load_tensors,
    .scratch_bytes = arch_scratch_bytes,
    .body = mg_body,
    .forward = arch_forward,
};
