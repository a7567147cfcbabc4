/*
 * gemv_ring.cuh — private to gemv_mma.cu (included after v5's work split and stores): GEMV v5 on
 * 16-row tiles fed through a shared-memory ring (v5r; opt-in GLIM_CUDA_V5R, sm_90; Q4_K, Q6_K or both).
 *
 * WHY (docs/PERFORMANCE.md "the two models of a persistent decode"): a ring of shared-memory pages
 * filled by ONE thread's bulk copies (cp.async.bulk, tma.cuh) streams at 4.66 TB/s on the H200,
 * where the register-loading v5 reaches ~3.8 and pays a ramp and a tail per launch. The weights
 * do not depend on the activations, so the loader starts at the kernel's first instruction, before
 * the PDL wait: the ring (~190 KB an SM, ~25 MB in all) fills while the kernel before (add_rmsnorm)
 * still runs. (An earlier streaming v5 gave each warp its own ring and its own copies, 746b235,
 * and lost: the warps spun on their stage barriers. Here the copies are one thread's, the pages
 * are the CTA's, and a consumer warp only waits for a page that is not there yet.)
 *
 * One CTA an SM: cw consumer warps (GLIM_CUDA_V5R_CW, default 8) and one loader warp. The job is
 * split over cw warps a CTA exactly as v5 splits it over that many warps (v5_split_lo), and each
 * warp adds its units in v5's order and stores through v5_store, so a v5r launch gives the bits of
 * a v5 launch planned with the same number of warps. Page p of the ring holds, for each warp, its
 * units [lo + p R, lo + (p + 1) R) (R = records a warp a page), one bulk copy per warp and part; a
 * warp frees a page (its "empty" mbarrier, count cw) once it has used its records in it.
 */
#include "tma.cuh"

#define V5R_CW_MAX 16                           /* consumer warps a CTA at most (GLIM_CUDA_V5R_CW) */
#define V5R_THREADS_MAX ((V5R_CW_MAX + 1) * 32)   /* and the loader warp */
#define V5R_MAXP 24                             /* ring pages at most */

struct v5r_cfg {
    int cw;        /* consumer warps a CTA (the loader is warp cw) */
    int recs;      /* records (tile, super-block units) a warp a page */
    int slot;      /* bytes a warp a page: recs x the largest record of the kernel's jobs */
    int pages;     /* pages in the ring */
    int n_pages;   /* pages of this job a CTA streams: ceil(most units a warp / recs) */
    int seq0;      /* the ring's sequence number of the job's first page (after an earlier job's) */
    int x_off;     /* where the copy of x starts in shared memory (after the ring) */
    int x_l1;      /* 1: read x through L1 instead (GLIM_CUDA_V5R_L1=1; not the chain's down) */
};

/* The residual norm in front of a ring launch's first job (the FFN chain, GLIM_CUDA_NORM_FOLD=1,
 * cuda_norm_ffn; the q/k/v job, GLIM_CUDA_QKV_FOLD=1, cuda_norm_matmul): add_rmsnorm's operands,
 * h's int8 copy to make (xq, xd: the job's x); o == NULL: none */
struct v5r_norm_args {
    float       *x, *h, *o;
    const float *w_o, *w_h;
    float        eps_o, eps_h;
    int          n;
    int8_t      *xq;
    float2      *xd;
};

/* a T16 record's run `run` in shared memory: lane 4g + t's 16 bytes (gemv_mma_lane.h v5_t16_run) */
static __device__ __forceinline__ void v5r_run(const uint8_t *b, int run, int g, int t, uint2 *row_g, uint2 *row_g8)
{
    uint4 v = *(const uint4 *)(b + 512 * run + 64 * g + 16 * t);
    row_g->x = v.x, row_g->y = v.y, row_g8->x = v.z, row_g8->y = v.w;
}

