/*
 * jinja_lex.c — template text to tokens, with Jinja2's whitespace rules as HF sets
 * them: trim_blocks (drop the newline after a block or comment tag), lstrip_blocks
 * (drop spaces and tabs before a block or comment tag that starts its line), `-` on
 * either side of any tag strips all whitespace on that side, `+` turns the block rules
 * off. Like Jinja2, newlines are normalised to \n and one trailing newline of the
 * source is dropped (keep_trailing_newline=False). Inside a tag, `}}` and `%}` end the
 * tag only outside brackets, so `{{ {'a': {'b': 1}} }}` lexes.
 */
#include <string.h>

#include "jinja_int.h"

struct lx {
    struct jinja_arena *a;
    const char *s;
    size_t n, pos;
    int line, col;            /* of s[pos] */
    bool line_starting;       /* the previous tag consumed a newline (or we are at the start) */
    struct jtoks *out;
    struct glim_err *err;
};

static void advance(struct lx *l, size_t to)
{
    for (; l->pos < to; l->pos++) {
        if (l->s[l->pos] == '\n')
            l->line++, l->col = 1;
        else
            l->col++;
    }
}

static int lx_fail(struct lx *l, const char *what)
{
    return glim_fail(l->err, GLIM_EINVAL, "template line %d col %d: %s", l->line, l->col, what);
}

static int emit(struct lx *l, enum jtok_kind kind, const char *s, size_t n)
{
    struct jtoks *t = l->out;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        struct jtok *nv = jinja_alloc(l->a, nc * sizeof *nv);
        if (!nv)
            return lx_fail(l, "out of memory");
        if (t->n)
            memcpy(nv, t->v, t->n * sizeof *nv);
        t->v = nv, t->cap = nc;
    }
    t->v[t->n++] = (struct jtok){kind, l->line, l->col, s, n, 0, 0.0};
    return GLIM_OK;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Emit the text before a tag, applying `-` / lstrip_blocks of the tag that follows. */
static int emit_text(struct lx *l, size_t from, size_t to, char tag_kind, char sign)
{
    size_t end = to;
    if (sign == '-') {
        while (end > from && is_space(l->s[end - 1]))
            end--;
    } else if (sign != '+' && tag_kind != '{') {
        size_t lpos = end;
        while (lpos > from && (l->s[lpos - 1] == ' ' || l->s[lpos - 1] == '\t'))
            lpos--;
        bool at_line_start = lpos > from ? l->s[lpos - 1] == '\n' : l->line_starting;
        if (at_line_start)
            end = lpos;
    }
    if (end > from && emit(l, TK_TEXT, l->s + from, end - from))
        return GLIM_ENOMEM;
    return GLIM_OK;
}

