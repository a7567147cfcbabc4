/*
 * gemv_mma_lane.h — private to src/cuda: one lane's share of GEMV v5 (gemv_mma.cu): what it
 * loads of a super-block of rows g and g+8 (fetch) and what it adds to their sums (compute).
 *
 * Written in the C subset of CUDA so that tests/test_gemv_mma_lane.c can run this very code on
 * the CPU, 32 threads for a warp, with the primitives below emulated (the mma by a barrier).
 * The includer defines:
 *   V5_FN                    function qualifiers (static __device__ __forceinline__ / static inline)
 *   V5_UNROLL                _Pragma("unroll") or nothing
 *   uint2, uint4, float2     CUDA's vector types
 *   v5_ldw16(p), v5_ldw8(p)  streaming loads of 16 / 8 weight bytes (uint4 / uint2)
 *   v5_ldx8(p)               8 activation bytes (uint2), v5_ldxd(p): a float2
 *   v5_ldu16(p) / v5_ldu32(p) a u16 / u32 of weight bytes
 *   v5_h2f(bits)             the f16 in the low 16 bits as float
 *   v5_i2f(v)                int -> float for |v| < 2^22 (gemv_slots.cuh i2f), v5_i2f_rn(v): any int
 *   V5_HD                    qualifiers of the work-split functions (host and device)
 *   v5_mma(c, sgn, a0, a1, a2, a3, b0, b1)
 *                            c[4] += A . B, mma.m16n8k32 (A u8, or s8 when sgn; B s8; C s32)
 * The fragment mapping is explained in gemv_mma.cu.
 */
#ifndef GLIM_GEMV_MMA_LANE_H
#define GLIM_GEMV_MMA_LANE_H

#include <stdint.h>

struct v5_part {
    const uint8_t *p;          /* Q4_K blocks row-major, or Q6_K SoA (CUDA_DT_Q6_K_SOA), or T16 tiles */
    float         *y;
    int64_t        n, tile0;   /* rows; first tile of this part */
    int            kind;       /* gemv_mma.cu: which of a mixed job's two weight types (0, 1) */
};

/* the row a lane loads for row r of an n-row part: the row-major layouts have no rows past n (the
 * kernel loads row n - 1 and drops its sums), the tiles have zero rows up to a multiple of 16 */
V5_HD int64_t v5_row_loaded(int64_t r, int64_t n, int tiled)
{
    return tiled || r < n ? r : n - 1;
}

/* ---- the work split: a job's (tile, super-block) units, tile-major, cut evenly over n_warps
 * warps (n_warps <= units, so each gets at least one): warp w takes [v5_split_lo(w),
 * v5_split_lo(w + 1)). A tile cut between warps is merged from pieces, piece = warp - the first
 * warp holding one of its units; stride bounds the pieces of any tile. */
V5_HD int64_t v5_split_lo(int64_t w, int64_t units, int64_t n_warps)
{
    return (w < n_warps ? w : n_warps) * units / n_warps;
}

/* the warp whose range holds unit x */
V5_HD int64_t v5_split_warp_of(int64_t x, int64_t units, int64_t n_warps)
{
    return ((x + 1) * n_warps + units - 1) / units - 1;
}

/* most pieces a tile of n_sb units is cut into: every warp has at least units / n_warps units */
V5_HD int v5_split_stride(int64_t n_sb, int64_t units, int64_t n_warps)
{
    int64_t m = units / n_warps;
    return (int)((n_sb + m - 1) / m) + 2;
}

/* ---- Q4_K: one super-block's bytes of rows g and g+8 as loaded (4 x 8 code bytes, header) */
struct v5_q4k_raw {
    uint2 q[2][4];
    uint4 h[2];
};

V5_FN void v5_q4k_fetch(const struct v5_part *P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb, int t,
                        struct v5_q4k_raw *r)
{
    const uint8_t *b[2];
    b[0] = P->p + (rg * n_sb + sb) * 144;
    b[1] = P->p + (rg8 * n_sb + sb) * 144;
    V5_UNROLL
    for (int i = 0; i < 2; i++) {
        r->h[i] = v5_ldw16(b[i]);
        V5_UNROLL
        for (int c = 0; c < 4; c++)
            r->q[i][c] = v5_ldw8(b[i] + 16 + 32 * c + 8 * t);
    }
}

