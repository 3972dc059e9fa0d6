// pair_select.cu - the pair merge's select: the top K of the W*K 8-byte
// candidates (fp32 score bits, int32 global id) of every row, read in place.
//
// Layouts (DCPTOPK_LAYOUT): 0 = rank-major [W, T_alloc, K, 2], the all-gather
// output, read in place (rank r of row t at r * rank_stride + t * K * 2 ints);
// 1 = row-major [T, W*K, 2]. Position p = r * K + j in both; the outputs are
// identical. 2 and 3: the same with the id word a float value (vLLM's
// candidates), converted where it is read (gid_of), so nothing is copied.
//
// Contract (docs/CONTRACT.md, "Pair merge"): a candidate is valid iff gid >= 0
// and its score is not NaN. Key = (ord32(score) << 32) | (0xFFFFFFFF - gid);
// the K largest keys are selected (all valid ones if fewer), equal keys (a
// duplicated candidate) lower position first. Output order: ascending
// position; ids -1 padded to K. Owned rows: the selected gids of this rank,
// mapped through the block table, compacted in the same order.
//
// One CTA per row, or, where dc_pair_select_split asks (the entry points
// do not: it measured slower, docs/TUNING.md), C = 2 or 4 CTAs per row (a
// thread-block cluster; the key's variant, pair_abi.h): CTA c holds the
// row's positions [c * WK / C, (c + 1) * WK / C). Each CTA builds its own
// histogram of every pass; a cluster barrier and reads of the peers'
// shared memory sum them (gather_hist), with the counts of the CTAs before
// this one beside the row's, so that every CTA takes the same decisions
// and knows where its selected candidates go in the row. The owned-row
// counts travel by asynchronous stores into the later CTAs. Positions below
// are the CTA's own.
//
// Loads: thread `tid` reads the 16-byte vectors v = i * THREADS +
// tid (two candidates, positions 2v and 2v + 1), i = 0 .. ITERS-1: a warp reads
// 512 contiguous bytes, and a vector never straddles two ranks (K is even).
// 1. Load: primary keys ord32 (0 = invalid) go to shared memory (or are
//    re-read from global / L2 when W*K*4 bytes do not fit), fused with the
//    histogram of their top 11 bits.
// 2. Radix select of the K-th largest primary key, digits 11/11/10; stops as
//    soon as the boundary bin is taken whole. With one CTA a row, warp 0
//    alone finds each pass's bin (find_bin_warp), every thread keeps the
//    decision in registers, and pass 1 counts into a second histogram that
//    was cleared with the first. If the boundary primary value is
//    tied, the same select over the secondary key 0xFFFFFFFF - gid of the tied
//    candidates (their gids read as in 3). If even the full keys are tied
//    (duplicates), the first ones in position order are taken. With at most
//    32 positions a thread (kMask), pass 1 also leaves two bit masks in
//    registers, the keys above and in the pass-0 boundary bin, and pass 2
//    walks only the latter.
// 3. Emit: thread tid owns a contiguous run of kChunk positions; it flags its
//    selected candidates (from the masks when the threshold came after pass
//    1), one block scan gives its output offsets, it lists their positions
//    in shared memory, and the block reads their gids (from shared memory
//    where pair_abi.h keeps them there, else mostly L2 hits) and writes ids
//    and owned rows in ascending position order. Keys are read back from
//    shared memory in 16-byte groups; their XOR-swizzled layout keeps both
//    access patterns free of bank conflicts.
#include "pair_abi.h"
#define DCPTOPK_THREADS                                                        \
    DC_PAIR_SELECT_THREADS(DC_PAIR_SEGMENTS(DCPTOPK_WORLD_SIZE, DCPTOPK_VARIANT), DCPTOPK_TOPK, \
                           DC_PAIR_CLUSTER(DCPTOPK_VARIANT), DC_PAIR_TWO_CTAS(DCPTOPK_VARIANT))
#include "common.cuh"

