/* test_sampler.c — runtime.md §2.6 vectors, a full-sort reference for
 * probs(), MT19937 known answers, and statistical properties with fixed seeds. */
#include <string.h>

#include "base/alloc.h"
#include "harness.h"
#include "runtime/sampler.h"

static struct sampler_params params(float T, int32_t k, float p)
{
    struct sampler_params sp;
    sampler_params_init(&sp);
    sp.temperature = T;
    sp.top_k = k;
    sp.top_p = p;
    return sp;
}

/* probs() through a fresh scratch; p must hold n floats */
static void probs(const float *lg, int32_t n, float T, int32_t k, float top_p, float *p)
{
    struct sampler_scratch *sc = sampler_scratch_new(n);
    struct sampler_params sp = params(T, k, top_p);
    sampler_probs(sc, lg, n, &sp, p);
    sampler_scratch_free(sc);
}

static void check_vec(const float *got, const double *want, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        CHECK_NEAR(got[i], want[i], 1e-6);
        sum += got[i];
    }
    CHECK_NEAR(sum, 1.0, 1e-6);
}

/* ---- full-sort reference, written straight from §2.2 ---- */
static const float *g_ref_lg;
static int cmp_ref(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_ref_lg[x] != g_ref_lg[y])
        return g_ref_lg[x] > g_ref_lg[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

static void probs_ref(const float *lg, int32_t V, float T, int32_t k, float top_p, float *p)
{
    int32_t order[512];
    for (int32_t i = 0; i < V; i++)
        order[i] = i;
    g_ref_lg = lg;
    qsort(order, (size_t)V, sizeof order[0], cmp_ref);
    int32_t n = (k > 0 && k < V) ? k : V;
    float max = lg[order[0]];
    double S = 0;
    memset(p, 0, (size_t)V * sizeof *p);
    for (int32_t j = 0; j < n; j++) {
        p[order[j]] = expf((lg[order[j]] - max) / T);
        S += p[order[j]];
    }
    double R = S;
    if (top_p > 0 && top_p < 1) {
        R = 0;
        int32_t j = 0;
        for (; j < n; j++) {
            R += p[order[j]];
            if (R >= (double)top_p * S) { j++; break; }
        }
        for (; j < n; j++)
            p[order[j]] = 0;
    }
    for (int32_t i = 0; i < V; i++)
        p[i] = p[i] / (float)R;
}

static void check_against_ref(const float *lg, int32_t V, float T, int32_t k, float tp)
{
    float got[512], want[512];
    probs(lg, V, T, k, tp, got);
    probs_ref(lg, V, T, k, tp, want);
    int bad_zero = 0, bad_val = 0;
    double sum = 0;
    for (int32_t i = 0; i < V; i++) {
        bad_zero += (got[i] == 0) != (want[i] == 0);
        bad_val += fabs((double)got[i] - want[i]) > 1e-6;
        sum += got[i];
    }
    CHECK_EQ(bad_zero, 0);
    CHECK_EQ(bad_val, 0);
    CHECK_NEAR(sum, 1.0, 1e-6);
}

/* ---- §2.6 vectors ---- */

static void test_argmax(void)
{
    const float a[] = { -4, 3, 1, 3, 2, 3, 0 };
    CHECK_EQ(sampler_argmax(a, 7), 1);
    const float b[] = { -9, -4, -7, -8, -5 };
    CHECK_EQ(sampler_argmax(b, 5), 1);
    CHECK_EQ(b[sampler_argmax(b, 5)], -4);
}

/* sampler_argmax's vector passes against the token order spelled out (NaN's key is -inf, the
 * lowest id among equal keys), over every length up to 70 (the 16-wide loop's tails) and a 30B
 * vocabulary row, with NaN, +-inf, +-0 and ties sprinkled in */
static int32_t argmax_ref(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        float ka = x[i] != x[i] ? -INFINITY : x[i], kb = x[best] != x[best] ? -INFINITY : x[best];
        if (ka > kb)
            best = i;
    }
    return best;
}

