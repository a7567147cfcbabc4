/*
 * gemv_stream.cu — GEMV v4: one activation row times Q4_K/Q6_K weights (the decode
 * step of Q4_K_M files), the weights streamed through shared memory with cp.async.
 *
 * WHY (docs/CUDA.md "What limits it now"): v3 gives each warp one row; the warp issues
 * the row's loads, waits once, decodes, reduces and exits, and the grid is a few waves
 * of such warps. The memory pipe idles while warps decode or start, and the last wave
 * of a 6656-row matrix is a fraction of the machine (Q4_K ran at 51-63% of copy
 * bandwidth). Here a persistent grid (CTAs per SM x SMs) keeps every warp's next D-1
 * chunks of weights in flight into its own shared-memory ring while it decodes the
 * current chunk, so the loads never wait for the arithmetic, and rows are dealt to
 * warps round-robin so every warp has the same number of rows +-1.
 *
 * Bit-equal to v2/v3: a row is still one warp's, lane l still handles the row's slots
 * l, l+32, ... in order with the same slot arithmetic (gemv_slots.cuh), because a chunk
 * is V4_C super-blocks = 8 V4_C slots, a multiple of 32.
 *
 * The weight prefetch does not depend on the previous kernel: with programmatic
 * dependent launch (ctx->pdl, sm_90) the grid starts while its predecessor (the
 * quantizer or the fused residual+norm, which trigger early) still runs, fills its rings,
 * and only then waits for x (griddepcontrol.wait).
 */
#include "gemv_slots.cuh"
#include "tma.cuh"

#define V4_C 16                                          /* super-blocks per chunk */
#define V4_Q4_STAGE (V4_C * 144)                         /* Q4_K: the GGUF blocks */
#define V4_Q6_STAGE (V4_C * 208 + 48)                   /* Q6_K SoA: ql, qh, sc, d units */
#define V4_MAX_WARPS 8   /* 256 threads: up to 255 registers */

/* Bulk copies into the ring (tma.cuh). Measured 2026-12-02: the same ring filled with per-lane
 * 16-byte cp.async ran at 25-38% of copy bandwidth at every depth tried (the LSU's
 * outstanding-request limit, not the depth, bounded it); one bulk copy per chunk leaves the
 * in-flight bytes to the copy engine. */

/* the part of the job that task t (= a row: v4 runs rw = 1) falls in, unrolled so the
 * job stays in the parameter bank */
struct v4_row {
    wview8  v;
    float  *y;
    int64_t row;
    int     kind;
};

static __device__ __forceinline__ void v4_pick(const gemv_job &job, int64_t t, v4_row &r)
{
    r.v = job.p[0].v, r.y = job.p[0].y, r.kind = job.p[0].kind;
    int64_t t0 = 0;
#pragma unroll
    for (int i = 1; i < GEMV_MAX_PARTS; i++)
        if (i < job.n_parts && t >= job.p[i].task0)
            r.v = job.p[i].v, r.y = job.p[i].y, r.kind = job.p[i].kind, t0 = job.p[i].task0;
    r.row = t - t0;
}

/* Lane 0 starts the copies of chunk j (super-blocks V4_C j ..) of task t's row into
 * stage st; bar completes when they have landed. */
static __device__ __forceinline__ void v4_issue(const gemv_job &job, int64_t t, int j, uint8_t *st, uint64_t *bar)
{
    v4_row r;
    v4_pick(job, t, r);
    int64_t kb = r.v.k >> 8, ib = r.row * kb + (int64_t)j * V4_C;
    unsigned nb = (unsigned)min((int64_t)V4_C, kb - (int64_t)j * V4_C);
    if (r.kind == WK_Q4K) {
        bar_expect(bar, nb * 144);
        bulk_copy(st, r.v.p + ib * 144, nb * 144, bar);
        return;
    }
    int64_t nbt = kb * r.v.n;   /* Q6_K SoA: ql[nbt][128], qh[nbt][64], sc[nbt][16], d[nbt] */
    /* the fp16 scales are only 2-byte aligned: copy the 16-byte units that hold them (the
     * allocation has 16 spare bytes at the end: weight_init) */
    int64_t d0 = nbt * 208 + ib * 2, a0 = d0 & ~(int64_t)15, a1 = (d0 + 2 * nb + 15) & ~(int64_t)15;
    bar_expect(bar, nb * 208 + (unsigned)(a1 - a0));
    bulk_copy(st, r.v.p + ib * 128, nb * 128, bar);
    bulk_copy(st + V4_C * 128, r.v.p + nbt * 128 + ib * 64, nb * 64, bar);
    bulk_copy(st + V4_C * 192, r.v.p + nbt * 192 + ib * 16, nb * 16, bar);
    bulk_copy(st + V4_C * 208, r.v.p + a0, (unsigned)(a1 - a0), bar);
}

