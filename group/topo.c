/* topo.c - which ranks reach each other's memory, and the exchange path
 * (with the paths' names and whether this build has the push path). Pure
 * functions of data every rank gathered, so all ranks decide the same
 * (tests/cpu/test_dist.c feeds them synthetic topologies). */
#include <stdio.h>
#include <string.h>

#include "group_int.h"

int dc_same_host(const dc_rank_info *a, const dc_rank_info *b)
{
    return strncmp(a->host, b->host, sizeof a->host) == 0 &&
           strncmp(a->boot_id, b->boot_id, sizeof a->boot_id) == 0;
}

void dc_topo_domains(dc_topo *t, const uint32_t *rows)
{
    const int32_t w = t->world_size;
    for (int32_t r = 0; r < w; r++) {
        uint32_t m = 1u << r;
        for (int32_t s = 0; s < w; s++)
            if (s != r && (rows[r] >> s & 1u) && (rows[s] >> r & 1u))
                m |= 1u << s;
        t->reach[r] = m;
    }
    for (int32_t r = 0; r < w; r++)
        t->domain[r] = -1;
    t->domains = 0;
    for (int32_t r = 0; r < w; r++) {
        if (t->domain[r] >= 0)
            continue;
        /* r opens a domain; later ranks join when they reach every member. */
        uint32_t members = 1u << r;
        t->domain[r] = r;
        t->domains++;
        for (int32_t s = r + 1; s < w; s++) {
            if (t->domain[s] >= 0)
                continue;
            if ((t->reach[s] & members) == members) {
                members |= 1u << s;
                t->domain[s] = r;
            }
        }
    }
}

/* Whether the ranks of `members` (a bit set) are on distinct GPUs; if not,
 * *a and *b are the first two that share one. */
static int distinct_devices(const dc_topo *t, uint32_t members, int32_t *a,
                            int32_t *b)
{
    for (int32_t r = 0; r < t->world_size; r++)
        for (int32_t s = r + 1; s < t->world_size; s++)
            if ((members >> r & 1u) && (members >> s & 1u) &&
                dc_same_host(&t->info[r], &t->info[s]) &&
                memcmp(t->info[r].uuid, t->info[s].uuid, 16) == 0) {
                *a = r;
                *b = s;
                return 0;
            }
    return 1;
}

/* Whether every rank's library has the device push exchange. */
static int all_push_built(const dc_topo *t)
{
    for (int32_t r = 0; r < t->world_size; r++)
        if (!t->info[r].push_built)
            return 0;
    return 1;
}

static int32_t count_hosts(const dc_topo *t)
{
    int32_t n = 0;
    for (int32_t r = 0; r < t->world_size; r++) {
        int seen = 0;
        for (int32_t s = 0; s < r && !seen; s++)
            seen = dc_same_host(&t->info[r], &t->info[s]);
        n += !seen;
    }
    return n;
}

static int32_t count_devices(const dc_topo *t)
{
    int32_t n = 0;
    for (int32_t r = 0; r < t->world_size; r++) {
        int seen = 0;
        for (int32_t s = 0; s < r && !seen; s++)
            seen = dc_same_host(&t->info[r], &t->info[s]) &&
                   memcmp(t->info[r].uuid, t->info[s].uuid, 16) == 0;
        n += !seen;
    }
    return n;
}

