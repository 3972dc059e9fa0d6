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
//  1. while loading, a histogram of the top 11 key bits (2048 bins); the
//     cluster sums its CTAs' histograms through distributed shared memory; a
//     block scan finds the bin holding the N-th largest key;
//  2. a 32-bin histogram of the low 5 bits of the keys in that bin gives the
//     threshold key tau, the number of keys > tau, and each CTA's own counts
//     of keys > tau and == tau (its base in the output);
//  3. a stable compaction (block-wide prefix scans, ascending local id) writes
//     every key > tau and the lowest-id (N - count_gt) keys == tau.
// Steps 1 (after the bound lb, below), 2 and 3 walk only the 8-key vectors
// whose maximum is >= lb, listed in ascending order in shared memory after
// the keys (chunk / 8 16-bit entries: the launcher adds chunk / 4 bytes).
// Since the slots are in ascending local id order, the slots whose id has bit
// 16 set are a suffix [j0, count): the plane words follow from j0 = the number
// of selected ids below 2^16, summed in CTA 0 of the group.
//
// NaN keys (ord16 0) are never counted nor selected; when v <= N every
// non-NaN key is taken (tau = 0, no tie rule). Nothing depends on the value
// distribution but the atomic contention of step 1, which a run-length merge
// of equal bins in each thread's 8 consecutive keys keeps low on masked rows.
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

#define DC_TOPN_BINS 2048          // 11 high key bits
#define DC_TOPN_FINE 32            // 5 low key bits
#define DC_TOPN_PER_THREAD 16      // consecutive keys per thread in a compaction tile
#define DC_TOPN_WARPS (DCPTOPK_THREADS / 32)
static_assert(DC_TOPN_BINS % DCPTOPK_THREADS == 0, "whole bins per thread");
static_assert(DCPTOPK_THREADS * DC_TOPN_PER_THREAD < 65536, "tile counts fit 16 bits");