/* acc += this lane's slots of chunk j of task t's row (in stage st), in v2's order; the
 * activations come from shared memory (sxq, sxd: the CTA's copy of x). Unrolled over
 * the V4_C / 4 slots a lane has in a chunk, so their loads overlap. */
static __device__ __forceinline__ float v4_chunk(const gemv_job &job, int64_t t, int j, const uint8_t *st, int lane,
                                                 const int8_t *sxq, const float2 *sxd, float acc)
{
    v4_row r;
    v4_pick(job, t, r);
    int64_t kb = r.v.k >> 8, ib = r.row * kb + (int64_t)j * V4_C, s0 = (int64_t)j * V4_C * 8;
    int n = 8 * (int)min((int64_t)V4_C, kb - (int64_t)j * V4_C);
    if (r.kind == WK_Q4K) {
        typedef slot_k45<false> W;
        float dv[V4_C / 4];
#pragma unroll
        for (int u = 0; u < V4_C / 4; u++) {
            int s = lane + 32 * u;
            if (s < n) {
                const uint8_t *blk = st + (s >> 3) * 144;
                W::raw raw;
                raw.hdr = *(const uint4 *)blk;
                raw.q = *(const uint4 *)(blk + 16 + 16 * (s & 7));
                W w;
                w.decode(raw, s0 + s);
                struct xslot xs;
                W::xload<false>(sxq, sxd, s0 + s, &xs);
                dv[u] = w.dot(xs);
            }
        }
#pragma unroll
        for (int u = 0; u < V4_C / 4; u++)
            if (lane + 32 * u < n)
                acc += dv[u];
        return acc;
    }
    int64_t nbt = kb * r.v.n;
    const uint8_t *dw = st + V4_C * 208 + (int)((nbt * 208 + ib * 2) & 15);
    float dv[V4_C / 4];
#pragma unroll
    for (int u = 0; u < V4_C / 4; u++) {
        int s = lane + 32 * u;
        if (s < n) {
            int b = s >> 3, tt = s & 7, h = tt >> 2, g = (tt >> 1) & 1, f = tt & 1;
            slot_q6_k::raw raw;
            raw.ql = *(const uint4 *)(st + b * 128 + 16 * tt);
            raw.qh = *(const uint4 *)(st + V4_C * 128 + b * 64 + 32 * h + 16 * f);
            const int8_t *sc = (const int8_t *)(st + V4_C * 192 + b * 16) + 8 * h + 2 * g + f;
            raw.sl = sc[0];
            raw.sh = sc[4];
            raw.d = *(const uint16_t *)(dw + 2 * b);
            slot_q6_k w;
            w.decode(raw, s0 + s);
            struct xslot xs;
            slot_q6_k::xload<false>(sxq, sxd, s0 + s, &xs);
            dv[u] = w.dot(xs);
        }
    }
#pragma unroll
    for (int u = 0; u < V4_C / 4; u++)
        if (lane + 32 * u < n)
            acc += dv[u];
    return acc;
}

/* Warp gw of W handles tasks gw, gw + W, ...; item i of its list = chunk i % nch of its
 * (i / nch)-th row, staged in ring slot i % D (its (i / D)-th use: mbarrier phase parity).
 * Shared memory: the warps' barriers (D each, 16-byte padded), x's int8 copy (k bytes),
 * its scales (k / 4 bytes), then one ring of D stages per warp. */
