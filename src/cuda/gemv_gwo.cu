/*
 * gemv_gwo.cu — one decode token's output gate and gated Wo in one launch (opt-in,
 * GLIM_CUDA_GWO=1; backend_cuda.cu defers the gate part of the q/k/v/gate job to here).
 *
 * Why: in the default chain the gate's GEMV (15 MB on the 30B) streams beside the q/k/v job, so
 * the short attention starts only after 33 MB, and Wo's 15 MB start to move only once the
 * attention has ended. Here the q/k/v job streams alone, and this kernel, launched behind the
 * attention, streams the gate while the attention runs (its input, h's int8 copy, was made two
 * kernels earlier), then Wo's rows, each warp's first loads before it waits:
 *   1. gate rows (v3's row loop without a wait): g = Wg h, RW rows a task;
 *   2. the warp that completes a 32-row block of g waits for the attention (the PDL wait) and
 *      quantizes a * sigmoid(g) of that block into Wo's int8 input (quantize_x_kernel's
 *      expressions), then counts the block;
 *   3. Wo rows (v3's row loop) once every block is counted.
 * A warp's gate task comes before its Wo tasks (one grid-stride walk over both), so a warp that
 * waits for the count holds no gate row, and the grid is one the GPU holds at once (4 CTAs an SM)
 * so every gate row has a warp running it: no deadlock. The next kernel is let in only after a
 * warp has seen every block (before that its CTA could take a place one of ours still needs).
 * The same rows, slots and sums as the gate's GEMV, the quantizer and Wo's GEMV of the default
 * path: the same bits (test_gwo).
 */
#include "gemv3_rows.cuh"
#include "rowops.cuh"

#include <string.h>

#define GWO_WARPS 4   /* warps per CTA, as the persistent v3 */

struct gwo_params {
    wview8        wg, wo;        /* the gate [G][K] and Wo [N][G], Q4_K row-major */
    const int8_t *hq;            /* h's int8 copy (K45), the gate's input */
    const float2 *hd;
    const float  *a;             /* the attention's rows [G] */
    float        *g, *y;         /* the gate's output [G], Wo's [N] */
    int8_t       *aq;            /* Wo's input: a * sigmoid(g) (K45) */
    float2       *ad;
    unsigned     *cnt;           /* [b < G / 32] rows done in block b, [G / 32] blocks quantized, [G / 32 + 1] CTAs ended */
    int64_t       n_gtask, n_tasks;   /* gate tasks first, then Wo's (RW rows each) */
};

static __device__ __forceinline__ unsigned gwo_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* before Wo's first activation load: the attention has ended and every block of Wo's input is there;
 * then the next kernel may be let in */
struct gwo_wait {
    const unsigned *done;
    unsigned        blocks;
    __device__ __forceinline__ void operator()() const
    {
        cuda_pdl_wait();
        if ((threadIdx.x & 31) == 0)
            while (gwo_ld_acquire(done) < blocks)
                __nanosleep(32);
        __syncwarp();
        cuda_pdl_trigger();
    }
};

struct gwo_no_wait {
    __device__ __forceinline__ void operator()() const {}
};

/* WO: launched behind the short attention (h's copy is there: the attention started after the q/k/v
 * GEMV, which waited for the norm), the gate then Wo; else the gate only, after a PDL wait */
