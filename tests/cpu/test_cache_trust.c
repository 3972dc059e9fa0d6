/*
 * test_cache_trust.c - what the compile cache (cache/) trusts: a cache file
 * or folder that others can write is not used (unless shared by choice, and
 * never world-writable); symlinks at the path and its side files are
 * refused; /dev/null is left alone; new files get the sharing choice's
 * modes; an import whose key does not match its fields, or whose bytes are
 * not what the key compiles to, is refused; the same key compiled in two
 * working directories gives the same cubin.
 *
 * Tests run as root in CI: root counts as a trusted owner, so files of
 * another owner are made with chown, and writable-by-others with modes.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache.h"
#include "cache_fixture.h"
#include "dcptopk.h"
#include "harness.h"
#include "rt.h"

/* ------------------------------------------------------------ files */

TEST(forged_row_in_a_folder_writable_by_others_is_not_served)
{
    const char *dir = cf_dir();
    char sub[512], path[600];
    snprintf(sub, sizeof sub, "%s/shared", dir);
    CHECK_EQ(mkdir(sub, 0700), 0);
    cf_path(path, sizeof path, sub, "c.sqlite");
    CHECK_EQ(cf_forge_row(path, "f"), 0);
    /* World-writable (not sticky): anyone could have written the file. */
    CHECK_EQ(chmod(sub, 0777), 0);
    int memory = 0;
    cf_capture_begin(dir);
    int fresh = cf_served_fresh(path, "f", &memory);
    char text[4096];
    int warnings = cf_capture_end(text, sizeof text);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
    CHECK_EQ(warnings, 1);
    CHECK_CONTAINS(text, "writable by");
    /* Group-writable: refused too, unless the operator opts in. */
    CHECK_EQ(chmod(sub, 0770), 0);
    CHECK_EQ(cf_served_fresh(path, "f", &memory), 1);
    CHECK_EQ(memory, 1);
    setenv("DCPTOPK_CACHE_SHARED", "1", 1);
    int served = cf_served_fresh(path, "f", &memory);
    unsetenv("DCPTOPK_CACHE_SHARED");
    /* Shared: the file is used, and its forged row fails nothing (the
     * checksum was recomputed): this is the trust the opt-in grants. */
    CHECK_EQ(memory, 0);
    CHECK_EQ(served, -1);
    /* Shared never allows world-writable. */
    CHECK_EQ(chmod(sub, 0777), 0);
    setenv("DCPTOPK_CACHE_SHARED", "1", 1);
    fresh = cf_served_fresh(path, "f", &memory);
    unsetenv("DCPTOPK_CACHE_SHARED");
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
}

TEST(file_or_side_file_of_another_user_is_refused)
{
    /* Root counts as a trusted owner, so the planted files are given to
     * another uid with chown (the tests run as root in CI). */
    char path[512], side[600];
    const char *dir = cf_fresh(path, sizeof path);
    CHECK_EQ(cf_forge_row(path, "p"), 0);
    const uid_t other = 65534; /* nobody */
    if (geteuid() == 0) {
        CHECK_EQ(chown(path, other, other), 0);
        int memory = 0;
        cf_capture_begin(dir);
        int fresh = cf_served_fresh(path, "p", &memory);
        char text[4096];
        cf_capture_end(text, sizeof text);
        CHECK_EQ(fresh, 1);
        CHECK_EQ(memory, 1);
        CHECK_CONTAINS(text, "owned by uid 65534");
        CHECK_EQ(chown(path, 0, 0), 0);
    }
    /* Writable by others: refused whoever owns it. */
    CHECK_EQ(chmod(path, 0666), 0);
    int memory = 0;
    CHECK_EQ(cf_served_fresh(path, "p", &memory), 1);
    CHECK_EQ(memory, 1);
    CHECK_EQ(chmod(path, 0600), 0);
    /* A side file planted by someone else. */
    snprintf(side, sizeof side, "%s-journal", path);
    FILE *f = fopen(side, "w");
    CHECK(f != NULL);
    fclose(f);
    CHECK_EQ(chmod(side, 0622), 0);
    CHECK_EQ(cf_served_fresh(path, "p", &memory), 1);
    CHECK_EQ(memory, 1);
    unlink(side);
    /* Everything in order: the (forged) file is used. */
    CHECK_EQ(cf_served_fresh(path, "p", &memory), -1);
    CHECK_EQ(memory, 0);
}

