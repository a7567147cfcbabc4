/*
 * sync_bench.cu — what one dependency between two steps of a decode token costs on this GPU, so
 * the persistent-layer plan (docs/CUDA.md) can be priced before it is written:
 *   chain     a CUDA graph of N kernels, each reading what its predecessor wrote (the decode
 *             step's shape: one launch per op), with and without programmatic dependent launch,
 *             one CTA or a full grid (4 CTAs per SM) each
 *   grid      N grid-wide barriers inside one kernel whose CTAs are all resident (a counter in
 *             global memory: arrive with a release add, spin with acquire loads)
 *   cluster   N barrier.cluster round trips inside clusters of 8 CTAs (sm_90)
 * Prints microseconds per step; never asserts (a benchmark).
 *
 * Build and run (GPU machine): nvcc -arch=sm_90 -O3 -o /tmp/sync_bench dev/cuda/sync_bench.cu && /tmp/sync_bench
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_check.h"

namespace cg = cooperative_groups;

/* One step of the chain: wait for the predecessor (PDL), let the successor start, then carry the
 * value on, so each kernel depends on the one before it through memory. */
static __global__ void chain_step(int *buf, int i)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        buf[i] = buf[i - 1] + 1;
}

/* The same with add_rmsnorm's work (1 CTA of 1024 threads): read the 6656 floats the
 * predecessor wrote, one block-wide sum, write 6656 floats for the successor. */
#define NORM_N 6656

static __device__ void norm_row_1024(const float *src, float *dst)   /* 1024 threads */
{
    float v[7], ss = 0.0f;
    for (int j = 0; j < 7; j++) {
        int e = threadIdx.x + 1024 * j;
        v[j] = e < NORM_N ? src[e] : 0.0f;
        ss += v[j] * v[j];
    }
    float r = rsqrtf(block_sum<32>(ss) / NORM_N + 1e-5f);
    for (int j = 0; j < 7; j++) {
        int e = threadIdx.x + 1024 * j;
        if (e < NORM_N)
            dst[e] = v[j] * r;
    }
}

static __global__ void __launch_bounds__(1024) chain_norm(float *buf, int i)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
    norm_row_1024(buf + (size_t)(i - 1) % 2 * NORM_N, buf + (size_t)i % 2 * NORM_N);
}

/* add_rmsnorm folded into a consumer grid (the fold docs/CUDA.md proposes): every cluster of 8
 * CTAs of 128 threads (1024 threads, add_rmsnorm's block) reads the 6656 floats, sums them over
 * the cluster through distributed shared memory, and ends with the whole normalized row in each
 * CTA's shared memory (each CTA scales its eighth and pushes it to all 8); CTA 0 of the grid
 * writes the row out for the next step. The step then costs the boundary of a full grid plus
 * this in-cluster work. */
