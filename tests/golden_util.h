/* golden_util.h — helpers for the golden-logit tests: load f32 arrays, run a
 * model through the public API, compare. Header-only, included by tests. */
#ifndef GLIM_GOLDEN_UTIL_H
#define GLIM_GOLDEN_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glim.h"
#include "harness.h"

/* whole file into a malloc'ed buffer (NUL-terminated); NULL on failure */
static inline char *g_read_file(const char *path, size_t *len)
{
    size_t n = 0;
    char *b = test_read_file(path, &n);
    if (!b)
        fprintf(stderr, "cannot open %s\n", path);
    if (len)
        *len = n;
    return b;
}

static inline float *g_read_f32(const char *path, size_t *n_floats)
{
    size_t len = 0;
    char *b = g_read_file(path, &len);
    if (b && n_floats)
        *n_floats = len / sizeof(float);
    return (float *)b;
}

/* Parse up to max integers following the first occurrence of `key` in text
 * (separators: comma, space, newline, '['); stops at the first other char. */
static inline int g_parse_ids_after(const char *text, const char *key, int32_t *out, int max)
{
    const char *p = strstr(text, key);
    if (!p)
        return -1;
    p += strlen(key);
    int n = 0;
    while (n < max) {
        while (*p == ' ' || *p == ',' || *p == '[' || *p == '\n' || *p == '=' || *p == ':')
            p++;
        if (*p < '0' || *p > '9')
            break;
        out[n++] = (int32_t)strtol(p, (char **)&p, 10);
    }
    return n;
}

static inline double g_maxabs(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        if (d < 0)
            d = -d;
        if (!(d <= m))   /* NaN propagates */
            m = d;
    }
    return m;
}

static inline int g_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static inline struct glim_model *g_load(const char *path, int kernels)
{
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.kernels = kernels;
    mp.device = getenv("GLIM_TEST_DEVICE");   /* cuda for the gpu runs */
    struct glim_model *m = NULL;
    struct glim_err err = {0};
    if (glim_model_load(path, &mp, &m, &err) != GLIM_OK)
        fprintf(stderr, "load %s: %s\n", path, err.msg);
    return m;
}

static inline struct glim_session *g_session_with(struct glim_model *m, const struct glim_session_params *sp)
{
    struct glim_session *s = NULL;
    struct glim_err err = {0};
    if (glim_session_new(m, sp, &s, &err) != GLIM_OK)
        fprintf(stderr, "session: %s\n", err.msg);
    return s;
}

static inline struct glim_session *g_session(struct glim_model *m, int chunk, int kv_type)
{
    struct glim_session_params sp;
    glim_session_params_init(&sp);
    sp.n_chunk = chunk;
    sp.kv_type = kv_type;
    return g_session_with(m, &sp);
}

/* Feed ids (in chunks of `chunk`), logits of every position into out[n][V]. */
static inline int g_eval_all(struct glim_model *m, const int32_t *ids, int n, int chunk, int kv_type, float *out)
{
    struct glim_session *s = g_session(m, chunk, kv_type);
    if (!s)
        return -1;
    struct glim_err err = {0};
    int rc = glim_session_eval(s, ids, n, out, n, &err);
    if (rc)
        fprintf(stderr, "eval: %s\n", err.msg);
    glim_session_free(s);
    return rc;
}

/* Greedy: prompt, then n_gen steps. gen_ids[n_gen]; logits rows [n_gen][V]
 * (row k = logits that chose gen_ids[k]); either may be NULL. */
static inline int g_greedy(struct glim_model *m, const int32_t *ids, int n, int n_gen, int kv_type,
                    int32_t *gen_ids, float *rows)
{
    int V = glim_model_n_vocab(m);
    struct glim_session *s = g_session(m, 0, kv_type);
    float *lg = malloc((size_t)V * sizeof(float));
    struct glim_err err = {0};
    int rc = (!s || !lg) ? -1 : glim_session_eval(s, ids, n, lg, 1, &err);
    for (int k = 0; rc == 0 && k < n_gen; k++) {
        int32_t tok = g_argmax(lg, V);
        if (gen_ids)
            gen_ids[k] = tok;
        if (rows)
            memcpy(rows + (size_t)k * V, lg, (size_t)V * sizeof(float));
        if (k + 1 < n_gen)
            rc = glim_session_eval(s, &tok, 1, lg, 1, &err);
    }
    if (rc)
        fprintf(stderr, "greedy: %s\n", err.msg);
    free(lg);
    glim_session_free(s);
    return rc;
}

