// exchange_push.cu - the device-side push exchange (all-gather inside one P2P
// domain): call n of rank i stores its rows into slot (n % 2, i) of every
// rank's gathered buffer, releases flag (n % 2, i) = n on every rank, then
// waits until its own flags (n % 2, s) equal n for every rank s. No host is
// involved and the call number lives in device memory (ctl->seq), so a CUDA
// graph replay is the next call. Protocol, memory-ordering argument and the
// spin model that checks it: docs/PROTOCOL.md, group/model/exchange.pml (its
// steps name the [E*] tags below).
//
// Grid: any number of CTAs copy a share of the rows (16-byte vectors when the
// source and the slots agree modulo 16, else 4-byte words); each arrives on a
// counter in the control block; the last to arrive releases the flags and
// waits, so a launch ends only when every peer's rows of this call are here,
// and only one CTA per rank ever waits (W ranks sharing one GPU cannot starve
// each other of SMs).
//
// Failures never trap (a trap kills the engine's CUDA context) and never hang:
// a wait longer than timeout_ns, or a flag value the protocol cannot produce,
// writes the sticky status (DC_EXCHANGE_STATUS_*), empties this rank's own
// slot of the call's parity ([E10]) and returns.
#include "exchange_abi.h"
#define DCPTOPK_THREADS DC_EXCHANGE_THREADS
#include "common.cuh"

#define W DCPTOPK_WORLD_SIZE
static_assert(W >= 1 && W <= DC_EXCHANGE_MAX_WORLD, "world_size 1..16");
static_assert(W <= DC_EXCHANGE_THREADS, "one releasing and waiting thread per rank");

namespace {

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t ld_volatile64(const uint64_t *p)
{
    return *(const volatile uint64_t *)p;
}

__device__ __forceinline__ uint32_t ld_volatile32(const uint32_t *p)
{
    return *(const volatile uint32_t *)p;
}

__device__ __forceinline__ unsigned long long globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Records the launch's first failure (sticky: only over status 0).
__device__ __forceinline__ void fail(dc_exchange_ctl *ctl, uint32_t code, int peer,
                                     uint64_t expected, uint64_t seen)
{
    if (atomicCAS(&ctl->status[0], 0u, code) == 0u) {
        ctl->status[1] = (uint32_t)peer;
        ctl->status[2] = (uint32_t)expected;
        ctl->status[3] = (uint32_t)seen;
    }
}

// The source rows are read through the non-coherent path: no store of this
// launch (nor of a peer) lands in them while it runs (the launcher refuses
// a source overlapping the gathered buffer except a whole own slot, and the
// kernel never stores into the slot the source is).
__device__ __forceinline__ void ld_nc_v4(const int32_t *p, uint32_t v[4])
{
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                 : "l"(p));
}

__device__ __forceinline__ void st_v4(int32_t *p, const uint32_t v[4])
{
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v[0]), "r"(v[1]),
                 "r"(v[2]), "r"(v[3])
                 : "memory");
}

// Words [lo, hi) of src to the same words of every destination whose bit is
// not in `skip`, one word per thread of the grid at a time.
__device__ __forceinline__ void copy_words(const int32_t *src, int32_t *const dst[W],
                                           uint32_t skip, long long lo, long long hi)
{
    const long long stride = (long long)gridDim.x * DC_EXCHANGE_THREADS;
    for (long long i = lo + (long long)blockIdx.x * DC_EXCHANGE_THREADS + threadIdx.x; i < hi;
         i += stride) {
        const int32_t v = __ldg(src + i);
#pragma unroll
        for (int r = 0; r < W; r++)
            if (!((skip >> r) & 1u))
                dst[r][i] = v;
    }
}

