/* pair_check.c - the pair merge's argument checks (declared in pair.h),
 * shared by its GPU entry points and the CPU reference; built on the shared
 * checks of kernels/common/check.h. */
#include <stdint.h>

#include "check.h"
#include "pair.h"

dcptopk_result dc_check_pair_config(const dcptopk_context *ctx,
                                    const dcptopk_merge_config *c)
{
    return dc_check_config_kind(ctx, c, DCPTOPK_MERGE_PAIR, "pair");
}

dcptopk_result dc_check_pair_select_args(const dcptopk_context *ctx,
                                         const dcptopk_merge_config *c,
                                         const dcptopk_pair_select_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_pair_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if (a->layout < DCPTOPK_LAYOUT_RANK_MAJOR ||
        a->layout > DCPTOPK_LAYOUT_ROW_MAJOR_FLOAT_IDS)
        return DC_INVALID("args->layout = %d: must be 0 (rank-major), 1 "
                          "(row-major), 2 or 3 (the same with float ids)",
                          a->layout);
    if ((r = dc_check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((a->layout & 1) == 0) { /* rank-major */
        if ((r = dc_check_stride(ctx, "args->rank_stride_rows",
                                 a->rank_stride_rows, a->rows, "rows")))
            return r;
    } else if (a->rank_stride_rows != 0) {
        return DC_INVALID("args->rank_stride_rows = %lld: must be 0 with the "
                          "row-major layout",
                          (long long)a->rank_stride_rows);
    }
    if ((r = dc_check_rank(ctx, a->rank, c)))
        return r;
    if (a->rows > 0 &&
        (r = dc_check_ptr(ctx, "args->candidates", a->candidates, 8)))
        return r;
    if ((r = dc_check_select_outputs(ctx, c, a->ids_out, a->ids_out_stride,
                                     &a->rows_map, a->indptr_out, a->rows)))
        return r;
    if (!a->ids_out && !a->rows_map.rows_out)
        return DC_INVALID("args->ids_out and args->rows_map.rows_out are both "
                          "NULL: the select would output nothing (emit_ids = "
                          "%d, block_size = %d)",
                          c->emit_ids, c->block_size);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_pair_pack_args(const dcptopk_context *ctx,
                                       const dcptopk_merge_config *c,
                                       const dcptopk_pair_pack_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_pair_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if ((r = dc_check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((r = dc_check_rank(ctx, a->rank, c)))
        return r;
    if (a->logits_stride < 1 || a->logits_stride > (INT64_C(1) << 40))
        return DC_INVALID("args->logits_stride = %lld: must be in 1..2^40",
                          (long long)a->logits_stride);
    if ((r = dc_check_stride(ctx, "args->local_ids_stride", a->local_ids_stride,
                             c->topk, "topk")))
        return r;
    if ((r = dc_check_extent(ctx, "args->rows", a->rows, "args->logits_stride",
                             a->logits_stride, 4)) ||
        (r = dc_check_extent(ctx, "args->rows", a->rows,
                             "args->local_ids_stride",
                             a->local_ids_stride ? a->local_ids_stride
                                                 : c->topk,
                             4)))
        return r;
    if (a->rows > 0) {
        if ((r = dc_check_ptr(ctx, "args->logits", a->logits, 4)))
            return r;
        if ((r = dc_check_ptr(ctx, "args->local_ids", a->local_ids, 4)))
            return r;
        if ((r = dc_check_ptr(ctx, "args->out", a->out, 8)))
            return r;
    }
    if ((r = dc_check_opt_ptr(ctx, "args->row_starts", a->row_starts, 4)))
        return r;
    return dc_check_opt_ptr(ctx, "args->row_ends", a->row_ends, 4);
}
