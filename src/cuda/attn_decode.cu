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
 *
 * Three versions, tried in this order:
 *   v4 (attn_mma_kernel, default): tensor cores, the GQA group as the MMA rows;
 *      decode, verify and prefill (see its comment). F16/BF16 caches, head_dim
 *      64..128 in steps of 16, <= 16 heads per KV head. GLIM_CUDA_ATTN_DEC_TC=0 / GLIM_CUDA_ATTN_TC=0
 *      turn it off for n_tokens <= 16 / > 16.
 *   v2 (attn_split2_kernel): CUDA cores, one warp per query head, prefill one CTA
 *      row per query token (see its comment for why it replaced v1).
 *   v1 (attn_split_kernel, the first version; GLIM_CUDA_NEW=0 or GLIM_CUDA_NEW_ATTN=0,
 *      and the fallback for head_dim % 8 != 0 or unaligned pointers).
 */
#include "attn_prep.cuh"
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
    int            tpc, tile, min_chunk;   /* split plan (v2, v4): tokens sharing one, key rounding */
    int            kvh_x;     /* v4: the grid is (kv head, split, token group) instead of (group, split, kv head) */
    float          scale;
    float         *part;      /* [n_splits][n_tokens][n_head][head_dim + 2]: acc, then m, l */
    prep_params    pp;        /* attn_mma_kernel<.., PREP = true>: attn_prep's work, done by the CTAs */
    const float   *gate;      /* v4 combine (one token, D = 128): out * sigmoid(gate) quantized into gq, gd */
    int8_t        *gq;        /* (Wo's input, as quantize_x makes it; GLIM_CUDA_GATE_FOLD) */
    float2        *gd;
};

/* visible positions [lo, hi] of query t, as cpu_ref.c attn_range: causal (with window), or
 * the DFlash block rule: rows of the block see up to its end and the window before b0 */
static __device__ __forceinline__ void attn_range(const attn_params &a, int t, int *lo, int *hi)
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

/* split plan of query t: its token group (a.tpc consecutive tokens that share each CTA;
 * v2: 1) walks the union [lo, hi] of the group's visible ranges in n_eff splits of chunk keys
 * (a multiple of a.tile, at least a.min_chunk; the last may be short). The kernel and the
 * combine both call this, so they agree on n_eff for every row. */
static __device__ __forceinline__ void attn2_plan(const attn_params &a, int t, int *lo_out, int *hi_out,
                                                  int *chunk_out, int *n_eff_out)
{
    int t0 = t - t % a.tpc, t1 = min(a.n_tokens, t0 + a.tpc);
    int lo = INT_MAX, hi = -1;
    for (int u = t0; u < t1; u++) {
        int l, h;
        attn_range(a, u, &l, &h);
        lo = min(lo, l);
        hi = max(hi, h);
    }
    int n_keys = hi - lo + 1;                                   /* >= 1 */
    int chunk = (n_keys + a.n_splits - 1) / a.n_splits;
    chunk = (chunk + a.tile - 1) / a.tile * a.tile;
    chunk = max(chunk, a.min_chunk);
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
    a.tpc = 1, a.tile = ATTN_TILE, a.min_chunk = ATTN2_MIN_CHUNK;
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

/* ---- v4: tensor-core split-K attention (2026-12-02): decode, verify and prefill -------------
 *
 * Why: v2 widens K/V to f32 and every head warp re-reads the tile from shared memory with
 * CUDA-core FMAs; GQA 16:1 needs 8 FMA per KV byte, so a decode step at depth 32768 ran
 * ~115 us per global layer (~290 GB/s) and a 512-token prefill chunk ran that once per
 * query token. v4 puts the GQA group on the tensor cores: the 16 query heads of one KV head
 * (one token) are the M = 16 rows of mma.m16n8k16, so S = Q K^T and O += P V are MMAs over
 * raw f16/bf16 K/V tiles and the mask is per key only (rows >= group are zero).
 *
 * CTA = (token group of a.tpc tokens, split, KV head), 4 warps. The split plan is v2's
 * (attn2_plan) over the union of the group's ranges, with chunks a multiple of the 64-key
 * stage, so the launch shape depends only on n_slots/window/block/n_tokens (graph-safe); the
 * partials use v2's format (attn_combine4_kernel merges them). The splits fill one wave of
 * ATTN4_CTAS_PER_SM CTAs per SM. K/V stages of 64 keys stream in with 16-byte cp.async
 * (zero-filled past the split), ATTN4_STAGES deep, so ~2 stages per CTA are always in flight;
 * ldmatrix (.trans for V) reads B fragments from rows padded to D + 8 elements (conflict-free).
 * Warp w serves token w % tpc and the 16-key sub-tiles j with j % (4 / tpc) == w / tpc, each
 * with its own online softmax (base 2, fp32); the warps of one token merge through shared
 * memory at the end.
 * tpc = 1 (one token: 4 warps share each stage), 2, or 4 (n_tokens >= 3: one warp per token,
 * each stage read from L2 once per 4 tokens: verify and prefill).
 *
 * Accuracy (f32 test bound 1e-5): K/V are exact in the MMA type. q and p are split into
 * hi + lo, one MMA each, fp32 accumulation: f16 leaves 2^-22 of x, bf16 2^-16 (rel. L2 3e-6 at
 * most in a C model of the test's shapes; a third term would not fit in 255 registers).
 * p is computed as 2^14 x the softmax weight (l carries the same factor, so it cancels), which
 * keeps weights down to 2^-24 in f16 normal range. q is split unscaled (|q| < 65504 for f16).
 * The MMA rounds its fp32 sums toward zero, so P V of each 16-key sub-tile starts from zero and
 * is added to O on the CUDA cores (an MMA-resident O would drift ~2^-24 per sub-tile: 1e-3 over
 * the 131072 keys one prefill warp walks).
 *
 * Requirements (else v2): F16/BF16 cache, head_dim 64..128 in steps of 16, <= 16 query heads per KV head,
 * q/out/caches 16-byte aligned. GLIM_CUDA_ATTN_DEC_TC=0 turns it off for n_tokens <= 16
 * (decode, verify), GLIM_CUDA_ATTN_TC=0 for longer batches (prefill). */

#define ATTN4_WARPS 4
#define ATTN4_KT 64               /* keys per pipeline stage: 4 sub-tiles of 16 */
#define ATTN4_STAGES 3
#define ATTN4_CTAS_PER_SM 2       /* smem 2 x 104 KB at D = 128, <= 255 registers */
#define ATTN4_DEC_TOKENS 16       /* n_tokens <= this: the decode switch, else the prefill one */
#define ATTN4_P_SHIFT 14.0f       /* p = 2^(s - m + 14) <= 16384 */
#define ATTN4_COMBINE_WARPS 8
#define ATTN4_MAX_DIM 128         /* q hi/lo and O live in registers: 128 needs ~200 of 255 */

static __device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
}

