/*
 * jinja_expr.c — evaluates expressions with Python's semantics: int/float arithmetic
 * (overflow is an error, not a wrap), str and list concatenation and repetition,
 * chained comparisons, `and`/`or` returning an operand, slices with negative steps on
 * code points, and Jinja2's default Undefined: it prints as "", iterates as empty and
 * compares equal only to itself, while arithmetic, ordering, calling or taking an
 * attribute of it fails with "'name' is undefined".
 */
#include <math.h>
#include <string.h>

#include "jinja_int.h"

#define OOM(env, n) jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)")
#define ECODE(env) ((env)->err ? (env)->err->code : GLIM_EINVAL)

int jinja_undef_fail(struct jenv *env, const struct jnode *n, struct jinja_value v)
{
    if (v.type == JINJA_UNDEFINED && v.u.s)
        return jinja_fail_at(env, n, GLIM_EINVAL, "'%.*s' is undefined", (int)GLIM_MIN(v.u.s->len, 100), v.u.s->s);
    return jinja_fail_at(env, n, GLIM_EINVAL, "value is undefined");
}

static const char *const OP_NAMES[] = {
    [OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/", [OP_FLOORDIV] = "//",
    [OP_MOD] = "%", [OP_POW] = "**", [OP_CONCAT] = "~",
};

static int unsupported(struct jenv *env, const struct jnode *n, int op, struct jinja_value l,
                       struct jinja_value r)
{
    if (l.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, l);
    if (r.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, r);
    return jinja_fail_at(env, n, GLIM_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'",
                         OP_NAMES[op], jinja_type_name(l), jinja_type_name(r));
}

static int64_t ival(struct jinja_value v) { return v.type == JINJA_BOOL ? v.u.b : v.u.i; }

static int int_arith(struct jenv *env, const struct jnode *n, int op, int64_t a, int64_t b,
                     struct jinja_value *out)
{
    int64_t r = 0;
    bool ovf = false;
    switch (op) {
    case OP_ADD: ovf = __builtin_add_overflow(a, b, &r); break;
    case OP_SUB: ovf = __builtin_sub_overflow(a, b, &r); break;
    case OP_MUL: ovf = __builtin_mul_overflow(a, b, &r); break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (b == 0)
            return jinja_fail_at(env, n, GLIM_EINVAL, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) {
            ovf = op == OP_FLOORDIV;
            break;
        }
        r = op == OP_FLOORDIV ? a / b : a % b;
        if ((a % b != 0) && ((a < 0) != (b < 0)))   /* Python floors toward -inf */
            r = op == OP_FLOORDIV ? r - 1 : r + b;
        break;
    case OP_POW:
        if (b < 0) {
            *out = jinja_float(pow((double)a, (double)b));
            return GLIM_OK;
        }
        r = 1;
        for (int64_t k = 0; k < b && !ovf; k++) {
            ovf = __builtin_mul_overflow(r, a, &r);
            if (r == 0 || r == 1)
                break;
            if (r == -1)
                r = ((b - k - 1) % 2 == 0) ? -1 : 1, k = b;
        }
        break;
    }
    if (ovf)
        return jinja_fail_at(env, n, GLIM_ERANGE, "integer overflow in '%s'", OP_NAMES[op]);
    *out = jinja_int(r);
    return GLIM_OK;
}

static int float_arith(struct jenv *env, const struct jnode *n, int op, double a, double b,
                       struct jinja_value *out)
{
    double r = 0;
    switch (op) {
    case OP_ADD: r = a + b; break;
    case OP_SUB: r = a - b; break;
    case OP_MUL: r = a * b; break;
    case OP_POW: r = pow(a, b); break;
    default:
        if (b == 0)
            return jinja_fail_at(env, n, GLIM_EINVAL, "float division by zero");
        r = op == OP_DIV ? a / b : op == OP_FLOORDIV ? floor(a / b) : a - floor(a / b) * b;
    }
    *out = jinja_float(r);
    return GLIM_OK;
}

/* str * n and list * n */
static int repeat(struct jenv *env, const struct jnode *n, struct jinja_value seq, int64_t times,
                  struct jinja_value *out)
{
    if (times < 0)
        times = 0;
    if (seq.type == JINJA_STR) {
        size_t len = seq.u.s->len, total;
        if (__builtin_mul_overflow(len, (size_t)times, &total) || total > env->o.max_output_bytes)
            return jinja_fail_at(env, n, GLIM_ERANGE, "string repetition too large");
        struct jstr *s = jinja_jstr(env->a, "", 0);
        if (total)
            s = jinja_alloc(env->a, sizeof *s + total + 1);
        if (!s)
            return OOM(env, n);
        for (int64_t k = 0; k < times && len; k++)
            memcpy(s->s + (size_t)k * len, seq.u.s->s, len);
        s->len = total, s->s[total] = '\0';
        *out = jinja_strv(s);
        return GLIM_OK;
    }
    if (jinja_list_new(env->a, out))
        return OOM(env, n);
    size_t total;
    if (__builtin_mul_overflow(seq.u.l->n, (size_t)times, &total) || total > 10000000)
        return jinja_fail_at(env, n, GLIM_ERANGE, "list repetition too large");
    for (int64_t k = 0; k < times; k++)
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jinja_list_push(env->a, *out, seq.u.l->v[i]))
                return OOM(env, n);
    return GLIM_OK;
}

