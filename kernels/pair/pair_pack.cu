// pair_pack.cu - the pair merge's pack: local top-K ids + fp32 logits ->
// [T, K, 2] candidates (fp32 score bits, int32 global id) of this rank.
//
// Slot j of row t from l = local_ids[t, j] (docs/CONTRACT.md, "Pair merge"):
// score = logits[t, l + row_start[t]] (row_start 0 without row starts),
// gid = (l / S) * W * S + rank * S + l % S. The slot is invalid, written as
// (0xFF800000 = -inf, -1), when l < 0, l >= row_ends[t] (when given), the
// column l + row_start is outside [0, logits_stride), the gid does not fit in
// int32, or the score is NaN (a NaN is never selected, so it is never sent).
//
// One thread per slot over the flattened [T, K] slots; 8-byte stores.
#include "pair_abi.h"
#define DCPTOPK_THREADS DC_PAIR_PACK_THREADS
#include "common.cuh"

namespace pp {
constexpr int kK = DCPTOPK_TOPK;
constexpr int kW = DCPTOPK_WORLD_SIZE;
constexpr int kS = DCPTOPK_INTERLEAVE;
constexpr int kThreads = DCPTOPK_THREADS;
static_assert(kK % 32 == 0 && kK >= 32 && kK <= 4096, "K: multiple of 32 up to 4096");
static_assert(kW >= 1 && kW <= 16 && kS >= 1, "W in 1..16, S >= 1");
constexpr uint32_t kEmptyScore = 0xFF800000u; // -inf
} // namespace pp

// Parameters: DC_PAIR_PACK_PARAMS (pair_abi.h).
extern "C" __global__ void __launch_bounds__(pp::kThreads)
dcptopk_pair_pack(DC_KERNEL_PARAMS(DC_PAIR_PACK_PARAMS))
{
    using namespace pp;
    dc::pdl_wait(); // a dependent launch (pair.c)
    const long long slot = (long long)blockIdx.x * kThreads + threadIdx.x;
    const long long t = slot / kK;
    const int j = (int)(slot % kK);
    if (t >= rows)
        return;
    const long long l = local_ids[t * ids_stride + j];
    uint32_t score = kEmptyScore;
    int32_t gid = -1;
    if (l >= 0 && (row_ends == nullptr || l < (long long)row_ends[t])) {
        const long long col = l + (row_starts ? (long long)row_starts[t] : 0ll);
        const long long g = (l / kS) * kW * kS + (long long)rank * kS + l % kS;
        if (col >= 0 && col < logits_stride && g <= 0x7FFFFFFFll) {
            const uint32_t bits = logits[t * logits_stride + col];
            if (dc::ord32(bits) != 0u) {
                score = bits;
                gid = (int32_t)g;
            }
        }
    }
    reinterpret_cast<int2 *>(out)[slot] = make_int2((int32_t)score, gid);
}
