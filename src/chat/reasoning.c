/*
 * reasoning.c — Harmony headers inside generated text (runtime.md §4.6).
 *
 * DESIGN. The server reference uses regexes; glim matches the two header
 * patterns by hand. Each pattern is deterministic once its first byte is
 * known (the optional `<|start|>assistant` starts with '<', the rest does
 * not), so a matcher can report FAIL / PARTIAL / MATCH without
 * backtracking. PARTIAL is what the streaming parser needs: text that may
 * still become a header must not be shown yet.
 */
#include "chat/reasoning.h"

#include <string.h>

static const char START_ASSISTANT[] = "<|start|>assistant";
static const char MESSAGE[] = "<|message|>";

bool reasoning_is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static bool is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool is_ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident(unsigned char c) { return is_word(c) || c == '-'; }

/* Match literal lit at s[*i]; advances *i on MATCH. */
static int lit(const char *s, size_t n, size_t *i, const char *l)
{
    size_t k = 0, len = strlen(l);
    for (; k < len; k++) {
        if (*i + k >= n)
            return REASONING_PARTIAL;
        if (s[*i + k] != l[k])
            return REASONING_FAIL;
    }
    *i += len;
    return REASONING_MATCH;
}

/* IDENT = [a-zA-Z_][a-zA-Z0-9_-]* */
static int ident(const char *s, size_t n, size_t *i)
{
    if (*i >= n)
        return REASONING_PARTIAL;
    if (!is_ident_start((unsigned char)s[*i]))
        return REASONING_FAIL;
    while (++*i < n && is_ident((unsigned char)s[*i]))
        ;
    return REASONING_MATCH;
}

/* RECIPIENT = IDENT ( "." IDENT )*; leaves *i after it (or at a PARTIAL end) */
static int recipient(const char *s, size_t n, size_t *i)
{
    int r = ident(s, n, i);
    while (r == REASONING_MATCH && *i < n && s[*i] == '.') {
        if (*i + 1 >= n)
            return REASONING_PARTIAL;
        if (!is_ident_start((unsigned char)s[*i + 1]))
            return REASONING_FAIL;   /* '.' cannot start " constrain=" or <|message|> */
        ++*i;
        r = ident(s, n, i);
    }
    return r;
}

int reasoning_hdr_at(const char *s, size_t n, size_t pos, int kind, struct reasoning_hdr *out)
{
    if (kind == REASONING_HDR && pos > 0 && is_word((unsigned char)s[pos - 1]))
        return REASONING_FAIL;
    size_t i = pos;
    if (pos < n && s[pos] == '<') {
        int r = lit(s, n, &i, START_ASSISTANT);
        if (r != REASONING_MATCH)
            return r;
    }
    if (i >= n)
        return REASONING_PARTIAL;
    if (kind == REASONING_HDR) {
        if (reasoning_is_space((unsigned char)s[i]))
            i++;
    } else if (s[i++] != ' ') {
        return REASONING_FAIL;
    }
    int r = lit(s, n, &i, "to=");
    if (r != REASONING_MATCH)
        return r;
    size_t recip = i;
    if ((r = recipient(s, n, &i)) != REASONING_MATCH)
        return r;
    size_t recip_len = i - recip;
    if (i >= n)
        return REASONING_PARTIAL;
    if (s[i] == ' ') {
        if ((r = lit(s, n, &i, " constrain=")) != REASONING_MATCH || (r = ident(s, n, &i)) != REASONING_MATCH)
            return r;
    }
    if ((r = lit(s, n, &i, MESSAGE)) != REASONING_MATCH)
        return r;
    *out = (struct reasoning_hdr){ .start = pos, .end = i, .recip = recip, .recip_len = recip_len };
    return REASONING_MATCH;
}

/* Next complete HDR at or after *pos (finditer order); false when none. */
static bool next_hdr(const char *s, size_t n, size_t pos, struct reasoning_hdr *h)
{
    for (; pos < n; pos++) {
        unsigned char c = (unsigned char)s[pos];
        if (c != '<' && c != 't' && !reasoning_is_space(c))
            continue;
        if (reasoning_hdr_at(s, n, pos, REASONING_HDR, h) == REASONING_MATCH)
            return true;
    }
    return false;
}

static void trim(const char **p, size_t *n)
{
    while (*n && reasoning_is_space((unsigned char)(*p)[0]))
        ++*p, --*n;
    while (*n && reasoning_is_space((unsigned char)(*p)[*n - 1]))
        --*n;
}

static bool ends_with(const char *p, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(p + n - k, suf, k) == 0;
}