/* After a tag end: `-` strips all following whitespace, trim_blocks one newline. */
static void after_tag(struct lx *l, char sign, bool is_block)
{
    l->line_starting = false;
    if (sign == '-') {
        size_t p = l->pos;
        while (p < l->n && is_space(l->s[p]))
            p++;
        l->line_starting = p > l->pos && l->s[p - 1] == '\n';
        advance(l, p);
    } else if (is_block && sign != '+' && l->pos < l->n && l->s[l->pos] == '\n') {
        advance(l, l->pos + 1);
        l->line_starting = true;
    }
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Python's numeric escapes after a backslash: \xhh \uhhhh \Uhhhhhhhh \ooo, and a
 * backslash-newline (dropped). Returns the bytes used after the backslash, 0 if none. */
static size_t unescape(const char *s, size_t n, struct strbuf *sb, int *rc)
{
    if (n >= 1 && s[0] == '\n')
        return 1;
    size_t digits = s[0] == 'x' ? 2 : s[0] == 'u' ? 4 : s[0] == 'U' ? 8 : 0;
    uint32_t v = 0;
    if (digits) {
        if (n < digits + 1)
            return 0;
        for (size_t k = 1; k <= digits; k++) {
            int h = hexval(s[k]);
            if (h < 0)
                return 0;
            v = v << 4 | (uint32_t)h;
        }
        *rc = jinja_utf8_put(sb, v);
        return digits + 1;
    }
    size_t k = 0;
    while (k < 3 && k < n && s[k] >= '0' && s[k] <= '7')
        v = v << 3 | (uint32_t)(s[k++] - '0');
    if (k)
        *rc = jinja_utf8_put(sb, v);
    return k;
}

static int lex_string(struct lx *l)
{
    char q = l->s[l->pos];
    struct strbuf sb;
    strbuf_init(&sb);
    size_t p = l->pos + 1;
    int rc = GLIM_OK;
    for (; p < l->n && l->s[p] != q && !rc; p++) {
        char c = l->s[p];
        if (c == '\\' && p + 1 < l->n) {
            size_t used = unescape(l->s + p + 1, l->n - p - 1, &sb, &rc);
            if (used) {
                p += used;
                continue;
            }
            char e = l->s[++p];
            const char *m = "n\nt\tr\r\\\\''\"\"a\ab\bf\fv\v";
            while (*m && m[0] != e)
                m += 2;
            if (*m)
                c = m[1];
            else {
                rc = strbuf_putc(&sb, '\\');   /* unknown escape: kept, as Python does */
                c = e;
            }
        }
        rc = rc ? rc : strbuf_putc(&sb, c);
    }
    if (!rc && p >= l->n)
        rc = lx_fail(l, "unterminated string literal");
    struct jstr *js = rc ? NULL : jinja_jstr(l->a, strbuf_cstr(&sb), sb.len);
    strbuf_clear(&sb);
    if (rc)
        return rc;
    if (!js || emit(l, TK_STRING, js->s, js->len))
        return lx_fail(l, "out of memory");
    advance(l, p + 1);
    return GLIM_OK;
}

static int lex_number(struct lx *l)
{
    size_t p = l->pos;
    int64_t v = 0;
    bool overflow = false, is_float = false;
    while (p < l->n && (is_digit(l->s[p]) || l->s[p] == '_')) {
        if (l->s[p] != '_')
            overflow |= __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, l->s[p] - '0', &v);
        p++;
    }
    if (p + 1 < l->n && l->s[p] == '.' && is_digit(l->s[p + 1])) {
        is_float = true;
        for (p++; p < l->n && is_digit(l->s[p]); p++) {}
    }
    if (p < l->n && (l->s[p] == 'e' || l->s[p] == 'E')) {
        size_t q = p + 1;
        if (q < l->n && (l->s[q] == '+' || l->s[q] == '-'))
            q++;
        if (q < l->n && is_digit(l->s[q])) {
            is_float = true;
            for (p = q; p < l->n && is_digit(l->s[p]); p++) {}
        }
    }
    if (emit(l, is_float ? TK_FLOAT : TK_INT, l->s + l->pos, p - l->pos))
        return GLIM_ENOMEM;
    struct jtok *t = &l->out->v[l->out->n - 1];
    if (is_float) {
        char buf[64];
        size_t k = 0;
        for (size_t i = l->pos; i < p && k < sizeof buf - 1; i++)
            if (l->s[i] != '_')
                buf[k++] = l->s[i];
        buf[k] = '\0';
        t->f = strtod(buf, NULL);
    } else if (overflow) {
        return lx_fail(l, "integer literal too large");
    }
    t->i = v;
    advance(l, p);
    return GLIM_OK;
}

static const char *const OPS[] = {
    "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
    "(", ")", "[", "]", "{", "}", ",", ".", ":", "|",
};

/* Does the tag end here? Returns the length of the end marker (0 = no) and its sign. */
static size_t tag_end(const struct lx *l, char kind, char *sign)
{
    const char *p = l->s + l->pos;
    size_t left = l->n - l->pos;
    char close = kind == '{' ? '}' : '%';
    *sign = 0;
    if ((p[0] == '-' || (p[0] == '+' && kind == '%')) && left >= 3 && p[1] == close && p[2] == '}') {
        *sign = p[0];
        return 3;
    }
    if (left >= 2 && p[0] == close && p[1] == '}')
        return 2;
    return 0;
}

/* Tokens inside {{ }} or {% %} up to and including the end marker. */
static int lex_tag(struct lx *l, char kind, char *end_sign)
{
    int depth = 0;
    for (;;) {
        while (l->pos < l->n && is_space(l->s[l->pos]))
            advance(l, l->pos + 1);
        if (l->pos >= l->n)
            return lx_fail(l, kind == '{' ? "unexpected end of template, expected '}}'"
                                          : "unexpected end of template, expected '%}'");
        size_t m = depth == 0 ? tag_end(l, kind, end_sign) : 0;
        if (m) {
            if (emit(l, kind == '{' ? TK_VAR_END : TK_BLOCK_END, l->s + l->pos, m))
                return GLIM_ENOMEM;
            advance(l, l->pos + m);
            return GLIM_OK;
        }
        char c = l->s[l->pos];
        int rc;
        if (c == '\'' || c == '"') {
            rc = lex_string(l);
        } else if (is_digit(c)) {
            rc = lex_number(l);
        } else if (is_alpha(c)) {
            size_t p = l->pos;
            while (p < l->n && (is_alpha(l->s[p]) || is_digit(l->s[p])))
                p++;
            rc = emit(l, TK_NAME, l->s + l->pos, p - l->pos);
            advance(l, p);
        } else {
            size_t k = 0, nops = sizeof OPS / sizeof OPS[0], len = 0;
            for (; k < nops; k++) {
                len = strlen(OPS[k]);
                if (l->n - l->pos >= len && !memcmp(l->s + l->pos, OPS[k], len))
                    break;
            }
            if (k == nops)
                return lx_fail(l, "unexpected character in tag");
            depth += strchr("([{", c) ? 1 : strchr(")]}", c) ? -1 : 0;
            if (depth < 0)
                depth = 0;
            rc = emit(l, TK_OP, OPS[k], len);
            advance(l, l->pos + len);
        }
        if (rc)
            return rc;
    }
}

