/* ref.c - the CPU reference model (the oracle): docs/CONTRACT.md implemented
 * literally, on host pointers. It is the definition of correct for the GPU
 * kernels, which must match it bit for bit, so it favours the obvious over the
 * fast: selections sort every candidate. Arguments go through the same checks
 * (kernels/common/check.c) as the GPU entry points. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "packed.h"
#include "pair.h"
#include "structs.h"

#define DC_MAX_LOCAL_LEN (1 << DCPTOPK_LOCAL_INDEX_BITS)
#define DC_EMPTY_SCORE_BITS ((int32_t)0xFF800000u) /* fp32 -inf */

/* ------------------------------------------------------------------ keys */

uint32_t dcptopk_ref_ord16(uint16_t bits)
{
    uint32_t b = bits;
    if ((b & 0x7FFFu) > 0x7F80u)
        return 0u; /* NaN: never a candidate */
    return (b & 0x8000u) ? (~b & 0xFFFFu) : (b | 0x8000u);
}

uint32_t dcptopk_ref_ord32(uint32_t bits)
{
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
        return 0u;
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

/* gid = (l / S) * W * S + owner * S + l % S, in 64 bits (may exceed int32 for
 * the pair merge's large ids). */
static int64_t gid64(int64_t l, int64_t owner, int64_t w, int64_t s)
{
    return (l / s) * w * s + owner * s + l % s;
}

int32_t dcptopk_ref_global_id(int32_t l, int32_t owner, int32_t world_size,
                              int32_t interleave)
{
    if (l < 0 || world_size < 1 || interleave < 1 || owner < 0 ||
        owner >= world_size)
        return -1;
    int64_t g = gid64(l, owner, world_size, interleave);
    return g > INT32_MAX ? -1 : (int32_t)g;
}

/* Local id of a gid (the inverse of gid64). */
static int64_t local_of(int64_t gid, int64_t w, int64_t s)
{
    return (gid / (w * s)) * s + gid % s;
}

static int32_t owner_of(int64_t gid, int64_t w, int64_t s)
{
    return (int32_t)((gid / s) % w);
}

dcptopk_ref_candidate dcptopk_ref_decode(const int32_t *packed_row, int32_t n,
                                         int32_t j, int32_t owner,
                                         int32_t world_size, int32_t interleave)
{
    dcptopk_ref_candidate c = {0, -1, -1};
    if (!packed_row || n <= 0 || j < 0 || j >= n)
        return c;
    uint32_t w = (uint32_t)packed_row[j];
    if (w == 0)
        return c; /* empty slot (its plane bit is ignored) */
    uint32_t plane = (uint32_t)packed_row[n + j / 32];
    c.ord16 = w >> 16;
    c.local_id = (int32_t)((0xFFFFu - (w & 0xFFFFu)) |
                           (((plane >> (j % 32)) & 1u) << 16));
    c.global_id = dcptopk_ref_global_id(c.local_id, owner, world_size,
                                        interleave);
    return c;
}

/* Host pointers the shared checks do not cover (push lists, the contract
 * checker) are refused when misaligned, as dc_check_* refuses the others. */
static int misaligned(const void *p, size_t align)
{
    return ((uintptr_t)p % align) != 0;
}

/* Columns of a row that hold candidates: l < E = min(row_end, max_local_len,
 * 2^17); a negative row_end counts as 0. */
static int64_t row_bound(int32_t row_end, int64_t max_local_len)
{
    int64_t e = row_end < 0 ? 0 : row_end;
    if (e > max_local_len)
        e = max_local_len;
    if (e > DC_MAX_LOCAL_LEN)
        e = DC_MAX_LOCAL_LEN;
    return e;
}

/* ------------------------------------------------------- packed format */

static void put_word(int32_t *out, int32_t n, int32_t j, uint32_t key16,
                     int64_t l)
{
    out[j] = (int32_t)((key16 << 16) | (0xFFFFu - ((uint32_t)l & 0xFFFFu)));
    if ((l >> 16) & 1)
        out[n + j / 32] = (int32_t)((uint32_t)out[n + j / 32] | (1u << (j % 32)));
}

/* Local top-n of one row, packed into out[n + n/32]: the candidates ordered by
 * (ord16 descending, l ascending), the first min(n, v) of them, written in
 * ascending local id order, then empty slots. `hist` has 65536 entries.
 *
 * Rather than sorting, it finds the threshold key h (the n-th largest key)
 * with a histogram; the sent set is then every candidate above h plus the
 * lowest-l candidates equal to h, which a scan in ascending l yields directly
 * in slot order. */
static void topn_row(const uint16_t *row, int64_t e, int32_t n, int32_t *out,
                     uint32_t *hist)
{
    memset(out, 0, sizeof *out * (size_t)(n + n / 32));
    memset(hist, 0, sizeof *hist * 65536);
    int64_t v = 0;
    for (int64_t l = 0; l < e; l++) {
        uint32_t k = dcptopk_ref_ord16(row[l]);
        if (k) {
            hist[k]++;
            v++;
        }
    }
    if (v == 0)
        return;
    /* h = the largest key with count(keys >= h) >= min(n, v). */
    int64_t want = v < n ? v : n, above = 0;
    uint32_t h = 65535;
    while (above + hist[h] < want) {
        above += hist[h];
        h--;
    }
    int64_t take_at_h = want - above; /* the lowest-l ones at key h */
    int32_t j = 0;
    for (int64_t l = 0; l < e; l++) {
        uint32_t k = dcptopk_ref_ord16(row[l]);
        if (k > h || (k == h && take_at_h > 0)) {
            if (k == h)
                take_at_h--;
            put_word(out, n, j++, k, l);
        }
    }
}

dcptopk_result dcptopk_ref_pack(const dcptopk_merge_config *config,
                                const dcptopk_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = DC_STRUCT_IN(NULL, "args", args, &a, PACK_ARGS)) ||
        (r = dc_check_pack_args(NULL, &c, &a, 0)))
        return r;
    args = &a;
    int32_t n = c.local_topk, words = dcptopk_packed_row_words(n);
    uint32_t *hist = malloc(sizeof *hist * 65536);
    if (!hist)
        return dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY, "histogram of 256 KiB");
    for (int64_t t = 0; t < args->rows; t++)
        topn_row(args->logits + t * args->logits_stride,
                 row_bound(args->row_ends[t], args->max_local_len), n,
                 args->out + t * words, hist);
    free(hist);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_ref_pack_indices(const dcptopk_merge_config *config,
                                        const dcptopk_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_pack_args a = DCPTOPK_PACK_ARGS_INIT;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = DC_STRUCT_IN(NULL, "args", args, &a, PACK_ARGS)) ||
        (r = dc_check_pack_args(NULL, &c, &a, 1)))
        return r;
    args = &a;
    int32_t n = c.local_topk, words = dcptopk_packed_row_words(n);
    int64_t ids_stride = args->local_ids_stride ? args->local_ids_stride : n;
    for (int64_t t = 0; t < args->rows; t++) {
        const uint16_t *row = args->logits + t * args->logits_stride;
        const int32_t *ids = args->local_ids + t * ids_stride;
        int32_t *out = args->out + t * words;
        int64_t e = row_bound(args->row_ends[t], args->max_local_len);
        memset(out, 0, sizeof *out * (size_t)words);
        for (int32_t j = 0; j < n; j++) {
            int32_t l = ids[j];
            if (l < 0 || l >= e)
                continue;
            uint32_t k = dcptopk_ref_ord16(row[l]);
            if (k)
                put_word(out, n, j, k, l);
        }
    }
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_ref_push_list(const dcptopk_merge_config *config,
                                     const uint16_t *logits_row,
                                     int64_t max_local_len, int32_t row_end,
                                     int32_t *out)
{
    dcptopk_merge_config c;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = dc_check_packed_config(NULL, &c)))
        return r;
    if (max_local_len < 0 || max_local_len > DC_MAX_LOCAL_LEN)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "max_local_len = %lld: must be in 0..%d (2^17 local "
                       "ids)",
                       (long long)max_local_len, DC_MAX_LOCAL_LEN);
    if (!logits_row)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "logits_row is NULL");
    if (!out)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    if (misaligned(logits_row, 2))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "logits_row = %p: must be 2-byte aligned",
                       (const void *)logits_row);
    if (misaligned(out, 4))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "out = %p: must be 4-byte aligned", (void *)out);
    uint32_t *hist = malloc(sizeof *hist * 65536);
    if (!hist)
        return dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY, "histogram of 256 KiB");
    topn_row(logits_row, row_bound(row_end, max_local_len), c.topk, out, hist);
    free(hist);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

