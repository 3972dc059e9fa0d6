/* test_indptr.c - indptr_out (the owned rows' CSR offsets) of the CPU
 * reference, which the GPU tests compare against bit for bit: after the
 * packed select, after each rescued row (whose count changes), after the
 * pair select, each against this test's own prefix sum of the counts the
 * same call wrote; the argument errors, each named with its value; and an
 * older, smaller args struct read with indptr_out = NULL. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "gen.h"
#include "harness.h"

enum { K = 512, N = 96, W = 4, T = 24, LEN = 1024, B = 16 };

/* The rows map of one rank: one request, block i at entry 1000 + i. */
typedef struct rows_case {
    int32_t req[T], table[LEN / B + 1], rows[T * K], counts[T], indptr[T + 1];
} rows_case;

static dcptopk_rows_map rows_map_of(rows_case *rc)
{
    memset(rc->req, 0, sizeof rc->req);
    for (int i = 0; i < LEN / B + 1; i++)
        rc->table[i] = 1000 + i;
    for (int i = 0; i <= T; i++)
        rc->indptr[i] = -7;
    dcptopk_rows_map m = {rc->req, rc->table, LEN / B + 1, LEN / B + 1, 1, B,
                          rc->rows, K, rc->counts};
    return m;
}

/* 0 when indptr is the exclusive prefix sum of counts (computed here). */
static int indptr_ok(const rows_case *rc, const char *what)
{
    int32_t sum = 0;
    if (rc->indptr[0] != 0) {
        DC_FAIL_AT("%s: indptr[0] = %d", what, rc->indptr[0]);
        return 1;
    }
    for (int t = 0; t < T; t++) {
        sum += rc->counts[t];
        if (rc->indptr[t + 1] != sum) {
            DC_FAIL_AT("%s: indptr[%d] = %d, the counts sum to %d", what,
                       t + 1, rc->indptr[t + 1], sum);
            return 1;
        }
    }
    return 0;
}

static dcptopk_merge_config packed_config(int exact)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = K;
    c.local_topk = N;
    c.world_size = W;
    c.block_size = B;
    c.emit_ids = 0;
    c.exact = exact;
    return c;
}

/* Rank 1's select (+ its rescue of every saturated row) on a world with
 * saturated rows: indptr follows the counts after the select and after each
 * rescued row. */
TEST(ref_packed_select_and_rescue_indptr)
{
    const dcptopk_merge_config c = packed_config(1);
    dc_world w;
    CHECK_EQ(dc_gen_world(&w, DC_FAM_CONC_SAT, K, N, W, T, LEN, 11), 0);
    const int32_t words = dcptopk_packed_row_words(N);
    int32_t *g = malloc(sizeof *g * (size_t)W * T * (size_t)words);
    int32_t *push = malloc(sizeof *push * (size_t)W *
                           (size_t)dcptopk_packed_row_words(K));
    CHECK(g && push);
    for (int q = 0; q < W; q++) {
        dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
        pa.logits = w.logits[q];
        pa.logits_stride = w.stride;
        pa.max_local_len = w.max_local_len;
        pa.row_ends = w.row_ends[q];
        pa.rows = T;
        pa.out = g + (size_t)q * T * (size_t)words;
        CHECK_OK(dcptopk_ref_pack(&c, &pa));
    }
    static rows_case rc;
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = g;
    a.rows = T;
    a.rank = 1;
    a.rows_map = rows_map_of(&rc);
    a.logits = w.logits[1];
    a.logits_stride = w.stride;
    a.max_local_len = w.max_local_len;
    a.row_ends = w.row_ends[1];
    a.indptr_out = rc.indptr;
    uint32_t sat[T];
    CHECK_OK(dcptopk_ref_select(&c, &a, sat));
    CHECK(indptr_ok(&rc, "select") == 0);
    int rescued = 0, moved = 0;
    for (int t = 0; t < T && !dc_test_failed; t++) {
        const uint32_t mask = sat[t] >> 16;
        if (!mask)
            continue;
        const int32_t *lists[W];
        int s = 0;
        for (int q = 0; q < W; q++)
            if (mask & (1u << q)) {
                int32_t *l = push + (size_t)s * dcptopk_packed_row_words(K);
                CHECK_OK(dcptopk_ref_push_list(&c, w.logits[q] + t * w.stride,
                                               w.max_local_len,
                                               w.row_ends[q][t], l));
                lists[s++] = l;
            }
        const int32_t before = rc.counts[t];
        CHECK_OK(dcptopk_ref_rescue_row(&c, &a, t, sat[t], lists));
        moved += rc.counts[t] != before;
        rescued++;
        CHECK(indptr_ok(&rc, "rescue") == 0);
    }
    printf("  %d rescued rows, %d of them changed their count\n", rescued,
           moved);
    CHECK(rescued > 0);
    free(g);
    free(push);
    dc_world_free(&w);
}

