/*
 * half_model.cu — a stand-alone model of one decode layer's attention half (norm, q/k/v/gate GEMV,
 * attention over a short context, Wo GEMV, norm) as ONE persistent kernel, to price the plan in
 * docs/CUDA.md ("Update 2026-12-04 18:40") before it is written: can the half's latency chain run
 * while its 48 MB of weights stream, in ~15 us on an H200, where today's launches take ~28?
 *
 * One grid of 4 CTAs x 128 threads an SM, every CTA resident (checked), no grid-wide barrier:
 *   - at entry each CTA copies its share of "Wo" (15.3 MB in all, ~29 KB a CTA) into shared memory
 *     (cp.async) and each warp issues its first loads of "q/k/v/gate" (32.9 MB, contiguous per warp);
 *   - CTAs 0..7 run the first norm (26 KB from L2, two reductions through slots and counts), then
 *     a flag;
 *   - every warp waits for the flag, streams its q/k/v/gate share (use4: both nibbles of every byte
 *     through dp4a, the h values it needs from L2), and counts itself done;
 *   - 8 CTAs wait for every warp, then run 32 heads of attention over 64 keys, a warp a head
 *     (K and V through L1), and count;
 *   - every warp waits for all heads and multiplies its Wo share (shared memory) with the
 *     attention output; once all are in, CTAs 0..7 run the second norm and the last stamps the end.
 * Modes: both (the above), stream (no waits, no chain: the bytes alone), chain (the chain with one
 * round of weights a warp). Times are from the global timer (first CTA in -> end stamp), median of
 * 30 runs. Then the baseline with the same steps: eight layers in one CUDA graph, as eight such
 * kernels, and as today's decode runs them (norm, q/k/v/gate GEMV, attention, Wo GEMV, norm, one
 * launch each with programmatic dependent launch), by events, us a layer. A benchmark: prints,
 * never asserts.
 *
 * State (2026-12-04, docs/PERFORMANCE.md "a model of the plan"): the stream alone is right (48.2 MB
 * in 13.8 us); the chain's steps were 2-4x slower than the real kernels in the versions run (a norm
 * by one CTA ~11 us against add_rmsnorm's ~5; attention a key at a time ~14 us against v4's ~3).
 * Revised after the device time was spent, not yet run: the norms over 8 CTAs (slots and counts),
 * q/k/v arrivals counted in 32 sub-counters, a lane scoring whole K rows.
 *
 * Build and run (GPU machine): nvcc -arch=sm_90 -O3 -o /tmp/half_model dev/cuda/half_model.cu && /tmp/half_model
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"

#define WARPS 4          /* per CTA */
#define R 8              /* uint4 loads in flight per lane (4 KB a warp), as v3's 8 slots */
#define E 6656           /* hidden size */
#define QD 4096          /* attention width: 32 heads x 128 */
#define KEYS 64
#define SPIN_MAX (1 << 24)

#define NORM_CTAS 8           /* the norms: E / 8 = 832 values a CTA */
#define SLICE (E / NORM_CTAS)
#define NSUB 32               /* q/k/v arrivals: a CTA into counter b % 32, its last into the top one */

/* counters; F_NORM, F_QKV, F_ATTN, F_WO also have flags */
enum { F_NORM, F_QKV, F_ATTN, F_WO, F_ERR, F_N1, F_N2, F_N3, F_M1, F_M2, F_M3, F_QTOP, F_CNT = 16 };

struct model {
    const uint4 *wq;        /* q/k/v/gate: [n_warps][qw] uint4 */
    const uint4 *wo;        /* Wo: [n_cta][wo] uint4 */
    float *x, *h, *o, *attn;
    const float *q;         /* 32 heads x 128 */
    const __half *kv;       /* [2 groups][KEYS][2][128] */
    unsigned *f;            /* F_* counters; F_T0/F_T1 hold timer words */
    unsigned long long *t;  /* [0] first entry, [1] end, [2] norm done, [3] q/k/v seen done, [4] heads done */
    int qw, wo_n, mode;     /* uint4 a warp / a CTA; mode 0 both, 1 stream only, 2 chain only */
    float *sink;
};

