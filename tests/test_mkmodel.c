/*
 * test_mkmodel.c — synthetic models (src/synth) and the bandwidth probe.
 *
 * 1. the muse-glimmer-30b preset plans the published Q4_K_M file: 731
 *    tensors, the model.md §3.3 per-tensor types, 16.92 GB of tensor data;
 * 2. a tiny model of every --type round-trips through the GGUF reader with
 *    the requested names, shapes, types and arch keys;
 * 3. the data: deterministic in the seed (and independent of thread count),
 *    with the promised statistics (norms near 1, matrices 1/sqrt(fan_in));
 * 4. bad shapes fail with a message naming the tensor;
 * 5. membw measures something positive on a small buffer;
 * 6. dflash: the dflash-muse-glimmer-30b preset plans runtime.md §1.2's 58
 *    tensors (Q4_K, no token_embd/output); the default tap rule; a drafter
 *    shaped --like muse-glimmer-tiny loads with glim_draft_load, with and
 *    without a sliding window.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "glim.h"
#include "gguf/gguf.h"
#include "harness.h"
#include "model/model.h"
#include "quant/quant.h"
#include "synth/membw.h"
#include "synth/synth.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) { return test_path(tmpdir, name); }

static const struct synth_tensor *plan_find(const struct synth_plan *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->t[i].name, name))
            return &p->t[i];
    return NULL;
}

static void test_preset_30b_plan(void)
{
    struct synth_hparams hp;
    struct synth_plan p = {0};
    CHECK_EQ(synth_preset("muse-glimmer-30b", &hp, NULL), GLIM_OK);
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("Q4_K_M"), &p, NULL), GLIM_OK);
    CHECK_EQ(p.n, 3 + 52 * 14);
    /* model.md §3.3: "that mix gives 16.92 GB (15.76 GiB)" */
    CHECK_NEAR((double)p.total_bytes / 1e9, 16.92, 16.92 * 0.03);
    CHECK_EQ((long long)p.total_bytes, 16922177792LL);
    CHECK_EQ(plan_find(&p, "token_embd.weight")->type, GLIM_TYPE_Q4_K);
    CHECK_EQ(plan_find(&p, "output.weight")->type, GLIM_TYPE_Q6_K);
    CHECK_EQ(plan_find(&p, "output_norm.weight")->type, GLIM_TYPE_F32);
    CHECK_EQ(plan_find(&p, "token_embd.weight")->ne[1], 202048);
    CHECK_EQ(plan_find(&p, "blk.0.attn_q.weight")->ne[1], 4096);
    CHECK_EQ(plan_find(&p, "blk.0.attn_k.weight")->ne[1], 256);
    CHECK_EQ(plan_find(&p, "blk.0.ffn_down.weight")->ne[0], 19968);
    CHECK_NEAR(plan_find(&p, "blk.9.attn_q_norm.weight")->mean, 3.87, 1e-4);
    /* layers 0-5, 8, 11, ..., 44, 45-51 get Q6_K attn_v and ffn_down: 26 layers */
    int n_q6 = 0;
    for (int il = 0; il < 52; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", il);
        uint32_t tv = plan_find(&p, name)->type;
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
        CHECK_EQ(plan_find(&p, name)->type, tv);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
        CHECK_EQ(plan_find(&p, name)->type, GLIM_TYPE_Q4_K);
        n_q6 += tv == GLIM_TYPE_Q6_K;
    }
    CHECK_EQ(n_q6, 26);
    CHECK_EQ(plan_find(&p, "blk.6.attn_v.weight")->type, GLIM_TYPE_Q4_K);
    CHECK_EQ(plan_find(&p, "blk.8.attn_v.weight")->type, GLIM_TYPE_Q6_K);
    CHECK_EQ(plan_find(&p, "blk.45.attn_v.weight")->type, GLIM_TYPE_Q6_K);
    synth_plan_clear(&p);
}

static void tiny_hparams(struct synth_hparams *hp, enum synth_arch arch)
{
    synth_hparams_default(arch, hp);
    hp->n_embd = 256;
    hp->n_layer = 8;
    hp->n_head = 4;
    hp->n_head_kv = 2;
    hp->head_dim = 64;
    hp->n_ff = 512;
    hp->n_vocab = 300;
    hp->n_swa = 16;
}

