/* test_ref_packed.c - the CPU reference of the packed exact merge against
 * brute force, for every W in 1..16 and every (K, N) of the matrix, on every
 * input family of tests/util/gen.h:
 *  (i)   the merged scores equal brute force's top K as a multiset, on every
 *        rank, and every id is a real token (below its row end, not NaN,
 *        distinct);
 *  (ii)  the ids are identical on all ranks, in ascending (owner, local id)
 *        order (the position order of the contract);
 *  (iii) each rank's physical rows are exactly its owned selected ids mapped
 *        through the block table, in the same order (dropped past the table);
 *  (iv)  the saturation words equal a first-principles computation, the
 *        rescued rows are counted, and the concentrated families force them.
 * Every test prints how many rows of each family it checked. */
#include <stdlib.h>
#include <string.h>

#include "brute.h"
#include "dcptopk.h"
#include "dist_ranks.h"
#include "gen.h"
#include "harness.h"

#define ROWS 3

typedef struct fam_stats {
    int64_t rows[DC_FAM_COUNT];
    int64_t rescued[DC_FAM_COUNT];
    int64_t owned[DC_FAM_COUNT];
} fam_stats;

/* ord16 as defined in docs/CONTRACT.md (the test's own copy). */
static uint32_t ord16(uint16_t b)
{
    if ((b & 0x7FFF) > 0x7F80)
        return 0;
    return (b & 0x8000) ? (uint32_t)(~b & 0xFFFF) : (uint32_t)(b | 0x8000);
}

static int64_t row_bound(int32_t row_end, int64_t max_local_len)
{
    int64_t e = row_end > 0 ? row_end : 0;
    if (e > max_local_len)
        e = max_local_len;
    return e > (1 << 17) ? (1 << 17) : e;
}

/* One rank's block table and rows map buffers. */
typedef struct rank_map {
    int32_t *req_id, *table, *rows_out, *counts;
    dcptopk_rows_map map;
} rank_map;

static void map_init(rank_map *m, dc_rng *rng, int64_t rows, int32_t topk,
                     int32_t block_size, int64_t len, int short_table)
{
    int32_t num_reqs = (int32_t)rows + 1;
    int32_t cols = (int32_t)((len + block_size - 1) / block_size);
    if (short_table)
        cols = cols / 2;
    int64_t stride = cols + 3;
    m->req_id = malloc(sizeof(int32_t) * (size_t)rows + 4);
    m->table = malloc(sizeof(int32_t) * (size_t)(num_reqs * stride) + 4);
    m->rows_out = malloc(sizeof(int32_t) * (size_t)(rows * topk) + 4);
    m->counts = malloc(sizeof(int32_t) * (size_t)rows + 4);
    for (int64_t i = 0; i < num_reqs * stride; i++)
        m->table[i] = (int32_t)dc_rng_below(rng, 1u << 20);
    for (int64_t t = 0; t < rows; t++)
        m->req_id[t] = (int32_t)((t + 1) % num_reqs);
    /* The last row's request is out of range: it owns nothing. */
    if (rows > 1)
        m->req_id[rows - 1] = (rows % 2) ? -1 : num_reqs;
    memset(&m->map, 0, sizeof m->map);
    m->map.req_id = m->req_id;
    m->map.block_table = m->table;
    m->map.block_table_stride = stride;
    m->map.block_table_cols = cols;
    m->map.num_reqs = num_reqs;
    m->map.stride_rows = block_size + 5;
    m->map.rows_out = m->rows_out;
    m->map.rows_out_stride = topk;
    m->map.counts_out = m->counts;
}

static void map_free(rank_map *m)
{
    free(m->req_id);
    free(m->table);
    free(m->rows_out);
    free(m->counts);
}

static int cmp_item_value(const void *a, const void *b)
{
    int c = dc_brute_cmp_value(a, b);
    if (c)
        return c;
    const dc_brute_item *x = a, *y = b;
    return (x->bits > y->bits) - (x->bits < y->bits);
}

