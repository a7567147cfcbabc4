/*
 * jinja_str.c — values to text the way Python prints them: str() for output and `~`,
 * repr() inside lists and dicts, and json.dumps(ensure_ascii=False) for tojson, which
 * is what HF transformers installs as the tojson filter. Float text follows Python's
 * repr (shortest round-trip, scientific below 1e-4 and from 1e16).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "jinja_int.h"

void jinja_fmt_float(double d, char buf[40])
{
    if (isnan(d)) {
        strcpy(buf, "nan");
        return;
    }
    if (isinf(d)) {
        strcpy(buf, d < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    /* tmp = [-]D[.DDD]e[+-]XX: collect the digits and the exponent */
    char digits[24];
    int nd = 0, neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20)
            digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char *o = buf;
    if (neg)
        *o++ = '-';
    if (exp10 >= 16 || exp10 < -4) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        snprintf(o, 16, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10) % 1000);
        return;
    }
    if (exp10 < 0) {
        *o++ = '0', *o++ = '.';
        for (int k = 0; k < -exp10 - 1; k++)
            *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else {
        for (int k = 0; k <= exp10; k++)
            *o++ = k < nd ? digits[k] : '0';
        *o++ = '.';
        if (nd > exp10 + 1) {
            memcpy(o, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            o += nd - exp10 - 1;
        } else {
            *o++ = '0';
        }
    }
    *o = '\0';
}

/* Printing is bounded too: [[x] * 1000] * 1000 ... multiplies without allocating. */
#define MAX_PRINT_BYTES ((size_t)16 << 20)   /* far above any real prompt (128k tokens ~ 0.5 MB) */

static int put(struct strbuf *sb, const char *s, size_t n, struct glim_err *err)
{
    if (n > MAX_PRINT_BYTES || sb->len > MAX_PRINT_BYTES - n)
        return glim_fail(err, GLIM_ERANGE, "value too large to print (over %zu bytes)", MAX_PRINT_BYTES);
    if (strbuf_append(sb, s, n))
        return glim_fail(err, GLIM_ENOMEM, "out of memory printing a value");
    return GLIM_OK;
}
static int puts_(struct strbuf *sb, const char *s, struct glim_err *err)
{
    return put(sb, s, strlen(s), err);
}

static int scalar_str(struct strbuf *sb, struct jinja_value v, struct glim_err *err)
{
    char buf[40];
    switch (v.type) {
    case JINJA_UNDEFINED: return GLIM_OK;
    case JINJA_NONE: return puts_(sb, "None", err);
    case JINJA_BOOL: return puts_(sb, v.u.b ? "True" : "False", err);
    case JINJA_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.u.i); return puts_(sb, buf, err);
    case JINJA_FLOAT: jinja_fmt_float(v.u.f, buf); return puts_(sb, buf, err);
    case JINJA_STR: return put(sb, v.u.s->s, v.u.s->len, err);
    case JINJA_FUNC: return puts_(sb, "<built-in function>", err);
    case JINJA_MACRO: return puts_(sb, "<Macro>", err);
    case JINJA_LOOP: return puts_(sb, "<LoopContext>", err);
    default: return puts_(sb, "<Namespace>", err);
    }
}

/* Python repr of a str: single quotes unless the text has ' and no ". */
static int repr_str(struct strbuf *sb, const struct jstr *s, struct glim_err *err)
{
    char q = memchr(s->s, '\'', s->len) && !memchr(s->s, '"', s->len) ? '"' : '\'';
    if (put(sb, &q, 1, err))
        return GLIM_ENOMEM;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        char esc[8];
        const char *e = NULL;
        if (c == '\\')
            e = "\\\\";
        else if (c == (unsigned char)q)
            e = q == '\'' ? "\\'" : "\\\"";
        else if (c == '\n')
            e = "\\n";
        else if (c == '\r')
            e = "\\r";
        else if (c == '\t')
            e = "\\t";
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", c), e = esc;
        if (e ? puts_(sb, e, err) : put(sb, (const char *)&c, 1, err))
            return GLIM_ENOMEM;
    }
    return put(sb, &q, 1, err);
}

