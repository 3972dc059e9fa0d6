/* packed.c - launchers of the packed exact merge (pack, pack of given ids,
 * select, rescue), its rescue workspace, the one-GPU loopback world, and its
 * config -> keys expansion. Kernels: kernels/topn/topn_pack.cu and push.cu
 * (kernels/topn/topn.c), pack_indices.cu, select.cu, rescue.cu.
 *
 * Every merge entry point is CUDA-graph capturable: it only launches on the
 * caller's stream (no host sync, no allocation); workspaces and loopback
 * worlds allocate at creation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "packed.h"
#include "packed_abi.h"
#include "runtime.h"
#include "settings.h"
#include "structs.h"
#include "topn.h"

_Static_assert(DC_RESCUE_STATUS_TIMEOUT == (unsigned)DCPTOPK_RESCUE_TIMEOUT,
               "the rescue's status word carries the public result code");

struct dcptopk_workspace {
    dcptopk_context *ctx;
    dcptopk_merge_config c;
    int64_t max_rows;
    int32_t rank;
    int32_t slots;           /* receive slots per row, >= 1              */
    uint64_t recv, flags;    /* this rank's (peer_recv[rank], ...)        */
    uint64_t dev;            /* one allocation holding the words below    */
    uint64_t peer_recv_d;    /* [W] uint64                                */
    uint64_t peer_flags_d;   /* [W] uint64                                */
    uint64_t status;         /* [4] uint32: code, row, rank, expected     */
    uint64_t seq;            /* [max_rows] uint32                         */
    uint64_t sat;            /* [max_rows] uint32                         */
    uint64_t timeout_ns;
};

struct dcptopk_loopback {
    dcptopk_context *ctx;
    dcptopk_merge_config c;
    int64_t max_rows;
    int64_t max_local_len;
    uint64_t gathered;       /* [W, max_rows, N + N/32] int32             */
    uint64_t recv[DCPTOPK_MAX_WORLD_SIZE];
    uint64_t flags[DCPTOPK_MAX_WORLD_SIZE];
    dcptopk_workspace *ws[DCPTOPK_MAX_WORLD_SIZE];
};

/* ------------------------------------------------------------ keys */

static void select_key(dcptopk_key *k, const dcptopk_merge_config *c,
                       const char *arch)
{
    dc_key_init(k, DCPTOPK_KERNEL_SELECT, arch);
    k->topk = c->topk;
    k->local_topk = c->local_topk;
    k->world_size = c->world_size;
    k->block_size = c->block_size;
    k->interleave = c->interleave;
    k->emit_ids = c->emit_ids ? 1 : 0;
    k->exact = c->exact ? 1 : 0;
}

static void rescue_key(dcptopk_key *k, const dcptopk_merge_config *c,
                       const char *arch)
{
    dc_key_init(k, DCPTOPK_KERNEL_RESCUE, arch);
    k->topk = c->topk;
    k->local_topk = c->local_topk;
    k->world_size = c->world_size;
    k->block_size = c->block_size;
    k->interleave = c->interleave;
    k->emit_ids = c->emit_ids ? 1 : 0;
}

static void pack_indices_key(dcptopk_key *k, const dcptopk_merge_config *c,
                             const char *arch)
{
    dc_key_init(k, DCPTOPK_KERNEL_PACK_INDICES, arch);
    k->local_topk = c->local_topk;
}

void dc_packed_keys(const dcptopk_merge_config *c, const char *arch,
                    dc_key_list *l)
{
    dc_topn_keys(c, arch, l); /* top-N pack (+ push) */
    pack_indices_key(dc_key_next(l), c, arch);
    select_key(dc_key_next(l), c, arch);
    if (c->exact)
        rescue_key(dc_key_next(l), c, arch);
}

/* ------------------------------------------------------------ pack */

static dcptopk_result read_config(dcptopk_context *ctx,
                                  const dcptopk_merge_config *config,
                                  dcptopk_merge_config *c)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!config)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "config is NULL");
    dcptopk_result r = dc_config_read(ctx, config, c);
    if (r)
        return r;
    return dc_check_packed_config(ctx, c);
}

/* Host memory or another device's is an error here, not a fault in the
 * kernel (runtime.h, dc_check_device_ptr). */
static dcptopk_result check_pack_ptrs(dcptopk_context *ctx,
                                      const dcptopk_pack_args *a)
{
    /* local_ids is NULL for dcptopk_pack (its argument check refuses one),
     * and a NULL pointer passes. */
    const dc_named_ptr ptrs[] = {{"args->logits", a->logits},
                                 {"args->row_ends", a->row_ends},
                                 {"args->local_ids", a->local_ids},
                                 {"args->out", a->out}};
    return dc_check_device_ptrs(ctx, ptrs, sizeof ptrs / sizeof ptrs[0]);
}

