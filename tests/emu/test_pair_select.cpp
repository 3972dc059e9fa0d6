// test_pair_select.cpp - the pair merge's select kernel, dcptopk_pair_select
// (kernels/pair/pair_select.cu), one CTA a row, run by the SIMT emulator
// (simt.h) as a grid of a few rows, against the library's CPU reference
// (dcptopk_ref_pair_select): every word of the ids, the owned rows and the
// counts, with the padding past K and the rows' trailing words that must
// keep their sentinels, bit for bit.
//
// Built once a key (tests/CMakeLists.txt, KEYS), with the renderer's own
// #defines (DC_EMU_PRELUDE; TEST(prelude) checks them), so the test runs the
// template as NVRTC compiles it. The keys cover where a row's keys and gids
// live (pair_abi.h): keys and gids in shared memory at 1024 and 512 threads,
// keys alone with the gids re-read (a row of 16384's two-CTA shape too), keys re-read too; and the layouts: rank-
// and row-major, int32 and float ids. A split row (a cluster) does not run
// here: its CTAs wait for each other, which one block at a time cannot.
//
// Inputs: gen.h's pair families (normal, 30% invalid, all invalid, inf/NaN/
// zeros, ties, duplicates, near ties) and rows of one repeated candidate,
// laid out as the key's layout reads them. Rank-major buffers carry padding
// rows of winning candidates past T, so a read past the rows shows; float
// ids are the gids' values, some with a fraction the conversion truncates,
// the invalid ones -1, NaN or 2^31 and above.
#include <cmath>
#include <string>
#include <vector>

extern "C" {
#include "dcptopk.h"
#include "gen.h"
}

#include "emu_kernel.h"
// The kernel's name is also the C API's (dcptopk.h): renamed here.
#define dcptopk_pair_select dc_emu_pair_select_kernel
#include "pair_select.cu"
#undef dcptopk_pair_select
extern "C" {
#include "pair.h"
}
#undef _Static_assert

