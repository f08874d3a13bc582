/* par.h - a fixed fan-out over threads for the work that must not depend on
 * OpenMP's runtime (RTL model instances, verification sinks): fn(ctx, t)
 * runs for t = 0..n-1, t = 0 on the calling thread; a thread that cannot be
 * created has its share done on the caller, so results never depend on it. */
#ifndef MANTIS_PAR_H
#define MANTIS_PAR_H

#ifdef __cplusplus
extern "C" {
#endif

/* How many workers the RTL sweeps and `verify` use: one per Verilated model
 * instance (two cores is the design point; more instances cost memory). */
#define MTS_PAR_WORKERS 2

/* Runs fn(ctx, t) for t in [0, n), n <= MTS_PAR_WORKERS (clamped), and joins. */
void mts_par_run(int n, void (*fn)(void *ctx, int t), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