/* v5_q4k_fetch_t16 / v5_q6k_fetch_t16 from a record in shared memory (same layout, same registers) */
static __device__ __forceinline__ void v5r_fetch(const uint8_t *b, int g, int t, v5_q4k_raw &r)
{
#pragma unroll
    for (int c = 0; c < 4; c++)
        v5r_run(b, c, g, t, &r.q[0][c], &r.q[1][c]);
    r.h[0] = *(const uint4 *)(b + 2048 + 16 * g);
    r.h[1] = *(const uint4 *)(b + 2048 + 16 * (g + 8));
}

static __device__ __forceinline__ void v5r_fetch(const uint8_t *b, int g, int t, v5_q6k_raw &r)
{
#pragma unroll
    for (int u = 0; u < 4; u++)
        v5r_run(b, u, g, t, &r.ql[0][u], &r.ql[1][u]);
#pragma unroll
    for (int h = 0; h < 2; h++)
        v5r_run(b, 4 + h, g, t, &r.qh[0][h], &r.qh[1][h]);
    r.sc[0] = *(const uint32_t *)(b + 3072 + 16 * g + 4 * t);
    r.sc[1] = *(const uint32_t *)(b + 3072 + 16 * (g + 8) + 4 * t);
    r.d[0] = *(const unsigned short *)(b + 3328 + 2 * g);
    r.d[1] = *(const unsigned short *)(b + 3328 + 2 * (g + 8));
}

/* bytes of one T16 record of the raw type's weight */
template <class R> struct v5r_bytes;
template <> struct v5r_bytes<v5_q4k_raw> { static const int N = 2304; };
template <> struct v5r_bytes<v5_q6k_raw> { static const int N = 3360; };

/* warp wi of this CTA: its units [a, b) */
static __device__ __forceinline__ void v5r_range(const v5_job &job, int cw, int wi, int64_t &a, int64_t &b)
{
    int64_t w = (int64_t)blockIdx.x * cw + wi, units = v5_units(job);
    a = v5_split_lo(w, units, job.n_warps);
    b = v5_split_lo(w + 1, units, job.n_warps);
}

/* the loader's walk over a consumer warp's units (gemv_ring_walk.h, tested on the CPU) */
#define V5R_COPY(dst, src, bytes, bar) bulk_copy(dst, src, bytes, (uint64_t *)(bar))
#include "gemv_ring_walk.h"

/* The loader warp: lane wi < cfg.cw walks consumer warp wi's units; every page of this CTA in
 * order, held back only by free pages. Lane 0 announces a page's bytes before any copy of it. */
template <int BA, int BB>
static __device__ void v5r_load(const v5_job &job, const v5r_cfg cfg, uint8_t *ring, uint64_t *full, uint64_t *empty,
                                int lane)
{
    const v5r_parts J = {job.p, job.n_parts, job.n_tiles, job.n_sb, BA, BB};
    v5r_cursor c = {};
    const int cw = cfg.cw;
    if (lane < cw) {
        int64_t a, b;
        v5r_range(job, cw, lane, a, b);
        v5r_cursor_init(&J, &c, a, b);
    }
    const size_t slot = (size_t)cfg.slot, page = cw * slot;
    for (int p = 0; p < cfg.n_pages; p++) {
        int q = cfg.seq0 + p, s = q % cfg.pages;
        if (q >= cfg.pages) {
            bar_wait_or_trap(&empty[s], (unsigned)(q / cfg.pages - 1) & 1u);
            fence_proxy_async_smem();   /* the consumers' reads of this page before our copies */
        }
        v5r_cursor peek = c;
        unsigned bytes = lane < cw ? v5r_take(&J, &peek, cfg.recs, NULL, NULL) : 0u;
        for (int o = 16; o; o >>= 1)   /* (lanes >= cw add 0) */
            bytes += __shfl_xor_sync(0xffffffffu, bytes, o);
        if (lane == 0)
            bar_expect(&full[s], bytes);
        __syncwarp();
        if (lane < cw)
            v5r_take(&J, &c, cfg.recs, ring + s * page + lane * slot, &full[s]);
    }
}

