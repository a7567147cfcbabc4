/*
 * dflash.c — the speculative cycle of runtime.md §1.10 over a target session
 * and a draft model.
 *
 * State: the target KV holds positions [0, target_pos); `pending` is the token
 * for position target_pos, sampled but not yet run; the draft KV holds the
 * context rows (taps of committed tokens) for [0, target_pos), injected as
 * soon as each row is committed, so no backlog is kept. A cycle drafts a block
 * [pending, MASK...], verifies min(N+1, room) candidates with one target
 * forward, accepts a prefix, and rewinds the target to the committed length
 * (rejected rows sit in ring slots kept spare for exactly that).
 *
 * The draft KV's pos / pos_hi are kept like a session's (pos = target_pos
 * after every commit; pos_hi also covers the transient draft block), so
 * kv_cache_truncate can tell whether the context can rewind: that is what
 * lets a later prompt resume from a kept prefix (dflash_prefill_from).
 */
#include "dflash.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "../base/alloc.h"
#include "kv.h"
#include "session.h"

struct dflash {
    struct glim_model   *target, *draft;   /* borrowed */
    struct glim_session *ts;               /* borrowed */
    struct kv_cache     *dkv;              /* owned: draft context cache */
    void                *dscratch;         /* owned: draft backend scratch */
    int                  L, N, n_rows_max; /* block length, drafts, rows per inject call */
    struct dflash_params p;
    struct sampler_rng   rng;
    struct sampler_scratch *sc;            /* owned */
    bool                 greedy;
    int64_t              target_pos;
    int32_t              pending;
    bool                 has_pending;
    int32_t              ready[DFLASH_MAX_BLOCK + 1];
    int32_t              t_picks[DFLASH_MAX_BLOCK + 1], d_picks[DFLASH_MAX_BLOCK];   /* argmax per row */
    int                  n_ready, ready_at;
    /* host buffers */
    float *t_logits, *d_logits, *probs, *q;   /* owned */
    float *taps;                            /* owned, backend memory: the target's taps, read by inject */
    size_t tap_row;
    int    V;
    dflash_is_eos_fn  is_eos;
    void             *eos_ud;
    dflash_propose_fn propose;
    void             *propose_ud;
    struct dflash_stats st;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

void dflash_params_init(struct dflash_params *p)
{
    memset(p, 0, sizeof *p);
    p->draft_argmax = true;
    sampler_params_init(&p->sp);
}

void dflash_free(struct dflash *d)
{
    if (!d)
        return;
    kv_cache_free(d->dkv);
    if (d->dscratch)
        d->draft->be->i->release(d->draft->be, d->dscratch);
    sampler_scratch_free(d->sc);
    glim_free(d->t_logits);
    if (d->taps)
        d->draft->be->i->release(d->draft->be, d->taps);
    glim_free(d->d_logits);
    glim_free(d->probs);
    glim_free(d->q);
    glim_free(d);
}

static int check_params(const struct glim_model *draft, const struct dflash_params *p, int *L, int *N,
                        struct glim_err *err)
{
    int bs = draft->hp.block_size;
    if (p->block_length < 0 || p->block_length == 1 || p->block_length > bs)
        return glim_fail(err, GLIM_EINVAL, "--block-length: expected 2..%d (the draft's block_size), got %d",
                         bs, p->block_length);
    *L = p->block_length ? p->block_length : bs;
    if (*L > DFLASH_MAX_BLOCK)
        return glim_fail(err, GLIM_EINVAL, "--block-length: at most %d", DFLASH_MAX_BLOCK);
    if (p->n_draft < 0 || p->n_draft > *L - 1)
        return glim_fail(err, GLIM_EINVAL, "--n-draft: expected 1..%d (block length - 1), got %d", *L - 1,
                         p->n_draft);
    *N = p->n_draft ? p->n_draft : *L - 1;
    return sampler_params_check(&p->sp, err);
}

int dflash_new(struct glim_model *target, struct glim_model *draft, struct glim_session *ts,
               const struct dflash_params *p, struct dflash **out, struct glim_err *err)
{
    int L = 0, N = 0;
    int rc = check_params(draft, p, &L, &N, err);
    if (rc != GLIM_OK)
        return rc;
    if (draft->target != target)
        return glim_fail(err, GLIM_EINVAL, "the draft was loaded for another target model");
    struct dflash *d = glim_calloc(1, sizeof *d);
    if (!d)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    d->target = target, d->draft = draft, d->ts = ts, d->p = *p, d->L = L, d->N = N;
    d->V = target->hp.n_vocab;
    d->tap_row = (size_t)draft->hp.n_target_layers * target->hp.n_embd;
    d->n_rows_max = GLIM_MAX(session_n_chunk(ts), L);
    d->greedy = sampler_params_is_greedy(&p->sp);
    sampler_rng_seed(&d->rng, p->sp.seed);
    struct kv_cache *tkv = session_kv(ts);
    /* draft context: every target position plus one transient block */
    rc = kv_cache_new(draft, tkv->n_ctx + L, d->n_rows_max, 16, tkv->type, &d->dkv, err);
    if (rc != GLIM_OK)
        goto fail;
    d->dscratch = draft->be->i->alloc(draft->be, dflash_scratch_bytes(draft, d->n_rows_max));
    d->sc = sampler_scratch_new(d->V);
    d->t_logits = glim_calloc((size_t)(L + 1) * d->V, sizeof(float));
    d->taps = draft->be->i->alloc(draft->be, (size_t)d->n_rows_max * d->tap_row * sizeof(float));
    d->d_logits = glim_calloc((size_t)L * d->V, sizeof(float));
    d->probs = glim_calloc((size_t)d->V, sizeof(float));
    d->q = glim_calloc((size_t)L * d->V, sizeof(float));
    if (!d->dscratch || !d->sc || !d->t_logits || !d->taps || !d->d_logits || !d->probs || !d->q) {
        rc = glim_fail(err, GLIM_ENOMEM, "out of memory for the DFlash buffers");
        goto fail;
    }
    *out = d;
    return GLIM_OK;
fail:
    dflash_free(d);
    return rc;
}

void dflash_set_eos(struct dflash *d, dflash_is_eos_fn fn, void *ud) { d->is_eos = fn, d->eos_ud = ud; }
void dflash_set_proposer(struct dflash *d, dflash_propose_fn fn, void *ud)
{
    d->propose = fn, d->propose_ud = ud;
}
const struct dflash_stats *dflash_get_stats(const struct dflash *d) { return &d->st; }

static bool is_eos(const struct dflash *d, int32_t id) { return d->is_eos && d->is_eos(d->eos_ud, id); }

/* Rows whose only use is their argmax are picked by the forward (on the backend where it
 * can: a B = 16 verify then downloads 64 bytes instead of 13 MB of logits) */
static bool picks_target(const struct dflash *d) { return d->greedy && !d->p.logits_on_host; }
static bool picks_draft(const struct dflash *d)
{
    return (d->greedy || d->p.draft_argmax) && !d->p.logits_on_host;
}

/* The target's choice from verify row i (argmax when greedy). */
static int32_t sample_row(struct dflash *d, int i)
{
    const float *logits = d->t_logits + (size_t)i * d->V;
    if (d->greedy)
        return picks_target(d) ? d->t_picks[i] : sampler_argmax(logits, d->V);
    sampler_probs(d->sc, logits, d->V, &d->p.sp, d->probs);
    return sampler_draw_categorical(d->probs, d->V, &d->rng);
}

/* Target forward over tokens at target_pos with taps; then inject the first n_keep rows. */
static int target_rows(struct dflash *d, const int32_t *tokens, int n, int n_logits, struct glim_err *err)
{
    return session_eval_taps_on_backend(d->ts, tokens, n, d->t_logits, picks_target(d) ? d->t_picks : NULL,
                                        n_logits, d->draft->hp.n_target_layers, d->draft->hp.target_layers,
                                        d->taps, err);
}

/* the draft KV has been written up to `end` (exclusive) */
static void dkv_wrote(struct dflash *d, int64_t end)
{
    if (end > d->dkv->pos_hi)
        d->dkv->pos_hi = end;
}

static int inject(struct dflash *d, int n, int64_t pos0, struct glim_err *err)
{
    int rc = dflash_inject(d->draft, d->dkv, d->taps, true, n, (int32_t)pos0, d->dscratch, err);
    if (rc == GLIM_OK) {
        d->dkv->pos = pos0 + n;
        dkv_wrote(d, pos0 + n);
    }
    return rc;
}

int dflash_prefill(struct dflash *d, const int32_t *tokens, int n, struct glim_err *err)
{
    return dflash_prefill_from(d, tokens, n, 0, err);
}

int dflash_prefill_from(struct dflash *d, const int32_t *tokens, int n, int64_t keep, struct glim_err *err)
{
    if (keep < 0 || n <= keep)
        return glim_fail(err, GLIM_EINVAL, "prefill: %d tokens after a kept prefix of %lld", n, (long long)keep);
    int rc = GLIM_OK;
    if (keep == 0)
        rc = glim_session_truncate(d->ts, 0, err);
    else if (glim_session_pos(d->ts) != keep)
        return glim_fail(err, GLIM_EINVAL, "prefill: the target holds %lld tokens, not the kept %lld",
                         (long long)glim_session_pos(d->ts), (long long)keep);
    if (rc == GLIM_OK)   /* GLIM_ERANGE: the context's rings cannot rewind that far */
        rc = kv_cache_truncate(d->dkv, keep, err);
    if (rc != GLIM_OK)
        return rc;
    d->target_pos = keep, d->has_pending = false, d->n_ready = d->ready_at = 0;
    for (int64_t t0 = keep; rc == GLIM_OK && t0 < n; t0 += d->n_rows_max) {
        int c = (int)GLIM_MIN((int64_t)d->n_rows_max, n - t0);
        bool last = t0 + c == n;
        rc = target_rows(d, tokens + t0, c, last ? 1 : 0, err);
        if (rc == GLIM_OK)
            rc = inject(d, c, d->target_pos, err);
        d->target_pos += c;
    }
    if (rc != GLIM_OK)
        return rc;
    d->pending = sample_row(d, 0);
    d->has_pending = true;
    return GLIM_OK;
}

static void record_row(struct dflash *d, int i, bool ok)
{
    if (i >= DFLASH_MAX_BLOCK)
        return;
    d->st.attempts_by_row[i]++;
    d->st.accepts_by_row[i] += ok;
    if (i + 1 > d->st.n_rows)
        d->st.n_rows = i + 1;
}

/* Propose cand[1..n_ver-1] from the draft block (or the test hook). */
static int propose(struct dflash *d, int32_t *cand, int n_ver, struct glim_err *err)
{
    if (d->propose) {
        d->propose(d->propose_ud, d->target_pos, cand, n_ver);
        return GLIM_OK;
    }
    int32_t block[DFLASH_MAX_BLOCK];
    block[0] = cand[0];
    for (int i = 1; i < d->L; i++)
        block[i] = d->draft->hp.mask_token_id;
    double t0 = now_ms();
    int rc = dflash_draft(d->draft, d->dkv, block, d->L, (int32_t)d->target_pos, d->d_logits,
                          picks_draft(d) ? d->d_picks : NULL, d->dscratch, err);
    dkv_wrote(d, d->target_pos + d->L);   /* the block's rows: transient, but they overwrote ring slots */
    double t1 = now_ms();
    d->st.draft_execute_ms += t1 - t0;
    if (rc != GLIM_OK)
        return rc;
    for (int i = 1; i < n_ver; i++) {
        const float *row = d->d_logits + (size_t)i * d->V;
        if (d->greedy || d->p.draft_argmax) {
            cand[i] = picks_draft(d) ? d->d_picks[i] : sampler_argmax(row, d->V);
        } else {
            float *qi = d->q + (size_t)i * d->V;
            sampler_probs(d->sc, row, d->V, &d->p.sp, qi);
            cand[i] = sampler_draw_categorical(qi, d->V, &d->rng);
        }
    }
    d->st.draft_sampling_ms += now_ms() - t1;
    return GLIM_OK;
}

/* Verify cand[0..n_ver-1]; returns the number of committed candidates and the correction. */
static int accept(struct dflash *d, const int32_t *cand, int n_ver, int32_t *corr, struct glim_err *err)
{
    for (int i = 0; i + 1 < n_ver; i++) {
        const float *lt = d->t_logits + (size_t)i * d->V;
        int32_t tok = cand[i + 1];
        bool ok;
        if (d->greedy) {
            int32_t pick = sample_row(d, i);
            ok = pick == tok;
            *corr = pick;
        } else {
            sampler_probs(d->sc, lt, d->V, &d->p.sp, d->probs);
            float qv = d->p.draft_argmax ? 1.0f : d->q[(size_t)(i + 1) * d->V + tok];
            float a = qv > 0 ? fminf(1.0f, d->probs[tok] / qv) : 1.0f;
            ok = sampler_draw_accept(a, &d->rng);
            if (!ok && d->p.draft_argmax) {
                int rc = sampler_draw_exclude(d->probs, d->V, tok, &d->rng, corr, err);
                if (rc != GLIM_OK)
                    return -rc;
            } else if (!ok) {
                *corr = sampler_draw_residual(d->probs, d->q + (size_t)(i + 1) * d->V, d->V, &d->rng);
            }
        }
        record_row(d, i, ok);
        if (!ok)
            return i + 1;
    }
    *corr = sample_row(d, n_ver - 1);   /* bonus token */
    return n_ver;
}

static int target_only_cycle(struct dflash *d, struct glim_err *err)
{
    double t0 = now_ms();
    int rc = target_rows(d, &d->pending, 1, 1, err);
    double t1 = now_ms();
    if (rc == GLIM_OK)
        rc = inject(d, 1, d->target_pos, err);
    if (rc != GLIM_OK)
        return rc;
    d->ready[d->n_ready++] = d->pending;
    d->pending = sample_row(d, 0);
    d->target_pos++;
    d->st.target_only_cycles++;
    d->st.target_execute_ms += t1 - t0;
    d->st.committed++;
    return GLIM_OK;
}

static int run_cycle(struct dflash *d, struct glim_err *err)
{
    double t_start = now_ms();
    int64_t room = glim_session_n_ctx(d->ts) - d->target_pos;
    if (room <= 0)
        return glim_fail(err, GLIM_ERANGE, "context is full (%lld tokens)", (long long)d->target_pos);
    int n_ver = (int)GLIM_MIN((int64_t)d->N + 1, room);
    d->st.cycles++;
    int rc;
    if (n_ver < 2) {
        rc = target_only_cycle(d, err);
        d->st.total_cycle_ms += now_ms() - t_start;
        return rc;
    }
    int32_t cand[DFLASH_MAX_BLOCK + 1];
    cand[0] = d->pending;
    if ((rc = propose(d, cand, n_ver, err)) != GLIM_OK)
        return rc;
    double t0 = now_ms();
    if ((rc = target_rows(d, cand, n_ver, n_ver, err)) != GLIM_OK)
        return rc;
    double t1 = now_ms();
    int32_t corr = -1;
    int commit = accept(d, cand, n_ver, &corr, err);
    if (commit < 0)
        return -commit;
    double t2 = now_ms();
    int k = commit;
    for (int i = 1; i < commit; i++)   /* an end token among the accepted ends the commit there */
        if (is_eos(d, cand[i])) {
            k = i;
            corr = cand[i];
            break;
        }
    /* rewind the target to the committed rows; their taps become draft context */
    rc = glim_session_truncate(d->ts, d->target_pos + k, err);
    if (rc == GLIM_OK)
        rc = inject(d, k, d->target_pos, err);
    if (rc != GLIM_OK)
        return rc;
    memcpy(d->ready + d->n_ready, cand, (size_t)k * sizeof *cand);
    d->n_ready += k;
    d->target_pos += k;
    d->pending = corr;
    d->st.speculative_cycles++;
    d->st.committed += k;
    d->st.target_execute_ms += t1 - t0;
    d->st.accept_correction_ms += t2 - t1;
    double t3 = now_ms();
    d->st.state_commit_ms += t3 - t2;
    d->st.total_cycle_ms += t3 - t_start;
    return GLIM_OK;
}

int dflash_next(struct dflash *d, int32_t *tok, bool *eos, struct glim_err *err)
{
    *eos = false;
    if (d->ready_at == d->n_ready) {
        d->ready_at = d->n_ready = 0;
        if (!d->has_pending)
            return glim_fail(err, GLIM_EINVAL, "dflash: prefill first");
        if (is_eos(d, d->pending)) {
            *tok = d->pending;
            *eos = true;
            d->has_pending = false;
            return GLIM_OK;
        }
        int rc = run_cycle(d, err);
        if (rc != GLIM_OK)
            return rc;
        if (d->n_ready == 0)
            return glim_fail(err, GLIM_EBACKEND, "dflash: a cycle committed nothing");
    }
    *tok = d->ready[d->ready_at++];
    return GLIM_OK;
}

int dflash_reset_to(struct dflash *d, int64_t pos, int32_t pending, uint64_t seed, struct glim_err *err)
{
    if (pos < 1 || pos > d->target_pos + d->n_ready - d->ready_at)
        return glim_fail(err, GLIM_ERANGE, "dflash_reset_to: position %lld not reached", (long long)pos);
    int rc = glim_session_truncate(d->ts, pos, err);
    if (rc != GLIM_OK)
        return rc;
    d->target_pos = pos, d->pending = pending, d->has_pending = true;
    d->n_ready = d->ready_at = 0;
    if (d->dkv->pos > pos)
        d->dkv->pos = pos;
    sampler_rng_seed(&d->rng, seed);
    return GLIM_OK;
}

int dflash_set_sampling(struct dflash *d, const struct sampler_params *sp, struct glim_err *err)
{
    int rc = sampler_params_check(sp, err);
    if (rc != GLIM_OK)
        return rc;
    d->p.sp = *sp;
    d->greedy = sampler_params_is_greedy(sp);
    sampler_rng_seed(&d->rng, sp->seed);
    memset(&d->st, 0, sizeof d->st);
    return GLIM_OK;
}

int64_t dflash_pos(const struct dflash *d) { return d->target_pos; }

const float *dflash_verify_logits(const struct dflash *d, int i) { return d->t_logits + (size_t)i * d->V; }
const float *dflash_draft_logits(const struct dflash *d, int i) { return d->d_logits + (size_t)i * d->V; }

void dflash_stats_add(struct dflash_stats *acc, const struct dflash_stats *c)
{
    acc->cycles += c->cycles, acc->speculative_cycles += c->speculative_cycles;
    acc->target_only_cycles += c->target_only_cycles;
    acc->draft_execute_ms += c->draft_execute_ms, acc->draft_logits_copy_ms += c->draft_logits_copy_ms;
    acc->draft_sampling_ms += c->draft_sampling_ms, acc->target_execute_ms += c->target_execute_ms;
    acc->target_logits_copy_ms += c->target_logits_copy_ms;
    acc->target_hidden_copy_ms += c->target_hidden_copy_ms;
    acc->accept_correction_ms += c->accept_correction_ms, acc->state_commit_ms += c->state_commit_ms;
    acc->total_cycle_ms += c->total_cycle_ms;
    acc->committed += c->committed;
    for (int i = 0; i < c->n_rows && i < DFLASH_MAX_BLOCK; i++) {
        acc->attempts_by_row[i] += c->attempts_by_row[i];
        acc->accepts_by_row[i] += c->accepts_by_row[i];
    }
    if (c->n_rows > acc->n_rows)
        acc->n_rows = c->n_rows;
}

static void print_vec(FILE *f, const int64_t *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, i ? ",%lld" : "%lld", (long long)v[i]);
    fputc(']', f);
}

