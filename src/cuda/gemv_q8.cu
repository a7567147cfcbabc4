/*
 * gemv_q8.cu — the fast matrix-vector path for quantized weights: the
 * activations are quantized once to int8 and the weights' integer codes are
 * multiplied with __dp4a, 4 weights per instruction (model.md §4.4, on the
 * original GGUF blocks or the lossless SoA / 16-row tile repacks of cuda_util.cuh).
 *
 * WHY. The f32 GEMV in gemv_kquant.cu converts every weight to a float
 * ((d*sc)*q - dmin*m) before its FMA; that is ~5 ALU ops per weight and ran at
 * 15% of copy bandwidth for Q4_K (docs/CUDA.md). Here a lane handles one
 * "slot" of 32 weights (Q8_0: 16): it loads 16 bytes of codes, decodes the
 * sub-block scales once, and per activation row does 8 dp4a and 2-3 float
 * ops. The K-quant minimum term factors out of the sum:
 *   sum_i (d*sc*q_i - dmin*m) * dx*qx_i = d*sc*dx*sum(q_i*qx_i) - dmin*m*(dx*sum(qx_i))
 * with dx*sum(qx_i) precomputed per 32 activations by the quantizer.
 *
 * Activations: xq[nr][K] int8 and xd[nr][K/32] float2 {d, d*sum(q)}, with
 * q = rint(x/d), d = amax/127 per 32 consecutive values (0 when amax = 0).
 * Within each 256-weight super-block the 16-byte runs of xq are permuted
 * (XL_K45, see cuda_xq_pos_k45) so that lane t of the 8 Q4_K/Q5_K lanes that share a
 * super-block reads its two runs at 16t and 128+16t: every warp-wide x load
 * is 4 full 128-byte lines (Q6_K lanes read the same lines in another order).
 * Q8_0/Q4_0 keep the natural order (XL_PLAIN).
 *
 * The result is not bit-comparable with the f32 reference (int8 activations:
 * relative L2 error ~3e-3; tests/test_cuda_ops.c uses 1e-2, like llama.cpp).
 * The exact f32 path stays available: backend_cuda_set_exact / GLIM_CUDA_EXACT=1.
 *
 * Layout of the GEMV: one warp per RW weight rows (RW = 2 for Q4_K/Q4_0: always in v3, in
 * v2 when N leaves >= 4 blocks per SM, else 1), lanes walk
 * the row's slots (consecutive lanes read consecutive code bytes), up to
 * NR = 16 activation rows per pass, warp-shuffle reduction.
 */
#include "gemv_slots.cuh"

#include <cuda_fp16.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "quant/quant_ref.h"
}

/* ---- activation quantizer ----------------------------------------------------------
 * One warp per 32 consecutive values of x[nr][k]; writes xq (permuted per layout) and
 * xd = {d, d*sum(q)}. */

/* ACT: x is first multiplied by sigmoid(g) (BE_GLU_SIGMOID) or silu(g) (BE_GLU_SILU),
 * with the float expressions of ops.cu's mul_sigmoid / swiglu (matmul_glu). */
template <int ACT>
static __global__ void quantize_x_kernel(const float *__restrict__ x, const float *__restrict__ g, int64_t k,
                                         int64_t n_blk, int layout, int8_t *__restrict__ xq, float2 *__restrict__ xd)
{
    cuda_pdl_enter();   /* and the GEMV after this may start its weight loads now */
    int lane = threadIdx.x & 31;
    int64_t b = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= n_blk)
        return;
    int64_t kb = k >> 5, row = b / kb, n = (b % kb) * 32 + lane;   /* n: index within the row */
    float v = glu_apply<ACT>(x[row * k + n], ACT ? g[row * k + n] : 0.0f);
    quant_block32(v, lane, n, layout, xq + row * k, xd + b);
}

/* ---- GEMV ---------------------------------------------------------------------
 * y[r][row] = sum_k x[r][k] * W[row][k] for r < nr <= NR; RW weight rows per warp
 * share each activation load. */
/* acc[i][r] += slot s of weight row i . activation row r (r < nr), in every version's order */
template <class W, int NR, int RW>
static __device__ __forceinline__ void slot_madd(float (&acc)[RW][NR], const W (&w)[RW], const int8_t *__restrict__ xq,
                                                 const float2 *__restrict__ xd, int64_t k, int64_t s, int nr)
{
#pragma unroll
    for (int r = 0; r < NR; r++) {
        if (r >= nr)
            break;
        struct xslot xs;
        W::xload(xq + r * k, xd + r * (k >> 5), s, &xs);
#pragma unroll
        for (int i = 0; i < RW; i++)
            acc[i][r] += w[i].dot(xs);
    }
}

/* sum each accumulator over the warp; lane 0 writes y[r][row0 + i] for the rows that exist */
template <int NR, int RW>
static __device__ __forceinline__ void rows_store(const float (&acc)[RW][NR], float *__restrict__ y, int64_t n,
                                                  int64_t row0, int nr, int lane)
{
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float a = acc[i][r];
            for (int o = 16; o > 0; o >>= 1)
                a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0 && r < nr && row0 + i < n)
                y[r * n + row0 + i] = a;
        }
}

