/* test_exchange.c - the device-side push exchange (kernels/exchange/) with W
 * virtual ranks in one process on one GPU: plain device buffers, the peer
 * addresses are same-GPU pointers, one stream per rank, all ranks launched
 * before any is waited for. Every call, every rank's gathered parity is
 * compared word for word with the concatenation of all ranks' source rows.
 * Also: a rank that never launches (the others report a timeout within the
 * bound, then stay failed without waiting again), the protocol check (a
 * sequence or flag out of step stores nothing), and CUDA graph capture and
 * replay (the call number advances on the device).
 *
 * Needs one GPU; skips without one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exchange_push.h"
#include "gpu_util.h"
#include "harness.h"

#define XW_MAX 8

/* W ranks' buffers on one GPU. */
typedef struct xw {
    dcptopk_context *ctx;
    int32_t w, row_words;
    int64_t max_rows;
    uint64_t gathered[XW_MAX], flags[XW_MAX], ctl[XW_MAX], src[XW_MAX];
    void *stream[XW_MAX];
    int32_t *src_h[XW_MAX]; /* this call's rows of each rank           */
    int32_t *got_h;         /* one rank's gathered parity, downloaded  */
    uint64_t timeout_ns;
    uint64_t rng;
} xw;

static void xw_free(xw *k)
{
    for (int r = 0; r < XW_MAX; r++) {
        if (k->stream[r])
            dc_stream_destroy(k->ctx, k->stream[r]);
        gpu_free(k->ctx, k->gathered[r]);
        gpu_free(k->ctx, k->flags[r]);
        gpu_free(k->ctx, k->ctl[r]);
        gpu_free(k->ctx, k->src[r]);
        free(k->src_h[r]);
    }
    free(k->got_h);
    memset(k, 0, sizeof *k);
}

static uint64_t parity_bytes(const xw *k)
{
    return (uint64_t)k->w * (uint64_t)k->max_rows * (uint64_t)k->row_words * 4u;
}

/* Zeroed buffers of every rank (the state a group creates), the key loaded. */
static int xw_init(xw *k, dcptopk_context *ctx, int32_t w, int64_t max_rows,
                   int32_t row_words, uint64_t seed)
{
    memset(k, 0, sizeof *k);
    k->ctx = ctx;
    k->w = w;
    k->max_rows = max_rows;
    k->row_words = row_words;
    k->timeout_ns = 5000000000ull; /* 5 s: ranks share one GPU */
    k->rng = seed;
    const size_t rows_bytes = (size_t)max_rows * (size_t)row_words * 4u;
    for (int32_t r = 0; r < w; r++) {
        k->gathered[r] = gpu_alloc(ctx, dc_push_exchange_gathered_bytes(w, max_rows, row_words));
        k->flags[r] = gpu_alloc(ctx, dc_push_exchange_flags_bytes(w));
        k->ctl[r] = gpu_alloc(ctx, sizeof(dc_exchange_ctl));
        /* 16 spare bytes: a misaligned source for the 4-byte path. */
        k->src[r] = gpu_alloc(ctx, rows_bytes + 16);
        k->src_h[r] = malloc(rows_bytes + 16);
        if (!k->gathered[r] || !k->flags[r] || !k->ctl[r] || !k->src[r] ||
            !k->src_h[r] || dc_stream_create(ctx, &k->stream[r]))
            return -1;
    }
    k->got_h = malloc(parity_bytes(k));
    if (!k->got_h)
        return -1;
    dcptopk_key key;
    dc_push_exchange_key(w, dcptopk_context_arch(ctx), &key);
    /* Load the module before any rank launches: a module load while a rank
     * spins would hold the others back. */
    if (dcptopk_warmup_keys(ctx, &key, 1, NULL, NULL, NULL)) {
        fprintf(stderr, "warmup: %s\n", dcptopk_last_error(ctx));
        return -1;
    }
    return 0;
}

