// select.cu - round 1 of the packed merge: gathered rows [W, T_alloc, N + N/32]
// (read in place) -> the global top K of each row as ids [T, K] (-1 padded)
// and/or this rank's owned physical rows + counts, in ascending position
// order (docs/CONTRACT.md, "Select"). In exact mode it also writes the row's
// saturation word (mask << 16) | tau16. It never waits: the push of a
// saturated rank is a separate launch (push.cu) right after it.
//
// Two paths, chosen at compile time by the keys of a row, W * N:
//
// - Small rows (W * N <= DC_SELECT_SMALL_KEYS, every shipped config):
//   DC_SELECT_SMALL_THREADS threads, DC_SELECT_SMALL_CTAS CTAs resident per
//   SM, one CTA per row, the row's words in shared memory (packed_abi.h):
//   bulk copies (or cp.async) bring them, the threads move them to
//   registers. The other resident CTAs hide a CTA's load latency (a
//   persistent grid that copied its next row while selecting was slower:
//   the last CTAs' extra row is a tail). Warp w owns the KPT groups of 32
//   consecutive positions from w * KPT * 32, so positions are contiguous per
//   warp, and the selection works on the 32-bit words themselves:
//     1. two 8-bit radix passes over ord16 (the word's top 16 bits) find the
//        boundary value P: `above` keys have ord16 > P, m have ord16 == P,
//        and need = K - above of these m are taken (all of them when m ==
//        need, the usual case);
//     2. when need < m, the tied keys are ranked by the rest of the select
//        key, lower gid first, and on equal gids (a caller's duplicate ids,
//        which lie in one segment) lower slot first: the tie key
//        (gid << JBITS) | slot, unique in the row. A short list (m <=
//        TIE_CMP) is gathered and ranked by comparison; more ties (integer
//        valued or constant rows) take 8-bit radix passes over the tie key;
//     3. one emit: each warp counts its selected (and owned) keys, one
//        barrier, then writes them from its base in position order.
//   A counting pass costs two barriers: one ends the counts, then warp 0
//   finds the cut bin and the other warps read it after the second (the
//   kernel is issue-bound, so one warp scanning beats eight); three
//   histograms rotate so that the one used next is cleared during the
//   current pass. A row costs 6 barriers (8 with a small tie, 6 + two per
//   radix pass with a large one). The selected set, its
//   order and tau16 are those of the 64-bit key selection below.
// - Larger rows: DC_SELECT_THREADS threads and select_core.cuh's radix
//   select on 64-bit keys (the code rescue.cu shares). The W * N keys of a
//   row sit in registers. When they do (KPT <= REG_MAX) and a row's words
//   fit DC_SELECT_PREFETCH_ROW_BYTES, the grid is persistent (the launcher
//   sizes it) and each CTA copies the words of its next row into shared
//   memory with cp.async while it selects the current one, so the global
//   load latency is hidden behind the selection. Otherwise one CTA handles
//   one row and keys are re-read.
#include "packed_abi.h"
#define DCPTOPK_THREADS DC_SELECT_THREADS_FOR(DCPTOPK_WORLD_SIZE, DCPTOPK_LOCAL_TOPK)
#include "select_core.cuh"

using namespace dcsel;

constexpr bool EXACT = DCPTOPK_EXACT != 0;
constexpr int NKEYS = WORLD * LTOPK;
constexpr int ROW_WORDS = WORLD * WORDS;

#if DC_SELECT_IS_SMALL(DCPTOPK_WORLD_SIZE, DCPTOPK_LOCAL_TOPK)

// Groups of 32 positions per warp (and keys per thread).
constexpr int KPT = (NKEYS + THREADS - 1) / THREADS;
constexpr int GROUPS = NKEYS / 32;
constexpr bool ALL_GROUPS = GROUPS == NW * KPT; // every warp's groups hold keys
constexpr int HBINS = 256;       // 8-bit digits
constexpr int SMALL_CTAS = DC_SELECT_SMALL_CTAS; // resident per SM (40 registers a thread)
constexpr int TIE_CMP = 128;     // most tied keys ranked by comparison

constexpr int ceil_log2(int x)
{
    int b = 0;
    while ((1 << b) < x)
        ++b;
    return b;
}
constexpr int JBITS = ceil_log2(LTOPK); // slot bits of a tie key
constexpr int CBITS = GID_BITS + JBITS; // tie key bits

static_assert(KPT >= 1 && KPT <= 16, "at most 16 words per thread");
static_assert(HBINS == THREADS, "each thread clears one bin");
static_assert(HBINS == CUT_BINS, "shared_cut's histograms");
// W * N <= 4096 gives ceil(log2 W) + ceil(log2 N) <= 13.
static_assert(CBITS <= 31, "a tie key fits 31 bits (never the all-ones sentinel)");

struct SmallSmem {
    int hist[3][HBINS + 4]; // rotating histograms, each with a sink bin (HBINS) that
                            // is never read (rows 16-byte aligned: read as int4)
    uint32_t list[TIE_CMP]; // tie keys gathered for the comparison rank
    int nlist;
    uint32_t thrc;          // the need-th smallest tie key
    int wcnt[NW][2];        // per warp: selected, owned
    uint32_t nsat[NW];      // exact, per warp: ranks with a slot empty or below P
    uint32_t psat;          // exact: P, read again after the emits
    uint32_t atp[2][WORLD]; // exact: 1 + rank r's largest local id at P, of
                            // all its words [0] and of its selected ones [1]
    uint64_t bar;           // the bulk copies of a row (BULK)
    int4 cut[2];            // cuts (shared_cut): bin, before, cnt, total
};

