/* bench_dist.c - what one GPU can say about the merge across ranks:
 *
 *  - the host cost of the one-call merge (dcptopk_group_merge) against the
 *    host cost of the same launches made through the lower-level calls
 *    (dcptopk_pack + dcptopk_select with a workspace of one's own): the
 *    difference is what the group layer adds per step. One-rank groups: the
 *    loopback path, and the NCCL path (one-rank ncclAllGather) when NCCL
 *    loads. Calls are issued back to back, the host clock around a batch;
 *    the device time of one call is beside it (CUDA events).
 *  - the device-side push exchange against plain device copies of the same
 *    rows (each rank's rows into its slot of every rank's gathered buffer,
 *    cuMemcpyDtoDAsync), W = 8 virtual ranks in one process, one stream
 *    each, T = 64 and 6710 packed rows (N = 384). All ranks share one GPU:
 *    the figure is eight ranks' stores at once, not one rank's latency on
 *    eight GPUs.
 *
 * Medians of 25 timed units after 5 warm-up units; inputs are never zeros.
 * Prints a table and one `JSON {...}` line per row (bench/tables.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "exchange_push.h"
#include "fixture.h"
#include "runtime.h"

#define WARMUP 5
#define ITERS 25
#define XW 8

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], bench_cmp_double);
    return v[n / 2];
}

static uint64_t alloc_random(dcptopk_context *ctx, size_t bytes)
{
    uint64_t d = 0;
    uint32_t *h = malloc(bytes);
    if (!h)
        DIE("host buffer");
    for (size_t i = 0; i < bytes / 4; i++)
        h[i] = (uint32_t)bench_rand(&rng_state);
    if (dc_mem_alloc(ctx, bytes, &d) || dc_memcpy_htod(ctx, d, h, bytes))
        DIE("device buffer");
    free(h);
    return d;
}

/* bf16 logits of normal-ish scores (never zeros), row ends at the length. */
static void fill_logits(dcptopk_context *ctx, uint64_t lg, uint64_t ends,
                        int64_t T, int64_t len)
{
    uint16_t *h = malloc((size_t)T * (size_t)len * 2);
    int32_t *e = malloc((size_t)T * 4);
    if (!h || !e)
        DIE("host logits");
    for (int64_t i = 0; i < T * len; i++)
        h[i] = bench_normal_bf16(&rng_state);
    for (int64_t t = 0; t < T; t++)
        e[t] = (int32_t)len;
    if (dc_memcpy_htod(ctx, lg, h, (size_t)T * (size_t)len * 2) ||
        dc_memcpy_htod(ctx, ends, e, (size_t)T * 4))
        DIE("logits upload");
    free(h);
    free(e);
}

/* --------------------------------------------------- host per one call */

typedef struct host_case {
    bench_gpu g;
    dcptopk_merge_config c;
    dcptopk_group_workspace *gw;
    dcptopk_group_merge_args ga;
    dcptopk_workspace *ws;      /* the lower-level calls' own workspace */
    dcptopk_pack_args pa;
    dcptopk_select_args sa;
} host_case;

static dcptopk_result call_group(host_case *h)
{
    return dcptopk_group_merge(h->gw, &h->ga);
}

static dcptopk_result call_lower(host_case *h)
{
    dcptopk_result r = dcptopk_pack(h->g.ctx, &h->c, &h->pa);
    return r ? r : dcptopk_select(h->g.ctx, &h->c, h->ws, &h->sa);
}

/* Host time per call of `batch` calls issued back to back (the device runs
 * behind; a batch stays far below the launch queue's depth), median over
 * ITERS batches. */
static double host_per_call(host_case *h, dcptopk_result (*fn)(host_case *),
                            int batch)
{
    dcptopk_context *ctx = h->g.ctx;
    double v[ITERS];
    for (int i = 0; i < WARMUP + ITERS; i++) {
        if (dc_stream_sync(ctx, h->g.stream))
            DIE("sync");
        double t0 = bench_now_us();
        for (int j = 0; j < batch; j++)
            if (fn(h))
                DIE("call");
        double t1 = bench_now_us();
        if (i >= WARMUP)
            v[i - WARMUP] = (t1 - t0) / batch;
    }
    if (dc_stream_sync(ctx, h->g.stream))
        DIE("sync");
    return median(v, ITERS);
}

static dcptopk_result group_call(void *user, int iter)
{
    (void)iter;
    return call_group(user);
}

