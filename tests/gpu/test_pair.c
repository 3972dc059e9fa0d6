/* test_pair.c - the pair merge on the GPU (dcptopk_pair_select,
 * dcptopk_pair_pack) against the CPU reference, bit for bit: ids, owned rows
 * and counts for W in {1,2,3,4,8,16}, K in {512,1024,2048,4096}, T in
 * {1,4,6710}, every candidate family (normal, 30% invalid, all-invalid rows,
 * +-inf/NaN/+-0, heavy ties, duplicated candidates), both layouts (identical
 * outputs), padded rank strides, 8-byte aligned buffers, CUDA graph replay,
 * the pack with and without row starts for interleave 1, 2, 4, and argument
 * errors. select_every_split runs each row split over a cluster of 2 and 4
 * CTAs (dc_pair_select_split), which the entry points do not choose. */
#include <stdlib.h>
#include <string.h>

#include "dcptopk.h"
#include "gen.h"
#include "gpu_util.h"
#include "harness.h"
#include "pair.h"
#include "runtime.h"

#define SENTINEL 0x5A5A5A5A

typedef struct pair_case {
    int32_t w, k, s, b; /* world size, topk, interleave, block size       */
    int64_t t;          /* rows                                          */
    int family;         /* DC_PFAM_*, or -1: every candidate identical   */
    uint64_t seed;
    int64_t pad_rows;   /* rank_stride_rows = t + pad_rows                */
    int misalign;       /* candidates 8-byte (not 16-byte) aligned       */
    int32_t rank;
    int64_t ref_rows;   /* rows checked against the reference (at both ends) */
    int32_t split;      /* log2 of the CTAs a row; -1: the launcher's choice */
} pair_case;

static dcptopk_merge_config pair_config(int32_t w, int32_t k, int32_t s,
                                        int32_t b)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.kind = DCPTOPK_MERGE_PAIR;
    c.topk = k;
    c.local_topk = k;
    c.world_size = w;
    c.block_size = b;
    c.interleave = s;
    c.emit_ids = 1;
    c.exact = 0;
    return c;
}

/* First difference of two [rows, stride] int32 arrays over `width` columns,
 * or -1. */
static int64_t first_diff(const int32_t *a, const int32_t *b, int64_t rows,
                          int64_t stride, int64_t width, int64_t *col)
{
    for (int64_t t = 0; t < rows; t++)
        for (int64_t i = 0; i < width; i++)
            if (a[t * stride + i] != b[t * stride + i]) {
                *col = i;
                return t;
            }
    return -1;
}

/* The host inputs of a case: rank-major with padding rows (which hold
 * candidates that would win, so a read past T shows), and row-major. */
typedef struct pair_inputs {
    int32_t *rank_major; /* [W, T + pad, K, 2] */
    int32_t *row_major;  /* [T, W*K, 2]        */
    int64_t t_alloc;
} pair_inputs;

static int make_inputs(const pair_case *pc, pair_inputs *in)
{
    int64_t wk = (int64_t)pc->w * pc->k, t = pc->t;
    in->t_alloc = t + pc->pad_rows;
    int32_t *gen = NULL;
    if (pc->family >= 0) {
        gen = dc_gen_pair_candidates(pc->family, pc->k, pc->w, pc->s, t,
                                     pc->seed);
        if (!gen)
            return -1;
    }
    size_t rm = (size_t)pc->w * (size_t)in->t_alloc * (size_t)pc->k * 2;
    in->rank_major = malloc(sizeof(int32_t) * (rm ? rm : 1));
    in->row_major = malloc(sizeof(int32_t) * (size_t)(t ? t : 1) * (size_t)wk * 2);
    if (!in->rank_major || !in->row_major) {
        free(gen);
        return -1;
    }
    for (int32_t r = 0; r < pc->w; r++)
        for (int64_t row = 0; row < in->t_alloc; row++)
            for (int32_t j = 0; j < pc->k; j++) {
                int32_t *dst = in->rank_major +
                               (((int64_t)r * in->t_alloc + row) * pc->k + j) * 2;
                if (row >= t) {
                    dst[0] = 0x7F800000; /* +inf, gid 7: would win */
                    dst[1] = 7;
                } else if (!gen) {
                    dst[0] = 0x3F800000; /* every candidate 1.0f, gid 5 */
                    dst[1] = 5;
                } else {
                    const int32_t *src =
                        gen + (((int64_t)r * t + row) * pc->k + j) * 2;
                    dst[0] = src[0];
                    dst[1] = src[1];
                }
                if (row < t) {
                    int32_t *rmj = in->row_major +
                                   (row * wk + (int64_t)r * pc->k + j) * 2;
                    rmj[0] = dst[0];
                    rmj[1] = dst[1];
                }
            }
    free(gen);
    return 0;
}

/* Host rows map: requests -1..3 (-1 and 3 own nothing with 3 requests), a
 * block table that drops the highest block indices. */
typedef struct host_map {
    int32_t *req_id, *table;
    int64_t table_stride;
    int32_t cols, num_reqs, stride_rows;
} host_map;

static int make_map(const pair_case *pc, host_map *m)
{
    int64_t t = pc->t ? pc->t : 1;
    /* Local ids of the generated candidates are below 3K (l = 3j + 0..2). */
    int32_t blocks = (3 * pc->k + pc->b - 1) / pc->b;
    m->num_reqs = 3;
    m->cols = blocks - blocks / 4;
    m->table_stride = m->cols + 3;
    m->stride_rows = pc->b + 5;
    m->req_id = malloc(sizeof(int32_t) * (size_t)t);
    m->table = malloc(sizeof(int32_t) * (size_t)(m->table_stride * m->num_reqs));
    if (!m->req_id || !m->table)
        return -1;
    uint64_t st = pc->seed * 7 + 1;
    for (int64_t i = 0; i < t; i++)
        m->req_id[i] = (int32_t)(i % 5) - 1;
    for (int64_t i = 0; i < m->table_stride * m->num_reqs; i++)
        m->table[i] = (int32_t)(test_rand(&st) % 100000);
    return 0;
}

typedef struct pair_outputs {
    int32_t *ids, *rows, *counts;
} pair_outputs;

static int alloc_outputs(pair_outputs *o, int64_t t, int64_t stride)
{
    size_t n = (size_t)(t ? t : 1) * (size_t)stride;
    o->ids = malloc(sizeof(int32_t) * n);
    o->rows = malloc(sizeof(int32_t) * n);
    o->counts = malloc(sizeof(int32_t) * (size_t)(t ? t : 1));
    if (!o->ids || !o->rows || !o->counts)
        return -1;
    for (size_t i = 0; i < n; i++)
        o->ids[i] = o->rows[i] = SENTINEL;
    for (int64_t i = 0; i < (t ? t : 1); i++)
        o->counts[i] = SENTINEL;
    return 0;
}

