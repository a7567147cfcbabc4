/*
 * mega_model.cu — a stand-alone model of a decode token's layers as ONE persistent kernel in which
 * each SM's weights stream through a shared-memory ring filled by a loader warp that never waits
 * for data, only for free pages (the "megakernel" plan), priced before it is written.
 *
 * WHY (docs/CUDA.md "What limits it now"): today a token is ~10 launches a layer; each GEMV pays
 * a ramp and a tail (~5.4 us a launch) and the latency chains between them (norms, attention)
 * leave the memory bus idle (~38 us a layer above the 67 us its 273 MB take at 4 TB/s). The
 * weights do not depend on the data, so a loader can keep streaming the NEXT matrix into the
 * ring while the consumers wait at a dependency; DRAM idles only when a wait outlasts the ring
 * (192 KB an SM = 25 MB = ~6 us at 4 TB/s). half_model.cu could not show that: its kernel was one
 * attention half, with nothing left to stream while its chain ran.
 *
 * The kernel: one CTA an SM (all resident), warp CW the loader (one thread issues cp.async.bulk
 * copies of PAGE bytes into RING pages, each completing on a "full" mbarrier; a page is reused
 * once all CW consumer warps have arrived on its "empty" mbarrier), warps 0..CW-1 the consumers.
 * Per layer the consumers run the tasks of a Muse Glimmer 30B layer, each after its dependency
 * (a count in global memory that thread 0 polls):
 *   NORM1 (CTAs 0..7: add_rmsnorm's two sums, slots and counts)  <- DOWN of the layer before
 *   QKV   (every CTA: its 1/132 of 32.9 MB, the h vector copied to shared memory first) <- NORM1
 *   ATTN  (CTAs 0..31: 32 heads over 64 keys, a CTA a head)       <- QKV
 *   WO    (every CTA: 15.3 MB)                                     <- ATTN
 *   NORM2 (CTAs 0..7)                                              <- WO
 *   GU    (every CTA: 150 MB)                                      <- NORM2
 *   DOWN  (every CTA: 75 MB)                                       <- GU
 * The arithmetic is a Q4_K-like use of each 16 weight bytes with an activation word from shared
 * memory (2 dp4a a word). Modes: full; stream (no waits, no chain tasks: the bytes alone); chain
 * (no pages: the dependency chain alone). Times from the global timer, first CTA in to last out,
 * median of 10 runs; LAYERS layers of distinct weights (from DRAM, not L2). Configurations
 * (argv, "page_kb,ring,inflight,piece_kb,variant" each) vary the ring; variant 4 gives the consumers
 * GEMV v5's Q4_K arithmetic (pages of whole 2304-byte tile records). A benchmark: prints, never asserts.
 *
 * Build and run (GPU machine, repository root; -DCW=16 for 16 consumer warps):
 *   nvcc -arch=sm_90 -O3 -Iinclude -Isrc -o /tmp/mega_model dev/cuda/mega_model.cu && /tmp/mega_model
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../src/cuda/tma.cuh"
#include "cuda/gemv_slots.cuh"   /* ldw16, h2f8, i2f: v5's own primitives for variant 4 */
#include "cuda_check.h"

/* variant 4: the consumers decode every page as GEMV v5's Q4_K tile records (2304 bytes: four
 * 512-byte code runs, then 16 headers) with v5's own lane code (gemv_mma_lane.h), so the ring is
 * priced with the engine's arithmetic instead of the synthetic use of each word */
#define V5_FN static __device__ __forceinline__
#define V5_HD static __host__ __device__ __forceinline__
#define V5_UNROLL _Pragma("unroll")
#define v5_ldw16(p) (*(const uint4 *)(p))   /* records are in shared memory here */
#define v5_ldw8(p) (*(const uint2 *)(p))
#define v5_ldx8(p) __ldg((const uint2 *)(p))
#define v5_ldxd(p) __ldg(p)
#define v5_ldu16(p) ((uint32_t) * (const unsigned short *)(p))
#define v5_ldu32(p) (*(const uint32_t *)(p))
#define v5_h2f(b) h2f8(b)
#define v5_i2f(v) i2f(v)
#define v5_i2f_rn(v) __int2float_rn(v)
#include "cuda/mma_s8.cuh"
#include "cuda/gemv_mma_lane.h"
#define REC CUDA_T16_Q4K_BYTES   /* a Q4_K tile record (cuda_util.cuh) */

