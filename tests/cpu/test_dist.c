/* test_dist.c - the distributed runtime without a GPU: group argument errors,
 * NCCL absent (a clear error, single-rank groups still work), the file store
 * (put/get, all-gathers and barriers across forked processes, timeouts that
 * name the missing rank), host-only groups over the store (path, barrier, a
 * dead peer breaks the group), the path choice on synthetic topologies and
 * the launcher variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "group_int.h"
#include "nccl_table.h"
#include "gpu_util.h"
#include "harness.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Forks w children running fn(rank, w, arg); returns how many exited 0
 * (exit codes printed otherwise). */
typedef int (*child_fn)(int rank, int w, const char *arg);
static int run_children(int w, child_fn fn, const char *arg, int *codes)
{
    pid_t pids[16];
    for (int r = 0; r < w; r++) {
        fflush(NULL);
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(fn(r, w, arg));
    }
    int ok = 0;
    for (int r = 0; r < w; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
        if (codes)
            codes[r] = code;
        if (code == 0)
            ok++;
        else
            fprintf(stderr, "child rank %d exited with %d\n", r, code);
    }
    return ok;
}

/* ------------------------------------------------------------ arguments */

TEST(group_config_errors)
{
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx);
    dcptopk_group *g = (dcptopk_group *)1;
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    CHECK_EQ(dcptopk_group_create(NULL, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "ctx is NULL");
    CHECK_EQ(dcptopk_group_create(ctx, NULL, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK(g == NULL);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config is NULL");
    CHECK_EQ(dcptopk_group_create(ctx, &c, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "out is NULL");
    c.struct_size = 8;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->struct_size = 8");
    c = (dcptopk_group_config)DCPTOPK_GROUP_CONFIG_INIT;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->world_size = -1");
    c.world_size = 17;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->world_size = 17");
    c.world_size = 4;
    c.rank = 4;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->rank = 4");
    c.rank = 1;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "no nccl_comm, unique_id or "
                                            "store_dir");
    c.store_dir = "/tmp";
    c.path = 9;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->path = 9");
    c.path = 0;
    c.timeout_ms = -5;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->timeout_ms = -5");
    c.timeout_ms = 0;
    c.store_prefix = "a/b";
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "store_prefix = \"a/b\"");
    c.store_prefix = NULL;
    c.store_dir = "/proc/version";
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "/proc/version");
    setenv("DCPTOPK_EXCHANGE", "fast", 1);
    c.store_dir = "/tmp";
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "DCPTOPK_EXCHANGE = \"fast\"");
    unsetenv("DCPTOPK_EXCHANGE");

    /* NULL handles are refused by name; destroy accepts NULL. */
    int32_t path = 0;
    CHECK_EQ(dcptopk_group_path(NULL, &path, NULL, 0),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_group_check(NULL, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_group_status(NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "group is NULL");
    CHECK_EQ(dcptopk_group_barrier(NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_group_merge(NULL, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "gw is NULL");
    dcptopk_group_workspace *gw = NULL;
    CHECK_EQ(dcptopk_group_workspace_create(NULL, NULL, 1, &gw),
             DCPTOPK_INVALID_ARGUMENT);
    dcptopk_group_destroy(NULL);
    dcptopk_group_workspace_destroy(NULL);
    CHECK_EQ(dcptopk_group_rank(NULL), -1);
    CHECK_STR_EQ(dcptopk_path_name(DCPTOPK_PATH_STAGED), "staged");
    CHECK_STR_EQ(dcptopk_path_name(77), "unknown");
    CHECK_STR_EQ(dcptopk_result_name(DCPTOPK_PEER_TIMEOUT),
                 "DCPTOPK_PEER_TIMEOUT");
    CHECK_EQ(DCPTOPK_PEER_TIMEOUT, 15);
    CHECK_EQ(DCPTOPK_GROUP_BROKEN, 16);
    dcptopk_context_destroy(ctx);
}

/* A one-rank group needs nothing else; without a device its workspace is
 * refused by name. Workspace arguments are named too. */
TEST(single_rank_group)
{
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx);
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    c.rank = 0;
    c.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &c, &g));
    int32_t path = -1;
    char why[384];
    CHECK_OK(dcptopk_group_path(g, &path, why, sizeof why));
    CHECK_EQ(path, DCPTOPK_PATH_LOOPBACK);
    CHECK_CONTAINS(why, "one rank");
    CHECK_OK(dcptopk_group_barrier(g));
    CHECK_OK(dcptopk_group_check(g, NULL));
    CHECK_OK(dcptopk_group_status(g)); /* no device: nothing failed */
    dcptopk_merge_config mc = DCPTOPK_MERGE_CONFIG_INIT;
    dcptopk_group_workspace *gw = NULL;
    CHECK_EQ(dcptopk_group_workspace_create(g, &mc, 64, &gw),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->world_size = 8: the "
                                            "group has 1 ranks");
    mc.world_size = 1;
    CHECK_EQ(dcptopk_group_workspace_create(g, &mc, 0, &gw),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "max_rows = 0");
    CHECK_EQ(dcptopk_group_workspace_create(g, &mc, 64, &gw),
             DCPTOPK_NO_DEVICE);
    CHECK(gw == NULL);
    /* A forced path: push works only with the push exchange built in. */
    c.path = DCPTOPK_PATH_PUSH;
    dcptopk_group *g2 = NULL;
    if (dc_exchange_push_built()) {
        CHECK_OK(dcptopk_group_create(ctx, &c, &g2));
        dcptopk_group_destroy(g2);
    } else {
        CHECK_EQ(dcptopk_group_create(ctx, &c, &g2), DCPTOPK_UNSUPPORTED);
        CHECK_CONTAINS(dcptopk_last_error(ctx), "push path was forced");
    }
    c.path = DCPTOPK_PATH_NCCL;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g2), DCPTOPK_UNSUPPORTED);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "the group has no NCCL");
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* args->packed of the one-call merge: each refused argument named with its
 * value before anything launches; an older, smaller struct (up to `stream`)
 * is read with packed = NULL. A workspace needs a device: this one is made
 * by hand on a one-rank host group (the checks read only its config). */