// A row in shared memory, in position order: the N words of rank r at
// r * N, then the plane words, rank r's at NKEYS + r * N / 32, so that group
// g (positions g * 32 ..) has its words at g * 32 and its plane word at
// NKEYS + g. With N a multiple of 128 and a 16-byte aligned buffer every
// piece is a whole number of 16-byte units at 16-byte aligned addresses: the
// row comes by 2W bulk copies on one mbarrier, issued by W lanes of warp 0.
// Otherwise every thread copies words with 4-byte cp.async.
constexpr bool BULK_SHAPE = LTOPK % 128 == 0;

__device__ __forceinline__ void fetch_row(uint32_t *buf, uint64_t *bar, const int32_t *gathered,
                                          long long rank_words, long long t, bool bulk)
{
    const int32_t *row = gathered + t * WORDS;
    if (BULK_SHAPE && bulk) {
        // Warp 0: lane 0 arrives expecting the whole row, then lane r copies
        // rank r (the address arithmetic runs once for all ranks).
        if (threadIdx.x < 32) {
            if (threadIdx.x == 0)
                dc::mbar_expect_tx(bar, ROW_WORDS * 4u);
            __syncwarp();
            const int r = (int)threadIdx.x;
            if (r < WORLD) {
                const int32_t *seg = row + r * rank_words;
                dc::bulk_copy(buf + r * LTOPK, seg, LTOPK * 4u, bar);
                dc::bulk_copy(buf + NKEYS + r * (LTOPK / 32), seg + LTOPK, LTOPK / 8u, bar);
            }
        }
        return;
    }
    for (int v = threadIdx.x; v < ROW_WORDS; v += THREADS) {
        const int r = v / WORDS, c = v - r * WORDS;
        const int d = c < LTOPK ? r * LTOPK + c : NKEYS + r * (LTOPK / 32) + (c - LTOPK);
#ifdef DC_EMU
        buf[d] = (uint32_t)row[r * rank_words + c]; // tests/emu: lands when issued
#else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dc::smem_u32addr(buf + d)),
                     "l"(row + r * rank_words + c)
                     : "memory");
#endif
    }
#ifndef DC_EMU
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// One key's id store of the emit, in one asm block so that the selection
// bit is tested once for the vote and the store: the key's output index is
// at + (the warp's selected keys in lanes below this one), its address one
// wide multiply-add from a base held in registers (left to the compiler, the
// row's base was rebuilt from t and the stride a key), and the store is
// predicated (the compiler would branch around a conditional store). Returns
// the warp's ballot of selected keys.
__device__ __forceinline__ uint32_t emit_id(int32_t *base, uint32_t at, uint32_t lt,
                                            uint32_t gid, uint32_t sel)
{
    uint32_t b;
#ifdef DC_EMU
    b = __ballot_sync(0xFFFFFFFFu, sel != 0u);
    if (sel != 0u)
        base[at + (uint32_t)__popc(b & lt)] = (int32_t)gid;
#else
    asm volatile("{\n\t.reg .pred q;\n\t.reg .u32 x;\n\t.reg .u64 a;\n\t"
                 "setp.ne.u32 q, %5, 0;\n\t"
                 "vote.sync.ballot.b32 %0, q, 0xffffffff;\n\t"
                 "and.b32 x, %0, %3;\n\t"
                 "popc.b32 x, x;\n\t"
                 "add.u32 x, x, %2;\n\t"
                 "mad.wide.u32 a, x, 4, %1;\n\t"
                 "@q st.global.u32 [a], %4;\n\t}"
                 : "=r"(b)
                 : "l"(base), "r"(at), "r"(lt), "r"(gid), "r"(sel)
                 : "memory");
#endif
    return b;
}

// x through a volatile move: values derived from the result are computed
// where they are used, not hoisted to the first use and kept live (or
// spilled) across the row's phases.
__device__ __forceinline__ uint32_t fresh(uint32_t x)
{
#ifdef DC_EMU
    return x;
#else
    uint32_t y;
    asm volatile("mov.b32 %0, %1;" : "=r"(y) : "r"(x) : "memory");
    return y;
#endif
}

__device__ __forceinline__ int next_hist(int h)
{
    return h == 2 ? 0 : h + 1;
}

// The lowest non-empty word whose ord16 is >= P (the empty word is 0).
__device__ __forceinline__ uint32_t lowest_word(uint32_t P)
{
    return max(P << 16, 1u);
}

// One thread's share of a row on the small-row path: the words of its KPT
// positions (wd) and the warp, lane and plane bits (wq, lq, pq) from which
// the per-key helpers derive a key's rank, slot, local and global id.
// refresh() passes wq, lq and pq through a volatile move at each phase, so
// that those values are recomputed where they are used instead of being
// hoisted and kept live (or spilled) across the row's phases.
//
// A SmallRow refers to the kernel's variables (as the closures of one
// function body would). The phases that compute tie keys work on local
// copies of wq, lq and pq (a SmallRow over them) and write the refreshed
// values back: the compiler simplifies a phase before inlining it, and only
// on local values does it share (wq * KPT + i) between a key's rank and slot
// there, as it does when everything is one function (through the references
// the machine code came out different).
struct SmallRow {
    uint32_t (&wd)[KPT];
    int &wq, &lq;
    uint32_t &pq;
    int w, lane; // of this thread (through a volatile read of %tid.x)