dcptopk_result dcptopk_pack(dcptopk_context *ctx,
                            const dcptopk_merge_config *config,
                            const dcptopk_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    dcptopk_result r = read_config(ctx, config, &c);
    if (r || (r = DC_STRUCT_IN(ctx, "args", args, &a, PACK_ARGS)) ||
        (r = dc_check_pack_args(ctx, &c, &a, 0)))
        return r;
    args = &a;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    if ((r = check_pack_ptrs(ctx, args)))
        return r;
    return dc_topn_pack_launch(ctx, &c, args);
}

dcptopk_result dcptopk_pack_indices(dcptopk_context *ctx,
                                    const dcptopk_merge_config *config,
                                    const dcptopk_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    dcptopk_result r = read_config(ctx, config, &c);
    if (r || (r = DC_STRUCT_IN(ctx, "args", args, &a, PACK_ARGS)) ||
        (r = dc_check_pack_args(ctx, &c, &a, 1)))
        return r;
    args = &a;
    if (args->rows > 0 && (r = check_pack_ptrs(ctx, args)))
        return r;
    dcptopk_key key;
    pack_indices_key(&key, &c, ctx->arch);
    const uint32_t threads = DC_PACK_INDICES_THREADS;
    const int64_t words = DC_PACKED_ROW_WORDS(c.local_topk);
    const long long ids_stride =
        args->local_ids_stride ? args->local_ids_stride : c.local_topk;
    /* Rows are grid.y (at most 65535 per launch). */
    for (int64_t t0 = 0; t0 < args->rows; t0 += 65535) {
        dc_pack_indices_args k = {
            .logits = args->logits + t0 * args->logits_stride,
            .logits_stride = args->logits_stride,
            .max_local_len = args->max_local_len,
            .row_ends = args->row_ends + t0,
            .local_ids = args->local_ids + t0 * ids_stride,
            .ids_stride = ids_stride,
            .rows = args->rows - t0 < 65535 ? args->rows - t0 : 65535,
            .out = args->out + t0 * words,
        };
        dc_launch_cfg cfg = {
            .grid = {(uint32_t)((c.local_topk + threads - 1) / threads),
                     (uint32_t)k.rows, 1},
            .block = {threads, 1, 1},
            .stream = args->stream,
            .pdl = 1};
        dc_abi_argv argv = dc_pack_indices_args_argv(&k);
        if ((r = dc_launch(ctx, &key, "dcptopk_pack_indices", &cfg, argv.p)))
            return r;
    }
    return DCPTOPK_SUCCESS;
}

/* ------------------------------------------------------------ workspace */

static int32_t ws_slots(const dcptopk_merge_config *c)
{
    return DC_RESCUE_SLOTS(c->topk, c->local_topk);
}

/* Rows are 32-bit grid indices in every kernel of the merge. */
static dcptopk_result check_max_rows(dcptopk_context *ctx, int64_t max_rows)
{
    if (max_rows < 1 || max_rows > INT32_MAX)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "max_rows = %lld: must be in 1..%d",
                       (long long)max_rows, INT32_MAX);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_workspace_layout_get(const dcptopk_merge_config *config,
                                            int64_t max_rows,
                                            dcptopk_workspace_layout *out)
{
    if (!config)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "config is NULL");
    dcptopk_merge_config c;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = dc_check_packed_config(NULL, &c)) ||
        (r = check_max_rows(NULL, max_rows)))
        return r;
    if ((r = DC_STRUCT_OUT(NULL, "out", out, WORKSPACE_LAYOUT)))
        return r;
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    lay.recv_bytes = (uint64_t)max_rows * (uint64_t)ws_slots(&c) *
                     (uint64_t)DC_PACKED_ROW_WORDS(c.topk) * 4u;
    lay.flags_bytes = (uint64_t)c.world_size * (uint64_t)max_rows * 4u;
    dc_struct_write(out, out->struct_size, &lay, sizeof lay);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

/* dcptopk_workspace_layout_get for a call that has a context: its message
 * (in the thread's slot) moves to the context's. */
static dcptopk_result ctx_layout(dcptopk_context *ctx,
                                 const dcptopk_merge_config *c,
                                 int64_t max_rows,
                                 dcptopk_workspace_layout *lay)
{
    dcptopk_result r = dcptopk_workspace_layout_get(c, max_rows, lay);
    if (r) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dcptopk_last_error(NULL));
        return dc_fail(ctx, r, "%s", msg);
    }
    return DCPTOPK_SUCCESS;
}

