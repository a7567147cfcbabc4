/*
 * gemv_bench.c — time the CUDA backend's matmul at Muse Glimmer 30B shapes
 * (through struct backend_i, exactly as the model calls it) and report
 * weight-stream bandwidth against a device-to-device copy of the same card.
 *
 * Build (GPU machine, after building libglim with -DGLIM_CUDA=ON in build-gpu):
 *   cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c build-gpu/src/libglim.a \
 *      -L/usr/local/cuda/lib64 -lcudart -lcublas -lstdc++ -lpthread -lm -ldl -o gemv_bench
 * Run: ./gemv_bench            (prints one line per shape; never asserts)
 *
 * Weights are random blocks with sane fp16 scales (contents do not change the
 * timing); several copies of each weight rotate so the 50 MB L2 never holds
 * the one being read. Time = host wall clock over R calls then one sync,
 * divided by R (launch overhead included, as the decode loop sees it until
 * it is captured in a graph).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "quant/quant.h"

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint16_t small_half(void)   /* fp16 in [2^-9, 2^-7) */
{
    return (uint16_t)(0x1800 + (rnd() & 0x7ff));
}

/* random blocks with valid fp16 scale fields */
static void fill_random(uint32_t type, uint8_t *p, size_t nbytes)
{
    for (size_t i = 0; i + 4 <= nbytes; i += 4) {
        uint32_t r = rnd();
        memcpy(p + i, &r, 4);
    }
    const struct quant_traits *qt = quant_traits(type);
    size_t bb = (size_t)qt->block_bytes, nb = nbytes / bb;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = p + b * bb;
        uint16_t h1 = small_half(), h2 = small_half();
        switch (type) {
        case GLIM_TYPE_Q4_K: case GLIM_TYPE_Q5_K: memcpy(blk, &h1, 2), memcpy(blk + 2, &h2, 2); break;
        case GLIM_TYPE_Q6_K: memcpy(blk + 208, &h1, 2); break;
        case GLIM_TYPE_Q8_0: case GLIM_TYPE_Q4_0: memcpy(blk, &h1, 2); break;
        case GLIM_TYPE_F16: h1 = (uint16_t)(0x3000 + (rnd() & 0x3ff)); memcpy(blk, &h1, 2); break;
        case GLIM_TYPE_BF16: h1 = (uint16_t)(0x3c00 + (rnd() & 0x7f)); memcpy(blk, &h1, 2); break;
        default: break;
        }
    }
}

struct shape { const char *what; uint32_t type; int64_t k, n; };

static void bench(struct backend *be, struct shape s, const int *rows, int n_rows_cfg)
{
    struct glim_err err = {0};
    size_t nbytes = quant_row_bytes(s.type, s.k) * (size_t)s.n;
    int copies = (int)((600u << 20) / nbytes) + 1;
    if (copies > 16)
        copies = 16;
    uint8_t *host = malloc(nbytes);
    fill_random(s.type, host, nbytes);
    struct be_weight w[16];
    for (int c = 0; c < copies; c++) {
        w[c] = (struct be_weight){.name = s.what, .type = s.type, .k = s.k, .n = s.n, .nbytes = nbytes, .host = host};
        if (be->i->weight_init(be, &w[c], &err) != GLIM_OK) {
            fprintf(stderr, "%s: %s\n", s.what, err.msg);
            copies = c;
            break;
        }
    }
    free(host);
    if (copies == 0)
        return;
    int max_rows = rows[n_rows_cfg - 1];
    float *x = be->i->alloc(be, (size_t)max_rows * s.k * 4), *y = be->i->alloc(be, (size_t)max_rows * s.n * 4);
    float *hx = malloc((size_t)max_rows * s.k * 4);
    for (int64_t i = 0; i < max_rows * s.k; i++)
        hx[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
    be->i->upload(be, x, hx, (size_t)max_rows * s.k * 4, &err);
    free(hx);
    for (int ri = 0; ri < n_rows_cfg; ri++) {
        int nr = rows[ri];
        for (int i = 0; i < 3; i++)
            be->i->matmul(be, y, &w[i % copies], x, nr);
        be->i->sync(be, &err);
        int reps = nbytes > (200u << 20) ? 10 : 60;
        double t0 = now_s();
        for (int i = 0; i < reps; i++)
            be->i->matmul(be, y, &w[i % copies], x, nr);
        int rc = be->i->sync(be, &err);
        double us = (now_s() - t0) / reps * 1e6;
        printf("%-14s %-5s K=%-6lld N=%-7lld rows=%-4d %9.1f us %8.1f GB/s%s%s\n", s.what, quant_type_name(s.type),
               (long long)s.k, (long long)s.n, nr, us, nbytes / us * 1e-3, rc ? "  ERROR " : "", rc ? err.msg : "");
    }
    for (int c = 0; c < copies; c++)
        be->i->weight_clear(be, &w[c]);
    be->i->release(be, x);
    be->i->release(be, y);
}

static void copy_bandwidth(struct backend *be)
{
    struct glim_err err = {0};
    size_t n = (size_t)1 << 28;   /* 1 GiB of floats: copy_rows with equal strides is a D2D memcpy */
    float *a = be->i->alloc(be, n * 4), *b = be->i->alloc(be, n * 4);
    if (!a || !b)
        return;
    be->i->copy_rows(be, b, 0, a, 0, 1, (int)n);
    be->i->sync(be, &err);
    double t0 = now_s();
    for (int i = 0; i < 10; i++)
        be->i->copy_rows(be, b, (int64_t)n, a, (int64_t)n, 1, (int)n);
    be->i->sync(be, &err);
    double s = (now_s() - t0) / 10;
    printf("device copy: %.1f GB/s (read + write of 1 GiB)\n", 2.0 * n * 4 / s * 1e-9);
    be->i->release(be, a);
    be->i->release(be, b);
}

int main(void)
{
    struct backend *be = NULL;
    struct glim_err err = {0};
    if (backend_cuda_new(0, &be, &err) != GLIM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s\n", be->desc);
    copy_bandwidth(be);
    static const int DEC[] = {1, 2, 4, 8, 16};
    static const int PRE[] = {1, 8, 17, 64, 512};
    const struct shape shapes[] = {
        {"ffn_gate/up", GLIM_TYPE_Q4_K, 6656, 19968}, {"ffn_down", GLIM_TYPE_Q4_K, 19968, 6656},
        {"ffn_down", GLIM_TYPE_Q6_K, 19968, 6656},    {"attn_q/gate", GLIM_TYPE_Q4_K, 6656, 4096},
        {"attn_output", GLIM_TYPE_Q4_K, 4096, 6656},  {"attn_k", GLIM_TYPE_Q4_K, 6656, 256},
        {"attn_v", GLIM_TYPE_Q6_K, 6656, 256},        {"ffn_up", GLIM_TYPE_Q5_K, 6656, 19968},
        {"ffn_up", GLIM_TYPE_Q8_0, 6656, 19968},      {"ffn_up", GLIM_TYPE_BF16, 6656, 19968},
        {"ffn_up", GLIM_TYPE_F16, 6656, 19968},       {"ffn_up", GLIM_TYPE_Q4_0, 6656, 19968},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        bench(be, shapes[i], DEC, 5);
    bench(be, (struct shape){"output", GLIM_TYPE_Q6_K, 6656, 202048}, DEC, 2);
    bench(be, (struct shape){"ffn_gate/up", GLIM_TYPE_Q4_K, 6656, 19968}, PRE, 5);
    backend_free(be);
    return 0;
}
