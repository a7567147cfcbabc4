/*
 * gemv_kquant.cu — matmul and get_rows for every weight type the CUDA
 * backend runs: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K.
 *
 * Each type is described by a "unit": the piece of one weight row that one
 * lane decodes per step, as RUNS runs of RUNLEN consecutive weights (Q4_K,
 * Q5_K, Q4_0: 2 runs of 4; Q6_K: 4 runs of 4; Q8_0, F16, BF16, F32: 8), laid
 * out so consecutive lanes read consecutive weight bytes and consecutive
 * activations (coalesced; the first version read whole 64-weight chunks per
 * lane and its strided x loads cost 8x the L1 traffic: docs/CUDA.md).
 * Decoding computes each weight in fp32 exactly as quant_ref.c does
 * ((d*sc)*q - dmin*m, no contraction), so get_rows is bit-exact. The 16-row tile layouts of
 * Q4_K/Q6_K (CUDA_DT_*_T16) use the row-major units' arithmetic at other addresses.
 *
 *  - n_rows <= GEMV_MAX_ROWS, quantized weights: int8-activation dp4a GEMV
 *    (gemv_q8.cu), unless the backend is exact (GLIM_CUDA_EXACT=1).
 *  - n_rows <= GEMV_MAX_ROWS otherwise (and exact): GEMV. One warp per weight row, lanes walk the
 *    row's units (consecutive lanes read consecutive bytes), each decoded
 *    unit is multiplied with up to 8 activation rows (f32 FMA), warp-shuffle
 *    reduction. The weights stream once per 8 activation rows.
 *  - larger n_rows: GEMM. Weight row tiles are dequantized to bf16, the
 *    activations converted to bf16 once, and cuBLAS multiplies with fp32
 *    accumulation. F32 weights go straight to cublasSgemm (exact f32).
 * Timings: dev/cuda/gemv_bench.cu and docs/CUDA.md.
 */
#include "cuda_util.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>

#define GEMV_MAX_ROWS 16
#define GEMV_WARPS 4                 /* warps (= weight rows) per block */
#define GEMM_TILE_BYTES (64u << 20)  /* bf16 dequantized weight tile */

/* A weight as the kernels see it. */
struct wview {
    const uint8_t *p;   /* device data in dev_type layout */
    int64_t        k;   /* row length */
    int64_t        n;   /* rows */
};

static __device__ __forceinline__ float h2f(uint32_t bits)
{
    return __half2float(__ushort_as_half((unsigned short)(bits & 0xffffu)));
}

/* small non-negative int -> float with one LOP + one FADD (exact for q < 2^23) */
static __device__ __forceinline__ float u2f(uint32_t q)
{
    return __int_as_float(0x4B000000 | q) - 8388608.0f;
}

/* byte i (0..11) of the 12 scale bytes held in three words, without a local array */
static __device__ __forceinline__ uint32_t sbyte(uint32_t s0, uint32_t s1, uint32_t s2, int i)
{
    uint32_t w = i < 4 ? s0 : i < 8 ? s1 : s2;
    return (w >> (8 * (i & 3))) & 0xffu;
}

static __device__ __forceinline__ void k4_scale_min(uint32_t s0, uint32_t s1, uint32_t s2, int j, uint32_t *sc,
                                                    uint32_t *m)
{
    if (j < 4) {
        *sc = sbyte(s0, s1, s2, j) & 63;
        *m = sbyte(s0, s1, s2, j + 4) & 63;
    } else {
        *sc = (sbyte(s0, s1, s2, j + 4) & 0x0f) | ((sbyte(s0, s1, s2, j - 4) >> 6) << 4);
        *m = (sbyte(s0, s1, s2, j + 4) >> 4) | ((sbyte(s0, s1, s2, j) >> 6) << 4);
    }
}

/* ---- units ------------------------------------------------------------------
 * load(v, row, u, w): decode unit u of row `row` into w[RUNS*RUNLEN];
 * start(u, r): index in the row of run r's first weight. */

struct unit_f32 {
    static const int RUNS = 1, RUNLEN = 8;
    static __device__ __forceinline__ int64_t start(int64_t u, int r) { return 8 * u; }
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        const float4 *p = (const float4 *)(v.p + (row * v.k + 8 * u) * 4);
        float4 a = p[0], b = p[1];
        w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
        w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
    }
};

