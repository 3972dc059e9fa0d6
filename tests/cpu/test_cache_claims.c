/*
 * test_cache_claims.c - the compile cache's claims (cache/): 8 processes
 * warming the same keys compile each once, a claimant killed mid-compile is
 * taken over at once, a live one is waited for until its claim goes stale,
 * a waiter takes no write lock, a future-dated claim is stale, a long wait is
 * warned about once.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache.h"
#include "cache_fixture.h"
#include "harness.h"

#define NKEYS 4

static const char *const claim_tags[NKEYS] = {"k0", "k1", "k2", "k3"};

/* The race's paths: the cache file, its folder and the compile log. */
typedef struct race_paths {
    const char *path, *dir, *log;
} race_paths;

/* One process of the race: warms every key in a rotated order and writes
 * each key's cubin hash to child<p>.txt; 0 only if every hit has the right
 * bytes. */
static int warm_every_key(int p, void *arg)
{
    const race_paths *rp = arg;
    dc_cache *c = cf_open(rp->path, DC_CACHE_RW);
    if (!c || dc_cache_is_memory(c) || dc_cache_is_readonly(c))
        return 11;
    char out[512];
    snprintf(out, sizeof out, "%s/child%d.txt", rp->dir, p);
    FILE *f = fopen(out, "w");
    for (int i = 0; i < NKEYS; i++) {
        const char *tag = claim_tags[(i + p) % NKEYS];
        cf_job j = cf_job_of(tag);
        j.sleep_ms = 100;
        j.log = rp->log;
        dc_cache_hit hit;
        int compiled;
        if (cf_get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS)
            return 12;
        if (!cf_hit_is(&hit, tag, 0))
            return 13;
        fprintf(f, "%s %016llx\n", tag,
                (unsigned long long)XXH3_64bits(hit.cubin, hit.cubin_size));
        dc_cache_hit_free(&hit);
    }
    fclose(f);
    dc_cache_close(c);
    return 0;
}

TEST(eight_processes_compile_each_key_once)
{
    char path[512], log[512];
    const char *dir = cf_fresh(path, sizeof path);
    cf_path(log, sizeof log, dir, "compiles.log");
    const char *const *tags = claim_tags;
    race_paths rp = {path, dir, log};
    CHECK_EQ(cf_race(CF_NPROC, warm_every_key, &rp), 0);
    /* Exactly one compile per key, over all processes. */
    for (int i = 0; i < NKEYS; i++) {
        char needle[16];
        snprintf(needle, sizeof needle, "%s ", tags[i]);
        CHECK_MSG(cf_count_lines(log, needle) == 1,
                  "key %s compiled %d times", tags[i],
                  cf_count_lines(log, needle));
    }
    CHECK_EQ(cf_count_lines(log, " "), NKEYS);
    /* Every process read identical bytes for each key. */
    for (int i = 0; i < NKEYS; i++) {
        char first[128] = "";
        for (int p = 0; p < CF_NPROC; p++) {
            char out[512], line[128];
            snprintf(out, sizeof out, "%s/child%d.txt", dir, p);
            FILE *f = fopen(out, "r");
            CHECK(f != NULL);
            int found = 0;
            while (fgets(line, sizeof line, f)) {
                if (strncmp(line, tags[i], strlen(tags[i])) != 0 ||
                    line[strlen(tags[i])] != ' ')
                    continue;
                found = 1;
                if (!first[0])
                    snprintf(first, sizeof first, "%s", line);
                CHECK_STR_EQ(line, first);
            }
            fclose(f);
            CHECK(found);
        }
    }
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), NKEYS);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(cf_sql(path, "SELECT sum(hits) FROM entries") <=
                 CF_NPROC * NKEYS - NKEYS,
             1);
}

/* ------------------------------------------------------------ dead claims */

/* Forks a child that claims `tag` and blocks inside its compile callback.
 * Returns its pid once it is compiling. */
