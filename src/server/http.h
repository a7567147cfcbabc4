/*
 * http.h — what a route handler sees of an HTTP request and how it answers.
 * Handlers run on the connection's own thread (libmicrohttpd thread per
 * connection) and may block (waiting for the scheduler).
 */
#ifndef GLIM_SRV_HTTP_H
#define GLIM_SRV_HTTP_H

#include <stddef.h>
#include <sys/types.h>

#include "srv.h"

struct http_req {
    const char *method, *url;
    const char *body;              /* borrowed; NOT NUL-terminated by contract */
    size_t      body_len;
    void       *conn;              /* struct MHD_Connection */
};
/* Header value or NULL (case-insensitive name). */
const char *http_header(const struct http_req *r, const char *name);

/* A streamed body: read() fills buf with up to max bytes; returns the count,
 * 0 to be called again, or -1 at the end. It may block. free() runs when the
 * connection is done (also when the client went away). */
typedef ssize_t (*http_read_fn)(void *ctx, char *buf, size_t max);
typedef void (*http_free_fn)(void *ctx);

struct http_reply {
    int   status;
    char *body;                    /* owned (malloc) unless streaming */
    size_t body_len;
    const char *content_type;      /* static */
    http_read_fn read;             /* non-NULL: streamed (SSE) */
    http_free_fn free;
    void *ctx;
};

void http_reply_json(struct http_reply *out, int status, char *json /* malloc'ed, taken */);
void http_reply_error(struct http_reply *out, const struct api_error *e);

/* api_chat.c */
void api_chat(struct srv *S, const struct http_req *r, bool is_chat, struct http_reply *out);
/* api_misc.c */
void api_health(struct srv *S, const struct http_req *r, struct http_reply *out);
void api_models(struct srv *S, const struct http_req *r, struct http_reply *out);
void api_metrics(struct srv *S, const struct http_req *r, struct http_reply *out);
void api_tokenize(struct srv *S, const struct http_req *r, struct http_reply *out);
void api_detokenize(struct srv *S, const struct http_req *r, struct http_reply *out);
void api_session_op(struct srv *S, const struct http_req *r, const char *id, size_t id_len,
                    bool reset, struct http_reply *out);

#endif
