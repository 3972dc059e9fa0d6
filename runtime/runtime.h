/*
 * runtime.h - what kernel launchers and GPU tests use from runtime/: module
 * lookup and launch on the caller's stream, device memory helpers, device
 * facts. Everything goes through the Driver API table loaded at run time
 * (runtime/driver.c), so the library loads on machines with no driver.
 */
#ifndef DCPTOPK_RUNTIME_H
#define DCPTOPK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

typedef struct dc_launch_cfg {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t smem_bytes;  /* dynamic shared memory; > 48 KiB is opted in    */
    uint32_t cluster_x;   /* thread-block cluster size along x; 0/1 = none  */
    void *stream;
    /* 1: programmatic dependent launch (sm_90+): the kernel may be
     * scheduled while the previous kernel on the stream is still running,
     * once all that kernel's CTAs have started or triggered; it must run
     * dc::pdl_wait() (common.cuh) before reading what that kernel wrote. */
    uint32_t pdl;
    /* 1: a persistent grid: grid[0] is capped at the SM count times the
     * CTAs of this function an SM holds at this block and shared memory
     * size (the driver's occupancy, asked once per function). */
    uint32_t fill;
} dc_launch_cfg;

/* Looks up (or, unless sealed in strict mode, compiles/loads) the module of
 * `key` (arch filled from the context when empty) and launches its extern "C"
 * function `entry` with `params` (cuLaunchKernel convention). A launch of a
 * loaded key touches neither NVRTC nor SQLite. */
dcptopk_result dc_launch(dcptopk_context *ctx, const dcptopk_key *key,
                         const char *entry, const dc_launch_cfg *cfg,
                         void **params);

/* Launches with cfg.pdl set keep the attribute (on, the default) or drop it
 * (off: plain stream order; the kernels' waits then pass at once). For the
 * benchmarks' A/B of dependent launches. */
void dc_ctx_set_pdl(dcptopk_context *ctx, int on);

/* Makes the context's CUDA context current on this thread. */
dcptopk_result dc_ctx_enter(dcptopk_context *ctx);
/* Device facts (0 when there is no device). */
int32_t dc_ctx_sm_count(const dcptopk_context *ctx);
int32_t dc_ctx_smem_optin(const dcptopk_context *ctx); /* bytes per block */
int32_t dc_ctx_l2_bytes(const dcptopk_context *ctx);   /* the device's L2 */
/* The device's SMs, clocks (kHz) and memory bus (bits), each 0 where the
 * driver does not say or the context has no device: what the launchers'
 * rules on DRAM bandwidth against the SMs read (pair_abi.h). */
typedef struct dc_device_speed {
    int32_t sms, sm_khz, mem_khz, bus_bits;
} dc_device_speed;
dc_device_speed dc_ctx_speed(const dcptopk_context *ctx);

/* Device memory and copies (stream NULL = legacy default stream). */
dcptopk_result dc_mem_alloc(dcptopk_context *ctx, size_t bytes,
                            uint64_t *dptr);
void dc_mem_free(dcptopk_context *ctx, uint64_t dptr);
dcptopk_result dc_memset_async(dcptopk_context *ctx, uint64_t dptr,
                               uint8_t value, size_t bytes, void *stream);
dcptopk_result dc_memcpy_dtod_async(dcptopk_context *ctx, uint64_t dst,
                                    uint64_t src, size_t bytes, void *stream);
/* `rows` rows of `width` bytes, `src_pitch` / `dst_pitch` bytes apart. */
dcptopk_result dc_memcpy_2d_dtod_async(dcptopk_context *ctx, uint64_t dst,
                                       size_t dst_pitch, uint64_t src,
                                       size_t src_pitch, size_t width,
                                       size_t rows, void *stream);
dcptopk_result dc_memcpy_htod(dcptopk_context *ctx, uint64_t dst,
                              const void *src, size_t bytes);
dcptopk_result dc_memcpy_dtoh(dcptopk_context *ctx, void *dst, uint64_t src,
                              size_t bytes);
dcptopk_result dc_stream_sync(dcptopk_context *ctx, void *stream);

/* Page-locked host memory mapped into the device (cuMemHostAlloc with
 * DEVICEMAP), zeroed: the host reads what kernels store there without a
 * synchronisation. *host is the host address, *dptr the device's. */
dcptopk_result dc_host_mapped_alloc(dcptopk_context *ctx, size_t bytes,
                                    void **host, uint64_t *dptr);
void dc_host_mapped_free(dcptopk_context *ctx, void *host);

/* An entry point's pointer argument `name` (NULL passes: the caller checks
 * what is required): device memory of this context's device, or managed
 * memory. Host memory (pageable or pinned), or memory of another device or
 * CUDA context, is DCPTOPK_INVALID_ARGUMENT naming the argument and what it
 * points to, instead of a fault inside a kernel. One cuPointerGetAttributes
 * (a query, legal during stream capture). */
dcptopk_result dc_check_device_ptr(dcptopk_context *ctx, const char *name,
                                   const void *ptr);

/* dc_check_device_ptr over a list, stopping at the first refusal. */
typedef struct dc_named_ptr {
    const char *name;
    const void *p;
} dc_named_ptr;
dcptopk_result dc_check_device_ptrs(dcptopk_context *ctx,
                                    const dc_named_ptr *ptrs, size_t n);

/* A caller that checked every pointer of a composite call (the group's
 * one-call merge) runs the public steps inside it with the checks off on
 * this thread, so that each pointer costs one query a step, not two.
 * Nests; returns the previous state for dc_ptr_checks_restore. */
int dc_ptr_checks_suspend(void);
void dc_ptr_checks_restore(int previous);

/* Streams, events and graphs, for tests and benchmarks. */
dcptopk_result dc_stream_create(dcptopk_context *ctx, void **stream);
void dc_stream_destroy(dcptopk_context *ctx, void *stream);
dcptopk_result dc_event_create(dcptopk_context *ctx, void **event);
void dc_event_destroy(dcptopk_context *ctx, void *event);
dcptopk_result dc_event_record(dcptopk_context *ctx, void *event,
                               void *stream);
dcptopk_result dc_event_elapsed_ms(dcptopk_context *ctx, void *start,
                                   void *end, float *ms);
dcptopk_result dc_graph_begin(dcptopk_context *ctx, void *stream);
/* Ends capture and instantiates: *exec is a CUgraphExec. */
dcptopk_result dc_graph_end(dcptopk_context *ctx, void *stream, void **exec);
dcptopk_result dc_graph_launch(dcptopk_context *ctx, void *exec, void *stream);
void dc_graph_destroy(dcptopk_context *ctx, void *exec);

#endif /* DCPTOPK_RUNTIME_H */
