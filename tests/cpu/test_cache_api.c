/*
 * test_cache_api.c - the public cache-file calls of dcptopk.h (what
 * `dcptopk cache ...` uses): list, find by prefix, read_blob, stats, verify,
 * prune, remove, clear, export/import, read-only handles, argument errors.
 *
 * Entries are made through cache/'s get_or_compile with known bytes
 * (dc_test_blob), then inspected through the public API only.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "cache.h"
#include "cache_fixture.h"
#include "dcptopk.h"
#include "harness.h"

/* The metadata and compile time every entry of these tests carries, which
 * the listing must report back. */
static const dc_cache_meta meta = {"select", "topk=2048", "sm_90a", "13.0",
                                   "0.1.0"};

/* Stores `count` entries made from tags[] into the cache file at path, in
 * order, a few ms apart. 0 on success. */
static int populate(const char *path, const char *const *tags, int count)
{
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    if (!c)
        return -1;
    for (int i = 0; i < count; i++) {
        cf_job j = cf_job_of(tags[i]);
        j.meta = &meta;
        j.compile_ms = 12.5;
        dc_cache_hit hit;
        int compiled;
        if (cf_get(c, &j, &hit, &compiled)) {
            dc_cache_close(c);
            return -1;
        }
        dc_cache_hit_free(&hit);
        cf_sleep_ms(3);
    }
    dc_cache_close(c);
    return 0;
}

static const char *const three[] = {"one", "two", "three"};

