/*
 * synth_plan.c — the tensor list of each synthetic architecture: names and
 * shapes exactly as llama.cpp's loaders want them (gguf-contract.md §2.1 for
 * muse-glimmer, §3.2 for dflash, llama.cpp's LLM_ARCH_LLAMA list for llama), per-tensor types
 * from the quant mix, and the init statistics (see synth.h).
 */
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../quant/quant.h"

enum { MAX_DIM = 1 << 24 };   /* sanity bound for every flag-controlled dimension */

static int plan_push(struct synth_plan *p, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                     float mean, float std, struct glim_err *err)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        struct synth_tensor *t = glim_realloc(p->t, (size_t)cap * sizeof *t);
        if (!t)
            return glim_fail(err, GLIM_ENOMEM, "mkmodel: out of memory for the tensor list");
        p->t = t;
        p->cap = cap;
    }
    const struct quant_traits *qt = quant_traits(type);
    if (!qt || !qt->from_f32)
        return glim_fail(err, GLIM_EUNSUPPORTED, "tensor '%s': type %s has no quantizer", name,
                         quant_type_name(type));
    if (ne0 % qt->block_elems)
        return glim_fail(err, GLIM_EINVAL,
                         "tensor '%s': row of %lld elements is not a multiple of %s's block of %d; "
                         "choose dimensions that are multiples of %d or another --type",
                         name, (long long)ne0, qt->name, qt->block_elems, qt->block_elems);
    struct synth_tensor *t = &p->t[p->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = ne1 > 0 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 > 0 ? ne1 : 1;
    t->mean = mean;
    t->std = std;
    size_t row = quant_row_bytes(type, ne0);
    if (__builtin_mul_overflow(row, (size_t)t->ne[1], &t->nbytes) ||
        __builtin_add_overflow(p->total_bytes, t->nbytes, &p->total_bytes))
        return glim_fail(err, GLIM_ENOMEM, "tensor '%s': size overflows", name);
    p->n_params += ne0 * t->ne[1];
    p->n++;
    return GLIM_OK;
}

/* A matrix [fan_in, n_out] with N(0, 1/fan_in) elements (unit-variance outputs). */
static int plan_matrix(struct synth_plan *p, const char *name, uint32_t type, int64_t fan_in,
                       int64_t n_out, struct glim_err *err)
{
    return plan_push(p, name, type, fan_in, n_out, 0.0f, 1.0f / sqrtf((float)fan_in), err);
}

/* A trained RMSNorm gain: near 1, not exactly 1, so a missing multiply shows. */
static int plan_norm(struct synth_plan *p, const char *name, int64_t n, struct glim_err *err)
{
    return plan_push(p, name, GLIM_TYPE_F32, n, 0, 1.0f, 0.1f, err);
}

/* token_embd, output_norm, output: shared by every arch */
static int plan_ends(struct synth_plan *p, const struct synth_hparams *hp, const struct synth_ftype *ft,
                     struct glim_err *err)
{
    /* output std so that logit_scale·(W·y), y of unit rms, has std ≈ 3:
     * a spread of a few units, well inside a soft-cap of 20-30 */
    float out_std = 3.0f / (hp->logit_scale * sqrtf((float)hp->n_embd));
    int rc = plan_push(p, "token_embd.weight", ft->token_embd, hp->n_embd, hp->n_vocab, 0.0f,
                       1.0f / sqrtf((float)hp->n_embd), err);
    if (!rc)
        rc = plan_norm(p, "output_norm.weight", hp->n_embd, err);
    if (!rc)
        rc = plan_push(p, "output.weight", ft->output, hp->n_embd, hp->n_vocab, 0.0f, out_std, err);
    return rc;
}

/* "blk.<il>.<suffix>.weight" in the caller's buffer n */
#define BLK(suffix) (snprintf(n, sizeof n, "blk.%d." suffix ".weight", il), n)

/* attn_norm, attn_q, attn_k, attn_v: how every arch's block starts */
static int plan_attn_in(struct synth_plan *p, const struct synth_hparams *hp, const struct synth_ftype *ft,
                        int il, struct glim_err *err)
{
    int64_t E = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim,
            kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    uint32_t t = ft->base, tmb = synth_use_more_bits(il, hp->n_layer) ? ft->more_bits : ft->base;
    char n[64];
    int rc = 0;
    rc = rc ? rc : plan_norm(p, BLK("attn_norm"), E, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_q"), t, E, q_dim, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_k"), t, E, kv_dim, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_v"), tmb, E, kv_dim, err);
    return rc;
}

