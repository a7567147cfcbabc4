/*
 * jinja_parse.c — expression tokens to a syntax tree by recursive descent (statements
 * are in jinja_stmt.c), with Jinja2's precedence: inline if < or < and < not <
 * comparisons/in < + - < ~ < * / // % < ** < unary. Filters and `is` tests bind to
 * the unary operand, so `a + b | f` filters b. Nesting is bounded so hostile input
 * cannot exhaust the stack.
 */
#include <string.h>

#include "jinja_parse.h"

int jinja_p_fail(struct ps *p, const struct jtok *t, const char *fmt, const char *arg)
{
    char what[200];
    snprintf(what, sizeof what, fmt, arg);
    return glim_fail(p->err, GLIM_EINVAL, "template line %d col %d: %s", t->line, t->col, what);
}

const char *jinja_p_desc(const struct jtok *t, char buf[64])
{
    switch (t->kind) {
    case TK_EOF: return "end of template";
    case TK_BLOCK_END: return "end of statement block";
    case TK_VAR_END: return "end of print statement";
    default: snprintf(buf, 64, "'%.*s'", (int)GLIM_MIN(t->n, 40), t->s); return buf;
    }
}

int jinja_p_expect_op(struct ps *p, const char *s)
{
    if (accept_op(p, s))
        return GLIM_OK;
    char buf[64], msg[128];
    snprintf(msg, sizeof msg, "expected '%s', got %%s", s);
    return jinja_p_fail(p, cur(p), msg, jinja_p_desc(cur(p), buf));
}

struct jnode *jinja_p_node(struct ps *p, enum jn_kind kind, const struct jtok *at)
{
    struct jnode *n = jinja_alloc(p->a, sizeof *n);
    if (!n) {
        glim_fail(p->err, GLIM_ENOMEM, "template: out of memory");
        return NULL;
    }
    *n = (struct jnode){.kind = kind, .line = at->line, .col = at->col};
    return n;
}

struct jstr *jinja_p_str(struct ps *p, const struct jtok *t)
{
    struct jstr *s = jinja_jstr(p->a, t->s, t->n);
    if (!s)
        glim_fail(p->err, GLIM_ENOMEM, "template: out of memory");
    return s;
}

static int parse_unary(struct ps *p, bool with_filter, struct jnode **out);
static int parse_primary(struct ps *p, struct jnode **out);
static int parse_postfix(struct ps *p, struct jnode **n);

/* (args) after '(' : positional and name=value, trailing comma allowed. */
int jinja_p_args(struct ps *p, struct jnode **out)
{
    struct jnode **tail = out;
    *out = NULL;
    while (!accept_op(p, ")")) {
        struct jnode *arg;
        const struct jtok *t = cur(p);
        if (t->kind == TK_NAME && tok_is(&p->t[p->i + 1], TK_OP, "=")) {
            NODE(arg, JN_KWARG, t);
            if (!(arg->name = jinja_p_str(p, t)))
                return GLIM_ENOMEM;
            p->i += 2;
            TRY(jinja_p_expr(p, &arg->a));
        } else {
            TRY(jinja_p_expr(p, &arg));
        }
        *tail = arg, tail = &arg->next;
        if (!accept_op(p, ",") && !is_op(p, ")"))
            return jinja_p_expect_op(p, ")");
    }
    return GLIM_OK;
}

/* Comma-separated expressions up to `close`; for list/tuple literals. */
static int parse_items(struct ps *p, const char *close, struct jnode **out)
{
    struct jnode **tail = out;
    *out = NULL;
    while (!accept_op(p, close)) {
        struct jnode *e;
        TRY(jinja_p_expr(p, &e));
        *tail = e, tail = &e->next;
        if (!accept_op(p, ",") && !is_op(p, close))
            return jinja_p_expect_op(p, close);
    }
    return GLIM_OK;
}

static int parse_dict(struct ps *p, const struct jtok *at, struct jnode **out)
{
    struct jnode *d, **tail;
    NODE(d, JN_DICT, at);
    tail = &d->a;
    while (!accept_op(p, "}")) {
        struct jnode *pair;
        NODE(pair, JN_PAIR, cur(p));
        TRY(jinja_p_expr(p, &pair->a));
        TRY(jinja_p_expect_op(p, ":"));
        TRY(jinja_p_expr(p, &pair->b));
        *tail = pair, tail = &pair->next;
        if (!accept_op(p, ",") && !is_op(p, "}"))
            return jinja_p_expect_op(p, "}");
    }
    *out = d;
    return GLIM_OK;
}

