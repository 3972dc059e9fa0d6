// topn_select.cuh - exact local top-N of one bf16 row, packed: the selection
// shared by topn_pack.cu (N := local_topk) and push.cu (N := topk).
//
// Contract (docs/CONTRACT.md, "Local top-N + pack"): the candidates of a row
// are the columns l < E = min(row_end, max_local_len, 2^17) whose logit is not
// NaN, ordered by (ord16 descending, l ascending); the first min(N, v) are
// sent, in ascending local id order, then empty slots (word 0); plane word w
// holds bit 16 of the local ids of slots 32w .. 32w+31.
//
// One row is processed by a group of C CTAs (C = 1, or a thread-block cluster
// of C = 2, 4, 8 CTAs: the launcher sets the cluster size; the template knows
// it as DC_TOPN_CLUSTER). CTA c owns the columns [c * chunk, (c + 1) * chunk)
// of the row (chunk: a multiple of 8, from the launcher) and keeps them in
// shared memory as 16-bit keys (key16x2: ord16 + 0x7F, NaN below every
// value), so HBM is read once. The selection is exact:
//  1. the row's bytes arrive by bulk copies (cp.async.bulk, in
//     DC_TOPN_PIECES pieces, each on its own mbarrier: no registers hold
//     loads in flight); each piece is turned into keys in place while the
//     next ones arrive. The maximum of each 8-key vector is kept (one 16-bit
//     entry a vector, in shared memory after the keys: the launcher adds
//     chunk / 4 bytes) and counted in a histogram of its top 11 bits. The
//     floor of the bin of the N-th largest maximum is a lower bound lb of
//     the N-th largest key (N vectors each hold a key >= it); with one CTA a
//     row, or when that bin holds more than 4N maxima (tied or shifted
//     rows), a 32-bin histogram of that bin's maxima raises lb to the N-th
//     largest maximum itself. A cluster counts the maxima of the first
//     DC_TOPN_LB_PIECES pieces only (the N-th largest of a subset is a bound
//     too), so that the exchange overlaps the last piece;
//  2. one block scan turns the maxima >= lb into the list of those vectors
//     (ascending, written over the maxima), and one pass over the list counts
//     their keys in a *window* histogram of full 16-bit resolution: bin d =
//     key - lb for d < 2048, keys above the window in one overflow count.
//     When fewer than N keys overflow (always but on contrived rows), the
//     window holds the N-th largest key exactly: one block scan of the window
//     gives the threshold tau, the count of keys > tau and the keys == tau
//     still needed. Otherwise an 11-bit pass over the listed keys finds the
//     bin of the N-th key and a second window pass starts there (the slow,
//     exact fallback);
//  3. a stable compaction of the listed vectors (ascending local id) writes
//     every key > tau and the lowest-id (N - count_gt) keys == tau.
// Steps 2 and 3 touch only listed vectors, one per thread (with one CTA a
// row: the N vectors of the largest maxima and their ties), so the work a
// key costs outside step 1 follows the list, not the row. A cluster's CTAs
// push their histograms (the counted maxima, then the window) into each
// other's shared memory with st.async, each push completing on the
// receiver's mbarrier: no cluster barrier and no fence on the way, and each
// CTA sums the group's counts (and those of the CTAs before it: its base in
// the output) straight into the registers of the block scan. Since the slots are in ascending local id order, the slots
// whose id has bit 16 set are a suffix [j0, count): the plane words follow
// from j0 = the number of selected ids below 2^16, which the CTA holding
// column 65536 knows from its first slot and its own ids (no group barrier
// after the compaction: a CTA only waits, before exiting, until its peers
// have read its histograms).
//
// NaN keys (< DC_KEY_MIN) are never counted nor selected; when v <= N every
// non-NaN key is taken (no tie rule). Nothing depends on the value
// distribution but the shared atomics of the histograms and the list's
// length: heavily tied rows (integer or +100-shifted scores in bf16) list
// most vectors. Their maxima share a bin and their listed keys mostly equal
// lb, and a warp's atomics on one address serialise, so the window counts
// keys == lb in registers, a crowded cluster's refinement counts runs of
// equal maxima, and the compaction stops once the group's selection is
// behind.
#pragma once
#include "common.cuh"
#include "topn_abi.h"

#ifndef DC_TOPN_CLUSTER
#error "define DC_TOPN_CLUSTER (1, 2, 4 or 8) before including topn_select.cuh"
#endif
static_assert(DC_TOPN_CLUSTER == 1 || DC_TOPN_CLUSTER == 2 || DC_TOPN_CLUSTER == 4 ||
                  DC_TOPN_CLUSTER == 8,
              "cluster size 1, 2, 4 or 8");
static_assert(DCPTOPK_THREADS >= 256 && DCPTOPK_THREADS <= 1024,
              "256..1024 threads per CTA");

#define DC_TOPN_BINS 2048          // histogram bins (11 bits, or a 2048-key window)
#define DC_KEY_MIN 0x00FEu         // the key of -inf, the least non-NaN key
#define DC_KEY_ORD 0x007Fu         // key - DC_KEY_ORD = ord16 (non-NaN keys)
#define DC_TOPN_PIECES 4           // bulk copies (and mbarriers) per CTA and row
// A cluster's CTAs count the maxima of their first 3 pieces only (lb from
// 3/4 of the vectors: still a bound), so that they send them to their peers
// while the last piece lands and turns into keys.
#define DC_TOPN_LB_PIECES (DC_TOPN_PIECES - 1)
#define DC_TOPN_WARPS (DCPTOPK_THREADS / 32)
#define DC_TOPN_BPT (DC_TOPN_BINS / DCPTOPK_THREADS) // bins per thread in a scan
static_assert(DC_TOPN_BINS % DCPTOPK_THREADS == 0, "whole bins per thread");
// A thread lists at most 32 vectors (chunk <= DC_TOPN_CHUNK_MAX: at most
// 8192 vectors): one flag bit a vector in a 32-bit word.
static_assert(DC_TOPN_CHUNK_MAX / 8 / DCPTOPK_THREADS <= 32, "flag bits fit a word");

