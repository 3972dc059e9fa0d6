/*
 * test_cache.c - the SQLite compile cache (cache/): key derivation, hits and
 * misses, 8 processes warming the same keys, a claimant killed mid-compile,
 * stale claims, corrupted blobs and files, read-only and full stores, the
 * size cap, file versions and other programs' databases, compile failures;
 * hit counting in table usage (a few bytes per hit).
 *
 * Every test works in its own directory under /tmp. Expected blobs come from
 * dc_test_blob() below, never from the cache.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache.h"
#include "fake_blobs.h"
#include "harness.h"

/* ---------------------------------------------------------------- helpers */

static char tmp_root[256];

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    chmod(p, 0700);
    return remove(p);
}

static void cleanup(void)
{
    if (tmp_root[0]) {
        chmod(tmp_root, 0700);
        nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

/* A fresh directory for this test; removed at exit. */
static const char *test_dir(void)
{
    static int registered;
    cleanup(); /* the previous test's, when all run in one process */
    snprintf(tmp_root, sizeof tmp_root, "/tmp/dcptopk-cache-test-XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        exit(1);
    }
    if (!registered)
        atexit(cleanup);
    registered = 1;
    return tmp_root;
}

static void path_in(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The bytes a compile of `tag` produces: deterministic, `size` long. */
typedef struct job {
    const char *tag;
    size_t cubin_size;   /* 0 = 4096                                  */
    int sleep_ms;        /* inside the callback                       */
    const char *log;     /* appended "<tag> <pid>\n" with O_APPEND    */
    int fail;            /* return DCPTOPK_NVRTC_ERROR                */
    int notify_fd;       /* >= 0: write one byte when compiling starts */
    int wait_fd;         /* >= 0: then read one byte before going on    */
    int calls;           /* times the callback ran                      */
    int released;
    unsigned char *buf[3];
} job;

static dcptopk_result job_compile(void *user, dc_cache_blobs *out, char *err,
                                  size_t err_size)
{
    job *j = user;
    j->calls++;
    if (j->notify_fd >= 0) {
        char b = 'c';
        if (write(j->notify_fd, &b, 1) != 1)
            abort();
    }
    if (j->wait_fd >= 0) {
        char b;
        if (read(j->wait_fd, &b, 1) != 1)
            abort();
    }
    if (j->log) {
        int fd = open(j->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            char line[128];
            int n = snprintf(line, sizeof line, "%s %d\n", j->tag,
                             (int)getpid());
            if (write(fd, line, (size_t)n) != n)
                abort();
            close(fd);
        }
    }
    if (j->sleep_ms)
        sleep_ms(j->sleep_ms);
    if (j->fail) {
        snprintf(err, err_size, "test compile of %s failed", j->tag);
        return DCPTOPK_NVRTC_ERROR;
    }
    const size_t sizes[3] = {j->cubin_size ? j->cubin_size : 4096, 777, 1234};
    dc_test_blobs_make(j->tag, sizes, j->buf, out);
    out->compile_ms = 0.0;
    return DCPTOPK_SUCCESS;
}

static void job_release(void *user, dc_cache_blobs *b)
{
    job *j = user;
    (void)b;
    dc_test_blobs_free(j->buf);
    j->released++;
}

static job job_of(const char *tag)
{
    job j;
    memset(&j, 0, sizeof j);
    j.tag = tag;
    j.notify_fd = -1;
    j.wait_fd = -1;
    return j;
}

static dc_hash key_of(const char *tag)
{
    dc_hasher *h = dc_hasher_new();
    dc_hasher_str(h, "tag", tag);
    dc_hash k = dc_hasher_digest(h);
    dc_hasher_free(h);
    return k;
}

static const dc_cache_meta test_meta = {"select", "topk=2048,local_topk=384",
                                        "sm_90a", "13.0", "0.1.0"};

/* Whether a hit holds exactly the bytes a compile of `tag` makes. */
static int hit_is(const dc_cache_hit *hit, const char *tag, size_t cubin_size)
{
    if (!cubin_size)
        cubin_size = 4096;
    unsigned char *want = malloc(cubin_size > 777 ? cubin_size : 777);
    int ok = hit->cubin_size == cubin_size && hit->ptx_size == 777;
    if (ok) {
        dc_test_blob(tag, 0, cubin_size, want);
        ok = memcmp(hit->cubin, want, cubin_size) == 0 &&
             ((const char *)hit->cubin)[cubin_size] == '\0';
    }
    if (ok) {
        dc_test_blob(tag, 1, 777, want);
        ok = memcmp(hit->ptx, want, 777) == 0 &&
             ((const char *)hit->ptx)[777] == '\0';
    }
    free(want);
    return ok;
}

/* get_or_compile of `tag`; returns the result, *compiled set. */
static dcptopk_result get(dc_cache *c, job *j, dc_cache_hit *hit,
                          int *compiled)
{
    char err[1024] = "";
    dcptopk_result r =
        dc_cache_get_or_compile(c, key_of(j->tag), &test_meta, job_compile,
                                job_release, j, hit, compiled, err, sizeof err);
    if (r != DCPTOPK_SUCCESS)
        fprintf(stderr, "get_or_compile(%s): %s: %s\n", j->tag,
                dcptopk_result_name(r), err);
    return r;
}

static dc_cache *open_cache(const char *path, dc_cache_open_mode mode)
{
    dc_cache *c = NULL;
    char err[1024] = "";
    if (dc_cache_open(path, mode, &c, err, sizeof err) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "dc_cache_open(%s): %s\n", path, err);
        return NULL;
    }
    return c;
}

/* Runs one SQL statement on the file directly (as a user with sqlite3 would).
 * Returns the first column of the first row as an integer (or -1). */
static int64_t sql_on(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int64_t v = -1;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return -2;
    }
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        else if (s != SQLITE_DONE) {
            fprintf(stderr, "sql_on(%s): %s\n", sql, sqlite3_errmsg(db));
            v = -3;
        }
    } else {
        fprintf(stderr, "sql_on(%s): %s\n", sql, sqlite3_errmsg(db));
        v = -3;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* stderr capture, to count warnings. */
static int saved_stderr = -1;
static char capture_path[512];

static void capture_begin(const char *dir)
{
    path_in(capture_path, sizeof capture_path, dir, "stderr.txt");
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
}

/* Ends the capture, echoes what was captured, returns the number of
 * "dcptopk: warning:" lines. */
static int capture_end(char *text, size_t size)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    FILE *f = fopen(capture_path, "r");
    int warnings = 0;
    size_t used = 0;
    char line[4096];
    if (text && size)
        text[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        fputs(line, stderr);
        if (strncmp(line, "dcptopk: warning:", 17) == 0)
            warnings++;
        if (text && used + strlen(line) + 1 < size) {
            memcpy(text + used, line, strlen(line) + 1);
            used += strlen(line);
        }
    }
    if (f)
        fclose(f);
    return warnings;
}

static int count_lines_with(const char *file, const char *needle)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

static int count_files_with(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, needle))
            n++;
    if (d)
        closedir(d);
    return n;
}

/* ------------------------------------------------------------------- keys */

/* Writes the canonical serialisation by hand: (u64le name length, name,
 * u64le value length, value) per field. */
static size_t ser_field(unsigned char *buf, size_t at, const char *name,
                        const void *value, size_t n)
{
    uint64_t lens[2] = {strlen(name), n};
    const void *parts[2] = {name, value};
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < 8; i++)
            buf[at++] = (unsigned char)(lens[p] >> (8 * i));
        memcpy(buf + at, parts[p], lens[p]);
        at += lens[p];
    }
    return at;
}

