/* test_loopback.c - the whole exact two-round packed merge (fused top-N pack,
 * select, push, rescue) in the one-GPU loopback world against
 * dcptopk_ref_packed_merge, bit for bit: every rank's ids, owned rows,
 * counts and saturation words. Also: rows saturated at the maximum count,
 * NaN rows, 100+ consecutive calls mixing saturated and unsaturated rows
 * (the sequence words stay in step), CUDA graph capture and replay, and a
 * rescue whose peer never pushes (DCPTOPK_RESCUE_TIMEOUT, the context keeps
 * working). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "gpu_util.h"
#include "harness.h"
#include "ties.h"

#define BLOCK 64
#define NUM_REQS 3

typedef struct lb_case {
    dcptopk_context *ctx;
    dcptopk_merge_config c;
    dcptopk_loopback *lb;
    int64_t rows, stride, max_local_len;
    int32_t cols;
    /* device */
    uint64_t logits[16], ends[16], ids[16], rows_out[16], counts[16];
    uint64_t req, table;
    /* host */
    int32_t *req_h, *table_h;
} lb_case;

static void lb_free(lb_case *k)
{
    for (int r = 0; r < 16; r++) {
        gpu_free(k->ctx, k->logits[r]);
        gpu_free(k->ctx, k->ends[r]);
        gpu_free(k->ctx, k->ids[r]);
        gpu_free(k->ctx, k->rows_out[r]);
        gpu_free(k->ctx, k->counts[r]);
    }
    gpu_free(k->ctx, k->req);
    gpu_free(k->ctx, k->table);
    free(k->req_h);
    free(k->table_h);
    dcptopk_loopback_destroy(k->lb);
    memset(k, 0, sizeof *k);
}

/* Buffers for a world of `rows` rows, `stride` columns, max_local_len. */
static int lb_init(lb_case *k, dcptopk_context *ctx, int kk, int n, int w,
                   int s, int64_t rows, int64_t stride, int64_t max_local_len)
{
    memset(k, 0, sizeof *k);
    k->ctx = ctx;
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = kk;
    c.local_topk = n;
    c.world_size = w;
    c.block_size = BLOCK;
    c.interleave = s;
    c.emit_ids = 1;
    c.exact = 1;
    k->c = c;
    k->rows = rows;
    k->stride = stride;
    k->max_local_len = max_local_len;
    if (dcptopk_loopback_create(ctx, &c, rows, max_local_len, &k->lb)) {
        fprintf(stderr, "loopback_create: %s\n", dcptopk_last_error(ctx));
        return -1;
    }
    k->cols = (int32_t)((max_local_len + BLOCK - 1) / BLOCK);
    if (k->cols > 2)
        k->cols--;
    k->req_h = malloc((size_t)rows * 4);
    k->table_h = malloc((size_t)NUM_REQS * (size_t)k->cols * 4);
    for (int64_t t = 0; t < rows; t++)
        k->req_h[t] = (int32_t)(t % 4);
    for (int64_t i = 0; i < (int64_t)NUM_REQS * k->cols; i++)
        k->table_h[i] = (int32_t)((i * 7919) % 50000);
    k->req = gpu_upload(ctx, k->req_h, (size_t)rows * 4);
    k->table = gpu_upload(ctx, k->table_h, (size_t)NUM_REQS * k->cols * 4);
    for (int r = 0; r < w; r++) {
        k->logits[r] = gpu_alloc(ctx, (size_t)rows * (size_t)stride * 2);
        k->ends[r] = gpu_alloc(ctx, (size_t)rows * 4);
        k->ids[r] = gpu_alloc(ctx, (size_t)rows * (size_t)kk * 4);
        k->rows_out[r] = gpu_alloc(ctx, (size_t)rows * (size_t)kk * 4);
        k->counts[r] = gpu_alloc(ctx, (size_t)rows * 4);
        if (!k->logits[r] || !k->ends[r] || !k->ids[r] || !k->rows_out[r] ||
            !k->counts[r])
            return -1;
    }
    return k->req && k->table ? 0 : -1;
}

