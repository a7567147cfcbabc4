/*
 * toolcall_json.c — argument values as JSON text (runtime.md §5.3).
 *
 * DESIGN. A tool-call argument is either a declared scalar (string,
 * boolean, integer, number) or "whatever JSON the model wrote". The second
 * case is parsed and written back in Python's json.dumps style in a single
 * recursive pass, so `[1,2]` becomes `[1, 2]` and `1E2` becomes `100.0`,
 * byte-identical to the reference server. Nothing is kept in memory but the
 * output text.
 */
#include "chat/toolcall_json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "chat/reasoning.h"

/* ---- strings -------------------------------------------------------------- */

/* Decode one UTF-8 sequence at s[0..n); returns its length, or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3
               : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 0;
    if (len == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
        return 0;   /* overlong, or a UTF-16 surrogate */
    if (len == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
        return 0;   /* overlong, or above U+10FFFF */
    return len;
}

/* One code point inside a JSON string, escaped like json.dumps(ensure_ascii=False). */
static int put_cp(struct strbuf *out, uint32_t cp)
{
    char b[8];
    switch (cp) {
    case '"': return strbuf_append(out, "\\\"", 2);
    case '\\': return strbuf_append(out, "\\\\", 2);
    case '\n': return strbuf_append(out, "\\n", 2);
    case '\r': return strbuf_append(out, "\\r", 2);
    case '\t': return strbuf_append(out, "\\t", 2);
    case '\b': return strbuf_append(out, "\\b", 2);
    case '\f': return strbuf_append(out, "\\f", 2);
    }
    if (cp < 0x20 || (cp >= 0xd800 && cp <= 0xdfff))   /* lone surrogates stay escaped */
        return strbuf_printf(out, "\\u%04x", (unsigned)cp);
    if (cp < 0x80)
        return strbuf_putc(out, (char)cp);
    size_t n = 0;
    if (cp < 0x800) {
        b[n++] = (char)(0xc0 | cp >> 6);
    } else if (cp < 0x10000) {
        b[n++] = (char)(0xe0 | cp >> 12);
        b[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    } else {
        b[n++] = (char)(0xf0 | cp >> 18);
        b[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    }
    b[n++] = (char)(0x80 | (cp & 0x3f));
    return strbuf_append(out, b, n);
}

/* Raw bytes into an open JSON string: valid UTF-8 is copied, bad bytes become U+FFFD. */
static int put_raw(struct strbuf *out, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len(u + i, n - i);
        int rc = len == 0 ? strbuf_append(out, "\xef\xbf\xbd", 3)
               : len == 1 ? put_cp(out, u[i])
                          : strbuf_append(out, s + i, len);
        if (rc)
            return rc;
        i += len ? len : 1;
    }
    return GLIM_OK;
}

int toolcall_json_string(struct strbuf *out, const char *s, size_t n)
{
    if (strbuf_putc(out, '"') || put_raw(out, s, n) || strbuf_putc(out, '"'))
        return GLIM_ENOMEM;
    return GLIM_OK;
}

/* ---- numbers -------------------------------------------------------------- */

static int put_zeros(struct strbuf *out, int n)
{
    for (int k = 0; k < n; k++)
        if (strbuf_putc(out, '0'))
            return GLIM_ENOMEM;
    return GLIM_OK;
}

int toolcall_json_float(struct strbuf *out, double x)
{
    char buf[40];
    if (x == 0)
        return strbuf_puts(out, signbit(x) ? "-0.0" : "0.0");
    for (int prec = 1; prec <= 17; prec++) {   /* shortest round-trip digits */
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    char digits[24];
    int nd = 0;
    const char *p = buf + (buf[0] == '-');
    for (; *p && *p != 'e' && nd < 20; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int decpt = atoi(p + 1) + 1;   /* value = 0.DIGITS x 10^decpt */
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int rc = buf[0] == '-' ? strbuf_putc(out, '-') : GLIM_OK;
    if (decpt > 16 || decpt < -3) {   /* where Python's repr switches to exponent form */
        int e = decpt - 1;
        rc = rc || strbuf_putc(out, digits[0]);
        if (nd > 1)
            rc = rc || strbuf_putc(out, '.') || strbuf_append(out, digits + 1, (size_t)nd - 1);
        return rc || strbuf_printf(out, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e) ? GLIM_ENOMEM : GLIM_OK;
    }
    if (decpt <= 0)
        return rc || strbuf_puts(out, "0.") || put_zeros(out, -decpt) || strbuf_append(out, digits, (size_t)nd)
               ? GLIM_ENOMEM : GLIM_OK;
    if (decpt >= nd)
        return rc || strbuf_append(out, digits, (size_t)nd) || put_zeros(out, decpt - nd) || strbuf_puts(out, ".0")
               ? GLIM_ENOMEM : GLIM_OK;
    return rc || strbuf_append(out, digits, (size_t)decpt) || strbuf_putc(out, '.') ||
           strbuf_append(out, digits + decpt, (size_t)(nd - decpt)) ? GLIM_ENOMEM : GLIM_OK;
}

/* strtod on a bounded span (the text is not NUL-terminated). */
static int span_strtod(const char *s, size_t n, double *x)
{
    char small[64];
    char *b = n < sizeof small ? small : glim_malloc(n + 1);
    if (!b)
        return GLIM_ENOMEM;
    memcpy(b, s, n);
    b[n] = '\0';
    *x = strtod(b, NULL);
    if (b != small)
        glim_free(b);
    return GLIM_OK;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ---- JSON re-serialization (Python json.loads, then json.dumps) ----------- */

enum { MAX_DEPTH = 512 };

struct jp {
    const char      *p, *e;
    struct strbuf   *out;
    bool             is_nonfinite;   /* saw NaN/Infinity/overflow */
    bool             is_nomem;
};

static void ws(struct jp *j)
{
    while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool put(struct jp *j, const char *s)
{
    if (strbuf_puts(j->out, s))
        j->is_nomem = true;
    return !j->is_nomem;
}

static bool word(struct jp *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->e - j->p) < n || memcmp(j->p, w, n) != 0)
        return false;
    j->p += n;
    return true;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* "\uXXXX" (with a following low surrogate when it pairs); p after "\u" */
static bool json_u_escape(struct jp *j)
{
    if (j->e - j->p < 4)
        return false;
    int cp = hex4(j->p);
    if (cp < 0)
        return false;
    j->p += 4;
    if (cp >= 0xd800 && cp <= 0xdbff && j->e - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
        int lo = hex4(j->p + 2);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            j->p += 6;
        }
    }
    if (put_cp(j->out, (uint32_t)cp))
        j->is_nomem = true;
    return !j->is_nomem;
}

static bool json_string(struct jp *j)
{
    j->p++;   /* opening quote */
    if (!put(j, "\""))
        return false;
    for (;;) {
        const char *run = j->p;
        while (j->p < j->e && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20)
            j->p++;
        if (put_raw(j->out, run, (size_t)(j->p - run))) {
            j->is_nomem = true;
            return false;
        }
        if (j->p >= j->e || (unsigned char)*j->p < 0x20)
            return false;   /* unterminated, or a raw control character (strict mode) */
        if (*j->p++ == '"')
            return put(j, "\"");
        if (j->p >= j->e)
            return false;
        char c = *j->p++;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '/' ? "/" : c == 'b' ? "\\b"
                        : c == 'f' ? "\\f" : c == 'n' ? "\\n" : c == 'r' ? "\\r" : c == 't' ? "\\t" : NULL;
        if (esc ? !put(j, esc) : (c != 'u' || !json_u_escape(j)))
            return false;
    }
}

/* -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? : an int unless it has a fraction or exponent */
static bool json_number(struct jp *j)
{
    const char *s = j->p, *p = s;
    bool is_float = false;
    if (p < j->e && *p == '-')
        p++;
    if (p >= j->e || !is_digit(*p))
        return false;
    if (*p == '0')
        p++;
    else
        while (p < j->e && is_digit(*p))
            p++;
    if (p + 1 < j->e && *p == '.' && is_digit(p[1])) {
        is_float = true;
        for (p++; p < j->e && is_digit(*p); p++)
            ;
    }
    if (p < j->e && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (q < j->e && (*q == '+' || *q == '-'))
            q++;
        if (q < j->e && is_digit(*q)) {
            is_float = true;
            for (p = q; p < j->e && is_digit(*p); p++)
                ;
        }
    }
    j->p = p;
    if (!is_float) {   /* Python ints are exact; only "-0" needs rewriting */
        bool is_neg_zero = p - s == 2 && s[0] == '-' && s[1] == '0';
        int rc = is_neg_zero ? strbuf_putc(j->out, '0') : strbuf_append(j->out, s, (size_t)(p - s));
        j->is_nomem |= rc != GLIM_OK;
        return !j->is_nomem;
    }
    double x;
    if (span_strtod(s, (size_t)(p - s), &x)) {
        j->is_nomem = true;
        return false;
    }
    if (!isfinite(x)) {
        j->is_nonfinite = true;
        return put(j, "null");   /* placeholder; the caller refuses the value */
    }
    j->is_nomem |= toolcall_json_float(j->out, x) != GLIM_OK;
    return !j->is_nomem;
}

static bool json_value(struct jp *j, int depth);

/* '[' or '{' already seen; elements separated by ", ", members by ": " */
static bool json_container(struct jp *j, int depth, bool is_object)
{
    char close = is_object ? '}' : ']';
    if (!put(j, is_object ? "{" : "["))
        return false;
    j->p++;
    ws(j);
    if (j->p < j->e && *j->p == close) {
        j->p++;
        return put(j, is_object ? "}" : "]");
    }
    for (bool is_first = true;; is_first = false) {
        if (!is_first && !put(j, ", "))
            return false;
        ws(j);
        if (is_object) {
            if (j->p >= j->e || *j->p != '"' || !json_string(j))
                return false;
            ws(j);
            if (j->p >= j->e || *j->p++ != ':' || !put(j, ": "))
                return false;
        }
        if (!json_value(j, depth + 1))
            return false;
        ws(j);
        if (j->p >= j->e)
            return false;
        char c = *j->p++;
        if (c == close)
            return put(j, is_object ? "}" : "]");
        if (c != ',')
            return false;
    }
}

static bool json_value(struct jp *j, int depth)
{
    ws(j);
    if (j->p >= j->e || depth > MAX_DEPTH)
        return false;
    switch (*j->p) {
    case '{': return json_container(j, depth, true);
    case '[': return json_container(j, depth, false);
    case '"': return json_string(j);
    case 't': return word(j, "true") && put(j, "true");
    case 'f': return word(j, "false") && put(j, "false");
    case 'n': return word(j, "null") && put(j, "null");
    }
    if (word(j, "NaN") || word(j, "Infinity") || word(j, "-Infinity")) {
        j->is_nonfinite = true;   /* Python's json accepts these literals */
        return put(j, "null");
    }
    return json_number(j);
}

/* ---- coerce (§5.3) -------------------------------------------------------- */

static bool ieq(const char *s, size_t n, const char *w)
{
    if (strlen(w) != n)
        return false;
    for (size_t k = 0; k < n; k++)
        if ((s[k] | 0x20) != w[k])
            return false;
    return true;
}

/* ^[+-]?[0-9]+$ */
static bool is_integer_text(const char *s, size_t n)
{
    size_t k = n && (s[0] == '+' || s[0] == '-');
    if (k == n)
        return false;
    for (; k < n; k++)
        if (!is_digit(s[k]))
            return false;
    return true;
}

/* ^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$ */
static bool is_number_text(const char *s, size_t n)
{
    size_t k = n && (s[0] == '+' || s[0] == '-'), d0;
    for (d0 = k; k < n && is_digit(s[k]); k++)
        ;
    size_t n_int = k - d0, n_frac = 0;
    if (k < n && s[k] == '.')
        for (k++; k < n && is_digit(s[k]); k++)
            n_frac++;
    if (n_int == 0 && n_frac == 0)
        return false;
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        size_t e0 = k;
        for (; k < n && is_digit(s[k]); k++)
            ;
        if (k == e0)
            return false;
    }
    return k == n;
}

static int put_integer(struct strbuf *out, const char *s, size_t n)
{
    bool is_neg = s[0] == '-';
    size_t k = s[0] == '+' || s[0] == '-';
    while (k + 1 < n && s[k] == '0')
        k++;
    if (is_neg && !(n - k == 1 && s[k] == '0') && strbuf_putc(out, '-'))
        return GLIM_ENOMEM;
    return strbuf_append(out, s + k, n - k);
}

static int as_string(struct strbuf *out, const char *raw, size_t n)
{
    return toolcall_json_string(out, raw, n) ? TOOLCALL_COERCE_NOMEM : TOOLCALL_COERCE_OK;
}

int toolcall_json_coerce(struct strbuf *out, const char *raw, size_t n, const char *type)
{
    const char *v = raw;
    size_t vn = n;
    while (vn && reasoning_is_space((unsigned char)v[0]))
        v++, vn--;
    while (vn && reasoning_is_space((unsigned char)v[vn - 1]))
        vn--;
    if (type && !strcmp(type, "string"))
        return as_string(out, raw, n);
    if (type && !strcmp(type, "boolean")) {
        if (ieq(v, vn, "true") || ieq(v, vn, "false"))
            return strbuf_puts(out, (v[0] | 0x20) == 't' ? "true" : "false") ? TOOLCALL_COERCE_NOMEM
                                                                              : TOOLCALL_COERCE_OK;
        return as_string(out, raw, n);
    }
    if (type && !strcmp(type, "integer")) {
        if (is_integer_text(v, vn))
            return put_integer(out, v, vn) ? TOOLCALL_COERCE_NOMEM : TOOLCALL_COERCE_OK;
        return as_string(out, raw, n);
    }
    if (type && !strcmp(type, "number")) {
        double x = 0;
        if (is_number_text(v, vn) && span_strtod(v, vn, &x))
            return TOOLCALL_COERCE_NOMEM;
        if (is_number_text(v, vn) && isfinite(x))
            return toolcall_json_float(out, x) ? TOOLCALL_COERCE_NOMEM : TOOLCALL_COERCE_OK;
        return as_string(out, raw, n);
    }
    /* anything else: JSON-parse, else keep the raw string */
    size_t mark = out->len;
    struct jp j = { .p = v, .e = v + vn, .out = out };
    bool is_ok = json_value(&j, 0);
    ws(&j);
    is_ok = is_ok && j.p == j.e;
    if (j.is_nomem)
        return TOOLCALL_COERCE_NOMEM;
    bool is_top_scalar = vn && v[0] != '[' && v[0] != '{';
    if (is_ok && j.is_nonfinite && !is_top_scalar)
        return TOOLCALL_COERCE_NAN;   /* nested NaN: json.dumps(allow_nan=False) raises */
    if (is_ok && !j.is_nonfinite)
        return TOOLCALL_COERCE_OK;
    out->len = mark;   /* drop the partial value */
    if (out->data)
        out->data[mark] = '\0';
    return as_string(out, raw, n);
}