namespace dc {

struct alignas(16) u32x4 {
    uint32_t x, y, z, w;
};

struct alignas(8) u32x2 {
    uint32_t x, y;
};

// ------------------------------------------------------- PTX helpers

__device__ __forceinline__ uint32_t ldg_nc_u16(const uint16_t *p)
{
    unsigned short v;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t cluster_rank()
{
#if DC_TOPN_CLUSTER > 1
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
#else
    return 0u;
#endif
}

// The arriving half of a cluster barrier with release semantics for the
// whole CTA (dc::cluster_arrive: one release fence a CTA, which shortens the
// decode-shaped rows' cluster barriers).
__device__ __forceinline__ void cluster_arrive_release() { dc::cluster_arrive(); }

// Every thread of every CTA of the group; orders shared and global memory
// (release / acquire at cluster scope). With one CTA: __syncthreads().
__device__ __forceinline__ void group_sync()
{
#if DC_TOPN_CLUSTER > 1
    cluster_arrive_release();
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
    __syncthreads();
#endif
}

// The two halves of group_sync, for a CTA's exit: arrive once this CTA's
// reads of its peers' shared memory are done, wait just before exiting (a
// CTA's shared memory must outlive its peers' reads of it). No-ops with one
// CTA.
__device__ __forceinline__ void group_arrive()
{
#if DC_TOPN_CLUSTER > 1
    cluster_arrive_release();
#endif
}

__device__ __forceinline__ void group_wait()
{
#if DC_TOPN_CLUSTER > 1
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// The shared::cluster address of `p` (of this CTA's layout) in CTA `rank`.
__device__ __forceinline__ uint32_t cluster_addr(const void *p, uint32_t rank)
{
    return dc::cluster_map(p, rank);
}

// Shared-memory word `p` (of this CTA's layout) in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t remote_ld(const uint32_t *p, uint32_t rank)
{
#if DC_TOPN_CLUSTER > 1
    const uint32_t a = cluster_addr(p, rank);
    uint32_t v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
#else
    (void)rank;
    return *(volatile const uint32_t *)p;
#endif
}

// Four consecutive words (16-byte aligned) of CTA `rank`.
__device__ __forceinline__ u32x4 remote_ld4(const uint32_t *p, uint32_t rank)
{
    u32x4 v;
    const uint32_t a = cluster_addr(p, rank);
    asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(a)
                 : "memory");
    return v;
}

#if DC_TOPN_CLUSTER > 1
// Four words (16-byte aligned) to the same offset in CTA `rank`'s shared
// memory by an asynchronous store, which completes 16 bytes of the current
// phase of that CTA's mbarrier `bar`. No fence: the receiver sees the words
// once it observes the phase complete (mbar_wait<true>).
__device__ __forceinline__ void push4(uint32_t *p, uint64_t *bar, uint32_t rank, const u32x4 &v)
{
    const uint32_t a = cluster_addr(p, rank), m = cluster_addr(bar, rank);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32"
                 " [%0], {%1, %2, %3, %4}, [%5];" ::"r"(a),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(m)
                 : "memory");
}

// Two words (8-byte aligned), the same way (8 bytes of the phase).
__device__ __forceinline__ void push2(uint32_t *p, uint64_t *bar, uint32_t rank, uint32_t v0, uint32_t v1)
{
    const uint32_t a = cluster_addr(p, rank), m = cluster_addr(bar, rank);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(a),
                 "r"(v0), "r"(v1), "r"(m)
                 : "memory");
}

// One word, the same way (4 bytes of the phase).
__device__ __forceinline__ void push1(uint32_t *p, uint64_t *bar, uint32_t rank, uint32_t v)
{
    const uint32_t a = cluster_addr(p, rank), m = cluster_addr(bar, rank);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(a),
                 "r"(v), "r"(m)
                 : "memory");
}

#endif

// 0xFFFF in each 16-bit half whose top bit is set, else 0 (prmt with the
// sign-replicating selectors 9 and B: bytes 1 and 3).
__device__ __forceinline__ uint32_t sign_halves(uint32_t w)
{
    uint32_t m;
    asm("prmt.b32 %0, %1, 0, 0xBB99;" : "=r"(m) : "r"(w));
    return m;
}

// The selection's 16-bit keys: unsigned order = value order, every NaN
// below every value. key = ord16 + 0x7F for a non-NaN pattern (so >=
// DC_KEY_MIN = 0x00FE: -inf), 0x0000..0x00FD for a NaN. Three instructions
// a word: the sign-replicated halves (prmt) flip the magnitude of negative
// values (one lop3), and one 16x2 add of 0x807F (wrapping within each half)
// moves the 0x8000 of ord16 and the 0x7F offset in at once; the 127 positive
// NaN patterns (0x7F81..0x7FFF) wrap to 0x0000..0x007E, the negative ones
// land on 0x007F..0x00FD.
__device__ __forceinline__ uint32_t key16x2(uint32_t w)
{
    const uint32_t t = w ^ (sign_halves(w) & 0x7FFF7FFFu);
    uint32_t k;
    asm("add.u16x2 %0, %1, %2;" : "=r"(k) : "r"(t), "r"(0x807F807Fu));
    return k;
}

// Largest of the eight 16-bit keys of a vector (max.u16x2: sm_90).
__device__ __forceinline__ uint32_t max_key8(const u32x4 &k)
{
    uint32_t a, b, m;
    asm("max.u16x2 %0, %1, %2;" : "=r"(a) : "r"(k.x), "r"(k.y));
    asm("max.u16x2 %0, %1, %2;" : "=r"(b) : "r"(k.z), "r"(k.w));
    asm("max.u16x2 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(b));
    const uint32_t lo = m & 0xFFFFu, hi = m >> 16;
    return lo > hi ? lo : hi;
}

// Key e (0..7) of a vector, without indexing registers (that would put the
// vector in local memory).
__device__ __forceinline__ uint32_t key_at(const u32x4 &k, uint32_t e)
{
    const uint32_t a = (e & 2u) ? k.y : k.x;
    const uint32_t b = (e & 2u) ? k.w : k.z;
    const uint32_t w = (e & 4u) ? b : a;
    return (e & 1u) ? (w >> 16) : (w & 0xFFFFu);
}

// --------------------------------------------------- block primitives

// Scratch words of the block scans and the warp passes: each slot is written
// once per row, so no barrier protects a reuse.
enum { WS_MAX, WS_COARSE, WS_TAU, WS_TAU_B, WS_LIST, WS_C0, WS_C1, WS_COUNT };

struct alignas(16) TopnShared {
    uint64_t bar[DC_TOPN_PIECES];          // the bulk copies' mbarriers
    uint32_t hist_local[DC_TOPN_BINS];     // this CTA's window (C = 1: first the maxima)
#if DC_TOPN_CLUSTER > 1
    uint32_t hist_max_local[DC_TOPN_BINS]; // this CTA's 8-key maxima, 11 bits
    // What the peers pushed: slot k holds CTA (rank - 1 - k) mod C's.
    uint32_t rx_max[DC_TOPN_CLUSTER - 1][DC_TOPN_BINS]; // their counted maxima
    uint32_t rx_win[DC_TOPN_CLUSTER - 1][DC_TOPN_BINS]; // their windows
    uint64_t rx_bar[2];                                 // rx_max's, rx_win's + rx_ovf's
    uint32_t rx_ovf[DC_TOPN_CLUSTER - 1];               // their ovf_local
#endif
    uint32_t ws[WS_COUNT][DC_TOPN_WARPS];
    uint32_t fine[32];                     // maxima in lb's bin, by their low 5 bits
    uint32_t ovf_local;                    // this CTA's keys above the window
    uint32_t lo_count;                     // the CTA holding column 65536: its ids < 2^16 taken
    uint32_t bin, above, upto, total;      // a scan's result (group counts)
    uint32_t b_above, b_eq, b_total;       // the same, CTAs before this one
};
// TopnShared sits at the start of the dynamic shared memory and the keys at
// this offset (DC_TOPN_STATE_BYTES, topn_abi.h, which the launcher adds
// too): all of it dynamic, so that the launcher's opt-in above 48 KiB covers
// the whole footprint. The keys start 128-byte aligned: the bulk copies into
// them were slower at 16-byte alignment.
#define DC_TOPN_SHARED_BYTES DC_TOPN_STATE_BYTES(DC_TOPN_CLUSTER)
static_assert(sizeof(TopnShared) <= DC_TOPN_SHARED_BYTES, "TopnShared fits its reservation");
static_assert(DC_TOPN_SHARED_BYTES % 128 == 0, "keys stay 128-byte aligned");

// The bins a thread owns in a scan: top - j, j < DC_TOPN_BPT, with
// top = BINS - 1 - tid * BPT (thread order = descending bins). h: the group's
// counts; b (with BEFORE): the counts of the CTAs before this one. With one
// CTA and `clear`, each bin is zeroed by the only thread that reads it (the
// array is reused as the next histogram after the scan's barrier).
template <bool BEFORE>
__device__ __forceinline__ void group_bins(uint32_t *local, uint32_t crank, bool clear,
                                           uint32_t (&h)[DC_TOPN_BPT], uint32_t (&b)[DC_TOPN_BPT])
{
    constexpr int BPT = DC_TOPN_BPT;
    const uint32_t first = DC_TOPN_BINS - (threadIdx.x + 1u) * BPT; // = top - (BPT - 1)
#pragma unroll
    for (int j = 0; j < BPT; j++)
        h[j] = b[j] = 0u;
#if DC_TOPN_CLUSTER > 1
    (void)clear;
#pragma unroll
    for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++) {
        uint32_t v[BPT];
        if (BPT % 4 == 0) {
#pragma unroll
            for (int j = 0; j < BPT; j += 4) {
                const u32x4 q = remote_ld4(&local[first + j], c);
                v[j] = q.x;
                v[(j + 1) % BPT] = q.y;
                v[(j + 2) % BPT] = q.z;
                v[(j + 3) % BPT] = q.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < BPT; j++)
                v[j] = remote_ld(&local[first + j], c);
        }
        // v[j] is bin first + j = top - (BPT - 1 - j).
#pragma unroll
        for (int j = 0; j < BPT; j++) {
            h[j] += v[BPT - 1 - j];
            if (BEFORE && c < crank)
                b[j] += v[BPT - 1 - j];
        }
    }
#else
    (void)crank;
#pragma unroll
    for (int j = 0; j < BPT; j++) {
        h[j] = local[first + BPT - 1 - j];
        if (clear)
            local[first + BPT - 1 - j] = 0u;
    }
#endif
}