namespace ps {

constexpr int kK = DCPTOPK_TOPK;
constexpr int kW = DCPTOPK_WORLD_SIZE;
// Segments of K candidates a row: W (the flat merge), or the node count of
// the hierarchical merge's second stage (each node's exact top K; gids and
// owned rows still decode with W).
constexpr int kSeg = DC_PAIR_SEGMENTS(kW, DCPTOPK_VARIANT);
constexpr int kB = DCPTOPK_BLOCK_SIZE;
constexpr int kS = DCPTOPK_INTERLEAVE;
constexpr int kThreads = DCPTOPK_THREADS;
constexpr bool kRowMajor = (DCPTOPK_LAYOUT & 1) != 0;
constexpr bool kFloatIds = (DCPTOPK_LAYOUT & 2) != 0;
constexpr bool kEmitIds = DCPTOPK_EMIT_IDS != 0;

// CTAs a row (a cluster when more than one): CTA c of a row holds its
// positions [c * kCands, (c + 1) * kCands).
constexpr int kClu = DC_PAIR_CLUSTER(DCPTOPK_VARIANT);
constexpr bool kGroup = kClu > 1;
constexpr int kRowCands = kSeg * kK;         // candidates per row
constexpr int kCands = kRowCands / kClu;     // candidates per CTA
constexpr int kVecs = kCands / 2;            // 16-byte vectors per CTA
constexpr int kWarps = kThreads / 32;
constexpr int kIters = (kVecs + kThreads - 1) / kThreads;
constexpr bool kFullIters = kVecs % kThreads == 0;
constexpr int kBins = 2048;                  // 11-bit digits
// Emit phase: thread tid owns the contiguous positions [tid * kChunk,
// tid * kChunk + kChunk) (a multiple of 4: one 16-byte shared load).
constexpr int kChunk = ((kCands + kThreads - 1) / kThreads + 3) / 4 * 4;
// Keys live in shared memory when they fit DC_PAIR_SELECT_KEY_BYTES_MAX (the
// launcher sizes the dynamic shared memory by the same rule).
constexpr bool kSmemKeys = DC_PAIR_SELECT_SMEM_KEYS(kSeg, kK, kClu);
// At most 32 positions a thread and keys in shared memory: the radix passes
// and the emit keep per-key flags as bit masks in registers (bit j =
// position tid * kChunk + j).
constexpr bool kMask = kChunk <= 32 && kSmemKeys;
// Gids beside the keys in shared memory (pair_abi.h says where), so that
// the emit and the tie modes read them there instead of from the L2.
// The target as dc_arch_number gives it (90: sm_90a), for that rule;
// tests/emu builds for sm_90a.
#ifdef __CUDA_ARCH__
constexpr int kArch = __CUDA_ARCH__ / 10;
#else
constexpr int kArch = 90;
#endif
// Positions [0, kGidCands) have their gids on chip: all of them
// (kSmemGids), the first half in a row of 16384's two-CTA shape, or none.
constexpr int kGidCands =
    kSmemKeys ? DC_PAIR_SELECT_GID_CANDS(kSeg, kK, kClu, kArch, DC_PAIR_TWO_CTAS(DCPTOPK_VARIANT))
              : 0;
constexpr bool kSmemGids = kGidCands == kCands;
// Bytes reserved for Shared (below) at the start of the dynamic shared
// memory; the keys follow (pair_abi.h: the launcher adds the same).
constexpr int kSharedBytes = DC_PAIR_SELECT_SHARED_BYTES(kClu);
// CTAs per SM: few enough rows in flight that the L2 still holds a row's
// pairs when its emit re-reads the gids of the selected candidates (else
// each gid costs a DRAM sector): about 17 MB was the best of the shapes
// measured on the H100 (docs/TUNING.md). Rows of 8192 to 16383
// candidates run two 512-thread CTAs an SM (three, 26 MB in flight, were
// slower and spilled at their 40-register bound), as do rows of 16384 in
// their two-CTA shape; rows of 16384 to 32768 one 1024-thread CTA
// (pair_abi.h); smaller rows 32..256 threads, as many
// CTAs as their registers allow. Slower (docs/TUNING.md): streaming every
// row through a cp.async ring, a persistent grid prefetching the next row
// into L2, prefetching it at one CTA an SM. A split row's CTA keeps its
// gids on chip (no re-read; its shared memory allows two CTAs an SM at 512
// threads, three at fewer), as do the rows kSmemGids names.
constexpr int kMinBlocks =
    kGroup ? (kThreads >= 512 ? 2 : 3) : kThreads == 512 && kCands * 4 <= 65536 ? 2 : 1;
// Vectors loaded per batch of the load phase (registers in flight): 8,
// faster than 4 on the large rows; 16 gains nothing at two CTAs an SM.
constexpr int kLoadBatch = 8;

static_assert(kK % 32 == 0 && kK >= 32 && kK <= 4096, "K: multiple of 32 up to 4096");
static_assert(kW >= 1 && kW <= 16, "W in 1..16");
static_assert(kSeg >= 1 && kW % kSeg == 0, "segments divide W");
static_assert(DCPTOPK_LAYOUT >= 0 && DCPTOPK_LAYOUT <= 3, "layout 0..3");
static_assert(kS >= 1, "interleave >= 1");
static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
static_assert(kK <= 65535, "two 16-bit counts share a scan word");
static_assert(kCands % 4 == 0, "whole 16-byte key groups");
static_assert(kClu == 1 || kClu == 2 || kClu == 4, "1, 2 or 4 CTAs a row");
static_assert(kGidCands % 32 == 0 && kGidCands <= kCands, "whole 32-position rows of gids");
static_assert(!DC_PAIR_TWO_CTAS(DCPTOPK_VARIANT) || (kClu == 1 && kRowCands == DC_PAIR_TWO_CTAS_ROW),
              "the two-CTA shape is a one-CTA row of 16384's");
static_assert(!kGroup || (kRowCands <= DC_PAIR_CLUSTER_MAX_ROW && kSmemGids && kMask),
              "a split row: two 16-bit counts a bin, keys and flags on chip");

// Selection modes, decided by the radix passes.
enum : uint32_t {
    kModeAllValid = 0,   // fewer than K valid: take every valid candidate
    kModePrimary = 1,    // (key & mask) >= pre decides
    kModeSecondary = 2,  // key > P, or key == P and (sec & mask2) >= pre2
    kModeDuplicates = 3  // key > P, or key == P and sec > S, or the first
                         // `need` in position order with (P, S)
};

// The selection rule the radix passes decide on, in every thread's
// registers (each takes the same steps from the same counts; a copy in
// shared memory cost two barriers a row).
struct Decision {
    uint32_t mode, mask, pre, prim, mask2, pre2, need;
};

// hist is the histogram find_bin reads. In a cluster each bin holds two
// 16-bit counts, the row's (low half) and the CTAs' before this one (high
// half); the *_before fields and sel_before are the high halves' answers.
struct Shared {
    uint32_t hist[kBins];
    uint32_t warp_sums[32];
    uint32_t bin, above, cnt, total;
    uint32_t above_before, cnt_before, total_before;
    uint32_t sel_before; // selected candidates in the CTAs before this one
    uint32_t sel_all;    // selected candidates of the row
    uint32_t dup_before; // duplicates mode: tied candidates before this CTA
};

// A cluster's extra shared memory, after Shared: each CTA's own histograms
// (two, alternating by pass, which its peers read), and the owned-row
// counts the CTAs before this one send it.
struct ClusterShared {
    uint32_t local[2][kBins];
    uint64_t own_bar;
    uint32_t own_in[DC_PAIR_CLUSTER_MAX];
};
// Past Shared (DC_PAIR_SELECT_STATE_BYTES): a cluster's ClusterShared, or
// one CTA's second histogram (pass 1's, cleared with the first).
static_assert(sizeof(Shared) <= DC_PAIR_SELECT_STATE_BYTES, "Shared fits its reservation");
static_assert(DC_PAIR_SELECT_STATE_BYTES +
                      (kGroup ? (int)sizeof(ClusterShared) : kBins * 4) <= kSharedBytes,
              "ClusterShared or the second histogram fits its reservation");
static_assert(DC_PAIR_SELECT_STATE_BYTES % 16 == 0, "ClusterShared 16-byte aligned");

// One CTA's second histogram, past Shared.
__device__ __forceinline__ uint32_t *hist_b(Shared &sh)
{
    return reinterpret_cast<uint32_t *>(reinterpret_cast<char *>(&sh) +
                                        DC_PAIR_SELECT_STATE_BYTES);
}
static_assert(kSharedBytes % 16 == 0, "keys 16-byte aligned");

// Read-only loads through the intrinsics, not inline asm: the compiler may
// speculate an asm statement that is not volatile out of its guard (past the
// row's candidates), while it never speculates a real load.
__device__ __forceinline__ void ld_nc_v4(const int32_t *p, int32_t &a, int32_t &b,
                                         int32_t &c, int32_t &d)
{
    const int4 v = __ldg(reinterpret_cast<const int4 *>(p));
    a = v.x;
    b = v.y;
    c = v.z;
    d = v.w;
}

__device__ __forceinline__ void ld_nc_v2(const int32_t *p, int32_t &a, int32_t &b)
{
    const int2 v = __ldg(reinterpret_cast<const int2 *>(p));
    a = v.x;
    b = v.y;
}

__device__ __forceinline__ int32_t ld_nc(const int32_t *p) { return __ldg(p); }

// Offset in int32 words of the pair at position p of a row (row base already
// applied): rank-major: (p / K) * rank_stride + (p % K) * 2; row-major: 2p.
__device__ __forceinline__ long long pair_offset(uint32_t p, long long rank_stride)
{
    if (!kRowMajor)
        return (long long)(p / kK) * rank_stride + (long long)(p % kK) * 2;
    return (long long)p * 2;
}

// The gid of a candidate's id word: the word, or with float ids its value
// when 0 <= f < 2^31 (truncated), else -1 (NaN fails the compare), as
// dcptopk_pair_gid says.
__device__ __forceinline__ int32_t gid_of(int32_t word)
{
    if (!kFloatIds)
        return word;
    const float f = __int_as_float(word);
    return f >= 0.0f && f < 2147483648.0f ? __float2int_rz(f) : -1;
}

// dc::ord32 of the score, 0 when the gid (of the id word) is negative or the
// score NaN:
// without branches (a float compare of the score with itself finds the
// NaNs). The valid keys (-inf .. +inf) are [0x007FFFFF, 0xFF800000]: their
// top 11 bits are 3 or more, so the invalid ones count in bin 0 of the
// first histogram, which the selection never reads.
__device__ __forceinline__ uint32_t primary_key(int32_t score_bits, int32_t gid)
{
    const uint32_t k = (uint32_t)score_bits ^ ((uint32_t)(score_bits >> 31) | 0x80000000u);
    const float f = __int_as_float(score_bits);
    return gid_of(gid) >= 0 && f == f ? k : 0u;
}

// The sum of sh.warp_sums over the warps before `warp`; *all = over all.
// Lane w reads warp w's sum, two warp reductions add them up. Every lane of
// the warp calls it.
__device__ __forceinline__ uint32_t warps_before(const Shared &sh, uint32_t warp, uint32_t *all)
{
    const uint32_t lane = dc::lane_id();
    const uint32_t s = lane < (uint32_t)kWarps ? sh.warp_sums[lane] : 0u;
    *all = __reduce_add_sync(0xFFFFFFFFu, s);
    return __reduce_add_sync(0xFFFFFFFFu, lane < warp ? s : 0u);
}

// Inclusive scan of one value per thread over the block; returns the
// inclusive prefix, *total = the block sum. Two barriers; warp_sums is free
// again on return. OPEN: one barrier, and warp_sums stays read until the
// caller's next barrier, which must come before the next scan.
template <bool OPEN = false>
__device__ __forceinline__ uint32_t block_scan(Shared &sh, uint32_t x, uint32_t *total)
{
    const uint32_t lane = dc::lane_id(), warp = dc::warp_id();
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, x, d);
        if (lane >= (uint32_t)d)
            x += y;
    }
    if (lane == 31)
        sh.warp_sums[warp] = x;
    __syncthreads();
    uint32_t all;
    const uint32_t before = warps_before(sh, warp, &all);
    if (!OPEN)
        __syncthreads();
    *total = all;
    return x + before;
}