namespace dc {

struct alignas(16) u32x4 {
    uint32_t x, y, z, w;
};

// ------------------------------------------------------- PTX helpers

__device__ __forceinline__ u32x4 ldg_nc_v4(const void *p)
{
    u32x4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t ldg_nc_u16(const uint16_t *p)
{
    unsigned short v;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t smem_u32addr(const void *p)
{
    uint64_t a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (uint32_t)a;
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

// --------------------------------------------------- block primitives

struct alignas(16) TopnShared {
    uint32_t hist_max_local[DC_TOPN_BINS]; // this CTA's 8-key maxima, 11 bits
    uint32_t hist_local[DC_TOPN_BINS];     // this CTA's keys >= lb, 11 bits
#if DC_TOPN_CLUSTER > 1
    uint32_t hist[DC_TOPN_BINS];           // a merged (group) histogram
#endif
    uint32_t fine_local[DC_TOPN_FINE];     // this CTA's 5-bit histogram of the bin
    uint32_t above_local;                  // this CTA's keys above the bin
    uint32_t cnt_local;                    // this CTA's keys >= lb
    uint32_t lo_count;                     // CTA 0: selected ids < 2^16 (group)
    uint32_t lb;                           // lower bound of the N-th key (group)
    uint32_t bin, above, total;            // the bin, keys above it, keys >= lb
    uint32_t tau, need_eq, gt_base, eq_base;
    uint32_t warp_sums[DC_TOPN_WARPS];
};
// TopnShared sits at the start of the dynamic shared memory and the keys at
// this offset: all of it dynamic, so that the launcher's opt-in above 48 KiB
// covers the whole footprint (src/topn.c uses the same number).
#define DC_TOPN_SHARED_BYTES 25600
static_assert(sizeof(TopnShared) <= DC_TOPN_SHARED_BYTES, "TopnShared fits its reservation");
static_assert(DC_TOPN_SHARED_BYTES % 16 == 0, "keys stay 16-byte aligned");

// Exclusive prefix sum over the CTA; *total = the sum. Two barriers; the
// trailing one makes back-to-back calls safe.
__device__ __forceinline__ uint32_t block_exclusive_scan(uint32_t v, uint32_t *warp_sums,
                                                         uint32_t *total)
{
    const uint32_t lane = lane_id(), warp = warp_id();
    uint32_t x = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
        if (lane >= (uint32_t)d)
            x += y;
    }
    if (lane == 31)
        warp_sums[warp] = x;
    __syncthreads();
    // Lane w reads warp w's sum; two warp reductions add them up.
    const uint32_t s = lane < (uint32_t)DC_TOPN_WARPS ? warp_sums[lane] : 0u;
    const uint32_t sum = __reduce_add_sync(0xFFFFFFFFu, s);
    const uint32_t before = __reduce_add_sync(0xFFFFFFFFu, lane < warp ? s : 0u);
    __syncthreads();
    *total = sum;
    return before + x - v;
}

// The bin of the need-th largest count of a 2048-bin histogram (descending):
// sh.bin, sh.above (counts in higher bins), sh.total (all counts); when
// total < need, bin = DC_TOPN_BINS (none). Every thread calls it.
__device__ __forceinline__ void find_bin(const uint32_t *hist, uint32_t need, TopnShared &sh)
{
    constexpr int BPT = DC_TOPN_BINS / DCPTOPK_THREADS; // bins per thread
    const int32_t top = DC_TOPN_BINS - 1 - (int32_t)threadIdx.x * BPT;
    uint32_t h[BPT], s = 0;
#pragma unroll
    for (int j = 0; j < BPT; j++) {
        h[j] = hist[top - j];
        s += h[j];
    }
    uint32_t total;
    uint32_t before = block_exclusive_scan(s, sh.warp_sums, &total);
    if (threadIdx.x == 0) {
        sh.total = total;
        if (total < need) {
            sh.bin = DC_TOPN_BINS;
            sh.above = total;
        }
    }
    if (total >= need && before < need && before + s >= need) {
#pragma unroll
        for (int j = 0; j < BPT; j++) {
            if (before < need && before + h[j] >= need) {
                sh.bin = (uint32_t)(top - j);
                sh.above = before;
            }
            before += h[j];
        }
    }
    __syncthreads();
}

// A run of equal bins counted in a register, flushed by one shared atomic
// when the bin changes: masked rows and heavy ties hit one bin all along.
struct BinRun {
    uint32_t bin = 0xFFFFFFFFu, n = 0;
    __device__ __forceinline__ void add(uint32_t *hist, uint32_t b)
    {
        if (b != bin) {
            if (n)
                atomicAdd(&hist[bin], n);
            bin = b;
            n = 0;
        }
        n++;
    }
    __device__ __forceinline__ void flush(uint32_t *hist)
    {
        if (n)
            atomicAdd(&hist[bin], n);
        n = 0;
    }
};

// Sums histogram `local` of every CTA of the group into `merged` (C > 1).
__device__ __forceinline__ const uint32_t *group_hist(uint32_t *local, TopnShared &sh)
{
#if DC_TOPN_CLUSTER > 1
    for (uint32_t i = threadIdx.x * 4u; i < DC_TOPN_BINS; i += DCPTOPK_THREADS * 4u) {
        u32x4 s = {0u, 0u, 0u, 0u};
#pragma unroll
        for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++) {
            const u32x4 v = remote_ld4(&local[i], c);
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
        }
        *(u32x4 *)&sh.hist[i] = s;
    }
    __syncthreads();
    return sh.hist;
#else
    (void)sh;
    return local;
#endif
}

// --------------------------------------------------------- the selection

// Out: put(pos, word) for a selected candidate at slot pos; zero(pos) for an
// empty slot; plane(w, bits) for plane word w. All three may be called by any
// thread of the group, each slot / plane word exactly once.
//
// row: the row's first logit; E: its candidate bound (already clamped);
// chunk: columns per CTA (multiple of 8); keys: dynamic shared memory of
// chunk 16-bit words; n_sel: N.
template <int NSEL, class Out>
__device__ __forceinline__ void topn_row(const uint16_t *__restrict__ row, int32_t E, int32_t chunk,
                                         uint16_t *keys, TopnShared &sh, const Out &out)
{
    static_assert(NSEL % 32 == 0 && NSEL >= 32 && NSEL <= 4096, "N: multiple of 32, <= 4096");
    const uint32_t tid = threadIdx.x;
    const uint32_t crank = cluster_rank();
    const int32_t lo = (int32_t)crank * chunk;
    int32_t len = E - lo;
    len = len < 0 ? 0 : (len > chunk ? chunk : len);
    const int32_t nvec = (len + 7) >> 3;       // 8-key vectors in smem
    const int32_t nfull = len >> 3;            // full vectors in HBM

    for (uint32_t i = tid; i < DC_TOPN_BINS; i += DCPTOPK_THREADS) {
        sh.hist_local[i] = 0u;
        sh.hist_max_local[i] = 0u;
    }
    if (tid < DC_TOPN_FINE)
        sh.fine_local[tid] = 0u;
    if (tid == 0) {
        sh.above_local = 0u;
        sh.cnt_local = 0u;
        sh.lo_count = 0u;
    }
    __syncthreads();

    // ---- 1. load (HBM read once), keys to smem, histogram of the maxima of
    // the 8-key vectors. The N-th largest maximum is a lower bound of the
    // N-th largest key (N vectors each hold a key >= it), and a tight one:
    // only keys >= it are histogrammed below.
    const uint16_t *src = row + lo;
    u32x4 *kv = (u32x4 *)keys;
    // Vectors in flight per thread: a CTA of a cluster (decode: few long
    // rows, one CTA per SM) loads 16 or more vectors per thread, so it keeps
    // twice as many in flight; one CTA per row (prefill, three CTAs per SM)
    // stays within 40 registers.
    constexpr int U = DC_TOPN_CLUSTER > 1 ? 8 : 4;
    {
        BinRun run;
        for (int32_t base = 0; base < nvec; base += U * DCPTOPK_THREADS) {
            u32x4 r[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int32_t v = base + u * DCPTOPK_THREADS + (int32_t)tid;
                if (v < nfull) {
                    r[u] = ldg_nc_v4(src + (int64_t)v * 8);
                } else if (v < nvec) {
                    uint32_t h[8];
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        const int32_t c = v * 8 + e;
                        // 0xFFFF is a NaN pattern: key 0, never a candidate.
                        h[e] = c < len ? ldg_nc_u16(src + c) : 0xFFFFu;
                    }
                    r[u].x = h[0] | (h[1] << 16);
                    r[u].y = h[2] | (h[3] << 16);
                    r[u].z = h[4] | (h[5] << 16);
                    r[u].w = h[6] | (h[7] << 16);
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int32_t v = base + u * DCPTOPK_THREADS + (int32_t)tid;
                if (v < nvec) {
                    u32x4 k;
                    k.x = ord16x2(r[u].x);
                    k.y = ord16x2(r[u].y);
                    k.z = ord16x2(r[u].z);
                    k.w = ord16x2(r[u].w);
                    kv[v] = k;
                    const uint32_t m = max_key8(k);
                    if (m != 0u)
                        run.add(sh.hist_max_local, m >> 5);
                }
            }
        }
        run.flush(sh.hist_max_local);
    }
    group_sync();

    // ---- the lower bound lb (>= 1): the floor of the bin of the N-th
    // largest maximum; 1 (every non-NaN key) when fewer than N vectors have
    // one.
    const uint32_t *hmax = group_hist(sh.hist_max_local, sh);
    find_bin(hmax, (uint32_t)NSEL, sh);
    const uint32_t lb = sh.bin < DC_TOPN_BINS && sh.bin > 0u ? (sh.bin << 5) : 1u;
    // The list pays when it prunes: at most half of the group's vectors
    // reach lb. Heavily tied rows (integer or +100-shifted scores in bf16)
    // reach it almost all; they walk every vector instead (uniform).
    const bool use_list =
        sh.bin < DC_TOPN_BINS && 2u * (sh.above + hmax[sh.bin]) <= sh.total;

    // ---- the candidate vectors: those whose maximum is >= lb, listed in
    // ascending order (thread tid takes LV consecutive vectors per round, one
    // block scan per round). The passes below walk this list only: a few
    // hundred vectors of a 2048-vector row, with every lane busy.
    uint16_t *list = keys + chunk; // nvec entries (the launcher's extra space)
    uint32_t nlist = use_list ? 0u : (uint32_t)nvec; // uniform over the CTA
    // Vector of list entry i.
    auto vec_at = [&](uint32_t i) -> uint32_t { return use_list ? (uint32_t)list[i] : i; };
    if (use_list) {
        constexpr int LV = 4;
        for (int32_t r0 = 0; r0 < nvec; r0 += LV * DCPTOPK_THREADS) {
            const int32_t v0 = r0 + (int32_t)tid * LV;
            uint32_t flags = 0;
#pragma unroll
            for (int u = 0; u < LV; u++)
                if (v0 + u < nvec && max_key8(kv[v0 + u]) >= lb)
                    flags |= 1u << u;
            uint32_t tot;
            uint32_t at = nlist + block_exclusive_scan((uint32_t)__popc(flags), sh.warp_sums, &tot);
#pragma unroll
            for (int u = 0; u < LV; u++)
                if ((flags >> u) & 1u)
                    list[at++] = (uint16_t)(v0 + u);
            nlist += tot;
        }
    }
    __syncthreads();

    // ---- 11-bit histogram of the keys >= lb
    {
        BinRun run;
        uint32_t cnt = 0;
        for (uint32_t i = tid; i < nlist; i += DCPTOPK_THREADS) {
            const u32x4 k = kv[vec_at(i)];
            if (!use_list && max_key8(k) < lb)
                continue;
            const uint32_t w4[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const uint32_t key = (w4[e >> 1] >> ((e & 1) * 16)) & 0xFFFFu;
                if (key >= lb) {
                    run.add(sh.hist_local, key >> 5);
                    cnt++;
                }
            }
        }
        run.flush(sh.hist_local);
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            cnt += __shfl_xor_sync(0xFFFFFFFFu, cnt, d);
        if (lane_id() == 0 && cnt)
            atomicAdd(&sh.cnt_local, cnt);
    }
    group_sync();

    // ---- the bin of the N-th largest key. total = keys >= lb; when it is
    // <= N, every one of them is taken (tau = lb - 1, no tie rule).
    find_bin(group_hist(sh.hist_local, sh), (uint32_t)NSEL, sh);
    const uint32_t total = sh.total;
    const bool take_all = total <= (uint32_t)NSEL;
    // (take_all: no key is in bin DC_TOPN_BINS, pass 2 below counts nothing)
    const uint32_t bin = take_all ? (uint32_t)DC_TOPN_BINS : sh.bin;
    const uint32_t count = take_all ? total : (uint32_t)NSEL;

    // Empty slots (CTA 0 of the group).
    if (crank == 0)
        for (uint32_t j = count + tid; j < (uint32_t)NSEL; j += DCPTOPK_THREADS)
            out.zero(j);

    // ---- 2. 5-bit histogram of the keys in the bin, keys above it (local)
    {
        uint32_t above = 0;
        const uint32_t bin_lo = bin << 5;
        for (uint32_t i = take_all ? nlist : tid; i < nlist; i += DCPTOPK_THREADS) {
            const u32x4 k = kv[vec_at(i)];
            // Many listed vectors lie wholly below the bin: one test skips them.
            if (max_key8(k) < bin_lo)
                continue;
            const uint32_t w4[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const uint32_t key = (w4[e >> 1] >> ((e & 1) * 16)) & 0xFFFFu;
                const uint32_t b = key >> 5;
                above += b > bin ? 1u : 0u;
                if (b == bin && key != 0u)
                    atomicAdd(&sh.fine_local[key & 31u], 1u);
            }
        }
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            above += __shfl_xor_sync(0xFFFFFFFFu, above, d);
        if (lane_id() == 0 && above)
            atomicAdd(&sh.above_local, above);
    }
    group_sync();

    // ---- tau, need_eq and this CTA's bases (warp 0)
    if (warp_id() == 0) {
        const uint32_t lane = lane_id();
        const uint32_t fb = 31u - lane; // lane i holds fine bin 31 - i
        uint32_t f = 0;
#pragma unroll
        for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++)
            f += remote_ld(&sh.fine_local[fb], c);
        uint32_t incl = f;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, incl, d);
            if (lane >= (uint32_t)d)
                incl += y;
        }
        const uint32_t excl = incl - f;
        const uint32_t above = sh.above;
        uint32_t x = 0, gt = total;
        if (!take_all) {
            const bool hit = above + excl < (uint32_t)NSEL && above + incl >= (uint32_t)NSEL;
            const uint32_t m = __ballot_sync(0xFFFFFFFFu, hit);
            const uint32_t src_lane = (uint32_t)(__ffs(m) - 1);
            x = 31u - src_lane;
            gt = above + __shfl_sync(0xFFFFFFFFu, excl, src_lane);
        }
        // take_all: tau = lb - 1, so "key > tau" is "key >= lb".
        const uint32_t tau = take_all ? lb - 1u : ((bin << 5) | x);
        // Per-CTA counts of keys > tau and == tau; lane c < C handles CTA c.
        uint32_t gt_c = 0, eq_c = 0;
        if (lane < DC_TOPN_CLUSTER) {
            if (take_all) {
                gt_c = remote_ld(&sh.cnt_local, lane);
            } else {
                gt_c = remote_ld(&sh.above_local, lane);
                for (uint32_t b = x + 1; b < DC_TOPN_FINE; b++)
                    gt_c += remote_ld(&sh.fine_local[b], lane);
                eq_c = remote_ld(&sh.fine_local[x], lane);
            }
        }
        uint32_t gt_before = 0, eq_before = 0;
#pragma unroll
        for (uint32_t c = 0; c < DC_TOPN_CLUSTER; c++) {
            const uint32_t g = __shfl_sync(0xFFFFFFFFu, gt_c, c);
            const uint32_t q = __shfl_sync(0xFFFFFFFFu, eq_c, c);
            if (c < crank) {
                gt_before += g;
                eq_before += q;
            }
        }
        if (lane == 0) {
            sh.tau = tau;
            sh.need_eq = take_all ? 0u : (uint32_t)NSEL - gt;
            sh.gt_base = gt_before;
            sh.eq_base = eq_before;
        }
    }
    __syncthreads();

    // ---- 3. stable compaction in ascending local id
    const uint32_t tau = sh.tau;
    const uint32_t need_eq = sh.need_eq;
    uint32_t gt_run = sh.gt_base, eq_run = sh.eq_base;
    uint32_t lo_sel = 0;
    // Tiles of listed vectors; thread tid takes VPT consecutive list entries.
    constexpr int VPT = DC_TOPN_PER_THREAD / 8;
    constexpr uint32_t TILE_V = DCPTOPK_THREADS * VPT;
    for (uint32_t t0 = 0; t0 < nlist; t0 += TILE_V) {
        const uint32_t l0 = t0 + tid * VPT;
        uint32_t w8[DC_TOPN_PER_THREAD / 2];
        uint32_t vid[VPT];
        uint32_t kmax = 0;
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            u32x4 k = {0u, 0u, 0u, 0u};
            vid[q] = 0;
            if (l0 + q < nlist) {
                vid[q] = vec_at(l0 + q);
                k = kv[vid[q]];
            }
            const uint32_t m = max_key8(k);
            kmax = m > kmax ? m : kmax;
            w8[4 * q + 0] = k.x;
            w8[4 * q + 1] = k.y;
            w8[4 * q + 2] = k.z;
            w8[4 * q + 3] = k.w;
        }
        // Bit e of gmask / qmask: key e > tau / key e == tau (and not NaN).
        // Keys below max(tau, 1) are never taken: many threads skip here.
        uint32_t gmask = 0, qmask = 0;
        if (kmax >= (tau > 1u ? tau : 1u)) {
#pragma unroll
            for (int e = 0; e < DC_TOPN_PER_THREAD; e++) {
                const uint32_t key = (w8[e >> 1] >> ((e & 1) * 16)) & 0xFFFFu;
                gmask |= (key > tau ? 1u : 0u) << e;
                qmask |= (key == tau && key != 0u ? 1u : 0u) << e;
            }
        }
        const uint32_t g = (uint32_t)__popc(gmask), q = (uint32_t)__popc(qmask);
        uint32_t tile_total;
        const uint32_t ex = block_exclusive_scan(g | (q << 16), sh.warp_sums, &tile_total);
        const uint32_t gb = gt_run + (ex & 0xFFFFu), qb = eq_run + (ex >> 16);
        for (uint32_t sel = gmask | qmask; sel != 0u; sel &= sel - 1u) {
            const uint32_t e = (uint32_t)(__ffs(sel) - 1);
            const uint32_t below = (1u << e) - 1u;
            const uint32_t gbe = gb + (uint32_t)__popc(gmask & below);
            const uint32_t qbe = qb + (uint32_t)__popc(qmask & below);
            uint32_t pos;
            if ((gmask >> e) & 1u) {
                pos = gbe + (qbe < need_eq ? qbe : need_eq);
            } else {
                if (qbe >= need_eq)
                    continue;
                pos = gbe + qbe;
            }
            // Registers are not indexed by e (that would put them in local
            // memory): the vector through a select, the key from shared.
            uint32_t v = vid[0];
#pragma unroll
            for (int qq = 1; qq < VPT; qq++)
                v = (e >> 3) == (uint32_t)qq ? vid[qq] : v;
            const uint32_t key = keys[v * 8u + (e & 7u)];
            const uint32_t l = (uint32_t)lo + v * 8u + (e & 7u);
            out.put(pos, pack_word(key, l));
            lo_sel += l < 65536u ? 1u : 0u;
        }
        gt_run += tile_total & 0xFFFFu;
        eq_run += tile_total >> 16;
    }
    if (lo_sel)
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