static uint64_t timeout_ns_from_env(void)
{
    return (uint64_t)dc_setting_int(DC_SET_RESCUE_TIMEOUT_MS) * 1000000ull;
}

dcptopk_result dcptopk_workspace_create(dcptopk_context *ctx,
                                        const dcptopk_merge_config *config,
                                        int64_t max_rows, int32_t rank,
                                        const uint64_t *peer_recv,
                                        const uint64_t *peer_flags,
                                        dcptopk_workspace **out)
{
    dcptopk_merge_config c;
    dcptopk_result r = read_config(ctx, config, &c);
    if (r)
        return r;
    if (!out)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if ((r = check_max_rows(ctx, max_rows)))
        return r;
    if (rank < 0 || rank >= c.world_size)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rank = %d: must be in [0, config->world_size = %d)",
                       rank, c.world_size);
    if (!peer_recv)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "peer_recv is NULL");
    if (!peer_flags)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "peer_flags is NULL");
    for (int32_t p = 0; p < c.world_size; p++) {
        if (peer_recv[p] == 0 || peer_recv[p] % 16)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "peer_recv[%d] = 0x%llx: must be a non-NULL, "
                           "16-byte aligned device address",
                           p, (unsigned long long)peer_recv[p]);
        if (peer_flags[p] == 0 || peer_flags[p] % 4)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "peer_flags[%d] = 0x%llx: must be a non-NULL, "
                           "4-byte aligned device address",
                           p, (unsigned long long)peer_flags[p]);
    }
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    if ((r = ctx_layout(ctx, &c, max_rows, &lay)))
        return r;

    dcptopk_workspace *ws = calloc(1, sizeof *ws);
    if (!ws)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "workspace struct");
    ws->ctx = ctx;
    ws->c = c;
    ws->max_rows = max_rows;
    ws->rank = rank;
    ws->slots = ws_slots(&c);
    ws->recv = peer_recv[rank];
    ws->flags = peer_flags[rank];
    ws->timeout_ns = timeout_ns_from_env();
    const size_t w = (size_t)c.world_size;
    const size_t bytes = 16 * w + 16 + 8 * (size_t)max_rows;
    if ((r = dc_mem_alloc(ctx, bytes, &ws->dev)))
        goto fail;
    ws->peer_recv_d = ws->dev;
    ws->peer_flags_d = ws->dev + 8 * w;
    ws->status = ws->dev + 16 * w;
    ws->seq = ws->status + 16;
    ws->sat = ws->seq + 4 * (uint64_t)max_rows;
    if ((r = dc_memset_async(ctx, ws->dev, 0, bytes, NULL)) ||
        (r = dc_memset_async(ctx, ws->recv, 0, lay.recv_bytes, NULL)) ||
        (r = dc_memset_async(ctx, ws->flags, 0, lay.flags_bytes, NULL)) ||
        (r = dc_stream_sync(ctx, NULL)) ||
        (r = dc_memcpy_htod(ctx, ws->peer_recv_d, peer_recv, 8 * w)) ||
        (r = dc_memcpy_htod(ctx, ws->peer_flags_d, peer_flags, 8 * w)))
        goto fail;
    *out = ws;
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
fail:
    dcptopk_workspace_destroy(ws);
    return r;
}

void dcptopk_workspace_destroy(dcptopk_workspace *ws)
{
    if (!ws)
        return;
    if (ws->dev)
        dc_mem_free(ws->ctx, ws->dev);
    free(ws);
}

/* group/: a group bounds the rescue waits of its workspaces by its own
 * timeout (DCPTOPK_PEER_TIMEOUT_MS) instead of DCPTOPK_RESCUE_TIMEOUT_MS. */
void dc_workspace_set_timeout_ns(dcptopk_workspace *ws, uint64_t ns);
void dc_workspace_set_timeout_ns(dcptopk_workspace *ws, uint64_t ns)
{
    if (ws && ns)
        ws->timeout_ns = ns;
}

/* group/: the rescue records its timeout in, and gives up its waits on, the
 * group workspace's sticky status word (the exchange's), so that a step
 * whose exchange failed never waits a second bound in the rescue, and a
 * rescue that timed out stops this rank's later exchanges. `words`: 16
 * bytes, 4-byte aligned, device memory of this rank. */
