/*
 * quant_traits.c — what glim knows about each ggml type id, in one table.
 *
 * Every id ggml ever assigned is listed with its block size, so the GGUF
 * reader can size any tensor, even one glim cannot compute (to_f32 NULL).
 * Ids 4, 5 (Q4_2, Q4_3), 31..33 (Q4_0_4_4 & co) and 36..38 (IQ4_NL_4_4 & co)
 * were removed from ggml and stay empty. Read-only data; any thread.
 */
#include "quant_ref.h"

#include <ctype.h>

#define PLAIN(nm, bytes) { .name = nm, .block_elems = 1, .block_bytes = bytes, .is_quantized = false }
#define BLOCK(nm, elems, bytes) { .name = nm, .block_elems = elems, .block_bytes = bytes, .is_quantized = true }

static const struct quant_traits QUANT[GLIM_TYPE_COUNT] = {
    [GLIM_TYPE_F32] = { .name = "F32", .block_elems = 1, .block_bytes = 4, .is_quantized = false,
                        .to_f32 = quant_f32_to_f32, .from_f32 = quant_f32_from_f32,
                        .dot_f32 = quant_f32_dot },
    [GLIM_TYPE_F16] = { .name = "F16", .block_elems = 1, .block_bytes = 2, .is_quantized = false,
                        .to_f32 = quant_f16_to_f32, .from_f32 = quant_f16_from_f32,
                        .dot_f32 = quant_f16_dot },
    [GLIM_TYPE_Q4_0] = { .name = "Q4_0", .block_elems = 32, .block_bytes = 18, .is_quantized = true,
                         .to_f32 = quant_q4_0_to_f32, .from_f32 = quant_q4_0_from_f32,
                         .dot_f32 = quant_q4_0_dot },
    [GLIM_TYPE_Q4_1] = BLOCK("Q4_1", 32, 20),
    [GLIM_TYPE_Q5_0] = BLOCK("Q5_0", 32, 22),
    [GLIM_TYPE_Q5_1] = BLOCK("Q5_1", 32, 24),
    [GLIM_TYPE_Q8_0] = { .name = "Q8_0", .block_elems = 32, .block_bytes = 34, .is_quantized = true,
                         .to_f32 = quant_q8_0_to_f32, .from_f32 = quant_q8_0_from_f32,
                         .dot_f32 = quant_q8_0_dot },
    [GLIM_TYPE_Q8_1] = BLOCK("Q8_1", 32, 36),
    [GLIM_TYPE_Q2_K] = BLOCK("Q2_K", 256, 84),
    [GLIM_TYPE_Q3_K] = BLOCK("Q3_K", 256, 110),
    [GLIM_TYPE_Q4_K] = { .name = "Q4_K", .block_elems = 256, .block_bytes = 144, .is_quantized = true,
                         .to_f32 = quant_q4_k_to_f32, .from_f32 = quant_q4_k_from_f32,
                         .dot_f32 = quant_q4_k_dot },
    [GLIM_TYPE_Q5_K] = { .name = "Q5_K", .block_elems = 256, .block_bytes = 176, .is_quantized = true,
                         .to_f32 = quant_q5_k_to_f32, .from_f32 = quant_q5_k_from_f32,
                         .dot_f32 = quant_q5_k_dot },
    [GLIM_TYPE_Q6_K] = { .name = "Q6_K", .block_elems = 256, .block_bytes = 210, .is_quantized = true,
                         .to_f32 = quant_q6_k_to_f32, .from_f32 = quant_q6_k_from_f32,
                         .dot_f32 = quant_q6_k_dot },
    [GLIM_TYPE_Q8_K] = { .name = "Q8_K", .block_elems = 256, .block_bytes = 292, .is_quantized = true,
                         .to_f32 = quant_q8_k_to_f32, .from_f32 = quant_q8_k_from_f32,
                         .dot_f32 = quant_q8_k_dot },
    [GLIM_TYPE_IQ2_XXS] = BLOCK("IQ2_XXS", 256, 66),
    [GLIM_TYPE_IQ2_XS] = BLOCK("IQ2_XS", 256, 74),
    [GLIM_TYPE_IQ3_XXS] = BLOCK("IQ3_XXS", 256, 98),
    [GLIM_TYPE_IQ1_S] = BLOCK("IQ1_S", 256, 50),
    [GLIM_TYPE_IQ4_NL] = BLOCK("IQ4_NL", 32, 18),
    [GLIM_TYPE_IQ3_S] = BLOCK("IQ3_S", 256, 110),
    [GLIM_TYPE_IQ2_S] = BLOCK("IQ2_S", 256, 82),
    [GLIM_TYPE_IQ4_XS] = BLOCK("IQ4_XS", 256, 136),
    [GLIM_TYPE_I8] = PLAIN("I8", 1),
    [GLIM_TYPE_I16] = PLAIN("I16", 2),
    [GLIM_TYPE_I32] = PLAIN("I32", 4),
    [GLIM_TYPE_I64] = PLAIN("I64", 8),
    [GLIM_TYPE_F64] = PLAIN("F64", 8),
    [GLIM_TYPE_IQ1_M] = BLOCK("IQ1_M", 256, 56),
    [GLIM_TYPE_BF16] = { .name = "BF16", .block_elems = 1, .block_bytes = 2, .is_quantized = false,
                         .to_f32 = quant_bf16_to_f32, .from_f32 = quant_bf16_from_f32,
                         .dot_f32 = quant_bf16_dot },
    [GLIM_TYPE_TQ1_0] = BLOCK("TQ1_0", 256, 54),
    [GLIM_TYPE_TQ2_0] = BLOCK("TQ2_0", 256, 66),
    [GLIM_TYPE_MXFP4] = BLOCK("MXFP4", 32, 17),
};

const struct quant_traits *quant_traits(uint32_t type)
{
    if (type >= GLIM_TYPE_COUNT || !QUANT[type].name)
        return NULL;
    return &QUANT[type];
}

const char *quant_type_name(uint32_t type)
{
    const struct quant_traits *t = quant_traits(type);
    return t ? t->name : "?";
}

static bool name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return *a == *b;
}

int quant_type_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < GLIM_TYPE_COUNT; i++)
        if (QUANT[i].name && name_eq(QUANT[i].name, name))
            return i;
    return -1;
}

bool quant_type_computable(uint32_t type)
{
    const struct quant_traits *t = quant_traits(type);
    return t && t->to_f32;
}

size_t quant_row_bytes(uint32_t type, int64_t n)
{
    const struct quant_traits *t = quant_traits(type);
    if (!t || n < 0 || n % t->block_elems)
        return 0;
    return (size_t)(n / t->block_elems) * (size_t)t->block_bytes;
}