static int plan_layer_llama(struct synth_plan *p, const struct synth_hparams *hp,
                            const struct synth_ftype *ft, int il, struct glim_err *err)
{
    int64_t E = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim, F = hp->n_ff;
    uint32_t t = ft->base, tmb = synth_use_more_bits(il, hp->n_layer) ? ft->more_bits : ft->base;
    char n[64];
    int rc = plan_attn_in(p, hp, ft, il, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_output"), t, q_dim, E, err);
    rc = rc ? rc : plan_norm(p, BLK("ffn_norm"), E, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_gate"), t, E, F, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_down"), tmb, F, E, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_up"), t, E, F, err);
    return rc;
}

/* gguf-contract.md §2.1: sandwich norms, q/k norms (q_norm = absorbed query
 * scale, k_norm = 1), sigmoid output gate */
static int plan_layer_muse(struct synth_plan *p, const struct synth_hparams *hp,
                           const struct synth_ftype *ft, int il, struct glim_err *err)
{
    int64_t E = hp->n_embd, D = hp->head_dim, q_dim = (int64_t)hp->n_head * D, F = hp->n_ff;
    uint32_t t = ft->base, tmb = synth_use_more_bits(il, hp->n_layer) ? ft->more_bits : ft->base;
    float q_norm = hp->q_norm > 0 ? hp->q_norm : (float)(43.7840518911 / sqrt((double)D));
    char n[64];
    int rc = plan_attn_in(p, hp, ft, il, err);
    rc = rc ? rc : plan_push(p, BLK("attn_q_norm"), GLIM_TYPE_F32, D, 0, q_norm, 0.0f, err);
    rc = rc ? rc : plan_push(p, BLK("attn_k_norm"), GLIM_TYPE_F32, D, 0, 1.0f, 0.0f, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_gate"), t, E, q_dim, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_output"), t, q_dim, E, err);
    rc = rc ? rc : plan_norm(p, BLK("post_attention_norm"), E, err);
    rc = rc ? rc : plan_norm(p, BLK("ffn_norm"), E, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_gate"), t, E, F, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_up"), t, E, F, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_down"), tmb, F, E, err);
    rc = rc ? rc : plan_norm(p, BLK("post_ffw_norm"), E, err);
    return rc;
}

/* gguf-contract.md §3.2: the encoder (fc over the T concatenated taps, then
 * its RMSNorm) and the final norm; token_embd/output come from the target */
static int plan_ends_dflash(struct synth_plan *p, const struct synth_hparams *hp, const struct synth_ftype *ft,
                            struct glim_err *err)
{
    int64_t E = hp->n_embd;
    int rc = plan_matrix(p, "fc.weight", ft->base, (int64_t)hp->n_taps * E, E, err);   /* [T*E, E] */
    rc = rc ? rc : plan_norm(p, "enc.output_norm.weight", E, err);
    rc = rc ? rc : plan_norm(p, "output_norm.weight", E, err);
    return rc;
}

/* Qwen3-style block: learned q/k norms (1 + 0.1·N like every other norm),
 * no gate, no sandwich norms */
static int plan_layer_dflash(struct synth_plan *p, const struct synth_hparams *hp,
                             const struct synth_ftype *ft, int il, struct glim_err *err)
{
    int64_t E = hp->n_embd, D = hp->head_dim, q_dim = (int64_t)hp->n_head * D, F = hp->n_ff;
    uint32_t t = ft->base, tmb = synth_use_more_bits(il, hp->n_layer) ? ft->more_bits : ft->base;
    char n[64];
    int rc = plan_attn_in(p, hp, ft, il, err);
    rc = rc ? rc : plan_norm(p, BLK("attn_q_norm"), D, err);
    rc = rc ? rc : plan_norm(p, BLK("attn_k_norm"), D, err);
    rc = rc ? rc : plan_matrix(p, BLK("attn_output"), t, q_dim, E, err);
    rc = rc ? rc : plan_norm(p, BLK("ffn_norm"), E, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_gate"), t, E, F, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_up"), t, E, F, err);
    rc = rc ? rc : plan_matrix(p, BLK("ffn_down"), tmb, F, E, err);
#undef BLK
    return rc;
}

typedef int (*plan_ends_fn)(struct synth_plan *p, const struct synth_hparams *hp,
                            const struct synth_ftype *ft, struct glim_err *err);
typedef int (*plan_layer_fn)(struct synth_plan *p, const struct synth_hparams *hp,
                             const struct synth_ftype *ft, int il, struct glim_err *err);

/* per arch: the tensors outside the blocks, then one block */
static const struct {
    plan_ends_fn  ends;
    plan_layer_fn layer;
} PLAN[SYNTH_ARCH_COUNT] = {
    [SYNTH_ARCH_LLAMA] = {plan_ends, plan_layer_llama},
    [SYNTH_ARCH_MUSE_GLIMMER] = {plan_ends, plan_layer_muse},
    [SYNTH_ARCH_DFLASH] = {plan_ends_dflash, plan_layer_dflash},
};

