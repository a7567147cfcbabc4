/*
 * dot_x86.h — what dot_avx2.c and dot_avx512.c share: the nx dispatch,
 * reductions, the Q4_K scale unpack, the per-block scaling of the K-quants,
 * and the whole Q8_0/Q4_0 kernels. Each file includes it under its own -m
 * flags, so one source becomes AVX2 code in one and AVX-512 code in the
 * other; everything here is force-inlined into the kernels, so sharing it
 * costs nothing at run time. Include only from a file compiled with at
 * least -mavx2 -mfma -mf16c.
 */
#ifndef GLIM_DOT_X86_H
#define GLIM_DOT_X86_H
#include <immintrin.h>

#include "cpu_kern.h"

#define INLINE static inline __attribute__((always_inline))
/* the nx / chunk loops must unroll so accumulators live in registers (-O2 does not by itself) */
#define UNROLL _Pragma("GCC unroll 8")

/* calls BODY(..., nx) with nx a constant, so each case compiles to its own register-resident loop */
#define NX_DISPATCH(BODY, ...)                 \
    switch (nx) {                              \
    case 1: BODY(__VA_ARGS__, 1); break;       \
    case 2: BODY(__VA_ARGS__, 2); break;       \
    case 3: BODY(__VA_ARGS__, 3); break;       \
    default: BODY(__VA_ARGS__, 4); break;      \
    }

/* activation row a of x (row stride xs bytes) */
#define XROW(x, a, xs) ((const char *)(x) + (size_t)(a) * (xs))

INLINE float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* y[a * ys] = horizontal sum of acc[a], a = 0..nx-1 */
INLINE void store_rows(float *y, size_t ys, const __m256 *acc, const int nx)
{
    UNROLL
    for (int a = 0; a < nx; a++)
        y[(size_t)a * ys] = hsum256(acc[a]);
}

/* int32 lanes, each the sum of 4 adjacent u8 x s8 products: vpdpbusd where the
 * file is built for VNNI, else maddubs + madd (no int16 saturation for our
 * operands: |u| <= 128, |s| <= 127, so a pair is at most 32512). Equal results. */
INLINE __m256i dot4_u8s8(__m256i u, __m256i s)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* ---- Q4_K / Q5_K / Q6_K pieces ---------------------------------------------- */

/* Q4_K/Q5_K 12-byte scales -> sc[8] (bytes 0..7) and m[8] (bytes 8..15):
 * sc[0..3] = s[0..3]&63, sc[4..7] = s[8..11]&15 | (s[0..3]>>6)<<4,
 * m[0..3]  = s[4..7]&63, m[4..7]  = s[8..11]>>4 | (s[4..7]>>6)<<4  (spec §4.1) */
INLINE __m128i k4_unpack_scales(const uint8_t s[12])
{
    /* 16-byte load: the 4 bytes past the scales are the block's first codes (in bounds) */
    const __m128i v = _mm_loadu_si128((const __m128i *)s);       /* words w0 w1 w2 (w3 unused) */
    const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* w0 w2 w1 w2 */
    const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* w0 w0 w1 w1 */
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(lo, hi);   /* sc_lo sc_hi m_lo m_hi */
}

/* Q4_K and Q5_K block b as one view; qh is NULL for Q4_K (has_qh == 0) */
struct k45_view {
    uint16_t       d, dmin;
    const uint8_t *scales, *qs, *qh;
};

INLINE struct k45_view k45_at(const void *w, int64_t b, const int has_qh)
{
    if (has_qh) {
        const struct block_q5_k *wb = (const struct block_q5_k *)w + b;
        return (struct k45_view){ wb->d, wb->dmin, wb->scales, wb->qs, wb->qh };
    }
    const struct block_q4_k *wb = (const struct block_q4_k *)w + b;
    return (struct k45_view){ wb->d, wb->dmin, wb->scales, wb->qs, NULL };
}

/* acc + dx*d*isum - dx*dmin*<bsums, m16>: the Q4_K/Q5_K block scaling
 * (m16 holds m[j] twice each, lined up with bsums[2j], bsums[2j+1]) */
INLINE __m256 k45_scale(__m256 acc, const struct block_q8_k *xb, __m256i isum, __m256i m16, float d,
                        float dmin)
{
    const __m256i imin = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), m16);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(xb->d * d), _mm256_cvtepi32_ps(isum), acc);
    return _mm256_fnmadd_ps(_mm256_set1_ps(xb->d * dmin), _mm256_cvtepi32_ps(imin), acc);
}

/* acc + dx*d*(isum - 32 * <bsums, sc16>): the Q6_K block scaling (codes were stored +32) */
INLINE __m256 q6k_scale(__m256 acc, const struct block_q8_k *xb, __m256i isum, __m256i sc16, float d)
{
    const __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
    const __m256i s = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5));
    return _mm256_fmadd_ps(_mm256_set1_ps(xb->d * d), _mm256_cvtepi32_ps(s), acc);
}

/* ---- Q8_0 / Q4_0 x Q8_32 ------------------------------------------------------ */

INLINE void q8_0_body(const void *w, const void *x, size_t xs, int64_t nb, float *y, size_t ys,
                      const int nx)
{
    __m256 acc[CPU_NX];
    UNROLL
    for (int a = 0; a < nx; a++)
        acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct block_q8_0 *wb = (const struct block_q8_0 *)w + b;
        const __m256i q = _mm256_loadu_si256((const __m256i *)wb->qs);
        const __m256i aq = _mm256_sign_epi8(q, q);   /* |q| as unsigned (128 stays 128) */
        const float d = h2f(wb->d);
        UNROLL
        for (int a = 0; a < nx; a++) {
            const struct cpu_q8_32 *xb = (const struct cpu_q8_32 *)XROW(x, a, xs) + b;
            __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb->qs), q);
            __m256i p = dot4_u8s8(aq, xv);
            acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(xb->d * d), _mm256_cvtepi32_ps(p), acc[a]);
        }
    }
    store_rows(y, ys, acc, nx);
}

INLINE void q4_0_body(const void *w, const void *x, size_t xs, int64_t nb, float *y, size_t ys,
                      const int nx)
{
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc[CPU_NX];
    float off[CPU_NX];
    UNROLL
    for (int a = 0; a < nx; a++)
        acc[a] = _mm256_setzero_ps(), off[a] = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const struct block_q4_0 *wb = (const struct block_q4_0 *)w + b;
        const __m128i q = _mm_loadu_si128((const __m128i *)wb->qs);
        /* elements 0..15 are the low nibbles, 16..31 the high ones */
        const __m256i qq = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
        const float d = h2f(wb->d);
        UNROLL
        for (int a = 0; a < nx; a++) {
            const struct cpu_q8_32 *xb = (const struct cpu_q8_32 *)XROW(x, a, xs) + b;
            __m256i xv = _mm256_loadu_si256((const __m256i *)xb->qs);
            __m256i p = dot4_u8s8(qq, xv);
            float f = xb->d * d;
            acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(p), acc[a]);
            off[a] += f * (float)(8 * xb->sum);
        }
    }
    UNROLL
    for (int a = 0; a < nx; a++)
        y[(size_t)a * ys] = hsum256(acc[a]) - off[a];
}

static void dot_q8_0(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q8_0_body, w, x, xs, k / 32, y, ys)
}

static void dot_q4_0(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q4_0_body, w, x, xs, k / 32, y, ys)
}

#endif
