/* test_compile.c - NVRTC compiles every key of every named config's warmup
 * list (no GPU needed): each gives a non-empty cubin that is an ELF image.
 * A template that does not exist yet fails the test with its name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcptopk.h"
#include "harness.h"
#include "rt.h"

/* Distinct keys of every named config for `arch`. */
static size_t all_keys(const char *arch, dcptopk_key *keys, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; dcptopk_merge_config_name(i); i++) {
        dcptopk_merge_config c;
        if (dcptopk_merge_config_named(dcptopk_merge_config_name(i), &c))
            return 0;
        dcptopk_key list[64];
        size_t m = 0;
        if (dcptopk_config_keys(&c, arch, list, 64, &m) || m > 64)
            return 0;
        for (size_t j = 0; j < m; j++) {
            int seen = 0;
            for (size_t q = 0; q < n && !seen; q++)
                seen = memcmp(&keys[q], &list[j], sizeof list[j]) == 0;
            if (!seen && n == cap) {
                /* A key left out would go untested: fail instead. */
                fprintf(stderr, "more than %zu distinct keys: raise the cap\n", cap);
                return 0;
            }
            if (!seen)
                keys[n++] = list[j];
        }
    }
    return n;
}

/* Renders `k` (plus the -D option `define`, when not NULL) and compiles it
 * into *c (free it with dc_compiled_free, also on failure). On failure the
 * reason is in `err` (DC_ERR_LEN bytes): the render's or NVRTC's. */
static dcptopk_result unit_compile(const dcptopk_key *k, const char *define, dc_compiled *c,
                                   char *err)
{
    memset(c, 0, sizeof *c);
    err[0] = '\0';
    dc_unit u;
    dcptopk_result r = dc_unit_build(NULL, k, &u);
    if (r) {
        snprintf(err, DC_ERR_LEN, "%s", dcptopk_last_error(NULL));
    } else if (define && u.option_count == DC_MAX_OPTIONS) {
        snprintf(err, DC_ERR_LEN, "no room for option %s", define);
        r = DCPTOPK_INTERNAL;
    } else {
        if (define)
            u.options[u.option_count++] = define;
        r = dc_nvrtc_compile(&u, c, err, DC_ERR_LEN);
    }
    dc_unit_free(&u);
    return r;
}

/* Compiles every key; returns the number that failed, printing each. */
static int compile_all(const dcptopk_key *keys, size_t n, int *missing)
{
    int failed = 0;
    *missing = 0;
    char *err = malloc(DC_ERR_LEN);
    if (!err)
        return (int)n;
    for (size_t i = 0; i < n; i++) {
        char name[256];
        dcptopk_key_format(&keys[i], name, sizeof name);
        dc_compiled c;
        dcptopk_result r = unit_compile(&keys[i], NULL, &c, err);
        if (r) {
            fprintf(stderr, "FAIL %s: %s: %s\n", name, dcptopk_result_name(r),
                    err);
            if (r == DCPTOPK_NOT_FOUND)
                (*missing)++;
            failed++;
        } else if (c.cubin_size < 64 ||
                   memcmp(c.cubin, "\x7f" "ELF", 4) != 0) {
            fprintf(stderr, "FAIL %s: cubin of %zu bytes is not an ELF image\n",
                    name, c.cubin_size);
            failed++;
        } else if (c.ptx_size < 16 || c.ptx[c.ptx_size - 1] == '\0' ||
                   !strstr(c.ptx, ".entry")) {
            /* PTX is stored as text alone (no NUL), and names its entry. */
            fprintf(stderr, "FAIL %s: PTX of %zu bytes is not PTX text\n",
                    name, c.ptx_size);
            failed++;
        } else {
            printf("ok   %-90s cubin %7zu B  ptx %7zu B  %7.1f ms\n", name,
                   c.cubin_size, c.ptx_size, c.compile_ms);
        }
        dc_compiled_free(&c);
    }
    free(err);
    return failed;
}

