/*
 * jinja_stmt.c — the statement half of the parser: template text, {{ }} output and
 * the block tags (if/elif/else, for/else with an `if` filter, set and block set,
 * macro, call, filter, generation, break/continue). An unknown tag, or a missing end
 * tag, is an error at its line and column. Block nesting is bounded.
 */
#include <string.h>

#include "jinja_parse.h"

static int parse_body(struct ps *p, const char *const *stops, struct jnode **out, int *which);

static int expect_block_end(struct ps *p)
{
    if (cur(p)->kind == TK_BLOCK_END) {
        p->i++;
        return GLIM_OK;
    }
    char buf[64];
    return jinja_p_fail(p, cur(p), "expected end of statement block, got %s", jinja_p_desc(cur(p), buf));
}

/* `name`, `ns.attr` or `a, b` */
static int parse_target(struct ps *p, bool allow_tuple, struct jnode **out)
{
    const struct jtok *t = cur(p);
    char buf[64];
    if (t->kind != TK_NAME)
        return jinja_p_fail(p, t, "expected a variable name, got %s", jinja_p_desc(t, buf));
    NODE(*out, JN_NAME, t);
    if (!((*out)->name = jinja_p_str(p, t)))
        return GLIM_ENOMEM;
    p->i++;
    if (is_op(p, ".") && p->t[p->i + 1].kind == TK_NAME) {
        struct jnode *x;
        NODE(x, JN_GETATTR, cur(p));
        if (!(x->name = jinja_p_str(p, &p->t[p->i + 1])))
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
    TRY(jinja_p_expr(p, &n->a));
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
        return jinja_p_fail(p, cur(p), "%s", "expected 'in' in for loop");
    TRY(jinja_p_expr_in(p, false, &n->b));
    if (accept_name(p, "if"))
        TRY(jinja_p_expr_in(p, false, &n->e));
    if (is_name(p, "recursive"))
        return jinja_p_fail(p, cur(p), "%s", "recursive loops are not supported");
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
        TRY(jinja_p_dotted(p, x));
        if (accept_op(p, "("))
            TRY(jinja_p_args(p, &x->b));
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
        TRY(jinja_p_expr(p, &n->b));
        if (is_op(p, ",")) {            /* set a = 1, 2 */
            struct jnode *list;
            NODE(list, JN_LIST, t);
            list->op = 1;
            list->a = n->b;
            while (accept_op(p, ",")) {
                struct jnode **tail = &list->a;
                while (*tail)
                    tail = &(*tail)->next;
                TRY(jinja_p_expr(p, tail));
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
    TRY(jinja_p_expect_op(p, "("));
    while (!accept_op(p, ")")) {
        const struct jtok *t = cur(p);
        char buf[64];
        if (t->kind != TK_NAME)
            return jinja_p_fail(p, t, "expected a parameter name, got %s", jinja_p_desc(t, buf));
        struct jnode *x;
        NODE(x, JN_PARAM, t);
        if (!(x->name = jinja_p_str(p, t)))
            return GLIM_ENOMEM;
        p->i++;
        if (accept_op(p, "="))
            TRY(jinja_p_expr(p, &x->a));
        *tail = x, tail = &x->next;
        if (!accept_op(p, ",") && !is_op(p, ")"))
            return jinja_p_expect_op(p, ")");
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
        return jinja_p_fail(p, cur(p), "expected a macro name, got %s", jinja_p_desc(cur(p), buf));
    if (!(n->name = jinja_p_str(p, cur(p))))
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
    TRY(jinja_p_expr(p, &n->a));
    if (n->a->kind != JN_CALL)
        return jinja_p_fail(p, t, "%s", "{% call %} needs a macro call");
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
        return jinja_p_fail(p, t, "expected a tag name, got %s", jinja_p_desc(t, buf));
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
    return jinja_p_fail(p, t, "unknown tag '%s'", buf);
}

/* Statements and text until a block tag named in stops (consumed up to its name);
 * *which = its index. stops = NULL: until end of template. */
static int parse_body(struct ps *p, const char *const *stops, struct jnode **out, int *which)
{
    struct jnode **tail = out;
    *out = NULL;
    if (++p->depth > PARSE_MAX_DEPTH)
        return jinja_p_fail(p, cur(p), "%s", "blocks nested too deeply");
    for (;;) {
        const struct jtok *t = cur(p);
        struct jnode *n = NULL;
        if (t->kind == TK_EOF) {
            if (!stops)
                break;
            int last = 0;
            while (stops[last + 1])
                last++;
            return jinja_p_fail(p, t, "unexpected end of template, expected '%s'", stops[last]);
        }
        if (t->kind == TK_TEXT) {
            NODE(n, JN_TEXT, t);
            struct jstr *s = jinja_p_str(p, t);
            if (!s)
                return GLIM_ENOMEM;
            n->lit = jinja_strv(s);
            p->i++;
        } else if (t->kind == TK_VAR_BEGIN) {
            p->i++;
            NODE(n, JN_OUTPUT, t);
            TRY(jinja_p_expr(p, &n->a));
            if (cur(p)->kind != TK_VAR_END) {
                char buf[64];
                return jinja_p_fail(p, cur(p), "expected end of print statement, got %s", jinja_p_desc(cur(p), buf));
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
            return jinja_p_fail(p, t, "unexpected %s", jinja_p_desc(t, buf));
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
    struct jnode *scope = jinja_p_node(&p, JN_SCOPE, toks->v);
    if (!scope)
        return GLIM_ENOMEM;
    int which;
    TRY(parse_body(&p, NULL, &scope->b, &which));
    *root = scope;
    return GLIM_OK;
}
