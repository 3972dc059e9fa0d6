/*
 * config_keys.h - the one list of a config's compile keys: every family's
 * keys (kernels/<family>/), the hierarchy's node and pair keys; the group
 * adds its exchange's (dc_gw_exchange_keys) to the same list.
 */
#ifndef DCPTOPK_CONFIG_KEYS_H
#define DCPTOPK_CONFIG_KEYS_H

#include "base.h"

/* Room for every key of a config, its hierarchy's and its exchange's (the
 * longest list is a few dozen). */
#define DC_CONFIG_MAX_KEYS 64

/* Appends the keys of config c (read and checked) merged over `nodes` nodes
 * (1: the flat merge) for `arch`: those ctx's device launches, or with ctx
 * NULL (or device -1) those any device of the arch may launch. An invalid
 * node count: the error of dc_hier_configs. */
DC_HIDDEN dcptopk_result dc_config_key_list(const dcptopk_context *ctx,
                                            const dcptopk_merge_config *c,
                                            int32_t nodes, const char *arch,
                                            dc_key_list *l);

#endif /* DCPTOPK_CONFIG_KEYS_H */
