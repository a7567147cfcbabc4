/*
 * jinja_filter.c — the filters chat templates use, by Jinja2's definitions (tojson is
 * HF's: json.dumps with ensure_ascii=False, optional indent and sort_keys). An unknown
 * filter is an error naming it, at the line and column where it is used.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_int.h"

#define OOM(c) jinja_fail_at((c)->env, (c)->n, GLIM_ENOMEM, "out of memory (template arena budget)")
#define ECODE(c) ((c)->env->err ? (c)->env->err->code : GLIM_EINVAL)

struct fctx {
    struct jenv *env;
    struct jframe *f;
    const struct jnode *n;
};

typedef int (*filter_fn)(const struct fctx *c, struct jinja_value in, const struct jargs *a,
                         struct jinja_value *out);

static int apply_named(const struct fctx *c, const char *name, size_t name_len,
                       struct jinja_value in, const struct jargs *a, struct jinja_value *out);

static int want_str(const struct fctx *c, struct jinja_value in, struct jinja_value *out)
{
    if (jinja_stringify(c->env->a, in, out, c->env->err))
        return ECODE(c);
    return GLIM_OK;
}

static bool opt_true(const struct jargs *a, int i, const char *name)
{
    return jinja_truthy(jinja_arg(a, i, name));
}

static int f_length(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    if (in.type != JINJA_STR && in.type != JINJA_LIST && in.type != JINJA_DICT && in.type != JINJA_UNDEFINED)
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "object of type '%s' has no len()", jinja_type_name(in));
    *out = jinja_int((int64_t)jinja_len(in));
    return GLIM_OK;
}

static int f_string(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return want_str(c, in, out);
}

static int f_trim(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value chars = jinja_arg(a, 0, "chars");
    if (want_str(c, in, &in))
        return ECODE(c);
    size_t b = 0, e = in.u.s->len;
    const char *s = in.u.s->s;
    const char *set = chars.type == JINJA_STR ? chars.u.s->s : " \t\n\r\f\v";
    size_t set_len = chars.type == JINJA_STR ? chars.u.s->len : 6;
    while (b < e && memchr(set, s[b], set_len))
        b++;
    while (e > b && memchr(set, s[e - 1], set_len))
        e--;
    return jinja_str(c->env->a, s + b, e - b, out) ? OOM(c) : GLIM_OK;
}

static int f_tojson(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    /* HF: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    struct jinja_value ind = jinja_arg(a, 1, "indent"), seps = jinja_arg(a, 2, "separators");
    struct jinja_json_opts o = {
        .indent = ind.type == JINJA_INT ? (int)GLIM_MIN(GLIM_MAX(ind.u.i, 0), 64) : -1,
        .sort_keys = opt_true(a, 3, "sort_keys"),
        .ensure_ascii = opt_true(a, 0, "ensure_ascii"),
    };
    if (seps.type == JINJA_LIST && seps.u.l->n == 2 && seps.u.l->v[0].type == JINJA_STR &&
        seps.u.l->v[1].type == JINJA_STR)
        o.item_sep = seps.u.l->v[0].u.s->s, o.key_sep = seps.u.l->v[1].u.s->s;
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = jinja_to_json(&sb, in, &o, c->env->err);
    if (rc)
        rc = jinja_fail_at(c->env, c->n, rc, "%s", c->env->err ? c->env->err->msg : "tojson failed");
    else if (jinja_str(c->env->a, strbuf_cstr(&sb), sb.len, out))
        rc = OOM(c);
    strbuf_clear(&sb);
    return rc;
}

static int f_list(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jlist *items;
    if (jinja_iter_list(c->env, c->n, in, &items) || jinja_list_new(c->env->a, out))
        return ECODE(c);
    for (size_t i = 0; i < items->n; i++)
        if (jinja_list_push(c->env->a, *out, items->v[i]))
            return OOM(c);
    return GLIM_OK;
}

static int f_first_last(const struct fctx *c, struct jinja_value in, bool last, struct jinja_value *out)
{
    struct jlist *items;
    if (jinja_iter_list(c->env, c->n, in, &items))
        return ECODE(c);
    *out = items->n ? items->v[last ? items->n - 1 : 0] : jinja_undefined();
    return GLIM_OK;
}
static int f_first(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return f_first_last(c, in, false, out);
}
static int f_last(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return f_first_last(c, in, true, out);
}

/* attribute="a.b" or an int index, as Jinja2's make_attrgetter */
static int get_path(const struct fctx *c, struct jinja_value v, struct jinja_value attr, struct jinja_value *out)
{
    if (attr.type == JINJA_INT)
        return jinja_getitem(c->env, c->n, v, attr, out);
    if (attr.type != JINJA_STR)
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "attribute must be a string");
    const char *p = attr.u.s->s, *end = p + attr.u.s->len;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot)
            dot = end;
        struct jinja_value key;
        if (jinja_str(c->env->a, p, (size_t)(dot - p), &key))
            return OOM(c);
        if (jinja_getitem(c->env, c->n, v, key, &v))
            return ECODE(c);
        p = dot + 1;
    }
    *out = v;
    return GLIM_OK;
}

