/*
 * model.h — a loaded model: hyperparameters (from GGUF metadata), weights on
 * a backend, and the architecture's forward pass. Read-only and shared
 * after load; the forward mutates only the KV cache and scratch it is given.
 * Called from the thread that owns the backend.
 */
#ifndef GLIM_MODEL_H
#define GLIM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "glim.h"
#include "../backend/backend.h"
#include "../gguf/gguf.h"

#define GLIM_MAX_LAYERS 512
#define GLIM_MAX_TAPS 16

struct model_hparams {
    char    arch[32];          /* "muse-glimmer", "llama", "dflash" */
    int     n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_rot;
    int64_t n_ctx_train;
    int     n_swa;             /* window of sliding layers; 0 = none */
    bool    is_swa[GLIM_MAX_LAYERS];
    float   eps;               /* layer_norm_rms_epsilon */
    float   post_eps;          /* sandwich norms (muse-glimmer: 1e-8) */
    float   rope_base, rope_base_swa;
    bool    rope_neox;         /* pairing (i, i+n_rot/2) instead of (2i, 2i+1) */
    float   logit_scale;       /* 1 = none */
    float   softcap;           /* 0 = none */
    float   attn_scale;        /* score scale, usually 1/sqrt(head_dim) */
    bool    has_embd_norm;     /* weightless RMSNorm after the embedding lookup */
    /* dflash */
    int     block_size;
    int     n_target_layers;
    int     target_layers[GLIM_MAX_TAPS];
    int32_t mask_token_id;
};

struct model_layer {                 /* views of GGUF tensors on the backend */
    struct be_weight attn_norm;      /* [n_embd] */
    struct be_weight wq;             /* [n_embd, n_head*head_dim]    */
    struct be_weight wk;             /* [n_embd, n_head_kv*head_dim] */
    struct be_weight wv;             /* [n_embd, n_head_kv*head_dim] */
    struct be_weight q_norm;         /* [head_dim] (optional) */
    struct be_weight k_norm;         /* [head_dim] (optional) */
    struct be_weight attn_gate;      /* [n_embd, n_head*head_dim] (muse-glimmer) */
    struct be_weight wo;             /* [n_head*head_dim, n_embd] */
    struct be_weight post_attn_norm; /* [n_embd] (muse-glimmer) */
    struct be_weight ffn_norm;       /* [n_embd] */
    struct be_weight ffn_gate;       /* [n_embd, n_ff] */
    struct be_weight ffn_up;         /* [n_embd, n_ff] */
    struct be_weight ffn_down;       /* [n_ff, n_embd] */
    struct be_weight post_ffw_norm;  /* [n_embd] (muse-glimmer) */
};


struct kv_cache;
struct fwd_scratch;

/* What one forward call computes. Positions pos0 .. pos0+n_tokens-1. */
struct fwd_batch {
    int            n_tokens;
    const int32_t *tokens;     /* host [n_tokens] */
    /* optional embedding rows that replace token rows (images): host
     * [n_tokens][n_embd]; rows where embd_mask[t] != 0 are taken from embd
     * (after the embedding norm, as the vision tower's rows already are) */
    const float   *embd;
    const uint8_t *embd_mask;
    int32_t        pos0;
    int            n_out;      /* logits for the last n_out rows (0 = none) */
    float         *logits;     /* host OUT [n_out][n_vocab] */
    /* optional host OUT [n_out]: the argmax of each output row (sampler order). Where the
     * backend picks itself (backend argmax) the logits are then not downloaded (logits may
     * be NULL); else they are, and the picks are made from them. */
    int32_t       *picks;
    /* residual stream entering chosen layers (DFlash): host OUT
     * [n_tokens][n_taps * n_embd]; layer index n_layer = after the last layer */
    int            n_taps;
    const int     *tap_layers;
    float         *taps;
    bool           taps_on_backend;   /* taps is backend memory: copied there, never downloaded */
};