// The row's count of a histogram word (in a cluster, its low half).
__device__ __forceinline__ uint32_t row_count(uint32_t w) { return kGroup ? w & 0xFFFFu : w; }

// Finds the bin of the `need`-th largest element in sh.hist: sh.bin, sh.above
// (elements in higher bins), sh.cnt (elements in the bin), sh.total; in a
// cluster also their counts in the CTAs before this one (*_before). When
// total < need, no bin is found and sh.bin is stale: only pass 0 may have
// fewer, and radix_select reads sh.total first. Two barriers: every thread
// knows the total from the scan, so one barrier publishes all of it.
// A cluster's packed words add without carries: each half sums to at most
// kRowCands < 65536.
__device__ void find_bin_block(Shared &sh, uint32_t need)
{
    constexpr int kPer = (kBins + kThreads - 1) / kThreads;
    const int tid = threadIdx.x;
    const int lo = tid * kPer;
    uint32_t mine = 0;
#pragma unroll
    for (int c = 0; c < kPer; c++)
        if (lo + c < kBins)
            mine += sh.hist[lo + c];
    uint32_t total;
    const uint32_t incl = block_scan<true>(sh, mine, &total);
    if (tid == 0) {
        sh.total = row_count(total);
        if (kGroup)
            sh.total_before = total >> 16;
    }
    uint32_t above = total - incl; // elements in bins past this thread's range
    if (row_count(above) < need && row_count(above + mine) >= need) {
        for (int c = kPer - 1; c >= 0; c--) {
            if (lo + c >= kBins)
                continue;
            const uint32_t h = sh.hist[lo + c];
            if (row_count(above + h) >= need) {
                sh.bin = (uint32_t)(lo + c);
                sh.above = row_count(above);
                sh.cnt = row_count(h);
                if (kGroup) {
                    sh.above_before = above >> 16;
                    sh.cnt_before = h >> 16;
                }
                break;
            }
            above += h;
        }
    }
    __syncthreads();
}

// Sum of x over the lanes at or above this one.
__device__ __forceinline__ uint32_t warp_suffix_sum(uint32_t x)
{
    const uint32_t lane = dc::lane_id();
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_down_sync(0xFFFFFFFFu, x, d);
        if (lane + (uint32_t)d < 32u)
            x += y;
    }
    return x;
}

// find_bin of one CTA a row: warp 0 alone searches, while the others wait
// at the one barrier that publishes its answer. Lane l sums bins [64 l,
// 64 l + 64) (its 16-byte reads rotated by l, so that the lanes spread over
// the banks), the lanes' suffix sums find the boundary lane, and the warp
// then takes that lane's 64 bins two a lane. A block-wide search costs
// every warp a scan and two barriers.
__device__ void find_bin_warp(Shared &sh, uint32_t need, const uint32_t *hist)
{
    static_assert(kBins == 32 * 64, "64 bins a lane");
    if (dc::warp_id() == 0) {
        const uint32_t lane = dc::lane_id();
        uint32_t s = 0;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint4 v = *reinterpret_cast<const uint4 *>(
                hist + 64u * lane + 4u * (((uint32_t)i + lane) & 15u));
            s += (v.x + v.y) + (v.z + v.w);
        }
        const uint32_t incl = warp_suffix_sum(s); // this lane's bins and above
        const uint32_t hit = __ballot_sync(0xFFFFFFFFu, incl - s < need && incl >= need);
        if (lane == 0)
            sh.total = incl;
        if (hit != 0u) {
            const uint32_t at = (uint32_t)(__ffs(hit) - 1);
            const uint32_t base = __shfl_sync(0xFFFFFFFFu, incl, at) -
                                  __shfl_sync(0xFFFFFFFFu, s, at); // above lane `at`
            const uint2 b = *reinterpret_cast<const uint2 *>(hist + 64u * at + 2u * lane);
            const uint32_t pair = b.x + b.y;
            const uint32_t above = base + warp_suffix_sum(pair) - pair;
            if (above < need && above + pair >= need) {
                const bool hi = above + b.y >= need; // the pair's upper bin holds it
                sh.bin = 64u * at + 2u * lane + (hi ? 1u : 0u);
                sh.above = hi ? above : above + b.y;
                sh.cnt = hi ? b.y : b.x;
            }
        }
    }
    __syncthreads();
}

