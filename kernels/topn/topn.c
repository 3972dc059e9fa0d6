/* topn.c - launchers of the fused local top-N + pack (kernels/topn/topn_pack.cu)
 * and of the push of round 2 (kernels/topn/push.cu), and their compile keys.
 *
 * Both kernels share the selection of kernels/topn/topn_select.cuh: a row is
 * split over C = 2^variant CTAs (a thread-block cluster when C > 1), each
 * keeping its columns in shared memory. C is chosen here from the number of
 * rows, the row length and the SM count: large enough that a CTA's columns
 * fit its shared memory (<= 65536 keys), and, when rows are few (decode),
 * large enough to cover the GPU. Nothing here syncs or allocates, so the
 * launches can be captured in a CUDA graph. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"
#include "topn.h"

/* Most columns one CTA keeps in shared memory (2 bytes each). */
#define DC_TOPN_CHUNK_MAX 65536
/* Smallest chunk worth a further split for parallelism (below it, a CTA's
 * fixed latencies outweigh its shorter row; see topn_plan_make). */
#define DC_TOPN_CHUNK_MIN 32768
#define DC_TOPN_MAX_VARIANT 3 /* cluster of 8: the portable maximum */
/* One CTA per row: one histogram; in a cluster of C, two, plus the two
 * histograms and the overflow count that each of the C - 1 peers pushes;
 * 128-byte aligned (see topn.h). */
uint32_t dc_topn_state_bytes(int32_t variant)
{
    if (variant <= 0)
        return 9344u;
    const uint32_t peers = (1u << variant) - 1u;
    return (17536u + peers * 16384u + 32u + peers * 4u + 127u) / 128u * 128u;
}

typedef struct topn_plan {
    int32_t variant;  /* log2 of the CTAs per row                          */
    int32_t chunk;    /* columns per CTA, multiple of 8                    */
} topn_plan;


static int64_t topn_cols(int64_t max_local_len)
{
    int64_t s = max_local_len < 0 ? 0 : max_local_len;
    return s > (1ll << DCPTOPK_LOCAL_INDEX_BITS)
               ? (1ll << DCPTOPK_LOCAL_INDEX_BITS)
               : s;
}

static topn_plan topn_plan_make(int64_t rows, int64_t max_local_len,
                                int32_t sm_count, int32_t forced)
{
    const int64_t s = topn_cols(max_local_len);
    int32_t v = 0;
    /* Capacity: a CTA's columns must fit its shared memory. */
    while (v < DC_TOPN_MAX_VARIANT && (s + (1 << v) - 1) / (1 << v) >
                                          DC_TOPN_CHUNK_MAX)
        v++;
    /* Parallelism: with few rows, split further while the grid stays within
     * one CTA per SM and the chunks stay long. Measured on the H200 (normal
     * rows, da65285): 64 rows of 131072 take 17.4 us with 2 CTAs per row,
     * 25.2 with 4; 8 rows take 15.3 / 14.3 / 16.9 us with 2 / 4 / 8. */
    if (sm_count <= 0)
        sm_count = 132;
    if (forced >= 0) {
        if (forced > v)
            v = forced > DC_TOPN_MAX_VARIANT ? DC_TOPN_MAX_VARIANT : forced;
    } else {
        while (v < DC_TOPN_MAX_VARIANT &&
               rows * ((int64_t)2 << v) <= (int64_t)sm_count &&
               (s + (2 << v) - 1) / (2 << v) >= DC_TOPN_CHUNK_MIN)
            v++;
    }
    topn_plan p;
    p.variant = v;
    int64_t chunk = (s + (1 << v) - 1) / (1 << v);
    p.chunk = (int32_t)((chunk + 7) / 8 * 8);
    return p;
}

int32_t dc_topn_variant(int64_t rows, int64_t max_local_len, int32_t sm_count)
{
    return topn_plan_make(rows, max_local_len, sm_count, -1).variant;
}

int32_t dc_topn_min_ctas_per_row(int64_t max_local_len)
{
    /* forced = 0: the capacity variant, never raised for parallelism. */
    return 1 << topn_plan_make(1, max_local_len, 1, 0).variant;
}

static void topn_key(dcptopk_key *k, int32_t kernel, const char *arch)
{
    memset(k, 0, sizeof *k);
    k->kernel = kernel;
    if (arch)
        snprintf(k->arch, sizeof k->arch, "%s", arch);
}

static int32_t topn_threads(const dcptopk_key *k)
{
    const dc_kernel_info *info = dc_kernel_get(k->kernel);
    return info ? info->threads(k) : 0;
}

dcptopk_result dc_topn_pack_launch(dcptopk_context *ctx,
                                   const dcptopk_merge_config *c,
                                   const dcptopk_pack_args *a)
{
    return dc_topn_pack_launch_variant(ctx, c, a, -1);
}

/* The plan of one launch of the pack or the push (both share the selection
 * and its shared-memory layout): sets key->variant and the launch shape;
 * refuses a grid past the limit, naming `rows_name`. */