static __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(128) chain_cluster_norm(float *buf, int i)
{
    __shared__ float part[8][4];
    __shared__ float row[NORM_N];
    cg::cluster_group cl = cg::this_cluster();
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
    const float *src = buf + (size_t)(i - 1) % 2 * NORM_N;
    float *dst = buf + (size_t)i % 2 * NORM_N;
    unsigned rank = cl.block_rank();
    int vt = (int)rank * 128 + threadIdx.x;   /* the thread of a 1024-thread block this one plays */
    float v[7], ss = 0.0f;
    for (int j = 0; j < 7; j++) {
        int e = vt + 1024 * j;
        v[j] = e < NORM_N ? src[e] : 0.0f;
        ss += v[j] * v[j];
    }
    for (int o = 16; o; o >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) {   /* every CTA gets every warp's sum */
        for (unsigned r = 0; r < 8; r++)
            cl.map_shared_rank(&part[0][0], r)[rank * 4 + (threadIdx.x >> 5)] = ss;
    }
    cl.sync();
    ss = threadIdx.x < 32 ? (&part[0][0])[threadIdx.x] : 0.0f;
    for (int o = 16; o; o >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
    ss = __shfl_sync(0xffffffffu, ss, 0);
    __shared__ float rs;
    if (threadIdx.x == 0)
        rs = rsqrtf(ss / NORM_N + 1e-5f);
    __syncthreads();
    float r = rs;
    for (int j = 0; j < 7; j++) {   /* this CTA's eighth, pushed to every CTA of the cluster */
        int e = vt + 1024 * j;
        if (e < NORM_N)
            for (unsigned q = 0; q < 8; q++)
                cl.map_shared_rank(row, q)[e] = v[j] * r;
    }
    cl.sync();
    if (blockIdx.x == 0)
        for (int e = threadIdx.x; e < NORM_N; e += 128)
            dst[e] = row[e];
}

/* add_rmsnorm done by every CTA of a consumer grid on its own (128 threads, no cluster): read o and
 * x (2 x 26 KB, the previous step's), o's sum of squares, x' = x + o r_o, x''s sum, h = x' r_x
 * quantized to int8 blocks of 32 into shared memory (what the GEMV would read); CTA 0 writes x'
 * (to the other buffer: in the model x would be double-buffered) for the next step. */
static __global__ void __launch_bounds__(128) chain_block_norm(float *buf, int i)
{
    __shared__ int8_t hq[NORM_N];
    __shared__ float hd[NORM_N / 32];
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
    const float *x = buf + (size_t)(i - 1) % 2 * 2 * NORM_N, *o = x + NORM_N;
    float *xn = buf + (size_t)i % 2 * 2 * NORM_N;
    const int per = NORM_N / 4 / 128 + 1;   /* float4s a thread: 13 */
    float4 ov[per], xv[per];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < per; j++) {
        int e = threadIdx.x + 128 * j;
        ov[j] = e < NORM_N / 4 ? ((const float4 *)o)[e] : make_float4(0, 0, 0, 0);
        xv[j] = e < NORM_N / 4 ? ((const float4 *)x)[e] : make_float4(0, 0, 0, 0);
        ss += ov[j].x * ov[j].x + ov[j].y * ov[j].y + ov[j].z * ov[j].z + ov[j].w * ov[j].w;
    }
    for (int pass = 0; pass < 2; pass++) {
        float r = rsqrtf(block_sum<4>(ss) / NORM_N + 1e-5f);
        ss = 0.0f;
#pragma unroll
        for (int j = 0; j < per; j++) {
            if (pass == 0) {   /* x' = x + o r */
                xv[j].x += ov[j].x * r, xv[j].y += ov[j].y * r, xv[j].z += ov[j].z * r, xv[j].w += ov[j].w * r;
                ss += xv[j].x * xv[j].x + xv[j].y * xv[j].y + xv[j].z * xv[j].z + xv[j].w * xv[j].w;
            } else {   /* h = x' r, quantized: 8 threads hold a block of 32 */
                int e = threadIdx.x + 128 * j;
                float4 h = make_float4(xv[j].x * r, xv[j].y * r, xv[j].z * r, xv[j].w * r);
                float am = fmaxf(fmaxf(fabsf(h.x), fabsf(h.y)), fmaxf(fabsf(h.z), fabsf(h.w)));
                for (int k = 1; k < 8; k <<= 1)
                    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, k));
                float d = am / 127.0f, id = am > 0.0f ? 1.0f / d : 0.0f;
                if (e < NORM_N / 4) {
                    *(char4 *)(hq + 4 * e) = make_char4((char)__float2int_rn(h.x * id), (char)__float2int_rn(h.y * id),
                                                        (char)__float2int_rn(h.z * id), (char)__float2int_rn(h.w * id));
                    if ((e & 7) == 0)
                        hd[e >> 3] = d;
                    if (blockIdx.x == 0)
                        ((float4 *)xn)[e] = xv[j];
                }
            }
        }
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x < NORM_N / 32)   /* keep the row live */
        xn[NORM_N + threadIdx.x] = hd[threadIdx.x] + hq[threadIdx.x];
}

