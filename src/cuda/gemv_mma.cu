/*
 * gemv_mma.cu — GEMV v5 (sm_80+): Q4_K or Q6_K weights times one activation row (and, opt-in,
 * 2..16 rows) on the tensor cores (mma.m16n8k32, 8-bit weights x s8 activations -> s32). Takes
 * every one-row matmul of weights in 16-row tiles (CUDA_DT_*_T16, GLIM_CUDA_T16=1), and of the
 * row-major ones with GLIM_CUDA_GEMV=5.
 *
 * WHY (docs/CUDA.md "Instructions per weight byte"): the dp4a GEMV spends ~6 (Q4_K) to ~7 (Q6_K)
 * instructions per weight byte and sits at 2/3 to 3/4 of copy bandwidth, issue- and
 * latency-bound. One mma multiplies 16 rows x 32 weights. Per Q4_K super-block (16 rows x 256
 * weights) a lane issues 10 loads of codes and header, 32 ANDs, 8 mma and 4 scale applications;
 * with the activation loads and addressing ~3 PTX instructions per weight byte (v3: ~6; Q6_K:
 * ~3.7 vs ~7, see v5_q6k). Below, the Q4_K mapping:
 *
 * Fragments (PTX ISA, m16n8k32 with 8-bit A/B), lane = 4g + t:
 *   A {row g, k 4t..4t+3} {row g+8, k 4t..} {row g, k 16+4t..} {row g+8, k 16+4t..}
 *   B {k 4t..4t+3, col g} {k 16+4t.., col g}      C {g, 2t} {g, 2t+1} {g+8, 2t} {g+8, 2t+1}
 * A dot product does not care in which order its k come, so lane t feeds k-slots 4t.. and
 * 16+4t.. with weights 8t..8t+3 and 8t+4..8t+7 of a sub-block: the code bytes
 * qs[32c + 8t, +8) of a row (one 8-byte load) hold those weights of sub-block 2c (low
 * nibbles) and 2c+1 (high nibbles, left in place: 16 x nibble as u8, the sum shifted back),
 * and their activations are the 8 bytes at 32c + 8t (low) / 128 + 32c + 8t (high) of the
 * super-block in the K45 order the quantizer writes (gemv_q8.cu).
 * Sub-block j's activations go only into B column n_j = 2(j & 3) + (j >> 2) (lanes of
 * other columns give 0), so the 8 mma of a super-block accumulate into one C: lane t ends
 * with the sums of sub-block t (c0, c2) and t + 4 (c1, c3) for rows g and g+8, and applies
 * exactly those four scales; lane g thus loads the activations of sub-block (g >> 1) + 4(g & 1)
 * only. The lane code is gemv_mma_lane.h, which tests/test_gemv_mma_lane.c also runs on the
 * CPU (a warp of 32 threads, the mma emulated from the PTX ISA fragment layout).
 *
 * Work: a job's (tile, super-block) units are cut evenly over the warps (gemv_mma_lane.h
 * v5_split_*); a tile cut between warps is merged by the last of its pieces to arrive (an atomic
 * count per tile, reset by that warp), in piece order, so the result does not depend on timing,
 * and tiles and row-major weights give the same bits. Not bit-equal to v2/v3 (another float
 * order): tests compare with a tolerance and require two runs to agree bit for bit.
 */
#include "gemv_slots.cuh"

#include <stdlib.h>

#include <type_traits>

#define V5_WARPS 4   /* warps per block; 4 blocks per SM like the persistent v3 */

/* the primitives gemv_mma_lane.h asks for */
#define V5_FN static __device__ __forceinline__
#define V5_HD static __host__ __device__ __forceinline__
#define V5_UNROLL _Pragma("unroll")

static __device__ __forceinline__ uint4 v5_ldw16(const void *p)
{
    return ldw16(p);
}

static __device__ __forceinline__ uint2 v5_ldw8(const void *p)
{
    return ldw8(p);
}

/* activations: through the read-only cache (a previous kernel wrote them) */
static __device__ __forceinline__ uint2 v5_ldx8(const int8_t *p)
{
    return __ldg((const uint2 *)p);
}

static __device__ __forceinline__ float2 v5_ldxd(const float2 *p)
{
    return __ldg(p);
}

static __device__ __forceinline__ uint32_t v5_ldu16(const uint8_t *p)
{
    return __ldg((const unsigned short *)p);
}

static __device__ __forceinline__ uint32_t v5_ldu32(const uint8_t *p)
{
    return __ldg((const unsigned int *)p);
}

static __device__ __forceinline__ float v5_h2f(uint32_t bits)
{
    return h2f8(bits);
}

static __device__ __forceinline__ float v5_i2f(int v)
{
    return i2f(v);
}

static __device__ __forceinline__ float v5_i2f_rn(int v)
{
    return __int2float_rn(v);
}

#include "mma_s8.cuh"
#include "gemv_mma_lane.h"
#include "gemv_mma_job.cuh"
#include "gemv_v5s_map.h"

/* the trace (diagnosis): this warp's stamp `which` (0 entry, 1 wait done, 2 end, 3 its last
 * span streamed) from the global timer; at the entry also its SM (slot 4) */
#define V5_TRACE_PER 5
static __device__ __forceinline__ void v5_stamp_w(const v5_job &job, int64_t w, int which)
{
    unsigned long long *r = job.trace + w * V5_TRACE_PER;
    r[which] = cuda_globaltimer();
    if (which == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        r[4] = sm;
    }
}

template <class K, int U>
static __device__ __forceinline__ void v5_fetch_set(const v5_part &P, int64_t lg, int64_t lg8, int64_t n_sb, int64_t s,
                                                    int64_t sb1, int t, typename K::raw *r)
{
#pragma unroll
    for (int u = 0; u < U; u++)
        if (s + u < sb1)
            K::fetch(P, lg, lg8, n_sb, s + u, t, r[u]);
}

