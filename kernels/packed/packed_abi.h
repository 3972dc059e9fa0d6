/*
 * packed_abi.h - the packed merge's kernels as both sides see them: the
 * launcher (packed.c) and the templates (pack_indices.cu, select.cu,
 * rescue.cu, select_core.cuh). C11 and NVRTC (kernel_abi.h says how the
 * parameter lists work). Every number a launcher and a template must agree
 * on is here: parameters, threads per block, the small-row threshold, CTAs
 * per SM and the dynamic shared memory they imply.
 */
#ifndef DCPTOPK_PACKED_ABI_H
#define DCPTOPK_PACKED_ABI_H

#include "kernel_abi.h"

/* ------------------------------------------------------------ pack_indices */

/* One thread a slot, one warp per 32 slots (the plane word is a ballot). */
#define DC_PACK_INDICES_THREADS 256

#define DC_PACK_INDICES_PARAMS(X)                                              \
    X(const uint16_t *DC_RESTRICT, logits)                                     \
    X(long long, logits_stride)                                                \
    X(long long, max_local_len)                                                \
    X(const int32_t *DC_RESTRICT, row_ends)                                    \
    X(const int32_t *DC_RESTRICT, local_ids)                                   \
    X(long long, ids_stride)                                                   \
    X(long long, rows)                                                         \
    X(int32_t *DC_RESTRICT, out)
DC_ABI_ARGS(dc_pack_indices_args, DC_PACK_INDICES_PARAMS)

/* ------------------------------------------------------- select and rescue */

/* Owned physical rows of a row's selected keys (docs/CONTRACT.md, "Owned
 * rows"): passed by value inside dc_select_out. rows_out NULL: none. */
typedef struct dc_rows_param {
    const int32_t *req_id;
    const int32_t *block_table;
    long long block_table_stride;
    int32_t block_table_cols;
    int32_t num_reqs;
    int32_t stride_rows;
    int32_t pad_;
    int32_t *rows_out;
    long long rows_out_stride;
    int32_t *counts_out;
} dc_rows_param;

/* The outputs of the select and the rescue: ids [T, ids_stride] (NULL:
 * none) and/or the owned rows of rank `rank`. */
typedef struct dc_select_out {
    int32_t *ids;
    long long ids_stride;
    dc_rows_param rm;
    int32_t rank;
    int32_t pad_;
} dc_select_out;

/* Rows of at most this many keys (W * N) take the select's small-row path:
 * DC_SELECT_SMALL_THREADS threads, DC_SELECT_SMALL_CTAS CTAs resident per SM
 * (its launch bounds), one CTA a row and one row buffer of dynamic shared
 * memory. Larger rows run DC_SELECT_THREADS threads and the 64-bit radix
 * select of select_core.cuh (one radix bin a thread). */
#define DC_SELECT_SMALL_KEYS 4096
#define DC_SELECT_SMALL_THREADS 256
#define DC_SELECT_SMALL_CTAS 6
#define DC_SELECT_THREADS 512
#define DC_SELECT_IS_SMALL(w, n) ((w) * (n) <= DC_SELECT_SMALL_KEYS)
#define DC_SELECT_THREADS_FOR(w, n)                                            \
    (DC_SELECT_IS_SMALL(w, n) ? DC_SELECT_SMALL_THREADS : DC_SELECT_THREADS)

/* Bytes of one row of W packed rows of n candidates. */
#define DC_SELECT_ROW_BYTES(w, n) (4 * (w) * DC_PACKED_ROW_WORDS(n))

/* Keys a thread keeps in registers at most (select_core.cuh); past it they
 * are decoded again at every pass. */
#define DC_SELECT_REG_MAX 32

/* The larger rows' prefetching path: keys in registers and a row that fits
 * DC_SELECT_PREFETCH_ROW_BYTES. Then the grid is persistent, at most
 * DC_SELECT_PREFETCH_CTAS CTAs an SM (its launch bounds), each with two row
 * buffers of dynamic shared memory; otherwise one CTA a row re-reads keys. */
