/* par.c - fixed thread fan-out (include/mantis/par.h). */
#include <pthread.h>

#include "mantis/par.h"

typedef struct {
    void (*fn)(void *, int);
    void *ctx;
    int t;
} par_arg;

static void *par_main(void *p)
{
    par_arg *a = p;
    a->fn(a->ctx, a->t);
    return NULL;
}

void mts_par_run(int n, void (*fn)(void *ctx, int t), void *ctx)
{
    pthread_t th[MTS_PAR_WORKERS];
    par_arg arg[MTS_PAR_WORKERS];
    int started[MTS_PAR_WORKERS] = {0};
    if (n > MTS_PAR_WORKERS) n = MTS_PAR_WORKERS;
    for (int t = 1; t < n; t++) {
        arg[t] = (par_arg){fn, ctx, t};
        started[t] = pthread_create(&th[t], NULL, par_main, &arg[t]) == 0;
        if (!started[t]) fn(ctx, t); /* no thread: do its share here */
    }
    fn(ctx, 0);
    for (int t = 1; t < n; t++)
        if (started[t]) pthread_join(th[t], NULL);
}