TEST(group_merge_packed_arg_errors)
{
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx);
    dcptopk_group_config gcfg = DCPTOPK_GROUP_CONFIG_INIT;
    gcfg.rank = 0;
    gcfg.world_size = 1;
    dcptopk_group *g = NULL;
    CHECK_OK(dcptopk_group_create(ctx, &gcfg, &g));
    dcptopk_group_workspace *gw = calloc(1, sizeof *gw);
    CHECK(gw);
    dcptopk_merge_config mc = DCPTOPK_MERGE_CONFIG_INIT;
    mc.world_size = 1;
    gw->g = g;
    gw->ctx = ctx;
    gw->c = mc;
    gw->max_rows = 16;
    gw->row_words = dcptopk_packed_row_words(mc.local_topk); /* 396 */
    static int32_t rows[64];
    dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    a.rows = 4;
    a.packed = rows;
    a.local_ids = rows + 8;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->packed = 0x");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "and args->local_ids = 0x");
    a.local_ids = NULL;
    a.packed_stride = 395;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx),
                   "args->packed_stride = 395: must be 0 (N + N/32 = 396 "
                   "words) or in 396..536870911");
    a.packed_stride = (int64_t)1 << 29;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->packed_stride = 536870912");
    a.packed_stride = -1;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->packed_stride = -1");
    a.packed_stride = 400;
    a.packed = (const int32_t *)((const char *)rows + 2);
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "must be 4-byte aligned");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->packed = 0x");
    a.packed = NULL;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx),
                   "args->packed_stride = 400: set without args->packed");
    /* The pair merge takes its rows as candidates. */
    gw->c.kind = DCPTOPK_MERGE_PAIR;
    a.packed = rows;
    a.packed_stride = 0;
    CHECK_EQ(dcptopk_group_merge(gw, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "the workspace runs the pair merge");
    gw->c.kind = DCPTOPK_MERGE_PACKED;
    /* The first version's struct: the fields after `stream` are not read
     * (garbage there must not count), rows = 0 returns at once. */
    dcptopk_group_merge_args old = a;
    old.struct_size = (uint32_t)(offsetof(dcptopk_group_merge_args, stream) +
                                 sizeof(void *));
    old.rows = 0;
    old.packed = (const int32_t *)(uintptr_t)3;
    old.packed_stride = -7;
    CHECK_OK(dcptopk_group_merge(gw, &old));
    old.struct_size -= 1;
    CHECK_EQ(dcptopk_group_merge(gw, &old), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->struct_size = ");
    free(gw);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
}

/* Without libnccl.so.2: NCCL calls fail with DCPTOPK_NCCL_ERROR naming the
 * library and dlerror; everything else still works. */
TEST(nccl_absent)
{
    setenv("DCPTOPK_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    uint8_t id[DCPTOPK_GROUP_UNIQUE_ID_BYTES];
    CHECK_EQ(dcptopk_group_unique_id(id), DCPTOPK_NCCL_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "/nonexistent/libnccl.so.2");
    CHECK_CONTAINS(dcptopk_last_error(NULL), "dlopen");
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx);
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    c.rank = 0;
    c.world_size = 2;
    c.unique_id = id;
    dcptopk_group *g = NULL;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_NCCL_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "needs NCCL");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "libnccl.so.2");
    c.unique_id = NULL;
    c.nccl_comm = (void *)&c; /* never dereferenced: NCCL is absent */
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_NCCL_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "adopting an NCCL communicator");
    /* Single-rank groups and the rest of the library are unaffected. */
    c.nccl_comm = NULL;
    c.world_size = 1;
    CHECK_OK(dcptopk_group_create(ctx, &c, &g));
    dcptopk_group_destroy(g);
    dcptopk_merge_config mc;
    CHECK_OK(dcptopk_merge_config_named("deepseek-v3.2-dcp8", &mc));
    CHECK_OK(dcptopk_merge_config_check(&mc));
    dcptopk_key keys[16];
    size_t n = 0;
    CHECK_OK(dcptopk_config_keys(&mc, "sm_90a", keys, 16, &n));
    CHECK(n > 0);
    dcptopk_context_destroy(ctx);
}

