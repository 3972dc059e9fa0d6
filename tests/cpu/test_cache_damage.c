/*
 * test_cache_damage.c - the compile cache (cache/) on damaged and foreign
 * files: a corrupted blob is deleted and compiled again, a corrupted file and
 * a file of another version are moved aside (at most three kept), pages
 * found malformed later are recovered, another program's database is left
 * alone, a peer's rebuilt file survives a recovery, 8 processes recovering
 * one file keep every entry, verify counts what it could not remove.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache.h"
#include "cache_fixture.h"
#include "fake_blobs.h"
#include "harness.h"

/* Overwrites n bytes of `path` at `offset` with bytes no SQLite page has. */
static void write_garbage(const char *path, long offset, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        return;
    char *g = malloc(n);
    for (size_t i = 0; i < n; i++)
        g[i] = (char)("garbage!"[i % 8] ^ (char)(i >> 3));
    if (pwrite(fd, g, n, offset) != (ssize_t)n)
        perror("pwrite");
    free(g);
    close(fd);
}

TEST(corrupted_blob_is_deleted_and_recompiled)
{
    char path[512], sql[512], hex[33];
    const char *dir = cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "victim", 0, &g));
    CHECK_EQ(g.compiled, 1);
    cf_key_hex("victim", hex);
    /* Same length, different bytes. */
    snprintf(sql, sizeof sql,
             "UPDATE entries SET cubin = zeroblob(4096) WHERE key='%s'", hex);
    CHECK_EQ(cf_sql(path, sql), -1);

    cf_capture_begin(dir);
    uint64_t before = dc_cache_process_compiles();
    dcptopk_result r = cf_fetch(c, "victim", 0, &g);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(g.compiled, 1);
    CHECK_EQ(dc_cache_process_compiles() - before, 1);
    CHECK(g.bytes_ok); /* never the zero bytes */
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "checksum");
    CHECK_CONTAINS(text, hex);
    /* The row was replaced by a good one: a hit now. */
    CHECK_OK(cf_fetch(c, "victim", 0, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
}

TEST(corrupted_file_is_moved_aside)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "first", 0, &g));
    dc_cache_close(c);
    write_garbage(path, 0, 16384);

    cf_capture_begin(dir);
    c = cf_open(path, DC_CACHE_RW);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, ".corrupt-");
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_EQ(dc_cache_is_readonly(c), 0);
    CHECK_EQ(cf_count_files(dir, "c.sqlite.corrupt-"), 1);
    CHECK_OK(cf_fetch(c, "first", 0, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    CHECK_OK(cf_fetch(c, "first", 0, &g));
    CHECK_EQ(g.compiled, 0);
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
}

TEST(malformed_pages_found_later_are_recovered)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    static const char *const tags[] = {"m0", "m1", "m2", "m3", "m4"};
    cf_got g;
    for (int i = 0; i < 5; i++)
        CHECK_OK(cf_fetch(c, tags[i], 0, &g));
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "PRAGMA wal_checkpoint(TRUNCATE)"), 0);
    /* Keep page 1 (header and schema), destroy the rest. */
    int64_t page = cf_sql(path, "PRAGMA page_size");
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    CHECK(st.st_size > 2 * page);
    write_garbage(path, (long)page, (size_t)(st.st_size - page));

    c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_capture_begin(dir);
    dcptopk_result r = cf_fetch(c, "m2", 0, &g);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK_OK(r);
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, ".corrupt-");
    CHECK_OK(cf_fetch(c, "m2", 0, &g));
    CHECK_EQ(g.compiled, 0);
    dc_cache_close(c);
}

TEST(other_file_version_is_moved_aside)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    char sql[128];
    CHECK_EQ(cf_sql(path, "CREATE TABLE entries(x)"), -1);
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d",
             DC_CACHE_APPLICATION_ID);
    CHECK_EQ(cf_sql(path, sql), -1);
    CHECK_EQ(cf_sql(path, "PRAGMA user_version=99"), -1);
    cf_capture_begin(dir);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "another file version");
    CHECK_EQ(cf_count_files(dir, "c.sqlite.old-"), 1);
    cf_got g;
    CHECK_OK(cf_fetch(c, "new", 0, &g));
    CHECK_EQ(g.compiled, 1);
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
}

