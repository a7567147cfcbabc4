/*
 * fused.cu — the optional fused ops of the CUDA backend (backend.h): one kernel
 * where the model would launch several small ones (each launch costs ~2-3 us even
 * inside a CUDA graph, and a decode step had ~22 per layer).
 *   add_rmsnorm: rmsnorm(o -> o), add(x, o), rmsnorm(x -> h)      (3 -> 1)
 *   attn_prep:   rmsnorm q, rmsnorm k, rope q, rope k, kv_store   (up to 5 -> 1; opt-in,
 *                the q/k/v GEMV runs it itself, attn_prep.cuh: 0 launches)
 * Each must be bit for bit the sequence it replaces (so GLIM_CUDA_FUSE=0 changes no
 * output): the arithmetic comes from rowops.cuh, as in the separate kernels, and every
 * double reduction uses the thread mapping and block size those kernels use.
 * Positions are read from device memory; nothing allocates: graph-capturable.
 */
#include "attn_prep.cuh"

/* ---- add_rmsnorm ----------------------------------------------------------------- */

/* the norm trace (GLIM_CUDA_NORM_TRACE=1, diagnosis): one thread's global timer at entry, after
 * the PDL wait, after each sum and at the end, per launch (cuda_norm_trace_dump) */
#define NORM_TRACE_PER 5
#define NORM_TRACE_CAP 256
template <bool TR>
static __device__ __forceinline__ void norm_stamp(unsigned long long *tr, int which, bool me)
{
    if (TR && me)
        tr[which] = cuda_globaltimer();
}

/* Rows for which rms_vec_ok (the separate norms take rmsnorm_vec_kernel): o, x and both
 * weights are loaded up front; o's sum, x's update and sum, and h stay in registers.
 * xq != NULL (n % 256 == 0): h is also quantized for the next matmul (cuda_xq_reserve).
 * (A cluster of 8 CTAs a row, GLIM_CUDA_NORM_CLUSTER, and the PDL trigger after a sum,
 * GLIM_CUDA_NORM_TRIG, measured no faster and slower: removed 2026-12-06, code at 9c5b9ba.) */
template <bool TR>
static __device__ __forceinline__ void add_rmsnorm_row(float *x, float *h, float *o, const float *w_o, float eps_o,
                                                       const float *w_h, float eps_h, int n, int8_t *xq, float2 *xd,
                                                       int early, unsigned long long *tr, int64_t row, int tid,
                                                       bool stamp, double *red, unsigned skip)
{
    int n4 = n / 4;
    float4 ov[RMS_VEC_MAX], xv[RMS_VEC_MAX], wo[RMS_VEC_MAX], wh[RMS_VEC_MAX];
    norm_stamp<TR>(tr, 0, stamp);
    if (early) {   /* bench knob: these are not the predecessor's (see cuda_add_rmsnorm) */
        rms_vec_load(wo, w_o, n4, 1.0f, tid);
        rms_vec_load(wh, w_h, n4, 1.0f, tid);
        if (early == 1)
            rms_vec_load(xv, x + row, n4, 0.0f, tid);
    }
    cuda_pdl_wait();
    cuda_pdl_trigger();   /* and the GEMV that reads h may start its weight loads now */
    norm_stamp<TR>(tr, 1, stamp);
    rms_vec_load(ov, o + row, n4, 0.0f, tid);
    if (early != 1)
        rms_vec_load(xv, x + row, n4, 0.0f, tid);
    if (!early) {
        rms_vec_load(wo, w_o, n4, 1.0f, tid);
        rms_vec_load(wh, w_h, n4, 1.0f, tid);
    }
    double ss = rms_vec_sumsq(ov);
    float r = rms_scale(block_sum(ss, red), n, eps_o);
    norm_stamp<TR>(tr, 2, stamp);
#pragma unroll
    for (int j = 0; j < RMS_VEC_MAX; j++) {   /* padding stays 0: 0 + 0 * r */
        ov[j] = rms_vec_apply(ov[j], r, wo[j], w_o != NULL);
        xv[j] = add_normed4(xv[j], ov[j]);
    }
    ss = rms_vec_sumsq(xv);
    r = rms_scale(block_sum(ss, red), n, eps_h);
    norm_stamp<TR>(tr, 3, stamp);
#pragma unroll
    for (int j = 0; j < RMS_VEC_MAX; j++) {
        int i = tid + j * RMS_VEC_THREADS;
        if (i >= n4)   /* n % 256 == 0 when quantizing: whole warps leave together */
            break;
        float4 hv = rms_vec_apply(xv[j], r, wh[j], w_h != NULL);
        if (!(skip & CUDA_NORM_NO_O))
            ((float4 *)(o + row))[i] = ov[j];
        ((float4 *)(x + row))[i] = xv[j];
        if (!(skip & CUDA_NORM_NO_H) || !xq)
            ((float4 *)(h + row))[i] = hv;
        if (xq)
            quantize4_k45(hv, i, xq + row, xd + row / 32);
    }
    norm_stamp<TR>(tr, 4, stamp);
}

