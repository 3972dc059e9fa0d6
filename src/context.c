/* context.c - the public context: creation from a versioned config, the
 * target arch, sealing, counters. The CUDA side (primary context, module
 * table, cache handle) lives in runtime/module.c behind ctx->rt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "pair.h"
#include "rt.h"
#include "structs.h"

int dcptopk_device_count(void)
{
    return dc_rt_device_count();
}

/* Reads a context config through its struct_size: fields a caller's older
 * header lacks keep their defaults. */
static dcptopk_result config_read(const dcptopk_context_config *in,
                                  dcptopk_context_config *out)
{
    *out = (dcptopk_context_config)DCPTOPK_CONTEXT_CONFIG_INIT;
    return in ? DC_STRUCT_IN(NULL, "config", in, out, CONTEXT_CONFIG)
              : DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_context_create(const dcptopk_context_config *config,
                                      dcptopk_context **out)
{
    if (!out)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    dcptopk_context_config c;
    dcptopk_result r = config_read(config, &c);
    if (r)
        return r;
    if (c.device < -1)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->device = %d: must be a device ordinal >= 0, "
                       "or -1 for no device",
                       c.device);
    if (c.cache_mode < DCPTOPK_CACHE_READWRITE ||
        c.cache_mode > DCPTOPK_CACHE_OFF)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->cache_mode = %d: must be 0 (read-write), 1 "
                       "(read-only) or 2 (off)",
                       c.cache_mode);
    if (c.warmup_threads < 0 || c.warmup_threads > 64)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->warmup_threads = %d: must be 1..64, or 0 for "
                       "the default",
                       c.warmup_threads);
    if (c.arch && strlen(c.arch) >= sizeof(((dcptopk_context *)0)->arch))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->arch = \"%.40s\": too long (expected "
                       "sm_XY[a|f])",
                       c.arch);
    if (c.cache_path &&
        strlen(c.cache_path) >= sizeof(((dcptopk_context *)0)->cache_path))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->cache_path: longer than %zu bytes",
                       sizeof(((dcptopk_context *)0)->cache_path) - 1);
    if (c.device == -1 && (!c.arch || !c.arch[0]))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->arch = NULL with config->device = -1: a "
                       "context without a device needs an explicit arch "
                       "(e.g. \"sm_90a\")");

    dcptopk_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_OUT_OF_MEMORY, "context");
    pthread_mutex_init(&ctx->err_lock, NULL);
    ctx->config = c;
    ctx->device = c.device;
    if (c.arch)
        snprintf(ctx->arch, sizeof ctx->arch, "%s", c.arch);
    if (c.cache_path)
        snprintf(ctx->cache_path, sizeof ctx->cache_path, "%s", c.cache_path);
    /* The copies replace the caller's pointers, which need not outlive the
     * call. */
    ctx->config.arch = ctx->arch;
    ctx->config.cache_path = c.cache_path ? ctx->cache_path : NULL;

    r = dc_rt_open(ctx);
    if (r) {
        /* Carry the message over to the thread slot: ctx goes away. */
        char msg[DC_ERR_LEN];
        snprintf(msg, sizeof msg, "%s", ctx->err.msg);
        dc_rt_close(ctx);
        pthread_mutex_destroy(&ctx->err_lock);
        free(ctx);
        return dc_fail(NULL, r, "%s", msg);
    }
    ctx->config.arch = ctx->arch;
    /* Read once, so that warmup and every later launch agree on the keys. */
    ctx->pair_shapes = dc_pair_row_shapes(ctx);
    dc_clear(ctx);
    *out = ctx;
    return DCPTOPK_SUCCESS;
}

void dcptopk_context_destroy(dcptopk_context *ctx)
{
    if (!ctx)
        return;
    dc_rt_close(ctx);
    pthread_mutex_destroy(&ctx->err_lock);
    free(ctx);
}

const char *dcptopk_context_arch(const dcptopk_context *ctx)
{
    return ctx ? ctx->arch : "";
}

dcptopk_result dcptopk_context_seal(dcptopk_context *ctx)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    dc_rt_seal(ctx);
    dc_clear(ctx);
    return DCPTOPK_SUCCESS;
}

dcptopk_result dcptopk_context_stats_get(const dcptopk_context *ctx,
                                         dcptopk_context_stats *out)
{
    if (!ctx)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    dcptopk_result r = DC_STRUCT_OUT(ctx, "out", out, CONTEXT_STATS);
    if (r)
        return r;
    dcptopk_context_stats s = DCPTOPK_CONTEXT_STATS_INIT;
    dc_rt_stats(ctx, &s);
    dc_struct_write(out, out->struct_size, &s, sizeof s);
    return DCPTOPK_SUCCESS;
}
