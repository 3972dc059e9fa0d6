/*
 * fuzz.h - what the fuzz targets share: a reader that derives every argument
 * from the fuzz bytes, the outcome check ("success, or an error code with a
 * message"), and the targets' entry points.
 *
 * Each target is `int dc_fuzz_<name>(const uint8_t *data, size_t size)` in
 * tests/fuzz/<name>.c. The libFuzzer build (DCPTOPK_FUZZ) compiles each file
 * with DC_FUZZ_LIBFUZZER, which adds LLVMFuzzerTestOneInput; the CPU test
 * tests/cpu/test_fuzz_corpus.c calls the same functions on every file of
 * tests/fuzz/corpus/<name>/, so the corpus runs in CI without libFuzzer.
 *
 * A target never lies to the library about a buffer: every host buffer is
 * allocated to what the fuzzed fields imply (or the input is skipped), so an
 * AddressSanitizer report is always a bug of the library. A broken promise of
 * the API (an error code without a message, an unknown code) aborts.
 */
#ifndef DC_FUZZ_H
#define DC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"

int dc_fuzz_ref_args(const uint8_t *data, size_t size);
int dc_fuzz_cache_file(const uint8_t *data, size_t size);
int dc_fuzz_key_and_config(const uint8_t *data, size_t size);

#ifdef DC_FUZZ_LIBFUZZER
#define DC_FUZZ_ENTRY(name)                                                    \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);              \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)               \
    {                                                                          \
        return dc_fuzz_##name(data, size);                                     \
    }
#else
#define DC_FUZZ_ENTRY(name)
#endif

/* A broken promise: print and abort (libFuzzer saves the input). */
#define DC_FUZZ_FAIL(...)                                                      \
    do {                                                                       \
        fprintf(stderr, "dc_fuzz: %s:%d: ", __FILE__, __LINE__);               \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        abort();                                                               \
    } while (0)

/* A call's result: success, or a known error code with a non-empty
 * dcptopk_last_error(NULL) message. */
static inline void dc_fuzz_outcome(const char *call, dcptopk_result r)
{
    if (r == DCPTOPK_SUCCESS)
        return;
    if (strcmp(dcptopk_result_name(r), "DCPTOPK_UNKNOWN_RESULT") == 0)
        DC_FUZZ_FAIL("%s returned unknown code %d", call, (int)r);
    const char *msg = dcptopk_last_error(NULL);
    if (!msg || !*msg)
        DC_FUZZ_FAIL("%s returned %s with an empty last error", call,
                     dcptopk_result_name(r));
}

/* ------------------------------------------------------------ the reader */

typedef struct dc_fuzz_in {
    const uint8_t *p;
    size_t n;
} dc_fuzz_in;

static inline uint64_t fz_bytes(dc_fuzz_in *in, int count)
{
    uint64_t v = 0;
    for (int i = 0; i < count; i++) {
        uint64_t b = 0;
        if (in->n) {
            b = *in->p++;
            in->n--;
        }
        v |= b << (8 * i);
    }
    return v;
}

static inline uint8_t fz_u8(dc_fuzz_in *in) { return (uint8_t)fz_bytes(in, 1); }
static inline uint32_t fz_u32(dc_fuzz_in *in) { return (uint32_t)fz_bytes(in, 4); }

/* One of `count` choices. */
static inline unsigned fz_pick(dc_fuzz_in *in, unsigned count)
{
    return fz_u8(in) % count;
}

/* An int32: mostly from `usual` (valid-looking values), else a boundary
 * value, else 4 raw bytes. */
static inline int32_t fz_i32(dc_fuzz_in *in, const int32_t *usual,
                             size_t nusual)
{
    static const int32_t edge[] = {0,  -1,        1,         INT32_MIN,
                                   INT32_MAX, 31, 33,        65536,
                                   131072,    131073, 1 << 20, (1 << 20) + 1};
    uint8_t m = fz_u8(in);
    if (m < 200 && nusual)
        return usual[m % nusual];
    if (m < 240)
        return edge[m % (sizeof edge / sizeof edge[0])];
    return (int32_t)fz_u32(in);
}

/* An int64 count / stride: mostly small, sometimes a boundary, sometimes raw. */
static inline int64_t fz_i64(dc_fuzz_in *in, int64_t small_max)
{
    static const int64_t edge[] = {0,
                                   -1,
                                   1,
                                   INT64_MIN,
                                   INT64_MAX,
                                   INT32_MAX,
                                   (int64_t)INT32_MAX + 1,
                                   INT64_C(1) << 40,
                                   (INT64_C(1) << 40) + 8,
                                   INT64_C(1) << 47,
                                   INT64_C(1) << 62,
                                   -(INT64_C(1) << 40)};
    uint8_t m = fz_u8(in);
    if (m < 200)
        return (int64_t)(fz_u32(in) % (uint64_t)(small_max + 1));
    if (m < 240)
        return edge[m % (sizeof edge / sizeof edge[0])];
    return (int64_t)fz_bytes(in, 8);
}

#endif /* DC_FUZZ_H */
