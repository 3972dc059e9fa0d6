/* merge.c - the group workspace (peer memory of one merge config) and the
 * one-call merge of a step: pack into this rank's slot of the gathered
 * buffer, exchange, select (+ push + rescue). Only launches on the caller's
 * stream (the staged path adds its host barrier); nothing is allocated per
 * call. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "packed.h"
#include "pair.h"
#include "group_int.h"
#include "runtime.h"
#include "settings.h"
#include "structs.h"

#ifdef DC_HAVE_PUSH_EXCHANGE
#include "exchange_push.h" /* kernels/exchange: the exchange's compile key */
#endif

/* Appends the compile keys of this workspace's exchange (the push kernel on
 * the push path) for dcptopk_group_warmup on src/. */
void dc_gw_exchange_keys(const struct dcptopk_group_workspace *gw,
                         dc_key_list *l)
{
#ifdef DC_HAVE_PUSH_EXCHANGE
    /* The settle kernel too: a capture after warmup compiles nothing. Its
     * module also holds the poison step, which ends every step with device
     * waits. */
    if (gw->g && gw->xpath == DCPTOPK_PATH_PUSH)
        dc_push_exchange_key(gw->xsize, gw->ctx->arch, dc_key_next(l));
    if (gw->g && (gw->xpath == DCPTOPK_PATH_PUSH || gw->poison))
        dc_exchange_settle_key(gw->xsize, gw->ctx->arch, dc_key_next(l));
#else
    (void)gw;
    (void)l;
#endif
}

#define DC_ALIGN(x) (((x) + 255u) & ~(uint64_t)255u)

static int gw_register(dcptopk_group *g, dcptopk_group_workspace *gw)
{
    for (size_t i = 0; i < sizeof g->workspaces / sizeof g->workspaces[0]; i++)
        if (!g->workspaces[i]) {
            g->workspaces[i] = gw;
            return 0;
        }
    return -1;
}

static void gw_unregister(dcptopk_group *g, dcptopk_group_workspace *gw)
{
    for (size_t i = 0; i < sizeof g->workspaces / sizeof g->workspaces[0]; i++)
        if (g->workspaces[i] == gw)
            g->workspaces[i] = NULL;
}

