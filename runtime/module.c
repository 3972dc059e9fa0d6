/* module.c - the per-context runtime: the primary CUDA context, the compile
 * cache handle, and the module table (key -> CUmodule + its functions by
 * entry name), plus dc_launch. The device helpers of runtime.h are in
 * device.c; the struct both share is in module_int.h.
 *
 * Locking: `lock` (a rwlock) guards the table; a launch of a loaded key takes
 * it for reading only and touches neither NVRTC nor SQLite. `load_lock` (a
 * mutex) serialises every miss: the cache handle is single-threaded, and two
 * threads missing the same key must compile it once. Entries are never
 * removed before the context is destroyed, so a CUfunction read under the
 * read lock stays valid after it is released. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "driver.h"
#include "log.h"
#include "module_int.h"
#include "rt.h"
#include "runtime.h"
#include "settings.h"

#define DC_MAX_FUNCS 8
#define DC_SMEM_DEFAULT (48u * 1024u)

typedef struct dc_func {
    char name[96];
    CUfunction fn;
    uint32_t smem_max; /* dynamic shared memory opted in so far (load_lock) */
    uint32_t smem_static; /* static shared memory of the function           */
    /* The occupancy last asked (cfg->fill): CTAs an SM at occ_block
     * threads and occ_smem dynamic bytes; occ_ctas 0 = not asked yet. */
    uint32_t occ_block, occ_smem;
    int occ_ctas;
} dc_func;

typedef struct dc_module {
    dcptopk_key key;  /* normalised: arch set, bytes after its NUL zero      */
    CUmodule module;  /* NULL without a device (compiled and cached only)   */
    dc_func funcs[DC_MAX_FUNCS];
    int nfuncs;
} dc_module;


/* ------------------------------------------------------------ open/close */

/* A device attribute, 0 where the driver does not give it. */
static int attr_or_zero(const dc_cuda *cu, CUdevice_attribute a, CUdevice dev)
{
    int v = 0;
    return cu->cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
}

static dcptopk_result open_device(dcptopk_context *ctx, struct dc_runtime *rt)
{
    const char *why = NULL;
    const dc_cuda *cu = dc_cuda_get(&why);
    if (!cu)
        return dc_fail(ctx, DCPTOPK_NO_DEVICE,
                       "config->device = %d: %s. Use device = -1 with an "
                       "explicit arch to compile and cache without a GPU",
                       ctx->device, why ? why : "no CUDA device");
    if (ctx->device >= cu->device_count)
        return dc_fail(ctx, DCPTOPK_NO_DEVICE,
                       "config->device = %d: only %d CUDA device(s) (0..%d)",
                       ctx->device, cu->device_count, cu->device_count - 1);
    DC_CU(ctx, cu->cuDeviceGet(&rt->dev, ctx->device));
    DC_CU(ctx, cu->cuDeviceGetAttribute(
                   &rt->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                   rt->dev));
    DC_CU(ctx, cu->cuDeviceGetAttribute(
                   &rt->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                   rt->dev));
    if (rt->cc_major * 10 + rt->cc_minor < DC_ARCH_MIN)
        return dc_fail(ctx, DCPTOPK_UNSUPPORTED,
                       "config->device = %d: compute capability %d.%d; the "
                       "merge kernels need %d.%d or later (Hopper, Blackwell)",
                       ctx->device, rt->cc_major, rt->cc_minor,
                       DC_ARCH_MIN / 10, DC_ARCH_MIN % 10);
    DC_CU(ctx, cu->cuDeviceGetAttribute(
                   &rt->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                   rt->dev));
    DC_CU(ctx, cu->cuDeviceGetAttribute(
                   &rt->smem_optin,
                   CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                   rt->dev));
    DC_CU(ctx, cu->cuDeviceGetAttribute(
                   &rt->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, rt->dev));
    /* Clocks and bus for the launchers' bandwidth rules: best effort, a
     * device that does not report them keeps the default shapes. */
    rt->sm_khz = attr_or_zero(cu, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, rt->dev);
    rt->mem_khz =
        attr_or_zero(cu, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, rt->dev);
    rt->bus_bits =
        attr_or_zero(cu, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, rt->dev);
    DC_CU(ctx, cu->cuDevicePrimaryCtxRetain(&rt->cuctx, rt->dev));
    rt->cu = cu;
    if (!ctx->arch[0]) {
        /* Arch-specific features (wgmma, setmaxnreg, clusters' extras) need
         * the 'a' targets on Hopper and Blackwell datacenter parts. */
        int a = rt->cc_major == 9 || rt->cc_major == 10;
        snprintf(ctx->arch, sizeof ctx->arch, "sm_%d%d%s", rt->cc_major,
                 rt->cc_minor, a ? "a" : "");
    }
    return DCPTOPK_SUCCESS;
}

