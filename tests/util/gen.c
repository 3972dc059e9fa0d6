/* gen.c - seeded input generators (see gen.h). */
#include "gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------- RNG */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void dc_rng_seed(dc_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dc_rng_next(dc_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t dc_rng_below(dc_rng *r, uint64_t n)
{
    if (n <= 1)
        return 0;
    /* Rejection sampling on the largest multiple of n below 2^64. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = dc_rng_next(r);
    while (x >= limit);
    return x % n;
}

int64_t dc_rng_range(dc_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)dc_rng_below(r, (uint64_t)(hi - lo) + 1);
}

double dc_rng_uniform(dc_rng *r)
{
    return (double)(dc_rng_next(r) >> 11) * 0x1.0p-53;
}

double dc_rng_normal(dc_rng *r)
{
    double u1 = dc_rng_uniform(r), u2 = dc_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void dc_rng_shuffle_i32(dc_rng *r, int32_t *a, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dc_rng_below(r, (uint64_t)i + 1);
        int32_t x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

/* ------------------------------------------------------------------ bf16 */

uint32_t dc_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float dc_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t dc_f32_to_bf16(float f)
{
    uint32_t u = dc_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
    /* Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit. */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float dc_bf16_to_f32(uint16_t b) { return dc_f32_from_bits((uint32_t)b << 16); }

/* ------------------------------------------------ packed-merge families */

const char *dc_family_name(int family)
{
    static const char *names[] = {
#define DC_X_FAM_NAME(name, str) str,
        DC_FAMILY_LIST(DC_X_FAM_NAME)
#undef DC_X_FAM_NAME
    };
    return family >= 0 && family < DC_FAM_COUNT ? names[family] : "?";
}

static uint16_t nan_variant(dc_rng *r)
{
    static const uint16_t nans[] = {0x7FC0, 0xFFC0, 0x7F81, 0xFFFF, 0x7FFF};
    return nans[dc_rng_below(r, sizeof nans / sizeof nans[0])];
}

void dc_packed_put(int32_t *row, int32_t n, int32_t j, uint32_t key16, uint32_t l)
{
    row[j] = (int32_t)((key16 << 16) | (0xFFFFu - (l & 0xFFFFu)));
    if ((l >> 16) & 1u)
        row[n + j / 32] |= (int32_t)(1u << (j % 32));
}

void dc_gen_bf16_row(dc_rng *r, int family, uint16_t *row, int64_t n)
{
    switch (family) {
    case DC_FAM_NORMAL_100:
        for (int64_t i = 0; i < n; i++)
            row[i] = dc_f32_to_bf16((float)(dc_rng_normal(r) + 100.0));
        break;
    case DC_FAM_INTEGER:
        for (int64_t i = 0; i < n; i++)
            row[i] = dc_f32_to_bf16((float)dc_rng_below(r, 4));
        break;
    case DC_FAM_ALL_EQUAL: {
        uint16_t v = dc_f32_to_bf16((float)dc_rng_normal(r));
        for (int64_t i = 0; i < n; i++)
            row[i] = v;
        break;
    }
    case DC_FAM_ALL_ZERO:
        memset(row, 0, sizeof *row * (size_t)n);
        break;
    case DC_FAM_INF:
        for (int64_t i = 0; i < n; i++) {
            uint64_t x = dc_rng_below(r, 10);
            row[i] = x < 2   ? DC_BF16_POS_INF
                     : x < 4 ? DC_BF16_NEG_INF
                             : dc_f32_to_bf16((float)dc_rng_normal(r));
        }
        break;
    case DC_FAM_SIGNED_ZERO:
        for (int64_t i = 0; i < n; i++)
            row[i] = dc_rng_below(r, 2) ? DC_BF16_NEG_ZERO : DC_BF16_POS_ZERO;
        break;
    case DC_FAM_NAN_ROWS: {
        uint64_t mode = dc_rng_below(r, 3); /* all NaN, 30% NaN, 90% NaN */
        for (int64_t i = 0; i < n; i++) {
            int nan = mode == 0 || dc_rng_below(r, 10) < (mode == 1 ? 3u : 9u);
            row[i] = nan ? nan_variant(r)
                         : dc_f32_to_bf16((float)dc_rng_normal(r));
        }
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            row[i] = dc_f32_to_bf16((float)dc_rng_normal(r));
        break;
    }
}

void dc_world_free(dc_world *w)
{
    for (int i = 0; i < 16; i++) {
        free(w->logits[i]);
        free(w->row_ends[i]);
        w->logits[i] = NULL;
        w->row_ends[i] = NULL;
    }
}

/* Adds `boost` to the first `count` of a random choice of a row's columns
 * [0, n) (count >= n: all of them). */
static void boost_columns(dc_rng *r, uint16_t *row, int64_t n, int64_t count,
                          float boost)
{
    if (count >= n) {
        for (int64_t i = 0; i < n; i++)
            row[i] = dc_f32_to_bf16(dc_bf16_to_f32(row[i]) + boost);
        return;
    }
    for (int64_t c = 0; c < count; c++) {
        int64_t i = (int64_t)dc_rng_below(r, (uint64_t)n);
        row[i] = dc_f32_to_bf16(dc_bf16_to_f32(row[i]) + boost);
    }
}

int dc_gen_world(dc_world *w, int family, int32_t topk, int32_t local_topk,
                 int32_t world_size, int64_t rows, int64_t local_len,
                 uint64_t seed)
{
    dc_rng rng;
    dc_rng_seed(&rng, seed ^ ((uint64_t)family << 56) ^
                          ((uint64_t)world_size << 48));
    memset(w, 0, sizeof *w);
    int conc = family == DC_FAM_CONC_ONE || family == DC_FAM_CONC_SAT ||
               family == DC_FAM_CONC_ALL;
    /* Saturation needs ranks with more than N (better: K) tokens. */
    if (conc && local_len < topk + 64)
        local_len = topk + 64;
    if (local_len < 1)
        local_len = 1;
    int64_t len = local_len;
    if (family == DC_FAM_LONG)
        len = 1 << 17;
    w->world_size = world_size;
    w->rows = rows;
    w->stride = (len + 7) / 8 * 8 + (family == DC_FAM_LONG ? 0 : 8);
    w->max_local_len = family == DC_FAM_LONG ? len : len;
    int64_t n = w->stride;
    for (int32_t q = 0; q < world_size; q++) {
        w->logits[q] = malloc(sizeof(uint16_t) * (size_t)(rows ? rows : 1) *
                              (size_t)n);
        w->row_ends[q] = malloc(sizeof(int32_t) * (size_t)(rows ? rows : 1));
        if (!w->logits[q] || !w->row_ends[q]) {
            dc_world_free(w);
            return -1;
        }
    }
    int32_t m_sat = (topk - 1) / local_topk;
    if (m_sat > world_size)
        m_sat = world_size;
    uint32_t empty_ranks = 0;
    if (family == DC_FAM_EMPTY_OWNER) {
        /* A random non-empty proper subset when W > 1 (W = 1: per row). */
        while (world_size > 1 &&
               (empty_ranks == 0 ||
                empty_ranks == (1u << world_size) - 1))
            empty_ranks = (uint32_t)dc_rng_below(&rng, 1u << world_size);
    }
    for (int64_t t = 0; t < rows; t++) {
        /* The boosted ranks of the concentrated families, for this row. */
        uint32_t boosted = 0;
        if (family == DC_FAM_CONC_ONE) {
            boosted = 1u << dc_rng_below(&rng, (uint64_t)world_size);
        } else if (family == DC_FAM_CONC_SAT) {
            int32_t perm[16];
            for (int32_t q = 0; q < world_size; q++)
                perm[q] = q;
            dc_rng_shuffle_i32(&rng, perm, world_size);
            for (int32_t i = 0; i < m_sat; i++)
                boosted |= 1u << perm[i];
        } else if (family == DC_FAM_CONC_ALL) {
            boosted = (1u << world_size) - 1;
        }
        for (int32_t q = 0; q < world_size; q++) {
            uint16_t *row = w->logits[q] + t * n;
            int32_t *end = &w->row_ends[q][t];
            dc_gen_bf16_row(&rng, family, row, n);
            /* Default row end: mostly full, sometimes cut, sometimes past
             * max_local_len (the bound cuts it). */
            uint64_t pick = dc_rng_below(&rng, 8);
            *end = (int32_t)(pick < 5   ? len
                             : pick < 7 ? dc_rng_range(&rng, len / 2, len)
                                        : len + (int64_t)dc_rng_below(&rng, 64));
            switch (family) {
            case DC_FAM_SHORT_ROWS: {
                int64_t choices[] = {0,
                                     1,
                                     dc_rng_range(&rng, 2, local_topk - 1),
                                     dc_rng_range(&rng, local_topk, topk - 1),
                                     local_topk,
                                     local_topk + 1,
                                     topk - 1,
                                     -5,
                                     len};
                *end = (int32_t)choices[dc_rng_below(&rng, 9)];
                if (*end > len)
                    *end = (int32_t)len;
                break;
            }
            case DC_FAM_EMPTY_OWNER:
                if (world_size == 1 ? (t % 2 == 0) : ((empty_ranks >> q) & 1))
                    *end = 0;
                break;
            case DC_FAM_CONC_ONE:
            case DC_FAM_CONC_SAT:
                if ((boosted >> q) & 1) {
                    *end = (int32_t)len;
                    boost_columns(&rng, row, len, len, 50.0f);
                }
                break;
            case DC_FAM_CONC_ALL: {
                /* Every rank holds a share of the top K: about K/W tokens,
                 * more than N when W is small. */
                int64_t share = topk / world_size;
                share = dc_rng_range(&rng, share / 2 + 1, share * 2);
                boost_columns(&rng, row, len, share, 50.0f);
                break;
            }
            case DC_FAM_LONG:
                /* Top tokens at high local ids (bit 16 set): the bit plane
                 * carries them; one rank per row boosted for a rescue. */
                boost_columns(&rng, row + (1 << 16), len - (1 << 16),
                              topk + 32, 20.0f);
                if (q == (int32_t)(t % world_size))
                    boost_columns(&rng, row, len, topk * 2, 40.0f);
                *end = (int32_t)(len - (int64_t)dc_rng_below(&rng, 3) * 37);
                break;
            default:
                break;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------ pair candidates */

const char *dc_pair_family_name(int family)
{
    static const char *names[] = {
#define DC_X_PFAM_NAME(name, str) str,
        DC_PAIR_FAMILY_LIST(DC_X_PFAM_NAME)
#undef DC_X_PFAM_NAME
    };
    return family >= 0 && family < DC_PFAM_COUNT ? names[family] : "?";
}

/* A score of `family` for slot j of the K at rank q of w.
 *
 * Crowded-bin rows: slots [0, a) of each rank score far above the crowd,
 * [a, a + c) in it (2.0 plus up to 511 ulps: one 22-bit key bin, some equal),
 * the rest far below; a puts the row's K-th largest about half way into the
 * w c crowded scores. */
static uint32_t pair_score(dc_rng *r, int family, int32_t j, int32_t topk, int32_t q,
                           int32_t w)
{
    switch (family) {
    case DC_PFAM_CROWDED_BIN: {
        const int32_t c = 24 / w > 1 ? 24 / w : 1;
        const int32_t a = topk / w - c / 2 > 0 ? topk / w - c / 2 : 0;
        if (j < a)
            return dc_f32_bits((float)(dc_rng_normal(r) + 20.0));
        if (j < a + c)
            return 0x40000000u + (uint32_t)dc_rng_below(r, 512);
        return dc_f32_bits((float)(dc_rng_normal(r) - 20.0));
    }
    case DC_PFAM_RANK_RISING:
        return dc_f32_bits((float)(dc_rng_normal(r) + 2.0 * q));
    case DC_PFAM_RANK_FALLING:
        return dc_f32_bits((float)(dc_rng_normal(r) + 0.25 * (w - 1 - q)));
    case DC_PFAM_SPECIAL: {
        static const uint32_t special[] = {0x7F800000u, 0xFF800000u,
                                           0x7FC00000u, 0xFFC00001u,
                                           0x00000000u, 0x80000000u};
        if (dc_rng_below(r, 3) == 0)
            return special[dc_rng_below(r, 6)];
        return dc_f32_bits((float)dc_rng_normal(r));
    }
    case DC_PFAM_TIES:
        return dc_f32_bits((float)dc_rng_below(r, 4));
    case DC_PFAM_NEAR_TIES:
        if (dc_rng_below(r, 4) != 0)
            return 0x3F800000u + (uint32_t)dc_rng_below(r, 1u << 16);
        return dc_f32_bits((float)dc_rng_normal(r));
    default:
        return dc_f32_bits((float)dc_rng_normal(r));
    }
}

int32_t *dc_gen_pair_candidates(int family, int32_t topk, int32_t world_size,
                                int32_t interleave, int64_t rows,
                                uint64_t seed)
{
    dc_rng rng;
    dc_rng_seed(&rng, seed ^ ((uint64_t)family << 56) ^
                          ((uint64_t)world_size << 48));
    size_t per_rank = (size_t)(rows ? rows : 1) * (size_t)topk * 2;
    int32_t *buf = malloc(sizeof *buf * per_rank * (size_t)world_size);
    int32_t *slots = malloc(sizeof *slots * (size_t)topk);
    if (!buf || !slots) {
        free(buf);
        free(slots);
        return NULL;
    }
    for (int32_t q = 0; q < world_size; q++) {
        for (int64_t t = 0; t < rows; t++) {
            int32_t *row = buf + q * per_rank + (size_t)t * (size_t)topk * 2;
            /* Distinct local ids in a random slot order. */
            for (int32_t j = 0; j < topk; j++)
                slots[j] = j * 3 + (int32_t)dc_rng_below(&rng, 3);
            dc_rng_shuffle_i32(&rng, slots, topk);
            int all_invalid = family == DC_PFAM_ALL_INVALID && t % 2 == 0;
            for (int32_t j = 0; j < topk; j++) {
                int64_t l = slots[j] + (family == DC_PFAM_WIDE_IDS && t % 2 ? 62000 : 0);
                int64_t gid = (l / interleave) * world_size * interleave +
                              (int64_t)q * interleave + l % interleave;
                uint32_t score = pair_score(&rng, family, j, topk, q, world_size);
                int invalid = all_invalid ||
                              (family == DC_PFAM_INVALID30 &&
                               dc_rng_below(&rng, 10) < 3);
                row[2 * j] = (int32_t)score;
                row[2 * j + 1] = invalid ? -1 - (int32_t)dc_rng_below(&rng, 3)
                                         : (int32_t)gid;
            }
            if (family == DC_PFAM_DUPLICATES) {
                /* Repeat some candidates verbatim, within this row (and
                 * across ranks, through rank 0's row). */
                for (int32_t d = 0; d < topk / 8; d++) {
                    int32_t a = (int32_t)dc_rng_below(&rng, (uint64_t)topk);
                    int32_t b = (int32_t)dc_rng_below(&rng, (uint64_t)topk);
                    row[2 * b] = row[2 * a];
                    row[2 * b + 1] = row[2 * a + 1];
                }
                if (q > 0) {
                    const int32_t *r0 = buf + (size_t)t * (size_t)topk * 2;
                    int32_t b = (int32_t)dc_rng_below(&rng, (uint64_t)topk);
                    row[2 * b] = r0[0];
                    row[2 * b + 1] = r0[1];
                }
            }
        }
    }
    free(slots);
    return buf;
}
