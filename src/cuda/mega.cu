/*
 * mega.cu — the persistent decode span (opt-in, GLIM_CUDA_MEGA=1, sm_90): one launch runs a
 * decode token's work from a layer's output projection to the next layer's q/k/v/gate
 * projections: Wo, the sandwich norm's residual and the FFN's norm, gate/up with the SwiGLU
 * fold, down, the residual and the next attention norm, q/k/v/gate. The attention (and its
 * prep) stays the launches it is, between two such spans.
 *
 * WHY (docs/CUDA.md "What limits it now"): a decode token was ~10 launches a layer, each GEMV
 * with a ramp and a tail (~5.6 us) and the latency chains between them leaving the HBM idle;
 * dev/cuda/mega_model.cu measured a ring fed by cp.async.bulk at 4.66 TB/s on the H200 against
 * 3.5-3.8 for the launches. Here each SM's weights stream without a break from Wo to q/k/v: the
 * weights do not depend on the data, so a warp asks for them without waiting for a dependency,
 * only for free ring bytes, and its waits (a grid barrier before each norm and before down) are
 * covered by the bytes already on their way.
 *
 * The CTA (one an SM, all resident): MG_CW consumer warps, each with a ring of MG_RB bytes holding
 * its next records (v5's T16 records, 2304 or 3360 bytes), job after job, in the order it uses
 * them, and asks for its next records itself as the bytes free up (a loader warp feeding 3-slot
 * rings, the first form, lost: 114.07 vs 115.97 t/s, its consumers waiting for records three
 * times as often). Consumer warp w of CTA b is v5's warp b * MG_CW + w: the same
 * units of every job, the same lane arithmetic (gemv_mma_lane.h, its loads from shared memory)
 * and the same merge in piece order (gemv_mma_job.cuh), so with MG_CW = 16 (v5's 16 warps an
 * SM) every output is bit for bit the launches'. The norms are add_rmsnorm_vec_kernel's: each
 * CTA computes the whole row with its 512 threads playing that kernel's 1024 (thread t plays t
 * and t + 512, so the sums go through the same butterflies in the same order), quantizes h
 * into its own activation copy, and stores its share of x. The int8 activations each job reads
 * are copied into shared memory first. The grid barriers count arrivals in global memory, a
 * count that only grows (mg_bar_arrive).
 */
#include "gemv_slots.cuh"
#include "mega.cuh"
#include "mma_s8.cuh"
#include "rowops.cuh"
#include "tma.cuh"

/* gemv_mma_lane.h's primitives: the weights from the ring, the activations from their copy,
 * both in shared memory */
#define V5_FN static __device__ __forceinline__
#define V5_HD static __host__ __device__ __forceinline__
#define V5_UNROLL _Pragma("unroll")
#define v5_ldw16(p) (*(const uint4 *)(p))
#define v5_ldw8(p) (*(const uint2 *)(p))
#define v5_ldx8(p) (*(const uint2 *)(p))
#define v5_ldxd(p) (*(p))
#define v5_ldu16(p) ((uint32_t) * (const unsigned short *)(p))
#define v5_ldu32(p) (*(const uint32_t *)(p))
#define v5_h2f(b) h2f8(b)
#define v5_i2f(v) i2f(v)
#define v5_i2f_rn(v) __int2float_rn(v)
#include "gemv_mma_lane.h"
#include "gemv_mma_job.cuh"
#include "mega_ring.h"

static_assert(MG_REC_MIN == CUDA_T16_Q4K_BYTES && CUDA_T16_Q6K_BYTES <= MG_RB, "mega_ring.h's record sizes");

#define MG_NT (MG_CW * 32)
#define MG_BARW (3 * 64)                          /* the grid barriers' words (a 64-bit count each, 256 bytes apart), first in the counts */
#define MG_RDYW (MG_KMAX / 256)                   /* then GLIM_CUDA_MEGA_FLAGS' ready counts, one a super-block of down's input */
#define MG_RING ((size_t)MG_CW * MG_RB)
#define MG_XS ((size_t)MG_KMAX + MG_KMAX / 32 * 8)   /* an activation copy: k int8, k / 32 float2 */
#define MG_SMEM (MG_RING + MG_XS)
#define MG_VT 1024                                /* the threads add_rmsnorm_vec_kernel has (RMS_VEC_THREADS) */

struct mg_norm {
    const float *x_in, *o, *w_o, *w_h;
    float       *x_out;
    float        eps_o, eps_h;
    int          n;
};

struct mg_params {
    v5_job        job[MG_JOBS];
    int8_t        kind[MG_JOBS];    /* 0: Q4_K tiles, 1: Q6_K tiles */
    int8_t        stage[MG_JOBS];   /* MG_WO, MG_GU, MG_DOWN, MG_QKV: jobs in stage order */
    int           n_jobs;
    int           k[MG_STAGES];     /* each stage's activation length */
    const int8_t *xq_in;            /* Wo's input: the attention's gated int8 copy */
    const float2 *xd_in;
    const int8_t *xq_glu;           /* down's: the gate/up job's SwiGLU copy */
    const float2 *xd_glu;
    mg_norm       norm[2];          /* before MG_GU and before MG_QKV */
    unsigned     *bar;              /* 3 barriers, 64 words each: a 64-bit count of arrivals at 0 (mg_bar_arrive) */
    int           ef;               /* the rings' copies evict-first in L2 (GLIM_CUDA_MEGA_EF=0: evict-normal, bench knob) */
    int           pre;              /* records a warp asks for before its PDL wait (GLIM_CUDA_MEGA_PRE, bench knob; MG_NB: a full ring; 0 with a depth) */
    int           feed;             /* GLIM_CUDA_MEGA_FEED=0 (bench knob): with a depth, the waits do not feed the rings */
    int           depth;            /* GLIM_CUDA_MEGA_DEPTH=d (1 by default): at most d records a warp unread in its stage, more during its waits (mg_lim); 0: as the ring holds */
    unsigned     *ready;            /* GLIM_CUDA_MEGA_FLAGS=1: SwiGLU blocks of 32 made, per 256 (down waits on them, not on a barrier); else NULL */
    int           gmerge;           /* GLIM_CUDA_MEGA_GMERGE=1 (bench knob): every cut tile merged through global memory */
    unsigned long long *trace;      /* GLIM_CUDA_MEGA_TRACE=1: per CTA MG_TR stamps (mg_stamp), else NULL */
};