/* ------------------------------------------------------------- selection */

/* One candidate of a selection. `pos` orders both the output and equal keys. */
typedef struct dc_cand {
    uint64_t key; /* larger first; never 0 for a candidate */
    int64_t pos;
    int64_t gid;
    int64_t local; /* local id on its owner */
    int32_t owner;
} dc_cand;

static int cmp_key_desc(const void *pa, const void *pb)
{
    const dc_cand *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static int cmp_pos_asc(const void *pa, const void *pb)
{
    const dc_cand *a = pa, *b = pb;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Output of one row (ids and/or owned physical rows). */
typedef struct dc_row_out {
    int32_t k;
    int32_t rank;
    int32_t block_size;
    int32_t *ids;              /* [k] or NULL */
    const dcptopk_rows_map *map; /* rows_out NULL = none */
    int64_t t;
    int32_t prefix_shift; /* key >> prefix_shift = its 16-bit score prefix */
    uint32_t *hist;       /* 65536 counters (scratch) */
} dc_row_out;

/* Physical row of local id l on this rank, or -1 when it is not mapped (the
 * request owns nothing, or the block index is past the table). The product
 * wraps like the kernels' 32-bit integer arithmetic. */
static int mapped_row(const dcptopk_rows_map *m, int64_t t, int64_t l,
                      int32_t block_size, int32_t *row)
{
    int32_t req = m->req_id[t];
    if (req < 0 || req >= m->num_reqs)
        return 0;
    int64_t blk = l / block_size;
    if (blk >= m->block_table_cols)
        return 0;
    uint32_t entry =
        (uint32_t)m->block_table[(int64_t)req * m->block_table_stride + blk];
    *row = (int32_t)(entry * (uint32_t)m->stride_rows +
                     (uint32_t)(l % block_size));
    return 1;
}

/* Selects the k largest keys of cands[0..count) (equal keys: lower position
 * first), writes them in ascending position order, and returns how many were
 * selected; *lowest = the smallest selected key (0 when none). Reorders
 * cands. */
static int64_t select_and_emit(dc_cand *cands, int64_t count,
                               const dc_row_out *o, uint64_t *lowest)
{
    /* Only to keep the sort short: a candidate whose 16-bit key prefix (the
     * score's ord16, or ord32's top half) is below the k-th largest prefix h
     * is beaten by at least k others, so it cannot be selected. */
    if (count > o->k) {
        uint32_t *hist = o->hist;
        memset(hist, 0, sizeof *hist * 65536);
        for (int64_t i = 0; i < count; i++)
            hist[(cands[i].key >> o->prefix_shift) & 0xFFFFu]++;
        int64_t above = 0;
        uint32_t h = 65535;
        while (above + hist[h] < o->k)
            above += hist[h--];
        int64_t kept = 0;
        for (int64_t i = 0; i < count; i++)
            if (((cands[i].key >> o->prefix_shift) & 0xFFFFu) >= h)
                cands[kept++] = cands[i];
        count = kept;
    }
    qsort(cands, (size_t)count, sizeof *cands, cmp_key_desc);
    int64_t sel = count < o->k ? count : o->k;
    *lowest = sel ? cands[sel - 1].key : 0;
    qsort(cands, (size_t)sel, sizeof *cands, cmp_pos_asc);
    if (o->ids) {
        for (int64_t i = 0; i < o->k; i++)
            o->ids[i] = i < sel ? (int32_t)cands[i].gid : -1;
    }
    const dcptopk_rows_map *m = o->map;
    if (m && m->rows_out) {
        int64_t stride = m->rows_out_stride ? m->rows_out_stride : o->k;
        int32_t *rows = m->rows_out + o->t * stride;
        int32_t owned = 0;
        for (int64_t i = 0; i < sel; i++) {
            int32_t row;
            if (cands[i].owner == o->rank &&
                mapped_row(m, o->t, cands[i].local, o->block_size, &row))
                rows[owned++] = row;
        }
        for (int64_t i = owned; i < o->k; i++)
            rows[i] = -1;
        m->counts_out[o->t] = owned;
    }
    return sel;
}

/* Adds the non-empty slots of one packed row (n slots, sent by `owner`) with
 * ord16 >= min_key16 to cands; positions continue from *pos (every slot, empty
 * or skipped, advances it). Returns the new count. */
static int64_t add_packed(dc_cand *cands, int64_t count, const int32_t *row,
                          int32_t n, int32_t owner, const dcptopk_merge_config *c,
                          uint32_t min_key16, int64_t *pos)
{
    int32_t bits = dc_gid_bits(c->world_size);
    uint64_t gid_mask = (UINT64_C(1) << bits) - 1;
    for (int32_t j = 0; j < n; j++, (*pos)++) {
        dcptopk_ref_candidate d =
            dcptopk_ref_decode(row, n, j, owner, c->world_size, c->interleave);
        if ((uint32_t)row[j] == 0 || d.ord16 < min_key16)
            continue;
        dc_cand *x = &cands[count++];
        x->gid = gid64(d.local_id, owner, c->world_size, c->interleave);
        x->key = ((uint64_t)d.ord16 << bits) | (gid_mask - (uint64_t)x->gid);
        x->pos = *pos;
        x->local = d.local_id;
        x->owner = owner;
    }
    return count;
}

/* The scratch of one selection: room for `n` candidates and the 65536
 * counters of select_and_emit's prefix histogram. */
static dcptopk_result alloc_scratch(int64_t n, dc_cand **cands,
                                    uint32_t **hist)
{
    *cands = malloc(sizeof **cands * (size_t)n);
    *hist = malloc(sizeof **hist * 65536);
    if (*cands && *hist)
        return DCPTOPK_SUCCESS;
    free(*cands);
    free(*hist);
    return dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY, "%lld candidates",
                   (long long)n);
}

/* indptr [rows + 1]: the exclusive prefix sum of counts (the GPU's
 * dcptopk_indptr; int32, whose range the argument check bounded). */
static void write_indptr(int32_t *indptr, const int32_t *counts, int64_t rows)
{
    if (!indptr)
        return;
    int32_t sum = 0;
    indptr[0] = 0;
    for (int64_t t = 0; t < rows; t++)
        indptr[t + 1] = sum += counts[t];
}

/* Output of row t on `rank`, for both merges: its ids (row stride 0 = K)
 * and its owned physical rows. `prefix_shift` depends on the merge's key
 * layout (see dc_row_out). */
static dc_row_out row_out(const dcptopk_merge_config *c, int32_t rank,
                          int32_t *ids_out, int64_t ids_out_stride,
                          const dcptopk_rows_map *map, int64_t t,
                          int32_t prefix_shift, uint32_t *hist)
{
    dc_row_out o;
    o.k = c->topk;
    o.rank = rank;
    o.block_size = c->block_size;
    o.ids = ids_out ? ids_out + t * (ids_out_stride ? ids_out_stride : c->topk)
                    : NULL;
    o.map = map->rows_out ? map : NULL;
    o.t = t;
    o.prefix_shift = prefix_shift;
    o.hist = hist;
    return o;
}

/* Packed-merge keys: the 16-bit score prefix sits above the gid bits. */
static dc_row_out select_row_out(const dcptopk_merge_config *c,
                                 const dcptopk_select_args *a, int64_t t,
                                 uint32_t *hist)
{
    return row_out(c, a->rank, a->ids_out, a->ids_out_stride, &a->rows_map, t,
                   dc_gid_bits(c->world_size), hist);
}

static const int32_t *gathered_row(const dcptopk_merge_config *c,
                                   const dcptopk_select_args *a, int32_t r,
                                   int64_t t)
{
    int64_t stride = a->rank_stride_rows ? a->rank_stride_rows : a->rows;
    return a->gathered +
           ((int64_t)r * stride + t) * dcptopk_packed_row_words(c->local_topk);
}

dcptopk_result dcptopk_ref_select(const dcptopk_merge_config *config,
                                  const dcptopk_select_args *args,
                                  uint32_t *sat_out)
{
    dcptopk_merge_config c;
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = DC_STRUCT_IN(NULL, "args", args, &a, SELECT_ARGS)) ||
        (r = dc_check_select_args(NULL, &c, &a)))
        return r;
    args = &a;
    int32_t w = c.world_size, n = c.local_topk;
    dc_cand *cands;
    uint32_t *hist;
    if ((r = alloc_scratch((int64_t)w * n, &cands, &hist)))
        return r;
    int32_t bits = dc_gid_bits(w);
    for (int64_t t = 0; t < args->rows; t++) {
        int64_t count = 0, pos = 0;
        for (int32_t owner = 0; owner < w; owner++)
            count = add_packed(cands, count, gathered_row(&c, args, owner, t),
                               n, owner, &c, 0, &pos);
        dc_row_out o = select_row_out(&c, args, t, hist);
        uint64_t lowest;
        int64_t sel = select_and_emit(cands, count, &o, &lowest);
        if (!c.exact || !sat_out)
            continue;
        uint32_t tau16 = sel == c.topk ? (uint32_t)(lowest >> bits) : 0;
        /* The K-th selected gid (0 when fewer than K were selected). */
        const uint64_t gid_mask = (UINT64_C(1) << bits) - 1;
        int64_t kth_gid = sel == c.topk ? (int64_t)(gid_mask - (lowest & gid_mask))
                                        : 0;
        uint32_t mask = 0;
        for (int32_t owner = 0; owner < w; owner++) {
            const int32_t *row = gathered_row(&c, args, owner, t);
            int32_t open = 0;
            for (int32_t j = 0; j < n; j++) {
                uint32_t word = (uint32_t)row[j];
                if (word == 0)
                    continue;
                /* A word may hide a better unsent token: above tau16, or
                 * at tau16 with the next local id's gid below the K-th's
                 * (the pack sends the lowest local ids of a tied score). */
                dcptopk_ref_candidate d = dcptopk_ref_decode(
                    row, n, j, owner, w, c.interleave);
                int64_t next = gid64((int64_t)d.local_id + 1, owner, w,
                                     c.interleave);
                open += (word >> 16) > tau16 ||
                        ((word >> 16) == tau16 && next < kth_gid);
            }
            if (open == n)
                mask |= 1u << owner;
        }
        sat_out[t] = (mask << 16) | tau16;
    }
    write_indptr(args->indptr_out, args->rows_map.counts_out, args->rows);
    free(hist);
    free(cands);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

