/* test_context.c - contexts without a device: warmup compiles into a cache
 * file, a second context finds every key there; strict mode refuses a key
 * warmup did not load; bad arguments are named. Runs on CI (no GPU). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "gpu_util.h"
#include "harness.h"
#include "pair.h"
#include "runtime.h"

static dcptopk_context *cpu_ctx(const char *cache_path, int mode, int strict)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = -1;
    cfg.arch = "sm_90a";
    cfg.cache_path = cache_path;
    cfg.cache_mode = mode;
    cfg.strict = strict;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "context: %s\n", dcptopk_last_error(NULL));
        return NULL;
    }
    return ctx;
}

static dcptopk_key pack_key(int32_t n)
{
    dcptopk_key k;
    memset(&k, 0, sizeof k);
    k.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    k.local_topk = n;
    return k; /* arch empty: the context's */
}

typedef struct progress_log {
    int calls;
    int by_origin[3];
} progress_log;

static void on_progress(void *user, const dcptopk_key *key,
                        dcptopk_origin origin, double ms)
{
    progress_log *log = user;
    (void)ms;
    if (strcmp(key->arch, "sm_90a") == 0 && origin >= 0 && origin < 3) {
        log->calls++;
        log->by_origin[origin]++;
    }
}

TEST(warmup_keys_compile_then_cache_hits)
{
    char dir[512], path[600];
    tmpdir_make(dir, sizeof dir, "ctx");
    CHECK(dir[0]);
    snprintf(path, sizeof path, "%s/cache.db", dir);
    dcptopk_key keys[3] = {pack_key(96), pack_key(384), pack_key(96)};

    dcptopk_context *a = cpu_ctx(path, DCPTOPK_CACHE_READWRITE, 0);
    CHECK(a != NULL);
    CHECK_STR_EQ(dcptopk_context_arch(a), "sm_90a");
    dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
    progress_log log = {0, {0, 0, 0}};
    CHECK_OK(dcptopk_warmup_keys(a, keys, 3, on_progress, &log, &st));
    CHECK_EQ(st.keys, 3);
    CHECK_EQ(st.compiled, 2);     /* the third key repeats the first */
    CHECK_EQ(st.memory_hits, 1);
    CHECK_EQ(st.cache_hits, 0);
    CHECK(st.compile_ms > 0.0);
    CHECK_EQ(log.calls, 3);
    CHECK_EQ(log.by_origin[DCPTOPK_ORIGIN_COMPILED], 2);
    dcptopk_context_stats cs = DCPTOPK_CONTEXT_STATS_INIT;
    CHECK_OK(dcptopk_context_stats_get(a, &cs));
    CHECK_EQ(cs.compiles, 2);
    CHECK_EQ(cs.cache_hits, 0);
    CHECK_EQ(cs.modules, 2);
    CHECK_EQ(cs.launches, 0);
    dcptopk_context_destroy(a);

    dcptopk_context *b = cpu_ctx(path, DCPTOPK_CACHE_READWRITE, 0);
    CHECK(b != NULL);
    st = (dcptopk_warmup_stats)DCPTOPK_WARMUP_STATS_INIT;
    CHECK_OK(dcptopk_warmup_keys(b, keys, 2, NULL, NULL, &st));
    CHECK_EQ(st.compiled, 0);
    CHECK_EQ(st.cache_hits, 2);
    cs = (dcptopk_context_stats)DCPTOPK_CONTEXT_STATS_INIT;
    CHECK_OK(dcptopk_context_stats_get(b, &cs));
    CHECK_EQ(cs.compiles, 0);
    CHECK_EQ(cs.cache_hits, 2);
    dcptopk_context_destroy(b);

    /* Read-only: hits still served. Off: compiles in memory. */
    dcptopk_context *c = cpu_ctx(path, DCPTOPK_CACHE_READONLY, 0);
    CHECK(c != NULL);
    st = (dcptopk_warmup_stats)DCPTOPK_WARMUP_STATS_INIT;
    CHECK_OK(dcptopk_warmup_keys(c, keys, 2, NULL, NULL, &st));
    CHECK_EQ(st.cache_hits, 2);
    dcptopk_context_destroy(c);
    dcptopk_context *d = cpu_ctx(path, DCPTOPK_CACHE_OFF, 0);
    CHECK(d != NULL);
    st = (dcptopk_warmup_stats)DCPTOPK_WARMUP_STATS_INIT;
    CHECK_OK(dcptopk_warmup_keys(d, keys, 2, NULL, NULL, &st));
    CHECK_EQ(st.compiled, 2);
    dcptopk_context_destroy(d);
    tmpdir_remove(dir);
}

