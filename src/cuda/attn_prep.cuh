/*
 * attn_prep.cuh — private to src/cuda: attn_prep's work for one (token, head) done by one
 * warp: rmsnorm of the head (q or k), RoPE, and for a key head the store of its K and V rows.
 * The fused attn_prep kernel (fused.cu) runs it a warp per head; the q/k/v GEMV (gemv_q8.cu)
 * runs it in the last warp to finish a head's rows, so no kernel of its own is launched.
 * Bit for bit the separate ops: the sum of squares is added in rmsnorm_kernel's order for
 * rows of <= 256 (rms_threads: 64 threads, thread i takes elements i, i + 64, ..; block_sum
 * adds the two warps' butterflies), which one warp reproduces as lanes l and l + 32.
 */
#ifndef GLIM_CUDA_ATTN_PREP_CUH
#define GLIM_CUDA_ATTN_PREP_CUH

#include "rowops.cuh"

#define PREP_MAX_DIM 256   /* as attention (attn_decode.cu ATTN_MAX_DIM) */

struct prep_params {
    float         *q, *k;
    const float   *v, *q_norm, *k_norm;
    float          eps;
    bool           rope, neox;
    int            n_rot;
    float          rope_base;
    void          *k_cache, *v_cache;
    uint32_t       kv_type;
    int64_t        n_slots;
    const int32_t *pos;
    int            n_head, n_head_kv, head_dim;
    int            n_qb;   /* query heads to prepare per token: n_head, or 0 when q has nothing to do */
    const float2  *cs;     /* [n_tokens][n_rot / 2] (cos, sin) of rope_table, or NULL: rope_cos_sin */
};

/* fused.cu: p from a; false when the shapes are not attn_prep's (head_dim > 256, kv_type) */
bool cuda_prep_params(const struct be_attn_prep_args *a, prep_params *out);

/* RoPE pair i of token t at position pos: from the step's table when there is one (the same
 * values: rope_table computes them with rope_cos_sin) */
static __device__ __forceinline__ void prep_cos_sin(const prep_params &p, int t, int32_t pos, int i, float *cs,
                                                    float *sn)
{
    if (p.cs) {
        float2 v = __ldcg(p.cs + (int64_t)t * (p.n_rot / 2) + i);   /* written by the step's rope_table */
        *cs = v.x, *sn = v.y;
    } else {
        rope_cos_sin(pos, p.rope_base, i, p.n_rot, cs, sn);
    }
}

/* Token t, head hh (< n_qb: query head hh, else key head hh - n_qb) by the calling warp;
 * row: PREP_MAX_DIM floats of shared memory of this warp's own. Reads the head through L2
 * (another SM may have written it just now). */
static __device__ __forceinline__ void prep_head_warp(const prep_params &p, int t, int hh, float *row, int lane)
{
    int D = p.head_dim, hk = hh - p.n_qb;
    bool is_q = hk < 0;
    float *src = is_q ? p.q + ((int64_t)t * p.n_head + hh) * D : p.k + ((int64_t)t * p.n_head_kv + hk) * D;
    const float *w = is_q ? p.q_norm : p.k_norm;
    float r = 0.0f;
    if (w) {
        double s0 = 0.0, s1 = 0.0;   /* rmsnorm_kernel's threads l and l + 32 */
        for (int i = lane; i < D; i += 64)
            s0 += (double)__ldcg(src + i) * __ldcg(src + i);
        for (int i = lane + 32; i < D; i += 64)
            s1 += (double)__ldcg(src + i) * __ldcg(src + i);
        r = rms_scale(warp_sum(s0) + warp_sum(s1), D, p.eps);
    }
    for (int i = lane; i < D; i += 32)
        row[i] = w ? rms_apply(__ldcg(src + i), r, w, i) : __ldcg(src + i);
    __syncwarp();
    int32_t pos = p.pos[t];
    if (p.rope) {
        for (int i = lane; i < p.n_rot / 2; i += 32) {
            float cs, sn;
            prep_cos_sin(p, t, pos, i, &cs, &sn);
            rope_pair(row, i, p.n_rot, p.neox, cs, sn);
        }
        __syncwarp();
    }
    for (int i = lane; i < D; i += 32)
        src[i] = row[i];
    if (!is_q) {
        int64_t kv_dim = (int64_t)p.n_head_kv * D, slot = (int64_t)pos % p.n_slots;
        const float *vr = p.v + t * kv_dim + (int64_t)hk * D;
        for (int i = lane; i < D; i += 32) {
            int64_t at = slot * kv_dim + (int64_t)hk * D + i;
            kv_put(p.k_cache, p.kv_type, at, row[i]);
            kv_put(p.v_cache, p.kv_type, at, __ldcg(vr + i));
        }
    }
    __syncwarp();   /* row is free for the warp's next head */
}

