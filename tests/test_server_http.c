/*
 * test_server_http.c — glim serve in-process on a free loopback port, driven
 * over real sockets: basic shapes, 1000 malformed requests (all 4xx, server
 * still serving), every routing/ATEM vector through the whole HTTP path in
 * test-output mode (non-stream and stream, against toolcall_process), warm
 * resume (only new tokens prefilled), session isolation under 16 concurrent
 * clients, and capacity (--max-sessions 2: LRU eviction, 429 when all busy).
 */
#include "harness.h"

#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <pthread.h>

#include "server/srv.h"
#include "server_client.h"
#include "atem_vectors.h"   /* last: it defines short macros (M, S, P, B) */

static struct srv *SRV;
static int PORT;

static json_t *post_json(const char *path, json_t *body, const char *headers, int *status)
{
    char *s = json_dumps(body, JSON_COMPACT);
    struct http_answer a = http_post(PORT, path, s, headers);
    free(s);
    *status = a.status;
    json_t *o = json_loads(a.body, 0, NULL);
    http_answer_clear(&a);
    return o;
}

static long long metric(const char *name) { return http_metric(PORT, name); }

static void test_basic(void)
{
    struct http_answer a = http_call(PORT, "GET", "/health", "", 0, NULL);
    CHECK_EQ(a.status, 200);
    CHECK(strstr(a.body, "\"ok\"") != NULL);
    http_answer_clear(&a);
    a = http_call(PORT, "GET", "/v1/models", "", 0, NULL);
    CHECK_EQ(a.status, 200);
    CHECK(strstr(a.body, "\"test-model\"") != NULL);
    http_answer_clear(&a);
    int st;
    json_t *req = json_pack("{s:[{s:s, s:s}], s:i}", "messages", "role", "user", "content", "Once upon a time",
                            "max_tokens", 8);
    json_t *r = post_json("/v1/chat/completions", req, NULL, &st);
    CHECK_EQ(st, 200);
    json_t *u = json_object_get(r, "usage");
    CHECK_EQ(json_integer_value(json_object_get(u, "completion_tokens")), 8);
    CHECK_EQ(json_integer_value(json_object_get(u, "total_tokens")),
             json_integer_value(json_object_get(u, "prompt_tokens")) + 8);
    json_t *msg = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
    CHECK(json_is_string(json_object_get(msg, "content")));
    json_decref(r);
    json_decref(req);
}

/* ---- malformed corpus ----------------------------------------------------- */

static uint64_t rng = 12345;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static const char *const GOOD = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],\"max_tokens\":2}";

