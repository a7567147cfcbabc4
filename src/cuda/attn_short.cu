/*
 * attn_short.cu — one decode token's attn_prep, attention and output gate in one launch, for
 * contexts of at most CUDA_SHORT_KEYS keys (head_dim 128, F16/BF16 cache).
 *
 * Why: after the q/k/v GEMV, the default chain is three latency-bound kernels (attn_prep, the
 * split attention v4, its combine): ~11 us a layer on an H100, ~10% of a decode step, while the
 * memory sits idle. Here one CTA per query head does it all with one PDL wait: before the wait
 * its 8 warps load the old keys and values (earlier steps wrote them; 32 keys a warp, a lane's
 * 4 dims of each into registers); after it, warp 0 prepares the head's q and warp 1 the group's
 * new key (attn_prep.cuh's expressions: the cache row is attn_prep's bits; q and k are left as
 * they were, scratch by backend.h), scores and softmax stay in registers (a transposed butterfly gives lane j key j's
 * score), the warps meet in shared memory once, and warp 0 writes the row and, with an output
 * gate, Wo's gated int8 input (quantize_x's expressions, as the combine of attention v4 makes it).
 *
 * Only the first query head of a KV group stores the new K/V row; the others use their own copy
 * of it (rounded as the cache holds it), so no CTA waits for another. Longer contexts take the
 * split kernels: the backend decides on the host (be_attn_prep_args.pos_host0), and a decode
 * graph captured for short steps is never replayed past them (backend_i.graph_class).
 * Not bit-equal to attention v4 (another summation order); within the goldens' tolerance.
 */
#include "attn_prep.cuh"
#include "rowops.cuh"

#define SHORT_WARPS 8
#define SHORT_KPW 32          /* keys a warp: one per lane after the transposed sum */
#define SHORT_D 128           /* a lane's float4 of the head */
#define SHORT_GROUP_MAX 16
static_assert(SHORT_WARPS * SHORT_KPW == CUDA_SHORT_KEYS, "the host's limit is the kernel's");

struct short_params {
    prep_params  pp;
    float       *out;         /* [n_head][128] */
    const float *gate;        /* NULL, or sigmoid gate [n_head][128]: out * sigmoid(gate) into gq, gd */
    int8_t      *gq;
    float2      *gd;
    unsigned    *ready;       /* NULL, or the side GEMV's flag for the gate (gemv_job.ready): polled,
                               * and reset by the last CTA to read it */
    int          window, group;
    float        scale;
    unsigned long long *trace;   /* GLIM_CUDA_SHORT_TRACE=1: SHORT_TR stamps a CTA (short_stamp), else NULL */
};

/* the trace's stamps a CTA: entry, PDL wait done, q/k/v (and gate) in, q and k prepared and the
 * row cached, scores and values done, end (diagnosis: where a short attention's time goes) */
enum { SHORT_TR = 6, SHORT_TRACE_CAP = 64, SHORT_TRACE_HEADS = 128 };

static __device__ __forceinline__ void short_stamp(const short_params &a, int which)
{
    if (a.trace && threadIdx.x == 0)
        a.trace[(size_t)blockIdx.x * SHORT_TR + which] = cuda_globaltimer();
}

static __device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* 4 cache elements (8 bytes) as floats, and a float rounded as kv_put stores it */
static __device__ __forceinline__ float4 short_f4(uint2 r, bool bf16)
{
    float2 a, b;
    if (bf16) {
        a = __bfloat1622float2(*(const __nv_bfloat162 *)&r.x);
        b = __bfloat1622float2(*(const __nv_bfloat162 *)&r.y);
    } else {
        a = __half22float2(*(const __half2 *)&r.x);
        b = __half22float2(*(const __half2 *)&r.y);
    }
    return make_float4(a.x, a.y, b.x, b.y);
}

static __device__ __forceinline__ float short_round(float x, bool bf16)
{
    return bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : __half2float(__float2half_rn(x));
}

static __device__ __forceinline__ float dot4(float4 a, float4 b)
{
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, a.x * b.x)));
}

