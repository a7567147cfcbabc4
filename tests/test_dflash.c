/*
 * test_dflash.c — DFlash speculative decoding (runtime.md §1):
 *  - draft forward parity with the upstream PyTorch drafter (glimmer-tiny/dflash goldens);
 *  - lossless: greedy with a random drafter == plain greedy, 256 tokens, B in {2,4,8,16};
 *  - accept/rollback under every accepted length 0..B-1 with a scripted proposer, the
 *    verify logits of every cycle equal plain decoding's at that position;
 *  - rejection sampling keeps the target's distribution (chi-square, p > 0.01);
 *  - the §1.12 statistics accumulator vector.
 */
#include "golden_util.h"
#include "../src/gguf/gguf.h"
#include "../src/model/model.h"
#include "../src/quant/quant.h"
#include "../src/runtime/dflash.h"
#include "../src/runtime/kv.h"
#include "../src/runtime/session.h"

#include <math.h>
#include <unistd.h>

#ifndef SEED_BASE
#define SEED_BASE 50000   /* per-sample seeds SEED_BASE + k */
#endif

/* ---- the upstream drafter's logits --------------------------------------- */

static void test_draft_parity(void)
{
    struct glim_model *t = g_load(testdata("glimmer-tiny/glimmer-tiny-F32.gguf"), GLIM_KERNELS_REF);
    CHECK(t != NULL);
    if (!t)
        return;
    struct glim_model *d = NULL;
    struct glim_err err = {0};
    CHECK_EQ(glim_draft_load(t, testdata("glimmer-tiny/dflash/glimmer-tiny-dflash-BF16.gguf"), &d, &err), 0);
    size_t n_h = 0, n_b1 = 0, n_b2 = 0;
    float *hid = g_read_f32(testdata("glimmer-tiny/dflash/target_hidden.f32"), &n_h);
    float *b1 = g_read_f32(testdata("glimmer-tiny/dflash/block1.logits.f32"), &n_b1);
    float *b2 = g_read_f32(testdata("glimmer-tiny/dflash/block2.logits.f32"), &n_b2);
    struct kv_cache *kv = NULL;
    if (!d || !hid || !b1 || !b2 || n_h != 84 * 512 || n_b1 != 8 * 512 || n_b2 != 8 * 512) {
        CHECK(0);
        goto done;
    }
    CHECK_EQ(d->hp.n_target_layers, 2);
    CHECK_EQ(d->hp.block_size, 8);
    CHECK_EQ(kv_cache_new(d, 256, 16, 16, GLIM_TYPE_F32, &kv, &err), 0);
    void *scratch = d->be->i->alloc(d->be, dflash_scratch_bytes(d, 16));
    float logits[8 * 512];
    /* context rows 0..79 in chunks of 16, then block [507, mask x 7] at 80..87 */
    for (int p = 0; p < 80; p += 16)
        CHECK_EQ(dflash_inject(d, kv, hid + (size_t)p * 512, false, 16, p, scratch, &err), 0);
    int32_t blk[8] = {507, 0, 0, 0, 0, 0, 0, 0};
    CHECK_EQ(dflash_draft(d, kv, blk, 8, 80, logits, NULL, scratch, &err), 0);
    double e1 = g_maxabs(logits, b1, 8 * 512);
    /* then rows 80..83 and block [511, mask x 7] at 84..91 */
    CHECK_EQ(dflash_inject(d, kv, hid + (size_t)80 * 512, false, 4, 80, scratch, &err), 0);
    blk[0] = 511;
    CHECK_EQ(dflash_draft(d, kv, blk, 8, 84, logits, NULL, scratch, &err), 0);
    double e2 = g_maxabs(logits, b2, 8 * 512);
    printf("  draft block1 maxabs %.3g, block2 maxabs %.3g\n", e1, e2);
    CHECK(e1 <= 1e-3);
    CHECK(e2 <= 1e-3);
    d->be->i->release(d->be, scratch);
done:
    kv_cache_free(kv);
    free(hid);
    free(b1);
    free(b2);
    glim_model_free(d);
    glim_model_free(t);
}

