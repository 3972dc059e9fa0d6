/* exchange_push.c - launcher of the device-side push exchange
 * (exchange_push.cu): argument checks, grid size, its compile key, and the
 * status words read back for group/. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "exchange_push.h"
#include "runtime.h"

/* The copy's grid: enough CTAs for DC_EXCHANGE_UNROLL 16-byte vectors per
 * thread, at most two per SM (the stores are bound by the links, not SMs). */
static uint32_t grid_size(const dcptopk_context *ctx, int64_t words)
{
    const int64_t per_cta = (int64_t)DC_EXCHANGE_THREADS * DC_EXCHANGE_UNROLL * 4;
    int64_t g = (words + per_cta - 1) / per_cta;
    int64_t sms = dc_ctx_sm_count(ctx);
    const int64_t cap = 2 * (sms > 0 ? sms : 1);
    if (g > cap)
        g = cap;
    return (uint32_t)(g < 1 ? 1 : g);
}

uint64_t dc_push_exchange_gathered_bytes(int32_t world_size, int64_t max_rows,
                                         int32_t row_words)
{
    return 2u * (uint64_t)world_size * (uint64_t)max_rows *
           (uint64_t)row_words * 4u;
}

uint64_t dc_push_exchange_flags_bytes(int32_t world_size)
{
    return 2u * (uint64_t)world_size * 8u;
}

uint64_t dc_push_exchange_parity(uint64_t gathered, uint64_t n,
                                 int32_t world_size, int64_t max_rows,
                                 int32_t row_words)
{
    return gathered + 4u * (uint64_t)dc_exchange_slot_words(
                               (int32_t)(n & 1u), 0, world_size, max_rows,
                               row_words);
}

void dc_push_exchange_key(int32_t world_size, const char *arch,
                          dcptopk_key *out)
{
    dc_key_init(out, DCPTOPK_KERNEL_EXCHANGE, arch && arch[0] ? arch : "sm_90a");
    out->world_size = world_size;
}

/* Row words up to this many: a row of 2 * 4096 pair words or a packed row
 * with room to spare; keeps every byte count far from overflow. */
#define DC_EXCHANGE_MAX_ROW_WORDS (1 << 20)

