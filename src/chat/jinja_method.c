/*
 * jinja_method.c — attribute and item access, iteration, the Python methods chat
 * templates call on strings and dicts (.strip() .split() .startswith() .items()
 * .get() ...), and the global functions HF provides: range, namespace, dict,
 * raise_exception and strftime_now. Mutating methods (append, update, pop) are
 * refused, as in HF's ImmutableSandboxedEnvironment.
 */
#include <ctype.h>
#include <string.h>
#include <time.h>

#include "jinja_int.h"

#define OOM(env, n) jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)")
#define ECODE(env) ((env)->err ? (env)->err->code : GLIM_EINVAL)

static bool name_is(const struct jstr *s, const char *w)
{
    return s->len == strlen(w) && !memcmp(s->s, w, s->len);
}

static int loop_attr(const struct jloop *l, const struct jstr *name, struct jinja_value *out)
{
    int64_t i = (int64_t)l->idx, n = (int64_t)l->items->n;
    if (name_is(name, "index"))
        *out = jinja_int(i + 1);
    else if (name_is(name, "index0"))
        *out = jinja_int(i);
    else if (name_is(name, "revindex"))
        *out = jinja_int(n - i);
    else if (name_is(name, "revindex0"))
        *out = jinja_int(n - i - 1);
    else if (name_is(name, "first"))
        *out = jinja_bool(i == 0);
    else if (name_is(name, "last"))
        *out = jinja_bool(i == n - 1);
    else if (name_is(name, "length"))
        *out = jinja_int(n);
    else if (name_is(name, "depth"))
        *out = jinja_int(l->depth);
    else if (name_is(name, "depth0"))
        *out = jinja_int(l->depth - 1);
    else if (name_is(name, "previtem"))
        *out = i > 0 ? l->items->v[i - 1] : jinja_undefined();
    else if (name_is(name, "nextitem"))
        *out = i + 1 < n ? l->items->v[i + 1] : jinja_undefined();
    else
        return -1;
    return GLIM_OK;
}

static struct jinja_value undef_named(const struct jstr *name)
{
    struct jinja_value u = jinja_undefined();
    u.u.s = (struct jstr *)name;
    return u;
}

int jinja_getattr(struct jenv *env, const struct jnode *n, struct jinja_value obj,
                  const struct jstr *name, struct jinja_value *out)
{
    if (obj.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, obj);
    if (obj.type == JINJA_LOOP && loop_attr(obj.u.p, name, out) == GLIM_OK)
        return GLIM_OK;
    if (obj.type == JINJA_DICT) {
        int at = jinja_dict_find(obj.u.d, jinja_strv((struct jstr *)name));
        *out = at >= 0 ? obj.u.d->v[at] : undef_named(name);
        return GLIM_OK;
    }
    *out = undef_named(name);
    return GLIM_OK;
}

int jinja_getitem(struct jenv *env, const struct jnode *n, struct jinja_value obj,
                  struct jinja_value key, struct jinja_value *out)
{
    if (obj.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, obj);
    *out = jinja_undefined();
    if (key.type == JINJA_STR && (obj.type == JINJA_DICT || obj.type == JINJA_LOOP))
        return jinja_getattr(env, n, obj, key.u.s, out);
    if (obj.type == JINJA_DICT) {
        int at = jinja_dict_find(obj.u.d, key);
        if (at >= 0)
            *out = obj.u.d->v[at];
        return GLIM_OK;
    }
    if ((obj.type != JINJA_LIST && obj.type != JINJA_STR) ||
        (key.type != JINJA_INT && key.type != JINJA_BOOL))
        return GLIM_OK;   /* Jinja2 turns the TypeError into an undefined */
    int64_t i = key.type == JINJA_BOOL ? key.u.b : key.u.i;
    if (obj.type == JINJA_LIST) {
        int64_t len = (int64_t)obj.u.l->n;
        if (i < 0)
            i += len;
        if (i >= 0 && i < len)
            *out = obj.u.l->v[i];
        return GLIM_OK;
    }
    struct jlist *chars;
    if (jinja_iter_list(env, n, obj, &chars))
        return ECODE(env);
    if (i < 0)
        i += (int64_t)chars->n;
    if (i >= 0 && i < (int64_t)chars->n)
        *out = chars->v[i];
    return GLIM_OK;
}

