/* topn.c - launchers of the fused local top-N + pack (kernels/topn/topn_pack.cu)
 * and of the push of round 2 (kernels/topn/push.cu), and their compile keys.
 *
 * Both kernels share the selection of kernels/topn/topn_select.cuh: a row is
 * split over C = 2^variant CTAs (a thread-block cluster when C > 1), each
 * keeping its columns in shared memory. C is chosen here from the number of
 * rows, the row length and the SM count: large enough that a CTA's columns
 * fit its shared memory (DC_TOPN_CHUNK_MAX keys), and, when rows are few
 * (decode), large enough to cover the GPU. Nothing here syncs or allocates,
 * so the launches can be captured in a CUDA graph. The geometry both sides
 * share is in topn_abi.h. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"
#include "topn.h"
#include "topn_abi.h"

/* Smallest chunk worth a further split for parallelism (below it, a CTA's
 * fixed latencies outweigh its shorter row; see topn_plan_make). A launcher
 * policy: the template takes any chunk up to DC_TOPN_CHUNK_MAX. */
#define DC_TOPN_CHUNK_MIN 32768


typedef struct topn_plan {
    int32_t variant;  /* log2 of the CTAs per row                          */
    int32_t chunk;    /* columns per CTA, multiple of 8                    */
} topn_plan;


/* Columns of each of the 2^v CTAs of a row of `cols` (a multiple of 8). */
static int64_t topn_chunk(int64_t cols, int32_t v)
{
    const int64_t c = (cols + (1 << v) - 1) / (1 << v);
    return (c + 7) / 8 * 8;
}

/* Whether 2^v CTAs hold a row of `cols`: the template's bound, and the
 * device's opt-in shared memory a block (smem_optin; 0 = not known, the
 * template's bound alone) with the push's static bytes. A cluster's state
 * grows with its size, so on a device of about 100 KiB a block no split
 * holds 2^17 columns. */
static int topn_fits(int64_t cols, int32_t v, int32_t smem_optin)
{
    const int64_t chunk = topn_chunk(cols, v);
    return chunk <= DC_TOPN_CHUNK_MAX &&
           (smem_optin <= 0 ||
            DC_TOPN_SMEM_BYTES(1ll << v, chunk) + DC_PUSH_STATIC_BYTES <=
                (long long)smem_optin);
}

int32_t dc_topn_capacity_variant(int64_t max_local_len, int32_t smem_optin)
{
    const int64_t cols = DC_TOPN_COLS(max_local_len);
    for (int32_t v = 0; v <= DC_TOPN_MAX_VARIANT; v++)
        if (topn_fits(cols, v, smem_optin))
            return v;
    return -1;
}

dcptopk_result dc_topn_unfit(const dcptopk_context *ctx, int64_t max_local_len,
                             int32_t smem_optin)
{
    return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                   "args->max_local_len = %lld: the local top-N keeps a row's "
                   "%lld columns in shared memory, on 1 to %d CTAs, and no "
                   "split fits this device's %d bytes a block",
                   (long long)max_local_len,
                   (long long)DC_TOPN_COLS(max_local_len),
                   1 << DC_TOPN_MAX_VARIANT, smem_optin);
}

/* variant -1 when no cluster size holds the row (dc_topn_capacity_variant). */
static topn_plan topn_plan_make(int64_t rows, int64_t max_local_len,
                                int32_t sm_count, int32_t smem_optin,
                                int32_t forced)
{
    const int64_t s = DC_TOPN_COLS(max_local_len);
    topn_plan p = {-1, 0};
    /* Capacity: a CTA's columns must fit its shared memory. */
    int32_t v = dc_topn_capacity_variant(max_local_len, smem_optin);
    if (v < 0)
        return p;
    /* Parallelism: with few rows, split further while the grid stays within
     * one CTA per SM and the chunks stay long (at 64 rows of 131072 columns,
     * 2 CTAs a row beat 4; at 8 rows, 4 beat 2 and 8). */
    if (sm_count <= 0)
        sm_count = 132;
    if (forced >= 0) {
        if (forced > v)
            v = forced > DC_TOPN_MAX_VARIANT ? DC_TOPN_MAX_VARIANT : forced;
    } else {
        while (v < DC_TOPN_MAX_VARIANT &&
               rows * ((int64_t)2 << v) <= (int64_t)sm_count &&
               (s + (2 << v) - 1) / (2 << v) >= DC_TOPN_CHUNK_MIN &&
               topn_fits(s, v + 1, smem_optin))
            v++;
    }
    p.variant = v;
    p.chunk = (int32_t)topn_chunk(s, v);
    return p;
}

int32_t dc_topn_variant(int64_t rows, int64_t max_local_len, int32_t sm_count,
                        int32_t smem_optin)
{
    return topn_plan_make(rows, max_local_len, sm_count, smem_optin, -1).variant;
}

dcptopk_result dc_topn_pack_launch(dcptopk_context *ctx,
                                   const dcptopk_merge_config *c,
                                   const dcptopk_pack_args *a)
{
    return dc_topn_pack_launch_variant(ctx, c, a, -1);
}

/* The plan of one launch of the pack or the push (both share the selection
 * and its shared-memory layout): sets key->variant and the launch shape;
 * refuses a grid past the limit, naming `rows_name`. */