TEST(key_matches_hand_serialisation)
{
    unsigned char buf[512];
    size_t at = 0;
    unsigned char ver[8] = {DC_CACHE_SCHEMA_VERSION, 0, 0, 0, 0, 0, 0, 0};
    at = ser_field(buf, at, "dcptopk.cache.schema", ver, 8);
    at = ser_field(buf, at, "template", "abc", 3);
    unsigned char i64[8] = {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    at = ser_field(buf, at, "topk", i64, 8); /* -2 */
    at = ser_field(buf, at, "empty", "", 0);
    XXH128_hash_t want = XXH3_128bits(buf, at);

    dc_hasher *h = dc_hasher_new();
    CHECK(h != NULL);
    dc_hasher_str(h, "template", "abc");
    dc_hasher_i64(h, "topk", -2);
    dc_hasher_bytes(h, "empty", NULL, 0);
    dc_hash got = dc_hasher_digest(h);
    dc_hasher_free(h);
    CHECK(got.hi == want.high64);
    CHECK(got.lo == want.low64);

    char hex[33], expect[33];
    dc_hash_hex(got, hex);
    snprintf(expect, sizeof expect, "%016llx%016llx",
             (unsigned long long)want.high64, (unsigned long long)want.low64);
    CHECK_STR_EQ(hex, expect);
    dc_hash back;
    CHECK_EQ(dc_hash_parse(hex, &back), 0);
    CHECK(back.hi == got.hi && back.lo == got.lo);
    expect[0] = 'G';
    CHECK_NE(dc_hash_parse(expect, &back), 0);
    CHECK_NE(dc_hash_parse("abcd", &back), 0);
    char longer[40];
    snprintf(longer, sizeof longer, "%s0", hex);
    CHECK_NE(dc_hash_parse(longer, &back), 0);
}

TEST(key_fields_do_not_alias)
{
    /* ("ab","c") vs ("a","bc") and field order must give different keys. */
    dc_hasher *a = dc_hasher_new(), *b = dc_hasher_new();
    dc_hasher_str(a, "ab", "c");
    dc_hasher_str(b, "a", "bc");
    dc_hash ha = dc_hasher_digest(a), hb = dc_hasher_digest(b);
    CHECK(ha.hi != hb.hi || ha.lo != hb.lo);
    dc_hasher_free(a);
    dc_hasher_free(b);
    a = dc_hasher_new();
    b = dc_hasher_new();
    dc_hasher_i64(a, "x", 1);
    dc_hasher_i64(a, "y", 2);
    dc_hasher_i64(b, "y", 2);
    dc_hasher_i64(b, "x", 1);
    ha = dc_hasher_digest(a);
    hb = dc_hasher_digest(b);
    CHECK(ha.hi != hb.hi || ha.lo != hb.lo);
    /* The digest does not consume the state: same value twice. */
    dc_hash again = dc_hasher_digest(a);
    CHECK(again.hi == ha.hi && again.lo == ha.lo);
    dc_hasher_free(a);
    dc_hasher_free(b);
}

/* --------------------------------------------------------- hit and miss */

TEST(hit_and_miss)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "sub/dir/c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_EQ(dc_cache_is_readonly(c), 0);
    CHECK_STR_EQ(dc_cache_path(c), path);

    uint64_t before = dc_cache_process_compiles();
    job j = job_of("alpha");
    dc_cache_hit hit;
    int compiled = -1;
    CHECK_EQ(dc_cache_contains(c, key_of("alpha")), 0);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    CHECK_EQ(j.released, 1);
    CHECK(hit_is(&hit, "alpha", 0));
    dc_cache_hit_free(&hit);
    CHECK_EQ(dc_cache_process_compiles() - before, 1);
    CHECK_EQ(dc_cache_contains(c, key_of("alpha")), 1);
    CHECK_EQ(dc_cache_contains(c, key_of("beta")), 0);

    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "alpha", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);

    /* Another handle (as another process would) hits too. */
    c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "alpha", 0));
    dc_cache_hit_free(&hit);
    job k = job_of("beta");
    CHECK_OK(get(c, &k, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "beta", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(dc_cache_process_compiles() - before, 2);

    /* What is in the file, read with plain SQLite. */
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 2);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(sql_on(path, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
    char hex[33], sql[256];
    dc_hash_hex(key_of("alpha"), hex);
    /* Hits go to table usage; the entries row is never rewritten. */
    snprintf(sql, sizeof sql, "SELECT hits FROM usage WHERE key='%s'", hex);
    CHECK_EQ(sql_on(path, sql), 2);
    snprintf(sql, sizeof sql,
             "SELECT hits = 0 AND last_used = created FROM entries WHERE "
             "key='%s'",
             hex);
    CHECK_EQ(sql_on(path, sql), 1);
    snprintf(sql, sizeof sql,
             "SELECT size FROM entries WHERE key='%s' AND kernel='select' AND "
             "arch='sm_90a' AND nvrtc_version='13.0' AND lib_version='0.1.0' "
             "AND fields='topk=2048,local_topk=384'",
             hex);
    CHECK_EQ(sql_on(path, sql), 4096 + 777 + 1234);
}

TEST(memory_mode)
{
    dc_cache *c = open_cache(NULL, DC_CACHE_MEMORY);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 1);
    job j = job_of("mem");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "mem", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
}

TEST(compile_failure_releases_claim)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("broken");
    j.fail = 1;
    dc_cache_hit hit;
    int compiled = -1;
    char err[256] = "";
    dcptopk_result r = dc_cache_get_or_compile(
        c, key_of("broken"), &test_meta, job_compile, job_release, &j, &hit,
        &compiled, err, sizeof err);
    CHECK_EQ(r, DCPTOPK_NVRTC_ERROR);
    CHECK_CONTAINS(err, "test compile of broken failed");
    CHECK_EQ(compiled, 0);
    CHECK_EQ(j.released, 1);
    CHECK(hit.cubin == NULL && hit.ptx == NULL);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 0);
    /* The next call compiles again, without waiting on a claim. */
    j.fail = 0;
    double t0 = now_s();
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK(now_s() - t0 < 2.0);
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "broken", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
}

/* ------------------------------------------------------ 8 processes at once */

#define NPROC 8
#define NKEYS 4

TEST(eight_processes_compile_each_key_once)
{
    const char *dir = test_dir();
    char path[512], log[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    path_in(log, sizeof log, dir, "compiles.log");
    static const char *const tags[NKEYS] = {"k0", "k1", "k2", "k3"};
    int go[2];
    CHECK_EQ(pipe(go), 0);
    pid_t kids[NPROC];
    for (int p = 0; p < NPROC; p++) {
        kids[p] = fork();
        CHECK(kids[p] >= 0);
        if (kids[p] == 0) {
            /* Child: wait for the start signal, then warm every key in a
             * rotated order; exit 0 only if every hit has the right bytes. */
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) != 0)
                _exit(10);
            dc_cache *c = open_cache(path, DC_CACHE_RW);
            if (!c || dc_cache_is_memory(c) || dc_cache_is_readonly(c))
                _exit(11);
            char out[512];
            snprintf(out, sizeof out, "%s/child%d.txt", dir, p);
            FILE *f = fopen(out, "w");
            for (int i = 0; i < NKEYS; i++) {
                const char *tag = tags[(i + p) % NKEYS];
                job j = job_of(tag);
                j.sleep_ms = 100;
                j.log = log;
                dc_cache_hit hit;
                int compiled;
                if (get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS)
                    _exit(12);
                if (!hit_is(&hit, tag, 0))
                    _exit(13);
                fprintf(f, "%s %016llx\n", tag,
                        (unsigned long long)XXH3_64bits(hit.cubin,
                                                        hit.cubin_size));
                dc_cache_hit_free(&hit);
            }
            fclose(f);
            dc_cache_close(c);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]); /* every child starts now */
    for (int p = 0; p < NPROC; p++) {
        int status = 0;
        CHECK_EQ(waitpid(kids[p], &status, 0), kids[p]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %d: status 0x%x", p, status);
    }
    /* Exactly one compile per key, over all processes. */
    for (int i = 0; i < NKEYS; i++) {
        char needle[16];
        snprintf(needle, sizeof needle, "%s ", tags[i]);
        CHECK_MSG(count_lines_with(log, needle) == 1,
                  "key %s compiled %d times", tags[i],
                  count_lines_with(log, needle));
    }
    CHECK_EQ(count_lines_with(log, " "), NKEYS);
    /* Every process read identical bytes for each key. */
    for (int i = 0; i < NKEYS; i++) {
        char first[128] = "";
        for (int p = 0; p < NPROC; p++) {
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
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), NKEYS);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(sql_on(path, "SELECT sum(hits) FROM entries") <=
                 NPROC * NKEYS - NKEYS,
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
        dc_cache *c = open_cache(path, DC_CACHE_RW);
        if (!c)
            _exit(20);
        job j = job_of(tag);
        j.notify_fd = p[1];
        j.sleep_ms = 60000;
        dc_cache_hit hit;
        int compiled;
        get(c, &j, &hit, &compiled);
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
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    /* A long claim timeout: the takeover must come from seeing the
     * claimant dead, not from the timeout. */
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "60", 1);
    pid_t kid = child_claiming(path, "orphan");
    CHECK(kid > 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 1);
    CHECK_EQ(sql_on(path, "SELECT pid FROM claims"), kid);
    CHECK_EQ(kill(kid, SIGKILL), 0);
    int status = 0;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK(WIFSIGNALED(status));

    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("orphan");
    dc_cache_hit hit;
    int compiled;
    double t0 = now_s();
    CHECK_OK(get(c, &j, &hit, &compiled));
    double took = now_s() - t0;
    CHECK_MSG(took < 3.0, "took %.2f s", took);
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "orphan", 0));
    dc_cache_hit_free(&hit);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    dc_cache_close(c);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
}

