/*
 * backend_cpu_ref.c — the CPU backend with the scalar reference ops
 * (`--kernels ref`): exact dequantization, f32 activations, single thread.
 * Device memory is host memory; weights are used in place from the mapping.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "cpu_ref.h"

static void ref_destroy(struct backend *be) { glim_free(be); }

static void *ref_alloc(struct backend *be, size_t nbytes)
{
    void *p = glim_malloc_aligned(64, nbytes);
    if (p)
        memset(p, 0, nbytes);
    return p;
}

static void ref_release(struct backend *be, void *p) { glim_free_aligned(p); }

static int ref_copy(struct backend *be, void *dst, const void *src, size_t n, struct glim_err *err)
{
    memcpy(dst, src, n);
    return GLIM_OK;
}

static int ref_sync(struct backend *be, struct glim_err *err) { return GLIM_OK; }
static size_t ref_mem_free(struct backend *be) { return SIZE_MAX; }

static int ref_weight_init(struct backend *be, struct be_weight *w, struct glim_err *err)
{
    w->dev = (void *)w->host;
    w->dev_type = w->type;
    return GLIM_OK;
}

static void ref_weight_clear(struct backend *be, struct be_weight *w) { w->dev = NULL; }

static void ref_get_rows(struct backend *be, float *y, const struct be_weight *w, const int32_t *ids, int n)
{
    cpu_ref_get_rows(y, w, ids, n);
}
static void ref_matmul(struct backend *be, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    cpu_ref_matmul(y, w, x, n_rows);
}
static void ref_rmsnorm(struct backend *be, float *y, const float *x, const struct be_weight *w,
                        int64_t n_rows, int n, float eps)
{
    cpu_ref_rmsnorm(y, x, w, n_rows, n, eps);
}
static void ref_rope(struct backend *be, float *x, int n_rows, int n_head, int head_dim, int n_rot,
                     const int32_t *pos, float base, bool neox)
{
    cpu_ref_rope(x, n_rows, n_head, head_dim, n_rot, pos, base, neox);
}
static void ref_add(struct backend *be, float *y, const float *x, int64_t n) { cpu_ref_add(y, x, n); }
static void ref_mul_sigmoid(struct backend *be, float *y, const float *g, int64_t n)
{
    cpu_ref_mul_sigmoid(y, g, n);
}
static void ref_swiglu(struct backend *be, float *y, const float *gate, const float *up, int64_t n)
{
    cpu_ref_swiglu(y, gate, up, n);
}
static void ref_scale_softcap(struct backend *be, float *y, int64_t n, float scale, float cap)
{
    cpu_ref_scale_softcap(y, n, scale, cap);
}
static void ref_copy_rows(struct backend *be, float *dst, int64_t ds, const float *src, int64_t ss,
                          int n_rows, int n)
{
    cpu_ref_copy_rows(dst, ds, src, ss, n_rows, n);
}
static void ref_kv_store(struct backend *be, void *kc, void *vc, uint32_t type, int64_t n_slots,
                         const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim)
{
    cpu_ref_kv_store(kc, vc, type, n_slots, k, v, n_tokens, pos, kv_dim);
}
static void ref_attention(struct backend *be, const struct be_attn_args *a) { cpu_ref_attention(a); }

static const struct backend_i CPU_REF = {
    .name = "cpu-ref",
    .destroy = ref_destroy,
    .alloc = ref_alloc,
    .release = ref_release,
    .upload = ref_copy,
    .download = ref_copy,
    .sync = ref_sync,
    .mem_free = ref_mem_free,
    .weight_init = ref_weight_init,
    .weight_clear = ref_weight_clear,
    .get_rows = ref_get_rows,
    .matmul = ref_matmul,
    .rmsnorm = ref_rmsnorm,
    .rope = ref_rope,
    .add = ref_add,
    .mul_sigmoid = ref_mul_sigmoid,
    .swiglu = ref_swiglu,
    .scale_softcap = ref_scale_softcap,
    .copy_rows = ref_copy_rows,
    .kv_store = ref_kv_store,
    .attention = ref_attention,
    .argmax = cpu_ref_argmax,
};

int backend_cpu_ref_new(int n_threads, struct backend **out, struct glim_err *err)
{
    struct backend *be = glim_calloc(1, sizeof *be);
    if (!be)
        return glim_fail(err, GLIM_ENOMEM, "cpu-ref backend: out of memory");
    be->i = &CPU_REF;
    snprintf(be->desc, sizeof be->desc, "cpu-ref (scalar reference kernels, 1 thread)");
    *out = be;
    return GLIM_OK;
}
