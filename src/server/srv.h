/*
 * srv.h — `glim serve`: an OpenAI-compatible HTTP server over one loaded
 * model (spec: ../shared/spec/runtime.md §4.6, §5, §6).
 *
 * DESIGN
 *   http.c        libmicrohttpd glue, one thread per connection: reads the
 *                 body (size-limited), checks the API key, routes.
 *   oai_json.c    request JSON → struct srv_req (validated), and the OpenAI
 *                 JSON shapes going out (errors, completions, chunks).
 *   srv_prompt.c  srv_build_prompt(): messages → prompt token ids.
 *   api_chat.c    /v1/chat/completions and /v1/completions: validate, build
 *                 the prompt, submit a job, then answer (JSON or SSE).
 *   api_misc.c    /health /v1/models /metrics /tokenize /detokenize, sessions.
 *   sched.c       THE scheduler thread: owns the model's sessions, KV state,
 *                 samplers. Interleaves active jobs one decode step each per
 *                 round. Talks to HTTP threads only through struct srv_job's
 *                 channel (mutex + condvar) and its atomic cancel flag.
 *   srv_session.c the session table (id → glim_session + resident token ids,
 *                 LRU eviction); scheduler thread only.
 *
 * HTTP threads never touch a glim_session; the vocabulary is read-only and
 * shared (tok.h allows concurrent encode/decode).
 */
#ifndef GLIM_SRV_H
#define GLIM_SRV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "runtime/sampler.h"
#include "text/tok.h"

struct glim_model;
struct chat_template;
struct sched;
struct srv;

#define SRV_SESSION_ID_MAX 128
#define SRV_MAX_STOPS 16

struct srv_config {
    const char *model_path;        /* GGUF */
    const char *host;              /* "127.0.0.1" */
    int         port;              /* 0 = any free port (see srv_port) */
    const char *model_id;          /* served id; NULL = file name */
    const char *api_key;           /* NULL = no auth */
    int         max_sessions;      /* state slots (named + anonymous), >= 1 */
    int64_t     max_context;       /* 0 = model's context, at most 8192 */
    int         n_threads;         /* 0 = physical cores */
    size_t      max_body_bytes;    /* 0 = 8 MiB */
    const char *draft_path;        /* DFlash draft GGUF, NULL = plain decoding */
    int         block_length;      /* DFlash L; 0 = the draft's block_size */
    int         n_draft;           /* DFlash N; 0 = L - 1 */
    /* test only: replaces the draft model's proposals (dflash_set_proposer) */
    void      (*test_propose)(void *ud, int64_t pos, int32_t *cand, int n);
    void       *test_propose_ud;
    const char *test_output_path;  /* test only: scripted model output (see sched.c) */
    bool        test_mode;         /* test only: honor "glim_test_output" in requests */
    bool        verbose;           /* one log line per request on stderr */
};

/* ---- errors as HTTP answers ------------------------------------------- */

struct api_error {
    int         status;            /* HTTP status */
    const char *type;              /* "invalid_request_error", "server_error", ... */
    const char *code;              /* "invalid_value" ..., NULL = null */
    char        msg[GLIM_ERR_MSG_MAX];
};
int api_fail(struct api_error *e, int status, const char *type, const char *code, const char *fmt, ...)
    GLIM_PRINTF(5, 6);

/* ---- a parsed request -------------------------------------------------- */

enum srv_tool_choice { SRV_TOOLS_AUTO, SRV_TOOLS_NONE, SRV_TOOLS_REQUIRED, SRV_TOOLS_NAMED };