/* Counters and flags, each on its own 128-byte line: a counter gathers arrivals, and its last
 * arrival raises the flag in NCOPY copies, so the ~500 CTAs that wait poll 32 lines, ~16 each, and
 * not one (2000 warps polling one word stalled every step of the first version ~15 us) */
#define NCOPY 32
#define F_WORDS ((F_CNT + 4 * NCOPY + NSUB) * 32)
static __device__ __forceinline__ unsigned *counter(const model &m, int k)
{
    return m.f + k * 32;
}

static __device__ __forceinline__ unsigned *flag(const model &m, int k, int c)
{
    return m.f + (F_CNT + k * NCOPY + c) * 32;
}

static __device__ __forceinline__ unsigned *subcounter(const model &m, int i)
{
    return m.f + (F_CNT + 4 * NCOPY + i) * 32;
}

/* the whole CTA waits until counter k reaches need (thread 0 polls: for the few CTAs of a norm) */
static __device__ void wait_count(const model &m, int k, unsigned need)
{
    if (threadIdx.x == 0) {
        int i = 0;
        while (ld_acq(counter(m, k)) < need && ++i < SPIN_MAX)
            __nanosleep(32);
        if (i >= SPIN_MAX)
            atomicAdd(counter(m, F_ERR), 1u);
    }
    __syncthreads();
}

/* one fence, then the copies as plain stores (a release store each was a fence each: 32 in a row) */
static __device__ void signal(const model &m, int k)
{
    __threadfence();
    for (int c = 0; c < NCOPY; c++)
        *(volatile unsigned *)flag(m, k, c) = 1u;
}

/* one arrival of n_total at counter k (one thread): the last raises flag k */
static __device__ void arrive_of(const model &m, int k, unsigned n_total)
{
    __threadfence();
    if (atomicAdd(counter(m, k), 1u) == n_total - 1)
        signal(m, k);
}

/* the whole CTA waits for flag k (thread 0 polls this CTA's copy; bounded: a hang shows as F_ERR) */
static __device__ void wait_flag(const model &m, int k)
{
    if (threadIdx.x == 0) {
        const unsigned *p = flag(m, k, blockIdx.x % NCOPY);
        int i = 0;
        while (ld_acq(p) == 0 && ++i < SPIN_MAX)
            __nanosleep(64);
        if (i >= SPIN_MAX)
            atomicAdd(counter(m, F_ERR), 1u);
    }
    __syncthreads();
}

static __device__ double block_sum128(double v, double *red)
{
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    return red[0] + red[1] + red[2] + red[3];
}

/* add_rmsnorm's work spread over CTAs 0..NORM_CTAS-1 (832 values each, 7 a thread), as the real
 * kernel spreads it over 1024 threads: each sum is a block reduction, then one slot a CTA and a
 * count (c0, c0 + 1) the eight wait for; x' and h out. c0 + 2 counts the CTAs done. */
static __device__ void norm_dist(const model &m, double *red, int c0)
{
    const float *__restrict__ o = m.o, *__restrict__ x = m.x;
    float *__restrict__ xo = m.sink + 1024, *__restrict__ h = m.h;   /* x' (the model's copy) and h */
    volatile double *slots = (volatile double *)(m.sink + 16384) + (c0 == F_N1 ? 0 : 2 * NORM_CTAS);
    int base = blockIdx.x * SLICE;
    float ov[7], xv[7];
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < 7; j++) {
        int i = threadIdx.x + 128 * j;
        ov[j] = i < SLICE ? __ldcg(o + base + i) : 0.0f;
        xv[j] = i < SLICE ? __ldcg(x + base + i) : 0.0f;
        s += (double)ov[j] * ov[j];
    }
    s = block_sum128(s, red);
    if (threadIdx.x == 0) {
        slots[blockIdx.x] = s;
        __threadfence();
        atomicAdd(counter(m, c0), 1u);
    }
    wait_count(m, c0, NORM_CTAS);
    double tot = 0.0;
    for (int k = 0; k < NORM_CTAS; k++)
        tot += slots[k];
    float r = (float)(1.0 / sqrt(tot / E + 1e-8));
    s = 0.0;
