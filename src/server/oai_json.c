/*
 * oai_json.c — the OpenAI request shape in (validated into struct srv_req)
 * and the error envelope out (runtime.md §6.3, §6.6). Any thread; pure
 * functions of their arguments (plus a random id source).
 *
 * Every message names the field, what was expected and what was found:
 * `messages[2].role: expected system|developer|user|assistant|tool, got "robot"`.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srv.h"

int api_fail(struct api_error *e, int status, const char *type, const char *code, const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return GLIM_EINVAL;
}

static int bad(struct api_error *e, const char *fmt, ...) GLIM_PRINTF(2, 3);
static int bad(struct api_error *e, const char *fmt, ...)
{
    e->status = 400;
    e->type = "invalid_request_error";
    e->code = "invalid_value";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return GLIM_EINVAL;
}

char *oai_error_json(const struct api_error *e)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:n, s:o}}", "error", "message", e->msg, "type",
                          e->type ? e->type : "server_error", "param", "code",
                          e->code ? json_string(e->code) : json_null());
    if (!o) {   /* a message that is not UTF-8 (cannot happen: we write them) */
        o = json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", "invalid error message", "type",
                      "server_error", "param", "code");
    }
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static pthread_mutex_t id_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t id_state;

void oai_make_id(const char *prefix, char *out, size_t cap)
{
    pthread_mutex_lock(&id_mu);
    if (!id_state)
        id_state = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)out ^ 1;
    uint64_t a = 0, b = 0;
    for (int i = 0; i < 2; i++) {   /* splitmix64 */
        uint64_t z = (id_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        if (i == 0)
            a = z;
        else
            b = z;
    }
    pthread_mutex_unlock(&id_mu);
    snprintf(out, cap, "%s%016llx%016llx", prefix, (unsigned long long)a, (unsigned long long)b);
}

bool oai_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n || (k == 2 && c < 0xC2))
            return false;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return false;
        if (k == 3 && ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] >= 0xA0)))
            return false;
        if (k == 4 && ((c == 0xF0 && p[i + 1] < 0x90) || c > 0xF4 || (c == 0xF4 && p[i + 1] >= 0x90)))
            return false;
        i += k;
    }
    return true;
}

/* ---- field readers ------------------------------------------------------ */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Number in [lo, hi] (NULL/absent: untouched). */
static int get_num(json_t *o, const char *key, double lo, double hi, double *out, struct api_error *e)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return GLIM_OK;
    if (!json_is_number(v))
        return bad(e, "%s: expected a number, got %s", key, type_name(v));
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return bad(e, "%s: expected a number in [%g, %g], got %g", key, lo, hi, d);
    *out = d;
    return GLIM_OK;
}

static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, bool *present,
                   struct api_error *e)
{
    json_t *v = json_object_get(o, key);
    if (present)
        *present = false;
    if (!v || json_is_null(v))
        return GLIM_OK;
    long long x;
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9e15)
        x = (long long)json_real_value(v);
    else
        return bad(e, "%s: expected an integer, got %s", key, type_name(v));
    if (x < lo || x > hi)
        return bad(e, "%s: expected an integer in [%lld, %lld], got %lld", key, lo, hi, x);
    *out = x;
    if (present)
        *present = true;
    return GLIM_OK;
}

static int get_bool(json_t *o, const char *key, bool *out, struct api_error *e)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return GLIM_OK;
    if (!json_is_boolean(v))
        return bad(e, "%s: expected a boolean, got %s", key, type_name(v));
    *out = json_is_true(v);
    return GLIM_OK;
}

/* ---- messages and tools ------------------------------------------------ */

static int check_content(json_t *c, size_t i, struct api_error *e)
{
    if (!c || json_is_null(c) || json_is_string(c))
        return GLIM_OK;
    if (!json_is_array(c))
        return bad(e, "messages[%zu].content: expected a string, an array of parts or null, got %s", i,
                   type_name(c));
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        if (!json_is_object(part))
            return bad(e, "messages[%zu].content[%zu]: expected an object, got %s", i, k, type_name(part));
        json_t *t = json_object_get(part, "type");
        if (!json_is_string(t))
            return bad(e, "messages[%zu].content[%zu].type: expected a string", i, k);
        if (!strcmp(json_string_value(t), "text") && !json_is_string(json_object_get(part, "text")))
            return bad(e, "messages[%zu].content[%zu].text: expected a string", i, k);
        if (!strcmp(json_string_value(t), "image_url"))
            return api_fail(e, 400, "invalid_request_error", "invalid_image",
                            "messages[%zu].content[%zu]: this model takes no image input", i, k);
    }
    return GLIM_OK;
}

