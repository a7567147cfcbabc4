/*
 * jinja_eval.c — runs statements: output, if, for (with loop.* and else), set (plain,
 * namespace attribute, unpacking, block), macros and {% call %}, {% filter %}, break
 * and continue. Scoping follows Jinja2: a for loop and a macro call open a frame, an
 * if does not, so `set` inside a loop is invisible after it (hence namespace()).
 * Every node costs a step and nesting costs depth; both are bounded.
 */
#include <stdarg.h>
#include <string.h>

#include "base/alloc.h"
#include "jinja_int.h"

#define DEFAULT_MAX_OUTPUT ((size_t)64 << 20)
#define DEFAULT_MAX_STEPS  50000000
#define DEFAULT_MAX_CALLS  64

int jinja_fail_at(struct jenv *env, const struct jnode *n, int code, const char *fmt, ...)
{
    char msg[GLIM_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        return glim_fail(env->err, code, "template line %d col %d: %s", n->line, n->col, msg);
    return glim_fail(env->err, code, "template: %s", msg);
}

int jinja_step(struct jenv *env, const struct jnode *n)
{
    if (++env->steps > env->o.max_steps)
        return jinja_fail_at(env, n, GLIM_ERANGE, "render exceeded %lld steps",
                             (long long)env->o.max_steps);
    return GLIM_OK;
}

int jinja_output(struct jenv *env, const struct jnode *at, struct strbuf *out, const char *s,
                 size_t n)
{
    if (n > env->o.max_output_bytes || out->len > env->o.max_output_bytes - n)
        return jinja_fail_at(env, at, GLIM_ERANGE, "output exceeds %zu bytes", env->o.max_output_bytes);
    if (strbuf_append(out, s, n))
        return jinja_fail_at(env, at, GLIM_ENOMEM, "out of memory");
    return GLIM_OK;
}

int jinja_frame_set(struct jenv *env, struct jframe *f, struct jstr *name, struct jinja_value v)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->vars[i].name->len == name->len && !memcmp(f->vars[i].name->s, name->s, name->len)) {
            f->vars[i].v = v;
            return GLIM_OK;
        }
    }
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 8;
        struct jvar *nv = jinja_alloc(env->a, nc * sizeof *nv);
        if (!nv)
            return jinja_fail_at(env, NULL, GLIM_ENOMEM, "out of memory (template arena budget)");
        if (f->n)
            memcpy(nv, f->vars, f->n * sizeof *nv);
        f->vars = nv, f->cap = nc;
    }
    f->vars[f->n++] = (struct jvar){name, v};
    return GLIM_OK;
}

struct jinja_value jinja_lookup(struct jenv *env, struct jframe *f, const struct jstr *name)
{
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (f->vars[i].name->len == name->len && !memcmp(f->vars[i].name->s, name->s, name->len))
                return f->vars[i].v;
    if (env->globals.type == JINJA_DICT) {
        const struct jdict *d = env->globals.u.d;
        for (size_t i = 0; i < d->n; i++)
            if (d->k[i].type == JINJA_STR && d->k[i].u.s->len == name->len &&
                !memcmp(d->k[i].u.s->s, name->s, name->len))
                return d->v[i];
    }
    struct jinja_value b = jinja_builtin(name);
    if (b.type != JINJA_UNDEFINED)
        return b;
    struct jinja_value u = jinja_undefined();
    u.u.s = (struct jstr *)name;
    return u;
}

static int assign(struct jenv *env, struct jframe *f, const struct jnode *target, struct jinja_value v)
{
    if (target->kind == JN_NAME)
        return jinja_frame_set(env, f, target->name, v);
    if (target->kind == JN_GETATTR) {
        struct jinja_value ns = jinja_lookup(env, f, target->a->name);
        if (ns.type != JINJA_DICT || !ns.u.d->is_ns)
            return jinja_fail_at(env, target, GLIM_EINVAL, "cannot assign attribute on non-namespace object");
        struct jinja_value key = jinja_strv(target->name);
        if (jinja_dict_set(env->a, ns, key, v))
            return jinja_fail_at(env, target, GLIM_ENOMEM, "out of memory (template arena budget)");
        return GLIM_OK;
    }
    /* unpacking: a, b = pair */
    struct jlist *items;
    if (jinja_iter_list(env, target, v, &items))
        return env->err ? env->err->code : GLIM_EINVAL;
    size_t want = 0;
    for (const struct jnode *t = target->a; t; t = t->next)
        want++;
    if (items->n != want)
        return jinja_fail_at(env, target, GLIM_EINVAL, "cannot unpack %zu values into %zu names",
                             items->n, want);
    size_t i = 0;
    for (const struct jnode *t = target->a; t; t = t->next)
        if (assign(env, f, t, items->v[i++]))
            return env->err ? env->err->code : GLIM_EINVAL;
    return GLIM_OK;
}

