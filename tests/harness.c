/* harness.c - the test runner behind TEST(): `test_x` runs every test of the
 * file, `test_x NAME` one, `test_x --list` lists them. Exit status: 0 all
 * passed, 1 a failure, 77 every test run was skipped. */
#include "harness.h"

#include <stdlib.h>

#include "dcptopk.h"

#define DC_MAX_TESTS 512

static struct {
    const char *name;
    dc_test_fn fn;
} tests[DC_MAX_TESTS];
static int num_tests;
int dc_test_failed;
int dc_test_skipped;

dc_env_kept dc_env_keep(const char *name)
{
    dc_env_kept k = {.name = name, .was_set = 0, .value = ""};
    const char *v = getenv(name);
    if (v) {
        k.was_set = 1;
        snprintf(k.value, sizeof k.value, "%s", v);
    }
    return k;
}

void dc_env_put_back(const dc_env_kept *k)
{
    if (k->was_set)
        setenv(k->name, k->value, 1);
    else
        unsetenv(k->name);
}

void dc_test_register(const char *name, dc_test_fn fn)
{
    if (num_tests == DC_MAX_TESTS) {
        fprintf(stderr, "harness: more than %d tests\n", DC_MAX_TESTS);
        abort();
    }
    tests[num_tests].name = name;
    tests[num_tests].fn = fn;
    num_tests++;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0, skipped = 0, matched = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (only && strcmp(only, "--list") == 0) {
        for (int i = 0; i < num_tests; i++)
            printf("%s\n", tests[i].name);
        return 0;
    }
    for (int i = 0; i < num_tests; i++) {
        if (only && strcmp(only, tests[i].name) != 0)
            continue;
        matched++;
        dc_test_failed = 0;
        dc_test_skipped = 0;
        printf("[ RUN  ] %s\n", tests[i].name);
        tests[i].fn();
        if (dc_test_failed) {
            printf("[ FAIL ] %s\n", tests[i].name);
            failed++;
        } else if (dc_test_skipped) {
            printf("[ SKIP ] %s\n", tests[i].name);
            skipped++;
        } else {
            printf("[  OK  ] %s\n", tests[i].name);
            passed++;
        }
    }
    if (only && matched == 0) {
        fprintf(stderr, "harness: no test named '%s'\n", only);
        return 1;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed)
        return 1;
    if (skipped && passed == 0)
        return 77;
    return 0;
}
