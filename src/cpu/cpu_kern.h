/*
 * cpu_kern.h — the fast CPU kernels, one table per ISA level, and the
 * drivers (matmul, attention) that the CPU backend runs on its pool.
 *
 * Quantized weights are multiplied with activations quantized on the fly to
 * int8: Q8_K (256 per block, f32 scale, sums per 16) for Q4_K/Q5_K/Q6_K, and
 * cpu_q8_32 (32 per block, f32 scale, sum) for Q8_0/Q4_0. Integer partial sums
 * are exact, so every ISA's kernel equals the scalar one (dot_scalar.c) up to
 * f32 rounding of the final scaling; the only approximation is the
 * activation rounding, |x - d*q| <= d/2 with d = amax(block)/127.
 * F32/F16/BF16 weights use f32 activations and FMA.
 *
 * Tables are built once and never change; any thread may read them.
 */
#ifndef GLIM_CPU_KERN_H
#define GLIM_CPU_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../quant/quant.h"
#include "cpu_features.h"
#include "pool.h"

#define CPU_NX 4   /* activation rows per dot-kernel call: one weight decode serves them all */

/* int8 activation block for 32-element weight blocks (Q8_0, Q4_0) */
struct cpu_q8_32 {
    float   d;       /* scale: x ~= d * qs[i] */
    int32_t sum;     /* sum of qs (for Q4_0's -8 offset) */
    int8_t  qs[32];
};

enum cpu_act {
    CPU_ACT_NONE = 0,   /* type not accelerated: use cpu_ref */
    CPU_ACT_F32,        /* activations stay f32 */
    CPU_ACT_Q8_K,       /* struct block_q8_k per 256 */
    CPU_ACT_Q8_32,      /* struct cpu_q8_32 per 32 */
};

/* y[a * y_stride] = <weight row w, activation row a> for a = 0..nx-1, 1 <= nx <= CPU_NX.
 * x: activation row 0 in the type's cpu_act format; row a at x + a * x_stride bytes.
 * k: elements per row (a multiple of the weight block size). */
typedef void (*cpu_dot_fn)(const void *w, const void *x, size_t x_stride, int nx, int64_t k,
                           float *y, size_t y_stride);

struct cpu_kern {
    int         level;                    /* enum cpu_level */
    const char *name;
    cpu_dot_fn  dot[GLIM_TYPE_COUNT];     /* NULL = not accelerated */
    uint8_t     act[GLIM_TYPE_COUNT];     /* enum cpu_act per weight type */
    void  (*quant_q8_k)(const float *x, struct block_q8_k *y, int64_t k);   /* k % 256 == 0 */
    void  (*quant_q8_32)(const float *x, struct cpu_q8_32 *y, int64_t k);  /* k % 32 == 0 */
    /* attention helpers, any n */
    float (*dot_f32)(const float *a, const float *b, int n);
    void  (*axpy_f32)(float *y, float a, const float *x, int n);            /* y += a * x */
    void  (*row_to_f32)(uint32_t type, const void *src, float *dst, int n); /* F32/F16/BF16 */
};

/* The table for a level, or NULL when this CPU cannot run it. */
const struct cpu_kern *cpu_kern_get(int level);
/* The table for cpu_features_get()->level (never NULL). */
const struct cpu_kern *cpu_kern_best(void);

/* Fill a table (called once per level by cpu_kern_get). The ISA fillers only
 * override the entries they accelerate, starting from the lower level's table. */
void cpu_kern_fill_scalar(struct cpu_kern *k);
void cpu_kern_fill_avx2(struct cpu_kern *k);
void cpu_kern_fill_avx512(struct cpu_kern *k);

/* Scalar activation quantizers (quant_act.c): d = amax/127, q = round(x/d). */
void cpu_quant_q8_k_ref(const float *x, struct block_q8_k *y, int64_t k);
void cpu_quant_q8_32_ref(const float *x, struct cpu_q8_32 *y, int64_t k);

/* Bytes of one activation row of k elements in the format act (0 if k does not fit it). */
size_t cpu_act_row_bytes(int act, int64_t k);

/* ---- drivers ----------------------------------------------------------- */

/* Scratch memory owned by the backend, grown (never shrunk) by the driving thread. */
struct cpu_scratch {
    void  *data;     /* owned, 64-byte aligned */
    size_t n_bytes;
    /* The int8 activations in data are reused by the next matmul on the same input
     * (q/k/v/gate all read one normalized row): valid until any other op runs or a
     * matmul writes over the input. */
    const float *act_x;
    int64_t      act_k;
    int          act_rows, act_type;
    bool         act_valid;
};
/* Any op that writes memory (everything but matmul) forgets the cached activations. */
static inline void cpu_scratch_touch(struct cpu_scratch *s) { s->act_valid = false; }
int  cpu_scratch_reserve(struct cpu_scratch *s, size_t n_bytes);   /* GLIM_OK / GLIM_ENOMEM */
void cpu_scratch_clear(struct cpu_scratch *s);

/* y[n_rows][w->n] = x[n_rows][w->k] . W^T on the pool. Types without a kernel
 * (or when scratch cannot grow) run cpu_ref_matmul_rows split over threads. */
void cpu_matmul(struct pool *pool, const struct cpu_kern *kern, struct cpu_scratch *scratch,
                float *y, const struct be_weight *w, const float *x, int n_rows);

/* The same for up to CPU_MATMUL_N_MAX weights sharing one input (backend_i.matmul_n). */
#define CPU_MATMUL_N_MAX 4
void cpu_matmul_n(struct pool *pool, const struct cpu_kern *kern, struct cpu_scratch *scratch, int n,
                  float *const *ys, const struct be_weight *const *ws, const float *x, int n_rows);

/* Attention (same contract as backend_i.attention) split over query rows x
 * KV heads; each task reads a K/V row once for all query heads of its group. */
void cpu_attention(struct pool *pool, const struct cpu_kern *kern, struct cpu_scratch *scratch,
                   const struct be_attn_args *a);

/* ---- small ops (ops_fast.c): same results as cpu_ref, bit for bit ----------- */

enum cpu_ew_op { CPU_EW_ADD, CPU_EW_MUL_SIGMOID, CPU_EW_SWIGLU, CPU_EW_SOFTCAP };

/* y op= ... over n elements, split over the pool when n is large */
void cpu_elementwise(struct pool *pool, int op, float *y, const float *a, const float *b, int64_t n,
                     float scale, float cap);
/* RoPE with cos/sin computed once per row (shared by all heads); rows split over the pool */
void cpu_rope(struct pool *pool, float *x, int n_rows, int n_head, int head_dim, int n_rot,
              const int32_t *pos, float base, bool neox);
/* RMSNorm rows split over the pool */
void cpu_rmsnorm(struct pool *pool, float *y, const float *x, const struct be_weight *w,
                 int64_t n_rows, int n, float eps);

#endif