template <class W, int NR, int RW>
static __global__ void __launch_bounds__(Q8_WARPS * 32)
gemv_q8_kernel(wview8 v, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, float *__restrict__ y, int nr)
{
    int lane = threadIdx.x & 31;
    int64_t row0 = ((int64_t)blockIdx.x * Q8_WARPS + (threadIdx.x >> 5)) * RW;
    if (row0 >= v.n)
        return;
    int64_t n_slots = v.k / W::SLOT;
    int64_t rows[RW];
#pragma unroll
    for (int i = 0; i < RW; i++)
        rows[i] = row0 + i < v.n ? row0 + i : v.n - 1;
    float acc[RW][NR];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++)
            acc[i][r] = 0.0f;
#pragma unroll 2
    for (int64_t s = lane; s < n_slots; s += 32) {
        W w[RW];
#pragma unroll
        for (int i = 0; i < RW; i++)
            slot_load(w[i], v, rows[i], s);
        slot_madd<W, NR, RW>(acc, w, xq, xd, v.k, s, nr);
    }
    rows_store<NR, RW>(acc, y, v.n, row0, nr, lane);
}

/* ---- GEMV v3: deep loads, several weights per launch ----------------------------
 * WHY (docs/CUDA.md): v2 above keeps about two slots' loads in flight per lane and a
 * warp owns one 3.7 KB row, so each row costs several serial memory round trips plus
 * the warp's start and reduction; small matrices (q, k, v, gate: 256..4096 rows) were
 * one short wave at 4-40% of bandwidth. v3 issues the loads of U slots per lane
 * (W::U, 4 KB per warp; RW = 2 rows: half as many slots) before decoding any of them, and one launch covers up to
 * GEMV_MAX_PARTS weights that multiply the same x (q/k/v/gate, FFN gate/up): one
 * quantize, one launch, one wave. Same per-slot arithmetic as v2, so the results are
 * bit-equal to v2's. */
template <class W, int NR, int RW, int U>
static __device__ __forceinline__ void gemv3_rows(const wview8 &v, int64_t row0, const int8_t *__restrict__ xq,
                                                  const float2 *__restrict__ xd, float *__restrict__ y, int nr,
                                                  int lane)
{
    int64_t n_slots = v.k / W::SLOT;
    int64_t rows[RW];
#pragma unroll
    for (int i = 0; i < RW; i++)
        rows[i] = row0 + i < v.n ? row0 + i : v.n - 1;
    float acc[RW][NR];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++)
            acc[i][r] = 0.0f;
    for (int64_t s0 = 0; s0 < n_slots; s0 += 32 * U) {
        typename W::raw raw[U][RW];
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (s0 + lane + 32 * u < n_slots) {
#pragma unroll
                for (int i = 0; i < RW; i++)
                    W::fetch(v, rows[i], s0 + lane, u, raw[u][i]);
            }
        }
        if (s0 == 0)
            cuda_pdl_wait();   /* the first weights are on their way; x is the previous kernel's */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t s = s0 + lane + 32 * u;
            if (s < n_slots) {
                W w[RW];
#pragma unroll
                for (int i = 0; i < RW; i++)
                    w[i].decode(raw[u][i], s);
                slot_madd<W, NR, RW>(acc, w, xq, xd, v.k, s, nr);
            }
        }
    }
    rows_store<NR, RW>(acc, y, v.n, row0, nr, lane);
}

/* 2 or 1 rows per warp (the task's rw), U slots in flight either way */
template <class W, int NR>
static __device__ __forceinline__ void gemv3_rows_rw(int rw, const wview8 &v, int64_t row0,
                                                     const int8_t *__restrict__ xq, const float2 *__restrict__ xd,
                                                     float *__restrict__ y, int nr, int lane)
{
    if (rw == 2)
        gemv3_rows<W, NR, 2, W::U / 2>(v, row0, xq, xd, y, nr, lane);
    else
        gemv3_rows<W, NR, 1, W::U>(v, row0, xq, xd, y, nr, lane);
}

/* Task `task` of a job: its part's weight, output, first row, kind and rows per warp. The part
 * is found by comparing with each part's first task (unrolled, so the job stays in the
 * parameter bank instead of being copied to local memory). */
struct gemv_task {
    wview8  v;
    float  *y;
    int64_t row0;
    int     kind, rw, part;
};

static __device__ __forceinline__ gemv_task job_task(const gemv_job &job, int64_t task)
{
    gemv_task t = {job.p[0].v, job.p[0].y, 0, job.p[0].kind, job.p[0].rw, 0};
    int64_t task0 = 0;
#pragma unroll
    for (int i = 1; i < GEMV_MAX_PARTS; i++)
        if (i < job.n_parts && task >= job.p[i].task0) {
            t.v = job.p[i].v, t.y = job.p[i].y, task0 = job.p[i].task0;
            t.kind = job.p[i].kind, t.rw = job.p[i].rw, t.part = i;
        }
    t.row0 = (task - task0) * t.rw;
    return t;
}

/* KS: which weight kinds a kernel has code for. A kernel's register count is the largest of
 * its branches, so the Q4_K/Q6_K mix of Q4_K_M files gets its own kernel. */
enum { KS_K4Q6, KS_ALL };

