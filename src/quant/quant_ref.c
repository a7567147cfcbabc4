/*
 * quant_ref.c — scalar reference dequantizers, dots and simple quantizers.
 *
 * These define the formats for glim: the SIMD/CUDA kernels are tested
 * against them. Layouts are llama.cpp's ggml-common.h (spec: model.md §4.1).
 * Dequantization computes each weight in fp32 exactly as llama.cpp's
 * dequantize_row_* does ((d*sc)*q - dmin*m).
 *
 * Dots: each block is dequantized to f32 and multiplied with x, the
 * products accumulated in DOUBLE, the sum rounded to float once at the end.
 * That makes _ref a slightly better-than-fp32 oracle for the fast kernels.
 *
 * Quantizers here are deliberately simple (round to nearest, min/max
 * scales); the searched, llama.cpp-quality ones live in quantize.c.
 * n is always a multiple of the block size (the caller checks). Any thread.
 */
#include "quant_ref.h"

#include <math.h>
#include <string.h>

/* round half away from zero, as a plain int */
static int round_int(float v)
{
    return (int)lroundf(v);
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- 6-bit scale packing shared by Q4_K and Q5_K ----------------------
 * s[0..3]  : bits 0-5 = sc[0..3], bits 6-7 = high 2 bits of sc[4..7]
 * s[4..7]  : bits 0-5 = m[0..3],  bits 6-7 = high 2 bits of m[4..7]
 * s[8..11] : low nibble = low 4 bits of sc[4..7], high nibble = low 4 bits of m[4..7]
 */
void quant_k4_scale_min_get(const uint8_t s[12], int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

void quant_k4_scales_pack(uint8_t s[12], const uint8_t sc[8], const uint8_t m[8])
{
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j] = sc[j] & 63;
        s[j + 4] = m[j] & 63;
    }
    for (int j = 4; j < 8; j++) {
        s[j + 4] = (uint8_t)((sc[j] & 0x0f) | ((m[j] & 0x0f) << 4));
        s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        s[j] |= (uint8_t)((m[j] >> 4) << 6);
    }
}

/* ---- code placement ---------------------------------------------------
 * Q4_K/Q5_K: 4 chunks of 64 weights; chunk c uses qs[32c..32c+31]: low
 * nibble = weight 64c+l, high nibble = weight 64c+32+l. Q5_K's 5th bit of
 * weight t = 32j+l is bit j of qh[l].
 */
/* codes 64c+l (low nibble) and 64c+32+l (high nibble) in byte 32c+l */
static void k45_nibbles_pack(uint8_t qs[QK_K / 2], const uint8_t q[QK_K])
{
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
}

void quant_k45_pack(void *dst, int64_t i, int nmax, uint16_t d, uint16_t dmin, const uint8_t sc[8],
                    const uint8_t m[8], const uint8_t q[QK_K])
{
    if (nmax == 31) {   /* Q5_K: bit 4 of code t is bit t/32 of qh[t%32] */
        struct block_q5_k *b = (struct block_q5_k *)dst + i;
        b->d = d, b->dmin = dmin;
        quant_k4_scales_pack(b->scales, sc, m);
        k45_nibbles_pack(b->qs, q);
        memset(b->qh, 0, sizeof b->qh);
        for (int t = 0; t < QK_K; t++)
            b->qh[t % 32] |= (uint8_t)(((q[t] >> 4) & 1) << (t / 32));
    } else {
        struct block_q4_k *b = (struct block_q4_k *)dst + i;
        b->d = d, b->dmin = dmin;
        quant_k4_scales_pack(b->scales, sc, m);
        k45_nibbles_pack(b->qs, q);
    }
}

/* Q6_K: two halves of 128; in half h, for l < 32 with QL = ql+64h, QH = qh+32h:
 * weight 128h+l    = QL[l] low  | QH[l] bits 0-1
 * weight 128h+32+l = QL[l+32] low | QH[l] bits 2-3
 * weight 128h+64+l = QL[l] high | QH[l] bits 4-5
 * weight 128h+96+l = QL[l+32] high | QH[l] bits 6-7     (codes stored +32) */
