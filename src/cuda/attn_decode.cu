/*
 * attn_decode.cu — attention over the KV cache (split-K flash decoding) and
 * kv_store.
 *
 * One CTA handles (query token t, KV head, group of up to 16 query heads of
 * that KV head, split s): every K/V tile it loads to shared memory serves all
 * query heads of the group (GQA), one warp per query head. The positions a
 * query may see, [lo, hi] (backend.h: window and DFlash block rules), are read
 * from the device array pos and divided evenly among the splits, so the
 * launch shape never depends on the position and a CUDA graph replays at any
 * step. Per split: online softmax (running max, fp32, expf); a combine kernel
 * merges the splits' (max, sum, acc). Position u lives in slot u % n_slots.
 * Prefill uses the same kernel (each query token its own CTA row); a tiled
 * tensor-core prefill kernel is future work (docs/CUDA.md).
 *
 * Two versions: v2 (attn_split2_kernel, default; see its comment for why) and v1
 * (attn_split_kernel, the first version; GLIM_CUDA_NEW=0 or GLIM_CUDA_NEW_ATTN=0,
 * and the fallback for head_dim % 8 != 0 or unaligned pointers).
 */
#include "rowops.cuh"

#include <limits.h>

#define ATTN_TILE 32          /* keys per tile: one per lane when scoring */
#define ATTN_MAX_HEADS 16     /* query heads (warps) per CTA */
#define ATTN_MAX_DIM 256

struct attn_params {
    float         *out;
    const float   *q;
    const void    *k_cache, *v_cache;
    uint32_t       kv_type;
    int64_t        n_slots;
    int            n_tokens;
    const int32_t *pos;
    int            n_head, n_head_kv, head_dim, group, heads_per_cta;
    int            window, block, n_splits;
    float          scale;
    float         *part;      /* [n_splits][n_tokens][n_head][head_dim + 2]: acc, then m, l */
};

static __device__ __forceinline__ float kv_get(const void *p, uint32_t type, int64_t i)
{
    if (type == GLIM_TYPE_F32)
        return ((const float *)p)[i];
    if (type == GLIM_TYPE_F16)
        return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

/* grid: x = split, y = kv head * head groups, z = token.  block: 32 * heads_per_cta */
static __global__ void attn_split_kernel(attn_params a)
{
    extern __shared__ float smem[];
    const int D = a.head_dim;
    float *ks = smem;                          /* [ATTN_TILE][D + 1] */
    float *vs = ks + ATTN_TILE * (D + 1);      /* [ATTN_TILE][D] */
    float *qs = vs + ATTN_TILE * D;            /* [heads_per_cta][D] */

    int n_groups = (a.group + a.heads_per_cta - 1) / a.heads_per_cta;
    int kvh = blockIdx.y / n_groups, hg = blockIdx.y % n_groups;
    int t = blockIdx.z, s = blockIdx.x;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int hl = hg * a.heads_per_cta + warp;                 /* head within the KV group */
    bool head_ok = hl < a.group;
    int h = kvh * a.group + (head_ok ? hl : 0);
    int kv_dim = a.n_head_kv * D;

    /* visible positions [lo, hi], as cpu_ref.c attn_range: causal (with window), or the
     * DFlash block rule: rows of the block see up to its end and the window before b0 */
    int p = a.pos[t], hi = p, lo = a.window > 0 ? max(0, p - a.window + 1) : 0;
    if (a.block > 0 && t >= a.n_tokens - a.block) {
        int b0 = a.pos[a.n_tokens - a.block];
        hi = a.pos[a.n_tokens - 1];
        lo = a.window > 0 ? max(0, b0 - a.window) : 0;
    }
    int n_keys = hi - lo + 1;
    int chunk = (n_keys + a.n_splits - 1) / a.n_splits;
    int k_begin = lo + s * chunk, k_end = min(hi + 1, k_begin + chunk);   /* [k_begin, k_end) */

    const float *qrow = a.q + ((int64_t)t * a.n_head + h) * D;
    for (int d = lane; d < D; d += 32)
        qs[warp * D + d] = qrow[d];

    float m = -INFINITY, l = 0.0f, acc[ATTN_MAX_DIM / 32];
#pragma unroll
    for (int i = 0; i < ATTN_MAX_DIM / 32; i++)
        acc[i] = 0.0f;

    for (int u0 = k_begin; u0 < k_end; u0 += ATTN_TILE) {
        int n_tile = min(ATTN_TILE, k_end - u0);
        __syncthreads();                                   /* previous tile fully used */
        for (int e = threadIdx.x; e < ATTN_TILE * D; e += blockDim.x) {
            int j = e / D, d = e % D;
            float kv = 0.0f, vv = 0.0f;
            if (j < n_tile) {
                int64_t slot = (int64_t)(u0 + j) % a.n_slots;
                int64_t off = slot * kv_dim + (int64_t)kvh * D + d;
                kv = kv_get(a.k_cache, a.kv_type, off);
                vv = kv_get(a.v_cache, a.kv_type, off);
            }
            ks[j * (D + 1) + d] = kv;
            vs[j * D + d] = vv;
        }
        __syncthreads();
        float sc = -INFINITY;
        if (lane < n_tile) {
            const float *kr = ks + lane * (D + 1), *qr = qs + warp * D;
            float dot = 0.0f;
            for (int d = 0; d < D; d++)
                dot = fmaf(qr[d], kr[d], dot);
            sc = dot * a.scale;
        }
        float mt = sc;
        for (int o = 16; o > 0; o >>= 1)
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        float m_new = fmaxf(m, mt);                        /* finite: the tile has >= 1 key */
        float alpha = expf(m - m_new);                     /* 0 when m = -inf */
        float pk = lane < n_tile ? expf(sc - m_new) : 0.0f;
        float ps = pk;
        for (int o = 16; o > 0; o >>= 1)
            ps += __shfl_xor_sync(0xffffffffu, ps, o);
        l = l * alpha + ps;
        m = m_new;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_DIM / 32; i++)
            acc[i] *= alpha;
        for (int j = 0; j < n_tile; j++) {
            float pj = __shfl_sync(0xffffffffu, pk, j);
#pragma unroll
            for (int i = 0; i < ATTN_MAX_DIM / 32; i++) {
                int d = lane + 32 * i;
                if (d < D)
                    acc[i] = fmaf(pj, vs[j * D + d], acc[i]);
            }
        }
    }
    if (!head_ok)
        return;
    if (a.n_splits == 1) {
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *o = a.out + ((int64_t)t * a.n_head + h) * D;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_DIM / 32; i++)
            if (lane + 32 * i < D)
                o[lane + 32 * i] = acc[i] * inv;
        return;
    }
    float *pp = a.part + (((int64_t)s * a.n_tokens + t) * a.n_head + h) * (D + 2);