// hist: the pass's own buffer (a cluster's row histogram is sh.hist).
__device__ __forceinline__ void find_bin(Shared &sh, uint32_t need, const uint32_t *hist)
{
    if (kGroup)
        find_bin_block(sh, need);
    else
        find_bin_warp(sh, need, hist);
}

__device__ __forceinline__ void clear_hist(uint32_t *hist)
{
    for (int c = threadIdx.x; c < kBins; c += kThreads)
        hist[c] = 0u;
    __syncthreads();
}

// Per-row context. Positions below are the CTA's own (0 .. kCands - 1);
// the row's position of p is pos0 + p.
struct Row {
    const int32_t *base;   // row base: candidates + t * K * 2 (rank-major) or t * W*K*2
    long long rank_stride; // int32 words between two ranks (rank-major)
    const uint32_t *keys;  // shared keys, or nullptr
    uint32_t pos0;         // the row's position of this CTA's first (0 with one CTA)
    const int32_t *gids;   // the gids, beside the keys in shared memory (kGidCands)
};

__device__ __forceinline__ uint32_t row_pos(const Row &row, uint32_t p)
{
    return kGroup ? row.pos0 + p : p;
}

// A cluster's histogram of one pass: every CTA's local one (its buffer
// `local`, complete), summed into sh.hist as (row count) | (count in the
// CTAs before this one) << 16. The cluster barrier first makes the peers'
// buffers visible; a buffer is written again two passes later, after the
// next pass's barrier, by which every CTA has read it.
__device__ void gather_hist(Shared &sh, const uint32_t *local)
{
    dc::cluster_arrive();
    dc::cluster_wait();
    const uint32_t me = dc::cluster_ctarank();
    for (int g = threadIdx.x; g < kBins / 4; g += kThreads) {
        uint4 v[kClu];
#pragma unroll
        for (int r = 0; r < kClu; r++)
            v[r] = dc::cluster_ld4(local + 4 * g, (uint32_t)r);
        uint4 tot = make_uint4(0u, 0u, 0u, 0u), bef = tot;
#pragma unroll
        for (int r = 0; r < kClu; r++) {
            tot.x += v[r].x;
            tot.y += v[r].y;
            tot.z += v[r].z;
            tot.w += v[r].w;
            if ((uint32_t)r < me) {
                bef.x += v[r].x;
                bef.y += v[r].y;
                bef.z += v[r].z;
                bef.w += v[r].w;
            }
        }
        *reinterpret_cast<uint4 *>(sh.hist + 4 * g) =
            make_uint4(tot.x | bef.x << 16, tot.y | bef.y << 16, tot.z | bef.z << 16,
                       tot.w | bef.w << 16);
    }
    __syncthreads();
}

// Shared key of position p lives at word key_index(p): rows of 32 words (128
// bytes), whose 16-byte chunks are XOR-swizzled by the row number, so that
// both the load phase (a warp stores 256 contiguous bytes) and the emit
// phase (each lane reads its own 128 contiguous bytes) are free of bank
// conflicts.
__device__ __forceinline__ uint32_t key_index(uint32_t p)
{
    const uint32_t r = p >> 5;
    return (r << 5) | ((((p >> 2) & 7u) ^ (r & 7u)) << 2) | (p & 3u);
}

// The primary keys of positions p .. p+3 (p a multiple of 4).
__device__ __forceinline__ uint4 key4(const Row &row, uint32_t p)
{
    uint4 q;
    if (kSmemKeys) {
        q = *reinterpret_cast<const uint4 *>(row.keys + key_index(p));
    } else {
        // Keys not kept: re-read the pairs (8-byte loads: the buffer is only
        // known to be 8-byte aligned).
        int32_t s0, g0, s1, g1, s2, g2, s3, g3;
        const uint32_t rp = row_pos(row, p);
        ld_nc_v2(row.base + pair_offset(rp, row.rank_stride), s0, g0);
        ld_nc_v2(row.base + pair_offset(rp + 1, row.rank_stride), s1, g1);
        ld_nc_v2(row.base + pair_offset(rp + 2, row.rank_stride), s2, g2);
        ld_nc_v2(row.base + pair_offset(rp + 3, row.rank_stride), s3, g3);
        q = make_uint4(primary_key(s0, g0), primary_key(s1, g1), primary_key(s2, g2),
                       primary_key(s3, g3));
    }
    return q;
}

__device__ __forceinline__ uint32_t get(const uint4 &q, int j)
{
    return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w;
}

__device__ __forceinline__ int32_t gid_at(const Row &row, uint32_t p)
{
    // key_index keeps p in its 32-position row, so p < kGidCands (a
    // multiple of 32) holds its gid.
    if (kSmemGids || (kGidCands > 0 && p < (uint32_t)kGidCands))
        return row.gids[key_index(p)];
    return gid_of(ld_nc(row.base + pair_offset(row_pos(row, p), row.rank_stride) + 1));
}

// Calls f(k, j) with the primary key k of each of this thread's positions
// p0 + j (p0 = tid * kChunk, j < kChunk, ascending, none past the row),
// reading them four at a time. U: the unroll of the loop over groups of 4.
template <int U, class F>
__device__ __forceinline__ void for_my_keys(const Row &row, F f)
{
    const uint32_t p0 = threadIdx.x * kChunk;
#pragma unroll(U)
    for (int c = 0; c < kChunk; c += 4) {
        if (kThreads * kChunk > kCands && p0 + c >= (uint32_t)kCands)
            break;
        const uint4 q4 = key4(row, p0 + c);
#pragma unroll
        for (int j = 0; j < 4; j++)
            f(get(q4, j), (uint32_t)(c + j));
    }
}

// The two candidates of vector v (positions 2v, 2v + 1): their primary keys
// to shared memory (when kept there; their gids too where `gids`, kCands
// words past the keys), their top 11 bits to `hist`.
// dst = skeys + key_index(2 * v).
__device__ __forceinline__ void take_vector(uint32_t *hist, uint32_t *dst, int32_t s0, int32_t g0,
                                            int32_t s1, int32_t g1, bool gids)
{
    const uint32_t k0 = primary_key(s0, g0);
    const uint32_t k1 = primary_key(s1, g1);
    if (kSmemKeys)
        *reinterpret_cast<uint2 *>(dst) = make_uint2(k0, k1);
    if (gids)
        *reinterpret_cast<uint2 *>(dst + kCands) =
            make_uint2((uint32_t)gid_of(g0), (uint32_t)gid_of(g1));
    // Invalid keys (0) count in bin 0, which no valid key reaches: no branch.
    atomicAdd(&hist[k0 >> 21], 1u);
    atomicAdd(&hist[k1 >> 21], 1u);
}

