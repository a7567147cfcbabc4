/*
 * synth_gen.c — tensor data of synthetic models, generated at write time.
 *
 * Each row r of tensor NAME gets its own xoshiro256+ stream seeded by
 * splitmix64(seed, fnv1a(NAME), r), so the bytes depend only on the seed, the
 * name and the row: not on thread count or chunking. Rows are split evenly
 * over n_threads pthreads; each thread fills an f32 row and quantizes it with
 * the type's reference from_f32 straight into the writer's buffer.
 *
 * Normals are Irwin-Hall sums of four 16-bit uniforms (mean 0, variance 1,
 * tails cut at ±3.46): four per 64-bit draw, ~20x cheaper than Box-Muller,
 * and a trained model's weights have no heavier tails that matter here.
 */
#include "synth.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../base/alloc.h"
#include "../gguf/gguf.h"
#include "../quant/quant.h"

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void rng_seed(struct rng *r, uint64_t seed, uint64_t name_hash, int64_t row)
{
    uint64_t x = seed ^ name_hash ^ ((uint64_t)row * 0xd1b54a32d192ed03ull);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rng_next(struct rng *r)   /* xoshiro256+ */
{
    uint64_t *s = r->s, out = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return out;
}

/* n values of mean + std·N(0,1) */
static void rng_fill_normal(struct rng *r, float *x, int64_t n, float mean, float std)
{
    /* sum of 4 uniforms on [0, 65536): mean 131070, sd 65536/sqrt(3) */
    const float k = std * 1.7320508f / 65536.0f, c = 131070.0f;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = rng_next(r);
        float s = (float)((v & 0xffff) + ((v >> 16) & 0xffff) + ((v >> 32) & 0xffff) + (v >> 48));
        x[i] = mean + (s - c) * k;
    }
}

struct fill_job {
    const struct synth_tensor *t;
    uint64_t seed, name_hash;
    uint8_t *dst;
    size_t   row_bytes;
    int64_t  r0, r1;
    int      rc;
};

static void *fill_rows(void *arg)
{
    struct fill_job *j = arg;
    const struct synth_tensor *t = j->t;
    quant_from_f32_fn from_f32 = quant_traits(t->type)->from_f32;
    float *row = glim_malloc((size_t)t->ne[0] * sizeof *row);
    if (!row) {
        j->rc = GLIM_ENOMEM;
        return NULL;
    }
    for (int64_t r = j->r0; r < j->r1; r++) {
        struct rng g;
        if (t->std == 0) {
            for (int64_t i = 0; i < t->ne[0]; i++)
                row[i] = t->mean;
        } else {
            rng_seed(&g, j->seed, j->name_hash, r);
            rng_fill_normal(&g, row, t->ne[0], t->mean, t->std);
        }
        from_f32(row, j->dst + (size_t)r * j->row_bytes, t->ne[0]);
    }
    glim_free(row);
    return NULL;
}

enum { MAX_THREADS = 256, MIN_ELEMS_PER_THREAD = 1 << 16 };

/* rows [u, n) of dst as copies of rows [0, u): doubling memcpy, so a few large copies */
static void repeat_rows(uint8_t *dst, size_t row_bytes, int64_t u, int64_t n)
{
    for (int64_t have = u; have < n;) {
        int64_t k = GLIM_MIN(have, n - have);
        memcpy(dst + (size_t)have * row_bytes, dst, (size_t)k * row_bytes);
        have += k;
    }
}

int synth_tensor_fill(const struct synth_tensor *t, uint64_t seed, int n_threads, int64_t unique_rows,
                      void *dst, struct glim_err *err)
{
    int64_t all_rows = t->ne[1];
    int64_t n_rows = unique_rows > 0 && unique_rows < all_rows ? unique_rows : all_rows;
    int64_t n_elems = t->ne[0] * n_rows;
    int nth = n_threads < 1 ? 1 : GLIM_MIN(n_threads, MAX_THREADS);
    nth = (int)GLIM_MIN((int64_t)nth, GLIM_MAX(n_elems / MIN_ELEMS_PER_THREAD, 1));
    nth = (int)GLIM_MIN((int64_t)nth, n_rows);
    struct fill_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    int64_t per = (n_rows + nth - 1) / nth;
    for (int i = 0; i < nth; i++) {
        jobs[i] = (struct fill_job){.t = t, .seed = seed, .name_hash = fnv1a(t->name), .dst = dst,
                                    .row_bytes = quant_row_bytes(t->type, t->ne[0]),
                                    .r0 = GLIM_MIN(i * per, n_rows), .r1 = GLIM_MIN((i + 1) * per, n_rows)};
        /* thread 0 is the caller; a thread that fails to start runs inline below */
        started[i] = i > 0 && pthread_create(&tid[i], NULL, fill_rows, &jobs[i]) == 0;
    }
    for (int i = 0; i < nth; i++)
        if (!started[i])
            fill_rows(&jobs[i]);
    int rc = GLIM_OK;
    for (int i = 0; i < nth; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        rc = rc ? rc : jobs[i].rc;
    }
    if (rc)
        return glim_fail(err, rc, "tensor '%s': out of memory generating rows", t->name);
    repeat_rows(dst, quant_row_bytes(t->type, t->ne[0]), n_rows, all_rows);
    return GLIM_OK;
}

struct gen_ud {
    const struct synth_tensor *t;
    uint64_t seed;
    int      n_threads;
    int64_t  unique_rows;
};

static int gen_tensor(void *ud, void *dst, size_t nbytes, struct glim_err *err)
{
    const struct gen_ud *g = ud;
    if (nbytes != g->t->nbytes)
        return glim_fail(err, GLIM_EINVAL, "tensor '%s': writer asked for %zu bytes, planned %zu",
                         g->t->name, nbytes, g->t->nbytes);
    return synth_tensor_fill(g->t, g->seed, g->n_threads, g->unique_rows, dst, err);
}

int synth_write(const char *path, const struct synth_hparams *hp, const struct synth_ftype *ft,
                const struct synth_plan *plan, const struct synth_write_opts *o, struct glim_err *err)
{
    struct gguf_writer *w = gguf_writer_new();
    struct gen_ud *ud = glim_calloc((size_t)GLIM_MAX(plan->n, 1), sizeof *ud);
    int rc = GLIM_OK;
    if (!w || !ud) {
        rc = glim_fail(err, GLIM_ENOMEM, "mkmodel: out of memory");
        goto done;
    }
    rc = synth_keys_add(w, hp, ft, o->vocab, err);
    for (int i = 0; !rc && i < plan->n; i++) {
        const struct synth_tensor *t = &plan->t[i];
        ud[i] = (struct gen_ud){
            .t = t, .seed = o->seed, .n_threads = o->n_threads, .unique_rows = o->unique_rows};
        rc = gguf_writer_add_tensor_gen(w, t->name, t->type, t->n_dims, t->ne, gen_tensor, &ud[i]);
        if (rc)
            rc = glim_fail(err, rc, "tensor '%s': adding to the writer failed (%s)", t->name,
                           glim_status_name(rc));
    }
    if (!rc)
        rc = gguf_writer_write(w, path, o->progress, o->progress_ud, err);
done:
    gguf_writer_free(w);
    glim_free(ud);
    return rc;
}