/* the trace's stamps a CTA: entry, PDL wait done, then per stage its barrier passed, its prologue
 * done (norm or copy), warp 0's first record of the stage in its ring, when warp 0 had waited for
 * its last record of the stage, warp 0's jobs done, and all warps' jobs done */
enum { MG_TR_ENTRY, MG_TR_WAIT, MG_TR_STAGE, MG_TR_PER = 6, MG_TR = MG_TR_STAGE + MG_TR_PER * MG_STAGES };
#define MG_TR_CTA (MG_TR + 1)   /* a CTA's slots in the trace: its stamps, then its SM */

static __shared__ unsigned long long mg_tr_last;   /* the trace: when warp 0 last had a record in */
static __shared__ unsigned mg_landed[MG_CW];       /* GLIM_CUDA_MEGA_DEPTH: each warp's records known to be in */
static __shared__ volatile unsigned mg_pass;       /* GLIM_CUDA_MEGA_DEPTH: thread 0 saw the grid barrier open */

static __device__ __forceinline__ void mg_stamp(const mg_params &p, int which)
{
    if (p.trace && threadIdx.x == 0)
        p.trace[(size_t)blockIdx.x * MG_TR_CTA + which] = cuda_globaltimer();
}

static_assert(MG_STAGES == 4, "stages: Wo, gate/up, down, q/k/v");
static_assert(RMS_VEC_THREADS == MG_VT && MG_CW * 32 * 2 == MG_VT, "the norm plays 1024 threads with 512");

static __device__ __forceinline__ void mg_sync(void)   /* the consumer warps only */
{
    asm volatile("bar.sync 1, %0;" ::"r"(MG_CW * 32) : "memory");
}

static __device__ __forceinline__ unsigned mg_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* A wait that cannot end (a CTA that never became resident, a count gone wrong) traps instead of
 * hanging the device: the launch fails with an error the host reports */
#define MG_SPIN_MAX (1u << 26)

static __device__ __forceinline__ void mg_bar_wait(uint64_t *bar, unsigned parity)
{
    for (unsigned i = 0; !bar_try(bar, parity); i++)
        if (i > MG_SPIN_MAX)
            __trap();
}

/* The grid barriers: bar[0..1] a 64-bit count of arrivals that only grows (2^64 never wraps); a
 * CTA's atomicAdd returns the count before it, so the barrier it arrives at opens when the count
 * reaches the next multiple of the grid. Two trips to L2 from the last arrival to everyone's pass,
 * against five for the generation form it replaced (read the generation, arrive, put the count
 * back to 0, move the generation on, see it move): each trip waits behind the rings' copies in the
 * HBM's queue (queue_probe: 0.2-0.6 us at p50, 0.5-4 at p90). Thread 0 arrives: its target. */
static __device__ __forceinline__ unsigned long long mg_bar_arrive(unsigned *bar)
{
    __threadfence();   /* the CTA's stores (ordered before by mg_sync) before the arrival */
    unsigned long long old = atomicAdd((unsigned long long *)bar, 1ull);
    return (old / gridDim.x + 1) * gridDim.x;
}

static __device__ __forceinline__ bool mg_bar_open(const unsigned *bar, unsigned long long target)
{
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(bar) : "memory");
    return v >= target;
}

/* thread 0: arrive, and wait for the barrier to open */
static __device__ __forceinline__ void mg_bar_pass(unsigned *bar)
{
    unsigned long long target = mg_bar_arrive(bar);
    for (unsigned i = 0; !mg_bar_open(bar, target); i++)
        if (i > MG_SPIN_MAX)
            __trap();
}

/* Every CTA's consumers have arrived (and what they stored before is visible) */
static __device__ void mg_grid_bar(unsigned *bar)
{
    mg_sync();
    if (threadIdx.x == 0)
        mg_bar_pass(bar);
    mg_sync();
}

/* k int8 activations and their k / 32 scales (written by other CTAs or kernels) into xs */
static __device__ void mg_copy_x(uint8_t *xs, const int8_t *q, const float2 *d, int k)
{
    for (int i = threadIdx.x; i < k / 16; i += MG_CW * 32)
        ((uint4 *)xs)[i] = __ldcg((const uint4 *)q + i);
    for (int i = threadIdx.x; i < k / 32; i += MG_CW * 32)
        ((float2 *)(xs + k))[i] = __ldcg(d + i);
    mg_sync();
}

/* block_sum over the 1024 threads played: v0 of thread t, v1 of thread t + 512 */
static __device__ double mg_sum2(double v0, double v1, double *red)
{
    v0 = warp_sum(v0);
    v1 = warp_sum(v1);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    mg_sync();   /* red may still be read by the previous sum */
    if (lane == 0)
        red[warp] = v0, red[warp + MG_CW] = v1;
    mg_sync();
    return warp_sum(red[lane]);
}