static void free_outputs(pair_outputs *o)
{
    free(o->ids);
    free(o->rows);
    free(o->counts);
}

/* Reference on rows [t0, t0 + n) into ref (row-indexed like the full
 * output). */
static dcptopk_result ref_rows(const pair_case *pc, const pair_inputs *in,
                               const host_map *m, int64_t t0, int64_t n,
                               int64_t stride, pair_outputs *ref)
{
    dcptopk_merge_config c = pair_config(pc->w, pc->k, pc->s, pc->b);
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    a.candidates = in->rank_major + t0 * pc->k * 2;
    a.layout = DCPTOPK_LAYOUT_RANK_MAJOR;
    a.rows = n;
    a.rank_stride_rows = in->t_alloc;
    a.rank = pc->rank;
    a.ids_out = ref->ids + t0 * stride;
    a.ids_out_stride = stride;
    a.rows_map.req_id = m->req_id + t0;
    a.rows_map.block_table = m->table;
    a.rows_map.block_table_stride = m->table_stride;
    a.rows_map.block_table_cols = m->cols;
    a.rows_map.num_reqs = m->num_reqs;
    a.rows_map.stride_rows = m->stride_rows;
    a.rows_map.rows_out = ref->rows + t0 * stride;
    a.rows_map.rows_out_stride = stride;
    a.rows_map.counts_out = ref->counts + t0;
    return dcptopk_ref_pair_select(&c, &a);
}

/* Device buffers of a case. */
typedef struct dev_case {
    uint64_t rank_major_alloc, row_major, req_id, table;
    uint64_t ids[2], rows[2], counts[2];
    const int32_t *rank_major;
} dev_case;

static void dev_free(dcptopk_context *ctx, dev_case *d)
{
    gpu_free(ctx, d->rank_major_alloc);
    gpu_free(ctx, d->row_major);
    gpu_free(ctx, d->req_id);
    gpu_free(ctx, d->table);
    for (int i = 0; i < 2; i++) {
        gpu_free(ctx, d->ids[i]);
        gpu_free(ctx, d->rows[i]);
        gpu_free(ctx, d->counts[i]);
    }
}

static dcptopk_pair_select_args gpu_args(const pair_case *pc,
                                         const pair_inputs *in,
                                         const host_map *m, const dev_case *d,
                                         int layout, int64_t stride)
{
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    a.layout = layout;
    a.candidates = layout == DCPTOPK_LAYOUT_RANK_MAJOR
                       ? d->rank_major
                       : (const int32_t *)(uintptr_t)d->row_major;
    a.rows = pc->t;
    a.rank_stride_rows = layout == DCPTOPK_LAYOUT_RANK_MAJOR ? in->t_alloc : 0;
    a.rank = pc->rank;
    a.ids_out = (int32_t *)(uintptr_t)d->ids[layout];
    a.ids_out_stride = stride;
    a.rows_map.req_id = (const int32_t *)(uintptr_t)d->req_id;
    a.rows_map.block_table = (const int32_t *)(uintptr_t)d->table;
    a.rows_map.block_table_stride = m->table_stride;
    a.rows_map.block_table_cols = m->cols;
    a.rows_map.num_reqs = m->num_reqs;
    a.rows_map.stride_rows = m->stride_rows;
    a.rows_map.rows_out = (int32_t *)(uintptr_t)d->rows[layout];
    a.rows_map.rows_out_stride = stride;
    a.rows_map.counts_out = (int32_t *)(uintptr_t)d->counts[layout];
    return a;
}

/* Uploads a case; 0 on success. */
static int dev_setup(dcptopk_context *ctx, const pair_case *pc,
                     const pair_inputs *in, const host_map *m,
                     const pair_outputs *init, int64_t stride, dev_case *d)
{
    memset(d, 0, sizeof *d);
    size_t rm = sizeof(int32_t) * (size_t)pc->w * (size_t)in->t_alloc *
                (size_t)pc->k * 2;
    size_t off = pc->misalign ? 8 : 0;
    d->rank_major_alloc = gpu_alloc(ctx, rm + 16);
    if (!d->rank_major_alloc ||
        dc_memcpy_htod(ctx, d->rank_major_alloc + off, in->rank_major, rm))
        return -1;
    d->rank_major = (const int32_t *)(uintptr_t)(d->rank_major_alloc + off);
    size_t t = (size_t)(pc->t ? pc->t : 1);
    d->row_major = gpu_upload(ctx, in->row_major,
                              sizeof(int32_t) * t * (size_t)pc->w *
                                  (size_t)pc->k * 2);
    d->req_id = gpu_upload(ctx, m->req_id, sizeof(int32_t) * t);
    d->table = gpu_upload(ctx, m->table,
                          sizeof(int32_t) *
                              (size_t)(m->table_stride * m->num_reqs));
    for (int i = 0; i < 2; i++) {
        d->ids[i] = gpu_upload(ctx, init->ids, sizeof(int32_t) * t * (size_t)stride);
        d->rows[i] = gpu_upload(ctx, init->rows, sizeof(int32_t) * t * (size_t)stride);
        d->counts[i] = gpu_upload(ctx, init->counts, sizeof(int32_t) * t);
        if (!d->ids[i] || !d->rows[i] || !d->counts[i])
            return -1;
    }
    return d->row_major && d->req_id && d->table ? 0 : -1;
}

static int download(dcptopk_context *ctx, const dev_case *d, int layout,
                    pair_outputs *o, int64_t t, int64_t stride)
{
    size_t n = (size_t)(t ? t : 1);
    return gpu_download(ctx, o->ids, d->ids[layout],
                        sizeof(int32_t) * n * (size_t)stride) ||
           gpu_download(ctx, o->rows, d->rows[layout],
                        sizeof(int32_t) * n * (size_t)stride) ||
           gpu_download(ctx, o->counts, d->counts[layout],
                        sizeof(int32_t) * n);
}

/* Compares rows [t0, t0 + n) of two outputs (ids, rows, counts, and the
 * untouched columns past K). Prints the first difference; 0 when equal. */