static int parse_literal_name(struct ps *p, const struct jtok *t, struct jnode **out)
{
    struct jnode *n;
    static const struct { const char *w; int v; } LITS[] = {
        {"true", 1}, {"True", 1}, {"false", 0}, {"False", 0}, {"none", -1}, {"None", -1},
    };
    for (size_t k = 0; k < sizeof LITS / sizeof LITS[0]; k++) {
        if (tok_is(t, TK_NAME, LITS[k].w)) {
            NODE(n, JN_LIT, t);
            n->lit = LITS[k].v < 0 ? jinja_none() : jinja_bool(LITS[k].v);
            *out = n;
            return GLIM_OK;
        }
    }
    NODE(n, JN_NAME, t);
    if (!(n->name = jinja_p_str(p, t)))
        return GLIM_ENOMEM;
    *out = n;
    return GLIM_OK;
}

static int parse_string_lit(struct ps *p, const struct jtok *t, struct jnode **out)
{
    struct jnode *n;
    NODE(n, JN_LIT, t);
    size_t len = 0;
    size_t j = p->i;
    while (p->t[j].kind == TK_STRING)
        len += p->t[j++].n;
    struct jstr *s = jinja_jstr(p->a, "", 0);
    if (len)
        s = jinja_alloc(p->a, sizeof *s + len + 1);
    if (!s)
        return glim_fail(p->err, GLIM_ENOMEM, "template: out of memory");
    s->len = 0;
    for (; p->i < j; p->i++) {   /* adjacent literals concatenate, as in Python */
        memcpy(s->s + s->len, p->t[p->i].s, p->t[p->i].n);
        s->len += p->t[p->i].n;
    }
    s->s[s->len] = '\0';
    n->lit = jinja_strv(s);
    *out = n;
    return GLIM_OK;
}

static int parse_primary(struct ps *p, struct jnode **out)
{
    const struct jtok *t = cur(p);
    char buf[64];
    switch (t->kind) {
    case TK_NAME: p->i++; return parse_literal_name(p, t, out);
    case TK_STRING: return parse_string_lit(p, t, out);
    case TK_INT:
    case TK_FLOAT:
        p->i++;
        NODE(*out, JN_LIT, t);
        (*out)->lit = t->kind == TK_INT ? jinja_int(t->i) : jinja_float(t->f);
        return GLIM_OK;
    case TK_OP:
        p->i++;
        if (tok_is(t, TK_OP, "(")) {
            struct jnode *first = NULL;
            if (accept_op(p, ")")) {
                NODE(*out, JN_LIST, t);
                (*out)->op = 1;
                return GLIM_OK;
            }
            TRY(jinja_p_expr(p, &first));
            if (accept_op(p, ")")) {
                *out = first;
                return GLIM_OK;
            }
            TRY(jinja_p_expect_op(p, ","));        /* a tuple: a list that prints with ( ) */
            NODE(*out, JN_LIST, t);
            (*out)->op = 1;
            (*out)->a = first;
            return parse_items(p, ")", &first->next);
        }
        if (tok_is(t, TK_OP, "[")) {
            NODE(*out, JN_LIST, t);
            return parse_items(p, "]", &(*out)->a);
        }
        if (tok_is(t, TK_OP, "{"))
            return parse_dict(p, t, out);
        p->i--;
        /* fall through */
    default: return jinja_p_fail(p, t, "unexpected %s", jinja_p_desc(t, buf));
    }
}

static int parse_subscript(struct ps *p, struct jnode **n)
{
    const struct jtok *t = cur(p);
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool is_slice = false;
    for (;;) {
        if (!is_op(p, ":") && !is_op(p, "]"))
            TRY(jinja_p_expr(p, &parts[k]));
        if (accept_op(p, ":")) {
            is_slice = true;
            if (++k > 2)
                return jinja_p_fail(p, cur(p), "%s", "too many ':' in subscript");
            continue;
        }
        TRY(jinja_p_expect_op(p, "]"));
        break;
    }
    struct jnode *s;
    if (!is_slice && !parts[0])
        return jinja_p_fail(p, t, "%s", "empty subscript");
    NODE(s, is_slice ? JN_SLICE : JN_GETITEM, t);
    s->a = *n, s->b = parts[0], s->c = parts[1], s->d = parts[2];
    *n = s;
    return GLIM_OK;
}