#pragma unroll
    for (int j = 0; j < 7; j++) {
        xv[j] += ov[j] * r;
        s += (double)xv[j] * xv[j];
    }
    s = block_sum128(s, red + 4);
    if (threadIdx.x == 0) {
        slots[NORM_CTAS + blockIdx.x] = s;
        __threadfence();
        atomicAdd(counter(m, c0 + 1), 1u);
    }
    wait_count(m, c0 + 1, NORM_CTAS);
    tot = 0.0;
    for (int k = 0; k < NORM_CTAS; k++)
        tot += slots[NORM_CTAS + k];
    float r2 = (float)(1.0 / sqrt(tot / E + 1e-5));
#pragma unroll
    for (int j = 0; j < 7; j++) {
        int i = threadIdx.x + 128 * j;
        if (i < SLICE) {
            xo[base + i] = xv[j];
            h[base + i] = xv[j] * r2;
        }
    }
    __syncthreads();
}

/* A Q4_K-like use of 16 weight bytes: each word's low and high nibbles masked out and multiplied
 * with an activation word (2 dp4a, 2 logic ops and a shift a word, ~1.4 instructions a byte; the
 * real GEMVs spend ~3 (v5) to ~6 (v3) PTX instructions a byte, docs/CUDA.md) */
static __device__ __forceinline__ int nib2(unsigned w, int a, int acc)
{
    acc = __dp4a((int)(w & 0x0f0f0f0fu), a, acc);
    return __dp4a((int)((w >> 4) & 0x0f0f0f0fu), a ^ 0x01010101, acc);
}

static __device__ __forceinline__ int use4(uint4 w, int a, int acc)
{
    acc = nib2(w.x, a, acc);
    acc = nib2(w.y, a, acc);
    acc = nib2(w.z, a, acc);
    return nib2(w.w, a, acc);
}

/* one query head over KEYS keys by one warp: a lane scores keys lane and lane + 32 from their whole
 * K rows (16-byte loads, all in flight), then owns 4 dimensions of the output over V's rows
 * (coalesced); the query in shared memory */
static __device__ void attend_head(const model &m, int head, float *q)
{
    const __half *ks = m.kv + (size_t)(head / 16) * KEYS * 256;
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < 4; e++)
        q[lane + 32 * e] = __ldcg(m.q + head * 128 + lane + 32 * e);
    __syncwarp();
    float sc[KEYS / 32];
#pragma unroll
    for (int j = 0; j < KEYS / 32; j++) {
        const uint4 *kr = (const uint4 *)(ks + (lane + 32 * j) * 256);
        uint4 kk[16];
#pragma unroll
        for (int e = 0; e < 16; e++)
            kk[e] = __ldg(kr + e);
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 16; e++) {
            const __half2 *h2 = (const __half2 *)&kk[e];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float2 f = __half22float2(h2[c]);
                d += q[8 * e + 2 * c] * f.x + q[8 * e + 2 * c + 1] * f.y;
            }
        }
        sc[j] = d;
    }
    float mx = sc[0];