static int compare(const pair_case *pc, const char *what,
                   const pair_outputs *got, const pair_outputs *want,
                   int64_t t0, int64_t n, int64_t stride)
{
    int64_t col, t;
    if ((t = first_diff(got->ids + t0 * stride, want->ids + t0 * stride, n,
                        stride, stride, &col)) >= 0) {
        fprintf(stderr,
                "%s: W=%d K=%d S=%d T=%lld family %s: ids[%lld][%lld] = %d, "
                "expected %d\n",
                what, pc->w, pc->k, pc->s, (long long)pc->t,
                pc->family >= 0 ? dc_pair_family_name(pc->family) : "identical",
                (long long)(t0 + t), (long long)col,
                got->ids[(t0 + t) * stride + col],
                want->ids[(t0 + t) * stride + col]);
        return -1;
    }
    if ((t = first_diff(got->rows + t0 * stride, want->rows + t0 * stride, n,
                        stride, stride, &col)) >= 0) {
        fprintf(stderr,
                "%s: W=%d K=%d S=%d B=%d T=%lld rank %d family %s: "
                "rows[%lld][%lld] = %d, expected %d\n",
                what, pc->w, pc->k, pc->s, pc->b, (long long)pc->t, pc->rank,
                pc->family >= 0 ? dc_pair_family_name(pc->family) : "identical",
                (long long)(t0 + t), (long long)col,
                got->rows[(t0 + t) * stride + col],
                want->rows[(t0 + t) * stride + col]);
        return -1;
    }
    if ((t = first_diff(got->counts + t0, want->counts + t0, n, 1, 1, &col)) >=
        0) {
        fprintf(stderr, "%s: W=%d K=%d T=%lld: counts[%lld] = %d, expected %d\n",
                what, pc->w, pc->k, (long long)pc->t, (long long)(t0 + t),
                got->counts[t0 + t], want->counts[t0 + t]);
        return -1;
    }
    return 0;
}

/* One case: reference vs rank-major vs row-major. 0 when all agree. */
static int run_case(dcptopk_context *ctx, const pair_case *pc)
{
    int rc = -1;
    int64_t stride = pc->k + 32; /* columns past K must stay untouched */
    pair_inputs in = {0};
    host_map m = {0};
    pair_outputs ref = {0}, got[2] = {{0}};
    dev_case d;
    memset(&d, 0, sizeof d);
    dcptopk_merge_config c = pair_config(pc->w, pc->k, pc->s, pc->b);

    if (make_inputs(pc, &in) || make_map(pc, &m) ||
        alloc_outputs(&ref, pc->t, stride) ||
        alloc_outputs(&got[0], pc->t, stride) ||
        alloc_outputs(&got[1], pc->t, stride)) {
        fprintf(stderr, "out of host memory\n");
        goto out;
    }
    /* Reference on the first and the last ref_rows rows. */
    int64_t n = pc->t < pc->ref_rows ? pc->t : pc->ref_rows;
    int64_t t1 = pc->t - n > n ? pc->t - n : n;
    if (ref_rows(pc, &in, &m, 0, n, stride, &ref) ||
        ref_rows(pc, &in, &m, t1, pc->t - t1, stride, &ref)) {
        fprintf(stderr, "reference: %s\n", dcptopk_last_error(NULL));
        goto out;
    }
    if (dev_setup(ctx, pc, &in, &m, &ref, stride, &d)) {
        fprintf(stderr, "device setup failed\n");
        goto out;
    }
    for (int layout = 0; layout < 2; layout++) {
        dcptopk_pair_select_args a = gpu_args(pc, &in, &m, &d, layout, stride);
        if (pc->split < 0 ? dcptopk_pair_select(ctx, &c, &a)
                          : dc_pair_select_split(ctx, &c, 0, pc->split, &a)) {
            fprintf(stderr, "dcptopk_pair_select(layout %d, split %d): %s\n",
                    layout, pc->split, dcptopk_last_error(ctx));
            goto out;
        }
        if (download(ctx, &d, layout, &got[layout], pc->t, stride))
            goto out;
    }
    if (compare(pc, "rank-major vs reference", &got[0], &ref, 0, n, stride) ||
        compare(pc, "rank-major vs reference", &got[0], &ref, t1, pc->t - t1,
                stride) ||
        compare(pc, "row-major vs rank-major", &got[1], &got[0], 0, pc->t,
                stride))
        goto out;
    rc = 0;
out:
    dev_free(ctx, &d);
    free(in.rank_major);
    free(in.row_major);
    free(m.req_id);
    free(m.table);
    free_outputs(&ref);
    free_outputs(&got[0]);
    free_outputs(&got[1]);
    return rc;
}

static pair_case small_case(int32_t w, int32_t k, int64_t t, int family,
                            uint64_t seed)
{
    pair_case pc;
    memset(&pc, 0, sizeof pc);
    pc.w = w;
    pc.k = k;
    pc.s = (int32_t)(1 << (seed % 3));     /* interleave 1, 2, 4 */
    pc.b = seed % 2 ? 64 : 16;
    pc.t = t;
    pc.family = family;
    pc.seed = seed;
    pc.pad_rows = seed % 2 ? 3 : 0;
    pc.misalign = 0;
    pc.rank = (int32_t)(seed % (uint64_t)w);
    pc.ref_rows = t;
    pc.split = -1;
    return pc;
}

static const int32_t worlds[] = {1, 2, 3, 4, 8, 16};
static const int32_t topks[] = {512, 1024, 2048, 4096};

/* Every (W, K) with T = 1 and T = 4, every family. */
TEST(select_all_shapes_all_families)
{
    GPU_CTX(ctx);
    uint64_t seed = 1;
    for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++)
        for (size_t ki = 0; ki < sizeof topks / sizeof topks[0]; ki++)
            for (int f = 0; f < DC_PFAM_COUNT; f++) {
                pair_case pc = small_case(worlds[wi], topks[ki], 1 + 3 * (f % 2),
                                          f, seed++);
                /* One key per (W, K) and layout: compiles stay few. */
                pc.s = 1 << ((wi + ki) % 3);
                pc.b = ki % 2 ? 64 : 16;
                CHECK(run_case(ctx, &pc) == 0);
            }
    dcptopk_context_destroy(ctx);
}

/* Every split of a row over 2 and 4 CTAs that its shape allows (at most
 * 32768 candidates a row, 2048 a CTA), every family, with owned rows, both
 * layouts (one CTA a row: the other tests); one shape that allows none is
 * refused a split. */
