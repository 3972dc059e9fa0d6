/*
 * pair.h - the pair merge's room (kernels/pair/): what the top floor needs
 * from its launchers beyond the public entry points they define.
 */
#ifndef DCPTOPK_PAIR_H
#define DCPTOPK_PAIR_H

#include "base.h"

/* Config -> keys of the pair merge. Same contract as dcptopk_config_keys;
 * `arch` already resolved, the config already checked. */
DC_HIDDEN dcptopk_result dc_pair_config_keys(const dcptopk_merge_config *c,
                                             const char *arch,
                                             dcptopk_key *keys, size_t cap,
                                             size_t *count);

/* The key of dcptopk_pair_select_nodes for `nodes` segments (0 in the key's
 * variant when nodes = world_size). */
DC_HIDDEN dcptopk_key dc_pair_select_nodes_key(const dcptopk_merge_config *c,
                                               int32_t nodes, int32_t layout,
                                               const char *arch);

#endif /* DCPTOPK_PAIR_H */