TEST(default_config_warmup_then_all_cache_hits)
{
    char dir[512], path[600];
    tmpdir_make(dir, sizeof dir, "ctxdef");
    CHECK(dir[0]);
    snprintf(path, sizeof path, "%s/cache.db", dir);
    dcptopk_merge_config cfg;
    CHECK_OK(dcptopk_merge_config_named("deepseek-v3.2-dcp8", &cfg));
    size_t n = 0;
    CHECK_OK(dcptopk_config_keys(&cfg, "sm_90a", NULL, 0, &n));
    CHECK(n >= 2);

    dcptopk_context *a = cpu_ctx(path, DCPTOPK_CACHE_READWRITE, 0);
    CHECK(a != NULL);
    dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
    dcptopk_result r = dcptopk_warmup(a, &cfg, NULL, NULL, &st);
    if (r != DCPTOPK_SUCCESS) {
        fprintf(stderr, "warmup: %s\n", dcptopk_last_error(a));
        dcptopk_context_destroy(a);
        tmpdir_remove(dir);
        CHECK_OK(r);
    }
    CHECK_EQ(st.keys, n);
    CHECK_EQ(st.compiled, n);
    dcptopk_context_destroy(a);

    dcptopk_context *b = cpu_ctx(path, DCPTOPK_CACHE_READWRITE, 0);
    CHECK(b != NULL);
    st = (dcptopk_warmup_stats)DCPTOPK_WARMUP_STATS_INIT;
    CHECK_OK(dcptopk_warmup(b, &cfg, NULL, NULL, &st));
    CHECK_EQ(st.cache_hits, n);
    CHECK_EQ(st.compiled, 0);
    dcptopk_context_stats cs = DCPTOPK_CONTEXT_STATS_INIT;
    CHECK_OK(dcptopk_context_stats_get(b, &cs));
    CHECK_EQ(cs.compiles, 0);
    dcptopk_context_destroy(b);
    tmpdir_remove(dir);
}

/* Warmup's compile phase on several threads (DCPTOPK_WARMUP_THREADS): the
 * same statistics as on one thread, each key compiled once, and the same
 * cache entries byte for byte. An unusable value is ignored. */