static int64_t key_int(const struct gguf_file *f, const char *key)
{
    int64_t v = -1;
    gguf_get_i64(f, key, &v, NULL);
    return v;
}

/* write, reopen, compare every tensor with the plan */
static void roundtrip(enum synth_arch arch, const char *type)
{
    struct synth_hparams hp;
    struct synth_plan p = {0};
    struct glim_err err = {0};
    const struct synth_ftype *ft = synth_ftype_find(type);
    tiny_hparams(&hp, arch);
    CHECK(ft != NULL);
    CHECK_EQ(synth_plan_build(&hp, ft, &p, &err), GLIM_OK);
    const char *path = tmp_path("tiny.gguf");
    struct synth_write_opts wo = {.seed = 7, .n_threads = 2};
    CHECK_EQ(synth_write(path, &hp, ft, &p, &wo, &err), GLIM_OK);
    struct gguf_file *f = NULL;
    CHECK_EQ(gguf_open(path, &f, &err), GLIM_OK);
    if (!f) {
        fprintf(stderr, "%s %s: %s\n", synth_arch_name(arch), type, err.msg);
        synth_plan_clear(&p);
        return;
    }
    CHECK_EQ(gguf_tensor_count(f), p.n);
    for (int i = 0; i < p.n; i++) {
        const struct gguf_tensor *t = gguf_tensor_find(f, p.t[i].name);
        CHECK(t != NULL);
        if (!t)
            continue;
        CHECK_EQ(t->type, p.t[i].type);
        CHECK_EQ(t->n_dims, p.t[i].n_dims);
        CHECK_EQ(t->ne[0], p.t[i].ne[0]);
        CHECK_EQ(t->ne[1], p.t[i].ne[1]);
        CHECK_EQ((long long)t->nbytes, (long long)p.t[i].nbytes);
    }
    char key[96];
    const char *an = synth_arch_name(arch);
    snprintf(key, sizeof key, "%s.embedding_length", an);
    CHECK_EQ(key_int(f, key), 256);
    snprintf(key, sizeof key, "%s.block_count", an);
    CHECK_EQ(key_int(f, key), 8);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", an);
    CHECK_EQ(key_int(f, key), 2);
    CHECK_EQ(key_int(f, "general.file_type"), ft->file_type);
    if (arch == SYNTH_ARCH_MUSE_GLIMMER) {
        const struct gguf_kv *kv = gguf_kv_find(f, "muse-glimmer.attention.sliding_window_pattern");
        CHECK(kv && kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_BOOL && kv->arr_n == 8);
        for (uint64_t il = 0; kv && il < kv->arr_n; il++) {
            int64_t v = -1;
            gguf_arr_int(kv, il, &v);
            CHECK_EQ(v, il % 4 != 3);
        }
        CHECK(gguf_tensor_find(f, "blk.7.post_ffw_norm.weight") != NULL);
    } else {
        CHECK(gguf_tensor_find(f, "blk.7.attn_gate.weight") == NULL);
    }
    gguf_close(f);
    unlink(path);
    synth_plan_clear(&p);
}

static void test_roundtrip_every_type(void)
{
    const char *types[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        roundtrip(SYNTH_ARCH_MUSE_GLIMMER, types[i]);
    roundtrip(SYNTH_ARCH_LLAMA, "Q4_K_M");
    roundtrip(SYNTH_ARCH_LLAMA, "F16");
}

static float *fill_f32_u(const struct synth_tensor *t, uint64_t seed, int n_threads, int64_t unique_rows)
{
    float *x = malloc(t->nbytes);
    if (x && synth_tensor_fill(t, seed, n_threads, unique_rows, x, NULL)) {
        free(x);
        return NULL;
    }
    return x;
}

static float *fill_f32(const struct synth_tensor *t, uint64_t seed, int n_threads)
{
    return fill_f32_u(t, seed, n_threads, 0);
}

static void moments(const float *x, int64_t n, double *mean, double *sd)
{
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++)
        ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(ss / (double)n);
}

