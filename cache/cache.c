/*
 * cache.c - the SQLite compile cache: opening (with its fallbacks), the
 * claim protocol that makes concurrent processes compile each key once, and
 * the store.
 *
 * One database file holds every entry in one row (so an entry is published
 * atomically by one transaction), the claims of compiles in progress, and
 * per entry a small usage row (hits, last use) that a hit updates instead of
 * rewriting the entry's blobs.
 * Every write runs in BEGIN IMMEDIATE (in WAL a deferred transaction that
 * reads then writes gets SQLITE_BUSY without waiting); compiles run outside
 * any transaction; waiting on another compile's claim only reads. The cache
 * is disposable: every failure degrades to compiling uncached with one
 * warning, never to an error of the caller.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
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

static atomic_uint_fast64_t process_compiles;

uint64_t dc_cache_process_compiles(void)
{
    return (uint64_t)atomic_load(&process_compiles);
}

/* ---------------------------------------------------------------- helpers */

void dc_cache_warn(const char *fmt, ...)
{
    const char *log = getenv("DCPTOPK_LOG");
    if (log && strcmp(log, "quiet") == 0)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One write, so lines of concurrent processes do not interleave. */
    fprintf(stderr, "dcptopk: warning: %s\n", msg);
}

void dc_cache_set_err(char *err, size_t err_size, const char *fmt, ...)
{
    if (!err || !err_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

dcptopk_result dc_cache_sql_fail(sqlite3 *db, int rc, const char *path,
                                 const char *what, char *err, size_t err_size)
{
    dc_cache_set_err(err, err_size, "cache %s: %s: SQLite error %d (%s): %s",
                     path ? path : "(none)", what, rc, sqlite3_errstr(rc),
                     db ? sqlite3_errmsg(db) : "no connection");
    if (rc == SQLITE_NOMEM)
        return DCPTOPK_OUT_OF_MEMORY;
    return DCPTOPK_CACHE_ERROR;
}

int64_t dc_cache_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void sleep_ms(int ms) { sleep_us((long)ms * 1000L); }

int dc_cache_exec(dc_cache *c, const char *sql)
{
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL);
}

void dc_cache_rollback(dc_cache *c)
{
    if (c->db && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

int dc_cache_is_corrupt_rc(int rc)
{
    rc &= 0xff;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

/* Binds text, turning NULL into "". */
void dc_cache_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT);
}

/* Binds a blob, empty blobs as zero-length blobs (not NULL). */
void dc_cache_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n)
{
    if (!p || !n)
        sqlite3_bind_zeroblob(st, i, 0);
    else
        sqlite3_bind_blob64(st, i, p, (sqlite3_uint64)n, SQLITE_TRANSIENT);
}

/* A malloc'd copy of a blob column with a NUL after it; NULL when empty.
 * Returns -1 when out of memory. */
int dc_cache_column_copy(sqlite3_stmt *st, int col, void **out, size_t *size)
{
    const void *p = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);
    *out = NULL;
    *size = 0;
    if (!p || n <= 0)
        return 0;
    char *copy = malloc((size_t)n + 1);
    if (!copy)
        return -1;
    memcpy(copy, p, (size_t)n);
    copy[n] = '\0';
    *out = copy;
    *size = (size_t)n;
    return 0;
}

/* ------------------------------------------------------ process identity */

/* A claim names its owner by pid, host and a random token drawn once per
 * process: a claim with our pid but another token was left by a dead
 * predecessor whose pid we reuse (common in containers). */
static pthread_mutex_t ident_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t ident_pid;
static int64_t ident_token;
static char ident_host[256];

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void dc_cache_identity(int64_t *pid, int64_t *token, char host[256])
{
    pthread_mutex_lock(&ident_lock);
    pid_t now = getpid();
    if (now != ident_pid) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed = (uint64_t)ts.tv_sec * 1000000000ull +
                        (uint64_t)ts.tv_nsec;
        seed ^= (uint64_t)now << 32;
        seed ^= (uint64_t)(uintptr_t)&seed;
        FILE *f = fopen("/dev/urandom", "rb");
        if (f) {
            uint64_t r = 0;
            if (fread(&r, sizeof r, 1, f) == 1)
                seed ^= r;
            fclose(f);
        }
        ident_token = (int64_t)(splitmix(seed) >> 1);
        if (gethostname(ident_host, sizeof ident_host) != 0)
            snprintf(ident_host, sizeof ident_host, "unknown");
        ident_host[sizeof ident_host - 1] = '\0';
        ident_pid = now;
    }
    *pid = (int64_t)ident_pid;
    *token = ident_token;
    memcpy(host, ident_host, sizeof ident_host);
    pthread_mutex_unlock(&ident_lock);
}

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

