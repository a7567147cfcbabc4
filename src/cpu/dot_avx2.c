/*
 * dot_avx2.c — AVX2 + FMA + F16C dot kernels (compiled with -mavx2 -mfma
 * -mf16c; only called when CPUID says so).
 *
 * Int8 kernels: weight codes are unsigned (0..15 / 0..31 / 0..63, or |q| for
 * Q8_0 with the sign moved onto the activation), activations signed, so
 * _mm256_maddubs_epi16 forms pair sums without saturation (max 2*128*127),
 * and _mm256_madd_epi16 applies the per-sub-block scale while widening to
 * int32. Integer sums are exact; each block ends with one f32 FMA, so the
 * result equals dot_scalar.c up to f32 rounding.
 *
 * Every kernel takes nx = 1..CPU_NX activation rows: the weight block is
 * decoded once into registers and used for all of them (prefill tiles).
 * The _body functions are force-inlined with a constant nx so the per-row
 * accumulators stay in registers. The Q8_0/Q4_0 kernels and the helpers
 * shared with dot_avx512.c are in dot_x86.h.
 */
#if defined(__x86_64__)
#include <string.h>

#include "dot_x86.h"

/* shuffle control broadcasting int16 element j to every lane of a 128-bit half */
INLINE __m256i bcast16_ctrl(int j)
{
    return _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
}

/* ---- Q4_K / Q5_K x Q8_K ---------------------------------------------------- */

/* has_qh: Q5_K (high bit of each code in qh), else Q4_K */
INLINE void k45_body(const void *w, const void *x, size_t xs, int64_t nb, float *y, size_t ys,
                     const int has_qh, const int nx)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    __m256 acc[CPU_NX];
    UNROLL
    for (int a = 0; a < nx; a++)
        acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct k45_view wb = k45_at(w, b, has_qh);
        const __m128i scm = k4_unpack_scales(wb.scales);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
        /* m[j] twice each, lined up with bsums[2j], bsums[2j+1] */
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
        __m256i isum[CPU_NX];
        UNROLL
        for (int a = 0; a < nx; a++)
            isum[a] = _mm256_setzero_si256();
        __m256i qh = has_qh ? _mm256_loadu_si256((const __m256i *)wb.qh) : _mm256_setzero_si256();
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(wb.qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (has_qh) {   /* bit 2c of qh -> bit 4 of the low code, bit 2c+1 -> the high one */
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), b4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            const __m256i s_lo = _mm256_shuffle_epi8(sc16, bcast16_ctrl(2 * c));
            const __m256i s_hi = _mm256_shuffle_epi8(sc16, bcast16_ctrl(2 * c + 1));
            UNROLL
            for (int a = 0; a < nx; a++) {
                const struct block_q8_k *xb = (const struct block_q8_k *)XROW(x, a, xs) + b;
                __m256i xl = _mm256_loadu_si256((const __m256i *)(xb->qs + 64 * c));
                __m256i xh = _mm256_loadu_si256((const __m256i *)(xb->qs + 64 * c + 32));
                __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), s_lo);
                __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), s_hi);
                isum[a] = _mm256_add_epi32(isum[a], _mm256_add_epi32(pl, ph));
            }
        }
        const float d = h2f(wb.d), dmin = h2f(wb.dmin);
        UNROLL
        for (int a = 0; a < nx; a++)
            acc[a] = k45_scale(acc[a], (const struct block_q8_k *)XROW(x, a, xs) + b, isum[a], m16, d, dmin);
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

INLINE void q6k_body(const void *w, const void *x, size_t xs, int64_t nb, float *y, size_t ys,
                     const int nx)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    /* even-indexed scales to the low 8 bytes, odd to the high 8 */
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc[CPU_NX];
    UNROLL
    for (int a = 0; a < nx; a++)
        acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct block_q6_k *wb = (const struct block_q6_k *)w + b;
        const __m128i s8 = _mm_loadu_si128((const __m128i *)wb->scales);
        const __m256i sc_all = _mm256_cvtepi8_epi16(s8);              /* 16 scales, in order */
        const __m128i eo = _mm_shuffle_epi8(s8, even_odd);
        /* low lane: scales 0,2,..,14; high lane: 1,3,..,15 -> group g gets (2g, 2g+1) */
        const __m256i sc_eo = _mm256_set_m128i(_mm_cvtepi8_epi16(_mm_srli_si128(eo, 8)),
                                               _mm_cvtepi8_epi16(eo));
        __m256i isum[CPU_NX];
        UNROLL
        for (int a = 0; a < nx; a++)
            isum[a] = _mm256_setzero_si256();
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
            __m256i g[4];
            g[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            g[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            g[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
            g[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            UNROLL
            for (int gi = 0; gi < 4; gi++) {
                const __m256i sc = _mm256_shuffle_epi8(sc_eo, bcast16_ctrl(4 * h + gi));
                UNROLL
                for (int a = 0; a < nx; a++) {
                    const struct block_q8_k *xb = (const struct block_q8_k *)XROW(x, a, xs) + b;
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xb->qs + 128 * h + 32 * gi));
                    isum[a] = _mm256_add_epi32(isum[a], _mm256_madd_epi16(_mm256_maddubs_epi16(g[gi], xv), sc));
                }
            }
        }
        const float d = h2f(wb->d);
        UNROLL
        for (int a = 0; a < nx; a++)
            acc[a] = q6k_scale(acc[a], (const struct block_q8_k *)XROW(x, a, xs) + b, isum[a], sc_all, d);
    }
    store_rows(y, ys, acc, nx);
}