/* the T16 record (tile, super-block sb) of loaded row rg: `bytes` per record, tile-major */
V5_FN const uint8_t *v5_t16_record(const struct v5_part *P, int64_t rg, int64_t n_sb, int64_t sb, int bytes)
{
    return P->p + ((rg >> 4) * n_sb + sb) * bytes;
}

/* a T16 record's run `run` (512 bytes): lane 4g + t's 16 bytes = 8 of row g, then 8 of row g + 8 */
V5_FN void v5_t16_run(const uint8_t *b, int run, int g, int t, uint2 *row_g, uint2 *row_g8)
{
    uint4 v = v5_ldw16(b + 512 * run + 64 * g + 16 * t);
    row_g->x = v.x, row_g->y = v.y, row_g8->x = v.z, row_g8->y = v.w;
}

/* CUDA_DT_Q4_K_T16 (quant_t16_repack): tiles of 16 rows, per tile and super-block 2304 bytes:
 * code run c (0..3) at 512c, lane 4g+t's 16 bytes = qs[32c + 8t, +8) of rows g and g + 8, then
 * the 16 rows' 144-byte-block headers (16 bytes each) at 2048. A warp's code load is 512
 * contiguous bytes (the row-major blocks touch 8 rows, half of them across two sectors). */
V5_FN void v5_q4k_fetch_t16(const struct v5_part *P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb, int t,
                            struct v5_q4k_raw *r)
{
    (void)rg8;
    int g = (int)(rg & 15);
    const uint8_t *b = v5_t16_record(P, rg, n_sb, sb, 2304);
    V5_UNROLL
    for (int c = 0; c < 4; c++)
        v5_t16_run(b, c, g, t, &r->q[0][c], &r->q[1][c]);
    r->h[0] = v5_ldw16(b + 2048 + 16 * g);
    r->h[1] = v5_ldw16(b + 2048 + 16 * (g + 8));
}

/* a row's share (sub-blocks t and t+4): d*sum(sc*dx*dot) - dmin*sum(m*dx*sum_x) */
V5_FN float v5_q4k_scale(uint4 h, int t, int dlo, int dhi, float2 xa, float2 xb)
{
    float d = v5_h2f(h.x), dmin = v5_h2f(h.x >> 16);
    int sh = 8 * t;
    uint32_t b0 = (h.y >> sh) & 0xffu, b4 = (h.z >> sh) & 0xffu, b8 = (h.w >> sh) & 0xffu;
    int sc_lo = (int)(b0 & 63u), m_lo = (int)(b4 & 63u);                                       /* sub-block t */
    int sc_hi = (int)((b8 & 15u) | ((b0 >> 6) << 4)), m_hi = (int)((b8 >> 4) | ((b4 >> 6) << 4));   /* t + 4 */
    float s = fmaf(xa.x, v5_i2f(sc_lo * dlo), xb.x * v5_i2f(sc_hi * dhi));
    return fmaf(d, s, -dmin * fmaf(v5_i2f(m_lo), xa.y, v5_i2f(m_hi) * xb.y));
}

