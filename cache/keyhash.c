/*
 * keyhash.c - cache keys: an XXH3-128 digest over a canonical, length-prefixed
 * serialisation of named fields, and the hex form used as the table key.
 *
 * xxHash is compiled in (XXH_INLINE_ALL): no xxHash symbol leaves this file
 * and nothing links libxxhash.
 */
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache.h"

struct dc_hasher {
    XXH3_state_t *state;
};

static void put_u64le(XXH3_state_t *s, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    XXH3_128bits_update(s, b, sizeof b);
}

dc_hasher *dc_hasher_new(void)
{
    dc_hasher *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->state = XXH3_createState();
    if (!h->state || XXH3_128bits_reset(h->state) != XXH_OK) {
        dc_hasher_free(h);
        return NULL;
    }
    /* Every key covers the schema version, so bumping it retires every old
     * entry at once. */
    dc_hasher_i64(h, "dcptopk.cache.schema", DC_CACHE_SCHEMA_VERSION);
    return h;
}

void dc_hasher_free(dc_hasher *h)
{
    if (!h)
        return;
    if (h->state)
        XXH3_freeState(h->state);
    free(h);
}

void dc_hasher_bytes(dc_hasher *h, const char *name, const void *data,
                     size_t size)
{
    if (!h || !h->state)
        return;
    if (!name)
        name = "";
    if (!data)
        size = 0;
    size_t n = strlen(name);
    put_u64le(h->state, (uint64_t)n);
    XXH3_128bits_update(h->state, name, n);
    put_u64le(h->state, (uint64_t)size);
    if (size)
        XXH3_128bits_update(h->state, data, size);
}

void dc_hasher_str(dc_hasher *h, const char *name, const char *value)
{
    dc_hasher_bytes(h, name, value ? value : "", value ? strlen(value) : 0);
}

void dc_hasher_i64(dc_hasher *h, const char *name, int64_t value)
{
    unsigned char b[8];
    uint64_t v = (uint64_t)value;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    dc_hasher_bytes(h, name, b, sizeof b);
}

dc_hash dc_hasher_digest(const dc_hasher *h)
{
    dc_hash out = {0, 0};
    if (!h || !h->state)
        return out;
    XXH128_hash_t d = XXH3_128bits_digest(h->state);
    out.hi = d.high64;
    out.lo = d.low64;
    return out;
}

void dc_hash_hex(dc_hash hash, char out[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[i] = digits[(hash.hi >> (60 - 4 * i)) & 15];
        out[16 + i] = digits[(hash.lo >> (60 - 4 * i)) & 15];
    }
    out[32] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int dc_hash_parse(const char *hex, dc_hash *out)
{
    if (!hex || !out)
        return -1;
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 32; i++) {
        int v = hex_value(hex[i]);
        if (v < 0)
            return -1; /* also stops at a NUL before 32 digits */
        if (i < 16)
            hi = (hi << 4) | (uint64_t)v;
        else
            lo = (lo << 4) | (uint64_t)v;
    }
    if (hex[32] != '\0')
        return -1;
    out->hi = hi;
    out->lo = lo;
    return 0;
}

void dc_cache_checksum(const void *cubin, size_t cubin_size, const void *ptx,
                       size_t ptx_size, const void *source,
                       size_t source_size, char out[33])
{
    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    XXH3_128bits_reset(&s);
    const void *p[3] = {cubin, ptx, source};
    size_t n[3] = {cubin_size, ptx_size, source_size};
    for (int i = 0; i < 3; i++) {
        if (!p[i])
            n[i] = 0;
        put_u64le(&s, (uint64_t)n[i]);
        if (n[i])
            XXH3_128bits_update(&s, p[i], n[i]);
    }
    XXH128_hash_t d = XXH3_128bits_digest(&s);
    dc_hash h = {d.high64, d.low64};
    dc_hash_hex(h, out);
}
