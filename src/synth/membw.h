/*
 * membw.h — the machine's achievable memory read bandwidth, so that decode
 * speed can be reported as a fraction of it (decode reads every weight once
 * per token, so bytes/token × tokens/s ≤ bandwidth). Main thread; spawns
 * its own reader threads.
 */
#ifndef GLIM_MEMBW_H
#define GLIM_MEMBW_H

#include <stddef.h>

#include "../base/err.h"

struct membw_result {
    double best_gbs;     /* best repetition, 1e9 bytes/s */
    double mean_gbs;     /* mean over repetitions */
    size_t buf_bytes;    /* bytes read per repetition */
    size_t llc_bytes;    /* largest cache found in sysfs (0 = unknown) */
    int    n_threads;
    int    n_reps;
};

/* Largest CPU cache (bytes) per /sys/devices/system/cpu/cpu0/cache; 0 if unknown. */
size_t membw_llc_bytes(void);

/* Stream-read a buffer of buf_bytes (0 = max(8 × LLC, 1 GiB), at most a
 * quarter of RAM) with n_threads threads (<= 0 = online CPUs), n_reps times
 * after one warm-up pass; each thread reads its own slice, first-touched by
 * that thread. */
int membw_measure(size_t buf_bytes, int n_threads, int n_reps, struct membw_result *out,
                  struct glim_err *err);

#endif
