/*
 * synth.c — the tables of `glim mkmodel`: architecture names, quant mixes
 * (llama.cpp's ftypes) and presets with the real shapes of published models
 * (the 30B target and its DFlash drafter).
 */
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../quant/quant.h"

/* general.file_type values are llama.cpp's enum llama_ftype. Plain types use
 * one type everywhere; the _M mixes follow llama-quantize (model.md §3.3):
 * output Q6_K, attn_v/ffn_down Q6_K on the use_more_bits layers. */
static const struct synth_ftype FTYPES[] = {
    {"F32", GLIM_TYPE_F32, GLIM_TYPE_F32, GLIM_TYPE_F32, GLIM_TYPE_F32, 0},
    {"F16", GLIM_TYPE_F16, GLIM_TYPE_F16, GLIM_TYPE_F16, GLIM_TYPE_F16, 1},
    {"BF16", GLIM_TYPE_BF16, GLIM_TYPE_BF16, GLIM_TYPE_BF16, GLIM_TYPE_BF16, 32},
    {"Q8_0", GLIM_TYPE_Q8_0, GLIM_TYPE_Q8_0, GLIM_TYPE_Q8_0, GLIM_TYPE_Q8_0, 7},
    {"Q4_0", GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_0, GLIM_TYPE_Q4_0, 2},
    {"Q4_K", GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, 14},
    {"Q5_K", GLIM_TYPE_Q5_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q5_K, 16},
    {"Q6_K", GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K, 18},
    {"Q4_K_M", GLIM_TYPE_Q4_K, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K, 15},
    {"Q5_K_M", GLIM_TYPE_Q5_K, GLIM_TYPE_Q5_K, GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K, 17},
};
#define N_FTYPES (int)(sizeof FTYPES / sizeof FTYPES[0])

const struct synth_ftype *synth_ftype_find(const char *name)
{
    for (int i = 0; i < N_FTYPES; i++)
        if (!strcasecmp(name, FTYPES[i].name))
            return &FTYPES[i];
    return NULL;
}

const struct synth_ftype *synth_ftype_for_type(uint32_t type)
{
    for (int i = 0; i < N_FTYPES; i++)
        if (FTYPES[i].base == type && FTYPES[i].output == type && FTYPES[i].more_bits == type)
            return &FTYPES[i];
    return NULL;
}

const char *synth_ftype_names(void)
{
    return "F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K|Q4_K_M|Q5_K_M";
}

static const char *const ARCH_NAMES[SYNTH_ARCH_COUNT] = {
    [SYNTH_ARCH_LLAMA] = "llama",
    [SYNTH_ARCH_MUSE_GLIMMER] = "muse-glimmer",
    [SYNTH_ARCH_DFLASH] = "dflash",
};

const char *synth_arch_name(enum synth_arch a)
{
    return (unsigned)a < SYNTH_ARCH_COUNT ? ARCH_NAMES[a] : "?";
}

int synth_arch_from_name(const char *name)
{
    for (int i = 0; i < SYNTH_ARCH_COUNT; i++)
        if (!strcmp(name, ARCH_NAMES[i]))
            return i;
    return -1;
}

bool synth_use_more_bits(int il, int n_layer)
{
    return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
}

void synth_hparams_default(enum synth_arch arch, struct synth_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = arch;
    hp->n_embd = 256;
    hp->n_layer = 4;
    hp->n_head = 4;
    hp->n_head_kv = 2;
    hp->head_dim = 64;
    hp->n_ff = 512;
    hp->n_vocab = 512;
    hp->n_ctx = 4096;
    hp->eps = 1e-5f;
    if (arch == SYNTH_ARCH_MUSE_GLIMMER) {
        /* the 30B's constants (model.md §1.1); q_norm 0 = 43.784/sqrt(head_dim) */
        hp->n_swa = 128;
        hp->swa_period = 4;
        hp->rope_base = 500000.0f;
        hp->logit_scale = 0.19611613513f;
        hp->softcap = 20.0f;
    } else if (arch == SYNTH_ARCH_DFLASH) {
        /* runtime.md §1.1 defaults; taps for a 4-layer target, n_target_layer 0 =
         * unknown (no range check) until --like says otherwise */
        hp->n_layer = 2;
        hp->rope_base = 500000.0f;
        hp->logit_scale = 1.0f;
        hp->block_size = 16;
        hp->n_taps = synth_dflash_taps(4, 5, hp->target_layers);
        hp->mask_token_id = hp->n_vocab - 1;
    } else {
        hp->rope_base = 10000.0f;
        hp->logit_scale = 1.0f;
    }
    if (arch != SYNTH_ARCH_DFLASH)
        hp->mask_token_id = -1;
    snprintf(hp->name, sizeof hp->name, "%s-synthetic", synth_arch_name(arch));
}

int synth_dflash_taps(int n_target_layer, int n_taps, int *out)
{
    int L = n_target_layer;
    if (L < 2) {
        out[0] = 0;
        return 1;
    }
    int n = GLIM_MIN(GLIM_MIN(n_taps, L - 1), SYNTH_MAX_TAPS);
    n = GLIM_MAX(n, 1);
    for (int k = 0; k < n; k++) {
        int v = (int)lround((k + 0.5) * L / n);
        out[k] = GLIM_MIN(GLIM_MAX(v, 1), L - 1);
    }
    return n;
}

/* runtime.md §1.1: the published drafter of Muse-Glimmer-30B */
static void preset_dflash_30b(struct synth_hparams *hp)
{
    static const int taps[5] = {2, 14, 26, 38, 50};   /* HF target_layer_ids 1,13,25,37,49 + 1 */
    synth_hparams_default(SYNTH_ARCH_DFLASH, hp);
    hp->n_embd = 6656;
    hp->n_layer = 5;
    hp->n_head = 32;
    hp->n_head_kv = 8;
    hp->head_dim = 128;
    hp->n_ff = 19968;
    hp->n_vocab = 202048;
    hp->n_ctx = 131072;
    hp->eps = 1e-5f;
    hp->block_size = 16;
    hp->n_taps = 5;
    memcpy(hp->target_layers, taps, sizeof taps);
    hp->n_target_layer = 52;
    hp->mask_token_id = 201818;
    snprintf(hp->name, sizeof hp->name, "dflash-Muse-Glimmer-30B-synthetic");
}

int synth_preset(const char *name, struct synth_hparams *hp, struct glim_err *err)
{
    if (!strcmp(name, "dflash-muse-glimmer-30b")) {
        preset_dflash_30b(hp);
        return GLIM_OK;
    }
    if (strcmp(name, "muse-glimmer-30b"))
        return glim_fail(err, GLIM_EINVAL,
                         "--preset: expected muse-glimmer-30b or dflash-muse-glimmer-30b, got '%s'", name);
    /* model.md §1.1: dim 6656, 52 layers (39 sliding + 13 global), GQA 32/2 */
    synth_hparams_default(SYNTH_ARCH_MUSE_GLIMMER, hp);
    hp->n_embd = 6656;
    hp->n_layer = 52;
    hp->n_head = 32;
    hp->n_head_kv = 2;
    hp->head_dim = 128;
    hp->n_ff = 19968;
    hp->n_vocab = 202048;
    hp->n_ctx = 131072;
    hp->n_swa = 2048;
    hp->q_norm = (float)(43.7840518911 / sqrt(128.0));
    snprintf(hp->name, sizeof hp->name, "Muse-Glimmer-30B-synthetic");
    return GLIM_OK;
}
