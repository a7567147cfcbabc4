/*
 * dev_clock.cuh — private to src/cuda: the device's global timer (ns), for the traces
 * (GLIM_CUDA_V5_TRACE, GLIM_CUDA_NORM_TRACE).
 */
#ifndef GLIM_DEV_CLOCK_CUH
#define GLIM_DEV_CLOCK_CUH

static __device__ __forceinline__ unsigned long long cuda_globaltimer(void)
{
    unsigned long long ns = 0;
#if defined(__CUDA_ARCH__)
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
#endif
    return ns;
}

#endif