static int concat_str(struct jenv *env, const struct jnode *n, const struct jstr *a,
                      const struct jstr *b, struct jinja_value *out)
{
    if (a->len > SIZE_MAX / 2 || b->len > SIZE_MAX / 2)
        return OOM(env, n);
    struct jstr *s = jinja_alloc(env->a, sizeof *s + a->len + b->len + 1);
    if (!s)
        return OOM(env, n);
    memcpy(s->s, a->s, a->len);
    memcpy(s->s + a->len, b->s, b->len);
    s->len = a->len + b->len;
    s->s[s->len] = '\0';
    *out = jinja_strv(s);
    return GLIM_OK;
}

int jinja_binop(struct jenv *env, const struct jnode *n, int op, struct jinja_value l,
                struct jinja_value r, struct jinja_value *out)
{
    if (op == OP_CONCAT) {
        struct jinja_value ls, rs;
        if (jinja_stringify(env->a, l, &ls, env->err) || jinja_stringify(env->a, r, &rs, env->err))
            return ECODE(env);
        return concat_str(env, n, ls.u.s, rs.u.s, out);
    }
    if (jinja_is_number(l) && jinja_is_number(r)) {
        if (op == OP_DIV || l.type == JINJA_FLOAT || r.type == JINJA_FLOAT)
            return float_arith(env, n, op, jinja_num(l), jinja_num(r), out);
        return int_arith(env, n, op, ival(l), ival(r), out);
    }
    if (op == OP_ADD && l.type == JINJA_STR && r.type == JINJA_STR)
        return concat_str(env, n, l.u.s, r.u.s, out);
    if (op == OP_ADD && l.type == JINJA_LIST && r.type == JINJA_LIST) {
        if (jinja_list_new(env->a, out))
            return OOM(env, n);
        for (int side = 0; side < 2; side++) {
            const struct jlist *src = side ? r.u.l : l.u.l;
            for (size_t i = 0; i < src->n; i++)
                if (jinja_list_push(env->a, *out, src->v[i]))
                    return OOM(env, n);
        }
        return GLIM_OK;
    }
    if (op == OP_MUL && (l.type == JINJA_STR || l.type == JINJA_LIST) &&
        (r.type == JINJA_INT || r.type == JINJA_BOOL))
        return repeat(env, n, l, ival(r), out);
    if (op == OP_MUL && (r.type == JINJA_STR || r.type == JINJA_LIST) &&
        (l.type == JINJA_INT || l.type == JINJA_BOOL))
        return repeat(env, n, r, ival(l), out);
    return unsupported(env, n, op, l, r);
}