template <class K, int U>
static __device__ __forceinline__ void v5_compute_set(const typename K::raw *r, const int8_t *xq, const float2 *xd,
                                                      int64_t s, int64_t sb1, int g, int t, float &acc_g, float &acc_g8)
{
#pragma unroll
    for (int u = 0; u < U; u++)
        if (s + u < sb1)
            K::compute(r[u], xq, xd, s + u, g, t, acc_g, acc_g8);
}

/* rows r0 + g, r0 + g + 8 of P over super-blocks [s0, sb1) of a tile, U in flight per lane */
template <class K, int U>
static __device__ __forceinline__ void v5_span(const v5_job &job, const v5_part &P, int64_t r0, int64_t s0,
                                               int64_t sb1, const int8_t *xq, const float2 *xd, int g, int t,
                                               bool &waited, float &acc_g, float &acc_g8, int64_t w)
{
    int64_t rg = r0 + g, rg8 = r0 + g + 8;
    int64_t lg = v5_row_loaded(rg, P.n, K::TILED), lg8 = v5_row_loaded(rg8, P.n, K::TILED);
#pragma unroll 1
    for (int64_t s = s0; s < sb1; s += U) {
        typename K::raw raw[U];
        v5_fetch_set<K, U>(P, lg, lg8, job.n_sb, s, sb1, t, raw);
        if (!waited) {   /* the first codes are on their way; x is the previous kernel's */
            cuda_pdl_wait();
            waited = true;
            if (job.trace && g == 0 && t == 0)
                v5_stamp_w(job, w, 1);
        }
        v5_compute_set<K, U>(raw, xq, xd, s, sb1, g, t, acc_g, acc_g8);
    }
}

/* KA / KB: the weight types of parts of kind 0 / 1 (the same type: one kind), UA / UB super-blocks
 * in flight per lane */
/* warp w's units of job (the FFN chain's and the norm fold's variants were removed on 2026-12-05,
 * their code is in git history at 8be8ec1) */
template <class KA, int UA, class KB, int UB>
static __device__ __forceinline__ void v5_run(const v5_job &job, const int8_t *__restrict__ xq,
                                              const float2 *__restrict__ xd, int64_t w, int lane, bool &waited)
{
    int g = lane >> 2, t = lane & 3;
    int64_t units = v5_units(job);
    int64_t a = v5_split_lo(w, units, job.n_warps), b = v5_split_lo(w + 1, units, job.n_warps);
#pragma unroll 1
    for (int64_t x = a; x < b;) {
        int64_t tile = x / job.n_sb, tend = (tile + 1) * job.n_sb, e = tend < b ? tend : b;
        v5_part P = v5_pick(job, tile);
        int64_t r0 = (tile - P.tile0) * 16, s0 = x - tile * job.n_sb, sb1 = e - tile * job.n_sb;
        float acc_g = 0.0f, acc_g8 = 0.0f;
        if (!std::is_same<KA, KB>::value && P.kind)
            v5_span<KB, UB>(job, P, r0, s0, sb1, xq, xd, g, t, waited, acc_g, acc_g8, w);
        else
            v5_span<KA, UA>(job, P, r0, s0, sb1, xq, xd, g, t, waited, acc_g, acc_g8, w);
        if (job.trace && lane == 0)
            v5_stamp_w(job, w, 3);
        int64_t w0 = v5_warp_of(job, tile * job.n_sb), w1 = v5_warp_of(job, tend - 1);
        v5_store(job, P, tile, (int)(w - w0), (int)(w1 - w0 + 1), job.stride, r0, lane, acc_g, acc_g8);
        x = e;
    }
}

/* WPC: warps per CTA (V5_WARPS; GLIM_CUDA_V5_CTA=8|16, a bench knob: the same warps, units and bits
 * in 2 or 1 CTAs an SM) */
template <class KA, int UA, class KB, int UB, int WPC = V5_WARPS>
static __global__ void __launch_bounds__(WPC * 32, 16 / WPC)
gemv5_kernel(const v5_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, bool trig)
{
    if (trig)
        cuda_pdl_trigger();
    int lane = threadIdx.x & 31;
    int64_t w = (int64_t)blockIdx.x * WPC + (threadIdx.x >> 5);
    if (job.trace && lane == 0)
        v5_stamp_w(job, w, 0);
    bool waited = false;   /* the first loads go out before the wait (after it: 156.7 vs 160.0 t/s) */
    v5_run<KA, UA, KB, UB>(job, xq, xd, w, lane, waited);
    if (!waited)
        cuda_pdl_wait();   /* a warp without work still must not end before its predecessor's writes */
    if (job.trace && lane == 0)
        v5_stamp_w(job, w, 2);
}

/* ---- GEMV v5s (the default for one-row jobs, chunks of C = 4 units; of two weight kinds with GLIM_CUDA_V5_MIX;
 * GLIM_CUDA_V5S=C, 0: plain v5): v5's arithmetic with the units shared out at run time inside each SM.
 * WHY (docs/PERFORMANCE.md, 2026-12-04 trace and 2026-12-06): a v5 launch ends ~5.5 us after its
 * median warp, and that tail is the spread of the warps' streaming ends: within an SM the 16 warps'
 * ends spread ~5 us (random per launch), while the SMs' means differ ~1-2 us. Work taken at run time
 * within the SM removes the first: one CTA of 16 warps an SM gets v5's even share of units (job.n_warps
 * = the CTAs), cut into chunks of at most C units that never cross a tile, and each warp takes the
 * next chunk from a shared-memory count until none is left. A chunk's 16 sums go to a shared-memory
 * slot; the warp whose chunk completes a tile's units in the CTA adds the slots in chunk order, so
 * the sums do not depend on which warp took what: the form has its own bits, the same every run
 * (held to v5 by a tolerance, test_v5s). A tile cut between CTAs is merged through global memory in
 * piece order as v5_store does, and the SwiGLU fold is v5_glu_arrive. */
