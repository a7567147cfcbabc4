/*
 * arch_llama.c — llama-family models as llama.cpp's `llama` architecture
 * stores them (the small real test checkpoints, e.g. stories260K):
 *   embedding → L × [ RMSNorm → attention (RoPE NORM, GQA) → residual;
 *                     RMSNorm → SwiGLU FFN → residual ] → RMSNorm → lm head.
 * output.weight falls back to token_embd.weight when absent (tied), as in
 * llama.cpp; never for muse-glimmer.
 */
#include <math.h>

#include "../base/alloc.h"
#include "arch_common.h"

static int llama_load_hparams(struct glim_model *m, struct glim_err *err)
{
    struct model_hparams *hp = &m->hp;
    int rc = arch_read_common(m, err);
    if (rc != GLIM_OK)
        return rc;
    hp->rope_base = 10000.0f;
    if ((rc = model_get_f32(m, "rope.freq_base", &hp->rope_base, false, err)))
        return rc;
    uint32_t n_rot = (uint32_t)hp->head_dim;
    if ((rc = model_get_u32(m, "rope.dimension_count", &n_rot, false, err)))
        return rc;
    if (n_rot == 0 || n_rot > (uint32_t)hp->head_dim || n_rot % 2)
        return glim_fail(err, GLIM_EFORMAT, "llama.rope.dimension_count: expected an even 2..%d, got %u",
                         hp->head_dim, n_rot);
    if (!(hp->rope_base > 0))
        return glim_fail(err, GLIM_EFORMAT, "llama.rope.freq_base: expected > 0");
    hp->n_rot = (int)n_rot;
    hp->rope_base_swa = hp->rope_base;
    hp->post_eps = hp->eps;
    return GLIM_OK;
}

static int llama_load_tensors(struct glim_model *m, struct glim_err *err)
{
    const struct model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd;
    int rc;
    if ((rc = model_bind(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, true, err)) ||
        (rc = model_bind(m, &m->output_norm, "output_norm.weight", E, 0, true, err)) ||
        (rc = model_bind(m, &m->output, "output.weight", E, hp->n_vocab, false, err)))
        return rc;
    if (!m->output.host)
        m->output = m->tok_embd;   /* tied embeddings: a view, freed once */
    m->layers = glim_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return glim_fail(err, GLIM_ENOMEM, "out of memory for %d layers", hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++)
        if ((rc = arch_bind_layer_common(m, il, err)))
            return rc;
    return GLIM_OK;
}

static void attention_block(struct glim_model *m, struct kv_cache *kv, int il, int T, int32_t pos0,
                            struct fwd_scratch *s)
{
    const struct model_hparams *hp = &m->hp;
    const struct model_layer *L = &m->layers[il];
    struct backend *be = m->be;
    const struct backend_i *op = be->i;
    struct attend_opts o = {.rope = true, .rope_base = hp->rope_base, .neox = false};

    op->rmsnorm(be, s->h, s->x, &L->attn_norm, T, hp->n_embd, hp->eps);
    arch_attend(m, kv, il, T, pos0, s, &o);
    op->matmul(be, s->o, &L->wo, s->a, T);
    op->add(be, s->x, s->o, (int64_t)T * hp->n_embd);
}

static void ffn_block(struct glim_model *m, int il, int T, struct fwd_scratch *s)
{
    struct backend *be = m->be;
    be->i->rmsnorm(be, s->h, s->x, &m->layers[il].ffn_norm, T, m->hp.n_embd, m->hp.eps);
    arch_ffn(m, il, T, s);
    be->i->add(be, s->x, s->o, (int64_t)T * m->hp.n_embd);
}

static int llama_body(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                      struct fwd_scratch *s, struct glim_err *err)
{
    struct backend *be = m->be;
    int T = b->n_tokens, rc;
    be->i->get_rows(be, s->x, &m->tok_embd, s->ids, T);
    if ((rc = arch_splice_embd(m, b, s, err)))
        return rc;
    for (int il = 0; il < m->hp.n_layer; il++) {
        if ((rc = arch_tap(m, b, il, s, err)))
            return rc;
        attention_block(m, kv, il, T, b->pos0, s);
        ffn_block(m, il, T, s);
    }
    return arch_tap(m, b, m->hp.n_layer, s, err);
}

const struct arch_ops arch_llama = {
    .name = "llama",
    .load_hparams = llama_load_hparams,
    .load_tensors = llama_load_tensors,
    .scratch_bytes = arch_scratch_bytes,
    .body = llama_body,
    .forward = arch_forward,
};
