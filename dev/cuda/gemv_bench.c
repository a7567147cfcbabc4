/*
 * gemv_bench.c — time the CUDA backend's matmul at Muse Glimmer 30B shapes
 * (through struct backend_i, exactly as the model calls it) and report
 * weight-stream bandwidth against a device-to-device copy of the same card.
 *
 * Build (GPU machine, after building libglim with -DGLIM_CUDA=ON in build-gpu):
 *   cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/gemv_bench.c build-gpu/src/libglim.a \
 *      -L/usr/local/cuda/lib64 -lcudart -lcublas -lstdc++ -lpthread -lm -ldl -o gemv_bench
 * Run: ./gemv_bench            (prints one line per shape; never asserts)
 *      ./gemv_bench quick      (rows 1 and 8 of the Muse shapes, no exact)
 *      ./gemv_bench two        (rows 1 and 2 of the projections a norm feeds and of Wo/down: what a
 *                               second activation vector costs, e.g. a norm applied after the GEMV
 *                               as y = r_x (W A + r_o W B), docs/CUDA.md nineteenth session)
 *
 * Weights are random blocks with sane fp16 scales (contents do not change the
 * timing); several copies of each weight rotate so the 50 MB L2 never holds
 * the one being read. Time = host wall clock over R calls then one sync,
 * divided by R (launch overhead included, as the decode loop sees it until
 * it is captured in a graph).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "bench_util.h"
#include "quant/quant.h"

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

int backend_cuda_set_exact(struct backend *be, bool exact);   /* src/cuda/backend_cuda.cu */

static double g_copy_gbs;           /* device copy bandwidth (read + write) */
static char   g_summary[64][160];   /* rows=1 lines for the table at the end */
static int    g_n_summary;

/* us per matmul: eager = host wall clock over reps calls then one sync (launch overhead
 * included); graph = the same calls captured once and replayed (device time, no gaps).
 * x alternates between two buffers so every call quantizes its activations. */
static double time_matmul(struct backend *be, struct be_weight *w, int copies, float *x0, float *x1, float *y,
                          int nr, int reps, bool graph, int *rc)
{
    struct glim_err err = {0};
    for (int i = 0; i < 3; i++)
        be->i->matmul(be, y, &w[i % copies], i & 1 ? x1 : x0, nr);
    *rc = be->i->sync(be, &err);
    void *g = NULL;
    if (graph) {
        if (be->i->graph_begin(be, &err) != GLIM_OK)
            return (*rc = 1), 0;
        for (int i = 0; i < reps; i++)
            be->i->matmul(be, y, &w[i % copies], i & 1 ? x1 : x0, nr);
        if (be->i->graph_end(be, &g, &err) != GLIM_OK) {
            fprintf(stderr, "graph: %s\n", err.msg);
            return (*rc = 1), 0;
        }
        be->i->graph_launch(be, g, &err);   /* warm-up replay */
        be->i->sync(be, &err);
    }
    int n_launch = graph ? 5 : 1;
    double t0 = now_s();
    for (int l = 0; l < n_launch; l++) {
        if (graph)
            be->i->graph_launch(be, g, &err);
        else
            for (int i = 0; i < reps; i++)
                be->i->matmul(be, y, &w[i % copies], i & 1 ? x1 : x0, nr);
    }
    *rc |= be->i->sync(be, &err);
    double us = (now_s() - t0) / (reps * n_launch) * 1e6;
    if (g)
        be->i->graph_free(be, g);
    return us;
}

