/*
 * cuda_info.cu — what `glim bench` reports about the GPU: its name and memory
 * clock, and the device's achievable copy bandwidth (a device-to-device copy
 * of a buffer much larger than L2, timed with events, best of several).
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_util.cuh"

extern "C" int backend_cuda_describe(char *buf, size_t n)
{
    int dev = 0, mem_khz = 0, bus_bits = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
        return GLIM_EBACKEND;
    double peak = cuda_hbm_peak(dev, &mem_khz, &bus_bits);
    snprintf(buf, n, "%s, memory clock %d MHz, %d-bit bus (peak %.0f GB/s), %.0f GiB", prop.name, mem_khz / 1000,
             bus_bits, peak, prop.totalGlobalMem / 1073741824.0);
    return GLIM_OK;
}

/* Copy bandwidth counting bytes read and written: 2 * bytes / time. */
extern "C" int backend_cuda_membw(double *copy_gbs, struct glim_err *err)
{
    const size_t bytes = (size_t)4 << 30;
    void *a = NULL, *b = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    int rc = GLIM_OK;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaMemset(a, 1, bytes) != cudaSuccess || cudaEventCreate(&t0) != cudaSuccess ||
        cudaEventCreate(&t1) != cudaSuccess) {
        rc = glim_fail(err, GLIM_EBACKEND, "cuda membw: %s", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    *copy_gbs = 0;
    for (int i = 0; i < 6; i++) {   /* first pass warms up */
        float ms = 0;
        cudaEventRecord(t0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(t1);
        if (cudaEventSynchronize(t1) != cudaSuccess || cudaEventElapsedTime(&ms, t0, t1) != cudaSuccess) {
            rc = glim_fail(err, GLIM_EBACKEND, "cuda membw: %s", cudaGetErrorString(cudaGetLastError()));
            goto done;
        }
        double gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
        if (i > 0 && gbs > *copy_gbs)
            *copy_gbs = gbs;
    }
done:
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    return rc;
}
