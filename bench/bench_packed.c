/* bench_packed.c - timings of the packed merge on the GPU: the select (W=8,
 * K=2048, N=384, T=6710, ids out, no saturated row), the rescue alone (T=64
 * with no saturated row, timed per call, per call of 50 launched back to
 * back ("piped"), and per call of the same 50 replayed as a CUDA graph
 * ("graph"); T=6710 with 1%, 10%, 100% of rows saturated, and at 100% once
 * more with the owned rows written besides the ids, "rescue, rows out") and
 * the whole two-round loopback merge at T=64 (decode) and T=6710 (prefill).
 *
 * CUDA events around each call, 5 warm-up calls, the median of 25; inputs
 * rotate over copies that together exceed bench_cold_bytes (4 x the
 * device's L2, at least 256 MiB) and are never zeros. Prints a table and one
 * `JSON {...}` line per row. bench/torch_packed.py times torch.topk on the
 * same shapes.
 *
 * BENCH_PACKED_ONLY narrows the run for a profiler (bench/profile.sh), a
 * comma-separated list of: "select" (the two selects), "rescue" (the
 * saturated rescues, at the percentages listed in BENCH_PACKED_PCT,
 * "1,10,100"; the rows-out one when 100 is listed), "loopback"; the decode
 * rescue needs both select and rescue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "fixture.h"
#include "packed.h"
#include "runtime.h"

#define WARMUP 5
#define ITERS 25

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t ord16(uint16_t b)
{
    return (b & 0x8000) ? (uint32_t)(~b & 0xFFFF) : (uint32_t)(b | 0x8000);
}

/* Median of ITERS event-timed calls, in microseconds; prep(prep_user, i)
 * before call i, untimed, when given. */
static double time_us(const bench_gpu *g, bench_fn fn, void *user,
                      bench_fn prep, void *prep_user)
{
    double us[ITERS];
    bench_time_calls(g, fn, user, prep, prep_user, WARMUP, ITERS, us);
    return us[ITERS / 2];
}

/* A captured batch of calls (bench_batch) and where to replay it. */
typedef struct graph_of {
    dcptopk_context *ctx;
    void *stream;
    void *exec;
} graph_of;

static dcptopk_result run_graph(void *p, int iter)
{
    const graph_of *gr = p;
    (void)iter;
    return dc_graph_launch(gr->ctx, gr->exec, gr->stream);
}

/* Per-call time of `batch` calls issued back to back between two events
 * (no host gap between launches): the median over ITERS batches, in
 * microseconds. It hides the fixed event and launch overhead (about 3.7 us
 * here) that a single timed call carries. */
static double piped_us(const bench_gpu *g, bench_fn fn, void *user, int batch)
{
    return bench_b2b_us(g, fn, user, batch, WARMUP, ITERS);
}

/* The same `batch` calls captured once into a CUDA graph; the median over
 * ITERS graph launches, per call. What an engine that replays its decode
 * step as a graph pays per call. */
static double graph_us(const bench_gpu *g, bench_fn fn, void *user, int batch)
{
    dcptopk_context *ctx = g->ctx;
    bench_batch b = {fn, user, batch};
    graph_of gr = {ctx, g->stream, NULL};
    if (dc_graph_begin(ctx, g->stream) || bench_batch_run(&b, 0) ||
        dc_graph_end(ctx, g->stream, &gr.exec))
        DIE("capture");
    double us = time_us(g, run_graph, &gr, NULL, NULL) / batch;
    dc_graph_destroy(ctx, gr.exec);
    return us;
}

static void report(const char *name, const char *shape, double us,
                   double floor_us)
{
    printf("%-34s %-36s %9.1f us", name, shape, us);
    if (floor_us > 0)
        printf("  (floor %.1f us, x%.2f)", floor_us, us / floor_us);
    printf("\n");
    printf("JSON {\"bench\": \"%s\", \"shape\": \"%s\", \"us\": %.2f, "
           "\"floor_us\": %.2f}\n",
           name, shape, us, floor_us);
    fflush(stdout);
}

