/*
 * dist_ranks.h - ranks of the merge across processes for the GPU tests
 * (tests/gpu/test_dist_gpu.c, tests/multigpu/test_dist_multigpu.c): one
 * rank's inputs, one-call merge and comparison with the CPU reference, and
 * roles run by processes that dr_spawn starts (fork + exec of the test
 * binary itself, so that no CUDA state crosses a fork; a constructor in
 * dist_ranks.c runs the role named by DC_DIST_CHILD before main).
 *
 * Roles (environment: DC_DIST_STEPS, DC_DIST_ROWS, DC_DIST_K, DC_DIST_N;
 * DC_DIST_SPREAD=1 puts rank r on GPU r when there are enough GPUs, else
 * every rank is on GPU 0):
 *  - merge: DC_DIST_STEPS one-call merges over eight input families, each
 *    compared bit for bit; fails when no row needed the rescue;
 *  - packed: the merge role with the rows packed by the test's producer
 *    (rk_inputs_packed) and passed as args->packed, contiguous and strided;
 *  - graph: one eager merge, then capture and DC_DIST_STEPS replays with new
 *    inputs (exit 77 = skipped on the staged and push paths, which cannot
 *    be captured yet);
 *  - stop, stop_graph (push path, else skipped): host pointers refused by
 *    name, then the last rank stops calling (alive) at step 2; the others'
 *    step must end within 1.5x the bound with every id -1, the next call
 *    give DCPTOPK_PEER_TIMEOUT (dcptopk_group_status after a graph replay),
 *    later calls DCPTOPK_GROUP_BROKEN;
 *  - ties: one one-call merge over the one-answer families (tests/util/
 *    ties.h) for (DC_DIST_K, DC_DIST_N, the group's W, interleave
 *    DC_DIST_S), bit for bit against the reference and, as id sets,
 *    against the one-GPU brute force; fails when no row was rescued;
 *  - die: the last rank SIGKILLs itself at its 4th step; the others must
 *    get DCPTOPK_PEER_TIMEOUT within 2x the bound (+5 s), then
 *    DCPTOPK_GROUP_BROKEN, then rebuild without it and merge again.
 */
#ifndef DC_DIST_RANKS_H
#define DC_DIST_RANKS_H

#include <stdint.h>

#include "dcptopk.h"

typedef struct rk {
    dcptopk_context *ctx;
    dcptopk_group *g;
    dcptopk_group_workspace *gw;
    dcptopk_merge_config c;
    int64_t rows, len, stride; /* len: columns per rank; stride: len + pad */
    int32_t rank;
    uint64_t logits, ends, ids;
    int32_t *ids_ref[16];
    uint32_t *sat_ref[16];
    int32_t *host;
    /* Producer mode (rk_inputs_packed): this rank's packed rows on the
     * device, `packed_stride` words apart, passed as args->packed. */
    uint64_t packed;
    int64_t packed_stride, packed_cap; /* cap: words per row allocated */
    int use_packed;
} rk;

double dr_now_ms(void);
int dr_env_i(const char *name, int def);
/* A workspace of (K = kk, N = n, the group's W, interleave DC_DIST_S) for `rows` rows of `len`
 * columns, and device buffers. 0 or -1 (message on stderr). */
int rk_setup(rk *k, dcptopk_context *ctx, dcptopk_group *g, int kk, int n,
             int64_t rows, int64_t len);
void rk_free(rk *k);
/* New seeded inputs of every rank (dc_gen_world), the reference merge, this
 * rank's upload. Returns the rescued rows, or -1. */
int64_t rk_inputs(rk *k, int family, uint64_t seed);
/* The same inputs packed by a producer of the test's own (each rank's
 * reference pack with its N slots reversed: the same rows as a set, in
 * another slot order, meeting the producer contract, checked), uploaded
 * `packed_stride` words apart (0 = N + N/32) for rk_merge to pass as
 * args->packed; the expected outputs are the reference's select, push lists
 * and rescue of those rows, and their id sets are checked against the
 * one-GPU brute force. Returns the rescued rows, or -1. */
int64_t rk_inputs_packed(rk *k, int family, uint64_t seed,
                         int64_t packed_stride);
/* The host half of rk_inputs_packed, for world w of config c: gathered
 * [W, T, N + N/32] gets every rank's producer rows, ids_ref[r] [T, K] and
 * sat_ref[r] [T] the reference's outputs of rank r. Returns the rescued
 * rows, or -1 (message on stderr). */
struct dc_world;
int64_t dr_producer_world(const dcptopk_merge_config *c,
                          const struct dc_world *w, int32_t *gathered,
                          int32_t *const *ids_ref, uint32_t *const *sat_ref);
/* 0 when every row of `ids` [T, K] (rank `rank`'s output over world w) holds,
 * as a set, the one-GPU answer of the row (dc_brute_one_gpu_bf16 with c's W
 * and interleave); else -1, naming `what`, the row and the first difference
 * on stderr. */
int dr_one_answer(const dcptopk_merge_config *c, const struct dc_world *w,
                  const int32_t *ids, const char *what, int32_t rank);
dcptopk_result rk_merge(rk *k, void *stream);
/* 0 when this rank's ids and saturation words equal the reference. */
int rk_compare(rk *k, const char *what);

extern const int DR_FAMILIES[];
extern const int DR_NFAM;

/* Starts w ranks of `role` with the extra environment `env` ("NAME=VALUE",
 * NULL-terminated) and a fresh store folder; returns how many ranks exited
 * 0, or -1 when any said skipped (77). */
int dr_spawn(int w, const char *role, const char *const *env);

#endif /* DC_DIST_RANKS_H */
