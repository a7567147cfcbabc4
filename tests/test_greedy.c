/*
 * test_greedy.c — the device-side greedy pick (backend.h argmax) and glim_session_greedy:
 * the op against the sampler's argmax on rows built to trip it (ties, NaN, -inf, signed
 * zeros, a row of one, the vocabulary's width), and glim_session_greedy against
 * glim_session_eval + sampler_argmax token for token, with a stop, a continuation and
 * the context end, on the CPU backends and (when there is a device) on CUDA with and
 * without graphs. The session after greedy decoding must give the eval loop's logits
 * bit for bit (the eval loop's into glim_model_host_alloc's memory: page-locked on CUDA).
 */
#include "golden_util.h"

#include "../include/glim.h"
#include "../src/backend/backend.h"
#include "../src/runtime/sampler.h"

/* ---- the op ------------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)rng;
}

/* row kinds: random, ties of the maximum, NaNs and a max after them, all -inf, all NaN, signed zeros */
static void fill_row(float *x, int64_t n, int kind)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(next_u32() % 20000) / 1000.0f - 10.0f;
    int64_t a = (int64_t)(next_u32() % (uint32_t)n), b = (int64_t)(next_u32() % (uint32_t)n);
    switch (kind) {
    case 1: x[a] = x[b] = 50.0f; break;
    case 2:
        for (int64_t i = 0; i < n; i += 3)
            x[i] = NAN;
        x[b] = 40.0f;
        break;
    case 3: for (int64_t i = 0; i < n; i++) x[i] = -INFINITY; break;
    case 4: for (int64_t i = 0; i < n; i++) x[i] = NAN; break;
    case 5:
        for (int64_t i = 0; i < n; i++)
            x[i] = i % 2 ? -0.0f : -1.0f;
        x[a] = 0.0f;
        break;
    default: break;
    }
}

static void check_op(struct backend *be, const char *what)
{
    const int64_t widths[] = {1, 7, 255, 4097, 202048};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        int64_t n = widths[w];
        int rows = n > 5000 ? 3 : 20;   /* 20: more rows than one CUDA launch takes */
        float *x = malloc(sizeof(float) * (size_t)(rows * n));
        int32_t got[20], pos = 41;
        for (int r = 0; r < rows; r++)
            fill_row(x + r * n, n, r % 6);
        float *dx = be->i->alloc(be, sizeof(float) * (size_t)(rows * n));
        int32_t *dout = be->i->alloc(be, sizeof got), *dpos = be->i->alloc(be, sizeof pos);
        struct glim_err err = {0};
        CHECK(dx && dout && dpos);
        if (!dx || !dout || !dpos)
            break;
        CHECK_EQ(be->i->upload(be, dx, x, sizeof(float) * (size_t)(rows * n), &err), 0);
        CHECK_EQ(be->i->upload(be, dpos, &pos, sizeof pos, &err), 0);
        be->i->argmax(be, dout, dx, rows, n, dpos);
        be->i->argmax(be, dout, dx, rows, n, NULL);   /* twice: the counts must be back at 0 */
        CHECK_EQ(be->i->download(be, got, dout, sizeof(int32_t) * (size_t)rows, &err), 0);
        CHECK_EQ(be->i->download(be, &pos, dpos, sizeof pos, &err), 0);
        CHECK_EQ(pos, 42);
        int bad = 0;
        for (int r = 0; r < rows; r++)
            if (got[r] != sampler_argmax(x + r * n, (int32_t)n)) {
                if (!bad++)
                    fprintf(stderr, "  %s: n %lld row %d (kind %d): %d, want %d\n", what, (long long)n, r, r % 6,
                            got[r], sampler_argmax(x + r * n, (int32_t)n));
            }
        CHECK_EQ(bad, 0);
        be->i->release(be, dx);
        be->i->release(be, dout);
        be->i->release(be, dpos);
        free(x);
    }
}

static void test_argmax_op(void)
{
    struct glim_err err = {0};
    struct backend *be = NULL;
    CHECK_EQ(backend_cpu_ref_new(1, &be, &err), 0);
    if (be)
        check_op(be, "cpu-ref");
    backend_free(be);
    be = NULL;
    CHECK_EQ(backend_cpu_new(2, &be, &err), 0);
    if (be)
        check_op(be, "cpu");
    backend_free(be);
    be = NULL;
    if (!backend_cuda_available()) {
        printf("  cuda: skipped (no device or not built with GLIM_CUDA)\n");
        return;
    }
    CHECK_EQ(backend_cuda_new(0, &be, &err), 0);
    if (be)
        check_op(be, "cuda");
    backend_free(be);
}

/* ---- the session loop ----------------------------------------------------------------- */

struct stop_at { int n, seen; };
static int stop_cb(void *ud, int32_t tok)
{
    struct stop_at *s = ud;
    (void)tok;
    return ++s->seen >= s->n;
}

static struct glim_session *new_session(struct glim_model *m, int64_t n_ctx)
{
    struct glim_session_params sp;
    glim_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    return g_session_with(m, &sp);
}

