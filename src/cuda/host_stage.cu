/*
 * host_stage.cu — the host side of a decode step's copies, through page-locked memory.
 *
 * A decode token uploads its id and position and downloads its logits (202048 floats,
 * 808 KB, on the 30B preset); the GPU waits for all of it. From pageable memory the driver
 * stages each copy itself, and an upload had to be followed by a stream sync before the
 * caller could reuse its buffer. Here:
 *  - small uploads are copied into a page-locked ring and enqueued without a sync (the
 *    caller may reuse its buffer at once; the stream orders the copy before any later op).
 *    The ring restarts when the stream has drained (every download and sync drains it) and
 *    syncs only when a run of uploads without one fills it.
 *  - downloads go into a page-locked buffer in chunks, each with an event, and the host
 *    copies chunk i out while the DMA of chunk i+1 runs.
 * GLIM_CUDA_PINNED=0 turns both off (the pageable copies, for comparison).
 */
#include "cuda_util.cuh"

#include <stdlib.h>
#include <string.h>

#define STAGE_UP_CAP   (256u << 10)   /* uploads larger than a quarter of this go direct */
#define STAGE_DOWN_MAX (64u << 20)    /* downloads larger than this go direct */
#define STAGE_CHUNK    (256u << 10)   /* a download's DMA / host copy overlap unit */

/* Never fails the backend: without page-locked memory the copies stay pageable. */
void cuda_stage_init(struct cuda_ctx *c)
{
    const char *e = getenv("GLIM_CUDA_PINNED");
    c->stage.off = e && strcmp(e, "0") == 0;
    for (int i = 0; i < CUDA_STAGE_EVENTS && !c->stage.off; i++)
        c->stage.off = cudaEventCreateWithFlags(&c->stage.ev[i], cudaEventDisableTiming) != cudaSuccess;
    if (!c->stage.off && cudaMallocHost(&c->stage.up, STAGE_UP_CAP) != cudaSuccess) {
        c->stage.up = NULL;
        c->stage.off = true;
    }
    if (c->stage.off)
        cudaGetLastError();   /* not sticky */
    c->stage.up_cap = c->stage.up ? STAGE_UP_CAP : 0;
}

void cuda_stage_release(struct cuda_ctx *c)
{
    if (c->stage.up)
        cudaFreeHost(c->stage.up);
    if (c->stage.down)
        cudaFreeHost(c->stage.down);
    for (int i = 0; i < CUDA_STAGE_EVENTS; i++)
        if (c->stage.ev[i])
            cudaEventDestroy(c->stage.ev[i]);
    memset(&c->stage, 0, sizeof c->stage);
}

/* The stream has drained: every staged upload has been read. */
void cuda_stage_drained(struct cuda_ctx *c)
{
    c->stage.up_off = 0;
}

bool cuda_stage_upload(struct cuda_ctx *c, void *dst, const void *src, size_t nbytes)
{
    struct cuda_stage *s = &c->stage;
    if (s->off || !s->up || c->capturing || nbytes > s->up_cap / 4)
        return false;
    if (s->up_off + nbytes > s->up_cap) {   /* the ring is full of copies that may not have run */
        if (CUDA_TRY(c, cudaStreamSynchronize(c->stream)))
            return false;
        s->up_off = 0;
    }
    char *p = (char *)s->up + s->up_off;
    memcpy(p, src, nbytes);
    s->up_off += (nbytes + 15) & ~(size_t)15;
    CUDA_TRY(c, cudaMemcpyAsync(dst, p, nbytes, cudaMemcpyHostToDevice, c->stream));
    return true;
}

static bool stage_down_reserve(struct cuda_ctx *c, size_t nbytes)
{
    struct cuda_stage *s = &c->stage;
    if (s->down_cap >= nbytes)
        return true;
    if (s->down)
        cudaFreeHost(s->down);
    s->down = NULL;
    s->down_cap = 0;
    size_t cap = (nbytes + STAGE_CHUNK - 1) / STAGE_CHUNK * STAGE_CHUNK;
    if (cudaMallocHost(&s->down, cap) != cudaSuccess) {   /* not fatal: the direct copy still works */
        cudaGetLastError();
        s->down = NULL;
        return false;
    }
    s->down_cap = cap;
    return true;
}

bool cuda_stage_download(struct cuda_ctx *c, void *dst, const void *src, size_t nbytes)
{
    struct cuda_stage *s = &c->stage;
    if (s->off || c->capturing || nbytes == 0 || nbytes > STAGE_DOWN_MAX || !stage_down_reserve(c, nbytes))
        return false;
    /* chunks of at least STAGE_CHUNK, at most CUDA_STAGE_EVENTS of them */
    size_t chunk = STAGE_CHUNK;
    while ((nbytes + chunk - 1) / chunk > CUDA_STAGE_EVENTS)
        chunk *= 2;
    int n = (int)((nbytes + chunk - 1) / chunk);
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)i * chunk, len = nbytes - at < chunk ? nbytes - at : chunk;
        CUDA_TRY(c, cudaMemcpyAsync((char *)s->down + at, (const char *)src + at, len, cudaMemcpyDeviceToHost,
                                    c->stream));
        CUDA_TRY(c, cudaEventRecord(s->ev[i], c->stream));
    }
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)i * chunk, len = nbytes - at < chunk ? nbytes - at : chunk;
        if (CUDA_TRY(c, cudaEventSynchronize(s->ev[i])))
            break;   /* the error is sticky: the caller reports it */
        memcpy((char *)dst + at, (const char *)s->down + at, len);
    }
    s->up_off = 0;   /* the last event follows every staged upload */
    return true;
}