template <bool BF>
struct unit_half {
    static const int RUNS = 1, RUNLEN = 8;
    static __device__ __forceinline__ int64_t start(int64_t u, int r) { return 8 * u; }
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        uint4 q = *(const uint4 *)(v.p + (row * v.k + 8 * u) * 2);
        uint32_t a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (BF) {
                w[2 * i] = __uint_as_float(a[i] << 16);
                w[2 * i + 1] = __uint_as_float(a[i] & 0xffff0000u);
            } else {
                w[2 * i] = h2f(a[i]);
                w[2 * i + 1] = h2f(a[i] >> 16);
            }
        }
    }
};

/* The quantized units below are 8 (Q6_K: 16) weights per lane in runs of 4, so that
 * consecutive lanes read consecutive weight bytes AND consecutive activations: a
 * warp's float4 loads of x touch 4 cache lines, not 32. */

/* Q8_0, SoA: qs[nb_total][32], d[nb_total]; unit = 8 weights (4 per block) */
struct unit_q8_0 {
    static const int RUNS = 1, RUNLEN = 8;
    static __device__ __forceinline__ int64_t start(int64_t u, int r) { return 8 * u; }
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        int64_t nb_total = v.k / 32 * v.n, ib = row * (v.k / 32) + (u >> 2);
        uint2 q = *(const uint2 *)(v.p + ib * 32 + 8 * (u & 3));
        float d = h2f(((const uint16_t *)(v.p + nb_total * 32))[ib]);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = __fmul_rn(d, (float)(int8_t)(q.x >> (8 * i)));
            w[4 + i] = __fmul_rn(d, (float)(int8_t)(q.y >> (8 * i)));
        }
    }
};

/* Q4_0, SoA: qs[nb_total][16], d[nb_total]; w = d*(q-8); unit j (4 per block): bytes 4j..4j+3,
 * low nibbles = weights 4j.., high = 16+4j.. */
struct unit_q4_0 {
    static const int RUNS = 2, RUNLEN = 4;
    static __device__ __forceinline__ int64_t start(int64_t u, int r) { return 32 * (u >> 2) + 4 * (u & 3) + 16 * r; }
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        int64_t nb_total = v.k / 32 * v.n, ib = row * (v.k / 32) + (u >> 2);
        uint32_t q = *(const uint32_t *)(v.p + ib * 16 + 4 * (u & 3));
        float d = h2f(((const uint16_t *)(v.p + nb_total * 16))[ib]);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t b = (q >> (8 * i)) & 0xffu;
            w[i] = __fmul_rn(d, u2f(b & 15) - 8.0f);
            w[4 + i] = __fmul_rn(d, u2f(b >> 4) - 8.0f);
        }
    }
};

/* Q4_K / Q5_K (GGUF blocks, 144/176 bytes): unit u = (block u/32, chunk c = (u/8)%4, j = u%8):
 * qs bytes 32c+4j..+3 -> weights 64c+4j.. (low nibbles) and 64c+32+4j.. (high nibbles) */
template <bool Q5>
struct unit_k45 {
    static const int RUNS = 2, RUNLEN = 4;
    static const int BYTES = Q5 ? 176 : 144;
    static __device__ __forceinline__ int64_t start(int64_t u, int r)
    {
        return 256 * (u >> 5) + 64 * ((u >> 3) & 3) + 4 * (u & 7) + 32 * r;
    }
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        int c = (int)((u >> 3) & 3), j = (int)(u & 7);
        const uint8_t *blk = v.p + (row * (v.k / 256) + (u >> 5)) * BYTES;
        uint4 hdr = *(const uint4 *)blk;     /* d, dmin, 12 scale bytes: one load per lane, same line */
        uint32_t q = *(const uint32_t *)(blk + (Q5 ? 48 : 16) + 32 * c + 4 * j);
        uint32_t hb = Q5 ? *(const uint32_t *)(blk + 16 + 4 * j) : 0;
        decode(hdr, q, hb, c, w);
    }
    /* the unit's weights from its block header, code bytes qs[32c + 4j, +4) and (Q5) high bits */
    static __device__ __forceinline__ void decode(uint4 hdr, uint32_t q, uint32_t hb, int c, float *w)
    {
        float d = h2f(hdr.x), dmin = h2f(hdr.x >> 16);
        uint32_t sc0, m0, sc1, m1;
        k4_scale_min(hdr.y, hdr.z, hdr.w, 2 * c, &sc0, &m0);
        k4_scale_min(hdr.y, hdr.z, hdr.w, 2 * c + 1, &sc1, &m1);
        float d0 = __fmul_rn(d, (float)sc0), mn0 = __fmul_rn(dmin, (float)m0);
        float d1 = __fmul_rn(d, (float)sc1), mn1 = __fmul_rn(dmin, (float)m1);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t byte = (q >> (8 * i)) & 0xffu, lo = byte & 15, hi = byte >> 4;
            if (Q5) {
                uint32_t hbyte = (hb >> (8 * i)) & 0xffu;
                lo |= ((hbyte >> (2 * c)) & 1) << 4;
                hi |= ((hbyte >> (2 * c + 1)) & 1) << 4;
            }
            w[i] = __fsub_rn(__fmul_rn(d0, u2f(lo)), mn0);
            w[4 + i] = __fsub_rn(__fmul_rn(d1, u2f(hi)), mn1);
        }
    }
};

