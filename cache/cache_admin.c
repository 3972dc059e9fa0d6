/*
 * cache_admin.c - inspection and maintenance of a cache file: listing,
 * lookup by key prefix, blob reads, statistics, verification, pruning,
 * removal, export and import. src/cache_api.c wraps these for the public
 * API; the runtime uses dc_cache_remove through dc_cache_invalidate.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_int.h"
#include "log.h"

/* An entry's hits and last use: what entries holds (what an imported file
 * counted) plus its row of table usage (cache_sql.c, schema_sql). Every
 * query reads entries as `e` joined with usage as `u` (FROM_ENTRIES). */
#define HITS "e.hits + coalesce(u.hits, 0)"
#define LAST_USED "max(e.last_used, coalesce(u.last_used, 0))"
#define FROM_ENTRIES " FROM entries e LEFT JOIN usage u ON u.key = e.key"

#define ENTRY_COLUMNS                                                          \
    "e.key, e.kernel, e.fields, e.arch, e.nvrtc_version, e.lib_version, "      \
    "length(e.cubin), length(e.ptx), length(e.source), e.compile_ms, "        \
    "e.created, " LAST_USED ", " HITS

/* Every column, in table order (the blobs last), as written to another
 * file: hits and last_used folded in from usage. */
#define ALL_COLUMNS                                                            \
    "key, kernel, fields, arch, nvrtc_version, lib_version, checksum, "       \
    "compile_ms, size, created, last_used, hits, cubin, ptx, source"
#define ALL_COLUMNS_READ                                                       \
    "e.key, e.kernel, e.fields, e.arch, e.nvrtc_version, e.lib_version, "      \
    "e.checksum, e.compile_ms, e.size, e.created, " LAST_USED ", " HITS ", "  \
    "e.cubin, e.ptx, e.source"

static void copy_text(char *dst, size_t size, sqlite3_stmt *st, int col)
{
    const unsigned char *s = sqlite3_column_text(st, col);
    snprintf(dst, size, "%s", s ? (const char *)s : "");
}

static void fill_entry(sqlite3_stmt *st, dcptopk_cache_entry *e)
{
    memset(e, 0, sizeof *e);
    copy_text(e->key, sizeof e->key, st, 0);
    copy_text(e->kernel, sizeof e->kernel, st, 1);
    copy_text(e->fields, sizeof e->fields, st, 2);
    copy_text(e->arch, sizeof e->arch, st, 3);
    copy_text(e->nvrtc_version, sizeof e->nvrtc_version, st, 4);
    copy_text(e->lib_version, sizeof e->lib_version, st, 5);
    e->cubin_bytes = sqlite3_column_int64(st, 6);
    e->ptx_bytes = sqlite3_column_int64(st, 7);
    e->source_bytes = sqlite3_column_int64(st, 8);
    e->compile_ms = sqlite3_column_double(st, 9);
    e->created = sqlite3_column_int64(st, 10) / 1000;
    e->last_used = sqlite3_column_int64(st, 11) / 1000;
    e->hits = sqlite3_column_int64(st, 12);
}

static int check_handle(dc_cache *c, char *err, size_t err_size)
{
    dc_cache_after_fork(c);
    if (c && c->db)
        return 0;
    dc_cache_set_err(err, err_size, "cache = %p: not an open cache",
                     (void *)c);
    return -1;
}

static dcptopk_result need_writable(dc_cache *c, const char *what, char *err,
                                    size_t err_size)
{
    if (!c->readonly)
        return DCPTOPK_SUCCESS;
    dc_cache_set_err(err, err_size, "cache %s: %s: cannot %s", c->path,
                     c->why[0] ? c->why : "opened read-only", what);
    return DCPTOPK_CACHE_ERROR;
}

/* A key as stored holds 32 lowercase hex digits; anything else (a crafted
 * or foreign row) can never be looked up. */
static int key_is_hex(const unsigned char *key)
{
    if (!key)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((key[i] >= '0' && key[i] <= '9') ||
              (key[i] >= 'a' && key[i] <= 'f')))
            return 0;
    return key[32] == '\0';
}

