/*
 * jinja_parse.c — tokens to a syntax tree by recursive descent, following Jinja2's
 * grammar and precedence: inline if < or < and < not < comparisons/in < + - < ~ <
 * * / // % < ** < unary; filters and `is` tests bind to the unary operand, so
 * `a + b | f` filters b. Nesting is bounded so hostile input cannot exhaust the stack.
 */
#include <string.h>

#include "jinja_int.h"

#define PARSE_MAX_DEPTH 100

struct ps {
    struct jinja_arena *a;
    const struct jtok *t;
    size_t i;
    int depth;
    struct glim_err *err;
};

static const struct jtok *cur(const struct ps *p) { return &p->t[p->i]; }

static int fail_tok(struct ps *p, const struct jtok *t, const char *fmt, const char *arg)
{
    char what[200];
    snprintf(what, sizeof what, fmt, arg);
    return glim_fail(p->err, GLIM_EINVAL, "template line %d col %d: %s", t->line, t->col, what);
}

static bool tok_is(const struct jtok *t, enum jtok_kind k, const char *s)
{
    return t->kind == k && t->n == strlen(s) && !memcmp(t->s, s, t->n);
}
static bool is_op(const struct ps *p, const char *s) { return tok_is(cur(p), TK_OP, s); }
static bool is_name(const struct ps *p, const char *s) { return tok_is(cur(p), TK_NAME, s); }

static bool accept_op(struct ps *p, const char *s)
{
    if (!is_op(p, s))
        return false;
    p->i++;
    return true;
}
static bool accept_name(struct ps *p, const char *s)
{
    if (!is_name(p, s))
        return false;
    p->i++;
    return true;
}

static const char *tok_desc(const struct jtok *t, char buf[64])
{
    switch (t->kind) {
    case TK_EOF: return "end of template";
    case TK_BLOCK_END: return "end of statement block";
    case TK_VAR_END: return "end of print statement";
    default: snprintf(buf, 64, "'%.*s'", (int)GLIM_MIN(t->n, 40), t->s); return buf;
    }
}

static int expect_op(struct ps *p, const char *s)
{
    if (accept_op(p, s))
        return GLIM_OK;
    char buf[64], msg[128];
    snprintf(msg, sizeof msg, "expected '%s', got %%s", s);
    return fail_tok(p, cur(p), msg, tok_desc(cur(p), buf));
}

static struct jnode *node(struct ps *p, enum jn_kind kind, const struct jtok *at)
{
    struct jnode *n = jinja_alloc(p->a, sizeof *n);
    if (!n) {
        glim_fail(p->err, GLIM_ENOMEM, "template: out of memory");
        return NULL;
    }
    *n = (struct jnode){.kind = kind, .line = at->line, .col = at->col};
    return n;
}

static struct jstr *tok_str(struct ps *p, const struct jtok *t)
{
    struct jstr *s = jinja_jstr(p->a, t->s, t->n);
    if (!s)
        glim_fail(p->err, GLIM_ENOMEM, "template: out of memory");
    return s;
}

static int parse_expr(struct ps *p, struct jnode **out);
static int parse_unary(struct ps *p, bool with_filter, struct jnode **out);
static int parse_primary(struct ps *p, struct jnode **out);
static int parse_postfix(struct ps *p, struct jnode **n);

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)
#define NODE(var, kind, at) do { if (!((var) = node(p, kind, at))) return GLIM_ENOMEM; } while (0)