#ifndef CW
#define CW 8                  /* consumer warps a CTA (-DCW=16 to vary) */
#endif
#define NT ((CW + 1) * 32)    /* and the loader warp */
#define E 6656                /* hidden size */
#define QD 4096               /* attention width: 32 heads x 128 */
#define FF 20480              /* FFN width */
#define KEYS 64
#define LAYERS 8
#define NORM_CTAS 8
#define HEADS 32
#define SLICE (E / NORM_CTAS)
#define MAXP 16
#define SPIN_MAX (1 << 18)
#define XS_BYTES FF           /* the largest activation vector (int8) a task copies in */

enum { T_NORM1, T_QKV, T_ATTN, T_WO, T_NORM2, T_GU, T_DOWN, T_N };
static const char *T_NAME[T_N] = {"norm1", "qkv", "attn", "wo", "norm2", "gate/up", "down"};
#define C_LINES (T_N + 4)     /* counters a layer: a task's arrivals, then the norms' two slot counts each */

struct mm {
    const uint8_t *w[T_N];    /* per kind with pages: [LAYERS][n_sm][pages * page] */
    int pages[T_N];           /* pages a layer an SM */
    int page, ring, inflight, piece, mode;   /* mode 0 full, 1 stream only, 2 chain only */
    int var;                  /* 1: a norm on one CTA (else over 8, slots and counts); 2: attention a CTA a head (else a warp) */
    unsigned *cnt;            /* [LAYERS][C_LINES] counters, 32 words apart; [LAYERS * C_LINES] errors */
    double *slots;            /* [LAYERS][4][NORM_CTAS] */
    float *x, *o, *h, *attn, *q;
    const int8_t *act;        /* activation bytes the tasks copy in (FF) */
    const float2 *xd;         /* variant 4: their block scales (FF / 32) */
    const __half *kv;
    unsigned long long *t;    /* [0] first in, [1] last out, then per layer and task: CTA 0 ready, done,
                               * its first and last page landed */
    int *sink;
};

static __device__ __forceinline__ void csync(void)   /* the consumer warps only */
{
    asm volatile("bar.sync 1, %0;" ::"r"(CW * 32) : "memory");
}

static __device__ __forceinline__ unsigned *counter(const mm &m, int l, int k)
{
    return m.cnt + ((size_t)l * C_LINES + k) * 32;
}

/* the consumer group waits until counter (l, k) reaches need (thread 0 polls; bounded) */
static __device__ void wait_count(const mm &m, int l, int k, unsigned need)
{
    if (threadIdx.x == 0) {
        const unsigned *p = counter(m, l, k);
        int i = 0;
        while (ld_acq(p) < need && ++i < SPIN_MAX)
            __nanosleep(20);
        if (i >= SPIN_MAX)
            atomicAdd(m.cnt + (size_t)LAYERS * C_LINES * 32, 1u);
    }
    csync();
}

/* after csync: one arrival of this CTA at counter (l, k) */
static __device__ void arrive(const mm &m, int l, int k)
{
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter(m, l, k), 1u);
    }
}

static __device__ double csum(double v, double *red)
{
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    csync();
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    csync();
    double s = 0.0;
    for (int i = 0; i < CW; i++)
        s += red[i];
    return s;
}

/* add_rmsnorm's work over CTAs 0..7 (832 values each): two sums, each a block sum, a slot a CTA
 * and a count the eight wait for; x' and h out (which = 0 / 1: the first / second norm) */
