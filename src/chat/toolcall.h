/*
 * toolcall.h — ATEM tool calls in model output → OpenAI tool_calls
 * (runtime.md §5, routing §4.6).
 *
 *   toolcall_parse()    §5.2 on one complete text (parser level, no routing)
 *   toolcall_process()  the server pipeline on complete output: reasoning
 *                       split → ATEM parse of the visible text → content filter
 *   toolcall_stream_*   the same pipeline fed in arbitrary pieces. Content and
 *                       reasoning deltas are emitted as soon as no later text
 *                       can change them (possible tag / header / terminator
 *                       prefixes are held back); tool calls are emitted by
 *                       finish(), because §5.2 is all-or-nothing: one call to
 *                       an undeclared tool anywhere turns every call back into
 *                       content. finish() yields exactly toolcall_process().
 *
 * Thread: a stream belongs to one thread; the others are pure functions.
 */
#ifndef GLIM_TOOLCALL_H
#define GLIM_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/strbuf.h"

struct toolcall_param {
    const char *name;
    const char *type;   /* "string" "integer" "number" "boolean"; NULL/other = parse as JSON */
};

struct toolcall_tool {
    const char                  *name;
    const struct toolcall_param *params;   /* borrowed */
    int                          n_params;
};

struct toolcall_config {
    const struct toolcall_tool *tools;      /* borrowed; NULL or n_tools 0 = ATEM parsing off */
    int                         n_tools;
    const char *const          *specials;   /* borrowed: tokenizer special-token strings, may be NULL */
    int                         n_specials;
    uint64_t                    id_seed;    /* call ids; 0 = random */
};

struct toolcall_call {
    int   index;        /* 0.. within the turn */
    char *id;           /* owned: "call-" + 32 hex (UUID4 shape) */
    char *name;         /* owned */
    char *arguments;    /* owned: JSON object text */
};

struct toolcall_result {
    char                 *reasoning;   /* owned; NULL = no reasoning message */
    char                 *content;     /* owned; NULL = empty content */
    size_t                reasoning_len, content_len;   /* the text may hold NUL bytes */
    struct toolcall_call *calls;       /* owned */
    int                   n_calls;
};

void toolcall_result_clear(struct toolcall_result *r);

/* §5.2 on a complete text: normal text and calls (ids left NULL).
 * GLIM_OK or GLIM_ENOMEM; malformed markup is not an error. */
int toolcall_parse(const char *s, size_t n, const struct toolcall_tool *tools, int n_tools,
                   struct strbuf *normal,            /* OUT: reset, then filled */
                   struct toolcall_result *calls,    /* OUT: calls/n_calls set */
                   struct glim_err *err);

int toolcall_process(const char *s, size_t n, const struct toolcall_config *cfg,
                     struct toolcall_result *out,    /* OUT: caller clears */
                     struct glim_err *err);

enum toolcall_event_kind {
    TOOLCALL_EV_CONTENT,      /* text, len: a content delta */
    TOOLCALL_EV_REASONING,    /* text, len: a reasoning delta ("\n\n" between messages) */
    TOOLCALL_EV_CALL_START,   /* index, id, name */
    TOOLCALL_EV_CALL_ARGS,    /* index, text, len: a fragment of the arguments JSON */
    TOOLCALL_EV_CALL_END,     /* index */
};

struct toolcall_event {
    int         kind;
    int         index;
    const char *id, *name;    /* borrowed for the callback only */
    const char *text;
    size_t      len;
};

/* Return GLIM_OK to go on; any other code stops the stream with that code. */
typedef int (*toolcall_event_fn)(void *ctx, const struct toolcall_event *ev);

struct toolcall_stream;

int  toolcall_stream_new(const struct toolcall_config *cfg,   /* copied; arrays borrowed */
                         toolcall_event_fn fn, void *ctx,
                         struct toolcall_stream **out, struct glim_err *err);
void toolcall_stream_free(struct toolcall_stream *st);
int  toolcall_stream_feed(struct toolcall_stream *st, const char *s, size_t n, struct glim_err *err);
int  toolcall_stream_finish(struct toolcall_stream *st, struct glim_err *err);
/* After finish: the complete result (owned by the stream). */
const struct toolcall_result *toolcall_stream_result(const struct toolcall_stream *st);
/* True if a streamed delta turned out not to be a prefix of the final text
 * (a bug by construction; tests and the fuzzer check it stays false). */
bool toolcall_stream_is_inconsistent(const struct toolcall_stream *st);

#endif
