// exchange_settle.cu - the settle step of a captured push exchange: copies the
// rows of the last exchange call from the parity the device recorded
// (ctl->current, written by dcptopk_exchange_push [E5]) into one fixed
// buffer of this rank. A CUDA graph keeps every kernel argument of its
// capture, while the exchange alternates parities on the device; the select
// and rescue captured after this kernel read the fixed buffer, so every
// replay reads the rows of its own call. Eager calls never launch it (the
// host knows the parity). Safety (docs/PROTOCOL.md, "Graph capture"): the
// source parity is not stored into by any peer until this rank releases its
// flag of the next call, which its next exchange does after this kernel
// (stream order); the destination is this rank's memory only.
#include "exchange_abi.h"
#define DCPTOPK_THREADS DC_EXCHANGE_THREADS
#include "common.cuh"

#define W DCPTOPK_WORLD_SIZE
static_assert(W >= 1 && W <= DC_EXCHANGE_MAX_WORLD, "world_size 1..16");

extern "C" __global__ void __launch_bounds__(DC_EXCHANGE_THREADS)
dcptopk_exchange_settle(const dc_settle_param x)
{
    const int32_t *src = (const int32_t *)(*(const volatile uint64_t *)&((
        const dc_exchange_ctl *)x.ctl)->current);
    int32_t *dst = (int32_t *)x.dst;
    const long long per = x.rows * (long long)x.row_words;        // words copied per rank
    const long long stride = x.max_rows * (long long)x.row_words; // words between ranks
    const long long step = (long long)gridDim.x * DC_EXCHANGE_THREADS;
    const long long first = (long long)blockIdx.x * DC_EXCHANGE_THREADS + threadIdx.x;
    // 16-byte vectors when every rank's segment starts 16-byte aligned in
    // both buffers and is a whole number of vectors (a row of odd words
    // makes parity 1 only 4-byte aligned); else 4-byte words.
    if ((((unsigned long long)src | (unsigned long long)dst) & 15ull) == 0ull &&
        (stride & 3ll) == 0ll && (per & 3ll) == 0ll) {
        const long long pv = per >> 2, sv = stride >> 2;
        const int4 *s4 = (const int4 *)src;
        int4 *d4 = (int4 *)dst;
        for (long long i = first; i < (long long)W * pv; i += step) {
            const long long off = (i / pv) * sv + i % pv;
            d4[off] = __ldg(s4 + off);
        }
        return;
    }
    for (long long i = first; i < (long long)W * per; i += step) {
        const long long off = (i / per) * stride + i % per;
        dst[off] = __ldg(src + off);
    }
}

// The poison step (dc_poison_param, exchange_abi.h): the last kernel of a
// group's merge step on the paths with device waits. A step whose status word
// is set must never look like a result: every row gets the same poison, so
// no caller can take part of a row for an answer, and because the word is
// sticky every later step (and every graph replay) is poisoned alike until
// the group is rebuilt. Launched as a dependent (PDL): the status and the
// outputs are touched only after the kernels before it finished.
extern "C" __global__ void __launch_bounds__(DC_EXCHANGE_THREADS)
dcptopk_exchange_poison(const dc_poison_param x)
{
    dc::pdl_wait();
    const volatile uint32_t *st = (const volatile uint32_t *)x.status;
    const uint32_t code = st[0];
    if (code == 0u)
        return;
    if (x.trap)
        __trap(); // opted in: the seed's loud death (kills the context)
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        volatile uint32_t *h = (volatile uint32_t *)x.host;
        h[1] = st[1];
        h[2] = st[2];
        h[3] = st[3];
        __threadfence_system(); // the details before the code the host polls
        h[0] = code;
    }
    int32_t *ids = (int32_t *)x.ids;
    int32_t *rows_out = (int32_t *)x.rows_out;
    int32_t *counts = (int32_t *)x.counts;
    for (long long t = blockIdx.x; t < x.rows; t += gridDim.x) {
        for (int c = threadIdx.x; c < x.topk; c += DC_EXCHANGE_THREADS) {
            if (ids)
                ids[t * x.ids_stride + c] = -1;
            if (rows_out)
                rows_out[t * x.rows_stride + c] = -1;
        }
        if (counts && threadIdx.x == 0)
            counts[t] = 0;
    }
    // The offsets of all-zero counts (the launch follows dcptopk_indptr).
    int32_t *indptr = (int32_t *)x.indptr;
    if (indptr)
        for (long long i = (long long)blockIdx.x * DC_EXCHANGE_THREADS + threadIdx.x;
             i <= x.rows; i += (long long)gridDim.x * DC_EXCHANGE_THREADS)
            indptr[i] = 0;
}