template <bool TR>
static __global__ void __launch_bounds__(RMS_VEC_THREADS)
    add_rmsnorm_vec_kernel(float *x, float *h, float *o, const float *w_o, float eps_o, const float *w_h,
                           float eps_h, int n, int8_t *xq, float2 *xd, int early, unsigned long long *tr,
                           unsigned skip)
{
    __shared__ double red[32];
    add_rmsnorm_row<TR>(x, h, o, w_o, eps_o, w_h, eps_h, n, xq, xd, early, tr, (int64_t)blockIdx.x * n,
                        (int)threadIdx.x, threadIdx.x == 0, red, skip);
}

bool cuda_norm_trace_init(struct cuda_ctx *c)
{
    return !CUDA_TRY(c, cudaMalloc(&c->norm_trace, NORM_TRACE_CAP * NORM_TRACE_PER * sizeof(unsigned long long)));
}

/* Medians over the traced launches (the last graph replay's), us: entry -> wait done, -> first sum,
 * -> second sum, -> end */
void cuda_norm_trace_dump(struct cuda_ctx *c)
{
    int n = c->norm_trace_n < NORM_TRACE_CAP ? c->norm_trace_n : NORM_TRACE_CAP;
    unsigned long long h[NORM_TRACE_CAP * NORM_TRACE_PER];
    if (!c->norm_trace || n < 1 ||
        cudaMemcpy(h, c->norm_trace, (size_t)n * NORM_TRACE_PER * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess)
        return;
    static const char *what[4] = {"entry -> wait done", "wait -> first sum", "first -> second sum", "second sum -> end"};
    double d[NORM_TRACE_CAP];
    for (int par = 0; par < 2; par++)   /* a decode step's even launches come after Wo, odd ones after down */
        for (int k = 0; k < 4; k++) {
            int m = 0;
            for (int i = par; i < n; i += 2)
                d[m++] = (double)(h[i * NORM_TRACE_PER + k + 1] - h[i * NORM_TRACE_PER + k]) / 1e3;
            if (!m)
                continue;
            qsort(d, (size_t)m, sizeof *d, cuda_cmp_dbl);
            fprintf(stderr, "norm trace: %d launches after %-4s %-20s p10 %6.2f  p50 %6.2f  p90 %6.2f us\n", m,
                    par ? "down" : "Wo", what[k], d[m / 10], d[m / 2], d[m * 9 / 10]);
        }
}

/* Other rows (rmsnorm_kernel's strided mapping, rms_threads(n) threads): each thread
 * only rereads elements it wrote itself, so no barrier is needed between the passes. */
static __global__ void add_rmsnorm_kernel(float *x, float *h, float *o, const float *w_o, float eps_o,
                                          const float *w_h, float eps_h, int n)
{
    __shared__ double red[32];
    cuda_pdl_enter();
    int64_t row = (int64_t)blockIdx.x * n;
    float *xr = x + row, *hr = h + row, *orow = o + row;
    double ss = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        ss += (double)orow[i] * orow[i];
    float r = rms_scale(block_sum(ss, red), n, eps_o);
    ss = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float on = rms_apply(orow[i], r, w_o, i);
        float xn = __fadd_rn(xr[i], on);
        orow[i] = on;
        xr[i] = xn;
        ss += (double)xn * xn;
    }
    r = rms_scale(block_sum(ss, red), n, eps_h);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        hr[i] = rms_apply(xr[i], r, w_h, i);
}

