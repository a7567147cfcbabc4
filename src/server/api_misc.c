/*
 * api_misc.c — the small endpoints: /health, /v1/models, /metrics
 * (Prometheus text), /tokenize, /detokenize and the session routes
 * (DELETE /v1/sessions/{id}, POST /v1/sessions/{id}/reset).
 * Connection threads; the vocabulary is shared read-only, session
 * operations go through the scheduler like any other job.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static void reply_obj(struct http_reply *out, int status, json_t *o)
{
    http_reply_json(out, status, o ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

void api_health(struct srv *S, const struct http_req *r, struct http_reply *out)
{
    (void)S, (void)r;
    reply_obj(out, 200, json_pack("{s:s}", "status", "ok"));
}

void api_models(struct srv *S, const struct http_req *r, struct http_reply *out)
{
    (void)r;
    reply_obj(out, 200,
              json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:I}]}", "object", "list", "data", "id", S->model_id,
                        "object", "model", "created", (json_int_t)S->created, "owned_by", "glim", "context_length",
                        (json_int_t)S->n_ctx));
}

void api_metrics(struct srv *S, const struct http_req *r, struct http_reply *out)
{
    (void)r;
    struct sched_stats st;
    sched_get_stats(S->sched, &st);
    struct strbuf sb;
    strbuf_init(&sb);
    double pf = st.prefill_s > 0 ? st.n_prefill_tokens / st.prefill_s : 0;
    double dc = st.decode_s > 0 ? st.n_completion_tokens / st.decode_s : 0;
    strbuf_printf(&sb,
                  "# HELP glim_http_requests_total HTTP requests received.\n# TYPE glim_http_requests_total counter\n"
                  "glim_http_requests_total %lld\n"
                  "glim_http_responses_4xx_total %lld\nglim_http_responses_5xx_total %lld\n"
                  "# HELP glim_requests_total Generation requests admitted by the scheduler.\n"
                  "# TYPE glim_requests_total counter\nglim_requests_total %lld\n"
                  "# TYPE glim_prompt_tokens_total counter\nglim_prompt_tokens_total %lld\n"
                  "# HELP glim_prefill_tokens_total Prompt tokens actually evaluated (not reused from a session).\n"
                  "# TYPE glim_prefill_tokens_total counter\nglim_prefill_tokens_total %lld\n"
                  "# TYPE glim_completion_tokens_total counter\nglim_completion_tokens_total %lld\n"
                  "# TYPE glim_prefill_seconds_total counter\nglim_prefill_seconds_total %.6f\n"
                  "# TYPE glim_decode_seconds_total counter\nglim_decode_seconds_total %.6f\n"
                  "# TYPE glim_prefill_tokens_per_second gauge\nglim_prefill_tokens_per_second %.3f\n"
                  "# TYPE glim_decode_tokens_per_second gauge\nglim_decode_tokens_per_second %.3f\n"
                  "# TYPE glim_sessions gauge\nglim_sessions %d\nglim_sessions_max %d\n"
                  "# TYPE glim_requests_active gauge\nglim_requests_active %d\n"
                  "# TYPE glim_queue_depth gauge\nglim_queue_depth %d\n",
                  (long long)atomic_load(&S->n_http), (long long)atomic_load(&S->n_http_4xx),
                  (long long)atomic_load(&S->n_http_5xx), (long long)st.n_requests, (long long)st.n_prompt_tokens,
                  (long long)st.n_prefill_tokens, (long long)st.n_completion_tokens, st.prefill_s, st.decode_s, pf,
                  dc, st.n_sessions, S->cfg.max_sessions, st.n_active, st.n_queued);
    strbuf_printf(&sb,
                  "# HELP glim_requests_rejected_total Requests answered 429: every session slot was busy.\n"
                  "# TYPE glim_requests_rejected_total counter\nglim_requests_rejected_total %lld\n",
                  (long long)st.n_rejected);
    if (S->draft)
        strbuf_printf(&sb,
                      "# HELP glim_dflash_requests_total Requests decoded with DFlash.\n"
                      "# TYPE glim_dflash_requests_total counter\nglim_dflash_requests_total %lld\n"
                      "# TYPE glim_dflash_cycles_total counter\nglim_dflash_cycles_total %lld\n"
                      "# TYPE glim_dflash_speculative_cycles_total counter\n"
                      "glim_dflash_speculative_cycles_total %lld\n"
                      "# HELP glim_dflash_accepted_tokens_total Draft tokens the target accepted.\n"
                      "# TYPE glim_dflash_accepted_tokens_total counter\nglim_dflash_accepted_tokens_total %lld\n",
                      (long long)st.n_dflash_requests, (long long)st.n_dflash_cycles,
                      (long long)st.n_dflash_spec_cycles, (long long)st.n_dflash_accepted);
    out->status = 200;
    out->body = sb.data;
    out->body_len = sb.len;
    out->content_type = "text/plain; version=0.0.4";
}

static json_t *parse_body(const struct http_req *r, struct api_error *e)
{
    json_error_t je;
    json_t *o = json_loadb(r->body, r->body_len, 0, &je);
    if (!o)
        api_fail(e, 400, "invalid_request_error", "invalid_value", "malformed JSON body at line %d column %d: %s",
                 je.line, je.column, je.text);
    else if (!json_is_object(o)) {
        api_fail(e, 400, "invalid_request_error", "invalid_value", "body: expected a JSON object");
        json_decref(o);
        o = NULL;
    }
    return o;
}

void api_tokenize(struct srv *S, const struct http_req *r, struct http_reply *out)
{
    struct api_error e;
    json_t *o = parse_body(r, &e);
    if (!o)
        return http_reply_error(out, &e);
    json_t *c = json_object_get(o, "content");
    if (!c)
        c = json_object_get(o, "prompt");
    json_t *as = json_object_get(o, "add_special"), *ps = json_object_get(o, "parse_special");
    if (!json_is_string(c) || (as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps))) {
        json_decref(o);
        api_fail(&e, 400, "invalid_request_error", "invalid_value",
                 "expected {\"content\": string, \"add_special\"?: bool, \"parse_special\"?: bool}");
        return http_reply_error(out, &e);
    }
    struct tok_ids ids;
    struct glim_err err = {0};
    tok_ids_init(&ids);
    unsigned fl = (json_is_true(as) ? TOK_ADD_SPECIAL : 0) | (json_is_true(ps) ? TOK_PARSE_SPECIAL : 0);
    if (tok_encode(S->v, json_string_value(c), json_string_length(c), fl, &ids, &err)) {
        api_fail(&e, 500, "server_error", NULL, "%s", err.msg);
        http_reply_error(out, &e);
    } else {
        json_t *a = json_array();
        for (size_t i = 0; i < ids.n; i++)
            json_array_append_new(a, json_integer(ids.data[i]));
        reply_obj(out, 200, json_pack("{s:o}", "tokens", a));
    }
    tok_ids_clear(&ids);
    json_decref(o);
}

void api_detokenize(struct srv *S, const struct http_req *r, struct http_reply *out)
{
    struct api_error e;
    json_t *o = parse_body(r, &e);
    if (!o)
        return http_reply_error(out, &e);
    json_t *t = json_object_get(o, "tokens");
    size_t n = json_array_size(t), i;
    json_t *v;
    bool ok = json_is_array(t) && n <= 1000000;
    struct tok_stream ts;
    struct strbuf sb;
    strbuf_init(&sb);
    tok_stream_init(&ts, S->v, TOK_DECODE_SPECIAL);
    json_array_foreach(t, i, v) {
        if (!ok)
            break;
        json_int_t id = json_integer_value(v);
        ok = json_is_integer(v) && id >= 0 && id < tok_n_vocab(S->v);
        if (ok)
            tok_stream_feed(&ts, (int32_t)id, &sb);
    }
    tok_stream_flush(&ts, &sb);
    if (!ok) {
        api_fail(&e, 400, "invalid_request_error", "invalid_value",
                 "tokens: expected an array of token ids in [0, %d)", tok_n_vocab(S->v));
        http_reply_error(out, &e);
    } else {
        reply_obj(out, 200, json_pack("{s:s%}", "content", strbuf_cstr(&sb), sb.len));
    }
    strbuf_clear(&sb);
    json_decref(o);
}

void api_session_op(struct srv *S, const struct http_req *r, const char *id, size_t id_len, bool reset,
                    struct http_reply *out)
{
    (void)r;
    struct api_error e;
    struct srv_req tmp;
    memset(&tmp, 0, sizeof tmp);
    if (id_len == 0 || id_len > SRV_SESSION_ID_MAX) {
        api_fail(&e, 400, "invalid_request_error", "invalid_session_id", "session id: expected 1..%d characters",
                 SRV_SESSION_ID_MAX);
        return http_reply_error(out, &e);
    }
    memcpy(tmp.session_id, id, id_len);
    if (oai_session_resolve(&tmp, NULL, NULL, NULL, &e))
        return http_reply_error(out, &e);
    struct srv_job *j = srv_job_new(reset ? SRV_JOB_SESSION_RESET : SRV_JOB_SESSION_CLOSE);
    if (!j) {
        api_fail(&e, 500, "server_error", NULL, "out of memory");
        return http_reply_error(out, &e);
    }
    memcpy(j->session_id, tmp.session_id, sizeof j->session_id);
    sched_submit(S->sched, j);
    srv_job_wait_started(j);
    if (j->err.status)
        http_reply_error(out, &j->err);
    else
        reply_obj(out, 200, json_pack("{s:b, s:s}", reset ? "reset" : "closed", 1, "session_id", j->session_id));
    srv_job_release(j);
}
#endif
