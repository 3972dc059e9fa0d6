/* status.c - the outcome of a group's steps: the poison step's record a
 * failed device wait left in host memory (dc_gw_poll), the push exchange's
 * status words, and dcptopk_group_status / dcptopk_group_check, which turn
 * them into the first failure of the group (a broken group from then on).
 * Docs: docs/DISTRIBUTED.md. */
#include <stdio.h>

#include "group_int.h"
#include "runtime.h"

#ifdef DC_HAVE_PUSH_EXCHANGE
#include "exchange_push.h" /* kernels/exchange: dc_push_exchange_status */
#endif

dcptopk_result dc_gw_poll(struct dcptopk_group_workspace *gw)
{
    dcptopk_group *g = gw->g;
    if (!gw->host_status || !g)
        return DCPTOPK_SUCCESS;
    /* The poison step stores the details, fences, then the code: an
     * acquire load of the code orders the detail reads after it. */
    const uint32_t code = __atomic_load_n(&gw->host_status[0], __ATOMIC_ACQUIRE);
    if (code == 0)
        return DCPTOPK_SUCCESS;
    const uint32_t a = gw->host_status[1], b = gw->host_status[2],
                   c = gw->host_status[3];
    const long long ms = (long long)g->timeout_ms;
    /* The kernels number the exchange's members: in a node of a
     * hierarchical workspace, from the node's first rank. */
    const int32_t first = gw->xfirst;
    dcptopk_result r;
    if (code == 15u)
        r = dc_fail(g->ctx, DCPTOPK_PEER_TIMEOUT,
                    "rank %d: the push exchange of call %u waited more than "
                    "%lld ms for rank %d's rows (its flag read %u): that "
                    "rank stopped calling, died, or is slower than the "
                    "bound; the outputs of that step and of every later one "
                    "are poisoned (ids -1, counts 0)",
                    g->rank, b, ms, first + (int32_t)a, c);
    else if (code == 10u)
        r = dc_fail(g->ctx, DCPTOPK_PEER_TIMEOUT,
                    "rank %d: the rescue of row %u waited more than %lld ms "
                    "for rank %d's push (flag value %u expected): that rank "
                    "stopped calling or died; the outputs of that step and "
                    "of every later one are poisoned (ids -1, counts 0)",
                    g->rank, a, ms, first + (int32_t)b, c);
    else
        r = dc_fail(g->ctx, DCPTOPK_GROUP_BROKEN,
                    "rank %d: the push exchange found rank %d out of step "
                    "(status %u, expected %u, found %u): a rank skipped or "
                    "repeated a call; the outputs of that step and of every "
                    "later one are poisoned (ids -1, counts 0)",
                    g->rank, first + (int32_t)a, code, b, c);
    return dc_group_break(g, r);
}

dcptopk_result dc_group_poll(dcptopk_group *g)
{
    for (size_t i = 0; i < sizeof g->workspaces / sizeof g->workspaces[0];
         i++) {
        dcptopk_result r;
        if (g->workspaces[i] && (r = dc_gw_poll(g->workspaces[i])))
            return r;
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_group_status(dcptopk_group *g)
{
    if (!g)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "group is NULL");
    dcptopk_result r = dc_group_usable(g);
    if (r || (r = dc_group_poll(g)))
        return r;
    return DCPTOPK_SUCCESS;
}

/* The push exchange's status for dcptopk_group_check: 0, or a
 * dcptopk_result with the message in the group's context. */
dcptopk_result dc_exchange_status(struct dcptopk_group_workspace *gw,
                                  void *stream)
{
#ifdef DC_HAVE_PUSH_EXCHANGE
    dcptopk_group *g = gw->g;
    if (gw->xpath != DCPTOPK_PATH_PUSH)
        return DCPTOPK_SUCCESS;
    uint32_t code = 0;
    char msg[512] = "";
    dcptopk_result r = dc_push_exchange_status(
        g->ctx, gw->status, g->rank, (uint64_t)g->timeout_ms * 1000000ull,
        stream, &code, msg, sizeof msg);
    if (r || code == DC_EXCHANGE_STATUS_OK)
        return r;
    /* The kernel numbers the exchange's members: in a node, from the
     * node's first rank. */
    char where[96] = "";
    if (gw->xfirst != 0 || gw->xsize != g->world_size)
        snprintf(where, sizeof where,
                 " (the exchange of node %d: its rank i is global rank "
                 "%d + i)",
                 gw->node, gw->xfirst);
    return dc_fail(g->ctx,
                   code == DC_EXCHANGE_STATUS_TIMEOUT ||
                           code == (uint32_t)DCPTOPK_RESCUE_TIMEOUT
                       ? DCPTOPK_PEER_TIMEOUT
                       : DCPTOPK_GROUP_BROKEN,
                   "rank %d: push exchange%s: %s", g->rank, where, msg);
#else
    (void)gw;
    (void)stream;
    return DCPTOPK_SUCCESS;
#endif
}

dcptopk_result dcptopk_group_check(dcptopk_group *g, void *stream)
{
    if (!g)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "group is NULL");
    dcptopk_result r = dc_group_usable(g);
    if (r)
        return r;
    if (g->ctx->device < 0) {
        dc_clear(g->ctx);
        return DCPTOPK_SUCCESS;
    }
    if ((r = dc_group_stream_wait(g, stream)))
        return r;
    for (size_t i = 0; i < sizeof g->workspaces / sizeof g->workspaces[0];
         i++) {
        struct dcptopk_group_workspace *gw = g->workspaces[i];
        if (!gw)
            continue;
        /* The stream finished: the poison step has copied any failure. */
        if ((r = dc_gw_poll(gw)))
            return r;
        if ((r = dc_exchange_status(gw, stream)))
            return r == DCPTOPK_PEER_TIMEOUT || r == DCPTOPK_GROUP_BROKEN
                       ? dc_group_break(g, r)
                       : r;
        /* With the poison step the rescue shares the exchange's words,
         * read above (dcptopk_workspace_check would clear them). */
        if (gw->ws && !gw->poison) {
            r = dcptopk_workspace_check(gw->ws, stream);
            if (r == DCPTOPK_RESCUE_TIMEOUT) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", dcptopk_last_error(g->ctx));
                return dc_group_break(
                    g, dc_fail(g->ctx, DCPTOPK_PEER_TIMEOUT, "%s", msg));
            }
            if (r)
                return r;
        }
    }
    dc_clear(g->ctx);
    return DCPTOPK_SUCCESS;
}