static void test_argmax_vector(void)
{
    static float x[202048];
    const float special[] = { NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f };
    uint64_t st = 7;
    int bad = 0, runs = 0;
    for (int32_t n = 1; n <= 202048; n = n < 70 ? n + 1 : n == 70 ? 202048 - 3 : n + 1) {
        for (int rep = 0; rep < 24; rep++, runs++) {
            int mode = rep % 6;   /* 0: random, 1: specials, 2: all NaN, 3: all -inf, 4: zeros, 5: ties */
            for (int32_t i = 0; i < n; i++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                uint32_t r = (uint32_t)(st >> 33);
                float v = (float)(r % 2001) / 100.0f - 10.0f;
                if (mode == 1 && r % 5 == 0)
                    v = special[(r >> 8) % 7];
                else if (mode == 2)
                    v = NAN;
                else if (mode == 3)
                    v = (r & 1) ? -INFINITY : NAN;
                else if (mode == 4)
                    v = (r & 1) ? 0.0f : -0.0f;
                else if (mode == 5)
                    v = (float)(r % 3);
                x[i] = v;
            }
            bad += sampler_argmax(x, n) != argmax_ref(x, n);
        }
    }
    CHECK_EQ(bad, 0);
    CHECK(runs > 1000);
}

static void test_normalize(void)
{
    /* exclude() with an out-of-range token is plain normalization */
    float p[] = { 1, 2, 3, 4, 5 };
    struct sampler_rng r;
    sampler_rng_seed(&r, 1);
    int32_t t = -1;
    CHECK_EQ(sampler_draw_exclude(p, 5, -1, &r, &t, NULL), GLIM_OK);
    const double want[] = { 1 / 15., 2 / 15., 3 / 15., 4 / 15., 5 / 15. };
    check_vec(p, want, 5);
}

static void test_softmax_topk_topp(void)
{
    float p[4];
    const float a[] = { 0, 1, 2 };
    double z = 1 + exp(1) + exp(2);
    probs(a, 3, 1, 0, 1, p);
    check_vec(p, (const double[]){ 1 / z, exp(1) / z, exp(2) / z }, 3);

    const float b[] = { 0, 3, 1, 2 };
    double e = exp(3) + exp(2);
    probs(b, 4, 1, 2, 1, p);
    check_vec(p, (const double[]){ 0, exp(3) / e, 0, exp(2) / e }, 4);

    const float c[] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
    probs(c, 4, 1, 0, 0.75f, p);
    check_vec(p, (const double[]){ 0.625, 0.375, 0, 0 }, 4);

    const float d[] = { -0.0f, 0.0f, 0.0f };
    probs(d, 3, 1, 0, 0.5f, p);
    check_vec(p, (const double[]){ 0.5, 0.5, 0 }, 3);

    const float e2[] = { logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f) };
    probs(e2, 4, 1, 3, 0.6f, p);
    check_vec(p, (const double[]){ 4 / 7., 3 / 7., 0, 0 }, 4);

    const float f[] = { 1, 1, 1, 0 };
    probs(f, 4, 1, 2, 1, p);
    check_vec(p, (const double[]){ 0.5, 0.5, 0, 0 }, 4);
}

static void test_draws(void)
{
    struct sampler_rng r;
    sampler_rng_seed(&r, 42);
    CHECK(!sampler_draw_accept(0.0f, &r));
    CHECK_EQ(r.n_draws, 1);
    CHECK(sampler_draw_accept(1.0f, &r));
    CHECK_EQ(r.n_draws, 2);

    float p[] = { 0.2f, 0.5f, 0.3f };
    int32_t t = -1;
    sampler_rng_seed(&r, 42);
    CHECK(!sampler_draw_accept(0.0f, &r));
    CHECK_EQ(sampler_draw_exclude(p, 3, 1, &r, &t, NULL), GLIM_OK);
    CHECK(t == 0 || t == 2);
    CHECK_EQ(r.n_draws, 2);   /* RNG usage: exactly two uniforms */
    CHECK_NEAR(p[0], 0.4, 1e-6);
    CHECK_NEAR(p[1], 0.0, 0);
    CHECK_NEAR(p[2], 0.6, 1e-6);

    float one[] = { 0, 1, 0 };
    CHECK_EQ(sampler_draw_exclude(one, 3, 1, &r, &t, NULL), GLIM_EINVAL);

    float rp[] = { 0.1f, 0.6f, 0.3f };
    const float rq[] = { 0.2f, 0.2f, 0.6f };
    CHECK_EQ(sampler_draw_residual(rp, rq, 3, &r), 1);
    CHECK_NEAR(rp[0], 0, 0);
    CHECK_NEAR(rp[1], 1, 1e-6);
    CHECK_NEAR(rp[2], 0, 0);
}

