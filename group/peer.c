/* peer.c - peer memory (see group_int.h): each rank allocates, and every rank of
 * its P2P domain maps the allocation. Between processes the mapping is a
 * CUDA IPC handle (cuIpcGetMemHandle / cuIpcOpenMemHandle, which also works
 * between processes sharing one GPU); within one process it is the plain
 * device pointer (unified addressing), after enabling peer access when the
 * devices differ. Handles travel once, at creation, outside graph capture. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_int.h"
#include "driver.h"
#include "runtime.h"

typedef struct dc_peer_blob {
    CUipcMemHandle handle;  /* 64 bytes */
    uint64_t ptr;           /* the allocation in its own process */
    uint64_t bytes;
    uint64_t token;         /* its entry in the owner's registry */
    int32_t ok;             /* 0: this rank failed to allocate */
    int32_t pad_;
} dc_peer_blob;

/* The peer allocations this process made: a record that says "same pid"
 * is used as a raw pointer only when its (token, ptr, bytes) is here, so a
 * forged or stale record never chooses an address in this process (it
 * goes through cuIpcOpenMemHandle, which refuses a handle it cannot
 * open). */
typedef struct dc_peer_entry {
    uint64_t token, ptr, bytes;
    struct dc_peer_entry *next;
} dc_peer_entry;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static dc_peer_entry *registry;

int dc_peer_registry_add(uint64_t token, uint64_t ptr, uint64_t bytes)
{
    dc_peer_entry *e = malloc(sizeof *e);
    if (!e)
        return -1;
    e->token = token;
    e->ptr = ptr;
    e->bytes = bytes;
    pthread_mutex_lock(&registry_lock);
    e->next = registry;
    registry = e;
    pthread_mutex_unlock(&registry_lock);
    return 0;
}

void dc_peer_registry_remove(uint64_t token)
{
    pthread_mutex_lock(&registry_lock);
    for (dc_peer_entry **p = &registry; *p; p = &(*p)->next)
        if ((*p)->token == token) {
            dc_peer_entry *e = *p;
            *p = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&registry_lock);
}

int dc_peer_registry_has(uint64_t token, uint64_t ptr, uint64_t bytes)
{
    int found = 0;
    pthread_mutex_lock(&registry_lock);
    for (const dc_peer_entry *e = registry; e && !found; e = e->next)
        found = token != 0 && e->token == token && e->ptr == ptr &&
                e->bytes == bytes;
    pthread_mutex_unlock(&registry_lock);
    return found;
}

