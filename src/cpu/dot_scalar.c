/*
 * dot_scalar.c — portable dot kernels: the definition the SIMD kernels are
 * tested against, and the path on CPUs without AVX2 (and ARM64 for now).
 *
 * Integer kernels: per weight block, exact int32 sums of code x activation
 * code, then one f32 scaling per block:
 *   Q4_K/Q5_K: dx * (d * sum_j sc_j * <q_j, xq_j>  -  dmin * sum_j m_j * bsum_j)
 *   Q6_K:      dx * d * sum_i sc_i * (<q_i, xq_i> - 32 * bsum_i)     (i per 16)
 *   Q8_0:      dx * dw * <q, xq>;   Q4_0: dx * dw * (<q, xq> - 8 * sum(xq))
 * Layouts: ../shared/spec/model.md §4.1.
 */
#include <string.h>

#include "cpu_kern.h"

/* six-bit scale and min of sub-block j (Q4_K/Q5_K packing, spec §4.1) */
static void k4_scale_min(const uint8_t s[12], int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K (qh NULL) or Q5_K (bit j of qh[l] is bit 4 of code 32j+l): the block layouts agree but for qh */
static float k45_block(uint16_t d, uint16_t dmin, const uint8_t scales[12], const uint8_t *qs,
                       const uint8_t *qh, const struct block_q8_k *x)
{
    int32_t isum = 0, imin = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m, s = 0;
        k4_scale_min(scales, j, &sc, &m);
        const uint8_t *q = qs + 32 * (j / 2);
        for (int l = 0; l < 32; l++) {
            int lo = (j & 1) ? q[l] >> 4 : q[l] & 0x0F;
            int hi = qh ? (qh[l] >> j) & 1 : 0;
            s += (lo | hi << 4) * x->qs[32 * j + l];
        }
        isum += sc * s;
        imin += m * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
    }
    return x->d * (fp16_to_f32(d) * (float)isum - fp16_to_f32(dmin) * (float)imin);
}

static float q4_k_block(const struct block_q4_k *w, const struct block_q8_k *x)
{
    return k45_block(w->d, w->dmin, w->scales, w->qs, NULL, x);
}

static float q5_k_block(const struct block_q5_k *w, const struct block_q8_k *x)
{
    return k45_block(w->d, w->dmin, w->scales, w->qs, w->qh, x);
}

static float q6_k_block(const struct block_q6_k *w, const struct block_q8_k *x)
{
    int8_t q[QK_K];
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
        int8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32);
        }
    }
    int32_t isum = 0;
    for (int i = 0; i < QK_K / 16; i++) {
        int s = 0;
        for (int l = 0; l < 16; l++)
            s += q[16 * i + l] * x->qs[16 * i + l];
        isum += w->scales[i] * s;
    }
    return x->d * fp16_to_f32(w->d) * (float)isum;
}

static float q8_0_block(const struct block_q8_0 *w, const struct cpu_q8_32 *x)
{
    int s = 0;
    for (int l = 0; l < 32; l++)
        s += w->qs[l] * x->qs[l];
    return x->d * fp16_to_f32(w->d) * (float)s;
}

static float q4_0_block(const struct block_q4_0 *w, const struct cpu_q8_32 *x)
{
    int s = 0;
    for (int l = 0; l < 16; l++)
        s += (w->qs[l] & 0x0F) * x->qs[l] + (w->qs[l] >> 4) * x->qs[l + 16];
    return x->d * fp16_to_f32(w->d) * (float)(s - 8 * x->sum);
}

/* one kernel per (weight block, activation block) pair, looped over blocks and rows */
#define DEF_INT_DOT(NAME, WBLOCK, XBLOCK, PER, BLOCKFN)                                      \
    static void NAME(const void *w, const void *x, size_t x_stride, int nx, int64_t k,       \
                     float *y, size_t y_stride)                                              \
    {                                                                                        \
        for (int a = 0; a < nx; a++) {                                                       \
            const WBLOCK *wb = w;                                                            \
            const XBLOCK *xb = (const XBLOCK *)((const char *)x + (size_t)a * x_stride);     \
            float sum = 0.0f;                                                                \
            for (int64_t b = 0; b < k / (PER); b++)                                          \
                sum += BLOCKFN(wb + b, xb + b);                                              \
            y[(size_t)a * y_stride] = sum;                                                   \
        }                                                                                    \
    }