/* a tile's sums of this warp into y or its piece (v5_run's store); then the prep fold's count */
template <int MODE>
static __device__ __forceinline__ void v5r_flush(const v5_job &job, const v5_part &P, int64_t tile, int64_t w,
                                                 int lane, float acc_g, float acc_g8, const v5r_prep &pr, float *row)
{
    int64_t w0 = v5_warp_of(job, tile * job.n_sb), w1 = v5_warp_of(job, (tile + 1) * job.n_sb - 1);
    bool wrote = v5_store<MODE>(job, P, tile, (int)(w - w0), (int)(w1 - w0 + 1), job.stride, (tile - P.tile0) * 16,
                                lane, acc_g, acc_g8);
    if (MODE == V5_PLAIN && pr.cnt && wrote)
        v5r_prep_arrive(job, P, tile, lane, pr, row);
}

/* the consumer warps' barrier (named barrier 1; the loader warp is not in it) */
static __device__ __forceinline__ void v5r_csync(int cw)
{
    asm volatile("bar.sync 1, %0;" ::"r"(cw * 32) : "memory");
}

/* A wait on a count this grid makes (the GLU blocks quantized before V5_CHAIN_B, the folded
 * norm before the first job): one thread a CTA polls it (acquire; past ~2 s it traps, spin_check:
 * a launch error, not wrong output or a hung device), then the CTA's consumer warps go on
 * together (named barrier 1; the loader warp is not in it) */
static __device__ __forceinline__ void v5r_wait_count(const unsigned *cnt, unsigned need, int cw, int wi, int lane)
{
    if (wi == 0 && lane == 0) {
        spin_guard g = {0u, 0ull};
        for (;;) {
            unsigned v;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(cnt) : "memory");
            if (v >= need)
                break;
            __nanosleep(64);
            spin_check(&g);
        }
    }
    v5r_csync(cw);
}

/* add_rmsnorm of one row (rms_vec_ok, n % 256 == 0) by this CTA's cw consumer warps with
 * add_rmsnorm_vec_kernel's bits (fused.cu add_rmsnorm_row): warp wi plays that kernel's warps
 * wi, wi + cw, .. (its thread 32 vw + lane), each of them sums as there (warp_sum) into red[vw],
 * and every warp sums red as block_sum does. The values are loaded again for each of the three
 * passes instead of held (four threads' worth would not fit in registers beside the ring); the
 * same loads and operations give the same bits. Then h's int8 copy (quantize4_k45). */
