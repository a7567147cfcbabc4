/*
 * chat.c — builds the template context from a chat request and renders it with the
 * Jinja engine (jinja.h). Message preparation follows the server contract of
 * runtime.md §4.5: fields that are absent stay undefined (so `message.get('x')` is
 * None and `x is defined` is false), tool-call arguments are parsed from JSON into
 * objects when they parse, and the `developer` role is renamed `system`.
 */
#include <string.h>

#include "base/alloc.h"
#include "chat.h"
#include "chat/jinja_int.h"

struct chat_template {
    struct jinja_template *jt;   /* owned */
};

#define ARENA_BUDGET ((size_t)512 << 20)

int chat_template_new(const char *src, size_t len, struct chat_template **out, struct glim_err *err)
{
    struct chat_template *t = glim_calloc(1, sizeof *t);
    if (!t)
        return glim_fail(err, GLIM_ENOMEM, "chat template: out of memory");
    int rc = jinja_template_new(src, len, &t->jt, err);
    if (rc) {
        glim_free(t);
        return rc;
    }
    *out = t;
    return GLIM_OK;
}

void chat_template_free(struct chat_template *t)
{
    if (!t)
        return;
    jinja_template_free(t->jt);
    glim_free(t);
}

static int set_str(struct jinja_arena *a, struct jinja_value d, const char *key, const char *s)
{
    struct jinja_value v;
    if (!s)
        return GLIM_OK;
    if (jinja_cstr(a, s, &v))
        return GLIM_ENOMEM;
    return jinja_dict_setc(a, d, key, v);
}

/* arguments: JSON text → object; anything that does not parse stays a string */
static int tool_args(struct jinja_arena *a, const char *json, struct jinja_value *out)
{
    if (!json)
        return jinja_dict_new(a, out);
    if (jinja_json_parse(a, json, strlen(json), out, NULL) == GLIM_OK)
        return GLIM_OK;
    return jinja_cstr(a, json, out);
}

static int build_tool_call(struct jinja_arena *a, const struct chat_tool_call *tc, struct jinja_value *out)
{
    struct jinja_value fn, args, type;
    if (jinja_dict_new(a, out) || jinja_dict_new(a, &fn) || tool_args(a, tc->arguments, &args) ||
        set_str(a, *out, "id", tc->id) || jinja_cstr(a, "function", &type) ||
        jinja_dict_setc(a, *out, "type", type) || set_str(a, fn, "name", tc->name ? tc->name : "") ||
        jinja_dict_setc(a, fn, "arguments", args) || jinja_dict_setc(a, *out, "function", fn))
        return GLIM_ENOMEM;
    return GLIM_OK;
}

static int build_message(struct jinja_arena *a, const struct chat_message *m, struct jinja_value *out)
{
    const char *role = m->role && !strcmp(m->role, "developer") ? "system" : m->role;
    if (jinja_dict_new(a, out) || set_str(a, *out, "role", role ? role : "user") ||
        set_str(a, *out, "content", m->content) || set_str(a, *out, "reasoning_content", m->reasoning) ||
        set_str(a, *out, "tool_call_id", m->tool_call_id) || set_str(a, *out, "name", m->name))
        return GLIM_ENOMEM;
    if (m->n_tool_calls <= 0)
        return GLIM_OK;
    struct jinja_value calls;
    if (jinja_list_new(a, &calls))
        return GLIM_ENOMEM;
    for (int i = 0; i < m->n_tool_calls; i++) {
        struct jinja_value tc;
        if (build_tool_call(a, &m->tool_calls[i], &tc) || jinja_list_push(a, calls, tc))
            return GLIM_ENOMEM;
    }
    return jinja_dict_setc(a, *out, "tool_calls", calls);
}

static int merge_kwargs(struct jinja_arena *a, struct jinja_value ctx, const char *json, struct glim_err *err)
{
    struct jinja_value kw;
    if (!json)
        return GLIM_OK;
    if (jinja_json_parse(a, json, strlen(json), &kw, err))
        return glim_err_prefix(err, "chat kwargs");
    if (kw.type != JINJA_DICT)
        return glim_fail(err, GLIM_EINVAL, "chat kwargs: expected a JSON object");
    for (size_t i = 0; i < kw.u.d->n; i++)
        if (jinja_dict_set(a, ctx, kw.u.d->k[i], kw.u.d->v[i]))
            return glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
    return GLIM_OK;
}

