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
#include "rt.h"
#include "structs.h"

struct dcptopk_cache {
    dc_cache *cache;
    int readonly;      /* the caller asked for read-only              */
    int file_readonly; /* the file cannot be written (dc_cache_why)   */
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
    if (h->readonly)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "%s: cache %s is open read-only", fn,
                        dc_cache_path(h->cache));
    if (h->file_readonly)
        return api_fail(h, DCPTOPK_CACHE_ERROR, "%s: cache %s: %s", fn,
                        dc_cache_path(h->cache), dc_cache_why(h->cache));
    return DCPTOPK_SUCCESS;
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
    /* Strict: maintenance must reach the real file, never a stand-in. */
    dc_cache_open_mode mode =
        (dc_cache_open_mode)((readonly ? DC_CACHE_RO : DC_CACHE_RW) |
                             DC_CACHE_STRICT);
    dcptopk_result r = dc_cache_open(path, mode, &h->cache, err, sizeof err);
    if (r != DCPTOPK_SUCCESS) {
        free(h);
        return api_fail(NULL, r, "dcptopk_cache_open: %s", err);
    }
    h->readonly = readonly;
    h->file_readonly = !readonly && dc_cache_is_readonly(h->cache);
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

int dcptopk_cache_readonly(const dcptopk_cache *h)
{
    return h && (h->readonly || h->file_readonly);
}

const char *dcptopk_cache_last_error(const dcptopk_cache *h)
{
    if (!h)
        return "cache = NULL";
    return h->err[0] ? h->err : "no error";
}

/* Resolves a key prefix to the one full key it names. */
static dcptopk_result resolve(dcptopk_cache *h, const char *fn,
                              const char *prefix, char hex[256])
{
    if (!prefix)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "%s: key_prefix = NULL: expected 4 to 32 hex digits",
                        fn);
    size_t n = strlen(prefix);
    /* A row with a malformed key (crafted, or from a foreign file) is
     * named by its whole key as stored, so that it can be removed. */
    int hex_only = n > 0;
    for (size_t i = 0; i < n; i++)
        hex_only &= isxdigit((unsigned char)prefix[i]) != 0;
    if (!hex_only && n < 256) {
        dcptopk_cache_entry e;
        char err[1024] = "";
        if (dc_cache_entry_get(h->cache, prefix, &e, err, sizeof err) ==
            DCPTOPK_SUCCESS) {
            snprintf(hex, 256, "%s", prefix);
            return DCPTOPK_SUCCESS;
        }
    }
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
    char hex[256];
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
    char hex[256];
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
    if ((r = DC_STRUCT_OUT(NULL, "out", out, CACHE_STATS)))
        return api_fail(h, r, "dcptopk_cache_stats_get: %s",
                        dcptopk_last_error(NULL));
    dcptopk_cache_stats s = DCPTOPK_CACHE_STATS_INIT;
    char err[1024] = "";
    r = dc_cache_stats(h->cache, &s, err, sizeof err);
    if (r == DCPTOPK_SUCCESS)
        dc_struct_write(out, out->struct_size, &s, sizeof s);
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
    r = dc_cache_verify(h->cache, &c, &b, NULL, err, sizeof err);
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
    char hex[256];
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

/* ------------------------------------------------------ verified import */

/* The key a row describes: kernel by name, the fields of its string (each
 * a field of that kernel, written as dc_key_fields_string writes them) and
 * the arch. 0, or 1 with the reason in why. */