// Exclusive prefix sum over the CTA (*total = the sum), and the same of b
// when BEFORE. One barrier: `ws` (2 * WARPS words with BEFORE) must not be
// reused in the row.
template <bool BEFORE>
__device__ __forceinline__ uint32_t block_scan(uint32_t v, uint32_t vb, uint32_t *ws, uint32_t *wsb,
                                               uint32_t *total, uint32_t *exb, uint32_t *totb)
{
    const uint32_t lane = lane_id(), warp = warp_id();
    uint32_t x = v, xb = vb;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
        uint32_t yb = 0;
        if (BEFORE)
            yb = __shfl_up_sync(0xFFFFFFFFu, xb, d);
        if (lane >= (uint32_t)d) {
            x += y;
            xb += yb;
        }
    }
    if (lane == 31) {
        ws[warp] = x;
        if (BEFORE)
            wsb[warp] = xb;
    }
    __syncthreads();
    // Lane w reads warp w's sum; two warp reductions add them up.
    const uint32_t s = lane < (uint32_t)DC_TOPN_WARPS ? ws[lane] : 0u;
    *total = __reduce_add_sync(0xFFFFFFFFu, s);
    const uint32_t before = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? s : 0u);
    if (BEFORE) {
        const uint32_t sb = lane < (uint32_t)DC_TOPN_WARPS ? wsb[lane] : 0u;
        *totb = __reduce_add_sync(0xFFFFFFFFu, sb);
        *exb = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? sb : 0u) + xb - vb;
    }
    return before + x - v;
}

// The bin of the need-th largest count (descending) of the histogram whose
// bins this thread holds in h (group_bins): sh.bin, sh.above (counts in
// higher bins), sh.upto (above + the bin's count), sh.total (all counts);
// when total < need, bin = DC_TOPN_BINS (none). With BEFORE, the same of the
// CTAs before this one (b): sh.b_above, sh.b_eq (the bin's), sh.b_total.
// Every thread calls it; two barriers.
template <bool BEFORE>
__device__ __forceinline__ void find_bin(const uint32_t (&h)[DC_TOPN_BPT],
                                         const uint32_t (&b)[DC_TOPN_BPT], uint32_t need,
                                         uint32_t *ws, uint32_t *wsb, TopnShared &sh)
{
    constexpr int BPT = DC_TOPN_BPT;
    const int32_t top = DC_TOPN_BINS - 1 - (int32_t)threadIdx.x * BPT;
    uint32_t s = 0, sb = 0;
#pragma unroll
    for (int j = 0; j < BPT; j++) {
        s += h[j];
        sb += b[j];
    }
    uint32_t total, bbefore = 0, btotal = 0;
    uint32_t before = block_scan<BEFORE>(s, sb, ws, wsb, &total, &bbefore, &btotal);
    if (threadIdx.x == 0) {
        sh.total = total;
        sh.b_total = btotal;
        if (total < need) {
            sh.bin = DC_TOPN_BINS;
            sh.above = sh.upto = total;
            sh.b_above = btotal;
            sh.b_eq = 0u;
        }
    }
    if (total >= need && before < need && before + s >= need) {
#pragma unroll
        for (int j = 0; j < BPT; j++) {
            if (before < need && before + h[j] >= need) {
                sh.bin = (uint32_t)(top - j);
                sh.above = before;
                sh.upto = before + h[j];
                sh.b_above = bbefore;
                sh.b_eq = b[j];
            }
            before += h[j];
            bbefore += b[j];
        }
    }
    __syncthreads();
}

// Counts the keys >= base of a vector in the window histogram, bin
// (key - base) >> shift; returns how many fall above the window. With
// shift 0 the keys == base are counted in *eq instead of bin 0: on tied
// rows most listed keys equal lb, and atomics on one address serialise.
template <uint32_t SHIFT>
__device__ __forceinline__ uint32_t window_add(uint32_t *hist, const u32x4 &k, uint32_t base,
                                               uint32_t *eq)
{
    const uint32_t w4[4] = {k.x, k.y, k.z, k.w};
    uint32_t ovf = 0;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const uint32_t key = (w4[e >> 1] >> ((e & 1) * 16)) & 0xFFFFu;
        if (SHIFT == 0 && key == base) {
            ++*eq;
        } else if (key >= base) {
            const uint32_t d = (key - base) >> SHIFT;
            if (d < DC_TOPN_BINS)
                atomicAdd(&hist[d], 1u);
            else
                ovf++;
        }
    }
    return ovf;
}

// --------------------------------------------------------- the selection

// The helpers below take their callers' variables by reference, as the
// lambdas of topn_row they replaced captured them: that passing kept the
// machine code of every variant as it was (bench/sass_compare.sh; taking
// them by value reordered the code of the cluster variants).

#if DC_TOPN_CLUSTER > 1
// Pushes: every thread sends its scan bins (those of group_bins) to each
// peer, which adds them up from its own shared memory.
static_assert(DC_TOPN_BPT == 2 || DC_TOPN_BPT % 4 == 0,
              "a thread's bins go out in 8- or 16-byte pushes");

// own[j]: this CTA's count of bin bfirst + j (bfirst: the first of this
// thread's scan bins), read from `local`, pushed to slot d - 1 of the CTA d
// ranks after this one.
__device__ __forceinline__ void push_bins(const uint32_t *local, uint32_t (*rx)[DC_TOPN_BINS],
                                          uint64_t *bar, uint32_t (&own)[DC_TOPN_BPT],
                                          const uint32_t &crank, const uint32_t &bfirst)
{
    constexpr int BPT = DC_TOPN_BPT;
#pragma unroll
    for (int j = 0; j < BPT; j++)
        own[j] = local[bfirst + j];
#pragma unroll
    for (uint32_t d = 1; d < DC_TOPN_CLUSTER; d++) {
        const uint32_t to = (crank + d) % DC_TOPN_CLUSTER;
        if constexpr (BPT == 2) {
            push2(&rx[d - 1][bfirst], bar, to, own[0], own[1]);
        } else {
#pragma unroll
            for (int j = 0; j < BPT; j += 4)
                push4(&rx[d - 1][bfirst + j], bar, to,
                      u32x4{own[j], own[j + 1], own[j + 2], own[j + 3]});
        }
    }
}