/* Whether the blobs of a row match its checksum (and it holds code). */
static int row_valid(sqlite3_stmt *st, int cubin_col, int checksum_col)
{
    const void *p[3];
    size_t n[3];
    for (int i = 0; i < 3; i++) {
        p[i] = sqlite3_column_blob(st, cubin_col + i);
        n[i] = (size_t)sqlite3_column_bytes(st, cubin_col + i);
    }
    const unsigned char *stored = sqlite3_column_text(st, checksum_col);
    char sum[33];
    dc_cache_checksum(p[0], n[0], p[1], n[1], p[2], n[2], sum);
    return stored && strcmp((const char *)stored, sum) == 0 &&
           (n[0] != 0 || n[1] != 0);
}

/* One step of a SELECT: 1 on a row; 0 at its end, or on an error, which
 * then goes to *rc. */
static int next_row(sqlite3 *db, sqlite3_stmt *st, int *rc)
{
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        return 1;
    if (s != SQLITE_DONE)
        *rc = sqlite3_errcode(db);
    return 0;
}

/* Prepares `sql` (one row by key = ?1) and steps to the row of `hex`. On
 * success *st is on that row and the caller finalizes it; otherwise the
 * statement is gone and the result says why: NOT_FOUND, or the SQLite error
 * while `what`. */
static dcptopk_result find_by_key(dc_cache *c, const char *sql,
                                  const char *hex, const char *what,
                                  sqlite3_stmt **st, char *err,
                                  size_t err_size)
{
    *st = NULL;
    int rc = sqlite3_prepare_v2(c->db, sql, -1, st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(*st, 1, hex, -1, SQLITE_STATIC);
        if (next_row(c->db, *st, &rc))
            return DCPTOPK_SUCCESS;
    }
    sqlite3_finalize(*st);
    *st = NULL;
    if (rc != SQLITE_OK)
        return dc_cache_sql_fail(c->db, rc, c->path, what, err, err_size);
    dc_cache_set_err(err, err_size, "key = \"%s\": no such entry in %s", hex,
                     c->path);
    return DCPTOPK_NOT_FOUND;
}