int jinja_contains(struct jenv *env, const struct jnode *n, struct jinja_value hay,
                   struct jinja_value needle, bool *out)
{
    *out = false;
    switch (hay.type) {
    case JINJA_STR:
        if (needle.type != JINJA_STR)
            return jinja_fail_at(env, n, GLIM_EINVAL, "'in <string>' requires string as left operand, not %s",
                                 jinja_type_name(needle));
        *out = jinja_find(hay.u.s->s, hay.u.s->len, needle.u.s->s, needle.u.s->len) != NULL;
        return GLIM_OK;
    case JINJA_LIST:
        for (size_t i = 0; i < hay.u.l->n && !*out; i++)
            *out = jinja_equal(hay.u.l->v[i], needle);
        return GLIM_OK;
    case JINJA_DICT: *out = jinja_dict_find(hay.u.d, needle) >= 0; return GLIM_OK;
    case JINJA_UNDEFINED: return GLIM_OK;
    default:
        return jinja_fail_at(env, n, GLIM_EINVAL, "argument of type '%s' is not iterable", jinja_type_name(hay));
    }
}

static int compare(struct jenv *env, const struct jnode *n, int op, struct jinja_value l,
                   struct jinja_value r, bool *out)
{
    bool lt;
    switch (op) {
    case OP_EQ: *out = jinja_equal(l, r); return GLIM_OK;
    case OP_NE: *out = !jinja_equal(l, r); return GLIM_OK;
    case OP_IN:
    case OP_NOTIN:
        if (jinja_contains(env, n, r, l, out))
            return ECODE(env);
        *out ^= op == OP_NOTIN;
        return GLIM_OK;
    default:
        if (l.type == JINJA_UNDEFINED || r.type == JINJA_UNDEFINED)
            return jinja_undef_fail(env, n, l.type == JINJA_UNDEFINED ? l : r);
        if (op == OP_LT || op == OP_GE) {
            if (jinja_less(l, r, &lt, env->err))
                return jinja_fail_at(env, n, GLIM_EINVAL, "%s", env->err ? env->err->msg : "unorderable");
        } else if (jinja_less(r, l, &lt, env->err)) {
            return jinja_fail_at(env, n, GLIM_EINVAL, "%s", env->err ? env->err->msg : "unorderable");
        }
        /* LT: l<r, GE: !(l<r), GT: r<l, LE: !(r<l) */
        *out = (op == OP_LT || op == OP_GT) ? lt : !lt;
        return GLIM_OK;
    }
}

static int eval_compare(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value l, r;
    if (jinja_eval(env, f, n->a, &l))
        return ECODE(env);
    for (const struct jnode *c = n->b; c; c = c->next) {
        bool ok;
        if (jinja_eval(env, f, c->a, &r) || compare(env, c, c->op, l, r, &ok))
            return ECODE(env);
        if (!ok) {
            *out = jinja_bool(false);
            return GLIM_OK;
        }
        l = r;
    }
    *out = jinja_bool(true);
    return GLIM_OK;
}

/* Python's slice index normalisation for a sequence of length len. */
static int slice_bounds(struct jenv *env, const struct jnode *n, struct jinja_value v[3],
                        int64_t len, int64_t *start, int64_t *stop, int64_t *step)
{
    for (int k = 0; k < 3; k++)
        if (v[k].type != JINJA_NONE && v[k].type != JINJA_UNDEFINED && v[k].type != JINJA_INT &&
            v[k].type != JINJA_BOOL)
            return jinja_fail_at(env, n, GLIM_EINVAL, "slice indices must be integers or None");
    *step = v[2].type == JINJA_INT || v[2].type == JINJA_BOOL ? ival(v[2]) : 1;
    if (*step == 0)
        return jinja_fail_at(env, n, GLIM_EINVAL, "slice step cannot be zero");
    if (*step == INT64_MIN)
        *step = -INT64_MAX;
    bool neg = *step < 0;
    int64_t lo = neg ? -1 : 0, hi = neg ? len - 1 : len;
    int64_t *ends[2] = {start, stop};
    for (int k = 0; k < 2; k++) {
        if (v[k].type != JINJA_INT && v[k].type != JINJA_BOOL) {
            *ends[k] = (k == 0) == neg ? hi : lo;
            continue;
        }
        int64_t x = ival(v[k]);
        if (x < 0)
            x = x < -len ? lo : x + len;
        else if (x > hi)
            x = hi;
        *ends[k] = x;
    }
    return GLIM_OK;
}

