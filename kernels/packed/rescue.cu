// rescue.cu - round 2 of the exact packed merge (docs/CONTRACT.md, "Rescue").
//
// Persistent grid: as many CTAs as the SMs hold (the launcher asks the
// driver; see packed_abi.h), looping over rows. A row whose saturation word
// has an empty mask costs one load, made together with the CTA's next
// THREADS rows' loads; the rows with work are listed, and their flags polled
// once for the whole list. A row whose flags were not yet set waits,
// bounded by `timeout_ns` (%globaltimer), for flags[r * max_rows + t] ==
// seq[t] + 1 of every saturated rank r (acquire loads: the pushes are peer
// stores released by push.cu), then re-selects the top K of the unsaturated
// ranks' round-1 words with ord16 >= tau16 plus the pushed lists (receive
// slot s = popcount(mask & ((1 << r) - 1)) holds rank r's K + K/32 words),
// overwrites the row's ids / rows / count and bumps seq[t].
//
// When the row's words fit shared memory (every named config but the
// 16-rank one, whose keys are re-read from global memory) the selection
// works on the 32-bit words, as the select's small path does: the load counts
// the top byte of each candidate's ord16, a second counting pass the low byte
// inside the cut bin, giving the boundary value P and how many keys equal to P
// are taken; when that is not all of them, the few tied keys are ranked by
// (gid, slot) by comparison. Only rows with more ties than that (integer
// valued or constant scores) run select_core.cuh's 64-bit radix select over
// keys decoded from the same words. Either way the selected set and its order
// are those of the 64-bit key selection (select_core.cuh).
//
// A wait that times out never traps (a trap kills the engine's CUDA
// context): it records DCPTOPK_RESCUE_TIMEOUT (10) with the row, rank and
// expected flag in status[0..3], leaves the row's round-1 outputs, and makes
// every other wait of the launch give up at once. The host reads it with
// dcptopk_workspace_check.
#include "packed_abi.h"
#define DCPTOPK_THREADS DC_RESCUE_THREADS
// Keys carry their rank (select_core.cuh): the emit needs no segment search.
#define DCSEL_TAG_BITS 4
#include "select_core.cuh"

using namespace dcsel;

constexpr int NSAT_MAX = DC_RESCUE_NSAT_MAX(TOPK, LTOPK, WORLD);
constexpr int RMAX = DC_RESCUE_KEYS_MAX(TOPK, LTOPK, WORLD);
constexpr int KPT = (RMAX + THREADS - 1) / THREADS;
// Words in shared memory: registers stay few enough for two CTAs an SM.
constexpr bool SMEM_KEYS = DC_RESCUE_SMEM_BYTES(TOPK, LTOPK, WORLD) > 0u;
constexpr int MIN_CTAS = SMEM_KEYS ? 2 : 1;
static_assert(!SMEM_KEYS || DC_RESCUE_SMEM_BYTES(TOPK, LTOPK, WORLD) == KPT * THREADS * 4u,
              "the launcher's shared memory holds every word slot");
constexpr uint32_t STATUS_TIMEOUT = DC_RESCUE_STATUS_TIMEOUT;

// The PTX wrappers' DC_EMU sides run the kernel on tests/emu's host
// emulator (NVRTC never defines it): plain loads, and its device clock.
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p)
{
#ifdef DC_EMU
    return *p;
#else
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#endif
}

__device__ __forceinline__ uint32_t ld_cg(const int32_t *p)
{
#ifdef DC_EMU
    return (uint32_t)*p;
#else
    uint32_t v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
#endif
}

__device__ __forceinline__ uint32_t ld_volatile(const uint32_t *p)
{
    return *(const volatile uint32_t *)p;
}

__device__ __forceinline__ unsigned long long globaltimer()
{
#ifdef DC_EMU
    return dc_emu_globaltimer();
#else
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#endif
}

// A polling loop's back-off (the emulator's lets its other threads run).
__device__ __forceinline__ void nanosleep_256()
{
#ifdef DC_EMU
    dc_emu_nanosleep(256);
#else
    asm volatile("nanosleep.u32 256;");
#endif
}

