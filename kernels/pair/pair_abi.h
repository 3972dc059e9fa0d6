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

/* The select key's variant packs three choices: bits 0-4 the segments of K
 * candidates a row (0 = W, the flat merge; else the node count of the
 * hierarchical merge), bits 5-6 log2 of the CTAs a row (a thread-block
 * cluster when more than one), bit 7 the shape of a one-CTA row of exactly
 * 16384 candidates (DC_PAIR_TWO_CTAS below; set nowhere else). base/config.c
 * checks the same fields. */
#define DC_PAIR_VARIANT(nodes, log2_cluster, two)                              \
    ((nodes) | ((log2_cluster) << 5) | ((two) << 7))
#define DC_PAIR_SEGMENTS(w, variant) (((variant) & 31) > 0 ? ((variant) & 31) : (w))
#define DC_PAIR_CLUSTER(variant) (1 << (((variant) >> 5) & 3))
#define DC_PAIR_TWO_CTAS(variant) (((variant) >> 7) & 1)
/* Largest row split: 4 CTAs. A split row keeps at least this many
 * candidates a CTA, and at most 32768 a row (the cluster's histograms pack
 * two 16-bit counts a bin). */
#define DC_PAIR_CLUSTER_MAX 4
#define DC_PAIR_CLUSTER_MIN_CANDS 2048
#define DC_PAIR_CLUSTER_MAX_ROW 32768

/* A row of 16384 candidates (W = 8, K = 2048) has two shapes, and which is
 * faster depends on the GPU's DRAM bandwidth against its SMs' work
 * (docs/TUNING.md): one 1024-thread CTA an SM with the gids on chip reads
 * the input once and is bound by its on-chip work, which the H100 and the
 * H200 do alike; two 512-thread CTAs an SM keep only the first half's gids
 * (DC_PAIR_SELECT_GID_CANDS), re-read the other selected ones and are bound
 * by DRAM. The two-CTA shape (bit 7) wins where DRAM brings at least 15.5
 * bytes a cycle an SM, as on the H200 and not on the H100. In the
 * attributes' units (bandwidth = 2 * memory clock * bus width / 8):
 * 2 * mem_khz * bus_bits >= 124 * sms * sm_khz. */
#define DC_PAIR_TWO_CTAS_ROW 16384
#define DC_PAIR_TWO_CTAS_PAY(mem_khz, bus_bits, sms, sm_khz)                   \
    ((sms) > 0 && (sm_khz) > 0 && (mem_khz) > 0 && (bus_bits) > 0 &&           \
     2.0 * (double)(mem_khz) * (double)(bus_bits) >=                           \
         124.0 * (double)(sms) * (double)(sm_khz))

/* Threads of a select CTA holding n candidates: about 16 candidates a
 * thread, whole warps, 32..512 (a thread's emit items stay <= 16, which the
 * template asserts). */
#define DC_PAIR_SELECT_THREADS_N(n)                                            \
    ((long long)(n) / 16 <= 32                                                 \
         ? 32                                                                  \
         : (((long long)(n) / 16 + 31) / 32 * 32 > 512                         \
                ? 512                                                          \
                : (int)(((long long)(n) / 16 + 31) / 32 * 32)))
/* ... for a row of w * k candidates split over c CTAs, `two` the variant's
 * bit 7. A one-CTA row of 16384 to 32768 candidates takes 1024 threads, one
 * CTA an SM (at 16384 with its gids on chip, unless `two` asks for two
 * 512-thread CTAs); past 16384 one CTA an SM already, now with twice the
 * loads in flight and at most 32 positions a thread (docs/TUNING.md). */
#define DC_PAIR_SELECT_THREADS(w, k, c, two)                                   \
    ((c) == 1 && !(two) && (long long)(w) * (k) >= 16384 &&                    \
             (long long)(w) * (k) <= 32768                                     \
         ? 1024                                                                \
         : DC_PAIR_SELECT_THREADS_N((long long)(w) * (k) / (c)))

/* Dynamic shared memory: the working area (the template's Shared, in
 * DC_PAIR_SELECT_STATE_BYTES, then a cluster's CTAs' two local histograms
 * and the owned-row counts they send each other, or one CTA's second
 * histogram: DC_PAIR_SELECT_SHARED_BYTES(c) in all), then the CTA's
 * primary keys when they fit DC_PAIR_SELECT_KEY_BYTES_MAX, else none (the
 * template re-reads them from global memory), then the gids of the first
 * DC_PAIR_SELECT_GID_CANDS candidates (4 bytes each; the emit re-reads the
 * others'). All of a CTA's gids stay on chip where the shared memory they
 * take costs no CTA an SM: a cluster's CTAs; and, on a target whose blocks
 * may take 227 KiB (DC_PAIR_BIG_SMEM of dc_arch_number: sm_90, sm_100), a
 * one-CTA row of 16384 in its one-CTA shape (one 1024-thread CTA an SM,
 * 145 KiB; its two-CTA shape keeps half of them) and rows of 8192 to 12288
 * (two 512-thread CTAs an SM, at most 113 KiB each). Elsewhere (sm_120's
 * blocks take 99 KiB; a target not named here) those rows keep the smaller
 * footprint they fit in. The largest total is still 128 KiB past the
 * working area: a row of 32768's keys, or a row of 16384's keys and gids. */
#define DC_PAIR_SELECT_STATE_BYTES 8448
#define DC_PAIR_SELECT_SHARED_BYTES(c)                                         \
    (DC_PAIR_SELECT_STATE_BYTES + ((c) > 1 ? 16448 : 8192))
#define DC_PAIR_SELECT_KEY_BYTES_MAX 131072
#define DC_PAIR_SELECT_SMEM_KEYS(w, k, c)                                      \
    ((long long)(w) * (k) / (c) * 4 <= DC_PAIR_SELECT_KEY_BYTES_MAX)
#define DC_PAIR_BIG_SMEM(arch) ((arch) == 90 || (arch) == 100)
#define DC_PAIR_SELECT_SMEM_GIDS(w, k, c, arch, two)                           \
    ((c) > 1 ||                                                                \
     (DC_PAIR_BIG_SMEM(arch) &&                                                \
      (((long long)(w) * (k) == DC_PAIR_TWO_CTAS_ROW && !(two)) ||          \
       ((long long)(w) * (k) >= 8192 && (long long)(w) * (k) <= 12288))))
/* The candidates of a CTA whose gids stay on chip: all of them where
 * DC_PAIR_SELECT_SMEM_GIDS says so; the first half of a row of 16384 in its
 * two-CTA shape on the same large targets (32 KiB: two CTAs of 112 KiB
 * still fit an SM, and the emit re-reads half as many gids); else none. */
#define DC_PAIR_SELECT_GID_CANDS(w, k, c, arch, two)                           \
    (DC_PAIR_SELECT_SMEM_GIDS(w, k, c, arch, two)                              \
         ? (long long)(w) * (k) / (c)                                          \
         : ((two) && (c) == 1 &&                                               \
                    (long long)(w) * (k) == DC_PAIR_TWO_CTAS_ROW &&            \
                    DC_PAIR_BIG_SMEM(arch)                                     \
                ? (long long)(w) * (k) / 2                                     \
                : 0ll))
#define DC_PAIR_SELECT_SMEM_BYTES(w, k, c, arch, two)                          \
    (DC_PAIR_SELECT_SHARED_BYTES(c) +                                          \
     (DC_PAIR_SELECT_SMEM_KEYS(w, k, c) ? (w) * (k) / (c) * 4 : 0) +           \
     DC_PAIR_SELECT_GID_CANDS(w, k, c, arch, two) * 4)

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
