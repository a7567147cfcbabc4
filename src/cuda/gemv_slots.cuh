/*
 * gemv_slots.cuh — private to src/cuda: the per-slot arithmetic of the int8-activation
 * GEMVs (gemv_q8.cu: v2, v3) and the multi-weight job they share.
 * A "slot" is the run of weights one lane handles at a time (32; Q8_0: 16): fetch()
 * issues its loads, decode() unpacks them, xload() loads the activations, dot() gives
 * the slot's contribution. Every GEMV version sums a row's slots per lane in the same
 * order with the same arithmetic, so their results are bit-equal (tests/test_cuda_ops.c);
 * the T16 slots (16-row tile layouts) share the row-major slots' arithmetic, so theirs too.
 */
#ifndef GLIM_GEMV_SLOTS_CUH
#define GLIM_GEMV_SLOTS_CUH

#include "attn_prep.cuh"
#include "cuda_util.cuh"

#include <cuda_fp16.h>

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

/* streaming 16-byte weight load: read once, keep L1 for the activations. (Evict-first in L2
 * as well, to keep the small kernels' inputs cached, measured no faster: 160.2 t/s both on
 * 2026-12-03, and again on 2026-12-06 (H100: 145.65 vs 145.75-146.23), where the span's copies
 * gained 6.7% from it.) */
static __device__ __forceinline__ uint4 ldw16(const void *p)
{
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

/* the same for 8 bytes (8-aligned) */
static __device__ __forceinline__ uint2 ldw8(const void *p)
{
    uint2 r;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}

/* Quantize one 32-value block held one value per lane (lane = element n % 32 of the row): the
 * int8 copy at row position n (XL_PLAIN) or cuda_xq_pos_k45(n) (XL_K45), and xd = {d, d * sum(q)}
 * written by lane 0. Whole warp. */
static __device__ __forceinline__ void quant_block32(float v, int lane, int64_t n, int layout, int8_t *xq_row,
                                                     float2 *xd_blk)
{
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.0f;
    int q = amax > 0.0f ? __float2int_rn(v / d) : 0;
    int sum = q;
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    xq_row[layout == XL_PLAIN ? n : cuda_xq_pos_k45(n)] = (int8_t)q;
    if (lane == 0)
        *xd_blk = make_float2(d, d * (float)sum);
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

/* high nibbles: w holds 16 * nibble per byte (the code byte & 0xf0, no shift), read as
 * unsigned bytes; the sum is a multiple of 16, so >> 4 gives dot16 of the nibbles exactly
 * (|sum| < 2^24). One AND per word instead of a shift and an AND. */
static __device__ __forceinline__ int dot16_hi(const uint32_t w[4], int4 x)
{
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int xi = i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
        asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(s) : "r"(w[i]), "r"(xi));
    }
    return s >> 4;
}

/* x runs of slot s (32 weights) for the permuted layouts: super-block g = s/8, lane t = s%8 */
/* activation loads: read-only cache from global memory (NC), or plain (shared memory: v4) */
template <bool NC, class T>
static __device__ __forceinline__ T ldx(const T *p)
{
    return NC ? __ldg(p) : *p;
}

template <bool NC>
static __device__ __forceinline__ void xload_runs(const int8_t *xq, int64_t s, struct xslot *x)
{
    const int8_t *base = xq + (s >> 3) * 256 + 16 * (s & 7);
    x->a = ldx<NC>((const int4 *)base);
    x->b = ldx<NC>((const int4 *)(base + 128));
}

