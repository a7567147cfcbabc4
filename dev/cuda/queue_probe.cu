/*
 * queue_probe.cu — do loads that hit L2 wait behind a flood of bulk copies from HBM, on the SM that
 * asks for the copies and on the others? (docs/PERFORMANCE.md, 2026-12-06.)
 *
 * Why: between two persistent decode spans the short attention ends ~16 us after its inputs, against
 * 1.8 us in the launches, while the next span's CTAs ask for 26 MB of ring records at once; inside
 * the span, the Wo input's copy into shared memory (a few KB from L2) takes 1-5 us and a norm ~4.5.
 * If a load that hits L2 waits behind the misses its own SM has in flight, a latency-critical load
 * must not be asked for behind a deep ring (the ring's depth is the queue); if it waits behind every
 * SM's misses, only fewer bytes in flight in all help; if neither, the time goes elsewhere.
 *
 * `flood`: F CTAs of 16 warps (one an SM), each warp with a ring of D records of 2304 bytes in shared
 * memory, asks for records of a 1 GB buffer with cp.async.bulk (evict-first or normal) and waits for
 * each before asking for the next, R records a warp in all, as the span's rings do; its 17th warp,
 * in every 8th CTA, is a probe on the flooding SM. `probe`: P CTAs of one warp on the other SMs.
 * A probe's lane 0 walks a pointer chain, one dependent load at a time, through a small buffer that
 * sits in L2 (hits) or through the big one (misses), stamping each load's latency with the global
 * timer (read only once the value is in). The flood starts 20 us after its CTAs do, so each probe sees
 * loads before, during and after it. Prints, per setting, the probes' median and 90th percentile
 * latency (ns) before, during and after the flood (sample counts in brackets), and the flood's rate.
 *
 *   nvcc -arch=sm_90 -O3 -o /tmp/queue_probe dev/cuda/queue_probe.cu && /tmp/queue_probe
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#define REC 2304
#define DMAX 5
#define CW 16
#define SAMPLES 2048
#define IN_EVERY 8   /* a probe warp in every 8th flood CTA */

static __device__ __forceinline__ unsigned long long gtimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

/* the timer once v has arrived: the trap's predicate reads v, so the timer read cannot pass it */
static __device__ __forceinline__ unsigned long long gtimer_after(unsigned v)
{
    unsigned long long t;
    asm volatile("{ .reg .pred p; setp.eq.u32 p, %1, 0xffffffff; @p trap; mov.u64 %0, %%globaltimer; }"
                 : "=l"(t)
                 : "r"(v)
                 : "memory");
    return t;
}

static __device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* lane 0 walks the chain in buf from word i0 (each word the index of the next), one dependent load
 * at a time; each load's start and latency to o[2 s], o[2 s + 1] */
static __device__ void chase(const unsigned *buf, unsigned i0, unsigned long long *o)
{
    unsigned i = i0;
    for (int s = 0; s < SAMPLES; s++) {
        unsigned long long t = gtimer();
        unsigned v;
        asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(buf + i) : "memory");
        unsigned long long e = gtimer_after(v);
        i = v;   /* the next load needs this one */
        o[2 * s] = t, o[2 * s + 1] = e - t;
    }
}

/* the span's ring, reduced: D records on their way a warp, each waited for before the next is asked;
 * warp CW of every IN_EVERY-th CTA probes from the same SM */