TEST(select_every_split)
{
    GPU_CTX(ctx);
    static const struct { int32_t w, k, max_split; } shapes[] = {
        {2, 2048, 1}, {4, 2048, 2}, {8, 2048, 2}, {16, 2048, 2},
        {3, 4096, 2}, {1, 4096, 1}, {8, 512, 1},  {16, 1024, 2},
    };
    uint64_t seed = 900;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int32_t split = 1; split <= shapes[i].max_split; split++)
            for (int f = -1; f < DC_PFAM_COUNT; f++) {
                pair_case pc = small_case(shapes[i].w, shapes[i].k,
                                          1 + (int64_t)(seed % 5), f, seed);
                seed++;
                pc.s = 1 << (i % 3);
                pc.b = i % 2 ? 64 : 16;
                if (f < 0)
                    pc.rank = 0;
                pc.split = split;
                if (run_case(ctx, &pc) != 0) {
                    fprintf(stderr, "failed: W=%d K=%d split %d family %d\n",
                            pc.w, pc.k, split, f);
                    CHECK(0);
                }
            }
    /* W * K = 65536: no split (run_case prints the refusal). */
    pair_case pc = small_case(16, 4096, 2, DC_PFAM_NORMAL, 999);
    pc.split = 1;
    CHECK(run_case(ctx, &pc) != 0);
    dcptopk_context_destroy(ctx);
}

/* Small K too (any multiple of 32), and rows with fewer than K valid. */
TEST(select_small_topk)
{
    GPU_CTX(ctx);
    static const int32_t ks[] = {32, 64, 96, 160};
    uint64_t seed = 100;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++) {
            pair_case pc = small_case(worlds[wi], ks[ki], 5,
                                      (int)(seed % DC_PFAM_COUNT), seed);
            seed++;
            CHECK(run_case(ctx, &pc) == 0);
        }
    dcptopk_context_destroy(ctx);
}

/* Prefill row counts, far more rows than SMs: T = 6710 for a few (W, K),
 * 1000 for the rows of 32768. The reference checks 192 rows at each end,
 * the two layouts are compared on every row. */
TEST(select_prefill_rows)
{
    GPU_CTX(ctx);
    static const struct { int32_t w, k; int family; int64_t t; } shapes[] = {
        {8, 2048, DC_PFAM_NORMAL, 6710},
        {4, 1024, DC_PFAM_INVALID30, 6710},
        {3, 512, DC_PFAM_TIES, 6710},
        {2, 4096, DC_PFAM_DUPLICATES, 6710},
        {16, 2048, DC_PFAM_TIES, 1000},
        {8, 4096, DC_PFAM_INVALID30, 1000},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        pair_case pc = small_case(shapes[i].w, shapes[i].k, shapes[i].t,
                                  shapes[i].family, 200 + i);
        pc.ref_rows = 192;
        CHECK(run_case(ctx, &pc) == 0);
    }
    dcptopk_context_destroy(ctx);
}

typedef struct {
    int32_t w, k;
    int64_t t;
} pair_shape;

/* Every family on each of n shapes, interleave s, block 64, seeds from
 * seed0 on: the number of cases that do not match the reference (each one
 * named on stderr). */
static int run_shapes(dcptopk_context *ctx, const pair_shape *shapes, size_t n, uint64_t seed0,
                      int32_t s)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        for (int f = 0; f < DC_PFAM_COUNT; f++) {
            pair_case pc = small_case(shapes[i].w, shapes[i].k, shapes[i].t, f,
                                      seed0 + 16 * i + (uint64_t)f);
            pc.s = s;
            pc.b = 64;
            if (run_case(ctx, &pc) != 0) {
                fprintf(stderr, "failed: W=%d K=%d T=%lld family %d\n", pc.w, pc.k,
                        (long long)pc.t, f);
                bad++;
            }
        }
    return bad;
}

/* One-CTA rows of 16384 to 32768 candidates run 1024 threads (pair_abi.h):
 * sizes that are not powers of two, a last load iteration only partly in
 * the row (W = 9, K = 1824), and more rows than SMs. */
TEST(select_rows_of_1024_threads)
{
    GPU_CTX(ctx);
    static const pair_shape shapes[] = {
        {9, 1824, 7}, {5, 4096, 3}, {12, 2048, 300}, {7, 4096, 2}, {11, 1504, 5},
    };
    CHECK(run_shapes(ctx, shapes, sizeof shapes / sizeof shapes[0], 700, 1) == 0);
    dcptopk_context_destroy(ctx);
}

/* Rows of 16384 in both their shapes (pair_abi.h, DC_PAIR_TWO_CTAS_PAY),
 * whichever this GPU picks: one 1024-thread CTA with the gids on chip, two
 * 512-thread CTAs an SM re-reading them; more rows than SMs, every family. */
TEST(select_rows_of_16384_both_shapes)
{
    const dc_env_kept kept = dc_env_keep("DCPTOPK_PAIR_TWO_CTAS");
    unsetenv("DCPTOPK_PAIR_TWO_CTAS");
    {
        GPU_CTX(ctx);
        const dc_device_speed sp = dc_ctx_speed(ctx);
        printf("device: %d SMs at %d kHz, memory %d kHz x %d bits: rows of 16384 "
               "take the %s shape\n",
               sp.sms, sp.sm_khz, sp.mem_khz, sp.bus_bits,
               dc_pair_row_shapes(ctx) == DC_PAIR_SHAPE_TWO ? "two-CTA" : "one-CTA");
        dcptopk_context_destroy(ctx);
    }
    static const pair_shape shapes[] = {{8, 2048, 300}, {16, 1024, 5}, {4, 4096, 3}};
    for (int two = 0; two < 2; two++) {
        /* The setting counts when a context is created, not later. */
        setenv("DCPTOPK_PAIR_TWO_CTAS", two ? "1" : "0", 1);
        GPU_CTX(ctx);
        setenv("DCPTOPK_PAIR_TWO_CTAS", two ? "0" : "1", 1);
        CHECK_EQ(dc_pair_row_shapes(ctx), two ? DC_PAIR_SHAPE_TWO : DC_PAIR_SHAPE_ONE);
        CHECK(run_shapes(ctx, shapes, sizeof shapes / sizeof shapes[0], 1100 + 64 * two, 2) == 0);
        dcptopk_context_destroy(ctx);
    }
    dc_env_put_back(&kept);
}

/* Rows at the edges of DC_PAIR_SELECT_SMEM_GIDS (the emit and the tie
 * modes read gids from shared memory inside them, from global memory
 * outside): 8160 and 8192, 12288 and 12320, 16384 as 16 ranks of 1024. */
TEST(select_rows_at_the_gid_rule_edges)
{
    GPU_CTX(ctx);
    static const pair_shape shapes[] = {
        {5, 1632, 9}, {16, 512, 5}, {6, 2048, 140}, {11, 1120, 6}, {16, 1024, 3},
    };
    CHECK(run_shapes(ctx, shapes, sizeof shapes / sizeof shapes[0], 900, 2) == 0);
    dcptopk_context_destroy(ctx);
}