/* ---- weight slots -------------------------------------------------------------
 * slot_load(w, v, row, s): decode slot s of row `row`; xload(xq, xd, s): its activations;
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
            if (Q5) {
                hi[i] = (qa[i] >> 4) & 0x0f0f0f0fu;
                lo[i] |= (qh[i] & 0x01010101u) << 4;
                hi[i] |= ((qh[i] >> 1) & 0x01010101u) << 4;
            } else {
                hi[i] = qa[i] & 0xf0f0f0f0u;   /* 16 x nibble: dot16_hi */
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
    template <bool NC = true>
    static __device__ __forceinline__ void xload(const int8_t *xq, const float2 *xd, int64_t s, struct xslot *x)
    {
        xload_runs<NC>(xq, s, x);
        x->ds = ldx<NC>((const float4 *)(xd + (s >> 3) * 8 + 2 * ((s & 7) >> 1)));
    }
    __device__ __forceinline__ float dot(const struct xslot &x) const
    {
        float r = x.ds.x * i2f(scl * dot16(lo, x.a));
        r = fmaf(x.ds.z, i2f(sch * (Q5 ? dot16(hi, x.b) : dot16_hi(hi, x.b))), r);
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
    template <bool NC = true>
    static __device__ __forceinline__ void xload(const int8_t *xq, const float2 *xd, int64_t s, struct xslot *x)
    {
        int t = (int)(s & 7), h = t >> 2, g = (t >> 1) & 1, f = t & 1;
        const int8_t *base = xq + (s >> 3) * 256 + 16 * (8 * g + 4 * h + f);
        x->a = ldx<NC>((const int4 *)base);
        x->b = ldx<NC>((const int4 *)(base + 32));
        const float2 *p = xd + (s >> 3) * 8 + 4 * h + g;
        float2 da = ldx<NC>(p), db = ldx<NC>(p + 2);
        x->ds = make_float4(da.x, da.y, db.x, db.y);
    }
    __device__ __forceinline__ float dot(const struct xslot &x) const
    {
        return fmaf(dh * x.ds.z, i2f(dot16(hi, x.b)), dl * x.ds.x * i2f(dot16(lo, x.a)));
    }
};

/* Q4_K and Q6_K in 16-row tiles (CUDA_DT_Q4_K_T16 / _Q6_K_T16, cuda_util.cuh): the slots and
 * arithmetic of slot_k45<false> / slot_q6_k, only fetch() differs. A slot's 16 code bytes
 * (qs[16t, +16); ql[16t, +16) and qh[32h + 16f, +16)) are two 8-byte pieces 16 bytes apart in
 * the tile record, the header (Q4_K), scales and d (Q6_K) have their own places. Same raw
 * bytes, same decode, so the sums are bit-equal to the row-major layouts'. No decoded-scale
 * table (weight_init builds none for T16). */
struct slot_q4k_t16 : slot_k45<false> {
    static __device__ __forceinline__ void fetch(const wview8 &v, int64_t row, int64_t sl, int u, raw &r)
    {
        int t = (int)(sl & 7), rr = (int)(row & 15);
        const uint8_t *rec = cuda_t16_rec(v.p, row, v.k >> 8, (sl >> 3) + 4 * u, CUDA_T16_Q4K_BYTES);
        r.hdr = ldw16(rec + 2048 + 16 * rr);
        const uint8_t *q = rec + cuda_t16_run_pos(rr, 16 * t);
        uint2 a = ldw8(q), b = ldw8(q + 16);
        r.q = make_uint4(a.x, a.y, b.x, b.y);
    }
};