static int lb_upload(lb_case *k, const dc_world *w)
{
    for (int r = 0; r < k->c.world_size; r++) {
        for (int64_t t = 0; t < k->rows; t++)
            if (dc_memcpy_htod(k->ctx, k->logits[r] + (uint64_t)t * k->stride * 2,
                               w->logits[r] + t * w->stride,
                               (size_t)(w->stride < k->stride ? w->stride : k->stride) * 2))
                return -1;
        if (dc_memcpy_htod(k->ctx, k->ends[r], w->row_ends[r], (size_t)k->rows * 4))
            return -1;
    }
    return 0;
}

static void lb_maps(lb_case *k, dcptopk_rows_map *maps, int device,
                    int32_t **rows_h, int32_t **counts_h)
{
    for (int r = 0; r < k->c.world_size; r++) {
        dcptopk_rows_map m;
        memset(&m, 0, sizeof m);
        m.req_id = device ? (const int32_t *)(uintptr_t)k->req : k->req_h;
        m.block_table = device ? (const int32_t *)(uintptr_t)k->table : k->table_h;
        m.block_table_stride = k->cols;
        m.block_table_cols = k->cols;
        m.num_reqs = NUM_REQS;
        m.stride_rows = BLOCK;
        m.rows_out = device ? (int32_t *)(uintptr_t)k->rows_out[r] : rows_h[r];
        m.counts_out = device ? (int32_t *)(uintptr_t)k->counts[r] : counts_h[r];
        maps[r] = m;
    }
}

static dcptopk_result lb_run(lb_case *k, void *stream)
{
    const uint16_t *lg[16];
    const int32_t *re[16];
    int32_t *ids[16];
    dcptopk_rows_map maps[16];
    for (int r = 0; r < k->c.world_size; r++) {
        lg[r] = (const uint16_t *)(uintptr_t)k->logits[r];
        re[r] = (const int32_t *)(uintptr_t)k->ends[r];
        ids[r] = (int32_t *)(uintptr_t)k->ids[r];
    }
    lb_maps(k, maps, 1, NULL, NULL);
    return dcptopk_loopback_merge(k->lb, lg, k->stride, re, k->rows, ids, maps,
                                  stream);
}

/* Compares every rank's outputs with the reference merge of `w`. Returns the
 * number of rescued rows (or -1 after a failure). */
static int64_t lb_compare(lb_case *k, const dc_world *w, const char *what)
{
    const int W = k->c.world_size, K = k->c.topk;
    const size_t out_n = (size_t)k->rows * (size_t)K;
    int32_t *ids_r[16], *rows_r[16], *cnt_r[16];
    uint32_t *sat_r[16];
    for (int r = 0; r < W; r++) {
        ids_r[r] = malloc(out_n * 4);
        rows_r[r] = malloc(out_n * 4);
        cnt_r[r] = malloc((size_t)k->rows * 4);
        sat_r[r] = malloc((size_t)k->rows * 4);
    }
    dcptopk_rows_map maps[16];
    lb_maps(k, maps, 0, rows_r, cnt_r);
    int64_t rescued = 0;
    dcptopk_result res = dcptopk_ref_packed_merge(
        &k->c, (const uint16_t *const *)w->logits, w->stride, k->max_local_len,
        (const int32_t *const *)w->row_ends, k->rows, ids_r, maps, sat_r,
        &rescued);
    int64_t ret = rescued;
    if (res) {
        DC_FAIL_AT("ref merge: %s", dcptopk_last_error(NULL));
        ret = -1;
    }
    int32_t *buf = malloc(out_n * 4);
    for (int r = 0; r < W && ret >= 0; r++) {
        struct {
            const char *name;
            uint64_t d;
            const int32_t *ref;
            size_t n;
            int cols;
        } outs[4] = {
            {"ids", k->ids[r], ids_r[r], out_n, K},
            {"rows", k->rows_out[r], rows_r[r], out_n, K},
            {"counts", k->counts[r], cnt_r[r], (size_t)k->rows, 1},
            {"sat", dcptopk_loopback_saturation(k->lb, r),
             (const int32_t *)sat_r[r], (size_t)k->rows, 1},
        };
        for (int o = 0; o < 4 && ret >= 0; o++) {
            if (gpu_download(k->ctx, buf, outs[o].d, outs[o].n * 4)) {
                ret = -1;
                break;
            }
            for (size_t i = 0; i < outs[o].n; i++)
                if (buf[i] != outs[o].ref[i]) {
                    DC_FAIL_AT("%s K=%d N=%d W=%d T=%lld rank %d: %s differ at "
                               "row %zu col %zu: ref %d (0x%x) gpu %d (0x%x)",
                               what, K, k->c.local_topk, W, (long long)k->rows,
                               r, outs[o].name, i / outs[o].cols,
                               i % outs[o].cols, outs[o].ref[i],
                               (unsigned)outs[o].ref[i], buf[i],
                               (unsigned)buf[i]);
                    ret = -1;
                    break;
                }
        }
    }
    free(buf);
    for (int r = 0; r < W; r++) {
        free(ids_r[r]);
        free(rows_r[r]);
        free(cnt_r[r]);
        free(sat_r[r]);
    }
    return ret;
}

