/* test_ref_checks.c - the oracle's small pieces: keys, ids and decoding; the
 * local top-N pack (tie rule, slot order) and the pack of given ids; the
 * contract checker (accepts ref_pack's output, reports each kind of
 * violation with its row and reason); and the argument checks shared with
 * the GPU entry points (DCPTOPK_INVALID_ARGUMENT naming the argument). */
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "gen.h"
#include "harness.h"

TEST(ord_keys_follow_the_contract)
{
    CHECK_EQ(dcptopk_ref_ord16(0x0000), 0x8000); /* +0.0 */
    CHECK_EQ(dcptopk_ref_ord16(0x8000), 0x7FFF); /* -0.0 just below */
    CHECK_EQ(dcptopk_ref_ord16(0x7F80), 0xFF80); /* +inf */
    CHECK_EQ(dcptopk_ref_ord16(0xFF80), 0x007F); /* -inf: the lowest */
    CHECK_EQ(dcptopk_ref_ord16(0x3F80), 0xBF80); /* 1.0 */
    CHECK_EQ(dcptopk_ref_ord16(0xBF80), 0x407F); /* -1.0 */
    CHECK_EQ(dcptopk_ref_ord16(0x7FC0), 0);      /* NaNs */
    CHECK_EQ(dcptopk_ref_ord16(0x7F81), 0);
    CHECK_EQ(dcptopk_ref_ord16(0xFFC0), 0);
    CHECK_EQ(dcptopk_ref_ord16(0xFFFF), 0);
    CHECK_EQ(dcptopk_ref_ord32(0x00000000u), 0x80000000u);
    CHECK_EQ(dcptopk_ref_ord32(0x80000000u), 0x7FFFFFFFu);
    CHECK_EQ(dcptopk_ref_ord32(0xFF800000u), 0x007FFFFFu);
    CHECK_EQ(dcptopk_ref_ord32(0x7F800000u), 0xFF800000u);
    CHECK_EQ(dcptopk_ref_ord32(0x7F800001u), 0);
    CHECK_EQ(dcptopk_ref_ord32(0xFFC00000u), 0);
    /* Order preserved over every non-NaN bf16 pattern. */
    for (uint32_t a = 0; a < 0x10000; a++) {
        float fa = dc_bf16_to_f32((uint16_t)a);
        if (fa != fa)
            continue;
        CHECK(dcptopk_ref_ord16((uint16_t)a) >= 0x007F);
        uint32_t b = (a + 1) & 0xFFFF;
        float fb = dc_bf16_to_f32((uint16_t)b);
        if (fb != fb || (fa == 0 && fb == 0))
            continue;
        CHECK_EQ(fa < fb, dcptopk_ref_ord16((uint16_t)a) <
                              dcptopk_ref_ord16((uint16_t)b));
    }
    CHECK_EQ(dc_f32_to_bf16(1.0f), 0x3F80);
    CHECK_EQ(dc_f32_to_bf16(dc_f32_from_bits(0x3F808000u)), 0x3F80); /* tie: even */
    CHECK_EQ(dc_f32_to_bf16(dc_f32_from_bits(0x3F818000u)), 0x3F82); /* tie: even */
    CHECK_EQ(dc_f32_to_bf16(dc_f32_from_bits(0x3F808001u)), 0x3F81);
}

