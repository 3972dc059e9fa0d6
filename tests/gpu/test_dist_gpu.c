/* test_dist_gpu.c - the merge across ranks on one GPU, against the CPU
 * reference bit for bit:
 *  - W = 2, 3, 4, 8 processes sharing GPU 0 (a store group, peer memory by
 *    CUDA IPC): the whole exact merge on several input families, rows
 *    saturated at the maximum count, 100+ consecutive calls, CUDA graph
 *    capture and replay of the one-call merge (on a capturable path), a
 *    rank killed mid-run (the others get DCPTOPK_PEER_TIMEOUT within the
 *    bound, then DCPTOPK_GROUP_BROKEN), `dcptopk selftest --ranks 4`;
 *  - simulated nodes (DCPTOPK_DOMAIN_SIZE): the hierarchical merge, against
 *    dcptopk_ref_hier_merge; the store path;
 *  - the one-answer families (tests/util/ties.h), flat and on simulated
 *    nodes, against the reference and the one-GPU brute force;
 *  - one process: a one-rank group (loopback path) with the packed and the
 *    pair merge and graph replay; NCCL with W = 1: group creation from a
 *    unique id, adoption of an existing communicator, the NCCL exchange
 *    (skipped when NCCL is absent).
 * Ranks are separate processes started by fork + exec of this binary (no
 * CUDA state crosses a fork): DC_DIST_CHILD names the role, and a
 * constructor runs it before the harness's main. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl_table.h"
#include "dist_ranks.h"
#include "gen.h"
#include "gpu_util.h"
#include "harness.h"

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (dcptopk_device_count() == 0)                                       \
            SKIP("no CUDA device");                                            \
    } while (0)

/* ------------------------------------------- several processes, one GPU */

TEST(procs_exact_merge_w2)
{
    NEED_GPU();
    CHECK_EQ(dr_spawn(2, "merge", NULL), 2);
}

TEST(procs_exact_merge_w3)
{
    NEED_GPU();
    CHECK_EQ(dr_spawn(3, "merge", NULL), 3);
}

TEST(procs_exact_merge_w4)
{
    NEED_GPU();
    CHECK_EQ(dr_spawn(4, "merge", NULL), 4);
}

TEST(procs_exact_merge_w8)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=8", NULL};
    CHECK_EQ(dr_spawn(8, "merge", env), 8);
}

/* Rows packed by the caller's own producer (args->packed): each rank's
 * reference pack with its slots reversed, contiguous and strided, against
 * the reference's select and rescue of those rows (whose id sets are the
 * one-GPU answer), saturated rows included. */
TEST(procs_producer_packed_w2)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=8", NULL};
    CHECK_EQ(dr_spawn(2, "packed", env), 2);
}

TEST(procs_producer_packed_w4)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=8", NULL};
    CHECK_EQ(dr_spawn(4, "packed", env), 4);
}

/* The one-answer families (tests/util/ties.h) through the one-call merge of
 * processes on one GPU: every rank's ids equal the reference bit for bit and,
 * as a set, the one-GPU answer, on the flat path (several W, interleaves and
 * exchange paths) and on simulated nodes (the hierarchy). W = 2, K = 512,
 * N = 256 holds vLLM's all-equal row: 2048 tokens, 1024 a rank. */
static void ties_case(int w, const char *k, const char *n, const char *extra1,
                      const char *extra2)
{
    const char *env[] = {k, n, extra1, extra2, NULL};
    CHECK_EQ(dr_spawn(w, "ties", env), w);
}

TEST(procs_one_answer_w2)
{
    NEED_GPU();
    ties_case(2, "DC_DIST_K=512", "DC_DIST_N=256", NULL, NULL);
}

TEST(procs_one_answer_w4_interleave_64)
{
    NEED_GPU();
    ties_case(4, "DC_DIST_K=2048", "DC_DIST_N=256", "DC_DIST_S=64", NULL);
}

TEST(procs_one_answer_w8)
{
    NEED_GPU();
    ties_case(8, "DC_DIST_K=2048", "DC_DIST_N=384", NULL, NULL);
}

TEST(procs_one_answer_w3_store_interleave_2)
{
    NEED_GPU();
    ties_case(3, "DC_DIST_K=512", "DC_DIST_N=96", "DC_DIST_S=2",
              "DCPTOPK_EXCHANGE=store");
}