static __device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> static __device__ __forceinline__ void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i */
static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const void *p)
{
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* MMA element types. pack: (x0, x1) rounded to a pair (x0 in the low half), leaving the
 * rounding residual in x0, x1. mma: d = a b + c (d may be c). Fragment layouts (PTX ISA, m16n8k16, g = lane / 4,
 * c = lane % 4): A a0 = (row g, k 2c..2c+1), a1 = (g+8, 2c..), a2 = (g, 2c+8..),
 * a3 = (g+8, 2c+8..); B b0 = (k 2c..2c+1, n g), b1 = (k 2c+8.., n g);
 * C (g, 2c..2c+1), (g+8, 2c..2c+1). */
struct attn4_f16 {
    typedef __half elem;
    static __device__ __forceinline__ uint32_t pack(float *x0, float *x1)
    {
        __half2 h = __floats2half2_rn(*x0, *x1);
        float2 f = __half22float2(h);
        *x0 -= f.x, *x1 -= f.y;
        return *(const uint32_t *)&h;
    }
    static __device__ __forceinline__ void mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                               const float c[4])
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%10, %11, %12, %13};"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
                       "f"(c[2]), "f"(c[3]));
    }
};

struct attn4_bf16 {
    typedef __nv_bfloat16 elem;
    static __device__ __forceinline__ uint32_t pack(float *x0, float *x1)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(*x0, *x1);
        float2 f = __bfloat1622float2(h);
        *x0 -= f.x, *x1 -= f.y;
        return *(const uint32_t *)&h;
    }
    static __device__ __forceinline__ void mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                               const float c[4])
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%10, %11, %12, %13};"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
                       "f"(c[2]), "f"(c[3]));
    }
};

/* A-fragment register r of both terms of (x0, x1): out[i][r] = term i */
template <class Tr, int R>
static __device__ __forceinline__ void attn4_split(float x0, float x1, uint32_t (*out)[R], int r)
{
#pragma unroll
    for (int i = 0; i < 2; i++)
        out[i][r] = Tr::pack(&x0, &x1);
}

/* cp.async of the K and V rows of keys u0 .. u0 + n - 1 (n <= ns: distinct slots) into one
 * stage ([ATTN4_KT][D + 8] K, then V); rows n.. are zero-filled, nothing read */
