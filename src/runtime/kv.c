/*
 * kv.c — per-sequence KV caches on the model's backend: flat for global
 * layers, rings for sliding-window layers (see kv.h for the sizing rule).
 * Owner thread only.
 */
#include "kv.h"

#include "../base/alloc.h"
#include "../quant/quant.h"

static int64_t ring_slots(const struct model_hparams *hp, int64_t n_ctx, int n_chunk, int n_extra)
{
    int64_t want = (int64_t)hp->n_swa + n_chunk - 1 + n_extra;
    return want < n_ctx ? want : n_ctx;   /* never more than a flat cache */
}

static bool layer_is_ring(const struct model_hparams *hp, int il)
{
    return hp->n_swa > 0 && hp->is_swa[il];
}

void kv_plan_compute(const struct model_hparams *hp, int64_t n_ctx, int n_chunk, int n_extra,
                     uint32_t type, struct kv_plan *out)
{
    size_t elem = type == GLIM_TYPE_F32 ? 4 : 2;
    size_t per_slot = 2 * (size_t)hp->n_head_kv * hp->head_dim * elem;   /* K + V */
    *out = (struct kv_plan){0};
    out->flat_slots = n_ctx;
    out->ring_slots = ring_slots(hp, n_ctx, n_chunk, n_extra);
    for (int il = 0; il < hp->n_layer; il++) {
        if (layer_is_ring(hp, il)) {
            out->n_ring_layers++;
            out->bytes_ring += per_slot * (size_t)out->ring_slots;
        } else {
            out->n_flat_layers++;
            out->bytes_flat += per_slot * (size_t)n_ctx;
        }
    }
    out->bytes_total = out->bytes_ring + out->bytes_flat;
}

void kv_cache_free(struct kv_cache *kv)
{
    if (!kv)
        return;
    for (int i = 0; i < BE_GRAPH_CLASSES && kv->be->i->graph_free; i++) {
        if (kv->graph[i])
            kv->be->i->graph_free(kv->be, kv->graph[i]);
        if (kv->graph_greedy[i])
            kv->be->i->graph_free(kv->be, kv->graph_greedy[i]);
    }
    if (kv->layers) {
        for (int il = 0; il < kv->n_layer; il++) {
            kv->be->i->release(kv->be, kv->layers[il].k);
            kv->be->i->release(kv->be, kv->layers[il].v);
        }
    }
    glim_free(kv->layers);
    glim_free(kv);
}

int kv_cache_new(struct glim_model *m, int64_t n_ctx, int n_chunk, int n_extra, uint32_t type,
                 struct kv_cache **out, struct glim_err *err)
{
    const struct model_hparams *hp = &m->hp;
    if (type != GLIM_TYPE_F32 && type != GLIM_TYPE_F16 && type != GLIM_TYPE_BF16)
        return glim_fail(err, GLIM_EINVAL, "KV cache type: expected F32, F16 or BF16");
    struct kv_cache *kv = glim_calloc(1, sizeof *kv);
    if (!kv)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    kv->be = m->be, kv->type = type, kv->n_layer = hp->n_layer;
    kv->n_ctx = n_ctx, kv->n_chunk = n_chunk, kv->n_swa = hp->n_swa;
    kv->graph_ok = true;
    kv->layers = glim_calloc((size_t)hp->n_layer, sizeof *kv->layers);
    if (!kv->layers)
        goto oom;
    size_t elem = type == GLIM_TYPE_F32 ? 4 : 2;
    size_t row = (size_t)hp->n_head_kv * hp->head_dim * elem;
    for (int il = 0; il < hp->n_layer; il++) {
        struct kv_layer *L = &kv->layers[il];
        L->is_ring = layer_is_ring(hp, il);
        L->n_slots = L->is_ring ? ring_slots(hp, n_ctx, n_chunk, n_extra) : n_ctx;
        L->k = m->be->i->alloc(m->be, row * (size_t)L->n_slots);
        L->v = m->be->i->alloc(m->be, row * (size_t)L->n_slots);
        if (!L->k || !L->v)
            goto oom;
    }
    *out = kv;
    return GLIM_OK;
oom:
    kv_cache_free(kv);
    return glim_fail(err, GLIM_ENOMEM, "out of memory allocating the KV cache (%lld positions)",
                     (long long)n_ctx);
}

int kv_cache_truncate(struct kv_cache *kv, int64_t pos, struct glim_err *err)
{
    if (pos < 0 || pos > kv->pos)
        return glim_fail(err, GLIM_ERANGE, "truncate to %lld: expected 0..%lld", (long long)pos,
                         (long long)kv->pos);
    for (int il = 0; il < kv->n_layer; il++) {
        const struct kv_layer *L = &kv->layers[il];
        /* the ring holds pos_hi - n_slots .. pos_hi - 1; a query at pos needs pos - window + 1 .. */
        /* A query at pos needs positions max(0, pos - window + 1) .. pos - 1; the ring still
         * holds pos_hi - n_slots .. pos_hi - 1 (a ring as large as the context holds all, and
         * a rewind to 0 needs nothing). */
        int64_t need_lo = GLIM_MAX(0, pos - kv->n_swa + 1);
        if (L->is_ring && L->n_slots < kv->n_ctx && pos > 0 && need_lo < kv->pos_hi - L->n_slots)
            return glim_fail(err, GLIM_ERANGE,
                             "cannot rewind to %lld: the sliding-window ring keeps only %lld rows beyond "
                             "the window", (long long)pos, (long long)(L->n_slots - kv->n_swa));
    }
    kv->pos = pos;   /* slots past pos are overwritten by the next store */
    return GLIM_OK;
}
