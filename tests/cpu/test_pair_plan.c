/* test_pair_plan.c - the pair select's launch geometry (pair_abi.h) against
 * the targets' shared memory: where the gids stay on chip, what a block then
 * asks for, and that it still fits the CTAs an SM the launch bounds count
 * on. The expected bytes are worked out by hand from the layout (16640
 * bytes of state for one CTA: two 8 KiB histograms and 256 bytes; then 4
 * bytes a candidate of keys and 4 of gids), not by the macros under test. */
#include "dcptopk.h"
#include "harness.h"
#include "pair_abi.h"

enum {
    BIG = 232448,  /* 227 KiB opt-in a block (sm_90, sm_100) */
    SM_BIG = 233472, /* 228 KiB an SM there */
    SM120 = 101376 /* 99 KiB a block (sm_120-class GPUs) */
};

TEST(gids_on_chip_only_on_large_targets)
{
    /* Whether a row keeps its gids on chip (DC_PAIR_SELECT_SMEM_GIDS). */
    static const struct { int32_t w, k, c, arch, want; } rule[] = {
        /* The decode shape (W = 8, K = 2048): on sm_90 and sm_100, not on
         * sm_120 nor on a target not named. */
        {8, 2048, 1, 90, 1}, {8, 2048, 1, 100, 1}, {8, 2048, 1, 120, 0},
        {8, 2048, 1, 103, 0}, {8, 2048, 1, 121, 0},
        /* The rule's edges on sm_90: 8160 and 12320 candidates off chip,
         * 8192 and 12288 on it; a row of 32768 has no room. */
        {5, 1632, 1, 90, 0}, {16, 512, 1, 90, 1}, {6, 2048, 1, 90, 1},
        {11, 1120, 1, 90, 0}, {16, 2048, 1, 90, 0},
        /* A split row's CTAs keep theirs on every target. */
        {8, 2048, 2, 120, 1},
    };
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++)
        CHECK_MSG(DC_PAIR_SELECT_SMEM_GIDS(rule[i].w, rule[i].k, rule[i].c, rule[i].arch, 0) ==
                      rule[i].want,
                  "W=%d K=%d C=%d sm_%d: gids on chip should be %d", rule[i].w, rule[i].k,
                  rule[i].c, rule[i].arch, rule[i].want);
    /* What the decode shape's block then asks for: 16640 + 65536 + 65536
     * bytes with the gids, 16640 + 65536 without. */
    CHECK_EQ(DC_PAIR_SELECT_SMEM_BYTES(8, 2048, 1, 90, 0), 147712);
    CHECK_EQ(DC_PAIR_SELECT_SMEM_BYTES(8, 2048, 1, 120, 0), 82176);
}

/* Every one-CTA row of W = 1..16 ranks and K = 32..4096 (multiples of 32):
 * on sm_90 / sm_100 a block fits 227 KiB, and the rows that run two
 * 512-thread CTAs an SM still fit two; on sm_120 every row of at most
 * 16384 candidates (every named pair config) fits 99 KiB, as before the
 * gids moved on chip. */
TEST(every_row_fits_its_target)
{
    for (int32_t w = 1; w <= 16; w++)
        for (int32_t k = 32; k <= 4096; k += 32) {
            const long long n = (long long)w * k;
            const long long big = DC_PAIR_SELECT_SMEM_BYTES(w, k, 1, 90, 0);
            const long long small = DC_PAIR_SELECT_SMEM_BYTES(w, k, 1, 120, 0);
            if (n <= 32768)
                CHECK_MSG(big <= BIG, "W=%d K=%d: %lld bytes on sm_90", w, k, big);
            if (DC_PAIR_SELECT_THREADS(w, k, 1, 0) == 512 && n <= 16384 &&
                DC_PAIR_SELECT_SMEM_GIDS(w, k, 1, 90, 0))
                CHECK_MSG(2 * (big + 1024) <= SM_BIG,
                          "W=%d K=%d: two CTAs of %lld bytes exceed an SM", w, k, big);
            if (n <= 16384) {
                CHECK_MSG(small <= SM120, "W=%d K=%d: %lld bytes on sm_120", w, k, small);
                CHECK_MSG(small == 16640 + 4 * n, "W=%d K=%d: %lld bytes on sm_120, want %lld",
                          w, k, small, 16640 + 4 * n);
            }
        }
}

