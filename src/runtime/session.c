/*
 * session.c — one sequence on a loaded model: its KV caches, a scratch
 * area for one chunk, and the position. glim_session_eval feeds tokens in
 * chunks of n_chunk; positions past the context end are an error, never a
 * wrap. The memory plan (weights, KV per layer type, scratch) is computed
 * and checked against the backend's free memory before anything is
 * allocated. Owner thread only.
 */
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "../base/alloc.h"
#include "../quant/quant.h"
#include "../model/model.h"
#include "kv.h"
#include "session.h"

#define DEFAULT_CHUNK 512
#define DEFAULT_RING_EXTRA 16   /* rows a speculative verify may roll back */

struct glim_session {
    struct glim_model *m;      /* borrowed: outlives the session */
    struct kv_cache   *kv;     /* owned */
    void              *scratch;/* owned (backend memory) for n_chunk tokens */
    int                n_chunk;
};

void glim_session_params_init(struct glim_session_params *p)
{
    memset(p, 0, sizeof *p);
    p->n_ring_extra = -1;
}

static uint32_t kv_type_of(const struct glim_model *m, int kv_type)
{
    switch (kv_type) {
    case GLIM_KV_F32: return GLIM_TYPE_F32;
    case GLIM_KV_F16: return GLIM_TYPE_F16;
    case GLIM_KV_BF16: return GLIM_TYPE_BF16;
    default: return strcmp(m->be->i->name, "cpu-ref") ? GLIM_TYPE_F16 : GLIM_TYPE_F32;
    }
}

static size_t host_available(void)
{
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {   /* MemAvailable counts reclaimable cache, unlike AVPHYS_PAGES */
        char line[128];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (size_t)kb * 1024;
            }
        fclose(f);
    }
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : SIZE_MAX;
}

struct resolved { int64_t n_ctx; int n_chunk, n_extra; uint32_t kv_type; };

static int resolve(struct glim_model *m, const struct glim_session_params *p, struct resolved *r,
                   struct glim_err *err)
{
    struct glim_session_params d;
    if (!p) {
        glim_session_params_init(&d);
        p = &d;
    }
    r->n_ctx = p->n_ctx > 0 ? p->n_ctx : m->hp.n_ctx_train;
    r->n_chunk = p->n_chunk > 0 ? p->n_chunk : DEFAULT_CHUNK;
    r->n_extra = p->n_ring_extra >= 0 ? p->n_ring_extra : DEFAULT_RING_EXTRA;
    r->kv_type = kv_type_of(m, p->kv_type);
    if (p->n_ctx < 0 || r->n_ctx > 0x7fffffffLL)
        return glim_fail(err, GLIM_EINVAL, "--ctx: expected 1..%d, got %lld", 0x7fffffff, (long long)p->n_ctx);
    if (p->n_chunk < 0 || r->n_chunk > 65536)
        return glim_fail(err, GLIM_EINVAL, "--chunk: expected 1..65536, got %d", p->n_chunk);
    if (r->n_extra > (1 << 20))
        return glim_fail(err, GLIM_EINVAL, "ring extra rows: expected 0..%d, got %d", 1 << 20, r->n_extra);
    if (r->n_chunk > r->n_ctx)
        r->n_chunk = (int)r->n_ctx;
    return GLIM_OK;
}

int glim_session_plan(struct glim_model *m, const struct glim_session_params *p,
                      struct glim_mem_plan *out, struct glim_err *err)
{
    struct resolved r;
    int rc = resolve(m, p, &r, err);
    if (rc != GLIM_OK)
        return rc;
    struct kv_plan kp;
    kv_plan_compute(&m->hp, r.n_ctx, r.n_chunk, r.n_extra, r.kv_type, &kp);
    memset(out, 0, sizeof *out);
    out->weights_bytes = m->weight_bytes;
    out->kv_flat_bytes = kp.bytes_flat, out->kv_ring_bytes = kp.bytes_ring;
    out->n_flat_layers = kp.n_flat_layers, out->n_ring_layers = kp.n_ring_layers;
    out->flat_slots = kp.flat_slots, out->ring_slots = kp.ring_slots;
    out->scratch_bytes = m->arch->scratch_bytes(m, r.n_chunk);
    out->total_bytes = kp.bytes_total + out->scratch_bytes;
    size_t avail = m->be->i->mem_free(m->be);
    out->available_bytes = avail == SIZE_MAX ? host_available() : avail;
    return GLIM_OK;
}