static int f_join(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value sep = jinja_arg(a, 0, "d"), attr = jinja_arg(a, 1, "attribute");
    struct jlist *items;
    if (jinja_iter_list(c->env, c->n, in, &items) || (sep.type != JINJA_UNDEFINED && want_str(c, sep, &sep)))
        return ECODE(c);
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = GLIM_OK;
    for (size_t i = 0; i < items->n && !rc; i++) {
        struct jinja_value v = items->v[i];
        if (attr.type != JINJA_UNDEFINED && get_path(c, v, attr, &v))
            rc = ECODE(c);
        if (!rc && i && sep.type == JINJA_STR && strbuf_append(&sb, sep.u.s->s, sep.u.s->len))
            rc = OOM(c);
        if (!rc && jinja_to_str(&sb, v, c->env->err))
            rc = ECODE(c);
        if (!rc && sb.len > c->env->o.max_output_bytes)
            rc = jinja_fail_at(c->env, c->n, GLIM_ERANGE, "join result exceeds %zu bytes", c->env->o.max_output_bytes);
    }
    if (!rc && jinja_str(c->env->a, strbuf_cstr(&sb), sb.len, out))
        rc = OOM(c);
    strbuf_clear(&sb);
    return rc;
}

static int f_default(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value def = jinja_arg(a, 0, "default_value");
    bool boolean = opt_true(a, 1, "boolean");
    if (in.type == JINJA_UNDEFINED || (boolean && !jinja_truthy(in))) {
        if (def.type == JINJA_UNDEFINED)
            return jinja_cstr(c->env->a, "", out) ? OOM(c) : GLIM_OK;
        *out = def;
    } else {
        *out = in;
    }
    return GLIM_OK;
}

static int shift_args(const struct jargs *a, struct jargs *rest)
{
    *rest = *a;
    rest->n_pos = a->n_pos > 0 ? a->n_pos - 1 : 0;
    for (int k = 0; k < rest->n_pos; k++)
        rest->pos[k] = a->pos[k + 1];
    return GLIM_OK;
}

static int f_map(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value attr = jinja_arg(a, -1, "attribute"), def = jinja_arg(a, -1, "default");
    struct jinja_value fname = jinja_arg(a, 0, NULL);
    struct jlist *items;
    struct jargs rest;
    if (attr.type == JINJA_UNDEFINED && fname.type != JINJA_STR)
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "map needs a filter name or attribute=");
    if (jinja_iter_list(c->env, c->n, in, &items) || jinja_list_new(c->env->a, out))
        return ECODE(c);
    shift_args(a, &rest);
    rest.n_kw = 0;
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value v = items->v[i];
        if (attr.type != JINJA_UNDEFINED) {
            if (get_path(c, v, attr, &v))
                return ECODE(c);
            if (v.type == JINJA_UNDEFINED && def.type != JINJA_UNDEFINED)
                v = def;
        } else if (apply_named(c, fname.u.s->s, fname.u.s->len, v, &rest, &v)) {
            return ECODE(c);
        }
        if (jinja_list_push(c->env->a, *out, v))
            return OOM(c);
    }
    return GLIM_OK;
}

