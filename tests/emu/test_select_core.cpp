// test_select_core.cpp - the block helpers of kernels/packed/select_core.cuh
// (block_incl_scan, shared_cut, kth_smallest_unique, ballot_rank) and of
// kernels/common/common.cuh (compact_ordered, indptr_scan), run by the SIMT
// emulator (simt.h) on seeded random cases and compared with sequential
// oracles. Built once per block size (DC_EMU_THREADS: 512, the rescue's and
// the large select's; 256, the small select's); each TEST prints one line:
// the helper and its number of cases.
#include <algorithm>
#include <set>
#include <vector>

#include "select_emu.h"

using dcsel::Cut;
constexpr int NW = THREADS / 32;

// ---------------------------------------------------------- block_incl_scan

// Three scans in a row (the helper ends with a barrier so that it may be
// called again at once): each thread's inclusive prefix and the total.
static bool incl_scan_block(Rng &rng, int &cases)
{
    constexpr int CALLS = 3;
    static int warp_tot[NW];
    std::vector<int> in((size_t)CALLS * THREADS), got(in.size()), tot(in.size());
    for (int &x : in)
        x = rng.chance(0.3) ? 0 : rng.range(-1000, 100000);
    RUN_BLOCK(THREADS, [&] {
        const int tid = (int)threadIdx.x;
        for (int c = 0; c < CALLS; ++c) {
            int total;
            got[(size_t)(c * THREADS + tid)] =
                dcsel::block_incl_scan(in[(size_t)(c * THREADS + tid)], warp_tot, &total);
            tot[(size_t)(c * THREADS + tid)] = total;
        }
    });
    for (int c = 0; c < CALLS; ++c, ++cases) {
        int run = 0;
        for (int t = 0; t < THREADS; ++t)
            run += in[(size_t)(c * THREADS + t)];
        int incl = 0;
        for (int t = 0; t < THREADS; ++t) {
            const size_t i = (size_t)(c * THREADS + t);
            incl += in[i];
            EXPECT(got[i] == incl && tot[i] == run, "call %d thread %d: prefix %d total %d, want %d %d",
                   c, t, got[i], tot[i], incl, run);
        }
    }
    return true;
}

TEST(block_incl_scan)
{
    Rng rng(0x5CA11);
    int cases = 0;
    for (int b = 0; b < scaled(100); ++b)
        CHECK(incl_scan_block(rng, cases));
    printf("block_incl_scan: %d scans of %d threads match the running sum\n", cases, THREADS);
}

// --------------------------------------------------------------- shared_cut

// The sequential walk: bin 0 less adj0, bins from the top (DESC) or the
// bottom, the bin where the running count reaches need.
static Cut cut_oracle(const int *hist, int need, int adj0, bool desc)
{
    int h[dcsel::CUT_BINS];
    memcpy(h, hist, sizeof h);
    h[0] -= adj0;
    int total = 0;
    for (int b = 0; b < dcsel::CUT_BINS; ++b)
        total += h[b];
    if (total < need)
        return Cut{0, 0, 0, total};
    int before = 0;
    for (int k = 0; k < dcsel::CUT_BINS; ++k) {
        const int b = desc ? dcsel::CUT_BINS - 1 - k : k;
        if (before + h[b] >= need)
            return Cut{b, before, h[b], total};
        before += h[b];
    }
    return Cut{-1, -1, -1, -1}; // unreachable: need <= total
}

// One of several shapes of histogram: dense, sparse, one huge bin, empty,
// only bin 0, all ones.
static void fill_hist(Rng &rng, int *h)
{
    const int kind = rng.range(0, 5);
    const int maxc = std::vector<int>{1, 3, 20, 1000}[rng.below(4)];
    for (int b = 0; b < dcsel::CUT_BINS; ++b) {
        switch (kind) {
        case 0: h[b] = rng.range(0, maxc); break;
        case 1: h[b] = rng.chance(0.05) ? rng.range(1, maxc) : 0; break;
        case 2: h[b] = rng.chance(0.1) ? rng.range(0, 3) : 0; break;
        case 3: h[b] = 0; break;
        case 4: h[b] = b == 0 ? rng.range(0, 5000) : 0; break;
        default: h[b] = 1; break;
        }
    }
    if (kind == 2) {
        const int big = std::vector<int>{0, 255, rng.range(0, 255)}[rng.below(3)];
        h[big] = rng.range(100000, 2000000);
    }
}