template <int NR, int KS>
static __device__ __forceinline__ void gemv3_task(const gemv_job &job, int64_t task, const int8_t *__restrict__ xq,
                                                  const float2 *__restrict__ xd, int nr)
{
    gemv_task t = job_task(job, task);
    const wview8 &v = t.v;
    float *y = t.y;
    int64_t row0 = t.row0;
    int lane = threadIdx.x & 31;
    typedef slot_k45<false> k4;
    typedef slot_k45<false, true> k4a;
    switch (t.kind) {
    case WK_Q4K: gemv3_rows_rw<k4, NR>(t.rw, v, row0, xq, xd, y, nr, lane); return;
    case WK_Q4K_AUX: gemv3_rows_rw<k4a, NR>(t.rw, v, row0, xq, xd, y, nr, lane); return;
    case WK_Q6K: gemv3_rows<slot_q6_k, NR, 1, slot_q6_k::U>(v, row0, xq, xd, y, nr, lane); return;
    case WK_Q4K_T16: gemv3_rows_rw<slot_q4k_t16, NR>(t.rw, v, row0, xq, xd, y, nr, lane); return;
    case WK_Q6K_T16: gemv3_rows<slot_q6k_t16, NR, 1, slot_q6k_t16::U>(v, row0, xq, xd, y, nr, lane); return;
    default: break;
    }
    if (KS == KS_K4Q6)
        return;
    typedef slot_k45<true> k5;
    typedef slot_k45<true, true> k5a;
    switch (t.kind) {
    case WK_Q5K: gemv3_rows<k5, NR, 1, k5::U>(v, row0, xq, xd, y, nr, lane); break;
    case WK_Q5K_AUX: gemv3_rows<k5a, NR, 1, k5a::U>(v, row0, xq, xd, y, nr, lane); break;
    case WK_Q80: gemv3_rows<slot_q8_0, NR, 1, slot_q8_0::U>(v, row0, xq, xd, y, nr, lane); break;
    case WK_Q40:
        if (t.rw == 2)
            gemv3_rows<slot_q4_0, NR, 2, slot_q4_0::U / 2>(v, row0, xq, xd, y, nr, lane);
        else
            gemv3_rows<slot_q4_0, NR, 1, slot_q4_0::U>(v, row0, xq, xd, y, nr, lane);
        break;
    default: break;
    }
}

/* One task per warp. (A grid-stride loop over tasks made ptxas spill 1.3-2.5 KB per
 * thread at the 128-register cap and halved decode speed: measured 2026-12-02.) */
template <int NR, int KS, bool PREP = false>
static __global__ void __launch_bounds__(Q8_WARPS * 32, NR == 1 ? 4 : 2)
gemv3_kernel(const gemv_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, int nr, bool trig)
{
    if (trig)   /* (pdl_all) the next kernel waits for this grid; it may be scheduled in the last wave */
        cuda_pdl_trigger();
    int64_t task = (int64_t)blockIdx.x * Q8_WARPS + (threadIdx.x >> 5);
    if (task >= job.n_tasks)
        return;
    gemv3_task<NR, KS>(job, task, xq, xd, nr);
    if (PREP) {   /* a kernel of its own: the code alone slowed the plain one */
        gemv_task t = job_task(job, task);
        gemv_prep_arrive(job, t.part, t.row0, threadIdx.x & 31);
    }
}

/* Persistent v3 (opt-in, GLIM_CUDA_GEMV_PERSIST=k: k CTAs per SM): a grid the GPU holds at
 * once walks the tasks, so no partial last wave and no CTA turnover. One weight kind per
 * kernel: with gemv3_task's kind switch inside a task loop ptxas spills at any register
 * budget (docs/CUDA.md); this one uses 98-120 registers, no spills. Same rows, same bits. */
template <class W, int RW, bool PREP>
static __global__ void __launch_bounds__(Q8_WARPS * 32, 4)
gemv3p_kernel(const gemv_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, bool trig)
{
    if (trig)
        cuda_pdl_trigger();
    int lane = threadIdx.x & 31;
    int64_t stride = (int64_t)gridDim.x * Q8_WARPS;
#pragma unroll 1
    for (int64_t task = (int64_t)blockIdx.x * Q8_WARPS + (threadIdx.x >> 5); task < job.n_tasks; task += stride) {
        gemv_task t = job_task(job, task);
        gemv3_rows<W, 1, RW, W::U / RW>(t.v, t.row0, xq, xd, t.y, 1, lane);
        if (PREP)
            gemv_prep_arrive(job, t.part, t.row0, lane);
    }
    if (job.ready) {   /* the CUDA sample's threadfence reduction: rows visible, then the count */
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0 && atomicAdd(&job.ready[0], 1u) == gridDim.x - 1) {
            job.ready[0] = 0u;
            __threadfence();
            atomicExch(&job.ready[1], 1u);
        }
    }
}

/* sets the ready flag of a side GEMV that went to a kernel without it (cuda_matmul_side) */
static __global__ void ready_set_kernel(unsigned *ready)
{
    __threadfence();
    atomicExch(&ready[1], 1u);
}

/* Persistent v3 for a job of two kinds (the q/k/v/gate job of Q4_K_M's use_more_bits layers: Q4_K
 * and a Q6_K attn_v), parts of kind A first (tasks [0, n_a)): a warp's tasks rise by the grid
 * stride, so it runs its A tasks in one loop, then its B tasks in another, the same tasks a
 * one-kind walk gives it and no kind switch inside a loop (which spills). Same rows, same bits. */