static int row_key(const dc_import_row *row, dcptopk_key *k, char *why,
                   size_t n)
{
    memset(k, 0, sizeof *k);
    const dc_kernel_info *info = NULL;
    for (int32_t i = 0; i < DCPTOPK_KERNEL_COUNT && !info; i++) {
        const dc_kernel_info *ki = dc_kernel_get(i);
        if (ki && row->meta.kernel && strcmp(ki->name, row->meta.kernel) == 0)
            info = ki;
    }
    if (!info) {
        snprintf(why, n, "kernel \"%.40s\" is not a kernel of this library",
                 row->meta.kernel ? row->meta.kernel : "");
        return 1;
    }
    k->kernel = info->kernel;
    const char *arch = row->meta.arch ? row->meta.arch : "";
    if (strlen(arch) >= sizeof k->arch || !dc_arch_valid(arch)) {
        snprintf(why, n, "arch \"%.20s\" is not a target arch", arch);
        return 1;
    }
    snprintf(k->arch, sizeof k->arch, "%s", arch);
    const char *p = row->meta.fields ? row->meta.fields : "";
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq) {
            snprintf(why, n, "fields \"%.80s\" do not parse", row->meta.fields);
            return 1;
        }
        size_t i = 0;
        for (; i < dc_key_field_count; i++)
            if (strlen(dc_key_fields[i].name) == (size_t)(eq - p) &&
                memcmp(dc_key_fields[i].name, p, (size_t)(eq - p)) == 0)
                break;
        char *end = NULL;
        errno = 0;
        long v = strtol(eq + 1, &end, 10);
        if (i == dc_key_field_count || !(info->fields & dc_key_fields[i].bit) ||
            errno || end == eq + 1 || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ',')) {
            snprintf(why, n, "fields \"%.80s\" do not parse for kernel %s",
                     row->meta.fields, info->name);
            return 1;
        }
        int32_t val = (int32_t)v;
        memcpy((char *)k + dc_key_fields[i].offset, &val, sizeof val);
        p = *end ? end + 1 : end;
    }
    char canon[512];
    dc_key_fields_string(k, canon, sizeof canon);
    if (strcmp(canon, row->meta.fields ? row->meta.fields : "") != 0) {
        snprintf(why, n, "fields \"%.80s\" are not in canonical form", 
                 row->meta.fields);
        return 1;
    }
    return 0;
}

static int same_bytes(const void *a, size_t na, const void *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

/* The check of a verified import: the row's key must be the hash of the key
 * its fields describe, rendered here, and compiling it here must give the
 * stored cubin, PTX and source byte for byte. */
static int verify_row(void *user, const dc_import_row *row, char *why,
                      size_t n)
{
    (void)user;
    dcptopk_key k;
    if (row_key(row, &k, why, n))
        return 1;
    dc_unit u;
    dcptopk_result r = dc_unit_build(NULL, &k, &u);
    if (r != DCPTOPK_SUCCESS) {
        snprintf(why, n, "its key does not render here: %s",
                 dcptopk_last_error(NULL));
        dc_unit_free(&u);
        return 1;
    }
    char hex[33];
    dc_hash_hex(u.hash, hex);
    if (strcmp(hex, row->key ? row->key : "") != 0) {
        const char *nv = row->meta.nvrtc_version ? row->meta.nvrtc_version : "";
        const char *lv = row->meta.lib_version ? row->meta.lib_version : "";
        int same = strcmp(nv, u.nvrtc_version) == 0 &&
                   strcmp(lv, dcptopk_version_string()) == 0;
        snprintf(why, n,
                 "stored under a key its fields do not give: %s(%s)@%s hashes "
                 "to %s here (%s%s%s%s%s%s%s%s)",
                 row->meta.kernel, row->meta.fields, row->meta.arch, hex,
                 same ? "a forged or damaged row" : "made by NVRTC ",
                 same ? "" : nv, same ? "" : " and library ",
                 same ? "" : lv, same ? "" : "; this is NVRTC ",
                 same ? "" : u.nvrtc_version, same ? "" : " and library ",
                 same ? "" : dcptopk_version_string());
        dc_unit_free(&u);
        return 1;
    }
    int verdict = 0;
    {
        dc_compiled c;
        char *err = malloc(DC_ERR_LEN);
        if (!err) {
            dc_unit_free(&u);
            snprintf(why, n, "out of memory");
            return -1;
        }
        r = dc_nvrtc_compile(&u, &c, err, DC_ERR_LEN);
        if (r != DCPTOPK_SUCCESS) {
            snprintf(why, n, "it does not compile here: %.400s", err);
            verdict = 1;
        } else if (!same_bytes(c.cubin, c.cubin_size, row->blobs.cubin,
                               row->blobs.cubin_size) ||
                   !same_bytes(c.ptx, c.ptx_size, row->blobs.ptx,
                               row->blobs.ptx_size) ||
                   !same_bytes(u.source, u.source_size, row->blobs.source,
                               row->blobs.source_size)) {
            snprintf(why, n,
                     "compiled here, its %s differs from the stored one (use "
                     "--trust only for your own files)",
                     !same_bytes(c.cubin, c.cubin_size, row->blobs.cubin,
                                 row->blobs.cubin_size)
                         ? "cubin"
                         : !same_bytes(c.ptx, c.ptx_size, row->blobs.ptx,
                                       row->blobs.ptx_size)
                               ? "PTX"
                               : "source");
            verdict = 1;
        }
        dc_compiled_free(&c);
        free(err);
    }
    dc_unit_free(&u);
    return verdict;
}

dcptopk_result dcptopk_cache_import_ex(dcptopk_cache *h, const char *path,
                                       uint32_t flags, int64_t *count,
                                       int64_t *rejected)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_import");
    if (r)
        return r;
    if (count)
        *count = 0;
    if (rejected)
        *rejected = 0;
    if (!path || !*path)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_import: path = %s: expected a cache "
                        "file",
                        path ? "\"\"" : "NULL");
    if (flags & ~DCPTOPK_CACHE_IMPORT_TRUST)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_import: flags = 0x%x: expected 0 or "
                        "DCPTOPK_CACHE_IMPORT_TRUST",
                        flags);
    if ((r = check_writable(h, "dcptopk_cache_import")))
        return r;
    int trust = (flags & DCPTOPK_CACHE_IMPORT_TRUST) != 0;
    int64_t n = 0, bad = 0;
    char err[1024] = "";
    /* --trust: today's behaviour for an operator's own files (checksums and
     * the size limit only). */
    r = dc_cache_import(h->cache, path, trust ? NULL : verify_row, NULL, &n,
                        &bad, err, sizeof err);
    if (count)
        *count = n;
    if (rejected)
        *rejected = bad;
    return api_result(h, r, err);
}

