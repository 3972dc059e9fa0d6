/*
 * group_int.h - private interface of group/, the merge across ranks: the file
 * store, the ranks' topology and the path choice, the group, peer memory,
 * the exchange and the group workspace. The public side is the group section
 * of include/dcptopk.h; docs/DISTRIBUTED.md explains the design.
 */
#ifndef DCPTOPK_DIST_H
#define DCPTOPK_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

#define DC_W_MAX DCPTOPK_MAX_WORLD_SIZE

/* ------------------------------------------------------------ file store */

/* A key-value store of small blobs in a private folder shared by the ranks:
 * a put writes a fresh temporary file (O_EXCL, never through a link) and
 * renames it into place (readers see a whole blob or none); a get polls
 * until the file appears or the bound passes, and reads only a regular file
 * of this user of exactly the expected size. Every name carries the
 * attempt id (dc_store_join), so an attempt never reads another's files.
 * Collective operations (all-gather, barrier) number themselves, so the
 * ranks must call them in the same order. docs/DISTRIBUTED.md, "File
 * store", has the threat model. */
typedef struct dc_store {
    char dir[1024];         /* resolved, checked private                   */
    char prefix[128];
    int32_t rank, world_size;
    int64_t timeout_ms;
    uint64_t op;            /* collective operations done                  */
    uint64_t attempt;       /* the ranks' common random id (0: not joined) */
    int32_t shared;         /* DCPTOPK_STORE_SHARED: a group's folder      */
} dc_store;

/* A random 64-bit value, never 0 (getrandom). */
DC_HIDDEN uint64_t dc_random64(void);
/* Checks that `dir` is a private folder (creates it, 0700, when missing)
 * and keeps its resolved path; a sticky folder others may write (as /tmp)
 * means its private subfolder dcptopk-<uid> (created 0700). Errors name
 * store_dir, the path, and the owner or mode refused. No file is touched:
 * dc_store_join comes next. */
DC_HIDDEN dcptopk_result dc_store_open(const dcptopk_context *ctx,
                                       dc_store *s, const char *dir,
                                       const char *prefix, int32_t rank,
                                       int32_t world_size, int64_t timeout_ms);
/* Collective, bounded by the store's timeout: the ranks agree on a fresh
 * random attempt id (rank 0 picks it; every other rank publishes a join
 * record with a random nonce and waits for rank 0's ack naming its nonce).
 * Files of an earlier attempt with the same prefix are never read. */
DC_HIDDEN dcptopk_result dc_store_join(const dcptopk_context *ctx,
                                       dc_store *s);
/* Removes this attempt's files, best effort: `failed` (a creation that
 * failed, a broken group): the files this rank wrote; otherwise this rank
 * says it is done, and the last rank done removes every file of the
 * attempt (rail stores of the group's workspaces included). */
DC_HIDDEN void dc_store_close(dc_store *s, int failed);
DC_HIDDEN dcptopk_result dc_store_put(const dcptopk_context *ctx,
                                      const dc_store *s, const char *key,
                                      const void *data, size_t size);
/* Waits up to timeout_ms for `key` (written by rank `from`, named in the
 * timeout message) and reads exactly `size` bytes. DCPTOPK_PEER_TIMEOUT on
 * timeout, DCPTOPK_IO_ERROR when the blob has another size. */
DC_HIDDEN dcptopk_result dc_store_get(const dcptopk_context *ctx,
                                      const dc_store *s, const char *key,
                                      int32_t from, void *data, size_t size,
                                      int64_t timeout_ms);
/* Every rank's `size` bytes into all[world_size * size], rank-major. */
DC_HIDDEN dcptopk_result dc_store_allgather(const dcptopk_context *ctx,
                                            dc_store *s, const void *mine,
                                            size_t size, void *all);
DC_HIDDEN dcptopk_result dc_store_barrier(const dcptopk_context *ctx,
                                          dc_store *s);

/* ---------------------------------------------------- topology and paths */

/* What a rank tells the others about itself at group creation. */
typedef struct dc_rank_info {
    char host[64];          /* gethostname                                 */
    char boot_id[40];       /* /proc/sys/kernel/random/boot_id             */
    int32_t pid;
    int32_t device;         /* ordinal in its own process                  */
    uint8_t uuid[16];       /* cuDeviceGetUuid                             */
    char pci[32];           /* cuDeviceGetPCIBusId                         */
    int32_t push_built;     /* this library has the device push exchange   */
    int32_t pad_;
} dc_rank_info;

