/* test_packed.c - the packed select (round 1, dcptopk_select with exact 0) and
 * pack_indices on the GPU against the CPU reference, bit for bit: ids, owned
 * rows and counts, for every W in {1,2,3,4,8,16} and (K, N) in {(2048,384),
 * (2048,256), (1024,192), (512,96)}, over the oracle's input families, plus
 * duplicate and junk words (the equal-key rule), and named bad arguments.
 * The gathered rows come from the reference pack, so the select is tested on
 * its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "gpu_util.h"
#include "harness.h"

static const int KN[4][2] = {{2048, 384}, {2048, 256}, {1024, 192}, {512, 96}};
static const int WS[6] = {1, 2, 3, 4, 8, 16};

#define BLOCK 64
#define NUM_REQS 3

/* A block table and request ids for the rows map: request t % 4 (3 is out of
 * range: owns nothing); blocks past `cols` are dropped. */
typedef struct host_map {
    int32_t *req_id;
    int32_t *table;
    int32_t cols;
} host_map;

static void map_make(host_map *m, int64_t rows, int64_t local_len,
                     uint64_t seed)
{
    dc_rng r;
    dc_rng_seed(&r, seed);
    m->cols = (int32_t)((local_len + BLOCK - 1) / BLOCK);
    if (m->cols > 2)
        m->cols -= 1; /* the last block of the longest rows is dropped */
    m->req_id = malloc(sizeof(int32_t) * (size_t)(rows ? rows : 1));
    m->table = malloc(sizeof(int32_t) * (size_t)NUM_REQS * (size_t)m->cols);
    for (int64_t t = 0; t < rows; t++)
        m->req_id[t] = (int32_t)(t % 4);
    for (int64_t i = 0; i < (int64_t)NUM_REQS * m->cols; i++)
        m->table[i] = (int32_t)dc_rng_below(&r, 100000);
}

static void map_free(host_map *m)
{
    free(m->req_id);
    free(m->table);
}

static int first_diff(const int32_t *a, const int32_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int)i;
    return -1;
}

/* Selects on `gathered` (host [W, T, N + N/32]) for `rank` on the GPU and
 * with the reference; every output compared. */