template <class WA, int RWA, class WB, int RWB>
static __global__ void __launch_bounds__(Q8_WARPS * 32, 4)
gemv3p2_kernel(const gemv_job job, int64_t n_a, const int8_t *__restrict__ xq, const float2 *__restrict__ xd,
               bool trig)
{
    if (trig)
        cuda_pdl_trigger();
    int lane = threadIdx.x & 31;
    int64_t stride = (int64_t)gridDim.x * Q8_WARPS, task = (int64_t)blockIdx.x * Q8_WARPS + (threadIdx.x >> 5);
#pragma unroll 1
    for (; task < n_a; task += stride) {
        gemv_task t = job_task(job, task);
        gemv3_rows<WA, 1, RWA, WA::U / RWA>(t.v, t.row0, xq, xd, t.y, 1, lane);
    }
#pragma unroll 1
    for (; task < job.n_tasks; task += stride) {
        gemv_task t = job_task(job, task);
        gemv3_rows<WB, 1, RWB, WB::U / RWB>(t.v, t.row0, xq, xd, t.y, 1, lane);
    }
}

template <class W, int RW>
static void launch_v3p_of(struct cuda_ctx *c, cudaLaunchConfig_t &cfg, const gemv_job &job, const int8_t *xq,
                          const float2 *xd)
{
    if (job.prep_cnt)
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv3p_kernel<W, RW, true>, job, xq, xd, c->pdl_all));
    else
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv3p_kernel<W, RW, false>, job, xq, xd, c->pdl_all));
}

/* A one-row job of Q4_K and Q6_K parts (the q/k/v/gate of half the 30B's layers) takes the
 * persistent v3 (gemv3p2_kernel) instead of the plain one: tg128 163.29 / 162.80 vs 161.13 /
 * 162.38 / 162.14 t/s (2026-12-03). GLIM_CUDA_V3_MIX=0: the plain one (bench knob). */
static bool v3_mix(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("GLIM_CUDA_V3_MIX");
        on = !(e && e[0] == '0' && !e[1]);
    }
    return on;
}

/* the persistent kernel for a job of Q4_K parts (first) and Q6_K parts (gemv3p2_kernel); false = not
 * such a job (nothing launched) */
static bool launch_v3p2(struct cuda_ctx *c, cudaLaunchConfig_t &cfg, const gemv_job &job, const int8_t *xq,
                        const float2 *xd)
{
    int i = 0;
    while (i < job.n_parts && job.p[i].kind == WK_Q4K && job.p[i].rw == job.p[0].rw)
        i++;
    int64_t n_a = i < job.n_parts ? job.p[i].task0 : job.n_tasks;
    if (i == 0 || i == job.n_parts || job.prep_cnt)
        return false;
    for (int j = i; j < job.n_parts; j++)
        if (job.p[j].kind != WK_Q6K)
            return false;
    typedef slot_k45<false> k4;
    if (job.p[0].rw == 2)
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv3p2_kernel<k4, 2, slot_q6_k, 1>, job, n_a, xq, xd, c->pdl_all));
    else
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv3p2_kernel<k4, 1, slot_q6_k, 1>, job, n_a, xq, xd, c->pdl_all));
    return true;
}

/* the persistent kernel for a job whose parts share one kind and rows per warp, or Q4_K parts then
 * Q6_K parts; false = none */
static bool launch_v3p(struct cuda_ctx *c, const gemv_job &job, const int8_t *xq, const float2 *xd)
{
    if (c->gemv_persist <= 0)
        return false;
    int64_t need = (job.n_tasks + Q8_WARPS - 1) / Q8_WARPS, most = (int64_t)c->gemv_persist * c->n_sm;
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = cuda_launch_cfg(c, dim3((unsigned)(need < most ? need : most)), dim3(Q8_WARPS * 32), 0,
                                             attr);
    for (int i = 1; i < job.n_parts; i++)
        if (job.p[i].kind != job.p[0].kind || job.p[i].rw != job.p[0].rw)
            return v3_mix() && launch_v3p2(c, cfg, job, xq, xd);
    typedef slot_k45<false> k4;
    bool two = job.p[0].rw == 2;
    c->job_ready_taken = job.ready != NULL;   /* gemv3p_kernel sets it; the default case launches nothing */
    switch (job.p[0].kind) {
    case WK_Q4K:
        two ? launch_v3p_of<k4, 2>(c, cfg, job, xq, xd) : launch_v3p_of<k4, 1>(c, cfg, job, xq, xd);
        return true;
    case WK_Q6K: launch_v3p_of<slot_q6_k, 1>(c, cfg, job, xq, xd); return true;
    case WK_Q4K_T16:
        two ? launch_v3p_of<slot_q4k_t16, 2>(c, cfg, job, xq, xd) : launch_v3p_of<slot_q4k_t16, 1>(c, cfg, job, xq, xd);
        return true;
    case WK_Q6K_T16: launch_v3p_of<slot_q6k_t16, 1>(c, cfg, job, xq, xd); return true;
    case WK_Q80: launch_v3p_of<slot_q8_0, 1>(c, cfg, job, xq, xd); return true;
    default: c->job_ready_taken = false; return false;
    }
}

