/* test_dist_gpu.c - the merge across ranks on one GPU, against the CPU
 * reference bit for bit:
 *  - W = 2, 3, 4, 8 processes sharing GPU 0 (a store group, peer memory by
 *    CUDA IPC): the whole exact merge on several input families, rows
 *    saturated at the maximum count, 100+ consecutive calls, CUDA graph
 *    capture and replay of the one-call merge (on a capturable path), a
 *    rank killed mid-run (the others get DCPTOPK_PEER_TIMEOUT within the
 *    bound, then DCPTOPK_GROUP_BROKEN), `dcptopk selftest --ranks 4`;
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

#include "../../dist/nccl.h"
#include "gen.h"
#include "gpu_util.h"
#include "harness.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int env_i(const char *name, int def)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : def;
}

/* ------------------------------------------------------ one rank's case */

typedef struct rk {
    dcptopk_context *ctx;
    dcptopk_group *g;
    dcptopk_group_workspace *gw;
    dcptopk_merge_config c;
    int64_t rows, len, stride; /* len: columns per rank; stride: len + pad */
    int32_t rank;
    uint64_t logits, ends, ids;
    int32_t *ids_ref[16];
    uint32_t *sat_ref[16];
    int32_t *host;
} rk;

static void rk_free(rk *k)
{
    gpu_free(k->ctx, k->logits);
    gpu_free(k->ctx, k->ends);
    gpu_free(k->ctx, k->ids);
    for (int r = 0; r < 16; r++) {
        free(k->ids_ref[r]);
        free(k->sat_ref[r]);
    }
    free(k->host);
    dcptopk_group_workspace_destroy(k->gw);
    k->gw = NULL;
}

static int rk_setup(rk *k, dcptopk_context *ctx, dcptopk_group *g, int kk,
                    int n, int64_t rows, int64_t len)
{
    /* dc_gen_world's stride for `len` columns (families other than LONG). */
    const int64_t stride = (len + 7) / 8 * 8 + 8;
    memset(k, 0, sizeof *k);
    k->ctx = ctx;
    k->g = g;
    k->rank = dcptopk_group_rank(g);
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = kk;
    c.local_topk = n;
    c.world_size = dcptopk_group_world_size(g);
    k->c = c;
    k->rows = rows;
    k->len = len;
    k->stride = stride;
    if (dcptopk_group_workspace_create(g, &c, rows, &k->gw)) {
        fprintf(stderr, "rank %d: workspace: %s\n", k->rank,
                dcptopk_last_error(ctx));
        return -1;
    }
    k->logits = gpu_alloc(ctx, (size_t)rows * (size_t)stride * 2);
    k->ends = gpu_alloc(ctx, (size_t)rows * 4);
    k->ids = gpu_alloc(ctx, (size_t)rows * (size_t)kk * 4);
    k->host = malloc((size_t)rows * (size_t)kk * 4);
    for (int r = 0; r < c.world_size; r++) {
        k->ids_ref[r] = malloc((size_t)rows * (size_t)kk * 4);
        k->sat_ref[r] = malloc((size_t)rows * 4);
    }
    return k->logits && k->ends && k->ids && k->host ? 0 : -1;
}

/* New inputs of every rank (same on all ranks: seeded), the reference merge
 * and this rank's upload. Returns the rescued rows, -1 on failure. */
static int64_t rk_inputs(rk *k, int family, uint64_t seed)
{
    dc_world w;
    if (dc_gen_world(&w, family, k->c.topk, k->c.local_topk, k->c.world_size,
                     k->rows, k->len, seed))
        return -1;
    if (w.stride != k->stride || w.max_local_len != k->len) {
        fprintf(stderr, "generated stride %lld / length %lld, expected %lld / "
                "%lld\n", (long long)w.stride, (long long)w.max_local_len,
                (long long)k->stride, (long long)k->len);
        dc_world_free(&w);
        return -1;
    }
    int64_t rescued = 0;
    dcptopk_result r = dcptopk_ref_packed_merge(
        &k->c, (const uint16_t *const *)w.logits, w.stride, w.max_local_len,
        (const int32_t *const *)w.row_ends, k->rows, k->ids_ref, NULL,
        k->sat_ref, &rescued);
    int rc = r ? -1 : 0;
    if (r)
        fprintf(stderr, "ref: %s\n", dcptopk_last_error(NULL));
    if (!rc && dc_memcpy_htod(k->ctx, k->logits, w.logits[k->rank],
                              (size_t)k->rows * (size_t)k->stride * 2))
        rc = -1;
    if (!rc && dc_memcpy_htod(k->ctx, k->ends, w.row_ends[k->rank],
                              (size_t)k->rows * 4))
        rc = -1;
    /* The merge may run on a non-blocking stream: the copies must land. */
    if (!rc && dc_stream_sync(k->ctx, NULL))
        rc = -1;
    dc_world_free(&w);
    return rc ? -1 : rescued;
}

