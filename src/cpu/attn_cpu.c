/*
 * attn_cpu.c — attention over the KV cache with an online softmax.
 *
 * DESIGN: one work item = (query row t, KV head g). It walks the visible
 * positions [lo, hi] (same rule as cpu_ref_attention) in chunks of
 * ATTN_CHUNK: each K row is converted to f32 once and scored against all
 * query heads of the group (GQA: the group shares one K/V read), the running
 * max/denominator of every head is updated once per chunk, then each V row
 * is converted once and accumulated into every head. Items are dealt
 * round-robin to threads, so causal prefill (long rows last) stays balanced.
 * Scores are f32 dots of the f32 query with the cache row widened to f32
 * (as cpu_ref_attention does). Scratch per thread: G*D accumulators,
 * G*ATTN_CHUNK scores, 2 rows of D.
 */
#include <math.h>

#include "cpu_kern.h"
#include "cpu_ref.h"

enum { ATTN_CHUNK = 64 };

struct attn_task {
    const struct be_attn_args *a;
    const struct cpu_kern *kern;
    float *scratch;       /* nth * per_thread floats */
    size_t per_thread;
};

static size_t attn_thread_floats(const struct be_attn_args *a)
{
    size_t G = (size_t)(a->n_head / a->n_head_kv), D = (size_t)a->head_dim;
    return G * D + G * ATTN_CHUNK + 2 * G + 2 * D + 16;
}

static size_t kv_elem_bytes(uint32_t type) { return type == GLIM_TYPE_F32 ? 4 : 2; }

/* f32 view of KV row (slot of position u, head g); converts into buf unless F32 */
static const float *kv_row(const struct attn_task *t, const void *cache, int64_t u, int g, float *buf)
{
    const struct be_attn_args *a = t->a;
    size_t idx = (size_t)(u % a->n_slots) * (size_t)(a->n_head_kv * a->head_dim) +
                 (size_t)g * (size_t)a->head_dim;
    const char *p = (const char *)cache + idx * kv_elem_bytes(a->kv_type);
    if (a->kv_type == GLIM_TYPE_F32)
        return (const float *)p;
    t->kern->row_to_f32(a->kv_type, p, buf, a->head_dim);
    return buf;
}

/* scores of chunk [u0, u0+n) for the G heads, then rescale state and turn scores into weights */
static void attn_chunk_scores(const struct attn_task *t, const float *q, int g, int G, int64_t u0,
                              int n, float *s, float *m, float *l, float *acc, float *kbuf)
{
    const struct be_attn_args *a = t->a;
    int D = a->head_dim;
    for (int c = 0; c < n; c++) {
        const float *k = kv_row(t, a->k_cache, u0 + c, g, kbuf);
        for (int h = 0; h < G; h++)
            s[h * ATTN_CHUNK + c] = t->kern->dot_f32(q + (size_t)h * D, k, D) * a->scale;
    }
    for (int h = 0; h < G; h++) {
        float *sh = s + h * ATTN_CHUNK, mx = m[h];
        for (int c = 0; c < n; c++)
            mx = sh[c] > mx ? sh[c] : mx;
        float corr = m[h] == -INFINITY ? 0.0f : expf(m[h] - mx), sum = 0.0f;
        for (int c = 0; c < n; c++) {
            sh[c] = expf(sh[c] - mx);
            sum += sh[c];
        }
        if (corr != 1.0f)
            for (int i = 0; i < D; i++)
                acc[(size_t)h * D + i] *= corr;
        l[h] = l[h] * corr + sum;
        m[h] = mx;
    }
}

static void attn_item(const struct attn_task *t, int tq, int g, float *ws)
{
    const struct be_attn_args *a = t->a;
    int D = a->head_dim, G = a->n_head / a->n_head_kv;
    float *acc = ws, *s = acc + (size_t)G * D, *m = s + (size_t)G * ATTN_CHUNK, *l = m + G;
    float *kbuf = l + G, *vbuf = kbuf + D;
    int64_t p = a->pos[tq], hi = p, lo = a->window > 0 ? GLIM_MAX(0, p - a->window + 1) : 0;
    if (a->block > 0 && tq >= a->n_tokens - a->block)   /* bidirectional inside the block */
        hi = a->pos[a->n_tokens - 1];
    const float *q = a->q + ((size_t)tq * a->n_head + (size_t)g * G) * D;
    for (int i = 0; i < G * D; i++)
        acc[i] = 0.0f;
    for (int h = 0; h < G; h++)
        m[h] = -INFINITY, l[h] = 0.0f;
    for (int64_t u0 = lo; u0 <= hi; u0 += ATTN_CHUNK) {
        int n = (int)GLIM_MIN((int64_t)ATTN_CHUNK, hi - u0 + 1);
        attn_chunk_scores(t, q, g, G, u0, n, s, m, l, acc, kbuf);
        for (int c = 0; c < n; c++) {
            const float *v = kv_row(t, a->v_cache, u0 + c, g, vbuf);
            for (int h = 0; h < G; h++)
                t->kern->axpy_f32(acc + (size_t)h * D, s[h * ATTN_CHUNK + c], v, D);
        }
    }
    float *out = a->out + ((size_t)tq * a->n_head + (size_t)g * G) * D;
    for (int h = 0; h < G; h++) {
        float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
        for (int i = 0; i < D; i++)
            out[(size_t)h * D + i] = acc[(size_t)h * D + i] * inv;
    }
}

static void attn_task_run(void *arg, int ith, int nth)
{
    const struct attn_task *t = arg;
    float *ws = t->scratch + (size_t)ith * t->per_thread;
    int n_items = t->a->n_tokens * t->a->n_head_kv;
    for (int i = ith; i < n_items; i += nth)
        attn_item(t, i / t->a->n_head_kv, i % t->a->n_head_kv, ws);
}

/* fallback when scratch cannot grow: the reference, split over heads */
static void attn_ref_run(void *arg, int ith, int nth)
{
    const struct be_attn_args *a = arg;
    int64_t h0, h1;
    pool_split(a->n_head, ith, nth, &h0, &h1);
    if (h1 > h0)
        cpu_ref_attention_part(a, 0, a->n_tokens, (int)h0, (int)h1);
}

void cpu_attention(struct pool *pool, const struct cpu_kern *kern, struct cpu_scratch *scratch,
                   const struct be_attn_args *a)
{
    if (a->n_tokens <= 0 || a->n_head <= 0)
        return;
    size_t per = attn_thread_floats(a);
    size_t nth = (size_t)pool_size(pool);
    if (a->n_head_kv <= 0 || a->n_head % a->n_head_kv != 0 ||
        (a->kv_type != GLIM_TYPE_F32 && a->kv_type != GLIM_TYPE_F16 && a->kv_type != GLIM_TYPE_BF16) ||
        cpu_scratch_reserve(scratch, per * nth * sizeof(float)) != GLIM_OK) {
        pool_run(pool, attn_ref_run, (void *)a);
        return;
    }
    struct attn_task t = {.a = a, .kern = kern, .scratch = scratch->data, .per_thread = per};
    pool_run(pool, attn_task_run, &t);
}
