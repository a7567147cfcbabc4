/*
 * attn_bench.c — time the CUDA backend's attention at Muse Glimmer 30B shapes
 * (32 query heads, 2 KV heads, head_dim 128, F16 cache; window 2048 on a ring)
 * for v1, v2 (backend_cuda_set_new) and the experimental tensor-core prefill v3
 * (backend_cuda_set_attn_tc; used for >= 128 query tokens only), through struct backend_i as the model
 * calls it. Correctness lives in tests/test_cuda_ops.c; this only prints.
 *
 * Build (GPU machine, after building libglim with -DGLIM_CUDA=ON in build-gpu):
 *   cc -O2 -std=gnu11 -Iinclude -Isrc dev/cuda/attn_bench.c build-gpu/src/libglim.a \
 *      /usr/local/cuda/lib64/libcudart_static.a -L/usr/local/cuda/lib64 -lcublas \
 *      -lstdc++ -lpthread -lm -ldl -lrt -o /tmp/attn_bench
 * Run: /tmp/attn_bench
 *
 * Time per call = 20 calls captured in one graph, replayed 5 times (device time,
 * no launch gaps), after one eager call that sizes the scratch.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "quant/quant.h"

int backend_cuda_set_new(struct backend *be, bool on);      /* src/cuda/backend_cuda.cu */
int backend_cuda_set_attn_tc(struct backend *be, bool on);

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct acase { const char *what; int64_t n_slots; int window, block, n_tokens; int32_t p_last; };

/* us per attention call, or -1 on error */
static double time_attention(struct backend *be, struct acase c)
{
    const int H = 32, HKV = 2, D = 128, R = 20;
    struct glim_err err = {0};
    size_t cache_bytes = (size_t)c.n_slots * HKV * D * 2, q_bytes = (size_t)c.n_tokens * H * D * 4;
    uint16_t *hc = malloc(cache_bytes);
    for (size_t i = 0; i < cache_bytes / 2; i++)   /* fp16 in (-1, 1) */
        hc[i] = (uint16_t)((rnd() & 0x8000) | (0x3000 + (rnd() & 0x3ff)));
    float *hq = malloc(q_bytes);
    for (size_t i = 0; i < q_bytes / 4; i++)
        hq[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
    int32_t *hp = malloc((size_t)c.n_tokens * 4);
    for (int t = 0; t < c.n_tokens; t++)
        hp[t] = c.p_last - c.n_tokens + 1 + t;
    void *dk = be->i->alloc(be, cache_bytes), *dv = be->i->alloc(be, cache_bytes);
    float *dq = be->i->alloc(be, q_bytes), *dout = be->i->alloc(be, q_bytes);
    int32_t *dpos = be->i->alloc(be, (size_t)c.n_tokens * 4);
    double us = -1;
    if (!dk || !dv || !dq || !dout || !dpos)
        goto done;
    be->i->upload(be, dk, hc, cache_bytes, &err);
    be->i->upload(be, dv, hc, cache_bytes, &err);
    be->i->upload(be, dq, hq, q_bytes, &err);
    be->i->upload(be, dpos, hp, (size_t)c.n_tokens * 4, &err);
    struct be_attn_args a = {.out = dout, .q = dq, .k_cache = dk, .v_cache = dv, .kv_type = GLIM_TYPE_F16,
                             .n_slots = c.n_slots, .n_tokens = c.n_tokens, .pos = dpos, .pos_host0 = hp[0],
                             .n_head = H, .n_head_kv = HKV, .head_dim = D, .window = c.window,
                             .scale = 0.0883883f, .block = c.block};
    be->i->attention(be, &a);
    if (be->i->sync(be, &err) != GLIM_OK)
        goto done;
    void *g = NULL;
    if (be->i->graph_begin(be, &err) != GLIM_OK)
        goto done;
    for (int i = 0; i < R; i++)
        be->i->attention(be, &a);
    if (be->i->graph_end(be, &g, &err) != GLIM_OK)
        goto done;
    be->i->graph_launch(be, g, &err);
    be->i->sync(be, &err);
    double t0 = now_s();
    for (int l = 0; l < 5; l++)
        be->i->graph_launch(be, g, &err);
    if (be->i->sync(be, &err) == GLIM_OK)
        us = (now_s() - t0) / (5 * R) * 1e6;
    be->i->graph_free(be, g);
done:
    if (us < 0)
        fprintf(stderr, "%s: %s\n", c.what, err.msg);
    be->i->release(be, dk), be->i->release(be, dv), be->i->release(be, dq), be->i->release(be, dout);
    be->i->release(be, dpos);
    free(hc), free(hq), free(hp);
    return us;
}

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
        {"decode global d128", 4224, 0, 0, 1, 127},
        {"decode global d4096", 4224, 0, 0, 1, 4095},
        {"decode global d32768", 32896, 0, 0, 1, 32767},
        {"decode global d131071 (ctx 131072)", 131072, 0, 0, 1, 131071},
        {"decode global d128 (ctx 131072)", 131072, 0, 0, 1, 127},
        {"decode window d4096", 2560, 2048, 0, 1, 4095},
        {"dflash verify 16 @ d4096 global", 4224, 0, 0, 16, 4095},
        {"prefill 512 @ 4096 global", 4224, 0, 0, 512, 4095},
        {"prefill 512 @ 4096 window", 2560, 2048, 0, 512, 4095},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        backend_cuda_set_new(be, false);
        double v1 = time_attention(be, cases[i]);
        backend_cuda_set_new(be, true);
        double v2 = time_attention(be, cases[i]);
        double v3 = -1;
        if (cases[i].n_tokens >= 128) {
            backend_cuda_set_attn_tc(be, true);
            v3 = time_attention(be, cases[i]);
            backend_cuda_set_attn_tc(be, false);
        }
        printf("%-38s v1 %9.1f us   v2 %9.1f us (x%.1f)   v3 %9.1f us\n", cases[i].what, v1, v2,
               v2 > 0 ? v1 / v2 : 0.0, v3);
        fflush(stdout);
    }
    backend_free(be);
    return 0;
}
