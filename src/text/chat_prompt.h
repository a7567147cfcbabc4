/*
 * chat_prompt.h — from a conversation to token ids: render the model's chat
 * template, then tokenize so that the template's own text may contain control
 * tokens while text that came from a user (message contents, reasoning, tool
 * arguments and results) never does. Any thread (template and vocab are
 * read-only).
 */
#ifndef GLIM_CHAT_PROMPT_H
#define GLIM_CHAT_PROMPT_H

#include "../chat/chat.h"
#include "tok.h"

struct gguf_file;

/* Render req with t and append the ids to out. BOS follows the vocabulary's
 * add_bos rule, counted once even when the template writes the BOS text. */
int chat_prompt_encode(const struct chat_template *t, const struct tok_vocab *v,
                       const struct chat_request *req, struct tok_ids *out, struct glim_err *err);

/* The GGUF's tokenizer.chat_template, parsed. GLIM_ENOTFOUND when absent. */
int chat_template_from_gguf(const struct gguf_file *f, struct chat_template **out, struct glim_err *err);

/* `glim run --chat`: [system] + user message, generation prompt added. */
int chat_encode_user_prompt(const struct gguf_file *f, const struct tok_vocab *v, const char *system,
                            const char *user, struct tok_ids *out, struct glim_err *err);

#endif
