/*
 * cuda_util.cuh — private to src/cuda: the CUDA backend's context, error
 * helpers and the launchers each .cu file exports to backend_cuda.cu.
 *
 * Errors: CUDA calls go through CUDA_TRY, which records the first failure in
 * the context (ops return void: backend.h) and never exits. sync/download
 * report the recorded failure as GLIM_EBACKEND.
 *
 * Threading: one backend is driven by one thread (backend.h); everything is
 * enqueued on ctx->stream in order, so scratch buffers are reused freely.
 */
#ifndef GLIM_CUDA_UTIL_CUH
#define GLIM_CUDA_UTIL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* the C headers use C11's _Static_assert; C++ spells it static_assert */
#ifndef _Static_assert
#define _Static_assert static_assert
#endif
#include "dev_clock.cuh"
extern "C" {
#include "backend/backend.h"
#include "base/err.h"
#include "quant/quant.h"
}

/* Repacked device layouts (be_weight.dev_type): lossless structure-of-arrays
 * versions of the GGUF blocks whose size is not a multiple of 16 bytes, so
 * every 16-byte load is aligned; and (opt-in, ctx->t16) Q4_K/Q6_K in 16-row tiles
 * (quant_t16_repack), rows padded to a multiple of 16. Values above every ggml id. */
enum cuda_dev_type {
    CUDA_DT_Q8_0_SOA = 0x100, /* qs[n_blocks][32] int8, then d[n_blocks] fp16 */
    CUDA_DT_Q4_0_SOA = 0x101, /* qs[n_blocks][16], then d[n_blocks] fp16 */
    CUDA_DT_Q6_K_SOA = 0x102, /* ql[nb][128], qh[nb][64], sc[nb][16], d[nb] fp16 */
    CUDA_DT_Q4_K_T16 = 0x103, /* per (tile, super-block) 2304 bytes: qs runs, 16 headers */
    CUDA_DT_Q6_K_T16 = 0x104, /* per (tile, super-block) 3360 bytes: ql, qh runs, scales, d */
};

/* T16 addressing (quant_t16_repack; the v5 lane code's *_fetch_t16 read the same). Row `row`'s
 * super-block sb lives in the record of tile row / 16; in it, byte o of the row's code runs
 * (Q4_K: qs, o < 128; Q6_K: ql, then qh as o = 128..191) lies at cuda_t16_run_pos(row & 15, o):
 * runs of 32 bytes, 512 per run for the 16 rows, lane 4g + t's 16 bytes = 8 bytes of row g, 8 of
 * row g + 8. Q4_K headers (d, dmin, scales) at 2048 + 16r; Q6_K scale i of row r at
 * cuda_t16_q6_sc_pos(r, i) (4 bytes at 4t = scales 2t, 2t+1, 8+2t, 9+2t), d at 3328 + 2r. */
#define CUDA_T16_Q4K_BYTES 2304
#define CUDA_T16_Q6K_BYTES 3360
static __device__ __forceinline__ const uint8_t *cuda_t16_rec(const uint8_t *p, int64_t row, int64_t n_sb,
                                                              int64_t sb, int rec_bytes)
{
    return p + ((row >> 4) * n_sb + sb) * rec_bytes;
}

static __device__ __forceinline__ int cuda_t16_run_pos(int r, int o)
{
    return 512 * (o >> 5) + 64 * (r & 7) + 16 * ((o >> 3) & 3) + 8 * (r >> 3) + (o & 7);
}

static __device__ __forceinline__ int cuda_t16_q6_sc_pos(int r, int i)
{
    return 3072 + 16 * r + 4 * ((i & 7) >> 1) + (i & 1) + 2 * (i >> 3);
}

/* A scratch buffer that grows on demand (stream-ordered, so it may be
 * replaced while earlier kernels that used it are still queued). */
struct cuda_buf {
    void  *p;
    size_t nbytes;
};

