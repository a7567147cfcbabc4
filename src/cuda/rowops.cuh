/*
 * rowops.cuh — private to src/cuda: the arithmetic of the per-row ops (RMSNorm,
 * RoPE, KV cache stores) as device functions, shared by their own kernels
 * (ops.cu, attn_decode.cu) and by the fused kernels (fused.cu). A fused kernel
 * is only offered if it is bit for bit the op sequence it replaces, so both
 * must evaluate the same expressions in the same order: they live here once.
 */
#ifndef GLIM_CUDA_ROWOPS_CUH
#define GLIM_CUDA_ROWOPS_CUH

#include "cuda_util.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

/* ---- RMSNorm: sums of squares in double, as cpu_ref_rmsnorm ---------------------- */

/* Sum of v over the block (blockDim.x a multiple of 32): butterfly within each warp,
 * then over the warps' sums. Double addition does not associate, so every kernel whose
 * result must match another's reduces through this one order. */
static __device__ __forceinline__ double warp_sum(double v)   /* the butterfly: every lane gets the same bits */
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ inline double block_sum(double v, double *red)
{
    v = warp_sum(v);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warp = blockDim.x / 32;
    __syncthreads();                       /* red may still be read by a previous call */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    return warp_sum(lane < n_warp ? red[lane] : 0.0);
}

/* Block size of the plain (strided) RMSNorm kernels for rows of n: it fixes which
 * elements each thread sums, hence the rounding of the sum. */
static __host__ __device__ inline int rms_threads(int n)
{
    return n >= 4096 ? 1024 : n >= 512 ? 256 : 64;
}

/* The one-pass float4 kernels: 1024 threads, thread t holds float4s t + j * 1024. */
#define RMS_VEC_THREADS 1024
#define RMS_VEC_MAX 2   /* float4 per thread: rows up to 8192 floats */

/* Rows of n take the float4 kernels when every pointer (or-ed into ptrs) is 16-byte
 * aligned, n % 4 == 0 and 1024 <= n <= 8192 (shorter rows leave most threads idle). */
static inline bool rms_vec_ok(int n, uintptr_t ptrs)
{
    return (ptrs & 15) == 0 && n % 4 == 0 && n >= 1024 && n <= 4 * RMS_VEC_THREADS * RMS_VEC_MAX;
}

/* 1 / sqrt(mean of squares + eps), rounded to float once */
static __device__ __forceinline__ float rms_scale(double ss, int n, float eps)
{
    return (float)(1.0 / sqrt(ss / n + eps));
}

/* element i of a normed row; w NULL = no weight */
static __device__ __forceinline__ float rms_apply(float x, float r, const float *w, int i)
{
    return w ? x * r * w[i] : x * r;
}

/* This thread's (or thread tid's of 1024) float4s of a row of n4 float4s; `fill` past the end,
 * or everywhere if row is NULL (a missing weight reads as ones). */
static __device__ __forceinline__ void rms_vec_load(float4 *v, const float *row, int n4, float fill,
                                                    int tid = (int)threadIdx.x)
{
#pragma unroll
    for (int j = 0; j < RMS_VEC_MAX; j++) {
        int i = tid + j * RMS_VEC_THREADS;
        v[j] = row && i < n4 ? ((const float4 *)row)[i] : make_float4(fill, fill, fill, fill);
    }
}

/* this thread's part of the sum of squares (zero padding adds nothing) */
static __device__ __forceinline__ double rms_vec_sumsq(const float4 *v)
{
    double ss = 0.0;
#pragma unroll
    for (int j = 0; j < RMS_VEC_MAX; j++)
        ss += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y + (double)v[j].z * v[j].z +
              (double)v[j].w * v[j].w;
    return ss;
}

static __device__ __forceinline__ float4 rms_vec_apply(float4 x, float r, float4 w, bool weighted)
{
    float4 o;
    o.x = weighted ? x.x * r * w.x : x.x * r;
    o.y = weighted ? x.y * r * w.y : x.y * r;
    o.z = weighted ? x.z * r * w.z : x.z * r;
    o.w = weighted ? x.w * r * w.w : x.w * r;
    return o;
}

/* x + on per element, rounded as the add kernel rounds it: __fadd_rn keeps the compiler
 * from contracting the norm's last multiply and this add into an FMA. */