static __device__ void norm_dist(const mm &m, int l, int which, double *red)
{
    double *slots = m.slots + ((size_t)l * 4 + 2 * which) * NORM_CTAS;
    int base = blockIdx.x * SLICE, c0 = T_N + 2 * which;
    float ov[4], xv[4];
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int i = threadIdx.x + CW * 32 * j;
        ov[j] = i < SLICE ? __ldcg(m.o + base + i) : 0.0f;
        xv[j] = i < SLICE ? __ldcg(m.x + base + i) : 0.0f;
        s += (double)ov[j] * ov[j];
    }
    s = csum(s, red);
    if (threadIdx.x == 0) {
        __stcg(slots + blockIdx.x, s);
        __threadfence();
        atomicAdd(counter(m, l, c0), 1u);
    }
    wait_count(m, l, c0, NORM_CTAS);
    double tot = 0.0;
    for (int k = 0; k < NORM_CTAS; k++)
        tot += __ldcg(slots + k);
    float r = (float)(1.0 / sqrt(tot / E + 1e-8));
    s = 0.0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        xv[j] += ov[j] * r;
        s += (double)xv[j] * xv[j];
    }
    s = csum(s, red + CW);
    if (threadIdx.x == 0) {
        __stcg(slots + NORM_CTAS + blockIdx.x, s);
        __threadfence();
        atomicAdd(counter(m, l, c0 + 1), 1u);
    }
    wait_count(m, l, c0 + 1, NORM_CTAS);
    tot = 0.0;
    for (int k = 0; k < NORM_CTAS; k++)
        tot += __ldcg(slots + NORM_CTAS + k);
    float r2 = (float)(1.0 / sqrt(tot / E + 1e-5));
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int i = threadIdx.x + CW * 32 * j;
        if (i < SLICE) {
            __stcg(m.x + base + i, xv[j]);
            __stcg(m.h + base + i, xv[j] * r2);
        }
    }
    csync();
}

/* the same on one CTA (variant 1): 26 values a thread, all loads in flight, two block sums, no
 * exchange between CTAs */
static __device__ void norm_one(const mm &m, double *red)
{
    const int PER = (E + CW * 32 - 1) / (CW * 32);
    float ov[PER], xv[PER];
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int i = threadIdx.x + CW * 32 * j;
        ov[j] = i < E ? __ldcg(m.o + i) : 0.0f;
        xv[j] = i < E ? __ldcg(m.x + i) : 0.0f;
        s += (double)ov[j] * ov[j];
    }
    float r = (float)(1.0 / sqrt(csum(s, red) / E + 1e-8));
    s = 0.0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        xv[j] += ov[j] * r;
        s += (double)xv[j] * xv[j];
    }
    float r2 = (float)(1.0 / sqrt(csum(s, red + CW) / E + 1e-5));
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int i = threadIdx.x + CW * 32 * j;
        if (i < E) {
            __stcg(m.x + i, xv[j]);
            __stcg(m.h + i, xv[j] * r2);
        }
    }
    csync();
}

/* one query head by a whole CTA (a warp a head, half_model.cu's, measured 10.5 us a step vs ~2.2): warp w scores keys 8w..8w+7, lane l owns dimensions
 * 4l..4l+3 of each (all 17 loads in flight at once), then warp 0 merges the eight partial softmaxes */
static __device__ void attend_cta(const mm &m, int head, float *sm_m, float *sm_l, float4 *sm_o)
{
    const __half *ks = m.kv + (size_t)(head / 16) * KEYS * 256;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float4 q = __ldcg((const float4 *)(m.q + head * 128) + lane);
    uint2 kr[KEYS / CW], vr[KEYS / CW];
#pragma unroll
    for (int j = 0; j < KEYS / CW; j++) {
        const __half *row = ks + (warp * (KEYS / CW) + j) * 256;
        kr[j] = __ldcg((const uint2 *)row + lane);
        vr[j] = __ldcg((const uint2 *)(row + 128) + lane);
    }
    float s[KEYS / CW], mx = -1e30f;
#pragma unroll
    for (int j = 0; j < KEYS / CW; j++) {
        float2 a = __half22float2(*(const __half2 *)&kr[j].x), b = __half22float2(*(const __half2 *)&kr[j].y);
        s[j] = q.x * a.x + q.y * a.y + q.z * b.x + q.w * b.y;
        for (int o = 16; o; o >>= 1)
            s[j] += __shfl_xor_sync(0xffffffffu, s[j], o);
        mx = fmaxf(mx, s[j]);
    }
    float l = 0.0f;
    float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < KEYS / CW; j++) {
        float p = __expf(s[j] - mx);
        l += p;
        float2 a = __half22float2(*(const __half2 *)&vr[j].x), b = __half22float2(*(const __half2 *)&vr[j].y);
        acc.x += p * a.x, acc.y += p * a.y, acc.z += p * b.x, acc.w += p * b.y;
    }
    sm_o[warp * 32 + lane] = acc;
    if (lane == 0)
        sm_m[warp] = mx, sm_l[warp] = l;
    csync();
    if (warp == 0) {
        float M = sm_m[0];
        for (int w = 1; w < CW; w++)
            M = fmaxf(M, sm_m[w]);
        float L = 0.0f;
        float4 o = make_float4(0, 0, 0, 0);
        for (int w = 0; w < CW; w++) {
            float c = __expf(sm_m[w] - M);
            float4 a = sm_o[w * 32 + lane];
            L += c * sm_l[w];
            o.x += c * a.x, o.y += c * a.y, o.z += c * a.z, o.w += c * a.w;
        }
        __stcg((float4 *)(m.attn + head * 128) + lane, make_float4(o.x / L, o.y / L, o.z / L, o.w / L));
    }
    csync();
}