struct arch_ops {
    const char *name;
    int  (*load_hparams)(struct glim_model *m, struct glim_err *err);
    int  (*load_tensors)(struct glim_model *m, struct glim_err *err);
    /* scratch bytes needed for a batch of n_tokens */
    size_t (*scratch_bytes)(const struct glim_model *m, int n_tokens);
    int  (*forward)(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                    void *scratch, struct glim_err *err);
    /* embedding through the last layer, for arch_forward (arch_common.h); may be NULL */
    int  (*body)(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                 struct fwd_scratch *s, struct glim_err *err);
};

struct glim_model {
    struct gguf_file        *gguf;     /* owned */
    const struct arch_ops   *arch;     /* static table */
    struct model_hparams     hp;
    struct backend          *be;       /* owned */
    struct be_weight         tok_embd; /* [n_embd, n_vocab] */
    struct be_weight         output_norm;
    struct be_weight         output;   /* [n_embd, n_vocab]; tied = copy of tok_embd view */
    struct model_layer      *layers;   /* owned [n_layer] */
    /* dflash-only: the draft runs on its target's backend and borrows its
     * token_embd/output unless the draft file ships its own */
    struct be_weight         fc, enc_norm;
    struct glim_model       *target;   /* borrowed; NULL for a target model */
    bool                     owns_embd, owns_output;
    size_t                   weight_bytes;
    bool                     verbose;
    bool                     no_graph;   /* --no-graph: never capture decode steps */
};

extern const struct arch_ops arch_llama;
extern const struct arch_ops arch_muse_glimmer;
extern const struct arch_ops arch_dflash;

/* Load a DFlash draft GGUF for `target` (same backend, shared embeddings/lm head). */
int glim_draft_load(struct glim_model *target, const char *path, struct glim_model **out,
                    struct glim_err *err);

/* DFlash draft entry points (arch_dflash.c; runtime.md §1.4). Scratch from
 * dflash_scratch_bytes(d, n) where n >= rows of any call. */
struct kv_cache;
size_t dflash_scratch_bytes(const struct glim_model *d, int n_rows);
/* Write context K/V for tapped target rows feat[n][n_taps*n_embd] at positions pos0.. (feat:
 * host memory, or with feat_on_backend the backend's, as a target forward left it there) */
int dflash_inject(struct glim_model *d, struct kv_cache *kv, const float *feat, bool feat_on_backend, int n,
                  int32_t pos0, void *scratch, struct glim_err *err);
/* Draft one block at positions pos0.. (pos0 = rows already injected); logits (host) [T][n_vocab]
 * raw (no soft-cap); picks (NULL = none): each row's argmax, as struct fwd_batch.picks (the
 * logits then stay on a backend that picks itself). Block K/V are transient. */
int dflash_draft(struct glim_model *d, struct kv_cache *kv, const int32_t *block, int T, int32_t pos0,
                 float *logits, int32_t *picks, void *scratch, struct glim_err *err);

/* helpers for arch files (model.c) */
const struct gguf_tensor *model_tensor(const struct glim_model *m, const char *name);
/* bind GGUF tensor `name` to w on the backend; check its shape == [k, n] (n = 0: 1-D [k]).
 * required=false: absent is fine (w->host stays NULL). */
int model_bind(struct glim_model *m, struct be_weight *w, const char *name, int64_t k, int64_t n,
               bool required, struct glim_err *err);
/* Bind a list of per-layer tensors "blk.<il>.<suffix>.weight" to fields of layer il. */
struct blk_tensor {
    size_t      field;    /* offsetof(struct model_layer, ...) */
    const char *suffix;   /* "attn_q" ... */
    int64_t     k, n;     /* expected shape (n = 0: a [k] vector) */
};
int model_bind_blk(struct glim_model *m, int il, const struct blk_tensor *t, int n_t, bool required,
                   struct glim_err *err);
/* "<arch>.<suffix>" lookups */
int model_get_u32(const struct glim_model *m, const char *suffix, uint32_t *out, bool required,
                  struct glim_err *err);
int model_get_f32(const struct glim_model *m, const char *suffix, float *out, bool required,
                  struct glim_err *err);

#endif