static dc_push_exchange xw_args(const xw *k, int32_t rank, int64_t rows,
                                uint64_t src, uint64_t expect_seq)
{
    dc_push_exchange x;
    memset(&x, 0, sizeof x);
    x.world_size = k->w;
    x.rank = rank;
    x.rows = rows;
    x.max_rows = k->max_rows;
    x.row_words = k->row_words;
    x.src = (const int32_t *)(uintptr_t)src;
    for (int32_t r = 0; r < k->w; r++) {
        x.peer_gathered[r] = k->gathered[r];
        x.peer_flags[r] = k->flags[r];
    }
    x.ctl = k->ctl[rank];
    x.expect_seq = expect_seq;
    x.timeout_ns = k->timeout_ns;
    return x;
}

static int xw_sync(xw *k)
{
    for (int32_t r = 0; r < k->w; r++)
        if (dc_stream_sync(k->ctx, k->stream[r])) {
            fprintf(stderr, "sync rank %d: %s\n", r, dcptopk_last_error(k->ctx));
            return -1;
        }
    return 0;
}

static int read_ctl(xw *k, int32_t r, dc_exchange_ctl *c)
{
    return gpu_download(k->ctx, c, k->ctl[r], sizeof *c);
}

/* Fills every rank's rows of call n with fresh random words. `mode` per rank:
 * 0 = its source buffer (16-byte aligned), 1 = its source buffer + 4 bytes
 * (the 4-byte path), 2 = its own slot of parity n % 2 (written in place).
 * Sets src[r] to the address each rank passes. */
static int xw_fill(xw *k, uint64_t n, int64_t rows, const int *mode, uint64_t *src)
{
    const size_t bytes = (size_t)rows * (size_t)k->row_words * 4u;
    for (int32_t r = 0; r < k->w; r++) {
        for (size_t i = 0; i < bytes / 4; i++)
            k->src_h[r][i] = (int32_t)test_rand(&k->rng);
        if (mode[r] == 2)
            src[r] = k->gathered[r] +
                     4u * (uint64_t)dc_exchange_slot_words((int32_t)(n & 1u), r, k->w,
                                                            k->max_rows, k->row_words);
        else
            src[r] = k->src[r] + (mode[r] == 1 ? 4u : 0u);
        if (bytes && dc_memcpy_htod(k->ctx, src[r], k->src_h[r], bytes)) {
            fprintf(stderr, "upload: %s\n", dcptopk_last_error(k->ctx));
            return -1;
        }
    }
    return 0;
}

/* Every rank's parity n % 2 against the concatenation of the sources, its
 * status 0, ctl->seq == n and ctl->current at that parity. */
static int xw_compare(xw *k, uint64_t n, int64_t rows, const char *what)
{
    const size_t words = (size_t)rows * (size_t)k->row_words;
    for (int32_t r = 0; r < k->w; r++) {
        dc_exchange_ctl c;
        if (read_ctl(k, r, &c))
            return -1;
        const uint64_t par = dc_push_exchange_parity(k->gathered[r], n, k->w,
                                                     k->max_rows, k->row_words);
        if (c.status[0] || c.seq != n || c.current != par) {
            fprintf(stderr,
                    "%s: call %llu rank %d: status %u (peer %u, expected %u, "
                    "seen %u), seq %llu, current 0x%llx (want 0x%llx)\n",
                    what, (unsigned long long)n, r, c.status[0], c.status[1],
                    c.status[2], c.status[3], (unsigned long long)c.seq,
                    (unsigned long long)c.current, (unsigned long long)par);
            return -1;
        }
        if (gpu_download(k->ctx, k->got_h, par, parity_bytes(k)))
            return -1;
        for (int32_t s = 0; s < k->w; s++) {
            const int32_t *got = k->got_h + (size_t)s * (size_t)k->max_rows *
                                                (size_t)k->row_words;
            for (size_t i = 0; i < words; i++)
                if (got[i] != k->src_h[s][i]) {
                    fprintf(stderr,
                            "%s: call %llu: rank %d's slot of rank %d, word "
                            "%zu (row %zu): 0x%08x, expected 0x%08x\n",
                            what, (unsigned long long)n, r, s, i,
                            i / (size_t)k->row_words, (unsigned)got[i],
                            (unsigned)k->src_h[s][i]);
                    return -1;
                }
        }
    }
    return 0;
}

