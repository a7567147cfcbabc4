/*
 * jinja_parse.h — private to the parser: jinja_parse.c (expressions) and
 * jinja_stmt.c (statements and template structure) share the token cursor and
 * node constructors declared here.
 */
#ifndef GLIM_JINJA_PARSE_H
#define GLIM_JINJA_PARSE_H

#include <string.h>

#include "jinja_int.h"

#define PARSE_MAX_DEPTH 100   /* expression and block nesting */

struct ps {
    struct jinja_arena *a;
    const struct jtok *t;   /* ends with TK_EOF */
    size_t i;
    int depth;
    struct glim_err *err;
};

static inline const struct jtok *cur(const struct ps *p) { return &p->t[p->i]; }

static inline bool tok_is(const struct jtok *t, enum jtok_kind k, const char *s)
{
    return t->kind == k && t->n == strlen(s) && !memcmp(t->s, s, t->n);
}
static inline bool is_op(const struct ps *p, const char *s) { return tok_is(cur(p), TK_OP, s); }
static inline bool is_name(const struct ps *p, const char *s) { return tok_is(cur(p), TK_NAME, s); }

static inline bool accept_op(struct ps *p, const char *s)
{
    if (!is_op(p, s))
        return false;
    p->i++;
    return true;
}
static inline bool accept_name(struct ps *p, const char *s)
{
    if (!is_name(p, s))
        return false;
    p->i++;
    return true;
}

/* "template line L col C: <fmt with one %s>" */
int jinja_p_fail(struct ps *p, const struct jtok *t, const char *fmt, const char *arg);
const char *jinja_p_desc(const struct jtok *t, char buf[64]);   /* token for messages */
int jinja_p_expect_op(struct ps *p, const char *s);
struct jnode *jinja_p_node(struct ps *p, enum jn_kind kind, const struct jtok *at);
struct jstr *jinja_p_str(struct ps *p, const struct jtok *t);
/* expression; with_cond = false stops before an inline `if` (for-loop iterables) */
int jinja_p_expr_in(struct ps *p, bool with_cond, struct jnode **out);
int jinja_p_expr(struct ps *p, struct jnode **out);
int jinja_p_args(struct ps *p, struct jnode **out);      /* after '(' */
int jinja_p_dotted(struct ps *p, struct jnode *x);      /* filter/test name into x */

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)
#define NODE(var, kind, at) do { if (!((var) = jinja_p_node(p, kind, at))) return GLIM_ENOMEM; } while (0)

#endif
