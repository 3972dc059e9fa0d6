/*
 * bench_topn.c - times the fused local top-N + pack (dc_topn_pack_launch) on
 * the shapes of issue #4: decode (T = 64 and 8 rows of 131072 columns) and
 * prefill (T = 6710 rows of 16384), N = 384, over the input families normal,
 * normal + 100, integer-valued and -inf masked.
 *
 * Method: CUDA events around each launch on one stream, 5 warm-up launches,
 * the median (and min) of `iters` (default 30) timed launches. The inputs
 * rotate over enough device copies to exceed bench_cold_bytes (4 x the
 * device's L2, at least 256 MiB), so every launch reads cold HBM, as in a
 * real step. `piped_us`: 20 launches between two events, divided by 20 (no
 * host gap between launches, as in a CUDA graph), the median of 9 such
 * batches.
 * Prints a table and one `JSON {...}` line per measurement. Usage: bench_topn [iters] [shape filter substring].
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "fixture.h"
#include "runtime.h"
#include "topn.h"
#include "topn_abi.h"

enum { FAM_NORMAL, FAM_NORMAL_100, FAM_INTEGER, FAM_NEG_INF_MASK, FAM_COUNT };
static const char *fam_names[FAM_COUNT] = {"normal", "normal+100",
                                           "integer0..3", "-inf-masked"};

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

/* Most input copies a shape rotates over: the 2 MiB inputs (8 x 131072 and
 * 64 x 16384) take 257 past a 512 MiB bound (an L2 of 128 MiB). */
#define MAX_BUF 512

/* One row of a family; never all zeros. */
static void gen_row(int fam, uint16_t *row, int64_t s)
{
    int64_t cut = s;
    if (fam == FAM_NEG_INF_MASK) /* causal-style: a random tail is -inf */
        cut = s / 4 + (int64_t)(bench_uniform(&rng_state) * (double)(s - s / 4));
    for (int64_t i = 0; i < s; i += 2) {
        double u1 = bench_uniform(&rng_state), u2 = bench_uniform(&rng_state);
        double r = sqrt(-2.0 * log(u1 + 1e-300));
        double z[2] = {r * cos(6.283185307179586 * u2),
                       r * sin(6.283185307179586 * u2)};
        for (int k = 0; k < 2 && i + k < s; k++) {
            float v;
            switch (fam) {
            case FAM_NORMAL_100: v = (float)(z[k] + 100.0); break;
            case FAM_INTEGER: v = (float)(bench_rand(&rng_state) & 3u); break;
            default: v = (float)z[k]; break;
            }
            row[i + k] = i + k >= cut ? (uint16_t)0xFF80u : bench_bf16(v);
        }
    }
}

/* One launch, or `batch` of them back to back (no host gap between them,
 * as in a CUDA graph), of the variant under test; the inputs rotate over
 * nbuf device copies. */
typedef struct launch {
    dcptopk_context *ctx;
    const dcptopk_merge_config *c;
    dcptopk_pack_args a;
    const uint64_t *d_in;
    int nbuf, batch;
    int32_t variant;
} launch;