/* a tile's rows r0 + lane (lane < 16) summed in this CTA, y: to P.y when the tile is the CTA's alone,
 * else as piece `piece` of `pieces` through global memory (v5_store's merge in piece order); then
 * the GLU fold */
static __device__ __forceinline__ void v5s_tile_out(const v5_job &job, const v5_part &P, int64_t tile, int64_t r0,
                                                    int lane, float y, int pieces, int piece)
{
    if (pieces > 1) {
        if (lane < 16)
            job.part[((size_t)tile * job.stride + piece) * 16 + lane] = y;
        v5_merge_cut(job, P, tile, pieces, job.stride, r0, lane);
        return;
    }
    if (lane < 16 && r0 + lane < P.n)
        P.y[r0 + lane] = y;
    if (job.glu_cnt)
        v5_glu_arrive(job, P, tile, lane);
}

/* The pool (GLIM_CUDA_V5S_POOL=P, default 50 %): v5s's split evens each SM's warps but not the SMs, whose
 * ends still spread several us a launch (docs/PERFORMANCE.md 2026-12-06). The job's last job.pool
 * tiles are left out of the even split; a CTA that has handed out all its own chunks goes on with
 * whole pooled tiles, claimed from a global count job.pool_ahead (GLIM_CUDA_V5S_AHEAD, 2) ahead of need
 * (one atomic a tile, its latency hidden by the work in hand), in chunks its warps take as before. A
 * pooled tile is summed in one CTA in chunk order, so the result does not depend on which CTA took it.
 * A tile of more than 16 chunks is not pooled (gemv_v5s_map.h v5s_pool_shape_of).
 * Pool slot q of a CTA: V5S_PENDING until claimed, then the pooled tile it took, or -1 when the pool
 * was empty (or the slot past the CTA's cap). */
#define V5S_PENDING (-2)
#define V5S_POOL_SLOTS 64   /* launches whose pool counts may be live at once (per context) */

static __device__ __forceinline__ int v5s_claim(const v5_job &job)
{
    unsigned v = atomicAdd(&job.pool_ctr[0], 1u);
    return v < (unsigned)job.pool ? (int)v : -1;
}

static __device__ __forceinline__ int v5s_slot_wait(volatile int *ptile, int q)
{
    int v;
    while ((v = ptile[q]) == V5S_PENDING)
        __nanosleep(32);
    return v;
}

/* KA / KB: the weight types of parts of kind 0 / 1 (the same type: one kind), as v5_run's */
template <class KA, int UA, class KB, int UB>
static __global__ void __launch_bounds__(16 * 32, 1)
gemv5s_kernel(const v5_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, bool trig, int C)
{
    /* [tiles_max + QM][cpt][16] slots (own tiles, then pooled ones), [tiles_max + QM] counts, the
     * next chunk, then QM pool slots */
    extern __shared__ float v5s_sm[];
    if (trig)
        cuda_pdl_trigger();
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    v5s_range R = v5s_range_of(blockIdx.x, v5_units(job), job.n_warps, job.n_sb, C);
    int64_t tmax = v5s_tiles_max(v5_units(job), job.n_warps, job.n_sb);
    int QM = job.pool ? job.pool_cap : 0;
    int64_t nl = tmax + QM;
    unsigned *tcnt = (unsigned *)(v5s_sm + (size_t)nl * R.cpt * 16), *next = tcnt + nl;
    volatile int *ptile = (volatile int *)(next + 1);
    for (int64_t i = threadIdx.x; i <= nl; i += blockDim.x)
        tcnt[i] = 0u;   /* and *next (tcnt[nl]) */
    for (int i = threadIdx.x; i < QM; i += blockDim.x)
        ptile[i] = V5S_PENDING;
    __syncthreads();
    bool waited = false;   /* the first loads go out before the wait, as v5's */
#pragma unroll 1
    for (;;) {
        unsigned k = 0;
        if (lane == 0)
            k = atomicAdd(next, 1u);
        k = __shfl_sync(0xffffffffu, k, 0);
        v5s_item it;   /* gemv_v5s_map.h: the chunk's units, slot and the count its tile waits for */
        int pieces = 1, piece = 0;   /* of a tile cut between CTAs */
        bool pooled = (int)k >= R.total;
        if (pooled) {
            if (!QM)
                break;
            int64_t kk = (int64_t)k - R.total, j = kk % R.cpt;
            int q = (int)(kk / R.cpt);
            if (q >= QM)
                break;
            int pt = v5s_slot_wait(ptile, q);
            if (j == 0 && q + job.pool_ahead < QM && lane == 0)   /* the chain: slot q's first chunk claims q + AHEAD */
                ptile[q + job.pool_ahead] = pt >= 0 ? v5s_claim(job) : -1;
            if (pt < 0) {   /* claims may return out of order: AHEAD empty slots in a row end the pool */
                bool more = false;
                for (int i = 1; i < job.pool_ahead && q + i < QM && !more; i++)
                    more = v5s_slot_wait(ptile, q + i) >= 0;
                if (!more)
                    break;
                continue;
            }
            it = v5s_pool_item(pt, j, tmax + q, job.n_tiles, job.pool, job.n_sb, C);
        } else {
            it = v5s_own_item(&R, k, job.n_sb, C);
        }
        v5_part P = v5_pick(job, it.tile);
        int64_t r0 = (it.tile - P.tile0) * 16;
        float acc_g = 0.0f, acc_g8 = 0.0f;
        if (!std::is_same<KA, KB>::value && P.kind)
            v5_span<KB, UB>(job, P, r0, it.s0, it.s1, xq, xd, g, t, waited, acc_g, acc_g8, 0);
        else
            v5_span<KA, UA>(job, P, r0, it.s0, it.s1, xq, xd, g, t, waited, acc_g, acc_g8, 0);
        if (k == 0 && QM && lane == 0)   /* past the PDL wait (the counts are the last launch's till then) */
            for (int i = 0; i < job.pool_ahead && i < QM; i++)
                ptile[i] = v5s_claim(job);
        v5_group_sums(acc_g, acc_g8);
        float *slot = v5s_sm + ((size_t)it.lt * R.cpt + it.j) * 16;
        if (t == 0) {
            slot[g] = acc_g;
            slot[g + 8] = acc_g8;
        }
        unsigned mine = (unsigned)(it.s1 - it.s0), done = 0;
        __threadfence_block();   /* the slot before the count */
        __syncwarp();
        if (lane == 0)
            done = atomicAdd(&tcnt[it.lt], mine);
        if (__shfl_sync(0xffffffffu, done, 0) + mine != (unsigned)it.need)
            continue;
        __threadfence_block();   /* every slot of the tile is visible */
        int nch = (int)((it.need + C - 1) / C);
        float y = 0.0f;
        if (lane < 16)
            for (int i = 0; i < nch; i++)
                y += v5s_sm[((size_t)it.lt * R.cpt + i) * 16 + lane];
        if (!pooled) {   /* a tile cut between CTAs: piece in the order of the even split */
            int64_t c0 = v5_warp_of(job, it.tile * job.n_sb), c1 = v5_warp_of(job, (it.tile + 1) * job.n_sb - 1);
            pieces = (int)(c1 - c0 + 1), piece = (int)(blockIdx.x - c0);
        }
        v5s_tile_out(job, P, it.tile, r0, lane, y, pieces, piece);
    }
    if (!waited)
        cuda_pdl_wait();   /* a warp without work still must not end before its predecessor's writes */
    if (QM) {   /* the last CTA out zeroes the pool's counts for the next launch on this slot */
        __syncthreads();   /* every claim of this CTA has returned */
        if (threadIdx.x == 0 && atomicAdd(&job.pool_ctr[1], 1u) == gridDim.x - 1) {
            job.pool_ctr[0] = 0u;
            job.pool_ctr[1] = 0u;
        }
    }
}