/* Q6_K, SoA: ql[nb][128], qh[nb][64], sc[nb][16], d[nb]. Unit u: block u/16, half h = (u/8)&1,
 * l0 = 4*(u&7); runs g = 0..3 of 4 weights start at 128h + 32g + l0. w = (d*sc)*(q-32). */
struct unit_q6_k {
    static const int RUNS = 4, RUNLEN = 4;
    static __device__ __forceinline__ int64_t start(int64_t u, int g)
    {
        return (u >> 4) * 256 + 128 * ((u >> 3) & 1) + 32 * g + 4 * (u & 7);
    }
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        int64_t nb = v.k / 256 * v.n, ib = row * (v.k / 256) + (u >> 4);
        int h = (int)((u >> 3) & 1), l0 = 4 * (int)(u & 7);
        const uint8_t *ql = v.p + ib * 128 + 64 * h + l0;
        uint32_t A = *(const uint32_t *)ql, B = *(const uint32_t *)(ql + 32);
        uint32_t H = *(const uint32_t *)(v.p + nb * 128 + ib * 64 + 32 * h + l0);
        const int8_t *sc = (const int8_t *)(v.p + nb * 192 + ib * 16) + 8 * h + l0 / 16;
        decode(A, B, H, h2f(((const uint16_t *)(v.p + nb * 208))[ib]), sc, 2, w);
    }
    /* the unit's weights from ql bytes A = ql[64h + l0, +4), B = ql[64h + 32 + l0, +4),
     * H = qh[32h + l0, +4), d, and its 4 scales at sc[0], sc[step], sc[2 step], sc[3 step] */
    static __device__ __forceinline__ void decode(uint32_t A, uint32_t B, uint32_t H, float d, const int8_t *sc,
                                                  int step, float *w)
    {
        float ds[4];
#pragma unroll
        for (int g = 0; g < 4; g++)
            ds[g] = __fmul_rn(d, (float)sc[step * g]);
#pragma unroll
        for (int l = 0; l < 4; l++) {
            uint32_t a = (A >> (8 * l)) & 0xffu, b = (B >> (8 * l)) & 0xffu, hb = (H >> (8 * l)) & 0xffu;
            w[l] = __fmul_rn(ds[0], u2f((a & 15) | ((hb & 3) << 4)) - 32.0f);
            w[4 + l] = __fmul_rn(ds[1], u2f((b & 15) | (((hb >> 2) & 3) << 4)) - 32.0f);
            w[8 + l] = __fmul_rn(ds[2], u2f((a >> 4) | (((hb >> 4) & 3) << 4)) - 32.0f);
            w[12 + l] = __fmul_rn(ds[3], u2f((b >> 4) | (((hb >> 6) & 3) << 4)) - 32.0f);
        }
    }
};

/* Q4_K and Q6_K in 16-row tiles (CUDA_DT_Q4_K_T16 / _Q6_K_T16, cuda_util.cuh): the units and
 * arithmetic of unit_k45<false> / unit_q6_k, read from the tile records, so results are
 * bit-equal to the row-major layouts. */
