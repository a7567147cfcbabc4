/*
 * test_gguf.c — the GGUF reader and writer.
 *
 * 1. every real GGUF in the shared test data opens, with values checked
 *    against what their READMEs and PROVENANCE.md say;
 * 2. writer round trips: every value type, array type and several tensor
 *    types; stories260K copied through the writer is byte-identical;
 * 3. malformed files built in memory (gguf_fixtures.h): each named case must
 *    fail with the expected code and a message that names the file and the
 *    field; plus truncation at every offset, byte flips and failed allocations.
 */
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "gguf/gguf.h"
#include "gguf_fixtures.h"
#include "harness.h"
#include "quant/quant.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) { return test_path(tmpdir, name); }

static bool str_is(const char *p, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* llama.cpp lays tensors out in order, each padded to the alignment, and
 * ends the file after the last one's padding (or exactly at its end). This
 * checks our byte sizes for every type against the producer's layout. */
static void check_layout(const struct gguf_file *f)
{
    size_t a = gguf_alignment(f), expect = 0;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        CHECK_EQ(t->offset, expect);
        CHECK_EQ(t->offset % a, 0);
        CHECK(t->data == (const uint8_t *)gguf_tensor_find(f, t->name)->data);
        expect = align_up(t->offset + t->nbytes, a);
    }
    if (gguf_tensor_count(f) > 0) {
        const struct gguf_tensor *last = gguf_tensor_at(f, gguf_tensor_count(f) - 1);
        size_t end = gguf_data_offset(f) + last->offset + last->nbytes;
        CHECK(gguf_file_size(f) == end || gguf_file_size(f) == align_up(end, a));
    }
    if (gguf_tensor_count(f) > 0)   /* a vocab-only file may end unpadded: data offset = file size */
        CHECK_EQ(gguf_data_offset(f) % a, 0);
}

static int64_t tokens_count(const struct gguf_file *f)
{
    const struct gguf_kv *kv = NULL;
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", &kv, NULL) != GLIM_OK)
        return -1;
    return kv->arr_type == GGUF_VT_STRING ? (int64_t)kv->arr_n : -2;
}

/* ---- 1. real files ------------------------------------------------------ */

static void test_real_files(void)
{
    /* counts from PROVENANCE.md and the folder READMEs (-1 = no vocab) */
    static const struct { const char *path; int64_t n_tensors, n_tokens; } files[] = {
        {"models/stories260K.gguf", 48, 512},
        {"models/stories260K-Q8_0.gguf", 48, 512},
        {"models/stories260K-Q4_0.gguf", 48, 512},
        {"models/llama-2-tiny-random.gguf", 12, 32000},
        {"models/muse-glimmer-synth.gguf", 59, -1},
        {"vocab/ggml-vocab-llama-spm.gguf", 0, 32000},
        {"vocab/ggml-vocab-phi-3.gguf", 0, 32064},
        {"vocab/ggml-vocab-gpt-2.gguf", 0, 50257},
        {"vocab/ggml-vocab-llama-bpe.gguf", 0, 128256},
        {"vocab/ggml-vocab-qwen2.gguf", 0, 151669},
        {"vocab/ggml-vocab-llama4.gguf", 0, 202048},
        {"glimmer-tiny/glimmer-tiny-F32.gguf", 115, 512},
        {"glimmer-tiny/glimmer-tiny-Q8_0.gguf", 115, 512},
        {"glimmer-tiny/glimmer-tiny-Q6_K.gguf", 115, 512},
        {"glimmer-tiny/glimmer-tiny-Q4_K_M.gguf", 115, 512},
        {"glimmer-tiny/dflash/glimmer-tiny-dflash-BF16.gguf", 25, 512},
        {"muse-glimmer-tiny/muse-glimmer-tiny.gguf", 59, -1},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct gguf_file *f = NULL;
        struct glim_err err = {0};
        int rc = gguf_open(testdata(files[i].path), &f, &err);
        CHECK_EQ(rc, GLIM_OK);
        if (rc) {
            fprintf(stderr, "  %s\n", err.msg);
            continue;
        }
        CHECK_EQ(gguf_version(f), 3);
        CHECK_EQ(gguf_tensor_count(f), files[i].n_tensors);
        CHECK_EQ(tokens_count(f), files[i].n_tokens);
        check_layout(f);
        /* the last token of a big vocabulary is reachable in O(1) and inside the file */
        const struct gguf_kv *tok = gguf_kv_find(f, "tokenizer.ggml.tokens");
        if (tok && tok->arr_n) {
            const char *p;
            size_t n;
            CHECK_EQ(gguf_arr_str(tok, tok->arr_n - 1, &p, &n), GLIM_OK);
            CHECK((const uint8_t *)p + n <= tok->data + gguf_file_size(f));
            CHECK_EQ(gguf_arr_str(tok, tok->arr_n, &p, &n), GLIM_ERANGE);
        }
        gguf_close(f);
    }
}

