/* cuda_absent.c — the CUDA entry points of a build without -DGLIM_CUDA=ON. */
#include "backend.h"

#ifndef GLIM_HAVE_CUDA
int backend_cuda_new(int device, struct backend **out, struct glim_err *err)
{
    return glim_fail(err, GLIM_EUNSUPPORTED, "--device cuda: this glim was built without CUDA (-DGLIM_CUDA=ON)");
}

bool backend_cuda_available(void) { return false; }
#else
typedef int cuda_absent_unused;   /* ISO C wants a declaration in every file */
#endif
