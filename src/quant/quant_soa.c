/*
 * quant_soa.c — lossless structure-of-arrays copies of the GGUF blocks whose size is not a
 * multiple of 16 bytes (Q8_0, Q4_0, Q6_K), for GPU kernels that want every 16-byte load
 * aligned (the CUDA backend's CUDA_DT_*_SOA device types). Host code, shared by the backend's
 * upload and the CPU tests of its kernels' lane code.
 * Also the tile ("T16") copies of Q4_K / Q6_K: 16 rows' code bytes interleaved so that a warp
 * of the tensor-core GEMV loads 512 contiguous bytes at a time (quant_t16_repack).
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

/* T16 (CUDA_DT_Q4_K_T16 / CUDA_DT_Q6_K_T16): rows in tiles of 16 (padded with zero rows), per
 * (tile, super-block) one record. Code bytes are dealt in runs of 32 per row: lane l = 4g + t
 * of a warp owns 16 bytes at 16l of a run = bytes 8t..8t+7 of the run in row g, then in row
 * g + 8. Q4_K: qs runs 0..3 at 512c, the 16-byte block headers at 2048 + 16r (2304 bytes);
 * Q6_K: ql runs 0..3 at 512u, qh runs 0..1 at 2048 + 512h, the 16 scales of row r at
 * 3072 + 16r permuted to {2t, 2t+1, 8+2t, 9+2t} per 4 bytes, d at 3328 + 2r (3360 bytes). */
static int t16_record(uint32_t type)
{
    return type == GLIM_TYPE_Q4_K ? 2304 : type == GLIM_TYPE_Q6_K ? 3360 : 0;
}

size_t quant_t16_bytes(uint32_t type, int64_t k, int64_t n)
{
    if (!t16_record(type) || k <= 0 || k % 256 || n <= 0)
        return 0;
    return (size_t)((n + 15) / 16) * (size_t)(k / 256) * (size_t)t16_record(type);
}

/* run bytes [32i, 32i + 32) of row r (0..15) of a tile record: where byte o of them goes */
static size_t t16_run_pos(int r, int o)
{
    return (size_t)(512 * (o >> 5) + 64 * (r & 7) + 16 * ((o >> 3) & 3) + 8 * (r >> 3) + (o & 7));
}

void quant_t16_repack(uint32_t type, const void *src, void *dst, int64_t k, int64_t n)
{
    size_t bytes = quant_t16_bytes(type, k, n), rec = (size_t)t16_record(type);
    if (!bytes)
        return;
    memset(dst, 0, bytes);   /* the padded rows */
    int64_t n_sb = k / 256;
    size_t row_bytes = quant_row_bytes(type, k);
    for (int64_t row = 0; row < n; row++) {
        int r = (int)(row & 15);
        for (int64_t b = 0; b < n_sb; b++) {
            uint8_t *o = (uint8_t *)dst + (size_t)((row >> 4) * n_sb + b) * rec;
            const uint8_t *blk = (const uint8_t *)src + (size_t)row * row_bytes;
            if (type == GLIM_TYPE_Q4_K) {
                const struct block_q4_k *q = (const struct block_q4_k *)blk + b;
                for (int i = 0; i < 128; i += 8)
                    memcpy(o + t16_run_pos(r, i), q->qs + i, 8);
                memcpy(o + 2048 + 16 * r, q, 16);   /* d, dmin, scales[12] */
            } else {
                const struct block_q6_k *q = (const struct block_q6_k *)blk + b;
                for (int i = 0; i < 128; i += 8)
                    memcpy(o + t16_run_pos(r, i), q->ql + i, 8);
                for (int i = 0; i < 64; i += 8)
                    memcpy(o + t16_run_pos(r, 128 + i), q->qh + i, 8);   /* runs 4, 5: 2048 + 512h */
                for (int t = 0; t < 4; t++) {
                    uint8_t *s = o + 3072 + 16 * r + 4 * t;
                    s[0] = (uint8_t)q->scales[2 * t], s[1] = (uint8_t)q->scales[2 * t + 1];
                    s[2] = (uint8_t)q->scales[8 + 2 * t], s[3] = (uint8_t)q->scales[9 + 2 * t];
                }
                memcpy(o + 3328 + 2 * r, &q->d, 2);
            }
        }
    }
}