    __device__ __forceinline__ void refresh()
    {
        wq = (int)fresh((uint32_t)wq);
        lq = (int)fresh((uint32_t)lq);
        pq = fresh(pq);
    }
    // Group g = wq * KPT + i lies in rank g / (N / 32); when KPT is a
    // multiple of N / 32 that is wq * (KPT * 32 / N) + i / (N / 32), with
    // no division (the goal shape: a warp's 12 groups are a rank).
    __device__ __forceinline__ int rank_of(int i) const
    {
        constexpr int GPR = LTOPK / 32;
        if constexpr (KPT % GPR == 0)
            return wq * (KPT / GPR) + i / GPR;
        else
            return (wq * KPT + i) / GPR;
    }
    __device__ __forceinline__ int slot_of(int i) const
    {
        return (wq * KPT + i) * 32 - rank_of(i) * LTOPK + lq;
    }
    __device__ __forceinline__ uint32_t local_of(int i) const
    {
        // 0xFFFF - low half, and the plane bit shifted straight to bit 16
        // (i is a constant of the unrolled loops): a shift, a mask and one
        // lop3 ((~word & 0xFFFF) | bit), written out because ptxas merged
        // the complement into the global id's multiply instead (two more).
        const uint32_t bit = (pq << (16 - i)) & 0x10000u;
#ifdef DC_EMU
        return (~wd[i] & 0xFFFFu) | bit;
#else
        uint32_t l;
        asm("lop3.b32 %0, %1, %2, 0xFFFF, 0xCE;" : "=r"(l) : "r"(wd[i]), "r"(bit));
        return l;
#endif
    }
    __device__ __forceinline__ uint32_t gid_of(int i) const
    {
        return (uint32_t)dc::global_id((int32_t)local_of(i), rank_of(i), WORLD, ILV);
    }
    __device__ __forceinline__ uint32_t tie_key(int i) const
    {
        return (gid_of(i) << JBITS) | (uint32_t)slot_of(i);
    }
    // A non-empty word with ord16 == P: one range test, [P << 16, (P + 1)
    // << 16) without the empty word when P = 0 (no test of the word against
    // 0, whose result the compiler kept in registers from pass 1 on).
    __device__ __forceinline__ bool tied(int i, uint32_t P) const
    {
        const uint32_t lo = lowest_word(P);
        return wd[i] - lo < ((P + 1u) << 16) - lo;
    }
    // Whether group i of this warp holds keys (past the last group every
    // word is 0).
    __device__ __forceinline__ bool has_group(int i) const
    {
        return ALL_GROUPS || wq * KPT + i < GROUPS;
    }
};

// The row's copies go out first (warp 0 issues the bulk copies right after
// its lane 0 initialised the mbarrier), then the histograms are cleared
// while they land.
__device__ __forceinline__ void small_start(uint32_t *rowbuf, SmallSmem &fs,
                                            const int32_t *gathered, long long rank_words,
                                            long long t, bool bulk)
{
    const int tid = threadIdx.x;
    if (tid == 0) {
        dc::mbar_init(&fs.bar);
        dc::mbar_init_fence();
    }
    __syncwarp();
    fetch_row(rowbuf, &fs.bar, gathered, rank_words, t, bulk);
    // Only the first pass's histogram: each pass clears the next one's.
    fs.hist[0][tid] = 0;
    if (tid == 0)
        fs.nlist = 0;
    if (EXACT && tid < 2 * WORLD)
        fs.atp[tid / WORLD][tid % WORLD] = 0u;
    __syncthreads(); // the mbarrier's init and the cleared histograms
}

// Waits for row t's words and moves this thread's to registers: the words
// of positions g * 32 + lane, g = w * KPT + i (rank r = g * 32 / N, slot
// j = g * 32 - r * N + lane), and bit i of pq = the plane bit (bit 16 of
// the local id) of word i. After this, rowbuf is free.
__device__ __forceinline__ void small_load(SmallRow &r, const uint32_t *rowbuf, SmallSmem &fs,
                                           bool bulk)
{
    // The words are in rowbuf once every copy landed: a thread that saw the
    // mbarrier's phase complete sees the bulk copies' bytes; the 4-byte
    // copies are each thread's own, so a barrier follows them.
    if (bulk) {
        dc::mbar_wait(&fs.bar, 0u);
    } else {
#ifndef DC_EMU
        asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
        __syncthreads();
    }
    // The warp and lane through a volatile read: the per-group ranks and
    // offsets are then recomputed where they are used instead of being
    // computed once early, where they would hold registers.
    int tid_v;
#ifdef DC_EMU
    tid_v = (int)threadIdx.x;
#else
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid_v));
#endif
    const int w = tid_v >> 5, lane = tid_v & 31;
    uint32_t pb = 0u;
    const uint32_t *mine = rowbuf + w * (KPT * 32) + lane;
    const uint32_t *planes = rowbuf + NKEYS + w * KPT;
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        r.wd[i] = 0u;
        if (ALL_GROUPS || w * KPT + i < GROUPS) {
            r.wd[i] = mine[i * 32];
            pb |= ((planes[i] >> lane) & 1u) << i;
        }
    }
    r.w = w;
    r.lane = lane;
    r.wq = w;
    r.lq = lane;
    r.pq = pb;
}

// The row's boundary: ord16 > P selects a key, ord16 == P with tie key <=
// thrc too (thrc all-ones: every one). Fewer than K keys: all of them (P =
// 0, thrc all-ones).
struct SmallBound {
    uint32_t P, thrc;
    uint32_t tmask; // bit i: key i may be tied at P (thrc set: test it)
};

// Of the m tie keys (ord16 == P) the need-th smallest, m <= TIE_CMP: they
// are gathered (unique: any order) and each is ranked by comparison.
// tmask gets this thread's tied keys, so that the selection tests only them.
__device__ __forceinline__ uint32_t small_ties_by_compare(SmallRow &row, SmallSmem &fs, uint32_t P,
                                                          int need, int m, uint32_t &tmask)
{
    int wq = row.wq, lq = row.lq; // local copies (SmallRow's note)
    uint32_t pq = row.pq;
    SmallRow r{row.wd, wq, lq, pq, row.w, row.lane};
    const int tid = threadIdx.x;
    uint32_t tm = 0u;
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        const bool tk = r.tied(i, P);
        tm |= (tk ? 1u : 0u) << i;
        if (tk)
            fs.list[atomicAdd(&fs.nlist, 1)] = r.tie_key(i);
    }
    tmask = tm;
    __syncthreads();
    kth_smallest_unique(fs.list, m, need, &fs.thrc);
    if (tid == 0)
        fs.nlist = 0; // every gather of this row is done
    __syncthreads();
    return fs.thrc;
}

