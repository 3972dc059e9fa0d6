/* device.c - the device helpers of runtime.h: entering the context's CUDA
 * context, memory, copies, streams, events and graphs. Each checks that the
 * context has a device and makes its CUDA context current first, so a caller
 * on any thread gets a clear error instead of a driver failure. */
#include <string.h>

#include "driver.h"
#include "module_int.h"
#include "runtime.h"

#define DC_NEED_DEVICE(ctx)                                                    \
    do {                                                                       \
        if (!(ctx) || !(ctx)->rt)                                              \
            return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");     \
        if (!(ctx)->rt->cu)                                                    \
            return dc_fail((ctx), DCPTOPK_NO_DEVICE,                           \
                           "this context has no device (device -1)");          \
        dcptopk_result dc_e_ = dc_ctx_enter(ctx);                              \
        if (dc_e_)                                                             \
            return dc_e_;                                                      \
    } while (0)

dcptopk_result dc_ctx_enter(dcptopk_context *ctx)
{
    if (!ctx || !ctx->rt)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    struct dc_runtime *rt = ctx->rt;
    if (!rt->cu)
        return dc_fail(ctx, DCPTOPK_NO_DEVICE,
                       "this context has no device (device -1)");
    CUcontext cur = NULL;
    if (rt->cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == rt->cuctx)
        return DCPTOPK_SUCCESS;
    DC_CU(ctx, rt->cu->cuCtxSetCurrent(rt->cuctx));
    return DCPTOPK_SUCCESS;
}

int32_t dc_ctx_sm_count(const dcptopk_context *ctx)
{
    return ctx && ctx->rt && ctx->rt->cu ? ctx->rt->sm_count : 0;
}

void dc_ctx_set_pdl(dcptopk_context *ctx, int on)
{
    if (ctx && ctx->rt)
        atomic_store(&ctx->rt->pdl_off, !on);
}

int32_t dc_ctx_smem_optin(const dcptopk_context *ctx)
{
    return ctx && ctx->rt && ctx->rt->cu ? ctx->rt->smem_optin : 0;
}

int32_t dc_ctx_l2_bytes(const dcptopk_context *ctx)
{
    return ctx && ctx->rt && ctx->rt->cu ? ctx->rt->l2_bytes : 0;
}

dc_device_speed dc_ctx_speed(const dcptopk_context *ctx)
{
    dc_device_speed s = {0, 0, 0, 0};
    if (ctx && ctx->rt && ctx->rt->cu) {
        s.sms = ctx->rt->sm_count;
        s.sm_khz = ctx->rt->sm_khz;
        s.mem_khz = ctx->rt->mem_khz;
        s.bus_bits = ctx->rt->bus_bits;
    }
    return s;
}

dcptopk_result dc_mem_alloc(dcptopk_context *ctx, size_t bytes,
                            uint64_t *dptr)
{
    DC_NEED_DEVICE(ctx);
    CUdeviceptr p = 0;
    CUresult r = ctx->rt->cu->cuMemAlloc(&p, bytes ? bytes : 1);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        dc_cu_fail(ctx, r, "cuMemAlloc");
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY,
                       "cuMemAlloc(%zu bytes): out of device memory", bytes);
    }
    if (r != CUDA_SUCCESS)
        return dc_cu_fail(ctx, r, "cuMemAlloc");
    *dptr = (uint64_t)p;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_host_mapped_alloc(dcptopk_context *ctx, size_t bytes,
                                    void **host, uint64_t *dptr)
{
    DC_NEED_DEVICE(ctx);
    void *h = NULL;
    CUdeviceptr d = 0;
    DC_CU(ctx, ctx->rt->cu->cuMemHostAlloc(&h, bytes ? bytes : 1,
                                           CU_MEMHOSTALLOC_DEVICEMAP |
                                               CU_MEMHOSTALLOC_PORTABLE));
    CUresult r = ctx->rt->cu->cuMemHostGetDevicePointer(&d, h, 0);
    if (r != CUDA_SUCCESS) {
        ctx->rt->cu->cuMemFreeHost(h);
        return dc_cu_fail(ctx, r, "cuMemHostGetDevicePointer");
    }
    memset(h, 0, bytes);
    *host = h;
    *dptr = (uint64_t)d;
    return DCPTOPK_SUCCESS;
}