/* Device time of one group merge call (CUDA events), median. */
static double device_per_call(host_case *h)
{
    double v[ITERS];
    bench_time_calls(&h->g, group_call, h, NULL, NULL, WARMUP, ITERS, v);
    return v[ITERS / 2];
}

/* Host time of one replay of a graph holding one group merge call. */
static double replay_host(host_case *h)
{
    dcptopk_context *ctx = h->g.ctx;
    void *exec = NULL;
    double v[ITERS];
    if (dc_graph_begin(ctx, h->g.stream) || call_group(h) ||
        dc_graph_end(ctx, h->g.stream, &exec))
        DIE("capture");
    for (int i = 0; i < WARMUP + ITERS; i++) {
        if (dc_stream_sync(ctx, h->g.stream))
            DIE("sync");
        double t0 = bench_now_us();
        if (dc_graph_launch(ctx, exec, h->g.stream))
            DIE("replay");
        double t1 = bench_now_us();
        if (i >= WARMUP)
            v[i - WARMUP] = t1 - t0;
    }
    if (dc_stream_sync(ctx, h->g.stream))
        DIE("sync");
    dc_graph_destroy(ctx, exec);
    return median(v, ITERS);
}

static void bench_host(const bench_gpu *gpu, const char *how, int64_t T,
                       int64_t len)
{
    dcptopk_context *ctx = gpu->ctx;
    void *stream = gpu->stream;
    host_case h;
    memset(&h, 0, sizeof h);
    h.g = *gpu;
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = 2048;
    c.local_topk = 384;
    c.world_size = 1;
    c.exact = 1;
    h.c = c;

    dcptopk_group_config gc = DCPTOPK_GROUP_CONFIG_INIT;
    gc.rank = 0;
    gc.world_size = 1;
    uint8_t uid[DCPTOPK_GROUP_UNIQUE_ID_BYTES];
    if (strcmp(how, "nccl") == 0) {
        if (dcptopk_group_unique_id(uid)) {
            printf("one-call merge, nccl: skipped (%s)\n",
                   dcptopk_last_error(NULL));
            return;
        }
        gc.unique_id = uid;
        /* One rank alone would take the loopback path. */
        gc.path = DCPTOPK_PATH_NCCL;
    }
    dcptopk_group *g = NULL;
    if (dcptopk_group_create(ctx, &gc, &g) ||
        dcptopk_group_workspace_create(g, &c, T, &h.gw) ||
        dcptopk_group_warmup(h.gw, NULL, NULL, NULL))
        DIE("group (%s)", how);
    int32_t path = 0;
    if (dcptopk_group_path(g, &path, NULL, 0))
        DIE("path");

    uint64_t lg = 0, ends = 0, ids = 0, packed = 0, recv = 0, flags = 0;
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    if (dc_mem_alloc(ctx, (size_t)T * (size_t)len * 2, &lg) ||
        dc_mem_alloc(ctx, (size_t)T * 4, &ends) ||
        dc_mem_alloc(ctx, (size_t)T * 2048 * 4, &ids) ||
        dc_mem_alloc(ctx, (size_t)T * (size_t)dcptopk_packed_row_words(384) * 4,
                     &packed) ||
        dcptopk_workspace_layout_get(&c, T, &lay) ||
        dc_mem_alloc(ctx, lay.recv_bytes, &recv) ||
        dc_mem_alloc(ctx, lay.flags_bytes, &flags) ||
        dc_memset_async(ctx, flags, 0, lay.flags_bytes, NULL))
        DIE("buffers");
    fill_logits(ctx, lg, ends, T, len);
    if (dcptopk_workspace_create(ctx, &c, T, 0, &recv, &flags, &h.ws))
        DIE("workspace");

    dcptopk_group_merge_args ga = DCPTOPK_GROUP_MERGE_ARGS_INIT;
    ga.rows = T;
    ga.logits = (const uint16_t *)(uintptr_t)lg;
    ga.logits_stride = len;
    ga.max_local_len = len;
    ga.row_ends = (const int32_t *)(uintptr_t)ends;
    ga.ids_out = (int32_t *)(uintptr_t)ids;
    ga.stream = stream;
    h.ga = ga;
    dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
    pa.logits = ga.logits;
    pa.logits_stride = len;
    pa.max_local_len = len;
    pa.row_ends = ga.row_ends;
    pa.rows = T;
    pa.out = (int32_t *)(uintptr_t)packed;
    pa.stream = stream;
    h.pa = pa;
    dcptopk_select_args sa = DCPTOPK_SELECT_ARGS_INIT;
    sa.gathered = (const int32_t *)(uintptr_t)packed;
    sa.rank_stride_rows = T;
    sa.rows = T;
    sa.rank = 0;
    sa.ids_out = ga.ids_out;
    sa.logits = ga.logits;
    sa.logits_stride = len;
    sa.max_local_len = len;
    sa.row_ends = ga.row_ends;
    sa.stream = stream;
    h.sa = sa;

    const int batch = 20;
    const double host = host_per_call(&h, call_group, batch);
    const double lower = host_per_call(&h, call_lower, batch);
    const double dev = device_per_call(&h);
    const double replay = path == DCPTOPK_PATH_LOOPBACK || path == DCPTOPK_PATH_NCCL
                              ? replay_host(&h) : -1;
    if (dcptopk_group_check(g, stream))
        DIE("group check");
    char shape[96];
    snprintf(shape, sizeof shape, "W=1 K=2048 N=384 T=%lld len=%lld",
             (long long)T, (long long)len);
    printf("one-call merge, %-8s %-34s host %6.1f us, lower-level calls %6.1f us, "
           "beyond %5.1f us, device %7.1f us, graph replay host %5.1f us\n",
           dcptopk_path_name(path), shape, host, lower, host - lower, dev, replay);
    printf("JSON {\"bench\": \"dist_host\", \"path\": \"%s\", \"shape\": \"%s\", "
           "\"host_us\": %.2f, \"lower_us\": %.2f, \"beyond_us\": %.2f, "
           "\"device_us\": %.2f, \"replay_host_us\": %.2f}\n",
           dcptopk_path_name(path), shape, host, lower, host - lower, dev, replay);
    fflush(stdout);

    dcptopk_workspace_destroy(h.ws);
    dcptopk_group_workspace_destroy(h.gw);
    dcptopk_group_destroy(g);
    dc_mem_free(ctx, lg);
    dc_mem_free(ctx, ends);
    dc_mem_free(ctx, ids);
    dc_mem_free(ctx, packed);
    dc_mem_free(ctx, recv);
    dc_mem_free(ctx, flags);
}