template <int D, typename E>
static __device__ __forceinline__ void attn4_load(E *st, const E *kg, const E *vg, int u0, int n, unsigned ns,
                                                  int64_t kv_dim)
{
    const int CPR = D / 8, S = D + 8;                      /* 16-byte pieces per row; row stride */
    static_assert(ATTN4_KT * CPR % (32 * ATTN4_WARPS) == 0, "whole passes");
    unsigned s0 = (unsigned)u0 % ns;
#pragma unroll
    for (int i = 0; i < ATTN4_KT * CPR / (32 * ATTN4_WARPS); i++) {
        int e = threadIdx.x + i * 32 * ATTN4_WARPS, j = e / CPR, c8 = (e % CPR) * 8;
        unsigned slot = s0 + (unsigned)j;
        slot = slot >= ns ? slot - ns : slot;
        bool ok = j < n;
        int64_t off = ok ? (int64_t)slot * kv_dim + c8 : 0;
        cp_async16(st + j * S + c8, kg + off, ok ? 16 : 0);
        cp_async16(st + (ATTN4_KT + j) * S + c8, vg + off, ok ? 16 : 0);
    }
}

/* attn_prep's work for one decode token inside attention (attn_mma_kernel<.., true>): each CTA
 * prepares its KV group's query heads into shared memory (rows: the last pipeline stage, free
 * until the main loop; every split the same bits, none writes q back), and the split holding the
 * token's position prepares the key head and stores its K and V rows in the cache before it
 * loads that key. Returns rows (the q rows to read). */
template <int D>
static __device__ __forceinline__ const float *attn4_prep(const attn_params &a, float *rows, int kvh, int k_begin,
                                                          int k_end, int warp, int lane)
{
    const prep_params &p = a.pp;                            /* rows: group query rows, then the key row */
    float2 *cs = (float2 *)(rows + (a.group + 1) * D);
    int32_t pos = a.pos[0];
    bool mine_k = k_begin <= pos && pos < k_end;
    if (p.rope)
        for (int i = threadIdx.x; i < p.n_rot / 2; i += blockDim.x) {
            float c, sn;
            prep_cos_sin(p, 0, pos, i, &c, &sn);
            cs[i] = make_float2(c, sn);
        }
    __syncthreads();
    int n_rows = a.group + (mine_k ? 1 : 0);
    prep_group_warp(p, kvh, a.group, n_rows, rows, p.rope ? cs : NULL, warp, ATTN4_WARPS, lane);
    if (mine_k && warp == a.group % ATTN4_WARPS) {          /* the warp that prepared the key row */
        int64_t kv_dim = (int64_t)p.n_head_kv * D, at0 = (int64_t)pos % p.n_slots * kv_dim + (int64_t)kvh * D;
        const float *vr = p.v + (int64_t)kvh * D, *kr = rows + (int64_t)a.group * D;
        for (int i = lane; i < D; i += 32) {
            kv_put(p.k_cache, p.kv_type, at0 + i, kr[i]);
            kv_put(p.v_cache, p.kv_type, at0 + i, __ldcg(vr + i));
        }
    }
    __syncthreads();   /* the rows, and the cache row for this CTA's own key loads */
    return rows;
}

/* grid: x = token group, y = split, z = KV head.  block: 32 * ATTN4_WARPS.
 * smem: ATTN4_STAGES x (K, V)[ATTN4_KT][D + 8] elements; reused by the final merge. */
