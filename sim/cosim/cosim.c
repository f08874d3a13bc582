/* cosim.c - the co-simulator's C side (include/mantis/cosim.h): checks the
 * configuration, quantizes the operands as the provider's multiplier
 * receives them, runs the SystemC array (array.cpp), compares its result with
 * mts_gemm, and the closed forms of the cycle count and the energy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cosim_internal.h"
#include "mantis/fpbits.h"
#include "mantis/json.h"
#include "mantis/nn_arith.h"

int mts_cosim_available(void) { return cosim_have_systemc(); }

uint64_t mts_cosim_cycles(int dataflow, int rows, int cols, int m, int n, int k, uint64_t *fill, uint64_t *compute,
                          uint64_t *drain)
{
    uint64_t f = 0, c = 0, d = 0;
    for (int n0 = 0; n0 < n; n0 += cols) {
        uint64_t ct = (uint64_t)(n - n0 < cols ? n - n0 : cols);
        if (dataflow == MTS_COSIM_WS) {
            /* per k-tile: R edges of weight preload, M edges of activations,
             * then R + Ct - 1 until the last column's last sum is buffered */
            for (int k0 = 0; k0 < k; k0 += rows) f += (uint64_t)rows, c += (uint64_t)m, d += (uint64_t)rows + ct - 1;
        } else {
            /* per m-tile: K edges of operands, Rt + Ct - 2 until the far
             * corner's last product, R edges of shifting the results out */
            for (int m0 = 0; m0 < m; m0 += rows) {
                uint64_t rt = (uint64_t)(m - m0 < rows ? m - m0 : rows);
                c += (uint64_t)k, d += rt + ct - 2 + (uint64_t)rows;
            }
        }
    }
    if (fill) *fill = f;
    if (compute) *compute = c;
    if (drain) *drain = d;
    return f + c + d;
}

static int check_config(const mts_cosim_config *c, const mts_gemmdump *g, mts_err *err)
{
    if (c->rows < 1 || c->cols < 1 || c->rows > 256 || c->cols > 256)
        return mts_fail(err, MTS_EINVAL, "cosim: array %dx%d: rows and columns must be 1..256", c->rows, c->cols);
    if (c->dataflow != MTS_COSIM_WS && c->dataflow != MTS_COSIM_OS)
        return mts_fail(err, MTS_EINVAL, "cosim: dataflow %d is neither ws nor os", c->dataflow);
    const mts_provider *p = c->p;
    if (!p || (p->kind != MTS_PROV_LUT && p->kind != MTS_PROV_MULOP && p->kind != MTS_PROV_NATIVE) ||
        (p->kind == MTS_PROV_LUT && (!p->lut || !p->lut->entry)) || (p->kind == MTS_PROV_MULOP && (!p->mul || !p->mul->fn)))
        return mts_fail(err, MTS_EINVAL, "cosim: the array models LUT, MULOP or NATIVE providers with their table/mulop");
    if (p->fmaq && (mts_qfmt_check(&p->qprod, err) || mts_qfmt_check(&p->qacc, err))) return MTS_EINVAL;
    if (g->m < 1 || g->n < 1 || g->k < 1 || !g->A || !g->B)
        return mts_fail(err, MTS_EINVAL, "cosim: empty GEMM");
    int tiled = c->dataflow == MTS_COSIM_WS ? g->k : g->m;
    if (c->rows > tiled || c->cols > g->n)
        return mts_fail(err, MTS_EINVAL, "cosim: array %dx%d is larger than the GEMM (%s = %d rows, n = %d columns)",
                        c->rows, c->cols, c->dataflow == MTS_COSIM_WS ? "k" : "m", tiled, g->n);
    if (c->vcd) { /* every PE register of every cycle: keep waveforms to small runs */
        uint64_t pec = mts_cosim_cycles(c->dataflow, c->rows, c->cols, g->m, g->n, g->k, NULL, NULL, NULL) *
                       (uint64_t)c->rows * (uint64_t)c->cols;
        if ((size_t)c->rows * (size_t)c->cols > 1024 || pec > (1u << 22))
            return mts_fail(err, MTS_EINVAL, "cosim: --vcd is for small runs (at most 1024 PEs and 4M PE-cycles; "
                            "this one is %dx%d, %llu PE-cycles)", c->rows, c->cols, (unsigned long long)pec);
    }
    return MTS_OK;
}

/* mts_gemm with the array's order: FMAq chunks of `rows` (WS) or the
 * provider's chunk (OS), one thread (the result does not depend on it). */
static int reference(const mts_cosim_config *c, const mts_gemmdump *g, float *Cref, mts_err *err)
{
    mts_provider p = *c->p;
    p.threads = 1;
    if (c->dataflow == MTS_COSIM_WS) p.chunk = c->rows;
    return mts_gemm(&p, 0, 0, g->m, g->n, g->k, g->A, g->k, g->B, g->n, 0.0f, Cref, g->n, err);
}

