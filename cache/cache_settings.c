/*
 * cache_settings.c - the cache's environment variables, read in one place
 * (dc_cache_settings_load; the list is in cache_int.h). A value that does not
 * parse is ignored with a warning naming it, and the default is used.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"

/* An integer of bytes with an optional K/M/G/T suffix (powers of 1024, an
 * optional "B" or "iB" after it). 0 on success. */
static int parse_bytes(const char *text, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    int shift = 0;
    if (end && *end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: shift = -1;
        }
        if (shift > 0 && end[1] && strcmp(end + 1, "B") != 0 &&
            strcmp(end + 1, "iB") != 0)
            shift = -1;
    }
    if (errno || end == text || v < 0 || shift < 0 ||
        (shift && v > (INT64_MAX >> shift)))
        return -1;
    *out = (int64_t)v << shift;
    return 0;
}

static int parse_flag(const char *name, const char *text, int def)
{
    if (!text || !*text)
        return def;
    if (strcmp(text, "0") == 0)
        return 0;
    if (strcmp(text, "1") == 0)
        return 1;
    dc_cache_warn("ignoring %s=\"%s\" (expected 0 or 1)", name, text);
    return def;
}

void dc_cache_settings_load(dc_cache_settings *s)
{
    s->busy_ms = 10000;
    s->claim_timeout_s = 30.0;
    s->max_bytes = 0;
    s->wal = -1;
    s->shared = 0;
    s->import_max_bytes = (int64_t)64 << 20;

    const char *env = getenv("DCPTOPK_CACHE_BUSY_MS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end && *end == '\0' && v >= 0 && v <= 3600000)
            s->busy_ms = (int)v;
        else
            dc_cache_warn("ignoring DCPTOPK_CACHE_BUSY_MS=\"%s\" (expected "
                          "milliseconds, 0..3600000): using 10000",
                          env);
    }
    env = getenv("DCPTOPK_CACHE_CLAIM_TIMEOUT");
    if (env && *env) {
        char *end = NULL;
        double v = strtod(env, &end);
        if (end && *end == '\0' && v >= 0.0 && v <= 86400.0)
            s->claim_timeout_s = v;
        else
            dc_cache_warn("ignoring DCPTOPK_CACHE_CLAIM_TIMEOUT=\"%s\" "
                          "(expected seconds, 0..86400): using 30",
                          env);
    }
    env = getenv("DCPTOPK_CACHE_MAX_BYTES");
    if (env && *env && parse_bytes(env, &s->max_bytes) != 0) {
        s->max_bytes = 0;
        dc_cache_warn("ignoring DCPTOPK_CACHE_MAX_BYTES=\"%s\" (expected a "
                      "byte count such as 1073741824 or 1G): no size cap",
                      env);
    }
    env = getenv("DCPTOPK_CACHE_IMPORT_MAX_BYTES");
    if (env && *env) {
        int64_t v = 0;
        if (parse_bytes(env, &v) == 0 && v > 0)
            s->import_max_bytes = v;
        else
            dc_cache_warn("ignoring DCPTOPK_CACHE_IMPORT_MAX_BYTES=\"%s\" "
                          "(expected a byte count > 0 such as 64M): using "
                          "64M",
                          env);
    }
    s->wal = parse_flag("DCPTOPK_CACHE_WAL", getenv("DCPTOPK_CACHE_WAL"), -1);
    s->shared =
        parse_flag("DCPTOPK_CACHE_SHARED", getenv("DCPTOPK_CACHE_SHARED"), 0);
}
