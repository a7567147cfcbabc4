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
 * in int32, both exact. Q8_0/Q4_0 are the dot_x86.h kernels, which use
 * 256-bit vpdpbusd (u8 x s8 quads) when built with VNNI, as here.
 * Results equal dot_scalar.c up to f32 rounding of the per-block scaling.
 */
#if defined(__x86_64__)
#include "dot_x86.h"

/* int16 lane vector: first 16 lanes = lo, last 16 = hi */
INLINE __m512i halves16(int lo, int hi)
{
    return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

INLINE __m512i bcast256(const void *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* the two 256-bit halves of v added lane by lane */
INLINE __m256i fold512(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
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
        const struct k45_view wb = k45_at(w, b, has_qh);
        const __m128i scm = k4_unpack_scales(wb.scales);
        const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
        const __m512i qh = has_qh ? bcast256(wb.qh) : _mm512_setzero_si512();
        __m512i isum[CPU_NX];
        UNROLL
        for (int a = 0; a < nx; a++)
            isum[a] = _mm512_setzero_si512();
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bcast256(wb.qs + 32 * c), nib_shift), m4);
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
        const float d = h2f(wb.d), dmin = h2f(wb.dmin);
        UNROLL
        for (int a = 0; a < nx; a++)
            acc[a] = k45_scale(acc[a], (const struct block_q8_k *)XROW(x, a, xs) + b, fold512(isum[a]), m16,
                               d, dmin);
    }
    store_rows(y, ys, acc, nx);
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
        for (int a = 0; a < nx; a++)
            acc[a] = q6k_scale(acc[a], (const struct block_q8_k *)XROW(x, a, xs) + b, fold512(isum[a]),
                               sc_all, d);
    }
    store_rows(y, ys, acc, nx);
}

static void dot_q6_k(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q6k_body, w, x, xs, k / QK_K, y, ys)
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
