/*
 * test_server_dflash.c — `glim serve --draft`: DFlash decoding behind the
 * whole HTTP path is lossless. glimmer-tiny (SPM vocabulary, no chat
 * template: the plain-text prompt path) is served twice, without and with
 * its drafter; greedy replies (chat and completions, non-stream and stream,
 * a two-turn named session) must be equal byte for byte. Also: a seeded
 * sampled request repeats exactly, a request with penalties (decoded plainly
 * by design) equals the plain server's, concurrent DFlash requests (cycles
 * interleaved by the scheduler) give their solo replies, /metrics counts the
 * DFlash requests, and the second turn of the session resumes (its prefix
 * is not prefilled again) with and without the drafter.
 */
#include "harness.h"

#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <jansson.h>
#include <pthread.h>

#include "server/srv.h"
#include "server_client.h"

#define N_REPLIES 8
#define N_GEN 12   /* tokens per reply */

static int PORT;

static long long metric(const char *name) { return http_metric(PORT, name); }

static bool same(const struct strbuf *a, const struct strbuf *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

/* The reply text of a non-stream answer, or the concatenated deltas of an
 * SSE one (chat: delta.content; completions: text). */
static void reply_text(const struct http_answer *a, bool stream, struct strbuf *out)
{
    if (!stream) {
        json_t *o = json_loads(a->body, JSON_ALLOW_NUL, NULL);
        json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
        json_t *t = json_object_get(ch, "text");
        if (!t)
            t = json_object_get(json_object_get(ch, "message"), "content");
        CHECK(json_is_string(t));
        if (json_is_string(t))
            strbuf_append(out, json_string_value(t), json_string_length(t));
        json_decref(o);
        return;
    }
    bool done = false;
    for (const char *p = a->body; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 6 && !strncmp(p, "data: ", 6)) {
            json_t *o = json_loadb(p + 6, n - 6, JSON_ALLOW_NUL, NULL);   /* a <0x00> byte token is "\u0000" */
            done |= n == 12 && !strncmp(p + 6, "[DONE]", 6);
            CHECK(o || done);
            json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
            json_t *t = json_object_get(ch, "text");
            if (!t)
                t = json_object_get(json_object_get(ch, "delta"), "content");
            if (json_is_string(t))
                strbuf_append(out, json_string_value(t), json_string_length(t));
            json_decref(o);
        }
        p = nl ? nl + 1 : NULL;
    }
    CHECK(done);
}

static json_t *chat_req(const char *text, bool stream)
{
    return json_pack("{s:[{s:s, s:s}], s:i, s:f, s:b}", "messages", "role", "user", "content", text, "max_tokens",
                     N_GEN, "temperature", 0.0, "stream", stream);
}

/* POST body; the reply text into out (status 200 checked). Returns cached_tokens (non-stream) or -1. */
static long long ask(const char *path, json_t *req, struct strbuf *out)
{
    bool stream = json_is_true(json_object_get(req, "stream"));
    char *s = json_dumps(req, JSON_COMPACT);
    struct http_answer a = http_post(PORT, path, s, NULL);
    free(s);
    CHECK_EQ(a.status, 200);
    reply_text(&a, stream, out);
    long long cached = -1;
    if (!stream) {
        json_t *o = json_loads(a.body, 0, NULL);
        json_t *d = json_object_get(json_object_get(o, "usage"), "prompt_tokens_details");
        cached = json_integer_value(json_object_get(d, "cached_tokens"));
        json_decref(o);
    }
    http_answer_clear(&a);
    json_decref(req);
    return cached;
}

/* Every request of the comparison, replies into r[0..N_REPLIES). Returns the
 * second session turn's usage.prompt_tokens_details.cached_tokens. */