void quant_q6k_codes_pack(struct block_q6_k *b, const int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        const int8_t *qq = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            int q0 = qq[l] + 32, q1 = qq[l + 32] + 32, q2 = qq[l + 64] + 32, q3 = qq[l + 96] + 32;
            ql[l] = (uint8_t)((q0 & 15) | ((q2 & 15) << 4));
            ql[l + 32] = (uint8_t)((q1 & 15) | ((q3 & 15) << 4));
            qh[l] = (uint8_t)((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
        }
    }
}

/* ---- dequantizers ------------------------------------------------------ */

void quant_f32_to_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f16_to_f32(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = fp16_to_f32(h[i]);
}

void quant_bf16_to_f32(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_to_f32(h[i]);
}

/* Q8_0: fp16 d, int8 q[32]; w = d*q */
void quant_q8_0_to_f32(const void *src, float *dst, int64_t n)
{
    const struct block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++)
            dst[j] = d * (float)b[i].qs[j];
    }
}

/* Q4_0: fp16 d, 16 bytes; weight j<16 = low nibble of qs[j], j>=16 = high
 * nibble of qs[j-16]; w = d*(q-8) */
void quant_q4_0_to_f32(const void *src, float *dst, int64_t n)
{
    const struct block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = d * (float)((b[i].qs[j] & 15) - 8);
            dst[j + QK4_0 / 2] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

/* Q4_K: w = (d*sc[j])*q - dmin*m[j], j = sub-block of 32 */
void quant_q4_k_to_f32(const void *src, float *dst, int64_t n)
{
    const struct block_q4_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_k4_scale_min_get(b[i].scales, 2 * c, &sc0, &m0);
            quant_k4_scale_min_get(b[i].scales, 2 * c + 1, &sc1, &m1);
            float d0 = d * sc0, mn0 = dmin * m0, d1 = d * sc1, mn1 = dmin * m1;
            const uint8_t *qs = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                dst[64 * c + l] = d0 * (float)(qs[l] & 15) - mn0;
                dst[64 * c + 32 + l] = d1 * (float)(qs[l] >> 4) - mn1;
            }
        }
    }
}

/* Q5_K: as Q4_K with a 5th bit from qh; q in 0..31 */
void quant_q5_k_to_f32(const void *src, float *dst, int64_t n)
{
    const struct block_q5_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_k4_scale_min_get(b[i].scales, 2 * c, &sc0, &m0);
            quant_k4_scale_min_get(b[i].scales, 2 * c + 1, &sc1, &m1);
            float d0 = d * sc0, mn0 = dmin * m0, d1 = d * sc1, mn1 = dmin * m1;
            const uint8_t *qs = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                int h0 = (b[i].qh[l] >> (2 * c)) & 1, h1 = (b[i].qh[l] >> (2 * c + 1)) & 1;
                dst[64 * c + l] = d0 * (float)((qs[l] & 15) | (h0 << 4)) - mn0;
                dst[64 * c + 32 + l] = d1 * (float)((qs[l] >> 4) | (h1 << 4)) - mn1;
            }
        }
    }
}

/* Q6_K: w = d * sc[t/16] * (q-32), placement in quant_q6k_codes_pack */
void quant_q6_k_to_f32(const void *src, float *dst, int64_t n)
{
    const struct block_q6_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = fp16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            float *y = dst + 128 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                int q0 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[l / 16] * (float)q0;
                y[l + 32] = d * (float)sc[2 + l / 16] * (float)q1;
                y[l + 64] = d * (float)sc[4 + l / 16] * (float)q2;
                y[l + 96] = d * (float)sc[6 + l / 16] * (float)q3;
            }
        }
    }
}

/* Q8_K (activation format): f32 d, int8 q[256]; w = d*q */
void quant_q8_k_to_f32(const void *src, float *dst, int64_t n)
{
    const struct block_q8_k *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int j = 0; j < QK_K; j++)
            dst[j] = b[i].d * (float)b[i].qs[j];
}

/* ---- simple quantizers ------------------------------------------------- */

