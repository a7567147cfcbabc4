/*
 * pool.c — persistent worker threads (see pool.h).
 *
 * DESIGN: a generation counter announces a new task. Workers spin on it for
 * a while (decode issues hundreds of small ops per token, and a futex wake
 * costs more than most of them), then sleep on a condition variable. The
 * driver bumps the generation under the mutex and broadcasts, so a sleeper
 * cannot miss it. Completion is a countdown the driver spins on. The barrier
 * is a counter plus a phase number: the last thread to arrive resets the
 * counter and advances the phase, everyone else waits for the phase to move.
 * All spins fall back to sched_yield, so oversubscribed pools (tests with
 * more threads than cores) still make progress.
 */
#include "pool.h"

#include <pthread.h>
#include <unistd.h>
#include <sched.h>
#include <stdatomic.h>

#include "../base/alloc.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define POOL_PAUSE() __asm__ __volatile__("yield")
#else
#define POOL_PAUSE() ((void)0)
#endif

enum { POOL_SPIN = 1 << 14, POOL_SPIN_BEFORE_YIELD = 256 };

struct pool_worker {
    struct pool *pool;
    int          ith;
    pthread_t    thread;
};

struct pool {
    int n;                          /* threads including the driver */
    pool_task_fn fn;                /* current task (written before gen++) */
    void        *arg;
    _Atomic unsigned gen;           /* task generation */
    _Atomic int  pending;           /* workers still running the task */
    _Atomic int  stop;
    _Atomic int  bar_count;
    _Atomic unsigned bar_phase;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    struct pool_worker *workers;    /* owned: n - 1 entries */
    int n_started;
    unsigned spin_before_yield;     /* long when every thread has a core of its own */
};

/* spin politely: pause first, then give the core away */
static void pool_relax(const struct pool *p, unsigned *spins)
{
    if (++*spins < p->spin_before_yield)
        POOL_PAUSE();
    else
        sched_yield();
}

static unsigned pool_wait_gen(struct pool *p, unsigned seen)
{
    for (int i = 0; i < POOL_SPIN; i++) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen)
            return g;
        POOL_PAUSE();
    }
    pthread_mutex_lock(&p->mu);
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *pool_main(void *argp)
{
    struct pool_worker *w = argp;
    struct pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = pool_wait_gen(p, seen);
        if (atomic_load(&p->stop))
            break;
        p->fn(p->arg, w->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
    return NULL;
}

int pool_new(int n_threads, struct pool **out, struct glim_err *err)
{
    if (n_threads < 1)
        n_threads = 1;
    struct pool *p = glim_calloc(1, sizeof *p);
    if (!p)
        return glim_fail(err, GLIM_ENOMEM, "thread pool: out of memory");
    p->n = n_threads;
    /* With a core per thread, waiting is short: spin (a yield costs a syscall and,
     * in a VM, a trip through the scheduler). Oversubscribed pools yield early. */
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin_before_yield = n_cpu > 0 && n_threads <= n_cpu ? 1u << 16 : POOL_SPIN_BEFORE_YIELD;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->workers = glim_calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->workers) {
        pool_free(p);
        return glim_fail(err, GLIM_ENOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        struct pool_worker *w = &p->workers[i - 1];
        w->pool = p;
        w->ith = i;
        if (pthread_create(&w->thread, NULL, pool_main, w) != 0) {
            pool_free(p);
            return glim_fail(err, GLIM_EBACKEND, "thread pool: cannot start thread %d of %d", i,
                             n_threads);
        }
        p->n_started++;
    }
    *out = p;
    return GLIM_OK;
}

void pool_free(struct pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i].thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    glim_free(p->workers);
    glim_free(p);
}

int pool_size(const struct pool *p) { return p->n; }

void pool_run(struct pool *p, pool_task_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    unsigned spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0)
        pool_relax(p, &spins);
}

void pool_barrier(struct pool *p)
{
    if (p->n == 1)
        return;
    unsigned phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_phase, 1, memory_order_release);
        return;
    }
    unsigned spins = 0;
    while (atomic_load_explicit(&p->bar_phase, memory_order_acquire) == phase)
        pool_relax(p, &spins);
}

void pool_split(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1)
{
    int64_t per = n / nth, extra = n % nth;
    *r0 = ith * per + (ith < extra ? ith : extra);
    *r1 = *r0 + per + (ith < extra ? 1 : 0);
}