dcptopk_result dcptopk_group_workspace_create(dcptopk_group *g,
                                              const dcptopk_merge_config *config,
                                              int64_t max_rows,
                                              dcptopk_group_workspace **out)
{
    if (!g)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "group is NULL");
    dcptopk_context *ctx = g->ctx;
    if (!out)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!config)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "config is NULL");
    dcptopk_merge_config c;
    dcptopk_result r = dc_group_usable(g);
    if (r || (r = dc_config_read(ctx, config, &c)) ||
        (r = dc_check_config(ctx, &c)))
        return r;
    if (c.world_size != g->world_size)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->world_size = %d: the group has %d ranks",
                       c.world_size, g->world_size);
    if (max_rows < 1 || max_rows > INT32_MAX)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "max_rows = %lld: must be in 1..%d",
                       (long long)max_rows, INT32_MAX);
    if (ctx->device < 0)
        return dc_fail(ctx, DCPTOPK_NO_DEVICE,
                       "a group workspace needs a context with a device "
                       "(ctx device -1)");
    const int exact = c.kind == DCPTOPK_MERGE_PACKED && c.exact;
    /* The rescue round reads peer memory: across P2P domains the exact
     * merge runs as the hierarchy (node merge, node pairs over the rails,
     * pair select), which maps memory only inside a node. */
    const int hier = exact && g->topo.domains != 1;
    if (hier && !g->hier.ok)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "config->exact = 1 across %d P2P domains runs the "
                       "hierarchical merge, which cannot run in this group: "
                       "%s (or use exact = 0 or the pair merge)",
                       g->topo.domains, g->hier.why);

    dcptopk_group_workspace *gw = calloc(1, sizeof *gw);
    if (!gw)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "group workspace struct");
    gw->g = g;
    gw->ctx = ctx;
    gw->c = c;
    gw->max_rows = max_rows;
    gw->xfirst = 0;
    gw->xsize = g->world_size;
    gw->xrank = g->rank;
    gw->xpath = g->path;
    /* The config of the packed merge this rank's exchange serves. */
    const dcptopk_merge_config *mc = &gw->c;
    if (hier) {
        if (dc_hier_configs(&c, g->hier.nodes, &gw->node_c, &gw->pair_c)) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dcptopk_last_error(NULL));
            free(gw);
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "%s", msg);
        }
        gw->hier = 1;
        gw->nodes = g->hier.nodes;
        gw->node = g->rank / g->hier.node_size;
        gw->xfirst = gw->node * g->hier.node_size;
        gw->xsize = g->hier.node_size;
        gw->xrank = g->rank - gw->xfirst;
        gw->xpath = g->hier.node_path;
        gw->rail_path = g->hier.rail_path;
        mc = &gw->node_c;
    }
    gw->row_words = c.kind == DCPTOPK_MERGE_PACKED
                        ? dcptopk_packed_row_words(c.local_topk)
                        : 2 * c.topk;
    /* Not rounded: the push exchange addresses parity p at p times this
     * (kernels/exchange: [2][W][max_rows][row_words] int32, contiguous). */
    gw->gathered_bytes = (uint64_t)gw->xsize * (uint64_t)max_rows *
                         (uint64_t)gw->row_words * 4u;
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    if (exact && dcptopk_workspace_layout_get(mc, max_rows, &lay)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dcptopk_last_error(NULL));
        free(gw);
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "%s", msg);
    }
    /* One allocation: gathered rows (2 parities), exchange flags [2][W]
     * uint64, the push exchange's control block (256 bytes reserved), the
     * rescue's receive slots and flags. */
    uint64_t off = 0;
    gw->off_gathered = off;
    off += 2 * gw->gathered_bytes;
    off = DC_ALIGN(off);
    gw->off_xflags = off;
    off += DC_ALIGN(2u * (uint64_t)gw->xsize * 8u);
    const uint64_t off_status = off;
    off += 256;
    /* Push path: where a captured call's rows settle (only this rank reads
     * it; one allocation keeps creation and teardown as they are). */
    if (gw->xpath == DCPTOPK_PATH_PUSH) {
        gw->off_stable = off;
        off += DC_ALIGN(gw->gathered_bytes);
    }
    gw->off_recv = off;
    off += DC_ALIGN(lay.recv_bytes);
    gw->off_rflags = off;
    off += DC_ALIGN(lay.flags_bytes);

    g->workspaces_made++; /* every rank, in the same order (collective) */
    /* dc_peer_alloc takes part in its exchange even when it fails, and so
     * does the agreement below: a rank that failed never leaves its peers
     * waiting. */
    r = dc_peer_alloc(g, (size_t)off, &gw->mem);
    gw->status = r ? 0 : gw->mem.local + off_status;
#ifdef DC_HAVE_PUSH_EXCHANGE
    /* Steps with device waits (the push exchange's, the rescue's) end with
     * the poison step, which copies a failure into host-mapped words: the
     * next call reads them with no synchronisation. */
    gw->poison = g->world_size > 1 && (gw->xpath == DCPTOPK_PATH_PUSH || exact);
    gw->trap = dc_setting_int(DC_SET_PEER_TIMEOUT_TRAP) != 0;
    if (!r && gw->poison) {
        void *host = NULL;
        r = dc_host_mapped_alloc(ctx, 16, &host, &gw->host_status_d);
        gw->host_status = (volatile uint32_t *)host;
    }