dcptopk_result dc_cache_list(dc_cache *c, dcptopk_cache_entry **out,
                             size_t *count, char *err, size_t err_size)
{
    *out = NULL;
    *count = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT " ENTRY_COLUMNS FROM_ENTRIES
                                " ORDER BY " LAST_USED " DESC, e.rowid DESC",
                                -1, &st, NULL);
    dcptopk_cache_entry *v = NULL;
    size_t n = 0, cap = 0;
    while (rc == SQLITE_OK && next_row(c->db, st, &rc)) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            dcptopk_cache_entry *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                rc = SQLITE_NOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        fill_entry(st, &v[n++]);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        free(v);
        return dc_cache_sql_fail(c->db, rc, c->path, "listing entries", err,
                                 err_size);
    }
    *out = v;
    *count = n;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_match(dc_cache *c, const char *prefix,
                              char (*keys)[33], size_t cap, size_t *matches,
                              char *err, size_t err_size)
{
    *matches = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    sqlite3_stmt *st = NULL;
    /* GLOB is case sensitive, so it can use the primary key index. */
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT key FROM entries WHERE key GLOB ?1 "
                                "|| '*' ORDER BY key LIMIT 1000",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    size_t n = 0;
    while (rc == SQLITE_OK && next_row(c->db, st, &rc)) {
        if (n < cap)
            copy_text(keys[n], 33, st, 0);
        n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return dc_cache_sql_fail(c->db, rc, c->path, "looking up a key", err,
                                 err_size);
    *matches = n;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_entry_get(dc_cache *c, const char *hex,
                                  dcptopk_cache_entry *out, char *err,
                                  size_t err_size)
{
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    sqlite3_stmt *st;
    dcptopk_result r = find_by_key(
        c, "SELECT " ENTRY_COLUMNS FROM_ENTRIES " WHERE e.key=?1", hex,
        "reading an entry", &st, err, err_size);
    if (r != DCPTOPK_SUCCESS)
        return r;
    fill_entry(st, out);
    sqlite3_finalize(st);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_blob(dc_cache *c, const char *hex, int which,
                             void **data, size_t *size, char *err,
                             size_t err_size)
{
    *data = NULL;
    *size = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    if (which < 0 || which > 2) {
        dc_cache_set_err(err, err_size,
                         "blob = %d: expected 0 (cubin), 1 (ptx) or 2 (source)",
                         which);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    sqlite3_stmt *st;
    dcptopk_result r = find_by_key(
        c, "SELECT cubin, ptx, source, checksum FROM entries WHERE key=?1",
        hex, "reading a blob", &st, err, err_size);
    if (r != DCPTOPK_SUCCESS)
        return r;
    if (!row_valid(st, 0, 3)) {
        dc_cache_set_err(err, err_size,
                         "key = \"%s\": the entry in %s fails its checksum "
                         "(run verify to delete it)",
                         hex, c->path);
        r = DCPTOPK_CACHE_ERROR;
    } else if (dc_cache_column_copy(st, which, data, size) != 0) {
        dc_cache_set_err(err, err_size,
                         "key = \"%s\": out of memory copying a blob of %d "
                         "bytes",
                         hex, sqlite3_column_bytes(st, which));
        r = DCPTOPK_OUT_OF_MEMORY;
    }
    sqlite3_finalize(st);
    return r;
}

/* A SQLite total() (a double) as an int64: a corrupt file can hold sizes or
 * hit counts whose sum (or a NaN) does not fit, and converting such a double
 * is undefined behaviour; those saturate instead. */
static int64_t total_to_i64(double v)
{
    if (!(v > -9.2e18))
        return v < 0 ? INT64_MIN : 0; /* -huge, or NaN */
    if (!(v < 9.2e18))
        return INT64_MAX;
    return (int64_t)v;
}

dcptopk_result dc_cache_stats(dc_cache *c, dcptopk_cache_stats *out,
                              char *err, size_t err_size)
{
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT count(*), total(e.size), "
                                "total(" HITS "), total(e.compile_ms)"
                                FROM_ENTRIES,
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            out->entries = sqlite3_column_int64(st, 0);
            out->bytes = total_to_i64(sqlite3_column_double(st, 1));
            out->hits = total_to_i64(sqlite3_column_double(st, 2));
            out->compile_ms = sqlite3_column_double(st, 3);
        } else {
            rc = sqlite3_errcode(c->db);
        }
    }
    sqlite3_finalize(st);
    int64_t pages = 0, page_size = 0;
    /* Compiles in progress: live claims only (a dead holder's claim is
     * stale, not in progress). */
    if (rc == SQLITE_OK) {
        dc_cache_claim *v = NULL;
        size_t nc = 0;
        char cerr[256];
        if (dc_cache_claims(c, &v, &nc, cerr, sizeof cerr) != DCPTOPK_SUCCESS)
            rc = sqlite3_errcode(c->db) != SQLITE_OK ? sqlite3_errcode(c->db)
                                                     : SQLITE_ERROR;
        out->claims = 0;
        for (size_t i = 0; i < nc; i++)
            out->claims += !v[i].stale;
        free(v);
    }
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(c->db, "PRAGMA page_count", &pages);
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(c->db, "PRAGMA page_size", &page_size);
    if (rc != SQLITE_OK)
        return dc_cache_sql_fail(c->db, rc, c->path, "computing statistics",
                                 err, err_size);
    out->file_bytes = pages * page_size;
    return DCPTOPK_SUCCESS;
}

/* A growable list of (key, checksum) pairs. A key longer than the buffer
 * (a crafted row) is not listed, so it cannot be confused with another. */
typedef struct key_list {
    char (*keys)[2][256];
    size_t n, cap;
} key_list;

static int key_list_add(key_list *l, const unsigned char *key,
                        const unsigned char *sum)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 16;
        void *nv = realloc(l->keys, ncap * sizeof *l->keys);
        if (!nv)
            return -1;
        l->keys = nv;
        l->cap = ncap;
    }
    if ((key && strlen((const char *)key) >= 256) ||
        (sum && strlen((const char *)sum) >= 256))
        return 0;
    snprintf(l->keys[l->n][0], 256, "%s", key ? (const char *)key : "");
    snprintf(l->keys[l->n][1], 256, "%s", sum ? (const char *)sum : "");
    l->n++;
    return 0;
}

/* Deletes the listed rows, inside the caller's transaction (matching the
 * checksum too when with_sum: a row replaced meanwhile is kept). */
static int delete_listed(dc_cache *c, const key_list *l, int with_sum)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        c->db,
        with_sum ? "DELETE FROM entries WHERE key=?1 AND checksum=?2"
                 : "DELETE FROM entries WHERE key=?1",
        -1, &st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < l->n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, l->keys[i][0], -1, SQLITE_STATIC);
        if (with_sum)
            sqlite3_bind_text(st, 2, l->keys[i][1], -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = sqlite3_errcode(c->db);
    }
    sqlite3_finalize(st);
    return rc;
}