/* GLIM_CUDA_DBG_SKIP bits: kernels a bench may leave out to see what they cost (wrong output) */
#define CUDA_SKIP_PREP  1u   /* attn_prep */
#define CUDA_SKIP_ATTN  2u   /* attention */
#define CUDA_SKIP_NORM  4u   /* add_rmsnorm */
#define CUDA_SKIP_QUANT 8u   /* quantize_x (GEMV inputs not made by add_rmsnorm) */
#define CUDA_SKIP_GATE  16u  /* the output gate's GEMV (the short kernel gates with the row as it is) */
#define CUDA_SKIP_WO    32u  /* one token's gated Wo GEMV (matmul_glu, sigmoid) */

#define V5_TRACE_CAP 512   /* v5 launches the trace keeps (a decode step of the 30B preset: 105) */

struct cuda_ctx {
    int            device;
    cudaStream_t   stream;
    cublasHandle_t cublas;
    int            n_sm;
    int            cc_major;       /* compute capability major (8: sm_80, 9: sm_90) */
    cudaError_t    first_err;      /* sticky: first failure of an op */
    char           first_msg[256];
    struct cuda_buf wtile;         /* dequantized weight tile (bf16) for GEMM */
    struct cuda_buf xbf;           /* activations as bf16 for GEMM */
    struct cuda_buf attn_part;     /* split-K partial results */
    struct cuda_buf xq;            /* int8 activations + scales for the dp4a GEMV (gemv_q8.cu) */
    struct cuda_buf v5_part, v5_cnt;   /* GEMV v5 split-K partial sums and per-tile counts (gemv_mma.cu) */
    struct cuda_buf glu_q, glu_cnt;    /* the FFN's silu(gate) * up as int8 + scales, made by the gate/up
                                        * GEMV v5 (GLIM_CUDA_GLU_FUSE=1), and its per-block counts */
    const float    *glu_x, *glu_g;     /* the up / gate outputs glu_q was made of (NULL: none) */
    int64_t         glu_k;
    bool            glu_req;           /* in matmul_pair_glu: v5 may fill glu_q */
    bool            v5_nr;             /* 2..16 rows of Q4_K/Q6_K tiles on v5 (default; GLIM_CUDA_V5_NR=0: v2) */
    bool            v5_nr_rows;        /* ... and of row-major Q4_K/Q6_K (default; GLIM_CUDA_V5_NR_ROWS=0: v2) */
    struct cuda_buf prep_cnt;          /* per head: q/k/v GEMV tasks done (gemv_prep_arrive) */
    const struct be_attn_prep_args *prep_req;   /* in matmul_attn_prep: the prep the GEMV may run */
    bool            prep_taken;        /* ... and it did */
    bool            prep_fold;         /* matmul_attn_prep folds (opt-in GLIM_CUDA_PREP_FOLD=1: slower so far) */
    long            prep_used;         /* ... times it did (tests) */
    unsigned        dbg_skip;          /* GLIM_CUDA_DBG_SKIP: CUDA_SKIP_* not launched (bench: wrong output) */
    bool            glu_fuse;          /* matmul_pair_glu asks for it (default; GLIM_CUDA_GLU_FUSE=0 off) */
    int             v5s;               /* GEMV v5s for one-row jobs: chunks of v5s units (GLIM_CUDA_V5S=1..8; 0: v5) */
    int             v5s_pool;          /* ... its last v5s_pool % of tiles claimed by CTAs at run time (GLIM_CUDA_V5S_POOL, 50) */
    int             v5s_ahead;         /* ... pool claims a CTA keeps ahead of need (GLIM_CUDA_V5S_AHEAD=1..16, 2) */
    int             v5s_warps;         /* ... warps a CTA, 16 / v5s_warps CTAs an SM (GLIM_CUDA_V5S_WARPS=4|8|16, 16) */
    int             v5_mix;            /* a job's Q4_K and Q6_K parts in one v5 / v5s launch (GLIM_CUDA_V5_MIX, 0) */
    struct cuda_buf v5s_ctr;           /* ... the pool's claim and arrival counts, V5S_POOL_SLOTS launches' worth */
    unsigned        v5s_slot;          /* ... the next launch's pair of counts */
    long            glu_used;          /* matmuls that took glu_q instead of quantizing (tests) */
    const float    *xq_src;        /* x that xq holds (NULL = none): reused by the next matmul of it */
    int64_t         xq_k;
    int             xq_nr, xq_layout;
    bool            exact;         /* f32 GEMV only (GLIM_CUDA_EXACT=1, backend_cuda_set_exact) */
    bool            attn_v2;       /* attention v2 (default; GLIM_CUDA_NEW=0 or backend_cuda_set_new: v1) */
    bool            attn_dec_tc;   /* attention v4 (tensor cores) for n_tokens <= 16: decode, verify
                                    * (default; GLIM_CUDA_ATTN_DEC_TC=0 or backend_cuda_set_attn_dec_tc) */
    bool            attn_tc;       /* attention v4 for n_tokens > 16: prefill (default;
                                    * GLIM_CUDA_ATTN_TC=0 or backend_cuda_set_attn_tc) */
    bool            k45_aux;       /* Q4_K/Q5_K: build decoded scales at weight_init and use them
                                    * in the dp4a GEMV (default; GLIM_CUDA_NEW=0 / backend_cuda_set_new) */
    bool            t16;           /* weight_init uploads Q4_K/Q6_K as CUDA_DT_*_T16 (16-row tiles; default
                                    * on sm_90, GLIM_CUDA_T16=0|1, backend_cuda_set_t16); no decoded-scale table then */
    int             t16_min;       /* ... those of at least t16_min (tile, super-block) units per warp of
                                    * a full grid (16 per SM); 0: all (GLIM_CUDA_T16_MIN; default 8, or 0
                                    * with GLIM_CUDA_T16=1 and backend_cuda_set_t16) */
    const char     *t16_also;      /* ... and those whose names end with one of these (':' or ','
                                    * between; GLIM_CUDA_T16_ALSO, e.g. attn_q.weight:attn_k.weight:attn_v.weight:
                                    * q/k/v on v5) */
    int             gemv_ver;      /* GEMV for one activation row: 3 (default, dp4a), 5 (gemv_mma.cu,
                                    * tensor cores for Q4_K/Q6_K, others take v3), or 2 (one launch
                                    * per weight); GLIM_CUDA_GEMV=2|3|5, backend_cuda_set_gemv */
    int             gemv_persist;  /* > 0: persistent GEMV v3 with this many CTAs per SM for jobs of one
                                    * weight kind (default 4 on sm_90; GLIM_CUDA_GEMV_PERSIST=0..8); 0 = off */
    bool            pdl;           /* programmatic dependent launch of the v3/v4 GEMVs (sm_90; GLIM_CUDA_PDL=0: off) */
    int             carveout;      /* every launch's preferred shared-memory share, % (GLIM_CUDA_CARVEOUT; default 0; -1: none given) */
    bool            pdl_all;       /* ... and of the other decode kernels (default with pdl; GLIM_CUDA_PDL=1: GEMVs only) */
    bool            capturing;     /* between graph_begin and graph_end: scratch must not grow */
    int             side_ctas;     /* > 0: the output gate's GEMV of a one-token q/k/v/gate job runs on `side`
                                    * with this many persistent CTAs an SM, beside attn_prep and attention
                                    * (GLIM_CUDA_GATE_SIDE=0..4, default 2, backend_cuda_set_gate_side); 0: in the job */
    cudaStream_t    side;          /* lower priority than `stream`; forked by side_fork, joined by side_done */
    cudaEvent_t     side_fork, side_done;
    bool            side_pending;  /* work on `side` not yet joined: the next op but attention joins it */
    float          *side_y;        /* ... that work's output (the gate) and its length */
    int64_t         side_n;
    bool            gate_fold;     /* attention's combine applies that gate and quantizes Wo's input (default; GLIM_CUDA_GATE_FOLD=0: off) */
    struct cuda_buf att_q;         /* ... into here (int8 + scales, K45 order) */
    const float    *att_x, *att_g; /* the attention output / gate att_q was made of (NULL: none) */
    int64_t         att_k;
    long            att_used;      /* matmuls that took att_q instead of quantizing (tests) */
    bool            norm_scratch;  /* the fused add_rmsnorm ops leave o and h unwritten where nothing reads them (GLIM_CUDA_NORM_SCRATCH=0: stored) */
    long            side_used;     /* gate GEMVs run on `side` (tests) */
    bool            attn_short;    /* one decode token's attn_prep, attention and gate in one launch while the
                                    * context is short (attn_short.cu; GLIM_CUDA_ATTN_SHORT=0: off) */
    bool            short_pending; /* matmul_attn_prep left its attn_prep to the attention after it: */
    struct be_attn_prep_args short_prep;   /* ... this one (any other op first launches it) */
    const float    *short_gate;    /* ... and the output gate of that q/k/v job (NULL: none), */
    int64_t         short_gate_n;  /* ... its length */
    bool            short_side;    /* ... made on `side` */
    long            short_used;    /* attentions the short kernel took (tests) */
    bool            short_poll;    /* the short kernel polls the side gate's ready flag instead of the launch
                                    * waiting for the gate GEMV (GLIM_CUDA_SHORT_POLL=0: waits) */
    struct cuda_buf short_ready;   /* ... the flag: [0] CTAs ended, [1] set, [2] readers done (gemv_job.ready) */
    bool            short_armed;   /* the side GEMV of the pending prep sets it: a reader must reset it */
    unsigned       *job_ready;     /* gemv_q8.cu: the next one-row job's gemv_job.ready (cuda_matmul_side) */
    bool            job_ready_taken;   /* ... and whether its kernel sets it */
    void           *norm_trace;    /* GLIM_CUDA_NORM_TRACE=1: add_rmsnorm's phases (fused.cu, diagnosis) */
    int             norm_trace_n;  /* launches traced since graph_begin */
    bool            graph_time;    /* GLIM_CUDA_GRAPH_TIME=1: each replay's GPU time (events, diagnosis) */
    cudaEvent_t     gt_ev[2];
    bool            gt_open;       /* gt_ev holds a replay not yet read */
    double          gt_sum_ms, gt_launch_us;
    long            gt_n;
    struct cuda_buf am_part;       /* argmax.cu: per-row CTA (key, index) pairs and arrival counts */
    void           *short_trace;   /* GLIM_CUDA_SHORT_TRACE=1: per short attention and CTA its stamps (diagnosis) */
    int             short_trace_n, short_trace_heads;   /* launches traced since graph_begin; their CTAs */
    void           *fetch_host;    /* fetch_start's page-locked staging, BE_FETCH_SLOTS x BE_FETCH_MAX (first use) */
    cudaEvent_t     fetch_ev[BE_FETCH_SLOTS];
    void           *v5_trace;      /* GLIM_CUDA_V5_TRACE=1: gemv_mma.cu's per-warp times (diagnosis) */
    int             v5_trace_n;    /* launches traced since graph_begin */
    int64_t         v5_trace_meta[V5_TRACE_CAP][2];   /* per launch: warps, bytes */
};

