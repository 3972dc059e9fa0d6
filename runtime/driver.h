/*
 * driver.h - the CUDA Driver API, loaded at run time (private to runtime/ and
 * src/context.c). libcuda.so.1 is dlopen'ed once into one table of function
 * pointers, so the library loads, compiles and caches on machines that have
 * no driver; only calls that need a device fail, with DCPTOPK_NO_DEVICE.
 *
 * Symbol names come from cuda.h's own mapping (cuMemAlloc -> cuMemAlloc_v2,
 * cuGraphInstantiate -> cuGraphInstantiateWithFlags, ...): the table's fields
 * are spelled with the API names and the strings passed to dlsym are produced
 * by expanding those same macros, so the two cannot drift.
 */
#ifndef DCPTOPK_DRIVER_H
#define DCPTOPK_DRIVER_H

#include <cuda.h>

#include "base.h"

/* X(name): every entry point the library uses. */
#define DC_CU_FUNCTIONS(X)                                                     \
    X(cuInit)                                                                  \
    X(cuDriverGetVersion)                                                      \
    X(cuDeviceGetCount)                                                        \
    X(cuDeviceGet)                                                             \
    X(cuDeviceGetAttribute)                                                    \
    X(cuDeviceGetName)                                                         \
    X(cuDevicePrimaryCtxRetain)                                                \
    X(cuDevicePrimaryCtxRelease)                                               \
    X(cuCtxSetCurrent)                                                         \
    X(cuCtxGetCurrent)                                                         \
    X(cuCtxSynchronize)                                                        \
    X(cuModuleLoadDataEx)                                                      \
    X(cuModuleGetFunction)                                                     \
    X(cuModuleUnload)                                                          \
    X(cuFuncSetAttribute)                                                      \
    X(cuFuncGetAttribute)                                                      \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                             \
    X(cuLaunchKernel)                                                          \
    X(cuLaunchKernelEx)                                                        \
    X(cuMemAlloc)                                                              \
    X(cuMemFree)                                                               \
    X(cuMemsetD8Async)                                                         \
    X(cuMemcpyHtoD)                                                            \
    X(cuMemcpyDtoH)                                                            \
    X(cuMemcpyDtoDAsync)                                                       \
    X(cuMemcpy2DAsync)                                                         \
    X(cuStreamCreate)                                                          \
    X(cuStreamDestroy)                                                         \
    X(cuStreamSynchronize)                                                     \
    X(cuEventCreate)                                                           \
    X(cuEventDestroy)                                                          \
    X(cuEventRecord)                                                           \
    X(cuEventSynchronize)                                                      \
    X(cuEventElapsedTime)                                                      \
    X(cuStreamBeginCapture)                                                    \
    X(cuStreamEndCapture)                                                      \
    X(cuGraphInstantiate)                                                      \
    X(cuGraphLaunch)                                                           \
    X(cuGraphDestroy)                                                          \
    X(cuGraphExecDestroy)                                                      \
    X(cuGetErrorName)                                                          \
    X(cuGetErrorString)                                                        \
    /* group/: device identity, peer access, CUDA IPC, bounded stream waits */  \
    X(cuDeviceGetUuid)                                                         \
    X(cuDeviceGetPCIBusId)                                                     \
    X(cuDeviceCanAccessPeer)                                                   \
    X(cuCtxEnablePeerAccess)                                                   \
    X(cuIpcGetMemHandle)                                                       \
    X(cuIpcOpenMemHandle)                                                      \
    X(cuIpcCloseMemHandle)                                                     \
    X(cuStreamQuery)                                                           \
    X(cuStreamIsCapturing)                                                     \
    /* group/: the host-mapped step status; pointer checks of entry points */  \
    X(cuMemHostAlloc)                                                          \
    X(cuMemHostGetDevicePointer)                                               \
    X(cuMemFreeHost)                                                           \
    X(cuPointerGetAttributes)

typedef struct dc_cuda {
#define DC_CU_FIELD(name) __typeof__(&name) name;
    DC_CU_FUNCTIONS(DC_CU_FIELD)
#undef DC_CU_FIELD
    int driver_version; /* cuDriverGetVersion, e.g. 13000 */
    int device_count;
} dc_cuda;

/* The loaded table, or NULL when there is no usable driver (then *why, when
 * non-NULL, says what failed: "dlopen(libcuda.so.1) failed: ..."). Loads and
 * calls cuInit(0) once per process (pthread_once); thread-safe. */
DC_HIDDEN const dc_cuda *dc_cuda_get(const char **why);

/* Records a failed driver call in ctx: DCPTOPK_CUDA_ERROR with the call, the
 * CUDA error name, number and string. Returns DCPTOPK_CUDA_ERROR. */
DC_HIDDEN dcptopk_result dc_cu_fail(const dcptopk_context *ctx, CUresult r,
                                    const char *call);

/* The one check macro for CUresult: `DC_CU(ctx, cu->cuMemAlloc(&p, n));`
 * returns DCPTOPK_CUDA_ERROR from the enclosing function on failure. */
#define DC_CU(ctx, call)                                                       \
    do {                                                                       \
        CUresult dc_cu_r_ = (call);                                            \
        if (dc_cu_r_ != CUDA_SUCCESS)                                          \
            return dc_cu_fail((ctx), dc_cu_r_, #call);                         \
    } while (0)

#endif /* DCPTOPK_DRIVER_H */
