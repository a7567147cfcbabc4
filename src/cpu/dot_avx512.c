/*
 * dot_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) dot kernels for the int8 paths;
 * everything else is inherited from the AVX2 table.
 *
 * K-quants work on 64 codes per instruction: a Q4_K/Q5_K chunk of 32 bytes
 * holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles, which
 * are exactly the 64 contiguous activation codes qs[64c .. 64c+63], so one
 * broadcast load + a per-half variable shift yields a 512-bit code vector
 * that lines up with one activation load. maddubs forms int16 pair sums and
 * VNNI vpdpwssd multiplies them by the int16 sub-block scale and accumulates
 * in int32, both exact. Q8_0/Q4_0 use 256-bit vpdpbusd (u8 x s8 quads).
 * Results equal dot_scalar.c up to f32 rounding of the per-block scaling.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu_kern.h"

#define INLINE static inline __attribute__((always_inline))
/* the nx / chunk loops must unroll so accumulators live in registers (-O2 does not by itself) */
#define UNROLL _Pragma("GCC unroll 8")

#define NX_DISPATCH(BODY, ...)                 \
    switch (nx) {                              \
    case 1: BODY(__VA_ARGS__, 1); break;       \
    case 2: BODY(__VA_ARGS__, 2); break;       \
    case 3: BODY(__VA_ARGS__, 3); break;       \
    default: BODY(__VA_ARGS__, 4); break;      \
    }

#define XROW(x, a, xs) ((const char *)(x) + (size_t)(a) * (xs))

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

INLINE float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* same unpack as dot_avx2.c: bytes 0..7 = sc[0..7], 8..15 = m[0..7] (spec §4.1) */
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

/* int16 lane vector: first 16 lanes = lo, last 16 = hi */
INLINE __m512i halves16(int lo, int hi)
{
    return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

INLINE __m512i bcast256(const void *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* ---- Q4_K / Q5_K x Q8_K ---------------------------------------------------- */

INLINE void k45_body(const void *w, const void *x, size_t xs, int64_t nb, float *y, size_t ys,
                     const int has_qh, const int nx)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    const __m512i nib_shift = halves16(0, 4);
    __m256 acc[CPU_NX];
    UNROLL
    for (int a = 0; a < nx; a++)
        acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        uint16_t dh, dmh;
        const uint8_t *scales, *qs, *qhp = NULL;
        if (has_qh) {
            const struct block_q5_k *wb = (const struct block_q5_k *)w + b;
            dh = wb->d, dmh = wb->dmin, scales = wb->scales, qs = wb->qs, qhp = wb->qh;
        } else {
            const struct block_q4_k *wb = (const struct block_q4_k *)w + b;
            dh = wb->d, dmh = wb->dmin, scales = wb->scales, qs = wb->qs;
        }
        const __m128i scm = k4_unpack_scales(scales);
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
        const __m512i qh = has_qh ? bcast256(qhp) : _mm512_setzero_si512();
        __m512i isum[CPU_NX];
        UNROLL
        for (int a = 0; a < nx; a++)
            isum[a] = _mm512_setzero_si512();
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bcast256(qs + 32 * c), nib_shift), m4);
            if (has_qh) {   /* low half: bit 2c of qh, high half: bit 2c+1 -> code bit 4 */
                __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, halves16(2 * c, 2 * c + 1)), one);
                q = _mm512_or_si512(q, _mm512_slli_epi16(hb, 4));
            }
            const __m512i sc = _mm512_permutexvar_epi16(halves16(2 * c, 2 * c + 1), sc16);
            UNROLL
            for (int a = 0; a < nx; a++) {
                const struct block_q8_k *xb = (const struct block_q8_k *)XROW(x, a, xs) + b;
                __m512i xv = _mm512_loadu_si512((const void *)(xb->qs + 64 * c));
                isum[a] = _mm512_dpwssd_epi32(isum[a], _mm512_maddubs_epi16(q, xv), sc);
            }
        }
        const float d = h2f(dh), dmin = h2f(dmh);
        UNROLL
        for (int a = 0; a < nx; a++) {
            const struct block_q8_k *xb = (const struct block_q8_k *)XROW(x, a, xs) + b;
            __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
            __m256i imin = _mm256_madd_epi16(bs, m16);
            __m256i is = _mm256_add_epi32(_mm512_castsi512_si256(isum[a]),
                                          _mm512_extracti64x4_epi64(isum[a], 1));
            acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(xb->d * d), _mm256_cvtepi32_ps(is), acc[a]);
            acc[a] = _mm256_fnmadd_ps(_mm256_set1_ps(xb->d * dmin), _mm256_cvtepi32_ps(imin), acc[a]);
        }
    }
    UNROLL
    for (int a = 0; a < nx; a++)
        y[(size_t)a * ys] = hsum256(acc[a]);
}

static void dot_q4_k(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(k45_body, w, x, xs, k / QK_K, y, ys, 0)
}

static void dot_q5_k(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(k45_body, w, x, xs, k / QK_K, y, ys, 1)
}

/* ---- Q6_K x Q8_K ------------------------------------------------------------ */

