/* cuda_check.h — what the stand-alone dev/cuda .cu programs share: CHECK(call) exits with the
 * file, line, call and CUDA's message when a runtime call fails; the timer, acquire load, sort
 * order, block sum and chunk claims the device models and probes use. Header-only. */
#ifndef GLIM_DEV_CUDA_CHECK_H
#define GLIM_DEV_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

/* the global timer (ns), an acquire load of a counter and the SM id, for the device models */
static __device__ __forceinline__ unsigned long long now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ unsigned ld_acq(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* the SM a thread runs on */
static __device__ __forceinline__ unsigned smid(void)
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

/* qsort order of run times */
static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* the sum of ss over a block of W warps (every thread gets it) */
template <int W>
static __device__ float block_sum(float ss)
{
    __shared__ float red[W];
    for (int k = 16; k; k >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, k);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.0f;
    for (int w = 0; w < W; w++)
        t += red[w];
    __syncthreads();
    return t;
}

/* A warp's claim of the next chunk from a count (global or shared): lane 0 adds now, every lane
 * reads it later (claim_take), so the add's latency hides under the chunk in hand */
static __device__ __forceinline__ unsigned claim_issue(unsigned *ctr, int lane)
{
    return lane == 0 ? atomicAdd(ctr, 1u) : 0u;
}

static __device__ __forceinline__ unsigned claim_take(unsigned v)
{
    return __shfl_sync(0xffffffffu, v, 0);
}

#endif
