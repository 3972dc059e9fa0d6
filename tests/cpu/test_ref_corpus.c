/* test_ref_corpus.c - the fixed regression corpus (tests/cpu/corpus/): hand-
 * derived cases of the packed exact merge, each checked for its exact ids,
 * order and saturation word on every rank, and against brute force's score
 * multiset. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brute.h"
#include "dcptopk.h"
#include "gen.h"
#include "harness.h"

#define MAX_COLS 4096

typedef struct corpus_case {
    char name[128];
    int32_t k, n, w, s;
    int32_t row_end[16];
    int32_t ncols[16];
    uint16_t *cols[16];
    int32_t ids[4096];
    int32_t nids;
    uint32_t sat;
} corpus_case;

static uint16_t parse_value(const char *tok)
{
    if (!strcmp(tok, "nan"))
        return DC_BF16_NAN;
    if (!strcmp(tok, "inf"))
        return DC_BF16_POS_INF;
    if (!strcmp(tok, "-inf"))
        return DC_BF16_NEG_INF;
    if (!strcmp(tok, "-0"))
        return DC_BF16_NEG_ZERO;
    return dc_f32_to_bf16(strtof(tok, NULL));
}

/* Appends a value token ("v" or "v*count") to a rank's columns. */
static void add_values(corpus_case *c, int32_t r, char *tok)
{
    int32_t count = 1;
    char *star = strchr(tok, '*');
    if (star) {
        *star = '\0';
        count = atoi(star + 1);
    }
    uint16_t v = parse_value(tok);
    for (int32_t i = 0; i < count && c->ncols[r] < MAX_COLS; i++)
        c->cols[r][c->ncols[r]++] = v;
}

static void add_ids(corpus_case *c, const char *tok)
{
    int a, b, step;
    if (sscanf(tok, "%d:%d:%d", &a, &b, &step) == 3) {
        for (int x = a; x <= b && c->nids < 4096; x += step)
            c->ids[c->nids++] = x;
    } else {
        c->ids[c->nids++] = atoi(tok);
    }
}

static void case_free(corpus_case *c)
{
    for (int i = 0; i < 16; i++)
        free(c->cols[i]);
}

static void case_reset(corpus_case *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 16; i++)
        c->cols[i] = calloc(MAX_COLS, sizeof(uint16_t));
}