static __device__ void v5r_norm_run(const v5r_norm_args &N, int cw, int wi, int lane, double *red)
{
    const int n4 = N.n / 4;
    const bool wgt_o = N.w_o != NULL, wgt_h = N.w_h != NULL;
    float4 ov[RMS_VEC_MAX], xv[RMS_VEC_MAX], wo[RMS_VEC_MAX], wh[RMS_VEC_MAX];
    for (int vw = wi; vw < 32; vw += cw) {   /* sum of o^2 */
        rms_vec_load(ov, N.o, n4, 0.0f, 32 * vw + lane);
        double ss = warp_sum(rms_vec_sumsq(ov));
        if (lane == 0)
            red[vw] = ss;
    }
    v5r_csync(cw);
    const float r_o = rms_scale(warp_sum(red[lane]), N.n, N.eps_o);
    v5r_csync(cw);   /* red is written again */
    for (int vw = wi; vw < 32; vw += cw) {   /* x + normed o, its sum of squares */
        int tid = 32 * vw + lane;
        rms_vec_load(ov, N.o, n4, 0.0f, tid);
        rms_vec_load(xv, N.x, n4, 0.0f, tid);
        rms_vec_load(wo, N.w_o, n4, 1.0f, tid);
#pragma unroll
        for (int j = 0; j < RMS_VEC_MAX; j++)
            xv[j] = add_normed4(xv[j], rms_vec_apply(ov[j], r_o, wo[j], wgt_o));
        double ss = warp_sum(rms_vec_sumsq(xv));
        if (lane == 0)
            red[vw] = ss;
    }
    v5r_csync(cw);
    const float r_h = rms_scale(warp_sum(red[lane]), N.n, N.eps_h);
    for (int vw = wi; vw < 32; vw += cw) {   /* the stores, as add_rmsnorm_row's last loop */
        int tid = 32 * vw + lane;
        rms_vec_load(ov, N.o, n4, 0.0f, tid);
        rms_vec_load(xv, N.x, n4, 0.0f, tid);
        rms_vec_load(wo, N.w_o, n4, 1.0f, tid);
        rms_vec_load(wh, N.w_h, n4, 1.0f, tid);
#pragma unroll
        for (int j = 0; j < RMS_VEC_MAX; j++) {
            int i = tid + j * RMS_VEC_THREADS;
            if (i >= n4)   /* n % 256 == 0: whole warps leave together */
                break;
            float4 on = rms_vec_apply(ov[j], r_o, wo[j], wgt_o), xn = add_normed4(xv[j], on);
            float4 hv = rms_vec_apply(xn, r_h, wh[j], wgt_h);
            ((float4 *)N.o)[i] = on;
            ((float4 *)N.x)[i] = xn;
            ((float4 *)N.h)[i] = hv;
            quantize4_k45(hv, i, N.xq, N.xd);
        }
    }
}

static __device__ __forceinline__ void v5r_wait_ready(const v5_job &job, int cw, int wi, int lane)
{
    v5r_wait_count(job.ready, job.ready_need, cw, wi, lane);
}

/* x (k int8, then k / 32 scales: K45 order, gemv_q8.cu) into shared memory at dst by the consumer
 * warps, then their barrier; from L2 (COH) when this grid wrote it */
template <bool COH>
static __device__ __forceinline__ void v5r_x_copy(const v5_job &job, int cw, const int8_t *xq, const float2 *xd,
                                                  uint8_t *dst)
{
    int k = (int)job.n_sb * 256, nq = k / 16, nd = k / 4 / 16;   /* uint4 of codes, of scales */
    for (int i = threadIdx.x; i < nq + nd; i += cw * 32) {
        const uint4 *src = i < nq ? (const uint4 *)xq + i : (const uint4 *)xd + (i - nq);
        ((uint4 *)dst)[i] = COH ? __ldcg(src) : __ldg(src);
    }
    v5r_csync(cw);
}

/* matmul_glu's input made here (v5r_gated): x * sigmoid(g) quantized into shared memory at dst
 * with quantize_x_kernel's functions (the same bits as its launch), eight blocks of 32 a warp
 * loaded before any is reduced; then the consumer warps' barrier */
static __device__ __forceinline__ void v5r_x_gate(const v5_job &job, int cw, const float *xf, const float *gf,
                                                  uint8_t *dst)
{
    int k = (int)job.n_sb * 256, nb = k / 32, lane = threadIdx.x & 31;
    int8_t *q = (int8_t *)dst;
    float2 *d = (float2 *)(dst + k);
    for (int b0 = threadIdx.x >> 5; b0 < nb; b0 += 8 * cw) {
        float v[8], gv[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int b = b0 + j * cw;
            v[j] = b < nb ? __ldg(xf + 32 * b + lane) : 0.0f;
            gv[j] = b < nb ? __ldg(gf + 32 * b + lane) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int b = b0 + j * cw;   /* the same for the whole warp */
            if (b < nb)
                quant_block32(glu_apply<1 + BE_GLU_SIGMOID>(v[j], gv[j]), lane, 32 * b + lane, XL_K45, q, d + b);
        }
    }
    v5r_csync(cw);
}

