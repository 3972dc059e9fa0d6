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
// shared memory as ord16 keys, so HBM is read once. The selection is exact:
//  1. the row's bytes arrive by bulk copies (cp.async.bulk, in
//     DC_TOPN_PIECES pieces, each on its own mbarrier: no registers hold
//     loads in flight); each piece is turned into keys in place while the
//     next ones arrive, with a histogram of the top 11 bits of the maxima of
//     the 8-key vectors. The N-th largest maximum gives a lower bound lb of
//     the N-th largest key (N vectors each hold a key >= it), a tight one;
//  2. one pass over the vectors lists those whose maximum is >= lb (ascending,
//     in shared memory after the keys: chunk / 8 16-bit entries, the
//     launcher adds chunk / 4 bytes) and counts their keys in a *window*
//     histogram of full 16-bit resolution: bin d = key - lb for d < 2048,
//     keys above the window in one overflow count. When fewer than N keys
//     overflow (always but on contrived rows), the window holds the N-th
//     largest key exactly: one block scan of the window gives the threshold
//     tau, the count of keys > tau and the keys == tau still needed.
//     Otherwise an 11-bit pass over the listed keys finds the bin of the N-th
//     key and a second window pass starts there (the slow, exact fallback);
//  3. a stable compaction of the listed vectors (ascending local id) writes
//     every key > tau and the lowest-id (N - count_gt) keys == tau.
// The passes of 2 and 3 give each warp a contiguous segment of vectors (or
// list entries), one per lane and step: counts per warp, one barrier, the
// warp's base from the warp sums, then ballots / a warp scan for positions.
// The cluster sums its CTAs' histograms through distributed shared memory,
// straight into the registers of the block scan; the same reads give each
// CTA the counts of the CTAs before it (its base in the output).
// Since the slots are in ascending local id order, the slots whose id has bit
// 16 set are a suffix [j0, count): the plane words follow from j0 = the number
// of selected ids below 2^16, summed in CTA 0 of the group.
//
// NaN keys (ord16 0) are never counted nor selected; when v <= N every
// non-NaN key is taken (no tie rule). Nothing depends on the value
// distribution but the shared atomics of the histograms (one per vector for
// the maxima, one per key >= lb for the window): equal bins of a warp are
// one ATOMS.POPC.INC, so masked and tied rows stay cheap.
#pragma once
#include "common.cuh"

#ifndef DC_TOPN_CLUSTER
#error "define DC_TOPN_CLUSTER (1, 2, 4 or 8) before including topn_select.cuh"
#endif
static_assert(DC_TOPN_CLUSTER == 1 || DC_TOPN_CLUSTER == 2 || DC_TOPN_CLUSTER == 4 ||
                  DC_TOPN_CLUSTER == 8,
              "cluster size 1, 2, 4 or 8");
static_assert(DCPTOPK_THREADS >= 256 && DCPTOPK_THREADS <= 1024,
              "256..1024 threads per CTA");

#define DC_TOPN_BINS 2048          // histogram bins (11 bits, or a 2048-key window)
#define DC_TOPN_PIECES 4           // bulk copies (and mbarriers) per CTA and row
#define DC_TOPN_WARPS (DCPTOPK_THREADS / 32)
#define DC_TOPN_BPT (DC_TOPN_BINS / DCPTOPK_THREADS) // bins per thread in a scan
static_assert(DC_TOPN_BINS % DCPTOPK_THREADS == 0, "whole bins per thread");
// A warp's segment of vectors (chunk <= 65536: at most 8192 vectors) takes at
// most 32 steps of 32 vectors: one flag bit per step in a 32-bit word.
static_assert(65536 / 8 / DC_TOPN_WARPS <= 32 * 32, "flag bits fit a word");

namespace dc {

struct alignas(16) u32x4 {
    uint32_t x, y, z, w;
};

// ------------------------------------------------------- PTX helpers

__device__ __forceinline__ uint32_t ldg_nc_u16(const uint16_t *p)
{
    unsigned short v;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t lanemask_lt()
{
    uint32_t m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
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

// Every thread of every CTA of the group; orders shared and global memory
// (release / acquire at cluster scope). With one CTA: __syncthreads().
__device__ __forceinline__ void group_sync()
{
#if DC_TOPN_CLUSTER > 1
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
    __syncthreads();
#endif
}

// Shared-memory word `p` (of this CTA's layout) in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t remote_ld(const uint32_t *p, uint32_t rank)
{
#if DC_TOPN_CLUSTER > 1
    uint32_t a, v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32addr(p)), "r"(rank));
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
    uint32_t a;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32addr(p)), "r"(rank));
    asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(a)
                 : "memory");
    return v;
}

