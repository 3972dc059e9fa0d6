/*
 * clock.h - the library's one clock: milliseconds of CLOCK_MONOTONIC, for
 * durations (compile, load and warmup times, timeouts). Wall-clock stamps
 * (cache entry times) are not durations and do not use it.
 */
#ifndef DCPTOPK_CLOCK_H
#define DCPTOPK_CLOCK_H

#include "base.h"

DC_HIDDEN double dc_now_ms(void);

#endif /* DCPTOPK_CLOCK_H */
