/*
 * gen.h - seeded input generators shared by the CPU tests (oracle vs brute
 * force) and the GPU tests (kernels vs the oracle): a small RNG, bf16
 * conversion, and the input families every merge is tested on.
 *
 * Everything is a pure function of the seed: the same seed gives the same
 * bytes on every machine.
 */
#ifndef DC_TEST_GEN_H
#define DC_TEST_GEN_H

#include <stdint.h>

/* ------------------------------------------------------------------- RNG */

/* xoshiro256** seeded through splitmix64. */
typedef struct dc_rng {
    uint64_t s[4];
} dc_rng;

void dc_rng_seed(dc_rng *r, uint64_t seed);
uint64_t dc_rng_next(dc_rng *r);
/* Uniform in [0, n) (n > 0), without modulo bias. */
uint64_t dc_rng_below(dc_rng *r, uint64_t n);
/* Uniform in [lo, hi] (inclusive). */
int64_t dc_rng_range(dc_rng *r, int64_t lo, int64_t hi);
/* Uniform double in [0, 1). */
double dc_rng_uniform(dc_rng *r);
/* Standard normal (Box-Muller). */
double dc_rng_normal(dc_rng *r);
/* Shuffles a[0..n). */
void dc_rng_shuffle_i32(dc_rng *r, int32_t *a, int64_t n);

/* ------------------------------------------------------------------ bf16 */

/* fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN. */
uint16_t dc_f32_to_bf16(float f);
float dc_bf16_to_f32(uint16_t b);
uint32_t dc_f32_bits(float f);
float dc_f32_from_bits(uint32_t u);

#define DC_BF16_POS_INF ((uint16_t)0x7F80)
#define DC_BF16_NEG_INF ((uint16_t)0xFF80)
#define DC_BF16_POS_ZERO ((uint16_t)0x0000)
#define DC_BF16_NEG_ZERO ((uint16_t)0x8000)
#define DC_BF16_NAN ((uint16_t)0x7FC0)

/* ------------------------------------------------ packed-merge families */

/* The input families of the packed merge (one world: W ranks' logits and row
 * ends). Each value says what the rows look like. */
#define DC_FAMILY_LIST(X)                                                      \
    X(NORMAL, "normal")             /* N(0,1) bf16                           */ \
    X(NORMAL_100, "normal+100")     /* N(0,1)+100: bf16 step 0.5, many ties  */ \
    X(INTEGER, "integer0..3")       /* integers 0..3: massive ties           */ \
    X(ALL_EQUAL, "all-equal")       /* one value per row, every rank         */ \
    X(ALL_ZERO, "all-zero")         /* +0.0 everywhere                       */ \
    X(INF, "inf")                   /* normal with many +inf and -inf        */ \
    X(SIGNED_ZERO, "signed-zero")   /* only +0.0 and -0.0                    */ \
    X(NAN_ROWS, "nan")              /* rows all NaN, or NaN-sprinkled        */ \
    X(SHORT_ROWS, "short-rows")     /* row_end in {0, 1, < N, < K, random}   */ \
    X(EMPTY_OWNER, "empty-owner")   /* some ranks have row_end 0             */ \
    X(CONC_ONE, "conc-one-rank")    /* the top scores all in one rank        */ \
    X(CONC_SAT, "conc-(K-1)/N")     /* in exactly (K-1)/N ranks              */ \
    X(CONC_ALL, "conc-all-ranks")   /* every rank boosted (ties around tau)  */ \
    X(LONG, "long-2^17")            /* max_local_len = 2^17, row_end ~ 2^17  */

typedef enum dc_family {
#define DC_X_FAM(name, str) DC_FAM_##name,
    DC_FAMILY_LIST(DC_X_FAM)
#undef DC_X_FAM
    DC_FAM_COUNT
} dc_family;

const char *dc_family_name(int family);

