/*
 * toolcall.c — the ATEM parser of runtime.md §5.2 and the output pipeline
 * of §5.4, one-shot and streaming.
 *
 * DESIGN. §5.2 is written with regexes whose bodies are minimal and whose
 * closing tags must be followed by one of a few tags (or the end). A closing
 * tag's validity depends only on the text after it, so each search walks
 * the closing tags in order and takes the first valid one; a failed search
 * is remembered, which keeps hostile inputs linear instead of quadratic.
 *
 * Streaming re-runs the one-shot pipeline on the longest prefix of the
 * buffered text whose meaning can no longer change (see safe_end()), and
 * emits what grew. finish() runs it on everything. So the streamed deltas
 * always concatenate to the final result, which is toolcall_process().
 */
#include "chat/toolcall.h"

#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "chat/reasoning.h"
#include "chat/toolcall_json.h"

#define NPOS ((size_t)-1)

static const char FUNCS_OPEN[] = "<atem:function_calls>";
static const char FUNCS_CLOSE[] = "</atem:function_calls>";
static const char INVOKE_OPEN[] = "<atem:invoke";
static const char INVOKE_CLOSE[] = "</atem:invoke>";
static const char PARAM_OPEN[] = "<atem:parameter";
static const char PARAM_CLOSE[] = "</atem:parameter>";

static size_t find(const char *s, size_t n, size_t from, const char *lit)
{
    size_t k = strlen(lit);
    for (size_t i = from; i + k <= n; i++)
        if (s[i] == lit[0] && memcmp(s + i, lit, k) == 0)
            return i;
    return NPOS;
}

static bool starts(const char *s, size_t n, size_t i, const char *lit)
{
    size_t k = strlen(lit);
    return i <= n && n - i >= k && memcmp(s + i, lit, k) == 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && reasoning_is_space((unsigned char)s[i]))
        i++;
    return i;
}

/* ---- one tag with its minimal body ------------------------------------------ */

/* What may follow a closing tag (after optional whitespace); end of text always may. */
struct closing {
    const char        *tag;
    const char *const *follow;
    int                n_follow;
};

static const char *const INVOKE_FOLLOW[] = { INVOKE_OPEN, FUNCS_CLOSE, FUNCS_OPEN };
static const char *const PARAM_FOLLOW[] = { PARAM_OPEN, INVOKE_CLOSE };
static const struct closing INVOKE_END = { INVOKE_CLOSE, INVOKE_FOLLOW, 3 };
static const struct closing PARAM_END = { PARAM_CLOSE, PARAM_FOLLOW, 2 };

/* First valid closing tag at or after from; *end = after its trailing whitespace. */
static size_t find_close(const char *s, size_t n, size_t from, const struct closing *c, size_t *end)
{
    for (size_t j = find(s, n, from, c->tag); j != NPOS; j = find(s, n, j + 1, c->tag)) {
        size_t e = skip_ws(s, n, j + strlen(c->tag));
        bool is_ok = e == n;
        for (int k = 0; k < c->n_follow && !is_ok; k++)
            is_ok = starts(s, n, e, c->follow[k]);
        if (is_ok) {
            *end = e;
            return j;
        }
    }
    return NPOS;
}

struct tag {
    size_t start, end;        /* whole match, trailing whitespace included */
    size_t name, name_len;    /* the name="..." value */
    size_t body, body_len;
};

/* `OPEN` \s+ `name="` [^"]* `"` \s* `>` at i; returns the body start or NPOS. */
static size_t open_tag(const char *s, size_t n, size_t i, const char *open, size_t *name, size_t *name_len)
{
    size_t k = i + strlen(open), k0 = k;
    k = skip_ws(s, n, k);
    if (k == k0 || !starts(s, n, k, "name=\""))
        return NPOS;
    *name = k + 6;
    size_t q = *name;
    while (q < n && s[q] != '"')
        q++;
    if (q >= n)
        return NPOS;
    *name_len = q - *name;
    k = skip_ws(s, n, q + 1);
    return k < n && s[k] == '>' ? k + 1 : NPOS;
}

/* finditer step: next tag match starting at or after from inside s[0..n). */
struct finder {
    const char            *s;
    size_t                 n;
    const char            *open;
    const struct closing  *close;
    size_t                 no_close_from;   /* a close search from here failed: later ones will too */
};

