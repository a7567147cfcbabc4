/*
 * sampler.h — next-token sampling (spec: ../shared/spec/runtime.md §2).
 *
 * Two layers:
 *   - primitives that DFlash's rejection sampler also uses (§1.10, §2.2, §2.3):
 *     sampler_probs() builds the filtered distribution, sampler_draw_*()
 *     consume exactly one uniform draw each from a struct sampler_rng;
 *   - struct sampler: penalties + probs + draw for plain decoding, with all
 *     scratch preallocated for n_vocab so sampling a token never allocates.
 *
 * Ordering everywhere: logit descending, ties to the smaller token id.
 * Thread: a sampler belongs to the thread that owns its session.
 */
#ifndef GLIM_SAMPLER_H
#define GLIM_SAMPLER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct sampler_params {
    float    temperature;       /* -1 or [0, 2]; <= 0 means greedy (argmax) */
    int32_t  top_k;             /* 0 = off */
    float    top_p;             /* (0, 1]; 1 = off */
    float    min_p;             /* [0, 1]; 0 = off (llama.cpp: keep logit >= max + log(min_p)) */
    float    repeat_penalty;    /* > 0; 1 = off (divides positive logits, multiplies negative) */
    float    presence_penalty;  /* subtracted once from every token seen in the window */
    float    frequency_penalty; /* subtracted per occurrence in the window */
    int32_t  penalty_last_n;    /* window of accepted tokens the penalties look at; 0 = off */
    uint64_t seed;              /* 0 = fresh randomness; else reproducible stream */
};

/* MT19937 seeded like std::mt19937(std::seed_seq{lo32, hi32}) (§2.4). */
struct sampler_rng {
    uint32_t mt[624];
    int      idx;
    uint64_t n_draws;           /* uniforms consumed so far (tests, DFlash stats) */
};

void     sampler_params_init(struct sampler_params *p);          /* spec defaults: greedy */
int      sampler_params_check(const struct sampler_params *p, struct glim_err *err);
bool     sampler_params_is_greedy(const struct sampler_params *p);
/* greedy and no penalty changes a logit: the pick is the plain argmax (glim_session_greedy) */
bool     sampler_params_is_plain_greedy(const struct sampler_params *p);

void     sampler_rng_seed(struct sampler_rng *r, uint64_t seed);  /* 0 = from entropy */
uint32_t sampler_rng_u32(struct sampler_rng *r);                  /* raw MT output */
float    sampler_rng_uniform(struct sampler_rng *r);              /* [0,1), one draw */

/* A logit's key in the token order: NaN counts as -inf */
static inline float sampler_key(float x) { return x != x ? -INFINITY : x; }

/* First maximal index by sampler_key (lowest id wins ties). n > 0. */
int32_t sampler_argmax(const float *x, int32_t n);

/* ---- DFlash-shared primitives (§2.2, §2.3) ------------------------------ */

struct sampler_scratch;   /* index buffers for one vocabulary size */
struct sampler_scratch *sampler_scratch_new(int32_t n_vocab);
void sampler_scratch_free(struct sampler_scratch *sc);

/* probs(logits; T, top_k, top_p, min_p) into p[n_vocab] (zeros for dropped
 * tokens). Requires temperature > 0; n_vocab must equal the scratch size. */
void sampler_probs(struct sampler_scratch *sc,
                   const float *logits,               /* [n_vocab] */
                   int32_t n_vocab,
                   const struct sampler_params *par,  /* temperature, top_k, top_p, min_p */
                   float *p);                         /* OUT: [n_vocab] */

int32_t sampler_draw_categorical(const float *p, int32_t n, struct sampler_rng *r);
bool    sampler_draw_accept(float a, struct sampler_rng *r);
/* Zeroes p[tok], renormalizes in place, draws. GLIM_EINVAL if nothing is left. */
int     sampler_draw_exclude(float *p, int32_t n, int32_t tok, struct sampler_rng *r,
                             int32_t *out, struct glim_err *err);
/* p := normalize(max(0, p - q)) (or p unchanged if that is all zero), then draw. */
int32_t sampler_draw_residual(float *p, const float *q, int32_t n, struct sampler_rng *r);

/* ---- plain decoding ------------------------------------------------------- */

struct sampler;

int  sampler_new(const struct sampler_params *p, int32_t n_vocab,
                 struct sampler **out,                /* OUT: untouched on failure */
                 struct glim_err *err);
void sampler_free(struct sampler *s);

/* Forget the penalty history and re-seed the RNG from params.seed. */
void sampler_reset(struct sampler *s);

/* Pick the next token from logits[n_vocab] (not modified). Applies the
 * penalties over the last penalty_last_n accepted tokens, then argmax
 * (greedy) or probs + one categorical draw. Does not accept the token. */
int sampler_sample(struct sampler *s, const float *logits, int32_t n_vocab,
                   int32_t *out_id, struct glim_err *err);

/* Record a token (prompt or generated) in the penalty history. */
void sampler_accept(struct sampler *s, int32_t id);

struct sampler_rng *sampler_rng_of(struct sampler *s);
const float *sampler_last_probs(const struct sampler *s);   /* after a non-greedy sample */

#endif