/* Checks one world; returns 0 or fails the test (message printed). */
static int check_world(const dcptopk_merge_config *c, const dc_world *w,
                       int family, fam_stats *st, dc_rng *rng)
{
    int32_t nw = c->world_size, k = c->topk, s = c->interleave;
    int64_t rows = w->rows;
    int32_t *ids[16], *ids_plain[16];
    uint32_t *sat[16];
    rank_map maps[16];
    dcptopk_rows_map rmaps[16];
    for (int32_t q = 0; q < nw; q++) {
        ids[q] = malloc(sizeof(int32_t) * (size_t)(rows * k) + 4);
        ids_plain[q] = malloc(sizeof(int32_t) * (size_t)(rows * k) + 4);
        sat[q] = malloc(sizeof(uint32_t) * (size_t)rows + 4);
        map_init(&maps[q], rng, rows, k, c->block_size, w->max_local_len,
                 q == 1);
        rmaps[q] = maps[q].map;
    }
    int64_t rescued = -1, rescued_plain = -1;
    int bad = 0;
    dcptopk_result r = dcptopk_ref_packed_merge(
        c, (const uint16_t *const *)w->logits, w->stride, w->max_local_len,
        (const int32_t *const *)w->row_ends, rows, ids, rmaps, sat, &rescued);
    if (r) {
        DC_FAIL_AT("ref_packed_merge: %s: %s", dcptopk_result_name(r),
                   dcptopk_last_error(NULL));
        bad = 1;
        goto out;
    }
    /* Without the rescue round: rows that nothing saturates are unchanged. */
    dcptopk_merge_config plain = *c;
    plain.exact = 0;
    r = dcptopk_ref_packed_merge(&plain, (const uint16_t *const *)w->logits,
                                 w->stride, w->max_local_len,
                                 (const int32_t *const *)w->row_ends, rows,
                                 ids_plain, NULL, NULL, &rescued_plain);
    if (r || rescued_plain != 0) {
        DC_FAIL_AT("non-exact merge: %s, rescued %lld",
                   dcptopk_last_error(NULL), (long long)rescued_plain);
        bad = 1;
        goto out;
    }
    dc_brute_item *want = malloc(sizeof *want * (size_t)k);
    dc_brute_item *got = malloc(sizeof *got * (size_t)k);
    int64_t expect_rescued = 0;
    for (int64_t t = 0; t < rows && !bad; t++) {
        const char *fam = dc_family_name(family);
        int64_t nwant = dc_brute_packed_topk(
            nw, s, (const uint16_t *const *)w->logits, w->stride,
            w->max_local_len, (const int32_t *const *)w->row_ends, t, k, want);
        const int32_t *row = ids[0] + t * k;
        /* (ii) same ids, same order, on every rank. */
        for (int32_t q = 1; q < nw && !bad; q++) {
            if (memcmp(ids[q] + t * k, row, sizeof(int32_t) * (size_t)k)) {
                DC_FAIL_AT("%s W=%d K=%d N=%d row %lld: rank %d ids differ "
                           "from rank 0",
                           fam, nw, k, c->local_topk, (long long)t, q);
                bad = 1;
            }
        }
        /* (i) real tokens, distinct, scores = brute force's multiset. */
        int64_t n = 0;
        while (n < k && row[n] >= 0)
            n++;
        for (int64_t i = n; i < k && !bad; i++)
            if (row[i] != -1) {
                DC_FAIL_AT("%s row %lld: ids[%lld] = %d after the padding",
                           fam, (long long)t, (long long)i, row[i]);
                bad = 1;
            }
        if (!bad && n != nwant) {
            DC_FAIL_AT("%s W=%d K=%d N=%d S=%d row %lld: %lld ids, brute "
                       "force has %lld",
                       fam, nw, k, c->local_topk, s, (long long)t,
                       (long long)n, (long long)nwant);
            bad = 1;
        }
        int64_t prev_owner = -1, prev_l = -1;
        for (int64_t i = 0; i < n && !bad; i++) {
            int64_t gid = row[i];
            int32_t owner = (int32_t)((gid / s) % nw);
            int64_t l = (gid / ((int64_t)nw * s)) * s + gid % s;
            int64_t e = row_bound(w->row_ends[owner][t], w->max_local_len);
            uint16_t bits = l < e ? w->logits[owner][t * w->stride + l] : 0;
            if (l >= e || ord16(bits) == 0) {
                DC_FAIL_AT("%s row %lld: id %lld (rank %d, local %lld) is "
                           "past row end %lld or NaN",
                           fam, (long long)t, (long long)gid, owner,
                           (long long)l, (long long)e);
                bad = 1;
                break;
            }
            if (owner < prev_owner || (owner == prev_owner && l <= prev_l)) {
                DC_FAIL_AT("%s row %lld: ids[%lld] = %lld out of (owner, "
                           "local id) order or repeated",
                           fam, (long long)t, (long long)i, (long long)gid);
                bad = 1;
                break;
            }
            prev_owner = owner;
            prev_l = l;
            got[i].value = dc_bf16_to_f32(bits);
            got[i].bits = bits;
            got[i].gid = gid;
            got[i].pos = 0;
        }
        if (bad)
            break;
        qsort(got, (size_t)n, sizeof *got, cmp_item_value);
        qsort(want, (size_t)n, sizeof *want, cmp_item_value);
        for (int64_t i = 0; i < n; i++) {
            if (got[i].bits != want[i].bits) {
                DC_FAIL_AT("%s W=%d K=%d N=%d row %lld: score #%lld is 0x%04x, "
                           "brute force 0x%04x",
                           fam, nw, k, c->local_topk, (long long)t,
                           (long long)i, got[i].bits, want[i].bits);
                bad = 1;
                break;
            }
        }
        /* (iii) owned physical rows. */
        for (int32_t q = 0; q < nw && !bad; q++) {
            const rank_map *m = &maps[q];
            int32_t req = m->req_id[t], cnt = 0;
            const int32_t *out = m->rows_out + t * k;
            for (int64_t i = 0; i < n && !bad; i++) {
                int64_t gid = row[i];
                if ((gid / s) % nw != q || req < 0 || req >= m->map.num_reqs)
                    continue;
                int64_t l = (gid / ((int64_t)nw * s)) * s + gid % s;
                int64_t blk = l / c->block_size;
                if (blk >= m->map.block_table_cols)
                    continue;
                int32_t expect =
                    m->table[req * m->map.block_table_stride + blk] *
                        m->map.stride_rows +
                    (int32_t)(l % c->block_size);
                if (out[cnt] != expect) {
                    DC_FAIL_AT("%s row %lld rank %d: rows_out[%d] = %d, "
                               "expected %d (id %lld)",
                               fam, (long long)t, q, cnt, out[cnt], expect,
                               (long long)gid);
                    bad = 1;
                }
                cnt++;
            }
            if (!bad && m->counts[t] != cnt) {
                DC_FAIL_AT("%s row %lld rank %d: count %d, expected %d", fam,
                           (long long)t, q, m->counts[t], cnt);
                bad = 1;
            }
            for (int32_t i = cnt; i < k && !bad; i++)
                if (out[i] != -1) {
                    DC_FAIL_AT("%s row %lld rank %d: rows_out[%d] = %d past "
                               "the count %d",
                               fam, (long long)t, q, i, out[i], cnt);
                    bad = 1;
                }
            st->owned[family] += cnt;
        }
        /* (iv) saturation words from first principles. */
        uint16_t tau_bits;
        int has_tau;
        uint32_t mask = dc_brute_saturation(
            nw, s, c->local_topk, k, (const uint16_t *const *)w->logits,
            w->stride, w->max_local_len, (const int32_t *const *)w->row_ends,
            t, &tau_bits, &has_tau);
        uint32_t expect_sat = (mask << 16) | (has_tau ? ord16(tau_bits) : 0);
        for (int32_t q = 0; q < nw && !bad; q++)
            if (sat[q][t] != expect_sat) {
                DC_FAIL_AT("%s W=%d K=%d N=%d row %lld rank %d: saturation "
                           "word 0x%08x, expected 0x%08x",
                           fam, nw, k, c->local_topk, (long long)t, q,
                           sat[q][t], expect_sat);
                bad = 1;
            }
        /* At most (K-1)/N ranks saturate a row (tau16 selects all N keys of
         * a saturated rank): the push kernel sizes its receive slots by this
         * and does not check the word it reads, so the oracle, which the
         * GPU's saturation words must equal bit for bit, must never exceed it. */
        if (!bad && __builtin_popcount(mask) > (k - 1) / c->local_topk) {
            DC_FAIL_AT("%s W=%d K=%d N=%d row %lld: %d saturated ranks, more "
                       "than (K-1)/N = %d receive slots",
                       fam, nw, k, c->local_topk, (long long)t,
                       __builtin_popcount(mask), (k - 1) / c->local_topk);
            bad = 1;
        }
        if (!bad && family == DC_FAM_CONC_SAT) {
            int32_t m = (k - 1) / c->local_topk;
            int32_t want_bits = m < nw ? m : nw;
            if (__builtin_popcount(mask) != want_bits) {
                DC_FAIL_AT("conc-(K-1)/N W=%d K=%d N=%d row %lld: %d "
                           "saturated ranks, expected %d",
                           nw, k, c->local_topk, (long long)t,
                           __builtin_popcount(mask), want_bits);
                bad = 1;
            }
        }
        if (!bad && family == DC_FAM_CONC_ONE && mask == 0) {
            DC_FAIL_AT("conc-one-rank W=%d K=%d N=%d row %lld: not saturated",
                       nw, k, c->local_topk, (long long)t);
            bad = 1;
        }
        if (!bad && mask == 0 &&
            memcmp(ids_plain[0] + t * k, row, sizeof(int32_t) * (size_t)k)) {
            DC_FAIL_AT("%s row %lld: unsaturated, yet the non-exact merge "
                       "differs",
                       fam, (long long)t);
            bad = 1;
        }
        expect_rescued += mask != 0;
        st->rows[family]++;
    }
    if (!bad && rescued != expect_rescued) {
        DC_FAIL_AT("%s W=%d: rescued_rows = %lld, expected %lld",
                   dc_family_name(family), nw, (long long)rescued,
                   (long long)expect_rescued);
        bad = 1;
    }
    st->rescued[family] += rescued > 0 ? rescued : 0;
    free(want);
    free(got);
out:
    for (int32_t q = 0; q < nw; q++) {
        free(ids[q]);
        free(ids_plain[q]);
        free(sat[q]);
        map_free(&maps[q]);
    }
    return bad;
}

