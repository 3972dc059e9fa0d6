/* ref_args.c - fuzz target: the CPU reference entry points (dcptopk_ref_*)
 * with fuzzed configs and args structs (struct_size included) over host
 * buffers sized to what the fuzzed fields imply, plus the contract checker,
 * the select and the rescue on arbitrary packed words and saturation words.
 * Each call must succeed or fail with a message; the sanitizers must stay
 * silent. */
#include "fuzz.h"

/* Largest total of host buffers one input may ask for; larger inputs are
 * skipped (the library cannot know a pointer's size, so a smaller buffer
 * would be a lie). */
#define DC_FUZZ_CAP (INT64_C(8) << 20)

typedef struct arena {
    void *ptrs[64];
    int n;
    int64_t total;
    int skip;             /* an input that needs more than DC_FUZZ_CAP   */
    const uint8_t *fill;  /* bytes that fill the buffers, cycled         */
    size_t fill_n;
    size_t fill_at;
} arena;

/* Elements a buffer of `rows` rows `stride` elements apart, of which `width`
 * are read per row, must hold: (rows - 1) * stride + width. -1 when the fields
 * break the documented contract in a way that needs no buffer to see (the
 * call must refuse them: a token buffer goes in), -2 when the buffer would be
 * too large (the input is skipped). */
static int64_t need(int64_t rows, __int128 stride, __int128 width,
                    int64_t rows_limit)
{
    if (rows < 0 || rows > rows_limit || width < 0 || stride < 0)
        return -1;
    if (rows == 0 || width == 0)
        return 0;
    if (rows > 1 && stride < width)
        return -1;
    __int128 n = (__int128)(rows - 1) * stride + width;
    if (n > DC_FUZZ_CAP)
        return -2;
    return (int64_t)n;
}

static void *keep(arena *a, void *p)
{
    if (!p || a->n == (int)(sizeof a->ptrs / sizeof a->ptrs[0])) {
        free(p);
        a->skip = 1;
        return NULL;
    }
    a->ptrs[a->n++] = p;
    return p;
}

/* A host buffer of `elems` elements of `elem` bytes, filled with fuzz bytes,
 * or (fuzz's choice) NULL, misaligned, or larger than needed. */
static void *buffer(arena *a, dc_fuzz_in *in, int64_t elems, size_t elem)
{
    if (elems == -2 || a->skip) {
        a->skip = 1;
        return NULL;
    }
    unsigned mode = fz_pick(in, 10);
    if (mode == 0)
        return NULL;
    size_t bytes = elems > 0 ? (size_t)elems * elem : 64;
    size_t extra = mode == 1 ? 16 : mode == 2 ? 4096 : 0;
    if ((int64_t)(bytes + extra) + a->total > DC_FUZZ_CAP) {
        a->skip = 1;
        return NULL;
    }
    a->total += (int64_t)(bytes + extra);
    uint8_t *p = keep(a, malloc(bytes + extra ? bytes + extra : 1));
    if (!p)
        return NULL;
    for (size_t i = 0; i < bytes + extra; i++)
        p[i] = a->fill_n ? a->fill[(a->fill_at + i) % a->fill_n] : 0;
    a->fill_at += 7;
    if (mode == 1) {
        static const size_t offs[] = {1, 2, 4, 8};
        return p + offs[fz_pick(in, 4)];
    }
    return p;
}

static void arena_free(arena *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->ptrs[i]);
}

/* A value of the config or -1 when out of its documented range (then the
 * call refuses the config before reading a buffer). */
static int64_t in_range(int64_t v, int64_t lo, int64_t hi)
{
    return v >= lo && v <= hi ? v : -1;
}

static int64_t words_of(int64_t n)
{
    return n < 0 || n > DCPTOPK_MAX_TOPK ? -1 : n + n / 32;
}