/* Programmatic dependent launch (sm_90; no-ops elsewhere and when the launch did not ask for
 * it): a kernel launched with the attribute may start before its predecessor ends; it must
 * call cuda_pdl_wait before it reads what earlier kernels wrote or writes what they read.
 * cuda_pdl_trigger lets the next such kernel start now instead of at this kernel's end. */
static __device__ __forceinline__ void cuda_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void cuda_pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* A launch config on ctx's stream; with pdl, launched kernels may start before their
 * predecessor ends (they must call cuda_pdl_wait first: see above). attr: storage for two
 * attributes (PDL, and ctx->carveout's shared memory share when set). */
static inline cudaLaunchConfig_t cuda_launch_cfg_pdl(const struct cuda_ctx *c, dim3 grid, dim3 block, size_t smem,
                                                     cudaLaunchAttribute *attr, bool pdl)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cfg.attrs = attr;
    cfg.numAttrs = 0;
    if (pdl) {
        attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (c->carveout >= 0) {
        attr[cfg.numAttrs].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
        attr[cfg.numAttrs++].val.sharedMemCarveout = (unsigned)c->carveout;
    }
    return cfg;
}

/* ... as a GEMV: PDL with ctx->pdl */
static inline cudaLaunchConfig_t cuda_launch_cfg(const struct cuda_ctx *c, dim3 grid, dim3 block, size_t smem,
                                                 cudaLaunchAttribute *attr)
{
    return cuda_launch_cfg_pdl(c, grid, block, smem, attr, c->pdl);
}

/* The first statement of a kernel launched with cuda_launch_dep: wait for the previous
 * kernel, then let the next one start. (The other order, measured 2026-12-03: tg128 146.8 vs
 * 160.2 t/s: the next GEMV's weight loads then crowd this kernel's own.) */
static __device__ __forceinline__ void cuda_pdl_enter(void)
{
    cuda_pdl_wait();
    cuda_pdl_trigger();
}

/* device dev's HBM: memory clock (kHz) and bus width (bits) as the driver reports them, and their peak
 * in GB/s (double data rate; 0 where the driver reports neither) */
static inline double cuda_hbm_peak(int dev, int *mem_khz, int *bus_bits)
{
    *mem_khz = 0, *bus_bits = 0;
    cudaDeviceGetAttribute(mem_khz, cudaDevAttrMemoryClockRate, dev);
    cudaDeviceGetAttribute(bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
    return 2.0 * *mem_khz * 1e3 * (*bus_bits / 8) / 1e9;
}

/* A positive integer from the environment, or 0; read once into *cache (-1 = not yet): the
 * GEMV bench knobs */
static inline int cuda_env_knob(const char *name, int *cache)
{
    if (*cache < 0) {
        const char *e = getenv(name);
        int v = e ? atoi(e) : 0;
        *cache = v > 0 ? v : 0;
    }
    return *cache;
}

/* Any op that may write device memory makes the quantized copy of x stale. */
static inline void cuda_xq_forget(struct cuda_ctx *c)
{
    c->xq_src = NULL;
    c->glu_x = NULL;
    c->att_x = NULL;
}

/* backend_cuda.cu: exact f32 GEMV on/off (declared here until backend.h has it) */
extern "C" int backend_cuda_set_exact(struct backend *be, bool exact);
/* backend_cuda.cu: the kernels added 2026-12-02 evening on/off (attention v2); tests
 * compare both; GLIM_CUDA_NEW=0 at creation turns them off */
extern "C" int backend_cuda_set_new(struct backend *be, bool on);
extern "C" int backend_cuda_set_attn_tc(struct backend *be, bool on);
extern "C" int backend_cuda_set_gemv(struct backend *be, int version);   /* 2, 3, 4 or 5 */
extern "C" int backend_cuda_set_attn_dec_tc(struct backend *be, bool on);
extern "C" int backend_cuda_set_gemv_persist(struct backend *be, int ctas_per_sm);   /* 0 = off */
extern "C" int backend_cuda_get_gemv_persist(struct backend *be);                    /* -1: not CUDA */
extern "C" int backend_cuda_get_gemv(struct backend *be);                            /* -1: not CUDA */
extern "C" int backend_cuda_set_t16(struct backend *be, bool on);
extern "C" int backend_cuda_set_glu_fuse(struct backend *be, bool on);   /* matmul_pair_glu fuses SwiGLU */
extern "C" long backend_cuda_glu_used(struct backend *be);
extern "C" int backend_cuda_set_prep_fold(struct backend *be, bool on);   /* matmul_attn_prep folds attn_prep */
extern "C" long backend_cuda_prep_used(struct backend *be);
/* gemv_mma.cu: the v5 trace (GLIM_CUDA_V5_TRACE=1, diagnosis): its buffer, and printing it */
bool cuda_v5_trace_init(struct cuda_ctx *c);
bool cuda_norm_trace_init(struct cuda_ctx *c);   /* fused.cu: add_rmsnorm's phases (GLIM_CUDA_NORM_TRACE=1) */
/* stamps.cu: qsort's order of doubles; the summary of n launches' per-CTA stamps (per a CTA, ns,
 * device memory dev, launch i's from stamp i * stride, CTA b's from b * cta_stride of it), what[k]
 * naming stamp k, on stderr under tag */
int cuda_cmp_dbl(const void *a, const void *b);
void cuda_stamps_dump(const char *tag, const void *dev, int n, int stride, int ctas, int per, int cta_stride,
                      const char *const *what);
bool cuda_short_trace_init(struct cuda_ctx *c);   /* attn_short.cu: its phases (GLIM_CUDA_SHORT_TRACE=1) */
void cuda_short_trace_dump(struct cuda_ctx *c);
void cuda_norm_trace_dump(struct cuda_ctx *c);
void cuda_v5_trace_dump(struct cuda_ctx *c);
extern "C" int backend_cuda_set_gate_side(struct backend *be, int ctas_per_sm);   /* 0 = off */
extern "C" int backend_cuda_get_gate_side(struct backend *be);
extern "C" long backend_cuda_side_used(struct backend *be);
extern "C" int backend_cuda_set_gate_fold(struct backend *be, bool on);
extern "C" int backend_cuda_get_gate_fold(struct backend *be);
extern "C" int backend_cuda_set_norm_scratch(struct backend *be, bool on);
extern "C" int backend_cuda_get_norm_scratch(struct backend *be);
/* gemv_q8.cu: whether a one-row matmul of w reads its input only as quantize_x's K45 int8 copy */
bool cuda_q8_k45(const struct cuda_ctx *c, const struct be_weight *w);
extern "C" long backend_cuda_att_used(struct backend *be);
/* attn_short.cu: contexts of at most this many keys take the short kernel (a decode graph class) */
#define CUDA_SHORT_KEYS 256
/* ... whether p (one decode token at p->pos_host0) is the short kernel's */
bool cuda_attn_short_ok(const struct cuda_ctx *c, const struct be_attn_prep_args *p);
/* ... attn_prep(p) then attention(x) in one launch, with Wo's gated int8 input (att_q) when gate is
 * given (ready in stream order); false: not its shapes (nothing launched) */
bool cuda_attn_short(struct cuda_ctx *c, const struct be_attn_prep_args *p, const struct be_attn_args *x,
                     const float *gate, unsigned *ready);
/* attn_decode.cu: att_q sized for x's gated output, its int8 part and scales; false: failure recorded */
bool cuda_attn_gate_buf(struct cuda_ctx *c, const struct be_attn_args *x, int8_t **gq, float2 **gd);
extern "C" int backend_cuda_set_attn_short(struct backend *be, bool on);
extern "C" int backend_cuda_set_short_poll(struct backend *be, bool on);
extern "C" long backend_cuda_short_used(struct backend *be);
/* gemv_q8.cu: y = w x (one row) on ctx->side, forked from ctx->stream after x's int8 copy is made;
 * false = not such a matmul (nothing launched) */
bool cuda_matmul_side(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x,
                      unsigned *ready = NULL);
/* ... whether cuda_matmul_side would take w now */
bool cuda_side_ok(const struct cuda_ctx *c, const struct be_weight *w);

/* Record err (if it is the first) with the call site; returns true on failure. */
bool cuda_check(struct cuda_ctx *c, cudaError_t e, const char *what, const char *file, int line);
bool cuda_check_blas(struct cuda_ctx *c, cublasStatus_t s, const char *what, const char *file, int line);

#define CUDA_TRY(c, call) cuda_check((c), (call), #call, __FILE__, __LINE__)
#define CUDA_LAUNCHED(c, what) cuda_check((c), cudaGetLastError(), what, __FILE__, __LINE__)
#define CUBLAS_TRY(c, call) cuda_check_blas((c), (call), #call, __FILE__, __LINE__)

/* Make `stream` wait for the work forked to `side` (cuda_matmul_side). Every op but attn_prep and
 * attention calls this first: the side GEMV reads the int8 x scratch and writes its y, which the
 * ops after attention may reuse. */
static inline void cuda_side_join(struct cuda_ctx *c)
{
    if (!c->side_pending)
        return;
    c->side_pending = false;
    CUDA_TRY(c, cudaEventRecord(c->side_done, c->side));
    CUDA_TRY(c, cudaStreamWaitEvent(c->stream, c->side_done, 0));
}

/* Launch k on ctx's stream; as a programmatic dependent launch when ctx->pdl_all
 * (sm_90 unless GLIM_CUDA_PDL=0 or 1), so k must begin with cuda_pdl_enter. Failures are recorded. */
template <typename... KArgs, typename... Args>
static inline void cuda_launch_dep(struct cuda_ctx *c, dim3 grid, dim3 block, size_t smem, void (*k)(KArgs...),
                                   Args... args)
{
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = cuda_launch_cfg_pdl(c, grid, block, smem, attr, c->pdl_all);
    CUDA_TRY(c, cudaLaunchKernelEx(&cfg, k, args...));
}


/* Grow b to at least nbytes (stream-ordered); false on failure (recorded). */
bool cuda_buf_reserve(struct cuda_ctx *c, struct cuda_buf *b, size_t nbytes);
/* ... as a counter buffer: zeroed when new (its users leave their counts at 0) */
bool cuda_buf_counts(struct cuda_ctx *c, struct cuda_buf *b, size_t nbytes);
/* argmax.cu: backend.h argmax on ctx->stream */
void cuda_argmax(struct cuda_ctx *c, int32_t *out, const float *x, int n_rows, int64_t n, int32_t *pos_inc);
void cuda_buf_release(struct cuda_ctx *c, struct cuda_buf *b);

static inline unsigned cuda_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 1048576 ? 1048576 : b);  /* kernels grid-stride */
}