TEST(parallel_warmup_matches_serial)
{
    char dir[512], path[3][600];
    tmpdir_make(dir, sizeof dir, "ctxpar");
    CHECK(dir[0]);
    const char *threads[3] = {"1", "4", "lots"};
    dcptopk_key keys[7] = {pack_key(32),  pack_key(64),  pack_key(96), pack_key(128),
                           pack_key(160), pack_key(64), pack_key(192)};
    for (int v = 0; v < 3; v++) {
        snprintf(path[v], sizeof path[v], "%s/cache%d.db", dir, v);
        CHECK(setenv("DCPTOPK_WARMUP_THREADS", threads[v], 1) == 0);
        dcptopk_context *ctx = cpu_ctx(path[v], DCPTOPK_CACHE_READWRITE, 0);
        CHECK(ctx != NULL);
        dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
        progress_log log = {0, {0, 0, 0}};
        CHECK_OK(dcptopk_warmup_keys(ctx, keys, 7, on_progress, &log, &st));
        CHECK_EQ(st.keys, 7);
        CHECK_EQ(st.compiled, 6); /* keys[5] repeats keys[1] */
        CHECK_EQ(st.memory_hits, 1);
        CHECK_EQ(st.cache_hits, 0);
        CHECK(st.compile_ms > 0.0);
        CHECK_EQ(log.by_origin[DCPTOPK_ORIGIN_COMPILED], 6);
        CHECK_EQ(log.by_origin[DCPTOPK_ORIGIN_MEMORY], 1);
        dcptopk_context_stats cs = DCPTOPK_CONTEXT_STATS_INIT;
        CHECK_OK(dcptopk_context_stats_get(ctx, &cs));
        CHECK_EQ(cs.compiles, 6);
        CHECK_EQ(cs.cache_hits, 0);
        CHECK_EQ(cs.modules, 6);
        dcptopk_context_destroy(ctx);
    }
    CHECK(unsetenv("DCPTOPK_WARMUP_THREADS") == 0);

    dcptopk_cache *c[3] = {NULL, NULL, NULL};
    dcptopk_cache_entry *e[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    for (int v = 0; v < 3; v++) {
        CHECK_OK(dcptopk_cache_open(path[v], 1, &c[v]));
        CHECK_OK(dcptopk_cache_list(c[v], &e[v], &n[v]));
        CHECK_EQ(n[v], 6);
    }
    for (size_t i = 0; i < n[0]; i++)
        for (int v = 1; v < 3; v++) {
            dcptopk_cache_entry other;
            CHECK_OK(dcptopk_cache_find(c[v], e[0][i].key, &other));
            void *a = NULL, *b = NULL;
            size_t as = 0, bs = 0;
            CHECK_OK(dcptopk_cache_read_blob(c[0], e[0][i].key, DCPTOPK_BLOB_CUBIN, &a, &as));
            CHECK_OK(dcptopk_cache_read_blob(c[v], e[0][i].key, DCPTOPK_BLOB_CUBIN, &b, &bs));
            CHECK(as > 0 && as == bs && memcmp(a, b, as) == 0);
            free(a);
            free(b);
        }
    for (int v = 0; v < 3; v++) {
        free(e[v]);
        dcptopk_cache_close(c[v]);
    }
    tmpdir_remove(dir);
}

TEST(strict_refuses_unwarmed_keys)
{
    dcptopk_context *ctx = cpu_ctx(NULL, DCPTOPK_CACHE_OFF, 1);
    CHECK(ctx != NULL);
    dcptopk_key k = pack_key(96);
    CHECK_OK(dcptopk_warmup_keys(ctx, &k, 1, NULL, NULL, NULL));
    /* Sealed now: a warmed key gets past the strict check (and stops at the
     * missing device), an unwarmed one is NOT_WARMED, named. */
    dc_launch_cfg lc = {.grid = {1, 1, 1}, .block = {256, 1, 1}};
    CHECK_EQ(dc_launch(ctx, &k, "dcptopk_pack_indices", &lc, NULL),
             DCPTOPK_NO_DEVICE);
    dcptopk_key other = pack_key(128);
    CHECK_EQ(dc_launch(ctx, &other, "dcptopk_pack_indices", &lc, NULL),
             DCPTOPK_NOT_WARMED);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "pack_indices(local_topk=128)");
    /* Explicit warmup still works after sealing. */
    CHECK_OK(dcptopk_warmup_keys(ctx, &other, 1, NULL, NULL, NULL));
    CHECK_EQ(dc_launch(ctx, &other, "dcptopk_pack_indices", &lc, NULL),
             DCPTOPK_NO_DEVICE);
    dcptopk_context_destroy(ctx);

    /* Not strict: sealing changes nothing. */
    ctx = cpu_ctx(NULL, DCPTOPK_CACHE_OFF, 0);
    CHECK(ctx != NULL);
    CHECK_OK(dcptopk_context_seal(ctx));
    CHECK_EQ(dc_launch(ctx, &other, "dcptopk_pack_indices", &lc, NULL),
             DCPTOPK_NO_DEVICE);
    dcptopk_context_destroy(ctx);
}