TEST(live_claimant_waited_for_then_stale_claim_taken_over)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "1.5", 1);
    /* The child stays alive (stopped) holding the claim: we wait for the
     * timeout, then take over. */
    pid_t kid = child_claiming(path, "slow");
    CHECK(kid > 0);
    kill(kid, SIGSTOP);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("slow");
    dc_cache_hit hit;
    int compiled;
    double t0 = now_s();
    dcptopk_result r = get(c, &j, &hit, &compiled);
    double took = now_s() - t0;
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    CHECK_OK(r);
    CHECK_MSG(took >= 1.0 && took < 6.0, "took %.2f s", took);
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "slow", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
}

TEST(claim_of_another_host_goes_stale)
{
    const char *dir = test_dir();
    char path[512], sql[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "1", 1);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    char hex[33];
    dc_hash_hex(key_of("remote"), hex);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    /* pid 1 exists here, but on "elsewhere" we cannot know: wait. */
    snprintf(sql, sizeof sql,
             "INSERT INTO claims(key, pid, host, token, started) VALUES('%s',"
             " 1, 'elsewhere.invalid', 7, %lld)",
             hex, now_ms);
    CHECK_EQ(sql_on(path, sql), -1);
    job j = job_of("remote");
    dc_cache_hit hit;
    int compiled;
    double t0 = now_s();
    CHECK_OK(get(c, &j, &hit, &compiled));
    double took = now_s() - t0;
    CHECK_MSG(took >= 0.8 && took < 5.0, "took %.2f s", took);
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
}

/* --------------------------------------------------------------- damage */

TEST(corrupted_blob_is_deleted_and_recompiled)
{
    const char *dir = test_dir();
    char path[512], sql[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("victim");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    char hex[33];
    dc_hash_hex(key_of("victim"), hex);
    /* Same length, different bytes. */
    snprintf(sql, sizeof sql,
             "UPDATE entries SET cubin = zeroblob(4096) WHERE key='%s'", hex);
    CHECK_EQ(sql_on(path, sql), -1);

    capture_begin(dir);
    uint64_t before = dc_cache_process_compiles();
    dcptopk_result r = get(c, &j, &hit, &compiled);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(compiled, 1);
    CHECK_EQ(dc_cache_process_compiles() - before, 1);
    CHECK(hit_is(&hit, "victim", 0)); /* never the zero bytes */
    dc_cache_hit_free(&hit);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "checksum");
    CHECK_CONTAINS(text, hex);
    /* The row was replaced by a good one: a hit now. */
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "victim", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
}

static void write_garbage(const char *path, long offset, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        return;
    char *g = malloc(n);
    for (size_t i = 0; i < n; i++)
        g[i] = (char)("garbage!"[i % 8] ^ (char)(i >> 3));
    if (pwrite(fd, g, n, offset) != (ssize_t)n)
        perror("pwrite");
    free(g);
    close(fd);
}

TEST(corrupted_file_is_moved_aside)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("first");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    write_garbage(path, 0, 16384);

    capture_begin(dir);
    c = open_cache(path, DC_CACHE_RW);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, ".corrupt-");
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_EQ(dc_cache_is_readonly(c), 0);
    CHECK_EQ(count_files_with(dir, "c.sqlite.corrupt-"), 1);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "first", 0));
    dc_cache_hit_free(&hit);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 1);
}

TEST(malformed_pages_found_later_are_recovered)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    static const char *const tags[] = {"m0", "m1", "m2", "m3", "m4"};
    dc_cache_hit hit;
    int compiled;
    for (int i = 0; i < 5; i++) {
        job j = job_of(tags[i]);
        CHECK_OK(get(c, &j, &hit, &compiled));
        dc_cache_hit_free(&hit);
    }
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "PRAGMA wal_checkpoint(TRUNCATE)"), 0);
    /* Keep page 1 (header and schema), destroy the rest. */
    int64_t page = sql_on(path, "PRAGMA page_size");
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    CHECK(st.st_size > 2 * page);
    write_garbage(path, (long)page, (size_t)(st.st_size - page));

    c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    capture_begin(dir);
    job j = job_of("m2");
    dcptopk_result r = get(c, &j, &hit, &compiled);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "m2", 0));
    dc_cache_hit_free(&hit);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, ".corrupt-");
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
}

TEST(other_file_version_is_moved_aside)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    char sql[128];
    CHECK_EQ(sql_on(path, "CREATE TABLE entries(x)"), -1);
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d",
             DC_CACHE_APPLICATION_ID);
    CHECK_EQ(sql_on(path, sql), -1);
    CHECK_EQ(sql_on(path, "PRAGMA user_version=99"), -1);
    capture_begin(dir);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "another file version");
    CHECK_EQ(count_files_with(dir, "c.sqlite.old-"), 1);
    job j = job_of("new");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
}

TEST(another_programs_database_is_left_untouched)
{
    /* `cache verify --cache app.db` once switched another program's
     * database to WAL and renamed it. Its bytes, name and journal mode
     * must stay as they are; the cache runs in memory. */
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "app.db");
    CHECK_EQ(sql_on(path, "CREATE TABLE accounts(id INTEGER, name TEXT)"),
             -1);
    CHECK_EQ(sql_on(path, "INSERT INTO accounts VALUES(1, 'a')"), -1);
    struct stat before, after;
    CHECK_EQ(stat(path, &before), 0);
    capture_begin(dir);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK(dc_cache_is_memory(c));
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "not a dcptopk cache");
    dc_cache_close(c);
    CHECK_EQ(stat(path, &after), 0);
    CHECK_EQ(after.st_ino, before.st_ino);
    CHECK_EQ(after.st_size, before.st_size);
    CHECK_EQ(count_files_with(dir, "app.db."), 0);
    CHECK_EQ(count_files_with(dir, "app.db-wal"), 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM accounts"), 1);
    /* A maintenance open refuses it, saying why. */
    char err[1024] = "";
    dc_cache *s = NULL;
    CHECK_EQ(dc_cache_open(path, (dc_cache_open_mode)(DC_CACHE_RW |
                                                      DC_CACHE_STRICT),
                           &s, err, sizeof err),
             DCPTOPK_CACHE_ERROR);
    CHECK_CONTAINS(err, "not a dcptopk cache");
    CHECK_EQ(count_files_with(dir, "app.db."), 0);
}

/* ------------------------------------------------------------ read-only */

TEST(readonly_mode_never_writes)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("stored");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);

    capture_begin(dir);
    c = open_cache(path, DC_CACHE_RO);
    int warnings = capture_end(NULL, 0);
    CHECK(c != NULL);
    CHECK_EQ(warnings, 0);
    CHECK_EQ(dc_cache_is_readonly(c), 1);
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "stored", 0));
    dc_cache_hit_free(&hit);
    job k = job_of("unstored");
    CHECK_OK(get(c, &k, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    CHECK(hit_is(&hit, "unstored", 0));
    dc_cache_hit_free(&hit);
    CHECK_OK(get(c, &k, &hit, &compiled));
    CHECK_EQ(compiled, 1); /* still not stored */
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 1);
    CHECK_EQ(sql_on(path, "SELECT hits FROM entries"), 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
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
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    if (!c)
        return 31;
    if (has_file && (!dc_cache_is_readonly(c) || dc_cache_is_memory(c)))
        return 32;
    if (!has_file && !dc_cache_is_memory(c))
        return 33;
    job j = job_of("shipped");
    dc_cache_hit hit;
    int compiled;
    if (get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS)
        return 34;
    if (compiled != !has_file || !hit_is(&hit, "shipped", 0))
        return 35;
    dc_cache_hit_free(&hit);
    job k = job_of("new-here");
    if (get(c, &k, &hit, &compiled) != DCPTOPK_SUCCESS || compiled != 1 ||
        !hit_is(&hit, "new-here", 0))
        return 36;
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    return 0;
}

TEST(readonly_directory_falls_back)
{
    const char *dir = test_dir();
    char rodir[512], path[600], missing[600], errfile[512];
    path_in(rodir, sizeof rodir, dir, "ro");
    path_in(errfile, sizeof errfile, dir, "child-stderr.txt");
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
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("shipped");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(count_files_with(rodir, "-shm"), 0);
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
        CHECK_EQ(count_lines_with(errfile, "dcptopk: warning:"), 1);
        CHECK_EQ(count_lines_with(errfile,
                                  has_file ? "read-only" : "in memory"),
                 1);
    }
    CHECK_EQ(count_files_with(rodir, "corrupt"), 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 1);
}

