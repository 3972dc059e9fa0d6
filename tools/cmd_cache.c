/* cmd_cache.c - `dcptopk cache SUBCOMMAND`: inspection and maintenance of the
 * compile cache file through the public dcptopk_cache_* calls. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct cache_sub {
    const char *name;
    const char *usage;   /* after "dcptopk cache " */
    const char *summary;
    int (*fn)(const char *path, cli_opt *opts, const char **pos, int npos);
    int readonly;        /* open mode                                    */
    int npos;            /* required positional arguments               */
    const char *pos_name;
    cli_opt opts[6];     /* besides --cache, NULL-terminated             */
    const char *details;
} cache_sub;

/* The last error of this subcommand, for --json (which prints it on
 * stdout as {"error": ...} besides the usual line on stderr). */
static char last_msg[8192];

static int cache_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int cache_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return cli_error(code, "%s", last_msg);
}

/* For --json: an error that cli_* already printed. */
static int note_error(int code, const char *msg)
{
    snprintf(last_msg, sizeof last_msg, "%s", msg);
    return code;
}

static int lib_error(dcptopk_result r, const char *what, const char *msg)
{
    snprintf(last_msg, sizeof last_msg, "%s: %s", what, msg);
    return cli_lib_error(r, what, msg);
}

static int lookup_error(dcptopk_result r, const char *what, const char *msg)
{
    snprintf(last_msg, sizeof last_msg, "%s: %s", what, msg);
    return cli_lookup_error(r, what, msg);
}

/* Opens the cache; returns an exit code. The library opens maintenance
 * handles strictly: an untrusted, damaged or foreign file, or one that is
 * not a regular file, fails here (exit 1) instead of falling back. */
static int open_cache(const char *path, int readonly, dcptopk_cache **out)
{
    dcptopk_result r = dcptopk_cache_open(path, readonly, out);
    if (r != DCPTOPK_SUCCESS) {
        char what[4200];
        snprintf(what, sizeof what, "opening the cache '%s'", path);
        return lib_error(r == DCPTOPK_INVALID_ARGUMENT ? DCPTOPK_CACHE_ERROR
                                                       : r,
                         what, dcptopk_last_error(NULL));
    }
    return CLI_OK;
}

/* The message of a failed call on `cache`: the handle's, else the thread's
 * (a call refused before it reached the handle). */
static const char *cache_msg(dcptopk_cache *cache)
{
    const char *msg = dcptopk_cache_last_error(cache);
    return msg && msg[0] ? msg : dcptopk_last_error(NULL);
}

/* A failed call ends the subcommand: reports it, then closes the handle
 * (after the report, which reads the handle's message). Returns the exit
 * code. */
static int fail_closing(dcptopk_cache *cache, dcptopk_result r,
                        const char *what)
{
    /* A read-only cache refused a write: a runtime failure (exit 1), not
     * a usage error. */
    int rc = lib_error(r == DCPTOPK_INVALID_ARGUMENT &&
                               dcptopk_cache_readonly(cache)
                           ? DCPTOPK_CACHE_ERROR
                           : r,
                       what, cache_msg(cache));
    dcptopk_cache_close(cache);
    return rc;
}

/* fail_closing for a key the user asked for: NOT_FOUND exits with
 * CLI_NOT_FOUND. */
