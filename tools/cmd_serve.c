/*
 * cmd_serve.c — `glim serve`: parse flags, start the server (src/server),
 * print the address, and run until SIGINT/SIGTERM. Main thread.
 */
#include "cli.h"

#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "server/srv.h"

static const char *USAGE =
    "usage: glim serve -m MODEL [options]\n"
    "\n"
    "OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, /v1/models,\n"
    "/health, /metrics, /tokenize, /detokenize, DELETE /v1/sessions/{id}.\n"
    "\n"
    "  -m, --model FILE       GGUF model (default: the embedded models/stories260K.gguf)\n"
    "  --host ADDR            IPv4 address to listen on (default 127.0.0.1: loopback only)\n"
    "  --port N               TCP port (default 8000; 0 = any free port, printed at start)\n"
    "  --model-id ID          id served by /v1/models (default: the file name)\n"
    "  --max-sessions N       session slots, named and anonymous; LRU eviction (default 4)\n"
    "  --max-context N        context per session (default: the model's, at most 8192)\n"
    "  --api-key KEY          require 'Authorization: Bearer KEY' (all but /health)\n"
    "  --threads N            CPU threads (default: physical cores)\n"
    "  --max-body-bytes N     request body limit (default 8 MiB)\n"
    "  --draft FILE           DFlash draft GGUF: speculative decoding for every request (lossless;\n"
    "                         requests with penalties decode plainly; each re-prefills its whole prompt)\n"
    "  --block-length B       DFlash block length (2..draft block_size; default block_size)\n"
    "  --n-draft K            drafts verified per cycle (1..B-1; default B-1)\n"
    "  -v, --verbose          one llm_turn_stats line per request on stderr\n"
    "  --test-output FILE     TEST ONLY: reply with FILE's text (replies split by '---8<---' lines)\n"
    "                         instead of sampling; also honors \"glim_test_output\" in requests\n"
    "  --test-mode            TEST ONLY: honor \"glim_test_output\" in requests\n";

static int parse(int argc, char **argv, struct srv_config *c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
#define VAL() do { if (!(v = cli_value("serve", argc, argv, &i))) return 2; } while (0)
#define INT(lo, hi) do { VAL(); if (!cli_int("serve", a, v, lo, hi, &n)) return 2; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); c->model_path = v; }
        else if (!strcmp(a, "--host")) { VAL(); c->host = v; }
        else if (!strcmp(a, "--port")) { INT(0, 65535); c->port = (int)n; }
        else if (!strcmp(a, "--model-id")) { VAL(); c->model_id = v; }
        else if (!strcmp(a, "--max-sessions")) { INT(1, 4096); c->max_sessions = (int)n; }
        else if (!strcmp(a, "--max-context")) { INT(16, 1 << 24); c->max_context = n; }
        else if (!strcmp(a, "--api-key")) { VAL(); c->api_key = v; }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { INT(0, 1024); c->n_threads = (int)n; }
        else if (!strcmp(a, "--max-body-bytes")) { INT(1024, 1LL << 32); c->max_body_bytes = (size_t)n; }
        else if (!strcmp(a, "--draft")) { VAL(); c->draft_path = v; }
        else if (!strcmp(a, "--block-length")) { INT(2, 64); c->block_length = (int)n; }
        else if (!strcmp(a, "--n-draft")) { INT(1, 63); c->n_draft = (int)n; }
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) c->verbose = true;
        else if (!strcmp(a, "--test-output") || !strcmp(a, "--test-output-tokens")) { VAL(); c->test_output_path = v; }
        else if (!strcmp(a, "--test-mode")) c->test_mode = true;
        else {
            fprintf(stderr, "glim serve: unknown option '%s' (see glim serve --help)\n", a);
            return 2;
        }
#undef VAL
#undef INT
    }
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    struct srv_config c = {0};
    c.host = "127.0.0.1";
    c.port = 8000;
    c.max_sessions = 4;
    int prc = parse(argc, argv, &c);
    if (prc)
        return prc < 0 ? 0 : prc;
    if (!c.model_path)
        c.model_path = cli_default_model();
    /* the signals are taken with sigwait below; every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct glim_err err = {0};
    struct srv *S = NULL;
    if (srv_new(&c, &S, &err) != GLIM_OK) {
        fprintf(stderr, "glim serve: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "glim serve: model '%s' (%s), %d session slots, context %lld\n", S->model_id,
            glim_model_arch(S->m), c.max_sessions, (long long)S->n_ctx);
    if (S->draft)
        fprintf(stderr, "glim serve: DFlash draft '%s' (block length %d)\n", c.draft_path,
                c.block_length ? c.block_length : S->draft->hp.block_size);
    fprintf(stderr, "glim serve: listening on http://%s:%d\n", c.host, srv_port(S));
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "glim serve: signal %d, stopping\n", sig);
    srv_free(S);
    return 0;
}
#endif