template <int KS>
static void launch_v3(struct cuda_ctx *c, const gemv_job &job, const int8_t *xq, const float2 *xd)
{
    unsigned grid = (unsigned)((job.n_tasks + Q8_WARPS - 1) / Q8_WARPS);
    cudaLaunchAttribute attr[2];   /* PDL: the weight loads overlap the quantizer's tail */
    cudaLaunchConfig_t cfg = cuda_launch_cfg(c, dim3(grid), dim3(Q8_WARPS * 32), 0, attr);
    if (job.prep_cnt)
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv3_kernel<1, KS, true>, job, xq, xd, 1, c->pdl_all));
    else
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv3_kernel<1, KS>, job, xq, xd, 1, c->pdl_all));
}

/* ---- dispatch -------------------------------------------------------------------- */

bool cuda_q8_supported(uint32_t dev_type)
{
    return dev_type == GLIM_TYPE_Q4_K || dev_type == GLIM_TYPE_Q5_K || dev_type == CUDA_DT_Q6_K_SOA ||
           dev_type == CUDA_DT_Q8_0_SOA || dev_type == CUDA_DT_Q4_0_SOA || dev_type == CUDA_DT_Q4_K_T16 ||
           dev_type == CUDA_DT_Q6_K_T16;
}

static int layout_of(uint32_t dev_type)
{
    bool k = dev_type == GLIM_TYPE_Q4_K || dev_type == GLIM_TYPE_Q5_K || dev_type == CUDA_DT_Q6_K_SOA ||
             dev_type == CUDA_DT_Q4_K_T16 || dev_type == CUDA_DT_Q6_K_T16;
    return k ? XL_K45 : XL_PLAIN;
}

bool cuda_q8_k45(const struct cuda_ctx *c, const struct be_weight *w)
{
    return !c->exact && cuda_q8_supported(w->dev_type) && layout_of(w->dev_type) == XL_K45;
}

/* Quantize x[nr][k] into c->xq unless the cached copy is of the same x in the same layout
 * (model code multiplies one normed x by q/k/v and by gate/up in a row; any other op or
 * a matmul that writes into x clears the cache: cuda_xq_forget). */
static bool quantize_x(struct cuda_ctx *c, const float *x, int64_t k, int nr, int layout, const float *g, int act,
                       const int8_t **xq_out, const float2 **xd_out)
{
    size_t q_bytes = (size_t)nr * k, d_bytes = (size_t)nr * (k / 32) * sizeof(float2);
    if (g && act == BE_GLU_SILU && c->glu_x == x && c->glu_g == g && c->glu_k == k && nr == 1 &&
        layout == XL_K45) {   /* the gate/up GEMV made it (matmul_pair_glu, gemv_mma.cu v5_glu_arrive) */
        *xq_out = (const int8_t *)c->glu_q.p;
        *xd_out = (const float2 *)((const uint8_t *)c->glu_q.p + k);
        c->glu_x = NULL;
        c->glu_used++;
        return true;
    }
    if (g && act == BE_GLU_SIGMOID && c->att_x == x && c->att_g == g && c->att_k == k && nr == 1 &&
        layout == XL_K45) {   /* attention's combine made it (GLIM_CUDA_GATE_FOLD, attn_decode.cu) */
        *xq_out = (const int8_t *)c->att_q.p;
        *xd_out = (const float2 *)((const uint8_t *)c->att_q.p + k);
        c->att_x = NULL;
        c->att_used++;
        return true;
    }
    *xq_out = (const int8_t *)c->xq.p;
    *xd_out = (const float2 *)((const uint8_t *)c->xq.p + q_bytes);
    if (!g && c->xq_src == x && c->xq_k == k && c->xq_nr == nr && c->xq_layout == layout)
        return true;
    if (!cuda_buf_reserve(c, &c->xq, q_bytes + d_bytes))
        return false;
    int64_t n_blk = (int64_t)nr * (k / 32);
    int8_t *xq = (int8_t *)c->xq.p;
    float2 *xd = (float2 *)((uint8_t *)c->xq.p + q_bytes);
    *xq_out = xq, *xd_out = xd;   /* the buffer may have moved */
    unsigned grid = cuda_blocks(n_blk * 32, 256);
    const float *none = NULL;
    if (c->dbg_skip & CUDA_SKIP_QUANT)
        ;   /* bench knob, wrong output */
    else if (!g)
        cuda_launch_dep(c, dim3(grid), dim3(256), 0, quantize_x_kernel<0>, x, none, k, n_blk, layout, xq, xd);
    else if (act == BE_GLU_SIGMOID)
        cuda_launch_dep(c, dim3(grid), dim3(256), 0, quantize_x_kernel<1 + BE_GLU_SIGMOID>, x, g, k, n_blk, layout,
                        xq, xd);
    else
        cuda_launch_dep(c, dim3(grid), dim3(256), 0, quantize_x_kernel<1 + BE_GLU_SILU>, x, g, k, n_blk, layout, xq,
                        xd);
    if (CUDA_LAUNCHED(c, "quantize_x"))
        return false;
    /* a gated copy is not x's copy: nothing to reuse */
    c->xq_src = g ? NULL : x, c->xq_k = k, c->xq_nr = nr, c->xq_layout = layout;
    return true;
}

