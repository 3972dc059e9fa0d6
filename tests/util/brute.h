/*
 * brute.h - brute-force answers to the merges, written independently of the
 * oracle (src/ref*.c): no packed words, no select keys, no histograms. Every
 * (score, global id) pair is collected and sorted with a comparator on the
 * float values themselves (-0.0 below +0.0, NaN never a candidate).
 */
#ifndef DC_TEST_BRUTE_H
#define DC_TEST_BRUTE_H

#include <stdint.h>

/* One scored token. */
typedef struct dc_brute_item {
    float value;   /* the score as a float (bf16 widened for the packed merge) */
    uint32_t bits; /* the score's raw bits (bf16 or fp32)                     */
    int64_t gid;
    int64_t pos;   /* pair merge: gathered position; packed: unused (0)       */
} dc_brute_item;

/* Total order of the merges: larger value first, +0.0 before -0.0, then the
 * lower gid, then the lower position. qsort comparator. */
int dc_brute_cmp(const void *a, const void *b);
/* -1 / 0 / 1 comparing scores only (a above b = -1). */
int dc_brute_cmp_value(const dc_brute_item *a, const dc_brute_item *b);

/* gid of local id l on `owner`: (l / S) * W * S + owner * S + l % S. */
int64_t dc_brute_gid(int64_t l, int32_t owner, int32_t world_size,
                     int32_t interleave);

/* Packed merge, row t: the top K of the union of all W ranks' non-NaN bf16
 * logits at columns l < min(row_end, max_local_len, 2^17) (a negative
 * row_end counts as 0). Writes up to K items to out (score desc, gid asc)
 * and returns how many. */
int64_t dc_brute_packed_topk(int32_t world_size, int32_t interleave,
                             const uint16_t *const *logits, int64_t stride,
                             int64_t max_local_len,
                             const int32_t *const *row_ends, int64_t t,
                             int32_t topk, dc_brute_item *out);

/* The one-GPU answer of row t, the contract's single answer: the unsharded
 * row as one GPU holding every token sees it (token g at index g, rebuilt
 * from the shards by the interleave's numbering; columns past a rank's bound
 * are absent), and its K non-NaN tokens of largest score, equal scores to
 * the lowest index. Writes their global ids in ascending order to gids_out
 * and returns how many (min(K, tokens)). bf16 logits as the packed merge
 * reads them: columns l < min(row_end, max_local_len, 2^17). */
int64_t dc_brute_one_gpu_bf16(int32_t world_size, int32_t interleave,
                              const uint16_t *const *logits, int64_t stride,
                              int64_t max_local_len,
                              const int32_t *const *row_ends, int64_t t,
                              int32_t topk, int64_t *gids_out);
/* The same over fp32 scores (the pair merge's key): columns l < row_end. */
int64_t dc_brute_one_gpu_f32(int32_t world_size, int32_t interleave,
                             const float *const *scores, int64_t stride,
                             const int32_t *const *row_ends, int64_t t,
                             int32_t topk, int64_t *gids_out);

/* The round-1 saturation of row t computed from first principles: each rank
 * sends its best min(N, v) tokens (ties: lower local id); tau = the K-th
 * best sent token (score, then lower gid; none when fewer than K were sent);
 * rank r is saturated iff it sent N tokens and the best token it may still
 * hold unsent (its lowest sent score, at the local id after the last one it
 * sent at that score) ranks above tau (always, when there is no tau): only
 * then can a token it did not send belong to the top K. Returns the mask;
 * *tau_bits = tau's bf16 bits, *has_tau = whether K were sent. */
uint32_t dc_brute_saturation(int32_t world_size, int32_t interleave,
                             int32_t local_topk,
                             int32_t topk, const uint16_t *const *logits,
                             int64_t stride, int64_t max_local_len,
                             const int32_t *const *row_ends, int64_t t,
                             uint16_t *tau_bits, int *has_tau);

/* Pair merge, row t of rank-major candidates [W, rank_stride_rows, K, 2]:
 * the K best valid candidates (gid >= 0, score not NaN), ties: lower gid,
 * then lower position p = r * K + j; written as gids in ascending position
 * order, -1 padded to K. Returns the count. */
int64_t dc_brute_pair_select(const int32_t *candidates, int32_t world_size,
                             int32_t topk, int64_t rank_stride_rows, int64_t t,
                             int32_t *ids_out);

#endif /* DC_TEST_BRUTE_H */
