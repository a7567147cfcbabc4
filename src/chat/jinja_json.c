/*
 * jinja_json.c — JSON text to template values, so a chat request or a test vector can
 * become a render context without jansson (which only the text/server rooms link).
 * Strict RFC 8259, objects keep key order (like Python's json.loads), depth bounded.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

struct jp {
    struct jinja_arena *a;
    const char *s;
    size_t n, i;
    struct glim_err *err;
    struct strbuf tmp;
};

static int jp_fail(struct jp *p, const char *what)
{
    return glim_fail(p->err, GLIM_EFORMAT, "JSON: %s at byte %zu", what, p->i);
}

static void skip_ws(struct jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int hex4(struct jp *p, unsigned *out)
{
    if (p->n - p->i < 4)
        return jp_fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return jp_fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return GLIM_OK;
}

static int parse_escape(struct jp *p)
{
    char c = p->s[p->i++];
    const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";
    for (const char *m = map; *m; m += 2)
        if (c == m[0])
            return strbuf_putc(&p->tmp, m[1]) ? jp_fail(p, "out of memory") : GLIM_OK;
    if (c != 'u')
        return jp_fail(p, "bad escape");
    unsigned cp, lo;
    if (hex4(p, &cp))
        return GLIM_EFORMAT;
    if (cp >= 0xD800 && cp < 0xDC00 && p->n - p->i >= 6 && p->s[p->i] == '\\' &&
        p->s[p->i + 1] == 'u') {
        size_t save = p->i;
        p->i += 2;
        if (hex4(p, &lo))
            return GLIM_EFORMAT;
        if (lo >= 0xDC00 && lo < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        else
            p->i = save;
    }
    return jinja_utf8_put(&p->tmp, cp) ? jp_fail(p, "out of memory") : GLIM_OK;
}

static int parse_string(struct jp *p, struct jinja_value *out)
{
    p->i++;   /* opening quote */
    strbuf_reset(&p->tmp);
    for (;;) {
        if (p->i >= p->n)
            return jp_fail(p, "unterminated string");
        size_t run = p->i;
        while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' &&
               (unsigned char)p->s[p->i] >= 0x20)
            p->i++;
        if (strbuf_append(&p->tmp, p->s + run, p->i - run))
            return jp_fail(p, "out of memory");
        if (p->i >= p->n)
            return jp_fail(p, "unterminated string");
        char c = p->s[p->i];
        if (c == '"')
            break;
        if ((unsigned char)c < 0x20)
            return jp_fail(p, "control character in string");
        p->i++;
        if (p->i >= p->n)
            return jp_fail(p, "unterminated string");
        if (parse_escape(p))
            return GLIM_EFORMAT;
    }
    p->i++;
    if (jinja_str(p->a, strbuf_cstr(&p->tmp), p->tmp.len, out))
        return jp_fail(p, "out of memory");
    return GLIM_OK;
}

static int parse_number(struct jp *p, struct jinja_value *out)
{
    size_t st = p->i;
    bool is_float = false;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return jp_fail(p, "bad number");
    while (p->i < p->n && strchr("0123456789+-.eE", p->s[p->i])) {
        if (strchr(".eE", p->s[p->i]))
            is_float = true;
        p->i++;
    }
    char buf[64];
    size_t len = p->i - st;
    if (len >= sizeof buf)
        is_float = true, len = sizeof buf - 1;
    memcpy(buf, p->s + st, len);
    buf[len] = '\0';
    char *end;
    if (!is_float) {
        long long v = strtoll(buf, &end, 10);
        if (*end == '\0' && !(v == LLONG_MAX || v == LLONG_MIN)) {
            *out = jinja_int(v);
            return GLIM_OK;
        }
    }
    double d = strtod(buf, &end);
    if (*end != '\0' && p->i - st < sizeof buf)
        return jp_fail(p, "bad number");
    *out = jinja_float(d);
    return GLIM_OK;
}

static int parse_value(struct jp *p, struct jinja_value *out, int depth);

static int parse_container(struct jp *p, struct jinja_value *out, int depth)
{
    bool is_obj = p->s[p->i++] == '{';
    char close = is_obj ? '}' : ']';
    if (is_obj ? jinja_dict_new(p->a, out) : jinja_list_new(p->a, out))
        return jp_fail(p, "out of memory");
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return GLIM_OK;
    }
    for (;;) {
        struct jinja_value k, v;
        skip_ws(p);
        if (is_obj) {
            if (p->i >= p->n || p->s[p->i] != '"')
                return jp_fail(p, "expected a string key");
            if (parse_string(p, &k))
                return GLIM_EFORMAT;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return jp_fail(p, "expected ':'");
            p->i++;
        }
        if (parse_value(p, &v, depth + 1))
            return GLIM_EFORMAT;
        int rc = is_obj ? jinja_dict_set(p->a, *out, k, v) : jinja_list_push(p->a, *out, v);
        if (rc)
            return jp_fail(p, "out of memory");
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return GLIM_OK;
        }
        return jp_fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool word(struct jp *p, const char *w)
{
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n))
        return false;
    p->i += n;
    return true;
}

static int parse_value(struct jp *p, struct jinja_value *out, int depth)
{
    if (depth > JINJA_MAX_NEST)
        return jp_fail(p, "nested too deeply");
    skip_ws(p);
    if (p->i >= p->n)
        return jp_fail(p, "unexpected end");
    char c = p->s[p->i];
    if (c == '{' || c == '[')
        return parse_container(p, out, depth);
    if (c == '"')
        return parse_string(p, out);
    if (c == '-' || (c >= '0' && c <= '9'))
        return parse_number(p, out);
    if (word(p, "true"))
        return *out = jinja_bool(true), GLIM_OK;
    if (word(p, "false"))
        return *out = jinja_bool(false), GLIM_OK;
    if (word(p, "null"))
        return *out = jinja_none(), GLIM_OK;
    return jp_fail(p, "unexpected character");
}

int jinja_json_parse(struct jinja_arena *a, const char *text, size_t len,
                     struct jinja_value *out, struct glim_err *err)
{
    struct jp p = {a, text, len, 0, err, {0}};
    strbuf_init(&p.tmp);
    int rc = parse_value(&p, out, 0);
    if (!rc) {
        skip_ws(&p);
        if (p.i != p.n)
            rc = jp_fail(&p, "trailing characters");
    }
    strbuf_clear(&p.tmp);
    return rc;
}
