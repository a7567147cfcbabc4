/*
 * backend.h — the only door from model code to hardware.
 *
 * A backend owns device memory and runs ops on f32 activations. Model code
 * (src/model/arch_*.c) never dereferences activation, KV or weight memory:
 * it allocates buffers here and calls ops, so the same forward pass runs on
 * the CPU, on CUDA and (later) on Metal. Ops are enqueued in order; results
 * are visible to the host after `download` (which synchronises).
 *
 * Conventions for every op:
 *   - activations are f32, row-major, rows contiguous: x[n_rows][row_len];
 *   - pointers are device pointers from `alloc` (host pointers on the CPU);
 *   - positions are a device array pos[n_rows] (so a captured CUDA graph can
 *     be replayed with new positions after one small upload);
 *   - a weight W of GGUF shape [K, N] is `struct be_weight` with k = ne0,
 *     n = ne1: matmul computes y[r][j] = sum_i x[r][i] * W[j][i].
 *
 * Threading: a backend is driven by one thread at a time (the scheduler).
 */
#ifndef GLIM_BACKEND_H
#define GLIM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

struct backend;

/* A model weight as the backend sees it. */
struct be_weight {
    const char *name;     /* borrowed: tensor name (for messages) */
    uint32_t    type;     /* enum glim_type of host data */
    int64_t     k, n;     /* k = ne0 (row length), n = ne1 * ne2 * ne3 (rows) */
    size_t      nbytes;   /* bytes of host data */
    const void *host;     /* borrowed: read-only mapping of the GGUF data */
    void       *dev;      /* backend's copy or view (CPU: == host unless repacked) */
    uint32_t    dev_type; /* layout of dev (== type unless repacked); backend-private meaning */
    void       *aux;      /* backend-private extra data (owned by the backend) */
};

/* Attention over a KV cache for n_tokens consecutive queries.
 * Cache layout: k_cache/v_cache [n_slots][n_head_kv * head_dim] in kv_type
 * (F32/F16/BF16); position u lives in slot u % n_slots. The new rows were
 * stored (kv_store) before this call. Query at position p attends positions
 * u with max(0, p - window + 1) <= u <= p (window 0 = unlimited, i.e. 0..p).
 * Query head h uses KV head h / (n_head / n_head_kv).
 * Caller guarantees the slots of those positions still hold them. */
struct be_attn_args {
    float         *out;        /* [n_tokens][n_head * head_dim] */
    const float   *q;          /* [n_tokens][n_head * head_dim] */
    const void    *k_cache, *v_cache;
    uint32_t       kv_type;
    int64_t        n_slots;
    int            n_tokens;
    const int32_t *pos;        /* device [n_tokens], consecutive */
    int32_t        pos_host0;  /* host copy of pos[0] (CPU uses it; CUDA graphs must not) */
    int            n_head, n_head_kv, head_dim;
    int            window;     /* 0 = global */
    float          scale;      /* score multiplier, e.g. 1/sqrt(head_dim) */
    /* Block mode (DFlash drafts, runtime.md §1.4–1.5): if > 0, the last `block` rows are
     * a bidirectional block starting at position b0 = pos[n_tokens - block]: each of them
     * sees every position up to the block's end, and with a window, the context positions
     * b0 - window .. b0 - 1 (the same for every block query, not a per-query window).
     * 0 = causal (the rule above). */
    int            block;
};

enum be_glu { BE_GLU_SIGMOID, BE_GLU_SILU };

/* add_rmsnorm's operands, for the fused ops that begin with it (rows of n; x, h, o must not
 * overlap): o = rmsnorm(o) * w_o (eps_o);  x += o;  h = rmsnorm(x) * w_h (eps_h). w NULL = no
 * weight. (h NULL, no second norm, is the model's own use: the last layer's step, which it runs
 * op by op; a fused op is always given h.) */
struct be_res_norm {
    float                  *x, *h, *o;
    const struct be_weight *w_o, *w_h;
    float                   eps_o, eps_h;
    int                     n;
};

/* The steps between the q/k/v projections and attention, in this order (each as the
 * op of the same name would do it): per-head RMSNorm of q and of k (weights [head_dim],
 * eps), RoPE of q and k (NORM or NEOX pairing, first n_rot dims of each head, angle
 * pos[t] * rope_base^(-2i/n_rot)), then kv_store of k and v. q and k are left normed and
 * rotated in place; the cache rows are the final k and v converted to kv_type. */
