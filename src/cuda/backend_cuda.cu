/*
 * backend_cuda.cu — struct backend_i for NVIDIA GPUs: device, stream, cuBLAS
 * handle, memory, weight upload and the op table.
 *
 * DESIGN. Every op is enqueued on one stream (ctx->stream) and returns at
 * once; nothing inside an op synchronises with the host or reads a host copy
 * of per-step values, so a decode step can be captured in a CUDA graph (the
 * only host syncs are upload/download/sync). Ops return void (backend.h), so
 * a failed launch is recorded in ctx->first_err and reported as
 * GLIM_EBACKEND by the next sync/download; nothing here exits.
 * Weights are uploaded once in weight_init; GGUF block types whose block
 * size is not a multiple of 16 bytes (Q8_0, Q4_0, Q6_K) are repacked
 * losslessly into structure-of-arrays layouts (cuda_util.cuh) so the GEMV can
 * use aligned 16-byte loads; with ctx->t16 (sm_90: the big ones) Q4_K/Q6_K go into 16-row
 * tiles instead (quant_t16_repack). Kernels: gemv_kquant.cu (matmul, get_rows),
 * attn_decode.cu (attention, kv_store), ops.cu (the rest), gemv_q8.cu (the
 * int8-activation GEMV that quantized matmuls of <= 16 rows use unless exact),
 * fused.cu (add_rmsnorm, attn_prep; off with GLIM_CUDA_FUSE=0).
 * graph_begin/end/launch/free capture and replay a decode step (CUDA graphs).
 * Threading: one thread drives a backend at a time (the scheduler).
 */
#include "cuda_util.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "base/alloc.h"
}

/* ---- errors ---------------------------------------------------------------- */

bool cuda_check(struct cuda_ctx *c, cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess)
        return false;
    if (c->first_err == cudaSuccess) {
        c->first_err = e;
        snprintf(c->first_msg, sizeof c->first_msg, "%s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
    }
    return true;
}

bool cuda_check_blas(struct cuda_ctx *c, cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return false;
    if (c->first_err == cudaSuccess) {
        c->first_err = cudaErrorUnknown;
        snprintf(c->first_msg, sizeof c->first_msg, "%s:%d: %s: cuBLAS status %d", file, line, what, (int)s);
    }
    return true;
}

/* GLIM_OK, or GLIM_EBACKEND with the first recorded failure (which stays sticky:
 * after a failed kernel the stream's results cannot be trusted). */
static int ctx_status(struct cuda_ctx *c, struct glim_err *err)
{
    if (c->first_err == cudaSuccess)
        return GLIM_OK;
    return glim_fail(err, GLIM_EBACKEND, "cuda: %s", c->first_msg);
}

/* A counter buffer of at least nbytes, zeroed when new (its users leave their counts at 0) */
bool cuda_buf_counts(struct cuda_ctx *c, struct cuda_buf *b, size_t nbytes)
{
    size_t had = b->nbytes;
    return cuda_buf_reserve(c, b, nbytes) &&
           !(b->nbytes != had && CUDA_TRY(c, cudaMemsetAsync(b->p, 0, b->nbytes, c->stream)));
}

bool cuda_buf_reserve(struct cuda_ctx *c, struct cuda_buf *b, size_t nbytes)
{
    if (b->nbytes >= nbytes)
        return true;
    if (c->capturing) {   /* a free/alloc here would be baked into the graph */
        cuda_check(c, cudaErrorStreamCaptureUnsupported,
                   "scratch buffer grew during graph capture (run one step of this shape before graph_begin)",
                   __FILE__, __LINE__);
        return false;
    }
    if (b->p)
        CUDA_TRY(c, cudaFreeAsync(b->p, c->stream));
    b->p = NULL;
    b->nbytes = 0;
    nbytes = (nbytes + 4095) & ~(size_t)4095;
    if (CUDA_TRY(c, cudaMallocAsync(&b->p, nbytes, c->stream))) {
        b->p = NULL;
        return false;
    }
    b->nbytes = nbytes;
    return true;
}

void cuda_buf_release(struct cuda_ctx *c, struct cuda_buf *b)
{
    if (b->p)
        cudaFreeAsync(b->p, c->stream);
    b->p = NULL;
    b->nbytes = 0;
}

/* the context as it is: only for the ops a deferred attn_prep may wait across (attention) */
static struct cuda_ctx *ctx_raw(struct backend *be)
{
    return (struct cuda_ctx *)be->ctx;
}

/* a side gate GEMV set the short kernel's ready flag, and no short kernel will read it: back to 0
 * once the GEMV has ended */
static void short_disarm(struct cuda_ctx *c)
{
    if (!c->short_armed)
        return;
    c->short_armed = false;
    cuda_side_join(c);
    CUDA_TRY(c, cudaMemsetAsync(c->short_ready.p, 0, 3 * sizeof(unsigned), c->stream));
}

/* launch the attn_prep that matmul_attn_prep left to the attention after it (cuda_attn_short_ok) */
static void short_flush(struct cuda_ctx *c)
{
    if (!c->short_pending)
        return;
    c->short_pending = false;
    cuda_attn_prep(c, &c->short_prep);
    short_disarm(c);
}

/* the context of any op but attention: a deferred attn_prep runs first */
static struct cuda_ctx *ctx_of(struct backend *be)
{
    struct cuda_ctx *c = ctx_raw(be);
    short_flush(c);
    return c;
}

/* ctx of an op that may read or write what work on the side stream uses: joins it first */
static struct cuda_ctx *op_ctx(struct backend *be)
{
    struct cuda_ctx *c = ctx_of(be);
    cuda_side_join(c);
    return c;
}

/* ---- memory ------------------------------------------------------------------ */

static void *be_alloc(struct backend *be, size_t nbytes)
{
    struct cuda_ctx *c = ctx_of(be);
    void *p = NULL;
    if (cudaMalloc(&p, nbytes ? nbytes : 1) != cudaSuccess) {
        cudaGetLastError();   /* out of memory is an answer (NULL), not a sticky failure */
        return NULL;
    }
    if (CUDA_TRY(c, cudaMemsetAsync(p, 0, nbytes, c->stream))) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void be_release(struct backend *be, void *p)
{
    if (!p)
        return;
    struct cuda_ctx *c = op_ctx(be);
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));   /* queued ops may still read p */
    CUDA_TRY(c, cudaFree(p));
}

static int be_upload(struct backend *be, void *dst, const void *src, size_t nbytes, struct glim_err *err)
{
    struct cuda_ctx *c = op_ctx(be);
    cuda_xq_forget(c);
    CUDA_TRY(c, cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, c->stream));
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));   /* src may be reused once we return */
    return ctx_status(c, err);
}

static int be_download(struct backend *be, void *dst, const void *src, size_t nbytes, struct glim_err *err)
{
    struct cuda_ctx *c = op_ctx(be);
    CUDA_TRY(c, cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));
    return ctx_status(c, err);
}

static int be_sync(struct backend *be, struct glim_err *err)
{
    struct cuda_ctx *c = op_ctx(be);
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));
    return ctx_status(c, err);
}

/* backend.h fetch_start / fetch_wait: page-locked slots, so the copy is truly asynchronous */
static int be_fetch_start(struct backend *be, int slot, const void *src, size_t nbytes, struct glim_err *err)
{
    struct cuda_ctx *c = op_ctx(be);
    if (slot < 0 || slot >= BE_FETCH_SLOTS || nbytes > BE_FETCH_MAX)
        return glim_fail(err, GLIM_EINVAL, "cuda: fetch of %zu bytes into slot %d: expected <= %d bytes, slot < %d",
                         nbytes, slot, BE_FETCH_MAX, BE_FETCH_SLOTS);
    if (!c->fetch_host) {
        if (CUDA_TRY(c, cudaHostAlloc(&c->fetch_host, BE_FETCH_SLOTS * BE_FETCH_MAX, cudaHostAllocDefault)))
            return ctx_status(c, err);
        for (int i = 0; i < BE_FETCH_SLOTS; i++)
            if (CUDA_TRY(c, cudaEventCreateWithFlags(&c->fetch_ev[i], cudaEventDisableTiming)))
                return ctx_status(c, err);
    }
    CUDA_TRY(c, cudaMemcpyAsync((char *)c->fetch_host + slot * BE_FETCH_MAX, src, nbytes, cudaMemcpyDeviceToHost,
                                c->stream));
    CUDA_TRY(c, cudaEventRecord(c->fetch_ev[slot], c->stream));
    return ctx_status(c, err);
}

