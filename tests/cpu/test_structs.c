/* test_structs.c - the versioned struct reader and writer (base/structs.c),
 * and every public versioned struct through the entry points that take it:
 * a caller's older (smaller) struct gets defaults on input and is written
 * only up to its size on output; a size below the first version is refused
 * with the argument named; a newer (larger) struct is accepted when its
 * unknown tail is zero and refused otherwise. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcptopk.h"
#include "group_int.h"
#include "gpu_util.h"
#include "harness.h"
#include "structs.h"

typedef struct v2 {
    uint32_t struct_size;
    int32_t a;
    int32_t b; /* added in version 2 */
} v2;

TEST(older_input_gets_defaults)
{
    v2 in = {offsetof(v2, b), 10, 99}; /* a version-1 caller: b unseen */
    v2 out = {sizeof(v2), 1, 2};       /* the defaults */
    CHECK_OK(dc_struct_in(NULL, "cfg", &in, &out, sizeof out,
                          offsetof(v2, b), "V2_INIT"));
    CHECK_EQ(out.struct_size, (uint32_t)sizeof(v2));
    CHECK_EQ(out.a, 10);
    CHECK_EQ(out.b, 2);
}

TEST(older_output_is_written_up_to_its_size)
{
    const v2 src = {sizeof(v2), 5, 6};
    v2 dst = {offsetof(v2, b), 0, 77};
    dc_struct_write(&dst, dst.struct_size, &src, sizeof src);
    CHECK_EQ(dst.struct_size, (uint32_t)offsetof(v2, b));
    CHECK_EQ(dst.a, 5);
    CHECK_EQ(dst.b, 77);
}

