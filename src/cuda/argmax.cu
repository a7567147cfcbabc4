/*
 * argmax.cu — the greedy pick on the device (backend.h argmax): per row the index of the
 * largest value, NaN counting as -inf and the lowest index winning among equals (the
 * sampler's order, src/runtime/sampler_argmax.c), so a decode step can make the next step's
 * token itself and the host need not download 808 KB of logits to choose it.
 *
 * WHY a grid per row: one CTA pulls a 202048-wide row at a few hundred GB/s (~4 us); AM_CTAS
 * CTAs a row each take a slice, leave their (key, index) pair, and the last to arrive (a
 * count per row, reset by it for the next launch and graph replay) reduces the pairs.
 */
#include <limits.h>

#include "cuda_util.cuh"

#define AM_THREADS 256
#define AM_CTAS    48   /* CTAs a row */
#define AM_ROWS    16   /* rows a launch (more are launched in groups) */

/* (k, i) replaces (bk, bi) when it comes first in the greedy order */
static __device__ __forceinline__ void am_take(float &bk, int &bi, float k, int i)
{
    if (k > bk || (k == bk && i < bi))
        bk = k, bi = i;
}

static __device__ __forceinline__ void am_warp(float &bk, int &bi)
{
    for (int o = 16; o; o >>= 1) {
        float k = __shfl_xor_sync(0xffffffffu, bk, o);
        int i = __shfl_xor_sync(0xffffffffu, bi, o);
        am_take(bk, bi, k, i);
    }
}

/* (bk, bi) of the whole block in every thread of warp 0 */
static __device__ __forceinline__ void am_block(float &bk, int &bi, float *sk, int *si)
{
    am_warp(bk, bi);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        sk[w] = bk, si[w] = bi;
    __syncthreads();
    if (w == 0) {
        bk = lane < (int)blockDim.x / 32 ? sk[lane] : -INFINITY;
        bi = lane < (int)blockDim.x / 32 ? si[lane] : INT_MAX;
        am_warp(bk, bi);
    }
}

static __global__ void __launch_bounds__(AM_THREADS) argmax_kernel(int32_t *out, const float *x, int64_t n,
                                                                  int32_t *pos_inc, float *part_k, int *part_i,
                                                                  unsigned *count)
{
    __shared__ float sk[32];
    __shared__ int si[32];
    __shared__ bool last;
    int r = blockIdx.y;
    const float *xr = x + (int64_t)r * n;
    int64_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
    float bk = -INFINITY;
    int bi = INT_MAX;   /* an empty slice loses to any index, a row of -inf keys keeps index 0 */
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
        float v = xr[j];
        am_take(bk, bi, v != v ? -INFINITY : v, (int)j);
    }
    am_block(bk, bi, sk, si);
    if (threadIdx.x == 0) {
        part_k[r * gridDim.x + blockIdx.x] = bk;
        part_i[r * gridDim.x + blockIdx.x] = bi;
        __threadfence();
        last = atomicAdd(&count[r], 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    bk = -INFINITY, bi = INT_MAX;
    for (int j = threadIdx.x; j < (int)gridDim.x; j += blockDim.x)
        am_take(bk, bi, __ldcg(part_k + r * gridDim.x + j), __ldcg(part_i + r * gridDim.x + j));
    __syncthreads();   /* sk/si are reused */
    am_block(bk, bi, sk, si);
    if (threadIdx.x == 0) {
        out[r] = bi;
        count[r] = 0;
        if (pos_inc && r == 0)   /* once, whatever the rows */
            pos_inc[0] += 1;
    }
}

void cuda_argmax(struct cuda_ctx *c, int32_t *out, const float *x, int n_rows, int64_t n, int32_t *pos_inc)
{
    if (n_rows <= 0 || n <= 0)
        return;
    if (n > INT_MAX) {
        cuda_check(c, cudaErrorInvalidValue, "argmax: rows longer than INT_MAX", __FILE__, __LINE__);
        return;
    }
    size_t need = (size_t)AM_ROWS * AM_CTAS * (sizeof(float) + sizeof(int)) + AM_ROWS * sizeof(unsigned);
    bool fresh = c->am_part.nbytes < need;
    if (!cuda_buf_reserve(c, &c->am_part, need))
        return;
    float *part_k = (float *)c->am_part.p;
    int *part_i = (int *)(part_k + AM_ROWS * AM_CTAS);
    unsigned *count = (unsigned *)(part_i + AM_ROWS * AM_CTAS);
    if (fresh && CUDA_TRY(c, cudaMemsetAsync(count, 0, AM_ROWS * sizeof(unsigned), c->stream)))
        return;
    for (int r0 = 0; r0 < n_rows; r0 += AM_ROWS) {
        int rows = n_rows - r0 < AM_ROWS ? n_rows - r0 : AM_ROWS;
        argmax_kernel<<<dim3(AM_CTAS, (unsigned)rows), AM_THREADS, 0, c->stream>>>(
            out + r0, x + (int64_t)r0 * n, n, r0 == 0 ? pos_inc : NULL, part_k, part_i, count);
        CUDA_LAUNCHED(c, "argmax");
    }
}