// CUTS cuts in one block, alternating two result slots as select.cu does
// (a slot is written again only after the next cut's barrier).
static bool cut_block(Rng &rng, int &cases, int &edge)
{
    constexpr int CUTS = 16;
    alignas(16) static int hist[CUTS][dcsel::CUT_BINS]; // shared_cut loads int4
    static int4 slot[2];
    struct Spec {
        bool desc;
        int need, adj0;
    } spec[CUTS];
    for (int c = 0; c < CUTS; ++c) {
        fill_hist(rng, hist[c]);
        spec[c].desc = rng.chance(0.5);
        spec[c].adj0 = rng.chance(0.5) || hist[c][0] == 0 ? 0 : rng.range(1, hist[c][0]);
        int total = -spec[c].adj0;
        for (int b = 0; b < dcsel::CUT_BINS; ++b)
            total += hist[c][b];
        switch (rng.range(0, 5)) {
        case 0: spec[c].need = 1; break;
        case 1: spec[c].need = std::max(total, 1); break;
        case 2: spec[c].need = total + 1; break; // fewer keys than needed
        default: spec[c].need = total > 0 ? rng.range(1, total) : 1; break;
        }
    }
    std::vector<Cut> got((size_t)CUTS * THREADS);
    RUN_BLOCK(THREADS, [&] {
        for (int c = 0; c < CUTS; ++c) {
            const Spec &s = spec[c];
            got[(size_t)(c * THREADS) + threadIdx.x] =
                s.desc ? dcsel::shared_cut<true>(hist[c], s.need, slot[c & 1], s.adj0)
                       : dcsel::shared_cut<false>(hist[c], s.need, slot[c & 1], s.adj0);
        }
    });
    for (int c = 0; c < CUTS; ++c, ++cases) {
        const Spec &s = spec[c];
        const Cut w = cut_oracle(hist[c], s.need, s.adj0, s.desc);
        edge += w.total < s.need || s.need == w.total || s.need == 1;
        for (int t = 0; t < THREADS; ++t) {
            const Cut &r = got[(size_t)(c * THREADS + t)];
            EXPECT(r.bin == w.bin && r.before == w.before && r.cnt == w.cnt && r.total == w.total,
                   "cut %d (%s, need %d, adj0 %d), thread %d: bin %d before %d cnt %d total %d, "
                   "want %d %d %d %d",
                   c, s.desc ? "desc" : "asc", s.need, s.adj0, t, r.bin, r.before, r.cnt, r.total,
                   w.bin, w.before, w.cnt, w.total);
        }
    }
    return true;
}

TEST(shared_cut)
{
    Rng rng(0xC0C07);
    int cases = 0, edge = 0;
    for (int b = 0; b < scaled(300); ++b)
        CHECK(cut_block(rng, cases, edge));
    printf("shared_cut: %d cuts (%d with need 1, need == total or total < need) match the walk\n",
           cases, edge);
}

// ------------------------------------------------------ kth_smallest_unique

// m unique keys of one of three shapes: random over the type, a dense run,
// or a run that holds the type's extremes.
template <class K> static void unique_keys(Rng &rng, int m, std::vector<K> &out)
{
    out.clear();
    const int kind = rng.range(0, 2);
    if (kind == 1) {
        const K base = (K)rng.next();
        for (int i = 0; i < m; ++i)
            out.push_back((K)(base + (K)i));
    } else {
        std::set<K> seen;
        if (kind == 2) {
            seen.insert((K)0);
            seen.insert((K)~(K)0);
        }
        while ((int)seen.size() < m)
            seen.insert((K)rng.next());
        out.assign(seen.begin(), seen.end());
        while ((int)out.size() > m)
            out.pop_back();
    }
    for (int i = m - 1; i > 0; --i) // shuffle
        std::swap(out[(size_t)i], out[rng.below((uint32_t)i + 1)]);
}

// QUERIES queries of one key type in one block, a barrier after each (the
// caller's barrier orders *out before its readers).
template <class K> static bool kth_block(Rng &rng, int &cases)
{
    constexpr int QUERIES = 8;
    static K list[QUERIES][THREADS];
    static K out[QUERIES];
    int m[QUERIES], need[QUERIES];
    K want[QUERIES], absent[QUERIES];
    std::vector<K> keys;
    for (int q = 0; q < QUERIES; ++q) {
        m[q] = std::vector<int>{1, THREADS, rng.range(1, THREADS), rng.range(1, 40)}[rng.below(4)];
        need[q] = std::vector<int>{1, m[q], rng.range(1, m[q])}[rng.below(3)];
        unique_keys<K>(rng, m[q], keys);
        std::copy(keys.begin(), keys.end(), list[q]);
        for (int i = m[q]; i < THREADS; ++i) // past m: never read
            list[q][i] = (K)rng.next();
        std::sort(keys.begin(), keys.end());
        want[q] = keys[(size_t)(need[q] - 1)];
        absent[q] = (K)rng.next();
        while (std::binary_search(keys.begin(), keys.end(), absent[q]))
            ++absent[q];
        out[q] = absent[q]; // stays so unless the helper writes it
    }
    std::vector<K> got((size_t)QUERIES * THREADS);
    RUN_BLOCK(THREADS, [&] {
        for (int q = 0; q < QUERIES; ++q) {
            dcsel::kth_smallest_unique(list[q], m[q], need[q], &out[q]);
            __syncthreads();
            got[(size_t)(q * THREADS) + threadIdx.x] = out[q];
        }
    });
    for (int q = 0; q < QUERIES; ++q, ++cases)
        for (int t = 0; t < THREADS; ++t)
            EXPECT(got[(size_t)(q * THREADS + t)] == want[q],
                   "%d-byte keys, m %d need %d, thread %d: %" PRIu64 ", want %" PRIu64, (int)sizeof(K),
                   m[q], need[q], t, (uint64_t)got[(size_t)(q * THREADS + t)], (uint64_t)want[q]);
    return true;
}

