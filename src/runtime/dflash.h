/*
 * dflash.h — DFlash speculative decoding (runtime.md §1.7–1.12): a draft
 * model proposes a block of tokens from the target's hidden states, one
 * target forward verifies them, and greedy matching or rejection sampling
 * keeps the output distributed exactly as plain decoding. Lossless: at
 * temperature 0 the tokens equal plain greedy decoding.
 *
 * One struct dflash drives one target session. Owner thread only.
 */
#ifndef GLIM_DFLASH_H
#define GLIM_DFLASH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/model.h"
#include "sampler.h"

#define DFLASH_MAX_BLOCK 64

struct dflash_params {
    int  block_length;           /* L: 2..draft block_size; 0 = block_size */
    int  n_draft;                /* N: 1..L-1 drafts verified per cycle; 0 = L-1 */
    bool draft_argmax;           /* proposals are the draft's argmax (default true) */
    bool logits_on_host;         /* every row's logits come to the host (dflash_*_logits, tests);
                                  * default false: rows only picked from are picked on the backend
                                  * where it can, and their logits stay there */
    struct sampler_params sp;    /* temperature, top_k, top_p, min_p, seed */
};

/* Accumulated cycle statistics (runtime.md §1.12). */
struct dflash_stats {
    int64_t cycles, speculative_cycles, target_only_cycles;
    double  draft_execute_ms, draft_logits_copy_ms, draft_sampling_ms, target_execute_ms,
            target_logits_copy_ms, target_hidden_copy_ms, accept_correction_ms, state_commit_ms,
            total_cycle_ms;
    int     n_rows;                                   /* length of the two vectors */
    int64_t attempts_by_row[DFLASH_MAX_BLOCK], accepts_by_row[DFLASH_MAX_BLOCK];
    int64_t committed;                                /* tokens committed by cycles */
};

struct dflash;

void dflash_params_init(struct dflash_params *p);
/* target session ts is borrowed and must be empty (position 0) or be reset by prefill. */
int  dflash_new(struct glim_model *target, struct glim_model *draft, struct glim_session *ts,
                const struct dflash_params *p, struct dflash **out, struct glim_err *err);
void dflash_free(struct dflash *d);

/* End-of-generation test (default: none; then generation only stops on count). */
typedef bool (*dflash_is_eos_fn)(void *ud, int32_t id);
void dflash_set_eos(struct dflash *d, dflash_is_eos_fn fn, void *ud);

/* Test hook: replace the draft model's proposals. cand[0] is the anchor;
 * fill cand[1..n-1] with the proposed tokens for positions pos+1.. */
typedef void (*dflash_propose_fn)(void *ud, int64_t pos, int32_t *cand, int n);
void dflash_set_proposer(struct dflash *d, dflash_propose_fn fn, void *ud);

/* Run the prompt through the target (and the draft's context), sample the first token. */
int  dflash_prefill(struct dflash *d, const int32_t *tokens, int n, struct glim_err *err);
/* The same when tokens[0..keep) are already in place: the target session holds exactly
 * those keep tokens and the draft context rows below keep were computed for them (an
 * earlier prefill/generation of this struct). Only tokens[keep..n) run (n > keep).
 * GLIM_ERANGE: the draft context's sliding-window rings cannot rewind to keep (nothing
 * changed: prefill from 0 instead). */
int  dflash_prefill_from(struct dflash *d, const int32_t *tokens, int n, int64_t keep, struct glim_err *err);
/* A new request on the same target session: its sampling parameters, the RNG seeded
 * with sp->seed, statistics zeroed (block length and drafts stay). */
int  dflash_set_sampling(struct dflash *d, const struct sampler_params *sp, struct glim_err *err);
/* Tokens committed to the target (and the draft context): rows [0, pos) are valid. */
int64_t dflash_pos(const struct dflash *d);
/* Next generated token; *is_eos when it is an end token (generation is over). */
int  dflash_next(struct dflash *d, int32_t *tok, bool *is_eos, struct glim_err *err);

/* Tests: state to (pos, pending) after a prefill that reached at least pos, with the
 * RNG re-seeded; the target rows and draft context below pos are kept. */
int  dflash_reset_to(struct dflash *d, int64_t pos, int32_t pending, uint64_t seed, struct glim_err *err);
/* Tests: logits row i of the last target verify (i < rows verified) */
const float *dflash_verify_logits(const struct dflash *d, int i);
/* Tests: logits row i (< block length) of the last draft block */
const float *dflash_draft_logits(const struct dflash *d, int i);

const struct dflash_stats *dflash_get_stats(const struct dflash *d);
/* the `DFlashDecodeTiming {json}` line of runtime.md §1.12 */
void dflash_stats_print(const struct dflash_stats *st, FILE *f);
/* merge another cycle record into an accumulator (§1.12 test vector) */
void dflash_stats_add(struct dflash_stats *acc, const struct dflash_stats *cycle);

#endif
