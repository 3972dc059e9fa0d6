/* check.c - argument validation shared by the CPU reference and the GPU entry
 * points (see check.h). */
#include "check.h"

dcptopk_result dc_check_config(const dcptopk_context *ctx,
                               const dcptopk_merge_config *c)
{
    if (c->kind != DCPTOPK_MERGE_PACKED && c->kind != DCPTOPK_MERGE_PAIR)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->kind = %d: must be 0 (packed) or 1 (pair)",
                       c->kind);
    if (c->topk < 32 || c->topk > DCPTOPK_MAX_TOPK || c->topk % 32)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->topk = %d: must be a multiple of 32 in 32..%d",
                       c->topk, DCPTOPK_MAX_TOPK);
    if (c->world_size < 1 || c->world_size > DCPTOPK_MAX_WORLD_SIZE)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->world_size = %d: must be in 1..%d",
                       c->world_size, DCPTOPK_MAX_WORLD_SIZE);
    /* TODO(oracle): complete (local_topk, block_size, interleave, flags). */
    return DCPTOPK_SUCCESS;
}