TEST(bad_context_arguments_are_named)
{
    dcptopk_context *ctx = (dcptopk_context *)1;
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    CHECK_EQ(dcptopk_context_create(&cfg, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "out is NULL");

    cfg.struct_size = 3;
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_INVALID_ARGUMENT);
    CHECK(ctx == NULL);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->struct_size = 3");

    cfg = (dcptopk_context_config)DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = -2;
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->device = -2");

    cfg = (dcptopk_context_config)DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.cache_mode = 7;
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->cache_mode = 7");

    cfg = (dcptopk_context_config)DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = -1;
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->arch = NULL");

    cfg.arch = "sm90";
    cfg.cache_mode = DCPTOPK_CACHE_OFF;
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->arch = \"sm90\"");
    CHECK(ctx == NULL);

    cfg.arch = "sm_80";
    CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_UNSUPPORTED);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->arch = \"sm_80\"");
    CHECK_CONTAINS(dcptopk_last_error(NULL), "sm_90 or later");
    CHECK(ctx == NULL);

    if (dcptopk_device_count() == 0) {
        cfg = (dcptopk_context_config)DCPTOPK_CONTEXT_CONFIG_INIT;
        cfg.cache_mode = DCPTOPK_CACHE_OFF;
        CHECK_EQ(dcptopk_context_create(&cfg, &ctx), DCPTOPK_NO_DEVICE);
        CHECK_CONTAINS(dcptopk_last_error(NULL), "config->device = 0");
        CHECK(ctx == NULL);
    }
    CHECK_EQ(dcptopk_context_seal(NULL), DCPTOPK_INVALID_ARGUMENT);
    dcptopk_context_destroy(NULL);
    CHECK_STR_EQ(dcptopk_context_arch(NULL), "");
}

