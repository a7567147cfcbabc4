/*
 * arch_dflash.c — the DFlash block-diffusion draft model (runtime.md §1.1–1.5,
 * gguf-contract.md §3). It reads the residual stream entering chosen target
 * layers and drafts a whole block of tokens in one bidirectional forward.
 *
 *   inject:  c = RMSNorm_enc(fc · concat(taps))                 per committed row
 *            K_l = rope_neox(qk_norm(Wk_l c)), V_l = Wv_l c     → draft KV at the row's position
 *   draft:   x = target.token_embd[block]  (no embedding norm)
 *            L × [ x += Wo · attn(rope_neox(qk_norm(Wq h)), ...) over context + whole block;
 *                  x += SwiGLU FFN ]
 *            logits = target lm_head · RMSNorm(x)   raw: no logit scale, no soft-cap
 *
 * Sliding draft layers see the last W context rows plus the block, the same for
 * every block query (the ExecuTorch rule; spec/README.md rule 7).
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../base/alloc.h"
#include "arch_common.h"

static int dflash_load_hparams(struct glim_model *m, struct glim_err *err)
{
    struct model_hparams *hp = &m->hp;
    const struct model_hparams *th = &m->target->hp;
    uint32_t E = 0, L = 0, H = 0, Hkv = 0, D = 0, F = 0, ctx = 0, bs = 16, W = 0;
    int rc;
    if ((rc = model_get_u32(m, "embedding_length", &E, true, err)) ||
        (rc = model_get_u32(m, "block_count", &L, true, err)) ||
        (rc = model_get_u32(m, "attention.head_count", &H, true, err)) ||
        (rc = model_get_u32(m, "feed_forward_length", &F, true, err)) ||
        (rc = model_get_u32(m, "context_length", &ctx, true, err)) ||
        (rc = model_get_f32(m, "attention.layer_norm_rms_epsilon", &hp->eps, true, err)))
        return rc;
    Hkv = H;
    D = H ? E / H : 0;
    hp->rope_base = 10000.0f;
    if ((rc = model_get_u32(m, "attention.head_count_kv", &Hkv, false, err)) ||
        (rc = model_get_u32(m, "attention.key_length", &D, false, err)) ||
        (rc = model_get_u32(m, "block_size", &bs, false, err)) ||
        (rc = model_get_u32(m, "attention.sliding_window", &W, false, err)) ||
        (rc = model_get_f32(m, "rope.freq_base", &hp->rope_base, false, err)))
        return rc;
    if (E != (uint32_t)th->n_embd)
        return glim_fail(err, GLIM_EFORMAT, "dflash.embedding_length %u != the target's %d", E, th->n_embd);
    if (L == 0 || L > GLIM_MAX_LAYERS || H == 0 || H > 4096 || Hkv == 0 || H % Hkv || D == 0 ||
        D > 1024 || F == 0 || bs < 2 || bs > 64 || !(hp->eps > 0 && hp->eps < 1) || !(hp->rope_base > 0))
        return glim_fail(err, GLIM_EFORMAT, "dflash hyperparameters out of range (layers %u, heads %u/%u, "
                         "head_dim %u, ffn %u, block_size %u)", L, H, Hkv, D, F, bs);
    hp->n_embd = (int)E, hp->n_layer = (int)L, hp->n_head = (int)H, hp->n_head_kv = (int)Hkv;
    hp->head_dim = (int)D, hp->n_ff = (int)F, hp->n_ctx_train = ctx, hp->n_rot = (int)D;
    hp->n_vocab = th->n_vocab;
    hp->block_size = (int)bs;
    hp->rope_neox = true;       /* the draft keeps the rotate-half layout (gguf-contract §3.2) */
    hp->attn_scale = 1.0f / sqrtf((float)D);
    hp->logit_scale = 1.0f, hp->softcap = 0.0f;
    hp->post_eps = hp->eps;
    hp->n_swa = (int)GLIM_MIN(W, 0x7fffffffu);
    if (W > 0) {
        const struct gguf_kv *kv = gguf_kv_find(m->gguf, "dflash.attention.sliding_window_pattern");
        if (!kv || kv->type != GGUF_VT_ARRAY || kv->arr_n != L)
            return glim_fail(err, GLIM_EFORMAT,
                             "dflash.attention.sliding_window_pattern: expected an array of %u bools", L);
        for (uint32_t l = 0; l < L; l++) {
            int64_t v;
            if (gguf_arr_int(kv, l, &v) != GLIM_OK)
                return glim_fail(err, GLIM_EFORMAT, "dflash.attention.sliding_window_pattern: bad entry");
            hp->is_swa[l] = v != 0;
        }
    }
    const struct gguf_kv *tl = gguf_kv_find(m->gguf, "dflash.target_layers");
    if (!tl || tl->type != GGUF_VT_ARRAY || tl->arr_n == 0 || tl->arr_n > GLIM_MAX_TAPS)
        return glim_fail(err, GLIM_EFORMAT, "dflash.target_layers: expected an array of 1..%d layer ids",
                         GLIM_MAX_TAPS);
    hp->n_target_layers = (int)tl->arr_n;
    for (int i = 0; i < hp->n_target_layers; i++) {
        int64_t v;
        if (gguf_arr_int(tl, (uint64_t)i, &v) != GLIM_OK || v < 0 || v >= th->n_layer)
            return glim_fail(err, GLIM_EFORMAT, "dflash.target_layers[%d]: expected 0..%d", i, th->n_layer - 1);
        hp->target_layers[i] = (int)v;
    }
    uint32_t mask = 201818;   /* ExecuTorch's default when the key is absent */
    rc = gguf_get_u32(m->gguf, "tokenizer.ggml.mask_token_id", &mask, err);
    if (rc != GLIM_OK && rc != GLIM_ENOTFOUND)
        return rc;
    if (mask >= (uint32_t)hp->n_vocab)
        return glim_fail(err, GLIM_EFORMAT, "tokenizer.ggml.mask_token_id %u: expected < %d", mask, hp->n_vocab);
    hp->mask_token_id = (int32_t)mask;
    return GLIM_OK;
}