static int check_tool_calls(json_t *tc, size_t i, struct api_error *e)
{
    if (!tc || json_is_null(tc))
        return GLIM_OK;
    if (!json_is_array(tc))
        return bad(e, "messages[%zu].tool_calls: expected an array, got %s", i, type_name(tc));
    size_t k;
    json_t *c;
    json_array_foreach(tc, k, c) {
        json_t *f = json_object_get(c, "function");
        if (!json_is_object(c) || !json_is_object(f))
            return bad(e, "messages[%zu].tool_calls[%zu]: expected {\"function\": {...}}", i, k);
        if (!json_is_string(json_object_get(f, "name")))
            return bad(e, "messages[%zu].tool_calls[%zu].function.name: expected a string", i, k);
        json_t *a = json_object_get(f, "arguments");
        if (a && !json_is_string(a) && !json_is_object(a))
            return bad(e, "messages[%zu].tool_calls[%zu].function.arguments: expected a JSON string, got %s",
                       i, k, type_name(a));
    }
    return GLIM_OK;
}

static int check_messages(json_t *msgs, struct api_error *e)
{
    if (!msgs)
        return bad(e, "messages: required");
    if (!json_is_array(msgs))
        return bad(e, "messages: expected an array, got %s", type_name(msgs));
    if (json_array_size(msgs) == 0)
        return bad(e, "messages: expected at least one message");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m))
            return bad(e, "messages[%zu]: expected an object, got %s", i, type_name(m));
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return bad(e, "messages[%zu].role: expected a string", i);
        const char *r = json_string_value(role);
        if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && strcmp(r, "assistant") &&
            strcmp(r, "tool"))
            return bad(e, "messages[%zu].role: expected system|developer|user|assistant|tool, got \"%.40s\"", i, r);
        int rc = check_content(json_object_get(m, "content"), i, e);
        if (rc == GLIM_OK)
            rc = check_tool_calls(json_object_get(m, "tool_calls"), i, e);
        if (rc)
            return rc;
        json_t *rc_ = json_object_get(m, "reasoning_content");
        if (rc_ && !json_is_null(rc_) && !json_is_string(rc_))
            return bad(e, "messages[%zu].reasoning_content: expected a string", i);
    }
    return GLIM_OK;
}

static int check_tools(struct srv_req *r, json_t *tools, struct api_error *e)
{
    if (!tools || json_is_null(tools))
        return GLIM_OK;
    if (!json_is_array(tools))
        return bad(e, "tools: expected an array, got %s", type_name(tools));
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_object(f))
            return bad(e, "tools[%zu]: expected {\"type\": \"function\", \"function\": {...}}", i);
        json_t *name = json_object_get(f, "name");
        if (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > 256)
            return bad(e, "tools[%zu].function.name: expected a non-empty string", i);
        json_t *p = json_object_get(f, "parameters");
        if (p && !json_is_null(p) && !json_is_object(p))
            return bad(e, "tools[%zu].function.parameters: expected an object, got %s", i, type_name(p));
    }
    if (json_array_size(tools))
        r->tools = tools;
    return GLIM_OK;
}

static bool has_tool(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), name))
            return true;
    }
    return false;
}

static int parse_tool_choice(struct srv_req *r, json_t *tc, struct api_error *e)
{
    r->tool_choice = SRV_TOOLS_AUTO;
    if (!tc || json_is_null(tc))
        return GLIM_OK;
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (!strcmp(s, "auto"))
            r->tool_choice = SRV_TOOLS_AUTO;
        else if (!strcmp(s, "none"))
            r->tool_choice = SRV_TOOLS_NONE;
        else if (!strcmp(s, "required"))
            r->tool_choice = SRV_TOOLS_REQUIRED;
        else
            return bad(e, "tool_choice: expected auto|none|required or {\"type\":\"function\",...}, got \"%.40s\"", s);
    } else if (json_is_object(tc)) {
        json_t *name = json_object_get(json_object_get(tc, "function"), "name");
        if (!json_is_string(name))
            return bad(e, "tool_choice.function.name: expected a string");
        r->tool_choice = SRV_TOOLS_NAMED;
        r->tool_name = json_string_value(name);
    } else {
        return bad(e, "tool_choice: expected a string or an object, got %s", type_name(tc));
    }
    if (r->tool_choice == SRV_TOOLS_REQUIRED || r->tool_choice == SRV_TOOLS_NAMED) {
        if (!r->tools)
            return bad(e, "tool_choice: '%s' needs a non-empty tools list",
                       r->tool_choice == SRV_TOOLS_NAMED ? r->tool_name : "required");
        if (r->tool_choice == SRV_TOOLS_NAMED && !has_tool(r->tools, r->tool_name))
            return bad(e, "tool_choice.function.name: '%.80s' is not in tools", r->tool_name);
    }
    if (r->tool_choice == SRV_TOOLS_NONE)
        r->tools = NULL;
    return GLIM_OK;
}