// Of the tie keys (ord16 == P) the need-th smallest, by 8-bit radix passes
// over the tie key, MSB first (many ties: integer valued or constant rows).
__device__ __forceinline__ uint32_t small_ties_by_radix(SmallRow &row, SmallSmem &fs, uint32_t P,
                                                        int need, int &h)
{
    int wq = row.wq, lq = row.lq; // local copies (SmallRow's note)
    uint32_t pq = row.pq;
    SmallRow r{row.wd, wq, lq, pq, row.w, row.lane};
    const int tid = threadIdx.x;
    uint32_t thrc = 0xFFFFFFFFu;
    uint32_t prefix = 0u;
    int nd = need;
#pragma unroll 1
    for (int hi = CBITS; hi > 0; hi -= 8) {
        const int shift = hi > 8 ? hi - 8 : 0;
        const uint32_t dmask = (1u << (hi - shift)) - 1u;
        int *hist = fs.hist[h];
        r.refresh();
#pragma unroll
        for (int i = 0; i < KPT; ++i) {
            if (r.tied(i, P)) {
                const uint32_t c = r.tie_key(i);
                if ((c >> hi) == prefix)
                    atomicAdd(&hist[(c >> shift) & dmask], 1);
            }
        }
        fs.hist[next_hist(h)][tid] = 0;
        __syncthreads();
        const Cut c3 = shared_cut<false>(hist, nd, fs.cut[0], 0);
        h = next_hist(h);
        prefix = (prefix << (hi - shift)) | (uint32_t)c3.bin;
        nd -= c3.before;
        // Tie keys are unique: the last digit leaves one key.
        if (c3.cnt == nd || shift == 0) {
            thrc = (prefix << shift) | ((1u << shift) - 1u);
            break;
        }
    }
    row.wq = wq;
    row.lq = lq;
    row.pq = pq;
    return thrc;
}

// Two 8-bit radix passes over ord16 find P; the ties at P are ranked when
// fewer than all of them are needed.
__device__ __forceinline__ SmallBound small_boundary(SmallRow &r, SmallSmem &fs, int &h)
{
    const int tid = threadIdx.x;
    // Pass 1: the top byte of ord16, over the non-empty words. An empty
    // word counts in the sink bin past the 256 (never read), which costs
    // less than a branch around the atomic.
    int *hist = fs.hist[h];
#pragma unroll
    for (int i = 0; i < KPT; ++i)
        atomicAdd(&hist[r.wd[i] != 0u ? r.wd[i] >> 24 : (uint32_t)HBINS], 1);
    fs.hist[next_hist(h)][tid] = 0;
    __syncthreads();
    const Cut c1 = shared_cut<true>(hist, TOPK, fs.cut[0], 0);
    h = next_hist(h);

    SmallBound b;
    b.P = 0u;
    b.thrc = 0xFFFFFFFFu;
    if (c1.total >= TOPK) {
        // Pass 2: the low byte of ord16, over the boundary bin's words:
        // [lo, lo + 2^24), one compare (pass 1's shifted bytes are not kept
        // live). For bin 0 that range holds the empty words too, which the
        // cut takes off bin 0 again (their count is all keys minus pass 1's
        // total). Only lo stays live across the pass: the first cut's other
        // fields are read again after it.
        const uint32_t lo = (uint32_t)c1.bin << 24;
        // The other words count in the sink bin, which costs less than a
        // branch around the atomic.
        hist = fs.hist[h];
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            atomicAdd(&hist[r.wd[i] - lo < 0x1000000u ? __byte_perm(r.wd[i], 0u, 0x4442u)
                                                       : (uint32_t)HBINS],
                      1);
        fs.hist[next_hist(h)][tid] = 0;
        __syncthreads();
        const Cut p1 = load_cut(fs.cut[0]);
        const int need2 = TOPK - p1.before;
        const Cut c2 =
            shared_cut<true>(hist, need2, fs.cut[1], p1.bin == 0 ? NKEYS - p1.total : 0);
        h = next_hist(h);
        b.P = ((uint32_t)load_cut(fs.cut[0]).bin << 8) | (uint32_t)c2.bin;
        const int need = need2 - c2.before; // of the m keys with ord16 == P
        const int m = c2.cnt;
        r.refresh();
        if (need < m && m <= TIE_CMP)
            b.thrc = small_ties_by_compare(r, fs, b.P, need, m, b.tmask);
        else if (need < m) {
            b.thrc = small_ties_by_radix(r, fs, b.P, need, h);
            b.tmask = (1u << KPT) - 1u; // test every key
        }
    }
    return b;
}

// Bit i: key i selected. Without a tie to rank (thrc all ones, the usual
// case) that is one compare of the word: ord16 >= P, or non-empty when
// fewer than K keys (P = 0); empty words are 0.
__device__ __forceinline__ uint32_t small_selected(SmallRow &row, const SmallBound &b)
{
    int wq = row.wq, lq = row.lq; // local copies (SmallRow's note)
    uint32_t pq = row.pq;
    SmallRow r{row.wd, wq, lq, pq, row.w, row.lane};
    uint32_t selbits = 0u;
    if (b.thrc == 0xFFFFFFFFu) {
        const uint32_t lo = lowest_word(b.P);
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            selbits |= (r.wd[i] >= lo ? 1u : 0u) << i;
    } else {
        // The keys above P by one compare each; a tie key only for the few
        // keys at P, in the threads that hold one (tmask): computed for
        // every key it cost more than the rest of this phase.
        const uint32_t top = (b.P << 16) | 0xFFFFu;
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            selbits |= (r.wd[i] > top ? 1u : 0u) << i;
        if (b.tmask != 0u) {
            r.refresh();
#pragma unroll
            for (int i = 0; i < KPT; ++i)
                if (((b.tmask >> i) & 1u) && r.tied(i, b.P) && r.tie_key(i) <= b.thrc)
                    selbits |= 1u << i;
        }
    }
    row.wq = wq;
    row.lq = lq;
    row.pq = pq;
    return selbits;
}

