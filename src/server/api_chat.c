/*
 * api_chat.c — POST /v1/chat/completions and /v1/completions.
 *
 * On the connection's thread: validate (oai_json.c), build the prompt
 * (srv_prompt.c), check it against the context, submit a job and wait for
 * admission — so capacity and validation failures are ordinary HTTP errors —
 * then answer: one JSON object, or SSE chunks pulled from the job's channel.
 *
 * Output routing (runtime.md §4.6, §5.4): the raw reply goes through the
 * toolcall pipeline (reasoning split → ATEM parse → content filter).
 * Streaming feeds it piece by piece; content/reasoning deltas go out as soon
 * as they are final, tool calls as index+id+name then argument fragments.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "chat/toolcall.h"
#include "http.h"

struct chat_ctx {
    struct srv *S;                 /* borrowed */
    struct srv_req r;              /* owned: keeps the body JSON alive (tool names) */
    struct srv_job *job;           /* one reference */
    char   id[48];
    int64_t created, n_prompt;
    char  *forced;                 /* owned: reply prefix forced by tool_choice */
    struct toolcall_tool *tools;   /* owned arrays; strings borrowed from r.root */
    struct toolcall_param *params;
    int    n_tools;
    struct toolcall_stream *ts;    /* owned (streaming chat) */
    struct strbuf text;            /* raw reply text taken from the job */
    struct strbuf sse;             /* bytes ready for the socket */
    size_t sse_off;
    bool   started, finished;
    int    n_calls;
};

/* ---- JSON helpers ---------------------------------------------------------- */

/* A JSON string from bytes that should be UTF-8; invalid bytes → U+FFFD. */
static json_t *jstr(const char *s, size_t n)
{
    json_t *v = json_stringn(s ? s : "", s ? n : 0);
    if (v || !s)
        return v;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n;) {
        size_t k = 1;
        while (k <= 4 && i + k <= n && !oai_utf8_valid(s + i, k))
            k++;
        if (k <= 4 && i + k <= n)
            strbuf_append(&sb, s + i, k), i += k;
        else
            strbuf_puts(&sb, "\xEF\xBF\xBD"), i++;
    }
    v = json_stringn(strbuf_cstr(&sb), sb.len);
    strbuf_clear(&sb);
    return v;
}

static int sse_json(struct chat_ctx *c, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return GLIM_ENOMEM;
    int rc = strbuf_puts(&c->sse, "data: ");
    rc = rc ? rc : strbuf_puts(&c->sse, s);
    rc = rc ? rc : strbuf_puts(&c->sse, "\n\n");
    free(s);
    return rc;
}

static json_t *chunk_new(struct chat_ctx *c, json_t *choice)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", c->id, "object",
                     c->r.is_chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)c->created,
                     "model", c->S->model_id, "choices", choice);
}

static int sse_delta(struct chat_ctx *c, json_t *delta)
{
    if (!delta)
        return GLIM_ENOMEM;
    return sse_json(c, chunk_new(c, json_pack("{s:i, s:o}", "index", 0, "delta", delta)));
}

static json_t *usage_json(struct chat_ctx *c)
{
    struct srv_job *j = c->job;
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)c->n_prompt, "completion_tokens",
                     (json_int_t)j->n_completion, "total_tokens", (json_int_t)(c->n_prompt + j->n_completion),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)j->n_reused);
}

/* ---- tool table for the parser ---------------------------------------------- */

static int build_tools(struct chat_ctx *c)
{
    json_t *tools = c->r.tools;
    if (!c->r.is_chat || !tools || c->r.tool_choice == SRV_TOOLS_NONE)
        return GLIM_OK;
    size_t n = json_array_size(tools), n_params = 0, i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        n_params += json_object_size(json_object_get(json_object_get(json_object_get(t, "function"), "parameters"),
                                                     "properties"));
    }
    c->tools = calloc(n, sizeof *c->tools);
    c->params = calloc(n_params + 1, sizeof *c->params);
    if (!c->tools || !c->params)
        return GLIM_ENOMEM;
    size_t k = 0;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (c->r.tool_choice == SRV_TOOLS_NAMED && strcmp(name, c->r.tool_name))
            continue;
        struct toolcall_tool *tt = &c->tools[c->n_tools++];
        tt->name = name;
        tt->params = &c->params[k];
        const char *key;
        json_t *prop;
        json_object_foreach(json_object_get(json_object_get(f, "parameters"), "properties"), key, prop) {
            c->params[k].name = key;
            c->params[k].type = json_string_value(json_object_get(prop, "type"));
            k++, tt->n_params++;
        }
    }
    return GLIM_OK;
}