/* ----------------------------------------------------------------- schema */

/* Small columns first, blobs last: SUM(size), listings and the LRU scan then
 * never touch the blobs' overflow pages. created / last_used / started are
 * unix milliseconds.
 *
 * Hits are counted in table usage, not in entries: SQLite rewrites a whole
 * record on UPDATE, and an entries row holds the blobs (0.1 to 1.4 MB in
 * overflow pages), so counting a hit there wrote up to a megabyte into the
 * WAL (whenever the record's size changed, as hits going from 1 to 2 does)
 * and always read and rebuilt the record. A usage row is a few dozen bytes.
 * An entry's hits are entries.hits + usage.hits and its last use the later
 * of the two last_used (entries keeps what older versions counted there; this
 * version stores entries with hits 0 and last_used = created and never
 * updates them). The schema version stays 1: an older library ignores
 * usage (it counts into entries, and its LRU sees only that), and the
 * trigger, which lives in the file, drops the usage row of an entry
 * whoever deletes it, so a key stored again later starts from 0. */
#define USAGE_SQL                                                              \
    "CREATE TABLE IF NOT EXISTS main.usage("                                   \
    " key TEXT PRIMARY KEY NOT NULL, hits INTEGER NOT NULL,"                   \
    " last_used INTEGER NOT NULL) WITHOUT ROWID;"                              \
    "CREATE TRIGGER IF NOT EXISTS main.usage_of_deleted_entry AFTER DELETE"    \
    " ON entries BEGIN DELETE FROM usage WHERE key=old.key; END;"

static const char schema_sql[] =
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
    USAGE_SQL;

int dc_cache_create_schema(sqlite3 *db)
{
    int rc = sqlite3_exec(db, schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version=%d",
                 DC_CACHE_SCHEMA_VERSION);
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    }
    return rc;
}

