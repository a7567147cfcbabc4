/*
 * arch_common.h — pieces every architecture's forward shares: the scratch
 * layout, uploading ids/positions, splicing embedding rows, hidden-state
 * taps, and the output head. Owner thread of the model's backend.
 */
#ifndef GLIM_ARCH_COMMON_H
#define GLIM_ARCH_COMMON_H

#include "model.h"
#include "../runtime/kv.h"

#define ARCH_OUT_ROWS 16   /* logits are computed this many rows at a time */

/* Views into one backend allocation, sized for a batch of T tokens. */
struct fwd_scratch {
    float   *x;          /* [T][n_embd]   residual stream */
    float   *h;          /* [T][n_embd]   normalized input of a block */
    float   *q, *g, *a;  /* [T][n_head*head_dim] query, output gate, attention output */
    float   *k, *v;      /* [T][n_head_kv*head_dim] */
    float   *o;          /* [T][n_embd]   block output */
    float   *f1, *f2;    /* [T][n_ff]     FFN gate/up */
    float   *logits;     /* [ARCH_OUT_ROWS][n_vocab] */
    float   *embd;       /* [T][n_embd]   uploaded replacement rows (images) */
    int32_t *ids, *pos;  /* [T] */
    float   *rope_cs;    /* [T][n_rot / 2] (cos, sin) for the backend's rope_table */
    float    cs_base;    /* ... made for this base in this pass of the body (cs_made) */
    bool     cs_made;
};

/* Bytes of scratch for T tokens; with base != NULL also fills s. */
size_t arch_scratch_layout(const struct glim_model *m, int T, void *base, struct fwd_scratch *s);
size_t arch_scratch_bytes(const struct glim_model *m, int n_tokens);

/* Upload token ids and positions pos0.. of the batch. */
int arch_upload_inputs(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s,
                       struct glim_err *err);
/* Replace masked rows of s->x by the batch's embedding rows. */
int arch_splice_embd(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s,
                     struct glim_err *err);
/* Whether layer il is tapped (b->tap_layers). */
bool arch_tapped(const struct fwd_batch *b, int il);
/* If layer il is tapped, copy the residual stream entering it into b->taps. */
int arch_tap(struct glim_model *m, const struct fwd_batch *b, int il, struct fwd_scratch *s,
             struct glim_err *err);
/* Final norm, lm head, logit scale / soft-cap for the last n_out rows; download. */
int arch_output(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s,
                struct glim_err *err);

/* The part of a forward from the embedding through the last layer (taps included). */
typedef int (*arch_body_fn)(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                            struct fwd_scratch *s, struct glim_err *err);
/* The forward of an arch with a body: scratch layout, inputs, body, head (graphs). */
int arch_forward(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b, void *scratch,
                 struct glim_err *err);

/* Run body and the output head, replaying a captured graph for decode steps when the
 * backend supports it (inputs must already be uploaded). */
int arch_finish(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b, struct fwd_scratch *s,
                arch_body_fn body, struct glim_err *err);

/* Queue one single-token decode step at position pos that ends with the device's greedy pick
 * (backend argmax) written over its own input id, with its position advanced: tok != NULL
 * uploads tok and pos first; tok == NULL steps on from what the previous greedy step left
 * (pos must then be that step's pos + 1; the CPU backends read it). Nothing waits: the
 * picked id is at *dev_tok (device) once the step has run. GLIM_EUNSUPPORTED without an
 * argmax op or a body. Graphs as arch_finish. */
int arch_greedy_step(struct glim_model *m, struct kv_cache *kv, void *scratch, const int32_t *tok, int32_t pos,
                     const int32_t **dev_tok, struct glim_err *err);

/* How a layer's attention positions its queries and keys. */
struct attend_opts {
    bool  rope;        /* rotate q and k (NoPE layers: false) */
    float rope_base;
    bool  neox;        /* pairing (i, i + n_rot/2) instead of (2i, 2i+1) */
    int   window;      /* 0 = global */
    int   block;       /* DFlash bidirectional block rows, 0 = causal */
    const struct be_weight *gate;   /* optional 4th projection of h (output gate) → s->g */
    /* optional: the residual step that makes h (its r->h), not yet run: arch_attend runs it
     * first, or hands it to the backend with the projections (add_rmsnorm_attn) */
    const struct be_res_norm *pre;
};
/* The sandwich-norm residual step of T rows (struct be_res_norm; r->h NULL: no second norm):
 * add_rmsnorm when the backend has it, else rmsnorm, add, rmsnorm. */
void arch_res_norm(struct backend *be, const struct be_res_norm *r, int T);
/* From s->h: q, k, v projections, per-head q/k RMSNorm when the layer has those
 * weights, RoPE, store K/V in layer il's cache, attention into s->a. */
void arch_attend(struct glim_model *m, struct kv_cache *kv, int il, int T, int32_t pos0,
                 struct fwd_scratch *s, const struct attend_opts *o);
/* q/k norm, RoPE and K/V store (struct be_attn_prep_args): the backend's fused attn_prep
 * when it has one, else the ops one by one. */
void arch_attn_prep(struct backend *be, const struct be_attn_prep_args *p);
/* s->o = Wdown · (silu(Wgate h) ⊙ Wup h) from s->h (the caller normed it with ffn_norm). */
void arch_ffn(struct glim_model *m, int il, int T, struct fwd_scratch *s);

/* Common hyperparameters: embedding_length, block_count, head counts, head_dim,
 * feed_forward_length, context_length, rms eps, vocab from token_embd. */
int arch_read_common(struct glim_model *m, struct glim_err *err);
/* Bind the per-layer tensors every arch has (attn_norm, q, k, v, output, ffn). */
int arch_bind_layer_common(struct glim_model *m, int il, struct glim_err *err);

#endif