/* With NCCL installed (skipped otherwise): the table loads, a unique id
 * needs no GPU, NCCL's failures carry its own words, and a group from a
 * unique id on a context without a device is refused by name. */
TEST(nccl_present)
{
    const char *why = NULL;
    const dc_nccl *nc = dc_nccl_get(&why);
    if (!nc)
        SKIP("NCCL is absent: %s", why);
    char v[32];
    dc_nccl_version_string(v, sizeof v);
    printf("NCCL %s from %s\n", v, nc->path);
    CHECK(nc->version >= 20000);
    CHECK(v[0] == '2' && v[1] == '.');
    uint8_t id[DCPTOPK_GROUP_UNIQUE_ID_BYTES];
    memset(id, 0, sizeof id);
    CHECK_OK(dcptopk_group_unique_id(id));
    int nonzero = 0;
    for (size_t i = 0; i < sizeof id; i++)
        nonzero |= id[i];
    CHECK(nonzero);
    CHECK_EQ(dc_nccl_fail(NULL, ncclInvalidUsage, NULL, "ncclFoo(x)"),
             DCPTOPK_NCCL_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "ncclFoo(x) failed: NCCL error 5");
    CHECK_CONTAINS(dcptopk_last_error(NULL), nc->ncclGetErrorString(ncclInvalidUsage));
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx);
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    c.rank = 0;
    c.world_size = 2;
    c.unique_id = id;
    dcptopk_group *g = NULL;
    CHECK_EQ(dcptopk_group_create(ctx, &c, &g), DCPTOPK_NO_DEVICE);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "an NCCL group needs a context "
                                            "with a device");
    dcptopk_context_destroy(ctx);
}

/* ---------------------------------------------------------------- store */

TEST(store_put_get_and_timeout)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "store");
    CHECK(dir[0]);
    dc_store s;
    CHECK_OK(dc_store_open(NULL, &s, dir, "t", 0, 2, 100));
    const char blob[] = "hello store";
    CHECK_OK(dc_store_put(NULL, &s, "k1", blob, sizeof blob));
    char got[sizeof blob];
    CHECK_OK(dc_store_get(NULL, &s, "k1", 0, got, sizeof got, 100));
    CHECK_STR_EQ(got, blob);
    /* Another size: a stale file, named. */
    char small[4];
    CHECK_EQ(dc_store_get(NULL, &s, "k1", 0, small, sizeof small, 100),
             DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "12 bytes");
    /* A key nobody writes: a timeout within the bound naming the rank. */
    double t0 = now_ms();
    CHECK_EQ(dc_store_get(NULL, &s, "never", 1, got, sizeof got, 150),
             DCPTOPK_PEER_TIMEOUT);
    double dt = now_ms() - t0;
    CHECK_MSG(dt >= 140 && dt < 1500, "waited %.1f ms for a 150 ms bound", dt);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "rank 1 did not publish");
    CHECK_CONTAINS(dcptopk_last_error(NULL), "within 150 ms");
    /* A missing folder is created; a file in its place is refused. */
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    CHECK_OK(dc_store_open(NULL, &s, sub, NULL, 0, 1, 10));
    CHECK_EQ(dc_store_open(NULL, &s, "", NULL, 0, 1, 10),
             DCPTOPK_INVALID_ARGUMENT);
    tmpdir_remove(sub);
    tmpdir_remove(dir);
}