#pragma unroll
    for (int i = 0; i < ATTN_MAX_DIM / 32; i++)
        if (lane + 32 * i < D)
            pp[lane + 32 * i] = acc[i];
    if (lane == 0) {
        pp[D] = m;
        pp[D + 1] = l;
    }
}

/* one warp per (token, head): out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s */
static __global__ void attn_combine_kernel(attn_params a)
{
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;   /* t * n_head + h */
    int lane = threadIdx.x & 31, D = a.head_dim;
    if (row >= (int64_t)a.n_tokens * a.n_head)
        return;
    int64_t stride = (int64_t)a.n_tokens * a.n_head * (D + 2);
    const float *p0 = a.part + row * (D + 2);
    float M = -INFINITY;
    for (int s = 0; s < a.n_splits; s++)
        M = fmaxf(M, p0[s * stride + D]);
    float L = 0.0f;
    for (int s = 0; s < a.n_splits; s++) {
        float ms = p0[s * stride + D];
        if (ms != -INFINITY)
            L += expf(ms - M) * p0[s * stride + D + 1];
    }
    float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = lane; d < D; d += 32) {
        float v = 0.0f;
        for (int s = 0; s < a.n_splits; s++) {
            float ms = p0[s * stride + D];
            if (ms != -INFINITY)
                v = fmaf(expf(ms - M), p0[s * stride + d], v);
        }
        a.out[row * D + d] = v * inv;
    }
}

/* ---- v2: split-K decode that scales with the context (2026-12-02) -------------------
 *
 * Why: v1 sized the split count from n_slots/512 (at most 64) and gave each CTA an
 * even share of the keys, so at 4096 context a decode step ran 2 KV heads x 4..9
 * splits = 8..18 CTAs on 132 SMs, each walking 455..512 keys serially with scalar
 * 2-byte loads and a 64-bit modulo per element: ~130 us per layer, ~7 ms per token.
 * v2 launches up to 4 CTAs per SM worth of splits (at most ATTN2_MAX_SPLITS), lets
 * each split take at least ATTN2_MIN_CHUNK keys (a multiple of the tile), and
 * computes on device how many splits the current range needs: splits past it exit
 * at once, so the launch shape still depends only on n_slots/window/block/n_tokens.
 * K/V tiles arrive as 16-byte loads (8 elements), are widened to f32 in shared
 * memory, and are read back as float4 (K rows padded to D + 4: conflict-free).
 * Partials use a row stride of D + 4 (acc, then m, l). When the range needs one
 * split, that split writes out directly and the combine leaves the row alone.
 * Requirements (else v1 runs): head_dim % 8 == 0; q, out, k_cache, v_cache 16-byte
 * aligned. GLIM_CUDA_NEW=0 (or backend_cuda_set_new(be, false)) selects v1. */

#define ATTN2_MIN_CHUNK 64    /* keys per split at least (multiple of ATTN_TILE) */
#define ATTN2_MAX_SPLITS 256  /* also the combine kernel's shared weight array */
#define ATTN2_COMBINE_WARPS 4

