/* fuzz_toolcall.c — libFuzzer target for the streaming ATEM parser.
 *
 * Input: byte 0 picks the tool set and byte 1 seeds the chunk sizes; the
 * rest is model output, fed in pseudo-random pieces. The streamed deltas
 * must concatenate to the one-shot toolcall_process() result, and the
 * result must be identical. Any disagreement traps. */
#include <stdint.h>
#include <string.h>

#include "chat/toolcall.h"

static const struct toolcall_param PARAMS[] = {
    { "city", "string" }, { "a", "integer" }, { "x", "number" }, { "flag", "boolean" }, { "o", NULL },
};
static const struct toolcall_tool TOOLS[] = {
    { "get_weather", PARAMS, 5 }, { "add", PARAMS, 5 }, { "f", NULL, 0 },
};
static const char *const SPECIALS[] = { "<|eot|>", "<|end_of_text|>", "<|patch|>", "<|start|>" };

struct sink {
    struct strbuf r, c;
};

static int on_event(void *ctx, const struct toolcall_event *ev)
{
    struct sink *k = ctx;
    if (ev->kind == TOOLCALL_EV_REASONING)
        strbuf_append(&k->r, ev->text, ev->len);
    else if (ev->kind == TOOLCALL_EV_CONTENT)
        strbuf_append(&k->c, ev->text, ev->len);
    return GLIM_OK;
}

static int same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct toolcall_config cfg = { (data[0] & 1) ? TOOLS : NULL, (data[0] & 1) ? 3 : 0,
                                   (data[0] & 2) ? SPECIALS : NULL, (data[0] & 2) ? 4 : 0, 1 };
    uint32_t rnd = data[1] * 2654435761u + 1;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;

    struct toolcall_result want = { 0 };
    if (toolcall_process(s, n, &cfg, &want, NULL))
        return 0;
    struct sink k;
    memset(&k, 0, sizeof k);
    struct toolcall_stream *st = NULL;
    if (toolcall_stream_new(&cfg, on_event, &k, &st, NULL))
        goto out;
    for (size_t at = 0; at < n;) {
        rnd = rnd * 1664525u + 1013904223u;
        size_t len = 1 + (rnd >> 24) % 16;
        if (len > n - at)
            len = n - at;
        if (toolcall_stream_feed(st, s + at, len, NULL))
            __builtin_trap();
        at += len;
    }
    if (toolcall_stream_finish(st, NULL))
        __builtin_trap();
    const struct toolcall_result *got = toolcall_stream_result(st);
    if (toolcall_stream_is_inconsistent(st) || !same(got->reasoning, want.reasoning) ||
        !same(got->content, want.content) || got->n_calls != want.n_calls)
        __builtin_trap();
    if (k.r.len != want.reasoning_len || memcmp(strbuf_cstr(&k.r), want.reasoning ? want.reasoning : "", k.r.len) ||
        k.c.len != want.content_len || memcmp(strbuf_cstr(&k.c), want.content ? want.content : "", k.c.len))
        __builtin_trap();
    for (int i = 0; i < want.n_calls; i++)
        if (strcmp(got->calls[i].arguments, want.calls[i].arguments) || strcmp(got->calls[i].name, want.calls[i].name))
            __builtin_trap();
out:
    toolcall_stream_free(st);
    strbuf_clear(&k.r);
    strbuf_clear(&k.c);
    toolcall_result_clear(&want);
    return 0;
}