struct RowCtx {
    const int32_t *g0;       // row t of rank 0's segment
    long long rank_words;    // words between two ranks' segments
    const int32_t *recv_row; // this rank's receive slots of row t
    uint32_t mask;
    uint32_t tau;
    int total;
    const int *seg;          // smem segment starts [WORLD + 1]
};

// Where key slot `flat` of the row comes from: rank r's slot j, its words
// at src (a pushed list or the rank's round-1 row).
struct Slot {
    const int32_t *src;
    int r, j, plane_at;
    bool pushed, valid;
};

__device__ __forceinline__ Slot slot_of(const RowCtx &c, int flat)
{
    Slot q;
    q.r = 0;
#pragma unroll
    for (int i = 1; i < WORLD; ++i)
        q.r += flat >= c.seg[i];
    q.j = flat - c.seg[q.r];
    q.pushed = (c.mask >> q.r) & 1u;
    q.src = q.pushed ? c.recv_row + (long long)__popc(c.mask & ((1u << q.r) - 1u)) * PUSH_WORDS
                     : c.g0 + (long long)q.r * c.rank_words;
    q.plane_at = q.pushed ? TOPK : LTOPK;
    q.valid = flat < c.total;
    return q;
}

// The key of slot j of rank r (0: none). An unsaturated rank's words below
// tau16 are not candidates; past the row's keys the loads gave 0.
__device__ __forceinline__ uint64_t slot_key(const RowCtx &c, bool pushed, int r, int j,
                                             uint32_t word, uint32_t plane)
{
    if (!pushed && (word >> 16) < c.tau)
        word = 0u;
    return decode(word, plane, j, r);
}

// The slot's word and plane word (0 past the row's keys).
__device__ __forceinline__ void slot_load(const Slot &q, uint32_t &word, uint32_t &plane)
{
    word = plane = 0u;
    if (q.valid) {
        word = ld_cg(q.src + q.j);
        plane = ld_cg(q.src + q.plane_at + (q.j >> 5));
    }
}

__device__ __forceinline__ uint64_t rescue_key(const RowCtx &c, int flat)
{
    const Slot q = slot_of(c, flat);
    uint32_t word, plane;
    slot_load(q, word, plane);
    return slot_key(c, q.pushed, q.r, q.j, word, plane);
}

// Where the 32 slots of one warp and round come from. Segments start at
// multiples of 32, so a warp's slots of a round lie in one segment: lane i
// of every warp works out round i's source once a row (round_src), and the
// warp's lanes take it by shuffle (round_key) instead of each searching the
// segments for every key.
struct RoundSrc {
    unsigned long long w; // lane 0's word; 0 past the row's keys
    int plane;            // the plane word's offset from w, in words
    int tag;              // rank | pushed << 4
};

__device__ __forceinline__ RoundSrc round_src(const RowCtx &c, int rounds)
{
    const int i = (int)threadIdx.x & 31;
    const int flat0 = i * THREADS + ((int)threadIdx.x & ~31);
    RoundSrc s;
    s.w = 0ull;
    s.plane = s.tag = 0;
    if (i < rounds && flat0 < c.total) {
        const Slot q = slot_of(c, flat0);
        s.w = (unsigned long long)(q.src + q.j);
        s.plane = q.plane_at + (q.j >> 5) - q.j;
        s.tag = q.r | (q.pushed ? 16 : 0);
    }
    return s;
}

// The word and plane word of this lane's slot of round i (0 past the row).
__device__ __forceinline__ void round_load(const RoundSrc &mine, int i, uint32_t &word,
                                           uint32_t &plane)
{
    const unsigned long long w = __shfl_sync(0xFFFFFFFFu, mine.w, i);
    const int pl = __shfl_sync(0xFFFFFFFFu, mine.plane, i);
    word = plane = 0u;
    if (w != 0ull) { // the same in every lane
        const int32_t *p = (const int32_t *)w;
        word = ld_cg(p + (threadIdx.x & 31));
        plane = ld_cg(p + pl);
    }
}

