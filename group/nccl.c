/* nccl.c - loads NCCL at run time (see nccl_table.h). The table is process-wide
 * state written once under pthread_once and read-only after, like the CUDA
 * driver's table (runtime/driver.c). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_table.h"
#include "settings.h"

static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static dc_nccl nccl_table;
static const dc_nccl *nccl_loaded; /* NULL: unusable, see nccl_why */
static char nccl_why[768];

static void dc_nccl_load(void)
{
    const char *file = dc_setting_text(DC_SET_NCCL_LIBRARY);
    if (!file)
        file = "libnccl.so.2";
    snprintf(nccl_table.path, sizeof nccl_table.path, "%s", file);
    void *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(nccl_why, sizeof nccl_why,
                 "dlopen(\"%s\") failed: %s (install NCCL, or point "
                 "DCPTOPK_NCCL_LIBRARY at libnccl.so.2)",
                 file, e ? e : "unknown error");
        return;
    }
#define DC_NCCL_LOAD(name)                                                     \
    do {                                                                       \
        void *dc_p_ = dlsym(lib, #name);                                       \
        if (!dc_p_) {                                                          \
            snprintf(nccl_why, sizeof nccl_why,                                \
                     "%s lacks %s: this NCCL is too old for dcptopk", file,        \
                     #name);                                                   \
            return;                                                            \
        }                                                                      \
        memcpy(&nccl_table.name, &dc_p_, sizeof dc_p_);                        \
    } while (0);
    DC_NCCL_FUNCTIONS(DC_NCCL_LOAD)
#undef DC_NCCL_LOAD
    /* Never dlclose'd: communicators and other threads may still use it. */
    int v = 0;
    if (nccl_table.ncclGetVersion(&v) != ncclSuccess || v <= 0) {
        snprintf(nccl_why, sizeof nccl_why,
                 "%s: ncclGetVersion failed (version %d)", file, v);
        return;
    }
    nccl_table.version = v;
    nccl_loaded = &nccl_table;
}

const dc_nccl *dc_nccl_get(const char **why)
{
    pthread_once(&nccl_once, dc_nccl_load);
    if (!nccl_loaded && why)
        *why = nccl_why;
    return nccl_loaded;
}

void dc_nccl_version_string(char *buf, size_t size)
{
    const dc_nccl *nc = dc_nccl_get(NULL);
    if (!nc) {
        snprintf(buf, size, "%s", "");
        return;
    }
    /* NCCL_VERSION(): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after. */
    int v = nc->version;
    if (v >= 10000)
        snprintf(buf, size, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    else
        snprintf(buf, size, "%d.%d.%d", v / 1000, (v / 100) % 10, v % 100);
}

dcptopk_result dc_nccl_fail(const dcptopk_context *ctx, ncclResult_t r,
                            ncclComm_t comm, const char *call)
{
    const dc_nccl *nc = dc_nccl_get(NULL);
    const char *str = nc ? nc->ncclGetErrorString(r) : NULL;
    const char *last = nc ? nc->ncclGetLastError(comm) : NULL;
    return dc_fail(ctx, DCPTOPK_NCCL_ERROR, "%s failed: NCCL error %d (%s)%s%s",
                   call, (int)r, str ? str : "unknown NCCL error",
                   last && *last ? ": " : "", last && *last ? last : "");
}

dcptopk_result dc_nccl_absent(const dcptopk_context *ctx, const char *what)
{
    const char *why = "unknown reason";
    dc_nccl_get(&why);
    return dc_fail(ctx, DCPTOPK_NCCL_ERROR, "%s needs NCCL, which is not "
                   "available: %s", what, why);
}
