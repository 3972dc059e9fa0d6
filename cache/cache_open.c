/*
 * cache_open.c - finding and opening the cache file, with its fallbacks
 * (read-only use, else an in-memory database), moving a damaged file aside,
 * and reopening after fork().
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache_int.h"

/* ------------------------------------------------------------------ paths */

int dc_cache_default_path(char *buf, size_t size)
{
    const char *dir = getenv("DCPTOPK_CACHE_DIR");
    if (dir && *dir)
        return snprintf(buf, size, "%s/dcptopk.sqlite", dir);
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && *xdg)
        return snprintf(buf, size, "%s/dcptopk/dcptopk.sqlite", xdg);
    const char *home = getenv("HOME");
    if (home && *home)
        return snprintf(buf, size, "%s/.cache/dcptopk/dcptopk.sqlite", home);
    if (buf && size)
        buf[0] = '\0';
    return -1;
}

/* mkdir -p of the directory holding `path` (mode 0700: a cache holds code
 * that gets loaded). 0 or an errno. */
static int make_parent_dirs(const char *path)
{
    char dir[DC_CACHE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            *p = '/';
            return e;
        }
        *p = '/';
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return errno;
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    return 0;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* WAL needs shared memory between the processes of one host: it does not
 * work over network file systems ("locking protocol" on Lustre/GPFS). There
 * the default rollback journal is used. DCPTOPK_CACHE_WAL=0/1 overrides. */
static int wal_allowed(const char *path)
{
    const char *env = getenv("DCPTOPK_CACHE_WAL");
    if (env && *env)
        return strcmp(env, "0") != 0;
    char dir[DC_CACHE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    else if (slash)
        dir[1] = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    struct statfs fs;
    if (statfs(dir, &fs) != 0)
        return 1;
    switch ((unsigned long)fs.f_type) {
    case 0x6969UL:     /* NFS       */
    case 0x517BUL:     /* SMB       */
    case 0xFF534D42UL: /* CIFS      */
    case 0xFE534D42UL: /* SMB2      */
    case 0x0BD00BD0UL: /* Lustre    */
    case 0x47504653UL: /* GPFS      */
    case 0x00C36400UL: /* Ceph      */
    case 0x01021997UL: /* 9p        */
    case 0x6B414653UL: /* AFS       */
        return 0;
    default:
        return 1;
    }
}

/* "file:<percent-encoded path>?mode=ro&immutable=1". */
static void immutable_uri(const char *path, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    n += (size_t)snprintf(out, size, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < size;
         p++) {
        unsigned char ch = *p;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') || ch == '/' || ch == '-' || ch == '_' ||
            ch == '.' || ch == '~') {
            out[n++] = (char)ch;
        } else {
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    out[n < size ? n : size - 1] = '\0';
    snprintf(out + strlen(out), size - strlen(out), "?mode=ro&immutable=1");
}

/* ------------------------------------------------------------------- open */

static int busy_ms(void)
{
    const char *env = getenv("DCPTOPK_CACHE_BUSY_MS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end && *end == '\0' && v >= 0 && v <= 3600000)
            return (int)v;
    }
    return 10000;
}

static double claim_timeout_s(void)
{
    const char *env = getenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
    if (env && *env) {
        char *end = NULL;
        double v = strtod(env, &end);
        if (end && *end == '\0' && v >= 0.0 && v <= 86400.0)
            return v;
        dc_cache_warn("ignoring DCPTOPK_CACHE_CLAIM_TIMEOUT=\"%s\" (expected "
                      "seconds, 0..86400): using 30",
                      env);
    }
    return 30.0;
}

/* DCPTOPK_CACHE_MAX_BYTES: an integer with an optional K/M/G/T suffix
 * (powers of 1024); 0 or unset = no cap. */
static int64_t max_bytes_env(void)
{
    const char *env = getenv("DCPTOPK_CACHE_MAX_BYTES");
    if (!env || !*env)
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(env, &end, 10);
    int shift = 0;
    if (end && *end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: shift = -1;
        }
        if (shift > 0 && end[1] && strcmp(end + 1, "B") != 0 &&
            strcmp(end + 1, "iB") != 0)
            shift = -1;
    }
    if (errno || end == env || v < 0 || shift < 0 ||
        (shift && v > (INT64_MAX >> shift))) {
        dc_cache_warn("ignoring DCPTOPK_CACHE_MAX_BYTES=\"%s\" (expected a "
                      "byte count such as 1073741824 or 1G): no size cap",
                      env);
        return 0;
    }
    return (int64_t)v << shift;
}

/* The busy handler of every connection: retries a lock every 0.25, 0.5,
 * 1, then 2 ms until c->busy_limit_ms have passed. sqlite3_busy_timeout()
 * sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then 100 ms per retry, and
 * SQLite's locks are not queued: under contention (processes and warmup
 * threads storing entries, counting hits) a writer that has backed off to
 * 100 ms steps can keep losing the lock to connections that retry sooner,
 * and a delayed store delays every process waiting for that entry. */
static int busy_wait(void *arg, int count)
{
    dc_cache *c = arg;
    double now = dc_cache_mono_ms();
    if (count == 0)
        c->busy_since_ms = now;
    double left = (double)c->busy_limit_ms - (now - c->busy_since_ms);
    if (left <= 0.0)
        return 0;
    long us = count < 3 ? 250L << count : 2000L;
    if ((double)us > left * 1000.0)
        us = (long)(left * 1000.0) + 1;
    dc_cache_sleep_us(us);
    return 1;
}

static int open_db(dc_cache *c, const char *name, int flags)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(name, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_close(db);
        c->db = NULL;
        return rc;
    }
    sqlite3_extended_result_codes(db, 1);
    c->busy_limit_ms = c->busy_ms;
    sqlite3_busy_handler(db, busy_wait, c);
    c->db = db;
    return SQLITE_OK;
}

static int open_memory(dc_cache *c)
{
    int rc =
        open_db(c, ":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (rc == SQLITE_OK)
        rc = dc_cache_create_schema(c->db);
    c->usage = rc == SQLITE_OK;
    c->memory = 1;
    c->readonly = 0;
    return rc;
}

/* The fallback when the file cannot serve: a private in-memory database.
 * When even that fails, c->db stays NULL; dc_cache_open reports it (after
 * fork() the handle just stays unusable). */
static void run_in_memory(dc_cache *c)
{
    if (open_memory(c) != SQLITE_OK) {
        sqlite3_close(c->db);
        c->db = NULL;
    }
}

/* Moves a bad file (and its -wal / -shm, which must never be replayed onto
 * a new file) aside as "<path>.<tag>-<unix time>". */
static int move_aside(const char *path, const char *tag, char *moved,
                      size_t moved_size)
{
    long long t = (long long)time(NULL);
    snprintf(moved, moved_size, "%s.%s-%lld", path, tag, t);
    for (int i = 1; file_exists(moved) && i < 1000; i++)
        snprintf(moved, moved_size, "%s.%s-%lld-%d", path, tag, t, i);
    if (rename(path, moved) != 0)
        return errno;
    static const char *const suffixes[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        char a[DC_CACHE_PATH_MAX + 16], b[DC_CACHE_PATH_MAX + 64];
        snprintf(a, sizeof a, "%s%s", path, suffixes[i]);
        snprintf(b, sizeof b, "%s%s", moved, suffixes[i]);
        if (file_exists(a) && rename(a, b) != 0)
            unlink(a);
    }
    return 0;
}

/* One read-only open of `name` into c->db, its schema checked and, when it
 * is ours, a first real read done: a WAL file may open and fail only there. */
static int open_readonly_probe(dc_cache *c, const char *name, int flags,
                               int *foreign)
{
    int rc = open_db(c, name, flags);
    if (rc == SQLITE_OK)
        rc = dc_cache_check_schema(c->db, 0, foreign, &c->usage);
    if (rc == SQLITE_OK && !*foreign) {
        int64_t n = 0;
        rc = dc_cache_read_int(c->db, "SELECT count(*) FROM entries", &n);
    }
    return rc;
}

/* Opens an existing file without writing it: read-only, else immutable
 * (a WAL file whose -shm cannot be created), else nothing. Returns SQLite's
 * code; *foreign as dc_cache_check_schema. */
static int open_readonly_file(dc_cache *c, int *foreign)
{
    *foreign = 0;
    int rc = open_readonly_probe(c, c->path, SQLITE_OPEN_READONLY, foreign);
    if (rc != SQLITE_OK && !dc_cache_is_corrupt_rc(rc)) {
        sqlite3_close(c->db);
        c->db = NULL;
        char uri[DC_CACHE_PATH_MAX * 3 + 64];
        immutable_uri(c->path, uri, sizeof uri);
        rc = open_readonly_probe(c, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                                 foreign);
        if (rc == SQLITE_OK)
            c->immutable = 1;
    }
    if (rc != SQLITE_OK || *foreign) {
        sqlite3_close(c->db);
        c->db = NULL;
    }
    c->readonly = 1;
    return rc;
}

/* Read-only use of `c->path` for a cache that could not be written, else
 * memory; `why` says why (for the one warning). */
static void fall_back_readonly(dc_cache *c, const char *why)
{
    int foreign = 0;
    if (file_exists(c->path)) {
        int rc = open_readonly_file(c, &foreign);
        if (rc == SQLITE_OK && !foreign) {
            dc_cache_warn("cache %s: %s: using it read-only (new kernels are "
                          "compiled but not stored)",
                          c->path, why);
            return;
        }
        if (rc == SQLITE_OK)
            dc_cache_warn("cache %s: %s, and the file is not a dcptopk cache "
                          "of schema %d: running uncached (in memory)",
                          c->path, why, DC_CACHE_SCHEMA_VERSION);
        else
            dc_cache_warn("cache %s: %s, and it cannot be read (SQLite error "
                          "%d: %s): running uncached (in memory)",
                          c->path, why, rc, sqlite3_errstr(rc));
    } else {
        dc_cache_warn("cache %s: %s: running uncached (in memory)", c->path,
                      why);
    }
    run_in_memory(c);
}

static int is_readonly_rc(int rc)
{
    int p = rc & 0xff;
    return p == SQLITE_READONLY || p == SQLITE_CANTOPEN || p == SQLITE_PERM ||
           p == SQLITE_AUTH || p == SQLITE_IOERR;
}

/* Read-write open of c->path. 0 = done (maybe through a fallback, already
 * warned). `moved` counts files moved aside (at most one per open). */
static void open_readwrite(dc_cache *c)
{
    int e = make_parent_dirs(c->path);
    if (e) {
        char why[512];
        snprintf(why, sizeof why, "cannot create its directory (%s)",
                 strerror(e));
        fall_back_readonly(c, why);
        return;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc =
            open_db(c, c->path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        if (rc == SQLITE_OK && sqlite3_db_readonly(c->db, "main") == 1)
            rc = SQLITE_READONLY;
        int foreign = 0;
        if (rc == SQLITE_OK) {
            /* The first read tells a garbage file (SQLITE_NOTADB). */
            int64_t v = 0;
            rc = dc_cache_read_int(c->db, "PRAGMA user_version", &v);
        }
        if (rc == SQLITE_OK) {
            if (wal_allowed(c->path)) {
                /* Processes creating the file at once: the switch to WAL can
                 * fail SQLITE_BUSY at once, without the busy handler (it
                 * needs the exclusive lock while others read the header).
                 * Retried, or this connection would run synchronous=FULL and
                 * fsync the WAL on every commit, inside the write lock. */
                double t0 = dc_cache_mono_ms();
                int wrc;
                for (;;) {
                    sqlite3_stmt *st = NULL;
                    wrc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL",
                                             -1, &st, NULL);
                    if (wrc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
                        const unsigned char *m = sqlite3_column_text(st, 0);
                        c->wal = m && strcmp((const char *)m, "wal") == 0;
                    } else {
                        wrc = sqlite3_errcode(c->db);
                    }
                    sqlite3_finalize(st);
                    if ((wrc & 0xff) != SQLITE_BUSY ||
                        dc_cache_mono_ms() - t0 >= (double)c->busy_ms)
                        break;
                    dc_cache_sleep_us(500);
                }
                if (dc_cache_is_corrupt_rc(wrc) || is_readonly_rc(wrc))
                    rc = wrc;
            }
            if (rc == SQLITE_OK) {
                /* In WAL, NORMAL is durable across application crashes and
                 * keeps commits free of fsync. */
                sqlite3_exec(c->db, c->wal ? "PRAGMA synchronous=NORMAL"
                                           : "PRAGMA synchronous=FULL",
                             NULL, NULL, NULL);
                rc = dc_cache_check_schema(c->db, 1, &foreign, &c->usage);
            }
        }
        if (rc == SQLITE_OK && !foreign) {
            c->readonly = 0;
            return;
        }
        sqlite3_close(c->db);
        c->db = NULL;
        c->wal = 0;
        if (attempt == 0 && (foreign || dc_cache_is_corrupt_rc(rc))) {
            char moved[DC_CACHE_PATH_MAX + 64];
            int me = move_aside(c->path, foreign ? "old" : "corrupt", moved,
                                sizeof moved);
            if (me == 0) {
                if (foreign)
                    dc_cache_warn("cache %s: not a dcptopk cache of schema %d "
                                  "(another version or another program): "
                                  "moved it to %s; starting a new cache",
                                  c->path, DC_CACHE_SCHEMA_VERSION, moved);
                else
                    dc_cache_warn("cache %s: damaged (SQLite error %d: %s): "
                                  "moved it to %s; starting a new cache",
                                  c->path, rc, sqlite3_errstr(rc), moved);
                continue;
            }
            dc_cache_warn("cache %s: %s (SQLite error %d: %s) and it cannot "
                          "be moved aside (%s): running uncached (in memory)",
                          c->path, foreign ? "not a dcptopk cache" : "damaged",
                          rc, sqlite3_errstr(rc), strerror(me));
            run_in_memory(c);
            return;
        }
        if (is_readonly_rc(rc)) {
            char why[512];
            snprintf(why, sizeof why, "cannot be written (SQLite error %d: %s)",
                     rc, sqlite3_errstr(rc));
            fall_back_readonly(c, why);
            return;
        }
        dc_cache_warn("cache %s: cannot be opened (SQLite error %d: %s): "
                      "running uncached (in memory)",
                      c->path, rc, sqlite3_errstr(rc));
        run_in_memory(c);
        return;
    }
}

dcptopk_result dc_cache_open(const char *path, dc_cache_open_mode mode,
                             dc_cache **out, char *err, size_t err_size)
{
    if (!out) {
        dc_cache_set_err(err, err_size, "out = NULL: need somewhere to put "
                                        "the cache handle");
        return DCPTOPK_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (mode != DC_CACHE_RW && mode != DC_CACHE_RO && mode != DC_CACHE_MEMORY) {
        dc_cache_set_err(err, err_size,
                         "mode = %d: expected DC_CACHE_RW (0), DC_CACHE_RO (1) "
                         "or DC_CACHE_MEMORY (2)",
                         (int)mode);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    if (path && (!*path || strlen(path) >= DC_CACHE_PATH_MAX)) {
        dc_cache_set_err(err, err_size,
                         "path = \"%.64s%s\": expected a file name of 1 to %d "
                         "bytes",
                         path, strlen(path) > 64 ? "..." : "",
                         DC_CACHE_PATH_MAX - 1);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    if (sqlite3_threadsafe() == 0) {
        dc_cache_set_err(err, err_size, "the linked SQLite %s was built "
                                        "without thread support",
                         sqlite3_libversion());
        return DCPTOPK_CACHE_ERROR;
    }
    dc_cache *c = calloc(1, sizeof *c);
    if (!c) {
        dc_cache_set_err(err, err_size, "out of memory opening the cache");
        return DCPTOPK_OUT_OF_MEMORY;
    }
    c->claim_timeout_s = claim_timeout_s();
    c->busy_ms = busy_ms();
    c->max_bytes = max_bytes_env();
    c->mode = mode;
    c->pid = getpid();

    if (mode == DC_CACHE_MEMORY) {
        snprintf(c->path, sizeof c->path, ":memory:");
        if (open_memory(c) != SQLITE_OK) {
            dcptopk_result r = dc_cache_sql_fail(
                c->db, c->db ? sqlite3_errcode(c->db) : SQLITE_NOMEM, c->path,
                "creating an in-memory cache", err, err_size);
            dc_cache_close(c);
            return r;
        }
        *out = c;
        return DCPTOPK_SUCCESS;
    }

    if (path) {
        snprintf(c->path, sizeof c->path, "%s", path);
    } else {
        int n = dc_cache_default_path(c->path, sizeof c->path);
        if (n < 0 || (size_t)n >= sizeof c->path) {
            dc_cache_warn("cache: no cache directory (set DCPTOPK_CACHE_DIR, "
                          "XDG_CACHE_HOME or HOME%s): running uncached (in "
                          "memory)",
                          n < 0 ? "" : "; the default path is too long");
            snprintf(c->path, sizeof c->path, ":memory:");
            run_in_memory(c);
            goto done;
        }
    }

    if (mode == DC_CACHE_RO) {
        int foreign = 0;
        if (!file_exists(c->path)) {
            dc_cache_warn("cache %s: does not exist and the cache is "
                          "read-only: running uncached (in memory)",
                          c->path);
            run_in_memory(c);
        } else {
            int rc = open_readonly_file(c, &foreign);
            if (rc != SQLITE_OK || foreign) {
                if (rc == SQLITE_OK)
                    dc_cache_warn("cache %s: not a dcptopk cache of schema %d:"
                                  " running uncached (in memory)",
                                  c->path, DC_CACHE_SCHEMA_VERSION);
                else
                    dc_cache_warn("cache %s: cannot be read (SQLite error %d: "
                                  "%s): running uncached (in memory)",
                                  c->path, rc, sqlite3_errstr(rc));
                run_in_memory(c);
            }
        }
        c->readonly = 1;
    } else {
        open_readwrite(c);
    }
done:
    if (!c->db) {
        dc_cache_set_err(err, err_size, "cache %s: cannot open even an "
                                        "in-memory database (out of memory?)",
                         c->path);
        dc_cache_close(c);
        return DCPTOPK_OUT_OF_MEMORY;
    }
    *out = c;
    return DCPTOPK_SUCCESS;
}

void dc_cache_after_fork(dc_cache *c)
{
    if (!c || c->pid == getpid())
        return;
    c->pid = getpid();
    /* An in-memory database is private memory: the child's copy is its
     * own. A file connection is abandoned (leaked on purpose). */
    if (c->memory)
        return;
    c->db = NULL;
    c->wal = c->immutable = 0;
    if (c->mode == DC_CACHE_RO || c->readonly) {
        int foreign = 0;
        if (open_readonly_file(c, &foreign) != SQLITE_OK || foreign) {
            run_in_memory(c);
        }
        c->readonly = 1;
    } else {
        open_readwrite(c);
    }
}

void dc_cache_close(dc_cache *c)
{
    if (!c)
        return;
    /* A handle inherited through fork() is freed without touching the
     * parent's connection. */
    if (c->db && c->pid == getpid())
        sqlite3_close_v2(c->db);
    free(c);
}

const char *dc_cache_path(const dc_cache *c) { return c ? c->path : ""; }
int dc_cache_is_memory(const dc_cache *c) { return c ? c->memory : 0; }
int dc_cache_is_readonly(const dc_cache *c) { return c ? c->readonly : 0; }

int dc_cache_test_set_max_pages(dc_cache *c, int64_t pages)
{
    if (!c || !c->db)
        return SQLITE_MISUSE;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)pages);
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL);
}

/* A damaged file found after open: move it aside and start again, once per
 * handle. 1 if the handle is usable again. */
int dc_cache_recover_corrupt(dc_cache *c, int rc)
{
    if (c->memory || c->readonly || c->recovered)
        return 0;
    c->recovered = 1;
    sqlite3_close_v2(c->db);
    c->db = NULL;
    c->wal = 0;
    char moved[DC_CACHE_PATH_MAX + 64];
    int me = move_aside(c->path, "corrupt", moved, sizeof moved);
    if (me == 0)
        dc_cache_warn("cache %s: damaged (SQLite error %d: %s): moved it to "
                      "%s; starting a new cache",
                      c->path, rc, sqlite3_errstr(rc), moved);
    else
        dc_cache_warn("cache %s: damaged (SQLite error %d: %s) and it cannot "
                      "be moved aside (%s): running uncached (in memory)",
                      c->path, rc, sqlite3_errstr(rc), strerror(me));
    if (me == 0) {
        /* open_readwrite warns on its own if it falls back. */
        c->memory = c->readonly = 0;
        open_readwrite(c);
    } else {
        open_memory(c);
    }
    return c->db != NULL;
}