static void test_stories(void)
{
    struct gguf_file *f = NULL;
    struct glim_err err = {0};
    const char *path = testdata("models/stories260K.gguf");
    CHECK_EQ(gguf_open(path, &f, &err), GLIM_OK);
    if (!f)
        return;
    CHECK_EQ(gguf_file_size(f), 1185376);
    CHECK_EQ(gguf_alignment(f), 32);
    uint32_t u = 0;
    CHECK_EQ(gguf_get_u32(f, "llama.embedding_length", &u, &err), GLIM_OK);
    CHECK_EQ(u, 64);
    CHECK_EQ(gguf_get_u32(f, "llama.block_count", &u, &err), GLIM_OK);
    CHECK_EQ(u, 5);
    int64_t i64 = 0;
    CHECK_EQ(gguf_get_i64(f, "llama.feed_forward_length", &i64, &err), GLIM_OK);
    CHECK_EQ(i64, 172);
    float eps = 0;
    CHECK_EQ(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps, &err), GLIM_OK);
    CHECK_NEAR(eps, 1e-5, 1e-9);
    const char *s;
    size_t n;
    CHECK_EQ(gguf_get_str(f, "general.architecture", &s, &n, &err), GLIM_OK);
    CHECK(str_is(s, n, "llama"));
    const struct gguf_kv *tok = NULL;
    CHECK_EQ(gguf_get_arr(f, "tokenizer.ggml.tokens", &tok, &err), GLIM_OK);
    CHECK(tok && tok->arr_type == GGUF_VT_STRING && tok->arr_n == 512);
    if (tok) {
        CHECK(gguf_arr_str(tok, 0, &s, &n) == GLIM_OK && str_is(s, n, "<unk>"));
        CHECK(gguf_arr_str(tok, 1, &s, &n) == GLIM_OK && str_is(s, n, "<s>"));
        CHECK(gguf_arr_str(tok, 2, &s, &n) == GLIM_OK && str_is(s, n, "</s>"));
        CHECK(gguf_arr_str(tok, 3, &s, &n) == GLIM_OK && str_is(s, n, "<0x00>"));
        CHECK_EQ(gguf_arr_int(tok, 0, &i64), GLIM_EFORMAT);
    }
    const struct gguf_kv *tt = gguf_kv_find(f, "tokenizer.ggml.token_type");
    CHECK(tt && tt->arr_type == GGUF_VT_INT32 && tt->arr_n == 512);
    if (tt) {
        CHECK(gguf_arr_int(tt, 0, &i64) == GLIM_OK && i64 == 2);   /* <unk>: UNKNOWN */
        CHECK(gguf_arr_int(tt, 1, &i64) == GLIM_OK && i64 == 3);   /* <s>: CONTROL */
        CHECK(gguf_arr_int(tt, 3, &i64) == GLIM_OK && i64 == 6);   /* <0x00>: BYTE */
        CHECK_EQ(gguf_arr_int(tt, 512, &i64), GLIM_ERANGE);
    }
    /* getters: absent, wrong type (with a message naming file and key) */
    CHECK_EQ(gguf_get_u32(f, "no.such.key", &u, &err), GLIM_ENOTFOUND);
    err.msg[0] = '\0';
    CHECK_EQ(gguf_get_u32(f, "general.architecture", &u, &err), GLIM_EFORMAT);
    CHECK(strstr(err.msg, path) && strstr(err.msg, "general.architecture"));
    bool b;
    CHECK_EQ(gguf_get_bool(f, "llama.block_count", &b, &err), GLIM_EFORMAT);
    CHECK_EQ(gguf_get_str(f, "llama.block_count", &s, &n, &err), GLIM_EFORMAT);
    CHECK_EQ(gguf_get_arr(f, "llama.block_count", &tok, &err), GLIM_EFORMAT);
    CHECK_EQ(gguf_get_f32(f, "llama.block_count", &eps, &err), GLIM_EFORMAT);
    /* 0xffffffff does not fit... i64 takes it; u32 takes it exactly */
    CHECK_EQ(gguf_get_u32(f, "tokenizer.ggml.padding_token_id", &u, &err), GLIM_OK);
    CHECK_EQ(u, 4294967295u);
    /* tensors */
    const struct gguf_tensor *t = gguf_tensor_find(f, "token_embd.weight");
    CHECK(t && t->type == GLIM_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 && t->ne[2] == 1);
    CHECK(t && t->nbytes == 64 * 512 * 4 && t->n_elems == 64 * 512);
    t = gguf_tensor_find(f, "blk.4.ffn_down.weight");
    CHECK(t && t->ne[0] == 172 && t->ne[1] == 64);
    CHECK(gguf_tensor_find(f, "blk.5.ffn_down.weight") == NULL);
    CHECK(gguf_tensor_at(f, 48) == NULL && gguf_tensor_at(f, -1) == NULL);
    CHECK(gguf_kv_at(f, gguf_kv_count(f)) == NULL);
    /* the first weight starts the data section, right after the padded tensor infos */
    t = gguf_tensor_at(f, 0);
    CHECK(t && t->offset == 0 && !strcmp(t->name, "token_embd.weight"));
    CHECK_EQ(gguf_data_offset(f), 14176);
    gguf_close(f);
}

static void test_quantized_types(void)
{
    /* README: Q4_K_M = F32 49, Q4_K 57, Q6_K 9; Q8_0 file = F32 49, Q8_0 66 */
    static const struct { const char *path; uint32_t type[3]; int count[3]; } files[] = {
        {"glimmer-tiny/glimmer-tiny-Q4_K_M.gguf", {GLIM_TYPE_F32, GLIM_TYPE_Q4_K, GLIM_TYPE_Q6_K}, {49, 57, 9}},
        {"glimmer-tiny/glimmer-tiny-Q8_0.gguf", {GLIM_TYPE_F32, GLIM_TYPE_Q8_0, GLIM_TYPE_Q8_0}, {49, 66, 66}},
        {"glimmer-tiny/glimmer-tiny-Q6_K.gguf", {GLIM_TYPE_F32, GLIM_TYPE_Q6_K, GLIM_TYPE_Q6_K}, {49, 66, 66}},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct gguf_file *f = NULL;
        CHECK_EQ(gguf_open(testdata(files[i].path), &f, NULL), GLIM_OK);
        if (!f)
            continue;
        for (int k = 0; k < 3; k++) {
            int n = 0;
            for (int64_t j = 0; j < gguf_tensor_count(f); j++)
                n += gguf_tensor_at(f, j)->type == files[i].type[k];
            CHECK_EQ(n, files[i].count[k]);
        }
        gguf_close(f);
    }
}

static void test_muse_glimmer(void)
{
    struct gguf_file *f = NULL;
    CHECK_EQ(gguf_open(testdata("models/muse-glimmer-synth.gguf"), &f, NULL), GLIM_OK);
    if (!f)
        return;
    /* PROVENANCE.md: sliding_window_pattern [T,T,T,F] */
    const struct gguf_kv *kv = NULL;
    CHECK_EQ(gguf_get_arr(f, "muse-glimmer.attention.sliding_window_pattern", &kv, NULL), GLIM_OK);
    CHECK(kv && kv->arr_type == GGUF_VT_BOOL && kv->arr_n == 4);
    static const int want[4] = {1, 1, 1, 0};
    for (int i = 0; kv && i < 4; i++) {
        int64_t v = -1;
        CHECK_EQ(gguf_arr_int(kv, (uint64_t)i, &v), GLIM_OK);
        CHECK_EQ(v, want[i]);
    }
    bool b;
    CHECK_EQ(gguf_get_bool(f, "muse-glimmer.attention.sliding_window_pattern", &b, NULL), GLIM_EFORMAT);
    float x = 0;
    CHECK_EQ(gguf_get_f32(f, "muse-glimmer.final_logit_softcapping", &x, NULL), GLIM_OK);
    CHECK_NEAR(x, 30.0, 0);
    CHECK_EQ(gguf_get_f32(f, "muse-glimmer.logit_scale", &x, NULL), GLIM_OK);
    CHECK_NEAR(x, 0.75, 0);
    uint32_t u = 0;
    CHECK_EQ(gguf_get_u32(f, "muse-glimmer.attention.sliding_window", &u, NULL), GLIM_OK);
    CHECK_EQ(u, 8);
    gguf_close(f);
}

/* muse-glimmer-tiny/tensors.txt lists "name [ne0, ne1] TYPE" for every tensor */
static void test_tensor_list(void)
{
    struct gguf_file *f = NULL;
    CHECK_EQ(gguf_open(testdata("muse-glimmer-tiny/muse-glimmer-tiny.gguf"), &f, NULL), GLIM_OK);
    FILE *list = fopen(testdata("muse-glimmer-tiny/tensors.txt"), "r");
    CHECK(list != NULL);
    if (!f || !list)
        goto done;
    char line[256], name[128], type[16];
    long long ne0, ne1;
    int64_t n = 0;
    while (fgets(line, sizeof line, list)) {
        if (sscanf(line, "%127s [%lld, %lld] %15s", name, &ne0, &ne1, type) != 4)
            continue;
        const struct gguf_tensor *t = gguf_tensor_at(f, n++);
        CHECK(t && !strcmp(t->name, name));
        if (!t)
            continue;
        CHECK_EQ(t->ne[0], ne0);
        CHECK_EQ(t->ne[1], ne1);
        CHECK(!strcmp(quant_type_name(t->type), type));
    }
    CHECK_EQ(n, gguf_tensor_count(f));
done:
    if (list)
        fclose(list);
    gguf_close(f);
}

