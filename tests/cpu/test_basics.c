/* test_basics.c - result names and messages, versions, named configs and
 * their key expansion. */
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "harness.h"

TEST(result_names_match_list)
{
    CHECK_STR_EQ(dcptopk_result_name(DCPTOPK_SUCCESS), "DCPTOPK_SUCCESS");
    CHECK_STR_EQ(dcptopk_result_name(DCPTOPK_RESCUE_TIMEOUT),
                 "DCPTOPK_RESCUE_TIMEOUT");
    CHECK_STR_EQ(dcptopk_result_name((dcptopk_result)999),
                 "DCPTOPK_UNKNOWN_RESULT");
    CHECK_EQ(DCPTOPK_INVALID_ARGUMENT, 1);
    CHECK_EQ(DCPTOPK_INTERNAL, 14);
}

TEST(version_matches_header)
{
    CHECK_EQ(dcptopk_version_number(), DCPTOPK_VERSION_NUMBER);
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d.%d", DCPTOPK_VERSION_MAJOR,
             DCPTOPK_VERSION_MINOR, DCPTOPK_VERSION_PATCH);
    CHECK_STR_EQ(dcptopk_version_string(), buf);
}

TEST(named_default_config_is_deepseek_dcp8)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    CHECK_OK(dcptopk_merge_config_named("deepseek-v3.2-dcp8", &c));
    CHECK_EQ(c.topk, 2048);
    CHECK_EQ(c.local_topk, 384);
    CHECK_EQ(c.world_size, 8);
    CHECK_EQ(c.block_size, 64);
    CHECK_EQ(c.exact, 1);
    CHECK_STR_EQ(dcptopk_merge_config_name(0), "deepseek-v3.2-dcp8");
    CHECK_EQ(dcptopk_merge_config_named("nope", &c), DCPTOPK_NOT_FOUND);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "\"nope\"");
}

/* The named configs of other DSA models, with the figures of their public
 * model configs: K is the indexer's index_topk (docs/INTEGRATION.md, "Named
 * configs for DSA models", names the file each comes from); packed N is
 * 1.5 K / W rounded up to a multiple of 32. Typed in from those sources, not
 * read from the library's table. */
static const struct {
    const char *name;
    int32_t kind, topk, local_topk, world_size;
} model_configs[] = {
    {"deepseek-v3.2-dcp8", DCPTOPK_MERGE_PACKED, 2048, 384, 8},
    {"deepseek-v3.2-dcp8-pair", DCPTOPK_MERGE_PAIR, 2048, 2048, 8},
    {"glm-5-dcp8", DCPTOPK_MERGE_PACKED, 2048, 384, 8},
    {"glm-5-dcp4", DCPTOPK_MERGE_PACKED, 2048, 768, 4},
    {"glm-5-dcp8-pair", DCPTOPK_MERGE_PAIR, 2048, 2048, 8},
    {"deepseek-v4-flash-dcp8", DCPTOPK_MERGE_PACKED, 512, 96, 8},
    {"deepseek-v4-flash-dcp4", DCPTOPK_MERGE_PACKED, 512, 192, 4},
    {"deepseek-v4-flash-dcp8-pair", DCPTOPK_MERGE_PAIR, 512, 512, 8},
    {"deepseek-v4-pro-dcp8", DCPTOPK_MERGE_PACKED, 1024, 192, 8},
    {"deepseek-v4-pro-dcp4", DCPTOPK_MERGE_PACKED, 1024, 384, 4},
    {"deepseek-v4-pro-dcp8-pair", DCPTOPK_MERGE_PAIR, 1024, 1024, 8},
};