static void print_stats(const char *what, const fam_stats *st)
{
    printf("%s: rows checked per family:\n", what);
    for (int f = 0; f < DC_FAM_COUNT; f++)
        printf("  %-16s %5lld rows, %5lld rescued, %7lld owned rows\n",
               dc_family_name(f), (long long)st->rows[f],
               (long long)st->rescued[f], (long long)st->owned[f]);
}

/* Whole matrix for one (K, N): every W, every family. The LONG family (2^17
 * columns per rank) is the slowest for brute force, so it runs on a subset
 * of W. */
static void run_matrix(int32_t topk, int32_t local_topk, uint64_t seed)
{
    fam_stats st;
    memset(&st, 0, sizeof st);
    dc_rng rng;
    dc_rng_seed(&rng, seed);
    for (int32_t nw = 1; nw <= 16; nw++) {
        for (int f = 0; f < DC_FAM_COUNT; f++) {
            if (f == DC_FAM_LONG && !(nw == 1 || nw == 3 || nw == 8 || nw == 16))
                continue;
            dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
            c.topk = topk;
            c.local_topk = local_topk;
            c.world_size = nw;
            c.block_size = (f % 2) ? 16 : 64;
            c.interleave = 1 << ((nw + f) % 3);
            c.exact = 1;
            int64_t len = dc_rng_range(&rng, local_topk / 2, 2 * topk);
            dc_world w;
            CHECK_EQ(dc_gen_world(&w, f, topk, local_topk, nw,
                                  f == DC_FAM_LONG ? 1 : ROWS, len,
                                  seed * 131 + (uint64_t)nw),
                     0);
            int bad = check_world(&c, &w, f, &st, &rng);
            dc_world_free(&w);
            if (bad)
                return;
        }
    }
    char what[64];
    snprintf(what, sizeof what, "packed K=%d N=%d, W=1..16", topk, local_topk);
    print_stats(what, &st);
    for (int f = DC_FAM_CONC_ONE; f <= DC_FAM_CONC_SAT; f++)
        CHECK_MSG(st.rescued[f] == st.rows[f], "%s: %lld of %lld rows rescued",
                  dc_family_name(f), (long long)st.rescued[f],
                  (long long)st.rows[f]);
}

