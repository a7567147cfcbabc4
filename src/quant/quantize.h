/*
 * quantize.h — searched quantizers and the llama.cpp type mixes behind
 * `glim quantize`.
 *
 * The *_search row quantizers choose K-quant scales and mins by search
 * (candidate scale sweeps, each refit by weighted least squares) instead of
 * the plain min/max of the reference quantizers in quant.h, giving
 * llama.cpp-quality files. Stateless and reentrant: any thread.
 */
#ifndef GLIM_QUANTIZE_H
#define GLIM_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/err.h"
#include "quant.h"

/* n = number of elements, a multiple of QK_K */
void quantize_row_q4_k_search(const float *x, void *dst, int64_t n);
void quantize_row_q5_k_search(const float *x, void *dst, int64_t n);
void quantize_row_q6_k_search(const float *x, void *dst, int64_t n);

/* The row quantizer `glim quantize` uses for type: search for Q4_K/Q5_K/Q6_K,
 * the reference one otherwise (Q8_0, Q4_0, F16, BF16, F32); NULL if none. */
quant_from_f32_fn quantize_row_fn(uint32_t type);

/* Error of a quantized tensor against its source, summed over elements. */
struct quantize_stats {
    double  sum_sq_err;   /* sum (src - dequant(dst))^2 */
    double  sum_sq_src;   /* sum src^2 */
    int64_t n;            /* elements */
};

/* Quantize n_rows rows of n_per_row elements from src (F32, F16 or BF16)
 * into dst (quant_row_bytes(dst_type, n_per_row) per row), split by rows over
 * n_threads threads (<= 1: the calling thread only). st (may be NULL) gets the
 * error of the result. GLIM_EINVAL on a type/row-size mismatch, GLIM_ENOMEM. */
int quantize_tensor(uint32_t dst_type, void *dst, uint32_t src_type, const void *src,
                    int64_t n_rows, int64_t n_per_row, int n_threads,
                    struct quantize_stats *st, struct glim_err *err);

/* ---- type mixes (llama.cpp's llama_ftype names and per-tensor rules) ---- */

struct quantize_mix {
    const char *name;      /* "Q4_K_M" as llama-quantize spells it */
    uint32_t    ftype;     /* value written to general.file_type (llama_ftype) */
    uint32_t    base;      /* enum glim_type of most weight matrices */
    bool        is_m;      /* _M: attn_v/ffn_down of some layers get Q6_K */
};

/* NULL if unknown; case-insensitive; "Q4_K"/"Q5_K" are the _M mixes, as in llama.cpp */
const struct quantize_mix *quantize_mix_find(const char *name);
/* the mix names, comma-separated, for --help */
const char *quantize_mix_names(void);

/* llama.cpp's use_more_bits: layers 0..n/8-1, the last n/8 and every third between */
bool quantize_use_more_bits(int i, int n);

/* Walks the tensors of one file in order and picks each one's type. */
struct quantize_plan {
    const struct quantize_mix *mix;
    bool is_pure;           /* --pure: every weight matrix gets mix->base */
    bool has_output;        /* file has output.weight (else token_embd plays its part) */
    int  n_attn_v, n_ffn_down;     /* totals in the file */
    int  i_attn_v, i_ffn_down;     /* seen so far (advanced by quantize_plan_type) */
};

/* Fill the totals from the tensor names (call before quantize_plan_type). */
void quantize_plan_init(struct quantize_plan *p, const struct quantize_mix *mix, bool is_pure,
                        const char *const *names, int64_t n_tensors);
/* Type for the next tensor, in file order. Tensors that are not weight
 * matrices (1-D, norms, non-"weight" names) keep src_type. A row length
 * ne[0] that does not divide into the chosen type's blocks falls back to
 * Q8_0, then F16. */
uint32_t quantize_plan_type(struct quantize_plan *p, const char *name, int n_dims, const int64_t *ne,
                            uint32_t src_type);

#endif