static bool next_tag(struct finder *f, size_t from, struct tag *t)
{
    for (size_t i = find(f->s, f->n, from, f->open); i != NPOS; i = find(f->s, f->n, i + 1, f->open)) {
        size_t body = open_tag(f->s, f->n, i, f->open, &t->name, &t->name_len);
        if (body == NPOS || body >= f->no_close_from)
            continue;
        size_t end, j = find_close(f->s, f->n, body, f->close, &end);
        if (j == NPOS) {
            f->no_close_from = body;
            continue;
        }
        t->start = i;
        t->end = end;
        t->body = body;
        t->body_len = j - body;
        return true;
    }
    return false;
}

/* ---- arguments ------------------------------------------------------------------ */

static const struct toolcall_tool *tool_find(const struct toolcall_tool *tools, int n_tools,
                                             const char *name, size_t len)
{
    for (int k = 0; k < n_tools; k++)
        if (tools[k].name && strlen(tools[k].name) == len && memcmp(tools[k].name, name, len) == 0)
            return &tools[k];
    return NULL;
}

static const char *param_type(const struct toolcall_tool *tool, const char *key, size_t len)
{
    for (int k = 0; tool && k < tool->n_params; k++) {
        const char *pn = tool->params[k].name;
        if (pn && strlen(pn) == len && memcmp(pn, key, len) == 0)
            return tool->params[k].type;
    }
    return NULL;
}

/* Arguments of one invoke as a JSON object: keys in first-seen order, the
 * last value of a repeated key. Returns a TOOLCALL_COERCE_* code. */
static int build_args(const char *s, const struct tag *inv, const struct toolcall_tool *tool,
                      struct strbuf *out)
{
    struct finder f = { s + inv->body, inv->body_len, PARAM_OPEN, &PARAM_END, NPOS };
    struct tag p, q;
    bool is_first = true;
    int rc = strbuf_putc(out, '{') ? TOOLCALL_COERCE_NOMEM : TOOLCALL_COERCE_OK;
    for (size_t pos = 0; rc == TOOLCALL_COERCE_OK && next_tag(&f, pos, &p); pos = p.end) {
        const char *key = f.s + p.name;
        bool is_seen = false;   /* an earlier PARAM with this key already wrote it */
        struct finder g = { f.s, f.n, PARAM_OPEN, &PARAM_END, NPOS };
        for (size_t k = 0; next_tag(&g, k, &q) && q.start < p.start && !is_seen; k = q.end)
            is_seen = q.name_len == p.name_len && memcmp(f.s + q.name, key, p.name_len) == 0;
        if (is_seen)
            continue;
        struct tag last = p;   /* the value of the last PARAM with this key */
        for (size_t k = p.end; next_tag(&g, k, &q); k = q.end)
            if (q.name_len == p.name_len && memcmp(f.s + q.name, key, p.name_len) == 0)
                last = q;
        if ((!is_first && strbuf_puts(out, ", ")) || toolcall_json_string(out, key, p.name_len) ||
            strbuf_puts(out, ": "))
            return TOOLCALL_COERCE_NOMEM;
        is_first = false;
        rc = toolcall_json_coerce(out, f.s + last.body, last.body_len, param_type(tool, key, p.name_len));
    }
    if (rc == TOOLCALL_COERCE_OK && strbuf_putc(out, '}'))
        rc = TOOLCALL_COERCE_NOMEM;
    return rc;
}

/* ---- §5.2 ----------------------------------------------------------------------- */

void toolcall_result_clear(struct toolcall_result *r)
{
    if (!r)
        return;
    glim_free(r->reasoning);
    glim_free(r->content);
    for (int k = 0; k < r->n_calls; k++) {
        glim_free(r->calls[k].id);
        glim_free(r->calls[k].name);
        glim_free(r->calls[k].arguments);
    }
    glim_free(r->calls);
    memset(r, 0, sizeof *r);
}

static int set_trimmed(struct strbuf *sb, const char *s, size_t n)
{
    while (n && reasoning_is_space((unsigned char)s[0]))
        s++, n--;
    while (n && reasoning_is_space((unsigned char)s[n - 1]))
        n--;
    strbuf_reset(sb);
    return strbuf_append(sb, s, n);
}