TEST(global_ids_and_decode)
{
    CHECK_EQ(dcptopk_ref_global_id(5, 2, 4, 1), 22);
    CHECK_EQ(dcptopk_ref_global_id(5, 2, 4, 2), 21); /* (5/2)*8 + 2*2 + 1 */
    CHECK_EQ(dcptopk_ref_global_id(0, 0, 1, 1), 0);
    CHECK_EQ(dcptopk_ref_global_id(-1, 0, 1, 1), -1);
    CHECK_EQ(dcptopk_ref_global_id(3, 4, 4, 1), -1); /* owner out of range */
    /* A packed row of N = 32 with one word for local id 0x1ABCD. */
    int32_t row[33] = {0};
    uint32_t l = 0x1ABCD;
    row[7] = (int32_t)((0xBF80u << 16) | (0xFFFFu - (l & 0xFFFF)));
    row[32] = 1 << 7;
    dcptopk_ref_candidate d = dcptopk_ref_decode(row, 32, 7, 3, 8, 1);
    CHECK_EQ(d.ord16, 0xBF80);
    CHECK_EQ(d.local_id, 0x1ABCD);
    CHECK_EQ(d.global_id, 0x1ABCD * 8 + 3);
    d = dcptopk_ref_decode(row, 32, 6, 3, 8, 1);
    CHECK_EQ(d.ord16, 0);
    CHECK_EQ(d.local_id, -1);
}

/* Local top-N of one row by first principles: (score desc, l asc), first
 * min(N, v), listed by ascending l. Returns the count. */
static int32_t expected_sent(const uint16_t *row, int64_t e, int32_t n,
                             int32_t *sent)
{
    int32_t count = 0;
    /* Selection by repeated best-of-the-rest: slow and obvious. */
    uint8_t *taken = calloc((size_t)e + 1, 1);
    for (int32_t i = 0; i < n; i++) {
        int64_t best = -1;
        for (int64_t l = 0; l < e; l++) {
            uint32_t k = dcptopk_ref_ord16(row[l]);
            if (taken[l] || k == 0)
                continue;
            if (best < 0 || k > dcptopk_ref_ord16(row[best]))
                best = l;
        }
        if (best < 0)
            break;
        taken[best] = 1;
        count++;
    }
    int32_t j = 0;
    for (int64_t l = 0; l < e; l++)
        if (taken[l])
            sent[j++] = (int32_t)l;
    free(taken);
    return count;
}

TEST(pack_tie_rule_and_slot_order)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 128;
    c.local_topk = 64;
    int64_t rows = 24, stride = 400;
    uint16_t *logits = malloc(sizeof *logits * (size_t)(rows * stride));
    int32_t ends[24], *out = malloc(sizeof *out * (size_t)(rows * 66));
    int32_t sent[64];
    dc_rng rng;
    dc_rng_seed(&rng, 5);
    for (int64_t t = 0; t < rows; t++) {
        dc_gen_bf16_row(&rng, (int)(t % 8), logits + t * stride, stride);
        ends[t] = (int32_t)(t % 5 == 0 ? dc_rng_range(&rng, -2, 70)
                                       : dc_rng_range(&rng, 0, stride));
    }
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    a.logits = logits;
    a.logits_stride = stride;
    a.max_local_len = 390;
    a.row_ends = ends;
    a.rows = rows;
    a.out = out;
    CHECK_OK(dcptopk_ref_pack(&c, &a));
    for (int64_t t = 0; t < rows; t++) {
        int64_t e = ends[t] < 0 ? 0 : ends[t] > 390 ? 390 : ends[t];
        int32_t n = expected_sent(logits + t * stride, e, 64, sent);
        for (int32_t j = 0; j < 64; j++) {
            dcptopk_ref_candidate d =
                dcptopk_ref_decode(out + t * 66, 64, j, 0, 1, 1);
            CHECK_EQ(d.local_id, j < n ? sent[j] : -1);
            if (j < n)
                CHECK_EQ(d.ord16, dcptopk_ref_ord16(logits[t * stride + sent[j]]));
        }
        /* Empty slots carry no plane bit. */
        CHECK_EQ(out[t * 66 + 64] & ~(int32_t)(n >= 32 ? 0xFFFFFFFFu
                                                      : ((1u << n) - 1)),
                 0);
    }
    int64_t bad = 7;
    CHECK_OK(dcptopk_ref_check_contract(&c, out, logits, stride, 390, ends,
                                        rows, &bad));
    CHECK_EQ(bad, -1);
    free(logits);
    free(out);
}