static int repr_depth(struct strbuf *sb, struct jinja_value v, int depth, struct glim_err *err)
{
    if (depth > JINJA_MAX_NEST)
        return glim_fail(err, GLIM_ERANGE, "value nested deeper than %d levels", JINJA_MAX_NEST);
    if (v.type == JINJA_STR)
        return repr_str(sb, v.u.s, err);
    if (v.type == JINJA_LIST) {
        bool tup = v.u.l->is_tuple;
        if (puts_(sb, tup ? "(" : "[", err))
            return GLIM_ENOMEM;
        for (size_t i = 0; i < v.u.l->n; i++)
            if ((i && puts_(sb, ", ", err)) || repr_depth(sb, v.u.l->v[i], depth + 1, err))
                return err ? err->code : GLIM_ENOMEM;
        if (tup && v.u.l->n == 1 && puts_(sb, ",", err))
            return GLIM_ENOMEM;
        return puts_(sb, tup ? ")" : "]", err);
    }
    if (v.type == JINJA_DICT && !v.u.d->is_ns) {
        if (puts_(sb, "{", err))
            return GLIM_ENOMEM;
        for (size_t i = 0; i < v.u.d->n; i++)
            if ((i && puts_(sb, ", ", err)) || repr_depth(sb, v.u.d->k[i], depth + 1, err) ||
                puts_(sb, ": ", err) || repr_depth(sb, v.u.d->v[i], depth + 1, err))
                return err ? err->code : GLIM_ENOMEM;
        return puts_(sb, "}", err);
    }
    if (v.type == JINJA_UNDEFINED)
        return GLIM_OK;
    return scalar_str(sb, v, err);
}

int jinja_repr(struct strbuf *sb, struct jinja_value v, struct glim_err *err)
{
    return repr_depth(sb, v, 0, err);
}

int jinja_to_str(struct strbuf *sb, struct jinja_value v, struct glim_err *err)
{
    if (v.type == JINJA_LIST || (v.type == JINJA_DICT && !v.u.d->is_ns))
        return jinja_repr(sb, v, err);
    return scalar_str(sb, v, err);
}

int jinja_stringify(struct jinja_arena *a, struct jinja_value v, struct jinja_value *out,
                    struct glim_err *err)
{
    if (v.type == JINJA_STR) {
        *out = v;
        return GLIM_OK;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = jinja_to_str(&sb, v, err);
    if (!rc && jinja_str(a, strbuf_cstr(&sb), sb.len, out))
        rc = glim_fail(err, GLIM_ENOMEM, "out of memory (template arena budget)");
    strbuf_clear(&sb);
    return rc;
}

/* ---- json.dumps ---- */

/* \uXXXX for one code point (a surrogate pair above the BMP), as ensure_ascii does */
static int json_u_escape(struct strbuf *sb, uint32_t c, struct glim_err *err)
{
    char esc[16];
    if (c >= 0x10000) {
        c -= 0x10000;
        snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
    } else {
        snprintf(esc, sizeof esc, "\\u%04x", c);
    }
    return puts_(sb, esc, err);
}

static int json_str(struct strbuf *sb, const char *s, size_t n, bool ascii, struct glim_err *err)
{
    if (puts_(sb, "\"", err))
        return GLIM_ENOMEM;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || !ascii))
            continue;
        if (put(sb, s + run, i - run, err))
            return GLIM_ENOMEM;
        if (c >= 0x80) {
            size_t next = jinja_utf8_next(s, n, i);
            uint32_t cp = c;
            if (next - i > 1) {
                cp = c & (0x7F >> (next - i));
                for (size_t k = i + 1; k < next; k++)
                    cp = cp << 6 | ((unsigned char)s[k] & 0x3F);
            }
            if (json_u_escape(sb, cp, err))
                return GLIM_ENOMEM;
            run = next;
            i = next - 1;
            continue;
        }
        char esc[8];
        switch (c) {
        case '"': strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        case '\b': strcpy(esc, "\\b"); break;
        case '\f': strcpy(esc, "\\f"); break;
        default: snprintf(esc, sizeof esc, "\\u%04x", c);
        }
        if (puts_(sb, esc, err))
            return GLIM_ENOMEM;
        run = i + 1;
    }
    if (put(sb, s + run, n - run, err))
        return GLIM_ENOMEM;
    return puts_(sb, "\"", err);
}

static int json_newline(struct strbuf *sb, int indent, int level, struct glim_err *err)
{
    if (indent < 0)
        return GLIM_OK;
    if (puts_(sb, "\n", err))
        return GLIM_ENOMEM;
    for (long k = 0; k < (long)indent * level; k++)
        if (puts_(sb, " ", err))
            return GLIM_ENOMEM;
    return GLIM_OK;
}

struct json_out {
    struct strbuf *sb;
    int indent;
    bool sort_keys, ascii;
    const char *item_sep, *key_sep;
    struct glim_err *err;
};

static int json_value(const struct json_out *jo, struct jinja_value v, int level);

static int json_key(const struct json_out *jo, struct jinja_value k)
{
    char buf[48], num[40];
    switch (k.type) {
    case JINJA_STR: return json_str(jo->sb, k.u.s->s, k.u.s->len, jo->ascii, jo->err);
    case JINJA_INT: snprintf(buf, sizeof buf, "\"%lld\"", (long long)k.u.i); break;
    case JINJA_BOOL: strcpy(buf, k.u.b ? "\"true\"" : "\"false\""); break;
    case JINJA_NONE: strcpy(buf, "\"null\""); break;
    case JINJA_FLOAT: jinja_fmt_float(k.u.f, num), snprintf(buf, sizeof buf, "\"%s\"", num); break;
    default:
        return glim_fail(jo->err, GLIM_EINVAL, "tojson: keys must be str, int, float, bool or None, not %s",
                         jinja_type_name(k));
    }
    return puts_(jo->sb, buf, jo->err);
}