struct be_attn_prep_args {
    float                  *q;        /* [n_tokens][n_head * head_dim]; NULL = keys only */
    float                  *k;        /* [n_tokens][n_head_kv * head_dim] */
    const float            *v;        /* [n_tokens][n_head_kv * head_dim] */
    const struct be_weight *q_norm;   /* F32 [head_dim]; NULL = q not normed */
    const struct be_weight *k_norm;   /* F32 [head_dim]; NULL = k not normed */
    float                   eps;
    bool                    rope;     /* rotate q and k (false: NoPE) */
    bool                    neox;
    int                     n_rot;
    float                   rope_base;
    void                   *k_cache, *v_cache;   /* layout as in struct be_attn_args */
    uint32_t                kv_type;
    int64_t                 n_slots;
    int                     n_tokens;
    const int32_t          *pos;      /* device [n_tokens] */
    int                     n_head, n_head_kv, head_dim;
    /* device [n_tokens][n_rot / 2] (cos, sin) as rope_table wrote them for pos, n_rot and
     * rope_base; NULL: the backend computes them */
    const float            *rope_cs;
    int32_t                 pos_host0;   /* host copy of pos[0] (a backend may pick kernels by it, as
                                          * graph_class says; never its results) */
};

#define BE_GRAPH_CLASSES 2

#define BE_FETCH_SLOTS 4
#define BE_FETCH_MAX   256

struct backend_i {
    const char *name;                                   /* "cpu-ref", "cpu", "cuda" */
    void (*destroy)(struct backend *be);

    /* ---- memory ---- */
    void *(*alloc)(struct backend *be, size_t nbytes);  /* zeroed; NULL = out of memory */
    void  (*release)(struct backend *be, void *p);      /* NULL ok */
    int   (*upload)(struct backend *be, void *dst, const void *src, size_t nbytes, struct glim_err *err);
    int   (*download)(struct backend *be, void *dst, const void *src, size_t nbytes, struct glim_err *err);
    int   (*sync)(struct backend *be, struct glim_err *err);      /* reports async failures */
    /* free device memory in bytes (for the memory plan); SIZE_MAX when unknown */
    size_t (*mem_free)(struct backend *be);

    /* ---- weights ---- */
    int  (*weight_init)(struct backend *be, struct be_weight *w, struct glim_err *err);
    void (*weight_clear)(struct backend *be, struct be_weight *w);

    /* ---- ops ---- */
    /* y[i][:] = dequant(row ids[i] of w)                          (embedding lookup) */
    void (*get_rows)(struct backend *be, float *y, const struct be_weight *w, const int32_t *ids, int n);
    /* y[n_rows][w->n] = x[n_rows][w->k] . W^T */
    void (*matmul)(struct backend *be, float *y, const struct be_weight *w, const float *x, int n_rows);
    /* optional: n (<= 4) weights over the same input in one call, ys[i] = x . ws[i]^T
     * (q/k/v/gate, FFN gate/up). NULL: the model calls matmul n times. */
    void (*matmul_n)(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                     const float *x, int n_rows);
    /* optional: matmul_n of two weights of one shape (ys[0] = x . ws[0]^T, the gate; ys[1] = x .
     * ws[1]^T, the up projection), telling the backend that matmul_glu(.., x = ys[1], g = ys[0],
     * act, n_rows) comes next, so it may prepare that call's input while computing them (CUDA:
     * the FFN's SwiGLU quantized by the gate/up GEMV). NULL: the model calls matmul_n. */
    void (*matmul_pair_glu)(struct backend *be, float *const *ys, const struct be_weight *const *ws, const float *x,
                            int n_rows, int act);
    /* optional: y[n_rows][w->n] = (x * act(g)) . W^T with act(g) = sigmoid(g) (BE_GLU_SIGMOID,
     * the attention output gate) or silu(g) (BE_GLU_SILU: SwiGLU, g = gate, x = up), element-
     * wise over [n_rows][w->k]. x may be left holding x * act(g). NULL: the model calls
     * mul_sigmoid / swiglu, then matmul. (CUDA applies the gate while quantizing x.) */
    void (*matmul_glu)(struct backend *be, float *y, const struct be_weight *w, float *x, const float *g, int act,
                       int n_rows);
    /* y = x / sqrt(mean(x^2) + eps) * w   per row of length n; w NULL = no weight (F32 [n]) */
    void (*rmsnorm)(struct backend *be, float *y, const float *x, const struct be_weight *w,
                    int64_t n_rows, int n, float eps);
    /* rotate x[n_rows][n_head*head_dim] in place; pair (2i,2i+1) (neox: (i, i+n_rot/2));
     * angle pos[row] * base^(-2i/n_rot) for the first n_rot dims of each head */
    void (*rope)(struct backend *be, float *x, int n_rows, int n_head, int head_dim, int n_rot,
                 const int32_t *pos, float base, bool neox);
    void (*add)(struct backend *be, float *y, const float *x, int64_t n);              /* y += x */
    void (*mul_sigmoid)(struct backend *be, float *y, const float *g, int64_t n);      /* y *= sigmoid(g) */
    void (*swiglu)(struct backend *be, float *y, const float *gate, const float *up, int64_t n); /* y = silu(gate)*up */
    /* y = cap > 0 ? cap * tanh(y * scale / cap) : y * scale */
    void (*scale_softcap)(struct backend *be, float *y, int64_t n, float scale, float cap);
    /* dst[r][0..n) = src[r][0..n), with row strides in floats */
    void (*copy_rows)(struct backend *be, float *dst, int64_t dst_stride, const float *src,
                      int64_t src_stride, int n_rows, int n);
    /* store k,v rows [n_tokens][kv_dim] at slots pos[t] % n_slots, converting to kv_type */
    void (*kv_store)(struct backend *be, void *k_cache, void *v_cache, uint32_t kv_type, int64_t n_slots,
                     const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim);
    void (*attention)(struct backend *be, const struct be_attn_args *a);