/* The loopback merge of world wd (interleave s) against the reference;
 * returns the rescued rows or -1. */
static int64_t world_case(dcptopk_context *ctx, int kk, int n, int w, int s,
                          const dc_world *wd, const char *what)
{
    lb_case k;
    int64_t ret = -1;
    if (lb_init(&k, ctx, kk, n, w, s, wd->rows, wd->stride,
                wd->max_local_len) ||
        lb_upload(&k, wd)) {
        DC_FAIL_AT("setup: %s", dcptopk_last_error(ctx));
        goto out;
    }
    dcptopk_result r = lb_run(&k, NULL);
    if (!r)
        r = dcptopk_loopback_check(k.lb, NULL);
    if (r) {
        DC_FAIL_AT("merge: %s", dcptopk_last_error(ctx));
        goto out;
    }
    ret = lb_compare(&k, wd, what);
out:
    lb_free(&k);
    return ret;
}

static int64_t one_case(dcptopk_context *ctx, int kk, int n, int w, int64_t rows,
                        int fam, int64_t len, uint64_t seed)
{
    dc_world wd;
    if (dc_gen_world(&wd, fam, kk, n, w, rows, len, seed)) {
        DC_FAIL_AT("dc_gen_world");
        return -1;
    }
    const int64_t ret = world_case(ctx, kk, n, w, 1, &wd, dc_family_name(fam));
    dc_world_free(&wd);
    return ret;
}

/* The configs (K, N, W) tested, every W in {1,2,3,4,8,16} and every (K, N). */
static const int CFG[][3] = {{2048, 384, 8}, {2048, 384, 16}, {2048, 384, 3},
                             {2048, 256, 4}, {2048, 256, 16}, {1024, 192, 2},
                             {1024, 192, 16}, {512, 96, 1},   {512, 96, 8}};
#define NCFG ((int)(sizeof CFG / sizeof CFG[0]))

TEST(merge_matches_reference)
{
    GPU_CTX(ctx);
    const int fams[] = {DC_FAM_NORMAL, DC_FAM_CONC_SAT, DC_FAM_INTEGER,
                        DC_FAM_SHORT_ROWS, DC_FAM_CONC_ALL, DC_FAM_NAN_ROWS,
                        DC_FAM_EMPTY_OWNER, DC_FAM_CONC_ONE, DC_FAM_INF};
    const int64_t ts[] = {1, 7, 64};
    int64_t rescued_total = 0;
    for (int i = 0; i < NCFG && !dc_test_failed; i++)
        for (int f = 0; f < 9 && !dc_test_failed; f++) {
            int64_t t = ts[(i + f) % 3];
            int64_t got = one_case(ctx, CFG[i][0], CFG[i][1], CFG[i][2], t,
                                   fams[f], 2 * CFG[i][0], 100 + (uint64_t)(i * 9 + f));
            if (got > 0)
                rescued_total += got;
        }
    printf("rescued rows in total: %lld\n", (long long)rescued_total);
    CHECK_MSG(dc_test_failed || rescued_total > 0,
              "no saturated row was exercised");
    dcptopk_context_destroy(ctx);
}

