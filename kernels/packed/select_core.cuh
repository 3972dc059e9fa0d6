// select_core.cuh - the block-wide exact top-K selection shared by select.cu
// (round 1) and rescue.cu (round 2), so that both emit bit-identical rows for
// the same candidate set (docs/CONTRACT.md, "Select", "Owned rows").
//
// One CTA handles one row. Thread `tid` owns the keys of flat positions
// p = i * THREADS + tid, i in [0, KPT): position order is (i, warp, lane).
// A key is 1 + ((ord16 << GID_BITS) | (2^GID_BITS - 1 - gid)): the +1 keeps
// 0 free for "empty slot" even for a caller's word whose ord16 is 0 and whose
// gid is the largest one (the reference treats every non-zero word as a
// candidate). Keys are unique unless a caller packed duplicate ids.
//
// The K-th largest key is found by an MSB-first radix select (9-bit digits,
// one bin per thread); the selected set is then "key > thr_key", plus, only
// when duplicates straddle the boundary, the first `need_eq` keys equal to
// thr_key in position order. Outputs are written in ascending position order
// through ballot prefix counts (no atomics, so the order never varies).
//
// Keys live in registers when a thread has at most REG_MAX of them (the
// common shapes); otherwise they are decoded again from global memory at
// every pass (large W * N or a large rescue; slower, same result).
//
// The including template defines DCPTOPK_THREADS (packed_abi.h) first.
#pragma once
#include "common.cuh"
#include "packed_abi.h"