#pragma unroll
    for (int j = 1; j < KEYS / 32; j++)
        mx = fmaxf(mx, sc[j]);
    for (int o = 16; o; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float l = 0.0f;
#pragma unroll
    for (int j = 0; j < KEYS / 32; j++) {
        sc[j] = __expf(sc[j] - mx);
        l += sc[j];
    }
    for (int o = 16; o; o >>= 1)
        l += __shfl_xor_sync(0xffffffffu, l, o);
    float acc[4] = {0, 0, 0, 0};
#pragma unroll 16
    for (int k = 0; k < KEYS; k++) {
        float p = __shfl_sync(0xffffffffu, sc[k >> 5], k & 31);
        uint2 v = __ldg((const uint2 *)(ks + k * 256 + 128) + lane);   /* dimensions 4 lane .. 4 lane + 3 */
        float2 v0 = __half22float2(*(const __half2 *)&v.x), v1 = __half22float2(*(const __half2 *)&v.y);
        acc[0] += p * v0.x, acc[1] += p * v0.y, acc[2] += p * v1.x, acc[3] += p * v1.y;
    }
    *(float4 *)(m.attn + head * 128 + 4 * lane) = make_float4(acc[0] / l, acc[1] / l, acc[2] / l, acc[3] / l);
}

/* A warp's stream of n uint4 at p, R in flight a lane: the first round (stream_first, before any
 * wait), then every round used while the next is in flight (stream_rest; act: the activation
 * words, from L2) */
static __device__ __forceinline__ void stream_first(const uint4 *p, int n, int lane, uint4 (&w)[R])
{
#pragma unroll
    for (int u = 0; u < R; u++)
        w[u] = lane + 32 * u < n ? __ldcs(p + lane + 32 * u) : make_uint4(0, 0, 0, 0);
}

