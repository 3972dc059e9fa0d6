// test_select_small.cpp - round 1 of the packed merge, dcptopk_select
// (kernels/packed/select.cu), on its small-row path (W * N <= 4096 keys:
// every shipped config), run by the SIMT emulator (simt.h) as a grid of a
// few rows, against the library's CPU reference (dcptopk_ref_select): ids,
// owned rows, counts and, in exact mode, the saturation words, every word
// bit for bit, with the padding past K and the words past the rows that
// must keep their sentinels.
//
// Built once a key (tests/CMakeLists.txt, KEYS), with the renderer's own
// #defines (DC_EMU_PRELUDE; TEST(prelude) checks them). The kernel's
// outputs argument is built by the launcher's own dc_packed_out_param. The
// keys cover the row's two copies (bulk copies when N is a multiple of 128
// and the buffer 16-byte aligned, else 4-byte copies, which a misaligned
// buffer also takes), exact and plain mode, ids and owned rows alone.
//
// Inputs are built as the merge builds them: W ranks' logits of gen.h's
// families packed by dcptopk_ref_pack into the rank-major gathered buffer,
// whose padding rows past T hold words that would win if read.
#include <string>
#include <vector>

extern "C" {
#include "dcptopk.h"
#include "gen.h"
}

#include "emu_kernel.h"
// The kernel's name is also the C API's (dcptopk.h): renamed here.
#define dcptopk_select dc_emu_select_kernel
#include "select.cu"
#undef dcptopk_select
extern "C" {
#include "packed.h"
}
#undef _Static_assert

namespace {

constexpr int K = DCPTOPK_TOPK, N = DCPTOPK_LOCAL_TOPK, W = DCPTOPK_WORLD_SIZE;
constexpr int WORDS_ = DC_PACKED_ROW_WORDS(N);
static_assert(DC_SELECT_IS_SMALL(W, N), "the small-row path");

dcptopk_merge_config config()
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PACKED;
    c.topk = K;
    c.local_topk = N;
    c.world_size = W;
    c.block_size = DCPTOPK_BLOCK_SIZE;
    c.interleave = DCPTOPK_INTERLEAVE;
    c.emit_ids = DCPTOPK_EMIT_IDS;
    c.exact = DCPTOPK_EXACT;
    return c;
}

// A case; a key without ids (emit_ids = 0) writes owned rows alone.
struct Case {
    int family;
    int64_t rows;
    uint64_t seed;
    int32_t rank;
    bool ids, owned, misalign;
    Case(int f, int64_t t, uint64_t s, int32_t r, bool i, bool o, bool m)
        : family(f), rows(t), seed(s), rank(r), ids(i && DCPTOPK_EMIT_IDS),
          owned(o || !DCPTOPK_EMIT_IDS), misalign(m)
    {
    }
};

// Outputs of one run (the kernel's or the reference's), sentinel-filled.
struct Outs {
    std::vector<int32_t> ids, prow, counts;
    std::vector<uint32_t> sat;
    explicit Outs(int64_t t)
        : ids((size_t)t * (K + EMU_PAD_COLS), EMU_SENTINEL),
          prow((size_t)t * (K + EMU_PAD_COLS), EMU_SENTINEL), counts((size_t)t + 1, EMU_SENTINEL),
          sat((size_t)t + 1, (uint32_t)EMU_SENTINEL)
    {
    }
};

