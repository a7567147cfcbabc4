/*
 * ffn_probe.cu — would the FFN as one launch, split along its inner dimension, beat gate/up and down
 * as two dependent launches? (docs/CUDA.md, thirty-fifth session.) No glim code; loads in v5's shape
 * (load_shape.cuh), a spin of S cycles a unit standing in for the arithmetic.
 *
 * Two launches (the engine today): gate/up streams on every SM, then down (PDL: its warps' first
 * loads before the wait), then a one-CTA norm stand-in. "A4" is v5's shape (4 CTAs of 4 warps an
 * SM), "A16" one CTA of 16 warps an SM.
 * Split (not built in the engine): SM s owns rows [a_s, b_s) of gate and up, so the same inner
 * indices, so the same columns of down; it streams its gate/up rows and then its slice of down (the
 * first down loads before a CTA barrier standing in for the SwiGLU hand-over) with no wait on any
 * other SM, and writes a partial of the whole output (6656 floats). A reduce launch (104 CTAs) adds
 * the SMs' partials in a fixed order, then the norm stand-in. "Bs": each warp a static range; "Bd":
 * the SM's units taken by its warps in chunks of C from a shared-memory count; "Bd4 without the
 * reduce launch" prices the reduce.
 *
 * Weights as the 30B preset's: gate/up 149.5 MB, down 109.0 and 74.8 MB in turn, L layers with their
 * own buffers, captured in one graph (best of 6 replays). Prints us a layer and the FFN bytes' TB/s.
 * A benchmark: prints, never asserts.
 *
 * State (2026-12-07, H100, docs/PERFORMANCE.md "the FFN split along its inner dimension"): the
 * split loses, 83.8-85.3 us a layer against 80.7-82.2 for two launches of 16-warp CTAs (83.0-83.5
 * in v5's shape): the hop between gate/up and down costs about nothing here, and the reduce ~2.5 us.
 *
 *   nvcc -arch=sm_90 -O3 -o /tmp/ffn_probe dev/cuda/ffn_probe.cu && /tmp/ffn_probe
 */
#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h"
#include "load_shape.cuh"

#define U 2
#define N_OUT 6656
#define L 8

static __device__ __forceinline__ void pdl_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
static __device__ __forceinline__ void pdl_trigger(void) { asm volatile("griddepcontrol.launch_dependents;" :::); }

struct load_set {
    uint4 q[U][4];
    uint2 h[U];
};

static __device__ __forceinline__ void set_load(const uint8_t *w, int64_t x, int64_t e, int lane, load_set &s)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        int64_t j = x + u < e ? x + u : e - 1;
        unit_load(w + j * UNIT, lane, s.q[u], s.h[u]);
    }
}

static __device__ __forceinline__ unsigned set_use(const load_set &s, int spin, unsigned acc)
{
#pragma unroll
    for (int u = 0; u < U; u++)
        acc = unit_use(s.q[u], s.h[u], spin, acc);
    return acc;
}

/* units [x, e): the first set is loaded before `first` runs (a PDL wait or a CTA barrier) */
template <class F>
static __device__ __forceinline__ unsigned stream(const uint8_t *w, int64_t x, int64_t e, int lane, int spin,
                                                  unsigned acc, F first)
{
    bool done = false;
    for (; x < e; x += U) {
        load_set s;
        set_load(w, x, e, lane, s);
        if (!done) {
            first();
            done = true;
        }
        acc = set_use(s, spin, acc);
    }
    if (!done)
        first();
    return acc;
}

/* one GEMV launch: warp w of W streams its share [w n / W, (w + 1) n / W) */
__global__ void gemv_like(const uint8_t *w, int64_t n, int spin, float *y)
{
    pdl_trigger();
    int lane = threadIdx.x & 31, wpc = blockDim.x >> 5;
    int64_t W = (int64_t)gridDim.x * wpc, wi = (int64_t)blockIdx.x * wpc + (threadIdx.x >> 5);
    unsigned acc = stream(w, wi * n / W, (wi + 1) * n / W, lane, spin, 0u, [] { pdl_wait(); });
    if (lane == 0)
        y[wi % N_OUT] = (float)(acc & 1023u);
}

