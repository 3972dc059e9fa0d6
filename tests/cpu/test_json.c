/* test_json.c - the CLI's JSON string writer (tools/cli_util.c, compiled
 * into this test): UTF-8 passes through unchanged, control characters are
 * escaped, bytes that are not well-formed UTF-8 become U+FFFD. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harness.h"

/* cli_json_strn's output for s[0..n). */
static char *json(const char *s, size_t n)
{
    static char buf[1024];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    if (!f)
        return NULL;
    cli_json_strn(f, s, n);
    fclose(f);
    return buf;
}

TEST(utf8_passes_through)
{
    const char *path = "/tmp/cach\xc3\xa9/dcptopk.sqlite";
    CHECK_STR_EQ(json(path, strlen(path)),
                 "\"/tmp/cach\xc3\xa9/dcptopk.sqlite\"");
    /* 3- and 4-byte forms: U+20AC, U+1F600. */
    const char *wide = "\xe2\x82\xac \xf0\x9f\x98\x80";
    CHECK_STR_EQ(json(wide, strlen(wide)), "\"\xe2\x82\xac \xf0\x9f\x98\x80\"");
}

TEST(control_characters_are_escaped)
{
    const char *name = "k\x1b[31mred\x1b[0m\x7f\n\"\\";
    CHECK_STR_EQ(json(name, strlen(name)),
                 "\"k\\u001b[31mred\\u001b[0m\\u007f\\n\\\"\\\\\"");
    const char nul[] = {'a', '\0', 'b'};
    CHECK_STR_EQ(json(nul, 3), "\"a\\u0000b\"");
}

TEST(invalid_utf8_becomes_the_replacement_character)
{
    /* A Latin-1 "é", a lone continuation byte, an overlong "/", a UTF-16
     * surrogate, a code point past U+10FFFF, a sequence cut at the end. */
    const char *bad[][2] = {
        {"caf\xe9", "\"caf\\ufffd\""},
        {"\x80x", "\"\\ufffdx\""},
        {"\xc0\xaf", "\"\\ufffd\\ufffd\""},
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {"\xe2\x82", "\"\\ufffd\\ufffd\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_STR_EQ(json(bad[i][0], strlen(bad[i][0])), bad[i][1]);
    CHECK_STR_EQ(json(NULL, 0), "\"\"");
}
