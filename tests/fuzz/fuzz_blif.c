/* fuzz_blif.c - the mapped-netlist reader of the synth flow (synth/netlist.c:
 * Yosys' BLIF, cells of the shipped liberty) and its evaluator. Whatever
 * loads must be in dependency order (every node after the drivers of its
 * inputs, outputs reading outputs included) and evaluate the same twice. */
#include "fuzz_util.h" /* first: it defines _GNU_SOURCE */

#include <limits.h>

#include "mantis/rng.h"
#include "synth_int.h"

static synth_lib lib;
static int have_lib;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!have_lib) {
        mts_err e;
        if (synth_lib_load(MANTIS_SOURCE_DIR "/synth/mantis45.lib", &lib, &e)) abort();
        have_lib = 1;
    }
    synth_gl gl;
    mts_err err;
    if (synth_gl_load(fuzz_file(0, data, size), &lib, &gl, &err) != MTS_OK) return 0;
    int *at = malloc((size_t)(gl.nnets ? gl.nnets : 1) * sizeof *at); /* net -> the node that drives it */
    if (!at) abort();
    for (int i = 0; i < gl.nnets; i++) at[i] = INT_MAX;
    for (int k = 0; k < gl.nnodes; k++) {
        if (gl.nodes[k].out < 0 || gl.nodes[k].out >= gl.nnets || at[gl.nodes[k].out] != INT_MAX) abort();
        at[gl.nodes[k].out] = k;
    }
    for (int k = 0; k < gl.nnodes; k++)
        for (int j = 0; j < gl.nodes[k].nin; j++)
            if (at[gl.nodes[k].in[j]] != INT_MAX && at[gl.nodes[k].in[j]] >= k) abort(); /* read before written */
    free(at);
    uint64_t vec[130], out[2][130];
    uint64_t s = size;
    for (int i = 0; i < 130; i++) vec[i] = mts_rng_splitmix64(&s);
    uint64_t *tog = calloc((size_t)(gl.nnets ? gl.nnets : 1), sizeof *tog);
    if (!tog) abort();
    for (int r = 0; r < 2; r++)
        if (synth_gl_sim(&gl, vec, 130, out[r], r ? tog : NULL, &err) != MTS_OK) abort();
    if (memcmp(out[0], out[1], sizeof out[0])) abort();
    free(tog);
    synth_gl_free(&gl);
    return 0;
}
