/* config_keys.c - the public entry points that need the kernel families:
 * dcptopk_merge_config_check (the full argument rules) and
 * dcptopk_config_keys (config -> the compile keys of each family), and the
 * one list of a config's keys that they, warmup and the group's warmup take
 * (dc_config_key_list). They sit on the top floor because base/ cannot see
 * kernels/. */
#include <string.h>

#include "check.h"
#include "config_keys.h"
#include "packed.h"
#include "pair.h"

dcptopk_result dcptopk_merge_config_check(const dcptopk_merge_config *config)
{
    dcptopk_merge_config c;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r)
        return r;
    r = dc_check_config(NULL, &c);
    if (r == DCPTOPK_SUCCESS)
        dc_clear(NULL);
    return r;
}

/* The arguments both key listings take: the config read and checked into
 * *c, *arch defaulted to sm_90a. */
static dcptopk_result keys_args(const dcptopk_merge_config *config,
                                const char **arch, const dcptopk_key *keys,
                                size_t cap, const size_t *count,
                                dcptopk_merge_config *c)
{
    dcptopk_result r = dc_config_read(NULL, config, c);
    if (r)
        return r;
    if (!count)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "count is NULL");
    if (cap && !keys)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "keys is NULL with cap = %zu", cap);
    if (!*arch)
        *arch = "sm_90a";
    if (strlen(*arch) >= sizeof keys->arch)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "arch = \"%.40s\": expected sm_XY[a|f], e.g. sm_90a", *arch);
    r = dc_arch_check_merge(NULL, "arch", *arch);
    if (r)
        return r;
    return dc_check_config(NULL, c);
}

dcptopk_result dc_config_key_list(const dcptopk_context *ctx,
                                  const dcptopk_merge_config *c,
                                  int32_t nodes, const char *arch,
                                  dc_key_list *l)
{
    const int32_t shapes = dc_pair_row_shapes(ctx);
    if (nodes == 1) {
        if (c->kind == DCPTOPK_MERGE_PACKED)
            dc_packed_keys(c, arch, l);
        else
            dc_pair_keys(c, arch, shapes, l);
        return DCPTOPK_SUCCESS;
    }
    dcptopk_merge_config node, pair;
    dcptopk_result r = dc_hier_configs(c, nodes, &node, &pair);
    if (r)
        return r;
    dc_packed_keys(&node, arch, l);
    dc_node_pairs_key(&node, arch, dc_key_next(l));
    dc_pair_select_nodes_key(l, &pair, nodes, DCPTOPK_LAYOUT_RANK_MAJOR, shapes,
                             arch);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_config_keys(const dcptopk_merge_config *config,
                                   const char *arch, dcptopk_key *keys,
                                   size_t cap, size_t *count)
{
    return dcptopk_config_keys_nodes(config, 1, arch, keys, cap, count);
}

dcptopk_result dcptopk_config_keys_nodes(const dcptopk_merge_config *config,
                                         int32_t nodes, const char *arch,
                                         dcptopk_key *keys, size_t cap,
                                         size_t *count)
{
    dcptopk_merge_config c;
    dcptopk_result r = keys_args(config, &arch, keys, cap, count, &c);
    dc_key_list l = {.keys = keys, .cap = cap};
    if (r || (r = dc_config_key_list(NULL, &c, nodes, arch, &l)))
        return r;
    *count = l.n;
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}
