/* test_exchange_push.c - the push exchange without a GPU: its key compiles
 * with NVRTC for every world size and the PTX carries the system-scope
 * release and acquire the protocol relies on (docs/PROTOCOL.md); the ABI
 * header's layout asserts hold in C (this file compiles them) and in the
 * template (the compile); the launcher names each bad argument, and a good
 * one reaches the launch (DCPTOPK_NO_DEVICE with a context without a device).
 * No pointer is dereferenced. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "exchange_push.h"
#include "harness.h"
#include "rt.h"

static dcptopk_context *cpu_ctx(void)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = -1;
    cfg.arch = "sm_90a";
    cfg.cache_mode = DCPTOPK_CACHE_OFF;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx) != DCPTOPK_SUCCESS)
        return NULL;
    return ctx;
}

/* Compiles the exchange (settle = 0) or its settle kernel (1) of `w` ranks;
 * returns its PTX (malloc'd) or NULL. */
static char *compile_kernel_ptx(int32_t w, int settle)
{
    dcptopk_key k;
    if (settle)
        dc_exchange_settle_key(w, "sm_90a", &k);
    else
        dc_push_exchange_key(w, "sm_90a", &k);
    if (dcptopk_key_check(&k)) {
        fprintf(stderr, "key check: %s\n", dcptopk_last_error(NULL));
        return NULL;
    }
    dc_unit u;
    char *err = malloc(DC_ERR_LEN);
    char *ptx = NULL;
    dc_compiled c;
    memset(&c, 0, sizeof c);
    if (err && dc_unit_build(NULL, &k, &u) == DCPTOPK_SUCCESS) {
        if (dc_nvrtc_compile(&u, &c, err, DC_ERR_LEN) == DCPTOPK_SUCCESS) {
            ptx = malloc(c.ptx_size + 1);
            if (ptx) {
                memcpy(ptx, c.ptx, c.ptx_size);
                ptx[c.ptx_size] = '\0';
            }
        } else {
            fprintf(stderr, "W=%d: %s\n", w, err);
        }
    } else {
        fprintf(stderr, "W=%d: %s\n", w, dcptopk_last_error(NULL));
    }
    dc_unit_free(&u);
    dc_compiled_free(&c);
    free(err);
    return ptx;
}

static char *compile_ptx(int32_t w) { return compile_kernel_ptx(w, 0); }

TEST(compiles_for_every_world_size)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    static const int32_t ws[] = {1, 2, 3, 4, 8, 16};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        char *ptx = compile_ptx(ws[i]);
        CHECK_MSG(ptx != NULL, "W = %d did not compile", ws[i]);
        /* The entry, the release of the flags, the acquire of the wait, the
         * vector copy, the bounded wait's clock and the arrival's
         * system-scope fence (membar.sys is fence.sc.sys). */
        const char *need[] = {".entry dcptopk_exchange_push",
                              "st.release.sys.global.u64",
                              "ld.acquire.sys.global.u64",
                              "ld.global.nc.v4.u32", "st.global.v4.u32",
                              "%globaltimer", "membar.sys"};
        for (size_t j = 0; j < sizeof need / sizeof need[0]; j++) {
            int found = strstr(ptx, need[j]) != NULL;
            if (!found)
                free(ptx);
            CHECK_MSG(found, "W = %d: PTX lacks \"%s\"", ws[i], need[j]);
        }
        /* Never a trap: a failure must leave the engine's context alive. */
        int trap = strstr(ptx, "trap;") != NULL;
        free(ptx);
        CHECK_MSG(!trap, "W = %d: PTX has a trap", ws[i]);
    }
}

TEST(key_has_world_size_only)
{
    dcptopk_key k;
    dc_push_exchange_key(4, NULL, &k);
    CHECK_EQ(k.kernel, DCPTOPK_KERNEL_EXCHANGE);
    CHECK_EQ(k.world_size, 4);
    CHECK_STR_EQ(k.arch, "sm_90a");
    CHECK_OK(dcptopk_key_check(&k));
    char buf[256];
    dcptopk_key_format(&k, buf, sizeof buf);
    CHECK_STR_EQ(buf, "exchange(world_size=4)@sm_90a");
    k.topk = 2048;
    CHECK_EQ(dcptopk_key_check(&k), DCPTOPK_INVALID_ARGUMENT);
    dc_push_exchange_key(17, NULL, &k);
    CHECK_EQ(dcptopk_key_check(&k), DCPTOPK_INVALID_ARGUMENT);
}