int dc_cache_read_int(sqlite3 *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            *out = 0;
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

static const char usage_exists_sql[] =
    "SELECT count(*) FROM main.sqlite_master WHERE type='table' AND "
    "name='usage'";

/* Table usage for a file of schema 1 that lacks it (made before it
 * existed): added to the file when writable (once, under the write lock),
 * else an empty TEMP table stands in for it. A damaged file's code is
 * returned (the caller moves it aside); any other failure to add it only
 * costs the cheap hit counting. */
static int ensure_usage(sqlite3 *db, int writable, int *in_file)
{
    int64_t n = 0;
    int rc = dc_cache_read_int(db, usage_exists_sql, &n);
    if (rc != SQLITE_OK)
        return rc;
    if (n == 0 && writable) {
        rc = sqlite3_exec(db, "BEGIN IMMEDIATE;" USAGE_SQL "COMMIT;", NULL,
                          NULL, NULL);
        if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        if (dc_cache_is_corrupt_rc(rc))
            return rc;
        if (dc_cache_read_int(db, usage_exists_sql, &n) != SQLITE_OK)
            n = 0;
    }
    *in_file = n != 0;
    if (n != 0)
        return SQLITE_OK;
    return sqlite3_exec(db,
                        "CREATE TEMP TABLE IF NOT EXISTS usage("
                        " key TEXT PRIMARY KEY NOT NULL, hits INTEGER NOT NULL,"
                        " last_used INTEGER NOT NULL)",
                        NULL, NULL, NULL);
}

int dc_cache_check_schema(sqlite3 *db, int writable, int *foreign,
                          int *usage_in_file)
{
    int64_t version = 0, tables = 0;
    int in_file = 0;
    *foreign = 0;
    if (usage_in_file)
        *usage_in_file = 0;
    int rc = dc_cache_read_int(db, "PRAGMA user_version", &version);
    if (rc != SQLITE_OK)
        return rc;
    if (version == DC_CACHE_SCHEMA_VERSION) {
        rc = dc_cache_read_int(db,
                               "SELECT count(*) FROM sqlite_master WHERE "
                               "type='table' AND name IN ('entries','claims')",
                               &tables);
        if (rc == SQLITE_OK && tables != 2)
            *foreign = 1;
        if (rc == SQLITE_OK && !*foreign)
            rc = ensure_usage(db, writable, &in_file);
        if (usage_in_file)
            *usage_in_file = in_file;
        return rc;
    }
    if (version != 0 || !writable) {
        if (version == 0 && !writable) {
            /* An empty read-only file is fine (nothing to read); anything
             * else is not ours. */
            rc = dc_cache_read_int(db, "SELECT count(*) FROM sqlite_master",
                                   &tables);
            if (rc == SQLITE_OK && tables != 0)
                *foreign = 1;
            return rc;
        }
        *foreign = 1;
        return SQLITE_OK;
    }
    /* A new file: create the schema once, under the write lock, so that
     * concurrent openers see either nothing or the whole schema. */
    rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = dc_cache_read_int(db, "PRAGMA user_version", &version);
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(db, "SELECT count(*) FROM sqlite_master",
                               &tables);
    int created = 0;
    if (rc == SQLITE_OK) {
        if (version == 0 && tables == 0) {
            rc = dc_cache_create_schema(db);
            created = 1;
        } else if (version != DC_CACHE_SCHEMA_VERSION) {
            *foreign = 1;
        }
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    if (rc == SQLITE_OK && !*foreign && !created) {
        /* Another opener created the schema meanwhile: check it as ours. */
        return dc_cache_check_schema(db, writable, foreign, usage_in_file);
    }
    if (rc == SQLITE_OK && created && usage_in_file)
        *usage_in_file = 1;
    return rc;
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
    double now = mono_ms();
    if (count == 0)
        c->busy_since_ms = now;
    double left = (double)c->busy_limit_ms - (now - c->busy_since_ms);
    if (left <= 0.0)
        return 0;
    long us = count < 3 ? 250L << count : 2000L;
    if ((double)us > left * 1000.0)
        us = (long)(left * 1000.0) + 1;
    sleep_us(us);
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
                double t0 = mono_ms();
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
                        mono_ms() - t0 >= (double)c->busy_ms)
                        break;
                    sleep_us(500);
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
static int recover_corrupt(dc_cache *c, int rc)
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

/* ------------------------------------------------------------------- read */

enum { READ_HIT, READ_MISS, READ_BAD, READ_ERROR };

/* Reads and verifies one entry. On READ_BAD, `bad_sum` holds the stored
 * checksum; on READ_ERROR, *rc the SQLite code. */
static int read_entry(dc_cache *c, const char *hex, dc_cache_hit *out,
                      char bad_sum[33], int *rc_out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        c->db,
        "SELECT cubin, ptx, source, checksum FROM entries WHERE key=?1", -1,
        &st, NULL);
    int status = READ_ERROR;
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    if (rc == SQLITE_DONE) {
        status = READ_MISS;
    } else if (rc == SQLITE_ROW) {
        const void *cubin = sqlite3_column_blob(st, 0);
        size_t cubin_n = (size_t)sqlite3_column_bytes(st, 0);
        const void *ptx = sqlite3_column_blob(st, 1);
        size_t ptx_n = (size_t)sqlite3_column_bytes(st, 1);
        const void *src = sqlite3_column_blob(st, 2);
        size_t src_n = (size_t)sqlite3_column_bytes(st, 2);
        const unsigned char *stored = sqlite3_column_text(st, 3);
        char sum[33];
        dc_cache_checksum(cubin, cubin_n, ptx, ptx_n, src, src_n, sum);
        if (!stored || strcmp((const char *)stored, sum) != 0 ||
            (cubin_n == 0 && ptx_n == 0)) {
            snprintf(bad_sum, 33, "%s", stored ? (const char *)stored : "");
            status = READ_BAD;
        } else if (dc_cache_column_copy(st, 0, &out->cubin,
                                        &out->cubin_size) != 0 ||
                   dc_cache_column_copy(st, 1, &out->ptx, &out->ptx_size) !=
                       0) {
            dc_cache_hit_free(out);
            rc = SQLITE_NOMEM;
        } else {
            status = READ_HIT;
        }
        rc = status == READ_ERROR ? rc : SQLITE_OK;
    }
    sqlite3_finalize(st);
    *rc_out = rc;
    return status;
}

/* Counts a hit (best effort and cheap: a short busy wait, failures ignored;
 * a read-only file is never written). One small row of table usage: never
 * the entries row, whose rewrite would copy its blobs (see schema_sql). The
 * row is written only while the entry exists, so no usage row outlives its
 * entry (the trigger drops it with the entry). */
static void bump_hit(dc_cache *c, const char *hex)
{
    if (c->readonly)
        return;
    c->busy_limit_ms = c->busy_ms < 100 ? c->busy_ms : 100;
    sqlite3_stmt *st = NULL;
    const char *sql =
        c->usage ? "INSERT INTO main.usage(key, hits, last_used) SELECT ?1, 1,"
                   " ?2 WHERE EXISTS(SELECT 1 FROM entries WHERE key=?1) "
                   "ON CONFLICT(key) DO UPDATE SET hits=hits+1, "
                   "last_used=excluded.last_used"
                 /* A file that could not get table usage: the old way. */
                 : "UPDATE entries SET hits=hits+1, last_used=?2 WHERE key=?1";
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, dc_cache_now_ms());
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    c->busy_limit_ms = c->busy_ms;
}