/* the split FFN, one CTA of 16 warps an SM; dyn: chunks of C units from a shared count */
__global__ void __launch_bounds__(512, 1) ffn_split(const uint8_t *gu, int64_t n_gu, const uint8_t *dn, int64_t n_dn,
                                                    int spin, int dyn, int C, float *part)
{
    __shared__ unsigned next[2];
    pdl_trigger();
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, S = gridDim.x, s = blockIdx.x;
    unsigned acc = 0;
    if (!dyn) {
        int64_t W = (int64_t)S * 16, gw = (int64_t)s * 16 + wi;
        acc = stream(gu, gw * n_gu / W, (gw + 1) * n_gu / W, lane, spin, acc, [] { pdl_wait(); });
        acc = stream(dn, gw * n_dn / W, (gw + 1) * n_dn / W, lane, spin, acc, [] { __syncthreads(); });
    } else {
        if (threadIdx.x < 2)
            next[threadIdx.x] = 0u;
        __syncthreads();
        for (int ph = 0; ph < 2; ph++) {
            const uint8_t *m = ph ? dn : gu;
            int64_t n = ph ? n_dn : n_gu, a = s * n / S, b = (s + 1) * n / S;
            int64_t chunks = (b - a + C - 1) / C;
            bool first = true;
            unsigned k = claim_take(claim_issue(&next[ph], lane));
            while ((int64_t)k < chunks) {
                unsigned nk = claim_issue(&next[ph], lane);
                int64_t x = a + (int64_t)k * C, e = x + C < b ? x + C : b;
                if (first && ph == 0)
                    acc = stream(m, x, e, lane, spin, acc, [] { pdl_wait(); });
                else if (first)
                    acc = stream(m, x, e, lane, spin, acc, [] { __syncthreads(); });
                else
                    acc = stream(m, x, e, lane, spin, acc, [] {});
                first = false;
                k = claim_take(nk);
            }
            if (first) {   /* no chunk for this warp: it still meets the barrier / the wait */
                if (ph == 0)
                    pdl_wait();
                else
                    __syncthreads();
            }
        }
    }
    float v = (float)(acc & 1023u);
    for (int i = threadIdx.x; i < N_OUT; i += blockDim.x)
        part[(size_t)s * N_OUT + i] = v + i;
}

/* the SMs' partials added in a fixed order: 64 columns a CTA, 4 groups of parts, then the groups */
__global__ void reduce_parts(const float *part, int S, float *y)
{
    __shared__ float g4[4][64];
    pdl_trigger();
    pdl_wait();
    int c = blockIdx.x * 64 + (threadIdx.x & 63), g = threadIdx.x >> 6;
    float a = 0.0f;
    if (c < N_OUT) {
#pragma unroll 8
        for (int p = g; p < S; p += 4)
            a += __ldcg(part + (size_t)p * N_OUT + c);
    }
    g4[g][threadIdx.x & 63] = a;
    __syncthreads();
    if (g == 0 && c < N_OUT)
        y[c] = ((g4[0][threadIdx.x] + g4[1][threadIdx.x]) + g4[2][threadIdx.x]) + g4[3][threadIdx.x];
}

/* add_rmsnorm's stand-in: one CTA of 1024 threads, y -> h */
__global__ void norm_like(const float *y, float *h)
{
    pdl_trigger();
    pdl_wait();
    float ss = 0.0f;
    for (int i = threadIdx.x; i < N_OUT; i += 1024)
        ss += y[i] * y[i];
    float r = rsqrtf(block_sum<32>(ss) / N_OUT + 1e-5f);
    for (int i = threadIdx.x; i < N_OUT; i += 1024)
        h[i] = y[i] * r;
}

template <class K, class... A>
static void launch(K kern, int grid, int block, size_t smem, cudaStream_t st, A... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&cfg, kern, args...));
}