struct srv_req {
    bool    is_chat;               /* /v1/chat/completions (else /v1/completions) */
    void   *root;                  /* owned: json_t of the body */
    void   *messages;              /* borrowed from root: json array (chat) */
    void   *tools;                 /* borrowed: json array or NULL */
    const char *prompt;            /* borrowed: /v1/completions prompt */
    size_t  prompt_len;
    int     tool_choice;           /* enum srv_tool_choice */
    const char *tool_name;         /* borrowed: SRV_TOOLS_NAMED */
    struct sampler_params sp;
    int64_t max_tokens;            /* -1 = up to the context */
    const char *stops[SRV_MAX_STOPS];  /* borrowed */
    size_t  stop_lens[SRV_MAX_STOPS];
    int     n_stops;
    bool    stream, include_usage;
    bool    return_reasoning;
    const char *reasoning_strength;    /* borrowed: "low" "medium" "high" or NULL */
    char    session_id[SRV_SESSION_ID_MAX + 1];   /* "" = anonymous */
    const char *test_output;       /* borrowed: scripted output (test mode only) */
    size_t  test_output_len;
    int64_t test_hold_until;       /* test mode only: see srv_job */
};

/* Parse and validate a body. e->status is set on failure (4xx). */
int  oai_parse_request(const char *body, size_t len, bool is_chat, const char *model_id,
                       struct srv_req *r, struct api_error *e);
void oai_req_clear(struct srv_req *r);
/* Session id from the body (already in r) or the headers, per §6.8 order. */
int  oai_session_resolve(struct srv_req *r, const char *h_executorch, const char *h_session,
                         const char *h_affinity, struct api_error *e);

/* JSON for an error envelope; malloc'ed. */
char *oai_error_json(const struct api_error *e);
/* "chatcmpl-" + 32 hex */
void  oai_make_id(const char *prefix, char *out, size_t cap);
/* Is text[0..n) valid UTF-8? */
bool  oai_utf8_valid(const char *s, size_t n);

/* ---- prompt -------------------------------------------------------------- */

struct srv_prompt {
    struct tok_ids ids;            /* owned: the full prompt */
    char  *forced;                 /* owned: text forced at the start of the reply (tool_choice), or NULL */
};
void srv_prompt_clear(struct srv_prompt *p);
int  srv_build_prompt(const struct srv *S, const struct srv_req *r, struct srv_prompt *out,
                      struct api_error *e);

/* ---- jobs and the scheduler --------------------------------------------- */

enum srv_job_state { SRV_JOB_QUEUED, SRV_JOB_RUNNING, SRV_JOB_DONE };
enum srv_job_kind { SRV_JOB_GENERATE, SRV_JOB_SESSION_CLOSE, SRV_JOB_SESSION_RESET };

/* One request's life between an HTTP thread and the scheduler. Fields
 * marked [in] are written before sched_submit and never again; [chan] only
 * under mu; [sched] by the scheduler thread only. */
struct srv_job {
    int     kind;                          /* [in] enum srv_job_kind */
    char    session_id[SRV_SESSION_ID_MAX + 1];  /* [in] "" = anonymous */
    int32_t *prompt;                       /* [in] owned */
    int     n_prompt;
    struct sampler_params sp;              /* [in] */
    int64_t max_tokens;                    /* [in] >= 1 */
    char   *stops[SRV_MAX_STOPS];          /* [in] owned */
    int     n_stops;
    char   *test_output;                   /* [in] owned, NULL = real model */
    size_t  test_output_len;
    /* [in] test only: once admitted, the job holds its slot and does nothing
     * until the scheduler has answered this many generation requests in all
     * (admitted + rejected with 429), so a test can keep slots busy without
     * timing. 0 = off. */
    int64_t test_hold_until;

    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int     state;                         /* [chan] enum srv_job_state */
    struct strbuf out;                     /* [chan] text not yet taken by the HTTP thread */
    struct api_error err;                  /* [chan] err.status != 0: failed */
    const char *finish;                    /* [chan] "stop" | "length" when DONE */
    int64_t n_completion, n_prefilled, n_reused;   /* [chan] */
    atomic_bool cancel;                    /* set by the HTTP thread: client went away */
    int     refs;                          /* [chan] 2 while both sides hold it */
    struct srv_job *next;                  /* [sched] queue link */
    void   *priv;                          /* [sched] generation state */
};

struct srv_job *srv_job_new(int kind);
void srv_job_release(struct srv_job *j);   /* drop one reference; frees at zero */