namespace dcsel {

constexpr int THREADS = DCPTOPK_THREADS;
constexpr int NW = THREADS / 32;
constexpr int TOPK = DCPTOPK_TOPK;
constexpr int LTOPK = DCPTOPK_LOCAL_TOPK;
constexpr int WORLD = DCPTOPK_WORLD_SIZE;
constexpr int ILV = DCPTOPK_INTERLEAVE;
constexpr int BLOCK = DCPTOPK_BLOCK_SIZE;
constexpr bool EMIT_IDS = DCPTOPK_EMIT_IDS != 0;
#ifdef DCPTOPK_GID_BITS
constexpr int GID_BITS = DCPTOPK_GID_BITS;
#else
constexpr int GID_BITS = DC_GID_BITS(WORLD);
#endif
// The includer may append the sending rank below every key (rescue.cu), so
// that a key names its segment without a search: it orders and ties keys
// as the untagged key does, since equal gids always come from one rank.
#ifdef DCSEL_TAG_BITS
constexpr int TAG_BITS = DCSEL_TAG_BITS;
#else
constexpr int TAG_BITS = 0;
#endif
// One bit above ord16: the +1 of a key whose other bits are all ones.
constexpr int KEY_BITS = 17 + GID_BITS + TAG_BITS;
constexpr uint64_t GID_MASK = (1ull << GID_BITS) - 1ull;
constexpr int RADIX = 9;
constexpr int BINS = 1 << RADIX;
constexpr int PASSES = (KEY_BITS + RADIX - 1) / RADIX;
constexpr int CHUNK = 32; // rounds per ballot-scan chunk (ballot_rank: a bit a round)
constexpr int REG_MAX = DC_SELECT_REG_MAX;
// When the boundary bin of a pass holds at most FIN_MAX keys, they are
// gathered and one warp ranks them by comparison (two keys per lane)
// instead of running the remaining radix passes: after the two passes that
// resolve ord16 the tied bin usually holds a few dozen keys.
constexpr int FIN_MAX = 64;
constexpr int WORDS = DC_PACKED_ROW_WORDS(LTOPK);     // packed row words
constexpr int PUSH_WORDS = DC_PACKED_ROW_WORDS(TOPK); // pushed list words
constexpr int SLOTS = DC_RESCUE_SLOTS(TOPK, LTOPK);

static_assert(CHUNK * NW == THREADS, "one ballot-scan entry per thread");
static_assert(TOPK % 32 == 0 && LTOPK % 32 == 0, "K and N are multiples of 32");
static_assert(WORLD >= 1 && WORLD <= 16, "1..16 ranks");
static_assert(ILV >= 1 && (ILV & (ILV - 1)) == 0, "interleave is a power of two");
static_assert(KEY_BITS <= 63, "keys fit in 64 bits");

// Output of a row: ids and/or owned physical rows (a kernel parameter).
using RowsMap = dc_rows_param;
using Out = dc_select_out;

struct Smem {
    int hist[BINS];
    int scan[CHUNK * NW];
    int warp_tot[NW];
    int thr_bin;
    int new_committed;
    int done;
    int eq_last;        // flat position of the last equal key taken
    uint32_t notsat;    // exact select: bit r = rank r not saturated
    uint64_t kth_key;   // exact select: the smallest selected key
    int seg[17];        // rescue: segment starts
    int thr_cnt;        // keys in the boundary bin of the last pass
    int fin_n;          // keys gathered for the warp finish
    int fin_rank;       // gathered keys above the threshold key
    int fin_eq;         // gathered keys equal to it
    uint64_t fin_thr;   // the threshold key
    uint64_t fin_keys[FIN_MAX];
    int32_t *out_base;     // emit: the row's ids, then its owned rows (emit_with)
    const int32_t *out_bt; // emit: its request's block table row
};

// Decoded key of slot j of a packed row sent by `owner` (0 = empty).
__device__ __forceinline__ uint64_t decode(uint32_t word, uint32_t plane, int j, int owner)
{
    if (word == 0u)
        return 0ull;
    const uint32_t l = (0xFFFFu - (word & 0xFFFFu)) | (((plane >> (j & 31)) & 1u) << 16);
    const uint32_t gid = (uint32_t)dc::global_id((int32_t)l, owner, WORLD, ILV);
    const uint64_t key = (((uint64_t)(word >> 16) << GID_BITS) | (GID_MASK - (uint64_t)gid)) + 1ull;
    return (key << TAG_BITS) | (uint64_t)(TAG_BITS ? owner : 0);
}

__device__ __forceinline__ uint32_t key_ord16(uint64_t key)
{
    return (uint32_t)(((key >> TAG_BITS) - 1ull) >> GID_BITS);
}

__device__ __forceinline__ uint32_t key_gid(uint64_t key)
{
    return (uint32_t)(GID_MASK - (((key >> TAG_BITS) - 1ull) & GID_MASK));
}

// The gid of the local id after gid's on the same rank: the next one in its
// block of ILV, or the first of the rank's next block.
__device__ __forceinline__ uint32_t next_gid(uint32_t gid)
{
    return gid + 1u + ((gid & (uint32_t)(ILV - 1)) == (uint32_t)(ILV - 1) ? (uint32_t)((WORLD - 1) * ILV) : 0u);
}

// The rank a tagged key came from.
__device__ __forceinline__ int key_tag(uint64_t key)
{
    return (int)(key & ((1ull << TAG_BITS) - 1ull));
}

// The lanes below this one. DC_EMU: tests/emu's host emulator, which runs
// no PTX (NVRTC never defines it).
__device__ __forceinline__ uint32_t lanemask_lt()
{
#ifdef DC_EMU
    return dc_emu_lanemask_lt();
#else
    uint32_t m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
#endif
}

// A pointer that thread 0 stored in shared memory, read again at each use
// (ordered by the caller's barriers): kept in registers it was rebuilt from
// t and the strides for every key at the register bound.
template <class T>
__device__ __forceinline__ T *smem_ptr(T *const &slot)
{
    return *(T *const volatile *)&slot;
}

// The emits' store (emit_with): st.global of an address built from the
// base it read from shared memory. DC_EMU: a plain store.
__device__ __forceinline__ void st_global_u32(int32_t *p, uint32_t v)
{
#ifdef DC_EMU
    *p = (int32_t)v;
#else
    asm volatile("st.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
#endif
}

// st_global_u32 where q holds, as one predicated store: every lane computes
// the address and value, and no branch goes around them.
__device__ __forceinline__ void st_global_u32_if(bool q, int32_t *p, uint32_t v)
{
#ifdef DC_EMU
    if (q)
        *p = (int32_t)v;
#else
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q st.global.u32 [%0], %1;\n\t}"
                 :
                 : "l"(p), "r"(v), "r"((uint32_t)q)
                 : "memory");
#endif
}