/* grid: one CTA per query head; block: 32 * SHORT_WARPS */
template <bool BF16>
static __global__ void __launch_bounds__(32 * SHORT_WARPS) attn_short_kernel(const short_params a)
{
    __shared__ __align__(16) float rows[3][SHORT_D];   /* q (normed, roped), new k, new v (as cached) */
    __shared__ float2 cs_s[SHORT_D / 2];
    __shared__ float4 acc_s[SHORT_WARPS][32];
    __shared__ float m_s[SHORT_WARPS], l_s[SHORT_WARPS];
    short_stamp(a, 0);
    const prep_params &p = a.pp;
    const int D = SHORT_D, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int h = blockIdx.x, kvh = h / a.group, rq = h - kvh * a.group;
    const int n_pairs = p.rope ? p.n_rot / 2 : 0;
    const int32_t pos = p.pos[0];                            /* uploaded before the step */
    const int lo = a.window > 0 ? max(0, pos - a.window + 1) : 0;
    const int base = lo + warp * SHORT_KPW;                  /* this warp's first key */
    const bool active = base <= pos;                         /* warp-uniform */
    const int64_t kv_dim = (int64_t)p.n_head_kv * D;

    /* before the wait, what no kernel of this step writes: the old keys and values, the norm
     * weights, and without the step's table the RoPE angles */
    uint2 kr[SHORT_KPW], vr[SHORT_KPW];
    {
        const uint2 *kc = (const uint2 *)((const uint16_t *)p.k_cache + (int64_t)kvh * D) + lane;
        const uint2 *vc = (const uint2 *)((const uint16_t *)p.v_cache + (int64_t)kvh * D) + lane;
#pragma unroll
        for (int j = 0; j < SHORT_KPW; j++) {
            int key = base + j;
            kr[j] = vr[j] = make_uint2(0u, 0u);
            if (key < pos) {
                int64_t at = (int64_t)key % p.n_slots * (kv_dim / 4);
                kr[j] = kc[at];
                vr[j] = vc[at];
            }
        }
    }
    const float *w = warp == 0 ? p.q_norm : p.k_norm;
    float wv[4];
#pragma unroll
    for (int e = 0; e < 4; e++)
        wv[e] = warp < 2 && w ? w[lane + 32 * e] : 1.0f;
    float2 csv = make_float2(1.0f, 0.0f);
    if ((int)threadIdx.x < n_pairs && !p.cs)
        rope_cos_sin(pos, p.rope_base, threadIdx.x, p.n_rot, &csv.x, &csv.y);
    /* With a flag to poll, the next kernel may start only once the gate is there: its CTAs would
     * otherwise wait in SMs that the gate GEMV's last CTAs need (a deadlock) */
    cuda_pdl_wait();
    if (!a.ready)
        cuda_pdl_trigger();
    short_stamp(a, 1);

    /* after it, at once: the head's q (warp 0), the group's new k (warp 1) and v (warp 2), the angles */
    const float *src = warp == 0 ? p.q + (int64_t)h * D : warp == 1 ? p.k + (int64_t)kvh * D : p.v + (int64_t)kvh * D;
    float x[4];
#pragma unroll
    for (int e = 0; e < 4; e++)
        x[e] = warp < 3 ? __ldcg(src + lane + 32 * e) : 0.0f;
    const int64_t gi = (int64_t)h * 32 + lane;              /* this lane's float4 of the gate */
    float4 g = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (warp == 3 && a.gate && !a.ready)                     /* ready now: the q/k/v job's, or joined */
        g = __ldcg((const float4 *)a.gate + gi);
    float4 *g_s = &acc_s[0][0];                              /* warp 3 hands it to warp 0 (below) */
    if ((int)threadIdx.x < n_pairs) {
        if (p.cs)
            csv = __ldcg(p.cs + threadIdx.x);                /* written by the step's rope_table */
        cs_s[threadIdx.x] = csv;
    }
    if (warp < 2) {   /* prep_group_warp's norm: rmsnorm_kernel's 64-thread sums */
        bool normed = (warp == 0 ? p.q_norm : p.k_norm) != NULL;
        float rs = 0.0f;
        if (normed) {
            double s0 = (double)x[0] * x[0] + (double)x[2] * x[2];
            double s1 = (double)x[1] * x[1] + (double)x[3] * x[3];
            rs = rms_scale(warp_sum(s0) + warp_sum(s1), D, p.eps);
        }
#pragma unroll
        for (int e = 0; e < 4; e++)
            rows[warp][lane + 32 * e] = normed ? x[e] * rs * wv[e] : x[e];   /* rms_apply's product */
    } else if (warp == 2) {   /* as the cache holds it (kv_put of it stores the same bits) */
#pragma unroll
        for (int e = 0; e < 4; e++)
            rows[2][lane + 32 * e] = short_round(x[e], BF16);
    }
    if (warp == 3)
        g_s[lane] = g;
    __syncthreads();   /* the angles, the value row, the gate */
    short_stamp(a, 2);
    g = g_s[lane];
    if (warp < 2) {
        if (n_pairs) {
            for (int i = lane; i < n_pairs; i += 32)
                rope_pair(rows[warp], i, p.n_rot, p.neox, cs_s[i].x, cs_s[i].y);
            __syncwarp();
        }
        /* q and k stay unprepared (backend.h: scratch after an attention that follows): the other
         * CTAs of the group still read k */
        int64_t at = (int64_t)pos % p.n_slots * kv_dim + (int64_t)kvh * D;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int i = lane + 32 * e;
            float v = rows[warp][i];
            if (warp == 1) {
                if (rq == 0) {
                    kv_put(p.k_cache, p.kv_type, at + i, v);
                    kv_put(p.v_cache, p.kv_type, at + i, rows[2][i]);
                }
                rows[1][i] = short_round(v, BF16);           /* the key as the cache holds it */
            }
        }
    }
    __syncthreads();
    short_stamp(a, 3);

    float m = -INFINITY, l = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (active) {
        float4 q4 = ((const float4 *)rows[0])[lane], kn = ((const float4 *)rows[1])[lane];
        float4 vn = ((const float4 *)rows[2])[lane];
        float sc[SHORT_KPW];
#pragma unroll
        for (int j = 0; j < SHORT_KPW; j++)
            sc[j] = dot4(q4, base + j < pos ? short_f4(kr[j], BF16) : kn);
        /* transposed butterfly: after the step of offset o a lane keeps the half of its sums
         * whose index bit o is its own lane bit, so lane j ends with key base + j's full sum */
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) {
            bool up = lane & o;
#pragma unroll
            for (int i = 0; i < o; i++) {
                float send = up ? sc[i] : sc[i + o], keep = up ? sc[i + o] : sc[i];
                sc[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
            }
        }
        const float sl2 = a.scale * 1.4426950408889634f;    /* log2 units */
        float s = base + lane <= pos ? sc[0] * sl2 : -INFINITY;
        m = s;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));   /* finite: key `base` is visible */
        float pe = exp2f(s - m);                              /* masked: 0 */
        l = pe;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            l += __shfl_xor_sync(0xffffffffu, l, o);
