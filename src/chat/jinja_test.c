/*
 * jinja_test.c — `x is name(args)` tests with Jinja2's definitions. Note Python's
 * quirks they inherit: a bool is a number (but not an integer), an undefined value is
 * iterable, and a string is iterable and a sequence.
 */
#include <string.h>

#include "jinja_int.h"


static bool is(const char *name, size_t len, const char *w)
{
    return strlen(w) == len && !memcmp(name, w, len);
}

static int cmp_test(struct jenv *env, const struct jnode *n, int op, struct jinja_value in,
                    struct jinja_value other, bool *out)
{
    if (op == OP_EQ || op == OP_NE) {
        *out = jinja_equal(in, other) == (op == OP_EQ);
        return GLIM_OK;
    }
    if (in.type == JINJA_UNDEFINED || other.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, n, in.type == JINJA_UNDEFINED ? in : other);
    bool lt;
    bool swap = op == OP_GT || op == OP_LE;
    if (jinja_less(swap ? other : in, swap ? in : other, &lt, env->err))
        return jinja_fail_at(env, n, GLIM_EINVAL, "%s", env->err ? env->err->msg : "unorderable");
    *out = (op == OP_LT || op == OP_GT) ? lt : !lt;
    return GLIM_OK;
}

static int int_test(struct jenv *env, const struct jnode *n, const char *name, size_t len,
                    struct jinja_value in, struct jinja_value arg, bool *out)
{
    if (in.type != JINJA_INT && in.type != JINJA_BOOL)
        return jinja_fail_at(env, n, GLIM_EINVAL, "test '%.*s' needs an integer, got %s", (int)len, name,
                             jinja_type_name(in));
    int64_t v = in.type == JINJA_BOOL ? in.u.b : in.u.i;
    if (is(name, len, "odd") || is(name, len, "even")) {
        *out = (v % 2 != 0) == is(name, len, "odd");
        return GLIM_OK;
    }
    if (arg.type != JINJA_INT || arg.u.i == 0)
        return jinja_fail_at(env, n, GLIM_EINVAL, "divisibleby needs a non-zero integer");
    *out = arg.u.i == -1 || v % arg.u.i == 0;
    return GLIM_OK;
}

static int type_test(const char *name, size_t len, struct jinja_value in, bool *out)
{
    enum jinja_type t = in.type;
    if (is(name, len, "defined"))
        *out = t != JINJA_UNDEFINED;
    else if (is(name, len, "undefined"))
        *out = t == JINJA_UNDEFINED;
    else if (is(name, len, "none"))
        *out = t == JINJA_NONE;
    else if (is(name, len, "string"))
        *out = t == JINJA_STR;
    else if (is(name, len, "number"))
        *out = jinja_is_number(in);
    else if (is(name, len, "integer"))
        *out = t == JINJA_INT;
    else if (is(name, len, "float"))
        *out = t == JINJA_FLOAT;
    else if (is(name, len, "boolean"))
        *out = t == JINJA_BOOL;
    else if (is(name, len, "true"))
        *out = t == JINJA_BOOL && in.u.b;
    else if (is(name, len, "false"))
        *out = t == JINJA_BOOL && !in.u.b;
    else if (is(name, len, "mapping"))
        *out = t == JINJA_DICT && !in.u.d->is_ns;
    else if (is(name, len, "iterable"))
        *out = t == JINJA_STR || t == JINJA_LIST || (t == JINJA_DICT && !in.u.d->is_ns) || t == JINJA_UNDEFINED;
    else if (is(name, len, "sequence"))
        *out = t == JINJA_STR || t == JINJA_LIST || (t == JINJA_DICT && !in.u.d->is_ns) || t == JINJA_UNDEFINED;
    else if (is(name, len, "callable"))
        *out = t == JINJA_FUNC || t == JINJA_MACRO;
    else
        return -1;
    return GLIM_OK;
}

int jinja_test_named(struct jenv *env, const struct jnode *n, const char *name, size_t len,
                     struct jinja_value in, const struct jargs *args, bool *out)
{
    static const struct { const char *name; int op; } CMP[] = {
        {"eq", OP_EQ}, {"equalto", OP_EQ}, {"==", OP_EQ}, {"ne", OP_NE}, {"!=", OP_NE},
        {"lt", OP_LT}, {"lessthan", OP_LT}, {"<", OP_LT}, {"le", OP_LE}, {"<=", OP_LE},
        {"gt", OP_GT}, {"greaterthan", OP_GT}, {">", OP_GT}, {"ge", OP_GE}, {">=", OP_GE},
    };
    struct jinja_value arg = jinja_arg(args, 0, NULL);
    if (type_test(name, len, in, out) == GLIM_OK)
        return GLIM_OK;
    for (size_t k = 0; k < sizeof CMP / sizeof CMP[0]; k++)
        if (is(name, len, CMP[k].name))
            return cmp_test(env, n, CMP[k].op, in, arg, out);
    if (is(name, len, "odd") || is(name, len, "even") || is(name, len, "divisibleby"))
        return int_test(env, n, name, len, in, arg, out);
    if (is(name, len, "in"))
        return jinja_contains(env, n, arg, in, out);
    if (is(name, len, "sameas")) {
        *out = in.type == arg.type && (in.type == JINJA_NONE || in.type == JINJA_UNDEFINED ||
                                       (in.type == JINJA_BOOL && in.u.b == arg.u.b) ||
                                       (in.type != JINJA_BOOL && in.u.p == arg.u.p));
        return GLIM_OK;
    }
    if (is(name, len, "lower") || is(name, len, "upper")) {
        bool up = name[0] == 'u', r = in.type == JINJA_STR;
        for (size_t i = 0; r && i < in.u.s->len; i++) {
            char c = in.u.s->s[i];
            r = up ? !(c >= 'a' && c <= 'z') : !(c >= 'A' && c <= 'Z');
        }
        *out = r;
        return GLIM_OK;
    }
    return jinja_fail_at(env, n, GLIM_EINVAL, "no test named '%.*s'", (int)GLIM_MIN(len, 60), name);
}

bool jinja_test_known(const char *name, size_t len)
{
    static const char *const NAMES[] = {
        "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true",
        "false", "mapping", "iterable", "sequence", "callable", "eq", "equalto", "==", "ne", "!=",
        "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "odd", "even",
        "divisibleby", "in", "sameas", "lower", "upper",
    };
    for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++)
        if (is(name, len, NAMES[k]))
            return true;
    return false;
}

int jinja_test_apply(struct jenv *env, const struct jnode *n, struct jinja_value in,
                     const struct jargs *args, bool *out)
{
    return jinja_test_named(env, n, n->name->s, n->name->len, in, args, out);
}