template <class Tr, int D, bool PREP = false>
static __global__ void __launch_bounds__(32 * ATTN4_WARPS, ATTN4_CTAS_PER_SM) attn_mma_kernel(attn_params a)
{
    typedef typename Tr::elem E;
    const int S = D + 8, DK = D / 16, STAGE = 2 * ATTN4_KT * S;
    extern __shared__ uint4 smem_mma[];
    E *kv_s = (E *)smem_mma;

    int tg = a.kvh_x ? blockIdx.z : blockIdx.x, s = blockIdx.y, kvh = a.kvh_x ? blockIdx.x : blockIdx.z;
    int lo_u, hi_u, chunk, n_eff;
    attn2_plan(a, tg * a.tpc, &lo_u, &hi_u, &chunk, &n_eff);   /* the positions: uploaded before the step */
    cuda_pdl_enter();
    if (s >= n_eff)
        return;                                            /* whole CTA: no barrier reached */
    int k_begin = lo_u + s * chunk, k_end = min(hi_u + 1, k_begin + chunk);
    int n_tiles = (k_end - k_begin + ATTN4_KT - 1) / ATTN4_KT;
    unsigned ns = (unsigned)min(a.n_slots, (int64_t)0x80000000);   /* positions are < 2^31 */
    int64_t kv_dim = (int64_t)a.n_head_kv * D;
    const E *kg = (const E *)a.k_cache + (int64_t)kvh * D, *vg = (const E *)a.v_cache + (int64_t)kvh * D;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    int nsub = ATTN4_WARPS / a.tpc, ksub = warp / a.tpc, t = tg * a.tpc + warp % a.tpc;
    bool tok_ok = t < a.n_tokens;
    int vlo = 0, vhi = -1;                                 /* keys of this split the token sees */
    if (tok_ok) {
        attn_range(a, t, &vlo, &vhi);
        vlo = max(vlo, k_begin);
        vhi = min(vhi, k_end - 1);
        vhi = vlo <= vhi ? vhi : -1;                       /* none: every sub-tile is skipped */
    }

    /* q rows g, g + 8 (heads kvh * group + row) as the A fragments of every term */
    uint32_t qf[2][DK][4];
    const float *q0 = a.q + ((int64_t)(tok_ok ? t : 0) * a.n_head + (int64_t)kvh * a.group) * D;
    if (PREP)
        q0 = attn4_prep<D>(a, (float *)(kv_s + (ATTN4_STAGES - 1) * STAGE), kvh, k_begin, k_end, warp, lane);
    /* The first ATTN4_STAGES - 1 key tiles, one commit group each (with PREP after the CTA's own
     * key row is stored). Loading old key tiles ahead of the PDL wait measured no gain
     * (2026-12-03, docs/PERFORMANCE.md). */
#pragma unroll 1
    for (int loaded = 0; loaded < ATTN4_STAGES - 1; loaded++) {
        if (loaded < n_tiles)
            attn4_load<D>(kv_s + loaded * STAGE, kg, vg, k_begin + loaded * ATTN4_KT,
                          min(ATTN4_KT, k_end - k_begin - loaded * ATTN4_KT), ns, kv_dim);
        cp_async_commit();
    }
    bool r0_ok = tok_ok && g < a.group, r1_ok = tok_ok && g + 8 < a.group;
#pragma unroll
    for (int kk = 0; kk < DK; kk++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {                   /* cols 2c.. (a0, a1), 2c + 8.. (a2, a3) */
            int col = kk * 16 + 8 * hf + 2 * c;
            float2 x0 = r0_ok ? *(const float2 *)(q0 + g * D + col) : make_float2(0.0f, 0.0f);
            float2 x1 = r1_ok ? *(const float2 *)(q0 + (g + 8) * D + col) : make_float2(0.0f, 0.0f);
            uint32_t t0[2][1], t1[2][1];
            attn4_split<Tr, 1>(x0.x, x0.y, t0, 0);
            attn4_split<Tr, 1>(x1.x, x1.y, t1, 0);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                qf[i][kk][2 * hf] = t0[i][0];
                qf[i][kk][2 * hf + 1] = t1[i][0];
            }
        }

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;   /* rows g, g + 8; l: this lane's keys */
    const float sl2 = a.scale * 1.4426950408889634f;               /* scores in log2 units */
    const float zero4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    /* ldmatrix row addresses: K matrices (keys 0-7 | 8-15) x (dims 0-7 | 8-15) in the order
     * b0, b1 of keys 0-7, then of keys 8-15; V (trans) keys 0-7, 8-15 of dims 0-7, then 8-15 */
    int k_row = (lane & 7) + ((lane >> 4) << 3), k_col = ((lane >> 3) & 1) * 8;
    int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;

    for (int it = 0; it < n_tiles; it++) {   /* the loop's first barrier also ends the reads of attn4_prep's rows */
        cp_async_wait<ATTN4_STAGES - 2>();                 /* this thread's pieces of tile it */
        __syncthreads();                                   /* everyone's; tile it - 1 fully used */
        int nx = it + ATTN4_STAGES - 1;
        if (nx < n_tiles)
            attn4_load<D>(kv_s + (nx % ATTN4_STAGES) * STAGE, kg, vg, k_begin + nx * ATTN4_KT,
                          min(ATTN4_KT, k_end - k_begin - nx * ATTN4_KT), ns, kv_dim);
        cp_async_commit();                                 /* empty groups keep the count uniform */
        const E *ks = kv_s + (it % ATTN4_STAGES) * STAGE, *vs = ks + ATTN4_KT * S;
        int u0 = k_begin + it * ATTN4_KT;
        for (int j = ksub; j < ATTN4_KT / 16; j += nsub) {
            int ub = u0 + 16 * j;
            if (ub > vhi || ub + 16 <= vlo)
                continue;                                  /* nothing visible: warp-uniform */

            /* S = Q K^T for keys ub .. ub + 15: sc[term][n-tile] (independent MMA chains,
             * summed after) */
            float sc[2][2][4];
            const E *kr = ks + (16 * j + k_row) * S + k_col;
#pragma unroll
            for (int kk = 0; kk < DK; kk++) {
                uint32_t b[4];
                ldsm_x4(b, kr + kk * 16);
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    Tr::mma(sc[i][0], qf[i][kk], b[0], b[1], kk == 0 ? zero4 : sc[i][0]);
                    Tr::mma(sc[i][1], qf[i][kk], b[2], b[3], kk == 0 ? zero4 : sc[i][1]);
                }
            }
            /* mask, row max (the quad of lanes 4g..4g+3 holds a row's 16 keys). The sub-tile
             * has a visible key, so the maxima are finite and m - mn never is inf - inf. */
            float p[2][4], mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int u = ub + nt * 8 + 2 * c + (e & 1);
                    float x = sc[0][nt][e] + sc[1][nt][e];
                    p[nt][e] = u >= vlo && u <= vhi ? x * sl2 : -INFINITY;
                }
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                mx0 = fmaxf(mx0, fmaxf(p[nt][0], p[nt][1]));
                mx1 = fmaxf(mx1, fmaxf(p[nt][2], p[nt][3]));
            }