int jinja_iter_list(struct jenv *env, const struct jnode *n, struct jinja_value v, struct jlist **out)
{
    struct jinja_value l;
    switch (v.type) {
    case JINJA_LIST: *out = v.u.l; return GLIM_OK;
    case JINJA_UNDEFINED:
    case JINJA_DICT:
    case JINJA_STR:
        if (jinja_list_new(env->a, &l))
            return OOM(env, n);
        *out = l.u.l;
        if (v.type == JINJA_DICT) {
            for (size_t i = 0; i < v.u.d->n; i++)
                if (jinja_list_push(env->a, l, v.u.d->k[i]))
                    return OOM(env, n);
        } else if (v.type == JINJA_STR) {
            const char *s = v.u.s->s;
            size_t len = v.u.s->len;
            for (size_t i = 0, j; i < len; i = j) {
                struct jinja_value c;
                j = jinja_utf8_next(s, len, i);
                if (jinja_str(env->a, s + i, j - i, &c) || jinja_list_push(env->a, l, c))
                    return OOM(env, n);
            }
        }
        return GLIM_OK;
    default:
        return jinja_fail_at(env, n, GLIM_EINVAL, "'%s' object is not iterable", jinja_type_name(v));
    }
}

/* ---- string methods ---- */

static bool in_set(char c, const struct jinja_value chars)
{
    if (chars.type != JINJA_STR)
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    return memchr(chars.u.s->s, c, chars.u.s->len) != NULL;
}

static int str_strip(struct jenv *env, const struct jnode *n, const struct jstr *s,
                     struct jinja_value chars, bool left, bool right, struct jinja_value *out)
{
    if (chars.type != JINJA_STR && chars.type != JINJA_NONE && chars.type != JINJA_UNDEFINED)
        return jinja_fail_at(env, n, GLIM_EINVAL, "strip arg must be None or str");
    size_t b = 0, e = s->len;
    while (left && b < e && in_set(s->s[b], chars))
        b++;
    while (right && e > b && in_set(s->s[e - 1], chars))
        e--;
    return jinja_str(env->a, s->s + b, e - b, out) ? OOM(env, n) : GLIM_OK;
}

static int push_str(struct jenv *env, const struct jnode *n, struct jinja_value list, const char *s, size_t len)
{
    struct jinja_value v;
    if (jinja_str(env->a, s, len, &v) || jinja_list_push(env->a, list, v))
        return OOM(env, n);
    return GLIM_OK;
}

static int str_split(struct jenv *env, const struct jnode *n, const struct jstr *s,
                     struct jinja_value sep, struct jinja_value maxv, struct jinja_value *out)
{
    int64_t max = maxv.type == JINJA_INT ? maxv.u.i : -1;
    if (jinja_list_new(env->a, out))
        return OOM(env, n);
    struct jinja_value none = jinja_none();
    size_t i = 0, len = s->len;
    if (sep.type != JINJA_STR) {   /* runs of whitespace, no empty strings */
        for (;;) {
            while (i < len && in_set(s->s[i], none))
                i++;
            if (i >= len)
                return GLIM_OK;
            size_t j = i;
            if (max-- == 0)
                j = len;
            while (j < len && !in_set(s->s[j], none))
                j++;
            if (j == len) {
                while (j > i && in_set(s->s[j - 1], none))
                    j--;
            }
            if (push_str(env, n, *out, s->s + i, j - i))
                return GLIM_ENOMEM;
            i = j;
        }
    }
    const struct jstr *p = sep.u.s;
    if (p->len == 0)
        return jinja_fail_at(env, n, GLIM_EINVAL, "empty separator");
    for (;;) {
        const char *hit = max != 0 ? jinja_find(s->s + i, len - i, p->s, p->len) : NULL;
        if (!hit)
            return push_str(env, n, *out, s->s + i, len - i);
        if (push_str(env, n, *out, s->s + i, (size_t)(hit - s->s) - i))
            return GLIM_ENOMEM;
        i = (size_t)(hit - s->s) + p->len;
        max--;
    }
}

static bool affix(const struct jstr *s, const struct jstr *a, bool suffix)
{
    if (a->len > s->len)
        return false;
    return !memcmp(s->s + (suffix ? s->len - a->len : 0), a->s, a->len);
}