// Owned rows: the selected keys of segment `rank` whose block index is
// inside the block table of the row's request (docs/CONTRACT.md, "Owned
// rows").
struct SmallOwner {
    bool want_rows, req_ok;
    const int32_t *bt; // the request's block table row
};

__device__ __forceinline__ SmallOwner small_owner(const Out &o, long long t)
{
    SmallOwner ow;
    ow.want_rows = false;
    ow.req_ok = false;
    ow.bt = nullptr;
    if constexpr (BLOCK > 0) {
        ow.want_rows = o.rm.rows_out != nullptr;
        if (ow.want_rows) {
            const int32_t req = o.rm.req_id[t];
            ow.req_ok = req >= 0 && req < o.rm.num_reqs;
            ow.bt = o.rm.block_table + (long long)(ow.req_ok ? req : 0) * o.rm.block_table_stride;
        }
    }
    return ow;
}

__device__ __forceinline__ bool small_owns(const SmallRow &r, const SmallOwner &ow, const Out &o,
                                           int i, bool s)
{
    if constexpr (BLOCK > 0)
        return s && ow.req_ok && r.rank_of(i) == o.rank &&
               (long long)(r.local_of(i) / (uint32_t)BLOCK) < (long long)o.rm.block_table_cols;
    return false;
}

// Where each warp writes: its selected and owned keys counted, one barrier,
// then every warp's counts summed (bases: the warps before this one).
struct SmallCounts {
    int sel_base, sel_total, own_base, own_total;
};

// Exact mode (docs/CONTRACT.md, "Saturation word"): rank r is saturated iff
// each of its N slots holds a word above P, or at P with the gid of the
// next local id below gk, the K-th selected gid (the largest selected gid
// at P). gk is known only after the counts' barrier, so each warp records
// before it, for its groups' ranks: the bit of a rank with an empty slot or
// a word below P (returned), and fs.atp (1 + the largest local id at P, of
// all words and of the selected ones: within a rank gids rise with local
// ids, and local ids cost less than gids here). small_sat_word combines them.
// A group lies in one rank.
__device__ __forceinline__ void small_atp(const SmallRow &r, SmallSmem &fs, int q, uint32_t nx,
                                          uint32_t sx)
{
    // Most groups hold no word at P: one vote skips them.
    if (__any_sync(0xFFFFFFFFu, nx != 0u)) {
        nx = __reduce_max_sync(0xFFFFFFFFu, nx);
        sx = __reduce_max_sync(0xFFFFFFFFu, sx);
        if (r.lane == 0) {
            atomicMax(&fs.atp[0][q], nx);
            if (sx != 0u)
                atomicMax(&fs.atp[1][q], sx);
        }
    }
}

