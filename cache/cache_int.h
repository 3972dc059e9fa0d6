/*
 * cache_int.h - what cache.c and cache_admin.c share: the handle struct and
 * small SQLite helpers. Nothing outside cache/ includes it.
 */
#ifndef DCPTOPK_CACHE_INT_H
#define DCPTOPK_CACHE_INT_H

#include <sys/types.h>

#include <sqlite3.h>

#include "cache.h"

#define DC_CACHE_PATH_MAX 4096

struct dc_cache {
    sqlite3 *db;
    char path[DC_CACHE_PATH_MAX]; /* the file, or ":memory:"               */
    int memory;                   /* in-memory database (fallback or mode) */
    int readonly;                 /* the file is never written             */
    int immutable;                /* opened with immutable=1 (no locking)  */
    int wal;                      /* journal_mode is WAL                   */
    int recovered;                /* a damaged file was moved aside        */
    int warned_store;             /* the one store-failure warning done    */
    int usage;                    /* the file has table usage: hits go
                                     there (else into entries, the old way) */
    double claim_timeout_s;       /* DCPTOPK_CACHE_CLAIM_TIMEOUT           */
    int busy_ms;                  /* DCPTOPK_CACHE_BUSY_MS                 */
    int busy_limit_ms;            /* the busy handler's budget now         */
    double busy_since_ms;         /* when the current lock wait began      */
    int64_t max_bytes;            /* DCPTOPK_CACHE_MAX_BYTES, 0 = no cap   */
    dc_cache_open_mode mode;      /* as asked at open                      */
    pid_t pid;                    /* the process that opened db            */
};

/* A connection must never be used across fork(): in a child, abandons the
 * inherited one (without closing it: closing could disturb the parent's
 * locks) and opens the file again. Call first in every entry point. */
void dc_cache_after_fork(dc_cache *c);

void dc_cache_set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Formats "cache <path>: <what>: SQLite error <rc> (<errstr>): <errmsg>". */
dcptopk_result dc_cache_sql_fail(sqlite3 *db, int rc, const char *path,
                                 const char *what, char *err,
                                 size_t err_size);
int64_t dc_cache_now_ms(void);
/* The first column of the first row of `sql` (0 when there is no row). */
int dc_cache_read_int(sqlite3 *db, const char *sql, int64_t *out);
int dc_cache_exec(dc_cache *c, const char *sql);
void dc_cache_rollback(dc_cache *c);
int dc_cache_is_corrupt_rc(int rc);
void dc_cache_bind_text(sqlite3_stmt *st, int i, const char *s);
void dc_cache_bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n);
int dc_cache_column_copy(sqlite3_stmt *st, int col, void **out, size_t *size);
void dc_cache_identity(int64_t *pid, int64_t *token, char host[256]);
int dc_cache_create_schema(sqlite3 *db);
/* Checks (and for a new, empty file creates) the schema. *foreign = 1 when
 * the file is a database of another schema version or of something else.
 * For a file of ours without table usage (made by an older version), adds
 * it when writable, else (or when that fails) creates an empty TEMP table
 * usage, so that queries may always name `usage`. *usage_in_file (may be
 * NULL) = 1 when the file itself has it. */
int dc_cache_check_schema(sqlite3 *db, int writable, int *foreign,
                          int *usage_in_file);

#endif /* DCPTOPK_CACHE_INT_H */
