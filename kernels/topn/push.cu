// push.cu - round 2 of the exact packed merge, on a saturated rank: for every
// row t whose saturation word has this rank's bit, the rank's local top-K of
// the row (the local top-N + pack rule with N := K, topn_select.cuh) goes to
// receive slot s = popcount(mask & ((1 << rank) - 1)) of row t on every rank:
//     peer_recv[p] + (t * SLOTS + s) * (K + K/32)   int32 words,
// then, after a system-scope fence, flag peer_flags[p][rank * max_rows + t] is
// released with seq[t] + 1 on every rank p. Rows without the bit cost one
// load. It never waits.
//
// Grid: T * C CTAs, C = 2^DCPTOPK_VARIANT (a cluster when C > 1), dynamic
// shared memory as in topn_pack.cu.
#define DC_TOPN_CLUSTER (1 << DCPTOPK_VARIANT)
#include "topn_select.cuh"

#define K DCPTOPK_TOPK
#define N DCPTOPK_LOCAL_TOPK
#define W DCPTOPK_WORLD_SIZE
#define SLOTS ((K - 1) / N)
#define WORDS (K + K / 32)
static_assert(K % 32 == 0 && K >= 32 && K <= 4096, "topk: multiple of 32, 32..4096");
static_assert(N % 32 == 0 && N < K, "local_topk: multiple of 32, < topk");
static_assert(W >= 1 && W <= 16, "world_size 1..16");
static_assert(DCPTOPK_VARIANT >= 0 && DCPTOPK_VARIANT <= 3, "variant: log2 of the cluster size");

namespace {
// Every slot is written to all W receive buffers (peer memory or this GPU).
struct PushOut {
    const uint64_t *recv; // [W] receive-slot bases
    long long off;        // words from a base to this row's slot
    __device__ __forceinline__ void store(long long i, uint32_t v) const
    {
#pragma unroll
        for (int p = 0; p < W; p++)
            ((int32_t *)recv[p])[off + i] = (int32_t)v;
    }
    __device__ __forceinline__ void put(uint32_t pos, uint32_t word) const { store(pos, word); }
    __device__ __forceinline__ void zero(uint32_t pos) const { store(pos, 0u); }
    __device__ __forceinline__ void plane(uint32_t w, uint32_t bits) const
    {
        store((long long)K + w, bits);
    }
};
} // namespace

extern "C" __global__ void __launch_bounds__(DCPTOPK_THREADS)
dcptopk_push(const uint16_t *__restrict__ logits, long long logits_stride,
             long long max_local_len, const int32_t *__restrict__ row_ends, long long rows,
             int rank, const uint32_t *__restrict__ sat, const uint32_t *__restrict__ seq,
             const uint64_t *__restrict__ peer_recv, const uint64_t *__restrict__ peer_flags,
             long long max_rows, int chunk)
{
    extern __shared__ dc::u32x4 dc_topn_smem[];
    dc::TopnShared &sh = *(dc::TopnShared *)dc_topn_smem;
    uint16_t *keys = (uint16_t *)((char *)dc_topn_smem + DC_TOPN_SHARED_BYTES);
    const long long t = (long long)(blockIdx.x / DC_TOPN_CLUSTER);
    // Uniform over the cluster: all its CTAs share t and the saturation word.
    if (t >= rows)
        return;
    const uint32_t mask = sat[t] >> 16;
    if (!((mask >> rank) & 1u))
        return;
    const uint32_t slot = (uint32_t)__popc(mask & ((1u << rank) - 1u));
    PushOut o;
    o.recv = peer_recv;
    o.off = (t * SLOTS + (long long)slot) * WORDS;
    dc::topn_row<K>(logits + t * logits_stride, dc::topn_row_bound(row_ends[t], max_local_len),
                    chunk, keys, sh, o);
    // Every writer fences its peer stores at system scope, the group barrier
    // orders them before the release below (cumulativity of the fence +
    // barrier + release chain, PTX ISA "Memory Consistency Model").
    __threadfence_system();
    dc::group_sync();
    if (dc::cluster_rank() == 0 && threadIdx.x == 0) {
        const uint32_t v = seq[t] + 1u;
#pragma unroll
        for (int p = 0; p < W; p++) {
            uint32_t *f = (uint32_t *)peer_flags[p] + (long long)rank * max_rows + t;
            asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(f), "r"(v) : "memory");
        }
    }
}
