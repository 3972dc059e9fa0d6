/* kernels.c - the kernel registry: for every kernel, its template file and
 * the key fields it specialises on.
 *
 * The template is named by its file name only: the renderer
 * (runtime/render.c) looks that name up among the files embedded from
 * kernels/<family>/ (or in DCPTOPK_TEMPLATE_DIR), which is why a file name
 * must be unique across kernels/<family>/ (cmake/embed.cmake refuses a
 * second one). The family folder is in no table: docs/KERNELS.md lists each
 * kernel's room. Most templates are <name>.cu, launched from
 * kernels/<family>/<family>.c with the parameters and geometry of
 * kernels/<family>/<family>_abi.h; the exceptions are "exchange" (template
 * exchange_push.cu) and "exchange_settle", both launched from
 * kernels/exchange/exchange_push.c, and "loopback", a reserved number with no
 * template. */
#include <stddef.h>

#include "base.h"

static const dc_kernel_info kernels[DCPTOPK_KERNEL_COUNT] = {
    {DCPTOPK_KERNEL_PACK_INDICES, "pack_indices", "pack_indices.cu",
     DC_F_LOCAL_TOPK},
    {DCPTOPK_KERNEL_TOPN_PACK, "topn_pack", "topn_pack.cu",
     DC_F_LOCAL_TOPK | DC_F_VARIANT},
    {DCPTOPK_KERNEL_SELECT, "select", "select.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_BLOCK_SIZE |
         DC_F_INTERLEAVE | DC_F_EMIT_IDS | DC_F_EXACT},
    {DCPTOPK_KERNEL_RESCUE, "rescue", "rescue.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_BLOCK_SIZE |
         DC_F_INTERLEAVE | DC_F_EMIT_IDS},
    {DCPTOPK_KERNEL_PAIR_PACK, "pair_pack", "pair_pack.cu",
     DC_F_TOPK | DC_F_WORLD_SIZE | DC_F_INTERLEAVE},
    {DCPTOPK_KERNEL_PAIR_SELECT, "pair_select", "pair_select.cu",
     DC_F_TOPK | DC_F_WORLD_SIZE | DC_F_BLOCK_SIZE | DC_F_INTERLEAVE |
         DC_F_EMIT_IDS | DC_F_LAYOUT | DC_F_VARIANT},
    /* Reserved: the number was a loopback all-gather kernel that never got a
     * template; kept so that no later kernel reuses it. */
    {DCPTOPK_KERNEL_LOOPBACK, "loopback", NULL, 0},
    {DCPTOPK_KERNEL_PUSH, "push", "push.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_VARIANT},
    {DCPTOPK_KERNEL_EXCHANGE, "exchange", "exchange_push.cu", DC_F_WORLD_SIZE},
    {DCPTOPK_KERNEL_EXCHANGE_SETTLE, "exchange_settle", "exchange_settle.cu",
     DC_F_WORLD_SIZE},
    {DCPTOPK_KERNEL_NODE_PAIRS, "node_pairs", "node_pairs.cu",
     DC_F_TOPK | DC_F_LOCAL_TOPK | DC_F_WORLD_SIZE | DC_F_INTERLEAVE},
};

const dc_kernel_info *dc_kernel_get(int32_t kernel)
{
    if (kernel < 0 || kernel >= DCPTOPK_KERNEL_COUNT ||
        !kernels[kernel].template_file)
        return NULL;
    return &kernels[kernel];
}

const char *dcptopk_kernel_name(int32_t kernel)
{
    const dc_kernel_info *k = dc_kernel_get(kernel);
    return k ? k->name : "unknown";
}
