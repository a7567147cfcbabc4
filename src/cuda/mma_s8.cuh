/*
 * mma_s8.cuh — private to src/cuda: the one tensor-core instruction GEMV v5's lanes use
 * (gemv_mma_lane.h asks its includer for v5_mma), for every kernel that runs those lanes
 * (gemv_mma.cu's launches).
 */
#ifndef GLIM_MMA_S8_CUH
#define GLIM_MMA_S8_CUH

#include <stdint.h>

/* c += A (16 x 32, u8, or s8 when sgn) . B (32 x 8, s8); sgn is a constant at every call */
static __device__ __forceinline__ void v5_mma(int *c, int sgn, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (sgn)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

#endif
