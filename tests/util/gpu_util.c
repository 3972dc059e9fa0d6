/* gpu_util.c - helpers for GPU tests (see gpu_util.h). */
#include "gpu_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dcptopk_context *host_ctx_create(void)
{
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = -1;
    cfg.arch = "sm_90a";
    cfg.cache_mode = DCPTOPK_CACHE_OFF;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "context: %s\n", dcptopk_last_error(NULL));
        return NULL;
    }
    return ctx;
}

dcptopk_context *gpu_ctx_create(const char **why, int *is_skip)
{
    *is_skip = 0;
    if (dcptopk_device_count() == 0) {
        *is_skip = 1;
        *why = "dcptopk_device_count() == 0";
        return NULL;
    }
    dcptopk_context_config cfg = DCPTOPK_CONTEXT_CONFIG_INIT;
    cfg.device = 0;
    /* Tests use the per-test cache folder when ctest sets one. */
    cfg.cache_mode = getenv("DCPTOPK_CACHE_DIR") ? DCPTOPK_CACHE_READWRITE
                                                 : DCPTOPK_CACHE_OFF;
    dcptopk_context *ctx = NULL;
    if (dcptopk_context_create(&cfg, &ctx) != DCPTOPK_SUCCESS) {
        *why = dcptopk_last_error(NULL);
        return NULL;
    }
    return ctx;
}

uint64_t gpu_alloc(dcptopk_context *ctx, size_t bytes)
{
    uint64_t p = 0;
    if (dc_mem_alloc(ctx, bytes, &p) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "gpu_alloc(%zu): %s\n", bytes,
                dcptopk_last_error(ctx));
        return 0;
    }
    if (dc_memset_async(ctx, p, 0, bytes, NULL) != DCPTOPK_SUCCESS ||
        dc_stream_sync(ctx, NULL) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "gpu_alloc memset: %s\n", dcptopk_last_error(ctx));
        dc_mem_free(ctx, p);
        return 0;
    }
    return p;
}

uint64_t gpu_upload(dcptopk_context *ctx, const void *host, size_t bytes)
{
    uint64_t p = gpu_alloc(ctx, bytes);
    if (p && bytes && dc_memcpy_htod(ctx, p, host, bytes) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "gpu_upload(%zu): %s\n", bytes,
                dcptopk_last_error(ctx));
        dc_mem_free(ctx, p);
        return 0;
    }
    return p;
}

int gpu_download(dcptopk_context *ctx, void *host, uint64_t dptr,
                 size_t bytes)
{
    if (dc_stream_sync(ctx, NULL) != DCPTOPK_SUCCESS ||
        dc_memcpy_dtoh(ctx, host, dptr, bytes) != DCPTOPK_SUCCESS) {
        fprintf(stderr, "gpu_download(%zu): %s\n", bytes,
                dcptopk_last_error(ctx));
        return -1;
    }
    return 0;
}

void gpu_free(dcptopk_context *ctx, uint64_t dptr) { dc_mem_free(ctx, dptr); }

void tmpdir_make(char *out, size_t size, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, size, "%s/dcptopk-%s-XXXXXX", base && base[0] ? base : "/tmp",
             tag);
    if (!mkdtemp(out))
        out[0] = '\0';
}

void tmpdir_remove(const char *dir)
{
    if (!dir || !dir[0])
        return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

uint64_t test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
