/*
 * cache.h - the SQLite compile cache and its XXH3-128 key derivation.
 *
 * This module knows nothing of CUDA: it stores opaque blobs (cubin, PTX,
 * rendered source) under a 128-bit key and guarantees that concurrent
 * processes compile each key once and never read a partial or corrupted
 * entry. The runtime passes a compile callback; the cache calls it outside
 * any transaction, only when no valid entry exists and this process holds the
 * key's claim.
 */
#ifndef DCPTOPK_CACHE_H
#define DCPTOPK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "dcptopk.h"

/* Bump whenever the serialisation of keys or the table layout changes: every
 * key changes with it, so old entries are never served. */
#define DC_CACHE_SCHEMA_VERSION 1

typedef struct dc_hash {
    uint64_t hi;
    uint64_t lo;
} dc_hash;

/* ---------------------------------------------------------- key derivation */

/* Canonical, length-prefixed serialisation: every field is written as
 * (name length, name, value length, value) with little-endian u64 lengths, so
 * no two different field lists serialise alike. */
typedef struct dc_hasher dc_hasher;
dc_hasher *dc_hasher_new(void);
void dc_hasher_free(dc_hasher *h);
void dc_hasher_bytes(dc_hasher *h, const char *name, const void *data,
                     size_t size);
void dc_hasher_str(dc_hasher *h, const char *name, const char *value);
void dc_hasher_i64(dc_hasher *h, const char *name, int64_t value);
dc_hash dc_hasher_digest(const dc_hasher *h);
/* 32 lowercase hex digits + NUL (hi first). */
void dc_hash_hex(dc_hash hash, char out[33]);
/* Parses 32 hex digits; 0 on success. */
int dc_hash_parse(const char *hex, dc_hash *out);
/* Note: dc_hasher_new() already writes the field "dcptopk.cache.schema" =
 * DC_CACHE_SCHEMA_VERSION (as dc_hasher_i64), so every key covers it. A
 * value is serialised as its bytes; dc_hasher_i64 as 8 little-endian bytes;
 * dc_hasher_str(NULL) as "". */

/* The entry checksum: XXH3-128 of (u64le size, bytes) for cubin, ptx, source
 * in that order, as 32 hex digits. */
void dc_cache_checksum(const void *cubin, size_t cubin_size, const void *ptx,
                       size_t ptx_size, const void *source,
                       size_t source_size, char out[33]);

/* ------------------------------------------------------------------ cache */

typedef struct dc_cache dc_cache;

typedef enum dc_cache_open_mode {
    DC_CACHE_RW = 0,     /* read and write (falls back as documented)      */
    DC_CACHE_RO = 1,     /* never write the file                           */
    DC_CACHE_MEMORY = 2  /* a private in-memory database                   */
} dc_cache_open_mode;

/* What describes an entry (stored beside the blobs, shown by `cache ls`). */
typedef struct dc_cache_meta {
    const char *kernel;        /* "select"                                   */
    const char *fields;        /* "topk=2048,local_topk=384,..."             */
    const char *arch;          /* "sm_90a"                                   */
    const char *nvrtc_version; /* "13.0"                                     */
    const char *lib_version;   /* "0.1.0"                                    */
} dc_cache_meta;

/* Blobs produced by a compile (owned by whoever filled them). */
typedef struct dc_cache_blobs {
    const void *cubin;
    size_t cubin_size;
    const void *ptx;
    size_t ptx_size;
    const char *source;
    size_t source_size;
    double compile_ms;
} dc_cache_blobs;

/* A hit: malloc'd copies, checksums verified. Each copy has one NUL byte
 * after its size (so PTX can go to the driver as is); an empty blob is NULL. */
typedef struct dc_cache_hit {
    void *cubin;
    size_t cubin_size;
    void *ptx;
    size_t ptx_size;
} dc_cache_hit;

/* Compile callback: fills *out (pointers stay valid until `release` is
 * called). Returns DCPTOPK_SUCCESS or an error with a message in err.
 * `release` (may be NULL) is called once after every compile call, failed
 * or not. compile_ms = 0 lets the cache measure the callback. */
typedef dcptopk_result (*dc_compile_fn)(void *user, dc_cache_blobs *out,
                                        char *err, size_t err_size);
typedef void (*dc_release_fn)(void *user, dc_cache_blobs *blobs);

/* Opens (creating the file and its directory as needed) the cache at `path`
 * (NULL = the default path). Never fails for an unwritable directory, a
 * read-only file system or a corrupt file: it falls back (read-only use of an
 * existing file, else memory; a corrupt file is moved aside to
 * "<path>.corrupt-<time>" and recreated) with one warning on stderr. */
dcptopk_result dc_cache_open(const char *path, dc_cache_open_mode mode,
                             dc_cache **out, char *err, size_t err_size);