bool cuda_xq_reserve(struct cuda_ctx *c, int64_t k, int nr, int8_t **xq, float2 **xd)
{
    if (c->exact || nr > 16 || k % 256)
        return false;
    size_t q_bytes = (size_t)nr * k, d_bytes = (size_t)nr * (k / 32) * sizeof(float2);
    if (!cuda_buf_reserve(c, &c->xq, q_bytes + d_bytes))
        return false;
    *xq = (int8_t *)c->xq.p;
    *xd = (float2 *)((uint8_t *)c->xq.p + q_bytes);
    return true;
}

void cuda_xq_filled(struct cuda_ctx *c, const float *x, int64_t k, int nr)
{
    c->xq_src = x, c->xq_k = k, c->xq_nr = nr, c->xq_layout = XL_K45;
}

static int rows_forced(void)
{
    static int forced = -1;   /* GLIM_CUDA_GEMV_RW=1|2: bench knob (other values: by the rules below) */
    int rw = cuda_env_knob("GLIM_CUDA_GEMV_RW", &forced);
    return rw <= 2 ? rw : 0;
}

/* v2 (one weight per launch, 2..16 activation rows) */
static int rows_per_warp(struct cuda_ctx *c, int64_t n)
{
    if (rows_forced())
        return rows_forced();
    return n >= (int64_t)8 * 4 * c->n_sm ? 2 : 1;   /* 2 only while that leaves >= 4 blocks per SM */
}

/* v3 (one activation row): 2 for every Q4_K/Q4_0 part. Measured 2026-12-03 on the H200: tg128
 * 152.3 t/s with 2 rows per warp for the 4096-row q/gate parts too, vs 150.8 with the v2 rule
 * (1 there) and 140.9 with 1 everywhere; the q/gate job is one wave of a persistent grid
 * either way, and 2 rows halve its activation loads. */
static int rows_per_warp_v3(void)
{
    return rows_forced() ? rows_forced() : 2;
}

/* RW_MAX: 2 weight rows per warp paid off for Q4_K/Q4_0 (fewer activation loads per
 * weight byte); for Q5_K/Q6_K/Q8_0 the extra registers cost more than they saved
 * (docs/CUDA.md, 2026-12-02 bench with GLIM_CUDA_GEMV_RW=1|2). */
template <class W, int NR>
static void launch_nr(struct cuda_ctx *c, const wview8 &v, const int8_t *xq, const float2 *xd, float *y, int nr)
{
    if (W::RW_MAX == 2 && rows_per_warp(c, v.n) == 2) {
        unsigned grid = (unsigned)((v.n + 2 * Q8_WARPS - 1) / (2 * Q8_WARPS));
        gemv_q8_kernel<W, NR, W::RW_MAX><<<grid, Q8_WARPS * 32, 0, c->stream>>>(v, xq, xd, y, nr);
    } else {
        unsigned grid = (unsigned)((v.n + Q8_WARPS - 1) / Q8_WARPS);
        gemv_q8_kernel<W, NR, 1><<<grid, Q8_WARPS * 32, 0, c->stream>>>(v, xq, xd, y, nr);
    }
}

template <class W>
static void launch(struct cuda_ctx *c, const wview8 &v, const int8_t *xq, const float2 *xd, float *y, int nr)
{
    if (nr == 1)
        launch_nr<W, 1>(c, v, xq, xd, y, nr);
    else if (nr == 2)
        launch_nr<W, 2>(c, v, xq, xd, y, nr);
    else if (nr <= 4)
        launch_nr<W, 4>(c, v, xq, xd, y, nr);
    else if (nr <= 8)
        launch_nr<W, 8>(c, v, xq, xd, y, nr);
    else
        launch_nr<W, 16>(c, v, xq, xd, y, nr);
}

/* v2: one launch per weight (GLIM_CUDA_GEMV=2) */
static void launch_v2(struct cuda_ctx *c, float *y, const struct be_weight *w, const int8_t *xq, const float2 *xd,
                      int n_rows)
{
    const uint8_t *aux = c->k45_aux ? (const uint8_t *)w->aux : NULL;
    wview8 v = {(const uint8_t *)w->dev, w->k, w->n, aux};
    switch (w->dev_type) {
    case GLIM_TYPE_Q4_K:
        if (aux)
            launch<slot_k45<false, true> >(c, v, xq, xd, y, n_rows);
        else
            launch<slot_k45<false> >(c, v, xq, xd, y, n_rows);
        break;
    case GLIM_TYPE_Q5_K:
        if (aux)
            launch<slot_k45<true, true> >(c, v, xq, xd, y, n_rows);
        else
            launch<slot_k45<true> >(c, v, xq, xd, y, n_rows);
        break;
    case CUDA_DT_Q6_K_SOA: launch<slot_q6_k>(c, v, xq, xd, y, n_rows); break;
    case CUDA_DT_Q8_0_SOA: launch<slot_q8_0>(c, v, xq, xd, y, n_rows); break;
    case CUDA_DT_Q4_0_SOA: launch<slot_q4_0>(c, v, xq, xd, y, n_rows); break;
    case CUDA_DT_Q4_K_T16: launch<slot_q4k_t16>(c, v, xq, xd, y, n_rows); break;
    case CUDA_DT_Q6_K_T16: launch<slot_q6k_t16>(c, v, xq, xd, y, n_rows); break;
    default: break;
    }
}