static int popcount32(uint32_t x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

dcptopk_result dcptopk_ref_rescue_row(const dcptopk_merge_config *config,
                                      const dcptopk_select_args *args,
                                      int64_t t, uint32_t sat_word,
                                      const int32_t *const *push)
{
    dcptopk_merge_config c;
    dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = DC_STRUCT_IN(NULL, "args", args, &a, SELECT_ARGS)) ||
        (r = dc_check_select_args(NULL, &c, &a)))
        return r;
    args = &a;
    if (t < 0 || t >= args->rows)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "t = %lld: must be in [0, args->rows = %lld)",
                       (long long)t, (long long)args->rows);
    int32_t w = c.world_size, n = c.local_topk, k = c.topk;
    uint32_t mask = sat_word >> 16, tau16 = sat_word & 0xFFFFu;
    if (mask == 0) {
        dc_clear(NULL);
        return DCPTOPK_SUCCESS; /* not saturated: round 1 stands */
    }
    if (mask >> w)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "sat_word = 0x%08x: its mask names a rank >= "
                       "world_size = %d",
                       sat_word, w);
    int slots = popcount32(mask);
    if (slots > dcptopk_rescue_slots(k, n))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "sat_word = 0x%08x: %d saturated ranks, more than "
                       "rescue_slots(%d, %d) = %d",
                       sat_word, slots, k, n, dcptopk_rescue_slots(k, n));
    if (!push)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "push is NULL");
    for (int s = 0; s < slots; s++)
        if (!push[s])
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "push[%d] is NULL (%d saturated ranks)", s, slots);
    for (int s = 0; s < slots; s++)
        if (misaligned(push[s], 4))
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "push[%d] = %p: must be 4-byte aligned", s,
                           (const void *)push[s]);
    dc_cand *cands;
    uint32_t *hist;
    if ((r = alloc_scratch((int64_t)w * k, &cands, &hist)))
        return r;
    int64_t count = 0, pos = 0;
    for (int32_t owner = 0; owner < w; owner++) {
        if (mask & (1u << owner)) {
            int s = popcount32(mask & ((1u << owner) - 1));
            count = add_packed(cands, count, push[s], k, owner, &c, 0, &pos);
        } else {
            /* Empty slots stay out even when tau16 = 0 (fewer than K were
             * selected in round 1). */
            count = add_packed(cands, count, gathered_row(&c, args, owner, t),
                               n, owner, &c, tau16, &pos);
        }
    }
    dc_row_out o = select_row_out(&c, args, t, hist);
    uint64_t lowest;
    select_and_emit(cands, count, &o, &lowest);
    /* The row's count changed: the offsets after it move. */
    write_indptr(args->indptr_out, args->rows_map.counts_out, args->rows);
    free(hist);
    free(cands);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

