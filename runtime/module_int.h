/*
 * module_int.h - the per-context runtime struct, shared by module.c (open,
 * close, the module table, launches) and device.c (the device helpers of
 * runtime.h). Nothing outside runtime/ includes it.
 */
#ifndef DCPTOPK_MODULE_INT_H
#define DCPTOPK_MODULE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "driver.h"
#include "rt.h"

typedef struct dc_module dc_module;

struct dc_runtime {
    const dc_cuda *cu;      /* NULL for device -1                           */
    CUdevice dev;
    CUcontext cuctx;
    int cc_major, cc_minor, sm_count, smem_optin, l2_bytes;
    int sm_khz, mem_khz, bus_bits; /* 0 where the driver does not say   */
    dc_cache *cache;
    pthread_rwlock_t lock;
    pthread_mutex_t load_lock;
    dc_module **mods;
    size_t nmods, cap;
    atomic_int sealed;
    atomic_int warmed;      /* a warmup finished, or the context was sealed */
    atomic_int pdl_off;     /* launches ignore cfg.pdl (benchmarks' A/B)    */
    atomic_uint_fast64_t launches, compiles, cache_hits;
    /* Kernels a launch had to load after `warmed`: what a JIT monitor
     * counts (a compile there stalls a step for seconds). */
    atomic_uint_fast64_t late_compiles, late_loads;
};

#endif /* DCPTOPK_MODULE_INT_H */
