/* test_golden_keys.c - golden vectors of the cache-key serialisation.
 *
 * The hashes of real keys change with every template edit, so they cannot be
 * golden. Instead a fixed synthetic compile unit goes through dc_unit_hash,
 * the very function that keys real compiles, and its hex is pinned below.
 *
 * If this test fails, the serialisation of cache keys changed (field order,
 * names, length prefixes, the hasher, XXH3). That is allowed only together
 * with a bump of DC_CACHE_SCHEMA_VERSION in cache/cache.h (which changes the
 * golden values too): otherwise two library versions would read each other's
 * entries under one key while meaning different things. Update the literals
 * only after bumping the schema. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "harness.h"
#include "rt.h"

/* Pinned on 2026-11-29 with DC_CACHE_SCHEMA_VERSION 1 (XXH3-128, hi first). */
#define GOLDEN_FULL "999ab9fd0c22f683eccf239753ba35fa"
#define GOLDEN_BARE "9daabfdc4d7ff73d735f0f1bf87c4a14"

static const dc_source golden_headers[] = {
    {"common.cuh", "#pragma once\n#define DC_WARP 32\n", 32},
    {"extra.cuh", "#pragma once\n", 13},
};

static const char *const golden_options[] = {
    "--gpu-architecture=sm_90a", "-std=c++17", "-default-device", "--minimal",
    "-lineinfo"};

static dc_hash_input golden_input(void)
{
    static const char tmpl[] =
        "#include \"common.cuh\"\nextern \"C\" __global__ void k() {}\n";
    dc_hash_input in = {
        .kernel = "select",
        .entry = "select.cu",
        .template_text = tmpl,
        .template_size = sizeof tmpl - 1,
        .headers = golden_headers,
        .header_count = 2,
        .prelude = "#define DCPTOPK_TOPK 2048\n#define DCPTOPK_THREADS 512\n",
        .options = golden_options,
        .option_count = 5,
        .nvrtc_major = 13,
        .nvrtc_minor = 0,
        .arch = "sm_90a",
    };
    return in;
}

static void hex_of(const dc_hash_input *in, char out[33])
{
    dc_hash_hex(dc_unit_hash(in), out);
}

TEST(schema_version_is_pinned)
{
    /* The golden hex below belongs to this schema version. */
    CHECK_EQ(DC_CACHE_SCHEMA_VERSION, 1);
}

TEST(golden_synthetic_unit)
{
    dc_hash_input in = golden_input();
    char hex[33];
    hex_of(&in, hex);
    CHECK_STR_EQ(hex, GOLDEN_FULL);
}

TEST(golden_unit_without_headers)
{
    dc_hash_input in = golden_input();
    in.header_count = 0;
    in.headers = NULL;
    in.option_count = 1;
    in.arch = "sm_100a";
    char hex[33];
    hex_of(&in, hex);
    CHECK_STR_EQ(hex, GOLDEN_BARE);
}

TEST(every_field_changes_the_key)
{
    dc_hash_input base = golden_input();
    char ref[33], hex[33];
    hex_of(&base, ref);
    CHECK_EQ(strlen(ref), 32);

    dc_hash_input in;
#define DC_VARY(stmt)                                                          \
    do {                                                                       \
        in = base;                                                             \
        stmt;                                                                  \
        hex_of(&in, hex);                                                      \
        CHECK_MSG(strcmp(hex, ref) != 0, "key unchanged by: %s", #stmt);       \
    } while (0)
    DC_VARY(in.kernel = "rescue");
    DC_VARY(in.entry = "rescue.cu");
    DC_VARY(in.template_size -= 1);
    DC_VARY(in.header_count = 1);
    DC_VARY(in.prelude = "#define DCPTOPK_TOPK 1024\n#define DCPTOPK_THREADS 512\n");
    DC_VARY(in.option_count = 4);
    DC_VARY(in.nvrtc_major = 12);
    DC_VARY(in.nvrtc_minor = 1);
    DC_VARY(in.arch = "sm_90");
#undef DC_VARY
    /* A changed header byte. */
    dc_source h[2] = {golden_headers[0], golden_headers[1]};
    h[1].data = "#pragma once\t";
    in = base;
    in.headers = h;
    hex_of(&in, hex);
    CHECK(strcmp(hex, ref) != 0);
}

TEST(field_boundaries_are_unambiguous)
{
    /* Moving bytes from one field to its neighbour must change the key
     * (length-prefixed serialisation). */
    dc_hash_input a = golden_input(), b = golden_input();
    const char *opts_a[] = {"-std=c++17", "-lineinfo"};
    const char *opts_b[] = {"-std=c++17-lineinfo", ""};
    a.options = opts_a;
    a.option_count = 2;
    b.options = opts_b;
    b.option_count = 2;
    char ha[33], hb[33];
    hex_of(&a, ha);
    hex_of(&b, hb);
    CHECK(strcmp(ha, hb) != 0);
    a = golden_input();
    b = golden_input();
    a.kernel = "sel";
    a.entry = "ectselect.cu";
    b.kernel = "select";
    b.entry = "select.cu";
    hex_of(&a, ha);
    hex_of(&b, hb);
    CHECK(strcmp(ha, hb) != 0);
}
