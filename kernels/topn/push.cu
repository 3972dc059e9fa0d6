// push.cu - round 2 of the exact packed merge, on a saturated rank: for every
// row t whose saturation word has this rank's bit, the rank's local top-K of
// the row (the local top-N + pack rule with N := K, topn_select.cuh) goes to
// receive slot s = popcount(mask & ((1 << rank) - 1)) of row t on every rank:
//     peer_recv[p] + (t * SLOTS + s) * (K + K/32)   int32 words,
// then, after a system-scope fence, flag peer_flags[p][rank * max_rows + t] is
// released with seq[t] + 1 on every rank p. Rows without the bit cost one
// load, made together with the group's next rows' loads. It never waits.
//
// Grid: G * C CTAs, G <= T groups of C = 2^DCPTOPK_VARIANT CTAs (a cluster
// when C > 1) looping over the rows; dynamic shared memory as in
// topn_pack.cu.
#include "topn_abi.h"
#define DCPTOPK_THREADS DC_PUSH_THREADS
#define DC_TOPN_CLUSTER (1 << DCPTOPK_VARIANT)
#include "topn_select.cuh"

#define K DCPTOPK_TOPK
#define N DCPTOPK_LOCAL_TOPK
#define W DCPTOPK_WORLD_SIZE
#define SLOTS DC_RESCUE_SLOTS(K, N)
#define WORDS DC_PACKED_ROW_WORDS(K)
static_assert(K % 32 == 0 && K >= 32 && K <= 4096, "topk: multiple of 32, 32..4096");
static_assert(N % 32 == 0 && N < K, "local_topk: multiple of 32, < topk");
static_assert(W >= 1 && W <= 16, "world_size 1..16");
static_assert(DCPTOPK_VARIANT >= 0 && DCPTOPK_VARIANT <= DC_TOPN_MAX_VARIANT,
              "variant: log2 of the cluster size");

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

// Parameters: DC_PUSH_PARAMS (topn_abi.h).
extern "C" __global__ void __launch_bounds__(DCPTOPK_THREADS)
dcptopk_push(DC_KERNEL_PARAMS(DC_PUSH_PARAMS))
{
    extern __shared__ dc::u32x4 dc_topn_smem[];
    __shared__ uint32_t s_rows[DCPTOPK_THREADS];
    __shared__ int s_warps[DCPTOPK_THREADS / 32];
    static_assert(sizeof s_rows + sizeof s_warps == DC_PUSH_STATIC_BYTES,
                  "the plan counts the push's static shared memory");
    dc::TopnShared &sh = *(dc::TopnShared *)dc_topn_smem;
    uint16_t *keys = (uint16_t *)((char *)dc_topn_smem + DC_TOPN_SHARED_BYTES);
    // Launched as a dependent of the select (topn.c): the rescue may start
    // its CTAs now; the select's saturation words are read only after it.
    dc::pdl_trigger();
    dc::pdl_wait();
    // Row t belongs to group t % groups (a group: the CTAs of a cluster).
    // Its rows' saturation words are read DCPTOPK_THREADS at a time and the
    // rows with this rank's bit listed, in the same order in every CTA of
    // the group (the flags are the same): most rows have no bit, and a grid
    // of one group per row spent most of the launch starting CTAs that exit.
    const long long groups = (long long)(gridDim.x / DC_TOPN_CLUSTER);
    const long long group = (long long)(blockIdx.x / DC_TOPN_CLUSTER);
    for (long long base = group; base < rows; base += groups * DCPTOPK_THREADS) {
        // With a row a group (decode) no list: every thread reads the word.
        const bool single = rows <= groups;
        const long long mine = single ? base : base + (long long)threadIdx.x * groups;
        const bool hit = mine < rows && ((sat[mine] >> (16 + rank)) & 1u);
        const int listed =
            single ? (int)hit
                   : dc::compact_ordered<DCPTOPK_THREADS>(hit, (uint32_t)mine, s_rows, s_warps);
        for (int li = 0; li < listed; li++) {
            const long long t = single ? mine : (long long)s_rows[li];
            const uint32_t mask = sat[t] >> 16;
            const uint32_t slot = (uint32_t)__popc(mask & ((1u << rank) - 1u));
            PushOut o;
            o.recv = peer_recv;
            o.off = (t * SLOTS + (long long)slot) * WORDS;
            dc::topn_row<K>(logits + t * logits_stride,
                            dc::topn_row_bound(row_ends[t], max_local_len), chunk, keys, sh, o);
            // Every writer fences its peer stores at system scope, the group
            // barrier orders them before the release below (cumulativity of
            // the fence + barrier + release chain, PTX ISA "Memory
            // Consistency Model"). It also ends this row's use of the shared
            // memory before the next row's.
            __threadfence_system();
            dc::group_sync();
            if (dc::cluster_rank() == 0 && threadIdx.x == 0) {
                const uint32_t v = seq[t] + 1u;
#pragma unroll
                for (int p = 0; p < W; p++) {
                    uint32_t *f = (uint32_t *)peer_flags[p] + (long long)rank * max_rows + t;
                    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(f), "r"(v)
                                 : "memory");
                }
            }
        }
    }
}
