/* cuda_check.h — what the stand-alone dev/cuda .cu programs share: CHECK(call) exits with the
 * file, line, call and CUDA's message when a runtime call fails. Header-only. */
#ifndef GLIM_DEV_CUDA_CHECK_H
#define GLIM_DEV_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

#endif
