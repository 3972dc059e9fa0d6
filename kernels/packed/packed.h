/*
 * packed.h - the packed merge's room (kernels/packed/): what the top floor
 * needs from its launcher beyond the public entry points it defines.
 */
#ifndef DCPTOPK_PACKED_H
#define DCPTOPK_PACKED_H

#include "base.h"
#include "packed_abi.h"

/* The packed merge's argument checks (packed_check.c), for its entry points
 * and the CPU reference. Packed-merge config: kind, N < K, N a multiple of
 * 32, ... */
DC_HIDDEN dcptopk_result dc_check_packed_config(const dcptopk_context *ctx,
                                                const dcptopk_merge_config *c);
/* indices != 0: dcptopk_pack_indices (local_ids required). */
DC_HIDDEN dcptopk_result dc_check_pack_args(const dcptopk_context *ctx,
                                            const dcptopk_merge_config *c,
                                            const dcptopk_pack_args *a,
                                            int indices);
DC_HIDDEN dcptopk_result dc_check_select_args(const dcptopk_context *ctx,
                                              const dcptopk_merge_config *c,
                                              const dcptopk_select_args *a);
DC_HIDDEN dcptopk_result dc_check_node_pairs_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_node_pairs_args *a);
/* The node config (world_size W / nodes) and the second stage's pair config
 * (world_size W) of the hierarchical merge of the exact packed config c. */
DC_HIDDEN dcptopk_result dc_hier_configs(const dcptopk_merge_config *c,
                                         int32_t nodes,
                                         dcptopk_merge_config *node,
                                         dcptopk_merge_config *pair);

/* Appends the packed merge's keys of config c (checked) for `arch`. */
DC_HIDDEN void dc_packed_keys(const dcptopk_merge_config *c, const char *arch,
                              dc_key_list *l);

/* Round 1 in two parts, the select kernel (which writes the saturation
 * words in exact mode) and the push of the rank's saturated rows:
 * dcptopk_select launches both, bench/bench_packed.c times each alone. */
DC_HIDDEN dcptopk_result dc_packed_select_launch(dcptopk_context *ctx,
                                                 const dcptopk_merge_config *c,
                                                 dcptopk_workspace *ws,
                                                 const dcptopk_select_args *a);
DC_HIDDEN dcptopk_result dc_packed_push_launch(dcptopk_context *ctx,
                                               const dcptopk_merge_config *c,
                                               dcptopk_workspace *ws,
                                               const dcptopk_select_args *a);

/* Round 2 of the exact select alone (the rescue kernel on its persistent
 * grid), after a select on the same workspace: bench/bench_packed.c times it
 * on its own. */
DC_HIDDEN dcptopk_result dc_packed_rescue_launch(dcptopk_context *ctx,
                                                 const dcptopk_merge_config *c,
                                                 dcptopk_workspace *ws,
                                                 const dcptopk_select_args *a);

/* The select's and the rescue's outputs parameter from a call's arguments
 * (ids, the rows map with its defaults); tests/emu passes it to the rescue
 * kernel it runs on the CPU. */
DC_HIDDEN dc_select_out dc_packed_out_param(const dcptopk_merge_config *c,
                                            const dcptopk_select_args *a);

/* The key of the hierarchical merge's node_pairs kernel for a node config
 * (world_size = the node's ranks). */
DC_HIDDEN void dc_node_pairs_key(const dcptopk_merge_config *c,
                                 const char *arch, dcptopk_key *k);

#endif /* DCPTOPK_PACKED_H */