/* -------------------------------------------------- the whole packed merge */

dcptopk_result dcptopk_ref_packed_merge(
    const dcptopk_merge_config *config, const uint16_t *const *logits,
    int64_t logits_stride, int64_t max_local_len,
    const int32_t *const *row_ends, int64_t rows, int32_t *const *ids_out,
    const dcptopk_rows_map *rows_maps, uint32_t *const *sat_out,
    int64_t *rescued_rows)
{
    dcptopk_merge_config c;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = dc_check_packed_config(NULL, &c)))
        return r;
    if (!logits)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "logits is NULL");
    if (!row_ends)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "row_ends is NULL");
    int32_t w = c.world_size, n = c.local_topk, k = c.topk;
    for (int32_t q = 0; q < w && rows > 0; q++) {
        if (!logits[q])
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "logits[%d] is NULL (world_size = %d)", q, w);
        if (!row_ends[q])
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                           "row_ends[%d] is NULL (world_size = %d)", q, w);
    }
    if (rows < 0 || rows > INT32_MAX)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be in 0..%d", (long long)rows,
                       INT32_MAX);
    int32_t words = dcptopk_packed_row_words(n), kwords =
                                                     dcptopk_packed_row_words(k);
    int32_t *gathered = malloc(sizeof *gathered * (size_t)w * (size_t)(rows ? rows : 1) *
                               (size_t)words);
    uint32_t *sat = calloc((size_t)w * (size_t)(rows ? rows : 1), sizeof *sat);
    int32_t *push = malloc(sizeof *push * (size_t)w * (size_t)kwords);
    r = DCPTOPK_SUCCESS;
    if (!gathered || !sat || !push) {
        r = dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY, "gathered rows of %lld rows",
                    (long long)rows);
        goto done;
    }
    /* Round 1: every rank packs its rows into its segment of the gather. */
    for (int32_t q = 0; q < w; q++) {
        dcptopk_pack_args pa = DCPTOPK_PACK_ARGS_INIT;
        pa.logits = logits[q];
        pa.logits_stride = logits_stride;
        pa.max_local_len = max_local_len;
        pa.row_ends = row_ends[q];
        pa.rows = rows;
        pa.out = gathered + (size_t)q * (size_t)rows * (size_t)words;
        if ((r = dcptopk_ref_pack(&c, &pa))) {
            char note[64];
            snprintf(note, sizeof note, " (rank %d)", q);
            dc_fail_append(NULL, note);
            goto done;
        }
    }
    /* Every rank selects from the same gathered buffer. */
    dcptopk_select_args sa[DCPTOPK_MAX_WORLD_SIZE];
    for (int32_t q = 0; q < w; q++) {
        dcptopk_select_args a = DCPTOPK_SELECT_ARGS_INIT;
        a.gathered = gathered;
        a.rank_stride_rows = rows;
        a.rows = rows;
        a.rank = q;
        a.ids_out = ids_out ? ids_out[q] : NULL;
        if (rows_maps)
            a.rows_map = rows_maps[q];
        a.logits = logits[q];
        a.logits_stride = logits_stride;
        a.max_local_len = max_local_len;
        a.row_ends = row_ends[q];
        sa[q] = a;
        if ((r = dcptopk_ref_select(&c, &sa[q], sat + (size_t)q * (size_t)rows)))
            goto done;
    }
    /* Round 2: the saturated ranks push their local top K; every rank
     * rescues the row. */
    int64_t rescued = 0;
    for (int64_t t = 0; c.exact && t < rows; t++) {
        uint32_t word = sat[t], mask = word >> 16;
        for (int32_t q = 1; q < w; q++) {
            if (sat[(size_t)q * (size_t)rows + (size_t)t] != word) {
                r = dc_fail(NULL, DCPTOPK_INTERNAL,
                            "row %lld: rank %d saturation word 0x%08x differs "
                            "from rank 0's 0x%08x",
                            (long long)t, q,
                            sat[(size_t)q * (size_t)rows + (size_t)t], word);
                goto done;
            }
        }
        if (mask == 0)
            continue;
        rescued++;
        const int32_t *lists[DCPTOPK_MAX_WORLD_SIZE];
        int s = 0;
        for (int32_t q = 0; q < w; q++) {
            if (!(mask & (1u << q)))
                continue;
            int32_t *list = push + (size_t)s * (size_t)kwords;
            if ((r = dcptopk_ref_push_list(&c, logits[q] + t * logits_stride,
                                           max_local_len, row_ends[q][t],
                                           list)))
                goto done;
            lists[s++] = list;
        }
        for (int32_t q = 0; q < w; q++)
            if ((r = dcptopk_ref_rescue_row(&c, &sa[q], t, word, lists)))
                goto done;
    }
    if (c.exact && sat_out) {
        for (int32_t q = 0; q < w; q++)
            if (sat_out[q])
                memcpy(sat_out[q], sat + (size_t)q * (size_t)rows,
                       sizeof *sat * (size_t)rows);
    }
    if (rescued_rows)
        *rescued_rows = rescued;
    dc_clear(NULL);