/* Append a part, with the blank-line separator when the list is non-empty. */
static int add_part(struct strbuf *sb, bool *has, const char *p, size_t n)
{
    if (n == 0)
        return GLIM_OK;
    if (*has && strbuf_append(sb, "\n\n", 2))
        return GLIM_ENOMEM;
    *has = true;
    return strbuf_append(sb, p, n);
}

int reasoning_split(const char *s, size_t n, struct strbuf *reasoning, bool *has_reasoning,
                    struct strbuf *visible)
{
    strbuf_reset(reasoning);
    strbuf_reset(visible);
    *has_reasoning = false;
    struct reasoning_hdr h;
    if (!next_hdr(s, n, 0, &h))
        return n ? strbuf_append(visible, s, n) : GLIM_OK;
    bool has_visible = false;
    const char *p = s;
    size_t len = h.start;
    trim(&p, &len);
    if (add_part(visible, &has_visible, p, len))
        return GLIM_ENOMEM;
    for (;;) {
        struct reasoning_hdr next;
        bool has_next = next_hdr(s, n, h.end, &next);
        p = s + h.end;
        len = (has_next ? next.start : n) - h.end;
        while (len && reasoning_is_space((unsigned char)p[len - 1]))
            len--;
        if (ends_with(p, len, "<|eom|>") || ends_with(p, len, "<|eot|>"))
            len -= 7;
        trim(&p, &len);
        bool is_self = h.recip_len == 4 && memcmp(s + h.recip, "self", 4) == 0;
        if (is_self ? add_part(reasoning, has_reasoning, p, len) : add_part(visible, &has_visible, p, len))
            return GLIM_ENOMEM;
        if (!has_next)
            return GLIM_OK;
        h = next;
    }
}

/* Control tokens the filter deletes wherever they remain. */
static const char *const STRAY[] = {
    "<|start|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|end|>", "<|eom|>", "<|eot|>",
};

size_t reasoning_stray_at(const char *s, size_t n, size_t i)
{
    for (size_t k = 0; k < sizeof STRAY / sizeof STRAY[0]; k++) {
        size_t len = strlen(STRAY[k]);
        if (n - i >= len && memcmp(s + i, STRAY[k], len) == 0)
            return len;
    }
    return 0;
}

bool reasoning_stray_is_partial(const char *s, size_t n, size_t i)
{
    for (size_t k = 0; i < n && k < sizeof STRAY / sizeof STRAY[0]; k++)
        if (n - i < strlen(STRAY[k]) && memcmp(s + i, STRAY[k], n - i) == 0)
            return true;
    return false;
}

static bool is_never_cut(const char *tok)
{
    return !strcmp(tok, "<|start|>") || !strcmp(tok, "<|message|>") || !strcmp(tok, "<|eom|>");
}

int reasoning_content_filter(const char *s, size_t n, const char *const *specials, int n_specials,
                             struct strbuf *out)
{
    struct strbuf tmp;
    strbuf_init(&tmp);
    strbuf_reset(out);
    /* pass 1: drop headers (non-overlapping, left to right) */
    size_t i = 0;
    struct reasoning_hdr h;
    while (next_hdr(s, n, i, &h)) {
        if (strbuf_append(&tmp, s + i, h.start - i))
            goto oom;
        i = h.end;
    }
    if (strbuf_append(&tmp, s + i, n - i))
        goto oom;
    /* pass 2: drop stray control tokens in one left-to-right scan */
    const char *t = strbuf_cstr(&tmp);
    size_t tn = tmp.len, run = 0;
    for (i = 0; i < tn;) {
        size_t k = t[i] == '<' ? reasoning_stray_at(t, tn, i) : 0;
        if (!k) {
            i++;
            continue;
        }
        if (strbuf_append(out, t + run, i - run))
            goto oom;
        i += k;
        run = i;
    }
    if (strbuf_append(out, t + run, tn - run))
        goto oom;
    strbuf_clear(&tmp);
    /* trim, then cut at the earliest special token still present */
    const char *p = strbuf_cstr(out);
    size_t len = out->len, cut = len;
    trim(&p, &len);
    for (int k = 0; k < n_specials; k++) {
        size_t sl = specials[k] ? strlen(specials[k]) : 0;
        if (!sl || is_never_cut(specials[k]))
            continue;
        for (size_t j = 0; j + sl <= len && j < cut; j++)
            if (p[j] == specials[k][0] && memcmp(p + j, specials[k], sl) == 0) {
                cut = j;
                break;
            }
    }
    if (cut > len)
        cut = len;
    while (cut && reasoning_is_space((unsigned char)p[cut - 1]))
        cut--;
    if (out->len) {
        memmove(out->data, p, cut);
        out->len = cut;
        out->data[cut] = '\0';
    }
    return GLIM_OK;
oom:
    strbuf_clear(&tmp);
    return GLIM_ENOMEM;
}