#pragma unroll
            for (int x = 1; x <= 2; x <<= 1) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
            }
            float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
            float al0 = exp2f(m0 - mn0), al1 = exp2f(m1 - mn1);   /* 0 when m = -inf */
            m0 = mn0, m1 = mn1;
            float sh0 = mn0 - ATTN4_P_SHIFT, sh1 = mn1 - ATTN4_P_SHIFT;
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                p[nt][0] = exp2f(p[nt][0] - sh0);          /* masked: 0 */
                p[nt][1] = exp2f(p[nt][1] - sh0);
                p[nt][2] = exp2f(p[nt][2] - sh1);
                p[nt][3] = exp2f(p[nt][3] - sh1);
            }
            l0 = fmaf(l0, al0, (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]));
            l1 = fmaf(l1, al1, (p[0][2] + p[0][3]) + (p[1][2] + p[1][3]));

            /* O = alpha O + P V, P V from zero (see the accuracy note). The C fragments of
             * the two n-tiles are P's A fragment (keys as k). */
            uint32_t pa[2][4];
            attn4_split<Tr, 4>(p[0][0], p[0][1], pa, 0);
            attn4_split<Tr, 4>(p[0][2], p[0][3], pa, 1);
            attn4_split<Tr, 4>(p[1][0], p[1][1], pa, 2);
            attn4_split<Tr, 4>(p[1][2], p[1][3], pa, 3);
            const E *vr = vs + (16 * j + v_row) * S + v_col;
#pragma unroll
            for (int dp = 0; dp < DK; dp++) {
                uint32_t b[4];
                ldsm_x4_trans(b, vr + dp * 16);
                float pv[2][4];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    Tr::mma(pv[0], pa[i], b[0], b[1], i == 0 ? zero4 : pv[0]);
                    Tr::mma(pv[1], pa[i], b[2], b[3], i == 0 ? zero4 : pv[1]);
                }
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float *od = o[2 * dp + h];
                    od[0] = fmaf(od[0], al0, pv[h][0]), od[1] = fmaf(od[1], al0, pv[h][1]);
                    od[2] = fmaf(od[2], al1, pv[h][2]), od[3] = fmaf(od[3], al1, pv[h][3]);
                }
            }
        }
    }
    for (int x = 1; x <= 2; x <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, x);
        l1 += __shfl_xor_sync(0xffffffffu, l1, x);
    }

    /* merge the warps of each token: per warp O [16][D + 8] f32 (conflict-free float2 rows),
     * then m[16], l[16]; the stages are free once every copy has landed */
    const int WS = 16 * (D + 8) + 32;
    float *ws = (float *)smem_mma;
    cp_async_wait<0>();
    __syncthreads();
    {
        float *ow = ws + warp * WS, *mw = ow + 16 * (D + 8);
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            *(float2 *)(ow + g * (D + 8) + 8 * i + 2 * c) = make_float2(o[i][0], o[i][1]);
            *(float2 *)(ow + (g + 8) * (D + 8) + 8 * i + 2 * c) = make_float2(o[i][2], o[i][3]);
        }
        if (c == 0) {
            mw[g] = m0, mw[g + 8] = m1;
            mw[16 + g] = l0, mw[24 + g] = l1;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < a.tpc * 16 * (D / 4); e += 32 * ATTN4_WARPS) {
        int tl = e / (16 * (D / 4)), r = e / (D / 4) % 16, d4 = e % (D / 4);
        int tt = tg * a.tpc + tl;
        if (tt >= a.n_tokens || r >= a.group)
            continue;
        float M = -INFINITY;
        for (int k = 0; k < nsub; k++)
            M = fmaxf(M, ws[(tl + k * a.tpc) * WS + 16 * (D + 8) + r]);
        float L = 0.0f;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (M != -INFINITY)                                /* else nothing visible in this split */
            for (int k = 0; k < nsub; k++) {
                const float *ow = ws + (tl + k * a.tpc) * WS, *mw = ow + 16 * (D + 8);
                float w = exp2f(mw[r] - M);
                float4 x = *(const float4 *)(ow + r * (D + 8) + 4 * d4);
                L = fmaf(w, mw[16 + r], L);
                acc.x = fmaf(w, x.x, acc.x);
                acc.y = fmaf(w, x.y, acc.y);
                acc.z = fmaf(w, x.z, acc.z);
                acc.w = fmaf(w, x.w, acc.w);
            }
        int64_t row = (int64_t)tt * a.n_head + (int64_t)kvh * a.group + r;
        if (n_eff == 1) {                                  /* the only split: final output (L > 0) */
            float inv = 1.0f / L;
            ((float4 *)(a.out + row * D))[d4] = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
        } else {                                           /* v2's partial: m in natural-log units */
            float *dst = a.part + ((int64_t)s * a.n_tokens * a.n_head + row) * (D + 4);
            ((float4 *)dst)[d4] = acc;
            if (d4 == 0) {
                dst[D] = M * 0.6931471805599453f;
                dst[D + 1] = L;
            }
        }
    }
}