struct sched_stats {
    int64_t n_requests, n_prompt_tokens, n_prefill_tokens, n_completion_tokens;
    double  prefill_s, decode_s;
    int     n_sessions, n_active, n_queued;
    int64_t n_rejected;                    /* 429: every session slot busy */
    int64_t n_dflash_requests, n_dflash_cycles, n_dflash_spec_cycles, n_dflash_accepted;
};

int  sched_new(struct srv *S, struct sched **out, struct glim_err *err);
void sched_free(struct sched *q);              /* stops the thread; fails queued jobs */
void sched_submit(struct sched *q, struct srv_job *j);   /* takes one reference */
void sched_get_stats(struct sched *q, struct sched_stats *out);

/* Wait until the job leaves QUEUED (admitted or failed); returns its state. */
int  srv_job_wait_started(struct srv_job *j);
/* Wait for output or completion; moves pending text into out (appends).
 * Returns true while more may come. */
bool srv_job_take(struct srv_job *j, struct strbuf *out);

/* ---- the session table (scheduler thread only) -------------------------- */

struct dflash;
struct srv_session {
    char    id[SRV_SESSION_ID_MAX + 1];    /* "" = anonymous (freed after use) */
    struct glim_session *s;                /* owned */
    struct tok_ids resident;               /* ids whose KV the session holds (== pos) */
    struct dflash *df;                     /* owned: DFlash state over s (its draft context), or NULL */
    int64_t df_valid;                      /* the draft context rows [0, df_valid) are resident's */
    bool    busy;
    uint64_t last_used;
};
struct srv_sessions;
int  srv_sessions_new(struct glim_model *m, int max, int64_t n_ctx, struct srv_sessions **out,
                      struct glim_err *err);
void srv_sessions_free(struct srv_sessions *t);
/* Take a slot for id ("" = anonymous). *busy_out: the named session is in
 * use by another job (retry later). GLIM_ERANGE: every slot is busy. */
int  srv_sessions_acquire(struct srv_sessions *t, const char *id, struct srv_session **out,
                          bool *busy_out, struct glim_err *err);
void srv_sessions_release(struct srv_sessions *t, struct srv_session *e);
/* Drop id's state (close) or clear it (reset); no-op when unknown or busy → false. */
bool srv_sessions_close(struct srv_sessions *t, const char *id, bool keep_slot);
int  srv_sessions_count(const struct srv_sessions *t);
/* Make e's KV hold exactly resident[0..keep): truncate or rebuild (a rebuild also drops
 * e->df); df_valid is cut to keep. */
int  srv_session_rewind(struct srv_sessions *t, struct srv_session *e, int64_t keep,
                        struct glim_err *err);

/* ---- the server -------------------------------------------------------- */

struct srv {
    struct srv_config cfg;                 /* strings borrowed from the caller */
    char   model_id[256];
    struct glim_model *m;                  /* owned */
    struct glim_model *draft;              /* owned: DFlash draft for m, or NULL */
    struct tok_vocab *v;                   /* owned */
    int64_t n_ctx;                         /* per-session context */
    bool    is_harmony;                    /* vocabulary has <|start|> <|message|> */
    struct chat_template *tmpl;            /* owned: the GGUF's chat template, or NULL */
    const char **specials;                 /* owned array, strings borrowed from v */
    int     n_specials;
    char   *test_script;                   /* owned: --test-output file, NULL = off */
    size_t  test_script_len;
    int64_t created;                       /* unix s */
    struct sched *sched;                   /* owned */
    void   *httpd;                         /* owned: struct MHD_Daemon */
    int     port;
    atomic_llong n_http, n_http_4xx, n_http_5xx;
};

int  srv_new(const struct srv_config *cfg, struct srv **out, struct glim_err *err);
void srv_free(struct srv *S);
int  srv_port(const struct srv *S);

/* http.c */
int  http_start(struct srv *S, struct glim_err *err);
void http_stop(struct srv *S);

#endif
