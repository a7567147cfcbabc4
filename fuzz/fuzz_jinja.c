/*
 * fuzz_jinja.c — libFuzzer target: the input is template text, parsed and rendered with
 * a small fixed chat context under tight limits; the same bytes also go through the
 * JSON reader. Any crash, sanitizer report, leak or hang is a bug: hostile templates
 * must end in an error.
 *
 *   cmake -S . -B build-fuzz -DGLIM_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *   cmake --build build-fuzz -j2 --target fuzz_jinja
 *   mkdir -p /tmp/jinja-corpus && ./build-fuzz/fuzz/fuzz_jinja -max_len=8192 -timeout=10 \
 *       /tmp/jinja-corpus ../shared/testdata/chat_templates
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chat/jinja.h"

static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi \\u00e9\"}, {\"type\": \"image\"}]},"
    " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\","
    "  \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f.g\","
    "  \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5], \"c\": {\"d\": \"e\"}}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"ok\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f.g\", \"description\": \"d\","
    "  \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3}";

static time_t fixed_clock(void *ud)
{
    (void)ud;
    return (time_t)1787486400;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jinja_arena *a = jinja_arena_new((size_t)32 << 20);
    if (!a)
        return 0;
    struct glim_err err = {0};
    struct jinja_value ctx, parsed;
    jinja_json_parse(a, (const char *)data, size, &parsed, &err);
    struct jinja_template *t = NULL;
    if (jinja_json_parse(a, CONTEXT, sizeof CONTEXT - 1, &ctx, &err) == GLIM_OK &&
        jinja_template_new((const char *)data, size, &t, &err) == GLIM_OK) {
        struct jinja_opts o = {.clock = fixed_clock, .max_steps = 200000, .max_output_bytes = 1 << 20,
                               .max_call_depth = 16};
        struct strbuf out;
        strbuf_init(&out);
        jinja_render(t, a, ctx, &o, &out, &err);
        strbuf_clear(&out);
    }
    jinja_template_free(t);
    jinja_arena_free(a);
    return 0;
}
