/*
 * gemm.c — row-parallel matrix x vector (decode) and matrix x matrix
 * (prefill) on the pool.
 *
 * DESIGN: worker ith owns a contiguous range of weight rows (output
 * features), so no two threads write the same output and weights stream from
 * memory exactly once per activation tile. Phase 1: the activation rows are
 * quantized to the kernel's int8 format into backend scratch (rows shared
 * round-robin between threads), then a barrier. Phase 2, per thread:
 *   for each tile of MM_TILE_A activation rows        (tile's int8 rows stay in L2)
 *     for each chunk of MM_TILE_W weight rows          (chunk stays in L2)
 *       for each group of CPU_NX activation rows       (group stays in L1)
 *         for each weight row of the chunk: one kernel call, the weight
 *         block decoded once for all rows of the group.
 * Decode (n_rows <= CPU_NX) degenerates to one kernel call per weight row.
 */
#include <stdatomic.h>
#include <string.h>

#include "../base/alloc.h"
#include "cpu_kern.h"
#include "cpu_ref.h"

enum { MM_TILE_A = 64, MM_TILE_W = 16 };

int cpu_scratch_reserve(struct cpu_scratch *s, size_t n_bytes)
{
    if (n_bytes <= s->n_bytes)
        return GLIM_OK;
    size_t want = n_bytes + n_bytes / 4;   /* grow with headroom: resizes stay rare */
    void *p = glim_malloc_aligned(64, want);
    if (!p)
        return GLIM_ENOMEM;
    glim_free_aligned(s->data);
    s->data = p;
    s->n_bytes = want;
    return GLIM_OK;
}

void cpu_scratch_clear(struct cpu_scratch *s)
{
    glim_free_aligned(s->data);
    s->data = NULL;
    s->n_bytes = 0;
}

struct mm_task {
    struct pool            *pool;
    const struct cpu_kern  *kern;
    const struct be_weight *w;
    cpu_dot_fn   dot;          /* NULL: reference fallback */
    int          act;          /* enum cpu_act */
    float       *y;
    const float *x;
    int          n_rows;
    const char  *xa;           /* activations in the kernel's format */
    size_t       xa_stride;    /* bytes between activation rows */
    size_t       w_row_bytes;
    bool         have_xa;      /* activations already quantized (cached) */
    _Atomic int64_t next;      /* next output row to hand out (dynamic split) */
    int64_t      chunk;        /* rows per hand-out */
};

/* Rows are handed out in chunks from a shared counter rather than split evenly up
 * front: on a VM whose cores run at different speeds, a fixed split leaves the
 * fast thread waiting for the slow one. Each row is still computed by exactly one
 * thread with the same kernel, so results do not depend on who took it. */
static int64_t mm_chunk(int64_t n_out, int nth)
{
    int64_t c = n_out / ((int64_t)nth * 8);
    c = (c + 15) & ~(int64_t)15;
    return c < 16 ? 16 : c;
}

static void mm_quantize(const struct mm_task *t, int ith, int nth)
{
    int64_t k = t->w->k;
    for (int r = ith; r < t->n_rows; r += nth) {
        const float *xr = t->x + (size_t)r * k;
        void *dst = (char *)t->xa + (size_t)r * t->xa_stride;
        if (t->act == CPU_ACT_Q8_K)
            t->kern->quant_q8_k(xr, dst, k);
        else
            t->kern->quant_q8_32(xr, dst, k);
    }
}

static void mm_rows(const struct mm_task *t, int64_t j0, int64_t j1)
{
    const char *wd = t->w->dev;
    int64_t n = t->w->n, k = t->w->k;
    for (int a0 = 0; a0 < t->n_rows; a0 += MM_TILE_A) {
        int a1 = GLIM_MIN(a0 + MM_TILE_A, t->n_rows);
        for (int64_t jc = j0; jc < j1; jc += MM_TILE_W) {
            int64_t jc1 = GLIM_MIN(jc + MM_TILE_W, j1);
            for (int a = a0; a < a1; a += CPU_NX) {
                int nx = GLIM_MIN(CPU_NX, a1 - a);
                const char *xg = t->xa + (size_t)a * t->xa_stride;
                for (int64_t j = jc; j < jc1; j++)
                    t->dot(wd + (size_t)j * t->w_row_bytes, xg, t->xa_stride, nx, k,
                           t->y + (size_t)a * n + j, (size_t)n);
            }
        }
    }
}

static void mm_task_run(void *arg, int ith, int nth)
{
    struct mm_task *t = arg;
    if (!t->dot) {
        int64_t j0, j1;
        pool_split(t->w->n, ith, nth, &j0, &j1);
        if (j1 > j0)
            cpu_ref_matmul_rows(t->y, t->w, t->x, t->n_rows, j0, j1);
        return;
    }
    if (t->act != CPU_ACT_F32 && !t->have_xa) {
        mm_quantize(t, ith, nth);
        pool_barrier(t->pool);
    }
    for (;;) {
        int64_t j0 = atomic_fetch_add_explicit(&t->next, t->chunk, memory_order_relaxed);
        if (j0 >= t->w->n)
            break;
        mm_rows(t, j0, GLIM_MIN(j0 + t->chunk, t->w->n));
    }
}