void quant_f32_from_f32(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f16_from_f32(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = f32_to_fp16(src[i]);
}

void quant_bf16_from_f32(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = f32_to_bf16(src[i]);
}

/* Q8_0: d = amax/127 (rounded to fp16 first so codes match the stored d) */
void quant_q8_0_from_f32(const float *src, void *dst, int64_t n)
{
    struct block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, src += QK8_0) {
        float amax = 0;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(src[j]));
        b[i].d = f32_to_fp16(amax / 127.0f);
        float d = fp16_to_f32(b[i].d), id = d != 0 ? 1.0f / d : 0;
        for (int j = 0; j < QK8_0; j++)
            b[i].qs[j] = (int8_t)clampi(round_int(src[j] * id), -127, 127);
    }
}

/* Q4_0: the largest-magnitude value maps to code 0 (-8*d), so d = max/-8
 * keeps its sign, as llama.cpp does; codes clamp to 0..15 */
void quant_q4_0_from_f32(const float *src, void *dst, int64_t n)
{
    struct block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0) {
        float amax = 0, vmax = 0;
        for (int j = 0; j < QK4_0; j++)
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                vmax = src[j];
            }
        b[i].d = f32_to_fp16(vmax / -8.0f);
        float d = fp16_to_f32(b[i].d), id = d != 0 ? 1.0f / d : 0;
        uint8_t q[QK4_0];
        for (int j = 0; j < QK4_0; j++)
            q[j] = (uint8_t)clampi(round_int(src[j] * id) + 8, 0, 15);
        for (int j = 0; j < QK4_0 / 2; j++)
            b[i].qs[j] = (uint8_t)(q[j] | (q[j + QK4_0 / 2] << 4));
    }
}

/* Q4_K / Q5_K with min/max: per sub-block of 32, scale = (max-min)/nmax with
 * min clamped to <= 0; the 8 scales and 8 mins are quantized to 6 bits
 * against d = max(scale)/63, dmin = max(-min)/63; codes are then rounded
 * against the stored (quantized) scale and min. */
static void k4_minmax(const float *x, int nmax, uint16_t *pd, uint16_t *pdmin, uint8_t sc[8],
                      uint8_t m[8], uint8_t q[QK_K])
{
    float scale[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = x[32 * j];
        for (int l = 0; l < 32; l++) {
            lo = fminf(lo, x[32 * j + l]);
            hi = fmaxf(hi, x[32 * j + l]);
        }
        scale[j] = hi > lo ? (hi - lo) / (float)nmax : 0;
        mins[j] = -lo;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, mins[j]);
    }
    *pd = f32_to_fp16(max_scale / 63.0f);
    *pdmin = f32_to_fp16(max_min / 63.0f);
    float d = fp16_to_f32(*pd), dmin = fp16_to_f32(*pdmin);
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? clampi(round_int(scale[j] / d), 0, 63) : 0);
        m[j] = (uint8_t)(dmin > 0 ? clampi(round_int(mins[j] / dmin), 0, 63) : 0);
        float ds = d * sc[j], dm = dmin * m[j];
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)(ds > 0 ? clampi(round_int((x[32 * j + l] + dm) / ds), 0, nmax) : 0);
    }
}

static void k45_from_f32(const float *src, void *dst, int64_t n, int nmax)
{
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        uint16_t d, dmin;
        uint8_t sc[8], m[8], q[QK_K];
        k4_minmax(src, nmax, &d, &dmin, sc, m, q);
        quant_k45_pack(dst, i, nmax, d, dmin, sc, m, q);
    }
}

void quant_q4_k_from_f32(const float *src, void *dst, int64_t n) { k45_from_f32(src, dst, n, 15); }
void quant_q5_k_from_f32(const float *src, void *dst, int64_t n) { k45_from_f32(src, dst, n, 31); }

/* Q6_K symmetric: per 16 weights scale = amax/31, d = max|scale|/127,
 * 8-bit signed sub-scales, codes -32..31 */
void quant_q6_k_from_f32(const float *src, void *dst, int64_t n)
{
    struct block_q6_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float scale[16], max_scale = 0;
        for (int j = 0; j < 16; j++) {
            float amax = 0;
            for (int l = 0; l < 16; l++)
                amax = fmaxf(amax, fabsf(src[16 * j + l]));
            scale[j] = amax / 31.0f;
            max_scale = fmaxf(max_scale, scale[j]);
        }
        b[i].d = f32_to_fp16(max_scale / 127.0f);
        float d = fp16_to_f32(b[i].d);
        int8_t q[QK_K];
        for (int j = 0; j < 16; j++) {
            b[i].scales[j] = (int8_t)(d > 0 ? clampi(round_int(scale[j] / d), -128, 127) : 0);
            float ds = d * b[i].scales[j];
            for (int l = 0; l < 16; l++)
                q[16 * j + l] = (int8_t)(ds != 0 ? clampi(round_int(src[16 * j + l] / ds), -32, 31) : 0);
        }
        quant_q6k_codes_pack(&b[i], q);
    }
}