TEST(procs_one_answer_hier_w4_nodes_of_2)
{
    NEED_GPU();
    ties_case(4, "DC_DIST_K=1024", "DC_DIST_N=192", "DCPTOPK_DOMAIN_SIZE=2",
              NULL);
}

TEST(procs_one_answer_hier_w6_nodes_of_3_s64)
{
    NEED_GPU();
    ties_case(6, "DC_DIST_K=512", "DC_DIST_N=96", "DCPTOPK_DOMAIN_SIZE=3",
              "DC_DIST_S=64");
}

TEST(procs_one_answer_hier_w8_nodes_of_4)
{
    NEED_GPU();
    ties_case(8, "DC_DIST_K=2048", "DC_DIST_N=384", "DCPTOPK_DOMAIN_SIZE=4",
              NULL);
}

/* 120 consecutive one-call merges (every family in turn, saturated rows
 * every 8th step): the rescue's sequence words and the exchange's parity
 * stay in step across processes. */
TEST(procs_120_calls)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=120", "DC_DIST_K=512", "DC_DIST_N=96",
                         "DC_DIST_ROWS=9", NULL};
    CHECK_EQ(dr_spawn(4, "merge", env), 4);
}

/* Capture the one-call merge once, replay it 60 times with new logits
 * written into the captured input buffers between replays, every replay
 * bit-exact against the reference; then one eager call. On the push path
 * each replay is the exchange's next call (the parity alternates on the
 * device) and the settle kernel moves its rows to the fixed address the
 * captured select reads. */
static void graph_replay(int w, const char *exchange)
{
    const char *env[] = {"DC_DIST_STEPS=60", "DC_DIST_ROWS=16", exchange,
                         NULL};
    int got = dr_spawn(w, "graph", env);
    if (got < 0)
        SKIP("the processes' exchange path is staged (a host barrier per "
             "step): not capturable (docs/DISTRIBUTED.md)");
    CHECK_EQ(got, w);
}

TEST(procs_graph_replay)
{
    NEED_GPU();
    graph_replay(2, NULL); /* the path the group picks */
}

TEST(procs_graph_replay_push_w2)
{
    NEED_GPU();
    graph_replay(2, "DCPTOPK_EXCHANGE=push");
}

TEST(procs_graph_replay_push_w4)
{
    NEED_GPU();
    graph_replay(4, "DCPTOPK_EXCHANGE=push");
}

/* Rank 2 of 3 is killed at its 4th step: ranks 0 and 1 must get
 * DCPTOPK_PEER_TIMEOUT within the bound, then DCPTOPK_GROUP_BROKEN. */
TEST(procs_killed_rank)
{
    NEED_GPU();
    const char *env[] = {"DCPTOPK_PEER_TIMEOUT_MS=3000", "DC_DIST_ROWS=16",
                         NULL};
    int got = dr_spawn(3, "die", env);
    /* The victim ends by SIGKILL (counted as failed); the others pass. */
    CHECK_EQ(got, 2);
}

/* Rank 2 of 3 stops calling (alive) with no dcptopk_group_check anywhere:
 * the survivors' step ends within about one bound, fully poisoned, and the
 * next call says DCPTOPK_PEER_TIMEOUT (findings 3 and 4 of issue 32). */
static void stopped_peer(const char *role)
{
    const char *env[] = {"DCPTOPK_PEER_TIMEOUT_MS=3000", "DC_DIST_ROWS=16",
                         NULL};
    int got = dr_spawn(3, role, env);
    if (got < 0)
        SKIP("the processes' path is not push (no device waits)");
    CHECK_EQ(got, 3);
}

TEST(procs_stopped_peer_poisons)
{
    NEED_GPU();
    stopped_peer("stop");
}

TEST(procs_stopped_peer_graph_replay)
{
    NEED_GPU();
    stopped_peer("stop_graph");
}

TEST(procs_selftest_cli)
{
    NEED_GPU();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s selftest --ranks 4 --rows 32 --steps 2",
             DC_TEST_CLI);
    int st = system(cmd);
    CHECK_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
}

/* Simulated nodes (DCPTOPK_DOMAIN_SIZE: no peer memory between blocks of
 * ranks): the group runs the hierarchical merge (node merge over push or
 * staged, node pairs through the store, pair select over the nodes), every
 * rank bit for bit against dcptopk_ref_hier_merge. */
