/* test_review_checks.c - argument checks added by a code review of the
 * kernels and launchers (the kernel invariants it verified are listed in
 * docs/KERNELS.md): inputs the checks used to accept although a launcher or
 * a kernel cannot handle them. The GPU entry points are called with a
 * context without a device: a refused call fails in its checks, an accepted
 * one reaches the launch and fails with DCPTOPK_NO_DEVICE, so every case
 * fails cleanly (no crash) without the fix. No pointer is dereferenced. */
#include <stdint.h>
#include <string.h>

#include "dcptopk.h"
#include "gpu_util.h"
#include "harness.h"

/* Aligned dummy device addresses: never dereferenced (the calls fail first). */
#define FAKE(type, addr) ((type)(uintptr_t)(addr))

#define EXPECT_CODE(ctx, expr, code, needle)                                   \
    do {                                                                       \
        CHECK_EQ((int)(expr), (int)(code));                                    \
        CHECK_CONTAINS(dcptopk_last_error(ctx), needle);                       \
    } while (0)

/* rows * stride used to overflow int64 in the launchers' and kernels' index
 * arithmetic (t * stride, t < 2^31, stride <= 2^40): a strided buffer must
 * now span at most 2^50 bytes. */
TEST(strided_buffers_fit_2_pow_50_bytes)
{
    dcptopk_context *ctx = host_ctx_create();
    if (!ctx)
        SKIP("no CPU context: %s", dcptopk_last_error(NULL));
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT; /* K 2048, N 384 */

    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.logits = FAKE(const uint16_t *, 0x10000000);
    p.logits_stride = INT64_C(1) << 40;
    p.max_local_len = 64;
    p.row_ends = FAKE(const int32_t *, 0x20000000);
    p.local_ids = FAKE(const int32_t *, 0x30000000);
    p.rows = 70000; /* > 65535: pack_indices' second launch computed t0 * stride */
    p.out = FAKE(int32_t *, 0x40000000);
    EXPECT_CODE(ctx, dcptopk_pack_indices(ctx, &c, &p),
                DCPTOPK_INVALID_ARGUMENT,
                "args->rows = 70000 with args->logits_stride = 1099511627776");
    EXPECT_CODE(NULL, dcptopk_ref_pack_indices(&c, &p),
                DCPTOPK_INVALID_ARGUMENT, "more than 2^50 bytes");
    p.logits_stride = 64;
    p.local_ids_stride = INT64_C(1) << 40;
    EXPECT_CODE(ctx, dcptopk_pack_indices(ctx, &c, &p),
                DCPTOPK_INVALID_ARGUMENT,
                "args->rows = 70000 with args->local_ids_stride");

    dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
    s.gathered = FAKE(const int32_t *, 0x10000000);
    s.rows = 1 << 20;
    s.ids_out = FAKE(int32_t *, 0x20000000);
    s.ids_out_stride = INT64_C(1) << 40;
    EXPECT_CODE(ctx, dcptopk_select(ctx, &c, NULL, &s),
                DCPTOPK_INVALID_ARGUMENT,
                "args->rows = 1048576 with args->ids_out_stride");
    s.ids_out_stride = 0;
    dcptopk_merge_config b = c;
    b.block_size = 64;
    s.rows_map.req_id = FAKE(const int32_t *, 0x30000000);
    s.rows_map.block_table = FAKE(const int32_t *, 0x40000000);
    s.rows_map.block_table_stride = INT64_C(1) << 40;
    s.rows_map.block_table_cols = 4;
    s.rows_map.num_reqs = 1 << 20;
    s.rows_map.stride_rows = 64;
    s.rows_map.rows_out = FAKE(int32_t *, 0x50000000);
    s.rows_map.counts_out = FAKE(int32_t *, 0x60000000);
    EXPECT_CODE(ctx, dcptopk_select(ctx, &b, NULL, &s),
                DCPTOPK_INVALID_ARGUMENT,
                "args->rows_map.num_reqs = 1048576 with "
                "args->rows_map.block_table_stride");
    s.rows_map.block_table_stride = 4;
    s.rows_map.rows_out_stride = INT64_C(1) << 40;
    EXPECT_CODE(ctx, dcptopk_select(ctx, &b, NULL, &s),
                DCPTOPK_INVALID_ARGUMENT,
                "args->rows = 1048576 with args->rows_map.rows_out_stride");

    dcptopk_merge_config pc = DCPTOPK_MERGE_CONFIG_INIT;
    pc.kind = DCPTOPK_MERGE_PAIR;
    pc.local_topk = 0;
    dcptopk_pair_pack_args pp = DCPTOPK_PAIR_PACK_ARGS_INIT;
    pp.logits = FAKE(const float *, 0x10000000);
    pp.logits_stride = INT64_C(1) << 40;
    pp.local_ids = FAKE(const int32_t *, 0x20000000);
    pp.rows = 1 << 20;
    pp.out = FAKE(int32_t *, 0x30000000);
    EXPECT_CODE(ctx, dcptopk_pair_pack(ctx, &pc, &pp), DCPTOPK_INVALID_ARGUMENT,
                "args->rows = 1048576 with args->logits_stride");
    dcptopk_context_destroy(ctx);
}