/* shared memory of a v5s launch of the planned job */
static size_t v5s_smem(const v5_job &job, int C)
{
    int64_t units = (job.n_tiles - job.pool) * job.n_sb;
    int64_t nl = v5s_tiles_max(units, job.n_warps, job.n_sb) + (job.pool ? job.pool_cap : 0), cpt = (job.n_sb + C - 1) / C;
    return (size_t)nl * cpt * 16 * sizeof(float) + (size_t)(nl + 1) * sizeof(unsigned) +
           (size_t)(job.pool ? job.pool_cap : 0) * sizeof(int);
}

/* v5s's pool for this job (its shape: gemv_v5s_map.h v5s_pool_shape_of) and its pair of counts;
 * false (recorded) when the counts cannot be had */
static bool v5s_pool_plan(struct cuda_ctx *c, v5_job &job, int64_t n_cta)
{
    v5s_pool_shape ps = v5s_pool_shape_of(job.n_tiles, job.n_sb, c->v5s, c->v5s_pool, n_cta);
    job.pool = ps.pool, job.pool_cap = ps.cap;
    job.pool_ahead = c->v5s_ahead;
    if (!job.pool)
        return true;
    if (!cuda_buf_counts(c, &c->v5s_ctr, V5S_POOL_SLOTS * 2 * sizeof(unsigned)))
        return false;
    job.pool_ctr = (unsigned *)c->v5s_ctr.p + 2 * (c->v5s_slot++ % V5S_POOL_SLOTS);
    return true;
}

/* Split the job over `warps` warps (at most one per unit) and reserve the partial sums of cut
 * tiles; false (error recorded in the context) when the scratch cannot be had */
static bool v5_plan(struct cuda_ctx *c, v5_job &job, int64_t warps, int per_piece = 16)
{
    int64_t units = (job.n_tiles - job.pool) * job.n_sb;   /* v5s's pool is not split */
    job.n_warps = warps < units ? warps : units;
    job.stride = v5_split_stride(job.n_sb, units, job.n_warps);
    size_t part_bytes = (size_t)job.n_tiles * job.stride * per_piece * sizeof(float);
    if (!cuda_buf_reserve(c, &c->v5_part, part_bytes) || !cuda_buf_counts(c, &c->v5_cnt, (size_t)job.n_tiles * 4))
        return false;
    job.part = (float *)c->v5_part.p;
    job.cnt = (unsigned *)c->v5_cnt.p;
    return true;
}

/* In matmul_pair_glu: when this job is the gate (part 0) and up (part 1) of one shape, let its
 * last tile per 32-row block quantize silu(gate) * up into c->glu_q (v5_glu_arrive) */
static bool v5_glu_plan(struct cuda_ctx *c, v5_job &job, int n, float *const *ys, const struct be_weight *const *ws,
                        const bool *mine)
{
    if (n != 2 || job.n_parts != 2 || !mine[0] || !mine[1] || ws[0]->n != ws[1]->n || ws[0]->n % 256 ||
        ws[0]->k != ws[1]->k)
        return false;
    int64_t k = ws[0]->n, blocks = k / 32;
    if (!cuda_buf_reserve(c, &c->glu_q, (size_t)k + (size_t)blocks * sizeof(float2)) ||
        !cuda_buf_counts(c, &c->glu_cnt, (size_t)blocks * 4))
        return false;
    job.glu_cnt = (unsigned *)c->glu_cnt.p;
    job.glu_q = (int8_t *)c->glu_q.p;
    job.glu_d = (float2 *)((uint8_t *)c->glu_q.p + k);
    return true;
}

