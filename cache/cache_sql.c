/*
 * cache_sql.c - what the other cache files share: error formatting, the
 * wall clock and sleeps, small SQLite helpers, the schema and its check.
 */
#include <errno.h>
#include <sys/statvfs.h>
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

/* ---------------------------------------------------------------- helpers */

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
    /* The connection's message only when it is about an error (after a
     * reset it says "not an error") and says more than the code's text. */
    const char *msg = db && sqlite3_errcode(db) != SQLITE_OK
                          ? sqlite3_errmsg(db)
                          : NULL;
    if (msg && strcmp(msg, sqlite3_errstr(rc)) == 0)
        msg = NULL;
    dc_cache_set_err(err, err_size, "cache %s: %s: SQLite error %d (%s)%s%s",
                     path ? path : "(none)", what, rc, sqlite3_errstr(rc),
                     msg ? ": " : "", msg ? msg : "");
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

void dc_cache_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void dc_cache_sleep_ms(int ms) { dc_cache_sleep_us((long)ms * 1000L); }

int dc_cache_exec(dc_cache *c, const char *sql)
{
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL);
}

void dc_cache_rollback(dc_cache *c)
{
    if (c->db && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

int dc_cache_is_full_rc(const dc_cache *c, int rc)
{
    if ((rc & 0xff) == SQLITE_FULL)
        return 1;
    if ((rc & 0xff) != SQLITE_IOERR || !c || c->memory)
        return 0;
    /* A write that hits ENOSPC part way reports SQLITE_IOERR_WRITE (seen on
     * tmpfs), and the rollback hides the OS error: the folder's free space
     * tells a full disk from a real I/O error. */
    int e = c->db ? sqlite3_system_errno(c->db) : 0;
    if (e == ENOSPC || e == EDQUOT)
        return 1;
    char dir[DC_CACHE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", c->path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    struct statvfs fs;
    return statvfs(dir, &fs) == 0 &&
           (uint64_t)fs.f_bavail * fs.f_frsize < DC_CACHE_FULL_BELOW;
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

/* ----------------------------------------------------------------- schema */

/* Small columns first, blobs last: SUM(size), listings and the LRU scan then
 * never touch the blobs' overflow pages. created / last_used / started are
 * unix milliseconds.
 *
 * Hits are counted in table usage, not in entries: SQLite rewrites a whole
 * record on UPDATE, and an entries row holds the blobs (0.1 to 1.4 MB in
 * overflow pages), so counting a hit there would write up to a megabyte. A
 * usage row is a few dozen bytes. entries.hits and entries.last_used keep
 * what an imported file counted; an entry's hits are entries.hits +
 * usage.hits and its last use the later of the two. The trigger drops the
 * usage row of an entry whoever deletes it. */
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
    "CREATE TABLE IF NOT EXISTS usage("
    " key TEXT PRIMARY KEY NOT NULL, hits INTEGER NOT NULL,"
    " last_used INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TRIGGER IF NOT EXISTS usage_of_deleted_entry AFTER DELETE"
    " ON entries BEGIN DELETE FROM usage WHERE key=old.key; END;";

int dc_cache_create_schema(sqlite3 *db)
{
    int rc = sqlite3_exec(db, schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        char sql[96];
        snprintf(sql, sizeof sql,
                 "PRAGMA application_id=%d; PRAGMA user_version=%d",
                 DC_CACHE_APPLICATION_ID, DC_CACHE_FILE_VERSION);
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

/* What a database holds, from reads only (nothing is written before the
 * caller knows the file is ours). */
static int classify_reads(sqlite3 *db, dc_cache_kind *kind);

int dc_cache_classify(sqlite3 *db, dc_cache_kind *kind)
{
    /* One read transaction: the reads below must see one state of a file
     * that another process may be creating the schema of right now. */
    if (!sqlite3_get_autocommit(db))
        return classify_reads(db, kind);
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = classify_reads(db, kind);
    int crc = sqlite3_exec(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL,
                           NULL, NULL);
    return rc != SQLITE_OK ? rc : crc;
}

static int classify_reads(sqlite3 *db, dc_cache_kind *kind)
{
    int64_t app = 0, version = 0, tables = 0, ours = 0;
    *kind = DC_KIND_FOREIGN;
    int rc = dc_cache_read_int(db, "PRAGMA application_id", &app);
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(db, "PRAGMA user_version", &version);
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(db, "SELECT count(*) FROM sqlite_master", &tables);
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(db,
                               "SELECT count(*) FROM sqlite_master WHERE "
                               "type='table' AND name IN ('entries','claims',"
                               "'usage')",
                               &ours);
    if (rc != SQLITE_OK)
        return rc;
    if (app == 0 && version == 0 && tables == 0)
        *kind = DC_KIND_EMPTY;
    else if (app == DC_CACHE_APPLICATION_ID &&
             version == DC_CACHE_FILE_VERSION && ours == 3)
        *kind = DC_KIND_OURS;
    else if (app == DC_CACHE_APPLICATION_ID)
        *kind = DC_KIND_OLD; /* ours, of another file version */
    else if (app == 0 && version == 1 && ours >= 2) {
        /* The first file version set no application_id: recognised by its
         * version and its tables entries and claims. */
        int64_t others = 0;
        rc = dc_cache_read_int(db,
                               "SELECT count(*) FROM sqlite_master WHERE "
                               "type='table' AND name NOT IN ('entries',"
                               "'claims','usage')",
                               &others);
        if (rc == SQLITE_OK && others == 0)
            *kind = DC_KIND_OLD;
    }
    return rc;
}

int dc_cache_check_schema(sqlite3 *db, int writable, dc_cache_kind *kind)
{
    int rc = dc_cache_classify(db, kind);
    if (rc != SQLITE_OK || *kind != DC_KIND_EMPTY || !writable)
        return rc;
    /* A new file: create the schema once, under the write lock, so that
     * concurrent openers see either nothing or the whole schema. */
    rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = dc_cache_classify(db, kind);
    if (rc == SQLITE_OK && *kind == DC_KIND_EMPTY) {
        rc = dc_cache_create_schema(db);
        if (rc == SQLITE_OK)
            *kind = DC_KIND_OURS;
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}