static long long run_all(struct strbuf *r)
{
    ask("/v1/chat/completions", chat_req("Once upon a time", false), &r[0]);
    ask("/v1/chat/completions", chat_req("Once upon a time", true), &r[1]);
    ask("/v1/chat/completions", chat_req("The little dog ran to the park", true), &r[2]);
    ask("/v1/completions",
        json_pack("{s:s, s:i, s:f}", "prompt", "The quick brown fox", "max_tokens", N_GEN, "temperature", 0.0), &r[3]);
    ask("/v1/completions",
        json_pack("{s:s, s:i, s:f, s:b}", "prompt", "The quick brown fox", "max_tokens", N_GEN, "temperature", 0.0,
                  "stream", true),
        &r[4]);
    /* a named session, two turns: the second resumes it */
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "Tell me a story");
    ask("/v1/chat/completions",
        json_pack("{s:O, s:i, s:f, s:s}", "messages", msgs, "max_tokens", N_GEN, "temperature", 0.0, "session_id", "s1"),
        &r[5]);
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", strbuf_cstr(&r[5])));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", "And then?"));
    long long cached = ask("/v1/chat/completions",
                           json_pack("{s:O, s:i, s:f, s:s}", "messages", msgs, "max_tokens", N_GEN, "temperature",
                                     0.0, "session_id", "s1"),
                           &r[6]);
    json_decref(msgs);
    /* penalties: DFlash cannot apply them, so this one decodes plainly */
    ask("/v1/chat/completions",
        json_pack("{s:[{s:s, s:s}], s:i, s:f, s:f}", "messages", "role", "user", "content", "Once upon a time",
                  "max_tokens", N_GEN, "temperature", 0.0, "frequency_penalty", 1.5),
        &r[7]);
    return cached;
}

/* A proposer that repeats the anchor: on a repetitive greedy reply the
 * target accepts several of its tokens, so cycles commit more than one. */
static void propose_repeat(void *ud, int64_t pos, int32_t *cand, int n)
{
    (void)ud, (void)pos;
    for (int i = 1; i < n; i++)
        cand[i] = cand[0];
}

/* Concurrent requests: the scheduler interleaves their DFlash cycles. */
struct par_req {
    const char *path;
    char *body;                    /* owned */
    bool stream;
    struct http_answer a;
};

static void *par_run(void *arg)
{
    struct par_req *r = arg;
    r->a = http_post(PORT, r->path, r->body, NULL);
    return NULL;
}