int main(void)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int S = prop.multiProcessorCount;
    int64_t n_gu = (int64_t)149500000 / UNIT, n_dn[2] = {(int64_t)109000000 / UNIT, (int64_t)74800000 / UNIT};
    size_t b_gu = (size_t)n_gu * UNIT, b_dn[2] = {(size_t)n_dn[0] * UNIT, (size_t)n_dn[1] * UNIT};
    uint8_t *gu[L], *dn[L];
    double ffn_bytes = 0;
    for (int l = 0; l < L; l++) {
        CHECK(cudaMalloc(&gu[l], b_gu));
        CHECK(cudaMalloc(&dn[l], b_dn[l & 1]));
        CHECK(cudaMemset(gu[l], 1, b_gu));
        CHECK(cudaMemset(dn[l], 2, b_dn[l & 1]));
        ffn_bytes += (double)b_gu + b_dn[l & 1];
    }
    float *part, *y, *h;
    CHECK(cudaMalloc(&part, (size_t)S * N_OUT * 4));
    CHECK(cudaMalloc(&y, N_OUT * 4));
    CHECK(cudaMalloc(&h, N_OUT * 4));
    CHECK(cudaMemset(y, 0, N_OUT * 4));
    /* the engine's GEMVs fill an SM's registers, so the next launch's CTAs enter an SM only as the
     * last one's leave: here shared memory caps the streaming CTAs (past half an SM's for one CTA of
     * 16 warps, past a fifth for four of 4), and every kernel asks for the whole carveout so that no
     * SM has to drain to change it (carve_probe.cu) */
    size_t big = prop.sharedMemPerMultiprocessor / 2 + 1024, quarter = prop.sharedMemPerMultiprocessor / 5 + 1024;
    CHECK(cudaFuncSetAttribute(ffn_split, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big));
    CHECK(cudaFuncSetAttribute(gemv_like, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big));
    CHECK(cudaFuncSetAttribute(ffn_split, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CHECK(cudaFuncSetAttribute(gemv_like, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CHECK(cudaFuncSetAttribute(reduce_parts, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CHECK(cudaFuncSetAttribute(norm_like, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    printf("%s, %d SMs; FFN %.1f MB a layer on average, %d layers a graph\n", prop.name, S, ffn_bytes / L / 1e6, L);
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const char *names[6] = {"A4  two launches, v5's shape", "A16 two launches, 16 warps", "Bs  split, static",
                            "Bd  split, chunks of 4", "Bd  split, chunks of 2",
                            "Bd4 without the reduce launch"};
    for (int spin = 0; spin <= 300; spin += 300)
        for (int v = 0; v < 6; v++) {
            CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
            for (int l = 0; l < L; l++) {
                if (v == 0) {
                    launch(gemv_like, S * 4, 128, quarter, st, (const uint8_t *)gu[l], n_gu, spin, y);
                    launch(gemv_like, S * 4, 128, quarter, st, (const uint8_t *)dn[l], n_dn[l & 1], spin, y);
                } else if (v == 1) {
                    launch(gemv_like, S, 512, big, st, (const uint8_t *)gu[l], n_gu, spin, y);
                    launch(gemv_like, S, 512, big, st, (const uint8_t *)dn[l], n_dn[l & 1], spin, y);
                } else {
                    launch(ffn_split, S, 512, big, st, (const uint8_t *)gu[l], n_gu, (const uint8_t *)dn[l],
                           n_dn[l & 1], spin, v >= 3 ? 1 : 0, v == 4 ? 2 : 4, part);
                    if (v != 5)   /* what the reduce costs (y then is not the output) */
                        launch(reduce_parts, (N_OUT + 63) / 64, 256, 0, st, (const float *)part, S, y);
                }
                launch(norm_like, 1, 1024, 0, st, (const float *)y, h);
            }
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CHECK(cudaStreamEndCapture(st, &g));
            CHECK(cudaGraphInstantiate(&ge, g, 0));
            float best = 1e30f;
            for (int r = 0; r < 7; r++) {
                CHECK(cudaEventRecord(e0, st));
                CHECK(cudaGraphLaunch(ge, st));
                CHECK(cudaEventRecord(e1, st));
                CHECK(cudaEventSynchronize(e1));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, e0, e1));
                if (r && ms < best)
                    best = ms;
            }
            printf("spin %3d  %-30s %7.2f us a layer  %.3f TB/s\n", spin, names[v], best * 1e3 / L,
                   ffn_bytes / (best * 1e-3) / 1e12);
            CHECK(cudaGraphExecDestroy(ge));
            CHECK(cudaGraphDestroy(g));
        }
    return 0;
}