/* The packed-merge config of every timing here: W ranks, K out of their N
 * each, ids out, whole rows (no block size). */
static dcptopk_merge_config packed_config(int32_t w, int32_t k, int32_t n,
                                          int32_t exact)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = k;
    c.local_topk = n;
    c.world_size = w;
    c.block_size = 0;
    c.emit_ids = 1;
    c.exact = exact;
    return c;
}

/* Rotated input copies: at least the 3 that the earlier figures used, more
 * where 3 do not exceed the L2 bound, at most MAX_BUF (bench_cold_copies).
 * Copies past the third repeat the first three's data (device copies): the
 * random stream, and so every later input, stays what those figures used. */
#define MIN_BUF 3
#define MAX_BUF 64

/* ----------------------------------------------------------- select */

/* What a timed call launches: the whole select (dcptopk_select) or one of
 * its parts (packed.h). */
typedef dcptopk_result (*sel_launch)(dcptopk_context *ctx, const dcptopk_merge_config *c,
                                     dcptopk_workspace *ws, const dcptopk_select_args *a);

typedef struct sel_bench {
    dcptopk_context *ctx;
    dcptopk_merge_config c;
    dcptopk_workspace *ws;
    dcptopk_select_args a[MAX_BUF];
    int nbuf; /* copies in use */
    sel_launch launch;
} sel_bench;

static dcptopk_result run_sel(void *user, int iter)
{
    sel_bench *b = user;
    return b->launch(b->ctx, &b->c, b->ws, &b->a[iter % b->nbuf]);
}

/* The median time of b's calls of `launch`. */
static double time_launch(const bench_gpu *g, sel_bench *b, sel_launch launch)
{
    b->launch = launch;
    return time_us(g, run_sel, b, NULL, NULL);
}

/* Host packed rows of one rank segment: N distinct local ids, ascending,
 * normal bf16 keys (no rank saturated: every rank has words below tau). */
static void fill_packed(int32_t *g, int64_t rows, int32_t n, int64_t len)
{
    const int32_t words = n + n / 32;
    for (int64_t t = 0; t < rows; t++) {
        int32_t *row = g + t * words;
        memset(row, 0, (size_t)words * 4);
        int64_t step = len / n;
        for (int32_t j = 0; j < n; j++) {
            int64_t l = j * step + (int64_t)(bench_rand(&rng_state) % (uint64_t)step);
            uint16_t v = bench_normal_bf16(&rng_state);
            row[j] = (int32_t)((ord16(v) << 16) | (0xFFFFu - ((uint32_t)l & 0xFFFFu)));
            if ((l >> 16) & 1)
                row[n + j / 32] |= (int32_t)(1u << (j % 32));
        }
    }
}

/* Whether BENCH_PACKED_ONLY (unset: everything; else a comma-separated
 * list) names `what`. */
static int only_is(const char *what)
{
    const char *only = getenv("BENCH_PACKED_ONLY");
    if (!only || !*only)
        return 1;
    const size_t n = strlen(what);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, what, n) == 0)
            return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

/* The workspace's seq words must be 0 before each rescue call, and the
 * rescue does not reset them: they live right before the saturation words
 * of the workspace's allocation. */
typedef struct seq_reset {
    dcptopk_context *ctx;
    uint64_t seq;
    size_t bytes;
    void *stream;
} seq_reset;

static dcptopk_result reset_seq(void *user, int iter)
{
    const seq_reset *z = user;
    (void)iter;
    return dc_memset_async(z->ctx, z->seq, 0, z->bytes, z->stream);
}

/* dcptopk_select back to back (20 calls a batch, the median of 9; the
 * inputs rotate over b->nbuf copies), with the
 * kernels' dependent launches and in plain stream order: the A/B of
 * programmatic dependent launch. */
