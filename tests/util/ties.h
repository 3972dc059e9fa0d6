/*
 * ties.h - the one-answer families: rows built to put many tokens exactly at
 * the K-th score, so that a merge whose tie rule is not the one-GPU answer's
 * shows it (docs/CONTRACT.md, "The one answer"). Deterministic: no seed, the
 * rows are an enumeration of tie layouts, the same for the CPU and the GPU
 * tests.
 *
 * Each row gives every rank a background value, a run of tokens at the tie
 * score x, and a run of tokens above it, laid out per rank by the row's
 * pattern: ties on every rank or on some only, starting at local id 0 on one
 * rank and later on the others (a full, unsaturated rank then has ties beyond
 * its top N that one GPU keeps), staggered, with the tokens above x on one
 * rank or spread; then all-equal rows, +-0, -inf tails, NaN rows and short
 * rows.
 */
#ifndef DC_TEST_TIES_H
#define DC_TEST_TIES_H

#include <stdint.h>

#include "gen.h"

/* Builds the rows for (K, N, W) into w (free with dc_world_free): each rank
 * has max_local_len = K + 2N columns (stride rounded up to 8). Returns the
 * number of rows, or -1 when out of memory. */
int64_t dc_ties_world(dc_world *w, int32_t topk, int32_t local_topk,
                      int32_t world_size);

/* What row t of such a world is, for a failure message. */
const char *dc_ties_row_name(int64_t t);

#endif /* DC_TEST_TIES_H */