struct unit_q4k_t16 : unit_k45<false> {
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        int c = (int)((u >> 3) & 3), j = (int)(u & 7), r = (int)(row & 15);
        const uint8_t *rec = cuda_t16_rec(v.p, row, v.k / 256, u >> 5, CUDA_T16_Q4K_BYTES);
        uint4 hdr = *(const uint4 *)(rec + 2048 + 16 * r);
        uint32_t q = *(const uint32_t *)(rec + cuda_t16_run_pos(r, 32 * c + 4 * j));
        decode(hdr, q, 0, c, w);
    }
};

struct unit_q6k_t16 : unit_q6_k {
    static __device__ __forceinline__ void load(const wview &v, int64_t row, int64_t u, float *w)
    {
        int h = (int)((u >> 3) & 1), l0 = 4 * (int)(u & 7), r = (int)(row & 15);
        const uint8_t *rec = cuda_t16_rec(v.p, row, v.k / 256, u >> 4, CUDA_T16_Q6K_BYTES);
        const uint8_t *q = rec + cuda_t16_run_pos(r, l0);   /* in run 0; ql runs 2h, 2h + 1, qh run 4 + h */
        uint32_t A = *(const uint32_t *)(q + 1024 * h), B = *(const uint32_t *)(q + 1024 * h + 512);
        uint32_t H = *(const uint32_t *)(q + 2048 + 512 * h);
        /* scales 8h + l0/16 + 2g (g = 0..3) sit 4 bytes apart */
        const int8_t *sc = (const int8_t *)(rec + cuda_t16_q6_sc_pos(r, 8 * h + l0 / 16));
        decode(A, B, H, h2f(*(const uint16_t *)(rec + 3328 + 2 * r)), sc, 4, w);
    }
};

/* ---- GEMV ---------------------------------------------------------------------
 * y[r][row] = sum_k x[r][k] * W[row][k] for r < nr <= NR.  x: [nr][K], y: [nr][N] */
template <class U, int NR>
static __global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_kernel(wview v, const float *__restrict__ x, float *__restrict__ y, int nr)
{
    const int E = U::RUNS * U::RUNLEN;
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (row >= v.n)
        return;
    int64_t n_units = v.k / E;
    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; r++)
        acc[r] = 0.0f;
#pragma unroll 4
    for (int64_t u = lane; u < n_units; u += 32) {   /* unrolled: several loads in flight per lane */
        float w[E];
        U::load(v, row, u, w);
#pragma unroll
        for (int g = 0; g < U::RUNS; g++) {
            int64_t k0 = U::start(u, g);
#pragma unroll
            for (int r = 0; r < NR; r++) {
                if (r >= nr)
                    break;
                const float4 *xp = (const float4 *)(x + r * v.k + k0);
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < U::RUNLEN / 4; i++) {
                    float4 xv = __ldg(xp + i);
                    const float *wg = w + g * U::RUNLEN + 4 * i;
                    s = fmaf(xv.x, wg[0], s);
                    s = fmaf(xv.y, wg[1], s);
                    s = fmaf(xv.z, wg[2], s);
                    s = fmaf(xv.w, wg[3], s);
                }
                acc[r] += s;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++) {
        float s = acc[r];
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0 && r < nr)
            y[r * v.n + row] = s;
    }
}

/* Plain types with a row length that is not a multiple of 8 (or unaligned x): one warp per row, scalar. */
static __device__ __forceinline__ float plain_get(const uint8_t *p, uint32_t type, int64_t i)
{
    if (type == GLIM_TYPE_F32)
        return ((const float *)p)[i];
    uint32_t b = ((const uint16_t *)p)[i];
    return type == GLIM_TYPE_BF16 ? __uint_as_float(b << 16) : h2f(b);
}

static __global__ void gemv_plain_kernel(wview v, uint32_t type, const float *x, float *y, int nr)
{
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (row >= v.n)
        return;
    for (int r = 0; r < nr; r++) {
        float s = 0.0f;
        for (int64_t i = lane; i < v.k; i += 32)
            s = fmaf(x[r * v.k + i], plain_get(v.p, type, row * v.k + i), s);
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0)
            y[r * v.n + row] = s;
    }
}

/* ---- dequantization (get_rows, GEMM tiles) ---------------------------------------
 * out[i][:] = W[row_i][:], row_i = ids ? ids[i] : row0 + i, for i < n_out. */