dcptopk_result dc_rt_open(dcptopk_context *ctx)
{
    struct dc_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "context runtime");
    pthread_rwlock_init(&rt->lock, NULL);
    pthread_mutex_init(&rt->load_lock, NULL);
    ctx->rt = rt;
    dcptopk_result r;
    if (ctx->device >= 0 && (r = open_device(ctx, rt)))
        return r;
    if (ctx->arch[0] && (r = dc_arch_check_merge(ctx, "config->arch", ctx->arch)))
        return r;
    if (!ctx->arch[0])
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "config->arch = NULL with config->device = -1: a "
                       "context without a device needs an explicit arch");
    dc_cache_open_mode mode = ctx->config.cache_mode == DCPTOPK_CACHE_OFF
                                  ? DC_CACHE_MEMORY
                              : ctx->config.cache_mode == DCPTOPK_CACHE_READONLY
                                  ? DC_CACHE_RO
                                  : DC_CACHE_RW;
    char err[1024] = "";
    r = dc_cache_open(ctx->cache_path[0] ? ctx->cache_path : NULL, mode,
                      &rt->cache, err, sizeof err);
    if (r)
        return dc_fail(ctx, r, "opening the compile cache %s: %s",
                       ctx->cache_path[0] ? ctx->cache_path : "(default)",
                       err);
    const char *path = dc_cache_path(rt->cache);
    snprintf(ctx->cache_path, sizeof ctx->cache_path, "%s", path ? path : "");
    return DCPTOPK_SUCCESS;
}

void dc_rt_close(dcptopk_context *ctx)
{
    struct dc_runtime *rt = ctx->rt;
    if (!rt)
        return;
    if (rt->cu && rt->cuctx) {
        CUcontext prev = NULL;
        rt->cu->cuCtxGetCurrent(&prev);
        rt->cu->cuCtxSetCurrent(rt->cuctx);
        for (size_t i = 0; i < rt->nmods; i++)
            if (rt->mods[i]->module)
                rt->cu->cuModuleUnload(rt->mods[i]->module);
        rt->cu->cuCtxSetCurrent(prev == rt->cuctx ? NULL : prev);
        rt->cu->cuDevicePrimaryCtxRelease(rt->dev);
    }
    for (size_t i = 0; i < rt->nmods; i++)
        free(rt->mods[i]);
    free(rt->mods);
    if (rt->cache)
        dc_cache_close(rt->cache);
    pthread_rwlock_destroy(&rt->lock);
    pthread_mutex_destroy(&rt->load_lock);
    free(rt);
    ctx->rt = NULL;
}

void dc_rt_seal(dcptopk_context *ctx)
{
    atomic_store(&ctx->rt->sealed, 1);
    atomic_store(&ctx->rt->warmed, 1);
}

void dc_rt_mark_warmed(dcptopk_context *ctx)
{
    atomic_store(&ctx->rt->warmed, 1);
}

void dc_rt_stats(const dcptopk_context *ctx, dcptopk_context_stats *out)
{
    struct dc_runtime *rt = ctx->rt;
    out->launches = atomic_load(&rt->launches);
    out->compiles = atomic_load(&rt->compiles);
    out->cache_hits = atomic_load(&rt->cache_hits);
    out->late_compiles = atomic_load(&rt->late_compiles);
    out->late_loads = atomic_load(&rt->late_loads);
    pthread_rwlock_rdlock(&rt->lock);
    out->modules = rt->nmods;
    pthread_rwlock_unlock(&rt->lock);
}

/* ----------------------------------------------------------- the table */

static void key_normalise(const dcptopk_context *ctx, const dcptopk_key *in,
                          dcptopk_key *out)
{
    *out = *in;
    size_t n = strnlen(out->arch, sizeof out->arch);
    if (n == 0) {
        snprintf(out->arch, sizeof out->arch, "%s", ctx->arch);
        n = strlen(out->arch);
    }
    if (n < sizeof out->arch)
        memset(out->arch + n, 0, sizeof out->arch - n);
}

/* Caller holds rt->lock. */
static dc_module *table_find(const struct dc_runtime *rt,
                             const dcptopk_key *key)
{
    for (size_t i = 0; i < rt->nmods; i++)
        if (memcmp(&rt->mods[i]->key, key, sizeof *key) == 0)
            return rt->mods[i];
    return NULL;
}

/* A compile through the cache. The job owns its output until its caller
 * frees it (dc_compiled_free), after the cache has stored it and the module
 * is loaded, so the cache needs no release callback. */