TEST(symlinks_at_the_path_and_side_files_are_refused)
{
    char path[512], target[512], side[600];
    const char *dir = cf_fresh(path, sizeof path);
    cf_path(target, sizeof target, dir, "victim");
    /* A link to a file that does not exist yet: a warmup must not create
     * it. */
    CHECK_EQ(symlink(target, path), 0);
    int memory = 0;
    cf_capture_begin(dir);
    int fresh = cf_served_fresh(path, "s", &memory);
    char text[4096];
    cf_capture_end(text, sizeof text);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
    CHECK_CONTAINS(text, "symbolic link");
    struct stat st;
    CHECK(lstat(target, &st) != 0);
    /* A link to an existing file: left as it is. */
    FILE *f = fopen(target, "w");
    CHECK(f != NULL);
    fputs("precious", f);
    fclose(f);
    CHECK_EQ(cf_served_fresh(path, "s", &memory), 1);
    CHECK_EQ(memory, 1);
    CHECK_EQ(stat(target, &st), 0);
    CHECK_EQ(st.st_size, 8);
    unlink(path);
    /* A planted -shm link disables nothing silently: refused, named. */
    CHECK_EQ(cf_forge_row(path, "s"), 0);
    snprintf(side, sizeof side, "%s-shm", path);
    CHECK_EQ(symlink(target, side), 0);
    cf_capture_begin(dir);
    fresh = cf_served_fresh(path, "s", &memory);
    cf_capture_end(text, sizeof text);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(memory, 1);
    CHECK_CONTAINS(text, "-shm is a symbolic link");
    CHECK_EQ(stat(target, &st), 0);
    CHECK_EQ(st.st_size, 8);
}

TEST(dev_null_is_refused_and_left_alone)
{
    struct stat st;
    int had_journal = lstat("/dev/null-journal", &st) == 0;
    char err[1024] = "";
    dc_cache *c = NULL;
    CHECK_EQ(dc_cache_open("/dev/null",
                           (dc_cache_open_mode)(DC_CACHE_RW | DC_CACHE_STRICT),
                           &c, err, sizeof err),
             DCPTOPK_CACHE_ERROR);
    CHECK_CONTAINS(err, "not a regular file");
    c = cf_open("/dev/null", DC_CACHE_RW);
    CHECK(c != NULL);
    CHECK(dc_cache_is_memory(c));
    dc_cache_close(c);
    if (!had_journal)
        CHECK(lstat("/dev/null-journal", &st) != 0);
}