static void fuzz_config(dc_fuzz_in *in, dcptopk_merge_config *c, int kind)
{
    static const int32_t ks[] = {32, 64, 96, 128, 256, 512, 1024, 2048, 4096};
    static const int32_t ns[] = {32, 64, 96, 128, 384, 0, 2048};
    static const int32_t ws[] = {1, 2, 3, 4, 8, 16};
    static const int32_t bs[] = {0, 1, 16, 64, 4096, 3};
    static const int32_t ils[] = {1, 2, 4, 8, 64, 3};
    static const int32_t bools[] = {0, 1};
    static const int32_t kinds[] = {DCPTOPK_MERGE_PACKED, DCPTOPK_MERGE_PAIR};
    dcptopk_merge_config init = DCPTOPK_MERGE_CONFIG_INIT;
    *c = init;
    /* At most sizeof (fuzz_struct_size says why). */
    if (fz_pick(in, 16) == 0)
        c->struct_size = fz_u32(in) % (uint32_t)(sizeof *c + 1);
    c->kind = fz_pick(in, 16) ? kind : fz_i32(in, kinds, 2);
    c->topk = fz_i32(in, ks, sizeof ks / sizeof ks[0]);
    c->local_topk = kind == DCPTOPK_MERGE_PAIR && fz_pick(in, 2)
                        ? c->topk
                        : fz_i32(in, ns, sizeof ns / sizeof ns[0]);
    c->world_size = fz_i32(in, ws, sizeof ws / sizeof ws[0]);
    c->block_size = fz_i32(in, bs, sizeof bs / sizeof bs[0]);
    c->interleave = fz_i32(in, ils, sizeof ils / sizeof ils[0]);
    c->emit_ids = fz_i32(in, bools, 2);
    c->exact = fz_i32(in, bools, 2);
}

/* At most the struct's own size: past it the library reads a newer
 * caller's tail, which these structs do not have (tests/cpu/test_structs.c
 * covers larger sizes). */
static uint32_t fuzz_struct_size(dc_fuzz_in *in, uint32_t size)
{
    return fz_pick(in, 16) ? size : fz_u32(in) % (size + 1);
}

static void fuzz_rows_map(arena *a, dc_fuzz_in *in,
                          const dcptopk_merge_config *c, int64_t rows,
                          dcptopk_rows_map *m)
{
    static const int32_t reqs[] = {0, 1, 2, 4};
    static const int32_t cols[] = {0, 1, 4, 64};
    static const int32_t srows[] = {0, 1, 64, 4096};
    memset(m, 0, sizeof *m);
    if (fz_pick(in, 2) == 0) {
        if (fz_pick(in, 8) == 0)
            m->counts_out = buffer(a, in, need(rows, 1, 1, INT32_MAX), 4);
        return;
    }
    int64_t k = in_range(c->topk, 32, DCPTOPK_MAX_TOPK);
    m->num_reqs = fz_i32(in, reqs, 4);
    m->block_table_cols = fz_i32(in, cols, 4);
    m->block_table_stride = (int64_t)m->block_table_cols + fz_i64(in, 8) % 9;
    if (fz_pick(in, 8) == 0)
        m->block_table_stride = fz_i64(in, 128);
    m->stride_rows = fz_i32(in, srows, 4);
    m->rows_out_stride = fz_pick(in, 4) ? 0 : fz_i64(in, 8192);
    m->req_id = buffer(a, in, need(rows, 1, 1, INT32_MAX), 4);
    m->block_table = buffer(a, in,
                            need(m->num_reqs, m->block_table_stride,
                                 m->block_table_cols, INT32_MAX),
                            4);
    int64_t rs = m->rows_out_stride ? m->rows_out_stride : k;
    m->rows_out = buffer(a, in, k < 0 ? -1 : need(rows, rs, k, INT32_MAX), 4);
    m->counts_out = buffer(a, in, need(rows, 1, 1, INT32_MAX), 4);
}

/* A stride that fits `len` columns in 16-byte rows (len itself when it is
 * out of any sane range). */
