/* bench_pair.c - the pair merge on the GPU: dcptopk_pair_select on the
 * rank-major all-gather output read in place and on the row-major layout,
 * and dcptopk_pair_pack, for the prefill (T = 6710) and decode (T = 64)
 * shapes.
 *
 * Timing: CUDA events around each call; before every timed call a memset
 * of bench_cold_bytes (4 x the device's L2, at least 256 MiB) flushes the
 * L2, so each call reads cold data; 3 warm-up calls, then the median (and
 * min) of `runs` calls. Scores are N(0,1) fp32, gids distinct per rank
 * (gid = l * W + r). Prints a table and one `JSON {...}` line per
 * measurement.
 *
 * Usage: bench_pair [runs (default 30)] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "fixture.h"
#include "pair.h"
#include "runtime.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float rng_normal(void)
{
    double u1 = ((double)(bench_rand(&rng_state) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(bench_rand(&rng_state) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Fast N(0,1): linear interpolation between 2^16 sorted Box-Muller samples
 * (an empirical inverse CDF); distinct values, a few ns each, so that the
 * GPU machine does not spend its time in log() and cos(). */
#define QN 65536
static float quantiles[QN];

static void quantiles_init(void)
{
    for (int i = 0; i < QN; i++)
        quantiles[i] = rng_normal();
    qsort(quantiles, QN, sizeof quantiles[0], bench_cmp_float);
}

static float fast_normal(void)
{
    uint64_t x = bench_rand(&rng_state);
    uint32_t i = (uint32_t)(x % (QN - 1));
    float u = (float)(x >> 40) * (1.0f / 16777216.0f);
    float v = quantiles[i] + (quantiles[i + 1] - quantiles[i]) * u;
    return v != 0.0f ? v : 1e-7f; /* never zero */
}

typedef struct bench_ctx {
    bench_gpu g;
    uint64_t flush;
    size_t flush_bytes; /* bench_cold_bytes */
    int runs;
} bench_ctx;

/* Dirties the whole L2 before a timed call, so that each reads cold data
 * (the warm-up calls too: they only need to run). */
static dcptopk_result flush_l2(void *user, int iter)
{
    const bench_ctx *b = user;
    return dc_memset_async(b->g.ctx, b->flush, (uint8_t)iter, b->flush_bytes,
                           b->g.stream);
}

/* Median and min in microseconds of `runs` timed calls, each after an L2
 * flush. */
static void time_it(bench_ctx *b, bench_fn fn, void *job, double *median,
                    double *min)
{
    dcptopk_context *ctx = b->g.ctx;
    double *us = malloc(sizeof *us * (size_t)b->runs);
    DIE_IF(!us, "out of memory");
    bench_time_calls(&b->g, fn, job, flush_l2, b, 3, b->runs, us);
    *median = b->runs % 2 ? us[b->runs / 2]
                          : 0.5 * (us[b->runs / 2 - 1] + us[b->runs / 2]);
    *min = us[0];
    free(us);
}

/* The pair-merge config of a W x K shape (ids out, a block size for rows). */
static dcptopk_merge_config pair_config(int32_t w, int32_t k)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = k;
    c.local_topk = k;
    c.world_size = w;
    c.block_size = 64;
    c.interleave = 1;
    c.emit_ids = 1;
    c.exact = 0;
    return c;
}

typedef struct select_job {
    dcptopk_context *ctx;
    dcptopk_merge_config config;
    dcptopk_pair_select_args args;
    int32_t split; /* log2 of the CTAs a row; -1: the launcher's choice */
} select_job;

static dcptopk_result run_select(void *user, int iter)
{
    (void)iter;
    select_job *j = user;
    return j->split < 0
               ? dcptopk_pair_select(j->ctx, &j->config, &j->args)
               : dc_pair_select_split(j->ctx, &j->config, 0, j->split,
                                      &j->args);
}

typedef struct pack_job {
    dcptopk_context *ctx;
    dcptopk_merge_config config;
    dcptopk_pair_pack_args args;
} pack_job;