#pragma unroll
        for (int j = 0; j < SHORT_KPW; j++) {
            float pj = __shfl_sync(0xffffffffu, pe, j);
            float4 v = base + j < pos ? short_f4(vr[j], BF16) : vn;   /* past pos: pj = 0 */
            acc.x = fmaf(pj, v.x, acc.x);
            acc.y = fmaf(pj, v.y, acc.y);
            acc.z = fmaf(pj, v.z, acc.z);
            acc.w = fmaf(pj, v.w, acc.w);
        }
    }
    __syncthreads();   /* every warp has its copy of the gate */
    short_stamp(a, 4);
    acc_s[warp][lane] = acc;
    if (lane == 0)
        m_s[warp] = m, l_s[warp] = l;
    __syncthreads();
    if (warp != 0)
        return;
    if (a.gate && a.ready) {   /* the side GEMV's flag (gemv_job.ready), then its rows */
        if (lane == 0) {
            while (!ld_acquire(a.ready + 1))
                __nanosleep(64);
            if (atomicAdd(a.ready + 2, 1u) == gridDim.x - 1)   /* the last reader resets it */
                a.ready[2] = 0u, a.ready[1] = 0u;
        }
        __syncwarp();
        g = __ldcg((const float4 *)a.gate + gi);
        cuda_pdl_trigger();
    }
    float M = m_s[0], L = 0.0f;                              /* warp 0 always holds key lo */
#pragma unroll
    for (int i = 1; i < SHORT_WARPS; i++)
        M = fmaxf(M, m_s[i]);
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < SHORT_WARPS; i++) {
        float f = exp2f(m_s[i] - M);                          /* a warp without keys: 0 */
        float4 x4 = acc_s[i][lane];
        L = fmaf(f, l_s[i], L);
        o.x = fmaf(f, x4.x, o.x);
        o.y = fmaf(f, x4.y, o.y);
        o.z = fmaf(f, x4.z, o.z);
        o.w = fmaf(f, x4.w, o.w);
    }
    float inv = 1.0f / L;
    o = make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv);
    ((float4 *)(a.out + (int64_t)h * D))[lane] = o;
    if (a.gate)
        gate_quant4_k45(o, g, gi, a.gq, a.gd);
    short_stamp(a, 5);
}