static dcptopk_result run_launches(void *user, int iter)
{
    launch *l = user;
    dcptopk_result r = DCPTOPK_SUCCESS;
    for (int i = 0; i < l->batch && !r; i++) {
        l->a.logits =
            (const uint16_t *)(uintptr_t)l->d_in[(iter * l->batch + i) % l->nbuf];
        r = dc_topn_pack_launch_variant(l->ctx, l->c, &l->a, l->variant);
    }
    return r;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 30;
    const char *filter = argc > 2 ? argv[2] : NULL;
    if (iters < 20)
        iters = 20;
    bench_gpu g;
    if (!bench_gpu_open(&g, NULL, "no CUDA device: nothing to measure"))
        return 0;
    dcptopk_context *ctx = g.ctx;
    const int32_t sms = dc_ctx_sm_count(ctx);
    bench_print_cold(&g, "bench_topn");
    static const struct {
        int64_t t, s;
        int32_t n;
        const char *goal;
    } shapes[] = {{64, 131072, 384, "<= 15 us (torch 145 us)"},
                  {8, 131072, 384, "-"},
                  {64, 16384, 384, "-"},
                  {6710, 16384, 384, "<= 150 us (torch 959 us)"}};
    double *times = malloc(sizeof *times * (size_t)iters);
    printf("%-6s %-7s %-5s %-12s %-7s %10s %10s %10s %10s %8s  goal\n", "T",
           "S", "N", "family", "variant", "median_us", "min_us", "piped_us",
           "floor_us", "TB/s");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t T = shapes[si].t, S = shapes[si].s;
        const int32_t n = shapes[si].n;
        char shape_name[64];
        snprintf(shape_name, sizeof shape_name, "T=%lld,S=%lld",
                 (long long)T, (long long)S);
        if (filter && !strstr(shape_name, filter))
            continue;
        const size_t in_bytes = sizeof(uint16_t) * (size_t)(T * S);
        const int64_t words = n + n / 32;
        const size_t out_bytes = sizeof(int32_t) * (size_t)(T * words);
        /* At least 2: consecutive launches never read the same buffer. */
        const int nbuf = bench_cold_copies(&g, in_bytes, 2, MAX_BUF, shape_name);
        uint16_t *host = malloc(in_bytes);
        int32_t *ends = malloc(sizeof *ends * (size_t)T);
        uint64_t d_in[MAX_BUF], d_out = 0, d_ends = 0;
        if (!host || !ends)
            DIE("host memory");
        for (int64_t t = 0; t < T; t++)
            ends[t] = (int32_t)S;
        for (int b = 0; b < nbuf; b++)
            if (dc_mem_alloc(ctx, in_bytes, &d_in[b]))
                DIE("alloc");
        if (dc_mem_alloc(ctx, out_bytes, &d_out) ||
            dc_mem_alloc(ctx, sizeof *ends * (size_t)T, &d_ends) ||
            dc_memcpy_htod(ctx, d_ends, ends, sizeof *ends * (size_t)T))
            DIE("alloc");
        dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
        c.local_topk = n;
        const int32_t auto_v = dc_topn_variant(T, S, sms, dc_ctx_smem_optin(ctx));
        for (int fam = 0; fam < FAM_COUNT; fam++) {
            /* One family alone for a profiler (bench/profile.sh). */
            const char *only = getenv("BENCH_TOPN_FAMILY");
            if (only && *only && strcmp(only, fam_names[fam]) != 0)
                continue;
            for (int64_t t = 0; t < T; t++)
                gen_row(fam, host + t * S, S);
            for (int b = 0; b < nbuf; b++)
                if (dc_memcpy_htod(ctx, d_in[b], host, in_bytes))
                    DIE("upload");
            /* The automatic variant, and for the decode shapes the others
             * that the row fits (a forced variant below the capacity one
             * would run as that one, under the wrong label). */
            int32_t variants[5];
            int nv = 0;
            variants[nv++] = -1;
            const int32_t min_v = dc_topn_capacity_variant(S, dc_ctx_smem_optin(ctx));
            if (T <= 64 && min_v >= 0)
                for (int32_t v = min_v; v <= 3; v++)
                    if (v != auto_v)
                        variants[nv++] = v;
            for (int vi = 0; vi < nv; vi++) {
                launch l = {ctx, &c, DCPTOPK_PACK_ARGS_INIT, d_in, nbuf, 1,
                            variants[vi]};
                l.a.logits_stride = S;
                l.a.max_local_len = S;
                l.a.row_ends = (const int32_t *)(uintptr_t)d_ends;
                l.a.rows = T;
                l.a.out = (int32_t *)(uintptr_t)d_out;
                l.a.stream = g.stream;
                bench_time_calls(&g, run_launches, &l, NULL, NULL, 5, iters, times);
                const double med = times[iters / 2], mn = times[0];
                /* Pipelined: `batch` launches between two events (what a
                 * CUDA graph or a busy stream sees: no host gap); the median
                 * over `batches` such batches (one batch alone varied by
                 * 0.4 us at 64 x 131072). */
                enum { batch = 20, batches = 9 };
                double piped_runs[batches];
                l.batch = batch;
                bench_time_calls(&g, run_launches, &l, NULL, NULL, 0, batches,
                                 piped_runs);
                const double piped = piped_runs[batches / 2] / batch;
                const double floor_us = (double)(in_bytes + out_bytes) / 4.3e6;
                const int32_t v = variants[vi] < 0 ? auto_v : variants[vi];
                const double tbs = (double)in_bytes / (med * 1e6);
                printf("%-6lld %-7lld %-5d %-12s %d%-6s %10.1f %10.1f %10.1f "
                       "%10.1f %8.2f  %s\n",
                       (long long)T, (long long)S, n, fam_names[fam], v,
                       variants[vi] < 0 ? "(auto)" : "", med, mn, piped, floor_us,
                       tbs, variants[vi] < 0 ? shapes[si].goal : "");
                printf("JSON {\"bench\":\"topn_pack\",\"T\":%lld,\"S\":%lld,"
                       "\"N\":%d,\"family\":\"%s\",\"variant\":%d,\"auto\":%s,"
                       "\"median_us\":%.2f,\"min_us\":%.2f,\"pipelined_us\":%.2f,"
                       "\"floor_us\":%.2f,"
                       "\"input_TBps\":%.3f,\"iters\":%d,\"buffers\":%d}\n",
                       (long long)T, (long long)S, n, fam_names[fam], v,
                       variants[vi] < 0 ? "true" : "false", med, mn, piped,
                       floor_us,
                       tbs, iters, nbuf);
                fflush(stdout);
            }
        }
        for (int b = 0; b < nbuf; b++)
            dc_mem_free(ctx, d_in[b]);
        dc_mem_free(ctx, d_out);
        dc_mem_free(ctx, d_ends);
        free(host);
        free(ends);
    }
    free(times);
    bench_gpu_close(&g);
    return 0;
}