typedef struct compile_job {
    const dc_unit *u;
    dc_compiled out;
    /* Set: a cache miss is refused with this key text in the message
     * instead of compiled (a launch inside CUDA graph capture). */
    const char *refuse;
} compile_job;

static dcptopk_result job_compile(void *user, dc_cache_blobs *b, char *err,
                                  size_t err_size)
{
    compile_job *job = user;
    if (job->refuse) {
        snprintf(err, err_size,
                 "kernel %s is not loaded and its stream is capturing a CUDA "
                 "graph: compiling it there would stall the capture for "
                 "seconds. Warm its config up before capture (dcptopk_warmup, "
                 "Context.warmup), or set DCPTOPK_CAPTURE_COMPILE=1 to allow "
                 "it",
                 job->refuse);
        return DCPTOPK_NOT_WARMED;
    }
    dc_compiled_free(&job->out);
    dcptopk_result r = dc_nvrtc_compile(job->u, &job->out, err, err_size);
    if (r)
        return r;
    b->cubin = job->out.cubin;
    b->cubin_size = job->out.cubin_size;
    b->ptx = job->out.ptx;
    b->ptx_size = job->out.ptx_size;
    b->source = job->u->source;
    b->source_size = job->u->source_size;
    b->compile_ms = job->out.compile_ms;
    return DCPTOPK_SUCCESS;
}

static dcptopk_result load_module(dcptopk_context *ctx, const void *image,
                                  CUmodule *mod, const char *key_text)
{
    struct dc_runtime *rt = ctx->rt;
    char log[4096] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = rt->cu->cuModuleLoadDataEx(mod, image, 2, opts, vals);
    if (r != CUDA_SUCCESS) {
        char call[400];
        snprintf(call, sizeof call, "cuModuleLoadDataEx(%s)", key_text);
        dc_cu_fail(ctx, r, call);
        if (log[0]) {
            dc_fail_append(ctx, "\nloader log:\n");
            dc_fail_append(ctx, log);
        }
        return DCPTOPK_CUDA_ERROR;
    }
    return DCPTOPK_SUCCESS;
}

/* prepare's middle phase: the cubin of `up` from the cache or NVRTC, loaded
 * into m->module when the context has a device. A cached cubin the driver
 * refuses is dropped and compiled once more. On failure the error is in ctx;
 * the caller frees hit, job and m either way. */
static dcptopk_result fetch_and_load(dcptopk_context *ctx, const dc_unit *up,
                                     const char *key_text, dc_module *m,
                                     compile_job *job, dc_cache_hit *hit,
                                     char *err, dcptopk_origin *origin,
                                     double *compile_ms, double *load_ms)
{
    struct dc_runtime *rt = ctx->rt;
    dcptopk_result r;
    dc_cache_meta meta = {up->info->name, up->fields, m->key.arch,
                          up->nvrtc_version, dcptopk_version_string()};
    for (int attempt = 0;; attempt++) {
        int compiled = 0;
        err[0] = '\0';
        r = dc_cache_get_or_compile(rt->cache, up->hash, &meta, job_compile,
                                    NULL, job, hit, &compiled, err,
                                    DC_ERR_LEN);
        if (r)
            return dc_fail(ctx, r, "%s",
                           err[0] ? err : "compile cache failed");
        if (compiled) {
            atomic_fetch_add(&rt->compiles, 1);
            if (compile_ms)
                *compile_ms = job->out.compile_ms;
        } else {
            atomic_fetch_add(&rt->cache_hits, 1);
        }
        if (origin)
            *origin = compiled ? DCPTOPK_ORIGIN_COMPILED : DCPTOPK_ORIGIN_CACHE;
        const void *image = hit->cubin ? hit->cubin : job->out.cubin;
        if (!image)
            return dc_fail(ctx, DCPTOPK_INTERNAL,
                           "the cache returned no cubin for %s", key_text);
        if (!rt->cu)
            return DCPTOPK_SUCCESS; /* no device: compiled and cached only */
        CUcontext cur = NULL;
        rt->cu->cuCtxGetCurrent(&cur);
        if (cur != rt->cuctx && (r = dc_ctx_enter(ctx)) != DCPTOPK_SUCCESS)
            return r;
        double t0 = dc_now_ms();
        r = load_module(ctx, image, &m->module, key_text);
        if (load_ms)
            *load_ms = dc_now_ms() - t0;
        if (r == DCPTOPK_SUCCESS || compiled || attempt > 0)
            return r;
        /* A cached cubin the driver refuses (a corrupted or foreign entry
         * that passed its checksum): drop it and compile once more. */
        dc_log_warn("%s: the cached cubin failed to load (%s); recompiling",
                    key_text, dcptopk_last_error(ctx));
        dc_cache_invalidate(rt->cache, up->hash);
        dc_cache_hit_free(hit);
        memset(hit, 0, sizeof *hit);
    }
}