static int str_affix(struct jenv *env, const struct jnode *n, const struct jstr *s,
                     struct jinja_value arg, bool suffix, struct jinja_value *out)
{
    bool r = false;
    if (arg.type == JINJA_STR) {
        r = affix(s, arg.u.s, suffix);
    } else if (arg.type == JINJA_LIST) {
        for (size_t i = 0; i < arg.u.l->n && !r; i++)
            if (arg.u.l->v[i].type == JINJA_STR)
                r = affix(s, arg.u.l->v[i].u.s, suffix);
    } else {
        return jinja_fail_at(env, n, GLIM_EINVAL, "%s arg must be str or a tuple of str",
                             suffix ? "endswith" : "startswith");
    }
    *out = jinja_bool(r);
    return GLIM_OK;
}

/* Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic: what
 * chat text mostly holds. Other scripts pass through unchanged. */
static uint32_t case_map(uint32_t c, bool up)
{
    if (c < 0x80)
        return up ? (uint32_t)toupper((int)c) : (uint32_t)tolower((int)c);
    if (up) {
        if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) ||
            (c >= 0x430 && c <= 0x44F))
            return c - 0x20;
        if (c == 0x3C2)
            return 0x3A3;
        if (c >= 0x450 && c <= 0x45F)
            return c - 0x50;
        if (c == 0xFF)
            return 0x178;
        if (c >= 0x100 && c <= 0x17F && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
            bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
            if (odd_lower ? (c & 1) == 0 : (c & 1) == 1)
                return c - 1;
        }
        return c;
    }
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
        (c >= 0x410 && c <= 0x42F))
        return c + 0x20;
    if (c >= 0x400 && c <= 0x40F)
        return c + 0x50;
    if (c == 0x178)
        return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x138 && c != 0x149 && c != 0x178 && c != 0x17F) {
        bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper ? (c & 1) == 1 : (c & 1) == 0)
            return c + 1;
    }
    return c;
}

static uint32_t utf8_decode(const char *s, size_t len, size_t i, size_t next)
{
    unsigned char b = (unsigned char)s[i];
    size_t n = next - i;
    if (n == 1)
        return b;
    uint32_t c = b & (0x7F >> n);
    for (size_t k = 1; k < n && i + k < len; k++)
        c = c << 6 | ((unsigned char)s[i + k] & 0x3F);
    return c;
}

/* upper (0) / lower (1) / title (2) / capitalize (3) */
static int str_case(struct jenv *env, const struct jnode *n, const struct jstr *s, int mode,
                    struct jinja_value *out)
{
    struct strbuf sb;
    strbuf_init(&sb);
    bool prev_cased = false;
    int rc = GLIM_OK;
    for (size_t i = 0, j; i < s->len && !rc; i = j) {
        j = jinja_utf8_next(s->s, s->len, i);
        uint32_t c = utf8_decode(s->s, s->len, i, j);
        bool up = mode == 0 || (mode == 2 && !prev_cased) || (mode == 3 && i == 0);
        uint32_t m = case_map(c, up);
        prev_cased = case_map(c, true) != case_map(c, false) || c == 0xDF;
        if (j - i == 1 && c >= 0x80)
            rc = strbuf_append(&sb, s->s + i, 1);   /* invalid byte: keep it */
        else if (up && c == 0xDF)
            rc = strbuf_append(&sb, mode == 0 ? "SS" : "Ss", 2);   /* Python: 'ß'.upper() == 'SS' */
        else
            rc = jinja_utf8_put(&sb, m);
    }
    if (!rc)
        rc = jinja_str(env->a, strbuf_cstr(&sb), sb.len, out);
    strbuf_clear(&sb);
    return rc ? OOM(env, n) : GLIM_OK;
}

