/*
 * chat.h — render a conversation with a model's own chat template (the GGUF's
 * `tokenizer.chat_template`), the way HF transformers' apply_chat_template does:
 * variables messages, tools (None when absent), add_generation_prompt, bos_token,
 * eos_token, plus any extra keyword arguments (reasoning_strength, current_date,
 * enable_thinking, ...). Muse Glimmer semantics: spec/gguf-contract.md §5,
 * spec/runtime.md §4.5.
 *
 * A chat_template is parsed once (at model load) and is read-only afterwards, so any
 * thread may render with it concurrently; each render uses its own arena.
 */
#ifndef GLIM_CHAT_H
#define GLIM_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/err.h"
#include "base/strbuf.h"

struct chat_template;

struct chat_tool_call {
    const char *id;              /* may be NULL */
    const char *name;            /* function name */
    const char *arguments;       /* JSON text; parsed to an object, kept as a string if not JSON */
};

struct chat_message {
    const char *role;            /* system | user | assistant | tool (developer → system) */
    const char *content;         /* NULL = no content field */
    const char *reasoning;       /* assistant reasoning_content; NULL = none */
    const struct chat_tool_call *tool_calls;
    int n_tool_calls;
    const char *tool_call_id;    /* role tool: which call this answers; may be NULL */
    const char *name;            /* role tool: function name; may be NULL */
};

struct chat_request {
    const struct chat_message *messages;
    int n_messages;
    const char *tools_json;      /* JSON array of OpenAI tool objects; NULL = no tools */
    const char *kwargs_json;     /* JSON object of extra template variables; may be NULL */
    bool add_generation_prompt;
    const char *bos_token;       /* text of BOS; NULL = undefined in the template */
    const char *eos_token;       /* text of EOS; may be NULL */
    time_t (*clock)(void *ud);   /* strftime_now's clock (tests pin it); NULL = time(NULL) */
    void *clock_ud;
};

/* Parse template text; errors name the line and column. */
int chat_template_new(const char *src, size_t len, struct chat_template **out, struct glim_err *err);
void chat_template_free(struct chat_template *t);

/* Render req; the text is appended to out. Template errors (raise_exception, unknown
 * filter, undefined value misuse, limits) come back as GLIM_EINVAL/GLIM_ERANGE. */
int chat_render(const struct chat_template *t, const struct chat_request *req, struct strbuf *out,
                struct glim_err *err);

/* Render from one JSON object holding the variables as the template sees them:
 * {"messages": [...], "tools": [...], "add_generation_prompt": true, "bos_token": ...,
 *  any kwargs}. Like the server's preparation, null fields of messages are dropped
 * and string tool-call arguments that hold JSON are parsed into objects. `tools` is
 * set to None and `add_generation_prompt` to false when absent. */
int chat_render_json(const struct chat_template *t, const char *json, size_t json_len,
                     time_t (*clock)(void *ud), void *clock_ud, struct strbuf *out,
                     struct glim_err *err);

#endif
