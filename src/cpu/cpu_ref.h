/*
 * cpu_ref.h — scalar reference implementations of every backend op
 * (the oracle for the fast CPU kernels and for CUDA). Single-threaded unless
 * a pool is given; plain loops over f32, exact dequantization through the
 * quant_traits table. Signatures mirror struct backend_i without the backend.
 */
#ifndef GLIM_CPU_REF_H
#define GLIM_CPU_REF_H

#include "../backend/backend.h"

void cpu_ref_get_rows(float *y, const struct be_weight *w, const int32_t *ids, int n);
void cpu_ref_matmul(float *y, const struct be_weight *w, const float *x, int n_rows);
/* rows [r0, r1) of the output only (for row-parallel callers) */
void cpu_ref_matmul_rows(float *y, const struct be_weight *w, const float *x, int n_rows,
                         int64_t r0, int64_t r1);
void cpu_ref_rmsnorm(float *y, const float *x, const struct be_weight *w, int64_t n_rows, int n,
                     float eps);
void cpu_ref_rope(float *x, int n_rows, int n_head, int head_dim, int n_rot, const int32_t *pos,
                  float base, bool neox);
void cpu_ref_add(float *y, const float *x, int64_t n);
void cpu_ref_mul_sigmoid(float *y, const float *g, int64_t n);
void cpu_ref_swiglu(float *y, const float *gate, const float *up, int64_t n);
void cpu_ref_scale_softcap(float *y, int64_t n, float scale, float cap);
/* backend.h argmax (both CPU backends' op): the sampler's greedy pick per row, then
 * pos_inc[0] += 1 when given */
void cpu_ref_argmax(struct backend *be, int32_t *out, const float *x, int n_rows, int64_t n, int32_t *pos_inc);
void cpu_ref_copy_rows(float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                       int n_rows, int n);
void cpu_ref_kv_store(void *k_cache, void *v_cache, uint32_t kv_type, int64_t n_slots,
                      const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim);
void cpu_ref_attention(const struct be_attn_args *a);
/* attention for query rows [t0, t1) and heads [h0, h1) only (for parallel callers) */
void cpu_ref_attention_part(const struct be_attn_args *a, int t0, int t1, int h0, int h1);

#endif