int jinja_str_replace(struct jenv *env, const struct jnode *n, const struct jstr *s,
                      struct jinja_value from, struct jinja_value to, int64_t count,
                      struct jinja_value *out)
{
    if (from.type != JINJA_STR || to.type != JINJA_STR)
        return jinja_fail_at(env, n, GLIM_EINVAL, "replace() arguments must be str");
    const struct jstr *a = from.u.s, *b = to.u.s;
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = GLIM_OK;
    size_t i = 0;
    while (i <= s->len && !rc) {
        const char *hit = count != 0 ? jinja_find(s->s + i, s->len - i, a->s, a->len) : NULL;
        size_t at = hit ? (size_t)(hit - s->s) : s->len;
        rc = strbuf_append(&sb, s->s + i, at - i);
        if (!hit || rc)
            break;
        rc = strbuf_append(&sb, b->s, b->len);
        count--;
        i = at + a->len;
        if (a->len == 0) {   /* Python inserts between every character */
            if (i >= s->len)
                break;
            rc = rc ? rc : strbuf_append(&sb, s->s + i, 1);
            i++;
        }
        if (!rc && sb.len > env->o.max_output_bytes)
            rc = GLIM_ERANGE;
    }
    if (!rc)
        rc = jinja_str(env->a, strbuf_cstr(&sb), sb.len, out);
    strbuf_clear(&sb);
    return rc ? OOM(env, n) : GLIM_OK;
}

static int str_find(const struct jstr *s, const struct jstr *sub, int64_t *count)
{
    int64_t first = -1;
    *count = 0;
    for (size_t i = 0; i <= s->len;) {
        const char *hit = jinja_find(s->s + i, s->len - i, sub->s, sub->len);
        if (!hit)
            break;
        i = (size_t)(hit - s->s);
        if (first < 0)
            first = (int64_t)jinja_utf8_count(s->s, i);
        (*count)++;
        i += sub->len ? sub->len : 1;
    }
    return (int)GLIM_MIN(first, INT32_MAX);
}

static int str_method(struct jenv *env, const struct jnode *n, const struct jstr *s,
                      const struct jstr *m, const struct jargs *a, bool *handled, struct jinja_value *out)
{
    struct jinja_value a0 = jinja_arg(a, 0, NULL), a1 = jinja_arg(a, 1, NULL);
    *handled = true;
    if (name_is(m, "strip") || name_is(m, "lstrip") || name_is(m, "rstrip"))
        return str_strip(env, n, s, jinja_arg(a, 0, "chars"), m->s[0] != 'r', m->s[0] != 'l', out);
    if (name_is(m, "split"))
        return str_split(env, n, s, jinja_arg(a, 0, "sep"), jinja_arg(a, 1, "maxsplit"), out);
    if (name_is(m, "startswith") || name_is(m, "endswith"))
        return str_affix(env, n, s, a0, m->s[0] == 'e', out);
    if (name_is(m, "upper") || name_is(m, "lower") || name_is(m, "title") || name_is(m, "capitalize"))
        return str_case(env, n, s, m->s[0] == 'u' ? 0 : m->s[0] == 'l' ? 1 : m->s[0] == 't' ? 2 : 3, out);
    if (name_is(m, "replace"))
        return jinja_str_replace(env, n, s, a0, a1, a->n_pos > 2 && a->pos[2].type == JINJA_INT ? a->pos[2].u.i : -1, out);
    if (name_is(m, "find") || name_is(m, "count")) {
        int64_t cnt;
        if (a0.type != JINJA_STR)
            return jinja_fail_at(env, n, GLIM_EINVAL, "%s() argument must be str", m->s);
        int first = str_find(s, a0.u.s, &cnt);
        *out = jinja_int(m->s[0] == 'f' ? first : cnt);
        return GLIM_OK;
    }
    if (name_is(m, "join")) {
        struct jlist *items;
        struct strbuf sb;
        if (jinja_iter_list(env, n, a0, &items))
            return ECODE(env);
        strbuf_init(&sb);
        int rc = GLIM_OK;
        for (size_t i = 0; i < items->n && !rc; i++) {
            if (items->v[i].type != JINJA_STR)
                rc = jinja_fail_at(env, n, GLIM_EINVAL, "sequence item %zu: expected str instance, %s found",
                                   i, jinja_type_name(items->v[i]));
            else if ((i && strbuf_append(&sb, s->s, s->len)) ||
                     strbuf_append(&sb, items->v[i].u.s->s, items->v[i].u.s->len))
                rc = OOM(env, n);
            else if (sb.len > env->o.max_output_bytes)
                rc = jinja_fail_at(env, n, GLIM_ERANGE, "join result exceeds %zu bytes", env->o.max_output_bytes);
        }
        if (!rc && jinja_str(env->a, strbuf_cstr(&sb), sb.len, out))
            rc = OOM(env, n);
        strbuf_clear(&sb);
        return rc;
    }
    if (name_is(m, "isdigit") || name_is(m, "isspace") || name_is(m, "isalpha") || name_is(m, "isalnum")) {
        bool r = s->len > 0;
        for (size_t i = 0; i < s->len && r; i++) {
            unsigned char c = (unsigned char)s->s[i];
            r = m->s[2] == 'd' ? isdigit(c) : m->s[2] == 's' ? isspace(c) : m->s[4] == 'a' && m->s[5] == '\0' ? isalpha(c) : isalnum(c);
        }
        *out = jinja_bool(r);
        return GLIM_OK;
    }
    *handled = false;
    return GLIM_OK;
}