    /* ---- optional fused ops: NULL = the model runs the op sequence each replaces ----
     * A backend offers one only if its results are bit for bit those of that sequence
     * on the same backend, so switching a fusion off never changes an output. */
    /* The sandwich-norm residual step, per row of length n (x, h, o must not overlap):
     *   o = rmsnorm(o) * w_o (eps_o);  x += o;  h = rmsnorm(x) * w_h (eps_h)
     * = rmsnorm(o -> o), add(x, o), rmsnorm(x -> h), o included (it is left normed).
     * w NULL = no weight. */
    void (*add_rmsnorm)(struct backend *be, float *x, float *h, float *o, const struct be_weight *w_o,
                        float eps_o, const struct be_weight *w_h, float eps_h, int64_t n_rows, int n);
    /* = rmsnorm(q), rmsnorm(k), rope(q), rope(k), kv_store as struct be_attn_prep_args says */
    void (*attn_prep)(struct backend *be, const struct be_attn_prep_args *a);
    /* cs[t][i] = (cos, sin) of pos[t] * base^(-2i / n_rot), i < n_rot / 2, as rope rounds them: the
     * angles of a step computed once for every layer's attn_prep (be_attn_prep_args.rope_cs) */
    void (*rope_table)(struct backend *be, float *cs, const int32_t *pos, int n_tokens, int n_rot, float base);
    /* = matmul_pair_glu(fs, ws[0..1] (gate, up), x, act) then matmul_glu(y, ws[2] (down), fs[1], fs[0], act) */
    void (*matmul_ffn)(struct backend *be, float *y, float *const *fs, const struct be_weight *const *ws,
                       const float *x, int n_rows, int act);
    /* = add_rmsnorm(r, n_rows) then matmul_ffn(y, fs, ws, r->h, n_rows, act): the sandwich norm's
     * residual, the FFN's input norm and the FFN in one call. Like add_rmsnorm_attn's, r->o and r->h
     * are scratch afterwards (a backend may leave them unwritten); r->x is the residual as always. */
    void (*add_rmsnorm_ffn)(struct backend *be, const struct be_res_norm *r, float *y, float *const *fs,
                            const struct be_weight *const *ws, int n_rows, int act);
    /* = add_rmsnorm(r, n_rows) then matmul_attn_prep(n, ys, ws, r->h, n_rows, p): the residual of a
     * layer's FFN, the next layer's attention norm, its q/k/v(/gate) and attn_prep in one call;
     * r->o and r->h are scratch afterwards (the model reads neither again) */
    void (*add_rmsnorm_attn)(struct backend *be, const struct be_res_norm *r, int n, float *const *ys,
                             const struct be_weight *const *ws, int n_rows, const struct be_attn_prep_args *p);
    /* = attn_prep(p) then attention(a), where a reads p's q and caches; the one exception to the
     * bit-for-bit rule: p's q and k are scratch afterwards (a backend may leave them unprepared) */
    void (*attention_prep)(struct backend *be, const struct be_attn_prep_args *p, const struct be_attn_args *a);
    /* = matmul_n(n, ys, ws, x, n_rows) then attn_prep(a), where ys[0..2] are a's q, k, v; the
     * parts after them (the output gate) are read by no attn_prep or attention, so a backend may
     * finish them while those run (before any other op). When the next op is the attention that
     * reads a's q and caches, a backend may run attn_prep with it: q and k are then scratch after
     * that attention, as with attention_prep */
    void (*matmul_attn_prep)(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                             const float *x, int n_rows, const struct be_attn_prep_args *a);