// `words` int32 from src to every destination not in `skip` (all of them at
// the same offset modulo 16 bytes: slots of one geometry on 16-byte aligned
// bases). 16-byte vectors when src agrees with them modulo 16, a scalar
// head and tail around; else 4-byte words throughout.
__device__ void copy_rows(const int32_t *src, int32_t *const dst[W], uint32_t skip,
                          long long words)
{
    const unsigned long long sa = (unsigned long long)src;
    const unsigned long long da = (unsigned long long)dst[0];
    if (((sa ^ da) & 15ull) != 0ull) {
        copy_words(src, dst, skip, 0, words);
        return;
    }
    long long head = (long long)(((16ull - (sa & 15ull)) & 15ull) >> 2);
    if (head > words)
        head = words;
    const long long vecs = (words - head) >> 2;
    const long long tail = head + vecs * 4;
    copy_words(src, dst, skip, 0, head);
    copy_words(src, dst, skip, tail, words);
    const long long stride = (long long)gridDim.x * DC_EXCHANGE_THREADS;
    const long long first = (long long)blockIdx.x * DC_EXCHANGE_THREADS + threadIdx.x;
    // DC_EXCHANGE_UNROLL loads in flight per thread before their stores.
    for (long long i0 = first; i0 < vecs; i0 += stride * DC_EXCHANGE_UNROLL) {
        uint32_t v[DC_EXCHANGE_UNROLL][4];
#pragma unroll
        for (int u = 0; u < DC_EXCHANGE_UNROLL; u++) {
            const long long i = i0 + u * stride;
            if (i < vecs)
                ld_nc_v4(src + head + 4 * i, v[u]);
        }
#pragma unroll
        for (int u = 0; u < DC_EXCHANGE_UNROLL; u++) {
            const long long i = i0 + u * stride;
            if (i < vecs) {
#pragma unroll
                for (int r = 0; r < W; r++)
                    if (!((skip >> r) & 1u))
                        st_v4(dst[r] + head + 4 * i, v[u]);
            }
        }
    }
}

} // namespace

