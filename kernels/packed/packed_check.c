/* packed_check.c - the packed merge's argument checks (declared in
 * packed.h), shared by its GPU entry points and the CPU reference so that
 * both refuse the same inputs with the same messages; built on the shared
 * checks of kernels/common/check.h. */
#include <stdint.h>

#include "check.h"
#include "packed.h"
#include "runtime.h"
#include "topn.h"
#include "topn_abi.h"

#define DC_MAX_LOCAL_LEN (1 << DCPTOPK_LOCAL_INDEX_BITS)

/* The local top-N (dcptopk_pack, and the push of the exact select) takes at
 * least 2^dc_topn_capacity_variant CTAs per row: a row past 65536 columns is
 * split over 2, and on a device of less shared memory a block sooner, or
 * not held at all. The grid holds at most 2^31 - 1 CTAs. Both are refused
 * here so that the exact select never fails after its select was launched.
 * Without a device (the CPU reference) the template's bound alone. */
static dcptopk_result check_topn_grid(const dcptopk_context *ctx, int64_t rows,
                                      int64_t max_local_len)
{
    const int32_t optin = dc_ctx_smem_optin(ctx);
    const int32_t v = dc_topn_capacity_variant(max_local_len, optin);
    if (v < 0)
        return dc_topn_unfit(ctx, max_local_len, optin);
    const int32_t per_row = 1 << v;
    if (rows > INT32_MAX / per_row)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "args->rows = %lld: with args->max_local_len = %lld "
                       "the local top-N takes %d CTAs per row; %lld CTAs "
                       "exceed the grid limit (2^31 - 1)",
                       (long long)rows, (long long)max_local_len, per_row,
                       (long long)(rows * per_row));
    return DCPTOPK_SUCCESS;
}

/* bf16 logits [>= T, logits_stride] of which the first max_local_len columns
 * are read: rows 16-byte aligned for vector loads, the bound within a row and
 * below 2^17 (local ids of the packed format). */