struct slot_q6k_t16 : slot_q6_k {
    static __device__ __forceinline__ void fetch(const wview8 &v, int64_t row, int64_t sl, int u, raw &r)
    {
        int t = (int)(sl & 7), h = t >> 2, g = (t >> 1) & 1, f = t & 1, rr = (int)(row & 15);
        const uint8_t *rec = cuda_t16_rec(v.p, row, v.k >> 8, (sl >> 3) + 4 * u, CUDA_T16_Q6K_BYTES);
        const uint8_t *ql = rec + cuda_t16_run_pos(rr, 16 * t), *qh = rec + cuda_t16_run_pos(rr, 128 + 32 * h + 16 * f);
        uint2 a = ldw8(ql), b = ldw8(ql + 16), c = ldw8(qh), e = ldw8(qh + 16);
        r.ql = make_uint4(a.x, a.y, b.x, b.y);
        r.qh = make_uint4(c.x, c.y, e.x, e.y);
        /* scales 8h + 2g + f and + 4: 8 bytes apart in the permuted order */
        const int8_t *sc = (const int8_t *)(rec + cuda_t16_q6_sc_pos(rr, 8 * h + 2 * g + f));
        r.sl = __ldg(sc);
        r.sh = __ldg(sc + 8);
        r.d = __ldg((const unsigned short *)(rec + 3328 + 2 * rr));
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
            hi[i] = a[i] & 0xf0f0f0f0u;   /* 16 x nibble: dot16_hi */
        }
        d = h2f8(r.d);
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
        int s = dot16(lo, x.a) + dot16_hi(hi, x.b);
        return d * fmaf(x.ds.x, i2f(s), -8.0f * x.ds.y);
    }
};


/* fetch and decode slot s of row `row` in one go (v2) */
template <class W>
static __device__ __forceinline__ void slot_load(W &w, const wview8 &v, int64_t row, int64_t s)
{
    typename W::raw r;
    W::fetch(v, row, s, 0, r);
    w.decode(r, s);
}

#define GEMV_MAX_PARTS 4

enum { WK_Q4K, WK_Q4K_AUX, WK_Q5K, WK_Q5K_AUX, WK_Q6K, WK_Q80, WK_Q40, WK_Q4K_T16, WK_Q6K_T16 };

struct gemv_part {
    wview8  v;
    float  *y;       /* [nr][v.n] */
    int64_t task0;   /* first warp task of this part; a task = rw weight rows */
    int     kind, rw;
};

struct gemv_job {
    gemv_part   p[GEMV_MAX_PARTS];
    int         n_parts;
    int64_t     n_tasks;
    unsigned   *prep_cnt;   /* != NULL: parts 0, 1, 2 are q, k, v of one token, and the last warp to
                             * finish a head's rows (q head; k and v head together) runs attn_prep
                             * on it (gemv_prep_arrive); per head the tasks arrived, 0 between launches */
    prep_params prep;
    unsigned   *ready;      /* != NULL (gemv3p_kernel): the last CTA to end sets ready[1] = 1 after every
                             * row is stored (ready[0] counts the CTAs, back to 0 by that CTA); for a
                             * kernel that polls it instead of waiting for the grid (attn_short.cu) */
};

/* After a warp stored rows [row0, row0 + rw) of part `part` of a job with prep_cnt: count them
 * for their head, and if they were the head's last, prepare it (attn_prep.cuh). rw divides
 * head_dim (the launcher checks), so a task never spans two heads. */
static __device__ __forceinline__ void gemv_prep_arrive(const gemv_job &job, int part, int64_t row0, int lane)
{
    __shared__ float prep_row[Q8_WARPS][PREP_MAX_DIM];
    const prep_params &p = job.prep;
    if (part > 2 || (part == 0 && p.n_qb == 0))
        return;
    int D = p.head_dim, head = (int)(row0 / D);
    int slot = part == 0 ? head : p.n_head + head;
    unsigned need = part == 0 ? (unsigned)(D / job.p[0].rw) : (unsigned)(D / job.p[1].rw + D / job.p[2].rw);
    prep_count_arrive(p, job.prep_cnt, slot, need, part == 0 ? head : p.n_qb + head, prep_row[threadIdx.x >> 5], lane);
}

/* gemv_mma.cu: GEMV v5 (tensor cores) for one activation row: launches the Q4_K and Q6_K
 * weights of the n sharing x, marks them in taken[n] and returns how many (0: v5 off or none) */
int cuda_gemv5(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws, const int8_t *xq,
               const float2 *xd, bool *taken);
/* gemv_mma.cu: the same for 2..16 activation rows (opt-in GLIM_CUDA_V5_NR=1) */
int cuda_gemv5_nr(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws, const int8_t *xq,
                  const float2 *xd, int nr, bool *taken);

#endif