static void b2b_pdl(const bench_gpu *g, sel_bench *b, const char *name,
                    double floor_us)
{
    char what[64];
    double us[2];
    b->launch = dcptopk_select;
    bench_b2b_pdl_us(g, run_sel, b, us);
    for (int off = 0; off < 2; off++) {
        snprintf(what, sizeof what, "%s b2b, %s", name,
                 off ? "stream order" : "dependent launch");
        report(what, "W=8 K=2048 N=384 T=6710 ids", us[off], floor_us);
    }
}

/* The rescue (b's, on its current saturation words) as an engine's decode
 * step asks for it: the owned physical rows and their counts besides the
 * ids, at the default config's block size, 64. One request a row (req_id[t]
 * = t, as in decode), each with the 256 block-table entries that rank 0's
 * local ids (below 16384, fill_packed's span) need, at random physical
 * blocks. Rows and counts are per rotated copy, as the ids are. The CSR
 * offsets (indptr_out) are a kernel of their own after the rescue in
 * dcptopk_select, not timed here. */
static double time_rescue_rows(const bench_gpu *g, sel_bench *b, seq_reset *z)
{
    dcptopk_context *ctx = g->ctx;
    const int32_t block = 64, cols = 16384 / block, K = b->c.topk;
    const int64_t T = b->a[0].rows;
    const size_t table_n = (size_t)T * (size_t)cols;
    int32_t *req = malloc((size_t)T * 4), *table = malloc(table_n * 4);
    if (!req || !table)
        DIE("host memory");
    /* Its own random stream: the later inputs stay as they were. */
    uint64_t state = 0x6A09E667F3BCC909ull;
    for (int64_t t = 0; t < T; t++)
        req[t] = (int32_t)t;
    for (size_t i = 0; i < table_n; i++)
        table[i] = (int32_t)(bench_rand(&state) % table_n);
    uint64_t dreq = 0, dtable = 0, drows[MAX_BUF], dcounts[MAX_BUF];
    if (dc_mem_alloc(ctx, (size_t)T * 4, &dreq) ||
        dc_mem_alloc(ctx, table_n * 4, &dtable) ||
        dc_memcpy_htod(ctx, dreq, req, (size_t)T * 4) ||
        dc_memcpy_htod(ctx, dtable, table, table_n * 4))
        DIE("rows map");
    for (int i = 0; i < b->nbuf; i++) {
        if (dc_mem_alloc(ctx, (size_t)T * K * 4, &drows[i]) ||
            dc_mem_alloc(ctx, (size_t)T * 4, &dcounts[i]))
            DIE("rows out");
        dcptopk_rows_map *m = &b->a[i].rows_map;
        m->req_id = (const int32_t *)(uintptr_t)dreq;
        m->block_table = (const int32_t *)(uintptr_t)dtable;
        m->block_table_stride = cols;
        m->block_table_cols = cols;
        m->num_reqs = (int32_t)T;
        m->stride_rows = block;
        m->rows_out = (int32_t *)(uintptr_t)drows[i];
        m->rows_out_stride = K;
        m->counts_out = (int32_t *)(uintptr_t)dcounts[i];
    }
    const int32_t saved = b->c.block_size;
    b->c.block_size = block;
    const double us = time_us(g, run_sel, b, reset_seq, z);
    if (dcptopk_workspace_check(b->ws, g->stream) || dc_stream_sync(ctx, g->stream))
        DIE("rescue status");
    b->c.block_size = saved;
    const dcptopk_select_args none = DCPTOPK_SELECT_ARGS_INIT;
    for (int i = 0; i < b->nbuf; i++) {
        b->a[i].rows_map = none.rows_map;
        dc_mem_free(ctx, drows[i]);
        dc_mem_free(ctx, dcounts[i]);
    }
    dc_mem_free(ctx, dreq);
    dc_mem_free(ctx, dtable);
    free(req);
    free(table);
    return us;
}