int32_t dc_path_choose(const dc_topo *t, const dc_path_facts *f, char *reason,
                       size_t size)
{
    const int32_t w = t->world_size;
    const int one_domain = t->domains == 1;
    const int push_built = all_push_built(t);
    int32_t da = -1, db = -1;
    const int distinct = distinct_devices(t, 0xFFFFFFFFu, &da, &db);
    char where[160];
    snprintf(where, sizeof where, "%d ranks, %d host(s), %d device(s), %d P2P "
             "domain(s)", w, count_hosts(t), count_devices(t), t->domains);
    char nccl_no[160];
    if (!f->has_comm)
        snprintf(nccl_no, sizeof nccl_no, "the group has no NCCL "
                 "communicator");
    else
        snprintf(nccl_no, sizeof nccl_no, "ranks %d and %d share one GPU, "
                 "which NCCL refuses", da, db);
    const int nccl_ok = f->has_comm && distinct;
    const int staged_ok = one_domain && (f->has_store || f->has_comm);

    /* Across domains a forced push or staged path can only serve the
     * nodes of the hierarchy (dc_hier_plan_make); the flat exchange still
     * needs a path that crosses domains. */
    const char *inside = "";
    if (!one_domain && (f->forced == DCPTOPK_PATH_PUSH ||
                        f->forced == DCPTOPK_PATH_STAGED)) {
        inside = f->forced == DCPTOPK_PATH_PUSH
                     ? "push forced: it runs inside each node; "
                     : "staged forced: it runs inside each node; ";
        if (f->forced == DCPTOPK_PATH_PUSH && !push_built) {
            snprintf(reason, size, "the push path was forced but this "
                     "library lacks the device push exchange "
                     "(kernels/exchange) (%s)", where);
            return -1;
        }
    }
    switch (*inside ? DCPTOPK_PATH_AUTO : f->forced) {
    case DCPTOPK_PATH_AUTO:
        break;
    case DCPTOPK_PATH_NCCL:
        if (nccl_ok) {
            snprintf(reason, size, "nccl: forced (%s)", where);
            return DCPTOPK_PATH_NCCL;
        }
        snprintf(reason, size, "the nccl path was forced but %s (%s)",
                 nccl_no, where);
        return -1;
    case DCPTOPK_PATH_PUSH:
        if (one_domain && push_built) {
            snprintf(reason, size, "push: forced (%s)", where);
            return DCPTOPK_PATH_PUSH;
        }
        snprintf(reason, size, "the push path was forced but %s (%s)",
                 !one_domain ? "the ranks are not all in one P2P domain"
                             : "this library lacks the device push exchange "
                               "(kernels/exchange)",
                 where);
        return -1;
    case DCPTOPK_PATH_STAGED:
        if (staged_ok) {
            snprintf(reason, size, "staged: forced (%s)", where);
            return DCPTOPK_PATH_STAGED;
        }
        snprintf(reason, size, "the staged path was forced but %s (%s)",
                 !one_domain ? "the ranks are not all in one P2P domain"
                             : "the group has neither a store nor NCCL for "
                               "its host barrier",
                 where);
        return -1;
    case DCPTOPK_PATH_STORE:
        if (f->has_store) {
            snprintf(reason, size, "store: forced (%s)", where);
            return DCPTOPK_PATH_STORE;
        }
        snprintf(reason, size, "the store path was forced but the group has "
                 "no store (%s)", where);
        return -1;
    case DCPTOPK_PATH_LOOPBACK:
        if (w == 1) {
            snprintf(reason, size, "loopback: forced (one rank)");
            return DCPTOPK_PATH_LOOPBACK;
        }
        snprintf(reason, size, "the loopback path was forced but the group "
                 "has %d ranks (loopback is for one rank)", w);
        return -1;
    default:
        snprintf(reason, size, "path = %d: not a dcptopk_path", f->forced);
        return -1;
    }
    if (w == 1) {
        snprintf(reason, size, "loopback: one rank, its own rows are the "
                 "gathered rows");
        return DCPTOPK_PATH_LOOPBACK;
    }
    if (one_domain && push_built) {
        snprintf(reason, size, "push: every rank reaches every other's memory "
                 "(%s)", where);
        return DCPTOPK_PATH_PUSH;
    }
    if (nccl_ok) {
        snprintf(reason, size, "nccl: %s%s (%s)", inside,
                 one_domain ? "this library lacks the device push exchange"
                            : "the ranks are not all in one P2P domain",
                 where);
        return DCPTOPK_PATH_NCCL;
    }
    if (staged_ok) {
        snprintf(reason, size, "staged: one P2P domain but no device push "
                 "exchange in this library and no usable NCCL (%s) (%s)",
                 nccl_no, where);
        return DCPTOPK_PATH_STAGED;
    }
    if (f->has_store) {
        snprintf(reason, size, "store: %sthe ranks are not all in one P2P "
                 "domain and %s (%s)", inside, nccl_no, where);
        return DCPTOPK_PATH_STORE;
    }
    snprintf(reason, size, "no exchange path: the ranks are not all in one "
             "P2P domain, %s and the group has no store (%s)", nccl_no, where);
    return -1;
}