/* Q8_K as llama.cpp's quantize_row_q8_K: the largest-magnitude value maps to
 * -127 (d keeps its sign), bsums = sum of each 16 codes */
void quant_q8_k_from_f32(const float *src, void *dst, int64_t n)
{
    struct block_q8_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, src += QK_K) {
        float amax = 0, vmax = 0;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                vmax = src[j];
            }
        memset(&b[i], 0, sizeof b[i]);
        if (amax == 0)
            continue;
        float iscale = -127.0f / vmax;
        for (int j = 0; j < QK_K; j++)
            b[i].qs[j] = (int8_t)clampi(round_int(iscale * src[j]), -128, 127);
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += b[i].qs[16 * j + l];
            b[i].bsums[j] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}

/* ---- dots: dequantize one block, multiply, accumulate in double -------- */

static double dot_blocks_d(quant_to_f32_fn to_f32, int block_elems, int block_bytes, const void *w,
                           const float *x, int64_t n)
{
    float buf[QK_K];
    double sum = 0;
    const uint8_t *p = w;
    for (int64_t i = 0; i < n; i += block_elems, p += block_bytes) {
        to_f32(p, buf, block_elems);
        for (int j = 0; j < block_elems; j++)
            sum += (double)buf[j] * (double)x[i + j];
    }
    return sum;
}

static float dot_blocks(quant_to_f32_fn to_f32, int block_elems, int block_bytes, const void *w,
                        const float *x, int64_t n)
{
    return (float)dot_blocks_d(to_f32, block_elems, block_bytes, w, x, n);
}

float quant_f32_dot(const void *w, const float *x, int64_t n)
{
    const float *a = w;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)a[i] * (double)x[i];
    return (float)sum;
}

/* plain types go through dot_blocks in chunks of 256 elements (the last chunk may be short) */
static float dot_plain(quant_to_f32_fn to_f32, int elem_bytes, const void *w, const float *x,
                       int64_t n)
{
    double sum = 0;
    const uint8_t *p = w;
    for (int64_t i = 0; i < n; i += QK_K) {
        int64_t k = n - i < QK_K ? n - i : QK_K;
        sum += dot_blocks_d(to_f32, (int)k, (int)k * elem_bytes, p + i * elem_bytes, x + i, k);
    }
    return (float)sum;
}

float quant_f16_dot(const void *w, const float *x, int64_t n)
{
    return dot_plain(quant_f16_to_f32, 2, w, x, n);
}

float quant_bf16_dot(const void *w, const float *x, int64_t n)
{
    return dot_plain(quant_bf16_to_f32, 2, w, x, n);
}

float quant_q8_0_dot(const void *w, const float *x, int64_t n)
{
    return dot_blocks(quant_q8_0_to_f32, QK8_0, sizeof(struct block_q8_0), w, x, n);
}

float quant_q4_0_dot(const void *w, const float *x, int64_t n)
{
    return dot_blocks(quant_q4_0_to_f32, QK4_0, sizeof(struct block_q4_0), w, x, n);
}

float quant_q4_k_dot(const void *w, const float *x, int64_t n)
{
    return dot_blocks(quant_q4_k_to_f32, QK_K, sizeof(struct block_q4_k), w, x, n);
}

float quant_q5_k_dot(const void *w, const float *x, int64_t n)
{
    return dot_blocks(quant_q5_k_to_f32, QK_K, sizeof(struct block_q5_k), w, x, n);
}

float quant_q6_k_dot(const void *w, const float *x, int64_t n)
{
    return dot_blocks(quant_q6_k_to_f32, QK_K, sizeof(struct block_q6_k), w, x, n);
}

float quant_q8_k_dot(const void *w, const float *x, int64_t n)
{
    return dot_blocks(quant_q8_k_to_f32, QK_K, sizeof(struct block_q8_k), w, x, n);
}