template <int RW, bool WO>
static __global__ void __launch_bounds__(GWO_WARPS * 32, 4) gwo_kernel(const gwo_params p)
{
    typedef slot_k45<false> k4;
    const int lane = threadIdx.x & 31;
    const unsigned nb = (unsigned)(p.wg.n / 32);
    const int64_t stride = (int64_t)gridDim.x * GWO_WARPS;
    int64_t task = (int64_t)blockIdx.x * GWO_WARPS + (threadIdx.x >> 5);
#pragma unroll 1
    for (; task < p.n_gtask; task += stride) {
        int64_t row0 = task * RW;
        if (WO)
            gemv3_rows<k4, 1, RW, k4::U / RW, true>(p.wg, row0, p.hq, p.hd, p.g, 1, lane, gwo_no_wait());
        else
            gemv3_rows<k4, 1, RW, k4::U / RW>(p.wg, row0, p.hq, p.hd, p.g, 1, lane);
        if (!WO)
            continue;
        unsigned rows = (unsigned)min((int64_t)RW, p.wg.n - row0), old = 0;
        __threadfence();   /* (lane 0 stored the rows) before the count */
        if (lane == 0)
            old = atomicAdd(&p.cnt[row0 / 32], rows);
        old = __shfl_sync(0xffffffffu, old, 0);
        if (old + rows == 32) {   /* this block's last rows: its share of Wo's input */
            int64_t b = row0 / 32, n = b * 32 + lane;
            cuda_pdl_wait();      /* the attention's rows */
            __threadfence();      /* the other warps' rows of g, counted after their fences */
            float v = glu_apply<1 + BE_GLU_SIGMOID>(__ldcg(p.a + n), __ldcg(p.g + n));
            quant_block32(v, lane, n, XL_K45, p.aq, p.ad + b);
            if (lane == 0)
                p.cnt[b] = 0u;    /* no more arrivals this launch: ready for the next */
            __threadfence();
            __syncwarp();
            if (lane == 0)
                atomicAdd(&p.cnt[nb], 1u);
        }
    }
    if (WO) {
#pragma unroll 1
        for (; task < p.n_tasks; task += stride)
            gemv3_rows<k4, 1, RW, k4::U / RW, false>(p.wo, (task - p.n_gtask) * RW, p.aq, p.ad, p.y, 1, lane,
                                                      gwo_wait{p.cnt + nb, nb});
        /* the last CTA to end puts the block count back (every count of this launch is in by then) */
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            if (atomicAdd(&p.cnt[nb + 1], 1u) == gridDim.x - 1)
                p.cnt[nb] = 0u, p.cnt[nb + 1] = 0u;
        }
    }
}

/* the shapes this kernel takes: Q4_K row-major gate and Wo, one token, whole blocks */
bool cuda_gwo_ok(const struct cuda_ctx *c, const struct be_weight *wg, const struct be_weight *wo)
{
    return c->gwo && !c->exact && c->cc_major >= 7 && wg->dev_type == GLIM_TYPE_Q4_K && wg->k % 256 == 0 &&
           wg->n % 256 == 0 && (!wo || (wo->dev_type == GLIM_TYPE_Q4_K && wo->k == wg->n));
}

/* g = Wg h (h's int8 copy at hq, hd), then with wo (launched right behind the short attention): y =
 * Wo (a * sigmoid(g)). Without wo, the gate only, after a PDL wait. false: nothing launched. */
bool cuda_gwo(struct cuda_ctx *c, const struct be_weight *wg, const int8_t *hq, const float2 *hd, float *g,
              const struct be_weight *wo, const float *a, float *y)
{
    if (!cuda_gwo_ok(c, wg, wo))
        return false;
    int64_t G = wg->n, nb = G / 32;
    if (!cuda_buf_counts(c, &c->gwo_cnt, (size_t)(nb + 2) * sizeof(unsigned)) ||
        !cuda_buf_reserve(c, &c->att_q, (size_t)G + (size_t)nb * sizeof(float2)))
        return false;
    const int RW = 2;
    gwo_params p;
    memset(&p, 0, sizeof p);
    p.wg = (wview8){(const uint8_t *)wg->dev, wg->k, wg->n, NULL};
    p.hq = hq, p.hd = hd, p.a = a, p.g = g, p.y = y;
    p.aq = (int8_t *)c->att_q.p;
    p.ad = (float2 *)((uint8_t *)c->att_q.p + G);
    p.cnt = (unsigned *)c->gwo_cnt.p;
    p.n_gtask = (G + RW - 1) / RW;
    p.n_tasks = p.n_gtask;
    if (wo) {
        p.wo = (wview8){(const uint8_t *)wo->dev, wo->k, wo->n, NULL};
        p.n_tasks += (wo->n + RW - 1) / RW;
    }
    int64_t need = (p.n_tasks + GWO_WARPS - 1) / GWO_WARPS, most = (int64_t)c->gwo_ctas * c->n_sm;
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = cuda_launch_cfg(c, dim3((unsigned)(need < most ? need : most)), dim3(GWO_WARPS * 32), 0,
                                             attr);
    CUDA_TRY(c, cudaLaunchKernelEx(&cfg, wo ? gwo_kernel<2, true> : gwo_kernel<2, false>, p));
    if (CUDA_LAUNCHED(c, "gate and Wo"))
        return false;
    c->gwo_used++;
    return true;
}

/* CTAs an SM that gwo_kernel keeps resident (0: none: the backend does not defer the gate) */
int cuda_gwo_ctas(void)
{
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gwo_kernel<2, true>, GWO_WARPS * 32, 0) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n >= 4 ? 4 : n;
}
