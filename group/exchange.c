/* exchange.c - the exchange of one merge step: every rank's rows into every
 * rank's gathered buffer, on the caller's stream. One interface, the paths of
 * dcptopk_path:
 *  - nccl: ncclAllGather in place (the send buffer is this rank's slot of
 *    the receive buffer), rank stride = T, so only T rows travel;
 *  - push: the device push of kernels/exchange (helper dpush), rank stride =
 *    max_rows, double-buffered by parity, sequence-numbered flags;
 *  - staged: device copies into every peer's buffer (peer memory), a bounded
 *    stream wait and a host barrier: blocks the host, not capturable;
 *  - store: this rank's rows to the host, a store all-gather, every rank's
 *    rows back to the device: blocks the host, not capturable;
 *  - loopback: one rank, nothing moves.
 * The members are gw's (the group, or this rank's node in a hierarchical
 * workspace); dc_rail_run carries the node top Ks across the nodes. */
#include <stdio.h>
#include <string.h>

#include "group_int.h"
#include "driver.h"
#include "nccl_table.h"
#include "runtime.h"

#ifdef DC_HAVE_PUSH_EXCHANGE
#include "exchange_push.h" /* kernels/exchange: dc_push_exchange_launch */
#endif

uint64_t dc_gw_gathered(const struct dcptopk_group_workspace *gw, int32_t r,
                        int32_t parity)
{
    const uint64_t base = gw->mem.mapped[r];
    return base ? base + gw->off_gathered +
                      (uint64_t)parity * gw->gathered_bytes
                : 0;
}

static dcptopk_result ex_nccl(struct dcptopk_group_workspace *gw,
                              const dc_exchange_call *x)
{
    dcptopk_group *g = gw->g;
    const dc_nccl *nc = dc_nccl_get(NULL);
    if (!nc || !g->comm)
        return dc_fail(g->ctx, DCPTOPK_INTERNAL,
                       "nccl exchange without a communicator");
    const size_t count = (size_t)x->rows * (size_t)gw->row_words;
    const uint64_t base = dc_gw_gathered(gw, g->rank, x->parity);
    const uint64_t send = base + (uint64_t)g->rank * count * 4u;
    ncclResult_t nr =
        nc->ncclAllGather((const void *)(uintptr_t)send,
                          (void *)(uintptr_t)base, count, ncclInt32,
                          (ncclComm_t)g->comm, (cudaStream_t)x->stream);
    if (nr != ncclSuccess)
        return dc_nccl_fail(g->ctx, nr, (ncclComm_t)g->comm, "ncclAllGather");
    return DCPTOPK_SUCCESS;
}

/* The device push (kernels/exchange/exchange_push.h). Compiled with the
 * DCPTOPK_PUSH_EXCHANGE build option (DC_HAVE_PUSH_EXCHANGE); without it the
 * path is never chosen (push_built = 0) and a forced one is refused at group
 * creation. The kernel counts calls in its device control block (ctl); the
 * host passes its own count as expect_seq, so a drift is a protocol error,
 * and the select reads the parity of that count. */
static dcptopk_result dc_exchange_push(struct dcptopk_group_workspace *gw,
                                       const dc_exchange_call *x)
{
#ifdef DC_HAVE_PUSH_EXCHANGE
    dcptopk_group *g = gw->g;
    const dc_cuda *cu = dc_cuda_get(NULL);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu && cu->cuStreamIsCapturing((CUstream)x->stream, &cs) ==
                  CUDA_SUCCESS &&
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        /* A replay is the kernel's next call (its parity alternates on the
         * device) while captured arguments stay as captured: from now on
         * the host's count no longer follows the device's, so this call and
         * every later one settle the rows into the fixed buffer and read
         * them there (docs/PROTOCOL.md, "Graph capture"). */
        gw->device_counted = 1;
    dc_push_exchange p;
    memset(&p, 0, sizeof p);
    p.world_size = gw->xsize;
    p.rank = gw->xrank;
    p.rows = x->rows;
    p.max_rows = gw->max_rows;
    p.row_words = gw->row_words;
    p.src = (const int32_t *)(uintptr_t)(
        dc_gw_gathered(gw, g->rank, x->parity) +
        (uint64_t)gw->xrank * (uint64_t)gw->max_rows *
            (uint64_t)gw->row_words * 4u);
    for (int32_t i = 0; i < gw->xsize; i++) {
        p.peer_gathered[i] = gw->mem.mapped[gw->xfirst + i] + gw->off_gathered;
        p.peer_flags[i] = gw->mem.mapped[gw->xfirst + i] + gw->off_xflags;
    }
    p.ctl = gw->status;
    /* A replay's call number is not the capture's: no host check then. */
    p.expect_seq = gw->device_counted ? 0 : x->seq;
    p.timeout_ns = (uint64_t)g->timeout_ms * 1000000ull;
    dcptopk_result r = dc_push_exchange_launch(g->ctx, &p, x->stream);
    if (r || !gw->device_counted)
        return r;
    return dc_exchange_settle_launch(g->ctx, gw->xsize, gw->status,
                                     gw->mem.local + gw->off_stable, x->rows,
                                     gw->max_rows, gw->row_words, x->stream);
#else
    (void)x;
    return dc_fail(gw->g->ctx, DCPTOPK_UNSUPPORTED,
                   "the push exchange is not built into this library "
                   "(built with DCPTOPK_PUSH_EXCHANGE=OFF): use the nccl or "
                   "staged path");
#endif
}