static int check_dim(const char *flag, long long v, long long lo, struct glim_err *err)
{
    if (v < lo || v > MAX_DIM)
        return glim_fail(err, GLIM_EINVAL, "%s: expected %lld..%d, got %lld", flag, lo, MAX_DIM, v);
    return GLIM_OK;
}

/* the ranges arch_dflash.c's loader accepts */
static int check_dflash(const struct synth_hparams *hp, struct glim_err *err)
{
    if (hp->block_size < 2 || hp->block_size > 64)
        return glim_fail(err, GLIM_EINVAL, "--block-size: expected 2..64, got %d", hp->block_size);
    if (hp->n_taps < 1 || hp->n_taps > SYNTH_MAX_TAPS)
        return glim_fail(err, GLIM_EINVAL, "--target-layers: expected 1..%d layer ids, got %d", SYNTH_MAX_TAPS,
                         hp->n_taps);
    int hi = hp->n_target_layer > 0 ? hp->n_target_layer - 1 : MAX_DIM;
    for (int k = 0; k < hp->n_taps; k++)
        if (hp->target_layers[k] < 0 || hp->target_layers[k] > hi)
            return glim_fail(err, GLIM_EINVAL, "--target-layers[%d]: expected 0..%d (the target's layers), got %d",
                             k, hi, hp->target_layers[k]);
    if (hp->mask_token_id >= hp->n_vocab)
        return glim_fail(err, GLIM_EINVAL, "--mask-token: expected < vocab %d, got %d", hp->n_vocab,
                         (int)hp->mask_token_id);
    if (hp->n_swa < 0 || hp->swa_period < 0)
        return glim_fail(err, GLIM_EINVAL, "--window/--swa-period: expected >= 0, got %d/%d", hp->n_swa,
                         hp->swa_period);
    return GLIM_OK;
}

static int check_hparams(const struct synth_hparams *hp, struct glim_err *err)
{
    if ((unsigned)hp->arch >= SYNTH_ARCH_COUNT)
        return glim_fail(err, GLIM_EINVAL, "--arch: unknown architecture %d", (int)hp->arch);
    int rc = check_dim("--dim", hp->n_embd, 1, err);
    rc = rc ? rc : check_dim("--layers", hp->n_layer, 1, err);
    rc = rc ? rc : check_dim("--heads", hp->n_head, 1, err);
    rc = rc ? rc : check_dim("--kv-heads", hp->n_head_kv, 1, err);
    rc = rc ? rc : check_dim("--head-dim", hp->head_dim, 2, err);
    rc = rc ? rc : check_dim("--ffn", hp->n_ff, 1, err);
    rc = rc ? rc : check_dim("--vocab", hp->n_vocab, 1, err);
    rc = rc ? rc : check_dim("--ctx", hp->n_ctx, 1, err);
    if (rc)
        return rc;
    if (hp->n_layer > 512)
        return glim_fail(err, GLIM_EINVAL, "--layers: expected at most 512, got %d", hp->n_layer);
    if (hp->n_head % hp->n_head_kv)
        return glim_fail(err, GLIM_EINVAL, "--kv-heads: %d must divide --heads %d", hp->n_head_kv,
                         hp->n_head);
    if (hp->head_dim % 2)
        return glim_fail(err, GLIM_EINVAL, "--head-dim: RoPE needs an even head size, got %d",
                         hp->head_dim);
    if (hp->arch == SYNTH_ARCH_MUSE_GLIMMER && (hp->n_swa < 1 || hp->swa_period < 1))
        return glim_fail(err, GLIM_EINVAL, "--window/--swa-period: expected >= 1, got %d/%d", hp->n_swa,
                         hp->swa_period);
    if (!(hp->eps > 0) || !(hp->logit_scale > 0) || !(hp->rope_base > 0) || !(hp->softcap >= 0))
        return glim_fail(err, GLIM_EINVAL, "--eps/--logit-scale/--rope-base/--softcap: expected > 0");
    return hp->arch == SYNTH_ARCH_DFLASH ? check_dflash(hp, err) : GLIM_OK;
}

int synth_plan_build(const struct synth_hparams *hp, const struct synth_ftype *ft, struct synth_plan *out,
                     struct glim_err *err)
{
    struct synth_plan p = {0};
    int rc = check_hparams(hp, err);
    if (!rc)
        rc = PLAN[hp->arch].ends(&p, hp, ft, err);
    for (int il = 0; !rc && il < hp->n_layer; il++)
        rc = PLAN[hp->arch].layer(&p, hp, ft, il, err);
    if (rc) {
        synth_plan_clear(&p);
        return rc;
    }
    *out = p;
    return GLIM_OK;
}

void synth_plan_clear(struct synth_plan *p)
{
    if (!p)
        return;
    glim_free(p->t);
    memset(p, 0, sizeof *p);
}