static void check_select(dcptopk_context *ctx, const dcptopk_merge_config *c,
                         const int32_t *gathered, int64_t rows,
                         int64_t local_len, int32_t rank, const char *what)
{
    const int32_t k = c->topk, words = dcptopk_packed_row_words(c->local_topk);
    const size_t gwords = (size_t)c->world_size * (size_t)rows * (size_t)words;
    const size_t out_n = (size_t)rows * (size_t)k;
    host_map hm;
    map_make(&hm, rows, local_len, 99);
    int32_t *ids_ref = malloc(out_n * 4), *rows_ref = malloc(out_n * 4);
    int32_t *cnt_ref = malloc((size_t)rows * 4);
    int32_t *ids_gpu = malloc(out_n * 4), *rows_gpu = malloc(out_n * 4);
    int32_t *cnt_gpu = malloc((size_t)rows * 4);

    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = gathered;
    a.rows = rows;
    a.rank = rank;
    a.ids_out = ids_ref;
    a.rows_map.req_id = hm.req_id;
    a.rows_map.block_table = hm.table;
    a.rows_map.block_table_stride = hm.cols;
    a.rows_map.block_table_cols = hm.cols;
    a.rows_map.num_reqs = NUM_REQS;
    a.rows_map.stride_rows = BLOCK;
    a.rows_map.rows_out = rows_ref;
    a.rows_map.counts_out = cnt_ref;
    dcptopk_result r = dcptopk_ref_select(c, &a, NULL);
    CHECK_MSG(r == DCPTOPK_SUCCESS, "ref select: %s", dcptopk_last_error(NULL));

    uint64_t d_g = gpu_upload(ctx, gathered, gwords * 4);
    uint64_t d_req = gpu_upload(ctx, hm.req_id, (size_t)rows * 4);
    uint64_t d_tab = gpu_upload(ctx, hm.table, (size_t)NUM_REQS * hm.cols * 4);
    /* Outputs start as garbage: every element must be written. */
    memset(ids_gpu, 0x5A, out_n * 4);
    uint64_t d_ids = gpu_upload(ctx, ids_gpu, out_n * 4);
    uint64_t d_rows = gpu_upload(ctx, ids_gpu, out_n * 4);
    uint64_t d_cnt = gpu_upload(ctx, ids_gpu, (size_t)rows * 4);
    CHECK(d_g && d_req && d_tab && d_ids && d_rows && d_cnt);
    a.gathered = (const int32_t *)(uintptr_t)d_g;
    a.ids_out = (int32_t *)(uintptr_t)d_ids;
    a.rows_map.req_id = (const int32_t *)(uintptr_t)d_req;
    a.rows_map.block_table = (const int32_t *)(uintptr_t)d_tab;
    a.rows_map.rows_out = (int32_t *)(uintptr_t)d_rows;
    a.rows_map.counts_out = (int32_t *)(uintptr_t)d_cnt;
    r = dcptopk_select(ctx, c, NULL, &a);
    CHECK_MSG(r == DCPTOPK_SUCCESS, "select: %s", dcptopk_last_error(ctx));
    CHECK(gpu_download(ctx, ids_gpu, d_ids, out_n * 4) == 0);
    CHECK(gpu_download(ctx, rows_gpu, d_rows, out_n * 4) == 0);
    CHECK(gpu_download(ctx, cnt_gpu, d_cnt, (size_t)rows * 4) == 0);
    int d;
    d = first_diff(ids_ref, ids_gpu, out_n);
    CHECK_MSG(d < 0, "%s K=%d N=%d W=%d T=%lld rank %d: ids differ at row %d "
              "col %d: ref %d gpu %d", what, c->topk, c->local_topk,
              c->world_size, (long long)rows, rank, d / k, d % k,
              d >= 0 ? ids_ref[d] : 0, d >= 0 ? ids_gpu[d] : 0);
    d = first_diff(cnt_ref, cnt_gpu, (size_t)rows);
    CHECK_MSG(d < 0, "%s K=%d N=%d W=%d rank %d: count of row %d: ref %d gpu %d",
              what, c->topk, c->local_topk, c->world_size, rank, d,
              d >= 0 ? cnt_ref[d] : 0, d >= 0 ? cnt_gpu[d] : 0);
    d = first_diff(rows_ref, rows_gpu, out_n);
    CHECK_MSG(d < 0, "%s K=%d N=%d W=%d rank %d: rows differ at row %d col %d: "
              "ref %d gpu %d", what, c->topk, c->local_topk, c->world_size,
              rank, d / k, d % k, d >= 0 ? rows_ref[d] : 0,
              d >= 0 ? rows_gpu[d] : 0);
    gpu_free(ctx, d_g);
    gpu_free(ctx, d_req);
    gpu_free(ctx, d_tab);
    gpu_free(ctx, d_ids);
    gpu_free(ctx, d_rows);
    gpu_free(ctx, d_cnt);
    free(ids_ref);
    free(rows_ref);
    free(cnt_ref);
    free(ids_gpu);
    free(rows_gpu);
    free(cnt_gpu);
    map_free(&hm);
}

/* Host gathered rows of a generated world, packed by the reference. */
static int32_t *pack_world(const dcptopk_merge_config *c, const dc_world *w)
{
    const int32_t words = dcptopk_packed_row_words(c->local_topk);
    int32_t *g = calloc((size_t)c->world_size * (size_t)(w->rows ? w->rows : 1) *
                            (size_t)words, 4);
    for (int32_t r = 0; r < c->world_size && g; r++) {
        dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
        a.logits = w->logits[r];
        a.logits_stride = w->stride;
        a.max_local_len = w->max_local_len;
        a.row_ends = w->row_ends[r];
        a.rows = w->rows;
        a.out = g + (size_t)r * (size_t)w->rows * (size_t)words;
        if (w->rows && dcptopk_ref_pack(c, &a) != DCPTOPK_SUCCESS) {
            fprintf(stderr, "ref pack: %s\n", dcptopk_last_error(NULL));
            free(g);
            return NULL;
        }
    }
    return g;
}

static dcptopk_merge_config config_of(int k, int n, int w)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = k;
    c.local_topk = n;
    c.world_size = w;
    c.block_size = BLOCK;
    c.emit_ids = 1;
    c.exact = 0;
    return c;
}

