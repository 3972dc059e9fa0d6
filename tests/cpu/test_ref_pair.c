/* test_ref_pair.c - the CPU reference of the pair merge against brute force:
 * select for W in {1,2,3,4,8,16} x K in {64,512,2048} on every candidate
 * family (30% invalid slots, all-invalid rows, +-inf, NaN, -0.0, ties,
 * duplicates), both layouts giving identical outputs, the owned physical
 * rows; and the pair pack with/without row starts and row ends, interleave
 * 1, 2, 4, against expectations computed here from the contract. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brute.h"
#include "dcptopk.h"
#include "gen.h"
#include "harness.h"

#define ROWS 3

/* Rows of rank `rank` expected from a row of ids (contract: owner
 * (gid / S) % W, local id (gid / (W S)) S + gid % S, block table). */
static int32_t expected_rows(const int32_t *ids, int32_t k, int32_t nw,
                             int32_t s, int32_t rank, int32_t block_size,
                             const dcptopk_rows_map *m, int64_t t,
                             int32_t *out)
{
    int32_t n = 0, req = m->req_id[t];
    if (req < 0 || req >= m->num_reqs)
        return 0;
    for (int32_t i = 0; i < k && ids[i] >= 0; i++) {
        int64_t gid = ids[i];
        if ((gid / s) % nw != rank)
            continue;
        int64_t l = (gid / ((int64_t)nw * s)) * s + gid % s;
        if (l / block_size >= m->block_table_cols)
            continue;
        out[n++] = m->block_table[req * m->block_table_stride +
                                  l / block_size] *
                       m->stride_rows +
                   (int32_t)(l % block_size);
    }
    return n;
}

