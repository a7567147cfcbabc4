/*
 * tma.cuh — private to src/cuda: sm_90 bulk copies (the TMA engine, cp.async.bulk) from global
 * into shared memory that complete on an mbarrier, for kernels that stream their weights through
 * a shared-memory ring (mega.cu: the persistent span; dev/cuda/mega_model.cu). Below sm_90 they
 * compile to nothing; callers launch those kernels only on sm_90.
 */
#ifndef GLIM_TMA_CUH
#define GLIM_TMA_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ unsigned smem_u32(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
#endif

static __device__ __forceinline__ void bar_init(uint64_t *bar, unsigned count)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#endif
}

static __device__ __forceinline__ void bar_init_fence(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

static __device__ __forceinline__ void bar_expect(uint64_t *bar, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
#endif
}

static __device__ __forceinline__ void bulk_copy(uint8_t *dst, const void *src, unsigned bytes, uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
#endif
}

/* An L2 policy for cache hints: evict-first (data streamed once, so that it leaves L2 before the
 * small data read again soon), evict-last (data read again later, kept past a stream) or normal */
enum l2_prio { L2_EVICT_NORMAL, L2_EVICT_FIRST, L2_EVICT_LAST };

static __device__ __forceinline__ uint64_t l2_policy(enum l2_prio prio)
{
    uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (prio == L2_EVICT_FIRST)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    else if (prio == L2_EVICT_LAST)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

/* bulk_copy with an L2 policy (l2_policy) */
static __device__ __forceinline__ void bulk_copy_hint(uint8_t *dst, const void *src, unsigned bytes, uint64_t *bar,
                                                      uint64_t pol)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
                 : "memory");
#endif
}

/* ask L2 for bytes (a multiple of 16) at src: a hint, nothing completes or waits */
static __device__ __forceinline__ void bulk_prefetch_l2(const void *src, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#endif
}

/* one arrival (no transaction bytes): a consumer done with a ring page */
static __device__ __forceinline__ void bar_arrive(uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
#endif
}

/* has the phase of this parity completed? try_wait (SUSPEND) may suspend the thread a while,
 * test_wait never does */
#define TMA_BAR_ASK(op) "{ .reg .pred p; mbarrier." op ".parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
template <bool SUSPEND>
static __device__ __forceinline__ bool bar_phase_done(uint64_t *bar, unsigned parity)
{
    unsigned done = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (SUSPEND)
        asm volatile(TMA_BAR_ASK("try_wait") : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    else
        asm volatile(TMA_BAR_ASK("test_wait") : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
#endif
    return done != 0;
}

static __device__ __forceinline__ bool bar_try(uint64_t *bar, unsigned parity)
{
    return bar_phase_done<true>(bar, parity);
}

static __device__ __forceinline__ bool bar_test(uint64_t *bar, unsigned parity)
{
    return bar_phase_done<false>(bar, parity);
}

static __device__ __forceinline__ void bar_wait(uint64_t *bar, unsigned parity)
{
    while (!bar_try(bar, parity)) {
    }
}

#endif
