/* bench_util.h — what the dev/cuda bench programs share: a fixed-seed xorshift
 * (reproducible inputs) and a monotonic clock. Header-only: each bench is one file. */
#ifndef GLIM_DEV_BENCH_UTIL_H
#define GLIM_DEV_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

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

#endif