TEST(another_programs_database_is_left_untouched)
{
    /* `cache verify --cache app.db` once switched another program's
     * database to WAL and renamed it. Its bytes, name and journal mode
     * must stay as they are; the cache runs in memory. */
    const char *dir = cf_dir();
    char path[512];
    cf_path(path, sizeof path, dir, "app.db");
    CHECK_EQ(cf_sql(path, "CREATE TABLE accounts(id INTEGER, name TEXT)"),
             -1);
    CHECK_EQ(cf_sql(path, "INSERT INTO accounts VALUES(1, 'a')"), -1);
    struct stat before, after;
    CHECK_EQ(stat(path, &before), 0);
    cf_capture_begin(dir);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK(dc_cache_is_memory(c));
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "not a dcptopk cache");
    dc_cache_close(c);
    CHECK_EQ(stat(path, &after), 0);
    CHECK_EQ(after.st_ino, before.st_ino);
    CHECK_EQ(after.st_size, before.st_size);
    CHECK_EQ(cf_count_files(dir, "app.db."), 0);
    CHECK_EQ(cf_count_files(dir, "app.db-wal"), 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM accounts"), 1);
    /* A maintenance open refuses it, saying why. */
    char err[1024] = "";
    dc_cache *s = NULL;
    CHECK_EQ(dc_cache_open(path, (dc_cache_open_mode)(DC_CACHE_RW |
                                                      DC_CACHE_STRICT),
                           &s, err, sizeof err),
             DCPTOPK_CACHE_ERROR);
    CHECK_CONTAINS(err, "not a dcptopk cache");
    CHECK_EQ(cf_count_files(dir, "app.db."), 0);
}

TEST(quiet_log_silences_warnings)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    write_garbage(path, 0, 8192);
    setenv("DCPTOPK_LOG", "quiet", 1);
    cf_capture_begin(dir);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    int warnings = cf_capture_end(NULL, 0);
    unsetenv("DCPTOPK_LOG");
    CHECK(c != NULL);
    CHECK_EQ(warnings, 0);
    CHECK_EQ(cf_count_files(dir, "c.sqlite.corrupt-"), 1);
    dc_cache_close(c);
}

/* The schema of the version before table usage, verbatim. */
static const char old_schema_sql[] =
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
    "PRAGMA user_version=1;";

/* Inserts the entry of `tag` as the previous version stored it, with its
 * hits and last use counted in the row. 0 on success. */
static int old_insert(sqlite3 *db, const char *tag, int64_t hits,
                      int64_t last_used_ms)
{
    const size_t sizes[3] = {4096, 777, 1234};
    unsigned char *bufs[3] = {NULL, NULL, NULL};
    dc_cache_blobs b;
    memset(&b, 0, sizeof b);
    dc_test_blobs_make(tag, sizes, bufs, &b);
    char sum[33], hex[33];
    dc_cache_checksum(b.cubin, b.cubin_size, b.ptx, b.ptx_size, b.source,
                      b.source_size, sum);
    cf_key_hex(tag, hex);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db,
        "INSERT INTO entries VALUES(?1, 'select', 'topk=2048', 'sm_90a', "
        "'13.0', '0.1.0', ?2, 1.0, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hex, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, sum, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 3, CF_ENTRY_BYTES);
        sqlite3_bind_int64(st, 4, last_used_ms - 1000);
        sqlite3_bind_int64(st, 5, last_used_ms);
        sqlite3_bind_int64(st, 6, hits);
        sqlite3_bind_blob(st, 7, b.cubin, (int)b.cubin_size, SQLITE_STATIC);
        sqlite3_bind_blob(st, 8, b.ptx, (int)b.ptx_size, SQLITE_STATIC);
        sqlite3_bind_blob(st, 9, b.source, (int)b.source_size, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(st);
    dc_test_blobs_free(bufs);
    return rc;
}

TEST(file_of_the_previous_version_is_moved_aside)
{
    /* The first file version (no table usage, no application_id) is not
     * migrated in place: it is moved aside like any other version, and a
     * new file starts. */
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, old_schema_sql, NULL, NULL, NULL), SQLITE_OK);
    int64_t now = (int64_t)time(NULL) * 1000;
    CHECK_EQ(old_insert(db, "A", 5, now - 1000000), SQLITE_OK);
    sqlite3_close(db);

    cf_capture_begin(dir);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK(c != NULL);
    CHECK(!dc_cache_is_memory(c));
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "another file version");
    CHECK_EQ(cf_count_files(dir, "c.sqlite.old-"), 1);
    cf_got g;
    CHECK_OK(cf_fetch(c, "A", 0, &g));
    CHECK_EQ(g.compiled, 1);
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
    CHECK_EQ(cf_sql(path, "PRAGMA application_id"), DC_CACHE_APPLICATION_ID);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM usage"), 0);
}

/* ------------------------------------------------------------- recovery */