// Whether slot k's pusher comes before this CTA (its counts are in b).
__device__ __forceinline__ bool slot_before(uint32_t k, const uint32_t &crank)
{
    return (crank + DC_TOPN_CLUSTER - 1u - k) % DC_TOPN_CLUSTER < crank;
}

// The group's counts of this thread's bins, h (and b: the CTAs before this
// one), in group_bins' order: bin bfirst + j is h[BPT - 1 - j].
__device__ __forceinline__ void sum_bins(const uint32_t (&own)[DC_TOPN_BPT],
                                         uint32_t (*rx)[DC_TOPN_BINS], uint32_t (&h)[DC_TOPN_BPT],
                                         uint32_t (&b)[DC_TOPN_BPT], const uint32_t &crank,
                                         const uint32_t &bfirst)
{
    constexpr int BPT = DC_TOPN_BPT;
#pragma unroll
    for (int j = 0; j < BPT; j++) {
        h[BPT - 1 - j] = own[j];
        b[BPT - 1 - j] = 0u;
    }
#pragma unroll
    for (uint32_t k = 0; k + 1 < DC_TOPN_CLUSTER; k++) {
        const bool before = slot_before(k, crank);
#pragma unroll
        for (int j = 0; j < BPT; j++) {
            const uint32_t q = rx[k][bfirst + j];
            h[BPT - 1 - j] += q;
            b[BPT - 1 - j] += before ? q : 0u;
        }
    }
}

#endif

// The fine counts and the histograms at zero (the set-up, while the bulk
// copies land).
__device__ __forceinline__ void clear_counts(TopnShared &sh)
{
    const uint32_t tid = threadIdx.x;
    if (tid < 32u)
        sh.fine[tid] = 0u;
    // 16-byte stores, unrolled: one a thread and histogram at 512 threads
    // (every warp of every row paid the plain loop's bookkeeping).
    constexpr uint32_t Q = DC_TOPN_BINS / 4;
#pragma unroll
    for (uint32_t j = 0; j < (Q + DCPTOPK_THREADS - 1) / DCPTOPK_THREADS; j++) {
        const uint32_t i = tid + j * DCPTOPK_THREADS;
        if (Q % DCPTOPK_THREADS == 0 || i < Q) {
            ((u32x4 *)sh.hist_local)[i] = u32x4{0u, 0u, 0u, 0u};
#if DC_TOPN_CLUSTER > 1
            ((u32x4 *)sh.hist_max_local)[i] = u32x4{0u, 0u, 0u, 0u};
#endif
        }
    }
}

// Vector v's keys in place (raw: its logits), its maximum to list entry v
// and, while counting, to the maxima's histogram.
__device__ __forceinline__ void to_keys(u32x4 *const &kv, uint16_t *const &list,
                                        uint32_t *const &hist_max, const bool &counting, int32_t v,
                                        const u32x4 &raw)
{
    u32x4 k;
    k.x = key16x2(raw.x);
    k.y = key16x2(raw.y);
    k.z = key16x2(raw.z);
    k.w = key16x2(raw.w);
    kv[v] = k;
    const uint32_t m = max_key8(k);
    list[v] = (uint16_t)m;
    if (DC_TOPN_CLUSTER == 1 || counting)
        atomicAdd(&hist_max[m >> 5], 1u);
}

// f(bit, maximum) over the maxima of this thread's vectors [first, first
// + g), bit = the vector's offset from first.
template <class F>
__device__ __forceinline__ void each_max(const int32_t &first, const int32_t &g,
                                         const int32_t &nvec, uint16_t *const &list, F &&f)
{
    auto four = [&](int32_t j) {
        const int32_t v = first + j;
        if (v + 4 <= nvec) {
            const u32x2 q = *(const u32x2 *)&list[v];
            f(j, q.x & 0xFFFFu);
            f(j + 1, q.x >> 16);
            f(j + 2, q.y & 0xFFFFu);
            f(j + 3, q.y >> 16);
        } else {
            for (int32_t e = 0; v + e < nvec; e++)
                f(j + e, (uint32_t)list[v + e]);
        }
    };
    if constexpr (DC_TOPN_CLUSTER > 1) {
        // A cluster's chunks are long (g = 16 at 512 threads): unrolled
        // to the largest g, so that the loads go out together and the
        // flag bits are constants.
        constexpr int32_t GMAX =
            ((DC_TOPN_CHUNK_MAX / 8 + DCPTOPK_THREADS - 1) / DCPTOPK_THREADS + 3) & ~3;
#pragma unroll
        for (int32_t j = 0; j < GMAX; j += 4)
            if (j < g)
                four(j);
    } else {
        for (int32_t j = 0; j < g; j += 4)
            four(j);
    }
}

// ------------------------------------------------------- the row's phases
// topn_row is the sequence of the functions below, in this order (then
// topn_planes). Each takes this CTA's share of the row (TopnChunk) and what
// the phases before it returned, so that what a phase reads and leaves is
// in its signature.

// This CTA's share of the row: set by topn_row, read by every phase.
struct TopnChunk {
    uint32_t tid, lane;  // threadIdx.x, lane_id()
    uint32_t crank;      // this CTA's rank in the group
    int32_t lo;          // its first column
    int32_t len;         // its columns below E (<= chunk)
    int32_t nvec;        // 8-key vectors in smem
    int32_t nfull;       // full vectors in HBM
    // Step 1 runs in rounds of THREADS vectors (one a thread); a piece is
    // rpp whole rounds, so a thread waits for a piece only at its first round.
    int32_t rounds;
    int32_t rpp;         // rounds per piece
    int32_t qv;          // vectors per piece
    const uint16_t *row; // the row's first logit
    u32x4 *kv;           // the keys, 8 a vector
    uint16_t *list;      // chunk / 8 entries after the keys (the launcher's extra space)
    uint32_t *hist_max;  // the maxima's histogram
};

// What a cluster's CTA pushed of its own scan bins (push_bins): the scans
// add its peers' counts to these. Empty with one CTA.
struct TopnOwn {
#if DC_TOPN_CLUSTER > 1
    uint32_t bfirst;           // the first of this thread's scan bins
    uint32_t max[DC_TOPN_BPT]; // its counted maxima
    uint32_t win[DC_TOPN_BPT]; // its window
#endif
};

