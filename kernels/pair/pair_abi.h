/*
 * pair_abi.h - the pair merge's kernels as both sides see them: the launcher
 * (pair.c) and the templates (pair_pack.cu, pair_select.cu). C11 and NVRTC
 * (kernel_abi.h says how the parameter lists work).
 */
#ifndef DCPTOPK_PAIR_ABI_H
#define DCPTOPK_PAIR_ABI_H

#include "kernel_abi.h"

/* ---------------------------------------------------------------- pair_pack */

/* One thread a slot over the flattened [T, K] slots. */
#define DC_PAIR_PACK_THREADS 256

#define DC_PAIR_PACK_PARAMS(X)                                                 \
    X(const uint32_t *DC_RESTRICT, logits)                                     \
    X(long long, logits_stride)                                                \
    X(const int32_t *DC_RESTRICT, local_ids)                                   \
    X(long long, ids_stride)                                                   \
    X(const int32_t *DC_RESTRICT, row_starts)                                  \
    X(const int32_t *DC_RESTRICT, row_ends)                                    \
    X(long long, rows)                                                         \
    X(int32_t, rank)                                                           \
    X(int32_t *DC_RESTRICT, out)
DC_ABI_ARGS(dc_pair_pack_args, DC_PAIR_PACK_PARAMS)

/* -------------------------------------------------------------- pair_select */

/* Segments of K candidates a row of the select: W, or the pair_select key's
 * variant when it is not 0 (the node count of the hierarchical merge). */
#define DC_PAIR_SEGMENTS(w, variant) ((variant) > 0 ? (variant) : (w))

/* Threads of the select for W * K candidates: about 16 candidates a thread,
 * whole warps, 32..512 (one CTA of 1024 threads was slower at W*K = 16384:
 * a thread's emit items stay <= 16, which the template asserts). */
#define DC_PAIR_SELECT_THREADS(w, k)                                           \
    ((long long)(w) * (k) / 16 <= 32                                           \
         ? 32                                                                  \
         : (((long long)(w) * (k) / 16 + 31) / 32 * 32 > 512                   \
                ? 512                                                          \
                : (int)(((long long)(w) * (k) / 16 + 31) / 32 * 32)))

/* Dynamic shared memory: the working area (the template's Shared, reserved
 * at DC_PAIR_SELECT_SHARED_BYTES), then the row's primary keys when W * K * 4
 * bytes fit DC_PAIR_SELECT_KEY_BYTES_MAX, else none (the template re-reads
 * them from global memory). */
#define DC_PAIR_SELECT_SHARED_BYTES 8448
#define DC_PAIR_SELECT_KEY_BYTES_MAX 131072
#define DC_PAIR_SELECT_SMEM_KEYS(w, k) ((long long)(w) * (k) * 4 <= DC_PAIR_SELECT_KEY_BYTES_MAX)
#define DC_PAIR_SELECT_SMEM_BYTES(w, k)                                        \
    (DC_PAIR_SELECT_SHARED_BYTES + (DC_PAIR_SELECT_SMEM_KEYS(w, k) ? (w) * (k) * 4 : 0))

#define DC_PAIR_SELECT_PARAMS(X)                                               \
    X(const int32_t *DC_RESTRICT, candidates)                                  \
    X(long long, rows)                                                         \
    X(long long, rank_stride)                                                  \
    X(int32_t, rank)                                                           \
    X(int32_t *DC_RESTRICT, ids_out)                                           \
    X(long long, ids_stride)                                                   \
    X(const int32_t *DC_RESTRICT, req_id)                                      \
    X(const int32_t *DC_RESTRICT, block_table)                                 \
    X(long long, bt_stride)                                                    \
    X(int32_t, bt_cols)                                                        \
    X(int32_t, num_reqs)                                                       \
    X(int32_t, stride_rows)                                                    \
    X(int32_t *DC_RESTRICT, rows_out)                                          \
    X(long long, rows_stride)                                                  \
    X(int32_t *DC_RESTRICT, counts_out)
DC_ABI_ARGS(dc_pair_select_args, DC_PAIR_SELECT_PARAMS)

#endif /* DCPTOPK_PAIR_ABI_H */