static __device__ __forceinline__ float4 add_normed4(float4 x, float4 on)
{
    return make_float4(__fadd_rn(x.x, on.x), __fadd_rn(x.y, on.y), __fadd_rn(x.z, on.z), __fadd_rn(x.w, on.w));
}

/* x * act(g) with the float expressions of ops.cu's mul_sigmoid / swiglu (matmul_glu); ACT 0:
 * x itself, 1 + BE_GLU_SIGMOID, 1 + BE_GLU_SILU */
template <int ACT>
static __device__ __forceinline__ float glu_apply(float v, float gv)
{
    if (ACT == 1 + BE_GLU_SIGMOID)
        v *= 1.0f / (1.0f + expf(-gv));
    else if (ACT == 1 + BE_GLU_SILU)
        v = gv / (1.0f + expf(-gv)) * v;
    return v;
}

/* h's int8 copy for the next matmul, as gemv_q8.cu's quantize_x_kernel computes it: the 8
 * consecutive threads holding 32 consecutive values (float4 each) share amax and sum. */
static __device__ __forceinline__ void quantize4_k45(float4 v, int i, int8_t *xq, float2 *xd)
{
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    for (int o = 1; o < 8; o <<= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.0f;
    int q0 = 0, q1 = 0, q2 = 0, q3 = 0;
    if (amax > 0.0f) {
        q0 = __float2int_rn(v.x / d), q1 = __float2int_rn(v.y / d);
        q2 = __float2int_rn(v.z / d), q3 = __float2int_rn(v.w / d);
    }
    int sum = q0 + q1 + q2 + q3;
    for (int o = 1; o < 8; o <<= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    *(char4 *)(xq + cuda_xq_pos_k45(4 * (int64_t)i)) = make_char4((char)q0, (char)q1, (char)q2, (char)q3);
    if ((i & 7) == 0)
        xd[i >> 3] = make_float2(d, d * (float)sum);
}

/* Wo's gated input (one token, head_dim 128: a warp's float4s are a head's 4 quantizer blocks):
 * lane's four outputs o times sigmoid(g), quantized as quantize_x_kernel<1 + BE_GLU_SIGMOID> would
 * (the same float expressions and block order: the same bits); i = row * 32 + lane */
static __device__ __forceinline__ void gate_quant4_k45(float4 o, float4 g, int64_t i, int8_t *xq, float2 *xd)
{
    o.x = glu_apply<1 + BE_GLU_SIGMOID>(o.x, g.x);
    o.y = glu_apply<1 + BE_GLU_SIGMOID>(o.y, g.y);
    o.z = glu_apply<1 + BE_GLU_SIGMOID>(o.z, g.z);
    o.w = glu_apply<1 + BE_GLU_SIGMOID>(o.w, g.w);
    quantize4_k45(o, (int)i, xq, xd);
}

/* ---- RoPE: angle and its cos/sin in double, rounded to float once (cpu_ref_rope) ---- */

/* cos and sin of pos * base^(-2i/n_rot) for pair i */
static __device__ __forceinline__ void rope_cos_sin(int32_t pos, float base, int i, int n_rot, float *cs, float *sn)
{
    double theta = (double)pos * pow((double)base, -2.0 * i / n_rot);
    *cs = (float)cos(theta);
    *sn = (float)sin(theta);
}

/* Rotate pair i of the head at v in place: NORM pairs (2i, 2i+1), NEOX (i, i + n_rot/2). */
static __device__ __forceinline__ void rope_pair(float *v, int i, int n_rot, bool neox, float cs, float sn)
{
    int i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
    float a = v[i0], b = v[i1];
    v[i0] = a * cs - b * sn;
    v[i1] = a * sn + b * cs;
}

/* ---- KV cache element: F32, or F16/BF16 rounded to nearest even ------------------- */

static __device__ __forceinline__ void kv_put(void *cache, uint32_t type, int64_t i, float v)
{
    if (type == GLIM_TYPE_F32)
        ((float *)cache)[i] = v;
    else if (type == GLIM_TYPE_F16)
        ((__half *)cache)[i] = __float2half_rn(v);
    else
        ((__nv_bfloat16 *)cache)[i] = __float2bfloat16_rn(v);
}

static inline bool kv_type_ok(uint32_t type)
{
    return type == GLIM_TYPE_F32 || type == GLIM_TYPE_F16 || type == GLIM_TYPE_BF16;
}

#endif
