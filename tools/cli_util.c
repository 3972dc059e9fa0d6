/* cli_util.c - error reporting, option parsing, number/size parsing and
 * output helpers of the command-line tool. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("dcptopk: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int cli_exit_code(dcptopk_result r)
{
    switch (r) {
    case DCPTOPK_SUCCESS:
        return CLI_OK;
    case DCPTOPK_INVALID_ARGUMENT:
    case DCPTOPK_UNSUPPORTED:
        return CLI_USAGE;
    case DCPTOPK_NOT_FOUND:
        return CLI_NOT_FOUND;
    case DCPTOPK_NO_DEVICE:
        return CLI_NO_DEVICE;
    default:
        return CLI_FAILURE;
    }
}

static int lib_error(int code, dcptopk_result r, const char *what,
                     const char *last_error)
{
    return cli_error(code, "%s: %s (%s)", what,
                     last_error && last_error[0] ? last_error
                                                 : dcptopk_result_message(r),
                     dcptopk_result_name(r));
}

int cli_lib_error(dcptopk_result r, const char *what, const char *last_error)
{
    /* A NOT_FOUND from a call that is not a user's lookup (e.g. a template
     * missing from the build) is a runtime failure. */
    return lib_error(r == DCPTOPK_NOT_FOUND ? CLI_FAILURE : cli_exit_code(r), r,
                     what, last_error);
}

int cli_lookup_error(dcptopk_result r, const char *what,
                     const char *last_error)
{
    return lib_error(cli_exit_code(r), r, what, last_error);
}

/* ------------------------------------------------------------- options */

cli_opt *cli_find(cli_opt *opts, const char *name)
{
    for (cli_opt *o = opts; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

int cli_parse(const char *cmd, int argc, char **argv, cli_opt *opts,
              const char **pos, int max_pos, int *npos, int *help)
{
    int only_positional = 0;
    *npos = 0;
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (!only_positional && strcmp(w, "--") == 0) {
            only_positional = 1;
            continue;
        }
        if (only_positional || w[0] != '-' || w[1] == '\0') {
            if (*npos >= max_pos)
                return cli_error(CLI_USAGE,
                                 "unexpected argument '%s' for 'dcptopk %s' "
                                 "(see 'dcptopk %s --help')",
                                 w, cmd, cmd);
            pos[(*npos)++] = w;
            continue;
        }
        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
            *help = 1;
            continue;
        }
        /* "--name=value" or "--name [value]". */
        char name[64];
        const char *eq = strchr(w, '=');
        size_t len = eq ? (size_t)(eq - w) : strlen(w);
        if (len >= sizeof name)
            len = sizeof name - 1;
        memcpy(name, w, len);
        name[len] = '\0';
        cli_opt *o = cli_find(opts, name);
        if (!o)
            return cli_error(CLI_USAGE,
                             "unknown option '%s' for 'dcptopk %s' (see "
                             "'dcptopk %s --help')",
                             w, cmd, cmd);
        o->seen = 1;
        if (!o->takes_value) {
            if (eq)
                return cli_error(CLI_USAGE,
                                 "option %s takes no value (got '%s')", name,
                                 w);
            continue;
        }
        if (eq) {
            o->value = eq + 1;
            continue;
        }
        if (i + 1 >= argc)
            return cli_error(CLI_USAGE, "option %s needs a value", name);
        const char *v = argv[i + 1];
        if (v[0] == '-' && v[1] == '-')
            return cli_error(CLI_USAGE,
                             "option %s needs a value (got the option '%s')",
                             name, v);
        o->value = v;
        i++;
    }
    return CLI_OK;
}

/* Decimal digits with an optional leading '-', nothing else: no spaces, no
 * '+', no base prefix, so that " 64", "+64" and "0x40" are refused like
 * "64abc" (strtoll would take the first three). */
static int strict_decimal(const char *text, int allow_minus, uint64_t *mag,
                          int *neg, int *overflow)
{
    const char *p = text;
    *neg = 0;
    *overflow = 0;
    *mag = 0;
    if (allow_minus && *p == '-') {
        *neg = 1;
        p++;
    }
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (*mag > (UINT64_MAX - d) / 10)
            *overflow = 1;
        else
            *mag = *mag * 10 + d;
    }
    return 0;
}