TEST(sizes_out_of_range_are_refused)
{
    v2 s = {sizeof(v2), 0, 0};
    CHECK_OK(dc_struct_check(NULL, "cfg", &s, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"));
    s.struct_size = 4;
    CHECK_EQ(dc_struct_check(NULL, "cfg", &s, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL),
                   "cfg->struct_size = 4: expected 12 (initialise with "
                   "V2_INIT)");
    s.struct_size = 1u << 20;
    CHECK_EQ(dc_struct_check(NULL, "cfg", &s, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dc_struct_check(NULL, "cfg", NULL, offsetof(v2, b), sizeof(v2),
                             "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "cfg is NULL");
    /* Through a public call. */
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.struct_size = 3;
    CHECK_EQ(dcptopk_merge_config_check(&c), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL), "config->struct_size = 3");
}

/* A version-3 caller of a version-2 library: its field c is unknown here. */
TEST(newer_struct_needs_a_zero_tail)
{
    struct v3 {
        uint32_t struct_size;
        int32_t a, b, c;
    } in = {sizeof in, 10, 20, 0};
    v2 out = {sizeof(v2), 1, 2};
    CHECK_OK(dc_struct_in(NULL, "cfg", &in, &out, sizeof out,
                          offsetof(v2, b), "V2_INIT"));
    CHECK_EQ(out.struct_size, (uint32_t)sizeof(v2));
    CHECK_EQ(out.a, 10);
    CHECK_EQ(out.b, 20);
    in.c = 1;
    CHECK_EQ(dc_struct_in(NULL, "cfg", &in, &out, sizeof out,
                          offsetof(v2, b), "V2_INIT"),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(NULL),
                   "cfg->struct_size = 16: larger than the 12 bytes this "
                   "library knows, and byte 12 is 0x01, not 0");
}

/* ------------------------------------------- every public versioned struct */

/* The end of each struct's first version, written here independently of
 * the library's DC_MIN_* table, so that a wrong minimum there fails. */
#define END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Bytes a newer header's caller adds, and the sentinel the bytes a caller
 * does not own are filled with. */
#define TAIL 24
#define SENTINEL 0xab

static _Alignas(64) unsigned char g_buf[1 << 14];
static char g_msg[8192];
static char g_case[256];

/* One entry point as the test calls it: `s` is the caller's struct; the
 * call's last error message is kept in g_msg. */
typedef dcptopk_result (*call_fn)(void *s, void *env);

typedef struct vcase {
    const char *what;  /* the argument's name in messages: "args"          */
    const void *init;  /* a struct of the library's size, ready to call    */
    size_t full, min;
    int output;        /* the call writes the struct                       */
    int succeeds;      /* the call succeeds (an output is then written)    */
    int refusals_only; /* acceptance needs a device: check refusals only   */
    call_fn call;
    void *env;
} vcase;

static dcptopk_result keep_msg(dcptopk_result r, const char *msg)
{
    snprintf(g_msg, sizeof g_msg, "%s", msg ? msg : "");
    return r;
}

/* The call's result and then its message (the comma orders the two). */
static dcptopk_result g_r;
#define keep(call, msg) (g_r = (call), keep_msg(g_r, (msg)))

/* g_buf as the caller's struct of `size` bytes: the init struct's first
 * bytes, zero up to `size` past the library's size, then the sentinel to
 * the end of what is checked. An output's own bytes after struct_size are
 * the sentinel too, so that a write shows. */
static void *as_caller(const vcase *v, uint32_t size)
{
    const size_t end = v->full + 2 * TAIL;
    memset(g_buf, SENTINEL, end);
    if (v->output)
        memcpy(g_buf, v->init, sizeof(uint32_t));
    else
        memcpy(g_buf, v->init, size < v->full ? size : v->full);
    if (size > v->full)
        memset(g_buf + v->full, 0, size - v->full);
    memcpy(g_buf, &size, sizeof size);
    return g_buf;
}

static int sentinel_from(size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (g_buf[i] != SENTINEL)
            return 0;
    return 1;
}

static int zero_from(size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (g_buf[i])
            return 0;
    return 1;
}

static uint32_t size_now(void)
{
    uint32_t size;
    memcpy(&size, g_buf, sizeof size);
    return size;
}

/* An accepted struct behaves as the library's own size does: the same
 * result, and on failure the same message (the check after the struct's). */
static void check_same(const vcase *v, dcptopk_result base,
                       const char *base_msg)
{
    dcptopk_result r = v->call(g_buf, v->env);
    CHECK_MSG(r == base, "%s: %s instead of %s: %s", g_case,
              dcptopk_result_name(r), dcptopk_result_name(base), g_msg);
    if (base != DCPTOPK_SUCCESS)
        CHECK_STR_EQ(g_msg, base_msg);
}

static void check_refused(const vcase *v, uint32_t size, const char *also)
{
    char want[128];
    dcptopk_result r = v->call(g_buf, v->env);
    CHECK_MSG(r == DCPTOPK_INVALID_ARGUMENT, "%s: %s: %s", g_case,
              dcptopk_result_name(r), g_msg);
    snprintf(want, sizeof want, "%s->struct_size = %u: ", v->what, size);
    CHECK_CONTAINS(g_msg, want);
    CHECK_CONTAINS(g_msg, also);
}

static void check_versions(const vcase *v)
{
    const size_t full = v->full, min = v->min, end = full + 2 * TAIL;
    const uint32_t newer = (uint32_t)(full + TAIL);
    char want[128];
    CHECK(min <= full && end <= sizeof g_buf);

    /* (b) below the first version: refused, naming the argument. */
    snprintf(g_case, sizeof g_case, "%s, struct_size %zu", v->what, min - 1);
    as_caller(v, (uint32_t)(min - 1));
    snprintf(want, sizeof want, "expected %zu (initialise with DCPTOPK_",
             full);
    check_refused(v, (uint32_t)(min - 1), want);
    if (dc_test_failed)
        return;
    CHECK(!v->output || sentinel_from(sizeof(uint32_t), end));

    /* (c) a newer header whose unknown tail is not zero: refused. */
    snprintf(g_case, sizeof g_case, "%s, struct_size %u, tail not zero",
             v->what, newer);
    as_caller(v, newer);
    g_buf[full + 5] = 0x5a;
    snprintf(want, sizeof want, "byte %zu is 0x5a, not 0", full + 5);
    check_refused(v, newer, want);
    if (dc_test_failed || v->refusals_only)
        return;

    /* The library's own size: what an accepted struct must match. */
    snprintf(g_case, sizeof g_case, "%s, struct_size %zu", v->what, full);
    as_caller(v, (uint32_t)full);
    dcptopk_result base = v->call(g_buf, v->env);
    char base_msg[sizeof g_msg];
    snprintf(base_msg, sizeof base_msg, "%s", g_msg);
    CHECK_MSG((base == DCPTOPK_SUCCESS) == !!v->succeeds &&
                  (base == DCPTOPK_SUCCESS || !strstr(base_msg, "struct_size")),
              "%s: %s: %s", g_case, dcptopk_result_name(base), base_msg);

    /* (a) the first version: accepted; an input's missing fields are the
     * defaults (the sentinel there would be refused: checked below), an
     * output is written up to its size and not past it. */
    snprintf(g_case, sizeof g_case, "%s, struct_size %zu (older)", v->what,
             min);
    as_caller(v, (uint32_t)min);
    check_same(v, base, base_msg);
    if (dc_test_failed)
        return;
    if (v->output) {
        CHECK_EQ(size_now(), min);
        CHECK_MSG(sentinel_from(min, end), "%s: written past its size",
                  g_case);
        CHECK_MSG(!v->succeeds || !sentinel_from(sizeof(uint32_t), min),
                  "%s: nothing written", g_case);
    } else if (min < full) {
        /* The same bytes at the library's size are read, and refused: the
         * older caller above was not read past its size. */
        as_caller(v, (uint32_t)full);
        memset(g_buf + min, SENTINEL, full - min);
        dcptopk_result r = v->call(g_buf, v->env);
        CHECK_MSG(r != base || strcmp(g_msg, base_msg) != 0,
                  "%s: the sentinel fields are not refused, so the test "
                  "cannot tell whether they were read",
                  g_case);
    }

    /* (c) a newer header whose unknown tail is zero: accepted, the tail
     * left as it is. */
    snprintf(g_case, sizeof g_case, "%s, struct_size %u (newer)", v->what,
             newer);
    as_caller(v, newer);
    check_same(v, base, base_msg);
    if (dc_test_failed)
        return;
    CHECK_EQ(size_now(), newer);
    CHECK_MSG(zero_from(full, newer) && sentinel_from(newer, end),
              "%s: the unknown tail was written", g_case);
    if (v->output && v->succeeds)
        CHECK_MSG(!sentinel_from(sizeof(uint32_t), full),
                  "%s: nothing written", g_case);
}

#define VERSIONS(...)                                                          \
    do {                                                                       \
        const vcase v_ = {__VA_ARGS__};                                        \
        check_versions(&v_);                                                   \
        if (dc_test_failed) {                                                  \
            fprintf(stderr, "  in: %s\n", g_case);                             \
            return;                                                            \
        }                                                                      \
    } while (0)

/* What a call needs besides its struct. */
typedef struct env {
    dcptopk_context *ctx;
    dcptopk_merge_config c;
    dcptopk_group *g;
    dcptopk_group_workspace *gw;
    dcptopk_cache *cache;
} env;

static int32_t g_ids[64];

/* --------------------------------------------------------------- outputs */

static dcptopk_result call_setting(void *s, void *e)
{
    (void)e;
    return keep(dcptopk_setting_get(0, s), dcptopk_last_error(NULL));
}

TEST(versions_setting)
{
    const dcptopk_setting init = DCPTOPK_SETTING_INIT;
    VERSIONS("out", &init, sizeof init, END(dcptopk_setting, source), 1, 1, 0,
             call_setting, NULL);
}

static dcptopk_result call_env_info(void *s, void *e)
{
    (void)e;
    return keep(dcptopk_env_info_get(s), dcptopk_last_error(NULL));
}

TEST(versions_env_info)
{
    static const dcptopk_env_info init = DCPTOPK_ENV_INFO_INIT;
    VERSIONS("out", &init, sizeof init, END(dcptopk_env_info, cache_why), 1,
             1, 0, call_env_info, NULL);
}

static dcptopk_result call_warmup_keys(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_warmup_keys(x->ctx, NULL, 0, NULL, NULL, s),
                dcptopk_last_error(x->ctx));
}

/* Without a config dcptopk_warmup stops after its stats check. */
static dcptopk_result call_warmup(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_warmup(x->ctx, NULL, NULL, NULL, s),
                dcptopk_last_error(x->ctx));
}

/* The group warmup's kernels need a compile: refusals only. */
static dcptopk_result call_group_warmup(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_group_warmup(x->gw, NULL, NULL, s),
                dcptopk_last_error(x->ctx));
}

static dcptopk_result call_context_stats(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_context_stats_get(x->ctx, s),
                dcptopk_last_error(x->ctx));
}