static int child_allgather(int rank, int w, const char *dir)
{
    dc_store s;
    if (dc_store_open(NULL, &s, dir, "ag", rank, w, 20000))
        return 10;
    for (int it = 0; it < 60; it++) {
        int32_t mine[2] = {rank, it * 100 + rank}, all[16][2];
        if (dc_store_allgather(NULL, &s, mine, sizeof mine, all)) {
            fprintf(stderr, "rank %d: %s\n", rank, dcptopk_last_error(NULL));
            return 11;
        }
        for (int p = 0; p < w; p++)
            if (all[p][0] != p || all[p][1] != it * 100 + p)
                return 12;
        if (it % 3 == 0 && dc_store_barrier(NULL, &s))
            return 13;
        if (rank == it % w)
            usleep(2000); /* a slow rank in every round */
    }
    return 0;
}

TEST(store_forked_allgather_barrier)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "storefork");
    CHECK(dir[0]);
    const int ws[] = {2, 3, 4, 8};
    for (int i = 0; i < 4; i++) {
        char sub[600];
        snprintf(sub, sizeof sub, "%s/w%d", dir, ws[i]);
        CHECK_EQ(run_children(ws[i], child_allgather, sub, NULL), ws[i]);
        /* Files of finished operations were removed as the ranks went:
         * at most one (the last) per rank remains. */
        char cmd[800];
        snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -le %d", sub, ws[i]);
        CHECK_EQ(system(cmd), 0);
        char rm[700];
        snprintf(rm, sizeof rm, "rm -rf %s", sub);
        CHECK_EQ(system(rm), 0);
    }
    tmpdir_remove(dir);
}

/* Rank 2 of 3 leaves after the first barrier; the others time out within
 * the bound, and the error names rank 2. */
static int child_dies(int rank, int w, const char *dir)
{
    dc_store s;
    if (dc_store_open(NULL, &s, dir, "die", rank, w, 300))
        return 10;
    if (dc_store_barrier(NULL, &s))
        return 11;
    if (rank == 2)
        return 0;
    double t0 = now_ms();
    dcptopk_result r = dc_store_barrier(NULL, &s);
    double dt = now_ms() - t0;
    if (r != DCPTOPK_PEER_TIMEOUT)
        return 12;
    if (!strstr(dcptopk_last_error(NULL), "rank 2 did not publish"))
        return 13;
    if (dt < 250 || dt > 3000)
        return 14;
    return 0;
}

TEST(store_forked_peer_dies)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "storedie");
    CHECK(dir[0]);
    CHECK_EQ(run_children(3, child_dies, dir, NULL), 3);
    tmpdir_remove(dir);
}

/* ------------------------------------------------- host-only groups */

