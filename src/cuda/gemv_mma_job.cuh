/*
 * gemv_mma_job.cuh — private to src/cuda: GEMV v5's job (gemv_mma.cu) as every kernel that runs
 * one sees it: the parts, the even split of (tile, super-block) units over warps, the weight
 * types' fetch/compute, and how a warp's sums of a tile are stored and merged in piece order.
 * Used by the v5 launches (gemv_mma.cu); the persistent decode span that also ran these jobs
 * from shared memory was removed on 2026-12-07 (code at 75bb8eb). Include it after
 * gemv_mma_lane.h (with its primitives defined) and gemv_slots.cuh.
 */
#ifndef GLIM_GEMV_MMA_JOB_CUH
#define GLIM_GEMV_MMA_JOB_CUH

#include <type_traits>

struct v5_job {
    v5_part   p[GEMV_MAX_PARTS];
    int       n_parts;
    int64_t   n_tiles, n_sb;   /* tiles of all parts; super-blocks per row */
    int64_t   n_warps;         /* warps that take work (<= units: each gets at least one) */
    int       stride;          /* most pieces a tile is cut into */
    unsigned *glu_cnt;         /* != NULL: parts 0 (gate) and 1 (up) of one shape; per 32-row block the
                                * tiles arrived (4 = both tiles of both parts; 0 between launches) */
    int8_t   *glu_q;           /* ... and the last of them writes silu(gate) * up quantized (K45) */
    float2   *glu_d;
    float    *part;            /* [n_tiles][stride][16] partial sums of cut tiles */
    unsigned *cnt;             /* [n_tiles] pieces arrived; 0 between launches */
    unsigned long long *trace; /* GLIM_CUDA_V5_TRACE=1 (diagnosis): per warp entry, wait done, end (ns) */
    int64_t   pool;            /* v5s: the last `pool` tiles are claimed whole at run time, not split */
    unsigned *pool_ctr;        /* ... [0] tiles claimed, [1] CTAs done; both 0 between launches */
    int       pool_cap;        /* ... most tiles one CTA may claim (its shared-memory slots) */
    int       pool_ahead;      /* ... claims a CTA keeps ahead of need (GLIM_CUDA_V5S_AHEAD, 2) */
};

/* v5's work split (gemv_mma_lane.h v5_split_*): every warp streams the same bytes +-1
 * super-block and no warp idles on a wave tail. The units split so: all but v5s's pool. */
static __device__ __forceinline__ int64_t v5_units(const v5_job &job)
{
    return (job.n_tiles - job.pool) * job.n_sb;
}

static __device__ __forceinline__ int64_t v5_warp_of(const v5_job &job, int64_t x)
{
    return v5_split_warp_of(x, v5_units(job), job.n_warps);
}

/* the kernel's view of a weight type: its raw bytes in flight, fetch and compute */
template <class R, void (*FETCH)(const v5_part *, int64_t, int64_t, int64_t, int64_t, int, R *),
          void (*COMPUTE)(const R *, const int8_t *, const float2 *, int64_t, int, int, float *, float *),
          bool T16 = false, int UD = 2>
struct v5_unit {
    typedef R raw;
    static const int U_DEF = UD;     /* super-blocks in flight per lane, measured best */
    static const bool TILED = T16;   /* rows padded to 16: the rows past n are there (zeros) */
    static const int REC = std::is_same<R, v5_q4k_raw>::value ? CUDA_T16_Q4K_BYTES : CUDA_T16_Q6K_BYTES;   /* a T16 record */
    static __device__ __forceinline__ void fetch(const v5_part &P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb,
                                                 int t, raw &r)
    {
        FETCH(&P, rg, rg8, n_sb, sb, t, &r);
    }
    static __device__ __forceinline__ void compute(const raw &r, const int8_t *xq, const float2 *xd, int64_t sb, int g,
                                                   int t, float &acc_g, float &acc_g8)
    {
        COMPUTE(&r, xq, xd, sb, g, t, &acc_g, &acc_g8);
    }
};
typedef v5_unit<v5_q4k_raw, v5_q4k_fetch, v5_q4k_compute> v5_q4k;
typedef v5_unit<v5_q6k_raw, v5_q6k_fetch, v5_q6k_compute> v5_q6k;
typedef v5_unit<v5_q4k_raw, v5_q4k_fetch_t16, v5_q4k_compute, true> v5_q4k_t16;
typedef v5_unit<v5_q6k_raw, v5_q6k_fetch_t16, v5_q6k_compute, true, 1> v5_q6k_t16;   /* U = 1: 80% vs 77% */

/* after a warp wrote its piece of a tile's partial sums: true (for the whole warp) when it was the
 * last of the tile's pieces to arrive, and then every partial is visible to it */
static __device__ __forceinline__ bool v5_last_piece(const v5_job &job, int64_t tile, int pieces, int lane)
{
    __threadfence();   /* the partials are visible before the count says so */
    __syncwarp();
    unsigned done = 0;
    if (lane == 0)
        done = atomicAdd(&job.cnt[tile], 1u);
    done = __shfl_sync(0xffffffffu, done, 0);
    if (done != (unsigned)pieces - 1)
        return false;
    __threadfence();   /* the last piece in: every partial of the tile is visible */
    return true;
}