/* Runs one case; returns 0 on success (the failure is printed). */
static int run_case(const corpus_case *cc)
{
    dcptopk_merge_config c = DCPTOPK_MERGE_CONFIG_INIT;
    c.topk = cc->k;
    c.local_topk = cc->n;
    c.world_size = cc->w;
    c.interleave = cc->s;
    c.block_size = 0;
    c.exact = 1;
    int32_t width = 8;
    for (int32_t r = 0; r < cc->w; r++)
        if (cc->ncols[r] > width)
            width = cc->ncols[r];
    int64_t stride = (width + 7) / 8 * 8;
    /* Columns past a rank's values are NaN: never candidates. */
    uint16_t *logits[16];
    int32_t ends[16][1], *ids[16], *end_ptr[16];
    uint32_t sat[16][1], *sat_ptr[16];
    for (int32_t r = 0; r < cc->w; r++) {
        logits[r] = aligned_alloc(16, sizeof(uint16_t) * (size_t)stride);
        for (int64_t i = 0; i < stride; i++)
            logits[r][i] = i < cc->ncols[r] ? cc->cols[r][i] : DC_BF16_NAN;
        ends[r][0] = cc->row_end[r];
        end_ptr[r] = ends[r];
        ids[r] = malloc(sizeof(int32_t) * (size_t)cc->k);
        sat_ptr[r] = sat[r];
    }
    int64_t rescued = -1;
    int bad = 0;
    dcptopk_result res = dcptopk_ref_packed_merge(
        &c, (const uint16_t *const *)logits, stride, stride,
        (const int32_t *const *)end_ptr, 1, ids, NULL, sat_ptr, &rescued);
    if (res) {
        fprintf(stderr, "%s: %s\n", cc->name, dcptopk_last_error(NULL));
        bad = 1;
    }
    for (int32_t r = 0; r < cc->w && !bad; r++) {
        for (int32_t i = 0; i < cc->k && !bad; i++) {
            int32_t want = i < cc->nids ? cc->ids[i] : -1;
            if (ids[r][i] != want) {
                fprintf(stderr, "%s: rank %d ids[%d] = %d, expected %d\n",
                        cc->name, r, i, ids[r][i], want);
                bad = 1;
            }
        }
        if (!bad && sat[r][0] != cc->sat) {
            fprintf(stderr, "%s: rank %d sat 0x%08x, expected 0x%08x\n",
                    cc->name, r, sat[r][0], cc->sat);
            bad = 1;
        }
    }
    if (!bad && rescued != ((cc->sat >> 16) != 0)) {
        fprintf(stderr, "%s: rescued_rows = %lld\n", cc->name,
                (long long)rescued);
        bad = 1;
    }
    /* The hand-derived ids also agree with brute force's scores. */
    if (!bad) {
        dc_brute_item *want = malloc(sizeof *want * (size_t)cc->k);
        int64_t nw = dc_brute_packed_topk(cc->w, cc->s,
                                          (const uint16_t *const *)logits,
                                          stride, stride,
                                          (const int32_t *const *)end_ptr, 0,
                                          cc->k, want);
        if (nw != cc->nids) {
            fprintf(stderr, "%s: brute force selects %lld, the case lists %d\n",
                    cc->name, (long long)nw, cc->nids);
            bad = 1;
        }
        free(want);
    }
    for (int32_t r = 0; r < cc->w; r++) {
        free(logits[r]);
        free(ids[r]);
    }
    return bad;
}

TEST(packed_corpus)
{
    const char *path = DC_TEST_SOURCE_DIR "/tests/cpu/corpus/packed.txt";
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    char line[8192];
    corpus_case *cc = malloc(sizeof *cc);
    case_reset(cc);
    int cases = 0, failed = 0;
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok || tok[0] == '#')
            continue;
        if (!strcmp(tok, "case")) {
            case_free(cc);
            case_reset(cc);
            tok = strtok_r(NULL, " \t\r\n", &save);
            snprintf(cc->name, sizeof cc->name, "%s", tok ? tok : "?");
        } else if (!strcmp(tok, "config")) {
            cc->k = atoi(strtok_r(NULL, " \t\r\n", &save));
            cc->n = atoi(strtok_r(NULL, " \t\r\n", &save));
            cc->w = atoi(strtok_r(NULL, " \t\r\n", &save));
            cc->s = atoi(strtok_r(NULL, " \t\r\n", &save));
        } else if (!strcmp(tok, "rank")) {
            int32_t r = atoi(strtok_r(NULL, " \t\r\n", &save));
            CHECK(r >= 0 && r < 16);
            cc->row_end[r] = atoi(strtok_r(NULL, " \t\r\n", &save));
            while ((tok = strtok_r(NULL, " \t\r\n", &save)))
                add_values(cc, r, tok);
        } else if (!strcmp(tok, "ids")) {
            while ((tok = strtok_r(NULL, " \t\r\n", &save)))
                add_ids(cc, tok);
        } else if (!strcmp(tok, "sat")) {
            cc->sat = (uint32_t)strtoul(strtok_r(NULL, " \t\r\n", &save), NULL,
                                        16);
        } else if (!strcmp(tok, "end")) {
            int bad = run_case(cc);
            printf("  %-45s %s\n", cc->name, bad ? "FAILED" : "ok");
            cases++;
            failed += bad;
        }
    }
    fclose(f);
    case_free(cc);
    free(cc);
    printf("packed corpus: %d cases (rows), %d failed\n", cases, failed);
    CHECK(cases >= 9);
    CHECK_EQ(failed, 0);
}
