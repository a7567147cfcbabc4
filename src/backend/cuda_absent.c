/* cuda_absent.c — the CUDA entry points of a build without -DGLIM_CUDA=ON. */
#include <stdio.h>

#include "backend.h"

#ifndef GLIM_HAVE_CUDA
int backend_cuda_new(int device, struct backend **out, struct glim_err *err)
{
    return glim_fail(err, GLIM_EUNSUPPORTED, "--device cuda: this glim was built without CUDA (-DGLIM_CUDA=ON)");
}

bool backend_cuda_available(void) { return false; }

int backend_cuda_set_exact(struct backend *be, bool exact) { return GLIM_EUNSUPPORTED; }

int backend_cuda_describe(char *buf, size_t n)
{
    snprintf(buf, n, "no CUDA");
    return GLIM_EUNSUPPORTED;
}

int backend_cuda_membw(double *copy_gbs, struct glim_err *err)
{
    *copy_gbs = 0;
    return glim_fail(err, GLIM_EUNSUPPORTED, "--membw on cuda: this glim was built without CUDA");
}
#else
typedef int cuda_absent_unused;   /* ISO C wants a declaration in every file */
#endif