static int dict_method(struct jenv *env, const struct jnode *n, struct jinja_value d,
                       const struct jstr *m, const struct jargs *a, bool *handled, struct jinja_value *out)
{
    *handled = true;
    if (name_is(m, "get")) {
        int at = jinja_dict_find(d.u.d, jinja_arg(a, 0, NULL));
        struct jinja_value def = jinja_arg(a, 1, NULL);
        *out = at >= 0 ? d.u.d->v[at] : def.type == JINJA_UNDEFINED ? jinja_none() : def;
        return GLIM_OK;
    }
    int which = name_is(m, "items") ? 0 : name_is(m, "keys") ? 1 : name_is(m, "values") ? 2 : -1;
    if (which < 0) {
        *handled = false;
        if (name_is(m, "update") || name_is(m, "pop") || name_is(m, "setdefault") || name_is(m, "clear"))
            return jinja_fail_at(env, n, GLIM_EINVAL, "access to attribute '%s' of 'dict' object is unsafe", m->s);
        return GLIM_OK;
    }
    if (jinja_list_new(env->a, out))
        return OOM(env, n);
    for (size_t i = 0; i < d.u.d->n; i++) {
        struct jinja_value item = which == 1 ? d.u.d->k[i] : d.u.d->v[i];
        if (which == 0 && (jinja_list_new(env->a, &item) || jinja_list_push(env->a, item, d.u.d->k[i]) ||
                           jinja_list_push(env->a, item, d.u.d->v[i])))
            return OOM(env, n);
        if (which == 0)
            item.u.l->is_tuple = true;
        if (jinja_list_push(env->a, *out, item))
            return OOM(env, n);
    }
    return GLIM_OK;
}

int jinja_method_call(struct jenv *env, const struct jnode *n, struct jinja_value obj,
                      const struct jstr *name, const struct jargs *args, bool *handled,
                      struct jinja_value *out)
{
    *handled = false;
    if (obj.type == JINJA_STR)
        return str_method(env, n, obj.u.s, name, args, handled, out);
    if (obj.type == JINJA_DICT)
        return dict_method(env, n, obj, name, args, handled, out);
    if (obj.type == JINJA_LOOP && name_is(name, "cycle")) {
        const struct jloop *l = obj.u.p;
        *handled = true;
        *out = args->n_pos ? args->pos[l->idx % (size_t)args->n_pos] : jinja_undefined();
        return GLIM_OK;
    }
    if (obj.type == JINJA_LIST && (name_is(name, "append") || name_is(name, "pop") ||
                                   name_is(name, "extend") || name_is(name, "insert")))
        return jinja_fail_at(env, n, GLIM_EINVAL, "access to attribute '%s' of 'list' object is unsafe", name->s);
    return GLIM_OK;
}

/* ---- global functions ---- */

enum { FN_RANGE = 1, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME, FN_COUNT };
static const char *const FN_NAMES[FN_COUNT] = {
    [FN_RANGE] = "range", [FN_NAMESPACE] = "namespace", [FN_DICT] = "dict",
    [FN_RAISE] = "raise_exception", [FN_STRFTIME] = "strftime_now",
};
/* FUNC values point into this table; the index is the function. */
static const char FN_IDS[FN_COUNT];

struct jinja_value jinja_builtin(const struct jstr *name)
{
    for (int k = 1; k < FN_COUNT; k++)
        if (name_is(name, FN_NAMES[k]))
            return (struct jinja_value){JINJA_FUNC, {.p = &FN_IDS[k]}};
    return jinja_undefined();
}

