/* key_and_config.c - fuzz target: compile keys and merge configs from fuzz
 * bytes through dcptopk_key_check, dcptopk_key_format (every buffer size),
 * dcptopk_key_render and dcptopk_key_hash (pure CPU), dcptopk_config_keys
 * (every cap, fuzzed arch strings) and dcptopk_merge_config_check. */
#include "fuzz.h"

static void fuzz_key(dc_fuzz_in *in, dcptopk_key *k)
{
    static const int32_t kernels[] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    static const int32_t ks[] = {0, 32, 64, 128, 384, 2048, 4096};
    static const int32_t ws[] = {0, 1, 2, 8, 16};
    static const int32_t small[] = {0, 1, 2, 64};
    static const char *arches[] = {"sm_90a", "sm_80", "sm_100a", "sm_120f",
                                   "",       "sm_9",  "sm_1000", "sm_90b",
                                   "sm_90a\n"};
    memset(k, 0, sizeof *k);
    k->kernel = fz_i32(in, kernels, 9);
    k->topk = fz_i32(in, ks, 7);
    k->local_topk = fz_i32(in, ks, 7);
    k->world_size = fz_i32(in, ws, 5);
    k->block_size = fz_i32(in, small, 4);
    k->interleave = fz_i32(in, small, 4);
    k->emit_ids = fz_i32(in, small, 4);
    k->exact = fz_i32(in, small, 4);
    k->layout = fz_i32(in, small, 4);
    k->variant = fz_i32(in, small, 4);
    unsigned m = fz_pick(in, 4);
    if (m < 3) {
        snprintf(k->arch, sizeof k->arch, "%s",
                 arches[fz_pick(in, sizeof arches / sizeof arches[0])]);
    } else {
        for (size_t i = 0; i < sizeof k->arch; i++)
            k->arch[i] = (char)fz_u8(in); /* maybe no NUL at all */
    }
}

static void fuzz_config(dc_fuzz_in *in, dcptopk_merge_config *c)
{
    static const int32_t ks[] = {32, 64, 128, 384, 2048, 4096, 0};
    static const int32_t ws[] = {1, 2, 8, 16};
    static const int32_t small[] = {0, 1, 2, 64, 3};
    dcptopk_merge_config init = DCPTOPK_MERGE_CONFIG_INIT;
    *c = init;
    /* At most sizeof: past it the library reads a newer caller's tail,
     * which this struct does not have. */
    if (fz_pick(in, 8) == 0)
        c->struct_size = fz_u32(in) % (uint32_t)(sizeof *c + 1);
    c->kind = fz_i32(in, small, 2);
    c->topk = fz_i32(in, ks, 7);
    c->local_topk = fz_i32(in, ks, 7);
    c->world_size = fz_i32(in, ws, 4);
    c->block_size = fz_i32(in, small, 5);
    c->interleave = fz_i32(in, small, 5);
    c->emit_ids = fz_i32(in, small, 3);
    c->exact = fz_i32(in, small, 3);
}

int dc_fuzz_key_and_config(const uint8_t *data, size_t size)
{
    dc_fuzz_in in = {data, size};
    unsigned op = fz_pick(&in, 3);
    if (op == 0) {
        dcptopk_key k;
        fuzz_key(&in, &k);
        dcptopk_result r = dcptopk_key_check(&k);
        dc_fuzz_outcome("dcptopk_key_check", r);
        char small[64];
        size_t cap = fz_u8(&in) % sizeof small;
        int len = dcptopk_key_format(&k, cap ? small : NULL, cap);
        if (len < 0)
            DC_FUZZ_FAIL("dcptopk_key_format returned %d", len);
        if (cap && memchr(small, '\0', cap) == NULL)
            DC_FUZZ_FAIL("dcptopk_key_format left %zu bytes unterminated",
                         cap);
        char big[1024];
        int len2 = dcptopk_key_format(&k, big, sizeof big);
        if (len2 != len || (len2 < (int)sizeof big && (int)strlen(big) != len2))
            DC_FUZZ_FAIL("dcptopk_key_format: %d, then %d (\"%s\")", len, len2,
                         big);
        /* Rendering costs milliseconds: only for keys worth it. */
        if (fz_pick(&in, 4) == 0) {
            char *src = NULL;
            dcptopk_result rr = dcptopk_key_render(&k, &src);
            dc_fuzz_outcome("dcptopk_key_render", rr);
            if (rr == DCPTOPK_SUCCESS && (!src || !*src))
                DC_FUZZ_FAIL("dcptopk_key_render: success without source");
            if (rr != DCPTOPK_SUCCESS && src)
                DC_FUZZ_FAIL("dcptopk_key_render: failed with a source");
            free(src);
            char hex[33];
            dcptopk_result rh = dcptopk_key_hash(&k, hex);
            dc_fuzz_outcome("dcptopk_key_hash", rh);
            if (rh != rr)
                DC_FUZZ_FAIL("dcptopk_key_hash %d but key_render %d", rh, rr);
            if (rh == DCPTOPK_SUCCESS && strlen(hex) != 32)
                DC_FUZZ_FAIL("dcptopk_key_hash: \"%s\"", hex);
        }
    } else if (op == 1) {
        dcptopk_merge_config c;
        fuzz_config(&in, &c);
        dc_fuzz_outcome("dcptopk_merge_config_check",
                        dcptopk_merge_config_check(&c));
    } else {
        dcptopk_merge_config c;
        fuzz_config(&in, &c);
        char arch[24];
        const char *ap = NULL;
        if (fz_pick(&in, 2)) {
            size_t n = fz_u8(&in) % sizeof arch;
            for (size_t i = 0; i < n; i++)
                arch[i] = (char)fz_u8(&in);
            arch[n] = '\0';
            ap = arch;
        }
        dcptopk_key keys[64];
        size_t cap = fz_u8(&in) % 65, count = 0;
        dcptopk_result r = dcptopk_config_keys(
            &c, ap, cap || fz_pick(&in, 2) ? keys : NULL, cap,
            fz_pick(&in, 16) ? &count : NULL);
        dc_fuzz_outcome("dcptopk_config_keys", r);
        if (r == DCPTOPK_SUCCESS) {
            for (size_t i = 0; i < count && i < cap; i++) {
                if (dcptopk_key_check(&keys[i]) != DCPTOPK_SUCCESS)
                    DC_FUZZ_FAIL("config key %zu fails dcptopk_key_check: %s",
                                 i, dcptopk_last_error(NULL));
            }
        }
    }
    return 0;
}

DC_FUZZ_ENTRY(key_and_config)