__device__ __forceinline__ uint32_t small_notsat(SmallRow &row, SmallSmem &fs, uint32_t P,
                                                 uint32_t selbits)
{
    int wq = row.wq, lq = row.lq; // local copies (SmallRow's note)
    uint32_t pq = row.pq;
    SmallRow r{row.wd, wq, lq, pq, row.w, row.lane};
    constexpr int GPR = LTOPK / 32; // groups a rank
    const uint32_t lo = lowest_word(P);
    uint32_t below = 0u, tm = 0u; // tm bit i: word i is at P
    if constexpr (KPT % GPR == 0) {
        // A warp's groups are whole ranks: GPR consecutive groups each.
#pragma unroll
        for (int c = 0; c < KPT / GPR; ++c) {
            if (r.has_group(c * GPR)) {
                uint32_t m = r.wd[c * GPR];
#pragma unroll
                for (int i = c * GPR + 1; i < (c + 1) * GPR; ++i)
                    m = min(m, r.wd[i]);
                below |= (m < lo ? 1u : 0u) << r.rank_of(c * GPR);
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            if (r.has_group(i))
                below |= (r.wd[i] < lo ? 1u : 0u) << r.rank_of(i);
    }
#pragma unroll
    for (int i = 0; i < KPT; ++i)
        tm |= (r.tied(i, P) ? 1u : 0u) << i;
    // Few warps hold a word at P (but all of them in tied rows): one vote
    // skips the rest.
    if (__any_sync(0xFFFFFFFFu, tm != 0u)) {
        r.refresh();
        if constexpr (KPT % GPR == 0) {
#pragma unroll
            for (int c = 0; c < KPT / GPR; ++c) {
                if (r.has_group(c * GPR)) {
                    uint32_t nx = 0u, sx = 0u;
#pragma unroll
                    for (int i = c * GPR; i < (c + 1) * GPR; ++i) {
                        if ((tm >> i) & 1u) {
                            const uint32_t l1 = r.local_of(i) + 1u;
                            nx = max(nx, l1);
                            sx = (selbits >> i) & 1u ? max(sx, l1) : sx;
                        }
                    }
                    small_atp(r, fs, r.rank_of(c * GPR), nx, sx);
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < KPT; ++i) {
                if (r.has_group(i)) {
                    const uint32_t nx = (tm >> i) & 1u ? r.local_of(i) + 1u : 0u;
                    small_atp(r, fs, r.rank_of(i), nx, (selbits >> i) & 1u ? nx : 0u);
                }
            }
        }
    }
    row.wq = wq;
    row.lq = lq;
    row.pq = pq;
    return __reduce_or_sync(0xFFFFFFFFu, below);
}

// The saturation word, from the counts and fs.atp, written by warp 0 after
// the counts' barrier: lane q takes rank q.
__device__ __forceinline__ void small_sat_word(const SmallSmem &fs, uint32_t P,
                                               uint32_t *__restrict__ sat)
{
    const int q = (int)threadIdx.x;
    const uint32_t notsat = __reduce_or_sync(0xFFFFFFFFu, q < NW ? fs.nsat[q] : 0u);
    const int sel_total =
        (int)__reduce_add_sync(0xFFFFFFFFu, q < NW ? (uint32_t)fs.wcnt[q][0] : 0u);
    uint32_t g = 0u, nx = 0u;
    if (q < WORLD) {
        // gk: the largest selected gid at P when K were selected (0
        // otherwise: then only words above P = 0 count).
        const uint32_t sx = fs.atp[1][q];
        if (sx != 0u && sel_total == TOPK)
            g = (uint32_t)dc::global_id((int32_t)sx - 1, q, WORLD, ILV);
        nx = fs.atp[0][q];
    }
    const uint32_t gk = __reduce_max_sync(0xFFFFFFFFu, g);
    const bool open = q < WORLD && !((notsat >> q) & 1u) &&
                      (nx == 0u || (uint32_t)dc::global_id((int32_t)nx, q, WORLD, ILV) < gk);
    const uint32_t mask = __ballot_sync(0xFFFFFFFFu, open);
    if (q == 0)
        sat[blockIdx.x] = (mask << 16) | P; // row t = blockIdx.x, not kept live
}

__device__ __forceinline__ SmallCounts small_counts(SmallRow &r, SmallSmem &fs,
                                                    const SmallOwner &ow, const Out &o,
                                                    uint32_t selbits)
{
    // The warp's selected keys: one reduction (past the last group every
    // word is 0, never selected).
    const int nsel = (int)__reduce_add_sync(0xFFFFFFFFu, (uint32_t)__popc(selbits));
    int nown = 0;
    if (ow.want_rows || EXACT) {
        // (EXACT too: the refresh here keeps the emit's registers as they
        // were when the saturation was counted in this phase.)
        r.refresh();
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            if (ow.want_rows && r.has_group(i))
                nown += __popc(__ballot_sync(0xFFFFFFFFu,
                                             small_owns(r, ow, o, i, (selbits >> i) & 1u)));
    }
    if (r.lane == 0) {
        fs.wcnt[r.w][0] = nsel;
        fs.wcnt[r.w][1] = nown;
    }
    __syncthreads();
    // Lane v < NW reads warp v's counts, and warp reductions (one
    // instruction each) sum them: all warps', and those below this one.
    SmallCounts c;
    const int v = r.lane;
    const bool below = v < r.w;
    int a = 0, own = 0;
    if (v < NW) {
        a = fs.wcnt[v][0];
        if constexpr (BLOCK > 0)
            own = fs.wcnt[v][1];
    }
    c.sel_total = (int)__reduce_add_sync(0xFFFFFFFFu, (uint32_t)a);
    c.sel_base = (int)__reduce_add_sync(0xFFFFFFFFu, below ? (uint32_t)a : 0u);
    c.own_total = c.own_base = 0;
    if constexpr (BLOCK > 0) {
        c.own_total = (int)__reduce_add_sync(0xFFFFFFFFu, (uint32_t)own);
        c.own_base = (int)__reduce_add_sync(0xFFFFFFFFu, below ? (uint32_t)own : 0u);
    }
    return c;
}

// The row's ids in position order from the warp's base, then -1 padding.
__device__ __forceinline__ void small_emit_ids(const SmallRow &r, const Out &o, long long t,
                                               uint32_t selbits, const SmallCounts &c,
                                               uint32_t lt)
{
    const int tid = threadIdx.x;
    int32_t *ids = o.ids + t * o.ids_stride;
    uint32_t at = (uint32_t)c.sel_base; // this warp's next output (< K)
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        if (r.has_group(i)) {
            const uint32_t b = emit_id(ids, at, lt, r.gid_of(i), selbits & (1u << i));
            at += (uint32_t)__popc(b);
        }
    }
    for (int p = c.sel_total + tid; p < TOPK; p += THREADS)
        ids[p] = -1;
}

// The owned physical rows in position order, -1 padding and their count.
__device__ __forceinline__ void small_emit_rows(const SmallRow &r, const SmallOwner &ow,
                                                const Out &o, long long t, uint32_t selbits,
                                                const SmallCounts &c, uint32_t lt)
{
    const int tid = threadIdx.x;
    const RowsMap &m = o.rm;
    int32_t *rws = m.rows_out + t * m.rows_out_stride;
    int own_base = c.own_base;
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
        if (r.has_group(i)) {
            const bool s = small_owns(r, ow, o, i, (selbits >> i) & 1u);
            const uint32_t b = __ballot_sync(0xFFFFFFFFu, s);
            if (s) {
                const uint32_t l = r.local_of(i);
                const uint32_t entry = (uint32_t)ow.bt[l / (uint32_t)BLOCK];
                rws[own_base + __popc(b & lt)] =
                    (int32_t)(entry * (uint32_t)m.stride_rows + l % (uint32_t)BLOCK);
            }
            own_base += __popc(b);
        }
    }
    for (int p = c.own_total + tid; p < TOPK; p += THREADS)
        rws[p] = -1;
    if (tid == 0)
        m.counts_out[t] = c.own_total;
}

// Histogram rotation: counting pass n counts into hist[n % 3] and clears
// hist[(n + 1) % 3], which the pass after it counts into. That histogram
// was last read after pass n - 2's barrier and before pass n - 1's, which
// every thread passed before pass n; and pass n's barrier orders the clear
// before pass n + 1's counts.
// Parameters: DC_SELECT_PARAMS (packed_abi.h).
extern "C" __global__ void __launch_bounds__(THREADS, SMALL_CTAS)
dcptopk_select(DC_KERNEL_PARAMS(DC_SELECT_PARAMS))
{
#ifdef DC_EMU
    uint32_t *const rowbuf = (uint32_t *)dc_emu_dynamic_smem(); // tests/emu's launch
#else
    extern __shared__ __align__(16) uint32_t rowbuf[]; // one row: ROW_WORDS words
#endif
    __shared__ __align__(16) SmallSmem fs;
    if constexpr (EXACT)
        dc::pdl_trigger(); // the push may start its CTAs (it waits for us)
    dc::pdl_wait();        // a dependent launch itself (packed.c)
    const long long rank_words = rank_stride_rows * WORDS;
    const bool bulk = BULK_SHAPE && ((unsigned long long)gathered & 15ull) == 0ull;
    const long long t = blockIdx.x; // one CTA a row
    if (t >= rows)
        return;
    small_start(rowbuf, fs, gathered, rank_words, t, bulk);
    int h = 0;
    uint32_t wd[KPT];
    int wq, lq;
    uint32_t pq;
    SmallRow r{wd, wq, lq, pq, 0, 0};
    small_load(r, rowbuf, fs, bulk);
    const SmallBound b = small_boundary(r, fs, h);
    // tau16: ord16 of the lowest selected key when K were selected; P then,
    // since every selected key has ord16 >= P and one has P (and P = 0
    // when fewer were).
    const uint32_t selbits = small_selected(r, b);
    if (EXACT && threadIdx.x == 0)
        fs.psat = b.P; // read after the counts' barrier

    const SmallOwner ow = small_owner(o, t);
    const SmallCounts c = small_counts(r, fs, ow, o, selbits);
    const uint32_t lt = lanemask_lt();
    r.refresh();
    if (EMIT_IDS && o.ids != nullptr)
        small_emit_ids(r, o, t, selbits, c, lt);
    if constexpr (BLOCK > 0)
        if (ow.want_rows)
            small_emit_rows(r, ow, o, t, selbits, c, lt);
    if constexpr (EXACT) {
        // Last, when the emits' registers are free: a warp's ranks, one
        // barrier, then warp 0 writes the word.
        r.refresh();
        const uint32_t P = fs.psat;
        const uint32_t ns = small_notsat(r, fs, P, selbits);
        if (r.lane == 0)
            fs.nsat[r.w] = ns;
        __syncthreads();
        if (threadIdx.x < 32)
            small_sat_word(fs, P, sat);
    }
}
#else

constexpr int KPT = (NKEYS + THREADS - 1) / THREADS;

// Starts the asynchronous copy of row t's words (W segments of WORDS words,
// rank r at r * rank_words) into buf, and commits it as one group (an empty
// group when t >= rows, so that "all groups but the last" stays the row
// being selected). V16: 16-byte copies (WORDS % 4 == 0, base 16-byte
// aligned), else 4-byte ones.
__device__ __forceinline__ void prefetch_row(uint32_t *buf, const int32_t *gathered,
                                             long long rank_words, long long t, long long rows,
                                             bool v16)
{
    if (t < rows) {
        const int32_t *row = gathered + t * WORDS;
        if (v16) {
            constexpr int VECS = WORDS / 4;
            for (int v = threadIdx.x; v < WORLD * VECS; v += THREADS) {
                const int r = v / VECS, c = v - r * VECS;
                const int32_t *src = row + r * rank_words + 4 * c;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                                 dc::smem_u32addr(buf + r * WORDS + 4 * c)),
                             "l"(src)
                             : "memory");
            }
        } else {
            for (int v = threadIdx.x; v < ROW_WORDS; v += THREADS) {
                const int r = v / WORDS, c = v - r * WORDS;
                const int32_t *src = row + r * rank_words + c;
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(
                                 dc::smem_u32addr(buf + v)),
                             "l"(src)
                             : "memory");
            }
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}


