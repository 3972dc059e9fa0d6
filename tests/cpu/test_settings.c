/* test_settings.c - the environment variable table (base/settings.c): the
 * README lists exactly its names, each parser accepts its documented forms
 * and refuses the rest, an invalid value falls back to the default, and the
 * warmup thread count travels in the context config (no setenv). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "harness.h"
#include "settings.h"

/* The names of README.md's environment table: rows "| `NAME` | ... |" after
 * the "## Environment variables" heading, up to the next heading. */
static size_t readme_names(char names[][64], size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", DC_TEST_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 0;
    }
    char line[1024];
    int in_table = 0;
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "## ", 3) == 0) {
            in_table = strncmp(line, "## Environment variables", 24) == 0;
            continue;
        }
        if (!in_table || strncmp(line, "| `", 3) != 0)
            continue;
        const char *end = strchr(line + 3, '`');
        if (!end || n == cap)
            continue;
        size_t len = (size_t)(end - (line + 3));
        if (len >= 64)
            len = 63;
        memcpy(names[n], line + 3, len);
        names[n][len] = '\0';
        n++;
    }
    fclose(f);
    return n;
}

TEST(readme_lists_exactly_the_table)
{
    char names[64][64];
    size_t n = readme_names(names, 64);
    CHECK(n > 0);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (int id = 0; id < DC_SETTING_COUNT; id++)
            found |= strcmp(dc_setting_info((dc_setting_id)id)->name,
                            names[i]) == 0;
        CHECK_MSG(found, "README lists %s, base/settings.h does not",
                  names[i]);
    }
    for (int id = 0; id < DC_SETTING_COUNT; id++) {
        const dc_setting *s = dc_setting_info((dc_setting_id)id);
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(s->name, names[i]) == 0;
        CHECK_MSG(found, "base/settings.h has %s, the README does not",
                  s->name);
        CHECK(s->doc && s->doc[0]);
    }
    CHECK(dc_setting_info(DC_SETTING_COUNT) == NULL);
}

TEST(int_parser_checks_the_range)
{
    int64_t v = -1;
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS, "4", &v), 0);
    CHECK_EQ(v, 4);
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS, "64", &v), 0);
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS, "0", &v), -1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS, "65", &v), -1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS, "4x", &v), -1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS, "", &v), -1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_WARMUP_THREADS,
                                  "99999999999999999999999", &v), -1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_DISABLE_CUDA, "0", &v), 0);
    CHECK_EQ(v, 0);
    CHECK_EQ(dc_setting_parse_int(DC_SET_DISABLE_CUDA, "yes", &v), 0);
    CHECK_EQ(v, 1);
    /* A flag is strict: "false" is off, a word it does not know is refused
     * (DCPTOPK_CACHE_SHARED relaxes a trust check). */
    CHECK_EQ(dc_setting_parse_int(DC_SET_CACHE_SHARED, "false", &v), 0);
    CHECK_EQ(v, 0);
    CHECK_EQ(dc_setting_parse_int(DC_SET_CACHE_SHARED, "ON", &v), 0);
    CHECK_EQ(v, 1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_CACHE_SHARED, "2", &v), -1);
    CHECK_EQ(dc_setting_parse_int(DC_SET_CACHE_SHARED, "maybe", &v), -1);
    /* The opt-in trap of a group's timed-out device wait: off by default. */
    unsetenv("DCPTOPK_PEER_TIMEOUT_TRAP");
    CHECK_EQ(dc_setting_int(DC_SET_PEER_TIMEOUT_TRAP), 0);
    CHECK_EQ(dc_setting_parse_int(DC_SET_PEER_TIMEOUT_TRAP, "1", &v), 0);
    CHECK_EQ(v, 1);
}

TEST(bytes_and_seconds_parsers)
{
    int64_t b = -1;
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "1G", &b), 0);
    CHECK_EQ(b, (int64_t)1 << 30);
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "3MiB", &b), 0);
    CHECK_EQ(b, (int64_t)3 << 20);
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "512", &b), 0);
    CHECK_EQ(b, 512);
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "1Q", &b), -1);
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "1Gx", &b), -1);
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "-1", &b), -1);
    CHECK_EQ(dc_setting_parse_bytes(DC_SET_CACHE_MAX_BYTES, "9999999T", &b),
             -1);
    double s = -1;
    CHECK_EQ(dc_setting_parse_seconds(DC_SET_CACHE_CLAIM_TIMEOUT, "2.5", &s),
             0);
    CHECK(s == 2.5);
    CHECK_EQ(dc_setting_parse_seconds(DC_SET_CACHE_CLAIM_TIMEOUT, "nan", &s),
             -1);
    CHECK_EQ(dc_setting_parse_seconds(DC_SET_CACHE_CLAIM_TIMEOUT, "86401", &s),
             -1);
}

TEST(invalid_value_falls_back_to_the_default)
{
    setenv("DCPTOPK_LOG", "quiet", 1); /* the warning is not under test */
    setenv("DCPTOPK_RESCUE_TIMEOUT_MS", "soon", 1);
    CHECK_EQ(dc_setting_int(DC_SET_RESCUE_TIMEOUT_MS), 10000);
    setenv("DCPTOPK_RESCUE_TIMEOUT_MS", "250", 1);
    CHECK_EQ(dc_setting_int(DC_SET_RESCUE_TIMEOUT_MS), 250);
    unsetenv("DCPTOPK_RESCUE_TIMEOUT_MS");
    CHECK_EQ(dc_setting_int(DC_SET_RESCUE_TIMEOUT_MS), 10000);
    setenv("DCPTOPK_CACHE_WAL", "auto", 1);
    CHECK_EQ(dc_setting_int(DC_SET_CACHE_WAL), -1);
    setenv("DCPTOPK_CACHE_IMPORT_MAX_BYTES", "0", 1);
    CHECK_EQ(dc_setting_bytes(DC_SET_CACHE_IMPORT_MAX_BYTES),
             (int64_t)64 << 20);
    setenv("DCPTOPK_CACHE_IMPORT_MAX_BYTES", "2M", 1);
    CHECK_EQ(dc_setting_bytes(DC_SET_CACHE_IMPORT_MAX_BYTES),
             (int64_t)2 << 20);
    unsetenv("DCPTOPK_CACHE_IMPORT_MAX_BYTES");
    unsetenv("DCPTOPK_CACHE_WAL");
    setenv("DCPTOPK_TEMPLATE_DIR", "", 1);
    CHECK(dc_setting_text(DC_SET_TEMPLATE_DIR) == NULL);
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    unsetenv("DCPTOPK_LOG");
}

TEST(warmup_threads_is_a_context_field)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    CHECK_EQ(cfg.warmup_threads, 0);
    cfg.device = -1;
    cfg.arch = "sm_90a";
    cfg.cache_mode = DCPTOPK_CACHE_OFF;
    cfg.warmup_threads = 65;
    dcptopk_context *ctx = NULL;
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->warmup_threads = 65");
    cfg.warmup_threads = 3;
    CHECK_OK(dcptopk_context_create(&cfg, &ctx));
    dcptopk_context_destroy(ctx);
    /* An older caller's struct (up to `strict`) still works. */
    cfg.struct_size = (uint32_t)(offsetof(dcptopk_context_config, strict) +
                                 sizeof cfg.strict);
    cfg.warmup_threads = 999; /* past its struct_size: never read */
    CHECK_OK(dcptopk_context_create(&cfg, &ctx));
    dcptopk_context_destroy(ctx);
}