/* prepare's last phase: publishes `m` under the write lock. On success the
 * table owns it. */
static dcptopk_result table_add(dcptopk_context *ctx, dc_module *m)
{
    struct dc_runtime *rt = ctx->rt;
    pthread_rwlock_wrlock(&rt->lock);
    if (rt->nmods == rt->cap) {
        size_t cap = rt->cap ? rt->cap * 2 : 16;
        dc_module **mods = realloc(rt->mods, cap * sizeof *mods);
        if (!mods) {
            pthread_rwlock_unlock(&rt->lock);
            return dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "module table");
        }
        rt->mods = mods;
        rt->cap = cap;
    }
    rt->mods[rt->nmods++] = m;
    pthread_rwlock_unlock(&rt->lock);
    return DCPTOPK_SUCCESS;
}

/* dc_rt_prepare, with the unit of `key` when the caller built it already
 * (pre, not freed here; NULL: built here). */
static dcptopk_result prepare(dcptopk_context *ctx, const dcptopk_key *key,
                              const dc_unit *pre, int for_launch,
                              int capturing, dcptopk_origin *origin,
                              double *compile_ms, double *load_ms)
{
    struct dc_runtime *rt = ctx->rt;
    dcptopk_key k;
    key_normalise(ctx, key, &k);
    if (origin)
        *origin = DCPTOPK_ORIGIN_MEMORY;
    if (compile_ms)
        *compile_ms = 0.0;
    if (load_ms)
        *load_ms = 0.0;

    pthread_mutex_lock(&rt->load_lock);
    pthread_rwlock_rdlock(&rt->lock);
    dc_module *found = table_find(rt, &k);
    pthread_rwlock_unlock(&rt->lock);
    if (found) {
        pthread_mutex_unlock(&rt->load_lock);
        return DCPTOPK_SUCCESS;
    }

    char key_text[320];
    dcptopk_key_format(&k, key_text, sizeof key_text);
    dcptopk_result r = DCPTOPK_SUCCESS;
    dc_unit own;
    memset(&own, 0, sizeof own);
    const dc_unit *up = pre;
    compile_job job;
    memset(&job, 0, sizeof job);
    dc_cache_hit hit;
    memset(&hit, 0, sizeof hit);
    char *err = NULL;
    dc_module *m = NULL;

    if (for_launch && ctx->config.strict && atomic_load(&rt->sealed)) {
        r = dc_fail(ctx, DCPTOPK_NOT_WARMED,
                    "strict mode: kernel %s was not loaded by warmup (the "
                    "context is sealed); add its config to the warmup",
                    key_text);
        goto out;
    }
    if (dcptopk_key_check(&k) != DCPTOPK_SUCCESS) {
        r = dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT, "%s",
                    dcptopk_last_error(NULL));
        goto out;
    }
    if (!up) {
        if ((r = dc_unit_build(ctx, &k, &own)))
            goto out;
        up = &own;
    }
    err = malloc(DC_ERR_LEN);
    m = calloc(1, sizeof *m);
    if (!err || !m) {
        r = dc_fail(ctx, DCPTOPK_OUT_OF_MEMORY, "loading %s", key_text);
        goto out;
    }
    m->key = k;
    job.u = up;
    if (capturing && !dc_setting_int(DC_SET_CAPTURE_COMPILE))
        job.refuse = key_text;
    dcptopk_origin got = DCPTOPK_ORIGIN_MEMORY;
    double got_ms = 0.0;
    if ((r = fetch_and_load(ctx, up, key_text, m, &job, &hit, err, &got,
                            &got_ms, load_ms)))
        goto out;
    if (origin)
        *origin = got;
    if (compile_ms)
        *compile_ms = got_ms;
    if (for_launch && atomic_load(&rt->warmed)) {
        int compiled = got == DCPTOPK_ORIGIN_COMPILED;
        atomic_fetch_add(compiled ? &rt->late_compiles : &rt->late_loads, 1);
        dc_log_warn("kernel %s was %s after warmup%s: add its config to the "
                    "warmup",
                    key_text, compiled ? "compiled" : "loaded from the cache",
                    capturing ? ", inside CUDA graph capture" : "");
    }
    if ((r = table_add(ctx, m)))
        goto out;
    m = NULL;

out:
    if (m) {
        if (m->module)
            rt->cu->cuModuleUnload(m->module);
        free(m);
    }
    dc_cache_hit_free(&hit);
    dc_compiled_free(&job.out);
    dc_unit_free(&own);
    free(err);
    pthread_mutex_unlock(&rt->load_lock);
    return r;
}