/* ---- 2. writer ---------------------------------------------------------- */

/* a hand-built image with every scalar type and an array of every element type */
static void build_all_types(struct img *b)
{
    img_header(b, 3, 0, 26);
    static const struct { const char *key; uint32_t type; uint64_t bits; int size; } sc[] = {
        {"t.u8", 0, 200, 1}, {"t.i8", 1, (uint8_t)-5, 1}, {"t.u16", 2, 60000, 2},
        {"t.i16", 3, (uint16_t)-30000, 2}, {"t.u32", 4, 4000000000u, 4}, {"t.i32", 5, (uint32_t)-2000000000, 4},
        {"t.bool", 7, 1, 1}, {"t.u64", 10, 1ull << 40, 8}, {"t.i64", 11, (uint64_t)-(1ll << 40), 8},
        {"t.u64big", 10, UINT64_MAX, 8},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        img_str(b, sc[i].key);
        img_u32(b, sc[i].type);
        img_put(b, &sc[i].bits, (size_t)sc[i].size);
    }
    float f32 = 1.5f;
    double f64 = 2.25e300;
    img_str(b, "t.f32"), img_u32(b, 6), img_put(b, &f32, 4);
    img_str(b, "t.f64"), img_u32(b, 12), img_put(b, &f64, 8);
    img_kv_str(b, "t.str", "h\xc3\xa9llo\nworld");   /* values may hold any bytes */
    /* arrays of each element type: 3 elements 1, 2, 3 (strings "", "a", "bc") */
    static const uint32_t et[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12};
    static const int esz[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 8, 8};
    for (size_t i = 0; i < sizeof et / sizeof et[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "a.%u", et[i]);
        img_str(b, key);
        img_u32(b, 9);
        img_u32(b, et[i]);
        img_u64(b, 3);
        for (int v = 1; v <= 3; v++) {
            uint64_t bits = et[i] == 7 ? (uint64_t)(v < 3) : (uint64_t)v;   /* bools: 1, 1, 0 */
            if (et[i] == 6) {
                float x = (float)v * 0.5f;
                img_put(b, &x, 4);
            } else if (et[i] == 12) {
                double x = (double)v * 0.25;
                img_put(b, &x, 8);
            } else {
                img_put(b, &bits, (size_t)esz[i]);
            }
        }
    }
    img_str(b, "a.str"), img_u32(b, 9), img_u32(b, 8), img_u64(b, 3);
    img_str(b, ""), img_str(b, "a"), img_str(b, "bc");
    img_str(b, "a.empty"), img_u32(b, 9), img_u32(b, 4), img_u64(b, 0);
}