static void test_data_statistics_and_determinism(void)   /* and --unique-rows */
{
    struct synth_hparams hp;
    struct synth_plan p = {0};
    tiny_hparams(&hp, SYNTH_ARCH_MUSE_GLIMMER);
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("F32"), &p, NULL), GLIM_OK);
    const struct synth_tensor *ffn = plan_find(&p, "blk.0.ffn_up.weight");
    const struct synth_tensor *down = plan_find(&p, "blk.0.ffn_down.weight");
    const struct synth_tensor *norm = plan_find(&p, "blk.0.ffn_norm.weight");
    const struct synth_tensor *qn = plan_find(&p, "blk.0.attn_q_norm.weight");
    float *a = fill_f32(ffn, 42, 1), *b = fill_f32(ffn, 42, 3), *c = fill_f32(ffn, 43, 2);
    float *d = fill_f32(down, 42, 2), *n = fill_f32(norm, 42, 1), *q = fill_f32(qn, 42, 1);
    CHECK(a && b && c && d && n && q);
    if (a && b && c && d && n && q) {
        CHECK(memcmp(a, b, ffn->nbytes) == 0);   /* thread count does not matter */
        CHECK(memcmp(a, c, ffn->nbytes) != 0);   /* the seed does */
        double mean, sd;
        moments(a, ffn->ne[0] * ffn->ne[1], &mean, &sd);
        CHECK_NEAR(mean, 0, 0.01 / 16);
        CHECK_NEAR(sd, 1 / 16.0, 0.002);         /* fan_in 256 */
        moments(d, down->ne[0] * down->ne[1], &mean, &sd);
        CHECK_NEAR(sd, 1 / sqrt(512.0), 0.002);  /* fan_in 512 */
        moments(n, norm->ne[0], &mean, &sd);
        CHECK_NEAR(mean, 1.0, 0.03);
        CHECK_NEAR(sd, 0.1, 0.02);
        CHECK_NEAR(q[0], 43.7840518911 / 8, 1e-5);   /* 43.784/sqrt(64) */
        CHECK_NEAR(q[63], q[0], 0);
    }
    free(a), free(b), free(c), free(d), free(n), free(q);
    /* --unique-rows: the first rows are the full fill's, every later row repeats one of them */
    int64_t rows = ffn->ne[1], u = 3;
    size_t rb = (size_t)ffn->ne[0] * sizeof(float);
    CHECK(rows > 2 * u + 1);
    float *all = fill_f32(ffn, 7, 2), *rep = fill_f32_u(ffn, 7, 2, u);
    CHECK(all && rep);
    if (all && rep) {
        CHECK(memcmp(all, rep, (size_t)u * rb) == 0);
        for (int64_t r = u; r < rows; r++)
            CHECK(memcmp((char *)rep + (size_t)r * rb, (char *)all + (size_t)(r % u) * rb, rb) == 0);
        CHECK(memcmp((char *)all + (size_t)u * rb, (char *)all, rb) != 0);   /* the full fill does not repeat */
    }
    free(all), free(rep);
    synth_plan_clear(&p);
}

static void test_bad_shapes(void)
{
    struct synth_hparams hp;
    struct synth_plan p = {0};
    struct glim_err err = {0};
    tiny_hparams(&hp, SYNTH_ARCH_LLAMA);
    hp.n_ff = 172;   /* ffn_down rows of 172: not a multiple of 32 or 256 */
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("Q8_0"), &p, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "blk.0.ffn_down.weight") != NULL);
    CHECK(p.t == NULL);
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("F16"), &p, &err), GLIM_OK);
    synth_plan_clear(&p);
    tiny_hparams(&hp, SYNTH_ARCH_LLAMA);
    hp.n_head_kv = 3;
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("F32"), &p, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "--kv-heads") != NULL);
    CHECK(synth_ftype_find("q4_k_m") != NULL);
    CHECK(synth_ftype_find("Q3_K") == NULL);
    CHECK(synth_use_more_bits(0, 52) && !synth_use_more_bits(6, 52) && synth_use_more_bits(51, 52));
}

static void test_membw_small(void)
{
    struct membw_result r;
    CHECK_EQ(membw_measure(8u << 20, 2, 2, &r, NULL), GLIM_OK);
    CHECK(r.best_gbs > 0 && r.mean_gbs > 0 && r.mean_gbs <= r.best_gbs * 1.0000001);
    CHECK_EQ(r.n_threads, 2);
    CHECK_EQ(r.n_reps, 2);
    CHECK(r.buf_bytes > (7u << 20) && r.buf_bytes <= (8u << 20));
}