/* Every (K, N) x W, families rotating, T in {1, 7, 64} (and 1000 for a few). */
TEST(select_matches_reference)
{
    GPU_CTX(ctx);
    int fam = 0;
    for (int kn = 0; kn < 4; kn++) {
        for (int wi = 0; wi < 6; wi++) {
            const int64_t ts[4] = {1, 7, 64, 1000};
            for (int ti = 0; ti < 4; ti++) {
                if (ti == 3 && !((kn == 0 && WS[wi] == 8) || (kn == 3 && WS[wi] == 3)))
                    continue;
                dcptopk_merge_config c = config_of(KN[kn][0], KN[kn][1], WS[wi]);
                int f = (fam++) % DC_FAM_COUNT;
                if (f == DC_FAM_LONG && ts[ti] > 7)
                    f = DC_FAM_NORMAL;
                dc_world w;
                int64_t len = 2 * (int64_t)c.topk;
                CHECK(dc_gen_world(&w, f, c.topk, c.local_topk, c.world_size,
                                   ts[ti], len, 1000 + (uint64_t)fam) == 0);
                int32_t *g = pack_world(&c, &w);
                CHECK(g != NULL);
                check_select(ctx, &c, g, ts[ti], w.max_local_len, 0,
                             dc_family_name(f));
                if (c.world_size > 1)
                    check_select(ctx, &c, g, ts[ti], w.max_local_len,
                                 c.world_size - 1, dc_family_name(f));
                free(g);
                dc_world_free(&w);
                if (dc_test_failed)
                    goto out;
            }
        }
    }
out:
    dcptopk_context_destroy(ctx);
}

/* Every family at the DeepSeek shape (W = 8, K = 2048, N = 384). */
TEST(select_every_family)
{
    GPU_CTX(ctx);
    for (int f = 0; f < DC_FAM_COUNT && !dc_test_failed; f++) {
        dcptopk_merge_config c = config_of(2048, 384, 8);
        dc_world w;
        int64_t rows = f == DC_FAM_LONG ? 3 : 64;
        CHECK(dc_gen_world(&w, f, c.topk, c.local_topk, c.world_size, rows,
                           4096, 77 + (uint64_t)f) == 0);
        int32_t *g = pack_world(&c, &w);
        CHECK(g != NULL);
        for (int32_t rank = 0; rank < 8 && !dc_test_failed; rank += 3)
            check_select(ctx, &c, g, rows, w.max_local_len, rank,
                         dc_family_name(f));
        free(g);
        dc_world_free(&w);
    }
    dcptopk_context_destroy(ctx);
}

/* Caller-packed words outside the contract: duplicate ids (equal keys: lower
 * position first, also across the K-th place), words whose ord16 is 0, a
 * full-ones word; the GPU must still equal the reference. */
TEST(select_duplicates_and_junk)
{
    GPU_CTX(ctx);
    for (int kn = 0; kn < 4 && !dc_test_failed; kn++) {
        const int ws_[2] = {2, 16};
        for (int wi = 0; wi < 2 && !dc_test_failed; wi++) {
            dcptopk_merge_config c = config_of(KN[kn][0], KN[kn][1], ws_[wi]);
            const int32_t n = c.local_topk, words = dcptopk_packed_row_words(n);
            const int64_t rows = 16;
            int32_t *g = calloc((size_t)c.world_size * rows * words, 4);
            dc_rng rng;
            dc_rng_seed(&rng, 5 + (uint64_t)kn * 7 + (uint64_t)wi);
            for (int32_t r = 0; r < c.world_size; r++)
                for (int64_t t = 0; t < rows; t++) {
                    int32_t *row = g + ((size_t)r * rows + (size_t)t) * words;
                    uint32_t base = (uint32_t)(0x8000 + dc_rng_below(&rng, 8));
                    for (int32_t j = 0; j < n; j++) {
                        uint32_t key = base + (uint32_t)dc_rng_below(&rng, 3);
                        uint32_t l = (uint32_t)dc_rng_below(&rng, 1u << 17);
                        if (t % 4 == 1)
                            l = (uint32_t)dc_rng_below(&rng, 4); /* many dups */
                        if (t % 4 == 2 && j % 5 == 0)
                            key = 0; /* ord16 0, non-zero word */
                        dc_packed_put(row, n, j, key, l);
                        if (t % 4 == 3 && j % 7 == 0)
                            row[j] = 0; /* empty */
                    }
                    if (t == 2 && r == c.world_size - 1) {
                        row[0] = -1; /* ord16 0xFFFF, local id 0x10000 */
                        row[n] |= 1;
                        row[1] = 0x0000FFFF; /* ord16 0, local id 0 */
                    }
                }
            check_select(ctx, &c, g, rows, 1 << 17, 0, "dups");
            check_select(ctx, &c, g, rows, 1 << 17, c.world_size - 1, "dups");
            free(g);
        }
    }
    dcptopk_context_destroy(ctx);
}