/* ---- gemv_kquant.cu ---- */
/* bytes of the device copy for a weight of this (host) type, 0 = unsupported; t16: Q4_K/Q6_K in
 * 16-row tiles (padded) */
size_t cuda_weight_dev_bytes(uint32_t type, int64_t k, int64_t n, bool t16, uint32_t *dev_type);
bool cuda_type_supported(uint32_t type);
void cuda_matmul(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows);
/* ys[i] = x . ws[i]^T: one launch when the weights allow it (cuda_q8_batchable) */
void cuda_matmul_n(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws, const float *x,
                   int n_rows);
/* y = (x * act(g)) . W^T; x may be overwritten with x * act(g) (backend.h matmul_glu) */
void cuda_matmul_glu(struct cuda_ctx *c, float *y, const struct be_weight *w, float *x, const float *g, int act,
                     int n_rows);
void cuda_get_rows(struct cuda_ctx *c, float *y, const struct be_weight *w, const int32_t *ids, int n);

/* ---- gemv_q8.cu ---- */
/* The int8 activation layout of Q4_K/Q5_K/Q6_K weights ("K45"): element n of a row goes to
 * byte cuda_xq_pos_k45(n); xd[n / 32] = {d, d * sum(q)}, q = rint(x / d), d = amax / 127. */
