/* packed.c - launchers of the packed exact merge (pack, select, rescue,
 * workspace, loopback world) and its config -> keys expansion. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static void dc_key_init(dcptopk_key *k, int32_t kernel, const char *arch)
{
    memset(k, 0, sizeof *k);
    k->kernel = kernel;
    snprintf(k->arch, sizeof k->arch, "%s", arch);
}

dcptopk_result dc_packed_config_keys(const dcptopk_merge_config *c,
                                     const char *arch, dcptopk_key *keys,
                                     size_t cap, size_t *count)
{
    dcptopk_key list[8];
    size_t n = 0;

    dc_key_init(&list[n], DCPTOPK_KERNEL_TOPN_PACK, arch);
    list[n++].local_topk = c->local_topk;
    dc_key_init(&list[n], DCPTOPK_KERNEL_PACK_INDICES, arch);
    list[n++].local_topk = c->local_topk;
    dc_key_init(&list[n], DCPTOPK_KERNEL_SELECT, arch);
    list[n].topk = c->topk;
    list[n].local_topk = c->local_topk;
    list[n].world_size = c->world_size;
    list[n].block_size = c->block_size;
    list[n].interleave = c->interleave;
    list[n].emit_ids = c->emit_ids ? 1 : 0;
    list[n++].exact = c->exact ? 1 : 0;
    if (c->exact) {
        dc_key_init(&list[n], DCPTOPK_KERNEL_RESCUE, arch);
        list[n].topk = c->topk;
        list[n].local_topk = c->local_topk;
        list[n].world_size = c->world_size;
        list[n].block_size = c->block_size;
        list[n].interleave = c->interleave;
        list[n++].emit_ids = c->emit_ids ? 1 : 0;
    }
    *count = n;
    for (size_t i = 0; i < n && i < cap; i++)
        keys[i] = list[i];
    return DCPTOPK_SUCCESS;
}
