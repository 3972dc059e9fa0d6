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
