/*
 * srv.c — the server's life: load the model and its vocabulary once, start
 * the scheduler thread, then the HTTP daemon; stop in the reverse order.
 * Main thread.
 */
#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "chat/chat.h"
#include "model/model.h"
#include "runtime/dflash.h"
#include "srv.h"

static int read_file(const char *path, char **out, size_t *len, struct glim_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return glim_fail(err, GLIM_EIO, "cannot open '%s'", path);
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[65536];
    size_t n;
    int rc = GLIM_OK;
    while (!rc && (n = fread(buf, 1, sizeof buf, f)) > 0)
        rc = strbuf_append(&sb, buf, n);
    if (!rc && ferror(f))
        rc = glim_fail(err, GLIM_EIO, "cannot read '%s'", path);
    fclose(f);
    if (rc) {
        strbuf_clear(&sb);
        return rc == GLIM_ENOMEM ? glim_fail(err, rc, "out of memory reading '%s'", path) : rc;
    }
    *out = sb.data ? sb.data : glim_strndup("", 0);
    *len = sb.len;
    return *out ? GLIM_OK : glim_fail(err, GLIM_ENOMEM, "out of memory");
}

/* The tokenizer's control-token strings, for the content filter (§4.6). */
static int collect_specials(struct srv *S, struct glim_err *err)
{
    int32_t n = tok_n_vocab(S->v), k = 0;
    S->specials = glim_calloc((size_t)n + 1, sizeof *S->specials);
    if (!S->specials)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    for (int32_t id = 0; id < n; id++) {
        size_t len;
        const char *p = tok_piece(S->v, id, &len);
        if (p && len && tok_is_control(S->v, id) && p[strspn(p, " \t\r\n")])
            S->specials[k++] = p;
    }
    S->n_specials = k;
    return GLIM_OK;
}

static void model_id_from_path(struct srv *S)
{
    if (S->cfg.model_id) {
        snprintf(S->model_id, sizeof S->model_id, "%s", S->cfg.model_id);
        return;
    }
    const char *base = strrchr(S->cfg.model_path, '/');
    base = base ? base + 1 : S->cfg.model_path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf"))
        n -= 5;
    snprintf(S->model_id, sizeof S->model_id, "%.*s", (int)n, base);
}

/* The DFlash draft (runtime.md §1.7): one load shared by every request; the
 * flags are checked here so a bad value fails at start, not per request. */
static int load_draft(struct srv *S, struct glim_err *err)
{
    int rc = glim_draft_load(S->m, S->cfg.draft_path, &S->draft, err);
    if (rc)
        return rc;
    int bs = S->draft->hp.block_size, L = S->cfg.block_length ? S->cfg.block_length : bs;
    if (S->cfg.block_length && (L < 2 || L > bs || L > DFLASH_MAX_BLOCK))
        return glim_fail(err, GLIM_EINVAL, "--block-length: expected 2..%d (the draft's block_size), got %d",
                         GLIM_MIN(bs, DFLASH_MAX_BLOCK), L);
    if (S->cfg.n_draft && S->cfg.n_draft > L - 1)
        return glim_fail(err, GLIM_EINVAL, "--n-draft: expected 1..%d (block length - 1), got %d", L - 1,
                         S->cfg.n_draft);
    return GLIM_OK;
}

static int load(struct srv *S, struct glim_err *err)
{
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.n_threads = S->cfg.n_threads;
    int rc = glim_model_load(S->cfg.model_path, &mp, &S->m, err);
    if (rc == GLIM_OK && (rc = tok_vocab_from_gguf(S->m->gguf, &S->v, err)) == GLIM_ENOTFOUND)
        glim_err_prefix(err, "%s has no vocabulary (glim serve needs one)", S->cfg.model_path);
    if (rc)
        return rc;
    if (tok_n_vocab(S->v) > glim_model_n_vocab(S->m))
        return glim_fail(err, GLIM_EINVAL, "tokenizer has %d tokens, the model only %d", tok_n_vocab(S->v),
                         glim_model_n_vocab(S->m));
    int64_t n_train = glim_model_n_ctx_train(S->m);
    S->n_ctx = S->cfg.max_context ? S->cfg.max_context : GLIM_MIN(n_train > 0 ? n_train : 8192, 8192);
    S->is_harmony = tok_find(S->v, "<|start|>", 9) >= 0 && tok_find(S->v, "<|message|>", 11) >= 0;
    const char *tmpl;
    size_t n_tmpl;
    struct glim_err terr = {0};
    if (gguf_get_str(S->m->gguf, "tokenizer.chat_template", &tmpl, &n_tmpl, &terr) == GLIM_OK &&
        chat_template_new(tmpl, n_tmpl, &S->tmpl, &terr) != GLIM_OK)
        fprintf(stderr, "glim serve: warning: the chat template does not parse (%s); using the built-in format\n",
                terr.msg);
    if ((rc = collect_specials(S, err)))
        return rc;
    return S->cfg.draft_path ? load_draft(S, err) : GLIM_OK;
}

int srv_new(const struct srv_config *cfg, struct srv **out, struct glim_err *err)
{
    struct srv *S = glim_calloc(1, sizeof *S);
    if (!S)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    S->cfg = *cfg;
    if (!S->cfg.host)
        S->cfg.host = "127.0.0.1";
    if (S->cfg.max_sessions < 1)
        S->cfg.max_sessions = 1;
    if (!S->cfg.max_body_bytes)
        S->cfg.max_body_bytes = 8u << 20;
    if (S->cfg.test_output_path)
        S->cfg.test_mode = true;
    S->created = (int64_t)time(NULL);
    atomic_init(&S->n_http, 0);
    atomic_init(&S->n_http_4xx, 0);
    atomic_init(&S->n_http_5xx, 0);
    model_id_from_path(S);
    int rc = load(S, err);
    if (!rc && S->cfg.test_output_path)
        rc = read_file(S->cfg.test_output_path, &S->test_script, &S->test_script_len, err);
    if (!rc)
        rc = sched_new(S, &S->sched, err);
    if (!rc)
        rc = http_start(S, err);
    if (rc) {
        srv_free(S);
        return rc;
    }
    *out = S;
    return GLIM_OK;
}

void srv_free(struct srv *S)
{
    if (!S)
        return;
    http_stop(S);       /* no new requests; open streams end when their jobs do */
    sched_free(S->sched);
    glim_free(S->specials);
    chat_template_free(S->tmpl);
    free(S->test_script);
    tok_vocab_free(S->v);
    glim_model_free(S->draft);
    glim_model_free(S->m);
    glim_free(S);
}

int srv_port(const struct srv *S)
{
    return S->port;
}
#endif
