/*
 * test_cache_unwritable.c - the compile cache (cache/) where it cannot
 * store: read-only mode never writes, an unwritable folder falls back to
 * reading (or to memory), a full store still returns the blobs, and on a
 * full disk (injected, then a real 3 MiB tmpfs when run as root) each
 * process compiles each key once and no claim is left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache.h"
#include "cache_fixture.h"
#include "dcptopk.h"
#include "harness.h"

/* ------------------------------------------------------------ read-only */

TEST(readonly_mode_never_writes)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "stored", 0, &g));
    dc_cache_close(c);

    cf_capture_begin(dir);
    c = cf_open(path, DC_CACHE_RO);
    int warnings = cf_capture_end(NULL, 0);
    CHECK(c != NULL);
    CHECK_EQ(warnings, 0);
    CHECK_EQ(dc_cache_is_readonly(c), 1);
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_OK(cf_fetch(c, "stored", 0, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    CHECK_OK(cf_fetch(c, "unstored", 0, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    CHECK_OK(cf_fetch(c, "unstored", 0, &g));
    CHECK_EQ(g.compiled, 1); /* still not stored */
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
    CHECK_EQ(cf_sql(path, "SELECT hits FROM entries"), 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
}

/* In a child that cannot write `dir` (as root, by becoming nobody), opens
 * the cache read-write and checks the fallback. Exit codes tell what went
 * wrong. */
static int readonly_child(const char *dir, const char *path, int has_file,
                          const char *errfile)
{
    if (geteuid() == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            return 77;
    }
    /* Make sure the directory really is unwritable now. */
    char probe[600];
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int fd = open(probe, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
        close(fd);
        unlink(probe);
        return 78;
    }
    int efd = open(errfile, O_WRONLY | O_TRUNC);
    if (efd < 0)
        return 30;
    dup2(efd, 2);
    close(efd);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    if (!c)
        return 31;
    if (has_file && (!dc_cache_is_readonly(c) || dc_cache_is_memory(c)))
        return 32;
    if (!has_file && !dc_cache_is_memory(c))
        return 33;
    cf_got g;
    if (cf_fetch(c, "shipped", 0, &g) != DCPTOPK_SUCCESS)
        return 34;
    if (g.compiled != !has_file || !g.bytes_ok)
        return 35;
    if (cf_fetch(c, "new-here", 0, &g) != DCPTOPK_SUCCESS || g.compiled != 1 ||
        !g.bytes_ok)
        return 36;
    dc_cache_close(c);
    return 0;
}

TEST(readonly_directory_falls_back)
{
    const char *dir = cf_dir();
    char rodir[512], path[600], missing[600], errfile[512];
    cf_path(rodir, sizeof rodir, dir, "ro");
    cf_path(errfile, sizeof errfile, dir, "child-stderr.txt");
    snprintf(path, sizeof path, "%s/c.sqlite", rodir);
    snprintf(missing, sizeof missing, "%s/none/c.sqlite", rodir);
    CHECK_EQ(mkdir(rodir, 0755), 0);
    /* The child may not create files in `dir`: make its stderr file now. */
    int efd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(efd >= 0);
    close(efd);
    CHECK_EQ(chmod(errfile, 0666), 0);
    /* A shipped cache with one entry, in WAL mode (the hard case: readers
     * need the -shm file, which they cannot create here). */
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "shipped", 0, &g));
    dc_cache_close(c);
    CHECK_EQ(cf_count_files(rodir, "-shm"), 0);
    CHECK_EQ(chmod(path, 0444), 0);
    CHECK_EQ(chmod(rodir, 0555), 0);
    CHECK_EQ(chmod(dir, 0755), 0);
    if (geteuid() == 0 && getenv("DCPTOPK_TEST_NO_SETUID"))
        SKIP("running as root and DCPTOPK_TEST_NO_SETUID is set");
    for (int has_file = 1; has_file >= 0; has_file--) {
        pid_t kid = fork();
        CHECK(kid >= 0);
        if (kid == 0)
            _exit(readonly_child(rodir, has_file ? path : missing, has_file,
                                 errfile));
        int status = 0;
        CHECK_EQ(waitpid(kid, &status, 0), kid);
        CHECK(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        if (code == 77)
            SKIP("running as root without the right to become nobody "
                 "(setuid failed): cannot make a directory unwritable");
        if (code == 78)
            SKIP("the directory stays writable even after chmod 0555 and "
                 "setuid(nobody)");
        FILE *ef = fopen(errfile, "r");
        char line[1024];
        while (ef && fgets(line, sizeof line, ef))
            fprintf(stderr, "child (has_file=%d): %s", has_file, line);
        if (ef)
            fclose(ef);
        CHECK_MSG(code == 0, "child (has_file=%d) failed with code %d",
                  has_file, code);
        CHECK_EQ(cf_count_lines(errfile, "dcptopk: warning:"), 1);
        CHECK_EQ(cf_count_lines(errfile,
                                  has_file ? "read-only" : "in memory"),
                 1);
    }
    CHECK_EQ(cf_count_files(rodir, "corrupt"), 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
}

/* ---------------------------------------------------------------- full */

TEST(full_store_still_returns_the_blobs)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    int64_t pages = cf_sql(path, "PRAGMA page_count");
    CHECK(pages > 0);
    CHECK_EQ(dc_cache_test_set_max_pages(c, pages + 2), SQLITE_OK);
    cf_capture_begin(dir);
    cf_job j = cf_job_of("huge");
    j.cubin_size = 1 << 20;
    dc_cache_hit hit;
    int compiled;
    dcptopk_result r = cf_get(c, &j, &hit, &compiled);
    cf_job k = cf_job_of("huge2");
    k.cubin_size = 1 << 20;
    dc_cache_hit hit2;
    int compiled2;
    dcptopk_result r2 = cf_get(c, &k, &hit2, &compiled2);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_OK(r2);
    CHECK_EQ(compiled, 1);
    CHECK_EQ(compiled2, 1);
    CHECK(cf_hit_is(&hit, "huge", 1 << 20));
    CHECK(cf_hit_is(&hit2, "huge2", 1 << 20));
    dc_cache_hit_free(&hit);
    dc_cache_hit_free(&hit2);
    CHECK_EQ(warnings, 1); /* one per handle, not one per store */
    CHECK_CONTAINS(text, "full");
    CHECK_EQ(j.released, 1);
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    /* Space again: the same key stores fine. */
    c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "huge", 1 << 20, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK_OK(cf_fetch(c, "huge", 1 << 20, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
}

/* ------------------------------------------------------------ full disk */

TEST(full_disk_compiles_each_key_once_per_process_and_leaves_no_claim)
{
    /* Every store fails as on a full disk (the fault-injection hook is
     * inherited by the children). 8 processes each ask for 6 keys twice
     * (as a warmup's compile phase, then its load phase): each compiles
     * each key exactly once, nobody waits out a claim, no claim is left. */
    char path[512], log[512];
    const char *dir = cf_fresh(path, sizeof path);
    cf_path(log, sizeof log, dir, "compiles.log");
    dc_cache *c0 = cf_open(path, DC_CACHE_RW); /* the file exists */
    CHECK(c0 != NULL);
    dc_cache_close(c0);
    dc_cache_test_fail_stores(1);
    enum { KEYS = 6 };
    double t0 = cf_now_s();
    pid_t kids[CF_NPROC];
    for (int p = 0; p < CF_NPROC; p++) {
        kids[p] = fork();
        CHECK(kids[p] >= 0);
        if (kids[p] == 0) {
            setenv("DCPTOPK_LOG", "quiet", 1);
            dc_cache *c = cf_open(path, DC_CACHE_RW);
            if (!c || dc_cache_is_memory(c))
                _exit(11);
            uint64_t before = dc_cache_process_compiles();
            for (int round = 0; round < 2; round++)
                for (int i = 0; i < KEYS; i++) {
                    char tag[16];
                    snprintf(tag, sizeof tag, "full%d", (i + p) % KEYS);
                    cf_job j = cf_job_of(tag);
                    j.sleep_ms = 50;
                    j.log = log;
                    dc_cache_hit hit;
                    int compiled;
                    if (cf_get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS ||
                        !cf_hit_is(&hit, tag, 0))
                        _exit(12);
                    dc_cache_hit_free(&hit);
                }
            uint64_t n = dc_cache_process_compiles() - before;
            dc_cache_close(c);
            _exit(n == KEYS ? 0 : 20 + (int)n);
        }
    }
    dc_cache_test_fail_stores(0);
    for (int p = 0; p < CF_NPROC; p++) {
        int status = 0;
        CHECK_EQ(waitpid(kids[p], &status, 0), kids[p]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %d: status 0x%x (20 + n: compiled n times)", p,
                  status);
    }
    double took = cf_now_s() - t0;
    CHECK_EQ(cf_count_lines(log, " "), CF_NPROC * KEYS);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 0);
    /* 6 compiles of 50 ms each per process, side by side: far below one
     * claim timeout (30 s). */
    CHECK_MSG(took < 10.0, "took %.1f s", took);
}

/* ------------------------------------------------- a really full disk */

/* Writes zeros to `file` until the file system has no byte left. */
static int fill_disk(const char *file)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    static const char zeros[4096];
    for (size_t chunk = sizeof zeros; chunk;) {
        ssize_t w = write(fd, zeros, chunk);
        if (w < 0 && errno == ENOSPC)
            chunk /= 2;
        else if (w < 0 && errno != EINTR)
            break;
    }
    close(fd);
    return 0;
}

static const char *filler_path;

/* The disk fills while the key is claimed and compiled (as a peer's
 * stores would fill it). */
static dcptopk_result fill_then_compile(void *user, dc_cache_blobs *out,
                                        char *err, size_t err_size)
{
    if (fill_disk(filler_path) != 0)
        abort();
    return cf_compile(user, out, err, err_size);
}

static void full_disk_body(const char *dir, const char *mnt)
{
    char path[600], filler[600], zeros[33], host[256], hex[33];
    cf_path(path, sizeof path, mnt, "c.sqlite");
    cf_path(filler, sizeof filler, mnt, "filler");
    filler_path = filler;
    CHECK_EQ(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';
    pid_t dead = fork();
    CHECK(dead >= 0);
    if (dead == 0)
        _exit(0);
    int st = 0;
    CHECK(waitpid(dead, &st, 0) == dead);

    /* The holder: the disk fills during its compile, its store fails with
     * SQLITE_FULL, and its claim is still released. */
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_capture_begin(dir);
    cf_job j = cf_job_of("fills-the-disk");
    j.cubin_size = 1 << 20;
    dc_cache_hit hit;
    int compiled = 0;
    char err[1024] = "";
    dcptopk_result r = dc_cache_get_or_compile(
        c, cf_key(j.tag), &cf_meta, fill_then_compile, cf_release, &j, &hit,
        &compiled, err, sizeof err);
    char text[4096];
    cf_capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_CONTAINS(text, "full");
    cf_key_hex(j.tag, hex);
    CHECK_EQ(cf_rows_of(path, "claims", hex), 0);

    /* A dead holder's claim on a full disk: not in progress for stats,
     * and clear-stale removes it. */
    dc_cache_close(c);
    CHECK_EQ(unlink(filler), 0);
    c = cf_open(path, DC_CACHE_RW); /* the reserve again */
    CHECK(c != NULL);
    snprintf(zeros, sizeof zeros, "%032d", 0);
    CHECK_EQ(cf_plant_claim(path, zeros, (long)dead, host, 7, cf_wall_ms()),
             -1);
    CHECK_EQ(fill_disk(filler), 0);
    dcptopk_cache *h = NULL;
    CHECK_EQ(dcptopk_cache_open(path, 0, &h), DCPTOPK_SUCCESS);
    dcptopk_cache_stats stats = DCPTOPK_CACHE_STATS_INIT;
    CHECK_EQ(dcptopk_cache_stats_get(h, &stats), DCPTOPK_SUCCESS);
    CHECK_EQ(stats.claims, 0);
    int64_t removed = -1;
    r = dcptopk_cache_clear_stale_claims(h, &removed);
    CHECK_MSG(r == DCPTOPK_SUCCESS, "clear stale: %s",
              dcptopk_cache_last_error(h));
    CHECK_EQ(removed, 1);
    dcptopk_cache_close(h);
    dc_cache_close(c);
    CHECK_EQ(cf_rows_of(path, "claims", zeros), 0);
}

/* A real full disk: a 3 MiB tmpfs (root only; skipped elsewhere). */
TEST(full_disk_releases_claims_and_clears_stale_ones)
{
    if (geteuid() != 0)
        SKIP("mounting a small tmpfs needs root");
    char mnt[512];
    const char *dir = cf_dir();
    cf_path(mnt, sizeof mnt, dir, "tmpfs");
    CHECK(mkdir(mnt, 0700) == 0 || errno == EEXIST);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=3m,mode=0700") != 0)
        SKIP("cannot mount a tmpfs at %s (%s)", mnt, strerror(errno));
    full_disk_body(dir, mnt);
    if (umount2(mnt, MNT_DETACH) != 0)
        fprintf(stderr, "umount %s: %s\n", mnt, strerror(errno));
}