static int exec_filters(struct jenv *env, struct jframe *f, const struct jnode *filters,
                        struct jinja_value *v)
{
    for (const struct jnode *fl = filters; fl; fl = fl->next) {
        struct jargs args;
        if (jinja_eval_args(env, f, fl->b, &args) || jinja_filter_apply(env, f, fl, *v, &args, v))
            return env->err ? env->err->code : GLIM_EINVAL;
    }
    return GLIM_OK;
}

/* Render body into a new string value (macro results, block set, filter blocks). */
static int capture(struct jenv *env, struct jframe *f, const struct jnode *body, struct jinja_value *out)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = jinja_exec(env, f, body, &sb);
    if (!rc && jinja_str(env->a, strbuf_cstr(&sb), sb.len, out))
        rc = jinja_fail_at(env, body, GLIM_ENOMEM, "out of memory (template arena budget)");
    strbuf_clear(&sb);
    return rc;
}

static int exec_for(struct jenv *env, struct jframe *f, const struct jnode *n, struct strbuf *out)
{
    struct jinja_value seq;
    struct jlist *items;
    if (jinja_eval(env, f, n->b, &seq) || jinja_iter_list(env, n->b, seq, &items))
        return env->err ? env->err->code : GLIM_EINVAL;
    struct jframe *lf = jinja_alloc(env->a, sizeof *lf);
    struct jloop *loop = jinja_alloc(env->a, sizeof *loop);
    if (!lf || !loop)
        return jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)");
    *lf = (struct jframe){.parent = f};
    if (n->e) {   /* {% for x in xs if cond %}: filter first, so loop.length counts the kept ones */
        struct jinja_value kept;
        if (jinja_list_new(env->a, &kept))
            return jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)");
        for (size_t i = 0; i < items->n; i++) {
            struct jinja_value c;
            if (jinja_step(env, n) || assign(env, lf, n->a, items->v[i]) || jinja_eval(env, lf, n->e, &c))
                return env->err ? env->err->code : GLIM_EINVAL;
            if (jinja_truthy(c) && jinja_list_push(env->a, kept, items->v[i]))
                return jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)");
        }
        items = kept.u.l;
    }
    if (items->n == 0)
        return jinja_exec(env, f, n->d, out);
    *loop = (struct jloop){items, 0, 1};
    struct jstr *loop_name = jinja_jstr(env->a, "loop", 4);
    if (!loop_name || jinja_frame_set(env, lf, loop_name, (struct jinja_value){JINJA_LOOP, {.p = loop}}))
        return jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)");
    for (size_t i = 0; i < items->n; i++) {
        loop->idx = i;
        if (jinja_step(env, n) || assign(env, lf, n->a, items->v[i]) || jinja_exec(env, lf, n->c, out))
            return env->err ? env->err->code : GLIM_EINVAL;
        int ctl = env->loop_ctl;
        env->loop_ctl = 0;
        if (ctl == 1)
            break;
    }
    return GLIM_OK;
}

static int exec_output(struct jenv *env, struct jframe *f, const struct jnode *n, struct strbuf *out)
{
    struct jinja_value v;
    if (jinja_eval(env, f, n->a, &v))
        return env->err ? env->err->code : GLIM_EINVAL;
    if (v.type == JINJA_STR)
        return jinja_output(env, n, out, v.u.s->s, v.u.s->len);
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = jinja_to_str(&sb, v, env->err);
    if (rc)
        rc = jinja_fail_at(env, n, rc, "%s", env->err ? env->err->msg : "cannot print value");
    else
        rc = jinja_output(env, n, out, sb.data ? sb.data : "", sb.len);
    strbuf_clear(&sb);
    return rc;
}

static int call_macro(struct jenv *env, const struct jnode *at, const struct jmacro *m,
                      const struct jargs *args, const struct jmacro *caller, struct jinja_value *out);