namespace {

constexpr int W = DCPTOPK_WORLD_SIZE, K = DCPTOPK_TOPK, S = DCPTOPK_INTERLEAVE;
constexpr int B = DCPTOPK_BLOCK_SIZE, LAYOUT = DCPTOPK_LAYOUT;
constexpr int64_t WK = (int64_t)W * K;
static_assert(ps::kClu == 1 && ps::kSeg == W, "one CTA a row of the flat merge");
static_assert(DCPTOPK_EMIT_IDS == 1, "the keys under test emit ids");

// One case: a family (-1: every candidate the same), rows, seed, rank, and
// which outputs the kernel writes.
struct Case {
    int family;
    int64_t rows;
    uint64_t seed;
    int32_t rank;
    bool ids, owned;
};

// The id word the layout reads for a gid: the gid, or with float ids its
// value (a fraction now and then, which the conversion drops), and for an
// invalid gid a float that converts to none.
int32_t id_word(int32_t gid, Rng &rng)
{
    if ((LAYOUT & 2) == 0)
        return gid;
    float f;
    if (gid >= 0)
        f = (float)gid + (rng.chance(0.1) ? 0.25f : 0.0f);
    else
        f = rng.chance(0.3) ? NAN : rng.chance(0.5) ? -1.0f : 3.0e9f;
    return __float_as_int(f);
}

// The candidates of a case in the key's layout; t_alloc: the rows a rank
// holds (rank-major: T and two padding rows).
bool make_candidates(const Case &c, Rng &rng, std::vector<int32_t> &cand, int64_t &t_alloc)
{
    const int64_t t = c.rows;
    std::vector<int32_t> gen;
    if (c.family >= 0) {
        int32_t *g = dc_gen_pair_candidates(c.family, K, W, S, t, c.seed);
        EXPECT(g != nullptr, "dc_gen_pair_candidates failed");
        gen.assign(g, g + (size_t)W * (size_t)t * K * 2);
        free(g);
    }
    const bool rank_major = (LAYOUT & 1) == 0;
    t_alloc = rank_major ? t + 2 : t;
    cand.assign((size_t)W * (size_t)t_alloc * K * 2, 0);
    for (int32_t r = 0; r < W; r++)
        for (int64_t row = 0; row < t_alloc; row++)
            for (int32_t j = 0; j < K; j++) {
                int32_t score, gid;
                if (row >= t) {
                    score = 0x7F800000; // +inf, gid 7: would win if read
                    gid = 7;
                } else if (gen.empty()) {
                    score = 0x3F800000; // every candidate 1.0f, gid 5
                    gid = 5;
                } else {
                    const int32_t *src = &gen[(size_t)(((int64_t)r * t + row) * K + j) * 2];
                    score = src[0];
                    gid = src[1];
                }
                const int64_t at = rank_major ? ((int64_t)r * t_alloc + row) * K + j
                                              : row * WK + (int64_t)r * K + j;
                cand[(size_t)at * 2] = score;
                cand[(size_t)at * 2 + 1] = id_word(gid, rng);
            }
    return true;
}

const char *family_name(int f) { return f < 0 ? "identical" : dc_pair_family_name(f); }

// Outputs of one run (the kernel's or the reference's), sentinel-filled.
struct Outs {
    std::vector<int32_t> ids, prow, counts;
    explicit Outs(int64_t t)
        : ids((size_t)t * (K + EMU_PAD_COLS), EMU_SENTINEL),
          prow((size_t)t * (K + EMU_PAD_COLS), EMU_SENTINEL), counts((size_t)t + 1, EMU_SENTINEL)
    {
    }
};

// Runs the kernel and the reference on one case's inputs, then compares
// every word of their outputs.
bool check_case(const Case &c)
{
    Rng rng(c.seed * 3 + 1);
    std::vector<int32_t> cand;
    int64_t t_alloc = 0;
    if (!make_candidates(c, rng, cand, t_alloc))
        return false;
    const int64_t t = c.rows;
    const int64_t stride = K + EMU_PAD_COLS;
    const HostRowsMap map(t, 3 * K, B, c.seed, rng); // local ids stay below 3K

    dcptopk_merge_config cfg = DCPTOPK_MERGE_CONFIG_INIT;
    cfg.kind = DCPTOPK_MERGE_PAIR;
    cfg.topk = K;
    cfg.local_topk = K;
    cfg.world_size = W;
    cfg.block_size = B;
    cfg.interleave = S;
    cfg.emit_ids = 1;
    cfg.exact = 0;
    auto args = [&](Outs &o) {
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = cand.data();
        a.layout = LAYOUT;
        a.rows = t;
        a.rank_stride_rows = (LAYOUT & 1) == 0 ? t_alloc : 0;
        a.rank = c.rank;
        a.ids_out = c.ids ? o.ids.data() : nullptr;
        a.ids_out_stride = stride;
        if (c.owned)
            map.apply(a.rows_map, o.prow.data(), stride, o.counts.data());
        return a;
    };
    Outs got(t), want(t);
    const dcptopk_pair_select_args wa = args(want);
    EXPECT(dcptopk_ref_pair_select(&cfg, &wa) == DCPTOPK_SUCCESS, "reference: %s",
           dcptopk_last_error(NULL));

    // The launcher's own mapping of the call (pair.c).
    const dcptopk_pair_select_args ga = args(got);
    const dc_pair_select_args k = dc_pair_kernel_args(&cfg, &ga);
    const int smem =
        DC_PAIR_SELECT_SMEM_BYTES(W, K, 1, ps::kArch, DC_PAIR_TWO_CTAS(DCPTOPK_VARIANT));
    const std::string err = dc_emu::run_grid(
        (int)t, ps::kThreads, smem, [&] {
            dc_emu_pair_select_kernel(k.candidates, k.rows, k.rank_stride, k.rank, k.ids_out,
                                      k.ids_stride, k.req_id, k.block_table, k.bt_stride,
                                      k.bt_cols, k.num_reqs, k.stride_rows, k.rows_out,
                                      k.rows_stride, k.counts_out);
        });
    char where[128];
    snprintf(where, sizeof where, "%s rows %lld seed %llu rank %d", family_name(c.family),
             (long long)t, (unsigned long long)c.seed, c.rank);
    EXPECT(err.empty(), "%s: %s", where, err.c_str());
    return same_words(got.ids, want.ids, (size_t)stride, "ids", where) &&
           same_words(got.prow, want.prow, (size_t)stride, "rows", where) &&
           same_words(got.counts, want.counts, 1, "counts", where);
}

// Every family on a few rows, both outputs, then each output alone; under
// the sanitizers (emu_test.h's CASE_DIV) every CASE_DIV-th family.
bool families(uint64_t seed0, int64_t rows)
{
    for (int f = -1; f < DC_PFAM_COUNT; f++) {
        if (CASE_DIV > 1 && f % CASE_DIV != 0)
            continue;
        const uint64_t seed = seed0 + (uint64_t)(f + 1);
        const Case c{f, rows, seed, (int32_t)(seed % W), true, true};
        if (!check_case(c))
            return false;
    }
    return check_case(Case{DC_PFAM_TIES, 2, seed0 + 50, 0, true, false}) &&
           check_case(Case{DC_PFAM_DUPLICATES, 2, seed0 + 51, W - 1, false, true});
}

} // namespace

TEST(prelude)
{
    dcptopk_key key;
    CHECK(key_matches_prelude(&key));
    CHECK(key.kernel == DCPTOPK_KERNEL_PAIR_SELECT);
    CHECK_EQ(atoi(key.arch + 3), ps::kArch); // the target the template assumed
    CHECK_EQ(key.topk, K);
    CHECK_EQ(key.world_size, W);
    CHECK_EQ(key.layout, LAYOUT);
}

TEST(every_family)
{
    CHECK(families(100, scaled(3) > 1 ? 3 : 2));
}

// More rows than one: blocks after the first find their shared memory as
// the previous row left it (the emulator poisons it in between).
TEST(seeds)
{
    const int n = scaled(24);
    for (int i = 0; i < n; i++) {
        const int f = i % DC_PFAM_COUNT;
        CHECK(check_case(Case{f, 2, 500 + (uint64_t)i * 7, (int32_t)(i % W), true, true}));
    }
}
