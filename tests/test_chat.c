/*
 * test_chat.c — chat templates rendered byte for byte against Python jinja2.
 *
 * Muse Glimmer: every vector of testdata/chat_templates/muse-glimmer-renders.md
 * (bos_token "<|begin_of_text|>", strftime_now pinned to 2026-08-23 as that file says).
 * Llama 3 / Qwen 3 / Gemma 3: the templates in testdata/tokenizers/<name>/tokenizer_config.json,
 * inputs in tests/fixtures/chat/<case>.json, expected text in <case>.out, written once by
 * tests/fixtures/chat/gen.py with Debian's python3-jinja2 3.1 under HF's conventions
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, HF's tojson
 * and raise_exception, strftime_now pinned to the same date).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat.h"
#include "chat/jinja.h"
#include "harness.h"

/* tests/fixtures/chat/<name>: found next to this source file (CMake compiles it by absolute path) */
static const char *fixture(const char *name)
{
    static char buf[2][1024];
    static int k;
    char *b = buf[k++ % 2];
    const char *slash = strrchr(__FILE__, '/');
    int dir_len = slash ? (int)(slash - __FILE__) : 1;
    snprintf(b, sizeof buf[0], "%.*s/fixtures/chat/%s", dir_len, slash ? __FILE__ : ".", name);
    return b;
}

static time_t pinned_clock(void *ud)
{
    (void)ud;
    return (time_t)1787486400;   /* 2026-08-23 12:00:00 UTC */
}


/* The text of the next ```json fenced block at or after *p; advances *p past it. */
static char *next_json_block(const char **p, size_t *len)
{
    const char *start = strstr(*p, "```json\n");
    if (!start)
        return NULL;
    start += 8;
    const char *end = strstr(start, "\n```");
    if (!end)
        return NULL;
    *len = (size_t)(end - start);
    *p = end + 4;
    char *s = malloc(*len + 1);
    memcpy(s, start, *len);
    s[*len] = '\0';
    return s;
}

/* Decode a JSON string literal (the expected output) with the engine's own parser. */
static char *json_string(const char *text, size_t len, size_t *out_len)
{
    struct jinja_arena *a = jinja_arena_new(0);
    struct jinja_value v;
    char *s = NULL;
    if (jinja_json_parse(a, text, len, &v, NULL) == GLIM_OK && v.type == JINJA_STR) {
        s = malloc(v.u.s->len + 1);
        memcpy(s, v.u.s->s, v.u.s->len + 1);
        *out_len = v.u.s->len;
    }
    jinja_arena_free(a);
    return s;
}

/* chat_template string out of a tokenizer_config.json */
static char *config_template(const char *path)
{
    size_t len;
    char *cfg = test_read_file(path, &len);
    if (!cfg)
        return NULL;
    struct jinja_arena *a = jinja_arena_new(0);
    struct jinja_value v;
    char *s = NULL;
    if (jinja_json_parse(a, cfg, len, &v, NULL) == GLIM_OK) {
        struct jinja_value t = jinja_dict_getc(v, "chat_template");
        if (t.type == JINJA_STR)
            s = strdup(t.u.s->s);
    }
    jinja_arena_free(a);
    free(cfg);
    return s;
}

static void show_diff(const char *name, const char *got, size_t got_len, const char *want, size_t want_len)
{
    size_t i = 0;
    while (i < got_len && i < want_len && got[i] == want[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "%s: differs at byte %zu (got %zu bytes, want %zu)\n  got:  ...%.80s\n  want: ...%.80s\n",
            name, i, got_len, want_len, got + from, want + from);
}

static void test_muse_glimmer_vectors(void)
{
    size_t tlen, mdlen;
    char *tmpl = test_read_file(testdata("chat_templates/muse-glimmer.jinja"), &tlen);
    char *md = test_read_file(testdata("chat_templates/muse-glimmer-renders.md"), &mdlen);
    CHECK(tmpl && md);
    if (!tmpl || !md)
        return;
    struct chat_template *t = NULL;
    struct glim_err err = {0};
    CHECK_EQ(chat_template_new(tmpl, tlen, &t, &err), GLIM_OK);
    if (!t) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    int n_vectors = 0;
    for (const char *p = strstr(md, "\n## "); p; p = strstr(p, "\n## ")) {
        char name[64] = {0};
        sscanf(p + 4, "%63s", name);
        size_t in_len, out_len, want_len;
        char *in = next_json_block(&p, &in_len);
        char *outj = next_json_block(&p, &out_len);
        CHECK(in && outj);
        if (!in || !outj)
            break;
        /* the vectors were rendered with bos_token "<|begin_of_text|>" */
        char *ctx = malloc(in_len + 64);
        const char *brace = strchr(in, '{');
        sprintf(ctx, "{\"bos_token\": \"<|begin_of_text|>\", %s", brace + 1);
        char *want = json_string(outj, out_len, &want_len);
        struct strbuf sb;
        strbuf_init(&sb);
        int rc = chat_render_json(t, ctx, strlen(ctx), pinned_clock, NULL, &sb, &err);
        CHECK_EQ(rc, GLIM_OK);
        if (rc)
            fprintf(stderr, "%s: %s\n", name, err.msg);
        bool same = want && sb.len == want_len && !memcmp(strbuf_cstr(&sb), want, want_len);
        CHECK(same);
        if (!same && want)
            show_diff(name, strbuf_cstr(&sb), sb.len, want, want_len);
        n_vectors++;
        strbuf_clear(&sb);
        free(in), free(outj), free(ctx), free(want);
    }
    CHECK(n_vectors >= 6);
    chat_template_free(t);
    free(tmpl), free(md);
}

static void check_fixture(const char *model, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "tokenizers/%s/tokenizer_config.json", model);
    char *tmpl = config_template(testdata(path));
    size_t in_len, want_len;
    snprintf(path, sizeof path, "%s.json", name);
    char *in = test_read_file(fixture(path), &in_len);
    snprintf(path, sizeof path, "%s.out", name);
    char *want = test_read_file(fixture(path), &want_len);
    CHECK(tmpl && in && want);
    struct chat_template *t = NULL;
    struct glim_err err = {0};
    if (tmpl && in && want && chat_template_new(tmpl, strlen(tmpl), &t, &err) == GLIM_OK) {
        struct strbuf sb;
        strbuf_init(&sb);
        int rc = chat_render_json(t, in, in_len, pinned_clock, NULL, &sb, &err);
        CHECK_EQ(rc, GLIM_OK);
        if (rc)
            fprintf(stderr, "%s: %s\n", name, err.msg);
        bool same = sb.len == want_len && !memcmp(strbuf_cstr(&sb), want, want_len);
        CHECK(same);
        if (!same)
            show_diff(name, strbuf_cstr(&sb), sb.len, want, want_len);
        strbuf_clear(&sb);
    } else {
        CHECK(!"template parse");
        fprintf(stderr, "%s: %s\n", name, err.msg);
    }
    chat_template_free(t);
    free(tmpl), free(in), free(want);
}