TEST(new_file_modes_follow_the_sharing_choice)
{
    const char *dir = cf_dir();
    char a[512], sub[512], b[600];
    cf_path(a, sizeof a, dir, "private.sqlite");
    mode_t old = umask(002);
    dc_cache *c = cf_open(a, DC_CACHE_RW);
    CHECK(c != NULL && !dc_cache_is_memory(c));
    dc_cache_close(c);
    struct stat st;
    CHECK_EQ(stat(a, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    /* Shared: 0666 less the umask, so the group can write it. */
    snprintf(sub, sizeof sub, "%s/team", dir);
    CHECK_EQ(mkdir(sub, 0770), 0);
    CHECK_EQ(chmod(sub, 02770), 0);
    cf_path(b, sizeof b, sub, "c.sqlite");
    setenv("DCPTOPK_CACHE_SHARED", "1", 1);
    c = cf_open(b, DC_CACHE_RW);
    unsetenv("DCPTOPK_CACHE_SHARED");
    umask(old);
    CHECK(c != NULL && !dc_cache_is_memory(c));
    dc_cache_close(c);
    CHECK_EQ(stat(b, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0664);
}

/* -------------------------------------------------- reproducible cubins */

/* The cubin of `k` compiled with the working directory `cwd`. */
static dcptopk_result compile_in(const char *cwd, const dcptopk_key *k,
                                 dc_compiled *out, char *err, size_t err_size)
{
    char old[4096];
    if (!getcwd(old, sizeof old) || chdir(cwd) != 0)
        return DCPTOPK_IO_ERROR;
    dc_unit u;
    dcptopk_result r = dc_unit_build(NULL, k, &u);
    if (r == DCPTOPK_SUCCESS)
        r = dc_nvrtc_compile(&u, out, err, err_size);
    else
        snprintf(err, err_size, "%s", dcptopk_last_error(NULL));
    dc_unit_free(&u);
    if (chdir(old) != 0)
        return DCPTOPK_IO_ERROR;
    return r;
}

TEST(cubin_does_not_depend_on_the_working_directory)
{
    const char *dir = cf_dir();
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/some/much/longer/folder", dir);
    CHECK(mkdir(a, 0700) == 0);
    char mk[600];
    snprintf(mk, sizeof mk, "mkdir -p %s", b);
    CHECK(system(mk) == 0);

    dcptopk_merge_config cfg;
    CHECK_EQ(dcptopk_merge_config_named(dcptopk_merge_config_name(0), &cfg),
             DCPTOPK_SUCCESS);
    dcptopk_key keys[64];
    size_t n = 0;
    CHECK_EQ(dcptopk_config_keys(&cfg, "sm_90a", keys, 64, &n),
             DCPTOPK_SUCCESS);
    CHECK(n > 0);
    char *err = malloc(DC_ERR_LEN);
    CHECK(err != NULL);
    dc_compiled x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    dcptopk_result r1 = compile_in(a, &keys[0], &x, err, DC_ERR_LEN);
    if (r1)
        fprintf(stderr, "compile in %s: %s\n", a, err);
    dcptopk_result r2 = compile_in(b, &keys[0], &y, err, DC_ERR_LEN);
    if (r2)
        fprintf(stderr, "compile in %s: %s\n", b, err);
    free(err);
    int same = !r1 && !r2 && x.cubin_size == y.cubin_size &&
               memcmp(x.cubin, y.cubin, x.cubin_size) == 0;
    int leaks = 0;
    for (size_t i = 0; !r1 && i + strlen(a) <= x.cubin_size; i++)
        leaks |= memcmp((const char *)x.cubin + i, a, strlen(a)) == 0;
    dc_compiled_free(&x);
    dc_compiled_free(&y);
    CHECK_EQ(r1, DCPTOPK_SUCCESS);
    CHECK_EQ(r2, DCPTOPK_SUCCESS);
    CHECK_MSG(!leaks, "the cubin holds the working directory %s", a);
    CHECK_MSG(same, "two compiles of one key differ");
}

/* --------------------------------------------------------- verified import */

typedef struct real_job {
    dc_unit *u;
    dc_compiled out;
} real_job;

static dcptopk_result real_compile(void *user, dc_cache_blobs *b, char *err,
                                   size_t err_size)
{
    real_job *j = user;
    dcptopk_result r = dc_nvrtc_compile(j->u, &j->out, err, err_size);
    if (r)
        return r;
    b->cubin = j->out.cubin;
    b->cubin_size = j->out.cubin_size;
    b->ptx = j->out.ptx;
    b->ptx_size = j->out.ptx_size;
    b->source = j->u->source;
    b->source_size = j->u->source_size;
    return DCPTOPK_SUCCESS;
}

static void real_release(void *user, dc_cache_blobs *b)
{
    (void)b;
    dc_compiled_free(&((real_job *)user)->out);
}

/* A cache file at `path` holding the first key of the first named config,
 * compiled as the runtime would store it. Its key in hex goes to `hex`. */
static int make_real_cache(const char *path, char hex[33])
{
    dcptopk_merge_config cfg;
    dcptopk_key keys[64];
    size_t n = 0;
    if (dcptopk_merge_config_named(dcptopk_merge_config_name(0), &cfg) ||
        dcptopk_config_keys(&cfg, "sm_90a", keys, 64, &n) || n == 0)
        return -1;
    dc_unit u;
    if (dc_unit_build(NULL, &keys[0], &u) != DCPTOPK_SUCCESS) {
        dc_unit_free(&u);
        return -1;
    }
    dc_hash_hex(u.hash, hex);
    dc_cache *c = NULL;
    char err[2048];
    int rc = -1;
    if (dc_cache_open(path, DC_CACHE_RW, &c, err, sizeof err) ==
        DCPTOPK_SUCCESS) {
        dc_cache_meta meta = {u.info->name, u.fields, u.key.arch,
                              u.nvrtc_version, dcptopk_version_string()};
        real_job j = {&u, {0}};
        dc_cache_hit hit;
        int compiled = 0;
        if (dc_cache_get_or_compile(c, u.hash, &meta, real_compile,
                                    real_release, &j, &hit, &compiled, err,
                                    sizeof err) == DCPTOPK_SUCCESS &&
            compiled)
            rc = 0;
        else
            fprintf(stderr, "make_real_cache: %s\n", err);
        dc_cache_hit_free(&hit);
        dc_cache_close(c);
    }
    dc_unit_free(&u);
    return rc;
}

static int copy_file(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    return system(cmd);
}

TEST(import_recompiles_and_rejects_a_wrong_key_or_other_bytes)
{
    const char *dir = cf_dir();
    char src[512], good[512], wrong_key[512], wrong_bytes[512], dst[512];
    char hex[33], sql[512];
    snprintf(src, sizeof src, "%s/src.sqlite", dir);
    snprintf(good, sizeof good, "%s/good.sqlite", dir);
    snprintf(wrong_key, sizeof wrong_key, "%s/wrong_key.sqlite", dir);
    snprintf(wrong_bytes, sizeof wrong_bytes, "%s/wrong_bytes.sqlite", dir);
    snprintf(dst, sizeof dst, "%s/dst.sqlite", dir);
    CHECK_EQ(make_real_cache(src, hex), 0);
    CHECK_EQ(cf_sql(src, "PRAGMA wal_checkpoint(TRUNCATE)"), 0);
    CHECK_EQ(copy_file(src, good), 0);
    CHECK_EQ(copy_file(src, wrong_key), 0);
    CHECK_EQ(copy_file(src, wrong_bytes), 0);
    /* A crafted row: the real blobs under another key (the checksum covers
     * only the blobs, so it still passes). */
    snprintf(sql, sizeof sql,
             "UPDATE entries SET key='00112233445566778899aabbccddeeff' "
             "WHERE key='%s'",
             hex);
    CHECK_EQ(cf_sql(wrong_key, sql), -1);
    /* Another: its key, other code (one cubin byte changed, checksum
     * recomputed as anyone can). */
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(wrong_bytes, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT cubin, ptx, source FROM entries "
                                "WHERE key=?1",
                                -1, &st, NULL),
             SQLITE_OK);
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    size_t nc = (size_t)sqlite3_column_bytes(st, 0);
    size_t np = (size_t)sqlite3_column_bytes(st, 1);
    size_t ns = (size_t)sqlite3_column_bytes(st, 2);
    unsigned char *cubin = malloc(nc), *ptx = malloc(np + 1),
                  *source = malloc(ns + 1);
    CHECK(cubin && ptx && source);
    memcpy(cubin, sqlite3_column_blob(st, 0), nc);
    memcpy(ptx, sqlite3_column_blob(st, 1), np);
    memcpy(source, sqlite3_column_blob(st, 2), ns);
    sqlite3_finalize(st);
    cubin[nc / 2] ^= 0x40;
    char sum[33];
    dc_cache_checksum(cubin, nc, ptx, np, source, ns, sum);
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "UPDATE entries SET cubin=?1, checksum=?2 "
                                "WHERE key=?3",
                                -1, &st, NULL),
             SQLITE_OK);
    sqlite3_bind_blob(st, 1, cubin, (int)nc, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, sum, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, hex, -1, SQLITE_STATIC);
    CHECK_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(cubin);
    free(ptx);
    free(source);

    dcptopk_cache *h = NULL;
    CHECK_EQ(dcptopk_cache_open(dst, 0, &h), DCPTOPK_SUCCESS);
    int64_t count = -1, rejected = -1;
    CHECK_EQ(dcptopk_cache_import_ex(h, wrong_key, 0, &count, &rejected),
             DCPTOPK_SUCCESS);
    CHECK_EQ(count, 0);
    CHECK_EQ(rejected, 1);
    CHECK_EQ(dcptopk_cache_import_ex(h, wrong_bytes, 0, &count, &rejected),
             DCPTOPK_SUCCESS);
    CHECK_EQ(count, 0);
    CHECK_EQ(rejected, 1);
    /* The genuine file: recompiled here, same bytes, accepted. */
    CHECK_EQ(dcptopk_cache_import_ex(h, good, 0, &count, &rejected),
             DCPTOPK_SUCCESS);
    CHECK_EQ(count, 1);
    CHECK_EQ(rejected, 0);
    dcptopk_cache_close(h);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key='%s'",
             hex);
    CHECK_EQ(cf_sql(dst, sql), 1);
    CHECK_EQ(cf_sql(dst, "SELECT count(*) FROM entries"), 1);
}

TEST(import_refuses_an_entry_over_the_size_limit)
{
    const char *dir = cf_dir();
    char src[512], dst[512], hex[33];
    snprintf(src, sizeof src, "%s/src.sqlite", dir);
    snprintf(dst, sizeof dst, "%s/dst.sqlite", dir);
    CHECK_EQ(make_real_cache(src, hex), 0);
    setenv("DCPTOPK_CACHE_IMPORT_MAX_BYTES", "1K", 1);
    dcptopk_cache *h = NULL;
    dcptopk_result r = dcptopk_cache_open(dst, 0, &h);
    unsetenv("DCPTOPK_CACHE_IMPORT_MAX_BYTES");
    CHECK_EQ(r, DCPTOPK_SUCCESS);
    int64_t count = -1, rejected = -1;
    CHECK_EQ(dcptopk_cache_import_ex(h, src, DCPTOPK_CACHE_IMPORT_TRUST,
                                     &count, &rejected),
             DCPTOPK_SUCCESS);
    CHECK_EQ(count, 0);
    CHECK_EQ(rejected, 1);
    dcptopk_cache_close(h);
}
