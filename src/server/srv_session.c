/*
 * srv_session.c — the session table: up to --max-sessions slots, each a
 * glim_session plus the exact token ids its KV cache holds ("resident").
 * Named sessions live until closed or evicted (least recently used idle
 * slot first); an anonymous request takes a slot for itself and frees it.
 *
 * Thread: the scheduler thread only — no locks.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <string.h>

#include "base/alloc.h"
#include "runtime/dflash.h"
#include "srv.h"

struct srv_sessions {
    struct glim_model *m;          /* borrowed: lives as long as the server */
    int64_t n_ctx;
    int     max;
    struct srv_session *slots;     /* owned [max]; s == NULL: free */
    uint64_t clock;
};

int srv_sessions_new(struct glim_model *m, int max, int64_t n_ctx, struct srv_sessions **out, struct glim_err *err)
{
    struct srv_sessions *t = glim_calloc(1, sizeof *t);
    if (t)
        t->slots = glim_calloc((size_t)max, sizeof *t->slots);
    if (!t || !t->slots) {
        glim_free(t);
        return glim_fail(err, GLIM_ENOMEM, "out of memory for %d session slots", max);
    }
    t->m = m, t->max = max, t->n_ctx = n_ctx;
    for (int i = 0; i < max; i++)
        tok_ids_init(&t->slots[i].resident);
    *out = t;
    return GLIM_OK;
}

static void slot_drop(struct srv_session *e)
{
    dflash_free(e->df);   /* it borrows e->s */
    e->df = NULL;
    e->df_valid = 0;
    glim_session_free(e->s);
    e->s = NULL;
    e->id[0] = 0;
    e->busy = false;
    e->resident.n = 0;
}

void srv_sessions_free(struct srv_sessions *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->max; i++) {
        slot_drop(&t->slots[i]);
        tok_ids_clear(&t->slots[i].resident);
    }
    glim_free(t->slots);
    glim_free(t);
}

static int slot_open(struct srv_sessions *t, struct srv_session *e, const char *id, struct glim_err *err)
{
    struct glim_session_params p;
    glim_session_params_init(&p);
    p.n_ctx = t->n_ctx;
    int rc = glim_session_new(t->m, &p, &e->s, err);
    if (rc)
        return rc;
    snprintf(e->id, sizeof e->id, "%s", id);
    e->resident.n = 0;
    return GLIM_OK;
}

int srv_sessions_acquire(struct srv_sessions *t, const char *id, struct srv_session **out, bool *busy_out,
                         struct glim_err *err)
{
    *busy_out = false;
    struct srv_session *free_slot = NULL, *lru = NULL;
    for (int i = 0; i < t->max; i++) {
        struct srv_session *e = &t->slots[i];
        if (e->s && id[0] && !strcmp(e->id, id)) {
            if (e->busy) {
                *busy_out = true;
                return GLIM_OK;
            }
            e->busy = true;
            e->last_used = ++t->clock;
            *out = e;
            return GLIM_OK;
        }
        if (!e->s && !free_slot)
            free_slot = e;
        if (e->s && !e->busy && (!lru || e->last_used < lru->last_used))
            lru = e;
    }
    struct srv_session *e = free_slot ? free_slot : lru;
    if (!e)
        return glim_fail(err, GLIM_ERANGE, "all %d session slots are busy", t->max);
    if (e->s)
        slot_drop(e);   /* evict the least recently used idle session */
    int rc = slot_open(t, e, id, err);
    if (rc)
        return rc;
    e->busy = true;
    e->last_used = ++t->clock;
    *out = e;
    return GLIM_OK;
}

void srv_sessions_release(struct srv_sessions *t, struct srv_session *e)
{
    (void)t;
    e->busy = false;
    if (!e->id[0])
        slot_drop(e);   /* anonymous: no state survives the request */
}

bool srv_sessions_close(struct srv_sessions *t, const char *id, bool keep_slot)
{
    for (int i = 0; i < t->max; i++) {
        struct srv_session *e = &t->slots[i];
        if (!e->s || strcmp(e->id, id))
            continue;
        if (e->busy)
            return false;
        if (!keep_slot) {
            slot_drop(e);
            return true;
        }
        struct glim_err err;
        if (srv_session_rewind(t, e, 0, &err))
            slot_drop(e);
        return true;
    }
    return true;
}

int srv_sessions_count(const struct srv_sessions *t)
{
    int n = 0;
    for (int i = 0; i < t->max; i++)
        n += t->slots[i].s != NULL;
    return n;
}

int srv_session_rewind(struct srv_sessions *t, struct srv_session *e, int64_t keep, struct glim_err *err)
{
    if (e->df_valid > keep)   /* rows past keep will hold other tokens */
        e->df_valid = keep;
    if (keep >= glim_session_pos(e->s)) {
        e->resident.n = (size_t)glim_session_pos(e->s);
        return GLIM_OK;
    }
    int rc = glim_session_truncate(e->s, keep, err);
    if (rc == GLIM_OK) {
        e->resident.n = (size_t)keep;
        return GLIM_OK;
    }
    /* a sliding-window ring cannot rewind that far: start over */
    char id[SRV_SESSION_ID_MAX + 1];
    memcpy(id, e->id, sizeof id);
    dflash_free(e->df);   /* it borrows e->s */
    e->df = NULL;
    e->df_valid = 0;
    glim_session_free(e->s);
    e->s = NULL;
    rc = slot_open(t, e, id, err);
    if (rc)
        e->id[0] = 0;
    return rc;
}
#endif