TEST(pair_select_vs_brute_force)
{
    static const int32_t worlds[] = {1, 2, 3, 4, 8, 16};
    static const int32_t topks[] = {64, 512, 2048};
    int64_t rows_checked[DC_PFAM_COUNT] = {0}, selected[DC_PFAM_COUNT] = {0};
    for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++) {
        for (size_t ki = 0; ki < sizeof topks / sizeof topks[0]; ki++) {
            for (int f = 0; f < DC_PFAM_COUNT; f++) {
                int32_t nw = worlds[wi], k = topks[ki];
                int32_t s = 1 << ((wi + ki + (size_t)f) % 3);
                dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
                c.kind = DCPTOPK_MERGE_PAIR;
                c.topk = k;
                c.local_topk = k;
                c.world_size = nw;
                c.block_size = 32;
                c.interleave = s;
                c.exact = 0;
                /* Rank-major with one spare row per rank (T_alloc > T). */
                int64_t alloc = ROWS + 1;
                int32_t *cand = dc_gen_pair_candidates(
                    f, k, nw, s, alloc, 1000 + wi * 16 + ki * 4 + (size_t)f);
                CHECK(cand != NULL);
                int64_t wk = (int64_t)nw * k;
                int32_t *rowmajor = malloc(sizeof(int32_t) * (size_t)(ROWS * wk * 2));
                for (int64_t t = 0; t < ROWS; t++)
                    for (int32_t q = 0; q < nw; q++)
                        memcpy(rowmajor + (t * wk + (int64_t)q * k) * 2,
                               cand + (((int64_t)q * alloc + t) * k) * 2,
                               sizeof(int32_t) * (size_t)k * 2);
                int32_t *ids_a = malloc(sizeof(int32_t) * (size_t)(ROWS * k));
                int32_t *ids_b = malloc(sizeof(int32_t) * (size_t)(ROWS * k));
                int32_t *want = malloc(sizeof(int32_t) * (size_t)k);
                int32_t *rows_a = malloc(sizeof(int32_t) * (size_t)(ROWS * k));
                int32_t *rows_b = malloc(sizeof(int32_t) * (size_t)(ROWS * k));
                int32_t *rows_want = malloc(sizeof(int32_t) * (size_t)k);
                int32_t counts_a[ROWS], counts_b[ROWS];
                int32_t req_id[ROWS] = {1, 0, -1};
                int32_t table[2 * 80];
                for (int i = 0; i < 2 * 80; i++)
                    table[i] = 1000 * i + 7;
                dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
                a.candidates = cand;
                a.layout = DCPTOPK_LAYOUT_RANK_MAJOR;
                a.rows = ROWS;
                a.rank_stride_rows = alloc;
                a.rank = nw - 1;
                a.ids_out = ids_a;
                a.rows_map.req_id = req_id;
                a.rows_map.block_table = table;
                a.rows_map.block_table_stride = 80;
                a.rows_map.block_table_cols = 70; /* l up to ~3K*2: some drop */
                a.rows_map.num_reqs = 2;
                a.rows_map.stride_rows = 40;
                a.rows_map.rows_out = rows_a;
                a.rows_map.counts_out = counts_a;
                dcptopk_pair_select_args b = a;
                b.candidates = rowmajor;
                b.layout = DCPTOPK_LAYOUT_ROW_MAJOR;
                b.rank_stride_rows = 0;
                b.ids_out = ids_b;
                b.rows_map.rows_out = rows_b;
                b.rows_map.counts_out = counts_b;
                int ok = dcptopk_ref_pair_select(&c, &a) == DCPTOPK_SUCCESS &&
                         dcptopk_ref_pair_select(&c, &b) == DCPTOPK_SUCCESS;
                int bad = !ok;
                if (!ok)
                    DC_FAIL_AT("ref_pair_select: %s", dcptopk_last_error(NULL));
                for (int64_t t = 0; t < ROWS && !bad; t++) {
                    int64_t n = dc_brute_pair_select(cand, nw, k, alloc, t, want);
                    if (memcmp(want, ids_a + t * k, sizeof(int32_t) * (size_t)k)) {
                        int32_t i = 0;
                        while (want[i] == ids_a[t * k + i])
                            i++;
                        DC_FAIL_AT("%s W=%d K=%d S=%d row %lld: ids[%d] = %d, "
                                   "brute force %d",
                                   dc_pair_family_name(f), nw, k, s,
                                   (long long)t, i, ids_a[t * k + i], want[i]);
                        bad = 1;
                    }
                    if (!bad && (memcmp(ids_a + t * k, ids_b + t * k,
                                        sizeof(int32_t) * (size_t)k) ||
                                 memcmp(rows_a + t * k, rows_b + t * k,
                                        sizeof(int32_t) * (size_t)k) ||
                                 counts_a[t] != counts_b[t])) {
                        DC_FAIL_AT("%s W=%d K=%d row %lld: the layouts differ",
                                   dc_pair_family_name(f), nw, k, (long long)t);
                        bad = 1;
                    }
                    int32_t nr = expected_rows(want, k, nw, s, a.rank, 32,
                                               &a.rows_map, t, rows_want);
                    if (!bad && counts_a[t] != nr) {
                        DC_FAIL_AT("%s W=%d K=%d row %lld: %d owned rows, "
                                   "expected %d",
                                   dc_pair_family_name(f), nw, k, (long long)t,
                                   counts_a[t], nr);
                        bad = 1;
                    }
                    for (int32_t i = 0; i < k && !bad; i++) {
                        int32_t e = i < nr ? rows_want[i] : -1;
                        if (rows_a[t * k + i] != e) {
                            DC_FAIL_AT("%s W=%d K=%d row %lld: rows_out[%d] "
                                       "= %d, expected %d",
                                       dc_pair_family_name(f), nw, k,
                                       (long long)t, i, rows_a[t * k + i], e);
                            bad = 1;
                        }
                    }
                    rows_checked[f]++;
                    selected[f] += n;
                }
                free(cand);
                free(rowmajor);
                free(ids_a);
                free(ids_b);
                free(want);
                free(rows_a);
                free(rows_b);
                free(rows_want);
                if (bad)
                    return;
            }
        }
    }
    printf("pair select, W in {1,2,3,4,8,16} x K in {64,512,2048}:\n");
    for (int f = 0; f < DC_PFAM_COUNT; f++)
        printf("  %-14s %4lld rows, %8lld ids selected\n",
               dc_pair_family_name(f), (long long)rows_checked[f],
               (long long)selected[f]);
}