static void bad_body(int i, struct strbuf *sb)
{
    static const char *const wrong[] = {
        "{\"messages\":5}", "{\"messages\":\"hi\"}", "{\"messages\":{}}", "{\"messages\":[]}", "{\"messages\":[5]}",
        "{\"messages\":[{\"content\":\"x\"}]}", "{\"messages\":[{\"role\":7,\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":5}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[5]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":3}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":-1}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":0}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":-3}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"9\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-7}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":5}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"yes\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"function\":{}}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":5}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":-1}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":\"nope\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"session_id\":\"has space\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":\"max\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":3}",
        "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":1}}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":100000}",
        "[1,2,3]", "\"str\"", "null", "", "{", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]", "{}",
    };
    static const char *const huge[] = {"1e999", "-1e400", "99999999999999999999999", "1e308", "-9223372036854775809",
                                       "18446744073709551616", "-1e99"};
    static const char *const fields[] = {"temperature", "top_p", "top_k", "max_tokens", "seed", "min_p"};
    static const char *const ctl[] = {"<s>", "</s>", "a</s>b", "x<s>", "ok <s> ok"};
    strbuf_reset(sb);
    switch (i % 8) {
    case 0:   /* truncated valid JSON */
        strbuf_append(sb, GOOD, 1 + rnd() % (strlen(GOOD) - 2));
        break;
    case 1:
        strbuf_puts(sb, wrong[rnd() % (sizeof wrong / sizeof *wrong)]);
        break;
    case 2:
        strbuf_printf(sb, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"%s\":%s}",
                      fields[rnd() % 6], huge[rnd() % 7]);
        break;
    case 3: {   /* deep nesting */
        int d = 100 + (int)(rnd() % 5000);
        strbuf_puts(sb, "{\"messages\":");
        for (int k = 0; k < d; k++)
            strbuf_putc(sb, '[');
        for (int k = 0; k < d; k++)
            strbuf_putc(sb, ']');
        strbuf_putc(sb, '}');
        break;
    }
    case 4: {   /* invalid UTF-8 */
        static const char *const bad[] = {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf8\x88\x80\x80\x80"};
        strbuf_printf(sb, "{\"messages\":[{\"role\":\"user\",\"content\":\"a%sb\"}]}", bad[rnd() % 5]);
        break;
    }
    case 5: {   /* oversized body */
        size_t n = 70000 + rnd() % 1000;
        strbuf_puts(sb, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
        for (size_t k = 0; k < n; k++)
            strbuf_putc(sb, 'a');
        strbuf_puts(sb, "\"}]}");
        break;
    }
    case 6:   /* control tokens in content */
        strbuf_printf(sb, "{\"messages\":[{\"role\":\"%s\",\"content\":\"%s\"}]}", rnd() % 2 ? "user" : "system",
                      ctl[rnd() % 5]);
        break;
    default: {   /* random bytes, sometimes inside a JSON string */
        int n = 1 + (int)(rnd() % 200);
        if (rnd() % 2)
            strbuf_puts(sb, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
        for (int k = 0; k < n; k++)
            strbuf_putc(sb, (char)(rnd() % 256));
        break;
    }
    }
}

static void test_malformed(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int n_4xx = 0, n_other = 0;
    for (int i = 0; i < 1000; i++) {
        bad_body(i, &sb);
        struct http_answer a = http_call(PORT, "POST", "/v1/chat/completions", sb.data ? sb.data : "", sb.len, NULL);
        if (a.status >= 400 && a.status < 500 && strstr(a.body, "\"error\""))
            n_4xx++;
        else {
            n_other++;
            if (n_other < 5)
                fprintf(stderr, "case %d (%d): status %d for %.120s\n", i, i % 8, a.status, sb.data);
        }
        http_answer_clear(&a);
    }
    CHECK_EQ(n_4xx, 1000);
    struct http_answer a = http_post(PORT, "/v1/chat/completions", GOOD, NULL);
    CHECK_EQ(a.status, 200);
    http_answer_clear(&a);
    a = http_post(PORT, "/tokenize", "{\"content\": 5}", NULL);
    CHECK_EQ(a.status, 400);
    http_answer_clear(&a);
    a = http_post(PORT, "/detokenize", "{\"tokens\": [1, -5]}", NULL);
    CHECK_EQ(a.status, 400);
    http_answer_clear(&a);
    a = http_call(PORT, "GET", "/nope", "", 0, NULL);
    CHECK_EQ(a.status, 404);
    http_answer_clear(&a);
    strbuf_clear(&sb);
}

/* ---- routing and ATEM vectors (runtime.md §4.6, §5.5; gguf-contract §5.3) ---
 *
 * Every vector of tests/atem_vectors.h (the tables test_toolcall.c checks at
 * the parser level) goes through the whole HTTP path in test-output mode, as
 * the model's raw reply, non-stream and stream. What a client sees must be
 * what toolcall_process() gives for the same text with the same tools and the
 * server's special tokens: content, reasoning_content, each tool call's name
 * and argument JSON, finish_reason; and a stream never shows markup in a
 * content delta unless the final content has it too. */

/* The tool table as an OpenAI "tools" array (NULL when there are no tools). */
static json_t *tools_json(const struct toolcall_tool *t, int n)
{
    if (!t || n <= 0)
        return NULL;
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *props = json_object();
        for (int k = 0; k < t[i].n_params; k++)
            json_object_set_new(props, t[i].params[k].name,
                                t[i].params[k].type ? json_pack("{s:s}", "type", t[i].params[k].type) : json_object());
        json_array_append_new(a, json_pack("{s:s, s:{s:s, s:{s:s, s:o}}}", "type", "function", "function", "name",
                                           t[i].name, "parameters", "type", "object", "properties", props));
    }
    return a;
}

/* What a client sees: content, reasoning, calls, finish. */
struct seen {
    struct strbuf content, reasoning, names[4], args[4], ids[4];
    bool has_content, has_reasoning, markup_in_delta;
    int n_calls, n_bad_index;
    char finish[16];
};

static void seen_init(struct seen *s)
{
    memset(s, 0, sizeof *s);
}

static void seen_clear(struct seen *s)
{
    strbuf_clear(&s->content), strbuf_clear(&s->reasoning);
    for (int i = 0; i < 4; i++)
        strbuf_clear(&s->names[i]), strbuf_clear(&s->args[i]), strbuf_clear(&s->ids[i]);
}

static void seen_calls(struct seen *s, json_t *calls)
{
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        json_int_t idx = json_integer_value(json_object_get(c, "index"));
        if (idx < 0 || idx > 3) {
            s->n_bad_index++;
            continue;
        }
        json_t *f = json_object_get(c, "function");
        if (json_is_string(json_object_get(f, "name")))
            strbuf_puts(&s->names[idx], json_string_value(json_object_get(f, "name")));
        if (json_is_string(json_object_get(c, "id")))
            strbuf_puts(&s->ids[idx], json_string_value(json_object_get(c, "id")));
        if (json_is_string(json_object_get(f, "arguments")))
            strbuf_puts(&s->args[idx], json_string_value(json_object_get(f, "arguments")));
        if (idx + 1 > s->n_calls)
            s->n_calls = (int)idx + 1;
    }
}

