/* v5_host.h — for the tests that run src/cuda's C-subset header gemv_mma_lane.h on the CPU:
 * CUDA's vector types and the primitives gemv_mma_lane.h asks its includer for, as plain loads.
 * The includer adds v5_mma (an emulated warp) and then includes the header. */
#ifndef GLIM_TEST_V5_HOST_H
#define GLIM_TEST_V5_HOST_H

#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

typedef struct {
    uint32_t x, y;
} uint2;
typedef struct {
    uint32_t x, y, z, w;
} uint4;
typedef struct {
    float x, y;
} float2;

#define V5_FN static inline
#define V5_HD static inline
#define V5_UNROLL

/* a T read from p's bytes (any alignment), returned as R */
#define V5_HOST_LOAD(name, R, T, P)        \
    static inline R name(const P *p)       \
    {                                      \
        T v;                               \
        memcpy(&v, p, sizeof v);           \
        return v;                          \
    }
V5_HOST_LOAD(v5_ldw16, uint4, uint4, void)
V5_HOST_LOAD(v5_ldw8, uint2, uint2, void)
V5_HOST_LOAD(v5_ldu16, uint32_t, uint16_t, uint8_t)
V5_HOST_LOAD(v5_ldu32, uint32_t, uint32_t, uint8_t)

static inline uint2 v5_ldx8(const int8_t *p)
{
    return v5_ldw8(p);
}

static inline float2 v5_ldxd(const float2 *p)
{
    return *p;
}

static inline float v5_h2f(uint32_t bits)
{
    return fp16_to_f32((uint16_t)(bits & 0xffffu));
}

static inline float v5_i2f(int v)   /* gemv_slots.cuh i2f: exact for |v| < 2^22 */
{
    uint32_t u = 0x4B400000u + (uint32_t)v;
    float f;
    memcpy(&f, &u, sizeof f);
    return f - 12582912.0f;
}

static inline float v5_i2f_rn(int v)
{
    return (float)v;
}

#endif