TEST(pack_indices_slots)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 64;
    c.local_topk = 32;
    _Alignas(16) uint16_t logits[2 * 136];
    for (int i = 0; i < 2 * 136; i++)
        logits[i] = dc_f32_to_bf16((float)i);
    logits[10] = DC_BF16_NAN;
    int32_t ends[2] = {100, -3};
    int32_t ids[2 * 40];
    for (int j = 0; j < 80; j++)
        ids[j] = j * 3 - 6; /* negatives, in range, past the end */
    ids[5] = 10;           /* NaN logit */
    ids[6] = 11;
    ids[7] = 11; /* duplicate: the caller's business */
    int32_t out[2 * 33];
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    a.logits = logits;
    a.logits_stride = 136;
    a.max_local_len = 130;
    a.row_ends = ends;
    a.local_ids = ids;
    a.local_ids_stride = 40;
    a.rows = 2;
    a.out = out;
    CHECK_OK(dcptopk_ref_pack_indices(&c, &a));
    for (int j = 0; j < 32; j++) {
        int32_t l = ids[j];
        int valid = l >= 0 && l < 100 && l != 10;
        dcptopk_ref_candidate d = dcptopk_ref_decode(out, 32, j, 0, 1, 1);
        CHECK_EQ(d.local_id, valid ? l : -1);
        if (valid)
            CHECK_EQ(d.ord16, dcptopk_ref_ord16(logits[l]));
        /* Row 1 has a negative row end: every slot empty. */
        CHECK_EQ(out[33 + j], 0);
    }
    /* The duplicate is reported by the contract checker. */
    int64_t bad = -5;
    CHECK_EQ(dcptopk_ref_check_contract(&c, out, logits, 136, 130, ends, 1,
                                        &bad),
             DCPTOPK_CONTRACT_VIOLATION);
    CHECK_EQ(bad, 0);
}

/* ----------------------------------------------------- contract checker */

typedef struct contract_case {
    dcptopk_merge_config c;
    int64_t rows, stride;
    uint16_t *logits;
    int32_t ends[6];
    int32_t *packed;
} contract_case;

static void contract_init(contract_case *k)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 128;
    c.local_topk = 64;
    k->c = c;
    k->rows = 6;
    k->stride = 304;
    k->logits = malloc(sizeof(uint16_t) * 6 * 304);
    k->packed = malloc(sizeof(int32_t) * 6 * 66);
    dc_rng rng;
    dc_rng_seed(&rng, 99);
    for (int64_t i = 0; i < 6 * 304; i++)
        k->logits[i] = dc_f32_to_bf16((float)dc_rng_normal(&rng));
    for (int t = 0; t < 6; t++)
        k->ends[t] = 250; /* > N: some tokens unsent */
    k->ends[4] = 40;      /* < N: every token sent */
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    a.logits = k->logits;
    a.logits_stride = k->stride;
    a.max_local_len = 300;
    a.row_ends = k->ends;
    a.rows = 6;
    a.out = k->packed;
    dcptopk_ref_pack(&k->c, &a);
}

static void contract_free(contract_case *k)
{
    free(k->logits);
    free(k->packed);
}

static uint32_t word_of(uint16_t logit, int32_t l)
{
    return (dcptopk_ref_ord16(logit) << 16) | (0xFFFFu - ((uint32_t)l & 0xFFFF));
}

/* Runs the checker, expecting a violation at `row` whose message contains
 * `reason`. */
#define EXPECT_VIOLATION(k, row, reason)                                       \
    do {                                                                       \
        int64_t bad_ = -9;                                                     \
        CHECK_EQ(dcptopk_ref_check_contract(&(k)->c, (k)->packed, (k)->logits, \
                                            (k)->stride, 300, (k)->ends, 6,    \
                                            &bad_),                            \
                 DCPTOPK_CONTRACT_VIOLATION);                                  \
        CHECK_EQ(bad_, row);                                                   \
        char want_[32];                                                        \
        snprintf(want_, sizeof want_, "row %d:", (int)(row));                  \
        CHECK_CONTAINS(dcptopk_last_error(NULL), want_);                       \
        CHECK_CONTAINS(dcptopk_last_error(NULL), reason);                      \
        printf("  reported: %s\n", dcptopk_last_error(NULL));                  \
    } while (0)