    /* ---- optional: the greedy pick on the device ----
     * out[r] = the index of the largest x[r][0..n), r < n_rows (out: device memory), in the
     * sampler's greedy order: NaN counts as -inf, the lowest index wins among equals. pos_inc
     * (n_rows == 1 only; NULL = none): pos_inc[0] += 1 after. With out = a step's ids and
     * pos_inc = its positions, a decode step makes the next one's inputs from its own logits,
     * so the host can queue that step before it has seen this one's token. */
    void (*argmax)(struct backend *be, int32_t *out, const float *x, int n_rows, int64_t n, int32_t *pos_inc);
    /* optional: a small download (nbytes <= BE_FETCH_MAX) in stream order that the host
     * collects later: fetch_start queues src into staging slot (< BE_FETCH_SLOTS) and returns;
     * fetch_wait waits for that slot's copy and copies it to dst. NULL: use download. */
    int (*fetch_start)(struct backend *be, int slot, const void *src, size_t nbytes, struct glim_err *err);
    int (*fetch_wait)(struct backend *be, int slot, void *dst, size_t nbytes, struct glim_err *err);
    /* optional: host memory that download fills without a staging copy (page-locked on CUDA, where
     * a pageable destination is copied through the driver's bounce buffer); host_free releases it.
     * NULL: plain memory serves (glim_model_host_alloc). NULL return: out of memory. */
    void *(*host_alloc)(struct backend *be, size_t nbytes);
    void (*host_free)(struct backend *be, void *p);

    /* ---- optional: graph capture of a whole decode step (CUDA graphs) ----
     * NULL on backends without it. Between graph_begin and graph_end only ops are
     * called (no upload/download/alloc); every per-step value they read (ids, pos,
     * KV contents) lives in device memory, so the graph is replayed after the host
     * uploads the new ids/positions. graph_end returns an opaque handle. */
    int  (*graph_begin)(struct backend *be, struct glim_err *err);
    int  (*graph_end)(struct backend *be, void **graph, struct glim_err *err);
    int  (*graph_launch)(struct backend *be, void *graph, struct glim_err *err);
    void (*graph_free)(struct backend *be, void *graph);
    /* optional: the class (0 .. BE_GRAPH_CLASSES - 1) of a one-token decode step at position pos:
     * steps of different classes may run different kernels (e.g. a short-context attention), so
     * a graph captured for one class is replayed only for steps of it. NULL: always 0 */
    int  (*graph_class)(struct backend *be, int32_t pos);
};

struct backend {
    const struct backend_i *i;
    void *ctx;            /* owned: backend state */
    char  desc[128];      /* human description: "cpu (2 threads, AVX2)" */
};

/* CPU backend with the scalar reference kernels (exact dequant, f32). */
int  backend_cpu_ref_new(int n_threads, struct backend **out, struct glim_err *err);
/* CPU backend with the fastest kernels this machine has (falls back to ref). */
int  backend_cpu_new(int n_threads, struct backend **out, struct glim_err *err);
/* CUDA backend (only when built with GLIM_CUDA); GLIM_EUNSUPPORTED otherwise. */
int  backend_cuda_new(int device, struct backend **out, struct glim_err *err);
bool backend_cuda_available(void);
/* exact = true: f32 activations in every matmul (the --kernels ref path on CUDA);
 * false (default): int8 activations for quantized weights. */
int  backend_cuda_set_exact(struct backend *be, bool exact);
/* GPU name, memory clock, bus width, the HBM peak they give and size for reports. */
int  backend_cuda_describe(char *buf, size_t n);
/* Device-to-device copy bandwidth, bytes read + written per second / 1e9. */
int  backend_cuda_membw(double *copy_gbs, struct glim_err *err);

void backend_free(struct backend *be);   /* NULL ok */

#endif