/* A row of 16384's two-CTA shape (variant bit 7): 512 threads, the first
 * half's gids on chip on sm_90 / sm_100 (16640 + 65536 + 32768 bytes, two
 * CTAs still fit an SM) and none on sm_120 (16640 + 65536); the one-CTA
 * shape of the same row keeps 1024 threads and all its gids. */
TEST(two_cta_shape_of_a_row_of_16384)
{
    static const struct { int32_t w, k; } rows[] = {{8, 2048}, {16, 1024}, {4, 4096}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const int32_t w = rows[i].w, k = rows[i].k;
        CHECK_EQ(DC_PAIR_SELECT_THREADS(w, k, 1, 1), 512);
        CHECK_EQ(DC_PAIR_SELECT_THREADS(w, k, 1, 0), 1024);
        CHECK(!DC_PAIR_SELECT_SMEM_GIDS(w, k, 1, 90, 1));
        CHECK(DC_PAIR_SELECT_SMEM_GIDS(w, k, 1, 90, 0));
        CHECK_EQ(DC_PAIR_SELECT_GID_CANDS(w, k, 1, 90, 1), 8192);
        CHECK_EQ(DC_PAIR_SELECT_GID_CANDS(w, k, 1, 120, 1), 0);
        CHECK_EQ(DC_PAIR_SELECT_GID_CANDS(w, k, 1, 90, 0), 16384);
        CHECK_EQ(DC_PAIR_SELECT_SMEM_BYTES(w, k, 1, 90, 1), 114944);
        CHECK_EQ(DC_PAIR_SELECT_SMEM_BYTES(w, k, 1, 100, 1), 114944);
        CHECK_EQ(DC_PAIR_SELECT_SMEM_BYTES(w, k, 1, 120, 1), 82176);
        CHECK(2 * (114944 + 1024) <= SM_BIG);
    }
    CHECK_EQ(DC_PAIR_VARIANT(0, 0, 1), 128);
    CHECK_EQ(DC_PAIR_TWO_CTAS(128), 1);
    CHECK_EQ(DC_PAIR_TWO_CTAS(8 | 64), 0);
    CHECK_EQ(DC_PAIR_CLUSTER(128), 1);
    CHECK_EQ(DC_PAIR_SEGMENTS(8, 128), 8);
}

/* Which GPUs take the two-CTA shape: DRAM bytes a cycle an SM of at least
 * 15.5. The figures are the devices' own attributes (memory clock and SM
 * clock in kHz, bus width in bits, SMs). */
TEST(two_cta_shape_follows_dram_bytes_per_sm_cycle)
{
    /* H100 SXM: 3.35 TB/s over 132 SMs at 1.98 GHz, 12.8 bytes a cycle. */
    CHECK(!DC_PAIR_TWO_CTAS_PAY(2619000, 5120, 132, 1980000));
    /* H200: 4.9 TB/s over the same SMs, 18.8 bytes a cycle. */
    CHECK(DC_PAIR_TWO_CTAS_PAY(3201000, 6144, 132, 1980000));
    /* The edge: 15.5 bytes a cycle takes it, a kHz less does not. */
    CHECK(DC_PAIR_TWO_CTAS_PAY(7750, 64, 8, 1000));
    CHECK(!DC_PAIR_TWO_CTAS_PAY(7749, 64, 8, 1000));
    /* A device that does not report a figure keeps the one-CTA shape. */
    CHECK(!DC_PAIR_TWO_CTAS_PAY(0, 6144, 132, 1980000));
    CHECK(!DC_PAIR_TWO_CTAS_PAY(3201000, 0, 132, 1980000));
    CHECK(!DC_PAIR_TWO_CTAS_PAY(3201000, 6144, 0, 1980000));
    CHECK(!DC_PAIR_TWO_CTAS_PAY(3201000, 6144, 132, 0));
}