#endif
    if (!r && exact) {
        uint64_t recv[DC_W_MAX], flags[DC_W_MAX];
        for (int32_t i = 0; i < gw->xsize; i++) {
            recv[i] = gw->mem.mapped[gw->xfirst + i] + gw->off_recv;
            flags[i] = gw->mem.mapped[gw->xfirst + i] + gw->off_rflags;
        }
        r = dcptopk_workspace_create(ctx, mc, max_rows, gw->xrank, recv,
                                     flags, &gw->ws);
        if (!r)
            dc_workspace_set_timeout_ns(gw->ws,
                                        (uint64_t)g->timeout_ms * 1000000ull);
#ifdef DC_HAVE_PUSH_EXCHANGE
        /* One sticky word per step: the rescue gives up at once after a
         * failed exchange (a survivor waits one bound, not two), and a
         * rescue that timed out stops this rank's later exchanges. */
        if (!r && gw->poison)
            dc_workspace_set_status(gw->ws,
                                    gw->status +
                                        offsetof(dc_exchange_ctl, status));
#endif
    }
    const size_t pair_rows = (size_t)max_rows * (size_t)c.topk;
    if (!r && hier &&
        !(r = dc_mem_alloc(ctx, pair_rows * 4u, &gw->node_ids)))
        r = dc_mem_alloc(ctx, (size_t)gw->nodes * pair_rows * 8u, &gw->rail);
    /* The store path's host blobs: this rank's, then its gather's. A rail
     * through the store gathers the D nodes' pairs over a store of its own
     * (rank = node), named by this workspace's creation count, so that
     * each rank reads only its rail's blobs. */
    size_t members = 0;
    if (gw->xpath == DCPTOPK_PATH_STORE) {
        gw->host_blob = (size_t)max_rows * (size_t)gw->row_words * 4u;
        members = (size_t)g->world_size;
    }
    if (!r && hier && gw->rail_path == DCPTOPK_PATH_STORE) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%.96s.w%u.rail%d", g->store.prefix,
                 g->workspaces_made, gw->xrank);
        r = dc_store_open(ctx, &gw->rail_store, g->store.dir, prefix,
                          gw->node, gw->nodes, g->timeout_ms);
        gw->rail_store.attempt = g->store.attempt; /* the group's attempt */
        gw->host_blob = pair_rows * 8u;
        members = (size_t)gw->nodes;
    }
    if (!r && gw->host_blob &&
        !(gw->host = malloc(gw->host_blob * (members + 1))))
        r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY,
                    "the store exchange's host buffer (%zu bytes)",
                    gw->host_blob * (members + 1));
    if (!r && gw_register(g, gw))
        r = dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                    "the group already has %zu workspaces",
                    sizeof g->workspaces / sizeof g->workspaces[0]);
    /* Every rank's memory must be initialised before any peer writes into
     * it: the ranks agree that all succeeded (a failed rank still takes
     * part, so nobody waits for it). */
    int32_t ok = r == DCPTOPK_SUCCESS, all[DC_W_MAX];
    const dcptopk_result local = r;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", r ? dcptopk_last_error(ctx) : "");
    dcptopk_result ar = dc_group_allgather(g, &ok, sizeof ok, all);
    if (!r && !ar)
        for (int32_t p = 0; p < c.world_size && !r; p++)
            if (!all[p])
                r = dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                            "rank %d: rank %d failed to create its group "
                            "workspace (see its error)",
                            g->rank, p);
    if (r || ar) {
        const dcptopk_result code = r ? r : ar;
        if (!local)
            snprintf(msg, sizeof msg, "%s", dcptopk_last_error(ctx));
        dcptopk_group_workspace_destroy(gw);
        return dc_fail(ctx, code, "%s", msg);
    }
    *out = gw;
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
}

