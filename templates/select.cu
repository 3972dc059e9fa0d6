// select.cu - round 1 of the packed merge: gathered rows [W, T_alloc, N + N/32]
// (read in place) -> the global top K of each row as ids [T, K] (-1 padded)
// and/or this rank's owned physical rows + counts, in ascending position
// order (docs/CONTRACT.md, "Select"). In exact mode it also writes the row's
// saturation word (mask << 16) | tau16. It never waits: the push of a
// saturated rank is a separate launch (push.cu) right after it.
//
// One CTA per row; the W * N keys of the row sit in registers (select_core.cuh).
#include "select_core.cuh"

using namespace dcsel;

constexpr bool EXACT = DCPTOPK_EXACT != 0;
constexpr int NKEYS = WORLD * LTOPK;
constexpr int KPT = (NKEYS + THREADS - 1) / THREADS;

// Key of flat position p = r * N + j of the row (0 past the end or empty).
__device__ __forceinline__ uint64_t load_key(const int32_t *__restrict__ g0, long long rank_words,
                                             int flat)
{
    if (flat >= NKEYS)
        return 0ull;
    const int r = flat / LTOPK;
    const int j = flat - r * LTOPK;
    const int32_t *seg = g0 + (long long)r * rank_words;
    return decode((uint32_t)seg[j], (uint32_t)seg[LTOPK + (j >> 5)], j, r);
}

template <bool REG>
struct SelectKeys;

template <>
struct SelectKeys<true> {
    uint64_t k[KPT];
    __device__ __forceinline__ SelectKeys(const int32_t *g0, long long rank_words)
    {
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            k[i] = load_key(g0, rank_words, i * THREADS + (int)threadIdx.x);
    }
    __device__ __forceinline__ uint64_t get(int i) const { return k[i]; }
};

template <>
struct SelectKeys<false> {
    const int32_t *g0;
    long long rank_words;
    __device__ __forceinline__ SelectKeys(const int32_t *g, long long rw) : g0(g), rank_words(rw) {}
    __device__ __forceinline__ uint64_t get(int i) const
    {
        return load_key(g0, rank_words, i * THREADS + (int)threadIdx.x);
    }
};

extern "C" __global__ void __launch_bounds__(THREADS)
dcptopk_select(const int32_t *__restrict__ gathered, long long rank_stride_rows, long long rows,
               Out o, uint32_t *__restrict__ sat)
{
    __shared__ Smem sm;
    const long long t = blockIdx.x;
    if (t >= rows)
        return;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const SelectKeys<(KPT <= REG_MAX)> keys(gathered + t * WORDS, rank_stride_rows * WORDS);
    const Sel s = radix_select<KPT>(keys, sm);
    emit<KPT>(keys, s, [&](int i) { return (i * THREADS + tid) / LTOPK; }, o, t, sm);

    if constexpr (EXACT) {
        // tau16: ord16 of the lowest selected key when exactly K were taken.
        if (tid == 0) {
            sm.min16 = 0xFFFFFFFFu;
            sm.notsat = 0u;
        }
        __syncthreads();
        uint32_t tau = 0u;
        if (s.count == TOPK) {
            if (s.need_eq > 0) {
                tau = key_ord16(s.thr_key);
            } else {
                uint32_t m = 0xFFFFFFFFu;
                for_keys<KPT>([&](int i) {
                    const uint64_t k = keys.get(i);
                    if (selected(s, k, i * THREADS + tid)) {
                        const uint32_t o16 = key_ord16(k);
                        m = o16 < m ? o16 : m;
                    }
                });
#pragma unroll
                for (int d = 16; d > 0; d >>= 1) {
                    const uint32_t y = __shfl_xor_sync(0xFFFFFFFFu, m, d);
                    m = y < m ? y : m;
                }
                if (lane == 0 && m != 0xFFFFFFFFu)
                    atomicMin(&sm.min16, m);
                __syncthreads();
                tau = sm.min16;
            }
        }
        // Rank r is saturated iff its N slots are all non-empty with
        // ord16 > tau16. N is a multiple of 32: a warp's 32 keys of one
        // round belong to one rank.
        for_keys<KPT>([&](int i) {
            const int flat0 = i * THREADS + w * 32;
            if (flat0 < NKEYS) {
                const uint64_t k = keys.get(i);
                const bool above = k != 0ull && key_ord16(k) > tau;
                const uint32_t b = __ballot_sync(0xFFFFFFFFu, above);
                if (lane == 0 && b != 0xFFFFFFFFu)
                    atomicOr(&sm.notsat, 1u << (flat0 / LTOPK));
            }
        });
        __syncthreads();
        if (tid == 0) {
            const uint32_t mask = ~sm.notsat & ((1u << WORLD) - 1u);
            sat[t] = (mask << 16) | tau;
        }
    }
}
