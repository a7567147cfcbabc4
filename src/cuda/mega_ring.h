/*
 * mega_ring.h — private to src/cuda, in the C subset so tests run it on the CPU
 * (tests/test_mega_ring.c): the index rules of the persistent decode span (mega.cu) that its
 * correctness rests on. A consumer warp's ring: where the next weight record goes and whether
 * it fits yet. The merge of a tile cut between warps of one CTA: which of a warp's two slots a
 * piece goes to. Include gemv_mma_lane.h (v5_split_lo) first.
 */
#ifndef GLIM_CUDA_MEGA_RING_H
#define GLIM_CUDA_MEGA_RING_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define MG_HD static __host__ __device__ __forceinline__
#else
#define MG_HD static inline
#endif

#define MG_RB 12544                     /* a consumer warp's ring, bytes */
#define MG_REC_MIN 2304                 /* the smaller record (a Q4_K tile record; Q6_K's is 3360) */
#define MG_NB (MG_RB / MG_REC_MIN)      /* records a ring holds at most (5), an mbarrier each */

/* A ring's feed (warp-uniform): records asked for so far, where the newest ends, and where the
 * oldest not yet read begins (the records read, seq, are the caller's) */
struct mg_fill {
    unsigned issued, w_off, r_off;
};

/* Where a record of rec bytes goes next (*off), and whether it fits now with `out` records on
 * their way or unread. Records lie in order, each right after the one before or, if it would pass
 * the end, at 0; the bytes in use run from r_off to w_off, wrapping past the end when
 * w_off <= r_off. */
MG_HD bool mg_room(const struct mg_fill *f, unsigned out, unsigned rec, unsigned *off)
{
    *off = f->w_off + rec <= MG_RB ? f->w_off : 0;
    if (out == 0)
        return true;
    if (out >= MG_NB)
        return false;
    if (f->r_off < f->w_off)   /* [r_off, w_off) in use: room after it, or before r_off */
        return *off == f->w_off || rec <= f->r_off;
    return *off == f->w_off && f->w_off + rec <= f->r_off;   /* wrapped: room between w_off and r_off */
}

/* the record of rec bytes asked for at off, seq records read so far */
MG_HD void mg_took(struct mg_fill *f, unsigned seq, unsigned off, unsigned rec)
{
    if (f->issued == seq)
        f->r_off = off;   /* the ring was empty: this is the oldest */
    f->w_off = off + rec;
    f->issued++;
}

/* The slot of warp w's piece of a tile cut between warps: 0 if the tile is the first of w's range
 * in the job, else 1 (its last). A warp cuts at most those two, and at most one cut tile starts in
 * a warp's range, so a CTA's pieces of one job never share a slot or a count. */
MG_HD int mg_slot_of(int64_t w, int64_t tile, int64_t units, int64_t n_warps, int64_t n_sb)
{
    return tile == v5_split_lo(w, units, n_warps) / n_sb ? 0 : 1;
}

#endif