TEST(packed_k2048_n384) { run_matrix(2048, 384, 1); }
TEST(packed_k2048_n256) { run_matrix(2048, 256, 2); }
TEST(packed_k2048_n2016) { run_matrix(2048, 2016, 3); }
TEST(packed_k1024_n160) { run_matrix(1024, 160, 4); }
TEST(packed_k512_n96) { run_matrix(512, 96, 5); }
TEST(packed_k64_n32) { run_matrix(64, 32, 6); }

/* The producer-rows oracle of the GPU procs_producer_packed tests
 * (dr_producer_world, tests/util/dist_ranks.c) at their shapes, on every
 * family the role cycles through: the reversed rows meet the contract, the
 * reference's select + rescue of them gives the one-GPU answer's id sets,
 * and saturated rows occur. */
TEST(producer_rows_oracle)
{
    static const int ws[] = {2, 4};
    for (int i = 0; i < 2 && !dc_test_failed; i++) {
        dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
        c.topk = 2048;
        c.local_topk = 384;
        c.world_size = ws[i];
        const int64_t rows = 48, words = dcptopk_packed_row_words(384);
        int32_t *ids[16];
        uint32_t *sat[16];
        for (int q = 0; q < ws[i]; q++) {
            ids[q] = malloc((size_t)rows * 2048 * 4);
            sat[q] = malloc((size_t)rows * 4);
        }
        int32_t *gathered = malloc((size_t)ws[i] * (size_t)rows *
                                   (size_t)words * 4);
        int64_t rescued = 0;
        for (int f = 0; f < DR_NFAM && !dc_test_failed; f++) {
            dc_world w;
            CHECK_EQ(dc_gen_world(&w, DR_FAMILIES[f], 2048, 384, ws[i], rows,
                                  4096, 3000 + (uint64_t)f),
                     0);
            const int64_t got =
                dr_producer_world(&c, &w, gathered, ids, sat);
            CHECK_MSG(got >= 0, "W=%d family %s", ws[i],
                      dc_family_name(DR_FAMILIES[f]));
            rescued += got > 0 ? got : 0;
            dc_world_free(&w);
        }
        CHECK_MSG(rescued > 0, "W=%d: no saturated row", ws[i]);
        printf("  W=%d: %lld rescued rows\n", ws[i], (long long)rescued);
        for (int q = 0; q < ws[i]; q++) {
            free(ids[q]);
            free(sat[q]);
        }
        free(gathered);
    }
}
