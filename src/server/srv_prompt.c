/*
 * srv_prompt.c — srv_build_prompt(): a validated request → prompt token ids.
 * HTTP thread; reads only the shared read-only vocabulary.
 *
 * Until the template engine's chat_* API (src/chat/chat.h) lands, this file
 * renders Muse Glimmer's Harmony format by hand (runtime.md §4.4/§4.5 and
 * testdata/chat_templates/muse-glimmer-renders.md) when the vocabulary has
 * <|start|> and <|message|>, and plain "one message per line" text for other
 * models (the small llama test checkpoints have no chat template).
 *
 * Trust: template text is encoded with TOK_PARSE_SPECIAL, client text never
 * is. A control token's text inside client text is refused with a 400 so that
 * a message cannot forge a turn boundary (and a later template-engine path
 * that renders everything as one string stays safe).
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "chat/chat.h"
#include "srv.h"

void srv_prompt_clear(struct srv_prompt *p)
{
    tok_ids_clear(&p->ids);
    free(p->forced);
    p->forced = NULL;
}

struct pb {                       /* prompt builder */
    const struct srv *S;
    struct tok_ids *ids;
    bool first;                   /* next span is the first: BOS */
    struct api_error *e;
};

static int pb_oom(struct pb *b)
{
    return api_fail(b->e, 500, "server_error", NULL, "out of memory while building the prompt");
}

/* Template text: control tokens parsed. */
static int pb_tmpl(struct pb *b, const char *s)
{
    struct glim_err err = {0};
    unsigned fl = TOK_PARSE_SPECIAL | (b->first ? TOK_ADD_BOS : TOK_NO_SPACE_PREFIX);
    b->first = false;
    if (tok_encode(b->S->v, s, strlen(s), fl, b->ids, &err))
        return pb_oom(b);
    return GLIM_OK;
}

/* Client text: never parsed for control tokens. */
static int pb_text(struct pb *b, const char *s, size_t n)
{
    struct glim_err err = {0};
    unsigned fl = b->first ? TOK_ADD_BOS : TOK_NO_SPACE_PREFIX;
    b->first = false;
    if (n && tok_encode(b->S->v, s, n, fl, b->ids, &err))
        return pb_oom(b);
    return GLIM_OK;
}

/* Refuse control-token text (`<|eot|>`, `</s>` ...) inside client text. */
static int check_no_control(const struct srv *S, const char *s, size_t n, const char *where, struct api_error *e)
{
    for (const char *p = memchr(s, '<', n); p; p = memchr(p + 1, '<', (size_t)(s + n - p - 1))) {
        size_t left = (size_t)(s + n - p);
        const char *q = memchr(p, '>', left < 64 ? left : 64);
        if (!q)
            continue;
        int32_t id = tok_find(S->v, p, (size_t)(q - p + 1));
        if (id >= 0 && tok_is_control(S->v, id))
            return api_fail(e, 400, "invalid_request_error", "invalid_content",
                            "%s: contains the control token '%.*s', which may not appear in message text", where,
                            (int)(q - p + 1), p);
        if (p + 1 >= s + n)
            break;
    }
    return GLIM_OK;
}

/* A message's content as one string: a string, or text parts joined. */
static int content_text(const struct srv *S, json_t *c, size_t i, struct strbuf *out, struct api_error *e)
{
    strbuf_reset(out);
    if (json_is_string(c)) {
        if (strbuf_append(out, json_string_value(c), json_string_length(c)))
            return api_fail(e, 500, "server_error", NULL, "out of memory");
    } else if (json_is_array(c)) {
        size_t k;
        json_t *part;
        json_array_foreach(c, k, part) {
            json_t *t = json_object_get(part, "text");
            if (json_is_string(t) && strbuf_append(out, json_string_value(t), json_string_length(t)))
                return api_fail(e, 500, "server_error", NULL, "out of memory");
        }
    }
    char where[96];
    snprintf(where, sizeof where, "messages[%zu].content", i);
    return check_no_control(S, out->data ? out->data : "", out->len, where, e);
}

/* ---- plain models: user text on its own line, replies continue it ----------------------------------- */