void cuda_add_rmsnorm(struct cuda_ctx *c, float *x, float *h, float *o, const float *w_o, float eps_o,
                      const float *w_h, float eps_h, int64_t n_rows, int n, unsigned skip)
{
    if (n_rows <= 0 || n <= 0)
        return;
    /* the separate rmsnorms pick their kernel from their own pointers */
    bool vec_o = rms_vec_ok(n, (uintptr_t)o | (uintptr_t)w_o);
    bool vec_x = rms_vec_ok(n, (uintptr_t)x | (uintptr_t)h | (uintptr_t)w_h);
    int8_t *xq = NULL;
    float2 *xd = NULL;
    /* h feeds the next matmuls: quantize it here (K45 order, the Q4_K/Q5_K/Q6_K GEMV's) */
    bool qx = vec_o && vec_x && n % 256 == 0 && cuda_xq_reserve(c, n, (int)n_rows, &xq, &xd);
    /* GLIM_CUDA_NORM_EARLY: load the norm weights (2, the default), or them and x (1), before
     * the PDL wait (0: after it). The weights are constants. x is safe only while its last writer is at least
     * three launches back with a launch between that waits before it triggers (the decode
     * chains: ... quantize -> Wo/down GEMV -> here). The GEMVs trigger before they wait, so
     * without the quantizer (GLIM_CUDA_GLU_FUSE: gate/up -> down -> here) the previous
     * add_rmsnorm may still be writing x: 1 must not be combined with the GLU fold. */
    static int early_env = -1;
    if (early_env < 0) {   /* default 2: tg128 161.4 vs 160.0 t/s, with the GLU fold 162.8 (2026-12-03) */
        const char *e = getenv("GLIM_CUDA_NORM_EARLY");
        early_env = e ? atoi(e) : 2;
        early_env = early_env >= 0 && early_env <= 2 ? early_env : 2;
    }
    int early = c->pdl_all ? early_env : 0;
    early = early == 1 && c->glu_fuse ? 2 : early;   /* x may still be being written (above) */
    if (c->dbg_skip & CUDA_SKIP_NORM) {   /* bench knob, wrong output: what this kernel costs */
        if (qx)
            cuda_xq_filled(c, h, n, (int)n_rows);
        return;
    }
    unsigned long long *tr = NULL;
    if (c->norm_trace && n_rows == 1 && c->norm_trace_n < NORM_TRACE_CAP)
        tr = (unsigned long long *)c->norm_trace + (size_t)c->norm_trace_n++ * NORM_TRACE_PER;
    if (vec_o && vec_x && tr)
        cuda_launch_dep(c, dim3((unsigned)n_rows), dim3(RMS_VEC_THREADS), 0, add_rmsnorm_vec_kernel<true>, x, h, o,
                        w_o, eps_o, w_h, eps_h, n, xq, xd, early, tr, skip);
    else if (vec_o && vec_x)
        cuda_launch_dep(c, dim3((unsigned)n_rows), dim3(RMS_VEC_THREADS), 0, add_rmsnorm_vec_kernel<false>, x, h, o,
                        w_o, eps_o, w_h, eps_h, n, xq, xd, early, tr, skip);
    else if (!vec_o && !vec_x)
        cuda_launch_dep(c, dim3((unsigned)n_rows), dim3(rms_threads(n)), 0, add_rmsnorm_kernel, x, h, o, w_o, eps_o,
                        w_h, eps_h, n);
    else {   /* one of them misaligned (no caller does this): the sequence itself */
        cuda_rmsnorm(c, o, o, w_o, n_rows, n, eps_o);
        cuda_add(c, x, o, n_rows * n);
        cuda_rmsnorm(c, h, x, w_h, n_rows, n, eps_h);
        return;
    }
    if (!CUDA_LAUNCHED(c, "add_rmsnorm") && qx)
        cuda_xq_filled(c, h, n, (int)n_rows);
}