static int lookup_fail_closing(dcptopk_cache *cache, dcptopk_result r,
                               const char *what)
{
    int rc = lookup_error(r, what, cache_msg(cache));
    dcptopk_cache_close(cache);
    return rc;
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Opens the cache and finds the one entry that KEYPREFIX `prefix` names.
 * Returns an exit code; on success the caller closes *cache. */
static int is_hex_text(const char *s)
{
    for (; *s; s++)
        if (!strchr("0123456789abcdefABCDEF", *s))
            return 0;
    return 1;
}

/* A KEYPREFIX is 4 to 32 hex digits; `exact_ok` (rm --exact) also takes a
 * whole key as stored that is not hex (a malformed row, so that it can be
 * removed). */
static int open_entry(const char *path, const char *prefix, int readonly,
                      int exact_ok, dcptopk_cache **cache,
                      dcptopk_cache_entry *e)
{
    int rc = exact_ok && prefix[0] && !is_hex_text(prefix)
                 ? CLI_OK
                 : cli_check_key_prefix("KEYPREFIX", prefix);
    if (rc)
        return rc;
    if (!file_exists(path))
        return cache_error(CLI_NOT_FOUND,
                           "KEYPREFIX = \"%s\": no cache file at %s", prefix,
                           path);
    if ((rc = open_cache(path, readonly, cache)))
        return rc;
    dcptopk_result r = dcptopk_cache_find(*cache, prefix, e);
    if (r != DCPTOPK_SUCCESS)
        return lookup_fail_closing(*cache, r, "KEYPREFIX");
    return CLI_OK;
}

/* ------------------------------------------------------------------ path */

static int sub_path(const char *path, cli_opt *opts, const char **pos, int npos)
{
    printf("%s\n", path);
    return CLI_OK;
}

/* -------------------------------------------------------------------- ls */

static void json_entry(FILE *f, const dcptopk_cache_entry *e)
{
    fprintf(f, "{\"key\":");
    cli_json_str(f, e->key);
    fprintf(f, ",\"kernel\":");
    cli_json_str(f, e->kernel);
    fprintf(f, ",\"fields\":");
    cli_json_str(f, e->fields);
    fprintf(f, ",\"arch\":");
    cli_json_str(f, e->arch);
    fprintf(f, ",\"nvrtc_version\":");
    cli_json_str(f, e->nvrtc_version);
    fprintf(f, ",\"lib_version\":");
    cli_json_str(f, e->lib_version);
    fprintf(f,
            ",\"cubin_bytes\":%" PRId64 ",\"ptx_bytes\":%" PRId64
            ",\"source_bytes\":%" PRId64 ",\"compile_ms\":%.3f,\"created\":%" PRId64
            ",\"last_used\":%" PRId64 ",\"hits\":%" PRId64 "}",
            e->cubin_bytes, e->ptx_bytes, e->source_bytes, e->compile_ms,
            e->created, e->last_used, e->hits);
}

static int sub_ls(const char *path, cli_opt *opts, const char **pos, int npos)
{
    int json = cli_find(opts, "--json")->seen;
    if (!file_exists(path)) {
        if (json)
            printf("[]\n");
        else
            printf("no cache file at %s (0 entries)\n", path);
        return CLI_OK;
    }
    dcptopk_cache *cache = NULL;
    int rc = open_cache(path, 1, &cache);
    if (rc)
        return rc;
    dcptopk_cache_entry *e = NULL;
    size_t n = 0;
    dcptopk_result r = dcptopk_cache_list(cache, &e, &n);
    if (r != DCPTOPK_SUCCESS)
        return fail_closing(cache, r, "listing the cache");
    if (json) {
        printf("[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                printf(",");
            json_entry(stdout, &e[i]);
        }
        printf("]\n");
    } else {
        char b1[32], b2[32], b3[32], t[40];
        int64_t total = 0;
        printf("%-12s  %-12s  %-7s  %10s  %10s  %10s  %6s  %-19s  %s\n", "KEY",
               "KERNEL", "ARCH", "CUBIN", "PTX", "SOURCE", "HITS", "LAST USED",
               "FIELDS");
        for (size_t i = 0; i < n; i++) {
            printf("%-12.12s  %-12s  %-7s  %10s  %10s  %10s  %6" PRId64
                   "  %-19s  %s\n",
                   e[i].key, e[i].kernel, e[i].arch,
                   cli_human_bytes(e[i].cubin_bytes, b1, sizeof b1),
                   cli_human_bytes(e[i].ptx_bytes, b2, sizeof b2),
                   cli_human_bytes(e[i].source_bytes, b3, sizeof b3),
                   e[i].hits, cli_time(e[i].last_used, t, sizeof t),
                   e[i].fields);
            total += e[i].cubin_bytes + e[i].ptx_bytes + e[i].source_bytes;
        }
        printf("%zu entr%s, %s in %s\n", n, n == 1 ? "y" : "ies",
               cli_human_bytes(total, b1, sizeof b1), path);
    }
    free(e);
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* ------------------------------------------------------------------ show */

static int sub_show(const char *path, cli_opt *opts, const char **pos, int npos)
{
    int json = cli_find(opts, "--json")->seen;
    int want_src = cli_find(opts, "--source")->seen;
    int want_ptx = cli_find(opts, "--ptx")->seen;
    dcptopk_cache *cache;
    dcptopk_cache_entry e;
    int rc = open_entry(path, pos[0], 1, 0, &cache, &e);
    if (rc)
        return rc;
    void *blob[2] = {NULL, NULL};
    size_t size[2] = {0, 0};
    const int32_t kinds[2] = {DCPTOPK_BLOB_SOURCE, DCPTOPK_BLOB_PTX};
    const int want[2] = {want_src, want_ptx};
    for (int i = 0; i < 2; i++) {
        if (!want[i])
            continue;
        dcptopk_result r =
            dcptopk_cache_read_blob(cache, e.key, kinds[i], &blob[i], &size[i]);
        if (r != DCPTOPK_SUCCESS) {
            free(blob[0]);
            return fail_closing(cache, r, i == 0 ? "reading the source"
                                                 : "reading the PTX");
        }
    }
    if (json) {
        printf("{\"entry\":");
        json_entry(stdout, &e);
        if (want_src) {
            printf(",\"source\":");
            cli_json_strn(stdout, blob[0], size[0]);
        }
        if (want_ptx) {
            printf(",\"ptx\":");
            cli_json_strn(stdout, blob[1], size[1]);
        }
        printf("}\n");
    } else if (want_src || want_ptx) {
        /* Only the blobs, so that the output can be piped to a file. */
        for (int i = 0; i < 2; i++) {
            if (!want[i] || !size[i])
                continue;
            fwrite(blob[i], 1, size[i], stdout);
            if (((const char *)blob[i])[size[i] - 1] != '\n')
                fputc('\n', stdout);
        }
    } else {
        char b[32], t1[40], t2[40];
        printf("key:           %s\n", e.key);
        printf("kernel:        %s\n", e.kernel);
        printf("fields:        %s\n", e.fields);
        printf("arch:          %s\n", e.arch);
        printf("nvrtc version: %s\n", e.nvrtc_version);
        printf("lib version:   %s\n", e.lib_version);
        printf("cubin:         %" PRId64 " bytes (%s)\n", e.cubin_bytes,
               cli_human_bytes(e.cubin_bytes, b, sizeof b));
        printf("ptx:           %" PRId64 " bytes (%s)\n", e.ptx_bytes,
               cli_human_bytes(e.ptx_bytes, b, sizeof b));
        printf("source:        %" PRId64 " bytes (%s)\n", e.source_bytes,
               cli_human_bytes(e.source_bytes, b, sizeof b));
        printf("compile ms:    %.1f\n", e.compile_ms);
        printf("created:       %s\n", cli_time(e.created, t1, sizeof t1));
        printf("last used:     %s\n", cli_time(e.last_used, t2, sizeof t2));
        printf("hits:          %" PRId64 "\n", e.hits);
    }
    free(blob[0]);
    free(blob[1]);
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* ----------------------------------------------------------------- stats */

static int sub_stats(const char *path, cli_opt *opts, const char **pos,
                     int npos)
{
    int json = cli_find(opts, "--json")->seen;
    dcptopk_cache_stats st = DCPTOPK_CACHE_STATS_INIT;
    int exists = file_exists(path);
    if (exists) {
        dcptopk_cache *cache = NULL;
        int rc = open_cache(path, 1, &cache);
        if (rc)
            return rc;
        dcptopk_result r = dcptopk_cache_stats_get(cache, &st);
        if (r != DCPTOPK_SUCCESS)
            return fail_closing(cache, r, "reading the cache statistics");
        dcptopk_cache_close(cache);
    }
    if (json) {
        printf("{\"path\":");
        cli_json_str(stdout, path);
        printf(",\"exists\":%s,\"entries\":%" PRId64 ",\"bytes\":%" PRId64
               ",\"file_bytes\":%" PRId64 ",\"hits\":%" PRId64
               ",\"compile_ms\":%.3f,\"claims\":%" PRId64 "}\n",
               exists ? "true" : "false", st.entries, st.bytes, st.file_bytes,
               st.hits, st.compile_ms, st.claims);
        return CLI_OK;
    }
    char b[32];
    printf("path:          %s%s\n", path, exists ? "" : " (no file yet)");
    printf("entries:       %" PRId64 "\n", st.entries);
    printf("blob bytes:    %" PRId64 " (%s)\n", st.bytes,
           cli_human_bytes(st.bytes, b, sizeof b));
    printf("file bytes:    %" PRId64 " (%s)\n", st.file_bytes,
           cli_human_bytes(st.file_bytes, b, sizeof b));
    printf("hits:          %" PRId64 "\n", st.hits);
    printf("compile ms:    %.1f (sum over entries)\n", st.compile_ms);
    printf("claims:        %" PRId64 " (compiles in progress)\n", st.claims);
    return CLI_OK;
}

/* ---------------------------------------------------------------- verify */

static int sub_verify(const char *path, cli_opt *opts, const char **pos,
                      int npos)
{
    int json = cli_find(opts, "--json")->seen;
    int64_t checked = 0, bad = 0;
    int readonly = 0;
    if (file_exists(path)) {
        dcptopk_cache *cache = NULL;
        int rc = open_cache(path, 0, &cache);
        if (rc)
            return rc;
        dcptopk_result r = dcptopk_cache_verify(cache, &checked, &bad);
        if (r != DCPTOPK_SUCCESS)
            return fail_closing(cache, r, "verifying the cache");
        readonly = dcptopk_cache_readonly(cache);
        dcptopk_cache_close(cache);
    }
    int64_t removed = readonly ? 0 : bad;
    if (json) {
        printf("{\"path\":");
        cli_json_str(stdout, path);
        printf(",\"checked\":%" PRId64 ",\"bad\":%" PRId64
               ",\"removed\":%" PRId64 "}\n",
               checked, bad, removed);
    } else
        printf("checked %" PRId64 " entr%s in %s: %" PRId64 " bad%s\n",
               checked, checked == 1 ? "y" : "ies", path, bad,
               !bad ? "" : readonly ? " (NOT removed: the file is read-only)"
                                    : " (removed)");
    if (bad && readonly)
        return cache_error(CLI_VERIFY_BAD,
                           "%" PRId64 " bad entr%s found in %s and not "
                           "removed: the file cannot be written",
                           bad, bad == 1 ? "y" : "ies", path);
    if (bad)
        return cache_error(CLI_VERIFY_BAD,
                           "%" PRId64 " bad entr%s found and removed from %s",
                           bad, bad == 1 ? "y" : "ies", path);
    return CLI_OK;
}

/* ----------------------------------------------------------------- prune */

static int sub_prune(const char *path, cli_opt *opts, const char **pos,
                     int npos)
{
    cli_opt *mb = cli_find(opts, "--max-bytes");
    if (!mb->seen)
        return cache_error(CLI_USAGE, "cache prune needs --max-bytes N (e.g. "
                         "--max-bytes 500M)");
    int64_t max_bytes;
    int rc = cli_parse_size("--max-bytes", mb->value, &max_bytes);
    if (rc)
        return rc;
    if (!file_exists(path)) {
        printf("no cache file at %s: nothing to prune\n", path);
        return CLI_OK;
    }
    dcptopk_cache *cache = NULL;
    if ((rc = open_cache(path, 0, &cache)))
        return rc;
    int64_t removed = 0;
    dcptopk_result r = dcptopk_cache_prune(cache, max_bytes, &removed);
    if (r != DCPTOPK_SUCCESS)
        return fail_closing(cache, r, "pruning the cache");
    dcptopk_cache_stats st = DCPTOPK_CACHE_STATS_INIT;
    r = dcptopk_cache_stats_get(cache, &st);
    char b[32];
    if (r == DCPTOPK_SUCCESS)
        printf("removed %" PRId64 " entr%s; %" PRId64 " left, %s\n", removed,
               removed == 1 ? "y" : "ies", st.entries,
               cli_human_bytes(st.bytes, b, sizeof b));
    else
        printf("removed %" PRId64 " entr%s\n", removed,
               removed == 1 ? "y" : "ies");
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* -------------------------------------------------------------------- rm */

static int sub_rm(const char *path, cli_opt *opts, const char **pos, int npos)
{
    dcptopk_cache *cache;
    dcptopk_cache_entry e;
    int rc = open_entry(path, pos[0], 0, cli_find(opts, "--exact")->seen,
                        &cache, &e);
    if (rc)
        return rc;
    dcptopk_result r = dcptopk_cache_remove(cache, e.key);
    if (r != DCPTOPK_SUCCESS)
        return lookup_fail_closing(cache, r, "KEYPREFIX");
    printf("removed %s %s(%s)@%s\n", e.key, e.kernel, e.fields, e.arch);
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* ----------------------------------------------------------------- clear */

static int sub_clear(const char *path, cli_opt *opts, const char **pos,
                     int npos)
{
    if (!cli_find(opts, "--yes")->seen)
        return cache_error(CLI_USAGE,
                         "cache clear removes every entry of %s: pass --yes "
                         "to confirm",
                         path);
    if (!file_exists(path)) {
        printf("no cache file at %s: nothing to clear\n", path);
        return CLI_OK;
    }
    dcptopk_cache *cache = NULL;
    int rc = open_cache(path, 0, &cache);
    if (rc)
        return rc;
    int64_t removed = 0;
    dcptopk_result r = dcptopk_cache_clear(cache, &removed);
    if (r != DCPTOPK_SUCCESS)
        return fail_closing(cache, r, "clearing the cache");
    printf("removed %" PRId64 " entr%s from %s\n", removed,
           removed == 1 ? "y" : "ies", path);
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* -------------------------------------------------------- export / import */

static int sub_export(const char *path, cli_opt *opts, const char **pos,
                      int npos)
{
    if (!pos[0][0])
        return cache_error(CLI_USAGE, "FILE = \"\": expected a file path");
    if (!file_exists(path))
        return cache_error(CLI_NOT_FOUND, "no cache file at %s: nothing to "
                         "export", path);
    dcptopk_cache *cache = NULL;
    int rc = open_cache(path, 1, &cache);
    if (rc)
        return rc;
    int64_t count = 0;
    dcptopk_result r = dcptopk_cache_export(cache, pos[0], &count);
    if (r != DCPTOPK_SUCCESS) {
        char what[4200];
        snprintf(what, sizeof what, "exporting to '%s'", pos[0]);
        return fail_closing(cache, r, what);
    }
    printf("exported %" PRId64 " entr%s to %s\n", count,
           count == 1 ? "y" : "ies", pos[0]);
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* Removes a cache file that this command created and left empty, with its
 * side files. */
static void remove_new_cache(const char *path)
{
    static const char *const sides[] = {"", "-journal", "-wal", "-shm",
                                        "-reserve"};
    char p[CLI_PATH_MAX + 16];
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        snprintf(p, sizeof p, "%s%s", path, sides[i]);
        unlink(p);
    }
}

static int sub_import(const char *path, cli_opt *opts, const char **pos,
                      int npos)
{
    int trust = cli_find(opts, "--trust")->seen;
    if (!pos[0][0])
        return cache_error(CLI_USAGE, "FILE = \"\": expected a file path");
    if (!file_exists(pos[0]))
        return cache_error(CLI_FAILURE, "FILE = \"%s\": no such file",
                           pos[0]);
    /* A destination that this command creates is removed again when the
     * import adds nothing to it: a failed import leaves no empty file. */
    int created = !file_exists(path);
    dcptopk_cache *cache = NULL;
    int rc = open_cache(path, 0, &cache);
    if (rc)
        return rc;
    int64_t count = 0, rejected = 0;
    dcptopk_result r = dcptopk_cache_import_ex(
        cache, pos[0], trust ? DCPTOPK_CACHE_IMPORT_TRUST : 0, &count,
        &rejected);
    if (r != DCPTOPK_SUCCESS) {
        char what[4200];
        snprintf(what, sizeof what, "importing '%s'", pos[0]);
        /* A missing or unreadable FILE is not a usage error either. */
        rc = fail_closing(cache,
                          r == DCPTOPK_INVALID_ARGUMENT ? DCPTOPK_CACHE_ERROR
                                                        : r,
                          what);
        if (created && count == 0)
            remove_new_cache(path);
        return rc;
    }
    printf("imported %" PRId64 " entr%s from %s into %s%s; %" PRId64
           " rejected\n",
           count, count == 1 ? "y" : "ies", pos[0], path,
           trust ? " (trusted: not recompiled)" : " (each recompiled and "
                                                  "compared)",
           rejected);
    dcptopk_cache_close(cache);
    if (created && count == 0 && rejected)
        remove_new_cache(path);
    if (rejected)
        return cache_error(CLI_VERIFY_BAD,
                           "%" PRId64 " entr%s of %s rejected (see the "
                           "warnings above)",
                           rejected, rejected == 1 ? "y" : "ies", pos[0]);
    return CLI_OK;
}

/* ---------------------------------------------------------------- claims */

static int sub_claims(const char *path, cli_opt *opts, const char **pos,
                      int npos)
{
    int json = cli_find(opts, "--json")->seen;
    int clear = cli_find(opts, "--clear-stale")->seen;
    if (!file_exists(path)) {
        if (json)
            printf(clear ? "{\"removed\":0,\"claims\":[]}\n" : "[]\n");
        else
            printf("no cache file at %s (no claims)\n", path);
        return CLI_OK;
    }
    dcptopk_cache *cache = NULL;
    int rc = open_cache(path, !clear, &cache);
    if (rc)
        return rc;
    int64_t removed = 0;
    if (clear) {
        dcptopk_result r = dcptopk_cache_clear_stale_claims(cache, &removed);
        if (r != DCPTOPK_SUCCESS)
            return fail_closing(cache, r, "clearing stale claims");
    }
    dcptopk_cache_claim *v = NULL;
    size_t n = 0;
    dcptopk_result r = dcptopk_cache_claims(cache, &v, &n);
    if (r != DCPTOPK_SUCCESS)
        return fail_closing(cache, r, "listing claims");
    if (json) {
        if (clear)
            printf("{\"removed\":%" PRId64 ",\"claims\":", removed);
        printf("[");
        for (size_t i = 0; i < n; i++) {
            printf("%s{\"key\":", i ? "," : "");
            cli_json_str(stdout, v[i].key);
            printf(",\"pid\":%" PRId64 ",\"host\":", v[i].pid);
            cli_json_str(stdout, v[i].host);
            printf(",\"started_ms\":%" PRId64 ",\"stale\":%s}", v[i].started,
                   v[i].stale ? "true" : "false");
        }
        printf("]%s\n", clear ? "}" : "");
    } else {
        if (clear)
            printf("removed %" PRId64 " stale claim%s\n", removed,
                   removed == 1 ? "" : "s");
        printf("%-12s  %8s  %-24s  %-19s  %s\n", "KEY", "PID", "HOST",
               "STARTED", "STATE");
        for (size_t i = 0; i < n; i++) {
            char t[40];
            printf("%-12.12s  %8" PRId64 "  %-24.24s  %-19s  %s\n", v[i].key,
                   v[i].pid, v[i].host,
                   cli_time(v[i].started / 1000, t, sizeof t),
                   v[i].stale ? "stale" : "live");
        }
        printf("%zu claim%s in %s\n", n, n == 1 ? "" : "s", path);
    }
    free(v);
    dcptopk_cache_close(cache);
    return CLI_OK;
}

/* -------------------------------------------------------------- dispatch */

#define NO_OPTS {{NULL, 0, 0, NULL}}
#define JSON_OPT {{"--json", 0, 0, NULL}, {NULL, 0, 0, NULL}}

static cache_sub subs[] = {
    {"path", "path", "print the cache file path", sub_path, 1, 0, NULL,
     NO_OPTS,
     "Prints the file that the other subcommands use: --cache PATH, else\n"
     "$DCPTOPK_CACHE_DIR/dcptopk.sqlite, else\n"
     "$XDG_CACHE_HOME/dcptopk/dcptopk.sqlite, else\n"
     "~/.cache/dcptopk/dcptopk.sqlite.\n"},
    {"ls", "ls [--json]", "list the entries, most recently used first",
     sub_ls, 1, 0, NULL, JSON_OPT,
     "Columns: key (first 12 of 32 hex digits), kernel, arch, cubin / PTX /\n"
     "source sizes, hits, last use, the key fields. --json prints every\n"
     "field of every entry (full keys, byte counts, unix times).\n"},
    {"show", "show KEYPREFIX [--json] [--source] [--ptx]",
     "print one entry's metadata, source or PTX", sub_show, 1, 1, "KEYPREFIX",
     {{"--json", 0, 0, NULL}, {"--source", 0, 0, NULL}, {"--ptx", 0, 0, NULL},
      {NULL, 0, 0, NULL}},
     "KEYPREFIX: at least 4 hex digits of the key, unambiguous.\n"
     "Without --source / --ptx: the metadata. With them: only the rendered\n"
     "source and/or the PTX (checksums verified), as stored, for piping.\n"
     "With --json: the metadata plus \"source\" / \"ptx\" strings.\n"},
    {"stats", "stats [--json]", "entry count, sizes, hits", sub_stats, 1, 0,
     NULL, JSON_OPT, ""},
    {"verify", "verify [--json]",
     "check every checksum, remove bad rows (exit 3 if any)", sub_verify, 0,
     0, NULL, JSON_OPT,
     "Exit code 3 when bad rows were found: removed, or on a file that\n"
     "cannot be written, reported as not removed.\n"},
    {"prune", "prune --max-bytes N",
     "remove least-recently-used entries down to N bytes", sub_prune, 0, 0,
     NULL, {{"--max-bytes", 1, 0, NULL}, {NULL, 0, 0, NULL}},
     "N: bytes, with an optional suffix K, M, G or T (powers of 1024),\n"
     "e.g. --max-bytes 500M. Counts cubin + PTX + source bytes.\n"},
    {"rm", "rm KEYPREFIX [--exact]", "remove one entry", sub_rm, 0, 1,
     "KEYPREFIX", {{"--exact", 0, 0, NULL}, {NULL, 0, 0, NULL}},
     "KEYPREFIX: at least 4 hex digits of the key, unambiguous. With\n"
     "--exact, the whole key as stored, whatever it holds (a malformed row\n"
     "that verify reports can be removed so).\n"},
    {"clear", "clear --yes", "remove every entry", sub_clear, 0, 0, NULL,
     {{"--yes", 0, 0, NULL}, {NULL, 0, 0, NULL}},
     "Refuses to run without --yes.\n"},
    {"export", "export FILE", "copy every entry into a new cache file",
     sub_export, 1, 1, "FILE", NO_OPTS,
     "Checksums are verified; FILE can be imported on another machine.\n"},
    {"import", "import FILE [--trust]", "merge the entries of a cache file",
     sub_import, 0, 1, "FILE", {{"--trust", 0, 0, NULL}, {NULL, 0, 0, NULL}},
     "Each entry is verified: its key must be the hash of its stored fields,\n"
     "and compiling it here must give the same bytes (NVRTC and the library\n"
     "must be the versions that made it). Entries over\n"
     "DCPTOPK_CACHE_IMPORT_MAX_BYTES (default 64M) or failing their checksum\n"
     "are rejected too. Keys already present are kept. --trust skips the\n"
     "compile and the key check: only for files you made yourself.\n"
     "Exit code 3 when entries were rejected.\n"},
    {"claims", "claims [--clear-stale] [--json]",
     "list compiles in progress; clear the stale ones", sub_claims, 1, 0,
     NULL,
     {{"--clear-stale", 0, 0, NULL}, {"--json", 0, 0, NULL},
      {NULL, 0, 0, NULL}},
     "A claim is stale when its process is gone (same host), it is older\n"
     "than DCPTOPK_CACHE_CLAIM_TIMEOUT (default 30 s), or it is dated in the\n"
     "future (clock skew). --clear-stale deletes the stale ones.\n"},
};
#define NSUBS (sizeof subs / sizeof subs[0])

static void cache_help(FILE *f)
{
    fprintf(f, "usage: dcptopk cache SUBCOMMAND [ARGS] [--cache PATH]\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < NSUBS; i++)
        fprintf(f, "  %-44s %s\n", subs[i].usage, subs[i].summary);
    fprintf(f, "\noptions (every subcommand):\n"
               "  --cache PATH   the cache file (default: 'dcptopk cache "
               "path')\n"
               "  -h, --help     help of a subcommand\n");
}

int cmd_cache(int argc, char **argv)
{
    if (argc < 1) {
        cache_help(stderr);
        return cache_error(CLI_USAGE, "cache needs a subcommand");
    }
    if (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        cache_help(stdout);
        return CLI_OK;
    }
    cache_sub *sub = NULL;
    for (size_t i = 0; i < NSUBS; i++)
        if (strcmp(argv[0], subs[i].name) == 0)
            sub = &subs[i];
    if (!sub) {
        if (argv[0][0] == '-')
            return cache_error(CLI_USAGE,
                             "cache: '%s' before the subcommand; put options "
                             "after it (e.g. 'dcptopk cache ls --cache PATH')",
                             argv[0]);
        return cache_error(CLI_USAGE,
                         "unknown cache subcommand '%s' (subcommands: path, "
                         "ls, show, stats, verify, prune, rm, clear, export, "
                         "import, claims)",
                         argv[0]);
    }

    cli_opt opts[8];
    size_t n = 0;
    for (; sub->opts[n].name; n++)
        opts[n] = sub->opts[n];
    opts[n++] = (cli_opt){"--cache", 1, 0, NULL};
    opts[n] = (cli_opt){NULL, 0, 0, NULL};

    char cmdname[32];
    snprintf(cmdname, sizeof cmdname, "cache %s", sub->name);
    const char *pos[2];
    int npos, help;
    int rc = cli_parse(cmdname, argc - 1, argv + 1, opts, pos, sub->npos,
                       &npos, &help);
    if (rc)
        return rc;
    if (help) {
        printf("usage: dcptopk cache %s [--cache PATH]\n\n%s.\n%s%s",
               sub->usage, sub->summary, sub->details[0] ? "\n" : "",
               sub->details);
        return CLI_OK;
    }
    if (npos < sub->npos)
        return cache_error(CLI_USAGE, "cache %s needs %s (usage: dcptopk cache "
                         "%s)", sub->name, sub->pos_name, sub->usage);
    const char *cache_opt = cli_find(opts, "--cache")->value;
    if ((rc = cli_check_path("--cache", cache_opt)))
        return note_error(rc, "--cache: bad path");
    for (int i = 0; i < npos; i++)
        if (sub->pos_name && strcmp(sub->pos_name, "FILE") == 0 &&
            (rc = cli_check_path("FILE", pos[i])))
            return note_error(rc, "FILE: bad path");
    char buf[CLI_PATH_MAX];
    const char *path = cli_cache_path(cache_opt, buf, sizeof buf);
    if (!path)
        return cache_error(CLI_FAILURE,
                         "cannot determine the default cache path (set "
                         "DCPTOPK_CACHE_DIR or pass --cache PATH)");
    last_msg[0] = '\0';
    rc = sub->fn(path, opts, pos, npos);
    cli_opt *json = cli_find(opts, "--json");
    if (rc != CLI_OK && rc != CLI_VERIFY_BAD && json && json->seen) {
        /* --json: the error as JSON on stdout too, so that a script
         * reading stdout sees it (verify's bad rows are in its result). */
        fflush(stdout);
        printf("{\"error\":{\"exit_code\":%d,\"message\":", rc);
        cli_json_str(stdout, last_msg[0] ? last_msg : "failed");
        printf("}}\n");
    }
    return rc;
}