/* ---- a random drafter for muse-glimmer-tiny (E 64, vocab 256) ------------ */

static float rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((float)(*s >> 40) / (float)(1 << 24) - 0.5f) * 3.4641f;   /* unit variance */
}

static int add_f32(struct gguf_writer *w, const char *name, int64_t k, int64_t n, float scale, float bias,
                   uint64_t *seed)
{
    int64_t cnt = k * (n ? n : 1);
    float *x = malloc(sizeof(float) * cnt);
    for (int64_t i = 0; i < cnt; i++)
        x[i] = bias + scale * rnd(seed);
    int64_t ne[2] = {k, n};
    int rc = gguf_writer_add_tensor(w, name, GLIM_TYPE_F32, n ? 2 : 1, ne, x, sizeof(float) * cnt, true);
    free(x);
    return rc;
}

static const char *write_drafter(void)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/glim-test-drafter-%d.gguf", (int)getpid());
    struct gguf_writer *w = gguf_writer_new();
    uint64_t seed = 4242;
    const int E = 64, L = 2, H = 4, Hkv = 2, D = 16, F = 64;
    gguf_writer_add_str(w, "general.architecture", "dflash");
    gguf_writer_add_u32(w, "dflash.embedding_length", E);
    gguf_writer_add_u32(w, "dflash.block_count", L);
    gguf_writer_add_u32(w, "dflash.context_length", 512);
    gguf_writer_add_u32(w, "dflash.feed_forward_length", F);
    gguf_writer_add_u32(w, "dflash.attention.head_count", H);
    gguf_writer_add_u32(w, "dflash.attention.head_count_kv", Hkv);
    gguf_writer_add_u32(w, "dflash.attention.key_length", D);
    gguf_writer_add_f32(w, "dflash.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_writer_add_f32(w, "dflash.rope.freq_base", 10000.0f);
    gguf_writer_add_u32(w, "dflash.block_size", 16);
    int32_t tl[2] = {1, 3};
    gguf_writer_add_arr_i32(w, "dflash.target_layers", tl, 2);
    gguf_writer_add_u32(w, "dflash.attention.sliding_window", 8);
    bool pat[2] = {true, false};
    gguf_writer_add_arr_bool(w, "dflash.attention.sliding_window_pattern", pat, 2);
    gguf_writer_add_u32(w, "tokenizer.ggml.mask_token_id", 0);
    add_f32(w, "fc.weight", 2 * E, E, 1.0f / sqrtf(2 * E), 0, &seed);
    add_f32(w, "enc.output_norm.weight", E, 0, 0.1f, 1, &seed);
    add_f32(w, "output_norm.weight", E, 0, 0.1f, 1, &seed);
    char n[64];
    for (int l = 0; l < L; l++) {
#define T(suffix, k, nn, sc, b) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix), add_f32(w, n, k, nn, sc, b, &seed))
        T("attn_norm", E, 0, 0.1f, 1);
        T("attn_q", E, H * D, 1.0f / 8, 0);
        T("attn_k", E, Hkv * D, 1.0f / 8, 0);
        T("attn_v", E, Hkv * D, 1.0f / 8, 0);
        T("attn_output", H * D, E, 1.0f / 8, 0);
        T("attn_q_norm", D, 0, 0.1f, 1);
        T("attn_k_norm", D, 0, 0.1f, 1);
        T("ffn_norm", E, 0, 0.1f, 1);
        T("ffn_gate", E, F, 1.0f / 8, 0);
        T("ffn_up", E, F, 1.0f / 8, 0);
        T("ffn_down", F, E, 1.0f / 8, 0);
#undef T
    }
    struct glim_err err = {0};
    int rc = gguf_writer_write(w, path, NULL, NULL, &err);
    gguf_writer_free(w);
    if (rc)
        fprintf(stderr, "write drafter: %s\n", err.msg);
    return rc ? NULL : path;
}