/* delete_listed in a transaction of its own. */
static int delete_keys(dc_cache *c, const key_list *l, int with_sum)
{
    if (!l->n)
        return SQLITE_OK;
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK)
        rc = delete_listed(c, l, with_sum);
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK)
        dc_cache_rollback(c);
    return rc;
}

dcptopk_result dc_cache_verify(dc_cache *c, int64_t *checked, int64_t *bad,
                               int64_t *kept, char *err, size_t err_size)
{
    *checked = 0;
    *bad = 0;
    if (kept)
        *kept = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    key_list l = {0};
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        c->db, "SELECT key, checksum, cubin, ptx, source FROM entries", -1,
        &st, NULL);
    while (rc == SQLITE_OK && next_row(c->db, st, &rc)) {
        (*checked)++;
        const unsigned char *key = sqlite3_column_text(st, 0);
        int good = key_is_hex(key) && row_valid(st, 2, 1);
        if (!good && key_list_add(&l, key, sqlite3_column_text(st, 1)) != 0)
            rc = SQLITE_NOMEM;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && !c->readonly)
        rc = delete_keys(c, &l, 1);
    *bad = (int64_t)l.n;
    if (kept && c->readonly)
        *kept = (int64_t)l.n;
    free(l.keys);
    if (rc != SQLITE_OK)
        return dc_cache_sql_fail(c->db, rc, c->path, "verifying entries", err,
                                 err_size);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_prune(dc_cache *c, int64_t max_bytes,
                              const char *keep_hex, int64_t *removed,
                              char *err, size_t err_size)
{
    if (removed)
        *removed = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    if (max_bytes < 0) {
        dc_cache_set_err(err, err_size, "max_bytes = %lld: must be >= 0",
                         (long long)max_bytes);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    dcptopk_result r = need_writable(c, "prune it", err, err_size);
    if (r != DCPTOPK_SUCCESS)
        return r;
    key_list l = {0};
    sqlite3_stmt *st = NULL;
    int64_t total = 0;
    /* Choose and delete under one write lock, so that concurrent pruners
     * do not both delete down past the cap. */
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK)
        rc = dc_cache_read_int(c->db, "SELECT total(size) FROM entries",
                               &total);
    if (rc == SQLITE_OK && total > max_bytes) {
        rc = sqlite3_prepare_v2(c->db,
                                "SELECT e.key, e.size" FROM_ENTRIES
                                " WHERE e.key IS NOT ?1 ORDER BY " LAST_USED
                                ", e.rowid",
                                -1, &st, NULL);
        if (rc == SQLITE_OK && keep_hex)
            sqlite3_bind_text(st, 1, keep_hex, -1, SQLITE_STATIC);
        while (rc == SQLITE_OK && total > max_bytes &&
               next_row(c->db, st, &rc)) {
            total -= sqlite3_column_int64(st, 1);
            if (key_list_add(&l, sqlite3_column_text(st, 0), NULL) != 0)
                rc = SQLITE_NOMEM;
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK && l.n)
            rc = delete_listed(c, &l, 0);
    }
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK)
        dc_cache_rollback(c);
    if (rc == SQLITE_OK && removed)
        *removed = (int64_t)l.n;
    free(l.keys);
    if (rc != SQLITE_OK)
        return dc_cache_sql_fail(c->db, rc, c->path, "pruning entries", err,
                                 err_size);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_remove(dc_cache *c, const char *hex, char *err,
                               size_t err_size)
{
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    dcptopk_result r = need_writable(c, "remove an entry", err, err_size);
    if (r != DCPTOPK_SUCCESS)
        return r;
    sqlite3_stmt *st = NULL;
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    int changed = 0;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db, "DELETE FROM entries WHERE key=?1", -1,
                                &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = sqlite3_errcode(c->db);
        else
            changed = sqlite3_changes(c->db);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK) {
        dc_cache_rollback(c);
        return dc_cache_sql_fail(c->db, rc, c->path, "removing an entry", err,
                                 err_size);
    }
    if (!changed) {
        dc_cache_set_err(err, err_size, "key = \"%s\": no such entry in %s",
                         hex, c->path);
        return DCPTOPK_NOT_FOUND;
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_cache_clear(dc_cache *c, int64_t *removed, char *err,
                              size_t err_size)
{
    if (removed)
        *removed = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    dcptopk_result r = need_writable(c, "clear it", err, err_size);
    if (r != DCPTOPK_SUCCESS)
        return r;
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    int changed = 0;
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "DELETE FROM entries");
    if (rc == SQLITE_OK)
        changed = sqlite3_changes(c->db);
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK) {
        dc_cache_rollback(c);
        return dc_cache_sql_fail(c->db, rc, c->path, "clearing entries", err,
                                 err_size);
    }
    if (removed)
        *removed = changed;
    return DCPTOPK_SUCCESS;
}