void dc_workspace_set_status(dcptopk_workspace *ws, uint64_t words);
void dc_workspace_set_status(dcptopk_workspace *ws, uint64_t words)
{
    if (ws && words)
        ws->status = words;
}

uint64_t dcptopk_workspace_saturation(const dcptopk_workspace *ws)
{
    return ws ? ws->sat : 0;
}

dcptopk_result dcptopk_workspace_check(dcptopk_workspace *ws, void *stream)
{
    if (!ws)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ws is NULL");
    dcptopk_context *ctx = ws->ctx;
    dcptopk_result r = dc_stream_sync(ctx, stream);
    uint32_t st[4];
    if (r || (r = dc_memcpy_dtoh(ctx, st, ws->status, sizeof st)))
        return r;
    if (st[0] == 0) {
        dc_clear(ctx);
        return DCPTOPK_SUCCESS;
    }
    const uint32_t zero[4] = {0, 0, 0, 0};
    if ((r = dc_memcpy_htod(ctx, ws->status, zero, sizeof zero)))
        return r;
    if (st[0] == (uint32_t)DCPTOPK_RESCUE_TIMEOUT)
        return dc_fail(ctx, DCPTOPK_RESCUE_TIMEOUT,
                       "rank %d: the rescue of row %u waited more than %llu "
                       "ms for rank %u's push (flag value %u expected); that "
                       "row kept its round-1 result. The ranks' flags and "
                       "sequence words are now out of step: recreate every "
                       "rank's workspace",
                       ws->rank, st[1],
                       (unsigned long long)(ws->timeout_ns / 1000000ull), st[2],
                       st[3]);
    return dc_fail(ctx, DCPTOPK_INTERNAL, "rescue status word = %u", st[0]);
}

/* ------------------------------------------------------------ select */

dc_select_out dc_packed_out_param(const dcptopk_merge_config *c,
                                  const dcptopk_select_args *a)
{
    dc_select_out o;
    memset(&o, 0, sizeof o);
    o.ids = a->ids_out;
    o.ids_stride = a->ids_out_stride ? a->ids_out_stride : c->topk;
    const dcptopk_rows_map *m = &a->rows_map;
    if (m->rows_out) {
        o.rm.req_id = m->req_id;
        o.rm.block_table = m->block_table;
        o.rm.block_table_stride = m->block_table_stride;
        o.rm.block_table_cols = m->block_table_cols;
        o.rm.num_reqs = m->num_reqs;
        o.rm.stride_rows = m->stride_rows;
        o.rm.rows_out = m->rows_out;
        o.rm.rows_out_stride = m->rows_out_stride ? m->rows_out_stride : c->topk;
        o.rm.counts_out = m->counts_out;
        /* No block table (no request or no column) owns nothing. */
        if (m->num_reqs == 0 || m->block_table_cols == 0 || !m->block_table) {
            o.rm.num_reqs = 0;
            o.rm.block_table = NULL;
        }
    }
    o.rank = a->rank;
    return o;
}

/* A workspace of this context and config, with room for `rows`. */
static dcptopk_result check_ws_fits(dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    const dcptopk_workspace *ws, int64_t rows)
{
    if (ws->ctx != ctx)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "ws was created with another context");
    if (ws->c.topk != c->topk || ws->c.local_topk != c->local_topk ||
        ws->c.world_size != c->world_size)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config (topk %d, local_topk %d, world_size %d) does "
                       "not match the workspace's (topk %d, local_topk %d, "
                       "world_size %d)",
                       c->topk, c->local_topk, c->world_size, ws->c.topk,
                       ws->c.local_topk, ws->c.world_size);
    if (rows > ws->max_rows)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->rows = %lld: more than the workspace's max_rows "
                       "= %lld",
                       (long long)rows, (long long)ws->max_rows);
    return DCPTOPK_SUCCESS;
}

/* Workspace checks of an exact call. */
static dcptopk_result check_ws(dcptopk_context *ctx,
                               const dcptopk_merge_config *c,
                               const dcptopk_workspace *ws,
                               const dcptopk_select_args *a)
{
    if (!ws)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "ws is NULL: config->exact = %d needs a rescue "
                       "workspace (dcptopk_workspace_create)",
                       c->exact);
    dcptopk_result r = check_ws_fits(ctx, c, ws, a->rows);
    if (r)
        return r;
    if (a->rank != ws->rank)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "args->rank = %d: the workspace belongs to rank %d",
                       a->rank, ws->rank);
    return DCPTOPK_SUCCESS;
}