/* Where the leading text ends: the first marker, moved back over a header
 * that sits right before it with only whitespace between. */
static size_t leading_cut(const char *s, size_t n, const struct tag *first)
{
    size_t fc = find(s, n, 0, FUNCS_OPEN);
    size_t cut = fc != NPOS && fc <= first->start ? fc : first->start;
    struct reasoning_hdr h;
    for (size_t i = 0; i < cut;) {
        if (reasoning_hdr_at(s, n, i, REASONING_HEADER_A, &h) != REASONING_MATCH) {
            i++;
            continue;
        }
        if (h.end <= cut && skip_ws(s, cut, h.end) == cut)
            return h.start;
        i = h.end;
    }
    return cut;
}

static int add_call(struct toolcall_result *r, const char *name, size_t len, struct strbuf *args)
{
    struct toolcall_call *v = glim_realloc(r->calls, (size_t)(r->n_calls + 1) * sizeof *v);
    if (!v)
        return GLIM_ENOMEM;
    r->calls = v;
    struct toolcall_call *c = &v[r->n_calls];
    *c = (struct toolcall_call){ .index = r->n_calls };
    c->name = glim_strndup(name, len);
    c->arguments = glim_strndup(strbuf_cstr(args), args->len);
    r->n_calls++;
    return c->name && c->arguments ? GLIM_OK : GLIM_ENOMEM;
}

static void drop_calls(struct toolcall_result *r)
{
    char *keep_r = r->reasoning, *keep_c = r->content;
    r->reasoning = r->content = NULL;
    toolcall_result_clear(r);
    r->reasoning = keep_r;
    r->content = keep_c;
}

int toolcall_parse(const char *s, size_t n, const struct toolcall_tool *tools, int n_tools,
                   struct strbuf *normal, struct toolcall_result *out, struct glim_err *err)
{
    struct finder f = { s, n, INVOKE_OPEN, &INVOKE_END, NPOS };
    struct tag inv;
    struct strbuf args;
    strbuf_init(&args);
    drop_calls(out);
    if (!next_tag(&f, 0, &inv)) {
        size_t m = GLIM_MIN(find(s, n, 0, FUNCS_OPEN), find(s, n, 0, INVOKE_OPEN));
        int rc = m == NPOS ? (strbuf_reset(normal), strbuf_append(normal, s, n)) : set_trimmed(normal, s, m);
        return rc ? glim_fail(err, GLIM_ENOMEM, "toolcall: out of memory") : GLIM_OK;
    }
    if (set_trimmed(normal, s, leading_cut(s, n, &inv)))
        goto oom;
    for (size_t pos = 0; next_tag(&f, pos, &inv); pos = inv.end) {
        const struct toolcall_tool *tool = tool_find(tools, n_tools, s + inv.name, inv.name_len);
        strbuf_reset(&args);
        int rc = build_args(s, &inv, tool, &args);
        if (rc == TOOLCALL_COERCE_NOMEM)
            goto oom;
        if (inv.name_len == 0 || !tool) {   /* all or nothing: the text stays as it was */
            drop_calls(out);
            strbuf_reset(normal);
            if (strbuf_append(normal, s, n))
                goto oom;
            break;
        }
        if (rc == TOOLCALL_COERCE_NAN) {    /* json.dumps would raise: no calls */
            drop_calls(out);
            break;
        }
        if (add_call(out, s + inv.name, inv.name_len, &args))
            goto oom;
    }
    strbuf_clear(&args);
    return GLIM_OK;
oom:
    strbuf_clear(&args);
    drop_calls(out);
    return glim_fail(err, GLIM_ENOMEM, "toolcall: out of memory");
}

