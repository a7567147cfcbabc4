/*
 * chat_prompt.c — render, then tokenize by trust level (see chat_prompt.h).
 *
 * The untrusted strings of the request are located in the rendered text in
 * the order the template emits them (templates copy contents verbatim, at
 * most trimmed); those byte ranges are encoded without TOK_PARSE_SPECIAL.
 * A string that contains control-token text but cannot be located is an
 * error rather than a silent injection.
 */
#include "chat_prompt.h"

#include <string.h>

#include "../base/alloc.h"
#include "../gguf/gguf.h"

struct span { size_t at, len; };

struct spans {
    struct span *v;   /* owned */
    int n, cap;
};

static int spans_push(struct spans *s, size_t at, size_t len)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        struct span *nv = glim_realloc(s->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return GLIM_ENOMEM;
        s->v = nv, s->cap = cap;
    }
    s->v[s->n++] = (struct span){at, len};
    return GLIM_OK;
}

/* Could this text turn into a control token if parsed as template text? */
static bool looks_special(const struct tok_vocab *v, const char *s)
{
    for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
        const char *e = strchr(p, '>');
        if (e && tok_find(v, p, (size_t)(e - p + 1)) >= 0 && tok_is_control(v, tok_find(v, p, (size_t)(e - p + 1))))
            return true;
    }
    return false;
}

/* Find s (or s trimmed of surrounding white space) in out[*cursor..]; record the span. */
static int locate(const struct tok_vocab *v, const char *text, size_t text_len, const char *s,
                  size_t *cursor, struct spans *sp, struct glim_err *err)
{
    if (!s || !*s)
        return GLIM_OK;
    size_t len = strlen(s);
    const char *b = s, *e = s + len;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {   /* templates often |trim contents */
            while (b < e && strchr(" \t\r\n", *b))
                b++;
            while (e > b && strchr(" \t\r\n", e[-1]))
                e--;
            if (b == e)
                return GLIM_OK;
        }
        size_t n = (size_t)(e - b);
        for (size_t at = *cursor; at + n <= text_len; at++) {
            if (memcmp(text + at, b, n) == 0) {
                *cursor = at + n;
                return spans_push(sp, at, n) ? glim_fail(err, GLIM_ENOMEM, "out of memory") : GLIM_OK;
            }
        }
    }
    if (looks_special(v, s))
        return glim_fail(err, GLIM_EINVAL,
                         "a message contains control-token text that the template transformed; refusing to "
                         "tokenize it as a control token");
    return GLIM_OK;
}

static int collect(const struct tok_vocab *v, const struct chat_request *req, const char *text, size_t len,
                   struct spans *sp, struct glim_err *err)
{
    size_t cur = 0;
    int rc = GLIM_OK;
    for (int i = 0; rc == GLIM_OK && i < req->n_messages; i++) {
        const struct chat_message *m = &req->messages[i];
        size_t save = cur;
        if (m->reasoning && (rc = locate(v, text, len, m->reasoning, &cur, sp, err)))
            break;
        if (m->content && (rc = locate(v, text, len, m->content, &cur, sp, err)))
            break;
        for (int k = 0; rc == GLIM_OK && k < m->n_tool_calls; k++)
            if (m->tool_calls[k].arguments)
                rc = locate(v, text, len, m->tool_calls[k].arguments, &cur, sp, err);
        if (cur == save)
            cur = save;   /* nothing of this message was found: keep the cursor */
    }
    return rc;
}

int chat_prompt_encode(const struct chat_template *t, const struct tok_vocab *v,
                       const struct chat_request *req, struct tok_ids *out, struct glim_err *err)
{
    struct strbuf r;
    struct spans sp = {0};
    strbuf_init(&r);
    int rc = chat_render(t, req, &r, err);
    if (rc == GLIM_OK)
        rc = collect(v, req, strbuf_cstr(&r), r.len, &sp, err);
    if (rc != GLIM_OK)
        goto done;
    const char *text = strbuf_cstr(&r);
    unsigned first = 0;
    int32_t bos = tok_bos(v);
    size_t bos_len = 0;
    const char *bos_text = bos >= 0 ? tok_piece(v, bos, &bos_len) : NULL;
    bool starts_with_bos = bos_text && bos_len && r.len >= bos_len && !memcmp(text, bos_text, bos_len);
    if (tok_add_bos(v) && !starts_with_bos)
        first = TOK_ADD_BOS;   /* else the template's BOS text is parsed into the one BOS */
    size_t at = 0;
    for (int i = 0; rc == GLIM_OK && i <= sp.n; i++) {
        size_t end = i < sp.n ? sp.v[i].at : r.len;
        unsigned cont = at ? TOK_NO_SPACE_PREFIX : 0;
        if (end > at || first)
            rc = tok_encode(v, text + at, end - at, TOK_PARSE_SPECIAL | first | cont, out, err);
        first = 0;
        if (rc == GLIM_OK && i < sp.n) {
            rc = tok_encode(v, text + sp.v[i].at, sp.v[i].len, sp.v[i].at ? TOK_NO_SPACE_PREFIX : 0, out, err);
            at = sp.v[i].at + sp.v[i].len;
        }
    }
done:
    glim_free(sp.v);
    strbuf_clear(&r);
    return rc;
}

int chat_template_from_gguf(const struct gguf_file *f, struct chat_template **out, struct glim_err *err)
{
    const char *src;
    size_t len;
    int rc = gguf_get_str(f, "tokenizer.chat_template", &src, &len, err);
    if (rc == GLIM_ENOTFOUND)
        return glim_fail(err, GLIM_ENOTFOUND, "the model has no chat template (tokenizer.chat_template)");
    if (rc != GLIM_OK)
        return rc;
    rc = chat_template_new(src, len, out, err);
    return rc == GLIM_OK ? rc : glim_err_prefix(err, "tokenizer.chat_template");
}

int chat_encode_user_prompt(const struct gguf_file *f, const struct tok_vocab *v, const char *system,
                            const char *user, struct tok_ids *out, struct glim_err *err)
{
    struct chat_template *t = NULL;
    int rc = chat_template_from_gguf(f, &t, err);
    if (rc != GLIM_OK)
        return rc;
    struct chat_message msgs[2];
    int n = 0;
    if (system)
        msgs[n++] = (struct chat_message){.role = "system", .content = system};
    msgs[n++] = (struct chat_message){.role = "user", .content = user};
    size_t bl = 0, el = 0;
    const char *bos = tok_bos(v) >= 0 ? tok_piece(v, tok_bos(v), &bl) : NULL;
    const char *eos = tok_eos(v) >= 0 ? tok_piece(v, tok_eos(v), &el) : NULL;
    char *bos_s = bos ? glim_strndup(bos, bl) : NULL, *eos_s = eos ? glim_strndup(eos, el) : NULL;
    struct chat_request req = {
        .messages = msgs, .n_messages = n, .add_generation_prompt = true,
        .bos_token = bos_s, .eos_token = eos_s,
    };
    rc = chat_prompt_encode(t, v, &req, out, err);
    glim_free(bos_s);
    glim_free(eos_s);
    chat_template_free(t);
    return rc;
}
