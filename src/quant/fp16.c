/*
 * fp16.c — IEEE half and bfloat16 <-> f32 scalar conversions.
 *
 * Exact: f32 -> 16-bit rounds to nearest, ties to even, overflows to inf,
 * keeps NaN a (quiet) NaN and produces half subnormals. Written with integer
 * bit operations so the result never depends on the FPU rounding mode or on
 * whether the compiler has _Float16. Any thread.
 */
#include "quant.h"

#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* half: 1 sign, 5 exponent (bias 15), 10 mantissa bits */
float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;

    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31)   /* inf (mant 0) or NaN (payload kept) */
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

/* Round m >> shift to nearest, ties to even (shift >= 1). */
static uint32_t shift_rne(uint32_t m, int shift)
{
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return q;
}

uint16_t f32_to_fp16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) {   /* inf, or NaN forced quiet so it cannot become inf */
        if (ax == 0x7f800000u)
            return sign | 0x7c00;
        return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    }
    int e = (int)(ax >> 23) - 127;           /* unbiased exponent */
    uint32_t m = (ax & 0x7fffff) | 0x800000; /* with the implicit bit */
    if (e >= -14) {
        if (e > 15)
            return sign | 0x7c00;
        /* normal: a carry out of the mantissa correctly bumps the exponent
         * (and 65520 and up become inf, 0x7c00) */
        uint32_t h = ((uint32_t)(e + 15) << 10) + shift_rne(m, 13) - 0x400;
        return (uint16_t)(sign | (h > 0x7c00 ? 0x7c00 : h));
    }
    if (ax < 0x00800000u || e < -25)
        return sign;   /* f32 subnormal or below half of the smallest half subnormal */
    /* subnormal half: value in units of 2^-24 is m * 2^(e+1); a round-up to
     * 0x400 is exactly the smallest normal's encoding */
    return (uint16_t)(sign | shift_rne(m, -e - 1));
}

/* bf16 is the top half of an f32 */
float bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)     /* NaN: keep it NaN, quiet */
        return (uint16_t)((x >> 16) | 0x40);
    /* ties to even; overflow past the largest finite rounds to inf as it should */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
