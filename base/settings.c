/* settings.c - the environment variable table and its typed getters (see
 * settings.h). getenv is called here and nowhere else in the library. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "settings.h"

static const dc_setting settings[DC_SETTING_COUNT] = {
#define DC_SETTING_ROW(id, name, kind, dflt, min, max, doc)                     \
    {name, kind, (double)(dflt), (double)(min), (double)(max), doc},
    DC_SETTINGS(DC_SETTING_ROW)
#undef DC_SETTING_ROW
};

const dc_setting *dc_setting_info(dc_setting_id id)
{
    return (unsigned)id < DC_SETTING_COUNT ? &settings[id] : NULL;
}

/* The raw value, NULL when unset or empty. */
static const char *raw(dc_setting_id id)
{
    const char *v = getenv(settings[id].name);
    return v && v[0] ? v : NULL;
}

const char *dc_setting_text(dc_setting_id id) { return raw(id); }

int dc_setting_parse_int(dc_setting_id id, const char *text, int64_t *out)
{
    const dc_setting *s = &settings[id];
    if (s->kind == DC_SETTING_FLAG) {
        /* Strict, so that "false" or "no" never switches a flag on (one of
         * them relaxes the cache's trust check). */
        static const char *const off[] = {"0", "off", "no", "false"};
        static const char *const on[] = {"1", "on", "yes", "true"};
        for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
            if (strcasecmp(text, off[i]) == 0) {
                *out = 0;
                return 0;
            }
            if (strcasecmp(text, on[i]) == 0) {
                *out = 1;
                return 0;
            }
        }
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || (double)v < s->min ||
        (double)v > s->max)
        return -1;
    *out = v;
    return 0;
}

int dc_setting_parse_seconds(dc_setting_id id, const char *text, double *out)
{
    const dc_setting *s = &settings[id];
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < s->min ||
        v > s->max)
        return -1;
    *out = v;
    return 0;
}

int dc_setting_parse_bytes(dc_setting_id id, const char *text, int64_t *out)
{
    const dc_setting *s = &settings[id];
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || v < 0)
        return -1;
    int shift = 0;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: return -1;
        }
        if (end[1] && strcmp(end + 1, "B") != 0 && strcmp(end + 1, "iB") != 0)
            return -1;
    }
    if (shift && v > (INT64_MAX >> shift))
        return -1;
    int64_t bytes = (int64_t)v << shift;
    if ((double)bytes < s->min || (double)bytes > s->max)
        return -1;
    *out = bytes;
    return 0;
}

static void ignored(dc_setting_id id, const char *text, const char *expected)
{
    const dc_setting *s = &settings[id];
    if (s->kind == DC_SETTING_FLAG)
        dc_log_warn("ignoring %s=\"%s\" (expected 0 or 1): using the "
                    "default, %.17g", s->name, text, s->dflt);
    else
        dc_log_warn("ignoring %s=\"%s\" (expected %s, %.17g..%.17g): using "
                    "the default, %.17g", s->name, text, expected, s->min,
                    s->max, s->dflt);
}

int64_t dc_setting_int(dc_setting_id id)
{
    const char *v = raw(id);
    int64_t out;
    if (!v)
        return (int64_t)settings[id].dflt;
    if (dc_setting_parse_int(id, v, &out) == 0)
        return out;
    ignored(id, v, "an integer");
    return (int64_t)settings[id].dflt;
}

double dc_setting_seconds(dc_setting_id id)
{
    const char *v = raw(id);
    double out;
    if (!v)
        return settings[id].dflt;
    if (dc_setting_parse_seconds(id, v, &out) == 0)
        return out;
    ignored(id, v, "seconds");
    return settings[id].dflt;
}

int64_t dc_setting_bytes(dc_setting_id id)
{
    const char *v = raw(id);
    int64_t out;
    if (!v)
        return (int64_t)settings[id].dflt;
    if (dc_setting_parse_bytes(id, v, &out) == 0)
        return out;
    ignored(id, v, "a byte count such as 1073741824 or 1G");
    return (int64_t)settings[id].dflt;
}
