/*
 * quant_act.c — activations to int8 on the fly, scalar versions (the
 * definition; SIMD versions must produce the same bytes).
 *
 * Scale d = amax / 127 and q = round-half-away(x / d), so |q| <= 127 (never
 * -128: the SIMD kernels negate activations with sign tricks) and
 * |x - d*q| <= d / 2. We multiply by the reciprocal 127/amax, as the SIMD
 * versions do, so all levels round identically.
 */
#include <math.h>

#include "cpu_kern.h"

static int8_t q8_round(float v)
{
    /* v in [-127, 127] up to rounding of the reciprocal */
    int q = (int)roundf(v);
    return (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
}

static float block_amax(const float *x, int n)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    return amax;
}

void cpu_quant_q8_k_ref(const float *x, struct block_q8_k *y, int64_t k)
{
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K, y++) {
        float amax = block_amax(x, QK_K);
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        for (int i = 0; i < QK_K; i++)
            y->qs[i] = q8_round(x[i] * id);
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += y->qs[16 * j + i];
            y->bsums[j] = (int16_t)s;
        }
    }
}

void cpu_quant_q8_32_ref(const float *x, struct cpu_q8_32 *y, int64_t k)
{
    for (int64_t b = 0; b < k / 32; b++, x += 32, y++) {
        float amax = block_amax(x, 32);
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        int s = 0;
        for (int i = 0; i < 32; i++) {
            y->qs[i] = q8_round(x[i] * id);
            s += y->qs[i];
        }
        y->sum = s;
    }
}

size_t cpu_act_row_bytes(int act, int64_t k)
{
    switch (act) {
    case CPU_ACT_F32: return (size_t)k * sizeof(float);
    case CPU_ACT_Q8_K: return k % QK_K ? 0 : (size_t)(k / QK_K) * sizeof(struct block_q8_k);
    case CPU_ACT_Q8_32: return k % 32 ? 0 : (size_t)(k / 32) * sizeof(struct cpu_q8_32);
    default: return 0;
    }
}