/* After `{% raw %}`: the text up to `{% endraw %}` is data, tags and all. */
static int lex_raw(struct lx *l)
{
    for (size_t p = l->pos; p + 1 < l->n; p++) {
        if (l->s[p] != '{' || l->s[p + 1] != '%')
            continue;
        size_t q = p + 2;
        char sign = q < l->n && (l->s[q] == '-' || l->s[q] == '+') ? l->s[q++] : 0;
        while (q < l->n && is_space(l->s[q]))
            q++;
        if (l->n - q < 6 || memcmp(l->s + q, "endraw", 6))
            continue;
        q += 6;
        while (q < l->n && is_space(l->s[q]))
            q++;
        char esign = q < l->n && (l->s[q] == '-' || l->s[q] == '+') ? l->s[q++] : 0;
        if (l->n - q < 2 || l->s[q] != '%' || l->s[q + 1] != '}')
            continue;
        if (emit_text(l, l->pos, p, '%', sign))
            return GLIM_ENOMEM;
        advance(l, q + 2);
        after_tag(l, esign, true);
        return GLIM_OK;
    }
    return lx_fail(l, "missing {% endraw %}");
}

static bool is_raw_tag(const struct jtoks *t)
{
    if (t->n < 3)
        return false;
    const struct jtok *v = t->v + t->n - 3;
    return v[0].kind == TK_BLOCK_BEGIN && v[1].kind == TK_NAME && v[1].n == 3 &&
           !memcmp(v[1].s, "raw", 3) && v[2].kind == TK_BLOCK_END;
}

static int lex_all(struct lx *l)
{
    while (l->pos < l->n) {
        size_t k = l->pos;
        while (k + 1 < l->n && !(l->s[k] == '{' && strchr("{%#", l->s[k + 1])))
            k++;
        if (k + 1 >= l->n)
            return emit_text(l, l->pos, l->n, '{', 0) ? GLIM_ENOMEM : (advance(l, l->n), GLIM_OK);
        char kind = l->s[k + 1];
        char sign = k + 2 < l->n && (l->s[k + 2] == '-' || l->s[k + 2] == '+') ? l->s[k + 2] : 0;
        if (emit_text(l, l->pos, k, kind, sign))
            return GLIM_ENOMEM;
        advance(l, k);
        if (kind == '#') {
            const char *e = NULL;
            for (size_t p = k + 2; p + 1 < l->n && !e; p++)
                if (l->s[p] == '#' && l->s[p + 1] == '}')
                    e = l->s + p;
            if (!e)
                return lx_fail(l, "unterminated comment");
            char esign = e > l->s + k + 2 && (e[-1] == '-' || e[-1] == '+') ? e[-1] : 0;
            advance(l, (size_t)(e - l->s) + 2);
            after_tag(l, esign, true);
            continue;
        }
        if (emit(l, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, l->s + k, 2))
            return GLIM_ENOMEM;
        advance(l, k + 2 + (sign ? 1 : 0));
        char esign;
        if (lex_tag(l, kind, &esign))
            return l->err ? l->err->code : GLIM_EINVAL;
        after_tag(l, esign, kind == '%');
        if (kind == '%' && is_raw_tag(l->out)) {
            l->out->n -= 3;
            if (lex_raw(l))
                return l->err ? l->err->code : GLIM_EINVAL;
        }
    }
    return GLIM_OK;
}

int jinja_lex(struct jinja_arena *a, const char *src, size_t len, struct jtoks *out,
              struct glim_err *err)
{
    /* normalise \r\n and \r to \n; drop one trailing newline (Jinja2's default) */
    char *s = jinja_alloc(a, len + 1);
    if (!s)
        return glim_fail(err, GLIM_ENOMEM, "template: out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = '\0';
    struct lx l = {a, s, n, 0, 1, 1, true, out, err};
    *out = (struct jtoks){0};
    int rc = lex_all(&l);
    if (!rc)
        rc = emit(&l, TK_EOF, s + n, 0);
    return rc;
}