/* ---- dflash ------------------------------------------------------------- */

static void test_dflash_preset_plan(void)
{
    struct synth_hparams hp;
    struct synth_plan p = {0};
    CHECK_EQ(synth_preset("dflash-muse-glimmer-30b", &hp, NULL), GLIM_OK);
    CHECK_EQ(hp.arch, SYNTH_ARCH_DFLASH);
    CHECK_EQ(hp.n_taps, 5);
    CHECK_EQ(hp.target_layers[0], 2);
    CHECK_EQ(hp.target_layers[4], 50);
    CHECK_EQ(hp.block_size, 16);
    CHECK_EQ(hp.mask_token_id, 201818);
    CHECK_EQ(hp.n_swa, 0);
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("Q4_K"), &p, NULL), GLIM_OK);
    CHECK_EQ(p.n, 3 + 5 * 11);
    CHECK(plan_find(&p, "token_embd.weight") == NULL);
    CHECK(plan_find(&p, "output.weight") == NULL);
    const struct synth_tensor *fc = plan_find(&p, "fc.weight");
    CHECK(fc && fc->ne[0] == 5 * 6656 && fc->ne[1] == 6656 && fc->type == GLIM_TYPE_Q4_K);
    /* runtime.md §1.2 shapes ([out, in] there; GGUF ne = [in, out]) */
    struct { const char *name; int64_t ne0, ne1; uint32_t type; } want[] = {
        {"enc.output_norm.weight", 6656, 1, GLIM_TYPE_F32}, {"output_norm.weight", 6656, 1, GLIM_TYPE_F32},
        {"blk.4.attn_norm.weight", 6656, 1, GLIM_TYPE_F32}, {"blk.4.attn_q.weight", 6656, 4096, GLIM_TYPE_Q4_K},
        {"blk.4.attn_k.weight", 6656, 1024, GLIM_TYPE_Q4_K}, {"blk.4.attn_v.weight", 6656, 1024, GLIM_TYPE_Q4_K},
        {"blk.4.attn_output.weight", 4096, 6656, GLIM_TYPE_Q4_K}, {"blk.4.attn_q_norm.weight", 128, 1, GLIM_TYPE_F32},
        {"blk.4.attn_k_norm.weight", 128, 1, GLIM_TYPE_F32}, {"blk.4.ffn_norm.weight", 6656, 1, GLIM_TYPE_F32},
        {"blk.4.ffn_gate.weight", 6656, 19968, GLIM_TYPE_Q4_K}, {"blk.4.ffn_up.weight", 6656, 19968, GLIM_TYPE_Q4_K},
        {"blk.4.ffn_down.weight", 19968, 6656, GLIM_TYPE_Q4_K},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct synth_tensor *t = plan_find(&p, want[i].name);
        CHECK(t != NULL);
        bool ok = t && t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1 && t->type == want[i].type;
        if (!ok)
            fprintf(stderr, "dflash preset: %s missing or wrong shape/type\n", want[i].name);
        CHECK(ok);
    }
    /* Q4_K = 144 bytes per 256: fc + 5 x (q, k, v, o, gate, up, down) + F32 norms */
    long long q4 = 144 / 256.0 * 6656, layer = q4 * (4096 + 1024 + 1024 + 19968 * 2) + 144 / 256.0 * 4096 * 6656 +
                                               144 / 256.0 * 19968 * 6656 + 4 * (2 * 6656 + 2 * 128);
    CHECK_EQ((long long)p.total_bytes, q4 * 5 * 6656 + 2 * 4 * 6656 + 5 * layer);
    CHECK_EQ((long long)p.total_bytes, 1438020608LL);
    synth_plan_clear(&p);
    hp.target_layers[2] = -1;
    struct glim_err err = {0};
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find("Q4_K"), &p, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "--target-layers[2]") != NULL);
}