/* Deletes a row whose checksum failed (only that version of it). */
static void delete_bad(dc_cache *c, const char *hex, const char *bad_sum)
{
    if (c->readonly)
        return;
    if (dc_cache_exec(c, "BEGIN IMMEDIATE") != SQLITE_OK)
        return;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        c->db, "DELETE FROM entries WHERE key=?1 AND checksum=?2", -1, &st,
        NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, bad_sum, -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK)
        dc_cache_rollback(c);
}

/* ----------------------------------------------------------------- claims */

enum { CLAIM_TAKEN, CLAIM_ENTRY_EXISTS, CLAIM_WAIT, CLAIM_ERROR };

typedef struct claim_row {
    int64_t pid, token, started;
    char host[256];
} claim_row;

/* 1 if a claim row exists (filled in), 0 if none, -1 on error (*rc). */
static int read_claim(dc_cache *c, const char *hex, claim_row *row, int *rc)
{
    sqlite3_stmt *st = NULL;
    int found = -1;
    *rc = sqlite3_prepare_v2(
        c->db, "SELECT pid, host, token, started FROM claims WHERE key=?1", -1,
        &st, NULL);
    if (*rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            row->pid = sqlite3_column_int64(st, 0);
            const unsigned char *h = sqlite3_column_text(st, 1);
            snprintf(row->host, sizeof row->host, "%s",
                     h ? (const char *)h : "");
            row->token = sqlite3_column_int64(st, 2);
            row->started = sqlite3_column_int64(st, 3);
            found = 1;
        } else if (s == SQLITE_DONE) {
            found = 0;
        } else {
            *rc = sqlite3_errcode(c->db);
        }
    }
    sqlite3_finalize(st);
    return found;
}

/* Whether a claim still binds us: its owner lives (as far as we can tell)
 * and it is younger than the claim timeout. */
static int claim_is_live(const dc_cache *c, const claim_row *row)
{
    int64_t pid, token;
    char host[256];
    dc_cache_identity(&pid, &token, host);
    int64_t age = dc_cache_now_ms() - row->started;
    if ((double)age > c->claim_timeout_s * 1000.0)
        return 0; /* stale, whoever holds it */
    if (strcmp(row->host, host) != 0)
        return 1; /* another host: only the timeout tells */
    if (row->pid == pid)
        return row->token == token; /* another thread of ours, or our
                                       dead predecessor with our pid */
    if (row->pid <= 0 || row->pid > INT32_MAX)
        return 0;
    if (kill((pid_t)row->pid, 0) != 0 && errno == ESRCH)
        return 0;
    return 1;
}

/* 1 if a live claim on `hex` is visible to a plain read. Waiting on a claim
 * takes no write lock: in WAL a read neither waits for nor delays the
 * claimant's store. Any error reads as 0 (try_claim decides under the
 * write lock). */