/* The gated fold (one token, D = 128): gate_quant4_k45 of lane's four outputs (g: attn_gate_load's) */
static __device__ __forceinline__ float4 attn_gate_load(const attn_params &a, int64_t row, int lane)
{
    return ((const float4 *)a.gate)[row * 32 + lane];   /* float4 index in the token's n_head * 128 values */
}

static __device__ __forceinline__ void attn_gate_quant(const attn_params &a, int64_t row, float4 o, float4 g, int lane)
{
    gate_quant4_k45(o, g, row * 32 + lane, a.gq, a.gd);
}

/* one CTA per (token, head) row over the n_eff splits its group used: warp w weights the
 * splits w, w + ATTN4_COMBINE_WARPS, .. (lane = float4 column, D <= 128) and the warps meet
 * in shared memory; rows with n_eff == 1 are done. (v2's combine walks every split in one
 * warp: at depth 131072 a chain of 128 L2 round trips, a tenth of a decode step.) */
static __global__ void __launch_bounds__(32 * ATTN4_COMBINE_WARPS) attn_combine4_kernel(attn_params a)
{
    __shared__ float4 acc_s[ATTN4_COMBINE_WARPS][32];
    __shared__ float l_s[ATTN4_COMBINE_WARPS], m_s[ATTN4_COMBINE_WARPS];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, D = a.head_dim;
    int64_t row = blockIdx.x;                                   /* t * n_head + h */
    /* before the wait, what the kernels it waits for do not write: the positions (uploaded before
     * the step) and the gate (the side stream's GEMV, a full dependency of this launch) */
    int lo, hi, chunk, n_eff;
    attn2_plan(a, (int)(row / a.n_head), &lo, &hi, &chunk, &n_eff);
    float4 g = a.gate && warp == 0 ? attn_gate_load(a, row, lane) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    cuda_pdl_enter();
    if (n_eff <= 1) {                                           /* whole CTA: the split wrote the row */
        if (a.gate && warp == 0)
            attn_gate_quant(a, row, ((const float4 *)(a.out + row * D))[lane], g, lane);
        return;
    }
    int64_t stride = (int64_t)a.n_tokens * a.n_head * (D + 4);
    const float *p0 = a.part + row * (D + 4);
    bool col = 4 * lane < D;
    float L = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (n_eff <= ATTN4_COMBINE_WARPS) {
        /* a split a warp: its m, l and columns in one round trip, the max through shared memory
         * (the loop below with one pass each: the same operations, the same bits) */
        float m = -INFINITY, l = 0.0f;
        float4 x = acc;
        if (warp < n_eff) {
            const float *ps = p0 + warp * stride;
            m = ps[D], l = ps[D + 1];
            if (col)
                x = ((const float4 *)ps)[lane];
        }
        if (lane == 0)
            m_s[warp] = m;
        __syncthreads();
        float M = m_s[0];
        for (int w = 1; w < n_eff; w++)
            M = fmaxf(M, m_s[w]);
        if (warp < n_eff) {
            float w = expf(m - M);
            L = fmaf(w, l, L);
            acc.x = fmaf(w, x.x, acc.x);
            acc.y = fmaf(w, x.y, acc.y);
            acc.z = fmaf(w, x.z, acc.z);
            acc.w = fmaf(w, x.w, acc.w);
        }
    } else {
        float M = -INFINITY;
        for (int s = lane; s < n_eff; s += 32)
            M = fmaxf(M, p0[s * stride + D]);
        for (int o = 16; o > 0; o >>= 1)
            M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));  /* finite: some split holds the row's keys */
#pragma unroll 4
        for (int s = warp; s < n_eff; s += ATTN4_COMBINE_WARPS) {
            const float *ps = p0 + s * stride;
            float w = expf(ps[D] - M);                         /* m = -inf (no key of the row): 0 */
            L = fmaf(w, ps[D + 1], L);
            if (col) {
                float4 x = ((const float4 *)ps)[lane];
                acc.x = fmaf(w, x.x, acc.x);
                acc.y = fmaf(w, x.y, acc.y);
                acc.z = fmaf(w, x.z, acc.z);
                acc.w = fmaf(w, x.w, acc.w);
            }
        }
    }
    acc_s[warp][lane] = acc;
    if (lane == 0)
        l_s[warp] = L;
    __syncthreads();
    if (warp != 0 || !col)
        return;
    for (int w = 1; w < ATTN4_COMBINE_WARPS; w++) {
        float4 x = acc_s[w][lane];
        acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
        L += l_s[w];
    }
    float inv = L > 0.0f ? 1.0f / L : 0.0f;
    float4 o = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    ((float4 *)(a.out + row * D))[lane] = o;
    if (a.gate)
        attn_gate_quant(a, row, o, g, lane);
}