static int build_context(struct jinja_arena *a, const struct chat_request *req, struct jinja_value *ctx,
                         struct glim_err *err)
{
    struct jinja_value msgs, tools = jinja_none();
    if (jinja_dict_new(a, ctx) || jinja_list_new(a, &msgs))
        return glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
    for (int i = 0; i < req->n_messages; i++) {
        struct jinja_value m;
        if (build_message(a, &req->messages[i], &m) || jinja_list_push(a, msgs, m))
            return glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
    }
    if (req->tools_json) {
        if (jinja_json_parse(a, req->tools_json, strlen(req->tools_json), &tools, err))
            return glim_err_prefix(err, "tools");
        if (tools.type != JINJA_LIST)
            return glim_fail(err, GLIM_EINVAL, "tools: expected a JSON array");
    }
    if (jinja_dict_setc(a, *ctx, "messages", msgs) || jinja_dict_setc(a, *ctx, "tools", tools) ||
        jinja_dict_setc(a, *ctx, "add_generation_prompt", jinja_bool(req->add_generation_prompt)) ||
        set_str(a, *ctx, "bos_token", req->bos_token) || set_str(a, *ctx, "eos_token", req->eos_token))
        return glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
    return merge_kwargs(a, *ctx, req->kwargs_json, err);
}

static int render_ctx(const struct chat_template *t, struct jinja_arena *a, struct jinja_value ctx,
                      time_t (*clock)(void *ud), void *clock_ud, struct strbuf *out, struct glim_err *err)
{
    struct jinja_opts o = {.clock = clock, .clock_ud = clock_ud};
    size_t start = out->len;
    int rc = jinja_render(t->jt, a, ctx, &o, out, err);
    if (rc && out->data) {   /* no half-rendered prompt on failure */
        out->len = start;
        out->data[start] = '\0';
    }
    return rc;
}

int chat_render(const struct chat_template *t, const struct chat_request *req, struct strbuf *out,
                struct glim_err *err)
{
    struct jinja_arena *a = jinja_arena_new(ARENA_BUDGET);
    struct jinja_value ctx;
    if (!a)
        return glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
    int rc = build_context(a, req, &ctx, err);
    if (!rc)
        rc = render_ctx(t, a, ctx, req->clock, req->clock_ud, out, err);
    jinja_arena_free(a);
    return rc;
}

/* Drop null fields of each message; parse string tool-call arguments that hold JSON. */
static int prepare_messages(struct jinja_arena *a, struct jinja_value msgs)
{
    for (size_t i = 0; msgs.type == JINJA_LIST && i < msgs.u.l->n; i++) {
        struct jinja_value m = msgs.u.l->v[i];
        if (m.type != JINJA_DICT)
            continue;
        struct jdict *d = m.u.d;
        size_t k = 0;
        for (size_t j = 0; j < d->n; j++)
            if (d->v[j].type != JINJA_NONE)
                d->k[k] = d->k[j], d->v[k] = d->v[j], k++;
        d->n = k;
        struct jinja_value calls = jinja_dict_getc(m, "tool_calls");
        for (size_t j = 0; calls.type == JINJA_LIST && j < calls.u.l->n; j++) {
            struct jinja_value fn = jinja_dict_getc(calls.u.l->v[j], "function");
            struct jinja_value args = jinja_dict_getc(fn, "arguments"), parsed;
            if (args.type == JINJA_STR &&
                jinja_json_parse(a, args.u.s->s, args.u.s->len, &parsed, NULL) == GLIM_OK &&
                jinja_dict_setc(a, fn, "arguments", parsed))
                return GLIM_ENOMEM;
        }
    }
    return GLIM_OK;
}

int chat_render_json(const struct chat_template *t, const char *json, size_t json_len,
                     time_t (*clock)(void *ud), void *clock_ud, struct strbuf *out,
                     struct glim_err *err)
{
    struct jinja_arena *a = jinja_arena_new(ARENA_BUDGET);
    struct jinja_value ctx;
    int rc;
    if (!a)
        return glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
    rc = jinja_json_parse(a, json, json_len, &ctx, err);
    if (rc)
        goto fail;
    if (ctx.type != JINJA_DICT) {
        rc = glim_fail(err, GLIM_EINVAL, "chat: expected a JSON object with messages");
        goto fail;
    }
    if ((jinja_dict_getc(ctx, "tools").type == JINJA_UNDEFINED &&
         jinja_dict_setc(a, ctx, "tools", jinja_none())) ||
        (jinja_dict_getc(ctx, "add_generation_prompt").type == JINJA_UNDEFINED &&
         jinja_dict_setc(a, ctx, "add_generation_prompt", jinja_bool(false))) ||
        prepare_messages(a, jinja_dict_getc(ctx, "messages"))) {
        rc = glim_fail(err, GLIM_ENOMEM, "chat: out of memory");
        goto fail;
    }
    rc = render_ctx(t, a, ctx, clock, clock_ud, out, err);
fail:
    jinja_arena_free(a);
    return rc;
}