struct fixture {
    struct glim_model *t, *d;
    int32_t prompt[12];
};

static int fixture_open(struct fixture *f, int kernels)
{
    f->t = g_load(testdata("muse-glimmer-tiny/muse-glimmer-tiny.gguf"), kernels);
    const char *dp = write_drafter();
    struct glim_err err = {0};
    f->d = NULL;
    if (!f->t || !dp || glim_draft_load(f->t, dp, &f->d, &err) != GLIM_OK) {
        fprintf(stderr, "drafter: %s\n", err.msg);
        return -1;
    }
    unlink(dp);
    for (int i = 0; i < 12; i++)
        f->prompt[i] = (i * 53 + 7) % 256;
    return 0;
}

static void fixture_close(struct fixture *f)
{
    glim_model_free(f->d);
    glim_model_free(f->t);
}

static struct glim_session *long_session(struct glim_model *m)
{
    struct glim_session_params sp;
    glim_session_params_init(&sp);
    sp.n_ctx = 300;   /* past the model's 128: global layers are NoPE, sliding ones bounded */
    sp.kv_type = GLIM_KV_F32;
    struct glim_session *s = NULL;
    struct glim_err err = {0};
    if (glim_session_new(m, &sp, &s, &err))
        fprintf(stderr, "session: %s\n", err.msg);
    return s;
}

/* plain greedy: n_gen ids and the logits row that chose each */
static void plain_greedy(struct glim_model *m, const int32_t *prompt, int n, int n_gen, int32_t *ids,
                         float *rows)
{
    struct glim_session *s = long_session(m);
    struct glim_err err = {0};
    float lg[256];
    CHECK_EQ(glim_session_eval(s, prompt, n, lg, 1, &err), 0);
    for (int k = 0; k < n_gen; k++) {
        ids[k] = g_argmax(lg, 256);
        if (rows)
            memcpy(rows + (size_t)k * 256, lg, sizeof lg);
        if (k + 1 < n_gen)
            CHECK_EQ(glim_session_eval(s, &ids[k], 1, lg, 1, &err), 0);
    }
    glim_session_free(s);
}

static void test_lossless_greedy(void)
{
    struct fixture f;
    CHECK_EQ(fixture_open(&f, GLIM_KERNELS_AUTO), 0);
    if (!f.d) {
        fixture_close(&f);
        return;
    }
    enum { NG = 256 };
    int32_t want[NG], got[NG];
    plain_greedy(f.t, f.prompt, 12, NG, want, NULL);
    const int Bs[] = {2, 4, 8, 16};
    for (int b = 0; b < 4; b++) {
        struct glim_session *s = long_session(f.t);
        struct dflash_params p;
        dflash_params_init(&p);
        p.block_length = Bs[b];
        struct dflash *df = NULL;
        struct glim_err err = {0};
        CHECK_EQ(dflash_new(f.t, f.d, s, &p, &df, &err), 0);
        CHECK_EQ(dflash_prefill(df, f.prompt, 12, &err), 0);
        int n = 0;
        bool eos = false;
        while (n < NG && !eos && dflash_next(df, &got[n], &eos, &err) == GLIM_OK)
            n++;
        int same = 0;
        while (same < n && got[same] == want[same])
            same++;
        const struct dflash_stats *st = dflash_get_stats(df);
        printf("  B=%2d: %d/%d ids equal to plain greedy, %lld cycles\n", Bs[b], same, NG,
               (long long)st->cycles);
        CHECK_EQ(n, NG);
        CHECK_EQ(same, NG);
        dflash_free(df);
        glim_session_free(s);
    }
    fixture_close(&f);
}