/* rms_vec_load through L2: o and x were written by other SMs during this launch */
static __device__ __forceinline__ void mg_vec_load(float4 *v, const float *row, int n4, int tid)
{
#pragma unroll
    for (int j = 0; j < RMS_VEC_MAX; j++) {
        int i = tid + j * MG_VT;
        v[j] = i < n4 ? __ldcg((const float4 *)row + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

/* A norm's weights and residual input asked of L2 a stage ahead (and kept there by the rings'
 * evict-first copies): loaded only after the barrier, they queue behind the rings' copies, up to
 * 26 MB (the norm took 6 us, trace 2026-12-06); held in registers across the barrier, they cost
 * mega_kernel spills. A prefetch reads through L2, the point of coherence, so it cannot make a
 * later load see an older value. */
static __device__ __forceinline__ void mg_norm_prefetch(const mg_norm &m)
{
    const float *v = threadIdx.x == 0 ? m.w_o : threadIdx.x == 32 ? m.w_h : threadIdx.x == 64 ? m.x_in : NULL;
    if (v)
        bulk_prefetch_l2(v, (unsigned)m.n * 4u);
}

/* add_rmsnorm_row's arithmetic (fused.cu) for one row, h quantized into xs (K45) instead of stored,
 * x' stored by the CTA whose turn each float4 is */
static __device__ void mg_norm_run(const mg_norm &m, uint8_t *xs, double *red)
{
    int n4 = m.n / 4;
    float4 ov[2][RMS_VEC_MAX], xv[2][RMS_VEC_MAX], wo[2][RMS_VEC_MAX], wh[2][RMS_VEC_MAX];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int tid = (int)threadIdx.x + h * (MG_VT / 2);
        mg_vec_load(ov[h], m.o, n4, tid);
        mg_vec_load(xv[h], m.x_in, n4, tid);
        rms_vec_load(wo[h], m.w_o, n4, 1.0f, tid);
        rms_vec_load(wh[h], m.w_h, n4, 1.0f, tid);
    }
    float r = rms_scale(mg_sum2(rms_vec_sumsq(ov[0]), rms_vec_sumsq(ov[1]), red), m.n, m.eps_o);
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int j = 0; j < RMS_VEC_MAX; j++) {
            ov[h][j] = rms_vec_apply(ov[h][j], r, wo[h][j], m.w_o != NULL);
            xv[h][j] = add_normed4(xv[h][j], ov[h][j]);
        }
    r = rms_scale(mg_sum2(rms_vec_sumsq(xv[0]), rms_vec_sumsq(xv[1]), red), m.n, m.eps_h);
    int8_t *xq = (int8_t *)xs;
    float2 *xd = (float2 *)(xs + m.n);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int tid = (int)threadIdx.x + h * (MG_VT / 2);
#pragma unroll
        for (int j = 0; j < RMS_VEC_MAX; j++) {
            int i = tid + j * MG_VT;
            if (i >= n4)   /* n % 256 == 0: whole warps leave together */
                break;
            if (i % (int)gridDim.x == (int)blockIdx.x)
                ((float4 *)m.x_out)[i] = xv[h][j];
            quantize4_k45(rms_vec_apply(xv[h][j], r, wh[h][j], m.w_h != NULL), i, xq, xd);
        }
    }
    mg_sync();
}

/* a consumer warp's ring: MG_RB bytes, the records one after the other as they fit (a record that
 * would pass the end goes to 0), record r's copy completing on full[r % MG_NB] and its offset in
 * off[r % MG_NB] */
struct mg_ring {
    uint8_t        *slot;
    uint64_t       *full;
    unsigned short *off;
    uint64_t        pol;   /* the copies' L2 policy: evict-first, so the weights streamed once leave L2
                            * before the small data read again (norm inputs, activations, the KV cache) */
};

/* The next record a ring is to get: job j (j == n_jobs: done), unit x of its range [x, b), x's
 * record at src, and the units from x to the end of x's part (a part's records are contiguous,
 * tile-major): the next record is src + rec until then, so a record costs an add, not a 64-bit
 * division and a part lookup (one a part) */
struct mg_cursor {
    int            j;
    unsigned       rec;
    int64_t        x, b, seg;
    const uint8_t *src;
};

static __device__ void mg_locate(const v5_job &job, mg_cursor &c)
{
    int64_t tile = c.x / job.n_sb;
    v5_part P = v5_pick(job, tile);
    c.src = P.p + (c.x - P.tile0 * job.n_sb) * c.rec;
    c.seg = (P.tile0 + (P.n + 15) / 16) * job.n_sb - c.x;
}

/* the first unit at or after job j that warp w has */
static __device__ void mg_seek(const mg_params &p, int64_t w, mg_cursor &c)
{
    for (; c.j < p.n_jobs; c.j++) {
        const v5_job &job = p.job[c.j];
        int64_t units = v5_units(job);
        c.x = v5_split_lo(w, units, job.n_warps), c.b = v5_split_lo(w + 1, units, job.n_warps);
        if (c.x < c.b) {
            c.rec = p.kind[c.j] ? CUDA_T16_Q6K_BYTES : CUDA_T16_Q4K_BYTES;
            mg_locate(job, c);
            return;
        }
    }
}

/* the cursor one record on */
static __device__ __forceinline__ void mg_advance(const mg_params &p, int64_t w, mg_cursor &c)
{
    if (++c.x == c.b) {
        c.j++;
        mg_seek(p, w, c);
    } else if (--c.seg == 0) {
        mg_locate(p.job[c.j], c);
    } else {
        c.src += c.rec;
    }
}

/* the cursor's record to ring offset off, completing on barrier b (one thread) */
static __device__ __forceinline__ void mg_issue(const mg_ring &rg, unsigned b, unsigned off, const mg_cursor &c)
{
    bar_expect(&rg.full[b], c.rec);
    bulk_copy_hint(rg.slot + off, c.src, c.rec, &rg.full[b], rg.pol);
}

/* GLIM_CUDA_MEGA_DEPTH=d: how many records a warp may have unread (seq: the first unread). In a
 * stage's jobs at most d (the caller passes d: counting those in here cost mega_kernel spills);
 * while the warp waits (a grid barrier, down's ready counts, after the PDL wait) those already in
 * and d more, so the ring still fills, only at the pace the records come in. Why: the rings'
 * copies are the HBM's queue, and every latency-critical load waits behind it. queue_probe
 * (2026-12-06, H100, the rings' shape) read the same 3.05-3.16 TB/s with 1, 3 or 5 records a warp
 * on their way, but an L2 hit took 192 ns (p50) / 480 (p90) beside 1, and 512-640 / 1800-4100
 * beside 3-5. */
