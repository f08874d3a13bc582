/* nosc.c - the array's entry points in a build without SystemC: every run
 * answers "built without SystemC" (cosim.c checks this before simulating). */
#include "cosim_internal.h"

int cosim_have_systemc(void) { return 0; }

int cosim_sim(cosim_job *j, mts_err *err)
{
    (void)j;
    return mts_fail(err, MTS_EUNSUPPORTED, "cosim: built without SystemC (install libsystemc-dev and rebuild)");
}
