/*
 * check.h - argument validation shared by the CPU reference and the GPU entry
 * points: one function per check, so both refuse the same inputs with the same
 * result codes and messages. `ctx` may be NULL (thread error slot). `on_device`
 * only changes what can be checked (a device pointer is never dereferenced).
 */
#ifndef DCPTOPK_CHECK_H
#define DCPTOPK_CHECK_H

#include "base.h"

/* Config fields, each named in the message ("config->topk = 100: ..."). */
DC_HIDDEN dcptopk_result dc_check_config(const dcptopk_context *ctx,
                                         const dcptopk_merge_config *c);
/* Packed-merge config (kind, N < K, N multiple of 32, ...). */
DC_HIDDEN dcptopk_result dc_check_packed_config(const dcptopk_context *ctx,
                                                const dcptopk_merge_config *c);
DC_HIDDEN dcptopk_result dc_check_pair_config(const dcptopk_context *ctx,
                                              const dcptopk_merge_config *c);
DC_HIDDEN dcptopk_result dc_check_rows_map(const dcptopk_context *ctx,
                                           const dcptopk_merge_config *c,
                                           const dcptopk_rows_map *m);
/* indices != 0: dcptopk_pack_indices (local_ids required). */
DC_HIDDEN dcptopk_result dc_check_pack_args(const dcptopk_context *ctx,
                                            const dcptopk_merge_config *c,
                                            const dcptopk_pack_args *a,
                                            int indices);
DC_HIDDEN dcptopk_result dc_check_select_args(const dcptopk_context *ctx,
                                              const dcptopk_merge_config *c,
                                              const dcptopk_select_args *a);
/* The node config (world_size W / nodes) and the second stage's pair config
 * (world_size W) of the hierarchical merge of the exact packed config c. */
DC_HIDDEN dcptopk_result dc_hier_configs(const dcptopk_merge_config *c,
                                         int32_t nodes,
                                         dcptopk_merge_config *node,
                                         dcptopk_merge_config *pair);
DC_HIDDEN dcptopk_result dc_check_node_pairs_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_node_pairs_args *a);
DC_HIDDEN dcptopk_result dc_check_pair_select_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pair_select_args *a);
DC_HIDDEN dcptopk_result dc_check_pair_pack_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pair_pack_args *a);

/* The rows map's pointers, as entries of a dc_named_ptr list (runtime.h):
 * the GPU entry points check them with dc_check_device_ptrs. */
#define DC_ROWS_MAP_PTRS(m)                                                    \
    {"args->rows_map.req_id", (m).req_id},                                     \
        {"args->rows_map.block_table", (m).block_table},                       \
        {"args->rows_map.rows_out", (m).rows_out},                             \
        {"args->rows_map.counts_out", (m).counts_out}

#endif /* DCPTOPK_CHECK_H */
