/*
 * session_greedy.c — glim_session_greedy: greedy decoding in which the backend picks each
 * token (arch_greedy_step: the step's argmax written over its own input id, its position
 * advanced), so the host queues step i + 1 before it has seen step i's token and never leaves
 * the GPU idle between steps; the picks come back 4 bytes at a time (fetch_start/fetch_wait).
 * A backend without a pick runs the eval loop with the sampler's argmax instead: the same tokens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/alloc.h"
#include "../model/arch_common.h"
#include "../model/model.h"
#include "kv.h"
#include "sampler.h"
#include "session.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* glim_session_greedy where the backend cannot pick: an eval and the host's argmax a token */
static int greedy_host(struct glim_session *s, int32_t tok, int n_max, int32_t *out,
                       int (*on_token)(void *ud, int32_t tok), void *ud, int *n_out, struct glim_err *err)
{
    int V = session_model(s)->hp.n_vocab, rc = GLIM_OK;
    float *logits = glim_malloc((size_t)V * sizeof(float));
    if (!logits)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    while (*n_out < n_max) {
        if ((rc = glim_session_eval(s, &tok, 1, logits, 1, err)) != GLIM_OK)
            break;
        tok = out[(*n_out)++] = sampler_argmax(logits, V);
        if (on_token && on_token(ud, tok))
            break;
    }
    glim_free(logits);
    return rc;
}

/* Collects step i's pick from fetch slot i % BE_FETCH_SLOTS. A backend without fetch ops runs
 * each op before returning, so the pick is copied at once (the next step overwrites it). */
struct pick_ring {
    struct backend *be;
    int32_t         held[BE_FETCH_SLOTS];
};

static int pick_start(struct pick_ring *r, int i, const int32_t *dev, struct glim_err *err)
{
    int slot = i % BE_FETCH_SLOTS;
    if (r->be->i->fetch_start)
        return r->be->i->fetch_start(r->be, slot, dev, sizeof(int32_t), err);
    return r->be->i->download(r->be, &r->held[slot], dev, sizeof(int32_t), err);
}

static int pick_wait(struct pick_ring *r, int i, int32_t *tok, struct glim_err *err)
{
    int slot = i % BE_FETCH_SLOTS;
    if (r->be->i->fetch_wait)
        return r->be->i->fetch_wait(r->be, slot, tok, sizeof(int32_t), err);
    *tok = r->held[slot];
    return GLIM_OK;
}

int glim_session_greedy(struct glim_session *s, int32_t tok0, int n_max, int32_t *out,
                        int (*on_token)(void *ud, int32_t tok), void *ud, int *n_out, struct glim_err *err)
{
    *n_out = 0;
    if (n_max < 0 || (n_max > 0 && !out))
        return glim_fail(err, GLIM_EINVAL, "greedy: n_max %d needs an output array of that size", n_max);
    struct glim_model *m = session_model(s);
    struct kv_cache *kv = session_kv(s);
    int64_t pos0 = kv->pos;
    if (n_max > 0 && pos0 >= kv->n_ctx)
        return glim_fail(err, GLIM_ERANGE, "position %lld is past the context end: the context holds %lld tokens (--ctx)",
                         (long long)pos0, (long long)kv->n_ctx);
    if (n_max > kv->n_ctx - pos0)   /* each pick but the last is fed at the next position */
        n_max = (int)(kv->n_ctx - pos0);
    if (!m->arch->body || !m->be->i->argmax)
        return greedy_host(s, tok0, n_max, out, on_token, ud, n_out, err);
    /* GLIM_GREEDY_STATS=1 (diagnosis): the host's time queueing steps vs waiting for picks */
    static int stats = -1;
    if (stats < 0)
        stats = getenv("GLIM_GREEDY_STATS") && strcmp(getenv("GLIM_GREEDY_STATS"), "0") != 0;
    double t_queue = 0, t_wait = 0, t0 = 0;
    /* two steps in flight: step i + 1 is queued before the host waits for step i's pick */
    struct pick_ring ring = {.be = m->be};
    const int32_t *dev = NULL;
    int queued = 0, got = 0, rc = GLIM_OK;
    bool stop = false;
    while (rc == GLIM_OK) {
        while (!stop && queued < n_max && queued < got + 2) {
            t0 = stats ? now_s() : 0;
            rc = arch_greedy_step(m, kv, session_scratch(s), queued ? NULL : &tok0, (int32_t)(pos0 + queued), &dev, err);
            if (rc == GLIM_OK)
                rc = pick_start(&ring, queued, dev, err);
            if (rc != GLIM_OK)
                break;
            queued++;
            t_queue += stats ? now_s() - t0 : 0;
        }
        if (rc != GLIM_OK || got == queued)
            break;
        t0 = stats ? now_s() : 0;
        if ((rc = pick_wait(&ring, got, &out[got], err)) != GLIM_OK)
            break;
        t_wait += stats ? now_s() - t0 : 0;
        got++;
        if (on_token && !stop && on_token(ud, out[got - 1])) {
            stop = true;
            *n_out = got;   /* a step already queued runs; its pick is dropped */
        }
    }
    if (!stop)
        *n_out = got;
    if (stats && queued)
        fprintf(stderr, "greedy: %d steps, host %.1f us a step queueing, %.1f us waiting for picks\n", queued,
                1e6 * t_queue / queued, 1e6 * t_wait / queued);
    kv->pos = pos0 + *n_out;
    if (pos0 + queued > kv->pos_hi)
        kv->pos_hi = pos0 + queued;
    return rc;
}