static __device__ __forceinline__ int64_t cuda_xq_pos_k45(int64_t n)
{
    /* 16-run r of a 256 super-block: chunk c = r/4: runs 4c, 4c+1 go to lanes 2c, 2c+1 low;
     * 4c+2, 4c+3 high (gemv_q8.cu xl_run) */
    int r = (int)((n >> 4) & 15), rr = r & 3;
    int at = rr < 2 ? 2 * (r >> 2) + rr : 8 + 2 * (r >> 2) + rr - 2;
    return (n & ~(int64_t)255) + 16 * at + (n & 15);
}
/* A kernel other than the quantizer fills the K45 int8 copy of x[nr][k] (k % 256 == 0):
 * cuda_xq_reserve sizes ctx->xq and returns its parts; after the launch, cuda_xq_filled
 * makes the next matmul of x reuse it. False when the GEMV would not use it (exact mode,
 * more than 16 rows) or on failure. */
bool cuda_xq_reserve(struct cuda_ctx *c, int64_t k, int nr, int8_t **xq, float2 **xd);
void cuda_xq_filled(struct cuda_ctx *c, const float *x, int64_t k, int nr);
/* dev_type has an int8-activation dp4a GEMV (Q4_K, Q5_K, Q6_K, Q8_0, Q4_0; T16 layouts too) */
bool cuda_q8_supported(uint32_t dev_type);
/* y[n_rows][N] = x . W^T with x quantized to int8 per 32 (n_rows <= 16) */
void cuda_matmul_q8(struct cuda_ctx *c, float *y, const struct be_weight *w, const float *x, int n_rows);
/* ws[0..n) share x: same K and activation layout, n <= 4 (cuda_q8_batchable): one quantize,
 * one launch (v3). g != NULL: the activations are x * act(g) (enum be_glu; matmul_glu). */