__global__ void __launch_bounds__((CW + 1) * 32, 1)
    flood(const uint8_t *big, size_t big_recs, int D, int R, int ef, unsigned long long delay_ns,
          unsigned long long *span, const unsigned *chain, unsigned links, unsigned unit, unsigned long long *pout)
{
    extern __shared__ __align__(128) uint8_t ring[];
    __shared__ __align__(8) uint64_t full[CW][DMAX];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp == CW) {
        if (lane == 0 && blockIdx.x % IN_EVERY == 0)
            chase(chain, (unsigned)((blockIdx.x / IN_EVERY * 5077ull + 3001ull) % links) * unit,
                  pout + (size_t)(blockIdx.x / IN_EVERY) * SAMPLES * 2);
        return;
    }
    uint64_t pol = 0;
    if (ef)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
    if (lane == 0)
        for (int i = 0; i < D; i++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&full[warp][i])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
    unsigned long long t0 = gtimer();
    while (gtimer() - t0 < delay_ns)
        ;
    if (threadIdx.x == 0)
        span[2 * blockIdx.x] = gtimer();
    size_t w = (size_t)blockIdx.x * CW + warp, W = (size_t)gridDim.x * CW;
    uint8_t *slots = ring + (size_t)warp * DMAX * REC;
    unsigned sink = 0;
    for (int r = 0; r < R + D; r++) {
        if (r >= D) {   /* the oldest record: wait for it, read a word of it */
            int b = (r - D) % D;
            unsigned parity = ((r - D) / D) & 1, done = 0;
            while (!done)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                             : "=r"(done)
                             : "r"(smem_u32(&full[warp][b])), "r"(parity)
                             : "memory");
            sink += slots[(size_t)b * REC + lane * 4];
            __syncwarp();
        }
        if (r < R && lane == 0) {   /* the next record, into the slot just read */
            int b = r % D;
            size_t rec = (w + (size_t)r * W) % big_recs;
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&full[warp][b])),
                         "r"(REC)
                         : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                         ::"r"(smem_u32(slots + (size_t)b * REC)), "l"(big + rec * REC), "r"(REC),
                         "r"(smem_u32(&full[warp][b])), "l"(pol)
                         : "memory");
        }
        __syncwarp();
    }
    asm volatile("bar.sync 1, %0;" ::"r"(CW * 32));   /* the flood warps only: the probe may still walk */
    if (threadIdx.x == 0)
        span[2 * blockIdx.x + 1] = gtimer() + (sink == 0xffffffffu);
}

__global__ void probe(const unsigned *buf, unsigned step, unsigned long long *out)
{
    if (threadIdx.x == 0)
        chase(buf, blockIdx.x * step, out + (size_t)blockIdx.x * SAMPLES * 2);
}

/* the hot chain's lines into L2 */
__global__ void touch(const unsigned *buf, size_t n, unsigned *sink)
{
    unsigned a = 0;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        a += __ldcg(buf + k);
    if (a == 0xffffffffu)
        *sink = a;
}

/* the cold chain: word k * 1024 of the big buffer holds the next, 257 KB-steps of 4 KB on, so no
 * line of it is read twice in a run and every load misses L2 */
__global__ void cold_init(unsigned *big, size_t n_links)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n_links; k += (size_t)gridDim.x * blockDim.x)
        big[k * 1024] = (unsigned)(((k + 257) % n_links) * 1024);
}

#define CK(x)                                                                                 \
    do {                                                                                      \
        cudaError_t e_ = (x);                                                                 \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));       \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static double pct(std::vector<double> &v, double p)
{
    if (v.empty())
        return 0.0;
    std::sort(v.begin(), v.end());
    return v[(size_t)(p * (double)(v.size() - 1))];
}

/* the samples of n probes in o, by when they started against the flood's [f0, f1) */
static void report(const char *who, const std::vector<unsigned long long> &o, int n, unsigned long long f0,
                   unsigned long long f1)
{
    std::vector<double> bef, dur, aft;
    for (int p = 0; p < n; p++)
        for (int s = 0; s < SAMPLES; s++) {
            unsigned long long t = o[((size_t)p * SAMPLES + s) * 2], l = o[((size_t)p * SAMPLES + s) * 2 + 1];
            if (t == 0)
                continue;
            (t < f0 ? bef : t < f1 ? dur : aft).push_back((double)l);
        }
    printf("   %-9s %5.0f/%5.0f (%4zu) | %5.0f/%5.0f (%4zu) | %5.0f/%5.0f (%4zu)\n", who, pct(bef, 0.5), pct(bef, 0.9),
           bef.size(), pct(dur, 0.5), pct(dur, 0.9), dur.size(), pct(aft, 0.5), pct(aft, 0.9), aft.size());
}