static __device__ __forceinline__ unsigned mg_lim(const mg_params &p, const mg_ring &rg, const mg_fill &f, unsigned seq,
                                                  int lane)
{
    if (!p.depth)
        return MG_NB;
    unsigned l = 0;
    if (lane == 0) {
        l = mg_landed[threadIdx.x >> 5];
        if ((int)(l - seq) < 0)
            l = seq;
        while (l != f.issued && bar_test(&rg.full[l % MG_NB], (l / MG_NB) & 1))
            l++;
        mg_landed[threadIdx.x >> 5] = l;
    }
    return __shfl_sync(0xffffffffu, l, 0) - seq + (unsigned)p.depth;   /* unread: those in, and depth more */
}

/* a warp (all lanes): ask for its next records while they fit, at most lim unread (mg_lim: with a
 * depth, as many as are in and depth more) */
static __device__ __forceinline__ void mg_fill_ring(const mg_params &p, int64_t w, const mg_ring &rg, mg_cursor &c,
                                                    mg_fill &f, unsigned seq, int lane, unsigned lim = MG_NB)
{
    unsigned off;
    while (c.j < p.n_jobs && f.issued - seq < lim && mg_room(&f, f.issued - seq, c.rec, &off)) {
        unsigned b = f.issued % MG_NB;
        if (lane == 0) {
            rg.off[b] = (unsigned short)off;
            mg_issue(rg, b, off, c);
        }
        mg_took(&f, seq, off, c.rec);
        mg_advance(p, w, c);
    }
    __syncwarp();   /* off[] as lane 0 wrote it */
}

/* GLIM_CUDA_MEGA_DEPTH: mg_grid_bar with warps 1.. feeding their rings while thread 0 waits for the
 * barrier to open (with a depth, the rings fill during the waits instead of before them). Thread 0
 * spins as mg_grid_bar's does: polling between its warp's feeds made the barrier ~3.5 us slower
 * (H100, 2026-12-06). */
static __device__ void mg_grid_bar_fed(unsigned *bar, const mg_params &p, int64_t w, const mg_ring &rg, mg_cursor &c,
                                       mg_fill &f, unsigned seq, int lane)
{
    if (threadIdx.x == 0)
        mg_pass = 0u;   /* every warp read the last barrier's before its closing mg_sync */
    mg_sync();
    if (threadIdx.x == 0) {
        mg_bar_pass(bar);
        mg_pass = 1u;
    }
    if (threadIdx.x >= 32)
        for (unsigned i = 0; !__shfl_sync(0xffffffffu, lane == 0 ? mg_pass : 0u, 0); i++) {
            mg_fill_ring(p, w, rg, c, f, seq, lane, mg_lim(p, rg, f, seq, lane));
            if (i > MG_SPIN_MAX)
                __trap();
        }
    mg_sync();   /* thread 0's acquire before anyone reads what the other CTAs stored */
}

/* GLIM_CUDA_MEGA_DEPTH: mg_wait_ready with the warp feeding its ring while it waits */
static __device__ void mg_wait_ready_fed(const v5_job &job, int64_t w, const unsigned *ready, int lane, const mg_params &p,
                                         const mg_ring &rg, mg_cursor &c, mg_fill &f, unsigned seq)
{
    int64_t units = v5_units(job), a = v5_split_lo(w, units, job.n_warps), b = v5_split_lo(w + 1, units, job.n_warps);
    int64_t m = b - a < job.n_sb ? b - a : job.n_sb;
    for (unsigned k = 0;; k++) {
        bool in = true;
        for (int64_t i = lane; i < m; i += 32)
            in = in && mg_ld_acquire(ready + (a + i) % job.n_sb) >= 8u;
        if (__all_sync(0xffffffffu, in))
            break;
        mg_fill_ring(p, w, rg, c, f, seq, lane, mg_lim(p, rg, f, seq, lane));
        if (k > MG_SPIN_MAX)
            __trap();
    }
}

/* The CTA's side of v5's merge: a tile cut between warps of one CTA has its pieces' partial sums
 * added here instead of through global memory, so the pieces need only CTA-scope ordering, not
 * the GPU-scope fence (`MEMBAR.SC.GPU`, ~14% of the warps' stalls by ncu) of v5_last_piece. Slot
 * [jp][warp][0] holds a warp's piece of the first tile of its range, [1] of its last (a warp cuts
 * at most those two); the count of a tile's pieces in is kept under its first warp (at most one
 * cut tile starts in a warp's range). jp: the job's parity, since a warp may start the next job of
 * a stage while its neighbours merge this one's; a stage ends with every merge done. */
struct mg_merge {
    float    part[2][MG_CW][2][16];
    unsigned cnt[2][MG_CW];
};

/* GLIM_CUDA_MEGA_FLAGS=1: SwiGLU block blk (>= 0: this warp just quantized it) counted in its
 * super-block's ready count, after its int8 values and scale are visible */
static __device__ __forceinline__ void mg_glu_ready(unsigned *ready, int64_t blk, int lane)
{
    if (!ready || blk < 0)
        return;
    __threadfence();
    __syncwarp();
    if (lane == 0)
        atomicAdd(&ready[blk >> 3], 1u);
}

/* ... and down's warp w waits, instead of a grid barrier, until every super-block of its units is
 * in (8 blocks each); its lanes then read the activations from global memory (the acquire leaves
 * no stale line in L1) */
static __device__ void mg_wait_ready(const v5_job &job, int64_t w, const unsigned *ready, int lane)
{
    int64_t units = v5_units(job), a = v5_split_lo(w, units, job.n_warps), b = v5_split_lo(w + 1, units, job.n_warps);
    int64_t m = b - a < job.n_sb ? b - a : job.n_sb;
    for (int64_t i = lane; i < m; i += 32)
        for (unsigned k = 0; mg_ld_acquire(ready + (a + i) % job.n_sb) < 8u; k++)
            if (k > MG_SPIN_MAX)
                __trap();
    __syncwarp();
}