static void seen_message(struct seen *s, json_t *choice, const char *key)
{
    json_t *m = json_object_get(choice, key);
    json_t *c = json_object_get(m, "content"), *r = json_object_get(m, "reasoning_content");
    if (json_is_string(c) && json_string_length(c)) {
        s->has_content = true;
        strbuf_puts(&s->content, json_string_value(c));
        s->markup_in_delta |= strstr(json_string_value(c), "<atem") || strstr(json_string_value(c), "<|");
    }
    if (json_is_string(r)) {
        s->has_reasoning = true;
        strbuf_puts(&s->reasoning, json_string_value(r));
    }
    seen_calls(s, json_object_get(m, "tool_calls"));
    json_t *f = json_object_get(choice, "finish_reason");
    if (json_is_string(f))
        snprintf(s->finish, sizeof s->finish, "%s", json_string_value(f));
}

static void seen_sse(struct seen *s, const char *body)
{
    bool done = false;
    for (const char *p = body; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n == 12 && !strncmp(p, "data: [DONE]", 12)) {
            done = true;
        } else if (n > 6 && !strncmp(p, "data: ", 6)) {
            json_t *o = json_loadb(p + 6, n - 6, 0, NULL);
            CHECK(o != NULL && !json_object_get(o, "error"));
            seen_message(s, json_array_get(json_object_get(o, "choices"), 0), "delta");
            json_decref(o);
        }
        p = nl ? nl + 1 : NULL;
    }
    CHECK(done);
}

/* Send raw as the model's reply; collect what the client sees. */
static void run_raw(const char *raw, json_t *tools, bool reasoning, bool stream, struct seen *s)
{
    json_t *req = json_pack("{s:[{s:s, s:s}], s:s, s:b, s:{s:b}}", "messages", "role", "user", "content", "hi",
                            "glim_test_output", raw, "stream", stream, "chat_template_kwargs", "return_reasoning",
                            reasoning);
    if (tools)
        json_object_set(req, "tools", tools);
    char *body = json_dumps(req, JSON_COMPACT);
    struct http_answer a = http_post(PORT, "/v1/chat/completions", body, NULL);
    CHECK_EQ(a.status, 200);
    if (!stream) {
        json_t *o = json_loads(a.body, 0, NULL);
        seen_message(s, json_array_get(json_object_get(o, "choices"), 0), "message");
        json_decref(o);
    } else {
        seen_sse(s, a.body);
    }
    http_answer_clear(&a);
    free(body);
    json_decref(req);
}

static bool same_str(const struct strbuf *got, const char *want)
{
    return !strcmp(strbuf_cstr(got), want ? want : "");
}

/* The model stops at its end token: the reply the server sees ends there. */
static size_t reply_len(const char *raw)
{
    const char *e1 = strstr(raw, "<|eot|>"), *e2 = strstr(raw, "<|end_of_text|>");
    const char *e = e1 && (!e2 || e1 < e2) ? e1 : e2;
    return e ? (size_t)(e - raw) : strlen(raw);
}