/* A stride above 2^40 was refused with a message about something else. */
TEST(stride_above_2_pow_40_is_named_as_such)
{
    _Alignas(16) uint16_t logits[64] = {0};
    int32_t ends[1] = {64}, out[66];
    dcptopk_merge_config small = DCPTOPK_MERGE_CONFIG_INIT;
    small.topk = 128;
    small.local_topk = 64;
    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.logits = logits;
    p.logits_stride = (INT64_C(1) << 40) + 8; /* a positive multiple of 8 */
    p.max_local_len = 64;
    p.row_ends = ends;
    p.rows = 1;
    p.out = out;
    EXPECT_CODE(NULL, dcptopk_ref_pack(&small, &p), DCPTOPK_INVALID_ARGUMENT,
                "args->logits_stride = 1099511627784: unreasonably large "
                "(> 2^40)");

    int32_t gathered[66] = {0}, ids[128], req[1] = {0}, table[4] = {0},
            rows_out[128], cnt[1];
    dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
    s.gathered = gathered;
    s.rows = 1;
    s.ids_out = ids;
    s.rows_map.req_id = req;
    s.rows_map.block_table = table;
    s.rows_map.block_table_stride = (INT64_C(1) << 40) + 1;
    s.rows_map.block_table_cols = 4;
    s.rows_map.num_reqs = 1;
    s.rows_map.stride_rows = 16;
    s.rows_map.rows_out = rows_out;
    s.rows_map.counts_out = cnt;
    small.block_size = 16;
    small.world_size = 1;
    EXPECT_CODE(NULL, dcptopk_ref_select(&small, &s, NULL),
                DCPTOPK_INVALID_ARGUMENT,
                "args->rows_map.block_table_stride = 1099511627777: "
                "unreasonably large (> 2^40)");
}

/* The exact select launched the select and only then found that the push
 * grid (2 CTAs per row past 65536 columns) exceeds 2^31 - 1 CTAs: the call
 * failed half-launched. The check now refuses it before any launch, and the
 * reference refuses the same inputs (same checks). */
TEST(push_grid_is_checked_before_any_launch)
{
    dcptopk_context *ctx = host_ctx_create();
    if (!ctx)
        SKIP("no CPU context: %s", dcptopk_last_error(NULL));
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.exact = 1;
    dcptopk_select_args s = DCPTOPK_SELECT_ARGS_INIT;
    s.gathered = FAKE(const int32_t *, 0x10000000);
    s.rows = (INT64_C(1) << 30) + 1;
    s.ids_out = FAKE(int32_t *, 0x20000000);
    s.logits = FAKE(const uint16_t *, 0x30000000);
    s.logits_stride = 1 << 17;
    s.max_local_len = 1 << 17;
    s.row_ends = FAKE(const int32_t *, 0x40000000);
    EXPECT_CODE(ctx, dcptopk_select(ctx, &c, NULL, &s), DCPTOPK_UNSUPPORTED,
                "args->rows = 1073741825: with args->max_local_len = 131072");
    EXPECT_CODE(NULL, dcptopk_ref_select(&c, &s, NULL), DCPTOPK_UNSUPPORTED,
                "2 CTAs per row");
    /* 65536 columns: one CTA per row, the grid fits. */
    s.max_local_len = 1 << 16;
    CHECK_EQ((int)dcptopk_select(ctx, &c, NULL, &s), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "ws is NULL");
    s.max_local_len = 1 << 17;

    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.logits = s.logits;
    p.logits_stride = s.logits_stride;
    p.max_local_len = s.max_local_len;
    p.row_ends = s.row_ends;
    p.rows = s.rows;
    p.out = FAKE(int32_t *, 0x50000000);
    EXPECT_CODE(ctx, dcptopk_pack(ctx, &c, &p), DCPTOPK_UNSUPPORTED,
                "args->rows = 1073741825");
    EXPECT_CODE(NULL, dcptopk_ref_pack(&c, &p), DCPTOPK_UNSUPPORTED,
                "exceed the grid limit");
    dcptopk_context_destroy(ctx);
}

/* "ids_out and rows_out both NULL" was refused by dcptopk_pair_select only
 * (kernels/pair/pair.c): the reference accepted it. Both refuse it now (check.c). */
TEST(pair_select_without_output_is_refused_by_the_reference_too)
{
    int32_t cand[2 * 128 * 2] = {0};
    dcptopk_merge_config pc = DCPTOPK_MERGE_CONFIG_INIT;
    pc.kind = DCPTOPK_MERGE_PAIR;
    pc.topk = 128;
    pc.local_topk = 0;
    pc.world_size = 2;
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    a.candidates = cand;
    a.rows = 1;
    EXPECT_CODE(NULL, dcptopk_ref_pair_select(&pc, &a),
                DCPTOPK_INVALID_ARGUMENT,
                "args->ids_out and args->rows_map.rows_out are both NULL");
    dcptopk_context *ctx = host_ctx_create();
    if (!ctx)
        SKIP("no CPU context: %s", dcptopk_last_error(NULL));
    EXPECT_CODE(ctx, dcptopk_pair_select(ctx, &pc, &a),
                DCPTOPK_INVALID_ARGUMENT,
                "args->ids_out and args->rows_map.rows_out are both NULL");
    dcptopk_context_destroy(ctx);
}