static dcptopk_result run_pack(void *user, int iter)
{
    (void)iter;
    pack_job *j = user;
    return dcptopk_pair_pack(j->ctx, &j->config, &j->args);
}

static void report(const char *what, const char *layout, int32_t w, int32_t k,
                   int64_t t, double bytes, double median, double min)
{
    printf("%-12s %-10s W=%-2d K=%-4d T=%-5lld %9.1f us  (min %8.1f)  %7.0f GB/s\n",
           what, layout, w, k, (long long)t, median, min, bytes / median / 1e3);
    printf("JSON {\"bench\":\"%s\",\"layout\":\"%s\",\"W\":%d,\"K\":%d,\"T\":%lld,"
           "\"median_us\":%.2f,\"min_us\":%.2f,\"bytes\":%.0f,\"GBps\":%.1f}\n",
           what, layout, w, k, (long long)t, median, min, bytes,
           bytes / median / 1e3);
    fflush(stdout);
}

/* Rewrites the id word of every pair of a device buffer of n int32 words as
 * the float value of the gid (through the host: set-up, not timed). */
static void float_ids(dcptopk_context *ctx, uint64_t d, size_t n)
{
    int32_t *h = malloc(sizeof(int32_t) * n);
    DIE_IF(!h, "out of host memory");
    DIE_IF(dc_memcpy_dtoh(ctx, h, d, sizeof(int32_t) * n), "copy");
    for (size_t i = 1; i < n; i += 2) {
        float f = (float)h[i];
        memcpy(&h[i], &f, sizeof f);
    }
    DIE_IF(dc_memcpy_htod(ctx, d, h, sizeof(int32_t) * n), "copy");
    free(h);
}

/* The row split over 2 and 4 CTAs (each split its shape allows), rank-major,
 * ids compared bit for bit with the one-CTA launch just timed (the entry
 * points' kernel, whose ids are still in the buffer). */
static void bench_splits(bench_ctx *b, select_job *job, int64_t t,
                         double bytes)
{
    dcptopk_context *ctx = job->ctx;
    const int32_t w = job->config.world_size, k = job->config.topk;
    const size_t ids = (size_t)t * (size_t)k;
    const uint64_t d_ids = (uint64_t)(uintptr_t)job->args.ids_out;
    int32_t *want = malloc(sizeof(int32_t) * ids);
    int32_t *got = malloc(sizeof(int32_t) * ids);
    DIE_IF(!want || !got, "out of host memory");
    DIE_IF(dc_stream_sync(ctx, job->args.stream) ||
               dc_memcpy_dtoh(ctx, want, d_ids, sizeof(int32_t) * ids),
           "copy");
    for (int32_t split = 1; split <= 2; split++) {
        job->split = split;
        if (run_select(job, 0) != DCPTOPK_SUCCESS)
            break; /* the shape allows no larger split */
        DIE_IF(dc_stream_sync(ctx, job->args.stream) ||
                   dc_memcpy_dtoh(ctx, got, d_ids, sizeof(int32_t) * ids),
               "copy");
        DIE_IF(memcmp(got, want, sizeof(int32_t) * ids) != 0,
               "the split changed the ids");
        double med, mn;
        time_it(b, run_select, job, &med, &mn);
        char layout[32];
        snprintf(layout, sizeof layout, "rank-major-ctas%d", 1 << split);
        report("pair_select_split", layout, w, k, t, bytes, med, mn);
    }
    job->split = -1;
    free(want);
    free(got);
}

/* A select over `nrot` copies of its candidates, copy iter % nrot at call
 * iter. */
typedef struct rot_job {
    select_job *job;
    const int32_t *base;
    size_t words; /* one copy */
    int nrot;
} rot_job;

static dcptopk_result run_select_rot(void *user, int iter)
{
    rot_job *r = user;
    r->job->args.candidates = r->base + (size_t)(iter % r->nrot) * r->words;
    return run_select(r->job, iter);
}

/* The select back to back (20 calls a batch, the median of 9), with its
 * dependent launch and in plain stream order: the A/B of programmatic
 * dependent launch. No flush between calls; the candidates rotate over
 * copies that together exceed bench_cold_bytes. */