void glim_mem_plan_print(const struct glim_mem_plan *pl, void *file)
{
    FILE *f = file;
    const double MB = 1024.0 * 1024.0;
    fprintf(f, "memory plan: weights %.1f MiB (mapped) | KV global %d layers x %lld slots = %.1f MiB"
               " | KV sliding %d layers x %lld slots = %.1f MiB | scratch %.1f MiB | session total %.1f MiB",
            pl->weights_bytes / MB, pl->n_flat_layers, (long long)pl->flat_slots, pl->kv_flat_bytes / MB,
            pl->n_ring_layers, (long long)pl->ring_slots, pl->kv_ring_bytes / MB,
            pl->scratch_bytes / MB, pl->total_bytes / MB);
    if (pl->available_bytes != SIZE_MAX)
        fprintf(f, " (available %.1f MiB)", pl->available_bytes / MB);
    fputc('\n', f);
}

void glim_session_free(struct glim_session *s)
{
    if (!s)
        return;
    if (s->scratch)
        s->m->be->i->release(s->m->be, s->scratch);
    kv_cache_free(s->kv);
    glim_free(s);
}

int glim_session_new(struct glim_model *m, const struct glim_session_params *p,
                     struct glim_session **out, struct glim_err *err)
{
    struct resolved r;
    struct glim_mem_plan plan;
    int rc = resolve(m, p, &r, err);
    if (rc == GLIM_OK)
        rc = glim_session_plan(m, p, &plan, err);
    if (rc != GLIM_OK)
        return rc;
    if (m->verbose)
        glim_mem_plan_print(&plan, stderr);
    if (plan.available_bytes != SIZE_MAX && plan.total_bytes > plan.available_bytes)
        return glim_fail(err, GLIM_ENOMEM,
                         "context %lld needs %.1f MiB for KV caches and scratch, but only %.1f MiB "
                         "are available; lower --ctx", (long long)r.n_ctx,
                         plan.total_bytes / 1048576.0, plan.available_bytes / 1048576.0);
    struct glim_session *s = glim_calloc(1, sizeof *s);
    if (!s)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    s->m = m;
    s->n_chunk = r.n_chunk;
    rc = kv_cache_new(m, r.n_ctx, r.n_chunk, r.n_extra, r.kv_type, &s->kv, err);
    if (rc != GLIM_OK)
        goto fail;
    s->scratch = m->be->i->alloc(m->be, plan.scratch_bytes);
    if (!s->scratch) {
        rc = glim_fail(err, GLIM_ENOMEM, "out of memory for %.1f MiB of scratch",
                       plan.scratch_bytes / 1048576.0);
        goto fail;
    }
    *out = s;
    return GLIM_OK;
fail:
    glim_session_free(s);
    return rc;
}

int64_t glim_session_pos(const struct glim_session *s) { return s->kv->pos; }
int64_t glim_session_n_ctx(const struct glim_session *s) { return s->kv->n_ctx; }

int glim_session_truncate(struct glim_session *s, int64_t pos, struct glim_err *err)
{
    return kv_cache_truncate(s->kv, pos, err);
}

