/*
 * jinja_int.h — private to src/chat/jinja_*.c: arena, containers, tokens, syntax tree
 * and the evaluator's state. Files: jinja_value.c (arena, containers, comparisons),
 * jinja_str.c (str/repr/json output, float formatting), jinja_json.c (JSON input),
 * jinja_lex.c (tokens, whitespace control), jinja_parse.c + jinja_stmt.c (syntax tree;
 * jinja_parse.h), jinja_eval.c (statements), jinja_expr.c (expressions),
 * jinja_filter.c (filters), jinja_test.c (`is` tests), jinja_method.c (attribute and
 * item access, str/dict methods, global functions).
 */
#ifndef GLIM_JINJA_INT_H
#define GLIM_JINJA_INT_H

#include "jinja.h"

#define JINJA_MAX_NEST 128        /* value printing/compare/JSON depth */
#define JINJA_MAX_EVAL_DEPTH 600  /* statement + expression recursion while rendering */
/* jinja_dict_set replaces an equal key only while the dict is smaller than this: the
 * lookup is linear, and a hostile JSON object with 10^5 keys must not cost 10^10 compares */
#define JINJA_DEDUPE_MAX 1024

struct jlist {
    size_t n, cap;
    struct jinja_value *v;
    bool is_tuple;            /* prints as (a, b): literals (a, b), items() pairs */
};
struct jdict {
    size_t n, cap;
    struct jinja_value *k, *v;
    bool is_ns;               /* namespace(): attributes may be assigned with set */
};

void *jinja_alloc(struct jinja_arena *a, size_t n);         /* NULL: budget or OOM */
struct jstr *jinja_jstr(struct jinja_arena *a, const char *s, size_t n);
struct jinja_value jinja_strv(struct jstr *s);

bool jinja_truthy(struct jinja_value v);
/* Python ==, depth-bounded (too deep compares unequal). */
bool jinja_equal(struct jinja_value a, struct jinja_value b);
/* Python <: returns GLIM_OK and *lt, or an error for unorderable types. */
int jinja_less(struct jinja_value a, struct jinja_value b, bool *lt, struct glim_err *err);
bool jinja_is_number(struct jinja_value v);                 /* int, float or bool */
double jinja_num(struct jinja_value v);
int jinja_dict_find(const struct jdict *d, struct jinja_value key);   /* index or -1 */
const char *jinja_type_name(struct jinja_value v);
/* First occurrence of needle in hay (linear time); NULL if absent. */
const char *jinja_find(const char *hay, size_t hay_len, const char *needle, size_t needle_len);
/* UTF-8 code point helpers (invalid bytes count as one code point each). */
size_t jinja_utf8_count(const char *s, size_t n);
int jinja_utf8_put(struct strbuf *sb, uint32_t cp);         /* append one code point */
size_t jinja_utf8_next(const char *s, size_t n, size_t i);  /* offset after the code point at i */

/* str(v) as a new arena string (strings are returned as is). */
int jinja_stringify(struct jinja_arena *a, struct jinja_value v, struct jinja_value *out,
                    struct glim_err *err);
int jinja_repr(struct strbuf *sb, struct jinja_value v, struct glim_err *err);
void jinja_fmt_float(double d, char buf[40]);               /* Python repr(float) */

/* ---- tokens ---- */
enum jtok_kind {
    TK_EOF, TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
};
struct jtok {
    enum jtok_kind kind;
    int line, col;
    const char *s;            /* TEXT/NAME/OP: into source or arena; STRING: unescaped */
    size_t n;
    int64_t i;
    double f;
};
struct jtoks { struct jtok *v; size_t n, cap; };
int jinja_lex(struct jinja_arena *a, const char *src, size_t len, struct jtoks *out,
              struct glim_err *err);

/* ---- syntax tree ---- */
enum jn_kind {
    /* expressions */
    JN_LIT, JN_NAME, JN_LIST, JN_DICT, JN_PAIR, JN_GETATTR, JN_GETITEM, JN_SLICE, JN_CALL,
    JN_KWARG, JN_FILTER, JN_TEST, JN_BINOP, JN_NEG, JN_POS, JN_NOT, JN_AND, JN_OR,
    JN_COMPARE, JN_CMPOP, JN_COND,
    /* statements */
    JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_PARAM,
    JN_CALLBLOCK, JN_FILTERBLOCK, JN_BREAK, JN_CONTINUE, JN_SCOPE,
};
enum jn_op {
    OP_NONE, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};
/*
 * One node shape for everything; fields by kind:
 *   LIT lit | NAME name | LIST a=items | DICT a=pairs | PAIR a=key b=value
 *   GETATTR a.name | GETITEM a[b] | SLICE a[b:c:d] | CALL a(b=args) | KWARG name=a
 *   FILTER a|name(b=args) | TEST a is [not: op=1] name(b=args) | BINOP a op b
 *   COMPARE a then b=CMPOP chain (op, a) | COND a if b else c | AND/OR a b | NEG/POS/NOT a
 *   TEXT lit | OUTPUT a | IF a then b else c | FOR a=target in b, body c, else d, if e
 *   SET a=target = b | SETBLOCK a=target, body b, filters c | MACRO name, a=params, b=body
 *   PARAM name = a | CALLBLOCK a=call, b=body, c=caller params | FILTERBLOCK a=filters, b=body
 *   SCOPE b=body (whole template)
 * Targets are NAME, GETATTR (ns.x) or LIST (unpacking). Lists chain through `next`.
 */
