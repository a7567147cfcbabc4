/*
 * sampler.c — greedy / temperature / top-k / top-p / min-p sampling with
 * llama.cpp-style penalties and the MT19937 stream of runtime.md §2.4.
 *
 * DESIGN. probs() follows §2.2 to the letter (float32 weights, double sums,
 * division by float(S)) so DFlash's accept/reject maths sees exactly the
 * distribution plain sampling draws from. Sorting the whole vocabulary for
 * top-p would cost O(V log V) per token, so the nucleus is walked in sorted
 * chunks of growing size taken with quickselect: O(V) on average, and the
 * order (logit desc, id asc) is a strict total order so chunks never
 * disagree with a full sort.
 */
#include "runtime/sampler.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"

/* ---- parameters ----------------------------------------------------------- */

void sampler_params_init(struct sampler_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = -1.0f;   /* §2.1: unset = greedy */
    p->top_p = 1.0f;
    p->repeat_penalty = 1.0f;
}

int sampler_params_check(const struct sampler_params *p, struct glim_err *err)
{
    if (!(p->temperature == -1.0f || (p->temperature >= 0.0f && p->temperature <= 2.0f)))
        return glim_fail(err, GLIM_EINVAL, "temperature: expected -1 or 0..2, got %g",
                         (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return glim_fail(err, GLIM_EINVAL, "top_p: expected (0, 1], got %g", (double)p->top_p);
    if (p->top_k < 0)
        return glim_fail(err, GLIM_EINVAL, "top_k: expected >= 0, got %d", p->top_k);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return glim_fail(err, GLIM_EINVAL, "min_p: expected [0, 1], got %g", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return glim_fail(err, GLIM_EINVAL, "repeat_penalty: expected > 0, got %g",
                         (double)p->repeat_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return glim_fail(err, GLIM_EINVAL, "presence/frequency penalty: expected finite numbers");
    if (p->penalty_last_n < 0 || p->penalty_last_n > (1 << 20))
        return glim_fail(err, GLIM_EINVAL, "penalty_last_n: expected 0..1048576, got %d",
                         p->penalty_last_n);
    return GLIM_OK;
}

bool sampler_params_is_greedy(const struct sampler_params *p)
{
    return !(p->temperature > 0.0f);   /* -1 and 0 both mean argmax (§1.10) */
}

bool sampler_params_is_plain_greedy(const struct sampler_params *p)
{
    bool no_penalty = p->penalty_last_n == 0 ||
                      (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f);
    return sampler_params_is_greedy(p) && no_penalty;
}

/* ---- RNG: MT19937 + std::seed_seq ----------------------------------------- */

/* std::seed_seq::generate over 624 words ([rand.util.seedseq]), so a seed
 * gives the same stream as std::mt19937(std::seed_seq{lo, hi}). */
static void seed_seq_generate(const uint32_t *v, uint32_t s, uint32_t *b, uint32_t n)
{
    const uint32_t t = 11, p = (n - t) / 2, q = p + t, m = n;   /* n = 624 >= 623 */
    for (uint32_t i = 0; i < n; i++)
        b[i] = 0x8b8b8b8bu;
    for (uint32_t k = 0; k < m; k++) {
        uint32_t x = b[k % n] ^ b[(k + p) % n] ^ b[(k + n - 1) % n];
        uint32_t r1 = 1664525u * (x ^ (x >> 27));
        uint32_t r2 = r1 + (k == 0 ? s : k <= s ? k % n + v[k - 1] : k % n);
        b[(k + p) % n] += r1;
        b[(k + q) % n] += r2;
        b[k % n] = r2;
    }
    for (uint32_t k = m; k < m + n; k++) {
        uint32_t x = b[k % n] + b[(k + p) % n] + b[(k + n - 1) % n];
        uint32_t r3 = 1566083941u * (x ^ (x >> 27));
        uint32_t r4 = r3 - k % n;
        b[(k + p) % n] ^= r3;
        b[(k + q) % n] ^= r4;
        b[k % n] = r4;
    }
}

static uint64_t entropy_seed(void)
{
    uint64_t x = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&x, sizeof x, 1, f) != 1)
            x = 0;
        fclose(f);
    }
    if (x == 0) {   /* no urandom: time and an address still differ per call */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
    }
    return x ? x : 1;
}

void sampler_rng_seed(struct sampler_rng *r, uint64_t seed)
{
    if (seed == 0)
        seed = entropy_seed();
    const uint32_t v[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    seed_seq_generate(v, 2, r->mt, 624);
    /* mersenne_twister_engine::seed(Sseq&): an all-zero state is replaced */
    bool is_zero = (r->mt[0] & 0x80000000u) == 0;
    for (int i = 1; i < 624 && is_zero; i++)
        is_zero = r->mt[i] == 0;
    if (is_zero)
        r->mt[0] = 0x80000000u;
    r->idx = 624;
    r->n_draws = 0;
}

static void mt_twist(uint32_t *mt)
{
    for (int i = 0; i < 624; i++) {
        uint32_t y = (mt[i] & 0x80000000u) | (mt[(i + 1) % 624] & 0x7fffffffu);
        mt[i] = mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
}

uint32_t sampler_rng_u32(struct sampler_rng *r)
{
    if (r->idx >= 624) {
        mt_twist(r->mt);
        r->idx = 0;
    }
    uint32_t y = r->mt[r->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* libstdc++ generate_canonical<float, 24> on a 32-bit engine (§2.4). */
float sampler_rng_uniform(struct sampler_rng *r)
{
    float u = (float)sampler_rng_u32(r) / 4294967296.0f;
    r->n_draws++;
    return u >= 1.0f ? nextafterf(1.0f, 0.0f) : u;
}

/* ---- ordering ------------------------------------------------------------- */

/* NaN logits sort last (sampler_key) so a broken row cannot corrupt the selection.
 * true if token a comes before token b: logit desc, then id asc. */
static inline bool before(const float *lg, int32_t a, int32_t b)
{
    float ka = sampler_key(lg[a]), kb = sampler_key(lg[b]);
    return ka > kb || (ka == kb && a < b);
}

static inline void swap_i32(int32_t *a, int32_t *b) { int32_t t = *a; *a = *b; *b = t; }

/* Lomuto partition of idx[0..n) around a median-of-three pivot; returns its
 * final slot. Elements before it come first in the token order. */
static int32_t partition(const float *lg, int32_t *idx, int32_t n)
{
    int32_t mid = n / 2, last = n - 1;
    if (before(lg, idx[mid], idx[0])) swap_i32(&idx[mid], &idx[0]);
    if (before(lg, idx[last], idx[0])) swap_i32(&idx[last], &idx[0]);
    if (before(lg, idx[mid], idx[last])) swap_i32(&idx[mid], &idx[last]);
    int32_t pivot = idx[last], store = 0;   /* idx[last] is now the median */
    for (int32_t i = 0; i < last; i++)
        if (before(lg, idx[i], pivot))
            swap_i32(&idx[i], &idx[store++]);
    swap_i32(&idx[store], &idx[last]);
    return store;
}

/* Rearrange idx[0..n) so its first k entries are the k first tokens (any order). */
static void select_top(const float *lg, int32_t *idx, int32_t n, int32_t k)
{
    while (n > 1 && k > 0 && k < n) {
        int32_t p = partition(lg, idx, n);
        if (p == k || p == k - 1)
            return;
        if (p > k) {
            n = p;
        } else {
            idx += p + 1;
            n -= p + 1;
            k -= p + 1;
        }
    }
}

static void sort_tokens(const float *lg, int32_t *idx, int32_t n)
{
    while (n > 16) {
        int32_t p = partition(lg, idx, n);
        /* recurse on the smaller side to bound the stack */
        if (p < n - p - 1) {
            sort_tokens(lg, idx, p);
            idx += p + 1;
            n -= p + 1;
        } else {
            sort_tokens(lg, idx + p + 1, n - p - 1);
            n = p;
        }
    }
    for (int32_t i = 1; i < n; i++)
        for (int32_t j = i; j > 0 && before(lg, idx[j], idx[j - 1]); j--)
            swap_i32(&idx[j], &idx[j - 1]);
}

/* ---- probability construction (§2.2) -------------------------------------- */

struct sampler_scratch {
    int32_t  n_vocab;
    int32_t *idx;     /* owned: [n_vocab] token ids being ordered */
};

struct sampler_scratch *sampler_scratch_new(int32_t n_vocab)
{
    if (n_vocab <= 0)
        return NULL;
    struct sampler_scratch *sc = glim_calloc(1, sizeof *sc);
    if (!sc)
        return NULL;
    sc->n_vocab = n_vocab;
    sc->idx = glim_calloc((size_t)n_vocab, sizeof *sc->idx);
    if (!sc->idx) {
        glim_free(sc);
        return NULL;
    }
    return sc;
}

void sampler_scratch_free(struct sampler_scratch *sc)
{
    if (!sc)
        return;
    glim_free(sc->idx);
    glim_free(sc);
}

/* Walk idx in token order, growing a sorted prefix chunk by chunk, until the
 * running sum R reaches target; the crossing token is kept (§2.2). Returns
 * how many tokens are kept; *R_out = their weight sum. */
static int32_t nucleus(const float *lg, const float *w, int32_t *idx, int32_t n,
                       bool is_sorted, double target, double *R_out)
{
    double R = 0.0;
    int32_t done = 0, chunk = 256;
    while (done < n) {
        int32_t len = GLIM_MIN(chunk, n - done);
        if (!is_sorted) {
            select_top(lg, idx + done, n - done, len);
            sort_tokens(lg, idx + done, len);
        }
        for (int32_t j = done; j < done + len; j++) {
            R += w[idx[j]];
            if (R >= target) {
                *R_out = R;
                return j + 1;
            }
        }
        done += len;
        chunk *= 2;
    }
    *R_out = R;
    return n;   /* rounding kept R just under target: keep everything */
}

/* llama.cpp min-p: drop kept tokens whose logit is below max + log(min_p)
 * (temperature-independent), then renormalize what is left. */
static void apply_min_p(const float *lg, float max, float min_p, float *p, int32_t n)
{
    float floor_logit = max + logf(min_p);
    double S = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] > 0.0f && sampler_key(lg[i]) < floor_logit)
            p[i] = 0.0f;
        S += p[i];
    }
    if (!(S > 0.0))
        return;   /* the max token always survives, so only NaN rows get here */
    for (int32_t i = 0; i < n; i++)
        p[i] = p[i] / (float)S;
}

void sampler_probs(struct sampler_scratch *sc, const float *lg, int32_t V,
                   const struct sampler_params *par, float *p)
{
    GLIM_ASSERT(sc && sc->n_vocab == V && par->temperature > 0.0f);
    const float T = par->temperature;
    const bool use_k = par->top_k > 0 && par->top_k < V;
    const bool use_p = par->top_p > 0.0f && par->top_p < 1.0f;
    int32_t *idx = sc->idx;
    float max = sampler_key(lg[sampler_argmax(lg, V)]);

    int32_t n_kept = V;
    for (int32_t i = 0; i < V; i++)
        idx[i] = i;
    if (use_k) {
        select_top(lg, idx, V, par->top_k);
        n_kept = par->top_k;
        memset(p, 0, (size_t)V * sizeof *p);
    }
    double S = 0.0;
    for (int32_t j = 0; j < n_kept; j++) {
        int32_t i = idx[j];
        p[i] = expf((sampler_key(lg[i]) - max) / T);   /* w, float32 per element */
        S += p[i];
    }
    if (use_p) {
        if (use_k)
            sort_tokens(lg, idx, n_kept);
        double R = 0.0;
        int32_t n_nuc = nucleus(lg, p, idx, n_kept, use_k, (double)par->top_p * S, &R);
        for (int32_t j = n_nuc; j < n_kept; j++)
            p[idx[j]] = 0.0f;
        for (int32_t j = 0; j < n_nuc; j++)
            p[idx[j]] = p[idx[j]] / (float)R;
    } else {
        for (int32_t j = 0; j < n_kept; j++)
            p[idx[j]] = p[idx[j]] / (float)S;
    }
    if (par->min_p > 0.0f)
        apply_min_p(lg, max, par->min_p, p, V);
}

/* ---- draw primitives (§2.3): one uniform each ----------------------------- */

int32_t sampler_draw_categorical(const float *p, int32_t n, struct sampler_rng *r)
{
    float u = sampler_rng_uniform(r), c = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        c += p[i];
        if (c >= u && p[i] > 0.0f)
            return i;
    }
    /* rounding left the sum below u: the last token with mass, as if it
     * took the remainder (a zero-probability token is never returned) */
    for (int32_t i = n - 1; i >= 0; i--)
        if (p[i] > 0.0f)
            return i;
    return n > 0 ? n - 1 : 0;
}

bool sampler_draw_accept(float a, struct sampler_rng *r)
{
    return sampler_rng_uniform(r) < a;
}

int sampler_draw_exclude(float *p, int32_t n, int32_t tok, struct sampler_rng *r,
                         int32_t *out, struct glim_err *err)
{
    float u = sampler_rng_uniform(r);   /* consumed even when we then fail */
    if (tok >= 0 && tok < n)
        p[tok] = 0.0f;
    double S = 0.0;
    for (int32_t i = 0; i < n; i++)
        S += p[i];
    if (!(S > 0.0))
        return glim_fail(err, GLIM_EINVAL, "exclude: no probability mass left after removing token %d", tok);
    float c = 0.0f;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        p[i] = p[i] / (float)S;
        if (p[i] == 0.0f)
            continue;
        last = i;
        c += p[i];
        if (u < c) {
            for (int32_t j = i + 1; j < n; j++)   /* finish the renormalization */
                p[j] = p[j] / (float)S;
            *out = i;
            return GLIM_OK;
        }
    }
    *out = last;
    return GLIM_OK;
}

