/*
 * kv.h — KV caches of one sequence: a flat cache (n_ctx slots) for global
 * layers and a ring for sliding-window layers. Position u lives in slot
 * u % n_slots. A ring has n_swa + n_chunk - 1 + n_extra slots so that a
 * chunk of up to n_chunk tokens, stored before attention runs, never
 * overwrites a key still inside the window of one of its own queries, and
 * n_extra (speculative rollback) rows can be dropped again without losing a
 * key a later query needs. Memory lives on the model's backend.
 * Owner thread only.
 */
#ifndef GLIM_KV_H
#define GLIM_KV_H

#include <stdint.h>

#include "../model/model.h"

struct kv_layer {
    void   *k, *v;      /* backend memory [n_slots][n_head_kv*head_dim] of type */
    int64_t n_slots;
    bool    is_ring;
};

struct kv_cache {
    struct backend  *be;        /* borrowed: the model's */
    uint32_t         type;      /* enum glim_type: F32, F16 or BF16 */
    int              n_layer;
    int64_t          n_ctx;     /* positions 0 .. n_ctx-1 are valid */
    int              n_chunk;   /* largest batch a forward may store at once */
    int              n_swa;     /* window of the ring layers */
    int64_t          pos;       /* next position to write (= tokens held) */
    int64_t          pos_hi;    /* one past the highest position ever stored */
    struct kv_layer *layers;    /* owned [n_layer] */
    /* a captured single-token decode step over these buffers (backend graph), one per class of
     * step (backend_i.graph_class) */
    void            *graph[BE_GRAPH_CLASSES];   /* owned by the backend; NULL until captured */
    bool             graph_ok;  /* false after a failed capture: stay eager */
    int64_t          n_decode;  /* single-token steps so far (capture on the second) */
    /* the same step followed by the device's greedy pick of the next token (arch_greedy_step) */
    void            *graph_greedy[BE_GRAPH_CLASSES];
    int64_t          n_greedy;
};

/* bytes the cache would take (memory plan) */
struct kv_plan {
    int64_t ring_slots, flat_slots;
    int     n_ring_layers, n_flat_layers;
    size_t  bytes_ring, bytes_flat, bytes_total;
};
void kv_plan_compute(const struct model_hparams *hp, int64_t n_ctx, int n_chunk, int n_extra,
                     uint32_t type, struct kv_plan *out);

int  kv_cache_new(struct glim_model *m, int64_t n_ctx, int n_chunk, int n_extra, uint32_t type,
                  struct kv_cache **out, struct glim_err *err);
void kv_cache_free(struct kv_cache *kv);
/* Forget positions >= pos (they will be overwritten). Fails with GLIM_ERANGE when a
 * ring has already overwritten keys that a query at pos would need. */
int  kv_cache_truncate(struct kv_cache *kv, int64_t pos, struct glim_err *err);

#endif