static int child_group(int rank, int w, const char *dir)
{
    dcptopk_context *ctx = host_ctx_create();
    if (!ctx)
        return 10;
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    c.rank = rank;
    c.world_size = w;
    c.store_dir = dir;
    c.timeout_ms = 400;
    dcptopk_group *g = NULL;
    if (dcptopk_group_create(ctx, &c, &g)) {
        fprintf(stderr, "rank %d: %s\n", rank, dcptopk_last_error(ctx));
        return 11;
    }
    int32_t path = -1;
    char why[384];
    if (dcptopk_group_path(g, &path, why, sizeof why) ||
        dcptopk_group_rank(g) != rank || dcptopk_group_world_size(g) != w)
        return 12;
    /* One host, no device, no NCCL: the staged path (or push when this
     * library has the push exchange). */
    if (path != (dc_exchange_push_built() ? DCPTOPK_PATH_PUSH
                                          : DCPTOPK_PATH_STAGED) ||
        !strstr(why, "1 host(s)"))
        return 13;
    for (int i = 0; i < 20; i++)
        if (dcptopk_group_barrier(g))
            return 14;
    if (rank == w - 1)
        return 0; /* leaves without a word */
    if (dcptopk_group_barrier(g) != DCPTOPK_PEER_TIMEOUT)
        return 15;
    char tail[64];
    snprintf(tail, sizeof tail, "rank %d did not publish", w - 1);
    if (!strstr(dcptopk_group_last_error(g), tail))
        return 16;
    /* Broken from now on, until rebuilt. */
    if (dcptopk_group_barrier(g) != DCPTOPK_GROUP_BROKEN ||
        dcptopk_group_check(g, NULL) != DCPTOPK_GROUP_BROKEN ||
        dcptopk_group_status(g) != DCPTOPK_GROUP_BROKEN ||
        !strstr(dcptopk_group_last_error(g), "create a new one"))
        return 17;
    dcptopk_group_destroy(g);
    /* The survivors rebuild a smaller group under a new prefix. */
    c.world_size = w - 1;
    c.store_prefix = "rebuilt";
    if (dcptopk_group_create(ctx, &c, &g) || dcptopk_group_barrier(g))
        return 18;
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
    return 0;
}

TEST(group_store_forked)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "group");
    CHECK(dir[0]);
    CHECK_EQ(run_children(3, child_group, dir, NULL), 3);
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    CHECK_EQ(system(rm), 0);
}

/* ---------------------------------------------------------- paths */

/* w ranks; host[r] and gpu[r] name each rank's host and GPU; reach is
 * "same host" unless `noreach` (bit r: rank r reaches nobody else). */
static void topo_make(dc_topo *t, int w, const int *host, const int *gpu,
                      int push_built, uint32_t noreach)
{
    memset(t, 0, sizeof *t);
    t->world_size = w;
    uint32_t rows[16];
    for (int r = 0; r < w; r++) {
        snprintf(t->info[r].host, sizeof t->info[r].host, "node%d", host[r]);
        snprintf(t->info[r].boot_id, sizeof t->info[r].boot_id, "boot%d",
                 host[r]);
        t->info[r].uuid[0] = (uint8_t)(gpu[r] + 1);
        t->info[r].uuid[1] = (uint8_t)host[r];
        t->info[r].pid = 100 + r;
        t->info[r].push_built = push_built;
    }
    for (int r = 0; r < w; r++) {
        rows[r] = 1u << r;
        for (int s = 0; s < w; s++)
            if (host[r] == host[s] && !(noreach >> r & 1u))
                rows[r] |= 1u << s;
    }
    dc_topo_domains(t, rows);
}