/* dflash_prefill_from: a second prompt that shares a prefix with what the struct already
 * ran (prompt + part of its reply + new tokens) resumes from that prefix and decodes what
 * plain greedy decodes on the whole second prompt. A prefix longer than the draft context
 * (the target ran on without the draft) is refused with GLIM_ERANGE and changes nothing. */
static void test_resume(void)
{
    struct fixture f;
    CHECK_EQ(fixture_open(&f, GLIM_KERNELS_AUTO), 0);
    if (!f.d) {
        fixture_close(&f);
        return;
    }
    enum { NG = 24, NEW = 5 };
    int32_t first[NG], second[12 + 10 + NEW], want[NG], got[NG];
    plain_greedy(f.t, f.prompt, 12, NG, first, NULL);
    memcpy(second, f.prompt, sizeof f.prompt);
    memcpy(second + 12, first, 10 * sizeof *first);
    for (int i = 0; i < NEW; i++)
        second[22 + i] = (i * 31 + 3) % 256;
    int n2 = 22 + NEW;
    plain_greedy(f.t, second, n2, NG, want, NULL);

    struct glim_session *s = long_session(f.t);
    struct dflash_params p;
    dflash_params_init(&p);
    p.block_length = 4;
    p.logits_on_host = true;   /* the draft logits are compared below */
    struct dflash *df = NULL;
    struct glim_err err = {0};
    CHECK_EQ(dflash_new(f.t, f.d, s, &p, &df, &err), 0);
    CHECK_EQ(dflash_prefill(df, f.prompt, 12, &err), 0);
    /* the target runs on without the draft: its context does not reach position 15 */
    float lg[256];
    CHECK_EQ(glim_session_eval(s, first, 3, lg, 1, &err), 0);
    CHECK_EQ(dflash_prefill_from(df, second, n2, 15, &err), GLIM_ERANGE);
    CHECK_EQ(glim_session_pos(s), 15);   /* refused: nothing changed */
    CHECK_EQ(glim_session_truncate(s, 12, &err), 0);
    int n = 0;
    bool eos = false;
    while (n < 20 && !eos && dflash_next(df, &got[n], &eos, &err) == GLIM_OK)
        n++;
    CHECK_EQ(n, 20);
    CHECK(memcmp(got, first, 20 * sizeof *got) == 0);
    CHECK(dflash_pos(df) >= 22);

    /* resume from 22: prompt + the first 10 reply tokens are kept */
    CHECK_EQ(glim_session_truncate(s, 22, &err), 0);
    struct sampler_params sp;
    sampler_params_init(&sp);
    CHECK_EQ(dflash_set_sampling(df, &sp, &err), 0);
    CHECK_EQ(dflash_get_stats(df)->cycles, 0);
    CHECK_EQ(dflash_prefill_from(df, second, n2, 22, &err), 0);
    CHECK_EQ(glim_session_pos(s), n2);
    n = 0, eos = false;
    while (n < NG && !eos && dflash_next(df, &got[n], &eos, &err) == GLIM_OK)
        n++;
    /* the draft saw the same context as after a fresh prefill of the second prompt: its
     * first block's logits agree (up to the rounding of taps computed in other batches) */
    struct glim_session *s2 = long_session(f.t);
    struct dflash *fresh = NULL;
    int32_t one;
    CHECK_EQ(dflash_new(f.t, f.d, s2, &p, &fresh, &err), 0);
    CHECK_EQ(dflash_prefill(fresh, second, n2, &err), 0);
    CHECK_EQ(dflash_next(fresh, &one, &eos, &err), 0);
    CHECK_EQ(one, want[0]);
    float worst = 0.0f, scale = 0.0f;
    CHECK_EQ(dflash_set_sampling(df, &sp, &err), 0);   /* the same first cycle again on df */
    CHECK_EQ(glim_session_truncate(s, 22, &err), 0);
    CHECK_EQ(dflash_prefill_from(df, second, n2, 22, &err), 0);
    CHECK_EQ(dflash_next(df, &one, &eos, &err), 0);
    for (int r = 1; r < 4; r++)
        for (int v = 0; v < 256; v++) {
            float a = dflash_draft_logits(df, r)[v], b = dflash_draft_logits(fresh, r)[v];
            worst = fmaxf(worst, fabsf(a - b));
            scale = fmaxf(scale, fabsf(b));
        }
    printf("  draft logits after resume vs fresh prefill: max |diff| %.3g (max |logit| %.3g)\n", worst, scale);
    CHECK(scale > 0.0f && worst <= 1e-3f * scale);
    dflash_free(fresh);
    glim_session_free(s2);
    int same = 0;
    while (same < n && got[same] == want[same])
        same++;
    printf("  resumed at 22 of %d: %d/%d ids equal to plain greedy\n", n2, same, NG);
    CHECK_EQ(same, NG);
    CHECK_EQ(dflash_prefill_from(df, second, 22, 22, &err), GLIM_EINVAL);   /* nothing after the prefix */
    dflash_free(df);
    glim_session_free(s);
    fixture_close(&f);
}