static void check_all_types(const struct gguf_file *f)
{
    int64_t v;
    double d;
    const char *s;
    size_t n;
    static const struct { const char *key; int64_t want; } ints[] = {
        {"t.u8", 200}, {"t.i8", -5}, {"t.u16", 60000}, {"t.i16", -30000}, {"t.u32", 4000000000ll},
        {"t.i32", -2000000000}, {"t.u64", 1ll << 40}, {"t.i64", -(1ll << 40)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        CHECK_EQ(gguf_get_i64(f, ints[i].key, &v, NULL), GLIM_OK);
        CHECK_EQ(v, ints[i].want);
    }
    uint32_t u;
    CHECK_EQ(gguf_get_u32(f, "t.i8", &u, NULL), GLIM_EFORMAT);     /* negative */
    CHECK_EQ(gguf_get_u32(f, "t.u64", &u, NULL), GLIM_EFORMAT);    /* too big */
    CHECK_EQ(gguf_get_u32(f, "t.u32", &u, NULL), GLIM_OK);
    CHECK_EQ(gguf_get_i64(f, "t.u64big", &v, NULL), GLIM_EFORMAT); /* above INT64_MAX */
    CHECK_EQ(gguf_get_i64(f, "t.bool", &v, NULL), GLIM_EFORMAT);   /* bool is not an integer */
    bool b = false;
    CHECK(gguf_get_bool(f, "t.bool", &b, NULL) == GLIM_OK && b);
    float x = 0;
    CHECK(gguf_get_f32(f, "t.f32", &x, NULL) == GLIM_OK && x == 1.5f);
    CHECK(gguf_kv_float(gguf_kv_find(f, "t.f64"), &d) == GLIM_OK && d == 2.25e300);
    CHECK(gguf_get_str(f, "t.str", &s, &n, NULL) == GLIM_OK && str_is(s, n, "h\xc3\xa9llo\nworld"));
    static const uint32_t et[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12};
    for (size_t i = 0; i < sizeof et / sizeof et[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "a.%u", et[i]);
        const struct gguf_kv *kv = NULL;
        CHECK_EQ(gguf_get_arr(f, key, &kv, NULL), GLIM_OK);
        if (!kv)
            continue;
        CHECK_EQ(kv->arr_type, et[i]);
        CHECK_EQ(kv->arr_n, 3);
        for (uint64_t k = 0; k < 3; k++) {
            double want = et[i] == 6 ? (double)(k + 1) * 0.5 : et[i] == 12 ? (double)(k + 1) * 0.25
                        : et[i] == 7 ? (double)(k < 2) : (double)(k + 1);
            if (et[i] != 7)   /* bools are integers (0/1), not numbers */
                CHECK(gguf_arr_float(kv, k, &d) == GLIM_OK && d == want);
            else
                CHECK_EQ(gguf_arr_float(kv, k, &d), GLIM_EFORMAT);
            if (et[i] != 6 && et[i] != 12)
                CHECK(gguf_arr_int(kv, k, &v) == GLIM_OK && (double)v == want);
        }
        CHECK_EQ(gguf_arr_float(kv, 3, &d), GLIM_ERANGE);
    }
    const struct gguf_kv *kv = gguf_kv_find(f, "a.str");
    CHECK(kv && kv->arr_n == 3);
    if (kv) {
        CHECK(gguf_arr_str(kv, 0, &s, &n) == GLIM_OK && n == 0);
        CHECK(gguf_arr_str(kv, 2, &s, &n) == GLIM_OK && str_is(s, n, "bc"));
    }
    kv = gguf_kv_find(f, "a.empty");
    CHECK(kv && kv->arr_n == 0 && gguf_arr_int(kv, 0, &v) == GLIM_ERANGE);
}

struct gen_state { int calls; uint8_t seed; int fail; };

static int gen_bytes(void *ud, void *dst, size_t nbytes, struct glim_err *err)
{
    struct gen_state *g = ud;
    g->calls++;
    if (g->fail)
        return glim_fail(err, GLIM_EIO, "generator says no");
    for (size_t i = 0; i < nbytes; i++)
        ((uint8_t *)dst)[i] = (uint8_t)(g->seed + i * 7);
    return GLIM_OK;
}

struct progress { int calls; int64_t last_done, total; bool monotonic; };

static void on_progress(void *ud, int64_t done, int64_t total)
{
    struct progress *p = ud;
    if (p->calls && done < p->last_done)
        p->monotonic = false;
    p->calls++;
    p->last_done = done;
    p->total = total;
}

static void test_writer_roundtrip(void)
{
    struct img src = {0};
    build_all_types(&src);
    struct gguf_file *in = NULL;
    struct glim_err err = {0};
    CHECK_EQ(gguf_open_mem(src.p, src.n, "all-types", &in, &err), GLIM_OK);
    if (!in) {
        fprintf(stderr, "  %s\n", err.msg);
        img_free(&src);
        return;
    }
    check_all_types(in);

    struct gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    for (int64_t i = 0; i < gguf_kv_count(in); i++)
        CHECK_EQ(gguf_writer_add_kv_copy(w, gguf_kv_at(in, i)), GLIM_OK);
    CHECK_EQ(gguf_writer_add_u32(w, "w.u32", 7), GLIM_OK);
    CHECK_EQ(gguf_writer_add_i32(w, "w.i32", -7), GLIM_OK);
    CHECK_EQ(gguf_writer_add_f32(w, "w.f32", -0.125f), GLIM_OK);
    CHECK_EQ(gguf_writer_add_bool(w, "w.bool", false), GLIM_OK);
    CHECK_EQ(gguf_writer_add_str(w, "w.str", ""), GLIM_OK);
    static const int32_t ai[] = {-1, 0, 1, INT32_MAX};
    static const float af[] = {0.5f, -2.0f};
    static const bool ab[] = {true, false, true};
    static const char *const as[] = {"<s>", "", "\xe2\x96\x81the"};
    CHECK_EQ(gguf_writer_add_arr_i32(w, "w.ai", ai, 4), GLIM_OK);
    CHECK_EQ(gguf_writer_add_arr_f32(w, "w.af", af, 2), GLIM_OK);
    CHECK_EQ(gguf_writer_add_arr_bool(w, "w.ab", ab, 3), GLIM_OK);
    CHECK_EQ(gguf_writer_add_arr_str(w, "w.as", as, 3), GLIM_OK);
    CHECK_EQ(gguf_writer_add_arr_i32(w, "w.ai0", NULL, 0), GLIM_OK);
    gguf_writer_set_alignment(w, 64);
    /* refusals: duplicates, bad names, bad alignment types */
    CHECK_EQ(gguf_writer_add_u32(w, "w.u32", 8), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_u32(w, "", 8), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_u32(w, "bad\xff", 8), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_str(w, "general.alignment", "64"), GLIM_EINVAL);

    /* tensors: borrowed, copied, generated; several types and ranks */
    float f32[8 * 3];
    for (int i = 0; i < 24; i++)
        f32[i] = (float)i - 3.5f;
    uint8_t q8[34 * 4], q4k[144 * 2], bf16[2 * 3 * 4 * 2];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)(i * 13);
    for (size_t i = 0; i < sizeof q4k; i++)
        q4k[i] = (uint8_t)(i * 31 + 1);
    for (size_t i = 0; i < sizeof bf16; i++)
        bf16[i] = (uint8_t)(255 - i);
    int32_t i32[6] = {1, -2, 3, -4, 5, -6};
    const int64_t ne_f32[] = {8, 3}, ne_q8[] = {64, 2}, ne_q4k[] = {256, 2}, ne_bf16[] = {2, 3, 4};
    const int64_t ne_i32[] = {1, 2, 1, 3}, ne_gen[] = {40, 5};
    struct gen_state g = {.seed = 9};
    CHECK_EQ(gguf_writer_add_tensor(w, "f32", GLIM_TYPE_F32, 2, ne_f32, f32, sizeof f32, false), GLIM_OK);
    CHECK_EQ(gguf_writer_add_tensor(w, "q8", GLIM_TYPE_Q8_0, 2, ne_q8, q8, sizeof q8, true), GLIM_OK);
    CHECK_EQ(gguf_writer_add_tensor(w, "q4k", GLIM_TYPE_Q4_K, 2, ne_q4k, q4k, sizeof q4k, false), GLIM_OK);
    CHECK_EQ(gguf_writer_add_tensor(w, "bf16", GLIM_TYPE_BF16, 3, ne_bf16, bf16, sizeof bf16, true), GLIM_OK);
    CHECK_EQ(gguf_writer_add_tensor(w, "i32", GLIM_TYPE_I32, 4, ne_i32, i32, sizeof i32, false), GLIM_OK);
    CHECK_EQ(gguf_writer_add_tensor_gen(w, "gen", GLIM_TYPE_F16, 2, ne_gen, gen_bytes, &g), GLIM_OK);
    memset(q8, 0, sizeof q8);   /* copied: the file must still hold the old bytes */
    /* tensor refusals */
    CHECK_EQ(gguf_writer_add_tensor(w, "f32", GLIM_TYPE_F32, 2, ne_f32, f32, sizeof f32, false), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_tensor(w, "x", GLIM_TYPE_F32, 2, ne_f32, f32, sizeof f32 - 4, false), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_tensor(w, "x", GLIM_TYPE_Q8_0, 1, ne_f32, q8, 34, false), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_tensor(w, "x", 4, 1, ne_f32, f32, 32, false), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_tensor(w, "x", GLIM_TYPE_F32, 5, ne_f32, f32, 32, false), GLIM_EINVAL);
    CHECK_EQ(gguf_writer_add_tensor_gen(w, "x", GLIM_TYPE_F32, 0, ne_f32, gen_bytes, &g), GLIM_EINVAL);

    struct progress pr = {.monotonic = true};
    const char *path = tmp_path("roundtrip.gguf");
    CHECK_EQ(gguf_writer_write(w, path, on_progress, &pr, &err), GLIM_OK);
    CHECK_EQ(g.calls, 1);
    CHECK(pr.calls >= 2 && pr.monotonic && pr.last_done == pr.total);
    CHECK_EQ(pr.total, (int64_t)(sizeof f32 + 34 * 4 + sizeof q4k + sizeof bf16 + sizeof i32 + 40 * 5 * 2));

    struct gguf_file *out = NULL;
    CHECK_EQ(gguf_open(path, &out, &err), GLIM_OK);
    if (out) {
        CHECK_EQ(gguf_alignment(out), 64);
        CHECK_EQ(gguf_version(out), 3);
        CHECK_EQ(gguf_kv_count(out), gguf_kv_count(in) + 11);
        check_all_types(out);
        check_layout(out);
        for (int64_t i = 0; i < gguf_kv_count(in); i++)
            CHECK(!strcmp(gguf_kv_at(in, i)->key, gguf_kv_at(out, i)->key));
        int64_t v;
        double d;
        const char *s;
        size_t n;
        bool b = true;
        CHECK(gguf_get_i64(out, "w.i32", &v, NULL) == GLIM_OK && v == -7);
        CHECK(gguf_get_bool(out, "w.bool", &b, NULL) == GLIM_OK && !b);
        CHECK(gguf_get_str(out, "w.str", &s, &n, NULL) == GLIM_OK && n == 0);
        const struct gguf_kv *kv = gguf_kv_find(out, "w.ai");
        CHECK(kv && kv->arr_n == 4 && gguf_arr_int(kv, 3, &v) == GLIM_OK && v == INT32_MAX);
        kv = gguf_kv_find(out, "w.af");
        CHECK(kv && gguf_arr_float(kv, 1, &d) == GLIM_OK && d == -2.0);
        kv = gguf_kv_find(out, "w.ab");
        CHECK(kv && kv->arr_type == GGUF_VT_BOOL && gguf_arr_int(kv, 1, &v) == GLIM_OK && v == 0);
        kv = gguf_kv_find(out, "w.as");
        CHECK(kv && gguf_arr_str(kv, 2, &s, &n) == GLIM_OK && str_is(s, n, "\xe2\x96\x81the"));
        kv = gguf_kv_find(out, "general.alignment");
        CHECK(kv && kv->type == GGUF_VT_UINT32 && gguf_kv_int(kv, &v) == GLIM_OK && v == 64);

        CHECK_EQ(gguf_tensor_count(out), 6);
        const struct gguf_tensor *t = gguf_tensor_find(out, "f32");
        CHECK(t && t->nbytes == sizeof f32 && !memcmp(t->data, f32, sizeof f32));
        t = gguf_tensor_find(out, "q8");
        CHECK(t && t->type == GLIM_TYPE_Q8_0 && t->nbytes == 136 && ((const uint8_t *)t->data)[1] == 13);
        t = gguf_tensor_find(out, "q4k");
        CHECK(t && t->nbytes == sizeof q4k && !memcmp(t->data, q4k, sizeof q4k));
        t = gguf_tensor_find(out, "bf16");
        CHECK(t && t->n_dims == 3 && t->ne[2] == 4 && t->ne[3] == 1 && !memcmp(t->data, bf16, sizeof bf16));
        t = gguf_tensor_find(out, "i32");
        CHECK(t && t->n_dims == 4 && t->ne[3] == 3 && t->n_elems == 6 && !memcmp(t->data, i32, sizeof i32));
        t = gguf_tensor_find(out, "gen");
        CHECK(t && t->nbytes == 400 && ((const uint8_t *)t->data)[399] == (uint8_t)(9 + 399 * 7));
        gguf_close(out);
    }
    gguf_writer_free(w);
    gguf_close(in);
    img_free(&src);
}

