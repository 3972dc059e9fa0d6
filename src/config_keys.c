/* config_keys.c - the public entry points that need the kernel families:
 * dcptopk_merge_config_check (the full argument rules) and
 * dcptopk_config_keys (config -> the compile keys of each family). They sit on
 * the top floor because base/ cannot see kernels/. */
#include <string.h>

#include "check.h"
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
    if (!dc_arch_valid(*arch) || strlen(*arch) >= sizeof keys->arch)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "arch = \"%s\": expected sm_XY[a|f], e.g. sm_90a", *arch);
    return dc_check_config(NULL, c);
}

dcptopk_result dcptopk_config_keys(const dcptopk_merge_config *config,
                                   const char *arch, dcptopk_key *keys,
                                   size_t cap, size_t *count)
{
    dcptopk_merge_config c;
    dcptopk_result r = keys_args(config, &arch, keys, cap, count, &c);
    if (r)
        return r;
    if (c.kind == DCPTOPK_MERGE_PACKED)
        r = dc_packed_config_keys(&c, arch, keys, cap, count);
    else
        r = dc_pair_config_keys(&c, arch, keys, cap, count);
    if (r == DCPTOPK_SUCCESS)
        dc_clear(NULL);
    return r;
}

dcptopk_result dcptopk_config_keys_nodes(const dcptopk_merge_config *config,
                                         int32_t nodes, const char *arch,
                                         dcptopk_key *keys, size_t cap,
                                         size_t *count)
{
    if (nodes == 1)
        return dcptopk_config_keys(config, arch, keys, cap, count);
    dcptopk_merge_config c, node, pair;
    dcptopk_result r = keys_args(config, &arch, keys, cap, count, &c);
    if (r || (r = dc_hier_configs(&c, nodes, &node, &pair)))
        return r;
    size_t n = 0;
    if ((r = dcptopk_config_keys(&node, arch, keys, cap, &n)))
        return r;
    dcptopk_key extra[2];
    dc_node_pairs_key(&node, arch, &extra[0]);
    extra[1] = dc_pair_select_nodes_key(&pair, nodes, DCPTOPK_LAYOUT_RANK_MAJOR,
                                        arch);
    for (size_t i = 0; i < 2; i++, n++)
        if (n < cap)
            keys[n] = extra[i];
    *count = n;
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}
