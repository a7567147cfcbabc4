/*
 * server_client.h — a tiny blocking HTTP/1.0 client for the server tests
 * (loopback only). HTTP/1.0 so a streamed (SSE) answer arrives unchunked
 * and ends when the server closes the connection.
 */
#ifndef GLIM_TEST_SERVER_CLIENT_H
#define GLIM_TEST_SERVER_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct http_answer {
    int    status;      /* 0: no answer (connection failed) */
    char  *body;        /* malloc'ed, NUL-terminated */
    size_t body_len;
};

static void http_answer_clear(struct http_answer *a)
{
    free(a->body);
    memset(a, 0, sizeof *a);
}

/* Send method path with body[0..len) and extra header lines ("Name: v\r\n"). */
static struct http_answer http_call(int port, const char *method, const char *path, const char *body, size_t len,
                                    const char *headers)
{
    struct http_answer a = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return a;
    }
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     method, path, len, headers ? headers : "");
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) < 0) {
        close(fd);
        return a;
    }
    for (size_t off = 0; off < len;) {
        ssize_t k = send(fd, body + off, len - off, MSG_NOSIGNAL);
        if (k <= 0)
            break;   /* the server may answer (413) and close before reading it all */
        off += (size_t)k;
    }
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (got == cap)
            buf = realloc(buf, (cap *= 2) + 1);
        ssize_t k = recv(fd, buf + got, cap - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    buf[got] = 0;
    if (got > 12 && !strncmp(buf, "HTTP/1.", 7))
        a.status = atoi(buf + 9);
    char *b = strstr(buf, "\r\n\r\n");
    const char *start = b ? b + 4 : buf + got;
    a.body_len = (size_t)(buf + got - start);
    a.body = malloc(a.body_len + 1);
    memcpy(a.body, start, a.body_len);
    a.body[a.body_len] = 0;
    free(buf);
    return a;
}

/* A counter from GET /metrics (Prometheus text); -1 when absent. */
static long long http_metric(int port, const char *name)
{
    struct http_answer a = http_call(port, "GET", "/metrics", "", 0, NULL);
    long long v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = a.body ? strstr(a.body, key) : NULL;
    if (p)
        v = atoll(p + strlen(key));
    http_answer_clear(&a);
    return v;
}

static struct http_answer http_post(int port, const char *path, const char *body, const char *headers)
{
    return http_call(port, "POST", path, body, strlen(body), headers);
}

#endif
