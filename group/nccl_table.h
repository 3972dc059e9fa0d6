/*
 * nccl_table.h - NCCL, loaded at run time (private to group/). libnccl.so.2 (or
 * $DCPTOPK_NCCL_LIBRARY) is dlopen'ed once into one table of function
 * pointers, so the library loads and serves single-GPU calls where NCCL is
 * absent; only group calls that need NCCL fail, with DCPTOPK_NCCL_ERROR.
 *
 * The table's types come from NCCL's own header (nccl.h of the CUDA toolkit),
 * but only entry points that exist in NCCL 2.28.3 and older are loaded: the
 * GPU machine's library is 2.28.3 while the build header may be newer.
 */
#ifndef DCPTOPK_DIST_NCCL_TABLE_H
#define DCPTOPK_DIST_NCCL_TABLE_H

/* NCCL's own header (the CUDA toolkit's); this file is not named nccl.h,
 * which would shadow it on group/'s include path. */
#include <nccl.h>

#include "base.h"

/* X(name): every NCCL entry point the library uses. */
#define DC_NCCL_FUNCTIONS(X)                                                   \
    X(ncclGetVersion)                                                          \
    X(ncclGetUniqueId)                                                         \
    X(ncclCommInitRank)                                                        \
    X(ncclCommDestroy)                                                         \
    X(ncclCommAbort)                                                           \
    X(ncclCommGetAsyncError)                                                   \
    X(ncclCommCount)                                                           \
    X(ncclCommCuDevice)                                                        \
    X(ncclCommUserRank)                                                        \
    X(ncclAllGather)                                                           \
    X(ncclBroadcast)                                                           \
    X(ncclSend)                                                                \
    X(ncclRecv)                                                                \
    X(ncclGroupStart)                                                          \
    X(ncclGroupEnd)                                                            \
    X(ncclGetErrorString)                                                      \
    X(ncclGetLastError)

typedef struct dc_nccl {
#define DC_NCCL_FIELD(name) __typeof__(&name) name;
    DC_NCCL_FUNCTIONS(DC_NCCL_FIELD)
#undef DC_NCCL_FIELD
    int version;        /* ncclGetVersion, e.g. 22803 */
    char path[256];     /* the file dlopen'ed         */
} dc_nccl;

/* The loaded table, or NULL when NCCL is unusable (then *why, when non-NULL,
 * says what failed: "dlopen(\"libnccl.so.2\") failed: ..."). Loads once per
 * process (pthread_once); thread-safe. The library file is
 * $DCPTOPK_NCCL_LIBRARY when set, else libnccl.so.2. */
DC_HIDDEN const dc_nccl *dc_nccl_get(const char **why);

/* "2.28.3", or "" without NCCL. */
DC_HIDDEN void dc_nccl_version_string(char *buf, size_t size);

/* Records a failed NCCL call in ctx: DCPTOPK_NCCL_ERROR with the call, the
 * code, ncclGetErrorString and ncclGetLastError(comm) (comm may be NULL).
 * Returns DCPTOPK_NCCL_ERROR. */
DC_HIDDEN dcptopk_result dc_nccl_fail(const dcptopk_context *ctx,
                                      ncclResult_t r, ncclComm_t comm,
                                      const char *call);

/* Records "NCCL is not available: <why>" as DCPTOPK_NCCL_ERROR. */
DC_HIDDEN dcptopk_result dc_nccl_absent(const dcptopk_context *ctx,
                                        const char *what);

/* The one check macro for ncclResult_t (nc = the table, comm may be NULL). */
#define DC_NCCL(ctx, comm, call)                                               \
    do {                                                                       \
        ncclResult_t dc_nc_r_ = (call);                                        \
        if (dc_nc_r_ != ncclSuccess)                                           \
            return dc_nccl_fail((ctx), dc_nc_r_, (comm), #call);               \
    } while (0)

#endif /* DCPTOPK_DIST_NCCL_TABLE_H */
