/* test_toolcall.c — runtime.md §5.5 and §4.6 vectors, gguf-contract §5.3
 * cases, and the streaming parser fed at every split point and byte by byte. */
#include <string.h>

#include "chat/reasoning.h"
#include "chat/toolcall.h"
#include "chat/toolcall_json.h"
#include "harness.h"

#define M   "<|message|>"
#define S   "<|start|>"
#define EOM "<|eom|>"
#define EOT "<|eot|>"
#define P(k, v) "<atem:parameter name=\"" k "\">" v "</atem:parameter>\n"
#define INV(name, params) "<atem:invoke name=\"" name "\">\n" params "</atem:invoke>\n"
#define BLK(invokes) "<atem:function_calls>\n" invokes "</atem:function_calls>"
#define B(name, params) BLK(INV(name, params))

#define TOOLS(arr) arr, (int)(sizeof arr / sizeof arr[0])

static const struct toolcall_param WEATHER_P[] = { { "city", "string" }, { "units", "string" } };
static const struct toolcall_param ADD_P[] = { { "a", "integer" }, { "b", "integer" } };
static const struct toolcall_tool T1[] = { { "get_weather", WEATHER_P, 2 }, { "add", ADD_P, 2 } };
static const struct toolcall_param CALC_X[] = { { "x", "number" } };
static const struct toolcall_tool T_CALC[] = { { "calc", CALC_X, 1 } };
static const struct toolcall_param T2_P[] = { { "n", "integer" }, { "x", "number" }, { "flag", "boolean" } };
static const struct toolcall_tool T2[] = { { "calc", T2_P, 3 } };
static const struct toolcall_param FLAG_P[] = { { "flag", "boolean" } };
static const struct toolcall_tool T_FLAG[] = { { "f", FLAG_P, 1 } };
static const struct toolcall_param ID_P[] = { { "id", "string" } };
static const struct toolcall_tool T_ID[] = { { "f", ID_P, 1 } };
static const struct toolcall_param S_P[] = { { "s", "string" } };
static const struct toolcall_tool T_S[] = { { "f", S_P, 1 } };
static const struct toolcall_tool T_NONE[] = { { "f", NULL, 0 } };
static const struct toolcall_param LD_P[] = { { "lst", "array" }, { "d", "object" } };
static const struct toolcall_tool T_LD[] = { { "f", LD_P, 2 } };
static const struct toolcall_param CODE_P[] = { { "code", "string" } };
static const struct toolcall_tool T_CODE[] = { { "code_tool", CODE_P, 1 } };
static const struct toolcall_param EXPR_P[] = { { "expr", "string" } };
static const struct toolcall_tool T_EXPR[] = { { "f", EXPR_P, 1 } };
static const struct toolcall_param NUM_P[] = { { "x", "number" }, { "y", "number" }, { "z", "number" },
                                               { "w", "number" }, { "v", "number" }, { "u", "number" } };
static const struct toolcall_tool T_NUM[] = { { "f", NUM_P, 6 } };
static const struct toolcall_param BOOL_P[] = { { "a", "boolean" }, { "b", "boolean" }, { "c", "boolean" } };
static const struct toolcall_tool T_BOOL[] = { { "f", BOOL_P, 3 } };
static const struct toolcall_param GW_P[] = { { "city", "string" }, { "days", "integer" } };
static const struct toolcall_tool T_GW[] = { { "get_weather", GW_P, 2 } };
static const struct toolcall_param SF_P[] = { { "arg1", "integer" } };
static const struct toolcall_tool T_SF[] = { { "special_function", SF_P, 1 } };

struct vec {
    const char                 *id, *input;
    const struct toolcall_tool *tools;
    int                         n_tools;
    const char                 *normal;    /* NULL: not stated by the spec */
    const char                 *args[3];   /* expected calls, NULL-terminated */
};

#define UNCHANGED "\x01"   /* normal must equal the input */