static int dflash_load_tensors(struct glim_model *m, struct glim_err *err)
{
    const struct model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, D = hp->head_dim;
    int rc;
    if ((rc = model_bind(m, &m->fc, "fc.weight", (int64_t)hp->n_target_layers * E, E, true, err)) ||
        (rc = model_bind(m, &m->enc_norm, "enc.output_norm.weight", E, 0, true, err)) ||
        (rc = model_bind(m, &m->output_norm, "output_norm.weight", E, 0, true, err)) ||
        (rc = model_bind(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, false, err)) ||
        (rc = model_bind(m, &m->output, "output.weight", E, hp->n_vocab, false, err)))
        return rc;
    m->owns_embd = m->tok_embd.host != NULL;
    m->owns_output = m->output.host != NULL;
    if (!m->owns_embd)
        m->tok_embd = m->target->tok_embd;
    if (!m->owns_output)
        m->output = m->target->output;
    m->layers = glim_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        if ((rc = arch_bind_layer_common(m, il, err)))
            return rc;
        const struct blk_tensor t[] = {
            {offsetof(struct model_layer, q_norm), "attn_q_norm", D, 0},
            {offsetof(struct model_layer, k_norm), "attn_k_norm", D, 0},
        };
        if ((rc = model_bind_blk(m, il, t, 2, true, err)))
            return rc;
    }
    return GLIM_OK;
}

/* The arch scratch plus room for the tapped features [n][n_taps * n_embd]. */
size_t dflash_scratch_bytes(const struct glim_model *d, int n_rows)
{
    size_t feat = (size_t)n_rows * d->hp.n_target_layers * d->hp.n_embd * sizeof(float);
    return ((arch_scratch_bytes(d, n_rows) + 63) & ~(size_t)63) + feat;
}

static float *feat_area(const struct glim_model *d, int n_rows, void *scratch)
{
    return (float *)((char *)scratch + ((arch_scratch_bytes(d, n_rows) + 63) & ~(size_t)63));
}

static int upload_pos(struct glim_model *d, int32_t *dst, int n, int32_t pos0, struct glim_err *err)
{
    int32_t buf[64];
    for (int t0 = 0; t0 < n; t0 += 64) {
        int k = GLIM_MIN(64, n - t0);
        for (int i = 0; i < k; i++)
            buf[i] = pos0 + t0 + i;
        int rc = d->be->i->upload(d->be, dst + t0, buf, (size_t)k * sizeof(int32_t), err);
        if (rc != GLIM_OK)
            return rc;
    }
    return GLIM_OK;
}

