/* error.c - result names and messages (generated from DCPTOPK_RESULT_LIST),
 * the per-context / per-thread last-error slots, warnings, versions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local dc_err thread_err;

const char *dcptopk_result_name(dcptopk_result r)
{
    switch (r) {
#define DC_X_NAME(name, num, msg)                                              \
    case DCPTOPK_##name:                                                       \
        return "DCPTOPK_" #name;
        DCPTOPK_RESULT_LIST(DC_X_NAME)
#undef DC_X_NAME
    }
    return "DCPTOPK_UNKNOWN_RESULT";
}

const char *dcptopk_result_message(dcptopk_result r)
{
    switch (r) {
#define DC_X_MSG(name, num, msg)                                               \
    case DCPTOPK_##name:                                                       \
        return msg;
        DCPTOPK_RESULT_LIST(DC_X_MSG)
#undef DC_X_MSG
    }
    return "unknown result code";
}

unsigned dcptopk_version_number(void) { return DCPTOPK_VERSION_NUMBER; }

const char *dcptopk_version_string(void)
{
#define DC_STR2(x) #x
#define DC_STR(x) DC_STR2(x)
    return DC_STR(DCPTOPK_VERSION_MAJOR) "." DC_STR(
        DCPTOPK_VERSION_MINOR) "." DC_STR(DCPTOPK_VERSION_PATCH);
}

dc_err *dc_err_slot(const dcptopk_context *ctx)
{
    /* The context's slot is logically mutable state behind a const handle
     * (like errno behind a const FILE *). */
    return ctx ? (dc_err *)&ctx->err : &thread_err;
}

dcptopk_result dc_vfail(const dcptopk_context *ctx, dcptopk_result code,
                        const char *fmt, va_list ap)
{
    dc_err *e = dc_err_slot(ctx);
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    /* Keep the thread slot in step so that dcptopk_last_error(NULL) after a
     * context call also tells what happened. */
    if (ctx && e != &thread_err) {
        thread_err.code = code;
        memcpy(thread_err.msg, e->msg, sizeof thread_err.msg);
    }
    return code;
}

dcptopk_result dc_fail(const dcptopk_context *ctx, dcptopk_result code,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dc_vfail(ctx, code, fmt, ap);
    va_end(ap);
    return code;
}

void dc_fail_append(const dcptopk_context *ctx, const char *text)
{
    dc_err *e = dc_err_slot(ctx);
    size_t n = strlen(e->msg);
    if (n + 1 < sizeof e->msg)
        snprintf(e->msg + n, sizeof e->msg - n, "%s", text);
    if (ctx) {
        n = strlen(thread_err.msg);
        if (n + 1 < sizeof thread_err.msg)
            snprintf(thread_err.msg + n, sizeof thread_err.msg - n, "%s", text);
    }
}

void dc_clear(const dcptopk_context *ctx)
{
    dc_err *e = dc_err_slot(ctx);
    e->code = DCPTOPK_SUCCESS;
    e->msg[0] = '\0';
}

const char *dcptopk_last_error(const dcptopk_context *ctx)
{
    const dc_err *e = dc_err_slot(ctx);
    if (e->code == DCPTOPK_SUCCESS && e->msg[0] == '\0')
        return "no error";
    return e->msg;
}

void dc_warn(const char *fmt, ...)
{
    const char *log = getenv("DCPTOPK_LOG");
    if (log && strcmp(log, "quiet") == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("dcptopk: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
