/*
 * jinja_value.c — the arena every value lives in, the C API for building values, and
 * Python's truthiness, equality and ordering over them.
 *
 * Why an arena: a render creates many short-lived strings and lists with no clear
 * owner (macro results, concatenations, filter outputs). One budgeted arena per
 * render makes cleanup a single free and turns runaway templates into GLIM_ENOMEM.
 */
#define _GNU_SOURCE   /* memmem */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "jinja_int.h"

struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};
struct jinja_arena {
    struct jchunk *head;
    size_t total, budget;
};

#define CHUNK_BYTES (64 * 1024)

struct jinja_arena *jinja_arena_new(size_t budget_bytes)
{
    struct jinja_arena *a = glim_calloc(1, sizeof *a);
    if (a)
        a->budget = budget_bytes ? budget_bytes : (size_t)256 << 20;
    return a;
}

void jinja_arena_free(struct jinja_arena *a)
{
    if (!a)
        return;
    for (struct jchunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        glim_free(c);
    }
    glim_free(a);
}

void *jinja_alloc(struct jinja_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    struct jchunk *c = a->head;
    if (c && c->cap - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        return p;
    }
    size_t cap = n > CHUNK_BYTES / 4 ? n : CHUNK_BYTES;
    if (cap > a->budget || a->total > a->budget - cap)
        return NULL;
    c = glim_malloc(sizeof *c + cap);
    if (!c)
        return NULL;
    a->total += cap;
    c->cap = cap, c->used = n;
    if (cap == n && a->head) {       /* a big one-off: keep filling the current chunk */
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
    }
    return c->data;
}

struct jstr *jinja_jstr(struct jinja_arena *a, const char *s, size_t n)
{
    if (n > SIZE_MAX - sizeof(struct jstr) - 1)
        return NULL;
    struct jstr *j = jinja_alloc(a, sizeof *j + n + 1);
    if (!j)
        return NULL;
    j->len = n;
    if (n)
        memcpy(j->s, s, n);
    j->s[n] = '\0';
    return j;
}

struct jinja_value jinja_strv(struct jstr *s) { return (struct jinja_value){JINJA_STR, {.s = s}}; }
struct jinja_value jinja_undefined(void) { return (struct jinja_value){JINJA_UNDEFINED, {.s = NULL}}; }
struct jinja_value jinja_none(void) { return (struct jinja_value){JINJA_NONE, {.i = 0}}; }
struct jinja_value jinja_bool(bool b) { return (struct jinja_value){JINJA_BOOL, {.b = b}}; }
struct jinja_value jinja_int(int64_t i) { return (struct jinja_value){JINJA_INT, {.i = i}}; }
struct jinja_value jinja_float(double f) { return (struct jinja_value){JINJA_FLOAT, {.f = f}}; }

int jinja_str(struct jinja_arena *a, const char *s, size_t n, struct jinja_value *out)
{
    struct jstr *j = jinja_jstr(a, s, n);
    if (!j)
        return GLIM_ENOMEM;
    *out = jinja_strv(j);
    return GLIM_OK;
}

int jinja_cstr(struct jinja_arena *a, const char *s, struct jinja_value *out)
{
    return jinja_str(a, s, strlen(s), out);
}

int jinja_list_new(struct jinja_arena *a, struct jinja_value *out)
{
    struct jlist *l = jinja_alloc(a, sizeof *l);
    if (!l)
        return GLIM_ENOMEM;
    *l = (struct jlist){0};
    *out = (struct jinja_value){JINJA_LIST, {.l = l}};
    return GLIM_OK;
}

static int grow(struct jinja_arena *a, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return GLIM_OK;
    size_t nc = *cap ? *cap * 2 : 4;
    if (nc < need)
        nc = need;
    if (nc > SIZE_MAX / elem)
        return GLIM_ENOMEM;
    void *np = jinja_alloc(a, nc * elem);
    if (!np)
        return GLIM_ENOMEM;
    if (*cap)
        memcpy(np, *p, *cap * elem);
    *p = np, *cap = nc;
    return GLIM_OK;
}

int jinja_list_push(struct jinja_arena *a, struct jinja_value list, struct jinja_value v)
{
    struct jlist *l = list.u.l;
    if (grow(a, (void **)&l->v, &l->cap, l->n + 1, sizeof *l->v))
        return GLIM_ENOMEM;
    l->v[l->n++] = v;
    return GLIM_OK;
}