/* warps per SM of the plain kernel (GLIM_CUDA_V5_W: fewer, for longer runs per warp) */
static int64_t v5_warps(const struct cuda_ctx *c, int most_per_sm)
{
    static int forced = -1;
    int64_t per_sm = cuda_env_knob("GLIM_CUDA_V5_W", &forced);
    per_sm = per_sm < 1 || per_sm > most_per_sm ? most_per_sm : per_sm;
    return per_sm * c->n_sm;
}

/* The job of the parts not yet taken whose dev_type is dta (kind 0) or dtb (kind 1; 0: none) and
 * whose k is the first part's; mine[i]: part i is in it. Returns how many. */
static int v5_collect(v5_job &job, uint32_t dta, uint32_t dtb, int n, float *const *ys,
                      const struct be_weight *const *ws, const bool *taken, bool *mine)
{
    memset(&job, 0, sizeof job);
    job.n_sb = ws[0]->k / 256;
    int m = 0;
    for (int i = 0; i < n; i++) {
        mine[i] = !taken[i] && (ws[i]->dev_type == dta || (dtb && ws[i]->dev_type == dtb)) && ws[i]->k == ws[0]->k;
        if (!mine[i])
            continue;
        job.p[m++] = (v5_part){(const uint8_t *)ws[i]->dev, ys[i], ws[i]->n, job.n_tiles, ws[i]->dev_type != dta};
        job.n_tiles += (ws[i]->n + 15) / 16;
    }
    job.n_parts = m;
    return m;
}

/* ---- the trace (GLIM_CUDA_V5_TRACE=1, diagnosis): per v5 launch since the last graph_begin (a
 * slot each, V5_TRACE_CAP at most), per warp the v5_stamp times in ns of the global timer;
 * backend_destroy prints them (cuda_v5_trace_dump). The device buffer, made at backend creation;
 * false (recorded) on failure: */
bool cuda_v5_trace_init(struct cuda_ctx *c)
{
    size_t bytes = (size_t)V5_TRACE_CAP * 16 * c->n_sm * V5_TRACE_PER * sizeof(unsigned long long);
    return !CUDA_TRY(c, cudaMalloc(&c->v5_trace, bytes));
}

static unsigned long long *v5_trace_slot(struct cuda_ctx *c, const v5_job &job, int n, const struct be_weight *const *ws,
                                         const bool *mine)
{
    if (!c->v5_trace || c->v5_trace_n >= V5_TRACE_CAP || job.n_warps > 16 * c->n_sm)
        return NULL;
    int i = c->v5_trace_n++;
    int64_t bytes = 0;
    for (int p = 0; p < n; p++)
        bytes += mine[p] ? (int64_t)ws[p]->nbytes : 0;
    c->v5_trace_meta[i][0] = job.n_warps;
    c->v5_trace_meta[i][1] = bytes;
    return (unsigned long long *)c->v5_trace + (size_t)i * 16 * c->n_sm * V5_TRACE_PER;
}

static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* One line per traced launch, times in us from the first launch's first entry: entry (first),
 * wait done (first, last), end (first, median, 90%, last), MB and TB/s from the first wait's end
 * to the last end; then the gap from the previous launch's last end to this one's first wait end.
 * With GLIM_CUDA_V5_TRACE_RAW=i also launches i and i + 1 warp by warp: warp, SM, entry, wait
 * done, end of its last span, end. */
void cuda_v5_trace_dump(struct cuda_ctx *c)
{
    if (!c->v5_trace || !c->v5_trace_n)
        return;
    size_t per = (size_t)16 * c->n_sm * V5_TRACE_PER, n = (size_t)c->v5_trace_n * per;
    unsigned long long *h = (unsigned long long *)malloc(n * sizeof *h), *e = (unsigned long long *)malloc(per * sizeof *e);
    if (!h || !e || cudaMemcpy(h, c->v5_trace, n * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h);
        free(e);
        return;
    }
    unsigned long long t0 = ~0ull, prev_end = 0;
    const char *raw_env = getenv("GLIM_CUDA_V5_TRACE_RAW");
    bool raw = raw_env != NULL;
    int raw_i = raw ? atoi(raw_env) : -1;
    for (size_t w = 0; w < (size_t)c->v5_trace_meta[0][0]; w++)
        t0 = h[w * V5_TRACE_PER] < t0 ? h[w * V5_TRACE_PER] : t0;
    fprintf(stderr, "v5 trace: launch warps MB | entry0 wait0 waitN | end0 end50 end90 endN | TB/s | gap_prev\n");
    for (int i = 0; i < c->v5_trace_n; i++) {
        const unsigned long long *r = h + (size_t)i * per;
        int64_t nw = c->v5_trace_meta[i][0];
        unsigned long long en = ~0ull, w0 = ~0ull, wn = 0;
        for (int64_t w = 0; w < nw; w++) {
            const unsigned long long *q = r + w * V5_TRACE_PER;
            en = q[0] < en ? q[0] : en;
            w0 = q[1] < w0 ? q[1] : w0;
            wn = q[1] > wn ? q[1] : wn;
            e[w] = q[2];
            if (raw && (i == raw_i || i == raw_i + 1))
                fprintf(stderr, "v5 raw: %lld %llu %.3f %.3f %.3f %.3f\n", (long long)w, q[4], (q[0] - t0) * 1e-3,
                        (q[1] - t0) * 1e-3, (q[3] - t0) * 1e-3, (q[2] - t0) * 1e-3);
        }
        qsort(e, (size_t)nw, sizeof *e, cmp_u64);
        double us = 1e-3, mb = c->v5_trace_meta[i][1] / 1e6;
        double span = (double)(e[nw - 1] - w0) * us;
        fprintf(stderr, "v5 trace: %3d %5lld %7.2f | %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f %8.2f | %6.2f | %6.2f\n", i,
                (long long)nw, mb, (en - t0) * us, (w0 - t0) * us, (wn - t0) * us, (e[0] - t0) * us,
                (e[nw / 2] - t0) * us, (e[nw * 9 / 10] - t0) * us, (e[nw - 1] - t0) * us, span > 0 ? mb / span : 0.0,
                prev_end ? ((double)w0 - (double)prev_end) * us : 0.0);
        prev_end = e[nw - 1];
    }
    free(h);
    free(e);
}