/* `calls` consecutive calls of every rank, random rows each call (sometimes
 * none, sometimes all), random source modes, compared after each call. */
static void run_calls(int32_t w, int64_t max_rows, int32_t row_words, int calls,
                      uint64_t seed)
{
    GPU_CTX(ctx);
    xw k;
    CHECK(xw_init(&k, ctx, w, max_rows, row_words, seed) == 0);
    for (uint64_t n = 1; n <= (uint64_t)calls && !dc_test_failed; n++) {
        int64_t rows = (int64_t)(test_rand(&k.rng) % (uint64_t)(max_rows + 1));
        if (n % 17 == 0)
            rows = max_rows;
        int mode[XW_MAX];
        uint64_t src[XW_MAX];
        for (int32_t r = 0; r < w; r++)
            mode[r] = (int)(test_rand(&k.rng) % 3);
        CHECK(xw_fill(&k, n, rows, mode, src) == 0);
        /* Every rank launches before any is waited for (stream order only). */
        for (int32_t r = 0; r < w; r++) {
            dc_push_exchange x = xw_args(&k, r, rows, src[r], n);
            CHECK_OK(dc_push_exchange_launch(ctx, &x, k.stream[r]));
        }
        CHECK(xw_sync(&k) == 0);
        CHECK_MSG(xw_compare(&k, n, rows, "calls") == 0, "W = %d, call %llu, rows %lld",
                  w, (unsigned long long)n, (long long)rows);
    }
    xw_free(&k);
    dcptopk_context_destroy(ctx);
}