static int parse_stop(struct srv_req *r, json_t *stop, struct api_error *e)
{
    if (!stop || json_is_null(stop))
        return GLIM_OK;
    json_t *one = json_is_string(stop) ? stop : NULL;
    if (!one && !json_is_array(stop))
        return bad(e, "stop: expected a string or an array of strings, got %s", type_name(stop));
    size_t n = one ? 1 : json_array_size(stop);
    if (n > SRV_MAX_STOPS)
        return bad(e, "stop: at most %d strings, got %zu", SRV_MAX_STOPS, n);
    for (size_t i = 0; i < n; i++) {
        json_t *s = one ? one : json_array_get(stop, i);
        if (!json_is_string(s))
            return bad(e, "stop[%zu]: expected a string, got %s", i, type_name(s));
        if (json_string_length(s) == 0)
            continue;
        if (json_string_length(s) > 256)
            return bad(e, "stop[%zu]: longer than 256 bytes", i);
        r->stops[r->n_stops] = json_string_value(s);
        r->stop_lens[r->n_stops++] = json_string_length(s);
    }
    return GLIM_OK;
}

static int parse_reasoning(struct srv_req *r, json_t *root, struct api_error *e)
{
    static const char *const levels[] = {"low", "medium", "high"};
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    json_t *effort = json_object_get(root, "reasoning_effort");
    json_t *strength = NULL;
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return bad(e, "chat_template_kwargs: expected an object, got %s", type_name(kw));
        r->return_reasoning = json_is_true(json_object_get(kw, "return_reasoning"));
        strength = json_object_get(kw, "reasoning_strength");
    }
    if (!strength || json_is_null(strength))
        strength = effort;
    if (!strength || json_is_null(strength))
        return GLIM_OK;
    const char *s = json_string_value(strength);
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, levels[i])) {
            r->reasoning_strength = levels[i];
            return GLIM_OK;
        }
    if (s && !strcmp(s, "minimal")) {
        r->reasoning_strength = "low";
        return GLIM_OK;
    }
    return bad(e, "%s: expected low|medium|high", strength == effort ? "reasoning_effort"
                                                                      : "chat_template_kwargs.reasoning_strength");
}

/* n, logprobs, logit_bias, response_format: accepted only as no-ops. */
static int check_unsupported(json_t *root, struct api_error *e)
{
    long long n = 1;
    bool has_n;
    if (get_int(root, "n", 1, 128, &n, &has_n, e))
        return GLIM_EINVAL;
    const char *what = NULL;
    json_t *lb = json_object_get(root, "logit_bias"), *rf = json_object_get(root, "response_format");
    if (n != 1)
        what = "n>1";
    else if (json_is_true(json_object_get(root, "logprobs")))
        what = "logprobs";
    else if (lb && !json_is_null(lb) && !(json_is_object(lb) && json_object_size(lb) == 0))
        what = "logit_bias";
    else if (rf && !json_is_null(rf) &&
             !(json_is_object(rf) && json_is_string(json_object_get(rf, "type")) &&
               !strcmp(json_string_value(json_object_get(rf, "type")), "text")))
        what = "response_format (only 'text')";
    else if (json_is_false(json_object_get(root, "parallel_tool_calls")))
        what = "parallel_tool_calls=false";
    if (what)
        return api_fail(e, 400, "invalid_request_error", "unsupported_parameter", "unsupported parameter: %s",
                        what);
    return GLIM_OK;
}

static int parse_sampling(struct srv_req *r, json_t *root, struct api_error *e)
{
    double t = 0, top_p = 1, min_p = 0, pres = 0, freq = 0;
    long long top_k = 0, seed = 0, mt = -1, mct = -1;
    bool has_mt, has_mct;
    if (get_num(root, "temperature", 0, 2, &t, e) || get_num(root, "top_p", 0, 1, &top_p, e) ||
        get_num(root, "min_p", 0, 1, &min_p, e) || get_num(root, "presence_penalty", -2, 2, &pres, e) ||
        get_num(root, "frequency_penalty", -2, 2, &freq, e) ||
        get_int(root, "top_k", 0, 2147483647LL, &top_k, NULL, e) ||
        get_int(root, "seed", 0, INT64_MAX, &seed, NULL, e) ||
        get_int(root, "max_tokens", 1, INT64_MAX, &mt, &has_mt, e) ||
        get_int(root, "max_completion_tokens", 1, INT64_MAX, &mct, &has_mct, e))
        return GLIM_EINVAL;
    if (top_p <= 0)
        return bad(e, "top_p: expected a number in (0, 1], got 0");
    sampler_params_init(&r->sp);
    r->sp.temperature = (float)t;
    r->sp.top_p = (float)top_p;
    r->sp.min_p = (float)min_p;
    r->sp.top_k = (int32_t)top_k;
    r->sp.seed = (uint64_t)seed;
    r->sp.presence_penalty = (float)pres;
    r->sp.frequency_penalty = (float)freq;
    if (pres != 0 || freq != 0)
        r->sp.penalty_last_n = 64;
    r->max_tokens = has_mct ? mct : has_mt ? mt : -1;
    return GLIM_OK;
}