static int exec_one(struct jenv *env, struct jframe *f, const struct jnode *n, struct strbuf *out)
{
    struct jinja_value v;
    switch (n->kind) {
    case JN_TEXT: return jinja_output(env, n, out, n->lit.u.s->s, n->lit.u.s->len);
    case JN_OUTPUT: return exec_output(env, f, n, out);
    case JN_IF:
        if (jinja_eval(env, f, n->a, &v))
            return env->err ? env->err->code : GLIM_EINVAL;
        return jinja_exec(env, f, jinja_truthy(v) ? n->b : n->c, out);
    case JN_FOR: return exec_for(env, f, n, out);
    case JN_SET:
        if (jinja_eval(env, f, n->b, &v))
            return env->err ? env->err->code : GLIM_EINVAL;
        return assign(env, f, n->a, v);
    case JN_SETBLOCK:
        if (capture(env, f, n->b, &v) || exec_filters(env, f, n->c, &v))
            return env->err ? env->err->code : GLIM_EINVAL;
        return assign(env, f, n->a, v);
    case JN_FILTERBLOCK:
        if (capture(env, f, n->b, &v) || exec_filters(env, f, n->a, &v) ||
            jinja_stringify(env->a, v, &v, env->err))
            return env->err ? env->err->code : GLIM_EINVAL;
        return jinja_output(env, n, out, v.u.s->s, v.u.s->len);
    case JN_MACRO:
    case JN_CALLBLOCK: {
        struct jmacro *m = jinja_alloc(env->a, sizeof *m);
        if (!m)
            return jinja_fail_at(env, n, GLIM_ENOMEM, "out of memory (template arena budget)");
        *m = (struct jmacro){.node = n, .closure = f};
        v = (struct jinja_value){JINJA_MACRO, {.p = m}};
        if (n->kind == JN_MACRO)
            return jinja_frame_set(env, f, n->name, v);
        const struct jnode *call = n->a;
        struct jinja_value fn;
        if (jinja_eval(env, f, call->a, &fn))
            return env->err ? env->err->code : GLIM_EINVAL;
        struct jargs args;
        if (fn.type != JINJA_MACRO)
            return jinja_fail_at(env, call, GLIM_EINVAL, "{%% call %%} needs a macro, got %s", jinja_type_name(fn));
        if (jinja_eval_args(env, f, call->b, &args) || call_macro(env, call, fn.u.p, &args, m, &v) ||
            jinja_stringify(env->a, v, &v, env->err))
            return env->err ? env->err->code : GLIM_EINVAL;
        return jinja_output(env, n, out, v.u.s->s, v.u.s->len);
    }
    case JN_BREAK: env->loop_ctl = 1; return GLIM_OK;
    case JN_CONTINUE: env->loop_ctl = 2; return GLIM_OK;
    default: return jinja_fail_at(env, n, GLIM_EINVAL, "not a statement");
    }
}

int jinja_exec(struct jenv *env, struct jframe *f, const struct jnode *body, struct strbuf *out)
{
    if (++env->depth > JINJA_MAX_EVAL_DEPTH)
        return jinja_fail_at(env, body, GLIM_ERANGE, "template nested deeper than %d levels",
                             JINJA_MAX_EVAL_DEPTH);
    for (const struct jnode *n = body; n && !env->loop_ctl; n = n->next)
        if (jinja_step(env, n) || exec_one(env, f, n, out))
            return env->err ? env->err->code : GLIM_EINVAL;
    env->depth--;
    return GLIM_OK;
}

/* Call a macro (or a {% call %} body through caller()): bind parameters in a new frame
 * under the macro's defining frame and render the body to a string. */
