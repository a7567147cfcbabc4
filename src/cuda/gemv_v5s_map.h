/*
 * gemv_v5s_map.h — private to src/cuda: which units GEMV v5s's chunks and pooled tiles cover
 * (gemv_mma.cu gemv5s_kernel), and the shape of its pool (v5s_pool_plan).
 *
 * Written in the C subset of CUDA, after gemv_mma_lane.h (V5_HD, v5_split_lo, v5_split_stride),
 * so that tests/test_v5s_map.c runs this very arithmetic on the CPU: every unit of every tile
 * summed once, and each tile's count target equal to the units its chunks hold.
 */
#ifndef GLIM_GEMV_V5S_MAP_H
#define GLIM_GEMV_V5S_MAP_H

#include <stdint.h>

/* one CTA's share of a job's non-pooled units (v5's even split over the CTAs) in chunks of at
 * most C units that never cross a tile */
struct v5s_range {
    int64_t a, b, t0;   /* the CTA's units [a, b); the tile of a */
    int64_t l0;         /* the units of tile t0 in [a, b) */
    int     c0, cpt;    /* chunks of tile t0; chunks of a whole tile */
    int     total;      /* chunks in all */
};

V5_HD struct v5s_range v5s_range_of(int64_t cta, int64_t units, int64_t n_cta, int64_t n_sb, int C)
{
    struct v5s_range r;
    r.a = v5_split_lo(cta, units, n_cta), r.b = v5_split_lo(cta + 1, units, n_cta);
    r.t0 = r.a / n_sb;
    int64_t e0 = (r.t0 + 1) * n_sb;
    r.l0 = (e0 < r.b ? e0 : r.b) - r.a;
    r.c0 = (int)((r.l0 + C - 1) / C);
    r.cpt = (int)((n_sb + C - 1) / C);
    int64_t rest = r.b - r.a - r.l0;
    r.total = r.c0 + (int)(rest / n_sb) * r.cpt + (int)((rest % n_sb + C - 1) / C);
    return r;
}

/* tiles of one CTA's range at most, for its shared-memory slots */
V5_HD int64_t v5s_tiles_max(int64_t units, int64_t n_cta, int64_t n_sb)
{
    int64_t len = (units + n_cta - 1) / n_cta;
    return (len + n_sb - 1) / n_sb + 1;
}

/* what one chunk is: units [s0, s1) of tile `tile`, its sums in slot (lt, j) of the CTA; need: the
 * units the CTA sums of that tile, which the tile's count waits for */
struct v5s_item {
    int64_t tile;
    int64_t s0, s1;                  /* units [s0, s1) of the tile */
    int     lt, j, need;             /* (slots of a CTA: small) */
};

/* chunk k (< R->total) of the CTA's own range */
V5_HD struct v5s_item v5s_own_item(const struct v5s_range *R, int64_t k, int64_t n_sb, int C)
{
    struct v5s_item it;
    if (k < R->c0) {
        int o = (int)(R->a - R->t0 * n_sb);
        it.lt = 0, it.j = (int)k, it.tile = R->t0, it.need = (int)R->l0;
        it.s0 = o + (int)k * C, it.s1 = it.s0 + C < o + it.need ? it.s0 + C : o + it.need;
    } else {
        int64_t kk = k - R->c0, e;
        it.lt = (int)(1 + kk / R->cpt), it.j = (int)(kk % R->cpt), it.tile = R->t0 + it.lt;
        e = R->b - it.tile * n_sb;   /* the range's end within the tile */
        it.need = (int)(e < n_sb ? e : n_sb);
        it.s0 = it.j * C, it.s1 = it.s0 + C < n_sb ? it.s0 + C : (int)n_sb;
        it.s1 = it.s1 < e ? it.s1 : (int)e;
    }
    return it;
}

/* the pool: a job's last `pool` tiles, claimed whole at run time */
struct v5s_pool_shape {
    int64_t pool;
    int     cap;   /* the most tiles one CTA may claim (its slots) */
};

/* The pool of a job of n_tiles tiles of n_sb units on n_sm CTAs for pct % of its tiles (C units a
 * chunk), tiles of at most 16 chunks only (down's 78-unit tiles, a third of a CTA's share, made the
 * tail longer; pooled in pieces they lost 2%, H100 2026-12-06). None (pool 0) where a CTA would keep
 * no unit of its own. A CTA may claim 4x its share of the tiles, so the CTAs together can always
 * take them all. */
V5_HD struct v5s_pool_shape v5s_pool_shape_of(int64_t n_tiles, int64_t n_sb, int C, int pct, int64_t n_sm)
{
    struct v5s_pool_shape p;
    int64_t cpt = (n_sb + C - 1) / C;
    p.pool = n_tiles * pct / 100;
    if (p.pool < 1 || (n_tiles - p.pool) * n_sb < n_sm || cpt > 16) {
        p.pool = 0, p.cap = 0;
        return p;
    }
    int64_t share = (p.pool + n_sm - 1) / n_sm, cap = 4 * share;
    p.cap = (int)(cap < p.pool ? cap : p.pool);
    return p;
}

/* chunk j (< the tile's chunks) of pooled tile pt, held in the CTA's slot lt: its units */
V5_HD struct v5s_item v5s_pool_item(int64_t pt, int64_t j, int64_t lt, int64_t n_tiles, int64_t pool, int64_t n_sb,
                                    int C)
{
    struct v5s_item it;
    it.lt = (int)lt, it.j = (int)j, it.tile = n_tiles - pool + pt;
    it.s0 = (int)(j * C), it.s1 = it.s0 + C < n_sb ? it.s0 + C : (int)n_sb;
    it.need = (int)n_sb;
    return it;
}

#endif