// ---- 1. the set-up: the bulk copies go out first, then the histograms are
// cleared. A cluster's CTA notes its first scan bin (own.bfirst).
__device__ __forceinline__ void topn_start(const TopnChunk &ck, TopnShared &sh, TopnOwn &own)
{
    const uint32_t tid = ck.tid;
    const uint16_t *src = ck.row + ck.lo;
    const int32_t nfull = ck.nfull, qv = ck.qv;
    if (tid == 0) {
        for (int p = 0; p < DC_TOPN_PIECES; p++)
            mbar_init(&sh.bar[p]);
#if DC_TOPN_CLUSTER > 1
        mbar_init(&sh.rx_bar[0]);
        mbar_init(&sh.rx_bar[1]);
#endif
        mbar_init_fence();
        for (int p = 0; p < DC_TOPN_PIECES; p++) {
            const int32_t v0 = p * qv, v1 = v0 + qv < nfull ? v0 + qv : nfull;
            if (v0 < v1)
                bulk_load(&ck.kv[v0], src + (int64_t)v0 * 8, (uint32_t)(v1 - v0) * 16u, &sh.bar[p]);
        }
        sh.ovf_local = 0u;
        sh.lo_count = 0u;
#if DC_TOPN_CLUSTER > 1
        mbar_expect_tx(&sh.rx_bar[0], (DC_TOPN_CLUSTER - 1) * DC_TOPN_BINS * 4u);
        mbar_expect_tx(&sh.rx_bar[1], (DC_TOPN_CLUSTER - 1) * (DC_TOPN_BINS * 4u + 4u));
#endif
    }
    clear_counts(sh);
    __syncthreads();
#if DC_TOPN_CLUSTER > 1
    // A peer's mbarriers must be initialised (fenced above) before the
    // first push to it: this relaxed arrive, and the wait just before that
    // push (push_max).
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    own.bfirst = DC_TOPN_BINS - (tid + 1u) * DC_TOPN_BPT;
#else
    (void)own;
#endif
}

#if DC_TOPN_CLUSTER > 1
// This CTA's counted maxima to its peers, once they are all in.
__device__ __forceinline__ void push_max(const TopnChunk &ck, TopnShared &sh, TopnOwn &own)
{
    __syncthreads(); // the counted maxima are in
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    push_bins(sh.hist_max_local, sh.rx_max, &sh.rx_bar[0], own.max, ck.crank, own.bfirst);
}
#endif

// ---- 1. keys in place, piece by piece. Each vector's largest key goes to
// its entry of the list area (entry v: the list is written over these
// maxima in step 2) and to the maxima's histogram: a vector of NaN keys
// only (maximum < DC_KEY_MIN) lands in bins 0..7, below every bin whose
// floor lb may take (lb >= DC_KEY_MIN), so no branch keeps it out. Ends
// once the counted maxima are in: pushed to the peers (a cluster), or past
// a barrier (one CTA).
__device__ __forceinline__ void topn_keys(const TopnChunk &ck, TopnShared &sh, TopnOwn &own)
{
    const uint32_t tid = ck.tid;
    const int32_t len = ck.len, nvec = ck.nvec, nfull = ck.nfull;
    const int32_t rounds = ck.rounds, rpp = ck.rpp;
    u32x4 *kv = ck.kv;
    uint16_t *list = ck.list;
    uint32_t *hist_max = ck.hist_max;
    bool counting = true; // maxima still go to the histogram (uniform)
    if constexpr (DC_TOPN_CLUSTER > 1) {
        // A cluster's CTA (one an SM, long chunks) loads 4 rounds' vectors
        // before converting them: its few warps need the loads in flight side
        // by side (the compiler keeps the list's 16-bit stores in order with
        // the next vector's load, as it cannot tell them apart), which
        // shortens the decode-shaped (few, long) rows.
        constexpr int B = 4;
        // Unrolled over the pieces: faster at 8 rows in a same-run A/B,
        // every family (docs/TUNING.md).
#pragma unroll
        for (int32_t p = 0; p < DC_TOPN_PIECES; p++) { // uniform
            const int32_t r0 = p * rpp;
            if (r0 >= rounds)
                break; // later pieces are empty too
            // Whole rounds of this piece: [r0, r1). Every round but the last
            // is whole; the last one goes to the piece that holds it, checked.
            const int32_t r1 = r0 + rpp < rounds ? r0 + rpp : rounds - 1;
            if (p == DC_TOPN_LB_PIECES && counting) {
                // The maxima counted so far are lb's: to the peers, while
                // this piece lands, so that the lb scan need not wait for
                // the last piece.
#if DC_TOPN_CLUSTER > 1
                push_max(ck, sh, own);
#endif
                counting = false;
            }
            mbar_wait(&sh.bar[p], 0u);
            int32_t r = r0;
            for (; r + B <= r1; r += B) {
                u32x4 raw[B];
#pragma unroll
                for (int j = 0; j < B; j++)
                    raw[j] = kv[(r + j) * DCPTOPK_THREADS + (int32_t)tid];
#pragma unroll
                for (int j = 0; j < B; j++)
                    to_keys(kv, list, hist_max, counting, (r + j) * DCPTOPK_THREADS + (int32_t)tid,
                            raw[j]);
            }
            for (; r < r1; r++) {
                const int32_t v = r * DCPTOPK_THREADS + (int32_t)tid;
                to_keys(kv, list, hist_max, counting, v, kv[v]);
            }
            if (r0 + rpp >= rounds) {
                const int32_t v = (rounds - 1) * DCPTOPK_THREADS + (int32_t)tid;
                if (v < nfull)
                    to_keys(kv, list, hist_max, counting, v, kv[v]);
            }
        }
    } else {
        // One CTA a row (four an SM, 32 registers): a vector at a time, one
        // wait at each piece's first round (the batched loop above is slower
        // here: under the register bound its loads in flight cost more than
        // the other resident CTAs already hide).
        for (int32_t r = 0, p = 0, wait_at = 0; r < rounds; r++) { // uniform
            if (r == wait_at) {
                mbar_wait(&sh.bar[p], 0u);
                p++;
                wait_at += rpp;
            }
            const int32_t v = r * DCPTOPK_THREADS + (int32_t)tid;
            if (v < nfull)
                to_keys(kv, list, hist_max, counting, v, kv[v]);
        }
    }
    if (nfull < nvec && tid == DCPTOPK_THREADS - 1) {
        // The partial last vector: 0xFFFF is a NaN pattern (never a
        // candidate) past len.
        const uint16_t *src = ck.row + ck.lo;
        uint32_t h[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int32_t c = nfull * 8 + e;
            h[e] = c < len ? ldg_nc_u16(src + c) : 0xFFFFu;
        }
        u32x4 raw;
        raw.x = h[0] | (h[1] << 16);
        raw.y = h[2] | (h[3] << 16);
        raw.z = h[4] | (h[5] << 16);
        raw.w = h[6] | (h[7] << 16);
        to_keys(kv, list, hist_max, counting, nfull, raw);
    }
#if DC_TOPN_CLUSTER > 1
    if (counting) // short rows: every piece was counted
        push_max(ck, sh, own);
#else
    (void)own;
    group_sync();
#endif
}

// The lower bound of the N-th largest key, and what its refinement needs.
struct TopnBound {
    uint32_t lb;        // >= DC_KEY_MIN
    uint32_t mbin;      // the bin of the N-th largest counted maximum
    uint32_t need_fine; // the N-th largest maximum is the need_fine-th of mbin
    bool crowded;       // lb's bin holds many maxima (uniform over the group)
};