static int eval_slice(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value obj, idx[3] = {jinja_none(), jinja_none(), jinja_none()};
    const struct jnode *parts[3] = {n->b, n->c, n->d};
    if (jinja_eval(env, f, n->a, &obj))
        return ECODE(env);
    for (int k = 0; k < 3; k++)
        if (parts[k] && jinja_eval(env, f, parts[k], &idx[k]))
            return ECODE(env);
    if (obj.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, obj);
    struct jlist *items;
    if (obj.type == JINJA_STR || obj.type == JINJA_LIST) {
        if (jinja_iter_list(env, n, obj, &items))
            return ECODE(env);
    } else {
        return jinja_fail_at(env, n, GLIM_EINVAL, "'%s' object is not subscriptable", jinja_type_name(obj));
    }
    int64_t start = 0, stop = 0, step = 1;
    if (slice_bounds(env, n, idx, (int64_t)items->n, &start, &stop, &step))
        return ECODE(env);
    struct jinja_value res;
    if (jinja_list_new(env->a, &res))
        return OOM(env, n);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (jinja_list_push(env->a, res, items->v[i]))
            return OOM(env, n);
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
            break;
    }
    if (obj.type == JINJA_LIST) {
        *out = res;
        return GLIM_OK;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = GLIM_OK;
    for (size_t i = 0; i < res.u.l->n && !rc; i++)
        rc = strbuf_append(&sb, res.u.l->v[i].u.s->s, res.u.l->v[i].u.s->len);
    if (!rc)
        rc = jinja_str(env->a, strbuf_cstr(&sb), sb.len, out);
    strbuf_clear(&sb);
    return rc ? OOM(env, n) : GLIM_OK;
}

int jinja_eval_args(struct jenv *env, struct jframe *f, const struct jnode *args, struct jargs *out)
{
    out->n_pos = out->n_kw = 0;
    for (const struct jnode *a = args; a; a = a->next) {
        if (out->n_pos + out->n_kw >= JINJA_MAX_ARGS)
            return jinja_fail_at(env, a, GLIM_EINVAL, "too many arguments (at most %d)", JINJA_MAX_ARGS);
        if (a->kind == JN_KWARG) {
            out->kw_name[out->n_kw] = a->name;
            if (jinja_eval(env, f, a->a, &out->kw[out->n_kw++]))
                return ECODE(env);
        } else if (jinja_eval(env, f, a, &out->pos[out->n_pos++])) {
            return ECODE(env);
        }
    }
    return GLIM_OK;
}

struct jinja_value jinja_arg(const struct jargs *args, int i, const char *name)
{
    if (i >= 0 && i < args->n_pos)
        return args->pos[i];
    size_t nl = name ? strlen(name) : 0;
    for (int k = 0; name && k < args->n_kw; k++)
        if (args->kw_name[k]->len == nl && !memcmp(args->kw_name[k]->s, name, nl))
            return args->kw[k];
    return jinja_undefined();
}

static int eval_call(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value fn;
    if (n->a->kind == JN_GETATTR) {   /* obj.method(args) */
        struct jinja_value obj;
        struct jargs args;
        bool handled = false;
        if (jinja_eval(env, f, n->a->a, &obj))
            return ECODE(env);
        if (obj.type == JINJA_UNDEFINED)
            return jinja_undef_fail(env, n, obj);
        if (obj.type == JINJA_STR || obj.type == JINJA_LOOP || obj.type == JINJA_LIST ||
            (obj.type == JINJA_DICT && !obj.u.d->is_ns)) {
            if (jinja_eval_args(env, f, n->b, &args) ||
                jinja_method_call(env, n, obj, n->a->name, &args, &handled, out))
                return ECODE(env);
            if (handled)
                return GLIM_OK;
        }
        if (jinja_getattr(env, n->a, obj, n->a->name, &fn))
            return ECODE(env);
    } else if (jinja_eval(env, f, n->a, &fn)) {
        return ECODE(env);
    }
    return jinja_call_value(env, f, n, fn, n->b, out);
}

static int eval_filter_or_test(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value in;
    struct jargs args;
    if (jinja_eval(env, f, n->a, &in) || jinja_eval_args(env, f, n->b, &args))
        return ECODE(env);
    if (n->kind == JN_FILTER)
        return jinja_filter_apply(env, f, n, in, &args, out);
    bool r;
    if (jinja_test_apply(env, n, in, &args, &r))
        return ECODE(env);
    *out = jinja_bool(n->op ? !r : r);
    return GLIM_OK;
}

