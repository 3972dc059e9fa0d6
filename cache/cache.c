/*
 * cache.c - the compile cache's lookup and store: dc_cache_get_or_compile
 * reads an entry, or claims its key (cache_claims.c), compiles outside any
 * transaction and stores the result.
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
#include "clock.h"
#include "log.h"

static atomic_uint_fast64_t process_compiles;

uint64_t dc_cache_process_compiles(void)
{
    return (uint64_t)atomic_load(&process_compiles);
}

/* ------------------------------------------------------------------- read */

enum { READ_HIT, READ_MISS, READ_BAD, READ_ERROR };

/* Reads and verifies one entry. On READ_BAD, `bad_sum` holds the stored
 * checksum; on READ_ERROR, *rc the SQLite code. */
static int read_entry(sqlite3 *db, const char *hex, dc_cache_hit *out,
                      char bad_sum[33], int *rc_out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db,
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
    c->busy_limit_ms = c->set.busy_ms < 100 ? c->set.busy_ms : 100;
    sqlite3_stmt *st = NULL;
    const char *sql =
        "INSERT INTO usage(key, hits, last_used) SELECT ?1, 1, ?2 WHERE "
        "EXISTS(SELECT 1 FROM entries WHERE key=?1) ON CONFLICT(key) DO "
        "UPDATE SET hits=hits+1, last_used=excluded.last_used";
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, dc_cache_now_ms());
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    c->busy_limit_ms = c->set.busy_ms;
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

/* ------------------------------------------------------------------ store */

/* Inserts the entry and drops our claim in one transaction. First writer
 * wins: an entry stored meanwhile (after a claim takeover) is kept. */
static atomic_int fail_stores;

void dc_cache_test_fail_stores(int on) { atomic_store(&fail_stores, on); }