static void bench_b2b(bench_ctx *b, select_job *job, uint64_t d_rank,
                      size_t n, int64_t t, double bytes)
{
    dcptopk_context *ctx = job->ctx;
    const size_t copy = sizeof(int32_t) * n;
    const int nrot = bench_cold_copies(&b->g, copy, 1, 4096, "pair back to back");
    /* One buffer already past the bound rotates over itself alone. */
    uint64_t d_rot = d_rank;
    if (nrot > 1) {
        DIE_IF(dc_mem_alloc(ctx, copy * (size_t)nrot, &d_rot), "alloc");
        for (int i = 0; i < nrot; i++)
            DIE_IF(dc_memcpy_dtod_async(ctx, d_rot + copy * (size_t)i, d_rank,
                                        copy, b->g.stream),
                   "copy");
    }
    const int32_t *saved = job->args.candidates;
    rot_job r = {job, (const int32_t *)(uintptr_t)d_rot, n, nrot};
    double us[2];
    bench_b2b_pdl_us(&b->g, run_select_rot, &r, us);
    for (int off = 0; off < 2; off++)
        report("pair_select_b2b", off ? "rank-major-nopdl" : "rank-major-pdl",
               job->config.world_size, job->config.topk, t, bytes, us[off], us[off]);
    job->args.candidates = saved;
    DIE_IF(dc_stream_sync(ctx, b->g.stream), "sync");
    if (nrot > 1)
        dc_mem_free(ctx, d_rot);
}

/* BENCH_PAIR_TRACE=1, with DCPTOPK_TEMPLATE_DIR at bench/pair_trace.py's
 * stamped copy of kernels/: after the first timing, each phase stamp the
 * select left in its rows' first ids (cycles since the row's start), as the
 * median over the rows that reached it. The ids are not the select's then,
 * so nothing else runs. */
static int trace_on(void)
{
    const char *e = getenv("BENCH_PAIR_TRACE");
    return e && *e && strcmp(e, "0") != 0;
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void print_trace(select_job *job, int64_t t)
{
    dcptopk_context *ctx = job->ctx;
    const int32_t k = job->config.topk;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)t * (size_t)k);
    int32_t *col = malloc(sizeof(int32_t) * (size_t)t);
    DIE_IF(!ids || !col, "out of host memory");
    DIE_IF(dc_stream_sync(ctx, job->args.stream) ||
               dc_memcpy_dtoh(ctx, ids, (uint64_t)(uintptr_t)job->args.ids_out,
                              sizeof(int32_t) * (size_t)t * (size_t)k),
           "copy");
    /* A traced row holds its slot count in ids[0]; a select's ids could
     * too, by chance, but not in every row alike. */
    const int32_t slots = ids[0];
    int same = slots >= 2 && slots <= k;
    for (int64_t row = 1; same && row < t; row++)
        same = ids[row * k] == slots;
    DIE_IF(!same, "BENCH_PAIR_TRACE: no stamps in the ids (DCPTOPK_TEMPLATE_DIR must name "
                  "bench/pair_trace.py's copy)");
    printf("TRACE pair_select W=%d K=%d T=%lld: slot:median cycles since the row's start "
           "(rows that reached it)",
           job->config.world_size, k, (long long)t);
    for (int32_t s = 1; s < slots; s++) {
        int64_t n = 0;
        for (int64_t row = 0; row < t; row++) {
            const int32_t v = ids[row * k + s];
            if (v >= 0)
                col[n++] = v;
        }
        if (n == 0)
            continue;
        qsort(col, (size_t)n, sizeof col[0], cmp_i32);
        printf(" %d:%d(%lld)", s, col[n / 2], (long long)n);
    }
    printf("\n");
    free(ids);
    free(col);
}