/* Round 1's select kernel alone; packed.h. */
dcptopk_result dc_packed_select_launch(dcptopk_context *ctx,
                                       const dcptopk_merge_config *c,
                                       dcptopk_workspace *ws,
                                       const dcptopk_select_args *a)
{
    dcptopk_key key;
    select_key(&key, c, ctx->arch);
    dc_select_args k = {
        .gathered = a->gathered,
        .rank_stride_rows = a->rank_stride_rows ? a->rank_stride_rows : a->rows,
        .rows = a->rows,
        .o = dc_packed_out_param(c, a),
        .sat = c->exact ? (uint32_t *)(uintptr_t)ws->sat : NULL,
    };
    const int32_t w = c->world_size, n = c->local_topk;
    const int32_t threads = DC_SELECT_THREADS_FOR(w, n);
    dc_launch_cfg cfg = {.grid = {(uint32_t)k.rows, 1, 1},
                         .block = {threads, 1, 1},
                         .stream = a->stream,
                         .pdl = 1};
    const int64_t kpt = ((int64_t)w * n + threads - 1) / threads;
    const int64_t row_bytes = DC_SELECT_ROW_BYTES((int64_t)w, n);
    const int64_t sms = dc_ctx_sm_count(ctx) > 0 ? dc_ctx_sm_count(ctx) : 1;
    if (DC_SELECT_IS_SMALL(w, n)) {
        /* The small-row path: one CTA per row and one row buffer of dynamic
         * shared memory. The kernel handles the row of its blockIdx.x alone:
         * a persistent grid (a CTA copying its next row while it selected)
         * was slower (the last CTAs' extra row is a tail). */
        cfg.grid[0] = (uint32_t)k.rows;
        cfg.smem_bytes = (uint32_t)row_bytes;
    } else if (DC_SELECT_PREFETCH(kpt, row_bytes)) {
        /* The prefetching path of the larger rows: a persistent grid of the
         * CTAs that fit the SMs at once, over two row buffers. */
        const int64_t resident = DC_SELECT_PREFETCH_CTAS * sms;
        cfg.grid[0] = (uint32_t)(k.rows < resident ? k.rows : resident);
        cfg.smem_bytes = (uint32_t)(2 * row_bytes);
    }
    dc_abi_argv argv = dc_select_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_select", &cfg, argv.p);
}

/* Round 1's push of this rank's saturated rows; packed.h. */
dcptopk_result dc_packed_push_launch(dcptopk_context *ctx,
                                     const dcptopk_merge_config *c,
                                     dcptopk_workspace *ws,
                                     const dcptopk_select_args *a)
{
    dc_push_args pa;
    memset(&pa, 0, sizeof pa);
    pa.logits = a->logits;
    pa.logits_stride = a->logits_stride;
    pa.max_local_len = a->max_local_len;
    pa.row_ends = a->row_ends;
    pa.rows = a->rows;
    pa.rank = a->rank;
    pa.sat = (const uint32_t *)(uintptr_t)ws->sat;
    pa.seq = (const uint32_t *)(uintptr_t)ws->seq;
    pa.peer_recv = (const uint64_t *)(uintptr_t)ws->peer_recv_d;
    pa.peer_flags = (const uint64_t *)(uintptr_t)ws->peer_flags_d;
    pa.max_rows = ws->max_rows;
    pa.stream = a->stream;
    return dc_push_launch(ctx, c, &pa);
}

/* Round 1: the select, and in exact mode the push right after it. */
static dcptopk_result launch_select(dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    dcptopk_workspace *ws,
                                    const dcptopk_select_args *a)
{
    dcptopk_result r = dc_packed_select_launch(ctx, c, ws, a);
    if (r || !c->exact)
        return r;
    return dc_packed_push_launch(ctx, c, ws, a);
}