static int parse_postfix(struct ps *p, struct jnode **n)
{
    for (;;) {
        const struct jtok *t = cur(p);
        struct jnode *x;
        if (accept_op(p, ".")) {
            const struct jtok *nt = cur(p);
            if (nt->kind == TK_INT) {
                NODE(x, JN_GETITEM, t);
                TRY(parse_primary(p, &x->b));
            } else if (nt->kind == TK_NAME) {
                NODE(x, JN_GETATTR, t);
                if (!(x->name = jinja_p_str(p, nt)))
                    return GLIM_ENOMEM;
                p->i++;
            } else {
                char buf[64];
                return jinja_p_fail(p, nt, "expected an attribute name, got %s", jinja_p_desc(nt, buf));
            }
            x->a = *n;
        } else if (accept_op(p, "[")) {
            TRY(parse_subscript(p, n));
            continue;
        } else if (accept_op(p, "(")) {
            NODE(x, JN_CALL, t);
            x->a = *n;
            TRY(jinja_p_args(p, &x->b));
        } else {
            return GLIM_OK;
        }
        *n = x;
    }
}

/* name or dotted.name after '|' or 'is'; must name a known filter or test */
int jinja_p_dotted(struct ps *p, struct jnode *x)
{
    const struct jtok *t = cur(p);
    char buf[64];
    if (t->kind != TK_NAME)
        return jinja_p_fail(p, t, "expected a filter or test name, got %s", jinja_p_desc(t, buf));
    p->i++;
    while (is_op(p, ".") && p->t[p->i + 1].kind == TK_NAME)
        p->i += 2;
    const struct jtok *last = cur(p) - 1;
    x->name = jinja_jstr(p->a, t->s, (size_t)(last->s + last->n - t->s));
    if (!x->name)
        return glim_fail(p->err, GLIM_ENOMEM, "template: out of memory");
    bool is_filter = x->kind == JN_FILTER;
    if (is_filter ? jinja_filter_known(x->name->s, x->name->len) : jinja_test_known(x->name->s, x->name->len))
        return GLIM_OK;
    char what[80];
    snprintf(what, sizeof what, "%.60s", x->name->s);
    return jinja_p_fail(p, t, is_filter ? "no filter named '%s'" : "no test named '%s'", what);
}

static int parse_test(struct ps *p, struct jnode **n)
{
    struct jnode *x;
    NODE(x, JN_TEST, cur(p));
    x->op = accept_name(p, "not");
    TRY(jinja_p_dotted(p, x));
    const struct jtok *t = cur(p);
    if (accept_op(p, "(")) {
        TRY(jinja_p_args(p, &x->b));
    } else if ((t->kind == TK_NAME || t->kind == TK_STRING || t->kind == TK_INT ||
                t->kind == TK_FLOAT || tok_is(t, TK_OP, "[") || tok_is(t, TK_OP, "{")) &&
               !tok_is(t, TK_NAME, "else") && !tok_is(t, TK_NAME, "or") &&
               !tok_is(t, TK_NAME, "and") && !tok_is(t, TK_NAME, "is") &&
               !tok_is(t, TK_NAME, "if") && !tok_is(t, TK_NAME, "in") &&
               !tok_is(t, TK_NAME, "not")) {
        TRY(parse_primary(p, &x->b));      /* `is divisibleby 3`, `is sameas none` */
        TRY(parse_postfix(p, &x->b));
    }
    x->a = *n;
    *n = x;
    return GLIM_OK;
}

static int parse_filters(struct ps *p, struct jnode **n)
{
    for (;;) {
        struct jnode *x;
        if (accept_op(p, "|")) {
            NODE(x, JN_FILTER, cur(p));
            TRY(jinja_p_dotted(p, x));
            if (accept_op(p, "("))
                TRY(jinja_p_args(p, &x->b));
            x->a = *n;
            *n = x;
        } else if (accept_name(p, "is")) {
            TRY(parse_test(p, n));
        } else {
            return GLIM_OK;
        }
    }
}

static int parse_unary(struct ps *p, bool with_filter, struct jnode **out)
{
    if (++p->depth > PARSE_MAX_DEPTH)
        return jinja_p_fail(p, cur(p), "%s", "expression nested too deeply");
    const struct jtok *t = cur(p);
    if (accept_op(p, "-") || accept_op(p, "+")) {
        NODE(*out, tok_is(t, TK_OP, "-") ? JN_NEG : JN_POS, t);
        TRY(parse_unary(p, false, &(*out)->a));
    } else {
        TRY(parse_primary(p, out));
    }
    TRY(parse_postfix(p, out));
    if (with_filter)
        TRY(parse_filters(p, out));
    p->depth--;
    return GLIM_OK;
}

typedef int (*parse_fn)(struct ps *p, struct jnode **out);

/* One left-associative binary level: operand (op operand)* */
static int parse_binary(struct ps *p, parse_fn operand, const char *const *ops, const int *codes,
                        struct jnode **out)
{
    TRY(operand(p, out));
    for (;;) {
        int k = 0;
        while (ops[k] && !is_op(p, ops[k]))
            k++;
        if (!ops[k])
            return GLIM_OK;
        struct jnode *x;
        NODE(x, JN_BINOP, cur(p));
        p->i++;
        x->op = codes[k], x->a = *out;
        TRY(operand(p, &x->b));
        *out = x;
    }
}