/* Key order for sort_keys: indexes sorted by key (insertion sort; dicts are small). */
static int json_order(const struct json_out *jo, const struct jdict *d, size_t *idx)
{
    for (size_t i = 0; i < d->n; i++) {
        size_t j = i;
        idx[i] = i;
        while (jo->sort_keys && j > 0) {
            bool lt;
            if (jinja_less(d->k[idx[j]], d->k[idx[j - 1]], &lt, jo->err))
                return jo->err ? jo->err->code : GLIM_EINVAL;
            if (!lt)
                break;
            size_t t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
            j--;
        }
    }
    return GLIM_OK;
}

static int json_dict(const struct json_out *jo, const struct jdict *d, int level)
{
    if (d->n == 0)
        return puts_(jo->sb, "{}", jo->err);
    size_t *idx = glim_malloc(d->n * sizeof *idx);
    if (!idx)
        return glim_fail(jo->err, GLIM_ENOMEM, "out of memory");
    int rc = json_order(jo, d, idx);
    if (!rc)
        rc = puts_(jo->sb, "{", jo->err);
    for (size_t i = 0; !rc && i < d->n; i++) {
        if (i)
            rc = puts_(jo->sb, jo->item_sep, jo->err);
        rc = rc ? rc : json_newline(jo->sb, jo->indent, level + 1, jo->err);
        rc = rc ? rc : json_key(jo, d->k[idx[i]]);
        rc = rc ? rc : puts_(jo->sb, jo->key_sep, jo->err);
        rc = rc ? rc : json_value(jo, d->v[idx[i]], level + 1);
    }
    rc = rc ? rc : json_newline(jo->sb, jo->indent, level, jo->err);
    rc = rc ? rc : puts_(jo->sb, "}", jo->err);
    glim_free(idx);
    return rc;
}

static int json_value(const struct json_out *jo, struct jinja_value v, int level)
{
    char buf[40];
    if (level > JINJA_MAX_NEST)
        return glim_fail(jo->err, GLIM_ERANGE, "tojson: value nested deeper than %d levels", JINJA_MAX_NEST);
    switch (v.type) {
    case JINJA_NONE: return puts_(jo->sb, "null", jo->err);
    case JINJA_BOOL: return puts_(jo->sb, v.u.b ? "true" : "false", jo->err);
    case JINJA_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.u.i); return puts_(jo->sb, buf, jo->err);
    case JINJA_FLOAT:
        if (isnan(v.u.f))
            return puts_(jo->sb, "NaN", jo->err);
        if (isinf(v.u.f))
            return puts_(jo->sb, v.u.f < 0 ? "-Infinity" : "Infinity", jo->err);
        jinja_fmt_float(v.u.f, buf);
        return puts_(jo->sb, buf, jo->err);
    case JINJA_STR: return json_str(jo->sb, v.u.s->s, v.u.s->len, jo->ascii, jo->err);
    case JINJA_LIST: {
        if (v.u.l->n == 0)
            return puts_(jo->sb, "[]", jo->err);
        if (puts_(jo->sb, "[", jo->err))
            return GLIM_ENOMEM;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && puts_(jo->sb, jo->item_sep, jo->err))
                return GLIM_ENOMEM;
            int rc = json_newline(jo->sb, jo->indent, level + 1, jo->err);
            rc = rc ? rc : json_value(jo, v.u.l->v[i], level + 1);
            if (rc)
                return rc;
        }
        if (json_newline(jo->sb, jo->indent, level, jo->err))
            return GLIM_ENOMEM;
        return puts_(jo->sb, "]", jo->err);
    }
    case JINJA_DICT:
        if (!v.u.d->is_ns)
            return json_dict(jo, v.u.d, level);
        /* fall through */
    default:
        return glim_fail(jo->err, GLIM_EINVAL, "tojson: Object of type %s is not JSON serializable",
                         jinja_type_name(v));
    }
}

int jinja_to_json(struct strbuf *sb, struct jinja_value v, const struct jinja_json_opts *o,
                  struct glim_err *err)
{
    struct jinja_json_opts def = {.indent = -1};
    if (!o)
        o = &def;
    struct json_out jo = {sb, o->indent, o->sort_keys, o->ensure_ascii,
                          o->item_sep ? o->item_sep : o->indent < 0 ? ", " : ",",
                          o->key_sep ? o->key_sep : ": ", err};
    return json_value(&jo, v, 0);
}
