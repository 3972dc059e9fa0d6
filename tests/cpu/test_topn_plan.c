/* test_topn_plan.c - the local top-N's split of a row over CTAs against the
 * device's shared memory: the fewest CTAs that hold a row, the automatic
 * choice that splits further for parallelism only while the split still
 * fits, and the refusal that names max_local_len when nothing fits. The
 * expected variants are worked out by hand from the shared-memory layout
 * (topn_abi.h: 9344 bytes of state for one CTA, 34048 / 66816 / 132352 for
 * clusters of 2 / 4 / 8, then 2.25 bytes a column; and the push's 4224
 * static bytes, since one plan serves both kernels), not by the plan. */
#include "dcptopk.h"
#include "harness.h"
#include "topn.h"

enum {
    H200 = 232448, /* 227 KiB opt-in a block (sm_90, sm_100) */
    SM120 = 101376 /* 99 KiB (sm_120-class GPUs) */
};

TEST(capacity_without_a_device)
{
    /* The template's bound alone: 65536 columns a CTA. */
    CHECK_EQ(dc_topn_capacity_variant(0, 0), 0);
    CHECK_EQ(dc_topn_capacity_variant(65536, 0), 0);
    CHECK_EQ(dc_topn_capacity_variant(65537, 0), 1);
    CHECK_EQ(dc_topn_capacity_variant(131072, 0), 1);
    /* Past 2^17 only 2^17 columns are kept. */
    CHECK_EQ(dc_topn_capacity_variant(1 << 20, 0), 1);
    CHECK_EQ(dc_topn_capacity_variant(-5, 0), 0);
}

TEST(capacity_on_a_large_device)
{
    /* 65536 columns on one CTA: 161024 bytes with the push's; on two, 185728. */
    CHECK_EQ(dc_topn_capacity_variant(65536, H200), 0);
    CHECK_EQ(dc_topn_capacity_variant(131072, H200), 1);
}

TEST(capacity_on_a_small_device)
{
    /* One CTA holds 39024 columns (101372 bytes), not 39032 (101390). */
    CHECK_EQ(dc_topn_capacity_variant(16384, SM120), 0);
    CHECK_EQ(dc_topn_capacity_variant(39024, SM120), 0);
    CHECK_EQ(dc_topn_capacity_variant(39025, SM120), 1);
    /* Two hold 28040 columns each (101362 bytes); four only 13480 each, the
     * larger state eating what the smaller chunks save, and eight CTAs'
     * state alone is 132352 bytes: past 56080 columns nothing fits. */
    CHECK_EQ(dc_topn_capacity_variant(56080, SM120), 1);
    CHECK_EQ(dc_topn_capacity_variant(56081, SM120), -1);
    CHECK_EQ(dc_topn_capacity_variant(131072, SM120), -1);
    /* In between (150000 bytes): 2^17 columns on four CTAs, 144768 bytes. */
    CHECK_EQ(dc_topn_capacity_variant(131072, 150000), 2);
}

TEST(automatic_choice_stays_within_the_device)
{
    /* A large device: as without one (decode rows split for parallelism). */
    CHECK_EQ(dc_topn_variant(6710, 16384, 132, H200), 0);
    CHECK_EQ(dc_topn_variant(8, 131072, 132, H200), 2);
    CHECK_EQ(dc_topn_variant(8, 131072, 132, 0), 2);
    CHECK_EQ(dc_topn_variant(64, 131072, 132, H200), 1);
    CHECK_EQ(dc_topn_variant(64, 131072, 132, 0), 1);
    /* Where two CTAs of 65536 columns do not fit, 64 rows take four. */
    CHECK_EQ(dc_topn_variant(64, 131072, 132, 150000), 2);
    /* A small device: 65536 columns fit no split there, though without a
     * device one split, over two CTAs, is the choice. */
    CHECK_EQ(dc_topn_variant(8, 65536, 132, 0), 1);
    CHECK_EQ(dc_topn_variant(8, 65536, 132, SM120), -1);
    /* 8 rows of 40000 columns: two CTAs hold them; four, of 10000, would be
     * below the 32768 columns worth a split. */
    CHECK_EQ(dc_topn_variant(8, 40000, 132, SM120), 1);
    /* Prefill rows stay on one CTA. */
    CHECK_EQ(dc_topn_variant(6710, 16384, 132, SM120), 0);
    CHECK_EQ(dc_topn_variant(6710, 131072, 132, SM120), -1);
}

TEST(unfit_row_is_named)
{
    CHECK_EQ(dc_topn_unfit(NULL, 131072, SM120), DCPTOPK_UNSUPPORTED);
    const char *e = dcptopk_last_error(NULL);
    CHECK_CONTAINS(e, "args->max_local_len = 131072");
    CHECK_CONTAINS(e, "101376 bytes a block");
}