/* A one-rank group on a context without a device, and a group workspace
 * made by hand on it (as test_dist does): the merge's checks read only its
 * config, and rows = 0 returns before any launch. */
static int host_group(env *x)
{
    if (!(x->ctx = host_ctx_create()))
        return 0;
    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    if (dcptopk_group_create(x->ctx, &gc, &x->g))
        return 0;
    if (!(x->gw = calloc(1, sizeof *x->gw)))
        return 0;
    x->c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    x->c.world_size = 1;
    x->gw->g = x->g;
    x->gw->ctx = x->ctx;
    x->gw->c = x->c;
    x->gw->max_rows = 16;
    x->gw->row_words = dcptopk_packed_row_words(x->c.local_topk);
    return 1;
}

static void host_group_free(env *x)
{
    free(x->gw);
    dcptopk_group_destroy(x->g);
    dcptopk_context_destroy(x->ctx);
}

TEST(versions_warmup_stats)
{
    env x = {0};
    CHECK_MSG(host_group(&x), "%s", dcptopk_last_error(x.ctx));
    const dcptopk_warmup_stats init = DCPTOPK_WARMUP_STATS_INIT;
    const size_t min = END(dcptopk_warmup_stats, total_ms);
    VERSIONS("stats", &init, sizeof init, min, 1, 1, 0, call_warmup_keys, &x);
    VERSIONS("stats", &init, sizeof init, min, 1, 0, 0, call_warmup, &x);
    VERSIONS("stats", &init, sizeof init, min, 1, 0, 1, call_group_warmup,
             &x);
    host_group_free(&x);
}