static void tool_config(const struct chat_ctx *c, struct toolcall_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tools = c->tools;
    cfg->n_tools = c->n_tools;
    cfg->specials = c->S->specials;
    cfg->n_specials = c->S->n_specials;
}

/* ---- the context ------------------------------------------------------------ */

static void chat_ctx_free(void *p)
{
    struct chat_ctx *c = p;
    if (!c)
        return;
    if (c->job) {
        atomic_store(&c->job->cancel, true);
        srv_job_release(c->job);
    }
    toolcall_stream_free(c->ts);
    free(c->tools);
    free(c->params);
    free(c->forced);
    strbuf_clear(&c->text);
    strbuf_clear(&c->sse);
    oai_req_clear(&c->r);
    free(c);
}

static void log_turn(const struct chat_ctx *c)
{
    if (!c->S->cfg.verbose)
        return;
    const struct srv_job *j = c->job;
    fprintf(stderr,
            "llm_turn_stats session_id=%s prompt_tokens=%lld reused_prompt_tokens=%lld "
            "prefilled_prompt_tokens=%lld completion_tokens=%lld finish=%s\n",
            j->session_id[0] ? j->session_id : "<scratch>", (long long)c->n_prompt, (long long)j->n_reused,
            (long long)j->n_prefilled, (long long)j->n_completion, j->finish ? j->finish : "error");
}

/* ---- non-streaming ------------------------------------------------------------ */

static json_t *calls_json(const struct toolcall_result *res)
{
    json_t *a = json_array();
    for (int i = 0; a && i < res->n_calls; i++) {
        const struct toolcall_call *tc = &res->calls[i];
        json_array_append_new(a, json_pack("{s:i, s:s, s:s, s:{s:s, s:o}}", "index", tc->index, "id", tc->id,
                                           "type", "function", "function", "name", tc->name, "arguments",
                                           jstr(tc->arguments, strlen(tc->arguments))));
    }
    return a;
}

static void reply_whole(struct chat_ctx *c, struct http_reply *out)
{
    if (c->forced)
        strbuf_puts(&c->text, c->forced);
    while (srv_job_take(c->job, &c->text))
        ;
    struct srv_job *j = c->job;
    log_turn(c);
    if (j->err.status)
        return http_reply_error(out, &j->err);
    json_t *choice;
    const char *finish = j->finish;
    if (!c->r.is_chat) {
        choice = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "text", jstr(c->text.data, c->text.len), "logprobs",
                           "finish_reason", finish);
    } else {
        struct toolcall_config cfg;
        struct toolcall_result res = {0};
        struct glim_err err = {0};
        tool_config(c, &cfg);
        if (toolcall_process(strbuf_cstr(&c->text), c->text.len, &cfg, &res, &err)) {
            struct api_error e;
            api_fail(&e, 500, "server_error", NULL, "Generation failed: %s", err.msg);
            return http_reply_error(out, &e);
        }
        json_t *msg = json_pack("{s:s}", "role", "assistant");
        json_object_set_new(msg, "content", res.content ? jstr(res.content, res.content_len) : json_null());
        if (res.reasoning && c->r.return_reasoning)
            json_object_set_new(msg, "reasoning_content", jstr(res.reasoning, res.reasoning_len));
        if (res.n_calls) {
            json_object_set_new(msg, "tool_calls", calls_json(&res));
            finish = "tool_calls";
        }
        choice = json_pack("{s:i, s:o, s:s}", "index", 0, "message", msg, "finish_reason", finish);
        toolcall_result_clear(&res);
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", c->id, "object",
                          c->r.is_chat ? "chat.completion" : "text_completion", "created", (json_int_t)c->created,
                          "model", c->S->model_id, "choices", choice, "usage", usage_json(c));
    http_reply_json(out, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

/* ---- streaming ------------------------------------------------------------------ */

static int on_event(void *ctx, const struct toolcall_event *ev)
{
    struct chat_ctx *c = ctx;
    switch (ev->kind) {
    case TOOLCALL_EV_CONTENT:
        return sse_delta(c, json_pack("{s:o}", "content", jstr(ev->text, ev->len)));
    case TOOLCALL_EV_REASONING:
        if (!c->r.return_reasoning)
            return GLIM_OK;
        return sse_delta(c, json_pack("{s:o}", "reasoning_content", jstr(ev->text, ev->len)));
    case TOOLCALL_EV_CALL_START:
        c->n_calls++;
        return sse_delta(c, json_pack("{s:[{s:i, s:s, s:s, s:{s:s, s:s}}]}", "tool_calls", "index", ev->index, "id",
                                      ev->id, "type", "function", "function", "name", ev->name, "arguments", ""));
    case TOOLCALL_EV_CALL_ARGS:
        return sse_delta(c, json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", ev->index, "function",
                                      "arguments", jstr(ev->text, ev->len)));
    default:
        return GLIM_OK;
    }
}