/* v5_store for warp w's piece of a tile cut over warps w0..w1: in shared memory when they are all
 * in this CTA, else v5's own way. The same partial sums, added in piece order from 0: the same
 * bits. */
static __device__ __forceinline__ void mg_store(const v5_job &job, const v5_part &P, int64_t tile, int64_t w, int64_t w0,
                                                int64_t w1, int64_t r0, int lane, float acc_g, float acc_g8,
                                                mg_merge *mm, int jp, bool global, unsigned *ready, int slot)
{
    int pieces = (int)(w1 - w0 + 1);
    if (pieces == 1 || global || w0 / MG_CW != w1 / MG_CW) {
        mg_glu_ready(ready, v5_store(job, P, tile, (int)(w - w0), pieces, job.stride, r0, lane, acc_g, acc_g8), lane);
        return;
    }
    int g = lane >> 2, t = lane & 3, l0 = (int)(w0 % MG_CW);
    v5_group_sums(acc_g, acc_g8);
    float *pp = mm->part[jp][w % MG_CW][slot];
    if (t == 0) {
        pp[g] = acc_g;
        pp[g + 8] = acc_g8;
    }
    __threadfence_block();   /* the partials before the count */
    __syncwarp();
    unsigned done = 0;
    if (lane == 0)
        done = atomicAdd(&mm->cnt[jp][l0], 1u);
    if (__shfl_sync(0xffffffffu, done, 0) != (unsigned)pieces - 1)
        return;
    __threadfence_block();   /* the last piece in: every partial of the tile is visible */
    if (lane < 16 && r0 + lane < P.n) {
        /* every warp after w0 starts its range inside the tile: slot 0 (test_mega_ring); only w0's
         * slot costs mg_slot_of's 64-bit divisions */
        float y = 0.0f + mm->part[jp][w0 % MG_CW][mg_slot_of(w0, tile, v5_units(job), job.n_warps, job.n_sb)][lane];   /* v5's sum from 0: -0 too */
        for (int i = 1; i < pieces; i++)
            y += mm->part[jp][(w0 + i) % MG_CW][0][lane];
        P.y[r0 + lane] = y;
    }
    if (lane == 0)
        mm->cnt[jp][l0] = 0u;   /* for the next job of this parity (after the stage's end) */
    if (job.glu_cnt)
        mg_glu_ready(ready, v5_glu_arrive(job, P, tile, lane), lane);
}

/* consumer warp w's units of a job, each record taken from its ring (seq: the warp's records so
 * far); v5_run's sums and store. Once a record is used, the warp asks for its next records (cursor
 * c) into the bytes it freed. */
template <class K>
static __device__ __forceinline__ void mg_job_run(const mg_params &p, const v5_job &job, const int8_t *xq,
                                                  const float2 *xd, int64_t w, int lane, const mg_ring &rg, unsigned &seq,
                                                  mg_cursor &c, mg_fill &f, mg_merge *mm, int jp)
{
    int g = lane >> 2, t = lane & 3;
    int64_t units = v5_units(job), n_sb = job.n_sb;
    int64_t a = v5_split_lo(w, units, job.n_warps), b = v5_split_lo(w + 1, units, job.n_warps);
#pragma unroll 1
    for (int64_t x = a; x < b;) {
        int64_t tile = x / n_sb, tend = (tile + 1) * n_sb, e = tend < b ? tend : b;
        v5_part P = v5_pick(job, tile);
        int64_t r0 = (tile - P.tile0) * 16;
        float acc_g = 0.0f, acc_g8 = 0.0f;
#pragma unroll 1
        for (int64_t s = x - tile * n_sb; s < e - tile * n_sb; s++, seq++) {
            mg_bar_wait(&rg.full[seq % MG_NB], (seq / MG_NB) & 1);
            if (p.trace && threadIdx.x == 0)   /* the stage's last of these goes to the trace */
                mg_tr_last = cuda_globaltimer();
            v5_part R = {rg.slot + f.r_off, NULL, 16, 0, 0};   /* the record as tile 0, super-block 0 */
            typename K::raw raw;
            K::fetch(R, g, g + 8, 1, 0, t, raw);
            K::compute(raw, xq, xd, s, g, t, acc_g, acc_g8);
            /* every lane has used what it read of the record: its bytes may be copied over */
            __syncwarp();
            if (f.issued != seq + 1)
                f.r_off = rg.off[(seq + 1) % MG_NB];
            mg_fill_ring(p, w, rg, c, f, seq + 1, lane, p.depth ? (unsigned)p.depth : MG_NB);
        }
        int64_t w0 = v5_warp_of(job, tile * n_sb), w1 = v5_warp_of(job, tend - 1);
        mg_store(job, P, tile, w, w0, w1, r0, lane, acc_g, acc_g8, mm, jp, p.gmerge != 0, p.ready, x == a ? 0 : 1);
        x = e;
    }
}

