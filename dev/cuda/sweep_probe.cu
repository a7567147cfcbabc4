/*
 * sweep_probe.cu — does the order in which a GEMV's warps read the matrix change the HBM's rate?
 * (docs/PERFORMANCE.md, 2026-12-05 late.) GEMV v5 cuts a matrix into 2304-byte units (a Q4_K
 * tile's super-block) and gives every warp (16 an SM) one contiguous range, so ~2100 ranges spread
 * over the whole matrix are read at once. The other order ("sweep") gives warp w units w, w + W,
 * w + 2W ... so the grid reads one moving front. Each unit is read as v5 reads it: four 16-byte
 * loads a lane (2048 bytes a warp) and one 8-byte load (256 bytes), U units in flight a lane, then
 * a spin of S cycles a unit standing in for the decode. Prints TB/s (best of 10) per order, U, S.
 *
 *   nvcc -arch=sm_90 -O3 -o /tmp/sweep_probe dev/cuda/sweep_probe.cu && /tmp/sweep_probe [MB ...]
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "load_shape.cuh"

template <int U>
__global__ void __launch_bounds__(128, 4) probe(const uint8_t *buf, int64_t units, int sweep, int spin, unsigned *sink)
{
    int lane = threadIdx.x & 31;
    int64_t W = (int64_t)gridDim.x * 4, w = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    int64_t a = w * units / W, b = (w + 1) * units / W;
    unsigned acc = 0;
    for (int64_t x = a; x < b; x += U) {
        uint4 q[U][4];
        uint2 h[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t j = x + u < b ? x + u : b - 1;
            int64_t v = sweep ? (j - a) * W + w : j;
            v = v < units ? v : j;
            unit_load(buf + v * UNIT, lane, q[u], h[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            acc = unit_use(q[u], h[u], spin, acc);
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

template <int U>
static double run(const uint8_t *buf, int64_t units, int sweep, int spin, int grid, unsigned *sink)
{
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e30f;
    for (int r = 0; r < 11; r++) {
        cudaEventRecord(e0);
        probe<U><<<grid, 128>>>(buf, units, sweep, spin, sink);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r)
            best = ms < best ? ms : best;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return (double)units * UNIT / (best * 1e-3) / 1e12;
}

int main(int argc, char **argv)
{
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    int grid = prop.multiProcessorCount * 4;
    size_t most = (size_t)2048 << 20;
    uint8_t *buf;
    unsigned *sink;
    if (cudaMalloc(&buf, most) != cudaSuccess || cudaMalloc(&sink, 4) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemset(buf, 1, most);
    printf("%s, %d SMs, %d warps\n", prop.name, prop.multiProcessorCount, grid * 4);
    int n_mb = argc > 1 ? argc - 1 : 3;
    const char *def_mb[3] = {"150", "75", "1100"};
    for (int i = 0; i < n_mb; i++) {
        int64_t mb = atoll(argc > 1 ? argv[i + 1] : def_mb[i]);
        int64_t units = mb * 1000000 / UNIT;
        if ((size_t)(units * UNIT) > most)
            units = most / UNIT;
        /* a different region each size, so L2 holds none of the previous one */
        const uint8_t *p = buf + (i % 2 ? (most / 2) & ~(size_t)4095 : 0);
        if ((size_t)(p - buf) + (size_t)units * UNIT > most)
            p = buf;
        for (int spin = 0; spin <= 800; spin += 400)
            for (int sweep = 0; sweep < 2; sweep++)
                printf("%5lld MB spin %3d %s: U=1 %.3f  U=2 %.3f  U=3 %.3f TB/s\n", (long long)mb, spin,
                       sweep ? "sweep " : "ranges", run<1>(p, units, sweep, spin, grid, sink),
                       run<2>(p, units, sweep, spin, grid, sink), run<3>(p, units, sweep, spin, grid, sink));
    }
    return cudaDeviceSynchronize() != cudaSuccess;
}
