/* test_hier.c - the hierarchical merge with simulated nodes: W ranks as D
 * nodes of L ranks, each node a loopback world running the exact packed
 * merge with world_size L, dcptopk_node_pairs on every rank of it, then
 * every rank's dcptopk_pair_select_nodes over the D nodes' candidates (what
 * the rail all-gather would deliver). Checked bit for bit: each rank's node
 * pairs against scores read straight from the logits; each rank's final ids,
 * owned rows and counts against the hierarchy's contract computed here (the
 * reference node merge, then a brute-force pair select of the node pairs);
 * and the ids of every row against dcptopk_ref_packed_merge of the flat
 * W-rank world: both are the one-GPU answer (docs/CONTRACT.md). */
#include "brute.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "gpu_util.h"
#include "harness.h"
#include "ties.h"

#define BLOCK 64
#define NUM_REQS 3

typedef struct hier {
    dcptopk_context *ctx;
    dcptopk_merge_config flat, node, pair;
    int32_t w, l, d;
    int64_t rows, cols;
    const dc_world *wd;
    int32_t *req_h, *table_h;
    uint64_t req, table;
} hier;

static dcptopk_rows_map host_map(const hier *h, int32_t *rows, int32_t *counts)
{
    dcptopk_rows_map m;
    memset(&m, 0, sizeof m);
    m.req_id = h->req_h;
    m.block_table = h->table_h;
    m.block_table_stride = h->cols;
    m.block_table_cols = (int32_t)h->cols;
    m.num_reqs = NUM_REQS;
    m.stride_rows = BLOCK;
    m.rows_out = rows;
    m.counts_out = counts;
    return m;
}

static dcptopk_rows_map device_map(const hier *h, uint64_t rows, uint64_t counts)
{
    dcptopk_rows_map m = host_map(h, NULL, NULL);
    m.req_id = (const int32_t *)(uintptr_t)h->req;
    m.block_table = (const int32_t *)(uintptr_t)h->table;
    m.rows_out = (int32_t *)(uintptr_t)rows;
    m.counts_out = (int32_t *)(uintptr_t)counts;
    return m;
}

