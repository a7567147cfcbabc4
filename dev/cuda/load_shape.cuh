/*
 * load_shape.cuh — the probes' stand-in for one GEMV v5 unit (sweep_probe.cu, tail_probe.cu): a
 * 2304-byte Q4_K tile super-block read as v5 reads it (four 16-byte loads a lane, 2048 bytes a
 * warp, then one 8-byte load a lane), and a use of its bytes with a spin of `spin` cycles standing
 * in for the decode.
 */
#ifndef GLIM_DEV_LOAD_SHAPE_CUH
#define GLIM_DEV_LOAD_SHAPE_CUH

#include <stdint.h>

#define UNIT 2304

static __device__ __forceinline__ void unit_load(const uint8_t *p, int lane, uint4 *q, uint2 &h)
{
#pragma unroll
    for (int c = 0; c < 4; c++)
        q[c] = __ldcs((const uint4 *)(p + 512 * c + 16 * lane));
    h = __ldcs((const uint2 *)(p + 2048 + 8 * lane));
}

static __device__ __forceinline__ unsigned unit_use(const uint4 *q, uint2 h, int spin, unsigned acc)
{
#pragma unroll
    for (int c = 0; c < 4; c++)
        acc ^= q[c].x + q[c].y * 3 + q[c].z * 5 + q[c].w * 7;
    acc ^= h.x + h.y;
    if (spin) {
        long long t0 = clock64();
        while (clock64() - t0 < spin)
            acc = acc * 1664525u + 1013904223u;
    }
    return acc;
}

#endif
