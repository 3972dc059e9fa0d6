/*
 * check.h - the argument checks every kernel family shares, one function a
 * check, so the CPU reference and the GPU entry points refuse the same
 * inputs with the same result codes and messages (each family's own checks
 * are in its folder: packed.h, pair.h). `ctx` may be NULL (thread error
 * slot). A device pointer is never dereferenced.
 */
#ifndef DCPTOPK_CHECK_H
#define DCPTOPK_CHECK_H

#include <assert.h>
#include <stddef.h>

#include "base.h"

#define DC_INVALID(...) dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, __VA_ARGS__)

/* Args reach the checks read by DC_STRUCT_IN (base/structs.h), which
 * refuses a missing or mis-sized struct and fills in what an older caller
 * lacks, or are the library's own, made with their _INIT macro. */
#define DC_ARGS_READ(a) assert((a) && (a)->struct_size == sizeof *(a))

/* Config fields, each named in the message ("config->topk = 100: ..."). */
DC_HIDDEN dcptopk_result dc_check_config(const dcptopk_context *ctx,
                                         const dcptopk_merge_config *c);
/* A valid config of the one merge kind a call implements; `kind_name` is
 * the kind as the message names it ("packed", "pair"). */
DC_HIDDEN dcptopk_result dc_check_config_kind(const dcptopk_context *ctx,
                                              const dcptopk_merge_config *c,
                                              int32_t kind,
                                              const char *kind_name);
DC_HIDDEN dcptopk_result dc_check_rows_map(const dcptopk_context *ctx,
                                           const dcptopk_merge_config *c,
                                           const dcptopk_rows_map *m);

DC_HIDDEN int dc_misaligned(const void *p, size_t align);
/* A required pointer: not NULL, aligned for its element type. */
DC_HIDDEN dcptopk_result dc_check_ptr(const dcptopk_context *ctx,
                                      const char *name, const void *p,
                                      size_t align);
/* An optional pointer: aligned when given. */
DC_HIDDEN dcptopk_result dc_check_opt_ptr(const dcptopk_context *ctx,
                                          const char *name, const void *p,
                                          size_t align);
/* Rows in 0..INT32_MAX (grids index rows with 32-bit counters). */
DC_HIDDEN dcptopk_result dc_check_rows(const dcptopk_context *ctx,
                                       const char *name, int64_t rows);
/* A row stride where 0 means `width`; otherwise it must be >= width. */
DC_HIDDEN dcptopk_result dc_check_stride(const dcptopk_context *ctx,
                                         const char *name, int64_t stride,
                                         int64_t width,
                                         const char *width_name);
/* A buffer of `rows` rows `stride` elements apart (the effective stride,
 * the default already applied) spans at most 2^50 bytes. */
DC_HIDDEN dcptopk_result dc_check_extent(const dcptopk_context *ctx,
                                         const char *rows_name, int64_t rows,
                                         const char *stride_name,
                                         int64_t stride, int64_t elem_bytes);
/* args->rank in [0, world_size). */
DC_HIDDEN dcptopk_result dc_check_rank(const dcptopk_context *ctx,
                                       int32_t rank,
                                       const dcptopk_merge_config *c);
/* The rows output of a valid rows map spans at most 2^50 bytes. */
DC_HIDDEN dcptopk_result dc_check_rows_out_extent(const dcptopk_context *ctx,
                                                  const dcptopk_merge_config *c,
                                                  const dcptopk_rows_map *m,
                                                  int64_t rows);
/* Ids output: optional, only with config->emit_ids. */
DC_HIDDEN dcptopk_result dc_check_ids_out(const dcptopk_context *ctx,
                                          const dcptopk_merge_config *c,
                                          const int32_t *ids_out,
                                          int64_t ids_out_stride,
                                          int64_t rows);
/* indptr_out [T + 1]: the prefix sum of the owned rows' counts, so the
 * counts must be written, and T * K (its largest value) must fit int32. */
DC_HIDDEN dcptopk_result dc_check_indptr(const dcptopk_context *ctx,
                                         const dcptopk_merge_config *c,
                                         const int32_t *indptr,
                                         const dcptopk_rows_map *m,
                                         int64_t rows);
/* A select's outputs (packed or pair): the ids, the rows map, the rows
 * output's extent and the CSR offsets. */
DC_HIDDEN dcptopk_result dc_check_select_outputs(const dcptopk_context *ctx,
                                                 const dcptopk_merge_config *c,
                                                 const int32_t *ids_out,
                                                 int64_t ids_out_stride,
                                                 const dcptopk_rows_map *m,
                                                 const int32_t *indptr,
                                                 int64_t rows);

/* The rows map's pointers, as entries of a dc_named_ptr list (runtime.h):
 * the GPU entry points check them with dc_check_device_ptrs. */
#define DC_ROWS_MAP_PTRS(m)                                                    \
    {"args->rows_map.req_id", (m).req_id},                                     \
        {"args->rows_map.block_table", (m).block_table},                       \
        {"args->rows_map.rows_out", (m).rows_out},                             \
        {"args->rows_map.counts_out", (m).counts_out}

#endif /* DCPTOPK_CHECK_H */