/* select / reject / selectattr / rejectattr */
static int select_common(const struct fctx *c, struct jinja_value in, const struct jargs *a,
                         bool by_attr, bool keep_if, struct jinja_value *out)
{
    struct jlist *items;
    struct jargs rest = *a;
    struct jinja_value attr = by_attr ? jinja_arg(a, 0, NULL) : jinja_undefined();
    if (by_attr)
        shift_args(a, &rest);
    struct jinja_value test = jinja_arg(&rest, 0, NULL);
    struct jargs targs;
    shift_args(&rest, &targs);
    if (test.type != JINJA_UNDEFINED && test.type != JINJA_STR)
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "test name must be a string");
    if (jinja_iter_list(c->env, c->n, in, &items) || jinja_list_new(c->env->a, out))
        return ECODE(c);
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value v = items->v[i];
        bool r;
        if (by_attr && get_path(c, v, attr, &v))
            return ECODE(c);
        if (test.type == JINJA_UNDEFINED)
            r = jinja_truthy(v);
        else if (jinja_test_named(c->env, c->n, test.u.s->s, test.u.s->len, v, &targs, &r))
            return ECODE(c);
        if (r == keep_if && jinja_list_push(c->env->a, *out, items->v[i]))
            return OOM(c);
    }
    return GLIM_OK;
}
static int f_select(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return select_common(c, in, a, false, true, out);
}
static int f_reject(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return select_common(c, in, a, false, false, out);
}
static int f_selectattr(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return select_common(c, in, a, true, true, out);
}
static int f_rejectattr(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return select_common(c, in, a, true, false, out);
}

static int f_items(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    if (jinja_list_new(c->env->a, out))
        return OOM(c);
    if (in.type == JINJA_UNDEFINED)
        return GLIM_OK;
    if (in.type != JINJA_DICT)
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "items filter needs a mapping, got %s", jinja_type_name(in));
    for (size_t i = 0; i < in.u.d->n; i++) {
        struct jinja_value pair;
        if (jinja_list_new(c->env->a, &pair) || jinja_list_push(c->env->a, pair, in.u.d->k[i]) ||
            jinja_list_push(c->env->a, pair, in.u.d->v[i]) || jinja_list_push(c->env->a, *out, pair))
            return OOM(c);
        pair.u.l->is_tuple = true;
    }
    return GLIM_OK;
}

/* Sort key: lower-cased copy of strings unless case-sensitive. */
static int sort_key(const struct fctx *c, struct jinja_value v, bool cs, struct jinja_value *out)
{
    if (cs || v.type != JINJA_STR) {
        *out = v;
        return GLIM_OK;
    }
    if (jinja_str(c->env->a, v.u.s->s, v.u.s->len, out))
        return OOM(c);
    for (size_t i = 0; i < out->u.s->len; i++)
        out->u.s->s[i] = (char)tolower((unsigned char)out->u.s->s[i]);
    return GLIM_OK;
}

static int key_less(const struct fctx *c, struct jinja_value x, struct jinja_value y, bool *lt)
{
    if (jinja_step(c->env, c->n))
        return ECODE(c);
    if (jinja_less(x, y, lt, c->env->err))
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "%s", c->env->err ? c->env->err->msg : "unorderable");
    return GLIM_OK;
}

/* Stable bottom-up merge sort of items by keys, like Python's sorted(); every
 * comparison costs a step, so sorting is bounded like loops are. */
static int sort_by(const struct fctx *c, struct jinja_value *items, struct jinja_value *keys, size_t n,
                   bool reverse)
{
    if (n < 2)
        return GLIM_OK;
    struct jinja_value *ti = jinja_alloc(c->env->a, n * sizeof *ti), *tk = jinja_alloc(c->env->a, n * sizeof *tk);
    if (!ti || !tk)
        return OOM(c);
    for (size_t w = 1; w < n; w = w > n / 2 ? n : w * 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = GLIM_MIN(lo + w, n), hi = GLIM_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool take_j;
                if (key_less(c, reverse ? keys[i] : keys[j], reverse ? keys[j] : keys[i], &take_j))
                    return ECODE(c);
                size_t from = take_j ? j++ : i++;
                ti[k] = items[from], tk[k++] = keys[from];
            }
            for (; i < mid; i++, k++)
                ti[k] = items[i], tk[k] = keys[i];
            for (; j < hi; j++, k++)
                ti[k] = items[j], tk[k] = keys[j];
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
    }
    return GLIM_OK;
}