void dc_host_mapped_free(dcptopk_context *ctx, void *host)
{
    if (!ctx || !ctx->rt || !ctx->rt->cu || !host)
        return;
    if (dc_ctx_enter(ctx) == DCPTOPK_SUCCESS)
        ctx->rt->cu->cuMemFreeHost(host);
}

/* Per thread: a composite call's steps run on its caller's thread. */
static _Thread_local int ptr_checks_off;

int dc_ptr_checks_suspend(void)
{
    const int previous = ptr_checks_off;
    ptr_checks_off = 1;
    return previous;
}

void dc_ptr_checks_restore(int previous)
{
    ptr_checks_off = previous;
}

dcptopk_result dc_check_device_ptr(dcptopk_context *ctx, const char *name,
                                   const void *ptr)
{
    if (!ptr || ptr_checks_off)
        return DCPTOPK_SUCCESS;
    DC_NEED_DEVICE(ctx);
    unsigned int type = 0, managed = 0;
    int ordinal = -1;
    CUcontext owner = NULL;
    CUpointer_attribute at[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                CU_POINTER_ATTRIBUTE_CONTEXT};
    void *data[] = {&type, &managed, &ordinal, &owner};
    /* Not a CUDA pointer at all: success with the attributes left at
     * their defaults (memory type 0). */
    DC_CU(ctx, ctx->rt->cu->cuPointerGetAttributes(4, at, data,
                                                   (CUdeviceptr)ptr));
    if (managed)
        return DCPTOPK_SUCCESS;
    if (type != CU_MEMORYTYPE_DEVICE)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s = %p: %s, not device memory (a CPU tensor? the "
                       "kernels need memory of device %d)",
                       name, ptr,
                       type == CU_MEMORYTYPE_HOST ? "page-locked host memory"
                                                  : "host memory",
                       ctx->device);
    if (ordinal != ctx->device)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s = %p: memory of device %d, the context's device "
                       "is %d",
                       name, ptr, ordinal, ctx->device);
    /* Memory mapped through the virtual memory API has no owning context. */
    if (owner && owner != ctx->rt->cuctx)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "%s = %p: memory of another CUDA context on device %d "
                       "(not the primary context this library uses)",
                       name, ptr, ordinal);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_check_device_ptrs(dcptopk_context *ctx,
                                    const dc_named_ptr *ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dcptopk_result r = dc_check_device_ptr(ctx, ptrs[i].name, ptrs[i].p);
        if (r)
            return r;
    }
    return DCPTOPK_SUCCESS;
}

void dc_mem_free(dcptopk_context *ctx, uint64_t dptr)
{
    if (!ctx || !ctx->rt || !ctx->rt->cu || !dptr)
        return;
    if (dc_ctx_enter(ctx) == DCPTOPK_SUCCESS)
        ctx->rt->cu->cuMemFree((CUdeviceptr)dptr);
}

