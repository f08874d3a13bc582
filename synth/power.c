/* power.c - switching power of an operand stream through the mapped
 * netlist: per-net toggles from the C gate-level simulator (netlist.c) times
 * each net's energy per toggle, plus the cells' leakage. Recomputed on every
 * call (milliseconds), so it is not cached. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/rng.h"
#include "mantis/trace.h"
#include "synth_int.h"

#define DEFAULT_POWER_OPS 65536

/* The operands of a trace file, packed as the netlist's input vector (a in
 * port 0, b in port 1). MTS_EINVAL when its widths do not fit the design. */
static int trace_stream(const synth_ctx *c, const synth_gl *gl, uint64_t **vec, uint64_t *n, mts_err *err)
{
    const char *path = c->o->power_trace;
    mts_trace t;
    int rc = mts_trace_read(path, &t, err);
    if (rc) return rc;
    if (gl->nin_ports != 2 || (int)t.info.width_a != gl->in_ports[0].width ||
        (int)t.info.width_b != gl->in_ports[1].width)
        rc = mts_fail(err, MTS_EINVAL, "%s: trace operands are %u and %u bits; design %s has %d input port(s)%s%d/%d bits",
                      path, t.info.width_a, t.info.width_b, c->base, gl->nin_ports, gl->nin_ports == 2 ? " of " : ", ",
                      gl->in_ports[0].width, gl->nin_ports > 1 ? gl->in_ports[1].width : 0);
    else if (t.info.count < 2)
        rc = mts_fail(err, MTS_EINVAL, "%s: a power trace needs at least 2 records", path);
    if (!rc) {
        *n = t.info.count;
        *vec = malloc(*n * sizeof **vec);
        if (*vec)
            for (uint64_t i = 0; i < *n; i++) (*vec)[i] = t.a[i] | (t.b[i] << gl->in_ports[1].first);
    }
    mts_trace_free(&t);
    return rc;
}

/* power_ops uniform random input vectors (splitmix64 from opts.seed). */
static int uniform_stream(const synth_ctx *c, const synth_gl *gl, uint64_t **vec, uint64_t *n, mts_err *err)
{
    *n = c->o->power_ops ? c->o->power_ops : DEFAULT_POWER_OPS;
    if (*n < 2) return mts_fail(err, MTS_EINVAL, "power stream of %llu operations (need >= 2)", (unsigned long long)*n);
    uint64_t s = c->o->seed;
    uint64_t mask = gl->nin_bits >= 64 ? ~0ull : (1ull << gl->nin_bits) - 1;
    *vec = malloc(*n * sizeof **vec);
    if (*vec)
        for (uint64_t i = 0; i < *n; i++) (*vec)[i] = mts_rng_splitmix64(&s) & mask;
    return MTS_OK;
}

/* Energy per operation and power from the per-net toggle counts. */
static void account(const synth_gl *gl, const uint64_t *tog, uint64_t n, mts_synth_result *r)
{
    double e_fj = 0, tsum = 0;
    for (int i = 0; i < gl->nnets; i++) {
        e_fj += (double)tog[i] * gl->e_tog_fj[i];
        tsum += (double)tog[i];
    }
    double trans = (double)(n - 1); /* the first vector only sets the state */
    r->power_ops = n;
    r->toggles_per_op = tsum / trans;
    r->energy_pj = e_fj / trans / 1000.0;
    r->dyn_uw = r->energy_pj * r->clock_ghz * 1000.0; /* 1 pJ x 1 GHz = 1 mW */
    r->leak_uw = gl->leak_nw / 1000.0;
    r->total_uw = r->dyn_uw + r->leak_uw;
}

int synth_power(const synth_ctx *c, const synth_gl *gl, mts_synth_result *r, mts_err *err)
{
    const mts_synth_opts *o = c->o;
    uint64_t n = 0, *vec = NULL;
    r->clock_ghz = o->clock_ghz > 0 ? o->clock_ghz : 1.0;
    int rc = o->power_trace ? trace_stream(c, gl, &vec, &n, err) : uniform_stream(c, gl, &vec, &n, err);
    if (rc) return rc;
    snprintf(r->stream, sizeof r->stream, "%s", o->power_trace ? "trace" : "uniform");
    r->seed = o->power_trace ? 0 : o->seed;
    uint64_t *tog = calloc((size_t)gl->nnets, sizeof *tog);
    if (!vec || !tog) rc = mts_fail(err, MTS_ENOMEM, "out of memory for %llu operand vectors", (unsigned long long)n);
    if (!rc) rc = synth_gl_sim(gl, vec, n, NULL, tog, err);
    if (!rc) account(gl, tog, n, r);
    free(vec);
    free(tog);
    return rc;
}
