/*
 * quant_ref.h — private to src/quant: the scalar reference kernels that the
 * traits table points at, and the K-quant scale packing shared with the
 * search quantizers in quantize.c. Stateless; any thread.
 */
#ifndef GLIM_QUANT_REF_H
#define GLIM_QUANT_REF_H

#include "quant.h"

/* Q4_K/Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes */
void quant_k4_scale_min_get(const uint8_t s[12], int j, uint8_t *sc, uint8_t *m);
/* pack eight 6-bit scales and mins (each 0..63) into 12 bytes (the inverse) */
void quant_k4_scales_pack(uint8_t s[12], const uint8_t sc[8], const uint8_t m[8]);
/* Q4_K/Q5_K/Q6_K code placement: q[256] codes -> block fields and back */
/* Q4_K (nmax 15) or Q5_K (nmax 31): block i of dst from d, dmin, sub-block scales and mins
 * (each 0..63) and codes q (0..nmax) */
void quant_k45_pack(void *dst, int64_t i, int nmax, uint16_t d, uint16_t dmin, const uint8_t sc[8],
                    const uint8_t m[8], const uint8_t q[QK_K]);
void quant_q6k_codes_pack(struct block_q6_k *b, const int8_t q[QK_K]);     /* q in -32..31 */

void quant_f32_to_f32(const void *src, float *dst, int64_t n);
void quant_f16_to_f32(const void *src, float *dst, int64_t n);
void quant_bf16_to_f32(const void *src, float *dst, int64_t n);
void quant_q8_0_to_f32(const void *src, float *dst, int64_t n);
void quant_q4_0_to_f32(const void *src, float *dst, int64_t n);
void quant_q4_k_to_f32(const void *src, float *dst, int64_t n);
void quant_q5_k_to_f32(const void *src, float *dst, int64_t n);
void quant_q6_k_to_f32(const void *src, float *dst, int64_t n);
void quant_q8_k_to_f32(const void *src, float *dst, int64_t n);

void quant_f32_from_f32(const float *src, void *dst, int64_t n);
void quant_f16_from_f32(const float *src, void *dst, int64_t n);
void quant_bf16_from_f32(const float *src, void *dst, int64_t n);
void quant_q8_0_from_f32(const float *src, void *dst, int64_t n);
void quant_q4_0_from_f32(const float *src, void *dst, int64_t n);
void quant_q4_k_from_f32(const float *src, void *dst, int64_t n);
void quant_q5_k_from_f32(const float *src, void *dst, int64_t n);
void quant_q6_k_from_f32(const float *src, void *dst, int64_t n);
void quant_q8_k_from_f32(const float *src, void *dst, int64_t n);

float quant_f32_dot(const void *w, const float *x, int64_t n);
float quant_f16_dot(const void *w, const float *x, int64_t n);
float quant_bf16_dot(const void *w, const float *x, int64_t n);
float quant_q8_0_dot(const void *w, const float *x, int64_t n);
float quant_q4_0_dot(const void *w, const float *x, int64_t n);
float quant_q4_k_dot(const void *w, const float *x, int64_t n);
float quant_q5_k_dot(const void *w, const float *x, int64_t n);
float quant_q6_k_dot(const void *w, const float *x, int64_t n);
float quant_q8_k_dot(const void *w, const float *x, int64_t n);

#endif