static pid_t child_claiming(const char *path, const char *tag)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dc_cache *c = cf_open(path, DC_CACHE_RW);
        if (!c)
            _exit(20);
        cf_job j = cf_job_of(tag);
        j.notify_fd = p[1];
        j.sleep_ms = 60000;
        dc_cache_hit hit;
        int compiled;
        cf_get(c, &j, &hit, &compiled);
        _exit(21);
    }
    close(p[1]);
    char b = 0;
    ssize_t n = read(p[0], &b, 1);
    close(p[0]);
    if (n != 1) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        return -1;
    }
    return pid;
}

TEST(claimant_killed_mid_compile)
{
    char path[512];
    cf_fresh(path, sizeof path);
    /* A long claim timeout: the takeover must come from seeing the
     * claimant dead, not from the timeout. */
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "60", 1);
    pid_t kid = child_claiming(path, "orphan");
    CHECK(kid > 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 1);
    CHECK_EQ(cf_sql(path, "SELECT pid FROM claims"), kid);
    CHECK_EQ(kill(kid, SIGKILL), 0);
    int status = 0;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK(WIFSIGNALED(status));

    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    double t0 = cf_now_s();
    cf_got g;
    CHECK_OK(cf_fetch(c, "orphan", 0, &g));
    double took = cf_now_s() - t0;
    CHECK_MSG(took < 3.0, "took %.2f s", took);
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    dc_cache_close(c);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
}

TEST(live_claimant_waited_for_then_stale_claim_taken_over)
{
    char path[512];
    cf_fresh(path, sizeof path);
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "1.5", 1);
    /* The child stays alive (stopped) holding the claim: we wait for the
     * timeout, then take over. */
    pid_t kid = child_claiming(path, "slow");
    CHECK(kid > 0);
    kill(kid, SIGSTOP);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    double t0 = cf_now_s();
    cf_got g;
    dcptopk_result r = cf_fetch(c, "slow", 0, &g);
    double took = cf_now_s() - t0;
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    CHECK_OK(r);
    CHECK_MSG(took >= 1.0 && took < 6.0, "took %.2f s", took);
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
}

TEST(claim_of_another_host_goes_stale)
{
    char path[512], hex[33];
    cf_fresh(path, sizeof path);
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "1", 1);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_key_hex("remote", hex);
    /* pid 1 exists here, but on "elsewhere" we cannot know: wait. */
    CHECK_EQ(cf_plant_claim(path, hex, 1, "elsewhere.invalid", 7,
                            cf_wall_ms()),
             -1);
    double t0 = cf_now_s();
    cf_got g;
    CHECK_OK(cf_fetch(c, "remote", 0, &g));
    double took = cf_now_s() - t0;
    CHECK_MSG(took >= 0.8 && took < 5.0, "took %.2f s", took);
    CHECK_EQ(g.compiled, 1);
    dc_cache_close(c);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
}

/* -------------------------------------------- waiting takes no write lock */

typedef struct lock_holder {
    sqlite3 *db;   /* holds BEGIN IMMEDIATE until released */
    int go_fd;     /* then one byte here lets the claimant finish */
    int hold_ms;
    double released_at;
} lock_holder;

static void *hold_then_release(void *arg)
{
    lock_holder *h = arg;
    cf_sleep_ms(h->hold_ms);
    sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
    h->released_at = cf_now_s();
    char b = 'g';
    if (write(h->go_fd, &b, 1) != 1)
        abort();
    return NULL;
}

/* A process waiting on another live process's claim must neither compile
 * the key nor need the write lock while it waits: the write lock is what the
 * claimant needs to store, and every waiter that took it to look at the
 * claim (and backed off in SQLite's busy handler when it was taken) delayed
 * the store all the others wait for. Here the write lock is held by someone
 * else for the whole wait and the busy timeout is 0, so any write attempt of
 * the waiter fails at once; it used to compile the key then. */
