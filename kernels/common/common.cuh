// common.cuh - device code shared by every dcptopk kernel template.
//
// Templates are self-contained: they include no CUDA toolkit header (engines
// often ship NVRTC without toolkit headers). bf16 values travel as raw 16-bit
// patterns and are compared through order-preserving integer keys.
//
// The renderer defines, before the template, exactly the constants a kernel
// specialises on (DCPTOPK_TOPK, DCPTOPK_LOCAL_TOPK, DCPTOPK_WORLD_SIZE,
// DCPTOPK_BLOCK_SIZE, DCPTOPK_INTERLEAVE, DCPTOPK_EMIT_IDS, DCPTOPK_EXACT,
// DCPTOPK_LAYOUT, DCPTOPK_VARIANT). The template defines DCPTOPK_THREADS
// from its family's ABI header before it includes this one, so that the
// launcher's block size and the template's are one definition.
#pragma once

#include "kernel_abi.h" // the integer types, DC_RESTRICT, the packed format

#ifndef DCPTOPK_THREADS
#error "the template defines DCPTOPK_THREADS (from its family's ABI header)"
#endif
static_assert(DCPTOPK_THREADS % 32 == 0, "whole warps only");

namespace dc {

// Order-preserving 16-bit key of a bf16 bit pattern; 0 for NaN. Every
// non-NaN value maps to a key >= 0x007F, so 0 can mean "empty".
__device__ __forceinline__ uint32_t ord16(uint32_t bits)
{
    bits &= 0xFFFFu;
    if ((bits & 0x7FFFu) > 0x7F80u)
        return 0u;
    return (bits & 0x8000u) ? (~bits & 0xFFFFu) : (bits | 0x8000u);
}

// The bf16 bit pattern of an ord16 key (inverse of ord16 on non-NaN keys).
__device__ __forceinline__ uint32_t ord16_to_bits(uint32_t key)
{
    return (key & 0x8000u) ? (key & 0x7FFFu) : (~key & 0xFFFFu);
}

// fp32 analogue: 0 for NaN; -inf maps above 0.
__device__ __forceinline__ uint32_t ord32(uint32_t bits)
{
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
        return 0u;
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Candidate word of the packed format: (ord16 << 16) | (0xFFFF - (l & 0xFFFF)).
__device__ __forceinline__ uint32_t pack_word(uint32_t key16, uint32_t local_id)
{
    return (key16 << 16) | (0xFFFFu - (local_id & 0xFFFFu));
}

// Global id of local id l on `owner` (interleave S).
__device__ __forceinline__ int32_t global_id(int32_t l, int32_t owner, int32_t world,
                                             int32_t interleave)
{
    return (l / interleave) * world * interleave + owner * interleave + l % interleave;
}

// Shared-window address of a pointer into this CTA's shared memory.
__device__ __forceinline__ uint32_t smem_u32addr(const void *p)
{
#ifdef DC_EMU
    return (uint32_t)(uintptr_t)p; // passed to inline PTX only, never run there
#else
    uint64_t a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (uint32_t)a;
#endif
}

// mbarrier of bulk copies: initialised with one arrival (the issuing
// thread's arrive.expect_tx); a phase completes when that arrival and the
// bytes it expects have landed. tests/emu (DC_EMU): a bulk copy lands when
// issued and a wait returns at once, so a wait that could come before its
// copy is issued is not caught there; the templates order the two by a
// barrier.
#ifdef DC_EMU
__device__ __forceinline__ void mbar_init(uint64_t *) {}
__device__ __forceinline__ void mbar_init_fence() {}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *, uint32_t) {}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *)
{
    memcpy(dst, src, bytes);
}
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(uint64_t *, uint32_t)
{
    if (CLUSTER)
        dc_emu_no_cluster();
}
#else
__device__ __forceinline__ void mbar_init(uint64_t *bar)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32addr(bar)) : "memory");
}

