/* harness.h — the whole test framework (STYLE.md). No timing thresholds. */
#ifndef GLIM_HARNESS_H
#define GLIM_HARNESS_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int t_fail __attribute__((unused)), t_run __attribute__((unused));
#define CHECK(c) do { t_run++; if (!(c)) { t_fail++; \
    fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECK_EQ(a, b) do { long long a_ = (a), b_ = (b); t_run++; if (a_ != b_) { t_fail++; \
    fprintf(stderr, "%s:%d: %s = %lld, want %lld\n", __FILE__, __LINE__, #a, a_, b_); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); t_run++; if (!(fabs(a_ - b_) <= (tol))) { \
    t_fail++; fprintf(stderr, "%s:%d: %s = %g, want %g (tol %g)\n", __FILE__, __LINE__, #a, a_, b_, \
    (double)(tol)); } } while (0)
/* GLIM_TEST_ONLY=name[,name...]: run only the tests whose name contains one of them (a quick
 * rerun; tests/CMakeLists.txt's variants of a test under other settings) */
static inline int test_selected(const char *fn)
{
    const char *o = getenv("GLIM_TEST_ONLY");
    if (!o || !*o)
        return 1;
    char one[128];
    while (*o) {
        size_t n = strcspn(o, ",");
        snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), o);
        if (n && strstr(fn, one))
            return 1;
        o += n + (o[n] == ',');
    }
    return 0;
}
#define RUN(fn) do { if (!test_selected(#fn)) break; \
    int f_ = t_fail; fn(); printf("%-40s %s\n", #fn, t_fail == f_ ? "ok" : "FAIL"); } while (0)
#define DONE() (printf("%d checks, %d failed\n", t_run, t_fail), t_fail != 0)
/* GLIM_TEST_QUICK=1: tests may leave out their slowest cases (a device call with little time);
 * the default runs everything */
static inline int test_quick(void)
{
    const char *q = getenv("GLIM_TEST_QUICK");
    return q && strcmp(q, "0") != 0;
}
/* Path under the shared test data folder. */
static inline const char *testdata(const char *rel)
{
    static char buf[8][1024];
    static int k;
    const char *root = getenv("GLIM_TESTDATA");
    if (!root)
        root = GLIM_TESTDATA;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}
/* name under dir, in one of 8 rotating buffers (like testdata) */
static inline const char *test_path(const char *dir, const char *name)
{
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}
/* Whole file, malloc'ed with a NUL after its *n bytes; NULL (and *n = 0) if it cannot be read. */
static inline char *test_read_file(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)len + 1)) &&
        fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[len] = '\0';
        *n = (size_t)len;
    }
    return b;
}
/* xorshift64* uniform in (0, 1), and a standard normal from two of them (Box-Muller) */
static inline double test_rng_unit(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return ((double)((*state * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}
static inline float test_rng_gauss(uint64_t *state)
{
    return (float)(sqrt(-2.0 * log(test_rng_unit(state))) * cos(6.283185307179586 * test_rng_unit(state)));
}
#endif
