/*
 * synth_like.c — the shape of a random DFlash drafter for a given target
 * (`glim mkmodel --like TARGET.gguf`): what runtime.md §1.1 fixes for the
 * 30B (dim = target dim, 4 query heads per KV head, the target's head_dim and
 * ffn, 5 layers, block 16) carried over to any target's sizes.
 */
#include "synth.h"

#include <stdio.h>
#include <string.h>

#include "../gguf/gguf.h"
#include "../quant/quant.h"

/* "<arch>.<suffix>" of the target as an integer; def when absent */
static int64_t target_int(const struct gguf_file *f, const char *arch, const char *suffix, int64_t def)
{
    char key[128];
    int64_t v = def;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    gguf_get_i64(f, key, &v, NULL);
    return v;
}

/* The target's vocabulary size: its token list, <arch>.vocab_size, or token_embd's rows. */
static int64_t target_vocab(const struct gguf_file *f, const char *arch)
{
    const struct gguf_kv *toks = gguf_kv_find(f, "tokenizer.ggml.tokens");
    if (toks && toks->type == GGUF_VT_ARRAY)
        return (int64_t)toks->arr_n;
    const struct gguf_tensor *te = gguf_tensor_find(f, "token_embd.weight");
    return target_int(f, arch, "vocab_size", te ? te->ne[1] : 0);
}

static bool in_range(int64_t v, int64_t lo, int64_t hi)
{
    return v >= lo && v <= hi;
}

int synth_dflash_like(const struct gguf_file *target, struct synth_hparams *hp, uint32_t *matrix_type,
                      struct glim_err *err)
{
    const char *s = NULL;
    size_t n = 0;
    char an[64];
    int rc = gguf_get_str(target, "general.architecture", &s, &n, err);
    if (rc)
        return rc;
    snprintf(an, sizeof an, "%.*s", (int)GLIM_MIN(n, sizeof an - 1), s);
    int64_t E = target_int(target, an, "embedding_length", 0), L = target_int(target, an, "block_count", 0);
    int64_t H = target_int(target, an, "attention.head_count", 0);
    int64_t F = target_int(target, an, "feed_forward_length", 0), V = target_vocab(target, an);
    int64_t D = target_int(target, an, "attention.key_length", H > 0 ? E / H : 0);
    if (!strcmp(an, "dflash") || !in_range(E, 1, 1 << 24) || !in_range(L, 1, 512) || !in_range(H, 1, 4096) ||
        !in_range(F, 1, 1 << 24) || !in_range(V, 1, 1 << 24) || !in_range(D, 2, 1 << 16))
        return glim_fail(err, GLIM_EINVAL, "%s: expected a target model, got %s with embedding_length %lld, "
                         "block_count %lld, head_count %lld, key_length %lld, feed_forward_length %lld, vocab %lld",
                         gguf_path(target), an, (long long)E, (long long)L, (long long)H, (long long)D,
                         (long long)F, (long long)V);
    synth_hparams_default(SYNTH_ARCH_DFLASH, hp);
    hp->n_embd = (int)E;
    hp->n_layer = 5;
    hp->n_head = (int)H;
    for (hp->n_head_kv = (int)GLIM_MAX(H / 4, 1); H % hp->n_head_kv;)   /* 32 -> 8 as in the 30B drafter */
        hp->n_head_kv--;
    hp->head_dim = (int)D;
    hp->n_ff = (int)F;
    hp->n_vocab = (int)V;
    hp->n_ctx = target_int(target, an, "context_length", hp->n_ctx);
    hp->n_target_layer = (int)L;
    hp->n_taps = synth_dflash_taps((int)L, 5, hp->target_layers);
    uint32_t mask = (uint32_t)V - 1;
    gguf_get_u32(target, "tokenizer.ggml.mask_token_id", &mask, NULL);
    hp->mask_token_id = (int32_t)GLIM_MIN(mask, (uint32_t)INT32_MAX);
    snprintf(hp->name, sizeof hp->name, "dflash-synthetic");
    const struct gguf_tensor *up = gguf_tensor_find(target, "blk.0.ffn_up.weight");
    *matrix_type = up ? up->type : GLIM_TYPE_COUNT;
    return GLIM_OK;
}
