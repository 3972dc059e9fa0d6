/*
 * gpu_util.h - helpers for GPU tests: a context on device 0 (or SKIP when
 * there is no device), device buffers with copies, and a temporary folder
 * for caches. Every helper reports failures through the harness (CHECK),
 * so tests read `GPU_CTX(ctx);` and `DBUF(d, bytes);`.
 */
#ifndef DC_GPU_UTIL_H
#define DC_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dcptopk.h"
#include "harness.h"
#include "runtime.h"

/* A compile-only context (device -1, sm_90a, no cache): the argument
 * checks and every host path, without a GPU. NULL on failure, with the
 * error on stderr. */
dcptopk_context *host_ctx_create(void);

/* A context on device 0 with the cache in memory, or NULL when there is no
 * device (*why says so). On a creation failure: NULL and *why = the error. */
dcptopk_context *gpu_ctx_create(const char **why, int *is_skip);

/* Declares `dcptopk_context *name` on device 0, SKIPs without a device,
 * fails the test when creation fails. */
#define GPU_CTX(name)                                                          \
    dcptopk_context *name = NULL;                                              \
    do {                                                                       \
        const char *gpu_why_ = NULL;                                           \
        int gpu_skip_ = 0;                                                     \
        name = gpu_ctx_create(&gpu_why_, &gpu_skip_);                          \
        if (!name && gpu_skip_)                                                \
            SKIP("no CUDA device (%s)", gpu_why_);                             \
        CHECK_MSG(name != NULL, "context creation failed: %s", gpu_why_);      \
    } while (0)

/* Device buffer: alloc (zeroed), upload, download; 0 on failure. */
uint64_t gpu_alloc(dcptopk_context *ctx, size_t bytes);
uint64_t gpu_upload(dcptopk_context *ctx, const void *host, size_t bytes);
int gpu_download(dcptopk_context *ctx, void *host, uint64_t dptr,
                 size_t bytes);
void gpu_free(dcptopk_context *ctx, uint64_t dptr);

/* mkdtemp'd folder under $TMPDIR (or /tmp), "" on failure; remove with
 * tmpdir_remove (recursively, files only one level deep). */
void tmpdir_make(char *out, size_t size, const char *tag);
void tmpdir_remove(const char *dir);

/* Deterministic PRNG for test data (splitmix64). */
uint64_t test_rand(uint64_t *state);

#endif /* DC_GPU_UTIL_H */
