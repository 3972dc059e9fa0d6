/* warmup.c - compiles (or finds in the cache) and loads every kernel a merge
 * config needs, before the first call, so that serving never waits on NVRTC;
 * seals the context afterwards in strict mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "clock.h"
#include "config_keys.h"
#include "rt.h"
#include "settings.h"
#include "structs.h"

/* Threads of warmup's compile phase: the context's warmup_threads (checked
 * at creation), else DCPTOPK_WARMUP_THREADS, else the online CPUs, at most
 * 8. */
static int warmup_threads(const dcptopk_context *ctx)
{
    if (ctx->config.warmup_threads > 0)
        return ctx->config.warmup_threads;
    int64_t env = dc_setting_int(DC_SET_WARMUP_THREADS);
    if (env > 0)
        return (int)env;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

static void stats_store(dcptopk_warmup_stats *out,
                        const dcptopk_warmup_stats *s)
{
    if (out)
        dc_struct_write(out, out->struct_size, s, sizeof *s);
}

dcptopk_result dcptopk_warmup_keys(dcptopk_context *ctx,
                                   const dcptopk_key *keys, size_t count,
                                   dcptopk_progress_fn progress, void *user,
                                   dcptopk_warmup_stats *stats)
{
    if (!ctx || !ctx->rt)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (count && !keys)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "keys is NULL with count = %zu", count);
    dcptopk_result r =
        stats ? DC_STRUCT_OUT(ctx, "stats", stats, WARMUP_STATS)
              : DCPTOPK_SUCCESS;
    if (r)
        return r;
    dcptopk_warmup_stats s = DCPTOPK_WARMUP_STATS_INIT;
    double t0 = dc_now_ms();
    /* Phase one: the missing keys compiled side by side into the cache file
     * (skipped without one); phase two, below: each key in order, found in
     * the cache and loaded, or compiled here when phase one could not. */
    unsigned char *flags = count > 1 ? calloc(count, 2) : NULL;
    double *pre_ms = count > 1 ? calloc(count, sizeof *pre_ms) : NULL;
    dc_unit *units = count > 1 ? calloc(count, sizeof *units) : NULL;
    unsigned char *built = NULL, *pre = NULL; /* unit i built / key i compiled */
    if (flags && pre_ms && units) {
        built = flags;
        pre = flags + count;
        dc_rt_precompile(ctx, keys, count, warmup_threads(ctx), units, built, pre,
                         pre_ms);
    }
    for (size_t i = 0; i < count; i++) {
        dcptopk_key k = keys[i];
        size_t n = strnlen(k.arch, sizeof k.arch);
        if (n == 0)
            snprintf(k.arch, sizeof k.arch, "%s", ctx->arch);
        else if (n < sizeof k.arch)
            memset(k.arch + n, 0, sizeof k.arch - n);
        if (dcptopk_key_check(&k) != DCPTOPK_SUCCESS) {
            r = dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "keys[%zu]: %s", i,
                        dcptopk_last_error(NULL));
            goto done;
        }
        dcptopk_origin origin = DCPTOPK_ORIGIN_MEMORY;
        double compile_ms = 0.0, load_ms = 0.0;
        r = built && built[i]
                ? dc_rt_prepare_unit(ctx, &k, &units[i], &origin, &compile_ms,
                                     &load_ms)
                : dc_rt_prepare(ctx, &k, 0, &origin, &compile_ms, &load_ms);
        if (r)
            goto done;
        if (pre && pre[i] && origin != DCPTOPK_ORIGIN_COMPILED) {
            /* Compiled in phase one: reported (and counted) as compiled. */
            dc_rt_count_precompiled(ctx, origin == DCPTOPK_ORIGIN_CACHE);
            origin = DCPTOPK_ORIGIN_COMPILED;
            compile_ms = pre_ms[i];
        }
        s.keys++;
        switch (origin) {
        case DCPTOPK_ORIGIN_MEMORY:
            s.memory_hits++;
            break;
        case DCPTOPK_ORIGIN_CACHE:
            s.cache_hits++;
            break;
        case DCPTOPK_ORIGIN_COMPILED:
            s.compiled++;
            break;
        }
        s.compile_ms += compile_ms;
        s.load_ms += load_ms;
        if (progress)
            progress(user, &k,
                     origin, origin == DCPTOPK_ORIGIN_COMPILED ? compile_ms
                                                               : load_ms);
    }
    dc_rt_mark_warmed(ctx);
    if (ctx->config.strict)
        dc_rt_seal(ctx);
    dc_clear(ctx);
done:
    for (size_t i = 0; built && i < count; i++)
        if (built[i])
            dc_unit_free(&units[i]);
    free(units);
    free(flags);
    free(pre_ms);
    s.total_ms = dc_now_ms() - t0;
    stats_store(stats, &s);
    return r;
}

dcptopk_result dcptopk_warmup(dcptopk_context *ctx,
                              const dcptopk_merge_config *config,
                              dcptopk_progress_fn progress, void *user,
                              dcptopk_warmup_stats *stats)
{
    if (!ctx || !ctx->rt)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    dcptopk_result r =
        stats ? DC_STRUCT_OUT(ctx, "stats", stats, WARMUP_STATS)
              : DCPTOPK_SUCCESS;
    if (r)
        return r;
    dcptopk_merge_config c;
    dcptopk_key keys[DC_CONFIG_MAX_KEYS];
    dc_key_list l = {.keys = keys, .cap = DC_CONFIG_MAX_KEYS};
    if ((r = dc_config_read(ctx, config, &c)) ||
        (r = dc_check_config(ctx, &c)) ||
        (r = dc_config_key_list(ctx, &c, 1, ctx->arch, &l)))
        return r;
    if (l.n > l.cap)
        return dc_fail(ctx, DCPTOPK_INTERNAL,
                       "config expands to %zu keys, more than %zu", l.n,
                       l.cap);
    return dcptopk_warmup_keys(ctx, keys, l.n, progress, user, stats);
}