static dcptopk_result rk_merge(rk *k, void *stream)
{
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = k->rows;
    a.logits = (const uint16_t *)(uintptr_t)k->logits;
    a.logits_stride = k->stride;
    a.max_local_len = k->len;
    a.row_ends = (const int32_t *)(uintptr_t)k->ends;
    a.ids_out = (int32_t *)(uintptr_t)k->ids;
    a.stream = stream;
    return dcptopk_group_merge(k->gw, &a);
}

/* 0 when this rank's ids and saturation words equal the reference. */
static int rk_compare(rk *k, const char *what)
{
    const size_t n = (size_t)k->rows * (size_t)k->c.topk;
    if (gpu_download(k->ctx, k->host, k->ids, n * 4))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (k->host[i] != k->ids_ref[k->rank][i]) {
            fprintf(stderr, "%s: rank %d: ids differ at row %zu col %zu: ref "
                    "%d gpu %d\n", what, k->rank, i / (size_t)k->c.topk,
                    i % (size_t)k->c.topk, k->ids_ref[k->rank][i],
                    k->host[i]);
            return -1;
        }
    if (gpu_download(k->ctx, k->host,
                     dcptopk_group_workspace_saturation(k->gw),
                     (size_t)k->rows * 4))
        return -1;
    if (memcmp(k->host, k->sat_ref[k->rank], (size_t)k->rows * 4) != 0) {
        fprintf(stderr, "%s: rank %d: saturation words differ\n", what,
                k->rank);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ children */

static dcptopk_context *child_ctx(void)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    int ndev = dcptopk_device_count();
    int w = env_i("WORLD_SIZE", 1), lr = env_i("LOCAL_RANK", 0);
    cfg.device = ndev >= w && env_i("DC_DIST_SPREAD", 0) ? lr : 0;
    cfg.cache_mode = getenv("DCPTOPK_CACHE_DIR") ? DCPTOPK_CACHE_READWRITE
                                                 : DCPTOPK_CACHE_OFF;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx)) {
        fprintf(stderr, "context: %s\n", dcptopk_last_error(NULL));
        return NULL;
    }
    return ctx;
}

static const int FAMILIES[] = {DC_FAM_CONC_SAT, DC_FAM_NORMAL,
                               DC_FAM_CONC_ALL, DC_FAM_NAN_ROWS,
                               DC_FAM_INTEGER,  DC_FAM_SHORT_ROWS,
                               DC_FAM_CONC_ONE, DC_FAM_EMPTY_OWNER};
#define NFAM ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