done:
    free(push);
    free(sat);
    free(gathered);
    return r;
}

/* --------------------------------------------------------- the pair merge */

dcptopk_result dcptopk_ref_pair_select(const dcptopk_merge_config *config,
                                       const dcptopk_pair_select_args *args)
{
    dcptopk_merge_config c;
    dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = DC_STRUCT_IN(NULL, "args", args, &a, PAIR_SELECT_ARGS)) ||
        (r = dc_check_pair_select_args(NULL, &c, &a)))
        return r;
    args = &a;
    int32_t w = c.world_size, k = c.topk, s = c.interleave;
    int64_t wk = (int64_t)w * k;
    dc_cand *cands;
    uint32_t *hist;
    if ((r = alloc_scratch(wk, &cands, &hist)))
        return r;
    int64_t rank_stride = args->rank_stride_rows ? args->rank_stride_rows
                                                 : args->rows;
    for (int64_t t = 0; t < args->rows; t++) {
        int64_t count = 0;
        for (int64_t p = 0; p < wk; p++) {
            const int32_t *pair;
            if ((args->layout & 1) == 0) /* rank-major */
                pair = args->candidates +
                       (((p / k) * rank_stride + t) * k + p % k) * 2;
            else
                pair = args->candidates + (t * wk + p) * 2;
            uint32_t ord = dcptopk_ref_ord32((uint32_t)pair[0]);
            int32_t gid = dcptopk_pair_gid(args->layout, pair[1]);
            if (gid < 0 || ord == 0)
                continue; /* invalid slot or NaN score: never selected */
            dc_cand *x = &cands[count++];
            x->key = ((uint64_t)ord << 32) | (0xFFFFFFFFu - (uint32_t)gid);
            x->pos = p;
            x->gid = gid;
            x->owner = owner_of(gid, w, s);
            x->local = local_of(gid, w, s);
        }
        /* Pair keys are ord32 << 32 | ~gid: the prefix is ord32's top half. */
        dc_row_out o = row_out(&c, args->rank, args->ids_out,
                               args->ids_out_stride, &args->rows_map, t, 48,
                               hist);
        uint64_t lowest;
        select_and_emit(cands, count, &o, &lowest);
    }
    write_indptr(args->indptr_out, args->rows_map.counts_out, args->rows);
    free(hist);
    free(cands);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_ref_pair_pack(const dcptopk_merge_config *config,
                                     const dcptopk_pair_pack_args *args)
{
    dcptopk_merge_config c;
    dcptopk_pair_pack_args a = DCPTOPK_PAIR_PACK_ARGS_INIT;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = DC_STRUCT_IN(NULL, "args", args, &a, PAIR_PACK_ARGS)) ||
        (r = dc_check_pair_pack_args(NULL, &c, &a)))
        return r;
    args = &a;
    int32_t k = c.topk;
    int64_t ids_stride = args->local_ids_stride ? args->local_ids_stride : k;
    for (int64_t t = 0; t < args->rows; t++) {
        const int32_t *ids = args->local_ids + t * ids_stride;
        const float *row = args->logits + t * args->logits_stride;
        int32_t *out = args->out + t * (int64_t)k * 2;
        int64_t start = args->row_starts ? args->row_starts[t] : 0;
        for (int32_t j = 0; j < k; j++) {
            int64_t l = ids[j], col = l + start;
            int64_t gid = l >= 0 ? gid64(l, args->rank, c.world_size,
                                         c.interleave)
                                 : -1;
            uint32_t bits = 0;
            int valid = l >= 0 && (!args->row_ends || l < args->row_ends[t]) &&
                        col >= 0 && col < args->logits_stride && gid <= INT32_MAX;
            if (valid) {
                memcpy(&bits, &row[col], sizeof bits);
                valid = dcptopk_ref_ord32(bits) != 0;
            }
            out[2 * j] = valid ? (int32_t)bits : DC_EMPTY_SCORE_BITS;
            out[2 * j + 1] = valid ? (int32_t)gid : -1;
        }
    }
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

