/*
 * test_cache_usage.c - how the compile cache (cache/) counts use: hits go to
 * table usage (a few bytes per hit, never a rewrite of the entry's row), the
 * listing and the least-recently-used order follow it, and the size cap and
 * prune evict by it.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "cache.h"
#include "cache_fixture.h"
#include "harness.h"

/* Stores the entries of tags[0 .. n) 5 ms apart, then looks `again` up: a
 * hit, no compile, and `again` becomes the most recently used entry. */
static void store_then_hit(dc_cache *c, const char *const *tags, int n, const char *again)
{
    cf_got g;
    for (int i = 0; i < n; i++) {
        CHECK_OK(cf_fetch(c, tags[i], 0, &g));
        cf_sleep_ms(5);
    }
    CHECK_OK(cf_fetch(c, again, 0, &g));
    CHECK_EQ(g.compiled, 0);
}

TEST(size_cap_evicts_least_recently_used)
{
    char path[512], hex[33];
    cf_fresh(path, sizeof path);
    const int64_t entry = CF_ENTRY_BYTES;
    char cap[64];
    snprintf(cap, sizeof cap, "%lld", (long long)(3 * entry + entry / 2));
    setenv("DCPTOPK_CACHE_MAX_BYTES", cap, 1);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_MAX_BYTES");
    CHECK(c != NULL);
    static const char *const tags[] = {"A", "B", "C", "D", "E"};
    store_then_hit(c, tags, 3, "A"); /* A is now the most recent */
    cf_sleep_ms(5);
    cf_got g;
    CHECK_OK(cf_fetch(c, "D", 0, &g));
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 3);
    CHECK(cf_sql(path, "SELECT sum(size) FROM entries") <= 3 * entry + entry / 2);
    static const char *const kept[] = {"A", "C", "D"};
    for (int i = 0; i < 3; i++) {
        cf_key_hex(kept[i], hex);
        CHECK_MSG(cf_rows_of(path, "entries", hex) == 1, "%s was evicted",
                  kept[i]);
    }
    cf_key_hex("B", hex);
    CHECK_EQ(cf_rows_of(path, "entries", hex), 0);

    /* An entry larger than the cap: kept alone, never itself evicted. */
    CHECK_OK(cf_fetch(c, "E", 64 * 1024, &g));
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
    CHECK_OK(cf_fetch(c, "E", 64 * 1024, &g));
    CHECK_EQ(g.compiled, 0);
    dc_cache_close(c);

    /* Explicit prune. */
    c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    int64_t removed = -1;
    char err[512];
    CHECK_OK(dc_cache_prune(c, 0, NULL, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    CHECK_EQ(dc_cache_prune(c, -1, NULL, &removed, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "max_bytes = -1");
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 0);
}

/* Bytes of `path`-wal now (0 when there is none). */
static int64_t wal_bytes(const char *path)
{
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat st;
    return stat(wal, &st) == 0 ? (int64_t)st.st_size : 0;
}

TEST(hit_writes_a_few_bytes_into_usage)
{
    char path[512], path2[512], sql[256], hex[33], err[512];
    const char *dir = cf_fresh(path, sizeof path);
    cf_path(path2, sizeof path2, dir, "export.sqlite");
    cf_key_hex("big", hex);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    const size_t big = 1 << 20; /* overflow pages, as a real cubin */
    cf_got g;
    CHECK_OK(cf_fetch(c, "big", big, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM usage"), 0);

    /* A reader holding a snapshot keeps the WAL from being checkpointed
     * and reset, so its growth is what the hits wrote. Before table usage,
     * the hit that took hits from 1 to 2 (the record grows a byte) rewrote
     * the whole row: over a megabyte. */
    sqlite3 *reader = NULL;
    CHECK_EQ(sqlite3_open(path, &reader), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM entries;",
                          NULL, NULL, NULL),
             SQLITE_OK);
    int64_t wal0 = wal_bytes(path);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(cf_fetch(c, "big", big, &g));
        CHECK_EQ(g.compiled, 0);
        CHECK(g.bytes_ok);
    }
    int64_t grown = wal_bytes(path) - wal0;
    sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(reader);
    CHECK_MSG(grown <= 3 * 16 * 1024,
              "3 hits wrote %lld bytes into the WAL", (long long)grown);

    snprintf(sql, sizeof sql, "SELECT hits FROM usage WHERE key='%s'", hex);
    CHECK_EQ(cf_sql(path, sql), 3);
    CHECK_EQ(cf_sql(path, "SELECT hits FROM entries"), 0);
    CHECK_EQ(cf_sql(path, "SELECT last_used = created FROM entries"), 1);
    CHECK_EQ(cf_sql(path, "SELECT u.last_used >= e.created FROM usage u, "
                          "entries e"),
             1);

    /* Listing, lookup and statistics add them in. */
    dcptopk_cache_entry *v = NULL;
    size_t n = 0;
    CHECK_OK(dc_cache_list(c, &v, &n, err, sizeof err));
    CHECK_EQ(n, 1);
    CHECK_EQ(v[0].hits, 3);
    CHECK(v[0].last_used >= v[0].created);
    free(v);
    dcptopk_cache_entry e;
    CHECK_OK(dc_cache_entry_get(c, hex, &e, err, sizeof err));
    CHECK_EQ(e.hits, 3);
    dcptopk_cache_stats s;
    memset(&s, 0, sizeof s);
    CHECK_OK(dc_cache_stats(c, &s, err, sizeof err));
    CHECK_EQ(s.hits, 3);

    /* An export folds them into the entries row of the new file. */
    int64_t count = 0;
    CHECK_OK(dc_cache_export(c, path2, &count, err, sizeof err));
    CHECK_EQ(count, 1);
    CHECK_EQ(cf_sql(path2, "SELECT hits FROM entries"), 3);
    CHECK_EQ(cf_sql(path2, "SELECT count(*) FROM usage"), 0);

    /* Removing the entry drops its usage row: stored again, it starts
     * from 0. */
    CHECK_OK(dc_cache_remove(c, hex, err, sizeof err));
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM usage"), 0);
    CHECK_OK(cf_fetch(c, "big", big, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK_OK(dc_cache_entry_get(c, hex, &e, err, sizeof err));
    CHECK_EQ(e.hits, 0);
    dc_cache_close(c);
}

TEST(listing_and_lru_order_use_usage)
{
    char path[512], hex[33], err[512];
    cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    static const char *const tags[] = {"A", "B", "C"};
    store_then_hit(c, tags, 3, "A"); /* the oldest is now the newest */

    dcptopk_cache_entry *v = NULL;
    size_t n = 0;
    CHECK_OK(dc_cache_list(c, &v, &n, err, sizeof err));
    CHECK_EQ(n, 3);
    static const char *const order[] = {"A", "C", "B"};
    for (size_t i = 0; i < n; i++) {
        cf_key_hex(order[i], hex);
        CHECK_MSG(strcmp(v[i].key, hex) == 0, "listing position %zu is not %s",
                  i, order[i]);
    }
    free(v);

    /* Room for two: B (least recently used) goes, not A (oldest stored). */
    const int64_t entry = CF_ENTRY_BYTES;
    int64_t removed = -1;
    CHECK_OK(dc_cache_prune(c, 2 * entry, NULL, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    cf_key_hex("B", hex);
    CHECK_EQ(cf_rows_of(path, "entries", hex), 0);
    CHECK_OK(dc_cache_prune(c, entry, NULL, &removed, err, sizeof err));
    CHECK_EQ(removed, 1);
    cf_key_hex("A", hex);
    CHECK_EQ(cf_rows_of(path, "entries", hex), 1);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM usage"), 1);
    dc_cache_close(c);
}
