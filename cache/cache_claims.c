/*
 * cache_claims.c - the claim protocol that makes concurrent processes (and
 * threads) compile each key once: a claim row names its owner (pid, host and
 * a per-process random token) and its start time; a claim is honoured while
 * its owner lives and it is younger than the claim timeout.
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

/* ----------------------------------------------------------------- claims */

/* 1 if a claim row exists (filled in), 0 if none, -1 on error (*rc). */
int dc_cache_read_claim(dc_cache *c, const char *hex, claim_row *row, int *rc)
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

/* How far in the future a claim may be dated (clock skew between hosts
 * sharing a folder) before it counts as stale: such a claim would otherwise
 * never reach the timeout. */
#define DC_CLAIM_FUTURE_MS 2000

/* Whether a claim still binds us: its owner lives (as far as we can tell),
 * it is younger than the claim timeout and not dated in the future. */
int dc_cache_claim_is_live(const dc_cache *c, const claim_row *row)
{
    int64_t pid, token;
    char host[256];
    dc_cache_identity(&pid, &token, host);
    int64_t age = dc_cache_now_ms() - row->started;
    if ((double)age > c->set.claim_timeout_s * 1000.0 ||
        age < -DC_CLAIM_FUTURE_MS)
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
 * claimant's store. Any error reads as 0 (dc_cache_try_claim decides under the
 * write lock). */
int dc_cache_live_claim_seen(dc_cache *c, const char *hex)
{
    claim_row row;
    int rc = SQLITE_OK;
    return dc_cache_read_claim(c, hex, &row, &rc) > 0 && dc_cache_claim_is_live(c, &row);
}

/* The pause between two looks at a claimed key: 1, 2, 4, then 5 ms, so a
 * waiter sees a stored entry within about 5 ms (a compile takes 10 ms to
 * seconds) at the cost of two indexed reads per look. */
int dc_cache_claim_poll_ms(int polls) { return polls < 3 ? 1 << polls : 5; }

int dc_cache_try_claim(dc_cache *c, const char *hex, int *rc_out)
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
    int found = dc_cache_read_claim(c, hex, &row, &rc);
    if (found < 0)
        goto out;
    if (found && dc_cache_claim_is_live(c, &row)) {
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

const char dc_cache_release_sql[] =
    "DELETE FROM claims WHERE key=?1 AND pid=?2 AND host=?3 AND token=?4";

int dc_cache_bind_release(sqlite3_stmt *st, const char *hex)
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

/* Drops our claim. A failure (busy past the budget) is retried a few
 * times: a claim left behind makes others wait until it goes stale. On a
 * full disk the reserve is given up first, so that the delete finds its
 * journal space. */
void dc_cache_release_claim(dc_cache *c, const char *hex)
{
    int freed = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(c->db, dc_cache_release_sql, -1, &st,
                                    NULL);
        if (rc == SQLITE_OK) {
            dc_cache_bind_release(st, hex);
            rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK
                                                 : sqlite3_errcode(c->db);
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK || dc_cache_is_corrupt_rc(rc))
            return;
        if (!freed && dc_cache_is_full_rc(c, rc)) {
            freed = 1;
            if (dc_cache_free_reserve(c))
                continue;
        }
        dc_cache_sleep_ms(10);
    }
}

/* ------------------------------------------------------------- listing */