/* visible range [lo, hi] of query t (as attn_split_kernel / cpu_ref.c attn_range) and
 * the split size this range uses: n_eff splits of chunk keys (the last may be short) */
static __device__ __forceinline__ void attn2_plan(const attn_params &a, int t, int *lo_out, int *hi_out,
                                                  int *chunk_out, int *n_eff_out)
{
    int p = a.pos[t], hi = p, lo = a.window > 0 ? max(0, p - a.window + 1) : 0;
    if (a.block > 0 && t >= a.n_tokens - a.block) {
        int b0 = a.pos[a.n_tokens - a.block];
        hi = a.pos[a.n_tokens - 1];
        lo = a.window > 0 ? max(0, b0 - a.window) : 0;
    }
    int n_keys = hi - lo + 1;                                   /* >= 1 */
    int chunk = (n_keys + a.n_splits - 1) / a.n_splits;
    chunk = (chunk + ATTN_TILE - 1) / ATTN_TILE * ATTN_TILE;
    chunk = max(chunk, ATTN2_MIN_CHUNK);
    *lo_out = lo;
    *hi_out = hi;
    *chunk_out = chunk;
    *n_eff_out = (n_keys + chunk - 1) / chunk;                  /* <= n_splits */
}

/* 8 consecutive cache elements starting at element i (i % 8 == 0) -> f32 */
static __device__ __forceinline__ void kv_get8(const void *p, uint32_t type, int64_t i, float4 *lo4,
                                               float4 *hi4)
{
    if (type == GLIM_TYPE_F32) {
        const float4 *f = (const float4 *)((const float *)p + i);
        *lo4 = f[0];
        *hi4 = f[1];
        return;
    }
    uint4 r = *(const uint4 *)((const uint16_t *)p + i);
    float2 a, b, c, d;
    if (type == GLIM_TYPE_F16) {
        a = __half22float2(*(const __half2 *)&r.x);
        b = __half22float2(*(const __half2 *)&r.y);
        c = __half22float2(*(const __half2 *)&r.z);
        d = __half22float2(*(const __half2 *)&r.w);
    } else {
        a = __bfloat1622float2(*(const __nv_bfloat162 *)&r.x);
        b = __bfloat1622float2(*(const __nv_bfloat162 *)&r.y);
        c = __bfloat1622float2(*(const __nv_bfloat162 *)&r.z);
        d = __bfloat1622float2(*(const __nv_bfloat162 *)&r.w);
    }
    *lo4 = make_float4(a.x, a.y, b.x, b.y);
    *hi4 = make_float4(c.x, c.y, d.x, d.y);
}

/* grid: x = split, y = kv head * head groups, z = token.  block: 32 * heads_per_cta.
 * smem: ks[ATTN_TILE][D + 4], vs[ATTN_TILE][D], qs[heads_per_cta][D] (floats). */