/* stories260K (written by llama.cpp) copied kv by kv and tensor by tensor
 * must come out byte-identical: same encoding, padding and layout. */
static void test_writer_identity(void)
{
    struct gguf_file *f = NULL;
    CHECK_EQ(gguf_open(testdata("models/stories260K.gguf"), &f, NULL), GLIM_OK);
    struct gguf_writer *w = gguf_writer_new();
    if (!f || !w)
        goto done;
    for (int64_t i = 0; i < gguf_kv_count(f); i++)
        CHECK_EQ(gguf_writer_add_kv_copy(w, gguf_kv_at(f, i)), GLIM_OK);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        CHECK_EQ(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, false), GLIM_OK);
    }
    struct glim_err err = {0};
    const char *path = tmp_path("copy.gguf");
    CHECK_EQ(gguf_writer_write(w, path, NULL, NULL, &err), GLIM_OK);
    size_t n_orig = 0, n_copy = 0;
    uint8_t *orig = (uint8_t *)test_read_file(testdata("models/stories260K.gguf"), &n_orig);
    uint8_t *copy = (uint8_t *)test_read_file(path, &n_copy);
    CHECK(orig && copy);
    CHECK_EQ(n_copy, n_orig);
    CHECK(orig && copy && n_copy == n_orig && memcmp(orig, copy, n_orig) == 0);
    free(orig);
    free(copy);
done:
    gguf_writer_free(w);
    gguf_close(f);
}

static int count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_writer_failures(void)
{
    struct glim_err err = {0};
    int before = count_dir_entries(tmpdir);
    /* a failing generator: the error comes back, no file and no temp file is left */
    struct gguf_writer *w = gguf_writer_new();
    struct gen_state g = {.fail = 1};
    const int64_t ne[] = {32};
    CHECK_EQ(gguf_writer_add_tensor_gen(w, "g", GLIM_TYPE_F32, 1, ne, gen_bytes, &g), GLIM_OK);
    const char *path = tmp_path("never.gguf");
    CHECK_EQ(gguf_writer_write(w, path, NULL, NULL, &err), GLIM_EIO);
    CHECK(strstr(err.msg, "generator says no") && strstr(err.msg, "'g'"));
    CHECK(access(path, F_OK) != 0);
    CHECK_EQ(count_dir_entries(tmpdir), before);
    /* a directory that does not exist */
    CHECK_EQ(gguf_writer_write(w, tmp_path("no/such/dir.gguf"), NULL, NULL, &err), GLIM_EIO);
    gguf_writer_free(w);
    /* an invalid alignment is reported by write */
    w = gguf_writer_new();
    gguf_writer_set_alignment(w, 48);
    CHECK_EQ(gguf_writer_write(w, path, NULL, NULL, &err), GLIM_EINVAL);
    CHECK(access(path, F_OK) != 0);
    gguf_writer_free(w);
    gguf_writer_free(NULL);
    gguf_close(NULL);
}

/* ---- 3. malformed files ------------------------------------------------- */

static const uint64_t NE42[] = {4, 2};

/* header + one kv + one tensor info + padding + data_bytes of data */
static void one_tensor(struct img *b, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off,
                       size_t data_bytes)
{
    img_header(b, 3, 1, 1);
    img_kv_str(b, "general.architecture", "llama");
    img_tensor(b, "w", nd, ne, type, off);
    img_pad(b, 32);
    img_zeros(b, data_bytes);
}

static void kv_only(struct img *b) { img_header(b, 3, 0, 1); }