static int weight_kind(const struct cuda_ctx *c, const struct be_weight *w)
{
    bool aux = c->k45_aux && w->aux;
    switch (w->dev_type) {
    case GLIM_TYPE_Q4_K: return aux ? WK_Q4K_AUX : WK_Q4K;
    case GLIM_TYPE_Q5_K: return aux ? WK_Q5K_AUX : WK_Q5K;
    case CUDA_DT_Q6_K_SOA: return WK_Q6K;
    case CUDA_DT_Q8_0_SOA: return WK_Q80;
    case CUDA_DT_Q4_0_SOA: return WK_Q40;
    case CUDA_DT_Q4_K_T16: return WK_Q4K_T16;
    case CUDA_DT_Q6_K_T16: return WK_Q6K_T16;
    default: return -1;
    }
}

bool cuda_q8_batchable(int n, const struct be_weight *const *ws)
{
    if (n < 1 || n > GEMV_MAX_PARTS)
        return false;
    for (int i = 0; i < n; i++)
        if (!cuda_q8_supported(ws[i]->dev_type) || ws[i]->k != ws[0]->k ||
            layout_of(ws[i]->dev_type) != layout_of(ws[0]->dev_type))
            return false;
    return true;
}

/* In matmul_attn_prep (c->prep_req): when parts 0, 1, 2 of this one-token job are its q, k and v
 * with whole heads per task, the job runs attn_prep itself (gemv_prep_arrive) and says so in
 * c->prep_taken */
static void prep_plan(struct cuda_ctx *c, gemv_job &job, int n, float *const *ys, const struct be_weight *const *ws)
{
    const struct be_attn_prep_args *a = c->prep_req;
    if (!a || a->n_tokens != 1 || n < 3 || ys[0] != a->q || ys[1] != a->k || ys[2] != a->v)
        return;
    int64_t D = a->head_dim;
    if (ws[0]->n != a->n_head * D || ws[1]->n != a->n_head_kv * D || ws[2]->n != a->n_head_kv * D ||
        D % job.p[0].rw || D % job.p[1].rw || D % job.p[2].rw || !cuda_prep_params(a, &job.prep))
        return;
    if (!cuda_buf_counts(c, &c->prep_cnt, (size_t)(a->n_head + a->n_head_kv) * 4))
        return;
    job.prep_cnt = (unsigned *)c->prep_cnt.p;
    c->prep_taken = true;
}

void cuda_matmul_q8_n(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws,
                      const float *x, int n_rows, const float *g, int act)
{
    int64_t k = ws[0]->k;
    const int8_t *xq;
    const float2 *xd;
    if (!quantize_x(c, x, k, n_rows, layout_of(ws[0]->dev_type), g, act, &xq, &xd))
        return;
    /* v3/v4 only for one activation row: with 8 rows v3's larger register set measured
     * slower than v2 (Q4_K 6656x19968: 72.6 vs 69.0 us; Q8_0: 115.8 vs 76.9 us) */
    bool taken[GEMV_MAX_PARTS];
    if (c->gemv_ver == 2 || n_rows > 1) {
        bool v5 = n_rows > 1 && cuda_gemv5_nr(c, n, ys, ws, xq, xd, n_rows, taken);   /* opt-in */
        for (int i = 0; i < n; i++)
            if (!v5 || !taken[i])
                launch_v2(c, ys[i], ws[i], xq, xd, n_rows);
        CUDA_LAUNCHED(c, "matmul q8 v2");
        return;
    }
    float *ys_rest[GEMV_MAX_PARTS];
    const struct be_weight *ws_rest[GEMV_MAX_PARTS];
    if (cuda_gemv5(c, n, ys, ws, xq, xd, taken)) {   /* v5 took the Q4_K/Q6_K parts; the rest take v3 */
        CUDA_LAUNCHED(c, "matmul q8 v5");
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!taken[i])
                ys_rest[m] = ys[i], ws_rest[m] = ws[i], m++;
        if (!m)
            return;
        n = m, ys = ys_rest, ws = ws_rest;
    }
    int kinds[GEMV_MAX_PARTS];
    float *ys_mix[GEMV_MAX_PARTS];
    const struct be_weight *ws_mix[GEMV_MAX_PARTS];
    if (v3_mix() && n > 1 && !c->prep_req) {   /* Q4_K parts first (gemv3p2_kernel); rows keep their bits */
        int m = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < n; i++)
                if ((weight_kind(c, ws[i]) == WK_Q4K) == (pass == 0))
                    ys_mix[m] = ys[i], ws_mix[m] = ws[i], m++;
        ys = ys_mix, ws = ws_mix;
    }
    bool k4q6 = true;
    for (int i = 0; i < n; i++) {
        kinds[i] = weight_kind(c, ws[i]);
        k4q6 = k4q6 && (kinds[i] == WK_Q4K || kinds[i] == WK_Q4K_AUX || kinds[i] == WK_Q6K ||
                        kinds[i] == WK_Q4K_T16 || kinds[i] == WK_Q6K_T16);
    }
    gemv_job job;
    memset(&job, 0, sizeof job);
    int64_t tasks = 0;
    for (int i = 0; i < n; i++) {
        const struct be_weight *w = ws[i];
        int kind = kinds[i];
        bool two = kind == WK_Q4K || kind == WK_Q4K_AUX || kind == WK_Q40 || kind == WK_Q4K_T16;
        int rw = two && rows_per_warp_v3() == 2 ? 2 : 1;
        const uint8_t *aux = kind == WK_Q4K_AUX || kind == WK_Q5K_AUX ? (const uint8_t *)w->aux : NULL;
        job.p[i].v = (wview8){(const uint8_t *)w->dev, w->k, w->n, aux};
        job.p[i].y = ys[i];
        job.p[i].task0 = tasks;
        job.p[i].kind = kind;
        job.p[i].rw = rw;
        tasks += (w->n + rw - 1) / rw;
    }
    job.n_parts = n;
    job.n_tasks = tasks;
    job.ready = c->job_ready;   /* launch_v3p says whether it took it */
    if (n_rows == 1)
        prep_plan(c, job, n, ys, ws);
    if (launch_v3p(c, job, xq, xd)) {
        CUDA_LAUNCHED(c, "matmul q8 v3 persistent");
        return;
    }
    if (k4q6)
        launch_v3<KS_K4Q6>(c, job, xq, xd);
    else
        launch_v3<KS_ALL>(c, job, xq, xd);
    CUDA_LAUNCHED(c, "matmul q8 v3");
}