TEST(pair_select_all_invalid_rows_are_padded)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = 64;
    c.local_topk = 64;
    c.world_size = 2;
    c.block_size = 0;
    int32_t cand[2 * 64 * 2];
    for (int i = 0; i < 128; i++) {
        cand[2 * i] = (int32_t)0x7F800000; /* +inf, but invalid gids / NaN */
        cand[2 * i + 1] = i % 2 ? -1 : -7;
    }
    cand[2 * 5] = (int32_t)0x7FC00000; /* NaN score, valid gid */
    cand[2 * 5 + 1] = 3;
    int32_t ids[64];
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    a.candidates = cand;
    a.rows = 1;
    a.ids_out = ids;
    CHECK_OK(dcptopk_ref_pair_select(&c, &a));
    for (int i = 0; i < 64; i++)
        CHECK_EQ(ids[i], -1);
    /* -inf is an ordinary candidate; -0.0 ranks below +0.0. */
    cand[2 * 7] = (int32_t)0xFF800000;
    cand[2 * 7 + 1] = 9;
    cand[2 * 70] = (int32_t)0x00000000;
    cand[2 * 70 + 1] = 11;
    cand[2 * 71] = (int32_t)0x80000000;
    cand[2 * 71 + 1] = 2;
    CHECK_OK(dcptopk_ref_pair_select(&c, &a));
    /* Ascending position: slot 7 (rank 0), then slots 70, 71 (rank 1). */
    CHECK_EQ(ids[0], 9);
    CHECK_EQ(ids[1], 11);
    CHECK_EQ(ids[2], 2);
    CHECK_EQ(ids[3], -1);
}

/* --------------------------------------------------------------- pair pack */