static __device__ __forceinline__ int stream_rest(const uint4 *p, int n, const float *act, int n_act, int seed,
                                                  int lane, uint4 (&w)[R])
{
    int acc = 0;
    for (int base = 0; base < n; base += 32 * R) {
        int a = __float_as_int(__ldcg(act + (seed + base / 32 + lane) % n_act));
        uint4 nx[R];
        bool more = base + 32 * R < n;
#pragma unroll
        for (int u = 0; u < R; u++) {   /* the next round in flight while this one is used */
            int i = base + 32 * R + lane + 32 * u;
            nx[u] = more && i < n ? __ldcs(p + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < R; u++)
            acc = use4(w[u], a, acc);
#pragma unroll
        for (int u = 0; u < R; u++)
            w[u] = nx[u];
    }
    return acc;
}

static __global__ void __launch_bounds__(WARPS * 32, 4) half_kernel(model m)
{
    extern __shared__ uint4 wo_s[];
    __shared__ double red[8];
    __shared__ float qrow[WARPS][128];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int n_cta = gridDim.x, gw = blockIdx.x * WARPS + warp;
    if (threadIdx.x == 0) {
        unsigned long long t0 = now_ns();
        atomicMin(&m.t[0], t0);
        if (blockIdx.x == 0)
            m.t[5] = t0;
    }
    /* Wo's share into shared memory, in flight from the first instruction */
    const uint4 *wo = m.wo + (size_t)blockIdx.x * m.wo_n;
    for (int i = threadIdx.x; i < m.wo_n; i += blockDim.x) {
        unsigned dst = (unsigned)__cvta_generic_to_shared(wo_s + i);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(wo + i) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    /* the first round of q/k/v/gate loads, before any wait */
    const uint4 *wq = m.wq + (size_t)gw * m.qw;
    uint4 w[R];
    stream_first(wq, m.qw, lane, w);
    bool chain = m.mode != 1;
    if (chain && blockIdx.x < NORM_CTAS) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            m.t[6] = now_ns();
        norm_dist(m, red, F_N1);
        if (threadIdx.x == 0 && atomicAdd(counter(m, F_N3), 1u) == NORM_CTAS - 1) {
            m.t[2] = now_ns();
            signal(m, F_NORM);
        }
    }
    if (chain)
        wait_flag(m, F_NORM);
    int acc = stream_rest(wq, m.qw, m.h, E, gw * 7, lane, w);   /* h: from L2 */
    if (chain) {   /* a CTA's arrival into its sub-counter, the sub-counter's last into the top one */
        __syncthreads();
        if (threadIdx.x == 0) {
            int sc = blockIdx.x % NSUB;
            unsigned n_sub = (unsigned)((n_cta - sc + NSUB - 1) / NSUB);
            __threadfence();
            if (atomicAdd(subcounter(m, sc), 1u) == n_sub - 1)
                arrive_of(m, F_QKV, (unsigned)(n_cta < NSUB ? n_cta : NSUB));
        }
    }
    /* attention: CTAs 1..8, a warp a head (32 heads), when every warp's share is in */
    if (chain && blockIdx.x >= 1 && blockIdx.x <= 8) {
        wait_flag(m, F_QKV);
        if (blockIdx.x == 1 && threadIdx.x == 0)
            m.t[3] = now_ns();
        attend_head(m, (blockIdx.x - 1) * WARPS + warp, qrow[warp]);
        if (lane == 0) {
            atomicMax(&m.t[4], now_ns());
            arrive_of(m, F_ATTN, 32);
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    if (chain)
        wait_flag(m, F_ATTN);
    /* Wo: this CTA's rows from shared memory times the gated attention output */
    int a = __float_as_int(__ldcg(m.attn + (gw * 13 + lane) % QD));
    for (int i = threadIdx.x; i < m.wo_n; i += blockDim.x)
        acc = use4(wo_s[i], a, acc);
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        unsigned done = atomicAdd(counter(m, F_WO), 1u);
        if (done == (unsigned)n_cta - 1) {
            if (chain)
                signal(m, F_WO);
            else
                m.t[1] = now_ns();   /* stream only: the last CTA out is the end */
        }
    }
    if (chain && blockIdx.x < NORM_CTAS) {   /* the second norm once every CTA's Wo rows are in */
        wait_flag(m, F_WO);
        norm_dist(m, red, F_M1);
        if (threadIdx.x == 0 && atomicAdd(counter(m, F_M3), 1u) == NORM_CTAS - 1)
            m.t[1] = now_ns();
    }
    if (acc == 0x7fffffff)
        m.sink[0] = 1.0f;   /* keeps the loads */
}

/* ---- the baseline: the same steps as today's decode runs them, one launch each with programmatic
 * dependent launch (a GEMV triggers at entry and issues a round of loads before its wait, the small
 * kernels wait and then trigger), eight layers in a CUDA graph ---- */

static __device__ __forceinline__ void pdl_wait(void)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

static __device__ __forceinline__ void pdl_trigger(void)
{
    asm volatile("griddepcontrol.launch_dependents;" :::);
}

/* n uint4 at p by one warp, the first round issued before the PDL wait */
static __device__ int stream_share(const uint4 *p, int n, const float *act, int n_act, int seed, int lane)
{
    uint4 w[R];
    stream_first(p, n, lane, w);
    pdl_wait();
    return stream_rest(p, n, act, n_act, seed, lane, w);
}

static __global__ void __launch_bounds__(WARPS * 32) k_norm(model m, int c0)
{
    __shared__ double red[8];
    pdl_wait();
    pdl_trigger();
    norm_dist(m, red, c0);
}

static __global__ void __launch_bounds__(WARPS * 32, 4) k_qkv(model m)
{
    pdl_trigger();
    int lane = threadIdx.x & 31, gw = blockIdx.x * WARPS + (threadIdx.x >> 5);
    int acc = stream_share(m.wq + (size_t)gw * m.qw, m.qw, m.h, E, gw * 7, lane);
    if (acc == 0x7fffffff)
        m.sink[0] = 1.0f;
}

static __global__ void __launch_bounds__(WARPS * 32) k_attn(model m)
{
    __shared__ float qrow[WARPS][128];
    pdl_wait();
    pdl_trigger();
    int warp = threadIdx.x >> 5;
    attend_head(m, blockIdx.x * WARPS + warp, qrow[warp]);
}

static __global__ void __launch_bounds__(WARPS * 32, 4) k_wo(model m)
{
    pdl_trigger();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, per = m.wo_n / WARPS;
    const uint4 *p = m.wo + (size_t)blockIdx.x * m.wo_n + (size_t)warp * per;
    int acc = stream_share(p, per, m.attn, QD, (blockIdx.x * WARPS + warp) * 13, lane);
    if (acc == 0x7fffffff)
        m.sink[0] = 1.0f;
}

template <typename... KArgs, typename... Args>
static void launch_pdl(dim3 grid, size_t smem, cudaStream_t st, void (*k)(KArgs...), Args... args)
{
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = dim3(WARPS * 32), cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cfg.attrs = attr, cfg.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&cfg, k, args...));
}