template <class Tr, int D> static size_t attn_mma_smem(void)
{
    size_t stages = (size_t)ATTN4_STAGES * 2 * ATTN4_KT * (D + 8) * sizeof(typename Tr::elem);
    size_t merge = (size_t)ATTN4_WARPS * (16 * (D + 8) + 32) * sizeof(float);
    return stages > merge ? stages : merge;
}

template <class Tr, int D, bool PREP = false> static bool attn_mma_run(struct cuda_ctx *c, const attn_params &a, dim3 grid)
{
    size_t smem = attn_mma_smem<Tr, D>();
    if (CUDA_TRY(c, cudaFuncSetAttribute(attn_mma_kernel<Tr, D, PREP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem)))
        return true;
    cuda_launch_dep(c, grid, dim3(32 * ATTN4_WARPS), smem, attn_mma_kernel<Tr, D, PREP>, a);
    return CUDA_LAUNCHED(c, "attention v4");
}

/* the instantiation for a.head_dim (64..ATTN4_MAX_DIM, a multiple of 16); with prep, 64 or 128 */
template <class Tr> static bool attn_mma_dispatch(struct cuda_ctx *c, const attn_params &a, dim3 grid, bool prep)
{
    if (prep)
        return a.head_dim == 64 ? attn_mma_run<Tr, 64, true>(c, a, grid) : attn_mma_run<Tr, 128, true>(c, a, grid);
    switch (a.head_dim) {
    case 64: return attn_mma_run<Tr, 64>(c, a, grid);
    case 80: return attn_mma_run<Tr, 80>(c, a, grid);
    case 96: return attn_mma_run<Tr, 96>(c, a, grid);
    case 112: return attn_mma_run<Tr, 112>(c, a, grid);
    default: return attn_mma_run<Tr, 128>(c, a, grid);
    }
}

/* Unless GLIM_CUDA_GATE_FOLD=0: with one decode token whose output gate is on the side stream
 * (cuda_matmul_side: one value per output), the combine also makes Wo's gated int8 input, which
 * matmul_glu then takes (quantize_x) instead of launching the quantizer. Fills a's gate fields. */
static bool attn_gate_plan(struct cuda_ctx *c, const struct be_attn_args *x, attn_params *a)
{
    int64_t k = (int64_t)x->n_head * x->head_dim;
    if (!c->gate_fold || !c->side_pending || !c->side_y || x->n_tokens != 1 || x->head_dim != 128 ||
        c->side_n != k || c->exact || ((uintptr_t)c->side_y & 15) || !cuda_attn_gate_buf(c, x, &a->gq, &a->gd))
        return false;
    a->gate = c->side_y;
    return true;
}

bool cuda_attn_gate_buf(struct cuda_ctx *c, const struct be_attn_args *x, int8_t **gq, float2 **gd)
{
    int64_t k = (int64_t)x->n_head * x->head_dim;
    if (!cuda_buf_reserve(c, &c->att_q, (size_t)k + (size_t)(k / 32) * sizeof(float2)))
        return false;
    *gq = (int8_t *)c->att_q.p;
    *gd = (float2 *)((uint8_t *)c->att_q.p + k);
    return true;
}

/* v4 launch: false when the shapes need v2/v1 (nothing launched). prep (a.pp set): the kernel
 * runs attn_prep's work too (attn4_prep; the caller checked cuda_attention_prep's conditions) */