typedef struct dc_topo {
    int32_t world_size;
    dc_rank_info info[DC_W_MAX];
    /* reach[r] bit s: rank r maps rank s's memory (symmetric, bit r set). */
    uint32_t reach[DC_W_MAX];
    int32_t domain[DC_W_MAX]; /* P2P domain of each rank (lowest member)   */
    int32_t domains;
} dc_topo;

/* Same host: hostname and boot id equal (containers share a boot id with
 * their host, so two containers on one machine are one host). */
DC_HIDDEN int dc_same_host(const dc_rank_info *a, const dc_rank_info *b);
/* From the gathered rows of every rank (row[r] bit s: r can map s), makes
 * reach symmetric (both must agree) and forms the domains: a domain is a set
 * of ranks that all reach each other; ranks are assigned greedily in rank
 * order. */
DC_HIDDEN void dc_topo_domains(dc_topo *t, const uint32_t *rows);

/* What the path choice depends on besides the topology. */
typedef struct dc_path_facts {
    int32_t has_comm;       /* an NCCL communicator spans the group        */
    int32_t has_store;      /* a file store spans the group                */
    int32_t forced;         /* dcptopk_path requested (AUTO = choose)      */
} dc_path_facts;

/* The exchange path for `t` (identical on every rank: a pure function of
 * gathered data), with the reason in `reason`. A forced path that cannot
 * work, or no path at all: returns -1 and the reason says why. */
DC_HIDDEN int32_t dc_path_choose(const dc_topo *t, const dc_path_facts *f,
                                 char *reason, size_t size);

/* How a group runs the exact packed merge across P2P domains (the
 * hierarchical merge, docs/DISTRIBUTED.md "Across nodes"): the domains are
 * the nodes, each of node_size consecutive ranks; the node merge exchanges
 * over node_path (push, staged, or loopback for one rank a node), the node
 * top Ks cross the nodes over rail_path (nccl: send/receive between the
 * ranks of equal node rank; store: through the file store). */
typedef struct dc_hier_plan {
    int32_t ok;             /* 0: why says why not                          */
    int32_t nodes, node_size;
    int32_t node_path, rail_path;
    char why[256];
} dc_hier_plan;

DC_HIDDEN void dc_hier_plan_make(const dc_topo *t, const dc_path_facts *f,
                                 dc_hier_plan *h);

/* ------------------------------------------------------------ the group */

struct dcptopk_group_workspace;

struct dcptopk_group {
    dcptopk_context *ctx;
    int32_t rank, world_size;
    void *comm;             /* ncclComm_t or NULL                          */
    int32_t own_comm;       /* created by ncclCommInitRank: destroy it     */
    int32_t has_store;
    dc_store store;
    int32_t created;        /* creation succeeded (else destroy cleans up
                               as after a failure)                         */
    int64_t timeout_ms;
    int32_t path;
    char reason[640];
    dc_topo topo;
    dc_hier_plan hier;      /* when topo.domains > 1                       */
    int32_t broken;         /* a wait timed out: every call refuses        */
    char broken_msg[512];
    /* NCCL bootstrap all-gathers go through this device buffer. */
    void *boot_stream;
    uint64_t boot_buf;
    size_t boot_cap;
    struct dcptopk_group_workspace *workspaces[8]; /* for group_check      */
    uint32_t workspaces_made; /* collective creations so far: names a
                                 workspace's own store files             */
};

/* Collective, host side: every rank's `size` bytes into all[W * size]
 * through the store or NCCL (whichever the group has; NCCL first). Bounded
 * by the group's timeout; a timeout breaks the group. */
DC_HIDDEN dcptopk_result dc_group_allgather(dcptopk_group *g, const void *mine,
                                            size_t size, void *all);
DC_HIDDEN dcptopk_result dc_group_host_barrier(dcptopk_group *g);
/* Waits for `stream` within the group's bound (cuStreamQuery polling that
 * also watches NCCL's asynchronous error); a timeout breaks the group. */