/* a graph of `layers` attention halves (layer i: the i-th weights and counters), as launches or as
 * one persistent kernel each; returns the median of 20 replays in us a layer */
static double time_graph(const model *ms, int layers, bool persistent, int n_cta, size_t smem, unsigned *f,
                         size_t f_bytes)
{
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemsetAsync(f, 0, f_bytes, st));
    for (int l = 0; l < layers; l++) {
        if (persistent) {
            half_kernel<<<n_cta, WARPS * 32, smem, st>>>(ms[l]);
            CHECK(cudaGetLastError());
            continue;
        }
        launch_pdl(dim3(NORM_CTAS), 0, st, k_norm, ms[l], (int)F_N1);
        launch_pdl(dim3(n_cta), 0, st, k_qkv, ms[l]);
        launch_pdl(dim3(8), 0, st, k_attn, ms[l]);
        launch_pdl(dim3(n_cta), 0, st, k_wo, ms[l]);
        launch_pdl(dim3(NORM_CTAS), 0, st, k_norm, ms[l], (int)F_M1);
    }
    CHECK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float ms_[22];
    for (int it = 0; it < 22; it++) {
        CHECK(cudaEventRecord(e0, st));
        CHECK(cudaGraphLaunch(ge, st));
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaEventElapsedTime(&ms_[it], e0, e1));
    }
    unsigned long long us[20];
    for (int i = 0; i < 20; i++)
        us[i] = (unsigned long long)(ms_[i + 2] * 1e6f / layers);   /* ns a layer */
    qsort(us, 20, sizeof us[0], cmp_u64);
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(st));
    return us[10] / 1e3;
}