/* ---- attn_prep --------------------------------------------------------------------- */

/* One block of rms_threads(head_dim) threads per (token, head): the token's query heads
 * first, then its key heads, which also store the value row of their head. The norm sums
 * in rmsnorm_kernel's order (rows of head_dim <= 256 never take the float4 kernel); the
 * row then goes through shared memory, since a RoPE pair spans two threads' elements.
 * (A warp per head, attn_prep.cuh's prep_head_warp, measured slower as this op's kernel:
 * a lane then computes two RoPE angles in double; tg128 158.5 vs 161.9 t/s, 2026-12-03.) */
#define PREP_PER (PREP_MAX_DIM / 64)   /* elements a thread: rms_threads(head_dim <= 256) = 64 */
static __global__ void attn_prep_kernel(prep_params p)
{
    __shared__ double red[32];
    __shared__ float row[PREP_MAX_DIM];
    int per_token = p.n_qb + p.n_head_kv, D = p.head_dim, tid = threadIdx.x, bd = blockDim.x, n_pairs = p.n_rot / 2;
    int t = blockIdx.x / per_token, hh = blockIdx.x % per_token, hk = hh - p.n_qb;
    bool is_q = hk < 0;
    float *src = is_q ? p.q + ((int64_t)t * p.n_head + hh) * D : p.k + ((int64_t)t * p.n_head_kv + hk) * D;
    const float *w = is_q ? p.q_norm : p.k_norm;
    int64_t kv_dim = (int64_t)p.n_head_kv * D;
    const float *vr = is_q ? NULL : p.v + t * kv_dim + (int64_t)hk * D;
    /* before the wait, what no kernel of the step writes: the norm weights, the position (uploaded
     * before the step) and, without the step's table, its RoPE angles; the chain after the q/k/v
     * GEMV's end then starts at the head's own loads */
    float wv[PREP_PER], xv[PREP_PER], vv[PREP_PER];
    float2 cs[PREP_PER / 2];
    int32_t pos = p.pos[t];
#pragma unroll
    for (int j = 0; j < PREP_PER; j++)
        wv[j] = w && tid + j * bd < D ? w[tid + j * bd] : 1.0f;
#pragma unroll
    for (int j = 0; j < PREP_PER / 2; j++)
        if (p.rope && !p.cs && tid + j * bd < n_pairs)
            rope_cos_sin(pos, p.rope_base, tid + j * bd, p.n_rot, &cs[j].x, &cs[j].y);
    cuda_pdl_enter();
#pragma unroll
    for (int j = 0; j < PREP_PER; j++) {   /* the head, its value row and the table's angles at once */
        int i = tid + j * bd;
        xv[j] = i < D ? src[i] : 0.0f;
        vv[j] = vr && i < D ? vr[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < PREP_PER / 2; j++)
        if (p.rope && p.cs && tid + j * bd < n_pairs)
            cs[j] = __ldcg(p.cs + (int64_t)t * n_pairs + tid + j * bd);   /* written by the step's rope_table */
    float r = 0.0f;
    if (w) {   /* uniform over the block: block_sum's barriers are safe */
        double ss = 0.0;
#pragma unroll
        for (int j = 0; j < PREP_PER; j++)
            if (tid + j * bd < D)
                ss += (double)xv[j] * xv[j];
        r = rms_scale(block_sum(ss, red), D, p.eps);
    }
#pragma unroll
    for (int j = 0; j < PREP_PER; j++)
        if (tid + j * bd < D)
            row[tid + j * bd] = w ? xv[j] * r * wv[j] : xv[j];   /* rms_apply's product */
    __syncthreads();
    if (p.rope) {
#pragma unroll
        for (int j = 0; j < PREP_PER / 2; j++)
            if (tid + j * bd < n_pairs)
                rope_pair(row, tid + j * bd, p.n_rot, p.neox, cs[j].x, cs[j].y);
        __syncthreads();
    }
    for (int i = tid; i < D; i += bd)
        src[i] = row[i];
    if (is_q)
        return;
    int64_t slot = (int64_t)pos % p.n_slots;
#pragma unroll
    for (int j = 0; j < PREP_PER; j++) {
        int i = tid + j * bd;
        if (i < D) {
            int64_t at = slot * kv_dim + (int64_t)hk * D + i;
            kv_put(p.k_cache, p.kv_type, at, row[i]);
            kv_put(p.v_cache, p.kv_type, at, vv[j]);
        }
    }
}

bool cuda_prep_params(const struct be_attn_prep_args *a, prep_params *out)
{
    if (a->head_dim > PREP_MAX_DIM || !kv_type_ok(a->kv_type))
        return false;
    prep_params &p = *out;
    p.q = a->q;
    p.k = a->k;
    p.v = a->v;
    p.q_norm = a->q_norm ? (const float *)a->q_norm->dev : NULL;
    p.k_norm = a->k_norm ? (const float *)a->k_norm->dev : NULL;
    p.eps = a->eps;
    p.rope = a->rope;
    p.neox = a->neox;
    p.n_rot = a->n_rot;
    p.rope_base = a->rope_base;
    p.k_cache = a->k_cache;
    p.v_cache = a->v_cache;
    p.kv_type = a->kv_type;
    p.n_slots = a->n_slots;
    p.pos = a->pos;
    p.n_head = a->n_head;
    p.n_head_kv = a->n_head_kv;
    p.head_dim = a->head_dim;
    p.n_qb = a->q && (a->q_norm || a->rope) ? a->n_head : 0;
    p.cs = a->rope ? (const float2 *)a->rope_cs : NULL;
    return true;
}

static __global__ void rope_table_kernel(float2 *cs, const int32_t *pos, int n_tokens, int n_rot, float base)
{
    cuda_pdl_enter();
    int half = n_rot / 2;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < (int64_t)n_tokens * half;
         e += (int64_t)gridDim.x * blockDim.x) {
        float c, s;
        rope_cos_sin(pos[e / half], base, (int)(e % half), n_rot, &c, &s);
        cs[e] = make_float2(c, s);
    }
}

