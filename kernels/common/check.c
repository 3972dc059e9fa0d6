/* check.c - argument validation shared by the CPU reference and the GPU entry
 * points (see check.h). Every message names the argument and its value. No
 * check dereferences a data pointer: for the GPU calls they are device
 * addresses. Checks of pointers are NULL and alignment checks only. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "topn.h"

#define DC_MAX_LOCAL_LEN (1 << DCPTOPK_LOCAL_INDEX_BITS)
#define DC_MAX_BLOCK_SIZE (1 << 20)
#define DC_MAX_INTERLEAVE (1 << 17)
/* Grids index rows with 32-bit counters. */
#define DC_MAX_ROWS INT32_MAX
/* Largest span of a strided buffer: launchers and kernels compute t * stride
 * in int64 (t < 2^31, strides up to 2^40), which this keeps exact. No device
 * addresses more. */
#define DC_MAX_EXTENT_LOG2 50

#define DC_INVALID(...) dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, __VA_ARGS__)

/* Args reach the checks read by DC_STRUCT_IN (base/structs.h), which
 * refuses a missing or mis-sized struct and fills in what an older caller
 * lacks, or are the library's own, made with their _INIT macro. */
#define DC_ARGS_READ(a) assert((a) && (a)->struct_size == sizeof *(a))

static int misaligned(const void *p, size_t align)
{
    return ((uintptr_t)p % align) != 0;
}

/* A required pointer: not NULL, aligned for its element type. */
static dcptopk_result check_ptr(const dcptopk_context *ctx, const char *name,
                                const void *p, size_t align)
{
    if (!p)
        return DC_INVALID("%s is NULL", name);
    if (misaligned(p, align))
        return DC_INVALID("%s = %p: must be %zu-byte aligned", name, p, align);
    return DCPTOPK_SUCCESS;
}

/* An optional pointer: aligned when given. */
static dcptopk_result check_opt_ptr(const dcptopk_context *ctx,
                                    const char *name, const void *p,
                                    size_t align)
{
    if (p && misaligned(p, align))
        return DC_INVALID("%s = %p: must be %zu-byte aligned", name, p, align);
    return DCPTOPK_SUCCESS;
}

static dcptopk_result check_rows(const dcptopk_context *ctx, const char *name,
                                 int64_t rows)
{
    if (rows < 0 || rows > DC_MAX_ROWS)
        return DC_INVALID("%s = %lld: must be in 0..%d", name, (long long)rows,
                          DC_MAX_ROWS);
    return DCPTOPK_SUCCESS;
}

