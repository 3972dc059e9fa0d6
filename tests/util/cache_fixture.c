/* cache_fixture.c - the compile-cache tests' fixture (see cache_fixture.h). */
#include "cache_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fake_blobs.h"

/* ---------------------------------------------------------------- folders */

static char tmp_root[256];

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    /* Tests leave read-only folders behind on purpose. */
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

const char *cf_dir(void)
{
    static int registered;
    cleanup();
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

const char *cf_fresh(char *path, size_t size)
{
    const char *dir = cf_dir();
    cf_path(path, size, dir, "c.sqlite");
    return dir;
}

void cf_path(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

double cf_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cf_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------ fake jobs */

const dc_cache_meta cf_meta = {"select", "topk=2048,local_topk=384", "sm_90a",
                               "13.0", "0.1.0"};

static const size_t ptx_size = 777, source_size = 1234;

cf_job cf_job_of(const char *tag)
{
    cf_job j;
    memset(&j, 0, sizeof j);
    j.tag = tag;
    j.notify_fd = -1;
    j.wait_fd = -1;
    return j;
}

dcptopk_result cf_compile(void *user, dc_cache_blobs *out, char *err,
                          size_t err_size)
{
    cf_job *j = user;
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
        /* O_APPEND: the processes of one test share the log. */
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
        cf_sleep_ms(j->sleep_ms);
    if (j->fail) {
        snprintf(err, err_size, "test compile of %s failed", j->tag);
        return DCPTOPK_NVRTC_ERROR;
    }
    const size_t sizes[3] = {j->cubin_size ? j->cubin_size : 4096, ptx_size,
                             source_size};
    dc_test_blobs_make(j->tag, sizes, j->buf, out);
    out->compile_ms = j->compile_ms;
    return DCPTOPK_SUCCESS;
}

void cf_release(void *user, dc_cache_blobs *b)
{
    cf_job *j = user;
    (void)b;
    dc_test_blobs_free(j->buf);
    j->released++;
}

dc_hash cf_key(const char *tag)
{
    dc_hasher *h = dc_hasher_new();
    dc_hasher_str(h, "tag", tag);
    dc_hash k = dc_hasher_digest(h);
    dc_hasher_free(h);
    return k;
}

void cf_key_hex(const char *tag, char hex[33])
{
    dc_hash_hex(cf_key(tag), hex);
}

/* ---------------------------------------------------------------- lookups */

/* Whether data[0 .. size) is blob `which` of `tag`, `want` bytes long. */
static int blob_matches(const void *data, size_t size, const char *tag,
                        int which, size_t want)
{
    if (size != want)
        return 0;
    unsigned char *expect = malloc(want ? want : 1);
    if (!expect)
        abort();
    dc_test_blob(tag, which, want, expect);
    int ok = memcmp(data, expect, want) == 0;
    free(expect);
    return ok;
}

int cf_hit_is(const dc_cache_hit *hit, const char *tag, size_t cubin_size)
{
    if (!cubin_size)
        cubin_size = 4096;
    return blob_matches(hit->cubin, hit->cubin_size, tag, 0, cubin_size) &&
           ((const char *)hit->cubin)[cubin_size] == '\0' &&
           blob_matches(hit->ptx, hit->ptx_size, tag, 1, ptx_size) &&
           ((const char *)hit->ptx)[ptx_size] == '\0';
}

int cf_blob_is(const void *data, size_t size, const char *tag, int which)
{
    const size_t sizes[3] = {4096, ptx_size, source_size};
    return which >= 0 && which < 3 &&
           blob_matches(data, size, tag, which, sizes[which]);
}

dc_cache *cf_open(const char *path, dc_cache_open_mode mode)
{
    dc_cache *c = NULL;
    char err[1024] = "";
    if (dc_cache_open(path, mode, &c, err, sizeof err) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "dc_cache_open(%s): %s\n", path, err);
        return NULL;
    }
    return c;
}

dcptopk_result cf_get(dc_cache *c, cf_job *j, dc_cache_hit *hit,
                      int *compiled)
{
    char err[1024] = "";
    dcptopk_result r = dc_cache_get_or_compile(
        c, cf_key(j->tag), j->meta ? j->meta : &cf_meta, cf_compile,
        cf_release, j, hit, compiled, err, sizeof err);
    if (r != DCPTOPK_SUCCESS)
        fprintf(stderr, "get_or_compile(%s): %s: %s\n", j->tag,
                dcptopk_result_name(r), err);
    return r;
}

dcptopk_result cf_fetch(dc_cache *c, const char *tag, size_t cubin_size,
                        cf_got *got)
{
    cf_job j = cf_job_of(tag);
    j.cubin_size = cubin_size;
    dc_cache_hit hit;
    got->compiled = -1;
    got->bytes_ok = 0;
    dcptopk_result r = cf_get(c, &j, &hit, &got->compiled);
    if (r == DCPTOPK_SUCCESS) {
        got->bytes_ok = cf_hit_is(&hit, tag, cubin_size);
        dc_cache_hit_free(&hit);
    }
    return r;
}

/* ---------------------------------------------------------- the file */

int64_t cf_sql(const char *path, const char *sql)
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
            fprintf(stderr, "cf_sql(%s): %s\n", sql, sqlite3_errmsg(db));
            v = -3;
        }
    } else {
        fprintf(stderr, "cf_sql(%s): %s\n", sql, sqlite3_errmsg(db));
        v = -3;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

int64_t cf_rows_of(const char *path, const char *table, const char *hex)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE key='%s'", table,
             hex);
    return cf_sql(path, sql);
}