/* consumer warp wi: its units page by page, in v5's order (one tile's sums, stored when the tile
 * changes or the range ends). MODE: V5_PLAIN; V5_CHAIN_A, the gate/up of the FFN chain (each
 * quantized GLU block counted); V5_CHAIN_B, its down projection (x is the GLU this grid wrote) */
template <class KA, class KB, int MODE = V5_PLAIN>
static __device__ void v5r_consume(const v5_job &job, const int8_t *xq, const float2 *xd, const float *xf,
                                   const float *gf, const v5r_cfg cfg, uint8_t *ring, uint64_t *full, uint64_t *empty, int wi,
                                   int lane, const v5r_norm_args &nm, unsigned *sync, double *red, const v5r_prep &pr)
{
    float *prow = (float *)(ring + pr.off) + wi * PREP_MAX_DIM;   /* (used only with pr.cnt) */
    const int BA = v5r_bytes<typename KA::raw>::N, BB = v5r_bytes<typename KB::raw>::N;
    const int cw = cfg.cw;
    const size_t slot = (size_t)cfg.slot, page = cw * slot;
    int g = lane >> 2, t = lane & 3;
    int64_t a, b, w = (int64_t)blockIdx.x * cw + wi;
    v5r_range(job, cw, wi, a, b);
    bool trace = job.trace && lane == 0 && MODE == V5_PLAIN;   /* GLIM_CUDA_V5_TRACE=1 (v5_stamp's slots) */
    if (trace)
        v5_stamp_w(job, w, 0);
    if (MODE == V5_CHAIN_B)
        v5r_wait_ready(job, cw, wi, lane);
    bool waited = MODE == V5_CHAIN_B;   /* (the chain's first job waited for the predecessor) */
    bool fold = MODE != V5_CHAIN_B && nm.o;   /* the norm in front (cuda_norm_ffn, cuda_norm_matmul) */
    if (MODE == V5_CHAIN_B || !cfg.x_l1 || xf || fold) {   /* x into shared memory once: no L1 misses per record */
        if (!waited)
            cuda_pdl_wait();
        waited = true;
        if (xf) {   /* (V5_PLAIN only) */
            v5r_x_gate(job, cw, xf, gf, ring + cfg.x_off);
        } else if (fold) {   /* CTA 0 makes h and its int8 copy while every loader streams on */
            if (blockIdx.x == 0) {   /* the CTA's stores, its barrier, then one fence and the count:
                                      * a cumulative release (cooperative groups' grid sync order) */
                v5r_norm_run(nm, cw, wi, lane, red);
                v5r_csync(cw);
                if (wi == 0 && lane == 0) {
                    __threadfence();
                    atomicAdd(&sync[2], 1u);
                }
            }
            v5r_wait_count(&sync[2], 1u, cw, wi, lane);
            v5r_x_copy<true>(job, cw, xq, xd, ring + cfg.x_off);
        } else {
            v5r_x_copy<MODE == V5_CHAIN_B>(job, cw, xq, xd, ring + cfg.x_off);
        }
        xq = (const int8_t *)(ring + cfg.x_off);
        xd = (const float2 *)(ring + cfg.x_off + job.n_sb * 256);
        if (trace)
            v5_stamp_w(job, w, 1);
    }
    /* the unit's tile and super-block, counted on from the range's start (one division a warp) */
    int64_t tile = a < b ? a / job.n_sb : 0, sb = a - tile * job.n_sb;
    v5_part P = v5_pick(job, tile);
    float acc_g = 0.0f, acc_g8 = 0.0f;
    for (int p = 0; p < cfg.n_pages; p++) {
        int q = cfg.seq0 + p, s = q % cfg.pages;
        int64_t x0 = a + (int64_t)p * cfg.recs, x1 = x0 + cfg.recs < b ? x0 + cfg.recs : b;
        /* every warp waits for every page, even one without its records: an arrival on "empty"
         * before the page was filled would count toward the phase of the page before it */
        bar_wait_or_trap(&full[s], (unsigned)(q / cfg.pages) & 1u);
        if (trace && x1 > x0 && x1 == b)
            v5_stamp_w(job, w, 3);   /* its last page landed */
        if (x1 > x0) {
            if (!waited) {   /* x is the previous kernel's */
                cuda_pdl_wait();
                waited = true;
                if (trace)
                    v5_stamp_w(job, w, 1);
            }
            const uint8_t *rec = ring + s * page + wi * slot;
            for (int64_t x = x0; x < x1; x++, sb++) {
                if (sb == job.n_sb) {   /* the next tile */
                    v5r_flush<MODE>(job, P, tile, w, lane, acc_g, acc_g8, pr, prow);
                    tile++, sb = 0, P = v5_pick(job, tile), acc_g = 0.0f, acc_g8 = 0.0f;
                }
                if (!std::is_same<KA, KB>::value && P.kind) {
                    typename KB::raw r;
                    v5r_fetch(rec, g, t, r);
                    KB::template compute<2>(r, xq, xd, sb, g, t, acc_g, acc_g8);
                    rec += BB;
                } else {
                    typename KA::raw r;
                    v5r_fetch(rec, g, t, r);
                    KA::template compute<2>(r, xq, xd, sb, g, t, acc_g, acc_g8);
                    rec += BA;
                }
            }
        }
        __syncwarp();
        if (lane == 0)
            bar_arrive(&empty[s]);
    }
    if (!waited)
        cuda_pdl_wait();   /* a warp without work still must not end before its predecessor's writes */
    if (a < b)
        v5r_flush<MODE>(job, P, tile, w, lane, acc_g, acc_g8, pr, prow);
    if (trace)
        v5_stamp_w(job, w, 2);
}

