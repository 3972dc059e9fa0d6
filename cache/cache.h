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

/* The version of the key serialisation (hashed into every key): bump it
 * when the serialisation changes, and every key changes with it. */
#define DC_CACHE_SCHEMA_VERSION 1
/* The version of the file layout (PRAGMA user_version); a file of another
 * version is moved aside and a new one started. Bump it whenever the tables
 * change: there is no migration. */
#define DC_CACHE_FILE_VERSION 2
/* PRAGMA application_id of a cache file ("DCPT"): tells a dcptopk cache
 * from another program's database before anything is changed. */
#define DC_CACHE_APPLICATION_ID 0x44435054

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
    DC_CACHE_MEMORY = 2, /* a private in-memory database                   */
    /* Or'ed with RW or RO, for maintenance: never fall back to memory and
     * never move a file aside; dc_cache_open fails instead (saying why),
     * and a file that cannot be written opens read-only. */
    DC_CACHE_STRICT = 8
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

/* Opens (creating the file and its folder as needed) the cache at `path`
 * (NULL = the default path). The file is used only when trusted (see
 * docs/CACHE.md): its folders, the file and its side files owned by us or
 * root and not writable by others (nor by the group unless
 * DCPTOPK_CACHE_SHARED=1), no symbolic links; a new file is created
 * exclusively. Never fails for an untrusted, unwritable or damaged file: it
 * falls back (read-only use of an existing file, else memory) with one
 * warning (dc_log_warn). A damaged file, or a cache of another file version, is
 * moved aside to "<path>.corrupt-<time>" / "<path>.old-<time>" (only if the
 * path still names that file; the 3 newest are kept) and a new one started.
 * Another program's database is never changed. With DC_CACHE_STRICT, no
 * fallback to memory and no moving: DCPTOPK_CACHE_ERROR saying why. */
dcptopk_result dc_cache_open(const char *path, dc_cache_open_mode mode,
                             dc_cache **out, char *err, size_t err_size);
void dc_cache_close(dc_cache *cache);
const char *dc_cache_path(const dc_cache *cache);
/* Non-zero when the cache ended up in memory or read-only (fallbacks). */
int dc_cache_is_memory(const dc_cache *cache);
int dc_cache_is_readonly(const dc_cache *cache);
/* The SQLite in use: its version, and whether it is the copy built into the
 * library (DCPTOPK_BUNDLED_SQLITE) rather than the system's libsqlite3. */
const char *dc_cache_sqlite_version(void);
int dc_cache_sqlite_bundled(void);
/* Why the file is not used, or not written ("" when it is). */
const char *dc_cache_why(const dc_cache *cache);

/* Finds `key`; on a miss claims it, calls `compile` (outside any
 * transaction), stores the blobs and releases the claim. When another process
 * holds the claim, waits for its entry (polling), taking the claim over when
 * the claimant died, or the claim is older than DCPTOPK_CACHE_CLAIM_TIMEOUT
 * seconds (default 30) or dated in the future; a wait past 5 s is warned
 * once. A row whose checksum fails is deleted and recompiled. A store error
 * keeps the compiled blobs usable (returned) with a warning; once a store
 * fails for lack of space the handle claims no more keys and keeps what it
 * compiles in memory, so that each key is compiled once per handle.
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

/* --------------------------------------------------------- paths, admin */

/* The default cache file (see dcptopk_cache_default_path); creates nothing.
 * Returns the length needed (snprintf-like), -1 when no directory is known
 * (no DCPTOPK_CACHE_DIR, XDG_CACHE_HOME or HOME). */
int dc_cache_default_path(char *buf, size_t size);
/* What a read-write open of `path` would make of the file, without creating
 * or changing anything and without a warning (`dcptopk env`): `mode` gets
 * "trusted", "shared" (trusted under DCPTOPK_CACHE_SHARED's group rule),
 * "absent" (created at the first compile) or "refused" (untrusted: a context
 * compiles into memory); `why` the reason when it is not plainly trusted,
 * else "". */
void dc_cache_probe(const char *path, char *mode, size_t mode_size,
                    char *why, size_t why_size);


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
/* Checks every row (checksum, a key of 32 hex digits, code present) and
 * deletes the bad ones; *kept = bad rows that could not be deleted (a
 * read-only file), may be NULL. */
dcptopk_result dc_cache_verify(dc_cache *cache, int64_t *checked,
                               int64_t *bad, int64_t *kept, char *err,
                               size_t err_size);
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
/* One row of a file being imported, for the caller's check. */
typedef struct dc_import_row {
    const char *key; /* as stored: not necessarily 32 hex digits */
    dc_cache_meta meta;
    dc_cache_blobs blobs;
} dc_import_row;
/* Returns 0 to accept the row, 1 to reject it (why in `why`), or a
 * negative value to stop the import with an error (message in `why`). */
typedef int (*dc_import_check_fn)(void *user, const dc_import_row *row,
                                  char *why, size_t why_size);

/* Merges the valid entries of the cache file `path` (existing keys kept).
 * Rows whose checksum fails, whose blobs exceed DCPTOPK_CACHE_IMPORT_MAX_BYTES
 * (default 64 MiB per entry) or that `check` (may be NULL: trust them)
 * rejects are skipped, each with one warning. *count = entries added,
 * *rejected = rows skipped (may be NULL). */
dcptopk_result dc_cache_import(dc_cache *cache, const char *path,
                               dc_import_check_fn check, void *user,
                               int64_t *count, int64_t *rejected, char *err,
                               size_t err_size);

/* A claim row (a compile in progress, or left behind). */
typedef struct dc_cache_claim {
    char key[33];
    int64_t pid;
    char host[256];
    int64_t started_ms; /* unix ms */
    int stale;          /* owner dead, too old, or dated in the future */
} dc_cache_claim;
/* Every claim; *out malloc'd (free()). */
dcptopk_result dc_cache_claims(dc_cache *cache, dc_cache_claim **out,
                               size_t *count, char *err, size_t err_size);
/* Deletes the stale claims; *removed = how many. */
dcptopk_result dc_cache_claims_clear_stale(dc_cache *cache, int64_t *removed,
                                           char *err, size_t err_size);

/* Test hook: caps the database at `pages` pages (PRAGMA max_page_count) so
 * that a test can make stores fail with SQLITE_FULL. Returns the SQLite
 * result code. */
int dc_cache_test_set_max_pages(dc_cache *cache, int64_t pages);
/* Test hook (fault injection): while `on`, every store of every handle of
 * this process (and of children forked after) fails with SQLITE_FULL, as on
 * a full disk. */
void dc_cache_test_fail_stores(int on);

#endif /* DCPTOPK_CACHE_H */