/* Internal: one forward over tokens at the current position (n <= n_chunk). */
static int forward_chunk(struct glim_session *s, const int32_t *tokens, int n, float *logits, int32_t *picks,
                         int n_out, int n_taps, const int *tap_layers, float *taps, bool taps_on_backend,
                         struct glim_err *err)
{
    struct fwd_batch b = {
        .n_tokens = n, .tokens = tokens, .pos0 = (int32_t)s->kv->pos,
        .n_out = n_out, .logits = logits, .picks = picks,
        .n_taps = n_taps, .tap_layers = tap_layers, .taps = taps, .taps_on_backend = taps_on_backend,
    };
    int rc = s->m->arch->forward(s->m, s->kv, &b, s->scratch, err);
    if (rc != GLIM_OK)
        return rc;
    s->kv->pos += n;
    if (s->kv->pos > s->kv->pos_hi)
        s->kv->pos_hi = s->kv->pos;
    return GLIM_OK;
}

static int eval_taps(struct glim_session *s, const int32_t *tokens, int n, float *logits, int32_t *picks, int n_out,
                     int n_taps, const int *tap_layers, float *taps, bool taps_on_backend, struct glim_err *err)
{
    if (n < 0 || n_out < 0 || n_out > n)
        return glim_fail(err, GLIM_EINVAL, "eval: bad counts n=%d n_out=%d", n, n_out);
    if (n_out > 0 && !logits && !picks)
        return glim_fail(err, GLIM_EINVAL, "eval: n_out > 0 needs a logits buffer");
    if (s->kv->pos + n > s->kv->n_ctx)
        return glim_fail(err, GLIM_ERANGE,
                         "position %lld is past the context end: the context holds %lld tokens "
                         "(--ctx), %lld used, %d more requested",
                         (long long)(s->kv->pos + n - 1), (long long)s->kv->n_ctx,
                         (long long)s->kv->pos, n);
    int V = s->m->hp.n_vocab;
    size_t tap_row = (size_t)n_taps * s->m->hp.n_embd;
    for (int t0 = 0; t0 < n; t0 += s->n_chunk) {
        int c = GLIM_MIN(s->n_chunk, n - t0);
        /* rows of this chunk that are among the last n_out of the whole call */
        int first_out = n - n_out;
        int c_out = t0 + c <= first_out ? 0 : t0 + c - GLIM_MAX(first_out, t0);
        size_t o = (size_t)(t0 + c - c_out - first_out);
        float *dst = c_out && logits ? logits + o * V : NULL;
        int32_t *pk = c_out && picks ? picks + o : NULL;
        int rc = forward_chunk(s, tokens + t0, c, dst, pk, c_out, n_taps, tap_layers,
                               taps ? taps + (size_t)t0 * tap_row : NULL, taps_on_backend, err);
        if (rc != GLIM_OK)
            return rc;
    }
    return GLIM_OK;
}

int session_eval_taps(struct glim_session *s, const int32_t *tokens, int n, float *logits, int32_t *picks,
                      int n_out, int n_taps, const int *tap_layers, float *taps, struct glim_err *err)
{
    return eval_taps(s, tokens, n, logits, picks, n_out, n_taps, tap_layers, taps, false, err);
}

int session_eval_taps_on_backend(struct glim_session *s, const int32_t *tokens, int n, float *logits,
                                 int32_t *picks, int n_out, int n_taps, const int *tap_layers, float *taps,
                                 struct glim_err *err)
{
    return eval_taps(s, tokens, n, logits, picks, n_out, n_taps, tap_layers, taps, true, err);
}

int glim_session_eval(struct glim_session *s, const int32_t *tokens, int n, float *logits,
                      int n_out, struct glim_err *err)
{
    return session_eval_taps(s, tokens, n, logits, NULL, n_out, 0, NULL, NULL, err);
}

struct kv_cache *session_kv(struct glim_session *s) { return s->kv; }
struct glim_model *session_model(struct glim_session *s) { return s->m; }
void *session_scratch(struct glim_session *s) { return s->scratch; }
int session_n_chunk(const struct glim_session *s) { return s->n_chunk; }