TEST(contract_checker_accepts_ref_pack)
{
    contract_case k;
    contract_init(&k);
    int64_t bad = 3;
    CHECK_OK(dcptopk_ref_check_contract(&k.c, k.packed, k.logits, k.stride,
                                        300, k.ends, 6, &bad));
    CHECK_EQ(bad, -1);
    contract_free(&k);
}

TEST(contract_checker_reports_each_violation)
{
    contract_case k;
    /* count: a word dropped */
    contract_init(&k);
    k.packed[2 * 66 + 10] = 0;
    EXPECT_VIOLATION(&k, 2, "count");
    contract_free(&k);
    /* duplicate id: slot 3 repeated in slot 9 (with its plane bit) */
    contract_init(&k);
    {
        int32_t *row = k.packed + 1 * 66;
        row[9] = row[3];
        uint32_t bit = ((uint32_t)row[64] >> 3) & 1;
        row[64] = (int32_t)(((uint32_t)row[64] & ~(1u << 9)) | (bit << 9));
    }
    EXPECT_VIOLATION(&k, 1, "duplicate id");
    contract_free(&k);
    /* id past row_end: row 4 ends at 40; send local id 41 instead */
    contract_init(&k);
    k.packed[4 * 66 + 0] = (int32_t)word_of(k.logits[4 * 304 + 41], 41);
    EXPECT_VIOLATION(&k, 4, "past row_end");
    contract_free(&k);
    /* score mismatch: one ord16 off by one */
    contract_init(&k);
    k.packed[3 * 66 + 20] = (int32_t)((uint32_t)k.packed[3 * 66 + 20] + 0x10000u);
    EXPECT_VIOLATION(&k, 3, "score mismatch");
    contract_free(&k);
    /* NaN sent: the logit under a sent word becomes NaN */
    contract_init(&k);
    {
        dcptopk_ref_candidate d = dcptopk_ref_decode(k.packed + 5 * 66, 64, 0,
                                                     0, 1, 1);
        k.logits[5 * 304 + d.local_id] = DC_BF16_NAN;
    }
    EXPECT_VIOLATION(&k, 5, "NaN sent");
    contract_free(&k);
    /* unsent above the lowest sent: the best sent token swapped for the best
     * unsent one (count, ids and scores stay valid) */
    contract_init(&k);
    {
        int32_t *row = k.packed + 0 * 66;
        uint16_t *lrow = k.logits;
        int32_t best_j = -1, sent[304] = {0};
        uint32_t best = 0;
        for (int32_t j = 0; j < 64; j++) {
            dcptopk_ref_candidate d = dcptopk_ref_decode(row, 64, j, 0, 1, 1);
            sent[d.local_id] = 1;
            if (d.ord16 > best) {
                best = d.ord16;
                best_j = j;
            }
        }
        int32_t unsent = -1;
        for (int32_t l = 0; l < 250; l++)
            if (!sent[l] && (unsent < 0 || dcptopk_ref_ord16(lrow[l]) >
                                               dcptopk_ref_ord16(lrow[unsent])))
                unsent = l;
        CHECK(best_j >= 0 && unsent >= 0);
        row[best_j] = (int32_t)word_of(lrow[unsent], unsent);
        uint32_t bit = (uint32_t)(unsent >> 16) & 1, *plane =
                                                       (uint32_t *)&row[64 + best_j / 32];
        *plane = (*plane & ~(1u << (best_j % 32))) | (bit << (best_j % 32));
    }
    EXPECT_VIOLATION(&k, 0, "unsent");
    contract_free(&k);
}

/* --------------------------------------------------------- bad arguments */

#define EXPECT_INVALID(expr, needle)                                           \
    do {                                                                       \
        CHECK_EQ((expr), DCPTOPK_INVALID_ARGUMENT);                            \
        CHECK_CONTAINS(dcptopk_last_error(NULL), needle);                      \
        n_cases++;                                                             \
    } while (0)

