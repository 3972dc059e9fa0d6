/* test_one_answer.c - every CPU path against the one-GPU oracle
 * (dc_brute_one_gpu_*, tests/util/brute.c): the flat packed merge with its
 * saturation and rescue, the hierarchical merge for every node size that
 * divides W, and the pair merge (fp32 key, each rank's stable local top K),
 * for W = 1..16 and interleave 1, 2 and 64, on the one-answer families
 * (tests/util/ties.c). Each path must return exactly the oracle's set, in
 * ascending (owner, local id) order, the same row on every rank; the
 * saturation words must be those computed from first principles
 * (dc_brute_saturation). */
#include <stdlib.h>
#include <string.h>

#include "brute.h"
#include "dcptopk.h"
#include "gen.h"
#include "harness.h"
#include "ties.h"

/* The hand-built worlds name their one row; the families name theirs. */
static const char *hand_label;

static const char *name_of(int64_t t)
{
    return hand_label ? hand_label : dc_ties_row_name(t);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* 0 when row t of ids[0..w) is the oracle's answer (want[0..nwant), gids
 * ascending) on every rank, in ascending (owner, local id) order. */
static int check_ids(const char *path, const dcptopk_merge_config *c,
                     int32_t *const *ids, int64_t t, const int64_t *want,
                     int64_t nwant)
{
    const int32_t w = c->world_size, k = c->topk, s = c->interleave;
    const int32_t *row = ids[0] + t * k;
    for (int32_t q = 1; q < w; q++)
        if (memcmp(ids[q] + t * k, row, sizeof *row * (size_t)k)) {
            DC_FAIL_AT("%s W=%d S=%d K=%d N=%d row %lld (%s): rank %d's ids "
                       "differ from rank 0's",
                       path, w, s, k, c->local_topk, (long long)t,
                       name_of(t), q);
            return 1;
        }
    int64_t got[4096], n = 0, prev_owner = -1, prev_l = -1;
    while (n < k && row[n] >= 0) {
        const int64_t g = row[n], owner = (g / s) % w,
                      l = (g / ((int64_t)w * s)) * s + g % s;
        if (owner < prev_owner || (owner == prev_owner && l <= prev_l)) {
            DC_FAIL_AT("%s W=%d S=%d row %lld (%s): id %lld out of (owner, "
                       "local id) order",
                       path, w, s, (long long)t, name_of(t),
                       (long long)g);
            return 1;
        }
        prev_owner = owner;
        prev_l = l;
        got[n++] = g;
    }
    for (int64_t i = n; i < k; i++)
        if (row[i] != -1) {
            DC_FAIL_AT("%s row %lld: ids[%lld] = %d after the padding", path,
                       (long long)t, (long long)i, row[i]);
            return 1;
        }
    qsort(got, (size_t)n, sizeof *got, cmp_i64);
    int64_t i = 0;
    while (i < n && i < nwant && got[i] == want[i])
        i++;
    if (n != nwant || i != n) {
        DC_FAIL_AT("%s W=%d S=%d K=%d N=%d row %lld (%s): %lld ids, the one "
                   "GPU %lld; first difference at #%lld: %lld vs %lld",
                   path, w, s, k, c->local_topk, (long long)t,
                   name_of(t), (long long)n, (long long)nwant,
                   (long long)i, (long long)(i < n ? got[i] : -1),
                   (long long)(i < nwant ? want[i] : -1));
        return 1;
    }
    return 0;
}

/* The pair path of world wd: each rank's stable local top K of its scores
 * (the bf16 logits widened to fp32; the one-rank oracle picks it), packed
 * by dcptopk_ref_pair_pack, merged by dcptopk_ref_pair_select. */