static void c_valid(struct img *b) { one_tensor(b, 2, NE42, GLIM_TYPE_F32, 0, 32); }
static void c_empty(struct img *b) { (void)b; }
static void c_magic(struct img *b) { c_valid(b), b->p[3] = 'G'; }
static void c_short_version(struct img *b) { img_put(b, "GGUF\3\0", 6); }
static void c_v1(struct img *b) { c_valid(b), b->p[4] = 1; }
static void c_v4(struct img *b) { c_valid(b), b->p[4] = 4; }
static void c_big_endian(struct img *b) { c_valid(b), b->p[4] = 0, b->p[7] = 3; }
static void c_huge_tensors(struct img *b) { img_header(b, 3, 1ull << 62, 0), img_zeros(b, 64); }
static void c_huge_kv(struct img *b) { img_header(b, 3, 0, UINT64_MAX), img_zeros(b, 64); }
static void c_kv_count_short(struct img *b) { img_header(b, 3, 0, 3), img_kv_u32(b, "a", 1); }
static void c_tensor_count_short(struct img *b) { img_header(b, 3, 2, 0), img_tensor(b, "w", 2, NE42, 0, 0); }
static void c_trunc_header(struct img *b) { img_put(b, "GGUF\3\0\0\0\1\0\0\0", 12); }
static void c_key_len_huge(struct img *b) { kv_only(b), img_u64(b, UINT64_MAX), img_zeros(b, 32); }
static void c_key_empty(struct img *b) { kv_only(b), img_strn(b, "", 0), img_u32(b, 4), img_u32(b, 1), img_zeros(b, 8); }
static void c_key_nul(struct img *b) { kv_only(b), img_strn(b, "a\0b", 3), img_u32(b, 4), img_u32(b, 1); }
static void c_key_utf8(struct img *b) { kv_only(b), img_strn(b, "k\xff", 2), img_u32(b, 4), img_u32(b, 1); }
static void c_key_overlong(struct img *b) { kv_only(b), img_strn(b, "\xc0\xaf", 2), img_u32(b, 4), img_u32(b, 1); }
static void c_key_surrogate(struct img *b) { kv_only(b), img_strn(b, "\xed\xa0\x80", 3), img_u32(b, 4), img_u32(b, 1); }
static void c_key_cut_utf8(struct img *b) { kv_only(b), img_strn(b, "ab\xe2\x96", 4), img_u32(b, 4), img_u32(b, 1); }
static void c_dup_key(struct img *b) { img_header(b, 3, 0, 2), img_kv_u32(b, "a.b", 1), img_kv_u32(b, "a.b", 2); }
static void c_vtype_13(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 13), img_zeros(b, 16); }
static void c_vtype_huge(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, UINT32_MAX), img_zeros(b, 16); }
static void c_str_huge(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 8), img_u64(b, 1ull << 40), img_zeros(b, 9); }
static void c_value_cut(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 10), img_zeros(b, 4); }
static void c_arr_etype(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 9), img_u32(b, 77), img_u64(b, 1), img_zeros(b, 8); }
static void c_arr_nested(struct img *b)
{
    /* an array of arrays of arrays... each level claims a huge count */
    kv_only(b), img_str(b, "k");
    for (int i = 0; i < 64; i++)
        img_u32(b, 9), img_u32(b, 9), img_u64(b, UINT64_MAX / 2);
}
static void c_arr_count_huge(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 9), img_u32(b, 4), img_u64(b, 1ull << 62), img_zeros(b, 64); }
static void c_arr_count_wrap(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 9), img_u32(b, 10), img_u64(b, 1ull << 61), img_zeros(b, 64); }
static void c_arr_str_huge(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 9), img_u32(b, 8), img_u64(b, 1ull << 61), img_zeros(b, 64); }
static void c_arr_str_elem(struct img *b)
{
    kv_only(b), img_str(b, "k"), img_u32(b, 9), img_u32(b, 8), img_u64(b, 3);
    img_str(b, "ab"), img_u64(b, 1000), img_zeros(b, 20);
}
static void c_bool_2(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 7), img_u8(b, 2); }
static void c_bool_arr(struct img *b) { kv_only(b), img_str(b, "k"), img_u32(b, 9), img_u32(b, 7), img_u64(b, 3), img_u8(b, 1), img_u8(b, 0), img_u8(b, 7); }
static void c_align_0(struct img *b) { img_header(b, 3, 0, 1), img_kv_u32(b, "general.alignment", 0); }
static void c_align_48(struct img *b) { img_header(b, 3, 0, 1), img_kv_u32(b, "general.alignment", 48); }
static void c_align_u64(struct img *b) { kv_only(b), img_str(b, "general.alignment"), img_u32(b, 10), img_u64(b, 32); }
static void c_align_str(struct img *b) { img_header(b, 3, 0, 1), img_kv_str(b, "general.alignment", "32"); }
static void c_ndims_0(struct img *b) { one_tensor(b, 0, NE42, GLIM_TYPE_F32, 0, 64); }
static void c_ndims_5(struct img *b)
{
    static const uint64_t ne[] = {1, 1, 1, 1, 1};
    one_tensor(b, 5, ne, GLIM_TYPE_F32, 0, 64);
}
static void c_dim_0(struct img *b)
{
    static const uint64_t ne[] = {4, 0};
    one_tensor(b, 2, ne, GLIM_TYPE_F32, 0, 64);
}
static void c_dim_neg(struct img *b)
{
    static const uint64_t ne[] = {4, (uint64_t)-2};
    one_tensor(b, 2, ne, GLIM_TYPE_F32, 0, 64);
}
static void c_dims_overflow(struct img *b)
{
    static const uint64_t ne[] = {1ull << 32, 1ull << 32};
    one_tensor(b, 2, ne, GLIM_TYPE_F32, 0, 64);
}
static void c_bytes_overflow(struct img *b)
{
    static const uint64_t ne[] = {1ull << 62};
    one_tensor(b, 1, ne, GLIM_TYPE_F32, 0, 64);
}
static void c_type_removed(struct img *b) { one_tensor(b, 2, NE42, 4, 0, 64); }
static void c_type_40(struct img *b) { one_tensor(b, 2, NE42, 40, 0, 64); }
static void c_type_huge(struct img *b) { one_tensor(b, 2, NE42, 0x80000000u, 0, 64); }
static void c_row_block(struct img *b)
{
    static const uint64_t ne[] = {33, 2};
    one_tensor(b, 2, ne, GLIM_TYPE_Q8_0, 0, 128);
}
static void c_off_misaligned(struct img *b) { one_tensor(b, 2, NE42, GLIM_TYPE_F32, 4, 64); }
static void c_off_past_eof(struct img *b) { one_tensor(b, 2, NE42, GLIM_TYPE_F32, 1ull << 40, 64); }
static void c_off_max(struct img *b) { one_tensor(b, 2, NE42, GLIM_TYPE_F32, UINT64_MAX - 31, 64); }
static void c_data_past_eof(struct img *b) { one_tensor(b, 2, NE42, GLIM_TYPE_F32, 0, 31); }
static void c_data_start_past_eof(struct img *b)
{
    img_header(b, 3, 1, 0);
    img_tensor(b, "w", 2, NE42, GLIM_TYPE_F32, 0);   /* 24 + 37 bytes: not aligned, nothing after */
}
static void two_tensors(struct img *b, const char *n1, const char *n2, uint64_t off2)
{
    static const uint64_t ne[] = {16};
    img_header(b, 3, 2, 0);
    img_tensor(b, n1, 1, ne, GLIM_TYPE_F32, 0);
    img_tensor(b, n2, 1, ne, GLIM_TYPE_F32, off2);
    img_pad(b, 32);
    img_zeros(b, 256);
}
static void c_dup_tensor(struct img *b) { two_tensors(b, "w", "w", 64); }
static void c_overlap(struct img *b) { two_tensors(b, "a", "b", 32); }
static void c_same_offset(struct img *b) { two_tensors(b, "a", "b", 0); }
static void c_tname_empty(struct img *b) { two_tensors(b, "a", "", 64); }
static void c_tname_utf8(struct img *b) { two_tensors(b, "a", "b\x80", 64); }
static void c_tinfo_cut(struct img *b)
{
    img_header(b, 3, 1, 0);
    img_str(b, "w"), img_u32(b, 2), img_u64(b, 4), img_u64(b, 2), img_u32(b, 0), img_u32(b, 0);
}
static void c_align64_off32(struct img *b)
{
    static const uint64_t ne[] = {8};
    img_header(b, 3, 1, 1);
    img_kv_u32(b, "general.alignment", 64);
    img_tensor(b, "w", 1, ne, GLIM_TYPE_F32, 32);
    img_pad(b, 64);
    img_zeros(b, 128);
}