/* Scripted proposer: the true greedy continuation with a mistake at draft slot `wrong`. */
struct script {
    const int32_t *truth;   /* greedy ids; truth[k] is the token at position n_prompt + k */
    int n_prompt, wrong;
};

static void scripted(void *ud, int64_t pos, int32_t *cand, int n)
{
    const struct script *s = ud;
    for (int i = 1; i < n; i++) {
        int64_t k = pos + i - s->n_prompt;
        cand[i] = s->truth[k];
        if (i == s->wrong)
            cand[i] = (cand[i] + 1) % 256;
    }
}

static void test_accept_rollback(void)
{
    struct fixture f;
    CHECK_EQ(fixture_open(&f, GLIM_KERNELS_REF), 0);
    if (!f.d) {
        fixture_close(&f);
        return;
    }
    enum { NG = 80, B = 8 };
    int32_t want[NG + B], got[NG];
    float *rows = malloc(sizeof(float) * 256 * (NG + B));
    plain_greedy(f.t, f.prompt, 12, NG + B, want, rows);
    for (int wrong = 1; wrong <= B; wrong++) {   /* accepted length wrong-1 (B: all accepted) */
        struct glim_session *s = long_session(f.t);
        struct dflash_params p;
        dflash_params_init(&p);
        p.block_length = B;
        p.logits_on_host = true;   /* verify row 0's logits are compared below */
        struct dflash *df = NULL;
        struct glim_err err = {0};
        CHECK_EQ(dflash_new(f.t, f.d, s, &p, &df, &err), 0);
        struct script sc = {want, 12, wrong};
        dflash_set_proposer(df, scripted, &sc);
        CHECK_EQ(dflash_prefill(df, f.prompt, 12, &err), 0);
        int n = 0;
        bool eos = false;
        double worst = 0;
        int64_t last_cycles = 0;
        while (n < NG && !eos) {
            CHECK_EQ(dflash_next(df, &got[n], &eos, &err), 0);
            const struct dflash_stats *st = dflash_get_stats(df);
            if (st->cycles != last_cycles) {   /* a cycle just ran: its verify row 0 sits at position 12+n */
                last_cycles = st->cycles;
                double dd = g_maxabs(dflash_verify_logits(df, 0), rows + (size_t)(n + 1) * 256, 256);
                if (dd > worst)
                    worst = dd;
            }
            n++;
        }
        const struct dflash_stats *st = dflash_get_stats(df);
        int64_t att = 0, acc = 0;
        for (int i = 0; i < st->n_rows; i++)
            att += st->attempts_by_row[i], acc += st->accepts_by_row[i];
        double mean_acc = st->speculative_cycles ? (double)acc / st->speculative_cycles : 0;
        int same = 0;
        while (same < NG && got[same] == want[same])
            same++;
        printf("  mistake at slot %d: %d/%d ids equal, mean accepted %.2f, verify logits vs plain %.2g\n",
               wrong, same, NG, mean_acc, worst);
        CHECK_EQ(same, NG);
        CHECK(worst <= 1e-5);
        /* every cycle accepts exactly wrong-1 drafts (all B-1 when the mistake is past the block) */
        int expect = wrong < B ? wrong - 1 : B - 1;
        CHECK_NEAR(mean_acc, expect, 0.35);
        dflash_free(df);
        glim_session_free(s);
    }
    free(rows);
    fixture_close(&f);
}