static __device__ __forceinline__ int nib2(unsigned w, int a, int acc)
{
    acc = __dp4a((int)(w & 0x0f0f0f0fu), a, acc);
    return __dp4a((int)((w >> 4) & 0x0f0f0f0fu), a ^ 0x01010101, acc);
}

/* the loader: one thread streams this SM's pages of every layer, in the consumers' order, held
 * back only by free pages (and at most `inflight` pages not yet landed) */
static __device__ void loader(const mm &m, uint8_t *ring, uint64_t *full, uint64_t *empty)
{
    unsigned seq = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < T_N; k++) {
            int np = m.pages[k];
            if (!np)
                continue;
            const uint8_t *src = m.w[k] + ((size_t)l * gridDim.x + blockIdx.x) * np * m.page;
            for (int p = 0; p < np; p++, seq++) {
                unsigned slot = seq % m.ring;
                if (seq >= (unsigned)m.ring)
                    bar_wait(&empty[slot], (seq / m.ring - 1) & 1);
                if (m.inflight < m.ring && seq >= (unsigned)m.inflight) {
                    unsigned s2 = seq - m.inflight;
                    bar_wait(&full[s2 % m.ring], (s2 / m.ring) & 1);
                }
                uint8_t *dst = ring + (size_t)slot * m.page;
                bar_expect(&full[slot], m.page);
                for (int off = 0; off < m.page; off += m.piece)
                    bulk_copy(dst + off, src + (size_t)p * m.page + off, m.piece, &full[slot]);
            }
        }
}

/* a task's dependency: the counter and the count it waits for (none: k < 0) */
static __device__ void dep_of(const mm &m, int l, int k, int n_cta, int &dl, int &dk, unsigned &need)
{
    unsigned norm_n = m.var & 1 ? 1 : NORM_CTAS, attn_n = HEADS;
    dl = l, need = n_cta;
    switch (k) {
    case T_NORM1: dl = l - 1, dk = l ? T_DOWN : -1; break;
    case T_QKV: dk = T_NORM1, need = norm_n; break;
    case T_ATTN: dk = T_QKV; break;
    case T_WO: dk = T_ATTN, need = attn_n; break;
    case T_NORM2: dk = T_WO; break;
    case T_GU: dk = T_NORM2, need = norm_n; break;
    default: dk = T_GU; break;
    }
}

