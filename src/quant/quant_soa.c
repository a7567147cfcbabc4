/*
 * quant_soa.c — lossless structure-of-arrays copies of the GGUF blocks whose size is not a
 * multiple of 16 bytes (Q8_0, Q4_0, Q6_K), for GPU kernels that want every 16-byte load
 * aligned (the CUDA backend's CUDA_DT_*_SOA device types). Host code, shared by the backend's
 * upload and the CPU tests of its kernels' lane code.
 */
#include <string.h>

#include "quant.h"

void quant_soa_repack(uint32_t type, const void *src, void *dst, int64_t k, int64_t n)
{
    uint8_t *o = (uint8_t *)dst;
    if (type == GLIM_TYPE_Q8_0 || type == GLIM_TYPE_Q4_0) {
        bool q8 = type == GLIM_TYPE_Q8_0;
        int qbytes = q8 ? 32 : 16, bbytes = q8 ? 34 : 18;
        int64_t nb = k / 32 * n;
        const uint8_t *s = (const uint8_t *)src;
        for (int64_t i = 0; i < nb; i++) {
            memcpy(o + i * qbytes, s + i * bbytes + 2, (size_t)qbytes);
            memcpy(o + nb * qbytes + i * 2, s + i * bbytes, 2);
        }
    } else if (type == GLIM_TYPE_Q6_K) {
        int64_t nb = k / 256 * n;
        const struct block_q6_k *b = (const struct block_q6_k *)src;
        for (int64_t i = 0; i < nb; i++) {
            memcpy(o + i * 128, b[i].ql, 128);
            memcpy(o + nb * 128 + i * 64, b[i].qh, 64);
            memcpy(o + nb * 192 + i * 16, b[i].scales, 16);
            memcpy(o + nb * 208 + i * 2, &b[i].d, 2);
        }
    }
}