// Key of flat position p = r * N + j of the row (0 past the end or empty).
__device__ __forceinline__ uint64_t load_key(const int32_t *__restrict__ g0, long long rank_words,
                                             int flat)
{
    if (flat >= NKEYS)
        return 0ull;
    const int r = flat / LTOPK;
    const int j = flat - r * LTOPK;
    const int32_t *seg = g0 + (long long)r * rank_words;
    return decode((uint32_t)seg[j], (uint32_t)seg[LTOPK + (j >> 5)], j, r);
}

// Prefetching path: rows' words are double-buffered in dynamic shared memory.
constexpr bool PREFETCH = DC_SELECT_PREFETCH(KPT, ROW_WORDS * 4);

template <bool REG>
struct SelectKeys;

template <>
struct SelectKeys<true> {
    uint64_t k[KPT];
    __device__ __forceinline__ SelectKeys(const int32_t *g0, long long rank_words)
    {
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            k[i] = load_key(g0, rank_words, i * THREADS + (int)threadIdx.x);
    }
    __device__ __forceinline__ uint64_t get(int i) const { return k[i]; }
};

template <>
struct SelectKeys<false> {
    const int32_t *g0;
    long long rank_words;
    __device__ __forceinline__ SelectKeys(const int32_t *g, long long rw) : g0(g), rank_words(rw) {}
    __device__ __forceinline__ uint64_t get(int i) const
    {
        return load_key(g0, rank_words, i * THREADS + (int)threadIdx.x);
    }
};

// Key of flat position p = r * N + j of a row held in shared memory.
__device__ __forceinline__ uint64_t smem_key(const uint32_t *buf, int flat)
{
    if (flat >= NKEYS)
        return 0ull;
    const int r = flat / LTOPK;
    const int j = flat - r * LTOPK;
    const uint32_t *seg = buf + r * WORDS;
    return decode(seg[j], seg[LTOPK + (j >> 5)], j, r);
}

