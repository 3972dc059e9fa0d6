/* pair.c - launchers of the pair merge (pack, select) and its config -> keys
 * expansion. The kernels are pair_pack.cu and pair_select.cu (this folder);
 * their rows in base/kernels.c give the key fields. */
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "pair.h"
#include "runtime.h"

/* Dynamic shared memory of the pair select: its working area (8448 bytes,
 * ps::kSharedBytes), then the row's primary keys when W*K*4 bytes fit in
 * 128 KiB, else none (they are re-read from global memory). The template
 * derives the same rule (ps::kSmemKeys). */
static uint32_t pair_select_smem(int32_t world_size, int32_t topk)
{
    uint32_t keys = (uint32_t)world_size * (uint32_t)topk * 4u;
    return 8448u + (keys <= 131072u ? keys : 0u);
}

/* Threads per block of the pack: the registry's (base/kernels.c). */
static int32_t pair_pack_threads(void)
{
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PAIR_PACK;
    return dc_kernel_get(DCPTOPK_KERNEL_PAIR_PACK)->threads(&k);
}

static void pair_key(dcptopk_key *k, int32_t kernel,
                     const dcptopk_merge_config *c)
{
    memset(k, 0, sizeof *k);
    k->kernel = kernel;
    k->topk = c->topk;
    k->world_size = c->world_size;
    k->interleave = c->interleave;
    if (kernel == DCPTOPK_KERNEL_PAIR_SELECT) {
        k->block_size = c->block_size;
        k->emit_ids = c->emit_ids ? 1 : 0;
    }
}

dcptopk_result dc_pair_config_keys(const dcptopk_merge_config *c,
                                   const char *arch, dcptopk_key *keys,
                                   size_t cap, size_t *count)
{
    dcptopk_key list[3];
    size_t n = 0;

    pair_key(&list[n++], DCPTOPK_KERNEL_PAIR_PACK, c);
    /* Both layouts: engines gather rank-major; the row-major route is kept for
     * engines that already reorder. */
    for (int32_t layout = 0; layout < 2; layout++) {
        pair_key(&list[n], DCPTOPK_KERNEL_PAIR_SELECT, c);
        list[n++].layout = layout;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(list[i].arch, sizeof list[i].arch, "%s", arch);
    *count = n;
    for (size_t i = 0; i < n && i < cap; i++)
        keys[i] = list[i];
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_pair_select(dcptopk_context *ctx,
                                   const dcptopk_merge_config *config,
                                   const dcptopk_pair_select_args *args)
{
    dcptopk_merge_config c;
    dcptopk_result r;
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if ((r = dc_config_read(ctx, config, &c)))
        return r;
    /* (refuses ids_out and rows_out both NULL, like the reference) */
    if ((r = dc_check_pair_select_args(ctx, &c, args)))
        return r;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;

    dcptopk_key key;
    pair_key(&key, DCPTOPK_KERNEL_PAIR_SELECT, &c);
    key.layout = args->layout;

    const dcptopk_rows_map *m = &args->rows_map;
    const int32_t *candidates = args->candidates;
    long long rows = (long long)args->rows;
    long long rank_stride =
        args->layout == DCPTOPK_LAYOUT_RANK_MAJOR
            ? (long long)(args->rank_stride_rows ? args->rank_stride_rows
                                                 : args->rows) *
                  c.topk * 2
            : 0;
    int32_t rank = args->rank;
    int32_t *ids_out = args->ids_out;
    long long ids_stride =
        (long long)(args->ids_out_stride ? args->ids_out_stride : c.topk);
    const int32_t *req_id = m->req_id;
    const int32_t *block_table = m->block_table;
    long long bt_stride = (long long)m->block_table_stride;
    int32_t bt_cols = m->block_table_cols;
    int32_t num_reqs = m->num_reqs;
    int32_t stride_rows = m->stride_rows;
    int32_t *rows_out = m->rows_out;
    long long rows_stride =
        (long long)(m->rows_out_stride ? m->rows_out_stride : c.topk);
    int32_t *counts_out = m->counts_out;
    void *params[] = {&candidates, &rows,        &rank_stride, &rank,
                      &ids_out,    &ids_stride,  &req_id,      &block_table,
                      &bt_stride,  &bt_cols,     &num_reqs,    &stride_rows,
                      &rows_out,   &rows_stride, &counts_out};

    dc_launch_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    const int32_t threads = dc_pair_select_threads(&key);
    cfg.grid[0] = (uint32_t)args->rows; /* <= INT32_MAX (checked) */
    cfg.grid[1] = cfg.grid[2] = 1;
    cfg.block[0] = (uint32_t)threads;
    cfg.block[1] = cfg.block[2] = 1;
    cfg.smem_bytes = pair_select_smem(c.world_size, c.topk);
    cfg.stream = args->stream;
    return dc_launch(ctx, &key, "dcptopk_pair_select", &cfg, params);
}

dcptopk_result dcptopk_pair_pack(dcptopk_context *ctx,
                                 const dcptopk_merge_config *config,
                                 const dcptopk_pair_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_result r;
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if ((r = dc_config_read(ctx, config, &c)))
        return r;
    if ((r = dc_check_pair_pack_args(ctx, &c, args)))
        return r;
    if (args->rows == 0)
        return DCPTOPK_SUCCESS;
    const int32_t threads = pair_pack_threads();
    int64_t blocks = (args->rows * c.topk + threads - 1) / threads;
    if (blocks > INT32_MAX)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "args->rows = %lld: rows * topk = %lld slots exceed one "
                       "launch (2^31 - 1 blocks of %d)",
                       (long long)args->rows,
                       (long long)(args->rows * c.topk), threads);

    dcptopk_key key;
    pair_key(&key, DCPTOPK_KERNEL_PAIR_PACK, &c);

    const float *logits = args->logits;
    long long logits_stride = (long long)args->logits_stride;
    const int32_t *local_ids = args->local_ids;
    long long ids_stride = (long long)(args->local_ids_stride
                                           ? args->local_ids_stride
                                           : c.topk);
    const int32_t *row_starts = args->row_starts;
    const int32_t *row_ends = args->row_ends;
    long long rows = (long long)args->rows;
    int32_t rank = args->rank;
    int32_t *out = args->out;
    void *params[] = {&logits,     &logits_stride, &local_ids, &ids_stride,
                      &row_starts, &row_ends,      &rows,      &rank,
                      &out};

    dc_launch_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.grid[0] = (uint32_t)blocks;
    cfg.grid[1] = cfg.grid[2] = 1;
    cfg.block[0] = (uint32_t)threads;
    cfg.block[1] = cfg.block[2] = 1;
    cfg.stream = args->stream;
    return dc_launch(ctx, &key, "dcptopk_pair_pack", &cfg, params);
}