int dflash_inject(struct glim_model *d, struct kv_cache *kv, const float *feat, bool feat_on_backend, int n,
                  int32_t pos0, void *scratch, struct glim_err *err)
{
    const struct model_hparams *hp = &d->hp;
    struct backend *be = d->be;
    const struct backend_i *op = be->i;
    struct fwd_scratch s;
    arch_scratch_layout(d, n, scratch, &s);
    const float *f = feat_on_backend ? feat : feat_area(d, n, scratch);
    int E = hp->n_embd, Hkv = hp->n_head_kv, D = hp->head_dim;
    size_t feat_bytes = (size_t)n * hp->n_target_layers * E * sizeof(float);
    int rc = feat_on_backend ? GLIM_OK : op->upload(be, (float *)f, feat, feat_bytes, err);
    if (rc == GLIM_OK)
        rc = upload_pos(d, s.pos, n, pos0, err);
    if (rc != GLIM_OK)
        return rc;
    op->matmul(be, s.x, &d->fc, f, n);                          /* [n][E] */
    op->rmsnorm(be, s.x, s.x, &d->enc_norm, n, E, hp->eps);
    for (int il = 0; il < hp->n_layer; il++) {                  /* context K/V only */
        const struct model_layer *L = &d->layers[il];
        op->matmul(be, s.k, &L->wk, s.x, n);
        op->matmul(be, s.v, &L->wv, s.x, n);
        struct kv_layer *c = &kv->layers[il];
        struct be_attn_prep_args p = {
            .k = s.k, .v = s.v, .k_norm = &L->k_norm, .eps = hp->eps,
            .rope = true, .neox = true, .n_rot = hp->n_rot, .rope_base = hp->rope_base,
            .k_cache = c->k, .v_cache = c->v, .kv_type = kv->type, .n_slots = c->n_slots,
            .n_tokens = n, .pos = s.pos, .n_head_kv = Hkv, .head_dim = D,
        };
        arch_attn_prep(be, &p);   /* keys only: no queries at injection */
    }
    return GLIM_OK;
}

static void draft_layer(struct glim_model *d, struct kv_cache *kv, int il, int T, int32_t pos0,
                        struct fwd_scratch *s)
{
    const struct model_hparams *hp = &d->hp;
    const struct model_layer *L = &d->layers[il];
    struct backend *be = d->be;
    const struct backend_i *op = be->i;
    int E = hp->n_embd;
    /* block K/V go where the next committed rows will be injected: transient */
    struct attend_opts o = {.rope = true, .rope_base = hp->rope_base, .neox = true,
                            .window = hp->is_swa[il] ? hp->n_swa : 0, .block = T};

    op->rmsnorm(be, s->h, s->x, &L->attn_norm, T, E, hp->eps);
    arch_attend(d, kv, il, T, pos0, s, &o);
    op->matmul(be, s->o, &L->wo, s->a, T);
    op->add(be, s->x, s->o, (int64_t)T * E);
    op->rmsnorm(be, s->h, s->x, &L->ffn_norm, T, E, hp->eps);
    arch_ffn(d, il, T, s);
    op->add(be, s->x, s->o, (int64_t)T * E);
}

static int dflash_forward(struct glim_model *d, struct kv_cache *kv, const struct fwd_batch *b,
                          void *scratch, struct glim_err *err)
{
    struct backend *be = d->be;
    int T = b->n_tokens;
    struct fwd_scratch s;
    arch_scratch_layout(d, T, scratch, &s);
    int rc = arch_upload_inputs(d, b, &s, err);
    if (rc != GLIM_OK)
        return rc;
    be->i->get_rows(be, s.x, &d->tok_embd, s.ids, T);   /* raw: no embedding norm */
    for (int il = 0; il < d->hp.n_layer; il++)
        draft_layer(d, kv, il, T, b->pos0, &s);
    return arch_output(d, b, &s, err);
}

int dflash_draft(struct glim_model *d, struct kv_cache *kv, const int32_t *block, int T, int32_t pos0,
                 float *logits, int32_t *picks, void *scratch, struct glim_err *err)
{
    struct fwd_batch b = {.n_tokens = T, .tokens = block, .pos0 = pos0, .n_out = T, .logits = logits,
                          .picks = picks};
    return dflash_forward(d, kv, &b, scratch, err);
}

static int dflash_load_hparams_entry(struct glim_model *m, struct glim_err *err)
{
    if (!m->target)
        return glim_fail(err, GLIM_EINVAL, "a dflash model is a draft: load it with --draft next to its target");
    return dflash_load_hparams(m, err);
}

const struct arch_ops arch_dflash = {
    .name = "dflash",
    .load_hparams = dflash_load_hparams_entry,
    .load_tensors = dflash_load_tensors,
    .scratch_bytes = dflash_scratch_bytes,
    .forward = dflash_forward,
};