TEST(model_configs_hold_their_published_figures)
{
    for (size_t i = 0; i < sizeof model_configs / sizeof model_configs[0]; i++) {
        const char *name = model_configs[i].name;
        dcptopk_merge_config c;
        CHECK_MSG(dcptopk_merge_config_named(name, &c) == DCPTOPK_SUCCESS,
                  "%s: %s", name, dcptopk_last_error(NULL));
        int packed = model_configs[i].kind == DCPTOPK_MERGE_PACKED;
        CHECK_MSG(c.kind == model_configs[i].kind &&
                      c.topk == model_configs[i].topk &&
                      c.local_topk == model_configs[i].local_topk &&
                      c.world_size == model_configs[i].world_size &&
                      c.block_size == 64 && c.interleave == 1 &&
                      c.emit_ids == 1 && c.exact == packed,
                  "%s: kind %d K %d N %d W %d block %d S %d ids %d exact %d",
                  name, c.kind, c.topk, c.local_topk, c.world_size,
                  c.block_size, c.interleave, c.emit_ids, c.exact);
        /* The packed N rule of the default config, for every model. */
        int32_t k = model_configs[i].topk, w = model_configs[i].world_size;
        if (packed)
            CHECK_EQ(c.local_topk, (3 * k / (2 * w) + 31) / 32 * 32);
        CHECK_OK(dcptopk_merge_config_check(&c));
        int listed = 0;
        for (size_t j = 0; dcptopk_merge_config_name(j); j++)
            listed += strcmp(dcptopk_merge_config_name(j), name) == 0;
        CHECK_MSG(listed == 1, "%s listed %d times", name, listed);
    }
}

TEST(every_named_config_expands_to_valid_keys)
{
    for (size_t i = 0; dcptopk_merge_config_name(i); i++) {
        dcptopk_merge_config c;
        CHECK_OK(dcptopk_merge_config_named(dcptopk_merge_config_name(i), &c));
        dcptopk_key keys[16];
        size_t n = 0;
        CHECK_OK(dcptopk_config_keys(&c, "sm_90a", keys, 16, &n));
        CHECK(n >= 2 && n <= 16);
        for (size_t j = 0; j < n; j++) {
            CHECK_OK(dcptopk_key_check(&keys[j]));
            CHECK_STR_EQ(keys[j].arch, "sm_90a");
        }
    }
}

TEST(bad_config_fields_are_named)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 100;
    CHECK_EQ(dcptopk_merge_config_check(&c), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->topk = 100");
    c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    c.world_size = 17;
    CHECK_EQ(dcptopk_merge_config_check(&c), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->world_size = 17");
    c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    c.struct_size = 3;
    CHECK_EQ(dcptopk_merge_config_check(&c), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "struct_size = 3");
    size_t n;
    c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    CHECK_EQ(dcptopk_config_keys(&c, "sm90", NULL, 0, &n),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "arch = \"sm90\"");
    /* Pre-Hopper targets are refused by name, not left to ptxas; the
     * Hopper and Blackwell ones, 'a', 'f' or plain, are taken. */
    static const char *const old_archs[] = {"sm_80", "sm_89", "sm_75", "sm_86a"};
    for (size_t i = 0; i < sizeof old_archs / sizeof old_archs[0]; i++) {
        CHECK_EQ(dcptopk_config_keys(&c, old_archs[i], NULL, 0, &n),
                 DCPTOPK_UNSUPPORTED);
        CHECK_CONTAINS(dcptopk_last_error(NULL), old_archs[i]);
        CHECK_CONTAINS(dcptopk_last_error(NULL), "sm_90 or later");
    }
    static const char *const new_archs[] = {"sm_90", "sm_90a", "sm_100a",
                                            "sm_103a", "sm_120", "sm_120f"};
    for (size_t i = 0; i < sizeof new_archs / sizeof new_archs[0]; i++) {
        n = 0;
        CHECK_OK(dcptopk_config_keys(&c, new_archs[i], NULL, 0, &n));
        CHECK(n > 0);
    }
}

TEST(key_format_lists_only_specialised_fields)
{
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = 384;
    snprintf(k.arch, sizeof k.arch, "sm_90");
    char buf[256];
    dcptopk_key_format(&k, buf, sizeof buf);
    CHECK_STR_EQ(buf, "pack_indices(local_topk=384)@sm_90");
    k.topk = 2048; /* not a field of pack_indices */
    CHECK_EQ(dcptopk_key_check(&k), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "key->topk = 2048");
}