static void test_reference_equivalence(void)
{
    const float lg[] = { -2, 1.2f, 0.3f, 4, -0.7f, 2.1f, 1.2f, 0 };
    const struct { float T; int32_t k; float p; } cfg[] = {
        { 0.7f, 0, 1 }, { 1, 0, 0.95f }, { 1.3f, 5, 1 }, { 0.9f, 5, 0.8f }, { 2, 1, 0.1f },
    };
    for (int i = 0; i < 5; i++)
        check_against_ref(lg, 8, cfg[i].T, cfg[i].k, cfg[i].p);
}

static void test_randomized_reference(void)
{
    const float Ts[] = { 0.5f, 1, 1.7f };
    const float Ps[] = { 0.1f, 0.5f, 0.8f, 0.95f, 0.999f };
    const int32_t Ks[] = { 0, 1, 7, 31, 127 };
    uint32_t x = 12345;
    for (int rep = 0; rep < 20; rep++) {
        float lg[257];
        for (int i = 0; i < 257; i++) {
            x = x * 1664525u + 1013904223u;
            lg[i] = (i % 17 == 0) ? 2.0f : -8.0f + 16.0f * (float)(x >> 8) / 16777216.0f;
        }
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 5; b++)
                for (int c = 0; c < 5; c++)
                    check_against_ref(lg, 257, Ts[a], Ks[c], Ps[b]);
    }
}

/* Known answers from std::mt19937(std::seed_seq{lo, hi}) and
 * std::uniform_real_distribution<float>(0,1) under libstdc++. */
static void test_rng_known_answers(void)
{
    struct sampler_rng r;
    sampler_rng_seed(&r, 42);
    CHECK_EQ(sampler_rng_u32(&r), 3548655438u);
    CHECK_EQ(sampler_rng_u32(&r), 2003459968u);
    CHECK_EQ(sampler_rng_u32(&r), 1553277671u);
    sampler_rng_seed(&r, 0x0123456789abcdefull);
    CHECK_NEAR(sampler_rng_uniform(&r), 0.714920521, 1e-9);
    CHECK_NEAR(sampler_rng_uniform(&r), 0.728272617, 1e-9);
    CHECK_NEAR(sampler_rng_uniform(&r), 0.587558508, 1e-9);
    float u = 0;
    for (int i = 3; i < 2000; i++)   /* crosses several twists */
        u = sampler_rng_uniform(&r);
    CHECK_NEAR(u, 0.556693733, 1e-9);
}

/* ---- properties ---- */