static void run_concurrent(struct strbuf *r)
{
    json_t *reqs[3] = {chat_req("Once upon a time", false), chat_req("The little dog ran to the park", true),
                       json_pack("{s:s, s:i, s:f}", "prompt", "The quick brown fox", "max_tokens", N_GEN,
                                 "temperature", 0.0)};
    const int which[3] = {0, 2, 3};
    struct par_req pr[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        pr[i].path = i == 2 ? "/v1/completions" : "/v1/chat/completions";
        pr[i].body = json_dumps(reqs[i], JSON_COMPACT);
        pr[i].stream = json_is_true(json_object_get(reqs[i], "stream"));
        json_decref(reqs[i]);
        pthread_create(&th[i], NULL, par_run, &pr[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(pr[i].a.status, 200);
        reply_text(&pr[i].a, pr[i].stream, &r[which[i]]);
        http_answer_clear(&pr[i].a);
        free(pr[i].body);
    }
}

static int start(const char *model, const char *draft, bool repeat, struct srv **S)
{
    struct srv_config cfg = {0};
    cfg.model_path = model;
    cfg.draft_path = draft;
    cfg.test_propose = repeat ? propose_repeat : NULL;
    cfg.host = "127.0.0.1";
    cfg.max_sessions = 4;
    cfg.max_context = 256;
    cfg.n_threads = 1;
    struct glim_err err = {0};
    if (srv_new(&cfg, S, &err) != GLIM_OK) {
        fprintf(stderr, "srv_new: %s\n", err.msg);
        return 1;
    }
    PORT = srv_port(*S);
    return 0;
}

static char MODEL[1024], DRAFT[1024];
static struct strbuf PLAIN[N_REPLIES], SPEC[N_REPLIES];

static void test_plain(void)
{
    struct srv *S;
    if (start(MODEL, NULL, false, &S)) {
        CHECK(0);
        return;
    }
    long long cached = run_all(PLAIN);
    CHECK(cached > 0);   /* the second turn resumed */
    CHECK_EQ(metric("glim_dflash_requests_total"), -1);   /* no draft: no DFlash metrics */
    srv_free(S);
    CHECK(PLAIN[0].len > 0);
    CHECK(same(&PLAIN[0], &PLAIN[1]));   /* stream == non-stream */
    CHECK(same(&PLAIN[3], &PLAIN[4]));
}

static void draft_equals_plain(bool repeat)
{
    struct srv *S;
    if (start(MODEL, DRAFT, repeat, &S)) {
        CHECK(0);
        return;
    }
    long long prefill0 = metric("glim_prefill_tokens_total"), prompt0 = metric("glim_prompt_tokens_total");
    long long cached = run_all(SPEC);
    for (int i = 0; i < N_REPLIES; i++) {
        CHECK(same(&PLAIN[i], &SPEC[i]));
        if (!same(&PLAIN[i], &SPEC[i]))
            fprintf(stderr, "reply %d: plain '%s', draft '%s'\n", i, strbuf_cstr(&PLAIN[i]), strbuf_cstr(&SPEC[i]));
    }
    CHECK_EQ(metric("glim_dflash_requests_total"), N_REPLIES - 1);
    struct strbuf par[N_REPLIES];
    for (int i = 0; i < N_REPLIES; i++)
        strbuf_init(&par[i]);
    run_concurrent(par);
    for (int i = 0; i < 4; i++)
        CHECK(i == 1 || same(&par[i], &PLAIN[i]));
    for (int i = 0; i < N_REPLIES; i++)
        strbuf_clear(&par[i]);
    CHECK(metric("glim_dflash_cycles_total") > 0);
    if (repeat)   /* multi-token cycles were exercised */
        CHECK(metric("glim_dflash_accepted_tokens_total") > 0);
    /* the second session turn resumed under DFlash too: its cached prefix was not prefilled */
    CHECK(cached > 0);
    CHECK_EQ(metric("glim_prefill_tokens_total") - prefill0,
             metric("glim_prompt_tokens_total") - prompt0 - cached);

    /* sampled: the same seed gives the same reply */
    struct strbuf a, b;
    strbuf_init(&a), strbuf_init(&b);
    for (int k = 0; k < 2; k++)
        ask("/v1/chat/completions",
            json_pack("{s:[{s:s, s:s}], s:i, s:f, s:i, s:i}", "messages", "role", "user", "content", "Once upon",
                      "max_tokens", N_GEN, "temperature", 0.9, "top_k", 40, "seed", 77),
            k ? &b : &a);
    CHECK(a.len > 0);
    CHECK(same(&a, &b));
    strbuf_clear(&a), strbuf_clear(&b);
    srv_free(S);
}

/* the real (random-weight) drafter: nothing is accepted, one token per cycle */
static void test_draft_equals_plain(void)
{
    draft_equals_plain(false);
}

/* a scripted proposer the target partly accepts: several tokens per cycle */
static void test_draft_accepting(void)
{
    for (int i = 0; i < N_REPLIES; i++)
        strbuf_reset(&SPEC[i]);
    draft_equals_plain(true);
}

static void test_bad_flags(void)
{
    struct srv_config cfg = {0};
    cfg.model_path = MODEL;
    cfg.draft_path = DRAFT;
    cfg.port = 0;
    cfg.max_sessions = 1;
    cfg.max_context = 64;
    cfg.n_threads = 1;
    cfg.block_length = 999;
    struct srv *S = NULL;
    struct glim_err err = {0};
    CHECK_EQ(srv_new(&cfg, &S, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "--block-length") != NULL);
    cfg.block_length = 4, cfg.n_draft = 4;
    CHECK_EQ(srv_new(&cfg, &S, &err), GLIM_EINVAL);
    CHECK(strstr(err.msg, "--n-draft") != NULL);
    CHECK(S == NULL);
}

int main(void)
{
    const char *td = getenv("GLIM_TESTDATA") ? getenv("GLIM_TESTDATA") : GLIM_TESTDATA;
    snprintf(MODEL, sizeof MODEL, "%s/glimmer-tiny/glimmer-tiny-F32.gguf", td);
    snprintf(DRAFT, sizeof DRAFT, "%s/glimmer-tiny/dflash/glimmer-tiny-dflash-BF16.gguf", td);
    for (int i = 0; i < N_REPLIES; i++)
        strbuf_init(&PLAIN[i]), strbuf_init(&SPEC[i]);
    RUN(test_plain);
    RUN(test_draft_equals_plain);
    RUN(test_draft_accepting);
    RUN(test_bad_flags);
    for (int i = 0; i < N_REPLIES; i++)
        strbuf_clear(&PLAIN[i]), strbuf_clear(&SPEC[i]);
    return DONE();
}
#else
int main(void)
{
    printf("glim built without the server (libmicrohttpd/jansson/PCRE2): skipped\n");
    return 0;
}
#endif