/* In one process with two devices: let this context reach the peer's. */
static dcptopk_result enable_peer(dcptopk_group *g, int32_t peer_device)
{
    const dc_cuda *cu = dc_cuda_get(NULL);
    CUdevice dev;
    CUcontext pctx = NULL;
    DC_CU(g->ctx, cu->cuDeviceGet(&dev, peer_device));
    DC_CU(g->ctx, cu->cuDevicePrimaryCtxRetain(&pctx, dev));
    CUresult e = cu->cuCtxEnablePeerAccess(pctx, 0);
    /* The peer rank's context keeps the primary context alive; this retain
     * only lasted the call. */
    cu->cuDevicePrimaryCtxRelease(dev);
    if (e != CUDA_SUCCESS && e != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return dc_cu_fail(g->ctx, e, "cuCtxEnablePeerAccess");
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_peer_alloc(dcptopk_group *g, size_t bytes, dc_peer_mem *m)
{
    memset(m, 0, sizeof *m);
    dcptopk_context *ctx = g->ctx;
    const dc_cuda *cu = dc_cuda_get(NULL);
    dc_peer_blob mine, all[DC_W_MAX];
    memset(&mine, 0, sizeof mine);
    dcptopk_result r = dc_mem_alloc(ctx, bytes, &m->local);
    if (!r)
        r = dc_memset_async(ctx, m->local, 0, bytes, NULL);
    if (!r)
        r = dc_stream_sync(ctx, NULL);
    if (!r && g->world_size > 1) {
        CUresult e = cu->cuIpcGetMemHandle(&mine.handle, (CUdeviceptr)m->local);
        if (e != CUDA_SUCCESS)
            r = dc_cu_fail(ctx, e, "cuIpcGetMemHandle");
    }
    m->bytes = bytes;
    mine.ptr = m->local;
    mine.bytes = bytes;
    if (!r) {
        /* Registered before the exchange: a rank of this process that
         * reads the record looks it up after. */
        mine.token = dc_random64();
        if (dc_peer_registry_add(mine.token, mine.ptr, bytes) != 0)
            r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "peer registry entry");
        else
            m->token = mine.token;
    }
    mine.ok = r == DCPTOPK_SUCCESS;
    /* Every rank takes part in the exchange, even after a local failure, so
     * that the peers fail together instead of waiting for it. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", r ? dcptopk_last_error(ctx) : "");
    dcptopk_result ar = dc_group_allgather(g, &mine, sizeof mine, all);
    if (r) {
        dc_peer_free(ctx, m);
        return dc_fail(ctx, r, "rank %d: peer memory of %zu bytes: %s",
                       g->rank, bytes, msg);
    }
    if (ar) {
        dc_peer_free(ctx, m);
        return ar;
    }
    for (int32_t p = 0; p < g->world_size; p++)
        if (!all[p].ok || all[p].bytes != bytes) {
            dc_peer_free(ctx, m);
            return dc_fail(ctx, all[p].ok ? DCPTOPK_INVALID_ARGUMENT
                                          : DCPTOPK_OUT_OF_MEMORY,
                           "rank %d: rank %d %s", g->rank, p,
                           all[p].ok ? "allocated another size: the ranks' "
                                       "configs or max_rows differ"
                                     : "failed to allocate its peer memory");
        }
    const dc_rank_info *me = &g->topo.info[g->rank];
    for (int32_t p = 0; p < g->world_size; p++) {
        if (p == g->rank) {
            m->mapped[p] = m->local;
            continue;
        }
        if (!(g->topo.reach[g->rank] >> p & 1u))
            continue; /* another P2P domain: never mapped */
        const dc_rank_info *pi = &g->topo.info[p];
        /* The pid alone proves nothing (a forged record, or another pid
         * namespace on this host): only an allocation of this process. */
        if (pi->pid == me->pid && dc_same_host(pi, me) &&
            dc_peer_registry_has(all[p].token, all[p].ptr, all[p].bytes)) {
            if (pi->device != me->device &&
                (r = enable_peer(g, pi->device))) {
                dc_peer_free(ctx, m);
                return r;
            }
            m->mapped[p] = all[p].ptr;
            continue;
        }
        CUdeviceptr d = 0;
        CUresult e = cu->cuIpcOpenMemHandle(
            &d, all[p].handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (e != CUDA_SUCCESS) {
            dc_cu_fail(ctx, e, "cuIpcOpenMemHandle");
            snprintf(msg, sizeof msg, "%s", dcptopk_last_error(ctx));
            dc_peer_free(ctx, m);
            return dc_fail(ctx, DCPTOPK_CUDA_ERROR,
                           "rank %d: mapping rank %d's peer memory: %s",
                           g->rank, p, msg);
        }
        m->mapped[p] = (uint64_t)d;
        m->opened[p] = 1;
    }
    return DCPTOPK_SUCCESS;
}

void dc_peer_close(dcptopk_context *ctx, dc_peer_mem *m)
{
    const dc_cuda *cu = dc_cuda_get(NULL);
    int any = 0;
    for (int32_t p = 0; p < DC_W_MAX; p++)
        any |= m->opened[p];
    if (any && cu && dc_ctx_enter(ctx) == DCPTOPK_SUCCESS) {
        for (int32_t p = DC_W_MAX - 1; p >= 0; p--)
            if (m->opened[p])
                cu->cuIpcCloseMemHandle((CUdeviceptr)m->mapped[p]);
    }
    memset(m->opened, 0, sizeof m->opened);
    memset(m->mapped, 0, sizeof m->mapped);
}

void dc_peer_free(dcptopk_context *ctx, dc_peer_mem *m)
{
    dc_peer_close(ctx, m);
    if (m->token)
        dc_peer_registry_remove(m->token);
    m->token = 0;
    if (m->local)
        dc_mem_free(ctx, m->local);
    m->local = 0;
}
