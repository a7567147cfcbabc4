/* alloc.c — glim_malloc & co with a fail-after hook for OOM tests. */
#include "alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static _Atomic long fail_after = -1;

void glim_alloc_fail_after(long n) { atomic_store(&fail_after, n); }

/* true when this call must fail (test hook) */
static int should_fail(void)
{
    long n = atomic_load(&fail_after);
    if (n < 0)
        return 0;
    n = atomic_fetch_sub(&fail_after, 1);
    return n <= 1;
}

void *glim_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *glim_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    if (should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *glim_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void *glim_malloc_aligned(size_t align, size_t n)
{
    if (should_fail())
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : 1) != 0)
        return NULL;
    return p;
}

void glim_free(void *p) { free(p); }
void glim_free_aligned(void *p) { free(p); }

char *glim_strndup(const char *s, size_t n)
{
    char *d = glim_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