dcptopk_result dc_memset_async(dcptopk_context *ctx, uint64_t dptr,
                               uint8_t value, size_t bytes, void *stream)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuMemsetD8Async((CUdeviceptr)dptr, value, bytes,
                                            (CUstream)stream));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_memcpy_dtod_async(dcptopk_context *ctx, uint64_t dst,
                                    uint64_t src, size_t bytes, void *stream)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuMemcpyDtoDAsync((CUdeviceptr)dst,
                                              (CUdeviceptr)src, bytes,
                                              (CUstream)stream));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_memcpy_2d_dtod_async(dcptopk_context *ctx, uint64_t dst,
                                       size_t dst_pitch, uint64_t src,
                                       size_t src_pitch, size_t width,
                                       size_t rows, void *stream)
{
    DC_NEED_DEVICE(ctx);
    CUDA_MEMCPY2D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = (CUdeviceptr)src;
    m.srcPitch = src_pitch;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = (CUdeviceptr)dst;
    m.dstPitch = dst_pitch;
    m.WidthInBytes = width;
    m.Height = rows;
    DC_CU(ctx, ctx->rt->cu->cuMemcpy2DAsync(&m, (CUstream)stream));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_memcpy_htod(dcptopk_context *ctx, uint64_t dst,
                              const void *src, size_t bytes)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuMemcpyHtoD((CUdeviceptr)dst, src, bytes));
    /* From pageable memory the copy may return before its DMA landed, and
     * non-blocking streams do not wait for the legacy stream: finish it, so
     * the bytes are there for any stream once this returns. */
    DC_CU(ctx, ctx->rt->cu->cuStreamSynchronize(NULL));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_memcpy_dtoh(dcptopk_context *ctx, void *dst, uint64_t src,
                              size_t bytes)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_stream_sync(dcptopk_context *ctx, void *stream)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuStreamSynchronize((CUstream)stream));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_stream_create(dcptopk_context *ctx, void **stream)
{
    DC_NEED_DEVICE(ctx);
    CUstream s = NULL;
    DC_CU(ctx, ctx->rt->cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    *stream = s;
    return DCPTOPK_SUCCESS;
}

void dc_stream_destroy(dcptopk_context *ctx, void *stream)
{
    if (!ctx || !ctx->rt || !ctx->rt->cu || !stream)
        return;
    if (dc_ctx_enter(ctx) == DCPTOPK_SUCCESS)
        ctx->rt->cu->cuStreamDestroy((CUstream)stream);
}

dcptopk_result dc_event_create(dcptopk_context *ctx, void **event)
{
    DC_NEED_DEVICE(ctx);
    CUevent e = NULL;
    DC_CU(ctx, ctx->rt->cu->cuEventCreate(&e, CU_EVENT_DEFAULT));
    *event = e;
    return DCPTOPK_SUCCESS;
}

void dc_event_destroy(dcptopk_context *ctx, void *event)
{
    if (!ctx || !ctx->rt || !ctx->rt->cu || !event)
        return;
    if (dc_ctx_enter(ctx) == DCPTOPK_SUCCESS)
        ctx->rt->cu->cuEventDestroy((CUevent)event);
}

dcptopk_result dc_event_record(dcptopk_context *ctx, void *event,
                               void *stream)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuEventRecord((CUevent)event, (CUstream)stream));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_event_elapsed_ms(dcptopk_context *ctx, void *start,
                                   void *end, float *ms)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuEventSynchronize((CUevent)end));
    DC_CU(ctx, ctx->rt->cu->cuEventElapsedTime(ms, (CUevent)start,
                                               (CUevent)end));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_graph_begin(dcptopk_context *ctx, void *stream)
{
    DC_NEED_DEVICE(ctx);
    /* Thread-local mode: other threads' unrelated CUDA calls stay legal. */
    DC_CU(ctx, ctx->rt->cu->cuStreamBeginCapture(
                   (CUstream)stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_graph_end(dcptopk_context *ctx, void *stream, void **exec)
{
    DC_NEED_DEVICE(ctx);
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    DC_CU(ctx, ctx->rt->cu->cuStreamEndCapture((CUstream)stream, &g));
    CUresult r = ctx->rt->cu->cuGraphInstantiate(&e, g, 0);
    ctx->rt->cu->cuGraphDestroy(g); /* the executable graph keeps a copy */
    if (r != CUDA_SUCCESS)
        return dc_cu_fail(ctx, r, "cuGraphInstantiate");
    *exec = e;
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_graph_launch(dcptopk_context *ctx, void *exec, void *stream)
{
    DC_NEED_DEVICE(ctx);
    DC_CU(ctx, ctx->rt->cu->cuGraphLaunch((CUgraphExec)exec, (CUstream)stream));
    return DCPTOPK_SUCCESS;
}

void dc_graph_destroy(dcptopk_context *ctx, void *exec)
{
    if (!ctx || !ctx->rt || !ctx->rt->cu || !exec)
        return;
    if (dc_ctx_enter(ctx) == DCPTOPK_SUCCESS)
        ctx->rt->cu->cuGraphExecDestroy((CUgraphExec)exec);
}