template <class U, typename T>
static __global__ void dequant_kernel(wview v, const int32_t *ids, int64_t row0, int64_t n_out, T *out)
{
    const int E = U::RUNS * U::RUNLEN;
    int64_t n_units = v.k / E, total = n_out * n_units;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = t / n_units, u = t % n_units;
        int64_t row = ids ? (int64_t)ids[i] : row0 + i;
        if (row < 0 || row >= v.n)
            continue;   /* out-of-range id: the row stays as it was (model code validates ids) */
        float w[E];
        U::load(v, row, u, w);
        T *o = out + i * v.k;
#pragma unroll
        for (int g = 0; g < U::RUNS; g++) {
            int64_t k0 = U::start(u, g);
#pragma unroll
            for (int j = 0; j < U::RUNLEN; j++) {
                if (sizeof(T) == 4)
                    ((float *)o)[k0 + j] = w[g * U::RUNLEN + j];
                else
                    ((__nv_bfloat16 *)o)[k0 + j] = __float2bfloat16_rn(w[g * U::RUNLEN + j]);
            }
        }
    }
}

template <typename T>
static __global__ void dequant_plain_kernel(wview v, uint32_t type, const int32_t *ids, int64_t row0,
                                            int64_t n_out, T *out)
{
    int64_t total = n_out * v.k;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = t / v.k, e = t % v.k;
        int64_t row = ids ? (int64_t)ids[i] : row0 + i;
        if (row < 0 || row >= v.n)
            continue;
        float f = plain_get(v.p, type, row * v.k + e);
        if (sizeof(T) == 4)
            ((float *)out)[t] = f;
        else
            ((__nv_bfloat16 *)out)[t] = __float2bfloat16_rn(f);
    }
}