TEST(geometry)
{
    CHECK_EQ(dc_push_exchange_gathered_bytes(8, 64, 396), 2ull * 8 * 64 * 396 * 4);
    CHECK_EQ(dc_push_exchange_flags_bytes(8), 128);
    CHECK_EQ(dc_exchange_slot_words(1, 3, 8, 64, 396), (int64_t)(8 + 3) * 64 * 396);
    CHECK_EQ(dc_exchange_flag_index(1, 3, 8), 11);
    CHECK_EQ(dc_push_exchange_parity(0x10000, 7, 8, 64, 396),
             0x10000 + 4ull * 8 * 64 * 396);
    CHECK_EQ(dc_push_exchange_parity(0x10000, 6, 8, 64, 396), 0x10000);
}

/* A valid call of W = 4 ranks, rank 1, on fake aligned addresses. */
static dc_push_exchange good(void)
{
    dc_push_exchange x;
    memset(&x, 0, sizeof x);
    x.world_size = 4;
    x.rank = 1;
    x.rows = 64;
    x.max_rows = 64;
    x.row_words = 396;
    x.src = (const int32_t *)(uintptr_t)0x7000000000ull;
    for (int r = 0; r < 4; r++) {
        x.peer_gathered[r] = 0x1000000000ull * (uint64_t)(r + 1);
        x.peer_flags[r] = 0x1000000000ull * (uint64_t)(r + 1) + 0x800000000ull;
    }
    x.ctl = 0x9000000000ull;
    x.timeout_ns = 1000000;
    return x;
}

#define EXPECT_BAD(field_expr, needle)                                         \
    do {                                                                       \
        dc_push_exchange x = good();                                           \
        field_expr;                                                            \
        CHECK_EQ(dc_push_exchange_launch(ctx, &x, NULL),                       \
                 DCPTOPK_INVALID_ARGUMENT);                                    \
        CHECK_CONTAINS(dcptopk_last_error(ctx), needle);                       \
    } while (0)

