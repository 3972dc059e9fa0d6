/* test_pack_indices.c - the pack_indices kernel launched directly through
 * dc_launch (its template's signature), compared bit for bit with a CPU
 * packing written here from docs/CONTRACT.md ("Pack of given ids"), not from
 * the library's reference. Also checks the module table: the second launch
 * is a table hit (no compile, no cache read). */
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "gen.h"
#include "gpu_util.h"
#include "harness.h"
#include "runtime.h"

/* docs/CONTRACT.md, Keys: ord16. */
static uint32_t contract_ord16(uint16_t b)
{
    if ((b & 0x7FFF) > 0x7F80)
        return 0;
    return (b & 0x8000) ? (uint32_t)(~b & 0xFFFF) : (uint32_t)(b | 0x8000);
}

/* docs/CONTRACT.md, Packed row + Pack of given ids. */
static void contract_pack_indices(const uint16_t *logits, int64_t ls,
                                  int64_t max_len, const int32_t *row_ends,
                                  const int32_t *ids, int64_t ids_stride,
                                  int64_t rows, int32_t n, int32_t *out)
{
    int64_t words = n + n / 32;
    for (int64_t t = 0; t < rows; t++) {
        int32_t *row = out + t * words;
        memset(row, 0, (size_t)words * sizeof *row);
        int64_t e = row_ends[t] < 0 ? 0 : row_ends[t];
        if (e > max_len)
            e = max_len;
        if (e > (1 << 17))
            e = 1 << 17;
        for (int32_t j = 0; j < n; j++) {
            int32_t l = ids[t * ids_stride + j];
            if (l < 0 || l >= e)
                continue;
            uint32_t k = contract_ord16(logits[t * ls + l]);
            if (k == 0)
                continue;
            dc_packed_put(row, n, j, k, (uint32_t)l);
        }
    }
}

static uint16_t pick_bf16(uint64_t *s)
{
    static const uint16_t special[] = {0x0000, 0x8000, 0x7F80, 0xFF80,
                                       0x7FC0, 0xFFC1, 0x7F81, 0x3F80,
                                       0xBF80, 0x0001};
    uint64_t r = test_rand(s);
    if (r % 7 == 0)
        return special[(r >> 8) % (sizeof special / sizeof special[0])];
    if (r % 7 == 1) /* heavy ties: small integers */
        return (uint16_t)(0x4000 + ((r >> 8) % 4) * 0x80);
    return (uint16_t)(r >> 16);
}