bool cuda_attn_short_ok(const struct cuda_ctx *c, const struct be_attn_prep_args *p)
{
    uintptr_t align = (uintptr_t)p->q | (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->k_cache |
                      (uintptr_t)p->v_cache;
    return c->attn_short && !(c->dbg_skip & (CUDA_SKIP_ATTN | CUDA_SKIP_PREP)) && p->n_tokens == 1 && p->q &&
           p->head_dim == SHORT_D && (p->kv_type == GLIM_TYPE_F16 || p->kv_type == GLIM_TYPE_BF16) &&
           p->n_head_kv > 0 && p->n_head % p->n_head_kv == 0 && p->n_head / p->n_head_kv <= SHORT_GROUP_MAX &&
           p->pos_host0 >= 0 && p->pos_host0 < CUDA_SHORT_KEYS && p->n_slots > 0 &&
           (!p->rope || (p->n_rot >= 2 && p->n_rot <= SHORT_D && p->n_rot % 2 == 0)) && align % 16 == 0;
}

bool cuda_attn_short(struct cuda_ctx *c, const struct be_attn_prep_args *p, const struct be_attn_args *x,
                     const float *gate, unsigned *ready)
{
    short_params a;
    memset(&a, 0, sizeof a);
    if (!cuda_attn_short_ok(c, p) || x->n_tokens != 1 || x->block != 0 || x->q != p->q || x->pos != p->pos ||
        x->pos_host0 != p->pos_host0 || x->k_cache != p->k_cache || x->v_cache != p->v_cache ||
        x->kv_type != p->kv_type || x->n_slots != p->n_slots || x->n_head != p->n_head ||
        x->n_head_kv != p->n_head_kv || x->head_dim != p->head_dim || ((uintptr_t)x->out & 15) ||
        !cuda_prep_params(p, &a.pp) || a.pp.n_qb != p->n_head)
        return false;
    a.out = x->out;
    a.window = x->window;
    a.group = x->n_head / x->n_head_kv;
    a.scale = x->scale;
    if (gate && !cuda_attn_gate_buf(c, x, &a.gq, &a.gd))
        gate = NULL;
    a.gate = gate;
    a.ready = gate ? ready : NULL;
    if (c->short_trace && c->short_trace_n < SHORT_TRACE_CAP && x->n_head <= SHORT_TRACE_HEADS)
        a.trace = (unsigned long long *)c->short_trace + (size_t)c->short_trace_n++ * SHORT_TRACE_HEADS * SHORT_TR,
        c->short_trace_heads = (int)x->n_head;
    if (x->kv_type == GLIM_TYPE_BF16)
        cuda_launch_dep(c, dim3((unsigned)x->n_head), dim3(32 * SHORT_WARPS), 0, attn_short_kernel<true>, a);
    else
        cuda_launch_dep(c, dim3((unsigned)x->n_head), dim3(32 * SHORT_WARPS), 0, attn_short_kernel<false>, a);
    if (!CUDA_LAUNCHED(c, "attention (short)") && gate)
        c->att_x = x->out, c->att_g = gate, c->att_k = (int64_t)x->n_head * x->head_dim;
    return true;
}

/* ---- the trace (GLIM_CUDA_SHORT_TRACE=1, diagnosis): per launch since graph_begin (the last
 * replay's, in graphs), per CTA the stamps of short_stamp; printed at backend_destroy ---- */
bool cuda_short_trace_init(struct cuda_ctx *c)
{
    size_t bytes = (size_t)SHORT_TRACE_CAP * SHORT_TRACE_HEADS * SHORT_TR * sizeof(unsigned long long);
    return !CUDA_TRY(c, cudaMalloc(&c->short_trace, bytes)) && !CUDA_TRY(c, cudaMemset(c->short_trace, 0, bytes));
}

void cuda_short_trace_dump(struct cuda_ctx *c)
{
    static const char *const what[SHORT_TR] = {"entry", "PDL wait done", "q/k/v in", "prepared, row cached",
                                               "scores and values done", "end"};
    if (c->short_trace)
        cuda_stamps_dump("short trace", c->short_trace,
                         c->short_trace_n < SHORT_TRACE_CAP ? c->short_trace_n : SHORT_TRACE_CAP,
                         SHORT_TRACE_HEADS * SHORT_TR, c->short_trace_heads, SHORT_TR, SHORT_TR, what);
}
