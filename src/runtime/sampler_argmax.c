/*
 * sampler_argmax.c — the greedy pick over one row of logits, in sampler.c's token order: the
 * largest logit (NaN counts as -inf), the lowest id among equals.
 *
 * WHY two vector passes: greedy decoding takes it once a token and greedy DFlash once a drafted
 * or verified row (31 rows of 202048 logits a cycle for the 30B at B = 16); the one-pass scalar
 * loop took ~175 us a row, ~5 ms of a ~32 ms cycle. Pass 1 finds the largest value (a NaN never
 * compares greater, and SSE's max keeps its second operand when the first is NaN), pass 2 the
 * first index holding it (+0 and -0 compare equal, as the scalar order has them). A row whose
 * every key is -inf (all -inf or NaN) takes the scalar loop.
 */
#include "runtime/sampler.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static int32_t argmax_scalar(const float *x, int32_t n)
{
    int32_t best = 0;
    float kb = sampler_key(x[0]);
    for (int32_t i = 1; i < n; i++) {
        float k = sampler_key(x[i]);
        if (k > kb)
            best = i, kb = k;
    }
    return best;
}

static float max_value(const float *x, int32_t n)
{
    int32_t i = 0;
    float m = -INFINITY;
#if defined(__SSE2__)
    __m128 a0 = _mm_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm_max_ps(_mm_loadu_ps(x + i), a0);
        a1 = _mm_max_ps(_mm_loadu_ps(x + i + 4), a1);
        a2 = _mm_max_ps(_mm_loadu_ps(x + i + 8), a2);
        a3 = _mm_max_ps(_mm_loadu_ps(x + i + 12), a3);
    }
    float t[4];
    _mm_storeu_ps(t, _mm_max_ps(_mm_max_ps(a0, a1), _mm_max_ps(a2, a3)));
    for (int j = 0; j < 4; j++)
        m = t[j] > m ? t[j] : m;
#endif
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

static int32_t first_equal(const float *x, int32_t n, float m)
{
    int32_t i = 0;
#if defined(__SSE2__)
    __m128 vm = _mm_set1_ps(m);
    for (; i + 16 <= n; i += 16) {
        int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i), vm)) |
                  _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i + 4), vm)) << 4 |
                  _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i + 8), vm)) << 8 |
                  _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + i + 12), vm)) << 12;
        if (hit)
            return i + __builtin_ctz((unsigned)hit);
    }
#endif
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return 0;   /* not reached: m is one of x */
}

int32_t sampler_argmax(const float *x, int32_t n)
{
    if (n <= 1)
        return 0;
    float m = max_value(x, n);
    return m == -INFINITY ? argmax_scalar(x, n) : first_equal(x, n, m);
}