static void named_configs_compile(const char *arch)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    dcptopk_key keys[256];
    size_t n = all_keys(arch, keys, 256);
    CHECK(n > 0);
    int missing = 0;
    int failed = compile_all(keys, n, &missing);
    CHECK_MSG(failed == 0,
              "%s: %d of %zu keys failed to compile (%d for a missing "
              "template); see the FAIL lines above",
              arch, failed, n, missing);
}

TEST(every_named_config_compiles_for_sm_90a) { named_configs_compile("sm_90a"); }
/* Blackwell: the arch-specific code paths (clusters, bulk copies, PDL) and
 * the templates' static_asserts must hold there too. */
TEST(every_named_config_compiles_for_sm_100a) { named_configs_compile("sm_100a"); }

TEST(pack_indices_compiles_for_other_archs)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    static const char *const archs[] = {"sm_90", "sm_80", "sm_100a"};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        dcptopk_key k;
        memset(&k, 0, sizeof k);
        k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
        k.local_topk = 96;
        snprintf(k.arch, sizeof k.arch, "%s", archs[a]);
        int missing = 0;
        CHECK_EQ(compile_all(&k, 1, &missing), 0);
    }
}

TEST(nvrtc_errors_keep_the_log)
{
    /* A template with a syntax error, through the folder override. */
    char dir[] = "/tmp/dcptopk-badtmpl-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/pack_indices.cu", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("extern \"C\" __global__ void broken( { this is not C++ }\n", f);
    fclose(f);
    setenv("DCPTOPK_TEMPLATE_DIR", dir, 1);
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = 96;
    snprintf(k.arch, sizeof k.arch, "sm_90a");
    dc_unit u;
    dcptopk_result r = dc_unit_build(NULL, &k, &u);
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    remove(path);
    rmdir(dir);
    CHECK_OK(r);
    char err[DC_ERR_LEN];
    dc_compiled c;
    r = dc_nvrtc_compile(&u, &c, err, sizeof err);
    dc_unit_free(&u);
    CHECK_EQ(r, DCPTOPK_NVRTC_ERROR);
    CHECK_CONTAINS(err, "NVRTC log:");
    CHECK_CONTAINS(err, "pack_indices.cu");
    CHECK_CONTAINS(err, "--gpu-architecture=sm_90a");
}

/* The hierarchical merge's own kernels (node_pairs, the pair select over
 * nodes) for every named exact packed config and node count, sm_90a and
 * sm_100a: the node merge's keys are those of a named-like config. */
TEST(hierarchical_keys_compile)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    dcptopk_key keys[128];
    size_t n = 0;
    static const char *const archs[] = {"sm_90a", "sm_100a"};
    for (size_t a = 0; a < 2; a++)
        for (size_t i = 0; dcptopk_merge_config_name(i); i++) {
            dcptopk_merge_config c;
            CHECK_OK(dcptopk_merge_config_named(dcptopk_merge_config_name(i), &c));
            if (c.kind != DCPTOPK_MERGE_PACKED || !c.exact)
                continue;
            for (int32_t d = 2; d <= c.world_size; d *= 2) {
                if (c.world_size % d)
                    continue;
                dcptopk_key list[64];
                size_t m = 0;
                CHECK_OK(dcptopk_config_keys_nodes(&c, d, archs[a], list, 64, &m));
                CHECK(m >= 2 && m <= 64);
                /* Last come node_pairs and the pair select (one CTA a row:
                 * warmup loads no split); a row of d * K = 16384 has both
                 * its shapes' keys, since no device is named. */
                const int two = (int64_t)d * c.topk == 16384;
                const size_t first = m - 2 - (size_t)two;
                CHECK_EQ(list[first].kernel, DCPTOPK_KERNEL_NODE_PAIRS);
                CHECK_EQ(list[first].world_size, c.world_size / d);
                for (int v = 0; v <= two; v++) {
                    const dcptopk_key *pk = &list[first + 1 + (size_t)v];
                    CHECK_EQ(pk->kernel, DCPTOPK_KERNEL_PAIR_SELECT);
                    CHECK_EQ(pk->variant, (d == c.world_size ? 0 : d) + 128 * v);
                    CHECK_EQ(pk->world_size, c.world_size);
                }
                for (size_t j = first; j < m; j++) {
                    int seen = 0;
                    for (size_t q = 0; q < n && !seen; q++)
                        seen = memcmp(&keys[q], &list[j], sizeof list[j]) == 0;
                    CHECK_MSG(seen || n < 128, "more than 128 hierarchical keys");
                    if (!seen)
                        keys[n++] = list[j];
                }
            }
        }
    CHECK(n >= 4);
    int missing = 0;
    int failed = compile_all(keys, n, &missing);
    CHECK_MSG(failed == 0, "%d of %zu hierarchical keys failed to compile",
              failed, n);
}