// Inclusive block-wide sum; *total = the block's sum. Ends with a barrier,
// so it may be called again at once.
__device__ __forceinline__ int block_incl_scan(int x, int *warp_tot, int *total)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xFFFFFFFFu, x, o);
        if (lane >= o)
            x += y;
    }
    if (lane == 31)
        warp_tot[w] = x;
    __syncthreads();
    if (w == 0) {
        int v = lane < NW ? warp_tot[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xFFFFFFFFu, v, o);
            if (lane >= o)
                v += y;
        }
        if (lane < NW)
            warp_tot[lane] = v;
    }
    __syncthreads();
    if (w > 0)
        x += warp_tot[w - 1];
    *total = warp_tot[NW - 1];
    __syncthreads();
    return x;
}

// Calls f(i) for i in [0, rounds): fully unrolled for register-resident
// keys. `rounds` <= KPT is the same in every thread: a row may hold fewer
// keys than the kernel's bound (the rescue's rows with few saturated ranks),
// and its empty rounds are then skipped, not scanned.
template <int KPT, class F>
__device__ __forceinline__ void for_chunk(int c0, F f, int rounds = KPT)
{
    if constexpr (KPT <= REG_MAX) {
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            if (i < rounds)
                f(i);
    } else {
#pragma unroll 4
        for (int ii = 0; ii < CHUNK; ++ii)
            if (c0 + ii < rounds)
                f(c0 + ii);
    }
}

template <int KPT, class F>
__device__ __forceinline__ void for_keys(F f, int rounds = KPT)
{
    if constexpr (KPT <= REG_MAX) {
        for_chunk<KPT>(0, f, rounds);
    } else {
#pragma unroll 1
        for (int c0 = 0; c0 < rounds; c0 += CHUNK)
            for_chunk<KPT>(c0, f, rounds);
    }
}

// A selection already decided, as bits: bit i is the thread's key of round
// i (KPT <= 32). ballot_rank takes it in place of a predicate.
struct SelBits {
    uint32_t m;
    __device__ __forceinline__ bool operator()(int i) const { return (m >> i) & 1u; }
};
template <class P>
struct IsSelBits {
    static constexpr bool value = false;
};
template <>
struct IsSelBits<SelBits> {
    static constexpr bool value = true;
};

// For every key with pred(i) true, calls emit(i, rank) with its rank among
// those keys in position order. Returns the number of such keys. Every
// thread of the block must call it (barriers inside). tail = false leaves
// out the barrier after the last emit, for a caller with a barrier of its
// own before sm.scan is written again (and before what emit read). pred
// may be a SelBits. EMIT_ALL: emit(i, rank, p) is called for every key of
// the rounds, selected (p) or not, and acts only where p holds (a
// predicated store instead of a branch a key).
template <int KPT, bool EMIT_ALL = false, class Pred, class Emit>
__device__ __forceinline__ int ballot_rank(Smem &sm, Pred pred, Emit emit, int rounds = KPT,
                                           bool tail = true)
{
    constexpr bool BITS = IsSelBits<Pred>::value;
    static_assert(!BITS || KPT <= 32, "a bit a round, in one chunk");
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int base = 0;
    auto chunk = [&](int c0) {
        // pred(i) once a key: bit i - c0 (CHUNK = 32 rounds) for the second
        // pass, where the owned-rows emit's (a gid decoded, its rank and
        // block checked) cost more than the ballot.
        uint32_t pm = 0u;
        if constexpr (BITS) {
            // The warp's count of every round at once, not a ballot a
            // round: the bits of rounds k, k + 8, k + 16 and k + 24 summed
            // over the lanes by one reduction, a byte each (at most 32).
            pm = rounds < 32 ? pred.m & ((1u << rounds) - 1u) : pred.m;
            uint32_t v = 0u;
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const uint32_t sum = __reduce_add_sync(0xFFFFFFFFu, (pm >> k) & 0x01010101u);
                v = (lane & 7) == k ? sum : v;
            }
            if (lane < rounds)
                sm.scan[lane * NW + w] = (int)((v >> ((lane >> 3) * 8)) & 0xFFu);
        } else {
            for_chunk<KPT>(c0, [&](int i) {
                const bool p = pred(i);
                pm |= (p ? 1u : 0u) << (i - c0);
                const uint32_t b = __ballot_sync(0xFFFFFFFFu, p);
                if (lane == 0)
                    sm.scan[(i - c0) * NW + w] = __popc(b);
            }, rounds);
        }
        __syncthreads();
        const int n_entries = (rounds - c0 < CHUNK ? rounds - c0 : CHUNK) * NW;
        const int v = (int)threadIdx.x < n_entries ? sm.scan[threadIdx.x] : 0;
        int total;
        const int incl = block_incl_scan(v, sm.warp_tot, &total);
        if ((int)threadIdx.x < n_entries)
            sm.scan[threadIdx.x] = base + incl - v;
        __syncthreads();
        for_chunk<KPT>(c0, [&](int i) {
            const bool p = (pm >> (i - c0)) & 1u;
            const uint32_t b = __ballot_sync(0xFFFFFFFFu, p);
            if constexpr (EMIT_ALL)
                emit(i, sm.scan[(i - c0) * NW + w] + __popc(b & lanemask_lt()), p);
            else if (p)
                emit(i, sm.scan[(i - c0) * NW + w] + __popc(b & lanemask_lt()));
        }, rounds);
        base += total;
        if (tail || c0 + CHUNK < rounds)
            __syncthreads();
    };
    if constexpr (KPT <= REG_MAX) {
        chunk(0);
    } else {
#pragma unroll 1
        for (int c0 = 0; c0 < rounds; c0 += CHUNK)
            chunk(c0);
    }
    return base;
}

