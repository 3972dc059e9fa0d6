/* pair.c - launchers of the pair merge (pack, select) and its config -> keys
 * expansion. The kernels are pair_pack.cu and pair_select.cu (this folder);
 * their rows in base/kernels.c give the key fields, pair_abi.h their
 * parameters and launch geometry. */
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "pair.h"
#include "pair_abi.h"
#include "runtime.h"
#include "settings.h"
#include "structs.h"

static void pair_key(dcptopk_key *k, int32_t kernel,
                     const dcptopk_merge_config *c, const char *arch)
{
    dc_key_init(k, kernel, arch);
    k->topk = c->topk;
    k->world_size = c->world_size;
    k->interleave = c->interleave;
    if (kernel == DCPTOPK_KERNEL_PAIR_SELECT) {
        k->block_size = c->block_size;
        k->emit_ids = c->emit_ids ? 1 : 0;
    }
}

/* log2 of the most CTAs a row of `cands` candidates may split over: up to
 * DC_PAIR_CLUSTER_MAX while every CTA keeps DC_PAIR_CLUSTER_MIN_CANDS
 * candidates; 0 for rows past DC_PAIR_CLUSTER_MAX_ROW. */
static int32_t pair_split_log2(int64_t cands)
{
    int32_t v = 0;
    if (cands > DC_PAIR_CLUSTER_MAX_ROW)
        return 0;
    while ((2 << v) <= DC_PAIR_CLUSTER_MAX &&
           cands / (2 << v) >= DC_PAIR_CLUSTER_MIN_CANDS)
        v++;
    return v;
}

/* The select's key for `nodes` segments (0 or world_size: the flat merge),
 * `layout`, rows split over 2^split CTAs and `two` (a row of 16384's
 * two-CTA shape): what warmup loads and what a launch looks up. */
static void select_key(dcptopk_key *k, const dcptopk_merge_config *c,
                       int32_t nodes, int32_t layout, int32_t split,
                       int32_t two, const char *arch)
{
    pair_key(k, DCPTOPK_KERNEL_PAIR_SELECT, c, arch);
    k->layout = layout;
    k->variant =
        DC_PAIR_VARIANT(nodes == c->world_size ? 0 : nodes, split, two);
}

int32_t dc_pair_row_shapes(const dcptopk_context *ctx)
{
    if (ctx && ctx->pair_shapes)
        return ctx->pair_shapes;
    const int64_t forced = dc_setting_int(DC_SET_PAIR_TWO_CTAS);
    if (forced >= 0)
        return forced ? DC_PAIR_SHAPE_TWO : DC_PAIR_SHAPE_ONE;
    const dc_device_speed s = dc_ctx_speed(ctx);
    if (!s.sms)
        return DC_PAIR_SHAPE_ONE | DC_PAIR_SHAPE_TWO;
    return DC_PAIR_TWO_CTAS_PAY(s.mem_khz, s.bus_bits, s.sms, s.sm_khz)
               ? DC_PAIR_SHAPE_TWO
               : DC_PAIR_SHAPE_ONE;
}

/* The entry points run one CTA a row at every row count: the split lost to
 * it at both T = 64 and T = 6710 (docs/TUNING.md, "Pair select"), so it
 * runs only where dc_pair_select_split asks for it, and warmup loads only
 * the one-CTA keys: one, or for a row of 16384 one a shape of `shapes`. */
void dc_pair_select_nodes_key(dc_key_list *l, const dcptopk_merge_config *c,
                              int32_t nodes, int32_t layout, int32_t shapes,
                              const char *arch)
{
    const int64_t cands = (int64_t)(nodes ? nodes : c->world_size) * c->topk;
    if (cands != DC_PAIR_TWO_CTAS_ROW) {
        select_key(dc_key_next(l), c, nodes, layout, 0, 0, arch);
        return;
    }
    if (shapes & DC_PAIR_SHAPE_ONE)
        select_key(dc_key_next(l), c, nodes, layout, 0, 0, arch);
    if (shapes & DC_PAIR_SHAPE_TWO)
        select_key(dc_key_next(l), c, nodes, layout, 0, 1, arch);
}