TEST(versions_context_stats)
{
    env x = {.ctx = host_ctx_create()};
    CHECK(x.ctx);
    const dcptopk_context_stats init = DCPTOPK_CONTEXT_STATS_INIT;
    VERSIONS("out", &init, sizeof init, END(dcptopk_context_stats, modules),
             1, 1, 0, call_context_stats, &x);
    dcptopk_context_destroy(x.ctx);
}

static dcptopk_result call_workspace_layout(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_workspace_layout_get(&x->c, 16, s),
                dcptopk_last_error(NULL));
}

TEST(versions_workspace_layout)
{
    env x = {0};
    x.c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    const dcptopk_workspace_layout init = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    VERSIONS("out", &init, sizeof init,
             END(dcptopk_workspace_layout, flags_bytes), 1, 1, 0,
             call_workspace_layout, &x);
}

static const char *launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

static void clear_launcher_env(void)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0];
         i++)
        unsetenv(launcher_vars[i]);
}

static dcptopk_result call_launch_env(void *s, void *e)
{
    (void)e;
    return keep(dcptopk_launch_env_get(s), dcptopk_last_error(NULL));
}

TEST(versions_launch_env)
{
    clear_launcher_env();
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    const dcptopk_launch_env init = DCPTOPK_LAUNCH_ENV_INIT;
    VERSIONS("out", &init, sizeof init, END(dcptopk_launch_env, source), 1, 1,
             0, call_launch_env, NULL);
    clear_launcher_env();
}

static dcptopk_result call_selftest(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_selftest(x->ctx, &x->c, 1, 7, s),
                dcptopk_last_error(x->ctx));
}

/* Without a device the group selftest fails at its workspace, after it
 * zeroed the report. */
static dcptopk_result call_selftest_group(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_selftest_group(x->g, &x->c, 1, 1, 7, s),
                dcptopk_last_error(x->ctx));
}

TEST(versions_selftest_report)
{
    env x = {0};
    CHECK_MSG(host_group(&x), "%s", dcptopk_last_error(x.ctx));
    const dcptopk_selftest_report init = DCPTOPK_SELFTEST_REPORT_INIT;
    const size_t min = END(dcptopk_selftest_report, summary);
    VERSIONS("out", &init, sizeof init, min, 1, 1, 0, call_selftest, &x);
    /* The base must be the group path's own failure, not success. */
    VERSIONS("out", &init, sizeof init, min, 1, 0, 0, call_selftest_group,
             &x);
    host_group_free(&x);
}

static dcptopk_result call_cache_stats(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_cache_stats_get(x->cache, s),
                dcptopk_cache_last_error(x->cache));
}

