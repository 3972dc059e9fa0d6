// node_pairs.cu - the hand-over of the hierarchical merge: a node's exact
// top K (the ids of the exact packed merge among the node's L ranks) as the
// pair merge's candidates of the second stage, (fp32 score bits, global id)
// in the node's output order (docs/DISTRIBUTED.md, "Across nodes").
//
// The node merge runs with world_size = L, so its ids are node gids:
// owner lr = (g / S) % L, local id l = (g / (L*S)) * S + g % S. The global id
// is gid(l, first_rank + lr) with the global W. For a fixed node both gids
// order the candidates of equal score alike, so the node's selection is the
// one the flat merge makes among the node's columns.
//
// The score is not in the ids: it is the ord16 of the candidate's word, found
// in the list the id came from. A rank saturated in the row (bit lr of the
// saturation word's mask) contributed its pushed list, in this rank's receive
// slot popcount(mask & ((1 << lr) - 1)); the others their round-1 segment of
// the gathered buffer. Pushed lists and the fused top-N's rows are in
// ascending local id order (`sorted`): each lane binary-searches its own id.
// Rows packed from a caller's ids (`sorted` = 0) are in the caller's order:
// the warp scans the segment for each of its 32 ids in turn.
//
// An empty output slot (id -1) becomes the pair merge's invalid candidate
// (score -inf, gid -1). Reads the receive slots in the same window as the
// rescue (before this rank's next exchange), so no peer can overwrite them.
#include "packed_abi.h"
#define DCPTOPK_THREADS DC_NODE_PAIRS_THREADS
#include "common.cuh"

namespace np {

constexpr int kK = DCPTOPK_TOPK;
constexpr int kN = DCPTOPK_LOCAL_TOPK;
constexpr int kL = DCPTOPK_WORLD_SIZE;
constexpr int kS = DCPTOPK_INTERLEAVE;
constexpr int kWords = DC_PACKED_ROW_WORDS(kN);
constexpr int kPushWords = DC_PACKED_ROW_WORDS(kK);
constexpr int kSlots = DC_RESCUE_SLOTS(kK, kN);

static_assert(kK % 32 == 0 && kN % 32 == 0, "whole warps of slots");
static_assert(DCPTOPK_THREADS % 32 == 0, "whole warps");

// Local id of slot j of a list of n candidate words (then n/32 plane words);
// an empty slot (word 0) sorts after every id.
__device__ __forceinline__ uint32_t slot_id(const int32_t *list, int n, int j, uint32_t &word)
{
    word = (uint32_t)__ldg(list + j);
    if (word == 0u)
        return 0xFFFFFFFFu;
    const uint32_t plane = (uint32_t)__ldg(list + n + (j >> 5));
    return (0xFFFFu - (word & 0xFFFFu)) | (((plane >> (j & 31)) & 1u) << 16);
}

// The word of local id l in a sorted list of n slots; 0 if absent (which the
// node merge's contract rules out).
__device__ __forceinline__ uint32_t find_sorted(const int32_t *list, int n, uint32_t l)
{
    int lo = 0, hi = n; // first slot with id >= l
    uint32_t w;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (slot_id(list, n, mid, w) < l)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && slot_id(list, n, lo, w) == l)
        return w;
    return 0u;
}

} // namespace np

// Parameters: DC_NODE_PAIRS_PARAMS (packed_abi.h). Grid: (T, K / THREADS
// rounded up).
extern "C" __global__ void __launch_bounds__(DCPTOPK_THREADS)
dcptopk_node_pairs(DC_KERNEL_PARAMS(DC_NODE_PAIRS_PARAMS))
{
    using namespace np;
    dc::pdl_wait(); // a dependent launch (packed.c)
    const long long t = (long long)blockIdx.x;
    const int i = blockIdx.y * DCPTOPK_THREADS + threadIdx.x;
    if (t >= rows || blockIdx.y * DCPTOPK_THREADS >= kK)
        return;
    const bool live = i < kK;   // K % 32 == 0: a warp is live or not as one
    const int32_t g = live ? ids[t * ids_stride + i] : -1;
    const uint32_t sw = sat ? sat[t] : 0u;
    const uint32_t mask = sw >> 16;
    uint32_t lr = 0, l = 0;
    if (g >= 0) {
        const uint32_t u = (uint32_t)g;
        lr = (u / kS) % kL;
        l = (u / (kL * kS)) * kS + u % kS;
    }
    const bool pushed = g >= 0 && ((mask >> lr) & 1u);
    const int32_t *list;
    int n;
    if (pushed) {
        list = recv + (t * kSlots + __popc(mask & ((1u << lr) - 1u))) * (long long)kPushWords;
        n = kK;
    } else {
        list = gathered + ((long long)lr * rank_stride_rows + t) * kWords;
        n = kN;
    }
    uint32_t word = 0u;
    if (sorted || pushed) {
        if (g >= 0)
            word = find_sorted(list, n, l);
    }
    if (!sorted) {
        // Round-1 ids of caller-ordered segments: the warp scans each one.
        const uint32_t lane = dc::lane_id();
        uint32_t todo = __ballot_sync(0xFFFFFFFFu, g >= 0 && !pushed);
        while (todo) {
            const int src = __ffs(todo) - 1;
            todo &= todo - 1u;
            const uint32_t want = __shfl_sync(0xFFFFFFFFu, l, src);
            const int32_t *seg = (const int32_t *)__shfl_sync(
                0xFFFFFFFFu, (unsigned long long)list, src);
            uint32_t found = 0u;
            for (int j0 = 0; j0 < kN && !found; j0 += 32) {
                uint32_t w;
                const uint32_t id = slot_id(seg, kN, j0 + (int)lane, w);
                const uint32_t hit = __ballot_sync(0xFFFFFFFFu, id == want);
                if (hit)
                    found = __shfl_sync(0xFFFFFFFFu, w, __ffs(hit) - 1);
            }
            if ((int)lane == src)
                word = found;
        }
    }
    if (!live)
        return;
    int32_t score = (int32_t)0xFF800000u, gid = -1; // invalid: -inf, -1
    if (g >= 0 && word != 0u) {
        score = (int32_t)(dc::ord16_to_bits(word >> 16) << 16);
        gid = dc::global_id((int32_t)l, first_rank + (int32_t)lr, world, kS);
    }
    int2 *out = reinterpret_cast<int2 *>(pairs) + t * kK + i;
    *out = make_int2(score, gid);
}