// Makes the initialised mbarriers visible to the async proxy (the bulk
// copies' complete_tx), as the PTX ISA requires before their first use.
__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n\t"
                 "fence.proxy.async.shared::cta;" ::: "memory");
}

// The issuing thread's arrival on `bar`, expecting `bytes` of bulk copies.
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     smem_u32addr(bar)),
                 "r"(bytes)
                 : "memory");
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global
// `src` to this CTA's shared `dst`, completing on `bar`, whose current phase
// expects them (PTX ISA, "cp.async.bulk"; a shared::cta address is a valid
// shared::cluster one).
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes,
                                          uint64_t *bar)
{
    uint64_t g;
    asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(src));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" ::"r"(smem_u32addr(dst)),
                 "l"(g), "r"(bytes), "r"(smem_u32addr(bar))
                 : "memory");
}

#endif

// One bulk copy on its own arrival.
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes,
                                          uint64_t *bar)
{
    mbar_expect_tx(bar, bytes);
    bulk_copy(dst, src, bytes, bar);
}

#ifndef DC_EMU

// Waits until the phase of `bar` with this parity has completed. CLUSTER:
// acquiring at cluster scope what other CTAs of the cluster completed on it
// (st.async ... complete_tx); else at CTA scope (bulk copies).
template <bool CLUSTER = false>
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    const uint32_t b = smem_u32addr(bar);
    uint32_t done;
    do {
        if constexpr (CLUSTER)
            asm volatile("{\n\t.reg .pred p;\n\t"
                         "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                         "selp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(done)
                         : "r"(b), "r"(parity)
                         : "memory");
        else
            asm volatile("{\n\t.reg .pred p;\n\t"
                         "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                         "selp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(done)
                         : "r"(b), "r"(parity)
                         : "memory");
    } while (!done);
}
#endif

__device__ __forceinline__ uint32_t lane_id()
{
    return threadIdx.x & 31u;
}

__device__ __forceinline__ uint32_t warp_id()
{
    return threadIdx.x >> 5;
}

// ------------------------------------------------- thread-block clusters
// For templates that split a row over a cluster (sm_90+). Used only where
// the launcher sets a cluster dimension. tests/emu runs one block at a time,
// never a cluster: there they only compile, and stop a test that calls one.
#ifndef DC_EMU

// This CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_ctarank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// The arriving half of a cluster barrier that releases every thread's
// earlier writes: a CTA barrier, then one release fence (cumulative over
// what that barrier ordered) and a relaxed arrive. A release arrive in each
// thread would put a GPU-scope fence in every one of them.
__device__ __forceinline__ void cluster_arrive()
{
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("fence.release.cluster;" ::: "memory");
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

// The waiting half: acquires what the peers released when they arrived.
__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared::cluster address of `p` (of this CTA's layout) in CTA `rank`.
__device__ __forceinline__ uint32_t cluster_map(const void *p, uint32_t rank)
{
    uint32_t a;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32addr(p)), "r"(rank));
    return a;
}

// Four words (16-byte aligned) at `p` of CTA `rank`'s shared memory.
__device__ __forceinline__ uint4 cluster_ld4(const uint32_t *p, uint32_t rank)
{
    uint4 v;
    asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(cluster_map(p, rank))
                 : "memory");
    return v;
}

// One word to `p` of CTA `rank`'s shared memory by an asynchronous store
// that completes 4 bytes of the current phase of that CTA's mbarrier `bar`:
// the receiver sees the word once it observes the phase complete
// (mbar_wait<true>), with no fence on either side.
__device__ __forceinline__ void cluster_push1(uint32_t *p, uint64_t *bar, uint32_t rank, uint32_t v)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(
                     cluster_map(p, rank)),
                 "r"(v), "r"(cluster_map(bar, rank))
                 : "memory");
}