static int render_plain(struct pb *b, json_t *msgs)
{
    struct strbuf all, one;
    strbuf_init(&all);
    strbuf_init(&one);
    size_t i;
    json_t *m;
    int rc = GLIM_OK;
    json_array_foreach(msgs, i, m) {
        if ((rc = content_text(b->S, json_object_get(m, "content"), i, &one, b->e)))
            break;
        /* an assistant message continues the text it answered, exactly as it
         * was generated (so a session's cached tokens match); others start a line */
        bool is_reply = !strcmp(json_string_value(json_object_get(m, "role")), "assistant");
        if (one.len && all.len && !is_reply && strbuf_putc(&all, '\n'))
            rc = pb_oom(b);
        if (!rc && strbuf_append(&all, one.data ? one.data : "", one.len))
            rc = pb_oom(b);
        if (rc)
            break;
    }
    if (!rc) {
        struct glim_err err = {0};
        if (tok_encode(b->S->v, strbuf_cstr(&all), all.len, TOK_ADD_SPECIAL, b->ids, &err))
            rc = pb_oom(b);
    }
    strbuf_clear(&all);
    strbuf_clear(&one);
    return rc;
}

/* ---- Harmony (Muse Glimmer) ---------------------------------------------- */

static const char TOOLS_PREAMBLE[] =
    "In this environment you have access to a set of tools you can use to answer the user's question.\n\n"
    "You can invoke a function by writing a \"<atem:function_calls>\" block like the following:\n"
    "<atem:function_calls>\n<atem:invoke name=\"$FUNCTION_NAME\">\n"
    "<atem:parameter name=\"$PARAMETER_NAME\">$PARAMETER_VALUE</atem:parameter>\n...\n</atem:invoke>\n"
    "</atem:function_calls>\n\n"
    "String and scalar parameters should be specified as is, while lists and objects should use JSON format. "
    "Note that spaces for string values are not stripped. The output is not expected to be valid XML and is "
    "parsed with regular expressions.\nHere are the functions available in JSONSchema format:\n";

/* Python json.dumps separators (", " and ": ") on one line, UTF-8 raw. */
static int dump_py(struct strbuf *sb, json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(0) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (!s)
        return GLIM_ENOMEM;
    int rc = strbuf_puts(sb, s);
    free(s);
    return rc;
}

static int system_text(struct pb *b, const struct srv_req *r, struct strbuf *sys)
{
    int rc = strbuf_printf(sys, "\n\nReasoning strength: %s.", r->reasoning_strength ? r->reasoning_strength : "high");
    if (!rc && r->tools) {
        rc = strbuf_puts(sys, "\n\n");
        rc = rc ? rc : strbuf_puts(sys, TOOLS_PREAMBLE);
        rc = rc ? rc : strbuf_puts(sys, "// Function schemas\n");
        size_t i;
        json_t *t;
        json_array_foreach(r->tools, i, t) {
            if (!rc)
                rc = dump_py(sys, json_object_get(t, "function"));
            if (!rc)
                rc = strbuf_putc(sys, '\n');
        }
    }
    if (!rc)
        rc = strbuf_puts(sys, "\n# Valid recipients: \"self\", ");
    size_t i;
    json_t *t;
    json_array_foreach(r->tools, i, t) {
        if (!rc)
            rc = strbuf_printf(sys, "\"%s.*\", ",
                               json_string_value(json_object_get(json_object_get(t, "function"), "name")));
    }
    if (!rc)
        rc = strbuf_puts(sys, "\"user\".");
    return rc ? pb_oom(b) : GLIM_OK;
}

static int render_system(struct pb *b, const struct srv_req *r, json_t *msgs)
{
    struct strbuf user, one, tail;
    strbuf_init(&user), strbuf_init(&one), strbuf_init(&tail);
    int rc = GLIM_OK;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (strcmp(role, "system") && strcmp(role, "developer"))
            continue;
        if ((rc = content_text(b->S, json_object_get(m, "content"), i, &one, b->e)))
            goto done;
        if ((user.len && strbuf_puts(&user, "\n\n")) || strbuf_append(&user, strbuf_cstr(&one), one.len)) {
            rc = pb_oom(b);
            goto done;
        }
    }
    if ((rc = system_text(b, r, &tail)))
        goto done;
    if ((rc = pb_tmpl(b, "<|start|>system<|message|>")))
        goto done;
    if (user.len)
        rc = pb_text(b, user.data, user.len);
    else
        rc = pb_tmpl(b, "You are a helpful AI assistant.");
    if (!rc)
        rc = pb_tmpl(b, strbuf_cstr(&tail));
    if (!rc)
        rc = pb_tmpl(b, "<|eot|>");
