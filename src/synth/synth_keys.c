/*
 * synth_keys.c — metadata of a synthetic model: general.*, the arch keys
 * with the value types llama.cpp checks strictly (u32 ints, f32 floats, a
 * BOOL array for the SWA pattern; gguf-contract.md §1.2, §3.1 for dflash),
 * and the tokenizer, copied from a vocab GGUF or "no_vocab" with <arch>.vocab_size.
 */
#include "synth.h"

#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../gguf/gguf.h"

struct keys {
    struct gguf_writer *w;
    const char *arch;
    int rc;              /* first failure; later adds are skipped */
    char failed[96];     /* the key that failed */
};

static const char *arch_key(struct keys *k, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s.%s", k->arch, suffix);
    return buf;
}

static void note(struct keys *k, int rc, const char *key)
{
    if (rc && !k->rc) {
        k->rc = rc;
        snprintf(k->failed, sizeof k->failed, "%s", key);
    }
}

static void key_u32(struct keys *k, const char *suffix, uint32_t v)
{
    char b[96];
    if (!k->rc)
        note(k, gguf_writer_add_u32(k->w, arch_key(k, suffix, b, sizeof b), v), b);
}

static void key_f32(struct keys *k, const char *suffix, float v)
{
    char b[96];
    if (!k->rc)
        note(k, gguf_writer_add_f32(k->w, arch_key(k, suffix, b, sizeof b), v), b);
}

static void keys_general(struct keys *k, const struct synth_hparams *hp, const struct synth_ftype *ft)
{
    note(k, gguf_writer_add_str(k->w, "general.architecture", k->arch), "general.architecture");
    if (!k->rc)
        note(k, gguf_writer_add_str(k->w, "general.type", "model"), "general.type");
    if (!k->rc)
        note(k, gguf_writer_add_str(k->w, "general.name", hp->name), "general.name");
    if (!k->rc)
        note(k, gguf_writer_add_u32(k->w, "general.file_type", ft->file_type), "general.file_type");
    if (!k->rc)
        note(k, gguf_writer_add_u32(k->w, "general.quantization_version", 2),
             "general.quantization_version");
}

/* keys both llama and muse-glimmer read (llama.cpp load_hparams, generic part) */
static void keys_common(struct keys *k, const struct synth_hparams *hp)
{
    key_u32(k, "vocab_size", (uint32_t)hp->n_vocab);
    key_u32(k, "context_length", (uint32_t)hp->n_ctx);
    key_u32(k, "embedding_length", (uint32_t)hp->n_embd);
    key_u32(k, "block_count", (uint32_t)hp->n_layer);
    key_u32(k, "feed_forward_length", (uint32_t)hp->n_ff);
    key_u32(k, "attention.head_count", (uint32_t)hp->n_head);
    key_u32(k, "attention.head_count_kv", (uint32_t)hp->n_head_kv);
    key_u32(k, "attention.key_length", (uint32_t)hp->head_dim);
    key_u32(k, "attention.value_length", (uint32_t)hp->head_dim);
    key_f32(k, "attention.layer_norm_rms_epsilon", hp->eps);
    key_f32(k, "rope.freq_base", hp->rope_base);
}

static void keys_llama(struct keys *k, const struct synth_hparams *hp)
{
    keys_common(k, hp);
    key_u32(k, "rope.dimension_count", (uint32_t)hp->head_dim);
}

/* 3 sliding + 1 global for period 4: layer i is global iff i % period == period-1
 * (model.md §1.4; the converter writes a BOOL array, true = sliding) */
static void key_swa_pattern(struct keys *k, int n_layer, int period)
{
    if (k->rc)
        return;
    bool *swa = glim_malloc((size_t)n_layer * sizeof *swa);
    char b[96];
    arch_key(k, "attention.sliding_window_pattern", b, sizeof b);
    if (!swa) {
        note(k, GLIM_ENOMEM, b);
        return;
    }
    for (int il = 0; il < n_layer; il++)
        swa[il] = il % period != period - 1;
    note(k, gguf_writer_add_arr_bool(k->w, b, swa, (uint64_t)n_layer), b);
    glim_free(swa);
}

static void keys_muse(struct keys *k, const struct synth_hparams *hp)
{
    keys_common(k, hp);
    key_f32(k, "rope.freq_base_swa", hp->rope_base);
    key_u32(k, "attention.sliding_window", (uint32_t)hp->n_swa);
    key_f32(k, "logit_scale", hp->logit_scale);
    key_f32(k, "final_logit_softcapping", hp->softcap);
    key_swa_pattern(k, hp->n_layer, hp->swa_period);
}