/* Rows whose K-th key lies in the lowest byte of ord16 (words a caller's own
 * producer may send: ord16 below -inf's 0x7F, some 0 with a non-zero word),
 * with empty slots beside them, which the select's second pass counts in
 * that same bin and must take off again; some rows also hold a few ordinary
 * keys above. Fewer than K non-empty words at W = 2. */
TEST(select_boundary_in_the_lowest_bin)
{
    GPU_CTX(ctx);
    const int ws_[3] = {2, 8, 16};
    for (int kn = 0; kn < 4 && !dc_test_failed; kn++) {
        for (int wi = 0; wi < 3 && !dc_test_failed; wi++) {
            dcptopk_merge_config c = config_of(KN[kn][0], KN[kn][1], ws_[wi]);
            const int32_t n = c.local_topk, words = dcptopk_packed_row_words(n);
            const int64_t rows = 8;
            int32_t *g = calloc((size_t)c.world_size * rows * words, 4);
            CHECK(g != NULL);
            dc_rng rng;
            dc_rng_seed(&rng, 41 + (uint64_t)kn * 5 + (uint64_t)wi);
            for (int32_t r = 0; r < c.world_size; r++)
                for (int64_t t = 0; t < rows; t++) {
                    int32_t *row = g + ((size_t)r * rows + (size_t)t) * words;
                    for (int32_t j = 0; j < n; j++) {
                        if (j % 5 == 4)
                            continue; /* empty */
                        uint32_t key = (uint32_t)dc_rng_below(&rng, t % 4 == 0 ? 0x100 : 8);
                        if (t % 2 == 1 && j % 10 == 0)
                            key = 0x8000u + (uint32_t)dc_rng_below(&rng, 0x100);
                        uint32_t l = (uint32_t)dc_rng_below(&rng, 1u << 17);
                        if (key == 0 && (l & 0xFFFFu) == 0xFFFFu)
                            l ^= 1u; /* keep it a key: the word would be 0 (empty) */
                        dc_packed_put(row, n, j, key, l);
                    }
                }
            check_select(ctx, &c, g, rows, 1 << 17, 0, "lowest-bin");
            check_select(ctx, &c, g, rows, 1 << 17, c.world_size - 1, "lowest-bin");
            free(g);
        }
    }
    dcptopk_context_destroy(ctx);
}

/* rank_stride_rows > T and ids_out_stride > K; only ids (no rows map). */
TEST(select_strides)
{
    GPU_CTX(ctx);
    dcptopk_merge_config c = config_of(1024, 192, 4);
    c.block_size = 0;
    const int64_t rows = 5, alloc_rows = 9, ids_stride = 1056;
    const int32_t words = dcptopk_packed_row_words(c.local_topk);
    dc_world w;
    CHECK(dc_gen_world(&w, DC_FAM_NORMAL, c.topk, c.local_topk, 4, alloc_rows,
                       3000, 3) == 0);
    int32_t *g = pack_world(&c, &w);
    CHECK(g != NULL);
    int32_t *ref = malloc((size_t)rows * ids_stride * 4);
    int32_t *got = malloc((size_t)rows * ids_stride * 4);
    memset(ref, 0x33, (size_t)rows * ids_stride * 4);
    memcpy(got, ref, (size_t)rows * ids_stride * 4);
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = g;
    a.rank_stride_rows = alloc_rows;
    a.rows = rows;
    a.ids_out = ref;
    a.ids_out_stride = ids_stride;
    CHECK_OK(dcptopk_ref_select(&c, &a, NULL));
    uint64_t d_g = gpu_upload(ctx, g, (size_t)4 * alloc_rows * words * 4);
    uint64_t d_ids = gpu_upload(ctx, got, (size_t)rows * ids_stride * 4);
    a.gathered = (const int32_t *)(uintptr_t)d_g;
    a.ids_out = (int32_t *)(uintptr_t)d_ids;
    dcptopk_result r = dcptopk_select(ctx, &c, NULL, &a);
    CHECK_MSG(r == 0, "select: %s", dcptopk_last_error(ctx));
    CHECK(gpu_download(ctx, got, d_ids, (size_t)rows * ids_stride * 4) == 0);
    CHECK_EQ(first_diff(ref, got, (size_t)rows * ids_stride), -1);
    gpu_free(ctx, d_g);
    gpu_free(ctx, d_ids);
    free(ref);
    free(got);
    free(g);
    dc_world_free(&w);
    dcptopk_context_destroy(ctx);
}

