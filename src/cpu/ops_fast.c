/*
 * ops_fast.c — the small f32 ops, run on the pool.
 *
 * These are a few percent of a decode step, so the aim is "not slow" and
 * "identical to cpu_ref": element-wise ops and RMSNorm are the reference
 * functions applied to per-thread slices (bit-identical by construction);
 * RoPE computes each row's cos/sin once with the reference formula and
 * applies it to every head, instead of once per head.
 */
#include <math.h>

#include "cpu_kern.h"
#include "cpu_ref.h"

enum { EW_MIN_SPLIT = 1 << 14, ROPE_MAX_HALF = 512 };

struct ew_task {
    int op;
    float *y;
    const float *a, *b;
    int64_t n;
    float scale, cap;
};

static void ew_run(void *arg, int ith, int nth)
{
    const struct ew_task *t = arg;
    int64_t i0, i1;
    pool_split(t->n, ith, nth, &i0, &i1);
    int64_t m = i1 - i0;
    if (m <= 0)
        return;
    switch (t->op) {
    case CPU_EW_ADD: cpu_ref_add(t->y + i0, t->a + i0, m); break;
    case CPU_EW_MUL_SIGMOID: cpu_ref_mul_sigmoid(t->y + i0, t->a + i0, m); break;
    case CPU_EW_SWIGLU: cpu_ref_swiglu(t->y + i0, t->a + i0, t->b + i0, m); break;
    default: cpu_ref_scale_softcap(t->y + i0, m, t->scale, t->cap); break;
    }
}

void cpu_elementwise(struct pool *pool, int op, float *y, const float *a, const float *b, int64_t n,
                     float scale, float cap)
{
    struct ew_task t = {.op = op, .y = y, .a = a, .b = b, .n = n, .scale = scale, .cap = cap};
    if (n < EW_MIN_SPLIT)
        ew_run(&t, 0, 1);
    else
        pool_run(pool, ew_run, &t);
}

struct rope_task {
    float *x;
    int n_rows, n_head, head_dim, n_rot;
    const int32_t *pos;
    float base;
    bool neox;
};

static void rope_row(const struct rope_task *t, int r)
{
    float cs[ROPE_MAX_HALF], sn[ROPE_MAX_HALF];
    int half = t->n_rot / 2;
    for (int i = 0; i < half; i++) {   /* the reference's formula, in double */
        double theta = (double)t->pos[r] * pow((double)t->base, -2.0 * i / t->n_rot);
        cs[i] = (float)cos(theta);
        sn[i] = (float)sin(theta);
    }
    for (int h = 0; h < t->n_head; h++) {
        float *v = t->x + ((size_t)r * t->n_head + h) * t->head_dim;
        for (int i = 0; i < half; i++) {
            int i0 = t->neox ? i : 2 * i, i1 = t->neox ? i + half : 2 * i + 1;
            float a = v[i0], b = v[i1];
            v[i0] = a * cs[i] - b * sn[i];
            v[i1] = a * sn[i] + b * cs[i];
        }
    }
}

static void rope_run(void *arg, int ith, int nth)
{
    const struct rope_task *t = arg;
    for (int r = ith; r < t->n_rows; r += nth)
        rope_row(t, r);
}

void cpu_rope(struct pool *pool, float *x, int n_rows, int n_head, int head_dim, int n_rot,
              const int32_t *pos, float base, bool neox)
{
    if (n_rot / 2 > ROPE_MAX_HALF) {
        cpu_ref_rope(x, n_rows, n_head, head_dim, n_rot, pos, base, neox);
        return;
    }
    struct rope_task t = {x, n_rows, n_head, head_dim, n_rot, pos, base, neox};
    if (n_rows == 1)
        rope_run(&t, 0, 1);
    else
        pool_run(pool, rope_run, &t);
}

struct norm_task {
    float *y;
    const float *x;
    const struct be_weight *w;
    int64_t n_rows;
    int n;
    float eps;
};

static void norm_run(void *arg, int ith, int nth)
{
    const struct norm_task *t = arg;
    int64_t r0, r1;
    pool_split(t->n_rows, ith, nth, &r0, &r1);
    if (r1 > r0)
        cpu_ref_rmsnorm(t->y + r0 * t->n, t->x + r0 * t->n, t->w, r1 - r0, t->n, t->eps);
}

void cpu_rmsnorm(struct pool *pool, float *y, const float *x, const struct be_weight *w,
                 int64_t n_rows, int n, float eps)
{
    struct norm_task t = {y, x, w, n_rows, n, eps};
    if (n_rows == 1)
        norm_run(&t, 0, 1);
    else
        pool_run(pool, norm_run, &t);
}