static bool attn_mma_launch(struct cuda_ctx *c, const struct be_attn_args *x, attn_params a, bool prep = false)
{
    uintptr_t align = (uintptr_t)x->q | (uintptr_t)x->out | (uintptr_t)x->k_cache | (uintptr_t)x->v_cache;
    bool bf16 = x->kv_type == GLIM_TYPE_BF16;
    if ((x->kv_type != GLIM_TYPE_F16 && !bf16) || x->head_dim % 16 != 0 || x->head_dim < 64 ||
        x->head_dim > ATTN4_MAX_DIM || a.group > 16 ||
        align % 16 != 0)
        return false;
    a.tpc = x->n_tokens >= 3 ? 4 : x->n_tokens;
    a.tile = ATTN4_KT, a.min_chunk = ATTN4_KT;
    int64_t n_groups = (x->n_tokens + a.tpc - 1) / a.tpc;
    int64_t max_keys = x->n_slots;                          /* bound of the union of a group's ranges */
    if (x->window > 0)
        max_keys = GLIM_MIN(max_keys, (int64_t)x->window + GLIM_MAX(x->block, 0) + a.tpc - 1);
    int64_t ctas = n_groups * x->n_head_kv;
    int64_t fill = GLIM_MAX((int64_t)1, ATTN4_CTAS_PER_SM * (int64_t)c->n_sm / ctas);   /* one wave */
    int64_t cap = GLIM_MIN((int64_t)ATTN2_MAX_SPLITS, fill);
    int64_t n_splits = GLIM_MAX((int64_t)1, GLIM_MIN((max_keys + ATTN4_KT - 1) / ATTN4_KT, cap));
    a.n_splits = (int)n_splits;
    a.part = NULL;
    if (n_splits > 1) {
        size_t nbytes = (size_t)n_splits * x->n_tokens * x->n_head * (x->head_dim + 4) * sizeof(float);
        if (!cuda_buf_reserve(c, &c->attn_part, nbytes))
            return true;                                    /* failure recorded */
        a.part = (float *)c->attn_part.p;
    }
    /* GLIM_CUDA_ATTN_GRID=1 (bench knob): the KV heads of a split next to each other in launch
     * order, so the CTAs that read the two halves of the same cache rows (a row holds every KV
     * head's D values) run side by side instead of a grid apart; same work per CTA, same bits */
    static int grid_env = -1;
    a.kvh_x = cuda_env_knob("GLIM_CUDA_ATTN_GRID", &grid_env) == 1;
    dim3 grid = a.kvh_x ? dim3((unsigned)x->n_head_kv, (unsigned)n_splits, (unsigned)n_groups)
                        : dim3((unsigned)n_groups, (unsigned)n_splits, (unsigned)x->n_head_kv);
    bool failed = bf16 ? attn_mma_dispatch<attn4_bf16>(c, a, grid, prep) : attn_mma_dispatch<attn4_f16>(c, a, grid, prep);
    bool fold = !failed && attn_gate_plan(c, x, &a);
    if (failed || (n_splits == 1 && !fold))
        return true;
    if (fold)
        cuda_side_join(c);   /* the combine reads the gate the side stream makes */
    cuda_launch_dep(c, dim3((unsigned)((int64_t)x->n_tokens * x->n_head)), dim3(32 * ATTN4_COMBINE_WARPS), 0,
                    attn_combine4_kernel, a);
    if (!CUDA_LAUNCHED(c, "attention v4 combine") && fold)
        c->att_x = x->out, c->att_g = a.gate, c->att_k = (int64_t)x->n_head * x->head_dim;
    return true;
}

static attn_params attn_fill(const struct be_attn_args *x)
{
    attn_params a;
    memset(&a, 0, sizeof a);
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
    return a;
}

/* attn_prep(p) then attention(x) as one v4 launch (attn4_prep): one decode token, v4's shapes
 * with head_dim 64 or 128, query heads that need prep, and p preparing x's q into x's caches.
 * False: not these shapes (nothing launched; the caller runs the two ops). */
bool cuda_attention_prep(struct cuda_ctx *c, const struct be_attn_prep_args *p, const struct be_attn_args *x)
{
    if (x->n_head_kv <= 0 || x->n_head % x->n_head_kv != 0)
        return false;
    attn_params a = attn_fill(x);
    if (!c->attn_dec_tc || (c->dbg_skip & (CUDA_SKIP_ATTN | CUDA_SKIP_PREP)) || x->n_tokens != 1 || p->n_tokens != 1 ||
        x->block != 0 || (x->head_dim != 64 && x->head_dim != 128) || !cuda_prep_params(p, &a.pp) ||
        a.pp.n_qb != x->n_head || p->q != x->q || p->k_cache != x->k_cache || p->v_cache != x->v_cache ||
        p->kv_type != x->kv_type || p->n_slots != x->n_slots || p->pos != x->pos || p->n_head != x->n_head ||
        p->n_head_kv != x->n_head_kv || p->head_dim != x->head_dim || a.group + 1 > ATTN4_WARPS * PREP_ROWS_MAX)
        return false;
    return attn_mma_launch(c, x, a, true);
}

void cuda_attention(struct cuda_ctx *c, const struct be_attn_args *x)
{
    if (x->n_tokens <= 0 || (c->dbg_skip & CUDA_SKIP_ATTN))
        return;
    if (x->head_dim > ATTN_MAX_DIM || x->n_head_kv <= 0 || x->n_head % x->n_head_kv != 0) {
        cuda_check(c, cudaErrorInvalidValue, "attention: head_dim > 256 or n_head % n_head_kv != 0", __FILE__,
                   __LINE__);
        return;
    }
    attn_params a = attn_fill(x);
    bool dec = x->n_tokens <= ATTN4_DEC_TOKENS;
    if ((dec ? c->attn_dec_tc : c->attn_tc) && attn_mma_launch(c, x, a))
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