static int sorted_copy(const struct fctx *c, struct jlist *src, struct jinja_value attr, int pair_idx,
                       bool cs, bool reverse, struct jinja_value *out)
{
    if (jinja_list_new(c->env->a, out))
        return OOM(c);
    struct jinja_value keys;
    if (jinja_list_new(c->env->a, &keys))
        return OOM(c);
    for (size_t i = 0; i < src->n; i++) {
        struct jinja_value k = src->v[i];
        if (pair_idx >= 0)
            k = k.u.l->v[pair_idx];
        else if (attr.type != JINJA_UNDEFINED && get_path(c, k, attr, &k))
            return ECODE(c);
        if (sort_key(c, k, cs, &k) || jinja_list_push(c->env->a, *out, src->v[i]) ||
            jinja_list_push(c->env->a, keys, k))
            return OOM(c);
    }
    return sort_by(c, out->u.l->v, keys.u.l->v, src->n, reverse);
}

static int f_dictsort(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value pairs, by = jinja_arg(a, 1, "by");
    if (f_items(c, in, a, &pairs))
        return ECODE(c);
    bool by_value = by.type == JINJA_STR && !strcmp(by.u.s->s, "value");
    return sorted_copy(c, pairs.u.l, jinja_undefined(), by_value ? 1 : 0, opt_true(a, 0, "case_sensitive"),
                       opt_true(a, 2, "reverse"), out);
}

static int f_sort(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jlist *items;
    if (jinja_iter_list(c->env, c->n, in, &items))
        return ECODE(c);
    return sorted_copy(c, items, jinja_arg(a, 2, "attribute"), -1, opt_true(a, 1, "case_sensitive"),
                       opt_true(a, 0, "reverse"), out);
}

static int f_unique(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jlist *items;
    struct jinja_value attr = jinja_arg(a, 1, "attribute"), seen;
    bool cs = opt_true(a, 0, "case_sensitive");
    if (jinja_iter_list(c->env, c->n, in, &items) || jinja_list_new(c->env->a, out) ||
        jinja_list_new(c->env->a, &seen))
        return ECODE(c);
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value k = items->v[i];
        bool dup = false;
        if ((attr.type != JINJA_UNDEFINED && get_path(c, k, attr, &k)) || sort_key(c, k, cs, &k))
            return ECODE(c);
        for (size_t j = 0; j < seen.u.l->n && !dup; j++) {
            if (jinja_step(c->env, c->n))
                return ECODE(c);
            dup = jinja_equal(seen.u.l->v[j], k);
        }
        if (!dup && (jinja_list_push(c->env->a, seen, k) || jinja_list_push(c->env->a, *out, items->v[i])))
            return OOM(c);
    }
    return GLIM_OK;
}

static int f_int(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value def = jinja_arg(a, 0, "default");
    *out = def.type == JINJA_UNDEFINED ? jinja_int(0) : def;
    if (in.type == JINJA_INT || in.type == JINJA_BOOL)
        *out = jinja_int(in.type == JINJA_BOOL ? in.u.b : in.u.i);
    else if (in.type == JINJA_FLOAT && isfinite(in.u.f) && fabs(in.u.f) < 9.2e18)
        *out = jinja_int((int64_t)in.u.f);
    else if (in.type == JINJA_STR) {
        char *end;
        long long v = strtoll(in.u.s->s, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (end != in.u.s->s && *end == '\0')
            *out = jinja_int(v);
        else {
            double d = strtod(in.u.s->s, &end);
            while (isspace((unsigned char)*end))
                end++;
            if (end != in.u.s->s && *end == '\0' && isfinite(d) && fabs(d) < 9.2e18)
                *out = jinja_int((int64_t)d);
        }
    }
    return GLIM_OK;
}

static int f_float(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value def = jinja_arg(a, 0, "default");
    *out = def.type == JINJA_UNDEFINED ? jinja_float(0.0) : def;
    if (jinja_is_number(in))
        *out = jinja_float(jinja_num(in));
    else if (in.type == JINJA_STR) {
        char *end;
        double d = strtod(in.u.s->s, &end);
        while (isspace((unsigned char)*end))
            end++;
        if (end != in.u.s->s && *end == '\0')
            *out = jinja_float(d);
    }
    return GLIM_OK;
}

static int f_abs(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    if (in.type == JINJA_FLOAT)
        *out = jinja_float(fabs(in.u.f));
    else if ((in.type == JINJA_INT && in.u.i != INT64_MIN) || in.type == JINJA_BOOL)
        *out = jinja_int(in.type == JINJA_BOOL ? in.u.b : llabs(in.u.i));
    else
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "bad operand type for abs(): '%s'", jinja_type_name(in));
    return GLIM_OK;
}