__device__ __forceinline__ uint64_t round_key(const RowCtx &c, const RoundSrc &mine, int i,
                                              uint32_t word, uint32_t plane)
{
    const int tag = __shfl_sync(0xFFFFFFFFu, mine.tag, i);
    return slot_key(c, (tag & 16) != 0, tag & 15, (int)threadIdx.x & 31, word, plane);
}

enum class Store { smem, reg, global };
constexpr Store STORE = SMEM_KEYS ? Store::smem : KPT <= REG_MAX ? Store::reg : Store::global;
static_assert(STORE == Store::global || KPT <= 32, "a lane works out each round's source");

template <Store S>
struct RescueKeys;

// The row in shared memory: slot i of this thread's word at
// wb[i * THREADS + tid] (0: empty, or an unsaturated rank's word below tau),
// its plane bit as bit i of a register, and the rank of each warp's round in
// tags[i * NW + warp] (a warp's slots of a round lie in one segment).
struct RescueWords {
    uint32_t *wb;
    const uint8_t *tags;
    uint32_t pb;

    // The words and plane words of LOAD_BATCH slots are loaded before any
    // is stored: their loads are in flight together (in program order the
    // compiler kept each slot's loads apart from the next slot's, one
    // memory latency a slot). Ten: a row with one saturated rank at the
    // goal shape is one batch. The load also counts the top byte of each
    // candidate's ord16 in hist (the first counting pass); an empty slot's
    // count goes to *sink, so that the atomic needs no branch.
    static constexpr int LOAD_BATCH = 10;
    __device__ __forceinline__ RescueWords(const RowCtx &c, uint32_t *wbuf, uint8_t *tagbuf,
                                           int *hist, int *sink, int rounds)
        : wb(wbuf + threadIdx.x), tags(tagbuf), pb(0u)
    {
        const int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x >> 5;
        const RoundSrc mine = round_src(c, rounds);
        // Lane i holds round i's source: it stores the round's rank once,
        // and the words below tau are dropped unless the rank pushed them.
        if (lane < rounds)
            tagbuf[lane * NW + w] = (uint8_t)(mine.tag & 15);
        const uint32_t floor16 = (mine.tag & 16) ? 0u : c.tau;
#pragma unroll 1
        for (int i0 = 0; i0 < rounds; i0 += LOAD_BATCH) {
            uint32_t wd[LOAD_BATCH], pl[LOAD_BATCH];
#pragma unroll
            for (int b = 0; b < LOAD_BATCH; ++b)
                if (i0 + b < rounds)
                    round_load(mine, i0 + b, wd[b], pl[b]);
#pragma unroll
            for (int b = 0; b < LOAD_BATCH; ++b) {
                const int i = i0 + b;
                if (i < rounds) {
                    const uint32_t f = __shfl_sync(0xFFFFFFFFu, floor16, i);
                    const uint32_t x = (wd[b] >> 16) < f ? 0u : wd[b];
                    wb[i * THREADS] = x;
                    pb |= ((pl[b] >> lane) & 1u) << i;
                    atomicAdd(x != 0u ? &hist[x >> 24] : sink, 1);
                }
            }
        }
    }
    __device__ __forceinline__ uint32_t word(int i) const { return wb[i * THREADS]; }
    __device__ __forceinline__ int rank(int i) const { return tags[i * NW + ((int)threadIdx.x >> 5)]; }
    __device__ __forceinline__ uint32_t gid(int i) const
    {
        const uint32_t l = (0xFFFFu - (word(i) & 0xFFFFu)) | (((pb >> i) & 1u) << 16);
        return (uint32_t)dc::global_id((int32_t)l, rank(i), WORLD, ILV);
    }
    // The 64-bit key (select_core.cuh) of slot i, for the radix select.
    __device__ __forceinline__ uint64_t get(int i) const
    {
        return decode(word(i), ((pb >> i) & 1u) ? 0xFFFFFFFFu : 0u, 0, rank(i));
    }
};

