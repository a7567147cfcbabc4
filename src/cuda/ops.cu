/*
 * ops.cu — element-wise and per-row ops of the CUDA backend: RMSNorm, RoPE,
 * residual add, sigmoid gate, SwiGLU, scale + soft-cap, strided row copy.
 * Semantics are those of src/cpu/cpu_ref.c (f32 throughout; the norm and rope
 * arithmetic is in rowops.cuh, shared with fused.cu). Every kernel
 * reads its per-step values (positions) from device memory, so they can be
 * captured in a CUDA graph. Called from backend_cuda.cu on ctx->stream.
 */
#include "rowops.cuh"

/* ---- RMSNorm: one block per row ---------------------------------------- */

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w       x, y: [n_rows][n] */
static __global__ void rmsnorm_kernel(float *y, const float *x, const float *w, int n, float eps)
{
    __shared__ double red[32];
    cuda_pdl_enter();
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    double ss = 0.0;                       /* double, as cpu_ref_rmsnorm */
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        ss += (double)xr[i] * xr[i];
    float r = rms_scale(block_sum(ss, red), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = rms_apply(xr[i], r, w, i);
}

/* Rows for which rms_vec_ok: every x and w load is issued before the reduction (one
 * memory round trip instead of three; the plain kernel was ~8 us per 6656-wide row
 * under ncu, 4 of them per layer). Same double sum and rounding. */
static __global__ void __launch_bounds__(RMS_VEC_THREADS) rmsnorm_vec_kernel(float *y, const float *x,
                                                                             const float *w, int n, float eps)
{
    __shared__ double red[32];
    cuda_pdl_enter();
    float4 *yr = (float4 *)(y + (int64_t)blockIdx.x * n);
    int n4 = n / 4;
    float4 xv[RMS_VEC_MAX], wv[RMS_VEC_MAX];
    rms_vec_load(xv, x + (int64_t)blockIdx.x * n, n4, 0.0f);
    rms_vec_load(wv, w, n4, 1.0f);
    float r = rms_scale(block_sum(rms_vec_sumsq(xv), red), n, eps);
#pragma unroll
    for (int j = 0; j < RMS_VEC_MAX; j++) {
        int i = threadIdx.x + j * RMS_VEC_THREADS;
        if (i >= n4)
            break;
        yr[i] = rms_vec_apply(xv[j], r, wv[j], w != NULL);
    }
}

void cuda_rmsnorm(struct cuda_ctx *c, float *y, const float *x, const float *w, int64_t n_rows, int n,
                  float eps)
{
    if (n_rows <= 0 || n <= 0)
        return;
    if (rms_vec_ok(n, (uintptr_t)x | (uintptr_t)y | (uintptr_t)w))
        cuda_launch_dep(c, dim3((unsigned)n_rows), dim3(RMS_VEC_THREADS), 0, rmsnorm_vec_kernel, y, x, w, n, eps);
    else
        cuda_launch_dep(c, dim3((unsigned)n_rows), dim3(rms_threads(n)), 0, rmsnorm_kernel, y, x, w, n, eps);
    CUDA_LAUNCHED(c, "rmsnorm");
}

/* ---- RoPE ---------------------------------------------------------------
 * One thread per (row, head, pair). */
static __global__ void rope_kernel(float *x, int n_rows, int n_head, int head_dim, int n_rot,
                                   const int32_t *pos, float base, bool neox)
{
    int half = n_rot / 2;
    int64_t total = (int64_t)n_rows * n_head * half;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int i = (int)(t % half);
        int64_t rh = t / half;                 /* row * n_head + head */
        float cs, sn;
        rope_cos_sin(pos[rh / n_head], base, i, n_rot, &cs, &sn);
        rope_pair(x + rh * head_dim, i, n_rot, neox, cs, sn);
    }
}

void cuda_rope(struct cuda_ctx *c, float *x, int n_rows, int n_head, int head_dim, int n_rot,
               const int32_t *pos, float base, bool neox)
{
    int64_t total = (int64_t)n_rows * n_head * (n_rot / 2);
    if (total <= 0)
        return;
    rope_kernel<<<cuda_blocks(total, 256), 256, 0, c->stream>>>(x, n_rows, n_head, head_dim, n_rot, pos,
                                                                 base, neox);
    CUDA_LAUNCHED(c, "rope");
}

/* ---- element-wise ---------------------------------------------------------- */

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __global__ void add_kernel(float *y, const float *x, int64_t n)
{
    GRID_STRIDE(i, n) y[i] += x[i];
}

static __global__ void mul_sigmoid_kernel(float *y, const float *g, int64_t n)
{
    GRID_STRIDE(i, n) y[i] *= 1.0f / (1.0f + expf(-g[i]));
}

static __global__ void swiglu_kernel(float *y, const float *gate, const float *up, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static __global__ void scale_softcap_kernel(float *y, int64_t n, float scale, float cap)
{
    GRID_STRIDE(i, n) y[i] = cap > 0.0f ? cap * tanhf(y[i] * scale / cap) : y[i] * scale;
}

static __global__ void copy_rows_kernel(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                                        int n_rows, int n)
{
    int64_t total = (int64_t)n_rows * n;
    GRID_STRIDE(t, total)
    {
        int64_t r = t / n, i = t % n;
        dst[r * dst_stride + i] = src[r * src_stride + i];
    }
}

void cuda_add(struct cuda_ctx *c, float *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    add_kernel<<<cuda_blocks(n, 256), 256, 0, c->stream>>>(y, x, n);
    CUDA_LAUNCHED(c, "add");
}

void cuda_mul_sigmoid(struct cuda_ctx *c, float *y, const float *g, int64_t n)
{
    if (n <= 0)
        return;
    mul_sigmoid_kernel<<<cuda_blocks(n, 256), 256, 0, c->stream>>>(y, g, n);
    CUDA_LAUNCHED(c, "mul_sigmoid");
}

void cuda_swiglu(struct cuda_ctx *c, float *y, const float *gate, const float *up, int64_t n)
{
    if (n <= 0)
        return;
    swiglu_kernel<<<cuda_blocks(n, 256), 256, 0, c->stream>>>(y, gate, up, n);
    CUDA_LAUNCHED(c, "swiglu");
}

void cuda_scale_softcap(struct cuda_ctx *c, float *y, int64_t n, float scale, float cap)
{
    if (n <= 0)
        return;
    scale_softcap_kernel<<<cuda_blocks(n, 256), 256, 0, c->stream>>>(y, n, scale, cap);
    CUDA_LAUNCHED(c, "scale_softcap");
}

void cuda_copy_rows(struct cuda_ctx *c, float *dst, int64_t dst_stride, const float *src,
                    int64_t src_stride, int n_rows, int n)
{
    if (n_rows <= 0 || n <= 0)
        return;
    if (dst_stride == n && src_stride == n) {
        CUDA_TRY(c, cudaMemcpyAsync(dst, src, (size_t)n_rows * n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    c->stream));
        return;
    }
    copy_rows_kernel<<<cuda_blocks((int64_t)n_rows * n, 256), 256, 0, c->stream>>>(dst, dst_stride, src,
                                                                                   src_stride, n_rows, n);
    CUDA_LAUNCHED(c, "copy_rows");
}

