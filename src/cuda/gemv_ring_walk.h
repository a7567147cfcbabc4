/*
 * gemv_ring_walk.h — private to src/cuda: how v5r's loader (gemv_ring.cuh) walks one consumer
 * warp's units of a job and turns a page's worth into bulk copies.
 *
 * Written in the C subset of CUDA, like gemv_mma_lane.h, so that tests/test_gemv_ring_walk.c
 * runs this very code on the CPU and checks that every record lands where the consumer looks for
 * it. The includer defines V5_FN (function qualifiers) and V5R_COPY(dst, src, bytes, bar) (one
 * bulk copy; the test records it), and includes gemv_mma_lane.h (struct v5_part) first.
 *
 * A job's units are (tile, super-block) pairs, tile-major over its parts in order (part i holds
 * tiles [tile0_i, tile0_{i+1})); a unit's record is `rec` bytes (2304 for Q4_K tiles, 3360 for
 * Q6_K: its part's kind picks ba or bb) and a part's records are contiguous. A warp's units are
 * one range [a, b); page p of the ring holds units [a + p n, a + (p + 1) n) of it, packed in
 * unit order. The cursor walks that range with no divisions: one loader thread must issue
 * ~35 GB/s an SM.
 */
#ifndef GLIM_GEMV_RING_WALK_H
#define GLIM_GEMV_RING_WALK_H

#include <stdint.h>

struct v5r_parts {
    const struct v5_part *p;   /* the job's parts, tile0 ascending */
    int                   n_parts;
    int64_t               n_tiles, n_sb;
    int                   ba, bb;   /* a record's bytes in parts of kind 0 / 1 */
};

struct v5r_cursor {
    int64_t        x, end;     /* the next unit; the range's end */
    int64_t        part_end;   /* the first unit past this part */
    const uint8_t *src;        /* unit x's record */
    int            part, rec;  /* x's part; its record's bytes */
};

/* the cursor onto part `part` at its unit c->x */
V5_FN void v5r_cursor_part(const struct v5r_parts *J, struct v5r_cursor *c, int part)
{
    const struct v5_part *P = &J->p[part];
    int64_t next = part + 1 < J->n_parts ? J->p[part + 1].tile0 : J->n_tiles;
    c->part = part;
    c->rec = P->kind ? J->bb : J->ba;
    c->part_end = next * J->n_sb;
    c->src = P->p + (c->x - P->tile0 * J->n_sb) * c->rec;
}

/* a cursor at the start of units [a, b) */
V5_FN void v5r_cursor_init(const struct v5r_parts *J, struct v5r_cursor *c, int64_t a, int64_t b)
{
    int part = 0;
    c->x = a;
    c->end = b;
    for (int i = 1; i < J->n_parts; i++)
        if (a >= J->p[i].tile0 * J->n_sb)
            part = i;
    v5r_cursor_part(J, c, part);
}

/* Up to n units from the cursor: their bytes, and (dst != NULL) their bulk copies into dst, one a
 * part, packed; the cursor moves past them */
V5_FN unsigned v5r_take(const struct v5r_parts *J, struct v5r_cursor *c, int64_t n, uint8_t *dst, void *bar)
{
    unsigned off = 0;
    int64_t x1 = c->x + n < c->end ? c->x + n : c->end;
    while (c->x < x1) {
        int64_t e = c->part_end < x1 ? c->part_end : x1;
        unsigned bytes = (unsigned)((e - c->x) * c->rec);
        if (dst)
            V5R_COPY(dst + off, c->src, bytes, bar);
        off += bytes;
        c->src += bytes;
        c->x = e;
        if (c->x == c->part_end && c->part + 1 < J->n_parts)
            v5r_cursor_part(J, c, c->part + 1);
    }
    return off;
}

#endif
