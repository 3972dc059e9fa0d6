// pack_indices.cu - packs caller-given local ids into packed rows.
//
// For engines that already have a local top-N: local_ids [T, ids_stride]
// int32 and bf16 logits [>= T, logits_stride] -> packed rows [T, N + N/32]:
// N candidate words (ord16 << 16 | 0xFFFF - (l & 0xFFFF)), then N/32 bit-plane
// words (bit j % 32 of word j / 32 = bit 16 of candidate j's local id).
// A slot is empty (word 0, plane bit 0) when its id is negative, at or past
// the row end, at or past 2^17 or max_local_len, or its logit is NaN.
//
// One warp per 32 slots: the warp's plane word is a ballot, written by lane 0.
#include "packed_abi.h"
#define DCPTOPK_THREADS DC_PACK_INDICES_THREADS
#include "common.cuh"

#define N DCPTOPK_LOCAL_TOPK
static_assert(N % 32 == 0, "local_topk is a multiple of 32");

// Parameters: DC_PACK_INDICES_PARAMS (packed_abi.h).
extern "C" __global__ void __launch_bounds__(DCPTOPK_THREADS)
dcptopk_pack_indices(DC_KERNEL_PARAMS(DC_PACK_INDICES_PARAMS))
{
    dc::pdl_wait(); // a dependent launch (packed.c)
    const long long words = DC_PACKED_ROW_WORDS(N);
    const long long slot = (long long)blockIdx.x * DCPTOPK_THREADS + threadIdx.x;
    const long long t = (long long)blockIdx.y;
    if (t >= rows)
        return;
    // Slots per row are a multiple of 32, so a warp never straddles rows and
    // every lane of a warp takes part in the ballot below.
    if (slot >= N)
        return;
    long long end = row_ends[t];
    if (end > max_local_len)
        end = max_local_len;
    if (end > (1ll << DC_LOCAL_INDEX_BITS))
        end = 1ll << DC_LOCAL_INDEX_BITS;
    const int32_t l = local_ids[t * ids_stride + slot];
    uint32_t word = 0u;
    bool hi = false;
    if (l >= 0 && (long long)l < end) {
        const uint32_t key = dc::ord16(logits[t * logits_stride + l]);
        if (key != 0u) {
            word = dc::pack_word(key, (uint32_t)l);
            hi = ((uint32_t)l >> 16) & 1u;
        }
    }
    int32_t *row = out + t * words;
    row[slot] = (int32_t)word;
    const uint32_t plane = __ballot_sync(0xFFFFFFFFu, hi);
    if (dc::lane_id() == 0)
        row[N + slot / 32] = (int32_t)plane;
}