template <>
struct RescueKeys<Store::reg> {
    uint64_t k[KPT];
    __device__ __forceinline__ RescueKeys(const RowCtx &c, int rounds)
    {
        const RoundSrc mine = round_src(c, rounds);
#pragma unroll
        for (int i = 0; i < KPT; ++i) {
            k[i] = 0ull;
            if (i < rounds) {
                uint32_t w, p;
                round_load(mine, i, w, p);
                k[i] = round_key(c, mine, i, w, p);
            }
        }
    }
    __device__ __forceinline__ uint64_t get(int i) const { return k[i]; }
};

template <>
struct RescueKeys<Store::global> {
    RowCtx c;
    __device__ __forceinline__ RescueKeys(const RowCtx &cc, int) : c(cc) {}
    __device__ __forceinline__ uint64_t get(int i) const
    {
        return rescue_key(c, i * THREADS + (int)threadIdx.x);
    }
};

// Rows whose boundary value P holds more tied keys than this (beyond the
// ones taken) run the 64-bit radix select; fewer are ranked by comparison,
// one key a thread.
constexpr int TIE_MAX = 128;
static_assert(TIE_MAX <= THREADS, "one tied key a thread");

struct RescueSmem {
    int4 cut[2];            // shared_cut's results: bin, before, cnt, total
    int nties;
    int sink;               // the load's count of empty slots (never read)
    uint64_t ties[TIE_MAX]; // (gid << 16) | flat of the keys equal to P
    uint8_t tags[SMEM_KEYS ? KPT * NW : 1];
};

// The order of keys with equal ord16: lower gid first, then (a caller's
// duplicate ids) lower slot. flat < DC_RESCUE_SMEM_KEYS < 2^16.
__device__ __forceinline__ uint64_t tie_key(const RescueWords &w, int i)
{
    return ((uint64_t)w.gid(i) << 16) | (uint64_t)(i * THREADS + (int)threadIdx.x);
}

// Of the m tied keys in ties (unique), the need smallest are taken: thread
// i < m ranks ties[i] by comparison and, when it is not taken, clears its
// word in shared memory. Then every row takes every word at or above P by
// one compare a word, where testing the tie key in the selection loop
// decoded a gid for every word equal to P. The caller's barriers order the
// list before it and the cleared words after it.
__device__ __forceinline__ void drop_untaken_ties(const uint64_t *ties, int m, int need,
                                                  uint32_t *wbuf)
{
    const int tid = threadIdx.x;
    if (tid < m) {
        const uint64_t x = ties[tid];
        int less = 0;
        for (int q = 0; q < m; ++q)
            less += ties[q] < x ? 1 : 0;
        if (less >= need)
            wbuf[(uint32_t)x & 0xFFFFu] = 0u;
    }
}