/* Round 2: the rescue (persistent grid); packed.h. */
dcptopk_result dc_packed_rescue_launch(dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    dcptopk_workspace *ws,
                                    const dcptopk_select_args *a)
{
    dcptopk_key key;
    rescue_key(&key, c, ctx->arch);
    dc_rescue_args k = {
        .gathered = a->gathered,
        .rank_stride_rows = a->rank_stride_rows ? a->rank_stride_rows : a->rows,
        .rows = a->rows,
        .o = dc_packed_out_param(c, a),
        .sat = (const uint32_t *)(uintptr_t)ws->sat,
        .seq = (uint32_t *)(uintptr_t)ws->seq,
        .recv = (const int32_t *)(uintptr_t)ws->recv,
        .flags = (const uint32_t *)(uintptr_t)ws->flags,
        .max_rows = ws->max_rows,
        .status = (uint32_t *)(uintptr_t)ws->status,
        .timeout_ns = ws->timeout_ns,
    };
    /* A persistent grid (cfg.fill: at most the CTAs the SMs hold), a CTA a
     * row for fewer rows; a dependent launch of the push (rescue.cu waits
     * for it first). */
    const uint32_t grid = (uint32_t)(k.rows < INT32_MAX ? k.rows : INT32_MAX);
    const uint32_t smem = DC_RESCUE_SMEM_BYTES(c->topk, c->local_topk, c->world_size);
    dc_launch_cfg cfg = {.grid = {grid, 1, 1},
                         .block = {DC_RESCUE_THREADS, 1, 1},
                         .smem_bytes = smem,
                         .stream = a->stream,
                         .pdl = 1,
                         .fill = 1};
    dc_abi_argv argv = dc_rescue_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_rescue", &cfg, argv.p);
}

/* The owned rows' CSR offsets from the counts, after the kernels that wrote
 * them (a dependent launch: it waits for them first): dcptopk_indptr of the
 * select module (kernel_abi.h), one CTA. */
static dcptopk_result launch_indptr(dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    const dcptopk_select_args *a)
{
    dcptopk_key key;
    select_key(&key, c, ctx->arch);
    dc_indptr_args k = {
        .counts = a->rows_map.counts_out,
        .rows = a->rows,
        .indptr = a->indptr_out,
    };
    dc_launch_cfg cfg = {.grid = {1, 1, 1},
                         .block = {DC_INDPTR_THREADS, 1, 1},
                         .stream = a->stream,
                         .pdl = 1};
    dc_abi_argv argv = dc_indptr_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_indptr", &cfg, argv.p);
}

dcptopk_result dcptopk_select(dcptopk_context *ctx,
                              const dcptopk_merge_config *config,
                              dcptopk_workspace *ws,
                              const dcptopk_select_args *args)
{
    dcptopk_merge_config c;
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    dcptopk_result r = read_config(ctx, config, &c);
    if (r || (r = DC_STRUCT_IN(ctx, "args", args, &a, SELECT_ARGS)) ||
        (r = dc_check_select_args(ctx, &c, &a)))
        return r;
    args = &a;
    if (c.exact && (r = check_ws(ctx, &c, ws, args)))
        return r;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    const dc_named_ptr ptrs[] = {{"args->gathered", args->gathered},
                                 {"args->ids_out", args->ids_out},
                                 {"args->logits", args->logits},
                                 {"args->row_ends", args->row_ends},
                                 {"args->indptr_out", args->indptr_out},
                                 DC_ROWS_MAP_PTRS(args->rows_map)};
    if ((r = dc_check_device_ptrs(ctx, ptrs, sizeof ptrs / sizeof ptrs[0])))
        return r;
    if ((r = launch_select(ctx, &c, ws, args)))
        return r;
    if (c.exact && (r = dc_packed_rescue_launch(ctx, &c, ws, args)))
        return r;
    return args->indptr_out ? launch_indptr(ctx, &c, args) : DCPTOPK_SUCCESS;
}

/* ------------------------------------------------------------ node pairs */

void dc_node_pairs_key(const dcptopk_merge_config *c, const char *arch,
                       dcptopk_key *k)
{
    dc_key_init(k, DCPTOPK_KERNEL_NODE_PAIRS, arch);
    k->topk = c->topk;
    k->local_topk = c->local_topk;
    k->world_size = c->world_size;
    k->interleave = c->interleave;
}