static dcptopk_result topn_launch_cfg(dcptopk_context *ctx,
                                      const char *rows_name, int64_t rows,
                                      int64_t max_local_len, int32_t variant,
                                      void *stream, dcptopk_key *key,
                                      dc_launch_cfg *cfg, int *chunk)
{
    const topn_plan p =
        topn_plan_make(rows, max_local_len, dc_ctx_sm_count(ctx), variant);
    const int64_t ctas = rows << p.variant;
    if (ctas > 0x7FFFFFFFll)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "%s = %lld: %lld CTAs exceed the grid limit", rows_name,
                       (long long)rows, (long long)ctas);
    key->variant = p.variant;
    memset(cfg, 0, sizeof *cfg);
    cfg->grid[0] = (uint32_t)ctas;
    cfg->grid[1] = cfg->grid[2] = 1;
    cfg->block[0] = (uint32_t)topn_threads(key);
    cfg->block[1] = cfg->block[2] = 1;
    /* The state, the keys (2 bytes per column), the list of candidate 8-key
     * vectors (2 bytes per vector). */
    cfg->smem_bytes = dc_topn_state_bytes(p.variant) + (uint32_t)p.chunk * 2u + (uint32_t)p.chunk / 4u;
    cfg->cluster_x = 1u << p.variant;
    cfg->stream = stream;
    *chunk = p.chunk;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_topn_pack_launch_variant(dcptopk_context *ctx,
                                           const dcptopk_merge_config *c,
                                           const dcptopk_pack_args *a,
                                           int32_t variant)
{
    if (a->rows == 0)
        return DCPTOPK_SUCCESS;
    dcptopk_key key;
    topn_key(&key, DCPTOPK_KERNEL_TOPN_PACK, NULL);
    key.local_topk = c->local_topk;
    dc_launch_cfg cfg;
    int chunk;
    dcptopk_result r =
        topn_launch_cfg(ctx, "args->rows", a->rows, a->max_local_len, variant,
                        a->stream, &key, &cfg, &chunk);
    if (r)
        return r;

    const uint16_t *logits = a->logits;
    long long stride = a->logits_stride;
    long long max_local_len = a->max_local_len;
    const int32_t *row_ends = a->row_ends;
    long long rows = a->rows;
    int32_t *out = a->out;
    void *params[] = {&logits, &stride, &max_local_len, &row_ends,
                      &rows,   &chunk,  &out};
    return dc_launch(ctx, &key, "dcptopk_topn_pack", &cfg, params);
}

dcptopk_result dc_push_launch(dcptopk_context *ctx,
                              const dcptopk_merge_config *c,
                              const dc_push_args *a)
{
    return dc_push_launch_variant(ctx, c, a, -1);
}

dcptopk_result dc_push_launch_variant(dcptopk_context *ctx,
                                      const dcptopk_merge_config *c,
                                      const dc_push_args *a, int32_t variant)
{
    if (a->rows == 0)
        return DCPTOPK_SUCCESS;
    if (a->rank < 0 || a->rank >= c->world_size)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "rank = %d: must be in [0, world_size = %d)", a->rank,
                       c->world_size);
    dcptopk_key key;
    topn_key(&key, DCPTOPK_KERNEL_PUSH, NULL);
    key.topk = c->topk;
    key.local_topk = c->local_topk;
    key.world_size = c->world_size;
    dc_launch_cfg cfg;
    int chunk;
    dcptopk_result r = topn_launch_cfg(ctx, "rows", a->rows, a->max_local_len,
                                       variant, a->stream, &key, &cfg, &chunk);
    if (r)
        return r;

    const uint16_t *logits = a->logits;
    long long stride = a->logits_stride;
    long long max_local_len = a->max_local_len;
    const int32_t *row_ends = a->row_ends;
    long long rows = a->rows;
    int rank = a->rank;
    const uint32_t *sat = a->sat;
    const uint32_t *seq = a->seq;
    const uint64_t *peer_recv = a->peer_recv;
    const uint64_t *peer_flags = a->peer_flags;
    long long max_rows = a->max_rows;
    void *params[] = {&logits, &stride,    &max_local_len, &row_ends,
                      &rows,   &rank,      &sat,           &seq,
                      &peer_recv, &peer_flags, &max_rows,  &chunk};
    return dc_launch(ctx, &key, "dcptopk_push", &cfg, params);
}

void dc_topn_config_keys(const dcptopk_merge_config *c, const char *arch,
                         dcptopk_key *keys, size_t cap, size_t *count)
{
    /* Every variant: which one a call takes depends on its rows and columns. */
    for (int32_t v = 0; v <= DC_TOPN_MAX_VARIANT; v++) {
        dcptopk_key k;
        topn_key(&k, DCPTOPK_KERNEL_TOPN_PACK, arch);
        k.local_topk = c->local_topk;
        k.variant = v;
        if (*count < cap)
            keys[*count] = k;
        (*count)++;
    }
    if (!c->exact)
        return;
    for (int32_t v = 0; v <= DC_TOPN_MAX_VARIANT; v++) {
        dcptopk_key k;
        topn_key(&k, DCPTOPK_KERNEL_PUSH, arch);
        k.topk = c->topk;
        k.local_topk = c->local_topk;
        k.world_size = c->world_size;
        k.variant = v;
        if (*count < cap)
            keys[*count] = k;
        (*count)++;
    }
}
