/* ref_hier.c - dcptopk_ref_hier_merge: the CPU model of the hierarchical
 * merge (docs/CONTRACT.md, "Hierarchical merge"), built from the oracle's
 * own pieces: the packed merge of each node's ranks, the node pairs, and the
 * pair select of the nodes' candidates with the global world size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packed.h"

/* Node d's top K (node gids of a world of l ranks) as pairs with global
 * gids and the bf16 score of the owner's logit, into seg [rows, k, 2]. */
static void node_pairs(const dcptopk_merge_config *c, int32_t d, int32_t l,
                       const uint16_t *const *logits, int64_t stride,
                       const int32_t *ids, int64_t rows, int32_t *seg)
{
    const int32_t k = c->topk, s = c->interleave;
    for (int64_t t = 0; t < rows; t++)
        for (int32_t i = 0; i < k; i++) {
            int32_t *pair = seg + (t * k + i) * 2;
            const int32_t id = ids[t * k + i];
            pair[0] = (int32_t)0xFF800000u;
            pair[1] = -1;
            if (id < 0)
                continue;
            const uint32_t u = (uint32_t)id;
            const int32_t lr = (int32_t)((u / (uint32_t)s) % (uint32_t)l);
            const int32_t col = (int32_t)((u / (uint32_t)(l * s)) *
                                              (uint32_t)s +
                                          u % (uint32_t)s);
            const int32_t owner = d * l + lr;
            const uint16_t b = logits[owner][t * stride + col];
            pair[0] = (int32_t)((uint32_t)b << 16);
            pair[1] = dcptopk_ref_global_id(col, owner, c->world_size, s);
        }
}

dcptopk_result dcptopk_ref_hier_merge(
    const dcptopk_merge_config *config, int32_t nodes,
    const uint16_t *const *logits, int64_t logits_stride,
    int64_t max_local_len, const int32_t *const *row_ends, int64_t rows,
    int32_t *const *ids_out, const dcptopk_rows_map *rows_maps,
    uint32_t *const *sat_out, int64_t *rescued_rows)
{
    if (nodes == 1)
        return dcptopk_ref_packed_merge(config, logits, logits_stride,
                                        max_local_len, row_ends, rows,
                                        ids_out, rows_maps, sat_out,
                                        rescued_rows);
    dcptopk_merge_config c, node, pair;
    dcptopk_result r = dc_config_read(NULL, config, &c);
    if (r || (r = dc_hier_configs(&c, nodes, &node, &pair)))
        return r;
    if (!logits || !row_ends)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "%s is NULL",
                       logits ? "row_ends" : "logits");
    if (rows < 0 || rows > INT32_MAX)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "rows = %lld: must be in 0..%d", (long long)rows,
                       INT32_MAX);
    const int32_t w = c.world_size, l = node.world_size, k = c.topk;
    const size_t seg = (size_t)(rows ? rows : 1) * (size_t)k * 2u;
    int32_t *ids = malloc(seg / 2u * sizeof *ids);
    /* Rank-major [W, rows, K, 2]: the nodes' segments first, the rest
     * empty, so the W-segment pair select is the select over the nodes
     * (positions d * K + i either way). */
    int32_t *pairs = malloc((size_t)w * seg * sizeof *pairs);
    if (!ids || !pairs) {
        free(ids);
        free(pairs);
        return dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY,
                       "hierarchical reference of %lld rows",
                       (long long)rows);
    }
    if (rescued_rows)
        *rescued_rows = 0;
    for (int32_t d = 0; d < nodes && !r; d++) {
        int32_t *node_ids[DCPTOPK_MAX_WORLD_SIZE] = {ids};
        int64_t rescued = 0;
        r = dcptopk_ref_packed_merge(&node, logits + d * l, logits_stride,
                                     max_local_len, row_ends + d * l, rows,
                                     node_ids, NULL,
                                     sat_out ? sat_out + d * l : NULL,
                                     &rescued);
        if (r) {
            char note[64];
            snprintf(note, sizeof note, " (node %d)", d);
            dc_fail_append(NULL, note);
            break;
        }
        if (rescued_rows)
            *rescued_rows += rescued;
        node_pairs(&c, d, l, logits, logits_stride, ids, rows,
                   pairs + (size_t)d * seg);
    }
    for (size_t i = (size_t)nodes * seg; i < (size_t)w * seg; i += 2) {
        pairs[i] = (int32_t)0xFF800000u;
        pairs[i + 1] = -1;
    }
    for (int32_t q = 0; q < w && !r; q++) {
        dcptopk_pair_select_args a = DCPTOPK_PAIR_SELECT_ARGS_INIT;
        a.candidates = pairs;
        a.layout = DCPTOPK_LAYOUT_RANK_MAJOR;
        a.rows = rows;
        a.rank = q;
        a.ids_out = ids_out ? ids_out[q] : NULL;
        if (rows_maps)
            a.rows_map = rows_maps[q];
        r = dcptopk_ref_pair_select(&pair, &a);
    }
    free(ids);
    free(pairs);
    if (!r)
        dc_clear(NULL);
    return r;
}