/* --------------------------------------------------- the contract checker */

static int cmp_i32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* One row against the contract; the first violation found, with its reason.
 * `ids` holds n ints, `sent` 2^17 bytes. */
static dcptopk_result check_row(const int32_t *row, int32_t n,
                                const uint16_t *lrow, int64_t e, int64_t t,
                                int32_t *ids, uint8_t *sent)
{
    int64_t v = 0;
    for (int64_t l = 0; l < e; l++)
        v += dcptopk_ref_ord16(lrow[l]) != 0;
    int64_t want = v < n ? v : n;
    int32_t count = 0;
    uint32_t lowest = 0xFFFFFFFFu;
    for (int32_t j = 0; j < n; j++) {
        if ((uint32_t)row[j] == 0)
            continue;
        dcptopk_ref_candidate d = dcptopk_ref_decode(row, n, j, 0, 1, 1);
        if (d.local_id >= e)
            return dc_fail(NULL, DCPTOPK_CONTRACT_VIOLATION,
                           "row %lld: slot %d holds local id %d past row_end "
                           "(bound %lld)",
                           (long long)t, j, d.local_id, (long long)e);
        uint32_t expect = dcptopk_ref_ord16(lrow[d.local_id]);
        if (d.ord16 != expect)
            return dc_fail(NULL, DCPTOPK_CONTRACT_VIOLATION,
                           "row %lld: slot %d (local id %d) score mismatch: "
                           "word ord16 0x%04x, logit 0x%04x has ord16 "
                           "0x%04x%s",
                           (long long)t, j, d.local_id, d.ord16,
                           lrow[d.local_id], expect,
                           expect ? "" : " (NaN sent)");
        ids[count++] = d.local_id;
        if (d.ord16 < lowest)
            lowest = d.ord16;
    }
    if (count != want)
        return dc_fail(NULL, DCPTOPK_CONTRACT_VIOLATION,
                       "row %lld: count %d words sent, expected min(N = %d, "
                       "v = %lld) = %lld",
                       (long long)t, count, n, (long long)v, (long long)want);
    qsort(ids, (size_t)count, sizeof *ids, cmp_i32);
    for (int32_t i = 1; i < count; i++)
        if (ids[i] == ids[i - 1])
            return dc_fail(NULL, DCPTOPK_CONTRACT_VIOLATION,
                           "row %lld: duplicate id: local id %d sent twice",
                           (long long)t, ids[i]);
    if (count == 0)
        return DCPTOPK_SUCCESS;
    memset(sent, 0, (size_t)e);
    for (int32_t i = 0; i < count; i++)
        sent[ids[i]] = 1;
    for (int64_t l = 0; l < e; l++) {
        uint32_t k16 = dcptopk_ref_ord16(lrow[l]);
        if (!sent[l] && k16 > lowest)
            return dc_fail(NULL, DCPTOPK_CONTRACT_VIOLATION,
                           "row %lld: unsent local id %lld (ord16 0x%04x) "
                           "scores above the lowest sent (ord16 0x%04x)",
                           (long long)t, (long long)l, k16, lowest);
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_ref_check_contract(
    const dcptopk_merge_config *config, const int32_t *packed,
    const uint16_t *logits, int64_t logits_stride, int64_t max_local_len,
    const int32_t *row_ends, int64_t rows, int64_t *bad_row)
{
    dcptopk_merge_config c;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = dc_check_packed_config(NULL, &c)))
        return r;
    if (bad_row)
        *bad_row = -1;
    if (rows < 0)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be >= 0", (long long)rows);
    if (max_local_len < 0 || max_local_len > DC_MAX_LOCAL_LEN)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "max_local_len = %lld: must be in 0..%d (2^17 local "
                       "ids)",
                       (long long)max_local_len, DC_MAX_LOCAL_LEN);
    if (logits_stride < max_local_len)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "logits_stride = %lld: must be >= max_local_len = %lld",
                       (long long)logits_stride, (long long)max_local_len);
    if (rows > 0 && !packed)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "packed is NULL");
    if (rows > 0 && !logits)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "logits is NULL");
    if (rows > 0 && !row_ends)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "row_ends is NULL");
    if (rows > 0 && misaligned(packed, 4))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "packed = %p: must be 4-byte aligned",
                       (const void *)packed);
    if (rows > 0 && misaligned(logits, 2))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "logits = %p: must be 2-byte aligned",
                       (const void *)logits);
    if (rows > 0 && misaligned(row_ends, 4))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "row_ends = %p: must be 4-byte aligned",
                       (const void *)row_ends);
    int32_t n = c.local_topk, words = dcptopk_packed_row_words(n);
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    uint8_t *sent = malloc((size_t)DC_MAX_LOCAL_LEN);
    if (!ids || !sent) {
        free(ids);
        free(sent);
        return dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY, "checker buffers");
    }
    r = DCPTOPK_SUCCESS;
    for (int64_t t = 0; t < rows && !r; t++) {
        r = check_row(packed + t * words, n, logits + t * logits_stride,
                      row_bound(row_ends[t], max_local_len), t, ids, sent);
        if (r && bad_row)
            *bad_row = t;
    }
    free(ids);
    free(sent);
    if (r == DCPTOPK_SUCCESS)
        dc_clear(NULL);
    return r;
}
