/* harness.h — the whole test framework (STYLE.md). No timing thresholds. */
#ifndef GLIM_HARNESS_H
#define GLIM_HARNESS_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
static int t_fail __attribute__((unused)), t_run __attribute__((unused));
#define CHECK(c) do { t_run++; if (!(c)) { t_fail++; \
    fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECK_EQ(a, b) do { long long a_ = (a), b_ = (b); t_run++; if (a_ != b_) { t_fail++; \
    fprintf(stderr, "%s:%d: %s = %lld, want %lld\n", __FILE__, __LINE__, #a, a_, b_); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); t_run++; if (!(fabs(a_ - b_) <= (tol))) { \
    t_fail++; fprintf(stderr, "%s:%d: %s = %g, want %g (tol %g)\n", __FILE__, __LINE__, #a, a_, b_, \
    (double)(tol)); } } while (0)
#define RUN(fn) do { int f_ = t_fail; fn(); printf("%-40s %s\n", #fn, t_fail == f_ ? "ok" : "FAIL"); } while (0)
#define DONE() (printf("%d checks, %d failed\n", t_run, t_fail), t_fail != 0)
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
#endif