constexpr int CUT_BINS = 256; // shared_cut's histograms: 8-bit digits

// The bin that holds the need-th key of a 256-bin histogram, scanning bins
// from the largest (DESC) or the smallest, for the whole CTA, after the
// barrier that ended its counting pass. Warp 0 finds it: lane L sums 8
// consecutive bins of the scan order (two int4 loads, conflict-free), one
// warp scan finds the lane, the lane loads its bins again and walks them,
// and writes the result to shared memory, which every thread reads after
// one more barrier. (In select.cu's small path, each warp finding the cut
// on its own cost eight times the instructions, the kernel being
// issue-bound; loading the bins again keeps them out of registers across
// the scan, where the row's words leave few.) need >= 1. When total < need,
// the result is bin 0 with before = 0 and cnt = 0 (callers check total
// first). adj0 is taken off bin 0 first (keys a pass counted there that
// are not keys: select.cu's pass 2 empty words). hist is 16-byte aligned.
struct Cut {
    int bin;
    int before; // keys in the bins scanned before it
    int cnt;    // keys in it
    int total;  // keys in the histogram
};

// A cut that shared_cut wrote, read again: a slot is written again only
// after the next counting pass's barrier, which every thread reaches after
// its read.
__device__ __forceinline__ Cut load_cut(const int4 &slot)
{
    const int4 v = slot;
    Cut r;
    r.bin = v.x;
    r.before = v.y;
    r.cnt = v.z;
    r.total = v.w;
    return r;
}

template <bool DESC>
__device__ __forceinline__ Cut shared_cut(const int *hist, int need, int4 &slot, int adj0)
{
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const int4 *v =
            reinterpret_cast<const int4 *>(hist + (DESC ? CUT_BINS - 8 - 8 * lane : 8 * lane));
        // Bin 0 is the first word of the last lane's bins (DESC), or of the
        // first lane's.
        const int fix = lane == (DESC ? 31 : 0) ? adj0 : 0;
        int s;
        {
            const int4 a = v[0], b = v[1];
            s = a.x - fix + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
        }
        int incl = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
            if (lane >= o)
                incl += y;
        }
        const int total = __shfl_sync(0xFFFFFFFFu, incl, 31);
        const int excl = incl - s;
        if (excl < need && incl >= need) {
            // The lane's running sums rise along the scan order: the bins
            // whose sum stays below need come before the cut bin, and the
            // one whose sum reaches need is it.
            int4 a = v[0];
            const int4 b = v[1];
            a.x -= fix;
            int c[8];
            if (DESC) {
                c[0] = b.w, c[1] = b.z, c[2] = b.y, c[3] = b.x;
                c[4] = a.w, c[5] = a.z, c[6] = a.y, c[7] = a.x;
            } else {
                c[0] = a.x, c[1] = a.y, c[2] = a.z, c[3] = a.w;
                c[4] = b.x, c[5] = b.y, c[6] = b.z, c[7] = b.w;
            }
            int k = 0, cum = excl, before = excl, cnt = 0;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const bool was_below = cum < need;
                cum += c[q];
                const bool below = cum < need;
                k += below ? 1 : 0;
                before = below ? cum : before;
                cnt = was_below && !below ? c[q] : cnt;
            }
            slot = make_int4(DESC ? CUT_BINS - 1 - (8 * lane + k) : 8 * lane + k, before, cnt, total);
        } else if (lane == 31 && total < need) {
            slot = make_int4(0, 0, 0, total);
        }
    }
    __syncthreads();
    return load_cut(slot);
}