/* ---------------------------------------------------------------- full */

TEST(full_store_still_returns_the_blobs)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    int64_t pages = sql_on(path, "PRAGMA page_count");
    CHECK(pages > 0);
    CHECK_EQ(dc_cache_test_set_max_pages(c, pages + 2), SQLITE_OK);
    capture_begin(dir);
    job j = job_of("huge");
    j.cubin_size = 1 << 20;
    dc_cache_hit hit;
    int compiled;
    dcptopk_result r = get(c, &j, &hit, &compiled);
    job k = job_of("huge2");
    k.cubin_size = 1 << 20;
    dc_cache_hit hit2;
    int compiled2;
    dcptopk_result r2 = get(c, &k, &hit2, &compiled2);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_OK(r2);
    CHECK_EQ(compiled, 1);
    CHECK_EQ(compiled2, 1);
    CHECK(hit_is(&hit, "huge", 1 << 20));
    CHECK(hit_is(&hit2, "huge2", 1 << 20));
    dc_cache_hit_free(&hit);
    dc_cache_hit_free(&hit2);
    CHECK_EQ(warnings, 1); /* one per handle, not one per store */
    CHECK_CONTAINS(text, "full");
    CHECK_EQ(j.released, 1);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    /* Space again: the same key stores fine. */
    c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "huge", 1 << 20));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
}

/* ------------------------------------------------------------- size cap */

/* Stores the entries of tags[0 .. n) 5 ms apart, then looks `again` up: a
 * hit, no compile, and `again` becomes the most recently used entry. */