/* Rows saturated at the maximum count ((K-1)/N ranks) and NaN rows, T=1000
 * at the DeepSeek shape; every family once. */
TEST(merge_saturated_and_nan)
{
    GPU_CTX(ctx);
    int64_t got = one_case(ctx, 2048, 384, 8, 1000, DC_FAM_CONC_SAT, 4096, 7);
    CHECK_MSG(got > 0, "CONC_SAT: %lld rescued rows", (long long)got);
    got = one_case(ctx, 2048, 384, 8, 200, DC_FAM_NAN_ROWS, 4096, 8);
    CHECK(got >= 0);
    for (int f = 0; f < DC_FAM_COUNT && !dc_test_failed; f++)
        CHECK(one_case(ctx, 2048, 256, 4, f == DC_FAM_LONG ? 2 : 33,
                       f, 3000, 50 + (uint64_t)f) >= 0);
    dcptopk_context_destroy(ctx);
}

static int cmp_desc(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* How many of row t's valid scores equal its K-th largest (finite scores
 * only; the world has no others here). */
static int64_t kth_ties(const dc_world *wd, int64_t t, int kk, float *buf)
{
    int64_t n = 0;
    for (int q = 0; q < wd->world_size; q++) {
        int64_t end = wd->row_ends[q][t];
        end = end < 0 ? 0 : end > wd->max_local_len ? wd->max_local_len : end;
        for (int64_t j = 0; j < end; j++)
            buf[n++] = dc_bf16_to_f32(wd->logits[q][t * wd->stride + j]);
    }
    if (n < kk)
        return 0;
    qsort(buf, (size_t)n, sizeof *buf, cmp_desc);
    int64_t m = 0;
    for (int64_t j = 0; j < n; j++)
        m += buf[j] == buf[kk - 1];
    return m;
}

/* Saturated rows whose K-th score is shared by a few keys, by dozens, by
 * about a hundred, or by hundreds: the rescue ranks a small tie by
 * comparison and a large one by its 64-bit radix select (rescue.cu,
 * TIE_MAX = 128). CONC_SAT boosts its saturated ranks by +50, where the bf16
 * step is 0.25 and hundreds of keys tie; here each boosted score is redrawn
 * as 2^(span * U), U uniform, and the others made negative, so a wide span
 * spreads the boundary over many bf16 values (span 0: kept as generated). */
TEST(rescue_boundary_ties)
{
    GPU_CTX(ctx);
    const int kk = 2048, n = 384, w = 8;
    const int64_t rows = 160, len = 4096;
    const float span[] = {40.0f, 8.0f, 2.0f, 1.0f, 0.0f};
    float *buf = malloc(sizeof(float) * (size_t)(w * (len + 128)));
    int64_t small = 0, large = 0, rescued = 0;
    dc_rng rng;
    dc_rng_seed(&rng, 77);
    CHECK(buf != NULL);
    for (int si = 0; si < 5 && !dc_test_failed; si++) {
        dc_world wd;
        CHECK(dc_gen_world(&wd, DC_FAM_CONC_SAT, kk, n, w, rows, len, 70 + (uint64_t)si) == 0);
        for (int q = 0; q < w && span[si] > 0.0f; q++)
            for (int64_t i = 0; i < rows * wd.stride; i++) {
                const float x = dc_bf16_to_f32(wd.logits[q][i]);
                const float y = x > 25.0f ? exp2f((float)dc_rng_uniform(&rng) * span[si])
                                          : -(fabsf(x) + 1.0f);
                wd.logits[q][i] = dc_f32_to_bf16(y);
            }
        for (int64_t t = 0; t < rows; t++) {
            const int64_t m = kth_ties(&wd, t, kk, buf);
            small += m >= 2 && m <= 100;
            large += m > 128;
        }
        const int64_t got = world_case(ctx, kk, n, w, 1, &wd, "boundary ties");
        CHECK_MSG(got > 0, "span %g: %lld rescued rows", (double)span[si], (long long)got);
        rescued += got > 0 ? got : 0;
        dc_world_free(&wd);
    }
    printf("rows with 2..100 keys at the K-th score: %lld, with more than 128: %lld; "
           "rescued %lld\n", (long long)small, (long long)large, (long long)rescued);
    CHECK_MSG(small >= 100 && large >= 100, "ties: %lld small, %lld large", (long long)small,
              (long long)large);
    free(buf);
    dcptopk_context_destroy(ctx);
}