/* int16 index vector: lanes 8i..8i+7 = base + i (one Q6_K scale per 16 codes) */
INLINE __m512i quad_idx(int base)
{
    const long long r = 0x0001000100010001LL;
    return _mm512_set_epi64((base + 3) * r, (base + 3) * r, (base + 2) * r, (base + 2) * r,
                            (base + 1) * r, (base + 1) * r, base * r, base * r);
}

/* Each half h of a block: codes 0..63 (groups 0,1) = ql[0..63] & 15 | qh bits (0,1) / (2,3),
 * codes 64..127 (groups 2,3) = ql[0..63] >> 4 | qh bits (4,5) / (6,7)  (spec §4.1) */
INLINE void q6k_body(const void *w, const void *x, size_t xs, int64_t nb, float *y, size_t ys,
                     const int nx)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i shl01 = halves16(4, 2), shr23 = halves16(0, 2);
    __m256 acc[CPU_NX];
    UNROLL
    for (int a = 0; a < nx; a++)
        acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct block_q6_k *wb = (const struct block_q6_k *)w + b;
        const __m256i sc_all = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
        const __m512i sc512 = _mm512_castsi256_si512(sc_all);
        __m512i isum[CPU_NX];
        UNROLL
        for (int a = 0; a < nx; a++)
            isum[a] = _mm512_setzero_si512();
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(wb->ql + 64 * h));
            const __m512i qh = bcast256(wb->qh + 32 * h);
            __m512i v01 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                          _mm512_and_si512(_mm512_sllv_epi16(qh, shl01), m30));
            __m512i v23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                          _mm512_and_si512(_mm512_srlv_epi16(qh, shr23), m30));
            const __m512i s01 = _mm512_permutexvar_epi16(quad_idx(8 * h), sc512);
            const __m512i s23 = _mm512_permutexvar_epi16(quad_idx(8 * h + 4), sc512);
            UNROLL
            for (int a = 0; a < nx; a++) {
                const struct block_q8_k *xb = (const struct block_q8_k *)XROW(x, a, xs) + b;
                __m512i x01 = _mm512_loadu_si512((const void *)(xb->qs + 128 * h));
                __m512i x23 = _mm512_loadu_si512((const void *)(xb->qs + 128 * h + 64));
                isum[a] = _mm512_dpwssd_epi32(isum[a], _mm512_maddubs_epi16(v01, x01), s01);
                isum[a] = _mm512_dpwssd_epi32(isum[a], _mm512_maddubs_epi16(v23, x23), s23);
            }
        }
        const float d = h2f(wb->d);
        UNROLL
        for (int a = 0; a < nx; a++) {
            const struct block_q8_k *xb = (const struct block_q8_k *)XROW(x, a, xs) + b;
            /* codes were stored +32: subtract 32 * sum_i sc_i * bsum_i */
            __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
            __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc_all), 5);
            __m256i is = _mm256_add_epi32(_mm512_castsi512_si256(isum[a]),
                                          _mm512_extracti64x4_epi64(isum[a], 1));
            is = _mm256_sub_epi32(is, off);
            acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(xb->d * d), _mm256_cvtepi32_ps(is), acc[a]);
        }
    }
    UNROLL
    for (int a = 0; a < nx; a++)
        y[(size_t)a * ys] = hsum256(acc[a]);
}

static void dot_q6_k(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q6k_body, w, x, xs, k / QK_K, y, ys)
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
            __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, xv);
            acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(xb->d * d), _mm256_cvtepi32_ps(p), acc[a]);
        }
    }
    UNROLL
    for (int a = 0; a < nx; a++)
        y[(size_t)a * ys] = hsum256(acc[a]);
}

static void dot_q8_0(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q8_0_body, w, x, xs, k / 32, y, ys)
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
        const __m256i qq = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
        const float d = h2f(wb->d);
        UNROLL
        for (int a = 0; a < nx; a++) {
            const struct cpu_q8_32 *xb = (const struct cpu_q8_32 *)XROW(x, a, xs) + b;
            __m256i xv = _mm256_loadu_si256((const __m256i *)xb->qs);
            __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qq, xv);
            float f = xb->d * d;
            acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(p), acc[a]);
            off[a] += f * (float)(8 * xb->sum);
        }
    }
    UNROLL
    for (int a = 0; a < nx; a++)
        y[(size_t)a * ys] = hsum256(acc[a]) - off[a];
}

static void dot_q4_0(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q4_0_body, w, x, xs, k / 32, y, ys)
}

void cpu_kern_fill_avx512(struct cpu_kern *k)
{
    k->level = CPU_LEVEL_AVX512;
    k->name = "avx512";
    k->dot[GLIM_TYPE_Q8_0] = dot_q8_0;
    k->dot[GLIM_TYPE_Q4_0] = dot_q4_0;
    k->dot[GLIM_TYPE_Q4_K] = dot_q4_k;
    k->dot[GLIM_TYPE_Q5_K] = dot_q5_k;
    k->dot[GLIM_TYPE_Q6_K] = dot_q6_k;
}
#else
typedef int cpu_dot_avx512_unused;   /* ISO C wants a non-empty file */
#endif