static void bench_select(const bench_gpu *g)
{
    dcptopk_context *ctx = g->ctx;
    void *stream = g->stream;
    const int32_t W = 8, K = 2048, N = 384;
    const int64_t T = 6710;
    const int32_t words = N + N / 32;
    const size_t gbytes = (size_t)W * T * words * 4;
    int32_t *h = malloc(gbytes);
    sel_bench b;
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.c = packed_config(W, K, N, 0);
    b.nbuf = bench_cold_copies(g, gbytes, MIN_BUF, MAX_BUF, "select");
    uint64_t dg[MAX_BUF], dids[MAX_BUF];
    for (int i = 0; i < b.nbuf; i++) {
        if (i < MIN_BUF)
            fill_packed(h, (int64_t)W * T, N, 16384);
        if (dc_mem_alloc(ctx, gbytes, &dg[i]) ||
            (i < MIN_BUF ? dc_memcpy_htod(ctx, dg[i], h, gbytes)
                         : dc_memcpy_dtod_async(ctx, dg[i], dg[i % MIN_BUF],
                                                gbytes, stream)) ||
            dc_mem_alloc(ctx, (size_t)T * K * 4, &dids[i]))
            DIE("select buffers");
        dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
        a.gathered = (const int32_t *)(uintptr_t)dg[i];
        a.rows = T;
        a.ids_out = (int32_t *)(uintptr_t)dids[i];
        a.stream = stream;
        b.a[i] = a;
    }
    if (dc_stream_sync(ctx, stream))
        DIE("select buffers");
    const int sel = only_is("select"), res = only_is("rescue");
    double us = 0;
    /* floor: 85 MB read + 55 MB ids written at 4.3 TB/s */
    double floor_us = ((double)gbytes + (double)T * K * 4) / 4.3e6;
    if (sel) {
        us = time_launch(g, &b, dcptopk_select);
        report("select", "W=8 K=2048 N=384 T=6710 ids", us, floor_us);
        b2b_pdl(g, &b, "select", floor_us);
    }

    /* Exact select: + saturation words + push + rescue (no saturated row). */
    uint64_t recv = 0, flags = 0, lg = 0, re = 0;
    dcptopk_workspace_layout lay = DCPTOPK_WORKSPACE_LAYOUT_INIT;
    b.c.exact = 1;
    if (dcptopk_workspace_layout_get(&b.c, T, &lay) ||
        dc_mem_alloc(ctx, lay.recv_bytes, &recv) ||
        dc_mem_alloc(ctx, lay.flags_bytes, &flags) ||
        dc_mem_alloc(ctx, (size_t)T * 2048 * 2, &lg) ||
        dc_mem_alloc(ctx, (size_t)T * 4, &re))
        DIE("workspace buffers");
    uint64_t pr[8], pf[8];
    for (int i = 0; i < 8; i++) {
        pr[i] = recv;
        pf[i] = flags;
    }
    if (dcptopk_workspace_create(ctx, &b.c, T, 0, pr, pf, &b.ws))
        DIE("workspace");
    for (int i = 0; i < b.nbuf; i++) {
        b.a[i].logits = (const uint16_t *)(uintptr_t)lg;
        b.a[i].logits_stride = 2048;
        b.a[i].max_local_len = 2048;
        b.a[i].row_ends = (const int32_t *)(uintptr_t)re;
    }
    if (sel) {
        us = time_launch(g, &b, dcptopk_select);
        report("select exact (+push+rescue)", "W=8 K=2048 N=384 T=6710 ids", us,
               floor_us);
        b2b_pdl(g, &b, "select exact", floor_us);
        if (dcptopk_workspace_check(b.ws, stream))
            DIE("check");
        /* Its parts alone (no row saturated): where the exact select's
         * time over the plain one goes. */
        us = time_launch(g, &b, dc_packed_select_launch);
        report("select exact: select kernel", "W=8 K=2048 N=384 T=6710 ids", us, floor_us);
        us = time_launch(g, &b, dc_packed_push_launch);
        report("select exact: push, no sat row", "W=8 K=2048 N=384 T=6710", us, 0);
        us = time_launch(g, &b, dc_packed_rescue_launch);
        report("select exact: rescue, no sat row", "W=8 K=2048 N=384 T=6710", us, 0);
        if (dcptopk_workspace_check(b.ws, stream))
            DIE("check");
    }

    /* Rescue alone, no saturated row, T = 64 (sat words are zero: the exact
     * select above wrote them for T rows; rows 0..63 of a clean workspace). */
    dcptopk_workspace_destroy(b.ws);
    if (dcptopk_workspace_create(ctx, &b.c, T, 0, pr, pf, &b.ws))
        DIE("workspace");
    for (int i = 0; i < b.nbuf; i++)
        b.a[i].rows = 64;
    /* From here on every timed call is the rescue alone. */
    b.launch = dc_packed_rescue_launch;
    if (sel && res) {
        us = time_us(g, run_sel, &b, NULL, NULL);
        report("rescue, no saturated row", "W=8 K=2048 N=384 T=64", us, 0);
        us = piped_us(g, run_sel, &b, 50);
        report("rescue, no saturated row, piped", "W=8 K=2048 N=384 T=64 x50", us, 0);
        us = graph_us(g, run_sel, &b, 50);
        report("rescue, no saturated row, graph", "W=8 K=2048 N=384 T=64 x50", us, 0);
    }

    /* Rescue with 1%, 10%, 100% of T = 6710 rows saturated (rank 3, tau16
     * in the middle of the keys); flags always 1 and seq reset to 0 before
     * each call, so every wait succeeds at once. */
    uint32_t *ones = malloc((size_t)W * T * 4), *sat = malloc((size_t)T * 4);
    for (int64_t i = 0; i < (int64_t)W * T; i++)
        ones[i] = 1;
    int32_t *lists = malloc(lay.recv_bytes);
    const int32_t slots = (K - 1) / N, kw = K + K / 32;
    for (int64_t t = 0; t < T; t++)
        for (int s = 0; s < slots; s++)
            fill_packed(lists + (t * slots + s) * kw, 1, K, 65536);
    if (dc_memcpy_htod(ctx, flags, ones, (size_t)W * T * 4) ||
        dc_memcpy_htod(ctx, recv, lists, lay.recv_bytes))
        DIE("rescue inputs");
    for (int i = 0; i < b.nbuf; i++)
        b.a[i].rows = T;
    int pct[3] = {1, 10, 100}, npct = res ? 3 : 0;
    const char *pl = getenv("BENCH_PACKED_PCT");
    if (res && pl && *pl)
        npct = sscanf(pl, "%d,%d,%d", &pct[0], &pct[1], &pct[2]);
    for (int p = 0; p < npct; p++) {
        for (int64_t t = 0; t < T; t++)
            sat[t] = (t * 100 / T) < 0 ? 0
                     : ((t % 100) < pct[p]) ? ((1u << 3) << 16) | 0xBF00u
                                            : 0u;
        if (dc_memcpy_htod(ctx, dcptopk_workspace_saturation(b.ws), sat, (size_t)T * 4))
            DIE("sat");
        seq_reset z = {ctx, dcptopk_workspace_saturation(b.ws) - (uint64_t)T * 4,
                       (size_t)T * 4, stream};
        const double us2 = time_us(g, run_sel, &b, reset_seq, &z);
        if (dcptopk_workspace_check(b.ws, stream))
            DIE("rescue status");
        char shape[64];
        snprintf(shape, sizeof shape, "W=8 K=2048 N=384 T=6710 %d%% sat", pct[p]);
        report("rescue", shape, us2, 0);
        if (pct[p] == 100)
            report("rescue, rows out", shape, time_rescue_rows(g, &b, &z), 0);
    }
    dcptopk_workspace_destroy(b.ws);
    free(ones);
    free(sat);
    free(lists);
    free(h);
}

