/* group.c - the group of ranks (public: dcptopk_group_*): bootstrap through
 * an adopted or created NCCL communicator or a file store, discovery of every
 * rank's host and device, P2P domains, the exchange path, host barriers,
 * health checks and the broken state. Docs: docs/DISTRIBUTED.md. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "group_int.h"
#include "driver.h"
#include "log.h"
#include "nccl_table.h"
#include "runtime.h"
#include "settings.h"
#include "structs.h"

#define DC_BOOT_BYTES 16384 /* NCCL bootstrap buffer: W * blob */

/* The bound of every wait: config, else $DCPTOPK_PEER_TIMEOUT_MS, else the
 * table's default (base/settings.h, which also warns about a bad value). */
static int64_t timeout_from(int32_t cfg_ms)
{
    if (cfg_ms > 0)
        return cfg_ms;
    return dc_setting_int(DC_SET_PEER_TIMEOUT_MS);
}

/* The path requested by $DCPTOPK_EXCHANGE when the config says AUTO. Unlike
 * most settings a bad value is an error, not a warning: a test or a
 * benchmark that forces a path must not silently measure another. */
static dcptopk_result path_from_env(const dcptopk_context *ctx, int32_t *path)
{
    const char *e = dc_setting_text(DC_SET_EXCHANGE);
    if (!e || *path != DCPTOPK_PATH_AUTO)
        return DCPTOPK_SUCCESS;
    const int32_t paths[] = {DCPTOPK_PATH_AUTO, DCPTOPK_PATH_NCCL,
                             DCPTOPK_PATH_PUSH, DCPTOPK_PATH_LOOPBACK,
                             DCPTOPK_PATH_STAGED, DCPTOPK_PATH_STORE};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(e, dcptopk_path_name(paths[i])) == 0) {
            *path = paths[i];
            return DCPTOPK_SUCCESS;
        }
    return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                   "DCPTOPK_EXCHANGE = \"%s\": expected auto, nccl, push, "
                   "staged, store or loopback", e);
}

/* ------------------------------------------------------- broken state */

dcptopk_result dc_group_break(dcptopk_group *g, dcptopk_result r)
{
    if (!g->broken) {
        g->broken = 1;
        snprintf(g->broken_msg, sizeof g->broken_msg, "%s: %s",
                 dcptopk_result_name(r), dcptopk_last_error(g->ctx));
    }
    return r;
}

dcptopk_result dc_group_usable(dcptopk_group *g)
{
    if (!g->broken)
        return DCPTOPK_SUCCESS;
    return dc_fail(g->ctx, DCPTOPK_GROUP_BROKEN,
                   "rank %d: the group failed earlier (%s); every rank must "
                   "destroy it (and its workspaces) and create a new one",
                   g->rank, g->broken_msg);
}

/* ------------------------------------------------ bounded stream wait */

/* Waits for `stream` within the group's bound, watching NCCL's asynchronous
 * error: a plain synchronise would hang on a collective whose peer died. */
dcptopk_result dc_group_stream_wait(dcptopk_group *g, void *stream)
{
    const dc_cuda *cu = dc_cuda_get(NULL);
    if (!cu)
        return dc_fail(g->ctx, DCPTOPK_NO_DEVICE, "no CUDA driver");
    dcptopk_result r = dc_ctx_enter(g->ctx);
    if (r)
        return r;
    const dc_nccl *nc = g->comm ? dc_nccl_get(NULL) : NULL;
    const double t0 = dc_now_ms();
    long nap = 10;
    for (;;) {
        CUresult q = cu->cuStreamQuery((CUstream)stream);
        if (q == CUDA_SUCCESS)
            return DCPTOPK_SUCCESS;
        if (q != CUDA_ERROR_NOT_READY)
            return dc_cu_fail(g->ctx, q, "cuStreamQuery(stream)");
        if (nc) {
            ncclResult_t ar = ncclSuccess;
            ncclResult_t qr = nc->ncclCommGetAsyncError(g->comm, &ar);
            if (qr != ncclSuccess || (ar != ncclSuccess && ar != ncclInProgress)) {
                dcptopk_result nr =
                    dc_nccl_fail(g->ctx, qr != ncclSuccess ? qr : ar, g->comm,
                                 "ncclCommGetAsyncError");
                /* A remote or system (socket) error is how NCCL sees a peer
                 * that died: the peer-timeout code, with NCCL's words. */
                if (qr == ncclSuccess &&
                    (ar == ncclRemoteError || ar == ncclSystemError)) {
                    char msg[1024];
                    snprintf(msg, sizeof msg, "%s", dcptopk_last_error(g->ctx));
                    nr = dc_fail(g->ctx, DCPTOPK_PEER_TIMEOUT,
                                 "rank %d: a peer failed during a collective: "
                                 "%s", g->rank, msg);
                }
                return dc_group_break(g, nr);
            }
        }
        if (dc_now_ms() - t0 >= (double)g->timeout_ms)
            return dc_group_break(
                g, dc_fail(g->ctx, DCPTOPK_PEER_TIMEOUT,
                           "rank %d: the stream did not finish within %lld "
                           "ms (a collective or device wait is stuck: a peer "
                           "may have died)",
                           g->rank, (long long)g->timeout_ms));
        struct timespec ts = {0, nap * 1000};
        nanosleep(&ts, NULL);
        if (nap < 500)
            nap *= 2;
    }
}