/* backend.h host_alloc / host_free: page-locked, so download's copy goes straight to it */
static void *be_host_alloc(struct backend *be, size_t nbytes)
{
    (void)be;
    void *p = NULL;
    return cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocDefault) == cudaSuccess ? p : NULL;
}

static void be_host_free(struct backend *be, void *p)
{
    (void)be;
    if (p)
        cudaFreeHost(p);
}

static int be_fetch_wait(struct backend *be, int slot, void *dst, size_t nbytes, struct glim_err *err)
{
    struct cuda_ctx *c = ctx_of(be);
    if (slot < 0 || slot >= BE_FETCH_SLOTS || nbytes > BE_FETCH_MAX || !c->fetch_host)
        return glim_fail(err, GLIM_EINVAL, "cuda: fetch_wait on slot %d: nothing fetched there", slot);
    CUDA_TRY(c, cudaEventSynchronize(c->fetch_ev[slot]));
    memcpy(dst, (char *)c->fetch_host + slot * BE_FETCH_MAX, nbytes);
    return ctx_status(c, err);
}

static size_t be_mem_free(struct backend *be)
{
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        return SIZE_MAX;
    }
    return free_b;
}

/* ---- weights ------------------------------------------------------------------ */

/* 1-D F16/BF16 vectors (norm gains) become F32 so rmsnorm reads plain floats. */
static int weight_upload_vector_f32(struct cuda_ctx *c, struct be_weight *w, struct glim_err *err)
{
    int64_t n = w->k * w->n;
    float *tmp = (float *)glim_malloc((size_t)n * sizeof(float));
    if (!tmp)
        return glim_fail(err, GLIM_ENOMEM, "cuda: weight '%s': staging buffer", w->name);
    quant_traits(w->type)->to_f32(w->host, tmp, n);
    void *d = NULL;
    if (cudaMalloc(&d, (size_t)n * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        glim_free(tmp);
        return glim_fail(err, GLIM_ENOMEM, "cuda: weight '%s': out of device memory", w->name);
    }
    CUDA_TRY(c, cudaMemcpyAsync(d, tmp, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, c->stream));
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));
    glim_free(tmp);
    w->dev = d;
    w->dev_type = GLIM_TYPE_F32;
    return ctx_status(c, err);
}

/* Q4_K/Q5_K: decoded 6-bit scales/mins for the dp4a GEMV at dst (device, inside the
 * weight's allocation); sets w->aux. GLIM_ENOMEM if the host staging buffer fails. */
static int weight_upload_k45_aux(struct cuda_ctx *c, struct be_weight *w, void *dst, size_t aux_bytes)
{
    uint8_t *tmp = (uint8_t *)glim_malloc(aux_bytes);
    if (!tmp)
        return GLIM_ENOMEM;
    cuda_k45_aux_build(w->type, w->host, tmp, w->k, w->n);
    CUDA_TRY(c, cudaMemcpyAsync(dst, tmp, aux_bytes, cudaMemcpyHostToDevice, c->stream));
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));
    glim_free(tmp);
    w->aux = dst;
    return GLIM_OK;
}

/* name ends with one of list's suffixes, separated by ':' or ',' (GLIM_CUDA_T16_ALSO) */
static bool name_listed(const char *name, const char *list)
{
    size_t n = name ? strlen(name) : 0;
    for (const char *p = list; p && *p; p += *p == ',' || *p == ':') {
        size_t m = strcspn(p, ",:");
        if (m && m <= n && memcmp(name + n - m, p, m) == 0)
            return true;
        p += m;
    }
    return false;
}

static int be_weight_init(struct backend *be, struct be_weight *w, struct glim_err *err)
{
    struct cuda_ctx *c = ctx_of(be);
    w->dev = NULL;
    w->aux = NULL;
    if (!cuda_type_supported(w->type))
        return glim_fail(err, GLIM_EUNSUPPORTED,
                         "cuda: weight '%s': expected type F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K, got %s",
                         w->name ? w->name : "?", quant_type_name(w->type));
    if ((w->type == GLIM_TYPE_F16 || w->type == GLIM_TYPE_BF16) && (w->n == 1 || w->k == 1))
        return weight_upload_vector_f32(c, w, err);
    uint32_t dev_type = w->type;
    /* tiles pay where GEMV v5 has long runs per warp: small matrices stream faster row-major on v3 */
    bool tile = c->t16 && ((w->n + 15) / 16 * (w->k / 256) >= (int64_t)c->t16_min * 16 * c->n_sm ||
                           name_listed(w->name, c->t16_also));
    size_t dev_bytes = cuda_weight_dev_bytes(w->type, w->k, w->n, tile, &dev_type);
    if (dev_bytes == 0 || dev_bytes < w->nbytes)
        return glim_fail(err, GLIM_EINVAL, "cuda: weight '%s': %lld x %lld %s does not fit %zu bytes",
                         w->name ? w->name : "?", (long long)w->k, (long long)w->n,
                         quant_type_name(w->type), w->nbytes);
    size_t aux_bytes = c->k45_aux ? cuda_k45_aux_bytes(dev_type, w->k, w->n) : 0;
    /* + 16: slack for loads of whole aligned 16-byte units, which may pass a Q6_K row's last scale */
    size_t alloc_bytes = (aux_bytes ? CUDA_K45_AUX_OFFSET(dev_bytes) + aux_bytes : dev_bytes) + 16;
    void *d = NULL;
    if (cudaMalloc(&d, alloc_bytes) != cudaSuccess) {
        cudaGetLastError();
        return glim_fail(err, GLIM_ENOMEM, "cuda: weight '%s': out of device memory (%zu bytes)",
                         w->name ? w->name : "?", alloc_bytes);
    }
    void *aux = (uint8_t *)d + CUDA_K45_AUX_OFFSET(dev_bytes);
    if (aux_bytes && weight_upload_k45_aux(c, w, aux, aux_bytes) != GLIM_OK) {
        cudaFree(d);
        return glim_fail(err, GLIM_ENOMEM, "cuda: weight '%s': scale staging buffer", w->name ? w->name : "?");
    }
    if (dev_type == w->type) {
        CUDA_TRY(c, cudaMemcpyAsync(d, w->host, dev_bytes, cudaMemcpyHostToDevice, c->stream));
        CUDA_TRY(c, cudaStreamSynchronize(c->stream));
    } else {
        void *tmp = glim_malloc(dev_bytes);
        if (!tmp) {
            cudaFree(d);
            w->aux = NULL;
            return glim_fail(err, GLIM_ENOMEM, "cuda: weight '%s': staging buffer", w->name);
        }
        if (dev_type == CUDA_DT_Q4_K_T16 || dev_type == CUDA_DT_Q6_K_T16)   /* the dev_type layout (host staging) */
            quant_t16_repack(w->type, w->host, tmp, w->k, w->n);
        else
            quant_soa_repack(w->type, w->host, tmp, w->k, w->n);
        CUDA_TRY(c, cudaMemcpyAsync(d, tmp, dev_bytes, cudaMemcpyHostToDevice, c->stream));
        CUDA_TRY(c, cudaStreamSynchronize(c->stream));
        glim_free(tmp);
    }
    w->dev = d;
    w->dev_type = dev_type;
    int rc = ctx_status(c, err);
    if (rc != GLIM_OK) {
        cudaFree(d);
        w->dev = NULL;
        w->aux = NULL;
    }
    return rc;
}

static void be_weight_clear(struct backend *be, struct be_weight *w)
{
    if (!w || !w->dev)
        return;
    struct cuda_ctx *c = ctx_of(be);
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));
    CUDA_TRY(c, cudaFree(w->dev));   /* aux (if any) lives in the same allocation */
    w->dev = NULL;
    w->aux = NULL;
}

/* ---- ops --------------------------------------------------------------------------- */

static void be_get_rows(struct backend *be, float *y, const struct be_weight *w, const int32_t *ids, int n)
{
    cuda_xq_forget(op_ctx(be));
    cuda_get_rows(ctx_of(be), y, w, ids, n);
}