/* ---- the pipeline (§5.4) ------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t id_seed(uint64_t seed)
{
    if (seed)
        return seed;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&ts;
}

/* "call-" + UUID4 as 32 lowercase hex digits */
static char *new_call_id(uint64_t *state)
{
    uint8_t b[16];
    uint64_t a = splitmix(state), c = splitmix(state);
    for (int k = 0; k < 8; k++) {
        b[k] = (uint8_t)(a >> (8 * k));
        b[8 + k] = (uint8_t)(c >> (8 * k));
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    char *id = glim_malloc(5 + 32 + 1);
    if (!id)
        return NULL;
    memcpy(id, "call-", 5);
    for (int k = 0; k < 16; k++) {
        id[5 + 2 * k] = "0123456789abcdef"[b[k] >> 4];
        id[6 + 2 * k] = "0123456789abcdef"[b[k] & 15];
    }
    id[37] = '\0';
    return id;
}

struct pipe_bufs {
    struct strbuf reasoning, visible, normal, content;
};

static void bufs_clear(struct pipe_bufs *b)
{
    strbuf_clear(&b->reasoning);
    strbuf_clear(&b->visible);
    strbuf_clear(&b->normal);
    strbuf_clear(&b->content);
}

static bool tools_on(const struct toolcall_config *cfg) { return cfg->tools && cfg->n_tools > 0; }

/* The pipeline on text that may continue: the visible text is cut at its
 * first ATEM marker, since nothing after it can be content unless finish()
 * says so. has_reasoning is reported so the caller can tell "" from none. */
static int pipeline_partial(const char *s, size_t n, const struct toolcall_config *cfg,
                            struct pipe_bufs *b, bool *has_reasoning)
{
    if (reasoning_split(s, n, &b->reasoning, has_reasoning, &b->visible))
        return GLIM_ENOMEM;
    size_t vn = b->visible.len;
    if (tools_on(cfg)) {
        const char *v = strbuf_cstr(&b->visible);
        vn = GLIM_MIN(vn, GLIM_MIN(find(v, vn, 0, FUNCS_OPEN), find(v, vn, 0, INVOKE_OPEN)));
    }
    return reasoning_content_filter(strbuf_cstr(&b->visible), vn, cfg->specials, cfg->n_specials, &b->content);
}

static int process_bufs(const char *s, size_t n, const struct toolcall_config *cfg, struct pipe_bufs *b,
                        struct toolcall_result *out, struct glim_err *err)
{
    bool has_reasoning;
    int rc = GLIM_OK;
    toolcall_result_clear(out);
    if (reasoning_split(s, n, &b->reasoning, &has_reasoning, &b->visible))
        goto oom;
    const struct strbuf *normal = &b->visible;
    if (tools_on(cfg)) {
        if ((rc = toolcall_parse(strbuf_cstr(&b->visible), b->visible.len, cfg->tools, cfg->n_tools,
                                 &b->normal, out, err)))
            goto fail;
        normal = &b->normal;
    }
    if (reasoning_content_filter(strbuf_cstr(normal), normal->len, cfg->specials, cfg->n_specials,
                                 &b->content))
        goto oom;
    if (has_reasoning && !(out->reasoning = glim_strndup(strbuf_cstr(&b->reasoning), b->reasoning.len)))
        goto oom;
    if (b->content.len && !(out->content = glim_strndup(strbuf_cstr(&b->content), b->content.len)))
        goto oom;
    out->reasoning_len = has_reasoning ? b->reasoning.len : 0;
    out->content_len = b->content.len;
    uint64_t state = id_seed(cfg->id_seed);
    for (int k = 0; k < out->n_calls; k++)
        if (!(out->calls[k].id = new_call_id(&state)))
            goto oom;
    return GLIM_OK;
oom:
    rc = glim_fail(err, GLIM_ENOMEM, "toolcall: out of memory");
fail:
    toolcall_result_clear(out);
    return rc;
}

int toolcall_process(const char *s, size_t n, const struct toolcall_config *cfg,
                     struct toolcall_result *out, struct glim_err *err)
{
    struct pipe_bufs b;
    memset(&b, 0, sizeof b);
    memset(out, 0, sizeof *out);
    int rc = process_bufs(s, n, cfg, &b, out, err);
    bufs_clear(&b);
    return rc;
}

/* ---- streaming ------------------------------------------------------------------ */

struct toolcall_stream {
    struct toolcall_config  cfg;
    toolcall_event_fn       fn;
    void                   *ctx;
    struct strbuf           buf;          /* all text so far */
    size_t                  hdr_scan;     /* headers before this are settled */
    size_t                  tag_scan;     /* no '<' before this can become a tag */
    size_t                  last_safe;
    struct strbuf           sent_r, sent_c;
    struct pipe_bufs        b;
    struct toolcall_result  result;
    bool                    is_done, is_inconsistent;
};

int toolcall_stream_new(const struct toolcall_config *cfg, toolcall_event_fn fn, void *ctx,
                        struct toolcall_stream **out, struct glim_err *err)
{
    struct toolcall_stream *st = glim_calloc(1, sizeof *st);
    if (!st)
        return glim_fail(err, GLIM_ENOMEM, "toolcall: out of memory");
    st->cfg = *cfg;
    st->fn = fn;
    st->ctx = ctx;
    *out = st;
    return GLIM_OK;
}

void toolcall_stream_free(struct toolcall_stream *st)
{
    if (!st)
        return;
    strbuf_clear(&st->buf);
    strbuf_clear(&st->sent_r);
    strbuf_clear(&st->sent_c);
    bufs_clear(&st->b);
    toolcall_result_clear(&st->result);
    glim_free(st);
}

/* A '<' followed by this many bytes (control tokens deleted) with no '>' is
 * no tag: no special token or marker is that long. */
enum { TAG_HOLD_MAX = 256 };

/* Could raw[0..raw_n) (starting with '<') still grow into a tag that
 * changes the meaning of the text: a control token, a special token, an ATEM
 * marker? Judged after deleting the control tokens inside it, as the content
 * filter will: "<|eot|" + "<|message|>" + ">" ends up as "<|eot|>", and
 * "<" + "<|channel|>" + "|patch|>" as "<|patch|>". So a control token that
 * is still arriving holds the '<' too: once it is complete and deleted,
 * whatever follows it joins the '<'. The answer can turn from true to false
 * as text arrives, never back, so safe_end() settles each '<' once. */
static bool maybe_tag(const struct toolcall_config *cfg, const char *raw, size_t raw_n)
{
    char s[TAG_HOLD_MAX];
    size_t n = 0;
    for (size_t i = 0; i < raw_n && n < sizeof s;) {
        if (i > 0 && raw[i] == '<' && reasoning_stray_is_partial(raw, raw_n, i))
            return true;
        size_t k = i > 0 ? reasoning_stray_at(raw, raw_n, i) : 0;
        if (k) {
            i += k;
            continue;
        }
        if (raw[i] == '>')
            return false;   /* the tag is complete or failed: what follows is not part of it */
        s[n++] = raw[i++];
    }
    const char *marks[] = { FUNCS_OPEN, INVOKE_OPEN };
    for (int k = 0; k < 2; k++)
        if (n < strlen(marks[k]) && memcmp(s, marks[k], n) == 0)
            return true;
    for (int k = 0; k < cfg->n_specials; k++) {
        const char *sp = cfg->specials[k];
        if (sp && n < strlen(sp) && memcmp(s, sp, n) == 0)
            return true;
    }
    return n < sizeof s && (n == 1 || s[1] == '|');
}

/* The longest prefix of the buffer whose pipeline output can only grow:
 * it ends before any possible header, tag or (whitespace | terminator) run.
 * Headers before hdr_scan and '<'s before tag_scan are settled for good. */
static size_t safe_end(struct toolcall_stream *st)
{
    const char *s = strbuf_cstr(&st->buf);
    size_t n = st->buf.len, P = n;
    struct reasoning_hdr h;
    for (size_t i = st->hdr_scan; i < n;) {
        int r = reasoning_hdr_at(s, n, i, REASONING_HDR, &h);
        if (r == REASONING_PARTIAL) {
            P = i;
            break;
        }
        i = r == REASONING_MATCH ? h.end : i + 1;
        st->hdr_scan = i;
    }
    for (size_t i = st->tag_scan; i < P; i++) {
        if (s[i] == '<' && maybe_tag(&st->cfg, s + i, n - i)) {
            P = i;
            break;
        }
        st->tag_scan = i + 1;
    }
    for (;;) {
        while (P && reasoning_is_space((unsigned char)s[P - 1]))
            P--;
        if (P >= 7 && (!memcmp(s + P - 7, "<|eom|>", 7) || !memcmp(s + P - 7, "<|eot|>", 7)))
            P -= 7;
        else
            return P;
    }
}

static int emit_text(struct toolcall_stream *st, int kind, const char *s, size_t n)
{
    if (n == 0)
        return GLIM_OK;
    struct toolcall_event ev = { .kind = kind, .index = -1, .text = s, .len = n };
    return st->fn ? st->fn(st->ctx, &ev) : GLIM_OK;
}

/* Emit whatever `now` adds to `sent`; a `now` that does not extend `sent`
 * would mean an earlier delta was wrong. */
static int emit_growth(struct toolcall_stream *st, int kind, struct strbuf *sent, const char *now, size_t n)
{
    if (n < sent->len || memcmp(now, strbuf_cstr(sent), sent->len) != 0) {
        if (n > sent->len || memcmp(strbuf_cstr(sent), now, n) != 0)
            st->is_inconsistent = true;
        return GLIM_OK;
    }
    size_t old = sent->len;
    if (strbuf_append(sent, now + old, n - old))
        return GLIM_ENOMEM;
    return emit_text(st, kind, now + old, n - old);
}

int toolcall_stream_feed(struct toolcall_stream *st, const char *s, size_t n, struct glim_err *err)
{
    if (st->is_done)
        return glim_fail(err, GLIM_EINVAL, "toolcall: feed after finish");
    if (strbuf_append(&st->buf, s, n))
        return glim_fail(err, GLIM_ENOMEM, "toolcall: out of memory");
    size_t P = safe_end(st);
    if (P <= st->last_safe)
        return GLIM_OK;
    st->last_safe = P;
    bool has_reasoning;
    if (pipeline_partial(strbuf_cstr(&st->buf), P, &st->cfg, &st->b, &has_reasoning))
        return glim_fail(err, GLIM_ENOMEM, "toolcall: out of memory");
    int rc = emit_growth(st, TOOLCALL_EV_REASONING, &st->sent_r, strbuf_cstr(&st->b.reasoning),
                         st->b.reasoning.len);
    if (!rc)
        rc = emit_growth(st, TOOLCALL_EV_CONTENT, &st->sent_c, strbuf_cstr(&st->b.content), st->b.content.len);
    return rc ? glim_fail(err, rc, "toolcall: event callback stopped the stream") : GLIM_OK;
}

static int emit_calls(struct toolcall_stream *st)
{
    for (int k = 0; k < st->result.n_calls && st->fn; k++) {
        const struct toolcall_call *c = &st->result.calls[k];
        struct toolcall_event ev = { .kind = TOOLCALL_EV_CALL_START, .index = c->index, .id = c->id,
                                     .name = c->name };
        int rc = st->fn(st->ctx, &ev);
        ev.kind = TOOLCALL_EV_CALL_ARGS;
        ev.text = c->arguments;
        ev.len = strlen(c->arguments);
        if (!rc)
            rc = st->fn(st->ctx, &ev);
        ev.kind = TOOLCALL_EV_CALL_END;
        ev.text = NULL;
        ev.len = 0;
        if (!rc)
            rc = st->fn(st->ctx, &ev);
        if (rc)
            return rc;
    }
    return GLIM_OK;
}

int toolcall_stream_finish(struct toolcall_stream *st, struct glim_err *err)
{
    if (st->is_done)
        return glim_fail(err, GLIM_EINVAL, "toolcall: finish called twice");
    st->is_done = true;
    int rc = process_bufs(strbuf_cstr(&st->buf), st->buf.len, &st->cfg, &st->b, &st->result, err);
    if (rc)
        return rc;
    const struct toolcall_result *r = &st->result;
    rc = emit_growth(st, TOOLCALL_EV_REASONING, &st->sent_r, r->reasoning ? r->reasoning : "", r->reasoning_len);
    if (!rc)
        rc = emit_growth(st, TOOLCALL_EV_CONTENT, &st->sent_c, r->content ? r->content : "", r->content_len);
    if (!rc && (st->sent_r.len != r->reasoning_len || st->sent_c.len != r->content_len))
        st->is_inconsistent = true;   /* streamed more than the final text holds */
    if (!rc)
        rc = emit_calls(st);
    return rc ? glim_fail(err, rc, "toolcall: event callback stopped the stream") : GLIM_OK;
}

const struct toolcall_result *toolcall_stream_result(const struct toolcall_stream *st)
{
    return st->is_done ? &st->result : NULL;
}

bool toolcall_stream_is_inconsistent(const struct toolcall_stream *st) { return st->is_inconsistent; }