/* the plain v5 launch of a planned job */
template <class KA, class KB>
static void v5_go(struct cuda_ctx *c, v5_job &job, int n, const struct be_weight *const *ws, const bool *mine,
                  const int8_t *xq, const float2 *xd)
{
    job.trace = v5_trace_slot(c, job, n, ws, mine);
    cudaLaunchAttribute attr[2];
    static int u_forced = -1;   /* GLIM_CUDA_V5_U=1|2|3: super-blocks in flight per lane (one kind) */
    int u = cuda_env_knob("GLIM_CUDA_V5_U", &u_forced);
    static int cta_forced = -1;   /* GLIM_CUDA_V5_CTA=8|16: warps per CTA (one kind, U 1 or 2) */
    int wpc = cuda_env_knob("GLIM_CUDA_V5_CTA", &cta_forced), uu = u ? u : KA::U_DEF;
    if (std::is_same<KA, KB>::value && (wpc == 8 || wpc == 16) && (uu == 1 || uu == 2)) {
        cudaLaunchConfig_t cfg =
            cuda_launch_cfg(c, dim3((unsigned)((job.n_warps + wpc - 1) / wpc)), dim3(wpc * 32), 0, attr);
        if (wpc == 16)
            CUDA_TRY(c, cudaLaunchKernelEx(&cfg, uu == 1 ? gemv5_kernel<KA, 1, KA, 1, 16> : gemv5_kernel<KA, 2, KA, 2, 16>,
                                           job, xq, xd, c->pdl_all));
        else
            CUDA_TRY(c, cudaLaunchKernelEx(&cfg, uu == 1 ? gemv5_kernel<KA, 1, KA, 1, 8> : gemv5_kernel<KA, 2, KA, 2, 8>,
                                           job, xq, xd, c->pdl_all));
        return;
    }
    cudaLaunchConfig_t cfg =
        cuda_launch_cfg(c, dim3((unsigned)((job.n_warps + V5_WARPS - 1) / V5_WARPS)), dim3(V5_WARPS * 32), 0, attr);
    if (!std::is_same<KA, KB>::value)   /* two kinds: U = 1 each (Q4_K at 2 spills at 128 registers) */
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5_kernel<KA, 1, KB, 1>, job, xq, xd, c->pdl_all));
    else if ((u ? u : KA::U_DEF) == 1)
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5_kernel<KA, 1, KA, 1>, job, xq, xd, c->pdl_all));
    else if ((u ? u : KA::U_DEF) == 3)
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5_kernel<KA, 3, KA, 3>, job, xq, xd, c->pdl_all));
    else
        CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5_kernel<KA, 2, KA, 2>, job, xq, xd, c->pdl_all));
}

/* Launch v5 for the parts not yet taken of dev_type dta (weight type KA) and, in the same kernel,
 * of dtb (KB; dtb = 0: none); returns how many parts it took */
template <class KA, class KB = KA>
static int launch_v5(struct cuda_ctx *c, uint32_t dta, uint32_t dtb, int64_t min_units, int n, float *const *ys,
                     const struct be_weight *const *ws, const int8_t *xq, const float2 *xd, bool *taken)
{
    v5_job job;
    bool mine[GEMV_MAX_PARTS];
    int m = v5_collect(job, dta, dtb, n, ys, ws, taken, mine);
    if (!m || job.n_tiles * job.n_sb < min_units)
        return 0;
    int64_t warps = v5_warps(c, 16);   /* 4 CTAs x 4 warps per SM: the register limit */
    int C = c->v5s;   /* v5s: 16 / v5s_warps CTAs an SM (one by default) */
    int64_t n_cta = (int64_t)c->n_sm * (16 / c->v5s_warps);
    if (C && c->v5s_pool && !v5s_pool_plan(c, job, n_cta))
        return 0;
    if (!v5_plan(c, job, C ? n_cta : warps))
        return 0;   /* recorded in the context; these parts go to v3 */
    bool glu = c->glu_req && v5_glu_plan(c, job, n, ys, ws, mine);
    size_t smem = C ? v5s_smem(job, C) : 0;
    if (C && smem <= 48 * 1024) {
        job.trace = NULL;
        cudaLaunchAttribute attr[2];
        cudaLaunchConfig_t cfg = cuda_launch_cfg(c, dim3((unsigned)job.n_warps), dim3(c->v5s_warps * 32), smem, attr);
        if (std::is_same<KA, KB>::value)
            CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5s_kernel<KA, KA::U_DEF, KA, KA::U_DEF>, job, xq, xd, c->pdl_all,
                                           C));
        else   /* two kinds (GLIM_CUDA_V5_MIX): U = 1 each, as v5_go */
            CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5s_kernel<KA, 1, KB, 1>, job, xq, xd, c->pdl_all, C));
    } else {
        job.pool = 0;
        if (C && !v5_plan(c, job, warps))   /* too many slots (the output head): plain v5 */
            return 0;
        v5_go<KA, KB>(c, job, n, ws, mine, xq, xd);
    }
    for (int i = 0; i < n; i++)
        taken[i] = taken[i] || mine[i];
    if (glu && c->first_err == cudaSuccess)   /* matmul_glu(x = up, g = gate) finds its input made */
        c->glu_x = ys[1], c->glu_g = ys[0], c->glu_k = ws[0]->n;
    return m;
}

