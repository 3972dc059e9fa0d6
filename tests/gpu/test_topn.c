/*
 * test_topn.c - the fused local top-N + pack (kernels/topn/topn_pack.cu) and the
 * push of round 2 (kernels/topn/push.cu), bit for bit against the CPU reference
 * (dcptopk_ref_pack, dcptopk_ref_push_list), over the input families, the
 * shapes of issue #4 and every code path (one CTA per row and clusters of 2,
 * 4 and 8 CTAs per row, forced through dc_*_launch_variant).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packed.h"
#include "gen.h"
#include "gpu_util.h"
#include "harness.h"
#include "runtime.h"
#include "topn.h"

/* Families of the pack tests: the simple ones of gen.h plus short rows. */
static const int pack_families[] = {
    DC_FAM_NORMAL,   DC_FAM_NORMAL_100,  DC_FAM_INTEGER,
    DC_FAM_ALL_EQUAL, DC_FAM_ALL_ZERO,   DC_FAM_INF,
    DC_FAM_SIGNED_ZERO, DC_FAM_NAN_ROWS, DC_FAM_SHORT_ROWS};
#define PACK_FAMILIES ((int)(sizeof pack_families / sizeof pack_families[0]))

/* Host inputs of one call: T rows of `stride` bf16 (columns past S hold +inf,
 * which must never be read), and row ends. */
typedef struct host_rows {
    int64_t rows, s, stride;
    uint16_t *logits;
    int32_t *row_ends;
} host_rows;

static void host_rows_free(host_rows *h)
{
    free(h->logits);
    free(h->row_ends);
}

static int host_rows_make(host_rows *h, int family, int64_t rows, int64_t s,
                          int32_t n, uint64_t seed)
{
    dc_rng rng;
    dc_rng_seed(&rng, seed);
    h->rows = rows;
    h->s = s;
    h->stride = (s + 7) / 8 * 8 + (seed & 1 ? 8 : 0);
    h->logits = malloc(sizeof *h->logits * (size_t)(rows * h->stride));
    h->row_ends = malloc(sizeof *h->row_ends * (size_t)rows);
    if (!h->logits || !h->row_ends)
        return -1;
    for (int64_t t = 0; t < rows; t++) {
        uint16_t *row = h->logits + t * h->stride;
        dc_gen_bf16_row(&rng, family, row, s);
        for (int64_t j = s; j < h->stride; j++)
            row[j] = DC_BF16_POS_INF;
        int64_t special[] = {0, 1, n - 1, n, n + 1, s / 2, s + 5, -3,
                             (int64_t)dc_rng_below(&rng, (uint64_t)s + 1)};
        int64_t end = s;
        uint64_t pick = dc_rng_below(&rng, 8);
        if (family == DC_FAM_SHORT_ROWS || pick == 0)
            end = special[dc_rng_below(&rng, sizeof special / sizeof *special)];
        else if (pick == 1)
            end = s + (int64_t)dc_rng_below(&rng, 64); /* past S: cut to S */
        if (end < -3)
            end = -3;
        h->row_ends[t] = (int32_t)end;
    }
    return 0;
}

static dcptopk_merge_config pack_config(int32_t n)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.local_topk = n;
    c.topk = n < 2048 ? 2048 : 4096; /* N < K for a packed config */
    return c;
}

/* Runs the pack of `h` on the GPU with each variant of `variants` (-1 =
 * automatic) and compares with the reference. Returns 0 when equal. */
