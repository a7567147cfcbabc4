/*
 * alloc.h — the one allocation door for src/. Tests can make the nth call
 * fail to prove every path returns GLIM_ENOMEM cleanly. Any thread.
 */
#ifndef GLIM_ALLOC_H
#define GLIM_ALLOC_H

#include <stddef.h>

void *glim_malloc(size_t n);
void *glim_calloc(size_t n, size_t size);            /* overflow-checked */
void *glim_realloc(void *p, size_t n);
void *glim_malloc_aligned(size_t align, size_t n);   /* free with glim_free_aligned */
void  glim_free(void *p);
void  glim_free_aligned(void *p);
char *glim_strndup(const char *s, size_t n);         /* NUL-terminated copy */

/* tests only: the nth following allocation (1-based) returns NULL; -1 = never */
void glim_alloc_fail_after(long n);

#endif