static void test_llama3(void) { check_fixture("llama3", "llama3_basic"); }
static void test_qwen3(void)
{
    check_fixture("qwen3", "qwen3_basic");
    check_fixture("qwen3", "qwen3_tools");
    check_fixture("qwen3", "qwen3_think_off");
}
static void test_gemma3(void) { check_fixture("gemma3", "gemma3_basic"); }

/* Gemma 3 refuses non-alternating roles through raise_exception: the message surfaces. */
static void test_raise_exception(void)
{
    char *tmpl = config_template(testdata("tokenizers/gemma3/tokenizer_config.json"));
    CHECK(tmpl != NULL);
    if (!tmpl)
        return;
    struct chat_template *t = NULL;
    struct glim_err err = {0};
    CHECK_EQ(chat_template_new(tmpl, strlen(tmpl), &t, &err), GLIM_OK);
    const char *ctx = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
                      " {\"role\": \"user\", \"content\": \"b\"}], \"bos_token\": \"<bos>\"}";
    struct strbuf sb;
    strbuf_init(&sb);
    CHECK_EQ(chat_render_json(t, ctx, strlen(ctx), pinned_clock, NULL, &sb, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "Conversation roles must alternate user/assistant/user/assistant/...") != NULL);
    CHECK_EQ(sb.len, 0);   /* nothing half-rendered */
    strbuf_clear(&sb);
    chat_template_free(t);
    free(tmpl);
}

/* The C API builds the same context as the JSON path (vector C of the renders file). */
static void test_c_api_matches_json(void)
{
    size_t tlen;
    char *tmpl = test_read_file(testdata("chat_templates/muse-glimmer.jinja"), &tlen);
    CHECK(tmpl != NULL);
    if (!tmpl)
        return;
    struct chat_template *t = NULL;
    struct glim_err err = {0};
    CHECK_EQ(chat_template_new(tmpl, tlen, &t, &err), GLIM_OK);
    struct chat_tool_call tc = {"c1", "get_weather", "{\"city\": \"Paris\", \"days\": 2}"};
    struct chat_message msgs[] = {
        {.role = "developer", .content = "Be helpful."},
        {.role = "user", .content = "Weather in Paris?"},
        {.role = "assistant", .content = "", .reasoning = "Need the tool.", .tool_calls = &tc, .n_tool_calls = 1},
        {.role = "tool", .content = "{\"temp_c\": 21}", .tool_call_id = "c1"},
        {.role = "assistant", .content = "It is 21 C in Paris."},
    };
    struct chat_request req = {
        .messages = msgs, .n_messages = 5, .bos_token = "<|begin_of_text|>",
        .tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                      "\"Get current weather\", \"parameters\": {\"type\": \"object\"}}}]",
        .kwargs_json = "{\"reasoning_strength\": \"low\"}", .clock = pinned_clock,
    };
    struct strbuf sb;
    strbuf_init(&sb);
    CHECK_EQ(chat_render(t, &req, &sb, &err), GLIM_OK);
    const char *s = strbuf_cstr(&sb);
    CHECK(strncmp(s, "<|begin_of_text|><|start|>system<|message|>Be helpful.\n\nReasoning strength: low.", 80) == 0);
    CHECK(strstr(s, "<atem:parameter name=\"days\">2</atem:parameter>") != NULL);
    CHECK(strstr(s, "<|start|>tool get_weather<|message|>") != NULL);
    CHECK(strstr(s, "{\"name\": \"get_weather\", \"description\": \"Get current weather\", "
                    "\"parameters\": {\"type\": \"object\"}}") != NULL);
    strbuf_clear(&sb);
    chat_template_free(t);
    free(tmpl);
}

int main(void)
{
    RUN(test_muse_glimmer_vectors);
    RUN(test_llama3);
    RUN(test_qwen3);
    RUN(test_gemma3);
    RUN(test_raise_exception);
    RUN(test_c_api_matches_json);
    return DONE();
}