static void bench_select(bench_ctx *b, int32_t w, int32_t k, int64_t t)
{
    dcptopk_context *ctx = b->g.ctx;
    int64_t wk = (int64_t)w * k;
    size_t n = (size_t)t * (size_t)wk * 2; /* int32 words */
    int32_t *rank_major = malloc(sizeof(int32_t) * n);
    int32_t *row_major = malloc(sizeof(int32_t) * n);
    DIE_IF(!rank_major || !row_major, "out of host memory");
    for (int32_t r = 0; r < w; r++)
        for (int64_t row = 0; row < t; row++)
            for (int32_t j = 0; j < k; j++) {
                float s = fast_normal();
                int32_t l = j * 3 + (int32_t)(bench_rand(&rng_state) % 3);
                int32_t *p = rank_major + (((int64_t)r * t + row) * k + j) * 2;
                memcpy(&p[0], &s, sizeof s);
                p[1] = l * w + r;
                int32_t *q = row_major + (row * wk + (int64_t)r * k + j) * 2;
                q[0] = p[0];
                q[1] = p[1];
            }
    uint64_t d_rank = 0, d_row = 0, d_ids = 0;
    DIE_IF(dc_mem_alloc(ctx, sizeof(int32_t) * n, &d_rank), "alloc");
    DIE_IF(dc_mem_alloc(ctx, sizeof(int32_t) * n, &d_row), "alloc");
    DIE_IF(dc_mem_alloc(ctx, sizeof(int32_t) * (size_t)t * (size_t)k, &d_ids),
           "alloc");
    DIE_IF(dc_memcpy_htod(ctx, d_rank, rank_major, sizeof(int32_t) * n), "copy");
    DIE_IF(dc_memcpy_htod(ctx, d_row, row_major, sizeof(int32_t) * n), "copy");
    free(rank_major);
    free(row_major);

    select_job job;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.config = pair_config(w, k);
    job.split = -1;
    double bytes = (double)n * 4 + (double)t * k * 4; /* read + ids written */
    double med[2], mn[2];
    for (int layout = 0; layout < 2; layout++) {
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = (const int32_t *)(uintptr_t)(layout ? d_row : d_rank);
        a.layout = layout;
        a.rows = t;
        a.ids_out = (int32_t *)(uintptr_t)d_ids;
        a.stream = b->g.stream;
        job.args = a;
        time_it(b, run_select, &job, &med[layout], &mn[layout]);
        report("pair_select", layout ? "row-major" : "rank-major", w, k, t,
               bytes, med[layout], mn[layout]);
        if (layout == 0 && trace_on()) {
            print_trace(&job, t);
            goto done;
        }
        if (layout == 0) {
            bench_splits(b, &job, t, bytes);
            if (t == 64 || (w == 8 && k == 2048))
                bench_b2b(b, &job, d_rank, n, t, bytes);
        }
    }
    printf("JSON {\"bench\":\"pair_select_ratio\",\"W\":%d,\"K\":%d,\"T\":%lld,"
           "\"rank_major_over_row_major\":%.3f}\n",
           w, k, (long long)t, med[0] / med[1]);
    /* The same candidates with each gid stored as a float value (vLLM's
     * [T, K, 2] float32 pairs), read in place by the float-id layouts. */
    if (w == 8 && k == 2048) {
        float_ids(ctx, d_rank, n);
        float_ids(ctx, d_row, n);
        for (int layout = 2; layout < 4; layout++) {
            job.args.candidates =
                (const int32_t *)(uintptr_t)(layout & 1 ? d_row : d_rank);
            job.args.layout = layout;
            double fm, fn;
            time_it(b, run_select, &job, &fm, &fn);
            report("pair_select", layout & 1 ? "row-major-float-ids"
                                             : "rank-major-float-ids",
                   w, k, t, bytes, fm, fn);
        }
    }
done:
    dc_mem_free(ctx, d_rank);
    dc_mem_free(ctx, d_row);
    dc_mem_free(ctx, d_ids);
}