int32_t sampler_draw_residual(float *p, const float *q, int32_t n, struct sampler_rng *r)
{
    double S = 0.0;
    for (int32_t i = 0; i < n; i++)
        S += p[i] > q[i] ? p[i] - q[i] : 0.0f;
    if (S > 0.0)
        for (int32_t i = 0; i < n; i++)
            p[i] = (p[i] > q[i] ? p[i] - q[i] : 0.0f) / (float)S;
    return sampler_draw_categorical(p, n, r);
}

/* ---- the sampler ---------------------------------------------------------- */

struct sampler {
    struct sampler_params   par;
    int32_t                 n_vocab;
    struct sampler_rng      rng;
    struct sampler_scratch *sc;     /* owned */
    float                  *lg;     /* owned: [n_vocab] penalized logits */
    float                  *p;      /* owned: [n_vocab] last distribution */
    int32_t                *count;  /* owned: [n_vocab] occurrences in the window */
    uint32_t               *stamp;  /* owned: [n_vocab] "penalized this step" marks */
    uint32_t                gen;
    int32_t                *ring;   /* owned: [penalty_last_n] accepted tokens */
    int32_t                 n_hist, head;
};

int sampler_new(const struct sampler_params *p, int32_t n_vocab, struct sampler **out,
                struct glim_err *err)
{
    int rc = sampler_params_check(p, err);
    if (rc)
        return rc;
    if (n_vocab <= 0)
        return glim_fail(err, GLIM_EINVAL, "sampler: n_vocab must be positive, got %d", n_vocab);
    struct sampler *s = glim_calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->par = *p;
    s->n_vocab = n_vocab;
    size_t V = (size_t)n_vocab;
    s->sc = sampler_scratch_new(n_vocab);
    s->lg = glim_calloc(V, sizeof *s->lg);
    s->p = glim_calloc(V, sizeof *s->p);
    s->count = glim_calloc(V, sizeof *s->count);
    s->stamp = glim_calloc(V, sizeof *s->stamp);
    s->ring = glim_calloc((size_t)GLIM_MAX(p->penalty_last_n, 1), sizeof *s->ring);
    if (!s->sc || !s->lg || !s->p || !s->count || !s->stamp || !s->ring)
        goto oom;
    sampler_reset(s);
    *out = s;
    return GLIM_OK;
oom:
    sampler_free(s);
    return glim_fail(err, GLIM_ENOMEM, "sampler: out of memory for n_vocab %d", n_vocab);
}