static dcptopk_merge_config pair_config(void)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = K;
    c.local_topk = K;
    c.world_size = W;
    c.block_size = B;
    c.emit_ids = 0;
    c.exact = 0;
    return c;
}

TEST(ref_pair_select_indptr)
{
    const dcptopk_merge_config c = pair_config();
    int32_t *cand = dc_gen_pair_candidates(DC_PFAM_SPECIAL, K, W, 1, T, 5);
    CHECK(cand);
    static rows_case rc;
    for (int rank = 0; rank < W && !dc_test_failed; rank++) {
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = cand;
        a.rows = T;
        a.rank = rank;
        a.rows_map = rows_map_of(&rc);
        a.indptr_out = rc.indptr;
        CHECK_OK(dcptopk_ref_pair_select(&c, &a));
        CHECK(indptr_ok(&rc, "pair select") == 0);
        CHECK(rc.indptr[T] > 0);
    }
    free(cand);
}

/* Refused before anything is written, each naming the argument and its
 * value; the first version's struct (up to `stream`) still works. */
TEST(indptr_argument_errors_and_old_structs)
{
    dcptopk_merge_config c = packed_config(0);
    static int32_t g[W * T * 99];
    static rows_case rc;
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = g;
    a.rows = T;
    int32_t spare[T + 2];
    a.indptr_out = spare;
    CHECK_EQ(dcptopk_ref_select(&c, &a, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "args->indptr_out = 0x");
    CHECK_CONTAINS(dcptopk_last_error(NULL), "without args->rows_map.rows_out");
    a.rows_map = rows_map_of(&rc);
    a.indptr_out = (int32_t *)((char *)spare + 2);
    CHECK_EQ(dcptopk_ref_select(&c, &a, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "must be 4-byte aligned");
    /* The old size: indptr_out (garbage here) is not read. */
    a.struct_size = (uint32_t)offsetof(dcptopk_select_args, indptr_out);
    memset(g, 0, sizeof g);
    CHECK_OK(dcptopk_ref_select(&c, &a, NULL));
    a.struct_size -= 1;
    CHECK_EQ(dcptopk_ref_select(&c, &a, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "args->struct_size = ");

    dcptopk_merge_config pc = pair_config();
    pc.emit_ids = 1;
    static int32_t cand[W * T * K * 2];
    dcptopk_pair_select_args p = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    p.candidates = cand;
    p.rows = T;
    p.ids_out = rc.rows;
    p.indptr_out = spare;
    CHECK_EQ(dcptopk_ref_pair_select(&pc, &p), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "without args->rows_map.rows_out");
    p.ids_out = NULL;
    p.rows_map = rows_map_of(&rc);
    p.rows = (int64_t)(INT32_MAX / K) + 1;
    CHECK_EQ(dcptopk_ref_pair_select(&pc, &p), DCPTOPK_INVALID_ARGUMENT);
    printf("  %s\n", dcptopk_last_error(NULL));
    CHECK_CONTAINS(dcptopk_last_error(NULL), "must stay below 2^31");
    p.rows = T;
    p.struct_size = (uint32_t)offsetof(dcptopk_pair_select_args, indptr_out);
    p.indptr_out = (int32_t *)(uintptr_t)1;
    CHECK_OK(dcptopk_ref_pair_select(&pc, &p));
}
