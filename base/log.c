/* log.c - the log function (see log.h). The level and the callback are
 * process-wide state: the level an atomic, the callback and its user pointer
 * a pair under one mutex, copied out before the call so a callback may log
 * or replace itself. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "settings.h"

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static int log_level; /* atomic: __atomic_* */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static dcptopk_log_fn sink_fn;
static void *sink_user;
static int env_bad; /* atomic: DCPTOPK_LOG was invalid, not yet reported */

static const char *const level_names[] = {"quiet", "error", "warn", "info",
                                          "debug"};

static void level_from_env(void)
{
    int level = DCPTOPK_LOG_WARN;
    const char *v = dc_setting_text(DC_SET_LOG);
    if (v) {
        int found = 0;
        for (int i = 0; i <= DCPTOPK_LOG_DEBUG; i++)
            if (strcasecmp(v, level_names[i]) == 0) {
                level = i;
                found = 1;
            }
        if (!found && strcasecmp(v, "warning") == 0) {
            level = DCPTOPK_LOG_WARN;
            found = 1;
        }
        /* Reported by current_level: logging here would re-enter the
         * pthread_once. */
        if (!found)
            __atomic_store_n(&env_bad, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

static int current_level(void)
{
    pthread_once(&level_once, level_from_env);
    if (__atomic_exchange_n(&env_bad, 0, __ATOMIC_RELAXED))
        dc_log(DCPTOPK_LOG_WARN,
               "ignoring DCPTOPK_LOG=\"%s\" (expected quiet, error, warn, "
               "info or debug): using warn",
               dc_setting_text(DC_SET_LOG));
    return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void dcptopk_log_set_level(dcptopk_log_level level)
{
    int l = (int)level;
    l = l < DCPTOPK_LOG_QUIET ? DCPTOPK_LOG_QUIET
        : l > DCPTOPK_LOG_DEBUG ? DCPTOPK_LOG_DEBUG
                                : l;
    pthread_once(&level_once, level_from_env);
    __atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
}

dcptopk_log_level dcptopk_log_get_level(void)
{
    return (dcptopk_log_level)current_level();
}

void dcptopk_log_set_callback(dcptopk_log_fn fn, void *user)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = user;
    pthread_mutex_unlock(&sink_lock);
}

int dc_log_enabled(dcptopk_log_level level)
{
    return level > DCPTOPK_LOG_QUIET && (int)level <= current_level();
}

void dc_log(dcptopk_log_level level, const char *fmt, ...)
{
    if (!dc_log_enabled(level))
        return;
    static const char *const prefix[] = {"", "error", "warning", "info",
                                         "debug"};
    char line[2048];
    int head = snprintf(line, sizeof line, "dcptopk: %s: ", prefix[level]);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + head, sizeof line - (size_t)head - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)head + (n < 0 ? 0 : (size_t)n);
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* truncated: keep room for the newline */

    pthread_mutex_lock(&sink_lock);
    dcptopk_log_fn fn = sink_fn;
    void *user = sink_user;
    pthread_mutex_unlock(&sink_lock);
    if (fn) {
        line[len] = '\0';
        fn(user, level, line + head);
        return;
    }
    line[len++] = '\n';
    /* One write: a line of one thread or process is never split by
     * another's. A short write of a 2 KiB line to a pipe does not happen
     * (PIPE_BUF >= 512 is the POSIX floor, Linux has 4096); retry EINTR. */
    ssize_t w;
    do
        w = write(STDERR_FILENO, line, len);
    while (w < 0 && errno == EINTR);
}