__device__ __forceinline__ void remote_add(uint32_t *p, uint32_t rank, uint32_t v)
{
#if DC_TOPN_CLUSTER > 1
    uint32_t a;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32addr(p)), "r"(rank));
    asm volatile("red.shared::cluster.add.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
#else
    (void)rank;
    atomicAdd(p, v);
#endif
}

// 0xFFFF in each 16-bit half whose top bit is set, else 0 (prmt with the
// sign-replicating selectors 9 and B: bytes 1 and 3).
__device__ __forceinline__ uint32_t sign_halves(uint32_t w)
{
    uint32_t m;
    asm("prmt.b32 %0, %1, 0, 0xBB99;" : "=r"(m) : "r"(w));
    return m;
}

// Two bf16 patterns of a 32-bit word -> two ord16 keys (NaN -> 0):
// negative b -> b ^ 0xFFFF, non-negative b -> b ^ 0x8000, NaN -> 0.
__device__ __forceinline__ uint32_t ord16x2(uint32_t w)
{
    const uint32_t k = w ^ (sign_halves(w) | 0x80008000u);
    // (b & 0x7FFF) > 0x7F80 <=> bit 15 of (b & 0x7FFF) + 0x7F; no carry
    // crosses the halves.
    const uint32_t nan = sign_halves((w & 0x7FFF7FFFu) + 0x007F007Fu);
    return k & ~nan;
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
enum { WS_MAX, WS_COARSE, WS_TAU, WS_TAU_B, WS_LIST, WS_GT, WS_EQ, WS_COUNT };

struct alignas(16) TopnShared {
    uint64_t bar[DC_TOPN_PIECES];          // the bulk copies' mbarriers
    uint32_t hist_local[DC_TOPN_BINS];     // this CTA's window (C = 1: first the maxima)
#if DC_TOPN_CLUSTER > 1
    uint32_t hist_max_local[DC_TOPN_BINS]; // this CTA's 8-key maxima, 11 bits
#endif
    uint32_t ws[WS_COUNT][DC_TOPN_WARPS];
    uint32_t ovf_local;                    // this CTA's keys above the window
    uint32_t lo_count;                     // CTA 0: selected ids < 2^16 (group)
    uint32_t bin, above, upto, total;      // a scan's result (group counts)
    uint32_t b_above, b_eq, b_total;       // the same, CTAs before this one
};
// TopnShared sits at the start of the dynamic shared memory and the keys at
// this offset: all of it dynamic, so that the launcher's opt-in above 48 KiB
// covers the whole footprint (src/topn.c uses the same numbers).
#if DC_TOPN_CLUSTER > 1
#define DC_TOPN_SHARED_BYTES 17408
#else
#define DC_TOPN_SHARED_BYTES 9216
#endif
static_assert(sizeof(TopnShared) <= DC_TOPN_SHARED_BYTES, "TopnShared fits its reservation");
static_assert(DC_TOPN_SHARED_BYTES % 16 == 0, "keys stay 16-byte aligned");

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
// (key - base) >> shift; returns how many fall above the window.
__device__ __forceinline__ uint32_t window_add(uint32_t *hist, const u32x4 &k, uint32_t base,
                                               uint32_t shift)
{
    const uint32_t w4[4] = {k.x, k.y, k.z, k.w};
    uint32_t ovf = 0;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const uint32_t key = (w4[e >> 1] >> ((e & 1) * 16)) & 0xFFFFu;
        if (key >= base) {
            const uint32_t d = (key - base) >> shift;
            if (d < DC_TOPN_BINS)
                atomicAdd(&hist[d], 1u);
            else
                ovf++;
        }
    }
    return ovf;
}

// --------------------------------------------------------- the selection

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
    constexpr int BPT = DC_TOPN_BPT;
    constexpr bool GROUP = DC_TOPN_CLUSTER > 1;
    const uint32_t tid = threadIdx.x, lane = lane_id(), warp = warp_id();
    const uint32_t crank = cluster_rank();
    const int32_t lo = (int32_t)crank * chunk;
    int32_t len = E - lo;
    len = len < 0 ? 0 : (len > chunk ? chunk : len);
    const int32_t nvec = (len + 7) >> 3;       // 8-key vectors in smem
    const int32_t nfull = len >> 3;            // full vectors in HBM
    const int32_t qv = (nfull + DC_TOPN_PIECES - 1) / DC_TOPN_PIECES; // vectors per piece
    const uint16_t *src = row + lo;
    u32x4 *kv = (u32x4 *)keys;
