/* exchange_push.h - the device-side push exchange (kernels/exchange/): the
 * launcher of exchange_push.cu, its buffer geometry and its status words, for
 * group/exchange.c. The protocol and why it is safe: docs/PROTOCOL.md.
 *
 * Memory a group sets up once per rank r, before its first call (outside
 * graph capture), then a group barrier:
 *   gathered  [2][W][max_rows][row_words] int32, 16-byte aligned, mapped in
 *             every peer (peer_gathered[r] is its address as mapped there)
 *   flags     [2][W] uint64, zeroed, mapped in every peer
 *   ctl       one dc_exchange_ctl (exchange_abi.h), zeroed, this rank only
 * All flags and ctl blocks of the group must be zero before any rank's first
 * call (hence the barrier); rebuilding a group zeroes them again. */
#ifndef DC_EXCHANGE_PUSH_H
#define DC_EXCHANGE_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "exchange_abi.h"
#include "base.h"

typedef struct dc_push_exchange {
    int32_t world_size, rank;
    int64_t rows;            /* T of this call, 0..max_rows, equal on every rank */
    int64_t max_rows;        /* T_max: rank stride of a gathered parity        */
    int32_t row_words;       /* int32 words per row (packed: N + N/32; pair: 2K) */
    const int32_t *src;      /* this rank's rows [rows, row_words] (device); may
                                be this rank's own slot of either parity, must
                                not overlap the gathered buffer otherwise       */
    uint64_t peer_gathered[DCPTOPK_MAX_WORLD_SIZE]; /* see above                */
    uint64_t peer_flags[DCPTOPK_MAX_WORLD_SIZE];    /* see above                */
    uint64_t ctl;            /* this rank's dc_exchange_ctl (device address)    */
    uint64_t expect_seq;     /* 0, or the call number the host counts for this
                                launch (1, 2, ...): checked on the device       */
    uint64_t timeout_ns;     /* bounded wait (%globaltimer), > 0               */
} dc_push_exchange;

/* Launches call n = ctl->seq + 1 on `stream` (ctl->seq lives in device
 * memory and the kernel advances it, so the launch is CUDA-graph capturable
 * and each replay is the next call). It stores src into slot (n % 2, rank)
 * of every rank's gathered buffer, releases flag (n % 2, rank) = n on every
 * rank, and waits until this rank's flags (n % 2, s) == n for every s. When
 * the launch completes without a status, this rank's gathered parity n % 2
 * (device address: ctl->current, also dc_push_exchange_parity) holds every
 * rank's rows of call n, rank-major [W, max_rows, row_words], for the kernels
 * stream-ordered after it, until this rank's launch of call n + 1 returns
 * (peers store call n + 2 into that parity only after it).
 * Failures are device-side and sticky (ctl->status, read with
 * dc_push_exchange_status); a launch that finds the status set stores and
 * releases nothing. A failed launch zeroes this rank's own slot of its
 * parity in its own buffer, so a packed select that follows finds this rank
 * unsaturated and its push stores nothing into peers (docs/PROTOCOL.md). Host-side errors: DCPTOPK_INVALID_ARGUMENT naming the
 * field, or the launch's. */
DC_HIDDEN dcptopk_result dc_push_exchange_launch(dcptopk_context *ctx,
                                                 const dc_push_exchange *x,
                                                 void *stream);

/* Bytes of one rank's gathered buffer (both parities) and flag words. */
DC_HIDDEN uint64_t dc_push_exchange_gathered_bytes(int32_t world_size,
                                                   int64_t max_rows,
                                                   int32_t row_words);
DC_HIDDEN uint64_t dc_push_exchange_flags_bytes(int32_t world_size);

/* Device address of parity n % 2 of the gathered buffer at `gathered`: where
 * call n's rows are, for a host that counts calls. */
DC_HIDDEN uint64_t dc_push_exchange_parity(uint64_t gathered, uint64_t n,
                                           int32_t world_size,
                                           int64_t max_rows,
                                           int32_t row_words);

/* The compile key of the exchange of `world_size` ranks for `arch` (NULL:
 * sm_90a): the one key a group's warmup adds. */
DC_HIDDEN void dc_push_exchange_key(int32_t world_size, const char *arch,
                                    dcptopk_key *out);

/* Reads this rank's status words after synchronising `stream`: *code = 0
 * when every launch so far succeeded, else DC_EXCHANGE_STATUS_* (15 timeout,
 * 16 protocol), and `msg` (may be NULL) describes it for `rank` and the
 * bound. It clears nothing: the ranks' flags are out of step after a
 * failure, so the group must be rebuilt (zeroing every flag and ctl). */
DC_HIDDEN dcptopk_result dc_push_exchange_status(dcptopk_context *ctx,
                                                 uint64_t ctl, int32_t rank,
                                                 uint64_t timeout_ns,
                                                 void *stream, uint32_t *code,
                                                 char *msg, size_t msg_size);

/* The settle step of a captured push exchange (exchange_settle.cu):
 * launched on `stream` after dc_push_exchange_launch, copies the rows
 * [W][rows][row_words] (rank stride max_rows) of the parity at ctl->current,
 * read on the device, into `dst` ([W][max_rows][row_words] int32, 16-byte
 * aligned, this rank's memory). Under CUDA graph capture the kernels after
 * it read `dst`, an address that is the same on every replay. */
DC_HIDDEN dcptopk_result dc_exchange_settle_launch(dcptopk_context *ctx,
                                                   int32_t world_size,
                                                   uint64_t ctl, uint64_t dst,
                                                   int64_t rows,
                                                   int64_t max_rows,
                                                   int32_t row_words,
                                                   void *stream);
/* The poison step (dc_poison_param, exchange_abi.h) on `stream`, after the
 * step's last kernel; in the settle kernel's module (same key: warmup loads
 * both). status: the sticky status words; host: their host-mapped copy. */
DC_HIDDEN dcptopk_result dc_exchange_poison_launch(dcptopk_context *ctx,
                                                   int32_t world_size,
                                                   const dc_poison_param *p,
                                                   void *stream);
DC_HIDDEN void dc_exchange_settle_key(int32_t world_size, const char *arch,
                                      dcptopk_key *out);

#endif /* DC_EXCHANGE_PUSH_H */