dcptopk_result dc_rt_prepare(dcptopk_context *ctx, const dcptopk_key *key,
                             int for_launch, dcptopk_origin *origin,
                             double *compile_ms, double *load_ms)
{
    return prepare(ctx, key, NULL, for_launch, 0, origin, compile_ms,
                   load_ms);
}

dcptopk_result dc_rt_prepare_unit(dcptopk_context *ctx, const dcptopk_key *key,
                                  const dc_unit *unit, dcptopk_origin *origin,
                                  double *compile_ms, double *load_ms)
{
    return prepare(ctx, key, unit, 0, 0, origin, compile_ms, load_ms);
}

/* ------------------------------------------------ parallel precompile */

typedef struct pre_item {
    const dc_unit *u;
    dc_cache_meta meta;
    int compiled;
    double ms;
} pre_item;

typedef struct pre_pool {
    pre_item *items;
    size_t n;
    atomic_size_t next;
    const char *path;
} pre_pool;

static void *pre_worker(void *arg)
{
    pre_pool *pool = arg;
    char *err = malloc(DC_ERR_LEN);
    dc_cache *cache = NULL;
    if (!err || dc_cache_open(pool->path, DC_CACHE_RW, &cache, err,
                              DC_ERR_LEN) != DCPTOPK_SUCCESS) {
        free(err);
        return NULL;
    }
    /* A file that opened read-only or in memory here helps nobody. */
    if (!dc_cache_is_memory(cache) && !dc_cache_is_readonly(cache)) {
        for (;;) {
            size_t i = atomic_fetch_add(&pool->next, 1);
            if (i >= pool->n)
                break;
            pre_item *it = &pool->items[i];
            /* Stored meanwhile by another process: the serial phase reads
             * it; reading it here too would only copy the blob twice. */
            if (dc_cache_contains(cache, it->u->hash))
                continue;
            compile_job job;
            memset(&job, 0, sizeof job);
            job.u = it->u;
            dc_cache_hit hit;
            memset(&hit, 0, sizeof hit);
            int compiled = 0;
            err[0] = '\0';
            if (dc_cache_get_or_compile(cache, it->u->hash, &it->meta,
                                        job_compile, NULL, &job, &hit,
                                        &compiled, err,
                                        DC_ERR_LEN) == DCPTOPK_SUCCESS &&
                compiled) {
                it->compiled = 1;
                it->ms = job.out.compile_ms;
            }
            dc_cache_hit_free(&hit);
            dc_compiled_free(&job.out);
        }
    }
    dc_cache_close(cache);
    free(err);
    return NULL;
}

void dc_rt_precompile(dcptopk_context *ctx, const dcptopk_key *keys,
                      size_t count, int threads, dc_unit *units,
                      unsigned char *built, unsigned char *compiled,
                      double *ms)
{
    struct dc_runtime *rt = ctx->rt;
    for (size_t i = 0; i < count; i++) {
        built[i] = 0;
        compiled[i] = 0;
        ms[i] = 0.0;
    }
    const char *path = rt->cache ? dc_cache_path(rt->cache) : NULL;
    if (threads < 2 || count < 2 || !path || !path[0] ||
        dc_cache_is_memory(rt->cache) || dc_cache_is_readonly(rt->cache))
        return;
    for (size_t i = 0; i < count; i++) {
        dcptopk_key k;
        key_normalise(ctx, &keys[i], &k);
        if (dcptopk_key_check(&k) != DCPTOPK_SUCCESS)
            return; /* the serial phase names it; compile nothing early */
    }
    pre_item *items = calloc(count, sizeof *items);
    size_t *index = calloc(count, sizeof *index); /* item -> keys[] index */
    if (!items || !index) {
        free(items);
        free(index);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        dcptopk_key k;
        key_normalise(ctx, &keys[i], &k);
        pthread_rwlock_rdlock(&rt->lock);
        int loaded = table_find(rt, &k) != NULL;
        pthread_rwlock_unlock(&rt->lock);
        int repeat = 0;
        for (size_t j = 0; j < i && !repeat; j++)
            repeat = built[j] && memcmp(&units[j].key, &k, sizeof k) == 0;
        if (loaded || repeat)
            continue;
        if (dc_unit_build(ctx, &k, &units[i]) != DCPTOPK_SUCCESS) {
            dc_unit_free(&units[i]);
            memset(&units[i], 0, sizeof units[i]);
            continue;
        }
        built[i] = 1;
        /* A warm start stops here: one lookup per key, no blob read. */
        if (dc_cache_contains(rt->cache, units[i].hash))
            continue;
        dc_cache_meta meta = {units[i].info->name, units[i].fields,
                              units[i].key.arch, units[i].nvrtc_version,
                              dcptopk_version_string()};
        items[n].u = &units[i];
        items[n].meta = meta;
        index[n++] = i;
    }
    if (n >= 2) {
        pre_pool pool;
        pool.items = items;
        pool.n = n;
        atomic_init(&pool.next, 0);
        pool.path = path;
        size_t nt = (size_t)threads < n ? (size_t)threads : n;
        pthread_t th[64];
        if (nt > sizeof th / sizeof th[0])
            nt = sizeof th / sizeof th[0];
        size_t started = 0;
        for (; started < nt; started++)
            if (pthread_create(&th[started], NULL, pre_worker, &pool) != 0)
                break;
        if (started == 0)
            pre_worker(&pool); /* no thread: this one does the work */
        for (size_t t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        for (size_t j = 0; j < n; j++) {
            compiled[index[j]] = (unsigned char)items[j].compiled;
            ms[index[j]] = items[j].ms;
        }
    }
    free(items);
    free(index);
}

void dc_rt_count_precompiled(dcptopk_context *ctx, int cache_hit)
{
    atomic_fetch_add(&ctx->rt->compiles, 1);
    if (cache_hit)
        atomic_fetch_sub(&ctx->rt->cache_hits, 1);
}

/* The resolved function `entry` of m, or NULL; under rt->lock. */
static dc_func *func_named(dc_module *m, const char *entry)
{
    for (int i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i].name, entry) == 0)
            return &m->funcs[i];
    return NULL;
}