dcptopk_result dcptopk_cache_import(dcptopk_cache *h, const char *path,
                                    int64_t *count)
{
    return dcptopk_cache_import_ex(h, path, 0, count, NULL);
}

/* ------------------------------------------------------------------ claims */

dcptopk_result dcptopk_cache_claims(dcptopk_cache *h, dcptopk_cache_claim **out,
                                    size_t *count)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_claims");
    if (r)
        return r;
    if (!out || !count)
        return api_fail(h, DCPTOPK_INVALID_ARGUMENT,
                        "dcptopk_cache_claims: %s = NULL: required",
                        !out ? "out" : "count");
    *out = NULL;
    *count = 0;
    dc_cache_claim *v = NULL;
    size_t n = 0;
    char err[1024] = "";
    r = dc_cache_claims(h->cache, &v, &n, err, sizeof err);
    if (r != DCPTOPK_SUCCESS)
        return api_result(h, r, err);
    dcptopk_cache_claim *pub = calloc(n ? n : 1, sizeof *pub);
    if (!pub) {
        free(v);
        return api_fail(h, DCPTOPK_OUT_OF_MEMORY,
                        "dcptopk_cache_claims: out of memory for %zu claims",
                        n);
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(pub[i].key, v[i].key, sizeof pub[i].key);
        pub[i].pid = v[i].pid;
        snprintf(pub[i].host, sizeof pub[i].host, "%.63s", v[i].host);
        pub[i].started = v[i].started_ms;
        pub[i].stale = v[i].stale;
    }
    free(v);
    *out = pub;
    *count = n;
    return api_result(h, DCPTOPK_SUCCESS, "");
}

dcptopk_result dcptopk_cache_clear_stale_claims(dcptopk_cache *h,
                                                int64_t *removed)
{
    dcptopk_result r = check_handle(h, "dcptopk_cache_clear_stale_claims");
    if (r)
        return r;
    if (removed)
        *removed = 0;
    if ((r = check_writable(h, "dcptopk_cache_clear_stale_claims")))
        return r;
    char err[1024] = "";
    r = dc_cache_claims_clear_stale(h->cache, removed, err, sizeof err);
    return api_result(h, r, err);
}