// Load phase: keys to shared memory (when kept there) and the histogram of
// their top 11 bits. V16: 16-byte loads (buffer 16-byte aligned).
//
// Rows of at most 16 iterations are unrolled whole: every iteration's rank
// and offset in the rank fold into constants.
template <bool V16>
__device__ __forceinline__ void load_phase(uint32_t *hist, const Row &row, uint32_t *skeys)
{
    const uint32_t tid = threadIdx.x;
    const uint32_t key0 = key_index(2 * tid);
#pragma unroll(kIters <= 16 ? 16 : 1)
    for (int i0 = 0; i0 < kIters; i0 += kLoadBatch) {
        int32_t s0[kLoadBatch], g0[kLoadBatch], s1[kLoadBatch], g1[kLoadBatch];
#pragma unroll
        for (int b = 0; b < kLoadBatch; b++) {
            const uint32_t v = (uint32_t)(i0 + b) * kThreads + tid;
            s0[b] = 0;
            g0[b] = -1;
            s1[b] = 0;
            g1[b] = -1;
            if (i0 + b < kIters && (kFullIters || v < (uint32_t)kVecs)) {
                // A whole iteration in one rank (2 * kThreads divides K
                // and the CTA's share): its rank and first position are
                // known without tid.
                constexpr bool kOneRank =
                    !kRowMajor && kK % (2 * kThreads) == 0 && kCands % (2 * kThreads) == 0;
                const uint32_t p0 = row_pos(row, (uint32_t)(i0 + b) * (2 * kThreads));
                const int32_t *p =
                    kOneRank ? row.base + (long long)(p0 / kK) * row.rank_stride +
                                   (long long)((p0 % kK + 2 * tid) * 2)
                             : row.base + pair_offset(row_pos(row, 2 * v), row.rank_stride);
                if (V16) {
                    ld_nc_v4(p, s0[b], g0[b], s1[b], g1[b]);
                } else {
                    ld_nc_v2(p, s0[b], g0[b]);
                    ld_nc_v2(p + 2, s1[b], g1[b]);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < kLoadBatch; b++) {
            const uint32_t v = (uint32_t)(i0 + b) * kThreads + tid;
            // With whole 128-thread groups an iteration moves every position
            // by a multiple of 256 (8 swizzle rows): the swizzle of 2 * tid
            // holds for all iterations (a constant offset from key0).
            uint32_t *const dst =
                skeys + (kThreads % 128 == 0 ? key0 + (uint32_t)(i0 + b) * (2 * kThreads)
                                             : key_index(2 * v));
            // Whether this vector's gids stay on chip: known per unrolled
            // iteration where kGidCands is a multiple of its positions.
            const bool gids =
                kSmemGids ||
                (kGidCands > 0 && (kGidCands % (2 * kThreads) == 0
                                       ? (i0 + b) * (2 * kThreads) < kGidCands
                                       : v < (uint32_t)kGidCands / 2));
            if (i0 + b < kIters && (kFullIters || v < (uint32_t)kVecs))
                take_vector(hist, dst, s0[b], g0[b], s1[b], g1[b], gids);
        }
    }
}

// Digit q (0, 1, 2) of a 32-bit key: bits [21, 32), [10, 21), [0, 10).
__device__ __forceinline__ uint32_t digit_shift(int q) { return q == 0 ? 21u : q == 1 ? 10u : 0u; }
__device__ __forceinline__ uint32_t digit_mask(int q) { return q == 2 ? 0x3FFu : 0x7FFu; }

// Histogram of digit q of the primary keys k with k != 0 and
// (k & mask) == pre.
__device__ void hist_primary(uint32_t *hist, const Row &row, int q, uint32_t mask, uint32_t pre)
{
    const uint32_t shift = digit_shift(q), dm = digit_mask(q);
    for_my_keys<4>(row, [&](uint32_t k, uint32_t) {
        if (k && (k & mask) == pre)
            atomicAdd(&hist[(k >> shift) & dm], 1u);
    });
    __syncthreads();
}

// Histogram of digit q of the secondary keys ~gid of the candidates with
// primary key P and (sec & mask) == pre.
__device__ void hist_secondary(uint32_t *hist, const Row &row, int q, uint32_t prim,
                               uint32_t mask, uint32_t pre)
{
    const uint32_t shift = digit_shift(q), dm = digit_mask(q);
    const uint32_t p0 = threadIdx.x * kChunk;
    for_my_keys<1>(row, [&](uint32_t k, uint32_t j) {
        if (k != prim)
            return;
        const uint32_t sk = ~(uint32_t)gid_at(row, p0 + j);
        if ((sk & mask) == pre)
            atomicAdd(&hist[(sk >> shift) & dm], 1u);
    });
    __syncthreads();
}

// Pass 1 with masks (kMask): the histogram of digit 1 of the keys in the
// pass-0 boundary bin b0, and this thread's flags: *above = keys whose top
// 11 bits exceed b0, *inbin = valid keys in b0.
__device__ void hist_pass1(uint32_t *hist, const Row &row, uint32_t b0, uint32_t &above,
                           uint32_t &inbin)
{
    // The flags come from compares only (an atomic under a condition costs
    // a branch per key); the few keys of the bin are counted after. above:
    // k > hi; in the bin or above: k > lo1. b0 >= 3 (bin 0 holds only
    // invalid keys, 1 and 2 none), so neither test needs k != 0.
    const uint32_t hi = ((b0 + 1u) << 21) - 1u; // 0xFFFFFFFF when b0 is the top bin
    const uint32_t lo1 = (b0 << 21) - 1u;
    uint32_t atleast = 0u;
    above = 0u;
    for_my_keys<8>(row, [&](uint32_t k, uint32_t j) {
        above |= (k > hi ? 1u : 0u) << j;
        atleast |= (k > lo1 ? 1u : 0u) << j;
    });
    inbin = atleast & ~above;
    const uint32_t p0 = threadIdx.x * kChunk;
    for (uint32_t m = inbin; m != 0u; m &= m - 1u) {
        const uint32_t k = row.keys[key_index(p0 + (uint32_t)(__ffs(m) - 1))];
        atomicAdd(&hist[(k >> 10) & 0x7FFu], 1u);
    }
    __syncthreads();
}

// Pass 2 with masks: the histogram of digit 2 of the keys flagged in inbin
// with (k & mask) == pre.
__device__ void hist_pass2(uint32_t *hist, const Row &row, uint32_t inbin, uint32_t mask,
                           uint32_t pre)
{
    const uint32_t p0 = threadIdx.x * kChunk;
    for (uint32_t m = inbin; m != 0u; m &= m - 1u) {
        const uint32_t k = row.keys[key_index(p0 + (uint32_t)(__ffs(m) - 1))];
        if ((k & mask) == pre)
            atomicAdd(&hist[k & 0x3FFu], 1u);
    }
    __syncthreads();
}

// Radix select; leaves the decision in dec (every thread takes the same),
// and in a cluster sh.sel_all / sel_before behind a barrier.
// The first histogram is built (sh.hist, or in a cluster cl->local[0]).
// With kMask, *masked says whether pass 1 ran and left this thread's flags
// in above / inbin (see hist_pass1).
//
// In a cluster every CTA builds its own histogram of each pass and reads
// the row's from gather_hist; all of them then take the same decisions, so
// they pass the same cluster barriers. What the CTAs before this one
// select follows from the same counts: their part of each pass's higher
// bins, plus their part of the boundary bin that is taken whole (or, for
// duplicates, of the tied full key, in position order).
__device__ void radix_select(Shared &sh, ClusterShared *cl, const Row &row, Decision &dec,
                             uint32_t &above_mask, uint32_t &inbin_mask, bool &masked)
{
    uint32_t need = kK, mask = 0, pre = 0;
    uint32_t before = 0; // cluster: taken so far in the CTAs before this one
    int e = 0;           // histograms so far
    // The buffer pass e builds (in a cluster its row histogram is summed
    // into sh.hist). One CTA alternates two, so that pass 1 finds its own
    // cleared with the first (no barrier for it).
    auto pass_hist = [&]() -> uint32_t * {
        return kGroup ? cl->local[e & 1] : (e & 1) ? hist_b(sh) : sh.hist;
    };
    auto settle = [&]() {
        if (kGroup)
            gather_hist(sh, cl->local[e & 1]);
        e++;
    };
    // The decision's last step in a cluster: what the CTAs before this one
    // and the whole row select, published by a barrier.
    auto taken = [&](uint32_t sel_before, uint32_t sel_all) {
        if (kGroup) {
            if (threadIdx.x == 0) {
                sh.sel_before = sel_before;
                sh.sel_all = sel_all;
            }
            __syncthreads();
        }
    };
    masked = false;
    for (int q = 0; q < 3; q++) {
        uint32_t *const h = pass_hist();
        if (q > 0) {
            if (kGroup || q != 1)
                clear_hist(h);
            if (kMask && q == 1) {
                hist_pass1(h, row, pre >> 21, above_mask, inbin_mask);
                masked = true;
            } else if (kMask && q == 2) {
                hist_pass2(h, row, inbin_mask, mask, pre);
            } else {
                hist_primary(h, row, q, mask, pre);
            }
        }
        settle();
        // Bin 0 of the first histogram holds the invalid keys: thread 0,
        // the only reader of bin 0 in find_bin (either search), drops it.
        if (q == 0 && threadIdx.x == 0)
            sh.hist[0] = 0u;
        find_bin(sh, need, h);
        if (q == 0 && sh.total <= need) {
            // Fewer than K + 1 valid candidates: every valid one.
            dec.mode = kModeAllValid;
            taken(sh.total_before, sh.total);
            return;
        }
        const uint32_t bin = sh.bin, above = sh.above, cnt = sh.cnt;
        if (kGroup)
            before += sh.above_before;
        need -= above;
        pre |= bin << digit_shift(q);
        mask |= digit_mask(q) << digit_shift(q);
        if (cnt == need) {
            dec.mode = kModePrimary;
            dec.mask = mask;
            dec.pre = pre;
            taken(before + sh.cnt_before, kK);
            return;
        }
    }
    // The boundary primary value P = pre is tied: `need` of its cnt > need
    // candidates are taken, by secondary key.
    const uint32_t prim = pre;
    uint32_t mask2 = 0, pre2 = 0;
    for (int q = 0; q < 3; q++) {
        uint32_t *const h = pass_hist();
        clear_hist(h);
        hist_secondary(h, row, q, prim, mask2, pre2);
        settle();
        find_bin(sh, need, h);
        const uint32_t bin = sh.bin, above = sh.above, cnt = sh.cnt;
        if (kGroup)
            before += sh.above_before;
        need -= above;
        pre2 |= bin << digit_shift(q);
        mask2 |= digit_mask(q) << digit_shift(q);
        if (cnt == need) {
            dec.mode = kModeSecondary;
            dec.prim = prim;
            dec.mask2 = mask2;
            dec.pre2 = pre2;
            taken(before + sh.cnt_before, kK);
            return;
        }
    }
    // Duplicates: the first `need` of the cnt candidates with the full key
    // (P, pre2), in position order; cnt_before of them precede this CTA.
    dec.mode = kModeDuplicates;
    dec.prim = prim;
    dec.mask2 = mask2;
    dec.pre2 = pre2;
    dec.need = need;
    if (kGroup && threadIdx.x == 0)
        sh.dup_before = sh.cnt_before;
    taken(before + (sh.cnt_before < need ? sh.cnt_before : need), kK);
}


// Selection flag of a candidate with primary key k at position p; *gid is
// loaded when the decision needs it (then *have = true). For duplicates,
// `dup` says the candidate has the boundary full key (the caller ranks it).
__device__ __forceinline__ bool decide(const Decision &d, const Row &row, uint32_t k,
                                       uint32_t p, int32_t &gid, bool &have, bool &dup)
{
    dup = false;
    switch (d.mode) {
    case kModeAllValid:
        return k != 0u;
    case kModePrimary:
        return k != 0u && (k & d.mask) >= d.pre;
    default:
        break;
    }
    if (k > d.prim)
        return true;
    if (k != d.prim)
        return false;
    gid = gid_at(row, p);
    have = true;
    const uint32_t s = ~(uint32_t)gid;
    if (d.mode == kModeSecondary)
        return (s & d.mask2) >= d.pre2;
    if (s > d.pre2)
        return true;
    dup = s == d.pre2;
    return false;
}

// Owned physical row of a selected gid; false when it is not this rank's, its
// request owns nothing, or its block index is past the table.
struct RowsMap {
    const int32_t *block_table;
    long long bt_stride;
    int32_t bt_cols;
    int32_t stride_rows;
    int32_t req; // -1 = the row's request owns nothing
    int32_t rank;
};

// Local id of a (valid, non-negative) gid on its owner.
__device__ __forceinline__ uint32_t local_of(int32_t gid)
{
    const uint32_t g = (uint32_t)gid;
    return (g / (kW * kS)) * kS + g % kS;
}

__device__ __forceinline__ bool owned(const RowsMap &m, int32_t gid, uint32_t &l)
{
    if (m.req < 0)
        return false;
    const uint32_t g = (uint32_t)gid;
    if ((g / kS) % kW != (uint32_t)m.rank)
        return false;
    l = local_of(gid);
    return (long long)(l / (uint32_t)(kB > 0 ? kB : 1)) < (long long)m.bt_cols;
}

// Block table entry of an owned local id (its block index is in range).
__device__ __forceinline__ int32_t table_entry(const RowsMap &m, uint32_t l)
{
    constexpr uint32_t b = kB > 0 ? kB : 1;
    return m.block_table[(long long)m.req * m.bt_stride + (long long)(l / b)];
}

// entry * stride_rows + l % B, wrapping like 32-bit unsigned arithmetic.
__device__ __forceinline__ int32_t physical_row(const RowsMap &m, int32_t entry, uint32_t l)
{
    constexpr uint32_t b = kB > 0 ? kB : 1;
    return (int32_t)((uint32_t)entry * (uint32_t)m.stride_rows + l % b);
}

// The outputs of a row and what they need.
struct Out {
    int32_t *ids; // nullptr: no ids
    long long ids_stride;
    const int32_t *req_id;
    int32_t num_reqs;
    RowsMap map; // req set per row
    int32_t *rows_out; // nullptr: no owned rows
    long long rows_stride;
    int32_t *counts_out;
};

// Selects row t (its keys and first histogram in place) and writes its
// outputs. The caller puts a barrier before Shared is reused. In a cluster
// each CTA writes its own selected candidates at the row offset of the
// ones before it; the last CTA writes the padding and the owned count.
__device__ __forceinline__ void select_emit(Shared &sh, ClusterShared *cl, const Row &row,
                                            long long t, const Out &o)
{
    const uint32_t tid = threadIdx.x;
    uint32_t above_mask = 0, inbin_mask = 0;
    bool masked = false;
    Decision d = {};
    radix_select(sh, cl, row, d, above_mask, inbin_mask, masked);
    // The peers' histograms are read: the arriving half of the barrier that
    // keeps this CTA's shared memory alive for theirs (waited at exit).
    if (kGroup) {
        dc::cluster_arrive();
        __syncthreads();
    }

    const bool want_ids = kEmitIds && o.ids != nullptr;
    const bool want_rows = kB > 0 && o.rows_out != nullptr;
    RowsMap m = o.map;
    m.req = -1;
    if (want_rows) {
        const int32_t r = o.req_id[t];
        m.req = (r >= 0 && r < o.num_reqs) ? r : -1;
    }

    const uint32_t p0 = tid * kChunk;

    // Emit, in three steps: (A) each thread counts the selected candidates
    // of its contiguous positions, one block scan gives its offset; (B) it
    // writes their positions, in order, to a list in shared memory (the
    // histogram's space, free now); (C) the block walks the list: one gid
    // load per selected candidate, all of a thread's in flight together,
    // and coalesced id / owned-row stores. The common decisions (every valid
    // candidate, or a primary-key threshold) are one compare per key; the
    // tie modes go through decide().
    uint16_t *list = reinterpret_cast<uint16_t *>(sh.hist);
    static_assert(kBins * 4 >= kK * 2, "the position list fits the histogram");
    static_assert(kCands <= 65536, "positions fit 16 bits");
    const bool simple = d.mode == kModeAllValid || d.mode == kModePrimary;
    // Primary mode: (k & mask) >= pre with pre's low bits zero is k >= pre;
    // a valid key is never 0.
    const uint32_t lo = d.mode == kModeAllValid ? 1u : (d.pre > 1u ? d.pre : 1u);

    // Duplicates: the candidates that carry the boundary full key are ranked
    // in position order; the first d.need of them are taken. eq_base = how
    // many of them precede this thread's positions.
    uint32_t eq_base = 0;
    if (d.mode == kModeDuplicates) {
        uint32_t n = 0;
        for_my_keys<1>(row, [&](uint32_t k, uint32_t j) {
            int32_t g;
            bool have = false, e;
            decide(d, row, k, p0 + j, g, have, e);
            n += e ? 1u : 0u;
        });
        uint32_t total;
        eq_base = block_scan(sh, n, &total) - n + (kGroup ? sh.dup_before : 0u);
    }

    // Selection flag of the key k at position p (eq: duplicates seen so far).
    auto pick = [&](uint32_t k, uint32_t p, uint32_t &eq) -> bool {
        if (simple)
            return k >= lo;
        int32_t g = -1;
        bool have = false, e;
        bool f = decide(d, row, k, p, g, have, e);
        if (e) {
            f = eq < d.need;
            eq++;
        }
        return f;
    };

    // (A) count. Rows of at most 32 positions a thread keep the flags as a
    // bit mask, which (B) walks without reading the keys again. A primary
    // threshold found after pass 1 needs only the keys of the pass-0 bin:
    // the ones above it are all taken.
    uint32_t nsel = 0, selmask = 0;
    if (kMask && masked && d.mode == kModePrimary) {
        selmask = above_mask;
        for (uint32_t bits = inbin_mask; bits != 0u; bits &= bits - 1u) {
            const uint32_t j = (uint32_t)(__ffs(bits) - 1);
            if (row.keys[key_index(p0 + j)] >= lo)
                selmask |= 1u << j;
        }
    } else {
        uint32_t eq = eq_base;
        for_my_keys<(kMask ? 8 : 4)>(row, [&](uint32_t k, uint32_t j) {
            const bool f = pick(k, p0 + j, eq);
            if (kMask)
                selmask |= (f ? 1u : 0u) << j;
            else
                nsel += f ? 1u : 0u;
        });
    }
    if (kMask)
        nsel = __popc(selmask);
    uint32_t nsel_all;
    // Open: (B)'s barrier comes before warp_sums is written again.
    const uint32_t before = block_scan<true>(sh, nsel, &nsel_all) - nsel;

    // (B) positions, in order.
    if (kMask) {
        uint32_t at = before;
        for (uint32_t bits = selmask; bits != 0u; bits &= bits - 1u)
            list[at++] = (uint16_t)(p0 + (uint32_t)(__ffs(bits) - 1));
    } else {
        uint32_t at = before, eq = eq_base;
        for_my_keys<4>(row, [&](uint32_t k, uint32_t j) {
            if (pick(k, p0 + j, eq))
                list[at++] = (uint16_t)(p0 + j);
        });
    }
    __syncthreads();

    // (C) ids and owned rows. Item r = it * kThreads + tid, at row offset
    // sel_before + r (a cluster's CTAs write their parts of the row).
    constexpr int kItems = ((kK < kCands ? kK : kCands) + kThreads - 1) / kThreads;
    const uint32_t lane = tid & 31u, warp = tid >> 5;
    const uint32_t sel_before = kGroup ? sh.sel_before : 0u;
    const bool last = !kGroup || dc::cluster_ctarank() == (uint32_t)(kClu - 1);
    int32_t g[kItems];
#pragma unroll
    for (int it = 0; it < kItems; it++) {
        const uint32_t r = (uint32_t)it * kThreads + tid;
        g[it] = r < nsel_all ? gid_at(row, list[r]) : -1;
    }
    if (want_ids) {
        int32_t *ids = o.ids + t * o.ids_stride;
        if (!kGroup) {
#pragma unroll
            for (int it = 0; it < kItems; it++) {
                const uint32_t r = (uint32_t)it * kThreads + tid;
                if (r < (uint32_t)kK)
                    ids[r] = r < nsel_all ? g[it] : -1;
            }
        } else {
#pragma unroll
            for (int it = 0; it < kItems; it++) {
                const uint32_t r = (uint32_t)it * kThreads + tid;
                if (r < nsel_all)
                    ids[sel_before + r] = g[it];
            }
            if (last)
                for (uint32_t c = sh.sel_all + tid; c < (uint32_t)kK; c += kThreads)
                    ids[c] = -1;
        }
    }
    uint32_t nown_all = 0;
    if (want_rows && kGroup) {
        // The owned ones of the CTAs before this one: each CTA counts its
        // own and sends the count to every later CTA of the row.
        uint32_t n = 0;
#pragma unroll
        for (int it = 0; it < kItems; it++) {
            const uint32_t r = (uint32_t)it * kThreads + tid;
            uint32_t l = 0;
            n += r < nsel_all && owned(m, g[it], l) ? 1u : 0u;
        }
        uint32_t mine;
        block_scan(sh, n, &mine);
        const uint32_t me = dc::cluster_ctarank();
        if (tid > me && tid < (uint32_t)kClu)
            dc::cluster_push1(&cl->own_in[me], &cl->own_bar, tid, mine);
        if (me > 0) {
            dc::mbar_wait<true>(&cl->own_bar, 0u);
#pragma unroll
            for (int r = 0; r < kClu - 1; r++)
                nown_all += (uint32_t)r < me ? cl->own_in[r] : 0u;
        }
    }
    if (want_rows) {
        // Owned ones compacted in item order: a ballot per warp, the warps'
        // counts through shared memory (warp_sums), one round per item
        // (unrolled: g stays in registers; kItems <= 16).
        static_assert(kItems <= 16, "K / threads <= 16 (DC_PAIR_SELECT_THREADS)");
        int32_t *prow = o.rows_out + t * o.rows_stride;
#pragma unroll
        for (int it = 0; it < kItems; it++) {
            if ((uint32_t)it * kThreads >= nsel_all)
                break;
            const uint32_t r = (uint32_t)it * kThreads + tid;
            uint32_t l = 0;
            const bool own = r < nsel_all && owned(m, g[it], l);
            const int32_t entry = own ? table_entry(m, l) : 0;
            const uint32_t bal = __ballot_sync(0xFFFFFFFFu, own);
            if (lane == 0)
                sh.warp_sums[warp] = __popc(bal);
            __syncthreads();
            uint32_t all;
            const uint32_t base = nown_all + warps_before(sh, warp, &all);
            __syncthreads();
            if (own)
                prow[base + __popc(bal & ((1u << lane) - 1u))] =
                    physical_row(m, entry, local_of(g[it]));
            nown_all += all;
        }
    }
    // Padding: -1 after the owned rows; the owned count.
    if (want_rows && last) {
        int32_t *out = o.rows_out + t * o.rows_stride;
        for (uint32_t c = nown_all + tid; c < (uint32_t)kK; c += kThreads)
            out[c] = -1;
        if (tid == 0)
            o.counts_out[t] = (int32_t)nown_all;
    }
}

} // namespace ps

// Parameters: DC_PAIR_SELECT_PARAMS (pair_abi.h).
extern "C" __global__ void __launch_bounds__(ps::kThreads, ps::kMinBlocks)
dcptopk_pair_select(DC_KERNEL_PARAMS(DC_PAIR_SELECT_PARAMS))
{
    using namespace ps;
    // A dependent launch (pair.c): every CTA waits for the previous kernel
    // on the stream before it touches memory or exits, so that a kernel
    // launched after this one may rely on that kernel being done too.
    dc::pdl_wait();
    // All shared memory is dynamic (the launcher asks for kSharedBytes plus
    // the keys), so that the runtime opts in past 48 KiB from one number.
#ifdef DC_EMU
    uint32_t *const dyn_smem = (uint32_t *)dc_emu_dynamic_smem(); // tests/emu's launch
#else
    extern __shared__ __align__(16) uint32_t dyn_smem[];
#endif
    Shared &sh = *reinterpret_cast<Shared *>(dyn_smem);
    uint32_t *dyn_keys = dyn_smem + kSharedBytes / 4;
    const uint32_t tid = threadIdx.x;

    Out o;
    o.ids = ids_out;
    o.ids_stride = ids_stride;
    o.req_id = req_id;
    o.num_reqs = num_reqs;
    o.map.block_table = block_table;
    o.map.bt_stride = bt_stride;
    o.map.bt_cols = bt_cols;
    o.map.stride_rows = stride_rows;
    o.map.req = -1;
    o.map.rank = rank;
    o.rows_out = rows_out;
    o.rows_stride = rows_stride;
    o.counts_out = counts_out;

    Row row;
    row.rank_stride = rank_stride;
    row.keys = kSmemKeys ? dyn_keys : nullptr;
    row.gids = reinterpret_cast<const int32_t *>(dyn_keys + kCands);
    const long long row_words = !kRowMajor ? (long long)kK * 2 : (long long)kRowCands * 2;
    // 16-byte vectors need a 16-byte aligned buffer (the rank and row strides
    // are multiples of 16 bytes since K is a multiple of 32).
    const bool v16 = ((unsigned long long)candidates & 15ull) == 0ull;

    // A row's CTAs are consecutive blocks: one cluster.
    const long long t = blockIdx.x / kClu;
    if (t >= rows)
        return;
    row.base = candidates + t * row_words;
    ClusterShared *cl = nullptr;
    uint32_t *hist0 = sh.hist;
    if (kGroup) {
        cl = reinterpret_cast<ClusterShared *>(dyn_smem + DC_PAIR_SELECT_STATE_BYTES / 4);
        const uint32_t me = dc::cluster_ctarank();
        row.pos0 = me * (uint32_t)kCands;
        hist0 = cl->local[0];
        if (tid == 0) {
            // One arrival and the counts of the CTAs before this one; the
            // first histogram's cluster barrier publishes it to them.
            dc::mbar_init(&cl->own_bar);
            dc::mbar_expect_tx(&cl->own_bar, 4u * me);
            dc::mbar_init_fence();
        }
    }
    for (int c = tid; c < kBins; c += kThreads) {
        hist0[c] = 0u;
        if (!kGroup)
            hist_b(sh)[c] = 0u;
    }
    __syncthreads();
    if (v16)
        load_phase<true>(hist0, row, dyn_keys);
    else
        load_phase<false>(hist0, row, dyn_keys);
    __syncthreads();
    select_emit(sh, cl, row, t, o);
    if (kGroup)
        dc::cluster_wait();
}

// The owned rows' CSR offsets after the counts (kernel_abi.h).
extern "C" __global__ void __launch_bounds__(DC_INDPTR_THREADS)
dcptopk_indptr(DC_KERNEL_PARAMS(DC_INDPTR_PARAMS))
{
    dc::pdl_wait(); // a dependent launch of the select
    dc::indptr_scan(counts, rows, indptr);
}
