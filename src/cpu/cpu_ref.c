/*
 * cpu_ref.c — the reference ops: plain scalar loops, reductions in double,
 * weights dequantized exactly through quant_traits. This file defines what
 * every backend op means; the fast CPU kernels and the CUDA kernels are
 * tested against it. Slow on purpose: clarity first.
 */
#include "cpu_ref.h"

#include <math.h>
#include <string.h>

#include "../quant/quant.h"
#include "../runtime/sampler.h"

static const uint8_t *weight_row(const struct be_weight *w, int64_t row)
{
    return (const uint8_t *)w->host + (size_t)row * quant_row_bytes(w->type, w->k);
}

void cpu_ref_get_rows(float *y, const struct be_weight *w, const int32_t *ids, int n)
{
    const struct quant_traits *qt = quant_traits(w->type);
    for (int i = 0; i < n; i++)
        qt->to_f32(weight_row(w, ids[i]), y + (size_t)i * w->k, w->k);
}

void cpu_ref_matmul_rows(float *y, const struct be_weight *w, const float *x, int n_rows,
                         int64_t r0, int64_t r1)
{
    const struct quant_traits *qt = quant_traits(w->type);
    for (int64_t j = r0; j < r1; j++) {          /* output feature j = weight row j */
        const uint8_t *wr = weight_row(w, j);
        for (int r = 0; r < n_rows; r++)
            y[(size_t)r * w->n + j] = qt->dot_f32(wr, x + (size_t)r * w->k, w->k);
    }
}

void cpu_ref_matmul(float *y, const struct be_weight *w, const float *x, int n_rows)
{
    cpu_ref_matmul_rows(y, w, x, n_rows, 0, w->n);
}

void cpu_ref_rmsnorm(float *y, const float *x, const struct be_weight *w, int64_t n_rows, int n,
                     float eps)
{
    const float *g = w ? (const float *)w->host : NULL;   /* norm weights are F32 */
    for (int64_t r = 0; r < n_rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / n + eps));
        for (int i = 0; i < n; i++)
            yr[i] = xr[i] * inv * (g ? g[i] : 1.0f);
    }
}

/* NORM pairs (2i, 2i+1); NEOX pairs (i, i + n_rot/2). Angle pos * base^(-2i/n_rot). */
void cpu_ref_rope(float *x, int n_rows, int n_head, int head_dim, int n_rot, const int32_t *pos,
                  float base, bool neox)
{
    int half = n_rot / 2;
    for (int r = 0; r < n_rows; r++) {
        for (int h = 0; h < n_head; h++) {
            float *v = x + ((size_t)r * n_head + h) * head_dim;
            for (int i = 0; i < half; i++) {
                double theta = (double)pos[r] * pow((double)base, -2.0 * i / n_rot);
                float c = (float)cos(theta), s = (float)sin(theta);
                int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
                float a = v[i0], b = v[i1];
                v[i0] = a * c - b * s;
                v[i1] = a * s + b * c;
            }
        }
    }
}

void cpu_ref_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

void cpu_ref_mul_sigmoid(float *y, const float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] *= 1.0f / (1.0f + expf(-g[i]));
}

void cpu_ref_swiglu(float *y, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void cpu_ref_scale_softcap(float *y, int64_t n, float scale, float cap)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = cap > 0 ? cap * tanhf(y[i] * scale / cap) : y[i] * scale;
}

void cpu_ref_argmax(struct backend *be, int32_t *out, const float *x, int n_rows, int64_t n, int32_t *pos_inc)
{
    (void)be;
    for (int r = 0; r < n_rows; r++)   /* one greedy order for every backend: the sampler's */
        out[r] = sampler_argmax(x + (size_t)r * (size_t)n, (int32_t)n);
    if (pos_inc)
        pos_inc[0] += 1;
}

void cpu_ref_copy_rows(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                       int n_rows, int n)
{
    for (int r = 0; r < n_rows; r++)
        memmove(dst + r * dst_stride, src + r * src_stride, (size_t)n * sizeof(float));
}