// Selects the top K of row t from its words in shared memory and emits it.
// sm.hist and rs.nties are zero on entry (and a barrier behind). A template,
// instantiated only where the words fit (KPT <= 32).
template <Store S>
__device__ __forceinline__ void rescue_words(const RowCtx &c, uint32_t *wbuf, RescueSmem &rs,
                                             Smem &sm, const Out &o, long long t, int rounds)
{
    static_assert(S == Store::smem, "the words are in shared memory");
    int *h1 = sm.hist, *h2 = sm.hist + CUT_BINS;
    const RescueWords words(c, wbuf, rs.tags, h1, &rs.sink, rounds);
    __syncthreads();
    // Block-uniform from here: every thread reads the same cuts.
    const Cut c1 = shared_cut<true>(h1, TOPK, rs.cut[0], 0);
    const bool all = c1.total <= TOPK;
    uint32_t P = 0u;
    int need = 0, m = 0;
    if (!all) {
        const uint32_t b1 = (uint32_t)c1.bin;
        // h1 has been read: its first bin takes the words outside the cut bin,
        // so that the atomic needs no branch (rs.sink, as the load uses,
        // spilled here at the 64-register bound).
        // d < 256 iff x's top byte is b1 (unsigned wrap otherwise).
        const uint32_t b1lo = b1 << 8;
        for_keys<KPT>([&](int i) {
            const uint32_t x = words.word(i);
            const uint32_t d = (x >> 16) - b1lo;
            atomicAdd(&h1[x != 0u && d < 256u ? CUT_BINS + (int)d : 0], 1);
        }, rounds);
        __syncthreads();
        const Cut c2 = shared_cut<true>(h2, TOPK - c1.before, rs.cut[1], 0);
        P = (b1 << 8) | (uint32_t)c2.bin;
        need = TOPK - c1.before - c2.before;
        m = c2.cnt;
    }
    const bool tied = m > need;
    uint32_t selm = 0u; // bit i: slot i is selected
    if (tied && m > TIE_MAX) {
        selm = selected_mask<KPT>(words, radix_select<KPT>(words, sm, rounds), rounds);
    } else {
        if (tied) {
            for_keys<KPT>([&](int i) {
                const uint32_t x = words.word(i);
                if (x != 0u && (x >> 16) == P)
                    rs.ties[atomicAdd(&rs.nties, 1)] = tie_key(words, i);
            }, rounds);
            __syncthreads();
            drop_untaken_ties(rs.ties, m, need, wbuf);
            __syncthreads();
        }
        // P = 0 when all are taken; the tied keys not taken are cleared.
        // A break, not a guard: the compiler predicates a guarded unrolled
        // body, so every warp would issue all KPT rounds.
#pragma unroll
        for (int i = 0; i < KPT; ++i) {
            if (i >= rounds)
                break;
            const uint32_t x = words.word(i);
            selm |= (x != 0u && (x >> 16) >= P ? 1u : 0u) << i;
        }
    }
    emit_with<KPT>(SelBits{selm},
                   [&](int i) { return words.gid(i); }, [&](int i) { return words.rank(i); },
                   o, t, sm, rounds, false);
}

// Row t's selection and emit: a template, so that only the store in use is
// instantiated.
template <Store S>
__device__ __forceinline__ void rescue_row(const RowCtx &c, uint32_t *wbuf, RescueSmem &rs,
                                           Smem &sm, const Out &o, long long t, int rounds)
{
    if constexpr (S == Store::smem) {
        rescue_words<S>(c, wbuf, rs, sm, o, t, rounds);
    } else {
        const RescueKeys<S> keys(c, rounds);
        const Sel s = radix_select<KPT>(keys, sm, rounds);
        emit<KPT>(keys, s, [&](int i) { return key_tag(keys.get(i)); }, o, t, sm, rounds, false);
    }
}