/* ---- 2..16 activation rows (default; GLIM_CUDA_V5_NR=0: v2. Q4_K and Q6_K; DFlash verify):
 * gemv_mma_lane.h v5_q4k_compute_nr / v5_q6k_compute_nr. A lane owns weight rows g, g + 8 times activation rows 8cb + 2t, + 1, so a
 * piece of a tile is 16 x 16 partial sums and no lane sums with another. */
static __device__ __forceinline__ void v5_store_nr(const v5_job &job, const v5_part &P, int64_t tile, int piece,
                                                   int pieces, int64_t r0, int lane, int nr,
                                                   const float (&acc)[2][2][2])
{
    int g = lane >> 2, t = lane & 3;
    float *pp = job.part + ((size_t)tile * job.stride + piece) * 256;
#pragma unroll
    for (int cb = 0; cb < 2; cb++)
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                int col = 8 * cb + 2 * t + j, row = g + 8 * i;
                if (col >= nr)
                    continue;
                if (pieces == 1) {
                    if (r0 + row < P.n)
                        P.y[col * P.n + r0 + row] = acc[cb][i][j];
                } else {
                    pp[row * 16 + col] = acc[cb][i][j];
                }
            }
    if (pieces == 1)
        return;
    if (!v5_last_piece(job, tile, pieces, lane))
        return;
    for (int e = lane; e < 16 * nr; e += 32) {
        int row = e / nr, col = e % nr;
        if (r0 + row >= P.n)
            continue;
        const float *tp = job.part + (size_t)tile * job.stride * 256 + row * 16 + col;
        float y = 0.0f;
        for (int i = 0; i < pieces; i++)
            y += __ldcg(tp + (size_t)i * 256);
        P.y[col * P.n + r0 + row] = y;
    }
    if (lane == 0)
        job.cnt[tile] = 0u;
}

/* the kernel's view of a weight type for 2..16 rows: raw bytes, fetch, compute_nr */
template <class R, void (*FETCH)(const v5_part *, int64_t, int64_t, int64_t, int64_t, int, R *),
          void (*CNR)(const R *, int, const int8_t *, const float2 *, int64_t, int, int64_t, int, int, float (*)[2][2]),
          bool T16>
struct v5nr_unit {
    typedef R raw;
    static const bool TILED = T16;
    static __device__ __forceinline__ void fetch(const v5_part &P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb,
                                                 int t, raw &r)
    {
        FETCH(&P, rg, rg8, n_sb, sb, t, &r);
    }
    static __device__ __forceinline__ void compute_nr(const raw &r, const int8_t *xq, const float2 *xd, int64_t k,
                                                      int nr, int64_t sb, int g, int t, float (&acc)[2][2][2])
    {
        CNR(&r, T16, xq, xd, k, nr, sb, g, t, acc);
    }
};
typedef v5nr_unit<v5_q4k_raw, v5_q4k_fetch, v5_q4k_compute_nr, false> v5nr_q4k;
typedef v5nr_unit<v5_q4k_raw, v5_q4k_fetch_t16, v5_q4k_compute_nr, true> v5nr_q4k_t16;
typedef v5nr_unit<v5_q6k_nr_raw, v5_q6k_fetch_nr, v5_q6k_compute_nr, false> v5nr_q6k;
typedef v5nr_unit<v5_q6k_nr_raw, v5_q6k_fetch_nr_t16, v5_q6k_compute_nr, true> v5nr_q6k_t16;

template <class K, int U>
static __global__ void __launch_bounds__(V5_WARPS * 32, 3)   /* at 4 per SM (128 registers) ptxas spills 76-90 bytes */
gemv5nr_kernel(const v5_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, int nr, bool trig)
{
    if (trig)
        cuda_pdl_trigger();
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t w = (int64_t)blockIdx.x * V5_WARPS + (threadIdx.x >> 5), units = v5_units(job), k = job.n_sb * 256;
    int64_t a = v5_split_lo(w, units, job.n_warps), b = v5_split_lo(w + 1, units, job.n_warps);
    bool waited = false;
#pragma unroll 1
    for (int64_t x = a; x < b;) {
        int64_t tile = x / job.n_sb, tend = (tile + 1) * job.n_sb, e = tend < b ? tend : b;
        v5_part P = v5_pick(job, tile);
        int64_t r0 = (tile - P.tile0) * 16, rg = r0 + g, rg8 = r0 + g + 8, sb1 = e - tile * job.n_sb;
        int64_t lg = v5_row_loaded(rg, P.n, K::TILED), lg8 = v5_row_loaded(rg8, P.n, K::TILED);
        float acc[2][2][2] = {{{0.0f, 0.0f}, {0.0f, 0.0f}}, {{0.0f, 0.0f}, {0.0f, 0.0f}}};
#pragma unroll 1
        for (int64_t s = x - tile * job.n_sb; s < sb1; s += U) {
            typename K::raw raw[U];
            v5_fetch_set<K, U>(P, lg, lg8, job.n_sb, s, sb1, t, raw);
            if (!waited) {
                cuda_pdl_wait();
                waited = true;
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (s + u < sb1)
                    K::compute_nr(raw[u], xq, xd, k, nr, s + u, g, t, acc);
        }
        int64_t w0 = v5_warp_of(job, tile * job.n_sb), w1 = v5_warp_of(job, tend - 1);
        v5_store_nr(job, P, tile, (int)(w - w0), (int)(w1 - w0 + 1), r0, lane, nr, acc);
        x = e;
    }
    if (!waited)
        cuda_pdl_wait();
}

template <class K>
static int launch_v5nr(struct cuda_ctx *c, uint32_t dt, int n, float *const *ys, const struct be_weight *const *ws,
                       const int8_t *xq, const float2 *xd, int nr, bool *taken)
{
    v5_job job;
    bool mine[GEMV_MAX_PARTS];
    int m = v5_collect(job, dt, 0, n, ys, ws, taken, mine);
    if (!m)
        return 0;
    if (!v5_plan(c, job, v5_warps(c, 12), 256))
        return 0;
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg =
        cuda_launch_cfg(c, dim3((unsigned)((job.n_warps + V5_WARPS - 1) / V5_WARPS)), dim3(V5_WARPS * 32), 0, attr);
    /* (two super-blocks in flight per lane measured slower at 3 and at 2 CTAs per SM: DFlash verify
     * B = 16 35.9 / 36.0 ms vs 31.8, 2026-12-04; the kernel is at 168 registers already) */
    CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv5nr_kernel<K, 1>, job, xq, xd, nr, c->pdl_all));
    for (int i = 0; i < n; i++)
        taken[i] = taken[i] || mine[i];
    return m;
}