static dcptopk_result topn_launch_cfg(dcptopk_context *ctx,
                                      const char *rows_name, int64_t rows,
                                      int64_t max_local_len, int32_t variant,
                                      void *stream, dcptopk_key *key,
                                      dc_launch_cfg *cfg, int *chunk)
{
    const int32_t optin = dc_ctx_smem_optin(ctx);
    const topn_plan p = topn_plan_make(rows, max_local_len, dc_ctx_sm_count(ctx),
                                       optin, variant);
    if (p.variant < 0)
        return dc_topn_unfit(ctx, max_local_len, optin);
    const int64_t ctas = rows << p.variant;
    if (ctas > 0x7FFFFFFFll)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "%s = %lld: %lld CTAs exceed the grid limit", rows_name,
                       (long long)rows, (long long)ctas);
    key->variant = p.variant;
    *cfg = (dc_launch_cfg){
        .grid = {(uint32_t)ctas, 1, 1},
        .block = {key->kernel == DCPTOPK_KERNEL_PUSH ? DC_PUSH_THREADS
                                                     : DC_TOPN_PACK_THREADS,
                  1, 1},
        .smem_bytes = (uint32_t)DC_TOPN_SMEM_BYTES(1 << p.variant, p.chunk),
        .cluster_x = 1u << p.variant,
        .stream = stream};
    *chunk = p.chunk;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_topn_pack_launch_variant(dcptopk_context *ctx,
                                           const dcptopk_merge_config *c,
                                           const dcptopk_pack_args *a,
                                           int32_t variant)
{
    if (a->rows == 0)
        return DCPTOPK_SUCCESS;
    dcptopk_key key;
    dc_key_init(&key, DCPTOPK_KERNEL_TOPN_PACK, NULL);
    key.local_topk = c->local_topk;
    dc_launch_cfg cfg;
    int chunk;
    dcptopk_result r =
        topn_launch_cfg(ctx, "args->rows", a->rows, a->max_local_len, variant,
                        a->stream, &key, &cfg, &chunk);
    if (r)
        return r;

    dc_topn_pack_args k = {
        .logits = a->logits,
        .logits_stride = a->logits_stride,
        .max_local_len = a->max_local_len,
        .row_ends = a->row_ends,
        .rows = a->rows,
        .chunk = chunk,
        .out = a->out,
    };
    /* Its launch may overlap the end of the kernel before it (topn_pack.cu
     * waits for that kernel first): decode rows are short enough that the
     * gap between two launches shows. */
    cfg.pdl = 1;
    dc_abi_argv argv = dc_topn_pack_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_topn_pack", &cfg, argv.p);
}

dcptopk_result dc_push_launch(dcptopk_context *ctx,
                              const dcptopk_merge_config *c,
                              const dc_push_args *a)
{
    return dc_push_launch_variant(ctx, c, a, -1);
}

dcptopk_result dc_push_launch_variant(dcptopk_context *ctx,
                                      const dcptopk_merge_config *c,
                                      const dc_push_args *a, int32_t variant)
{
    if (a->rows == 0)
        return DCPTOPK_SUCCESS;
    if (a->rank < 0 || a->rank >= c->world_size)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rank = %d: must be in [0, world_size = %d)", a->rank,
                       c->world_size);
    dcptopk_key key;
    dc_key_init(&key, DCPTOPK_KERNEL_PUSH, NULL);
    key.topk = c->topk;
    key.local_topk = c->local_topk;
    key.world_size = c->world_size;
    dc_launch_cfg cfg;
    int chunk;
    dcptopk_result r = topn_launch_cfg(ctx, "rows", a->rows, a->max_local_len,
                                       variant, a->stream, &key, &cfg, &chunk);
    if (r)
        return r;

    dc_push_kernel_args k = {
        .logits = a->logits,
        .logits_stride = a->logits_stride,
        .max_local_len = a->max_local_len,
        .row_ends = a->row_ends,
        .rows = a->rows,
        .rank = a->rank,
        .sat = a->sat,
        .seq = a->seq,
        .peer_recv = a->peer_recv,
        .peer_flags = a->peer_flags,
        .max_rows = a->max_rows,
        .chunk = chunk,
    };
    /* Groups loop over the rows (push.cu): as many as are resident at once
     * (two CTAs of DC_PUSH_THREADS an SM), never more than the rows. */
    const int64_t sms = dc_ctx_sm_count(ctx) > 0 ? dc_ctx_sm_count(ctx) : 1;
    const int64_t groups_max = 2 * sms / (int64_t)cfg.cluster_x;
    const int64_t groups = a->rows < groups_max ? a->rows
                                                : (groups_max > 0 ? groups_max : 1);
    cfg.grid[0] = (uint32_t)(groups * (int64_t)cfg.cluster_x);
    /* It follows the select, whose CTAs trigger it at their start: its
     * launch overlaps the select's last wave (push.cu waits first). */
    cfg.pdl = 1;
    dc_abi_argv argv = dc_push_kernel_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_push", &cfg, argv.p);
}

void dc_topn_keys(const dcptopk_merge_config *c, const char *arch,
                  dc_key_list *l)
{
    /* Every variant: which one a call takes depends on its rows and columns. */
    for (int32_t v = 0; v <= DC_TOPN_MAX_VARIANT; v++) {
        dcptopk_key *k = dc_key_next(l);
        dc_key_init(k, DCPTOPK_KERNEL_TOPN_PACK, arch);
        k->local_topk = c->local_topk;
        k->variant = v;
    }
    if (!c->exact)
        return;
    for (int32_t v = 0; v <= DC_TOPN_MAX_VARIANT; v++) {
        dcptopk_key *k = dc_key_next(l);
        dc_key_init(k, DCPTOPK_KERNEL_PUSH, arch);
        k->topk = c->topk;
        k->local_topk = c->local_topk;
        k->world_size = c->world_size;
        k->variant = v;
    }
}