V5_FN void v5_q4k_compute(const struct v5_q4k_raw *r, const int8_t *xq, const float2 *xd, int64_t sb, int g, int t,
                          float *acc_g, float *acc_g8)
{
    /* lane g gives B column g: sub-block js = (g >> 1) + 4 (g & 1), whose column is g, and 0 in
     * the other 7 mma, so it loads only js's 8 activation bytes */
    int js = (g >> 1) + 4 * (g & 1);
    uint2 xv = v5_ldx8(xq + sb * 256 + 128 * (js & 1) + 32 * (js >> 1) + 8 * t);
    int c4[4] = {0, 0, 0, 0};
    V5_UNROLL
    for (int c = 0; c < 4; c++) {
        V5_UNROLL
        for (int hs = 0; hs < 2; hs++) {
            uint32_t m = hs ? 0xf0f0f0f0u : 0x0f0f0f0fu;   /* high nibbles stay 16 x nibble (u8) */
            int on = js == 2 * c + hs;
            v5_mma(c4, 0, r->q[0][c].x & m, r->q[1][c].x & m, r->q[0][c].y & m, r->q[1][c].y & m, on ? xv.x : 0u,
                   on ? xv.y : 0u);
        }
    }
    int sh = 4 * (t & 1);   /* sub-blocks t and t+4 are high nibbles (16 x) when t is odd */
    float2 xa = v5_ldxd(xd + sb * 8 + t), xb = v5_ldxd(xd + sb * 8 + t + 4);
    *acc_g += v5_q4k_scale(r->h[0], t, c4[0] >> sh, c4[1] >> sh, xa, xb);
    *acc_g8 += v5_q4k_scale(r->h[1], t, c4[2] >> sh, c4[3] >> sh, xa, xb);
}

/* ---- Q4_K times 2..16 activation rows (DFlash verify, batched decode): one mma per sub-block,
 * B column n = activation row 8cb + n (cb = 0, 1: a second pass for rows 9..16). Lane (g, t)
 * gives activation row 8cb + g's bytes for weights 8t..8t+7 of the sub-block (the k order of
 * the A fragment above) and ends with weight rows g, g + 8 times activation rows 8cb + 2t,
 * 8cb + 2t + 1, each sub-block's scale applied to its own C: acc[cb][i][j] = weight row g + 8i,
 * activation row 8cb + 2t + j. Activation row r's int8 copy is at xq + r k, its scales at
 * xd + r k / 32 (gemv_q8.cu quantize_x). */
V5_FN void v5_q4k_scmin(uint4 h, int j, int *sc, int *m)   /* sub-block j's 6-bit scale and min */
{
    int sh = 8 * (j & 3);   /* scale bytes j & 3, 4 + (j & 3), 8 + (j & 3), as in v5_q4k_scale */
    uint32_t b0 = (h.y >> sh) & 0xffu, b4 = (h.z >> sh) & 0xffu, b8 = (h.w >> sh) & 0xffu;
    *sc = (int)(j < 4 ? b0 & 63u : (b8 & 15u) | ((b0 >> 6) << 4));
    *m = (int)(j < 4 ? b4 & 63u : (b8 >> 4) | ((b4 >> 6) << 4));
}

/* Lane t's bytes of super-block sb in activation row col of an nr-row batch (row 0 stands in
 * for col >= nr: the products of those columns are masked) */
V5_FN const int8_t *v5_nr_xrow(const int8_t *xq, int64_t k, int nr, int col, int64_t sb, int t)
{
    return xq + (int64_t)(col < nr ? col : 0) * k + sb * 256 + 8 * t;
}

V5_FN void v5_q4k_compute_nr(const struct v5_q4k_raw *r, int t16, const int8_t *xq, const float2 *xd, int64_t k,
                             int nr, int64_t sb, int g, int t, float acc[2][2][2])
{
    (void)t16;
    float d[2], dmin[2];
    V5_UNROLL
    for (int i = 0; i < 2; i++)
        d[i] = v5_h2f(r->h[i].x), dmin[i] = v5_h2f(r->h[i].x >> 16);
    V5_UNROLL
    for (int cb = 0; cb < 2; cb++) {
        if (8 * cb >= nr)   /* the same for the whole warp */
            break;
        int col = 8 * cb + g;
        const int8_t *xr = v5_nr_xrow(xq, k, nr, col, sb, t);
        V5_UNROLL
        for (int j = 0; j < 8; j++) {
            int c = j >> 1, hs = j & 1;
            uint32_t m = hs ? 0xf0f0f0f0u : 0x0f0f0f0fu;   /* high nibbles stay 16 x nibble (u8) */
            uint2 xv = v5_ldx8(xr + 128 * hs + 32 * c);
            int c4[4] = {0, 0, 0, 0};
            v5_mma(c4, 0, r->q[0][c].x & m, r->q[1][c].x & m, r->q[0][c].y & m, r->q[1][c].y & m,
                   col < nr ? xv.x : 0u, col < nr ? xv.y : 0u);
            V5_UNROLL
            for (int i = 0; i < 2; i++) {
                int sc, mn;
                v5_q4k_scmin(r->h[i], j, &sc, &mn);
                V5_UNROLL
                for (int jj = 0; jj < 2; jj++) {
                    int colc = 8 * cb + 2 * t + jj;
                    if (colc < nr) {
                        float2 dx = v5_ldxd(xd + (int64_t)colc * (k / 32) + sb * 8 + j);
                        acc[cb][i][jj] += d[i] * (dx.x * v5_i2f(sc * (c4[2 * i + jj] >> (4 * hs)))) -
                                          dmin[i] * (dx.y * v5_i2f(mn));
                    }
                }
            }
        }
    }
}