static void be_matmul(struct backend *be, float *y, const struct be_weight *w, const float *x, int n_rows)
{
    cuda_matmul(op_ctx(be), y, w, x, n_rows);
}

static void be_matmul_n(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                        const float *x, int n_rows)
{
    cuda_matmul_n(op_ctx(be), n, ys, ws, x, n_rows);
}

/* With ctx->glu_fuse (the default; GLIM_CUDA_GLU_FUSE=0 off): gate/up on GEMV v5 also quantize silu(gate) * up for
 * the matmul_glu that follows, which then launches no quantizer */
static void be_matmul_pair_glu(struct backend *be, float *const *ys, const struct be_weight *const *ws,
                               const float *x, int n_rows, int act)
{
    struct cuda_ctx *c = op_ctx(be);
    c->glu_req = c->glu_fuse && act == BE_GLU_SILU && n_rows == 1;
    c->glu_x = NULL;
    cuda_matmul_n(c, 2, ys, ws, x, n_rows);
    c->glu_req = false;
}

/* gate/up (with the GLU fold), then down: the two ops */
static void be_matmul_ffn(struct backend *be, float *y, float *const *fs, const struct be_weight *const *ws,
                          const float *x, int n_rows, int act)
{
    struct cuda_ctx *c = op_ctx(be);
    c->glu_req = c->glu_fuse && act == BE_GLU_SILU && n_rows == 1;
    c->glu_x = NULL;
    cuda_matmul_n(c, 2, fs, ws, x, n_rows);
    c->glu_req = false;
    cuda_matmul_glu(c, y, ws[2], fs[1], fs[0], act, n_rows);
}

/* add_rmsnorm (the op, and the fused ops' first step), leaving out the stores skip names */
static void norm_launch(struct backend *be, float *x, float *h, float *o, const struct be_weight *w_o, float eps_o,
                        const struct be_weight *w_h, float eps_h, int64_t n_rows, int n, unsigned skip)
{
    cuda_xq_forget(op_ctx(be));
    cuda_add_rmsnorm(ctx_of(be), x, h, o, w_o ? (const float *)w_o->dev : NULL, eps_o,
                     w_h ? (const float *)w_h->dev : NULL, eps_h, n_rows, n, skip);
}

/* add_rmsnorm of a fused op's operands, whose o and h are scratch afterwards (backend.h): with
 * GLIM_CUDA_NORM_SCRATCH (on unless =0) o is not stored, nor h where every matmul of ws[0..n)
 * reads it only as its int8 copy (which the norm makes, <= 16 rows) */
static void res_norm(struct backend *be, const struct be_res_norm *r, int n_rows, const struct be_weight *const *ws,
                     int n)
{
    const struct cuda_ctx *c = ctx_of(be);
    unsigned skip = 0;
    if (c->norm_scratch) {
        bool int8_only = n_rows <= 16;   /* cuda_xq_reserve's bound: the norm makes the int8 copy */
        for (int i = 0; i < n; i++)
            int8_only = int8_only && cuda_q8_k45(c, ws[i]);
        skip = CUDA_NORM_NO_O | (int8_only ? CUDA_NORM_NO_H : 0u);
    }
    norm_launch(be, r->x, r->h, r->o, r->w_o, r->eps_o, r->w_h, r->eps_h, n_rows, r->n, skip);
}

/* the residual norm before an FFN and the FFN */
static void be_add_rmsnorm_ffn(struct backend *be, const struct be_res_norm *r, float *y, float *const *fs,
                               const struct be_weight *const *ws, int n_rows, int act)
{
    res_norm(be, r, n_rows, ws, 2);   /* gate and up read h */
    be_matmul_ffn(be, y, fs, ws, r->h, n_rows, act);
}

static void be_matmul_glu(struct backend *be, float *y, const struct be_weight *w, float *x, const float *g, int act,
                          int n_rows)
{
    cuda_matmul_glu(op_ctx(be), y, w, x, g, act, n_rows);
}

static void be_argmax(struct backend *be, int32_t *out, const float *x, int n_rows, int64_t n, int32_t *pos_inc)
{
    cuda_argmax(op_ctx(be), out, x, n_rows, n, pos_inc);
}

static void be_rmsnorm(struct backend *be, float *y, const float *x, const struct be_weight *w,
                       int64_t n_rows, int n, float eps)
{
    cuda_xq_forget(op_ctx(be));
    cuda_rmsnorm(ctx_of(be), y, x, w ? (const float *)w->dev : NULL, n_rows, n, eps);
}

static void be_rope(struct backend *be, float *x, int n_rows, int n_head, int head_dim, int n_rot,
                    const int32_t *pos, float base, bool neox)
{
    cuda_xq_forget(op_ctx(be));
    cuda_rope(ctx_of(be), x, n_rows, n_head, head_dim, n_rot, pos, base, neox);
}

static void be_add(struct backend *be, float *y, const float *x, int64_t n)
{
    cuda_xq_forget(op_ctx(be));
    cuda_add(ctx_of(be), y, x, n);
}

static void be_mul_sigmoid(struct backend *be, float *y, const float *g, int64_t n)
{
    cuda_xq_forget(op_ctx(be));
    cuda_mul_sigmoid(ctx_of(be), y, g, n);
}

static void be_swiglu(struct backend *be, float *y, const float *gate, const float *up, int64_t n)
{
    cuda_xq_forget(op_ctx(be));
    cuda_swiglu(ctx_of(be), y, gate, up, n);
}

static void be_scale_softcap(struct backend *be, float *y, int64_t n, float scale, float cap)
{
    cuda_xq_forget(op_ctx(be));
    cuda_scale_softcap(ctx_of(be), y, n, scale, cap);
}

static void be_copy_rows(struct backend *be, float *dst, int64_t dst_stride, const float *src,
                         int64_t src_stride, int n_rows, int n)
{
    cuda_xq_forget(op_ctx(be));
    cuda_copy_rows(ctx_of(be), dst, dst_stride, src, src_stride, n_rows, n);
}

static void be_kv_store(struct backend *be, void *k_cache, void *v_cache, uint32_t kv_type, int64_t n_slots,
                        const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim)
{
    cuda_xq_forget(op_ctx(be));
    cuda_kv_store(ctx_of(be), k_cache, v_cache, kv_type, n_slots, k, v, n_tokens, pos, kv_dim);
}

/* The output gate the short kernel applies to a's rows: the gate fold's conditions (attn_gate_plan),
 * with the gate from the q/k/v job, or from the side stream: then *ready is its GEMV's flag, which
 * the kernel polls, or (not armed) the launch waits for the GEMV */
static const float *short_gate(struct cuda_ctx *c, const struct be_attn_args *a, unsigned **ready)
{
    const float *g = c->short_gate;
    *ready = NULL;
    if (!g || !c->gate_fold || c->exact || c->short_gate_n != (int64_t)a->n_head * a->head_dim || ((uintptr_t)g & 15))
        return NULL;
    if (c->short_side) {
        if (!c->side_pending || c->side_y != g)
            return NULL;
        if (c->short_armed)
            *ready = (unsigned *)c->short_ready.p;
        else
            cuda_side_join(c);
    }
    return g;
}

/* attention; after a matmul_attn_prep that left its attn_prep here, both as the short kernel when
 * it takes them (attn_short.cu), else the two ops */
static void be_attention(struct backend *be, const struct be_attn_args *a)
{
    struct cuda_ctx *c = ctx_raw(be);
    cuda_xq_forget(c);
    if (c->short_pending) {
        c->short_pending = false;
        unsigned *ready;
        const float *g = short_gate(c, a, &ready);
        if (cuda_attn_short(c, &c->short_prep, a, g, ready)) {
            c->short_armed = c->short_armed && !ready;   /* the kernel resets what it read */
            c->short_used++;
            short_disarm(c);
            return;
        }
        cuda_attn_prep(c, &c->short_prep);
        short_disarm(c);
    }
    cuda_attention(c, a);
}

static void be_add_rmsnorm(struct backend *be, float *x, float *h, float *o, const struct be_weight *w_o,
                           float eps_o, const struct be_weight *w_h, float eps_h, int64_t n_rows, int n)
{
    norm_launch(be, x, h, o, w_o, eps_o, w_h, eps_h, n_rows, n, 0);
}

