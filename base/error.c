/* error.c - result names and messages (generated from DCPTOPK_RESULT_LIST),
 * the per-context / per-thread last-error slots, warnings, versions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static _Thread_local dc_err thread_err;
/* What dcptopk_last_error(ctx) returned last on this thread: a copy taken
 * under the context's lock, so that other threads' calls on the same context
 * cannot change it while the caller reads it. */
static _Thread_local dc_err ctx_copy;

/* The context's slot is written under its lock (threads share contexts). */
static void slot_lock(const dcptopk_context *ctx)
{
    if (ctx)
        pthread_mutex_lock((pthread_mutex_t *)&ctx->err_lock);
}

static void slot_unlock(const dcptopk_context *ctx)
{
    if (ctx)
        pthread_mutex_unlock((pthread_mutex_t *)&ctx->err_lock);
}

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
    /* Formatted aside (an argument may be dcptopk_last_error()'s text),
     * then stored in the thread slot and, under its lock, the context's:
     * dcptopk_last_error(NULL) after a context call also tells what
     * happened. */
    char buf[DC_ERR_LEN];
    vsnprintf(buf, sizeof buf, fmt, ap);
    thread_err.code = code;
    memcpy(thread_err.msg, buf, sizeof thread_err.msg);
    if (ctx) {
        dc_err *e = dc_err_slot(ctx);
        slot_lock(ctx);
        e->code = code;
        memcpy(e->msg, thread_err.msg, sizeof e->msg);
        slot_unlock(ctx);
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
    size_t n = strlen(thread_err.msg);
    if (n + 1 < sizeof thread_err.msg)
        snprintf(thread_err.msg + n, sizeof thread_err.msg - n, "%s", text);
    if (ctx) {
        dc_err *e = dc_err_slot(ctx);
        slot_lock(ctx);
        n = strlen(e->msg);
        if (n + 1 < sizeof e->msg)
            snprintf(e->msg + n, sizeof e->msg - n, "%s", text);
        slot_unlock(ctx);
    }
}

void dc_clear(const dcptopk_context *ctx)
{
    dc_err *e = dc_err_slot(ctx);
    slot_lock(ctx);
    e->code = DCPTOPK_SUCCESS;
    e->msg[0] = '\0';
    slot_unlock(ctx);
}

const char *dcptopk_last_error(const dcptopk_context *ctx)
{
    const dc_err *e = &thread_err;
    if (ctx) {
        slot_lock(ctx);
        ctx_copy.code = ctx->err.code;
        memcpy(ctx_copy.msg, ctx->err.msg, sizeof ctx_copy.msg);
        slot_unlock(ctx);
        e = &ctx_copy;
    }
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