static int check_pair(const dcptopk_merge_config *packed, const dc_world *wd)
{
    dcptopk_merge_config c = *packed;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.local_topk = c.topk;
    c.exact = 0;
    const int32_t w = c.world_size, k = c.topk;
    const int64_t rows = wd->rows, stride = wd->stride;
    float *f[16];
    int32_t *ends[16], *ids[16];
    int32_t *cand = malloc(sizeof *cand * (size_t)(w * rows * k * 2));
    int32_t *local = malloc(sizeof *local * (size_t)(rows * k));
    int64_t *pick = malloc(sizeof *pick * (size_t)k);
    int bad = 0;
    for (int32_t q = 0; q < w; q++) {
        f[q] = malloc(sizeof **f * (size_t)(rows * stride));
        ends[q] = malloc(sizeof **ends * (size_t)rows);
        ids[q] = malloc(sizeof **ids * (size_t)(rows * k));
        for (int64_t i = 0; i < rows * stride; i++)
            f[q][i] = dc_bf16_to_f32(wd->logits[q][i]);
        for (int64_t t = 0; t < rows; t++) {
            int64_t e = wd->row_ends[q][t];
            e = e < 0 ? 0 : e > wd->max_local_len ? wd->max_local_len : e;
            ends[q][t] = (int32_t)e;
        }
        /* Rank q's stable local top K: the oracle over rank q alone. */
        const float *fq[1] = {f[q]};
        const int32_t *eq[1] = {ends[q]};
        for (int64_t t = 0; t < rows; t++) {
            int64_t m = dc_brute_one_gpu_f32(1, 1, fq, stride, eq, t, k, pick);
            for (int32_t j = 0; j < k; j++)
                local[t * k + j] = j < m ? (int32_t)pick[j] : -1;
        }
        dcptopk_pair_pack_args pa = DCPTOPK_PAIR_PACK_ARGS_INIT;
        pa.logits = f[q];
        pa.logits_stride = stride;
        pa.row_ends = ends[q];
        pa.local_ids = local;
        pa.rows = rows;
        pa.rank = q;
        pa.out = cand + (size_t)q * (size_t)(rows * k * 2);
        dcptopk_result r = dcptopk_ref_pair_pack(&c, &pa);
        if (r) {
            DC_FAIL_AT("pair pack rank %d: %s", q, dcptopk_last_error(NULL));
            bad = 1;
        }
    }
    for (int32_t q = 0; q < w && !bad; q++) {
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = cand;
        a.layout = DCPTOPK_LAYOUT_RANK_MAJOR;
        a.rows = rows;
        a.rank = q;
        a.ids_out = ids[q];
        dcptopk_result r = dcptopk_ref_pair_select(&c, &a);
        if (r) {
            DC_FAIL_AT("pair select: %s", dcptopk_last_error(NULL));
            bad = 1;
        }
    }
    int64_t *want = malloc(sizeof *want * (size_t)k);
    for (int64_t t = 0; t < rows && !bad; t++) {
        int64_t nw = dc_brute_one_gpu_f32(w, c.interleave,
                                          (const float *const *)f, stride,
                                          (const int32_t *const *)ends, t, k,
                                          want);
        bad = check_ids("pair", &c, ids, t, want, nw);
    }
    for (int32_t q = 0; q < w; q++) {
        free(f[q]);
        free(ends[q]);
        free(ids[q]);
    }
    free(want);
    free(cand);
    free(local);
    free(pick);
    return bad;
}

/* Every CPU path on world wd. Returns 0 or fails; *rescued_total gets the
 * flat merge's rescued rows. */