TEST(recovery_keeps_the_file_a_peer_rebuilt)
{
    /* A handle finds its file damaged after a peer already moved that file
     * aside and started a new one: the new file must stay. */
    char path[512], peer_moved[600];
    const char *dir = cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    static const char *const tags[] = {"r0", "r1", "r2", "r3", "r4"};
    for (int i = 0; i < 5; i++)
        CHECK_OK(cf_fetch(c, tags[i], 0, &g));
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "PRAGMA wal_checkpoint(TRUNCATE)"), 0);
    c = cf_open(path, DC_CACHE_RW); /* holds the file about to break */
    CHECK(c != NULL);
    int64_t page = cf_sql(path, "PRAGMA page_size");
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    write_garbage(path, (long)page, (size_t)(st.st_size - page));
    /* The peer: moves the damaged file aside, builds a new one. */
    snprintf(peer_moved, sizeof peer_moved, "%s.corrupt-1", path);
    CHECK_EQ(rename(path, peer_moved), 0);
    dc_cache *peer = cf_open(path, DC_CACHE_RW);
    CHECK(peer != NULL && !dc_cache_is_memory(peer));
    CHECK_OK(cf_fetch(peer, "peer", 0, &g));
    dc_cache_close(peer);
    struct stat rebuilt;
    CHECK_EQ(stat(path, &rebuilt), 0);

    CHECK_OK(cf_fetch(c, "r2", 0, &g));
    CHECK(g.bytes_ok);
    dc_cache_close(c);
    struct stat now;
    CHECK_EQ(stat(path, &now), 0);
    CHECK_EQ(now.st_ino, rebuilt.st_ino);
    CHECK_EQ(cf_count_files(dir, ".corrupt-"), 1);
    char hex[33];
    cf_key_hex("peer", hex);
    CHECK_EQ(cf_rows_of(path, "entries", hex), 1);
}

/* One of the processes that open a damaged file at once: each fetches a
 * key of its own (p<p>), which compiles and stores it. */
static int fetch_own_key(int p, void *arg)
{
    const char *path = arg;
    if (getenv("DC_TEST_LOUD") == NULL)
        setenv("DCPTOPK_LOG", "quiet", 1);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    if (!c || dc_cache_is_memory(c)) {
        fprintf(stderr, "child %d: %s\n", p, c ? dc_cache_why(c) : "no handle");
        return 11;
    }
    char tag[16];
    snprintf(tag, sizeof tag, "p%d", p);
    cf_got g;
    if (cf_fetch(c, tag, 0, &g) != DCPTOPK_SUCCESS)
        return 12;
    dc_cache_close(c);
    return 0;
}

TEST(processes_recovering_one_damaged_file_keep_every_entry)
{
    /* 8 processes open one damaged file at once; each then stores its own
     * key. One moves the file aside; none throws away the file another
     * rebuilt, so every key is in the final file. */
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("SQLite format 3", f); /* a header, then nothing sensible */
    for (int i = 0; i < 4096; i++)
        fputc(i * 7, f);
    fclose(f);
    CHECK_EQ(cf_race(CF_NPROC, fetch_own_key, path), 0);
    CHECK_EQ(cf_count_files(dir, ".corrupt-"), 1);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), CF_NPROC);
}

TEST(at_most_three_moved_aside_files_are_kept)
{
    char path[512];
    const char *dir = cf_fresh(path, sizeof path);
    for (int i = 0; i < 5; i++) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        fputs("not a database at all, not even close to one........", f);
        fclose(f);
        cf_capture_begin(dir);
        dc_cache *c = cf_open(path, DC_CACHE_RW);
        char text[4096];
        cf_capture_end(text, sizeof text);
        CHECK(c != NULL && !dc_cache_is_memory(c));
        CHECK_CONTAINS(text, "moved it to");
        dc_cache_close(c);
        unlink(path);
    }
    CHECK_EQ(cf_count_files(dir, ".corrupt-"), 3);
}

TEST(verify_counts_malformed_keys_and_what_it_could_not_remove)
{
    char path[512], err[512];
    cf_fresh(path, sizeof path);
    CHECK_EQ(cf_forge_row(path, "v"), 0); /* a valid row (forged, but valid) */
    CHECK_EQ(cf_sql(path, "INSERT INTO entries SELECT 'not-a-key', kernel, "
                          "fields, arch, nvrtc_version, lib_version, "
                          "checksum, compile_ms, size, created, last_used, "
                          "hits, cubin, ptx, source FROM entries"),
             -1);
    CHECK_EQ(chmod(path, 0400), 0);
    dc_cache *c = cf_open(path, DC_CACHE_RO);
    CHECK(c != NULL);
    int64_t checked = 0, bad = 0, kept = 0;
    CHECK_OK(dc_cache_verify(c, &checked, &bad, &kept, err, sizeof err));
    CHECK_EQ(checked, 2);
    CHECK_EQ(bad, 1);
    CHECK_EQ(kept, 1);
    dc_cache_close(c);
    CHECK_EQ(chmod(path, 0600), 0);
    c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_OK(dc_cache_verify(c, &checked, &bad, &kept, err, sizeof err));
    CHECK_EQ(bad, 1);
    CHECK_EQ(kept, 0);
    dc_cache_close(c);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
}