static void bench(struct backend *be, struct shape s, const int *rows, int n_rows_cfg, bool with_exact)
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
    size_t xb = (size_t)max_rows * s.k * 4;
    float *x0 = be->i->alloc(be, xb), *x1 = be->i->alloc(be, xb), *y = be->i->alloc(be, (size_t)max_rows * s.n * 4);
    float *hx = malloc(xb);
    for (int64_t i = 0; i < max_rows * s.k; i++)
        hx[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
    be->i->upload(be, x0, hx, xb, &err);
    be->i->upload(be, x1, hx, xb, &err);
    free(hx);
    for (int ri = 0; ri < n_rows_cfg; ri++) {
        int nr = rows[ri], rc1 = 0, rc2 = 0, rc3 = 0;
        int reps = nbytes > (200u << 20) ? 10 : 40;
        double ex = 0;
        if (with_exact && nr <= 16) {
            backend_cuda_set_exact(be, true);
            ex = time_matmul(be, w, copies, x0, x1, y, nr, reps, false, &rc1);
            backend_cuda_set_exact(be, false);
        }
        double eg = time_matmul(be, w, copies, x0, x1, y, nr, reps, false, &rc2);
        double gr = time_matmul(be, w, copies, x0, x1, y, nr, reps, true, &rc3);
        char line[160];
        snprintf(line, sizeof line, "%-12s %-5s %6lldx%-7lld rows=%-3d exact %7.1f us | eager %7.1f us | graph %7.1f us %6.0f GB/s %3.0f%%%s",
                 s.what, quant_type_name(s.type), (long long)s.k, (long long)s.n, nr, ex, eg, gr, nbytes / gr * 1e-3,
                 100.0 * nbytes / gr * 1e-3 / g_copy_gbs, rc1 | rc2 | rc3 ? " ERROR" : "");
        printf("%s\n", line);
        fflush(stdout);
        if (nr == 1 && g_n_summary < 64)
            memcpy(g_summary[g_n_summary++], line, sizeof line);
    }
    for (int c = 0; c < copies; c++)
        be->i->weight_clear(be, &w[c]);
    be->i->release(be, x0);
    be->i->release(be, x1);
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
    g_copy_gbs = 2.0 * n * 4 / s * 1e-9;
    printf("device copy: %.1f GB/s (read + write of 1 GiB)\n", g_copy_gbs);
    be->i->release(be, a);
    be->i->release(be, b);
}

int main(int argc, char **argv)
{
    struct backend *be = NULL;
    struct glim_err err = {0};
    bool quick = argc > 1 && !strcmp(argv[1], "quick");   /* rows 1 and 8 of the Muse shapes, no exact */
    bool two = argc > 1 && !strcmp(argv[1], "two");       /* rows 1 and 2 of the decode projections */
    if (backend_cuda_new(0, &be, &err) != GLIM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s\n", be->desc);
    copy_bandwidth(be);
    static const int DEC[] = {1, 2, 4, 8, 16}, QUICK[] = {1, 8};
    static const int PRE[] = {17, 64, 512};
    const struct shape shapes[] = {
        {"ffn_gate/up", GLIM_TYPE_Q4_K, 6656, 19968}, {"ffn_down", GLIM_TYPE_Q4_K, 19968, 6656},
        {"ffn_down", GLIM_TYPE_Q6_K, 19968, 6656},    {"attn_q/gate", GLIM_TYPE_Q4_K, 6656, 4096},
        {"attn_output", GLIM_TYPE_Q4_K, 4096, 6656},  {"attn_k", GLIM_TYPE_Q4_K, 6656, 256},
        {"attn_v", GLIM_TYPE_Q6_K, 6656, 256},        {"ffn_up", GLIM_TYPE_Q5_K, 6656, 19968},
        {"ffn_up", GLIM_TYPE_Q8_0, 6656, 19968},      {"ffn_up", GLIM_TYPE_Q4_0, 6656, 19968},
        {"ffn_up", GLIM_TYPE_BF16, 6656, 19968},
    };
    int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    const int n_decode = 7;   /* shapes[0 .. 6]: the Q4_K_M file's decode projections, up to attn_v */
    if (two) {
        static const int TWO[] = {1, 2};
        for (int i = 0; i < n_decode && i < n_shapes; i++)
            bench(be, shapes[i], TWO, 2, false);
        backend_free(be);
        return 0;
    }
    for (int i = 0; i < n_shapes; i++)
        bench(be, shapes[i], quick ? QUICK : DEC, quick ? 2 : 5, !quick);
    bench(be, (struct shape){"output", GLIM_TYPE_Q6_K, 6656, 202048}, DEC, quick ? 1 : 2, !quick);
    if (!quick)
        bench(be, (struct shape){"ffn_gate/up", GLIM_TYPE_Q4_K, 6656, 19968}, PRE, 3, false);
    printf("\n== rows=1 summary (copy %.0f GB/s)\n", g_copy_gbs);
    for (int i = 0; i < g_n_summary; i++)
        printf("%s\n", g_summary[i]);
    backend_free(be);
    return 0;
}