void dc_hier_plan_make(const dc_topo *t, const dc_path_facts *f,
                       dc_hier_plan *h)
{
    const int32_t w = t->world_size;
    memset(h, 0, sizeof *h);
    if (t->domains < 2) {
        snprintf(h->why, sizeof h->why, "one P2P domain: no hierarchy");
        return;
    }
    /* Node d must be ranks [d*L, d*L + L): the node pairs' gids and the
     * node-major order of the second stage assume it (launchers number the
     * ranks of a host consecutively). */
    const int32_t l = w / t->domains;
    for (int32_t r = 0; r < w; r++)
        if (w % t->domains || t->domain[r] != r / l * l) {
            snprintf(h->why, sizeof h->why,
                     "the %d P2P domains are not %d blocks of consecutive "
                     "ranks of equal size (rank %d is in the domain of rank "
                     "%d)",
                     t->domains, t->domains, r, t->domain[r]);
            return;
        }
    const int push_built = all_push_built(t);
    h->nodes = t->domains;
    h->node_size = l;
    if (l == 1)
        h->node_path = DCPTOPK_PATH_LOOPBACK;
    else if (push_built && f->forced != DCPTOPK_PATH_STAGED)
        h->node_path = DCPTOPK_PATH_PUSH;
    else
        h->node_path = DCPTOPK_PATH_STAGED;
    /* The rails (same node rank, one per node) carry the node top Ks. */
    int rails_distinct = 1;
    for (int32_t i = 0; i < l; i++) {
        uint32_t rail = 0;
        for (int32_t d = 0; d < h->nodes; d++)
            rail |= 1u << (d * l + i);
        int32_t ra, rb;
        rails_distinct &= distinct_devices(t, rail, &ra, &rb);
    }
    if (f->has_comm && rails_distinct && f->forced != DCPTOPK_PATH_STORE)
        h->rail_path = DCPTOPK_PATH_NCCL;
    else if (f->has_store && f->forced != DCPTOPK_PATH_NCCL)
        h->rail_path = DCPTOPK_PATH_STORE;
    else {
        snprintf(h->why, sizeof h->why,
                 "%d nodes of %d ranks, but no way across them: %s",
                 h->nodes, l,
                 f->has_comm ? "the ranks of a rail share a GPU, which NCCL "
                               "refuses, and the group has no store"
                             : "the group has no NCCL communicator");
        return;
    }
    h->ok = 1;
    snprintf(h->why, sizeof h->why,
             "exact packed merges run hierarchically: %d nodes of %d ranks, "
             "%s inside a node, %s across nodes",
             h->nodes, l, dcptopk_path_name(h->node_path),
             dcptopk_path_name(h->rail_path));
}

const char *dcptopk_path_name(int32_t path)
{
    switch (path) {
    case DCPTOPK_PATH_AUTO:
        return "auto";
    case DCPTOPK_PATH_NCCL:
        return "nccl";
    case DCPTOPK_PATH_PUSH:
        return "push";
    case DCPTOPK_PATH_LOOPBACK:
        return "loopback";
    case DCPTOPK_PATH_STAGED:
        return "staged";
    case DCPTOPK_PATH_STORE:
        return "store";
    default:
        return "unknown";
    }
}

int dc_exchange_push_built(void)
{
#ifdef DC_HAVE_PUSH_EXCHANGE
    return 1;
#else
    return 0;
#endif
}