DC_HIDDEN dcptopk_result dc_group_stream_wait(dcptopk_group *g, void *stream);
/* DCPTOPK_GROUP_BROKEN with the first failure, when broken. */
DC_HIDDEN dcptopk_result dc_group_usable(dcptopk_group *g);
/* Marks the group broken (keeps the first reason). Returns `r`. */
DC_HIDDEN dcptopk_result dc_group_break(dcptopk_group *g, dcptopk_result r);

/* ---------------------------------------------------------- peer memory */

/* One allocation of each rank, mapped into every rank that reaches it. */
typedef struct dc_peer_mem {
    size_t bytes;
    uint64_t local;              /* this rank's allocation                  */
    uint64_t mapped[DC_W_MAX];   /* rank r's allocation as mapped here      */
    uint8_t opened[DC_W_MAX];    /* mapped[r] came from cuIpcOpenMemHandle  */
    uint64_t token;              /* its entry in the process's registry     */
} dc_peer_mem;

/* The process's registry of its peer allocations (dc_peer_alloc adds,
 * dc_peer_free removes; mutex-protected): a rank record naming this
 * process's pid is mapped as a raw pointer only when has() finds its
 * (token, ptr, bytes); otherwise it goes through cuIpcOpenMemHandle. Exposed
 * for tests. add: 0, or -1 out of memory. */
DC_HIDDEN int dc_peer_registry_add(uint64_t token, uint64_t ptr,
                                   uint64_t bytes);
DC_HIDDEN void dc_peer_registry_remove(uint64_t token);
DC_HIDDEN int dc_peer_registry_has(uint64_t token, uint64_t ptr,
                                   uint64_t bytes);

/* Collective: allocates `bytes` (zeroed) on this rank and maps every
 * reachable rank's allocation (CUDA IPC between processes, the plain pointer
 * within one). No barrier: the caller initialises its memory, then
 * barriers. */
DC_HIDDEN dcptopk_result dc_peer_alloc(dcptopk_group *g, size_t bytes,
                                       dc_peer_mem *m);
/* Closes the IPC mappings of the peers' allocations. */
DC_HIDDEN void dc_peer_close(dcptopk_context *ctx, dc_peer_mem *m);
/* dc_peer_close, then frees this rank's allocation (needs only the context:
 * a workspace may outlive its group). CUDA leaves freeing an exported
 * allocation that a peer still has open undefined, so a healthy group
 * barriers between the two (dcptopk_group_workspace_destroy). */
DC_HIDDEN void dc_peer_free(dcptopk_context *ctx, dc_peer_mem *m);

/* ------------------------------------------------------------- exchange */

/* Everything an exchange needs for one call (group/exchange.c). */
typedef struct dc_exchange_call {
    int64_t rows;            /* T                                          */
    int64_t stride_rows;     /* rank stride of the gathered rows           */
    int32_t parity;          /* which half of the double buffer            */
    uint64_t seq;            /* call number, from 1                        */
    void *stream;
} dc_exchange_call;

DC_HIDDEN dcptopk_result dc_exchange_run(struct dcptopk_group_workspace *gw,
                                         const dc_exchange_call *x);
/* Hierarchical workspace: this node's pairs (slot `node` of gw->rail)
 * into every rank of this rank's rail, over gw->rail_path. */
DC_HIDDEN dcptopk_result dc_rail_run(struct dcptopk_group_workspace *gw,
                                     int64_t rows, void *stream);
/* Whether this library was built with the device push exchange
 * (topo.c). */
DC_HIDDEN int dc_exchange_push_built(void);

/* ----------------------------------------------------- group workspace */

