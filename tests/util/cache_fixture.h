/*
 * cache_fixture.h - what every test of the compile cache (tests/cpu/
 * test_cache_*.c) starts from: a fresh folder per test, a fake compile that
 * stores known bytes (fake_blobs.h), lookups checked against those bytes,
 * plain-SQLite access to the file, stderr capture for counting warnings.
 *
 * Helpers report failure through their return value, never through CHECK:
 * a CHECK returns from the function it is in, so every check stays in the
 * test that makes it.
 */
#ifndef DC_CACHE_FIXTURE_H
#define DC_CACHE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"

/* The processes of the tests that run many at once. */
#define CF_NPROC 8

/* The bytes of one stored entry with the default blob sizes. */
#define CF_ENTRY_BYTES (4096 + 777 + 1234)

/* A fresh folder for this test under /tmp. The previous one (tests may run
 * one after another in one process) and the last are removed, whatever
 * modes a test left on them. Exits if no folder can be made. */
const char *cf_dir(void);
/* cf_dir(), with `path` set to the cache file c.sqlite in it. */
const char *cf_fresh(char *path, size_t size);
/* dir/name into buf. */
void cf_path(char *buf, size_t size, const char *dir, const char *name);

double cf_now_s(void);
void cf_sleep_ms(int ms);

/* One fake compile of `tag`: its blobs are dc_test_blob(tag, ...) of sizes
 * cubin_size (0: 4096), 777 and 1234. The callback can fail, sleep, log
 * itself, and meet the test at a pipe, so tests can stage races. */
typedef struct cf_job {
    const char *tag;
    size_t cubin_size;         /* 0 = 4096                                   */
    int sleep_ms;              /* inside the callback                        */
    const char *log;           /* appended "<tag> <pid>\n" with O_APPEND     */
    int fail;                  /* return DCPTOPK_NVRTC_ERROR                 */
    int notify_fd;             /* >= 0: write one byte when compiling starts */
    int wait_fd;               /* >= 0: then read one byte before going on   */
    double compile_ms;         /* stored as the entry's compile time         */
    const dc_cache_meta *meta; /* NULL: cf_meta                              */
    int calls;                 /* times the callback ran                     */
    int released;
    unsigned char *buf[3];
} cf_job;

/* A job of `tag` with everything else off. */
cf_job cf_job_of(const char *tag);
/* The compile and release callbacks of a cf_job (user = the job). */
dcptopk_result cf_compile(void *user, dc_cache_blobs *out, char *err,
                          size_t err_size);
void cf_release(void *user, dc_cache_blobs *b);

/* The key of `tag` (one hashed field), and its hex. */
dc_hash cf_key(const char *tag);
void cf_key_hex(const char *tag, char hex[33]);
/* The metadata stored with every entry unless a job names another. */
extern const dc_cache_meta cf_meta;

/* Whether a hit holds exactly the bytes a compile of `tag` makes, each blob
 * NUL-terminated. */
int cf_hit_is(const dc_cache_hit *hit, const char *tag, size_t cubin_size);
/* Whether data holds blob `which` (0 cubin, 1 ptx, 2 source) of `tag` at its
 * default size. */
int cf_blob_is(const void *data, size_t size, const char *tag, int which);

/* dc_cache_open; NULL on failure, the reason on stderr. */
dc_cache *cf_open(const char *path, dc_cache_open_mode mode);
/* get_or_compile of the job's tag; the reason on stderr on failure. */
dcptopk_result cf_get(dc_cache *c, cf_job *j, dc_cache_hit *hit,
                      int *compiled);

/* What one lookup of a tag gave. */
typedef struct cf_got {
    int compiled; /* the callback stored (or tried to store) it   */
    int bytes_ok; /* the hit held exactly the tag's bytes          */
} cf_got;
/* cf_get of a plain job of `tag` (cubin_size 0: 4096), the hit compared with
 * the tag's bytes into *got and freed. */
dcptopk_result cf_fetch(dc_cache *c, const char *tag, size_t cubin_size,
                        cf_got *got);

/* Runs one SQL statement on the file directly (as a user with sqlite3
 * would). Returns the first column of the first row as an integer, -1 when
 * there is no row, -2 when the file does not open, -3 on an SQL error. */
int64_t cf_sql(const char *path, const char *sql);
/* Rows of `table` (entries, claims, usage) whose key is `hex`. */
int64_t cf_rows_of(const char *path, const char *table, const char *hex);
/* Milliseconds since the epoch, the clock of the claims table. */
int64_t cf_wall_ms(void);
/* Writes the claim of key `hex` that process `pid` of `host` would have made
 * at `started_ms`, behind the library's back: cf_sql's result (-1 when the
 * row went in). */
int64_t cf_plant_claim(const char *path, const char *hex, long pid,
                       const char *host, int token, int64_t started_ms);

/* Sends stderr to dir/stderr.txt until cf_capture_end, which restores it,
 * echoes what was captured, copies it into text (if given) and returns the
 * number of "dcptopk: warning:" lines. */
void cf_capture_begin(const char *dir);
int cf_capture_end(char *text, size_t size);

/* Lines of `file` holding `needle` (0 if there is no file). */
int cf_count_lines(const char *file, const char *needle);
/* Forks n processes that wait on one pipe, so they start together, then
 * each exits with child(p, arg) (p = 0..n-1; 0 is success). Returns how
 * many did not exit 0 (each named on stderr with its status), or n when a
 * fork or the pipe failed. */
int cf_race(int n, int (*child)(int p, void *arg), void *arg);
/* Names in `dir` holding `needle`. */
int cf_count_files(const char *dir, const char *needle);

/* Stores `tag` in a new cache at `path`, then rewrites its row as an
 * attacker could: other bytes under the same key, with a fresh checksum.
 * 0 on success. */
int cf_forge_row(const char *path, const char *tag);
/* Opens `path` and gets `tag`: 1 if the right bytes came back from a fresh
 * compile (the file was not used), 0 if the file served them, -1 if the
 * forged bytes were served or anything failed. *memory = in memory. */
int cf_served_fresh(const char *path, const char *tag, int *memory);

#endif /* DC_CACHE_FIXTURE_H */
