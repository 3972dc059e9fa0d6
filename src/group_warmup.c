/* group_warmup.c - dcptopk_group_warmup: every kernel of a group step ready
 * before the first one (on src/: it runs the library's warmup). */
#include <stdio.h>

#include "group_int.h"
#include "runtime.h"

dcptopk_result dcptopk_group_warmup(dcptopk_group_workspace *gw,
                                   dcptopk_progress_fn progress, void *user,
                                   dcptopk_warmup_stats *stats)
{
    if (!gw)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "gw is NULL");
    dcptopk_result r;
    if (gw->hier) {
        /* The node merge's keys, node_pairs and the pair select over the
         * nodes, at once (as dcptopk_warmup does a config's). */
        dcptopk_key hk[32];
        size_t hn = 0;
        if ((r = dcptopk_config_keys_nodes(&gw->c, gw->nodes, gw->ctx->arch,
                                           hk, sizeof hk / sizeof hk[0],
                                           &hn)))
            return dc_fail(gw->ctx, r, "%s", dcptopk_last_error(NULL));
        if (hn > sizeof hk / sizeof hk[0])
            return dc_fail(gw->ctx, DCPTOPK_INTERNAL,
                           "the hierarchical config needs %zu keys", hn);
        r = dcptopk_warmup_keys(gw->ctx, hk, hn, progress, user, stats);
    } else
        r = dcptopk_warmup(gw->ctx, &gw->c, progress, user, stats);
    dcptopk_key keys[2];
    const int n = r ? 0 : dc_gw_exchange_keys(gw, keys, 2);
    if (r || n == 0)
        return r;
    dcptopk_warmup_stats more = DCPTOPK_WARMUP_STATS_INIT;
    if ((r = dcptopk_warmup_keys(gw->ctx, keys, (size_t)n, progress, user,
                                 &more)))
        return r;
    if (stats && stats->struct_size >= sizeof *stats) {
        stats->keys += more.keys;
        stats->memory_hits += more.memory_hits;
        stats->cache_hits += more.cache_hits;
        stats->compiled += more.compiled;
        stats->compile_ms += more.compile_ms;
        stats->load_ms += more.load_ms;
        stats->total_ms += more.total_ms;
    }
    return DCPTOPK_SUCCESS;
}