TEST(bad_arguments_are_named)
{
    int n_cases = 0;
    _Alignas(16) uint16_t logits[64 * 2] = {0};
    int32_t ends[2] = {64, 64}, out[2 * 66], ids[2 * 128];
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT; /* K 2048, N 384 */
    dcptopk_merge_config small = c;
    small.topk = 128;
    small.local_topk = 64;
    small.world_size = 2;

    /* configs */
    dcptopk_merge_config b = c;
    b.local_topk = 2048;
    EXPECT_INVALID(dcptopk_merge_config_check(&b),
                   "config->local_topk = 2048: must be below topk = 2048 for "
                   "the packed merge");
    b = c;
    b.local_topk = 48;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->local_topk = 48");
    b = c;
    b.topk = 4128;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->topk = 4128");
    b = c;
    b.world_size = 0;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->world_size = 0");
    b = c;
    b.block_size = -1;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->block_size = -1");
    b = c;
    b.interleave = 0;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->interleave = 0");
    b = c;
    b.interleave = 3;
    EXPECT_INVALID(dcptopk_merge_config_check(&b),
                   "config->interleave = 3: must be a power of two");
    b = c;
    b.emit_ids = 0;
    b.block_size = 0;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->emit_ids = 0");
    b = c;
    b.exact = 2;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->exact = 2");
    b = c;
    b.kind = 7;
    EXPECT_INVALID(dcptopk_merge_config_check(&b), "config->kind = 7");
    b = c;
    b.kind = DCPTOPK_MERGE_PAIR;
    b.local_topk = 384;
    EXPECT_INVALID(dcptopk_merge_config_check(&b),
                   "config->local_topk = 384: must equal topk = 2048");
    EXPECT_INVALID(dcptopk_merge_config_check(NULL), "config is NULL");

    /* pack */
    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.logits = logits;
    p.logits_stride = 64;
    p.max_local_len = 64;
    p.row_ends = ends;
    p.rows = 2;
    p.out = out;
    CHECK_OK(dcptopk_ref_pack(&small, &p));
    dcptopk_pack_args q = p;
    q.logits_stride = 7;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q),
                   "args->logits_stride = 7: must be a positive multiple of 8");
    q = p;
    q.max_local_len = 200000;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->max_local_len = 200000");
    q = p;
    q.max_local_len = 72;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q),
                   "args->logits_stride = 64: must be >= args->max_local_len");
    q = p;
    q.rows = -1;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->rows = -1");
    q = p;
    q.struct_size = 3;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->struct_size = 3");
    q = p;
    q.logits = NULL;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->logits is NULL");
    q = p;
    q.row_ends = NULL;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->row_ends is NULL");
    q = p;
    q.out = NULL;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->out is NULL");
    q = p;
    q.logits = (const uint16_t *)((const char *)logits + 2);
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "must be 16-byte aligned");
    q = p;
    q.local_ids = ids;
    EXPECT_INVALID(dcptopk_ref_pack(&small, &q), "args->local_ids");
    EXPECT_INVALID(dcptopk_ref_pack_indices(&small, &p),
                   "args->local_ids is NULL");
    q = p;
    q.local_ids = ids;
    q.local_ids_stride = 10;
    EXPECT_INVALID(dcptopk_ref_pack_indices(&small, &q),
                   "args->local_ids_stride = 10");
    EXPECT_INVALID(dcptopk_ref_pack(&small, NULL), "args is NULL");
    b = small;
    b.kind = DCPTOPK_MERGE_PAIR;
    b.local_topk = 128;
    EXPECT_INVALID(dcptopk_ref_pack(&b, &p), "config->kind = 1");

    /* select */
    dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
    s.gathered = out;
    s.rows = 1;
    s.rank = 0;
    s.ids_out = ids;
    s.logits = logits;
    s.logits_stride = 64;
    s.max_local_len = 64;
    s.row_ends = ends;
    uint32_t sat[2];
    CHECK_OK(dcptopk_ref_select(&small, &s, sat));
    dcptopk_select_args u = s;
    u.rank = 2;
    EXPECT_INVALID(dcptopk_ref_select(&small, &u, sat),
                   "args->rank = 2: must be in [0, world_size = 2)");
    u = s;
    u.rows = 2;
    u.rank_stride_rows = 1;
    EXPECT_INVALID(dcptopk_ref_select(&small, &u, sat),
                   "args->rank_stride_rows = 1");
    u = s;
    u.ids_out_stride = 100;
    EXPECT_INVALID(dcptopk_ref_select(&small, &u, sat),
                   "args->ids_out_stride = 100");
    u = s;
    u.gathered = NULL;
    EXPECT_INVALID(dcptopk_ref_select(&small, &u, sat),
                   "args->gathered is NULL");
    u = s;
    u.logits = NULL;
    EXPECT_INVALID(dcptopk_ref_select(&small, &u, sat), "args->logits is NULL");
    b = small;
    b.emit_ids = 0;
    b.block_size = 16;
    EXPECT_INVALID(dcptopk_ref_select(&b, &s, sat),
                   "args->ids_out is set but config->emit_ids = 0");
    /* rows map */
    int32_t req[2] = {0, 0}, table[4] = {1, 2, 3, 4}, rows_out[2 * 128], cnt[2];
    u = s;
    u.rows_map.req_id = req;
    u.rows_map.block_table = table;
    u.rows_map.block_table_stride = 4;
    u.rows_map.block_table_cols = 4;
    u.rows_map.num_reqs = 1;
    u.rows_map.stride_rows = 16;
    u.rows_map.rows_out = rows_out;
    u.rows_map.counts_out = cnt;
    b = small;
    b.block_size = 0;
    EXPECT_INVALID(dcptopk_ref_select(&b, &u, sat),
                   "config->block_size = 0: physical rows need block_size > 0");
    b.block_size = 16;
    CHECK_OK(dcptopk_ref_select(&b, &u, sat));
    dcptopk_select_args v = u;
    v.rows_map.block_table_stride = 3;
    EXPECT_INVALID(dcptopk_ref_select(&b, &v, sat),
                   "args->rows_map.block_table_stride = 3");
    v = u;
    v.rows_map.req_id = NULL;
    EXPECT_INVALID(dcptopk_ref_select(&b, &v, sat),
                   "args->rows_map.req_id is NULL");
    v = u;
    v.rows_map.counts_out = NULL;
    EXPECT_INVALID(dcptopk_ref_select(&b, &v, sat),
                   "args->rows_map.counts_out is NULL");
    v = u;
    v.rows_map.rows_out_stride = 5;
    EXPECT_INVALID(dcptopk_ref_select(&b, &v, sat),
                   "args->rows_map.rows_out_stride = 5");
    v = u;
    v.rows_map.num_reqs = -1;
    EXPECT_INVALID(dcptopk_ref_select(&b, &v, sat),
                   "args->rows_map.num_reqs = -1");
    v = u;
    v.rows_map.rows_out = NULL;
    EXPECT_INVALID(dcptopk_ref_select(&b, &v, sat),
                   "args->rows_map.counts_out is set");

    /* rescue, push */
    const int32_t *push[1] = {NULL};
    EXPECT_INVALID(dcptopk_ref_rescue_row(&small, &s, 1, 0x10000u, push),
                   "t = 1");
    EXPECT_INVALID(dcptopk_ref_rescue_row(&small, &s, 0, 0x40000u, push),
                   "sat_word = 0x00040000");
    EXPECT_INVALID(dcptopk_ref_rescue_row(&small, &s, 0, 0x10000u, push),
                   "push[0] is NULL");
    EXPECT_INVALID(dcptopk_ref_rescue_row(&small, &s, 0, 0x10000u, NULL),
                   "push is NULL");
    EXPECT_INVALID(dcptopk_ref_push_list(&small, logits, 200000, 5, ids),
                   "max_local_len = 200000");
    EXPECT_INVALID(dcptopk_ref_push_list(&small, NULL, 64, 5, ids),
                   "logits_row is NULL");

    /* packed merge */
    const uint16_t *lg[2] = {logits, NULL};
    const int32_t *re[2] = {ends, ends};
    EXPECT_INVALID(dcptopk_ref_packed_merge(&small, lg, 64, 64, re, 1, NULL,
                                            NULL, NULL, NULL),
                   "logits[1] is NULL");
    lg[1] = logits;
    EXPECT_INVALID(dcptopk_ref_packed_merge(&small, lg, 63, 64, re, 1, NULL,
                                            NULL, NULL, NULL),
                   "args->logits_stride = 63");
    EXPECT_INVALID(dcptopk_ref_packed_merge(&small, NULL, 64, 64, re, 1, NULL,
                                            NULL, NULL, NULL),
                   "logits is NULL");

    /* pair select / pack */
    dcptopk_merge_config pc = small;
    pc.kind = DCPTOPK_MERGE_PAIR;
    pc.local_topk = 128;
    int32_t cand[2 * 128 * 2] = {0};
    dcptopk_pair_select_args ps = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    ps.candidates = cand;
    ps.rows = 1;
    ps.ids_out = ids;
    CHECK_OK(dcptopk_ref_pair_select(&pc, &ps));
    dcptopk_pair_select_args pt = ps;
    pt.layout = 4;
    EXPECT_INVALID(dcptopk_ref_pair_select(&pc, &pt), "args->layout = 4");
    pt = ps;
    pt.layout = DCPTOPK_LAYOUT_ROW_MAJOR;
    pt.rank_stride_rows = 4;
    EXPECT_INVALID(dcptopk_ref_pair_select(&pc, &pt),
                   "args->rank_stride_rows = 4: must be 0 with the row-major");
    pt = ps;
    pt.candidates = NULL;
    EXPECT_INVALID(dcptopk_ref_pair_select(&pc, &pt),
                   "args->candidates is NULL");
    pt = ps;
    pt.struct_size = 8;
    EXPECT_INVALID(dcptopk_ref_pair_select(&pc, &pt), "args->struct_size = 8");
    EXPECT_INVALID(dcptopk_ref_pair_select(&small, &ps), "config->kind = 0");
    float flog[128] = {0};
    dcptopk_pair_pack_args pp = DCPTOPK_PAIR_PACK_ARGS_INIT;
    pp.logits = flog;
    pp.logits_stride = 128;
    pp.local_ids = ids;
    pp.rows = 1;
    pp.out = cand;
    CHECK_OK(dcptopk_ref_pair_pack(&pc, &pp));
    dcptopk_pair_pack_args pq = pp;
    pq.rank = -1;
    EXPECT_INVALID(dcptopk_ref_pair_pack(&pc, &pq), "args->rank = -1");
    pq = pp;
    pq.logits_stride = 0;
    EXPECT_INVALID(dcptopk_ref_pair_pack(&pc, &pq), "args->logits_stride = 0");
    pq = pp;
    pq.local_ids_stride = 64;
    EXPECT_INVALID(dcptopk_ref_pair_pack(&pc, &pq),
                   "args->local_ids_stride = 64");
    pq = pp;
    pq.out = NULL;
    EXPECT_INVALID(dcptopk_ref_pair_pack(&pc, &pq), "args->out is NULL");

    /* contract checker */
    int64_t bad;
    EXPECT_INVALID(dcptopk_ref_check_contract(&small, NULL, logits, 64, 64,
                                              ends, 1, &bad),
                   "packed is NULL");
    EXPECT_INVALID(dcptopk_ref_check_contract(&small, out, logits, 64, 65,
                                              ends, 1, &bad),
                   "max_local_len = 65");
    printf("%d bad-argument cases refused with the argument named\n", n_cases);
}