template <int D>
static __global__ void __launch_bounds__(V4_MAX_WARPS * 32, 1)
gemv4_kernel(const gemv_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, int stage_bytes)
{
    extern __shared__ __align__(16) uint8_t v4_smem[];
    int lane = threadIdx.x & 31, nw = blockDim.x >> 5, warp = threadIdx.x >> 5;
    int64_t gw = (int64_t)blockIdx.x * nw + warp, W = (int64_t)gridDim.x * nw;
    int64_t k = job.p[0].v.k;
    size_t bar_bytes = ((size_t)nw * D * 8 + 15) & ~(size_t)15;
    uint64_t *bars = (uint64_t *)v4_smem + warp * D;
    int8_t *sxq = (int8_t *)(v4_smem + bar_bytes);
    float2 *sxd = (float2 *)(v4_smem + bar_bytes + k);
    uint8_t *ring = v4_smem + bar_bytes + k + k / 4 + (size_t)warp * D * stage_bytes;
    int nch = (int)(((k >> 8) + V4_C - 1) / V4_C);
    int64_t rows = gw < job.n_tasks ? (job.n_tasks - gw + W - 1) / W : 0;
    int n_items = (int)rows * nch;
    cuda_pdl_trigger();
    if (lane == 0) {
        for (int i = 0; i < D; i++)
            bar_init(&bars[i], 1);
        bar_init_fence();
        for (int i = 0; i < D - 1 && i < n_items; i++)
            v4_issue(job, gw + (int64_t)(i / nch) * W, i % nch, ring + i * stage_bytes, &bars[i]);
    }
    cuda_pdl_wait();   /* x (and y's readers) belong to the previous kernels */
    for (int64_t i = threadIdx.x; i < k / 16; i += blockDim.x)
        ((int4 *)sxq)[i] = __ldg((const int4 *)xq + i);
    for (int64_t i = threadIdx.x; i < k / 64; i += blockDim.x)
        ((int4 *)sxd)[i] = __ldg((const int4 *)xd + i);
    __syncthreads();   /* also publishes the barriers' initialisation to the warp's lanes */
    float acc = 0.0f;
    int64_t t = gw;
    int j = 0;
    for (int it = 0; it < n_items; it++) {
        int nx = it + D - 1;
        if (lane == 0 && nx < n_items)
            v4_issue(job, gw + (int64_t)(nx / nch) * W, nx % nch, ring + (nx % D) * stage_bytes, &bars[nx % D]);
        bar_wait(&bars[it % D], (unsigned)(it / D) & 1);
        acc = v4_chunk(job, t, j, ring + (it % D) * stage_bytes, lane, sxq, sxd, acc);
        if (++j == nch) {
            for (int o = 16; o > 0; o >>= 1)
                acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (lane == 0) {
                v4_row r;
                v4_pick(job, t, r);
                r.y[r.row] = acc;
            }
            acc = 0.0f, j = 0, t += W;
        }
        __syncwarp();   /* every lane is done with slot it % D before lane 0 refills it */
    }
}

template <int D>
static void launch4(struct cuda_ctx *c, const gemv_job &job, const int8_t *xq, const float2 *xd, unsigned grid,
                    int nw, int stage, size_t smem)
{
    static size_t smem_set;   /* opt-in above 48 KB, once per instantiation and size */
    if (smem > smem_set) {
        if (CUDA_TRY(c, cudaFuncSetAttribute(gemv4_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem)))
            return;
        smem_set = smem;
    }
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = cuda_launch_cfg(c, dim3(grid), dim3(32 * nw), smem, attr);
    CUDA_TRY(c, cudaLaunchKernelEx(&cfg, gemv4_kernel<D>, job, xq, xd, stage));
}

bool cuda_gemv4(struct cuda_ctx *c, const gemv_job &job, const int8_t *xq, const float2 *xd)
{
    if (c->gemv_ver != 4)
        return false;
    bool q6 = false;
    for (int i = 0; i < job.n_parts; i++) {
        if (job.p[i].rw != 1 || (job.p[i].kind != WK_Q4K && job.p[i].kind != WK_Q6K))
            return false;
        q6 = q6 || job.p[i].kind == WK_Q6K;
    }
    int stage = q6 ? (V4_Q6_STAGE + 15) / 16 * 16 : V4_Q4_STAGE;
    int nw = c->v4_warps;
    int64_t k = job.p[0].v.k;
    size_t smem = (((size_t)nw * c->v4_depth * 8 + 15) & ~(size_t)15) + (size_t)k + (size_t)k / 4 +
                  (size_t)nw * c->v4_depth * stage;
    if (smem > c->smem_optin)
        return false;   /* a very long row: v3 */
    int64_t need = (job.n_tasks + nw - 1) / nw, most = (int64_t)c->n_sm * c->v4_ctas;
    unsigned grid = (unsigned)(need < most ? need : most);
    switch (c->v4_depth) {
    case 3: launch4<3>(c, job, xq, xd, grid, nw, stage, smem); break;
    case 4: launch4<4>(c, job, xq, xd, grid, nw, stage, smem); break;
    case 8: launch4<8>(c, job, xq, xd, grid, nw, stage, smem); break;
    default: launch4<6>(c, job, xq, xd, grid, nw, stage, smem); break;
    }
    return true;
}

/* true when v4 would take this job's kinds (the caller then builds it with rw = 1); the 16-row
 * tile kinds (WK_Q4K_T16, WK_Q6K_T16) are not among them: v4 copies row-major blocks, v3 takes those */
bool cuda_gemv4_kinds(struct cuda_ctx *c, int n, const int *kinds)
{
    if (c->gemv_ver != 4)
        return false;
    for (int i = 0; i < n; i++)
        if (kinds[i] != WK_Q4K && kinds[i] != WK_Q6K)
            return false;
    return true;
}