static int64_t round8(int64_t len)
{
    return len >= 0 && len < (INT64_C(1) << 40) ? (len + 7) / 8 * 8 : len;
}

/* Stride of a row where 0 means `width`. */
static int64_t eff(int64_t stride, int64_t width)
{
    return stride ? stride : width;
}

static void fuzz_select_args(arena *a, dc_fuzz_in *in,
                             const dcptopk_merge_config *c,
                             dcptopk_select_args *s)
{
    dcptopk_select_args init = DCPTOPK_SELECT_ARGS_INIT;
    *s = init;
    s->struct_size = fuzz_struct_size(in, sizeof *s);
    int64_t w = in_range(c->world_size, 1, DCPTOPK_MAX_WORLD_SIZE);
    int64_t k = in_range(c->topk, 32, DCPTOPK_MAX_TOPK);
    int64_t words = words_of(c->local_topk);
    s->rows = fz_i64(in, 6);
    s->rank_stride_rows = fz_pick(in, 2) ? 0 : fz_i64(in, 12);
    s->rank = (int32_t)fz_i64(in, 17);
    s->ids_out_stride = fz_pick(in, 2) ? 0 : fz_i64(in, 8192);
    int64_t rs = eff(s->rank_stride_rows, s->rows);
    s->gathered = buffer(a, in,
                         w < 0 || words < 0 || rs < s->rows
                             ? -1
                             : need(w, (__int128)rs * words,
                                    (__int128)s->rows * words, INT32_MAX),
                         4);
    if (fz_pick(in, 3))
        s->ids_out = buffer(a, in,
                            k < 0 ? -1
                                  : need(s->rows, eff(s->ids_out_stride, k), k,
                                         INT32_MAX),
                            4);
    fuzz_rows_map(a, in, c, s->rows, &s->rows_map);
    s->max_local_len = fz_i64(in, 300);
    s->logits_stride = fz_pick(in, 2) ? round8(s->max_local_len)
                                      : fz_i64(in, 400);
    s->logits = buffer(a, in,
                       need(s->rows, s->logits_stride, s->max_local_len,
                            INT32_MAX),
                       2);
    s->row_ends = buffer(a, in, need(s->rows, 1, 1, INT32_MAX), 4);
}

/* ---------------------------------------------------------------- calls */

static void run_pack(arena *a, dc_fuzz_in *in, int indices)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PACKED);
    dcptopk_pack_args p = DCPTOPK_PACK_ARGS_INIT;
    p.struct_size = fuzz_struct_size(in, sizeof p);
    int64_t n = in_range(c.local_topk, 32, DCPTOPK_MAX_TOPK);
    int64_t words = words_of(n);
    p.rows = fz_i64(in, 6);
    p.max_local_len = fz_i64(in, 600);
    p.logits_stride = fz_pick(in, 2) ? round8(p.max_local_len)
                                     : fz_i64(in, 800);
    p.logits = buffer(a, in,
                      need(p.rows, p.logits_stride, p.max_local_len, INT32_MAX),
                      2);
    p.row_ends = buffer(a, in, need(p.rows, 1, 1, INT32_MAX), 4);
    if (indices || fz_pick(in, 8) == 0) {
        p.local_ids_stride = fz_pick(in, 2) ? 0 : fz_i64(in, 1024);
        p.local_ids = buffer(a, in,
                             n < 0 ? -1
                                   : need(p.rows, eff(p.local_ids_stride, n), n,
                                          INT32_MAX),
                             4);
    }
    p.out = buffer(a, in, words < 0 ? -1 : need(p.rows, words, words, INT32_MAX),
                   4);
    if (a->skip)
        return;
    if (indices)
        dc_fuzz_outcome("dcptopk_ref_pack_indices",
                        dcptopk_ref_pack_indices(&c, &p));
    else
        dc_fuzz_outcome("dcptopk_ref_pack", dcptopk_ref_pack(&c, &p));
}

