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