TEST(launcher_names_bad_arguments)
{
    dcptopk_context *ctx = cpu_ctx();
    CHECK(ctx != NULL);
    CHECK_EQ(dc_push_exchange_launch(NULL, NULL, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_EQ(dc_push_exchange_launch(ctx, NULL, NULL), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "x is NULL");
    EXPECT_BAD(x.world_size = 0, "x->world_size = 0");
    EXPECT_BAD(x.world_size = 17, "x->world_size = 17");
    EXPECT_BAD(x.rank = 4, "x->rank = 4");
    EXPECT_BAD(x.rank = -1, "x->rank = -1");
    EXPECT_BAD(x.max_rows = 0, "x->max_rows = 0");
    EXPECT_BAD(x.rows = 65, "x->rows = 65");
    EXPECT_BAD(x.rows = -1, "x->rows = -1");
    EXPECT_BAD(x.row_words = 0, "x->row_words = 0");
    EXPECT_BAD(x.src = NULL, "x->src");
    EXPECT_BAD(x.src = (const int32_t *)(uintptr_t)0x7000000002ull, "x->src");
    EXPECT_BAD(x.peer_gathered[2] = 0, "x->peer_gathered[2] = 0x0");
    EXPECT_BAD(x.peer_gathered[3] += 4, "x->peer_gathered[3]");
    EXPECT_BAD(x.peer_flags[0] += 4, "x->peer_flags[0]");
    EXPECT_BAD(x.ctl = 0, "x->ctl = 0x0");
    EXPECT_BAD(x.timeout_ns = 0, "x->timeout_ns = 0");
    /* A source inside the own buffer but not a whole own slot: a peer's slot,
     * or a slot shifted by a row. */
    EXPECT_BAD(x.src = (const int32_t *)(uintptr_t)x.peer_gathered[1], "overlaps");
    EXPECT_BAD(x.src = (const int32_t *)(uintptr_t)(x.peer_gathered[1] + 4u *
               (uint64_t)dc_exchange_slot_words(0, 1, 4, 64, 396) + 396 * 4),
               "overlaps");
    dcptopk_context_destroy(ctx);
}

TEST(good_arguments_reach_the_launch)
{
    dcptopk_context *ctx = cpu_ctx();
    CHECK(ctx != NULL);
    dc_push_exchange x = good();
    CHECK_EQ(dc_push_exchange_launch(ctx, &x, NULL), DCPTOPK_NO_DEVICE);
    /* Its own slot of either parity is a valid source (a producer that wrote
     * in place), and so are zero rows with no source. */
    for (int32_t p = 0; p < 2; p++) {
        x.src = (const int32_t *)(uintptr_t)(x.peer_gathered[1] + 4u *
                (uint64_t)dc_exchange_slot_words(p, 1, 4, 64, 396));
        CHECK_EQ(dc_push_exchange_launch(ctx, &x, NULL), DCPTOPK_NO_DEVICE);
    }
    x.rows = 0;
    x.src = NULL;
    CHECK_EQ(dc_push_exchange_launch(ctx, &x, NULL), DCPTOPK_NO_DEVICE);
    dcptopk_context_destroy(ctx);
}

TEST(settle_compiles_for_every_world_size)
{
    unsetenv("DCPTOPK_TEMPLATE_DIR");
    static const int32_t ws[] = {1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        char *ptx = compile_kernel_ptx(ws[i], 1);
        CHECK_MSG(ptx != NULL, "settle W = %d did not compile", ws[i]);
        /* The entry and the 16-byte vector copy (its loads through the
         * non-coherent path: nothing stores into the parity while it runs). */
        const char *need[] = {".entry dcptopk_exchange_settle",
                              "ld.global.nc.v4", "st.global.v4"};
        for (size_t j = 0; j < sizeof need / sizeof need[0]; j++) {
            int found = strstr(ptx, need[j]) != NULL;
            if (!found)
                free(ptx);
            CHECK_MSG(found, "settle W = %d: PTX lacks \"%s\"", ws[i], need[j]);
        }
        /* The settle never traps; the poison step of the same module traps
         * only in the opt-in mode (DCPTOPK_PEER_TIMEOUT_TRAP), behind its
         * parameter. */
        const char *settle = strstr(ptx, ".entry dcptopk_exchange_settle");
        const char *next = settle ? strstr(settle + 1, ".entry ") : NULL;
        const char *trap = settle ? strstr(settle, "trap;") : NULL;
        const int settle_traps = trap && (!next || trap < next);
        const int has_poison = strstr(ptx, ".entry dcptopk_exchange_poison") != NULL;
        free(ptx);
        CHECK_MSG(!settle_traps, "settle W = %d: PTX has a trap", ws[i]);
        CHECK_MSG(has_poison, "settle W = %d: no poison entry", ws[i]);
    }
}

TEST(settle_key_has_world_size_only)
{
    dcptopk_key k;
    dc_exchange_settle_key(4, NULL, &k);
    CHECK_EQ(k.kernel, DCPTOPK_KERNEL_EXCHANGE_SETTLE);
    CHECK_EQ(k.kernel, 9);
    CHECK_EQ(k.world_size, 4);
    CHECK_OK(dcptopk_key_check(&k));
    char buf[256];
    dcptopk_key_format(&k, buf, sizeof buf);
    CHECK_STR_EQ(buf, "exchange_settle(world_size=4)@sm_90a");
    CHECK_STR_EQ(dcptopk_kernel_name(9), "exchange_settle");
    k.topk = 2048;
    CHECK_EQ(dcptopk_key_check(&k), DCPTOPK_INVALID_ARGUMENT);
    dc_exchange_settle_key(17, NULL, &k);
    CHECK_EQ(dcptopk_key_check(&k), DCPTOPK_INVALID_ARGUMENT);
}

TEST(settle_launcher_names_bad_arguments)
{
    dcptopk_context *ctx = cpu_ctx();
    CHECK(ctx != NULL);
    const uint64_t ctl = 0x9000000000ull, dst = 0xa000000000ull;
    CHECK_EQ(dc_exchange_settle_launch(NULL, 4, ctl, dst, 8, 8, 33, NULL),
             DCPTOPK_INVALID_ARGUMENT);
#define SETTLE_BAD(w, c, d, rows, max_rows, rw, needle)                        \
    do {                                                                       \
        CHECK_EQ(dc_exchange_settle_launch(ctx, w, c, d, rows, max_rows, rw,   \
                                           NULL),                              \
                 DCPTOPK_INVALID_ARGUMENT);                                    \
        CHECK_CONTAINS(dcptopk_last_error(ctx), needle);                       \
    } while (0)
    SETTLE_BAD(0, ctl, dst, 8, 8, 33, "world_size = 0");
    SETTLE_BAD(17, ctl, dst, 8, 8, 33, "world_size = 17");
    SETTLE_BAD(4, 0, dst, 8, 8, 33, "ctl = 0x0");
    SETTLE_BAD(4, ctl + 8, dst, 8, 8, 33, "ctl = 0x");
    SETTLE_BAD(4, ctl, 0, 8, 8, 33, "dst = 0x0");
    SETTLE_BAD(4, ctl, dst + 4, 8, 8, 33, "dst = 0x");
    SETTLE_BAD(4, ctl, dst, 8, 0, 33, "max_rows = 0");
    SETTLE_BAD(4, ctl, dst, 9, 8, 33, "rows = 9");
    SETTLE_BAD(4, ctl, dst, -1, 8, 33, "rows = -1");
    SETTLE_BAD(4, ctl, dst, 8, 8, 0, "row_words = 0");
#undef SETTLE_BAD
    CHECK_EQ(dc_exchange_settle_launch(ctx, 4, ctl, dst, 8, 8, 33, NULL),
             DCPTOPK_NO_DEVICE);
    dcptopk_context_destroy(ctx);
}
