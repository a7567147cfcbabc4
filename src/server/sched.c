/*
 * sched.c — the scheduler: the one thread that owns the sessions (KV state),
 * the samplers and every forward pass of `glim serve`.
 *
 * DESIGN
 *   HTTP threads submit jobs to `incoming` (q->mu). The scheduler moves them
 *   to its private `waiting` list and admits them in order: a job whose named
 *   session is busy stays waiting (requests on one session run one at a
 *   time); a job that finds every slot busy fails with 429.
 *   Admitted jobs are `active`. Each round gives every active job one step:
 *   its whole prefill, or one decode token. A later issue can replace the
 *   per-job glim_session_eval of a round by one batched forward.
 *   Output goes back through the job's channel (job->mu, job->cv): decoded
 *   text, held back only as far as a stop string could still match
 *   (runtime.md §6.9 generation loop). Cancellation: job->cancel, checked
 *   before every step.
 *
 *   Warm resume (§6.8): the session's `resident` ids are compared with the
 *   new prompt; the KV cache is truncated to the common prefix (or rebuilt
 *   when a sliding-window ring cannot rewind) and only the rest is prefilled.
 *
 *   DFlash (--draft): a job whose sampling DFlash reproduces exactly (no
 *   penalties) runs on its session's struct dflash (made on first use, kept
 *   with the session: its draft context rows cover resident[0, df_valid)).
 *   Its prefill resumes too: the common prefix, capped at df_valid, stays and
 *   dflash_prefill_from runs the rest; when the draft context's rings cannot
 *   rewind that far the whole prompt is prefilled. Each decode step takes one
 *   token from dflash_next (a cycle commits several; they leave one per
 *   round). The target KV may run ahead of what was emitted: job_finish
 *   truncates it back to `resident`, so resident == session position still
 *   holds, and the draft context is valid for all of it (df_valid).
 *
 *   Test mode (--test-output FILE, or "glim_test_output" in a request while
 *   that flag is on): after the real prefill, the reply is a scripted text
 *   emitted in small pieces (1-3 bytes at UTF-8 boundaries; a `<|...|>`
 *   token as one piece; `<|eot|>`/`<|end_of_text|>` end it like EOS), so the
 *   parser, router and SSE encoder see the script exactly as model output.
 *   A file holds one or more replies separated by lines `---8<---`, used in
 *   turn.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#define _GNU_SOURCE   /* memmem */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "model/model.h"
#include "runtime/dflash.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "srv.h"

struct sched {
    struct srv *S;                 /* borrowed */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;                     /* [mu] */
    struct srv_job *incoming;      /* [mu] FIFO */
    struct sched_stats stats;      /* [mu] */
    /* scheduler thread only */
    struct srv_sessions *sessions;
    struct srv_job *waiting[512];
    int n_waiting;
    struct srv_job *active[512];
    int n_active;
    size_t script_pos;             /* next reply of the test script */
};

struct gen {                       /* a running job's state (scheduler thread) */
    struct srv_session *sess;
    struct sampler *smp;
    struct dflash *df;             /* the session's (borrowed): DFlash decoding, or NULL */
    bool use_draft;                /* decode with S->draft (set at start) */
    float *logits;                 /* [n_vocab] */
    bool pick_only;                /* plain greedy: the forward picks (on the GPU: no logits download) */
    int32_t pick;                  /* ... the pick of the last forward */
    struct tok_stream ts;
    struct strbuf raw;             /* decoded, not yet emitted */
    size_t max_stop;
    bool prefilled;
    size_t test_pos;
    int piece;
};

/* The job's forward of tokens: the last row's logits for its sampler, or only their pick (the
 * logits buffer then serves a backend that cannot pick itself) */
