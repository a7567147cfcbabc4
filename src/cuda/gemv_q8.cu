/*
 * gemv_q8.cu — the fast matrix-vector path for quantized weights: the
 * activations are quantized once to int8 and the weights' integer codes are
 * multiplied with __dp4a, 4 weights per instruction (model.md §4.4, on the
 * original GGUF blocks or the lossless SoA repacks of cuda_util.cuh).
 *
 * WHY. The f32 GEMV in gemv_kquant.cu converts every weight to a float
 * ((d*sc)*q - dmin*m) before its FMA; that is ~5 ALU ops per weight and ran at
 * 15% of copy bandwidth for Q4_K (docs/CUDA.md). Here a lane handles one
 * "slot" of 32 weights (Q8_0: 16): it loads 16 bytes of codes, decodes the
 * sub-block scales once, and per activation row does 8 dp4a and 2-3 float
 * ops. The K-quant minimum term factors out of the sum:
 *   sum_i (d*sc*q_i - dmin*m) * dx*qx_i = d*sc*dx*sum(q_i*qx_i) - dmin*m*(dx*sum(qx_i))
 * with dx*sum(qx_i) precomputed per 32 activations by the quantizer.
 *
 * Activations: xq[nr][K] int8 and xd[nr][K/32] float2 {d, d*sum(q)}, with
 * q = rint(x/d), d = amax/127 per 32 consecutive values (0 when amax = 0).
 * Within each 256-weight super-block the 16-byte runs of xq are permuted
 * (XL_K45, see cuda_xq_pos_k45) so that lane t of the 8 Q4_K/Q5_K lanes that share a
 * super-block reads its two runs at 16t and 128+16t: every warp-wide x load
 * is 4 full 128-byte lines (Q6_K lanes read the same lines in another order).
 * Q8_0/Q4_0 keep the natural order (XL_PLAIN).
 *
 * The result is not bit-comparable with the f32 reference (int8 activations:
 * relative L2 error ~3e-3; tests/test_cuda_ops.c uses 1e-2, like llama.cpp).
 * The exact f32 path stays available: backend_cuda_set_exact / GLIM_CUDA_EXACT=1.
 *
 * Layout of the GEMV: one warp per RW weight rows (RW = 2 for Q4_K/Q4_0 when N
 * leaves >= 4 blocks per SM, else 1), lanes walk
 * the row's slots (consecutive lanes read consecutive code bytes), up to
 * NR = 16 activation rows per pass, warp-shuffle reduction.
 */
#include "cuda_util.cuh"

#include <cuda_fp16.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "quant/quant_ref.h"
}

#define Q8_WARPS 4   /* warps per block */

enum { XL_PLAIN = 0, XL_K45 = 1 };

struct wview8 {
    const uint8_t *p;   /* device data in dev_type layout */
    int64_t        k;   /* row length */
    int64_t        n;   /* rows */
    const uint8_t *aux; /* Q4_K/Q5_K decoded scales (cuda_k45_aux_build) or NULL */
};

/* One slot of activations: two 16-byte runs of int8 and their scales
 * (ds = {d_a, d_a*sum_a, d_b, d_b*sum_b}). */
struct xslot {
    int4   a, b;
    float4 ds;
};

static __device__ __forceinline__ float h2f8(uint32_t bits)
{
    return __half2float(__ushort_as_half((unsigned short)(bits & 0xffffu)));
}