struct SmemKeys {
    uint64_t k[KPT];
    __device__ __forceinline__ explicit SmemKeys(const uint32_t *buf)
    {
        // tid through a volatile read: the per-key offsets are then
        // recomputed at each row instead of being hoisted out of the row
        // loop, where they would hold registers across the selection.
        int tid;
        asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            k[i] = smem_key(buf, i * THREADS + tid);
    }
    __device__ __forceinline__ uint64_t get(int i) const { return k[i]; }
};

// Selects row t from its keys and writes its outputs (and, exact, its
// saturation word).
template <class Keys>
__device__ __forceinline__ void select_row(const Keys &keys, long long t, const Out &o,
                                           uint32_t *__restrict__ sat, Smem &sm)
{
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const Sel s = radix_select<KPT>(keys, sm);
    emit<KPT>(keys, s, [&](int i) { return (i * THREADS + tid) / LTOPK; }, o, t, sm);

    if constexpr (EXACT) {
        // The K-th selected key when exactly K were taken: tau16 is its
        // ord16, gk its gid (both 0 otherwise).
        if (tid == 0) {
            sm.kth_key = ~0ull;
            sm.notsat = 0u;
        }
        __syncthreads();
        uint32_t tau = 0u, gk = 0u;
        if (s.count == TOPK) {
            uint64_t kth = s.thr_key;
            if (s.need_eq == 0) {
                uint64_t m = ~0ull;
                for_keys<KPT>([&](int i) {
                    const uint64_t k = keys.get(i);
                    if (selected(s, k, i * THREADS + tid))
                        m = k < m ? k : m;
                });
#pragma unroll
                for (int d = 16; d > 0; d >>= 1) {
                    const uint64_t y = __shfl_xor_sync(0xFFFFFFFFu, m, d);
                    m = y < m ? y : m;
                }
                if (lane == 0 && m != ~0ull)
                    atomicMin((unsigned long long *)&sm.kth_key, (unsigned long long)m);
                __syncthreads();
                kth = sm.kth_key;
            }
            tau = key_ord16(kth);
            gk = key_gid(kth);
        }
        // Rank r is saturated iff each of its N slots holds a key that may
        // hide a better unsent token: ord16 > tau16, or ord16 == tau16 with
        // the next local id's gid below gk (docs/CONTRACT.md, "Saturation
        // word"). N is a multiple of 32: a warp's 32 keys of one round
        // belong to one rank.
        for_keys<KPT>([&](int i) {
            const int flat0 = i * THREADS + w * 32;
            if (flat0 < NKEYS) {
                const uint64_t k = keys.get(i);
                const uint32_t o16 = key_ord16(k);
                const bool open =
                    k != 0ull && (o16 > tau || (o16 == tau && next_gid(key_gid(k)) < gk));
                const uint32_t b = __ballot_sync(0xFFFFFFFFu, open);
                if (lane == 0 && b != 0xFFFFFFFFu)
                    atomicOr(&sm.notsat, 1u << (flat0 / LTOPK));
            }
        });
        __syncthreads();
        if (tid == 0) {
            const uint32_t mask = ~sm.notsat & ((1u << WORLD) - 1u);
            sat[t] = (mask << 16) | tau;
        }
        // The next row's first writes to sm (radix_select) come after a
        // barrier that thread 0 reaches only past this read.
    }
}

// Parameters: DC_SELECT_PARAMS (packed_abi.h).
extern "C" __global__ void __launch_bounds__(THREADS, PREFETCH ? DC_SELECT_PREFETCH_CTAS : 1)
dcptopk_select(DC_KERNEL_PARAMS(DC_SELECT_PARAMS))
{
    __shared__ Smem sm;
    if constexpr (EXACT)
        dc::pdl_trigger(); // the push may start its CTAs (it waits for us)
    dc::pdl_wait();        // a dependent launch itself (packed.c)
    const long long rank_words = rank_stride_rows * WORDS;
    if constexpr (PREFETCH) {
        // Dynamic shared memory: two row buffers of ROW_WORDS words.
        extern __shared__ __align__(16) uint32_t bufs[];
        // Rows are 32-bit grid indices (the launcher checks); the loop keeps only
        // t and b live across a row (registers are at the launch bound).
        const int n = (int)rows;
        int t = (int)blockIdx.x;
        int b = 0;
        prefetch_row(bufs, gathered, rank_words, t, n,
                     WORDS % 4 == 0 && ((unsigned long long)gathered & 15ull) == 0ull);
        for (; t < n; t += (int)gridDim.x, b ^= 1) {
            prefetch_row(bufs + (b ^ 1) * ROW_WORDS, gathered, rank_stride_rows * WORDS,
                         t + (int)gridDim.x, n,
                         WORDS % 4 == 0 && ((unsigned long long)gathered & 15ull) == 0ull);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
            __syncthreads();
            const SmemKeys keys(bufs + b * ROW_WORDS);
            // Buffer b is refilled only at the next iteration's prefetch,
            // after the barriers of this row's selection.
            select_row(keys, t, o, sat, sm);
        }
        asm volatile("cp.async.wait_group 0;" ::: "memory");
    } else {
        const long long t = blockIdx.x;
        if (t >= rows)
            return;
        const SelectKeys<(KPT <= REG_MAX)> keys(gathered + t * WORDS, rank_words);
        select_row(keys, t, o, sat, sm);
    }
}

#endif

// The owned rows' CSR offsets after the counts (kernel_abi.h). Not in a
// tests/emu build: its inline function's __shared__ cannot share the
// poisoned section with the select's.
#ifndef DC_EMU
extern "C" __global__ void __launch_bounds__(DC_INDPTR_THREADS)
dcptopk_indptr(DC_KERNEL_PARAMS(DC_INDPTR_PARAMS))
{
    dc::pdl_wait(); // a dependent launch of the select
    dc::indptr_scan(counts, rows, indptr);
}
#endif