static int check_paths(const dcptopk_merge_config *cfg, dc_world *wd_in,
                       int64_t *rescued_total)
{
    const dcptopk_merge_config c = *cfg;
    const int32_t k = c.topk, n = c.local_topk, w = c.world_size,
                  s = c.interleave;
    const dc_world wd = *wd_in;
    const int64_t rows = wd.rows;
    int32_t *ids[16];
    uint32_t *sat[16];
    for (int32_t q = 0; q < w; q++) {
        ids[q] = malloc(sizeof **ids * (size_t)(rows * k));
        sat[q] = malloc(sizeof **sat * (size_t)rows);
    }
    int64_t *want = malloc(sizeof *want * (size_t)rows * (size_t)k);
    int64_t *nwant = malloc(sizeof *nwant * (size_t)rows);
    const uint16_t *const *lg = (const uint16_t *const *)wd.logits;
    const int32_t *const *re = (const int32_t *const *)wd.row_ends;
    for (int64_t t = 0; t < rows; t++)
        nwant[t] = dc_brute_one_gpu_bf16(w, s, lg, wd.stride,
                                         wd.max_local_len, re, t, k,
                                         want + t * k);
    int bad = 0;
    /* The flat merge (one node), its saturation words from first
     * principles; then every node size L < W that divides W. */
    for (int32_t l = w; l >= 1 && !bad; l--) {
        if (w % l)
            continue;
        const int32_t nodes = w / l;
        char path[48];
        snprintf(path, sizeof path, nodes == 1 ? "flat" : "hier L=%d", l);
        int64_t rescued = 0;
        dcptopk_result r = dcptopk_ref_hier_merge(
            &c, nodes, lg, wd.stride, wd.max_local_len, re, rows, ids, NULL,
            sat, &rescued);
        if (r) {
            DC_FAIL_AT("%s W=%d S=%d: %s", path, w, s,
                       dcptopk_last_error(NULL));
            bad = 1;
            break;
        }
        if (nodes == 1)
            *rescued_total += rescued;
        for (int64_t t = 0; t < rows && !bad; t++) {
            bad = check_ids(path, &c, ids, t, want + t * k, nwant[t]);
            /* Node d's saturation words: those of its L ranks' merge. */
            for (int32_t d = 0; d < nodes && !bad; d++) {
                uint16_t tau;
                int has_tau;
                const uint32_t mask = dc_brute_saturation(
                    l, s, n, k, lg + d * l, wd.stride, wd.max_local_len,
                    re + d * l, t, &tau, &has_tau);
                const uint32_t b = tau, key16 =
                    (b & 0x7FFFu) > 0x7F80u ? 0u
                    : (b & 0x8000u)         ? (~b & 0xFFFFu)
                                            : (b | 0x8000u);
                const uint32_t expect = (mask << 16) | (has_tau ? key16 : 0u);
                for (int32_t q = d * l; q < (d + 1) * l && !bad; q++)
                    if (sat[q][t] != expect) {
                        DC_FAIL_AT("%s W=%d S=%d K=%d N=%d row %lld (%s): "
                                   "rank %d saturation word 0x%08x, "
                                   "expected 0x%08x",
                                   path, w, s, k, n, (long long)t,
                                   name_of(t), q, sat[q][t], expect);
                        bad = 1;
                    }
                if (!bad && __builtin_popcount(mask) > (k - 1) / n) {
                    DC_FAIL_AT("row %lld: %d saturated ranks > (K-1)/N",
                               (long long)t, __builtin_popcount(mask));
                    bad = 1;
                }
            }
        }
    }
    if (!bad)
        bad = check_pair(&c, &wd);
    for (int32_t q = 0; q < w; q++) {
        free(ids[q]);
        free(sat[q]);
    }
    free(want);
    free(nwant);
    return bad;
}

static dcptopk_merge_config config_of(int32_t k, int32_t n, int32_t w,
                                      int32_t s)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = k;
    c.local_topk = n;
    c.world_size = w;
    c.interleave = s;
    return c;
}

/* The families for (K, N, W, S). */
static int check_world(int32_t k, int32_t n, int32_t w, int32_t s,
                       int64_t *rows_checked, int64_t *rescued_total)
{
    const dcptopk_merge_config c = config_of(k, n, w, s);
    dc_world wd;
    const int64_t rows = dc_ties_world(&wd, k, n, w);
    if (rows < 0) {
        DC_FAIL_AT("out of memory");
        return 1;
    }
    const int bad = check_paths(&c, &wd, rescued_total);
    *rows_checked += rows;
    dc_world_free(&wd);
    return bad;
}

static void run(int32_t k, int32_t n, int32_t s)
{
    int64_t rows = 0, rescued = 0;
    for (int32_t w = 1; w <= 16; w++)
        if (check_world(k, n, w, s, &rows, &rescued))
            return;
    printf("  K=%d N=%d S=%d: W 1..16, %lld rows per path, %lld rescued by "
           "the flat merge\n",
           k, n, s, (long long)rows, (long long)rescued);
    CHECK(rescued > 0);
}