TEST(versions_cache_stats)
{
    char dir[] = "/tmp/dcptopk-structs-XXXXXX", path[64];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/c.sqlite", dir);
    env x = {0};
    CHECK_OK(dcptopk_cache_open(path, 0, &x.cache));
    const dcptopk_cache_stats init = DCPTOPK_CACHE_STATS_INIT;
    const vcase v = {"out", &init, sizeof init,
                     END(dcptopk_cache_stats, claims), 1, 1, 0,
                     call_cache_stats, &x};
    check_versions(&v);
    dcptopk_cache_close(x.cache);
    unlink(path);
    char side[80];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    rmdir(dir);
    if (dc_test_failed)
        fprintf(stderr, "  in: %s\n", g_case);
}

/* ---------------------------------------------------------------- inputs */

static dcptopk_result call_context_config(void *s, void *e)
{
    (void)e;
    dcptopk_context *ctx = NULL;
    dcptopk_result r = keep(dcptopk_context_create(s, &ctx),
                            dcptopk_last_error(NULL));
    dcptopk_context_destroy(ctx);
    return r;
}

TEST(versions_context_config)
{
    dcptopk_context_config init = DCPTOPK_CONTEXT_CONFIG_INIT;
    init.device = -1;
    init.arch = "sm_90a";
    init.cache_mode = DCPTOPK_CACHE_OFF;
    VERSIONS("config", &init, sizeof init,
             END(dcptopk_context_config, strict), 0, 1, 0,
             call_context_config, NULL);
}

static dcptopk_result call_merge_config(void *s, void *e)
{
    (void)e;
    return keep(dcptopk_merge_config_check(s), dcptopk_last_error(NULL));
}

TEST(versions_merge_config)
{
    const dcptopk_merge_config init = DCPTOPK_MERGE_CONFIG_INIT;
    VERSIONS("config", &init, sizeof init, END(dcptopk_merge_config, exact),
             0, 1, 0, call_merge_config, NULL);
}

static dcptopk_result call_pack(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_pack(x->ctx, &x->c, s), dcptopk_last_error(x->ctx));
}

static dcptopk_result call_pack_indices(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_pack_indices(x->ctx, &x->c, s),
                dcptopk_last_error(x->ctx));
}

static dcptopk_result call_ref_pack(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_ref_pack(&x->c, s), dcptopk_last_error(NULL));
}

static dcptopk_result call_ref_pack_indices(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_ref_pack_indices(&x->c, s), dcptopk_last_error(NULL));
}

TEST(versions_pack_args)
{
    env x = {.ctx = host_ctx_create()};
    CHECK(x.ctx);
    x.c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    dcptopk_pack_args init = DCPTOPK_PACK_ARGS_INIT;
    init.logits_stride = 8;
    init.max_local_len = 8;
    const size_t min = END(dcptopk_pack_args, stream);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_pack, &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_ref_pack, &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_ref_pack_indices,
             &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_pack_indices,
             &x);
    dcptopk_context_destroy(x.ctx);
}

static dcptopk_result call_select(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_select(x->ctx, &x->c, NULL, s),
                dcptopk_last_error(x->ctx));
}

static dcptopk_result call_ref_select(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_ref_select(&x->c, s, NULL), dcptopk_last_error(NULL));
}

/* rows = 0: the row index is refused after the struct was read. */
static dcptopk_result call_ref_rescue_row(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_ref_rescue_row(&x->c, s, 0, 0, NULL),
                dcptopk_last_error(NULL));
}

TEST(versions_select_args)
{
    env x = {.ctx = host_ctx_create()};
    CHECK(x.ctx);
    x.c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    x.c.exact = 0;
    dcptopk_select_args init = DCPTOPK_SELECT_ARGS_INIT;
    init.ids_out = g_ids;
    init.logits_stride = 8; /* read in exact mode */
    init.max_local_len = 8;
    const size_t min = END(dcptopk_select_args, stream);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_select, &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_ref_select, &x);
    x.c.exact = 1;
    VERSIONS("args", &init, sizeof init, min, 0, 0, 0, call_ref_rescue_row,
             &x);
    dcptopk_context_destroy(x.ctx);
}

/* Without a workspace the call stops at ws, after the args were read. */
static dcptopk_result call_node_pairs(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_node_pairs(x->ctx, &x->c, NULL, s),
                dcptopk_last_error(x->ctx));
}

