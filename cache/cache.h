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

/* A hit: malloc'd copies, checksums verified. */
typedef struct dc_cache_hit {
    void *cubin;
    size_t cubin_size;
    void *ptx;
    size_t ptx_size;
} dc_cache_hit;

/* Compile callback: fills *out (pointers stay valid until `release` is
 * called). Returns DCPTOPK_SUCCESS or an error with a message in err. */
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
void dc_cache_hit_free(dc_cache_hit *hit);

/* Counts compiles done by this process through any dc_cache (for tests). */
uint64_t dc_cache_process_compiles(void);

#endif /* DCPTOPK_CACHE_H */