static void dot_q6_k(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(q6k_body, w, x, xs, k / QK_K, y, ys)
}

/* ---- F32 / F16 / BF16 weights x f32 -------------------------------------------- */

INLINE __m256 load8_f32(const void *w, int64_t i) { return _mm256_loadu_ps((const float *)w + i); }
INLINE __m256 load8_f16(const void *w, int64_t i)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
}
INLINE __m256 load8_bf16(const void *w, int64_t i)
{
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
INLINE float elem_f32(const void *w, int64_t i) { return ((const float *)w)[i]; }
INLINE float elem_f16(const void *w, int64_t i) { return h2f(((const uint16_t *)w)[i]); }
INLINE float elem_bf16(const void *w, int64_t i)
{
    uint32_t u = (uint32_t)((const uint16_t *)w)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* two accumulators per row hide the FMA latency when nx is 1 */
#define DEF_FLOAT_BODY(NAME, LOAD8, ELEM)                                                      \
    INLINE void NAME(const void *w, const void *x, size_t xs, int64_t k, float *y, size_t ys,  \
                     const int nx)                                                             \
    {                                                                                          \
        __m256 acc0[CPU_NX], acc1[CPU_NX];                                                     \
        UNROLL                                                                                 \
        for (int a = 0; a < nx; a++)                                                           \
            acc0[a] = acc1[a] = _mm256_setzero_ps();                                           \
        int64_t i = 0;                                                                         \
        for (; i + 16 <= k; i += 16) {                                                         \
            __m256 w0 = LOAD8(w, i), w1 = LOAD8(w, i + 8);                                     \
            UNROLL                                                                             \
            for (int a = 0; a < nx; a++) {                                                     \
                const float *xa = (const float *)XROW(x, a, xs);                               \
                acc0[a] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xa + i), acc0[a]);               \
                acc1[a] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xa + i + 8), acc1[a]);           \
            }                                                                                  \
        }                                                                                      \
        UNROLL                                                                                 \
        for (int a = 0; a < nx; a++) {                                                         \
            const float *xa = (const float *)XROW(x, a, xs);                                   \
            float s = hsum256(_mm256_add_ps(acc0[a], acc1[a]));                                \
            for (int64_t t = i; t < k; t++)                                                    \
                s += ELEM(w, t) * xa[t];                                                       \
            y[(size_t)a * ys] = s;                                                             \
        }                                                                                      \
    }

DEF_FLOAT_BODY(f32w_body, load8_f32, elem_f32)
DEF_FLOAT_BODY(f16w_body, load8_f16, elem_f16)
DEF_FLOAT_BODY(bf16w_body, load8_bf16, elem_bf16)

static void dot_f32w(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(f32w_body, w, x, xs, k, y, ys)
}
static void dot_f16w(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(f16w_body, w, x, xs, k, y, ys)
}
static void dot_bf16w(const void *w, const void *x, size_t xs, int nx, int64_t k, float *y, size_t ys)
{
    NX_DISPATCH(bf16w_body, w, x, xs, k, y, ys)
}

/* ---- attention helpers ------------------------------------------------------------ */

static float dot_f32(const float *a, const float *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void axpy_f32(float *y, float a, const float *x, int n)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void row_to_f32(uint32_t type, const void *src, float *dst, int n)
{
    int i = 0;
    if (type == GLIM_TYPE_F16) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, load8_f16(src, i));
        for (; i < n; i++)
            dst[i] = elem_f16(src, i);
    } else if (type == GLIM_TYPE_BF16) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, load8_bf16(src, i));
        for (; i < n; i++)
            dst[i] = elem_bf16(src, i);
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

void cpu_kern_fill_avx2(struct cpu_kern *k)
{
    k->level = CPU_LEVEL_AVX2;
    k->name = "avx2";
    k->dot[GLIM_TYPE_F32] = dot_f32w;
    k->dot[GLIM_TYPE_F16] = dot_f16w;
    k->dot[GLIM_TYPE_BF16] = dot_bf16w;
    k->dot[GLIM_TYPE_Q8_0] = dot_q8_0;
    k->dot[GLIM_TYPE_Q4_0] = dot_q4_0;
    k->dot[GLIM_TYPE_Q4_K] = dot_q4_k;
    k->dot[GLIM_TYPE_Q5_K] = dot_q5_k;
    k->dot[GLIM_TYPE_Q6_K] = dot_q6_k;
    k->dot_f32 = dot_f32;
    k->axpy_f32 = axpy_f32;
    k->row_to_f32 = row_to_f32;
}
#else
typedef int cpu_dot_avx2_unused;   /* ISO C wants a non-empty file */
#endif