/* ------------------------------------------------- host collectives */

static dcptopk_result nccl_allgather(dcptopk_group *g, const void *mine,
                                     size_t size, void *all)
{
    const dc_nccl *nc = dc_nccl_get(NULL);
    dcptopk_context *ctx = g->ctx;
    dcptopk_result r;
    if (size * (size_t)g->world_size > g->boot_cap)
        return dc_fail(ctx, DCPTOPK_INTERNAL,
                       "bootstrap blob of %zu bytes x %d ranks exceeds the "
                       "%zu-byte buffer",
                       size, g->world_size, g->boot_cap);
    const uint64_t slot = g->boot_buf + (uint64_t)g->rank * size;
    /* A copy from pageable memory may return before its DMA lands, and the
     * bootstrap stream does not wait for the legacy stream: sync it. */
    if ((r = dc_memcpy_htod(ctx, slot, mine, size)) ||
        (r = dc_stream_sync(ctx, NULL)))
        return r;
    /* In place: the send buffer is this rank's slot of the receive buffer. */
    ncclResult_t nr = nc->ncclAllGather((const void *)(uintptr_t)slot,
                                        (void *)(uintptr_t)g->boot_buf, size,
                                        ncclUint8, (ncclComm_t)g->comm,
                                        (cudaStream_t)g->boot_stream);
    if (nr != ncclSuccess)
        return dc_group_break(g, dc_nccl_fail(ctx, nr, (ncclComm_t)g->comm,
                                              "ncclAllGather(bootstrap)"));
    if ((r = dc_group_stream_wait(g, g->boot_stream)))
        return r;
    return dc_memcpy_dtoh(ctx, all, g->boot_buf, size * (size_t)g->world_size);
}

dcptopk_result dc_group_allgather(dcptopk_group *g, const void *mine,
                                  size_t size, void *all)
{
    dcptopk_result r = dc_group_usable(g);
    if (r)
        return r;
    if (g->world_size == 1) {
        memcpy(all, mine, size);
        return DCPTOPK_SUCCESS;
    }
    if (g->comm && g->boot_buf)
        return nccl_allgather(g, mine, size, all);
    if (g->has_store) {
        r = dc_store_allgather(g->ctx, &g->store, mine, size, all);
        return r == DCPTOPK_PEER_TIMEOUT ? dc_group_break(g, r) : r;
    }
    return dc_fail(g->ctx, DCPTOPK_INTERNAL,
                   "the group has neither NCCL nor a store");
}

dcptopk_result dc_group_host_barrier(dcptopk_group *g)
{
    uint32_t one = 1, all[DC_W_MAX];
    if (g->has_store && !g->broken && g->world_size > 1) {
        /* The store's barrier skips the device round trip of NCCL's. */
        dcptopk_result r = dc_store_barrier(g->ctx, &g->store);
        return r == DCPTOPK_PEER_TIMEOUT ? dc_group_break(g, r) : r;
    }
    return dc_group_allgather(g, &one, sizeof one, all);
}

/* ------------------------------------------------------- discovery */

static void read_boot_id(char *out, size_t size)
{
    snprintf(out, size, "%s", "no-boot-id");
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    char buf[64] = {0};
    if (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\r\n")] = 0;
        snprintf(out, size, "%s", buf);
    }
    fclose(f);
}

