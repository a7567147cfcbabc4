/*
 * quant.h — tensor element types (ggml's ids and block layouts) and the
 * per-type traits table: sizes, reference dequantize, reference dot with
 * f32 activations, and a simple reference quantizer.
 *
 * The *_ref kernels are the definition: clear scalar code that the SIMD and
 * CUDA kernels are tested against. Stateless; any thread.
 * Spec: ../shared/spec/model.md §4.1 (llama.cpp ggml-common.h layouts).
 */
#ifndef GLIM_QUANT_H
#define GLIM_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF tensor infos */
enum glim_type {
    GLIM_TYPE_F32 = 0,
    GLIM_TYPE_F16 = 1,
    GLIM_TYPE_Q4_0 = 2,
    GLIM_TYPE_Q4_1 = 3,
    GLIM_TYPE_Q5_0 = 6,
    GLIM_TYPE_Q5_1 = 7,
    GLIM_TYPE_Q8_0 = 8,
    GLIM_TYPE_Q8_1 = 9,
    GLIM_TYPE_Q2_K = 10,
    GLIM_TYPE_Q3_K = 11,
    GLIM_TYPE_Q4_K = 12,
    GLIM_TYPE_Q5_K = 13,
    GLIM_TYPE_Q6_K = 14,
    GLIM_TYPE_Q8_K = 15,
    GLIM_TYPE_IQ2_XXS = 16,
    GLIM_TYPE_IQ2_XS = 17,
    GLIM_TYPE_IQ3_XXS = 18,
    GLIM_TYPE_IQ1_S = 19,
    GLIM_TYPE_IQ4_NL = 20,
    GLIM_TYPE_IQ3_S = 21,
    GLIM_TYPE_IQ2_S = 22,
    GLIM_TYPE_IQ4_XS = 23,
    GLIM_TYPE_I8 = 24,
    GLIM_TYPE_I16 = 25,
    GLIM_TYPE_I32 = 26,
    GLIM_TYPE_I64 = 27,
    GLIM_TYPE_F64 = 28,
    GLIM_TYPE_IQ1_M = 29,
    GLIM_TYPE_BF16 = 30,
    GLIM_TYPE_TQ1_0 = 34,
    GLIM_TYPE_TQ2_0 = 35,
    GLIM_TYPE_MXFP4 = 39,
    GLIM_TYPE_COUNT = 40
};

#define QK_K 256
#define QK8_0 32
#define QK4_0 32

/* Block layouts, byte-identical to GGUF. fp16 fields are raw IEEE half bits. */
struct block_q8_0 { uint16_t d; int8_t qs[QK8_0]; };
struct block_q4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; };
struct block_q5_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct block_q6_k { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
/* activation format for integer dot kernels (CPU fast path): f32 scale, 256 int8, bsums per 16 */
struct block_q8_k { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };

_Static_assert(sizeof(struct block_q8_0) == 34, "Q8_0 block must match the GGUF layout");
_Static_assert(sizeof(struct block_q4_0) == 18, "Q4_0 block must match the GGUF layout");
_Static_assert(sizeof(struct block_q4_k) == 144, "Q4_K block must match the GGUF layout");
_Static_assert(sizeof(struct block_q5_k) == 176, "Q5_K block must match the GGUF layout");
_Static_assert(sizeof(struct block_q6_k) == 210, "Q6_K block must match the GGUF layout");
_Static_assert(sizeof(struct block_q8_k) == 292, "Q8_K block must match ggml's layout");

/* n = number of elements, always a multiple of block_elems */
typedef void  (*quant_to_f32_fn)(const void *src, float *dst, int64_t n);
typedef void  (*quant_from_f32_fn)(const float *src, void *dst, int64_t n);
typedef float (*quant_dot_f32_fn)(const void *w, const float *x, int64_t n);

struct quant_traits {
    const char *name;          /* "Q4_K" ... as llama.cpp prints it; NULL = unused id */
    int   block_elems;         /* elements per block (1 for plain types) */
    int   block_bytes;         /* bytes per block */
    bool  is_quantized;
    quant_to_f32_fn   to_f32;   /* reference dequantizer; NULL = glim cannot compute this type */
    quant_from_f32_fn from_f32; /* simple reference quantizer (round-trip tests); may be NULL */
    quant_dot_f32_fn  dot_f32;  /* reference dot of one row with f32 x; NULL iff to_f32 is NULL */
};

/* NULL for ids outside 0..GLIM_TYPE_COUNT-1 or ids ggml never assigned (4, 5, 31..33, 36..38) */
const struct quant_traits *quant_traits(uint32_t type);
const char *quant_type_name(uint32_t type);              /* "?" when unknown */
int   quant_type_from_name(const char *name);            /* -1 when unknown; case-insensitive */
bool  quant_type_computable(uint32_t type);              /* to_f32 != NULL */
/* bytes of a row of n elements; 0 if n is not a multiple of the block size */
size_t quant_row_bytes(uint32_t type, int64_t n);

/* quant_soa.c: the structure-of-arrays copy of k x n weights of type Q8_0 / Q4_0 (qs[nb][32|16],
 * then d[nb] fp16) or Q6_K (ql[nb][128], qh[nb][64], scales[nb][16], d[nb] fp16), nb = blocks;
 * other types: nothing is written. dst holds quant_row_bytes(type, k) * n bytes. */
void quant_soa_repack(uint32_t type, const void *src, void *dst, int64_t k, int64_t n);
/* quant_soa.c: the 16-row tile copy ("T16") of k x n Q4_K or Q6_K weights (k % 256 == 0), the
 * CUDA backend's CUDA_DT_Q4_K_T16 / _Q6_K_T16. Why: the GPU's tensor-core GEMV gives a warp 16
 * rows, and in the GGUF rows each of its loads touches 8 rows' blocks (16 partial sectors); here
 * every warp-wide load is 512 contiguous bytes. Lossless; rows are padded to a multiple of 16
 * with zero bytes. The layout: quant_soa.c and src/cuda/gemv_mma_lane.h (the *_fetch_t16).
 * quant_t16_bytes: the size of dst (ceil(n / 16) * 16 rows), 0 for other types or k % 256. */
size_t quant_t16_bytes(uint32_t type, int64_t k, int64_t n);
void   quant_t16_repack(uint32_t type, const void *src, void *dst, int64_t k, int64_t n);
/* the same on `threads` threads (0: by size, up to 8) */
void   quant_t16_repack_mt(uint32_t type, const void *src, void *dst, int64_t k, int64_t n, int threads);

/* fp16 / bf16 scalar conversions (round to nearest even) */
float    fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float    bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

#endif