static void be_attn_prep(struct backend *be, const struct be_attn_prep_args *a)
{
    cuda_xq_forget(ctx_of(be));
    cuda_attn_prep(ctx_of(be), a);
}

/* attn_prep then attention: one attention v4 launch that also does the prep (attn4_prep) for a
 * decode token; else the two ops. Offered only with GLIM_CUDA_ATTN_PREP=1 (opt-in until timed). */
static void be_attention_prep(struct backend *be, const struct be_attn_prep_args *p, const struct be_attn_args *a)
{
    struct cuda_ctx *c = ctx_of(be);
    cuda_xq_forget(c);
    if (cuda_attention_prep(c, p, a))
        return;
    cuda_attn_prep(c, p);
    cuda_attention(c, a);
}

/* after the q/k/v GEMV of matmul_attn_prep: attn_prep, unless the GEMV ran it (c->prep_taken) */
static void prep_finish(struct cuda_ctx *c, const struct be_attn_prep_args *a)
{
    c->prep_req = NULL;
    cuda_xq_forget(c);
    if (c->prep_taken) {
        c->prep_used++;
    } else if (cuda_attn_short_ok(c, a)) {   /* the attention after it does it (be_attention) */
        c->short_prep = *a;
        c->short_pending = true;
    } else {
        cuda_attn_prep(c, a);
    }
}

/* One token's q/k/v(/gate) GEMV runs attn_prep in the last warp of each head (ctx->prep_fold, opt-in
 * GLIM_CUDA_PREP_FOLD=1; v3): no attn_prep launch. Else the two ops. */
static void be_matmul_attn_prep(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                                const float *x, int n_rows, const struct be_attn_prep_args *a)
{
    struct cuda_ctx *c = op_ctx(be);
    c->prep_req = c->prep_fold && !(c->dbg_skip & CUDA_SKIP_PREP) ? a : NULL;
    c->prep_taken = false;
    c->short_gate = n == 4 && n_rows == 1 ? ys[3] : NULL;   /* for the short kernel (be_attention) */
    c->short_gate_n = n == 4 ? ws[3]->n : 0;
    c->short_side = false;
    if (n == 4 && n_rows == 1 && (c->dbg_skip & CUDA_SKIP_GATE))
        n = 3;   /* bench knob, wrong output: the gate GEMV left out, its row read as it is */
    /* the short kernel will take this token's attention: the side GEMV sets a flag it polls */
    unsigned *ready = NULL;
    if (c->short_poll && n == 4 && n_rows == 1 && cuda_attn_short_ok(c, a) &&
        cuda_buf_counts(c, &c->short_ready, 3 * sizeof(unsigned)))
        ready = (unsigned *)c->short_ready.p;
    /* a 4th part (the output gate) is read by no attn_prep or attention (backend.h): its GEMV may
     * run beside the q/k/v GEMV, attn_prep and attention, on the side stream (a prep fold needs
     * parts 0..2 only) */
    if (n == 4 && n_rows == 1 && cuda_matmul_side(c, ys[3], ws[3], x, ready)) {
        n = 3;
        c->short_side = true;
        c->short_armed = ready != NULL;
    }
    cuda_matmul_n(c, n, ys, ws, x, n_rows);
    prep_finish(c, a);
}

/* A layer's residual, the next layer's attention norm, its q/k/v(/gate) and attn_prep */
static void be_add_rmsnorm_attn(struct backend *be, const struct be_res_norm *r, int n, float *const *ys,
                                const struct be_weight *const *ws, int n_rows, const struct be_attn_prep_args *p)
{
    res_norm(be, r, n_rows, ws, n);
    be_matmul_attn_prep(be, n, ys, ws, r->h, n_rows, p);
}

/* ---- CUDA graphs ------------------------------------------------------------------
 * graph_begin starts a relaxed-mode capture of ctx->stream; the ops that follow are
 * recorded, not run (no op allocates or syncs once its scratch has the step's size:
 * cuda_buf_reserve refuses to grow while capturing). graph_end instantiates the
 * recording; graph_launch replays it on the same stream. A failure during capture
 * ran nothing on the device, so it is reported once and not kept sticky: the caller
 * can fall back to running the step op by op. */

static int be_graph_begin(struct backend *be, struct glim_err *err)
{
    struct cuda_ctx *c = op_ctx(be);
    int rc = ctx_status(c, err);
    if (rc != GLIM_OK)
        return rc;
    if (c->capturing)
        return glim_fail(err, GLIM_EINVAL, "cuda: graph_begin: a capture is already open");
    cuda_xq_forget(c);
    c->v5_trace_n = 0;   /* the trace keeps the graph's launches (the last replay) */
    c->short_trace_n = 0;
    c->norm_trace_n = 0;
    if (CUDA_TRY(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed)))
        return ctx_status(c, err);
    c->capturing = true;
    return GLIM_OK;
}

static int be_graph_end(struct backend *be, void **graph, struct glim_err *err)
{
    struct cuda_ctx *c = ctx_of(be);
    *graph = NULL;
    if (!c->capturing)
        return glim_fail(err, GLIM_EINVAL, "cuda: graph_end without graph_begin");
    cuda_side_join(c);   /* a capture must end with every forked stream joined */
    c->capturing = false;
    cuda_xq_forget(c);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    cudaGraphExec_t exec = NULL;
    if (e == cudaSuccess && c->first_err == cudaSuccess)
        e = cudaGraphInstantiate(&exec, g, cudaGraphInstantiateFlagUseNodePriority);   /* side: lower */
    if (g)
        cudaGraphDestroy(g);
    if (e == cudaSuccess && c->first_err == cudaSuccess) {
        *graph = exec;
        return GLIM_OK;
    }
    int rc = c->first_err != cudaSuccess
                 ? glim_fail(err, GLIM_EBACKEND, "cuda: graph capture: %s", c->first_msg)
                 : glim_fail(err, GLIM_EBACKEND, "cuda: graph capture: %s", cudaGetErrorString(e));
    if (exec)
        cudaGraphExecDestroy(exec);
    cudaGetLastError();              /* nothing ran: the stream is usable op by op */
    c->first_err = cudaSuccess;
    c->first_msg[0] = 0;
    return rc;
}

static double host_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* GLIM_CUDA_GRAPH_TIME=1 (diagnosis): add the last replay's GPU time (start event to end event) */
static void graph_time_read(struct cuda_ctx *c)
{
    float ms = 0;
    if (c->gt_open && cudaEventSynchronize(c->gt_ev[1]) == cudaSuccess &&
        cudaEventElapsedTime(&ms, c->gt_ev[0], c->gt_ev[1]) == cudaSuccess)
        c->gt_sum_ms += ms, c->gt_n++;
    c->gt_open = false;
}

static int be_graph_launch(struct backend *be, void *graph, struct glim_err *err)
{
    struct cuda_ctx *c = op_ctx(be);
    int rc = ctx_status(c, err);
    if (rc != GLIM_OK)
        return rc;
    if (!graph)
        return glim_fail(err, GLIM_EINVAL, "cuda: graph_launch: no graph");
    cuda_xq_forget(c);
    double t0 = 0;
    if (c->graph_time) {
        graph_time_read(c);
        t0 = host_us();
        CUDA_TRY(c, cudaEventRecord(c->gt_ev[0], c->stream));
    }
    CUDA_TRY(c, cudaGraphLaunch((cudaGraphExec_t)graph, c->stream));
    if (c->graph_time) {
        CUDA_TRY(c, cudaEventRecord(c->gt_ev[1], c->stream));
        c->gt_open = true;
        c->gt_launch_us += host_us() - t0;
    }
    return ctx_status(c, err);
}

/* Decode steps whose context the short kernel takes run other kernels than longer ones: a graph
 * captured for one class is replayed only for steps of it */
static int be_graph_class(struct backend *be, int32_t pos)
{
    const struct cuda_ctx *c = ctx_raw(be);
    return c->attn_short && pos >= 0 && pos < CUDA_SHORT_KEYS ? 1 : 0;
}