static __global__ void __launch_bounds__(NT, 1) mega_kernel(mm m)
{
    extern __shared__ __align__(128) uint8_t ring[];
    __shared__ uint64_t full[MAXP], empty[MAXP];
    __shared__ double red[2 * CW];
    __shared__ __align__(16) float qrow[CW][128];
    __shared__ float sm_m[CW], sm_l[CW];
    __shared__ __align__(16) int8_t xs[XS_BYTES];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int i = 0; i < m.ring; i++) {
            bar_init(&full[i], 1);
            bar_init(&empty[i], CW);
        }
        bar_init_fence();
        atomicMin(&m.t[0], now_ns());
    }
    __syncthreads();
    if (warp == CW) {
        if (lane == 0 && m.mode != 2)
            loader(m, ring, full, empty);
        return;
    }
    bool chain = m.mode != 1, pages = m.mode != 2;
    int n_cta = gridDim.x, acc = 0;
    float fa = 0.0f, fb = 0.0f;   /* variant 4's sums */
    unsigned seq = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < T_N; k++) {
            int nb = (int)blockIdx.x;
            bool mine = k == T_NORM1   ? (m.var & 1 ? nb == n_cta - 1 : nb < NORM_CTAS)
                        : k == T_NORM2 ? (m.var & 1 ? nb == n_cta - 2 : nb < NORM_CTAS)
                        : k == T_ATTN  ? nb < HEADS
                                       : true;
            if (!mine || (!chain && !m.pages[k]))
                continue;
            int dl, dk;
            unsigned need;
            dep_of(m, l, k, n_cta, dl, dk, need);
            if (chain && dk >= 0)
                wait_count(m, dl, dk, need);
            unsigned long long *st = m.t + 2 + ((size_t)l * T_N + k) * 4;
            bool stamp = threadIdx.x == 0 && (k == T_NORM1 ? mine && nb == (m.var & 1 ? n_cta - 1 : 0)
                                             : k == T_NORM2 ? mine && nb == (m.var & 1 ? n_cta - 2 : 0)
                                                            : nb == 0);
            if (stamp)
                st[0] = now_ns();
            if (k == T_NORM1 || k == T_NORM2) {
                if (m.var & 1)
                    norm_one(m, red);
                else
                    norm_dist(m, l, k == T_NORM2, red);
            } else if (k == T_ATTN) {
                attend_cta(m, nb, sm_m, sm_l, (float4 *)qrow);
            } else {
                int n_act = k == T_DOWN ? FF : k == T_WO ? QD : E;
                if (chain) {   /* the activation vector into shared memory, once the producer is done */
                    for (int i = threadIdx.x; i < n_act / 16; i += CW * 32)
                        ((uint4 *)xs)[i] = __ldcg((const uint4 *)m.act + i);
                    csync();
                }
                const int *xw = (const int *)xs;
                int part = m.page / CW / 16;   /* uint4 a warp a page */
                int recs = m.page / CW / REC, n_sb = n_act / 256, g = lane >> 2, t = lane & 3;   /* variant 4 */
                for (int p = 0; p < m.pages[k]; p++, seq++) {
                    if (!pages)
                        continue;
                    unsigned slot = seq % m.ring;
                    bar_wait(&full[slot], (seq / m.ring) & 1);
                    if (stamp && (p == 0 || p == m.pages[k] - 1))
                        st[p == 0 ? 2 : 3] = now_ns();
                    const uint4 *pg = (const uint4 *)(ring + (size_t)slot * m.page) + warp * part;
                    if (m.var & 4) {
                        const uint8_t *b = (const uint8_t *)pg;
                        for (int r = 0; r < recs; r++, b += REC) {
                            v5_part P = {b, NULL, 16, 0, 0};
                            v5_q4k_raw raw;
                            v5_q4k_fetch_t16(&P, g, g + 8, 1, 0, t, &raw);
                            v5_q4k_compute(&raw, m.act, m.xd, (p * recs + r) % n_sb, g, t, &fa, &fb);
                        }
                    }
                    for (int i = lane; i < part && !(m.var & 4); i += 32) {
                        uint4 wv = pg[i];
                        int a = xw[(i + p * 13 + warp * 32) & 1023];   /* 4 KB of it */
                        acc = nib2(wv.x, a, acc);
                        acc = nib2(wv.y, a, acc);
                        acc = nib2(wv.z, a, acc);
                        acc = nib2(wv.w, a, acc);
                    }
                    __syncwarp();
                    if (lane == 0)
                        bar_arrive(&empty[slot]);
                }
                csync();
            }
            if (chain)
                arrive(m, l, k);
            if (stamp)
                st[1] = now_ns();
        }
    if (threadIdx.x == 0)
        atomicMax(&m.t[1], now_ns());
    if (acc == 0x7fffffff || fa + fb == 1234.5f)
        m.sink[0] = 1;   /* keeps the arithmetic */
}

#define RUNS 12
#define KEEP 10