dcptopk_result dcptopk_node_pairs(dcptopk_context *ctx,
                                  const dcptopk_merge_config *node_config,
                                  dcptopk_workspace *ws,
                                  const dcptopk_node_pairs_args *args)
{
    dcptopk_merge_config c;
    dcptopk_node_pairs_args a = DCPTOPK_NODE_PAIRS_ARGS_INIT;
    dcptopk_result r = read_config(ctx, node_config, &c);
    if (r || (r = DC_STRUCT_IN(ctx, "args", args, &a, NODE_PAIRS_ARGS)) ||
        (r = dc_check_node_pairs_args(ctx, &c, &a)))
        return r;
    args = &a;
    if (!ws)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "ws is NULL: the node merge's rescue workspace holds "
                       "its saturation words and pushed lists");
    if ((r = check_ws_fits(ctx, &c, ws, args->rows)))
        return r;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    const dc_named_ptr ptrs[] = {{"args->gathered", args->gathered},
                                 {"args->ids", args->ids},
                                 {"args->pairs_out", args->pairs_out}};
    if ((r = dc_check_device_ptrs(ctx, ptrs, sizeof ptrs / sizeof ptrs[0])))
        return r;
    dcptopk_key key;
    dc_node_pairs_key(&c, ctx->arch, &key);
    dc_node_pairs_args k = {
        .gathered = args->gathered,
        .rank_stride_rows =
            args->rank_stride_rows ? args->rank_stride_rows : args->rows,
        .rows = args->rows,
        .ids = args->ids,
        .ids_stride = args->ids_stride ? args->ids_stride : c.topk,
        .sat = (const uint32_t *)(uintptr_t)ws->sat,
        .recv = (const int32_t *)(uintptr_t)ws->recv,
        .sorted = args->sorted,
        .first_rank = args->first_rank,
        .world = args->world_size,
        .pairs = args->pairs_out,
    };
    const uint32_t bx = (uint32_t)((c.topk + DC_NODE_PAIRS_THREADS - 1) /
                                   DC_NODE_PAIRS_THREADS);
    dc_launch_cfg cfg = {.grid = {(uint32_t)args->rows, bx, 1},
                         .block = {DC_NODE_PAIRS_THREADS, 1, 1},
                         .stream = args->stream,
                         .pdl = 1};
    dc_abi_argv argv = dc_node_pairs_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_node_pairs", &cfg, argv.p);
}

/* ------------------------------------------------------------ loopback */

dcptopk_result dcptopk_loopback_create(dcptopk_context *ctx,
                                       const dcptopk_merge_config *config,
                                       int64_t max_rows, int64_t max_local_len,
                                       dcptopk_loopback **out)
{
    dcptopk_merge_config c;
    dcptopk_result r = read_config(ctx, config, &c);
    if (r)
        return r;
    if (!out)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if ((r = check_max_rows(ctx, max_rows)))
        return r;
    if (max_local_len < 0 || max_local_len > (1 << DCPTOPK_LOCAL_INDEX_BITS))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "max_local_len = %lld: must be in 0..%d",
                       (long long)max_local_len, 1 << DCPTOPK_LOCAL_INDEX_BITS);
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    if ((r = ctx_layout(ctx, &c, max_rows, &lay)))
        return r;
    dcptopk_loopback *lb = calloc(1, sizeof *lb);
    if (!lb)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "loopback struct");
    lb->ctx = ctx;
    lb->c = c;
    lb->max_rows = max_rows;
    lb->max_local_len = max_local_len;
    const int32_t w = c.world_size;
    const size_t gbytes = (size_t)w * (size_t)max_rows *
                          (size_t)DC_PACKED_ROW_WORDS(c.local_topk) * 4u;
    if ((r = dc_mem_alloc(ctx, gbytes, &lb->gathered)) ||
        (r = dc_memset_async(ctx, lb->gathered, 0, gbytes, NULL)))
        goto fail;
    if (c.exact) {
        for (int32_t p = 0; p < w; p++)
            if ((r = dc_mem_alloc(ctx, lay.recv_bytes, &lb->recv[p])) ||
                (r = dc_mem_alloc(ctx, lay.flags_bytes, &lb->flags[p])))
                goto fail;
        for (int32_t p = 0; p < w; p++)
            if ((r = dcptopk_workspace_create(ctx, &c, max_rows, p, lb->recv,
                                              lb->flags, &lb->ws[p])))
                goto fail;
    }
    if ((r = dc_stream_sync(ctx, NULL)))
        goto fail;
    *out = lb;
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
fail:
    dcptopk_loopback_destroy(lb);
    return r;
}

void dcptopk_loopback_destroy(dcptopk_loopback *lb)
{
    if (!lb)
        return;
    for (int32_t p = DCPTOPK_MAX_WORLD_SIZE - 1; p >= 0; p--) {
        dcptopk_workspace_destroy(lb->ws[p]);
        if (lb->flags[p])
            dc_mem_free(lb->ctx, lb->flags[p]);
        if (lb->recv[p])
            dc_mem_free(lb->ctx, lb->recv[p]);
    }
    if (lb->gathered)
        dc_mem_free(lb->ctx, lb->gathered);
    free(lb);
}

/* Prefixes the context's last message with the rank it concerns. */
static dcptopk_result fail_rank(dcptopk_context *ctx, dcptopk_result r,
                                int32_t rank)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dcptopk_last_error(ctx));
    return dc_fail(ctx, r, "rank %d: %s", rank, msg);
}

