/* test_ref_hier.c - dcptopk_ref_hier_merge (the model of the hierarchical
 * merge) against brute force, for W = 2..16 split into every node count that
 * divides it, on every input family:
 *  (i)   each row's scores equal brute force's global top K as a multiset;
 *  (ii)  the ids are real tokens, distinct, in ascending (owner, local id)
 *        order, identical on every rank, -1 after the last;
 *  (iii) the ids equal the flat merge's exactly, ties at the K-th score
 *        included (both are the one-GPU answer: test_one_answer);
 *  (iv)  each rank's physical rows are its owned ids through the block table.
 * Bad node counts are refused with the argument named. */
#include <stdlib.h>
#include <string.h>

#include "brute.h"
#include "dcptopk.h"
#include "gen.h"
#include "harness.h"

#define ROWS 3
#define BS 64

static int cmp_bits_desc(const void *a, const void *b)
{
    return dc_brute_cmp_value(a, b);
}

/* Owner and local id of a global id (the test's own inverse of the gid). */
static void split_gid(int64_t gid, int32_t w, int32_t s, int32_t *owner,
                      int64_t *local)
{
    *owner = (int32_t)((gid / s) % w);
    *local = (gid / ((int64_t)w * s)) * s + gid % s;
}

static int check_case(int32_t k, int32_t n, int32_t w, int32_t nodes,
                      int32_t s, int family, uint64_t seed, int64_t *ties)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = k;
    c.local_topk = n;
    c.world_size = w;
    c.interleave = s;
    c.block_size = BS;
    dc_world wd;
    if (dc_gen_world(&wd, family, k, n, w, ROWS, 3 * k, seed)) {
        DC_FAIL_AT("out of memory");
        return 1;
    }
    const int64_t cols = (wd.max_local_len + BS - 1) / BS;
    int32_t *ids[16], *flat[16], *rows_out[16], counts[16][ROWS];
    int32_t req[ROWS] = {0, 1, -1};
    int32_t *table = malloc(sizeof *table * (size_t)(2 * cols));
    for (int64_t i = 0; i < 2 * cols; i++)
        table[i] = (int32_t)(i * 7 + 1);
    dcptopk_rows_map maps[16];
    for (int32_t q = 0; q < w; q++) {
        ids[q] = malloc(sizeof(int32_t) * ROWS * (size_t)k);
        flat[q] = malloc(sizeof(int32_t) * ROWS * (size_t)k);
        rows_out[q] = malloc(sizeof(int32_t) * ROWS * (size_t)k);
        memset(&maps[q], 0, sizeof maps[q]);
        maps[q].req_id = req;
        maps[q].block_table = table;
        maps[q].block_table_stride = cols;
        maps[q].block_table_cols = cols;
        maps[q].num_reqs = 2;
        maps[q].stride_rows = BS;
        maps[q].rows_out = rows_out[q];
        maps[q].counts_out = counts[q];
    }
    dc_brute_item *top = malloc(sizeof *top * (size_t)(k + 1));
    dc_brute_item *got = malloc(sizeof *got * (size_t)k);
    int bad = 0;
    dcptopk_result r = dcptopk_ref_hier_merge(
        &c, nodes, (const uint16_t *const *)wd.logits, wd.stride,
        wd.max_local_len, (const int32_t *const *)wd.row_ends, ROWS, ids, maps,
        NULL, NULL);
    if (!r)
        r = dcptopk_ref_packed_merge(&c, (const uint16_t *const *)wd.logits,
                                     wd.stride, wd.max_local_len,
                                     (const int32_t *const *)wd.row_ends,
                                     ROWS, flat, NULL, NULL, NULL);
    if (r) {
        DC_FAIL_AT("W=%d nodes=%d %s: %s", w, nodes, dc_family_name(family),
                   dcptopk_last_error(NULL));
        bad = 1;
    }
    for (int64_t t = 0; t < ROWS && !bad; t++) {
        const int64_t m = dc_brute_packed_topk(
            w, s, (const uint16_t *const *)wd.logits, wd.stride,
            wd.max_local_len, (const int32_t *const *)wd.row_ends, t, k + 1,
            top);
        const int64_t want = m < k ? m : k;
        const int32_t *row = ids[0] + t * k;
        int64_t cnt = 0, prev_owner = -1, prev_local = -1;
        for (int32_t i = 0; i < k && !bad; i++) {
            if (row[i] < 0) {
                for (int32_t j = i; j < k; j++)
                    if (row[j] != -1)
                        bad = 1;
                break;
            }
            int32_t owner;
            int64_t local;
            split_gid(row[i], w, s, &owner, &local);
            const int32_t e = wd.row_ends[owner][t];
            if (local >= (e > 0 ? e : 0) || local >= wd.max_local_len ||
                owner < prev_owner ||
                (owner == prev_owner && local <= prev_local)) {
                DC_FAIL_AT("W=%d nodes=%d %s row %lld: id %d (owner %d local "
                           "%lld) invalid or out of order",
                           w, nodes, dc_family_name(family), (long long)t,
                           row[i], owner, (long long)local);
                bad = 1;
                break;
            }
            prev_owner = owner;
            prev_local = local;
            const uint16_t b = wd.logits[owner][t * wd.stride + local];
            uint32_t f = (uint32_t)b << 16;
            memcpy(&got[cnt].value, &f, 4);
            got[cnt].bits = b;
            cnt++;
        }
        if (bad)
            break;
        qsort(got, (size_t)cnt, sizeof *got, cmp_bits_desc);
        int same = cnt == want;
        for (int64_t i = 0; i < cnt && same; i++)
            same = got[i].bits == top[i].bits;
        if (!same) {
            DC_FAIL_AT("W=%d nodes=%d %s row %lld: %lld scores, brute %lld, "
                       "or another multiset",
                       w, nodes, dc_family_name(family), (long long)t,
                       (long long)cnt, (long long)want);
            bad = 1;
        }
        for (int32_t q = 1; q < w && !bad; q++)
            if (memcmp(ids[q] + t * k, row, sizeof(int32_t) * (size_t)k)) {
                DC_FAIL_AT("W=%d nodes=%d row %lld: rank %d's ids differ",
                           w, nodes, (long long)t, q);
                bad = 1;
            }
        const int boundary_tie =
            m > k && dc_brute_cmp_value(&top[k - 1], &top[k]) == 0;
        *ties += boundary_tie;
        if (!bad && memcmp(flat[0] + t * k, row, sizeof(int32_t) * (size_t)k)) {
            DC_FAIL_AT("W=%d nodes=%d %s row %lld (%s): the ids differ from "
                       "the flat merge's",
                       w, nodes, dc_family_name(family), (long long)t,
                       boundary_tie ? "tied at the K-th score" : "no tie");
            bad = 1;
        }
        for (int32_t q = 0; q < w && !bad; q++) {
            int32_t owned = 0;
            for (int32_t i = 0; i < k && row[i] >= 0; i++) {
                int32_t owner;
                int64_t local;
                split_gid(row[i], w, s, &owner, &local);
                if (owner != q || req[t] < 0 || local / BS >= cols)
                    continue;
                const int32_t want_row =
                    table[req[t] * cols + local / BS] * BS + (int32_t)(local % BS);
                if (rows_out[q][t * k + owned++] != want_row)
                    bad = 1;
            }
            if (bad || counts[q][t] != owned) {
                DC_FAIL_AT("W=%d nodes=%d row %lld: rank %d's rows differ",
                           w, nodes, (long long)t, q);
                bad = 1;
            }
        }
    }
    for (int32_t q = 0; q < w; q++) {
        free(ids[q]);
        free(flat[q]);
        free(rows_out[q]);
    }
    free(table);
    free(top);
    free(got);
    dc_world_free(&wd);
    return bad;
}

