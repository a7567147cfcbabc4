/*
 * tail_probe.cu — how much of a GEMV launch's time is its tail, and does a shared pool of small
 * chunks for the last part of the work take it back? (docs/PERFORMANCE.md, 2026-12-06.)
 *
 * The sweep probe (sweep_probe.cu) read 150 MB in v5's load shape (2112 warps, a contiguous range
 * each, 2304-byte units, U in flight a lane) at 2.76 TB/s on an H100 and 1100 MB at 3.08: the same
 * kernel loses ~5 us a launch, and v5's trace has its warps end over 7-13 us. Here each warp first
 * streams a static range of (1 - f) of its share; the last f of the matrix is cut into chunks of
 * C units that warps claim from G counters (warp w asks counter w % G, the claim for the next chunk
 * issued before the current one is read). Spin S cycles a unit stands in for the decode. Prints, per
 * setting, TB/s (best of 10, events) and the warps' end times (first, median, last) in us after the
 * first warp's start, from the global timer.
 *
 *   nvcc -arch=sm_90 -O3 -o /tmp/tail_probe dev/cuda/tail_probe.cu && /tmp/tail_probe
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "cuda_check.h"
#include "load_shape.cuh"

#define U 2

static __device__ __forceinline__ unsigned long long gtimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* units [x, e) of the matrix, U at a time, as v5 loads them */
static __device__ __forceinline__ unsigned stream(const uint8_t *buf, int64_t x, int64_t e, int spin, int lane)
{
    unsigned acc = 0;
    for (; x < e; x += U) {
        uint4 q[U][4];
        uint2 h[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t j = x + u < e ? x + u : e - 1;
            unit_load(buf + j * UNIT, lane, q[u], h[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            acc = unit_use(q[u], h[u], spin, acc);
    }
    return acc;
}

/* pool: units [p0, units) in chunks of C, chunk j claimed through counter j % G */
__global__ void __launch_bounds__(128, 4) probe(const uint8_t *buf, int64_t units, int64_t p0, int C, int G,
                                                unsigned *cnt, int spin, unsigned long long *stamps, unsigned *sink)
{
    int lane = threadIdx.x & 31;
    int64_t W = (int64_t)gridDim.x * 4, w = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    if (lane == 0)
        stamps[2 * w] = gtimer();
    unsigned acc = stream(buf, w * p0 / W, (w + 1) * p0 / W, spin, lane);
    if (p0 < units) {
        int g = (int)(w % G);
        int64_t n_chunks = (units - p0 + C - 1) / C, per = (n_chunks - g + G - 1) / G;
        unsigned k = claim_take(claim_issue(&cnt[g], lane));
        while ((int64_t)k < per) {
            unsigned next = claim_issue(&cnt[g], lane);
            int64_t x = p0 + ((int64_t)k * G + g) * C, e = x + C < units ? x + C : units;
            acc ^= stream(buf, x, e, spin, lane);
            k = claim_take(next);
        }
    }
    if (lane == 0)
        stamps[2 * w + 1] = gtimer();
    if (acc == 0x12345678u)
        sink[0] = acc;
}

int main(void)
{
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    int grid = prop.multiProcessorCount * 4, W = grid * 4, G_MAX = 64;
    size_t most = (size_t)2400 << 20;   /* two halves: a run reads the other half than the one before */
    uint8_t *buf;
    unsigned *sink, *cnt;
    unsigned long long *stamps;
    if (cudaMalloc(&buf, most) != cudaSuccess || cudaMalloc(&sink, 4) != cudaSuccess ||
        cudaMalloc(&cnt, G_MAX * 4) != cudaSuccess || cudaMalloc(&stamps, (size_t)W * 16) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemset(buf, 1, most);
    printf("%s, %d SMs, %d warps\n", prop.name, prop.multiProcessorCount, W);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<unsigned long long> h((size_t)W * 2);
    const int mbs[3] = {150, 75, 1100};
    const double fs[5] = {0.0, 0.1, 0.2, 0.3, 0.5};
    const int cs[2] = {2, 4}, gs[2] = {8, 32};
    for (int mi = 0; mi < 3; mi++)
        for (int spin = 0; spin <= 400; spin += 400)
            for (int fi = 0; fi < 5; fi++)
                for (int ci = 0; ci < (fi ? 2 : 1); ci++)
                    for (int gi = 0; gi < (fi ? 2 : 1); gi++) {
                        int64_t units = (int64_t)mbs[mi] * 1000000 / UNIT;
                        int64_t p0 = units - (int64_t)(fs[fi] * units);
                        float best = 1e30f;
                        double e_first = 0, e_med = 0, e_last = 0;
                        for (int r = 0; r < 11; r++) {
                            cudaMemsetAsync(cnt, 0, G_MAX * 4);
                            cudaEventRecord(e0);
                            probe<<<grid, 128>>>(buf + (r & 1) * (most / 2), units, p0, cs[ci], gs[gi], cnt, spin, stamps, sink);
                            cudaEventRecord(e1);
                            cudaEventSynchronize(e1);
                            float ms;
                            cudaEventElapsedTime(&ms, e0, e1);
                            if (r == 0 || ms >= best)
                                continue;
                            best = ms;
                            cudaMemcpy(h.data(), stamps, (size_t)W * 16, cudaMemcpyDeviceToHost);
                            unsigned long long t0 = ~0ull;
                            std::vector<unsigned long long> ends(W);
                            for (int w = 0; w < W; w++)
                                t0 = std::min(t0, h[2 * w]), ends[w] = h[2 * w + 1];
                            std::sort(ends.begin(), ends.end());
                            e_first = (ends[0] - t0) * 1e-3, e_med = (ends[W / 2] - t0) * 1e-3;
                            e_last = (ends[W - 1] - t0) * 1e-3;
                        }
                        printf("%5d MB spin %3d pool %.1f C %d G %2d: %.3f TB/s  ends %.2f / %.2f / %.2f us\n",
                               mbs[mi], spin, fs[fi], fi ? cs[ci] : 0, fi ? gs[gi] : 0,
                               (double)units * UNIT / (best * 1e-3) / 1e12, e_first, e_med, e_last);
                    }
    return cudaDeviceSynchronize() != cudaSuccess;
}