/* ----------------------------------------------------------- export/import */

/* Copies the valid rows of `src` (a SELECT ALL_COLUMNS_READ) into `dst`,
 * keeping existing keys. *added counts rows inserted, *skipped bad rows. */
static int copy_rows(sqlite3 *srcdb, sqlite3 *dst, int64_t *added,
                     int64_t *skipped)
{
    sqlite3_stmt *src = NULL, *ins = NULL;
    int rc = sqlite3_prepare_v2(srcdb,
                                "SELECT " ALL_COLUMNS_READ FROM_ENTRIES, -1,
                                &src, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(dst,
                                "INSERT OR IGNORE INTO entries(" ALL_COLUMNS
                                ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
                                " ?10, ?11, ?12, ?13, ?14, ?15)",
                                -1, &ins, NULL);
    while (rc == SQLITE_OK && next_row(srcdb, src, &rc)) {
        if (!row_valid(src, 12, 6)) {
            (*skipped)++;
            continue;
        }
        sqlite3_reset(ins);
        for (int i = 0; i < 15; i++)
            sqlite3_bind_value(ins, i + 1, sqlite3_column_value(src, i));
        /* Recompute the size rather than trust it. */
        int64_t size = 0;
        for (int i = 12; i < 15; i++)
            size += sqlite3_column_bytes(src, i);
        sqlite3_bind_int64(ins, 9, size);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            rc = sqlite3_errcode(dst);
            if (rc == SQLITE_OK)
                rc = SQLITE_ERROR;
            break;
        }
        *added += sqlite3_changes(dst);
    }
    sqlite3_finalize(src);
    sqlite3_finalize(ins);
    return rc;
}

