/* ties.c - the one-answer families (see ties.h). */
#include "ties.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define X_TIE ((uint16_t)0x3F80) /* 1.0: the tie score              */
#define X_LOW ((uint16_t)0xBF80) /* -1.0: below it                  */
#define X_HIGH ((uint16_t)0x4040) /* 3.0 (+ a little): above it    */

/* Part A: tie set x offsets x tokens above; A2 the same with short tie
 * runs on the every-rank set; then the fixed rows. */
enum { TIE_SETS = 6, OFFSETS = 4, HIGHS = 5 };
#define PART_A (TIE_SETS * OFFSETS * HIGHS)
#define PART_A2 (OFFSETS * HIGHS)
enum { EQUAL_ROWS = 10, ZERO_ROWS = 4, TAIL_ROWS = 3, NAN_ROWS = 4,
       SHORT_ROWS = 7 };
#define ROWS_TOTAL                                                             \
    (PART_A + PART_A2 + EQUAL_ROWS + ZERO_ROWS + TAIL_ROWS + NAN_ROWS +        \
     SHORT_ROWS)

static const char *const set_names[TIE_SETS] = {
    "every rank", "rank 0", "the last rank", "even ranks", "upper half",
    "all but rank 0"};
static const char *const offset_names[OFFSETS] = {
    "at 0", "at 0 on the first, past N on the others", "staggered",
    "reverse staggered"};
static const char *const high_names[HIGHS] = {
    "none above", "K-N above on the last rank", "K-1 above on rank 0",
    "N above on (K-1)/N ranks", "N/2 above on every rank, first"};

static int in_set(int set, int32_t q, int32_t w)
{
    switch (set) {
    case 0: return 1;
    case 1: return q == 0;
    case 2: return q == w - 1;
    case 3: return q % 2 == 0;
    case 4: return q >= w / 2;
    default: return q != 0;
    }
}

/* One row of part A / A2 on rank q: e columns of background, the tie run,
 * then the tokens above x written over it. */
static void row_a(uint16_t *row, int64_t e, int32_t k, int32_t n, int32_t w,
                  int32_t q, int set, int off, int high, int short_run)
{
    for (int64_t l = 0; l < e; l++)
        row[l] = X_LOW;
    if (in_set(set, q, w)) {
        int32_t idx = 0, cnt = 0, first = -1;
        for (int32_t p = 0; p < w; p++)
            if (in_set(set, p, w)) {
                if (first < 0)
                    first = p;
                idx += p < q;
                cnt++;
            }
        int64_t o = 0;
        if (off == 1)
            o = q == first ? 0 : n + 1;
        else if (off == 2)
            o = (int64_t)idx * (n / 2);
        else if (off == 3)
            o = (int64_t)(cnt - 1 - idx) * (n / 2);
        int64_t end = short_run ? o + n / 2 : e;
        for (int64_t l = o; l < end && l < e; l++)
            row[l] = X_TIE;
    }
    int64_t h = 0, at = 0; /* h tokens above x from column at */
    if (high == 1 && q == w - 1)
        h = k - n, at = e - h;
    else if (high == 2 && q == 0)
        h = k - 1, at = e - h;
    else if (high == 3 && q < (k - 1) / n)
        h = n, at = e - h;
    else if (high == 4)
        h = n / 2, at = 0;
    for (int64_t l = at; l < at + h && l < e; l++)
        row[l] = (uint16_t)(X_HIGH + (l & 7));
}