DEF_INT_DOT(dot_q4_k, struct block_q4_k, struct block_q8_k, QK_K, q4_k_block)
DEF_INT_DOT(dot_q5_k, struct block_q5_k, struct block_q8_k, QK_K, q5_k_block)
DEF_INT_DOT(dot_q6_k, struct block_q6_k, struct block_q8_k, QK_K, q6_k_block)
DEF_INT_DOT(dot_q8_0, struct block_q8_0, struct cpu_q8_32, 32, q8_0_block)
DEF_INT_DOT(dot_q4_0, struct block_q4_0, struct cpu_q8_32, 32, q4_0_block)

static float elem_f32(const void *w, int64_t i) { return ((const float *)w)[i]; }
static float elem_f16(const void *w, int64_t i) { return fp16_to_f32(((const uint16_t *)w)[i]); }
static float elem_bf16(const void *w, int64_t i) { return bf16_to_f32(((const uint16_t *)w)[i]); }

#define DEF_FLOAT_DOT(NAME, ELEM)                                                            \
    static void NAME(const void *w, const void *x, size_t x_stride, int nx, int64_t k,       \
                     float *y, size_t y_stride)                                              \
    {                                                                                        \
        for (int a = 0; a < nx; a++) {                                                       \
            const float *xa = (const float *)((const char *)x + (size_t)a * x_stride);       \
            float sum = 0.0f;                                                                \
            for (int64_t i = 0; i < k; i++)                                                  \
                sum += ELEM(w, i) * xa[i];                                                   \
            y[(size_t)a * y_stride] = sum;                                                   \
        }                                                                                    \
    }

DEF_FLOAT_DOT(dot_f32w, elem_f32)
DEF_FLOAT_DOT(dot_f16w, elem_f16)
DEF_FLOAT_DOT(dot_bf16w, elem_bf16)

static float dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void axpy_f32(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void row_to_f32(uint32_t type, const void *src, float *dst, int n)
{
    const uint16_t *h = src;
    if (type == GLIM_TYPE_F16)
        for (int i = 0; i < n; i++)
            dst[i] = fp16_to_f32(h[i]);
    else if (type == GLIM_TYPE_BF16)
        for (int i = 0; i < n; i++)
            dst[i] = bf16_to_f32(h[i]);
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

void cpu_kern_fill_scalar(struct cpu_kern *k)
{
    k->level = CPU_LEVEL_SCALAR;
    k->name = "scalar";
    k->dot[GLIM_TYPE_F32] = dot_f32w;
    k->dot[GLIM_TYPE_F16] = dot_f16w;
    k->dot[GLIM_TYPE_BF16] = dot_bf16w;
    k->dot[GLIM_TYPE_Q8_0] = dot_q8_0;
    k->dot[GLIM_TYPE_Q4_0] = dot_q4_0;
    k->dot[GLIM_TYPE_Q4_K] = dot_q4_k;
    k->dot[GLIM_TYPE_Q5_K] = dot_q5_k;
    k->dot[GLIM_TYPE_Q6_K] = dot_q6_k;
    k->act[GLIM_TYPE_F32] = k->act[GLIM_TYPE_F16] = k->act[GLIM_TYPE_BF16] = CPU_ACT_F32;
    k->act[GLIM_TYPE_Q8_0] = k->act[GLIM_TYPE_Q4_0] = CPU_ACT_Q8_32;
    k->act[GLIM_TYPE_Q4_K] = k->act[GLIM_TYPE_Q5_K] = k->act[GLIM_TYPE_Q6_K] = CPU_ACT_Q8_K;
    k->quant_q8_k = cpu_quant_q8_k_ref;
    k->quant_q8_32 = cpu_quant_q8_32_ref;
    k->dot_f32 = dot_f32;
    k->axpy_f32 = axpy_f32;
    k->row_to_f32 = row_to_f32;
}