static void run_case(dcptopk_context *ctx, int32_t n, int64_t rows,
                     int64_t ls, int64_t max_len, int64_t ids_stride,
                     uint64_t seed, int *failed)
{
    *failed = 1;
    uint64_t s = seed;
    size_t nlog = (size_t)(rows * ls), nids = (size_t)(rows * ids_stride);
    int64_t words = n + n / 32;
    uint16_t *logits = malloc(nlog * sizeof *logits);
    int32_t *ids = malloc(nids * sizeof *ids);
    int32_t *ends = malloc((size_t)rows * sizeof *ends);
    int32_t *want = malloc((size_t)(rows * words) * sizeof *want);
    int32_t *got = malloc((size_t)(rows * words) * sizeof *got);
    if (!logits || !ids || !ends || !want || !got)
        goto out;
    for (size_t i = 0; i < nlog; i++)
        logits[i] = pick_bf16(&s);
    for (int64_t t = 0; t < rows; t++) {
        uint64_t r = test_rand(&s);
        switch (t % 5) {
        case 0: ends[t] = (int32_t)ls; break;
        case 1: ends[t] = 0; break;
        case 2: ends[t] = -3; break;
        case 3: ends[t] = (int32_t)(r % (uint64_t)ls); break;
        default: ends[t] = (int32_t)ls + 100; break;
        }
        for (int64_t j = 0; j < ids_stride; j++) {
            uint64_t q = test_rand(&s);
            int32_t l;
            if (q % 11 == 0)
                l = -1 - (int32_t)(q % 5);
            else if (q % 11 == 1)
                l = (int32_t)ls + (int32_t)(q % 50); /* past every bound */
            else if (q % 11 == 2)
                l = (1 << 16) + (int32_t)((q >> 8) % 1000); /* bit 16 set */
            else
                l = (int32_t)((q >> 8) % (uint64_t)ls);
            if (j > 0 && q % 13 == 3)
                l = ids[t * ids_stride + j - 1]; /* a duplicate id */
            ids[t * ids_stride + j] = l;
        }
    }
    contract_pack_indices(logits, ls, max_len, ends, ids, ids_stride, rows, n,
                          want);

    uint64_t d_log = gpu_upload(ctx, logits, nlog * sizeof *logits);
    uint64_t d_ids = gpu_upload(ctx, ids, nids * sizeof *ids);
    uint64_t d_ends = gpu_upload(ctx, ends, (size_t)rows * sizeof *ends);
    uint64_t d_out = gpu_alloc(ctx, (size_t)(rows * words) * sizeof *got);
    if (d_log && d_ids && d_ends && d_out) {
        /* Poison the output: every word must be written. */
        dc_memset_async(ctx, d_out, 0xAB, (size_t)(rows * words) * 4, NULL);
        dcptopk_key key;
        memset(&key, 0, sizeof key);
        key.kernel = DCPTOPK_KERNEL_PACK_INDICES;
        key.local_topk = n;
        long long a_ls = ls, a_max = max_len, a_ids = ids_stride, a_rows = rows;
        void *params[] = {&d_log, &a_ls, &a_max, &d_ends, &d_ids, &a_ids,
                          &a_rows, &d_out};
        uint32_t threads = 256; /* the registry's choice for pack_indices */
        dc_launch_cfg lc = {
            .grid = {(uint32_t)((n + threads - 1) / threads), (uint32_t)rows,
                     1},
            .block = {threads, 1, 1}};
        if (dc_launch(ctx, &key, "dcptopk_pack_indices", &lc, params)) {
            fprintf(stderr, "dc_launch: %s\n", dcptopk_last_error(ctx));
        } else if (gpu_download(ctx, got, d_out,
                                (size_t)(rows * words) * sizeof *got) == 0) {
            int64_t bad = 0;
            for (int64_t i = 0; i < rows * words; i++) {
                if (got[i] != want[i] && bad++ < 5)
                    fprintf(stderr,
                            "N=%d row %lld word %lld: got 0x%08x want 0x%08x\n",
                            n, (long long)(i / words), (long long)(i % words),
                            (unsigned)got[i], (unsigned)want[i]);
            }
            if (bad)
                fprintf(stderr, "N=%d: %lld of %lld words differ\n", n,
                        (long long)bad, (long long)(rows * words));
            else
                *failed = 0;
        }
    }
    gpu_free(ctx, d_log);
    gpu_free(ctx, d_ids);
    gpu_free(ctx, d_ends);
    gpu_free(ctx, d_out);
out:
    free(logits);
    free(ids);
    free(ends);
    free(want);
    free(got);
}

TEST(pack_indices_matches_contract)
{
    GPU_CTX(ctx);
    int failed = 0;
    /* N below, equal to and above the block; logits wider than 2^17 so that
     * bit 16 and the 2^17 bound are exercised. */
    run_case(ctx, 384, 23, (1 << 17) + 64, 1 << 17, 384, 1, &failed);
    CHECK_EQ(failed, 0);
    run_case(ctx, 96, 17, (1 << 17) + 64, 70000, 100, 2, &failed);
    CHECK_EQ(failed, 0);
    run_case(ctx, 256, 9, 4096, 4096, 256, 3, &failed);
    CHECK_EQ(failed, 0);
    dcptopk_context_stats cs = DCPTOPK_CONTEXT_STATS_INIT;
    CHECK_OK(dcptopk_context_stats_get(ctx, &cs));
    CHECK_EQ(cs.launches, 3);
    CHECK_EQ(cs.modules, 3);
    uint64_t compiles = cs.compiles + cs.cache_hits;
    /* Same key again: a table hit. */
    run_case(ctx, 384, 5, 1024, 1024, 384, 4, &failed);
    CHECK_EQ(failed, 0);
    CHECK_OK(dcptopk_context_stats_get(ctx, &cs));
    CHECK_EQ(cs.compiles + cs.cache_hits, compiles);
    CHECK_EQ(cs.launches, 4);
    dcptopk_context_destroy(ctx);
}

TEST(launch_errors_are_reported)
{
    GPU_CTX(ctx);
    dcptopk_key key;
    memset(&key, 0, sizeof key);
    key.kernel = DCPTOPK_KERNEL_PACK_INDICES;
    key.local_topk = 96;
    dc_launch_cfg lc = {.grid = {1, 1, 1}, .block = {256, 1, 1}};
    CHECK_EQ(dc_launch(ctx, &key, "no_such_entry", &lc, NULL),
             DCPTOPK_CUDA_ERROR);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "no_such_entry");
    lc.cluster_x = 2;
    lc.grid[0] = 3;
    CHECK_EQ(dc_launch(ctx, &key, "dcptopk_pack_indices", &lc, NULL),
             DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "cluster_x = 2");
    CHECK(dc_ctx_sm_count(ctx) > 0);
    CHECK(dc_ctx_smem_optin(ctx) >= 48 * 1024);
    dcptopk_context_destroy(ctx);
}
