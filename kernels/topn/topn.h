/*
 * topn.h - the fused local top-N + pack (kernels/topn/topn_pack.cu) and the push
 * of a saturated rank's local top-K (kernels/topn/push.cu): launchers used by
 * kernels/packed/packed.c (dcptopk_pack, the exact select) and the warmup key list.
 */
#ifndef DCPTOPK_TOPN_H
#define DCPTOPK_TOPN_H

#include "base.h"

/* Body of dcptopk_pack (arguments already validated by dc_check_pack_args). */
DC_HIDDEN dcptopk_result dc_topn_pack_launch(dcptopk_context *ctx,
                                             const dcptopk_merge_config *c,
                                             const dcptopk_pack_args *a);

/* Push of round 2 (exact mode), launched after the select on the same stream.
 * For every row t whose saturation word has this rank's bit set: computes the
 * rank's local top-K of the row (the local top-N + pack rule with N := K), and
 * writes it, K + K/32 words, to slot s = popcount(mask & ((1 << rank) - 1)) of
 * row t of every rank's receive buffer
 *     peer_recv[p] + (t * slots + s) * (K + K/32)   (int32 words),
 * then (after a system-scope fence) releases, on every rank p,
 *     peer_flags[p][rank * max_rows + t] = seq[t] + 1   (uint32).
 * Rows without the bit cost one load. Never waits. */
typedef struct dc_push_args {
    const uint16_t *logits;    /* this rank's bf16 logits [>= rows, stride]   */
    int64_t logits_stride;
    int64_t max_local_len;
    const int32_t *row_ends;   /* [rows]                                      */
    int64_t rows;
    int32_t rank;
    const uint32_t *sat;       /* [rows] saturation words                     */
    const uint32_t *seq;       /* [max_rows] this rank's sequence words       */
    const uint64_t *peer_recv; /* device array [W] of receive-slot bases      */
    const uint64_t *peer_flags;/* device array [W] of flag bases              */
    int64_t max_rows;
    void *stream;
} dc_push_args;
DC_HIDDEN dcptopk_result dc_push_launch(dcptopk_context *ctx,
                                        const dcptopk_merge_config *c,
                                        const dc_push_args *a);

/* Appends the keys of the top-N pack and the push for config c (all code-path
 * variants a call can take). */
DC_HIDDEN void dc_topn_keys(const dcptopk_merge_config *c, const char *arch,
                            dc_key_list *l);

/* The same launches with the code path forced (tests and benchmarks):
 * variant = log2 of the CTAs per row (0..3), -1 = the automatic choice. A
 * variant too small for the row length is raised to the smallest that fits
 * (a CTA keeps at most 65536 columns in shared memory). */
DC_HIDDEN dcptopk_result dc_topn_pack_launch_variant(
    dcptopk_context *ctx, const dcptopk_merge_config *c,
    const dcptopk_pack_args *a, int32_t variant);
DC_HIDDEN dcptopk_result dc_push_launch_variant(dcptopk_context *ctx,
                                                const dcptopk_merge_config *c,
                                                const dc_push_args *a,
                                                int32_t variant);
/* The variant the automatic choice takes for `rows` rows of max_local_len
 * columns on a GPU of sm_count SMs and smem_optin bytes of opt-in shared
 * memory a block (0 = not known: the template's bound alone); -1 when no
 * cluster size holds such a row. */
DC_HIDDEN int32_t dc_topn_variant(int64_t rows, int64_t max_local_len,
                                  int32_t sm_count, int32_t smem_optin);
/* log2 of the fewest CTAs that hold a row of max_local_len columns (at most
 * 2^17 are kept) on such a device, -1 when none does. The host checks
 * (packed_check.c) size the grid and refuse an unfit row by it before
 * anything launches. */
DC_HIDDEN int32_t dc_topn_capacity_variant(int64_t max_local_len,
                                           int32_t smem_optin);
/* The error of a row that no cluster size holds, naming max_local_len. */
DC_HIDDEN dcptopk_result dc_topn_unfit(const dcptopk_context *ctx,
                                       int64_t max_local_len,
                                       int32_t smem_optin);

#endif /* DCPTOPK_TOPN_H */