void dc_pair_keys(const dcptopk_merge_config *c, const char *arch,
                  int32_t shapes, dc_key_list *l)
{
    pair_key(dc_key_next(l), DCPTOPK_KERNEL_PAIR_PACK, c, arch);
    /* Every layout: engines gather rank-major; the row-major route is kept
     * for engines that already reorder; the float-id ones read vLLM's pair
     * candidates in place. Which one a step uses is the caller's argument,
     * so warmup loads them all. */
    for (int32_t layout = 0; layout < 4; layout++)
        dc_pair_select_nodes_key(l, c, 0, layout, shapes, arch);
}

int32_t dcptopk_pair_gid(int32_t layout, int32_t id_word)
{
    if (!(layout & 2))
        return id_word < 0 ? -1 : id_word;
    float f;
    memcpy(&f, &id_word, sizeof f);
    /* The comparison is false for NaN. */
    return f >= 0.0f && f < 2147483648.0f ? (int32_t)f : -1;
}

dcptopk_result dc_pair_select_split(dcptopk_context *ctx,
                                    const dcptopk_merge_config *config,
                                    int32_t nodes, int32_t split,
                                    const dcptopk_pair_select_args *args)
{
    dcptopk_merge_config c;
    dcptopk_result r;
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    if ((r = dc_config_read(ctx, config, &c)) ||
        (r = DC_STRUCT_IN(ctx, "args", args, &a, PAIR_SELECT_ARGS)))
        return r;
    args = &a;
    /* (refuses ids_out and rows_out both NULL, like the reference) */
    if ((r = dc_check_pair_select_args(ctx, &c, args)))
        return r;
    const int32_t segments = nodes ? nodes : c.world_size;
    if (segments < 1 || segments > c.world_size || c.world_size % segments)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "nodes = %d: must divide config->world_size = %d "
                       "(one segment of K candidates a node)",
                       nodes, c.world_size);
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    const dc_named_ptr ptrs[] = {{"args->candidates", args->candidates},
                                 {"args->ids_out", args->ids_out},
                                 {"args->indptr_out", args->indptr_out},
                                 DC_ROWS_MAP_PTRS(args->rows_map)};
    if ((r = dc_check_device_ptrs(ctx, ptrs, sizeof ptrs / sizeof ptrs[0])))
        return r;

    const int64_t cands = (int64_t)segments * c.topk;
    if (split < 0)
        split = 0;
    else if (split > pair_split_log2(cands))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "split = %d: a row of %lld candidates splits over at "
                       "most 2^%d CTAs",
                       split, (long long)cands, pair_split_log2(cands));
    const uint32_t ctas = 1u << split;
    if (args->rows * ctas > 0x7FFFFFFFll)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "args->rows = %lld: %lld CTAs exceed the grid limit",
                       (long long)args->rows, (long long)(args->rows * ctas));
    /* A context with a device has exactly one shape for rows of 16384. */
    const int32_t two = split == 0 && cands == DC_PAIR_TWO_CTAS_ROW &&
                        dc_pair_row_shapes(ctx) == DC_PAIR_SHAPE_TWO;
    dcptopk_key key;
    select_key(&key, &c, segments, args->layout, split, two, ctx->arch);

    dc_pair_select_args k = dc_pair_kernel_args(&c, args);

    dc_launch_cfg cfg = {
        .grid = {(uint32_t)(args->rows * ctas), 1, 1}, /* checked above */
        .block = {(uint32_t)DC_PAIR_SELECT_THREADS(segments, c.topk, ctas, two),
                  1, 1},
        .smem_bytes = (uint32_t)DC_PAIR_SELECT_SMEM_BYTES(
            segments, c.topk, ctas, dc_arch_number(ctx->arch), two),
        .cluster_x = ctas,
        .stream = args->stream,
        .pdl = 1};
    dc_abi_argv argv = dc_pair_select_args_argv(&k);
    if ((r = dc_launch(ctx, &key, "dcptopk_pair_select", &cfg, argv.p)) ||
        !args->indptr_out)
        return r;
    /* The owned rows' CSR offsets: dcptopk_indptr of the same module
     * (kernel_abi.h), one CTA, a dependent launch of the select. */
    dc_indptr_args ik = {
        .counts = k.counts_out,
        .rows = args->rows,
        .indptr = args->indptr_out,
    };
    dc_launch_cfg icfg = {.grid = {1, 1, 1},
                          .block = {DC_INDPTR_THREADS, 1, 1},
                          .stream = args->stream,
                          .pdl = 1};
    dc_abi_argv iargv = dc_indptr_args_argv(&ik);
    return dc_launch(ctx, &key, "dcptopk_indptr", &icfg, iargv.p);
}

