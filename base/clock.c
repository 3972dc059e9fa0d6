/* clock.c - the monotonic clock (see clock.h). */
#include <time.h>

#include "clock.h"

double dc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