/* Upper quantile of chi-square (Wilson–Hilferty); z = 2.326 for p = 0.01. */
static double chi2_crit(int df)
{
    double z = 2.326, k = df;
    double t = 1 - 2 / (9 * k) + z * sqrt(2 / (9 * k));
    return k * t * t * t;
}

static void chi_square_case(struct fixture *f, bool draft_argmax, bool oracle, float temp)
{
    enum { NS = 1500, V = 256 };
    struct glim_session *s = long_session(f->t);
    struct dflash_params p;
    dflash_params_init(&p);
    p.block_length = 4;
    p.draft_argmax = draft_argmax;
    p.sp.temperature = temp;
    p.sp.top_k = 0, p.sp.top_p = 1.0f, p.sp.min_p = 0.0f;
    p.sp.seed = 1;
    struct dflash *df = NULL;
    struct glim_err err = {0};
    CHECK_EQ(dflash_new(f->t, f->d, s, &p, &df, &err), 0);
    /* target distribution after prompt[0..11] with the same filter */
    float lg[V], probs[V];
    struct glim_session *ps = long_session(f->t);
    CHECK_EQ(glim_session_eval(ps, f->prompt, 12, lg, 1, &err), 0);
    glim_session_free(ps);
    struct sampler_scratch *sc = sampler_scratch_new(V);
    sampler_probs(sc, lg, V, &p.sp, probs);
    sampler_scratch_free(sc);
    /* an oracle proposer offers the target's most likely token: accepted often */
    int32_t truth[64];
    for (int i = 0; i < 64; i++)
        truth[i] = g_argmax(lg, V);
    struct script scr = {truth, 12, -1};
    if (oracle)
        dflash_set_proposer(df, scripted, &scr);
    CHECK_EQ(dflash_prefill(df, f->prompt, 11, &err), 0);
    long counts[V] = {0};
    for (int k = 0; k < NS; k++) {
        /* pending = prompt[11] at position 11; the next committed token is what we count */
        CHECK_EQ(dflash_reset_to(df, 11, f->prompt[11], SEED_BASE + k, &err), 0);
        int32_t t0, t1;
        bool eos;
        CHECK_EQ(dflash_next(df, &t0, &eos, &err), 0);
        CHECK_EQ(t0, f->prompt[11]);
        CHECK_EQ(dflash_next(df, &t1, &eos, &err), 0);
        if (t1 >= 0 && t1 < V)
            counts[t1]++;
    }
    /* merge bins with expected count < 5 */
    double chi = 0, rest_e = 0, rest_o = 0;
    int df_n = -1;
    for (int i = 0; i < V; i++) {
        double e = probs[i] * NS;
        if (e < 5) {
            rest_e += e, rest_o += counts[i];
            continue;
        }
        chi += (counts[i] - e) * (counts[i] - e) / e;
        df_n++;
    }
    if (rest_e > 0) {
        chi += (rest_o - rest_e) * (rest_o - rest_e) / GLIM_MAX(rest_e, 1e-9);
        df_n++;
    }
    const struct dflash_stats *st = dflash_get_stats(df);
    printf("  T=%.1f %s%s: chi2 %.1f (df %d, crit %.1f), row-0 accepts %lld/%lld\n", temp,
           draft_argmax ? "argmax proposals" : "sampled proposals", oracle ? " (oracle)" : "", chi, df_n,
           chi2_crit(df_n), (long long)st->accepts_by_row[0], (long long)st->attempts_by_row[0]);
    CHECK(df_n >= 3);
    CHECK(chi < chi2_crit(df_n));
    dflash_free(df);
    glim_session_free(s);
}

