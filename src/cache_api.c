/*
 * cache_api.c - the public "compile cache file" calls of dcptopk.h: argument
 * checks and error reporting around cache/ (which does the SQLite work).
 * Each failure is recorded both in the handle (dcptopk_cache_last_error) and
 * in the thread slot (dcptopk_last_error(NULL)).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "cache.h"

struct dcptopk_cache {
    dc_cache *cache;
    int readonly;
    char err[DC_ERR_LEN];
};

static dcptopk_result api_fail(dcptopk_cache *h, dcptopk_result code,
                               const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static dcptopk_result api_fail(dcptopk_cache *h, dcptopk_result code,
                               const char *fmt, ...)
{
    char msg[DC_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (h)
        snprintf(h->err, sizeof h->err, "%s", msg);
    return dc_fail(NULL, code, "%s", msg);
}

/* Passes on a result of cache/ whose message is in `err`. */
static dcptopk_result api_result(dcptopk_cache *h, dcptopk_result r,
                                 const char *err)
{
    if (r == DCPTOPK_SUCCESS) {
        if (h)
            h->err[0] = '\0';
        dc_clear(NULL);
        return r;
    }
    return api_fail(h, r, "%s", err);
}

static dcptopk_result check_handle(dcptopk_cache *h, const char *fn)
{
    if (h && h->cache)
        return DCPTOPK_SUCCESS;
    return api_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                    "%s: cache = NULL: open one with dcptopk_cache_open", fn);
}

/* The calls that write refuse a read-only handle here rather than in
 * cache/, so that the message names the public call. */
static dcptopk_result check_writable(dcptopk_cache *h, const char *fn)
{
    if (!h->readonly)
        return DCPTOPK_SUCCESS;
    return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                    "%s: cache %s is open read-only", fn,
                    dc_cache_path(h->cache));
}

int dcptopk_cache_default_path(char *buf, size_t size)
{
    if (!buf && size) {
        dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                "dcptopk_cache_default_path: buf = NULL with size = %zu", size);
        return -1;
    }
    int n = dc_cache_default_path(buf, size);
    if (n < 0)
        dc_fail(NULL, DCPTOPK_NOT_FOUND,
                "dcptopk_cache_default_path: none of DCPTOPK_CACHE_DIR, "
                "XDG_CACHE_HOME, HOME is set");
    return n;
}

dcptopk_result dcptopk_cache_open(const char *path, int readonly,
                                  dcptopk_cache **out)
{
    if (!out)
        return api_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_open: out = NULL: need somewhere to put "
                        "the handle");
    *out = NULL;
    if (readonly != 0 && readonly != 1)
        return api_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_open: readonly = %d: expected 0 or 1",
                        readonly);
    char def[4096];
    if (!path) {
        int n = dc_cache_default_path(def, sizeof def);
        if (n < 0)
            return api_fail(NULL, DCPTOPK_NOT_FOUND,
                            "dcptopk_cache_open: path = NULL and no default "
                            "(none of DCPTOPK_CACHE_DIR, XDG_CACHE_HOME, HOME "
                            "is set)");
        if ((size_t)n >= sizeof def)
            return api_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                            "dcptopk_cache_open: path = NULL and the default "
                            "path \"%.64s...\" is longer than %zu bytes",
                            def, sizeof def - 1);
        path = def;
    }
    if (!*path || strlen(path) >= sizeof def)
        return api_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_open: path = \"%.64s%s\": expected a "
                        "file name of 1 to %zu bytes",
                        path, strlen(path) > 64 ? "..." : "", sizeof def - 1);
    struct stat st;
    if (readonly && stat(path, &st) != 0)
        return api_fail(NULL, errno == ENOENT ? DCPTOPK_NOT_FOUND
                                              : DCPTOPK_IO_ERROR,
                        "dcptopk_cache_open: path = \"%s\": %s (a read-only "
                        "open needs an existing cache file)",
                        path, strerror(errno));
    dcptopk_cache *h = calloc(1, sizeof *h);
    if (!h)
        return api_fail(NULL, DCPTOPK_OUT_OF_MEMORY,
                        "dcptopk_cache_open: out of memory");
    char err[1024] = "";
    dcptopk_result r = dc_cache_open(path, readonly ? DC_CACHE_RO : DC_CACHE_RW,
                                     &h->cache, err, sizeof err);
    if (r != DCPTOPK_SUCCESS) {
        free(h);
        return api_fail(NULL, r, "dcptopk_cache_open: %s", err);
    }
    h->readonly = readonly || dc_cache_is_readonly(h->cache);
    *out = h;
    return api_result(h, DCPTOPK_SUCCESS, "");
}