dcptopk_result dc_cache_export(dc_cache *c, const char *path, int64_t *count,
                               char *err, size_t err_size)
{
    *count = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    /* Created exclusively and never through a link (a dangling symbolic
     * link at `path` is refused, not followed), 0600: it holds code. */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600);
    if (fd < 0) {
        int e = errno;
        dc_cache_set_err(err, err_size, "path = \"%s\": %s", path,
                         e == EEXIST ? "already exists (export writes a new "
                                       "file; a symbolic link is not "
                                       "followed)"
                                     : strerror(e));
        return e == EEXIST ? DCPTOPK_INVALID_ARGUMENT : DCPTOPK_IO_ERROR;
    }
    close(fd);
    sqlite3 *dst = NULL;
    int rc = sqlite3_open_v2(path, &dst,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW |
                                 SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        char what[DC_CACHE_PATH_MAX + 64];
        snprintf(what, sizeof what, "creating the export file \"%s\"", path);
        dcptopk_result r =
            dc_cache_sql_fail(dst, rc, c->path, what, err, err_size);
        sqlite3_close(dst);
        unlink(path);
        return r == DCPTOPK_CACHE_ERROR ? DCPTOPK_IO_ERROR : r;
    }
    sqlite3_extended_result_codes(dst, 1);
    int64_t added = 0, skipped = 0;
    sqlite3 *faulty = dst;
    rc = sqlite3_exec(dst, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = dc_cache_create_schema(dst);
    if (rc == SQLITE_OK) {
        rc = copy_rows(c->db, dst, &added, &skipped);
        if (rc != SQLITE_OK && sqlite3_errcode(c->db) == rc)
            faulty = c->db;
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(dst, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        char what[DC_CACHE_PATH_MAX + 64];
        snprintf(what, sizeof what, "exporting to \"%s\"", path);
        dcptopk_result r =
            dc_cache_sql_fail(faulty, rc, c->path, what, err, err_size);
        sqlite3_close(dst);
        unlink(path);
        return r;
    }
    if (sqlite3_close(dst) != SQLITE_OK) {
        dc_cache_set_err(err, err_size, "path = \"%s\": cannot close the "
                                        "export file",
                         path);
        return DCPTOPK_IO_ERROR;
    }
    if (skipped)
        dc_log_warn("cache %s: %lld entr%s failed %s checksum and were not "
                    "exported (run verify)",
                    c->path, (long long)skipped, skipped == 1 ? "y" : "ies",
                    skipped == 1 ? "its" : "their");
    *count = added;
    return DCPTOPK_SUCCESS;
}

/* One row of the file being imported, read into `row` (blobs pointing into
 * `st`, valid until the next step). */
static void import_row(sqlite3_stmt *st, dc_import_row *row)
{
    memset(row, 0, sizeof *row);
    row->key = (const char *)sqlite3_column_text(st, 0);
    row->meta.kernel = (const char *)sqlite3_column_text(st, 1);
    row->meta.fields = (const char *)sqlite3_column_text(st, 2);
    row->meta.arch = (const char *)sqlite3_column_text(st, 3);
    row->meta.nvrtc_version = (const char *)sqlite3_column_text(st, 4);
    row->meta.lib_version = (const char *)sqlite3_column_text(st, 5);
    row->blobs.cubin = sqlite3_column_blob(st, 12);
    row->blobs.cubin_size = (size_t)sqlite3_column_bytes(st, 12);
    row->blobs.ptx = sqlite3_column_blob(st, 13);
    row->blobs.ptx_size = (size_t)sqlite3_column_bytes(st, 13);
    row->blobs.source = (const char *)sqlite3_column_blob(st, 14);
    row->blobs.source_size = (size_t)sqlite3_column_bytes(st, 14);
    row->blobs.compile_ms = sqlite3_column_double(st, 7);
}

static void import_reject(const char *path, const char *key, const char *why)
{
    char shown[40];
    /* A crafted key may hold anything: show its start, printable only. */
    size_t i = 0;
    for (; key && key[i] && i < 32; i++)
        shown[i] = (key[i] >= 0x20 && key[i] < 0x7f) ? key[i] : '?';
    shown[i] = '\0';
    dc_log_warn("cache import %s: entry %s rejected: %s", path, shown, why);
}

/* Inserts one accepted row (a transaction of its own: the checks between
 * rows may compile for seconds and must not hold the write lock). Returns
 * SQLite's code; *added += 1 when the key was new. */
static int import_insert(dc_cache *c, sqlite3_stmt *src, int64_t *added)
{
    sqlite3_stmt *ins = NULL;
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db,
                                "INSERT OR IGNORE INTO entries(" ALL_COLUMNS
                                ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
                                " ?10, ?11, ?12, ?13, ?14, ?15)",
                                -1, &ins, NULL);
    if (rc == SQLITE_OK) {
        for (int i = 0; i < 15; i++)
            sqlite3_bind_value(ins, i + 1, sqlite3_column_value(src, i));
        /* Recompute the size rather than trust it. */
        int64_t size = 0;
        for (int i = 12; i < 15; i++)
            size += sqlite3_column_bytes(src, i);
        sqlite3_bind_int64(ins, 9, size);
        if (sqlite3_step(ins) != SQLITE_DONE)
            rc = sqlite3_errcode(c->db);
        else
            *added += sqlite3_changes(c->db);
    }
    sqlite3_finalize(ins);
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK)
        dc_cache_rollback(c);
    return rc;
}