struct bad_case {
    const char *name;
    void (*build)(struct img *b);
    int code;
    const char *want;   /* substring of the message: the field or the reason */
};

static const struct bad_case BAD[] = {
    {"empty file", c_empty, GLIM_EFORMAT, "magic"},
    {"bad magic", c_magic, GLIM_EFORMAT, "magic"},
    {"cut in version", c_short_version, GLIM_EFORMAT, "version"},
    {"version 1", c_v1, GLIM_EUNSUPPORTED, "version"},
    {"version 4", c_v4, GLIM_EUNSUPPORTED, "version"},
    {"big-endian", c_big_endian, GLIM_EUNSUPPORTED, "big-endian"},
    {"cut in counts", c_trunc_header, GLIM_EFORMAT, "tensor count"},
    {"huge tensor count", c_huge_tensors, GLIM_EFORMAT, "tensor count"},
    {"huge kv count", c_huge_kv, GLIM_EFORMAT, "kv count"},
    {"kv count > room", c_kv_count_short, GLIM_EFORMAT, "kv count"},
    {"tensor count > room", c_tensor_count_short, GLIM_EFORMAT, "tensor count"},
    {"huge key length", c_key_len_huge, GLIM_EFORMAT, "key (at offset 24)"},
    {"empty key", c_key_empty, GLIM_EFORMAT, "empty name"},
    {"key with NUL", c_key_nul, GLIM_EFORMAT, "NUL"},
    {"key not UTF-8", c_key_utf8, GLIM_EFORMAT, "UTF-8"},
    {"key overlong UTF-8", c_key_overlong, GLIM_EFORMAT, "UTF-8"},
    {"key surrogate", c_key_surrogate, GLIM_EFORMAT, "UTF-8"},
    {"key cut UTF-8", c_key_cut_utf8, GLIM_EFORMAT, "UTF-8"},
    {"duplicate key", c_dup_key, GLIM_EFORMAT, "duplicate key"},
    {"value type 13", c_vtype_13, GLIM_EFORMAT, "value type"},
    {"value type 2^32-1", c_vtype_huge, GLIM_EFORMAT, "value type"},
    {"huge string", c_str_huge, GLIM_EFORMAT, "string length"},
    {"cut u64 value", c_value_cut, GLIM_EFORMAT, "value"},
    {"bad array type", c_arr_etype, GLIM_EFORMAT, "array element type"},
    {"nested array bomb", c_arr_nested, GLIM_EFORMAT, "nested"},
    {"huge array count", c_arr_count_huge, GLIM_EFORMAT, "runs past end"},
    {"array bytes wrap", c_arr_count_wrap, GLIM_EFORMAT, "runs past end"},
    {"huge string array", c_arr_str_huge, GLIM_EFORMAT, "cannot fit"},
    {"string element past end", c_arr_str_elem, GLIM_EFORMAT, "array element 1"},
    {"bool 2", c_bool_2, GLIM_EFORMAT, "bool"},
    {"bool array 7", c_bool_arr, GLIM_EFORMAT, "bool"},
    {"alignment 0", c_align_0, GLIM_EFORMAT, "power of two"},
    {"alignment 48", c_align_48, GLIM_EFORMAT, "power of two"},
    {"alignment u64", c_align_u64, GLIM_EFORMAT, "expected u32"},
    {"alignment string", c_align_str, GLIM_EFORMAT, "expected u32"},
    {"n_dims 0", c_ndims_0, GLIM_EFORMAT, "n_dims"},
    {"n_dims 5", c_ndims_5, GLIM_EFORMAT, "n_dims"},
    {"dim 0", c_dim_0, GLIM_EFORMAT, "ne[1] = 0"},
    {"dim -2", c_dim_neg, GLIM_EFORMAT, "ne[1]"},
    {"dims overflow", c_dims_overflow, GLIM_EFORMAT, "overflows"},
    {"bytes overflow", c_bytes_overflow, GLIM_EFORMAT, "byte size"},
    {"removed type 4", c_type_removed, GLIM_EFORMAT, "unknown tensor type"},
    {"type 40", c_type_40, GLIM_EFORMAT, "unknown tensor type"},
    {"type 2^31", c_type_huge, GLIM_EFORMAT, "unknown tensor type"},
    {"row not whole blocks", c_row_block, GLIM_EFORMAT, "block size"},
    {"offset misaligned", c_off_misaligned, GLIM_EFORMAT, "multiple of the alignment"},
    {"offset past EOF", c_off_past_eof, GLIM_EFORMAT, "past end of file"},
    {"offset near 2^64", c_off_max, GLIM_EFORMAT, "past end of file"},
    {"data past EOF", c_data_past_eof, GLIM_EFORMAT,
     "bad.gguf: tensor 'w' (info at offset 69): data [128, 160) runs past end of file (size 159)"},
    {"data section past EOF", c_data_start_past_eof, GLIM_EFORMAT, "data section"},
    {"duplicate tensor", c_dup_tensor, GLIM_EFORMAT, "duplicate tensor"},
    {"overlapping tensors", c_overlap, GLIM_EFORMAT, "overlaps"},
    {"same offset", c_same_offset, GLIM_EFORMAT, "overlaps"},
    {"empty tensor name", c_tname_empty, GLIM_EFORMAT, "empty name"},
    {"tensor name not UTF-8", c_tname_utf8, GLIM_EFORMAT, "UTF-8"},
    {"cut tensor info", c_tinfo_cut, GLIM_EFORMAT, "offset"},
    {"alignment 64, offset 32", c_align64_off32, GLIM_EFORMAT, "alignment 64"},
};

static void test_malformed_cases(void)
{
    struct img b = {0};
    c_valid(&b);   /* the base of many cases must itself be valid */
    struct gguf_file *f = NULL;
    CHECK_EQ(gguf_open_mem(b.p, b.n, "valid.gguf", &f, NULL), GLIM_OK);
    gguf_close(f);
    img_free(&b);
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        BAD[i].build(&b);
        struct glim_err err = {0};
        f = NULL;
        int rc = gguf_open_mem(b.p, b.n, "bad.gguf", &f, &err);
        bool ok = rc == BAD[i].code && f == NULL && !strncmp(err.msg, "bad.gguf: ", 10) &&
                  strstr(err.msg, BAD[i].want) && !strchr(err.msg, '\n');
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  case '%s': rc %s, message: %s\n", BAD[i].name, glim_status_name(rc), err.msg);
        gguf_close(f);
        img_free(&b);
    }
    CHECK(sizeof BAD / sizeof BAD[0] >= 30);
}

