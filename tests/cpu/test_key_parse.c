/* test_key_parse.c - dcptopk_key_parse is the exact inverse of
 * dcptopk_key_format over every key of every named config, and refuses
 * malformed text with a message naming the bad part. */
#include <string.h>

#include "dcptopk.h"
#include "harness.h"

TEST(every_named_config_key_round_trips)
{
    size_t total = 0;
    for (size_t i = 0; dcptopk_merge_config_name(i); i++) {
        dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
        CHECK_OK(dcptopk_merge_config_named(dcptopk_merge_config_name(i), &c));
        dcptopk_key keys[256];
        size_t n = 0;
        CHECK_OK(dcptopk_config_keys(&c, "sm_90a", keys, 256, &n));
        CHECK(n <= 256);
        for (size_t j = 0; j < n && j < 256; j++) {
            char text[512];
            CHECK(dcptopk_key_format(&keys[j], text, sizeof text) <
                  (int)sizeof text);
            dcptopk_key back;
            memset(&back, 0xab, sizeof back);
            CHECK_OK(dcptopk_key_parse(text, &back));
            dcptopk_key want = keys[j];
            /* Compare the arch as a string: bytes past its NUL are not part
             * of a key. */
            CHECK_STR_EQ(back.arch, want.arch);
            memset(back.arch, 0, sizeof back.arch);
            memset(want.arch, 0, sizeof want.arch);
            CHECK_MSG(memcmp(&back, &want, sizeof back) == 0,
                      "%s does not round-trip", text);
            char again[512];
            memcpy(back.arch, keys[j].arch, sizeof back.arch);
            dcptopk_key_format(&back, again, sizeof again);
            CHECK_STR_EQ(again, text);
            total++;
        }
    }
    CHECK(total > 10);
}

static void refused(const char *text, const char *names)
{
    dcptopk_key k;
    memset(&k, 0x5a, sizeof k);
    dcptopk_key before = k;
    CHECK_EQ(dcptopk_key_parse(text, &k), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), names);
    CHECK(memcmp(&k, &before, sizeof k) == 0);
}

TEST(malformed_keys_are_refused_naming_the_part)
{
    dcptopk_key k;
    CHECK_OK(dcptopk_key_parse("pack_indices(local_topk=384)@sm_90a", &k));
    CHECK_EQ(k.kernel, DCPTOPK_KERNEL_PACK_INDICES);
    CHECK_EQ(k.local_topk, 384);
    refused("pack_indices(local_topk=384)", "@arch");
    refused("pack_indices(local_topk=384)@sm_9", "arch \"sm_9\"");
    refused("pack_indices(local_topk=384)@sm_90a_and_more_text", "arch");
    refused("nosuch(topk=32)@sm_90a", "unknown kernel \"nosuch\"");
    refused("loopback(local_topk=384,world_size=8)@sm_90a",
            "unknown kernel \"loopback\"");
    refused("pack_indices@sm_90a", "expected kernel(field=value");
    refused("pack_indices(topk=384)@sm_90a",
            "topk = 384: kernel pack_indices does not specialise on it");
    refused("pack_indices(local_topk=384,local_topk=384)@sm_90a",
            "local_topk given twice");
    refused("pack_indices(local_topk=abc)@sm_90a",
            "local_topk = \"abc\": expected a 32-bit integer");
    refused("pack_indices(local_topk=99999999999)@sm_90a",
            "local_topk = \"99999999999\": expected a 32-bit integer");
    refused("pack_indices(local_topk=385)@sm_90a", "key->local_topk = 385");
    refused("pack_indices()@sm_90a", "field local_topk");
    refused("pack_indices(local_topk=384;)@sm_90a", "expected ',' or ')'");
    refused("pack_indices(local_topk=384", "expected ',' or ')'");
    refused("pack_indices(bogus=1)@sm_90a", "unknown field \"bogus\"");
    CHECK_EQ(dcptopk_key_parse(NULL, &k), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "text is NULL");
    CHECK_EQ(dcptopk_key_parse("pack_indices(local_topk=384)@sm_90a", NULL),
             DCPTOPK_INVALID_ARGUMENT);
}
