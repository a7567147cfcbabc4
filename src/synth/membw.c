/*
 * membw.c — multi-threaded streaming read bandwidth (see membw.h).
 *
 * Every repetition opens a gate for all reader threads and stops the clock
 * when the last one finishes, so thread start-up is not timed. Reads
 * use 16-byte vector loads into four independent accumulators: enough to be
 * memory-bound on any x86-64 or ARM core without ISA-specific code.
 */
#include "membw.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/alloc.h"

typedef uint64_t v2u64 __attribute__((vector_size(16)));

enum { MEMBW_MAX_THREADS = 256 };

size_t membw_llc_bytes(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            size_t b = v * (unit == 'K' ? 1024ul : unit == 'M' ? 1024ul * 1024 : 1ul);
            best = GLIM_MAX(best, b);
        }
        fclose(f);
    }
    return best;
}

/* A reusable start/finish gate: the main thread opens round `gen`, readers
 * run one pass and count themselves done. Works for however many readers
 * actually started (a pthread barrier would need the count up front). */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t  go, done_cv;
    int gen, done;
    bool quit;
};

struct reader {
    const v2u64 *p;
    size_t n;                  /* vectors in this slice */
    struct gate *g;
    uint64_t sink;
};

static uint64_t read_slice(const v2u64 *p, size_t n)
{
    v2u64 a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; i++)
        a += p[i];
    a += b + c + d;
    return a[0] ^ a[1];
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    struct gate *g = r->g;
    memset((void *)r->p, 1, r->n * sizeof *r->p);   /* first touch: pages local to this thread */
    for (int seen = 0;;) {
        pthread_mutex_lock(&g->mu);
        while (g->gen == seen && !g->quit)
            pthread_cond_wait(&g->go, &g->mu);
        seen = g->gen;
        bool quit = g->quit;
        pthread_mutex_unlock(&g->mu);
        if (quit)
            return NULL;
        r->sink += read_slice(r->p, r->n);
        pthread_mutex_lock(&g->mu);
        g->done++;
        pthread_cond_signal(&g->done_cv);
        pthread_mutex_unlock(&g->mu);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t default_buf_bytes(void)
{
    size_t want = GLIM_MAX(8 * membw_llc_bytes(), (size_t)1 << 30);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        want = GLIM_MIN(want, (size_t)pages * (size_t)psz / 4);
    return want;
}

/* One timed round: open the gate, wait for all n readers. Seconds. */
static double gate_round(struct gate *g, int n)
{
    pthread_mutex_lock(&g->mu);
    g->done = 0;
    g->gen++;
    double t0 = now_s();
    pthread_cond_broadcast(&g->go);
    while (g->done < n)
        pthread_cond_wait(&g->done_cv, &g->mu);
    double t1 = now_s();
    pthread_mutex_unlock(&g->mu);
    return t1 - t0;
}

static void time_reps(struct gate *g, int n_readers, int n_reps, size_t bytes, struct membw_result *out)
{
    double sum = 0;
    gate_round(g, n_readers);   /* warm-up; also waits out the first-touch memsets */
    for (int rep = 0; rep < n_reps; rep++) {
        double gbs = (double)bytes / gate_round(g, n_readers) / 1e9;
        sum += gbs;
        out->best_gbs = GLIM_MAX(out->best_gbs, gbs);
    }
    out->mean_gbs = sum / n_reps;
}

int membw_measure(size_t buf_bytes, int n_threads, int n_reps, struct membw_result *out,
                  struct glim_err *err)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = n_threads > 0 ? n_threads : (int)(ncpu > 0 ? ncpu : 1);
    nth = GLIM_MIN(nth, MEMBW_MAX_THREADS);
    n_reps = n_reps > 0 ? n_reps : 5;
    size_t bytes = buf_bytes ? buf_bytes : default_buf_bytes();
    size_t n_vec = bytes / sizeof(v2u64) / (size_t)nth * (size_t)nth;
    if (n_vec == 0)
        return glim_fail(err, GLIM_EINVAL, "membw: buffer of %zu bytes is too small", bytes);
    v2u64 *buf = glim_malloc_aligned(4096, n_vec * sizeof *buf);
    if (!buf)
        return glim_fail(err, GLIM_ENOMEM, "membw: cannot allocate %zu bytes", n_vec * sizeof *buf);

    struct gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER,
                     .done_cv = PTHREAD_COND_INITIALIZER};
    struct reader rd[MEMBW_MAX_THREADS];
    pthread_t tid[MEMBW_MAX_THREADS];
    size_t per = n_vec / (size_t)nth;
    int started = 0, rc = GLIM_OK;
    for (; started < nth; started++) {
        rd[started] = (struct reader){.p = buf + (size_t)started * per, .n = per, .g = &g};
        if (pthread_create(&tid[started], NULL, reader_main, &rd[started]))
            break;
    }
    memset(out, 0, sizeof *out);
    if (started < nth)
        rc = glim_fail(err, GLIM_ENOMEM, "membw: could only start %d of %d threads", started, nth);
    else
        time_reps(&g, nth, n_reps, n_vec * sizeof *buf, out);
    pthread_mutex_lock(&g.mu);
    g.quit = true;
    pthread_cond_broadcast(&g.go);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    glim_free_aligned(buf);
    out->buf_bytes = n_vec * sizeof *buf;
    out->llc_bytes = membw_llc_bytes();
    out->n_threads = nth;
    out->n_reps = n_reps;
    return rc;
}