void cuda_rope_table(struct cuda_ctx *c, float2 *cs, const int32_t *pos, int n_tokens, int n_rot, float base)
{
    if (n_tokens <= 0 || n_rot < 2)
        return;
    int64_t n = (int64_t)n_tokens * (n_rot / 2);
    cuda_launch_dep(c, dim3(cuda_blocks(n, 64)), dim3(64), 0, rope_table_kernel, cs, pos, n_tokens, n_rot, base);
    CUDA_LAUNCHED(c, "rope_table");
}

void cuda_attn_prep(struct cuda_ctx *c, const struct be_attn_prep_args *a)
{
    if (a->n_tokens <= 0)
        return;
    prep_params p;
    if (!cuda_prep_params(a, &p)) {
        cuda_check(c, cudaErrorInvalidValue, "attn_prep: head_dim > 256 or kv_type not F32/F16/BF16", __FILE__,
                   __LINE__);
        return;
    }
    if (c->dbg_skip & CUDA_SKIP_PREP)
        return;
    unsigned blocks = (unsigned)((int64_t)a->n_tokens * (p.n_qb + p.n_head_kv));
    cuda_launch_dep(c, dim3(blocks), dim3(rms_threads(a->head_dim)), 0, attn_prep_kernel, p);
    CUDA_LAUNCHED(c, "attn_prep");
}
