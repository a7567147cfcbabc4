/*
 * mega.cuh — private to src/cuda: the persistent decode span (mega.cu, opt-in GLIM_CUDA_MEGA=1):
 * what the backend hands it and when it may run. backend_cuda.cu defers a decode token's
 * matmul_glu (Wo) and add_rmsnorm_ffn while they come in that order and runs them with the next
 * add_rmsnorm_attn's norm and projections as one launch; any other op runs the deferred ones
 * as the launches they would have been.
 */
#ifndef GLIM_CUDA_MEGA_CUH
#define GLIM_CUDA_MEGA_CUH

#include "cuda_util.cuh"

#define MG_CW 16         /* consumer warps a CTA: v5's 16 warps an SM, so its split and its bits */
#define MG_JOBS 8        /* v5 jobs a span: Wo, gate/up, down, q/k/v/gate, each one or two kinds */
#define MG_KMAX 20480    /* the longest activation a job reads (shared memory holds one copy) */

#define MG_TRACE_CAP 64   /* spans traced (GLIM_CUDA_MEGA_TRACE=1) */

enum { MG_WO, MG_GU, MG_DOWN, MG_QKV, MG_STAGES };

/* A layer's tail and the next layer's head, one decode row:
 *   wo_y = Wo . wo_xq (the attention's output, gated and quantized: matmul_glu's input)
 *   add_rmsnorm(r_ffn); ffn_f = (gate, up) . r_ffn.h; ffn_y = down . (silu(gate) * up)
 *   add_rmsnorm(r_attn); ys[i] = ws[i] . r_attn.h, i < n
 * with r_ffn.o == wo_y, r_attn.o == ffn_y and one residual x; h and o are scratch afterwards. */
struct cuda_mega_args {
    float                  *wo_y;
    const struct be_weight *wo;
    const int8_t           *wo_xq;
    const float2           *wo_xd;
    struct be_res_norm      r_ffn, r_attn;
    float                  *ffn_f[2], *ffn_y;
    const struct be_weight *ffn_w[3];   /* gate, up, down */
    int                     n;
    float                  *ys[4];
    const struct be_weight *ws[4];
};

/* whether the span can run these (sm_90, tiled Q4_K/Q6_K weights, rows the norm takes) */
bool cuda_mega_ok(struct cuda_ctx *c, const struct cuda_mega_args *a);
/* the deferred Wo alone, as the v5 launch matmul_glu would have made (a failure is recorded) */
void cuda_mega_wo(struct cuda_ctx *c, const struct cuda_mega_args *a);
/* launch it; false: nothing launched (not ok, or its scratch could not be had: recorded) */
bool cuda_mega_launch(struct cuda_ctx *c, const struct cuda_mega_args *a);

/* GLIM_CUDA_MEGA_TRACE=1 (diagnosis): the device buffer, made at creation (false: recorded), and
 * the medians printed at backend_destroy */
bool cuda_mega_trace_init(struct cuda_ctx *c);
void cuda_mega_trace_dump(struct cuda_ctx *c);

#endif