static int parse_stream(struct srv_req *r, json_t *root, struct api_error *e)
{
    if (get_bool(root, "stream", &r->stream, e))
        return GLIM_EINVAL;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return bad(e, "stream_options: expected an object, got %s", type_name(so));
        if (get_bool(so, "include_usage", &r->include_usage, e))
            return GLIM_EINVAL;
    }
    return GLIM_OK;
}

static int parse_prompt(struct srv_req *r, json_t *root, struct api_error *e)
{
    json_t *p = json_object_get(root, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1)
        p = json_array_get(p, 0);
    if (!json_is_string(p))
        return bad(e, "prompt: expected a string%s", p ? "" : " (required)");
    r->prompt = json_string_value(p);
    r->prompt_len = json_string_length(p);
    return GLIM_OK;
}

int oai_parse_request(const char *body, size_t len, bool is_chat, const char *model_id, struct srv_req *r,
                      struct api_error *e)
{
    memset(r, 0, sizeof *r);
    r->is_chat = is_chat;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return bad(e, "malformed JSON body at line %d column %d: %s", je.line, je.column, je.text);
    r->root = root;
    if (!json_is_object(root))
        return bad(e, "body: expected a JSON object, got %s", type_name(root));
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model) && !json_is_string(model))
        return bad(e, "model: expected a string, got %s", type_name(model));
    if (json_is_string(model) && strcmp(json_string_value(model), model_id))
        return api_fail(e, 404, "invalid_request_error", "model_not_found", "model '%.100s' is not served here (serving '%s')",
                        json_string_value(model), model_id);
    if (is_chat) {
        r->messages = json_object_get(root, "messages");
        if (check_messages(r->messages, e))
            return GLIM_EINVAL;
    } else if (parse_prompt(r, root, e)) {
        return GLIM_EINVAL;
    }
    if (parse_sampling(r, root, e) || check_unsupported(root, e) || parse_stream(r, root, e) ||
        parse_stop(r, json_object_get(root, "stop"), e) || check_tools(r, json_object_get(root, "tools"), e) ||
        parse_tool_choice(r, json_object_get(root, "tool_choice"), e) || parse_reasoning(r, root, e))
        return GLIM_EINVAL;
    json_t *sid = json_object_get(root, "session_id");
    if (sid && !json_is_null(sid)) {
        if (!json_is_string(sid))
            return bad(e, "session_id: expected a string, got %s", type_name(sid));
        if (json_string_length(sid) > SRV_SESSION_ID_MAX || json_string_length(sid) == 0)
            return api_fail(e, 400, "invalid_request_error", "invalid_session_id",
                            "session_id: expected 1..%d printable ASCII characters", SRV_SESSION_ID_MAX);
        memcpy(r->session_id, json_string_value(sid), json_string_length(sid) + 1);
    }
    json_t *to = json_object_get(root, "glim_test_output");
    if (json_is_string(to)) {
        r->test_output = json_string_value(to);
        r->test_output_len = json_string_length(to);
    }
    long long hold = 0;
    if (get_int(root, "glim_test_hold_until", 0, INT64_MAX, &hold, NULL, e))
        return GLIM_EINVAL;
    r->test_hold_until = hold;
    return GLIM_OK;
}

void oai_req_clear(struct srv_req *r)
{
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

static bool session_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SRV_SESSION_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7E)
            return false;
    return true;
}

int oai_session_resolve(struct srv_req *r, const char *h_executorch, const char *h_session,
                        const char *h_affinity, struct api_error *e)
{
    if (!r->session_id[0]) {
        const char *h = h_executorch ? h_executorch : h_session ? h_session : h_affinity;
        if (h) {
            if (strlen(h) > SRV_SESSION_ID_MAX)
                return api_fail(e, 400, "invalid_request_error", "invalid_session_id",
                                "session id header: expected 1..%d printable ASCII characters", SRV_SESSION_ID_MAX);
            snprintf(r->session_id, sizeof r->session_id, "%s", h);
        }
    }
    if (r->session_id[0] && !session_id_ok(r->session_id))
        return api_fail(e, 400, "invalid_request_error", "invalid_session_id",
                        "session id: expected 1..%d printable ASCII characters (0x21-0x7E)", SRV_SESSION_ID_MAX);
    return GLIM_OK;
}
#endif