#define DC_SELECT_PREFETCH_ROW_BYTES 32768
#define DC_SELECT_PREFETCH_CTAS 3
#define DC_SELECT_PREFETCH(kpt, row_bytes)                                     \
    ((kpt) <= DC_SELECT_REG_MAX && (row_bytes) <= DC_SELECT_PREFETCH_ROW_BYTES)

#define DC_SELECT_PARAMS(X)                                                    \
    X(const int32_t *DC_RESTRICT, gathered)                                    \
    X(long long, rank_stride_rows)                                             \
    X(long long, rows)                                                         \
    X(dc_select_out, o)                                                        \
    X(uint32_t *DC_RESTRICT, sat)
DC_ABI_ARGS(dc_select_args, DC_SELECT_PARAMS)

/* The rescue: a persistent grid of as many CTAs an SM as fit (the launcher
 * asks the driver). A row's packed words, at most DC_RESCUE_KEYS_MAX of
 * them, sit in dynamic shared memory (4 bytes a slot) when they fit
 * DC_RESCUE_SMEM_KEYS; else the keys are kept in registers or, for very
 * large rows, decoded again from global memory at every pass. */
#define DC_RESCUE_THREADS 512
#define DC_RESCUE_NSAT_MAX(k, n, w)                                            \
    (DC_RESCUE_SLOTS(k, n) < (w) ? DC_RESCUE_SLOTS(k, n) : (w))
#define DC_RESCUE_KEYS_MAX(k, n, w)                                            \
    ((w) * (n) + DC_RESCUE_NSAT_MAX(k, n, w) * ((k) - (n)))
/* Every thread has the same number of key slots. */
#define DC_RESCUE_KEY_SLOTS(k, n, w)                                           \
    ((DC_RESCUE_KEYS_MAX(k, n, w) + DC_RESCUE_THREADS - 1) /                   \
     DC_RESCUE_THREADS * DC_RESCUE_THREADS)
#define DC_RESCUE_SMEM_KEYS 12288
#define DC_RESCUE_SMEM_BYTES(k, n, w)                                          \
    (DC_RESCUE_KEY_SLOTS(k, n, w) <= DC_RESCUE_SMEM_KEYS                       \
         ? (unsigned)DC_RESCUE_KEY_SLOTS(k, n, w) * 4u                         \
         : 0u)

/* The status word's code of a timed-out wait: DCPTOPK_RESCUE_TIMEOUT. */
#define DC_RESCUE_STATUS_TIMEOUT 10u

#define DC_RESCUE_PARAMS(X)                                                    \
    X(const int32_t *DC_RESTRICT, gathered)                                    \
    X(long long, rank_stride_rows)                                             \
    X(long long, rows)                                                         \
    X(dc_select_out, o)                                                        \
    X(const uint32_t *DC_RESTRICT, sat)                                        \
    X(uint32_t *DC_RESTRICT, seq)                                              \
    X(const int32_t *, recv)                                                   \
    X(const uint32_t *, flags)                                                 \
    X(long long, max_rows)                                                     \
    X(uint32_t *, status)                                                      \
    X(unsigned long long, timeout_ns)
DC_ABI_ARGS(dc_rescue_args, DC_RESCUE_PARAMS)

/* -------------------------------------------------------------- node_pairs */

/* The hierarchical merge's hand-over (node_pairs.cu): one warp per 32
 * output slots of a row. */
#define DC_NODE_PAIRS_THREADS 256

#define DC_NODE_PAIRS_PARAMS(X)                                                \
    X(const int32_t *DC_RESTRICT, gathered)                                    \
    X(long long, rank_stride_rows)                                             \
    X(long long, rows)                                                         \
    X(const int32_t *DC_RESTRICT, ids)                                         \
    X(long long, ids_stride)                                                   \
    X(const uint32_t *DC_RESTRICT, sat)                                        \
    X(const int32_t *DC_RESTRICT, recv)                                        \
    X(int32_t, sorted)                                                         \
    X(int32_t, first_rank)                                                     \
    X(int32_t, world)                                                          \
    X(int32_t *DC_RESTRICT, pairs)
DC_ABI_ARGS(dc_node_pairs_args, DC_NODE_PAIRS_PARAMS)

#endif /* DCPTOPK_PACKED_ABI_H */
