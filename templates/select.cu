// select.cu - round 1 of the packed merge: gathered rows [W, T_alloc, N + N/32]
// (read in place) -> the global top K of each row as ids [T, K] (-1 padded)
// and/or this rank's owned physical rows + counts, in ascending position
// order (docs/CONTRACT.md, "Select"). In exact mode it also writes the row's
// saturation word (mask << 16) | tau16. It never waits: the push of a
// saturated rank is a separate launch (push.cu) right after it.
//
// The W * N keys of a row sit in registers (select_core.cuh). When they do
// (KPT <= REG_MAX) and a row's words fit a 32 KiB buffer, the grid is
// persistent (the launcher sizes it, src/packed.c) and each CTA copies the
// words of its next row into shared memory with cp.async while it selects
// the current one, so the global load latency is hidden behind the
// selection. Otherwise one CTA handles one row and keys are re-read.
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

// Prefetching path: rows' words are double-buffered in dynamic shared memory.
constexpr int ROW_WORDS = WORLD * WORDS;
constexpr bool PREFETCH = KPT <= REG_MAX && ROW_WORDS * 4 <= 32768;

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

// Key of flat position p = r * N + j of a row held in shared memory.
__device__ __forceinline__ uint64_t smem_key(const uint32_t *buf, int flat)
{
    if (flat >= NKEYS)
        return 0ull;
    const int r = flat / LTOPK;
    const int j = flat - r * LTOPK;
    const uint32_t *seg = buf + r * WORDS;
    return decode(seg[j], seg[LTOPK + (j >> 5)], j, r);
}

struct SmemKeys {
    uint64_t k[KPT];
    __device__ __forceinline__ explicit SmemKeys(const uint32_t *buf)
    {
        // tid through a volatile read: the per-key offsets are then
        // recomputed at each row instead of being hoisted out of the row
        // loop, where they would hold registers across the selection.
        int tid;
        asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
#pragma unroll
        for (int i = 0; i < KPT; ++i)
            k[i] = smem_key(buf, i * THREADS + tid);
    }
    __device__ __forceinline__ uint64_t get(int i) const { return k[i]; }
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// Starts the asynchronous copy of row t's words (W segments of WORDS words,
// rank r at r * rank_words) into buf, and commits it as one group (an empty
// group when t >= rows, so that "all groups but the last" stays the row
// being selected). V16: 16-byte copies (WORDS % 4 == 0, base 16-byte
// aligned), else 4-byte ones.
__device__ __forceinline__ void prefetch_row(uint32_t *buf, const int32_t *gathered,
                                             long long rank_words, long long t, long long rows,
                                             bool v16)
{
    if (t < rows) {
        const int32_t *row = gathered + t * WORDS;
        if (v16) {
            constexpr int VECS = WORDS / 4;
            for (int v = threadIdx.x; v < WORLD * VECS; v += THREADS) {
                const int r = v / VECS, c = v - r * VECS;
                const int32_t *src = row + r * rank_words + 4 * c;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                                 smem_addr(buf + r * WORDS + 4 * c)),
                             "l"(src)
                             : "memory");
            }
        } else {
            for (int v = threadIdx.x; v < ROW_WORDS; v += THREADS) {
                const int r = v / WORDS, c = v - r * WORDS;
                const int32_t *src = row + r * rank_words + c;
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(
                                 smem_addr(buf + v)),
                             "l"(src)
                             : "memory");
            }
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// Selects row t from its keys and writes its outputs (and, exact, its
// saturation word).
template <class Keys>
__device__ __forceinline__ void select_row(const Keys &keys, long long t, const Out &o,
                                           uint32_t *__restrict__ sat, Smem &sm)
{
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
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
        // The next row's first writes to sm (radix_select) come after a
        // barrier that thread 0 reaches only past this read.
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, PREFETCH ? 3 : 1)
dcptopk_select(const int32_t *__restrict__ gathered, long long rank_stride_rows, long long rows,
               Out o, uint32_t *__restrict__ sat)
{
    __shared__ Smem sm;
    const long long rank_words = rank_stride_rows * WORDS;
    if constexpr (PREFETCH) {
        // Dynamic shared memory: two row buffers of ROW_WORDS words.
        extern __shared__ __align__(16) uint32_t bufs[];
        // Rows are 32-bit grid indices (src/packed.c); the loop keeps only
        // t and b live across a row (registers are at the launch bound).
        const int n = (int)rows;
        int t = (int)blockIdx.x;
        int b = 0;
        prefetch_row(bufs, gathered, rank_words, t, n,
                     WORDS % 4 == 0 && ((unsigned long long)gathered & 15ull) == 0ull);
        for (; t < n; t += (int)gridDim.x, b ^= 1) {
            prefetch_row(bufs + (b ^ 1) * ROW_WORDS, gathered, rank_stride_rows * WORDS,
                         t + (int)gridDim.x, n,
                         WORDS % 4 == 0 && ((unsigned long long)gathered & 15ull) == 0ull);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
            __syncthreads();
            const SmemKeys keys(bufs + b * ROW_WORDS);
            // Buffer b is refilled only at the next iteration's prefetch,
            // after the barriers of this row's selection.
            select_row(keys, t, o, sat, sm);
        }
        asm volatile("cp.async.wait_group 0;" ::: "memory");
    } else {
        const long long t = blockIdx.x;
        if (t >= rows)
            return;
        const SelectKeys<(KPT <= REG_MAX)> keys(gathered + t * WORDS, rank_words);
        select_row(keys, t, o, sat, sm);
    }
}