static void be_graph_free(struct backend *be, void *graph)
{
    if (!graph)
        return;
    struct cuda_ctx *c = ctx_of(be);
    CUDA_TRY(c, cudaStreamSynchronize(c->stream));   /* a replay may still be queued */
    CUDA_TRY(c, cudaGraphExecDestroy((cudaGraphExec_t)graph));
}

/* ---- lifetime ---------------------------------------------------------------------- */

/* a diagnosis trace's end: its summary on stderr once the stream is done, then its buffer freed */
static void trace_end(struct cuda_ctx *c, void **buf, void (*dump)(struct cuda_ctx *))
{
    if (!*buf)
        return;
    cudaStreamSynchronize(c->stream);
    dump(c);
    cudaFree(*buf);
    *buf = NULL;
}

/* Frees everything, `be` included. */
static void be_destroy(struct backend *be)
{
    if (!be)
        return;
    struct cuda_ctx *c = ctx_raw(be);
    if (c) {
        cudaSetDevice(c->device);
        if (c->stream) {   /* every scratch buffer of the context */
            struct cuda_buf *bufs[] = {&c->wtile, &c->xbf,     &c->attn_part, &c->xq,       &c->v5_part,
                                       &c->v5_cnt, &c->glu_q,  &c->glu_cnt,   &c->prep_cnt, &c->am_part,
                                       &c->att_q,  &c->short_ready, &c->v5s_ctr};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
                cuda_buf_release(c, bufs[i]);
            cudaStreamSynchronize(c->stream);
        }
        if (c->graph_time) {
            graph_time_read(c);
            if (c->gt_n)
                fprintf(stderr, "graph time: %ld replays, %.1f us of GPU time each (first kernel's start to last's end); "
                        "cudaGraphLaunch takes %.1f us of host time\n",
                        c->gt_n, 1e3 * c->gt_sum_ms / (double)c->gt_n, c->gt_launch_us / (double)c->gt_n);
            cudaEventDestroy(c->gt_ev[0]);
            cudaEventDestroy(c->gt_ev[1]);
        }
        trace_end(c, &c->norm_trace, cuda_norm_trace_dump);
        trace_end(c, &c->v5_trace, cuda_v5_trace_dump);
        trace_end(c, &c->short_trace, cuda_short_trace_dump);
        if (c->fetch_host) {
            cudaStreamSynchronize(c->stream);
            cudaFreeHost(c->fetch_host);
            for (int i = 0; i < BE_FETCH_SLOTS; i++)
                if (c->fetch_ev[i])
                    cudaEventDestroy(c->fetch_ev[i]);
        }
        if (c->side) {
            cudaStreamSynchronize(c->side);
            cudaStreamDestroy(c->side);
        }
        if (c->side_fork)
            cudaEventDestroy(c->side_fork);
        if (c->side_done)
            cudaEventDestroy(c->side_done);
        if (c->cublas)
            cublasDestroy(c->cublas);
        if (c->stream)
            cudaStreamDestroy(c->stream);
        glim_free(c);
    }
    glim_free(be);
}

/* Filled by member name, so a new member of backend_i (NULL = not offered) cannot
 * shift the others (C++ has no out-of-order designated initializers).
 * fused: offer the fused ops (fused.cu); without them the model runs the sequences. */
/* cs[t][i] = the RoPE (cos, sin) of pos[t], pair i: computed once a step for every layer
 * (be_attn_prep_args.rope_cs). Offered by default (GLIM_CUDA_ROPE_TABLE=0: off): tg128 167.2 vs
 * 165.6 t/s on the H200, same bits (2026-12-03). */
static void be_rope_table(struct backend *be, float *cs, const int32_t *pos, int n_tokens, int n_rot, float base)
{
    /* writes cs only (model scratch of its own): the quantized copy of h for the q/k/v GEMV that
     * follows stays good, so no cuda_xq_forget */
    cuda_rope_table(ctx_of(be), (float2 *)cs, pos, n_tokens, n_rot, base);
}

static struct backend_i cuda_ops(bool fused, bool attn_prep = false, bool rope_table = false)
{
    struct backend_i o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.destroy = be_destroy;
    o.alloc = be_alloc;
    o.release = be_release;
    o.upload = be_upload;
    o.download = be_download;
    o.sync = be_sync;
    o.mem_free = be_mem_free;
    o.weight_init = be_weight_init;
    o.weight_clear = be_weight_clear;
    o.get_rows = be_get_rows;
    o.matmul = be_matmul;
    o.matmul_n = be_matmul_n;
    o.rmsnorm = be_rmsnorm;
    o.rope = be_rope;
    o.add = be_add;
    o.mul_sigmoid = be_mul_sigmoid;
    o.swiglu = be_swiglu;
    o.scale_softcap = be_scale_softcap;
    o.copy_rows = be_copy_rows;
    o.kv_store = be_kv_store;
    o.attention = be_attention;
    if (fused) {
        o.matmul_glu = be_matmul_glu;
        o.matmul_pair_glu = be_matmul_pair_glu;
        o.add_rmsnorm = be_add_rmsnorm;
        o.attn_prep = be_attn_prep;
        o.matmul_attn_prep = be_matmul_attn_prep;
        o.matmul_ffn = be_matmul_ffn;
        o.add_rmsnorm_ffn = be_add_rmsnorm_ffn;
        o.add_rmsnorm_attn = be_add_rmsnorm_attn;
        if (attn_prep)
            o.attention_prep = be_attention_prep;
        if (rope_table)
            o.rope_table = be_rope_table;
    }
    o.argmax = be_argmax;
    o.fetch_start = be_fetch_start;
    o.fetch_wait = be_fetch_wait;
    o.host_alloc = be_host_alloc;
    o.host_free = be_host_free;
    o.graph_begin = be_graph_begin;
    o.graph_end = be_graph_end;
    o.graph_launch = be_graph_launch;
    o.graph_free = be_graph_free;
    o.graph_class = be_graph_class;
    return o;
}

/* be->i of every CUDA backend is one of these two: the fused ops on (default) or off
 * (GLIM_CUDA_FUSE=0 at creation; backend_i is shared and const, so the switch picks
 * the table) */
static const struct backend_i CUDA_I = cuda_ops(true, false, true);
static const struct backend_i CUDA_I_UNFUSED = cuda_ops(false);
static const struct backend_i CUDA_I_NO_TABLE = cuda_ops(true);                /* GLIM_CUDA_ROPE_TABLE=0 */
static const struct backend_i CUDA_I_ATTN_PREP = cuda_ops(true, true, true);   /* GLIM_CUDA_ATTN_PREP=1 */
static const struct backend_i CUDA_I_ATTN_PREP_NO_TABLE = cuda_ops(true, true);   /* ... and ROPE_TABLE=0 */

static bool is_cuda(const struct backend *be)
{
    return be && (be->i == &CUDA_I || be->i == &CUDA_I_UNFUSED || be->i == &CUDA_I_NO_TABLE ||
                  be->i == &CUDA_I_ATTN_PREP || be->i == &CUDA_I_ATTN_PREP_NO_TABLE);
}

/* tests: the rope_table op whether or not the table offers it; -1: not a CUDA backend */
extern "C" int backend_cuda_rope_table(struct backend *be, float *cs, const int32_t *pos, int n_tokens, int n_rot,
                                       float base)
{
    if (!is_cuda(be))
        return -1;
    be_rope_table(be, cs, pos, n_tokens, n_rot, base);
    return 0;
}

/* tests: the fused path alone; 1 = it ran, 0 = not these shapes (nothing launched) */
extern "C" int backend_cuda_attention_prep(struct backend *be, const struct be_attn_prep_args *p,
                                           const struct be_attn_args *a)
{
    if (!is_cuda(be))
        return 0;
    cuda_xq_forget(ctx_of(be));
    return cuda_attention_prep(ctx_of(be), p, a) ? 1 : 0;
}

/* Exact mode: quantized matmuls of <= 16 rows use the f32 GEMV (bit-for-bit the CPU
 * reference's dequantized weights, fp32 FMA) instead of int8 activations + dp4a.
 * Default: off, or on when GLIM_CUDA_EXACT is set to anything but "0" at creation.
 * Returns GLIM_EINVAL if be is not a CUDA backend. */