static const struct vec VECS[] = {
    { "U1", " to=get_weather" M B("get_weather", P("city", "Paris")) EOM, TOOLS(T1), "", { "{\"city\": \"Paris\"}" } },
    { "U2", " to=get_weather" M B("get_weather", P("city", "Paris")), TOOLS(T1), NULL, { "{\"city\": \"Paris\"}" } },
    { "U3", S "assistant to=add" M B("add", P("a", "1") P("b", "2")) EOT, TOOLS(T1), NULL, { "{\"a\": 1, \"b\": 2}" } },
    { "U4", " to=get_weather constrain=json" M B("get_weather", P("city", "SF")) EOM, TOOLS(T1), "", { "{\"city\": \"SF\"}" } },
    { "U5", B("get_weather", P("city", "Paris")), TOOLS(T1), NULL, { "{\"city\": \"Paris\"}" } },
    { "U6", " to=add" M BLK(INV("add", P("a", "1") P("b", "2")) INV("add", P("a", "3") P("b", "4"))) EOT, TOOLS(T1),
      NULL, { "{\"a\": 1, \"b\": 2}", "{\"a\": 3, \"b\": 4}" } },
    { "U7", " to=add" M B("add", P("a", "1") P("b", "2")) EOM S "assistant to=add" M B("add", P("a", "3") P("b", "4")) EOT,
      TOOLS(T1), "", { "{\"a\": 1, \"b\": 2}", "{\"a\": 3, \"b\": 4}" } },
    { "U8", " to=get_weather" M B("get_weather", P("city", "Paris") P("units", "celsius")), TOOLS(T1), NULL,
      { "{\"city\": \"Paris\", \"units\": \"celsius\"}" } },
    { "U9", "Checking now. to=add" M B("add", P("a", "5") P("b", "6")) EOM, TOOLS(T1), "Checking now.", { "{\"a\": 5, \"b\": 6}" } },
    { "U10", " to=self" M "Let me check the weather." EOM S "assistant to=get_weather" M B("get_weather", P("city", "Paris")) EOM,
      TOOLS(T1), "to=self" M "Let me check the weather." EOM, { "{\"city\": \"Paris\"}" } },
    { "U11", "The weather is nice today.", TOOLS(T1), UNCHANGED, { NULL } },
    { "U12", " to=delete_everything" M B("delete_everything", P("target", "all")) EOM, TOOLS(T1), UNCHANGED, { NULL } },
    { "U13", "Sure! <atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Paris",
      TOOLS(T1), "Sure!", { NULL } },
    { "U14", "The capital of France is Paris.", TOOLS(T1), UNCHANGED, { NULL } },
    { "U15", " to=add" M B("add", P("a", "2") P("b", "3")), TOOLS(T1), NULL, { "{\"a\": 2, \"b\": 3}" } },
    { "U16", B("calc", P("x", "3.14")), TOOLS(T_CALC), NULL, { "{\"x\": 3.14}" } },
    { "U17", B("f", P("flag", "true")), TOOLS(T_FLAG), NULL, { "{\"flag\": true}" } },
    { "U18", B("f", P("flag", "False")), TOOLS(T_FLAG), NULL, { "{\"flag\": false}" } },
    { "U19", B("f", P("id", "1234")), TOOLS(T_ID), NULL, { "{\"id\": \"1234\"}" } },
    { "U20", B("f", P("s", "  hi  ")), TOOLS(T_S), NULL, { "{\"s\": \"  hi  \"}" } },
    { "U21", B("f", P("n", "42") P("items", "[1, 2]")), TOOLS(T_NONE), NULL, { "{\"n\": 42, \"items\": [1, 2]}" } },
    { "U22", B("f", P("lst", "[1, 2]") P("d", "{\"k\": \"v\"}")), TOOLS(T_LD), NULL, { "{\"lst\": [1, 2], \"d\": {\"k\": \"v\"}}" } },
    { "U23", B("calc", P("n", "10.0")), TOOLS(T2), NULL, { "{\"n\": \"10.0\"}" } },
    { "U24", B("calc", P("flag", "1")), TOOLS(T2), NULL, { "{\"flag\": \"1\"}" } },
    { "U25", B("calc", P("n", "1_000")), TOOLS(T2), NULL, { "{\"n\": \"1_000\"}" } },
    { "U26a", B("calc", P("x", "NaN")), TOOLS(T2), NULL, { "{\"x\": \"NaN\"}" } },
    { "U26b", B("calc", P("x", "Infinity")), TOOLS(T2), NULL, { "{\"x\": \"Infinity\"}" } },
    { "U26c", B("calc", P("x", "-Infinity")), TOOLS(T2), NULL, { "{\"x\": \"-Infinity\"}" } },
    { "U26d", B("calc", P("x", "1e999")), TOOLS(T2), NULL, { "{\"x\": \"1e999\"}" } },
    { "U27", B("code_tool", P("code", "a </atem:parameter> b")), TOOLS(T_CODE), NULL, { "{\"code\": \"a </atem:parameter> b\"}" } },
    { "U28", B("code_tool", P("code", "x = <atem:invoke name=\"foo\">")), TOOLS(T_CODE), NULL,
      { "{\"code\": \"x = <atem:invoke name=\\\"foo\\\">\"}" } },
    { "U29", B("f", P("expr", "a < b && c > d")), TOOLS(T_EXPR), NULL, { "{\"expr\": \"a < b && c > d\"}" } },
    { "X1", B("add", P("a", "1")) B("nope", P("x", "1")), TOOLS(T1), UNCHANGED, { NULL } },
    { "X2", B("add", P("c", "7")), TOOLS(T1), "", { "{\"c\": 7}" } },
    { "X3", B("add", P("a", "1") P("a", "2")), TOOLS(T1), "", { "{\"a\": 2}" } },
    { "X4", B("add", ""), TOOLS(T1), "", { "{}" } },
    { "X5a", B("add", P("a", " 5 ")), TOOLS(T1), "", { "{\"a\": 5}" } },
    { "X5b", B("add", P("a", "+5")), TOOLS(T1), "", { "{\"a\": 5}" } },
    { "X6", "<atem:invoke name=\"add\">\n<atem:parameter name=\"a\">1</atem:parameter>\n</atem:invoke>", TOOLS(T1), "",
      { "{\"a\": 1}" } },
    { "X7", B("add", P("a", "1")) "\nDone.", TOOLS(T1), "", { "{\"a\": 1}" } },
    { "X8", "<atem:function_calls>\n" INV("add", P("a", "1")) "junk\n</atem:function_calls>", TOOLS(T1), "", { NULL } },
    { "X9", B("", P("a", "1")), TOOLS(T1), UNCHANGED, { NULL } },
    { "X10", "hello <atem:invoke", TOOLS(T1), "hello", { NULL } },
    { "X11", B("f", P("n", "42") P("items", "[1, 2]") P("s", "hello") P("t", "true") P("nul", "null") P("nan", "NaN") P("f", "1.5")),
      TOOLS(T_NONE), NULL,
      { "{\"n\": 42, \"items\": [1, 2], \"s\": \"hello\", \"t\": true, \"nul\": null, \"nan\": \"NaN\", \"f\": 1.5}" } },
    { "X12", B("f", P("x", "3.14") P("y", "1e3") P("z", ".5") P("w", "1.") P("v", "0x10") P("u", " 2 ")), TOOLS(T_NUM), NULL,
      { "{\"x\": 3.14, \"y\": 1000.0, \"z\": 0.5, \"w\": 1.0, \"v\": \"0x10\", \"u\": 2.0}" } },
    { "X13", B("f", P("a", "TRUE") P("b", " false ") P("c", "yes")), TOOLS(T_BOOL), NULL,
      { "{\"a\": true, \"b\": false, \"c\": \"yes\"}" } },
    { "X14", B("f", P("s", "h\xc3\xa9llo \xe2\x9c\x93")), TOOLS(T_S), NULL, { "{\"s\": \"h\xc3\xa9llo \xe2\x9c\x93\"}" } },
    /* glim extras: nested non-finite values void the calls (json.dumps raises) */
    { "G1", "pre " B("f", P("items", "[1, NaN]")), TOOLS(T_NONE), "pre", { NULL } },
    { "G2", B("f", P("o", "{\"a\":[1,{\"b\":\"\\u00e9\\n\"}],\"c\":-0,\"d\":1E2}")), TOOLS(T_NONE), NULL,
      { "{\"o\": {\"a\": [1, {\"b\": \"\xc3\xa9\\n\"}], \"c\": 0, \"d\": 100.0}}" } },
};

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

