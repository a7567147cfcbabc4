/*
 * jinja.h — a Jinja2-compatible template engine, enough for the chat templates that
 * GGUF files embed (Muse Glimmer, Llama 3, Qwen 3, Gemma 3) under the conventions of
 * HF transformers: trim_blocks, lstrip_blocks, loop controls, raise_exception,
 * strftime_now and a json.dumps-style tojson.
 *
 * Values live in an arena (one per render) with a byte budget, so a hostile template
 * or context ends in an error instead of exhausting memory. A template is parsed once
 * and may be rendered many times; it is read-only while rendering. Not thread-safe
 * per object: one thread uses a given arena at a time.
 */
#ifndef GLIM_JINJA_H
#define GLIM_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/err.h"
#include "base/strbuf.h"

enum jinja_type {
    JINJA_UNDEFINED,
    JINJA_NONE,
    JINJA_BOOL,
    JINJA_INT,
    JINJA_FLOAT,
    JINJA_STR,
    JINJA_LIST,
    JINJA_DICT,    /* insertion-ordered; also namespace() objects */
    JINJA_FUNC,    /* builtin global function */
    JINJA_MACRO,   /* {% macro %} closure */
    JINJA_LOOP,    /* the `loop` variable of a for loop */
};

struct jstr { size_t len; char s[]; };        /* NUL-terminated, arena-owned */
struct jlist;
struct jdict;

struct jinja_value {
    enum jinja_type type;
    union {
        bool          b;
        int64_t       i;
        double        f;
        struct jstr  *s;     /* STR; UNDEFINED: the missing name or NULL */
        struct jlist *l;
        struct jdict *d;
        const void   *p;     /* FUNC, MACRO, LOOP */
    } u;
};

struct jinja_arena;

/* Arena with a byte budget (0 = 256 MiB); every value of one render lives here. */
struct jinja_arena *jinja_arena_new(size_t budget_bytes);
void jinja_arena_free(struct jinja_arena *a);

/* Building a context from C. Functions taking the arena return GLIM_ENOMEM when the
 * budget or memory runs out. */
struct jinja_value jinja_undefined(void);
struct jinja_value jinja_none(void);
struct jinja_value jinja_bool(bool b);
struct jinja_value jinja_int(int64_t i);
struct jinja_value jinja_float(double f);
int jinja_str(struct jinja_arena *a, const char *s, size_t n, struct jinja_value *out);
int jinja_cstr(struct jinja_arena *a, const char *s, struct jinja_value *out);
int jinja_list_new(struct jinja_arena *a, struct jinja_value *out);
int jinja_list_push(struct jinja_arena *a, struct jinja_value list, struct jinja_value v);
int jinja_dict_new(struct jinja_arena *a, struct jinja_value *out);
/* Set key (replacing an equal key in place, as a Python dict does). */
int jinja_dict_set(struct jinja_arena *a, struct jinja_value dict, struct jinja_value key,
                   struct jinja_value v);
int jinja_dict_setc(struct jinja_arena *a, struct jinja_value dict, const char *key,
                    struct jinja_value v);
/* Lookup by string key; JINJA_UNDEFINED when absent. */
struct jinja_value jinja_dict_getc(struct jinja_value dict, const char *key);
size_t jinja_len(struct jinja_value v);     /* items of a list/dict, code points of a string */

/* Parse JSON text into values (objects keep their key order). Depth is bounded. */
int jinja_json_parse(struct jinja_arena *a, const char *text, size_t len,
                     struct jinja_value *out, struct glim_err *err);

/* json.dumps options; {0} with indent = -1 is HF's tojson default. */
struct jinja_json_opts {
    int indent;                /* < 0: one line */
    bool sort_keys;
    bool ensure_ascii;         /* escape non-ASCII as \uXXXX */
    const char *item_sep;      /* NULL: ", " (one line) or "," (indented) */
    const char *key_sep;       /* NULL: ": " */
};
/* Append Python's str(v) / json.dumps(v, ...) to sb. */
int jinja_to_str(struct strbuf *sb, struct jinja_value v, struct glim_err *err);
int jinja_to_json(struct strbuf *sb, struct jinja_value v, const struct jinja_json_opts *o,
                  struct glim_err *err);

struct jinja_template;

/* Parse template text (len bytes, need not be NUL-terminated). Syntax errors say line
 * and column: "line 3 col 7: unknown tag 'frobnicate'". */
int jinja_template_new(const char *src, size_t len, struct jinja_template **out,
                       struct glim_err *err);
void jinja_template_free(struct jinja_template *t);

struct jinja_opts {
    time_t (*clock)(void *ud);  /* strftime_now's clock; NULL = time(NULL) */
    void   *clock_ud;
    int     max_call_depth;     /* macro recursion; 0 = 64 */
    size_t  max_output_bytes;   /* any one output buffer; 0 = 64 MiB */
    int64_t max_steps;          /* evaluated nodes + loop iterations; 0 = 50 million */
};

/* Render t with the variables of ctx (a dict) and append the text to out.
 * opts may be NULL. Errors carry the line and column of the failing node. */
int jinja_render(const struct jinja_template *t, struct jinja_arena *a, struct jinja_value ctx,
                 const struct jinja_opts *opts, struct strbuf *out, struct glim_err *err);

#endif
