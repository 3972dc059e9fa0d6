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

/* The cache's settings from the environment, read once per open by
 * dc_cache_settings_load through base/settings.h (names, defaults and
 * ranges are in its table): DCPTOPK_CACHE_BUSY_MS, _CLAIM_TIMEOUT,
 * _MAX_BYTES, _WAL, _SHARED and _IMPORT_MAX_BYTES. */
typedef struct dc_cache_settings {
    int busy_ms;
    double claim_timeout_s;
    int64_t max_bytes;
    int wal;                  /* -1 by file system, 0 off, 1 on       */
    int shared;
    int64_t import_max_bytes;
} dc_cache_settings;
void dc_cache_settings_load(dc_cache_settings *s);

/* What an opened database holds (dc_cache_classify). */
typedef enum dc_cache_kind {
    DC_KIND_EMPTY = 0,   /* a new file: no tables, no ids         */
    DC_KIND_OURS = 1,    /* a cache of this file version           */
    DC_KIND_OLD = 2,     /* a cache of another file version        */
    DC_KIND_FOREIGN = 3  /* another program's database: never touched */
} dc_cache_kind;

struct dc_cache {
    sqlite3 *db;
    char path[DC_CACHE_PATH_MAX]; /* the file, or ":memory:"               */
    int memory;                   /* in-memory database (fallback or mode) */
    int readonly;                 /* the file is never written             */
    int immutable;                /* opened with immutable=1 (no locking)  */
    int wal;                      /* journal_mode is WAL                   */
    int recovered;                /* a damaged file was moved aside        */
    int warned_store;             /* the one store-failure warning done    */
    int warned_wait;              /* the one stuck-claimant warning done   */
    int strict;                   /* maintenance: no fallback, no moving   */
    int full;                     /* a store failed for lack of space: no
                                     more claims, blobs kept in `spill`    */
    sqlite3 *spill;               /* entries compiled after `full`         */
    dev_t dev;                    /* the file opened (for recovery)        */
    ino_t ino;
    char why[1024];               /* why the file is not used (fallback)   */
    dc_cache_settings set;
    int busy_limit_ms;            /* the busy handler's budget now         */
    double busy_since_ms;         /* when the current lock wait began      */
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
/* Creates the tables, application_id and user_version (no transaction). */
int dc_cache_create_schema(sqlite3 *db);
/* What `db` holds, from reads only. Returns SQLite's code. */
int dc_cache_classify(sqlite3 *db, dc_cache_kind *kind);
/* dc_cache_classify, and for an empty file opened `writable` creates the
 * schema under the write lock (then *kind = DC_KIND_OURS). */
int dc_cache_check_schema(sqlite3 *db, int writable, dc_cache_kind *kind);

/* Sleeps (cache_sql.c); durations use dc_now_ms (base/clock.h). */
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

/* The space kept back for releasing claims on a full disk
 * (cache_open.c): made at a writable open when absent, deleted (1) when a
 * release fails with SQLITE_FULL. */
void dc_cache_make_reserve(dc_cache *c);
/* 1 when `rc` (of c's connection) means no space: SQLITE_FULL, or an I/O
 * error while the folder has less than DC_CACHE_FULL_BELOW bytes free. */
#define DC_CACHE_FULL_BELOW (64 * 1024)
int dc_cache_is_full_rc(const dc_cache *c, int rc);
int dc_cache_free_reserve(dc_cache *c);

#endif /* DCPTOPK_CACHE_INT_H */