void dc_cache_close(dc_cache *cache);
const char *dc_cache_path(const dc_cache *cache);
/* Non-zero when the cache ended up in memory or read-only (fallbacks). */
int dc_cache_is_memory(const dc_cache *cache);
int dc_cache_is_readonly(const dc_cache *cache);

/* Finds `key`; on a miss claims it, calls `compile` (outside any
 * transaction), stores the blobs and releases the claim. When another process
 * holds the claim, waits for its entry (polling), taking the claim over when
 * the claimant died or is older than DCPTOPK_CACHE_CLAIM_TIMEOUT seconds (default 30). A
 * row whose checksum fails is deleted and recompiled. A full disk or a store
 * error keeps the compiled blobs usable (returned) with a warning.
 * *compiled = 1 when this call compiled. */
dcptopk_result dc_cache_get_or_compile(dc_cache *cache, dc_hash key,
                                       const dc_cache_meta *meta,
                                       dc_compile_fn compile,
                                       dc_release_fn release, void *user,
                                       dc_cache_hit *out, int *compiled,
                                       char *err, size_t err_size);
/* Deletes one entry (e.g. its cubin failed to load). */
dcptopk_result dc_cache_invalidate(dc_cache *cache, dc_hash key);
/* 1 if an entry of `key` exists (its blobs unread and unchecked), else 0 (an
 * error counts as absent). */
int dc_cache_contains(dc_cache *cache, dc_hash key);
void dc_cache_hit_free(dc_cache_hit *hit);

/* Counts compiles done by this process through any dc_cache (for tests). */
uint64_t dc_cache_process_compiles(void);

/* ------------------------------------------------ paths, warnings, admin */

/* The default cache file (see dcptopk_cache_default_path); creates nothing.
 * Returns the length needed (snprintf-like), -1 when no directory is known
 * (no DCPTOPK_CACHE_DIR, XDG_CACHE_HOME, HOME or passwd entry). */
int dc_cache_default_path(char *buf, size_t size);

/* "dcptopk: warning: <message>" on stderr unless DCPTOPK_LOG=quiet. */
void dc_cache_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Maintenance used by src/cache_api.c. Each returns DCPTOPK_SUCCESS or an
 * error with a message in err (naming the file and keeping the SQLite code
 * and message). `hex` / `prefix` are lowercase hex; callers validate them. */
dcptopk_result dc_cache_list(dc_cache *cache, dcptopk_cache_entry **out,
                             size_t *count, char *err, size_t err_size);
/* Entries whose key starts with `prefix`: up to `cap` keys copied into keys,
 * *matches = how many there are in all (capped at 1000). */
dcptopk_result dc_cache_match(dc_cache *cache, const char *prefix,
                              char (*keys)[33], size_t cap, size_t *matches,
                              char *err, size_t err_size);
dcptopk_result dc_cache_entry_get(dc_cache *cache, const char *hex,
                                  dcptopk_cache_entry *out, char *err,
                                  size_t err_size);
/* One blob (0 cubin, 1 ptx, 2 source) of an entry, checksum verified; *data
 * malloc'd with a NUL after its size (NULL when the blob is empty). */
dcptopk_result dc_cache_blob(dc_cache *cache, const char *hex, int which,
                             void **data, size_t *size, char *err,
                             size_t err_size);
dcptopk_result dc_cache_stats(dc_cache *cache, dcptopk_cache_stats *out,
                              char *err, size_t err_size);
dcptopk_result dc_cache_verify(dc_cache *cache, int64_t *checked,
                               int64_t *bad, char *err, size_t err_size);
/* Removes least-recently-used entries (never `keep_hex`, may be NULL) until
 * the total size is <= max_bytes. */
dcptopk_result dc_cache_prune(dc_cache *cache, int64_t max_bytes,
                              const char *keep_hex, int64_t *removed,
                              char *err, size_t err_size);
dcptopk_result dc_cache_remove(dc_cache *cache, const char *hex, char *err,
                               size_t err_size);
dcptopk_result dc_cache_clear(dc_cache *cache, int64_t *removed, char *err,
                              size_t err_size);
/* Copies every valid entry into a new file `path` (which must not exist). */
dcptopk_result dc_cache_export(dc_cache *cache, const char *path,
                               int64_t *count, char *err, size_t err_size);
/* Merges the valid entries of the cache file `path` (existing keys kept);
 * *count = entries added. */
dcptopk_result dc_cache_import(dc_cache *cache, const char *path,
                               int64_t *count, char *err, size_t err_size);

/* Test hook: caps the database at `pages` pages (PRAGMA max_page_count) so
 * that a test can make stores fail with SQLITE_FULL. Returns the SQLite
 * result code. */
int dc_cache_test_set_max_pages(dc_cache *cache, int64_t pages);

#endif /* DCPTOPK_CACHE_H */
