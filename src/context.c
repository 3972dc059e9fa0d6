/* context.c - the public context: creation from a versioned config, the
 * target arch, sealing, counters. The CUDA side (primary context, module
 * table, cache handle) lives in runtime/module.c behind ctx->rt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "rt.h"

int dcptopk_device_count(void)
{
    return dc_rt_device_count();
}

/* Reads a context config through its struct_size: fields a caller's older
 * header lacks keep their defaults. */
static dcptopk_result config_read(const dcptopk_context_config *in,
                                  dcptopk_context_config *out)
{
    static const dcptopk_context_config defaults = DCPTOPK_CONTEXT_CONFIG_INIT;
    *out = defaults;
    if (!in)
        return DCPTOPK_SUCCESS;
    size_t min = offsetof(dcptopk_context_config, cache_mode) +
                 sizeof in->cache_mode;
    if (in->struct_size < min || in->struct_size > (1u << 16))
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT,
                       "config->struct_size = %u: expected %zu (initialise "
                       "with DCPTOPK_CONTEXT_CONFIG_INIT)",
                       in->struct_size, sizeof *in);
    memcpy(out, in,
           in->struct_size < sizeof *out ? in->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    return DCPTOPK_SUCCESS;
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
    if (!out)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "out is NULL");
    size_t min = offsetof(dcptopk_context_stats, launches) + sizeof(uint64_t);
    if (out->struct_size < min || out->struct_size > (1u << 16))
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "out->struct_size = %u: expected %zu (initialise with "
                       "DCPTOPK_CONTEXT_STATS_INIT)",
                       out->struct_size, sizeof *out);
    dcptopk_context_stats s = DCPTOPK_CONTEXT_STATS_INIT;
    dc_rt_stats(ctx, &s);
    uint32_t size = out->struct_size;
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    out->struct_size = size;
    return DCPTOPK_SUCCESS;
}