/* Small merges for compute-sanitizer (bench/device.sh's list): rows
 * saturated in exactly (K-1)/N of 8 ranks (the push and the rescue run),
 * NaN rows, and rows boosted in every rank (ties around tau). */
TEST(merge_small)
{
    GPU_CTX(ctx);
    int64_t got = one_case(ctx, 512, 96, 8, 7, DC_FAM_CONC_SAT, 1024, 900);
    CHECK_MSG(got > 0, "CONC_SAT: %lld rescued rows", (long long)got);
    CHECK(one_case(ctx, 512, 96, 2, 5, DC_FAM_NAN_ROWS, 1024, 901) >= 0);
    CHECK(one_case(ctx, 512, 96, 4, 5, DC_FAM_CONC_ALL, 1024, 902) >= 0);
    dcptopk_context_destroy(ctx);
}

/* 120 consecutive merges on one loopback world, alternating saturated and
 * unsaturated inputs: the ranks' sequence words must stay in step (a rescue
 * waits for flag == seq + 1, so a drift would time out or mis-merge). */
TEST(consecutive_calls_stay_in_step)
{
    GPU_CTX(ctx);
    const int kk = 2048, n = 384, w = 8;
    const int64_t rows = 64;
    dc_world worlds[3];
    const int fams[3] = {DC_FAM_CONC_SAT, DC_FAM_NORMAL, DC_FAM_CONC_ALL};
    for (int i = 0; i < 3; i++)
        CHECK(dc_gen_world(&worlds[i], fams[i], kk, n, w, rows, 4096, 300 + (uint64_t)i) == 0);
    /* All worlds share one stride (the generator sizes it from local_len). */
    lb_case k;
    CHECK(lb_init(&k, ctx, kk, n, w, 1, rows, worlds[0].stride,
                  worlds[0].max_local_len) == 0);
    int64_t rescued = 0;
    for (int call = 0; call < 120 && !dc_test_failed; call++) {
        const dc_world *wd = &worlds[call % 3];
        CHECK(wd->stride == k.stride && wd->max_local_len == k.max_local_len);
        CHECK(lb_upload(&k, wd) == 0);
        dcptopk_result r = lb_run(&k, NULL);
        if (!r)
            r = dcptopk_loopback_check(k.lb, NULL);
        CHECK_MSG(r == 0, "call %d: %s", call, dcptopk_last_error(ctx));
        if (call % 10 < 3 || call >= 117) {
            int64_t got = lb_compare(&k, wd, dc_family_name(fams[call % 3]));
            CHECK_MSG(got >= 0, "call %d", call);
            rescued += got;
        }
    }
    CHECK(rescued > 0);
    lb_free(&k);
    for (int i = 0; i < 3; i++)
        dc_world_free(&worlds[i]);
    dcptopk_context_destroy(ctx);
}