// Of the m unique keys in list (m <= THREADS), the need-th smallest into
// *out: thread i < m ranks list[i] by comparison, and the one with need - 1
// keys below it writes it. The caller's barriers order the list before it
// and *out after it.
template <class K>
__device__ __forceinline__ void kth_smallest_unique(const K *list, int m, int need, K *out)
{
    const int tid = threadIdx.x;
    if (tid < m) {
        const K x = list[tid];
        int less = 0;
        for (int q = 0; q < m; ++q)
            less += list[q] < x ? 1 : 0;
        if (less == need - 1)
            *out = x;
    }
}

// Result of the radix select: selected = key > thr_key, or key == thr_key
// with flat position <= eq_last when need_eq > 0.
struct Sel {
    uint64_t thr_key;
    int need_eq;
    int eq_last;
    int count; // number selected = min(K, non-empty keys)
};

// Keys live in rounds [0, rounds) (for_chunk).
template <int KPT, class Keys>
__device__ __forceinline__ Sel radix_select(const Keys &keys, Smem &sm, int rounds = KPT)
{
    // Checked here, not at namespace scope: select.cu's small-row path
    // (256 threads) uses this header's types but not its radix select.
    static_assert(KPT > 0 && THREADS == BINS, "one radix bin per thread");
    const int tid = threadIdx.x;
    Sel s;
    s.thr_key = 0ull;
    s.need_eq = 0;
    s.eq_last = -1;
    s.count = 0;
    uint64_t prefix = 0ull;
    int committed = 0;
    bool fin = false;
    // Not unrolled: the passes differ only in their shifts, and five copies
    // of the loops over every key would not fit the instruction cache.
#pragma unroll 1
    for (int p = 0; p < PASSES; ++p) {
        if (fin)
            break;
        const int hi = KEY_BITS - RADIX * p;
        const int shift = hi > RADIX ? hi - RADIX : 0;
        const int width = hi - shift;
        sm.hist[tid] = 0;
        __syncthreads();
        for_keys<KPT>([&](int i) {
            const uint64_t k = keys.get(i);
            // An increment by one: the compiler emits the warp-aggregated
            // shared atomic (ATOMS.POPC.INC), so the crowded top digit
            // (sign and exponent) costs no more than the others.
            if (k != 0ull && (k >> hi) == prefix)
                atomicAdd(&sm.hist[(int)((k >> shift) & (uint64_t)(BINS - 1))], 1);
        }, rounds);
        __syncthreads();
        const int need = TOPK - committed;
        const int b = BINS - 1 - tid;
        const int cnt = sm.hist[b];
        int total;
        const int incl = block_incl_scan(cnt, sm.warp_tot, &total);
        if (total < need) {
            // Only in pass 0: fewer than K candidates, take them all.
            s.count = total;
            fin = true;
            break;
        }
        if (cnt > 0 && incl >= need && incl - cnt < need) {
            sm.thr_bin = b;
            sm.thr_cnt = cnt;
            sm.new_committed = committed + incl - cnt;
            sm.done = incl == need;
            sm.fin_n = 0;
        }
        __syncthreads();
        const int tb = sm.thr_bin;
        const int nc = sm.new_committed;
        const int dn = sm.done;
        const int tcnt = sm.thr_cnt;
        s.count = TOPK;
        const uint64_t np = (prefix << width) | (uint64_t)tb;
        if (dn) {
            const uint64_t lo = np << shift;
            s.thr_key = lo ? lo - 1ull : 0ull;
            fin = true;
        } else {
            prefix = np;
            committed = nc;
            if (shift == 0) {
                // Equal keys (duplicate ids) straddle the K-th place.
                s.thr_key = prefix;
                s.need_eq = TOPK - committed;
                fin = true;
            } else if (tcnt <= FIN_MAX) {
                // Warp finish: the TOPK - committed largest of the tcnt
                // keys of the boundary bin (order of gathering is free:
                // only values are compared here; equal keys are ranked by
                // position below, as after the last pass).
                const int want = TOPK - committed;
                for_keys<KPT>([&](int i) {
                    const uint64_t k = keys.get(i);
                    if (k != 0ull && (k >> shift) == prefix)
                        sm.fin_keys[atomicAdd(&sm.fin_n, 1)] = k;
                }, rounds);
                __syncthreads();
                if (tid < 32) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int me = tid + 32 * h;
                        if (me < tcnt) {
                            const uint64_t k = sm.fin_keys[me];
                            int above = 0, eq = 0;
                            for (int j = 0; j < tcnt; ++j) {
                                const uint64_t x = sm.fin_keys[j];
                                above += x > k ? 1 : 0;
                                eq += x == k ? 1 : 0;
                            }
                            // Every key equal to the threshold writes the
                            // same values.
                            if (above < want && above + eq >= want) {
                                sm.fin_thr = k;
                                sm.fin_rank = above;
                                sm.fin_eq = eq;
                            }
                        }
                    }
                }
                __syncthreads();
                const uint64_t thr = sm.fin_thr;
                const int above = sm.fin_rank, eq = sm.fin_eq;
                if (above + eq == want) {
                    s.thr_key = thr - 1ull; // key >= thr
                } else {
                    s.thr_key = thr;
                    s.need_eq = want - above;
                }
                fin = true;
            }
        }
    }
    if (s.need_eq > 0) {
        const uint64_t thr = s.thr_key;
        const int need = s.need_eq;
        if (tid == 0)
            sm.eq_last = -1;
        __syncthreads();
        ballot_rank<KPT>(
            sm, [&](int i) { return keys.get(i) == thr; },
            [&](int i, int r) {
                if (r == need - 1)
                    sm.eq_last = i * THREADS + tid;
            }, rounds);
        s.eq_last = sm.eq_last;
        // s.thr_key keys above it are selected; equal ones up to eq_last.
        s.thr_key = thr;
        __syncthreads();
    }
    return s;
}