/* A consumer warp's exit: the last of the grid's resets the counts for the next launch (sync[0]
 * the GLU blocks, [1] the warps out, [2] the folded norm done; every warp has passed its waits) */
static __device__ __forceinline__ void v5r_exit(unsigned *sync, unsigned warps, int lane)
{
    __syncwarp();
    if (lane == 0 && atomicAdd(&sync[1], 1u) == warps - 1u) {
        sync[0] = 0u;
        sync[1] = 0u;
        sync[2] = 0u;
    }
}

/* the ring's mbarriers ("full": the loader's one arrival and the bytes; "empty": the consumers) */
static __device__ __forceinline__ void v5r_bars(const v5r_cfg &cfg, uint64_t *full, uint64_t *empty)
{
    if (threadIdx.x == 0) {
        for (int i = 0; i < cfg.pages; i++) {
            bar_init(&full[i], 1);
            bar_init(&empty[i], cfg.cw);
        }
        bar_init_fence();
    }
    __syncthreads();
}

/* One v5r launch: job ja (parts of kinds KA and KB), or with CHAIN the FFN (GLIM_CUDA_FFN_CHAIN=1
 * with the ring): ja the gate/up job (GLU fold on), then the down job jb (kind KC) through the
 * same ring. The loader streams jb's pages as soon as ja's are used, so down's first ~25 MB are
 * in shared memory while the last GLU blocks are made; its consumers wait for every GLU block
 * (v5r_wait_ready). One CTA an SM, all resident (their shared memory allows no second;
 * dependents launch only once every CTA has passed the trigger), so the spin cannot wait on a
 * CTA not yet started. The last warp out resets the counts (sync). Same split as two launches,
 * so the same bits. nm.o != NULL: the residual norm in front of ja (CHAIN: cuda_norm_ffn; else
 * the q/k/v job, cuda_norm_matmul), made by CTA 0, counted in sync[2]. */