bool cuda_q8_batchable(int n, const struct be_weight *const *ws);
void cuda_matmul_q8_n(struct cuda_ctx *c, int n, float *const *ys, const struct be_weight *const *ws,
                      const float *x, int n_rows, const float *g, int act);
/* Q4_K/Q5_K decoded scales (be_weight.aux): 16 bytes per block, placed after the GGUF
 * blocks in the same allocation at offset CUDA_K45_AUX_OFFSET(dev_bytes); 0 = other type */
#define CUDA_K45_AUX_OFFSET(dev_bytes) (((dev_bytes) + 255) & ~(size_t)255)
size_t cuda_k45_aux_bytes(uint32_t type, int64_t k, int64_t n);
/* host: dst[block][c][4] = {sc[2c], sc[2c+1], m[2c], m[2c+1]} (6-bit values, c = 0..3) */
void cuda_k45_aux_build(uint32_t type, const void *src, uint8_t *dst, int64_t k, int64_t n);

/* ---- attn_decode.cu ---- */
void cuda_attention(struct cuda_ctx *c, const struct be_attn_args *a);
/* attn_prep(p) then attention(a) in one launch where the shapes allow; false: nothing launched */
bool cuda_attention_prep(struct cuda_ctx *c, const struct be_attn_prep_args *p, const struct be_attn_args *a);
void cuda_kv_store(struct cuda_ctx *c, void *k_cache, void *v_cache, uint32_t kv_type, int64_t n_slots,
                   const float *k, const float *v, int n_tokens, const int32_t *pos, int kv_dim);

