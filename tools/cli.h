/*
 * cli.h - what the parts of the `dcptopk` command-line tool share: exit
 * codes, error reporting, a small option parser, number and size parsing,
 * JSON output helpers. The tool uses only the public header dcptopk.h.
 */
#ifndef DC_CLI_H
#define DC_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dcptopk.h"

/* Exit codes (documented in `dcptopk --help` and docs/CLI.md; never
 * renumber). */
enum {
    CLI_OK = 0,          /* success                                         */
    CLI_FAILURE = 1,     /* a library call failed (CUDA, NVRTC, cache, I/O) */
    CLI_USAGE = 2,       /* bad command line: command, option or value      */
    CLI_VERIFY_BAD = 3,  /* cache verify found (and removed) bad entries    */
    CLI_NOT_FOUND = 4,   /* no such config or cache entry                   */
    CLI_NO_DEVICE = 5,   /* a GPU was needed and none is available          */
    CLI_SELFTEST_FAIL = 6 /* selftest found a mismatch                      */
};

/* "dcptopk: error: <message>" on stderr. Returns `code`. */
int cli_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Reports a failed library call: "dcptopk: error: <what>: <last error>
 * (<result name>)" and returns the exit code that the result maps to
 * (cli_exit_code, except that NOT_FOUND is a runtime failure here). */
int cli_lib_error(dcptopk_result r, const char *what, const char *last_error);
/* The same for a lookup the user asked for (a cache key prefix): NOT_FOUND
 * exits with CLI_NOT_FOUND. */
int cli_lookup_error(dcptopk_result r, const char *what,
                     const char *last_error);
/* Exit code of a library result (INVALID_ARGUMENT / UNSUPPORTED: usage,
 * NOT_FOUND: not found, NO_DEVICE: no device, else failure). */
int cli_exit_code(dcptopk_result r);

/* ------------------------------------------------------------- options */

/* One option of a subcommand. `takes_value` options accept "--opt VALUE"
 * and "--opt=VALUE". */
typedef struct cli_opt {
    const char *name;  /* "--topk"                                          */
    int takes_value;
    int seen;          /* set by the parser                                 */
    const char *value; /* set by the parser (last occurrence wins)          */
} cli_opt;

/* Parses argv[0..argc) (the words after the subcommand) against `opts`
 * (terminated by a NULL name). Words that are not options are collected in
 * pos[] (at most max_pos; more is a usage error); "--" ends the options.
 * "-h" and "--help" set *help. Returns CLI_OK or CLI_USAGE (message
 * printed, naming `cmd`). */
int cli_parse(const char *cmd, int argc, char **argv, cli_opt *opts,
              const char **pos, int max_pos, int *npos, int *help);
/* The option named `name` of a parsed table (NULL if not in the table). */
cli_opt *cli_find(cli_opt *opts, const char *name);

/* The one integer parser of every numeric option: decimal digits with an
 * optional '-' (only when min < 0); no spaces, no '+', no base prefix.
 * Outside min..max, or not such text: a usage error naming the option and
 * its value. */
int cli_parse_int(const char *opt, const char *text, int64_t min, int64_t max,
                  int64_t *out);
/* cli_parse_int over the whole int32 range. */
int cli_parse_i32(const char *opt, const char *text, int32_t *out);
/* The same rules for an unsigned 64-bit value (no '-'). */
int cli_parse_u64(const char *opt, const char *text, uint64_t *out);
/* The one path check of every command (--cache, FILE): not empty and
 * shorter than CLI_PATH_MAX bytes (what the library accepts); a usage error
 * naming `opt` otherwise. NULL (not given) passes. */
#define CLI_PATH_MAX 4096
int cli_check_path(const char *opt, const char *path);
/* Sizes: a non-negative integer with an optional K, M, G or T suffix
 * (powers of 1024), optionally followed by "B" or "iB". */
int cli_parse_size(const char *opt, const char *text, int64_t *out);
/* A cache key prefix: 4..32 hex digits. */
int cli_check_key_prefix(const char *what, const char *text);

/* ---------------------------------------------------------------- output */

/* Writes `s` as a JSON string literal (quotes included). */
void cli_json_str(FILE *f, const char *s);
/* The same for `n` bytes that may hold NULs or invalid UTF-8 (escaped as
 * \u00XX). */
void cli_json_strn(FILE *f, const char *s, size_t n);
/* "12.3 KiB" into buf. */
const char *cli_human_bytes(int64_t bytes, char *buf, size_t size);
/* "2024-05-01 12:34:56" (local time) into buf; "-" for 0. */
const char *cli_time(int64_t unix_seconds, char *buf, size_t size);
/* Non-zero when stdout / stderr is a terminal. */
int cli_stdout_tty(void);

/* The cache file to use: `opt` (--cache) or the library default. */
const char *cli_cache_path(const char *opt, char *buf, size_t size);

/* ------------------------------------------------------------- commands */

int cmd_warmup(int argc, char **argv);
int cmd_configs(int argc, char **argv);
int cmd_keys(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_selftest(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_env(int argc, char **argv);

#endif /* DC_CLI_H */