static int call_macro(struct jenv *env, const struct jnode *at, const struct jmacro *m,
                      const struct jargs *args, const struct jmacro *caller, struct jinja_value *out)
{
    if (env->call_depth >= env->o.max_call_depth)
        return jinja_fail_at(env, at, GLIM_ERANGE, "macro calls nested deeper than %d", env->o.max_call_depth);
    const struct jnode *params = m->node->kind == JN_MACRO ? m->node->a : m->node->c;
    const struct jnode *body = m->node->b;
    struct jframe *mf = jinja_alloc(env->a, sizeof *mf);
    struct jinja_value varargs, kwargs;
    if (!mf || jinja_list_new(env->a, &varargs) || jinja_dict_new(env->a, &kwargs))
        return jinja_fail_at(env, at, GLIM_ENOMEM, "out of memory (template arena budget)");
    *mf = (struct jframe){.parent = m->closure};
    int i = 0, used_kw[JINJA_MAX_ARGS] = {0};
    for (const struct jnode *p = params; p; p = p->next, i++) {
        struct jinja_value v = i < args->n_pos ? args->pos[i] : jinja_undefined();
        for (int k = 0; k < args->n_kw; k++) {
            if (args->kw_name[k]->len == p->name->len && !memcmp(args->kw_name[k]->s, p->name->s, p->name->len)) {
                v = args->kw[k];
                used_kw[k] = 1;
            }
        }
        if (v.type == JINJA_UNDEFINED && i >= args->n_pos && p->a && jinja_eval(env, mf, p->a, &v))
            return env->err ? env->err->code : GLIM_EINVAL;
        if (v.type == JINJA_UNDEFINED)
            v.u.s = p->name;
        if (jinja_frame_set(env, mf, p->name, v))
            return env->err ? env->err->code : GLIM_ENOMEM;
    }
    for (int k = i; k < args->n_pos; k++)
        if (jinja_list_push(env->a, varargs, args->pos[k]))
            return jinja_fail_at(env, at, GLIM_ENOMEM, "out of memory (template arena budget)");
    for (int k = 0; k < args->n_kw; k++)
        if (!used_kw[k] && jinja_dict_set(env->a, kwargs, jinja_strv(args->kw_name[k]), args->kw[k]))
            return jinja_fail_at(env, at, GLIM_ENOMEM, "out of memory (template arena budget)");
    struct jstr *nv = jinja_jstr(env->a, "varargs", 7), *nk = jinja_jstr(env->a, "kwargs", 6);
    if (!nv || !nk || jinja_frame_set(env, mf, nv, varargs) || jinja_frame_set(env, mf, nk, kwargs))
        return jinja_fail_at(env, at, GLIM_ENOMEM, "out of memory (template arena budget)");
    if (caller) {
        struct jstr *nc = jinja_jstr(env->a, "caller", 6);
        if (!nc || jinja_frame_set(env, mf, nc, (struct jinja_value){JINJA_MACRO, {.p = caller}}))
            return jinja_fail_at(env, at, GLIM_ENOMEM, "out of memory (template arena budget)");
    }
    int saved_ctl = env->loop_ctl;
    env->loop_ctl = 0;
    env->call_depth++;
    int rc = capture(env, mf, body, out);
    env->call_depth--;
    env->loop_ctl = saved_ctl;
    return rc;
}

int jinja_call_value(struct jenv *env, struct jframe *f, const struct jnode *at,
                     struct jinja_value fn, const struct jnode *argn, struct jinja_value *out)
{
    struct jargs args;
    if (fn.type == JINJA_UNDEFINED)
        return jinja_undef_fail(env, at, fn);
    if (fn.type != JINJA_MACRO && fn.type != JINJA_FUNC)
        return jinja_fail_at(env, at, GLIM_EINVAL, "'%s' object is not callable", jinja_type_name(fn));
    if (jinja_eval_args(env, f, argn, &args))
        return env->err ? env->err->code : GLIM_EINVAL;
    if (fn.type == JINJA_MACRO)
        return call_macro(env, at, fn.u.p, &args, NULL, out);
    return jinja_builtin_call(env, at, fn, &args, out);
}

int jinja_template_new(const char *src, size_t len, struct jinja_template **out,
                       struct glim_err *err)
{
    struct jinja_template *t = glim_calloc(1, sizeof *t);
    if (!t)
        return glim_fail(err, GLIM_ENOMEM, "template: out of memory");
    t->arena = jinja_arena_new((size_t)64 << 20);
    struct jtoks toks;
    int rc;
    if (!t->arena) {
        rc = glim_fail(err, GLIM_ENOMEM, "template: out of memory");
        goto fail;
    }
    rc = jinja_lex(t->arena, src, len, &toks, err);
    if (!rc)
        rc = jinja_parse(t->arena, &toks, &t->root, err);
    if (rc)
        goto fail;
    *out = t;
    return GLIM_OK;
fail:
    jinja_template_free(t);
    return rc;
}

void jinja_template_free(struct jinja_template *t)
{
    if (!t)
        return;
    jinja_arena_free(t->arena);
    glim_free(t);
}

int jinja_render(const struct jinja_template *t, struct jinja_arena *a, struct jinja_value ctx,
                 const struct jinja_opts *opts, struct strbuf *out, struct glim_err *err)
{
    struct jenv env = {.a = a, .globals = ctx, .err = err};
    struct jinja_opts o = opts ? *opts : (struct jinja_opts){0};
    env.o.clock = o.clock, env.o.clock_ud = o.clock_ud;
    env.o.max_call_depth = o.max_call_depth > 0 ? o.max_call_depth : DEFAULT_MAX_CALLS;
    env.o.max_output_bytes = o.max_output_bytes ? o.max_output_bytes : DEFAULT_MAX_OUTPUT;
    env.o.max_steps = o.max_steps > 0 ? o.max_steps : DEFAULT_MAX_STEPS;
    struct jframe root = {0};
    return jinja_exec(&env, &root, t->root->b, out);
}