// ---- the lower bound lb (>= DC_KEY_MIN): the floor of the bin of the
// N-th largest counted maximum; DC_KEY_MIN (every non-NaN key) when that
// bin is one of bins 0..7 or fewer than N vectors have a maximum. The
// maxima's array is cleared as it is read (one CTA): it becomes the window
// histogram after this scan's barriers.
template <int NSEL>
__device__ __forceinline__ TopnBound topn_bound(const TopnChunk &ck, TopnShared &sh, TopnOwn &own)
{
    TopnBound bd;
    uint32_t h[DC_TOPN_BPT], b[DC_TOPN_BPT];
#if DC_TOPN_CLUSTER > 1
    mbar_wait<true>(&sh.rx_bar[0], 0u);
    sum_bins(own.max, sh.rx_max, h, b, ck.crank, own.bfirst);
#else
    (void)own;
    group_bins<false>(ck.hist_max, ck.crank, true, h, b);
#endif
    find_bin<false>(h, b, (uint32_t)NSEL, sh.ws[WS_MAX], nullptr, sh);
    bd.mbin = sh.bin;
    bd.need_fine = (uint32_t)NSEL - sh.above;
    bd.crowded = sh.upto > 4u * (uint32_t)NSEL;
    bd.lb = bd.mbin < DC_TOPN_BINS && (bd.mbin << 5) > DC_KEY_MIN ? (bd.mbin << 5) : DC_KEY_MIN;
    return bd;
}

// Step 2's share of a thread: the maxima of vectors [tid * g, tid * g + g),
// g a multiple of 4 (8-byte reads). g <= 32 (<= 8192 vectors, >= 256
// threads): one flag bit a vector.
__device__ __forceinline__ int32_t list_span(const TopnChunk &ck)
{
    return ((ck.nvec + DCPTOPK_THREADS - 1) / DCPTOPK_THREADS + 3) & ~3;
}

// ---- lb to the exact N-th largest maximum (uniform), returned: the
// maxima of lb's bin by value; need_fine of them (>= 1, <= the bin's count)
// are the largest. Fewer vectors are listed: a bin spans a quarter of an
// octave, and without this step over a quarter of a normal prefill row's
// vectors are listed. A cluster takes it only when lb's bin is crowded
// (tied or shifted rows, whose maxima share a few bins): on normal rows its
// pass over 16 maxima a thread and its cluster barrier cost more than the
// shorter list saves. The fine counts take every maximum of the bin, the
// first bound only those of the counted pieces: N vectors still hold a
// maximum >= the new lb.
__device__ __forceinline__ uint32_t topn_refine(const TopnChunk &ck, TopnShared &sh,
                                                const TopnBound &bd)
{
    const uint32_t lane = ck.lane;
    const int32_t g = list_span(ck), nvec = ck.nvec;
    const int32_t first = (int32_t)ck.tid * g;
    uint16_t *const list = ck.list;
    const uint32_t mbin = bd.mbin;
    uint32_t lb = bd.lb;
    if ((DC_TOPN_CLUSTER == 1 || bd.crowded) && lb == (mbin << 5)) {
        if constexpr (DC_TOPN_CLUSTER == 1) {
            each_max(first, g, nvec, list, [&](int32_t, uint32_t m) {
                if ((m >> 5) == mbin)
                    atomicAdd(&sh.fine[m & 31u], 1u);
            });
        } else {
            // Crowded: most maxima of the bin are equal, and a warp's
            // atomics on one address serialise. A thread counts a run of
            // equal maxima by one atomic.
            uint32_t fm = 0, fn = 0;
            each_max(first, g, nvec, list, [&](int32_t, uint32_t m) {
                if ((m >> 5) == mbin) {
                    if (m != fm) {
                        if (fn)
                            atomicAdd(&sh.fine[fm & 31u], fn);
                        fm = m;
                        fn = 0;
                    }
                    fn++;
                }
            });
            if (fn)
                atomicAdd(&sh.fine[fm & 31u], fn);
        }
        group_sync();
        uint32_t c = 0; // lane i: the maxima lb + 31 - i
#pragma unroll
        for (uint32_t cc = 0; cc < DC_TOPN_CLUSTER; cc++)
            c += remote_ld(&sh.fine[31u - lane], cc);
        uint32_t x = c; // maxima >= lb + 31 - lane
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
            if (lane >= (uint32_t)d)
                x += y;
        }
        const uint32_t hit = __ballot_sync(0xFFFFFFFFu, x >= bd.need_fine);
        lb += 31u - (uint32_t)(__ffs(hit) - 1);
    }
    return lb;
}

// ---- 2. the list: the vectors whose maximum is >= lb, ascending; returns
// its length. A thread reads the maxima of its vectors (list_span) before
// the scan's barrier and writes its list entries after it, so the list may
// overwrite the maxima.
__device__ __forceinline__ uint32_t topn_list(const TopnChunk &ck, TopnShared &sh, uint32_t lb)
{
    const int32_t g = list_span(ck), nvec = ck.nvec;
    const int32_t first = (int32_t)ck.tid * g;
    uint16_t *const list = ck.list;
    uint32_t nlist, flags = 0;
    each_max(first, g, nvec, list,
             [&](int32_t bit, uint32_t m) { flags |= (m >= lb ? 1u : 0u) << bit; });
    uint32_t unused0, unused1;
    uint32_t at = block_scan<false>((uint32_t)__popc(flags), 0u, sh.ws[WS_LIST], nullptr, &nlist,
                                    &unused0, &unused1);
    for (; flags != 0u; flags &= flags - 1u)
        list[at++] = (uint16_t)(first + __ffs(flags) - 1);
    __syncthreads();
    return nlist;
}

// The window histogram of the listed keys >= from (this CTA's, into
// hist_local, which must be clear), its overflow into ovf_local; then, past
// a group barrier, the keys above the window in the group (ovf) and in the
// CTAs before this one (ovf_before). A cluster's first pass pushes them
// instead (pushed_win: the tau scan takes them from rx_win).
__device__ __forceinline__ void window_pass(const TopnChunk &ck, TopnShared &sh, TopnOwn &own,
                                            const uint32_t &nlist, uint32_t from, bool first_pass,
                                            uint32_t &ovf, uint32_t &ovf_before, bool &pushed_win)
{
    const uint32_t tid = ck.tid, lane = ck.lane, crank = ck.crank;
    uint32_t o = 0, eq = 0;
    for (uint32_t i = tid; i < nlist; i += DCPTOPK_THREADS)
        o += window_add<0>(sh.hist_local, ck.kv[ck.list[i]], from, &eq);
    o = __reduce_add_sync(0xFFFFFFFFu, o);
    eq = __reduce_add_sync(0xFFFFFFFFu, eq);
    if (lane == 0 && o)
        atomicAdd(&sh.ovf_local, o);
    if (lane == 0 && eq)
        atomicAdd(&sh.hist_local[0], eq);
#if DC_TOPN_CLUSTER > 1
    // (The fallback's second pass has no mbarrier phase left: barriers.)
    pushed_win = first_pass;
    if (first_pass) {
        __syncthreads(); // this CTA's window is in
        push_bins(sh.hist_local, sh.rx_win, &sh.rx_bar[1], own.win, crank, own.bfirst);
        const uint32_t mine = sh.ovf_local;
        if (tid == 0)
#pragma unroll
            for (uint32_t d = 1; d < DC_TOPN_CLUSTER; d++)
                push1(&sh.rx_ovf[d - 1], &sh.rx_bar[1], (crank + d) % DC_TOPN_CLUSTER, mine);
        mbar_wait<true>(&sh.rx_bar[1], 0u);
        ovf = mine;
        ovf_before = 0;
#pragma unroll
        for (uint32_t k = 0; k + 1 < DC_TOPN_CLUSTER; k++) {
            const uint32_t oc = sh.rx_ovf[k];
            ovf += oc;
            ovf_before += slot_before(k, crank) ? oc : 0u;
        }
        return;
    }
#else
    (void)own;
    (void)first_pass;
    (void)pushed_win;
#endif
    group_sync();
    ovf = ovf_before = 0;
#pragma unroll
    for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++) {
        const uint32_t oc = remote_ld(&sh.ovf_local, c);
        ovf += oc;
        ovf_before += c < crank ? oc : 0u;
    }
}