/* With ctx->v5_nr (default, sm_80+; GLIM_CUDA_V5_NR=0: off): the Q4_K and Q6_K parts (tiles, and, with
 * ctx->v5_nr_rows, row-major ones) of a matmul of 2..16 activation rows on the tensor cores; the rest
 * stays with v2, which reads tiles slowly (8 rows, 2026-12-03: FFN 61-69 us here, 77-186 on v2). The
 * row-major attention matrices on v5 too: DFlash verify of 16 rows on the 30B preset 26.6 vs 31.8 ms
 * a cycle (2026-12-04). */
int cuda_gemv5_nr(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws, const int8_t *xq,
                  const float2 *xd, int nr, bool *taken)
{
    if (c->cc_major < 8 || !c->v5_nr || nr < 2 || nr > 16 || n < 1 || n > GEMV_MAX_PARTS || ws[0]->k % 256)
        return 0;
    for (int i = 0; i < n; i++)
        taken[i] = false;
    int m = launch_v5nr<v5nr_q4k_t16>(c, CUDA_DT_Q4_K_T16, n, ys, ws, xq, xd, nr, taken);
    m += launch_v5nr<v5nr_q6k_t16>(c, CUDA_DT_Q6_K_T16, n, ys, ws, xq, xd, nr, taken);
    if (c->gemv_ver == 5 || c->v5_nr_rows) {   /* the row-major ones (attention matrices) too */
        m += launch_v5nr<v5nr_q4k>(c, GLIM_TYPE_Q4_K, n, ys, ws, xq, xd, nr, taken);
        m += launch_v5nr<v5nr_q6k>(c, CUDA_DT_Q6_K_SOA, n, ys, ws, xq, xd, nr, taken);
    }
    return m;
}

/* Which parts v5 takes: with GLIM_CUDA_GEMV=5 every Q4_K and Q6_K part (GLIM_CUDA_V5_KINDS: 1 =
 * Q4_K only, 2 = Q6_K only, 3 = both); with the default GEMV (v3) the parts in 16-row tiles
 * (CUDA_DT_*_T16), which v5 streams at 72-97% of copy and v3 reads badly (a row's code bytes
 * are 8-byte pieces of half-used sectors: tg128 95.7 t/s with v3 on tiles, 160.1 with v5;
 * docs/PERFORMANCE.md 2026-12-03). GLIM_CUDA_V5_MIN=n (bench knob): only jobs of at least n
 * (tile, super-block) units. (cuda_util.cuh) */
int cuda_gemv5(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws, const int8_t *xq,
               const float2 *xd, bool *taken)
{
    bool all = c->gemv_ver == 5, tiles = c->gemv_ver == 3 && c->cc_major >= 8;
    if (!(all || tiles) || n < 1 || n > GEMV_MAX_PARTS || ws[0]->k % 256)
        return 0;
    static int kinds = -1, min_forced = -1;
    int which = all ? (int)cuda_env_knob("GLIM_CUDA_V5_KINDS", &kinds) : 0;
    which = which ? which : 3;
    int64_t min_units = all ? 0 : cuda_env_knob("GLIM_CUDA_V5_MIN", &min_forced);
    for (int i = 0; i < n; i++)
        taken[i] = false;
    int m = 0;
    if (which == 3 && c->v5_mix) {   /* rows too: tiles' twin (tests) */
        m += launch_v5<v5_q4k_t16, v5_q6k_t16>(c, CUDA_DT_Q4_K_T16, CUDA_DT_Q6_K_T16, min_units, n, ys, ws, xq, xd,
                                               taken);
        if (all)
            m += launch_v5<v5_q4k, v5_q6k>(c, GLIM_TYPE_Q4_K, CUDA_DT_Q6_K_SOA, 0, n, ys, ws, xq, xd, taken);
    }
    if (which & 1) {
        m += launch_v5<v5_q4k_t16>(c, CUDA_DT_Q4_K_T16, 0, min_units, n, ys, ws, xq, xd, taken);
        if (all)
            m += launch_v5<v5_q4k>(c, GLIM_TYPE_Q4_K, 0, 0, n, ys, ws, xq, xd, taken);
    }
    if (which & 2) {
        m += launch_v5<v5_q6k_t16>(c, CUDA_DT_Q6_K_T16, 0, min_units, n, ys, ws, xq, xd, taken);
        if (all)
            m += launch_v5<v5_q6k>(c, CUDA_DT_Q6_K_SOA, 0, 0, n, ys, ws, xq, xd, taken);
    }
    return m;
}
