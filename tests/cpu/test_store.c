/* test_store.c - the file store against another local user (issue 32):
 * folders that are not private are refused (a sticky one such as /tmp gets
 * a private subfolder), files planted at a rank's names are not read (a
 * forged rank, a FIFO, a symbolic link, a file of another user), writes
 * never go through a planted link, an old attempt's files are never read,
 * a group removes its files, and the peer registry refuses a record that
 * only claims this process's pid. The second user is uid 65534 (nobody);
 * the tests that need it skip when not run as root. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "group_int.h"
#include "gpu_util.h"
#include "harness.h"

#define NOBODY 65534

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* Files in `dir` (not . and ..). */
static int count_files(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

/* Runs fn in a child as uid/gid nobody; its exit code (0 = done). */
static int as_nobody(int (*fn)(const char *), const char *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(90);
        _exit(fn(arg));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
}

typedef int (*child_fn)(int rank, int w, const char *arg);
/* Forks w children fn(rank, w, arg) (each with a 20 s alarm: a hang is a
 * failure); returns how many exited 0. */
static int run_children(int w, child_fn fn, const char *arg)
{
    pid_t pids[16];
    for (int r = 0; r < w; r++) {
        fflush(NULL);
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(20);
            _exit(fn(r, w, arg));
        }
    }
    int ok = 0;
    for (int r = 0; r < w; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
        if (code == 0)
            ok++;
        else
            fprintf(stderr, "rank %d exited %d\n", r, code);
    }
    return ok;
}

static dcptopk_result group_of(dcptopk_context *ctx, const char *dir,
                               const char *prefix, int rank, int w,
                               int timeout_ms, dcptopk_group **g)
{
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    c.rank = rank;
    c.world_size = w;
    c.store_dir = dir;
    c.store_prefix = prefix;
    c.timeout_ms = timeout_ms;
    return dcptopk_group_create(ctx, &c, g);
}

/* ------------------------------------------------------------ folders */