int jinja_dict_new(struct jinja_arena *a, struct jinja_value *out)
{
    struct jdict *d = jinja_alloc(a, sizeof *d);
    if (!d)
        return GLIM_ENOMEM;
    *d = (struct jdict){0};
    *out = (struct jinja_value){JINJA_DICT, {.d = d}};
    return GLIM_OK;
}

int jinja_dict_find(const struct jdict *d, struct jinja_value key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jinja_equal(d->k[i], key))
            return (int)i;
    return -1;
}

int jinja_dict_set(struct jinja_arena *a, struct jinja_value dict, struct jinja_value key,
                   struct jinja_value v)
{
    struct jdict *d = dict.u.d;
    int at = d->n < JINJA_DEDUPE_MAX ? jinja_dict_find(d, key) : -1;
    if (at >= 0) {
        d->v[at] = v;
        return GLIM_OK;
    }
    if (d->n >= INT32_MAX)
        return GLIM_ENOMEM;
    size_t kcap = d->cap;
    if (grow(a, (void **)&d->k, &kcap, d->n + 1, sizeof *d->k) ||
        grow(a, (void **)&d->v, &d->cap, d->n + 1, sizeof *d->v))
        return GLIM_ENOMEM;
    d->k[d->n] = key, d->v[d->n] = v;
    d->n++;
    return GLIM_OK;
}

int jinja_dict_setc(struct jinja_arena *a, struct jinja_value dict, const char *key,
                    struct jinja_value v)
{
    struct jinja_value k;
    if (jinja_cstr(a, key, &k))
        return GLIM_ENOMEM;
    return jinja_dict_set(a, dict, k, v);
}

struct jinja_value jinja_dict_getc(struct jinja_value dict, const char *key)
{
    if (dict.type != JINJA_DICT)
        return jinja_undefined();
    size_t n = strlen(key);
    const struct jdict *d = dict.u.d;
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].type == JINJA_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->s, key, n))
            return d->v[i];
    return jinja_undefined();
}

const char *jinja_find(const char *hay, size_t hay_len, const char *needle, size_t needle_len)
{
    if (needle_len == 0)
        return hay;
    return memmem(hay, hay_len, needle, needle_len);   /* linear time, unlike a naive scan */
}

size_t jinja_utf8_next(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    size_t len = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
    if (len > n - i)
        return i + 1;
    for (size_t k = 1; k < len; k++)
        if (((unsigned char)s[i + k] & 0xC0) != 0x80)
            return i + 1;
    return i + len;
}

int jinja_utf8_put(struct strbuf *sb, uint32_t c)
{
    char b[4];
    if (c > 0x10FFFF || (c >= 0xD800 && c < 0xE000))
        c = 0xFFFD;   /* no UTF-8 form */
    size_t n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    if (n == 1) {
        b[0] = (char)c;
    } else {
        for (size_t k = n - 1; k > 0; k--, c >>= 6)
            b[k] = (char)(0x80 | (c & 0x3F));
        b[0] = (char)((0xF00 >> n) | c);
    }
    return strbuf_append(sb, b, n);
}

size_t jinja_utf8_count(const char *s, size_t n)
{
    size_t cnt = 0;
    for (size_t i = 0; i < n; i = jinja_utf8_next(s, n, i))
        cnt++;
    return cnt;
}

size_t jinja_len(struct jinja_value v)
{
    switch (v.type) {
    case JINJA_STR: return jinja_utf8_count(v.u.s->s, v.u.s->len);
    case JINJA_LIST: return v.u.l->n;
    case JINJA_DICT: return v.u.d->n;
    default: return 0;
    }
}

bool jinja_truthy(struct jinja_value v)
{
    switch (v.type) {
    case JINJA_UNDEFINED:
    case JINJA_NONE: return false;
    case JINJA_BOOL: return v.u.b;
    case JINJA_INT: return v.u.i != 0;
    case JINJA_FLOAT: return v.u.f != 0.0;
    case JINJA_STR: return v.u.s->len != 0;
    case JINJA_LIST: return v.u.l->n != 0;
    case JINJA_DICT: return v.u.d->is_ns || v.u.d->n != 0;
    default: return true;
    }
}