struct jnode {
    enum jn_kind kind;
    int op, line, col;
    struct jnode *a, *b, *c, *d, *e;
    struct jnode *next;
    struct jstr *name;
    struct jinja_value lit;
};

struct jinja_template {
    struct jinja_arena *arena;  /* owned: nodes and literals */
    struct jnode *root;
};
int jinja_parse(struct jinja_arena *a, const struct jtoks *toks, struct jnode **root,
                struct glim_err *err);

/* ---- evaluation ---- */
struct jvar { struct jstr *name; struct jinja_value v; };
struct jframe {
    struct jframe *parent;
    struct jvar *vars;
    size_t n, cap;
};
struct jmacro {
    const struct jnode *node;
    struct jframe *closure;
};
struct jloop {
    struct jlist *items;
    size_t idx;
    int depth;
};
struct jenv {
    struct jinja_arena *a;
    struct jinja_value globals;        /* the render context (dict) */
    struct jopts_eff {
        time_t (*clock)(void *ud);
        void *clock_ud;
        int max_call_depth;
        size_t max_output_bytes;
        int64_t max_steps;
    } o;
    int64_t steps;
    int call_depth;
    int depth;                         /* exec + eval recursion, bounds the C stack */
    int loop_ctl;                      /* 0, 1 = break, 2 = continue */
    struct glim_err *err;
};

int jinja_fail_at(struct jenv *env, const struct jnode *n, int code, const char *fmt, ...)
    GLIM_PRINTF(4, 5);
int jinja_step(struct jenv *env, const struct jnode *n);
int jinja_eval(struct jenv *env, struct jframe *f, const struct jnode *n, struct jinja_value *out);
int jinja_exec(struct jenv *env, struct jframe *f, const struct jnode *body, struct strbuf *out);
int jinja_frame_set(struct jenv *env, struct jframe *f, struct jstr *name, struct jinja_value v);
struct jinja_value jinja_lookup(struct jenv *env, struct jframe *f, const struct jstr *name);
int jinja_call_value(struct jenv *env, struct jframe *f, const struct jnode *at,
                     struct jinja_value fn, const struct jnode *args, struct jinja_value *out);
int jinja_output(struct jenv *env, const struct jnode *at, struct strbuf *out, const char *s,
                 size_t n);

/* Evaluated call arguments: positionals then keywords. */
#define JINJA_MAX_ARGS 16
struct jargs {
    int n_pos, n_kw;
    struct jinja_value pos[JINJA_MAX_ARGS];
    struct jstr *kw_name[JINJA_MAX_ARGS];
    struct jinja_value kw[JINJA_MAX_ARGS];
};
int jinja_eval_args(struct jenv *env, struct jframe *f, const struct jnode *args,
                    struct jargs *out);
/* Argument i by position or by keyword name; JINJA_UNDEFINED when absent. */
struct jinja_value jinja_arg(const struct jargs *args, int i, const char *name);

int jinja_filter_apply(struct jenv *env, struct jframe *f, const struct jnode *n,
                       struct jinja_value in, const struct jargs *args, struct jinja_value *out);
int jinja_test_apply(struct jenv *env, const struct jnode *n, struct jinja_value in,
                     const struct jargs *args, bool *out);
/* Used by the parser: unknown filter and test names are syntax errors, as in Jinja2. */
bool jinja_filter_known(const char *name, size_t len);
bool jinja_test_known(const char *name, size_t len);
int jinja_test_named(struct jenv *env, const struct jnode *n, const char *name, size_t len,
                     struct jinja_value in, const struct jargs *args, bool *out);
/* obj.name(args) for strings, dicts, lists and loop; *handled = false if no such method. */
int jinja_method_call(struct jenv *env, const struct jnode *n, struct jinja_value obj,
                      const struct jstr *name, const struct jargs *args, bool *handled,
                      struct jinja_value *out);
/* Python str.replace (count < 0 = all). */
int jinja_str_replace(struct jenv *env, const struct jnode *n, const struct jstr *s,
                      struct jinja_value from, struct jinja_value to, int64_t count,
                      struct jinja_value *out);
/* Builtin global functions (range, namespace, dict, raise_exception, strftime_now). */
struct jinja_value jinja_builtin(const struct jstr *name);
int jinja_builtin_call(struct jenv *env, const struct jnode *n, struct jinja_value fn,
                       const struct jargs *args, struct jinja_value *out);
/* getattr/getitem with Jinja2's rules (attribute of a dict falls back to its item). */
int jinja_getattr(struct jenv *env, const struct jnode *n, struct jinja_value obj,
                  const struct jstr *name, struct jinja_value *out);
int jinja_getitem(struct jenv *env, const struct jnode *n, struct jinja_value obj,
                  struct jinja_value key, struct jinja_value *out);
/* Iterate: lists as is, dicts by key, strings by code point; undefined is empty. */
int jinja_iter_list(struct jenv *env, const struct jnode *n, struct jinja_value v,
                    struct jlist **out);
int jinja_binop(struct jenv *env, const struct jnode *n, int op, struct jinja_value l,
                struct jinja_value r, struct jinja_value *out);
int jinja_contains(struct jenv *env, const struct jnode *n, struct jinja_value hay,
                   struct jinja_value needle, bool *out);
int jinja_undef_fail(struct jenv *env, const struct jnode *n, struct jinja_value v);

#endif