extern "C" int backend_cuda_set_exact(struct backend *be, bool exact)
{
    if (!is_cuda(be))
        return GLIM_EINVAL;
    ctx_of(be)->exact = exact;
    cuda_xq_forget(ctx_of(be));
    return GLIM_OK;
}

/* New kernels (today: attention v2, attn_decode.cu) on or off. Default: on, or off when
 * GLIM_CUDA_NEW is "0" at creation. Returns GLIM_EINVAL if be is not a CUDA backend. */
extern "C" int backend_cuda_set_new(struct backend *be, bool on)
{
    if (!is_cuda(be))
        return GLIM_EINVAL;
    ctx_of(be)->attn_v2 = on;
    ctx_of(be)->k45_aux = on;   /* weights initialised from now on; GEMV uses aux where present */
    return GLIM_OK;
}

/* GEMV version for one activation row: 3 (default: dp4a), 5 (Q4_K and Q6_K weights on the tensor
 * cores, others take 3), or 2 (one launch per weight); GLIM_CUDA_GEMV=2|3|5. (4, the shared-memory
 * stream, measured slower and was removed on 2026-12-06: its code is at 9c5b9ba.)
 * GLIM_EINVAL if not a CUDA backend, another version, or 5 before sm_80. */
extern "C" int backend_cuda_set_gemv(struct backend *be, int version)
{
    if (!is_cuda(be) || (version != 2 && version != 3 && version != 5) || (version == 5 && ctx_of(be)->cc_major < 8))
        return GLIM_EINVAL;
    ctx_of(be)->gemv_ver = version;
    return GLIM_OK;
}

/* Q4_K and Q6_K weights initialised from now on are uploaded in 16-row tiles (CUDA_DT_Q4_K_T16,
 * CUDA_DT_Q6_K_T16: quant_t16_repack), every one of them (on), or row-major (off). Every kernel
 * reads both. Default at creation: on sm_90 the big matrices only
 * (GLIM_CUDA_T16_MIN, cuda_ctx.t16_min), else off; GLIM_CUDA_T16=0|1 overrides.
 * GLIM_EINVAL if not a CUDA backend. */
extern "C" int backend_cuda_set_t16(struct backend *be, bool on)
{
    if (!is_cuda(be))
        return GLIM_EINVAL;
    ctx_of(be)->t16 = on;
    ctx_of(be)->t16_min = 0;
    return GLIM_OK;
}

/* one of the context's on/off switches; GLIM_EINVAL if not a CUDA backend */
static int set_switch(struct backend *be, bool cuda_ctx::*sw, bool on)
{
    if (!is_cuda(be))
        return GLIM_EINVAL;
    ctx_of(be)->*sw = on;
    return GLIM_OK;
}

/* matmul_pair_glu lets the gate/up GEMV (v5, one row) quantize silu(gate) * up for the down
 * projection (on), or leaves it to matmul_glu's quantizer (off). Default: on, off when
 * GLIM_CUDA_GLU_FUSE is "0" at creation. */
extern "C" int backend_cuda_set_glu_fuse(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::glu_fuse, on);
}

/* an int setting from the environment at creation: def when unset, clamped to [lo, hi] */
static int env_level(const char *name, int def, int lo, int hi)
{
    const char *v = getenv(name);
    int x = v ? atoi(v) : def;
    return x < lo ? lo : x > hi ? hi : x;
}

/* an int setting of the context in [lo, hi] */
static int set_level(struct backend *be, int cuda_ctx::*f, int v, int lo, int hi)
{
    if (!is_cuda(be) || v < lo || v > hi)
        return GLIM_EINVAL;
    ctx_of(be)->*f = v;
    return GLIM_OK;
}

/* one-row GEMVs (of one weight kind, or two with v5_mix) on v5s with chunks of `chunk` units (1..8), or on v5 (0).
 * Default: 4 where the HBM's peak is below 4 TB/s (H100), else 0 (H200); or GLIM_CUDA_V5S at creation. */
extern "C" int backend_cuda_set_v5s(struct backend *be, int chunk)
{
    return set_level(be, &cuda_ctx::v5s, chunk, 0, 8);
}

/* v5s's run-time pool: the last `pct` % of a job's tiles (0..90; 0: none) claimed whole by the CTAs
 * that get there first. Default: 50, or GLIM_CUDA_V5S_POOL at creation. */
extern "C" int backend_cuda_set_v5s_pool(struct backend *be, int pct)
{
    return set_level(be, &cuda_ctx::v5s_pool, pct, 0, 90);
}

/* the pool claims a v5s CTA keeps ahead of need (1..16). Default: 2, or GLIM_CUDA_V5S_AHEAD at
 * creation. */
extern "C" int backend_cuda_set_v5s_ahead(struct backend *be, int n)
{
    return set_level(be, &cuda_ctx::v5s_ahead, n, 1, 16);
}

extern "C" int backend_cuda_get_v5s_ahead(struct backend *be)
{
    return ctx_of(be)->v5s_ahead;
}

/* v5s's warps a CTA (4, 8 or 16: 4, 2 or 1 CTAs an SM), which share their chunks. Default: 16, or
 * GLIM_CUDA_V5S_WARPS at creation. */
extern "C" int backend_cuda_set_v5s_warps(struct backend *be, int warps)
{
    if (warps != 4 && warps != 8 && warps != 16)
        return GLIM_EINVAL;
    return set_level(be, &cuda_ctx::v5s_warps, warps, 4, 16);
}

extern "C" int backend_cuda_get_v5s_warps(struct backend *be)
{
    return ctx_of(be)->v5s_warps;
}

/* a one-row job's Q4_K and Q6_K parts (q/k/v where v is Q6_K) in one v5 or v5s launch (1), or a
 * launch each (0). Default: 0, or GLIM_CUDA_V5_MIX at creation. */
extern "C" int backend_cuda_set_v5_mix(struct backend *be, int on)
{
    return set_level(be, &cuda_ctx::v5_mix, on, 0, 1);
}

extern "C" int backend_cuda_get_v5s(struct backend *be)
{
    return ctx_of(be)->v5s;
}

extern "C" int backend_cuda_get_v5s_pool(struct backend *be)
{
    return ctx_of(be)->v5s_pool;
}

/* matmul_attn_prep folds attn_prep into the q/k/v GEMV (on) or runs the two ops (off). Default:
 * off, on when GLIM_CUDA_PREP_FOLD is "1" at creation. */
extern "C" int backend_cuda_set_prep_fold(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::prep_fold, on);
}

/* one of the context's counts for tests, or `none` if not a CUDA backend */
static long get_count(struct backend *be, long cuda_ctx::*n, long none)
{
    return is_cuda(be) ? ctx_of(be)->*n : none;
}

/* how many matmul_attn_prep calls the GEMV prepared (tests); -1 if not a CUDA backend */
extern "C" long backend_cuda_prep_used(struct backend *be)
{
    return get_count(be, &cuda_ctx::prep_used, -1);
}

/* How many matmuls took the gate/up GEMV's SwiGLU copy instead of quantizing (tests) */
extern "C" long backend_cuda_glu_used(struct backend *be)
{
    return get_count(be, &cuda_ctx::glu_used, 0);
}

/* The output gate's GEMV of a one-token q/k/v/gate job on the side stream with ctas_per_sm persistent
 * CTAs an SM (1..4), or in the job (0). GLIM_EINVAL if not a CUDA backend or out of range. */
extern "C" int backend_cuda_set_gate_side(struct backend *be, int ctas_per_sm)
{
    if (!is_cuda(be) || ctas_per_sm < 0 || ctas_per_sm > 4)
        return GLIM_EINVAL;
    cuda_side_join(ctx_of(be));
    ctx_of(be)->side_ctas = ctas_per_sm;
    return GLIM_OK;
}

/* attention's combine makes Wo's gated int8 input (GLIM_CUDA_GATE_FOLD; attn_gate_plan) */
extern "C" int backend_cuda_set_gate_fold(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::gate_fold, on);
}

/* one decode token's attn_prep, attention and gate in one launch at short contexts (attn_short.cu) */
extern "C" int backend_cuda_set_attn_short(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::attn_short, on);
}

/* ... polling the side gate GEMV's flag (on) or launched after that GEMV */
extern "C" int backend_cuda_set_short_poll(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::short_poll, on);
}