void dcptopk_group_workspace_destroy(dcptopk_group_workspace *gw)
{
    if (!gw)
        return;
    dcptopk_workspace_destroy(gw->ws);
    if (gw->node_ids)
        dc_mem_free(gw->ctx, gw->node_ids);
    if (gw->rail)
        dc_mem_free(gw->ctx, gw->rail);
    free(gw->host);
    /* CUDA leaves freeing an exported allocation that a peer still has open
     * undefined (cuIpcOpenMemHandle): close ours, wait until every peer
     * closed its, then free. A broken or destroyed group skips the wait:
     * its peers are gone or will fail anyway. */
    dc_peer_close(gw->ctx, &gw->mem);
    if (gw->g) {
        if (!gw->g->broken && gw->g->world_size > 1 && gw->mem.local)
            dc_group_host_barrier(gw->g);
        gw_unregister(gw->g, gw);
    }
    dc_peer_free(gw->ctx, &gw->mem);
    dc_host_mapped_free(gw->ctx, (void *)(uintptr_t)gw->host_status);
    free(gw);
}

uint64_t dcptopk_group_workspace_saturation(const dcptopk_group_workspace *gw)
{
    return gw && gw->ws ? dcptopk_workspace_saturation(gw->ws) : 0;
}

/* ------------------------------------------------------------ the step */

/* The step's pair select: rank-major candidates in place, the caller's
 * outputs. */
static dcptopk_pair_select_args step_pair_select(
    const dcptopk_group_workspace *gw, const dcptopk_group_merge_args *a,
    uint64_t candidates, int64_t stride_rows)
{
    dcptopk_pair_select_args s = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    s.candidates = (const int32_t *)(uintptr_t)candidates;
    s.layout = DCPTOPK_LAYOUT_RANK_MAJOR;
    s.rows = a->rows;
    s.rank_stride_rows = stride_rows;
    s.rank = gw->g->rank;
    s.ids_out = a->ids_out;
    s.ids_out_stride = a->ids_out_stride;
    s.rows_map = a->rows_map;
    s.stream = a->stream;
    s.indptr_out = a->indptr_out;
    return s;
}

/* The packed merge of a step; in a hierarchical workspace the node merge,
 * then the node pairs, the rail exchange and the pair select over nodes. */