/* CTAs of `entry` an SM holds with `block` threads and `smem` dynamic
 * bytes, from the driver once per function and size (persistent grids). */
static dcptopk_result func_occupancy(dcptopk_context *ctx, dc_module *m,
                                     const char *entry, CUfunction fn,
                                     uint32_t block, uint32_t smem, int *ctas)
{
    struct dc_runtime *rt = ctx->rt;
    dc_func *f = NULL;
    *ctas = 0;
    pthread_rwlock_rdlock(&rt->lock);
    f = func_named(m, entry);
    if (f && f->occ_ctas > 0 && f->occ_block == block && f->occ_smem == smem)
        *ctas = f->occ_ctas;
    pthread_rwlock_unlock(&rt->lock);
    if (*ctas > 0)
        return DCPTOPK_SUCCESS;
    int n = 0;
    CUresult cr = rt->cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &n, fn, (int)block, (size_t)smem);
    if (cr != CUDA_SUCCESS)
        return dc_cu_fail(ctx, cr, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (n < 1)
        return dc_fail(ctx, DCPTOPK_INTERNAL,
                       "\"%s\" fits no CTA of %u threads and %u bytes of "
                       "shared memory on an SM",
                       entry, block, smem);
    pthread_rwlock_wrlock(&rt->lock);
    if (f) {
        f->occ_block = block;
        f->occ_smem = smem;
        f->occ_ctas = n;
    }
    pthread_rwlock_unlock(&rt->lock);
    *ctas = n;
    return DCPTOPK_SUCCESS;
}

/* Function `entry` of the loaded key k: cheap path under the read lock.
 * *mod is the key's module whether or not the function was resolved. */
static int func_find(struct dc_runtime *rt, const dcptopk_key *k,
                     const char *entry, CUfunction *fn, uint32_t *smem_max,
                     dc_module **mod)
{
    pthread_rwlock_rdlock(&rt->lock);
    dc_module *m = table_find(rt, k);
    const dc_func *f = m ? func_named(m, entry) : NULL;
    *mod = m;
    if (f) {
        *fn = f->fn;
        *smem_max = f->smem_max;
    }
    pthread_rwlock_unlock(&rt->lock);
    return f != NULL;
}

/* Resolves `entry` in a loaded module and/or raises its shared memory
 * opt-in; under load_lock (rare). */
