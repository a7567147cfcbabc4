/*
 * stamps.cu — the summary of a per-CTA stamp trace (diagnosis knob: GLIM_CUDA_SHORT_TRACE). A traced kernel's thread 0 of each CTA writes `per` globaltimer stamps
 * (ns) in order, CTA b's from b * cta_stride of its launch, launch i's at stamp i * stride; the summary says, for each stamp, its median distance from the same CTA's stamp
 * before it, and when the first and the last CTA reached it, from the launch's first entry
 * (medians over launches).
 */
#include "cuda_util.cuh"

#include <stdio.h>
#include <stdlib.h>

int cuda_cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void cuda_stamps_dump(const char *tag, const void *dev, int n, int stride, int ctas, int per, int cta_stride,
                      const char *const *what)
{
    size_t all = (size_t)n * stride;
    unsigned long long *h = (unsigned long long *)malloc(all * sizeof *h);
    double *d = (double *)malloc((size_t)n * ctas * sizeof *d), *f = (double *)malloc((size_t)n * sizeof *f),
           *l = (double *)malloc((size_t)n * sizeof *l);
    if (n < 1 || !h || !d || !f || !l || cudaMemcpy(h, dev, all * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h), free(d), free(f), free(l);
        return;
    }
    fprintf(stderr, "%s: %d launches, %d CTAs | phase p50 (us, from the CTA's stamp before) | first CTA, "
                    "last CTA (us from the first entry, medians over launches)\n", tag, n, ctas);
    for (int k = 0; k < per; k++) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            const unsigned long long *r = h + (size_t)i * stride;
            unsigned long long t0 = ~0ull, lo = ~0ull, hi = 0;
            for (int b = 0; b < ctas; b++) {
                const unsigned long long *q = r + (size_t)b * cta_stride;
                t0 = q[0] < t0 ? q[0] : t0;
                lo = q[k] < lo ? q[k] : lo;
                hi = q[k] > hi ? q[k] : hi;
                if (k)
                    d[m++] = ((double)q[k] - (double)q[k - 1]) / 1e3;
            }
            f[i] = ((double)lo - (double)t0) / 1e3, l[i] = ((double)hi - (double)t0) / 1e3;
        }
        qsort(f, (size_t)n, sizeof *f, cuda_cmp_dbl);
        qsort(l, (size_t)n, sizeof *l, cuda_cmp_dbl);
        if (m)
            qsort(d, (size_t)m, sizeof *d, cuda_cmp_dbl);
        fprintf(stderr, "%s: %-24s %8.2f | %8.2f %8.2f\n", tag, what[k], m ? d[m / 2] : 0.0, f[n / 2], l[n / 2]);
    }
    free(h), free(d), free(f), free(l);
}