static __global__ void __launch_bounds__(MG_NT, 1) mega_kernel(const mg_params p)
{
    extern __shared__ __align__(128) uint8_t mg_smem[];
    __shared__ uint64_t full[MG_CW * MG_NB];
    __shared__ unsigned short offs[MG_CW * MG_NB];
    __shared__ double red[32];
    __shared__ mg_merge mm;
    int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
    mg_stamp(p, MG_TR_ENTRY);
    if (p.trace && threadIdx.x == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        p.trace[(size_t)blockIdx.x * MG_TR_CTA + MG_TR] = sm;
    }
    cuda_pdl_trigger();   /* the attention after it may be placed; it waits for the end */
    if (threadIdx.x == 0) {
        for (int i = 0; i < MG_CW * MG_NB; i++)
            bar_init(&full[i], 1);
        bar_init_fence();
    }
    for (int i = threadIdx.x; i < 2 * MG_CW; i += blockDim.x)
        mm.cnt[i / MG_CW][i % MG_CW] = 0u;
    if (threadIdx.x < MG_CW)
        mg_landed[threadIdx.x] = 0u;
    __syncthreads();
    mg_ring rg = {mg_smem + (size_t)warp * MG_RB, full + warp * MG_NB, offs + warp * MG_NB, l2_policy(p.ef ? L2_EVICT_FIRST : L2_EVICT_NORMAL)};
    int64_t w = (int64_t)blockIdx.x * MG_CW + warp;
    mg_cursor c = {0, 0, 0, 0, 0, NULL};
    mg_fill f = {0, 0, 0};
    mg_seek(p, w, c);   /* the first records: weights only, no wait for the kernels before */
    mg_fill_ring(p, w, rg, c, f, 0, lane, (unsigned)p.pre);
    uint8_t *xs = mg_smem + MG_RING;
    unsigned seq = 0;
    cuda_pdl_wait();
    mg_stamp(p, MG_TR_WAIT);
    if (p.pre < MG_NB)
        mg_fill_ring(p, w, rg, c, f, 0, lane, mg_lim(p, rg, f, 0, lane));
    /* Neither loop is unrolled: each piece of code is in the kernel once (unrolled, the job code
     * was there 16 times, and the warps stalled on instruction fetch, ncu 2026-12-06) */
#pragma unroll 1
    for (int st = 0; st < MG_STAGES; st++) {
        bool flags = st == MG_DOWN && p.ready;   /* down waits on the ready counts instead */
        bool norm = st == MG_GU || st == MG_QKV;
        if (st > MG_WO && !flags) {
            if (p.depth && p.feed)
                mg_grid_bar_fed(p.bar + 64 * (st - 1), p, w, rg, c, f, seq, lane);
            else
                mg_grid_bar(p.bar + 64 * (st - 1));
        }
        mg_stamp(p, MG_TR_STAGE + MG_TR_PER * st);
        if (norm)
            mg_norm_run(p.norm[st == MG_QKV], xs, red);
        else if (st == MG_WO)
            mg_copy_x(xs, p.xq_in, p.xd_in, p.k[st]);
        else if (!flags)
            mg_copy_x(xs, p.xq_glu, p.xd_glu, p.k[st]);
        if (st == MG_QKV && p.ready && blockIdx.x == 0)   /* every down warp is past its waits: 0 for the next span */
            for (int i = threadIdx.x; i < p.k[MG_DOWN] / 256; i += MG_NT)
                p.ready[i] = 0u;
        if (st == MG_WO || st == MG_DOWN)   /* the next stage's norm */
            mg_norm_prefetch(p.norm[st == MG_DOWN]);
        mg_stamp(p, MG_TR_STAGE + MG_TR_PER * st + 1);
        if (p.trace && warp == 0) {   /* diagnosis: was the stage's first record there (warp 0 always has one) */
            mg_bar_wait(&rg.full[seq % MG_NB], (seq / MG_NB) & 1);
            mg_stamp(p, MG_TR_STAGE + MG_TR_PER * st + 2);
        }
        const int8_t *xq = flags ? p.xq_glu : (const int8_t *)xs;
        const float2 *xd = flags ? p.xd_glu : (const float2 *)(xs + p.k[st]);
#pragma unroll 1
        for (int j = 0; j < p.n_jobs; j++) {
            if (p.stage[j] != st)
                continue;
            if (flags && p.depth && p.feed)
                mg_wait_ready_fed(p.job[j], w, p.ready, lane, p, rg, c, f, seq);
            else if (flags)
                mg_wait_ready(p.job[j], w, p.ready, lane);
            if (p.kind[j])
                mg_job_run<v5_q6k_t16>(p, p.job[j], xq, xd, w, lane, rg, seq, c, f, &mm, j & 1);
            else
                mg_job_run<v5_q4k_t16>(p, p.job[j], xq, xd, w, lane, rg, seq, c, f, &mm, j & 1);
        }
        if (p.trace && threadIdx.x == 0)
            p.trace[(size_t)blockIdx.x * MG_TR_CTA + MG_TR_STAGE + MG_TR_PER * st + 3] = mg_tr_last;
        mg_stamp(p, MG_TR_STAGE + MG_TR_PER * st + 4);
        mg_sync();   /* xs is rewritten by the next stage */
        mg_stamp(p, MG_TR_STAGE + MG_TR_PER * st + 5);
    }
}

/* ---- host ----------------------------------------------------------------------------- */

static bool mg_norm_ok(const struct be_res_norm *r)
{
    uintptr_t ptrs = (uintptr_t)r->x | (uintptr_t)r->h | (uintptr_t)r->o | (uintptr_t)(r->w_o ? r->w_o->dev : NULL) |
                     (uintptr_t)(r->w_h ? r->w_h->dev : NULL);
    return r->h && rms_vec_ok(r->n, ptrs) && r->n % 256 == 0 && r->n <= MG_KMAX &&
           (!r->w_o || r->w_o->dev_type == GLIM_TYPE_F32) && (!r->w_h || r->w_h->dev_type == GLIM_TYPE_F32);
}

/* the stage's jobs into p (false: a weight is not for v5's tiles, or too many jobs) */
static bool mg_add(struct cuda_ctx *c, mg_params &p, int stage, int n, float *const *ys,
                   const struct be_weight *const *ws, bool glu, float *part, unsigned *cnt, size_t *po, size_t *co)
{
    if (p.n_jobs + 2 > MG_JOBS || ws[0]->k > MG_KMAX)
        return false;
    int kinds[2];
    int m = cuda_v5_jobs(c, n, ys, ws, glu, p.job + p.n_jobs, kinds, part, cnt, po, co);
    for (int i = 0; i < m; i++) {
        p.kind[p.n_jobs + i] = (int8_t)kinds[i];
        p.stage[p.n_jobs + i] = (int8_t)stage;
    }
    p.n_jobs += m;
    p.k[stage] = (int)ws[0]->k;
    return m > 0;
}