void dflash_stats_print(const struct dflash_stats *s, FILE *f)
{
    double sc = (double)GLIM_MAX(s->speculative_cycles, 1), cy = (double)GLIM_MAX(s->cycles, 1);
    double parts = s->draft_execute_ms + s->draft_logits_copy_ms + s->draft_sampling_ms +
                   s->target_execute_ms + s->target_logits_copy_ms + s->target_hidden_copy_ms +
                   s->accept_correction_ms + s->state_commit_ms;
    fprintf(f, "DFlashDecodeTiming {\"cycles\":%lld,\"speculative_cycles\":%lld,\"target_only_cycles\":%lld,"
               "\"total_cycle_ms\":%.3f,\"avg_cycle_ms\":%.3f,"
               "\"draft_execute_ms\":%.3f,\"avg_draft_execute_ms\":%.3f,"
               "\"draft_logits_copy_ms\":%.3f,\"avg_draft_logits_copy_ms\":%.3f,"
               "\"draft_sampling_ms\":%.3f,\"avg_draft_sampling_ms\":%.3f,"
               "\"target_execute_ms\":%.3f,\"avg_target_execute_ms\":%.3f,"
               "\"target_logits_copy_ms\":%.3f,\"avg_target_logits_copy_ms\":%.3f,"
               "\"target_hidden_copy_ms\":%.3f,\"avg_target_hidden_copy_ms\":%.3f,"
               "\"accept_correction_ms\":%.3f,\"avg_accept_correction_ms\":%.3f,"
               "\"state_commit_ms\":%.3f,\"avg_state_commit_ms\":%.3f,\"accounted_percent\":%.1f,"
               "\"draft_attempts_by_row\":",
            (long long)s->cycles, (long long)s->speculative_cycles, (long long)s->target_only_cycles,
            s->total_cycle_ms, s->total_cycle_ms / cy, s->draft_execute_ms, s->draft_execute_ms / sc,
            s->draft_logits_copy_ms, s->draft_logits_copy_ms / sc, s->draft_sampling_ms,
            s->draft_sampling_ms / sc, s->target_execute_ms, s->target_execute_ms / cy,
            s->target_logits_copy_ms, s->target_logits_copy_ms / cy, s->target_hidden_copy_ms,
            s->target_hidden_copy_ms / cy, s->accept_correction_ms, s->accept_correction_ms / cy,
            s->state_commit_ms, s->state_commit_ms / cy,
            s->total_cycle_ms > 0 ? 100.0 * parts / s->total_cycle_ms : 0.0);
    print_vec(f, s->attempts_by_row, s->n_rows);
    fputs(",\"draft_accepts_by_row\":", f);
    print_vec(f, s->accepts_by_row, s->n_rows);
    fputs("}\n", f);
}