static int live_claim_seen(dc_cache *c, const char *hex)
{
    claim_row row;
    int rc = SQLITE_OK;
    return read_claim(c, hex, &row, &rc) > 0 && claim_is_live(c, &row);
}

/* The pause between two looks at a claimed key: 1, 2, 4, then 5 ms, so a
 * waiter sees a stored entry within about 5 ms (a compile takes 10 ms to
 * seconds) at the cost of two indexed reads per look. */
static int claim_poll_ms(int polls) { return polls < 3 ? 1 << polls : 5; }

static int try_claim(dc_cache *c, const char *hex, int *rc_out)
{
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    int result = CLAIM_ERROR;
    sqlite3_stmt *st = NULL;
    if (rc != SQLITE_OK)
        goto out;
    rc = sqlite3_prepare_v2(c->db, "SELECT 1 FROM entries WHERE key=?1", -1,
                            &st, NULL);
    if (rc != SQLITE_OK)
        goto out;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (s == SQLITE_ROW) {
        result = CLAIM_ENTRY_EXISTS;
        rc = dc_cache_exec(c, "COMMIT");
        goto out;
    }
    if (s != SQLITE_DONE) {
        rc = sqlite3_errcode(c->db);
        goto out;
    }
    claim_row row;
    int found = read_claim(c, hex, &row, &rc);
    if (found < 0)
        goto out;
    if (found && claim_is_live(c, &row)) {
        result = CLAIM_WAIT;
        rc = dc_cache_exec(c, "COMMIT");
        goto out;
    }
    int64_t pid, token;
    char host[256];
    dc_cache_identity(&pid, &token, host);
    rc = sqlite3_prepare_v2(c->db,
                            "INSERT OR REPLACE INTO claims(key, pid, host, "
                            "token, started) VALUES(?1, ?2, ?3, ?4, ?5)",
                            -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto out;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, pid);
    sqlite3_bind_text(st, 3, host, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, token);
    sqlite3_bind_int64(st, 5, dc_cache_now_ms());
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc == SQLITE_OK)
        result = CLAIM_TAKEN;
out:
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        result = CLAIM_ERROR;
        dc_cache_rollback(c);
    }
    *rc_out = rc;
    return result;
}

static const char release_sql[] =
    "DELETE FROM claims WHERE key=?1 AND pid=?2 AND host=?3 AND token=?4";

static int bind_release(sqlite3_stmt *st, const char *hex)
{
    int64_t pid, token;
    char host[256];
    dc_cache_identity(&pid, &token, host);
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, pid);
    sqlite3_bind_text(st, 3, host, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, token);
    return 0;
}

/* Drops our claim (best effort: a claim left behind goes stale). */
static void release_claim(dc_cache *c, const char *hex)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, release_sql, -1, &st, NULL) == SQLITE_OK) {
        bind_release(st, hex);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
}

/* ------------------------------------------------------------------ store */

/* Inserts the entry and drops our claim in one transaction. First writer
 * wins: an entry stored meanwhile (after a claim takeover) is kept. */