/* ---- KV cache element access ---------------------------------------- */

static void kv_put(void *cache, uint32_t type, size_t idx, float v)
{
    if (type == GLIM_TYPE_F16)
        ((uint16_t *)cache)[idx] = f32_to_fp16(v);
    else if (type == GLIM_TYPE_BF16)
        ((uint16_t *)cache)[idx] = f32_to_bf16(v);
    else
        ((float *)cache)[idx] = v;
}

static float kv_get(const void *cache, uint32_t type, size_t idx)
{
    if (type == GLIM_TYPE_F16)
        return fp16_to_f32(((const uint16_t *)cache)[idx]);
    if (type == GLIM_TYPE_BF16)
        return bf16_to_f32(((const uint16_t *)cache)[idx]);
    return ((const float *)cache)[idx];
}

void cpu_ref_kv_store(void *k_cache, void *v_cache, uint32_t kv_type, int64_t n_slots,
                      const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim)
{
    for (int t = 0; t < n_tokens; t++) {
        size_t base = (size_t)(pos[t] % n_slots) * kv_dim;
        for (int i = 0; i < kv_dim; i++) {
            kv_put(k_cache, kv_type, base + i, k[(size_t)t * kv_dim + i]);
            kv_put(v_cache, kv_type, base + i, v[(size_t)t * kv_dim + i]);
        }
    }
}

/* Visible key positions of the query at row t: [lo, hi]. */
static void attn_range(const struct be_attn_args *a, int t, int64_t *lo, int64_t *hi)
{
    int64_t p = a->pos[t];
    if (a->block > 0 && t >= a->n_tokens - a->block) {   /* bidirectional DFlash block */
        int64_t b0 = a->pos[a->n_tokens - a->block];
        *hi = a->pos[a->n_tokens - 1];
        *lo = a->window > 0 ? GLIM_MAX(0, b0 - a->window) : 0;
        return;
    }
    *hi = p;
    *lo = a->window > 0 ? GLIM_MAX(0, p - a->window + 1) : 0;
}

void cpu_ref_attention_part(const struct be_attn_args *a, int t0, int t1, int h0, int h1)
{
    int D = a->head_dim, kv_dim = a->n_head_kv * D, group = a->n_head / a->n_head_kv;
    for (int t = t0; t < t1; t++) {
        int64_t lo, hi;
        attn_range(a, t, &lo, &hi);
        for (int h = h0; h < h1; h++) {
            const float *q = a->q + ((size_t)t * a->n_head + h) * D;
            float *out = a->out + ((size_t)t * a->n_head + h) * D;
            int kvh = h / group;
            double mx = -INFINITY, sum = 0, acc[1024];
            GLIM_ASSERT(D <= 1024);
            for (int i = 0; i < D; i++)
                acc[i] = 0;
            /* two passes: max, then exp-weighted sum (plain softmax) */
            for (int64_t u = lo; u <= hi; u++) {
                size_t base = (size_t)(u % a->n_slots) * kv_dim + (size_t)kvh * D;
                double s = 0;
                for (int i = 0; i < D; i++)
                    s += (double)q[i] * kv_get(a->k_cache, a->kv_type, base + i);
                s *= a->scale;
                if (s > mx)
                    mx = s;
            }
            for (int64_t u = lo; u <= hi; u++) {
                size_t base = (size_t)(u % a->n_slots) * kv_dim + (size_t)kvh * D;
                double s = 0;
                for (int i = 0; i < D; i++)
                    s += (double)q[i] * kv_get(a->k_cache, a->kv_type, base + i);
                double p = exp(s * a->scale - mx);
                sum += p;
                for (int i = 0; i < D; i++)
                    acc[i] += p * kv_get(a->v_cache, a->kv_type, base + i);
            }
            for (int i = 0; i < D; i++)
                out[i] = sum > 0 ? (float)(acc[i] / sum) : 0.0f;
        }
    }
}

void cpu_ref_attention(const struct be_attn_args *a)
{
    cpu_ref_attention_part(a, 0, a->n_tokens, 0, a->n_head);
}