static dcptopk_result my_info(dcptopk_group *g, dc_rank_info *me)
{
    memset(me, 0, sizeof *me);
    if (gethostname(me->host, sizeof me->host - 1) != 0)
        snprintf(me->host, sizeof me->host, "%s", "unknown-host");
    read_boot_id(me->boot_id, sizeof me->boot_id);
    me->pid = (int32_t)getpid();
    me->device = g->ctx->device;
    me->push_built = dc_exchange_push_built();
    if (g->ctx->device < 0)
        return DCPTOPK_SUCCESS; /* host-only group: no device identity */
    const dc_cuda *cu = dc_cuda_get(NULL);
    if (!cu)
        return dc_fail(g->ctx, DCPTOPK_NO_DEVICE, "no CUDA driver");
    CUdevice dev;
    DC_CU(g->ctx, cu->cuDeviceGet(&dev, g->ctx->device));
    CUuuid u;
    DC_CU(g->ctx, cu->cuDeviceGetUuid(&u, dev));
    memcpy(me->uuid, u.bytes, 16);
    DC_CU(g->ctx, cu->cuDeviceGetPCIBusId(me->pci, (int)sizeof me->pci, dev));
    return DCPTOPK_SUCCESS;
}

/* Whether this process can map rank s's memory. */
static int can_reach(dcptopk_group *g, const dc_rank_info *me,
                     const dc_rank_info *peer)
{
    if (!dc_same_host(me, peer))
        return 0;
    if (memcmp(me->uuid, peer->uuid, 16) == 0)
        return 1; /* one GPU (or two host-only ranks) */
    if (me->device < 0 || peer->device < 0)
        return 0;
    const dc_cuda *cu = dc_cuda_get(NULL);
    if (!cu)
        return 0;
    CUdevice mine, other = -1;
    if (cu->cuDeviceGet(&mine, me->device) != CUDA_SUCCESS)
        return 0;
    /* The peer's ordinal is its own process's: find its GPU by UUID. */
    for (int i = 0; i < cu->device_count && other < 0; i++) {
        CUdevice d;
        CUuuid u;
        if (cu->cuDeviceGet(&d, i) == CUDA_SUCCESS &&
            cu->cuDeviceGetUuid(&u, d) == CUDA_SUCCESS &&
            memcmp(u.bytes, peer->uuid, 16) == 0)
            other = d;
    }
    int ok = 0;
    if (other >= 0 && cu->cuDeviceCanAccessPeer(&ok, mine, other) != CUDA_SUCCESS)
        ok = 0;
    (void)g;
    return ok != 0;
}

static dcptopk_result discover(dcptopk_group *g)
{
    dc_rank_info me;
    dcptopk_result r = my_info(g, &me);
    if (r)
        return r;
    g->topo.world_size = g->world_size;
    if ((r = dc_group_allgather(g, &me, sizeof me, g->topo.info)))
        return r;
    /* $DCPTOPK_DOMAIN_SIZE caps the domains at blocks of consecutive
     * ranks: nodes simulated on one machine (tests of the hierarchical
     * merge), or a deployment that keeps its peer mappings inside blocks. */
    const int64_t cap = dc_setting_int(DC_SET_DOMAIN_SIZE);
    uint32_t row = 0, rows[DC_W_MAX];
    for (int32_t s = 0; s < g->world_size; s++)
        if (s == g->rank ||
            ((cap < 1 || s / cap == g->rank / cap) &&
             can_reach(g, &me, &g->topo.info[s])))
            row |= 1u << s;
    if ((r = dc_group_allgather(g, &row, sizeof row, rows)))
        return r;
    dc_topo_domains(&g->topo, rows);
    return DCPTOPK_SUCCESS;
}

static dcptopk_result choose(dcptopk_group *g, int32_t forced)
{
    dc_path_facts f = {g->comm != NULL, g->has_store, forced};
    int32_t p = dc_path_choose(&g->topo, &f, g->reason, sizeof g->reason);
    if (p < 0)
        return dc_fail(g->ctx, DCPTOPK_UNSUPPORTED, "rank %d: %s", g->rank,
                       g->reason);
    g->path = p;
    if (g->topo.domains > 1) {
        dc_hier_plan_make(&g->topo, &f, &g->hier);
        const size_t n = strlen(g->reason);
        snprintf(g->reason + n, sizeof g->reason - n, "; %s", g->hier.why);
    }
    return DCPTOPK_SUCCESS;
}