/* ---- Q6_K (SoA: ql[nb][128], qh[nb][64], sc[nb][16] int8, d[nb] f16). Weight w of a block:
 * half h = w / 128, unit q = (w % 128) / 32, i = w % 32: low (q < 2) or high nibble of
 * ql[64h + 32(q & 1) + i], bits 2q of qh[32h + i], scale sc[8h + 2q + i / 16], value q6 - 32.
 * Lane t feeds weights 8t..8t+7 of a unit: one 8-byte ql and qh load each, scale group t >> 1.
 * Unit q's two groups go to B columns 2q and 2q + 1 (lanes t < 2 give the first), so the 4 mma
 * of a half accumulate into one C and lane t ends with both groups of unit t. */
struct v5_q6k_raw {
    uint2    ql[2][4];   /* [row][2h + (q & 1)] */
    uint2    qh[2][2];   /* [row][h] */
    uint32_t sc[2];      /* [row]: bytes 2t, 2t+1 of half 0 (low 16 bits), of half 1 (high) */
    uint32_t d[2];
};

V5_FN void v5_q6k_fetch(const struct v5_part *P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb, int t,
                        struct v5_q6k_raw *r)
{
    int64_t nb = P->n * n_sb, ib[2];
    ib[0] = rg * n_sb + sb;
    ib[1] = rg8 * n_sb + sb;
    V5_UNROLL
    for (int i = 0; i < 2; i++) {
        V5_UNROLL
        for (int u = 0; u < 4; u++)
            r->ql[i][u] = v5_ldw8(P->p + ib[i] * 128 + 32 * u + 8 * t);   /* 64h + 32(q & 1) = 32u */
        V5_UNROLL
        for (int h = 0; h < 2; h++)
            r->qh[i][h] = v5_ldw8(P->p + nb * 128 + ib[i] * 64 + 32 * h + 8 * t);
        const uint8_t *sc = P->p + nb * 192 + ib[i] * 16 + 2 * t;
        r->sc[i] = (uint32_t)v5_ldu16(sc) | (uint32_t)v5_ldu16(sc + 8) << 16;
        r->d[i] = v5_ldu16(P->p + nb * 208 + ib[i] * 2);
    }
}

/* CUDA_DT_Q6_K_T16: tiles of 16 rows, per tile and super-block 3360 bytes: ql run u (0..3) at
 * 512u and qh half h at 2048 + 512h, lane 4g+t's 16 bytes = the 8 bytes at 32u + 8t (32h + 8t)
 * of rows g and g + 8; at 3072 + 16r row r's scales as {2t, 2t+1, 8+2t, 9+2t} for t = 0..3 (one
 * word per lane); at 3328 + 2r row r's d. */
V5_FN void v5_q6k_fetch_t16(const struct v5_part *P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb, int t,
                            struct v5_q6k_raw *r)
{
    (void)rg8;
    int g = (int)(rg & 15);
    const uint8_t *b = v5_t16_record(P, rg, n_sb, sb, 3360);
    V5_UNROLL
    for (int u = 0; u < 4; u++)
        v5_t16_run(b, u, g, t, &r->ql[0][u], &r->ql[1][u]);
    V5_UNROLL
    for (int h = 0; h < 2; h++)
        v5_t16_run(b, 4 + h, g, t, &r->qh[0][h], &r->qh[1][h]);
    r->sc[0] = v5_ldu32(b + 3072 + 16 * g + 4 * t);
    r->sc[1] = v5_ldu32(b + 3072 + 16 * (g + 8) + 4 * t);
    r->d[0] = v5_ldu16(b + 3328 + 2 * g);
    r->d[1] = v5_ldu16(b + 3328 + 2 * (g + 8));
}

