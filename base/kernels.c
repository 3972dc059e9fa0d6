/* kernels.c - the kernel registry: for every kernel, its template, the key
 * fields it specialises on and its threads per block. A reader finds a
 * kernel's template (kernels/<family>/<name>.cu), its key fields (here) and
 * its launcher (kernels/<family>/<family>.c) by name alone. */
#include <stddef.h>

#include "base.h"

static int32_t threads_256(const dcptopk_key *key) { (void)key; return 256; }
static int32_t threads_512(const dcptopk_key *key) { (void)key; return 512; }
static int32_t threads_1024(const dcptopk_key *key) { (void)key; return 1024; }

/* kernels/packed/select.cu: rows of at most DC_SELECT_SMALL_KEYS = 4096 keys
 * (W * N) take its small-row path, which runs 256 threads. */
static int32_t threads_select(const dcptopk_key *key)
{
    return (int64_t)key->world_size * key->local_topk <= 4096 ? 256 : 512;
}

/* kernels/pair/pair_select.cu: about 16 candidates a thread, whole warps, at
 * most 512 (a CTA of 1024 threads was measured slower at W*K = 16384). */
int32_t dc_pair_select_threads(const dcptopk_key *key)
{
    int64_t cands = (int64_t)key->world_size * key->topk;
    int64_t t = (cands / 16 + 31) / 32 * 32;
    if (t < 32)
        t = 32;
    if (t > 512)
        t = 512;
    return (int32_t)t;
}

static const dc_kernel_info kernels[DCPTOPK_KERNEL_COUNT] = {
    {DCPTOPK_KERNEL_PACK_INDICES, "pack_indices", "pack_indices.cu",
     DC_F_LOCAL_TOPK, threads_256},
    {DCPTOPK_KERNEL_TOPN_PACK, "topn_pack", "topn_pack.cu",
     DC_F_LOCAL_TOPK | DC_F_VARIANT, threads_512},
    {DCPTOPK_KERNEL_SELECT, "select", "select.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_BLOCK_SIZE |
         DC_F_INTERLEAVE | DC_F_EMIT_IDS | DC_F_EXACT,
     threads_select},
    {DCPTOPK_KERNEL_RESCUE, "rescue", "rescue.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_BLOCK_SIZE |
         DC_F_INTERLEAVE | DC_F_EMIT_IDS,
     threads_512},
    {DCPTOPK_KERNEL_PAIR_PACK, "pair_pack", "pair_pack.cu",
     DC_F_TOPK | DC_F_WORLD_SIZE | DC_F_INTERLEAVE, threads_256},
    {DCPTOPK_KERNEL_PAIR_SELECT, "pair_select", "pair_select.cu",
     DC_F_TOPK | DC_F_WORLD_SIZE | DC_F_BLOCK_SIZE | DC_F_INTERLEAVE |
         DC_F_EMIT_IDS | DC_F_LAYOUT,
     dc_pair_select_threads},
    {DCPTOPK_KERNEL_LOOPBACK, "loopback", "loopback.cu",
     DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE, threads_256},
    {DCPTOPK_KERNEL_PUSH, "push", "push.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_VARIANT, threads_1024},
};

const dc_kernel_info *dc_kernel_get(int32_t kernel)
{
    if (kernel < 0 || kernel >= DCPTOPK_KERNEL_COUNT)
        return NULL;
    return &kernels[kernel];
}

const char *dcptopk_kernel_name(int32_t kernel)
{
    const dc_kernel_info *k = dc_kernel_get(kernel);
    return k ? k->name : "unknown";
}