/* Attention's own prep (attn_decode.cu, one decode token, head_dim <= 128): rows r = r0, r0 +
 * step, .. < n_rows of a KV group's prep, r < group being query head kvh * group + r of token 0,
 * r == group key head kvh, normed and roped into rows + r * D (shared memory) as prep_head_warp
 * computes them; every row's loads are in flight at once, and cs holds the n_rot / 2 (cos, sin)
 * of rope_cos_sin for token 0 (NULL: no RoPE). Writes nothing else. */
#define PREP_ROWS_MAX 5
static __device__ __forceinline__ void prep_group_warp(const prep_params &p, int kvh, int group, int n_rows,
                                                       float *rows, const float2 *cs, int r0, int step, int lane)
{
    int D = p.head_dim;
    float v[PREP_ROWS_MAX][4];
#pragma unroll
    for (int j = 0; j < PREP_ROWS_MAX; j++) {
        int r = r0 + j * step;
        const float *src = r < group ? p.q + ((int64_t)kvh * group + r) * D : p.k + (int64_t)kvh * D;
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[j][e] = r < n_rows && lane + 32 * e < D ? __ldcg(src + lane + 32 * e) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < PREP_ROWS_MAX; j++) {
        int r = r0 + j * step;
        if (r >= n_rows)
            break;
        const float *w = r < group ? p.q_norm : p.k_norm;
        float rs = 0.0f;
        if (w) {   /* rmsnorm_kernel's 64 threads: l sums elements l, l + 64; l + 32 sums l + 32, l + 96 */
            double s0 = 0.0, s1 = 0.0;
#pragma unroll
            for (int e = 0; e < 4; e += 2)
                if (lane + 32 * e < D)
                    s0 += (double)v[j][e] * v[j][e];
#pragma unroll
            for (int e = 1; e < 4; e += 2)
                if (lane + 32 * e < D)
                    s1 += (double)v[j][e] * v[j][e];
            rs = rms_scale(warp_sum(s0) + warp_sum(s1), D, p.eps);
        }
        float *row = rows + (int64_t)r * D;
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (lane + 32 * e < D)
                row[lane + 32 * e] = w ? rms_apply(v[j][e], rs, w, lane + 32 * e) : v[j][e];
        __syncwarp();
        if (cs) {
            for (int i = lane; i < p.n_rot / 2; i += 32)
                rope_pair(row, i, p.n_rot, p.neox, cs[i].x, cs[i].y);
            __syncwarp();
        }
    }
}

/* A GEMV folding attn_prep (gemv_prep_arrive): after this warp stored some of head hh's rows, count
 * them in cnt[slot]; the warp whose arrival is the need-th prepares the head (in row, its own
 * PREP_MAX_DIM floats of shared memory) and resets the count for the next launch */
static __device__ __forceinline__ void prep_count_arrive(const prep_params &p, unsigned *cnt, int slot,
                                                         unsigned need, int hh, float *row, int lane)
{
    __threadfence();   /* the rows are visible before the count says so */
    __syncwarp();
    unsigned done = 0;
    if (lane == 0)
        done = atomicAdd(&cnt[slot], 1u);
    if (__shfl_sync(0xffffffffu, done, 0) != need - 1)
        return;
    __threadfence();
    prep_head_warp(p, 0, hh, row, lane);
    if (lane == 0)
        cnt[slot] = 0u;
}

#endif