/* Every candidate identical (same score, same gid): the first K positions. */
TEST(select_identical_candidates)
{
    GPU_CTX(ctx);
    for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++) {
        pair_case pc = small_case(worlds[wi], 512, 3, -1, 300 + wi);
        pc.rank = 0;
        CHECK(run_case(ctx, &pc) == 0);
    }
    dcptopk_context_destroy(ctx);
}

/* A candidate buffer that is 8-byte but not 16-byte aligned. */
TEST(select_misaligned_buffer)
{
    GPU_CTX(ctx);
    for (int f = 0; f < DC_PFAM_COUNT; f++) {
        pair_case pc = small_case(f % 2 ? 8 : 3, f % 2 ? 2048 : 512, 7, f,
                                  400 + (uint64_t)f);
        pc.misalign = 1;
        pc.pad_rows = 2;
        CHECK(run_case(ctx, &pc) == 0);
    }
    dcptopk_context_destroy(ctx);
}

/* Ids only, and owned rows only (emit_ids = 0): the same values. */
TEST(select_outputs_alone)
{
    GPU_CTX(ctx);
    pair_case pc = small_case(4, 1024, 9, DC_PFAM_INVALID30, 501);
    pair_inputs in = {0};
    host_map m = {0};
    pair_outputs ref = {0}, got = {0};
    dev_case d;
    int64_t stride = pc.k + 32;
    CHECK(make_inputs(&pc, &in) == 0 && make_map(&pc, &m) == 0);
    CHECK(alloc_outputs(&ref, pc.t, stride) == 0 &&
          alloc_outputs(&got, pc.t, stride) == 0);
    CHECK_OK(ref_rows(&pc, &in, &m, 0, pc.t, stride, &ref));
    pair_outputs init = {0};
    CHECK(alloc_outputs(&init, pc.t, stride) == 0);
    CHECK(dev_setup(ctx, &pc, &in, &m, &init, stride, &d) == 0);

    dcptopk_merge_config c = pair_config(pc.w, pc.k, pc.s, pc.b);
    dcptopk_pair_select_args a = gpu_args(&pc, &in, &m, &d, 0, stride);
    a.rows_map.rows_out = NULL;
    a.rows_map.counts_out = NULL;
    CHECK_OK(dcptopk_pair_select(ctx, &c, &a));
    c.emit_ids = 0;
    a = gpu_args(&pc, &in, &m, &d, 1, stride);
    a.ids_out = NULL;
    CHECK_OK(dcptopk_pair_select(ctx, &c, &a));
    CHECK(gpu_download(ctx, got.ids, d.ids[0],
                       sizeof(int32_t) * (size_t)(pc.t * stride)) == 0);
    CHECK(gpu_download(ctx, got.rows, d.rows[1],
                       sizeof(int32_t) * (size_t)(pc.t * stride)) == 0);
    CHECK(gpu_download(ctx, got.counts, d.counts[1],
                       sizeof(int32_t) * (size_t)pc.t) == 0);
    CHECK(compare(&pc, "ids alone / rows alone", &got, &ref, 0, pc.t, stride) == 0);
    /* The other outputs stayed untouched. */
    CHECK(gpu_download(ctx, got.ids, d.ids[1],
                       sizeof(int32_t) * (size_t)(pc.t * stride)) == 0);
    CHECK_EQ(got.ids[0], SENTINEL);
    CHECK(gpu_download(ctx, got.rows, d.rows[0],
                       sizeof(int32_t) * (size_t)(pc.t * stride)) == 0);
    CHECK_EQ(got.rows[0], SENTINEL);
    dev_free(ctx, &d);
    dcptopk_context_destroy(ctx);
}

/* Loads every module of config c's keys, so that a capture compiles
 * nothing. */
static dcptopk_result warm_config(dcptopk_context *ctx, const dcptopk_merge_config *c)
{
    dcptopk_key keys[16];
    size_t nkeys = 0;
    dcptopk_result r = dcptopk_config_keys(c, dcptopk_context_arch(ctx), keys, 16, &nkeys);
    if (!r && nkeys > 16)
        return DCPTOPK_INTERNAL;
    return r ? r : dcptopk_warmup_keys(ctx, keys, nkeys, NULL, NULL, NULL);
}

/* Capture both layouts in a CUDA graph, replay it three times: the same
 * outputs as the direct launches. */
TEST(select_graph_replay)
{
    GPU_CTX(ctx);
    pair_case pc = small_case(8, 2048, 37, DC_PFAM_SPECIAL, 601);
    pair_inputs in = {0};
    host_map m = {0};
    pair_outputs ref = {0}, got = {0}, init = {0};
    dev_case d;
    int64_t stride = pc.k + 32;
    CHECK(make_inputs(&pc, &in) == 0 && make_map(&pc, &m) == 0);
    CHECK(alloc_outputs(&ref, pc.t, stride) == 0 &&
          alloc_outputs(&got, pc.t, stride) == 0 &&
          alloc_outputs(&init, pc.t, stride) == 0);
    CHECK_OK(ref_rows(&pc, &in, &m, 0, pc.t, stride, &ref));
    CHECK(dev_setup(ctx, &pc, &in, &m, &init, stride, &d) == 0);
    dcptopk_merge_config c = pair_config(pc.w, pc.k, pc.s, pc.b);

    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    CHECK_OK(warm_config(ctx, &c)); /* a capture must not compile */
    CHECK_OK(dc_graph_begin(ctx, stream));
    for (int layout = 0; layout < 2; layout++) {
        dcptopk_pair_select_args a = gpu_args(&pc, &in, &m, &d, layout, stride);
        a.stream = stream;
        CHECK_OK(dcptopk_pair_select(ctx, &c, &a));
    }
    CHECK_OK(dc_graph_end(ctx, stream, &exec));
    for (int rep = 0; rep < 3; rep++)
        CHECK_OK(dc_graph_launch(ctx, exec, stream));
    CHECK_OK(dc_stream_sync(ctx, stream));
    for (int layout = 0; layout < 2; layout++) {
        CHECK(download(ctx, &d, layout, &got, pc.t, stride) == 0);
        CHECK(compare(&pc, "graph replay vs reference", &got, &ref, 0, pc.t,
                      stride) == 0);
    }
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    dev_free(ctx, &d);
    dcptopk_context_destroy(ctx);
}

