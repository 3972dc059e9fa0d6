/*
 * test_cache_keys.c - the compile cache's keys (cache/): the canonical
 * serialisation of the hashed fields, checked against one written by hand,
 * and fields that must not alias.
 */
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache.h"
#include "harness.h"

/* Writes the canonical serialisation by hand: (u64le name length, name,
 * u64le value length, value) per field. */
static size_t ser_field(unsigned char *buf, size_t at, const char *name,
                        const void *value, size_t n)
{
    uint64_t lens[2] = {strlen(name), n};
    const void *parts[2] = {name, value};
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < 8; i++)
            buf[at++] = (unsigned char)(lens[p] >> (8 * i));
        memcpy(buf + at, parts[p], lens[p]);
        at += lens[p];
    }
    return at;
}

TEST(key_matches_hand_serialisation)
{
    unsigned char buf[512];
    size_t at = 0;
    unsigned char ver[8] = {DC_CACHE_SCHEMA_VERSION, 0, 0, 0, 0, 0, 0, 0};
    at = ser_field(buf, at, "dcptopk.cache.schema", ver, 8);
    at = ser_field(buf, at, "template", "abc", 3);
    unsigned char i64[8] = {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    at = ser_field(buf, at, "topk", i64, 8); /* -2 */
    at = ser_field(buf, at, "empty", "", 0);
    XXH128_hash_t want = XXH3_128bits(buf, at);

    dc_hasher *h = dc_hasher_new();
    CHECK(h != NULL);
    dc_hasher_str(h, "template", "abc");
    dc_hasher_i64(h, "topk", -2);
    dc_hasher_bytes(h, "empty", NULL, 0);
    dc_hash got = dc_hasher_digest(h);
    dc_hasher_free(h);
    CHECK(got.hi == want.high64);
    CHECK(got.lo == want.low64);

    char hex[33], expect[33];
    dc_hash_hex(got, hex);
    snprintf(expect, sizeof expect, "%016llx%016llx",
             (unsigned long long)want.high64, (unsigned long long)want.low64);
    CHECK_STR_EQ(hex, expect);
    dc_hash back;
    CHECK_EQ(dc_hash_parse(hex, &back), 0);
    CHECK(back.hi == got.hi && back.lo == got.lo);
    expect[0] = 'G';
    CHECK_NE(dc_hash_parse(expect, &back), 0);
    CHECK_NE(dc_hash_parse("abcd", &back), 0);
    char longer[40];
    snprintf(longer, sizeof longer, "%s0", hex);
    CHECK_NE(dc_hash_parse(longer, &back), 0);
}

TEST(key_fields_do_not_alias)
{
    /* ("ab","c") vs ("a","bc") and field order must give different keys. */
    dc_hasher *a = dc_hasher_new(), *b = dc_hasher_new();
    dc_hasher_str(a, "ab", "c");
    dc_hasher_str(b, "a", "bc");
    dc_hash ha = dc_hasher_digest(a), hb = dc_hasher_digest(b);
    CHECK(ha.hi != hb.hi || ha.lo != hb.lo);
    dc_hasher_free(a);
    dc_hasher_free(b);
    a = dc_hasher_new();
    b = dc_hasher_new();
    dc_hasher_i64(a, "x", 1);
    dc_hasher_i64(a, "y", 2);
    dc_hasher_i64(b, "y", 2);
    dc_hasher_i64(b, "x", 1);
    ha = dc_hasher_digest(a);
    hb = dc_hasher_digest(b);
    CHECK(ha.hi != hb.hi || ha.lo != hb.lo);
    /* The digest does not consume the state: same value twice. */
    dc_hash again = dc_hasher_digest(a);
    CHECK(again.hi == ha.hi && again.lo == ha.lo);
    dc_hasher_free(a);
    dc_hasher_free(b);
}