static int parse_unary_f(struct ps *p, struct jnode **out) { return parse_unary(p, true, out); }

static int parse_pow(struct ps *p, struct jnode **out)
{
    static const char *const ops[] = {"**", NULL};
    static const int codes[] = {OP_POW};
    return parse_binary(p, parse_unary_f, ops, codes, out);
}
static int parse_math2(struct ps *p, struct jnode **out)
{
    static const char *const ops[] = {"*", "//", "/", "%", NULL};
    static const int codes[] = {OP_MUL, OP_FLOORDIV, OP_DIV, OP_MOD};
    return parse_binary(p, parse_pow, ops, codes, out);
}
static int parse_concat(struct ps *p, struct jnode **out)
{
    static const char *const ops[] = {"~", NULL};
    static const int codes[] = {OP_CONCAT};
    return parse_binary(p, parse_math2, ops, codes, out);
}
static int parse_math1(struct ps *p, struct jnode **out)
{
    static const char *const ops[] = {"+", "-", NULL};
    static const int codes[] = {OP_ADD, OP_SUB};
    return parse_binary(p, parse_concat, ops, codes, out);
}

static int cmp_op(struct ps *p)
{
    static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    static const int codes[] = {OP_EQ, OP_NE, OP_LE, OP_GE, OP_LT, OP_GT};
    for (int k = 0; k < 6; k++)
        if (accept_op(p, ops[k]))
            return codes[k];
    if (accept_name(p, "in"))
        return OP_IN;
    if (is_name(p, "not") && tok_is(&p->t[p->i + 1], TK_NAME, "in")) {
        p->i += 2;
        return OP_NOTIN;
    }
    return OP_NONE;
}

static int parse_compare(struct ps *p, struct jnode **out)
{
    const struct jtok *t = cur(p);
    struct jnode *first, *cmp = NULL, **tail = NULL;
    TRY(parse_math1(p, &first));
    for (;;) {
        const struct jtok *opt = cur(p);
        int op = cmp_op(p);
        if (op == OP_NONE)
            break;
        if (!cmp) {
            NODE(cmp, JN_COMPARE, t);
            cmp->a = first, tail = &cmp->b;
        }
        struct jnode *x;
        NODE(x, JN_CMPOP, opt);
        x->op = op;
        TRY(parse_math1(p, &x->a));
        *tail = x, tail = &x->next;
    }
    *out = cmp ? cmp : first;
    return GLIM_OK;
}

static int parse_not(struct ps *p, struct jnode **out)
{
    const struct jtok *t = cur(p);
    if (is_name(p, "not") && !tok_is(&p->t[p->i + 1], TK_NAME, "in")) {
        p->i++;
        if (++p->depth > PARSE_MAX_DEPTH)
            return jinja_p_fail(p, t, "%s", "expression nested too deeply");
        NODE(*out, JN_NOT, t);
        TRY(parse_not(p, &(*out)->a));
        p->depth--;
        return GLIM_OK;
    }
    return parse_compare(p, out);
}

static int parse_logic(struct ps *p, bool is_or, struct jnode **out)
{
    if (is_or)
        TRY(parse_logic(p, false, out));
    else
        TRY(parse_not(p, out));
    while (is_name(p, is_or ? "or" : "and")) {
        struct jnode *x;
        NODE(x, is_or ? JN_OR : JN_AND, cur(p));
        p->i++;
        x->a = *out;
        if (is_or)
            TRY(parse_logic(p, false, &x->b));
        else
            TRY(parse_not(p, &x->b));
        *out = x;
    }
    return GLIM_OK;
}

/* expr := or ['if' or ['else' expr]] */
int jinja_p_expr_in(struct ps *p, bool with_cond, struct jnode **out)
{
    if (++p->depth > PARSE_MAX_DEPTH)
        return jinja_p_fail(p, cur(p), "%s", "expression nested too deeply");
    TRY(parse_logic(p, true, out));
    while (with_cond && is_name(p, "if")) {
        struct jnode *x;
        NODE(x, JN_COND, cur(p));
        p->i++;
        x->a = *out;
        TRY(parse_logic(p, true, &x->b));
        if (accept_name(p, "else"))
            TRY(jinja_p_expr_in(p, true, &x->c));
        *out = x;
    }
    p->depth--;
    return GLIM_OK;
}

int jinja_p_expr(struct ps *p, struct jnode **out) { return jinja_p_expr_in(p, true, out); }