static int pack_case(dcptopk_context *ctx, const host_rows *h, int32_t n,
                     const int32_t *variants, int nvariants, const char *what)
{
    const dcptopk_merge_config c = pack_config(n);
    const int64_t words = n + n / 32;
    const size_t out_bytes = sizeof(int32_t) * (size_t)(h->rows * words);
    int32_t *ref = malloc(out_bytes), *got = malloc(out_bytes);
    int bad = 1;
    uint64_t d_logits = 0, d_ends = 0, d_out = 0;
    if (!ref || !got)
        goto done;
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    a.logits = h->logits;
    a.logits_stride = h->stride;
    a.max_local_len = h->s;
    a.row_ends = h->row_ends;
    a.rows = h->rows;
    a.out = ref;
    if (dcptopk_ref_pack(&c, &a)) {
        fprintf(stderr, "%s: reference failed: %s\n", what,
                dcptopk_last_error(NULL));
        goto done;
    }
    d_logits = gpu_upload(ctx, h->logits,
                          sizeof(uint16_t) * (size_t)(h->rows * h->stride));
    d_ends = gpu_upload(ctx, h->row_ends, sizeof(int32_t) * (size_t)h->rows);
    d_out = gpu_alloc(ctx, out_bytes);
    if (!d_logits || !d_ends || !d_out)
        goto done;
    a.logits = (const uint16_t *)(uintptr_t)d_logits;
    a.row_ends = (const int32_t *)(uintptr_t)d_ends;
    a.out = (int32_t *)(uintptr_t)d_out;
    if (dc_check_pack_args(ctx, &c, &a, 0)) {
        fprintf(stderr, "%s: check: %s\n", what, dcptopk_last_error(ctx));
        goto done;
    }
    for (int vi = 0; vi < nvariants; vi++) {
        /* A poisoned output: every word must be written. */
        dc_memset_async(ctx, d_out, 0xA5, out_bytes, NULL);
        dcptopk_result r =
            dc_topn_pack_launch_variant(ctx, &c, &a, variants[vi]);
        if (!r)
            r = dc_stream_sync(ctx, NULL);
        if (r) {
            fprintf(stderr, "%s variant %d: %s: %s\n", what, variants[vi],
                    dcptopk_result_name(r), dcptopk_last_error(ctx));
            goto done;
        }
        if (gpu_download(ctx, got, d_out, out_bytes))
            goto done;
        for (int64_t t = 0; t < h->rows; t++)
            for (int64_t j = 0; j < words; j++) {
                int32_t e = ref[t * words + j], g = got[t * words + j];
                if (e != g) {
                    fprintf(stderr,
                            "%s variant %d: row %lld (row_end %d) word %lld: "
                            "expected 0x%08x, got 0x%08x\n",
                            what, variants[vi], (long long)t, h->row_ends[t],
                            (long long)j, (unsigned)e, (unsigned)g);
                    goto done;
                }
            }
    }
    bad = 0;
done:
    gpu_free(ctx, d_logits);
    gpu_free(ctx, d_ends);
    gpu_free(ctx, d_out);
    free(ref);
    free(got);
    return bad;
}

/* The sweep of issue #4 for one N: S in {1000, 16384, 131072} x T in {1, 7,
 * 64, 1000}; small shapes over every family, large ones over one family each
 * (rotating); every shape with the automatic variant and one forced one. */