/* ------------------------------------------------ push against copies */

typedef struct xw {
    dcptopk_context *ctx;
    int64_t rows;
    int32_t row_words;
    uint64_t gathered[XW], flags[XW], ctl[XW], src[XW];
    void *stream[XW];
    void *e0[XW], *e1[XW];
    uint64_t seq;
} xw;

/* Span of one unit over the ranks' streams: first start to last end. */
static double span_us(xw *k)
{
    dcptopk_context *ctx = k->ctx;
    float lo = 0, hi = 0;
    for (int r = 0; r < XW; r++) {
        float a = 0, b = 0;
        if (dc_stream_sync(ctx, k->stream[r]) ||
            dc_event_elapsed_ms(ctx, k->e0[0], k->e0[r], &a) ||
            dc_event_elapsed_ms(ctx, k->e0[0], k->e1[r], &b))
            DIE("span");
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    return 1000.0 * (double)(hi - lo);
}

static void push_unit(xw *k)
{
    dcptopk_context *ctx = k->ctx;
    k->seq++;
    for (int r = 0; r < XW; r++)
        if (dc_event_record(ctx, k->e0[r], k->stream[r]))
            DIE("event");
    for (int r = 0; r < XW; r++) {
        dc_push_exchange x;
        memset(&x, 0, sizeof x);
        x.world_size = XW;
        x.rank = r;
        x.rows = k->rows;
        x.max_rows = k->rows;
        x.row_words = k->row_words;
        x.src = (const int32_t *)(uintptr_t)k->src[r];
        for (int p = 0; p < XW; p++) {
            x.peer_gathered[p] = k->gathered[p];
            x.peer_flags[p] = k->flags[p];
        }
        x.ctl = k->ctl[r];
        x.expect_seq = k->seq;
        x.timeout_ns = 10000000000ull; /* eight ranks share one GPU */
        if (dc_push_exchange_launch(ctx, &x, k->stream[r]))
            DIE("push, rank %d", r);
    }
    for (int r = 0; r < XW; r++)
        if (dc_event_record(ctx, k->e1[r], k->stream[r]))
            DIE("event");
}

static void copy_unit(xw *k)
{
    dcptopk_context *ctx = k->ctx;
    const size_t bytes = (size_t)k->rows * (size_t)k->row_words * 4u;
    k->seq++;
    for (int r = 0; r < XW; r++)
        if (dc_event_record(ctx, k->e0[r], k->stream[r]))
            DIE("event");
    for (int r = 0; r < XW; r++)
        for (int p = 0; p < XW; p++) {
            uint64_t dst = dc_push_exchange_parity(k->gathered[p], k->seq, XW,
                                                   k->rows, k->row_words) +
                           (uint64_t)r * bytes;
            if (dc_memcpy_dtod_async(ctx, dst, k->src[r], bytes, k->stream[r]))
                DIE("copy");
        }
    for (int r = 0; r < XW; r++)
        if (dc_event_record(ctx, k->e1[r], k->stream[r]))
            DIE("event");
}

static double time_units(xw *k, void (*unit)(xw *))
{
    double v[ITERS];
    for (int i = 0; i < WARMUP + ITERS; i++) {
        unit(k);
        double us = span_us(k);
        if (i >= WARMUP)
            v[i - WARMUP] = us;
    }
    return median(v, ITERS);
}

static void bench_exchange(dcptopk_context *ctx, int64_t T)
{
    xw k;
    memset(&k, 0, sizeof k);
    k.ctx = ctx;
    k.rows = T;
    k.row_words = dcptopk_packed_row_words(384);
    const size_t rows_bytes = (size_t)T * (size_t)k.row_words * 4u;
    const uint64_t gbytes = dc_push_exchange_gathered_bytes(XW, T, k.row_words);
    const uint64_t fbytes = dc_push_exchange_flags_bytes(XW);
    for (int r = 0; r < XW; r++) {
        if (dc_mem_alloc(ctx, gbytes, &k.gathered[r]) ||
            dc_mem_alloc(ctx, fbytes, &k.flags[r]) ||
            dc_mem_alloc(ctx, sizeof(dc_exchange_ctl), &k.ctl[r]) ||
            dc_memset_async(ctx, k.flags[r], 0, fbytes, NULL) ||
            dc_memset_async(ctx, k.ctl[r], 0, sizeof(dc_exchange_ctl), NULL) ||
            dc_stream_create(ctx, &k.stream[r]) ||
            dc_event_create(ctx, &k.e0[r]) || dc_event_create(ctx, &k.e1[r]))
            DIE("exchange buffers");
        k.src[r] = alloc_random(ctx, rows_bytes);
    }
    if (dc_stream_sync(ctx, NULL))
        DIE("sync");
    dcptopk_key key;
    dc_push_exchange_key(XW, dcptopk_context_arch(ctx), &key);
    /* Loaded before any rank spins: a load would hold the others back. */
    if (dcptopk_warmup_keys(ctx, &key, 1, NULL, NULL, NULL))
        DIE("push key");
    const double push = time_units(&k, push_unit);
    uint32_t code = 0;
    for (int r = 0; r < XW; r++)
        if (dc_push_exchange_status(ctx, k.ctl[r], r, 10000000000ull,
                                    k.stream[r], &code, NULL, 0) ||
            code)
            DIE("push status, rank %d (code %u)", r, code);
    const double copy = time_units(&k, copy_unit);
    /* Every rank's rows land in every rank's buffer: W * W row blocks. */
    const double moved = (double)XW * XW * (double)rows_bytes;
    char shape[96];
    snprintf(shape, sizeof shape, "W=8 N=384 T=%lld", (long long)T);
    printf("exchange on 1 GPU, %-24s push %8.1f us (%5.0f GB/s), copies %8.1f us "
           "(%5.0f GB/s)\n",
           shape, push, moved / push / 1e3, copy, moved / copy / 1e3);
    printf("JSON {\"bench\": \"dist_exchange\", \"shape\": \"%s\", \"push_us\": %.2f, "
           "\"copy_us\": %.2f, \"bytes\": %.0f}\n",
           shape, push, copy, moved);
    fflush(stdout);
    for (int r = 0; r < XW; r++) {
        dc_event_destroy(ctx, k.e0[r]);
        dc_event_destroy(ctx, k.e1[r]);
        dc_stream_destroy(ctx, k.stream[r]);
        dc_mem_free(ctx, k.gathered[r]);
        dc_mem_free(ctx, k.flags[r]);
        dc_mem_free(ctx, k.ctl[r]);
        dc_mem_free(ctx, k.src[r]);
    }
}

int main(void)
{
    bench_gpu g;
    if (!bench_gpu_open(&g, NULL, "no CUDA device: nothing to measure"))
        return 0;
    bench_host(&g, "loopback", 64, 16384);
    bench_host(&g, "nccl", 64, 16384);
    bench_exchange(g.ctx, 64);
    bench_exchange(g.ctx, 6710);
    bench_gpu_close(&g);
    return 0;
}