/* The merge captured into a CUDA graph and replayed with new inputs. */
TEST(graph_capture_and_replay)
{
    GPU_CTX(ctx);
    const int kk = 1024, n = 192, w = 4;
    const int64_t rows = 48;
    dc_world worlds[2];
    CHECK(dc_gen_world(&worlds[0], DC_FAM_CONC_SAT, kk, n, w, rows, 2048, 1) == 0);
    CHECK(dc_gen_world(&worlds[1], DC_FAM_NORMAL, kk, n, w, rows, 2048, 2) == 0);
    lb_case k;
    CHECK(lb_init(&k, ctx, kk, n, w, 1, rows, worlds[0].stride,
                  worlds[0].max_local_len) == 0);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    /* One eager call first: modules load outside the capture. */
    CHECK(lb_upload(&k, &worlds[0]) == 0);
    CHECK_OK(lb_run(&k, stream));
    CHECK_OK(dcptopk_loopback_check(k.lb, stream));
    CHECK_OK(dc_graph_begin(ctx, stream));
    dcptopk_result r = lb_run(&k, stream);
    void *exec2 = NULL;
    dcptopk_result r2 = dc_graph_end(ctx, stream, &exec2);
    CHECK_MSG(r == 0 && r2 == 0, "capture: %s", dcptopk_last_error(ctx));
    exec = exec2;
    for (int rep = 0; rep < 6 && !dc_test_failed; rep++) {
        const dc_world *wd = &worlds[rep % 2];
        CHECK(lb_upload(&k, wd) == 0);
        CHECK_OK(dc_graph_launch(ctx, exec, stream));
        r = dcptopk_loopback_check(k.lb, stream);
        CHECK_MSG(r == 0, "replay %d: %s", rep, dcptopk_last_error(ctx));
        CHECK(lb_compare(&k, wd, "graph") >= 0);
    }
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    lb_free(&k);
    dc_world_free(&worlds[0]);
    dc_world_free(&worlds[1]);
    dcptopk_context_destroy(ctx);
}

/* A workspace whose peer never pushes: the rescue gives up after the
 * timeout, the status reads DCPTOPK_RESCUE_TIMEOUT, and the context works
 * afterwards. */
TEST(rescue_timeout_reported)
{
    setenv("DCPTOPK_RESCUE_TIMEOUT_MS", "200", 1);
    GPU_CTX(ctx);
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 64;
    c.local_topk = 32;
    c.world_size = 2;
    c.block_size = 0;
    c.exact = 1;
    const int64_t rows = 3;
    const int32_t words = dcptopk_packed_row_words(32);
    /* Rank 1 sends 32 words all above rank 0's: 64 = K selected, tau16 =
     * rank 0's lowest, rank 1 saturated; nobody ever pushes for it. */
    int32_t g[2 * 3 * 33];
    memset(g, 0, sizeof g);
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < rows; t++)
            for (int j = 0; j < 32; j++)
                g[(r * rows + t) * words + j] =
                    (int32_t)(((uint32_t)(0x9000 + r * 0x100 + j) << 16) |
                              (0xFFFFu - (uint32_t)j));
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    CHECK_OK(dcptopk_workspace_layout_get(&c, rows, &lay));
    uint64_t recv[2] = {gpu_alloc(ctx, lay.recv_bytes), gpu_alloc(ctx, lay.recv_bytes)};
    uint64_t flags[2] = {gpu_alloc(ctx, lay.flags_bytes), gpu_alloc(ctx, lay.flags_bytes)};
    dcptopk_workspace *ws = NULL;
    dcptopk_result r = dcptopk_workspace_create(ctx, &c, rows, 0, recv, flags, &ws);
    CHECK_MSG(r == 0, "workspace: %s", dcptopk_last_error(ctx));
    uint64_t d_g = gpu_upload(ctx, g, sizeof g);
    uint64_t d_ids = gpu_alloc(ctx, rows * 64 * 4);
    uint64_t d_l = gpu_alloc(ctx, rows * 64 * 2), d_e = gpu_alloc(ctx, rows * 4);
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    a.gathered = (const int32_t *)(uintptr_t)d_g;
    a.rows = rows;
    a.rank = 0;
    a.ids_out = (int32_t *)(uintptr_t)d_ids;
    a.logits = (const uint16_t *)(uintptr_t)d_l;
    a.logits_stride = 64;
    a.max_local_len = 64;
    a.row_ends = (const int32_t *)(uintptr_t)d_e;
    CHECK_OK(dcptopk_select(ctx, &c, ws, &a));
    r = dcptopk_workspace_check(ws, NULL);
    CHECK_EQ(r, DCPTOPK_RESCUE_TIMEOUT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rank 1");
    uint32_t sat[3];
    CHECK(gpu_download(ctx, sat, dcptopk_workspace_saturation(ws), sizeof sat) == 0);
    CHECK_EQ(sat[0] >> 16, 2u);
    /* The status was cleared, and the context still runs kernels: a plain
     * select equals the reference. */
    CHECK_OK(dcptopk_workspace_check(ws, NULL));
    c.exact = 0;
    int32_t ref[3 * 64], got[3 * 64];
    dcptopk_select_args h = DCPTOPK_SELECT_ARGS_INIT;
    h.gathered = g;
    h.rows = rows;
    h.ids_out = ref;
    CHECK_OK(dcptopk_ref_select(&c, &h, NULL));
    a.logits = NULL;
    a.row_ends = NULL;
    r = dcptopk_select(ctx, &c, NULL, &a);
    CHECK_MSG(r == 0, "select after timeout: %s", dcptopk_last_error(ctx));
    CHECK(gpu_download(ctx, got, d_ids, sizeof got) == 0);
    CHECK_EQ(memcmp(ref, got, sizeof got), 0);
    dcptopk_workspace_destroy(ws);
    gpu_free(ctx, d_g);
    gpu_free(ctx, d_ids);
    gpu_free(ctx, d_l);
    gpu_free(ctx, d_e);
    for (int i = 0; i < 2; i++) {
        gpu_free(ctx, recv[i]);
        gpu_free(ctx, flags[i]);
    }
    dcptopk_context_destroy(ctx);
    unsetenv("DCPTOPK_RESCUE_TIMEOUT_MS");
}