/* The staged and store paths block the host: not under capture. */
static dcptopk_result refuse_capture(struct dcptopk_group_workspace *gw,
                                     void *stream, const char *what)
{
    const dc_cuda *cu = dc_cuda_get(NULL);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu && cu->cuStreamIsCapturing((CUstream)stream, &cs) ==
                  CUDA_SUCCESS &&
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return dc_fail(gw->ctx, DCPTOPK_UNSUPPORTED,
                       "the %s synchronises the host: it cannot be captured "
                       "in a CUDA graph (use the push or nccl path)",
                       what);
    return DCPTOPK_SUCCESS;
}

static dcptopk_result ex_staged(struct dcptopk_group_workspace *gw,
                                const dc_exchange_call *x)
{
    dcptopk_group *g = gw->g;
    dcptopk_result r = refuse_capture(gw, x->stream, "staged exchange");
    if (r)
        return r;
    const uint64_t bytes =
        (uint64_t)x->rows * (uint64_t)gw->row_words * 4u;
    const uint64_t off = (uint64_t)gw->xrank * (uint64_t)x->stride_rows *
                         (uint64_t)gw->row_words * 4u;
    const uint64_t src = dc_gw_gathered(gw, g->rank, x->parity) + off;
    for (int32_t i = 0; i < gw->xsize; i++) {
        const int32_t p = gw->xfirst + i;
        if (p == g->rank)
            continue;
        const uint64_t dst = dc_gw_gathered(gw, p, x->parity);
        if (!dst)
            return dc_fail(g->ctx, DCPTOPK_INTERNAL,
                           "rank %d's memory is not mapped here", p);
        if (bytes && (r = dc_memcpy_dtod_async(g->ctx, dst + off, src, bytes,
                                               x->stream)))
            return r;
    }
    /* Our rows are in every peer; after the barrier every peer's are here.
     * The parity keeps a fast rank's next copies away from the rows a slow
     * rank still reads: it passed this barrier after finishing its
     * previous step on this stream. */
    if ((r = dc_group_stream_wait(g, x->stream)))
        return r;
    return dc_group_host_barrier(g);
}

/* Through the file store `s` (collective over its ranks): `bytes` at `mine`
 * (device) go out; the blob of s's rank i lands at dst + i * dst_stride,
 * except this rank's own. The host blocks: the stream must finish first. */
static dcptopk_result store_gather(struct dcptopk_group_workspace *gw,
                                   dc_store *s, void *stream, uint64_t mine,
                                   size_t bytes, uint64_t dst,
                                   uint64_t dst_stride)
{
    dcptopk_group *g = gw->g;
    dcptopk_result r = refuse_capture(gw, stream, "store exchange");
    if (r)
        return r;
    if (!g->has_store || !gw->host || bytes > gw->host_blob)
        return dc_fail(g->ctx, DCPTOPK_INTERNAL,
                       "store exchange of %zu bytes without a store or its "
                       "host buffer",
                       bytes);
    char *all = (char *)gw->host + gw->host_blob; /* the members' blobs */
    /* The store itself, even where NCCL exists: its bootstrap buffer is
     * sized for small blobs. */
    if ((r = dc_group_stream_wait(g, stream)) || (r = dc_gw_poll(gw)) ||
        (r = dc_memcpy_dtoh(g->ctx, gw->host, mine, bytes)))
        return r;
    if ((r = dc_store_allgather(g->ctx, s, gw->host, bytes, all)))
        return r == DCPTOPK_PEER_TIMEOUT ? dc_group_break(g, r) : r;
    for (int32_t i = 0; i < s->world_size; i++)
        if (i != s->rank &&
            (r = dc_memcpy_htod(g->ctx, dst + (uint64_t)i * dst_stride,
                                all + (size_t)i * bytes, bytes)))
            return r;
    return DCPTOPK_SUCCESS;
}