dcptopk_result dc_cache_import(dc_cache *c, const char *path,
                               dc_import_check_fn check, void *user,
                               int64_t *count, int64_t *rejected, char *err,
                               size_t err_size)
{
    *count = 0;
    if (rejected)
        *rejected = 0;
    if (check_handle(c, err, err_size))
        return DCPTOPK_INVALID_ARGUMENT;
    dcptopk_result r = need_writable(c, "import into it", err, err_size);
    if (r != DCPTOPK_SUCCESS)
        return r;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        dc_cache_set_err(err, err_size, "path = \"%s\": %s", path,
                         strerror(errno));
        return errno == ENOENT ? DCPTOPK_NOT_FOUND : DCPTOPK_IO_ERROR;
    }
    if (!S_ISREG(sb.st_mode)) {
        dc_cache_set_err(err, err_size, "path = \"%s\": not a regular file",
                         path);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    sqlite3 *src = NULL;
    int rc = sqlite3_open_v2(path, &src,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    dc_cache_kind kind = DC_KIND_FOREIGN;
    if (rc == SQLITE_OK) {
        sqlite3_extended_result_codes(src, 1);
        sqlite3_busy_timeout(src, 10000);
        rc = dc_cache_classify(src, &kind);
    }
    if (rc != SQLITE_OK || kind != DC_KIND_OURS) {
        if (rc == SQLITE_OK)
            dc_cache_set_err(err, err_size,
                             "path = \"%s\": not a dcptopk cache of file "
                             "version %d",
                             path, DC_CACHE_FILE_VERSION);
        else {
            /* errmsg says "not an error" once the failed statement is
             * reset: only a message about an error is appended. */
            const char *msg = src && sqlite3_errcode(src) != SQLITE_OK
                                  ? sqlite3_errmsg(src)
                                  : NULL;
            if (msg && strcmp(msg, sqlite3_errstr(rc)) == 0)
                msg = NULL;
            dc_cache_set_err(err, err_size,
                             "path = \"%s\": cannot be read: SQLite error %d "
                             "(%s)%s%s",
                             path, rc, sqlite3_errstr(rc), msg ? ": " : "",
                             msg ? msg : "");
        }
        sqlite3_close(src);
        return DCPTOPK_CACHE_ERROR;
    }
    /* The sizes come first (length() reads no blob), so that a huge row is
     * refused before its blobs are read into memory. */
    sqlite3_stmt *list = NULL, *row_st = NULL, *have = NULL;
    rc = sqlite3_prepare_v2(src,
                            "SELECT key, ifnull(length(cubin),0) + "
                            "ifnull(length(ptx),0) + ifnull(length(source),0)"
                            " FROM entries ORDER BY key",
                            -1, &list, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(src,
                                "SELECT " ALL_COLUMNS_READ FROM_ENTRIES
                                " WHERE e.key=?1",
                                -1, &row_st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db, "SELECT 1 FROM entries WHERE key=?1",
                                -1, &have, NULL);
    int64_t added = 0, skipped = 0;
    sqlite3 *faulty = src;
    char why[1024];
    while (rc == SQLITE_OK && next_row(src, list, &rc)) {
        const char *key = (const char *)sqlite3_column_text(list, 0);
        int64_t bytes = sqlite3_column_int64(list, 1);
        sqlite3_reset(have);
        sqlite3_bind_text(have, 1, key ? key : "", -1, SQLITE_TRANSIENT);
        int s = sqlite3_step(have);
        if (s == SQLITE_ROW)
            continue; /* existing keys are kept */
        if (s != SQLITE_DONE) {
            rc = sqlite3_errcode(c->db);
            faulty = c->db;
            break;
        }
        if (bytes > c->set.import_max_bytes) {
            snprintf(why, sizeof why,
                     "%lld bytes, more than DCPTOPK_CACHE_IMPORT_MAX_BYTES "
                     "(%lld)",
                     (long long)bytes, (long long)c->set.import_max_bytes);
            import_reject(path, key, why);
            skipped++;
            continue;
        }
        sqlite3_reset(row_st);
        sqlite3_bind_text(row_st, 1, key ? key : "", -1, SQLITE_TRANSIENT);
        if (!next_row(src, row_st, &rc))
            continue;
        if (!row_valid(row_st, 12, 6)) {
            import_reject(path, key, "its checksum fails");
            skipped++;
            continue;
        }
        if (check) {
            dc_import_row row;
            import_row(row_st, &row);
            why[0] = '\0';
            int v = check(user, &row, why, sizeof why);
            if (v < 0) {
                dc_cache_set_err(err, err_size, "cache import %s: %s", path,
                                 why);
                sqlite3_finalize(list);
                sqlite3_finalize(row_st);
                sqlite3_finalize(have);
                sqlite3_close(src);
                *count = added;
                if (rejected)
                    *rejected = skipped;
                return DCPTOPK_CACHE_ERROR;
            }
            if (v > 0) {
                import_reject(path, key, why);
                skipped++;
                continue;
            }
        }
        rc = import_insert(c, row_st, &added);
        if (rc != SQLITE_OK)
            faulty = c->db;
    }
    sqlite3_finalize(list);
    sqlite3_finalize(row_st);
    sqlite3_finalize(have);
    *count = added;
    if (rejected)
        *rejected = skipped;
    if (rc != SQLITE_OK) {
        char what[DC_CACHE_PATH_MAX + 64];
        snprintf(what, sizeof what, "importing \"%s\"", path);
        r = dc_cache_sql_fail(faulty, rc, c->path, what, err, err_size);
        sqlite3_close(src);
        return r;
    }
    sqlite3_close(src);
    return DCPTOPK_SUCCESS;
}