/* A row stride where 0 means `width`; otherwise it must be >= width. */
static dcptopk_result check_stride(const dcptopk_context *ctx,
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
static dcptopk_result check_extent(const dcptopk_context *ctx,
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

/* The local top-N (dcptopk_pack, and the push of the exact select) takes at
 * least dc_topn_min_ctas_per_row CTAs per row: a row past 65536 columns is
 * split over 2. The grid holds at most 2^31 - 1 CTAs; refused here so that
 * the exact select never fails after its select was launched. */
static dcptopk_result check_topn_grid(const dcptopk_context *ctx, int64_t rows,
                                      int64_t max_local_len)
{
    const int32_t per_row = dc_topn_min_ctas_per_row(max_local_len);
    if (rows > INT32_MAX / per_row)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "args->rows = %lld: with args->max_local_len = %lld "
                       "the local top-N takes %d CTAs per row; %lld CTAs "
                       "exceed the grid limit (2^31 - 1)",
                       (long long)rows, (long long)max_local_len, per_row,
                       (long long)(rows * per_row));
    return DCPTOPK_SUCCESS;
}

static dcptopk_result check_rank(const dcptopk_context *ctx, int32_t rank,
                                 const dcptopk_merge_config *c)
{
    if (rank < 0 || rank >= c->world_size)
        return DC_INVALID("args->rank = %d: must be in [0, world_size = %d)",
                          rank, c->world_size);
    return DCPTOPK_SUCCESS;
}

/* bf16 logits [>= T, logits_stride] of which the first max_local_len columns
 * are read: rows 16-byte aligned for vector loads, the bound within a row and
 * below 2^17 (local ids of the packed format). */
static dcptopk_result check_bf16_logits(const dcptopk_context *ctx,
                                        const uint16_t *logits,
                                        int64_t logits_stride,
                                        int64_t max_local_len,
                                        const int32_t *row_ends, int64_t rows)
{
    dcptopk_result r;
    if (max_local_len < 0 || max_local_len > DC_MAX_LOCAL_LEN)
        return DC_INVALID("args->max_local_len = %lld: must be in 0..%d (2^17 "
                          "local ids)",
                          (long long)max_local_len, DC_MAX_LOCAL_LEN);
    if (logits_stride <= 0 || logits_stride % 8)
        return DC_INVALID("args->logits_stride = %lld: must be a positive "
                          "multiple of 8 (16-byte rows)",
                          (long long)logits_stride);
    if (logits_stride > (INT64_C(1) << 40))
        return DC_INVALID("args->logits_stride = %lld: unreasonably large (> "
                          "2^40)",
                          (long long)logits_stride);
    if (logits_stride < max_local_len)
        return DC_INVALID("args->logits_stride = %lld: must be >= "
                          "args->max_local_len = %lld",
                          (long long)logits_stride, (long long)max_local_len);
    if ((r = check_extent(ctx, "args->rows", rows, "args->logits_stride",
                          logits_stride, 2)))
        return r;
    if (rows > 0) {
        if ((r = check_ptr(ctx, "args->logits", logits, 16)))
            return r;
        if ((r = check_ptr(ctx, "args->row_ends", row_ends, 4)))
            return r;
    }
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
static dcptopk_result check_config_kind(const dcptopk_context *ctx,
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

dcptopk_result dc_check_packed_config(const dcptopk_context *ctx,
                                      const dcptopk_merge_config *c)
{
    return check_config_kind(ctx, c, DCPTOPK_MERGE_PACKED, "packed");
}

dcptopk_result dc_check_pair_config(const dcptopk_context *ctx,
                                    const dcptopk_merge_config *c)
{
    return check_config_kind(ctx, c, DCPTOPK_MERGE_PAIR, "pair");
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
    if ((r = check_ptr(ctx, "args->rows_map.rows_out", m->rows_out, 4)))
        return r;
    if ((r = check_stride(ctx, "args->rows_map.rows_out_stride",
                          m->rows_out_stride, c->topk, "topk")))
        return r;
    if ((r = check_ptr(ctx, "args->rows_map.counts_out", m->counts_out, 4)))
        return r;
    if ((r = check_ptr(ctx, "args->rows_map.req_id", m->req_id, 4)))
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
    if ((r = check_extent(ctx, "args->rows_map.num_reqs", m->num_reqs,
                          "args->rows_map.block_table_stride",
                          m->block_table_stride, 4)))
        return r;
    if (m->num_reqs > 0 && m->block_table_cols > 0 &&
        (r = check_ptr(ctx, "args->rows_map.block_table", m->block_table, 4)))
        return r;
    if (m->stride_rows < 0)
        return DC_INVALID("args->rows_map.stride_rows = %d: must be >= 0",
                          m->stride_rows);
    return DCPTOPK_SUCCESS;
}

/* The rows output of a valid rows map spans at most 2^50 bytes. */
static dcptopk_result check_rows_out_extent(const dcptopk_context *ctx,
                                            const dcptopk_merge_config *c,
                                            const dcptopk_rows_map *m,
                                            int64_t rows)
{
    if (!m->rows_out)
        return DCPTOPK_SUCCESS;
    return check_extent(ctx, "args->rows", rows,
                        "args->rows_map.rows_out_stride",
                        m->rows_out_stride ? m->rows_out_stride : c->topk, 4);
}

/* Ids output: optional, only with config->emit_ids. */
static dcptopk_result check_ids_out(const dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    const int32_t *ids_out,
                                    int64_t ids_out_stride, int64_t rows)
{
    dcptopk_result r;
    if (!ids_out)
        return DCPTOPK_SUCCESS;
    if (!c->emit_ids)
        return DC_INVALID("args->ids_out is set but config->emit_ids = 0");
    if ((r = check_opt_ptr(ctx, "args->ids_out", ids_out, 4)))
        return r;
    if ((r = check_stride(ctx, "args->ids_out_stride", ids_out_stride,
                          c->topk, "topk")))
        return r;
    return check_extent(ctx, "args->rows", rows, "args->ids_out_stride",
                        ids_out_stride ? ids_out_stride : c->topk, 4);
}

/* ----------------------------------------------------- packed merge args */

dcptopk_result dc_check_pack_args(const dcptopk_context *ctx,
                                  const dcptopk_merge_config *c,
                                  const dcptopk_pack_args *a, int indices)
{
    dcptopk_result r;
    if ((r = dc_check_packed_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if ((r = check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((r = check_bf16_logits(ctx, a->logits, a->logits_stride,
                               a->max_local_len, a->row_ends, a->rows)))
        return r;
    if (indices) {
        if (a->rows > 0 &&
            (r = check_ptr(ctx, "args->local_ids", a->local_ids, 4)))
            return r;
        if ((r = check_stride(ctx, "args->local_ids_stride",
                              a->local_ids_stride, c->local_topk,
                              "local_topk")))
            return r;
        if ((r = check_extent(ctx, "args->rows", a->rows,
                              "args->local_ids_stride",
                              a->local_ids_stride ? a->local_ids_stride
                                                  : c->local_topk,
                              4)))
            return r;
    } else if (a->local_ids) {
        return DC_INVALID("args->local_ids = %p: must be NULL for the fused "
                          "local top-N (use pack_indices to pack given ids)",
                          (const void *)a->local_ids);
    } else if ((r = check_topn_grid(ctx, a->rows, a->max_local_len))) {
        return r;
    }
    if (a->rows > 0 && (r = check_ptr(ctx, "args->out", a->out, 4)))
        return r;
    return DCPTOPK_SUCCESS;
}

/* indptr_out [T + 1]: the prefix sum of the owned rows' counts, so the
 * counts must be written, and T * K (its largest value) must fit int32. */
static dcptopk_result check_indptr(const dcptopk_context *ctx,
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
    if (misaligned(indptr, 4))
        return DC_INVALID("args->indptr_out = %p: must be 4-byte aligned",
                          (const void *)indptr);
    if (rows > INT32_MAX / c->topk)
        return DC_INVALID("args->rows = %lld: args->indptr_out is int32 and "
                          "rows * topk (%d) must stay below 2^31",
                          (long long)rows, c->topk);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_select_args(const dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    const dcptopk_select_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_packed_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if ((r = check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((r = check_stride(ctx, "args->rank_stride_rows", a->rank_stride_rows,
                          a->rows, "rows")))
        return r;
    if ((r = check_rank(ctx, a->rank, c)))
        return r;
    if (a->rows > 0 && (r = check_ptr(ctx, "args->gathered", a->gathered, 4)))
        return r;
    if ((r = check_ids_out(ctx, c, a->ids_out, a->ids_out_stride,
                             a->rows)))
        return r;
    if ((r = dc_check_rows_map(ctx, c, &a->rows_map)) ||
        (r = check_rows_out_extent(ctx, c, &a->rows_map, a->rows)) ||
        (r = check_indptr(ctx, c, a->indptr_out, &a->rows_map, a->rows)))
        return r;
    /* Exact mode: a saturated rank re-reads its own row for the push. */
    if (c->exact &&
        ((r = check_bf16_logits(ctx, a->logits, a->logits_stride,
                                a->max_local_len, a->row_ends, a->rows)) ||
         (r = check_topn_grid(ctx, a->rows, a->max_local_len))))
        return r;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_node_pairs_args(const dcptopk_context *ctx,
                                        const dcptopk_merge_config *c,
                                        const dcptopk_node_pairs_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_packed_config(ctx, c)))
        return r;
    if (!c->exact)
        return DC_INVALID("node_config->exact = 0: the node's top K is exact "
                          "only after the rescue (exact = 1)");
    DC_ARGS_READ(a);
    if ((r = check_rows(ctx, "args->rows", a->rows)) ||
        (r = check_stride(ctx, "args->rank_stride_rows", a->rank_stride_rows,
                          a->rows, "rows")) ||
        (r = check_stride(ctx, "args->ids_stride", a->ids_stride, c->topk,
                          "topk")))
        return r;
    if (a->sorted != 0 && a->sorted != 1)
        return DC_INVALID("args->sorted = %d: must be 0 or 1", a->sorted);
    if (a->world_size < c->world_size ||
        a->world_size > DCPTOPK_MAX_WORLD_SIZE ||
        a->world_size % c->world_size)
        return DC_INVALID("args->world_size = %d: must be a multiple of "
                          "node_config->world_size = %d, at most %d",
                          a->world_size, c->world_size, DCPTOPK_MAX_WORLD_SIZE);
    if (a->first_rank < 0 || a->first_rank % c->world_size ||
        a->first_rank + c->world_size > a->world_size)
        return DC_INVALID("args->first_rank = %d: must be a multiple of the "
                          "node size %d below args->world_size = %d",
                          a->first_rank, c->world_size, a->world_size);
    if (a->rows > 0 &&
        ((r = check_ptr(ctx, "args->gathered", a->gathered, 4)) ||
         (r = check_ptr(ctx, "args->ids", a->ids, 4)) ||
         (r = check_ptr(ctx, "args->pairs_out", a->pairs_out, 8))))
        return r;
    return check_extent(ctx, "args->rows", a->rows, "args->ids_stride",
                        a->ids_stride ? a->ids_stride : c->topk, 4);
}

/* The two configs of the hierarchical merge of `c` over `nodes` nodes: the
 * node's exact packed merge (world_size W / nodes) and the second stage's
 * pair merge (world_size W, K candidates a node). */
dcptopk_result dc_hier_configs(const dcptopk_merge_config *c, int32_t nodes,
                               dcptopk_merge_config *node,
                               dcptopk_merge_config *pair)
{
    if (c->kind != DCPTOPK_MERGE_PACKED || !c->exact)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config: the hierarchical merge is of an exact packed "
                       "config (kind %d, exact %d)",
                       c->kind, c->exact);
    if (nodes < 2 || nodes > c->world_size || c->world_size % nodes)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "nodes = %d: must divide config->world_size = %d, at "
                       "least 2 (nodes of equal size)",
                       nodes, c->world_size);
    *node = *c;
    node->world_size = c->world_size / nodes;
    *pair = *c;
    pair->kind = DCPTOPK_MERGE_PAIR;
    pair->local_topk = c->topk;
    pair->exact = 0;
    dcptopk_result r = dc_check_config(NULL, node);
    if (!r)
        r = dc_check_config(NULL, pair);
    return r;
}

/* ------------------------------------------------------- pair merge args */

dcptopk_result dc_check_pair_select_args(const dcptopk_context *ctx,
                                         const dcptopk_merge_config *c,
                                         const dcptopk_pair_select_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_pair_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if (a->layout < DCPTOPK_LAYOUT_RANK_MAJOR ||
        a->layout > DCPTOPK_LAYOUT_ROW_MAJOR_FLOAT_IDS)
        return DC_INVALID("args->layout = %d: must be 0 (rank-major), 1 "
                          "(row-major), 2 or 3 (the same with float ids)",
                          a->layout);
    if ((r = check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((a->layout & 1) == 0) { /* rank-major */
        if ((r = check_stride(ctx, "args->rank_stride_rows",
                              a->rank_stride_rows, a->rows, "rows")))
            return r;
    } else if (a->rank_stride_rows != 0) {
        return DC_INVALID("args->rank_stride_rows = %lld: must be 0 with the "
                          "row-major layout",
                          (long long)a->rank_stride_rows);
    }
    if ((r = check_rank(ctx, a->rank, c)))
        return r;
    if (a->rows > 0 &&
        (r = check_ptr(ctx, "args->candidates", a->candidates, 8)))
        return r;
    if ((r = check_ids_out(ctx, c, a->ids_out, a->ids_out_stride,
                             a->rows)))
        return r;
    if ((r = dc_check_rows_map(ctx, c, &a->rows_map)) ||
        (r = check_rows_out_extent(ctx, c, &a->rows_map, a->rows)) ||
        (r = check_indptr(ctx, c, a->indptr_out, &a->rows_map, a->rows)))
        return r;
    if (!a->ids_out && !a->rows_map.rows_out)
        return DC_INVALID("args->ids_out and args->rows_map.rows_out are both "
                          "NULL: the select would output nothing (emit_ids = "
                          "%d, block_size = %d)",
                          c->emit_ids, c->block_size);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_pair_pack_args(const dcptopk_context *ctx,
                                       const dcptopk_merge_config *c,
                                       const dcptopk_pair_pack_args *a)
{
    dcptopk_result r;
    if ((r = dc_check_pair_config(ctx, c)))
        return r;
    DC_ARGS_READ(a);
    if ((r = check_rows(ctx, "args->rows", a->rows)))
        return r;
    if ((r = check_rank(ctx, a->rank, c)))
        return r;
    if (a->logits_stride < 1 || a->logits_stride > (INT64_C(1) << 40))
        return DC_INVALID("args->logits_stride = %lld: must be in 1..2^40",
                          (long long)a->logits_stride);
    if ((r = check_stride(ctx, "args->local_ids_stride", a->local_ids_stride,
                          c->topk, "topk")))
        return r;
    if ((r = check_extent(ctx, "args->rows", a->rows, "args->logits_stride",
                          a->logits_stride, 4)) ||
        (r = check_extent(ctx, "args->rows", a->rows,
                          "args->local_ids_stride",
                          a->local_ids_stride ? a->local_ids_stride : c->topk,
                          4)))
        return r;
    if (a->rows > 0) {
        if ((r = check_ptr(ctx, "args->logits", a->logits, 4)))
            return r;
        if ((r = check_ptr(ctx, "args->local_ids", a->local_ids, 4)))
            return r;
        if ((r = check_ptr(ctx, "args->out", a->out, 8)))
            return r;
    }
    if ((r = check_opt_ptr(ctx, "args->row_starts", a->row_starts, 4)))
        return r;
    return check_opt_ptr(ctx, "args->row_ends", a->row_ends, 4);
}
