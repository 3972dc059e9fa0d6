/*
 * test_cache_trust.c - the compile cache as code (issue: trust, recovery
 * races, full disks, honest commands): a cache file or folder that others
 * can write is not used; symlinks at the path and its side files are
 * refused; only the file found damaged is moved aside; a full disk makes
 * each process compile each key once and leave no claim; a future-dated
 * claim is stale; an import whose key does not match its fields is refused;
 * the same key compiled in two working directories gives the same cubin.
 *
 * Tests run as root in CI: root counts as a trusted owner, so files of
 * another owner are made with chown, and writable-by-others with modes.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache.h"
#include "dcptopk.h"
#include "fake_blobs.h"
#include "harness.h"
#include "rt.h"

/* ---------------------------------------------------------------- helpers */

static char tmp_root[256];

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    chmod(p, 0700);
    return remove(p);
}

static void cleanup(void)
{
    if (tmp_root[0]) {
        chmod(tmp_root, 0700);
        nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

static const char *test_dir(void)
{
    static int registered;
    cleanup();
    snprintf(tmp_root, sizeof tmp_root, "/tmp/dcptopk-trust-test-XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        exit(1);
    }
    if (!registered)
        atexit(cleanup);
    registered = 1;
    return tmp_root;
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
    const char *dir = test_dir();
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
