// emu_kernel.h - what a test of a whole kernel template includes just
// before the template: emu_test.h with poisoned __shared__ (a kernel's
// shared memory starts as junk in every block, as a GPU may leave it), the
// key's rendered #defines (DC_EMU_PRELUDE: tests/CMakeLists.txt's KEYS
// writes them at build time from `dcptopk render`), and C11's
// _Static_assert for the ABI headers' C side (the test #undefs it after the
// template and its C headers). key_matches_prelude() checks those
// constants against the renderer's text for the key.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "dcptopk.h"
}

#define DC_EMU_POISON_SHARED 1
#include "emu_test.h"

#ifndef DC_EMU_PRELUDE
#error "the build defines DC_EMU_PRELUDE: the key's rendered #defines (tests/CMakeLists.txt)"
#endif
#include DC_EMU_PRELUDE
#define _Static_assert static_assert

// Parses DC_EMU_KEY into *key and checks that the renderer's text for it
// starts with the prelude this test was compiled with: a renderer or a key
// that changes breaks the build's prelude, or this.
inline bool key_matches_prelude(dcptopk_key *key)
{
    EXPECT(dcptopk_key_parse(DC_EMU_KEY, key) == DCPTOPK_SUCCESS, "%s: %s", DC_EMU_KEY,
           dcptopk_last_error(NULL));
    char *src = nullptr;
    EXPECT(dcptopk_key_render(key, &src) == DCPTOPK_SUCCESS, "%s", dcptopk_last_error(NULL));
    const std::string text(src);
    free(src);
    const std::string want = DC_EMU_PRELUDE_TEXT;
    EXPECT(text.compare(0, want.size(), want) == 0 && text.compare(want.size(), 6, "#line ") == 0,
           "the rendered text of %s does not start with the prelude this test was built with:\n%s",
           DC_EMU_KEY, want.c_str());
    return true;
}

// Output columns past K that a kernel must leave alone, and what they hold.
constexpr int EMU_PAD_COLS = 3;
constexpr int32_t EMU_SENTINEL = 0x5A5A5A5A;

// Every word of a kernel's output against the reference's, in rows of
// `width` words; names the first difference with `where` (the case).
template <class T>
bool same_words(const std::vector<T> &got, const std::vector<T> &want, size_t width,
                const char *what, const std::string &where)
{
    EXPECT(got.size() == want.size(), "%s: %s: %zu words, want %zu", where.c_str(), what,
           got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++)
        EXPECT(got[i] == want[i], "%s: %s[%zu][%zu] = %d (0x%08x), want %d (0x%08x)%s",
               where.c_str(), what, i / width, i % width, (int)got[i], (uint32_t)got[i],
               (int)want[i], (uint32_t)want[i],
               (int32_t)want[i] == EMU_SENTINEL ? " (left alone)"
               : (int32_t)got[i] == EMU_SENTINEL ? " (not written)"
                                                 : "");
    return true;
}

// The owned-rows inputs of `rows` rows: requests -1..3 (-1 and 3 own
// nothing with 3 requests) and a block table of random physical rows that
// drops the highest block indices of local ids below local_len.
struct HostRowsMap {
    std::vector<int32_t> req, table;
    int64_t table_stride = 0;
    int32_t cols = 0, num_reqs = 3, stride_rows = 0;

    HostRowsMap(int64_t rows, int64_t local_len, int32_t block, uint64_t seed, Rng &rng)
    {
        req.resize((size_t)rows);
        for (int64_t i = 0; i < rows; i++)
            req[(size_t)i] = (int32_t)((i + (int64_t)seed) % 5) - 1;
        stride_rows = block + 5;
        const int64_t blocks = (local_len + block - 1) / block;
        cols = (int32_t)(blocks - blocks / 4);
        table_stride = cols + 3;
        table.resize((size_t)(table_stride * num_reqs));
        for (auto &e : table)
            e = (int32_t)rng.below(100000);
    }
    // m's inputs from this map, and its outputs.
    void apply(dcptopk_rows_map &m, int32_t *rows_out, int64_t stride, int32_t *counts) const
    {
        m.req_id = req.data();
        m.block_table = table.data();
        m.block_table_stride = table_stride;
        m.block_table_cols = cols;
        m.num_reqs = num_reqs;
        m.stride_rows = stride_rows;
        m.rows_out = rows_out;
        m.rows_out_stride = stride;
        m.counts_out = counts;
    }
};