TEST(path_choice_synthetic)
{
    dc_topo t;
    char why[384];
    const int h0[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int g0[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int g8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int h2[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    dc_path_facts f = {0, 1, DCPTOPK_PATH_AUTO};

    /* One rank: loopback. */
    topo_make(&t, 1, h0, g0, 0, 0);
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_LOOPBACK);

    /* 8 processes on one GPU, store only: staged without the push
     * exchange, push with it; NCCL forced is refused (shared GPU). */
    topo_make(&t, 8, h0, g0, 0, 0);
    CHECK_EQ(t.domains, 1);
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_STAGED);
    CHECK_CONTAINS(why, "8 ranks, 1 host(s), 1 device(s), 1 P2P domain(s)");
    topo_make(&t, 8, h0, g0, 1, 0);
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_PUSH);
    f.has_comm = 1;
    f.forced = DCPTOPK_PATH_NCCL;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), -1);
    CHECK_CONTAINS(why, "ranks 0 and 1 share one GPU");

    /* 8 GPUs of one host with NCCL: push by default, nccl when forced or
     * when the push exchange is missing. */
    topo_make(&t, 8, h0, g8, 1, 0);
    f.forced = DCPTOPK_PATH_AUTO;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_PUSH);
    f.forced = DCPTOPK_PATH_NCCL;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_NCCL);
    topo_make(&t, 8, h0, g8, 0, 0);
    f.forced = DCPTOPK_PATH_AUTO;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_NCCL);
    CHECK_CONTAINS(why, "lacks the device push exchange");
    /* One rank's library lacks it: nobody pushes. */
    topo_make(&t, 8, h0, g8, 1, 0);
    t.info[5].push_built = 0;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_NCCL);

    /* Two hosts: two domains, NCCL; push forced is refused; no NCCL at all:
     * no path. */
    topo_make(&t, 8, h2, g8, 1, 0);
    CHECK_EQ(t.domains, 2);
    CHECK_EQ(t.domain[5], 4);
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_NCCL);
    CHECK_CONTAINS(why, "2 host(s)");
    /* Push forced across domains serves the nodes of the hierarchy; the
     * flat exchange still crosses them over NCCL. */
    f.forced = DCPTOPK_PATH_PUSH;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_NCCL);
    CHECK_CONTAINS(why, "push forced: it runs inside each node");
    /* The hierarchy: 2 nodes of 4, push inside, nccl across. */
    f.forced = DCPTOPK_PATH_AUTO;
    dc_hier_plan h;
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 1);
    CHECK_EQ(h.nodes, 2);
    CHECK_EQ(h.node_size, 4);
    CHECK_EQ(h.node_path, DCPTOPK_PATH_PUSH);
    CHECK_EQ(h.rail_path, DCPTOPK_PATH_NCCL);
    CHECK_CONTAINS(h.why, "2 nodes of 4 ranks, push inside a node, nccl "
                          "across nodes");
    /* No NCCL: the store, flat and across the nodes; no store either: no
     * path, no hierarchy. */
    f.has_comm = 0;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_STORE);
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 1);
    CHECK_EQ(h.rail_path, DCPTOPK_PATH_STORE);
    f.has_store = 0;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), -1);
    CHECK_CONTAINS(why, "no exchange path");
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 0);
    CHECK_CONTAINS(h.why, "no NCCL communicator");
    f.has_store = 1;
    /* Without the push exchange a node stages; forced staged too. */
    topo_make(&t, 8, h2, g8, 0, 0);
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.node_path, DCPTOPK_PATH_STAGED);
    /* One GPU per node (8 hosts): nodes of one rank, loopback inside. */
    const int h8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    topo_make(&t, 8, h8, g0, 1, 0);
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 1);
    CHECK_EQ(h.nodes, 8);
    CHECK_EQ(h.node_path, DCPTOPK_PATH_LOOPBACK);
    /* Nodes of unequal size, or not consecutive ranks: no hierarchy. */
    const int h31[4] = {0, 0, 0, 1};
    topo_make(&t, 4, h31, g8, 1, 0);
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 0);
    CHECK_CONTAINS(h.why, "not 2 blocks of consecutive ranks");
    const int hx[4] = {0, 1, 0, 1};
    topo_make(&t, 4, hx, g8, 1, 0);
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 0);
    /* Simulated nodes on one GPU: NCCL refuses the rails, the store
     * carries them. */
    topo_make(&t, 4, h0, g0, 1, 0);
    const uint32_t blocks[4] = {0x3u, 0x3u, 0xCu, 0xCu};
    dc_topo_domains(&t, blocks);
    CHECK_EQ(t.domains, 2);
    f.has_comm = 1;
    dc_hier_plan_make(&t, &f, &h);
    CHECK_EQ(h.ok, 1);
    CHECK_EQ(h.rail_path, DCPTOPK_PATH_STORE);
    f.has_comm = 0;
    f.forced = DCPTOPK_PATH_STORE;
    topo_make(&t, 2, h0, g0, 0, 0);
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_STORE);
    f.forced = DCPTOPK_PATH_AUTO;
    topo_make(&t, 8, h2, g8, 1, 0);

    /* One host, but rank 3 cannot map anyone (no peer access): 2 domains,
     * reach symmetric (nobody maps rank 3 either). */
    topo_make(&t, 4, h0, g8, 1, 1u << 3);
    CHECK_EQ(t.domains, 2);
    CHECK_EQ(t.reach[0], 0x7u);
    CHECK_EQ(t.reach[3], 0x8u);
    f.has_comm = 1;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), DCPTOPK_PATH_NCCL);

    /* Same host name but another boot id: two machines. */
    topo_make(&t, 2, h0, g8, 1, 0);
    snprintf(t.info[1].boot_id, sizeof t.info[1].boot_id, "other");
    CHECK(!dc_same_host(&t.info[0], &t.info[1]));

    /* Loopback forced with several ranks, staged forced without store. */
    topo_make(&t, 2, h0, g0, 0, 0);
    f.forced = DCPTOPK_PATH_LOOPBACK;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), -1);
    CHECK_CONTAINS(why, "loopback is for one rank");
    f.forced = DCPTOPK_PATH_STAGED;
    f.has_comm = 0;
    f.has_store = 0;
    CHECK_EQ(dc_path_choose(&t, &f, why, sizeof why), -1);
    CHECK_CONTAINS(why, "neither a store nor NCCL");
}