extern "C" __global__ void __launch_bounds__(DC_EXCHANGE_THREADS)
dcptopk_exchange_push(const dc_exchange_param x)
{
    __shared__ unsigned long long s_n;
    __shared__ int s_ok;
    __shared__ int s_last;
    dc_exchange_ctl *ctl = (dc_exchange_ctl *)x.ctl;
    uint64_t *own_flags = (uint64_t *)x.peer_flags[x.rank];

    // [E1] The call number: one more than the last launch's. Every CTA reads
    // it before it arrives at the counter; the last CTA writes it after
    // every arrival ([E7]), so no CTA can read the new value.
    if (threadIdx.x == 0) {
        const uint64_t n = ld_volatile64(&ctl->seq) + 1ull;
        s_n = n;
        // [E2] The invariant that makes the stores below safe: this rank has
        // seen every peer's flag of call n - 1 (parity 1 - p), which each
        // peer released after its reads of call n - 2 in parity p finished
        // (stream order), so slot p is free on every peer. Parity p holds
        // n - 2 (peer not yet here) or n (peer already stored call n): any
        // other value, a host sequence that disagrees, or a sticky failure
        // of an earlier call means the ranks are out of step: store nothing.
        int ok = ld_volatile32(&ctl->status[0]) == 0u;
        if (ok && x.expect_seq != 0ull && x.expect_seq != n) {
            fail(ctl, DC_EXCHANGE_STATUS_PROTOCOL, x.rank, x.expect_seq, n);
            ok = 0;
        }
        const int p = (int)(n & 1ull);
        const uint64_t before = n >= 2ull ? n - 2ull : 0ull;
        for (int s = 0; ok && s < W; s++) {
            const uint64_t prev = ld_volatile64(own_flags + dc_exchange_flag_index(1 - p, s, W));
            const uint64_t cur = ld_volatile64(own_flags + dc_exchange_flag_index(p, s, W));
            if (prev != n - 1ull) {
                fail(ctl, DC_EXCHANGE_STATUS_PROTOCOL, s, n - 1ull, prev);
                ok = 0;
            } else if (cur != before && cur != n) {
                fail(ctl, DC_EXCHANGE_STATUS_PROTOCOL, s, before, cur);
                ok = 0;
            }
        }
        s_ok = ok;
    }
    __syncthreads();
    const uint64_t n = s_n;
    const int p = (int)(n & 1ull);

    // [E3] This CTA's share of the rows, into slot (p, rank) of every rank.
    // A source that is this very slot (the producer wrote in place) is not
    // copied onto itself.
    if (s_ok && x.rows > 0) {
        int32_t *dst[W];
        uint32_t skip = 0u;
#pragma unroll
        for (int r = 0; r < W; r++) {
            dst[r] = (int32_t *)x.peer_gathered[r] +
                     dc_exchange_slot_words(p, x.rank, W, x.max_rows, x.row_words);
            if (r == x.rank && (uint64_t)dst[r] == x.src)
                skip |= 1u << r;
        }
        copy_rows((const int32_t *)x.src, dst, skip, x.rows * (long long)x.row_words);
    }

    // [E4] Arrival. The barrier orders the CTA's stores before thread 0's
    // system-scope fence, which is cumulative over them (PTX ISA, "Memory
    // Consistency Model": bar.sync gives CTA-scope causality, fence.sc.sys
    // then orders everything the thread observed); the relaxed atomic that
    // follows is observed by the last CTA's atomic, and its fence closes
    // the fence-fence synchronisation ([E5]).
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        s_last = atomicAdd(&ctl->arrived, 1u) == gridDim.x - 1u;
    }
    __syncthreads();
    if (!s_last)
        return;

    // [E5] The last CTA: every CTA's stores of this call precede this point.
    if (threadIdx.x == 0) {
        __threadfence_system();
        ctl->arrived = 0u; // the next launch is stream-ordered after this one
        ctl->current = x.peer_gathered[x.rank] +
                       4ull * (uint64_t)dc_exchange_slot_words(p, 0, W, x.max_rows, x.row_words);
        ctl->seq = n; // [E7] the call is launched: a replay is call n + 1
        s_ok = ld_volatile32(&ctl->status[0]) == 0u; // any CTA's [E2] failure
    }
    __syncthreads();
    const int tid = (int)threadIdx.x;
    if (s_ok && tid < W) {
        // [E6] Release flag (p, rank) = n on every rank r. The fence makes
        // this thread's release cumulative over what thread 0 observed (the
        // barrier orders thread 0's acquire fence before it), i.e. every
        // CTA's stores.
        __threadfence_system();
        st_release_sys((uint64_t *)x.peer_flags[tid] + dc_exchange_flag_index(p, x.rank, W), n);

        // [E8] Wait, bounded, for flag (p, tid) == n on this rank: rank tid's
        // rows of call n are then visible here (its release [E6] and this
        // acquire synchronise at system scope), and to every later kernel of
        // this stream. Seen values are n - 2 (not yet) or n; anything else
        // is a protocol error. A failure of another waiter ends this wait.
        const uint64_t before = n >= 2ull ? n - 2ull : 0ull;
        const uint64_t *f = own_flags + dc_exchange_flag_index(p, tid, W);
        const unsigned long long start = globaltimer();
        for (;;) {
            const uint64_t v = ld_acquire_sys(f);
            if (v == n)
                break;
            if (v != before) {
                fail(ctl, DC_EXCHANGE_STATUS_PROTOCOL, tid, n, v);
                break;
            }
            if (ld_volatile32(&ctl->status[0]) != 0u)
                break;
            // [E9] The bound: a peer that never arrives costs timeout_ns,
            // then the sticky status, never a trap or a hang.
            if (globaltimer() - start > x.timeout_ns) {
                fail(ctl, DC_EXCHANGE_STATUS_TIMEOUT, tid, n, v);
                break;
            }
            asm volatile("nanosleep.u32 32;");
        }
    }
    __syncthreads();
    if (tid == 0)
        s_ok = ld_volatile32(&ctl->status[0]) == 0u;
    __syncthreads();
    if (s_ok)
        return;
    // [E10] A failed call empties this rank's own slot in its own buffer, so
    // its select sees that it sent no word: it is not saturated and its push
    // (push.cu) stores nothing into the receive slots of peers whose call
    // may have succeeded (its view of the other ranks' rows may be partial,
    // and a push from a wrong saturation mask would land in another rank's
    // slot). Only this rank writes that slot of this buffer.
    int32_t *own = (int32_t *)x.peer_gathered[x.rank] +
                   dc_exchange_slot_words(p, x.rank, W, x.max_rows, x.row_words);
    const long long words = x.rows * (long long)x.row_words;
    for (long long i = tid; i < words; i += DC_EXCHANGE_THREADS)
        own[i] = 0;
}