/* The fixed rows: the row's values on rank q and its row_end. */
static int32_t row_fixed(uint16_t *row, int64_t e, int32_t k, int32_t n,
                         int32_t q, int64_t f)
{
    int32_t end = (int32_t)e;
    if (f < EQUAL_ROWS) {
        const int64_t lens[7] = {n - 1, n, n + 1, k - 1, k, k + n, e};
        const uint16_t v[3] = {DC_BF16_POS_INF, DC_BF16_NEG_INF,
                               DC_BF16_NEG_ZERO};
        for (int64_t l = 0; l < e; l++)
            row[l] = f < 7 ? X_TIE : v[f - 7];
        if (f < 7)
            end = (int32_t)lens[f];
        return end;
    }
    f -= EQUAL_ROWS;
    if (f < ZERO_ROWS) {
        for (int64_t l = 0; l < e; l++) {
            int pos;
            if (f == 0)
                pos = l >= n;
            else if (f == 1)
                pos = l < n / 2;
            else if (f == 2)
                pos = l % 2 == 0;
            else
                pos = q % 2 == 1;
            row[l] = pos ? DC_BF16_POS_ZERO : DC_BF16_NEG_ZERO;
        }
        return end;
    }
    f -= ZERO_ROWS;
    if (f < TAIL_ROWS) {
        const int64_t fin[6] = {0, 1, n / 2, n - 1, n, n + 1};
        const int64_t m = fin[(q + f) % 6];
        for (int64_t l = 0; l < e; l++)
            row[l] = l < m ? (uint16_t)(0x4000 + (l & 63)) : DC_BF16_NEG_INF;
        return end;
    }
    f -= TAIL_ROWS;
    if (f < NAN_ROWS) {
        for (int64_t l = 0; l < e; l++) {
            int nan = f == 0 || (f == 1 && q % 2 == 0) ||
                      (f == 2 && l % 3 == 1) ||
                      (f == 3 && (l < n || l >= n + n / 2));
            row[l] = nan ? DC_BF16_NAN : X_TIE;
        }
        return end;
    }
    f -= NAN_ROWS;
    const int64_t ends[SHORT_ROWS] = {0, -1, 1, n - 1, n, k - 1, e};
    for (int64_t l = 0; l < e; l++)
        row[l] = X_TIE;
    return (int32_t)ends[(q + f) % SHORT_ROWS];
}

int64_t dc_ties_world(dc_world *w, int32_t topk, int32_t local_topk,
                      int32_t world_size)
{
    memset(w, 0, sizeof *w);
    const int64_t e = (int64_t)topk + 2 * local_topk, rows = ROWS_TOTAL;
    w->world_size = world_size;
    w->rows = rows;
    w->max_local_len = e;
    w->stride = (e + 7) / 8 * 8;
    for (int32_t q = 0; q < world_size; q++) {
        w->logits[q] = calloc((size_t)(rows * w->stride), sizeof(uint16_t));
        w->row_ends[q] = calloc((size_t)rows, sizeof(int32_t));
        if (!w->logits[q] || !w->row_ends[q]) {
            dc_world_free(w);
            return -1;
        }
        for (int64_t t = 0; t < rows; t++) {
            uint16_t *row = w->logits[q] + t * w->stride;
            w->row_ends[q][t] = (int32_t)e;
            if (t < PART_A + PART_A2) {
                const int a2 = t >= PART_A;
                const int64_t a = a2 ? t - PART_A : t;
                const int set = a2 ? 0 : (int)(a / (OFFSETS * HIGHS));
                row_a(row, e, topk, local_topk, world_size, q, set,
                      (int)(a / HIGHS % OFFSETS), (int)(a % HIGHS), a2);
            } else {
                w->row_ends[q][t] = row_fixed(row, e, topk, local_topk, q,
                                              t - PART_A - PART_A2);
            }
        }
    }
    return rows;
}

const char *dc_ties_row_name(int64_t t)
{
    static char buf[160];
    if (t < 0 || t >= ROWS_TOTAL)
        return "(no such row)";
    if (t < PART_A + PART_A2) {
        const int a2 = t >= PART_A;
        const int64_t a = a2 ? t - PART_A : t;
        snprintf(buf, sizeof buf, "ties%s on %s, %s, %s",
                 a2 ? " (N/2 of them)" : " to the row end",
                 set_names[a2 ? 0 : a / (OFFSETS * HIGHS)],
                 offset_names[a / HIGHS % OFFSETS], high_names[a % HIGHS]);
        return buf;
    }
    int64_t f = t - PART_A - PART_A2;
    static const char *const fixed[] = {
        "all-equal, row_end N-1", "all-equal, row_end N",
        "all-equal, row_end N+1", "all-equal, row_end K-1",
        "all-equal, row_end K", "all-equal, row_end K+N",
        "all-equal, row_end K+2N", "all +inf", "all -inf", "all -0",
        "-0 then +0 from N", "+0 below N/2 then -0", "+0 even, -0 odd",
        "-0 on even ranks, +0 on odd", "-inf tail A", "-inf tail B",
        "-inf tail C", "all NaN", "NaN on even ranks",
        "NaN at l % 3 == 1", "NaN but N/2 ties past N", "short rows A",
        "short rows B", "short rows C", "short rows D", "short rows E",
        "short rows F", "short rows G"};
    return fixed[f];
}