/* The pair a node id must become: the logit of its owner at its column. */
static void expected_pair(const hier *h, int32_t node, int64_t t, int32_t id,
                          int32_t out[2])
{
    out[0] = (int32_t)0xFF800000u;
    out[1] = -1;
    if (id < 0)
        return;
    const int32_t s = h->flat.interleave;
    const uint32_t u = (uint32_t)id;
    const int32_t lr = (int32_t)((u / (uint32_t)s) % (uint32_t)h->l);
    const int32_t l = (int32_t)((u / (uint32_t)(h->l * s)) * (uint32_t)s + u % (uint32_t)s);
    const int32_t owner = node * h->l + lr;
    const uint16_t b = h->wd->logits[owner][t * h->wd->stride + l];
    out[0] = (int32_t)((uint32_t)b << 16);
    out[1] = dcptopk_ref_global_id(l, owner, h->w, s);
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The sorted bf16 bits of the scores of row t's ids; returns their count. */
static int row_scores(const hier *h, int64_t t, const int32_t *ids, uint32_t *out)
{
    int n = 0;
    const uint32_t s = (uint32_t)h->flat.interleave, w = (uint32_t)h->w;
    for (int i = 0; i < h->flat.topk; i++) {
        if (ids[i] < 0)
            continue;
        const uint32_t u = (uint32_t)ids[i];
        const uint32_t owner = (u / s) % w;
        const int64_t l = (int64_t)(u / (w * s)) * s + u % s;
        out[n++] = h->wd->logits[owner][t * h->wd->stride + l];
    }
    qsort(out, (size_t)n, sizeof *out, cmp_u32);
    return n;
}

/* Owned rows of `rank` among ids (docs/CONTRACT.md, "Owned rows"). */
static int32_t owned_rows(const hier *h, int64_t t, int32_t rank,
                          const int32_t *ids, int32_t *rows_out)
{
    const uint32_t s = (uint32_t)h->flat.interleave, w = (uint32_t)h->w;
    int32_t c = 0;
    const int32_t req = h->req_h[t];
    for (int i = 0; i < h->flat.topk; i++) {
        if (ids[i] < 0 || req < 0 || req >= NUM_REQS)
            continue;
        const uint32_t u = (uint32_t)ids[i];
        if ((u / s) % w != (uint32_t)rank)
            continue;
        const uint32_t l = (u / (w * s)) * s + u % s;
        if ((int64_t)(l / BLOCK) >= h->cols)
            continue;
        const uint32_t e = (uint32_t)h->table_h[req * h->cols + l / BLOCK];
        rows_out[c++] = (int32_t)(e * (uint32_t)BLOCK + l % BLOCK);
    }
    for (int i = c; i < h->flat.topk; i++)
        rows_out[i] = -1;
    return c;
}

static int compare(const char *what, const hier *h, int32_t rank,
                   const int32_t *ref, const int32_t *got, size_t n, int cols)
{
    for (size_t i = 0; i < n; i++)
        if (ref[i] != got[i]) {
            DC_FAIL_AT("K=%d N=%d W=%d L=%d S=%d T=%lld rank %d: %s differ at "
                       "row %zu col %zu: expected %d (0x%x), got %d (0x%x)",
                       h->flat.topk, h->flat.local_topk, h->w, h->l,
                       h->flat.interleave, (long long)h->rows, rank, what,
                       i / (size_t)cols, i % (size_t)cols, ref[i],
                       (unsigned)ref[i], got[i], (unsigned)got[i]);
            return -1;
        }
    return 0;
}

/* The hierarchy on world wdp (nodes of l ranks, interleave s); returns
 * the rows the flat merge rescued, or -1. */
static int64_t hier_world(dcptopk_context *ctx, int kk, int n, int w, int l, int s,
                          const dc_world *wdp, const char *fname)
{
    const dc_world wd = *wdp;
    const int64_t rows = wd.rows;
    hier h;
    memset(&h, 0, sizeof h);
    h.ctx = ctx;
    h.w = w;
    h.l = l;
    h.d = w / l;
    h.rows = rows;
    h.wd = &wd;
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = kk;
    c.local_topk = n;
    c.world_size = w;
    c.block_size = BLOCK;
    c.interleave = s;
    h.flat = h.node = c;
    h.node.world_size = l;
    h.pair = c;
    h.pair.kind = DCPTOPK_MERGE_PAIR;
    h.pair.local_topk = kk;
    h.pair.exact = 0;
    /* Block table columns for the largest local id of a rank. */
    h.cols = (wd.max_local_len + BLOCK - 1) / BLOCK;
    if (h.cols > 2)
        h.cols--;
    const size_t out_n = (size_t)rows * (size_t)kk;
    int64_t ret = -1, rescued = 0;
    /* [0, W): the flat merge's ranks; [W, W + L): one node's ranks. */
    int32_t *ids_r[32] = {0}, *rows_r[16] = {0}, *cnt_r[16] = {0};
    uint32_t *sat_r[32] = {0};
    dcptopk_rows_map maps[16];
    dcptopk_loopback *lb[16] = {0};
    uint64_t logits[16] = {0}, ends[16] = {0}, nids[16] = {0}, pairs[16] = {0};
    uint64_t ids_d = 0, rows_d = 0, cnt_d = 0;
    int32_t *buf = malloc(out_n * 8), *want = malloc(out_n * 8),
            *nid_h = malloc(out_n * 4);
    /* The nodes' pairs as the rail all-gather delivers them, [D, T, K, 2],
     * and the hierarchy's expected ids, rows, counts of one rank. */
    int32_t *hp = malloc((size_t)(w / l) * out_n * 8), *eid = malloc(out_n * 4),
            *erows = malloc(out_n * 4), *ecnt = malloc((size_t)rows * 4);
    uint32_t *sc_a = malloc((size_t)kk * 4), *sc_b = malloc((size_t)kk * 4);
    h.req_h = malloc((size_t)rows * 4);
    h.table_h = malloc((size_t)NUM_REQS * (size_t)h.cols * 4);
    if (!buf || !want || !nid_h || !h.req_h || !h.table_h || !hp || !eid ||
        !erows || !ecnt || !sc_a || !sc_b) {
        DC_FAIL_AT("out of host memory");
        goto out;
    }
    for (int64_t t = 0; t < rows; t++)
        h.req_h[t] = (int32_t)(t % 4); /* 3 = a request that owns nothing */
    for (int64_t i = 0; i < NUM_REQS * h.cols; i++)
        h.table_h[i] = (int32_t)((i * 7919) % 50000);
    h.req = gpu_upload(ctx, h.req_h, (size_t)rows * 4);
    h.table = gpu_upload(ctx, h.table_h, (size_t)NUM_REQS * (size_t)h.cols * 4);

    /* The oracle: the flat merge of all W ranks. */
    for (int r = 0; r < w; r++) {
        ids_r[r] = malloc(out_n * 4);
        rows_r[r] = malloc(out_n * 4);
        cnt_r[r] = malloc((size_t)rows * 4);
        sat_r[r] = malloc((size_t)rows * 4);
        if (!ids_r[r] || !rows_r[r] || !cnt_r[r] || !sat_r[r]) {
            DC_FAIL_AT("out of host memory");
            goto out;
        }
        maps[r] = host_map(&h, rows_r[r], cnt_r[r]);
    }
    for (int r = w; r < w + l; r++)
        if (!(ids_r[r] = malloc(out_n * 4)) ||
            !(sat_r[r] = malloc((size_t)rows * 4))) {
            DC_FAIL_AT("out of host memory");
            goto out;
        }
    if (dcptopk_ref_packed_merge(&h.flat, (const uint16_t *const *)wd.logits,
                                 wd.stride, wd.max_local_len,
                                 (const int32_t *const *)wd.row_ends, rows,
                                 ids_r, maps, sat_r, &rescued)) {
        DC_FAIL_AT("ref merge: %s", dcptopk_last_error(NULL));
        goto out;
    }

    /* Stage 1: every node's exact merge, then its ranks' node pairs into
     * segment `node` of the rail buffer of their node rank. */
    for (int lr = 0; lr < l; lr++)
        if (!(pairs[lr] = gpu_alloc(ctx, (size_t)h.d * out_n * 8)) ||
            !(nids[lr] = gpu_alloc(ctx, out_n * 4))) {
            DC_FAIL_AT("device memory");
            goto out;
        }
    for (int r = 0; r < w; r++)
        if (!(logits[r] = gpu_upload(ctx, wd.logits[r],
                                     (size_t)rows * (size_t)wd.stride * 2)) ||
            !(ends[r] = gpu_upload(ctx, wd.row_ends[r], (size_t)rows * 4))) {
            DC_FAIL_AT("device memory");
            goto out;
        }
    for (int node = 0; node < h.d; node++) {
        if (dcptopk_loopback_create(ctx, &h.node, rows, wd.max_local_len,
                                    &lb[node])) {
            DC_FAIL_AT("loopback_create: %s", dcptopk_last_error(ctx));
            goto out;
        }
        const uint16_t *lg[16];
        const int32_t *re[16];
        int32_t *io[16];
        for (int lr = 0; lr < l; lr++) {
            lg[lr] = (const uint16_t *)(uintptr_t)logits[node * l + lr];
            re[lr] = (const int32_t *)(uintptr_t)ends[node * l + lr];
            io[lr] = (int32_t *)(uintptr_t)nids[lr];
        }
        if (dcptopk_loopback_merge(lb[node], lg, wd.stride, re, rows, io, NULL,
                                   NULL) ||
            dcptopk_loopback_check(lb[node], NULL)) {
            DC_FAIL_AT("node %d merge: %s", node, dcptopk_last_error(ctx));
            goto out;
        }
        /* The node merge itself against the reference merge of its L ranks. */
        int64_t node_rescued = 0;
        if (dcptopk_ref_packed_merge(&h.node,
                                     (const uint16_t *const *)(wd.logits + node * l),
                                     wd.stride, wd.max_local_len,
                                     (const int32_t *const *)(wd.row_ends + node * l),
                                     rows, ids_r + w, NULL, sat_r + w,
                                     &node_rescued)) {
            DC_FAIL_AT("ref node merge: %s", dcptopk_last_error(NULL));
            goto out;
        }
        for (int lr = 0; lr < l; lr++) {
            dcptopk_node_pairs_args a = DCPTOPK_NODE_PAIRS_ARGS_INIT;
            a.gathered = (const int32_t *)(uintptr_t)dcptopk_loopback_gathered(lb[node], lr);
            a.rows = rows;
            a.ids = (const int32_t *)(uintptr_t)nids[lr];
            /* Segments packed by the fused top-N are sorted; the scan of
             * caller-ordered segments must find the same words. */
            a.sorted = (node + lr) % 2 == 0;
            a.first_rank = node * l;
            a.world_size = w;
            a.pairs_out = (int32_t *)(uintptr_t)(pairs[lr] + (uint64_t)node * out_n * 8);
            if (dcptopk_node_pairs(ctx, &h.node,
                                   dcptopk_loopback_workspace(lb[node], lr), &a)) {
                DC_FAIL_AT("node_pairs: %s", dcptopk_last_error(ctx));
                goto out;
            }
            if (gpu_download(ctx, nid_h, nids[lr], out_n * 4) ||
                gpu_download(ctx, buf, pairs[lr] + (uint64_t)node * out_n * 8,
                             out_n * 8)) {
                DC_FAIL_AT("download");
                goto out;
            }
            if (compare("node ids", &h, node * l + lr, ids_r[w + lr], nid_h,
                        out_n, kk))
                goto out;
            for (size_t i = 0; i < out_n; i++)
                expected_pair(&h, node, (int64_t)(i / (size_t)kk), nid_h[i],
                              &want[2 * i]);
            if (compare(a.sorted ? "node pairs (sorted)" : "node pairs (scan)",
                        &h, node * l + lr, want, buf, out_n * 2, 2 * kk))
                goto out;
            if (lr == 0)
                memcpy(hp + (size_t)node * out_n * 2, want, out_n * 8);
        }
    }

    /* The hierarchy's result: the pair select of the nodes' pairs. It must
     * be the flat merge's (both are the one-GPU answer), row by row. */
    for (int64_t t = 0; t < rows; t++) {
        dc_brute_pair_select(hp, h.d, kk, rows, t, eid + t * kk);
        const int na = row_scores(&h, t, eid + t * kk, sc_a);
        const int nb = row_scores(&h, t, ids_r[0] + t * kk, sc_b);
        if (na != nb || memcmp(sc_a, sc_b, (size_t)na * 4)) {
            DC_FAIL_AT("K=%d N=%d W=%d L=%d T=%lld row %lld: the hierarchy "
                       "selected other scores than the flat merge (%d vs %d "
                       "candidates)",
                       kk, n, w, l, (long long)rows, (long long)t, na, nb);
            goto out;
        }
        if (memcmp(eid + t * kk, ids_r[0] + t * kk, (size_t)kk * 4)) {
            DC_FAIL_AT("K=%d N=%d W=%d L=%d S=%d %s row %lld: the hierarchy "
                       "chose other ids than the flat merge",
                       kk, n, w, l, s, fname, (long long)t);
            goto out;
        }
    }

    /* Stage 2: every rank's pair select over the nodes. */
    ids_d = gpu_alloc(ctx, out_n * 4);
    rows_d = gpu_alloc(ctx, out_n * 4);
    cnt_d = gpu_alloc(ctx, (size_t)rows * 4);
    if (!ids_d || !rows_d || !cnt_d) {
        DC_FAIL_AT("device memory");
        goto out;
    }
    for (int r = 0; r < w; r++) {
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = (const int32_t *)(uintptr_t)pairs[r % l];
        a.rows = rows;
        a.rank = r;
        a.ids_out = (int32_t *)(uintptr_t)ids_d;
        a.rows_map = device_map(&h, rows_d, cnt_d);
        if (dcptopk_pair_select_nodes(ctx, &h.pair, h.d, &a)) {
            DC_FAIL_AT("pair_select_nodes: %s", dcptopk_last_error(ctx));
            goto out;
        }
        for (int64_t t = 0; t < rows; t++)
            ecnt[t] = owned_rows(&h, t, r, eid + t * kk, erows + t * kk);
        if (gpu_download(ctx, buf, ids_d, out_n * 4) ||
            compare("ids", &h, r, eid, buf, out_n, kk) ||
            gpu_download(ctx, buf, rows_d, out_n * 4) ||
            compare("rows", &h, r, erows, buf, out_n, kk) ||
            gpu_download(ctx, buf, cnt_d, (size_t)rows * 4) ||
            compare("counts", &h, r, ecnt, buf, (size_t)rows, 1))
            goto out;
    }
    ret = rescued;
out:
    for (int r = 16; r < 32; r++) {
        free(ids_r[r]);
        free(sat_r[r]);
    }
    for (int r = 0; r < 16; r++) {
        dcptopk_loopback_destroy(lb[r]);
        gpu_free(ctx, logits[r]);
        gpu_free(ctx, ends[r]);
        gpu_free(ctx, nids[r]);
        gpu_free(ctx, pairs[r]);
        free(ids_r[r]);
        free(rows_r[r]);
        free(cnt_r[r]);
        free(sat_r[r]);
    }
    gpu_free(ctx, ids_d);
    gpu_free(ctx, rows_d);
    gpu_free(ctx, cnt_d);
    gpu_free(ctx, h.req);
    gpu_free(ctx, h.table);
    free(h.req_h);
    free(h.table_h);
    free(buf);
    free(want);
    free(hp);
    free(eid);
    free(erows);
    free(ecnt);
    free(sc_a);
    free(sc_b);
    free(nid_h);
    return ret;
}

/* One world of `fam`: returns the flat merge's rescued rows, -1 on failure. */
static int64_t hier_case(dcptopk_context *ctx, int kk, int n, int w, int l, int s,
                         int64_t rows, int fam, int64_t len, uint64_t seed)
{
    dc_world wd;
    if (dc_gen_world(&wd, fam, kk, n, w, rows, len, seed)) {
        DC_FAIL_AT("dc_gen_world");
        return -1;
    }
    const int64_t ret = hier_world(ctx, kk, n, w, l, s, &wd, dc_family_name(fam));
    dc_world_free(&wd);
    return ret;
}

/* (K, N, W, L, S): nodes of 1, 2, 4 and 8 ranks; one interleaved config. */
static const int CFG[][5] = {
    {2048, 384, 8, 4, 1},  {2048, 384, 16, 8, 1}, {2048, 384, 8, 2, 1},
    {2048, 256, 4, 2, 1},  {1024, 192, 16, 4, 1}, {512, 96, 8, 1, 1},
    {2048, 384, 8, 4, 64},
};
#define NCFG ((int)(sizeof CFG / sizeof CFG[0]))

TEST(simulated_nodes_match_the_flat_merge)
{
    GPU_CTX(ctx);
    const int fams[] = {DC_FAM_NORMAL,      DC_FAM_CONC_SAT,  DC_FAM_INTEGER,
                        DC_FAM_SHORT_ROWS,  DC_FAM_CONC_ALL,  DC_FAM_NAN_ROWS,
                        DC_FAM_EMPTY_OWNER, DC_FAM_CONC_ONE,  DC_FAM_INF,
                        DC_FAM_SIGNED_ZERO, DC_FAM_ALL_EQUAL, DC_FAM_NORMAL_100};
    const int nf = (int)(sizeof fams / sizeof fams[0]);
    const int64_t ts[] = {1, 7, 64};
    int64_t rescued = 0;
    for (int i = 0; i < NCFG && !dc_test_failed; i++)
        for (int f = 0; f < nf && !dc_test_failed; f++) {
            int64_t got = hier_case(ctx, CFG[i][0], CFG[i][1], CFG[i][2],
                                    CFG[i][3], CFG[i][4], ts[(i + f) % 3],
                                    fams[f], 2 * CFG[i][0],
                                    300 + (uint64_t)(i * nf + f));
            if (got > 0)
                rescued += got;
        }
    printf("rows the flat merge rescued: %lld\n", (long long)rescued);
    CHECK_MSG(dc_test_failed || rescued > 0, "no saturated row was exercised");
    dcptopk_context_destroy(ctx);
}

/* Rows saturated at the maximum count at the DeepSeek shape, 2 nodes of 4. */
TEST(simulated_nodes_saturated_rows)
{
    GPU_CTX(ctx);
    int64_t got = hier_case(ctx, 2048, 384, 8, 4, 1, 300, DC_FAM_CONC_SAT,
                            4096, 11);
    CHECK_MSG(got > 0, "CONC_SAT: %lld rescued rows", (long long)got);
    CHECK(hier_case(ctx, 2048, 384, 8, 4, 1, 2, DC_FAM_LONG, 1 << 17, 12) >= 0);
    dcptopk_context_destroy(ctx);
}

/* Small cases for compute-sanitizer (bench/device.sh's list). */
TEST(simulated_nodes_small)
{
    GPU_CTX(ctx);
    CHECK(hier_case(ctx, 512, 96, 8, 4, 1, 5, DC_FAM_CONC_SAT, 1024, 21) > 0);
    CHECK(hier_case(ctx, 512, 96, 4, 2, 1, 5, DC_FAM_NAN_ROWS, 1024, 22) >= 0);
    dcptopk_context_destroy(ctx);
}

/* Argument errors name the argument and its value (no GPU work needed). */
TEST(node_pairs_argument_errors)
{
    GPU_CTX(ctx);
    dcptopk_merge_config node = DCPTOPK_MERGE_CONFIG_INIT;
    node.world_size = 4;
    dcptopk_loopback *lb = NULL;
    CHECK_OK(dcptopk_loopback_create(ctx, &node, 8, 4096, &lb));
    dcptopk_workspace *ws = dcptopk_loopback_workspace(lb, 0);
    CHECK(ws != NULL);
    uint64_t dbuf = gpu_alloc(ctx, 8 * 2048 * 8);
    dcptopk_node_pairs_args a = DCPTOPK_NODE_PAIRS_ARGS_INIT;
    a.gathered = (const int32_t *)(uintptr_t)dcptopk_loopback_gathered(lb, 0);
    a.rows = 8;
    a.ids = (const int32_t *)(uintptr_t)dbuf;
    a.pairs_out = (int32_t *)(uintptr_t)dbuf;
    a.world_size = 6;
    CHECK_EQ(dcptopk_node_pairs(ctx, &node, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->world_size = 6");
    a.world_size = 8;
    a.first_rank = 2;
    CHECK_EQ(dcptopk_node_pairs(ctx, &node, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->first_rank = 2");
    a.first_rank = 4;
    a.sorted = 2;
    CHECK_EQ(dcptopk_node_pairs(ctx, &node, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->sorted = 2");
    a.sorted = 1;
    a.rows = 9;
    CHECK_EQ(dcptopk_node_pairs(ctx, &node, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "max_rows");
    a.rows = 8;
    CHECK_EQ(dcptopk_node_pairs(ctx, &node, NULL, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "ws is NULL");
    node.exact = 0;
    CHECK_EQ(dcptopk_node_pairs(ctx, &node, ws, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "exact = 0");
    dcptopk_merge_config pair = DCPTOPK_MERGE_CONFIG_INIT;
    pair.kind = DCPTOPK_MERGE_PAIR;
    pair.local_topk = pair.topk;
    pair.exact = 0;
    dcptopk_pair_select_args ps = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    ps.candidates = (const int32_t *)(uintptr_t)dbuf;
    ps.rows = 1;
    ps.ids_out = (int32_t *)(uintptr_t)dbuf;
    CHECK_EQ(dcptopk_pair_select_nodes(ctx, &pair, 3, &ps),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "nodes = 3");
    CHECK_EQ(dcptopk_pair_select_nodes(ctx, &pair, 0, &ps),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "nodes = 0");
    gpu_free(ctx, dbuf);
    dcptopk_loopback_destroy(lb);
    dcptopk_context_destroy(ctx);
}

/* The one-answer families (tests/util/ties.c) over simulated nodes: ties at
 * the K-th score on every rank or some, full unsaturated ranks with ties past
 * their top N, all-equal rows, +-0, -inf tails, NaN and short rows. */
TEST(simulated_nodes_one_answer_families)
{
    GPU_CTX(ctx);
    static const int cfg[][5] = {{2048, 384, 8, 4, 1}, {2048, 384, 8, 2, 64},
                                 {1024, 192, 16, 4, 1}, {512, 96, 8, 1, 2},
                                 {512, 96, 6, 3, 1},    {256, 32, 4, 2, 64}};
    int64_t rescued = 0;
    for (int i = 0; i < 6 && !dc_test_failed; i++) {
        dc_world wd;
        CHECK(dc_ties_world(&wd, cfg[i][0], cfg[i][1], cfg[i][2]) > 0);
        const int64_t got = hier_world(ctx, cfg[i][0], cfg[i][1], cfg[i][2],
                                       cfg[i][3], cfg[i][4], &wd,
                                       "one-answer families");
        dc_world_free(&wd);
        if (got > 0)
            rescued += got;
    }
    printf("rows the flat merge rescued: %lld\n", (long long)rescued);
    CHECK_MSG(dc_test_failed || rescued > 0, "no saturated row was exercised");
    dcptopk_context_destroy(ctx);
}