int main(void)
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int n_sm = prop.multiProcessorCount, P = 16, F = n_sm - P, PI = (F + IN_EVERY - 1) / IN_EVERY;
    const size_t big_bytes = (size_t)1 << 30, big_recs = big_bytes / REC;
    const size_t hot_words = 256 * 1024 / 4, cold_words = big_bytes / 4;
    uint8_t *big;
    unsigned *hot;
    unsigned long long *span, *out, *pout;
    CK(cudaMalloc(&big, big_bytes));
    CK(cudaMalloc(&hot, hot_words * 4));
    CK(cudaMalloc(&span, 2 * (size_t)F * sizeof *span));
    CK(cudaMalloc(&out, (size_t)P * SAMPLES * 2 * sizeof *out));
    CK(cudaMalloc(&pout, (size_t)PI * SAMPLES * 2 * sizeof *pout));
    /* the hot chain: a cycle over 256 KB (64 K words, each the index of the next) */
    std::vector<unsigned> h(hot_words);
    for (size_t k = 0; k < hot_words; k++)
        h[k] = (unsigned)((k * 40501u + 12345u) % hot_words);   /* a full cycle: a = 1 mod 4, c odd */
    CK(cudaMemcpy(hot, h.data(), hot_words * 4, cudaMemcpyHostToDevice));
    cold_init<<<256, 256>>>((unsigned *)big, cold_words / 1024);
    CK(cudaDeviceSynchronize());
    const size_t smem = (size_t)CW * DMAX * REC;
    CK(cudaFuncSetAttribute(flood, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    printf("queue probe: %s, %d SMs; flood on %d SMs (a probe warp in %d of them), probes alone on %d; "
           "latency ns p50/p90 (samples) before | during | after the flood\n",
           prop.name, n_sm, F, PI, P);
    for (int cold = 0; cold < 2; cold++)
        for (int ef = 0; ef < 2; ef++)
            for (int D = 1; D <= DMAX; D += 2) {
                const int R = 400;   /* ~1.7 GB in all: a few hundred us */
                const unsigned *chain = cold ? (const unsigned *)big : hot;
                unsigned step = cold ? 977u * 1024u : 977u;
                CK(cudaMemsetAsync(out, 0, (size_t)P * SAMPLES * 2 * sizeof *out, s2));
                CK(cudaMemsetAsync(pout, 0, (size_t)PI * SAMPLES * 2 * sizeof *pout, s2));
                touch<<<64, 256, 0, s2>>>(hot, hot_words, (unsigned *)span);
                CK(cudaDeviceSynchronize());
                /* the probes start with the flood's CTAs, the flood's copies 20 us later */
                probe<<<P, 32, 0, s2>>>(chain, step, out);
                flood<<<F, (CW + 1) * 32, smem, s1>>>(big, big_recs, D, R, ef, 20000ull, span, chain,
                                                      cold ? (unsigned)(cold_words / 1024) : (unsigned)hot_words,
                                                      cold ? 1024u : 1u, pout);
                CK(cudaDeviceSynchronize());
                std::vector<unsigned long long> sp(2 * (size_t)F), o((size_t)P * SAMPLES * 2), po((size_t)PI * SAMPLES * 2);
                CK(cudaMemcpy(sp.data(), span, sp.size() * 8, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(o.data(), out, o.size() * 8, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(po.data(), pout, po.size() * 8, cudaMemcpyDeviceToHost));
                unsigned long long f0 = ~0ull, f1 = 0;
                for (int b = 0; b < F; b++)
                    f0 = std::min(f0, sp[2 * b]), f1 = std::max(f1, sp[2 * b + 1]);
                double mb = (double)F * CW * R * REC / 1e6, us = (double)(f1 - f0) / 1e3;
                printf("%s chain, %s copies, %d records a warp on their way: flood %.0f MB in %.1f us (%.2f TB/s)\n",
                       cold ? "HBM" : "L2 ", ef ? "evict-first " : "evict-normal", D, mb, us, mb / us);
                report("same SM", po, PI, f0, f1);
                report("other SM", o, P, f0, f1);
            }
    return 0;
}
