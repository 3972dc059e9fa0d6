/* exchange_abi.h - the ABI of the push exchange (exchange_push.cu), shared by
 * its C launcher (exchange_push.c) and the NVRTC template: the parameter
 * struct the kernel takes by value, the per-rank control block in device
 * memory, the buffer geometry and the status codes. Written once here so the
 * two compilers cannot disagree: C11 and NVRTC's C++ both read it, fixed-width
 * integers only, every field naturally aligned, sizes asserted on both sides.
 *
 * Protocol (docs/PROTOCOL.md): call n (n = 1, 2, ...) of rank i stores its
 * rows into slot (n % 2, i) of every rank's gathered buffer, then releases
 * flag (n % 2, i) = n on every rank, then waits until its own flags (n % 2, s)
 * equal n for every s. Parity n % 2 double-buffers the gathered rows, so no
 * store lands in a buffer a slower peer still reads. */
#ifndef DC_EXCHANGE_ABI_H
#define DC_EXCHANGE_ABI_H

#include "kernel_abi.h" /* fixed-width types under NVRTC too */

/* The geometry helpers below are device functions in the template, static
 * inline functions in C. */
#ifdef __CUDACC_RTC__
#define DC_EXCHANGE_FN static __device__ __forceinline__
#else
#define DC_EXCHANGE_FN static inline
#endif

#ifdef __cplusplus
#define DC_EXCHANGE_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define DC_EXCHANGE_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Peers addressed by one launch (= DCPTOPK_MAX_WORLD_SIZE). */
#define DC_EXCHANGE_MAX_WORLD 16
/* Threads per CTA (the template defines DCPTOPK_THREADS from it). */
#define DC_EXCHANGE_THREADS 256
/* 16-byte vectors each thread loads before it stores them (memory-level
 * parallelism of the copy loop). */
#define DC_EXCHANGE_UNROLL 4

/* status[0] of a rank's control block. Sticky: the kernel writes the first
 * failure only (compare-and-swap from 0) and a launch that finds it set
 * stores and releases nothing, so the peers fail within their own bound.
 * The numbers are the public result codes the group reports them as. */
#define DC_EXCHANGE_STATUS_OK 0u
#define DC_EXCHANGE_STATUS_TIMEOUT 15u  /* DCPTOPK_PEER_TIMEOUT               */
#define DC_EXCHANGE_STATUS_PROTOCOL 16u /* DCPTOPK_GROUP_BROKEN: a flag out of
                                           step with the sequence             */

/* One rank's control block: device memory of that rank only (peers never map
 * it), zeroed before the rank's first call. 48 bytes. */
typedef struct dc_exchange_ctl {
    uint64_t seq;       /* number of the last call launched here (0: none);
                           the kernel advances it, so a CUDA graph replay is
                           the next call                                    */
    uint64_t current;   /* device address of this rank's gathered parity of
                           call `seq`: [W, max_rows, row_words] int32         */
    uint32_t arrived;   /* CTAs of the running launch done storing; the last
                           one resets it to 0                               */
    uint32_t pad_;
    uint32_t status[4]; /* code (DC_EXCHANGE_STATUS_*), peer, the flag value
                           expected and the one seen (low 32 bits)          */
    uint64_t reserved_;
} dc_exchange_ctl;

/* The kernel's only parameter. 320 bytes. */
typedef struct dc_exchange_param {
    uint64_t peer_gathered[DC_EXCHANGE_MAX_WORLD]; /* rank r's gathered base,
                                    as mapped here: [2][W][max_rows][row_words]
                                    int32, 16-byte aligned                  */
    uint64_t peer_flags[DC_EXCHANGE_MAX_WORLD];    /* rank r's flags, as mapped
                                    here: [2][W] uint64; flag (p, s) = the last
                                    call whose rows rank s stored in parity p */
    uint64_t src;        /* this rank's rows [rows, row_words] int32; may be
                            its own slot of either parity                   */
    uint64_t ctl;        /* this rank's dc_exchange_ctl                     */
    int64_t rows;        /* T of this call, 0..max_rows (same on every rank) */
    int64_t max_rows;    /* rank stride of a gathered parity, in rows       */
    uint64_t timeout_ns; /* bound of the wait (%globaltimer)                */
    uint64_t expect_seq; /* 0, or the call number the host expects this
                            launch to be (checked: a mismatch is a protocol
                            error)                                          */
    int32_t row_words;   /* int32 words per row: packed N + N/32, pair 2K   */
    int32_t rank;
    uint64_t reserved_;
} dc_exchange_param;

