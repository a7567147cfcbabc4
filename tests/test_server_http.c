/*
 * test_server_http.c — glim serve in-process on a free loopback port, driven
 * over real sockets: basic shapes, 1000 malformed requests (all 4xx, server
 * still serving), every routing/ATEM vector through the whole HTTP path in
 * test-output mode (non-stream and stream must agree), warm resume (only new
 * tokens prefilled), and session isolation under 16 concurrent clients.
 */
#include "harness.h"

#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <pthread.h>

#include "server/srv.h"
#include "server_client.h"

static struct srv *S;
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

static long long metric(const char *name)
{
    struct http_answer a = http_call(PORT, "GET", "/metrics", "", 0, NULL);
    long long v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = a.body ? strstr(a.body, key) : NULL;
    if (p)
        v = atoll(p + strlen(key));
    http_answer_clear(&a);
    return v;
}

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

/* ---- routing and ATEM vectors (runtime.md §4.6, §5.5) ---------------------- */

#define BLK_OPEN "<atem:function_calls>\n"
#define BLK_CLOSE "</atem:function_calls>"
#define INV(n) "<atem:invoke name=\"" n "\">\n"
#define INV_END "</atem:invoke>\n"
#define PAR(k, v) "<atem:parameter name=\"" k "\">" v "</atem:parameter>\n"

struct vec {
    const char *name, *raw;
    bool tools, reasoning;
    const char *content;      /* NULL = null */
    const char *reasoning_want;
    int n_calls;
    const char *call0, *args0, *args1;
};

static const struct vec VECS[] = {
    {"plain", " to=user<|message|>Paris.", false, false, "Paris.", NULL, 0, NULL, NULL, NULL},
    {"reason", " to=self<|message|>We should calculate first.<|eom|><|start|>assistant to=user<|message|>The answer is 42.<|eot|>",
     false, true, "The answer is 42.", "We should calculate first.", 0, NULL, NULL, NULL},
    {"reason_hidden", " to=self<|message|>Private.<|eom|><|start|>assistant to=user<|message|>Done.", false, false,
     "Done.", NULL, 0, NULL, NULL, NULL},
    {"U1", " to=get_weather<|message|>" BLK_OPEN INV("get_weather") PAR("city", "Paris") INV_END BLK_CLOSE "<|eom|>",
     true, false, NULL, NULL, 1, "get_weather", "{\"city\": \"Paris\"}", NULL},
    {"U3", "<|start|>assistant to=add<|message|>" BLK_OPEN INV("add") PAR("a", "1") PAR("b", "2") INV_END BLK_CLOSE "<|eot|>",
     true, false, NULL, NULL, 1, "add", "{\"a\": 1, \"b\": 2}", NULL},
    {"U6", " to=add<|message|>" BLK_OPEN INV("add") PAR("a", "1") PAR("b", "2") INV_END INV("add") PAR("a", "3")
     PAR("b", "4") INV_END BLK_CLOSE "<|eot|>", true, false, NULL, NULL, 2, "add", "{\"a\": 1, \"b\": 2}",
     "{\"a\": 3, \"b\": 4}"},
    {"U7", " to=add<|message|>" BLK_OPEN INV("add") PAR("a", "1") PAR("b", "2") INV_END BLK_CLOSE
     "<|eom|><|start|>assistant to=add<|message|>" BLK_OPEN INV("add") PAR("a", "3") PAR("b", "4") INV_END BLK_CLOSE,
     true, false, NULL, NULL, 2, "add", "{\"a\": 1, \"b\": 2}", "{\"a\": 3, \"b\": 4}"},
    {"U9", "Checking now. to=add<|message|>" BLK_OPEN INV("add") PAR("a", "5") PAR("b", "6") INV_END BLK_CLOSE "<|eom|>",
     true, false, "Checking now.", NULL, 1, "add", "{\"a\": 5, \"b\": 6}", NULL},
    {"U13", "Sure! " BLK_OPEN INV("get_weather") "<atem:parameter name=\"city\">Paris", true, false, "Sure!", NULL, 0,
     NULL, NULL, NULL},
    {"U14", "The capital of France is Paris.", true, false, "The capital of France is Paris.", NULL, 0, NULL, NULL, NULL},
    {"R1", " to=self<|message|>We should check the weather.<|eom|><|start|>assistant to=get_weather<|message|>" BLK_OPEN
     INV("get_weather") PAR("city", "Paris") INV_END BLK_CLOSE "<|eom|>", true, true, NULL,
     "We should check the weather.", 1, "get_weather", "{\"city\": \"Paris\"}", NULL},
    {"X14", BLK_OPEN INV("get_weather") PAR("city", "h\xc3\xa9llo \xe2\x9c\x93") INV_END BLK_CLOSE, true, false, NULL,
     NULL, 1, "get_weather", "{\"city\": \"h\xc3\xa9llo \xe2\x9c\x93\"}", NULL},
    {"multibyte", " to=user<|message|>\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8c\x8d caf\xc3\xa9", false,
     false, "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8c\x8d caf\xc3\xa9", NULL, 0, NULL, NULL, NULL},
};

static json_t *vec_request(const struct vec *v, bool stream)
{
    json_t *req = json_pack("{s:[{s:s, s:s}], s:s, s:b, s:{s:b}}", "messages", "role", "user", "content", "hi",
                            "glim_test_output", v->raw, "stream", stream, "chat_template_kwargs", "return_reasoning",
                            v->reasoning);
    if (v->tools) {
        json_t *tools = json_loads(
            "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
            "\"properties\":{\"city\":{\"type\":\"string\"},\"units\":{\"type\":\"string\"}}}}},"
            "{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\","
            "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}}}]",
            0, NULL);
        json_object_set_new(req, "tools", tools);
    }
    return req;
}