/* Instantiate a captured graph, replay it once, then time 5 replays: us per step */
static double replay_us(cudaStream_t s, cudaGraph_t g, int steps)
{
    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    CHECK(cudaGraphLaunch(ge, s));   /* warm-up */
    CHECK(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    const int reps = 5;
    CHECK(cudaEventRecord(a, s));
    for (int r = 0; r < reps; r++)
        CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    return 1000.0 * ms / ((double)reps * steps);
}

/* A launch config on s, with programmatic dependent launch when pdl */
static cudaLaunchConfig_t step_cfg(cudaStream_t s, int grid, int block, bool pdl, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cfg;
}

static double chain_us(int n, int grid, bool pdl, bool norm = false, bool cnorm = false, bool bnorm = false)
{
    int *buf;
    norm = norm || cnorm || bnorm;
    size_t nb = norm ? 4 * NORM_N * sizeof(float) : (n + 1) * sizeof(int);
    CHECK(cudaMalloc(&buf, nb));
    CHECK(cudaMemset(buf, 0, nb));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int i = 1; i <= n; i++) {
        cudaLaunchAttribute attr[1];
        cudaLaunchConfig_t cfg = step_cfg(s, grid, norm && !cnorm && !bnorm ? 1024 : 128, pdl, attr);
        if (bnorm)
            CHECK(cudaLaunchKernelEx(&cfg, chain_block_norm, (float *)buf, i));
        else if (cnorm)
            CHECK(cudaLaunchKernelEx(&cfg, chain_cluster_norm, (float *)buf, i));
        else if (norm)
            CHECK(cudaLaunchKernelEx(&cfg, chain_norm, (float *)buf, i));
        else
            CHECK(cudaLaunchKernelEx(&cfg, chain_step, buf, i));
    }
    CHECK(cudaStreamEndCapture(s, &g));
    double us = replay_us(s, g, n);
    int last = n;
    if (!norm)
        CHECK(cudaMemcpy(&last, buf + n, sizeof last, cudaMemcpyDeviceToHost));
    if (last != n)
        printf("  (chain value %d, expected %d)\n", last, n);
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(buf));
    return us;
}

/* n grid-wide barriers: every CTA adds one to a monotonic counter and waits until it holds
 * (k + 1) * gridDim.x; the counter is never reset, so no barrier can be confused with the next. */
static __global__ void grid_barriers(unsigned *count, int n)
{
    unsigned g = gridDim.x;
    for (int k = 0; k < n; k++) {
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned want = (unsigned)(k + 1) * g, v;
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
            do
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
            while (v < want);
        }
        __syncthreads();
    }
}

/* Time what is launched on the default stream between t_start() and t_stop_us(n): us per step */
static cudaEvent_t t_a, t_b;
static void t_start(void)
{
    if (!t_a) {
        CHECK(cudaEventCreate(&t_a));
        CHECK(cudaEventCreate(&t_b));
    }
    CHECK(cudaEventRecord(t_a));
}

static double t_stop_us(int n)
{
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(t_b));
    CHECK(cudaEventSynchronize(t_b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, t_a, t_b));
    return 1000.0 * ms / n;
}

static double grid_us(int n, int grid)
{
    unsigned *count;
    CHECK(cudaMalloc(&count, sizeof *count));
    CHECK(cudaMemset(count, 0, sizeof *count));
    void *args[] = {&count, &n};
    int warm = 10;
    void *wargs[] = {&count, &warm};
    CHECK(cudaLaunchCooperativeKernel((void *)grid_barriers, dim3(grid), dim3(128), wargs, 0, 0));
    CHECK(cudaMemset(count, 0, sizeof *count));
    t_start();
    CHECK(cudaLaunchCooperativeKernel((void *)grid_barriers, dim3(grid), dim3(128), args, 0, 0));
    double us = t_stop_us(n);
    CHECK(cudaFree(count));
    return us;
}