done:
    strbuf_clear(&user), strbuf_clear(&one), strbuf_clear(&tail);
    return rc;
}

/* One assistant tool call as an ATEM message (§5.1). */
static int render_call(struct pb *b, json_t *call, size_t i)
{
    json_t *f = json_object_get(call, "function");
    const char *name = json_string_value(json_object_get(f, "name"));
    json_t *a = json_object_get(f, "arguments"), *args = NULL;
    char where[96];
    snprintf(where, sizeof where, "messages[%zu].tool_calls", i);
    if (check_no_control(b->S, name, strlen(name), where, b->e))
        return GLIM_EINVAL;
    if (json_is_string(a))
        args = json_loadb(json_string_value(a), json_string_length(a), 0, NULL);
    else if (json_is_object(a))
        args = json_incref(a);
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = strbuf_printf(&sb, "<atem:function_calls>\n<atem:invoke name=\"%s\">\n", name);
    const char *k;
    json_t *v;
    if (json_is_object(args)) {
        json_object_foreach(args, k, v) {
            rc = rc ? rc : strbuf_printf(&sb, "<atem:parameter name=\"%s\">", k);
            if (!rc)
                rc = json_is_string(v) ? strbuf_append(&sb, json_string_value(v), json_string_length(v))
                                       : dump_py(&sb, v);
            rc = rc ? rc : strbuf_puts(&sb, "</atem:parameter>\n");
        }
    }
    rc = rc ? rc : strbuf_puts(&sb, "</atem:invoke>\n</atem:function_calls>");
    json_decref(args);
    if (rc) {
        strbuf_clear(&sb);
        return pb_oom(b);
    }
    rc = check_no_control(b->S, sb.data, sb.len, where, b->e);
    rc = rc ? rc : pb_tmpl(b, "<|start|>assistant to=");
    rc = rc ? rc : pb_text(b, name, strlen(name));
    rc = rc ? rc : pb_tmpl(b, "<|message|>");
    rc = rc ? rc : pb_text(b, sb.data, sb.len);
    rc = rc ? rc : pb_tmpl(b, "<|eot|>");
    strbuf_clear(&sb);
    return rc;
}

static const char *tool_name_for(json_t *msgs, size_t upto, json_t *m)
{
    json_t *n = json_object_get(m, "name");
    if (json_is_string(n))
        return json_string_value(n);
    const char *id = json_string_value(json_object_get(m, "tool_call_id"));
    for (size_t i = upto; id && i-- > 0;) {
        json_t *tc = json_object_get(json_array_get(msgs, i), "tool_calls");
        size_t k;
        json_t *c;
        json_array_foreach(tc, k, c) {
            const char *cid = json_string_value(json_object_get(c, "id"));
            if (cid && !strcmp(cid, id))
                return json_string_value(json_object_get(json_object_get(c, "function"), "name"));
        }
    }
    return "tool";
}

