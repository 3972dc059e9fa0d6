// topn_pack.cu - the fused local top-N + pack: bf16 logits [T, S] -> packed
// rows [T, N + N/32] (docs/CONTRACT.md, "Local top-N + pack").
//
// Grid: T * C CTAs, C = 2^DCPTOPK_VARIANT CTAs per row (C > 1: a thread-block
// cluster of C, set at launch; its CTAs split the row and merge histograms
// through distributed shared memory). Dynamic shared memory: the selection's
// state (DC_TOPN_SHARED_BYTES), then `chunk` 16-bit keys, chunk = columns per
// CTA (a multiple of 8, <= 65536). The selection itself is in
// topn_select.cuh, shared with the push (push.cu).
#include "topn_abi.h"
#define DCPTOPK_THREADS DC_TOPN_PACK_THREADS
#define DC_TOPN_CLUSTER (1 << DCPTOPK_VARIANT)
#include "topn_select.cuh"

#define N DCPTOPK_LOCAL_TOPK
static_assert(N % 32 == 0 && N >= 32 && N <= 4096, "local_topk: multiple of 32, 32..4096");
static_assert(DCPTOPK_VARIANT >= 0 && DCPTOPK_VARIANT <= DC_TOPN_MAX_VARIANT,
              "variant: log2 of the cluster size");

namespace {
struct PackOut {
    int32_t *row; // [DC_PACKED_ROW_WORDS(N)]
    __device__ __forceinline__ void put(uint32_t pos, uint32_t word) const
    {
        row[pos] = (int32_t)word;
    }
    __device__ __forceinline__ void zero(uint32_t pos) const { row[pos] = 0; }
    __device__ __forceinline__ void plane(uint32_t w, uint32_t bits) const
    {
        row[N + w] = (int32_t)bits;
    }
};
} // namespace

// One CTA per row (prefill): its footprint (the state, 2 bytes a column and a
// list entry per 8 columns: 46 KiB at 16384 columns) lets four CTAs share an
// SM, which the register bound (32 a thread at 512 threads) must allow too.
// A cluster's CTAs hold longer chunks: one or two an SM, no register bound.
#define DC_TOPN_MIN_CTAS (DC_TOPN_CLUSTER == 1 ? 2048 / DCPTOPK_THREADS : 1)

// Parameters: DC_TOPN_PACK_PARAMS (topn_abi.h).
extern "C" __global__ void __launch_bounds__(DCPTOPK_THREADS, DC_TOPN_MIN_CTAS)
dcptopk_topn_pack(DC_KERNEL_PARAMS(DC_TOPN_PACK_PARAMS))
{
    // A dependent launch (topn.c): the previous kernel on the stream must be
    // done before any memory is touched. No early trigger for the next one:
    // triggering at the start was slower in the A/B (its CTAs then wait on
    // SMs that ours are about to leave).
    dc::pdl_wait();
    extern __shared__ dc::u32x4 dc_topn_smem[];
    dc::TopnShared &sh = *(dc::TopnShared *)dc_topn_smem;
    uint16_t *keys = (uint16_t *)((char *)dc_topn_smem + DC_TOPN_SHARED_BYTES);
    const long long t = (long long)(blockIdx.x / DC_TOPN_CLUSTER);
    // Uniform over the cluster: all its CTAs share t.
    if (t >= rows)
        return;
    const int32_t E = dc::topn_row_bound(row_ends[t], max_local_len);
    PackOut o;
    o.row = out + t * (long long)DC_PACKED_ROW_WORDS(N);
    dc::topn_row<N>(logits + t * logits_stride, E, chunk, keys, sh, o);
}