/* glimmer-tiny MANIFEST tolerance of a variant ("F32", "Q4_K_M" ...); -1 if absent */
static inline double g_manifest_tol(const char *v)
{
    char *man = g_read_file(testdata("glimmer-tiny/MANIFEST"), NULL);
    char key[64];
    snprintf(key, sizeof key, "glimmer-tiny-%s.gguf", v);
    const char *p = man ? strstr(man, key) : NULL, *nl = p ? strchr(p, '\n') : NULL;
    double tol = -1;
    if (nl) {
        while (nl > p && nl[-1] != ' ')
            nl--;
        tol = strtod(nl, NULL);
    }
    free(man);
    return tol;
}

/* The golden's greedy ids and top1-top2 margins ("greedy": {"torch": [...], ...}); 0 on success */
static inline int g_golden_greedy(const char *json, int32_t *ids, float *margin, int n)
{
    const char *g = strstr(json, "\"greedy\"");
    if (!g || g_parse_ids_after(g, "\"torch\":", ids, n) != n)
        return -1;
    const char *mg = strstr(json, "\"torch_top1_minus_top2\":");
    for (int k = 0; mg && k < n; k++) {
        mg = strpbrk(mg + (k ? 1 : 25), "0123456789");
        margin[k] = mg ? strtof(mg, (char **)&mg) : 0;
    }
    return mg ? 0 : -1;
}

/* glimmer-tiny variant v on model m against the torch goldens with the MANIFEST tolerance:
 * prefill in chunks of 16 and a teacher-forced greedy run (the golden ids are fed, so
 * every step is comparable); the argmax must equal the golden's wherever its top1-top2
 * margin exceeds the tolerance. label names the path in the printed line. */
static inline void g_check_glimmer_tol(struct glim_model *m, const char *v, const char *label,
                                       const int32_t *prompt, int np)
{
    enum { V = 512, NG = 32 };
    char rel[128];
    size_t n_pre = 0, n_gre = 0;
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.torch.prefill.f32", v);
    float *pre = g_read_f32(testdata(rel), &n_pre);
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.torch.greedy.f32", v);
    float *gre = g_read_f32(testdata(rel), &n_gre);
    snprintf(rel, sizeof rel, "glimmer-tiny/glimmer-tiny-%s.golden.json", v);
    char *json = g_read_file(testdata(rel), NULL);
    double tol = g_manifest_tol(v);
    float *out = malloc(sizeof(float) * 80 * V), row[V];
    struct glim_session *s = NULL;
    CHECK(m && pre && gre && json && tol > 0);
    CHECK_EQ(n_pre, (size_t)80 * V);
    CHECK_EQ(n_gre, (size_t)NG * V);
    if (!m || !pre || !gre || !json || n_pre != (size_t)80 * V || n_gre != (size_t)NG * V)
        goto done;
    int32_t ids[NG];
    float margin[NG] = {0};
    CHECK_EQ(g_golden_greedy(json, ids, margin, NG), 0);
    CHECK_EQ(g_eval_all(m, prompt, np, 16, GLIM_KV_F32, out), 0);
    double d_pre = g_maxabs(out, pre, (size_t)80 * V), d_gre = 0;
    s = g_session(m, 0, GLIM_KV_F32);
    struct glim_err err = {0};
    CHECK_EQ(glim_session_eval(s, prompt, np, row, 1, &err), 0);
    int checked = 0, agree = 0;
    for (int k = 0; k < NG; k++) {
        double d = g_maxabs(row, gre + (size_t)k * V, V);
        d_gre = d > d_gre ? d : d_gre;
        if (margin[k] > tol) {
            checked++;
            agree += g_argmax(row, V) == ids[k];
        }
        if (k + 1 < NG)
            CHECK_EQ(glim_session_eval(s, &ids[k], 1, row, 1, &err), 0);
    }
    printf("  glimmer-tiny-%-6s %s: prefill %.3g greedy %.3g (tol %.3g), argmax %d/%d where margin > tol\n",
           v, label, d_pre, d_gre, tol, agree, checked);
    CHECK(d_pre <= tol);
    CHECK(d_gre <= tol);
    CHECK_EQ(agree, checked);
done:
    glim_session_free(s);
    free(out);
    free(pre);
    free(gre);
    free(json);
}

#endif
