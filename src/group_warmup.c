/* group_warmup.c - dcptopk_group_warmup: every kernel of a group step ready
 * before the first one (on src/: it runs the library's warmup). */
#include "config_keys.h"
#include "group_int.h"
#include "runtime.h"

dcptopk_result dcptopk_group_warmup(dcptopk_group_workspace *gw,
                                   dcptopk_progress_fn progress, void *user,
                                   dcptopk_warmup_stats *stats)
{
    if (!gw)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "gw is NULL");
    /* The merge's keys (the node merge's, node_pairs and the pair select
     * over the nodes on a hierarchy) and the exchange's, in one warmup. */
    dcptopk_key keys[DC_CONFIG_MAX_KEYS];
    dc_key_list l = {.keys = keys, .cap = DC_CONFIG_MAX_KEYS};
    dcptopk_result r =
        dc_config_key_list(gw->ctx, &gw->c, gw->hier ? gw->nodes : 1,
                           gw->ctx->arch, &l);
    if (r)
        return dc_fail(gw->ctx, r, "%s", dcptopk_last_error(NULL));
    dc_gw_exchange_keys(gw, &l);
    if (l.n > l.cap)
        return dc_fail(gw->ctx, DCPTOPK_INTERNAL,
                       "the group's config needs %zu keys, more than %zu",
                       l.n, l.cap);
    return dcptopk_warmup_keys(gw->ctx, keys, l.n, progress, user, stats);
}
