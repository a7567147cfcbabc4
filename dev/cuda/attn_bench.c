/*
 * attn_bench.c — time the CUDA backend's attention at Muse Glimmer 30B shapes
 * (32 query heads, 2 KV heads, head_dim 128, F16 cache; window 2048 on a ring)
 * through struct backend_i as the model calls it: v2 (CUDA cores; v4 switched off with
 * backend_cuda_set_attn_tc/_dec_tc) against v4 (tensor cores, the default), then an
 * estimate of a whole 131072-token prefill's attention from v4 chunk times.
 * Correctness lives in tests/test_cuda_ops.c; this only prints.
 *
 * Build (GPU machine, after building libglim with -DGLIM_CUDA=ON in build-gpu):
 *   cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/attn_bench.c build-gpu/src/libglim.a \
 *      /usr/local/cuda/lib64/libcudart_static.a -L/usr/local/cuda/lib64 -lcublas \
 *      -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/attn_bench
 * Run: /tmp/attn_bench            (or: bash dev/cuda/gpu_run.sh attn)
 *
 * Time per call: R calls captured in one graph (R sized from one eager call to ~40 ms),
 * replayed 3 times (device time, no launch gaps), after an eager call that sizes the
 * scratch. GB/s = K + V bytes of the last query's range (what a decode must read) / time.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "bench_util.h"
#include "quant/quant.h"

int backend_cuda_set_attn_tc(struct backend *be, bool on);       /* src/cuda/backend_cuda.cu */
int backend_cuda_set_attn_dec_tc(struct backend *be, bool on);

enum { H = 32, HKV = 2, D = 128, N_GLOBAL = 13, N_SLIDING = 39, WINDOW = 2048, CTX = 131072, CHUNK = 512 };

/* device buffers for one cache size: random f16 K/V in (-1, 1), q for up to CHUNK tokens */
struct bdata {
    int64_t n_slots;
    void *k, *v;
    float *q, *out;
    int32_t *pos;
};

