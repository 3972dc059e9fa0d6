/* check.c - the argument checks every kernel family shares (see check.h):
 * pointers, rows, strides, extents, the config, the rows map and the ids
 * output. Each family's own checks are in its folder (packed_check.c,
 * pair_check.c). Every message names the argument and its value. No check
 * dereferences a data pointer: for the GPU calls they are device addresses.
 * Checks of pointers are NULL and alignment checks only. */
#include <stddef.h>
#include <stdint.h>

#include "check.h"

#define DC_MAX_BLOCK_SIZE (1 << 20)
#define DC_MAX_INTERLEAVE (1 << 17)
/* Grids index rows with 32-bit counters. */
#define DC_MAX_ROWS INT32_MAX
/* Largest span of a strided buffer: launchers and kernels compute t * stride
 * in int64 (t < 2^31, strides up to 2^40), which this keeps exact. No device
 * addresses more. */
#define DC_MAX_EXTENT_LOG2 50

int dc_misaligned(const void *p, size_t align)
{
    return ((uintptr_t)p % align) != 0;
}

/* A required pointer: not NULL, aligned for its element type. */
dcptopk_result dc_check_ptr(const dcptopk_context *ctx, const char *name,
                            const void *p, size_t align)
{
    if (!p)
        return DC_INVALID("%s is NULL", name);
    if (dc_misaligned(p, align))
        return DC_INVALID("%s = %p: must be %zu-byte aligned", name, p, align);
    return DCPTOPK_SUCCESS;
}