__device__ __forceinline__ bool selected(const Sel &s, uint64_t k, int flat)
{
    return k != 0ull && (k > s.thr_key || (s.need_eq > 0 && k == s.thr_key && flat <= s.eq_last));
}

// Bit i: key i of this thread (rounds [0, rounds), KPT <= 32) is selected.
template <int KPT, class Keys>
__device__ __forceinline__ uint32_t selected_mask(const Keys &keys, const Sel &s, int rounds)
{
    static_assert(KPT <= 32, "a bit a key");
    uint32_t m = 0u;
#pragma unroll
    for (int i = 0; i < KPT; ++i)
        if (i < rounds)
            m |= (selected(s, keys.get(i), i * THREADS + (int)threadIdx.x) ? 1u : 0u) << i;
    return m;
}

// Writes the row's ids and/or owned rows (+ count) in ascending position
// order: sel_of(i) (a callable or a SelBits) says whether key i is
// selected, gid_of(i) its global id (called for selected keys only,
// possibly in divergent code; with a SelBits the ids emit calls it for
// every key of the rounds, so it may read only shared memory), seg_of(i)
// the rank whose segment holds it. tail = false: the caller has a barrier
// after it before sm.scan and sm.out_base are written again (ballot_rank).
template <int KPT, class SelOf, class GidOf, class Seg>
__device__ __forceinline__ void emit_with(SelOf sel_of, GidOf gid_of, Seg seg_of, const Out &o,
                                          long long t, Smem &sm, int rounds = KPT,
                                          bool tail = true)
{
    const int tid = threadIdx.x;
    // Block-uniform: the owned-rows emit follows the ids emit, which must
    // then end in its barrier.
    const bool rows_next = BLOCK > 0 && o.rm.rows_out != nullptr;
    if constexpr (EMIT_IDS) {
        if (o.ids) {
            int32_t *ids = o.ids + t * o.ids_stride;
            // Each store reads the row's base from shared memory (smem_ptr),
            // ordered by ballot_rank's barriers.
            if (tid == 0)
                sm.out_base = ids;
            // A known selection's stores are predicated: gid_of reads only
            // shared memory, so every lane may compute it.
            int n;
            if constexpr (IsSelBits<SelOf>::value) {
                n = ballot_rank<KPT, true>(
                    sm, sel_of,
                    [&](int i, int r, bool p) {
                        st_global_u32_if(p, smem_ptr(sm.out_base) + r, gid_of(i));
                    }, rounds, tail || rows_next);
            } else {
                n = ballot_rank<KPT>(
                    sm, sel_of,
                    [&](int i, int r) {
                        st_global_u32(smem_ptr(sm.out_base) + r, gid_of(i));
                    }, rounds, tail || rows_next);
            }
            for (int p = n + tid; p < TOPK; p += THREADS)
                ids[p] = -1;
        }
    }
    if constexpr (BLOCK > 0) {
        if (o.rm.rows_out) {
            const RowsMap &m = o.rm;
            const int32_t req = m.req_id[t];
            const bool req_ok = req >= 0 && req < m.num_reqs;
            int32_t *rows = m.rows_out + t * m.rows_out_stride;
            // Both bases come from shared memory, as the ids emit's does
            // (whose last barrier is behind every read of its base).
            if (tid == 0) {
                sm.out_base = rows;
                sm.out_bt = m.block_table + (long long)(req_ok ? req : 0) * m.block_table_stride;
            }
            auto local_of = [&](uint32_t gid) -> uint32_t {
                return (gid / (uint32_t)(WORLD * ILV)) * ILV + gid % ILV;
            };
            auto owned = [&](int i) {
                if (!req_ok || !sel_of(i) || seg_of(i) != o.rank)
                    return false;
                return (long long)(local_of(gid_of(i)) / (uint32_t)BLOCK) <
                       (long long)m.block_table_cols;
            };
            auto store = [&](int i, int r) {
                const uint32_t l = local_of(gid_of(i));
                const uint32_t entry = (uint32_t)smem_ptr(sm.out_bt)[l / (uint32_t)BLOCK];
                st_global_u32(smem_ptr(sm.out_base) + r, entry * (uint32_t)m.stride_rows + l % (uint32_t)BLOCK);
            };
            int n;
            if constexpr (IsSelBits<SelOf>::value) {
                // The owned keys as bits too, so that ballot_rank counts
                // them by reduction. A break past the row's rounds, as in
                // the rescue's selection loop.
                uint32_t own = 0u;
#pragma unroll
                for (int i = 0; i < KPT; ++i) {
                    if (i >= rounds)
                        break;
                    if (owned(i))
                        own |= 1u << i;
                }
                n = ballot_rank<KPT>(sm, SelBits{own}, store, rounds, tail);
            } else {
                n = ballot_rank<KPT>(sm, owned, store, rounds, tail);
            }
            for (int p = n + tid; p < TOPK; p += THREADS)
                rows[p] = -1;
            if (tid == 0)
                m.counts_out[t] = n;
        }
    }
}

// emit_with for the radix select's result over 64-bit keys.
template <int KPT, class Keys, class Seg>
__device__ __forceinline__ void emit(const Keys &keys, const Sel &s, Seg seg_of, const Out &o,
                                     long long t, Smem &sm, int rounds = KPT, bool tail = true)
{
    const int tid = threadIdx.x;
    // Register-resident keys: the selection is decided once a key, as one
    // bit, instead of at every ballot of both emits (64-bit compares).
    uint32_t selm = 0u;
    if constexpr (KPT <= REG_MAX && KPT <= 32)
        selm = selected_mask<KPT>(keys, s, rounds);
    emit_with<KPT>(
        [&](int i) -> bool {
            if constexpr (KPT <= REG_MAX && KPT <= 32)
                return (selm >> i) & 1u;
            else
                return selected(s, keys.get(i), i * THREADS + tid);
        },
        [&](int i) { return key_gid(keys.get(i)); }, seg_of, o, t, sm, rounds, tail);
}

} // namespace dcsel