static __global__ void __launch_bounds__(32 * ATTN_MAX_HEADS) attn_split2_kernel(attn_params a)
{
    extern __shared__ float4 smem4[];
    const int D = a.head_dim, KS = D + 4;
    float *ks = (float *)smem4;
    float *vs = ks + ATTN_TILE * KS;
    float *qs = vs + ATTN_TILE * D;

    int t = blockIdx.z, s = blockIdx.x;
    int lo, hi, chunk, n_eff;
    attn2_plan(a, t, &lo, &hi, &chunk, &n_eff);
    if (s >= n_eff)
        return;                                            /* whole CTA: no barrier reached */
    int k_begin = lo + s * chunk, k_end = min(hi + 1, k_begin + chunk);

    int n_groups = (a.group + a.heads_per_cta - 1) / a.heads_per_cta;
    int kvh = blockIdx.y / n_groups, hg = blockIdx.y % n_groups;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int hl = hg * a.heads_per_cta + warp;
    bool head_ok = hl < a.group;
    int h = kvh * a.group + (head_ok ? hl : 0);
    int64_t kv_dim = (int64_t)a.n_head_kv * D;
    unsigned ns = (unsigned)min(a.n_slots, (int64_t)0x80000000);   /* positions are < 2^31 */

    const float4 *qrow = (const float4 *)(a.q + ((int64_t)t * a.n_head + h) * D);
    for (int d4 = lane; d4 < D / 4; d4 += 32)
        ((float4 *)(qs + warp * D))[d4] = qrow[d4];

    float m = -INFINITY, l = 0.0f;
    float4 acc[ATTN_MAX_DIM / 128];
#pragma unroll
    for (int i = 0; i < ATTN_MAX_DIM / 128; i++)
        acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    const int cpr = D / 8;                                 /* 8-element pieces per row */
    for (int u0 = k_begin; u0 < k_end; u0 += ATTN_TILE) {
        int n_tile = min(ATTN_TILE, k_end - u0);
        __syncthreads();                                   /* previous tile fully used */
        for (int e = threadIdx.x; e < ATTN_TILE * cpr; e += blockDim.x) {
            int j = e / cpr, c8 = (e - j * cpr) * 8;
            float4 k0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), k1 = k0, v0 = k0, v1 = k0;
            if (j < n_tile) {
                int64_t slot = (unsigned)(u0 + j) % ns;
                int64_t off = slot * kv_dim + (int64_t)kvh * D + c8;
                kv_get8(a.k_cache, a.kv_type, off, &k0, &k1);
                kv_get8(a.v_cache, a.kv_type, off, &v0, &v1);
            }
            *(float4 *)(ks + j * KS + c8) = k0;
            *(float4 *)(ks + j * KS + c8 + 4) = k1;
            *(float4 *)(vs + j * D + c8) = v0;
            *(float4 *)(vs + j * D + c8 + 4) = v1;
        }
        __syncthreads();
        float sc = -INFINITY;
        if (lane < n_tile) {
            const float4 *kr = (const float4 *)(ks + lane * KS), *qr = (const float4 *)(qs + warp * D);
            float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
            for (int i = 0; i < D / 4; i++) {
                float4 kk = kr[i], qq = qr[i];
                d0 = fmaf(qq.x, kk.x, d0);
                d1 = fmaf(qq.y, kk.y, d1);
                d2 = fmaf(qq.z, kk.z, d2);
                d3 = fmaf(qq.w, kk.w, d3);
            }
            sc = ((d0 + d1) + (d2 + d3)) * a.scale;
        }
        float mt = sc;
        for (int o = 16; o > 0; o >>= 1)
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        float m_new = fmaxf(m, mt);                        /* finite: the tile has >= 1 key */
        float alpha = expf(m - m_new);                     /* 0 when m = -inf */
        float pk = lane < n_tile ? expf(sc - m_new) : 0.0f;
        float ps = pk;
        for (int o = 16; o > 0; o >>= 1)
            ps += __shfl_xor_sync(0xffffffffu, ps, o);
        l = l * alpha + ps;
        m = m_new;
#pragma unroll
        for (int i = 0; i < ATTN_MAX_DIM / 128; i++) {
            acc[i].x *= alpha;
            acc[i].y *= alpha;
            acc[i].z *= alpha;
            acc[i].w *= alpha;
        }
        for (int j = 0; j < n_tile; j++) {
            float pj = __shfl_sync(0xffffffffu, pk, j);
            const float4 *vr = (const float4 *)(vs + j * D);
#pragma unroll
            for (int i = 0; i < ATTN_MAX_DIM / 128; i++) {
                int d4 = lane + 32 * i;                    /* float4 index: dims 4*d4 .. 4*d4+3 */
                if (4 * d4 < D) {
                    float4 vv = vr[d4];
                    acc[i].x = fmaf(pj, vv.x, acc[i].x);
                    acc[i].y = fmaf(pj, vv.y, acc[i].y);
                    acc[i].z = fmaf(pj, vv.z, acc[i].z);
                    acc[i].w = fmaf(pj, vv.w, acc[i].w);
                }
            }
        }
    }
    if (!head_ok)
        return;
    float *dst;
    float scale_out = 1.0f;
    if (n_eff == 1) {                                      /* the only split: final output */
        dst = a.out + ((int64_t)t * a.n_head + h) * D;
        scale_out = l > 0.0f ? 1.0f / l : 0.0f;
    } else {
        dst = a.part + (((int64_t)s * a.n_tokens + t) * a.n_head + h) * (D + 4);
        if (lane == 0) {
            dst[D] = m;
            dst[D + 1] = l;
        }
    }
#pragma unroll
    for (int i = 0; i < ATTN_MAX_DIM / 128; i++) {
        int d4 = lane + 32 * i;
        if (4 * d4 < D)
            ((float4 *)dst)[d4] = make_float4(acc[i].x * scale_out, acc[i].y * scale_out, acc[i].z * scale_out,
                                              acc[i].w * scale_out);
    }
}

/* one warp per (token, head), over the n_eff splits its range used (all non-empty):
 * out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s; rows with n_eff == 1 are done */
static __global__ void attn_combine2_kernel(attn_params a)
{
    __shared__ float wsh[ATTN2_COMBINE_WARPS][ATTN2_MAX_SPLITS];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, D = a.head_dim;
    int64_t row = (int64_t)blockIdx.x * ATTN2_COMBINE_WARPS + warp;    /* t * n_head + h */
    if (row >= (int64_t)a.n_tokens * a.n_head)
        return;
    int t = (int)(row / a.n_head);
    int lo, hi, chunk, n_eff;
    attn2_plan(a, t, &lo, &hi, &chunk, &n_eff);
    if (n_eff <= 1)
        return;
    int64_t stride = (int64_t)a.n_tokens * a.n_head * (D + 4);
    const float *p0 = a.part + row * (D + 4);
    float M = -INFINITY;
    for (int s = lane; s < n_eff; s += 32)
        M = fmaxf(M, p0[s * stride + D]);
    for (int o = 16; o > 0; o >>= 1)
        M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float L = 0.0f;
    for (int s = lane; s < n_eff; s += 32) {
        float w = expf(p0[s * stride + D] - M);
        wsh[warp][s] = w;
        L = fmaf(w, p0[s * stride + D + 1], L);
    }
    for (int o = 16; o > 0; o >>= 1)
        L += __shfl_xor_sync(0xffffffffu, L, o);
    __syncwarp();
    float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d4 = lane; 4 * d4 < D; d4 += 32) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int s = 0; s < n_eff; s++) {
            float w = wsh[warp][s];
            float4 x = ((const float4 *)(p0 + s * stride))[d4];
            v.x = fmaf(w, x.x, v.x);
            v.y = fmaf(w, x.y, v.y);
            v.z = fmaf(w, x.z, v.z);
            v.w = fmaf(w, x.w, v.w);
        }
        ((float4 *)(a.out + row * D))[d4] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
}