static void test_rejection_sampling_distribution(void)
{
    struct fixture f;
    CHECK_EQ(fixture_open(&f, GLIM_KERNELS_AUTO), 0);
    if (!f.d) {
        fixture_close(&f);
        return;
    }
    chi_square_case(&f, true, false, 1.5f);
    chi_square_case(&f, false, false, 1.5f);
    chi_square_case(&f, true, true, 1.0f);
    fixture_close(&f);
}

static void test_stats_vector(void)
{
    struct dflash_stats acc = {0}, a = {0}, b = {0}, c = {0};
    a.cycles = 1, a.speculative_cycles = 1;
    a.draft_execute_ms = 1, a.draft_logits_copy_ms = 2, a.draft_sampling_ms = 3, a.target_execute_ms = 4;
    a.target_logits_copy_ms = 5, a.target_hidden_copy_ms = 6, a.accept_correction_ms = 7;
    a.state_commit_ms = 8, a.total_cycle_ms = 40, a.n_rows = 3;
    a.attempts_by_row[0] = a.attempts_by_row[1] = a.attempts_by_row[2] = 1;
    a.accepts_by_row[0] = a.accepts_by_row[1] = 1;
    b.cycles = 1, b.speculative_cycles = 1, b.n_rows = 1, b.attempts_by_row[0] = 1;
    c.cycles = 1, c.target_only_cycles = 1, c.target_execute_ms = 10, c.target_logits_copy_ms = 11;
    c.target_hidden_copy_ms = 12, c.accept_correction_ms = 13, c.state_commit_ms = 14, c.total_cycle_ms = 65;
    dflash_stats_add(&acc, &a);
    dflash_stats_add(&acc, &b);
    dflash_stats_add(&acc, &c);
    CHECK_EQ(acc.cycles, 3);
    CHECK_EQ(acc.speculative_cycles, 2);
    CHECK_EQ(acc.target_only_cycles, 1);
    CHECK_NEAR(acc.target_execute_ms, 14, 1e-9);
    CHECK_NEAR(acc.target_logits_copy_ms, 16, 1e-9);
    CHECK_NEAR(acc.target_hidden_copy_ms, 18, 1e-9);
    CHECK_NEAR(acc.accept_correction_ms, 20, 1e-9);
    CHECK_NEAR(acc.state_commit_ms, 22, 1e-9);
    CHECK_NEAR(acc.total_cycle_ms, 105, 1e-9);
    CHECK_EQ(acc.n_rows, 3);
    CHECK_EQ(acc.attempts_by_row[0], 2);
    CHECK_EQ(acc.attempts_by_row[1], 1);
    CHECK_EQ(acc.accepts_by_row[2], 0);
    char buf[2048] = {0};
    FILE *fm = fmemopen(buf, sizeof buf - 1, "w");
    dflash_stats_print(&acc, fm);
    fclose(fm);
    const char *head = "DFlashDecodeTiming {\"cycles\":3,\"speculative_cycles\":2,";
    CHECK(strncmp(buf, head, strlen(head)) == 0);
    CHECK(strstr(buf, "\"draft_attempts_by_row\":[2,1,1],\"draft_accepts_by_row\":[1,1,0]}") != NULL);
    CHECK(strstr(buf, "\"total_cycle_ms\":105.000,\"avg_cycle_ms\":35.000") != NULL);
    CHECK(strchr(strchr(buf, '{'), ' ') == NULL);   /* no spaces inside the JSON */
}

int main(void)
{
    RUN(test_stats_vector);
    RUN(test_draft_parity);
    RUN(test_lossless_greedy);
    RUN(test_resume);
    RUN(test_accept_rollback);
    RUN(test_rejection_sampling_distribution);
    return DONE();
}