static void run_select(arena *a, dc_fuzz_in *in)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PACKED);
    dcptopk_select_args s;
    fuzz_select_args(a, in, &c, &s);
    int64_t rows = s.rows;
    uint32_t *sat = fz_pick(in, 2)
                        ? buffer(a, in, need(rows, 1, 1, INT32_MAX), 4)
                        : NULL;
    if (a->skip)
        return;
    dc_fuzz_outcome("dcptopk_ref_select", dcptopk_ref_select(&c, &s, sat));
}

static void run_rescue(arena *a, dc_fuzz_in *in)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PACKED);
    dcptopk_select_args s;
    fuzz_select_args(a, in, &c, &s);
    int64_t t = fz_pick(in, 8) ? fz_i64(in, 6) : fz_i64(in, 1 << 20);
    uint32_t sat_word = fz_u32(in);
    int64_t kwords = words_of(in_range(c.topk, 32, DCPTOPK_MAX_TOPK));
    const int32_t *push[DCPTOPK_MAX_WORLD_SIZE];
    for (int i = 0; i < DCPTOPK_MAX_WORLD_SIZE; i++)
        push[i] = kwords < 0 ? NULL : buffer(a, in, kwords, 4);
    if (a->skip)
        return;
    dc_fuzz_outcome("dcptopk_ref_rescue_row",
                    dcptopk_ref_rescue_row(&c, &s, t, sat_word,
                                           fz_pick(in, 8) ? push : NULL));
}

static void run_push_list(arena *a, dc_fuzz_in *in)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PACKED);
    int64_t len = fz_i64(in, 600);
    int32_t row_end = (int32_t)fz_i64(in, 700);
    int64_t kwords = words_of(in_range(c.topk, 32, DCPTOPK_MAX_TOPK));
    const uint16_t *row = buffer(a, in, need(1, len, len, 1), 2);
    int32_t *out = buffer(a, in, kwords, 4);
    if (a->skip)
        return;
    dc_fuzz_outcome("dcptopk_ref_push_list",
                    dcptopk_ref_push_list(&c, row, len, row_end, out));
}

static void run_pair_select(arena *a, dc_fuzz_in *in)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PAIR);
    dcptopk_pair_select_args s = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    s.struct_size = fuzz_struct_size(in, sizeof s);
    static const int32_t layouts[] = {0, 1};
    s.layout = fz_i32(in, layouts, 2);
    int64_t w = in_range(c.world_size, 1, DCPTOPK_MAX_WORLD_SIZE);
    int64_t k = in_range(c.topk, 32, DCPTOPK_MAX_TOPK);
    s.rows = fz_i64(in, 6);
    s.rank_stride_rows = fz_pick(in, 2) ? 0 : fz_i64(in, 12);
    s.rank = (int32_t)fz_i64(in, 17);
    s.ids_out_stride = fz_pick(in, 2) ? 0 : fz_i64(in, 8192);
    int64_t rs = eff(s.rank_stride_rows, s.rows);
    int64_t cand;
    if (w < 0 || k < 0)
        cand = -1;
    else if (s.layout == DCPTOPK_LAYOUT_ROW_MAJOR)
        cand = need(s.rows, (__int128)w * k * 2, (__int128)w * k * 2,
                    INT32_MAX);
    else
        cand = rs < s.rows ? -1
                           : need(w, (__int128)rs * k * 2,
                                  (__int128)s.rows * k * 2, INT32_MAX);
    s.candidates = buffer(a, in, cand, 4);
    if (fz_pick(in, 3))
        s.ids_out = buffer(a, in,
                           k < 0 ? -1
                                 : need(s.rows, eff(s.ids_out_stride, k), k,
                                        INT32_MAX),
                           4);
    fuzz_rows_map(a, in, &c, s.rows, &s.rows_map);
    if (a->skip)
        return;
    dc_fuzz_outcome("dcptopk_ref_pair_select", dcptopk_ref_pair_select(&c, &s));
}