/* the reference: eval and the host's argmax; returns picks made */
static int eval_loop(struct glim_session *s, int32_t tok, int n, int32_t *out, float *logits, int V)
{
    struct glim_err err = {0};
    int i = 0;
    for (; i < n && glim_session_pos(s) < glim_session_n_ctx(s); i++) {
        if (glim_session_eval(s, &tok, 1, logits, 1, &err) != GLIM_OK)
            break;
        tok = out[i] = sampler_argmax(logits, V);
    }
    return i;
}

static void check_model(const char *rel, const char *device, bool no_graph)
{
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.device = device, mp.no_graph = no_graph;
    struct glim_model *m = NULL;
    struct glim_err err = {0};
    if (glim_model_load(testdata(rel), &mp, &m, &err) != GLIM_OK) {
        fprintf(stderr, "load %s: %s\n", rel, err.msg);
        CHECK(0);
        return;
    }
    int V = glim_model_n_vocab(m);
    const int32_t prompt[] = {1, 15, 27, 3, 99, 7, 42, 5};
    const int NP = 8, N = 24, CTX = NP + 20;
    /* lb from glim_model_host_alloc (page-locked on CUDA): the eval loop's logits land there, la's
     * in plain memory, and the two must agree bit for bit below */
    float *la = malloc(sizeof(float) * (size_t)V), *lb = glim_model_host_alloc(m, sizeof(float) * (size_t)V);
    CHECK(la && lb);
    int32_t ref[64], got[64];
    struct glim_session *a = new_session(m, 256), *b = new_session(m, 256), *c = new_session(m, CTX);
    CHECK(a && b && c);
    if (!a || !b || !c || !la || !lb)
        goto out;
    /* the same prefill; the first pick from its logits, then N picks each way */
    CHECK_EQ(glim_session_eval(a, prompt, NP, la, 1, &err), 0);
    CHECK_EQ(glim_session_eval(b, prompt, NP, lb, 1, &err), 0);
    int32_t t0 = sampler_argmax(la, V);
    int n_ref = eval_loop(b, t0, N, ref, lb, V), n_got = -1;
    CHECK_EQ(glim_session_greedy(a, t0, N, got, NULL, NULL, &n_got, &err), 0);
    CHECK_EQ(n_got, n_ref);
    CHECK_EQ(glim_session_pos(a), glim_session_pos(b));
    int diff = 0;
    for (int i = 0; i < n_got && i < n_ref; i++)
        diff += got[i] != ref[i];
    CHECK_EQ(diff, 0);
    /* stop after 5 more (one step beyond was queued and dropped), then go on: still the same */
    struct stop_at st = {5, 0};
    int64_t p = glim_session_pos(a);
    CHECK_EQ(glim_session_greedy(a, got[N - 1], N, got, stop_cb, &st, &n_got, &err), 0);
    CHECK_EQ(n_got, 5);
    CHECK_EQ(st.seen, 5);
    CHECK_EQ(glim_session_pos(a), p + 5);
    CHECK_EQ(eval_loop(b, ref[N - 1], 5, ref, lb, V), 5);
    diff = 0;
    for (int i = 0; i < 5; i++)
        diff += got[i] != ref[i];
    CHECK_EQ(diff, 0);
    CHECK_EQ(glim_session_greedy(a, got[4], 6, got, NULL, NULL, &n_got, &err), 0);
    CHECK_EQ(eval_loop(b, ref[4], 6, ref, lb, V), 6);
    diff = 0;
    for (int i = 0; i < 6 && i < n_got; i++)
        diff += got[i] != ref[i];
    CHECK_EQ(n_got, 6);
    CHECK_EQ(diff, 0);
    /* the session state is the eval loop's: the next logits agree bit for bit */
    CHECK_EQ(glim_session_eval(a, &got[5], 1, la, 1, &err), 0);
    CHECK_EQ(glim_session_eval(b, &ref[5], 1, lb, 1, &err), 0);
    CHECK(memcmp(la, lb, sizeof(float) * (size_t)V) == 0);
    /* the context end: picks stop when every position is used */
    CHECK_EQ(glim_session_eval(c, prompt, NP, la, 1, &err), 0);
    CHECK_EQ(glim_session_greedy(c, sampler_argmax(la, V), 64, got, NULL, NULL, &n_got, &err), 0);
    CHECK_EQ(n_got, CTX - NP);
    CHECK_EQ(glim_session_pos(c), CTX);
    CHECK(glim_session_greedy(c, got[0], 1, got, NULL, NULL, &n_got, &err) == GLIM_ERANGE);
    printf("  %s on %s%s: %d picks agree\n", rel, device, no_graph ? " (no graph)" : "", n_ref + 11);
out:
    glim_session_free(a);
    glim_session_free(b);
    glim_session_free(c);
    glim_model_host_free(m, lb);
    glim_model_free(m);
    free(la);
}

static void test_session_greedy(void)
{
    const char *models[] = {"models/stories260K.gguf", "muse-glimmer-tiny/muse-glimmer-tiny.gguf"};
    for (int i = 0; i < 2; i++) {
        check_model(models[i], "cpu", false);
        if (backend_cuda_available()) {
            check_model(models[i], "cuda", false);
            check_model(models[i], "cuda", true);
        }
    }
    if (!backend_cuda_available())
        printf("  cuda: skipped (no device or not built with GLIM_CUDA)\n");
}

int main(void)
{
    RUN(test_argmax_op);
    RUN(test_session_greedy);
    return DONE();
}