static int eval_container(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    if (n->kind == JN_LIST ? jinja_list_new(env->a, out) : jinja_dict_new(env->a, out))
        return OOM(env, n);
    if (n->kind == JN_LIST)
        out->u.l->is_tuple = n->op == 1;
    for (const struct jnode *it = n->a; it; it = it->next) {
        struct jinja_value k, v;
        if (n->kind == JN_LIST) {
            if (jinja_eval(env, f, it, &v))
                return ECODE(env);
            if (jinja_list_push(env->a, *out, v))
                return OOM(env, n);
        } else {
            if (jinja_eval(env, f, it->a, &k) || jinja_eval(env, f, it->b, &v))
                return ECODE(env);
            if (jinja_dict_set(env->a, *out, k, v))
                return OOM(env, n);
        }
    }
    return GLIM_OK;
}

static int eval_unary(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value v;
    if (jinja_eval(env, f, n->a, &v))
        return ECODE(env);
    if (n->kind == JN_NOT) {
        *out = jinja_bool(!jinja_truthy(v));
        return GLIM_OK;
    }
    if (v.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, v);
    if (!jinja_is_number(v))
        return jinja_fail_at(env, n, GLIM_EINVAL, "bad operand type for unary %s: '%s'",
                             n->kind == JN_NEG ? "-" : "+", jinja_type_name(v));
    if (n->kind == JN_POS)
        *out = v.type == JINJA_BOOL ? jinja_int(v.u.b) : v;
    else if (v.type == JINJA_FLOAT)
        *out = jinja_float(-v.u.f);
    else if (ival(v) == INT64_MIN)
        return jinja_fail_at(env, n, GLIM_ERANGE, "integer overflow in unary -");
    else
        *out = jinja_int(-ival(v));
    return GLIM_OK;
}

static int eval_node(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    struct jinja_value l, r;
    switch (n->kind) {
    case JN_LIT: *out = n->lit; return GLIM_OK;
    case JN_NAME: *out = jinja_lookup(env, f, n->name); return GLIM_OK;
    case JN_LIST:
    case JN_DICT: return eval_container(env, f, n, out);
    case JN_GETATTR:
        if (jinja_eval(env, f, n->a, &l))
            return ECODE(env);
        return jinja_getattr(env, n, l, n->name, out);
    case JN_GETITEM:
        if (jinja_eval(env, f, n->a, &l) || jinja_eval(env, f, n->b, &r))
            return ECODE(env);
        return jinja_getitem(env, n, l, r, out);
    case JN_SLICE: return eval_slice(env, f, n, out);
    case JN_CALL: return eval_call(env, f, n, out);
    case JN_FILTER:
    case JN_TEST: return eval_filter_or_test(env, f, n, out);
    case JN_BINOP:
        if (jinja_eval(env, f, n->a, &l) || jinja_eval(env, f, n->b, &r))
            return ECODE(env);
        return jinja_binop(env, n, n->op, l, r, out);
    case JN_NEG:
    case JN_POS:
    case JN_NOT: return eval_unary(env, f, n, out);
    case JN_AND:
    case JN_OR:
        if (jinja_eval(env, f, n->a, &l))
            return ECODE(env);
        if (jinja_truthy(l) == (n->kind == JN_OR)) {
            *out = l;
            return GLIM_OK;
        }
        return jinja_eval(env, f, n->b, out);
    case JN_COMPARE: return eval_compare(env, f, n, out);
    case JN_COND:
        if (jinja_eval(env, f, n->b, &l))
            return ECODE(env);
        if (jinja_truthy(l))
            return jinja_eval(env, f, n->a, out);
        if (n->c)
            return jinja_eval(env, f, n->c, out);
        *out = jinja_undefined();
        return GLIM_OK;
    default: return jinja_fail_at(env, n, GLIM_EINVAL, "not an expression");
    }
}

int jinja_eval(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out)
{
    if (++env->depth > JINJA_MAX_EVAL_DEPTH)
        return jinja_fail_at(env, n, GLIM_ERANGE, "template nested deeper than %d levels", JINJA_MAX_EVAL_DEPTH);
    if (jinja_step(env, n) || eval_node(env, f, n, out))
        return ECODE(env);
    env->depth--;
    return GLIM_OK;
}