/* any outcome but a crash: OK (then everything is inside the buffer) or an error with a message */
static void open_any(const uint8_t *p, size_t n, int *n_ok, int *n_bad)
{
    struct gguf_file *f = NULL;
    struct glim_err err = {0};
    int rc = gguf_open_mem(p, n, "fuzz.gguf", &f, &err);
    if (rc == GLIM_OK) {
        (*n_ok)++;
        for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
            const struct gguf_tensor *t = gguf_tensor_at(f, i);
            CHECK((const uint8_t *)t->data >= p && (const uint8_t *)t->data + t->nbytes <= p + n);
        }
        gguf_close(f);
        return;
    }
    (*n_bad)++;
    CHECK(rc == GLIM_EFORMAT || rc == GLIM_EUNSUPPORTED || rc == GLIM_ENOMEM);
    CHECK(f == NULL && !strncmp(err.msg, "fuzz.gguf: ", 11));
}

static void test_truncations(void)
{
    /* every prefix of stories260K up to its first tensor's data is invalid */
    size_t n = 0;
    uint8_t *p = (uint8_t *)test_read_file(testdata("models/stories260K.gguf"), &n);
    CHECK(p != NULL);
    if (!p)
        return;
    size_t data_start = 14176 + 32;   /* data section at 14176 (checked in test_real_files' layout) */
    int n_ok = 0, n_bad = 0;
    for (size_t len = 0; len < data_start && len < n; len++)
        open_any(p, len, &n_ok, &n_bad);
    CHECK_EQ(n_ok, 0);
    CHECK_EQ(n_bad, (int)data_start);
    /* the full file, and cut inside the last tensor */
    n_ok = n_bad = 0;
    open_any(p, n, &n_ok, &n_bad);
    open_any(p, n - 1, &n_ok, &n_bad);
    CHECK(n_ok == 1 && n_bad == 1);
    free(p);
}

static void test_byte_flips(void)
{
    size_t n = 0;
    uint8_t *p = (uint8_t *)test_read_file(tmp_path("roundtrip.gguf"), &n);
    CHECK(p != NULL);
    if (!p)
        return;
    struct gguf_file *f = NULL;
    CHECK_EQ(gguf_open_mem(p, n, "x", &f, NULL), GLIM_OK);
    size_t head = f ? gguf_data_offset(f) : 0;
    gguf_close(f);
    int n_ok = 0, n_bad = 0;
    static const uint8_t flips[] = {0xff, 0x01, 0x80};
    for (size_t i = 0; i < head; i++) {
        for (size_t k = 0; k < sizeof flips; k++) {
            p[i] ^= flips[k];
            open_any(p, n, &n_ok, &n_bad);
            p[i] ^= flips[k];
        }
    }
    /* most flips break something, a few (inside values) do not */
    CHECK(n_bad > 0 && n_ok > 0);
    free(p);
}

/* a fixed-seed storm of small corruptions in the header of a valid file */
static void test_random_corruption(void)
{
    size_t n = 0;
    uint8_t *p = (uint8_t *)test_read_file(tmp_path("roundtrip.gguf"), &n), *q = malloc(n ? n : 1);
    CHECK(p && q);
    if (!p || !q)
        goto done;
    size_t head = 0;
    struct gguf_file *f = NULL;
    if (gguf_open_mem(p, n, "x", &f, NULL) == GLIM_OK)
        head = gguf_data_offset(f);
    gguf_close(f);
    CHECK(head > 0);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int n_ok = 0, n_bad = 0;
    for (int iter = 0; iter < 3000 && head > 8; iter++) {
        memcpy(q, p, n);
        int edits = 1 + (int)(rng % 4);
        for (int e = 0; e < edits; e++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;   /* xorshift64 */
            size_t at = (size_t)(rng >> 16) % (head - 8);
            uint64_t v = (rng & 3) == 0 ? UINT64_MAX : (rng & 3) == 1 ? rng >> 40 : (rng >> 8) & 0xff;
            memcpy(q + at, &v, (rng & 4) ? 8 : 1);
        }
        size_t len = (rng & 0x300) == 0 ? (size_t)(rng >> 20) % n : n;   /* sometimes cut too */
        open_any(q, len, &n_ok, &n_bad);
    }
    CHECK(n_bad > 1000);
done:
    free(p);
    free(q);
}

/* every byte of stories260K's header, inverted in turn */
static void test_stories_flips(void)
{
    size_t n = 0;
    uint8_t *p = (uint8_t *)test_read_file(testdata("models/stories260K.gguf"), &n);
    CHECK(p != NULL);
    if (!p)
        return;
    int n_ok = 0, n_bad = 0;
    for (size_t i = 0; i < 14176 && i < n; i++) {
        p[i] ^= 0xff;
        open_any(p, n, &n_ok, &n_bad);
        p[i] ^= 0xff;
    }
    CHECK(n_bad > 0);
    free(p);
}

/* fail each allocation of an open in turn: ENOMEM every time, no leak (ASan) */
static void test_oom(void)
{
    size_t n = 0;
    uint8_t *p = (uint8_t *)test_read_file(testdata("models/stories260K.gguf"), &n);
    CHECK(p != NULL);
    if (!p)
        return;
    int rc = GLIM_ENOMEM, nth = 1;
    for (; rc == GLIM_ENOMEM && nth < 10000; nth++) {
        struct gguf_file *f = NULL;
        struct glim_err err = {0};
        glim_alloc_fail_after(nth);
        rc = gguf_open_mem(p, n, "oom.gguf", &f, &err);
        glim_alloc_fail_after(-1);
        if (rc == GLIM_ENOMEM)
            CHECK(f == NULL && strstr(err.msg, "out of memory"));
        gguf_close(f);
    }
    CHECK_EQ(rc, GLIM_OK);
    CHECK(nth > 5);
    /* the writer: every add and the write itself fail cleanly */
    for (nth = 1, rc = GLIM_ENOMEM; rc == GLIM_ENOMEM && nth < 1000; nth++) {
        glim_alloc_fail_after(nth);
        struct gguf_writer *w = gguf_writer_new();
        static const char *const strs[] = {"a", "b"};
        static const float data[4] = {1, 2, 3, 4};
        const int64_t ne[] = {4};
        rc = w ? GLIM_OK : GLIM_ENOMEM;
        if (!rc)
            rc = gguf_writer_add_str(w, "k.s", "v");
        if (!rc)
            rc = gguf_writer_add_arr_str(w, "k.a", strs, 2);
        if (!rc)
            rc = gguf_writer_add_tensor(w, "t", GLIM_TYPE_F32, 1, ne, data, sizeof data, true);
        if (!rc)
            rc = gguf_writer_write(w, tmp_path("oom.gguf"), NULL, NULL, NULL);
        glim_alloc_fail_after(-1);
        gguf_writer_free(w);
    }
    CHECK_EQ(rc, GLIM_OK);
    free(p);
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            unlink(tmp_path(e->d_name));
    if (d)
        closedir(d);
    rmdir(tmpdir);
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/glim-gguf-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_real_files);
    RUN(test_stories);
    RUN(test_quantized_types);
    RUN(test_muse_glimmer);
    RUN(test_tensor_list);
    RUN(test_writer_roundtrip);
    RUN(test_writer_identity);
    RUN(test_writer_failures);
    RUN(test_malformed_cases);
    RUN(test_truncations);
    RUN(test_byte_flips);
    RUN(test_random_corruption);
    RUN(test_stories_flips);
    RUN(test_oom);
    remove_tmpdir();
    return DONE();
}