/* pack_indices on the GPU vs the reference (ids negative, past the end,
 * NaN logits, duplicates). */
TEST(pack_indices_matches_reference)
{
    GPU_CTX(ctx);
    dcptopk_merge_config c = config_of(2048, 384, 8);
    const int64_t rows = 70, stride = 4096;
    const int32_t n = c.local_topk, words = dcptopk_packed_row_words(n);
    dc_rng rng;
    dc_rng_seed(&rng, 11);
    uint16_t *logits = malloc((size_t)rows * stride * 2);
    int32_t *ends = malloc((size_t)rows * 4), *ids = malloc((size_t)rows * n * 4);
    dc_gen_bf16_row(&rng, DC_FAM_NAN_ROWS, logits, rows * stride);
    for (int64_t t = 0; t < rows; t++) {
        ends[t] = (int32_t)dc_rng_range(&rng, -2, stride);
        for (int32_t j = 0; j < n; j++)
            ids[t * n + j] = (int32_t)dc_rng_range(&rng, -3, stride + 5);
    }
    int32_t *ref = calloc((size_t)rows * words, 4), *got = malloc((size_t)rows * words * 4);
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    a.logits = logits;
    a.logits_stride = stride;
    a.max_local_len = stride - 100;
    a.row_ends = ends;
    a.local_ids = ids;
    a.rows = rows;
    a.out = ref;
    CHECK_OK(dcptopk_ref_pack_indices(&c, &a));
    uint64_t d_l = gpu_upload(ctx, logits, (size_t)rows * stride * 2);
    uint64_t d_e = gpu_upload(ctx, ends, (size_t)rows * 4);
    uint64_t d_i = gpu_upload(ctx, ids, (size_t)rows * n * 4);
    uint64_t d_o = gpu_alloc(ctx, (size_t)rows * words * 4);
    a.logits = (const uint16_t *)(uintptr_t)d_l;
    a.row_ends = (const int32_t *)(uintptr_t)d_e;
    a.local_ids = (const int32_t *)(uintptr_t)d_i;
    a.out = (int32_t *)(uintptr_t)d_o;
    dcptopk_result r = dcptopk_pack_indices(ctx, &c, &a);
    CHECK_MSG(r == 0, "pack_indices: %s", dcptopk_last_error(ctx));
    CHECK(gpu_download(ctx, got, d_o, (size_t)rows * words * 4) == 0);
    CHECK_EQ(first_diff(ref, got, (size_t)rows * words), -1);
    gpu_free(ctx, d_l);
    gpu_free(ctx, d_e);
    gpu_free(ctx, d_i);
    gpu_free(ctx, d_o);
    free(logits);
    free(ends);
    free(ids);
    free(ref);
    free(got);
    dcptopk_context_destroy(ctx);
}

