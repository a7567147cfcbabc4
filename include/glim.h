/*
 * glim.h — public API of libglim.
 *
 * Opaque handles, status codes and an error struct that carries a message.
 * Every function that can fail on user input returns an int status
 * (GLIM_OK = 0) and takes `struct glim_err *err` last; on failure the
 * message names what was wrong, where, and what was expected.
 *
 * Thread rules: a glim_model is read-only after load and may be shared by
 * threads; a glim_session belongs to one thread at a time.
 */
#ifndef GLIM_H
#define GLIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GLIM_VERSION "0.1.0"

enum glim_status {
    GLIM_OK = 0,
    GLIM_EINVAL,       /* bad argument, flag or request field */
    GLIM_ENOMEM,       /* allocation failed or a planned size does not fit */
    GLIM_EIO,          /* open/read/write/mmap failed */
    GLIM_EFORMAT,      /* a file is malformed (GGUF, JSON, image ...) */
    GLIM_EUNSUPPORTED, /* well-formed but not something glim runs */
    GLIM_ERANGE,       /* position/context/count out of range */
    GLIM_EBACKEND,     /* device/backend failure (CUDA ...) */
    GLIM_ECANCELED,    /* stopped on request */
    GLIM_ENOTFOUND,    /* a key/tensor/name that was looked up is absent */
    GLIM_STATUS_COUNT
};

#define GLIM_ERR_MSG_MAX 512

struct glim_err {
    int  code;                   /* enum glim_status */
    char msg[GLIM_ERR_MSG_MAX];  /* one line, NUL-terminated */
};

const char *glim_status_name(int code);   /* "EINVAL" ... never NULL */

/* ---- models and sessions ---------------------------------------------- */

struct glim_model;     /* weights + hyperparameters; read-only after load */
struct glim_session;   /* one sequence: KV caches, position */

enum glim_kernels {
    GLIM_KERNELS_AUTO = 0,  /* fastest available for this machine */
    GLIM_KERNELS_REF,       /* scalar reference kernels: exact dequant, f32 */
};

struct glim_model_params {
    int         n_threads;   /* 0 = physical cores */
    int         kernels;     /* enum glim_kernels */
    const char *device;      /* "cpu", "cuda" or NULL = default */
    bool        verbose;     /* print the memory plan etc. to stderr */
    bool        no_graph;    /* do not capture decode steps as CUDA graphs */
};

enum glim_kv_type {
    GLIM_KV_DEFAULT = 0,   /* F32 on the reference kernels, F16 elsewhere */
    GLIM_KV_F32,
    GLIM_KV_F16,
    GLIM_KV_BF16,
};

struct glim_session_params {
    int64_t n_ctx;        /* 0 = model's context_length */
    int     n_chunk;      /* prefill chunk, 0 = 512 */
    int     n_ring_extra; /* extra ring slots beyond the window (speculative rollback); <0 = default 16 */
    int     kv_type;      /* enum glim_kv_type */
};

/* Memory a session would need (the plan printed at load). */
struct glim_mem_plan {
    size_t weights_bytes;
    size_t kv_flat_bytes, kv_ring_bytes;   /* global layers, sliding-window layers */
    int    n_flat_layers, n_ring_layers;
    int64_t flat_slots, ring_slots;
    size_t scratch_bytes;
    size_t total_bytes;
    size_t available_bytes;                /* SIZE_MAX when unknown */
};
int  glim_session_plan(struct glim_model *m, const struct glim_session_params *p,
                       struct glim_mem_plan *out, struct glim_err *err);
void glim_mem_plan_print(const struct glim_mem_plan *plan, void *file /* FILE* */);

void glim_model_params_init(struct glim_model_params *p);
void glim_session_params_init(struct glim_session_params *p);

int  glim_model_load(const char *path,                    /* GGUF file */
                     const struct glim_model_params *p,   /* NULL = defaults */
                     struct glim_model **out,             /* OUT: untouched on failure */
                     struct glim_err *err);
void glim_model_free(struct glim_model *m);

/* Host memory for what glim_session_eval writes (logits): page-locked where the model runs on a
 * GPU, so each step's logits arrive by one DMA instead of through the driver's staging copy; plain
 * memory on the CPU. Free it with glim_model_host_free before glim_model_free. NULL: out of memory. */
void *glim_model_host_alloc(struct glim_model *m, size_t nbytes);
void glim_model_host_free(struct glim_model *m, void *p);

int32_t glim_model_n_vocab(const struct glim_model *m);
int32_t glim_model_n_embd(const struct glim_model *m);
int32_t glim_model_n_layer(const struct glim_model *m);
int64_t glim_model_n_ctx_train(const struct glim_model *m);
const char *glim_model_arch(const struct glim_model *m);

int  glim_session_new(struct glim_model *m, const struct glim_session_params *p,
                      struct glim_session **out, struct glim_err *err);
void glim_session_free(struct glim_session *s);
int64_t glim_session_pos(const struct glim_session *s);    /* tokens consumed so far */
int64_t glim_session_n_ctx(const struct glim_session *s);

/* Run n tokens at the session's current position (prefill in chunks of
 * n_chunk). logits: NULL, or [n_out][n_vocab] for the last n_out tokens
 * (n_out = 0: none, n_out = n: every position). */
int glim_session_eval(struct glim_session *s, const int32_t *tokens, int n,
                      float *logits, int n_out, struct glim_err *err);

/* Greedy decoding from tok0: feed tok0 at the current position, pick the largest logit
 * (NaN as -inf, lowest id among equals), feed it, and so on until n_max tokens are picked,
 * on_token (NULL = none) returns non-zero for the token just picked, or the context is full.
 * out[0 .. *n_out) are the picks; the session then holds tok0 and every pick but the last
 * (as after glim_session_eval and a sample). The same tokens as glim_session_eval with the
 * argmax of its logits; where the backend picks on the device (CUDA), the logits stay there
 * and each step is queued before the host has seen the previous one's token. */
int glim_session_greedy(struct glim_session *s, int32_t tok0, int n_max, int32_t *out,
                        int (*on_token)(void *ud, int32_t tok), void *ud, int *n_out, struct glim_err *err);

/* Drop everything at positions >= pos (pos <= current position). */
int glim_session_truncate(struct glim_session *s, int64_t pos, struct glim_err *err);

#ifdef __cplusplus
}
#endif
#endif /* GLIM_H */