/* ---- ops.cu ---- */
void cuda_rmsnorm(struct cuda_ctx *c, float *y, const float *x, const float *w, int64_t n_rows, int n,
                  float eps);
void cuda_rope(struct cuda_ctx *c, float *x, int n_rows, int n_head, int head_dim, int n_rot,
               const int32_t *pos, float base, bool neox);
void cuda_add(struct cuda_ctx *c, float *y, const float *x, int64_t n);
void cuda_mul_sigmoid(struct cuda_ctx *c, float *y, const float *g, int64_t n);
/* ops.cu: a kernel on s that asks L2 for [p, p + nbytes) (sm_90; a hint: no result changes) */
void cuda_swiglu(struct cuda_ctx *c, float *y, const float *gate, const float *up, int64_t n);
void cuda_scale_softcap(struct cuda_ctx *c, float *y, int64_t n, float scale, float cap);
void cuda_copy_rows(struct cuda_ctx *c, float *dst, int64_t dst_stride, const float *src,
                    int64_t src_stride, int n_rows, int n);

/* ---- fused.cu (backend_i.add_rmsnorm, attn_prep) ---- */
/* skip: stores it may leave out (the fused ops' o and h are scratch afterwards, backend.h): o
 * (CUDA_NORM_NO_O), h where its int8 copy is made (CUDA_NORM_NO_H); the kernel for rows the float4
 * form does not take stores them all the same */
#define CUDA_NORM_NO_O 1u
#define CUDA_NORM_NO_H 2u
void cuda_add_rmsnorm(struct cuda_ctx *c, float *x, float *h, float *o, const float *w_o, float eps_o,
                      const float *w_h, float eps_h, int64_t n_rows, int n, unsigned skip = 0);
void cuda_attn_prep(struct cuda_ctx *c, const struct be_attn_prep_args *a);
void cuda_rope_table(struct cuda_ctx *c, float2 *cs, const int32_t *pos, int n_tokens, int n_rot, float base);

#endif