void sampler_free(struct sampler *s)
{
    if (!s)
        return;
    sampler_scratch_free(s->sc);
    glim_free(s->lg);
    glim_free(s->p);
    glim_free(s->count);
    glim_free(s->stamp);
    glim_free(s->ring);
    glim_free(s);
}

void sampler_reset(struct sampler *s)
{
    memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    s->n_hist = s->head = 0;
    sampler_rng_seed(&s->rng, s->par.seed);
}

void sampler_accept(struct sampler *s, int32_t id)
{
    int32_t cap = s->par.penalty_last_n;
    if (cap <= 0 || id < 0 || id >= s->n_vocab)
        return;
    if (s->n_hist == cap) {   /* window full: the oldest token leaves */
        s->count[s->ring[s->head]]--;
        s->n_hist--;
    }
    s->ring[s->head] = id;
    s->head = (s->head + 1) % cap;
    s->n_hist++;
    s->count[id]++;
}

static bool has_penalties(const struct sampler_params *p)
{
    return p->penalty_last_n > 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

/* llama.cpp semantics, once per distinct token in the window. */
static const float *penalize(struct sampler *s, const float *logits)
{
    if (!has_penalties(&s->par) || s->n_hist == 0)
        return logits;
    memcpy(s->lg, logits, (size_t)s->n_vocab * sizeof *s->lg);
    if (++s->gen == 0) {   /* wrapped: old marks could look current */
        memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
        s->gen = 1;
    }
    int32_t cap = s->par.penalty_last_n;
    for (int32_t k = 0; k < s->n_hist; k++) {
        int32_t t = s->ring[(s->head - 1 - k + 2 * cap) % cap];
        if (s->stamp[t] == s->gen)
            continue;
        s->stamp[t] = s->gen;
        float x = s->lg[t], rp = s->par.repeat_penalty;
        x = x > 0.0f ? x / rp : x * rp;
        x -= (float)s->count[t] * s->par.frequency_penalty + s->par.presence_penalty;
        s->lg[t] = x;
    }
    return s->lg;
}

int sampler_sample(struct sampler *s, const float *logits, int32_t n_vocab, int32_t *out_id,
                   struct glim_err *err)
{
    if (n_vocab != s->n_vocab)
        return glim_fail(err, GLIM_EINVAL, "sampler: logits have %d entries, sampler was built for %d",
                         n_vocab, s->n_vocab);
    const float *lg = penalize(s, logits);
    if (sampler_params_is_greedy(&s->par)) {
        *out_id = sampler_argmax(lg, n_vocab);
        return GLIM_OK;
    }
    sampler_probs(s->sc, lg, n_vocab, &s->par, s->p);
    *out_id = sampler_draw_categorical(s->p, n_vocab, &s->rng);
    return GLIM_OK;
}

struct sampler_rng *sampler_rng_of(struct sampler *s) { return &s->rng; }
const float *sampler_last_probs(const struct sampler *s) { return s->p; }