/* ------------------------------------------------------------------ pack */

/* Pack of local ids with and without row starts / row ends, interleave 1, 2,
 * 4, against the reference: negative ids, ids at or past row_end, columns
 * outside the row, gids past int32, NaN / inf / -0.0 scores. */
TEST(pack_matches_reference)
{
    GPU_CTX(ctx);
    const int64_t rows = 37, stride = 3000;
    for (int variant = 0; variant < 12; variant++) {
        int32_t s = 1 << (variant % 3);
        int use_starts = (variant / 3) % 2, use_ends = variant / 6;
        int32_t w = variant % 2 ? 16 : 3, k = variant % 4 < 2 ? 512 : 1024;
        dcptopk_merge_config c = pair_config(w, k, s, 0);
        c.block_size = 16;
        uint64_t st = 77 + (uint64_t)variant;
        int64_t ids_stride = k + 8;
        float *logits = malloc(sizeof(float) * (size_t)(rows * stride));
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(rows * ids_stride));
        int32_t *starts = malloc(sizeof(int32_t) * (size_t)rows);
        int32_t *ends = malloc(sizeof(int32_t) * (size_t)rows);
        int32_t *want = malloc(sizeof(int32_t) * (size_t)(rows * k * 2));
        int32_t *got = malloc(sizeof(int32_t) * (size_t)(rows * k * 2));
        CHECK(logits && ids && starts && ends && want && got);
        for (int64_t i = 0; i < rows * stride; i++) {
            uint64_t x = test_rand(&st) % 100;
            uint32_t bits = x < 3 ? 0x7FC00000u : x < 5 ? 0x7F800000u
                            : x < 7 ? 0xFF800000u : x < 9 ? 0x80000000u
                            : dc_f32_bits((float)(int)(test_rand(&st) % 2001) - 1000.0f);
            memcpy(&logits[i], &bits, sizeof bits);
        }
        for (int64_t t = 0; t < rows; t++) {
            starts[t] = (int32_t)(test_rand(&st) % 600) - 100;
            ends[t] = (int32_t)(test_rand(&st) % 2600);
            if (t == 5)
                starts[t] = -(1 << 28); /* huge ids map into the row */
            for (int64_t j = 0; j < ids_stride; j++) {
                uint64_t x = test_rand(&st) % 100;
                int32_t l = (int32_t)(test_rand(&st) % 2800);
                if (x < 5)
                    l = -1 - (int32_t)(test_rand(&st) % 5);
                else if (x < 8)
                    l = (1 << 28) + (int32_t)(test_rand(&st) % 100); /* gid > int32 for W >= 8 */
                ids[t * ids_stride + j] = l;
            }
        }
        dcptopk_pair_pack_args a = DCPTOPK_PAIR_PACK_ARGS_INIT;
        a.logits = logits;
        a.logits_stride = stride;
        a.local_ids = ids;
        a.local_ids_stride = ids_stride;
        a.row_starts = use_starts ? starts : NULL;
        a.row_ends = use_ends ? ends : NULL;
        a.rows = rows;
        a.rank = w - 1;
        a.out = want;
        CHECK_OK(dcptopk_ref_pair_pack(&c, &a));

        uint64_t dl = gpu_upload(ctx, logits, sizeof(float) * (size_t)(rows * stride));
        uint64_t di = gpu_upload(ctx, ids, sizeof(int32_t) * (size_t)(rows * ids_stride));
        uint64_t ds = gpu_upload(ctx, starts, sizeof(int32_t) * (size_t)rows);
        uint64_t de = gpu_upload(ctx, ends, sizeof(int32_t) * (size_t)rows);
        uint64_t dout = gpu_alloc(ctx, sizeof(int32_t) * (size_t)(rows * k * 2));
        CHECK(dl && di && ds && de && dout);
        a.logits = (const float *)(uintptr_t)dl;
        a.local_ids = (const int32_t *)(uintptr_t)di;
        a.row_starts = use_starts ? (const int32_t *)(uintptr_t)ds : NULL;
        a.row_ends = use_ends ? (const int32_t *)(uintptr_t)de : NULL;
        a.out = (int32_t *)(uintptr_t)dout;
        CHECK_OK(dcptopk_pair_pack(ctx, &c, &a));
        CHECK(gpu_download(ctx, got, dout, sizeof(int32_t) * (size_t)(rows * k * 2)) == 0);
        int64_t col;
        int64_t t = first_diff(got, want, rows, (int64_t)k * 2, (int64_t)k * 2, &col);
        CHECK_MSG(t < 0,
                  "variant %d (W=%d K=%d S=%d starts %d ends %d): out[%lld][%lld] "
                  "= 0x%08x, expected 0x%08x",
                  variant, w, k, s, use_starts, use_ends, (long long)t,
                  (long long)col, (unsigned)got[t * k * 2 + col],
                  (unsigned)want[t * k * 2 + col]);
        /* Some slots of each kind were exercised. */
        int64_t invalid = 0;
        for (int64_t i = 0; i < rows * k; i++)
            invalid += want[2 * i + 1] < 0;
        CHECK(invalid > 0 && invalid < rows * k);
        gpu_free(ctx, dl);
        gpu_free(ctx, di);
        gpu_free(ctx, ds);
        gpu_free(ctx, de);
        gpu_free(ctx, dout);
        free(logits);
        free(ids);
        free(starts);
        free(ends);
        free(want);
        free(got);
    }
    dcptopk_context_destroy(ctx);
}

/* The engine's chain on one stream: W packs write the rank segments of the
 * all-gather buffer (as if gathered) and the select reads them, each a
 * dependent launch of the kernel before it; then a second round, other
 * logits into the same buffers, direct and replayed from a graph. A kernel
 * that ran ahead of its producer would read the poison or the round before:
 * the ids would differ from the reference's. */