static void test_greedy_properties(void)
{
    struct sampler *s = NULL;
    struct sampler_params sp = params(0, 0, 1);
    CHECK_EQ(sampler_new(&sp, 9, &s, NULL), GLIM_OK);
    const float lg[] = { 1, 5, 2, 5, -1, 5, 0, 3, 5 };
    int32_t id = -1;
    CHECK_EQ(sampler_sample(s, lg, 9, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 1);
    CHECK_EQ(sampler_rng_of(s)->n_draws, 0);   /* greedy consumes no draws */
    CHECK_EQ(sampler_sample(s, lg, 8, &id, NULL), GLIM_EINVAL);
    sampler_free(s);

    /* top_k = 1 is greedy at any temperature and any seed */
    uint32_t x = 7;
    float row[300];
    for (int rep = 0; rep < 50; rep++) {
        for (int i = 0; i < 300; i++) {
            x = x * 1664525u + 1013904223u;
            row[i] = (float)((x >> 20) % 40) * 0.25f;   /* many ties */
        }
        sp = params(1.5f, 1, 1);
        sp.seed = (uint64_t)rep + 1;
        CHECK_EQ(sampler_new(&sp, 300, &s, NULL), GLIM_OK);
        CHECK_EQ(sampler_sample(s, row, 300, &id, NULL), GLIM_OK);
        CHECK_EQ(id, sampler_argmax(row, 300));
        sampler_free(s);
    }
}

static double chi_square(const int *count, const float *p, int n, int N)
{
    double chi = 0;
    for (int i = 0; i < n; i++) {
        double e = (double)p[i] * N;
        if (e > 0)
            chi += (count[i] - e) * (count[i] - e) / e;
        else
            CHECK_EQ(count[i], 0);   /* zero-probability tokens are never drawn */
    }
    return chi;
}

static void test_chi_square(void)
{
    const float lg[] = { 0.5f, 1.0f, -0.3f, 2.0f, 0.0f, -1.0f, -9.0f };
    float p[7];
    probs(lg, 7, 0.8f, 6, 1, p);   /* 7th token cut by top_k */
    enum { N = 20000 };
    int across[7] = { 0 }, along[7] = { 0 };
    struct sampler_rng r;
    for (int s = 1; s <= N; s++) {   /* first draw of each of N seeds */
        sampler_rng_seed(&r, (uint64_t)s);
        across[sampler_draw_categorical(p, 7, &r)]++;
    }
    sampler_rng_seed(&r, 2024);
    for (int i = 0; i < N; i++)      /* one long stream */
        along[sampler_draw_categorical(p, 7, &r)]++;
    /* 6 live categories: 5 degrees of freedom; 20.5 is the 0.999 quantile */
    CHECK(chi_square(across, p, 7, N) < 20.5);
    CHECK(chi_square(along, p, 7, N) < 20.5);
}

static void draw_sequence(uint64_t seed, int32_t *out, int n)
{
    struct sampler_params sp = params(1.0f, 40, 0.9f);
    sp.seed = seed;
    struct sampler *s = NULL;
    CHECK_EQ(sampler_new(&sp, 100, &s, NULL), GLIM_OK);
    float lg[100];
    for (int i = 0; i < 100; i++)
        lg[i] = (float)((i * 37) % 23) * 0.2f;
    for (int k = 0; k < n; k++) {
        CHECK_EQ(sampler_sample(s, lg, 100, &out[k], NULL), GLIM_OK);
        sampler_accept(s, out[k]);
    }
    sampler_free(s);
}

static void test_seed_reproducible(void)
{
    int32_t a[64], b[64], c[64];
    draw_sequence(77, a, 64);
    draw_sequence(77, b, 64);
    draw_sequence(78, c, 64);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

static void test_penalties(void)
{
    struct sampler_params sp = params(0, 0, 1);
    sp.penalty_last_n = 2;
    sp.repeat_penalty = 1.1f;
    struct sampler *s = NULL;
    CHECK_EQ(sampler_new(&sp, 4, &s, NULL), GLIM_OK);
    const float lg[] = { 2.0f, 1.9f, -1.0f, -1.05f };
    int32_t id = -1;
    sampler_accept(s, 0);              /* 2.0 / 1.1 = 1.82 < 1.9 */
    CHECK_EQ(sampler_sample(s, lg, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 1);
    sampler_accept(s, 1);              /* both positives penalized */
    CHECK_EQ(sampler_sample(s, lg, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 0);                   /* 1.818 > 1.727 */
    sampler_accept(s, 2);              /* window of 2: token 0 leaves */
    sampler_accept(s, 2);
    CHECK_EQ(sampler_sample(s, lg, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 0);
    sampler_free(s);

    /* negative logits are multiplied; frequency counts occurrences */
    const float neg[] = { -1.0f, -1.05f, -5, -5 };
    sp.repeat_penalty = 1.1f;
    sp.penalty_last_n = 8;
    CHECK_EQ(sampler_new(&sp, 4, &s, NULL), GLIM_OK);
    sampler_accept(s, 0);              /* -1.1 < -1.05 */
    CHECK_EQ(sampler_sample(s, neg, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 1);
    sampler_free(s);

    sp.repeat_penalty = 1.0f;
    sp.frequency_penalty = 0.3f;
    sp.presence_penalty = 0.05f;
    const float f[] = { 1.0f, 0.5f, 0.2f, 0 };
    CHECK_EQ(sampler_new(&sp, 4, &s, NULL), GLIM_OK);
    sampler_accept(s, 0);              /* 1 - 0.3 - 0.05 = 0.65 > 0.5 */
    CHECK_EQ(sampler_sample(s, f, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 0);
    sampler_accept(s, 0);              /* 1 - 0.6 - 0.05 = 0.35 < 0.5 */
    CHECK_EQ(sampler_sample(s, f, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 1);
    sampler_reset(s);
    CHECK_EQ(sampler_sample(s, f, 4, &id, NULL), GLIM_OK);
    CHECK_EQ(id, 0);
    sampler_free(s);
}

static void test_min_p(void)
{
    struct sampler_params sp = params(1, 0, 1);
    sp.min_p = 0.2f;   /* keep logit >= 0 + ln 0.2 = -1.61 */
    const float lg[] = { 0, -1, -3, -1.5f };
    float p[4];
    struct sampler_scratch *sc = sampler_scratch_new(4);
    sampler_probs(sc, lg, 4, &sp, p);
    double z = 1 + exp(-1) + exp(-1.5);
    check_vec(p, (const double[]){ 1 / z, exp(-1) / z, 0, exp(-1.5) / z }, 4);
    sampler_scratch_free(sc);
}

static void test_no_alloc_per_token(void)
{
    struct sampler_params sp = params(0.9f, 0, 0.9f);
    sp.seed = 5;
    sp.penalty_last_n = 16;
    sp.repeat_penalty = 1.2f;
    struct sampler *s = NULL;
    CHECK_EQ(sampler_new(&sp, 1000, &s, NULL), GLIM_OK);
    float lg[1000];
    for (int i = 0; i < 1000; i++)
        lg[i] = (float)((i * 7919) % 1000) / 100.0f;
    glim_alloc_fail_after(1);   /* any allocation from here on fails */
    int ok = 1;
    for (int k = 0; k < 50; k++) {
        int32_t id;
        ok &= sampler_sample(s, lg, 1000, &id, NULL) == GLIM_OK && id >= 0 && id < 1000;
        sampler_accept(s, id);
    }
    glim_alloc_fail_after(-1);
    CHECK(ok);
    sampler_free(s);
}

static void test_oom_and_validation(void)
{
    struct sampler_params sp = params(1, 0, 1);
    sp.penalty_last_n = 4;
    int n_ok = 0;
    for (long n = 1; n < 20 && !n_ok; n++) {
        struct sampler *s = NULL;
        struct glim_err err = { 0 };
        glim_alloc_fail_after(n);
        int rc = sampler_new(&sp, 50, &s, &err);
        glim_alloc_fail_after(-1);
        CHECK(rc == GLIM_OK || (rc == GLIM_ENOMEM && s == NULL));
        n_ok = rc == GLIM_OK;
        sampler_free(s);
    }
    CHECK(n_ok);
    struct glim_err err = { 0 };
    struct sampler *s = NULL;
    sp = params(2.5f, 0, 1);
    CHECK_EQ(sampler_new(&sp, 10, &s, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "temperature") != NULL);
    sp = params(1, -1, 1);
    CHECK_EQ(sampler_params_check(&sp, NULL), GLIM_EINVAL);
    sp = params(1, 0, 0);
    CHECK_EQ(sampler_params_check(&sp, NULL), GLIM_EINVAL);
    sp = params(-1, 0, 1);
    CHECK_EQ(sampler_params_check(&sp, NULL), GLIM_OK);
    CHECK(sampler_params_is_greedy(&sp));
}

int main(void)
{
    RUN(test_argmax);
    RUN(test_argmax_vector);
    RUN(test_normalize);
    RUN(test_softmax_topk_topp);
    RUN(test_draws);
    RUN(test_reference_equivalence);
    RUN(test_randomized_reference);
    RUN(test_rng_known_answers);
    RUN(test_greedy_properties);
    RUN(test_chi_square);
    RUN(test_seed_reproducible);
    RUN(test_penalties);
    RUN(test_min_p);
    RUN(test_no_alloc_per_token);
    RUN(test_oom_and_validation);
    return DONE();
}