template <class KA, class KB, class KC, bool CHAIN>
static __global__ void __launch_bounds__(V5R_THREADS_MAX, 1)
gemv5r_kernel(const v5_job ja, const v5_job jb, const int8_t *xq, const float2 *xd, const float *xf,
              const float *gf, const v5r_cfg ca, const v5r_cfg cb, unsigned *sync, bool trig, const v5r_norm_args nm,
              const v5r_prep pr)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) uint8_t v5r_ring[];
    __shared__ uint64_t full[V5R_MAXP], empty[V5R_MAXP];
    __shared__ double red[32];   /* the folded norm's sums (CTA 0) */
    if (trig)
        cuda_pdl_trigger();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    v5r_bars(ca, full, empty);
    if (warp == ca.cw) {
        v5r_load<v5r_bytes<typename KA::raw>::N, v5r_bytes<typename KB::raw>::N>(ja, ca, v5r_ring, full, empty, lane);
        if (CHAIN)
            v5r_load<v5r_bytes<typename KC::raw>::N, v5r_bytes<typename KC::raw>::N>(jb, cb, v5r_ring, full, empty,
                                                                                    lane);
        return;
    }
    v5r_consume<KA, KB, CHAIN ? V5_CHAIN_A : V5_PLAIN>(ja, xq, xd, xf, gf, ca, v5r_ring, full, empty, warp, lane, nm,
                                                       sync, red, pr);
    if (CHAIN)
        v5r_consume<KC, KC, V5_CHAIN_B>(jb, ja.glu_q, ja.glu_d, NULL, NULL, cb, v5r_ring, full, empty, warp, lane, nm,
                                        sync, red, pr);
    if (CHAIN || nm.o)
        v5r_exit(sync, gridDim.x * ca.cw, lane);
#endif
}

/* the ring's switches: GLIM_CUDA_V5R=recs (opt-in; default off) records a warp a page,
 * GLIM_CUDA_V5R_KB the ring's size in KB (default 200), GLIM_CUDA_V5R_CW consumer warps a CTA
 * (4..16, default 8; 16 splits a job as plain v5 does by default, so the same bits as today) */
struct v5r_knobs {
    int recs, kb, cw;
    int smem;   /* dynamic shared memory a CTA may have: the device's opt-in limit less the static */
};

static bool v5r_on(const struct cuda_ctx *c, v5r_knobs *k)
{
    static int r_forced = -1, kb_forced = -1, cw_forced = -1;
    int r = cuda_env_knob("GLIM_CUDA_V5R", &r_forced), kb = cuda_env_knob("GLIM_CUDA_V5R_KB", &kb_forced);
    int cw = cuda_env_knob("GLIM_CUDA_V5R_CW", &cw_forced);
    k->recs = r > 8 ? 8 : r;
    k->kb = kb < 16 || kb > 220 ? 200 : kb;
    k->cw = cw < 4 || cw > V5R_CW_MAX ? 8 : cw;
    k->smem = (int)c->smem_optin - 1024;   /* (227 KB on sm_90; 99 KB on sm_120: too small a ring) */
    return k->recs > 0 && c->cc_major >= 9 && k->smem >= 128 * 1024;
}

/* The ring of a launch whose largest record is max_rec bytes, and job's pages in it (after seq0
 * earlier ones); false when fewer than two pages fit */
static bool v5r_shape(const v5_job &job, const v5r_knobs &kn, int max_rec, int seq0, int x_bytes, v5r_cfg &cfg)
{
    const int SMEM_MAX = kn.smem;
    cfg.cw = kn.cw;
    cfg.recs = kn.recs;
    cfg.slot = kn.recs * max_rec;
    int ring = kn.kb * 1024 < SMEM_MAX - x_bytes ? kn.kb * 1024 : SMEM_MAX - x_bytes;
    cfg.pages = ring / (kn.cw * cfg.slot);
    cfg.pages = cfg.pages > V5R_MAXP ? V5R_MAXP : cfg.pages;
    cfg.x_off = cfg.pages * kn.cw * cfg.slot;
    int64_t most = (job.n_tiles * job.n_sb + job.n_warps - 1) / job.n_warps;
    cfg.n_pages = (int)((most + kn.recs - 1) / kn.recs);
    cfg.seq0 = seq0;
    return cfg.pages >= 2;
}

