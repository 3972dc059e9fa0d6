/* brute.c - brute-force merges (see brute.h). Deliberately naive: collect
 * everything, sort everything. */
#include "brute.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float f32_value(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int dc_brute_cmp_value(const dc_brute_item *a, const dc_brute_item *b)
{
    if (a->value > b->value)
        return -1;
    if (a->value < b->value)
        return 1;
    /* Equal floats: only +0.0 vs -0.0 still differ (+0.0 ranks higher). */
    int na = signbit(a->value) != 0, nb = signbit(b->value) != 0;
    if (a->value == 0.0f && na != nb)
        return na ? 1 : -1;
    return 0;
}

int dc_brute_cmp(const void *pa, const void *pb)
{
    const dc_brute_item *a = pa, *b = pb;
    int c = dc_brute_cmp_value(a, b);
    if (c)
        return c;
    if (a->gid != b->gid)
        return a->gid < b->gid ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

int64_t dc_brute_gid(int64_t l, int32_t owner, int32_t world_size,
                     int32_t interleave)
{
    return (l / interleave) * world_size * interleave +
           (int64_t)owner * interleave + l % interleave;
}

static int64_t bound(int32_t row_end, int64_t max_local_len)
{
    int64_t e = row_end > 0 ? row_end : 0;
    if (e > max_local_len)
        e = max_local_len;
    if (e > (1 << 17))
        e = 1 << 17;
    return e;
}

/* Non-NaN tokens of rank q's row t, sorted (score desc, gid asc). */
static dc_brute_item *rank_items(int32_t world_size, int32_t interleave,
                                 const uint16_t *row, int64_t e, int32_t q,
                                 int64_t *count)
{
    dc_brute_item *items = malloc(sizeof *items * (size_t)(e ? e : 1));
    int64_t n = 0;
    for (int64_t l = 0; l < e; l++) {
        float v = bf16_value(row[l]);
        if (isnan(v))
            continue;
        items[n].value = v;
        items[n].bits = row[l];
        items[n].gid = dc_brute_gid(l, q, world_size, interleave);
        items[n].pos = 0;
        n++;
    }
    qsort(items, (size_t)n, sizeof *items, dc_brute_cmp);
    *count = n;
    return items;
}

int64_t dc_brute_packed_topk(int32_t world_size, int32_t interleave,
                             const uint16_t *const *logits, int64_t stride,
                             int64_t max_local_len,
                             const int32_t *const *row_ends, int64_t t,
                             int32_t topk, dc_brute_item *out)
{
    int64_t total = 0;
    for (int32_t q = 0; q < world_size; q++)
        total += bound(row_ends[q][t], max_local_len);
    dc_brute_item *all = malloc(sizeof *all * (size_t)(total ? total : 1));
    int64_t n = 0;
    for (int32_t q = 0; q < world_size; q++) {
        const uint16_t *row = logits[q] + t * stride;
        int64_t e = bound(row_ends[q][t], max_local_len);
        for (int64_t l = 0; l < e; l++) {
            float v = bf16_value(row[l]);
            if (isnan(v))
                continue;
            all[n].value = v;
            all[n].bits = row[l];
            all[n].gid = dc_brute_gid(l, q, world_size, interleave);
            all[n].pos = 0;
            n++;
        }
    }
    qsort(all, (size_t)n, sizeof *all, dc_brute_cmp);
    int64_t k = n < topk ? n : topk;
    memcpy(out, all, sizeof *all * (size_t)k);
    free(all);
    return k;
}

/* One token of an unsharded row: its score and its index there. */
typedef struct one_tok {
    float value;
    int64_t index;
} one_tok;

static int cmp_one(const void *pa, const void *pb)
{
    const one_tok *a = pa, *b = pb;
    dc_brute_item x = {a->value, 0, 0, 0}, y = {b->value, 0, 0, 0};
    int c = dc_brute_cmp_value(&x, &y);
    if (c)
        return c;
    return (a->index > b->index) - (a->index < b->index);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* The unsharded row: value[g] and present[g] for g < *len, from rank q's
 * columns l < ends[q] (score(q, l) reads them). */
typedef float (*score_fn)(const void *const *src, int32_t q, int64_t off);

static int64_t one_gpu(int32_t world_size, int32_t interleave,
                       const void *const *src, score_fn score, int64_t stride,
                       const int64_t *ends, int64_t t, int32_t topk,
                       int64_t *gids_out)
{
    int64_t len = 0;
    for (int32_t q = 0; q < world_size; q++)
        if (ends[q] > 0) {
            int64_t g = dc_brute_gid(ends[q] - 1, q, world_size, interleave);
            len = g + 1 > len ? g + 1 : len;
        }
    float *value = malloc(sizeof *value * (size_t)(len ? len : 1));
    unsigned char *present = calloc((size_t)(len ? len : 1), 1);
    for (int32_t q = 0; q < world_size; q++)
        for (int64_t l = 0; l < ends[q]; l++) {
            int64_t g = dc_brute_gid(l, q, world_size, interleave);
            value[g] = score(src, q, t * stride + l);
            present[g] = 1;
        }
    /* One GPU's view: walk the row by index and keep the non-NaN tokens. */
    one_tok *tok = malloc(sizeof *tok * (size_t)(len ? len : 1));
    int64_t n = 0;
    for (int64_t g = 0; g < len; g++)
        if (present[g] && !isnan(value[g])) {
            tok[n].value = value[g];
            tok[n].index = g;
            n++;
        }
    qsort(tok, (size_t)n, sizeof *tok, cmp_one);
    int64_t k = n < topk ? n : topk;
    for (int64_t i = 0; i < k; i++)
        gids_out[i] = tok[i].index;
    qsort(gids_out, (size_t)k, sizeof *gids_out, cmp_i64);
    free(tok);
    free(present);
    free(value);
    return k;
}

static float score_bf16(const void *const *src, int32_t q, int64_t off)
{
    return bf16_value(((const uint16_t *const *)src)[q][off]);
}

static float score_f32(const void *const *src, int32_t q, int64_t off)
{
    return ((const float *const *)src)[q][off];
}

int64_t dc_brute_one_gpu_bf16(int32_t world_size, int32_t interleave,
                              const uint16_t *const *logits, int64_t stride,
                              int64_t max_local_len,
                              const int32_t *const *row_ends, int64_t t,
                              int32_t topk, int64_t *gids_out)
{
    int64_t ends[16];
    for (int32_t q = 0; q < world_size; q++)
        ends[q] = bound(row_ends[q][t], max_local_len);
    return one_gpu(world_size, interleave, (const void *const *)logits,
                   score_bf16, stride, ends, t, topk, gids_out);
}

int64_t dc_brute_one_gpu_f32(int32_t world_size, int32_t interleave,
                             const float *const *scores, int64_t stride,
                             const int32_t *const *row_ends, int64_t t,
                             int32_t topk, int64_t *gids_out)
{
    int64_t ends[16];
    for (int32_t q = 0; q < world_size; q++) {
        int64_t e = row_ends[q][t] > 0 ? row_ends[q][t] : 0;
        ends[q] = e < stride ? e : stride;
    }
    return one_gpu(world_size, interleave, (const void *const *)scores,
                   score_f32, stride, ends, t, topk, gids_out);
}

uint32_t dc_brute_saturation(int32_t world_size, int32_t interleave,
                             int32_t local_topk, int32_t topk,
                             const uint16_t *const *logits, int64_t stride,
                             int64_t max_local_len,
                             const int32_t *const *row_ends, int64_t t,
                             uint16_t *tau_bits, int *has_tau)
{
    dc_brute_item *sent_all =
        malloc(sizeof *sent_all * (size_t)world_size * (size_t)local_topk);
    int64_t sent_n[16], total = 0;
    dc_brute_item lowest[16];
    for (int32_t q = 0; q < world_size; q++) {
        int64_t count;
        dc_brute_item *items =
            rank_items(world_size, interleave, logits[q] + t * stride,
                       bound(row_ends[q][t], max_local_len), q, &count);
        sent_n[q] = count < local_topk ? count : local_topk;
        if (sent_n[q])
            lowest[q] = items[sent_n[q] - 1];
        memcpy(sent_all + total, items, sizeof *items * (size_t)sent_n[q]);
        total += sent_n[q];
        free(items);
    }
    qsort(sent_all, (size_t)total, sizeof *sent_all, dc_brute_cmp);
    *has_tau = total >= topk;
    *tau_bits = *has_tau ? (uint16_t)sent_all[topk - 1].bits : 0;
    /* The best token a rank could still hold unsent: its lowest sent
     * score, at the local id just past the last one it sent at that score
     * (a rank sends the lowest local ids of a tied score). */
    uint32_t mask = 0;
    for (int32_t q = 0; q < world_size; q++) {
        if (sent_n[q] != local_topk)
            continue;
        dc_brute_item best = lowest[q];
        const int64_t g = best.gid, s = interleave;
        const int64_t l = (g / ((int64_t)world_size * s)) * s + g % s;
        best.gid = dc_brute_gid(l + 1, q, world_size, interleave);
        best.pos = 0;
        dc_brute_item tau = sent_all[*has_tau ? topk - 1 : 0];
        tau.pos = 0;
        if (!*has_tau || dc_brute_cmp(&best, &tau) < 0)
            mask |= 1u << q;
    }
    free(sent_all);
    return mask;
}

static int cmp_pos(const void *pa, const void *pb)
{
    const dc_brute_item *a = pa, *b = pb;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

int64_t dc_brute_pair_select(const int32_t *candidates, int32_t world_size,
                             int32_t topk, int64_t rank_stride_rows, int64_t t,
                             int32_t *ids_out)
{
    int64_t wk = (int64_t)world_size * topk, n = 0;
    dc_brute_item *items = malloc(sizeof *items * (size_t)wk);
    for (int32_t q = 0; q < world_size; q++) {
        const int32_t *row =
            candidates + ((int64_t)q * rank_stride_rows + t) * topk * 2;
        for (int32_t j = 0; j < topk; j++) {
            float v = f32_value((uint32_t)row[2 * j]);
            int32_t gid = row[2 * j + 1];
            if (gid < 0 || isnan(v))
                continue;
            items[n].value = v;
            items[n].bits = (uint32_t)row[2 * j];
            items[n].gid = gid;
            items[n].pos = (int64_t)q * topk + j;
            n++;
        }
    }
    qsort(items, (size_t)n, sizeof *items, dc_brute_cmp);
    int64_t k = n < topk ? n : topk;
    qsort(items, (size_t)k, sizeof *items, cmp_pos);
    for (int64_t i = 0; i < topk; i++)
        ids_out[i] = i < k ? (int32_t)items[i].gid : -1;
    free(items);
    return k;
}
