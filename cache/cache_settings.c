/*
 * cache_settings.c - the cache's environment variables, read once per open
 * (dc_cache_settings_load). Parsing, ranges, defaults and the warning for a
 * bad value are the settings table's (base/settings.h); this file only
 * copies the values into the handle, so that one open sees one consistent
 * set even if the environment changes under it.
 */
#include "cache_int.h"
#include "settings.h"

void dc_cache_settings_load(dc_cache_settings *s)
{
    s->busy_ms = (int)dc_setting_int(DC_SET_CACHE_BUSY_MS);
    s->claim_timeout_s = dc_setting_seconds(DC_SET_CACHE_CLAIM_TIMEOUT);
    s->max_bytes = dc_setting_bytes(DC_SET_CACHE_MAX_BYTES);
    s->wal = (int)dc_setting_int(DC_SET_CACHE_WAL);
    s->shared = (int)dc_setting_int(DC_SET_CACHE_SHARED);
    s->import_max_bytes = dc_setting_bytes(DC_SET_CACHE_IMPORT_MAX_BYTES);
}