static void test_dflash_tap_rule(void)
{
    int t[SYNTH_MAX_TAPS];
    CHECK_EQ(synth_dflash_taps(52, 5, t), 5);   /* round((k + 0.5) * 52 / 5) */
    CHECK(t[0] == 5 && t[1] == 16 && t[2] == 26 && t[3] == 36 && t[4] == 47);
    CHECK_EQ(synth_dflash_taps(4, 5, t), 3);    /* min(5, L-1) taps: distinct, in 1..L-1 */
    CHECK(t[0] == 1 && t[1] == 2 && t[2] == 3);
    CHECK_EQ(synth_dflash_taps(2, 5, t), 1);
    CHECK_EQ(t[0], 1);
    CHECK_EQ(synth_dflash_taps(1, 5, t), 1);    /* only the embedding can be tapped */
    CHECK_EQ(t[0], 0);
}

#define TINY GLIM_TESTDATA "/muse-glimmer-tiny/muse-glimmer-tiny.gguf"

/* write a drafter for muse-glimmer-tiny and load it next to the target */
static void dflash_like_roundtrip(const char *type, int n_swa)
{
    struct gguf_file *tf = NULL;
    struct glim_model *target = NULL, *d = NULL;
    struct glim_err err = {0};
    struct synth_hparams hp;
    struct synth_plan p = {0};
    uint32_t mtype = 0;
    const char *path = tmp_path("draft.gguf");
    CHECK_EQ(gguf_open(TINY, &tf, &err), GLIM_OK);
    if (!tf)
        return;
    CHECK_EQ(synth_dflash_like(tf, &hp, &mtype, &err), GLIM_OK);
    CHECK_EQ(mtype, GLIM_TYPE_F32);
    CHECK(hp.n_embd == 64 && hp.n_head == 4 && hp.n_head_kv == 1 && hp.head_dim == 32 && hp.n_ff == 128);
    CHECK(hp.n_vocab == 256 && hp.mask_token_id == 255 && hp.n_target_layer == 4 && hp.n_layer == 5);
    CHECK(hp.n_taps == 3 && hp.target_layers[0] == 1 && hp.target_layers[2] == 3);
    hp.n_layer = 2, hp.block_size = 8, hp.n_taps = 2, hp.target_layers[1] = 3, hp.n_swa = n_swa;
    struct synth_write_opts wo = {.seed = 5, .n_threads = 2, .vocab = tf};
    CHECK_EQ(synth_plan_build(&hp, synth_ftype_find(type), &p, &err), GLIM_OK);
    CHECK_EQ(synth_write(path, &hp, synth_ftype_find(type), &p, &wo, &err), GLIM_OK);
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    CHECK_EQ(glim_model_load(TINY, &mp, &target, &err), GLIM_OK);
    if (target)
        CHECK_EQ(glim_draft_load(target, path, &d, &err), GLIM_OK);
    if (!d) {
        fprintf(stderr, "dflash %s: %s\n", type, err.msg);
        goto done;
    }
    CHECK_EQ(d->hp.n_layer, 2);
    CHECK_EQ(d->hp.n_target_layers, 2);
    CHECK(d->hp.target_layers[0] == 1 && d->hp.target_layers[1] == 3);
    CHECK_EQ(d->hp.block_size, 8);
    CHECK_EQ(d->hp.mask_token_id, 255);
    CHECK_EQ(d->hp.n_head_kv, 1);
    CHECK_EQ(d->hp.n_swa, n_swa);
    CHECK_EQ(d->hp.is_swa[0], n_swa > 0);   /* [true, ..., false]: the last layer is global */
    CHECK_EQ(d->hp.is_swa[1], 0);
    CHECK(!d->owns_embd && !d->owns_output);
    const struct gguf_kv *tl = gguf_kv_find(d->gguf, "dflash.target_layers");
    CHECK(tl && tl->arr_type == GGUF_VT_INT32);
done:
    glim_model_free(d);
    glim_model_free(target);
    gguf_close(tf);
    synth_plan_clear(&p);
    unlink(path);
}

static void test_dflash_like_loads(void)
{
    dflash_like_roundtrip("F32", 0);
    dflash_like_roundtrip("Q8_0", 4);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/glim-test-mkmodel-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_preset_30b_plan);
    RUN(test_roundtrip_every_type);
    RUN(test_data_statistics_and_determinism);
    RUN(test_bad_shapes);
    RUN(test_membw_small);
    RUN(test_dflash_preset_plan);
    RUN(test_dflash_tap_rule);
    RUN(test_dflash_like_loads);
    rmdir(tmpdir);
    return DONE();
}