/* n cluster barriers (arrive.release / wait.acquire) in clusters of 8 CTAs */
static __global__ void __cluster_dims__(8, 1, 1) cluster_barriers(int n, int *sink)
{
    cg::cluster_group cl = cg::this_cluster();
    int v = 0;
    for (int k = 0; k < n; k++) {
        cl.sync();
        v += (int)cl.block_rank();
    }
    if (v == -1)
        *sink = v;
}

static double cluster_us(int n, int grid)
{
    int *sink;
    CHECK(cudaMalloc(&sink, sizeof *sink));
    cluster_barriers<<<grid, 128>>>(10, sink);
    CHECK(cudaGetLastError());
    t_start();
    cluster_barriers<<<grid, 128>>>(n, sink);
    double us = t_stop_us(n);
    CHECK(cudaFree(sink));
    return us;
}

/* ---- a GEMV-shaped pair: does a small kernel between two bulk kernels cost its own time, or
 * more? stream_step stands for a GEMV: 4 CTAs an SM stream their slice of a weight buffer with a
 * register-sized head start issued before the PDL wait (as v3/v5 do) and write one float each.
 * The norm between two of them is chain_norm's work (1 CTA of 1024 threads), or (fold) the last
 * CTA of the producer to finish does it (one fence and one atomic a CTA), so producer and
 * consumer stay adjacent and the consumer's head start overlaps the producer's tail. */
#define ST_U 8   /* 16-byte loads a thread has in flight */
static __device__ float norm_row_128(const float *src, float *dst)   /* 128 threads */
{
    float v[52], ss = 0.0f;
#pragma unroll
    for (int j = 0; j < 52; j++) {
        v[j] = src[threadIdx.x + 128 * j];
        ss += v[j] * v[j];
    }
    float r = rsqrtf(block_sum<4>(ss) / NORM_N + 1e-5f);
#pragma unroll
    for (int j = 0; j < 52; j++)
        dst[threadIdx.x + 128 * j] = v[j] * r;
    return r;
}

static __global__ void __launch_bounds__(128, 4)
    stream_step(const uint4 *w, size_t n16, float *io, unsigned *cnt, int fold)
{
    asm volatile("griddepcontrol.launch_dependents;" :::);
    size_t per = n16 / gridDim.x / (128 * ST_U) * (128 * ST_U), lo = per * blockIdx.x;
    const uint4 *p = w + lo;
    uint4 r[ST_U];
    unsigned acc = 0;
#pragma unroll
    for (int u = 0; u < ST_U; u++)   /* the head start */
        r[u] = __ldg(p + threadIdx.x + 128 * u);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    acc ^= __float_as_uint(io[blockIdx.x & 1023]);   /* the predecessor's output */
    for (size_t at = 128 * ST_U; at < per; at += 128 * ST_U) {
        uint4 q[ST_U];
#pragma unroll
        for (int u = 0; u < ST_U; u++)
            q[u] = __ldg(p + at + threadIdx.x + 128 * u);
#pragma unroll
        for (int u = 0; u < ST_U; u++)
            acc += r[u].x ^ r[u].y ^ r[u].z ^ r[u].w, r[u] = q[u];
    }
#pragma unroll
    for (int u = 0; u < ST_U; u++)
        acc += r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
    for (int k = 16; k; k >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, k);
    if (threadIdx.x == 0)
        io[2 * NORM_N + blockIdx.x] = (float)(acc & 0xffff);
    if (!fold)
        return;
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(cnt, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last) {
        __threadfence();
        norm_row_128(io + NORM_N, io);
        if (threadIdx.x == 0)
            *cnt = 0u;
    }
}

static __global__ void __launch_bounds__(1024) norm_step(float *io)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
    norm_row_1024(io + NORM_N, io);
}

