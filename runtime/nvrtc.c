/* nvrtc.c - compiles a rendered unit with NVRTC into a cubin (and PTX) for
 * the unit's arch. NVRTC is linked; it needs no driver and no device, so CI
 * compiles every kernel variant. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "rt.h"

void dc_nvrtc_version(int *major, int *minor)
{
    *major = 0;
    *minor = 0;
    if (nvrtcVersion(major, minor) != NVRTC_SUCCESS) {
        *major = -1;
        *minor = -1;
    }
}

void dc_nvrtc_path(char *buf, size_t size)
{
    /* NVRTC is linked, so the loader chose the file (rpath, LD_LIBRARY_PATH
     * or a copy the Python binding preloaded): ask it which one. */
    Dl_info info;
    void *fn = NULL;
    nvrtcResult (*version)(int *, int *) = nvrtcVersion;
    memcpy(&fn, &version, sizeof fn);
    if (size)
        buf[0] = '\0';
    if (dladdr(fn, &info) && info.dli_fname)
        snprintf(buf, size, "%s", info.dli_fname);
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
static void append_log(nvrtcProgram prog, char *err, size_t err_size)
{
    size_t log_size = 0;
    if (nvrtcGetProgramLogSize(prog, &log_size) != NVRTC_SUCCESS ||
        log_size <= 1)
        return;
    char *log = malloc(log_size + 1);
    if (!log)
        return;
    if (nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
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
    nvrtcProgram prog = NULL;
    nvrtcResult r = nvrtcCreateProgram(&prog, u->source, prog_name, (int)nh,
                                       texts, names);
    if (r != NVRTC_SUCCESS) {
        free_texts(line_texts, nh);
        snprintf(err, err_size, "nvrtcCreateProgram(%s) failed: %s (%d)",
                 key_text, nvrtcGetErrorString(r), (int)r);
        return r == NVRTC_ERROR_OUT_OF_MEMORY ? DCPTOPK_OUT_OF_MEMORY
                                              : DCPTOPK_NVRTC_ERROR;
    }
    r = nvrtcCompileProgram(prog, (int)u->option_count, u->options);
    if (r != NVRTC_SUCCESS) {
        int n = snprintf(err, err_size,
                         "NVRTC %s failed to compile %s: %s (%d); options:",
                         u->nvrtc_version, key_text, nvrtcGetErrorString(r),
                         (int)r);
        for (size_t i = 0; i < u->option_count && n > 0 && (size_t)n < err_size;
             i++)
            n += snprintf(err + n, err_size - (size_t)n, " %s", u->options[i]);
        append_log(prog, err, err_size);
        res = DCPTOPK_NVRTC_ERROR;
        goto done;
    }
    size_t cubin_size = 0, ptx_size = 0;
    if ((r = nvrtcGetCUBINSize(prog, &cubin_size)) != NVRTC_SUCCESS ||
        (r = nvrtcGetPTXSize(prog, &ptx_size)) != NVRTC_SUCCESS) {
        snprintf(err, err_size, "NVRTC output size of %s: %s (%d)", key_text,
                 nvrtcGetErrorString(r), (int)r);
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
    if ((r = nvrtcGetCUBIN(prog, out->cubin)) != NVRTC_SUCCESS ||
        (r = nvrtcGetPTX(prog, out->ptx)) != NVRTC_SUCCESS) {
        snprintf(err, err_size, "NVRTC output of %s: %s (%d)", key_text,
                 nvrtcGetErrorString(r), (int)r);
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
    nvrtcDestroyProgram(&prog);
    free_texts(line_texts, nh);
    if (res != DCPTOPK_SUCCESS)
        dc_compiled_free(out);
    return res;
}