/* Compare what was seen with toolcall_process() on the same text. */
static void check_seen(const char *id, bool stream, bool reasoning, const struct toolcall_result *want,
                       const struct seen *s)
{
    int f = t_fail;
    CHECK_EQ(s->has_content, want->content != NULL);
    CHECK(same_str(&s->content, want->content));
    CHECK_EQ(s->has_reasoning, reasoning && want->reasoning != NULL);
    if (reasoning)
        CHECK(same_str(&s->reasoning, want->reasoning));
    CHECK_EQ(s->n_calls, want->n_calls);
    CHECK_EQ(s->n_bad_index, 0);
    for (int k = 0; k < want->n_calls && k < 4; k++) {
        CHECK(same_str(&s->names[k], want->calls[k].name));
        CHECK(same_str(&s->args[k], want->calls[k].arguments));
        CHECK(s->ids[k].len == 37 && !strncmp(strbuf_cstr(&s->ids[k]), "call-", 5));
    }
    CHECK(!strcmp(s->finish, want->n_calls ? "tool_calls" : "stop"));
    bool markup_ok = want->content && (strstr(want->content, "<atem") || strstr(want->content, "<|"));
    CHECK(!s->markup_in_delta || markup_ok);
    if (t_fail != f)
        fprintf(stderr, "  vector %s (%s): content [%s] reasoning [%s] calls %d args0 [%s] finish %s\n", id,
                stream ? "stream" : "whole", strbuf_cstr(&s->content), strbuf_cstr(&s->reasoning), s->n_calls,
                strbuf_cstr(&s->args[0]), s->finish);
}

/* One vector, both ways; with reasoning hidden too when it has some. */
static void check_vector(const char *id, const char *raw, const struct toolcall_tool *tools, int n_tools)
{
    struct toolcall_config cfg = {tools, n_tools, SRV->specials, SRV->n_specials, 0};
    struct toolcall_result want = {0};
    CHECK_EQ(toolcall_process(raw, reply_len(raw), &cfg, &want, NULL), GLIM_OK);
    json_t *tj = tools_json(tools, n_tools);
    for (int pass = 0; pass < (want.reasoning ? 4 : 2); pass++) {
        bool stream = pass & 1, reasoning = pass < 2;
        struct seen s;
        seen_init(&s);
        run_raw(raw, tj, reasoning, stream, &s);
        check_seen(id, stream, reasoning, &want, &s);
        seen_clear(&s);
    }
    json_decref(tj);
    toolcall_result_clear(&want);
}

static void test_atem_vectors(void)   /* §5.5 U1–U29, X1–X14 (U30: every request's calls start at index 0) */
{
    for (size_t i = 0; i < sizeof VECS / sizeof *VECS; i++)
        check_vector(VECS[i].id, VECS[i].input, VECS[i].tools, VECS[i].n_tools);
}

static void test_routing_vectors(void)   /* §4.6, R1, gguf-contract §5.3 */
{
    for (size_t i = 0; i < sizeof PVECS / sizeof *PVECS; i++) {
        char id[32];
        snprintf(id, sizeof id, "pipeline %zu", i);
        check_vector(id, PVECS[i].input, PVECS[i].tools, PVECS[i].n_tools);
    }
    /* multibyte text split at every piece boundary the script emitter makes */
    check_vector("multibyte", " to=user" M "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8c\x8d caf\xc3\xa9", NULL, 0);
}