int main(void)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int n_sm = prop.multiProcessorCount, n_cta = 4 * n_sm, n_warps = n_cta * WARPS;
    const double QB = 32.9e6, WB = 15.3e6;   /* q/k/v/gate and Wo bytes of a 30B layer */
    int qw_full = (int)(QB / 16 / n_warps), wo_full = (int)(WB / 16 / n_cta);
    size_t smem = (size_t)wo_full * 16;
    CHECK(cudaFuncSetAttribute(half_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, half_kernel, WARPS * 32, smem));
    printf("%s: %d SMs, %d CTAs an SM fit (need 4), q/k/v/gate %d B a warp, Wo %zu B a CTA\n", prop.name, n_sm,
           per_sm, qw_full * 16, smem);
    if (per_sm < 4)
        return 1;
    /* the weights of 8 layers, so the stream comes from DRAM and not L2 */
    const int LAYERS = 8;
    size_t qbytes = (size_t)n_warps * qw_full * 16, wbytes = (size_t)n_cta * wo_full * 16;
    uint8_t *wq, *wo;
    CHECK(cudaMalloc(&wq, qbytes * LAYERS));
    CHECK(cudaMalloc(&wo, wbytes * LAYERS));
    CHECK(cudaMemset(wq, 1, qbytes * LAYERS));
    CHECK(cudaMemset(wo, 1, wbytes * LAYERS));
    float *buf;
    CHECK(cudaMalloc(&buf, (size_t)(4 * E + 2 * QD + 1024 + 2 * KEYS * 256) * 4));
    CHECK(cudaMemset(buf, 0, (size_t)(4 * E + 2 * QD + 1024 + 2 * KEYS * 256) * 4));
    __half *kv;
    CHECK(cudaMalloc(&kv, (size_t)2 * KEYS * 256 * 2));
    CHECK(cudaMemset(kv, 0, (size_t)2 * KEYS * 256 * 2));
    unsigned *f;
    unsigned long long *t;
    CHECK(cudaMalloc(&f, (size_t)F_WORDS * 4 * 8));   /* a counter region a layer for the graphs */
    CHECK(cudaMalloc(&t, 64));
    model m;
    m.x = buf, m.h = buf + E, m.o = buf + 2 * E, m.attn = buf + 3 * E, m.q = buf + 3 * E + QD;
    m.sink = buf + 3 * E + 2 * QD;
    m.kv = kv, m.f = f, m.t = t;
    const char *names[3] = {"both (stream + chain)", "stream only", "chain only (1 round)"};
    for (int mode = 0; mode < 3; mode++) {
        m.mode = mode;
        m.qw = mode == 2 ? 32 : qw_full;   /* chain only: one uint4 a lane, 1.4 MB in all */
        m.wo_n = mode == 2 ? WARPS * 32 : wo_full;
        unsigned long long d[30], ph[5][30];
        int errs = 0;
        for (int it = 0; it < 32; it++) {
            int layer = it % LAYERS;   /* another layer's bytes each run: from DRAM, not L2 */
            m.wq = (const uint4 *)(wq + qbytes * layer);
            m.wo = (const uint4 *)(wo + wbytes * layer);
            CHECK(cudaMemset(f, 0, F_WORDS * 4));
            unsigned long long init[8] = {~0ull, 0, 0, 0, 0, 0, 0, 0};
            CHECK(cudaMemcpy(t, init, 64, cudaMemcpyHostToDevice));
            half_kernel<<<n_cta, WARPS * 32, smem>>>(m);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            unsigned long long tt[8];
            unsigned ferr;
            CHECK(cudaMemcpy(tt, t, 64, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(&ferr, f + F_ERR * 32, 4, cudaMemcpyDeviceToHost));
            errs += ferr;
            if (it >= 2) {
                d[it - 2] = tt[1] - tt[0];
                for (int k = 0; k < 5; k++)
                    ph[k][it - 2] = tt[2 + k] > tt[0] ? tt[2 + k] - tt[0] : 0;
            }
        }
        qsort(d, 30, sizeof d[0], cmp_u64);
        for (int k = 0; k < 5; k++)
            qsort(ph[k], 30, sizeof ph[k][0], cmp_u64);
        double bytes = mode == 2 ? (double)n_warps * 32 * 16 + (double)n_cta * WARPS * 32 * 16 : QB + WB;
        printf("%-24s median %7.2f us (min %7.2f, max %7.2f), %.1f MB, %.0f GB/s%s\n", names[mode], d[15] / 1e3,
               d[0] / 1e3, d[29] / 1e3, bytes / 1e6, bytes / (d[15] / 1e9) / 1e9, errs ? "  SPIN TIMEOUTS" : "");
        if (mode != 1)
            printf("%-24s CTA 0 in %.2f, norm from %.2f to %.2f, q/k/v seen done %.2f, heads done %.2f us (medians)\n",
                   "", ph[3][15] / 1e3, ph[4][15] / 1e3, ph[0][15] / 1e3, ph[1][15] / 1e3, ph[2][15] / 1e3);
    }
    /* the same eight layers as one graph: persistent kernels, or today's launches with PDL */
    model ms[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        ms[l] = m;
        ms[l].mode = 0, ms[l].qw = qw_full, ms[l].wo_n = wo_full;
        ms[l].wq = (const uint4 *)(wq + qbytes * l);
        ms[l].wo = (const uint4 *)(wo + wbytes * l);
        ms[l].f = f + (size_t)F_WORDS * l;
    }
    double tp = time_graph(ms, LAYERS, true, n_cta, smem, f, (size_t)F_WORDS * 4 * LAYERS);
    double tl = time_graph(ms, LAYERS, false, n_cta, smem, f, (size_t)F_WORDS * 4 * LAYERS);
    printf("graph of %d layers, us a layer (median of 20): persistent %.2f, launches with PDL %.2f\n", LAYERS, tp, tl);
    return 0;
}