/* Pick the kernel for w; t->dot stays NULL when the type has none (reference fallback). */
static void mm_setup(struct mm_task *t, const struct cpu_kern *kern, const struct be_weight *w)
{
    uint32_t type = w->dev_type;
    if (type < GLIM_TYPE_COUNT && kern->dot[type] && w->dev) {
        t->act = kern->act[type];
        t->xa_stride = cpu_act_row_bytes(t->act, w->k);
        t->w_row_bytes = quant_row_bytes(type, w->k);
        if (t->xa_stride && t->w_row_bytes)
            t->dot = kern->dot[type];
    }
}

/* Point t at the activations: x itself (f32 kernels), the cached int8 copy, or fresh
 * scratch that the task fills. false = no memory: use the reference. */
static bool mm_bind_acts(struct mm_task *t, struct cpu_scratch *scratch, const float *x, int n_rows)
{
    if (t->act == CPU_ACT_F32) {
        t->xa = (const char *)x;
        return true;
    }
    t->have_xa = scratch->act_valid && scratch->act_x == x && scratch->act_k == t->w->k &&
                 scratch->act_rows == n_rows && scratch->act_type == t->act;
    if (!t->have_xa && cpu_scratch_reserve(scratch, t->xa_stride * (size_t)n_rows) != GLIM_OK)
        return false;
    t->xa = scratch->data;
    return true;
}

/* Remember what scratch holds, unless a matmul just wrote over its own input. */
static void mm_note_acts(struct cpu_scratch *scratch, const struct mm_task *t, const float *x, int n_rows,
                         bool clobbered)
{
    scratch->act_valid = t->dot && t->act != CPU_ACT_F32 && !clobbered;
    scratch->act_x = x, scratch->act_k = t->w->k, scratch->act_rows = n_rows, scratch->act_type = t->act;
}

static bool overlaps(const float *y, size_t ny, const float *x, size_t nx)
{
    return y < x + nx && x < y + ny;
}

void cpu_matmul(struct pool *pool, const struct cpu_kern *kern, struct cpu_scratch *scratch,
                float *y, const struct be_weight *w, const float *x, int n_rows)
{
    struct mm_task t = {.pool = pool, .kern = kern, .w = w, .y = y, .x = x, .n_rows = n_rows};
    if (n_rows <= 0 || w->n <= 0)
        return;
    mm_setup(&t, kern, w);
    if (t.dot && !mm_bind_acts(&t, scratch, x, n_rows))
        t.dot = NULL;   /* no memory for int8 activations: the reference needs none */
    t.chunk = mm_chunk(w->n, pool_size(pool));
    pool_run(pool, mm_task_run, &t);
    mm_note_acts(scratch, &t, x, n_rows,
                 overlaps(y, (size_t)n_rows * w->n, x, (size_t)n_rows * w->k));
}

/* Several weights over one input in one pool task: the activations are quantized
 * once and the threads split the concatenated output rows of all weights, so a
 * decode step pays one hand-off for q/k/v/gate instead of four. */
struct mmn_task {
    struct mm_task t[CPU_MATMUL_N_MAX];
    int            n;
    int64_t        total;   /* sum of the weights' rows */
};

static void mmn_task_run(void *arg, int ith, int nth)
{
    struct mmn_task *m = arg;
    if (m->t[0].act != CPU_ACT_F32 && !m->t[0].have_xa) {
        mm_quantize(&m->t[0], ith, nth);
        pool_barrier(m->t[0].pool);
    }
    for (;;) {   /* chunks of the concatenated output rows (see mm_chunk) */
        int64_t r0 = atomic_fetch_add_explicit(&m->t[0].next, m->t[0].chunk, memory_order_relaxed);
        if (r0 >= m->total)
            break;
        int64_t r1 = GLIM_MIN(r0 + m->t[0].chunk, m->total), base = 0;
        for (int i = 0; i < m->n; base += m->t[i].w->n, i++) {
            int64_t a = GLIM_MAX(r0, base), b = GLIM_MIN(r1, base + m->t[i].w->n);
            if (b > a)
                mm_rows(&m->t[i], a - base, b - base);
        }
    }
}

void cpu_matmul_n(struct pool *pool, const struct cpu_kern *kern, struct cpu_scratch *scratch, int n,
                  float *const *ys, const struct be_weight *const *ws, const float *x, int n_rows)
{
    struct mmn_task m = {.n = n};
    bool fused = n >= 1 && n <= CPU_MATMUL_N_MAX && n_rows > 0;
    for (int i = 0; fused && i < n; i++) {
        m.t[i] = (struct mm_task){.pool = pool, .kern = kern, .w = ws[i], .y = ys[i], .x = x, .n_rows = n_rows};
        mm_setup(&m.t[i], kern, ws[i]);
        fused = m.t[i].dot && m.t[i].act == m.t[0].act && ws[i]->k == ws[0]->k;
        m.total += ws[i]->n;
    }
    if (!fused || !mm_bind_acts(&m.t[0], scratch, x, n_rows)) {
        for (int i = 0; i < n; i++)   /* mixed kinds of weights: one at a time */
            cpu_matmul(pool, kern, scratch, ys[i], ws[i], x, n_rows);
        return;
    }
    bool clobbered = false;
    for (int i = 1; i < n; i++)
        m.t[i].xa = m.t[0].xa, m.t[i].have_xa = true;
    for (int i = 0; i < n; i++)
        clobbered |= overlaps(ys[i], (size_t)n_rows * ws[i]->n, x, (size_t)n_rows * ws[i]->k);
    m.t[0].chunk = mm_chunk(m.total, pool_size(pool));
    pool_run(pool, mmn_task_run, &m);
    mm_note_acts(scratch, &m.t[0], x, n_rows, clobbered);
}