static void hier_case(int w, const char *node_size, const char *extra,
                      const char *steps)
{
    const char *env[] = {node_size, steps, "DC_DIST_ROWS=24", extra, NULL};
    CHECK_EQ(dr_spawn(w, "merge", env), w);
}

TEST(procs_hier_w4_nodes_of_2)
{
    NEED_GPU();
    hier_case(4, "DCPTOPK_DOMAIN_SIZE=2", NULL, "DC_DIST_STEPS=8");
}

TEST(procs_hier_w8_nodes_of_4)
{
    NEED_GPU();
    hier_case(8, "DCPTOPK_DOMAIN_SIZE=4", NULL, "DC_DIST_STEPS=4");
}

TEST(procs_hier_w4_nodes_of_1)
{
    NEED_GPU();
    hier_case(4, "DCPTOPK_DOMAIN_SIZE=1", NULL, "DC_DIST_STEPS=4");
}

TEST(procs_hier_w6_nodes_of_3_staged)
{
    NEED_GPU();
    hier_case(6, "DCPTOPK_DOMAIN_SIZE=3", "DCPTOPK_EXCHANGE=staged",
              "DC_DIST_STEPS=4");
}

/* The flat merge through the store path (no peer memory at all). */
TEST(procs_store_path_w3)
{
    NEED_GPU();
    const char *env[] = {"DCPTOPK_EXCHANGE=store", "DC_DIST_STEPS=4",
                         "DC_DIST_ROWS=24", NULL};
    CHECK_EQ(dr_spawn(3, "merge", env), 3);
}

/* A rank dies inside a hierarchical merge (nodes of one rank, so that the
 * survivors' rebuilt group is again nodes of equal size): the others time
 * out, then rebuild and merge. */
TEST(procs_hier_killed_rank)
{
    NEED_GPU();
    const char *env[] = {"DCPTOPK_PEER_TIMEOUT_MS=3000", "DC_DIST_ROWS=16",
                         "DCPTOPK_DOMAIN_SIZE=1", NULL};
    CHECK_EQ(dr_spawn(3, "die", env), 2);
}

TEST(procs_selftest_cli_nodes)
{
    NEED_GPU();
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s selftest --ranks 4 --node-size 2 --rows 32 --steps 2",
             DC_TEST_CLI);
    int st = system(cmd);
    CHECK_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
}

/* ---------------------------------------------------------- one process */

