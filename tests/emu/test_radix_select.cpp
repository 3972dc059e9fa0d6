// test_radix_select.cpp - dcsel::radix_select and selected_mask (select_core
// .cuh) run by the SIMT emulator (simt.h) on seeded random rows of 64-bit
// keys, against sorting: the selected set must be the TOPK largest non-empty
// keys, equal keys ranked by the lower flat position (select_core.cuh's
// `selected`), and count = min(TOPK, non-empty keys). Rows of several shapes:
// unique keys, packed-format keys tied on ord16, duplicates straddling the
// K-th place (fewer and more than FIN_MAX of them), few distinct values, a
// gap right at the K-th place (a pass that ends the select exactly), fewer
// keys than K; keys in registers and re-read in chunks; all rounds or
// fewer. The radix select has one bin a thread: built at 512 threads only.
#include <algorithm>
#include <vector>

#include "select_emu.h"

static_assert(THREADS == dcsel::BINS, "radix_select: one radix bin a thread");

constexpr int TOPK = dcsel::TOPK;
constexpr uint64_t KEY_MAX = (1ull << dcsel::KEY_BITS) - 1ull;

// Keys of the row: thread tid's key i sits at flat position i * THREADS + tid.
struct RowKeys {
    const uint64_t *k;
    uint64_t get(int i) const { return k[(size_t)i * THREADS + threadIdx.x]; }
};

struct Stats {
    int rows = 0, few = 0, ties = 0, regs = 0, chunked = 0;
};

// A row of `n` key positions (rounds * THREADS) in one of the shapes.
static void fill_row(Rng &rng, int kind, int n, std::vector<uint64_t> &key)
{
    const double empty = std::vector<double>{0.0, 0.0, 0.2, 0.9}[rng.below(4)];
    switch (kind) {
    case 0: // unique w.h.p., extremes included
        for (int p = 0; p < n; ++p)
            key[(size_t)p] = 1ull + rng.next() % KEY_MAX;
        key[rng.below((uint32_t)n)] = 1ull;
        key[rng.below((uint32_t)n)] = KEY_MAX;
        break;
    case 1: { // packed format: ord16 in a narrow band, distinct gids
        const uint32_t centre = (uint32_t)rng.range(0x100, 0xFF00), band = (uint32_t)rng.range(0, 40);
        const uint32_t gid0 = rng.below(1u << 10);
        for (int p = 0; p < n; ++p) {
            const uint64_t ord = centre - band + rng.below(2 * band + 1);
            const uint64_t gid = gid0 + (uint64_t)p * 3u; // distinct, below 2^GID_BITS
            key[(size_t)p] = ((ord << dcsel::GID_BITS) | (dcsel::GID_MASK - gid)) + 1ull;
        }
        break;
    }
    case 2: { // few distinct values: long runs of equal keys
        const int d = std::vector<int>{1, 2, 5, 50}[rng.below(4)];
        std::vector<uint64_t> vals((size_t)d);
        for (auto &v : vals)
            v = 1ull + rng.next() % KEY_MAX;
        for (int p = 0; p < n; ++p)
            key[(size_t)p] = vals[rng.below((uint32_t)d)];
        break;
    }
    case 3: { // a gap at the K-th place: TOPK keys have bit b set, the rest
              // not, all bits above b common (a pass ends exactly at K)
        const int b = rng.range(0, dcsel::KEY_BITS - 2);
        const uint64_t high = (rng.next() % KEY_MAX) >> (b + 1) << (b + 1);
        const uint64_t low = (1ull << b) - 1ull;
        for (int p = 0; p < n; ++p)
            key[(size_t)p] = high | (rng.next() & low) | 1ull; // never 0
        for (int c = 0, p = rng.below((uint32_t)n); c < std::min(n, TOPK); ++c, p = (p + 7) % n)
            key[(size_t)p] |= 1ull << b; // 7 is prime to n (a multiple of 512)
        return; // no empty keys
    }
    default: { // unique keys, then copies of the K-th largest (a straddling tie)
        for (int p = 0; p < n; ++p)
            key[(size_t)p] = 1ull + rng.next() % KEY_MAX;
        std::vector<uint64_t> sorted(key.begin(), key.begin() + n);
        std::sort(sorted.rbegin(), sorted.rend());
        const uint64_t kth = sorted[(size_t)std::min(n, TOPK) - 1];
        // 2..FIN_MAX copies: the warp finish; more: the last radix pass.
        const int copies = rng.chance(0.5) ? rng.range(2, dcsel::FIN_MAX) : rng.range(dcsel::FIN_MAX + 1, 600);
        for (int c = 0; c < copies; ++c)
            key[rng.below((uint32_t)n)] = kth;
        break;
    }
    }
    for (int p = 0; p < n; ++p)
        if (rng.chance(empty))
            key[(size_t)p] = 0;
}

