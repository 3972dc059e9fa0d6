// emu_test.h - what the emulator's tests share: the C harness (TEST, CHECK),
// a seeded generator (gen.h's), EXPECT, and RUN_BLOCK, which runs one block under
// simt.h and fails with the emulator's message if the block went wrong.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "simt.h"

extern "C" {
#include "gen.h"
#include "harness.h"
}

// The tests' seeded generator: gen.h's dc_rng, in the spelling the C++
// tests use.
struct Rng {
    dc_rng r;
    explicit Rng(uint64_t seed) { dc_rng_seed(&r, seed); }
    uint64_t next() { return dc_rng_next(&r); }
    // Uniform in [0, n), n >= 1.
    uint32_t below(uint32_t n) { return (uint32_t)dc_rng_below(&r, n); }
    // Uniform in [lo, hi].
    int range(int lo, int hi) { return (int)dc_rng_range(&r, lo, hi); }
    bool chance(double p) { return dc_rng_uniform(&r) < p; }
};

// Case counts: the sanitizer builds (scripts/test.sh, Debug) look for memory
// errors and undefined behaviour, not for rarer inputs, so they run fewer:
// a quarter under ASan+UBSan (some 7 times slower a case), a sixteenth
// under TSan (some 40 times slower: every fiber switch also merges vector
// clocks; on one OS thread it has no race to find anyway).
#if defined(DC_EMU_TSAN)
constexpr int CASE_DIV = 16;
#elif defined(DC_EMU_ASAN)
constexpr int CASE_DIV = 4;
#else
constexpr int CASE_DIV = 1;
#endif
inline int scaled(int n) { return n / CASE_DIV > 0 ? n / CASE_DIV : 1; }

// The tests' checks live in bool helpers (one helper = one kind of case,
// templated on the kernel's compile-time shape): EXPECT prints where and
// why and returns false, and the TEST ends with CHECK(helper(...)).
#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            dc_test_failed = 1;                                                \
            return false;                                                      \
        }                                                                      \
    } while (0)

// Runs `body` as every thread of one block of `threads` threads; a block
// that deadlocks or misuses a barrier fails the helper with the emulator's
// message.
#define RUN_BLOCK(threads, body)                                               \
    do {                                                                       \
        const std::string dc_emu_err_ = dc_emu::run_block((threads), (body));  \
        EXPECT(dc_emu_err_.empty(), "%s", dc_emu_err_.c_str());                \
    } while (0)