TEST(bad_warmup_arguments_are_named)
{
    dcptopk_context *ctx = cpu_ctx(NULL, DCPTOPK_CACHE_OFF, 0);
    CHECK(ctx != NULL);
    CHECK_EQ(dcptopk_warmup(NULL, NULL, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_warmup(ctx, NULL, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config is NULL");
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 100;
    CHECK_EQ(dcptopk_warmup(ctx, &c, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->topk = 100");
    dcptopk_warmup_stats st = DCPTOPK_WARMUP_STATS_INIT;
    st.struct_size = 2;
    c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    CHECK_EQ(dcptopk_warmup(ctx, &c, NULL, NULL, &st),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "stats->struct_size = 2");
    CHECK_EQ(dcptopk_warmup_keys(ctx, NULL, 2, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "keys is NULL");
    dcptopk_key bad[2] = {pack_key(96), pack_key(100)};
    CHECK_EQ(dcptopk_warmup_keys(ctx, bad, 2, NULL, NULL, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "keys[1]");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "key->local_topk = 100");
    dcptopk_context_stats cs = DCPTOPK_CONTEXT_STATS_INIT;
    CHECK_EQ(dcptopk_context_stats_get(NULL, &cs), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dcptopk_context_stats_get(ctx, NULL), DCPTOPK_INVALID_ARGUMENT);
    cs.struct_size = 1;
    CHECK_EQ(dcptopk_context_stats_get(ctx, &cs), DCPTOPK_INVALID_ARGUMENT);
    dc_launch_cfg lc = {.grid = {0, 1, 1}, .block = {256, 1, 1}};
    dcptopk_key k = pack_key(96);
    CHECK_EQ(dc_launch(ctx, NULL, "x", &lc, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dc_launch(NULL, &k, "x", &lc, NULL), DCPTOPK_INVALID_ARGUMENT);
    dcptopk_context_destroy(ctx);
}

typedef struct thread_arg {
    dcptopk_context *ctx;
    dcptopk_result r;
} thread_arg;

static void *warm_thread(void *p)
{
    thread_arg *a = p;
    dcptopk_key keys[4] = {pack_key(96), pack_key(128), pack_key(160),
                           pack_key(192)};
    a->r = dcptopk_warmup_keys(a->ctx, keys, 4, NULL, NULL, NULL);
    return NULL;
}

TEST(threads_share_one_context_and_compile_once)
{
    dcptopk_context *ctx = cpu_ctx(NULL, DCPTOPK_CACHE_OFF, 0);
    CHECK(ctx != NULL);
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].ctx = ctx;
        args[i].r = DCPTOPK_INTERNAL;
        CHECK(pthread_create(&th[i], NULL, warm_thread, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(args[i].r, DCPTOPK_SUCCESS);
    dcptopk_context_stats cs = DCPTOPK_CONTEXT_STATS_INIT;
    CHECK_OK(dcptopk_context_stats_get(ctx, &cs));
    CHECK_EQ(cs.compiles, 4);
    CHECK_EQ(cs.modules, 4);
    dcptopk_context_destroy(ctx);
}

/* The shape of the pair select's rows of 16384 (pair.h): a context without
 * a device keeps both, DCPTOPK_PAIR_TWO_CTAS picks one, and a context keeps
 * what it found at creation whatever the setting says later. A listing
 * without a device names both shapes' keys of a row of 16384 (W = 8,
 * K = 2048), one key a layout elsewhere (W = 4). */
TEST(pair_row_shapes_fixed_at_creation)
{
    const dc_env_kept kept = dc_env_keep("DCPTOPK_PAIR_TWO_CTAS");
    unsetenv("DCPTOPK_PAIR_TWO_CTAS");
    dcptopk_context *both = cpu_ctx(NULL, DCPTOPK_CACHE_OFF, 0);
    CHECK(both != NULL);
    CHECK_EQ(dc_pair_row_shapes(both), DC_PAIR_SHAPE_ONE | DC_PAIR_SHAPE_TWO);
    for (int two = 0; two < 2; two++) {
        setenv("DCPTOPK_PAIR_TWO_CTAS", two ? "yes" : "off", 1);
        dcptopk_context *ctx = cpu_ctx(NULL, DCPTOPK_CACHE_OFF, 0);
        CHECK(ctx != NULL);
        setenv("DCPTOPK_PAIR_TWO_CTAS", two ? "0" : "1", 1);
        CHECK_EQ(dc_pair_row_shapes(ctx), two ? DC_PAIR_SHAPE_TWO : DC_PAIR_SHAPE_ONE);
        dcptopk_context_destroy(ctx);
    }
    unsetenv("DCPTOPK_PAIR_TWO_CTAS");
    CHECK_EQ(dc_pair_row_shapes(both), DC_PAIR_SHAPE_ONE | DC_PAIR_SHAPE_TWO);
    dcptopk_context_destroy(both);

    static const struct { const char *name; size_t keys, twos; } cfgs[] = {
        {"deepseek-v3.2-dcp8-pair", 9, 4}, {"deepseek-v3.2-dcp4-pair", 5, 0}};
    for (size_t i = 0; i < 2; i++) {
        dcptopk_merge_config c;
        CHECK_OK(dcptopk_merge_config_named(cfgs[i].name, &c));
        dcptopk_key keys[16];
        size_t n = 0, twos = 0;
        CHECK_OK(dcptopk_config_keys(&c, "sm_90a", keys, 16, &n));
        CHECK_EQ(n, cfgs[i].keys);
        for (size_t j = 0; j < n && j < 16; j++)
            twos += keys[j].kernel == DCPTOPK_KERNEL_PAIR_SELECT &&
                    keys[j].variant == DC_PAIR_VARIANT(0, 0, 1);
        CHECK_EQ(twos, cfgs[i].twos);
    }
    dc_env_put_back(&kept);
}