/* gguf-contract.md §3.1: target_layers must be ARRAY[INT32] (stored ids =
 * HF ids + 1); the SWA keys only when there is a window, and then the
 * pattern as a BOOL array (period 0 = only the last layer global) */
static void keys_dflash(struct keys *k, const struct synth_hparams *hp)
{
    keys_common(k, hp);
    key_u32(k, "block_size", (uint32_t)hp->block_size);
    char b[96];
    int32_t taps[SYNTH_MAX_TAPS];
    for (int i = 0; i < hp->n_taps; i++)
        taps[i] = hp->target_layers[i];
    if (!k->rc)
        note(k, gguf_writer_add_arr_i32(k->w, arch_key(k, "target_layers", b, sizeof b), taps,
                                        (uint64_t)hp->n_taps), b);
    if (hp->n_swa > 0) {
        key_u32(k, "attention.sliding_window", (uint32_t)hp->n_swa);
        key_swa_pattern(k, hp->n_layer, hp->swa_period > 0 ? hp->swa_period : hp->n_layer);
    }
}

/* dflash: the draft borrows the target's tokenizer whatever its model
 * (no_vocab included), so copy tokenizer.* as is, but mask_token_id is ours */
static void keys_tokenizer_dflash(struct keys *k, const struct synth_hparams *hp, const struct gguf_file *vocab)
{
    static const char MASK[] = "tokenizer.ggml.mask_token_id";
    if (!vocab)
        note(k, gguf_writer_add_str(k->w, "tokenizer.ggml.model", "no_vocab"), "tokenizer.ggml.model");
    for (int64_t i = 0; vocab && i < gguf_kv_count(vocab) && !k->rc; i++) {
        const struct gguf_kv *kv = gguf_kv_at(vocab, i);
        if (!strncmp(kv->key, "tokenizer.", 10) && strcmp(kv->key, MASK))
            note(k, gguf_writer_add_kv_copy(k->w, kv), kv->key);
    }
    if (hp->mask_token_id >= 0 && !k->rc)
        note(k, gguf_writer_add_u32(k->w, MASK, (uint32_t)hp->mask_token_id), MASK);
}

static int keys_tokenizer(struct keys *k, const struct synth_hparams *hp, const struct gguf_file *vocab,
                          struct glim_err *err)
{
    if (hp->arch == SYNTH_ARCH_DFLASH) {
        keys_tokenizer_dflash(k, hp, vocab);
        return GLIM_OK;
    }
    if (!vocab) {
        note(k, gguf_writer_add_str(k->w, "tokenizer.ggml.model", "no_vocab"), "tokenizer.ggml.model");
        return GLIM_OK;
    }
    const struct gguf_kv *toks = gguf_kv_find(vocab, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_VT_ARRAY || toks->arr_type != GGUF_VT_STRING)
        return glim_fail(err, GLIM_EINVAL, "%s: no tokenizer.ggml.tokens string array", gguf_path(vocab));
    if (toks->arr_n != (uint64_t)hp->n_vocab)
        return glim_fail(err, GLIM_EINVAL, "%s: has %llu tokens, but the model's vocab is %d",
                         gguf_path(vocab), (unsigned long long)toks->arr_n, hp->n_vocab);
    for (int64_t i = 0; i < gguf_kv_count(vocab) && !k->rc; i++) {
        const struct gguf_kv *kv = gguf_kv_at(vocab, i);
        if (!strncmp(kv->key, "tokenizer.", 10))
            note(k, gguf_writer_add_kv_copy(k->w, kv), kv->key);
    }
    return GLIM_OK;
}

int synth_keys_add(struct gguf_writer *w, const struct synth_hparams *hp, const struct synth_ftype *ft,
                   const struct gguf_file *vocab, struct glim_err *err)
{
    struct keys k = {.w = w, .arch = synth_arch_name(hp->arch)};
    keys_general(&k, hp, ft);
    if (hp->arch == SYNTH_ARCH_MUSE_GLIMMER)
        keys_muse(&k, hp);
    else if (hp->arch == SYNTH_ARCH_DFLASH)
        keys_dflash(&k, hp);
    else
        keys_llama(&k, hp);
    int rc = keys_tokenizer(&k, hp, vocab, err);
    if (rc)
        return rc;
    if (k.rc)
        return glim_fail(err, k.rc, "mkmodel: adding key '%s' failed (%s)", k.failed,
                         glim_status_name(k.rc));
    return GLIM_OK;
}