static dcptopk_result merge_packed(dcptopk_group_workspace *gw,
                                   const dcptopk_group_merge_args *a,
                                   const dc_exchange_call *x, uint64_t base)
{
    dcptopk_group *g = gw->g;
    dcptopk_context *ctx = g->ctx;
    const int hier = gw->hier;
    const dcptopk_merge_config *c = hier ? &gw->node_c : &gw->c;
    dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
    s.gathered = (const int32_t *)(uintptr_t)base;
    s.rank_stride_rows = x->stride_rows;
    s.rows = a->rows;
    s.rank = gw->xrank;
    s.ids_out = hier ? (int32_t *)(uintptr_t)gw->node_ids : a->ids_out;
    s.ids_out_stride = hier ? 0 : a->ids_out_stride;
    if (!hier) {
        s.rows_map = a->rows_map;
        s.indptr_out = a->indptr_out;
    }
    s.logits = a->logits;
    s.logits_stride = a->logits_stride;
    s.max_local_len = a->max_local_len;
    s.row_ends = a->row_ends;
    s.stream = a->stream;
    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.logits = a->logits;
    p.logits_stride = a->logits_stride;
    p.max_local_len = a->max_local_len;
    p.row_ends = a->row_ends;
    p.local_ids = a->local_ids;
    p.local_ids_stride = a->local_ids_stride;
    p.rows = a->rows;
    p.out = (int32_t *)(uintptr_t)(base + (uint64_t)gw->xrank *
                                              (uint64_t)x->stride_rows *
                                              (uint64_t)gw->row_words * 4u);
    p.stream = a->stream;
    /* The second stage reads the nodes' pairs in place and writes the
     * caller's outputs. */
    const dcptopk_pair_select_args ps =
        step_pair_select(gw, a, gw->rail, gw->max_rows);
    /* Every call's arguments are checked before anything launches: a rank
     * that failed after its exchange would leave its peers' rescues
     * waiting. */
    dcptopk_result r =
        a->packed ? DCPTOPK_SUCCESS
                  : dc_check_pack_args(ctx, c, &p, a->local_ids != NULL);
    if (r || (r = dc_check_select_args(ctx, c, &s)) ||
        (hier && (r = dc_check_pair_select_args(ctx, &gw->pair_c, &ps))))
        return r;
    if (a->packed) {
        /* The producer's rows are sent as they are (no pack). */
        const size_t width = (size_t)gw->row_words * 4u;
        const size_t pitch = a->packed_stride ? (size_t)a->packed_stride * 4u
                                              : width;
        r = pitch == width
                ? dc_memcpy_dtod_async(ctx, (uint64_t)(uintptr_t)p.out,
                                       (uint64_t)(uintptr_t)a->packed,
                                       width * (size_t)a->rows, a->stream)
                : dc_memcpy_2d_dtod_async(ctx, (uint64_t)(uintptr_t)p.out,
                                          width,
                                          (uint64_t)(uintptr_t)a->packed,
                                          pitch, width, (size_t)a->rows,
                                          a->stream);
    } else {
        r = a->local_ids ? dcptopk_pack_indices(ctx, c, &p)
                         : dcptopk_pack(ctx, c, &p);
    }
    if (r || (r = dc_exchange_run(gw, x)))
        return r;
    gw->seq = x->seq; /* the exchange counted this call (device side too) */
    if (gw->device_counted)
        s.gathered = (const int32_t *)(uintptr_t)(gw->mem.local + gw->off_stable);
    if ((r = dcptopk_select(ctx, c, gw->ws, &s)) || !hier)
        return r;
    const uint64_t slot = (uint64_t)gw->max_rows * (uint64_t)gw->c.topk * 8u;
    dcptopk_node_pairs_args np = DCPTOPK_NODE_PAIRS_ARGS_INIT;
    np.gathered = s.gathered;
    np.rank_stride_rows = x->stride_rows;
    np.rows = a->rows;
    np.ids = (const int32_t *)(uintptr_t)gw->node_ids;
    /* Every rank of a node packs alike (local_ids or not): the lookup of a
     * score in its segment depends on it. */
    np.sorted = a->local_ids == NULL && a->packed == NULL;
    np.first_rank = gw->xfirst;
    np.world_size = gw->c.world_size;
    np.pairs_out = (int32_t *)(uintptr_t)(gw->rail + (uint64_t)gw->node * slot);
    np.stream = a->stream;
    if ((r = dcptopk_node_pairs(ctx, c, gw->ws, &np)) ||
        (r = dc_rail_run(gw, a->rows, a->stream)))
        return r;
    return dcptopk_pair_select_nodes(ctx, &gw->pair_c, gw->nodes, &ps);
}