/* the fused add_rmsnorm ops leave o and h unwritten where nothing reads them (res_norm) */
extern "C" int backend_cuda_set_norm_scratch(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::norm_scratch, on);
}

/* whether a switch is on (1, 0), or -1 if not a CUDA backend */
static int get_switch(struct backend *be, bool cuda_ctx::*sw)
{
    return is_cuda(be) ? (int)(ctx_of(be)->*sw) : -1;
}

extern "C" int backend_cuda_get_gate_fold(struct backend *be)
{
    return get_switch(be, &cuda_ctx::gate_fold);
}

extern "C" int backend_cuda_get_norm_scratch(struct backend *be)
{
    return get_switch(be, &cuda_ctx::norm_scratch);
}

/* matmuls that took that input instead of quantizing (tests); 0 if not a CUDA backend */
extern "C" long backend_cuda_att_used(struct backend *be)
{
    return get_count(be, &cuda_ctx::att_used, 0);
}

extern "C" long backend_cuda_short_used(struct backend *be)
{
    return get_count(be, &cuda_ctx::short_used, 0);
}

/* CTAs per SM of the gate GEMV on the side stream (0 = off), or -1 if not a CUDA backend */
extern "C" int backend_cuda_get_gate_side(struct backend *be)
{
    return is_cuda(be) ? ctx_of(be)->side_ctas : -1;
}

/* gate GEMVs run on the side stream so far, or 0 if not a CUDA backend */
extern "C" long backend_cuda_side_used(struct backend *be)
{
    return get_count(be, &cuda_ctx::side_used, 0);
}

/* Persistent GEMV v3 for one-kind jobs with ctas_per_sm CTAs per SM (1..8), or off (0).
 * GLIM_EINVAL if not a CUDA backend or out of range. */
extern "C" int backend_cuda_set_gemv_persist(struct backend *be, int ctas_per_sm)
{
    if (!is_cuda(be) || ctas_per_sm < 0 || ctas_per_sm > 8)
        return GLIM_EINVAL;
    ctx_of(be)->gemv_persist = ctas_per_sm;
    return GLIM_OK;
}

/* the GEMV version for one activation row (2..5), or -1 if not a CUDA backend */
extern "C" int backend_cuda_get_gemv(struct backend *be)
{
    return is_cuda(be) ? ctx_of(be)->gemv_ver : -1;
}

/* 1 when matmuls of 2..16 rows take GEMV v5 for row-major Q4_K/Q6_K weights too (default), 0 when
 * those take v2, -1 if not a CUDA backend */
extern "C" int backend_cuda_get_v5_nr_rows(struct backend *be)
{
    return get_switch(be, &cuda_ctx::v5_nr_rows);
}

/* CTAs per SM of the persistent GEMV v3 (0 = off), or -1 if not a CUDA backend */
extern "C" int backend_cuda_get_gemv_persist(struct backend *be)
{
    return is_cuda(be) ? ctx_of(be)->gemv_persist : -1;
}

/* Tensor-core attention (attn_decode.cu v4) for prefill batches (n_tokens > 16) on or off.
 * Default: on, or off when GLIM_CUDA_ATTN_TC is "0" at creation (then v2 runs per query
 * token). GLIM_EINVAL if not a CUDA backend. */
extern "C" int backend_cuda_set_attn_tc(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::attn_tc, on);
}

/* The same for decode and verify (n_tokens <= 16). Default: on, or off when
 * GLIM_CUDA_ATTN_DEC_TC is "0" at creation (then v2). GLIM_EINVAL if not a CUDA backend. */
extern "C" int backend_cuda_set_attn_dec_tc(struct backend *be, bool on)
{
    return set_switch(be, &cuda_ctx::attn_dec_tc, on);
}

extern "C" bool backend_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return n > 0;
}