/* Roles: exit 0 = pass, 77 = skip, else a failure code. */
static int role_run(const char *role)
{
    dcptopk_context *ctx = child_ctx();
    if (!ctx)
        return 10;
    dcptopk_group *g = NULL;
    if (dcptopk_group_create_from_env(ctx, NULL, NULL, &g)) {
        fprintf(stderr, "group: %s\n", dcptopk_last_error(ctx));
        return 11;
    }
    int32_t path = 0;
    char why[384];
    dcptopk_group_path(g, &path, why, sizeof why);
    if (dcptopk_group_rank(g) == 0)
        printf("path: %s (%s)\n", dcptopk_path_name(path), why);
    const int steps = env_i("DC_DIST_STEPS", 4);
    rk k;
    if (rk_setup(&k, ctx, g, env_i("DC_DIST_K", 2048), env_i("DC_DIST_N", 384),
                 env_i("DC_DIST_ROWS", 48), 2 * env_i("DC_DIST_K", 2048)))
        return 12;
    int rc = 0;
    if (strcmp(role, "merge") == 0) {
        int64_t rescued = 0;
        for (int s = 0; s < steps && !rc; s++) {
            int64_t got = rk_inputs(&k, FAMILIES[s % NFAM], 1000 + (uint64_t)s);
            if (got < 0) {
                rc = 13;
                break;
            }
            rescued += got;
            char what[64];
            snprintf(what, sizeof what, "step %d (%s)", s,
                     dc_family_name(FAMILIES[s % NFAM]));
            if (rk_merge(&k, NULL) || dcptopk_group_check(g, NULL)) {
                fprintf(stderr, "%s: %s\n", what, dcptopk_last_error(ctx));
                rc = 14;
            } else if (rk_compare(&k, what))
                rc = 15;
        }
        if (!rc && rescued == 0)
            rc = 16; /* CONC_SAT rows must have run the rescue */
        printf("rank %d: %d steps, %lld rescued rows: %s\n",
               dcptopk_group_rank(g), steps, (long long)rescued,
               rc ? "FAIL" : "ok");
    } else if (strcmp(role, "graph") == 0) {
        void *stream = NULL, *exec = NULL;
        if (rk_inputs(&k, DC_FAM_CONC_SAT, 1) < 0 || dc_stream_create(ctx, &stream) ||
            rk_merge(&k, stream) || dcptopk_group_check(g, stream) ||
            rk_compare(&k, "warmup"))
            rc = 20;
        else if (path == DCPTOPK_PATH_STAGED) {
            printf("the staged path is not capturable: skipped\n");
            rc = 77;
        } else if (dc_graph_begin(ctx, stream) || rk_merge(&k, stream) ||
                   dc_graph_end(ctx, stream, &exec)) {
            fprintf(stderr, "capture: %s\n", dcptopk_last_error(ctx));
            rc = 21;
        }
        for (int s = 0; s < steps && !rc; s++) {
            if (rk_inputs(&k, FAMILIES[s % NFAM], 50 + (uint64_t)s) < 0 ||
                dc_graph_launch(ctx, exec, stream) ||
                dcptopk_group_check(g, stream)) {
                fprintf(stderr, "replay %d: %s\n", s, dcptopk_last_error(ctx));
                rc = 22;
            } else if (rk_compare(&k, "replay"))
                rc = 23;
        }
        if (exec)
            dc_graph_destroy(ctx, exec);
        if (stream)
            dc_stream_destroy(ctx, stream);
    } else if (strcmp(role, "die") == 0) {
        const int victim = dcptopk_group_world_size(g) - 1;
        const int bound = env_i("DCPTOPK_PEER_TIMEOUT_MS", 10000);
        double last_ok = now_ms();
        dcptopk_result r = DCPTOPK_SUCCESS;
        int s = 0;
        for (; s < 1000 && !r; s++) {
            if (dcptopk_group_rank(g) == victim && s == 3)
                kill(getpid(), SIGKILL); /* dies without a word */
            if (rk_inputs(&k, FAMILIES[s % NFAM], 7 + (uint64_t)s) < 0)
                return 30;
            r = rk_merge(&k, NULL);
            if (!r)
                r = dcptopk_group_check(g, NULL);
            if (!r)
                last_ok = now_ms();
        }
        double waited = now_ms() - last_ok;
        printf("rank %d: step %d: %s after %.0f ms (bound %d ms): %s\n",
               dcptopk_group_rank(g), s, dcptopk_result_name(r), waited,
               bound, dcptopk_last_error(ctx));
        if (r != DCPTOPK_PEER_TIMEOUT)
            rc = 31;
        else if (waited > 2.0 * bound + 5000)
            rc = 32;
        else if (rk_merge(&k, NULL) != DCPTOPK_GROUP_BROKEN)
            rc = 33;
        fflush(stdout);
        /* The workspace's peer memory is left to the process exit: a peer
         * is dead, and a broken group only needs to be let go. */
        dcptopk_group_destroy(g);
        _exit(rc);
    } else {
        rc = 40;
    }
    fflush(stdout);
    if (rc == 0 || rc == 77)
        dcptopk_group_barrier(g);
    rk_free(&k);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
    return rc;
}