TEST(pack_select_chain_in_stream_order)
{
    GPU_CTX(ctx);
    const int32_t w = 8, k = 2048;
    const int64_t t = 300, len = 4 * 2048;
    const dcptopk_merge_config c = pair_config(w, k, 1, 0);
    const size_t seg = (size_t)t * (size_t)k * 2; /* int32 words a rank */
    const size_t nlog = (size_t)w * (size_t)t * (size_t)len;
    float *logits = malloc(sizeof(float) * nlog);
    int32_t *lids = malloc(sizeof(int32_t) * (size_t)w * (size_t)t * (size_t)k);
    int32_t *gathered = malloc(sizeof(int32_t) * seg * (size_t)w);
    int32_t *want = malloc(sizeof(int32_t) * (size_t)t * (size_t)k);
    int32_t *got = malloc(sizeof(int32_t) * (size_t)t * (size_t)k);
    CHECK(logits && lids && gathered && want && got);
    uint64_t st = 4242;
    for (size_t i = 0; i < (size_t)w * (size_t)t * (size_t)k; i++)
        lids[i] = (int32_t)((i % (size_t)k) * 4 + test_rand(&st) % 4);
    uint64_t dlog = gpu_alloc(ctx, sizeof(float) * nlog);
    uint64_t dlids = gpu_upload(ctx, lids, sizeof(int32_t) * (size_t)w * (size_t)t * (size_t)k);
    uint64_t dgat = gpu_alloc(ctx, sizeof(int32_t) * seg * (size_t)w);
    uint64_t dids = gpu_alloc(ctx, sizeof(int32_t) * (size_t)t * (size_t)k);
    CHECK(dlog && dlids && dgat && dids);
    void *stream = NULL, *exec = NULL;
    CHECK_OK(dc_stream_create(ctx, &stream));
    CHECK_OK(warm_config(ctx, &c)); /* round 1 is captured */
    CHECK_OK(dc_memset_async(ctx, dgat, 0x7F, sizeof(int32_t) * seg * (size_t)w,
                             stream));

    /* Rounds 0 and 1 launched directly, round 2 replayed from a graph
     * captured with round 1's launches after round 1's logits change. */
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < nlog; i++)
            logits[i] = (float)(int)(test_rand(&st) % 200001) * 0.01f - 1000.0f +
                        (float)round;
        dcptopk_pair_select_args sa = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        sa.candidates = gathered;
        sa.rows = t;
        sa.ids_out = want;
        for (int32_t r = 0; r < w; r++) {
            dcptopk_pair_pack_args pa = DCPTOPK_PAIR_PACK_ARGS_INIT;
            pa.logits = logits + (size_t)r * (size_t)t * (size_t)len;
            pa.logits_stride = len;
            pa.local_ids = lids + (size_t)r * (size_t)t * (size_t)k;
            pa.rows = t;
            pa.rank = r;
            pa.out = gathered + seg * (size_t)r;
            CHECK_OK(dcptopk_ref_pair_pack(&c, &pa));
        }
        CHECK_OK(dcptopk_ref_pair_select(&c, &sa));
        /* The host writes the logits between rounds: the stream is idle. */
        CHECK_OK(dc_stream_sync(ctx, stream));
        CHECK_OK(dc_memcpy_htod(ctx, dlog, logits, sizeof(float) * nlog));
        if (round < 2) {
            if (round == 1)
                CHECK_OK(dc_graph_begin(ctx, stream));
            for (int32_t r = 0; r < w; r++) {
                dcptopk_pair_pack_args pa = DCPTOPK_PAIR_PACK_ARGS_INIT;
                pa.logits = (const float *)(uintptr_t)(dlog + sizeof(float) * (size_t)r *
                                                               (size_t)t * (size_t)len);
                pa.logits_stride = len;
                pa.local_ids = (const int32_t *)(uintptr_t)(dlids + sizeof(int32_t) * (size_t)r *
                                                                      (size_t)t * (size_t)k);
                pa.rows = t;
                pa.rank = r;
                pa.out = (int32_t *)(uintptr_t)(dgat + sizeof(int32_t) * seg * (size_t)r);
                pa.stream = stream;
                CHECK_OK(dcptopk_pair_pack(ctx, &c, &pa));
            }
            sa.candidates = (const int32_t *)(uintptr_t)dgat;
            sa.ids_out = (int32_t *)(uintptr_t)dids;
            sa.stream = stream;
            CHECK_OK(dcptopk_pair_select(ctx, &c, &sa));
            if (round == 1) {
                CHECK_OK(dc_graph_end(ctx, stream, &exec));
                CHECK_OK(dc_graph_launch(ctx, exec, stream));
            }
        } else {
            CHECK_OK(dc_graph_launch(ctx, exec, stream));
        }
        CHECK_OK(dc_stream_sync(ctx, stream));
        CHECK(gpu_download(ctx, got, dids, sizeof(int32_t) * (size_t)t * (size_t)k) == 0);
        int64_t col;
        int64_t row = first_diff(got, want, t, k, k, &col);
        CHECK_MSG(row < 0, "round %d: ids[%lld][%lld] = %d, expected %d", round,
                  (long long)row, (long long)col, got[row * k + col], want[row * k + col]);
    }
    dc_graph_destroy(ctx, exec);
    dc_stream_destroy(ctx, stream);
    gpu_free(ctx, dlog);
    gpu_free(ctx, dlids);
    gpu_free(ctx, dgat);
    gpu_free(ctx, dids);
    free(logits);
    free(lids);
    free(gathered);
    free(want);
    free(got);
    dcptopk_context_destroy(ctx);
}

/* ------------------------------------------------------------- errors */