/* ------------------------------------------------------- creation */

dcptopk_result dcptopk_group_unique_id(uint8_t out[DCPTOPK_GROUP_UNIQUE_ID_BYTES])
{
    if (!out)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    const dc_nccl *nc = dc_nccl_get(NULL);
    if (!nc)
        return dc_nccl_absent(NULL, "dcptopk_group_unique_id");
    ncclUniqueId id;
    DC_NCCL(NULL, NULL, nc->ncclGetUniqueId(&id));
    memcpy(out, id.internal, DCPTOPK_GROUP_UNIQUE_ID_BYTES);
    dc_clear(NULL);
    return DCPTOPK_SUCCESS;
}

/* Sets up the NCCL bootstrap buffer and stream once a communicator exists. */
static dcptopk_result boot_buffers(dcptopk_group *g)
{
    dcptopk_result r;
    if ((r = dc_stream_create(g->ctx, &g->boot_stream)) ||
        (r = dc_mem_alloc(g->ctx, DC_BOOT_BYTES, &g->boot_buf)))
        return r;
    g->boot_cap = DC_BOOT_BYTES;
    return DCPTOPK_SUCCESS;
}

/* ncclCommInitRank waits for every rank of the id, and a rank that never
 * comes would hold the caller forever. So it runs on a thread of its own and
 * the caller waits at most the group's timeout. Past it the caller returns
 * DCPTOPK_PEER_TIMEOUT and abandons the thread, which cannot be cancelled:
 * should NCCL still finish, the thread aborts the communicator and frees the
 * job. Whoever of the two comes last frees it, decided under its lock. */
typedef struct comm_boot {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int done, abandoned;
    ncclResult_t result;
    ncclComm_t comm;
    ncclUniqueId id;
    int world_size, rank;
    CUcontext cuctx;
} comm_boot;

static void comm_boot_free(comm_boot *b)
{
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static void *comm_boot_main(void *arg)
{
    comm_boot *b = arg;
    const dc_nccl *nc = dc_nccl_get(NULL);
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclInternalError;
    /* NCCL takes its device from the CUDA runtime, which follows the driver
     * context current on this thread (the group context's primary one). */
    if (dc_cuda_get(NULL)->cuCtxSetCurrent(b->cuctx) == CUDA_SUCCESS)
        r = nc->ncclCommInitRank(&comm, b->world_size, b->id, b->rank);
    pthread_mutex_lock(&b->lock);
    int abandoned = b->abandoned;
    b->done = 1;
    b->result = r;
    b->comm = comm;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->lock);
    if (abandoned) {
        if (r == ncclSuccess && comm)
            nc->ncclCommAbort(comm);
        comm_boot_free(b);
    }
    return NULL;
}

static dcptopk_result comm_create(dcptopk_group *g, const uint8_t *id_bytes)
{
    const dc_nccl *nc = dc_nccl_get(NULL);
    if (!nc)
        return dc_nccl_absent(g->ctx, "a group created from a unique id");
    if (g->ctx->device < 0)
        return dc_fail(g->ctx, DCPTOPK_NO_DEVICE,
                       "an NCCL group needs a context with a device (ctx "
                       "device -1)");
    dcptopk_result r = dc_ctx_enter(g->ctx);
    if (r)
        return r;
    comm_boot *b = calloc(1, sizeof *b);
    if (!b)
        return dc_fail(g->ctx, DCPTOPK_OUT_OF_MEMORY, "NCCL bootstrap job");
    CUresult cr = dc_cuda_get(NULL)->cuCtxGetCurrent(&b->cuctx);
    if (cr != CUDA_SUCCESS) {
        free(b);
        return dc_cu_fail(g->ctx, cr, "cuCtxGetCurrent");
    }
    memcpy(b->id.internal, id_bytes, sizeof b->id.internal);
    b->world_size = g->world_size;
    b->rank = g->rank;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_t th;
    int e = pthread_create(&th, NULL, comm_boot_main, b);
    if (e) {
        comm_boot_free(b);
        return dc_fail(g->ctx, DCPTOPK_INTERNAL,
                       "pthread_create for the NCCL bootstrap: %s",
                       strerror(e));
    }
    pthread_detach(th);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(g->timeout_ms / 1000);
    until.tv_nsec += (long)(g->timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->lock);
    while (!b->done) {
        if (pthread_cond_timedwait(&b->cv, &b->lock, &until) == ETIMEDOUT &&
            !b->done) {
            b->abandoned = 1;
            pthread_mutex_unlock(&b->lock);
            return dc_fail(g->ctx, DCPTOPK_PEER_TIMEOUT,
                           "rank %d of %d: ncclCommInitRank did not complete "
                           "within %lld ms (a rank of the unique id never "
                           "joined); the bootstrap thread is abandoned",
                           g->rank, g->world_size, (long long)g->timeout_ms);
        }
    }
    pthread_mutex_unlock(&b->lock);
    ncclResult_t nr = b->result;
    ncclComm_t comm = b->comm;
    comm_boot_free(b);
    if (nr != ncclSuccess)
        return dc_nccl_fail(g->ctx, nr, NULL, "ncclCommInitRank");
    g->comm = comm;
    g->own_comm = 1;
    return DCPTOPK_SUCCESS;
}

