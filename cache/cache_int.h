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

/* Clocks and sleeps (cache_sql.c). */
double dc_cache_mono_ms(void);
void dc_cache_sleep_us(long us);
void dc_cache_sleep_ms(int ms);

/* A damaged file found after open (cache_open.c): moves it aside and starts
 * again, once per handle. 1 if the handle is usable again. */
int dc_cache_recover_corrupt(dc_cache *c, int rc);

/* ----------------------------------------------- claims (cache_claims.c) */

enum { CLAIM_TAKEN, CLAIM_ENTRY_EXISTS, CLAIM_WAIT, CLAIM_ERROR };

typedef struct claim_row {
    int64_t pid, token, started;
    char host[256];
} claim_row;

/* 1 if a claim row exists (filled in), 0 if none, -1 on error (*rc). */
int dc_cache_read_claim(dc_cache *c, const char *hex, claim_row *row, int *rc);
/* Whether a claim still binds us (its owner lives, it is not stale). */
int dc_cache_claim_is_live(const dc_cache *c, const claim_row *row);
/* 1 if a live claim on `hex` is visible to a plain read (no write lock). */
int dc_cache_live_claim_seen(dc_cache *c, const char *hex);
/* The pause between two looks at a claimed key. */
int dc_cache_claim_poll_ms(int polls);
/* Under the write lock: CLAIM_TAKEN, CLAIM_ENTRY_EXISTS, CLAIM_WAIT, or
 * CLAIM_ERROR with the SQLite code in *rc_out. */
int dc_cache_try_claim(dc_cache *c, const char *hex, int *rc_out);
/* Deletes our claim of ?1 (binds ?1..?4 with dc_cache_bind_release). */
extern const char dc_cache_release_sql[];
int dc_cache_bind_release(sqlite3_stmt *st, const char *hex);
/* Drops our claim (best effort: a claim left behind goes stale). */
void dc_cache_release_claim(dc_cache *c, const char *hex);

#endif /* DCPTOPK_CACHE_INT_H */