static void run_pair_pack(arena *a, dc_fuzz_in *in)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PAIR);
    dcptopk_pair_pack_args p = DCPTOPK_PAIR_PACK_ARGS_INIT;
    p.struct_size = fuzz_struct_size(in, sizeof p);
    int64_t k = in_range(c.topk, 32, DCPTOPK_MAX_TOPK);
    p.rows = fz_i64(in, 6);
    p.rank = (int32_t)fz_i64(in, 17);
    p.logits_stride = fz_i64(in, 600);
    p.local_ids_stride = fz_pick(in, 2) ? 0 : fz_i64(in, 8192);
    p.logits = buffer(a, in, need(p.rows, p.logits_stride, p.logits_stride,
                                  INT32_MAX),
                      4);
    p.local_ids = buffer(a, in,
                         k < 0 ? -1
                               : need(p.rows, eff(p.local_ids_stride, k), k,
                                      INT32_MAX),
                         4);
    if (fz_pick(in, 2))
        p.row_starts = buffer(a, in, need(p.rows, 1, 1, INT32_MAX), 4);
    if (fz_pick(in, 2))
        p.row_ends = buffer(a, in, need(p.rows, 1, 1, INT32_MAX), 4);
    p.out = buffer(a, in, k < 0 ? -1 : need(p.rows, 2 * k, 2 * k, INT32_MAX),
                   4);
    if (a->skip)
        return;
    dc_fuzz_outcome("dcptopk_ref_pair_pack", dcptopk_ref_pair_pack(&c, &p));
}

static void run_check_contract(arena *a, dc_fuzz_in *in)
{
    dcptopk_merge_config c;
    fuzz_config(in, &c, DCPTOPK_MERGE_PACKED);
    int64_t words = words_of(in_range(c.local_topk, 32, DCPTOPK_MAX_TOPK));
    int64_t rows = fz_i64(in, 6);
    int64_t len = fz_i64(in, 600);
    int64_t stride = fz_pick(in, 2) ? len : fz_i64(in, 800);
    /* No row or stride limit in this call's contract beyond the buffers. */
    const int32_t *packed =
        buffer(a, in, words < 0 ? -1 : need(rows, words, words, INT64_MAX), 4);
    const uint16_t *logits =
        buffer(a, in,
               len > (1 << DCPTOPK_LOCAL_INDEX_BITS) ? -1
                                                     : need(rows, stride, len,
                                                            INT64_MAX),
               2);
    const int32_t *row_ends = buffer(a, in, need(rows, 1, 1, INT64_MAX), 4);
    int64_t bad = 0;
    if (a->skip)
        return;
    dcptopk_result r = dcptopk_ref_check_contract(
        &c, packed, logits, stride, len, row_ends, rows,
        fz_pick(in, 4) ? &bad : NULL);
    dc_fuzz_outcome("dcptopk_ref_check_contract", r);
}

int dc_fuzz_ref_args(const uint8_t *data, size_t size)
{
    dc_fuzz_in in = {data, size};
    unsigned op = fz_pick(&in, 8);
    /* The fields come first; what follows them also fills the buffers. */
    arena a;
    memset(&a, 0, sizeof a);
    a.fill = data;
    a.fill_n = size;
    a.fill_at = size / 2;
    switch (op) {
    case 0: run_pack(&a, &in, 0); break;
    case 1: run_pack(&a, &in, 1); break;
    case 2: run_select(&a, &in); break;
    case 3: run_rescue(&a, &in); break;
    case 4: run_pair_select(&a, &in); break;
    case 5: run_pair_pack(&a, &in); break;
    case 6: run_check_contract(&a, &in); break;
    default: run_push_list(&a, &in); break;
    }
    arena_free(&a);
    return 0;
}

DC_FUZZ_ENTRY(ref_args)