/* The flat exchange through the group's store (never a node's: a node
 * exchanges over its peer memory). */
static dcptopk_result ex_store(struct dcptopk_group_workspace *gw,
                               const dc_exchange_call *x)
{
    const uint64_t slot = (uint64_t)x->stride_rows *
                          (uint64_t)gw->row_words * 4u;
    const uint64_t base = dc_gw_gathered(gw, gw->g->rank, x->parity);
    return store_gather(gw, &gw->g->store, x->stream,
                        base + (uint64_t)gw->g->rank * slot,
                        (size_t)x->rows * (size_t)gw->row_words * 4u, base,
                        slot);
}

dcptopk_result dc_rail_run(struct dcptopk_group_workspace *gw, int64_t rows,
                           void *stream)
{
    dcptopk_group *g = gw->g;
    const int32_t l = gw->xsize, me = gw->xrank;
    const size_t count = (size_t)rows * (size_t)gw->c.topk * 2u;
    const uint64_t slot = (uint64_t)gw->max_rows * (uint64_t)gw->c.topk * 8u;
    const uint64_t mine = gw->rail + (uint64_t)gw->node * slot;
    if (gw->rail_path == DCPTOPK_PATH_STORE)
        return store_gather(gw, &gw->rail_store, stream, mine, count * 4u,
                            gw->rail, slot);
    const dc_nccl *nc = dc_nccl_get(NULL);
    if (gw->rail_path != DCPTOPK_PATH_NCCL || !nc || !g->comm)
        return dc_fail(g->ctx, DCPTOPK_INTERNAL, "rail path %d",
                       gw->rail_path);
    /* Point to point on the group's communicator between the ranks of
     * equal node rank: each node's K pairs a row cross the nodes once,
     * instead of the L copies an all-gather of the whole group would send. */
    ncclComm_t comm = (ncclComm_t)g->comm;
    DC_NCCL(g->ctx, comm, nc->ncclGroupStart());
    ncclResult_t nr = ncclSuccess;
    for (int32_t d = 0; d < gw->nodes && nr == ncclSuccess; d++) {
        if (d == gw->node)
            continue;
        const int32_t peer = d * l + me;
        nr = nc->ncclSend((const void *)(uintptr_t)mine, count, ncclInt32,
                          peer, comm, (cudaStream_t)stream);
        if (nr == ncclSuccess)
            nr = nc->ncclRecv((void *)(uintptr_t)(gw->rail +
                                                  (uint64_t)d * slot),
                              count, ncclInt32, peer, comm,
                              (cudaStream_t)stream);
    }
    ncclResult_t er = nc->ncclGroupEnd();
    if (nr != ncclSuccess || er != ncclSuccess)
        return dc_nccl_fail(g->ctx, nr != ncclSuccess ? nr : er, comm,
                            "ncclSend/ncclRecv (rail)");
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_exchange_run(struct dcptopk_group_workspace *gw,
                               const dc_exchange_call *x)
{
    switch (gw->xpath) {
    case DCPTOPK_PATH_NCCL:
        return ex_nccl(gw, x);
    case DCPTOPK_PATH_STORE:
        return ex_store(gw, x);
    case DCPTOPK_PATH_PUSH:
        return dc_exchange_push(gw, x);
    case DCPTOPK_PATH_STAGED:
        return ex_staged(gw, x);
    case DCPTOPK_PATH_LOOPBACK:
        return DCPTOPK_SUCCESS; /* one rank: the rows are already in place */
    default:
        return dc_fail(gw->g->ctx, DCPTOPK_INTERNAL, "path %d",
                       gw->xpath);
    }
}
