/*
 * log.h - the library's one log function. A message is formatted whole and
 * goes either to the caller's callback (dcptopk_log_set_callback) or to
 * stderr in one write(), so lines never interleave; the level comes from
 * DCPTOPK_LOG until dcptopk_log_set_level changes it.
 */
#ifndef DCPTOPK_LOG_H
#define DCPTOPK_LOG_H

#include "base.h"

DC_HIDDEN void dc_log(dcptopk_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define dc_log_error(...) dc_log(DCPTOPK_LOG_ERROR, __VA_ARGS__)
#define dc_log_warn(...) dc_log(DCPTOPK_LOG_WARN, __VA_ARGS__)
#define dc_log_info(...) dc_log(DCPTOPK_LOG_INFO, __VA_ARGS__)
#define dc_log_debug(...) dc_log(DCPTOPK_LOG_DEBUG, __VA_ARGS__)

/* Whether a message of `level` would be written (to skip costly formatting). */
DC_HIDDEN int dc_log_enabled(dcptopk_log_level level);

#endif /* DCPTOPK_LOG_H */