// The keys above lb's window.
struct TopnWindow {
    uint32_t ovf;        // in the group
    uint32_t ovf_before; // in the CTAs before this one
};

// ---- 2. the window histogram of the listed keys from lb on: a cluster's
// CTA pushes it (and its keys above it) to its peers, which need no group
// barrier to read it.
__device__ __forceinline__ TopnWindow topn_window(const TopnChunk &ck, TopnShared &sh, TopnOwn &own,
                                                  uint32_t nlist, uint32_t lb)
{
    TopnWindow w;
    bool pushed_win;
    window_pass(ck, sh, own, nlist, lb, true, w.ovf, w.ovf_before, pushed_win);
    return w;
}

// The threshold, and where this CTA's part of the selection starts.
struct TopnTau {
    uint32_t tau;      // the keys > tau are taken, and need_eq keys == tau
    uint32_t need_eq;
    uint32_t count;    // the slots filled: N, or every candidate when fewer
    uint32_t gt_run;   // keys > tau in the CTAs before this one
    uint32_t eq_run;   // keys == tau in the CTAs before this one
    uint32_t gt_all;   // keys > tau in the group
    uint32_t base_sel; // candidates selected before this CTA: its first slot
};

// ---- tau: the key of the (N - ovf)-th largest count of the window (a bin
// of one key). When the window holds fewer, every key >= base is taken
// (tau = base - 1, no tie rule): then fewer than N keys exist (base =
// DC_KEY_MIN), or exactly N. The fallback (N keys above lb's window) is
// part of this phase, not of topn_window: it decides where the scan reads
// the window (pushed_win), and with that flag handed from one phase to the
// next, NVVM no longer threaded the branches on it (the cluster variants'
// code changed, bench/sass_compare.sh).
template <int NSEL>
__device__ __forceinline__ TopnTau topn_tau(const TopnChunk &ck, TopnShared &sh, TopnOwn &own,
                                            uint32_t nlist, uint32_t lb, const TopnWindow &w)
{
    constexpr bool GROUP = DC_TOPN_CLUSTER > 1;
    const uint32_t tid = ck.tid, crank = ck.crank;
    const u32x4 *const kv = ck.kv;
    const uint16_t *const list = ck.list;
    uint32_t ovf = w.ovf, ovf_before = w.ovf_before;
    bool pushed_win = GROUP; // the first pass pushed its window (uniform)
    uint32_t base = lb;
    if (ovf >= (uint32_t)NSEL) {
        // The fallback (uniform over the group): N keys lie above the
        // window. An 11-bit pass over the listed keys >= lb finds the bin of
        // the N-th largest (>= N keys are >= lb), and the window restarts at
        // its floor: fewer than N keys lie above it.
        group_sync(); // every CTA has read every ovf_local
        for (uint32_t i = tid; i < DC_TOPN_BINS; i += DCPTOPK_THREADS)
            sh.hist_local[i] = 0u;
        if (tid == 0)
            sh.ovf_local = 0u;
        __syncthreads();
        for (uint32_t i = tid; i < nlist; i += DCPTOPK_THREADS)
            window_add<5>(sh.hist_local, kv[list[i]], lb, nullptr); // never above
        group_sync();
        {
            uint32_t h[DC_TOPN_BPT], b[DC_TOPN_BPT];
            group_bins<false>(sh.hist_local, crank, false, h, b);
            find_bin<false>(h, b, (uint32_t)NSEL, sh.ws[WS_COARSE], nullptr, sh);
            base = lb + (sh.bin << 5);
        }
        group_sync(); // every CTA has read every hist_local
        for (uint32_t i = tid; i < DC_TOPN_BINS; i += DCPTOPK_THREADS)
            sh.hist_local[i] = 0u;
        __syncthreads();
        window_pass(ck, sh, own, nlist, base, false, ovf, ovf_before, pushed_win);
    }
    TopnTau t;
    {
        uint32_t h[DC_TOPN_BPT], b[DC_TOPN_BPT];
#if DC_TOPN_CLUSTER > 1
        if (pushed_win)
            sum_bins(own.win, sh.rx_win, h, b, crank, own.bfirst);
        else
#endif
            group_bins<GROUP>(sh.hist_local, crank, false, h, b);
        find_bin<GROUP>(h, b, (uint32_t)NSEL - ovf, sh.ws[WS_TAU], sh.ws[WS_TAU_B], sh);
        const bool take_all = sh.bin >= DC_TOPN_BINS;
        t.tau = take_all ? base - 1u : base + sh.bin;
        t.need_eq = take_all ? 0u : (uint32_t)NSEL - (ovf + sh.above);
        t.count = take_all ? ovf + sh.total : (uint32_t)NSEL;
        t.gt_run = ovf_before + (take_all ? sh.b_total : sh.b_above);
        t.gt_all = take_all ? t.count : ovf + sh.above;
        t.eq_run = take_all ? 0u : sh.b_eq;
    }
    // The group's last read of a peer's shared memory was in that scan (none
    // when the window came by push: nothing to release).
#if DC_TOPN_CLUSTER > 1
    if (pushed_win)
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    else
#endif
        group_arrive();
    t.base_sel = t.gt_run + (t.eq_run < t.need_eq ? t.eq_run : t.need_eq);
    return t;
}

// ---- the empty slots (CTA 0 of the group), then 3. the stable compaction
// in ascending local id: list entry i goes to thread i % THREADS, one block
// scan of the packed counts (keys > tau in the low half, == tau in the high
// half: <= 8 * 1024 each) per THREADS entries. tau >= DC_KEY_MIN - 1, so
// keys > tau are never NaN; with take_all the keys == tau (NaN) are counted
// but need_eq = 0 takes none. Returns this CTA's selected ids below 2^16
// (topn_planes' lo_sel).
template <int NSEL, class Out>
__device__ __forceinline__ uint32_t topn_compact(const TopnChunk &ck, TopnShared &sh,
                                                 uint32_t nlist, const TopnTau &t,
                                                 const Out &out)
{
    const uint32_t tid = ck.tid;
    const u32x4 *const kv = ck.kv;
    const uint16_t *const list = ck.list;
    const uint32_t tau = t.tau, need_eq = t.need_eq;
    uint32_t gt_run = t.gt_run, eq_run = t.eq_run;
    if (ck.crank == 0)
        for (uint32_t j = t.count + tid; j < (uint32_t)NSEL; j += DCPTOPK_THREADS)
            out.zero(j);

    // Bit e of gm / qm: key e of the vector is > tau / == tau.
    uint32_t lo_sel = 0;
    for (uint32_t i0 = 0; i0 < nlist; i0 += DCPTOPK_THREADS) { // uniform
        const uint32_t i = i0 + tid;
        uint32_t gm = 0, qm = 0, v = 0;
        u32x4 k = {0u, 0u, 0u, 0u};
        if (i < nlist) {
            v = list[i];
            k = kv[v];
            if (max_key8(k) >= tau) { // vectors below tau hold nothing to take
                uint32_t ge = 0;
#pragma unroll
                for (uint32_t e = 0; e < 8; e++) {
                    const uint32_t key = key_at(k, e);
                    gm |= (key > tau ? 1u : 0u) << e;
                    ge |= (key >= tau ? 1u : 0u) << e;
                }
                qm = ge & ~gm;
            }
        }
        const uint32_t c = (uint32_t)__popc(gm) | ((uint32_t)__popc(qm) << 16);
        // Two scratch arrays in turn: a warp reaches the scan after next
        // only past the next one's barrier, when every warp has read this.
        uint32_t tot, unused0, unused1;
        const uint32_t ex = block_scan<false>(c, 0u, sh.ws[(i0 / DCPTOPK_THREADS) & 1u ? WS_C1 : WS_C0],
                                              nullptr, &tot, &unused0, &unused1);
        const uint32_t gb = gt_run + (ex & 0xFFFFu), qb = eq_run + (ex >> 16);
        for (uint32_t sel = gm | qm; sel != 0u; sel &= sel - 1u) {
            const uint32_t e = (uint32_t)(__ffs(sel) - 1);
            const uint32_t below = (1u << e) - 1u;
            const uint32_t gbe = gb + (uint32_t)__popc(gm & below);
            const uint32_t qbe = qb + (uint32_t)__popc(qm & below);
            uint32_t pos;
            if ((gm >> e) & 1u) {
                pos = gbe + (qbe < need_eq ? qbe : need_eq);
            } else {
                if (qbe >= need_eq)
                    continue;
                pos = gbe + qbe;
            }
            const uint32_t l = (uint32_t)ck.lo + v * 8u + e;
            out.put(pos, pack_word(key_at(k, e) - DC_KEY_ORD, l));
            lo_sel += l < 65536u ? 1u : 0u;
        }
        gt_run += tot & 0xFFFFu;
        eq_run += tot >> 16;
        // Every key taken in the group lies before here: the rest of the
        // list selects nothing (a tied row lists most of its vectors).
        if (gt_run >= t.gt_all && eq_run >= need_eq)
            break;
    }
    return lo_sel;
}