/* 4 signed 6-bit codes - 32 of one word: nibbles of ql (q < 2: low), bits 2q of qh */
V5_FN uint32_t v5_q6(uint32_t l, uint32_t hb, int q)
{
    uint32_t v = ((l >> (4 * (q >> 1))) & 0x0f0f0f0fu) | (((hb >> (2 * q)) & 0x03030303u) << 4);
    return ((v | 0x80808080u) - 0x20202020u) ^ 0x80808080u;   /* per byte v - 32, no borrows */
}

V5_FN void v5_q6k_compute(const struct v5_q6k_raw *r, const int8_t *xq, const float2 *xd, int64_t sb, int g, int t,
                          float *acc_g, float *acc_g8)
{
    /* lane (g, t) gives B column g = 2q + (t >> 1): unit qs = (g - (t >> 1)) / 2 when that is
     * whole and in 0..3 (else none), so it loads only that unit's 8 activation bytes per half;
     * weights 128h + 32q + 8t.. sit at 64h + 32(q >> 1) + 8t (+128 for odd q) in K45 */
    int gq = g - (t >> 1), qs = gq >= 0 && !(gq & 1) ? gq >> 1 : -1, qa = qs < 0 ? 0 : qs;
    const int8_t *xs = xq + sb * 256 + 128 * (qa & 1) + 32 * (qa >> 1) + 8 * t;
    V5_UNROLL
    for (int h = 0; h < 2; h++) {
        int c4[4] = {0, 0, 0, 0};
        uint2 xv = v5_ldx8(xs + 64 * h);
        V5_UNROLL
        for (int q = 0; q < 4; q++) {
            uint2 l0 = r->ql[0][2 * h + (q & 1)], l1 = r->ql[1][2 * h + (q & 1)];
            int on = qs == q;
            v5_mma(c4, 1, v5_q6(l0.x, r->qh[0][h].x, q), v5_q6(l1.x, r->qh[1][h].x, q), v5_q6(l0.y, r->qh[0][h].y, q),
                   v5_q6(l1.y, r->qh[1][h].y, q), on ? xv.x : 0u, on ? xv.y : 0u);
        }
        float dx = v5_ldxd(xd + sb * 8 + 4 * h + t).x;
        int sh = 16 * h;
        /* |sc * dot| < 128 * 16 * 32 * 127: two of them fit an int, not the i2f trick */
        int s0 = (int)(int8_t)(r->sc[0] >> sh), s1 = (int)(int8_t)(r->sc[0] >> (sh + 8));
        *acc_g += v5_h2f(r->d[0]) * dx * v5_i2f_rn(s0 * c4[0] + s1 * c4[1]);
        s0 = (int)(int8_t)(r->sc[1] >> sh), s1 = (int)(int8_t)(r->sc[1] >> (sh + 8));
        *acc_g8 += v5_h2f(r->d[1]) * dx * v5_i2f_rn(s0 * c4[2] + s1 * c4[3]);
    }
}

/* ---- Q6_K times 2..16 activation rows (the Q4_K scheme above): a unit's 32 weights have two
 * scale groups of 16 (lanes t < 2 feed the first), so each unit takes two mma, B given only by the
 * lanes of that group, and every lane needs all 16 scales of its two rows: sc16, as stored (the
 * SoA's natural order, or T16's permuted one: bytes {2t, 2t+1, 8+2t, 9+2t} at 4t). */
struct v5_q6k_nr_raw {
    struct v5_q6k_raw r;
    uint4             sc16[2];   /* [row] */
};