/* every job of the span, with partial sums and counts from part / cnt (NULL: sizes only) */
static bool mg_plan(struct cuda_ctx *c, const struct cuda_mega_args *a, mg_params &p, float *part, unsigned *cnt,
                    size_t *po, size_t *co)
{
    memset(&p, 0, sizeof p);
    *po = *co = 0;
    float *wo_y = a->wo_y;
    const struct be_weight *wo = a->wo;
    float *ffn_y[2] = {a->ffn_f[0], a->ffn_f[1]};
    return mg_add(c, p, MG_WO, 1, &wo_y, &wo, false, part, cnt, po, co) &&
           mg_add(c, p, MG_GU, 2, ffn_y, a->ffn_w, true, part, cnt, po, co) &&
           mg_add(c, p, MG_DOWN, 1, &a->ffn_y, a->ffn_w + 2, false, part, cnt, po, co) &&
           mg_add(c, p, MG_QKV, a->n, a->ys, a->ws, false, part, cnt, po, co);
}

bool cuda_mega_ok(struct cuda_ctx *c, const struct cuda_mega_args *a)
{
    if (c->cc_major < 9 || c->exact || a->n < 1 || a->n > GEMV_MAX_PARTS || !mg_norm_ok(&a->r_ffn) ||
        !mg_norm_ok(&a->r_attn) || a->r_ffn.n != a->r_attn.n || a->r_ffn.x != a->r_attn.x ||
        a->wo->n != a->r_ffn.n || a->ffn_w[2]->n != a->r_ffn.n || a->ws[0]->k != a->r_ffn.n ||
        a->ffn_w[0]->k != a->r_ffn.n || a->ffn_w[2]->k != a->ffn_w[0]->n || c->n_sm * MG_CW < 1)
        return false;
    for (const struct be_weight *w : {a->wo, a->ffn_w[0], a->ffn_w[1], a->ffn_w[2]})
        if (w->dev_type != CUDA_DT_Q4_K_T16 && w->dev_type != CUDA_DT_Q6_K_T16)
            return false;
    for (int i = 0; i < a->n; i++)
        if (a->ws[i]->dev_type != CUDA_DT_Q4_K_T16 && a->ws[i]->dev_type != CUDA_DT_Q6_K_T16)
            return false;
    return true;
}

void cuda_mega_wo(struct cuda_ctx *c, const struct cuda_mega_args *a)
{
    bool taken[GEMV_MAX_PARTS];
    float *y = a->wo_y;
    const struct be_weight *w = a->wo;
    if (!cuda_gemv5(c, 1, &y, &w, a->wo_xq, a->wo_xd, taken))
        cuda_check(c, cudaErrorInvalidValue, "mega: v5 did not take the deferred Wo", __FILE__, __LINE__);
}

bool cuda_mega_launch(struct cuda_ctx *c, const struct cuda_mega_args *a)
{
    static bool attr_set = false;
    mg_params p;
    size_t po, co;
    if (!cuda_mega_ok(c, a) || !mg_plan(c, a, p, NULL, NULL, &po, &co))
        return false;
    size_t x2_off = (po * sizeof(float) + 255) & ~(size_t)255;
    if (!cuda_buf_reserve(c, &c->mg_scratch, x2_off + (size_t)a->r_ffn.n * sizeof(float)) ||
        !cuda_buf_counts(c, &c->mg_cnt, (MG_BARW + MG_RDYW + co) * sizeof(unsigned)))
        return false;
    float *part = (float *)c->mg_scratch.p, *x2 = (float *)((uint8_t *)c->mg_scratch.p + x2_off);
    unsigned *cnt = (unsigned *)c->mg_cnt.p;
    if (!mg_plan(c, a, p, part, cnt + MG_BARW + MG_RDYW, &po, &co))
        return false;
    p.bar = cnt;   /* first: a barrier's count keeps its value, so no tile's count may land on it */
    p.ef = c->mg_ef;
    p.depth = c->mg_depth >= 1 && c->mg_depth < MG_NB ? c->mg_depth : 0;
    p.feed = c->mg_feed;
    /* with a depth, no record before the PDL wait unless GLIM_CUDA_MEGA_PRE says: the attention
     * before the span then reads with no copies queued ahead of it (131.07 / 131.14 vs 130.21 /
     * 130.18 t/s, H100, 2026-12-06) */
    p.pre = p.depth ? (c->mg_pre >= 1 && c->mg_pre <= p.depth ? c->mg_pre : 0)
                    : c->mg_pre >= 0 && c->mg_pre < MG_NB ? c->mg_pre : MG_NB;
    p.ready = c->mg_flags ? cnt + MG_BARW : NULL;
    p.gmerge = c->mg_gmerge;
    if (c->mg_trace && c->mg_trace_n < MG_TRACE_CAP)
        p.trace = (unsigned long long *)c->mg_trace + (size_t)c->mg_trace_n++ * c->n_sm * MG_TR_CTA;
    p.xq_in = a->wo_xq, p.xd_in = a->wo_xd;
    for (int j = 0; j < p.n_jobs; j++)
        if (p.stage[j] == MG_GU)
            p.xq_glu = p.job[j].glu_q, p.xd_glu = p.job[j].glu_d;
    const struct be_res_norm *r[2] = {&a->r_ffn, &a->r_attn};
    for (int i = 0; i < 2; i++) {
        p.norm[i] = (mg_norm){i ? x2 : r[i]->x, r[i]->o, r[i]->w_o ? (const float *)r[i]->w_o->dev : NULL,
                              r[i]->w_h ? (const float *)r[i]->w_h->dev : NULL, i ? r[i]->x : x2,
                              r[i]->eps_o, r[i]->eps_h, r[i]->n};
    }
    if (!attr_set) {
        if (CUDA_TRY(c, cudaFuncSetAttribute(mega_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MG_SMEM)))
            return false;
        attr_set = true;
    }
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = cuda_launch_cfg_pdl(c, dim3((unsigned)c->n_sm), dim3(MG_NT), MG_SMEM, attr, c->pdl_all);
    cfg.numAttrs = c->pdl_all ? 1 : 0;   /* no carveout below the whole shared memory: the ring needs it */
    return !CUDA_TRY(c, cudaLaunchKernelEx(&cfg, mega_kernel, p));
}