/* (args) after '(' : positional and name=value, trailing comma allowed. */
static int parse_args(struct ps *p, struct jnode **out)
{
    struct jnode **tail = out;
    *out = NULL;
    while (!accept_op(p, ")")) {
        struct jnode *arg;
        const struct jtok *t = cur(p);
        if (t->kind == TK_NAME && tok_is(&p->t[p->i + 1], TK_OP, "=")) {
            NODE(arg, JN_KWARG, t);
            if (!(arg->name = tok_str(p, t)))
                return GLIM_ENOMEM;
            p->i += 2;
            TRY(parse_expr(p, &arg->a));
        } else {
            TRY(parse_expr(p, &arg));
        }
        *tail = arg, tail = &arg->next;
        if (!accept_op(p, ",") && !is_op(p, ")"))
            return expect_op(p, ")");
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
        TRY(parse_expr(p, &e));
        *tail = e, tail = &e->next;
        if (!accept_op(p, ",") && !is_op(p, close))
            return expect_op(p, close);
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
        TRY(parse_expr(p, &pair->a));
        TRY(expect_op(p, ":"));
        TRY(parse_expr(p, &pair->b));
        *tail = pair, tail = &pair->next;
        if (!accept_op(p, ",") && !is_op(p, "}"))
            return expect_op(p, "}");
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
    if (!(n->name = tok_str(p, t)))
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
            TRY(parse_expr(p, &first));
            if (accept_op(p, ")")) {
                *out = first;
                return GLIM_OK;
            }
            TRY(expect_op(p, ","));        /* a tuple: a list that prints with ( ) */
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
    default: return fail_tok(p, t, "unexpected %s", tok_desc(t, buf));
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
            TRY(parse_expr(p, &parts[k]));
        if (accept_op(p, ":")) {
            is_slice = true;
            if (++k > 2)
                return fail_tok(p, cur(p), "%s", "too many ':' in subscript");
            continue;
        }
        TRY(expect_op(p, "]"));
        break;
    }
    struct jnode *s;
    if (!is_slice && !parts[0])
        return fail_tok(p, t, "%s", "empty subscript");
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
                if (!(x->name = tok_str(p, nt)))
                    return GLIM_ENOMEM;
                p->i++;
            } else {
                char buf[64];
                return fail_tok(p, nt, "expected an attribute name, got %s", tok_desc(nt, buf));
            }
            x->a = *n;
        } else if (accept_op(p, "[")) {
            TRY(parse_subscript(p, n));
            continue;
        } else if (accept_op(p, "(")) {
            NODE(x, JN_CALL, t);
            x->a = *n;
            TRY(parse_args(p, &x->b));
        } else {
            return GLIM_OK;
        }
        *n = x;
    }
}

/* name or dotted.name after '|' or 'is'; must name a known filter or test */
static int parse_dotted(struct ps *p, struct jnode *x)
{
    const struct jtok *t = cur(p);
    char buf[64];
    if (t->kind != TK_NAME)
        return fail_tok(p, t, "expected a filter or test name, got %s", tok_desc(t, buf));
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
    return fail_tok(p, t, is_filter ? "no filter named '%s'" : "no test named '%s'", what);
}

