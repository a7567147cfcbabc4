/*
 * cpu_features.h — what this CPU can run, detected once (pthread_once).
 *
 * The kernel level is the best ISA the CPU supports, capped by the
 * environment variable GLIM_CPU_LEVEL=scalar|avx2|avx512 (read once), so that
 * tests and benchmarks can run every path on one machine. Any thread.
 */
#ifndef GLIM_CPU_FEATURES_H
#define GLIM_CPU_FEATURES_H

#include <stdbool.h>

enum cpu_level {
    CPU_LEVEL_SCALAR = 0,   /* portable C (also the ARM64 path for now) */
    CPU_LEVEL_AVX2 = 1,     /* AVX2 + FMA + F16C */
    CPU_LEVEL_AVX512 = 2,   /* AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present) */
    CPU_LEVEL_COUNT
};

struct cpu_features {
    bool has_avx2, has_fma, has_f16c;
    bool has_avx512f, has_avx512bw, has_avx512vl, has_avx512dq, has_avx512vnni, has_avx512bf16;
    int  n_physical_cores;  /* >= 1 */
    int  level_supported;   /* best enum cpu_level the hardware runs */
    int  level;             /* level_supported capped by GLIM_CPU_LEVEL */
};

const struct cpu_features *cpu_features_get(void);
const char *cpu_level_name(int level);        /* "scalar" "avx2" "avx512"; "?" otherwise */
int         cpu_level_from_name(const char *s); /* -1 when unknown */

#endif