static int stream_start(struct chat_ctx *c)
{
    c->started = true;
    if (!c->r.is_chat)
        return GLIM_OK;
    struct toolcall_config cfg;
    struct glim_err err = {0};
    tool_config(c, &cfg);
    int rc = toolcall_stream_new(&cfg, on_event, c, &c->ts, &err);
    rc = rc ? rc : sse_delta(c, json_pack("{s:s, s:s}", "role", "assistant", "content", ""));
    if (!rc && c->forced)
        rc = toolcall_stream_feed(c->ts, c->forced, strlen(c->forced), &err);
    return rc;
}

static int stream_text(struct chat_ctx *c, const char *s, size_t n)
{
    struct glim_err err = {0};
    if (!n)
        return GLIM_OK;
    if (c->r.is_chat)
        return toolcall_stream_feed(c->ts, s, n, &err);
    return sse_json(c, chunk_new(c, json_pack("{s:i, s:o, s:n}", "index", 0, "text", jstr(s, n), "logprobs")));
}

static int stream_end(struct chat_ctx *c)
{
    struct srv_job *j = c->job;
    struct glim_err err = {0};
    int rc = GLIM_OK;
    log_turn(c);
    if (!j->err.status && c->r.is_chat)
        rc = toolcall_stream_finish(c->ts, &err);
    if (j->err.status || rc) {
        struct api_error e = j->err;
        if (!j->err.status)
            api_fail(&e, 500, "server_error", NULL, "Generation failed: %s", err.msg);
        char *s = oai_error_json(&e);
        rc = strbuf_printf(&c->sse, "data: %s\n\ndata: [DONE]\n\n", s ? s : "{}");
        free(s);
        return rc;
    }
    const char *finish = c->n_calls ? "tool_calls" : j->finish;
    json_t *fin = c->r.is_chat ? json_pack("{s:i, s:{}, s:s}", "index", 0, "delta", "finish_reason", finish)
                               : json_pack("{s:i, s:s, s:n, s:s}", "index", 0, "text", "", "logprobs",
                                           "finish_reason", finish);
    rc = sse_json(c, chunk_new(c, fin));
    if (!rc && c->r.include_usage) {
        json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", c->id, "object",
                              c->r.is_chat ? "chat.completion.chunk" : "text_completion", "created",
                              (json_int_t)c->created, "model", c->S->model_id, "choices", "usage", usage_json(c));
        rc = sse_json(c, u);
    }
    return rc ? rc : strbuf_puts(&c->sse, "data: [DONE]\n\n");
}

static ssize_t stream_read(void *ctx, char *buf, size_t max)
{
    struct chat_ctx *c = ctx;
    if (c->sse_off < c->sse.len) {
        size_t n = GLIM_MIN(max, c->sse.len - c->sse_off);
        memcpy(buf, c->sse.data + c->sse_off, n);
        c->sse_off += n;
        if (c->sse_off == c->sse.len)
            strbuf_reset(&c->sse), c->sse_off = 0;
        return (ssize_t)n;
    }
    if (c->finished)
        return -1;
    int rc = GLIM_OK;
    if (!c->started) {
        rc = stream_start(c);
    } else {
        strbuf_reset(&c->text);
        bool more = srv_job_take(c->job, &c->text);
        rc = stream_text(c, c->text.data, c->text.len);
        if (!rc && !more) {
            rc = stream_end(c);
            c->finished = true;
        }
    }
    if (rc) {   /* out of memory mid-stream: end it */
        c->finished = true;
        return c->sse.len > c->sse_off ? 0 : -1;
    }
    return 0;
}