bool check_case(const Case &cs)
{
    const dcptopk_merge_config c = config();
    dc_world wd;
    EXPECT(dc_gen_world(&wd, cs.family, K, N, W, cs.rows, 3 * N + 17, cs.seed) == 0,
           "dc_gen_world failed");
    struct Freed {
        dc_world &w;
        ~Freed() { dc_world_free(&w); }
    } freed{wd};
    const int64_t t = cs.rows, t_alloc = t + 2;
    // One word of slack in front: a misaligned case starts there (4-byte,
    // not 16-byte aligned), which turns the bulk copies off.
    std::vector<int32_t> buf((size_t)(W * t_alloc * WORDS_ + 4), 0);
    int32_t *gathered = buf.data() + (cs.misalign ? 1 : 0);
    Rng rng(cs.seed * 5 + 3);
    for (int r = 0; r < W; r++) {
        dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
        pa.logits = wd.logits[r];
        pa.logits_stride = wd.stride;
        pa.max_local_len = wd.max_local_len;
        pa.row_ends = wd.row_ends[r];
        pa.rows = t;
        pa.out = gathered + (size_t)r * (size_t)t_alloc * WORDS_;
        EXPECT(dcptopk_ref_pack(&c, &pa) == DCPTOPK_SUCCESS, "dcptopk_ref_pack: %s",
               dcptopk_last_error(NULL));
        // Padding rows: top scores on every slot, would win if read.
        for (int64_t row = t; row < t_alloc; row++)
            for (int j = 0; j < WORDS_; j++)
                pa.out[row * WORDS_ + j] = (int32_t)(0xFF000000u | rng.below(1u << 17));
    }
    // Owned rows only where the key has blocks (block_size > 0).
    constexpr int32_t b = DCPTOPK_BLOCK_SIZE;
    const HostRowsMap map(t, wd.max_local_len, b > 0 ? b : 1, cs.seed, rng);
    const int64_t stride = K + EMU_PAD_COLS;
    Outs got(t), want(t);
    auto args = [&](Outs &o) {
        dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
        a.gathered = gathered;
        a.rank_stride_rows = t_alloc;
        a.rows = t;
        a.rank = cs.rank;
        a.ids_out = cs.ids ? o.ids.data() : nullptr;
        a.ids_out_stride = stride;
        // Exact mode's push inputs (checked, not read by round 1).
        a.logits = wd.logits[cs.rank];
        a.logits_stride = wd.stride;
        a.max_local_len = wd.max_local_len;
        a.row_ends = wd.row_ends[cs.rank];
        if (cs.owned && b > 0)
            map.apply(a.rows_map, o.prow.data(), stride, o.counts.data());
        return a;
    };
    const dcptopk_select_args wa = args(want);
    const dcptopk_result rr = dcptopk_ref_select(&c, &wa, DCPTOPK_EXACT ? want.sat.data() : nullptr);
    const dcptopk_select_args ga = args(got);
    EXPECT(rr == DCPTOPK_SUCCESS, "reference: %s", dcptopk_last_error(NULL));

    const dc_select_out o = dc_packed_out_param(&c, &ga);
    uint32_t *sat = DCPTOPK_EXACT ? got.sat.data() : nullptr;
    const std::string err =
        dc_emu::run_grid((int)t, THREADS, DC_SELECT_ROW_BYTES(W, N),
                         [&] { dc_emu_select_kernel(gathered, t_alloc, t, o, sat); });
    char where[128];
    snprintf(where, sizeof where, "%s rows %lld seed %llu rank %d%s", dc_family_name(cs.family),
             (long long)t, (unsigned long long)cs.seed, cs.rank, cs.misalign ? " misaligned" : "");
    EXPECT(err.empty(), "%s: %s", where, err.c_str());
    return same_words(got.ids, want.ids, (size_t)stride, "ids", where) &&
           same_words(got.prow, want.prow, (size_t)stride, "rows", where) &&
           same_words(got.counts, want.counts, 1, "counts", where) &&
           same_words(got.sat, want.sat, 1, "sat", where);
}

// The families that fit a CPU test (not LONG's 2^17 columns a rank); under
// the sanitizers (emu_test.h's CASE_DIV) every CASE_DIV-th.
bool families(uint64_t seed0, int64_t rows, bool misalign)
{
    for (int f = 0; f < DC_FAM_COUNT; f++) {
        if (f == DC_FAM_LONG || f % CASE_DIV != 0)
            continue;
        const uint64_t seed = seed0 + (uint64_t)f;
        const Case cs{f, rows, seed, (int32_t)(seed % W), true, true, misalign};
        if (!check_case(cs))
            return false;
    }
    return true;
}

} // namespace

TEST(prelude)
{
    dcptopk_key key;
    CHECK(key_matches_prelude(&key));
    CHECK(key.kernel == DCPTOPK_KERNEL_SELECT);
    CHECK_EQ(key.topk, K);
    CHECK_EQ(key.local_topk, N);
    CHECK_EQ(key.world_size, W);
    CHECK_EQ(key.exact, DCPTOPK_EXACT);
}

TEST(every_family)
{
    CHECK(families(100, 3, false));
}

// A buffer that is 4-byte but not 16-byte aligned: the 4-byte copies.
TEST(misaligned)
{
    CHECK(families(300, 2, true));
}

// Each output alone, and more seeds.
TEST(outputs_and_seeds)
{
    const int n = scaled(12);
    for (int i = 0; i < n; i++) {
        int f = i % DC_FAM_COUNT;
        if (f == DC_FAM_LONG)
            f = DC_FAM_NORMAL_100;
        const Case cs{f, 2, 700 + (uint64_t)i * 13, (int32_t)(i % W), i % 3 != 1, i % 3 != 0,
                      i % 4 == 3};
        CHECK(check_case(cs));
    }
}
