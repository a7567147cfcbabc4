/*
 * synth.h — synthetic GGUF models with seeded random weights (`glim mkmodel`).
 *
 * A model is described by hyperparameters and a quant mix; synth_plan_build
 * turns that into the exact tensor list the architecture's llama.cpp loader
 * expects (names, shapes, per-tensor types), and synth_write streams the
 * tensors through the GGUF writer, generating each one at write time in
 * parallel row chunks, so a 17 GB file needs about one tensor of RAM.
 *
 * Weight statistics imitate a trained model so logits are not degenerate:
 * norms 1 + 0.1·N, matrices N(0,1)/sqrt(fan_in), a small token_embd, and an
 * output matrix scaled so the (soft-capped) logits spread over a few units.
 * The data depend only on (seed, tensor name, row): not on thread count.
 *
 * Adding an architecture = one entry in the table in synth_plan.c (tensor
 * list) and one in synth_keys.c (metadata). dflash drafts (gguf-contract.md
 * §3, runtime.md §1.1-1.2) have no token_embd/output: they borrow the target's.
 * Spec: ../shared/spec/gguf-contract.md §1-3, model.md §3.3. Main thread.
 */
#ifndef GLIM_SYNTH_H
#define GLIM_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

#define SYNTH_MAX_TAPS 16   /* = GLIM_MAX_TAPS, the loader's bound on dflash.target_layers */

enum synth_arch {
    SYNTH_ARCH_LLAMA = 0,
    SYNTH_ARCH_MUSE_GLIMMER,
    SYNTH_ARCH_DFLASH,
    SYNTH_ARCH_COUNT
};

struct synth_hparams {
    enum synth_arch arch;
    int     n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int64_t n_ctx;             /* context_length written to the file */
    int     n_swa;             /* window of the sliding layers; dflash: 0 = no SWA keys */
    int     swa_period;        /* layer i is global iff i % period == period-1
                                * (dflash: 0 = n_layer, i.e. only the last layer is global) */
    float   eps;               /* layer_norm_rms_epsilon */
    float   rope_base;         /* rope.freq_base (and freq_base_swa for muse-glimmer) */
    float   logit_scale;       /* muse-glimmer.logit_scale */
    float   softcap;           /* muse-glimmer.final_logit_softcapping; 0 = off */
    float   q_norm;            /* value of every attn_q_norm element (absorbed query scale) */
    char    name[64];          /* general.name */
    /* dflash */
    int     block_size;        /* dflash.block_size */
    int     n_taps;            /* len(dflash.target_layers) */
    int     target_layers[SYNTH_MAX_TAPS];   /* as stored: HF target_layer_ids + 1 (the tapped layer's INPUT) */
    int     n_target_layer;    /* the target's block_count, to range-check target_layers; 0 = unknown */
    int32_t mask_token_id;     /* tokenizer.ggml.mask_token_id; < 0 = not written */
};

/* A quant mix: one type for most matrices, llama.cpp's rules for the rest. */
struct synth_ftype {
    const char *name;        /* "Q4_K_M", "Q8_0", ... */
    uint32_t    base;        /* enum glim_type of 2-D weights */
    uint32_t    token_embd;  /* type of token_embd.weight */
    uint32_t    output;      /* type of output.weight */
    uint32_t    more_bits;   /* attn_v/ffn_down on the "use_more_bits" layers */
    uint32_t    file_type;   /* general.file_type (llama_ftype) */
};

/* NULL when unknown; case-insensitive; `names` lists them for messages */
const struct synth_ftype *synth_ftype_find(const char *name);
const char *synth_ftype_names(void);
const char *synth_arch_name(enum synth_arch a);
int synth_arch_from_name(const char *name);   /* -1 when unknown */

/* Fill hp with the real shapes of a preset ("muse-glimmer-30b", "dflash-muse-glimmer-30b");
 * GLIM_EINVAL if unknown. */