/* The one-answer families (tests/util/ties.c; test_one_answer checks the
 * reference against the one-GPU oracle on them): ties at the K-th score on
 * every rank or some, full unsaturated ranks with ties past their top N,
 * all-equal rows, +-0, -inf tails, NaN and short rows, for several (K, N,
 * W, S), one of them on the select's larger-row path (W * N > 4096). */
TEST(one_answer_families)
{
    GPU_CTX(ctx);
    static const int cfg[][4] = {{2048, 384, 8, 1}, {2048, 384, 8, 64},
                                 {2048, 256, 4, 2},  {1024, 192, 16, 1},
                                 {512, 96, 3, 1},    {512, 96, 1, 1},
                                 {2048, 1024, 8, 1}, {256, 32, 6, 64}};
    int64_t rescued = 0;
    for (int i = 0; i < 8 && !dc_test_failed; i++) {
        dc_world wd;
        CHECK(dc_ties_world(&wd, cfg[i][0], cfg[i][1], cfg[i][2]) > 0);
        const int64_t got = world_case(ctx, cfg[i][0], cfg[i][1], cfg[i][2],
                                       cfg[i][3], &wd, "one-answer families");
        dc_world_free(&wd);
        if (got > 0)
            rescued += got;
    }
    printf("rescued rows: %lld\n", (long long)rescued);
    CHECK_MSG(dc_test_failed || rescued > 0, "no saturated row was exercised");
    dcptopk_context_destroy(ctx);
}

/* The same families at two small shapes, for compute-sanitizer
 * (bench/device.sh's list). */
TEST(one_answer_small)
{
    GPU_CTX(ctx);
    static const int cfg[][4] = {{512, 96, 8, 1}, {256, 32, 6, 64}};
    int64_t rescued = 0;
    for (int i = 0; i < 2 && !dc_test_failed; i++) {
        dc_world wd;
        CHECK(dc_ties_world(&wd, cfg[i][0], cfg[i][1], cfg[i][2]) > 0);
        const int64_t got = world_case(ctx, cfg[i][0], cfg[i][1], cfg[i][2],
                                       cfg[i][3], &wd, "one-answer families");
        dc_world_free(&wd);
        if (got > 0)
            rescued += got;
    }
    CHECK_MSG(dc_test_failed || rescued > 0, "no saturated row was exercised");
    dcptopk_context_destroy(ctx);
}
