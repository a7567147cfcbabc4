/* test_toolcall.c — runtime.md §5.5 and §4.6 vectors, gguf-contract §5.3
 * cases, and the streaming parser fed at every split point and byte by byte. */
#include <string.h>

#include "chat/reasoning.h"
#include "chat/toolcall.h"
#include "chat/toolcall_json.h"
#include "atem_vectors.h"   /* the vectors as data: VECS, PVECS */
#include "harness.h"

static void check_parse(const struct vec *v)
{
    struct strbuf normal;
    strbuf_init(&normal);
    struct toolcall_result r = { 0 };
    size_t n = strlen(v->input);
    CHECK_EQ(toolcall_parse(v->input, n, v->tools, v->n_tools, &normal, &r, NULL), GLIM_OK);
    int n_want = 0;
    while (n_want < 3 && v->args[n_want])
        n_want++;
    int bad = r.n_calls != n_want;
    for (int k = 0; !bad && k < n_want; k++)
        bad |= r.calls[k].index != k || strcmp(r.calls[k].arguments, v->args[k]) != 0;
    const char *want_normal = v->normal == NULL ? NULL : !strcmp(v->normal, UNCHANGED) ? v->input : v->normal;
    if (want_normal)
        bad |= strcmp(strbuf_cstr(&normal), want_normal) != 0;
    if (bad) {
        fprintf(stderr, "%s: normal [%s], %d calls:", v->id, strbuf_cstr(&normal), r.n_calls);
        for (int k = 0; k < r.n_calls; k++)
            fprintf(stderr, " %s", r.calls[k].arguments);
        fprintf(stderr, "\n");
    }
    CHECK(!bad);
    toolcall_result_clear(&r);
    strbuf_clear(&normal);
}

static void test_spec_vectors(void)
{
    for (size_t k = 0; k < sizeof VECS / sizeof VECS[0]; k++)
        check_parse(&VECS[k]);
}

static void test_fresh_index(void)   /* U30 */
{
    for (int rep = 0; rep < 2; rep++) {
        struct toolcall_result r = { 0 };
        const char *s = VECS[0].input;
        CHECK_EQ(toolcall_process(s, strlen(s), &(struct toolcall_config){ TOOLS(T1), NULL, 0, 1 }, &r, NULL), GLIM_OK);
        CHECK_EQ(r.n_calls, 1);
        CHECK_EQ(r.n_calls ? r.calls[0].index : -1, 0);
        CHECK(r.n_calls && strlen(r.calls[0].id) == 37 && !strncmp(r.calls[0].id, "call-", 5));
        toolcall_result_clear(&r);
    }
}

/* ---- pipeline-level expectations ---- */

static bool str_eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static void test_pipeline_vectors(void)
{
    for (size_t k = 0; k < sizeof PVECS / sizeof PVECS[0]; k++) {
        const struct pvec *v = &PVECS[k];
        struct toolcall_result r = { 0 };
        struct toolcall_config cfg = { v->tools, v->n_tools, NULL, 0, 7 };
        CHECK_EQ(toolcall_process(v->input, strlen(v->input), &cfg, &r, NULL), GLIM_OK);
        int n_want = 0;
        while (n_want < 3 && v->args[n_want])
            n_want++;
        bool ok = str_eq(r.reasoning, v->reasoning) && str_eq(r.content, v->content) && r.n_calls == n_want;
        for (int c = 0; ok && c < n_want; c++)
            ok = !strcmp(r.calls[c].arguments, v->args[c]);
        if (!ok)
            fprintf(stderr, "pipeline %zu: reasoning [%s] content [%s] calls %d\n", k,
                    r.reasoning ? r.reasoning : "(null)", r.content ? r.content : "(null)", r.n_calls);
        CHECK(ok);
        toolcall_result_clear(&r);
    }
}

/* ---- streaming ---- */

struct collect {
    struct strbuf r, c, args;
    int           n_start, n_end, n_markup, is_finishing;
};

static int on_event(void *ctx, const struct toolcall_event *ev)
{
    struct collect *c = ctx;
    switch (ev->kind) {
    case TOOLCALL_EV_REASONING: strbuf_append(&c->r, ev->text, ev->len); break;
    case TOOLCALL_EV_CONTENT:
        strbuf_append(&c->c, ev->text, ev->len);
        if (!c->is_finishing) {   /* before finish nothing tag-like may leak */
            struct strbuf t;
            strbuf_init(&t);
            strbuf_append(&t, ev->text, ev->len);
            c->n_markup += strstr(strbuf_cstr(&t), "<atem") || strstr(strbuf_cstr(&t), "<|");
            strbuf_clear(&t);
        }
        break;
    case TOOLCALL_EV_CALL_START: c->n_start++; strbuf_puts(&c->args, ev->name); break;
    case TOOLCALL_EV_CALL_ARGS: strbuf_append(&c->args, ev->text, ev->len); break;
    case TOOLCALL_EV_CALL_END: c->n_end++; break;
    }
    return GLIM_OK;
}