/* W ranks' inputs of one packed merge. logits[r] is [rows, stride] bf16,
 * row_ends[r] is [rows]; max_local_len <= stride. */
typedef struct dc_world {
    int32_t world_size;
    int64_t rows;
    int64_t stride;
    int64_t max_local_len;
    uint16_t *logits[16];
    int32_t *row_ends[16];
} dc_world;

/* Generates one world of `family` for (K, N, W) with `rows` rows and about
 * `local_len` columns per rank (the LONG family uses 2^17). Returns 0, or -1
 * when out of memory. Free with dc_world_free. */
int dc_gen_world(dc_world *w, int family, int32_t topk, int32_t local_topk,
                 int32_t world_size, int64_t rows, int64_t local_len,
                 uint64_t seed);
void dc_world_free(dc_world *w);

/* Puts a candidate in slot j of a packed row of n candidates (a row that
 * starts zeroed): the word (key16 << 16) | (0xFFFF - (l & 0xFFFF)) and bit 16
 * of the local id l in plane word j / 32. */
void dc_packed_put(int32_t *row, int32_t n, int32_t j, uint32_t key16, uint32_t l);

/* Fills one bf16 row of n values of the "simple" families (NORMAL,
 * NORMAL_100, INTEGER, ALL_EQUAL, ALL_ZERO, INF, SIGNED_ZERO, NAN_ROWS);
 * other families fall back to NORMAL. */
void dc_gen_bf16_row(dc_rng *r, int family, uint16_t *row, int64_t n);

/* ------------------------------------------------------ pair candidates */

/* Pair-merge candidate families. */
#define DC_PAIR_FAMILY_LIST(X)                                                 \
    X(NORMAL, "normal")             /* fp32 normal, all valid                */ \
    X(INVALID30, "invalid-30%")     /* 30% invalid slots (gid -1)            */ \
    X(ALL_INVALID, "all-invalid")   /* rows with no valid candidate          */ \
    X(SPECIAL, "inf-nan-zero")      /* +-inf, NaN, +-0.0 mixed in            */ \
    X(TIES, "ties")                 /* few distinct scores                   */ \
    X(DUPLICATES, "duplicates")     /* some candidates repeated verbatim     */ \
    X(NEAR_TIES, "near-ties")       /* 3/4 within 2^16 ulps of 1.0: one top  */ \
                                    /* 16 bits, differing low ones           */ \
    X(RANK_RISING, "rank-rising")   /* normal + 2 q at rank q: the top K in  */ \
                                    /* the last ranks                        */ \
    X(RANK_FALLING, "rank-falling") /* normal + (W - 1 - q) / 4 at rank q:   */ \
                                    /* the first ranks lead a little         */ \
    X(CROWDED_BIN, "crowded-bin")   /* 16 to 24 scores a row share the top   */ \
                                    /* 22 key bits, the K-th in their middle */ \
    X(WIDE_IDS, "wide-ids")         /* odd rows' local ids 62000 and up,     */ \
                                    /* some past 16 bits                     */

typedef enum dc_pair_family {
#define DC_X_PFAM(name, str) DC_PFAM_##name,
    DC_PAIR_FAMILY_LIST(DC_X_PFAM)
#undef DC_X_PFAM
    DC_PFAM_COUNT
} dc_pair_family;

const char *dc_pair_family_name(int family);

/* Rank-major candidates [W, rows, K, 2] (score bits, gid) of `family`: every
 * rank's gids are distinct ids it owns (gid(l, r) with interleave S, local
 * ids l < 3K in a random slot order, 62000 more on wide-ids' odd rows),
 * like a real local top-K; invalid slots
 * have gid < 0. Free with free(). Returns NULL when out of memory. */
int32_t *dc_gen_pair_candidates(int family, int32_t topk, int32_t world_size,
                                int32_t interleave, int64_t rows,
                                uint64_t seed);

#endif /* DC_TEST_GEN_H */