/* A one-rank group: the loopback path, packed exact merge and its graph. */
TEST(group_w1_packed_and_graph)
{
    GPU_CTX(ctx);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    int32_t path = 0;
    CHECK_OK(dcptopk_group_path(g, &path, NULL, 0));
    CHECK_EQ(path, DCPTOPK_PATH_LOOPBACK);
    rk k;
    CHECK(rk_setup(&k, ctx, g, 2048, 384, 40, 4096) == 0);
    CHECK(rk_inputs(&k, DC_FAM_NORMAL, 3) >= 0);
    CHECK_OK(rk_merge(&k, NULL));
    CHECK_OK(dcptopk_group_check(g, NULL));
    CHECK(rk_compare(&k, "eager") == 0);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    CHECK_OK(dc_graph_begin(ctx, stream));
    CHECK_OK(rk_merge(&k, stream));
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    for (int s = 0; s < 4; s++) {
        CHECK(rk_inputs(&k, DR_FAMILIES[s], 20 + (uint64_t)s) >= 0);
        CHECK_OK(dc_graph_launch(ctx, exec, stream));
        CHECK_OK(dcptopk_group_check(g, stream));
        CHECK(rk_compare(&k, "replay") == 0);
    }
    /* Argument errors are named and launch nothing. */
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = 41;
    CHECK_EQ(dcptopk_group_merge(k.gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->rows = 41");
    a.rows = 4;
    CHECK_EQ(dcptopk_group_merge(k.gw, &a), DCPTOPK_INVALID_ARGUMENT);
    a.struct_size = 3;
    CHECK_EQ(dcptopk_group_merge(k.gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->struct_size = 3");
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    rk_free(&k);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* Producer rows (args->packed) through a one-rank group: eager, strided,
 * captured and replayed with new rows, and a host pointer refused by name. */
TEST(group_w1_producer_packed_and_graph)
{
    GPU_CTX(ctx);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    rk k;
    CHECK(rk_setup(&k, ctx, g, 2048, 384, 40, 4096) == 0);
    const int64_t words = dcptopk_packed_row_words(384);
    CHECK(rk_inputs_packed(&k, DC_FAM_NORMAL, 3, words + 3) >= 0);
    CHECK_OK(rk_merge(&k, NULL));
    CHECK_OK(dcptopk_group_check(g, NULL));
    CHECK(rk_compare(&k, "eager") == 0);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    CHECK(rk_inputs_packed(&k, DC_FAM_INTEGER, 4, 0) >= 0);
    CHECK_OK(dc_graph_begin(ctx, stream));
    CHECK_OK(rk_merge(&k, stream));
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    for (int s = 0; s < 4; s++) {
        /* Same stride, same buffer: the replay reads the new rows. */
        CHECK(rk_inputs_packed(&k, DR_FAMILIES[s], 40 + (uint64_t)s, 0) >= 0);
        CHECK_OK(dc_graph_launch(ctx, exec, stream));
        CHECK_OK(dcptopk_group_check(g, stream));
        CHECK(rk_compare(&k, "replay") == 0);
    }
    static int32_t host_rows[8];
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = k.rows;
    a.logits = (const uint16_t *)(uintptr_t)k.logits;
    a.logits_stride = k.stride;
    a.max_local_len = k.len;
    a.row_ends = (const int32_t *)(uintptr_t)k.ends;
    a.ids_out = (int32_t *)(uintptr_t)k.ids;
    a.packed = host_rows;
    CHECK_EQ(dcptopk_group_merge(k.gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->packed");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "host memory");
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    rk_free(&k);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* indptr_out of the one-call merge through a one-rank group: owned rows,
 * counts against the reference bit for bit, indptr against this test's own
 * prefix sum of the counts; eager, then a captured call replayed with new
 * inputs. Packed (exact, saturated rows) and pair. */
enum { IP_T = 40, IP_B = 16, IP_LEN = 4096 };

typedef struct ip_case {
    dcptopk_context *ctx;
    int32_t k;
    uint64_t req, table, rows, counts, indptr;
    int32_t req_h[IP_T], table_h[IP_LEN / IP_B + 1];
    int32_t *rows_ref, counts_ref[IP_T], *rows_h, counts_h[IP_T];
    int32_t indptr_h[IP_T + 1];
    dcptopk_rows_map map_h;
} ip_case;

static void ip_setup(ip_case *ic, dcptopk_context *ctx, int32_t k)
{
    memset(ic, 0, sizeof *ic);
    ic->ctx = ctx;
    ic->k = k;
    for (int i = 0; i < IP_LEN / IP_B + 1; i++)
        ic->table_h[i] = 500 + 3 * i;
    ic->rows_ref = malloc((size_t)IP_T * (size_t)k * 4);
    ic->rows_h = malloc((size_t)IP_T * (size_t)k * 4);
    ic->req = gpu_upload(ctx, ic->req_h, sizeof ic->req_h);
    ic->table = gpu_upload(ctx, ic->table_h, sizeof ic->table_h);
    ic->rows = gpu_alloc(ctx, (size_t)IP_T * (size_t)k * 4);
    ic->counts = gpu_alloc(ctx, IP_T * 4);
    ic->indptr = gpu_alloc(ctx, (IP_T + 1) * 4);
    dcptopk_rows_map m = {ic->req_h, ic->table_h, IP_LEN / IP_B + 1,
                          IP_LEN / IP_B + 1, 1, IP_B, ic->rows_ref, k,
                          ic->counts_ref};
    ic->map_h = m;
}

static dcptopk_rows_map ip_map(const ip_case *ic)
{
    dcptopk_rows_map m = ic->map_h;
    m.req_id = (const int32_t *)(uintptr_t)ic->req;
    m.block_table = (const int32_t *)(uintptr_t)ic->table;
    m.rows_out = (int32_t *)(uintptr_t)ic->rows;
    m.counts_out = (int32_t *)(uintptr_t)ic->counts;
    return m;
}

/* 0 when rows and counts equal the reference and indptr their prefix sum. */
static int ip_compare(ip_case *ic, const char *what)
{
    if (gpu_download(ic->ctx, ic->rows_h, ic->rows, (size_t)IP_T * ic->k * 4) ||
        gpu_download(ic->ctx, ic->counts_h, ic->counts, IP_T * 4) ||
        gpu_download(ic->ctx, ic->indptr_h, ic->indptr, (IP_T + 1) * 4))
        return -1;
    if (memcmp(ic->counts_h, ic->counts_ref, IP_T * 4) ||
        memcmp(ic->rows_h, ic->rows_ref, (size_t)IP_T * ic->k * 4)) {
        fprintf(stderr, "%s: owned rows or counts differ from the reference\n",
                what);
        return -1;
    }
    int32_t sum = 0;
    for (int t = 0; t <= IP_T; t++) {
        if (ic->indptr_h[t] != sum) {
            fprintf(stderr, "%s: indptr[%d] = %d, the counts sum to %d\n",
                    what, t, ic->indptr_h[t], sum);
            return -1;
        }
        if (t < IP_T)
            sum += ic->counts_h[t];
    }
    return sum > 0 ? 0 : -1; /* some row owned something */
}

static void ip_free(ip_case *ic)
{
    gpu_free(ic->ctx, ic->req);
    gpu_free(ic->ctx, ic->table);
    gpu_free(ic->ctx, ic->rows);
    gpu_free(ic->ctx, ic->counts);
    gpu_free(ic->ctx, ic->indptr);
    free(ic->rows_ref);
    free(ic->rows_h);
}

/* New packed inputs uploaded into the same buffers, and the reference. */
static int ip_packed_inputs(ip_case *ic, const dcptopk_merge_config *c,
                            int family, uint64_t seed, uint64_t logits,
                            uint64_t ends, int64_t stride)
{
    dc_world w;
    if (dc_gen_world(&w, family, c->topk, c->local_topk, 1, IP_T, IP_LEN,
                     seed) || w.stride != stride)
        return -1;
    int64_t rescued = 0;
    int rc = dcptopk_ref_packed_merge(c, (const uint16_t *const *)w.logits,
                                      w.stride, w.max_local_len,
                                      (const int32_t *const *)w.row_ends,
                                      IP_T, NULL, &ic->map_h, NULL, &rescued)
                 ? -1
                 : 0;
    if (!rc && (dc_memcpy_htod(ic->ctx, logits, w.logits[0],
                               (size_t)IP_T * (size_t)stride * 2) ||
                dc_memcpy_htod(ic->ctx, ends, w.row_ends[0], IP_T * 4)))
        rc = -1;
    dc_world_free(&w);
    return rc;
}

TEST(group_w1_indptr_packed_and_graph)
{
    GPU_CTX(ctx);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 2048;
    c.local_topk = 384;
    c.world_size = 1;
    c.block_size = IP_B;
    c.emit_ids = 0;
    dcptopk_group_workspace *gw = NULL;
    CHECK_OK(dcptopk_group_workspace_create(g, &c, IP_T, &gw));
    CHECK_OK(dcptopk_group_warmup(gw, NULL, NULL, NULL));
    ip_case ic;
    ip_setup(&ic, ctx, c.topk);
    const int64_t stride = (IP_LEN + 7) / 8 * 8 + 8;
    uint64_t logits = gpu_alloc(ctx, (size_t)IP_T * (size_t)stride * 2);
    uint64_t ends = gpu_alloc(ctx, IP_T * 4);
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = IP_T;
    a.logits = (const uint16_t *)(uintptr_t)logits;
    a.logits_stride = stride;
    a.max_local_len = IP_LEN;
    a.row_ends = (const int32_t *)(uintptr_t)ends;
    a.rows_map = ip_map(&ic);
    a.indptr_out = (int32_t *)(uintptr_t)ic.indptr;
    CHECK(ip_packed_inputs(&ic, &c, DC_FAM_CONC_SAT, 1, logits, ends, stride) == 0);
    CHECK_OK(dcptopk_group_merge(gw, &a));
    CHECK_OK(dcptopk_group_check(g, NULL));
    CHECK(ip_compare(&ic, "packed eager") == 0);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    a.stream = stream;
    CHECK_OK(dc_graph_begin(ctx, stream));
    CHECK_OK(dcptopk_group_merge(gw, &a));
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    for (int s = 0; s < 4; s++) {
        CHECK(ip_packed_inputs(&ic, &c, DR_FAMILIES[s], 60 + (uint64_t)s,
                               logits, ends, stride) == 0);
        CHECK_OK(dc_graph_launch(ctx, exec, stream));
        CHECK_OK(dcptopk_group_check(g, stream));
        CHECK(ip_compare(&ic, "packed replay") == 0);
    }
    /* indptr_out needs the owned rows. */
    a.rows_map.rows_out = NULL;
    a.rows_map.counts_out = NULL;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->indptr_out");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "without args->rows_map.rows_out");
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    gpu_free(ctx, logits);
    gpu_free(ctx, ends);
    ip_free(&ic);
    dcptopk_group_workspace_destroy(gw);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

TEST(group_w1_indptr_pair_and_graph)
{
    GPU_CTX(ctx);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = 1024;
    c.local_topk = 1024;
    c.world_size = 1;
    c.block_size = IP_B;
    c.emit_ids = 0;
    c.exact = 0;
    dcptopk_group_workspace *gw = NULL;
    CHECK_OK(dcptopk_group_workspace_create(g, &c, IP_T, &gw));
    CHECK_OK(dcptopk_group_warmup(gw, NULL, NULL, NULL));
    ip_case ic;
    ip_setup(&ic, ctx, c.topk);
    const size_t n = (size_t)IP_T * 1024 * 8;
    uint64_t dc = gpu_alloc(ctx, n);
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = IP_T;
    a.candidates = (const int32_t *)(uintptr_t)dc;
    a.rows_map = ip_map(&ic);
    a.indptr_out = (int32_t *)(uintptr_t)ic.indptr;
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    for (int s = 0; s < 5 && !dc_test_failed; s++) {
        /* Step 0 eager; the capture after it; steps 1.. replays. */
        int32_t *cand = dc_gen_pair_candidates(DC_PFAM_SPECIAL, 1024, 1, 1,
                                               IP_T, 5 + (uint64_t)s);
        CHECK(cand);
        dcptopk_pair_select_args ra = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        ra.candidates = cand;
        ra.rows = IP_T;
        ra.rows_map = ic.map_h;
        CHECK_OK(dcptopk_ref_pair_select(&c, &ra));
        CHECK(dc_memcpy_htod(ctx, dc, cand, n) == 0);
        free(cand);
        if (s == 0) {
            CHECK_OK(dcptopk_group_merge(gw, &a));
            CHECK_OK(dcptopk_group_check(g, NULL));
            a.stream = stream;
            CHECK_OK(dc_graph_begin(ctx, stream));
            CHECK_OK(dcptopk_group_merge(gw, &a));
            CHECK_OK(dc_graph_end(ctx, stream, &exec));
        } else {
            CHECK_OK(dc_graph_launch(ctx, exec, stream));
            CHECK_OK(dcptopk_group_check(g, stream));
        }
        CHECK(ip_compare(&ic, s ? "pair replay" : "pair eager") == 0);
    }
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    gpu_free(ctx, dc);
    ip_free(&ic);
    dcptopk_group_workspace_destroy(gw);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* The pair merge through a one-rank group, from the caller's candidates. */
TEST(group_w1_pair)
{
    GPU_CTX(ctx);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = 1024;
    c.local_topk = 1024;
    c.world_size = 1;
    c.exact = 0;
    const int64_t T = 33;
    dcptopk_group_workspace *gw = NULL;
    CHECK_OK(dcptopk_group_workspace_create(g, &c, T, &gw));
    int32_t *cand = dc_gen_pair_candidates(DC_PFAM_SPECIAL, 1024, 1, 1, T, 5);
    CHECK(cand);
    const size_t n = (size_t)T * 1024;
    int32_t *ref = malloc(n * 4), *got = malloc(n * 4);
    dcptopk_pair_select_args ra = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    ra.candidates = cand;
    ra.rows = T;
    ra.ids_out = ref;
    CHECK_OK(dcptopk_ref_pair_select(&c, &ra));
    uint64_t dc = gpu_upload(ctx, cand, n * 8), dids = gpu_alloc(ctx, n * 4);
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = T;
    a.candidates = (const int32_t *)(uintptr_t)dc;
    a.ids_out = (int32_t *)(uintptr_t)dids;
    CHECK_OK(dcptopk_group_merge(gw, &a));
    CHECK_OK(dcptopk_group_check(g, NULL));
    CHECK(gpu_download(ctx, got, dids, n * 4) == 0);
    CHECK(memcmp(got, ref, n * 4) == 0);
    gpu_free(ctx, dc);
    gpu_free(ctx, dids);
    free(cand);
    free(ref);
    free(got);
    dcptopk_group_workspace_destroy(gw);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* --------------------------------------------------------- NCCL, W = 1 */

#define NEED_NCCL(nc)                                                          \
    const dc_nccl *nc = NULL;                                                  \
    do {                                                                       \
        const char *why_ = NULL;                                               \
        nc = dc_nccl_get(&why_);                                               \
        if (!nc)                                                               \
            SKIP("NCCL is absent: %s", why_);                                  \
    } while (0)

static void nccl_merge_case(dcptopk_context *ctx, dcptopk_group *g)
{
    int32_t path = 0;
    char why[384];
    CHECK_OK(dcptopk_group_path(g, &path, why, sizeof why));
    CHECK_EQ(path, DCPTOPK_PATH_NCCL);
    rk k;
    CHECK(rk_setup(&k, ctx, g, 2048, 384, 24, 4096) == 0);
    CHECK(rk_inputs(&k, DC_FAM_NORMAL, 9) >= 0);
    CHECK_OK(rk_merge(&k, NULL));
    CHECK_OK(dcptopk_group_check(g, NULL));
    CHECK(rk_compare(&k, "nccl eager") == 0);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    CHECK_OK(dc_graph_begin(ctx, stream));
    CHECK_OK(rk_merge(&k, stream));
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    for (int s = 0; s < 3; s++) {
        CHECK(rk_inputs(&k, DR_FAMILIES[s], 30 + (uint64_t)s) >= 0);
        CHECK_OK(dc_graph_launch(ctx, exec, stream));
        CHECK_OK(dcptopk_group_check(g, stream));
        CHECK(rk_compare(&k, "nccl replay") == 0);
    }
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    rk_free(&k);
}

TEST(nccl_w1_unique_id)
{
    GPU_CTX(ctx);
    NEED_NCCL(nc);
    (void)nc;
    uint8_t id[DCPTOPK_GROUP_UNIQUE_ID_BYTES];
    CHECK_OK(dcptopk_group_unique_id(id));
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    gc.unique_id = id;
    gc.path = DCPTOPK_PATH_NCCL;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    nccl_merge_case(ctx, g);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

TEST(nccl_w1_adopt)
{
    GPU_CTX(ctx);
    NEED_NCCL(nc);
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    CHECK_EQ(nc->ncclGetUniqueId(&id), ncclSuccess);
    CHECK_OK(dc_ctx_enter(ctx));
    CHECK_EQ(nc->ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.nccl_comm = comm;
    gc.world_size = 2; /* wrong: the communicator has 1 rank */
    dcptopk_group *g = NULL;
    CHECK_EQ(dcptopk_group_create(ctx, &gc, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "the communicator has 1 ranks");
    gc.world_size = -1;
    gc.path = DCPTOPK_PATH_NCCL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    CHECK_EQ(dcptopk_group_rank(g), 0);
    CHECK_EQ(dcptopk_group_world_size(g), 1);
    nccl_merge_case(ctx, g);
    dcptopk_group_destroy(g);
    /* Borrowed: still alive after the group. */
    int count = 0;
    CHECK_EQ(nc->ncclCommCount(comm, &count), ncclSuccess);
    CHECK_EQ(count, 1);
    CHECK_EQ(nc->ncclCommDestroy(comm), ncclSuccess);
    dcptopk_context_destroy(ctx);
}

/* A unique id of two ranks whose second rank never comes: the group's
 * creation must give up within its timeout (NCCL's bootstrap alone would wait
 * forever), and the process must stay usable. */
TEST(nccl_bootstrap_missing_rank_times_out)
{
    GPU_CTX(ctx);
    NEED_NCCL(nc);
    (void)nc;
    uint8_t id[DCPTOPK_GROUP_UNIQUE_ID_BYTES];
    CHECK_OK(dcptopk_group_unique_id(id));
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 2;
    gc.unique_id = id;
    gc.timeout_ms = 1500;
    dcptopk_group *g = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(dcptopk_group_create(ctx, &gc, &g), DCPTOPK_PEER_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(g == NULL);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "ncclCommInitRank did not complete");
    CHECK(ms >= 1400 && ms < 6000);
    /* A world of one from a fresh id still works in the same process (with
     * the default bound: a first NCCL init alone can take seconds). */
    CHECK_OK(dcptopk_group_unique_id(id));
    gc.world_size = 1;
    gc.timeout_ms = 0;
    gc.path = DCPTOPK_PATH_NCCL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* Host time of one dcptopk_group_merge against the same launches made
 * directly (dcptopk_pack + dcptopk_select on a plain workspace): the group's
 * own cost per step. Goal: <= 5 us; the check only catches a gross
 * regression (a host sync or an allocation per call costs far more). */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

TEST(group_w1_host_overhead)
{
    GPU_CTX(ctx);
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gc, &g));
    rk k;
    CHECK(rk_setup(&k, ctx, g, 2048, 384, 64, 4096) == 0);
    CHECK(rk_inputs(&k, DC_FAM_NORMAL, 77) >= 0);
    void *stream = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    /* The direct route: its own workspace and gathered buffer. */
    uint64_t recv = 0, flags = 0, gath = 0;
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    CHECK_OK(dcptopk_workspace_layout_get(&k.c, k.rows, &lay));
    recv = gpu_alloc(ctx, lay.recv_bytes);
    flags = gpu_alloc(ctx, lay.flags_bytes);
    gath = gpu_alloc(ctx, (size_t)k.rows * (size_t)dcptopk_packed_row_words(384) * 4);
    dcptopk_workspace *ws = NULL;
    CHECK_OK(dcptopk_workspace_create(ctx, &k.c, k.rows, 0, &recv, &flags, &ws));
    dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
    pa.logits = (const uint16_t *)(uintptr_t)k.logits;
    pa.logits_stride = k.stride;
    pa.max_local_len = k.len;
    pa.row_ends = (const int32_t *)(uintptr_t)k.ends;
    pa.rows = k.rows;
    pa.out = (int32_t *)(uintptr_t)gath;
    pa.stream = stream;
    dcptopk_select_args sa = DCPTOPK_SELECT_ARGS_INIT;
    sa.gathered = (const int32_t *)(uintptr_t)gath;
    sa.rows = k.rows;
    sa.ids_out = (int32_t *)(uintptr_t)k.ids;
    sa.logits = pa.logits;
    sa.logits_stride = pa.logits_stride;
    sa.max_local_len = pa.max_local_len;
    sa.row_ends = pa.row_ends;
    sa.stream = stream;
    enum { CALLS = 60 };
    double tg[CALLS], td[CALLS];
    for (int warm = 0; warm < 2; warm++) {
        CHECK_OK(rk_merge(&k, stream));
        CHECK_OK(dcptopk_pack(ctx, &k.c, &pa));
        CHECK_OK(dcptopk_select(ctx, &k.c, ws, &sa));
        CHECK_OK(dc_stream_sync(ctx, stream));
    }
    for (int i = 0; i < CALLS; i++) {
        double t0 = dr_now_ms();
        CHECK_OK(rk_merge(&k, stream));
        tg[i] = (dr_now_ms() - t0) * 1e3;
        CHECK_OK(dc_stream_sync(ctx, stream));
        t0 = dr_now_ms();
        CHECK_OK(dcptopk_pack(ctx, &k.c, &pa));
        CHECK_OK(dcptopk_select(ctx, &k.c, ws, &sa));
        td[i] = (dr_now_ms() - t0) * 1e3;
        CHECK_OK(dc_stream_sync(ctx, stream));
    }
    qsort(tg, CALLS, sizeof tg[0], cmp_d);
    qsort(td, CALLS, sizeof td[0], cmp_d);
    printf("host time per call (median of %d): group merge %.2f us, direct "
           "pack + select %.2f us, overhead %.2f us (goal <= 5)\n",
           CALLS, tg[CALLS / 2], td[CALLS / 2], tg[CALLS / 2] - td[CALLS / 2]);
    CHECK_MSG(tg[CALLS / 2] - td[CALLS / 2] < 50.0,
              "the group adds %.2f us per call", tg[CALLS / 2] - td[CALLS / 2]);
    CHECK_OK(dcptopk_group_check(g, stream));
    CHECK(rk_compare(&k, "after timing") == 0);
    dcptopk_workspace_destroy(ws);
    gpu_free(ctx, recv);
    gpu_free(ctx, flags);
    gpu_free(ctx, gath);
    dc_stream_destroy(ctx, stream);
    rk_free(&k);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}