/* ----------------------------------------------------------- loopback */

typedef struct lb_bench {
    dcptopk_loopback *lb;
    const uint16_t *lg[MAX_BUF][16];
    int nbuf; /* copies in use */
    const int32_t *re[16];
    int32_t *ids[16];
    int64_t stride, rows;
    void *stream;
} lb_bench;

static dcptopk_result run_lb(void *user, int iter)
{
    lb_bench *b = user;
    return dcptopk_loopback_merge(b->lb, b->lg[iter % b->nbuf], b->stride, b->re,
                                  b->rows, b->ids, NULL, b->stream);
}

static void bench_loopback(const bench_gpu *g, int64_t T, int64_t S)
{
    dcptopk_context *ctx = g->ctx;
    void *stream = g->stream;
    const int32_t W = 8, K = 2048, N = 384;
    dcptopk_merge_config c = packed_config(W, K, N, 1);
    lb_bench b;
    memset(&b, 0, sizeof b);
    b.stride = S;
    b.rows = T;
    b.stream = stream;
    if (dcptopk_loopback_create(ctx, &c, T, S, &b.lb))
        DIE("loopback");
    const size_t lbytes = (size_t)T * S * 2;
    uint16_t *h = malloc(lbytes);
    int32_t *ends = malloc((size_t)T * 4);
    for (int64_t t = 0; t < T; t++)
        ends[t] = (int32_t)S;
    /* Rotate over copies of all W ranks' logits. */
    b.nbuf = bench_cold_copies(g, lbytes * W, MIN_BUF, MAX_BUF, "loopback");
    for (int i = 0; i < b.nbuf; i++)
        for (int r = 0; r < W; r++) {
            uint64_t d;
            if (dc_mem_alloc(ctx, lbytes, &d))
                DIE("logits");
            if (i < MIN_BUF) {
                for (size_t e = 0; e < (size_t)T * S; e++)
                    h[e] = bench_normal_bf16(&rng_state);
                if (dc_memcpy_htod(ctx, d, h, lbytes))
                    DIE("logits");
            } else if (dc_memcpy_dtod_async(ctx, d,
                                            (uint64_t)(uintptr_t)b.lg[i % MIN_BUF][r],
                                            lbytes, stream)) {
                DIE("logits");
            }
            b.lg[i][r] = (const uint16_t *)(uintptr_t)d;
        }
    if (dc_stream_sync(ctx, stream))
        DIE("logits");
    for (int r = 0; r < W; r++) {
        uint64_t d, e;
        if (dc_mem_alloc(ctx, (size_t)T * K * 4, &d) ||
            dc_mem_alloc(ctx, (size_t)T * 4, &e) ||
            dc_memcpy_htod(ctx, e, ends, (size_t)T * 4))
            DIE("ids");
        b.ids[r] = (int32_t *)(uintptr_t)d;
        b.re[r] = (const int32_t *)(uintptr_t)e;
    }
    double us = time_us(g, run_lb, &b, NULL, NULL);
    if (dcptopk_loopback_check(b.lb, stream))
        DIE("loopback check");
    char shape[96];
    snprintf(shape, sizeof shape, "W=8 K=2048 N=384 T=%lld S=%lld x8 ranks",
             (long long)T, (long long)S);
    report("loopback merge (8 ranks, 1 GPU)", shape, us, 0);
    dcptopk_loopback_destroy(b.lb);
    free(h);
    free(ends);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    bench_gpu g;
    if (!bench_gpu_open(&g, NULL, "no CUDA device: nothing to measure"))
        return 0;
    bench_print_cold(&g, "bench_packed");
    printf("%-34s %-36s %12s\n", "workload", "shape", "median");
    bench_select(&g);
    if (only_is("loopback")) {
        bench_loopback(&g, 64, 16384);
        bench_loopback(&g, 6710, 4096);
    }
    bench_gpu_close(&g);
    return 0;
}