DC_EXCHANGE_ASSERT(sizeof(dc_exchange_ctl) == 48, "dc_exchange_ctl layout");
DC_EXCHANGE_ASSERT(sizeof(dc_exchange_param) == 320, "dc_exchange_param layout");
/* Offsets: C only (NVRTC without headers has no offsetof); the sizes above
 * and one field order cover the template's side. */
#ifndef __CUDACC_RTC__
DC_EXCHANGE_ASSERT(offsetof(dc_exchange_ctl, status) == 24,
                   "dc_exchange_ctl.status offset");
DC_EXCHANGE_ASSERT(offsetof(dc_exchange_param, src) == 256,
                   "dc_exchange_param.src offset");
DC_EXCHANGE_ASSERT(offsetof(dc_exchange_param, row_words) == 304,
                   "dc_exchange_param.row_words offset");
#endif

/* The settle kernel's only parameter (exchange_settle.cu): under CUDA graph
 * capture, copies the rows of the last call from the parity the device
 * recorded (ctl->current) into a fixed buffer, so kernels captured after it
 * read a stable address on every replay. 48 bytes. */
typedef struct dc_settle_param {
    uint64_t ctl;        /* this rank's dc_exchange_ctl: `current` is read  */
    uint64_t dst;        /* [W][max_rows][row_words] int32, this rank only  */
    int64_t rows;        /* rows per rank copied (T of the captured call)   */
    int64_t max_rows;    /* rank stride of both buffers, in rows            */
    int32_t row_words;   /* int32 words per row                             */
    int32_t pad_;
    uint64_t reserved_;
} dc_settle_param;

DC_EXCHANGE_ASSERT(sizeof(dc_settle_param) == 48, "dc_settle_param layout");

/* The poison step of a group's merge (exchange_settle.cu, entry
 * dcptopk_exchange_poison): launched after the last kernel that writes a
 * step's outputs. When this rank's sticky status word is set (an exchange or
 * rescue wait of this step or an earlier one gave up), it overwrites every
 * output of the step: ids -1 and physical rows -1 in the first topk columns
 * of every row, counts 0; it copies the status into `host` (host-mapped, so
 * the host reads it with no synchronisation), or traps when `trap` is set.
 * 80 bytes. */
typedef struct dc_poison_param {
    uint64_t status;     /* this rank's status words [4] uint32 (device):
                            code, then the code's three details              */
    uint64_t host;       /* [4] uint32, host-mapped (device address)         */
    uint64_t ids;        /* int32 [rows, ids_stride], or 0                    */
    uint64_t rows_out;   /* int32 [rows, rows_stride], or 0                   */
    uint64_t counts;     /* int32 [rows], or 0                                */
    uint64_t indptr;     /* int32 [rows + 1] (the counts' CSR offsets), or 0  */
    int64_t ids_stride;  /* int32 between rows (>= topk)                      */
    int64_t rows_stride;
    int64_t rows;        /* T of the step                                     */
    int32_t topk;        /* columns of ids and rows_out                       */
    int32_t trap;        /* 1: __trap() instead (DCPTOPK_PEER_TIMEOUT_TRAP)  */
} dc_poison_param;

DC_EXCHANGE_ASSERT(sizeof(dc_poison_param) == 80, "dc_poison_param layout");

/* Word offset of slot (parity p, rank s) from a gathered base. */
DC_EXCHANGE_FN int64_t dc_exchange_slot_words(int32_t p, int32_t s, int32_t world,
                                             int64_t max_rows, int32_t row_words)
{
    return ((int64_t)p * world + s) * max_rows * (int64_t)row_words;
}

/* Index of flag (parity p, rank s) in a [2][W] flag array. */
DC_EXCHANGE_FN int32_t dc_exchange_flag_index(int32_t p, int32_t s, int32_t world)
{
    return p * world + s;
}

#endif /* DC_EXCHANGE_ABI_H */