static int store_entry(dc_cache *c, const char *hex, const dc_cache_meta *m,
                       const dc_cache_blobs *b, int claimed)
{
    char sum[33];
    dc_cache_checksum(b->cubin, b->cubin_size, b->ptx, b->ptx_size, b->source,
                      b->source_size, sum);
    int64_t now = dc_cache_now_ms();
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    sqlite3_stmt *st = NULL;
    if (rc != SQLITE_OK)
        goto out;
    rc = sqlite3_prepare_v2(
        c->db,
        "INSERT OR IGNORE INTO entries(key, kernel, fields, arch, "
        "nvrtc_version, lib_version, checksum, compile_ms, size, created, "
        "last_used, hits, cubin, ptx, source) VALUES(?1, ?2, ?3, ?4, ?5, ?6, "
        "?7, ?8, ?9, ?10, ?10, 0, ?11, ?12, ?13)",
        -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto out;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    dc_cache_bind_text(st, 2, m ? m->kernel : NULL);
    dc_cache_bind_text(st, 3, m ? m->fields : NULL);
    dc_cache_bind_text(st, 4, m ? m->arch : NULL);
    dc_cache_bind_text(st, 5, m ? m->nvrtc_version : NULL);
    dc_cache_bind_text(st, 6, m ? m->lib_version : NULL);
    sqlite3_bind_text(st, 7, sum, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 8, b->compile_ms);
    sqlite3_bind_int64(st, 9,
                       (int64_t)((b->cubin ? b->cubin_size : 0) +
                                 (b->ptx ? b->ptx_size : 0) +
                                 (b->source ? b->source_size : 0)));
    sqlite3_bind_int64(st, 10, now);
    dc_cache_bind_blob(st, 11, b->cubin, b->cubin_size);
    dc_cache_bind_blob(st, 12, b->ptx, b->ptx_size);
    dc_cache_bind_blob(st, 13, b->source, b->source_size);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_OK)
        goto out;
    if (claimed) {
        rc = sqlite3_prepare_v2(c->db, release_sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
            goto out;
        bind_release(st, hex);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK
                                             : sqlite3_errcode(c->db);
        if (rc != SQLITE_OK)
            goto out;
    }
    rc = dc_cache_exec(c, "COMMIT");
out:
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        dc_cache_rollback(c);
    return rc;
}

/* ------------------------------------------------------- get_or_compile */

static void store_warn(dc_cache *c, const char *hex, int rc)
{
    if (c->warned_store)
        return;
    c->warned_store = 1;
    dc_cache_warn("cache %s: cannot store kernel %s (SQLite error %d: %s%s): "
                  "running uncached",
                  c->path, hex, rc, sqlite3_errstr(rc),
                  (rc & 0xff) == SQLITE_FULL ? "; the disk or the database is "
                                               "full"
                                             : "");
}

static dcptopk_result copy_blobs(const dc_cache_blobs *b, dc_cache_hit *out)
{
    const void *src[2] = {b->cubin, b->ptx};
    size_t n[2] = {b->cubin ? b->cubin_size : 0, b->ptx ? b->ptx_size : 0};
    void *dst[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        if (!n[i])
            continue;
        dst[i] = malloc(n[i] + 1);
        if (!dst[i]) {
            free(dst[0]);
            return DCPTOPK_OUT_OF_MEMORY;
        }
        memcpy(dst[i], src[i], n[i]);
        ((char *)dst[i])[n[i]] = '\0';
    }
    out->cubin = dst[0];
    out->cubin_size = n[0];
    out->ptx = dst[1];
    out->ptx_size = n[1];
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_get_or_compile(dc_cache *c, dc_hash key,
                                       const dc_cache_meta *meta,
                                       dc_compile_fn compile,
                                       dc_release_fn release, void *user,
                                       dc_cache_hit *out, int *compiled,
                                       char *err, size_t err_size)
{
    if (compiled)
        *compiled = 0;
    dc_cache_after_fork(c);
    if (!c || !c->db) {
        dc_cache_set_err(err, err_size, "cache = %p: not an open cache",
                         (void *)c);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    if (!compile || !out) {
        dc_cache_set_err(err, err_size, "%s = NULL: required",
                         !compile ? "compile" : "out");
        return DCPTOPK_INVALID_ARGUMENT;
    }
    memset(out, 0, sizeof *out);
    char hex[33];
    dc_hash_hex(key, hex);

    int claimed = 0, store = 1, polls = 0;
    double start = mono_ms();
    for (;;) {
        char bad_sum[33] = "";
        int rc = SQLITE_OK;
        int st = read_entry(c, hex, out, bad_sum, &rc);
        if (st == READ_HIT) {
            bump_hit(c, hex);
            return DCPTOPK_SUCCESS;
        }
        if (st == READ_BAD) {
            dc_cache_warn("cache %s: entry %s failed its checksum: %s and "
                          "compiling it again",
                          c->path, hex,
                          c->readonly ? "ignoring it (read-only)"
                                      : "deleting it");
            delete_bad(c, hex, bad_sum);
            if (c->readonly)
                store = 0;
            else {
                /* If the row could not be deleted, do not loop on it. */
                int rc2;
                dc_cache_hit tmp = {0};
                char sum2[33];
                if (read_entry(c, hex, &tmp, sum2, &rc2) == READ_BAD)
                    store = 0;
                dc_cache_hit_free(&tmp);
            }
            if (!store)
                break;
            continue;
        }
        if (st == READ_ERROR) {
            if ((rc & 0xff) == SQLITE_NOMEM) {
                dc_cache_set_err(err, err_size, "cache %s: out of memory "
                                                "reading entry %s",
                                 c->path, hex);
                return DCPTOPK_OUT_OF_MEMORY;
            }
            if (dc_cache_is_corrupt_rc(rc) && recover_corrupt(c, rc))
                continue;
            store_warn(c, hex, rc);
            store = 0;
            break;
        }
        /* A miss. */
        if (c->readonly) {
            store = 0;
            break;
        }
        if (c->memory)
            break;
        /* A live claim is waited for with reads only; the write lock is
         * taken only to claim a key nobody (alive) holds. Waiters that took
         * it on every look kept the claimant's store waiting for the lock. */
        if (!live_claim_seen(c, hex)) {
            int crc = SQLITE_OK;
            int cl = try_claim(c, hex, &crc);
            if (cl == CLAIM_TAKEN) {
                claimed = 1;
                break;
            }
            if (cl == CLAIM_ENTRY_EXISTS)
                continue;
            if (cl == CLAIM_ERROR) {
                if (dc_cache_is_corrupt_rc(crc) && recover_corrupt(c, crc))
                    continue;
                /* Cannot claim (busy past the timeout, disk full...):
                 * compile anyway and try to store (duplicates are
                 * harmless), unless a live process claimed the key
                 * meanwhile: then wait for it. */
                if (!live_claim_seen(c, hex))
                    break;
            }
        }
        /* Another live process (or thread) compiles it. Its claim goes
         * stale after the timeout; past that plus a margin, stop waiting
         * whatever happens. */
        if (mono_ms() - start > c->claim_timeout_s * 1000.0 + 10000.0)
            break;
        sleep_ms(claim_poll_ms(polls++));
    }

    dc_cache_blobs b;
    memset(&b, 0, sizeof b);
    double t0 = mono_ms();
    dcptopk_result r = compile(user, &b, err, err_size);
    double ms = mono_ms() - t0;
    atomic_fetch_add(&process_compiles, 1);
    if (r == DCPTOPK_SUCCESS && (!b.cubin || !b.cubin_size) &&
        (!b.ptx || !b.ptx_size)) {
        dc_cache_set_err(err, err_size,
                         "cache: the compile of %s returned neither a cubin "
                         "nor PTX",
                         hex);
        r = DCPTOPK_INTERNAL;
    }
    if (r == DCPTOPK_SUCCESS) {
        if (b.compile_ms <= 0.0)
            b.compile_ms = ms;
        r = copy_blobs(&b, out);
        if (r != DCPTOPK_SUCCESS)
            dc_cache_set_err(err, err_size,
                             "cache: out of memory copying the %zu + %zu "
                             "bytes compiled for %s",
                             b.cubin_size, b.ptx_size, hex);
    }
    if (r == DCPTOPK_SUCCESS && store) {
        int src = store_entry(c, hex, meta, &b, claimed);
        if (src == SQLITE_OK) {
            claimed = 0;
            if (c->max_bytes > 0) {
                char perr[512];
                dc_cache_prune(c, c->max_bytes, hex, NULL, perr, sizeof perr);
            }
        } else {
            store_warn(c, hex, src);
        }
    }
    if (claimed)
        release_claim(c, hex);
    if (release)
        release(user, &b);
    if (r == DCPTOPK_SUCCESS && compiled)
        *compiled = 1;
    return r;
}

int dc_cache_contains(dc_cache *c, dc_hash key)
{
    if (!c || !c->db)
        return 0;
    char hex[33];
    dc_hash_hex(key, hex);
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(c->db, "SELECT 1 FROM entries WHERE key=?1", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

dcptopk_result dc_cache_invalidate(dc_cache *c, dc_hash key)
{
    if (!c || !c->db)
        return DCPTOPK_INVALID_ARGUMENT;
    char hex[33];
    dc_hash_hex(key, hex);
    char err[256];
    return dc_cache_remove(c, hex, err, sizeof err);
}

void dc_cache_hit_free(dc_cache_hit *hit)
{
    if (!hit)
        return;
    free(hit->cubin);
    free(hit->ptx);
    memset(hit, 0, sizeof *hit);
}