extern "C" int backend_cuda_new(int device, struct backend **out, struct glim_err *err)
{
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0)
        return glim_fail(err, GLIM_EBACKEND, "cuda: no CUDA device (%s)",
                         e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
    if (device < 0 || device >= n_dev)
        return glim_fail(err, GLIM_EINVAL, "cuda: device %d: expected 0..%d", device, n_dev - 1);
    struct backend *be = (struct backend *)glim_calloc(1, sizeof *be);
    struct cuda_ctx *c = (struct cuda_ctx *)glim_calloc(1, sizeof *c);
    if (!be || !c) {
        glim_free(be);
        glim_free(c);
        return glim_fail(err, GLIM_ENOMEM, "cuda: backend context");
    }
    const char *fuse = getenv("GLIM_CUDA_FUSE");
    const char *f_ap = getenv("GLIM_CUDA_ATTN_PREP"), *f_rt = getenv("GLIM_CUDA_ROPE_TABLE");
    bool ap = f_ap && strcmp(f_ap, "1") == 0, rt = !(f_rt && strcmp(f_rt, "0") == 0);
    be->i = fuse && strcmp(fuse, "0") == 0 ? &CUDA_I_UNFUSED
            : ap                            ? (rt ? &CUDA_I_ATTN_PREP : &CUDA_I_ATTN_PREP_NO_TABLE)
                                            : (rt ? &CUDA_I : &CUDA_I_NO_TABLE);
    be->ctx = c;
    c->device = device;
    cudaDeviceProp prop;
    int prio_least = 0, prio_most = 0;
    if (CUDA_TRY(c, cudaSetDevice(device)) || CUDA_TRY(c, cudaGetDeviceProperties(&prop, device)) ||
        CUDA_TRY(c, cudaDeviceGetStreamPriorityRange(&prio_least, &prio_most)) ||
        /* the decode chain first: a GEMV forked to `side` takes only what the chain leaves */
        CUDA_TRY(c, cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, prio_most)) ||
        CUDA_TRY(c, cudaStreamCreateWithPriority(&c->side, cudaStreamNonBlocking, prio_least)) ||
        CUDA_TRY(c, cudaEventCreateWithFlags(&c->side_fork, cudaEventDisableTiming)) ||
        CUDA_TRY(c, cudaEventCreateWithFlags(&c->side_done, cudaEventDisableTiming)) ||
        CUBLAS_TRY(c, cublasCreate(&c->cublas)) || CUBLAS_TRY(c, cublasSetStream(c->cublas, c->stream))) {
        int rc = ctx_status(c, err);
        be_destroy(be);
        return rc;
    }
    c->n_sm = prop.multiProcessorCount;
    const char *exact = getenv("GLIM_CUDA_EXACT");
    c->exact = exact && exact[0] && strcmp(exact, "0") != 0;
    const char *fresh = getenv("GLIM_CUDA_NEW");
    c->attn_v2 = !(fresh && strcmp(fresh, "0") == 0);
    const char *f_attn = getenv("GLIM_CUDA_NEW_ATTN"), *f_k45 = getenv("GLIM_CUDA_NEW_K45");
    if (f_attn && strcmp(f_attn, "0") == 0)
        c->attn_v2 = false;
    /* the decoded-scale table costs 11% more memory on Q4_K weights and measured no faster
     * with GEMV v3 (tg128 133.3 t/s without, 131.2 with; docs/PERFORMANCE.md): opt-in */
    c->k45_aux = f_k45 && strcmp(f_k45, "1") == 0;
    /* Q4_K/Q6_K in 16-row tiles for GEMV v5 (a warp's loads 512 contiguous bytes), the big
     * matrices only: tg128 on the H200 (30B preset, 2026-12-03) 160.2-161.4 t/s, vs 152.9 all
     * row-major and 159.3 all tiled (the attention matrices stream faster row-major on v3) */
    const char *f_t16 = getenv("GLIM_CUDA_T16"), *f_t16_min = getenv("GLIM_CUDA_T16_MIN");
    c->t16 = f_t16 ? strcmp(f_t16, "1") == 0 : prop.major >= 9;
    c->t16_min = f_t16_min ? atoi(f_t16_min) : f_t16 ? 0 : 8;
    c->t16_min = c->t16_min < 0 ? 0 : c->t16_min;
    c->t16_also = getenv("GLIM_CUDA_T16_ALSO");
    /* with tiles, 2..16 rows (DFlash verify) on v5: at 8 rows faster than v2 on tiles and on rows */
    const char *f_nr = getenv("GLIM_CUDA_V5_NR");
    c->v5_nr = f_nr ? atoi(f_nr) > 0 : true;
    const char *f_nr_rows = getenv("GLIM_CUDA_V5_NR_ROWS");   /* DFlash verify B = 16: 26.6 vs 31.8 ms */
    c->v5_nr_rows = c->v5_nr && !(f_nr_rows && strcmp(f_nr_rows, "0") == 0);
    const char *f_glu = getenv("GLIM_CUDA_GLU_FUSE");
    /* gate/up quantize silu(gate) * up for down (no quantizer launch): 162.8 vs 161.4 t/s */
    c->glu_fuse = !(f_glu && strcmp(f_glu, "0") == 0);
    /* v5s, chunks of 4 units, where the HBM's peak is below 4 TB/s: H100 (3.35) tg128 145.26-145.34 vs
     * 143.91-144.10 t/s on v5 (2026-12-06). Faster HBM, plain v5: H200 (4.8) v5 180.00-180.14 vs v5s with
     * its pool 176.94-176.99 (no graphs 169.93 vs 166.29; 2026-12-06, docs/PERFORMANCE.md) */
    int mem_khz, bus_bits;
    double peak_gbs = cuda_hbm_peak(device, &mem_khz, &bus_bits);
    c->v5s = env_level("GLIM_CUDA_V5S", peak_gbs > 0 && peak_gbs < 4000 ? 4 : 0, 0, 8);
    /* ... and half its tiles pooled: H100 148.92-149.26 vs 146.99-147.34 t/s (30: 148.0, 70: 149.2, 90: 148.6) */
    c->v5s_pool = env_level("GLIM_CUDA_V5S_POOL", 50, 0, 90);
    /* ... claimed 2 ahead: H100 147.0-147.2 vs 146.4-146.7 t/s at 6 (1: 147.1, 3: 147.1; 2026-12-06) */
    c->v5s_ahead = env_level("GLIM_CUDA_V5S_AHEAD", 2, 1, 16);
    /* bench knob: v5s CTAs of 8 or 4 warps (2 or 4 an SM). H100 2026-12-06: 121.3 / 85.8 vs 149.0-149.3 t/s
     * at the default carveout, which sizes an SM's shared memory for one such CTA (11.6 KB -> 16 KB for
     * gate/up at 8 warps), so the second waits: with GLIM_CUDA_CARVEOUT=14 (32 KB) both fit */
    c->v5s_warps = env_level("GLIM_CUDA_V5S_WARPS", 16, 4, 16);
    c->v5s_warps = c->v5s_warps >= 16 ? 16 : c->v5s_warps >= 8 ? 8 : 4;
    c->v5_mix = env_level("GLIM_CUDA_V5_MIX", 0, 0, 1);
    const char *f_prep = getenv("GLIM_CUDA_PREP_FOLD");
    /* opt-in: measured slower (tg128 154.2 vs 158.5 t/s, 2026-12-03; a fence per task) */
    c->prep_fold = f_prep && strcmp(f_prep, "1") == 0;
    /* the gate GEMV beside attention, 2 CTAs an SM: tg128 171.1 vs 167.1-168.0 t/s (1: 170.1, 4: 170.7;
     * --no-graph 161.0 vs 161.3), 2026-12-04. GLIM_CUDA_GATE_SIDE=0: in the q/k/v job */
    const char *f_side = getenv("GLIM_CUDA_GATE_SIDE");
    c->side_ctas = f_side && f_side[0] >= '0' && f_side[0] <= '4' && !f_side[1] ? f_side[0] - '0' : 2;
    const char *f_gf = getenv("GLIM_CUDA_GATE_FOLD");
    /* default: tg128 172.2 vs 171.0 t/s, --no-graph 161.7 vs 160.4-161.8 (H200, 2026-12-05) */
    c->gate_fold = !(f_gf && strcmp(f_gf, "0") == 0);
    const char *f_ns = getenv("GLIM_CUDA_NORM_SCRATCH");
    /* default: tg128 141.42 / 141.28 vs 140.72 / 140.40 / 140.38 t/s, the logits identical (H100, 2026-12-05) */
    c->norm_scratch = !(f_ns && strcmp(f_ns, "0") == 0);
    const char *f_short = getenv("GLIM_CUDA_ATTN_SHORT"), *f_poll = getenv("GLIM_CUDA_SHORT_POLL");
    c->attn_short = !(f_short && strcmp(f_short, "0") == 0);
    c->short_poll = !(f_poll && strcmp(f_poll, "0") == 0);
    const char *f_trace = getenv("GLIM_CUDA_V5_TRACE");
    if (f_trace && strcmp(f_trace, "1") == 0 && !cuda_v5_trace_init(c)) {   /* diagnosis, gemv_mma.cu */
        int rc = ctx_status(c, err);
        be_destroy(be);
        return rc;
    }
    const char *f_ntr = getenv("GLIM_CUDA_NORM_TRACE"), *f_gt = getenv("GLIM_CUDA_GRAPH_TIME");
    const char *f_str = getenv("GLIM_CUDA_SHORT_TRACE");
    if ((f_ntr && strcmp(f_ntr, "1") == 0 && !cuda_norm_trace_init(c)) ||
        (f_str && strcmp(f_str, "1") == 0 && !cuda_short_trace_init(c)) ||
        (f_gt && strcmp(f_gt, "1") == 0 &&
         (CUDA_TRY(c, cudaEventCreate(&c->gt_ev[0])) || CUDA_TRY(c, cudaEventCreate(&c->gt_ev[1]))))) {
        int rc = ctx_status(c, err);
        be_destroy(be);
        return rc;
    }
    c->graph_time = f_gt && strcmp(f_gt, "1") == 0;
    const char *f_skip = getenv("GLIM_CUDA_DBG_SKIP");
    c->dbg_skip = f_skip ? (unsigned)strtoul(f_skip, NULL, 0) : 0;
    const char *f_gemv = getenv("GLIM_CUDA_GEMV");
    c->gemv_ver = f_gemv && (f_gemv[0] == '2' || f_gemv[0] == '5') && !f_gemv[1] ? f_gemv[0] - '0' : 3;
    /* persistent v3 with 4 CTAs per SM and every decode kernel as a programmatic dependent
     * launch measured fastest on the H200 (tg128 149.0 t/s vs 142.4, 2026-12-03,
     * docs/PERFORMANCE.md); not measured on sm_80, so there the plain v3 stays */
    const char *f_carve = getenv("GLIM_CUDA_CARVEOUT");
    /* 0 (the L1 cache as large as each launch allows): tg128 167.44 vs 165.21 / 165.77 t/s with the
     * driver's choice (-1), 157.1 at 100 (2026-12-03) */
    c->carveout = f_carve && *f_carve ? atoi(f_carve) : 0;
    c->carveout = c->carveout > 100 ? 100 : c->carveout;
    const char *f_persist = getenv("GLIM_CUDA_GEMV_PERSIST");
    c->gemv_persist = f_persist && f_persist[0] >= '0' && f_persist[0] <= '8' && !f_persist[1] ? f_persist[0] - '0'
                      : prop.major >= 9                                                        ? 4
                                                                                               : 0;
    const char *f_pdl = getenv("GLIM_CUDA_PDL");
    c->cc_major = prop.major;
    if (prop.major < 8)
        c->gemv_ver = c->gemv_ver == 5 ? 3 : c->gemv_ver;   /* v5's int8 mma needs sm_80 */
    c->pdl = prop.major >= 9 && !(f_pdl && strcmp(f_pdl, "0") == 0);
    c->pdl_all = c->pdl && !(f_pdl && strcmp(f_pdl, "1") == 0);
    const char *f_tc = getenv("GLIM_CUDA_ATTN_TC"), *f_dec_tc = getenv("GLIM_CUDA_ATTN_DEC_TC");
    c->attn_tc = !(f_tc && strcmp(f_tc, "0") == 0);
    c->attn_dec_tc = !(f_dec_tc && strcmp(f_dec_tc, "0") == 0);
    snprintf(be->desc, sizeof be->desc, "cuda:%d %s (sm_%d%d, %d SMs, %.0f GiB)", device, prop.name,
             prop.major, prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30));
    *out = be;
    return GLIM_OK;
}