// The plane words: slots [j0, count) have bit 16 set, j0 = the selected
// ids below 2^16. The CTA whose columns hold 65536 (c65) knows j0 without
// waiting for its peers: its first slot plus its own selected ids below
// 2^16. When no CTA holds it (every column < 65536, always with one CTA),
// j0 = count and CTA 0 writes the (empty) words.
// chunk and crank by reference, the rest by value: the passing that keeps
// the machine code of every variant as it was with this code inline in
// topn_row (bench/sass_compare.sh; other combinations reordered a few
// instructions of the cluster variants or of the push).
template <int NSEL, class Out>
__device__ __forceinline__ void topn_planes(const int32_t &chunk, const uint32_t &crank,
                                            uint32_t count, uint32_t base_sel, uint32_t lo_sel,
                                            TopnShared &sh, const Out &out)
{
    constexpr bool GROUP = DC_TOPN_CLUSTER > 1;
    const uint32_t tid = threadIdx.x, lane = lane_id();
    const uint32_t c65 = 65536u / (uint32_t)chunk;
    const bool holds65 = GROUP && c65 < (uint32_t)DC_TOPN_CLUSTER; // chunk <= 65536: never with one CTA
    if (holds65 ? crank == c65 : crank == 0) { // uniform in the CTA
        uint32_t j0 = count;
        if (holds65) {
            lo_sel = __reduce_add_sync(0xFFFFFFFFu, lo_sel);
            if (lane == 0 && lo_sel)
                atomicAdd(&sh.lo_count, lo_sel);
            __syncthreads();
            j0 = base_sel + sh.lo_count;
        }
        for (uint32_t w = tid; w < (uint32_t)NSEL / 32; w += DCPTOPK_THREADS) {
            const uint32_t a = w * 32u;
            uint32_t bits = 0;
            const uint32_t s0 = j0 > a ? j0 - a : 0u;
            const uint32_t s1 = count > a ? (count - a > 32u ? 32u : count - a) : 0u;
            if (s1 > s0) {
                const uint32_t hi = s1 >= 32u ? 0xFFFFFFFFu : ((1u << s1) - 1u);
                const uint32_t lo_m = (1u << s0) - 1u; // s0 < s1 <= 32, so s0 < 32
                bits = hi & ~lo_m;
            }
            out.plane(w, bits);
        }
    }
}

// Out: put(pos, word) for a selected candidate at slot pos; zero(pos) for an
// empty slot; plane(w, bits) for plane word w. All three may be called by any
// thread of the group, each slot / plane word exactly once.
//
// row: the row's first logit; E: its candidate bound (already clamped);
// chunk: columns per CTA (multiple of 8, <= 65536); keys: dynamic shared
// memory of chunk 16-bit keys, then chunk / 8 list entries; n_sel: N.
template <int NSEL, class Out>
__device__ __forceinline__ void topn_row(const uint16_t *__restrict__ row, int32_t E, int32_t chunk,
                                         uint16_t *keys, TopnShared &sh, const Out &out)
{
    static_assert(NSEL % 32 == 0 && NSEL >= 32 && NSEL <= 4096, "N: multiple of 32, <= 4096");
    const uint32_t tid = threadIdx.x, lane = lane_id();
    const uint32_t crank = cluster_rank();
    TopnChunk ck;
    ck.tid = tid;
    ck.lane = lane;
    ck.crank = crank;
    ck.lo = (int32_t)crank * chunk;
    int32_t len = E - ck.lo;
    len = len < 0 ? 0 : (len > chunk ? chunk : len);
    ck.len = len;
    ck.nvec = (ck.len + 7) >> 3;
    ck.nfull = ck.len >> 3;
    ck.rounds = (ck.nfull + DCPTOPK_THREADS - 1) / DCPTOPK_THREADS;
    ck.rpp = (ck.rounds + DC_TOPN_PIECES - 1) / DC_TOPN_PIECES;
    ck.qv = ck.rpp * DCPTOPK_THREADS;
    ck.row = row;
    ck.kv = (u32x4 *)keys;
#if DC_TOPN_CLUSTER > 1
    ck.hist_max = sh.hist_max_local;
#else
    ck.hist_max = sh.hist_local; // dead once lb is known: reused
#endif
    TopnOwn own;

    topn_start(ck, sh, own);
    // The list area past the set-up: set with the fields above, it changed
    // the one-CTA variants' code (bench/sass_compare.sh).
    ck.list = keys + chunk;
    topn_keys(ck, sh, own);
    const TopnBound bd = topn_bound<NSEL>(ck, sh, own);
    const uint32_t lb = topn_refine(ck, sh, bd);
    const uint32_t nlist = topn_list(ck, sh, lb);
    const TopnWindow w = topn_window(ck, sh, own, nlist, lb);
    const TopnTau t = topn_tau<NSEL>(ck, sh, own, nlist, lb, w);
    const uint32_t lo_sel = topn_compact<NSEL>(ck, sh, nlist, t, out);
    topn_planes<NSEL>(chunk, crank, t.count, t.base_sel, lo_sel, sh, out);
    group_wait();
}

// E of a row: min(row_end, max_local_len, 2^17), negative -> 0.
__device__ __forceinline__ int32_t topn_row_bound(int32_t row_end, int64_t max_local_len)
{
    int64_t e = row_end < 0 ? 0 : row_end;
    if (e > max_local_len)
        e = max_local_len;
    if (e > (1ll << DC_LOCAL_INDEX_BITS))
        e = 1ll << DC_LOCAL_INDEX_BITS;
    return (int32_t)e;
}

} // namespace dc