static dcptopk_result merge_pair(dcptopk_group_workspace *gw,
                                 const dcptopk_group_merge_args *a,
                                 const dc_exchange_call *x, uint64_t base)
{
    dcptopk_group *g = gw->g;
    dcptopk_context *ctx = g->ctx;
    const dcptopk_merge_config *c = &gw->c;
    const uint64_t own = base + (uint64_t)gw->xrank *
                                    (uint64_t)x->stride_rows *
                                    (uint64_t)gw->row_words * 4u;
    dcptopk_pair_select_args s = step_pair_select(gw, a, base, x->stride_rows);
    dcptopk_pair_pack_args p = DCPTOPK_PAIR_PACK_ARGS_INIT;
    p.logits = a->pair_logits;
    p.logits_stride = a->pair_logits_stride;
    p.local_ids = a->local_ids;
    p.local_ids_stride = a->local_ids_stride;
    p.row_starts = a->row_starts;
    p.row_ends = a->row_ends;
    p.rows = a->rows;
    p.rank = g->rank;
    p.out = (int32_t *)(uintptr_t)own;
    p.stream = a->stream;
    dcptopk_result r = dc_check_pair_select_args(ctx, c, &s);
    if (r)
        return r;
    if (a->candidates) {
        if ((uintptr_t)a->candidates % 8)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "args->candidates = %p: must be 8-byte aligned",
                           (const void *)a->candidates);
        r = dc_memcpy_dtod_async(ctx, own, (uint64_t)(uintptr_t)a->candidates,
                                 (size_t)a->rows * (size_t)gw->row_words * 4u,
                                 a->stream);
    } else {
        if ((r = dc_check_pair_pack_args(ctx, c, &p)))
            return r;
        r = dcptopk_pair_pack(ctx, c, &p);
    }
    if (r || (r = dc_exchange_run(gw, x)))
        return r;
    gw->seq = x->seq; /* the exchange counted this call (device side too) */
    if (gw->device_counted)
        s.candidates = (const int32_t *)(uintptr_t)(gw->mem.local + gw->off_stable);
    return dcptopk_pair_select(ctx, c, &s);
}

/* Every pointer argument must be memory of this context's device: a CPU
 * tensor would fault inside a kernel and take the CUDA context (and the
 * peers' steps) with it. One driver query per pointer, before anything is
 * launched. */
static dcptopk_result check_pointers(dcptopk_group_workspace *gw,
                                     const dcptopk_group_merge_args *a)
{
    const dc_named_ptr ptrs[] = {
        {"args->logits", a->logits},
        {"args->row_ends", a->row_ends},
        {"args->local_ids", a->local_ids},
        {"args->candidates", a->candidates},
        {"args->pair_logits", a->pair_logits},
        {"args->row_starts", a->row_starts},
        {"args->packed", a->packed},
        {"args->ids_out", a->ids_out},
        {"args->rows_map.req_id", a->rows_map.req_id},
        {"args->rows_map.block_table", a->rows_map.block_table},
        {"args->rows_map.rows_out", a->rows_map.rows_out},
        {"args->rows_map.counts_out", a->rows_map.counts_out},
        {"args->indptr_out", a->indptr_out},
    };
    return dc_check_device_ptrs(gw->ctx, ptrs, sizeof ptrs / sizeof ptrs[0]);
}

/* args->packed (the producer's rows): only for the packed merge, instead of
 * local_ids, rows at least N + N/32 words apart, 4-byte aligned. logits and
 * row_ends are checked with the select's arguments (the rescue reads them);
 * the producer's contract itself is the caller's (checking it would read
 * every row back). */
static dcptopk_result check_packed(const dcptopk_group_workspace *gw,
                                   const dcptopk_group_merge_args *a)
{
    dcptopk_context *ctx = gw->ctx;
    if (!a->packed) {
        if (a->packed_stride)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "args->packed_stride = %lld: set without "
                           "args->packed (leave it 0)",
                           (long long)a->packed_stride);
        return DCPTOPK_SUCCESS;
    }
    if (gw->c.kind != DCPTOPK_MERGE_PACKED)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->packed = %p: the workspace runs the pair merge "
                       "(pass its rows as args->candidates)",
                       (const void *)a->packed);
    if (a->local_ids)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->packed = %p and args->local_ids = %p: pass one "
                       "(packed rows, or the local ids to pack)",
                       (const void *)a->packed, (const void *)a->local_ids);
    /* Pitches of the 2D copy stay below 2^31 bytes. */
    const int64_t words = gw->row_words, most = INT32_MAX / 4;
    if (a->packed_stride &&
        (a->packed_stride < words || a->packed_stride > most))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->packed_stride = %lld: must be 0 (N + N/32 = "
                       "%lld words) or in %lld..%lld",
                       (long long)a->packed_stride, (long long)words,
                       (long long)words, (long long)most);
    if ((uintptr_t)a->packed % 4)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->packed = %p: must be 4-byte aligned",
                       (const void *)a->packed);
    return DCPTOPK_SUCCESS;
}