static void pack_sweep(int32_t n)
{
    GPU_CTX(ctx);
    static const int64_t ss[] = {1000, 16384, 131072};
    static const int64_t ts[] = {1, 7, 64, 1000};
    int failures = 0, cases = 0;
    for (int si = 0; si < 3; si++)
        for (int ti = 0; ti < 4; ti++) {
            const int64_t s = ss[si], t = ts[ti];
            const int all = s * t <= 2 * 1024 * 1024;
            for (int fi = 0; fi < PACK_FAMILIES; fi++) {
                if (!all && fi != (si * 4 + ti + n / 32) % PACK_FAMILIES)
                    continue;
                const int fam = pack_families[fi];
                const uint64_t seed = (uint64_t)n * 1000003u +
                                      (uint64_t)s * 31u + (uint64_t)t * 7u +
                                      (uint64_t)fi;
                host_rows h;
                memset(&h, 0, sizeof h);
                if (host_rows_make(&h, fam, t, s, n, seed)) {
                    host_rows_free(&h);
                    CHECK_MSG(0, "out of host memory");
                }
                const int32_t variants[2] = {-1, (int32_t)(seed % 4)};
                char what[160];
                snprintf(what, sizeof what, "N=%d S=%lld T=%lld family %s",
                         n, (long long)s, (long long)t, dc_family_name(fam));
                failures += pack_case(ctx, &h, n, variants, 2, what);
                cases++;
                host_rows_free(&h);
            }
        }
    printf("N=%d: %d cases, %d failed\n", n, cases, failures);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

TEST(pack_n32) { pack_sweep(32); }
TEST(pack_n96) { pack_sweep(96); }
TEST(pack_n192) { pack_sweep(192); }
TEST(pack_n256) { pack_sweep(256); }
TEST(pack_n384) { pack_sweep(384); }
TEST(pack_n2048) { pack_sweep(2048); }

/* Small shapes through every variant: what the sanitizers run. */
TEST(pack_small)
{
    GPU_CTX(ctx);
    static const int32_t variants[] = {0, 1, 2, 3};
    int failures = 0;
    for (int fi = 0; fi < PACK_FAMILIES; fi++) {
        host_rows h;
        memset(&h, 0, sizeof h);
        /* 70000 and 131072: clusters only; 131072 also gives the cluster's
         * CTAs pieces of four whole rounds (step 1's batched loads). */
        const int64_t s = fi % 2 ? 3000 : (fi % 4 ? 131072 : 70000);
        if (host_rows_make(&h, pack_families[fi], 3, s, 96, 77u + (uint64_t)fi)) {
            host_rows_free(&h);
            CHECK_MSG(0, "out of host memory");
        }
        char what[96];
        snprintf(what, sizeof what, "small S=%lld family %s", (long long)s,
                 dc_family_name(pack_families[fi]));
        failures += pack_case(ctx, &h, 96, variants, 4, what);
        host_rows_free(&h);
    }
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* N or more keys far above the rest at the start of a row (distinct, or all
 * equal), and everywhere else normal scores: the keys above the first
 * window of the selection are N or more, which takes its slow exact path. */
TEST(pack_heavy_head)
{
    GPU_CTX(ctx);
    static const int32_t variants[] = {0, 1, 2, 3};
    static const struct { int32_t n; int64_t s, head; } shapes[] = {
        {96, 3000, 200}, {384, 3000, 400}, {384, 70000, 1000}, {96, 70000, 96}};
    int failures = 0;
    for (int i = 0; i < 4; i++) {
        for (int tied = 0; tied < 2; tied++) {
            host_rows h;
            memset(&h, 0, sizeof h);
            if (host_rows_make(&h, DC_FAM_NORMAL, 3, shapes[i].s, shapes[i].n,
                               900u + (uint64_t)(2 * i + tied))) {
                host_rows_free(&h);
                CHECK_MSG(0, "out of host memory");
            }
            for (int64_t t = 0; t < h.rows; t++)
                for (int64_t j = 0; j < shapes[i].head && j < shapes[i].s; j++)
                    h.logits[t * h.stride + j] =
                        (uint16_t)(tied ? 0x7000 : 0x7000 + (j * 37) % 1000);
            char what[96];
            snprintf(what, sizeof what, "heavy head N=%d S=%lld head=%lld%s",
                     shapes[i].n, (long long)shapes[i].s, (long long)shapes[i].head,
                     tied ? " tied" : "");
            failures += pack_case(ctx, &h, shapes[i].n, variants, 4, what);
            host_rows_free(&h);
        }
    }
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* A row of `s` columns changed in place by a long-row test: row t of the
 * call, N = n, `kind` chosen by the test. */
typedef void (*row_edit)(uint16_t *row, int64_t s, int64_t t, int32_t n, int kind);

/* Normal rows of 2^17 columns (row_end = S), changed by `edit`, packed with
 * every cluster size and compared with the reference. Returns 0 when every
 * output matches. */
static int long_rows_case(dcptopk_context *ctx, int32_t n, int kind, int64_t rows,
                          uint64_t seed, row_edit edit, const char *what)
{
    static const int32_t variants[] = {-1, 1, 2, 3};
    const int64_t s = 131072;
    host_rows h;
    memset(&h, 0, sizeof h);
    int bad = 1;
    if (host_rows_make(&h, DC_FAM_NORMAL, rows, s, n, seed)) {
        fprintf(stderr, "%s: out of host memory\n", what);
    } else {
        for (int64_t t = 0; t < h.rows; t++) {
            h.row_ends[t] = (int32_t)s;
            edit(h.logits + t * h.stride, s, t, n, kind);
        }
        bad = pack_case(ctx, &h, n, variants, 4, what);
    }
    host_rows_free(&h);
    return bad;
}

/* long_rows_case for N in {96, 384} and kind in {0, 1}: `rows` rows each,
 * seed seed0 + 2 * (N index) + kind, cases named "<label> N=<n> <kind's
 * name>". Returns the failures. */
static int long_rows_sweep(dcptopk_context *ctx, row_edit edit, int64_t rows, uint64_t seed0,
                           const char *label, const char *const kind_names[2])
{
    static const int32_t ns[] = {96, 384};
    int failures = 0;
    for (int i = 0; i < 2; i++)
        for (int kind = 0; kind < 2; kind++) {
            char what[96];
            snprintf(what, sizeof what, "%s N=%d %s", label, ns[i], kind_names[kind]);
            failures += long_rows_case(ctx, ns[i], kind, rows, seed0 + (uint64_t)(2 * i + kind),
                                       edit, what);
        }
    return failures;
}

/* Keys spanning about 30 octaves, more than the selection's window of 16:
 * N + 50 moderate keys (about 1000) in the first CTA's columns, and in the
 * last CTA's columns either N / 2 huge keys one per 8-key vector (kind 0), or
 * 2N huge keys packed side by side (kind 1: few vectors hold them, so the
 * lower bound from the vectors' maxima stays low and N or more keys lie above
 * the window, the slow exact path). */
static void wide_span_edit(uint16_t *row, int64_t s, int64_t t, int32_t n, int packed)
{
    for (int64_t j = 0; j < n + 50; j++) /* bf16 0x4470..0x44AF: 960..1400 */
        row[8 * j] = (uint16_t)(0x4470 + (j * 7 + t) % 64);
    const int64_t huge = packed ? 2 * (int64_t)n : n / 2;
    const int64_t step = packed ? 1 : 8;
    for (int64_t j = 0; j < huge; j++) /* bf16 0x7000..0x7ED7: 2^97..2^126 */
        row[s - 1 - step * j] = (uint16_t)(0x7000 + (j * 37 + t) % 3800);
}

TEST(pack_wide_span)
{
    GPU_CTX(ctx);
    static const char *const kinds[2] = {"huge keys one a vector", "packed huge keys"};
    const int failures = long_rows_sweep(ctx, wide_span_edit, 3, 700u, "wide span", kinds);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* Causal-style masks: from a cut in the row's second half every column holds
 * -inf (kind 0), or one mask value (kind 1: bf16 0xC61C, about -10000, as
 * engines fill), so the CTAs past the cut hold fewer than N values above the
 * mask (a bound of their own would list every vector). Cuts: 3 columns past
 * the middle, a quarter from the end, 100 columns from the end, 40 vectors
 * past the middle. */
static void masked_tail_edit(uint16_t *row, int64_t s, int64_t t, int32_t n, int mask)
{
    (void)n;
    const int64_t cuts[4] = {s / 2 + 3, s - s / 4, s - 100, s / 2 + 320};
    for (int64_t j = cuts[t % 4]; j < s; j++)
        row[j] = mask ? (uint16_t)0xC61C : DC_BF16_NEG_INF;
}

TEST(pack_masked_tail)
{
    GPU_CTX(ctx);
    static const char *const kinds[2] = {"-inf", "-9984"};
    const int failures = long_rows_sweep(ctx, masked_tail_edit, 4, 800u, "masked tail", kinds);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* Tied rows whose larger keys come last: three columns in four hold 3.0 and
 * the rest 2.0, so that most vectors' maxima share one bin, and N / 4
 * columns in the row's last vectors hold 4.0 (kind 0: side by side; kind 1:
 * one every 8 columns). The selection fills its quota of keys == 3.0 within
 * the first CTA's first list entries while the keys above it still lie
 * ahead: the compaction must run on to them. */
static void tied_late_edit(uint16_t *row, int64_t s, int64_t t, int32_t n, int spread)
{
    for (int64_t j = 0; j < s; j++)
        row[j] = (uint16_t)(((uint64_t)j * 7u + (uint64_t)t) % 4u == 0 ? 0x4000 : 0x4040);
    const int64_t step = spread ? 8 : 1;
    for (int64_t j = 0; j < n / 4; j++)
        row[s - 1 - step * j - t % 8] = 0x4080;
}

TEST(pack_tied_late_keys)
{
    GPU_CTX(ctx);
    static const char *const kinds[2] = {"side by side", "one a vector"};
    const int failures = long_rows_sweep(ctx, tied_late_edit, 3, 900u, "tied, late keys", kinds);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* Rows = 0 launches nothing; the keys of a config list every variant. */
TEST(pack_keys_and_empty)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    dcptopk_key keys[16];
    dc_key_list l = {.keys = keys, .cap = 16};
    dc_topn_keys(&c, "sm_90a", &l);
    CHECK_EQ(l.n, 8);
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ(keys[i].kernel, DCPTOPK_KERNEL_TOPN_PACK);
        CHECK_EQ(keys[i].variant, (int64_t)i);
        CHECK_EQ(keys[4 + i].kernel, DCPTOPK_KERNEL_PUSH);
        CHECK_EQ(keys[4 + i].variant, (int64_t)i);
        CHECK_EQ(keys[4 + i].topk, 2048);
    }
    /* Past cap: counted, not written. */
    dc_key_list small = {.keys = keys, .cap = 2};
    c.exact = 0;
    dc_topn_keys(&c, "sm_90a", &small);
    CHECK_EQ(small.n, 4);
    /* The automatic choice: prefill one CTA per row, decode split. */
    CHECK_EQ(dc_topn_variant(6710, 16384, 132, 0), 0);
    CHECK(dc_topn_variant(64, 131072, 132, 0) >= 1);
    CHECK_EQ(dc_topn_variant(8, 131072, 132, 0), 2);
    CHECK(dc_topn_variant(1000, 131072, 132, 0) >= 1);

    GPU_CTX(ctx);
    /* Every key compiles and loads. */
    dcptopk_key all[8];
    dc_key_list la = {.keys = all, .cap = 8};
    c.exact = 1;
    dc_topn_keys(&c, NULL, &la);
    dcptopk_result r = dcptopk_warmup_keys(ctx, all, la.n, NULL, NULL, NULL);
    if (r)
        fprintf(stderr, "warmup: %s\n", dcptopk_last_error(ctx));
    CHECK_EQ(r, DCPTOPK_SUCCESS);
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    a.rows = 0;
    CHECK_EQ(dc_topn_pack_launch(ctx, &c, &a), DCPTOPK_SUCCESS);
    dcptopk_context_destroy(ctx);
}

/* ------------------------------------------------------------------ push */

/* One push on one GPU: W receive buffers and W flag arrays (the "peers"),
 * rows with and without this rank's bit; lists, untouched slots and flags
 * checked exactly. */
static int push_case(dcptopk_context *ctx, int32_t k, int32_t n, int32_t w,
                     int32_t rank, int64_t rows, int64_t s, int family,
                     int32_t variant, uint64_t seed)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = k;
    c.local_topk = n;
    c.world_size = w;
    c.exact = 1;
    const int32_t slots = dcptopk_rescue_slots(k, n);
    const int64_t words = k + k / 32;
    const int64_t max_rows = rows + 3;
    const size_t recv_words = (size_t)(max_rows * slots * words);
    const size_t flag_words = (size_t)(w * max_rows);
    host_rows h;
    memset(&h, 0, sizeof h);
    int bad = 1;
    uint32_t *sat = malloc(sizeof *sat * (size_t)rows);
    uint32_t *seq = malloc(sizeof *seq * (size_t)max_rows);
    int32_t *recv = malloc(sizeof *recv * recv_words);
    uint32_t *flags = malloc(sizeof *flags * flag_words);
    int32_t *list = malloc(sizeof *list * (size_t)words);
    uint64_t d_recv[16] = {0}, d_flags[16] = {0}, d_tab_r = 0, d_tab_f = 0;
    uint64_t d_logits = 0, d_ends = 0, d_sat = 0, d_seq = 0;
    char what[200];
    snprintf(what, sizeof what,
             "push K=%d N=%d W=%d rank=%d T=%lld S=%lld family %s variant %d",
             k, n, w, rank, (long long)rows, (long long)s,
             dc_family_name(family), variant);
    if (!sat || !seq || !recv || !flags || !list ||
        host_rows_make(&h, family, rows, s, k, seed))
        goto done;
    dc_rng rng;
    dc_rng_seed(&rng, seed ^ 0x9E3779B97F4A7C15ull);
    for (int64_t t = 0; t < rows; t++) {
        /* A mask of at most `slots` ranks, with this rank about half the
         * time; tau16 in the low half is arbitrary. */
        uint32_t mask = 0;
        int32_t m = (int32_t)dc_rng_below(&rng, (uint64_t)(slots < w ? slots : w) + 1);
        if (dc_rng_below(&rng, 2) && m > 0) {
            mask |= 1u << rank;
            m--;
        }
        for (int32_t i = 0; i < m; i++) {
            int32_t q = (int32_t)dc_rng_below(&rng, (uint64_t)w);
            if (q != rank)
                mask |= 1u << q;
        }
        sat[t] = (mask << 16) | (uint32_t)dc_rng_below(&rng, 65536);
    }
    for (int64_t t = 0; t < max_rows; t++)
        seq[t] = (uint32_t)dc_rng_next(&rng);
    seq[0] = 0xFFFFFFFFu; /* wraps to 0 */
    for (size_t i = 0; i < recv_words; i++)
        recv[i] = 0x5A5A5A5A;
    for (size_t i = 0; i < flag_words; i++)
        flags[i] = 0x77u;
    for (int32_t p = 0; p < w; p++) {
        d_recv[p] = gpu_upload(ctx, recv, sizeof *recv * recv_words);
        d_flags[p] = gpu_upload(ctx, flags, sizeof *flags * flag_words);
        if (!d_recv[p] || !d_flags[p])
            goto done;
    }
    d_tab_r = gpu_upload(ctx, d_recv, sizeof(uint64_t) * (size_t)w);
    d_tab_f = gpu_upload(ctx, d_flags, sizeof(uint64_t) * (size_t)w);
    d_logits = gpu_upload(ctx, h.logits,
                          sizeof(uint16_t) * (size_t)(rows * h.stride));
    d_ends = gpu_upload(ctx, h.row_ends, sizeof(int32_t) * (size_t)rows);
    d_sat = gpu_upload(ctx, sat, sizeof *sat * (size_t)rows);
    d_seq = gpu_upload(ctx, seq, sizeof *seq * (size_t)max_rows);
    if (!d_tab_r || !d_tab_f || !d_logits || !d_ends || !d_sat || !d_seq)
        goto done;
    dc_push_args pa;
    memset(&pa, 0, sizeof pa);
    pa.logits = (const uint16_t *)(uintptr_t)d_logits;
    pa.logits_stride = h.stride;
    pa.max_local_len = s;
    pa.row_ends = (const int32_t *)(uintptr_t)d_ends;
    pa.rows = rows;
    pa.rank = rank;
    pa.sat = (const uint32_t *)(uintptr_t)d_sat;
    pa.seq = (const uint32_t *)(uintptr_t)d_seq;
    pa.peer_recv = (const uint64_t *)(uintptr_t)d_tab_r;
    pa.peer_flags = (const uint64_t *)(uintptr_t)d_tab_f;
    pa.max_rows = max_rows;
    dcptopk_result r = dc_push_launch_variant(ctx, &c, &pa, variant);
    if (!r)
        r = dc_stream_sync(ctx, NULL);
    if (r) {
        fprintf(stderr, "%s: %s: %s\n", what, dcptopk_result_name(r),
                dcptopk_last_error(ctx));
        goto done;
    }
    for (int32_t p = 0; p < w; p++) {
        if (gpu_download(ctx, recv, d_recv[p], sizeof *recv * recv_words) ||
            gpu_download(ctx, flags, d_flags[p], sizeof *flags * flag_words))
            goto done;
        for (int64_t t = 0; t < max_rows; t++) {
            const uint32_t mask = t < rows ? sat[t] >> 16 : 0u;
            const int mine = (mask >> rank) & 1u;
            const int32_t my_slot =
                __builtin_popcount(mask & ((1u << rank) - 1u));
            if (mine && dcptopk_ref_push_list(&c, h.logits + t * h.stride, s,
                                              h.row_ends[t], list)) {
                fprintf(stderr, "%s: reference: %s\n", what,
                        dcptopk_last_error(NULL));
                goto done;
            }
            for (int32_t sl = 0; sl < slots; sl++) {
                const int32_t *got = recv + ((size_t)t * (size_t)slots + (size_t)sl) * (size_t)words;
                for (int64_t j = 0; j < words; j++) {
                    int32_t e = (mine && sl == my_slot) ? list[j] : 0x5A5A5A5A;
                    if (got[j] != e) {
                        fprintf(stderr,
                                "%s: peer %d row %lld slot %d word %lld: "
                                "expected 0x%08x got 0x%08x (mask 0x%x)\n",
                                what, p, (long long)t, sl, (long long)j,
                                (unsigned)e, (unsigned)got[j], mask);
                        goto done;
                    }
                }
            }
            for (int32_t q = 0; q < w; q++) {
                uint32_t e = (q == rank && mine) ? seq[t] + 1u : 0x77u;
                uint32_t g = flags[(size_t)q * (size_t)max_rows + (size_t)t];
                if (g != e) {
                    fprintf(stderr,
                            "%s: peer %d flag [%d][%lld]: expected 0x%x got "
                            "0x%x\n",
                            what, p, q, (long long)t, e, g);
                    goto done;
                }
            }
        }
    }
    bad = 0;
done:
    for (int32_t p = 0; p < w; p++) {
        gpu_free(ctx, d_recv[p]);
        gpu_free(ctx, d_flags[p]);
    }
    gpu_free(ctx, d_tab_r);
    gpu_free(ctx, d_tab_f);
    gpu_free(ctx, d_logits);
    gpu_free(ctx, d_ends);
    gpu_free(ctx, d_sat);
    gpu_free(ctx, d_seq);
    host_rows_free(&h);
    free(sat);
    free(seq);
    free(recv);
    free(flags);
    free(list);
    if (bad)
        fprintf(stderr, "FAILED: %s\n", what);
    return bad;
}

TEST(push_lists)
{
    GPU_CTX(ctx);
    static const struct {
        int32_t k, n, w;
    } cfgs[] = {{2048, 384, 8}, {2048, 256, 3}, {1024, 192, 16},
                {512, 96, 1},   {512, 384, 2},  {4096, 384, 4}};
    static const int fams[] = {DC_FAM_NORMAL, DC_FAM_INTEGER, DC_FAM_ALL_EQUAL,
                               DC_FAM_NAN_ROWS, DC_FAM_SHORT_ROWS, DC_FAM_INF};
    static const int64_t ss[] = {1000, 16384, 131072};
    static const int64_t ts[] = {1, 7, 64};
    int failures = 0, cases = 0;
    for (int ci = 0; ci < 6; ci++)
        for (int si = 0; si < 3; si++)
            for (int ti = 0; ti < 3; ti++) {
                const int idx = ci * 9 + si * 3 + ti;
                const int32_t w = cfgs[ci].w;
                const int32_t rank = (int32_t)(idx % w);
                const int fam = fams[idx % 6];
                const int32_t variant = idx % 3 == 0 ? -1 : idx % 4;
                failures += push_case(ctx, cfgs[ci].k, cfgs[ci].n, w, rank,
                                      ts[ti], ss[si], fam, variant,
                                      1234u + (uint64_t)idx);
                cases++;
            }
    printf("push: %d cases, %d failed\n", cases, failures);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* More rows than the push's resident groups (two CTAs an SM): every group
 * loops over its rows and lists the ones with this rank's bit. */
TEST(push_many_rows)
{
    GPU_CTX(ctx);
    int failures = 0;
    failures += push_case(ctx, 512, 96, 4, 1, 1500, 1000, DC_FAM_NORMAL, -1, 5u);
    failures += push_case(ctx, 2048, 384, 8, 7, 700, 4096, DC_FAM_INTEGER, -1, 6u);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}

/* Small push through every variant (sanitizers). */
TEST(push_small)
{
    GPU_CTX(ctx);
    int failures = 0;
    for (int32_t v = 0; v < 4; v++)
        failures += push_case(ctx, 512, 96, 4, 2, 5, v % 2 ? 3000 : 70000,
                              v % 2 ? DC_FAM_INTEGER : DC_FAM_NORMAL, v,
                              99u + (uint64_t)v);
    dcptopk_context_destroy(ctx);
    CHECK_EQ(failures, 0);
}
