/*
 * pool.h — a persistent pool of worker threads for the CPU backend.
 *
 * pool_run(fn, arg) runs fn(arg, ith, nth) on every thread of the pool at
 * once (the calling thread is ith 0) and returns when all have finished.
 * Inside fn, pool_barrier() makes all nth threads meet (e.g. between
 * "quantize the activations" and "multiply"). Nothing is allocated after
 * pool_new: the hot path is atomics only, with a short spin before sleeping
 * so that back-to-back ops of one decode step do not pay a futex wake each.
 *
 * Threads: one driving thread (the backend's owner) calls pool_run; fn and
 * pool_barrier run on pool threads only.
 */
#ifndef GLIM_CPU_POOL_H
#define GLIM_CPU_POOL_H

#include <stdint.h>

#include "../base/err.h"

struct pool;

typedef void (*pool_task_fn)(void *arg, int ith, int nth);

int  pool_new(int n_threads,             /* >= 1; the caller counts as one */
              struct pool **out,         /* OUT: untouched on failure */
              struct glim_err *err);     /* GLIM_ENOMEM / GLIM_EBACKEND (thread creation) */
void pool_free(struct pool *p);          /* joins the workers; NULL ok */
int  pool_size(const struct pool *p);
void pool_run(struct pool *p, pool_task_fn fn, void *arg);
void pool_barrier(struct pool *p);       /* only from inside a task of pool_run */

/* rows [*r0, *r1) of n that worker ith of nth owns (even split, may be empty) */
void pool_split(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1);

#endif