TEST(list_find_and_read_blobs)
{
    char path[512];
    cf_fresh(path, sizeof path);
    CHECK_EQ(populate(path, three, 3), 0);

    dcptopk_cache *h = NULL;
    CHECK_OK(dcptopk_cache_open(path, 0, &h));
    CHECK_STR_EQ(dcptopk_cache_path(h), path);
    CHECK_STR_EQ(dcptopk_cache_last_error(h), "no error");
    dcptopk_cache_entry *v = NULL;
    size_t n = 0;
    CHECK_OK(dcptopk_cache_list(h, &v, &n));
    CHECK_EQ(n, 3);
    /* Most recently used first: stored in order one, two, three. */
    char hex[33];
    for (int i = 0; i < 3; i++) {
        cf_key_hex(three[2 - i], hex);
        CHECK_STR_EQ(v[i].key, hex);
        CHECK_STR_EQ(v[i].kernel, "select");
        CHECK_STR_EQ(v[i].fields, "topk=2048");
        CHECK_STR_EQ(v[i].arch, "sm_90a");
        CHECK_STR_EQ(v[i].nvrtc_version, "13.0");
        CHECK_STR_EQ(v[i].lib_version, "0.1.0");
        CHECK_EQ(v[i].cubin_bytes, 4096);
        CHECK_EQ(v[i].ptx_bytes, 777);
        CHECK_EQ(v[i].source_bytes, 1234);
        CHECK(v[i].compile_ms == 12.5);
        CHECK_EQ(v[i].hits, 0);
        time_t now = time(NULL);
        CHECK(v[i].created > now - 60 && v[i].created <= now + 1);
        CHECK(v[i].last_used >= v[i].created);
    }
    free(v);

    cf_key_hex("two", hex);
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%.6s", hex);
    dcptopk_cache_entry e;
    CHECK_OK(dcptopk_cache_find(h, prefix, &e));
    CHECK_STR_EQ(e.key, hex);
    /* Upper case works too. */
    for (int i = 0; prefix[i]; i++)
        if (prefix[i] >= 'a' && prefix[i] <= 'f')
            prefix[i] = (char)(prefix[i] - 'a' + 'A');
    CHECK_OK(dcptopk_cache_find(h, prefix, &e));
    CHECK_STR_EQ(e.key, hex);
    CHECK_OK(dcptopk_cache_find(h, hex, &e));

    for (int which = 0; which < 3; which++) {
        void *data = NULL;
        size_t size = 0;
        CHECK_OK(dcptopk_cache_read_blob(h, hex, which, &data, &size));
        CHECK(cf_blob_is(data, size, "two", which));
        free(data);
    }

    /* Argument errors name the argument and its value. */
    void *data = NULL;
    size_t size = 0;
    CHECK_EQ(dcptopk_cache_read_blob(h, hex, 5, &data, &size),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "blob = 5");
    CHECK_CONTAINS(dcptopk_last_error(NULL), "blob = 5");
    CHECK_EQ(dcptopk_cache_find(h, "abc", &e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "key_prefix = \"abc\"");
    CHECK_EQ(dcptopk_cache_find(h, "12g4", &e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "'g'");
    CHECK_EQ(dcptopk_cache_find(h, NULL, &e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_cache_find(h, hex, NULL), DCPTOPK_INVALID_ARGUMENT);
    /* A prefix that matches nothing. */
    char none[33];
    snprintf(none, sizeof none, "%s", hex);
    none[31] = none[31] == '0' ? '1' : '0';
    CHECK_EQ(dcptopk_cache_find(h, none, &e), DCPTOPK_NOT_FOUND);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), none);
    CHECK_EQ(dcptopk_cache_list(NULL, &v, &n), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "cache = NULL");
    /* Success clears the handle's error. */
    CHECK_OK(dcptopk_cache_find(h, hex, &e));
    CHECK_STR_EQ(dcptopk_cache_last_error(h), "no error");
    dcptopk_cache_close(h);
    dcptopk_cache_close(NULL);
}

TEST(ambiguous_prefix_is_refused)
{
    char path[512];
    cf_fresh(path, sizeof path);
    /* Find two tags whose keys share their first 4 hex digits. */
    static char tags[2][16];
    char (*seen)[33] = calloc(4096, 33);
    char (*names)[16] = calloc(4096, 16);
    int found = 0;
    for (int i = 0; i < 4096 && !found; i++) {
        snprintf(names[i], 16, "t%d", i);
        cf_key_hex(names[i], seen[i]);
        for (int k = 0; k < i; k++) {
            if (memcmp(seen[k], seen[i], 4) == 0) {
                snprintf(tags[0], 16, "%s", names[k]);
                snprintf(tags[1], 16, "%s", names[i]);
                found = 1;
                break;
            }
        }
    }
    free(seen);
    free(names);
    CHECK(found);
    char prefix[5], hex0[33], hex1[33];
    cf_key_hex(tags[0], hex0);
    cf_key_hex(tags[1], hex1);
    snprintf(prefix, sizeof prefix, "%.4s", hex0);
    const char *const both[] = {tags[0], tags[1]};
    CHECK_EQ(populate(path, both, 2), 0);
    dcptopk_cache *h = NULL;
    CHECK_OK(dcptopk_cache_open(path, 1, &h));
    dcptopk_cache_entry e;
    CHECK_EQ(dcptopk_cache_find(h, prefix, &e), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "ambiguous");
    CHECK_CONTAINS(dcptopk_cache_last_error(h), prefix);
    CHECK_EQ(dcptopk_cache_remove(h, prefix), DCPTOPK_INVALID_ARGUMENT);
    /* One more digit (where they differ) resolves it. */
    int d = 4;
    while (hex0[d] == hex1[d])
        d++;
    char longer[33];
    snprintf(longer, sizeof longer, "%.*s", d + 1, hex0);
    CHECK_OK(dcptopk_cache_find(h, longer, &e));
    CHECK_STR_EQ(e.key, hex0);
    dcptopk_cache_close(h);
}

TEST(stats_verify_prune_remove_clear)
{
    char path[512], sql[256], hex[33];
    cf_fresh(path, sizeof path);
    CHECK_EQ(populate(path, three, 3), 0);
    CHECK_EQ(populate(path, three, 1), 0); /* a hit on "one" */

    dcptopk_cache *h = NULL;
    CHECK_OK(dcptopk_cache_open(path, 0, &h));
    dcptopk_cache_stats s = DCPTOPK_CACHE_STATS_INIT;
    CHECK_OK(dcptopk_cache_stats_get(h, &s));
    CHECK_EQ(s.entries, 3);
    CHECK_EQ(s.bytes, 3 * CF_ENTRY_BYTES);
    CHECK_EQ(s.hits, 1);
    CHECK_EQ(s.claims, 0);
    CHECK(s.compile_ms == 3 * 12.5);
    CHECK(s.file_bytes >= 3 * CF_ENTRY_BYTES);
    s.struct_size = 0;
    CHECK_EQ(dcptopk_cache_stats_get(h, &s), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "struct_size = 0");

    int64_t checked = -1, bad = -1;
    CHECK_OK(dcptopk_cache_verify(h, &checked, &bad));
    CHECK_EQ(checked, 3);
    CHECK_EQ(bad, 0);
    /* Damage two rows behind the library's back. */
    cf_key_hex("two", hex);
    snprintf(sql, sizeof sql,
             "UPDATE entries SET ptx = zeroblob(777) WHERE key='%s'", hex);
    cf_sql(path, sql);
    void *data = NULL;
    size_t size = 0;
    CHECK_EQ(dcptopk_cache_read_blob(h, hex, DCPTOPK_BLOB_CUBIN, &data, &size),
             DCPTOPK_CACHE_ERROR);
    CHECK(data == NULL);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "checksum");
    cf_key_hex("three", hex);
    snprintf(sql, sizeof sql,
             "UPDATE entries SET checksum = '0123' WHERE key='%s'", hex);
    cf_sql(path, sql);

    /* A read-only handle reports them and deletes nothing. */
    dcptopk_cache *ro = NULL;
    CHECK_OK(dcptopk_cache_open(path, 1, &ro));
    CHECK_OK(dcptopk_cache_verify(ro, &checked, &bad));
    CHECK_EQ(checked, 3);
    CHECK_EQ(bad, 2);
    CHECK_EQ(dcptopk_cache_prune(ro, 0, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(ro), "read-only");
    CHECK_EQ(dcptopk_cache_clear(ro, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_cache_remove(ro, hex), DCPTOPK_INVALID_ARGUMENT);
    dcptopk_cache_close(ro);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 3);

    CHECK_OK(dcptopk_cache_verify(h, &checked, &bad));
    CHECK_EQ(checked, 3);
    CHECK_EQ(bad, 2);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 1);
    CHECK_OK(dcptopk_cache_verify(h, &checked, &bad));
    CHECK_EQ(checked, 1);
    CHECK_EQ(bad, 0);
    dcptopk_cache_close(h);

    /* prune: least recently used first. */
    CHECK_OK(dcptopk_cache_open(path, 0, &h));
    int64_t removed = -1;
    CHECK_OK(dcptopk_cache_clear(h, &removed));
    CHECK_EQ(removed, 1);
    dcptopk_cache_close(h);
    CHECK_EQ(populate(path, three, 3), 0);
    CHECK_EQ(populate(path, three, 1), 0); /* "one" becomes the most recent */
    CHECK_OK(dcptopk_cache_open(path, 0, &h));
    CHECK_EQ(dcptopk_cache_prune(h, -5, &removed), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(h), "max_bytes = -5");
    CHECK_OK(dcptopk_cache_prune(h, 3 * CF_ENTRY_BYTES, &removed));
    CHECK_EQ(removed, 0);
    CHECK_OK(dcptopk_cache_prune(h, CF_ENTRY_BYTES, &removed));
    CHECK_EQ(removed, 2);
    dcptopk_cache_entry *v = NULL;
    size_t n = 0;
    CHECK_OK(dcptopk_cache_list(h, &v, &n));
    CHECK_EQ(n, 1);
    cf_key_hex("one", hex);
    CHECK_STR_EQ(v[0].key, hex);
    CHECK_EQ(v[0].hits, 1);
    free(v);
    /* remove by prefix */
    char prefix[9];
    snprintf(prefix, sizeof prefix, "%.8s", hex);
    CHECK_OK(dcptopk_cache_remove(h, prefix));
    CHECK_EQ(dcptopk_cache_remove(h, prefix), DCPTOPK_NOT_FOUND);
    CHECK_OK(dcptopk_cache_clear(h, &removed));
    CHECK_EQ(removed, 0);
    dcptopk_cache_close(h);
}