static int f_round(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value pv = jinja_arg(a, 0, "precision"), mv = jinja_arg(a, 1, "method");
    int64_t prec = pv.type == JINJA_INT ? GLIM_MAX(GLIM_MIN(pv.u.i, 15), -15) : 0;
    if (!jinja_is_number(in))
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "round needs a number, got %s", jinja_type_name(in));
    double x = jinja_num(in), scale = pow(10.0, (double)prec), y = x * scale;
    const char *m = mv.type == JINJA_STR ? mv.u.s->s : "common";
    if (!strcmp(m, "floor"))
        y = floor(y);
    else if (!strcmp(m, "ceil"))
        y = ceil(y);
    else
        y = nearbyint(y);   /* Python's round(): half to even */
    *out = jinja_float(y / scale);
    return GLIM_OK;
}

static int case_filter(const struct fctx *c, struct jinja_value in, const char *method, struct jinja_value *out)
{
    struct jargs none = {0};
    bool handled;
    struct jstr *m = jinja_jstr(c->env->a, method, strlen(method));
    if (!m || want_str(c, in, &in))
        return m ? ECODE(c) : OOM(c);
    return jinja_method_call(c->env, c->n, in, m, &none, &handled, out);
}
static int f_upper(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return case_filter(c, in, "upper", out);
}
static int f_lower(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return case_filter(c, in, "lower", out);
}
static int f_title(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return case_filter(c, in, "title", out);
}
static int f_capitalize(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return case_filter(c, in, "capitalize", out);
}

static int f_replace(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value cnt = jinja_arg(a, 2, "count");
    if (want_str(c, in, &in))
        return ECODE(c);
    return jinja_str_replace(c->env, c->n, in.u.s, jinja_arg(a, 0, "old"), jinja_arg(a, 1, "new"),
                             cnt.type == JINJA_INT ? cnt.u.i : -1, out);
}

static int f_safe(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    *out = in;
    return GLIM_OK;
}

static int f_indent(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value w = jinja_arg(a, 0, "width");
    bool first = opt_true(a, 1, "first"), blank = opt_true(a, 2, "blank");
    struct jinja_value pad;
    if (w.type == JINJA_STR)
        pad = w;
    else if (jinja_str(c->env->a, "                                ", w.type == JINJA_INT ? (size_t)GLIM_MIN(GLIM_MAX(w.u.i, 0), 32) : 4, &pad))
        return OOM(c);
    if (want_str(c, in, &in))
        return ECODE(c);
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = GLIM_OK;
    const char *s = in.u.s->s, *end = s + in.u.s->len;
    for (bool is_first = true; s <= end && !rc; is_first = false) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        bool want = (!is_first || first) && (blank || le > s);
        if (want)
            rc = strbuf_append(&sb, pad.u.s->s, pad.u.s->len);
        rc = rc ? rc : strbuf_append(&sb, s, (size_t)(le - s) + (nl ? 1 : 0));
        if (!nl)
            break;
        s = nl + 1;
    }
    if (!rc)
        rc = jinja_str(c->env->a, strbuf_cstr(&sb), sb.len, out);
    strbuf_clear(&sb);
    return rc ? OOM(c) : GLIM_OK;
}