// Parameters: DC_RESCUE_PARAMS (packed_abi.h).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_CTAS)
dcptopk_rescue(DC_KERNEL_PARAMS(DC_RESCUE_PARAMS))
{
#ifdef DC_EMU
    uint32_t *const wbuf = (uint32_t *)dc_emu_dynamic_smem(); // the emulated launch's
#else
    extern __shared__ uint32_t wbuf[]; // DC_RESCUE_SMEM_BYTES (smem words)
#endif
    __shared__ __align__(16) Smem sm; // hist: shared_cut's int4 loads
    __shared__ __align__(16) RescueSmem rs;
    __shared__ int s_abort;
    __shared__ uint32_t s_rows[THREADS];
    __shared__ uint32_t s_word[THREADS];     // listed rows' saturation words,
    __shared__ uint32_t s_expected[THREADS]; // their flags' expected value,
    __shared__ uint8_t s_ready[THREADS];     // and whether the flags were set
    __shared__ int s_warps[THREADS / 32];
    const int tid = threadIdx.x;
    // Launched as a dependent of the push (packed.c): nothing the select or
    // the push wrote is read before they finished.
    dc::pdl_wait();
    // Row t belongs to CTA t % gridDim.x. Its rows' saturation words are
    // read THREADS at a time and the saturated ones listed: one row at a
    // time would cost a memory latency per row, most of the launch when no
    // row saturates.
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long base = blockIdx.x; base < rows; base += stride) {
        // With a row a CTA (decode) no list: every thread reads the word.
        const bool single = rows <= (long long)gridDim.x;
        const long long mine = single ? base : base + (long long)tid * gridDim.x;
        bool hit = false;
        if (mine < rows) {
            const uint32_t m = (sat[mine] >> 16) & ((1u << WORLD) - 1u);
            // A mask the select never writes (too many ranks): nothing pushed.
            hit = m != 0u && __popc(m) <= NSAT_MAX;
        }
        const int listed = single ? (int)hit
                                  : dc::compact_ordered<THREADS>(hit, (uint32_t)mine,
                                                                 s_rows, s_warps);
        // One thread a listed row reads its saturation and sequence words
        // and polls its flags once: one memory latency for the batch, not
        // three a row. A row whose flags were all set (the usual case: the
        // pushes ran before the rescue) needs no wait below; the poller's
        // acquire and fence, then the barrier, order the CTA's reads of its
        // pushed lists after the pushes (the pattern of a grid sync).
        if (tid < listed) {
            const long long t = single ? mine : (long long)s_rows[tid];
            const uint32_t word = sat[t];
            const uint32_t mask = (word >> 16) & ((1u << WORLD) - 1u);
            const uint32_t expected = seq[t] + 1u;
            bool ready = true;
#pragma unroll 1
            for (int r = 0; r < WORLD && ready; ++r)
                if ((mask >> r) & 1u)
                    ready = ld_acquire_sys(flags + (long long)r * max_rows + t) == expected;
            if (ready)
                __threadfence();
            s_word[tid] = word;
            s_expected[tid] = expected;
            s_ready[tid] = ready ? 1 : 0;
        }
        __syncthreads();
        for (int li = 0; li < listed; li++) {
            const long long t = single ? mine : (long long)s_rows[li];
            const uint32_t word = s_word[li];
            const uint32_t mask = (word >> 16) & ((1u << WORLD) - 1u);
            const uint32_t expected = s_expected[li];
            const bool ready = s_ready[li] != 0;
            if (tid == 0) {
                s_abort = 0;
                int acc = 0;
                for (int r = 0; r < WORLD; ++r) {
                    sm.seg[r] = acc;
                    acc += ((mask >> r) & 1u) ? TOPK : LTOPK;
                }
                sm.seg[WORLD] = acc;
                rs.nties = 0;
            }
            sm.hist[tid] = 0; // the word path's counts (rescue_words)
            if (!ready) // block-uniform; s_abort = 0 before any waiter sets it
                __syncthreads();
            if (!ready && tid < WORLD && ((mask >> tid) & 1u)) {
                const uint32_t *f = flags + (long long)tid * max_rows + t;
                const unsigned long long start = globaltimer();
                while (ld_acquire_sys(f) != expected) {
                    if (ld_volatile(status) != 0u) {
                        s_abort = 1;
                        break;
                    }
                    if (globaltimer() - start > timeout_ns) {
                        if (atomicCAS(status, 0u, STATUS_TIMEOUT) == 0u) {
                            status[1] = (uint32_t)t;
                            status[2] = (uint32_t)tid;
                            status[3] = expected;
                        }
                        s_abort = 1;
                        break;
                    }
                    nanosleep_256();
                }
                // As above: only the waiters fence; in every thread the
                // fence would wait for its earlier id stores, every row.
                __threadfence();
            }
            __syncthreads();
            const int skip = s_abort;
            RowCtx c;
            c.g0 = gathered + t * WORDS;
            c.rank_words = rank_stride_rows * WORDS;
            c.recv_row = recv + t * (long long)(SLOTS * PUSH_WORDS);
            c.mask = mask;
            c.tau = word & 0xFFFFu;
            c.total = sm.seg[WORLD];
            c.seg = sm.seg;
            if (!skip) {
                // The row's own key rounds, not KPT (the bound for the most
                // saturated ranks): most saturated rows have one.
                const int rounds = (c.total + THREADS - 1) / THREADS;
                rescue_row<STORE>(c, wbuf, rs, sm, o, t, rounds);
                if (tid == 0)
                    seq[t] = expected;
            }
            // sm.seg and s_abort are rewritten for the next row, and sm.scan
            // and sm.out_base (the emit's last barrier is this one).
            __syncthreads();
        }
    } // s_rows, s_word.. are rewritten only after the last row's barrier above
}
