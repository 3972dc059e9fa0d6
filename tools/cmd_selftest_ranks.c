/* cmd_selftest_ranks.c - `dcptopk selftest --ranks N`: the distributed merge
 * across N processes. The parent starts N copies of this tool (fork + exec,
 * so that no CUDA state crosses a fork) with the launcher variables RANK,
 * WORLD_SIZE, LOCAL_RANK and a fresh store folder; each copy (--as-rank)
 * creates its context (device = local rank when there are N GPUs, else all
 * on GPU 0), its group from the environment, and runs
 * dcptopk_selftest_group: the whole exact merge of the config with W = N,
 * bit for bit against the reference. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int st_as_rank(const char *cache, const dcptopk_merge_config *cfg,
               int32_t rows, int32_t steps, uint64_t seed);
int st_ranks(const char *name, const char *cache, int32_t ranks,
             int32_t rows, int32_t steps, uint64_t seed);

int st_as_rank(const char *cache, const dcptopk_merge_config *cfg,
               int32_t rows, int32_t steps, uint64_t seed)
{
    dcptopk_launch_env env = DCPTOPK_LAUNCH_ENV_INIT;
    dcptopk_result r = dcptopk_launch_env_get(&env);
    if (r)
        return cli_lib_error(r, "reading the launcher variables",
                             dcptopk_last_error(NULL));
    int ndev = dcptopk_device_count();
    if (ndev < 1)
        return cli_error(CLI_NO_DEVICE, "rank %d: no CUDA device", env.rank);
    int32_t lr = env.local_rank >= 0 ? env.local_rank : env.rank;
    int32_t device = ndev >= env.world_size ? lr % ndev : 0;
    dcptopk_context_config cc = DCPTOPK_CONTEXT_CONFIG_INIT;
    cc.device = device;
    cc.cache_path = cache;
    dcptopk_context *ctx = NULL;
    if ((r = dcptopk_context_create(&cc, &ctx)))
        return cli_lib_error(r, "creating the context",
                             dcptopk_last_error(NULL));
    dcptopk_merge_config c = *cfg;
    c.world_size = env.world_size;
    dcptopk_group *g = NULL;
    int rc = CLI_OK;
    if ((r = dcptopk_group_create_from_env(ctx, NULL, NULL, &g))) {
        rc = cli_lib_error(r, "creating the group", dcptopk_last_error(ctx));
        dcptopk_context_destroy(ctx);
        return rc;
    }
    int32_t path = 0;
    char reason[640];
    dcptopk_group_path(g, &path, reason, sizeof reason);
    if (env.rank == 0)
        printf("      exchange path: %s (%s)\n", dcptopk_path_name(path),
               reason);
    fflush(stdout);
    dcptopk_selftest_report rep = DCPTOPK_SELFTEST_REPORT_INIT;
    r = dcptopk_selftest_group(g, &c, rows, steps, seed, &rep);
    if (r == DCPTOPK_SUCCESS)
        printf("ok    device %d: %s\n", device, rep.summary);
    else if (r == DCPTOPK_INTERNAL && rep.mismatches > 0) {
        printf("FAIL  device %d: %s\n", device, rep.summary);
        rc = CLI_SELFTEST_FAIL;
    } else
        rc = cli_lib_error(r, "dcptopk_selftest_group",
                           dcptopk_last_error(ctx));
    fflush(stdout);
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
    return rc;
}

static void remove_tree(const char *dir)
{
    char cmd[1200];
    /* The store holds only flat files written by the ranks. */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (strchr(dir, '\'') == NULL && system(cmd) != 0)
        fprintf(stderr, "dcptopk: warning: could not remove %s\n", dir);
}

int st_ranks(const char *name, const char *cache, int32_t ranks,
             int32_t rows, int32_t steps, uint64_t seed)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/dcptopk-selftest-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return cli_error(CLI_FAILURE, "mkdtemp(%s): %s", dir, strerror(errno));
    int ndev = dcptopk_device_count();
    if (ndev < 1) {
        rmdir(dir);
        return cli_error(CLI_NO_DEVICE, "selftest --ranks %d: no CUDA device "
                         "(the distributed merge needs a GPU)", ranks);
    }
    printf("selftest --ranks %d: config %s with W = %d, %d process%s on %s\n",
           ranks, name, ranks, ranks, ranks == 1 ? "" : "es",
           ndev >= ranks ? "one GPU each" : "GPU 0 (time-sliced)");
    fflush(stdout);
    char a_rows[16], a_steps[16], a_seed[32], w[16];
    snprintf(a_rows, sizeof a_rows, "%d", rows);
    snprintf(a_steps, sizeof a_steps, "%d", steps);
    snprintf(a_seed, sizeof a_seed, "%llu", (unsigned long long)seed);
    snprintf(w, sizeof w, "%d", ranks);
    pid_t pids[16];
    for (int32_t r = 0; r < ranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            for (int32_t q = 0; q < r; q++)
                kill(pids[q], SIGKILL);
            return cli_error(CLI_FAILURE, "fork: %s", strerror(errno));
        }
        if (pid == 0) {
            char rank[16];
            snprintf(rank, sizeof rank, "%d", r);
            setenv("RANK", rank, 1);
            setenv("LOCAL_RANK", rank, 1);
            setenv("WORLD_SIZE", w, 1);
            setenv("LOCAL_WORLD_SIZE", w, 1);
            setenv("DCPTOPK_STORE_DIR", dir, 1);
            const char *args[16] = {"dcptopk", "selftest", name, "--as-rank",
                                    "--rows", a_rows, "--steps", a_steps,
                                    "--seed", a_seed};
            int n = 10;
            if (cache) {
                args[n++] = "--cache";
                args[n++] = cache;
            }
            args[n] = NULL;
            execv("/proc/self/exe", (char *const *)args);
            fprintf(stderr, "dcptopk: exec /proc/self/exe: %s\n",
                    strerror(errno));
            _exit(CLI_FAILURE);
        }
        pids[r] = pid;
    }
    /* Every wait of the ranks is bounded; this bound only catches a rank
     * stuck outside the library (e.g. a first compile of every kernel). */
    int worst = CLI_OK, left = ranks;
    int status[16];
    for (int32_t r = 0; r < ranks; r++)
        status[r] = -1;
    const time_t deadline = time(NULL) + 1200;
    while (left > 0) {
        int st = 0;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p == 0) {
            if (time(NULL) > deadline) {
                for (int32_t r = 0; r < ranks; r++)
                    if (status[r] < 0)
                        kill(pids[r], SIGKILL);
            }
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (p < 0)
            break;
        for (int32_t r = 0; r < ranks; r++)
            if (pids[r] == p) {
                status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                left--;
                if (status[r] != 0)
                    printf("FAIL  rank %d exited with %d\n", r, status[r]);
                if (status[r] == CLI_SELFTEST_FAIL || worst == CLI_OK)
                    worst = status[r] == 0 ? worst
                                           : (status[r] == CLI_SELFTEST_FAIL
                                                  ? CLI_SELFTEST_FAIL
                                                  : CLI_FAILURE);
            }
    }
    remove_tree(dir);
    printf("selftest --ranks %d %s\n", ranks, worst ? "FAILED" : "passed");
    return worst;
}