struct dcptopk_group_workspace {
    dcptopk_group *g;            /* NULL once the group is destroyed        */
    dcptopk_context *ctx;
    dcptopk_merge_config c;
    int64_t max_rows;
    int32_t row_words;           /* int32 words of one rank's row          */
    dc_peer_mem mem;             /* the one peer-shared allocation         */
    uint64_t off_gathered;       /* offsets inside it                       */
    uint64_t off_xflags;         /* [2][W] uint64 exchange flags            */
    uint64_t off_recv, off_rflags; /* rescue receive slots and flags        */
    uint64_t gathered_bytes;     /* one parity: W * max_rows * words * 4    */
    uint64_t status;             /* the push exchange's control block
                                    (dc_exchange_ctl, 48 bytes, this rank);
                                    its status words are the step's sticky
                                    status on every path (the rescue's too) */
    volatile uint32_t *host_status; /* [4] host-mapped copy of them, written
                                    by the poison step (NULL: none)       */
    uint64_t host_status_d;      /* its device address                      */
    int poison;                  /* the step ends with the poison kernel    */
    int trap;                    /* DCPTOPK_PEER_TIMEOUT_TRAP=1             */
    uint64_t seq;                /* calls made                              */
    uint64_t off_stable;         /* push path: one parity's bytes where a
                                    captured call's settle copies its rows  */
    int device_counted;          /* push path, after a capture: the host's
                                    seq no longer follows the device's, so
                                    every call settles and reads off_stable */
    dcptopk_workspace *ws;       /* exact packed merge: the rescue          */
    /* The exchange's members: ranks [xfirst, xfirst + xsize), this rank is
     * member xrank, over path xpath. The whole group, or in a hierarchical
     * workspace this rank's node. */
    int32_t xfirst, xsize, xrank, xpath;
    /* Hierarchical workspace (exact packed merge across P2P domains): the
     * node merge's config (world_size L) and the second stage's pair
     * config (world_size W), this rank's node of `nodes`, the rail path,
     * and local device buffers: the node merge's ids [max_rows, K] and the
     * nodes' pairs [nodes, max_rows, K, 2] (this node's in slot `node`). */
    int32_t hier;
    dcptopk_merge_config node_c, pair_c;
    int32_t nodes, node, rail_path;
    uint64_t node_ids, rail;
    /* Store path: this rank's blob, then one per member of the store's
     * gather (the group's W ranks, or the rail's D); a rail through the
     * store gathers over a store of its own, whose ranks are the nodes. */
    void *host;
    size_t host_blob;
    dc_store rail_store;
};

/* Appends the compile keys of the workspace's exchange: the push kernel's
 * and its settle's on the push path, the settle's (its poison step) where
 * steps end with device waits, none otherwise. */
DC_HIDDEN void dc_gw_exchange_keys(const struct dcptopk_group_workspace *gw,
                                   dc_key_list *l);
/* Device address of rank r's gathered buffer of `parity`, as mapped here. */
DC_HIDDEN uint64_t dc_gw_gathered(const struct dcptopk_group_workspace *gw,
                                  int32_t r, int32_t parity);

/* packed.c: the group's bound for the rescue waits of a workspace. */
DC_HIDDEN void dc_workspace_set_timeout_ns(dcptopk_workspace *ws,
                                           uint64_t ns);
/* packed.c: the rescue's status words become the exchange's sticky ones
 * (docs/DISTRIBUTED.md, "Failure semantics"). */
DC_HIDDEN void dc_workspace_set_status(dcptopk_workspace *ws, uint64_t words);

/* ---------------------------------------------------------- launch_env.c */

/* The launcher's job id (torchelastic, Slurm, Open MPI, $JOB_ID), when it
 * has a usable one (under 48 characters, no '/'), else NULL. */
DC_HIDDEN const char *dc_launch_job_id(void);

/* ------------------------------------------------------------ status.c */

/* The device status of the push exchange (after the stream finished):
 * DCPTOPK_PEER_TIMEOUT or DCPTOPK_GROUP_BROKEN with the kernel's message,
 * or success (also on the other paths). */
DC_HIDDEN dcptopk_result dc_exchange_status(struct dcptopk_group_workspace *gw,
                                            void *stream);
/* The step status of gw that reached the host (no synchronisation): 0, or
 * the code its poison step copied out (15 exchange timeout, 16 protocol,
 * 10 rescue timeout). On a failure, the group breaks with the message and
 * DCPTOPK_PEER_TIMEOUT (or DCPTOPK_GROUP_BROKEN for a protocol error) is
 * returned. */
DC_HIDDEN dcptopk_result dc_gw_poll(struct dcptopk_group_workspace *gw);
/* dc_gw_poll over every workspace of g. */
DC_HIDDEN dcptopk_result dc_group_poll(dcptopk_group *g);

#endif /* DCPTOPK_DIST_H */
