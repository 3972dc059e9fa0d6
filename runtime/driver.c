/* driver.c - loads the CUDA Driver API at run time (see driver.h). The table
 * is process-wide state, written once under pthread_once and read-only after:
 * it is the only global of runtime/. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "rt.h"
#include "settings.h"

#define DC_SYM2(x) #x
#define DC_SYM(x) DC_SYM2(x) /* expands cuda.h's _v2 mapping first */

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static dc_cuda cuda_table;
static const dc_cuda *cuda_loaded; /* NULL: unusable, see cuda_why */
static char cuda_why[512];

static void dc_cuda_load(void)
{
    /* DCPTOPK_DISABLE_CUDA=1 simulates a machine without a driver (tests). */
    if (dc_setting_int(DC_SET_DISABLE_CUDA)) {
        snprintf(cuda_why, sizeof cuda_why,
                 "the CUDA driver is disabled by DCPTOPK_DISABLE_CUDA=%s",
                 dc_setting_text(DC_SET_DISABLE_CUDA));
        return;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(cuda_why, sizeof cuda_why,
                 "no CUDA driver: dlopen(\"libcuda.so.1\") failed: %s",
                 e ? e : "unknown error");
        return;
    }
#define DC_CU_LOAD(name)                                                       \
    do {                                                                       \
        void *dc_p_ = dlsym(lib, DC_SYM(name));                                \
        if (!dc_p_) {                                                          \
            snprintf(cuda_why, sizeof cuda_why,                                \
                     "the CUDA driver in libcuda.so.1 is too old: it lacks "   \
                     "%s",                                                     \
                     DC_SYM(name));                                            \
            return;                                                            \
        }                                                                      \
        /* POSIX guarantees a dlsym result converts to a function pointer. */ \
        memcpy(&cuda_table.name, &dc_p_, sizeof dc_p_);                        \
    } while (0);
    DC_CU_FUNCTIONS(DC_CU_LOAD)
#undef DC_CU_LOAD
    /* The library stays loaded for the life of the process (never dlclose'd:
     * other threads may hold function pointers into it). */
    CUresult r = cuda_table.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL, *str = NULL;
        cuda_table.cuGetErrorName(r, &name);
        cuda_table.cuGetErrorString(r, &str);
        snprintf(cuda_why, sizeof cuda_why,
                 "cuInit(0) failed: %s (%d): %s (no usable CUDA device)",
                 name ? name : "?", (int)r, str ? str : "?");
        return;
    }
    cuda_table.cuDriverGetVersion(&cuda_table.driver_version);
    int count = 0;
    r = cuda_table.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count <= 0) {
        snprintf(cuda_why, sizeof cuda_why,
                 "the CUDA driver reports no device (cuDeviceGetCount: %d, "
                 "count %d)",
                 (int)r, count);
        return;
    }
    cuda_table.device_count = count;
    cuda_loaded = &cuda_table;
}

const dc_cuda *dc_cuda_get(const char **why)
{
    pthread_once(&cuda_once, dc_cuda_load);
    if (!cuda_loaded && why)
        *why = cuda_why;
    return cuda_loaded;
}

int32_t dc_rt_device_count(void)
{
    const dc_cuda *cu = dc_cuda_get(NULL);
    return cu ? cu->device_count : 0;
}

int32_t dc_rt_driver_version(const char **why)
{
    /* The load records the version as soon as cuInit succeeded, also when
     * no device is found afterwards. */
    const dc_cuda *cu = dc_cuda_get(why);
    if (!cu)
        return cuda_table.driver_version;
    if (why)
        *why = NULL;
    return cu->driver_version;
}

dcptopk_result dc_cu_fail(const dcptopk_context *ctx, CUresult r,
                          const char *call)
{
    const char *name = NULL, *str = NULL;
    const dc_cuda *cu = dc_cuda_get(NULL);
    if (cu) {
        if (cu->cuGetErrorName(r, &name) != CUDA_SUCCESS)
            name = NULL;
        if (cu->cuGetErrorString(r, &str) != CUDA_SUCCESS)
            str = NULL;
    }
    return dc_fail(ctx, DCPTOPK_CUDA_ERROR, "%s failed: %s (%d): %s", call,
                   name ? name : "CUDA_ERROR_UNKNOWN", (int)r,
                   str ? str : "unknown CUDA error");
}