static int32_t *lb_segment(const dcptopk_loopback *lb, int32_t r)
{
    return (int32_t *)(uintptr_t)(lb->gathered +
                                  (uint64_t)r * (uint64_t)lb->max_rows *
                                      (uint64_t)DC_PACKED_ROW_WORDS(
                                          lb->c.local_topk) *
                                      4u);
}

dcptopk_result dcptopk_loopback_merge(dcptopk_loopback *lb,
                                      const uint16_t *const *logits,
                                      int64_t logits_stride,
                                      const int32_t *const *row_ends,
                                      int64_t rows, int32_t *const *ids_out,
                                      const dcptopk_rows_map *rows_maps,
                                      void *stream)
{
    if (!lb)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "lb is NULL");
    dcptopk_context *ctx = lb->ctx;
    const dcptopk_merge_config *c = &lb->c;
    const int32_t w = c->world_size;
    if (!logits)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "logits is NULL");
    if (!row_ends)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "row_ends is NULL");
    if (rows < 0 || rows > lb->max_rows)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be in 0..max_rows = %lld",
                       (long long)rows, (long long)lb->max_rows);
    dcptopk_pack_args pa[DCPTOPK_MAX_WORLD_SIZE];
    dcptopk_select_args sa[DCPTOPK_MAX_WORLD_SIZE];
    dcptopk_result r;
    /* Every argument of every rank is checked before anything launches. */
    for (int32_t p = 0; p < w; p++) {
        dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
        a.logits = logits[p];
        a.logits_stride = logits_stride;
        a.max_local_len = lb->max_local_len;
        a.row_ends = row_ends[p];
        a.rows = rows;
        a.out = lb_segment(lb, p);
        a.stream = stream;
        if ((r = dc_check_pack_args(ctx, c, &a, 0)))
            return fail_rank(ctx, r, p);
        pa[p] = a;
        dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
        s.gathered = lb_segment(lb, 0);
        s.rank_stride_rows = lb->max_rows;
        s.rows = rows;
        s.rank = p;
        s.ids_out = ids_out ? ids_out[p] : NULL;
        if (rows_maps)
            s.rows_map = rows_maps[p];
        s.logits = logits[p];
        s.logits_stride = logits_stride;
        s.max_local_len = lb->max_local_len;
        s.row_ends = row_ends[p];
        s.stream = stream;
        if ((r = dc_check_select_args(ctx, c, &s)) ||
            (c->exact && (r = check_ws(ctx, c, lb->ws[p], &s))))
            return fail_rank(ctx, r, p);
        sa[p] = s;
    }
    if (rows == 0)
        return DCPTOPK_SUCCESS;
    /* Round 1 of every rank (its pack writes its segment of the one gathered
     * buffer: the all-gather), then every select + push, then every rescue:
     * a rescue waits for other ranks' pushes, so on one stream all pushes
     * must come first. */
    for (int32_t p = 0; p < w; p++)
        if ((r = dc_topn_pack_launch(ctx, c, &pa[p])))
            return r;
    for (int32_t p = 0; p < w; p++)
        if ((r = launch_select(ctx, c, lb->ws[p], &sa[p])))
            return r;
    if (c->exact)
        for (int32_t p = 0; p < w; p++)
            if ((r = dc_packed_rescue_launch(ctx, c, lb->ws[p], &sa[p])))
                return r;
    return DCPTOPK_SUCCESS;
}

uint64_t dcptopk_loopback_gathered(const dcptopk_loopback *lb, int32_t rank)
{
    if (!lb || rank < 0 || rank >= lb->c.world_size)
        return 0;
    return lb->gathered;
}

uint64_t dcptopk_loopback_saturation(const dcptopk_loopback *lb, int32_t rank)
{
    if (!lb || rank < 0 || rank >= lb->c.world_size || !lb->ws[rank])
        return 0;
    return lb->ws[rank]->sat;
}

dcptopk_workspace *dcptopk_loopback_workspace(const dcptopk_loopback *lb,
                                              int32_t rank)
{
    if (!lb || rank < 0 || rank >= lb->c.world_size)
        return NULL;
    return lb->ws[rank];
}

dcptopk_result dcptopk_loopback_check(dcptopk_loopback *lb, void *stream)
{
    if (!lb)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "lb is NULL");
    dcptopk_result r = dc_stream_sync(lb->ctx, stream);
    if (r)
        return r;
    for (int32_t p = 0; p < lb->c.world_size; p++)
        if (lb->ws[p] && (r = dcptopk_workspace_check(lb->ws[p], stream)))
            return r;
    dc_clear(lb->ctx);
    return DCPTOPK_SUCCESS;
}