int main(int argc, char **argv)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int n_sm = prop.multiProcessorCount;
    static const double BYTES[T_N] = {0, 32.9e6, 0, 15.3e6, 0, 150e6, 75e6};
    const char *defs[] = {"32,6,6,16,0", "32,6,6,16,1", "16,12,12,16,1", "48,4,4,48,1"};
    int n_cfg = argc > 1 ? argc - 1 : (int)(sizeof defs / sizeof defs[0]);
    /* the largest weight set any configuration needs, allocated once */
    size_t max_kind = 0;
    for (int k = 0; k < T_N; k++)
        if (BYTES[k] > 0)
            max_kind = max_kind > (size_t)(BYTES[k] * 1.1 * LAYERS) ? max_kind : (size_t)(BYTES[k] * 1.1 * LAYERS);
    uint8_t *wbuf[T_N] = {0};
    for (int k = 0; k < T_N; k++)
        if (BYTES[k] > 0) {
            size_t sz = (size_t)(BYTES[k] * 1.1 * LAYERS) + (1 << 20) * (size_t)n_sm;
            CHECK(cudaMalloc(&wbuf[k], sz));
            CHECK(cudaMemset(wbuf[k], 0x11, sz));
        }
    (void)max_kind;
    float *fb;
    size_t fl = (size_t)4 * E + 2 * QD;
    CHECK(cudaMalloc(&fb, fl * 4));
    CHECK(cudaMemset(fb, 0, fl * 4));
    int8_t *act;
    CHECK(cudaMalloc(&act, XS_BYTES));
    CHECK(cudaMemset(act, 1, XS_BYTES));
    float2 *xd, hxd[FF / 32];
    for (int i = 0; i < FF / 32; i++)
        hxd[i] = make_float2(0.01f, 0.32f);
    CHECK(cudaMalloc(&xd, sizeof hxd));
    CHECK(cudaMemcpy(xd, hxd, sizeof hxd, cudaMemcpyHostToDevice));
    __half *kv;
    CHECK(cudaMalloc(&kv, (size_t)2 * KEYS * 256 * 2));
    CHECK(cudaMemset(kv, 0, (size_t)2 * KEYS * 256 * 2));
    unsigned *cnt;
    size_t cnt_bytes = ((size_t)LAYERS * C_LINES * 32 + 32) * 4;
    CHECK(cudaMalloc(&cnt, cnt_bytes));
    double *slots;
    CHECK(cudaMalloc(&slots, (size_t)LAYERS * 4 * NORM_CTAS * 8));
    unsigned long long *t;
    size_t t_n = 2 + (size_t)LAYERS * T_N * 4;
    CHECK(cudaMalloc(&t, t_n * 8));
    int *sink;
    CHECK(cudaMalloc(&sink, 64));
    printf("%s: %d SMs, %d layers of %.1f MB (norm, q/k/v/gate, attention, Wo, norm, gate/up, down)\n", prop.name,
           n_sm, LAYERS, (BYTES[T_QKV] + BYTES[T_WO] + BYTES[T_GU] + BYTES[T_DOWN]) / 1e6);
    for (int c = 0; c < n_cfg; c++) {
        const char *cfg = argc > 1 ? argv[c + 1] : defs[c];
        int page_kb = 32, ring = 6, inflight = 6, piece_kb = 16, var = 3;
        if (sscanf(cfg, "%d,%d,%d,%d,%d", &page_kb, &ring, &inflight, &piece_kb, &var) != 5 || ring > MAXP || ring < 2 ||
            page_kb % piece_kb || page_kb * 1024 % (CW * 16) || (var & 4 && page_kb * 1024 % (CW * REC))) {
            printf("config %s: want page_kb,ring,inflight,piece_kb,variant (ring 2..%d, page a multiple of piece; "
                   "variant 4: of %d KB)\n", cfg, MAXP, CW * REC / 1024);
            continue;
        }
        mm m = {};
        m.page = page_kb * 1024, m.ring = ring, m.inflight = inflight, m.piece = piece_kb * 1024, m.var = var;
        double bytes = 0;
        for (int k = 0; k < T_N; k++) {
            m.pages[k] = BYTES[k] > 0 ? (int)(BYTES[k] / n_sm / m.page + 0.5) : 0;
            if (BYTES[k] > 0 && m.pages[k] < 1)
                m.pages[k] = 1;
            m.w[k] = wbuf[k];
            bytes += (double)m.pages[k] * m.page * n_sm * LAYERS;
        }
        m.cnt = cnt, m.slots = slots, m.act = act, m.xd = xd, m.kv = kv, m.t = t, m.sink = sink;
        m.x = fb, m.o = fb + E, m.h = fb + 2 * E, m.attn = fb + 3 * E, m.q = fb + 3 * E + QD;
        size_t smem = (size_t)ring * m.page;
        CHECK(cudaFuncSetAttribute(mega_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int per_sm = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mega_kernel, NT, smem));
        if (per_sm < 1) {
            printf("config %s: does not fit an SM (%zu B of ring)\n", cfg, smem);
            continue;
        }
        printf("\nring %d x %d KB (in flight %d, copies of %d KB), norm %s, %d consumer warps, %s: %.1f MB a layer\n",
               ring, page_kb, inflight, piece_kb, var & 1 ? "on one CTA" : "over 8 CTAs", CW,
               var & 4 ? "v5's Q4_K arithmetic" : "synthetic arithmetic",
               bytes / LAYERS / 1e6);
        const char *names[3] = {"full", "stream only", "chain only"};
        double per_layer[3] = {0, 0, 0};
        for (int mode = 0; mode < 3; mode++) {
            m.mode = mode;
            unsigned long long d[RUNS], ph[T_N][4][RUNS];
            unsigned errs = 0;
            for (int it = 0; it < RUNS; it++) {
                CHECK(cudaMemset(cnt, 0, cnt_bytes));
                unsigned long long init = ~0ull;
                CHECK(cudaMemset(t, 0, t_n * 8));
                CHECK(cudaMemcpy(t, &init, 8, cudaMemcpyHostToDevice));
                mega_kernel<<<n_sm, NT, smem>>>(m);
                CHECK(cudaGetLastError());
                CHECK(cudaDeviceSynchronize());
                unsigned long long tt[2 + LAYERS * T_N * 4];
                unsigned e;
                CHECK(cudaMemcpy(tt, t, t_n * 8, cudaMemcpyDeviceToHost));
                CHECK(cudaMemcpy(&e, cnt + (size_t)LAYERS * C_LINES * 32, 4, cudaMemcpyDeviceToHost));
                errs += e;
                d[it] = tt[1] - tt[0];
                /* a middle layer's steps, from the end of the layer before's down projection */
                int l = LAYERS / 2;
                unsigned long long z = tt[2 + ((size_t)(l - 1) * T_N + T_DOWN) * 4 + 1];
                for (int k = 0; k < T_N; k++)
                    for (int j = 0; j < 4; j++) {
                        unsigned long long v = tt[2 + ((size_t)l * T_N + k) * 4 + j];
                        ph[k][j][it] = v > z ? v - z : 0;
                    }
            }
            qsort(d + RUNS - KEEP, KEEP, sizeof d[0], cmp_u64);
            unsigned long long med = d[RUNS - KEEP + KEEP / 2];
            per_layer[mode] = med / 1e3 / LAYERS;
            printf("  %-12s %8.1f us (%.2f us a layer), %.0f GB/s%s\n", names[mode], med / 1e3, per_layer[mode],
                   mode == 2 ? 0.0 : bytes / (med / 1e9) / 1e9, errs ? "  SPIN TIMEOUTS" : "");
            if (mode != 1) {
                printf("  %-12s layer %d, us after CTA 0's down of the layer before (ready / first page / last page / done):\n   ",
                       "", LAYERS / 2);
                for (int k = 0; k < T_N; k++) {
                    double v[4];
                    for (int j = 0; j < 4; j++) {
                        qsort(ph[k][j] + RUNS - KEEP, KEEP, sizeof ph[k][j][0], cmp_u64);
                        v[j] = ph[k][j][RUNS - KEEP + KEEP / 2] / 1e3;
                    }
                    if (m.pages[k])
                        printf(" %s %.2f/%.2f/%.2f/%.2f", T_NAME[k], v[0], v[2], v[3], v[1]);
                    else
                        printf(" %s %.2f/%.2f", T_NAME[k], v[0], v[1]);
                }
                printf("\n");
            }
        }
        printf("  full - stream only: %.2f us a layer; 30B decode at this rate: ~%.0f t/s (52 layers + 0.3 ms head)\n",
               per_layer[0] - per_layer[1], 1e6 / (52 * per_layer[0] * (273.5e6 / (bytes / LAYERS)) + 300));
    }
    return 0;
}