/* ---- the handler -------------------------------------------------------------- */

static int check_context(const struct srv *S, struct srv_req *r, int64_t n_prompt, struct api_error *e)
{
    if (n_prompt >= S->n_ctx)
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded",
                        "This model's maximum context length is %lld tokens; the prompt has %lld tokens",
                        (long long)S->n_ctx, (long long)n_prompt);
    if (r->max_tokens > 0 && n_prompt + r->max_tokens > S->n_ctx)
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded",
                        "This model's maximum context length is %lld tokens; you requested %lld tokens "
                        "(%lld in the prompt, %lld for the completion)",
                        (long long)S->n_ctx, (long long)(n_prompt + r->max_tokens), (long long)n_prompt,
                        (long long)r->max_tokens);
    if (r->max_tokens < 0)
        r->max_tokens = S->n_ctx - n_prompt;
    return GLIM_OK;
}

static struct srv_job *make_job(const struct srv *S, const struct srv_req *r, struct srv_prompt *p)
{
    struct srv_job *j = srv_job_new(SRV_JOB_GENERATE);
    if (!j)
        return NULL;
    memcpy(j->session_id, r->session_id, sizeof j->session_id);
    j->prompt = p->ids.data;   /* taken */
    j->n_prompt = (int)p->ids.n;
    tok_ids_init(&p->ids);
    j->sp = r->sp;
    j->max_tokens = r->max_tokens;
    bool ok = true;
    for (int i = 0; i < r->n_stops; i++) {
        j->stops[i] = glim_strndup(r->stops[i], r->stop_lens[i]);
        ok &= j->stops[i] != NULL;
        j->n_stops = i + 1;
    }
    if (r->test_output && S->cfg.test_mode) {
        j->test_output = glim_strndup(r->test_output, r->test_output_len);
        j->test_output_len = r->test_output_len;
        ok &= j->test_output != NULL;
    }
    if (S->cfg.test_mode)
        j->test_hold_until = r->test_hold_until;
    if (!ok) {
        srv_job_release(j);
        srv_job_release(j);
        return NULL;
    }
    return j;
}

static int prepare(struct srv *S, const struct http_req *hr, struct chat_ctx *c, struct api_error *e)
{
    struct srv_req *r = &c->r;
    if (oai_parse_request(hr->body, hr->body_len, c->r.is_chat, S->model_id, r, e) ||
        oai_session_resolve(r, http_header(hr, "X-ExecuTorch-Session-ID"), http_header(hr, "session_id"),
                            http_header(hr, "x-session-affinity"), e))
        return GLIM_EINVAL;
    struct srv_prompt p;
    if (srv_build_prompt(S, r, &p, e))
        return GLIM_EINVAL;
    c->forced = p.forced;
    p.forced = NULL;
    c->n_prompt = (int64_t)p.ids.n;
    int rc = check_context(S, r, c->n_prompt, e);
    if (!rc && build_tools(c))
        rc = api_fail(e, 500, "server_error", NULL, "out of memory");
    if (!rc && !(c->job = make_job(S, r, &p)))
        rc = api_fail(e, 500, "server_error", NULL, "out of memory");
    srv_prompt_clear(&p);
    return rc;
}

void api_chat(struct srv *S, const struct http_req *hr, bool is_chat, struct http_reply *out)
{
    struct api_error e = {0};
    struct chat_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        api_fail(&e, 500, "server_error", NULL, "out of memory");
        return http_reply_error(out, &e);
    }
    c->S = S;
    c->r.is_chat = is_chat;
    c->created = (int64_t)time(NULL);
    strbuf_init(&c->text);
    strbuf_init(&c->sse);
    oai_make_id(is_chat ? "chatcmpl-" : "cmpl-", c->id, sizeof c->id);
    if (prepare(S, hr, c, &e)) {
        chat_ctx_free(c);
        return http_reply_error(out, &e);
    }
    sched_submit(S->sched, c->job);
    if (srv_job_wait_started(c->job) == SRV_JOB_DONE && c->job->err.status) {
        http_reply_error(out, &c->job->err);
        chat_ctx_free(c);
        return;
    }
    if (!c->r.stream) {
        reply_whole(c, out);
        chat_ctx_free(c);
        return;
    }
    out->status = 200;
    out->content_type = "text/event-stream";
    out->read = stream_read;
    out->free = chat_ctx_free;
    out->ctx = c;
}
#endif