/* ------------------------------------------------------- launcher */

static void clear_launcher_env(void)
{
    const char *v[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                       "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID",
                       "SLURM_NTASKS", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        unsetenv(v[i]);
}

TEST(launch_env_variables)
{
    clear_launcher_env();
    dcptopk_launch_env e = DCPTOPK_LAUNCH_ENV_INIT;
    CHECK_EQ(dcptopk_launch_env_get(&e), DCPTOPK_NOT_FOUND);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "RANK and WORLD_SIZE");
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "1", 1);
    CHECK_OK(dcptopk_launch_env_get(&e));
    CHECK_EQ(e.rank, 3);
    CHECK_EQ(e.world_size, 8);
    CHECK_EQ(e.local_rank, 1);
    CHECK_EQ(e.local_world_size, -1);
    CHECK_STR_EQ(e.source, "slurm");
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
    CHECK_OK(dcptopk_launch_env_get(&e));
    CHECK_STR_EQ(e.source, "openmpi");
    CHECK_EQ(e.rank, 5);
    CHECK_EQ(e.local_world_size, 3);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    CHECK_OK(dcptopk_launch_env_get(&e));
    CHECK_STR_EQ(e.source, "torchrun");
    CHECK_EQ(e.rank, 1);
    CHECK_EQ(e.local_rank, -1);
    setenv("RANK", "x1", 1);
    CHECK_EQ(dcptopk_launch_env_get(&e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "RANK = \"x1\"");
    setenv("RANK", "2", 1);
    CHECK_EQ(dcptopk_launch_env_get(&e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "RANK = 2, WORLD_SIZE = 2");
    unsetenv("WORLD_SIZE");
    CHECK_EQ(dcptopk_launch_env_get(&e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "RANK is set but WORLD_SIZE");
    e.struct_size = 4;
    CHECK_EQ(dcptopk_launch_env_get(&e), DCPTOPK_INVALID_ARGUMENT);
    clear_launcher_env();
    /* create_from_env without variables: the error says so. */
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx);
    dcptopk_group *g = NULL;
    CHECK_EQ(dcptopk_group_create_from_env(ctx, "/tmp", NULL, &g),
             DCPTOPK_NOT_FOUND);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "no launcher variables");
    dcptopk_context_destroy(ctx);
}

/* create_from_env with forked ranks, a store folder and no device: the
 * launcher variables, the store and the path. */
static int child_env(int rank, int w, const char *dir)
{
    char v[16];
    snprintf(v, sizeof v, "%d", rank);
    setenv("RANK", v, 1);
    snprintf(v, sizeof v, "%d", w);
    setenv("WORLD_SIZE", v, 1);
    setenv("DCPTOPK_STORE_DIR", dir, 1);
    dcptopk_context *ctx = host_ctx_create();
    dcptopk_group *g = NULL;
    if (!ctx || dcptopk_group_create_from_env(ctx, NULL, NULL, &g)) {
        fprintf(stderr, "rank %d: %s\n", rank, dcptopk_last_error(ctx));
        return 10;
    }
    if (dcptopk_group_rank(g) != rank || dcptopk_group_barrier(g))
        return 11;
    dcptopk_group_destroy(g);
    /* A second generation in the same folder does not see the first's
     * files. */
    if (dcptopk_group_create_from_env(ctx, NULL, NULL, &g) ||
        dcptopk_group_barrier(g))
        return 12;
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
    return 0;
}

TEST(group_from_env_forked)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "fromenv");
    CHECK(dir[0]);
    CHECK_EQ(run_children(4, child_env, dir, NULL), 4);
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    CHECK_EQ(system(rm), 0);
}