static int fn_range(struct jenv *env, const struct jnode *n, const struct jargs *a, struct jinja_value *out)
{
    int64_t v[3] = {0, 0, 1};
    if (a->n_pos < 1 || a->n_pos > 3)
        return jinja_fail_at(env, n, GLIM_EINVAL, "range expected 1 to 3 arguments, got %d", a->n_pos);
    for (int k = 0; k < a->n_pos; k++) {
        if (a->pos[k].type != JINJA_INT && a->pos[k].type != JINJA_BOOL)
            return jinja_fail_at(env, n, GLIM_EINVAL, "range() arguments must be integers, not %s",
                                 jinja_type_name(a->pos[k]));
        v[a->n_pos == 1 ? 1 : k] = a->pos[k].type == JINJA_BOOL ? a->pos[k].u.b : a->pos[k].u.i;
    }
    if (v[2] == 0)
        return jinja_fail_at(env, n, GLIM_EINVAL, "range() arg 3 must not be zero");
    double count = ((double)v[1] - (double)v[0]) / (double)v[2];
    if (count > 10000000)   /* HF's sandbox caps range at 100000; we allow more but bound it */
        return jinja_fail_at(env, n, GLIM_ERANGE, "range too big");
    if (jinja_list_new(env->a, out))
        return OOM(env, n);
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
        if (jinja_list_push(env->a, *out, jinja_int(i)))
            return OOM(env, n);
        if ((v[2] > 0 && i > INT64_MAX - v[2]) || (v[2] < 0 && i < INT64_MIN - v[2]))
            break;
    }
    return GLIM_OK;
}

/* namespace(...) and dict(...): a dict from an optional mapping plus keywords */
static int fn_dict(struct jenv *env, const struct jnode *n, const struct jargs *a, bool is_ns,
                   struct jinja_value *out)
{
    if (jinja_dict_new(env->a, out))
        return OOM(env, n);
    out->u.d->is_ns = is_ns;
    if (a->n_pos > 1 || (a->n_pos == 1 && a->pos[0].type != JINJA_DICT))
        return jinja_fail_at(env, n, GLIM_EINVAL, "%s() takes one mapping and keywords", is_ns ? "namespace" : "dict");
    if (a->n_pos == 1)
        for (size_t i = 0; i < a->pos[0].u.d->n; i++)
            if (jinja_dict_set(env->a, *out, a->pos[0].u.d->k[i], a->pos[0].u.d->v[i]))
                return OOM(env, n);
    for (int k = 0; k < a->n_kw; k++)
        if (jinja_dict_set(env->a, *out, jinja_strv(a->kw_name[k]), a->kw[k]))
            return OOM(env, n);
    return GLIM_OK;
}

static int fn_strftime(struct jenv *env, const struct jnode *n, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value fmt = jinja_arg(a, 0, NULL);
    if (fmt.type != JINJA_STR)
        return jinja_fail_at(env, n, GLIM_EINVAL, "strftime_now() needs a format string");
    time_t now = env->o.clock ? env->o.clock(env->o.clock_ud) : time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm))
        return jinja_fail_at(env, n, GLIM_EINVAL, "strftime_now(): bad clock value");
    char buf[256];
    size_t len = fmt.u.s->len < 100 ? strftime(buf, sizeof buf, fmt.u.s->s, &tm) : 0;
    if (len == 0 && fmt.u.s->len)
        return jinja_fail_at(env, n, GLIM_EINVAL, "strftime_now(): format too long or empty result");
    return jinja_str(env->a, buf, len, out) ? OOM(env, n) : GLIM_OK;
}

int jinja_builtin_call(struct jenv *env, const struct jnode *n, struct jinja_value fn,
                       const struct jargs *args, struct jinja_value *out)
{
    int id = (int)((const char *)fn.u.p - FN_IDS);
    switch (id) {
    case FN_RANGE: return fn_range(env, n, args, out);
    case FN_NAMESPACE: return fn_dict(env, n, args, true, out);
    case FN_DICT: return fn_dict(env, n, args, false, out);
    case FN_STRFTIME: return fn_strftime(env, n, args, out);
    case FN_RAISE: {
        struct jinja_value msg = jinja_arg(args, 0, NULL);
        if (jinja_stringify(env->a, msg, &msg, env->err))
            return ECODE(env);
        /* the template's own words, unprefixed: callers show them to the user */
        return glim_fail(env->err, GLIM_EINVAL, "%s", msg.u.s->s);
    }
    default: return jinja_fail_at(env, n, GLIM_EINVAL, "not callable");
    }
}
