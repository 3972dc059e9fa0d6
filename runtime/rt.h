/*
 * rt.h - private interface of runtime/ (render, NVRTC, module table) used by
 * src/context.c and src/warmup.c. Users of kernels go through runtime.h.
 */
#ifndef DCPTOPK_RT_H
#define DCPTOPK_RT_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "cache.h"

/* ------------------------------------------------------------- rendering */

/* One source file: a template or a header (name = file name, no folder). */
typedef struct dc_source {
    const char *name;
    const char *data;
    size_t size;
} dc_source;

/* Everything that defines a compiled binary, in the order it is hashed. The
 * cache key is dc_unit_hash() of this; never a path, pid or time. */
typedef struct dc_hash_input {
    const char *kernel;        /* registry name, e.g. "select"               */
    const char *entry;         /* template file name, e.g. "select.cu"       */
    const char *template_text;
    size_t template_size;
    const dc_source *headers;  /* those the template includes, by name      */
    size_t header_count;
    const char *prelude;       /* the rendered #defines                      */
    const char *const *options;/* the full NVRTC option list, in order       */
    size_t option_count;
    int nvrtc_major;
    int nvrtc_minor;
    const char *arch;          /* "sm_90a"                                   */
} dc_hash_input;

/* The canonical serialisation of a compile unit through dc_hasher (tested by
 * tests/cpu/test_golden_keys.c: change it only with DC_CACHE_SCHEMA_VERSION). */
DC_HIDDEN dc_hash dc_unit_hash(const dc_hash_input *in);

#define DC_MAX_OPTIONS 8
/* The folder NVRTC is told the templates live in (no real folder): an
 * absolute name keeps the working directory out of the cubin. */
#define DC_NVRTC_TEMPLATE_ROOT "/dcptopk/templates/"

/* A rendered key, ready for NVRTC and the cache. */
typedef struct dc_unit {
    dcptopk_key key;
    const dc_kernel_info *info;
    char *prelude;            /* malloc'd                                    */
    char *source;             /* malloc'd: prelude + #line + template        */
    size_t source_size;
    dc_source tmpl;           /* the template                                */
    dc_source *headers;       /* malloc'd array                              */
    size_t header_count;
    char **owned_list;        /* buffers read from DCPTOPK_TEMPLATE_DIR      */
    size_t owned_count;
    const char *options[DC_MAX_OPTIONS];
    size_t option_count;
    char arch_option[48];
    int nvrtc_major;
    int nvrtc_minor;
    char fields[256];         /* "topk=2048,..." for cache metadata          */
    char nvrtc_version[16];   /* "13.0"                                      */
    dc_hash hash;
} dc_unit;

/* Renders `key` (arch must be set) from the embedded templates, or from
 * $DCPTOPK_TEMPLATE_DIR when set, and computes its cache key. Errors go to
 * ctx (NULL: the thread slot). Free with dc_unit_free (also after failure). */
DC_HIDDEN dcptopk_result dc_unit_build(const dcptopk_context *ctx,
                                       const dcptopk_key *key, dc_unit *u);
DC_HIDDEN void dc_unit_free(dc_unit *u);

/* ------------------------------------------------------------------ NVRTC */

/* The loaded NVRTC's version (major.minor); -1.-1 when none loads. */
DC_HIDDEN void dc_nvrtc_version(int *major, int *minor);
/* The file NVRTC was loaded from into buf; "" when none loads. */
DC_HIDDEN void dc_nvrtc_path(char *buf, size_t size);
/* Fills the option list of `arch` into u->options. */
DC_HIDDEN void dc_nvrtc_options(dc_unit *u);

/* Result of a compile: malloc'd cubin and PTX. */
typedef struct dc_compiled {
    void *cubin;
    size_t cubin_size;
    char *ptx;
    size_t ptx_size;
    double compile_ms;
} dc_compiled;

/* Compiles u->source. On failure: DCPTOPK_NVRTC_ERROR (or OUT_OF_MEMORY) with
 * the NVRTC error and the full log in err. */
DC_HIDDEN dcptopk_result dc_nvrtc_compile(const dc_unit *u, dc_compiled *out,
                                          char *err, size_t err_size);
DC_HIDDEN void dc_compiled_free(dc_compiled *c);

/* ----------------------------------------------------------- module table */

/* Opens the runtime of a context: driver and primary context (device >= 0),
 * arch (ctx->arch filled when empty), cache. ctx->config, ctx->device and
 * ctx->cache_path (empty = default) are set by the caller. */
DC_HIDDEN dcptopk_result dc_rt_open(dcptopk_context *ctx);
DC_HIDDEN void dc_rt_close(dcptopk_context *ctx);
DC_HIDDEN void dc_rt_seal(dcptopk_context *ctx);
/* Marks the end of a warmup: later loads by a launch count as late. */
DC_HIDDEN void dc_rt_mark_warmed(dcptopk_context *ctx);
DC_HIDDEN void dc_rt_stats(const dcptopk_context *ctx,
                           dcptopk_context_stats *out);

/* Makes `key` ready in the context: a hit in the module table, else the cache
 * or a compile, then a module load (no load without a device). `key` has been
 * checked and its arch is set. *origin and *ms (compile or load time) may be
 * NULL. `for_launch`: refuse with DCPTOPK_NOT_WARMED when sealed and strict. */
DC_HIDDEN dcptopk_result dc_rt_prepare(dcptopk_context *ctx,
                                       const dcptopk_key *key, int for_launch,
                                       dcptopk_origin *origin,
                                       double *compile_ms, double *load_ms);

/* dc_rt_prepare (not for a launch) with the key's unit already built. */
DC_HIDDEN dcptopk_result dc_rt_prepare_unit(dcptopk_context *ctx,
                                            const dcptopk_key *key,
                                            const dc_unit *unit,
                                            dcptopk_origin *origin,
                                            double *compile_ms,
                                            double *load_ms);

/* Warmup's first phase: builds the unit of every key of keys[0..count) that
 * is not loaded (units[i], built[i] = 1; the caller frees them with
 * dc_unit_free and passes them to dc_rt_prepare_unit), then compiles, on up
 * to `threads` threads, those missing from the cache into the cache file
 * (one SQLite connection per thread; threads of a process, like processes,
 * compile a key once through the claim protocol). Sets compiled[i] = 1 and
 * ms[i] for the keys it compiled. Best effort and silent: a key it could not
 * build, compile or store is left to the serial phase, which reports it.
 * Does nothing without a writable cache file, with fewer than two keys,
 * with threads < 2, or when a key fails its check. */
DC_HIDDEN void dc_rt_precompile(dcptopk_context *ctx, const dcptopk_key *keys,
                                size_t count, int threads, dc_unit *units,
                                unsigned char *built, unsigned char *compiled,
                                double *ms);
/* Counts a key compiled by dc_rt_precompile in the context's statistics; its
 * serial prepare found it in the cache (cache_hit = 1; that hit is taken
 * back) or in the module table (0). */
DC_HIDDEN void dc_rt_count_precompiled(dcptopk_context *ctx, int cache_hit);

/* Devices the driver sees; 0 without a usable driver (runtime/driver.c). */
DC_HIDDEN int32_t dc_rt_device_count(void);
/* The driver's version (cuDriverGetVersion; 0 when libcuda.so.1 did not
 * load or cuInit failed) and, when no device is usable, why (else NULL). */
DC_HIDDEN int32_t dc_rt_driver_version(const char **why);


#endif /* DCPTOPK_RT_H */