/* tool_choice: a named function starts the reply in the call form */
static void test_tool_choice_named(void)
{
    json_t *tools = tools_json(T1, 2);
    for (int stream = 0; stream < 2; stream++) {
        json_t *req = json_pack("{s:[{s:s, s:s}], s:s, s:b, s:O}", "messages", "role", "user", "content", "hi",
                                "glim_test_output", P("a", "7") P("b", "8") "</atem:invoke>\n</atem:function_calls>",
                                "stream", stream, "tools", tools);
        json_object_set_new(req, "tool_choice", json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", "add"));
        char *body = json_dumps(req, JSON_COMPACT);
        struct http_answer a = http_post(PORT, "/v1/chat/completions", body, NULL);
        CHECK_EQ(a.status, 200);
        struct seen s;
        seen_init(&s);
        if (stream)
            seen_sse(&s, a.body);
        else {
            json_t *o = json_loads(a.body, 0, NULL);
            seen_message(&s, json_array_get(json_object_get(o, "choices"), 0), "message");
            json_decref(o);
        }
        CHECK_EQ(s.n_calls, 1);
        CHECK(same_str(&s.names[0], "add"));
        CHECK(same_str(&s.args[0], "{\"a\": 7, \"b\": 8}"));
        CHECK(!strcmp(s.finish, "tool_calls"));
        seen_clear(&s);
        http_answer_clear(&a);
        free(body);
        json_decref(req);
    }
    json_decref(tools);
}

/* stop strings, max_tokens → finish_reason */
static void test_stop(void)
{
    int st;
    json_t *req = json_pack("{s:[{s:s, s:s}], s:s, s:s}", "messages", "role", "user", "content", "x",
                            "glim_test_output", "alpha beta STOP gamma", "stop", "STOP");
    json_t *r = post_json("/v1/chat/completions", req, NULL, &st);
    json_t *ch = json_array_get(json_object_get(r, "choices"), 0);
    CHECK_EQ(st, 200);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ch, "message"), "content")), "alpha beta"));
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop"));
    json_decref(r);
    json_object_set_new(req, "max_tokens", json_integer(2));
    json_object_del(req, "stop");
    r = post_json("/v1/chat/completions", req, NULL, &st);
    ch = json_array_get(json_object_get(r, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "length"));
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(r, "usage"), "completion_tokens")), 2);
    json_decref(r);
    json_decref(req);
}

/* ---- sessions ---------------------------------------------------------------- */