V5_FN void v5_q6k_fetch_nr(const struct v5_part *P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb, int t,
                           struct v5_q6k_nr_raw *r)
{
    v5_q6k_fetch(P, rg, rg8, n_sb, sb, t, &r->r);
    int64_t nb = P->n * n_sb;
    r->sc16[0] = v5_ldw16(P->p + nb * 192 + (rg * n_sb + sb) * 16);
    r->sc16[1] = v5_ldw16(P->p + nb * 192 + (rg8 * n_sb + sb) * 16);
}

V5_FN void v5_q6k_fetch_nr_t16(const struct v5_part *P, int64_t rg, int64_t rg8, int64_t n_sb, int64_t sb, int t,
                               struct v5_q6k_nr_raw *r)
{
    v5_q6k_fetch_t16(P, rg, rg8, n_sb, sb, t, &r->r);
    const uint8_t *b = P->p + ((rg >> 4) * n_sb + sb) * 3360 + 3072;
    r->sc16[0] = v5_ldw16(b + 16 * (rg & 15));
    r->sc16[1] = v5_ldw16(b + 16 * ((rg & 15) + 8));
}

/* scale s (0..15) of a row's 16 as stored */
V5_FN int v5_q6k_sc(uint4 v, int s, int t16)
{
    int p = !t16 ? s : s < 8 ? 4 * (s >> 1) + (s & 1) : 4 * ((s - 8) >> 1) + 2 + (s & 1);
    uint32_t w = p < 4 ? v.x : p < 8 ? v.y : p < 12 ? v.z : v.w;
    return (int)(int8_t)(w >> (8 * (p & 3)));
}

V5_FN void v5_q6k_compute_nr(const struct v5_q6k_nr_raw *R, int t16, const int8_t *xq, const float2 *xd, int64_t k,
                             int nr, int64_t sb, int g, int t, float acc[2][2][2])
{
    const struct v5_q6k_raw *r = &R->r;
    float d[2] = {v5_h2f(r->d[0]), v5_h2f(r->d[1])};
    V5_UNROLL
    for (int cb = 0; cb < 2; cb++) {
        if (8 * cb >= nr)   /* the same for the whole warp */
            break;
        int col = 8 * cb + g;
        const int8_t *xr = v5_nr_xrow(xq, k, nr, col, sb, t);
        V5_UNROLL
        for (int h = 0; h < 2; h++) {
            V5_UNROLL
            for (int q = 0; q < 4; q++) {
                uint2 l0 = r->ql[0][2 * h + (q & 1)], l1 = r->ql[1][2 * h + (q & 1)];
                uint32_t a0 = v5_q6(l0.x, r->qh[0][h].x, q), a1 = v5_q6(l1.x, r->qh[1][h].x, q);
                uint32_t a2 = v5_q6(l0.y, r->qh[0][h].y, q), a3 = v5_q6(l1.y, r->qh[1][h].y, q);
                uint2 xv = v5_ldx8(xr + 64 * h + 128 * (q & 1) + 32 * (q >> 1));
                V5_UNROLL
                for (int grp = 0; grp < 2; grp++) {
                    int on = col < nr && (t >> 1) == grp;
                    int c4[4] = {0, 0, 0, 0};
                    v5_mma(c4, 1, a0, a1, a2, a3, on ? xv.x : 0u, on ? xv.y : 0u);
                    V5_UNROLL
                    for (int i = 0; i < 2; i++) {
                        int sc = v5_q6k_sc(R->sc16[i], 8 * h + 2 * q + grp, t16);
                        V5_UNROLL
                        for (int jj = 0; jj < 2; jj++) {
                            int colc = 8 * cb + 2 * t + jj;
                            if (colc < nr) {
                                float dx = v5_ldxd(xd + (int64_t)colc * (k / 32) + sb * 8 + 4 * h + q).x;
                                /* |sc * dot| < 127 * 16 * 32 * 127: exact in a float (< 2^24) */
                                acc[cb][i][jj] += d[i] * (dx * v5_i2f_rn(sc * c4[2 * i + jj]));
                            }
                        }
                    }
                }
            }
        }
    }
}

#endif