#if DC_TOPN_CLUSTER > 1
    uint32_t *const hist_max = sh.hist_max_local;
#else
    uint32_t *const hist_max = sh.hist_local; // dead once lb is known: reused
#endif

    // ---- 1. the bulk copies go out first, then the histograms are cleared
    if (tid == 0) {
        for (int p = 0; p < DC_TOPN_PIECES; p++)
            mbar_init(&sh.bar[p]);
        mbar_init_fence();
        for (int p = 0; p < DC_TOPN_PIECES; p++) {
            const int32_t v0 = p * qv, v1 = v0 + qv < nfull ? v0 + qv : nfull;
            if (v0 < v1)
                bulk_load(&kv[v0], src + (int64_t)v0 * 8, (uint32_t)(v1 - v0) * 16u, &sh.bar[p]);
        }
        sh.ovf_local = 0u;
        sh.lo_count = 0u;
    }
    for (uint32_t i = tid; i < DC_TOPN_BINS; i += DCPTOPK_THREADS) {
        sh.hist_local[i] = 0u;
#if DC_TOPN_CLUSTER > 1
        sh.hist_max_local[i] = 0u;
#endif
    }
    __syncthreads();

    // Keys in place, piece by piece, and the histogram of the 8-key maxima.
    for (int p = 0; p < DC_TOPN_PIECES; p++) {
        const int32_t v0 = p * qv, v1 = v0 + qv < nfull ? v0 + qv : nfull;
        if (v0 >= v1)
            break; // later pieces are empty too (uniform)
        mbar_wait(&sh.bar[p], 0u);
        for (int32_t v = v0 + (int32_t)tid; v < v1; v += DCPTOPK_THREADS) {
            const u32x4 r = kv[v];
            u32x4 k;
            k.x = ord16x2(r.x);
            k.y = ord16x2(r.y);
            k.z = ord16x2(r.z);
            k.w = ord16x2(r.w);
            kv[v] = k;
            const uint32_t m = max_key8(k);
            if (m != 0u)
                atomicAdd(&hist_max[m >> 5], 1u);
        }
    }
    if (nfull < nvec && tid == DCPTOPK_THREADS - 1) {
        // The partial last vector: 0xFFFF is a NaN pattern (key 0, never a
        // candidate) past len.
        uint32_t h[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int32_t c = nfull * 8 + e;
            h[e] = c < len ? ldg_nc_u16(src + c) : 0xFFFFu;
        }
        u32x4 k;
        k.x = ord16x2(h[0] | (h[1] << 16));
        k.y = ord16x2(h[2] | (h[3] << 16));
        k.z = ord16x2(h[4] | (h[5] << 16));
        k.w = ord16x2(h[6] | (h[7] << 16));
        kv[nfull] = k;
        const uint32_t m = max_key8(k);
        if (m != 0u)
            atomicAdd(&hist_max[m >> 5], 1u);
    }
    group_sync();

    // ---- the lower bound lb (>= 1): the floor of the bin of the N-th
    // largest maximum; 1 (every non-NaN key) when fewer than N vectors have
    // one. The maxima's array is cleared as it is read (one CTA): it becomes
    // the window histogram after this scan's barriers.
    uint32_t lb;
    bool use_list;
    {
        uint32_t h[BPT], b[BPT];
        group_bins<false>(hist_max, crank, true, h, b);
        find_bin<false>(h, b, (uint32_t)NSEL, sh.ws[WS_MAX], nullptr, sh);
        const uint32_t mbin = sh.bin;
        lb = mbin < DC_TOPN_BINS && mbin > 0u ? (mbin << 5) : 1u;
        // The list pays when it prunes: at most half of the group's vectors
        // reach lb. Heavily tied rows (integer or +100-shifted scores in
        // bf16) reach it almost all; they walk every vector instead (uniform).
        use_list = mbin < DC_TOPN_BINS && 2u * sh.upto <= sh.total;
    }

    // ---- 2. the list of the vectors whose maximum is >= lb and the window
    // histogram of their keys. Warp w walks vectors [w * seg, (w + 1) * seg),
    // lane i the i-th of each 32; flag bit s = step s's vector is listed.
    uint16_t *list = keys + chunk; // nvec entries (the launcher's extra space)
    uint32_t nlist = (uint32_t)nvec;
    {
        const int32_t seg = (nvec + DC_TOPN_WARPS - 1) / DC_TOPN_WARPS;
        const int32_t v0 = (int32_t)warp * seg;
        const int32_t v1 = v0 + seg < nvec ? v0 + seg : nvec;
        uint32_t flags = 0, ovf = 0;
        for (int32_t s = 0; v0 + s * 32 < v1; s++) {
            const int32_t v = v0 + s * 32 + (int32_t)lane;
            if (v < v1) {
                const u32x4 k = kv[v];
                if (max_key8(k) >= lb) {
                    flags |= 1u << s;
                    ovf += window_add(sh.hist_local, k, lb, 0u);
                }
            }
        }
        ovf = __reduce_add_sync(0xFFFFFFFFu, ovf);
        if (lane == 0 && ovf)
            atomicAdd(&sh.ovf_local, ovf);
        if (use_list) {
            const uint32_t c = __reduce_add_sync(0xFFFFFFFFu, (uint32_t)__popc(flags));
            if (lane == 0)
                sh.ws[WS_LIST][warp] = c;
            __syncthreads();
            const uint32_t sw = lane < (uint32_t)DC_TOPN_WARPS ? sh.ws[WS_LIST][lane] : 0u;
            nlist = __reduce_add_sync(0xFFFFFFFFu, sw);
            uint32_t at = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? sw : 0u);
            for (int32_t s = 0; v0 + s * 32 < v1; s++) {
                const uint32_t bal = __ballot_sync(0xFFFFFFFFu, (flags >> s) & 1u);
                if ((flags >> s) & 1u)
                    list[at + (uint32_t)__popc(bal & lanemask_lt())] =
                        (uint16_t)(v0 + s * 32 + (int32_t)lane);
                at += (uint32_t)__popc(bal);
            }
        }
    }
    // Vector of list entry i.
    auto vec_at = [&](uint32_t i) -> uint32_t { return use_list ? (uint32_t)list[i] : i; };
    group_sync();

    // Keys above the window (group) and in the CTAs before this one.
    uint32_t ovf = 0, ovf_before = 0;