// One row: KPT key slots a thread, the first `rounds` rounds of them hold
// keys; the positions past them hold keys too, which must be ignored.
template <int KPT> static bool radix_row(Rng &rng, int kind, int rounds, Stats &st)
{
    constexpr int P = KPT * THREADS;
    const int n = rounds * THREADS;
    alignas(16) static dcsel::Smem sm;
    std::vector<uint64_t> key(P);
    for (auto &k : key)
        k = 1ull + rng.next() % KEY_MAX;
    fill_row(rng, kind, n, key);
    std::vector<uint8_t> sel(P, 2); // 2: never evaluated
    std::vector<dcsel::Sel> sels(THREADS);
    RUN_BLOCK(THREADS, [&] {
        const int tid = (int)threadIdx.x;
        const RowKeys keys{key.data()};
        const dcsel::Sel s = dcsel::radix_select<KPT>(keys, sm, rounds);
        sels[(size_t)tid] = s;
        if constexpr (KPT <= 32) {
            const uint32_t m = dcsel::selected_mask<KPT>(keys, s, rounds);
            for (int i = 0; i < rounds; ++i)
                sel[(size_t)(i * THREADS + tid)] = (m >> i) & 1u;
        } else {
            for (int i = 0; i < rounds; ++i)
                sel[(size_t)(i * THREADS + tid)] = dcsel::selected(s, keys.get(i), i * THREADS + tid);
        }
    });
    // The oracle: non-empty keys by key descending, then position ascending.
    std::vector<std::pair<uint64_t, int>> order;
    for (int p = 0; p < n; ++p)
        if (key[(size_t)p] != 0)
            order.emplace_back(key[(size_t)p], p);
    std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    const int count = std::min((int)order.size(), TOPK);
    std::vector<uint8_t> want(P, 0);
    for (int r = 0; r < count; ++r)
        want[(size_t)order[(size_t)r].second] = 1;
    const dcsel::Sel &s0 = sels[0];
    for (int t = 0; t < THREADS; ++t) {
        const dcsel::Sel &s = sels[(size_t)t];
        EXPECT(s.thr_key == s0.thr_key && s.need_eq == s0.need_eq && s.eq_last == s0.eq_last &&
                   s.count == s0.count,
               "KPT %d kind %d: thread %d's result differs from thread 0's", KPT, kind, t);
    }
    EXPECT(s0.count == count, "KPT %d rounds %d kind %d: count %d, want %d", KPT, rounds, kind,
           s0.count, count);
    for (int p = 0; p < P; ++p) {
        const int got = p < n ? sel[(size_t)p] : 0;
        EXPECT(got == want[(size_t)p] && (p < n || sel[(size_t)p] == 2),
               "KPT %d rounds %d kind %d, position %d key %" PRIu64 ": selected %d, want %d "
               "(thr_key %" PRIu64 " need_eq %d eq_last %d)",
               KPT, rounds, kind, p, key[(size_t)p], sel[(size_t)p], want[(size_t)p], s0.thr_key,
               s0.need_eq, s0.eq_last);
    }
    ++st.rows;
    st.few += (int)order.size() < TOPK;
    st.ties += s0.need_eq > 0;
    (KPT <= dcsel::REG_MAX ? st.regs : st.chunked)++;
    return true;
}

template <int KPT> static bool radix_shape(Rng &rng, int rows, Stats &st)
{
    for (int r = 0; r < rows; ++r) {
        const int rounds = r % 3 ? KPT : rng.range(1, KPT);
        if (!radix_row<KPT>(rng, r % 5, rounds, st))
            return false;
    }
    return true;
}

TEST(radix_select)
{
    Rng rng(0x5E1EC7);
    Stats st;
    CHECK(radix_shape<1>(rng, scaled(10), st)); // 512 keys: fewer than K
    CHECK(radix_shape<4>(rng, scaled(20), st)); // 2048 keys: K of them
    CHECK(radix_shape<9>(rng, scaled(100), st));
    CHECK(radix_shape<dcsel::REG_MAX>(rng, scaled(40), st));
    CHECK(radix_shape<dcsel::REG_MAX + 4>(rng, scaled(20), st)); // re-read in chunks
    printf("radix_select + selected_mask: %d rows (%d with fewer than K keys, %d with ties "
           "straddling the K-th place; %d in registers, %d in chunks) select as sorting does\n",
           st.rows, st.few, st.ties, st.regs, st.chunked);
}
