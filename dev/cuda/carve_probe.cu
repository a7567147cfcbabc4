/*
 * carve_probe.cu — does a CTA that needs a larger shared-memory split than an SM has wait for that
 * SM to drain? The staged v5 (GLIM_CUDA_V5_STAGE, measured and removed 2026-12-05) asked for ~152 KB
 * an SM where every other decode launch asks for the smallest split, and when it launched early
 * (GLIM_CUDA_SHORT_EARLY, removed too) the short attention kernel still ran on 32 SMs. Two kernels stand in for them:
 *   hold   32 CTAs of 256 threads with 4.5 KB of static shared memory, each spinning HOLD_US (the
 *          short kernel)
 *   stage  4 CTAs an SM of 128 threads with 37 KB of dynamic shared memory each, each spinning
 *          STAGE_US after it records its SM and start (the staged Wo's CTAs waiting for their input)
 * hold goes first on one stream, stage at once on another. Per case (the carveouts each asks for):
 * how many stage CTAs started on hold's SMs before hold's last CTA ended, and the median start of
 * stage's CTAs on hold's SMs and on the others (us from hold's first start). If they start on
 * hold's SMs only after it ends at the default carveouts but beside it at one split for both, an
 * early staged Wo needs every launch at that split. A benchmark: prints, never asserts.
 *
 * Build and run (GPU machine): nvcc -arch=sm_90 -O3 -o /tmp/carve_probe dev/cuda/carve_probe.cu && /tmp/carve_probe
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_check.h"

#define HOLD_CTAS 32
#define HOLD_US 40
#define STAGE_US 20
#define STAGE_SMEM (37 * 1024)

static __device__ void spin_until(unsigned long long t)
{
    while (now_ns() < t)
        ;
}

/* t[0..HOLD_CTAS): start, t[HOLD_CTAS..): end; sm[i]: CTA i's SM */
static __global__ void __launch_bounds__(256) hold_kernel(unsigned long long *t, unsigned *sm)
{
    __shared__ float4 buf[288];   /* ~4.5 KB, as the short kernel's */
    unsigned long long t0 = now_ns();
    buf[threadIdx.x] = make_float4((float)threadIdx.x, 0.0f, 0.0f, 0.0f);
    __syncthreads();
    if (threadIdx.x == 0) {
        t[blockIdx.x] = t0;
        sm[blockIdx.x] = smid();
    }
    spin_until(t0 + HOLD_US * 1000ull);
    __syncthreads();
    if (threadIdx.x == 0)
        t[HOLD_CTAS + blockIdx.x] = now_ns() + (unsigned long long)(buf[1].x < 0.0f);
}

static __global__ void __launch_bounds__(128) stage_kernel(unsigned long long *t, unsigned *sm)
{
    extern __shared__ float4 dyn[];
    unsigned long long t0 = now_ns();
    dyn[threadIdx.x] = make_float4((float)threadIdx.x, 0.0f, 0.0f, 0.0f);
    if (threadIdx.x == 0) {
        t[blockIdx.x] = t0;
        sm[blockIdx.x] = smid();
    }
    spin_until(t0 + STAGE_US * 1000ull);
    if (threadIdx.x == 0 && dyn[1].x < 0.0f)   /* never: keeps the shared memory used */
        t[blockIdx.x] = 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return -1.0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

int main(void)
{
    int n_sm = 0;
    CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
    int n_stage = 4 * n_sm;
    unsigned long long *ht, *st, *h_ht = (unsigned long long *)malloc(2 * HOLD_CTAS * 8),
                                 *h_st = (unsigned long long *)malloc((size_t)n_stage * 8);
    unsigned *hs, *ss, *h_hs = (unsigned *)malloc(HOLD_CTAS * 4), *h_ss = (unsigned *)malloc((size_t)n_stage * 4);
    double *on = (double *)malloc((size_t)n_stage * 8), *off = (double *)malloc((size_t)n_stage * 8);
    CHECK(cudaMalloc(&ht, 2 * HOLD_CTAS * 8));
    CHECK(cudaMalloc(&st, (size_t)n_stage * 8));
    CHECK(cudaMalloc(&hs, HOLD_CTAS * 4));
    CHECK(cudaMalloc(&ss, (size_t)n_stage * 4));
    CHECK(cudaFuncSetAttribute(stage_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, STAGE_SMEM));
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    static const struct {
        int         hold_pct, stage_pct;
        const char *what;
    } cases[] = {
        {0, 0, "both at the default (0)"},
        {0, 67, "hold 0, stage 67% (glim's staged launch)"},
        {72, 72, "both 72% (GLIM_CUDA_CARVEOUT=72)"},
        {0, 100, "hold 0, stage 100%"},
        {100, 100, "both 100%"},
    };
    printf("carve probe: %d SMs, hold %d CTAs x %d us, stage %d CTAs x %d us with %d KB each\n", n_sm, HOLD_CTAS,
           HOLD_US, n_stage, STAGE_US, STAGE_SMEM / 1024);
    for (int rep = 0; rep < 2; rep++)   /* the first pass warms up; the second prints */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            CHECK(cudaFuncSetAttribute(hold_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cases[c].hold_pct));
            CHECK(cudaFuncSetAttribute(stage_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                       cases[c].stage_pct));
            CHECK(cudaDeviceSynchronize());
            hold_kernel<<<HOLD_CTAS, 256, 0, s1>>>(ht, hs);
            stage_kernel<<<n_stage, 128, STAGE_SMEM, s2>>>(st, ss);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            if (rep == 0)
                continue;
            CHECK(cudaMemcpy(h_ht, ht, 2 * HOLD_CTAS * 8, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(h_hs, hs, HOLD_CTAS * 4, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(h_st, st, (size_t)n_stage * 8, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(h_ss, ss, (size_t)n_stage * 4, cudaMemcpyDeviceToHost));
            unsigned long long t0 = ~0ull, t_end = 0;
            unsigned char held[1024] = {0};
            for (int i = 0; i < HOLD_CTAS; i++) {
                t0 = h_ht[i] < t0 ? h_ht[i] : t0;
                t_end = h_ht[HOLD_CTAS + i] > t_end ? h_ht[HOLD_CTAS + i] : t_end;
                held[h_hs[i] & 1023] = 1;
            }
            int n_on = 0, n_off = 0, early = 0;
            for (int i = 0; i < n_stage; i++) {
                double us = ((double)h_st[i] - (double)t0) * 1e-3;
                if (held[h_ss[i] & 1023]) {
                    on[n_on++] = us;
                    early += h_st[i] < t_end;
                } else {
                    off[n_off++] = us;
                }
            }
            double hold_us = (double)(t_end - t0) * 1e-3;
            double m_on = median(on, n_on), m_off = median(off, n_off);
            printf("carve probe: %-42s hold ends %.1f us | stage on hold's SMs: %d CTAs, %d before hold ended, "
                   "median start %.1f us | elsewhere: %d, median start %.1f us\n",
                   cases[c].what, hold_us, n_on, early, m_on, n_off, m_off);
        }
    return 0;
}
