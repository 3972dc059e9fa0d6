/* env.c - the public view of the settings table and of the run-time
 * environment (dcptopk_setting_get, dcptopk_env_info_get): what `dcptopk env`
 * and the Python binding report. Values are parsed by the table's own
 * parsers (base/settings.c), silently: reporting never logs. */
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "cache.h"
#include "nvrtc_table.h"
#include "rt.h"
#include "settings.h"
#include "structs.h"

static const char *kind_name(dc_setting_kind k)
{
    switch (k) {
    case DC_SETTING_TEXT: return "text";
    case DC_SETTING_INT: return "int";
    case DC_SETTING_SECONDS: return "seconds";
    case DC_SETTING_BYTES: return "bytes";
    case DC_SETTING_FLAG: return "flag";
    case DC_SETTING_FOREIGN: return "foreign";
    }
    return "unknown";
}

dcptopk_result dcptopk_setting_get(size_t i, dcptopk_setting *dst)
{
    dcptopk_result r = DC_STRUCT_OUT(NULL, "out", dst, SETTING);
    if (r)
        return r;
    if (i >= DC_SETTING_COUNT)
        return dc_fail(NULL, DCPTOPK_NOT_FOUND,
                       "dcptopk_setting_get: i = %zu: the table has %d "
                       "settings",
                       i, (int)DC_SETTING_COUNT);
    /* Filled in full here; the caller gets its struct_size's part. */
    dcptopk_setting setting = DCPTOPK_SETTING_INIT, *out = &setting;
    dc_setting_id id = (dc_setting_id)i;
    const dc_setting *s = dc_setting_info(id);
    const char *env = dc_setting_text(id);
    out->name = s->name;
    out->kind = kind_name(s->kind);
    out->doc = s->doc;
    out->env = env;
    out->value[0] = '\0';
    out->source = env ? DCPTOPK_SETTING_ENVIRONMENT : DCPTOPK_SETTING_DEFAULT;
    int64_t n = 0;
    double sec = 0;
    int bad = 0;
    switch (s->kind) {
    case DC_SETTING_INT:
    case DC_SETTING_FLAG:
    case DC_SETTING_BYTES:
        if (env)
            bad = (s->kind == DC_SETTING_BYTES
                       ? dc_setting_parse_bytes(id, env, &n)
                       : dc_setting_parse_int(id, env, &n)) != 0;
        if (!env || bad)
            n = (int64_t)s->dflt;
        snprintf(out->value, sizeof out->value, "%lld", (long long)n);
        break;
    case DC_SETTING_SECONDS:
        if (env)
            bad = dc_setting_parse_seconds(id, env, &sec) != 0;
        if (!env || bad)
            sec = s->dflt;
        snprintf(out->value, sizeof out->value, "%.17g", sec);
        break;
    case DC_SETTING_TEXT:
    case DC_SETTING_FOREIGN:
        break;
    }
    if (bad)
        out->source = DCPTOPK_SETTING_IGNORED;
    dc_struct_write(dst, dst->struct_size, out, sizeof *out);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_env_info_get(dcptopk_env_info *dst)
{
    dcptopk_result r = DC_STRUCT_OUT(NULL, "out", dst, ENV_INFO);
    if (r)
        return r;
    /* Filled in full here; the caller gets its struct_size's part. */
    dcptopk_env_info info = DCPTOPK_ENV_INFO_INIT, *out = &info;
    /* SQLite first: a long compiler banner (clang's names its repository)
     * may be cut, the SQLite version may not. */
    snprintf(out->build, sizeof out->build, "SQLite %.24s (%s), assertions %s, cc %.60s",
             dc_cache_sqlite_version(), dc_cache_sqlite_bundled() ? "bundled" : "system",
#ifdef NDEBUG
             "off",
#else
             "on",
#endif
#ifdef __VERSION__
             __VERSION__
#else
             "unknown"
#endif
    );
    int major = -1, minor = -1;
    dc_nvrtc_version(&major, &minor);
    out->nvrtc_major = major;
    out->nvrtc_minor = minor;
    dc_nvrtc_path(out->nvrtc_path, sizeof out->nvrtc_path);
    const char *nv_why = NULL;
    const dc_nvrtc *nv = dc_nvrtc_get(&nv_why);
    if (nv)
        snprintf(out->nvrtc_archs, sizeof out->nvrtc_archs, "%s", nv->archs);
    else
        snprintf(out->nvrtc_error, sizeof out->nvrtc_error, "%s", nv_why);
    const char *why = NULL;
    out->driver_version = dc_rt_driver_version(&why);
    out->device_count = dc_rt_device_count();
    if (why)
        snprintf(out->no_device, sizeof out->no_device, "%s", why);
    int n = dc_cache_default_path(out->cache_path, sizeof out->cache_path);
    if (n < 0) {
        out->cache_path[0] = '\0';
        snprintf(out->cache_mode, sizeof out->cache_mode, "none");
        snprintf(out->cache_why, sizeof out->cache_why,
                 "none of DCPTOPK_CACHE_DIR, XDG_CACHE_HOME, HOME is set: "
                 "contexts compile into memory");
    } else if ((size_t)n >= sizeof out->cache_path) {
        snprintf(out->cache_mode, sizeof out->cache_mode, "refused");
        snprintf(out->cache_why, sizeof out->cache_why,
                 "the path is longer than %zu bytes",
                 sizeof out->cache_path - 1);
    } else {
        dc_cache_probe(out->cache_path, out->cache_mode,
                       sizeof out->cache_mode, out->cache_why,
                       sizeof out->cache_why);
    }
    dc_struct_write(dst, dst->struct_size, out, sizeof *out);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}