int64_t cf_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cf_plant_claim(const char *path, const char *hex, long pid,
                       const char *host, int token, int64_t started_ms)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO claims(key, pid, host, token, started) "
             "VALUES('%s', %ld, '%s', %d, %lld)",
             hex, pid, host, token, (long long)started_ms);
    return cf_sql(path, sql);
}

/* ---------------------------------------------------------- stderr */

static int saved_stderr = -1;
static char capture_path[512];

void cf_capture_begin(const char *dir)
{
    cf_path(capture_path, sizeof capture_path, dir, "stderr.txt");
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
}

int cf_capture_end(char *text, size_t size)
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

int cf_count_lines(const char *file, const char *needle)
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

int cf_count_files(const char *dir, const char *needle)
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

/* ---------------------------------------------------------- forged rows */

/* One lookup of `tag` through a handle of its own on `path`, as a separate
 * run of a program would make it; *memory: the handle ran in memory. */
static dcptopk_result fetch_once(const char *path, const char *tag,
                                 cf_got *got, int *memory)
{
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    if (!c)
        return DCPTOPK_CACHE_ERROR;
    *memory = dc_cache_is_memory(c);
    dcptopk_result r = cf_fetch(c, tag, 0, got);
    dc_cache_close(c);
    return r;
}

int cf_forge_row(const char *path, const char *tag)
{
    cf_got got;
    int memory;
    if (fetch_once(path, tag, &got, &memory) != DCPTOPK_SUCCESS)
        return -1;
    unsigned char evil[4096];
    memset(evil, 0xcc, sizeof evil);
    char sum[33], hex[33];
    dc_cache_checksum(evil, sizeof evil, NULL, 0, NULL, 0, sum);
    cf_key_hex(tag, hex);
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

int cf_served_fresh(const char *path, const char *tag, int *memory)
{
    cf_got got;
    dcptopk_result r = fetch_once(path, tag, &got, memory);
    return r == DCPTOPK_SUCCESS && got.bytes_ok ? got.compiled : -1;
}

int cf_race(int n, int (*child)(int p, void *arg), void *arg)
{
    int go[2];
    if (pipe(go) != 0)
        return n;
    pid_t kids[64];
    int started = 0;
    for (; started < n && started < 64; started++) {
        kids[started] = fork();
        if (kids[started] < 0)
            break;
        if (kids[started] == 0) {
            /* Blocks until the parent closes its end: every child is
             * forked by then. */
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) != 0)
                _exit(10);
            _exit(child(started, arg));
        }
    }
    close(go[0]);
    close(go[1]);
    int bad = n - started;
    for (int p = 0; p < started; p++) {
        int status = 0;
        if (waitpid(kids[p], &status, 0) != kids[p] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child %d: status 0x%x\n", p, status);
            bad++;
        }
    }
    return bad;
}
