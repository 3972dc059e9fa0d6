/* nvrtc.c - loads NVRTC (see nvrtc_table.h) and compiles a rendered unit
 * with it into a cubin (and PTX) for the unit's arch. NVRTC needs no driver
 * and no device, so CI compiles every kernel variant. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "nvrtc_table.h"
#include "rt.h"
#include "settings.h"

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static dc_nvrtc nvrtc_table;
static const dc_nvrtc *nvrtc_loaded; /* NULL: none usable, see nvrtc_why */
static char nvrtc_why[2048];

/* Appends one line to nvrtc_why (truncated, never overflowing). */
static void why_add(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(nvrtc_why);
    if (n + 1 < sizeof nvrtc_why)
        snprintf(nvrtc_why + n, sizeof nvrtc_why - n, fmt, a, b);
}

/* Tries one file: 1 when it is loaded into nvrtc_table. */
static int try_file(const char *file)
{
    void *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        /* dlerror names the file already. */
        why_add("; %s%s", e ? e : file, e ? "" : ": dlopen failed");
        return 0;
    }
    dc_nvrtc t;
    memset(&t, 0, sizeof t);
#define DC_NVRTC_LOAD(name, ret, args)                                         \
    do {                                                                       \
        void *dc_p_ = dlsym(lib, #name);                                       \
        if (!dc_p_) {                                                          \
            why_add("; %s: lacks %s (too old)", file, #name);                  \
            dlclose(lib);                                                      \
            return 0;                                                          \
        }                                                                      \
        /* POSIX guarantees a dlsym result converts to a function pointer. */ \
        memcpy(&t.name, &dc_p_, sizeof dc_p_);                                 \
    } while (0);
    DC_NVRTC_FUNCTIONS(DC_NVRTC_LOAD)
#undef DC_NVRTC_LOAD
    if (t.nvrtcVersion(&t.major, &t.minor) != DC_NVRTC_SUCCESS) {
        why_add("; %s: nvrtcVersion failed%s", file, "");
        dlclose(lib);
        return 0;
    }
    if (t.major < DC_NVRTC_MIN_MAJOR ||
        (t.major == DC_NVRTC_MIN_MAJOR && t.minor < DC_NVRTC_MIN_MINOR)) {
        char v[32];
        snprintf(v, sizeof v, "%d.%d", t.major, t.minor);
        why_add("; %s: NVRTC %s is older than 12.8, the oldest supported",
                file, v);
        dlclose(lib);
        return 0;
    }
    /* The file the loader chose (a bare soname says nothing). */
    Dl_info info;
    void *fn = NULL;
    memcpy(&fn, &t.nvrtcVersion, sizeof fn);
    snprintf(t.path, sizeof t.path, "%s",
             dladdr(fn, &info) && info.dli_fname ? info.dli_fname : file);
    int count = 0;
    if (t.nvrtcGetNumSupportedArchs(&count) == DC_NVRTC_SUCCESS && count > 0 &&
        count < 256) {
        int archs[256];
        if (t.nvrtcGetSupportedArchs(archs) == DC_NVRTC_SUCCESS) {
            size_t n = 0;
            for (int i = 0; i < count && n + 1 < sizeof t.archs; i++)
                n += (size_t)snprintf(t.archs + n, sizeof t.archs - n,
                                      "%ssm_%d", i ? " " : "", archs[i]);
        }
    }
    /* Stays loaded for the life of the process (never dlclose'd: other
     * threads may hold function pointers into it). */
    nvrtc_table = t;
    return 1;
}

/* Tries `dir`/libnvrtc.so.13 then .12. */
static int try_dir(const char *dir)
{
    static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
    for (size_t i = 0; i < sizeof sonames / sizeof *sonames; i++) {
        char file[1024];
        int n = snprintf(file, sizeof file, "%s/%s", dir, sonames[i]);
        if (n > 0 && (size_t)n < sizeof file && try_file(file))
            return 1;
    }
    return 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int load_nvrtc(void)
{
    const char *env = dc_setting_text(DC_SET_NVRTC_PATH);
    if (env)
        /* An explicit choice is the only one tried: a silent fallback would
         * compile with another NVRTC than the one asked for. */
        return is_dir(env) ? try_dir(env) : try_file(env);
    /* The nvidia-cuda-nvrtc wheels beside this library's own wheel:
     * site-packages/dcptopk[/lib]/libdcptopk.so next to
     * site-packages/nvidia/cu13/lib (CUDA 13) or nvidia/cuda_nvrtc/lib. */
    Dl_info info;
    void *self = NULL;
    const dc_nvrtc *(*fn)(const char **) = dc_nvrtc_get;
    memcpy(&self, &fn, sizeof self);
    if (dladdr(self, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char here[512];
        snprintf(here, sizeof here, "%s", info.dli_fname);
        *strrchr(here, '/') = '\0';
        static const char *const rel[] = {
            "/../nvidia/cu13/lib", "/../nvidia/cuda_nvrtc/lib",
            "/../../nvidia/cu13/lib", "/../../nvidia/cuda_nvrtc/lib"};
        for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
            char dir[1024];
            snprintf(dir, sizeof dir, "%s%s", here, rel[i]);
            if (try_dir(dir))
                return 1;
        }
    }
    const char *home = dc_setting_text(DC_SET_CUDA_HOME);
    if (home) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/lib64", home);
        if (try_dir(dir))
            return 1;
    }
    if (try_dir("/usr/local/cuda/lib64"))
        return 1;
    return try_file("libnvrtc.so.13") || try_file("libnvrtc.so.12");
}

static void nvrtc_once_load(void)
{
    if (load_nvrtc()) {
        nvrtc_loaded = &nvrtc_table;
        nvrtc_why[0] = '\0';
        return;
    }
    /* Lead with the fix, then every file tried. */
    char tried[sizeof nvrtc_why];
    snprintf(tried, sizeof tried, "%s", nvrtc_why);
    static const char lead[] =
        "no usable NVRTC 13 or 12.8+ (pip install nvidia-cuda-nvrtc, or "
        "nvidia-cuda-nvrtc-cu12, or set DCPTOPK_NVRTC_PATH); tried: ";
    const char *list = tried[0] ? tried + 2 : "nothing"; /* drop "; " */
    size_t n = strlen(list), room = sizeof nvrtc_why - sizeof lead;
    memcpy(nvrtc_why, lead, sizeof lead - 1);
    memcpy(nvrtc_why + sizeof lead - 1, list, n < room ? n : room);
    nvrtc_why[sizeof lead - 1 + (n < room ? n : room)] = '\0';
}

const dc_nvrtc *dc_nvrtc_get(const char **why)
{
    pthread_once(&nvrtc_once, nvrtc_once_load);
    if (!nvrtc_loaded && why)
        *why = nvrtc_why;
    return nvrtc_loaded;
}

void dc_nvrtc_version(int *major, int *minor)
{
    const dc_nvrtc *nv = dc_nvrtc_get(NULL);
    *major = nv ? nv->major : -1;
    *minor = nv ? nv->minor : -1;
}

void dc_nvrtc_path(char *buf, size_t size)
{
    const dc_nvrtc *nv = dc_nvrtc_get(NULL);
    if (size)
        snprintf(buf, size, "%s", nv ? nv->path : "");
}

void dc_nvrtc_options(dc_unit *u)
{
    /* No --use_fast_math and no -ftz/-prec-* changes: kernels must be exact
     * (they compare raw bits, but a helper may touch floats). --minimal drops
     * the texture/cudadevrt declarations the templates never use (the
     * templates include no toolkit header), which shortens compiles. */
    snprintf(u->arch_option, sizeof u->arch_option, "--gpu-architecture=%s",
             u->key.arch);
    size_t n = 0;
    u->options[n++] = u->arch_option;
    u->options[n++] = "-std=c++17";
    u->options[n++] = "-default-device";
    u->options[n++] = "--minimal";
    u->options[n++] = "-lineinfo";
    u->option_count = n;
}

void dc_compiled_free(dc_compiled *c)
{
    if (!c)
        return;
    free(c->cubin);
    free(c->ptx);
    memset(c, 0, sizeof *c);
}

static void free_texts(char **texts, size_t n)
{
    for (size_t i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
}

/* Appends the program log to err. */
static void append_log(const dc_nvrtc *nv, dc_nvrtc_program prog, char *err, size_t err_size)
{
    size_t log_size = 0;
    if (nv->nvrtcGetProgramLogSize(prog, &log_size) != DC_NVRTC_SUCCESS ||
        log_size <= 1)
        return;
    char *log = malloc(log_size + 1);
    if (!log)
        return;
    if (nv->nvrtcGetProgramLog(prog, log) == DC_NVRTC_SUCCESS) {
        log[log_size] = '\0';
        size_t n = strlen(err);
        if (n + 1 < err_size)
            snprintf(err + n, err_size - n, "\nNVRTC log:\n%s", log);
    }
    free(log);
}

dcptopk_result dc_nvrtc_compile(const dc_unit *u, dc_compiled *out, char *err,
                                size_t err_size)
{
    memset(out, 0, sizeof *out);
    char key_text[320];
    dcptopk_key_format(&u->key, key_text, sizeof key_text);
    const char *why = NULL;
    const dc_nvrtc *nv = dc_nvrtc_get(&why);
    if (!nv) {
        snprintf(err, err_size, "cannot compile %s: %s", key_text, why);
        return DCPTOPK_NVRTC_ERROR;
    }

    const char *names[64];
    const char *texts[64];
    size_t nh = u->header_count;
    if (nh > 64) {
        snprintf(err, err_size,
                 "%s: %zu headers (*.cuh, *.h), more than the 64 the renderer "
                 "passes to NVRTC",
                 key_text, nh);
        return DCPTOPK_UNSUPPORTED;
    }
    /* Each header's text starts with a #line that gives it an absolute
     * name too (the include names stay as the templates write them). */
    char **line_texts = calloc(nh ? nh : 1, sizeof *line_texts);
    dcptopk_result res = line_texts ? DCPTOPK_SUCCESS : DCPTOPK_OUT_OF_MEMORY;
    for (size_t i = 0; i < nh && res == DCPTOPK_SUCCESS; i++) {
        size_t need = strlen(u->headers[i].name) + u->headers[i].size + 64;
        line_texts[i] = malloc(need);
        if (!line_texts[i]) {
            res = DCPTOPK_OUT_OF_MEMORY;
            break;
        }
        snprintf(line_texts[i], need,
                 "#line 1 \"" DC_NVRTC_TEMPLATE_ROOT "%s\"\n%.*s",
                 u->headers[i].name, (int)u->headers[i].size,
                 (const char *)u->headers[i].data);
        names[i] = u->headers[i].name;
        texts[i] = line_texts[i];
    }
    if (res != DCPTOPK_SUCCESS) {
        snprintf(err, err_size, "%s: out of memory for the header texts",
                 key_text);
        free_texts(line_texts, nh);
        return res;
    }
    /* The program name (and the renderer's #line) is absolute on purpose:
     * with -lineinfo, NVRTC records a relative file name together with the
     * compiling process's working directory, so the same key compiled in
     * two folders (or on two hosts) gave two different cubins. A fixed
     * absolute name keeps the line table and makes the cubin a function of
     * the key alone, which is what lets `cache import` verify an entry by
     * compiling it again. */
    char prog_name[256];
    snprintf(prog_name, sizeof prog_name, DC_NVRTC_TEMPLATE_ROOT "%s",
             u->info->template_file);
    double t0 = dc_now_ms();
    dc_nvrtc_program prog = NULL;
    dc_nvrtc_result r = nv->nvrtcCreateProgram(&prog, u->source, prog_name, (int)nh,
                                       texts, names);
    if (r != DC_NVRTC_SUCCESS) {
        free_texts(line_texts, nh);
        snprintf(err, err_size, "nvrtcCreateProgram(%s) failed: %s (%d)",
                 key_text, nv->nvrtcGetErrorString(r), (int)r);
        return r == DC_NVRTC_ERROR_OUT_OF_MEMORY ? DCPTOPK_OUT_OF_MEMORY
                                              : DCPTOPK_NVRTC_ERROR;
    }
    r = nv->nvrtcCompileProgram(prog, (int)u->option_count, u->options);
    if (r != DC_NVRTC_SUCCESS) {
        int n = snprintf(err, err_size,
                         "NVRTC %s failed to compile %s: %s (%d); options:",
                         u->nvrtc_version, key_text, nv->nvrtcGetErrorString(r),
                         (int)r);
        for (size_t i = 0; i < u->option_count && n > 0 && (size_t)n < err_size;
             i++)
            n += snprintf(err + n, err_size - (size_t)n, " %s", u->options[i]);
        append_log(nv, prog, err, err_size);
        res = DCPTOPK_NVRTC_ERROR;
        goto done;
    }
    size_t cubin_size = 0, ptx_size = 0;
    if ((r = nv->nvrtcGetCUBINSize(prog, &cubin_size)) != DC_NVRTC_SUCCESS ||
        (r = nv->nvrtcGetPTXSize(prog, &ptx_size)) != DC_NVRTC_SUCCESS) {
        snprintf(err, err_size, "NVRTC output size of %s: %s (%d)", key_text,
                 nv->nvrtcGetErrorString(r), (int)r);
        res = DCPTOPK_NVRTC_ERROR;
        goto done;
    }
    if (cubin_size == 0) {
        snprintf(err, err_size,
                 "NVRTC produced no cubin for %s (arch %s must be a real "
                 "sm_XY architecture)",
                 key_text, u->key.arch);
        res = DCPTOPK_NVRTC_ERROR;
        goto done;
    }
    out->cubin = malloc(cubin_size);
    out->ptx = malloc(ptx_size + 1);
    if (!out->cubin || !out->ptx) {
        snprintf(err, err_size, "out of memory for a %zu-byte cubin",
                 cubin_size);
        res = DCPTOPK_OUT_OF_MEMORY;
        goto done;
    }
    if ((r = nv->nvrtcGetCUBIN(prog, out->cubin)) != DC_NVRTC_SUCCESS ||
        (r = nv->nvrtcGetPTX(prog, out->ptx)) != DC_NVRTC_SUCCESS) {
        snprintf(err, err_size, "NVRTC output of %s: %s (%d)", key_text,
                 nv->nvrtcGetErrorString(r), (int)r);
        res = DCPTOPK_NVRTC_ERROR;
        goto done;
    }
    out->ptx[ptx_size] = '\0';
    /* nvrtcGetPTXSize counts the terminating NUL: store the text alone, so
     * that `dcptopk cache show --ptx` output feeds ptxas as it is. */
    while (ptx_size > 0 && out->ptx[ptx_size - 1] == '\0')
        ptx_size--;
    out->cubin_size = cubin_size;
    out->ptx_size = ptx_size;
    out->compile_ms = dc_now_ms() - t0;
done:
    nv->nvrtcDestroyProgram(&prog);
    free_texts(line_texts, nh);
    if (res != DCPTOPK_SUCCESS)
        dc_compiled_free(out);
    return res;
}
