/*
 * http.c — libmicrohttpd glue: one thread per connection, bodies read into
 * a buffer with a hard size limit, bearer-token check, routing, and SSE
 * responses pulled from a reader callback that may block on the scheduler.
 *
 * DESIGN: a client's mistake is an answer (4xx with an OpenAI error body),
 * never a crash; nothing here touches model state. The connection context
 * lives from the first callback to MHD's "request completed" notice.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "http.h"

struct http_conn {
    struct strbuf body;
    bool          too_big;
    bool          answered;       /* a response was queued early (413/401) */
};

const char *http_header(const struct http_req *r, const char *name)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn, MHD_HEADER_KIND, name);
}

void http_reply_json(struct http_reply *out, int status, char *json)
{
    out->status = status;
    out->body = json;
    out->body_len = json ? strlen(json) : 0;
    out->content_type = "application/json";
}

void http_reply_error(struct http_reply *out, const struct api_error *e)
{
    http_reply_json(out, e->status, oai_error_json(e));
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct http_reply *rep = cls;
    for (;;) {
        ssize_t n = rep->read(rep->ctx, buf, max);
        if (n < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n > 0)
            return n;
    }
}

static void stream_free(void *cls)
{
    struct http_reply *rep = cls;
    if (rep->free)
        rep->free(rep->ctx);
    free(rep);
}

static enum MHD_Result send_reply(struct srv *S, struct MHD_Connection *c, struct http_reply *rep)
{
    struct MHD_Response *resp;
    if (rep->status >= 500)
        atomic_fetch_add(&S->n_http_5xx, 1);
    else if (rep->status >= 400)
        atomic_fetch_add(&S->n_http_4xx, 1);
    if (rep->read) {
        struct http_reply *held = malloc(sizeof *held);
        if (!held) {
            if (rep->free)
                rep->free(rep->ctx);
            return MHD_NO;
        }
        *held = *rep;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, held, stream_free);
        if (!resp) {
            stream_free(held);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        if (!rep->body) {   /* out of memory while building the body */
            static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":null}}";
            rep->status = 500;
            rep->body = glim_strndup(oom, sizeof oom - 1);
            rep->body_len = rep->body ? sizeof oom - 1 : 0;
        }
        resp = MHD_create_response_from_buffer(rep->body_len, rep->body ? rep->body : (char *)"",
                                               rep->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
            free(rep->body);
            return MHD_NO;
        }
    }
    MHD_add_response_header(resp, "Content-Type", rep->content_type ? rep->content_type : "application/json");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)rep->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_error(struct srv *S, struct MHD_Connection *c, int status, const char *type,
                                  const char *code, const char *msg)
{
    struct api_error e;
    api_fail(&e, status, type, code, "%s", msg);
    struct http_reply rep = {0};
    http_reply_error(&rep, &e);
    return send_reply(S, c, &rep);
}

/* Constant-time "Bearer KEY" check. */
static bool auth_ok(const struct srv *S, struct MHD_Connection *c)
{
    if (!S->cfg.api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t nk = strlen(S->cfg.api_key), nh = strlen(h);
    unsigned diff = (unsigned)(nk ^ nh);
    for (size_t i = 0; i < nk; i++)
        diff |= (unsigned char)S->cfg.api_key[i] ^ (unsigned char)(i < nh ? h[i] : 0);
    return diff == 0;
}

static bool url_is(const char *url, const char *path)
{
    return !strcmp(url, path);
}

static void route(struct srv *S, const struct http_req *r, struct http_reply *rep)
{
    bool get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");
    const char *u = r->url;
    struct api_error e;
    if (get && url_is(u, "/health"))
        return api_health(S, r, rep);
    if (get && (url_is(u, "/v1/models") || url_is(u, "/models")))
        return api_models(S, r, rep);
    if (get && url_is(u, "/metrics"))
        return api_metrics(S, r, rep);
    if (post && (url_is(u, "/v1/chat/completions") || url_is(u, "/chat/completions")))
        return api_chat(S, r, true, rep);
    if (post && (url_is(u, "/v1/completions") || url_is(u, "/completions")))
        return api_chat(S, r, false, rep);
    if (post && url_is(u, "/tokenize"))
        return api_tokenize(S, r, rep);
    if (post && url_is(u, "/detokenize"))
        return api_detokenize(S, r, rep);
    if (!strncmp(u, "/v1/sessions/", 13)) {
        const char *id = u + 13, *slash = strchr(id, '/');
        bool del = !strcmp(r->method, "DELETE") && !slash;
        bool reset = post && slash && !strcmp(slash, "/reset");
        if (del || reset)
            return api_session_op(S, r, id, slash ? (size_t)(slash - id) : strlen(id), reset, rep);
    }
    api_fail(&e, 404, "invalid_request_error", "not_found", "no route for %s %.200s", r->method, u);
    http_reply_error(rep, &e);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct srv *S = cls;
    struct http_conn *hc = *con_cls;
    if (!hc) {   /* first call: headers only */
        if (!(hc = calloc(1, sizeof *hc)))
            return MHD_NO;
        strbuf_init(&hc->body);
        *con_cls = hc;
        atomic_fetch_add(&S->n_http, 1);
        if (strcmp(url, "/health") && !auth_ok(S, c)) {
            hc->answered = true;
            return send_error(S, c, 401, "invalid_request_error", "invalid_api_key",
                              "missing or wrong API key (expected 'Authorization: Bearer <key>')");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S->cfg.max_body_bytes) {
            hc->answered = true;
            return send_error(S, c, 413, "invalid_request_error", "request_too_large",
                              "request body is larger than the server's limit");
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!hc->answered && !hc->too_big) {
            if (hc->body.len + *upload_size > S->cfg.max_body_bytes)
                hc->too_big = true;
            else if (strbuf_append(&hc->body, upload, *upload_size) != GLIM_OK)
                hc->too_big = true;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (hc->answered)
        return MHD_YES;
    hc->answered = true;
    if (hc->too_big)
        return send_error(S, c, 413, "invalid_request_error", "request_too_large",
                          "request body is larger than the server's limit");
    struct http_req r = {method, url, hc->body.data ? hc->body.data : "", hc->body.len, c};
    struct http_reply rep = {0};
    route(S, &r, &rep);
    return send_reply(S, c, &rep);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)cls, (void)c, (void)tc;
    struct http_conn *hc = *con_cls;
    if (hc) {
        strbuf_clear(&hc->body);
        free(hc);
        *con_cls = NULL;
    }
}

int http_start(struct srv *S, struct glim_err *err)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)S->cfg.port);
    if (inet_pton(AF_INET, S->cfg.host, &addr.sin_addr) != 1)
        return glim_fail(err, GLIM_EINVAL, "--host: expected an IPv4 address, got '%s'", S->cfg.host);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)S->cfg.port, NULL, NULL, on_request, S,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, S,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_END);
    if (!d)
        return glim_fail(err, GLIM_EIO, "cannot listen on %s:%d (address in use or not allowed)",
                         S->cfg.host, S->cfg.port);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    S->port = info ? info->port : S->cfg.port;
    S->httpd = d;
    return GLIM_OK;
}

void http_stop(struct srv *S)
{
    if (S->httpd)
        MHD_stop_daemon(S->httpd);
    S->httpd = NULL;
}
#endif