static void run(int32_t k, int32_t n, int32_t s, uint64_t seed)
{
    int64_t cases = 0, ties = 0;
    const int32_t ws[] = {2, 4, 6, 8, 16};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        for (int32_t nodes = 2; nodes <= ws[i]; nodes++) {
            if (ws[i] % nodes || (int64_t)ws[i] * n < k)
                continue;
            for (int fam = 0; fam < DC_FAM_COUNT; fam++) {
                if (fam == DC_FAM_LONG)
                    continue; /* 2^17 columns: test_ref_packed covers it */
                if (check_case(k, n, ws[i], nodes, s, fam,
                               seed + (uint64_t)(cases * 31), &ties))
                    return;
                cases++;
            }
        }
    printf("  K=%d N=%d interleave %d: %lld cases, %lld rows tied at the "
           "K-th score\n", k, n, s, (long long)cases, (long long)ties);
    CHECK(cases > 0);
}

TEST(hier_k512_n96) { run(512, 96, 1, 11); }
TEST(hier_k256_n64_interleave2) { run(256, 64, 2, 12); }
TEST(hier_k64_n32) { run(64, 32, 1, 13); }

TEST(hier_bad_nodes)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 64;
    c.local_topk = 32;
    c.world_size = 4;
    uint16_t row[64] = {0};
    const uint16_t *lg[4] = {row, row, row, row};
    int32_t end[1] = {64};
    const int32_t *ends[4] = {end, end, end, end};
    CHECK_EQ(dcptopk_ref_hier_merge(&c, 3, lg, 64, 64, ends, 1, NULL, NULL,
                                    NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "nodes = 3");
    CHECK_EQ(dcptopk_ref_hier_merge(&c, 0, lg, 64, 64, ends, 1, NULL, NULL,
                                    NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    c.exact = 0;
    CHECK_EQ(dcptopk_ref_hier_merge(&c, 2, lg, 64, 64, ends, 1, NULL, NULL,
                                    NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "exact");
}