static int render_message(struct pb *b, json_t *msgs, size_t i, struct strbuf *one)
{
    json_t *m = json_array_get(msgs, i);
    const char *role = json_string_value(json_object_get(m, "role"));
    int rc = content_text(b->S, json_object_get(m, "content"), i, one, b->e);
    if (rc || !strcmp(role, "system") || !strcmp(role, "developer"))
        return rc;
    if (!strcmp(role, "user")) {
        rc = pb_tmpl(b, "<|start|>user<|message|>");
        rc = rc ? rc : pb_text(b, one->data, one->len);
        return rc ? rc : pb_tmpl(b, "<|eot|>");
    }
    if (!strcmp(role, "tool")) {
        const char *name = tool_name_for(msgs, i, m);
        if ((rc = check_no_control(b->S, name, strlen(name), "tool name", b->e)))
            return rc;
        rc = pb_tmpl(b, "<|start|>tool ");
        rc = rc ? rc : pb_text(b, name, strlen(name));
        rc = rc ? rc : pb_tmpl(b, "<|message|><tool_output name=\"");
        rc = rc ? rc : pb_text(b, name, strlen(name));
        rc = rc ? rc : pb_tmpl(b, "\">\n");
        rc = rc ? rc : pb_text(b, one->data, one->len);
        return rc ? rc : pb_tmpl(b, "\n</tool_output><|eot|>");
    }
    /* assistant: reasoning, then calls, then visible content */
    json_t *rs = json_object_get(m, "reasoning_content");
    if (json_is_string(rs) && json_string_length(rs)) {
        char where[96];
        snprintf(where, sizeof where, "messages[%zu].reasoning_content", i);
        rc = check_no_control(b->S, json_string_value(rs), json_string_length(rs), where, b->e);
        rc = rc ? rc : pb_tmpl(b, "<|start|>assistant to=self<|message|>");
        rc = rc ? rc : pb_text(b, json_string_value(rs), json_string_length(rs));
        rc = rc ? rc : pb_tmpl(b, "<|eom|>");
    }
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
        rc = rc ? rc : render_call(b, c, i);
    }
    if (!rc && one->len) {
        rc = pb_tmpl(b, "<|start|>assistant to=user<|message|>");
        rc = rc ? rc : pb_text(b, one->data, one->len);
        rc = rc ? rc : pb_tmpl(b, "<|eot|>");
    }
    return rc;
}

static int render_harmony(struct pb *b, const struct srv_req *r)
{
    struct strbuf one;
    strbuf_init(&one);
    int rc = render_system(b, r, r->messages);
    for (size_t i = 0; !rc && i < json_array_size(r->messages); i++)
        rc = render_message(b, r->messages, i, &one);
    strbuf_clear(&one);
    return rc ? rc : pb_tmpl(b, "<|start|>assistant");
}

/* ---- the model's own template (tokenizer.chat_template) ------------------ */

/* Every string (and key) of a client JSON value, checked for control tokens. */
static int check_json(const struct srv *S, json_t *v, const char *where, int depth, struct api_error *e)
{
    if (depth > 64)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "%s: nested too deeply", where);
    if (json_is_string(v))
        return check_no_control(S, json_string_value(v), json_string_length(v), where, e);
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, k, x) {
            if (check_no_control(S, k, strlen(k), where, e) || check_json(S, x, where, depth + 1, e))
                return GLIM_EINVAL;
        }
    }
    json_array_foreach(v, i, x) {
        if (check_json(S, x, where, depth + 1, e))
            return GLIM_EINVAL;
    }
    return GLIM_OK;
}

static int template_vars(const struct srv *S, const struct srv_req *r, json_t *vars)
{
    size_t n;
    const char *bos = tok_bos(S->v) >= 0 ? tok_piece(S->v, tok_bos(S->v), &n) : NULL;
    const char *eos = tok_eos(S->v) >= 0 ? tok_piece(S->v, tok_eos(S->v), &n) : NULL;
    int rc = json_object_set(vars, "messages", r->messages);
    if (r->tools)
        rc |= json_object_set(vars, "tools", r->tools);
    rc |= json_object_set_new(vars, "add_generation_prompt", json_true());
    if (bos)
        rc |= json_object_set_new(vars, "bos_token", json_string(bos));
    if (eos)
        rc |= json_object_set_new(vars, "eos_token", json_string(eos));
    const char *k;
    json_t *x;
    json_object_foreach(json_object_get(r->root, "chat_template_kwargs"), k, x) {
        if (strcmp(k, "return_reasoning") && strcmp(k, "messages") && strcmp(k, "tools"))
            rc |= json_object_set(vars, k, x);
    }
    if (r->reasoning_strength)
        rc |= json_object_set_new(vars, "reasoning_strength", json_string(r->reasoning_strength));
    return rc ? GLIM_ENOMEM : GLIM_OK;
}