/* What a client sees: content, reasoning, calls, finish. */
struct seen {
    struct strbuf content, reasoning, names[4], args[4], ids[4];
    bool has_content;
    int n_calls;
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
        if (idx < 0 || idx > 3)
            continue;
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
    }
    if (json_is_string(r))
        strbuf_puts(&s->reasoning, json_string_value(r));
    seen_calls(s, json_object_get(m, "tool_calls"));
    json_t *f = json_object_get(choice, "finish_reason");
    if (json_is_string(f))
        snprintf(s->finish, sizeof s->finish, "%s", json_string_value(f));
}

static void run_vec(const struct vec *v, bool stream, struct seen *s)
{
    json_t *req = vec_request(v, stream);
    char *body = json_dumps(req, JSON_COMPACT);
    struct http_answer a = http_post(PORT, "/v1/chat/completions", body, NULL);
    CHECK_EQ(a.status, 200);
    if (!stream) {
        json_t *o = json_loads(a.body, 0, NULL);
        seen_message(s, json_array_get(json_object_get(o, "choices"), 0), "message");
        json_decref(o);
    } else {
        bool done = false;
        for (char *line = strtok(a.body, "\n"); line; line = strtok(NULL, "\n")) {
            if (strncmp(line, "data: ", 6))
                continue;
            if (!strcmp(line + 6, "[DONE]")) {
                done = true;
                continue;
            }
            json_t *o = json_loads(line + 6, 0, NULL);
            CHECK(o != NULL);
            seen_message(s, json_array_get(json_object_get(o, "choices"), 0), "delta");
            json_decref(o);
        }
        CHECK(done);
        CHECK(strstr(s->content.data ? s->content.data : "", "<atem") == NULL);
        CHECK(strstr(s->content.data ? s->content.data : "", "<|") == NULL);
    }
    http_answer_clear(&a);
    free(body);
    json_decref(req);
}

static void check_vec(const struct vec *v, const struct seen *s)
{
    int f = t_fail;
    CHECK_EQ(s->has_content, v->content != NULL);
    if (v->content)
        CHECK(!strcmp(strbuf_cstr(&s->content), v->content));
    CHECK(!strcmp(strbuf_cstr(&s->reasoning), v->reasoning_want ? v->reasoning_want : ""));
    CHECK_EQ(s->n_calls, v->n_calls);
    if (v->n_calls) {
        CHECK(!strcmp(strbuf_cstr(&s->names[0]), v->call0));
        CHECK(!strcmp(strbuf_cstr(&s->args[0]), v->args0));
        CHECK(!strncmp(strbuf_cstr(&s->ids[0]), "call-", 5));
        CHECK(!strcmp(s->finish, "tool_calls"));
    } else {
        CHECK(!strcmp(s->finish, "stop"));
    }
    if (v->n_calls > 1)
        CHECK(!strcmp(strbuf_cstr(&s->args[1]), v->args1));
    if (t_fail != f)
        fprintf(stderr, "  vector %s: content '%s' reasoning '%s' calls %d args0 '%s' finish %s\n", v->name,
                strbuf_cstr(&s->content), strbuf_cstr(&s->reasoning), s->n_calls, strbuf_cstr(&s->args[0]), s->finish);
}

static void test_vectors(void)
{
    for (size_t i = 0; i < sizeof VECS / sizeof *VECS; i++) {
        for (int stream = 0; stream < 2; stream++) {
            struct seen s;
            seen_init(&s);
            run_vec(&VECS[i], stream, &s);
            check_vec(&VECS[i], &s);
            seen_clear(&s);
        }
    }
}

/* tool_choice: a named function starts the reply in the call form */
static void test_tool_choice_named(void)
{
    struct vec v = {"named", PAR("a", "7") PAR("b", "8") INV_END BLK_CLOSE, true, false, NULL, NULL, 1, "add",
                    "{\"a\": 7, \"b\": 8}", NULL};
    for (int stream = 0; stream < 2; stream++) {
        json_t *req = vec_request(&v, stream);
        json_object_set_new(req, "tool_choice", json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", "add"));
        char *body = json_dumps(req, JSON_COMPACT);
        struct http_answer a = http_post(PORT, "/v1/chat/completions", body, NULL);
        CHECK_EQ(a.status, 200);
        CHECK(strstr(a.body, "\"name\":\"add\"") != NULL);
        CHECK(strstr(a.body, stream ? "\\\"a\\\": 7" : "{\\\"a\\\": 7, \\\"b\\\": 8}") != NULL);
        CHECK(strstr(a.body, "\"tool_calls\"") != NULL);
        http_answer_clear(&a);
        free(body);
        json_decref(req);
    }
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
    cfg.max_context = 256;
    cfg.n_threads = 1;
    cfg.max_body_bytes = 64 * 1024;
    cfg.test_mode = true;
    struct glim_err err = {0};
    if (srv_new(&cfg, &S, &err) != GLIM_OK) {
        fprintf(stderr, "srv_new: %s\n", err.msg);
        return 1;
    }
    PORT = srv_port(S);
    RUN(test_basic);
    RUN(test_malformed);
    RUN(test_vectors);
    RUN(test_tool_choice_named);
    RUN(test_stop);
    RUN(test_warm_resume);
    RUN(test_isolation);
    srv_free(S);
    return DONE();
}
#else
int main(void)
{
    printf("glim built without the server (libmicrohttpd/jansson/PCRE2): skipped\n");
    return 0;
}
#endif