/* Feed s cut at the given points; compare everything with the one-shot result. */
static int stream_once(const char *s, size_t n, const size_t *cuts, int n_cuts, const struct toolcall_config *cfg,
                       const struct toolcall_result *want)
{
    struct collect col;
    memset(&col, 0, sizeof col);
    struct toolcall_stream *st = NULL;
    if (toolcall_stream_new(cfg, on_event, &col, &st, NULL))
        return 1;
    size_t at = 0;
    int bad = 0;
    for (int k = 0; k <= n_cuts; k++) {
        size_t to = k < n_cuts ? cuts[k] : n;
        bad |= toolcall_stream_feed(st, s + at, to - at, NULL) != GLIM_OK;
        at = to;
    }
    col.is_finishing = 1;
    bad |= toolcall_stream_finish(st, NULL) != GLIM_OK;
    const struct toolcall_result *got = toolcall_stream_result(st);
    /* with tools off, ATEM text is ordinary content and may stream */
    bad |= toolcall_stream_is_inconsistent(st) || (cfg->n_tools && col.n_markup != 0);
    if (bad && getenv("TOOLCALL_DEBUG"))
        fprintf(stderr, "cut %zu: inconsistent %d markup %d\n", n_cuts ? cuts[0] : 0,
                toolcall_stream_is_inconsistent(st), col.n_markup);
    bad |= !got || !str_eq(got->reasoning, want->reasoning) || !str_eq(got->content, want->content);
    bad |= strcmp(strbuf_cstr(&col.r), want->reasoning ? want->reasoning : "") != 0;
    bad |= strcmp(strbuf_cstr(&col.c), want->content ? want->content : "") != 0;
    bad |= !got || got->n_calls != want->n_calls || col.n_start != want->n_calls || col.n_end != want->n_calls;
    struct strbuf wargs;
    strbuf_init(&wargs);
    for (int k = 0; got && !bad && k < want->n_calls; k++) {
        bad |= strcmp(got->calls[k].arguments, want->calls[k].arguments) != 0;
        bad |= strcmp(got->calls[k].id, want->calls[k].id) != 0;
        strbuf_puts(&wargs, want->calls[k].name);
        strbuf_puts(&wargs, want->calls[k].arguments);
    }
    bad |= strcmp(strbuf_cstr(&wargs), strbuf_cstr(&col.args)) != 0;
    strbuf_clear(&wargs);
    strbuf_clear(&col.r);
    strbuf_clear(&col.c);
    strbuf_clear(&col.args);
    toolcall_stream_free(st);
    return bad;
}

static void check_splits_cfg(const char *id, const char *s, const struct toolcall_config *cfg)
{
    size_t n = strlen(s);
    struct toolcall_result want = { 0 };
    CHECK_EQ(toolcall_process(s, n, cfg, &want, NULL), GLIM_OK);
    int n_bad = 0;
    for (size_t k = 0; k <= n; k++)
        n_bad += stream_once(s, n, &k, 1, cfg, &want);
    size_t *bytes = malloc(n * sizeof *bytes);
    for (size_t k = 0; k < n; k++)
        bytes[k] = k + 1;
    n_bad += stream_once(s, n, bytes, n ? (int)n - 1 : 0, cfg, &want);
    free(bytes);
    if (n_bad)
        fprintf(stderr, "%s: %d split runs disagree with the one-shot result\n", id, n_bad);
    CHECK_EQ(n_bad, 0);
    toolcall_result_clear(&want);
}

static void check_splits(const char *id, const char *s, const struct toolcall_tool *tools, int n_tools)
{
    check_splits_cfg(id, s, &(struct toolcall_config){ tools, n_tools, NULL, 0, 99 });
}

/* The content filter deletes control tokens before it cuts at a special
 * token, so a deleted token can join a '<' to the text after it; the stream
 * must hold such a '<' back while the token in between is still arriving.
 * "\x1e" is whitespace to the trim (str.isspace). */
static const char *const SPECIALS[] = { "<|eot|>", "<|end_of_text|>", "<|patch|>", "<|start|>" };

static const struct {
    const char *input, *content;   /* content NULL = none */
} JOINS[] = {
    { "\x01\x06<<|channel|>|patch|>\x1e\xa8", "\x01\x06" },   /* fuzz_toolcall crash-097f51dd */
    { "a<<|eot|>|patch|>", "a" },
    { "x<<|eot|>|eot|>", "x" },                             /* the joined <|eot|> is cut, not deleted */
    { "<|eo<|start|>t|>y", NULL },
    { "Hello <|patch|> world", "Hello" },
    { "to=user" M "<<", "<<" },                              /* a '<' inside a complete header stays settled */
    { "a<" "<|channel|><|channel|><|channel|><|channel|><|channel|><|channel|><|channel|><|channel|>"
      "<|channel|><|channel|><|channel|><|channel|><|channel|><|channel|><|channel|><|channel|>"
      "<|channel|><|channel|><|channel|><|channel|><|channel|><|channel|><|channel|><|channel|>|patch|>b", "a" },
};