int mts_cosim_run(const mts_cosim_config *c, const mts_gemmdump *g, float *C, mts_cosim_result *r, mts_err *err)
{
    memset(r, 0, sizeof *r);
    int rc = check_config(c, g, err);
    if (rc) return rc;
    if (!cosim_have_systemc())
        return mts_fail(err, MTS_EUNSUPPORTED, "cosim: built without SystemC (install libsystemc-dev and rebuild)");
    const mts_provider *p = c->p;
    size_t na = (size_t)g->m * g->k, nb = (size_t)g->k * g->n, nc = (size_t)g->m * g->n;
    uint32_t *ops = malloc(sizeof(uint32_t) * 2 * (na + nb)), *out = calloc(nc, sizeof(uint32_t));
    float *ref = c->check ? malloc(sizeof(float) * nc) : NULL;
    if (!ops || !out || (c->check && !ref)) {
        rc = mts_fail(err, MTS_ENOMEM, "cosim: out of memory for a %dx%dx%d GEMM", g->m, g->n, g->k);
        goto out;
    }
    mts_format f = mts_prov_format(p);
    uint32_t *A = ops, *B = A + na, *Ac = B + nb, *Bc = Ac + na;
    for (size_t i = 0; i < na; i++) A[i] = mts_prov_operand(p, mts_f2u(g->A[i])), Ac[i] = mts_fmt_encode(&f, A[i]);
    for (size_t i = 0; i < nb; i++) B[i] = mts_prov_operand(p, mts_f2u(g->B[i])), Bc[i] = mts_fmt_encode(&f, B[i]);
    cosim_job j = {.c = c, .R = c->rows, .C = c->cols, .M = g->m, .N = g->n, .K = g->k,
                        .chunk = p->chunk > 0 ? p->chunk : 16, .A = A, .B = B, .Acode = Ac, .Bcode = Bc,
                        .man_mask = f.M >= 32 ? ~0u : (1u << f.M) - 1u, .out = out, .r = r};
    if ((rc = cosim_sim(&j, err)) != MTS_OK) goto out;
    r->m = g->m, r->n = g->n, r->k = g->k;
    r->macs = (uint64_t)g->m * (uint64_t)g->n * (uint64_t)g->k;
    r->pe_cycles = r->cycles * (uint64_t)c->rows * (uint64_t)c->cols;
    r->utilisation = r->pe_cycles ? (double)r->macs / (double)r->pe_cycles : 0.0;
    r->macs_per_cycle = r->cycles ? (double)r->macs / (double)r->cycles : 0.0;
    r->operand_bits = 1 + f.E + f.M;
    for (size_t i = 0; i < nc; i++) /* the store rule of mts_gemm: one NaN */
        if ((out[i] & 0x7FFFFFFFu) > MTS_F32_INF) out[i] = MTS_F32_QNAN;
    if (C)
        for (size_t i = 0; i < nc; i++) C[i] = mts_u2f(out[i]);
    if (c->check) {
        if ((rc = reference(c, g, ref, err)) != MTS_OK) goto out;
        r->checked = 1;
        for (size_t i = 0; i < nc; i++) {
            uint32_t want = mts_f2u(ref[i]);
            if (want == out[i]) continue;
            if (r->nshow < MTS_COSIM_MAX_SHOW) {
                r->show_i[r->nshow] = (int)(i / (size_t)g->n), r->show_j[r->nshow] = (int)(i % (size_t)g->n);
                r->got[r->nshow] = out[i], r->want[r->nshow] = want;
                r->nshow++;
            }
            r->mismatches++;
        }
    }
out:
    free(ops);
    free(out);
    free(ref);
    return rc;
}

int mts_cosim_energy(const char *synth_json, const mts_cosim_result *r, double *pj, mts_err *err)
{
    mts_json *j = mts_json_load(synth_json);
    if (!j) return mts_fail(err, MTS_EIO, "%s: cannot read it as JSON (the output of `mantis synth --json`)", synth_json);
    double e = mts_json_num(j, "power.energy_pj_per_op", -1), bits = mts_json_num(j, "in_bits", -1);
    mts_json_free(j);
    if (!(e >= 0) || !(bits >= 2))
        return mts_fail(err, MTS_EFORMAT, "%s: no power.energy_pj_per_op / in_bits (not `mantis synth --json` output)",
                        synth_json);
    if (!r->products) {
        *pj = 0;
        return MTS_OK;
    }
    /* a design narrower than the operand codes is a significand multiplier:
     * it sees only the mantissa fields */
    uint64_t flips = bits < 2.0 * r->operand_bits ? r->toggles_man : r->toggles_a + r->toggles_b;
    double activity = (double)flips / (double)r->products / (bits / 2.0);
    *pj = (double)r->products * e * activity;
    return MTS_OK;
}
