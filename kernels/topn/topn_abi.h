/*
 * topn_abi.h - the fused local top-N + pack (topn_pack.cu) and the push of
 * round 2 (push.cu) as both sides see them: the launcher (topn.c) and the
 * templates, which share the selection of topn_select.cuh. C11 and NVRTC
 * (kernel_abi.h says how the parameter lists work).
 *
 * A row is split over C = 2^variant CTAs (a thread-block cluster when C >
 * 1); each keeps `chunk` columns (a multiple of 8) in dynamic shared memory
 * after the selection's state: DC_TOPN_SMEM_BYTES(C, chunk) in all.
 */
#ifndef DCPTOPK_TOPN_ABI_H
#define DCPTOPK_TOPN_ABI_H

#include "kernel_abi.h"

#define DC_TOPN_PACK_THREADS 512
#define DC_PUSH_THREADS 1024
/* The push's static shared memory (its row list and warp counts), on top of
 * the dynamic bytes that it and topn_pack share: the plan (topn.c) counts it
 * for both, as one plan serves both kernels of an exact call. */
#define DC_PUSH_STATIC_BYTES (DC_PUSH_THREADS * 4 + DC_PUSH_THREADS / 32 * 4)

/* Most columns one CTA keeps in shared memory (2 bytes each); the template
 * relies on it (at most 8192 8-key vectors: 32 flag bits a thread). */
#define DC_TOPN_CHUNK_MAX 65536
/* log2 of the largest cluster: 8 CTAs, the portable maximum. */
#define DC_TOPN_MAX_VARIANT 3

/* The columns a row of max_local_len keeps: at most 2^17, the local ids a
 * packed word can name (the capacity rule built on it, with the device's
 * shared memory, is dc_topn_capacity_variant in topn.c). */
#define DC_TOPN_COLS(len)                                                      \
    ((len) < 0 ? 0 : (len) > (1ll << 17) ? (1ll << 17) : (long long)(len))

/* Bytes of the selection's state (TopnShared) at the start of the dynamic
 * shared memory; the keys follow, 128-byte aligned. One CTA a row: one
 * histogram; a cluster of c: two, plus the two histograms and the overflow
 * count that each of the c - 1 peers pushes. */
#define DC_TOPN_STATE_BYTES(c)                                                 \
    ((c) > 1 ? (17536 + ((c) - 1) * 16384 + 32 + ((c) - 1) * 4 + 127) / 128 * 128 \
             : 9344)

/* Dynamic shared memory of a launch: the state, the keys (2 bytes a column)
 * and the list of candidate 8-key vectors (2 bytes a vector). */
#define DC_TOPN_SMEM_BYTES(c, chunk) (DC_TOPN_STATE_BYTES(c) + (chunk) * 2 + (chunk) / 4)

#define DC_TOPN_PACK_PARAMS(X)                                                 \
    X(const uint16_t *DC_RESTRICT, logits)                                     \
    X(long long, logits_stride)                                                \
    X(long long, max_local_len)                                                \
    X(const int32_t *DC_RESTRICT, row_ends)                                    \
    X(long long, rows)                                                         \
    X(int, chunk)                                                              \
    X(int32_t *DC_RESTRICT, out)
DC_ABI_ARGS(dc_topn_pack_args, DC_TOPN_PACK_PARAMS)

#define DC_PUSH_PARAMS(X)                                                      \
    X(const uint16_t *DC_RESTRICT, logits)                                     \
    X(long long, logits_stride)                                                \
    X(long long, max_local_len)                                                \
    X(const int32_t *DC_RESTRICT, row_ends)                                    \
    X(long long, rows)                                                         \
    X(int, rank)                                                               \
    X(const uint32_t *DC_RESTRICT, sat)                                        \
    X(const uint32_t *DC_RESTRICT, seq)                                        \
    X(const uint64_t *DC_RESTRICT, peer_recv)                                  \
    X(const uint64_t *DC_RESTRICT, peer_flags)                                 \
    X(long long, max_rows)                                                     \
    X(int, chunk)
DC_ABI_ARGS(dc_push_kernel_args, DC_PUSH_PARAMS)

#endif /* DCPTOPK_TOPN_ABI_H */
