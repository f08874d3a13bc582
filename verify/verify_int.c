/* verify_int.c - verification of integer multiplier designs: every operand
 * pair through the per-call path (mts_rtl_int_mul) against the design's
 * product table after a round trip through a LUT file (what `lutgen --rtl`
 * writes), or against a given table (--lut), and optionally against the
 * exact product (--mul exact). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/intmul.h"
#include "verify_internal.h"

static void int_line(vfy_line *l, int n, int32_t a, int32_t b, int32_t dut, int32_t ref, const char *label)
{
    /* n <= 8: two hex digits per operand code, four per product code */
    uint32_t ma = (1u << n) - 1u, mp = (1u << (2 * n)) - 1u;
    snprintf(l->a, sizeof l->a, "%02X (%d)", (uint32_t)a & ma & 0xFFu, (int)(int16_t)a);
    snprintf(l->b, sizeof l->b, "%02X (%d)", (uint32_t)b & ma & 0xFFu, (int)(int16_t)b);
    snprintf(l->dut, sizeof l->dut, "%04X (%d)", (uint32_t)dut & mp & 0xFFFFu, dut);
    snprintf(l->ref, sizeof l->ref, "%04X (%d)", (uint32_t)ref & mp & 0xFFFFu, ref);
    snprintf(l->cls, sizeof l->cls, "%s", "product");
    snprintf(l->text, sizeof l->text, "a=%s  b=%s  =>  rtl=%s  %s=%s", l->a, l->b, l->dut, label, l->ref);
}

/* Counts one comparison into s; a mismatch is formatted only if it will be listed. */
static void check(vfy_sink *s, int n, int32_t a, int32_t b, int32_t dut, int32_t ref, const char *label)
{
    s->cases++;
    if (dut == ref) return;
    vfy_line *l = vfy_sink_miss(s);
    if (l) int_line(l, n, a, b, dut, ref, label);
}

/* The design's table written as a LUT file and read back. */
static int roundtrip_lut(vfy_ctx *v, mts_lut *lut, mts_err *err)
{
    mts_lut made;
    int rc = mts_rtl_lut(v->r, &made, err);
    if (rc) return rc;
    const char *tdir = getenv("TMPDIR");
    char path[1100];
    snprintf(path, sizeof path, "%s/mantis-verify-%d.lut", tdir && *tdir ? tdir : "/tmp", (int)getpid());
    rc = mts_lut_save(&made, path, err);
    mts_lut_free(&made);
    if (!rc) rc = mts_lut_load(path, lut, err);
    remove(path);
    return rc;
}

int vfy_int(vfy_ctx *v, mts_err *err)
{
    const mts_rtl_info *in = v->in;
    int n = in->int_bits, rc;
    mts_intfmt fmt = {n, in->int_signed};
    if (v->o->model && strcmp(v->o->model, "exact"))
        return mts_fail(err, MTS_EINVAL, "integer designs compare with --mul exact only, not '%s'", v->o->model);
    mts_lut lut;
    memset(&lut, 0, sizeof lut);
    if (v->o->lut_path) {
        rc = mts_lut_load(v->o->lut_path, &lut, err);
        if (rc) return rc;
        if (lut.kind != MTS_LUT_INT || lut.int_bits != n || lut.int_signed != in->int_signed) {
            mts_lut_free(&lut);
            return mts_fail(err, MTS_EINVAL, "%s: an integer table of %d-bit %s operands is needed for this design",
                            v->o->lut_path, n, in->int_signed ? "signed" : "unsigned");
        }
    } else if ((rc = roundtrip_lut(v, &lut, err)) != MTS_OK) {
        return rc;
    }
    int c_lut = vfy_cmp_begin(v, v->o->lut_path ? "rtl vs lut (given)" : "rtl vs lut (written and read back)");
    int c_mod = v->o->model ? vfy_cmp_begin(v, "rtl vs model exact") : -1;
    vfy_sink s_lut, s_mod;
    if (c_lut < 0 || (v->o->model && c_mod < 0) || vfy_sink_init(&s_lut, v->max_report) ||
        vfy_sink_init(&s_mod, v->max_report)) {
        mts_lut_free(&lut);
        return mts_fail(err, MTS_ENOMEM, "out of memory");
    }
    int32_t lo = mts_int_min(&fmt), hi = mts_int_max(&fmt);
    int32_t span = hi - lo + 1, *dut_tab = malloc((size_t)span * (size_t)span * sizeof *dut_tab);
    rc = dut_tab ? MTS_OK : mts_fail(err, MTS_ENOMEM, "out of memory");
    for (int32_t a = lo; a <= hi && !rc; a++)
        for (int32_t b = lo; b <= hi && !rc; b++) {
            int32_t dut;
            rc = mts_rtl_int_mul(v->r, a, b, &dut, err);
            if (rc) break;
            dut_tab[(size_t)(a - lo) * (size_t)span + (size_t)(b - lo)] = dut;
            check(&s_lut, n, a, b, dut, mts_lut_int_mul(&lut, a, b), "lut");
            if (c_mod >= 0) check(&s_mod, n, a, b, dut, mts_intmul_exact(&fmt, a, b), "exact");
        }
    if (!rc && s_lut.mismatches) {
        /* a table built with the operands the other way round (EvoApproxLib's C
         * models take (B, A)) differs almost everywhere: say so if that is all */
        uint64_t swapped = 0;
        for (int32_t a = lo; a <= hi; a++)
            for (int32_t b = lo; b <= hi; b++)
                swapped += dut_tab[(size_t)(a - lo) * (size_t)span + (size_t)(b - lo)] != mts_lut_int_mul(&lut, b, a);
        if (swapped == 0)
            snprintf(v->note, sizeof v->note,
                     "the design matches the table with operands swapped: table(b, a) == rtl(a, b) for every pair "
                     "(was the table built from a model taking (b, a)?)");
    }
    free(dut_tab);
    if (!rc) {
        vfy_cmp_merge(v, c_lut, &s_lut);
        vfy_cmp_report(v, c_lut);
        if (v->note[0] && v->o->out) fprintf(v->o->out, "  note: %s\n", v->note);
        if (c_mod >= 0) {
            vfy_cmp_merge(v, c_mod, &s_mod);
            vfy_cmp_report(v, c_mod);
        }
    }
    vfy_sink_free(&s_lut);
    vfy_sink_free(&s_mod);
    mts_lut_free(&lut);
    return rc;
}