TEST(versions_node_pairs_args)
{
    env x = {.ctx = host_ctx_create()};
    CHECK(x.ctx);
    x.c = (dcptopk_merge_config)DCPTOPK_MERGE_CONFIG_INIT;
    x.c.world_size = 4;
    dcptopk_node_pairs_args init = DCPTOPK_NODE_PAIRS_ARGS_INIT;
    init.world_size = 8;
    VERSIONS("args", &init, sizeof init, END(dcptopk_node_pairs_args, stream),
             0, 0, 0, call_node_pairs, &x);
    CHECK_CONTAINS(g_msg, "ws is NULL");
    dcptopk_context_destroy(x.ctx);
}

static dcptopk_result call_pair_select(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_pair_select(x->ctx, &x->c, s),
                dcptopk_last_error(x->ctx));
}

static dcptopk_result call_pair_select_nodes(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_pair_select_nodes(x->ctx, &x->c, 2, s),
                dcptopk_last_error(x->ctx));
}

static dcptopk_result call_ref_pair_select(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_ref_pair_select(&x->c, s), dcptopk_last_error(NULL));
}

static dcptopk_result call_pair_pack(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_pair_pack(x->ctx, &x->c, s),
                dcptopk_last_error(x->ctx));
}

static dcptopk_result call_ref_pair_pack(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_ref_pair_pack(&x->c, s), dcptopk_last_error(NULL));
}

static int pair_env(env *x)
{
    x->ctx = host_ctx_create();
    return x->ctx &&
           !dcptopk_merge_config_named("deepseek-v3.2-dcp8-pair", &x->c);
}

TEST(versions_pair_select_args)
{
    env x = {0};
    CHECK_MSG(pair_env(&x), "%s", dcptopk_last_error(NULL));
    dcptopk_pair_select_args init = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    init.ids_out = g_ids;
    const size_t min = END(dcptopk_pair_select_args, stream);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_pair_select, &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_pair_select_nodes,
             &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_ref_pair_select,
             &x);
    dcptopk_context_destroy(x.ctx);
}

TEST(versions_pair_pack_args)
{
    env x = {0};
    CHECK_MSG(pair_env(&x), "%s", dcptopk_last_error(NULL));
    dcptopk_pair_pack_args init = DCPTOPK_PAIR_PACK_ARGS_INIT;
    init.logits_stride = 1;
    const size_t min = END(dcptopk_pair_pack_args, stream);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_pair_pack, &x);
    VERSIONS("args", &init, sizeof init, min, 0, 1, 0, call_ref_pair_pack,
             &x);
    dcptopk_context_destroy(x.ctx);
}

static dcptopk_result call_group_create(void *s, void *e)
{
    env *x = e;
    dcptopk_group *g = NULL;
    dcptopk_result r = keep(dcptopk_group_create(x->ctx, s, &g),
                            dcptopk_last_error(x->ctx));
    dcptopk_group_destroy(g);
    return r;
}

/* Without launcher variables the call stops there, after its base. */
static dcptopk_result call_group_from_env(void *s, void *e)
{
    env *x = e;
    dcptopk_group *g = NULL;
    dcptopk_result r = keep(dcptopk_group_create_from_env(x->ctx, "/tmp", s,
                                                          &g),
                            dcptopk_last_error(x->ctx));
    dcptopk_group_destroy(g);
    return r;
}

TEST(versions_group_config)
{
    clear_launcher_env();
    env x = {.ctx = host_ctx_create()};
    CHECK(x.ctx);
    dcptopk_group_config init = DCPTOPK_GROUP_CONFIG_INIT;
    init.rank = 0;
    init.world_size = 1;
    const size_t min = END(dcptopk_group_config, timeout_ms);
    VERSIONS("config", &init, sizeof init, min, 0, 1, 0, call_group_create,
             &x);
    VERSIONS("base", &init, sizeof init, min, 0, 0, 0, call_group_from_env,
             &x);
    CHECK_CONTAINS(g_msg, "no launcher variables");
    dcptopk_context_destroy(x.ctx);
}

static dcptopk_result call_group_merge(void *s, void *e)
{
    env *x = e;
    return keep(dcptopk_group_merge(x->gw, s), dcptopk_last_error(x->ctx));
}

TEST(versions_group_merge_args)
{
    env x = {0};
    CHECK_MSG(host_group(&x), "%s", dcptopk_last_error(x.ctx));
    const dcptopk_group_merge_args init = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    VERSIONS("args", &init, sizeof init,
             END(dcptopk_group_merge_args, stream), 0, 1, 0,
             call_group_merge, &x);
    host_group_free(&x);
}