static dcptopk_result check_bf16_logits(const dcptopk_context *ctx,
                                        const uint16_t *logits,
                                        int64_t logits_stride,
                                        int64_t max_local_len,
                                        const int32_t *row_ends, int64_t rows)
{
    dcptopk_result r;
    if (max_local_len < 0 || max_local_len > DC_MAX_LOCAL_LEN)
        return DC_INVALID("args->max_local_len = %lld: must be in 0..%d (2^17 "
                          "local ids)",
                          (long long)max_local_len, DC_MAX_LOCAL_LEN);
    if (logits_stride <= 0 || logits_stride % 8)
        return DC_INVALID("args->logits_stride = %lld: must be a positive "
                          "multiple of 8 (16-byte rows)",
                          (long long)logits_stride);
    if (logits_stride > (INT64_C(1) << 40))
        return DC_INVALID("args->logits_stride = %lld: unreasonably large (> "
                          "2^40)",
                          (long long)logits_stride);
    if (logits_stride < max_local_len)
        return DC_INVALID("args->logits_stride = %lld: must be >= "
                          "args->max_local_len = %lld",
                          (long long)logits_stride, (long long)max_local_len);
    if ((r = dc_check_extent(ctx, "args->rows", rows, "args->logits_stride",
                             logits_stride, 2)))
        return r;
    if (rows > 0) {
        if ((r = dc_check_ptr(ctx, "args->logits", logits, 16)))
            return r;
        if ((r = dc_check_ptr(ctx, "args->row_ends", row_ends, 4)))
            return r;
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_packed_config(const dcptopk_context *ctx,
                                      const dcptopk_merge_config *c)
{
    return dc_check_config_kind(ctx, c, DCPTOPK_MERGE_PACKED, "packed");
}

dcptopk_result dc_check_pack_args(const dcptopk_context *ctx,
                                  const dcptopk_merge_config *c,
                                  const dcptopk_pack_args *a, int indices)
{
    dcptopk_result r;
    if ((r = dc_check_packed_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if ((r = dc_check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((r = check_bf16_logits(ctx, a->logits, a->logits_stride,
                               a->max_local_len, a->row_ends, a->rows)))
        return r;
    if (indices) {
        if (a->rows > 0 &&
            (r = dc_check_ptr(ctx, "args->local_ids", a->local_ids, 4)))
            return r;
        if ((r = dc_check_stride(ctx, "args->local_ids_stride",
                                 a->local_ids_stride, c->local_topk,
                                 "local_topk")))
            return r;
        if ((r = dc_check_extent(ctx, "args->rows", a->rows,
                                 "args->local_ids_stride",
                                 a->local_ids_stride ? a->local_ids_stride
                                                     : c->local_topk,
                                 4)))
            return r;
    } else if (a->local_ids) {
        return DC_INVALID("args->local_ids = %p: must be NULL for the fused "
                          "local top-N (use pack_indices to pack given ids)",
                          (const void *)a->local_ids);
    } else if ((r = check_topn_grid(ctx, a->rows, a->max_local_len))) {
        return r;
    }
    if (a->rows > 0 && (r = dc_check_ptr(ctx, "args->out", a->out, 4)))
        return r;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_select_args(const dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    const dcptopk_select_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_packed_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if ((r = dc_check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((r = dc_check_stride(ctx, "args->rank_stride_rows", a->rank_stride_rows,
                             a->rows, "rows")))
        return r;
    if ((r = dc_check_rank(ctx, a->rank, c)))
        return r;
    if (a->rows > 0 &&
        (r = dc_check_ptr(ctx, "args->gathered", a->gathered, 4)))
        return r;
    if ((r = dc_check_select_outputs(ctx, c, a->ids_out, a->ids_out_stride,
                                     &a->rows_map, a->indptr_out, a->rows)))
        return r;
    /* Exact mode: a saturated rank re-reads its own row for the push. */
    if (c->exact &&
        ((r = check_bf16_logits(ctx, a->logits, a->logits_stride,
                                a->max_local_len, a->row_ends, a->rows)) ||
         (r = check_topn_grid(ctx, a->rows, a->max_local_len))))
        return r;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_node_pairs_args(const dcptopk_context *ctx,
                                        const dcptopk_merge_config *c,
                                        const dcptopk_node_pairs_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_packed_config(ctx, c)))
        return r;
    if (!c->exact)
        return DC_INVALID("node_config->exact = 0: the node's top K is exact "
                          "only after the rescue (exact = 1)");
    DC_ARGS_READ(a);
    if ((r = dc_check_rows(ctx, "args->rows", a->rows)) ||
        (r = dc_check_stride(ctx, "args->rank_stride_rows", a->rank_stride_rows,
                             a->rows, "rows")) ||
        (r = dc_check_stride(ctx, "args->ids_stride", a->ids_stride, c->topk,
                             "topk")))
        return r;
    if (a->sorted != 0 && a->sorted != 1)
        return DC_INVALID("args->sorted = %d: must be 0 or 1", a->sorted);
    if (a->world_size < c->world_size ||
        a->world_size > DCPTOPK_MAX_WORLD_SIZE ||
        a->world_size % c->world_size)
        return DC_INVALID("args->world_size = %d: must be a multiple of "
                          "node_config->world_size = %d, at most %d",
                          a->world_size, c->world_size, DCPTOPK_MAX_WORLD_SIZE);
    if (a->first_rank < 0 || a->first_rank % c->world_size ||
        a->first_rank + c->world_size > a->world_size)
        return DC_INVALID("args->first_rank = %d: must be a multiple of the "
                          "node size %d below args->world_size = %d",
                          a->first_rank, c->world_size, a->world_size);
    if (a->rows > 0 &&
        ((r = dc_check_ptr(ctx, "args->gathered", a->gathered, 4)) ||
         (r = dc_check_ptr(ctx, "args->ids", a->ids, 4)) ||
         (r = dc_check_ptr(ctx, "args->pairs_out", a->pairs_out, 8))))
        return r;
    return dc_check_extent(ctx, "args->rows", a->rows, "args->ids_stride",
                           a->ids_stride ? a->ids_stride : c->topk, 4);
}

/* The two configs of the hierarchical merge of `c` over `nodes` nodes: the
 * node's exact packed merge (world_size W / nodes) and the second stage's
 * pair merge (world_size W, K candidates a node). */
dcptopk_result dc_hier_configs(const dcptopk_merge_config *c, int32_t nodes,
                               dcptopk_merge_config *node,
                               dcptopk_merge_config *pair)
{
    if (c->kind != DCPTOPK_MERGE_PACKED || !c->exact)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config: the hierarchical merge is of an exact packed "
                       "config (kind %d, exact %d)",
                       c->kind, c->exact);
    if (nodes < 2 || nodes > c->world_size || c->world_size % nodes)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "nodes = %d: must divide config->world_size = %d, at "
                       "least 2 (nodes of equal size)",
                       nodes, c->world_size);
    *node = *c;
    node->world_size = c->world_size / nodes;
    *pair = *c;
    pair->kind = DCPTOPK_MERGE_PAIR;
    pair->local_topk = c->topk;
    pair->exact = 0;
    dcptopk_result r = dc_check_config(NULL, node);
    if (!r)
        r = dc_check_config(NULL, pair);
    return r;
}
