/*
 * pair.h - the pair merge's room (kernels/pair/): what the top floor needs
 * from its launchers beyond the public entry points they define.
 */
#ifndef DCPTOPK_PAIR_H
#define DCPTOPK_PAIR_H

#include "base.h"

/* The pair merge's argument checks (pair_check.c), for its entry points
 * and the CPU reference. */
DC_HIDDEN dcptopk_result dc_check_pair_config(const dcptopk_context *ctx,
                                              const dcptopk_merge_config *c);
DC_HIDDEN dcptopk_result dc_check_pair_select_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pair_select_args *a);
DC_HIDDEN dcptopk_result dc_check_pair_pack_args(
    const dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pair_pack_args *a);

/* Appends the pair merge's keys of config c (checked) for `arch`. */
DC_HIDDEN void dc_pair_keys(const dcptopk_merge_config *c, const char *arch,
                            dc_key_list *l);

/* *k = the key of dcptopk_pair_select_nodes for `nodes` segments (0 in the
 * key's variant when nodes = world_size). */
DC_HIDDEN void dc_pair_select_nodes_key(dcptopk_key *k,
                                        const dcptopk_merge_config *c,
                                        int32_t nodes, int32_t layout,
                                        const char *arch);

#endif /* DCPTOPK_PAIR_H */