static void bench_pack(bench_ctx *b, int32_t w, int32_t k, int64_t t,
                       int64_t local_len)
{
    dcptopk_context *ctx = b->g.ctx;
    size_t nl = (size_t)t * (size_t)local_len, ni = (size_t)t * (size_t)k;
    float *logits = malloc(sizeof(float) * nl);
    int32_t *ids = malloc(sizeof(int32_t) * ni);
    DIE_IF(!logits || !ids, "out of host memory");
    for (size_t i = 0; i < nl; i++)
        logits[i] = fast_normal();
    for (int64_t row = 0; row < t; row++)
        for (int32_t j = 0; j < k; j++)
            ids[row * k + j] = (int32_t)(bench_rand(&rng_state) % (uint64_t)local_len);
    uint64_t d_logits = 0, d_ids = 0, d_out = 0;
    DIE_IF(dc_mem_alloc(ctx, sizeof(float) * nl, &d_logits), "alloc");
    DIE_IF(dc_mem_alloc(ctx, sizeof(int32_t) * ni, &d_ids), "alloc");
    DIE_IF(dc_mem_alloc(ctx, sizeof(int32_t) * ni * 2, &d_out), "alloc");
    DIE_IF(dc_memcpy_htod(ctx, d_logits, logits, sizeof(float) * nl), "copy");
    DIE_IF(dc_memcpy_htod(ctx, d_ids, ids, sizeof(int32_t) * ni), "copy");
    free(logits);
    free(ids);

    pack_job job;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.config = pair_config(w, k);
    dcptopk_pair_pack_args a = DCPTOPK_PAIR_PACK_ARGS_INIT;
    a.logits = (const float *)(uintptr_t)d_logits;
    a.logits_stride = local_len;
    a.local_ids = (const int32_t *)(uintptr_t)d_ids;
    a.rows = t;
    a.rank = 0;
    a.out = (int32_t *)(uintptr_t)d_out;
    a.stream = b->g.stream;
    job.args = a;
    double med, mn;
    time_it(b, run_pack, &job, &med, &mn);
    /* ids read + gathered scores (one 32-byte sector each, at worst) + out */
    report("pair_pack", "-", w, k, t, (double)ni * (4 + 4 + 8), med, mn);
    dc_mem_free(ctx, d_logits);
    dc_mem_free(ctx, d_ids);
    dc_mem_free(ctx, d_out);
}

int main(int argc, char **argv)
{
    bench_ctx b;
    memset(&b, 0, sizeof b);
    b.runs = argc > 1 ? atoi(argv[1]) : 30;
    if (b.runs < 1)
        b.runs = 30;
    quantiles_init();
    dcptopk_context_config cc = DCPTOPK_CONTEXT_CONFIG_INIT;
    cc.device = 0;
    cc.cache_mode = DCPTOPK_CACHE_OFF;
    if (!bench_gpu_open(&b.g, &cc, "bench_pair: no CUDA device, nothing measured"))
        return 77;
    dcptopk_context *ctx = b.g.ctx;
    b.flush_bytes = bench_cold_bytes(&b.g);
    DIE_IF(dc_mem_alloc(ctx, b.flush_bytes, &b.flush), "flush buffer");

    bench_print_cold(&b.g, "bench_pair");
    printf("pair merge on %s, median of %d runs, L2 flushed before each\n",
           dcptopk_context_arch(ctx), b.runs);
    static const struct { int32_t w, k; int64_t t; } shapes[] = {
        {8, 2048, 6710}, {4, 2048, 6710}, {2, 2048, 6710}, {16, 2048, 6710},
        {8, 1024, 6710}, {8, 4096, 6710}, {8, 512, 6710},
        {8, 2048, 64},   {4, 2048, 64},   {2, 2048, 64},
    };
    const char *only = getenv("BENCH_PAIR_ONLY"); /* "W,K,T" */
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "%d,%d,%lld", shapes[i].w, shapes[i].k,
                 (long long)shapes[i].t);
        if (only && only[0] && strcmp(only, tag) != 0)
            continue;
        bench_select(&b, shapes[i].w, shapes[i].k, shapes[i].t);
    }
    if (!only || !only[0])
        bench_pack(&b, 8, 2048, 6710, 16384);

    dc_mem_free(ctx, b.flush);
    bench_gpu_close(&b.g);
    return 0;
}