#else
__device__ __forceinline__ uint32_t cluster_ctarank() { return dc_emu_no_cluster(); }
__device__ __forceinline__ void cluster_arrive() { dc_emu_no_cluster(); }
__device__ __forceinline__ void cluster_wait() { dc_emu_no_cluster(); }
__device__ __forceinline__ uint32_t cluster_map(const void *, uint32_t) { return dc_emu_no_cluster(); }
__device__ __forceinline__ uint4 cluster_ld4(const uint32_t *, uint32_t)
{
    dc_emu_no_cluster();
    return make_uint4(0u, 0u, 0u, 0u);
}
__device__ __forceinline__ void cluster_push1(uint32_t *, uint64_t *, uint32_t, uint32_t)
{
    dc_emu_no_cluster();
}
#endif

// Programmatic dependent launch (sm_90+; no-ops before): pdl_trigger lets
// the next kernel on the stream, when launched with the attribute, be
// scheduled once every CTA of this one has triggered or exited; pdl_wait,
// in that next kernel, waits until this one finished and its writes are
// visible. A kernel launched without the attribute passes pdl_wait at once.
__device__ __forceinline__ void pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Ordered stream compaction of one flag per thread: the flagged threads'
// values into list[] in thread order, the count returned to every thread.
// The order is a pure function of the flags, so every CTA of a cluster that
// sees the same flags builds the same list. warp_counts: NT / 32 ints of
// shared memory. Contains two __syncthreads.
template <int NT>
__device__ __forceinline__ int compact_ordered(bool flag, uint32_t value, uint32_t *list,
                                               int *warp_counts)
{
    static_assert(NT % 32 == 0 && NT <= 1024, "threads: a multiple of 32, at most 1024");
    const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, flag);
    const uint32_t w = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    if (lane == 0)
        warp_counts[w] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
#pragma unroll
    for (int i = 0; i < NT / 32; i++) {
        const int c = warp_counts[i];
        before += i < (int)w ? c : 0;
        total += c;
    }
    if (flag)
        list[before + __popc(ballot & ((1u << lane) - 1u))] = value;
    __syncthreads();
    return total;
}

// Inclusive sum over the 32 lanes of a warp (every lane takes part).
__device__ __forceinline__ int32_t warp_incl_scan(int32_t x)
{
    const int lane = (int)threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int32_t y = __shfl_up_sync(0xFFFFFFFFu, x, o);
        if (lane >= o)
            x += y;
    }
    return x;
}

// indptr[0] = 0, indptr[i + 1] = counts[0] + ... + counts[i] for i < rows:
// one CTA of DC_INDPTR_THREADS threads walks the rows a chunk at a time
// (warp scans, then a scan of the warp totals), carrying the running sum.
// Only this CTA touches indptr, and every chunk's totals are read before
// the barrier that lets the next chunk overwrite them.
__device__ __forceinline__ void indptr_scan(const int32_t *counts, long long rows,
                                            int32_t *indptr)
{
    constexpr int NWS = DC_INDPTR_THREADS / 32;
    static_assert(DC_INDPTR_THREADS % 32 == 0 && NWS <= 32, "one warp scans the warp totals");
    __shared__ int32_t totals[NWS];
    const int tid = (int)threadIdx.x, lane = tid & 31, w = tid >> 5;
    if (tid == 0)
        indptr[0] = 0;
    int32_t carry = 0;
    for (long long base = 0; base < rows; base += DC_INDPTR_THREADS) {
        const long long i = base + tid;
        const int32_t x = warp_incl_scan(i < rows ? counts[i] : 0);
        if (lane == 31)
            totals[w] = x;
        __syncthreads();
        if (w == 0) {
            const int32_t t = warp_incl_scan(lane < NWS ? totals[lane] : 0);
            if (lane < NWS)
                totals[lane] = t; // inclusive prefix of the warp totals
        }
        __syncthreads();
        if (i < rows)
            indptr[i + 1] = carry + (w ? totals[w - 1] : 0) + x;
        carry += totals[NWS - 1];
        __syncthreads();
    }
}

} // namespace dc