static int store_entry(sqlite3 *db, const char *hex, const dc_cache_meta *m,
                       const dc_cache_blobs *b, int claimed)
{
    char sum[33];
    dc_cache_checksum(b->cubin, b->cubin_size, b->ptx, b->ptx_size, b->source,
                      b->source_size, sum);
    int64_t now = dc_cache_now_ms();
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_stmt *st = NULL;
    if (rc == SQLITE_OK && claimed >= 0 && atomic_load(&fail_stores))
        rc = SQLITE_FULL; /* the test hook: as a full disk would */
    if (rc != SQLITE_OK)
        goto out;
    rc = sqlite3_prepare_v2(
        db,
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
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_OK)
        goto out;
    if (claimed > 0) {
        rc = sqlite3_prepare_v2(db, dc_cache_release_sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
            goto out;
        dc_cache_bind_release(st, hex);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK
                                             : sqlite3_errcode(db);
        if (rc != SQLITE_OK)
            goto out;
    }
    rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
out:
    sqlite3_finalize(st);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ------------------------------------------------------- get_or_compile */

static void store_warn(dc_cache *c, const char *hex, int rc)
{
    if (c->warned_store)
        return;
    c->warned_store = 1;
    if (dc_cache_is_full_rc(c, rc))
        dc_log_warn("cache %s: cannot store kernel %s (SQLite error %d: %s;"
                    " the disk or the database is full): compiling the "
                    "missing kernels once each in this process, without "
                    "storing them",
                    c->path, hex, rc, sqlite3_errstr(rc));
    else
        dc_log_warn("cache %s: cannot store kernel %s (SQLite error %d: "
                    "%s): running uncached",
                    c->path, hex, rc, sqlite3_errstr(rc));
}

/* After a store failed for lack of space: an in-memory database keeps what
 * this handle compiles from now on, so that a key asked for again (the
 * warmup's compile phase, then its load phase) is not compiled again, and
 * no more claims are taken (a claim would make other processes wait for a
 * store that cannot happen). */
static void go_full(dc_cache *c)
{
    c->full = 1;
    if (c->spill)
        return;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(":memory:", &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                            SQLITE_OPEN_NOMUTEX,
                        NULL) == SQLITE_OK &&
        dc_cache_create_schema(db) == SQLITE_OK)
        c->spill = db;
    else
        sqlite3_close(db);
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

/* One warning when a wait on another process's claim passes 5 s: who holds
 * it and when it goes stale, so that a stuck claimant is not silent. */
static void warn_long_wait(dc_cache *c, const char *hex, double waited_ms)
{
    if (c->warned_wait || waited_ms < 5000.0)
        return;
    c->warned_wait = 1;
    claim_row row;
    int rc = SQLITE_OK;
    if (dc_cache_read_claim(c, hex, &row, &rc) <= 0)
        return;
    double age_s = (double)(dc_cache_now_ms() - row.started) / 1000.0;
    dc_log_warn("cache %s: waiting %.0f s for kernel %s, which pid %lld on "
                "host %s has been compiling for %.0f s; its claim goes "
                "stale after %.0f s (DCPTOPK_CACHE_CLAIM_TIMEOUT; 'dcptopk "
                "cache claims' lists claims)",
                c->path, waited_ms / 1000.0, hex, (long long)row.pid,
                row.host, age_s, c->set.claim_timeout_s);
}

enum { LOOK_HIT, LOOK_COMPILE, LOOK_ERROR };

/* Looks `hex` up until it is found or this process must compile it: the
 * phase of dc_cache_get_or_compile before the compile. Sets *claimed when
 * this process holds the key's claim, *store when the result may be stored
 * into the file. */
static int look_up(dc_cache *c, const char *hex, dc_cache_hit *out,
                   int *claimed, int *store, dcptopk_result *res, char *err,
                   size_t err_size)
{
    int polls = 0;
    double start = dc_now_ms();
    for (;;) {
        char bad_sum[33] = "";
        int rc = SQLITE_OK;
        if (c->spill &&
            read_entry(c->spill, hex, out, bad_sum, &rc) == READ_HIT)
            return LOOK_HIT;
        int st = read_entry(c->db, hex, out, bad_sum, &rc);
        if (st == READ_HIT) {
            bump_hit(c, hex);
            return LOOK_HIT;
        }
        if (st == READ_BAD) {
            dc_log_warn("cache %s: entry %s failed its checksum: %s and "
                        "compiling it again",
                        c->path, hex,
                        c->readonly ? "ignoring it (read-only)"
                                    : "deleting it");
            delete_bad(c, hex, bad_sum);
            if (c->readonly) {
                *store = 0;
                return LOOK_COMPILE;
            }
            /* If the row could not be deleted, do not loop on it. */
            int rc2;
            dc_cache_hit tmp = {0};
            char sum2[33];
            int again = read_entry(c->db, hex, &tmp, sum2, &rc2);
            dc_cache_hit_free(&tmp);
            if (again == READ_BAD) {
                *store = 0;
                return LOOK_COMPILE;
            }
            continue;
        }
        if (st == READ_ERROR) {
            if ((rc & 0xff) == SQLITE_NOMEM) {
                dc_cache_set_err(err, err_size, "cache %s: out of memory "
                                                "reading entry %s",
                                 c->path, hex);
                *res = DCPTOPK_OUT_OF_MEMORY;
                return LOOK_ERROR;
            }
            if (dc_cache_is_corrupt_rc(rc) && dc_cache_recover_corrupt(c, rc))
                continue;
            store_warn(c, hex, rc);
            *store = 0;
            return LOOK_COMPILE;
        }
        /* A miss. */
        if (c->readonly) {
            *store = 0;
            return LOOK_COMPILE;
        }
        if (c->memory || c->full)
            return LOOK_COMPILE;
        /* A live claim is waited for with reads only; the write lock is
         * taken only to claim a key nobody (alive) holds, so that waiters
         * do not keep the claimant's store waiting for the lock. */
        if (!dc_cache_live_claim_seen(c, hex)) {
            int crc = SQLITE_OK;
            int cl = dc_cache_try_claim(c, hex, &crc);
            if (cl == CLAIM_TAKEN) {
                *claimed = 1;
                return LOOK_COMPILE;
            }
            if (cl == CLAIM_ENTRY_EXISTS)
                continue;
            if (cl == CLAIM_ERROR) {
                if (dc_cache_is_corrupt_rc(crc) &&
                    dc_cache_recover_corrupt(c, crc))
                    continue;
                if (dc_cache_is_full_rc(c, crc)) {
                    store_warn(c, hex, crc);
                    go_full(c);
                    return LOOK_COMPILE;
                }
                /* Cannot claim (busy past the timeout...): compile anyway
                 * and try to store (duplicates are harmless), unless a live
                 * process claimed the key meanwhile: then wait for it. */
                if (!dc_cache_live_claim_seen(c, hex))
                    return LOOK_COMPILE;
            }
        }
        /* Another live process (or thread) compiles it. Its claim goes
         * stale after the timeout; past that plus a margin, stop waiting
         * whatever happens. */
        double waited = dc_now_ms() - start;
        warn_long_wait(c, hex, waited);
        if (waited > c->set.claim_timeout_s * 1000.0 + 10000.0)
            return LOOK_COMPILE;
        dc_cache_sleep_ms(dc_cache_claim_poll_ms(polls++));
    }
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

    int claimed = 0, store = 1;
    dcptopk_result r = DCPTOPK_SUCCESS;
    int look = look_up(c, hex, out, &claimed, &store, &r, err, err_size);
    if (look == LOOK_HIT)
        return DCPTOPK_SUCCESS;
    if (look == LOOK_ERROR)
        return r;

    dc_cache_blobs b;
    memset(&b, 0, sizeof b);
    double t0 = dc_now_ms();
    r = compile(user, &b, err, err_size);
    double ms = dc_now_ms() - t0;
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
    if (r == DCPTOPK_SUCCESS && store && !c->memory && !c->full) {
        int src = store_entry(c->db, hex, meta, &b, claimed);
        if (src == SQLITE_OK) {
            claimed = 0;
            if (c->set.max_bytes > 0) {
                char perr[512];
                dc_cache_prune(c, c->set.max_bytes, hex, NULL, perr,
                               sizeof perr);
            }
        } else {
            store_warn(c, hex, src);
            if (dc_cache_is_full_rc(c, src))
                go_full(c);
        }
    } else if (r == DCPTOPK_SUCCESS && c->memory) {
        store_entry(c->db, hex, meta, &b, -1);
    }
    if (r == DCPTOPK_SUCCESS && c->full && c->spill)
        store_entry(c->spill, hex, meta, &b, -1);
    if (claimed)
        dc_cache_release_claim(c, hex);
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