struct pvec {
    const char                 *input;
    const struct toolcall_tool *tools;
    int                         n_tools;
    const char                 *reasoning, *content;   /* NULL = none */
    const char                 *args[3];
};

static const struct pvec PVECS[] = {
    /* §4.6 (no tools) */
    { " to=user" M "Paris.", NULL, 0, NULL, "Paris.", { NULL } },
    { " to=self" M "We should calculate first." EOM S "assistant to=user" M "The answer is 42." EOT, NULL, 0,
      "We should calculate first.", "The answer is 42.", { NULL } },
    { "to=self" M "First step." EOM S "assistant to=self" M "Second step." EOM S "assistant to=user" M "Done." EOT, NULL, 0,
      "First step.\n\nSecond step.", "Done.", { NULL } },
    { "Visible prefix.\nto=self" M "Private step." EOM S "assistant to=user" M "Visible final." EOT, NULL, 0,
      "Private step.", "Visible prefix.\n\nVisible final.", { NULL } },
    { "The capital of France is Paris.", NULL, 0, NULL, "The capital of France is Paris.", { NULL } },
    { " to=self" M "Only thinking, truncated", NULL, 0, "Only thinking, truncated", NULL, { NULL } },
    { " to=functions.get_weather" M "{\"city\": \"Paris\"}", NULL, 0, NULL, "{\"city\": \"Paris\"}", { NULL } },
    { " to=functions.get_weather constrain=json" M "{\"city\": \"Paris\"}", NULL, 0, NULL, "{\"city\": \"Paris\"}", { NULL } },
    { "Test complete." EOM, NULL, 0, NULL, "Test complete.", { NULL } },
    { "Final answer." EOT, NULL, 0, NULL, "Final answer.", { NULL } },
    { "Use goto=label; set auto=true; field photo=front.", NULL, 0, NULL, "Use goto=label; set auto=true; field photo=front.", { NULL } },
    { S "assistant to=user" M "x<|channel|>y", NULL, 0, NULL, "xy", { NULL } },
    { "a to=user" M "b", NULL, 0, NULL, "a\n\nb", { NULL } },
    /* R1 */
    { " to=self" M "We should check the weather." EOM S "assistant to=get_weather" M B("get_weather", P("city", "Paris")) EOM,
      TOOLS(T_GW), "We should check the weather.", NULL, { "{\"city\": \"Paris\"}" } },
    /* gguf-contract §5.3 (llama.cpp cases), judged by runtime.md where they differ */
    { " to=user" M "Hello, world!\nWhat's up?" EOT, TOOLS(T_SF), NULL, "Hello, world!\nWhat's up?", { NULL } },   /* T1 */
    { " to=user" M "Hello, world!\nWhat's up?" EOM S "assistant to=special_function" M B("special_function", P("arg1", "1")),
      TOOLS(T_SF), NULL, "Hello, world!\nWhat's up?", { "{\"arg1\": 1}" } },                                  /* T2 */
    /* T3: llama.cpp keeps a block inside the user answer as content; runtime.md §5.4 parses it */
    { " to=user" M "You invoke it like this:\n" B("special_function", P("arg1", "1")) EOT, TOOLS(T_SF), NULL,
      "You invoke it like this:", { "{\"arg1\": 1}" } },
    { " to=self" M "I could use " B("special_function", P("arg1", "1")) " here" EOM S "assistant to=user" M "Hello!" EOT,
      TOOLS(T_SF), "I could use " B("special_function", P("arg1", "1")) " here", "Hello!", { NULL } },       /* T4 */
    { " to=self" M "I'm\nthinking" EOM S "assistant to=user" M "Hello!" EOT, TOOLS(T_GW), "I'm\nthinking", "Hello!", { NULL } },
    { M "No recipient given" EOT, TOOLS(T_GW), NULL, "No recipient given", { NULL } },                      /* P3 */
    { " to=self" M "Need weather." EOM S "assistant to=get_weather" M B("get_weather", P("city", "Paris") P("days", "2")) EOT,
      TOOLS(T_GW), "Need weather.", NULL, { "{\"city\": \"Paris\", \"days\": 2}" } },                         /* P4 */
    { " to=get_weather" M B("get_weather", P("city", "Paris")) EOM S "assistant to=get_weather" M B("get_weather", P("city", "Rome")),
      TOOLS(T_GW), NULL, NULL, { "{\"city\": \"Paris\"}", "{\"city\": \"Rome\"}" } },                      /* P5 */
    { " to=user" M "Let me check." EOM S "assistant to=get_weather" M B("get_weather", P("city", " New York ") P("days", "3")),
      TOOLS(T_GW), NULL, "Let me check.", { "{\"city\": \" New York \", \"days\": 3}" } },                    /* P7 */
    { " to=functions.get_weather" M B("get_weather", P("city", "Oslo")), TOOLS(T_GW), NULL, NULL, { "{\"city\": \"Oslo\"}" } },
    /* P9: llama.cpp joins reasoning with no separator; runtime.md §4.6 uses a blank line */
    { " to=self" M "hmm" EOM S "assistant to=self" M "more" EOM S "assistant to=user" M "ok" EOT, TOOLS(T_GW),
      "hmm\n\nmore", "ok", { NULL } },
    /* undefined tool: the raw text comes back as content after the filter */
    { " to=nope" M B("nope", P("x", "1")), TOOLS(T_GW), NULL, B("nope", P("x", "1")), { NULL } },
};

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
