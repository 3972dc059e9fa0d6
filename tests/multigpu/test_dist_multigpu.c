/* test_dist_multigpu.c - the merge across ranks with one process per GPU
 * (label multigpu: needs >= 2 GPUs, skips otherwise), W = min(GPUs, 8):
 * the whole exact merge against the CPU reference through the NCCL
 * all-gather and through the device push, 100+ consecutive calls, CUDA
 * graph replay on the NCCL path, a killed rank on each path (the others get
 * DCPTOPK_PEER_TIMEOUT within the bound, the group is broken, the
 * survivors rebuild and merge again), and `dcptopk selftest --ranks W`.
 * NCCL_NVLS_ENABLE=0 throughout (NVLink multicast stays off). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "group_int.h"
#include "dist_ranks.h"
#include "harness.h"

static int world(void)
{
    int n = dcptopk_device_count();
    return n > 8 ? 8 : n;
}

#define NEED_GPUS(w)                                                           \
    int w = world();                                                           \
    do {                                                                       \
        if (w < 2)                                                             \
            SKIP("%d CUDA device(s): the multi-GPU tests need 2 or more", w);  \
        setenv("NCCL_NVLS_ENABLE", "0", 1);                                    \
    } while (0)

#define NEED_PUSH()                                                            \
    do {                                                                       \
        if (!dc_exchange_push_built())                                         \
            SKIP("this library lacks the push exchange (kernels/exchange)");   \
    } while (0)

TEST(nccl_exact_merge)
{
    NEED_GPUS(w);
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=nccl",
                         "DC_DIST_STEPS=8", NULL};
    CHECK_EQ(dr_spawn(w, "merge", env), w);
}

TEST(push_exact_merge)
{
    NEED_GPUS(w);
    NEED_PUSH();
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=push",
                         "DC_DIST_STEPS=8", NULL};
    CHECK_EQ(dr_spawn(w, "merge", env), w);
}

TEST(nccl_120_calls)
{
    NEED_GPUS(w);
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=nccl",
                         "DC_DIST_STEPS=120", "DC_DIST_K=512", "DC_DIST_N=96",
                         "DC_DIST_ROWS=9", NULL};
    CHECK_EQ(dr_spawn(w, "merge", env), w);
}

TEST(push_120_calls)
{
    NEED_GPUS(w);
    NEED_PUSH();
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=push",
                         "DC_DIST_STEPS=120", "DC_DIST_K=512", "DC_DIST_N=96",
                         "DC_DIST_ROWS=9", NULL};
    CHECK_EQ(dr_spawn(w, "merge", env), w);
}

TEST(nccl_graph_replay)
{
    NEED_GPUS(w);
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=nccl",
                         "DC_DIST_STEPS=5", "DC_DIST_ROWS=16", NULL};
    CHECK_EQ(dr_spawn(w, "graph", env), w);
}

TEST(nccl_killed_rank)
{
    NEED_GPUS(w);
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=nccl",
                         "DCPTOPK_PEER_TIMEOUT_MS=5000", "DC_DIST_ROWS=16",
                         NULL};
    CHECK_EQ(dr_spawn(w, "die", env), w - 1);
}

TEST(push_killed_rank)
{
    NEED_GPUS(w);
    NEED_PUSH();
    const char *env[] = {"DC_DIST_SPREAD=1", "DCPTOPK_EXCHANGE=push",
                         "DCPTOPK_PEER_TIMEOUT_MS=3000", "DC_DIST_ROWS=16",
                         NULL};
    CHECK_EQ(dr_spawn(w, "die", env), w - 1);
}

TEST(selftest_cli)
{
    NEED_GPUS(w);
    const char *paths[] = {"auto", "nccl"};
    for (int i = 0; i < 2; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "DCPTOPK_EXCHANGE=%s %s selftest --ranks %d --steps 3",
                 paths[i], DC_TEST_CLI, w);
        int st = system(cmd);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "%s: exit status %d", cmd, st);
    }
}