static dcptopk_result check(dcptopk_context *ctx, const dc_push_exchange *x)
{
    const int32_t w = x->world_size;
    if (w < 1 || w > DCPTOPK_MAX_WORLD_SIZE)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->world_size = %d: must be in 1..%d", w,
                       DCPTOPK_MAX_WORLD_SIZE);
    if (x->rank < 0 || x->rank >= w)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->rank = %d: must be in [0, world_size = %d)", x->rank,
                       w);
    if (x->max_rows < 1 || x->max_rows > INT32_MAX)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->max_rows = %lld: must be in 1..%d",
                       (long long)x->max_rows, INT32_MAX);
    if (x->rows < 0 || x->rows > x->max_rows)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->rows = %lld: must be in 0..max_rows = %lld",
                       (long long)x->rows, (long long)x->max_rows);
    if (x->row_words < 1 || x->row_words > DC_EXCHANGE_MAX_ROW_WORDS)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->row_words = %d: must be in 1..%d", x->row_words,
                       DC_EXCHANGE_MAX_ROW_WORDS);
    const uintptr_t src = (uintptr_t)x->src;
    if (x->rows > 0 && (src == 0 || src % 4))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->src = %p: must be a non-NULL, 4-byte aligned device "
                       "address",
                       (const void *)x->src);
    for (int32_t r = 0; r < w; r++) {
        if (x->peer_gathered[r] == 0 || x->peer_gathered[r] % 16)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "x->peer_gathered[%d] = 0x%llx: must be a non-NULL, "
                           "16-byte aligned device address",
                           r, (unsigned long long)x->peer_gathered[r]);
        if (x->peer_flags[r] == 0 || x->peer_flags[r] % 8)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "x->peer_flags[%d] = 0x%llx: must be a non-NULL, "
                           "8-byte aligned device address",
                           r, (unsigned long long)x->peer_flags[r]);
    }
    if (x->ctl == 0 || x->ctl % 16)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->ctl = 0x%llx: must be a non-NULL, 16-byte aligned "
                       "device address",
                       (unsigned long long)x->ctl);
    if (x->timeout_ns == 0)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "x->timeout_ns = 0: must be > 0");
    /* The kernel reads the source through the non-coherent path while it
     * stores into the gathered buffers: a source inside this rank's buffer
     * must be exactly one of its own slots (never a peer's slot, which a
     * peer may be storing into). */
    if (x->rows > 0) {
        const uint64_t own = x->peer_gathered[x->rank];
        const uint64_t end =
            own + dc_push_exchange_gathered_bytes(w, x->max_rows, x->row_words);
        const uint64_t s0 = (uint64_t)src;
        const uint64_t s1 = s0 + (uint64_t)x->rows * (uint64_t)x->row_words * 4u;
        const uint64_t slot0 =
            own + 4u * (uint64_t)dc_exchange_slot_words(0, x->rank, w,
                                                         x->max_rows,
                                                         x->row_words);
        const uint64_t slot1 =
            own + 4u * (uint64_t)dc_exchange_slot_words(1, x->rank, w,
                                                         x->max_rows,
                                                         x->row_words);
        if (s0 < end && own < s1 && s0 != slot0 && s0 != slot1)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "x->src = 0x%llx: overlaps this rank's gathered "
                           "buffer [0x%llx, 0x%llx) without being its own "
                           "slot (0x%llx or 0x%llx)",
                           (unsigned long long)s0, (unsigned long long)own,
                           (unsigned long long)end, (unsigned long long)slot0,
                           (unsigned long long)slot1);
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_push_exchange_launch(dcptopk_context *ctx,
                                       const dc_push_exchange *x, void *stream)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!x)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "x is NULL");
    dcptopk_result r = check(ctx, x);
    if (r)
        return r;
    dc_exchange_param prm;
    memset(&prm, 0, sizeof prm);
    for (int32_t i = 0; i < x->world_size; i++) {
        prm.peer_gathered[i] = x->peer_gathered[i];
        prm.peer_flags[i] = x->peer_flags[i];
    }
    prm.src = (uint64_t)(uintptr_t)x->src;
    prm.ctl = x->ctl;
    prm.rows = x->rows;
    prm.max_rows = x->max_rows;
    prm.timeout_ns = x->timeout_ns;
    prm.expect_seq = x->expect_seq;
    prm.row_words = x->row_words;
    prm.rank = x->rank;
    dcptopk_key key;
    dc_push_exchange_key(x->world_size, ctx->arch, &key);
    dc_launch_cfg cfg = {
        .grid = {grid_size(ctx, x->rows * (int64_t)x->row_words), 1, 1},
        .block = {DC_EXCHANGE_THREADS, 1, 1},
        .stream = stream};
    void *params[] = {&prm};
    return dc_launch(ctx, &key, "dcptopk_exchange_push", &cfg, params);
}

dcptopk_result dc_push_exchange_status(dcptopk_context *ctx, uint64_t ctl,
                                       int32_t rank, uint64_t timeout_ns,
                                       void *stream, uint32_t *code, char *msg,
                                       size_t msg_size)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!code)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "code is NULL");
    if (ctl == 0)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "ctl is 0");
    *code = 0;
    if (msg && msg_size)
        msg[0] = '\0';
    uint32_t st[4];
    dcptopk_result r = dc_stream_sync(ctx, stream);
    if (r || (r = dc_memcpy_dtoh(ctx, st, ctl + offsetof(dc_exchange_ctl, status),
                                 sizeof st)))
        return r;
    *code = st[0];
    if (!msg || !msg_size || st[0] == DC_EXCHANGE_STATUS_OK)
        return DCPTOPK_SUCCESS;
    if (st[0] == DC_EXCHANGE_STATUS_TIMEOUT)
        snprintf(msg, msg_size,
                 "rank %d: the push exchange of call %u waited more than %llu "
                 "ms for rank %u's rows (its flag read %u): that rank stopped "
                 "calling, died, or is slower than the bound; the group must "
                 "be rebuilt",
                 rank, st[2], (unsigned long long)(timeout_ns / 1000000u),
                 st[1], st[3]);
    else if (st[0] == DC_EXCHANGE_STATUS_PROTOCOL)
        snprintf(msg, msg_size,
                 "rank %d: the push exchange found rank %u out of step "
                 "(expected %u, found %u): a rank skipped or repeated a call, "
                 "a failed call was not followed by a rebuild, or the flags "
                 "were not zeroed before the first call; the group must be "
                 "rebuilt",
                 rank, st[1], st[2], st[3]);
    else if (st[0] == 10u) /* the rescue's, sharing the words in a group */
        snprintf(msg, msg_size,
                 "rank %d: the rescue of row %u waited more than %llu ms for "
                 "rank %u's push (flag value %u expected); the group must be "
                 "rebuilt",
                 rank, st[1], (unsigned long long)(timeout_ns / 1000000u),
                 st[2], st[3]);
    else
        snprintf(msg, msg_size, "rank %d: push exchange status word = %u",
                 rank, st[0]);
    return DCPTOPK_SUCCESS;
}