static dcptopk_result comm_adopt(dcptopk_group *g, const dcptopk_group_config *c)
{
    const dc_nccl *nc = dc_nccl_get(NULL);
    if (!nc)
        return dc_nccl_absent(g->ctx, "adopting an NCCL communicator");
    ncclComm_t comm = (ncclComm_t)c->nccl_comm;
    int count = 0, rank = 0, dev = -1;
    DC_NCCL(g->ctx, comm, nc->ncclCommCount(comm, &count));
    DC_NCCL(g->ctx, comm, nc->ncclCommUserRank(comm, &rank));
    DC_NCCL(g->ctx, comm, nc->ncclCommCuDevice(comm, &dev));
    if (c->world_size != -1 && c->world_size != count)
        return dc_fail(g->ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->world_size = %d: the communicator has %d "
                       "ranks", c->world_size, count);
    if (c->rank != -1 && c->rank != rank)
        return dc_fail(g->ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->rank = %d: the communicator says rank %d",
                       c->rank, rank);
    if (count < 1 || count > DCPTOPK_MAX_WORLD_SIZE)
        return dc_fail(g->ctx, DCPTOPK_UNSUPPORTED,
                       "the communicator has %d ranks: dcptopk supports "
                       "1..%d",
                       count, DCPTOPK_MAX_WORLD_SIZE);
    if (dev != g->ctx->device)
        return dc_fail(g->ctx, DCPTOPK_INVALID_ARGUMENT,
                       "the communicator is on device %d but ctx on device "
                       "%d",
                       dev, g->ctx->device);
    g->comm = comm;
    g->own_comm = 0;
    g->rank = rank;
    g->world_size = count;
    return DCPTOPK_SUCCESS;
}

/* Validates the config and sets up the bootstrap (no collective yet). */
static dcptopk_result group_alloc(dcptopk_context *ctx,
                                  const dcptopk_group_config *config,
                                  int32_t *forced, dcptopk_group **out)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!out)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    dcptopk_group_config local = DCPTOPK_GROUP_CONFIG_INIT;
    dcptopk_result r =
        DC_STRUCT_IN(ctx, "config", config, &local, GROUP_CONFIG);
    if (r)
        return r;
    const dcptopk_group_config *c = &local;
    if (c->version != DCPTOPK_GROUP_CONFIG_VERSION)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->version = %u: expected %d", c->version,
                       DCPTOPK_GROUP_CONFIG_VERSION);
    if (!c->nccl_comm) {
        if (c->world_size < 1 || c->world_size > DCPTOPK_MAX_WORLD_SIZE)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "config->world_size = %d: must be in 1..%d",
                           c->world_size, DCPTOPK_MAX_WORLD_SIZE);
        if (c->rank < 0 || c->rank >= c->world_size)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "config->rank = %d: must be in [0, world_size = "
                           "%d)",
                           c->rank, c->world_size);
        if (!c->unique_id && !c->store_dir && c->world_size > 1)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "config: world_size = %d but no nccl_comm, "
                           "unique_id or store_dir to reach the other ranks",
                           c->world_size);
    }
    if (c->timeout_ms < 0)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->timeout_ms = %d: must be >= 0 (0 = default)",
                       c->timeout_ms);
    if (c->path < DCPTOPK_PATH_AUTO || c->path > DCPTOPK_PATH_STAGED)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->path = %d: not a dcptopk_path", c->path);
    *forced = c->path;
    r = path_from_env(ctx, forced);
    if (r)
        return r;
    dcptopk_group *g = calloc(1, sizeof *g);
    if (!g)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "group struct");
    g->ctx = ctx;
    g->rank = c->rank;
    g->world_size = c->world_size;
    g->timeout_ms = timeout_from(c->timeout_ms);
    if (c->nccl_comm)
        r = comm_adopt(g, c);
    else if (c->unique_id)
        r = comm_create(g, c->unique_id);
    if (!r && c->store_dir) {
        r = dc_store_open(ctx, &g->store, c->store_dir, c->store_prefix,
                          g->rank, g->world_size, g->timeout_ms);
        if (!r)
            r = dc_store_join(ctx, &g->store);
        g->has_store = r == DCPTOPK_SUCCESS;
    }
    if (!r && g->comm && g->world_size > 1)
        r = boot_buffers(g);
    if (r) {
        dcptopk_group_destroy(g);
        return r;
    }
    *out = g;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_group_create(dcptopk_context *ctx,
                                    const dcptopk_group_config *config,
                                    dcptopk_group **out)
{
    int32_t forced = 0;
    dcptopk_group *g = NULL;
    if (out)
        *out = NULL;
    dcptopk_result r = group_alloc(ctx, config, &forced, out ? &g : NULL);
    if (r)
        return r;
    if ((r = discover(g)) || (r = choose(g, forced))) {
        dcptopk_group_destroy(g);
        return r;
    }
    g->created = 1;
    *out = g;
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
}