void dcptopk_cache_close(dcptopk_cache *h)
{
    if (!h)
        return;
    dc_cache_close(h->cache);
    free(h);
}

const char *dcptopk_cache_path(const dcptopk_cache *h)
{
    return h && h->cache ? dc_cache_path(h->cache) : "";
}

const char *dcptopk_cache_last_error(const dcptopk_cache *h)
{
    if (!h)
        return "cache = NULL";
    return h->err[0] ? h->err : "no error";
}

/* Resolves a key prefix to the one full key it names. */
static dcptopk_result resolve(dcptopk_cache *h, const char *fn,
                              const char *prefix, char hex[33])
{
    if (!prefix)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "%s: key_prefix = NULL: expected 4 to 32 hex digits",
                        fn);
    size_t n = strlen(prefix);
    if (n < 4 || n > 32)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "%s: key_prefix = \"%.40s%s\": expected 4 to 32 hex "
                        "digits, got %zu characters",
                        fn, prefix, n > 40 ? "..." : "", n);
    char low[33];
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)prefix[i]))
            return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                            "%s: key_prefix = \"%s\": '%c' at position %zu is "
                            "not a hex digit",
                            fn, prefix, prefix[i], i);
        low[i] = (char)tolower((unsigned char)prefix[i]);
    }
    low[n] = '\0';
    char keys[2][33];
    size_t matches = 0;
    char err[1024] = "";
    dcptopk_result r =
        dc_cache_match(h->cache, low, keys, 2, &matches, err, sizeof err);
    if (r != DCPTOPK_SUCCESS)
        return api_fail(h, r, "%s: %s", fn, err);
    if (matches == 0)
        return api_fail(h, DCPTOPK_NOT_FOUND,
                        "%s: key_prefix = \"%s\": no entry in %s", fn, prefix,
                        dc_cache_path(h->cache));
    if (matches > 1)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "%s: key_prefix = \"%s\" is ambiguous: it matches %zu%s"
                        " entries (%s, %s, ...); give more digits",
                        fn, prefix, matches, matches >= 1000 ? "+" : "",
                        keys[0], keys[1]);
    memcpy(hex, keys[0], 33);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_cache_list(dcptopk_cache *h, dcptopk_cache_entry **out,
                                  size_t *count)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_list");
    if (r)
        return r;
    if (!out || !count)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_list: %s = NULL: required",
                        !out ? "out" : "count");
    char err[1024] = "";
    r = dc_cache_list(h->cache, out, count, err, sizeof err);
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_find(dcptopk_cache *h, const char *key_prefix,
                                  dcptopk_cache_entry *out)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_find");
    if (r)
        return r;
    if (!out)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_find: out = NULL: required");
    char hex[33];
    r = resolve(h, "dcptopk_cache_find", key_prefix, hex);
    if (r)
        return r;
    char err[1024] = "";
    r = dc_cache_entry_get(h->cache, hex, out, err, sizeof err);
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_read_blob(dcptopk_cache *h,
                                       const char *key_prefix, int32_t blob,
                                       void **data, size_t *size)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_read_blob");
    if (r)
        return r;
    if (!data || !size)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_read_blob: %s = NULL: required",
                        !data ? "data" : "size");
    *data = NULL;
    *size = 0;
    if (blob != DCPTOPK_BLOB_CUBIN && blob != DCPTOPK_BLOB_PTX &&
        blob != DCPTOPK_BLOB_SOURCE)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_read_blob: blob = %d: expected "
                        "DCPTOPK_BLOB_CUBIN (0), DCPTOPK_BLOB_PTX (1) or "
                        "DCPTOPK_BLOB_SOURCE (2)",
                        (int)blob);
    char hex[33];
    r = resolve(h, "dcptopk_cache_read_blob", key_prefix, hex);
    if (r)
        return r;
    char err[1024] = "";
    r = dc_cache_blob(h->cache, hex, (int)blob, data, size, err, sizeof err);
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_stats_get(dcptopk_cache *h,
                                       dcptopk_cache_stats *out)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_stats_get");
    if (r)
        return r;
    if (!out)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_stats_get: out = NULL: required");
    if (out->struct_size < sizeof(uint32_t) ||
        out->struct_size > (1u << 20))
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_stats_get: out->struct_size = %u: "
                        "initialise it with DCPTOPK_CACHE_STATS_INIT (%zu)",
                        out->struct_size, sizeof(dcptopk_cache_stats));
    dcptopk_cache_stats s = DCPTOPK_CACHE_STATS_INIT;
    char err[1024] = "";
    r = dc_cache_stats(h->cache, &s, err, sizeof err);
    if (r == DCPTOPK_SUCCESS) {
        /* A caller built against an older, smaller struct gets its part. */
        uint32_t keep = out->struct_size;
        size_t n = keep < sizeof s ? keep : sizeof s;
        memcpy(out, &s, n);
        out->struct_size = keep;
    }
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_verify(dcptopk_cache *h, int64_t *checked,
                                    int64_t *bad)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_verify");
    if (r)
        return r;
    int64_t c = 0, b = 0;
    char err[1024] = "";
    r = dc_cache_verify(h->cache, &c, &b, err, sizeof err);
    if (checked)
        *checked = c;
    if (bad)
        *bad = b;
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_prune(dcptopk_cache *h, int64_t max_bytes,
                                   int64_t *removed)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_prune");
    if (r)
        return r;
    if (removed)
        *removed = 0;
    if (max_bytes < 0)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_prune: max_bytes = %lld: must be >= 0",
                        (long long)max_bytes);
    if ((r = check_writable(h, "dcptopk_cache_prune")))
        return r;
    char err[1024] = "";
    r = dc_cache_prune(h->cache, max_bytes, NULL, removed, err, sizeof err);
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_remove(dcptopk_cache *h, const char *key_prefix)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_remove");
    if (r)
        return r;
    if ((r = check_writable(h, "dcptopk_cache_remove")))
        return r;
    char hex[33];
    r = resolve(h, "dcptopk_cache_remove", key_prefix, hex);
    if (r)
        return r;
    char err[1024] = "";
    r = dc_cache_remove(h->cache, hex, err, sizeof err);
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_clear(dcptopk_cache *h, int64_t *removed)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_clear");
    if (r)
        return r;
    if (removed)
        *removed = 0;
    if ((r = check_writable(h, "dcptopk_cache_clear")))
        return r;
    char err[1024] = "";
    r = dc_cache_clear(h->cache, removed, err, sizeof err);
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_export(dcptopk_cache *h, const char *path,
                                    int64_t *count)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_export");
    if (r)
        return r;
    if (count)
        *count = 0;
    if (!path || !*path)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_export: path = %s: expected a new file "
                        "name",
                        path ? "\"\"" : "NULL");
    int64_t n = 0;
    char err[1024] = "";
    r = dc_cache_export(h->cache, path, &n, err, sizeof err);
    if (count)
        *count = n;
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_import(dcptopk_cache *h, const char *path,
                                    int64_t *count)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_import");
    if (r)
        return r;
    if (count)
        *count = 0;
    if (!path || !*path)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_import: path = %s: expected a cache "
                        "file",
                        path ? "\"\"" : "NULL");
    if ((r = check_writable(h, "dcptopk_cache_import")))
        return r;
    int64_t n = 0;
    char err[1024] = "";
    r = dc_cache_import(h->cache, path, &n, err, sizeof err);
    if (count)
        *count = n;
    return api_result(h, r, err);
}