#pragma unroll
    for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++) {
        const uint32_t o = remote_ld(&sh.ovf_local, c);
        ovf += o;
        ovf_before += c < crank ? o : 0u;
    }
    uint32_t base = lb;
    if (ovf >= (uint32_t)NSEL) {
        // ---- the fallback (uniform over the group): N keys lie above the
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
            window_add(sh.hist_local, kv[vec_at(i)], lb, 5u); // never above
        group_sync();
        {
            uint32_t h[BPT], b[BPT];
            group_bins<false>(sh.hist_local, crank, false, h, b);
            find_bin<false>(h, b, (uint32_t)NSEL, sh.ws[WS_COARSE], nullptr, sh);
            base = lb + (sh.bin << 5);
        }
        group_sync(); // every CTA has read every hist_local
        for (uint32_t i = tid; i < DC_TOPN_BINS; i += DCPTOPK_THREADS)
            sh.hist_local[i] = 0u;
        __syncthreads();
        uint32_t o = 0;
        for (uint32_t i = tid; i < nlist; i += DCPTOPK_THREADS)
            o += window_add(sh.hist_local, kv[vec_at(i)], base, 0u);
        o = __reduce_add_sync(0xFFFFFFFFu, o);
        if (lane == 0 && o)
            atomicAdd(&sh.ovf_local, o);
        group_sync();
        ovf = ovf_before = 0;
#pragma unroll
        for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++) {
            const uint32_t oc = remote_ld(&sh.ovf_local, c);
            ovf += oc;
            ovf_before += c < crank ? oc : 0u;
        }
    }

    // ---- tau: the key of the (N - ovf)-th largest count of the window (a
    // bin of one key). When the window holds fewer, every key >= base is
    // taken (tau = base - 1, no tie rule): then fewer than N keys exist
    // (base = 1), or exactly N.
    uint32_t tau, need_eq, count, gt_run, eq_run;
    {
        uint32_t h[BPT], b[BPT];
        group_bins<GROUP>(sh.hist_local, crank, false, h, b);
        find_bin<GROUP>(h, b, (uint32_t)NSEL - ovf, sh.ws[WS_TAU], sh.ws[WS_TAU_B], sh);
        const bool take_all = sh.bin >= DC_TOPN_BINS;
        tau = take_all ? base - 1u : base + sh.bin;
        need_eq = take_all ? 0u : (uint32_t)NSEL - (ovf + sh.above);
        count = take_all ? ovf + sh.total : (uint32_t)NSEL;
        gt_run = ovf_before + (take_all ? sh.b_total : sh.b_above);
        eq_run = take_all ? 0u : sh.b_eq;
    }

    // Empty slots (CTA 0 of the group).
    if (crank == 0)
        for (uint32_t j = count + tid; j < (uint32_t)NSEL; j += DCPTOPK_THREADS)
            out.zero(j);

    // ---- 3. stable compaction in ascending local id. Warp w takes list
    // entries [w * seg, (w + 1) * seg); a first walk counts each warp's keys
    // > tau and == tau, a second one writes. Bit e of gm / qm: key e of the
    // vector is > tau / == tau (and not NaN).
    auto masks = [&](const u32x4 &k, uint32_t &gm, uint32_t &qm) {
        gm = qm = 0u;
        // Vectors below max(tau, 1) hold nothing to take: one test.
        if (max_key8(k) >= (tau > 1u ? tau : 1u)) {
#pragma unroll
            for (uint32_t e = 0; e < 8; e++) {
                const uint32_t key = key_at(k, e);
                gm |= (key > tau ? 1u : 0u) << e;
                qm |= (key == tau && key != 0u ? 1u : 0u) << e;
            }
        }
    };
    const uint32_t seg = (nlist + DC_TOPN_WARPS - 1) / DC_TOPN_WARPS;
    const uint32_t e0 = warp * seg, e1 = e0 + seg < nlist ? e0 + seg : nlist;
    {
        uint32_t g = 0, q = 0;
        for (uint32_t i = e0 + lane; i < e1; i += 32) {
            uint32_t gm, qm;
            masks(kv[vec_at(i)], gm, qm);
            g += (uint32_t)__popc(gm);
            q += (uint32_t)__popc(qm);
        }
        g = __reduce_add_sync(0xFFFFFFFFu, g);
        q = __reduce_add_sync(0xFFFFFFFFu, q);
        if (lane == 0) {
            sh.ws[WS_GT][warp] = g;
            sh.ws[WS_EQ][warp] = q;
        }
    }
    __syncthreads();
    {
        const uint32_t sg = lane < (uint32_t)DC_TOPN_WARPS && lane < warp ? sh.ws[WS_GT][lane] : 0u;
        const uint32_t sq = lane < (uint32_t)DC_TOPN_WARPS && lane < warp ? sh.ws[WS_EQ][lane] : 0u;
        gt_run += __reduce_add_sync(0xFFFFFFFFu, sg);
        eq_run += __reduce_add_sync(0xFFFFFFFFu, sq);
    }
    uint32_t lo_sel = 0;
    for (uint32_t i0 = e0; i0 < e1; i0 += 32) { // warp-uniform
        const uint32_t i = i0 + lane;
        uint32_t gm = 0, qm = 0, v = 0;
        u32x4 k = {0u, 0u, 0u, 0u};
        if (i < e1) {
            v = vec_at(i);
            k = kv[v];
            masks(k, gm, qm);
        }
        // Both counts are <= 8 a lane, <= 256 a warp: one 16-bit-packed scan.
        const uint32_t c = (uint32_t)__popc(gm) | ((uint32_t)__popc(qm) << 16);
        uint32_t x = c;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
            if (lane >= (uint32_t)d)
                x += y;
        }
        const uint32_t ex = x - c;
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
            const uint32_t l = (uint32_t)lo + v * 8u + e;
            out.put(pos, pack_word(key_at(k, e), l));
            lo_sel += l < 65536u ? 1u : 0u;
        }
        const uint32_t t = __shfl_sync(0xFFFFFFFFu, x, 31);
        gt_run += t & 0xFFFFu;
        eq_run += t >> 16;
    }
    lo_sel = __reduce_add_sync(0xFFFFFFFFu, lo_sel);
    if (lane == 0 && lo_sel)
        remote_add(&sh.lo_count, 0u, lo_sel);
    group_sync();

    // ---- plane words: slots [j0, count) have bit 16 set (CTA 0)
    if (crank == 0) {
        const uint32_t j0 = sh.lo_count;
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