void dcptopk_group_destroy(dcptopk_group *g)
{
    if (!g)
        return;
    /* A failed creation or a broken group removes what this rank wrote;
     * a healthy group's last rank to leave removes the attempt's files. */
    dc_store_close(&g->store, !g->created || g->broken);
    /* Workspaces may outlive the group (a broken group is destroyed first,
     * so that its abort ends a collective stuck on a dead peer); they only
     * need the context from now on. */
    for (size_t i = 0; i < sizeof g->workspaces / sizeof g->workspaces[0]; i++)
        if (g->workspaces[i])
            g->workspaces[i]->g = NULL;
    if (g->boot_buf)
        dc_mem_free(g->ctx, g->boot_buf);
    if (g->boot_stream)
        dc_stream_destroy(g->ctx, g->boot_stream);
    if (g->comm && g->own_comm) {
        const dc_nccl *nc = dc_nccl_get(NULL);
        if (nc && dc_ctx_enter(g->ctx) == DCPTOPK_SUCCESS) {
            /* A broken group may have a collective stuck on a dead peer:
             * only an abort returns then. */
            if (g->broken)
                nc->ncclCommAbort((ncclComm_t)g->comm);
            else
                nc->ncclCommDestroy((ncclComm_t)g->comm);
        }
    }
    free(g);
}

/* Groups created from the environment in this process: the ranks create and
 * rebuild their groups in step, so the count names a fresh set of store
 * files for each generation. */
static atomic_uint env_generation;

static int nccl_wanted(void) { return (int)dc_setting_int(DC_SET_NCCL); }