/* mode 0: stream, stream, ...; 1: stream, norm, stream, norm, ...; 2: stream (fold), ... */
static double pair_us(int n, size_t bytes, int mode, int sms)
{
    const int nbuf = 4;   /* 4 buffers: more than L2 holds, so every step streams from memory */
    uint4 *w;
    size_t n16 = bytes / 16;
    CHECK(cudaMalloc(&w, nbuf * bytes));
    CHECK(cudaMemset(w, 1, nbuf * bytes));
    float *io;
    unsigned *cnt;
    CHECK(cudaMalloc(&io, (3 * NORM_N + 4096) * sizeof(float)));
    CHECK(cudaMemset(io, 0, (3 * NORM_N + 4096) * sizeof(float)));
    CHECK(cudaMalloc(&cnt, sizeof *cnt));
    CHECK(cudaMemset(cnt, 0, sizeof *cnt));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < n; i++) {
        cudaLaunchAttribute attr[1];
        cudaLaunchConfig_t cfg = step_cfg(s, 4 * sms, 128, true, attr);
        CHECK(cudaLaunchKernelEx(&cfg, stream_step, (const uint4 *)w + (size_t)(i % nbuf) * n16, n16, io, cnt,
                                 mode == 2 ? 1 : 0));
        if (mode == 1) {
            cfg = step_cfg(s, 1, 1024, true, attr);
            CHECK(cudaLaunchKernelEx(&cfg, norm_step, io));
        }
    }
    CHECK(cudaStreamEndCapture(s, &g));
    double us = replay_us(s, g, n);
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(w));
    CHECK(cudaFree(io));
    CHECK(cudaFree(cnt));
    return us;
}

int main(void)
{
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    int sms = p.multiProcessorCount, per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_barriers, 128, 0));
    printf("%s, %d SMs, sm_%d%d\n", p.name, sms, p.major, p.minor);
    const int n_chain = 1000;
    for (int pdl = 0; pdl < 2; pdl++)
        for (int full = 0; full < 2; full++) {
            int grid = full ? 4 * sms : 1;
            printf("chain   %4d CTAs %-6s %7.2f us a kernel\n", grid, pdl ? "PDL" : "plain", chain_us(n_chain, grid, pdl));
        }
    for (int pdl = 0; pdl < 2; pdl++)
        printf("norm    %4d CTA  %-6s %7.2f us a kernel (26 KB in, 26 KB out, one block sum)\n", 1, pdl ? "PDL" : "plain",
               chain_us(n_chain, 1, pdl, true));
    for (int pdl = 0; pdl < 2; pdl++)
        printf("cnorm   %4d CTAs %-6s %7.2f us a kernel (the same in every cluster of 8, row to shared memory)\n",
               4 * sms / 8 * 8, pdl ? "PDL" : "plain", chain_us(n_chain, 4 * sms / 8 * 8, pdl, false, true));
    for (int pdl = 0; pdl < 2; pdl++)
        for (int g = 1; g <= 4; g *= 4)
            printf("bnorm   %4d CTAs %-6s %7.2f us a kernel (add_rmsnorm + int8 h in every CTA on its own)\n",
                   g * sms, pdl ? "PDL" : "plain", chain_us(n_chain, g * sms, pdl, false, false, true));
    const size_t sizes[3] = {14u << 20, 34u << 20, 75u << 20};   /* Wo, q/k/v/gate, one FFN matrix */
    for (int i = 0; i < 3; i++) {
        double t0 = pair_us(200, sizes[i], 0, sms), t1 = pair_us(200, sizes[i], 1, sms), t2 = pair_us(200, sizes[i], 2, sms);
        printf("stream  %3zu MB a step: alone %7.2f us (%4.0f GB/s); + norm kernel %7.2f (+%.2f); norm in the last CTA %7.2f (+%.2f)\n",
               sizes[i] >> 20, t0, (double)sizes[i] / t0 / 1e3, t1, t1 - t0, t2, t2 - t0);
    }
    int grids[3] = {sms, 4 * sms, 0};
    for (int i = 0; grids[i]; i++) {
        if (grids[i] > per_sm * sms)
            continue;
        printf("grid    %4d CTAs        %7.2f us a barrier\n", grids[i], grid_us(20000, grids[i]));
    }
    printf("cluster %4d CTAs (8)    %7.2f us a barrier\n", 4 * sms / 8 * 8, cluster_us(100000, 4 * sms / 8 * 8));
    return 0;
}
