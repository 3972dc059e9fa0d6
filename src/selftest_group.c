/* selftest_group.c - dcptopk_selftest_group: one rank's part of the
 * distributed deployment check (on src/: it needs the CPU reference). The inputs of every rank are a pure function of the
 * seed, so each rank computes the whole reference merge itself and compares
 * its own outputs; nothing but the merge crosses ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "group_int.h"
#include "runtime.h"
#include "structs.h"

#define SG_COLS 2048   /* columns per rank */
#define SG_BLOCK_COLS ((SG_COLS + 63) / 64)

static double sg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t sg_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float sg_normal(uint64_t *s)
{
    double u1 = ((double)(sg_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = ((double)(sg_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static uint16_t sg_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Rows of step `seed`: t % 4 == 1 saturates exactly m = min(W, (K-1)/N)
 * ranks (their first N columns far above everything else, m * N <= K of
 * them: each such rank's whole local top N is inside the global top K);
 * t % 4 == 3 concentrates the top in one rank; t % 9 == 5 has a short row;
 * the rest are normal. */
static void sg_inputs(const dcptopk_merge_config *c, int64_t rows,
                      uint64_t seed, uint16_t **logits, int32_t **ends)
{
    const int32_t W = c->world_size, N = c->local_topk;
    int32_t m = (c->topk - 1) / N;
    if (m > W)
        m = W;
    for (int32_t r = 0; r < W; r++) {
        uint64_t s = seed * 1000003u + (uint64_t)r;
        for (int64_t t = 0; t < rows; t++) {
            int32_t end = SG_COLS - (int32_t)(sg_next(&s) % (SG_COLS / 4));
            if (t % 9 == 5)
                end = (int32_t)(sg_next(&s) % (uint64_t)N);
            if (t % 4 == 1)
                end = SG_COLS;
            ends[r][t] = end;
            const int32_t rot = (int32_t)(t % W);
            const int sat = t % 4 == 1 && ((r - rot + W) % W) < m;
            for (int32_t l = 0; l < SG_COLS; l++) {
                float v = sg_normal(&s);
                if (sat && l < N)
                    v += 20.0f;
                if (t % 4 == 3 && r == rot)
                    v += 4.0f;
                logits[r][t * SG_COLS + l] = sg_bf16(v);
            }
        }
    }
}

typedef struct sg_bufs {
    uint64_t logits, ends, ids, rows_out, counts, req, table;
} sg_bufs;

static void sg_free(dcptopk_context *ctx, sg_bufs *b)
{
    uint64_t *p = &b->logits;
    for (size_t i = 0; i < sizeof *b / sizeof *p; i++)
        if (p[i])
            dc_mem_free(ctx, p[i]);
    memset(b, 0, sizeof *b);
}

static void sg_map(dcptopk_rows_map *m, const int32_t *req,
                   const int32_t *table, int32_t *rows_out, int32_t *counts)
{
    memset(m, 0, sizeof *m);
    m->req_id = req;
    m->block_table = table;
    m->block_table_stride = SG_BLOCK_COLS;
    m->block_table_cols = SG_BLOCK_COLS;
    m->num_reqs = 2;
    m->stride_rows = 64;
    m->rows_out = rows_out;
    m->counts_out = counts;
}

dcptopk_result dcptopk_selftest_group(dcptopk_group *g,
                                      const dcptopk_merge_config *config,
                                      int64_t rows, int32_t steps,
                                      uint64_t seed,
                                      dcptopk_selftest_report *dst)
{
    if (!g)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "group is NULL");
    dcptopk_context *ctx = g->ctx;
    dcptopk_merge_config c;
    dcptopk_result r;
    if ((r = DC_STRUCT_OUT(ctx, "out", dst, SELFTEST_REPORT)))
        return r;
    if ((r = dc_config_read(ctx, config, &c)))
        return r;
    if (c.kind != DCPTOPK_MERGE_PACKED || c.interleave != 1 ||
        c.block_size != 64)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "config: kind %d, interleave %d, block_size %d: the "
                       "group selftest covers packed configs with interleave "
                       "1 and block size 64",
                       c.kind, c.interleave, c.block_size);
    if (rows < 1 || rows > 4096)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be in 1..4096", (long long)rows);
    if (steps < 1 || steps > 100000)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "steps = %d: must be in 1..100000", steps);
    /* Filled in full here; the caller's part reads zero until the end. */
    dcptopk_selftest_report report = DCPTOPK_SELFTEST_REPORT_INIT;
    dcptopk_selftest_report *out = &report;
    dc_struct_write(dst, dst->struct_size, out, sizeof *out);
    const int32_t W = c.world_size, K = c.topk, me = g->rank;
    /* Across P2P domains the group runs the hierarchy: its reference. */
    const int32_t group_nodes = dcptopk_group_nodes(g);
    const int32_t nodes = c.exact && group_nodes > 1 ? group_nodes : 1;
    dcptopk_group_workspace *gw = NULL;
    if ((r = dcptopk_group_workspace_create(g, &c, rows, &gw)))
        return r;
    /* Every kernel ready before the first step: a compile inside a step
     * would hold the peers' bounded waits. */
    if ((r = dcptopk_group_warmup(gw, NULL, NULL, NULL))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dcptopk_last_error(ctx));
        dcptopk_group_workspace_destroy(gw);
        return dc_fail(ctx, r, "warmup: %s", msg);
    }

    uint16_t *logits[DC_W_MAX] = {0};
    int32_t *ends[DC_W_MAX] = {0}, *ids[DC_W_MAX] = {0};
    int32_t *rws[DC_W_MAX] = {0}, *cnt[DC_W_MAX] = {0};
    uint32_t *sat[DC_W_MAX] = {0};
    const size_t outn = (size_t)rows * (size_t)K;
    int32_t *host = malloc(outn * 4);
    int32_t req[4096], table[2 * SG_BLOCK_COLS];
    for (int64_t t = 0; t < rows; t++)
        req[t] = (int32_t)(t % 3) - (t % 3 == 2 ? 3 : 0); /* 0, 1, -1 */
    for (int32_t i = 0; i < 2 * SG_BLOCK_COLS; i++)
        table[i] = i * 5 + 3;
    sg_bufs b;
    memset(&b, 0, sizeof b);
    r = host ? DCPTOPK_SUCCESS
             : dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "selftest buffers");
    for (int32_t p = 0; p < W && !r; p++) {
        logits[p] = malloc((size_t)rows * SG_COLS * 2);
        ends[p] = malloc((size_t)rows * 4);
        ids[p] = malloc(outn * 4);
        rws[p] = malloc(outn * 4);
        cnt[p] = malloc((size_t)rows * 4);
        sat[p] = malloc((size_t)rows * 4);
        if (!logits[p] || !ends[p] || !ids[p] || !rws[p] || !cnt[p] || !sat[p])
            r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "selftest buffers");
    }
    if (!r) {
        (void)((r = dc_mem_alloc(ctx, (size_t)rows * SG_COLS * 2, &b.logits)) ||
               (r = dc_mem_alloc(ctx, (size_t)rows * 4, &b.ends)) ||
               (r = dc_mem_alloc(ctx, outn * 4, &b.ids)) ||
               (r = dc_mem_alloc(ctx, outn * 4, &b.rows_out)) ||
               (r = dc_mem_alloc(ctx, (size_t)rows * 4, &b.counts)) ||
               (r = dc_mem_alloc(ctx, sizeof req, &b.req)) ||
               (r = dc_mem_alloc(ctx, sizeof table, &b.table)) ||
               (r = dc_memcpy_htod(ctx, b.req, req, sizeof req)) ||
               (r = dc_memcpy_htod(ctx, b.table, table, sizeof table)));
    }
    int32_t path = 0;
    dcptopk_group_path(g, &path, NULL, 0);
    double t_gpu = 0;
    for (int32_t step = 0; step < steps && !r; step++) {
        const uint64_t sseed = seed + (uint64_t)step * 7919u;
        sg_inputs(&c, rows, sseed, logits, ends);
        dcptopk_rows_map maps[DC_W_MAX];
        for (int32_t p = 0; p < W; p++)
            sg_map(&maps[p], req, table, rws[p], cnt[p]);
        int64_t rescued = 0;
        r = dcptopk_ref_hier_merge(&c, nodes, (const uint16_t *const *)logits,
                                   SG_COLS, SG_COLS,
                                   (const int32_t *const *)ends, rows, ids,
                                   maps, sat, &rescued);
        if (r) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", dcptopk_last_error(NULL));
            r = dc_fail(ctx, r, "reference merge: %s", msg);
            break;
        }
        out->rows_rescued += rescued;
        if ((r = dc_memcpy_htod(ctx, b.logits, logits[me],
                                (size_t)rows * SG_COLS * 2)) ||
            (r = dc_memcpy_htod(ctx, b.ends, ends[me], (size_t)rows * 4)) ||
            (r = dc_memset_async(ctx, b.ids, 0xEE, outn * 4, NULL)) ||
            (r = dc_stream_sync(ctx, NULL)))
            break;
        dcptopk_group_merge_args a = DCPTOPK_GROUP_MERGE_ARGS_INIT;
        a.rows = rows;
        a.logits = (const uint16_t *)(uintptr_t)b.logits;
        a.logits_stride = SG_COLS;
        a.max_local_len = SG_COLS;
        a.row_ends = (const int32_t *)(uintptr_t)b.ends;
        a.ids_out = (int32_t *)(uintptr_t)b.ids;
        sg_map(&a.rows_map, (const int32_t *)(uintptr_t)b.req,
               (const int32_t *)(uintptr_t)b.table,
               (int32_t *)(uintptr_t)b.rows_out,
               (int32_t *)(uintptr_t)b.counts);
        double t0 = sg_now_ms();
        if ((r = dcptopk_group_merge(gw, &a)) ||
            (r = dcptopk_group_check(g, NULL)))
            break;
        t_gpu += sg_now_ms() - t0;
        struct {
            uint64_t d;
            const int32_t *ref;
            size_t n;
        } o[4] = {{b.ids, ids[me], outn},
                  {b.rows_out, rws[me], outn},
                  {b.counts, cnt[me], (size_t)rows},
                  {dcptopk_group_workspace_saturation(gw),
                   (const int32_t *)sat[me], (size_t)rows}};
        int64_t bad_rows = 0;
        for (int t = 0; t < 4 && !r; t++) {
            if ((r = dc_memcpy_dtoh(ctx, host, o[t].d, o[t].n * 4)))
                break;
            const size_t cols = o[t].n / (size_t)rows;
            for (int64_t row = 0; row < rows; row++)
                if (memcmp(host + row * cols, o[t].ref + row * cols,
                           cols * 4) != 0)
                    bad_rows++;
        }
        out->mismatches += bad_rows;
        out->rows_checked += rows;
    }
    out->on_gpu = r == DCPTOPK_SUCCESS;
    out->gpu_ms = t_gpu;
    char reason[640] = "", hier_note[64] = "";
    if (nodes > 1)
        snprintf(hier_note, sizeof hier_note, ", hierarchical over %d nodes",
                 nodes);
    dcptopk_group_path(g, &path, reason, sizeof reason);
    snprintf(out->summary, sizeof out->summary,
             "rank %d of %d, path %s%s: %d step(s) of %lld rows (K=%d "
             "N=%d, %lld rescued rows): %lld of %lld rows differ from the "
             "reference",
             me, W, dcptopk_path_name(path), hier_note, steps,
             (long long)rows, K,
             c.local_topk, (long long)out->rows_rescued,
             (long long)out->mismatches, (long long)out->rows_checked);
    /* Peers may still push into this rank's memory until they are done. */
    if (!r)
        r = dcptopk_group_barrier(g);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dcptopk_last_error(ctx));
    dcptopk_group_workspace_destroy(gw);
    sg_free(ctx, &b);
    for (int32_t p = 0; p < W; p++) {
        free(logits[p]);
        free(ends[p]);
        free(ids[p]);
        free(rws[p]);
        free(cnt[p]);
        free(sat[p]);
    }
    free(host);
    dc_struct_write(dst, dst->struct_size, out, sizeof *out);
    if (r)
        return dc_fail(ctx, r, "%s", msg);
    if (out->mismatches)
        return dc_fail(ctx, DCPTOPK_INTERNAL, "selftest: %s", out->summary);
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
}