dcptopk_result dcptopk_group_create_from_env(dcptopk_context *ctx,
                                             const char *dir,
                                             const dcptopk_group_config *base,
                                             dcptopk_group **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!out)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    dcptopk_group_config given = DCPTOPK_GROUP_CONFIG_INIT;
    dcptopk_result r;
    if (base && (r = DC_STRUCT_IN(ctx, "base", base, &given, GROUP_CONFIG)))
        return r;
    dcptopk_launch_env env = DCPTOPK_LAUNCH_ENV_INIT;
    r = dcptopk_launch_env_get(&env);
    if (r) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", dcptopk_last_error(NULL));
        return dc_fail(ctx, r, "%s", msg);
    }
    const int dir_from_env = !dir || !*dir;
    if (dir_from_env)
        dir = dc_setting_text(DC_SET_STORE_DIR);
    if (!dir || !*dir)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "dir is NULL and DCPTOPK_STORE_DIR is not set: the "
                       "launcher group needs a folder shared by the ranks");
    dcptopk_group_config c = DCPTOPK_GROUP_CONFIG_INIT;
    c.path = given.path;
    c.timeout_ms = given.timeout_ms;
    c.store_prefix = given.store_prefix;
    /* The launcher's job id (when it has one) keeps a folder reused by
     * another job from serving that job's stale files. */
    const char *job = dc_launch_job_id();
    char prefix[128];
    unsigned gen = atomic_fetch_add(&env_generation, 1u);
    snprintf(prefix, sizeof prefix, "%s%s%s.g%u",
             c.store_prefix ? c.store_prefix : "dcptopk", job ? "." : "",
             job ? job : "", gen);
    c.store_prefix = prefix;
    c.rank = env.rank;
    c.world_size = env.world_size;
    c.store_dir = dir;
    int32_t forced = 0;
    dcptopk_group *g = NULL;
    if ((r = group_alloc(ctx, &c, &forced, &g))) {
        /* The store's checks name store_dir: say where it came from. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dcptopk_last_error(ctx));
        if (strncmp(msg, "store_dir", 9) == 0)
            dc_fail(ctx, r, "%s%s", dir_from_env ? "DCPTOPK_STORE_DIR, " :
                    "dir, ", msg);
        return r;
    }
    if ((r = discover(g)))
        goto fail;
    /* NCCL when it loads and every rank has a GPU of its own (NCCL refuses
     * two ranks on one GPU): rank 0's unique id travels through the store. */
    int distinct = ctx->device >= 0;
    for (int32_t a = 0; a < g->world_size && distinct; a++)
        for (int32_t b = a + 1; b < g->world_size && distinct; b++)
            if (dc_same_host(&g->topo.info[a], &g->topo.info[b]) &&
                memcmp(g->topo.info[a].uuid, g->topo.info[b].uuid, 16) == 0)
                distinct = 0;
    /* Every rank must take the same decision: NCCL's presence is local, so
     * the ranks agree through one more all-gather. */
    int32_t have = g->world_size > 1 && distinct && nccl_wanted() &&
                   dc_nccl_get(NULL) != NULL;
    int32_t all[DC_W_MAX];
    if ((r = dc_group_allgather(g, &have, sizeof have, all)))
        goto fail;
    for (int32_t p = 0; p < g->world_size; p++)
        have &= all[p];
    if (have) {
        uint8_t id[DCPTOPK_GROUP_UNIQUE_ID_BYTES];
        if (g->rank == 0) {
            if ((r = dcptopk_group_unique_id(id))) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", dcptopk_last_error(NULL));
                r = dc_fail(ctx, r, "%s", msg);
                goto fail;
            }
            r = dc_store_put(ctx, &g->store, "nccl_id", id, sizeof id);
        } else {
            r = dc_store_get(ctx, &g->store, "nccl_id", 0, id, sizeof id,
                             g->timeout_ms);
        }
        if (r || (r = comm_create(g, id)) || (r = boot_buffers(g)))
            goto fail;
    }
    if ((r = choose(g, forced)))
        goto fail;
    g->created = 1;
    *out = g;
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
fail:
    dcptopk_group_destroy(g);
    return r;
}

/* ------------------------------------------------------------ queries */

int32_t dcptopk_group_rank(const dcptopk_group *g) { return g ? g->rank : -1; }

int32_t dcptopk_group_world_size(const dcptopk_group *g)
{
    return g ? g->world_size : 0;
}

int32_t dcptopk_group_nodes(const dcptopk_group *g)
{
    if (!g)
        return 0;
    if (g->topo.domains <= 1)
        return 1;
    return g->hier.ok ? g->hier.nodes : 0;
}

dcptopk_result dcptopk_group_path(const dcptopk_group *g, int32_t *path,
                                  char *reason, size_t size)
{
    if (!g)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "group is NULL");
    if (!path)
        return dc_fail(g->ctx, DCPTOPK_INVALID_ARGUMENT, "path is NULL");
    *path = g->path;
    if (reason && size)
        snprintf(reason, size, "%s", g->reason);
    return DCPTOPK_SUCCESS;
}

const char *dcptopk_group_last_error(const dcptopk_group *g)
{
    return dcptopk_last_error(g ? g->ctx : NULL);
}

dcptopk_result dcptopk_group_barrier(dcptopk_group *g)
{
    if (!g)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "group is NULL");
    dcptopk_result r = dc_group_usable(g);
    if (r || (r = dc_group_host_barrier(g)))
        return r;
    dc_clear(g->ctx);
    return DCPTOPK_SUCCESS;
}