static __global__ void f32_to_bf16_kernel(const float *x, __nv_bfloat16 *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

/* ---- dispatch -------------------------------------------------------------------- */

bool cuda_type_supported(uint32_t type)
{
    switch (type) {
    case GLIM_TYPE_F32: case GLIM_TYPE_F16: case GLIM_TYPE_BF16: case GLIM_TYPE_Q8_0:
    case GLIM_TYPE_Q4_0: case GLIM_TYPE_Q4_K: case GLIM_TYPE_Q5_K: case GLIM_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

size_t cuda_weight_dev_bytes(uint32_t type, int64_t k, int64_t n, bool t16, uint32_t *dev_type)
{
    *dev_type = type;
    if (t16 && (type == GLIM_TYPE_Q4_K || type == GLIM_TYPE_Q6_K) && k % 256 == 0) {
        *dev_type = type == GLIM_TYPE_Q4_K ? CUDA_DT_Q4_K_T16 : CUDA_DT_Q6_K_T16;
        return quant_t16_bytes(type, k, n);
    }
    if (type == GLIM_TYPE_Q8_0)
        *dev_type = CUDA_DT_Q8_0_SOA;
    else if (type == GLIM_TYPE_Q4_0)
        *dev_type = CUDA_DT_Q4_0_SOA;
    else if (type == GLIM_TYPE_Q6_K)
        *dev_type = CUDA_DT_Q6_K_SOA;
    return cuda_type_supported(type) ? quant_row_bytes(type, k) * (size_t)n : 0;
}

/* Call F(unit) for the weight's device layout; plain types with unaligned shapes use the scalar path. */
#define DISPATCH_UNIT(dev_type, F)                                         \
    switch (dev_type) {                                                    \
    case GLIM_TYPE_F32: F(unit_f32); break;                                \
    case GLIM_TYPE_F16: F(unit_half<false>); break;                        \
    case GLIM_TYPE_BF16: F(unit_half<true>); break;                        \
    case CUDA_DT_Q8_0_SOA: F(unit_q8_0); break;                            \
    case CUDA_DT_Q4_0_SOA: F(unit_q4_0); break;                            \
    case GLIM_TYPE_Q4_K: F(unit_k45<false>); break;                        \
    case GLIM_TYPE_Q5_K: F(unit_k45<true>); break;                         \
    case CUDA_DT_Q6_K_SOA: F(unit_q6_k); break;                            \
    case CUDA_DT_Q4_K_T16: F(unit_q4k_t16); break;                         \
    case CUDA_DT_Q6_K_T16: F(unit_q6k_t16); break;                         \
    default: break;                                                        \
    }

static bool is_plain(uint32_t t)
{
    return t == GLIM_TYPE_F32 || t == GLIM_TYPE_F16 || t == GLIM_TYPE_BF16;
}

template <class U>
static void gemv_launch(struct cuda_ctx *c, const wview &v, const float *x, float *y, int nr)
{
    unsigned grid = (unsigned)((v.n + GEMV_WARPS - 1) / GEMV_WARPS);
    if (nr == 1)
        gemv_kernel<U, 1><<<grid, GEMV_WARPS * 32, 0, c->stream>>>(v, x, y, 1);
    else if (nr == 2)
        gemv_kernel<U, 2><<<grid, GEMV_WARPS * 32, 0, c->stream>>>(v, x, y, 2);
    else if (nr <= 4)
        gemv_kernel<U, 4><<<grid, GEMV_WARPS * 32, 0, c->stream>>>(v, x, y, nr);
    else
        gemv_kernel<U, 8><<<grid, GEMV_WARPS * 32, 0, c->stream>>>(v, x, y, nr);
}

template <class U, typename T>
static void dequant_launch(struct cuda_ctx *c, const wview &v, const int32_t *ids, int64_t row0, int64_t n_out,
                           T *out)
{
    int64_t units = n_out * (v.k / (U::RUNS * U::RUNLEN));
    dequant_kernel<U, T><<<cuda_blocks(units, 256), 256, 0, c->stream>>>(v, ids, row0, n_out, out);
}

/* plain-type rows that the 8-wide units cannot read (row length not a multiple of 8) */
static bool needs_scalar(const struct be_weight *w)
{
    return is_plain(w->dev_type) && w->k % 8 != 0;
}

template <typename T>
static void dequant_rows(struct cuda_ctx *c, const struct be_weight *w, const int32_t *ids, int64_t row0,
                         int64_t n_out, T *out)
{
    wview v = {(const uint8_t *)w->dev, w->k, w->n};
    if (is_plain(w->dev_type) && w->k % 8 != 0) {
        dequant_plain_kernel<T><<<cuda_blocks(n_out * w->k, 256), 256, 0, c->stream>>>(v, w->dev_type, ids, row0,
                                                                                       n_out, out);
        return;
    }
#define DQ(U) dequant_launch<U, T>(c, v, ids, row0, n_out, out)
    DISPATCH_UNIT(w->dev_type, DQ)
#undef DQ
}

void cuda_get_rows(struct cuda_ctx *c, float *y, const struct be_weight *w, const int32_t *ids, int n)
{
    if (n <= 0)
        return;
    dequant_rows<float>(c, w, ids, 0, n, y);
    CUDA_LAUNCHED(c, "get_rows");
}

static void matmul_gemv(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    wview v = {(const uint8_t *)w->dev, w->k, w->n};
    if (((uintptr_t)x & 15) != 0 && !needs_scalar(w)) {      /* a view into a row: 16-byte loads need a copy */
        size_t nbytes = (size_t)n_rows * w->k * sizeof(float);
        if (!cuda_buf_reserve(c, &c->xbf, nbytes) ||
            CUDA_TRY(c, cudaMemcpyAsync(c->xbf.p, x, nbytes, cudaMemcpyDeviceToDevice, c->stream)))
            return;
        x = (const float *)c->xbf.p;
    }
    for (int r0 = 0; r0 < n_rows; r0 += 8) {
        int nr = GLIM_MIN(8, n_rows - r0);
        const float *xr = x + (int64_t)r0 * w->k;
        float *yr = y + (int64_t)r0 * w->n;
        if (needs_scalar(w)) {
            unsigned grid = (unsigned)((v.n + GEMV_WARPS - 1) / GEMV_WARPS);
            gemv_plain_kernel<<<grid, GEMV_WARPS * 32, 0, c->stream>>>(v, w->dev_type, xr, yr, nr);
            continue;
        }
#define GV(U) gemv_launch<U>(c, v, xr, yr, nr)
        DISPATCH_UNIT(w->dev_type, GV)
#undef GV
    }
}

/* y[n_rows][N] = x[n_rows][K] . W^T in column-major terms: Y^T (N x n_rows) = W' ^T . X' */
static void matmul_gemm(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    int64_t K = w->k, N = w->n;
    const float one = 1.0f, zero = 0.0f;
    if (w->dev_type == GLIM_TYPE_F32) {
        CUBLAS_TRY(c, cublasSgemm(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, n_rows, (int)K, &one,
                                  (const float *)w->dev, (int)K, x, (int)K, &zero, y, (int)N));
        return;
    }
    int64_t tile_rows = GLIM_MAX((int64_t)64, (int64_t)(GEMM_TILE_BYTES / (2 * K)) / 64 * 64);
    tile_rows = GLIM_MIN(tile_rows, N);
    if (!cuda_buf_reserve(c, &c->wtile, (size_t)(tile_rows * K * 2)) ||
        !cuda_buf_reserve(c, &c->xbf, (size_t)n_rows * K * 2))
        return;
    __nv_bfloat16 *xb = (__nv_bfloat16 *)c->xbf.p, *wt = (__nv_bfloat16 *)c->wtile.p;
    f32_to_bf16_kernel<<<cuda_blocks((int64_t)n_rows * K, 256), 256, 0, c->stream>>>(x, xb, (int64_t)n_rows * K);
    for (int64_t n0 = 0; n0 < N; n0 += tile_rows) {
        int64_t nt = GLIM_MIN(tile_rows, N - n0);
        dequant_rows<__nv_bfloat16>(c, w, NULL, n0, nt, wt);
        if (CUDA_LAUNCHED(c, "matmul dequant"))
            return;
        if (CUBLAS_TRY(c, cublasGemmEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nt, n_rows, (int)K, &one, wt,
                                       CUDA_R_16BF, (int)K, xb, CUDA_R_16BF, (int)K, &zero, y + n0, CUDA_R_32F,
                                       (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)))
            return;
    }
}

/* y written over the x whose int8 copy is cached: the copy is stale */
static void forget_if_overlap(struct cuda_ctx *c, const float *y, int64_t n_floats)
{
    const char *ys = (const char *)y, *ye = ys + (size_t)n_floats * sizeof(float);
    const char *xs = (const char *)c->xq_src, *xe = xs + (size_t)c->xq_nr * c->xq_k * sizeof(float);
    if (c->xq_src && ys < xe && xs < ye)
        cuda_xq_forget(c);
}

void cuda_matmul(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    if (n_rows <= 0 || w->n <= 0)
        return;
    if (n_rows <= GEMV_MAX_ROWS && !c->exact && cuda_q8_supported(w->dev_type))
        cuda_matmul_q8(c, y, w, x, n_rows);   /* int8 activations, dp4a: gemv_q8.cu */
    else if (n_rows <= GEMV_MAX_ROWS)
        matmul_gemv(c, y, w, x, n_rows);
    else
        matmul_gemm(c, y, w, x, n_rows);
    CUDA_LAUNCHED(c, "matmul");
    forget_if_overlap(c, y, (int64_t)n_rows * w->n);
}

void cuda_matmul_n(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws, const float *x,
                   int n_rows)
{
    if (n_rows <= 0)
        return;
    if (n_rows <= GEMV_MAX_ROWS && !c->exact && cuda_q8_batchable(n, ws)) {
        cuda_matmul_q8_n(c, n, ys, ws, x, n_rows, NULL, 0);
        for (int i = 0; i < n; i++)
            forget_if_overlap(c, ys[i], (int64_t)n_rows * ws[i]->n);
        return;
    }
    for (int i = 0; i < n; i++)
        cuda_matmul(c, ys[i], ws[i], x, n_rows);
}

void cuda_matmul_glu(struct cuda_ctx *c, float *y, const struct be_weight *w, float *x, const float *g, int act,
                     int n_rows)
{
    if (n_rows <= 0 || (n_rows == 1 && act == BE_GLU_SIGMOID && (c->dbg_skip & CUDA_SKIP_WO)))
        return;   /* (the second: a bench knob, wrong output) */
    if (n_rows <= GEMV_MAX_ROWS && !c->exact && cuda_q8_supported(w->dev_type)) {
        cuda_matmul_q8_n(c, 1, &y, &w, x, n_rows, g, act);   /* the gate is applied while quantizing */
        forget_if_overlap(c, y, (int64_t)n_rows * w->n);
        return;
    }
    int64_t n = (int64_t)n_rows * w->k;
    cuda_xq_forget(c);
    if (act == BE_GLU_SIGMOID)
        cuda_mul_sigmoid(c, x, g, n);
    else
        cuda_swiglu(c, x, g, x, n);
    cuda_matmul(c, y, w, x, n_rows);
}