void cuda_matmul_q8(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    cuda_matmul_q8_n(c, 1, &y, &w, x, n_rows, NULL, 0);
}

/* The one-row GEMV y = w x on ctx->side, beside what ctx->stream runs next (the q/k/v job, attn_prep,
 * attention: few CTAs on the short keys of a decode step). x is quantized first on ctx->stream (or
 * found in the cache), then the side stream waits for that and runs the GEMV with ctx->side_ctas
 * persistent CTAs an SM and no PDL (its predecessor is an event); cuda_side_join ends it. The same
 * kernel on the same rows: the same bits as in the job. */
bool cuda_side_ok(const struct cuda_ctx *c, const struct be_weight *w)
{
    /* not a weight in tiles: v5 takes those (cuda_gemv5), and a v5 job on the side stream would
     * share the main stream's v5 scratch (partial sums, tile counts) with the q/k/v job beside it */
    bool tiles = c->cc_major >= 8 && (w->dev_type == CUDA_DT_Q4_K_T16 || w->dev_type == CUDA_DT_Q6_K_T16);
    return c->side_ctas > 0 && c->side && !c->exact && c->gemv_ver == 3 && cuda_q8_supported(w->dev_type) &&
           !tiles && !c->side_pending && c->first_err == cudaSuccess;
}

bool cuda_matmul_side(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, unsigned *ready)
{
    if (!cuda_side_ok(c, w))
        return false;
    const int8_t *xq;
    const float2 *xd;
    if (!quantize_x(c, x, w->k, 1, layout_of(w->dev_type), NULL, 0, &xq, &xd))
        return false;
    if (CUDA_TRY(c, cudaEventRecord(c->side_fork, c->stream)) || CUDA_TRY(c, cudaStreamWaitEvent(c->side, c->side_fork, 0)))
        return false;
    cudaStream_t main = c->stream;
    int persist = c->gemv_persist;
    bool pdl = c->pdl, pdl_all = c->pdl_all;
    c->stream = c->side, c->gemv_persist = c->side_ctas, c->pdl = c->pdl_all = false;
    c->job_ready = ready, c->job_ready_taken = false;
    cuda_matmul_q8_n(c, 1, &y, &w, x, 1, NULL, 0);   /* finds x's int8 copy: launches the GEMV only */
    if (ready && !c->job_ready_taken) {   /* a kernel that does not set it: set it after */
        ready_set_kernel<<<1, 1, 0, c->side>>>(ready);
        CUDA_LAUNCHED(c, "side ready flag");
    }
    c->job_ready = NULL;
    c->stream = main, c->gemv_persist = persist, c->pdl = pdl, c->pdl_all = pdl_all;
    c->side_pending = true;
    c->side_y = y, c->side_n = w->n;
    c->side_used++;
    return true;
}

/* ---- Q4_K/Q5_K decoded scales (be_weight.aux) ------------------------------------- */

size_t cuda_k45_aux_bytes(uint32_t type, int64_t k, int64_t n)
{
    if (type != GLIM_TYPE_Q4_K && type != GLIM_TYPE_Q5_K)
        return 0;
    return (size_t)(k / 256) * (size_t)n * 16;
}

/* Lossless: the same 6-bit values quant_k4_scale_min_get reads, one byte each, in the
 * order a GEMV lane of sub-block pair c wants them (slot_k45<., true>::load). */
void cuda_k45_aux_build(uint32_t type, const void *src, uint8_t *dst, int64_t k, int64_t n)
{
    size_t block_bytes = type == GLIM_TYPE_Q5_K ? sizeof(struct block_q5_k) : sizeof(struct block_q4_k);
    int64_t n_blocks = (k / 256) * n;
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *scales = (const uint8_t *)src + (size_t)b * block_bytes + 4;   /* after d, dmin */
        uint8_t *o = dst + (size_t)b * 16;
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_k4_scale_min_get(scales, 2 * c, &sc0, &m0);
            quant_k4_scale_min_get(scales, 2 * c + 1, &sc1, &m1);
            o[4 * c + 0] = sc0;
            o[4 * c + 1] = sc1;
            o[4 * c + 2] = m0;
            o[4 * c + 3] = m1;
        }
    }
}
