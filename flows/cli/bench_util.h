/* bench_util.h - the clocks the `mantis bench` subcommands time with
 * (docs/benchmarks.md). Header-only: two one-line readings of clock_gettime. */
#ifndef MANTIS_BENCH_UTIL_H
#define MANTIS_BENCH_UTIL_H

#include <time.h>

/* Seconds on clock id (CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID
 * for the CPU time of all the process's threads). */
static inline double mts_bench_clock(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Monotonic wall-clock seconds. */
static inline double mts_bench_now(void) { return mts_bench_clock(CLOCK_MONOTONIC); }

#endif