/* ---- the trace (GLIM_CUDA_MEGA_TRACE=1, diagnosis): per span launched since graph_begin (the last
 * replay's, in graphs), per CTA the stamps of mg_stamp; printed at backend_destroy ---- */
bool cuda_mega_trace_init(struct cuda_ctx *c)
{
    return !CUDA_TRY(c, cudaMalloc(&c->mg_trace, (size_t)MG_TRACE_CAP * c->n_sm * MG_TR_CTA * sizeof(unsigned long long)));
}

static double mg_corr(const double *a, const double *b, int n)
{
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++)
        ma += a[i] / n, mb += b[i] / n;
    for (int i = 0; i < n; i++)
        sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0.0;
}

/* Is a stage's spread between CTAs the SMs'? Per SM, the mean time of each FFN stage from its
 * prologue's end to its last warp's end (gate/up, down), over the even and the odd launches
 * apart: the spread of those means, and how they correlate (even vs odd: is an SM's pace its
 * own; gate/up vs down: is it the same in both stages) */
static void mg_trace_by_sm(struct cuda_ctx *c, int n)
{
    int ns = c->n_sm, per = MG_TR_CTA;
    size_t all = (size_t)n * ns * per;
    unsigned long long *h = (unsigned long long *)malloc(all * sizeof *h);
    double *acc = (double *)calloc((size_t)ns * 6, sizeof *acc);   /* per SM: gate/up even, odd, down even, odd, counts even, odd */
    if (n < 2 || !h || !acc || cudaMemcpy(h, c->mg_trace, all * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h), free(acc);
        return;
    }
    for (int i = 0; i < n; i++)
        for (int b = 0; b < ns; b++) {
            const unsigned long long *q = h + ((size_t)i * ns + b) * per;
            unsigned long long sm = q[MG_TR];
            if (sm >= (unsigned long long)ns)
                continue;
            int e = i & 1;
            double gu = ((double)q[MG_TR_STAGE + MG_TR_PER * MG_GU + 5] - (double)q[MG_TR_STAGE + MG_TR_PER * MG_GU + 1]) / 1e3;
            double dn = ((double)q[MG_TR_STAGE + MG_TR_PER * MG_DOWN + 5] - (double)q[MG_TR_STAGE + MG_TR_PER * MG_DOWN + 1]) / 1e3;
            acc[sm * 6 + e] += gu, acc[sm * 6 + 2 + e] += dn, acc[sm * 6 + 4 + e] += 1;
        }
    double *g0 = (double *)malloc((size_t)ns * 6 * sizeof(double));
    if (!g0) {
        free(h), free(acc);
        return;
    }
    double *g1 = g0 + ns, *d0 = g0 + 2 * ns, *d1 = g0 + 3 * ns, *gs = g0 + 4 * ns, *ds = g0 + 5 * ns;
    int m = 0;
    for (int s = 0; s < ns; s++) {
        const double *a = acc + s * 6;
        if (a[4] < 1 || a[5] < 1)
            continue;
        g0[m] = a[0] / a[4], g1[m] = a[1] / a[5], d0[m] = a[2] / a[4], d1[m] = a[3] / a[5];
        gs[m] = (g0[m] + g1[m]) / 2, ds[m] = (d0[m] + d1[m]) / 2;
        m++;
    }
    if (m > 2) {
        fprintf(stderr, "mega trace: by SM (%d SMs seen in both halves): corr(gate/up even, odd) %.3f, corr(down even, odd) %.3f, "
                        "corr(gate/up, down) %.3f\n", m, mg_corr(g0, g1, m), mg_corr(d0, d1, m), mg_corr(gs, ds, m));
        qsort(gs, (size_t)m, sizeof *gs, cuda_cmp_dbl);
        qsort(ds, (size_t)m, sizeof *ds, cuda_cmp_dbl);
        fprintf(stderr, "mega trace: by SM, gate/up us: min %.2f p10 %.2f p50 %.2f p90 %.2f max %.2f | down us: min %.2f p50 %.2f max %.2f\n",
                gs[0], gs[m / 10], gs[m / 2], gs[m * 9 / 10], gs[m - 1], ds[0], ds[m / 2], ds[m - 1]);
    }
    free(g0), free(h), free(acc);
}

/* Over the traced spans: cuda_stamps_dump, then mg_trace_by_sm */
void cuda_mega_trace_dump(struct cuda_ctx *c)
{
    static const char *const what[MG_TR] = {
        "entry", "PDL wait done",
        "  (no barrier)", "Wo input copied", "  w0 first record in", "  w0 last record in", "  w0 jobs done", "Wo done",
        "barrier", "norm", "  w0 first record in", "  w0 last record in", "  w0 jobs done", "gate/up done",
        "barrier", "GLU copy", "  w0 first record in", "  w0 last record in", "  w0 jobs done", "down done",
        "barrier", "norm", "  w0 first record in", "  w0 last record in", "  w0 jobs done", "q/k/v done"};
    if (!c->mg_trace)
        return;
    int n = c->mg_trace_n < MG_TRACE_CAP ? c->mg_trace_n : MG_TRACE_CAP;
    cuda_stamps_dump("mega trace", c->mg_trace, n, c->n_sm * MG_TR_CTA, c->n_sm, MG_TR, MG_TR_CTA, what);
    mg_trace_by_sm(c, n);
}