static void test_stream_joined_specials(void)
{
    for (size_t k = 0; k < sizeof JOINS / sizeof JOINS[0]; k++) {
        for (int has_tools = 0; has_tools < 2; has_tools++) {
            struct toolcall_config cfg = { has_tools ? T1 : NULL, has_tools ? 2 : 0, SPECIALS, 4, 99 };
            struct toolcall_result r = { 0 };
            CHECK_EQ(toolcall_process(JOINS[k].input, strlen(JOINS[k].input), &cfg, &r, NULL), GLIM_OK);
            CHECK(str_eq(r.content, JOINS[k].content));
            toolcall_result_clear(&r);
            check_splits_cfg("joined special", JOINS[k].input, &cfg);
        }
    }
}

static void test_stream_splits(void)
{
    for (size_t k = 0; k < sizeof VECS / sizeof VECS[0]; k++) {
        check_splits(VECS[k].id, VECS[k].input, VECS[k].tools, VECS[k].n_tools);
        check_splits(VECS[k].id, VECS[k].input, NULL, 0);   /* tools off: all content */
    }
    for (size_t k = 0; k < sizeof PVECS / sizeof PVECS[0]; k++)
        check_splits("pipeline", PVECS[k].input, PVECS[k].tools, PVECS[k].n_tools);
}

/* Deltas arrive before finish, not only at the end. */
static void test_stream_is_incremental(void)
{
    struct collect col;
    memset(&col, 0, sizeof col);
    struct toolcall_stream *st = NULL;
    struct toolcall_config cfg = { TOOLS(T_GW), NULL, 0, 3 };
    CHECK_EQ(toolcall_stream_new(&cfg, on_event, &col, &st, NULL), GLIM_OK);
    const char *a = " to=self" M "Thinking hard", *b = " now" EOM S "assistant to=user" M "Hello there", *c = "<atem:fun";
    toolcall_stream_feed(st, a, strlen(a), NULL);
    CHECK(strcmp(strbuf_cstr(&col.r), "Thinking hard") == 0);
    toolcall_stream_feed(st, b, strlen(b), NULL);
    CHECK(strcmp(strbuf_cstr(&col.r), "Thinking hard now") == 0);
    CHECK(strcmp(strbuf_cstr(&col.c), "Hello there") == 0);
    toolcall_stream_feed(st, c, strlen(c), NULL);
    CHECK(strcmp(strbuf_cstr(&col.c), "Hello there") == 0);
    CHECK_EQ(toolcall_stream_finish(st, NULL), GLIM_OK);
    CHECK_EQ(toolcall_stream_feed(st, "x", 1, NULL), GLIM_EINVAL);
    toolcall_stream_free(st);
    strbuf_clear(&col.r);
    strbuf_clear(&col.c);
    strbuf_clear(&col.args);
}

static void test_float_repr(void)
{
    const struct { double x; const char *want; } cases[] = {
        { 3.14, "3.14" }, { 1000, "1000.0" }, { 0.5, "0.5" }, { 1, "1.0" }, { 1e16, "1e+16" }, { 1e-5, "1e-05" },
        { 1e-4, "0.0001" }, { 123456789012345680.0, "1.2345678901234568e+17" }, { -0.0, "-0.0" },
        { 1234567890123456.0, "1234567890123456.0" }, { 0.1 + 0.2, "0.30000000000000004" }, { -2.5e-300, "-2.5e-300" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct strbuf sb;
        strbuf_init(&sb);
        toolcall_json_float(&sb, cases[k].x);
        if (strcmp(strbuf_cstr(&sb), cases[k].want))
            fprintf(stderr, "repr: got %s want %s\n", strbuf_cstr(&sb), cases[k].want);
        CHECK(!strcmp(strbuf_cstr(&sb), cases[k].want));
        strbuf_clear(&sb);
    }
}

static void test_string_escape(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    toolcall_json_string(&sb, "a\"b\\c\n\t\x01\x7f\xff", 10);
    CHECK(!strcmp(strbuf_cstr(&sb), "\"a\\\"b\\\\c\\n\\t\\u0001\x7f\xef\xbf\xbd\""));
    strbuf_clear(&sb);
}

int main(void)
{
    RUN(test_spec_vectors);
    RUN(test_fresh_index);
    RUN(test_pipeline_vectors);
    RUN(test_stream_splits);
    RUN(test_stream_joined_specials);
    RUN(test_stream_is_incremental);
    RUN(test_float_repr);
    RUN(test_string_escape);
    return DONE();
}
