/* clock.h - the one way Mantis reads a clock (epoch and step timings,
 * benchmarks). Header-only: a reading of clock_gettime in seconds. Timings
 * are reported, never part of a result. */
#ifndef MANTIS_CLOCK_H
#define MANTIS_CLOCK_H

#include <time.h>

/* Seconds on clock id (CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID
 * for the CPU time of all the process's threads). */
static inline double mts_clock_seconds(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Monotonic wall-clock seconds. */
static inline double mts_clock_now(void) { return mts_clock_seconds(CLOCK_MONOTONIC); }

#endif