static void store_then_hit(dc_cache *c, const char *const *tags, int n, const char *again)
{
    dc_cache_hit hit;
    int compiled;
    for (int i = 0; i < n; i++) {
        job j = job_of(tags[i]);
        CHECK_OK(get(c, &j, &hit, &compiled));
        dc_cache_hit_free(&hit);
        sleep_ms(5);
    }
    job a = job_of(again);
    CHECK_OK(get(c, &a, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    dc_cache_hit_free(&hit);
}

TEST(size_cap_evicts_least_recently_used)
{
    const char *dir = test_dir();
    char path[512], sql[256], hex[33];
    path_in(path, sizeof path, dir, "c.sqlite");
    const int64_t entry = 4096 + 777 + 1234;
    char cap[64];
    snprintf(cap, sizeof cap, "%lld", (long long)(3 * entry + entry / 2));
    setenv("DCPTOPK_CACHE_MAX_BYTES", cap, 1);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_MAX_BYTES");
    CHECK(c != NULL);
    static const char *const tags[] = {"A", "B", "C", "D", "E"};
    dc_cache_hit hit;
    int compiled;
    store_then_hit(c, tags, 3, "A"); /* A is now the most recent */
    sleep_ms(5);
    job d = job_of("D");
    CHECK_OK(get(c, &d, &hit, &compiled));
    dc_cache_hit_free(&hit);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 3);
    CHECK(sql_on(path, "SELECT sum(size) FROM entries") <= 3 * entry + entry / 2);
    static const char *const kept[] = {"A", "C", "D"};
    for (int i = 0; i < 3; i++) {
        dc_hash_hex(key_of(kept[i]), hex);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM entries WHERE key='%s'", hex);
        CHECK_MSG(sql_on(path, sql) == 1, "%s was evicted", kept[i]);
    }
    dc_hash_hex(key_of("B"), hex);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key='%s'",
             hex);
    CHECK_EQ(sql_on(path, sql), 0);

    /* An entry larger than the cap: kept alone, never itself evicted. */
    job e = job_of("E");
    e.cubin_size = 64 * 1024;
    CHECK_OK(get(c, &e, &hit, &compiled));
    dc_cache_hit_free(&hit);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 1);
    CHECK_OK(get(c, &e, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);

    /* Explicit prune. */
    c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    int64_t removed = -1;
    char err[512];
    CHECK_OK(dc_cache_prune(c, 0, NULL, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    CHECK_EQ(dc_cache_prune(c, -1, NULL, &removed, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "max_bytes = -1");
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 0);
}

TEST(invalidate_removes_one_entry)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("gone");
    job k = job_of("stays");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    dc_cache_hit_free(&hit);
    CHECK_OK(get(c, &k, &hit, &compiled));
    dc_cache_hit_free(&hit);
    CHECK_OK(dc_cache_invalidate(c, key_of("gone")));
    CHECK_EQ(dc_cache_invalidate(c, key_of("gone")), DCPTOPK_NOT_FOUND);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_OK(get(c, &k, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
}

TEST(invalid_arguments)
{
    char err[512] = "";
    dc_cache *c = NULL;
    CHECK_EQ(dc_cache_open("/tmp/x", (dc_cache_open_mode)7, &c, err,
                           sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "mode = 7");
    CHECK_EQ(dc_cache_open("", DC_CACHE_RW, &c, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "path = \"\"");
    CHECK_EQ(dc_cache_open("/tmp/x", DC_CACHE_RW, NULL, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    c = open_cache(NULL, DC_CACHE_MEMORY);
    CHECK(c != NULL);
    dc_cache_hit hit;
    CHECK_EQ(dc_cache_get_or_compile(c, key_of("x"), NULL, NULL, NULL, NULL,
                                     &hit, NULL, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "compile = NULL");
    CHECK_EQ(dc_cache_get_or_compile(NULL, key_of("x"), NULL, job_compile,
                                     NULL, NULL, &hit, NULL, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    dc_cache_close(c);
    dc_cache_close(NULL);
    dc_cache_hit_free(NULL);
}

TEST(default_path_from_environment)
{
    char buf[512];
    const char *saved_dir = getenv("DCPTOPK_CACHE_DIR");
    char keep[512] = "";
    if (saved_dir)
        snprintf(keep, sizeof keep, "%s", saved_dir);
    setenv("DCPTOPK_CACHE_DIR", "/a/b", 1);
    CHECK_EQ(dc_cache_default_path(buf, sizeof buf),
             (int)strlen("/a/b/dcptopk.sqlite"));
    CHECK_STR_EQ(buf, "/a/b/dcptopk.sqlite");
    unsetenv("DCPTOPK_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/x", 1);
    dc_cache_default_path(buf, sizeof buf);
    CHECK_STR_EQ(buf, "/x/dcptopk/dcptopk.sqlite");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/h", 1);
    dc_cache_default_path(buf, sizeof buf);
    CHECK_STR_EQ(buf, "/h/.cache/dcptopk/dcptopk.sqlite");
    unsetenv("HOME");
    CHECK_EQ(dc_cache_default_path(buf, sizeof buf), -1);
    /* Opening the default with nowhere to go: memory, one warning. */
    const char *dir = test_dir();
    capture_begin(dir);
    dc_cache *c = open_cache(NULL, DC_CACHE_RW);
    int warnings = capture_end(NULL, 0);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 1);
    CHECK_EQ(warnings, 1);
    dc_cache_close(c);
    /* And with a directory: created. */
    char sub[512];
    path_in(sub, sizeof sub, dir, "made/here");
    setenv("DCPTOPK_CACHE_DIR", sub, 1);
    c = open_cache(NULL, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_CONTAINS(dc_cache_path(c), "made/here/dcptopk.sqlite");
    dc_cache_close(c);
    if (keep[0])
        setenv("DCPTOPK_CACHE_DIR", keep, 1);
    else
        unsetenv("DCPTOPK_CACHE_DIR");
}

TEST(quiet_log_silences_warnings)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    write_garbage(path, 0, 8192);
    setenv("DCPTOPK_LOG", "quiet", 1);
    capture_begin(dir);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    int warnings = capture_end(NULL, 0);
    unsetenv("DCPTOPK_LOG");
    CHECK(c != NULL);
    CHECK_EQ(warnings, 0);
    CHECK_EQ(count_files_with(dir, "c.sqlite.corrupt-"), 1);
    dc_cache_close(c);
}

TEST(handle_inherited_through_fork_reopens)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job p = job_of("parent");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &p, &hit, &compiled));
    dc_cache_hit_free(&hit);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        job j = job_of("parent");
        if (get(c, &j, &hit, &compiled) || compiled || !hit_is(&hit, "parent", 0))
            _exit(1);
        dc_cache_hit_free(&hit);
        job k = job_of("child");
        if (get(c, &k, &hit, &compiled) || !compiled)
            _exit(2);
        dc_cache_hit_free(&hit);
        dc_cache_close(c);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x",
              status);
    job k = job_of("child");
    CHECK_OK(get(c, &k, &hit, &compiled));
    CHECK_EQ(compiled, 0);
    CHECK(hit_is(&hit, "child", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
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
    sleep_ms(h->hold_ms);
    sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
    h->released_at = now_s();
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
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    int started[2], go[2];
    CHECK_EQ(pipe(started), 0);
    CHECK_EQ(pipe(go), 0);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        /* The claimant: claims, signals, compiles until told to finish. */
        close(started[0]);
        close(go[1]);
        dc_cache *c = open_cache(path, DC_CACHE_RW);
        if (!c)
            _exit(20);
        job j = job_of("held");
        j.notify_fd = started[1];
        j.wait_fd = go[0];
        dc_cache_hit hit;
        int compiled = 0;
        if (get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS || !compiled ||
            !hit_is(&hit, "held", 0))
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
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 1);

    /* Someone else holds the write lock from before the waiter starts. */
    lock_holder h = {NULL, go[1], 300, 0.0};
    CHECK_EQ(sqlite3_open(path, &h.db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(h.db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
             SQLITE_OK);
    setenv("DCPTOPK_CACHE_BUSY_MS", "0", 1);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_BUSY_MS");
    CHECK(c != NULL);
    CHECK(!dc_cache_is_memory(c) && !dc_cache_is_readonly(c));
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, hold_then_release, &h), 0);
    job j = job_of("held");
    dc_cache_hit hit;
    int compiled = -1;
    dcptopk_result r = get(c, &j, &hit, &compiled);
    double seen_at = now_s();
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
    CHECK(hit_is(&hit, "held", 0));
    /* It got the claimant's entry, which exists only after the release. */
    CHECK_MSG(seen_at >= h.released_at, "seen %.3f s before the release",
              h.released_at - seen_at);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 1);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
}

/* ------------------------------------------------------- hits and usage */

/* Bytes of `path`-wal now (0 when there is none). */
static int64_t wal_bytes(const char *path)
{
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat st;
    return stat(wal, &st) == 0 ? (int64_t)st.st_size : 0;
}

TEST(hit_writes_a_few_bytes_into_usage)
{
    const char *dir = test_dir();
    char path[512], path2[512], sql[256], hex[33], err[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    path_in(path2, sizeof path2, dir, "export.sqlite");
    dc_hash_hex(key_of("big"), hex);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    job j = job_of("big");
    j.cubin_size = 1 << 20; /* overflow pages, as a real cubin */
    dc_cache_hit hit;
    int compiled = -1;
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM usage"), 0);

    /* A reader holding a snapshot keeps the WAL from being checkpointed
     * and reset, so its growth is what the hits wrote. Before table usage,
     * the hit that took hits from 1 to 2 (the record grows a byte) rewrote
     * the whole row: over a megabyte. */
    sqlite3 *reader = NULL;
    CHECK_EQ(sqlite3_open(path, &reader), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM entries;",
                          NULL, NULL, NULL),
             SQLITE_OK);
    int64_t wal0 = wal_bytes(path);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(get(c, &j, &hit, &compiled));
        CHECK_EQ(compiled, 0);
        CHECK(hit_is(&hit, "big", j.cubin_size));
        dc_cache_hit_free(&hit);
    }
    int64_t grown = wal_bytes(path) - wal0;
    sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(reader);
    CHECK_MSG(grown <= 3 * 16 * 1024,
              "3 hits wrote %lld bytes into the WAL", (long long)grown);

    snprintf(sql, sizeof sql, "SELECT hits FROM usage WHERE key='%s'", hex);
    CHECK_EQ(sql_on(path, sql), 3);
    CHECK_EQ(sql_on(path, "SELECT hits FROM entries"), 0);
    CHECK_EQ(sql_on(path, "SELECT last_used = created FROM entries"), 1);
    CHECK_EQ(sql_on(path, "SELECT u.last_used >= e.created FROM usage u, "
                          "entries e"),
             1);

    /* Listing, lookup and statistics add them in. */
    dcptopk_cache_entry *v = NULL;
    size_t n = 0;
    CHECK_OK(dc_cache_list(c, &v, &n, err, sizeof err));
    CHECK_EQ(n, 1);
    CHECK_EQ(v[0].hits, 3);
    CHECK(v[0].last_used >= v[0].created);
    free(v);
    dcptopk_cache_entry e;
    CHECK_OK(dc_cache_entry_get(c, hex, &e, err, sizeof err));
    CHECK_EQ(e.hits, 3);
    dcptopk_cache_stats s;
    memset(&s, 0, sizeof s);
    CHECK_OK(dc_cache_stats(c, &s, err, sizeof err));
    CHECK_EQ(s.hits, 3);

    /* An export folds them into the entries row of the new file. */
    int64_t count = 0;
    CHECK_OK(dc_cache_export(c, path2, &count, err, sizeof err));
    CHECK_EQ(count, 1);
    CHECK_EQ(sql_on(path2, "SELECT hits FROM entries"), 3);
    CHECK_EQ(sql_on(path2, "SELECT count(*) FROM usage"), 0);

    /* Removing the entry drops its usage row: stored again, it starts
     * from 0. */
    CHECK_OK(dc_cache_remove(c, hex, err, sizeof err));
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM usage"), 0);
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_OK(dc_cache_entry_get(c, hex, &e, err, sizeof err));
    CHECK_EQ(e.hits, 0);
    dc_cache_close(c);
}

TEST(listing_and_lru_order_use_usage)
{
    const char *dir = test_dir();
    char path[512], sql[256], hex[33], err[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    static const char *const tags[] = {"A", "B", "C"};
    store_then_hit(c, tags, 3, "A"); /* the oldest is now the newest */

    dcptopk_cache_entry *v = NULL;
    size_t n = 0;
    CHECK_OK(dc_cache_list(c, &v, &n, err, sizeof err));
    CHECK_EQ(n, 3);
    static const char *const order[] = {"A", "C", "B"};
    for (size_t i = 0; i < n; i++) {
        dc_hash_hex(key_of(order[i]), hex);
        CHECK_MSG(strcmp(v[i].key, hex) == 0, "listing position %zu is not %s",
                  i, order[i]);
    }
    free(v);

    /* Room for two: B (least recently used) goes, not A (oldest stored). */
    const int64_t entry = 4096 + 777 + 1234;
    int64_t removed = -1;
    CHECK_OK(dc_cache_prune(c, 2 * entry, NULL, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    dc_hash_hex(key_of("B"), hex);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key='%s'",
             hex);
    CHECK_EQ(sql_on(path, sql), 0);
    CHECK_OK(dc_cache_prune(c, entry, NULL, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    dc_hash_hex(key_of("A"), hex);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key='%s'",
             hex);
    CHECK_EQ(sql_on(path, sql), 1);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM usage"), 1);
    dc_cache_close(c);
}

/* The schema of the version before table usage, verbatim. */
static const char old_schema_sql[] =
    "CREATE TABLE IF NOT EXISTS entries("
    " key TEXT PRIMARY KEY NOT NULL,"
    " kernel TEXT NOT NULL, fields TEXT NOT NULL, arch TEXT NOT NULL,"
    " nvrtc_version TEXT NOT NULL, lib_version TEXT NOT NULL,"
    " checksum TEXT NOT NULL, compile_ms REAL NOT NULL,"
    " size INTEGER NOT NULL, created INTEGER NOT NULL,"
    " last_used INTEGER NOT NULL, hits INTEGER NOT NULL,"
    " cubin BLOB, ptx BLOB, source BLOB);"
    "CREATE INDEX IF NOT EXISTS entries_last_used ON entries(last_used);"
    "CREATE TABLE IF NOT EXISTS claims("
    " key TEXT PRIMARY KEY NOT NULL, pid INTEGER NOT NULL,"
    " host TEXT NOT NULL, token INTEGER NOT NULL, started INTEGER NOT NULL);"
    "PRAGMA user_version=1;";

/* Inserts the entry of `tag` as the previous version stored it, with its
 * hits and last use counted in the row. 0 on success. */
static int old_insert(sqlite3 *db, const char *tag, int64_t hits,
                      int64_t last_used_ms)
{
    const size_t sizes[3] = {4096, 777, 1234};
    unsigned char *bufs[3] = {NULL, NULL, NULL};
    dc_cache_blobs b;
    memset(&b, 0, sizeof b);
    dc_test_blobs_make(tag, sizes, bufs, &b);
    char sum[33], hex[33];
    dc_cache_checksum(b.cubin, b.cubin_size, b.ptx, b.ptx_size, b.source,
                      b.source_size, sum);
    dc_hash_hex(key_of(tag), hex);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db,
        "INSERT INTO entries VALUES(?1, 'select', 'topk=2048', 'sm_90a', "
        "'13.0', '0.1.0', ?2, 1.0, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, sum, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 3, 4096 + 777 + 1234);
        sqlite3_bind_int64(st, 4, last_used_ms - 1000);
        sqlite3_bind_int64(st, 5, last_used_ms);
        sqlite3_bind_int64(st, 6, hits);
        sqlite3_bind_blob(st, 7, b.cubin, (int)b.cubin_size, SQLITE_STATIC);
        sqlite3_bind_blob(st, 8, b.ptx, (int)b.ptx_size, SQLITE_STATIC);
        sqlite3_bind_blob(st, 9, b.source, (int)b.source_size, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(st);
    dc_test_blobs_free(bufs);
    return rc;
}

TEST(file_of_the_previous_version_is_moved_aside)
{
    /* The first file version (no table usage, no application_id) is not
     * migrated in place: it is moved aside like any other version, and a
     * new file starts. */
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, old_schema_sql, NULL, NULL, NULL), SQLITE_OK);
    int64_t now = (int64_t)time(NULL) * 1000;
    CHECK_EQ(old_insert(db, "A", 5, now - 1000000), SQLITE_OK);
    sqlite3_close(db);

    capture_begin(dir);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK(!dc_cache_is_memory(c));
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "another file version");
    CHECK_EQ(count_files_with(dir, "c.sqlite.old-"), 1);
    job j = job_of("A");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
    CHECK_EQ(sql_on(path, "PRAGMA application_id"), DC_CACHE_APPLICATION_ID);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM usage"), 0);
}

/* ------------------------------------------------------------------ trust */

/* Stores `tag` in a new cache at `path`, then rewrites its row as an
 * attacker could: other bytes under the same key, with a fresh checksum. */
static int forge_row(const char *path, const char *tag)
{
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    if (!c)
        return -1;
    job j = job_of(tag);
    dc_cache_hit hit;
    int compiled;
    dcptopk_result r = get(c, &j, &hit, &compiled);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    if (r != DCPTOPK_SUCCESS)
        return -1;
    unsigned char evil[4096];
    memset(evil, 0xcc, sizeof evil);
    char sum[33], hex[33];
    dc_cache_checksum(evil, sizeof evil, NULL, 0, NULL, 0, sum);
    dc_hash_hex(key_of(tag), hex);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "UPDATE entries SET cubin=?1, ptx=NULL, "
                                "source=NULL, checksum=?2 WHERE key=?3",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, evil, (int)sizeof evil, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, sum, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, hex, -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(db) == 1
                 ? SQLITE_OK
                 : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

/* Opens `path` and gets `tag`: 1 if the right bytes came back from a fresh
 * compile (the file was not used), 0 if the file served them, -1 if the
 * forged bytes were served or anything failed. *memory = in memory. */
static int served_fresh(const char *path, const char *tag, int *memory)
{
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    if (!c)
        return -1;
    *memory = dc_cache_is_memory(c);
    job j = job_of(tag);
    dc_cache_hit hit;
    int compiled = 0;
    dcptopk_result r = get(c, &j, &hit, &compiled);
    int ok = r == DCPTOPK_SUCCESS && hit_is(&hit, tag, 0);
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    return ok ? compiled : -1;
}

TEST(forged_row_in_a_folder_writable_by_others_is_not_served)
{
    const char *dir = test_dir();
    char sub[512], path[600];
    snprintf(sub, sizeof sub, "%s/shared", dir);
    CHECK_EQ(mkdir(sub, 0700), 0);
    path_in(path, sizeof path, sub, "c.sqlite");
    CHECK_EQ(forge_row(path, "f"), 0);
    /* World-writable (not sticky): anyone could have written the file. */
    CHECK_EQ(chmod(sub, 0777), 0);
    int memory = 0;
    capture_begin(dir);
    int fresh = served_fresh(path, "f", &memory);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "writable by");
    /* Group-writable: refused too, unless the operator opts in. */
    CHECK_EQ(chmod(sub, 0770), 0);
    CHECK_EQ(served_fresh(path, "f", &memory), 1);
    CHECK_EQ(memory, 1);
    setenv("DCPTOPK_CACHE_SHARED", "1", 1);
    int served = served_fresh(path, "f", &memory);
    unsetenv("DCPTOPK_CACHE_SHARED");
    /* Shared: the file is used, and its forged row fails nothing (the
     * checksum was recomputed): this is the trust the opt-in grants. */
    CHECK_EQ(memory, 0);
    CHECK_EQ(served, -1);
    /* Shared never allows world-writable. */
    CHECK_EQ(chmod(sub, 0777), 0);
    setenv("DCPTOPK_CACHE_SHARED", "1", 1);
    fresh = served_fresh(path, "f", &memory);
    unsetenv("DCPTOPK_CACHE_SHARED");
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
}

TEST(file_or_side_file_of_another_user_is_refused)
{
    /* Root counts as a trusted owner, so the planted files are given to
     * another uid with chown (the tests run as root in CI). */
    const char *dir = test_dir();
    char path[512], side[600];
    path_in(path, sizeof path, dir, "c.sqlite");
    CHECK_EQ(forge_row(path, "p"), 0);
    const uid_t other = 65534; /* nobody */
    if (geteuid() == 0) {
        CHECK_EQ(chown(path, other, other), 0);
        int memory = 0;
        capture_begin(dir);
        int fresh = served_fresh(path, "p", &memory);
        char text[4096];
        capture_end(text, sizeof text);
        CHECK_EQ(fresh, 1);
        CHECK_EQ(memory, 1);
        CHECK_CONTAINS(text, "owned by uid 65534");
        CHECK_EQ(chown(path, 0, 0), 0);
    }
    /* Writable by others: refused whoever owns it. */
    CHECK_EQ(chmod(path, 0666), 0);
    int memory = 0;
    CHECK_EQ(served_fresh(path, "p", &memory), 1);
    CHECK_EQ(memory, 1);
    CHECK_EQ(chmod(path, 0600), 0);
    /* A side file planted by someone else. */
    snprintf(side, sizeof side, "%s-journal", path);
    FILE *f = fopen(side, "w");
    CHECK(f != NULL);
    fclose(f);
    CHECK_EQ(chmod(side, 0622), 0);
    CHECK_EQ(served_fresh(path, "p", &memory), 1);
    CHECK_EQ(memory, 1);
    unlink(side);
    /* Everything in order: the (forged) file is used. */
    CHECK_EQ(served_fresh(path, "p", &memory), -1);
    CHECK_EQ(memory, 0);
}

TEST(symlinks_at_the_path_and_side_files_are_refused)
{
    const char *dir = test_dir();
    char path[512], target[512], side[600];
    path_in(path, sizeof path, dir, "c.sqlite");
    path_in(target, sizeof target, dir, "victim");
    /* A link to a file that does not exist yet: a warmup must not create
     * it. */
    CHECK_EQ(symlink(target, path), 0);
    int memory = 0;
    capture_begin(dir);
    int fresh = served_fresh(path, "s", &memory);
    char text[4096];
    capture_end(text, sizeof text);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
    CHECK_CONTAINS(text, "symbolic link");
    struct stat st;
    CHECK(lstat(target, &st) != 0);
    /* A link to an existing file: left as it is. */
    FILE *f = fopen(target, "w");
    CHECK(f != NULL);
    fputs("precious", f);
    fclose(f);
    CHECK_EQ(served_fresh(path, "s", &memory), 1);
    CHECK_EQ(memory, 1);
    CHECK_EQ(stat(target, &st), 0);
    CHECK_EQ(st.st_size, 8);
    unlink(path);
    /* A planted -shm link disables nothing silently: refused, named. */
    CHECK_EQ(forge_row(path, "s"), 0);
    snprintf(side, sizeof side, "%s-shm", path);
    CHECK_EQ(symlink(target, side), 0);
    capture_begin(dir);
    fresh = served_fresh(path, "s", &memory);
    capture_end(text, sizeof text);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
    CHECK_CONTAINS(text, "-shm is a symbolic link");
    CHECK_EQ(stat(target, &st), 0);
    CHECK_EQ(st.st_size, 8);
}

TEST(dev_null_is_refused_and_left_alone)
{
    struct stat st;
    int had_journal = lstat("/dev/null-journal", &st) == 0;
    char err[1024] = "";
    dc_cache *c = NULL;
    CHECK_EQ(dc_cache_open("/dev/null",
                           (dc_cache_open_mode)(DC_CACHE_RW | DC_CACHE_STRICT),
                           &c, err, sizeof err),
             DCPTOPK_CACHE_ERROR);
    CHECK_CONTAINS(err, "not a regular file");
    c = open_cache("/dev/null", DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK(dc_cache_is_memory(c));
    dc_cache_close(c);
    if (!had_journal)
        CHECK(lstat("/dev/null-journal", &st) != 0);
}

TEST(new_file_modes_follow_the_sharing_choice)
{
    const char *dir = test_dir();
    char a[512], sub[512], b[600];
    path_in(a, sizeof a, dir, "private.sqlite");
    mode_t old = umask(002);
    dc_cache *c = open_cache(a, DC_CACHE_RW);
    CHECK(c != NULL && !dc_cache_is_memory(c));
    dc_cache_close(c);
    struct stat st;
    CHECK_EQ(stat(a, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    /* Shared: 0666 less the umask, so the group can write it. */
    snprintf(sub, sizeof sub, "%s/team", dir);
    CHECK_EQ(mkdir(sub, 0770), 0);
    CHECK_EQ(chmod(sub, 02770), 0);
    path_in(b, sizeof b, sub, "c.sqlite");
    setenv("DCPTOPK_CACHE_SHARED", "1", 1);
    c = open_cache(b, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_SHARED");
    umask(old);
    CHECK(c != NULL && !dc_cache_is_memory(c));
    dc_cache_close(c);
    CHECK_EQ(stat(b, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0664);
}

/* ------------------------------------------------------------- recovery */

TEST(recovery_keeps_the_file_a_peer_rebuilt)
{
    /* A handle finds its file damaged after a peer already moved that file
     * aside and started a new one: the new file must stay. */
    const char *dir = test_dir();
    char path[512], peer_moved[600];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    dc_cache_hit hit;
    int compiled;
    static const char *const tags[] = {"r0", "r1", "r2", "r3", "r4"};
    for (int i = 0; i < 5; i++) {
        job j = job_of(tags[i]);
        CHECK_OK(get(c, &j, &hit, &compiled));
        dc_cache_hit_free(&hit);
    }
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "PRAGMA wal_checkpoint(TRUNCATE)"), 0);
    c = open_cache(path, DC_CACHE_RW); /* holds the file about to break */
    CHECK(c != NULL);
    int64_t page = sql_on(path, "PRAGMA page_size");
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    write_garbage(path, (long)page, (size_t)(st.st_size - page));
    /* The peer: moves the damaged file aside, builds a new one. */
    snprintf(peer_moved, sizeof peer_moved, "%s.corrupt-1", path);
    CHECK_EQ(rename(path, peer_moved), 0);
    dc_cache *peer = open_cache(path, DC_CACHE_RW);
    CHECK(peer != NULL && !dc_cache_is_memory(peer));
    job pj = job_of("peer");
    CHECK_OK(get(peer, &pj, &hit, &compiled));
    dc_cache_hit_free(&hit);
    dc_cache_close(peer);
    struct stat rebuilt;
    CHECK_EQ(stat(path, &rebuilt), 0);

    job j = job_of("r2");
    CHECK_OK(get(c, &j, &hit, &compiled));
    CHECK(hit_is(&hit, "r2", 0));
    dc_cache_hit_free(&hit);
    dc_cache_close(c);
    struct stat now;
    CHECK_EQ(stat(path, &now), 0);
    CHECK_EQ(now.st_ino, rebuilt.st_ino);
    CHECK_EQ(count_files_with(dir, ".corrupt-"), 1);
    char sql[128], hex[33];
    dc_hash_hex(key_of("peer"), hex);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key='%s'",
             hex);
    CHECK_EQ(sql_on(path, sql), 1);
}

TEST(processes_recovering_one_damaged_file_keep_every_entry)
{
    /* 8 processes open one damaged file at once; each then stores its own
     * key. One moves the file aside; none throws away the file another
     * rebuilt, so every key is in the final file. */
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("SQLite format 3", f); /* a header, then nothing sensible */
    for (int i = 0; i < 4096; i++)
        fputc(i * 7, f);
    fclose(f);
    int go[2];
    CHECK_EQ(pipe(go), 0);
    pid_t kids[NPROC];
    for (int p = 0; p < NPROC; p++) {
        kids[p] = fork();
        CHECK(kids[p] >= 0);
        if (kids[p] == 0) {
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) != 0)
                _exit(10);
            if (getenv("DC_TEST_LOUD") == NULL) setenv("DCPTOPK_LOG", "quiet", 1);
            dc_cache *c = open_cache(path, DC_CACHE_RW);
            if (!c || dc_cache_is_memory(c)) {
                fprintf(stderr, "child %d: %s\n", p,
                        c ? dc_cache_why(c) : "no handle");
                _exit(11);
            }
            char tag[16];
            snprintf(tag, sizeof tag, "p%d", p);
            job j = job_of(tag);
            dc_cache_hit hit;
            int compiled;
            if (get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS)
                _exit(12);
            dc_cache_hit_free(&hit);
            dc_cache_close(c);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int p = 0; p < NPROC; p++) {
        int status = 0;
        CHECK_EQ(waitpid(kids[p], &status, 0), kids[p]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %d: status 0x%x", p, status);
    }
    CHECK_EQ(count_files_with(dir, ".corrupt-"), 1);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), NPROC);
}

TEST(at_most_three_moved_aside_files_are_kept)
{
    const char *dir = test_dir();
    char path[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    for (int i = 0; i < 5; i++) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        fputs("not a database at all, not even close to one........", f);
        fclose(f);
        capture_begin(dir);
        dc_cache *c = open_cache(path, DC_CACHE_RW);
        char text[4096];
        capture_end(text, sizeof text);
        CHECK(c != NULL && !dc_cache_is_memory(c));
        CHECK_CONTAINS(text, "moved it to");
        dc_cache_close(c);
        unlink(path);
    }
    CHECK_EQ(count_files_with(dir, ".corrupt-"), 3);
}

/* ------------------------------------------------------------ full disk */

TEST(full_disk_compiles_each_key_once_per_process_and_leaves_no_claim)
{
    /* Every store fails as on a full disk (the fault-injection hook is
     * inherited by the children). 8 processes each ask for 6 keys twice
     * (as a warmup's compile phase, then its load phase): each compiles
     * each key exactly once, nobody waits out a claim, no claim is left. */
    const char *dir = test_dir();
    char path[512], log[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    path_in(log, sizeof log, dir, "compiles.log");
    dc_cache *c0 = open_cache(path, DC_CACHE_RW); /* the file exists */
    CHECK(c0 != NULL);
    dc_cache_close(c0);
    dc_cache_test_fail_stores(1);
    enum { KEYS = 6 };
    double t0 = now_s();
    pid_t kids[NPROC];
    for (int p = 0; p < NPROC; p++) {
        kids[p] = fork();
        CHECK(kids[p] >= 0);
        if (kids[p] == 0) {
            setenv("DCPTOPK_LOG", "quiet", 1);
            dc_cache *c = open_cache(path, DC_CACHE_RW);
            if (!c || dc_cache_is_memory(c))
                _exit(11);
            uint64_t before = dc_cache_process_compiles();
            for (int round = 0; round < 2; round++)
                for (int i = 0; i < KEYS; i++) {
                    char tag[16];
                    snprintf(tag, sizeof tag, "full%d", (i + p) % KEYS);
                    job j = job_of(tag);
                    j.sleep_ms = 50;
                    j.log = log;
                    dc_cache_hit hit;
                    int compiled;
                    if (get(c, &j, &hit, &compiled) != DCPTOPK_SUCCESS ||
                        !hit_is(&hit, tag, 0))
                        _exit(12);
                    dc_cache_hit_free(&hit);
                }
            uint64_t n = dc_cache_process_compiles() - before;
            dc_cache_close(c);
            _exit(n == KEYS ? 0 : 20 + (int)n);
        }
    }
    dc_cache_test_fail_stores(0);
    for (int p = 0; p < NPROC; p++) {
        int status = 0;
        CHECK_EQ(waitpid(kids[p], &status, 0), kids[p]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %d: status 0x%x (20 + n: compiled n times)", p,
                  status);
    }
    double took = now_s() - t0;
    CHECK_EQ(count_lines_with(log, " "), NPROC * KEYS);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 0);
    /* 6 compiles of 50 ms each per process, side by side: far below one
     * claim timeout (30 s). */
    CHECK_MSG(took < 10.0, "took %.1f s", took);
}

/* --------------------------------------------------------------- claims */

TEST(future_dated_claim_is_stale)
{
    /* Clock skew between hosts sharing a folder: a claim dated an hour
     * ahead would never reach the timeout. */
    const char *dir = test_dir();
    char path[512], sql[512], hex[33];
    path_in(path, sizeof path, dir, "c.sqlite");
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    dc_hash_hex(key_of("future"), hex);
    long long later = (long long)time(NULL) * 1000 + 3600 * 1000;
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('%s', 1, 'another-host', 7, %lld)",
             hex, later);
    CHECK_EQ(sql_on(path, sql), -1);
    dc_cache_claim *claims = NULL;
    size_t n = 0;
    char err[512];
    CHECK_OK(dc_cache_claims(c, &claims, &n, err, sizeof err));
    CHECK_EQ(n, 1);
    CHECK_EQ(claims[0].stale, 1);
    free(claims);
    double t0 = now_s();
    job j = job_of("future");
    dc_cache_hit hit;
    int compiled;
    CHECK_OK(get(c, &j, &hit, &compiled));
    dc_cache_hit_free(&hit);
    CHECK_EQ(compiled, 1);
    CHECK_MSG(now_s() - t0 < 2.0, "waited %.1f s", now_s() - t0);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims"), 0);
    /* clear_stale removes stale claims and keeps live ones. */
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('aaaa', 1, 'another-host', 7, %lld)",
             later);
    CHECK_EQ(sql_on(path, sql), -1);
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('bbbb', 1, 'another-host', 7, %lld)",
             (long long)time(NULL) * 1000);
    CHECK_EQ(sql_on(path, sql), -1);
    int64_t removed = -1;
    CHECK_OK(dc_cache_claims_clear_stale(c, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM claims WHERE key='bbbb'"), 1);
    dc_cache_close(c);
}

TEST(verify_counts_malformed_keys_and_what_it_could_not_remove)
{
    const char *dir = test_dir();
    char path[512], err[512];
    path_in(path, sizeof path, dir, "c.sqlite");
    CHECK_EQ(forge_row(path, "v"), 0); /* a valid row (forged, but valid) */
    CHECK_EQ(sql_on(path, "INSERT INTO entries SELECT 'not-a-key', kernel, "
                          "fields, arch, nvrtc_version, lib_version, "
                          "checksum, compile_ms, size, created, last_used, "
                          "hits, cubin, ptx, source FROM entries"),
             -1);
    CHECK_EQ(chmod(path, 0400), 0);
    dc_cache *c = open_cache(path, DC_CACHE_RO);
    CHECK(c != NULL);
    int64_t checked = 0, bad = 0, kept = 0;
    CHECK_OK(dc_cache_verify(c, &checked, &bad, &kept, err, sizeof err));
    CHECK_EQ(checked, 2);
    CHECK_EQ(bad, 1);
    CHECK_EQ(kept, 1);
    dc_cache_close(c);
    CHECK_EQ(chmod(path, 0600), 0);
    c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_OK(dc_cache_verify(c, &checked, &bad, &kept, err, sizeof err));
    CHECK_EQ(bad, 1);
    CHECK_EQ(kept, 0);
    dc_cache_close(c);
    CHECK_EQ(sql_on(path, "SELECT count(*) FROM entries"), 1);
}

TEST(a_long_wait_on_a_claim_is_warned_once)
{
    /* A live claimant on another host that never finishes: the waiter
     * says whom it waits for after 5 s, once, and takes the claim over at
     * the timeout (8 s here). */
    const char *dir = test_dir();
    char path[512], sql[512], hex[33];
    path_in(path, sizeof path, dir, "c.sqlite");
    setenv("DCPTOPK_CACHE_CLAIM_TIMEOUT", "8", 1);
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
    CHECK(c != NULL);
    dc_hash_hex(key_of("stuck"), hex);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('%s', 4242, 'build-host-7', 9, %lld)",
             hex, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    CHECK_EQ(sql_on(path, sql), -1);
    capture_begin(dir);
    job j = job_of("stuck");
    dc_cache_hit hit;
    int compiled = 0;
    dcptopk_result r = get(c, &j, &hit, &compiled);
    char text[4096];
    int warnings = capture_end(text, sizeof text);
    CHECK_OK(r);
    dc_cache_hit_free(&hit);
    CHECK_EQ(compiled, 1);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "pid 4242 on host build-host-7");
    CHECK_CONTAINS(text, "cache claims");
    dc_cache_close(c);
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
    return job_compile(user, out, err, err_size);
}

/* Claims of `path` whose key is `hex` (-1 on error). */
static int64_t claims_of(const char *path, const char *hex)
{
    char sql[640];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM claims WHERE key='%s'",
             hex);
    return sql_on(path, sql);
}

static void full_disk_body(const char *dir, const char *mnt)
{
    char path[600], filler[600], sql[512], host[256], hex[33];
    path_in(path, sizeof path, mnt, "c.sqlite");
    path_in(filler, sizeof filler, mnt, "filler");
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
    dc_cache *c = open_cache(path, DC_CACHE_RW);
    CHECK(c != NULL);
    capture_begin(dir);
    job j = job_of("fills-the-disk");
    j.cubin_size = 1 << 20;
    dc_cache_hit hit;
    int compiled = 0;
    char err[1024] = "";
    dcptopk_result r = dc_cache_get_or_compile(
        c, key_of(j.tag), &test_meta, fill_then_compile, job_release, &j, &hit,
        &compiled, err, sizeof err);
    char text[4096];
    capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(compiled, 1);
    dc_cache_hit_free(&hit);
    CHECK_CONTAINS(text, "full");
    dc_hash_hex(key_of(j.tag), hex);
    CHECK_EQ(claims_of(path, hex), 0);

    /* A dead holder's claim on a full disk: not in progress for stats,
     * and clear-stale removes it. */
    dc_cache_close(c);
    CHECK_EQ(unlink(filler), 0);
    c = open_cache(path, DC_CACHE_RW); /* the reserve again */
    CHECK(c != NULL);
    snprintf(sql, sizeof sql,
             "INSERT INTO claims VALUES('%032d', %d, '%s', 7, %lld)", 0,
             (int)dead, host, (long long)time(NULL) * 1000);
    CHECK_EQ(sql_on(path, sql), -1);
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
    snprintf(sql, sizeof sql, "%032d", 0);
    CHECK_EQ(claims_of(path, sql), 0);
}

/* A real full disk: a 3 MiB tmpfs (root only; skipped elsewhere). */
TEST(full_disk_releases_claims_and_clears_stale_ones)
{
    if (geteuid() != 0)
        SKIP("mounting a small tmpfs needs root");
    char mnt[512];
    const char *dir = test_dir();
    path_in(mnt, sizeof mnt, dir, "tmpfs");
    CHECK(mkdir(mnt, 0700) == 0 || errno == EEXIST);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=3m,mode=0700") != 0)
        SKIP("cannot mount a tmpfs at %s (%s)", mnt, strerror(errno));
    full_disk_body(dir, mnt);
    if (umount2(mnt, MNT_DETACH) != 0)
        fprintf(stderr, "umount %s: %s\n", mnt, strerror(errno));
}