/* Packed rows of N = 384 (396 words: 16-byte vectors), 200 calls. */
TEST(w2_packed_200_calls) { run_calls(2, 64, 396, 200, 11); }
TEST(w3_packed_200_calls) { run_calls(3, 64, 396, 200, 12); }
TEST(w4_packed_200_calls) { run_calls(4, 64, 396, 200, 13); }
TEST(w8_packed_200_calls) { run_calls(8, 64, 396, 200, 14); }
/* Packed rows of N = 96 (99 words: slots misaligned from row to row). */
TEST(w3_odd_rows_200_calls) { run_calls(3, 37, 99, 200, 15); }
/* Pair rows of K = 2048 (4096 words), larger T. */
TEST(w4_pair_rows_200_calls) { run_calls(4, 128, 4096, 200, 16); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank 2 of 3 never launches: ranks 0 and 1 return within the bound with
 * DC_EXCHANGE_STATUS_TIMEOUT naming rank 2; their next call stores, releases
 * and waits for nothing (the status is sticky), so it returns at once. */
TEST(missing_rank_times_out)
{
    GPU_CTX(ctx);
    xw k;
    CHECK(xw_init(&k, ctx, 3, 16, 396, 21) == 0);
    k.timeout_ns = 200000000ull; /* 200 ms */
    const int mode[XW_MAX] = {0};
    uint64_t src[XW_MAX];
    /* One good call first. */
    CHECK(xw_fill(&k, 1, 16, mode, src) == 0);
    for (int32_t r = 0; r < 3; r++) {
        dc_push_exchange x = xw_args(&k, r, 16, src[r], 1);
        CHECK_OK(dc_push_exchange_launch(ctx, &x, k.stream[r]));
    }
    CHECK(xw_sync(&k) == 0);
    CHECK(xw_compare(&k, 1, 16, "first call") == 0);
    /* Call 2 without rank 2. */
    const double t0 = now_s();
    for (int32_t r = 0; r < 2; r++) {
        dc_push_exchange x = xw_args(&k, r, 16, src[r], 2);
        CHECK_OK(dc_push_exchange_launch(ctx, &x, k.stream[r]));
    }
    CHECK(xw_sync(&k) == 0);
    const double waited = now_s() - t0;
    CHECK_MSG(waited >= 0.2 && waited < 3.0, "waited %.3f s for a 0.2 s bound", waited);
    for (int32_t r = 0; r < 2; r++) {
        uint32_t code = 0;
        char msg[512];
        CHECK_OK(dc_push_exchange_status(ctx, k.ctl[r], r, k.timeout_ns, k.stream[r], &code,
                                         msg, sizeof msg));
        CHECK_EQ(code, DC_EXCHANGE_STATUS_TIMEOUT);
        CHECK_CONTAINS(msg, "rank 2's rows");
        dc_exchange_ctl c;
        CHECK(read_ctl(&k, r, &c) == 0);
        CHECK_EQ(c.status[1], 2);
        CHECK_EQ(c.status[2], 2);
        CHECK_EQ(c.seq, 2);
        /* Its own slot of parity 0 in its own buffer is emptied: its
         * select would find it unsaturated, so it pushes nothing. */
        int32_t own[16 * 396];
        CHECK(gpu_download(ctx, own, k.gathered[r] + 4u * (uint64_t)dc_exchange_slot_words(
                                                          0, r, 3, 16, 396),
                           sizeof own) == 0);
        int nonzero = 0;
        for (size_t i = 0; i < sizeof own / 4; i++)
            nonzero |= own[i] != 0;
        CHECK_EQ(nonzero, 0);
    }
    /* Call 3 of ranks 0 and 1: sticky, no wait. */
    const double t1 = now_s();
    for (int32_t r = 0; r < 2; r++) {
        dc_push_exchange x = xw_args(&k, r, 16, src[r], 3);
        CHECK_OK(dc_push_exchange_launch(ctx, &x, k.stream[r]));
    }
    CHECK(xw_sync(&k) == 0);
    CHECK_MSG(now_s() - t1 < 0.15, "a failed rank waited again (%.3f s)", now_s() - t1);
    for (int32_t r = 0; r < 2; r++) {
        dc_exchange_ctl c;
        CHECK(read_ctl(&k, r, &c) == 0);
        CHECK_EQ(c.status[0], DC_EXCHANGE_STATUS_TIMEOUT);
        CHECK_EQ(c.status[2], 2); /* the first failure is kept */
        CHECK_EQ(c.seq, 3);
    }
    /* The context still works. */
    uint32_t code = 1;
    CHECK_OK(dc_push_exchange_status(ctx, k.ctl[2], 2, k.timeout_ns, k.stream[2], &code, NULL,
                                     0));
    CHECK_EQ(code, 0);
    xw_free(&k);
    dcptopk_context_destroy(ctx);
}

/* A host sequence that disagrees with the device's, and a flag out of step:
 * protocol errors, and nothing is stored into any peer's buffer. */
TEST(protocol_errors_store_nothing)
{
    GPU_CTX(ctx);
    xw k;
    CHECK(xw_init(&k, ctx, 2, 8, 396, 31) == 0);
    k.timeout_ns = 200000000ull;
    const int mode[XW_MAX] = {0};
    uint64_t src[XW_MAX];
    CHECK(xw_fill(&k, 1, 8, mode, src) == 0);
    /* Rank 0 says call 5 where the device is at call 1. */
    dc_push_exchange x = xw_args(&k, 0, 8, src[0], 5);
    CHECK_OK(dc_push_exchange_launch(ctx, &x, k.stream[0]));
    CHECK(xw_sync(&k) == 0);
    uint32_t code = 0;
    char msg[512];
    CHECK_OK(dc_push_exchange_status(ctx, k.ctl[0], 0, k.timeout_ns, k.stream[0], &code, msg,
                                     sizeof msg));
    CHECK_EQ(code, DC_EXCHANGE_STATUS_PROTOCOL);
    CHECK_CONTAINS(msg, "out of step");
    /* Nothing reached rank 1's buffer, no flag was released. */
    int32_t *g = calloc(1, dc_push_exchange_gathered_bytes(2, 8, 396));
    uint64_t fl[4];
    CHECK(g != NULL);
    CHECK(gpu_download(ctx, g, k.gathered[1], dc_push_exchange_gathered_bytes(2, 8, 396)) == 0);
    CHECK(gpu_download(ctx, fl, k.flags[1], sizeof fl) == 0);
    int nonzero = 0;
    for (size_t i = 0; i < dc_push_exchange_gathered_bytes(2, 8, 396) / 4; i++)
        nonzero |= g[i] != 0;
    free(g);
    CHECK_EQ(nonzero, 0);
    CHECK_EQ(fl[0] | fl[1] | fl[2] | fl[3], 0);

    /* Rank 1: a flag of parity 0 that no protocol step writes (call 1 must
     * find parity 0 at 0, the "call 0" every rank has seen). */
    const uint64_t bad = 7;
    CHECK_OK(dc_memcpy_htod(ctx, k.flags[1] + 8u * 1u, &bad, sizeof bad));
    x = xw_args(&k, 1, 8, src[1], 0);
    CHECK_OK(dc_push_exchange_launch(ctx, &x, k.stream[1]));
    CHECK(xw_sync(&k) == 0);
    dc_exchange_ctl c;
    CHECK(read_ctl(&k, 1, &c) == 0);
    CHECK_EQ(c.status[0], DC_EXCHANGE_STATUS_PROTOCOL);
    CHECK_EQ(c.status[1], 1);
    CHECK_EQ(c.status[3], 7);
    CHECK(gpu_download(ctx, fl, k.flags[0], sizeof fl) == 0);
    CHECK_EQ(fl[0] | fl[1] | fl[2] | fl[3], 0);
    xw_free(&k);
    dcptopk_context_destroy(ctx);
}

/* Each rank's exchange captured once into a CUDA graph, replayed 30 times
 * with new source rows: replay j is call j + 1 (the kernel advances the
 * device sequence), so its rows land in parity (j + 1) % 2. */
TEST(graph_replay_advances_the_sequence)
{
    GPU_CTX(ctx);
    const int32_t w = 4;
    const int64_t rows = 48;
    xw k;
    CHECK(xw_init(&k, ctx, w, 64, 396, 41) == 0);
    void *exec[XW_MAX] = {0};
    const int mode[XW_MAX] = {0};
    uint64_t src[XW_MAX];
    CHECK(xw_fill(&k, 1, rows, mode, src) == 0);
    for (int32_t r = 0; r < w; r++) {
        /* No host sequence: a graph replays the same parameters. */
        dc_push_exchange x = xw_args(&k, r, rows, src[r], 0);
        CHECK_OK(dc_graph_begin(ctx, k.stream[r]));
        dcptopk_result r1 = dc_push_exchange_launch(ctx, &x, k.stream[r]);
        dcptopk_result r2 = dc_graph_end(ctx, k.stream[r], &exec[r]);
        CHECK_MSG(r1 == 0 && r2 == 0, "capture of rank %d: %s", r, dcptopk_last_error(ctx));
    }
    for (uint64_t n = 1; n <= 30 && !dc_test_failed; n++) {
        if (n > 1)
            CHECK(xw_fill(&k, n, rows, mode, src) == 0);
        for (int32_t r = 0; r < w; r++)
            CHECK_OK(dc_graph_launch(ctx, exec[r], k.stream[r]));
        CHECK(xw_sync(&k) == 0);
        CHECK_MSG(xw_compare(&k, n, rows, "graph") == 0, "replay %llu",
                  (unsigned long long)n);
    }
    for (int32_t r = 0; r < w; r++)
        dc_graph_destroy(ctx, exec[r]);
    xw_free(&k);
    dcptopk_context_destroy(ctx);
}

/* The settle of a captured exchange: one graph per rank (exchange + settle
 * into a fixed buffer), replayed `calls` times with new rows each replay;
 * after every replay each rank's fixed buffer holds every rank's rows of
 * that call, whichever parity the device used. row_words 396: the 16-byte
 * path; 99: the 4-byte path (parity 1 is not 16-byte aligned). */
static void settle_replays(int32_t w, int64_t max_rows, int32_t row_words,
                           int64_t rows, int calls, uint64_t seed)
{
    GPU_CTX(ctx);
    xw k;
    CHECK(xw_init(&k, ctx, w, max_rows, row_words, seed) == 0);
    dcptopk_key key;
    dc_exchange_settle_key(w, dcptopk_context_arch(ctx), &key);
    /* Loaded before the capture: a capture compiles nothing. */
    CHECK_OK(dcptopk_warmup_keys(ctx, &key, 1, NULL, NULL, NULL));
    uint64_t stable[XW_MAX] = {0};
    void *exec[XW_MAX] = {0};
    const int mode[XW_MAX] = {0};
    uint64_t src[XW_MAX];
    for (int32_t r = 0; r < w; r++) {
        stable[r] = gpu_alloc(ctx, parity_bytes(&k));
        CHECK(stable[r] != 0);
    }
    CHECK(xw_fill(&k, 1, rows, mode, src) == 0);
    for (int32_t r = 0; r < w && !dc_test_failed; r++) {
        dc_push_exchange x = xw_args(&k, r, rows, src[r], 0);
        CHECK_OK(dc_graph_begin(ctx, k.stream[r]));
        dcptopk_result r1 = dc_push_exchange_launch(ctx, &x, k.stream[r]);
        if (!r1)
            r1 = dc_exchange_settle_launch(ctx, w, k.ctl[r], stable[r], rows,
                                           max_rows, row_words, k.stream[r]);
        dcptopk_result r2 = dc_graph_end(ctx, k.stream[r], &exec[r]);
        CHECK_MSG(r1 == 0 && r2 == 0, "capture of rank %d: %s", r,
                  dcptopk_last_error(ctx));
    }
    const size_t words = (size_t)rows * (size_t)row_words;
    for (uint64_t n = 1; n <= (uint64_t)calls && !dc_test_failed; n++) {
        if (n > 1)
            CHECK(xw_fill(&k, n, rows, mode, src) == 0);
        for (int32_t r = 0; r < w; r++)
            CHECK_OK(dc_graph_launch(ctx, exec[r], k.stream[r]));
        CHECK(xw_sync(&k) == 0);
        CHECK_MSG(xw_compare(&k, n, rows, "settle") == 0, "replay %llu",
                  (unsigned long long)n);
        for (int32_t r = 0; r < w && !dc_test_failed; r++) {
            CHECK(gpu_download(ctx, k.got_h, stable[r], parity_bytes(&k)) == 0);
            for (int32_t s = 0; s < w && !dc_test_failed; s++) {
                const int32_t *got = k.got_h + (size_t)s * (size_t)max_rows *
                                                   (size_t)row_words;
                size_t bad = words;
                for (size_t i = 0; i < words && bad == words; i++)
                    if (got[i] != k.src_h[s][i])
                        bad = i;
                CHECK_MSG(bad == words,
                          "replay %llu: rank %d's fixed buffer, rank %d's "
                          "word %zu differs",
                          (unsigned long long)n, r, s, bad);
            }
        }
    }
    for (int32_t r = 0; r < w; r++) {
        if (exec[r])
            dc_graph_destroy(ctx, exec[r]);
        gpu_free(ctx, stable[r]);
    }
    xw_free(&k);
    dcptopk_context_destroy(ctx);
}

TEST(settle_w2_packed_replays) { settle_replays(2, 64, 396, 48, 60, 51); }
TEST(settle_w4_packed_replays) { settle_replays(4, 64, 396, 64, 60, 52); }
TEST(settle_w3_odd_rows_replays) { settle_replays(3, 37, 99, 21, 60, 53); }

/* The poison step: nothing changes while the status word is clear; once it
 * is set, every id and physical row of the first topk columns is -1 and
 * every count 0 (the columns past topk untouched), and the host-mapped copy
 * holds the status. */
TEST(poison_step_overwrites_every_row)
{
    GPU_CTX(ctx);
    enum { T = 37, K = 300, STRIDE = 320 };
    int32_t *host = malloc((size_t)T * STRIDE * 4);
    CHECK(host != NULL);
    for (size_t i = 0; i < (size_t)T * STRIDE; i++)
        host[i] = (int32_t)i;
    uint64_t ids = gpu_upload(ctx, host, (size_t)T * STRIDE * 4);
    uint64_t rows = gpu_upload(ctx, host, (size_t)T * STRIDE * 4);
    uint64_t counts = gpu_upload(ctx, host, (size_t)T * 4);
    const uint32_t clear[4] = {0, 0, 0, 0}, failed[4] = {15, 2, 7, 5};
    uint64_t st = gpu_upload(ctx, clear, sizeof clear);
    void *mapped = NULL;
    uint64_t mapped_d = 0;
    CHECK_OK(dc_host_mapped_alloc(ctx, 16, &mapped, &mapped_d));
    dc_poison_param p;
    memset(&p, 0, sizeof p);
    p.status = st;
    p.host = mapped_d;
    p.ids = ids;
    p.rows_out = rows;
    p.counts = counts;
    p.ids_stride = STRIDE;
    p.rows_stride = STRIDE;
    p.rows = T;
    p.topk = K;
    CHECK_OK(dc_exchange_poison_launch(ctx, 3, &p, NULL));
    CHECK_OK(dc_stream_sync(ctx, NULL));
    int32_t *got = malloc((size_t)T * STRIDE * 4);
    CHECK(got != NULL);
    CHECK(gpu_download(ctx, got, ids, (size_t)T * STRIDE * 4) == 0);
    CHECK(memcmp(got, host, (size_t)T * STRIDE * 4) == 0);
    CHECK_EQ(((volatile uint32_t *)mapped)[0], 0u);
    CHECK_OK(dc_memcpy_htod(ctx, st, failed, sizeof failed));
    CHECK_OK(dc_exchange_poison_launch(ctx, 3, &p, NULL));
    CHECK_OK(dc_stream_sync(ctx, NULL));
    for (int which = 0; which < 2; which++) {
        CHECK(gpu_download(ctx, got, which ? rows : ids,
                           (size_t)T * STRIDE * 4) == 0);
        for (size_t i = 0; i < (size_t)T * STRIDE; i++) {
            const int32_t want = (int)(i % STRIDE) < K ? -1 : host[i];
            CHECK_MSG(got[i] == want, "%s[%zu] = %d, want %d",
                      which ? "rows_out" : "ids", i, got[i], want);
        }
    }
    CHECK(gpu_download(ctx, got, counts, (size_t)T * 4) == 0);
    for (int t = 0; t < T; t++)
        CHECK_EQ(got[t], 0);
    const volatile uint32_t *h = mapped;
    CHECK_EQ(h[0], 15u);
    CHECK_EQ(h[1], 2u);
    CHECK_EQ(h[2], 7u);
    CHECK_EQ(h[3], 5u);
    dc_host_mapped_free(ctx, mapped);
    free(got);
    free(host);
    gpu_free(ctx, ids);
    gpu_free(ctx, rows);
    gpu_free(ctx, counts);
    gpu_free(ctx, st);
    dcptopk_context_destroy(ctx);
}