/* v2 launch: false when the shapes/alignment need v1 (nothing launched) */
static bool attn2_launch(struct cuda_ctx *c, const struct be_attn_args *x, attn_params a)
{
    uintptr_t align = (uintptr_t)x->q | (uintptr_t)x->out | (uintptr_t)x->k_cache | (uintptr_t)x->v_cache;
    if (x->head_dim % 8 != 0 || align % 16 != 0)
        return false;
    int n_groups = (a.group + a.heads_per_cta - 1) / a.heads_per_cta;
    int64_t max_keys = x->n_slots;
    if (x->window > 0)
        max_keys = GLIM_MIN(max_keys, (int64_t)x->window + GLIM_MAX(x->block, 0));
    int64_t ctas = (int64_t)x->n_tokens * x->n_head_kv * n_groups;
    int64_t cap = GLIM_MIN((int64_t)ATTN2_MAX_SPLITS, GLIM_MAX((int64_t)1, 4 * (int64_t)c->n_sm / ctas));
    int64_t n_splits = GLIM_MAX((int64_t)1, GLIM_MIN((max_keys + ATTN2_MIN_CHUNK - 1) / ATTN2_MIN_CHUNK, cap));
    a.n_splits = (int)n_splits;
    a.part = NULL;
    if (n_splits > 1) {
        size_t nbytes = (size_t)n_splits * x->n_tokens * x->n_head * (x->head_dim + 4) * sizeof(float);
        if (!cuda_buf_reserve(c, &c->attn_part, nbytes))
            return true;                                    /* failure recorded */
        a.part = (float *)c->attn_part.p;
    }
    size_t smem = (size_t)(ATTN_TILE * (2 * x->head_dim + 4) + a.heads_per_cta * x->head_dim) * sizeof(float);
    if (smem > 48 * 1024 &&
        CUDA_TRY(c, cudaFuncSetAttribute(attn_split2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return true;
    dim3 grid((unsigned)n_splits, (unsigned)(x->n_head_kv * n_groups), (unsigned)x->n_tokens);
    attn_split2_kernel<<<grid, 32 * a.heads_per_cta, smem, c->stream>>>(a);
    if (CUDA_LAUNCHED(c, "attention v2"))
        return true;
    if (n_splits > 1) {
        int64_t rows = (int64_t)x->n_tokens * x->n_head;
        attn_combine2_kernel<<<cuda_blocks(rows, ATTN2_COMBINE_WARPS), 32 * ATTN2_COMBINE_WARPS, 0, c->stream>>>(a);
        CUDA_LAUNCHED(c, "attention v2 combine");
    }
    return true;
}

/* ---- v3 (experimental, off unless GLIM_CUDA_ATTN_TC=1): tensor-core prefill -----------
 *
 * For n_tokens >= ATTN3_MIN_TOKENS with an F16 cache, head_dim % 16 == 0 (<= 128) and at
 * most 16 query heads per KV head. CTA = (KV head, ATTN3_WARPS consecutive query tokens),
 * one warp per token; the 16 rows of an m16n8k16 MMA are the query heads of that token's
 * GQA group (rows >= group are zero), so the causal/window mask is per key only. K/V tiles
 * of 32 keys are copied raw (f16) into shared memory once per CTA and serve all its warps.
 * Accuracy: K and V are exact in f16; q and p are split into f16 hi + lo (x = hi + lo to
 * ~2^-22), two MMAs each, fp32 accumulation, so the error stays near the f32 kernels'.
 * Fragment layouts (PTX ISA, mma.m16n8k16 .f16): g = lane / 4, c = lane % 4;
 * A: a0 = (g, 2c..2c+1), a1 = (g+8, 2c..), a2 = (g, 2c+8..), a3 = (g+8, 2c+8..);
 * B: b0 = (k 2c..2c+1, n g), b1 = (k 2c+8.., n g); C: (g, 2c..2c+1), (g+8, 2c..2c+1). */

#define ATTN3_WARPS 4
#define ATTN3_MIN_TOKENS 128
#define ATTN3_MAX_DIM 128

static __device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* (x0, x1) -> f16 hi pair and f16 lo pair (x = hi + lo) */
static __device__ __forceinline__ void split2(float x0, float x1, uint32_t *hi, uint32_t *lo)
{
    __half2 h = __floats2half2_rn(x0, x1);
    float2 hf = __half22float2(h);
    __half2 l = __floats2half2_rn(x0 - hf.x, x1 - hf.y);
    *hi = *(uint32_t *)&h;
    *lo = *(uint32_t *)&l;
}

/* visible range of query t (the rule of attn2_plan) */
static __device__ __forceinline__ void attn3_range(const attn_params &a, int t, int *lo, int *hi)
{
    int p = a.pos[t];
    *hi = p;
    *lo = a.window > 0 ? max(0, p - a.window + 1) : 0;
    if (a.block > 0 && t >= a.n_tokens - a.block) {
        int b0 = a.pos[a.n_tokens - a.block];
        *hi = a.pos[a.n_tokens - 1];
        *lo = a.window > 0 ? max(0, b0 - a.window) : 0;
    }
}

/* grid: x = token group (ATTN3_WARPS tokens), y = KV head.  block: 32 * ATTN3_WARPS.
 * smem: ks[ATTN_TILE][D + 8], vs[ATTN_TILE][D + 8] (halves) */
static __global__ void __launch_bounds__(32 * ATTN3_WARPS) attn_tc_kernel(attn_params a)
{
    extern __shared__ uint4 smem_tc[];
    const int D = a.head_dim, S = D + 8;                   /* row stride in halves */
    __half *ks = (__half *)smem_tc, *vs = ks + ATTN_TILE * S;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    int kvh = blockIdx.y, t0 = blockIdx.x * ATTN3_WARPS, t = t0 + warp;
    bool tok_ok = t < a.n_tokens;

    /* the CTA walks the union of its tokens' ranges; each warp masks to its own */
    int lo_u = INT_MAX, hi_u = -1, lo = 0, hi = -1;
    for (int w = 0; w < ATTN3_WARPS && t0 + w < a.n_tokens; w++) {
        int l, h;
        attn3_range(a, t0 + w, &l, &h);
        lo_u = min(lo_u, l), hi_u = max(hi_u, h);
        if (w == warp)
            lo = l, hi = h;
    }

    /* q of rows g and g+8 (heads kvh*group + row), split into f16 hi/lo A fragments */
    uint32_t qh[ATTN3_MAX_DIM / 16][4], ql[ATTN3_MAX_DIM / 16][4];
    const float *q0 = a.q + ((int64_t)(tok_ok ? t : 0) * a.n_head + (int64_t)kvh * a.group) * D;
    bool r0_ok = tok_ok && g < a.group, r1_ok = tok_ok && g + 8 < a.group;
#pragma unroll
    for (int kk = 0; kk < ATTN3_MAX_DIM / 16; kk++) {
        if (kk * 16 >= D)
            break;
#pragma unroll
        for (int half = 0; half < 2; half++) {             /* cols 2c.. and 2c+8.. */
            int col = kk * 16 + 8 * half + 2 * c;
            float2 x0 = r0_ok ? *(const float2 *)(q0 + (int64_t)g * D + col) : make_float2(0.0f, 0.0f);
            float2 x1 = r1_ok ? *(const float2 *)(q0 + (int64_t)(g + 8) * D + col) : make_float2(0.0f, 0.0f);
            split2(x0.x, x0.y, &qh[kk][2 * half], &ql[kk][2 * half]);
            split2(x1.x, x1.y, &qh[kk][2 * half + 1], &ql[kk][2 * half + 1]);
        }
    }

    float o[ATTN3_MAX_DIM / 8][4];
#pragma unroll
    for (int i = 0; i < ATTN3_MAX_DIM / 8; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;   /* rows g, g+8 */
    unsigned ns = (unsigned)min(a.n_slots, (int64_t)0x80000000);
    int64_t kv_dim = (int64_t)a.n_head_kv * D;
    const int cpr = D / 8;                                 /* 16-byte pieces per row */

    for (int u0 = lo_u; u0 <= hi_u; u0 += ATTN_TILE) {
        int n_tile = min(ATTN_TILE, hi_u + 1 - u0);
        __syncthreads();
        for (int e = threadIdx.x; e < ATTN_TILE * cpr; e += blockDim.x) {
            int j = e / cpr, c8 = (e - j * cpr) * 8;
            uint4 kr = make_uint4(0, 0, 0, 0), vr = kr;
            if (j < n_tile) {
                int64_t off = (int64_t)((unsigned)(u0 + j) % ns) * kv_dim + (int64_t)kvh * D + c8;
                kr = *(const uint4 *)((const __half *)a.k_cache + off);
                vr = *(const uint4 *)((const __half *)a.v_cache + off);
            }
            *(uint4 *)(ks + j * S + c8) = kr;
            *(uint4 *)(vs + j * S + c8) = vr;
        }
        __syncthreads();
        if (!tok_ok || u0 > hi || u0 + ATTN_TILE <= lo)
            continue;                                      /* nothing visible: warp-uniform */

        /* scores s[nt]: keys u0 + 8nt + 2c + {0,1}, rows g / g+8 */
        float s[4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
            const __half *kr = ks + (nt * 8 + g) * S + 2 * c;
#pragma unroll
            for (int kk = 0; kk < ATTN3_MAX_DIM / 16; kk++) {
                if (kk * 16 >= D)
                    break;
                uint32_t b0 = *(const uint32_t *)(kr + kk * 16), b1 = *(const uint32_t *)(kr + kk * 16 + 8);
                mma16816(s[nt], qh[kk], b0, b1);
                mma16816(s[nt], ql[kk], b0, b1);
            }
        }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                int u = u0 + nt * 8 + 2 * c + i;
                bool ok = u >= lo && u <= hi;              /* u <= hi <= hi_u: inside the tile */
                s[nt][i] = ok ? s[nt][i] * a.scale : -INFINITY;
                s[nt][2 + i] = ok ? s[nt][2 + i] * a.scale : -INFINITY;
                mx0 = fmaxf(mx0, s[nt][i]);
                mx1 = fmaxf(mx1, s[nt][2 + i]);
            }
        for (int x = 1; x <= 2; x <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
        }
        float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        float rf0 = mn0 == -INFINITY ? 0.0f : mn0, rf1 = mn1 == -INFINITY ? 0.0f : mn1;
        float al0 = expf(m0 - rf0), al1 = expf(m1 - rf1);  /* 0 when m = -inf */
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                s[nt][i] = expf(s[nt][i] - rf0);           /* -inf -> 0 */
                s[nt][2 + i] = expf(s[nt][2 + i] - rf1);
                ps0 += s[nt][i];
                ps1 += s[nt][2 + i];
            }
        for (int x = 1; x <= 2; x <<= 1) {
            ps0 += __shfl_xor_sync(0xffffffffu, ps0, x);
            ps1 += __shfl_xor_sync(0xffffffffu, ps1, x);
        }
        l0 = l0 * al0 + ps0, l1 = l1 * al1 + ps1;
        m0 = mn0, m1 = mn1;
#pragma unroll
        for (int i = 0; i < ATTN3_MAX_DIM / 8; i++)
            o[i][0] *= al0, o[i][1] *= al0, o[i][2] *= al1, o[i][3] *= al1;

        /* o += P V: k-step j = keys 16j..16j+15; the C fragments of s[2j], s[2j+1] are the A fragment */
#pragma unroll
        for (int j = 0; j < 2; j++) {
            uint32_t ph[4], pl[4];
            split2(s[2 * j][0], s[2 * j][1], &ph[0], &pl[0]);
            split2(s[2 * j][2], s[2 * j][3], &ph[1], &pl[1]);
            split2(s[2 * j + 1][0], s[2 * j + 1][1], &ph[2], &pl[2]);
            split2(s[2 * j + 1][2], s[2 * j + 1][3], &ph[3], &pl[3]);
            const unsigned short *v0 = (const unsigned short *)(vs + (16 * j + 2 * c) * S);
#pragma unroll
            for (int dt = 0; dt < ATTN3_MAX_DIM / 8; dt++) {
                if (dt * 8 >= D)
                    break;
                int d = dt * 8 + g;
                uint32_t b0 = (uint32_t)v0[d] | ((uint32_t)v0[S + d] << 16);
                uint32_t b1 = (uint32_t)v0[8 * S + d] | ((uint32_t)v0[9 * S + d] << 16);
                mma16816(o[dt], ph, b0, b1);
                mma16816(o[dt], pl, b0, b1);
            }
        }
    }
    if (!tok_ok)
        return;
    float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    float *out0 = a.out + ((int64_t)t * a.n_head + (int64_t)kvh * a.group) * D;
#pragma unroll
    for (int dt = 0; dt < ATTN3_MAX_DIM / 8; dt++) {
        if (dt * 8 >= D)
            break;
        int col = dt * 8 + 2 * c;
        if (r0_ok)
            *(float2 *)(out0 + (int64_t)g * D + col) = make_float2(o[dt][0] * inv0, o[dt][1] * inv0);
        if (r1_ok)
            *(float2 *)(out0 + (int64_t)(g + 8) * D + col) = make_float2(o[dt][2] * inv1, o[dt][3] * inv1);
    }
}

/* v3 launch: false when the shapes need v2/v1 (nothing launched) */
static bool attn_tc_launch(struct cuda_ctx *c, const struct be_attn_args *x, attn_params a)
{
    uintptr_t align = (uintptr_t)x->q | (uintptr_t)x->out | (uintptr_t)x->k_cache | (uintptr_t)x->v_cache;
    if (x->n_tokens < ATTN3_MIN_TOKENS || x->kv_type != GLIM_TYPE_F16 || x->head_dim % 16 != 0 ||
        x->head_dim > ATTN3_MAX_DIM || a.group > 16 || align % 16 != 0)
        return false;
    size_t smem = (size_t)2 * ATTN_TILE * (x->head_dim + 8) * sizeof(__half);
    dim3 grid((unsigned)((x->n_tokens + ATTN3_WARPS - 1) / ATTN3_WARPS), (unsigned)x->n_head_kv);
    attn_tc_kernel<<<grid, 32 * ATTN3_WARPS, smem, c->stream>>>(a);
    CUDA_LAUNCHED(c, "attention tc");
    return true;
}

void cuda_attention(struct cuda_ctx *c, const struct be_attn_args *x)
{
    if (x->n_tokens <= 0)
        return;
    if (x->head_dim > ATTN_MAX_DIM || x->n_head_kv <= 0 || x->n_head % x->n_head_kv != 0) {
        cuda_check(c, cudaErrorInvalidValue, "attention: head_dim > 256 or n_head % n_head_kv != 0", __FILE__,
                   __LINE__);
        return;
    }
    attn_params a;
    a.out = x->out;
    a.q = x->q;
    a.k_cache = x->k_cache;
    a.v_cache = x->v_cache;
    a.kv_type = x->kv_type;
    a.n_slots = x->n_slots;
    a.n_tokens = x->n_tokens;
    a.pos = x->pos;
    a.n_head = x->n_head;
    a.n_head_kv = x->n_head_kv;
    a.head_dim = x->head_dim;
    a.group = x->n_head / x->n_head_kv;
    a.heads_per_cta = GLIM_MIN(a.group, ATTN_MAX_HEADS);
    a.window = x->window;
    a.block = x->block;
    a.scale = x->scale;
    if (c->attn_tc && attn_tc_launch(c, x, a))
        return;
    if (c->attn_v2 && attn2_launch(c, x, a))
        return;
    int n_groups = (a.group + a.heads_per_cta - 1) / a.heads_per_cta;

    /* splits from an upper bound of the keys a query can see (never from the position) */
    int64_t max_keys = x->n_slots;
    if (x->window > 0)
        max_keys = GLIM_MIN(max_keys, (int64_t)x->window + GLIM_MAX(x->block, 0));
    int64_t n_splits = GLIM_MIN((max_keys + 511) / 512, (int64_t)64);
    int64_t ctas = (int64_t)x->n_tokens * x->n_head_kv * n_groups;
    n_splits = GLIM_MAX((int64_t)1, GLIM_MIN(n_splits, 2048 / ctas));
    a.n_splits = (int)n_splits;
    a.part = NULL;
    if (n_splits > 1) {
        size_t nbytes = (size_t)n_splits * x->n_tokens * x->n_head * (x->head_dim + 2) * sizeof(float);
        if (!cuda_buf_reserve(c, &c->attn_part, nbytes))
            return;
        a.part = (float *)c->attn_part.p;
    }
    size_t smem = (size_t)(ATTN_TILE * (2 * x->head_dim + 1) + a.heads_per_cta * x->head_dim) * sizeof(float);
    if (smem > 48 * 1024 &&
        CUDA_TRY(c, cudaFuncSetAttribute(attn_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
        return;
    dim3 grid((unsigned)n_splits, (unsigned)(x->n_head_kv * n_groups), (unsigned)x->n_tokens);
    attn_split_kernel<<<grid, 32 * a.heads_per_cta, smem, c->stream>>>(a);
    if (CUDA_LAUNCHED(c, "attention"))
        return;
    if (n_splits > 1) {
        int64_t rows = (int64_t)x->n_tokens * x->n_head;
        attn_combine_kernel<<<cuda_blocks(rows, 4), 128, 0, c->stream>>>(a);
        CUDA_LAUNCHED(c, "attention combine");
    }
}

/* ---- kv_store -------------------------------------------------------------------- */

static __global__ void kv_store_kernel(void *kc, void *vc, uint32_t type, int64_t n_slots, const float *k,
                                       const float *v, int n_tokens, const int32_t *pos, int kv_dim)
{
    int64_t total = (int64_t)n_tokens * kv_dim;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = e / kv_dim, i = e % kv_dim;
        int64_t o = ((int64_t)pos[t] % n_slots) * kv_dim + i;
        kv_put(kc, type, o, k[e]);
        kv_put(vc, type, o, v[e]);
    }
}

void cuda_kv_store(struct cuda_ctx *c, void *k_cache, void *v_cache, uint32_t kv_type, int64_t n_slots,
                   const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim)
{
    if (n_tokens <= 0 || kv_dim <= 0)
        return;
    if (!kv_type_ok(kv_type)) {
        cuda_check(c, cudaErrorInvalidValue, "kv_store: kv_type must be F32/F16/BF16", __FILE__, __LINE__);
        return;
    }
    int64_t total = (int64_t)n_tokens * kv_dim;
    kv_store_kernel<<<cuda_blocks(total, 256), 256, 0, c->stream>>>(k_cache, v_cache, kv_type, n_slots, k, v,
                                                                     n_tokens, pos, kv_dim);
    CUDA_LAUNCHED(c, "kv_store");
}
