/*
 * backend_cpu.c — the fast CPU backend: struct backend_i over a persistent
 * thread pool and the kernel table of the best ISA this CPU runs
 * (cpu_features.c; GLIM_CPU_LEVEL caps it).
 *
 * Device memory is host memory; weights are used in place from the mapping
 * (no repacking: the kernels read GGUF blocks directly). Matmul, attention
 * and the small ops run on the pool; get_rows, copy_rows and kv_store are the
 * reference functions (memory-bound copies). Scratch for int8 activations
 * and attention state is one buffer grown on demand by the driving thread,
 * so steady-state ops allocate nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "backend_cpu.h"
#include "cpu_kern.h"
#include "cpu_ref.h"

struct cpu_ctx {
    struct pool           *pool;    /* owned */
    const struct cpu_kern *kern;    /* borrowed: static table */
    struct cpu_scratch     scratch; /* owned */
};

static struct cpu_ctx *ctx_of(struct backend *be) { return be->ctx; }

static void cpu_destroy(struct backend *be)
{
    struct cpu_ctx *c = ctx_of(be);
    if (c) {
        pool_free(c->pool);
        cpu_scratch_clear(&c->scratch);
        glim_free(c);
    }
    glim_free(be);
}

static void *cpu_alloc(struct backend *be, size_t nbytes)
{
    void *p = glim_malloc_aligned(64, nbytes);
    if (p)
        memset(p, 0, nbytes);
    return p;
}

static void cpu_release(struct backend *be, void *p) { glim_free_aligned(p); }

static int cpu_copy(struct backend *be, void *dst, const void *src, size_t n, struct glim_err *err)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);   /* an upload may rewrite an input */
    memcpy(dst, src, n);
    return GLIM_OK;
}

static int cpu_sync(struct backend *be, struct glim_err *err) { return GLIM_OK; }
static size_t cpu_mem_free(struct backend *be) { return SIZE_MAX; }

static int cpu_weight_init(struct backend *be, struct be_weight *w, struct glim_err *err)
{
    w->dev = (void *)w->host;
    w->dev_type = w->type;
    return GLIM_OK;
}

static void cpu_weight_clear(struct backend *be, struct be_weight *w) { w->dev = NULL; }

static void cpu_get_rows(struct backend *be, float *y, const struct be_weight *w, const int32_t *ids,
                         int n)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_ref_get_rows(y, w, ids, n);
}

static void cpu_mm(struct backend *be, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    struct cpu_ctx *c = ctx_of(be);
    cpu_matmul(c->pool, c->kern, &c->scratch, y, w, x, n_rows);
}

static void cpu_mm_n(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                     const float *x, int n_rows)
{
    struct cpu_ctx *c = ctx_of(be);
    cpu_matmul_n(c->pool, c->kern, &c->scratch, n, ys, ws, x, n_rows);
}

static void cpu_norm(struct backend *be, float *y, const float *x, const struct be_weight *w,
                     int64_t n_rows, int n, float eps)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_rmsnorm(ctx_of(be)->pool, y, x, w, n_rows, n, eps);
}

static void cpu_rope_op(struct backend *be, float *x, int n_rows, int n_head, int head_dim, int n_rot,
                        const int32_t *pos, float base, bool neox)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_rope(ctx_of(be)->pool, x, n_rows, n_head, head_dim, n_rot, pos, base, neox);
}

static void cpu_add(struct backend *be, float *y, const float *x, int64_t n)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_elementwise(ctx_of(be)->pool, CPU_EW_ADD, y, x, NULL, n, 0, 0);
}

static void cpu_mul_sigmoid(struct backend *be, float *y, const float *g, int64_t n)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_elementwise(ctx_of(be)->pool, CPU_EW_MUL_SIGMOID, y, g, NULL, n, 0, 0);
}

static void cpu_swiglu(struct backend *be, float *y, const float *gate, const float *up, int64_t n)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_elementwise(ctx_of(be)->pool, CPU_EW_SWIGLU, y, gate, up, n, 0, 0);
}

static void cpu_softcap(struct backend *be, float *y, int64_t n, float scale, float cap)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_elementwise(ctx_of(be)->pool, CPU_EW_SOFTCAP, y, NULL, NULL, n, scale, cap);
}

static void cpu_copy_rows(struct backend *be, float *dst, int64_t ds, const float *src, int64_t ss,
                          int n_rows, int n)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_ref_copy_rows(dst, ds, src, ss, n_rows, n);
}

static void cpu_kv_store(struct backend *be, void *kc, void *vc, uint32_t type, int64_t n_slots,
                         const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    cpu_ref_kv_store(kc, vc, type, n_slots, k, v, n_tokens, pos, kv_dim);
}

static void cpu_attn(struct backend *be, const struct be_attn_args *a)
{
    cpu_scratch_touch(&ctx_of(be)->scratch);
    struct cpu_ctx *c = ctx_of(be);
    cpu_attention(c->pool, c->kern, &c->scratch, a);
}

static const struct backend_i CPU_FAST = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .mem_free = cpu_mem_free,
    .weight_init = cpu_weight_init,
    .weight_clear = cpu_weight_clear,
    .get_rows = cpu_get_rows,
    .matmul = cpu_mm,
    .matmul_n = cpu_mm_n,
    .rmsnorm = cpu_norm,
    .rope = cpu_rope_op,
    .add = cpu_add,
    .mul_sigmoid = cpu_mul_sigmoid,
    .swiglu = cpu_swiglu,
    .scale_softcap = cpu_softcap,
    .copy_rows = cpu_copy_rows,
    .kv_store = cpu_kv_store,
    .attention = cpu_attn,
    .argmax = cpu_ref_argmax,
};

int backend_cpu_new_level(int n_threads, int level, struct backend **out, struct glim_err *err)
{
    const struct cpu_features *f = cpu_features_get();
    if (level < 0)
        level = f->level;
    const struct cpu_kern *kern = cpu_kern_get(level);
    if (!kern)
        return glim_fail(err, GLIM_EUNSUPPORTED, "cpu backend: kernel level '%s' needs an ISA this CPU "
                         "lacks (best here: %s)", cpu_level_name(level), cpu_level_name(f->level_supported));
    if (n_threads <= 0)
        n_threads = f->n_physical_cores;
    struct backend *be = glim_calloc(1, sizeof *be);
    struct cpu_ctx *c = glim_calloc(1, sizeof *c);
    if (!be || !c) {
        glim_free(be);
        glim_free(c);
        return glim_fail(err, GLIM_ENOMEM, "cpu backend: out of memory");
    }
    be->i = &CPU_FAST;
    be->ctx = c;
    c->kern = kern;
    int rc = pool_new(n_threads, &c->pool, err);
    if (rc != GLIM_OK) {
        cpu_destroy(be);
        return rc;
    }
    snprintf(be->desc, sizeof be->desc, "cpu (%d thread%s, %s)", n_threads, n_threads == 1 ? "" : "s",
             kern->name);
    *out = be;
    return GLIM_OK;
}

int backend_cpu_new(int n_threads, struct backend **out, struct glim_err *err)
{
    return backend_cpu_new_level(n_threads, -1, out, err);
}