dc_pair_select_args dc_pair_kernel_args(const dcptopk_merge_config *c,
                                        const dcptopk_pair_select_args *args)
{
    const dcptopk_rows_map *m = &args->rows_map;
    dc_pair_select_args k = {
        .candidates = args->candidates,
        .rows = args->rows,
        .rank_stride =
            (args->layout & 1) == 0 /* rank-major */
                ? (args->rank_stride_rows ? args->rank_stride_rows : args->rows) *
                      c->topk * 2
                : 0,
        .rank = args->rank,
        .ids_out = args->ids_out,
        .ids_stride = args->ids_out_stride ? args->ids_out_stride : c->topk,
        .req_id = m->req_id,
        .block_table = m->block_table,
        .bt_stride = m->block_table_stride,
        .bt_cols = m->block_table_cols,
        .num_reqs = m->num_reqs,
        .stride_rows = m->stride_rows,
        .rows_out = m->rows_out,
        .rows_stride = m->rows_out_stride ? m->rows_out_stride : c->topk,
        .counts_out = m->counts_out,
    };
    return k;
}

dcptopk_result dcptopk_pair_select(dcptopk_context *ctx,
                                   const dcptopk_merge_config *config,
                                   const dcptopk_pair_select_args *args)
{
    return dc_pair_select_split(ctx, config, 0, -1, args);
}

dcptopk_result dcptopk_pair_select_nodes(dcptopk_context *ctx,
                                         const dcptopk_merge_config *config,
                                         int32_t nodes,
                                         const dcptopk_pair_select_args *args)
{
    if (nodes < 1)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "nodes = %d: must be at least 1 and divide "
                       "config->world_size",
                       nodes);
    return dc_pair_select_split(ctx, config, nodes, -1, args);
}


dcptopk_result dcptopk_pair_pack(dcptopk_context *ctx,
                                 const dcptopk_merge_config *config,
                                 const dcptopk_pair_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_result r;
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    dcptopk_pair_pack_args a = DCPTOPK_PAIR_PACK_ARGS_INIT;
    if ((r = dc_config_read(ctx, config, &c)) ||
        (r = DC_STRUCT_IN(ctx, "args", args, &a, PAIR_PACK_ARGS)) ||
        (r = dc_check_pair_pack_args(ctx, &c, &a)))
        return r;
    args = &a;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    const dc_named_ptr ptrs[] = {{"args->logits", args->logits},
                                 {"args->local_ids", args->local_ids},
                                 {"args->row_starts", args->row_starts},
                                 {"args->row_ends", args->row_ends},
                                 {"args->out", args->out}};
    if ((r = dc_check_device_ptrs(ctx, ptrs, sizeof ptrs / sizeof ptrs[0])))
        return r;
    const int32_t threads = DC_PAIR_PACK_THREADS;
    int64_t blocks = (args->rows * c.topk + threads - 1) / threads;
    if (blocks > INT32_MAX)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "args->rows = %lld: rows * topk = %lld slots exceed one "
                       "launch (2^31 - 1 blocks of %d)",
                       (long long)args->rows,
                       (long long)(args->rows * c.topk), threads);

    dcptopk_key key;
    pair_key(&key, DCPTOPK_KERNEL_PAIR_PACK, &c, NULL);

    /* The kernel reads the scores as their fp32 bit patterns. */
    dc_pair_pack_args k = {
        .logits = (const uint32_t *)(const void *)args->logits,
        .logits_stride = args->logits_stride,
        .local_ids = args->local_ids,
        .ids_stride = args->local_ids_stride ? args->local_ids_stride : c.topk,
        .row_starts = args->row_starts,
        .row_ends = args->row_ends,
        .rows = args->rows,
        .rank = args->rank,
        .out = args->out,
    };

    dc_launch_cfg cfg = {.grid = {(uint32_t)blocks, 1, 1},
                         .block = {(uint32_t)threads, 1, 1},
                         .stream = args->stream,
                         .pdl = 1};
    dc_abi_argv argv = dc_pair_pack_args_argv(&k);
    return dc_launch(ctx, &key, "dcptopk_pair_pack", &cfg, argv.p);
}
