/* test_fuzz_corpus.c - replays the checked-in fuzz corpus
 * (tests/fuzz/corpus/<target>/) through the fuzz targets' own functions, so
 * every input that once crashed the library runs in CI without libFuzzer.
 * A target aborts on a broken promise; the sanitizer build catches the
 * rest. */
#include <dirent.h>
#include <stdlib.h>

#include "../fuzz/fuzz.h"
#include "harness.h"

typedef int (*target_fn)(const uint8_t *, size_t);

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every file of the target's corpus folder; returns how many ran, -1
 * when the folder is missing. */
static int replay(const char *target, target_fn fn)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", DC_TEST_SOURCE_DIR,
             target);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char *names[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_names);
    for (int i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        uint8_t *buf = NULL;
        size_t size = 0;
        if (f) {
            fseek(f, 0, SEEK_END);
            long len = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = malloc(len > 0 ? (size_t)len : 1);
            size = buf && len > 0 ? fread(buf, 1, (size_t)len, f) : 0;
            fclose(f);
        }
        fn(buf ? buf : (const uint8_t *)"", size);
        free(buf);
        free(names[i]);
    }
    return n;
}

TEST(ref_args)
{
    int n = replay("ref_args", dc_fuzz_ref_args);
    CHECK_MSG(n > 0, "no corpus for ref_args (%d)", n);
}

TEST(cache_file)
{
    int n = replay("cache_file", dc_fuzz_cache_file);
    CHECK_MSG(n > 0, "no corpus for cache_file (%d)", n);
}

TEST(key_and_config)
{
    int n = replay("key_and_config", dc_fuzz_key_and_config);
    CHECK_MSG(n > 0, "no corpus for key_and_config (%d)", n);
}

/* The targets also run on inputs made here, so a missing corpus file still
 * leaves each path exercised: empty, short, and patterned inputs. */
TEST(synthetic_inputs)
{
    uint8_t buf[512];
    for (int seed = 0; seed < 64; seed++) {
        uint32_t x = 2463534242u + (uint32_t)seed * 7919u;
        for (size_t i = 0; i < sizeof buf; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            buf[i] = (uint8_t)x;
        }
        size_t size = (size_t)(seed * 8) % sizeof buf;
        buf[0] = (uint8_t)seed;
        dc_fuzz_ref_args(buf, size);
        dc_fuzz_key_and_config(buf, size);
        if (seed % 8 == 0)
            dc_fuzz_cache_file(buf, size);
    }
}