static bool bdata_new(struct backend *be, int64_t n_slots, struct bdata *b)
{
    struct glim_err err = {0};
    size_t cache_bytes = (size_t)n_slots * HKV * D * 2, q_bytes = (size_t)CHUNK * H * D * 4;
    uint16_t *hc = malloc(cache_bytes);
    float *hq = malloc(q_bytes);
    for (size_t i = 0; i < cache_bytes / 2; i++)
        hc[i] = (uint16_t)((rnd() & 0x8000) | (0x3000 + (rnd() & 0x3ff)));
    for (size_t i = 0; i < q_bytes / 4; i++)
        hq[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
    b->n_slots = n_slots;
    b->k = be->i->alloc(be, cache_bytes), b->v = be->i->alloc(be, cache_bytes);
    b->q = be->i->alloc(be, q_bytes), b->out = be->i->alloc(be, q_bytes);
    b->pos = be->i->alloc(be, CHUNK * 4);
    bool ok = b->k && b->v && b->q && b->out && b->pos &&
              be->i->upload(be, b->k, hc, cache_bytes, &err) == GLIM_OK &&
              be->i->upload(be, b->v, hc, cache_bytes, &err) == GLIM_OK &&
              be->i->upload(be, b->q, hq, q_bytes, &err) == GLIM_OK;
    free(hc), free(hq);
    return ok;
}

static void bdata_free(struct backend *be, struct bdata *b)
{
    be->i->release(be, b->k), be->i->release(be, b->v), be->i->release(be, b->q);
    be->i->release(be, b->out), be->i->release(be, b->pos);
}

/* us per attention call of n_tokens queries ending at p_last, or -1 on error */
static double time_attention(struct backend *be, const struct bdata *b, int window, int block, int n_tokens,
                             int32_t p_last)
{
    struct glim_err err = {0};
    int32_t hp[CHUNK];
    for (int t = 0; t < n_tokens; t++)
        hp[t] = p_last - n_tokens + 1 + t;
    if (be->i->upload(be, b->pos, hp, (size_t)n_tokens * 4, &err) != GLIM_OK)
        return -1;
    struct be_attn_args a = {.out = b->out, .q = b->q, .k_cache = b->k, .v_cache = b->v, .kv_type = GLIM_TYPE_F16,
                             .n_slots = b->n_slots, .n_tokens = n_tokens, .pos = b->pos, .pos_host0 = hp[0],
                             .n_head = H, .n_head_kv = HKV, .head_dim = D, .window = window,
                             .scale = 0.0883883f, .block = block};
    be->i->attention(be, &a);
    if (be->i->sync(be, &err) != GLIM_OK)
        goto fail;
    double t0 = now_s();
    be->i->attention(be, &a);
    if (be->i->sync(be, &err) != GLIM_OK)
        goto fail;
    double once = now_s() - t0;
    int r = once > 0.04 ? 1 : once < 0.002 ? 20 : (int)(0.04 / once);
    void *g = NULL;
    if (be->i->graph_begin(be, &err) != GLIM_OK)
        goto fail;
    for (int i = 0; i < r; i++)
        be->i->attention(be, &a);
    if (be->i->graph_end(be, &g, &err) != GLIM_OK)
        goto fail;
    be->i->graph_launch(be, g, &err);
    be->i->sync(be, &err);
    t0 = now_s();
    for (int l = 0; l < 3; l++)
        be->i->graph_launch(be, g, &err);
    double us = be->i->sync(be, &err) == GLIM_OK ? (now_s() - t0) / (3 * r) * 1e6 : -1;
    be->i->graph_free(be, g);
    if (us >= 0)
        return us;
fail:
    fprintf(stderr, "attention: %s\n", err.msg);
    return -1;
}

static void use_v4(struct backend *be, bool on)
{
    backend_cuda_set_attn_tc(be, on);
    backend_cuda_set_attn_dec_tc(be, on);
}

struct acase { const char *what; int64_t n_slots; int window, block, n_tokens; int32_t p_last; };

int main(void)
{
    struct backend *be = NULL;
    struct glim_err err = {0};
    if (backend_cuda_new(0, &be, &err) != GLIM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s\n", be->desc);
    static const struct acase cases[] = {
        {"decode global d4096", 4224, 0, 0, 1, 4095},
        {"decode global d32768", 32768, 0, 0, 1, 32767},
        {"decode global d131072", CTX, 0, 0, 1, CTX - 1},
        {"decode global d128 (ctx 131072)", CTX, 0, 0, 1, 127},
        {"decode window d131072", WINDOW + CHUNK, WINDOW, 0, 1, CTX - 1},
        {"verify 4 global d32768", 32768, 0, 0, 4, 32767},
        {"verify 16 global d4096", 4224, 0, 0, 16, 4095},
        {"verify 16 global d32768", 32768, 0, 0, 16, 32767},
        {"verify 16 global d131072", CTX, 0, 0, 16, CTX - 1},
        {"dflash block 16 global d131072", CTX, 0, 16, 16, CTX - 1},
        {"verify 16 window d131072", WINDOW + CHUNK, WINDOW, 0, 16, CTX - 1},
        {"prefill 512 global @4096", 4608, 0, 0, CHUNK, 4607},
        {"prefill 512 global @32768", 32768, 0, 0, CHUNK, 32767},
        {"prefill 512 global @131072", CTX, 0, 0, CHUNK, CTX - 1},
        {"prefill 512 window @131072", WINDOW + CHUNK, WINDOW, 0, CHUNK, CTX - 1},
    };
    printf("%-34s %12s %12s %7s %10s\n", "case (Muse: 32/2 heads, dim 128, F16)", "v2 us", "v4 us", "v2/v4",
           "v4 GB/s");
    struct bdata b = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct acase *c = &cases[i];
        if (b.n_slots != c->n_slots) {
            if (b.n_slots)
                bdata_free(be, &b);
            if (!bdata_new(be, c->n_slots, &b)) {
                fprintf(stderr, "out of device memory\n");
                return 1;
            }
        }
        use_v4(be, false);
        double v2 = time_attention(be, &b, c->window, c->block, c->n_tokens, c->p_last);
        use_v4(be, true);
        double v4 = time_attention(be, &b, c->window, c->block, c->n_tokens, c->p_last);
        int64_t keys = c->window > 0 && c->window < c->p_last + 1 ? c->window : c->p_last + 1;
        double gbs = v4 > 0 ? (double)keys * HKV * D * 2 * 2 / (v4 * 1e3) : 0;
        printf("%-34s %12.1f %12.1f %7.1f %10.0f\n", c->what, v2, v4, v4 > 0 ? v2 / v4 : 0.0, gbs);
        fflush(stdout);
    }

    /* 131072-token prefill in chunks of 512, attention only: the chunk time is linear in the
     * depth, so 9 sampled depths integrate the 256 chunks of a global layer; a sliding layer's
     * chunk costs the same at every depth past the window */
    if (b.n_slots != CTX) {
        bdata_free(be, &b);
        if (!bdata_new(be, CTX, &b))
            return 1;
    }
    use_v4(be, true);
    double global_s = 0, prev = 0;
    int32_t prev_end = 0;
    for (int k = 0; k <= 8; k++) {
        int32_t end = k == 0 ? CHUNK : (int32_t)((int64_t)CTX * k / 8);
        double us = time_attention(be, &b, 0, 0, CHUNK, end - 1);
        printf("  v4 prefill chunk ending at %6d: %9.1f us\n", end, us);
        if (k > 0)
            global_s += (prev + us) / 2 * ((double)(end - prev_end) / CHUNK) * 1e-6;
        prev = us, prev_end = end;
    }
    global_s += prev * 1e-6;   /* the first chunk (the trapezoids start at its end) */
    bdata_free(be, &b);
    if (!bdata_new(be, WINDOW + CHUNK, &b))
        return 1;
    double win_us = time_attention(be, &b, WINDOW, 0, CHUNK, CTX - 1);
    double sliding_s = win_us * (CTX / CHUNK) * 1e-6;
    printf("prefill %d tokens (chunks of %d), attention only, v4: %d global layers x %.2f s + %d sliding x %.3f s"
           " = %.1f s\n", CTX, CHUNK, N_GLOBAL, global_s, N_SLIDING, sliding_s,
           N_GLOBAL * global_s + N_SLIDING * sliding_s);
    bdata_free(be, &b);
    backend_free(be);
    return 0;
}