static int f_escape(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    if (want_str(c, in, &in))
        return ECODE(c);
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = GLIM_OK;
    for (size_t i = 0; i < in.u.s->len && !rc; i++) {
        char ch = in.u.s->s[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
        rc = e ? strbuf_puts(&sb, e) : strbuf_putc(&sb, ch);
    }
    if (!rc)
        rc = jinja_str(c->env->a, strbuf_cstr(&sb), sb.len, out);
    strbuf_clear(&sb);
    return rc ? OOM(c) : GLIM_OK;
}

static int f_reverse(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jlist *items;
    if (jinja_iter_list(c->env, c->n, in, &items))
        return ECODE(c);
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = in.type == JINJA_STR ? GLIM_OK : jinja_list_new(c->env->a, out);
    for (size_t i = items->n; i-- > 0 && !rc;)
        rc = in.type == JINJA_STR ? strbuf_append(&sb, items->v[i].u.s->s, items->v[i].u.s->len)
                                  : jinja_list_push(c->env->a, *out, items->v[i]);
    if (!rc && in.type == JINJA_STR)
        rc = jinja_str(c->env->a, strbuf_cstr(&sb), sb.len, out);
    strbuf_clear(&sb);
    return rc ? OOM(c) : GLIM_OK;
}

static int f_sum(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jlist *items;
    struct jinja_value attr = jinja_arg(a, 0, "attribute"), acc = jinja_arg(a, 1, "start");
    if (acc.type == JINJA_UNDEFINED)
        acc = jinja_int(0);
    if (jinja_iter_list(c->env, c->n, in, &items))
        return ECODE(c);
    for (size_t i = 0; i < items->n; i++) {
        struct jinja_value v = items->v[i];
        if ((attr.type != JINJA_UNDEFINED && get_path(c, v, attr, &v)) ||
            jinja_binop(c->env, c->n, OP_ADD, acc, v, &acc))
            return ECODE(c);
    }
    *out = acc;
    return GLIM_OK;
}

static int minmax(const struct fctx *c, struct jinja_value in, const struct jargs *a, bool is_max,
                  struct jinja_value *out)
{
    struct jlist *items;
    if (jinja_iter_list(c->env, c->n, in, &items))
        return ECODE(c);
    *out = jinja_undefined();
    for (size_t i = 0; i < items->n; i++) {
        bool lt = false;
        if (i && jinja_less(is_max ? *out : items->v[i], is_max ? items->v[i] : *out, &lt, c->env->err))
            return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "%s", c->env->err ? c->env->err->msg : "unorderable");
        if (i == 0 || lt)
            *out = items->v[i];
    }
    return GLIM_OK;
}
static int f_max(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return minmax(c, in, a, true, out);
}
static int f_min(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    return minmax(c, in, a, false, out);
}

static int f_attr(const struct fctx *c, struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    struct jinja_value name = jinja_arg(a, 0, NULL);
    if (name.type != JINJA_STR)
        return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "attr needs a name");
    return jinja_getattr(c->env, c->n, in, name.u.s, out);
}

static const struct { const char *name; filter_fn fn; } FILTERS[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"count", f_length},
    {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"indent", f_indent},
    {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
    {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum},
    {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique},
    {"upper", f_upper},
};

bool jinja_filter_known(const char *name, size_t len)
{
    for (size_t k = 0; k < sizeof FILTERS / sizeof FILTERS[0]; k++)
        if (strlen(FILTERS[k].name) == len && !memcmp(FILTERS[k].name, name, len))
            return true;
    return false;
}

static int apply_named(const struct fctx *c, const char *name, size_t name_len,
                       struct jinja_value in, const struct jargs *a, struct jinja_value *out)
{
    for (size_t k = 0; k < sizeof FILTERS / sizeof FILTERS[0]; k++)
        if (strlen(FILTERS[k].name) == name_len && !memcmp(FILTERS[k].name, name, name_len))
            return FILTERS[k].fn(c, in, a, out);
    return jinja_fail_at(c->env, c->n, GLIM_EINVAL, "no filter named '%.*s'", (int)GLIM_MIN(name_len, 60), name);
}

int jinja_filter_apply(struct jenv *env, struct jframe *f, const struct jnode *n,
                       struct jinja_value in, const struct jargs *args, struct jinja_value *out)
{
    struct fctx c = {env, f, n};
    return apply_named(&c, n->name->s, n->name->len, in, args, out);
}
