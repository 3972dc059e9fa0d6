/* selftest.c - dcptopk_selftest: the deployment check behind `dcptopk
 * selftest`. Generates seeded inputs, runs the whole merge of a config on the
 * GPU and compares every output bit for bit with the CPU reference; without a
 * device it checks the reference against an independent sort. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "base.h"
#include "check.h"
#include "runtime.h"
#include "structs.h"

/* Columns per rank of the generated rows. */
#define ST_COLS 4096

static uint64_t st_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double st_uniform(uint64_t *s)
{
    return ((double)(st_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static float st_normal(uint64_t *s)
{
    return (float)(sqrt(-2.0 * log(st_uniform(s))) *
                   cos(6.283185307179586 * st_uniform(s)));
}

static uint16_t st_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even (no NaN here) */
    return (uint16_t)(u >> 16);
}

/* Logits of every rank: normal scores; every 8th row has its top scores
 * concentrated in rank 0 (a saturated row when W > 1); row ends vary. */
static void st_make_inputs(const dcptopk_merge_config *c, int64_t rows,
                           uint64_t seed, uint16_t **logits, int32_t **ends)
{
    uint64_t s = seed;
    for (int32_t r = 0; r < c->world_size; r++) {
        for (int64_t t = 0; t < rows; t++) {
            int32_t end = ST_COLS - (int32_t)(st_next(&s) % (ST_COLS / 4));
            if (t % 17 == 5)
                end = (int32_t)(st_next(&s) % (uint64_t)c->local_topk);
            ends[r][t] = end;
            for (int32_t l = 0; l < ST_COLS; l++) {
                float v = st_normal(&s);
                if (t % 8 == 3 && r == 0)
                    v += 6.0f;
                logits[r][t * ST_COLS + l] = st_bf16(v);
            }
        }
    }
}

/* Independent check of the reference without a GPU: on every rank the
 * selected scores are the top K of the union (as a multiset) and the ids are
 * the same on all ranks. */
static int st_cmp_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int64_t st_check_cpu(const dcptopk_merge_config *c, int64_t rows,
                            uint16_t **logits, int32_t **ends, int32_t **ids)
{
    int32_t W = c->world_size, K = c->topk;
    uint32_t *all = malloc(sizeof *all * (size_t)W * ST_COLS);
    uint32_t *got = malloc(sizeof *got * (size_t)K);
    int64_t bad = 0;
    if (!all || !got) {
        free(all);
        free(got);
        return rows;
    }
    for (int64_t t = 0; t < rows; t++) {
        size_t n = 0;
        for (int32_t r = 0; r < W; r++)
            for (int32_t l = 0; l < ends[r][t] && l < ST_COLS; l++)
                all[n++] = dcptopk_ref_ord16(logits[r][t * ST_COLS + l]);
        qsort(all, n, sizeof *all, st_cmp_desc);
        size_t want = n < (size_t)K ? n : (size_t)K;
        int row_bad = 0;
        for (int32_t r = 0; r < W && !row_bad; r++) {
            size_t m = 0;
            for (int32_t i = 0; i < K; i++) {
                int32_t g = ids[r][t * K + i];
                if (g < 0)
                    break;
                int32_t owner = g % W, l = g / W; /* interleave 1 */
                got[m++] = dcptopk_ref_ord16(logits[owner][t * ST_COLS + l]);
            }
            qsort(got, m, sizeof *got, st_cmp_desc);
            if (m != want || memcmp(got, all, m * sizeof *got) != 0)
                row_bad = 1;
            if (r > 0 && memcmp(ids[r] + t * K, ids[0] + t * K,
                                sizeof(int32_t) * (size_t)K) != 0)
                row_bad = 1;
        }
        bad += row_bad;
    }
    free(all);
    free(got);
    return bad;
}

static dcptopk_result st_packed_gpu(dcptopk_context *ctx,
                                    const dcptopk_merge_config *c,
                                    int64_t rows, uint16_t **logits,
                                    int32_t **ends, int32_t **ref_ids,
                                    dcptopk_selftest_report *rep)
{
    int32_t W = c->world_size, K = c->topk;
    size_t lbytes = sizeof(uint16_t) * (size_t)rows * ST_COLS;
    size_t ibytes = sizeof(int32_t) * (size_t)rows * (size_t)K;
    uint64_t d_logits[DCPTOPK_MAX_WORLD_SIZE] = {0};
    uint64_t d_ends[DCPTOPK_MAX_WORLD_SIZE] = {0};
    uint64_t d_ids[DCPTOPK_MAX_WORLD_SIZE] = {0};
    const uint16_t *lp[DCPTOPK_MAX_WORLD_SIZE];
    const int32_t *ep[DCPTOPK_MAX_WORLD_SIZE];
    int32_t *ip[DCPTOPK_MAX_WORLD_SIZE];
    int32_t *host = malloc(ibytes);
    dcptopk_loopback *lb = NULL;
    dcptopk_result r = host ? DCPTOPK_SUCCESS : DCPTOPK_OUT_OF_MEMORY;

    for (int32_t w = 0; w < W && !r; w++) {
        if ((r = dc_mem_alloc(ctx, lbytes, &d_logits[w])) ||
            (r = dc_mem_alloc(ctx, sizeof(int32_t) * (size_t)rows, &d_ends[w])) ||
            (r = dc_mem_alloc(ctx, ibytes, &d_ids[w])) ||
            (r = dc_memcpy_htod(ctx, d_logits[w], logits[w], lbytes)) ||
            (r = dc_memcpy_htod(ctx, d_ends[w], ends[w],
                                sizeof(int32_t) * (size_t)rows)))
            break;
        lp[w] = (const uint16_t *)(uintptr_t)d_logits[w];
        ep[w] = (const int32_t *)(uintptr_t)d_ends[w];
        ip[w] = (int32_t *)(uintptr_t)d_ids[w];
    }
    if (!r)
        r = dcptopk_loopback_create(ctx, c, rows, ST_COLS, &lb);
    double t0 = dc_now_ms();
    if (!r)
        r = dcptopk_loopback_merge(lb, lp, ST_COLS, ep, rows, ip, NULL, NULL);
    if (!r)
        r = dcptopk_loopback_check(lb, NULL);
    rep->gpu_ms = dc_now_ms() - t0;
    for (int32_t w = 0; w < W && !r; w++) {
        if ((r = dc_memcpy_dtoh(ctx, host, d_ids[w], ibytes)))
            break;
        for (int64_t t = 0; t < rows; t++)
            if (memcmp(host + t * K, ref_ids[w] + t * K,
                       sizeof(int32_t) * (size_t)K) != 0)
                rep->mismatches++;
        rep->rows_checked += rows;
    }
    dcptopk_loopback_destroy(lb);
    for (int32_t w = 0; w < W; w++) {
        dc_mem_free(ctx, d_logits[w]);
        dc_mem_free(ctx, d_ends[w]);
        dc_mem_free(ctx, d_ids[w]);
    }
    free(host);
    return r;
}

dcptopk_result dcptopk_selftest(dcptopk_context *ctx,
                                const dcptopk_merge_config *config,
                                int64_t rows, uint64_t seed,
                                dcptopk_selftest_report *dst)
{
    dcptopk_merge_config c;
    dcptopk_result r;
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if ((r = DC_STRUCT_OUT(ctx, "out", dst, SELFTEST_REPORT)))
        return r;
    if ((r = dc_config_read(ctx, config, &c)) || (r = dc_check_config(ctx, &c)))
        return r;
    if (rows < 1 || rows > 4096)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be in 1..4096", (long long)rows);
    if (c.kind != DCPTOPK_MERGE_PACKED || c.interleave != 1)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "config->kind = %d, interleave = %d: the selftest "
                       "covers the packed merge with interleave 1",
                       c.kind, c.interleave);
    /* Filled in full here; the caller gets its struct_size's part. */
    dcptopk_selftest_report report = DCPTOPK_SELFTEST_REPORT_INIT;
    dcptopk_selftest_report *out = &report;

    int32_t W = c.world_size, K = c.topk;
    uint16_t *logits[DCPTOPK_MAX_WORLD_SIZE] = {0};
    int32_t *ends[DCPTOPK_MAX_WORLD_SIZE] = {0};
    int32_t *ids[DCPTOPK_MAX_WORLD_SIZE] = {0};
    r = DCPTOPK_SUCCESS;
    for (int32_t w = 0; w < W; w++) {
        logits[w] = malloc(sizeof(uint16_t) * (size_t)rows * ST_COLS);
        ends[w] = malloc(sizeof(int32_t) * (size_t)rows);
        ids[w] = malloc(sizeof(int32_t) * (size_t)rows * (size_t)K);
        if (!logits[w] || !ends[w] || !ids[w])
            r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "selftest inputs");
    }
    if (!r) {
        st_make_inputs(&c, rows, seed, logits, ends);
        const uint16_t *const *lp = (const uint16_t *const *)logits;
        const int32_t *const *ep = (const int32_t *const *)ends;
        r = dcptopk_ref_packed_merge(&c, lp, ST_COLS, ST_COLS, ep, rows, ids,
                                     NULL, NULL, &out->rows_rescued);
        if (r)
            r = dc_fail(ctx, r, "reference merge: %s", dcptopk_last_error(NULL));
    }
    if (!r && ctx->device < 0) {
        out->mismatches = st_check_cpu(&c, rows, logits, ends, ids);
        out->rows_checked = rows * W;
        snprintf(out->summary, sizeof out->summary,
                 "no GPU: CPU reference merge of %lld rows x %d ranks (K=%d, "
                 "N=%d, %lld rescued rows) checked against an independent "
                 "sort: %lld mismatching rows",
                 (long long)rows, W, K, c.local_topk,
                 (long long)out->rows_rescued, (long long)out->mismatches);
    } else if (!r) {
        r = st_packed_gpu(ctx, &c, rows, logits, ends, ids, out);
        out->on_gpu = r == DCPTOPK_SUCCESS;
        snprintf(out->summary, sizeof out->summary,
                 "GPU (%s): loopback merge of %lld rows x %d ranks (K=%d, "
                 "N=%d, %lld rescued rows) vs the CPU reference: %lld of %lld "
                 "rows differ",
                 ctx->arch, (long long)rows, W, K, c.local_topk,
                 (long long)out->rows_rescued, (long long)out->mismatches,
                 (long long)out->rows_checked);
    }
    for (int32_t w = 0; w < W; w++) {
        free(logits[w]);
        free(ends[w]);
        free(ids[w]);
    }
    dc_struct_write(dst, dst->struct_size, out, sizeof *out);
    if (!r && out->mismatches)
        r = dc_fail(ctx, DCPTOPK_INTERNAL, "selftest: %s", out->summary);
    return r;
}
