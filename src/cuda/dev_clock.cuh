/*
 * dev_clock.cuh — private to src/cuda: the device's global timer (ns), for traces and spin
 * deadlines. Its own header so that tma.cuh stays usable without the backend's headers
 * (dev/cuda/mega_model.cu builds with nvcc alone).
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