/* The step's last kernel on the paths with device waits: a step whose
 * sticky status is set gets every id and row -1 and every count 0
 * (docs/DISTRIBUTED.md, "Failure semantics"). */
static dcptopk_result launch_poison(dcptopk_group_workspace *gw,
                                    const dcptopk_group_merge_args *a)
{
#ifdef DC_HAVE_PUSH_EXCHANGE
    dc_poison_param p;
    memset(&p, 0, sizeof p);
    p.status = gw->status + offsetof(dc_exchange_ctl, status);
    p.host = gw->host_status_d;
    p.ids = (uint64_t)(uintptr_t)a->ids_out;
    p.ids_stride = a->ids_out_stride ? a->ids_out_stride : gw->c.topk;
    if (a->rows_map.rows_out) {
        p.rows_out = (uint64_t)(uintptr_t)a->rows_map.rows_out;
        p.rows_stride = a->rows_map.rows_out_stride
                            ? a->rows_map.rows_out_stride
                            : gw->c.topk;
        p.counts = (uint64_t)(uintptr_t)a->rows_map.counts_out;
        p.indptr = (uint64_t)(uintptr_t)a->indptr_out;
    }
    p.rows = a->rows;
    p.topk = gw->c.topk;
    p.trap = gw->trap;
    return dc_exchange_poison_launch(gw->ctx, gw->xsize, &p, a->stream);
#else
    (void)gw;
    (void)a;
    return DCPTOPK_SUCCESS;
#endif
}

dcptopk_result dcptopk_group_merge(dcptopk_group_workspace *gw,
                                   const dcptopk_group_merge_args *args)
{
    if (!gw)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "gw is NULL");
    if (!gw->g)
        return dc_fail(gw->ctx, DCPTOPK_INVALID_ARGUMENT,
                       "gw: its group was destroyed; destroy the workspace "
                       "and create a new one with the new group");
    dcptopk_group *g = gw->g;
    dcptopk_context *ctx = g->ctx;
    dcptopk_group_merge_args in = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    dcptopk_result r = DC_STRUCT_IN(ctx, "args", args, &in, GROUP_MERGE_ARGS);
    if (r)
        return r;
    args = &in;
    /* A failure of an earlier step that reached the host ends this call
     * before it launches anything (no synchronisation: host-mapped). */
    if ((r = dc_group_usable(g)) || (r = dc_group_poll(g)))
        return r;
    if (args->rows < 0 || args->rows > gw->max_rows)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->rows = %lld: must be in 0..max_rows = %lld "
                       "(and the same on every rank)",
                       (long long)args->rows, (long long)gw->max_rows);
    if ((r = check_packed(gw, args)))
        return r;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    if ((r = check_pointers(gw, args)))
        return r;
    dc_exchange_call x;
    x.rows = args->rows;
    x.seq = gw->seq + 1;
    /* NCCL orders its collectives itself: one buffer (and a parity that does
     * not change under graph replay). The other paths alternate halves. */
    x.parity = gw->xpath == DCPTOPK_PATH_NCCL ? 0 : (int32_t)(x.seq & 1u);
    x.stride_rows = gw->xpath == DCPTOPK_PATH_NCCL ? args->rows : gw->max_rows;
    x.stream = args->stream;
    const uint64_t base = dc_gw_gathered(gw, g->rank, x.parity);
    /* Every caller pointer was checked above; the steps' buffers are the
     * workspace's own. */
    const int checks = dc_ptr_checks_suspend();
    r = gw->c.kind == DCPTOPK_MERGE_PACKED ? merge_packed(gw, args, &x, base)
                                           : merge_pair(gw, args, &x, base);
    dc_ptr_checks_restore(checks);
    if (r || !gw->poison)
        return r;
    return launch_poison(gw, args);
}