TEST(one_answer_k64_n32_s1) { run(64, 32, 1); }
TEST(one_answer_k64_n32_s2) { run(64, 32, 2); }
TEST(one_answer_k64_n32_s64) { run(64, 32, 64); }
TEST(one_answer_k128_n32_s1) { run(128, 32, 1); }
TEST(one_answer_k128_n32_s64) { run(128, 32, 64); }
TEST(one_answer_k160_n64_s2) { run(160, 64, 2); }

/* A one-row world of W ranks with e columns each, every value v. */
static int one_row_world(dc_world *wd, int32_t w, int64_t e, uint16_t v)
{
    memset(wd, 0, sizeof *wd);
    wd->world_size = w;
    wd->rows = 1;
    wd->max_local_len = e;
    wd->stride = (e + 7) / 8 * 8;
    for (int32_t q = 0; q < w; q++) {
        wd->logits[q] = malloc(sizeof(uint16_t) * (size_t)wd->stride);
        wd->row_ends[q] = malloc(sizeof(int32_t));
        if (!wd->logits[q] || !wd->row_ends[q])
            return -1;
        for (int64_t l = 0; l < wd->stride; l++)
            wd->logits[q][l] = v;
        wd->row_ends[q][0] = (int32_t)e;
    }
    return 0;
}

/* The row: 2048 equal tokens, K = 512, on 2 ranks (N = 384): one
 * GPU keeps ids 0..511, whatever the interleave. */
TEST(one_answer_all_equal_2048)
{
    const int32_t s_list[3] = {1, 2, 64};
    for (int i = 0; i < 3; i++) {
        dc_world wd;
        CHECK(one_row_world(&wd, 2, 1024, 0x3F80) == 0);
        int64_t want[512], rescued = 0;
        const int64_t m = dc_brute_one_gpu_bf16(
            2, s_list[i], (const uint16_t *const *)wd.logits, wd.stride,
            wd.max_local_len, (const int32_t *const *)wd.row_ends, 0, 512,
            want);
        int ok = m == 512;
        for (int64_t j = 0; j < m && ok; j++)
            ok = want[j] == j;
        const dcptopk_merge_config c = config_of(512, 384, 2, s_list[i]);
        hand_label = "2048 equal tokens";
        const int bad = ok ? check_paths(&c, &wd, &rescued) : 1;
        hand_label = NULL;
        dc_world_free(&wd);
        CHECK_MSG(ok, "the oracle does not keep ids 0..511 (S=%d)",
                  s_list[i]);
        CHECK(!bad);
    }
}

/* A full, unsaturated rank with ties beyond its top N (W = 2, K = 64,
 * N = 32): rank 0 holds 200 tokens at 1.0, rank 1 holds 1.0 at local ids
 * 100..149 and -1.0 elsewhere. One GPU keeps rank 0's local ids 0..63
 * (global ids 0, 2, .., 126); rank 0 sends only 0..31, all at the K-th
 * score, so only a rescue of rank 0 finds the rest. */
TEST(one_answer_unsaturated_full_rank)
{
    dc_world wd;
    CHECK(one_row_world(&wd, 2, 200, 0x3F80) == 0);
    for (int64_t l = 0; l < 200; l++)
        wd.logits[1][l] = l >= 100 && l < 150 ? 0x3F80 : 0xBF80;
    int64_t want[64], rescued = 0;
    const int64_t m = dc_brute_one_gpu_bf16(
        2, 1, (const uint16_t *const *)wd.logits, wd.stride, wd.max_local_len,
        (const int32_t *const *)wd.row_ends, 0, 64, want);
    int ok = m == 64;
    for (int64_t j = 0; j < m && ok; j++)
        ok = want[j] == 2 * j;
    const dcptopk_merge_config c = config_of(64, 32, 2, 1);
    hand_label = "a full rank's ties past its top N";
    const int bad = ok ? check_paths(&c, &wd, &rescued) : 1;
    hand_label = NULL;
    dc_world_free(&wd);
    CHECK_MSG(ok, "the oracle does not keep global ids 0, 2, .., 126");
    CHECK(!bad);
    CHECK_EQ(rescued, 1);
}