TEST(bad_arguments_named)
{
    GPU_CTX(ctx);
    dcptopk_merge_config c = pair_config(8, 2048, 1, 64);
    uint64_t buf = gpu_alloc(ctx, 1 << 20);
    CHECK(buf != 0);
    int32_t *p = (int32_t *)(uintptr_t)buf;

    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    a.candidates = p;
    a.rows = 4;
    a.ids_out = p + 200000; /* past the 512 KiB of candidates */
    CHECK_OK(dcptopk_pair_select(ctx, &c, &a)); /* all (0.0, gid 0) */

    a.ids_out = NULL;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->ids_out");
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->rows_map.rows_out");
    a.ids_out = p + 200000;

    a.layout = 4;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->layout = 4");
    a.layout = 0;

    a.candidates = NULL;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->candidates");
    a.candidates = p;

    a.rank = 8;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->rank = 8");
    a.rank = 0;

    a.rank_stride_rows = 3;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->rank_stride_rows = 3");
    a.rank_stride_rows = 0;

    a.ids_out_stride = 100;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->ids_out_stride = 100");
    a.ids_out_stride = 0;

    dcptopk_merge_config bad = c;
    bad.kind = DCPTOPK_MERGE_PACKED;
    bad.local_topk = 384;
    CHECK_EQ(dcptopk_pair_select(ctx, &bad, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->kind");
    bad = c;
    bad.topk = 100;
    CHECK_EQ(dcptopk_pair_select(ctx, &bad, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "config->topk = 100");

    a.rows_map.rows_out = p;
    c.block_size = 0;
    CHECK_EQ(dcptopk_pair_select(ctx, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "block_size");

    dcptopk_pair_pack_args pa = DCPTOPK_PAIR_PACK_ARGS_INIT;
    c.block_size = 64;
    pa.logits = (const float *)p;
    pa.logits_stride = 16;
    pa.local_ids = p;
    pa.rows = 2;
    pa.out = p + 200000;
    pa.rank = -1;
    CHECK_EQ(dcptopk_pair_pack(ctx, &c, &pa), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->rank = -1");
    pa.rank = 0;
    pa.local_ids = NULL;
    CHECK_EQ(dcptopk_pair_pack(ctx, &c, &pa), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->local_ids");
    pa.local_ids = p;
    pa.logits_stride = 0;
    CHECK_EQ(dcptopk_pair_pack(ctx, &c, &pa), DCPTOPK_INVALID_ARGUMENT);
    CHECK_CONTAINS(dcptopk_last_error(ctx), "args->logits_stride = 0");
    pa.logits_stride = 16;
    CHECK_OK(dcptopk_pair_pack(ctx, &c, &pa));

    CHECK_EQ(dcptopk_pair_select(NULL, &c, &a), DCPTOPK_INVALID_ARGUMENT);
    CHECK_OK(dc_stream_sync(ctx, NULL));
    gpu_free(ctx, buf);
    dcptopk_context_destroy(ctx);
}

/* ------------------------------------------------------- float ids */

/* The float-id word of an int32 candidate's gid, and (through *gid) the gid
 * the float rule gives it: exact for most, and for every invalid or odd
 * spelling the test knows the answer itself (truncation, -0.0, NaN, past
 * 2^31). */
static int32_t float_word(int32_t g, uint64_t *rng, int32_t *gid)
{
    float f;
    uint64_t pick = test_rand(rng) % 16;
    *gid = g;
    if (g < 0) {
        static const uint32_t bad[] = {0xBF800000u /* -1.0 */,
                                       0x7FC00000u /* NaN */,
                                       0xBF000000u /* -0.5 */,
                                       0x4F000000u /* 2^31 */,
                                       0x7F800000u /* +inf */};
        *gid = -1;
        return (int32_t)bad[pick % 5];
    }
    if (pick == 0 && g == 0) {
        f = -0.0f; /* >= 0: gid 0 */
    } else if (pick == 1) {
        f = (float)g + 0.25f; /* truncates to g (exact below 2^22) */
    } else {
        f = (float)g;
    }
    int32_t w;
    memcpy(&w, &f, sizeof w);
    return w;
}

TEST(float_ids_read_in_place)
{
    GPU_CTX(ctx);
    const int32_t w = 4, k = 512, s = 2;
    const int64_t t = 67;
    for (int family = 0; family < DC_PFAM_COUNT; family++) {
        int32_t *cand = dc_gen_pair_candidates(family, k, w, s, t,
                                               (uint64_t)family + 77);
        CHECK(cand != NULL);
        size_t n = (size_t)w * (size_t)t * (size_t)k;
        int32_t *fl = malloc(sizeof(int32_t) * 2 * n);
        int32_t *want = malloc(sizeof(int32_t) * (size_t)(t * k));
        int32_t *got = malloc(sizeof(int32_t) * (size_t)(t * k));
        CHECK(fl && want && got);
        uint64_t rng = 0x1234 + (uint64_t)family;
        for (size_t i = 0; i < n; i++) {
            int32_t gid;
            fl[2 * i] = cand[2 * i];
            fl[2 * i + 1] = float_word(cand[2 * i + 1], &rng, &gid);
            cand[2 * i + 1] = gid; /* the int32 input the rule means */
        }
        dcptopk_merge_config c = pair_config(w, k, s, 16);
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = cand;
        a.rows = t;
        a.ids_out = want;
        CHECK_OK(dcptopk_ref_pair_select(&c, &a));

        /* The reference reads the float layout the same way. */
        a.candidates = fl;
        a.layout = DCPTOPK_LAYOUT_RANK_MAJOR_FLOAT_IDS;
        a.ids_out = got;
        CHECK_OK(dcptopk_ref_pair_select(&c, &a));
        CHECK(memcmp(want, got, sizeof(int32_t) * (size_t)(t * k)) == 0);

        uint64_t dfl = gpu_upload(ctx, fl, sizeof(int32_t) * 2 * n);
        uint64_t dids = gpu_alloc(ctx, sizeof(int32_t) * (size_t)(t * k));
        CHECK(dfl && dids);
        a.candidates = (const int32_t *)(uintptr_t)dfl;
        a.ids_out = (int32_t *)(uintptr_t)dids;
        CHECK_OK(dcptopk_pair_select(ctx, &c, &a));
        memset(got, 0x5A, sizeof(int32_t) * (size_t)(t * k));
        CHECK(gpu_download(ctx, got, dids, sizeof(int32_t) * (size_t)(t * k)) == 0);
        int64_t col = 0;
        int64_t row = first_diff(want, got, t, k, k, &col);
        CHECK_MSG(row < 0, "family %s, rank-major float ids: row %lld col %lld",
                  dc_pair_family_name(family), (long long)row, (long long)col);

        /* Row-major: [T, W*K, 2] from the rank-major buffer. */
        int32_t *rm = malloc(sizeof(int32_t) * 2 * n);
        CHECK(rm != NULL);
        for (int32_t r = 0; r < w; r++)
            for (int64_t tt = 0; tt < t; tt++)
                memcpy(rm + ((size_t)tt * (size_t)w * (size_t)k + (size_t)r * (size_t)k) * 2,
                       fl + (((size_t)r * (size_t)t + (size_t)tt) * (size_t)k) * 2,
                       sizeof(int32_t) * 2 * (size_t)k);
        uint64_t drm = gpu_upload(ctx, rm, sizeof(int32_t) * 2 * n);
        CHECK(drm != 0);
        a.candidates = (const int32_t *)(uintptr_t)drm;
        a.layout = DCPTOPK_LAYOUT_ROW_MAJOR_FLOAT_IDS;
        CHECK_OK(dcptopk_pair_select(ctx, &c, &a));
        CHECK(gpu_download(ctx, got, dids, sizeof(int32_t) * (size_t)(t * k)) == 0);
        row = first_diff(want, got, t, k, k, &col);
        CHECK_MSG(row < 0, "family %s, row-major float ids: row %lld col %lld",
                  dc_pair_family_name(family), (long long)row, (long long)col);
        gpu_free(ctx, drm);
        gpu_free(ctx, dfl);
        gpu_free(ctx, dids);
        free(rm);
        free(fl);
        free(want);
        free(got);
        free(cand);
    }
    dcptopk_context_destroy(ctx);
}