TEST(kth_smallest_unique)
{
    Rng rng(0x4174);
    int c64 = 0, c32 = 0;
    for (int b = 0; b < scaled(100); ++b) {
        CHECK(kth_block<uint64_t>(rng, c64));
        CHECK(kth_block<uint32_t>(rng, c32));
    }
    printf("kth_smallest_unique: %d uint64 and %d uint32 queries match sorting\n", c64, c32);
}

// -------------------------------------------------------------- ballot_rank

// ballot_rank over KPT keys a thread (flat position p = i * THREADS + tid)
// of which the first `rounds` rounds count: every flagged key gets its rank
// in ascending position order, once; nothing else is emitted; every thread
// gets the count. Flags past `rounds` are set too: they must be ignored.
// bits: the flags are passed as a SelBits (KPT <= 32), not as a predicate.
template <int KPT> static bool ballot_block(Rng &rng, int rounds, double density, bool bits)
{
    constexpr int P = KPT * THREADS;
    static dcsel::Smem sm;
    std::vector<uint8_t> flag(P);
    for (auto &f : flag)
        f = rng.chance(density);
    std::vector<int> rank(P, -1), calls(P, 0), count(THREADS, -1);
    RUN_BLOCK(THREADS, [&] {
        const int tid = (int)threadIdx.x;
        auto emit = [&](int i, int r) {
            rank[(size_t)(i * THREADS + tid)] = r;
            ++calls[(size_t)(i * THREADS + tid)];
        };
        if constexpr (KPT <= 32) {
            if (bits) {
                uint32_t m = 0u;
                for (int i = 0; i < KPT; ++i)
                    m |= (flag[(size_t)(i * THREADS + tid)] ? 1u : 0u) << i;
                count[(size_t)tid] = dcsel::ballot_rank<KPT>(sm, dcsel::SelBits{m}, emit, rounds);
                return;
            }
        }
        count[(size_t)tid] = dcsel::ballot_rank<KPT>(
            sm, [&](int i) { return flag[(size_t)(i * THREADS + tid)] != 0; }, emit, rounds);
    });
    int n = 0;
    for (int p = 0; p < P; ++p) {
        const bool sel = flag[(size_t)p] && p < rounds * THREADS;
        EXPECT(calls[(size_t)p] == (sel ? 1 : 0) && rank[(size_t)p] == (sel ? n : -1),
               "KPT %d rounds %d density %.2f, position %d (flag %d): %d calls, rank %d, want %d",
               KPT, rounds, density, p, flag[(size_t)p], calls[(size_t)p], rank[(size_t)p],
               sel ? n : -1);
        n += sel;
    }
    for (int t = 0; t < THREADS; ++t)
        EXPECT(count[(size_t)t] == n, "KPT %d rounds %d, thread %d: count %d, want %d", KPT, rounds,
               t, count[(size_t)t], n);
    return true;
}

// `blocks` blocks of one shape: all rounds or a random part of them.
template <int KPT> static bool ballot_shape(Rng &rng, int blocks, int &cases)
{
    static const double density[] = {0.0, 0.02, 0.5, 0.97, 1.0};
    for (int b = 0; b < blocks; ++b, ++cases) {
        const int rounds = b % 2 ? KPT : rng.range(0, KPT);
        if (!ballot_block<KPT>(rng, rounds, density[rng.below(5)], KPT <= 32 && b % 4 >= 2))
            return false;
    }
    return true;
}