static int gen_eval(struct gen *g, const int32_t *ids, int n, struct glim_err *err)
{
    return session_eval_taps(g->sess->s, ids, n, g->logits, g->pick_only ? &g->pick : NULL, 1, 0, NULL, NULL, err);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- jobs ---------------------------------------------------------------- */

struct srv_job *srv_job_new(int kind)
{
    struct srv_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->kind = kind;
    j->refs = 2;
    j->max_tokens = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    strbuf_init(&j->out);
    atomic_init(&j->cancel, false);
    return j;
}

void srv_job_release(struct srv_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0)
        return;
    free(j->prompt);
    for (int i = 0; i < j->n_stops; i++)
        free(j->stops[i]);
    free(j->test_output);
    strbuf_clear(&j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

int srv_job_wait_started(struct srv_job *j)
{
    pthread_mutex_lock(&j->mu);
    while (j->state == SRV_JOB_QUEUED)
        pthread_cond_wait(&j->cv, &j->mu);
    int st = j->state;
    pthread_mutex_unlock(&j->mu);
    return st;
}

bool srv_job_take(struct srv_job *j, struct strbuf *out)
{
    pthread_mutex_lock(&j->mu);
    while (j->out.len == 0 && j->state != SRV_JOB_DONE)
        pthread_cond_wait(&j->cv, &j->mu);
    if (j->out.len) {
        strbuf_append(out, j->out.data, j->out.len);
        strbuf_reset(&j->out);
    }
    bool more = j->state != SRV_JOB_DONE || j->out.len;
    pthread_mutex_unlock(&j->mu);
    return more;
}

static void job_set_state(struct srv_job *j, int state)
{
    pthread_mutex_lock(&j->mu);
    j->state = state;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void job_emit(struct srv_job *j, const char *s, size_t n)
{
    if (!n)
        return;
    pthread_mutex_lock(&j->mu);
    if (strbuf_append(&j->out, s, n) != GLIM_OK && !j->err.status)
        api_fail(&j->err, 500, "server_error", NULL, "Generation failed: out of memory");
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void job_fail(struct srv_job *j, int status, const char *type, const char *code, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    api_fail(&j->err, status, type, code, "%s", msg);
    j->state = SRV_JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* ---- generation ---------------------------------------------------------- */

static void gen_free(struct gen *g)
{
    if (!g)
        return;
    sampler_free(g->smp);
    free(g->logits);
    strbuf_clear(&g->raw);
    free(g);
}

/* DFlash's sampling is temperature/top-k/top-p/min-p only: with penalties
 * the job decodes plainly, so its distribution stays the requested one. */
static bool draft_fits(const struct sampler_params *sp)
{
    return sp->repeat_penalty == 1.0f && sp->presence_penalty == 0.0f && sp->frequency_penalty == 0.0f;
}

/* A DFlash job ends: publish its cycle counts and cut the target KV back to the
 * emitted tokens (it may hold a few more); the draft context covers them all. */
static void draft_done(struct sched *q, struct gen *g)
{
    const struct dflash_stats *st = dflash_get_stats(g->df);
    int64_t accepted = 0;
    for (int i = 0; i < st->n_rows; i++)
        accepted += st->accepts_by_row[i];
    pthread_mutex_lock(&q->mu);
    q->stats.n_dflash_cycles += st->cycles;
    q->stats.n_dflash_spec_cycles += st->speculative_cycles;
    q->stats.n_dflash_accepted += accepted;
    pthread_mutex_unlock(&q->mu);
    struct srv_session *e = g->sess;
    struct glim_err err;
    if (e && e->s && e->df == g->df && !srv_session_rewind(q->sessions, e, (int64_t)e->resident.n, &err) &&
        e->df && dflash_pos(e->df) >= (int64_t)e->resident.n)
        e->df_valid = (int64_t)e->resident.n;
    g->df = NULL;
}

/* Finish: emit what is held back, publish the counts, free the slot. */
static void job_finish(struct sched *q, struct srv_job *j, const char *finish, bool emit_rest)
{
    struct gen *g = j->priv;
    if (emit_rest) {
        tok_stream_flush(&g->ts, &g->raw);
        job_emit(j, g->raw.data, g->raw.len);
    }
    pthread_mutex_lock(&q->mu);
    q->stats.n_completion_tokens += j->n_completion;
    pthread_mutex_unlock(&q->mu);
    if (g->df)
        draft_done(q, g);
    if (g->sess)
        srv_sessions_release(q->sessions, g->sess);
    gen_free(g);
    j->priv = NULL;
    pthread_mutex_lock(&j->mu);
    j->finish = finish;
    j->state = SRV_JOB_DONE;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void job_error(struct sched *q, struct srv_job *j, const struct glim_err *err)
{
    struct gen *g = j->priv;
    char msg[GLIM_ERR_MSG_MAX + 32];
    snprintf(msg, sizeof msg, "Generation failed: %s", err->msg);
    if (g && g->sess) {   /* its KV state is unknown now: forget it */
        struct glim_err e2;
        srv_session_rewind(q->sessions, g->sess, 0, &e2);
    }
    pthread_mutex_lock(&j->mu);
    api_fail(&j->err, 500, "server_error", NULL, "%s", msg);
    pthread_mutex_unlock(&j->mu);
    job_finish(q, j, "stop", false);
}

static size_t common_prefix(const struct tok_ids *a, const int32_t *b, size_t nb)
{
    size_t n = a->n < nb ? a->n : nb, i = 0;
    while (i < n && a->data[i] == b[i])
        i++;
    return i;
}

/* Publish a finished prefill: n_new tokens evaluated, keep reused. */
static void prefill_done(struct sched *q, struct srv_job *j, int64_t n_new, int64_t keep, double dt)
{
    pthread_mutex_lock(&j->mu);
    j->n_prefilled = n_new;
    j->n_reused = keep;
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&q->mu);
    q->stats.n_prompt_tokens += j->n_prompt;
    q->stats.n_prefill_tokens += n_new;
    q->stats.prefill_s += dt;
    pthread_mutex_unlock(&q->mu);
    ((struct gen *)j->priv)->prefilled = true;
}

static bool vocab_eog(void *ud, int32_t id)
{
    return tok_is_eog(ud, id);
}

/* DFlash prefill: from the kept prefix (see DESIGN), or the whole prompt from an
 * empty session (a fresh one when a sliding-window ring cannot rewind to 0). */
static int prefill_draft(struct sched *q, struct srv_job *j, struct glim_err *err)
{
    struct srv *S = q->S;
    struct gen *g = j->priv;
    struct srv_session *e = g->sess;
    size_t keep = e->df ? common_prefix(&e->resident, j->prompt, (size_t)j->n_prompt) : 0;
    if (keep >= (size_t)j->n_prompt)
        keep = (size_t)j->n_prompt - 1;   /* the last prompt token gives the logits */
    if (keep > (size_t)e->df_valid)
        keep = (size_t)e->df_valid;
    int rc = srv_session_rewind(q->sessions, e, (int64_t)keep, err);   /* may drop e->df */
    if (rc)
        return rc;
    keep = e->resident.n;   /* 0 when there was no struct dflash or the rewind rebuilt the session */
    if (!e->df) {
        struct dflash_params dp;
        dflash_params_init(&dp);
        dp.block_length = S->cfg.block_length;
        dp.n_draft = S->cfg.n_draft;
        dp.sp = j->sp;
        if ((rc = dflash_new(S->m, S->draft, e->s, &dp, &e->df, err)))
            return rc;
    } else if ((rc = dflash_set_sampling(e->df, &j->sp, err))) {
        return rc;
    }
    g->df = e->df;
    dflash_set_eos(g->df, vocab_eog, (void *)S->v);
    if (S->cfg.test_propose)
        dflash_set_proposer(g->df, S->cfg.test_propose, S->cfg.test_propose_ud);
    double t0 = now_s();
    rc = dflash_prefill_from(g->df, j->prompt, j->n_prompt, (int64_t)keep, err);
    if (rc == GLIM_ERANGE && keep > 0) {   /* the draft context cannot rewind that far */
        keep = 0;
        if (!(rc = srv_session_rewind(q->sessions, e, 0, err)))
            rc = e->df == g->df ? dflash_prefill(g->df, j->prompt, j->n_prompt, err)
                                : glim_fail(err, GLIM_EBACKEND, "the session was rebuilt under DFlash");
    }
    if (rc)
        return rc;
    double dt = now_s() - t0;
    for (int i = (int)keep; i < j->n_prompt; i++)
        if ((rc = tok_ids_push(&e->resident, j->prompt[i])))
            return glim_fail(err, rc, "out of memory");
    prefill_done(q, j, j->n_prompt - (int64_t)keep, (int64_t)keep, dt);
    pthread_mutex_lock(&q->mu);
    q->stats.n_dflash_requests++;
    pthread_mutex_unlock(&q->mu);
    return GLIM_OK;
}

static int prefill(struct sched *q, struct srv_job *j, struct glim_err *err)
{
    struct gen *g = j->priv;
    struct srv_session *e = g->sess;
    if (g->use_draft)
        return prefill_draft(q, j, err);
    size_t keep = common_prefix(&e->resident, j->prompt, (size_t)j->n_prompt);
    if (keep >= (size_t)j->n_prompt)
        keep = (size_t)j->n_prompt - 1;   /* the last prompt token gives the logits */
    int rc = srv_session_rewind(q->sessions, e, (int64_t)keep, err);
    if (rc)
        return rc;
    keep = e->resident.n;
    int n_new = j->n_prompt - (int)keep;
    double t0 = now_s();
    if ((rc = gen_eval(g, j->prompt + keep, n_new, err)))
        return rc;
    double dt = now_s() - t0;
    for (int i = (int)keep; i < j->n_prompt; i++)
        if ((rc = tok_ids_push(&e->resident, j->prompt[i])))
            return glim_fail(err, rc, "out of memory");
    for (int i = 0; i < j->n_prompt; i++)
        sampler_accept(g->smp, j->prompt[i]);
    prefill_done(q, j, n_new, (int64_t)keep, dt);
    return GLIM_OK;
}

/* Earliest stop string in raw: its offset, or -1. */
static long find_stop(const struct srv_job *j, const struct strbuf *raw)
{
    long best = -1;
    for (int i = 0; i < j->n_stops; i++) {
        const char *p = raw->len ? memmem(raw->data, raw->len, j->stops[i], strlen(j->stops[i])) : NULL;
        if (p && (best < 0 || p - raw->data < best))
            best = p - raw->data;
    }
    return best;
}

/* After new text landed in g->raw: stop on a stop string, else emit what no
 * stop string can still claim. Returns true when the job stopped. */
static bool emit_or_stop(struct sched *q, struct srv_job *j)
{
    struct gen *g = j->priv;
    long at = find_stop(j, &g->raw);
    if (at >= 0) {
        job_emit(j, g->raw.data, (size_t)at);
        g->raw.len = 0;
        job_finish(q, j, "stop", false);
        return true;
    }
    size_t hold = g->max_stop ? g->max_stop - 1 : 0;
    if (g->raw.len > hold) {
        size_t cut = g->raw.len - hold;
        while (cut > 0 && cut < g->raw.len && ((unsigned char)g->raw.data[cut] & 0xC0) == 0x80)
            cut--;
        job_emit(j, g->raw.data, cut);
        memmove(g->raw.data, g->raw.data + cut, g->raw.len - cut);
        g->raw.len -= cut;
        g->raw.data[g->raw.len] = 0;
    }
    return false;
}

/* Test mode: the next scripted piece; false at the end of the script. */
static bool script_piece(struct srv_job *j, struct gen *g, const char **s, size_t *n, bool *is_end)
{
    const char *t = j->test_output + g->test_pos;
    size_t left = j->test_output_len - g->test_pos;
    *is_end = false;
    if (!left)
        return false;
    if (left >= 4 && !memcmp(t, "<|", 2)) {
        const char *close = memmem(t, left < 40 ? left : 40, "|>", 2);
        if (close) {
            size_t len = (size_t)(close + 2 - t);
            *s = t, *n = len;
            *is_end = (len == 7 && !memcmp(t, "<|eot|>", 7)) || (len == 15 && !memcmp(t, "<|end_of_text|>", 15));
            g->test_pos += len;
            return true;
        }
    }
    size_t want = (size_t)(g->piece++ % 3) + 1, len = 0;
    while (len < left && len < want) {   /* whole UTF-8 characters, never into a "<|" */
        size_t k = 1;
        while (len + k < left && ((unsigned char)t[len + k] & 0xC0) == 0x80)
            k++;
        if (len && t[len] == '<' && len + 1 < left && t[len + 1] == '|')
            break;
        len += k;
    }
    *s = t, *n = len;
    g->test_pos += len;
    return true;
}

static void step_test(struct sched *q, struct srv_job *j)
{
    struct gen *g = j->priv;
    const char *s;
    size_t n;
    bool is_end;
    if (!script_piece(j, g, &s, &n, &is_end) || is_end)
        return job_finish(q, j, "stop", true);
    j->n_completion++;
    if (strbuf_append(&g->raw, s, n)) {
        struct glim_err err;
        glim_fail(&err, GLIM_ENOMEM, "out of memory");
        return job_error(q, j, &err);
    }
    if (emit_or_stop(q, j))
        return;
    if (j->n_completion >= j->max_tokens)
        job_finish(q, j, "length", true);
}

static void step_decode(struct sched *q, struct srv_job *j)
{
    struct gen *g = j->priv;
    struct srv *S = q->S;
    struct glim_err err = {0};
    int32_t id;
    double t0 = now_s();
    if (g->pick_only)
        id = g->pick;
    else if (sampler_sample(g->smp, g->logits, glim_model_n_vocab(S->m), &id, &err))
        return job_error(q, j, &err);
    if (tok_is_eog(S->v, id))
        return job_finish(q, j, "stop", true);
    j->n_completion++;
    sampler_accept(g->smp, id);
    if (tok_stream_feed(&g->ts, id, &g->raw)) {
        glim_fail(&err, GLIM_ENOMEM, "out of memory");
        return job_error(q, j, &err);
    }
    if (emit_or_stop(q, j))
        return;
    struct srv_session *e = g->sess;
    if (j->n_completion >= j->max_tokens || glim_session_pos(e->s) + 1 >= glim_session_n_ctx(e->s))
        return job_finish(q, j, "length", true);
    if (gen_eval(g, &id, 1, &err) || tok_ids_push(&e->resident, id))
        return job_error(q, j, &err);
    pthread_mutex_lock(&q->mu);
    q->stats.decode_s += now_s() - t0;
    pthread_mutex_unlock(&q->mu);
}

/* DFlash: one token from the current cycle (a new cycle when it is used up). */
static void step_draft(struct sched *q, struct srv_job *j)
{
    struct gen *g = j->priv;
    struct glim_err err = {0};
    int32_t id;
    bool is_eos;
    double t0 = now_s();
    int rc = dflash_next(g->df, &id, &is_eos, &err);
    if (rc == GLIM_ERANGE && glim_session_pos(g->sess->s) >= glim_session_n_ctx(g->sess->s))
        return job_finish(q, j, "length", true);   /* the context is full */
    if (rc)
        return job_error(q, j, &err);
    if (is_eos)
        return job_finish(q, j, "stop", true);
    j->n_completion++;
    if (tok_ids_push(&g->sess->resident, id) || tok_stream_feed(&g->ts, id, &g->raw)) {
        glim_fail(&err, GLIM_ENOMEM, "out of memory");
        return job_error(q, j, &err);
    }
    pthread_mutex_lock(&q->mu);
    q->stats.decode_s += now_s() - t0;
    pthread_mutex_unlock(&q->mu);
    if (emit_or_stop(q, j))
        return;
    if (j->n_completion >= j->max_tokens)
        job_finish(q, j, "length", true);
}

/* Test hold (srv_job.test_hold_until): not yet released? */
static bool job_held(struct sched *q, const struct srv_job *j)
{
    if (!j->test_hold_until)
        return false;
    pthread_mutex_lock(&q->mu);
    bool held = q->stats.n_requests + q->stats.n_rejected < j->test_hold_until;
    pthread_mutex_unlock(&q->mu);
    return held;
}

/* One step of an active job; the job may finish here. Returns false when
 * the job did nothing (held). */
static bool job_step(struct sched *q, struct srv_job *j)
{
    struct gen *g = j->priv;
    struct glim_err err = {0};
    if (atomic_load(&j->cancel)) {
        job_finish(q, j, "stop", false);
        return true;
    }
    if (job_held(q, j))
        return false;
    if (!g->prefilled) {
        if (prefill(q, j, &err))
            job_error(q, j, &err);
    } else if (j->test_output) {
        step_test(q, j);
    } else if (g->df) {
        step_draft(q, j);
    } else {
        step_decode(q, j);
    }
    return true;
}

/* ---- admission ------------------------------------------------------------ */

static void pick_script(struct sched *q, struct srv_job *j)
{
    struct srv *S = q->S;
    if (j->test_output || !S->test_script)
        return;
    static const char SEP[] = "\n---8<---\n";
    const char *all = S->test_script, *end = all + S->test_script_len;
    size_t n_parts = 1;
    for (const char *p = all; (p = memmem(p, (size_t)(end - p), SEP, sizeof SEP - 1)); p += sizeof SEP - 1)
        n_parts++;
    size_t want = q->script_pos++ % n_parts;
    const char *p = all;
    for (size_t i = 0; i < want; i++)
        p = (const char *)memmem(p, (size_t)(end - p), SEP, sizeof SEP - 1) + sizeof SEP - 1;
    const char *e = memmem(p, (size_t)(end - p), SEP, sizeof SEP - 1);
    size_t n = e ? (size_t)(e - p) : (size_t)(end - p);
    if (!e && n && p[n - 1] == '\n')
        n--;   /* the file's final newline */
    j->test_output = glim_strndup(p, n);
    j->test_output_len = j->test_output ? n : 0;
}

static int job_start(struct sched *q, struct srv_job *j, struct srv_session *e, struct glim_err *err)
{
    struct srv *S = q->S;
    struct gen *g = calloc(1, sizeof *g);
    if (!g)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    g->sess = e;
    j->priv = g;
    strbuf_init(&g->raw);
    tok_stream_init(&g->ts, S->v, TOK_DECODE_SPECIAL);
    for (int i = 0; i < j->n_stops; i++)
        g->max_stop = GLIM_MAX(g->max_stop, strlen(j->stops[i]));
    g->logits = malloc((size_t)glim_model_n_vocab(S->m) * sizeof(float));
    if (!g->logits)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    pick_script(q, j);
    g->use_draft = S->draft && !j->test_output && draft_fits(&j->sp);
    g->pick_only = sampler_params_is_plain_greedy(&j->sp);
    return sampler_new(&j->sp, glim_model_n_vocab(S->m), &g->smp, err);
}

/* Try to admit waiting job j. Returns true when it left the waiting list. */
static bool admit(struct sched *q, struct srv_job *j)
{
    struct glim_err err = {0};
    if (atomic_load(&j->cancel)) {
        job_fail(j, 499, "server_error", NULL, "canceled");
        return true;
    }
    if (j->kind != SRV_JOB_GENERATE) {
        if (!srv_sessions_close(q->sessions, j->session_id, j->kind == SRV_JOB_SESSION_RESET))
            return false;   /* busy: after its current request */
        job_set_state(j, SRV_JOB_DONE);
        return true;
    }
    struct srv_session *e = NULL;
    bool busy;
    int rc = srv_sessions_acquire(q->sessions, j->session_id, &e, &busy, &err);
    if (rc == GLIM_OK && busy)
        return false;
    if (rc == GLIM_ERANGE) {
        pthread_mutex_lock(&q->mu);
        q->stats.n_rejected++;
        pthread_mutex_unlock(&q->mu);
        char msg[GLIM_ERR_MSG_MAX + 64];
        snprintf(msg, sizeof msg, "Server at capacity: %s; retry later", err.msg);
        job_fail(j, 429, "capacity_error", "capacity_exhausted", msg);
        return true;
    }
    if (rc == GLIM_OK && (rc = job_start(q, j, e, &err)) != GLIM_OK) {
        gen_free(j->priv);
        j->priv = NULL;
        srv_sessions_release(q->sessions, e);
    }
    if (rc) {
        job_fail(j, rc == GLIM_ENOMEM ? 503 : 500, "server_error", NULL, err.msg);
        return true;
    }
    pthread_mutex_lock(&q->mu);
    q->stats.n_requests++;
    pthread_mutex_unlock(&q->mu);
    q->active[q->n_active++] = j;
    job_set_state(j, SRV_JOB_RUNNING);
    return true;
}

static void admit_waiting(struct sched *q)
{
    int k = 0;
    for (int i = 0; i < q->n_waiting; i++) {
        struct srv_job *j = q->waiting[i];
        bool gone = q->n_active < (int)(sizeof q->active / sizeof q->active[0]) && admit(q, j);
        if (!gone)
            q->waiting[k++] = j;
        else if (!j->priv)   /* answered at once; an admitted job is released by run_round */
            srv_job_release(j);
    }
    q->n_waiting = k;
}

/* Move incoming jobs to waiting (q->mu held). */
static void take_incoming(struct sched *q)
{
    while (q->incoming && q->n_waiting < (int)(sizeof q->waiting / sizeof q->waiting[0])) {
        struct srv_job *j = q->incoming;
        q->incoming = j->next;
        q->waiting[q->n_waiting++] = j;
    }
}

/* One step for every active job; returns how many did something. */
static int run_round(struct sched *q)
{
    int n_moved = 0;
    for (int i = 0; i < q->n_active; i++)
        n_moved += job_step(q, q->active[i]);
    int k = 0;
    for (int i = 0; i < q->n_active; i++) {
        struct srv_job *j = q->active[i];
        if (j->priv)   /* still running */
            q->active[k++] = j;
        else
            srv_job_release(j);
    }
    q->n_active = k;
    return n_moved;
}

static void *sched_main(void *arg)
{
    struct sched *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        take_incoming(q);
        pthread_mutex_unlock(&q->mu);
        admit_waiting(q);
        pthread_mutex_lock(&q->mu);
        q->stats.n_active = q->n_active;
        q->stats.n_queued = q->n_waiting;
        q->stats.n_sessions = srv_sessions_count(q->sessions);
        if (q->n_active == 0) {
            if (!q->incoming && !q->stop)
                pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        pthread_mutex_unlock(&q->mu);
        int n_moved = run_round(q);
        pthread_mutex_lock(&q->mu);
        if (!n_moved && !q->incoming && !q->stop)   /* every job held: sleep until a submit */
            pthread_cond_wait(&q->cv, &q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int sched_new(struct srv *S, struct sched **out, struct glim_err *err)
{
    struct sched *q = calloc(1, sizeof *q);
    if (!q)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    q->S = S;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    int rc = srv_sessions_new(S->m, S->cfg.max_sessions, S->n_ctx, &q->sessions, err);
    if (rc == GLIM_OK && pthread_create(&q->thread, NULL, sched_main, q) != 0)
        rc = glim_fail(err, GLIM_ENOMEM, "cannot start the scheduler thread");
    if (rc) {
        sched_free(q);
        return rc;
    }
    q->started = true;
    *out = q;
    return GLIM_OK;
}

void sched_free(struct sched *q)
{
    if (!q)
        return;
    if (q->started) {
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
    }
    for (int i = 0; i < q->n_active; i++) {
        struct srv_job *j = q->active[i];
        job_finish(q, j, "stop", false);
        srv_job_release(j);
    }
    take_incoming(q);
    for (int i = 0; i < q->n_waiting; i++) {
        job_fail(q->waiting[i], 503, "server_error", NULL, "the server is shutting down");
        srv_job_release(q->waiting[i]);
    }
    srv_sessions_free(q->sessions);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

void sched_submit(struct sched *q, struct srv_job *j)
{
    pthread_mutex_lock(&q->mu);
    struct srv_job **pp = &q->incoming;
    while (*pp)
        pp = &(*pp)->next;
    j->next = NULL;
    *pp = j;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void sched_get_stats(struct sched *q, struct sched_stats *out)
{
    pthread_mutex_lock(&q->mu);
    *out = q->stats;
    pthread_mutex_unlock(&q->mu);
}
#endif