__attribute__((constructor)) static void child_entry(void)
{
    const char *role = getenv("DC_DIST_CHILD");
    if (role && *role) {
        int rc = role_run(role);
        fflush(NULL);
        _exit(rc);
    }
}

/* Starts w ranks of `role` (fork + exec of this binary) with the extra
 * environment `env` ("NAME=VALUE" entries, NULL-terminated); returns the
 * number of ranks that passed, -1 if any skipped. */
static int spawn(int w, const char *role, const char *const *env)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "dist");
    if (!dir[0])
        return 0;
    pid_t pids[16];
    for (int r = 0; r < w; r++) {
        fflush(NULL);
        pids[r] = fork();
        if (pids[r] == 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", w);
            setenv("WORLD_SIZE", v, 1);
            setenv("DCPTOPK_STORE_DIR", dir, 1);
            setenv("DC_DIST_CHILD", role, 1);
            for (int i = 0; env && env[i]; i++)
                putenv((char *)env[i]);
            char *argv[] = {"test_dist_gpu", "child", NULL};
            execv("/proc/self/exe", argv);
            _exit(99);
        }
    }
    int ok = 0, skipped = 0;
    for (int r = 0; r < w; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
        if (code == 0)
            ok++;
        else if (code == 77)
            skipped++;
        else
            fprintf(stderr, "rank %d exited with %d\n", r, code);
    }
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return skipped ? -1 : ok;
}

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (dcptopk_device_count() == 0)                                       \
            SKIP("no CUDA device");                                            \
    } while (0)

/* ------------------------------------------- several processes, one GPU */

TEST(procs_exact_merge_w2)
{
    NEED_GPU();
    CHECK_EQ(spawn(2, "merge", NULL), 2);
}

TEST(procs_exact_merge_w3)
{
    NEED_GPU();
    CHECK_EQ(spawn(3, "merge", NULL), 3);
}

TEST(procs_exact_merge_w4)
{
    NEED_GPU();
    CHECK_EQ(spawn(4, "merge", NULL), 4);
}

TEST(procs_exact_merge_w8)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=8", NULL};
    CHECK_EQ(spawn(8, "merge", env), 8);
}

/* 120 consecutive one-call merges (every family in turn, saturated rows
 * every 8th step): the rescue's sequence words and the exchange's parity
 * stay in step across processes. */
TEST(procs_120_calls)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=120", "DC_DIST_K=512", "DC_DIST_N=96",
                         "DC_DIST_ROWS=9", NULL};
    CHECK_EQ(spawn(4, "merge", env), 4);
}

TEST(procs_graph_replay)
{
    NEED_GPU();
    const char *env[] = {"DC_DIST_STEPS=5", "DC_DIST_ROWS=16", NULL};
    int got = spawn(2, "graph", env);
    if (got < 0)
        SKIP("the processes' exchange path (staged) is not capturable; the "
             "push path (kernels/exchange) makes it so");
    CHECK_EQ(got, 2);
}

/* Rank 2 of 3 is killed at its 4th step: ranks 0 and 1 must get
 * DCPTOPK_PEER_TIMEOUT within the bound, then DCPTOPK_GROUP_BROKEN. */
TEST(procs_killed_rank)
{
    NEED_GPU();
    const char *env[] = {"DCPTOPK_PEER_TIMEOUT_MS=3000", "DC_DIST_ROWS=16",
                         NULL};
    int got = spawn(3, "die", env);
    /* The victim ends by SIGKILL (counted as failed); the others pass. */
    CHECK_EQ(got, 2);
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
        CHECK(rk_inputs(&k, FAMILIES[s], 20 + (uint64_t)s) >= 0);
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
        CHECK(rk_inputs(&k, FAMILIES[s], 30 + (uint64_t)s) >= 0);
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
        double t0 = now_ms();
        CHECK_OK(rk_merge(&k, stream));
        tg[i] = (now_ms() - t0) * 1e3;
        CHECK_OK(dc_stream_sync(ctx, stream));
        t0 = now_ms();
        CHECK_OK(dcptopk_pack(ctx, &k.c, &pa));
        CHECK_OK(dcptopk_select(ctx, &k.c, ws, &sa));
        td[i] = (now_ms() - t0) * 1e3;
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
