/*
 * quant_soa.c — lossless structure-of-arrays copies of the GGUF blocks whose size is not a
 * multiple of 16 bytes (Q8_0, Q4_0, Q6_K), for GPU kernels that want every 16-byte load
 * aligned (the CUDA backend's CUDA_DT_*_SOA device types). Host code, shared by the backend's
 * upload and the CPU tests of its kernels' lane code.
 * Also the tile ("T16") copies of Q4_K / Q6_K: 16 rows' code bytes interleaved so that a warp
 * of the tensor-core GEMV loads 512 contiguous bytes at a time (quant_t16_repack).
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

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

/* tiles [t0, t1) of the repack: their records are zeroed (the padded rows) and filled */
struct t16_job {
    uint32_t       type;
    const uint8_t *src;
    uint8_t       *dst;
    int64_t        k, n, t0, t1;
};

static void t16_tiles(const struct t16_job *j)
{
    size_t rec = (size_t)t16_record(j->type), row_bytes = quant_row_bytes(j->type, j->k);
    int64_t n_sb = j->k / 256, r1 = 16 * j->t1 < j->n ? 16 * j->t1 : j->n;
    memset(j->dst + (size_t)(j->t0 * n_sb) * rec, 0, (size_t)((j->t1 - j->t0) * n_sb) * rec);
    for (int64_t row = 16 * j->t0; row < r1; row++) {
        int r = (int)(row & 15);
        for (int64_t b = 0; b < n_sb; b++) {
            uint8_t *o = j->dst + (size_t)((row >> 4) * n_sb + b) * rec;
            const uint8_t *blk = j->src + (size_t)row * row_bytes;
            if (j->type == GLIM_TYPE_Q4_K) {
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

static void *t16_main(void *arg)
{
    t16_tiles((const struct t16_job *)arg);
    return NULL;
}

/* threads: 0 = by size (the repack runs at ~2.4 GB/s on one core: a 30B model's 16 GB would add
 * seconds to its load); a thread that cannot be started leaves its tiles to the caller */
void quant_t16_repack_mt(uint32_t type, const void *src, void *dst, int64_t k, int64_t n, int threads)
{
    size_t bytes = quant_t16_bytes(type, k, n);
    if (!bytes)
        return;
    int64_t n_tiles = (n + 15) / 16;
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = bytes < ((size_t)16 << 20) ? 1 : cores < 1 ? 1 : cores > 8 ? 8 : (int)cores;
    }
    threads = threads > 16 ? 16 : threads > n_tiles ? (int)n_tiles : threads;
    struct t16_job jobs[16];
    pthread_t tid[16];
    bool started[16] = {false};
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct t16_job){type, (const uint8_t *)src, (uint8_t *)dst, k, n, n_tiles * i / threads,
                                   n_tiles * (i + 1) / threads};
        started[i] = i > 0 && pthread_create(&tid[i], NULL, t16_main, &jobs[i]) == 0;
    }
    for (int i = 0; i < threads; i++)
        if (!started[i])
            t16_tiles(&jobs[i]);
    for (int i = 1; i < threads; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
}

void quant_t16_repack(uint32_t type, const void *src, void *dst, int64_t k, int64_t n)
{
    quant_t16_repack_mt(type, src, dst, k, n, 0);
}