/* streaming 16-byte weight load: read once, keep L1 for the activations */
static __device__ __forceinline__ uint4 ldw16(const void *p)
{
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

/* int -> float for |v| < 2^22 with two full-rate ops (I2F runs at a quarter of the
 * ALU rate on sm_80/90 and was a large share of the K-quant slot's cost) */
static __device__ __forceinline__ float i2f(int v)
{
    return __int_as_float(0x4B400000 + v) - 12582912.0f;
}

static __device__ __forceinline__ int dot16(const uint32_t w[4], int4 x)
{
    int s = __dp4a((int)w[0], x.x, 0);
    s = __dp4a((int)w[1], x.y, s);
    s = __dp4a((int)w[2], x.z, s);
    return __dp4a((int)w[3], x.w, s);
}

/* x runs of slot s (32 weights) for the permuted layouts: super-block g = s/8, lane t = s%8 */
static __device__ __forceinline__ void xload_runs(const int8_t *xq, int64_t s, struct xslot *x)
{
    const int8_t *base = xq + (s >> 3) * 256 + 16 * (s & 7);
    x->a = __ldg((const int4 *)base);
    x->b = __ldg((const int4 *)(base + 128));
}

/* ---- weight slots -------------------------------------------------------------
 * load(v, row, s): decode slot s of row `row`; xload(xq, xd, s): its activations;
 * dot(x): the slot's contribution. */

/* Q4_K / Q5_K, GGUF blocks. Slot s: block s/8, lane t = s%8 = 2c + h: code bytes
 * qs[32c+16h .. +15]; low nibbles = weights 64c+16h.. (sub-block 2c), high nibbles =
 * 64c+32+16h.. (sub-block 2c+1). The min term is added by the h = 0 lane only.
 * AUX (2026-12-02 evening): the 6-bit scales/mins come pre-decoded from v.aux (one u32
 * per slot: {sc[2c], sc[2c+1], m[2c], m[2c+1]}) and only d/dmin from the block header,
 * instead of the 16-byte header load and the lane-dependent unpack. */
template <bool Q5, bool AUX = false>
struct slot_k45 {
    static const int SLOT = 32, LAYOUT = XL_K45, BYTES = Q5 ? 176 : 144, RW_MAX = Q5 ? 1 : 2;
    static const int U = Q5 ? 4 : 8;   /* v3: slots in flight per lane (register budget) */
    /* the slot's bytes as loaded: fetch() only issues loads, decode() only computes, so a
     * lane can have several slots' loads in flight before it needs any of them (v3) */
    struct raw {
        uint4    hdr, q, hb;
        uint32_t sm;
    };
    uint32_t lo[4], hi[4];
    int      scl, sch;    /* 6-bit scales of the two sub-blocks (sc * dot stays < 2^22) */
    float    d, ml, mh;   /* ml, mh = dmin*m, 0 on the h = 1 lane */

    /* slot s = sl + 32u, sl = lane + a multiple of 32: block (sl >> 3) + 4u, lane t = sl & 7,
     * so the U fetches of a lane differ by constant offsets */
    static __device__ __forceinline__ void fetch(const wview8 &v, int64_t row, int64_t sl, int u, raw &r)
    {
        int t = (int)(sl & 7), c = t >> 1, h = t & 1;
        int64_t ib = row * (v.k >> 8) + (sl >> 3) + 4 * u;
        const uint8_t *blk = v.p + ib * BYTES;
        if (AUX) {
            r.hdr.x = __ldg((const unsigned int *)blk);   /* d, dmin only */
            r.sm = __ldg((const unsigned int *)(v.aux + ib * 16) + c);
        } else {
            r.hdr = ldw16(blk);
        }
        r.q = ldw16(blk + (Q5 ? 48 : 16) + 16 * t);
        if (Q5)
            r.hb = ldw16(blk + 16 + 16 * h);
    }
    __device__ __forceinline__ void decode(const raw &r, int64_t s)
    {
        int t = (int)(s & 7), c = t >> 1, h = t & 1;
        uint32_t qa[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
        uint32_t qh[4] = {0, 0, 0, 0};
        if (Q5) {
            qh[0] = r.hb.x >> (2 * c), qh[1] = r.hb.y >> (2 * c), qh[2] = r.hb.z >> (2 * c), qh[3] = r.hb.w >> (2 * c);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = qa[i] & 0x0f0f0f0fu;
            hi[i] = (qa[i] >> 4) & 0x0f0f0f0fu;
            if (Q5) {
                lo[i] |= (qh[i] & 0x01010101u) << 4;
                hi[i] |= ((qh[i] >> 1) & 0x01010101u) << 4;
            }
        }
        d = h2f8(r.hdr.x);
        float dmin = h ? 0.0f : h2f8(r.hdr.x >> 16);
        if (AUX) {
            scl = (int)(r.sm & 0xffu);
            sch = (int)((r.sm >> 8) & 0xffu);
            ml = dmin * i2f((int)((r.sm >> 16) & 0xffu));
            mh = dmin * i2f((int)(r.sm >> 24));
            return;
        }
        /* 6-bit scales/mins of sub-blocks 2c, 2c+1 (quant_k4_scale_min_get, 4 at a time) */
        uint32_t s0 = r.hdr.y, s1 = r.hdr.z, s2 = r.hdr.w;
        uint32_t scw = c < 2 ? (s0 & 0x3f3f3f3fu) : ((s2 & 0x0f0f0f0fu) | ((s0 >> 2) & 0x30303030u));
        uint32_t mw = c < 2 ? (s1 & 0x3f3f3f3fu) : (((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 2) & 0x30303030u));
        int sh = 16 * (c & 1);
        scl = (int)((scw >> sh) & 0xffu);
        sch = (int)((scw >> (sh + 8)) & 0xffu);
        ml = dmin * i2f((int)((mw >> sh) & 0xffu));
        mh = dmin * i2f((int)((mw >> (sh + 8)) & 0xffu));
    }
    __device__ __forceinline__ void load(const wview8 &v, int64_t row, int64_t s)
    {
        raw r;
        fetch(v, row, s, 0, r);
        decode(r, s);
    }
    static __device__ __forceinline__ void xload(const int8_t *xq, const float2 *xd, int64_t s, struct xslot *x)
    {
        xload_runs(xq, s, x);
        x->ds = __ldg((const float4 *)(xd + (s >> 3) * 8 + 2 * ((s & 7) >> 1)));
    }
    __device__ __forceinline__ float dot(const struct xslot &x) const
    {
        float r = x.ds.x * i2f(scl * dot16(lo, x.a));
        r = fmaf(x.ds.z, i2f(sch * dot16(hi, x.b)), r);
        return fmaf(d, r, -fmaf(ml, x.ds.y, mh * x.ds.w));
    }
};

/* Q6_K, SoA (ql[nb][128], qh[nb][64], sc[nb][16], d[nb]). Slot s: block s/8, lane
 * t = s%8 = 4h + 2g + f (half h, group g in {0,1}, f = which 16 of 32): ql bytes
 * 64h+16(2g+f) ..+15, qh bytes 32h+16f ..+15; low nibbles = group g (weights
 * 128h+32g+16f..), high nibbles = group g+2 (+64). Codes -32 become signed bytes.
 * The activations use the K45 order (one quantized x serves Q4_K/Q5_K/Q6_K weights of
 * one input, so q/k/v/gate share one quantize and one launch): the low run is natural
 * 16-run 8h+2g+f, at K45 position 8g+4h+f; the high run 8h+4+2g+f at 8g+4h+2+f. */
struct slot_q6_k {
    static const int SLOT = 32, LAYOUT = XL_K45, RW_MAX = 1, U = 4;
    struct raw {
        uint4   ql, qh;
        int8_t  sl, sh;
        uint16_t d;
    };
    uint32_t lo[4], hi[4];
    float    dl, dh;

    static __device__ __forceinline__ void fetch(const wview8 &v, int64_t row, int64_t sl, int u, raw &r)
    {
        int64_t nb = (v.k >> 8) * v.n, ib = row * (v.k >> 8) + (sl >> 3) + 4 * u;
        int t = (int)(sl & 7), h = t >> 2, g = (t >> 1) & 1, f = t & 1;
        r.ql = ldw16(v.p + ib * 128 + 16 * t);   /* 64h + 16(2g+f) = 16t */
        r.qh = ldw16(v.p + nb * 128 + ib * 64 + 32 * h + 16 * f);
        const int8_t *sc = (const int8_t *)(v.p + nb * 192 + ib * 16) + 8 * h + 2 * g + f;
        r.sl = __ldg(sc);
        r.sh = __ldg(sc + 4);
        r.d = __ldg((const unsigned short *)(v.p + nb * 208) + ib);
    }
    __device__ __forceinline__ void decode(const raw &r, int64_t s)
    {
        int g = (int)((s >> 1) & 1);
        uint32_t a[4] = {r.ql.x, r.ql.y, r.ql.z, r.ql.w}, b[4] = {r.qh.x, r.qh.y, r.qh.z, r.qh.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t bl = b[i] >> (2 * g);
            uint32_t l6 = (a[i] & 0x0f0f0f0fu) | ((bl & 0x03030303u) << 4);
            uint32_t h6 = ((a[i] >> 4) & 0x0f0f0f0fu) | (((bl >> 4) & 0x03030303u) << 4);
            /* per byte q - 32 without borrows: (q + 96) ^ 0x80 = q - 32 (mod 256) */
            lo[i] = ((l6 | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
            hi[i] = ((h6 | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
        }
        float d = h2f8(r.d);
        dl = d * i2f(r.sl);
        dh = d * i2f(r.sh);
    }
    __device__ __forceinline__ void load(const wview8 &v, int64_t row, int64_t s)
    {
        raw r;
        fetch(v, row, s, 0, r);
        decode(r, s);
    }
    static __device__ __forceinline__ void xload(const int8_t *xq, const float2 *xd, int64_t s, struct xslot *x)
    {
        int t = (int)(s & 7), h = t >> 2, g = (t >> 1) & 1, f = t & 1;
        const int8_t *base = xq + (s >> 3) * 256 + 16 * (8 * g + 4 * h + f);
        x->a = __ldg((const int4 *)base);
        x->b = __ldg((const int4 *)(base + 32));
        const float2 *p = xd + (s >> 3) * 8 + 4 * h + g;
        float2 da = __ldg(p), db = __ldg(p + 2);
        x->ds = make_float4(da.x, da.y, db.x, db.y);
    }
    __device__ __forceinline__ float dot(const struct xslot &x) const
    {
        return fmaf(dh * x.ds.z, i2f(dot16(hi, x.b)), dl * x.ds.x * i2f(dot16(lo, x.a)));
    }
};

/* Q8_0, SoA (qs[nb][32], d[nb]). Slot s = 16 weights: block s/2, bytes 16(s%2)..+15. */
struct slot_q8_0 {
    static const int SLOT = 16, LAYOUT = XL_PLAIN, RW_MAX = 1, U = 8;
    struct raw {
        uint4    w;
        uint16_t d;
    };
    uint32_t q[4];
    float    d;

    static __device__ __forceinline__ void fetch(const wview8 &v, int64_t row, int64_t sl, int u, raw &r)
    {
        int64_t nb = (v.k >> 5) * v.n, ib = row * (v.k >> 5) + (sl >> 1) + 16 * u;
        r.w = ldw16(v.p + ib * 32 + 16 * (sl & 1));
        r.d = __ldg((const unsigned short *)(v.p + nb * 32) + ib);
    }
    __device__ __forceinline__ void decode(const raw &r, int64_t)
    {
        q[0] = r.w.x, q[1] = r.w.y, q[2] = r.w.z, q[3] = r.w.w;
        d = h2f8(r.d);
    }
    __device__ __forceinline__ void load(const wview8 &v, int64_t row, int64_t s)
    {
        raw r;
        fetch(v, row, s, 0, r);
        decode(r, s);
    }
    static __device__ __forceinline__ void xload(const int8_t *xq, const float2 *xd, int64_t s, struct xslot *x)
    {
        x->a = __ldg((const int4 *)(xq + 16 * s));
        x->ds.x = __ldg((const float *)(xd + (s >> 1)));
    }
    __device__ __forceinline__ float dot(const struct xslot &x) const
    {
        return d * x.ds.x * i2f(dot16(q, x.a));
    }
};

/* Q4_0, SoA (qs[nb][16], d[nb]); w = d*(q-8). Slot s = block s: low nibbles = weights
 * 0..15, high = 16..31. */
struct slot_q4_0 {
    static const int SLOT = 32, LAYOUT = XL_PLAIN, RW_MAX = 2, U = 8;
    struct raw {
        uint4    w;
        uint16_t d;
    };
    uint32_t lo[4], hi[4];
    float    d;

    static __device__ __forceinline__ void fetch(const wview8 &v, int64_t row, int64_t sl, int u, raw &r)
    {
        int64_t nb = (v.k >> 5) * v.n, ib = row * (v.k >> 5) + sl + 32 * u;
        r.w = ldw16(v.p + ib * 16);
        r.d = __ldg((const unsigned short *)(v.p + nb * 16) + ib);
    }
    __device__ __forceinline__ void decode(const raw &r, int64_t)
    {
        uint32_t a[4] = {r.w.x, r.w.y, r.w.z, r.w.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = a[i] & 0x0f0f0f0fu;
            hi[i] = (a[i] >> 4) & 0x0f0f0f0fu;
        }
        d = h2f8(r.d);
    }
    __device__ __forceinline__ void load(const wview8 &v, int64_t row, int64_t s)
    {
        raw r;
        fetch(v, row, s, 0, r);
        decode(r, s);
    }
    static __device__ __forceinline__ void xload(const int8_t *xq, const float2 *xd, int64_t s, struct xslot *x)
    {
        x->a = __ldg((const int4 *)(xq + 32 * s));
        x->b = __ldg((const int4 *)(xq + 32 * s + 16));
        float2 ds = __ldg(xd + s);
        x->ds = make_float4(ds.x, ds.y, 0.0f, 0.0f);
    }
    __device__ __forceinline__ float dot(const struct xslot &x) const
    {
        int s = dot16(lo, x.a) + dot16(hi, x.b);
        return d * fmaf(x.ds.x, i2f(s), -8.0f * x.ds.y);
    }
};

/* ---- activation quantizer ----------------------------------------------------------
 * One warp per 32 consecutive values of x[nr][k]; writes xq (permuted per layout) and
 * xd = {d, d*sum(q)}. */

/* ACT: x is first multiplied by sigmoid(g) (BE_GLU_SIGMOID) or silu(g) (BE_GLU_SILU),
 * with the float expressions of ops.cu's mul_sigmoid / swiglu (matmul_glu). */
template <int ACT>
static __global__ void quantize_x_kernel(const float *__restrict__ x, const float *__restrict__ g, int64_t k,
                                         int64_t n_blk, int layout, int8_t *__restrict__ xq, float2 *__restrict__ xd)
{
    int lane = threadIdx.x & 31;
    int64_t b = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (b >= n_blk)
        return;
    int64_t kb = k >> 5, row = b / kb, n = (b % kb) * 32 + lane;   /* n: index within the row */
    float v = x[row * k + n];
    if (ACT == 1 + BE_GLU_SIGMOID) {
        v *= 1.0f / (1.0f + expf(-g[row * k + n]));
    } else if (ACT == 1 + BE_GLU_SILU) {
        float gv = g[row * k + n];
        v = gv / (1.0f + expf(-gv)) * v;
    }
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.0f;
    int q = amax > 0.0f ? __float2int_rn(v / d) : 0;
    int sum = q;
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    int64_t pos = layout == XL_PLAIN ? n : cuda_xq_pos_k45(n);
    xq[row * k + pos] = (int8_t)q;
    if (lane == 0)
        xd[b] = make_float2(d, d * (float)sum);
}

/* ---- GEMV ---------------------------------------------------------------------
 * y[r][row] = sum_k x[r][k] * W[row][k] for r < nr <= NR; RW weight rows per warp
 * share each activation load. */
template <class W, int NR, int RW>
static __global__ void __launch_bounds__(Q8_WARPS * 32)
gemv_q8_kernel(wview8 v, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, float *__restrict__ y, int nr)
{
    int lane = threadIdx.x & 31;
    int64_t row0 = ((int64_t)blockIdx.x * Q8_WARPS + (threadIdx.x >> 5)) * RW;
    if (row0 >= v.n)
        return;
    int64_t n_slots = v.k / W::SLOT, kd = v.k >> 5;
    int64_t rows[RW];
#pragma unroll
    for (int i = 0; i < RW; i++)
        rows[i] = row0 + i < v.n ? row0 + i : v.n - 1;
    float acc[RW][NR];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++)
            acc[i][r] = 0.0f;
#pragma unroll 2
    for (int64_t s = lane; s < n_slots; s += 32) {
        W w[RW];
#pragma unroll
        for (int i = 0; i < RW; i++)
            w[i].load(v, rows[i], s);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            if (r >= nr)
                break;
            struct xslot xs;
            W::xload(xq + r * v.k, xd + r * kd, s, &xs);
#pragma unroll
            for (int i = 0; i < RW; i++)
                acc[i][r] += w[i].dot(xs);
        }
    }
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float s = acc[i][r];
            for (int o = 16; o > 0; o >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0 && r < nr && row0 + i < v.n)
                y[r * v.n + row0 + i] = s;
        }
}

/* ---- GEMV v3: deep loads, several weights per launch ----------------------------
 * WHY (docs/CUDA.md): v2 above keeps about two slots' loads in flight per lane and a
 * warp owns one 3.7 KB row, so each row costs several serial memory round trips plus
 * the warp's start and reduction; small matrices (q, k, v, gate: 256..4096 rows) were
 * one short wave at 4-40% of bandwidth. v3 issues the loads of U slots per lane
 * (W::U, 4 KB per warp; RW = 2 rows: half as many slots) before decoding any of them, and one launch covers up to
 * GEMV_MAX_PARTS weights that multiply the same x (q/k/v/gate, FFN gate/up): one
 * quantize, one launch, one wave. Same per-slot arithmetic as v2, so the results are
 * bit-equal to v2's. */
#define GEMV_MAX_PARTS 4

enum { WK_Q4K, WK_Q4K_AUX, WK_Q5K, WK_Q5K_AUX, WK_Q6K, WK_Q80, WK_Q40 };

struct gemv_part {
    wview8  v;
    float  *y;       /* [nr][v.n] */
    int64_t task0;   /* first warp task of this part; a task = rw weight rows */
    int     kind, rw;
};

struct gemv_job {
    gemv_part p[GEMV_MAX_PARTS];
    int       n_parts;
    int64_t   n_tasks;
};

template <class W, int NR, int RW, int U>
static __device__ __forceinline__ void gemv3_rows(const wview8 &v, int64_t row0, const int8_t *__restrict__ xq,
                                                  const float2 *__restrict__ xd, float *__restrict__ y, int nr,
                                                  int lane)
{
    int64_t n_slots = v.k / W::SLOT, kd = v.k >> 5;
    int64_t rows[RW];
#pragma unroll
    for (int i = 0; i < RW; i++)
        rows[i] = row0 + i < v.n ? row0 + i : v.n - 1;
    float acc[RW][NR];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++)
            acc[i][r] = 0.0f;
    for (int64_t s0 = 0; s0 < n_slots; s0 += 32 * U) {
        typename W::raw raw[U][RW];
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (s0 + lane + 32 * u < n_slots) {
#pragma unroll
                for (int i = 0; i < RW; i++)
                    W::fetch(v, rows[i], s0 + lane, u, raw[u][i]);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t s = s0 + lane + 32 * u;
            if (s < n_slots) {
                W w[RW];
#pragma unroll
                for (int i = 0; i < RW; i++)
                    w[i].decode(raw[u][i], s);
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    if (r >= nr)
                        break;
                    struct xslot xs;
                    W::xload(xq + r * v.k, xd + r * kd, s, &xs);
#pragma unroll
                    for (int i = 0; i < RW; i++)
                        acc[i][r] += w[i].dot(xs);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float a = acc[i][r];
            for (int o = 16; o > 0; o >>= 1)
                a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0 && r < nr && row0 + i < v.n)
                y[r * v.n + row0 + i] = a;
        }
}

/* One warp per task; the part is found by comparing with each part's first task (unrolled,
 * so the job stays in the parameter bank instead of being copied to local memory).
 * KS: which weight kinds the kernel has code for. A kernel's register count is the
 * largest of its branches, so the Q4_K/Q6_K mix of Q4_K_M files gets its own kernel. */
enum { KS_K4Q6, KS_ALL };

template <int NR, int KS>
static __device__ __forceinline__ void gemv3_task(const gemv_job &job, int64_t task, const int8_t *__restrict__ xq,
                                                  const float2 *__restrict__ xd, int nr)
{
    wview8 v = job.p[0].v;
    float *y = job.p[0].y;
    int64_t task0 = 0;
    int kind = job.p[0].kind, rw = job.p[0].rw;
#pragma unroll
    for (int i = 1; i < GEMV_MAX_PARTS; i++)
        if (i < job.n_parts && task >= job.p[i].task0) {
            v = job.p[i].v, y = job.p[i].y, task0 = job.p[i].task0;
            kind = job.p[i].kind, rw = job.p[i].rw;
        }
    int64_t row0 = (task - task0) * rw;
    int lane = threadIdx.x & 31;
    typedef slot_k45<false> k4;
    typedef slot_k45<false, true> k4a;
    switch (kind) {
    case WK_Q4K:
        if (rw == 2)
            gemv3_rows<k4, NR, 2, k4::U / 2>(v, row0, xq, xd, y, nr, lane);
        else
            gemv3_rows<k4, NR, 1, k4::U>(v, row0, xq, xd, y, nr, lane);
        return;
    case WK_Q4K_AUX:
        if (rw == 2)
            gemv3_rows<k4a, NR, 2, k4a::U / 2>(v, row0, xq, xd, y, nr, lane);
        else
            gemv3_rows<k4a, NR, 1, k4a::U>(v, row0, xq, xd, y, nr, lane);
        return;
    case WK_Q6K: gemv3_rows<slot_q6_k, NR, 1, slot_q6_k::U>(v, row0, xq, xd, y, nr, lane); return;
    default: break;
    }
    if (KS == KS_K4Q6)
        return;
    typedef slot_k45<true> k5;
    typedef slot_k45<true, true> k5a;
    switch (kind) {
    case WK_Q5K: gemv3_rows<k5, NR, 1, k5::U>(v, row0, xq, xd, y, nr, lane); break;
    case WK_Q5K_AUX: gemv3_rows<k5a, NR, 1, k5a::U>(v, row0, xq, xd, y, nr, lane); break;
    case WK_Q80: gemv3_rows<slot_q8_0, NR, 1, slot_q8_0::U>(v, row0, xq, xd, y, nr, lane); break;
    case WK_Q40:
        if (rw == 2)
            gemv3_rows<slot_q4_0, NR, 2, slot_q4_0::U / 2>(v, row0, xq, xd, y, nr, lane);
        else
            gemv3_rows<slot_q4_0, NR, 1, slot_q4_0::U>(v, row0, xq, xd, y, nr, lane);
        break;
    default: break;
    }
}

/* One task per warp. (A grid-stride loop over tasks made ptxas spill 1.3-2.5 KB per
 * thread at the 128-register cap and halved decode speed: measured 2026-12-02.) */
template <int NR, int KS>
static __global__ void __launch_bounds__(Q8_WARPS * 32, NR == 1 ? 4 : 2)
gemv3_kernel(const gemv_job job, const int8_t *__restrict__ xq, const float2 *__restrict__ xd, int nr)
{
    int64_t task = (int64_t)blockIdx.x * Q8_WARPS + (threadIdx.x >> 5);
    if (task < job.n_tasks)
        gemv3_task<NR, KS>(job, task, xq, xd, nr);
}

template <int KS>
static void launch_v3(struct cuda_ctx *c, const gemv_job &job, const int8_t *xq, const float2 *xd)
{
    unsigned grid = (unsigned)((job.n_tasks + Q8_WARPS - 1) / Q8_WARPS);
    gemv3_kernel<1, KS><<<grid, Q8_WARPS * 32, 0, c->stream>>>(job, xq, xd, 1);
}

/* ---- dispatch -------------------------------------------------------------------- */

bool cuda_q8_supported(uint32_t dev_type)
{
    return dev_type == GLIM_TYPE_Q4_K || dev_type == GLIM_TYPE_Q5_K || dev_type == CUDA_DT_Q6_K_SOA ||
           dev_type == CUDA_DT_Q8_0_SOA || dev_type == CUDA_DT_Q4_0_SOA;
}

static int layout_of(uint32_t dev_type)
{
    bool k = dev_type == GLIM_TYPE_Q4_K || dev_type == GLIM_TYPE_Q5_K || dev_type == CUDA_DT_Q6_K_SOA;
    return k ? XL_K45 : XL_PLAIN;
}

/* Quantize x[nr][k] into c->xq unless the cached copy is of the same x in the same layout
 * (model code multiplies one normed x by q/k/v and by gate/up in a row; any other op or
 * a matmul that writes into x clears the cache: cuda_xq_forget). */
static bool quantize_x(struct cuda_ctx *c, const float *x, int64_t k, int nr, int layout, const float *g = NULL,
                       int act = 0)
{
    if (!g && c->xq_src == x && c->xq_k == k && c->xq_nr == nr && c->xq_layout == layout)
        return true;
    size_t q_bytes = (size_t)nr * k, d_bytes = (size_t)nr * (k / 32) * sizeof(float2);
    if (!cuda_buf_reserve(c, &c->xq, q_bytes + d_bytes))
        return false;
    int64_t n_blk = (int64_t)nr * (k / 32);
    int8_t *xq = (int8_t *)c->xq.p;
    float2 *xd = (float2 *)((uint8_t *)c->xq.p + q_bytes);
    unsigned grid = cuda_blocks(n_blk * 32, 256);
    if (!g)
        quantize_x_kernel<0><<<grid, 256, 0, c->stream>>>(x, NULL, k, n_blk, layout, xq, xd);
    else if (act == BE_GLU_SIGMOID)
        quantize_x_kernel<1 + BE_GLU_SIGMOID><<<grid, 256, 0, c->stream>>>(x, g, k, n_blk, layout, xq, xd);
    else
        quantize_x_kernel<1 + BE_GLU_SILU><<<grid, 256, 0, c->stream>>>(x, g, k, n_blk, layout, xq, xd);
    if (CUDA_LAUNCHED(c, "quantize_x"))
        return false;
    /* a gated copy is not x's copy: nothing to reuse */
    c->xq_src = g ? NULL : x, c->xq_k = k, c->xq_nr = nr, c->xq_layout = layout;
    return true;
}

bool cuda_xq_reserve(struct cuda_ctx *c, int64_t k, int nr, int8_t **xq, float2 **xd)
{
    if (c->exact || nr > 16 || k % 256)
        return false;
    size_t q_bytes = (size_t)nr * k, d_bytes = (size_t)nr * (k / 32) * sizeof(float2);
    if (!cuda_buf_reserve(c, &c->xq, q_bytes + d_bytes))
        return false;
    *xq = (int8_t *)c->xq.p;
    *xd = (float2 *)((uint8_t *)c->xq.p + q_bytes);
    return true;
}

void cuda_xq_filled(struct cuda_ctx *c, const float *x, int64_t k, int nr)
{
    c->xq_src = x, c->xq_k = k, c->xq_nr = nr, c->xq_layout = XL_K45;
}

static int rows_per_warp(struct cuda_ctx *c, int64_t n)
{
    static int forced = -1;   /* GLIM_CUDA_GEMV_RW=1|2: bench knob */
    if (forced < 0) {
        const char *e = getenv("GLIM_CUDA_GEMV_RW");
        forced = e && (e[0] == '1' || e[0] == '2') ? e[0] - '0' : 0;
    }
    if (forced)
        return forced;
    return n >= (int64_t)8 * 4 * c->n_sm ? 2 : 1;   /* 2 only while that leaves >= 4 blocks per SM */
}

/* RW_MAX: 2 weight rows per warp paid off for Q4_K/Q4_0 (fewer activation loads per
 * weight byte); for Q5_K/Q6_K/Q8_0 the extra registers cost more than they saved
 * (docs/CUDA.md, 2026-12-02 bench with GLIM_CUDA_GEMV_RW=1|2). */
template <class W, int NR>
static void launch_nr(struct cuda_ctx *c, const wview8 &v, const int8_t *xq, const float2 *xd, float *y, int nr)
{
    if (W::RW_MAX == 2 && rows_per_warp(c, v.n) == 2) {
        unsigned grid = (unsigned)((v.n + 2 * Q8_WARPS - 1) / (2 * Q8_WARPS));
        gemv_q8_kernel<W, NR, W::RW_MAX><<<grid, Q8_WARPS * 32, 0, c->stream>>>(v, xq, xd, y, nr);
    } else {
        unsigned grid = (unsigned)((v.n + Q8_WARPS - 1) / Q8_WARPS);
        gemv_q8_kernel<W, NR, 1><<<grid, Q8_WARPS * 32, 0, c->stream>>>(v, xq, xd, y, nr);
    }
}

template <class W>
static void launch(struct cuda_ctx *c, const wview8 &v, const int8_t *xq, const float2 *xd, float *y, int nr)
{
    if (nr == 1)
        launch_nr<W, 1>(c, v, xq, xd, y, nr);
    else if (nr == 2)
        launch_nr<W, 2>(c, v, xq, xd, y, nr);
    else if (nr <= 4)
        launch_nr<W, 4>(c, v, xq, xd, y, nr);
    else if (nr <= 8)
        launch_nr<W, 8>(c, v, xq, xd, y, nr);
    else
        launch_nr<W, 16>(c, v, xq, xd, y, nr);
}

/* v2: one launch per weight (GLIM_CUDA_GEMV=2) */
static void launch_v2(struct cuda_ctx *c, float *y, const struct be_weight *w, const int8_t *xq, const float2 *xd,
                      int n_rows)
{
    const uint8_t *aux = c->k45_aux ? (const uint8_t *)w->aux : NULL;
    wview8 v = {(const uint8_t *)w->dev, w->k, w->n, aux};
    switch (w->dev_type) {
    case GLIM_TYPE_Q4_K:
        if (aux)
            launch<slot_k45<false, true> >(c, v, xq, xd, y, n_rows);
        else
            launch<slot_k45<false> >(c, v, xq, xd, y, n_rows);
        break;
    case GLIM_TYPE_Q5_K:
        if (aux)
            launch<slot_k45<true, true> >(c, v, xq, xd, y, n_rows);
        else
            launch<slot_k45<true> >(c, v, xq, xd, y, n_rows);
        break;
    case CUDA_DT_Q6_K_SOA: launch<slot_q6_k>(c, v, xq, xd, y, n_rows); break;
    case CUDA_DT_Q8_0_SOA: launch<slot_q8_0>(c, v, xq, xd, y, n_rows); break;
    case CUDA_DT_Q4_0_SOA: launch<slot_q4_0>(c, v, xq, xd, y, n_rows); break;
    default: break;
    }
}

static int weight_kind(const struct cuda_ctx *c, const struct be_weight *w)
{
    bool aux = c->k45_aux && w->aux;
    switch (w->dev_type) {
    case GLIM_TYPE_Q4_K: return aux ? WK_Q4K_AUX : WK_Q4K;
    case GLIM_TYPE_Q5_K: return aux ? WK_Q5K_AUX : WK_Q5K;
    case CUDA_DT_Q6_K_SOA: return WK_Q6K;
    case CUDA_DT_Q8_0_SOA: return WK_Q80;
    case CUDA_DT_Q4_0_SOA: return WK_Q40;
    default: return -1;
    }
}

bool cuda_q8_batchable(int n, const struct be_weight *const *ws)
{
    if (n < 1 || n > GEMV_MAX_PARTS)
        return false;
    for (int i = 0; i < n; i++)
        if (!cuda_q8_supported(ws[i]->dev_type) || ws[i]->k != ws[0]->k ||
            layout_of(ws[i]->dev_type) != layout_of(ws[0]->dev_type))
            return false;
    return true;
}

void cuda_matmul_q8_n(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws,
                      const float *x, int n_rows, const float *g, int act)
{
    int64_t k = ws[0]->k;
    if (!quantize_x(c, x, k, n_rows, layout_of(ws[0]->dev_type), g, act))
        return;
    const int8_t *xq = (const int8_t *)c->xq.p;
    const float2 *xd = (const float2 *)((const uint8_t *)c->xq.p + (size_t)n_rows * k);
    /* v3 only for one activation row: with 8 rows its larger register set measured slower
     * than v2 (Q4_K 6656x19968: 72.6 vs 69.0 us; Q8_0: 115.8 vs 76.9 us) */
    if (c->gemv_v2 || n_rows > 1) {
        for (int i = 0; i < n; i++)
            launch_v2(c, ys[i], ws[i], xq, xd, n_rows);
        CUDA_LAUNCHED(c, "matmul q8 v2");
        return;
    }
    gemv_job job;
    memset(&job, 0, sizeof job);
    int64_t tasks = 0;
    bool k4q6 = true;
    for (int i = 0; i < n; i++) {
        const struct be_weight *w = ws[i];
        int kind = weight_kind(c, w);
        k4q6 = k4q6 && (kind == WK_Q4K || kind == WK_Q4K_AUX || kind == WK_Q6K);
        bool two = kind == WK_Q4K || kind == WK_Q4K_AUX || kind == WK_Q40;
        int rw = two && rows_per_warp(c, w->n) == 2 ? 2 : 1;
        const uint8_t *aux = kind == WK_Q4K_AUX || kind == WK_Q5K_AUX ? (const uint8_t *)w->aux : NULL;
        job.p[i].v = (wview8){(const uint8_t *)w->dev, w->k, w->n, aux};
        job.p[i].y = ys[i];
        job.p[i].task0 = tasks;
        job.p[i].kind = kind;
        job.p[i].rw = rw;
        tasks += (w->n + rw - 1) / rw;
    }
    job.n_parts = n;
    job.n_tasks = tasks;
    if (k4q6)
        launch_v3<KS_K4Q6>(c, job, xq, xd);
    else
        launch_v3<KS_ALL>(c, job, xq, xd);
    CUDA_LAUNCHED(c, "matmul q8 v3");
}

void cuda_matmul_q8(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    cuda_matmul_q8_n(c, 1, &y, &w, x, n_rows, NULL, 0);
}

/* ---- Q4_K/Q5_K decoded scales (be_weight.aux) ------------------------------------- */

size_t cuda_k45_aux_bytes(uint32_t type, int64_t k, int64_t n)
{
    if (type != GLIM_TYPE_Q4_K && type != GLIM_TYPE_Q5_K)
        return 0;
    return (size_t)(k / 256) * (size_t)n * 16;
}

/* Lossless: the same 6-bit values quant_k4_scale_min_get reads, one byte each, in the
 * order a GEMV lane of sub-block pair c wants them (slot_k45<., true>::load). */
void cuda_k45_aux_build(uint32_t type, const void *src, uint8_t *dst, int64_t k, int64_t n)
{
    size_t block_bytes = type == GLIM_TYPE_Q5_K ? sizeof(struct block_q5_k) : sizeof(struct block_q4_k);
    int64_t n_blocks = (k / 256) * n;
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *scales = (const uint8_t *)src + (size_t)b * block_bytes + 4;   /* after d, dmin */
        uint8_t *o = dst + (size_t)b * 16;
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            quant_k4_scale_min_get(scales, 2 * c, &sc0, &m0);
            quant_k4_scale_min_get(scales, 2 * c + 1, &sc1, &m1);
            o[4 * c + 0] = sc0;
            o[4 * c + 1] = sc1;
            o[4 * c + 2] = m0;
            o[4 * c + 3] = m1;
        }
    }
}