/* Launch ja (planned over kn.cw warps an SM) as v5r, or with jb (CHAIN, jb planned with its
 * counts in ja.ready) the FFN chain; xf != NULL: x is xf * sigmoid(gf) in f32, quantized by the
 * kernel (v5r_gated), not xq/xd; false = not launched (the ring does not fit) */
template <class KA, class KB, class KC, bool CHAIN>
static bool v5r_go(struct cuda_ctx *c, const v5_job &ja, const v5_job &jb, const int8_t *xq, const float2 *xd,
                   unsigned *sync, const v5r_knobs &kn, const float *xf = NULL, const float *gf = NULL,
                   const v5r_norm_args *nm = NULL, const v5r_prep *pr = NULL)
{
    const int BA = v5r_bytes<typename KA::raw>::N, BB = v5r_bytes<typename KB::raw>::N;
    const int BC = CHAIN ? v5r_bytes<typename KC::raw>::N : 0;
    int big = BA > BB ? BA : BB;
    big = big > BC ? big : BC;
    v5r_cfg ca, cb = {};
    static int l1_forced = -1;   /* GLIM_CUDA_V5R_L1=1: x through L1, not copied (the chain's down always is) */
    int64_t k = (CHAIN && jb.n_sb > ja.n_sb ? jb.n_sb : ja.n_sb) * 256;
    int x_bytes = (int)(k + k / 4);   /* int8 codes and a float2 per 32 */
    int prep_bytes = pr && pr->cnt ? kn.cw * PREP_MAX_DIM * (int)sizeof(float) : 0;   /* the prep fold's rows */
    x_bytes += prep_bytes;
    if (!v5r_shape(ja, kn, big, 0, x_bytes, ca) || (CHAIN && !v5r_shape(jb, kn, big, ca.n_pages, x_bytes, cb))) {
        static bool said;   /* a bench setting that silently measured plain v5 would mislead */
        if (!said)
            fprintf(stderr, "glim: cuda: GLIM_CUDA_V5R=%d with %d warps a CTA leaves fewer than two ring pages of "
                            "%d-byte records in %d KB: such jobs run on plain v5\n",
                    kn.recs, kn.cw, big, kn.kb);
        said = true;
        return false;
    }
    ca.x_l1 = cb.x_l1 = cuda_env_knob("GLIM_CUDA_V5R_L1", &l1_forced) > 0;
    size_t smem = (size_t)ca.x_off + x_bytes;
    if (CUDA_TRY(c, cudaFuncSetAttribute(gemv5r_kernel<KA, KB, KC, CHAIN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem)))   /* at every launch, as attention v4 does: a context */
        return false;                                   /* may have been made again since the last */
    int64_t warps = CHAIN && jb.n_warps > ja.n_warps ? jb.n_warps : ja.n_warps;
    cudaLaunchAttribute attr[3];
    cudaLaunchConfig_t cfgl =
        cuda_launch_cfg(c, dim3((unsigned)((warps + kn.cw - 1) / kn.cw)), dim3((kn.cw + 1) * 32), smem, attr);
    cuda_cfg_carveout(&cfgl, attr, 100);   /* the ring wants the SM's shared memory, whatever the others */
    const v5r_norm_args no_norm = {};
    v5r_prep prep = {};
    if (prep_bytes) {
        prep = *pr;
        prep.off = (int)smem - prep_bytes;
    }
    return !CUDA_TRY(c, cudaLaunchKernelEx(&cfgl, gemv5r_kernel<KA, KB, KC, CHAIN>, ja, jb, xq, xd, xf, gf, ca, cb,
                                          sync, c->pdl_all, nm ? *nm : no_norm, prep));
}