int synth_preset(const char *name, struct synth_hparams *hp, struct glim_err *err);
/* Defaults for an arch: a tiny model, muse-glimmer constants where they apply. */
void synth_hparams_default(enum synth_arch arch, struct synth_hparams *hp);
/* The default dflash taps for a target of n_target_layer layers: n = min(n_taps, L-1)
 * stored ids round((k + 0.5)·L/n), k = 0..n-1, clamped to 1..L-1 (distinct when n <= L-1;
 * L = 1 gives [0], the embedding). Returns the count written to out[]. */
int synth_dflash_taps(int n_target_layer, int n_taps, int *out);

struct gguf_file;

/* A random drafter shaped for `target` (runtime.md §1.1 carried over to any size): dflash
 * defaults, dim/heads/head_dim/ffn/context/vocab from the target, kv-heads = the largest
 * divisor of heads <= heads/4, 5 layers, synth_dflash_taps(target layers, 5), mask = the
 * target's tokenizer.ggml.mask_token_id else its last id. matrix_type: OUT the type of the
 * target's blk.0.ffn_up.weight (GLIM_TYPE_COUNT if absent). GLIM_EINVAL: not a target. */
int synth_dflash_like(const struct gguf_file *target, struct synth_hparams *hp, uint32_t *matrix_type,
                      struct glim_err *err);
/* A plain ftype (one type everywhere) whose base is `type`; NULL if none. */
const struct synth_ftype *synth_ftype_for_type(uint32_t type);

struct synth_tensor {
    char     name[64];
    uint32_t type;             /* enum glim_type */
    int      n_dims;
    int64_t  ne[2];            /* GGUF order: ne[0] = row length */
    float    mean, std;        /* element = mean + std * N(0,1); std 0 = constant */
    size_t   nbytes;
};

struct synth_plan {
    struct synth_tensor *t;    /* owned [n] */
    int     n, cap;
    size_t  total_bytes;       /* sum of tensor data bytes (no padding, no metadata) */
    int64_t n_params;
};

/* Check hp, then list every tensor with its type and size. GLIM_EINVAL names
 * the first bad flag value or the tensor whose row does not fit its type's block. */
int  synth_plan_build(const struct synth_hparams *hp, const struct synth_ftype *ft,
                      struct synth_plan *out, struct glim_err *err);
void synth_plan_clear(struct synth_plan *p);   /* safe on a zeroed plan */

/* True for the llama.cpp Q4_K_M "use_more_bits" layers: i < n/8, i >= 7n/8, (i - n/8) % 3 == 2 */
bool synth_use_more_bits(int il, int n_layer);

struct gguf_writer;

/* Write the architecture's metadata keys; vocab = an open GGUF whose
 * tokenizer.* keys are copied (its token count must equal n_vocab), or NULL
 * for tokenizer.ggml.model = "no_vocab". dflash: vocab is the target (or a
 * vocab file); its tokenizer.* keys are copied as they are (no_vocab targets
 * included) except mask_token_id, which is hp->mask_token_id. */
int synth_keys_add(struct gguf_writer *w, const struct synth_hparams *hp, const struct synth_ftype *ft,
                   const struct gguf_file *vocab, struct glim_err *err);

struct synth_write_opts {
    uint64_t seed;
    int      n_threads;        /* generator threads; <= 0 = 1 */
    int64_t  unique_rows;      /* > 0: generate only this many rows per tensor, repeat them */
    const struct gguf_file *vocab;   /* borrowed; NULL = no_vocab */
    void   (*progress)(void *ud, int64_t done, int64_t total);   /* may be NULL */
    void    *progress_ud;
};

/* Write the whole file (atomically, via the GGUF writer). */
int synth_write(const char *path, const struct synth_hparams *hp, const struct synth_ftype *ft,
                const struct synth_plan *plan, const struct synth_write_opts *o, struct glim_err *err);

/* Generate tensor t's bytes into dst (t->nbytes) with n_threads threads.
 * Deterministic in (seed, t->name, row). unique_rows > 0: row r is a copy of row
 * r % unique_rows (benchmark files: the same bytes to stream, written far faster). */
int synth_tensor_fill(const struct synth_tensor *t, uint64_t seed, int n_threads, int64_t unique_rows,
                      void *dst, struct glim_err *err);

#endif
