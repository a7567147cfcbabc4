/*
 * gemv3_rows.cuh — private to src/cuda: the per-warp row loop of the int8-activation GEMVs
 * (gemv_q8.cu's v2/v3 and gemv_gwo.cu's gate-then-Wo kernel), so every kernel that multiplies
 * the same rows by the same activations gives the same bits.
 */
#ifndef GLIM_GEMV3_ROWS_CUH
#define GLIM_GEMV3_ROWS_CUH

#include "gemv_slots.cuh"

/* acc[i][r] += slot s of weight row i . activation row r (r < nr), in every version's order.
 * NC: activations through the read-only cache (false: from L2, written by this kernel: gemv_gwo.cu) */
template <class W, int NR, int RW, bool NC = true>
static __device__ __forceinline__ void slot_madd(float (&acc)[RW][NR], const W (&w)[RW], const int8_t *__restrict__ xq,
                                                 const float2 *__restrict__ xd, int64_t k, int64_t s, int nr)
{
#pragma unroll
    for (int r = 0; r < NR; r++) {
        if (r >= nr)
            break;
        struct xslot xs;
        W::template xload<NC>(xq + r * k, xd + r * (k >> 5), s, &xs);
#pragma unroll
        for (int i = 0; i < RW; i++)
            acc[i][r] += w[i].dot(xs);
    }
}

/* a warp's rows from row0 (past the last: the last again, stored by no one) and their sums at 0 */
template <int NR, int RW>
static __device__ __forceinline__ void rows_begin(int64_t row0, int64_t n, int64_t (&rows)[RW], float (&acc)[RW][NR])
{
#pragma unroll
    for (int i = 0; i < RW; i++) {
        rows[i] = row0 + i < n ? row0 + i : n - 1;
#pragma unroll
        for (int r = 0; r < NR; r++)
            acc[i][r] = 0.0f;
    }
}

/* sum each accumulator over the warp; lane 0 writes y[r][row0 + i] for the rows that exist */
template <int NR, int RW>
static __device__ __forceinline__ void rows_store(const float (&acc)[RW][NR], float *__restrict__ y, int64_t n,
                                                  int64_t row0, int nr, int lane)
{
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float a = acc[i][r];
            for (int o = 16; o > 0; o >>= 1)
                a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0 && r < nr && row0 + i < n)
                y[r * n + row0 + i] = a;
        }
}

/* what a row loop does once its first weights are on their way: wait for the previous kernel */
struct gemv_pdl_wait {
    __device__ __forceinline__ void operator()() const { cuda_pdl_wait(); }
};

/* ---- GEMV v3: deep loads, several weights per launch ----------------------------
 * WHY (docs/CUDA.md): v2 keeps about two slots' loads in flight per lane and a
 * warp owns one 3.7 KB row, so each row costs several serial memory round trips plus
 * the warp's start and reduction; small matrices (q, k, v, gate: 256..4096 rows) were
 * one short wave at 4-40% of bandwidth. v3 issues the loads of U slots per lane
 * (W::U, 4 KB per warp; RW = 2 rows: half as many slots) before decoding any of them, and one launch covers up to
 * GEMV_MAX_PARTS weights that multiply the same x (q/k/v/gate, FFN gate/up): one
 * quantize, one launch, one wave. Same per-slot arithmetic as v2, so the results are
 * bit-equal to v2's. `wait` runs after the first loads are issued (the PDL wait, or
 * gemv_gwo.cu's). */
template <class W, int NR, int RW, int U, bool NC = true, class WAIT = gemv_pdl_wait>
static __device__ __forceinline__ void gemv3_rows(const wview8 &v, int64_t row0, const int8_t *__restrict__ xq,
                                                  const float2 *__restrict__ xd, float *__restrict__ y, int nr,
                                                  int lane, const WAIT &wait = WAIT())
{
    int64_t n_slots = v.k / W::SLOT;
    int64_t rows[RW];
    float acc[RW][NR];
    rows_begin<NR, RW>(row0, v.n, rows, acc);
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
        if (s0 == 0)
            wait();   /* the first weights are on their way; x is an earlier kernel's */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t s = s0 + lane + 32 * u;
            if (s < n_slots) {
                W w[RW];
#pragma unroll
                for (int i = 0; i < RW; i++)
                    w[i].decode(raw[u][i], s);
                slot_madd<W, NR, RW, NC>(acc, w, xq, xd, v.k, s, nr);
            }
        }
    }
    rows_store<NR, RW>(acc, y, v.n, row0, nr, lane);
}

#endif