void dc_exchange_settle_key(int32_t world_size, const char *arch,
                            dcptopk_key *out)
{
    dc_key_init(out, DCPTOPK_KERNEL_EXCHANGE_SETTLE, arch && arch[0] ? arch : "sm_90a");
    out->world_size = world_size;
}

dcptopk_result dc_exchange_settle_launch(dcptopk_context *ctx,
                                         int32_t world_size, uint64_t ctl,
                                         uint64_t dst, int64_t rows,
                                         int64_t max_rows, int32_t row_words,
                                         void *stream)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (world_size < 1 || world_size > DCPTOPK_MAX_WORLD_SIZE)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "world_size = %d: must be in 1..%d", world_size,
                       DCPTOPK_MAX_WORLD_SIZE);
    if (ctl == 0 || ctl % 16)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "ctl = 0x%llx: must be a non-NULL, 16-byte aligned "
                       "device address",
                       (unsigned long long)ctl);
    if (dst == 0 || dst % 16)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "dst = 0x%llx: must be a non-NULL, 16-byte aligned "
                       "device address",
                       (unsigned long long)dst);
    if (max_rows < 1 || max_rows > INT32_MAX)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "max_rows = %lld: must be in 1..%d", (long long)max_rows,
                       INT32_MAX);
    if (rows < 0 || rows > max_rows)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be in 0..max_rows = %lld",
                       (long long)rows, (long long)max_rows);
    if (row_words < 1 || row_words > DC_EXCHANGE_MAX_ROW_WORDS)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "row_words = %d: must be in 1..%d", row_words,
                       DC_EXCHANGE_MAX_ROW_WORDS);
    dc_settle_param prm;
    memset(&prm, 0, sizeof prm);
    prm.ctl = ctl;
    prm.dst = dst;
    prm.rows = rows;
    prm.max_rows = max_rows;
    prm.row_words = row_words;
    dcptopk_key key;
    dc_exchange_settle_key(world_size, ctx->arch, &key);
    /* Same share per thread as the exchange's copy; a local copy, so the
     * SM cap of grid_size is kept (it leaves SMs to the other ranks). */
    dc_launch_cfg cfg = {
        .grid = {grid_size(ctx,
                           (int64_t)world_size * rows * (int64_t)row_words),
                 1, 1},
        .block = {DC_EXCHANGE_THREADS, 1, 1},
        .stream = stream};
    void *params[] = {&prm};
    return dc_launch(ctx, &key, "dcptopk_exchange_settle", &cfg, params);
}

dcptopk_result dc_exchange_poison_launch(dcptopk_context *ctx,
                                         int32_t world_size,
                                         const dc_poison_param *p,
                                         void *stream)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!p || !p->status || p->status % 4 || !p->host || p->host % 4)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "poison step without its status words");
    if (world_size < 1 || world_size > DCPTOPK_MAX_WORLD_SIZE || p->rows < 0 ||
        p->rows > INT32_MAX || p->topk < 1)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "poison step: world_size %d, rows %lld, topk %d",
                       world_size, (long long)p->rows, p->topk);
    dc_poison_param prm = *p;
    dcptopk_key key;
    dc_exchange_settle_key(world_size, ctx->arch, &key);
    /* A healthy step reads one word per CTA: few CTAs. A poisoned one
     * writes T x K words twice, which these still do in microseconds. */
    const uint32_t grid = (uint32_t)(p->rows < 32 ? (p->rows > 0 ? p->rows : 1)
                                                  : 32);
    dc_launch_cfg cfg = {.grid = {grid, 1, 1},
                         .block = {DC_EXCHANGE_THREADS, 1, 1},
                         .stream = stream,
                         .pdl = 1};
    void *params[] = {&prm};
    return dc_launch(ctx, &key, "dcptopk_exchange_poison", &cfg, params);
}
