/*
 * harness.h - the test harness: TEST(name) registers a test; the runner runs
 * one test by name (as ctest does, one process per test) or all of them, and
 * closes with "N passed, N failed, N skipped".
 *
 * Checks print both sides and mark the test failed, then return from it.
 * SKIP("why") ends a test as skipped (exit code 77 for ctest), saying why.
 */
#ifndef DC_HARNESS_H
#define DC_HARNESS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*dc_test_fn)(void);
void dc_test_register(const char *name, dc_test_fn fn);

/* An environment variable as a test found it, so that a test that sets it
 * can put it back for the tests after it in the same process. */
typedef struct dc_env_kept {
    const char *name;
    int was_set;
    char value[512];
} dc_env_kept;
dc_env_kept dc_env_keep(const char *name);
void dc_env_put_back(const dc_env_kept *k);
/* Set by the CHECK macros and SKIP. */
extern int dc_test_failed;
extern int dc_test_skipped;

#define TEST(name)                                                             \
    static void test_##name(void);                                             \
    __attribute__((constructor)) static void register_##name(void)            \
    {                                                                          \
        dc_test_register(#name, test_##name);                                  \
    }                                                                          \
    static void test_##name(void)

#define DC_FAIL_AT(...)                                                        \
    do {                                                                       \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                        \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        dc_test_failed = 1;                                                    \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            DC_FAIL_AT("CHECK(%s) failed", #cond);                             \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            DC_FAIL_AT("CHECK(%s) failed: ", #cond);                           \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        int64_t dc_a_ = (int64_t)(a), dc_b_ = (int64_t)(b);                    \
        if (dc_a_ != dc_b_) {                                                  \
            DC_FAIL_AT("CHECK_EQ(%s, %s): %" PRId64 " != %" PRId64, #a, #b,    \
                       dc_a_, dc_b_);                                          \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_NE(a, b)                                                         \
    do {                                                                       \
        int64_t dc_a_ = (int64_t)(a), dc_b_ = (int64_t)(b);                    \
        if (dc_a_ == dc_b_) {                                                  \
            DC_FAIL_AT("CHECK_NE(%s, %s): both %" PRId64, #a, #b, dc_a_);      \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                     \
    do {                                                                       \
        const char *dc_a_ = (a), *dc_b_ = (b);                                 \
        if (strcmp(dc_a_ ? dc_a_ : "(null)", dc_b_ ? dc_b_ : "(null)") != 0) { \
            DC_FAIL_AT("CHECK_STR_EQ(%s, %s): \"%s\" != \"%s\"", #a, #b,       \
                       dc_a_ ? dc_a_ : "(null)", dc_b_ ? dc_b_ : "(null)");    \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_CONTAINS(haystack, needle)                                       \
    do {                                                                       \
        const char *dc_h_ = (haystack), *dc_n_ = (needle);                     \
        if (!dc_h_ || !strstr(dc_h_, dc_n_)) {                                 \
            DC_FAIL_AT("CHECK_CONTAINS(%s, \"%s\"): got \"%s\"", #haystack,    \
                       dc_n_, dc_h_ ? dc_h_ : "(null)");                       \
            return;                                                            \
        }                                                                      \
    } while (0)

/* Checks a dcptopk_result is DCPTOPK_SUCCESS, printing the last error. */
#define CHECK_OK(expr)                                                         \
    do {                                                                       \
        int dc_r_ = (int)(expr);                                               \
        if (dc_r_ != 0) {                                                      \
            DC_FAIL_AT("%s returned %s: %s", #expr,                            \
                       dcptopk_result_name((dcptopk_result)dc_r_),             \
                       dcptopk_last_error(NULL));                              \
            return;                                                            \
        }                                                                      \
    } while (0)

#define SKIP(...)                                                              \
    do {                                                                       \
        printf("SKIPPED: ");                                                   \
        printf(__VA_ARGS__);                                                   \
        printf("\n");                                                          \
        dc_test_skipped = 1;                                                   \
        return;                                                                \
    } while (0)

#endif /* DC_HARNESS_H */