static const char *reply_text(json_t *r)
{
    const char *s = json_string_value(json_object_get(
        json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message"), "content"));
    return s ? s : "";
}

static void test_warm_resume(void)
{
    json_t *msgs = json_array();
    long long prev_prompt = 0, prev_completion = 0;
    for (int turn = 0; turn < 4; turn++) {
        char text[64];
        snprintf(text, sizeof text, turn ? "Then the dog %d" : "Once upon a time", turn);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", text));
        json_t *req = json_pack("{s:O, s:i, s:s}", "messages", msgs, "max_tokens", 10, "session_id", "warm");
        long long before = metric("glim_prefill_tokens_total");
        int st;
        json_t *r = post_json("/v1/chat/completions", req, NULL, &st);
        CHECK_EQ(st, 200);
        long long prefilled = metric("glim_prefill_tokens_total") - before;
        json_t *u = json_object_get(r, "usage");
        long long prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
        long long cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
        CHECK_EQ(prefilled, prompt - cached);
        if (turn > 0)   /* everything but the reply's last token (never evaluated) was cached */
            CHECK_EQ(cached, prev_prompt + prev_completion - 1);
        prev_prompt = prompt;
        prev_completion = json_integer_value(json_object_get(u, "completion_tokens"));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", reply_text(r)));
        json_decref(r);
        json_decref(req);
    }
    json_decref(msgs);
    struct http_answer a = http_call(PORT, "DELETE", "/v1/sessions/warm", "", 0, NULL);
    CHECK_EQ(a.status, 200);
    http_answer_clear(&a);
}

#define N_CLIENTS 16
#define N_TURNS 3

struct client {
    int idx;
    char replies[N_TURNS][512];
    int errors;
};

static void *client_run(void *arg)
{
    struct client *c = arg;
    json_t *msgs = json_array();
    char sid[32], text[96];
    snprintf(sid, sizeof sid, "iso-%d", c->idx / 2);
    for (int t = 0; t < N_TURNS; t++) {
        snprintf(text, sizeof text, "Client %d, turn %d: once upon a time", c->idx, t);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", text));
        json_t *req = json_pack("{s:O, s:i, s:f, s:i, s:s}", "messages", msgs, "max_tokens", 12, "temperature", 0.9,
                                "seed", 1000 + c->idx * 10 + t, "session_id", sid);
        int st;
        json_t *r = post_json("/v1/chat/completions", req, NULL, &st);
        if (st != 200)
            c->errors++;
        snprintf(c->replies[t], sizeof c->replies[t], "%s", reply_text(r));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", reply_text(r)));
        json_decref(r);
        json_decref(req);
    }
    json_decref(msgs);
    return NULL;
}

static void test_isolation(void)
{
    static struct client solo[N_CLIENTS], conc[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        solo[i].idx = conc[i].idx = i;
        client_run(&solo[i]);
    }
    pthread_t th[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++)
        pthread_create(&th[i], NULL, client_run, &conc[i]);
    for (int i = 0; i < N_CLIENTS; i++)
        pthread_join(th[i], NULL);
    int n_same = 0, n_distinct = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        CHECK_EQ(solo[i].errors + conc[i].errors, 0);
        for (int t = 0; t < N_TURNS; t++) {
            n_same += !strcmp(solo[i].replies[t], conc[i].replies[t]);
            if (strcmp(solo[i].replies[t], conc[i].replies[t]))
                fprintf(stderr, "client %d turn %d: alone '%s', concurrent '%s'\n", i, t, solo[i].replies[t],
                        conc[i].replies[t]);
        }
        n_distinct += i > 0 && strcmp(solo[i].replies[0], solo[0].replies[0]);
    }
    CHECK_EQ(n_same, N_CLIENTS * N_TURNS);
    CHECK(n_distinct > 0);   /* the seeds and prompts really differ */
}

/* ---- capacity: --max-sessions 2 -------------------------------------------- */

/* A request whose answer is read later: connected, sent, and read up to the
 * first SSE event, which the server only sends once the job holds a slot. */
struct held {
    int fd;
    struct strbuf got;
};

static bool held_open(struct held *h, int port, const char *body)
{
    strbuf_init(&h->got);
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (h->fd < 0 || connect(h->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return false;
    struct strbuf req;
    strbuf_init(&req);
    strbuf_printf(&req,
                  "POST /v1/chat/completions HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                  strlen(body), body);
    bool ok = send(h->fd, req.data, req.len, MSG_NOSIGNAL) == (ssize_t)req.len;
    strbuf_clear(&req);
    char buf[4096];
    while (ok && !strstr(strbuf_cstr(&h->got), "data: ")) {
        ssize_t k = recv(h->fd, buf, sizeof buf, 0);
        if (k <= 0)
            return false;
        strbuf_append(&h->got, buf, (size_t)k);
    }
    return ok;
}

/* Read the rest of the answer; true when it is a complete 200 stream. */
static bool held_finish(struct held *h)
{
    char buf[4096];
    ssize_t k;
    while (h->fd >= 0 && (k = recv(h->fd, buf, sizeof buf, 0)) > 0)
        strbuf_append(&h->got, buf, (size_t)k);
    if (h->fd >= 0)
        close(h->fd);
    const char *all = strbuf_cstr(&h->got);
    bool ok = !strncmp(all, "HTTP/1.", 7) && atoi(all + 9) == 200 && strstr(all, "data: [DONE]") &&
              !strstr(all, "\"error\"");
    strbuf_clear(&h->got);
    return ok;
}

/* One turn of session sid ("" = anonymous); returns the answer, *cached the reused tokens. */
static json_t *turn(json_t *msgs, const char *sid, int *status, long long *cached)
{
    json_t *req = json_pack("{s:O, s:i, s:f}", "messages", msgs, "max_tokens", 6, "temperature", 0.0);
    if (sid[0])
        json_object_set_new(req, "session_id", json_string(sid));
    json_t *r = post_json("/v1/chat/completions", req, NULL, status);
    json_decref(req);
    json_t *d = json_object_get(json_object_get(r, "usage"), "prompt_tokens_details");
    *cached = json_integer_value(json_object_get(d, "cached_tokens"));
    return r;
}

static void next_turn(json_t *msgs, json_t *reply)
{
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", reply_text(reply)));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", "And then the cat"));
}

/* Two slots, three named sessions: the least recently used idle one is
 * evicted; its next request still works, from a full prefill, and gives
 * what a brand-new session gives. */
static void test_lru_eviction(void)
{
    static const char *const ids[3] = {"lru-a", "lru-b", "lru-c"};
    static const char *const text[3] = {"Once upon a time", "The little girl", "A big dog"};
    int st;
    long long cached;
    json_t *msgs[3], *first[3];
    for (int i = 0; i < 3; i++) {
        msgs[i] = json_pack("[{s:s, s:s}]", "role", "user", "content", text[i]);
        first[i] = turn(msgs[i], ids[i], &st, &cached);
        CHECK_EQ(st, 200);
        CHECK_EQ(cached, 0);
        CHECK(metric("glim_sessions") <= 2);
    }
    next_turn(msgs[1], first[1]);   /* b was used after a: it survived c's arrival */
    json_decref(turn(msgs[1], "lru-b", &st, &cached));
    CHECK_EQ(st, 200);
    CHECK(cached > 0);
    next_turn(msgs[0], first[0]);   /* a was evicted: a full prefill */
    long long before = metric("glim_prefill_tokens_total");
    json_t *ra = turn(msgs[0], "lru-a", &st, &cached);
    CHECK_EQ(st, 200);
    CHECK_EQ(cached, 0);
    CHECK_EQ(metric("glim_prefill_tokens_total") - before,
             json_integer_value(json_object_get(json_object_get(ra, "usage"), "prompt_tokens")));
    json_t *rz = turn(msgs[0], "lru-fresh", &st, &cached);
    CHECK_EQ(st, 200);
    CHECK(!strcmp(reply_text(ra), reply_text(rz)));
    CHECK_EQ(metric("glim_sessions"), 2);
    json_decref(ra), json_decref(rz);
    for (int i = 0; i < 3; i++)
        json_decref(msgs[i]), json_decref(first[i]);
}

/* Every slot busy: a new request (stream or not) gets a 429 with an OpenAI
 * error object; the busy ones finish normally and the slots serve again. */
static void test_capacity_429(void)
{
    long long answered = metric("glim_requests_total") + metric("glim_requests_rejected_total");
    char body[512];
    /* both hold their slot until the scheduler has answered the two requests below */
    struct held h[2];
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"hold %d\"}],\"max_tokens\":3,\"stream\":true,"
                 "\"glim_test_hold_until\":%lld%s}",
                 i, answered + 4, i ? ",\"session_id\":\"lru-b\"" : "");
        CHECK(held_open(&h[i], PORT, body));
    }
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":%s}",
                 stream ? "true" : "false");
        struct http_answer a = http_post(PORT, "/v1/chat/completions", body, NULL);
        CHECK_EQ(a.status, 429);
        json_t *o = json_loads(a.body, 0, NULL), *e = json_object_get(o, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        CHECK(msg && strstr(msg, "capacity"));
        CHECK(json_is_string(json_object_get(e, "type")) &&
              !strcmp(json_string_value(json_object_get(e, "type")), "capacity_error"));
        CHECK(json_is_string(json_object_get(e, "code")) &&
              !strcmp(json_string_value(json_object_get(e, "code")), "capacity_exhausted"));
        CHECK(json_is_null(json_object_get(e, "param")));
        json_decref(o);
        http_answer_clear(&a);
    }
    for (int i = 0; i < 2; i++)
        CHECK(held_finish(&h[i]));
    CHECK_EQ(metric("glim_requests_rejected_total"), 2);
    struct http_answer a = http_post(PORT, "/v1/chat/completions", GOOD, NULL);
    CHECK_EQ(a.status, 200);
    http_answer_clear(&a);
}