bool jinja_is_number(struct jinja_value v)
{
    return v.type == JINJA_INT || v.type == JINJA_FLOAT || v.type == JINJA_BOOL;
}

double jinja_num(struct jinja_value v)
{
    return v.type == JINJA_FLOAT ? v.u.f : v.type == JINJA_BOOL ? (double)v.u.b : (double)v.u.i;
}

static int64_t as_int(struct jinja_value v) { return v.type == JINJA_BOOL ? v.u.b : v.u.i; }

static bool equal_depth(struct jinja_value a, struct jinja_value b, int depth)
{
    if (depth > JINJA_MAX_NEST)
        return false;
    if (jinja_is_number(a) && jinja_is_number(b)) {
        if (a.type != JINJA_FLOAT && b.type != JINJA_FLOAT)
            return as_int(a) == as_int(b);
        return jinja_num(a) == jinja_num(b);
    }
    if (a.type != b.type)
        return false;
    switch (a.type) {
    case JINJA_UNDEFINED:
    case JINJA_NONE: return true;
    case JINJA_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case JINJA_LIST:
        if (a.u.l->n != b.u.l->n)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_depth(a.u.l->v[i], b.u.l->v[i], depth + 1))
                return false;
        return true;
    case JINJA_DICT:
        if (a.u.d->is_ns || b.u.d->is_ns)
            return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            int j = jinja_dict_find(b.u.d, a.u.d->k[i]);
            if (j < 0 || !equal_depth(a.u.d->v[i], b.u.d->v[j], depth + 1))
                return false;
        }
        return true;
    default: return a.u.p == b.u.p;
    }
}

bool jinja_equal(struct jinja_value a, struct jinja_value b) { return equal_depth(a, b, 0); }

static int less_depth(struct jinja_value a, struct jinja_value b, bool *lt, int depth,
                      struct glim_err *err)
{
    if (depth > JINJA_MAX_NEST)
        return glim_fail(err, GLIM_ERANGE, "comparison nested too deeply");
    if (jinja_is_number(a) && jinja_is_number(b)) {
        if (a.type != JINJA_FLOAT && b.type != JINJA_FLOAT)
            *lt = as_int(a) < as_int(b);
        else
            *lt = jinja_num(a) < jinja_num(b);
        return GLIM_OK;
    }
    if (a.type == JINJA_STR && b.type == JINJA_STR) {
        size_t n = GLIM_MIN(a.u.s->len, b.u.s->len);
        int c = memcmp(a.u.s->s, b.u.s->s, n);
        *lt = c < 0 || (c == 0 && a.u.s->len < b.u.s->len);
        return GLIM_OK;
    }
    if (a.type == JINJA_LIST && b.type == JINJA_LIST) {
        size_t n = GLIM_MIN(a.u.l->n, b.u.l->n);
        for (size_t i = 0; i < n; i++) {
            if (equal_depth(a.u.l->v[i], b.u.l->v[i], depth + 1))
                continue;
            return less_depth(a.u.l->v[i], b.u.l->v[i], lt, depth + 1, err);
        }
        *lt = a.u.l->n < b.u.l->n;
        return GLIM_OK;
    }
    return glim_fail(err, GLIM_EINVAL, "'<' not supported between instances of '%s' and '%s'",
                     jinja_type_name(a), jinja_type_name(b));
}

int jinja_less(struct jinja_value a, struct jinja_value b, bool *lt, struct glim_err *err)
{
    return less_depth(a, b, lt, 0, err);
}

const char *jinja_type_name(struct jinja_value v)
{
    switch (v.type) {
    case JINJA_UNDEFINED: return "Undefined";
    case JINJA_NONE: return "NoneType";
    case JINJA_BOOL: return "bool";
    case JINJA_INT: return "int";
    case JINJA_FLOAT: return "float";
    case JINJA_STR: return "str";
    case JINJA_LIST: return "list";
    case JINJA_DICT: return v.u.d->is_ns ? "Namespace" : "dict";
    case JINJA_FUNC: return "function";
    case JINJA_MACRO: return "Macro";
    case JINJA_LOOP: return "LoopContext";
    }
    return "object";
}
