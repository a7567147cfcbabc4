/*
 * bench_gemv.c — decode GEMV throughput of the fast CPU backend against the
 * machine's read bandwidth. Prints figures; asserts nothing.
 *
 * For each weight type (Q4_K, Q8_0, Q6_K, Q5_K, F16) and each ISA level the
 * CPU runs, builds a matrix of about SIZE_MB (random blocks, K = 6656 as in
 * Muse Glimmer 30B), runs y = W x for one activation row (decode) and
 * reports weight bytes streamed per second. The baseline is a plain
 * multi-threaded read of a buffer of the same size on the same pool.
 *
 *   gcc -O2 -std=gnu11 -Iinclude -Isrc bench/bench_gemv.c build-cpu/src/libglim.a \
 *       -lpthread -lm -o /tmp/bench_gemv
 *   /tmp/bench_gemv [size_mb=1024] [threads=0] [reps=10] [n_rows=1]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/backend_cpu.h"
#include "cpu/cpu_kern.h"
#include "cpu/pool.h"
#include "quant/quant.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* random bytes, then small finite fp16 scales where the type has them */
static void fill_weight(uint32_t type, uint8_t *p, size_t nbytes, int64_t n_blocks)
{
    for (size_t i = 0; i + 8 <= nbytes; i += 8) {
        uint64_t r = rnd64();
        memcpy(p + i, &r, 8);
    }
    uint16_t h = f32_to_fp16(0.01f);
    for (int64_t b = 0; b < n_blocks; b++) {
        if (type == GLIM_TYPE_Q4_K)
            ((struct block_q4_k *)p)[b].d = ((struct block_q4_k *)p)[b].dmin = h;
        else if (type == GLIM_TYPE_Q5_K)
            ((struct block_q5_k *)p)[b].d = ((struct block_q5_k *)p)[b].dmin = h;
        else if (type == GLIM_TYPE_Q6_K)
            ((struct block_q6_k *)p)[b].d = h;
        else if (type == GLIM_TYPE_Q8_0)
            ((struct block_q8_0 *)p)[b].d = h;
    }
    if (type == GLIM_TYPE_F16)
        for (size_t i = 0; i < nbytes / 2; i++)
            ((uint16_t *)p)[i] = (uint16_t)(h ^ (rnd64() & 0x83ff));
}

struct read_task {
    const uint64_t *p;
    int64_t n;
    uint64_t out[64];
};

static void read_run(void *arg, int ith, int nth)
{
    struct read_task *t = arg;
    int64_t i0, i1;
    pool_split(t->n / 8, ith, nth, &i0, &i1);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (int64_t i = i0 * 8; i < i1 * 8; i += 8) {
        s0 += t->p[i], s1 += t->p[i + 1], s2 += t->p[i + 2], s3 += t->p[i + 3];
        s4 += t->p[i + 4], s5 += t->p[i + 5], s6 += t->p[i + 6], s7 += t->p[i + 7];
    }
    t->out[ith & 63] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

static double read_bandwidth(int n_threads, const void *buf, size_t nbytes, int reps)
{
    struct pool *pool;
    if (pool_new(n_threads, &pool, NULL) != GLIM_OK)
        return 0;
    struct read_task t = {.p = buf, .n = (int64_t)(nbytes / 8)};
    pool_run(pool, read_run, &t);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        pool_run(pool, read_run, &t);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    pool_free(pool);
    return (double)nbytes / best / 1e9;
}

int main(int argc, char **argv)
{
    size_t size_mb = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    int n_threads = argc > 2 ? atoi(argv[2]) : 0, reps = argc > 3 ? atoi(argv[3]) : 10;
    int n_rows = argc > 4 ? atoi(argv[4]) : 1;
    if (n_threads <= 0)
        n_threads = cpu_features_get()->n_physical_cores;
    const int64_t K = 6656;
    const uint32_t types[] = {GLIM_TYPE_Q4_K, GLIM_TYPE_Q8_0, GLIM_TYPE_Q6_K, GLIM_TYPE_Q5_K,
                              GLIM_TYPE_F16};
    size_t cap = size_mb << 20;
    uint8_t *buf = aligned_alloc(64, cap);
    float *x = malloc(sizeof(float) * (size_t)(K * n_rows));
    if (!buf || !x)
        return 1;
    memset(buf, 1, cap);   /* fault the pages in before measuring */
    for (int64_t i = 0; i < K * n_rows; i++)
        x[i] = (float)((double)(rnd64() % 2001) / 1000.0 - 1.0);
    printf("threads %d, %zu MiB matrices, K = %lld, %d activation row(s), best of %d\n", n_threads,
           size_mb, (long long)K, n_rows, reps);
    printf("read bandwidth (plain sum, same pool): %.1f GB/s\n", read_bandwidth(n_threads, buf, cap, reps));
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t type = types[ti];
        size_t row = quant_row_bytes(type, K);
        int64_t N = (int64_t)(cap / row);
        size_t nbytes = row * (size_t)N;
        fill_weight(type, buf, nbytes, (int64_t)(nbytes / (size_t)quant_traits(type)->block_bytes));
        float *y = malloc(sizeof(float) * (size_t)(N * n_rows));
        for (int level = 0; level < CPU_LEVEL_COUNT; level++) {
            struct backend *be;
            if (!cpu_kern_get(level) || backend_cpu_new_level(n_threads, level, &be, NULL) != GLIM_OK)
                continue;
            struct be_weight w = {.name = "bench", .type = type, .k = K, .n = N, .nbytes = nbytes,
                                  .host = buf};
            be->i->weight_init(be, &w, NULL);
            be->i->matmul(be, y, &w, x, n_rows);   /* warm-up: scratch, page tables */
            double best = 1e30;
            int r_eff = level == 0 ? 2 : reps;     /* the scalar level is slow on purpose */
            for (int r = 0; r < r_eff; r++) {
                double t0 = now_s();
                be->i->matmul(be, y, &w, x, n_rows);
                double dt = now_s() - t0;
                best = dt < best ? dt : best;
            }
            printf("%-5s %-7s N=%-7lld %7.2f ms  %6.1f GB/s of weights\n", quant_type_name(type),
                   cpu_level_name(level), (long long)N, best * 1e3, (double)nbytes / best / 1e9);
            backend_free(be);
        }
        free(y);
    }
    free(buf);
    free(x);
    return 0;
}