TEST(hierarchical_keys_refuse_bad_node_counts)
{
    dcptopk_merge_config c;
    CHECK_OK(dcptopk_merge_config_named("deepseek-v3.2-dcp8", &c));
    dcptopk_key list[64];
    size_t m = 0;
    CHECK_EQ(dcptopk_config_keys_nodes(&c, 3, NULL, list, 64, &m),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "nodes = 3");
    CHECK_EQ(dcptopk_config_keys_nodes(&c, 0, NULL, list, 64, &m),
             DCPTOPK_INVALID_ARGUMENT);
    c.exact = 0;
    CHECK_EQ(dcptopk_config_keys_nodes(&c, 2, NULL, list, 64, &m),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "exact 0");
    c.exact = 1;
    CHECK_OK(dcptopk_config_keys_nodes(&c, 1, NULL, list, 64, &m));
    size_t flat = 0;
    CHECK_OK(dcptopk_config_keys(&c, NULL, list, 64, &flat));
    CHECK_EQ(m, flat);
    /* A pair select's segment count must divide its world size. */
    dcptopk_key k;
    CHECK_EQ(dcptopk_key_parse("pair_select(topk=2048,world_size=8,block_size=64,"
                               "interleave=1,emit_ids=1,layout=0,variant=3)@sm_90a",
                               &k),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "key->variant = 3");
    /* Its split over a cluster: 2 or 4 CTAs (32 * log2), rows of at most
     * 32768 candidates, at least 2048 a CTA; its two-CTA shape. */
    static const struct { const char *spec; int ok; } splits[] = {
        {"topk=2048,world_size=8,variant=64", 1},  /* 4 x 4096 */
        {"topk=2048,world_size=8,variant=34", 1},  /* 2 nodes: 2 x 2048 */
        {"topk=2048,world_size=8,variant=66", 0},  /* 2 nodes, 4 x 1024 */
        {"topk=2048,world_size=8,variant=65", 0},  /* 1 segment: 2048 */
        {"topk=2048,world_size=8,variant=96", 0},  /* 8 CTAs */
        {"topk=4096,world_size=16,variant=32", 0}, /* 65536 a row */
        {"topk=512,world_size=8,variant=64", 0},   /* 1024 a CTA */
        {"topk=512,world_size=8,variant=32", 1},
        /* The two-CTA shape (+128): a one-CTA row of 16384 only. */
        {"topk=2048,world_size=8,variant=128", 1},
        {"topk=1024,world_size=16,variant=128", 1},
        {"topk=4096,world_size=8,variant=132", 1},  /* 4 nodes x 4096 */
        {"topk=2048,world_size=4,variant=128", 0},  /* 8192 */
        {"topk=4096,world_size=8,variant=128", 0},  /* 32768 */
        {"topk=2048,world_size=8,variant=160", 0},  /* 2 CTAs */
        {"topk=2048,world_size=8,variant=256", 0},  /* no bit 8 */
    };
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        char text[200];
        snprintf(text, sizeof text,
                 "pair_select(%s,block_size=64,interleave=1,emit_ids=1,"
                 "layout=0)@sm_90a",
                 splits[i].spec);
        const dcptopk_result r = dcptopk_key_parse(text, &k);
        CHECK_MSG(splits[i].ok ? r == DCPTOPK_SUCCESS
                               : r == DCPTOPK_INVALID_ARGUMENT,
                  "%s: %s", text, dcptopk_last_error(NULL));
        if (!splits[i].ok)
            CHECK_CONTAINS(dcptopk_last_error(NULL), "key->variant = ");
    }
}