TEST(pair_pack_matches_contract)
{
    static const int32_t worlds[] = {1, 4, 16};
    static const int32_t topks[] = {64, 512};
    int64_t slots = 0, invalid = 0;
    dc_rng rng;
    dc_rng_seed(&rng, 77);
    for (size_t wi = 0; wi < 3; wi++)
        for (size_t ki = 0; ki < 2; ki++)
            for (int32_t s = 1; s <= 4; s *= 2)
                for (int variant = 0; variant < 4; variant++) {
                    int32_t nw = worlds[wi], k = topks[ki], rank = nw - 1;
                    int with_starts = variant & 1, with_ends = variant & 2;
                    int64_t rows = 4, stride = 3 * k + 5;
                    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
                    c.kind = DCPTOPK_MERGE_PAIR;
                    c.topk = k;
                    c.local_topk = k;
                    c.world_size = nw;
                    c.interleave = s;
                    float *logits = malloc(sizeof(float) * (size_t)(rows * stride));
                    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(rows * (k + 3)));
                    int32_t *out = malloc(sizeof(int32_t) * (size_t)(rows * k * 2));
                    int32_t starts[4], ends[4];
                    for (int64_t i = 0; i < rows * stride; i++) {
                        uint64_t x = dc_rng_below(&rng, 20);
                        logits[i] = x == 0   ? NAN
                                    : x == 1 ? -0.0f
                                    : x == 2 ? -INFINITY
                                             : (float)dc_rng_normal(&rng);
                    }
                    for (int64_t t = 0; t < rows; t++) {
                        starts[t] = (int32_t)dc_rng_range(&rng, -3, k);
                        ends[t] = (int32_t)dc_rng_range(&rng, 0, 2 * k);
                        for (int32_t j = 0; j < k + 3; j++) {
                            uint64_t x = dc_rng_below(&rng, 12);
                            ids[t * (k + 3) + j] =
                                x == 0   ? -1 - (int32_t)dc_rng_below(&rng, 5)
                                : x == 1 ? INT32_MAX - (int32_t)dc_rng_below(&rng, 9)
                                : x == 2 ? (int32_t)(INT32_MAX / nw) -
                                               (int32_t)dc_rng_below(&rng, 40)
                                         : (int32_t)dc_rng_below(&rng, (uint64_t)stride + 8);
                        }
                    }
                    dcptopk_pair_pack_args a = DCPTOPK_PAIR_PACK_ARGS_INIT;
                    a.logits = logits;
                    a.logits_stride = stride;
                    a.local_ids = ids;
                    a.local_ids_stride = k + 3;
                    a.row_starts = with_starts ? starts : NULL;
                    a.row_ends = with_ends ? ends : NULL;
                    a.rows = rows;
                    a.rank = rank;
                    a.out = out;
                    CHECK_OK(dcptopk_ref_pair_pack(&c, &a));
                    for (int64_t t = 0; t < rows; t++)
                        for (int32_t j = 0; j < k; j++) {
                            int64_t l = ids[t * (k + 3) + j];
                            int64_t col = l + (with_starts ? starts[t] : 0);
                            int64_t gid = l < 0 ? -1
                                                : (l / s) * nw * s +
                                                      (int64_t)rank * s + l % s;
                            int valid = l >= 0 && col >= 0 && col < stride &&
                                        (!with_ends || l < ends[t]) &&
                                        gid <= INT32_MAX &&
                                        !isnan(logits[t * stride + col]);
                            uint32_t bits = 0xFF800000u;
                            if (valid)
                                memcpy(&bits, &logits[t * stride + col], 4);
                            CHECK_EQ((uint32_t)out[(t * k + j) * 2], bits);
                            CHECK_EQ(out[(t * k + j) * 2 + 1],
                                     valid ? gid : -1);
                            slots++;
                            invalid += !valid;
                        }
                    free(logits);
                    free(ids);
                    free(out);
                }
    printf("pair pack: %lld slots checked (%lld invalid), W in {1,4,16}, K in "
           "{64,512}, S in {1,2,4}, with/without row starts and row ends\n",
           (long long)slots, (long long)invalid);
}

/* The float-id rule, spelled out value by value (not computed by the code
 * under test). */
TEST(float_id_words)
{
    static const struct {
        uint32_t word;
        int32_t gid;
    } cases[] = {
        {0x00000000u, 0},          /* +0.0 */
        {0x80000000u, 0},          /* -0.0 */
        {0x3F800000u, 1},          /* 1.0 */
        {0x40A00000u, 5},          /* 5.0 */
        {0x40B00000u, 5},          /* 5.5: truncated */
        {0x4B7FFFFFu, 16777215},   /* 2^24 - 1 */
        {0x4EFFFFFFu, 2147483520}, /* the largest float below 2^31 */
        {0x4F000000u, -1},         /* 2^31 */
        {0xBF800000u, -1},         /* -1.0 */
        {0xBF000000u, -1},         /* -0.5 */
        {0x7FC00000u, -1},         /* NaN */
        {0xFFC00000u, -1},         /* -NaN */
        {0x7F800000u, -1},         /* +inf */
        {0xFF800000u, -1},         /* -inf */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(dcptopk_pair_gid(DCPTOPK_LAYOUT_RANK_MAJOR_FLOAT_IDS,
                                  (int32_t)cases[i].word),
                 cases[i].gid);
        CHECK_EQ(dcptopk_pair_gid(DCPTOPK_LAYOUT_ROW_MAJOR_FLOAT_IDS,
                                  (int32_t)cases[i].word),
                 cases[i].gid);
    }
    /* The int32 layouts take the word as it is; any negative is invalid. */
    CHECK_EQ(dcptopk_pair_gid(DCPTOPK_LAYOUT_RANK_MAJOR, 0x40A00000), 0x40A00000);
    CHECK_EQ(dcptopk_pair_gid(DCPTOPK_LAYOUT_ROW_MAJOR, -7), -1);
}