TEST(waiter_on_a_live_claim_takes_no_write_lock)
{
    char path[512];
    cf_fresh(path, sizeof path);
    int started[2], go[2];
    CHECK_EQ(pipe(started), 0);
    CHECK_EQ(pipe(go), 0);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        /* The claimant: claims, signals, compiles until told to finish. */
        close(started[0]);
        close(go[1]);
        dc_cache *c = cf_open(path, DC_CACHE_RW);
        if (!c)
            _exit(20);
        cf_job j = cf_job_of("held");
        j.notify_fd = started[1];
        j.wait_fd = go[0];
        dc_cache_hit hit;
        int compiled = 0;
        if (cf_get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS || !compiled ||
            !cf_hit_is(&hit, "held", 0))
            _exit(21);
        dc_cache_hit_free(&hit);
        dc_cache_close(c);
        _exit(0);
    }
    close(started[1]);
    close(go[0]);
    char b = 0;
    CHECK_EQ(read(started[0], &b, 1), 1); /* the claim is committed */
    close(started[0]);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 1);

    /* Someone else holds the write lock from before the waiter starts. */
    lock_holder h = {NULL, go[1], 300, 0.0};
    CHECK_EQ(sqlite3_open(path, &h.db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(h.db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
             SQLITE_OK);
    setenv("DCPTOPK_CACHE_BUSY_MS", "0", 1);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_BUSY_MS");
    CHECK(c != NULL);
    CHECK(!dc_cache_is_memory(c) && !dc_cache_is_readonly(c));
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, hold_then_release, &h), 0);
    cf_job j = cf_job_of("held");
    dc_cache_hit hit;
    int compiled = -1;
    dcptopk_result r = cf_get(c, &j, &hit, &compiled);
    double seen_at = cf_now_s();
    pthread_join(th, NULL);
    sqlite3_close(h.db);
    close(go[1]);
    int status = 0;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "claimant: status 0x%x", status);
    CHECK_OK(r);
    CHECK_MSG(j.calls == 0 && compiled == 0,
              "the waiter compiled the claimed key (%d calls, compiled %d)",
              j.calls, compiled);
    CHECK(cf_hit_is(&hit, "held", 0));
    /* It got the claimant's entry, which exists only after the release. */
    CHECK_MSG(seen_at >= h.released_at, "seen %.3f s before the release",
              h.released_at - seen_at);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
}

/* --------------------------------------------------------- stale claims */

TEST(future_dated_claim_is_stale)
{
    /* Clock skew between hosts sharing a folder: a claim dated an hour
     * ahead would never reach the timeout. */
    char path[512], hex[33];
    cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_key_hex("future", hex);
    const int64_t later = cf_wall_ms() + 3600 * 1000;
    CHECK_EQ(cf_plant_claim(path, hex, 1, "another-host", 7, later), -1);
    dc_cache_claim *claims = NULL;
    size_t n = 0;
    char err[512];
    CHECK_OK(dc_cache_claims(c, &claims, &n, err, sizeof err));
    CHECK_EQ(n, 1);
    CHECK_EQ(claims[0].stale, 1);
    free(claims);
    double t0 = cf_now_s();
    cf_got g;
    CHECK_OK(cf_fetch(c, "future", 0, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK_MSG(cf_now_s() - t0 < 2.0, "waited %.1f s", cf_now_s() - t0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    /* clear_stale removes stale claims and keeps live ones. */
    CHECK_EQ(cf_plant_claim(path, "aaaa", 1, "another-host", 7, later), -1);
    CHECK_EQ(cf_plant_claim(path, "bbbb", 1, "another-host", 7, cf_wall_ms()),
             -1);
    int64_t removed = -1;
    CHECK_OK(dc_cache_claims_clear_stale(c, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    CHECK_EQ(cf_rows_of(path, "claims", "bbbb"), 1);
    dc_cache_close(c);
}

TEST(a_long_wait_on_a_claim_is_warned_once)
{
    /* A live claimant on another host that never finishes: the waiter
     * says whom it waits for after 5 s, once, and takes the claim over at
     * the timeout (8 s here). */
    char path[512], hex[33];
    const char *dir = cf_fresh(path, sizeof path);
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "8", 1);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
    CHECK(c != NULL);
    cf_key_hex("stuck", hex);
    CHECK_EQ(cf_plant_claim(path, hex, 4242, "build-host-7", 9, cf_wall_ms()),
             -1);
    cf_capture_begin(dir);
    cf_got g;
    dcptopk_result r = cf_fetch(c, "stuck", 0, &g);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(g.compiled, 1);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "pid 4242 on host build-host-7");
    CHECK_CONTAINS(text, "cache claims");
    dc_cache_close(c);
}