static dcptopk_result func_resolve(dcptopk_context *ctx, dc_module *m,
                                   const char *entry, uint32_t smem,
                                   CUfunction *fn)
{
    struct dc_runtime *rt = ctx->rt;
    dcptopk_result r = DCPTOPK_SUCCESS;
    pthread_mutex_lock(&rt->load_lock);
    pthread_rwlock_rdlock(&rt->lock);
    dc_func *f = func_named(m, entry);
    pthread_rwlock_unlock(&rt->lock);
    if (!f) {
        char key_text[320];
        dcptopk_key_format(&m->key, key_text, sizeof key_text);
        if (m->nfuncs == DC_MAX_FUNCS || strlen(entry) >= sizeof f->name) {
            r = dc_fail(ctx, DCPTOPK_INTERNAL,
                        "entry = \"%s\" of %s: too many entries or name too "
                        "long",
                        entry, key_text);
            goto out;
        }
        CUfunction got = NULL;
        CUresult cr = rt->cu->cuModuleGetFunction(&got, m->module, entry);
        if (cr != CUDA_SUCCESS) {
            char call[512];
            snprintf(call, sizeof call,
                     "cuModuleGetFunction(entry = \"%s\", %s)", entry,
                     key_text);
            r = dc_cu_fail(ctx, cr, call);
            goto out;
        }
        pthread_rwlock_wrlock(&rt->lock);
        f = &m->funcs[m->nfuncs];
        snprintf(f->name, sizeof f->name, "%s", entry);
        f->fn = got;
        /* Without the opt-in, static plus dynamic shared memory must stay
         * within 48 KiB, so a kernel with static shared memory needs the
         * attribute for a smaller dynamic size (CUDA Programming Guide,
         * "Shared Memory" of compute capability 7.x and later). */
        int static_smem = 0;
        if (rt->cu->cuFuncGetAttribute(&static_smem,
                                       CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                       got) != CUDA_SUCCESS)
            static_smem = 0;
        f->smem_static = static_smem > 0 ? (uint32_t)static_smem : 0u;
        f->smem_max = f->smem_static < DC_SMEM_DEFAULT
                          ? DC_SMEM_DEFAULT - f->smem_static
                          : 0u;
        m->nfuncs++;
        pthread_rwlock_unlock(&rt->lock);
    }
    if (smem > f->smem_max) {
        if (rt->smem_optin > 0 &&
            (uint64_t)smem + f->smem_static > (uint64_t)rt->smem_optin) {
            r = dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                        "cfg->smem_bytes = %u for \"%s\" (plus %u bytes of "
                        "static shared memory): the device allows at most %d "
                        "bytes per block",
                        smem, entry, f->smem_static, rt->smem_optin);
            goto out;
        }
        CUresult cr = rt->cu->cuFuncSetAttribute(
            f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
        if (cr != CUDA_SUCCESS) {
            r = dc_cu_fail(ctx, cr,
                           "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
            goto out;
        }
        pthread_rwlock_wrlock(&rt->lock);
        f->smem_max = smem;
        pthread_rwlock_unlock(&rt->lock);
    }
    *fn = f->fn;
out:
    pthread_mutex_unlock(&rt->load_lock);
    return r;
}

/* Whether cfg's stream is capturing a graph; a failed query counts as
 * not capturing (the launch then reports the stream's error itself). */
static int stream_capturing(const struct dc_runtime *rt,
                            const dc_launch_cfg *cfg)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (rt->cu->cuStreamIsCapturing((CUstream)cfg->stream, &cs) !=
        CUDA_SUCCESS)
        return 0;
    return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

dcptopk_result dc_launch(dcptopk_context *ctx, const dcptopk_key *key,
                         const char *entry, const dc_launch_cfg *cfg,
                         void **params)
{
    if (!ctx || !ctx->rt)
        return dc_fail(NULL, DCPTOPK_INVALID_ARGUMENT, "ctx is NULL");
    if (!key || !entry || !cfg)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "dc_launch: key, entry and cfg are required (key %p, "
                       "entry %p, cfg %p)",
                       (const void *)key, (const void *)entry,
                       (const void *)cfg);
    struct dc_runtime *rt = ctx->rt;
    if (!rt->cu) {
        /* A sealed strict context names the missing key first: that is the
         * error a deployment check wants to see, device or not. */
        dcptopk_key k;
        key_normalise(ctx, key, &k);
        pthread_rwlock_rdlock(&rt->lock);
        dc_module *m = table_find(rt, &k);
        pthread_rwlock_unlock(&rt->lock);
        if (!m && ctx->config.strict && atomic_load(&rt->sealed)) {
            char key_text[320];
            dcptopk_key_format(&k, key_text, sizeof key_text);
            return dc_fail(ctx, DCPTOPK_NOT_WARMED,
                           "strict mode: kernel %s was not loaded by warmup "
                           "(the context is sealed); add its config to the "
                           "warmup",
                           key_text);
        }
        return dc_fail(ctx, DCPTOPK_NO_DEVICE,
                       "this context has no device (config->device = -1): it "
                       "compiles and caches but cannot launch");
    }
    for (int i = 0; i < 3; i++)
        if (cfg->grid[i] == 0 || cfg->block[i] == 0)
            return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                           "cfg->grid = {%u, %u, %u}, cfg->block = {%u, %u, "
                           "%u}: every dimension must be >= 1",
                           cfg->grid[0], cfg->grid[1], cfg->grid[2],
                           cfg->block[0], cfg->block[1], cfg->block[2]);
    if (cfg->cluster_x > 1 && cfg->grid[0] % cfg->cluster_x != 0)
        return dc_fail(ctx, DCPTOPK_INVALID_ARGUMENT,
                       "cfg->cluster_x = %u: must divide cfg->grid[0] = %u",
                       cfg->cluster_x, cfg->grid[0]);
    dcptopk_key k;
    key_normalise(ctx, key, &k);
    dcptopk_result r = dc_ctx_enter(ctx);
    if (r)
        return r;

    CUfunction fn = NULL;
    uint32_t smem_max = 0;
    dc_module *m = NULL;
    if (!func_find(rt, &k, entry, &fn, &smem_max, &m) ||
        cfg->smem_bytes > smem_max) {
        if (!m) {
            if ((r = prepare(ctx, &k, NULL, 1, stream_capturing(rt, cfg),
                             NULL, NULL, NULL)))
                return r;
            pthread_rwlock_rdlock(&rt->lock);
            m = table_find(rt, &k);
            pthread_rwlock_unlock(&rt->lock);
            if (!m)
                return dc_fail(ctx, DCPTOPK_INTERNAL,
                               "module missing after its load");
        }
        if ((r = func_resolve(ctx, m, entry, cfg->smem_bytes, &fn)))
            return r;
    }

    uint32_t grid_x = cfg->grid[0];
    if (cfg->fill) {
        /* m is the key's module here: found above, or loaded. */
        int ctas = 0;
        if ((r = func_occupancy(ctx, m, entry, fn,
                                cfg->block[0] * cfg->block[1] * cfg->block[2],
                                cfg->smem_bytes, &ctas)))
            return r;
        const uint64_t cap = (uint64_t)(rt->sm_count > 0 ? rt->sm_count : 1) *
                             (uint64_t)ctas;
        if ((uint64_t)grid_x > cap)
            grid_x = (uint32_t)cap;
    }

    CUresult cr;
    /* The kernels' dependent-launch instructions exist from sm_90 on. */
    const int pdl = cfg->pdl && !atomic_load(&rt->pdl_off) &&
                    strncmp(k.arch, "sm_", 3) == 0 && atoi(k.arch + 3) >= 90;
    if (cfg->cluster_x > 1 || pdl) {
        CUlaunchAttribute attr[2];
        unsigned n_attr = 0;
        memset(attr, 0, sizeof attr);
        if (cfg->cluster_x > 1) {
            attr[n_attr].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attr[n_attr].value.clusterDim.x = cfg->cluster_x;
            attr[n_attr].value.clusterDim.y = 1;
            attr[n_attr].value.clusterDim.z = 1;
            n_attr++;
        }
        if (pdl) {
            attr[n_attr].id =
                CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr[n_attr].value.programmaticStreamSerializationAllowed = 1;
            n_attr++;
        }
        CUlaunchConfig lc;
        memset(&lc, 0, sizeof lc);
        lc.gridDimX = grid_x;
        lc.gridDimY = cfg->grid[1];
        lc.gridDimZ = cfg->grid[2];
        lc.blockDimX = cfg->block[0];
        lc.blockDimY = cfg->block[1];
        lc.blockDimZ = cfg->block[2];
        lc.sharedMemBytes = cfg->smem_bytes;
        lc.hStream = (CUstream)cfg->stream;
        lc.attrs = attr;
        lc.numAttrs = n_attr;
        cr = rt->cu->cuLaunchKernelEx(&lc, fn, params, NULL);
    } else {
        cr = rt->cu->cuLaunchKernel(fn, grid_x, cfg->grid[1],
                                    cfg->grid[2], cfg->block[0], cfg->block[1],
                                    cfg->block[2], cfg->smem_bytes,
                                    (CUstream)cfg->stream, params, NULL);
    }
    if (cr != CUDA_SUCCESS) {
        char key_text[320], call[600];
        dcptopk_key_format(&k, key_text, sizeof key_text);
        snprintf(call, sizeof call,
                 "%s(%s \"%s\", grid {%u,%u,%u}, block {%u,%u,%u}, smem %u, "
                 "cluster %u)",
                 cfg->cluster_x > 1 || pdl ? "cuLaunchKernelEx"
                                           : "cuLaunchKernel",
                 key_text, entry, grid_x, cfg->grid[1], cfg->grid[2],
                 cfg->block[0], cfg->block[1], cfg->block[2], cfg->smem_bytes,
                 cfg->cluster_x);
        return dc_cu_fail(ctx, cr, call);
    }
    atomic_fetch_add(&rt->launches, 1);
    return DCPTOPK_SUCCESS;
}