TEST(store_folder_must_be_private)
{
    char dir[512], sub[640];
    tmpdir_make(dir, sizeof dir, "storefolder");
    CHECK(dir[0]);
    dc_store s;
    /* Writable by others, not sticky: refused, naming the path and mode. */
    snprintf(sub, sizeof sub, "%s/open", dir);
    CHECK_EQ(mkdir(sub, 0700), 0);
    CHECK_EQ(chmod(sub, 0777), 0);
    CHECK_EQ(dc_store_open(NULL, &s, sub, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "store_dir = \"");
    CHECK_CONTAINS(dcptopk_last_error(NULL), sub);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "mode 0777");
    /* Group-writable: refused unless DCPTOPK_STORE_SHARED=1. */
    CHECK_EQ(chmod(sub, 0770), 0);
    CHECK_EQ(dc_store_open(NULL, &s, sub, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "DCPTOPK_STORE_SHARED=1");
    setenv("DCPTOPK_STORE_SHARED", "1", 1);
    CHECK_OK(dc_store_open(NULL, &s, sub, "t", 0, 1, 100));
    CHECK_EQ(chmod(sub, 0777), 0); /* never writable by others */
    CHECK_EQ(dc_store_open(NULL, &s, sub, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    unsetenv("DCPTOPK_STORE_SHARED");
    /* A folder that is a symbolic link to a file: not a folder. */
    char lnk[700];
    snprintf(lnk, sizeof lnk, "%s/link", dir);
    CHECK_EQ(symlink("/proc/version", lnk), 0);
    CHECK_EQ(dc_store_open(NULL, &s, lnk, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    /* A sticky folder others may write (as /tmp): the store is a private
     * subfolder dcptopk-<uid> of it, created 0700. */
    CHECK_EQ(chmod(sub, 01777), 0);
    CHECK_OK(dc_store_open(NULL, &s, sub, "t", 0, 1, 100));
    char want[700];
    snprintf(want, sizeof want, "/dcptopk-%u", (unsigned)geteuid());
    CHECK_CONTAINS(s.dir, want);
    struct stat st;
    CHECK_EQ(lstat(s.dir, &st), 0);
    CHECK_EQ(st.st_mode & 07777, 0700u);
    /* ... which must itself be private. */
    CHECK_EQ(chmod(s.dir, 0777), 0);
    CHECK_EQ(dc_store_open(NULL, &s, sub, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "dcptopk-");
    /* Under a folder writable by others and not sticky: refused. */
    char deep[700];
    CHECK_EQ(chmod(sub, 0777), 0);
    snprintf(deep, sizeof deep, "%s/deep", sub);
    CHECK_EQ(mkdir(deep, 0700), 0);
    CHECK_EQ(dc_store_open(NULL, &s, deep, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "above it is writable by");
    /* The group API names the argument too. */
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx != NULL);
    dcptopk_group *g = NULL;
    CHECK_EQ(group_of(ctx, sub, NULL, 0, 2, 100, &g), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "store_dir = \"");
    CHECK(g == NULL);
    dcptopk_context_destroy(ctx);
    rm_rf(dir);
}

TEST(store_folder_of_another_user_refused)
{
    if (geteuid() != 0)
        SKIP("needs root to make a folder owned by uid %d", NOBODY);
    char dir[512], sub[640];
    tmpdir_make(dir, sizeof dir, "storeowner");
    CHECK(dir[0]);
    snprintf(sub, sizeof sub, "%s/theirs", dir);
    CHECK_EQ(mkdir(sub, 0755), 0);
    CHECK_EQ(chown(sub, NOBODY, NOBODY), 0);
    dc_store s;
    CHECK_EQ(dc_store_open(NULL, &s, sub, "t", 0, 1, 100), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "owned by uid 65534");
    CHECK_CONTAINS(dcptopk_last_error(NULL), "mode 0755");
    /* Another user's dcptopk-<uid> in a sticky folder: refused, not used. */
    char sticky[640], pre[700];
    snprintf(sticky, sizeof sticky, "%s/sticky", dir);
    CHECK_EQ(mkdir(sticky, 0700), 0);
    CHECK_EQ(chmod(sticky, 01777), 0);
    snprintf(pre, sizeof pre, "%s/dcptopk-%u", sticky, (unsigned)geteuid());
    CHECK_EQ(mkdir(pre, 0700), 0);
    CHECK_EQ(chown(pre, NOBODY, NOBODY), 0);
    CHECK_EQ(dc_store_open(NULL, &s, sticky, "t", 0, 1, 100),
             DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "owned by uid 65534");
    rm_rf(dir);
}

/* -------------------------------------------------------- planted files */

/* As nobody: the files a forger would plant in a shared /tmp-like folder
 * (the old layout's names, and the handshake's). */
static int plant_forgeries(const char *dir)
{
    for (int op = 1; op <= 12; op++) {
        char path[800];
        snprintf(path, sizeof path, "%s/forge.op%d.r1", dir, op);
        FILE *f = fopen(path, "wb");
        if (!f)
            return 1;
        fputs("forged", f);
        fclose(f);
    }
    char path[800];
    snprintf(path, sizeof path, "%s/forge.join.r1", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 2;
    fputs("forged", f);
    fclose(f);
    return 0;
}

TEST(store_forged_rank_not_accepted)
{
    if (geteuid() != 0)
        SKIP("needs root to plant files as uid %d", NOBODY);
    char dir[512];
    tmpdir_make(dir, sizeof dir, "storeforge");
    CHECK(dir[0]);
    CHECK_EQ(chmod(dir, 01777), 0); /* as /tmp */
    CHECK_EQ(as_nobody(plant_forgeries, dir), 0);
    /* One real rank of two: the forged rank 1 is never accepted; the
     * creation fails within the bound. */
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx != NULL);
    dcptopk_group *g = NULL;
    alarm(20);
    double t0 = now_ms();
    dcptopk_result r = group_of(ctx, dir, "forge", 0, 2, 300, &g);
    alarm(0);
    CHECK_EQ(r, DCPTOPK_PEER_TIMEOUT);
    CHECK(g == NULL);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rank 1 did not join");
    CHECK_MSG(now_ms() - t0 < 5000, "took %.0f ms", now_ms() - t0);
    dcptopk_context_destroy(ctx);
    rm_rf(dir);
}

TEST(store_file_of_another_user_not_read)
{
    if (geteuid() != 0)
        SKIP("needs root to make a file owned by uid %d", NOBODY);
    char dir[512], path[1400];
    tmpdir_make(dir, sizeof dir, "storefile");
    CHECK(dir[0]);
    dc_store s;
    CHECK_OK(dc_store_open(NULL, &s, dir, "t", 0, 2, 300));
    /* A well-formed join record, but not this user's. */
    snprintf(path, sizeof path, "%s/t.join.r1", s.dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    uint32_t head[4] = {0x32535444u, 0, 8, 0};
    uint64_t nonce = 7;
    CHECK_EQ(write(fd, head, sizeof head), (ssize_t)sizeof head);
    CHECK_EQ(write(fd, &nonce, sizeof nonce), (ssize_t)sizeof nonce);
    close(fd);
    CHECK_EQ(chown(path, NOBODY, NOBODY), 0);
    CHECK_EQ(dc_store_join(NULL, &s), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "owned by another user");
    CHECK_CONTAINS(dcptopk_last_error(NULL), path);
    rm_rf(dir);
}

TEST(store_fifo_is_an_error_not_a_hang)
{
    char dir[512], path[1400];
    tmpdir_make(dir, sizeof dir, "storefifo");
    CHECK(dir[0]);
    dc_store s;
    CHECK_OK(dc_store_open(NULL, &s, dir, "t", 0, 2, 300));
    /* At the handshake's name and at an operation's name. */
    snprintf(path, sizeof path, "%s/t.join.r1", s.dir);
    CHECK_EQ(mkfifo(path, 0600), 0);
    alarm(10); /* the old store blocked in open() forever */
    double t0 = now_ms();
    CHECK_EQ(dc_store_join(NULL, &s), DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "not a regular file");
    CHECK_CONTAINS(dcptopk_last_error(NULL), path);
    unlink(path);
    s.attempt = 0x1234;
    snprintf(path, sizeof path, "%s/t.%016llx.k", s.dir, 0x1234ull);
    CHECK_EQ(mkfifo(path, 0600), 0);
    char got[8];
    CHECK_EQ(dc_store_get(NULL, &s, "k", 1, got, sizeof got, 300),
             DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "not a regular file");
    alarm(0);
    CHECK_MSG(now_ms() - t0 < 2000, "took %.0f ms", now_ms() - t0);
    /* A device (through a link, which is not followed either). */
    unlink(path);
    CHECK_EQ(symlink("/dev/zero", path), 0);
    CHECK_EQ(dc_store_get(NULL, &s, "k", 1, got, sizeof got, 300),
             DCPTOPK_IO_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "symbolic link");
    rm_rf(dir);
}

TEST(store_symlink_spray_does_not_redirect_writes)
{
    char dir[512], victim[800];
    tmpdir_make(dir, sizeof dir, "storespray");
    CHECK(dir[0]);
    dc_store s;
    CHECK_OK(dc_store_open(NULL, &s, dir, "t", 0, 1, 300));
    s.attempt = 0x99;
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    CHECK(f != NULL);
    fputs("precious", f);
    fclose(f);
    /* Links at the final name and at every temporary name the old store
     * would use (<path>.tmp.<pid>.<rank>). */
    char path[1400], tmp[1500];
    snprintf(path, sizeof path, "%s/t.%016llx.k1", s.dir, 0x99ull);
    CHECK_EQ(symlink(victim, path), 0);
    for (int r = 0; r < 4; r++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%d", path, (long)getpid(), r);
        CHECK_EQ(symlink(victim, tmp), 0);
    }
    const char blob[] = "overwritten";
    CHECK_OK(dc_store_put(NULL, &s, "k1", blob, sizeof blob));
    char buf[64] = {0};
    f = fopen(victim, "r");
    CHECK(f != NULL);
    CHECK(fgets(buf, sizeof buf, f) != NULL);
    fclose(f);
    CHECK_STR_EQ(buf, "precious");
    /* The name now holds the blob itself, a regular file of 0600. */
    struct stat st;
    CHECK_EQ(lstat(path, &st), 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK_EQ(st.st_mode & 0777, 0600u);
    char got[sizeof blob];
    CHECK_OK(dc_store_get(NULL, &s, "k1", 0, got, sizeof got, 100));
    CHECK_STR_EQ(got, blob);
    rm_rf(dir);
}

/* ------------------------------------------------------------ attempts */

/* Generation `gen` (from arg "<dir>|<gen>"): creates the group, all-gathers
 * (gen, rank) five times and checks every value; gen 1 then dies without
 * destroying (its files stay), gen 2 destroys. Rank 1 of gen 2 starts late,
 * so rank 0 would read gen 1's leftovers if it could. */
static int child_attempt(int rank, int w, const char *arg)
{
    char dir[600];
    int gen = 0;
    const char *bar = strchr(arg, '|');
    snprintf(dir, sizeof dir, "%.*s", (int)(bar - arg), arg);
    gen = atoi(bar + 1);
    if (gen == 2 && rank == 1)
        usleep(300 * 1000);
    dcptopk_context *ctx = host_ctx_create();
    dcptopk_group *g = NULL;
    if (!ctx || group_of(ctx, dir, "job", rank, w, 3000, &g)) {
        fprintf(stderr, "gen %d rank %d: %s\n", gen, rank,
                dcptopk_last_error(ctx));
        return 10;
    }
    for (int it = 0; it < 5; it++) {
        int32_t mine[2] = {gen, rank}, all[16][2];
        if (dc_group_allgather(g, mine, sizeof mine, all))
            return 11;
        for (int p = 0; p < w; p++)
            if (all[p][0] != gen || all[p][1] != p) {
                fprintf(stderr, "gen %d rank %d: read (%d, %d) from rank %d\n",
                        gen, rank, all[p][0], all[p][1], p);
                return 12;
            }
    }
    if (gen == 1)
        _exit(0); /* a crash: no destroy */
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
    return 0;
}

TEST(store_old_attempt_not_read)
{
    char dir[512], arg[700];
    tmpdir_make(dir, sizeof dir, "storeattempt");
    CHECK(dir[0]);
    snprintf(arg, sizeof arg, "%s|1", dir);
    CHECK_EQ(run_children(2, child_attempt, arg), 2);
    CHECK(count_files(dir) > 0); /* the crashed attempt's leftovers */
    snprintf(arg, sizeof arg, "%s|2", dir);
    CHECK_EQ(run_children(2, child_attempt, arg), 2);
    rm_rf(dir);
}

/* ------------------------------------------------------------- cleanup */

static int child_clean(int rank, int w, const char *dir)
{
    dcptopk_context *ctx = host_ctx_create();
    dcptopk_group *g = NULL;
    if (!ctx || group_of(ctx, dir, "clean", rank, w, 3000, &g))
        return 10;
    for (int i = 0; i < 5; i++)
        if (dcptopk_group_barrier(g))
            return 11;
    if (rank == 1)
        usleep(100 * 1000); /* leave in another order than arriving */
    dcptopk_group_destroy(g);
    dcptopk_context_destroy(ctx);
    return 0;
}

TEST(store_files_removed_after_destroy_and_failure)
{
    char dir[512];
    tmpdir_make(dir, sizeof dir, "storeclean");
    CHECK(dir[0]);
    CHECK_EQ(run_children(3, child_clean, dir), 3);
    CHECK_EQ(count_files(dir), 0);
    /* A creation that fails: rank 1 of 2 without a rank 0. */
    dcptopk_context *ctx = host_ctx_create();
    CHECK(ctx != NULL);
    dcptopk_group *g = NULL;
    CHECK_EQ(group_of(ctx, dir, "clean", 1, 2, 200, &g),
             DCPTOPK_PEER_TIMEOUT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "rank 0 did not answer");
    CHECK_EQ(count_files(dir), 0);
    dcptopk_context_destroy(ctx);
    rm_rf(dir);
}

/* -------------------------------------------------------- peer registry */

TEST(peer_registry_refuses_forged_same_pid_record)
{
    /* A real allocation of this process is found by its exact triple. */
    const uint64_t tok = dc_random64(), ptr = 0x7f0000200000ull;
    CHECK_EQ(dc_peer_registry_add(tok, ptr, 4096), 0);
    CHECK(dc_peer_registry_has(tok, ptr, 4096));
    /* A record that claims this pid but names another address, size or
     * token (a forger knows the pid, not the token) is not. */
    CHECK(!dc_peer_registry_has(tok, ptr + 4096, 4096));
    CHECK(!dc_peer_registry_has(tok, ptr, 1 << 20));
    CHECK(!dc_peer_registry_has(tok ^ 1, ptr, 4096));
    CHECK(!dc_peer_registry_has(0, ptr, 4096));
    CHECK(!dc_peer_registry_has(0, 0, 0));
    dc_peer_registry_remove(tok);
    CHECK(!dc_peer_registry_has(tok, ptr, 4096)); /* freed: stale */
    /* Tokens are random. */
    CHECK(dc_random64() != dc_random64());
}