static int parse_test(struct ps *p, struct jnode **n)
{
    struct jnode *x;
    NODE(x, JN_TEST, cur(p));
    x->op = accept_name(p, "not");
    TRY(parse_dotted(p, x));
    const struct jtok *t = cur(p);
    if (accept_op(p, "(")) {
        TRY(parse_args(p, &x->b));
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
            TRY(parse_dotted(p, x));
            if (accept_op(p, "("))
                TRY(parse_args(p, &x->b));
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
        return fail_tok(p, cur(p), "%s", "expression nested too deeply");
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
            return fail_tok(p, t, "%s", "expression nested too deeply");
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
static int parse_expr_inner(struct ps *p, bool with_cond, struct jnode **out)
{
    if (++p->depth > PARSE_MAX_DEPTH)
        return fail_tok(p, cur(p), "%s", "expression nested too deeply");
    TRY(parse_logic(p, true, out));
    while (with_cond && is_name(p, "if")) {
        struct jnode *x;
        NODE(x, JN_COND, cur(p));
        p->i++;
        x->a = *out;
        TRY(parse_logic(p, true, &x->b));
        if (accept_name(p, "else"))
            TRY(parse_expr_inner(p, true, &x->c));
        *out = x;
    }
    p->depth--;
    return GLIM_OK;
}

static int parse_expr(struct ps *p, struct jnode **out) { return parse_expr_inner(p, true, out); }

/* ---- statements ---- */

static int parse_body(struct ps *p, const char *const *stops, struct jnode **out, int *which);

static int expect_block_end(struct ps *p)
{
    if (cur(p)->kind == TK_BLOCK_END) {
        p->i++;
        return GLIM_OK;
    }
    char buf[64];
    return fail_tok(p, cur(p), "expected end of statement block, got %s", tok_desc(cur(p), buf));
}

/* `name`, `ns.attr` or `a, b` */
static int parse_target(struct ps *p, bool allow_tuple, struct jnode **out)
{
    const struct jtok *t = cur(p);
    char buf[64];
    if (t->kind != TK_NAME)
        return fail_tok(p, t, "expected a variable name, got %s", tok_desc(t, buf));
    NODE(*out, JN_NAME, t);
    if (!((*out)->name = tok_str(p, t)))
        return GLIM_ENOMEM;
    p->i++;
    if (is_op(p, ".") && p->t[p->i + 1].kind == TK_NAME) {
        struct jnode *x;
        NODE(x, JN_GETATTR, cur(p));
        if (!(x->name = tok_str(p, &p->t[p->i + 1])))
            return GLIM_ENOMEM;
        p->i += 2;
        x->a = *out;
        *out = x;
        return GLIM_OK;
    }
    if (!allow_tuple || !is_op(p, ","))
        return GLIM_OK;
    struct jnode *list;
    NODE(list, JN_LIST, t);
    list->a = *out;
    struct jnode **tail = &(*out)->next;
    while (accept_op(p, ",")) {
        if (cur(p)->kind != TK_NAME)
            break;
        TRY(parse_target(p, false, tail));
        tail = &(*tail)->next;
    }
    *out = list;
    return GLIM_OK;
}

static int parse_if(struct ps *p, const struct jtok *t, struct jnode **out)
{
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    struct jnode *n;
    int which;
    NODE(n, JN_IF, t);
    *out = n;
    TRY(parse_expr(p, &n->a));
    TRY(expect_block_end(p));
    TRY(parse_body(p, stops, &n->b, &which));
    if (which == 0)
        return parse_if(p, cur(p) - 1, &n->c);   /* elif: a nested if in the else slot */
    if (which == 1) {
        static const char *const end[] = {"endif", NULL};
        TRY(expect_block_end(p));
        TRY(parse_body(p, end, &n->c, &which));
    }
    return expect_block_end(p);
}

static int parse_for(struct ps *p, const struct jtok *t, struct jnode **out)
{
    static const char *const stops[] = {"else", "endfor", NULL};
    static const char *const end[] = {"endfor", NULL};
    struct jnode *n;
    int which;
    NODE(n, JN_FOR, t);
    *out = n;
    TRY(parse_target(p, true, &n->a));
    if (!accept_name(p, "in"))
        return fail_tok(p, cur(p), "%s", "expected 'in' in for loop");
    TRY(parse_expr_inner(p, false, &n->b));
    if (accept_name(p, "if"))
        TRY(parse_expr_inner(p, false, &n->e));
    if (is_name(p, "recursive"))
        return fail_tok(p, cur(p), "%s", "recursive loops are not supported");
    TRY(expect_block_end(p));
    TRY(parse_body(p, stops, &n->c, &which));
    if (which == 0) {
        TRY(expect_block_end(p));
        TRY(parse_body(p, end, &n->d, &which));
    }
    return expect_block_end(p);
}

static int parse_filter_chain(struct ps *p, struct jnode **out)
{
    struct jnode **tail = out;
    do {
        struct jnode *x;
        NODE(x, JN_FILTER, cur(p));
        TRY(parse_dotted(p, x));
        if (accept_op(p, "("))
            TRY(parse_args(p, &x->b));
        *tail = x, tail = &x->next;
    } while (accept_op(p, "|"));
    return GLIM_OK;
}

static int parse_set(struct ps *p, const struct jtok *t, struct jnode **out)
{
    struct jnode *n, *target;
    TRY(parse_target(p, true, &target));
    if (accept_op(p, "=")) {
        NODE(n, JN_SET, t);
        n->a = target;
        TRY(parse_expr(p, &n->b));
        if (is_op(p, ",")) {            /* set a = 1, 2 */
            struct jnode *list;
            NODE(list, JN_LIST, t);
            list->op = 1;
            list->a = n->b;
            while (accept_op(p, ",")) {
                struct jnode **tail = &list->a;
                while (*tail)
                    tail = &(*tail)->next;
                TRY(parse_expr(p, tail));
            }
            n->b = list;
        }
        *out = n;
        return expect_block_end(p);
    }
    static const char *const end[] = {"endset", NULL};
    int which;
    NODE(n, JN_SETBLOCK, t);
    n->a = target;
    if (accept_op(p, "|"))
        TRY(parse_filter_chain(p, &n->c));
    TRY(expect_block_end(p));
    TRY(parse_body(p, end, &n->b, &which));
    *out = n;
    return expect_block_end(p);
}

static int parse_params(struct ps *p, struct jnode **out)
{
    struct jnode **tail = out;
    *out = NULL;
    TRY(expect_op(p, "("));
    while (!accept_op(p, ")")) {
        const struct jtok *t = cur(p);
        char buf[64];
        if (t->kind != TK_NAME)
            return fail_tok(p, t, "expected a parameter name, got %s", tok_desc(t, buf));
        struct jnode *x;
        NODE(x, JN_PARAM, t);
        if (!(x->name = tok_str(p, t)))
            return GLIM_ENOMEM;
        p->i++;
        if (accept_op(p, "="))
            TRY(parse_expr(p, &x->a));
        *tail = x, tail = &x->next;
        if (!accept_op(p, ",") && !is_op(p, ")"))
            return expect_op(p, ")");
    }
    return GLIM_OK;
}

static int parse_macro(struct ps *p, const struct jtok *t, struct jnode **out)
{
    static const char *const end[] = {"endmacro", NULL};
    struct jnode *n;
    int which;
    char buf[64];
    NODE(n, JN_MACRO, t);
    if (cur(p)->kind != TK_NAME)
        return fail_tok(p, cur(p), "expected a macro name, got %s", tok_desc(cur(p), buf));
    if (!(n->name = tok_str(p, cur(p))))
        return GLIM_ENOMEM;
    p->i++;
    TRY(parse_params(p, &n->a));
    TRY(expect_block_end(p));
    TRY(parse_body(p, end, &n->b, &which));
    if (cur(p)->kind == TK_NAME)
        p->i++;   /* {% endmacro name %} */
    *out = n;
    return expect_block_end(p);
}

static int parse_callblock(struct ps *p, const struct jtok *t, struct jnode **out)
{
    static const char *const end[] = {"endcall", NULL};
    struct jnode *n;
    int which;
    NODE(n, JN_CALLBLOCK, t);
    if (is_op(p, "("))
        TRY(parse_params(p, &n->c));
    TRY(parse_expr(p, &n->a));
    if (n->a->kind != JN_CALL)
        return fail_tok(p, t, "%s", "{% call %} needs a macro call");
    TRY(expect_block_end(p));
    TRY(parse_body(p, end, &n->b, &which));
    *out = n;
    return expect_block_end(p);
}

static int parse_filterblock(struct ps *p, const struct jtok *t, struct jnode **out)
{
    static const char *const end[] = {"endfilter", NULL};
    struct jnode *n;
    int which;
    NODE(n, JN_FILTERBLOCK, t);
    TRY(parse_filter_chain(p, &n->a));
    TRY(expect_block_end(p));
    TRY(parse_body(p, end, &n->b, &which));
    *out = n;
    return expect_block_end(p);
}

/* {% generation %} (HF's assistant-mask marker): render the body in place. */
static int parse_generation(struct ps *p, struct jnode **out)
{
    static const char *const end[] = {"endgeneration", NULL};
    int which;
    TRY(expect_block_end(p));
    NODE(*out, JN_IF, cur(p));
    NODE((*out)->a, JN_LIT, cur(p));
    (*out)->a->lit = jinja_bool(true);
    TRY(parse_body(p, end, &(*out)->b, &which));
    return expect_block_end(p);
}

static int parse_statement(struct ps *p, struct jnode **out)
{
    const struct jtok *t = cur(p);
    char buf[64];
    if (t->kind != TK_NAME)
        return fail_tok(p, t, "expected a tag name, got %s", tok_desc(t, buf));
    p->i++;
    if (tok_is(t, TK_NAME, "if"))
        return parse_if(p, t, out);
    if (tok_is(t, TK_NAME, "for"))
        return parse_for(p, t, out);
    if (tok_is(t, TK_NAME, "set"))
        return parse_set(p, t, out);
    if (tok_is(t, TK_NAME, "macro"))
        return parse_macro(p, t, out);
    if (tok_is(t, TK_NAME, "call"))
        return parse_callblock(p, t, out);
    if (tok_is(t, TK_NAME, "filter"))
        return parse_filterblock(p, t, out);
    if (tok_is(t, TK_NAME, "generation"))
        return parse_generation(p, out);
    if (tok_is(t, TK_NAME, "break") || tok_is(t, TK_NAME, "continue")) {
        NODE(*out, tok_is(t, TK_NAME, "break") ? JN_BREAK : JN_CONTINUE, t);
        return expect_block_end(p);
    }
    snprintf(buf, sizeof buf, "%.*s", (int)GLIM_MIN(t->n, 40), t->s);
    return fail_tok(p, t, "unknown tag '%s'", buf);
}

/* Statements and text until a block tag named in stops (consumed up to its name);
 * *which = its index. stops = NULL: until end of template. */
static int parse_body(struct ps *p, const char *const *stops, struct jnode **out, int *which)
{
    struct jnode **tail = out;
    *out = NULL;
    if (++p->depth > PARSE_MAX_DEPTH)
        return fail_tok(p, cur(p), "%s", "blocks nested too deeply");
    for (;;) {
        const struct jtok *t = cur(p);
        struct jnode *n = NULL;
        if (t->kind == TK_EOF) {
            if (!stops)
                break;
            int last = 0;
            while (stops[last + 1])
                last++;
            return fail_tok(p, t, "unexpected end of template, expected '%s'", stops[last]);
        }
        if (t->kind == TK_TEXT) {
            NODE(n, JN_TEXT, t);
            struct jstr *s = tok_str(p, t);
            if (!s)
                return GLIM_ENOMEM;
            n->lit = jinja_strv(s);
            p->i++;
        } else if (t->kind == TK_VAR_BEGIN) {
            p->i++;
            NODE(n, JN_OUTPUT, t);
            TRY(parse_expr(p, &n->a));
            if (cur(p)->kind != TK_VAR_END) {
                char buf[64];
                return fail_tok(p, cur(p), "expected end of print statement, got %s", tok_desc(cur(p), buf));
            }
            p->i++;
        } else if (t->kind == TK_BLOCK_BEGIN) {
            const struct jtok *name = &p->t[p->i + 1];
            for (int k = 0; stops && stops[k]; k++) {
                if (tok_is(name, TK_NAME, stops[k])) {
                    p->i += 2;
                    *which = k;
                    p->depth--;
                    return GLIM_OK;
                }
            }
            p->i++;
            TRY(parse_statement(p, &n));
        } else {
            char buf[64];
            return fail_tok(p, t, "unexpected %s", tok_desc(t, buf));
        }
        *tail = n;
        while (*tail)
            tail = &(*tail)->next;
    }
    p->depth--;
    return GLIM_OK;
}

int jinja_parse(struct jinja_arena *a, const struct jtoks *toks, struct jnode **root,
                struct glim_err *err)
{
    struct ps p = {a, toks->v, 0, 0, err};
    struct jnode *scope = node(&p, JN_SCOPE, toks->v);
    if (!scope)
        return GLIM_ENOMEM;
    int which;
    TRY(parse_body(&p, NULL, &scope->b, &which));
    *root = scope;
    return GLIM_OK;
}
