/*
 * session.h — internal session calls beyond the public API (DFlash, server).
 * Owner thread only.
 */
#ifndef GLIM_SESSION_H
#define GLIM_SESSION_H

#include "glim.h"

struct kv_cache;

/* Like glim_session_eval, and also copies the residual stream entering the
 * layers tap_layers[0..n_taps) of every evaluated row into taps (host,
 * [n][n_taps * n_embd]). picks (NULL = none): the argmax of each of the last
 * n_out rows, made on the backend where it can (logits are then left unwritten,
 * and may be NULL), else from the logits (struct fwd_batch.picks). */
int session_eval_taps(struct glim_session *s, const int32_t *tokens, int n, float *logits, int32_t *picks,
                      int n_out, int n_taps, const int *tap_layers, float *taps, struct glim_err *err);
/* The same with taps in the session's backend memory (copied there in stream order, never
 * downloaded: DFlash hands them to its draft on the same backend). */
int session_eval_taps_on_backend(struct glim_session *s, const int32_t *tokens, int n, float *logits,
                                 int32_t *picks, int n_out, int n_taps, const int *tap_layers, float *taps,
                                 struct glim_err *err);

struct kv_cache *session_kv(struct glim_session *s);
int session_n_chunk(const struct glim_session *s);
struct glim_model *session_model(struct glim_session *s);
void *session_scratch(struct glim_session *s);   /* backend memory for n_chunk tokens */

#endif