dcptopk_result dc_cache_claims(dc_cache *c, dc_cache_claim **out,
                               size_t *count, char *err, size_t err_size)
{
    *out = NULL;
    *count = 0;
    dc_cache_after_fork(c);
    if (!c || !c->db) {
        dc_cache_set_err(err, err_size, "cache = %p: not an open cache",
                         (void *)c);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT key, pid, host, token, started FROM "
                                "claims ORDER BY started, key",
                                -1, &st, NULL);
    dc_cache_claim *v = NULL;
    size_t n = 0, cap = 0;
    while (rc == SQLITE_OK) {
        int s = sqlite3_step(st);
        if (s == SQLITE_DONE)
            break;
        if (s != SQLITE_ROW) {
            rc = sqlite3_errcode(c->db);
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            dc_cache_claim *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                rc = SQLITE_NOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        dc_cache_claim *e = &v[n++];
        memset(e, 0, sizeof *e);
        const unsigned char *k = sqlite3_column_text(st, 0);
        const unsigned char *h = sqlite3_column_text(st, 2);
        snprintf(e->key, sizeof e->key, "%s", k ? (const char *)k : "");
        snprintf(e->host, sizeof e->host, "%s", h ? (const char *)h : "");
        e->pid = sqlite3_column_int64(st, 1);
        e->started_ms = sqlite3_column_int64(st, 4);
        claim_row row = {e->pid, sqlite3_column_int64(st, 3), e->started_ms,
                         ""};
        snprintf(row.host, sizeof row.host, "%s", e->host);
        e->stale = !dc_cache_claim_is_live(c, &row);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        free(v);
        return dc_cache_sql_fail(c->db, rc, c->path, "listing claims", err,
                                 err_size);
    }
    *out = v;
    *count = n;
    return DCPTOPK_SUCCESS;
}

static int clear_stale_once(dc_cache *c, int64_t *removed);

dcptopk_result dc_cache_claims_clear_stale(dc_cache *c, int64_t *removed,
                                           char *err, size_t err_size)
{
    if (removed)
        *removed = 0;
    dc_cache_after_fork(c);
    if (!c || !c->db) {
        dc_cache_set_err(err, err_size, "cache = %p: not an open cache",
                         (void *)c);
        return DCPTOPK_INVALID_ARGUMENT;
    }
    if (c->readonly || c->memory) {
        dc_cache_set_err(err, err_size, "cache %s: %s: cannot clear claims",
                         c->path, c->why[0] ? c->why : "opened read-only");
        return DCPTOPK_CACHE_ERROR;
    }
    int64_t n = 0;
    int rc = clear_stale_once(c, &n);
    /* A full disk: the delete's journal space comes from the reserve. */
    if (dc_cache_is_full_rc(c, rc) && dc_cache_free_reserve(c)) {
        n = 0;
        rc = clear_stale_once(c, &n);
    }
    if (rc != SQLITE_OK)
        return dc_cache_sql_fail(c->db, rc, c->path, "clearing stale claims",
                                 err, err_size);
    if (removed)
        *removed = n;
    return DCPTOPK_SUCCESS;
}

/* One try of dc_cache_claims_clear_stale: SQLite's code; *removed the rows
 * deleted. */
static int clear_stale_once(dc_cache *c, int64_t *removed)
{
    /* Chosen and deleted under one write lock, each row as it was read: a
     * claim renewed meanwhile (another started) is kept. */
    int rc = dc_cache_exec(c, "BEGIN IMMEDIATE");
    sqlite3_stmt *sel = NULL, *del = NULL;
    int64_t n = 0;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db,
                                "SELECT key, pid, host, token, started FROM "
                                "claims",
                                -1, &sel, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db,
                                "DELETE FROM claims WHERE key=?1 AND "
                                "token=?2 AND started=?3",
                                -1, &del, NULL);
    while (rc == SQLITE_OK) {
        int s = sqlite3_step(sel);
        if (s == SQLITE_DONE)
            break;
        if (s != SQLITE_ROW) {
            rc = sqlite3_errcode(c->db);
            break;
        }
        claim_row row = {sqlite3_column_int64(sel, 1),
                         sqlite3_column_int64(sel, 3),
                         sqlite3_column_int64(sel, 4), ""};
        const unsigned char *h = sqlite3_column_text(sel, 2);
        snprintf(row.host, sizeof row.host, "%s", h ? (const char *)h : "");
        if (dc_cache_claim_is_live(c, &row))
            continue;
        sqlite3_reset(del);
        sqlite3_bind_value(del, 1, sqlite3_column_value(sel, 0));
        sqlite3_bind_int64(del, 2, row.token);
        sqlite3_bind_int64(del, 3, row.started);
        if (sqlite3_step(del) != SQLITE_DONE)
            rc = sqlite3_errcode(c->db);
        else
            n += sqlite3_changes(c->db);
    }
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    if (rc == SQLITE_OK)
        rc = dc_cache_exec(c, "COMMIT");
    if (rc != SQLITE_OK)
        dc_cache_rollback(c);
    else
        *removed = n;
    return rc;
}