int cli_parse_int(const char *opt, const char *text, int64_t min, int64_t max,
                  int64_t *out)
{
    uint64_t mag;
    int neg, overflow;
    if (!text || strict_decimal(text, min < 0, &mag, &neg, &overflow) != 0)
        return cli_error(CLI_USAGE,
                         "%s = \"%s\": not an integer (expected decimal "
                         "digits%s, no spaces or '+')",
                         opt, text ? text : "", min < 0 ? ", '-' allowed" : "");
    int in_range = !overflow;
    int64_t v = 0;
    if (in_range && neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            in_range = 0;
        else
            v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else if (in_range) {
        if (mag > (uint64_t)INT64_MAX)
            in_range = 0;
        else
            v = (int64_t)mag;
    }
    if (!in_range || v < min || v > max)
        return cli_error(CLI_USAGE,
                         "%s = \"%s\": out of range (expected %" PRId64
                         "..%" PRId64 ")",
                         opt, text, min, max);
    *out = v;
    return CLI_OK;
}

int cli_parse_u64(const char *opt, const char *text, uint64_t *out)
{
    uint64_t mag;
    int neg, overflow;
    if (!text || strict_decimal(text, 0, &mag, &neg, &overflow) != 0)
        return cli_error(CLI_USAGE,
                         "%s = \"%s\": expected an unsigned 64-bit integer "
                         "(decimal digits, no spaces or '+')",
                         opt, text ? text : "");
    if (overflow)
        return cli_error(CLI_USAGE,
                         "%s = \"%s\": out of range (expected 0..%" PRIu64
                         ")",
                         opt, text, UINT64_MAX);
    *out = mag;
    return CLI_OK;
}

int cli_parse_i32(const char *opt, const char *text, int32_t *out)
{
    int64_t v;
    int rc = cli_parse_int(opt, text, INT32_MIN, INT32_MAX, &v);
    if (rc == CLI_OK)
        *out = (int32_t)v;
    return rc;
}

int cli_check_path(const char *opt, const char *path)
{
    if (!path)
        return CLI_OK;
    if (!path[0])
        return cli_error(CLI_USAGE, "%s = \"\": expected a file path", opt);
    size_t n = strlen(path);
    if (n >= CLI_PATH_MAX)
        return cli_error(CLI_USAGE,
                         "%s = \"%.40s...\": too long (%zu bytes; at most "
                         "%d)",
                         opt, path, n, CLI_PATH_MAX - 1);
    return CLI_OK;
}

int cli_parse_size(const char *opt, const char *text, int64_t *out)
{
    const char *p = text;
    uint64_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            goto range;
        v = v * 10 + d;
        p++;
        digits++;
    }
    if (!digits)
        goto bad;
    int shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    case 't': case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && *p == 'i')
        p++;
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0')
        goto bad;
    if (shift && v > ((uint64_t)INT64_MAX >> shift))
        goto range;
    v <<= shift;
    if (v > (uint64_t)INT64_MAX)
        goto range;
    *out = (int64_t)v;
    return CLI_OK;
bad:
    return cli_error(CLI_USAGE,
                     "%s = \"%s\": expected a size in bytes such as 1048576, "
                     "512K, 100M or 2G",
                     opt, text);
range:
    return cli_error(CLI_USAGE, "%s = \"%s\": out of range", opt, text);
}

int cli_check_key_prefix(const char *what, const char *text)
{
    size_t n = strlen(text);
    size_t hex = strspn(text, "0123456789abcdefABCDEF");
    if (n < 4 || n > 32 || hex != n)
        return cli_error(CLI_USAGE,
                         "%s = \"%s\": expected 4 to 32 hex digits of a cache "
                         "key (see 'dcptopk cache ls')",
                         what, text);
    return CLI_OK;
}

/* ---------------------------------------------------------------- output */

/* Length of the well-formed UTF-8 sequence at s[0..n) of at least two
 * bytes (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF), or 0
 * when s does not start one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

void cli_json_strn(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len;
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7F) {
                /* Control characters (a terminal escape in a name from an
                 * imported file) never reach the reader raw. */
                fprintf(f, "\\u%04x", c);
            } else if (c < 0x80) {
                fputc(c, f);
            } else if ((len = utf8_seq(u + i, n - i)) != 0) {
                /* Well-formed UTF-8 (a path such as "caché") passes through
                 * unchanged: JSON text is UTF-8. */
                fwrite(u + i, 1, len, f);
                i += len;
                continue;
            } else {
                /* A byte that is not part of well-formed UTF-8: the
                 * replacement character, so the output stays valid UTF-8. */
                fputs("\\ufffd", f);
            }
        }
        i++;
    }
    fputc('"', f);
}

void cli_json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    cli_json_strn(f, s, strlen(s));
}

const char *cli_human_bytes(int64_t bytes, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRId64 " B", bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

const char *cli_time(int64_t unix_seconds, char *buf, size_t size)
{
    if (unix_seconds <= 0) {
        snprintf(buf, size, "-");
        return buf;
    }
    time_t t = (time_t)unix_seconds;
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(buf, size, "%" PRId64, unix_seconds);
    return buf;
}

int cli_stdout_tty(void) { return isatty(STDOUT_FILENO); }

const char *cli_cache_path(const char *opt, char *buf, size_t size)
{
    if (opt)
        return opt;
    int n = dcptopk_cache_default_path(buf, size);
    if (n < 0 || (size_t)n >= size)
        return NULL;
    return buf;
}