/* Bad arguments are refused with a message naming them. */
TEST(bad_arguments_named)
{
    GPU_CTX(ctx);
    dcptopk_merge_config c = config_of(2048, 384, 8);
    uint64_t d = gpu_alloc(ctx, 1 << 20);
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = (const int32_t *)(uintptr_t)d;
    a.rows = 4;
    a.ids_out = (int32_t *)(uintptr_t)d;
    a.rank = 8;
    CHECK_EQ(dcptopk_select(ctx, &c, NULL, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rank");
    a.rank = 0;
    CHECK_EQ(dcptopk_select(NULL, &c, NULL, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "ctx");
    c.exact = 1;
    a.logits = (const uint16_t *)(uintptr_t)d;
    a.logits_stride = 1024;
    a.max_local_len = 1024;
    a.row_ends = (const int32_t *)(uintptr_t)d;
    CHECK_EQ(dcptopk_select(ctx, &c, NULL, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "ws");
    /* A workspace of other sizes, too few rows, another rank. */
    uint64_t peers[8];
    for (int i = 0; i < 8; i++)
        peers[i] = d;
    dcptopk_workspace *ws = NULL;
    CHECK_EQ(dcptopk_workspace_create(ctx, &c, 2, 0, NULL, peers, &ws),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "peer_recv");
    CHECK_EQ(dcptopk_workspace_create(ctx, &c, 2, 9, peers, peers, &ws),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rank");
    CHECK_EQ(dcptopk_workspace_create(ctx, &c, 0, 0, peers, peers, &ws),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "max_rows");
    peers[3] = 0;
    CHECK_EQ(dcptopk_workspace_create(ctx, &c, 2, 0, peers, peers, &ws),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "peer_recv[3]");
    peers[3] = d;
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    CHECK_OK(dcptopk_workspace_layout_get(&c, 2, &lay));
    CHECK_EQ(lay.flags_bytes, (uint64_t)8 * 2 * 4);
    CHECK_EQ(lay.recv_bytes, (uint64_t)2 * 5 * (2048 + 64) * 4);
    uint64_t rbuf = gpu_alloc(ctx, lay.recv_bytes), fbuf = gpu_alloc(ctx, lay.flags_bytes);
    uint64_t pr[8], pf[8];
    for (int i = 0; i < 8; i++) {
        pr[i] = rbuf;
        pf[i] = fbuf;
    }
    dcptopk_result r = dcptopk_workspace_create(ctx, &c, 2, 1, pr, pf, &ws);
    CHECK_MSG(r == 0, "workspace_create: %s", dcptopk_last_error(ctx));
    CHECK_EQ(dcptopk_select(ctx, &c, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "max_rows");
    a.rows = 2;
    CHECK_EQ(dcptopk_select(ctx, &c, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->rank");
    dcptopk_merge_config c2 = c;
    c2.local_topk = 256;
    a.rank = 1;
    CHECK_EQ(dcptopk_select(ctx, &c2, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "workspace");
    CHECK_OK(dcptopk_workspace_check(ws, NULL));
    dcptopk_workspace_destroy(ws);
    dcptopk_workspace_destroy(NULL);
    CHECK_EQ(dcptopk_workspace_check(NULL, NULL), DCPTOPK_INVALID_ARGUMENT);
    /* Loopback: too many rows, NULL arrays. */
    dcptopk_loopback *lb = NULL;
    CHECK_EQ(dcptopk_loopback_create(ctx, &c, 0, 100, &lb),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "max_rows");
    r = dcptopk_loopback_create(ctx, &c, 4, 1000, &lb);
    CHECK_MSG(r == 0, "loopback_create: %s", dcptopk_last_error(ctx));
    CHECK_EQ(dcptopk_loopback_merge(lb, NULL, 1024, NULL, 2, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "logits");
    const uint16_t *lg[8];
    const int32_t *re[8];
    for (int i = 0; i < 8; i++) {
        lg[i] = (const uint16_t *)(uintptr_t)d;
        re[i] = (const int32_t *)(uintptr_t)d;
    }
    CHECK_EQ(dcptopk_loopback_merge(lb, lg, 1024, re, 5, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rows = 5");
    lg[6] = NULL;
    CHECK_EQ(dcptopk_loopback_merge(lb, lg, 1024, re, 2, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rank 6");
    CHECK_EQ(dcptopk_loopback_gathered(lb, 8), 0u);
    CHECK(dcptopk_loopback_gathered(lb, 7) != 0u);
    CHECK(dcptopk_loopback_saturation(lb, 0) != 0u);
    dcptopk_loopback_destroy(lb);
    dcptopk_loopback_destroy(NULL);
    gpu_free(ctx, rbuf);
    gpu_free(ctx, fbuf);
    gpu_free(ctx, d);
    dcptopk_context_destroy(ctx);
}

/* Host memory in any pointer argument of a GPU entry point is refused before
 * a launch, naming the argument (a kernel would fault and take the CUDA
 * context with it); the context then still runs kernels. */
static void refused_host(dcptopk_context *ctx, dcptopk_result r,
                         const char *arg)
{
    const char *msg = dcptopk_last_error(ctx);
    CHECK_MSG(r == DCPTOPK_INVALID_ARGUMENT, "%s: got %d (%s)", arg, (int)r, msg);
    CHECK_MSG(strstr(msg, arg) && strstr(msg, "not device memory"),
              "%s: message \"%s\"", arg, msg);
}

TEST(host_pointers_refused_before_launch)
{
    GPU_CTX(ctx);
    const size_t bytes = (size_t)1 << 20;
    void *h = NULL;
    CHECK(posix_memalign(&h, 256, bytes) == 0);
    memset(h, 0, bytes);
    const uint64_t d = gpu_upload(ctx, h, bytes); /* zeros: empty rows */
    CHECK(d != 0);
    const int32_t *di = (const int32_t *)(uintptr_t)d;
    int32_t *dw = (int32_t *)(uintptr_t)d;

    dcptopk_merge_config c = config_of(2048, 384, 8);
    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.logits = (const uint16_t *)(uintptr_t)d;
    p.logits_stride = 1024;
    p.max_local_len = 1024;
    p.row_ends = di;
    p.rows = 4;
    p.out = dw; /* local_ids stays NULL: the fused top-N refuses one */
    dcptopk_pack_args q = p;
    q.logits = h;
    refused_host(ctx, dcptopk_pack(ctx, &c, &q), "args->logits");
    q = p;
    q.row_ends = h;
    refused_host(ctx, dcptopk_pack(ctx, &c, &q), "args->row_ends");
    q = p;
    q.out = h;
    refused_host(ctx, dcptopk_pack(ctx, &c, &q), "args->out");
    q = p;
    q.local_ids = h;
    refused_host(ctx, dcptopk_pack_indices(ctx, &c, &q), "args->local_ids");
    q.local_ids = di;
    q.logits = h;
    refused_host(ctx, dcptopk_pack_indices(ctx, &c, &q), "args->logits");

    dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
    s.gathered = di;
    s.rows = 4;
    s.ids_out = dw;
    dcptopk_select_args t = s;
    t.gathered = h;
    refused_host(ctx, dcptopk_select(ctx, &c, NULL, &t), "args->gathered");
    t = s;
    t.ids_out = h;
    refused_host(ctx, dcptopk_select(ctx, &c, NULL, &t), "args->ids_out");
    t = s;
    t.rows_map.req_id = di;
    t.rows_map.block_table = di;
    t.rows_map.block_table_cols = 1;
    t.rows_map.block_table_stride = 1;
    t.rows_map.num_reqs = 1;
    t.rows_map.stride_rows = 1;
    t.rows_map.rows_out = dw;
    t.rows_map.counts_out = h;
    refused_host(ctx, dcptopk_select(ctx, &c, NULL, &t),
                 "args->rows_map.counts_out");

    dcptopk_merge_config pc = c;
    pc.kind = DCPTOPK_MERGE_PAIR;
    pc.local_topk = pc.topk;
    dcptopk_pair_select_args ps = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    ps.candidates = h;
    ps.rows = 4;
    ps.ids_out = dw;
    refused_host(ctx, dcptopk_pair_select(ctx, &pc, &ps), "args->candidates");
    ps.candidates = di;
    ps.ids_out = h;
    refused_host(ctx, dcptopk_pair_select(ctx, &pc, &ps), "args->ids_out");
    dcptopk_pair_pack_args pp = DCPTOPK_PAIR_PACK_ARGS_INIT;
    pp.logits = h;
    pp.logits_stride = 1024;
    pp.local_ids = di;
    pp.rows = 4;
    pp.out = dw;
    refused_host(ctx, dcptopk_pair_pack(ctx, &pc, &pp), "args->logits");

    /* The context survived: a real pack of the (empty) rows runs. */
    CHECK_MSG(dcptopk_pack(ctx, &c, &p) == DCPTOPK_SUCCESS, "pack: %s",
              dcptopk_last_error(ctx));
    CHECK_OK(gpu_download(ctx, h, d, 64));
    free(h);
    gpu_free(ctx, d);
    dcptopk_context_destroy(ctx);
}
