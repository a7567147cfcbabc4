/*
 * cpu_features.c — CPUID (through the compiler's __builtin_cpu_supports)
 * and the physical core count, computed once.
 *
 * Physical cores: distinct (package, core) pairs in sysfs, because SMT
 * siblings share the load/FMA units that GEMV saturates, so extra threads on
 * them only add contention. Falls back to the online CPU count.
 */
#include "cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static struct cpu_features g_feat;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int read_int_file(const char *path, int *v)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%d", v) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

static int count_physical_cores(void)
{
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_cpu < 1)
        n_cpu = 1;
    enum { MAX_SEEN = 4096 };
    static int seen[MAX_SEEN];   /* package << 16 | core; only touched under pthread_once */
    int n_seen = 0;
    for (long c = 0; c < n_cpu && c < MAX_SEEN; c++) {
        char path[128];
        int core, pkg;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/core_id", c);
        if (read_int_file(path, &core) != 0)
            return (int)n_cpu;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/physical_package_id", c);
        if (read_int_file(path, &pkg) != 0)
            pkg = 0;
        int key = (pkg << 16) | (core & 0xffff), dup = 0;
        for (int i = 0; i < n_seen && !dup; i++)
            dup = seen[i] == key;
        if (!dup)
            seen[n_seen++] = key;
    }
    return n_seen > 0 ? n_seen : (int)n_cpu;
}

static void detect(void)
{
    struct cpu_features *f = &g_feat;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f->has_avx2 = __builtin_cpu_supports("avx2");
    f->has_fma = __builtin_cpu_supports("fma");
    unsigned a, b, c, d;   /* clang 14 has no "f16c" feature string: read CPUID.1:ECX[29] */
    f->has_f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    f->has_avx512f = __builtin_cpu_supports("avx512f");
    f->has_avx512bw = __builtin_cpu_supports("avx512bw");
    f->has_avx512vl = __builtin_cpu_supports("avx512vl");
    f->has_avx512dq = __builtin_cpu_supports("avx512dq");
    f->has_avx512vnni = __builtin_cpu_supports("avx512vnni");
    f->has_avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    f->level_supported = CPU_LEVEL_SCALAR;
    if (f->has_avx2 && f->has_fma && f->has_f16c) {
        f->level_supported = CPU_LEVEL_AVX2;
        if (f->has_avx512f && f->has_avx512bw && f->has_avx512vl && f->has_avx512dq &&
            f->has_avx512vnni)
            f->level_supported = CPU_LEVEL_AVX512;
    }
    f->level = f->level_supported;
    const char *env = getenv("GLIM_CPU_LEVEL");
    int cap = env && *env ? cpu_level_from_name(env) : -1;
    if (cap >= 0 && cap < f->level)
        f->level = cap;
    f->n_physical_cores = count_physical_cores();
}

const struct cpu_features *cpu_features_get(void)
{
    pthread_once(&g_once, detect);
    return &g_feat;
}

static const char *const LEVEL_NAMES[CPU_LEVEL_COUNT] = {"scalar", "avx2", "avx512"};

const char *cpu_level_name(int level)
{
    return level >= 0 && level < CPU_LEVEL_COUNT ? LEVEL_NAMES[level] : "?";
}

int cpu_level_from_name(const char *s)
{
    for (int i = 0; i < CPU_LEVEL_COUNT; i++)
        if (strcasecmp(s, LEVEL_NAMES[i]) == 0)
            return i;
    return -1;
}

/* ---- kernel tables: one per level, each built on the one below ---------- */

#include "cpu_kern.h"

static struct cpu_kern g_kern[CPU_LEVEL_COUNT];
static pthread_once_t g_kern_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    const struct cpu_features *f = cpu_features_get();
    cpu_kern_fill_scalar(&g_kern[CPU_LEVEL_SCALAR]);
#if defined(__x86_64__)
    if (f->level_supported >= CPU_LEVEL_AVX2) {
        g_kern[CPU_LEVEL_AVX2] = g_kern[CPU_LEVEL_SCALAR];
        cpu_kern_fill_avx2(&g_kern[CPU_LEVEL_AVX2]);
    }
    if (f->level_supported >= CPU_LEVEL_AVX512) {
        g_kern[CPU_LEVEL_AVX512] = g_kern[CPU_LEVEL_AVX2];
        cpu_kern_fill_avx512(&g_kern[CPU_LEVEL_AVX512]);
    }
#else
    (void)f;
#endif
}

const struct cpu_kern *cpu_kern_get(int level)
{
    pthread_once(&g_kern_once, build_tables);
    if (level < 0 || level >= CPU_LEVEL_COUNT || level > cpu_features_get()->level_supported)
        return NULL;
    return &g_kern[level];
}

const struct cpu_kern *cpu_kern_best(void)
{
    return cpu_kern_get(cpu_features_get()->level);
}
