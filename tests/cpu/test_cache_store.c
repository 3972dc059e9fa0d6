/*
 * test_cache_store.c - the compile cache (cache/) storing and finding
 * entries: hits and misses across handles, memory mode, a failed compile,
 * invalidation, argument errors, the default path, a handle inherited
 * through fork.
 *
 * Expected blobs come from the fixture's fake compile (cache_fixture.h),
 * never from the cache.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "cache_fixture.h"
#include "harness.h"

TEST(hit_and_miss)
{
    const char *dir = cf_dir();
    char path[512];
    cf_path(path, sizeof path, dir, "sub/dir/c.sqlite");
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_EQ(dc_cache_is_readonly(c), 0);
    CHECK_STR_EQ(dc_cache_path(c), path);

    uint64_t before = dc_cache_process_compiles();
    cf_job j = cf_job_of("alpha");
    dc_cache_hit hit;
    int compiled = -1;
    CHECK_EQ(dc_cache_contains(c, cf_key("alpha")), 0);
    CHECK_OK(cf_get(c, &j, &hit, &compiled));
    CHECK_EQ(compiled, 1);
    CHECK_EQ(j.released, 1);
    CHECK(cf_hit_is(&hit, "alpha", 0));
    dc_cache_hit_free(&hit);
    CHECK_EQ(dc_cache_process_compiles() - before, 1);
    CHECK_EQ(dc_cache_contains(c, cf_key("alpha")), 1);
    CHECK_EQ(dc_cache_contains(c, cf_key("beta")), 0);

    cf_got g;
    CHECK_OK(cf_fetch(c, "alpha", 0, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    dc_cache_close(c);

    /* Another handle (as another process would) hits too. */
    c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_OK(cf_fetch(c, "alpha", 0, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    CHECK_OK(cf_fetch(c, "beta", 0, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
    CHECK_EQ(dc_cache_process_compiles() - before, 2);

    /* What is in the file, read with plain SQLite. */
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 2);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(cf_sql(path, "PRAGMA user_version"), DC_CACHE_FILE_VERSION);
    char hex[33], sql[256];
    cf_key_hex("alpha", hex);
    /* Hits go to table usage; the entries row is never rewritten. */
    snprintf(sql, sizeof sql, "SELECT hits FROM usage WHERE key='%s'", hex);
    CHECK_EQ(cf_sql(path, sql), 2);
    snprintf(sql, sizeof sql,
             "SELECT hits = 0 AND last_used = created FROM entries WHERE "
             "key='%s'",
             hex);
    CHECK_EQ(cf_sql(path, sql), 1);
    snprintf(sql, sizeof sql,
             "SELECT size FROM entries WHERE key='%s' AND kernel='select' AND "
             "arch='sm_90a' AND nvrtc_version='13.0' AND lib_version='0.1.0' "
             "AND fields='topk=2048,local_topk=384'",
             hex);
    CHECK_EQ(cf_sql(path, sql), CF_ENTRY_BYTES);
}

TEST(memory_mode)
{
    dc_cache *c = cf_open(NULL, DC_CACHE_MEMORY);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 1);
    cf_got g;
    CHECK_OK(cf_fetch(c, "mem", 0, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK_OK(cf_fetch(c, "mem", 0, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
}

TEST(compile_failure_releases_claim)
{
    char path[512];
    cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_job j = cf_job_of("broken");
    j.fail = 1;
    dc_cache_hit hit;
    int compiled = -1;
    char err[256] = "";
    dcptopk_result r = dc_cache_get_or_compile(
        c, cf_key("broken"), &cf_meta, cf_compile, cf_release, &j, &hit,
        &compiled, err, sizeof err);
    CHECK_EQ(r, DCPTOPK_NVRTC_ERROR);
    CHECK_CONTAINS(err, "test compile of broken failed");
    CHECK_EQ(compiled, 0);
    CHECK_EQ(j.released, 1);
    CHECK(hit.cubin == NULL && hit.ptx == NULL);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM claims"), 0);
    CHECK_EQ(cf_sql(path, "SELECT count(*) FROM entries"), 0);
    /* The next call compiles again, without waiting on a claim. */
    double t0 = cf_now_s();
    cf_got g;
    CHECK_OK(cf_fetch(c, "broken", 0, &g));
    CHECK(cf_now_s() - t0 < 2.0);
    CHECK_EQ(g.compiled, 1);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
}

TEST(invalidate_removes_one_entry)
{
    char path[512];
    cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "gone", 0, &g));
    CHECK_OK(cf_fetch(c, "stays", 0, &g));
    CHECK_OK(dc_cache_invalidate(c, cf_key("gone")));
    CHECK_EQ(dc_cache_invalidate(c, cf_key("gone")), DCPTOPK_NOT_FOUND);
    CHECK_OK(cf_fetch(c, "gone", 0, &g));
    CHECK_EQ(g.compiled, 1);
    CHECK_OK(cf_fetch(c, "stays", 0, &g));
    CHECK_EQ(g.compiled, 0);
    dc_cache_close(c);
}

TEST(invalid_arguments)
{
    char err[512] = "";
    dc_cache *c = NULL;
    CHECK_EQ(dc_cache_open("/tmp/x", (dc_cache_open_mode)7, &c, err,
                           sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "mode = 7");
    CHECK_EQ(dc_cache_open("", DC_CACHE_RW, &c, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "path = \"\"");
    CHECK_EQ(dc_cache_open("/tmp/x", DC_CACHE_RW, NULL, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    c = cf_open(NULL, DC_CACHE_MEMORY);
    CHECK(c != NULL);
    dc_cache_hit hit;
    CHECK_EQ(dc_cache_get_or_compile(c, cf_key("x"), NULL, NULL, NULL, NULL,
                                     &hit, NULL, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(err, "compile = NULL");
    CHECK_EQ(dc_cache_get_or_compile(NULL, cf_key("x"), NULL, cf_compile,
                                     NULL, NULL, &hit, NULL, err, sizeof err),
             DCPTOPK_INVALID_ARGUMENT);
    dc_cache_close(c);
    dc_cache_close(NULL);
    dc_cache_hit_free(NULL);
}

TEST(default_path_from_environment)
{
    char buf[512];
    const dc_env_kept kept = dc_env_keep("DCPTOPK_CACHE_DIR");
    setenv("DCPTOPK_CACHE_DIR", "/a/b", 1);
    CHECK_EQ(dc_cache_default_path(buf, sizeof buf),
             (int)strlen("/a/b/dcptopk.sqlite"));
    CHECK_STR_EQ(buf, "/a/b/dcptopk.sqlite");
    unsetenv("DCPTOPK_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/x", 1);
    dc_cache_default_path(buf, sizeof buf);
    CHECK_STR_EQ(buf, "/x/dcptopk/dcptopk.sqlite");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/h", 1);
    dc_cache_default_path(buf, sizeof buf);
    CHECK_STR_EQ(buf, "/h/.cache/dcptopk/dcptopk.sqlite");
    unsetenv("HOME");
    CHECK_EQ(dc_cache_default_path(buf, sizeof buf), -1);
    /* Opening the default with nowhere to go: memory, one warning. */
    const char *dir = cf_dir();
    cf_capture_begin(dir);
    dc_cache *c = cf_open(NULL, DC_CACHE_RW);
    int warnings = cf_capture_end(NULL, 0);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 1);
    CHECK_EQ(warnings, 1);
    dc_cache_close(c);
    /* And with a directory: created. */
    char sub[512];
    cf_path(sub, sizeof sub, dir, "made/here");
    setenv("DCPTOPK_CACHE_DIR", sub, 1);
    c = cf_open(NULL, DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK_EQ(dc_cache_is_memory(c), 0);
    CHECK_CONTAINS(dc_cache_path(c), "made/here/dcptopk.sqlite");
    dc_cache_close(c);
    dc_env_put_back(&kept);
}

TEST(handle_inherited_through_fork_reopens)
{
    char path[512];
    cf_fresh(path, sizeof path);
    dc_cache *c = cf_open(path, DC_CACHE_RW);
    CHECK(c != NULL);
    cf_got g;
    CHECK_OK(cf_fetch(c, "parent", 0, &g));
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        /* The child's handle must reopen, not share the parent's file
         * descriptors and locks. */
        if (cf_fetch(c, "parent", 0, &g) || g.compiled || !g.bytes_ok)
            _exit(1);
        if (cf_fetch(c, "child", 0, &g) || !g.compiled)
            _exit(2);
        dc_cache_close(c);
        _exit(0);
    }
    int status = 0;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x",
              status);
    CHECK_OK(cf_fetch(c, "child", 0, &g));
    CHECK_EQ(g.compiled, 0);
    CHECK(g.bytes_ok);
    dc_cache_close(c);
}