TEST(export_import_round_trip)
{
    const char *dir = cf_dir();
    char a[512], b[512], x[512], junk[512], sql[256], hex[33];
    snprintf(a, sizeof a, "%s/a.sqlite", dir);
    snprintf(b, sizeof b, "%s/b.sqlite", dir);
    snprintf(x, sizeof x, "%s/export.sqlite", dir);
    snprintf(junk, sizeof junk, "%s/junk.sqlite", dir);
    CHECK_EQ(populate(a, three, 3), 0);

    dcptopk_cache *ha = NULL, *hb = NULL;
    CHECK_OK(dcptopk_cache_open(a, 1, &ha)); /* export works read-only */
    int64_t count = -1;
    CHECK_OK(dcptopk_cache_export(ha, x, &count));
    CHECK_EQ(count, 3);
    CHECK_EQ(dcptopk_cache_export(ha, x, &count), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_cache_last_error(ha), "already exists");
    CHECK_CONTAINS(dcptopk_cache_last_error(ha), x);
    CHECK_EQ(dcptopk_cache_export(ha, NULL, &count), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_cache_import(ha, x, &count), DCPTOPK_INVALID_ARGUMENT);
    dcptopk_cache_close(ha);
    /* The exported file is a cache of the same schema. */
    CHECK_EQ(cf_sql(x, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
    CHECK_EQ(cf_sql(x, "SELECT count(*) FROM entries"), 3);
    CHECK_EQ(cf_sql(x, "SELECT count(*) FROM claims"), 0);

    CHECK_OK(dcptopk_cache_open(b, 0, &hb));
    CHECK_EQ(populate(b, three + 2, 1), 0); /* "three" already there */
    /* The fake entries' keys are not the hashes of their fields: a
     * verified import refuses them; --trust takes them as they are. */
    int64_t rejected = -1;
    CHECK_OK(dcptopk_cache_import_ex(hb, x, 0, &count, &rejected));
    CHECK_EQ(count, 0);
    CHECK_EQ(rejected, 2);
    CHECK_OK(dcptopk_cache_import_ex(hb, x, DCPTOPK_CACHE_IMPORT_TRUST,
                                     &count, &rejected));
    CHECK_EQ(count, 2);
    CHECK_EQ(rejected, 0);
    CHECK_OK(dcptopk_cache_import_ex(hb, x, DCPTOPK_CACHE_IMPORT_TRUST,
                                     &count, NULL));
    CHECK_EQ(count, 0);
    for (int i = 0; i < 3; i++) {
        cf_key_hex(three[i], hex);
        for (int which = 0; which < 3; which++) {
            void *data = NULL;
            size_t size = 0;
            CHECK_OK(dcptopk_cache_read_blob(hb, hex, which, &data, &size));
            CHECK(cf_blob_is(data, size, three[i], which));
            free(data);
        }
    }
    /* Bad rows of the source are skipped; junk files are refused. */
    dcptopk_cache_clear(hb, NULL);
    cf_key_hex("one", hex);
    snprintf(sql, sizeof sql,
             "UPDATE entries SET source = zeroblob(1234) WHERE key='%s'", hex);
    cf_sql(x, sql);
    CHECK_OK(dcptopk_cache_import_ex(hb, x, DCPTOPK_CACHE_IMPORT_TRUST,
                                     &count, &rejected));
    CHECK_EQ(count, 2);
    CHECK_EQ(rejected, 1);
    dcptopk_cache_entry e;
    CHECK_EQ(dcptopk_cache_find(hb, hex, &e), DCPTOPK_NOT_FOUND);
    FILE *f = fopen(junk, "w");
    CHECK(f != NULL);
    fputs("not a database, not at all, really not a database\n", f);
    fclose(f);
    CHECK_EQ(dcptopk_cache_import(hb, junk, &count), DCPTOPK_CACHE_ERROR);
    CHECK_CONTAINS(dcptopk_cache_last_error(hb), junk);
    CHECK_CONTAINS(dcptopk_cache_last_error(hb), "SQLite error");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope.sqlite", dir);
    CHECK_EQ(dcptopk_cache_import(hb, missing, &count), DCPTOPK_NOT_FOUND);
    dcptopk_cache_close(hb);
}

TEST(open_arguments_and_default_path)
{
    const char *dir = cf_dir();
    dcptopk_cache *h = NULL;
    char missing[512];
    snprintf(missing, sizeof missing, "%s/none.sqlite", dir);
    CHECK_EQ(dcptopk_cache_open(missing, 1, &h), DCPTOPK_NOT_FOUND);
    CHECK(h == NULL);
    CHECK_CONTAINS(dcptopk_last_error(NULL), missing);
    CHECK_EQ(dcptopk_cache_open(missing, 2, &h), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "readonly = 2");
    CHECK_EQ(dcptopk_cache_open(missing, 0, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_cache_open("", 0, &h), DCPTOPK_INVALID_ARGUMENT);

    setenv("DCPTOPK_CACHE_DIR", dir, 1);
    char buf[512], want[600];
    snprintf(want, sizeof want, "%s/dcptopk.sqlite", dir);
    CHECK_EQ(dcptopk_cache_default_path(NULL, 0), (int)strlen(want));
    CHECK_EQ(dcptopk_cache_default_path(buf, sizeof buf), (int)strlen(want));
    CHECK_STR_EQ(buf, want);
    CHECK_EQ(dcptopk_cache_default_path(NULL, 5), -1);
    CHECK_OK(dcptopk_cache_open(NULL, 0, &h));
    CHECK_STR_EQ(dcptopk_cache_path(h), want);
    dcptopk_cache_stats s = DCPTOPK_CACHE_STATS_INIT;
    CHECK_OK(dcptopk_cache_stats_get(h, &s));
    CHECK_EQ(s.entries, 0);
    dcptopk_cache_close(h);
    struct stat st;
    CHECK_EQ(stat(want, &st), 0);
    CHECK_STR_EQ(dcptopk_cache_last_error(NULL), "cache = NULL");
}
