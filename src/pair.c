/* pair.c - launchers of the pair merge (pack, select) and its config -> keys
 * expansion. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "internal.h"

dcptopk_result dc_pair_config_keys(const dcptopk_merge_config *c,
                                   const char *arch, dcptopk_key *keys,
                                   size_t cap, size_t *count)
{
    dcptopk_key list[3];
    size_t n = 0;

    memset(list, 0, sizeof list);
    list[n].kernel = DCPTOPK_KERNEL_PAIR_PACK;
    list[n].topk = c->topk;
    list[n].world_size = c->world_size;
    list[n++].interleave = c->interleave;
    /* Both layouts: engines gather rank-major; the row-major route is kept for
     * engines that already reorder. */
    for (int32_t layout = 0; layout < 2; layout++) {
        list[n].kernel = DCPTOPK_KERNEL_PAIR_SELECT;
        list[n].topk = c->topk;
        list[n].world_size = c->world_size;
        list[n].block_size = c->block_size;
        list[n].interleave = c->interleave;
        list[n].emit_ids = c->emit_ids ? 1 : 0;
        list[n++].layout = layout;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(list[i].arch, sizeof list[i].arch, "%s", arch);
    *count = n;
    for (size_t i = 0; i < n && i < cap; i++)
        keys[i] = list[i];
    return DCPTOPK_SUCCESS;
}