TEST(ballot_rank)
{
    Rng rng(0xBA11);
    int reg = 0, chunked = 0;
    // Register-resident keys (KPT <= REG_MAX: one scan of all rounds).
    CHECK(ballot_shape<1>(rng, scaled(60), reg));
    CHECK(ballot_shape<5>(rng, scaled(40), reg));
    CHECK(ballot_shape<dcsel::REG_MAX>(rng, scaled(16), reg));
    // Re-decoded keys (KPT > REG_MAX: CHUNK rounds a scan, a running base).
    CHECK(ballot_shape<dcsel::REG_MAX + 8>(rng, scaled(12), chunked));
    printf("ballot_rank: %d blocks with keys in registers, %d in chunks of %d rounds, ranks and "
           "counts match the prefix count\n",
           reg, chunked, dcsel::CHUNK);
}

// ---------------------------------------------------------- compact_ordered

// CALLS compactions in a row: flagged threads' values in thread order, the
// count to every thread, nothing written past it.
static bool compact_block(Rng &rng, int &cases)
{
    constexpr int CALLS = 4;
    constexpr uint32_t UNTOUCHED = 0xDEADBEEFu;
    static uint32_t list[CALLS][THREADS];
    static int warp_counts[NW];
    std::vector<uint8_t> flag((size_t)CALLS * THREADS);
    std::vector<uint32_t> value(flag.size());
    std::vector<int> total(flag.size());
    for (int c = 0; c < CALLS; ++c) {
        const double density = std::vector<double>{0.0, 0.1, 0.5, 1.0}[rng.below(4)];
        for (int t = 0; t < THREADS; ++t) {
            flag[(size_t)(c * THREADS + t)] = rng.chance(density);
            value[(size_t)(c * THREADS + t)] = (uint32_t)rng.next() & 0x7FFFFFFFu;
            list[c][t] = UNTOUCHED;
        }
    }
    RUN_BLOCK(THREADS, [&] {
        const size_t tid = threadIdx.x;
        for (int c = 0; c < CALLS; ++c)
            total[(size_t)(c * THREADS) + tid] = dc::compact_ordered<THREADS>(
                flag[(size_t)(c * THREADS) + tid] != 0, value[(size_t)(c * THREADS) + tid], list[c],
                warp_counts);
    });
    for (int c = 0; c < CALLS; ++c, ++cases) {
        int n = 0;
        for (int t = 0; t < THREADS; ++t) {
            if (!flag[(size_t)(c * THREADS + t)])
                continue;
            EXPECT(list[c][n] == value[(size_t)(c * THREADS + t)], "call %d entry %d: %u, want %u", c,
                   n, list[c][n], value[(size_t)(c * THREADS + t)]);
            ++n;
        }
        for (int i = n; i < THREADS; ++i)
            EXPECT(list[c][i] == UNTOUCHED, "call %d entry %d past the count %d written", c, i, n);
        for (int t = 0; t < THREADS; ++t)
            EXPECT(total[(size_t)(c * THREADS + t)] == n, "call %d thread %d: count %d, want %d", c, t,
                   total[(size_t)(c * THREADS + t)], n);
    }
    return true;
}

TEST(compact_ordered)
{
    Rng rng(0xC0DE);
    int cases = 0;
    for (int b = 0; b < scaled(100); ++b)
        CHECK(compact_block(rng, cases));
    printf("compact_ordered: %d compactions of %d threads match the ordered filter\n", cases,
           THREADS);
}

// -------------------------------------------------------------- indptr_scan

// dc::indptr_scan runs its own block size (DC_INDPTR_THREADS) and a chunk of
// rows at a time: row counts around the chunk's edges.
static bool indptr_case(Rng &rng, long long rows)
{
    std::vector<int32_t> counts((size_t)rows), indptr((size_t)rows + 1, -7);
    for (auto &c : counts)
        c = rng.chance(0.2) ? 0 : rng.range(0, 2048);
    RUN_BLOCK(DC_INDPTR_THREADS, [&] { dc::indptr_scan(counts.data(), rows, indptr.data()); });
    int32_t run = 0;
    for (long long i = 0; i <= rows; ++i) {
        EXPECT(indptr[(size_t)i] == run, "rows %lld, indptr[%lld] = %d, want %d", rows, i,
               indptr[(size_t)i], run);
        if (i < rows)
            run += counts[(size_t)i];
    }
    return true;
}

TEST(indptr_scan)
{
    Rng rng(0x1D);
    const long long rows[] = {0, 1, 31, DC_INDPTR_THREADS - 1, DC_INDPTR_THREADS,
                              DC_INDPTR_THREADS + 1, 2 * DC_INDPTR_THREADS + 517};
    for (long long r : rows)
        CHECK(indptr_case(rng, r));
    printf("indptr_scan: %d row counts (0 to %lld rows, %d threads) match the prefix sum\n",
           (int)(sizeof rows / sizeof rows[0]), rows[6], DC_INDPTR_THREADS);
}