/* An optional pointer: aligned when given. */
dcptopk_result dc_check_opt_ptr(const dcptopk_context *ctx,
                                const char *name, const void *p,
                                size_t align)
{
    if (p && dc_misaligned(p, align))
        return DC_INVALID("%s = %p: must be %zu-byte aligned", name, p, align);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_rows(const dcptopk_context *ctx, const char *name,
                             int64_t rows)
{
    if (rows < 0 || rows > DC_MAX_ROWS)
        return DC_INVALID("%s = %lld: must be in 0..%d", name, (long long)rows,
                          DC_MAX_ROWS);
    return DCPTOPK_SUCCESS;
}

/* A row stride where 0 means `width`; otherwise it must be >= width. */
dcptopk_result dc_check_stride(const dcptopk_context *ctx,
                               const char *name, int64_t stride,
                               int64_t width, const char *width_name)
{
    if (stride != 0 && stride < width)
        return DC_INVALID("%s = %lld: must be 0 (= %s = %lld) or >= %s = %lld",
                          name, (long long)stride, width_name,
                          (long long)width, width_name, (long long)width);
    if (stride > (INT64_C(1) << 40))
        return DC_INVALID("%s = %lld: unreasonably large (> 2^40)", name,
                          (long long)stride);
    return DCPTOPK_SUCCESS;
}

/* A buffer of `rows` rows `stride` elements apart (the effective stride, the
 * default already applied) spans at most 2^50 bytes. */
dcptopk_result dc_check_extent(const dcptopk_context *ctx,
                               const char *rows_name, int64_t rows,
                               const char *stride_name, int64_t stride,
                               int64_t elem_bytes)
{
    const int64_t max = INT64_C(1) << DC_MAX_EXTENT_LOG2;
    if (rows > 0 && stride > 0 && rows > max / (elem_bytes * stride))
        return DC_INVALID("%s = %lld with %s = %lld: the buffer would span "
                          "more than 2^%d bytes (%lld-byte elements)",
                          rows_name, (long long)rows, stride_name,
                          (long long)stride, DC_MAX_EXTENT_LOG2,
                          (long long)elem_bytes);
    return DCPTOPK_SUCCESS;
}


dcptopk_result dc_check_rank(const dcptopk_context *ctx, int32_t rank,
                             const dcptopk_merge_config *c)
{
    if (rank < 0 || rank >= c->world_size)
        return DC_INVALID("args->rank = %d: must be in [0, world_size = %d)",
                          rank, c->world_size);
    return DCPTOPK_SUCCESS;
}


/* ------------------------------------------------------------- configs */

dcptopk_result dc_check_config(const dcptopk_context *ctx,
                               const dcptopk_merge_config *c)
{
    if (!c)
        return DC_INVALID("config is NULL");
    if (c->kind != DCPTOPK_MERGE_PACKED && c->kind != DCPTOPK_MERGE_PAIR)
        return DC_INVALID("config->kind = %d: must be 0 (packed) or 1 (pair)",
                          c->kind);
    if (c->topk < 32 || c->topk > DCPTOPK_MAX_TOPK || c->topk % 32)
        return DC_INVALID("config->topk = %d: must be a multiple of 32 in "
                          "32..%d",
                          c->topk, DCPTOPK_MAX_TOPK);
    if (c->world_size < 1 || c->world_size > DCPTOPK_MAX_WORLD_SIZE)
        return DC_INVALID("config->world_size = %d: must be in 1..%d",
                          c->world_size, DCPTOPK_MAX_WORLD_SIZE);
    if (c->kind == DCPTOPK_MERGE_PACKED) {
        if (c->local_topk < 32 || c->local_topk % 32)
            return DC_INVALID("config->local_topk = %d: must be a multiple of "
                              "32, at least 32",
                              c->local_topk);
        if (c->local_topk >= c->topk)
            return DC_INVALID("config->local_topk = %d: must be below topk = "
                              "%d for the packed merge",
                              c->local_topk, c->topk);
    } else if (c->local_topk != 0 && c->local_topk != c->topk) {
        return DC_INVALID("config->local_topk = %d: must equal topk = %d (or "
                          "be 0) for the pair merge",
                          c->local_topk, c->topk);
    }
    if (c->block_size < 0 || c->block_size > DC_MAX_BLOCK_SIZE)
        return DC_INVALID("config->block_size = %d: must be in 0..%d (0 = no "
                          "physical rows)",
                          c->block_size, DC_MAX_BLOCK_SIZE);
    if (c->interleave < 1 || c->interleave > DC_MAX_INTERLEAVE)
        return DC_INVALID("config->interleave = %d: must be in 1..%d",
                          c->interleave, DC_MAX_INTERLEAVE);
    /* A power of two divides 2^17, which keeps every packed-merge gid below
     * 2^17 * W, i.e. within gid_bits(W). */
    if (c->kind == DCPTOPK_MERGE_PACKED && (c->interleave & (c->interleave - 1)))
        return DC_INVALID("config->interleave = %d: must be a power of two for "
                          "the packed merge",
                          c->interleave);
    if (c->emit_ids != 0 && c->emit_ids != 1)
        return DC_INVALID("config->emit_ids = %d: must be 0 or 1", c->emit_ids);
    if (c->exact != 0 && c->exact != 1)
        return DC_INVALID("config->exact = %d: must be 0 or 1", c->exact);
    if (!c->emit_ids && c->block_size == 0)
        return DC_INVALID("config->emit_ids = 0 with config->block_size = 0: "
                          "the merge would output nothing (set emit_ids or a "
                          "block_size)");
    return DCPTOPK_SUCCESS;
}

/* A valid config of the one merge kind a call implements; `kind_name` is the
 * kind as the message names it ("packed", "pair"). */
dcptopk_result dc_check_config_kind(const dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    int32_t kind, const char *kind_name)
{
    dcptopk_result r = dc_check_config(ctx, c);
    if (r)
        return r;
    if (c->kind != kind)
        return DC_INVALID("config->kind = %d: this call needs the %s merge "
                          "(%d)",
                          c->kind, kind_name, kind);
    return DCPTOPK_SUCCESS;
}



/* ------------------------------------------------------------ rows map */

dcptopk_result dc_check_rows_map(const dcptopk_context *ctx,
                                 const dcptopk_merge_config *c,
                                 const dcptopk_rows_map *m)
{
    dcptopk_result r;
    if (!m->rows_out) {
        if (m->counts_out)
            return DC_INVALID("args->rows_map.counts_out is set but "
                              "args->rows_map.rows_out is NULL");
        return DCPTOPK_SUCCESS; /* no physical rows requested */
    }
    if (c->block_size <= 0)
        return DC_INVALID("args->rows_map.rows_out is set but "
                          "config->block_size = %d: physical rows need "
                          "block_size > 0",
                          c->block_size);
    if ((r = dc_check_ptr(ctx, "args->rows_map.rows_out", m->rows_out, 4)))
        return r;
    if ((r = dc_check_stride(ctx, "args->rows_map.rows_out_stride",
                             m->rows_out_stride, c->topk, "topk")))
        return r;
    if ((r = dc_check_ptr(ctx, "args->rows_map.counts_out", m->counts_out, 4)))
        return r;
    if ((r = dc_check_ptr(ctx, "args->rows_map.req_id", m->req_id, 4)))
        return r;
    if (m->num_reqs < 0)
        return DC_INVALID("args->rows_map.num_reqs = %d: must be >= 0",
                          m->num_reqs);
    if (m->block_table_cols < 0)
        return DC_INVALID("args->rows_map.block_table_cols = %d: must be >= 0",
                          m->block_table_cols);
    if (m->block_table_stride < m->block_table_cols)
        return DC_INVALID("args->rows_map.block_table_stride = %lld: must be "
                          ">= block_table_cols = %d",
                          (long long)m->block_table_stride, m->block_table_cols);
    if (m->block_table_stride > (INT64_C(1) << 40))
        return DC_INVALID("args->rows_map.block_table_stride = %lld: "
                          "unreasonably large (> 2^40)",
                          (long long)m->block_table_stride);
    if ((r = dc_check_extent(ctx, "args->rows_map.num_reqs", m->num_reqs,
                             "args->rows_map.block_table_stride",
                             m->block_table_stride, 4)))
        return r;
    if (m->num_reqs > 0 && m->block_table_cols > 0 &&
        (r = dc_check_ptr(ctx, "args->rows_map.block_table", m->block_table,
                          4)))
        return r;
    if (m->stride_rows < 0)
        return DC_INVALID("args->rows_map.stride_rows = %d: must be >= 0",
                          m->stride_rows);
    return DCPTOPK_SUCCESS;
}

/* The rows output of a valid rows map spans at most 2^50 bytes. */
dcptopk_result dc_check_rows_out_extent(const dcptopk_context *ctx,
                                        const dcptopk_merge_config *c,
                                        const dcptopk_rows_map *m,
                                        int64_t rows)
{
    if (!m->rows_out)
        return DCPTOPK_SUCCESS;
    return dc_check_extent(ctx, "args->rows", rows,
                           "args->rows_map.rows_out_stride",
                           m->rows_out_stride ? m->rows_out_stride : c->topk,
                           4);
}

/* Ids output: optional, only with config->emit_ids. */
dcptopk_result dc_check_ids_out(const dcptopk_context *ctx,
                                const dcptopk_merge_config *c,
                                const int32_t *ids_out,
                                int64_t ids_out_stride, int64_t rows)
{
    dcptopk_result r;
    if (!ids_out)
        return DCPTOPK_SUCCESS;
    if (!c->emit_ids)
        return DC_INVALID("args->ids_out is set but config->emit_ids = 0");
    if ((r = dc_check_opt_ptr(ctx, "args->ids_out", ids_out, 4)))
        return r;
    if ((r = dc_check_stride(ctx, "args->ids_out_stride", ids_out_stride,
                             c->topk, "topk")))
        return r;
    return dc_check_extent(ctx, "args->rows", rows, "args->ids_out_stride",
                           ids_out_stride ? ids_out_stride : c->topk, 4);
}


/* indptr_out [T + 1]: the prefix sum of the owned rows' counts, so the
 * counts must be written, and T * K (its largest value) must fit int32. */
dcptopk_result dc_check_indptr(const dcptopk_context *ctx,
                               const dcptopk_merge_config *c,
                               const int32_t *indptr,
                               const dcptopk_rows_map *m, int64_t rows)
{
    if (!indptr)
        return DCPTOPK_SUCCESS;
    if (!m->rows_out)
        return DC_INVALID("args->indptr_out = %p without args->rows_map."
                          "rows_out: the offsets are those of the owned rows",
                          (const void *)indptr);
    if (dc_misaligned(indptr, 4))
        return DC_INVALID("args->indptr_out = %p: must be 4-byte aligned",
                          (const void *)indptr);
    if (rows > INT32_MAX / c->topk)
        return DC_INVALID("args->rows = %lld: args->indptr_out is int32 and "
                          "rows * topk (%d) must stay below 2^31",
                          (long long)rows, c->topk);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_select_outputs(const dcptopk_context *ctx,
                                       const dcptopk_merge_config *c,
                                       const int32_t *ids_out,
                                       int64_t ids_out_stride,
                                       const dcptopk_rows_map *m,
                                       const int32_t *indptr, int64_t rows)
{
    dcptopk_result r;
    if ((r = dc_check_ids_out(ctx, c, ids_out, ids_out_stride, rows)) ||
        (r = dc_check_rows_map(ctx, c, m)) ||
        (r = dc_check_rows_out_extent(ctx, c, m, rows)) ||
        (r = dc_check_indptr(ctx, c, indptr, m, rows)))
        return r;
    return DCPTOPK_SUCCESS;
}