static int render_template(struct pb *b, const struct srv_req *r)
{
    const struct srv *S = b->S;
    if (check_json(S, r->messages, "messages", 0, b->e) || (r->tools && check_json(S, r->tools, "tools", 0, b->e)))
        return GLIM_EINVAL;
    json_t *vars = json_object();
    char *js = NULL;
    struct strbuf out;
    struct glim_err err = {0};
    strbuf_init(&out);
    int rc = vars ? template_vars(S, r, vars) : GLIM_ENOMEM;
    if (!rc && !(js = json_dumps(vars, JSON_COMPACT)))
        rc = GLIM_ENOMEM;
    if (rc) {
        rc = pb_oom(b);
    } else if ((rc = chat_render_json(S->tmpl, js, strlen(js), NULL, NULL, &out, &err))) {
        rc = rc == GLIM_ENOMEM ? pb_oom(b)
                               : api_fail(b->e, 400, "invalid_request_error", "invalid_value",
                                          "the chat template refused these messages: %s", err.msg);
    } else {
        size_t n_bos = 0;
        const char *bos = tok_bos(S->v) >= 0 ? tok_piece(S->v, tok_bos(S->v), &n_bos) : NULL;
        const char *t = strbuf_cstr(&out);
        bool has_bos = bos && n_bos && out.len >= n_bos && !memcmp(t, bos, n_bos);
        unsigned fl = TOK_PARSE_SPECIAL | (has_bos ? TOK_ADD_BOS : TOK_ADD_SPECIAL);
        if (tok_encode(S->v, t + (has_bos ? n_bos : 0), out.len - (has_bos ? n_bos : 0), fl, b->ids, &err))
            rc = pb_oom(b);
        b->first = false;
    }
    free(js);
    json_decref(vars);
    strbuf_clear(&out);
    return rc;
}

/* tool_choice required / named: start the reply in the tool-call form. */
static int forced_prefix(const struct srv *S, const struct srv_req *r, struct srv_prompt *out, struct pb *b)
{
    if (r->tool_choice != SRV_TOOLS_REQUIRED && r->tool_choice != SRV_TOOLS_NAMED)
        return GLIM_OK;
    struct strbuf sb;
    strbuf_init(&sb);
    bool named = r->tool_choice == SRV_TOOLS_NAMED;
    int rc = GLIM_OK;
    if (S->is_harmony)
        rc = strbuf_printf(&sb, " to=%s<|message|>", named ? r->tool_name : "functions");
    rc = rc ? rc : strbuf_puts(&sb, "<atem:function_calls>\n<atem:invoke name=\"");
    if (!rc && named)
        rc = strbuf_printf(&sb, "%s\">\n", r->tool_name);
    if (rc || (rc = pb_tmpl(b, sb.data))) {
        strbuf_clear(&sb);
        return rc == GLIM_ENOMEM ? pb_oom(b) : rc;
    }
    out->forced = sb.data;   /* taken */
    return GLIM_OK;
}

int srv_build_prompt(const struct srv *S, const struct srv_req *r, struct srv_prompt *out, struct api_error *e)
{
    memset(out, 0, sizeof *out);
    tok_ids_init(&out->ids);
    struct pb b = {S, &out->ids, true, e};
    int rc;
    if (!r->is_chat) {
        struct glim_err err = {0};
        rc = tok_encode(S->v, r->prompt, r->prompt_len, TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, &out->ids, &err);
        if (rc)
            rc = pb_oom(&b);
    } else if (S->tmpl) {
        rc = render_template(&b, r);
        rc = rc ? rc : forced_prefix(S, r, out, &b);
    } else if (S->is_harmony) {
        rc = render_harmony(&b, r);
        rc = rc ? rc : forced_prefix(S, r, out, &b);
    } else {
        rc = render_plain(&b, r->messages);
        if (!rc && (r->tool_choice == SRV_TOOLS_REQUIRED || r->tool_choice == SRV_TOOLS_NAMED)) {
            b.first = false;
            rc = forced_prefix(S, r, out, &b);
        }
    }
    if (!rc && out->ids.n == 0)
        rc = api_fail(e, 400, "invalid_request_error", "invalid_value", "the prompt is empty");
    if (rc)
        srv_prompt_clear(out);
    return rc;
}
#endif