int main(void)
{
    const char *td = getenv("GLIM_TESTDATA") ? getenv("GLIM_TESTDATA") : GLIM_TESTDATA;
    char model[1024];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", td);
    struct srv_config cfg = {0};
    cfg.model_path = model;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.model_id = "test-model";
    cfg.max_sessions = 10;
    cfg.max_context = 512;   /* the longest vector, 1-3 bytes a piece, fits */
    cfg.n_threads = 1;
    cfg.max_body_bytes = 64 * 1024;
    cfg.test_mode = true;
    struct glim_err err = {0};
    if (srv_new(&cfg, &SRV, &err) != GLIM_OK) {
        fprintf(stderr, "srv_new: %s\n", err.msg);
        return 1;
    }
    PORT = srv_port(SRV);
    RUN(test_basic);
    RUN(test_malformed);
    RUN(test_atem_vectors);
    RUN(test_routing_vectors);
    RUN(test_tool_choice_named);
    RUN(test_stop);
    RUN(test_warm_resume);
    RUN(test_isolation);
    srv_free(SRV);
    cfg.max_sessions = 2;
    if (srv_new(&cfg, &SRV, &err) != GLIM_OK) {
        fprintf(stderr, "srv_new: %s\n", err.msg);
        return 1;
    }
    PORT = srv_port(SRV);
    RUN(test_lru_eviction);
    RUN(test_capacity_429);
    srv_free(SRV);
    return DONE();
}
#else
int main(void)
{
    printf("glim built without the server (libmicrohttpd/jansson/PCRE2): skipped\n");
    return 0;
}
#endif