/* After tile `tile` of part P (gate or up of a GLU job) was written: the last of the four tiles of
 * its 32-row block (two per part) quantizes silu(gate) * up of the block for the down projection,
 * as quantize_x_kernel<1 + BE_GLU_SILU> would (the same functions: the same bits). Returns the
 * block when this warp quantized it, else -1 (for a kernel that tells the block's readers). */
static __device__ __forceinline__ int64_t v5_glu_arrive(const v5_job &job, const v5_part &P, int64_t tile, int lane)
{
    int64_t blk = (tile - P.tile0) >> 1;
    __threadfence();   /* this tile's y is visible before the count says so */
    __syncwarp();
    unsigned done = 0;
    if (lane == 0)
        done = atomicAdd(&job.glu_cnt[blk], 1u);
    if (__shfl_sync(0xffffffffu, done, 0) != 3u)
        return -1;
    __threadfence();
    int64_t n = blk * 32 + lane;
    float v = glu_apply<1 + BE_GLU_SILU>(__ldcg(job.p[1].y + n), __ldcg(job.p[0].y + n));   /* up, gate: L2 */
    quant_block32(v, lane, n, XL_K45, job.glu_q, job.glu_d + blk);
    if (lane == 0)
        job.glu_cnt[blk] = 0u;   /* for the next launch */
    return blk;
}

/* a tile's rows g and g + 8: the sums of group g's 4 lanes, in every lane of the group */
static __device__ __forceinline__ void v5_group_sums(float &acc_g, float &acc_g8)
{
    acc_g += __shfl_xor_sync(0xffffffffu, acc_g, 1);
    acc_g += __shfl_xor_sync(0xffffffffu, acc_g, 2);
    acc_g8 += __shfl_xor_sync(0xffffffffu, acc_g8, 1);
    acc_g8 += __shfl_xor_sync(0xffffffffu, acc_g8, 2);
}

/* After this warp wrote its piece of cut tile `tile` (16 partial sums at slot piece of stride): the
 * last of the tile's pieces to arrive adds them in piece order from 0 into P.y, so the result does
 * not depend on timing, and resets the count. Returns v5_glu_arrive's block, or -1. Shared by
 * v5_store and v5s (gemv_mma.cu). */
static __device__ __forceinline__ int64_t v5_merge_cut(const v5_job &job, const v5_part &P, int64_t tile, int pieces,
                                                       int stride, int64_t r0, int lane)
{
    if (!v5_last_piece(job, tile, pieces, lane))
        return -1;
    if (lane < 16 && r0 + lane < P.n) {
        const float *tp = job.part + (size_t)tile * stride * 16 + lane;
        float y = 0.0f;
        for (int i = 0; i < pieces; i++)
            y += __ldcg(tp + (size_t)i * 16);
        P.y[r0 + lane] = y;
    }
    if (lane == 0)
        job.cnt[tile] = 0u;   /* for the next launch (which waits for this one's end) */
    return job.glu_cnt ? v5_glu_arrive(job, P, tile, lane) : -1;
}

/* Rows r0 + g and r0 + g + 8 of a tile: sum the 4 lanes of group g; with pieces == 1 write y,
 * else write this piece's 16 partial sums (slot piece of stride) and let the last piece to
 * arrive (an atomic count per tile, reset by it) add them in piece order: the result does not
 * depend on timing. Returns v5_glu_arrive's block, or -1. */
static __device__ __forceinline__ int64_t v5_store(const v5_job &job, const v5_part &P, int64_t tile, int piece,
                                                int pieces, int stride, int64_t r0, int lane, float acc_g,
                                                float acc_g8)
{
    int g = lane >> 2, t = lane & 3;
    v5_group_sums(acc_g, acc_g8);
    if (pieces == 1) {
        if (t == 0 && r0 + g < P.n)
            P.y[r0 + g] = acc_g;
        if (t == 0 && r0 + g + 8 < P.n)
            P.y[r0 + g + 8] = acc_g8;
        return job.glu_cnt ? v5_glu_arrive(job, P, tile, lane) : -1;
    }
    float *pp = job.part + ((size_t)tile * stride + piece) * 16;
    if (t == 0) {
        pp[g] = acc_g;
        pp[g + 8] = acc_g8;
    }
    return v5_merge_cut(job, P, tile, pieces, stride, r0, lane);
}

/* the part (of one weight type) that tile falls in, unrolled so the job stays in the parameter bank */
static __device__ __forceinline__ v5_part v5_pick(const v5_job &job, int64_t tile)
{
    v5_part P = job.p[0];
#pragma unroll
    for (int i = 1; i < GEMV_MAX_PARTS; i++)
        if (i < job.n_parts && tile >= job.p[i].tile0)
            P = job.p[i];
    return P;
}

#endif
