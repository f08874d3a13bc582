/* cosim_cmd.c - `mantis cosim`: replays a dumped layer GEMM (gemmdump.h)
 * through the SystemC systolic array (include/mantis/cosim.h) with the
 * user's multiplier, checks it bit for bit against mts_gemm and prints
 * cycles, utilisation, operand activity and the energy estimate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/cosim.h"
#include "mantis/fs.h"
#include "mantis/json.h"
#include "mantis/rtl.h"
#include "mul_opts.h"

#define CMD "cosim"

static const char usage_text[] =
    "usage: mantis cosim --rtl MUL.v --array RxC --gemm FILE [options]\n"
    "  --gemm FILE        a layer GEMM from `mantis train|test --dump-gemm LAYER:FILE`\n"
    "  --array RxC        processing elements, e.g. 16x16 (rows x columns, each 1..256)\n"
    "  --dataflow ws|os   weight- or output-stationary (default ws)\n"
    "  --mode lut|rtl     each PE multiplies through the design's LUT (default) or the\n"
    "                     Verilated RTL itself\n"
    "  --acc ACC.v        an FMAq accumulator design in every PE (formats from the design)\n"
    "  --fmaq FMT [--fmaq-prod FMT] [--acc-bias B] [--prod-bias B] [--chunk N]\n"
    "                     FMAq accumulation with the model (mts_fmaq) instead of FP32\n"
    "  --synth FILE       `mantis synth --json` output of the multiplier: energy estimate\n"
    "  --batch N          samples the GEMM covers (default: the dump's) for per-inference figures\n"
    "  --vcd FILE         sc_trace waveforms of every PE (FILE.vcd; small runs: <= 1024 PEs,\n"
    "                     <= 4M PE-cycles)\n"
    "  --json OUT|-       write the results as JSON to OUT (atomically), or to stdout with '-'\n"
    "                     (the text then goes to stderr)\n"
    "multiplier (instead of --rtl, lut mode only):\n"
    "  --mul NAME [--man-bits M | --format F] | --lut FILE\n"
    "Exit status: 0 bit-exact, 1 a mismatch against mts_gemm, 2 could not run.\n";

typedef struct cosim_opts {
    mulsel sel;
    const char *gemm, *acc, *fmaq, *fmaq_prod, *synth, *vcd, *json, *mode, *dataflow;
    int rows, cols, acc_bias, prod_bias, chunk, batch;
} cosim_opts;

static int parse_array(const char *v, int *r, int *c)
{
    const char *x = strpbrk(v, "xX");
    char rows[16];
    long a, b;
    if (!x || (size_t)(x - v) >= sizeof rows) return -1;
    snprintf(rows, sizeof rows, "%.*s", (int)(x - v), v);
    if (mts_parse_int(rows, 1, 256, &a) || mts_parse_int(x + 1, 1, 256, &b)) return -1;
    *r = (int)a, *c = (int)b;
    return 0;
}

static int parse(int argc, char **argv, cosim_opts *o, int *help)
{
    mts_err err;
    memset(o, 0, sizeof *o);
    mulsel_init(&o->sel);
    o->mode = "lut", o->dataflow = "ws", o->acc_bias = o->prod_bias = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            fputs(usage_text, stdout);
            *help = 1;
            return 0;
        }
        int r = mulsel_arg(&o->sel, argc, argv, &i, &err);
        if (r < 0) return cli_error(CMD, "%s", err.msg);
        if (r > 0) continue;
        if (i + 1 >= argc) return cli_error(CMD, "option %s needs a value (see mantis cosim --help)", a);
        const char *v = argv[++i];
        long l;
        if (!strcmp(a, "--gemm")) o->gemm = v;
        else if (!strcmp(a, "--acc")) o->acc = v;
        else if (!strcmp(a, "--fmaq")) o->fmaq = v;
        else if (!strcmp(a, "--fmaq-prod")) o->fmaq_prod = v;
        else if (!strcmp(a, "--synth")) o->synth = v;
        else if (!strcmp(a, "--vcd")) o->vcd = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--mode")) o->mode = v;
        else if (!strcmp(a, "--dataflow")) o->dataflow = v;
        else if (!strcmp(a, "--array")) {
            if (parse_array(v, &o->rows, &o->cols))
                return cli_error(CMD, "--array '%s': expected RxC with 1 <= R, C <= 256", v);
        } else if (!strcmp(a, "--acc-bias") || !strcmp(a, "--prod-bias") || !strcmp(a, "--chunk") ||
                   !strcmp(a, "--batch")) {
            if (mts_parse_int(v, !strcmp(a, "--chunk") || !strcmp(a, "--batch") ? 1 : 0, 1 << 20, &l))
                return cli_error(CMD, "%s '%s': expected a non-negative integer", a, v);
            if (!strcmp(a, "--acc-bias")) o->acc_bias = (int)l;
            else if (!strcmp(a, "--prod-bias")) o->prod_bias = (int)l;
            else if (!strcmp(a, "--chunk")) o->chunk = (int)l;
            else o->batch = (int)l;
        } else
            return cli_error(CMD, "unknown option %s (see mantis cosim --help)", a);
    }
    if (!o->gemm || !o->rows) return cli_error(CMD, "--gemm FILE and --array RxC are required (see mantis cosim --help)");
    if (!!o->sel.mul + !!o->sel.lut + !!o->sel.rtl != 1)
        return cli_error(CMD, "give exactly one multiplier: --rtl MUL.v, --mul NAME or --lut FILE");
    if (strcmp(o->mode, "lut") && strcmp(o->mode, "rtl")) return cli_error(CMD, "--mode '%s': expected lut or rtl", o->mode);
    if (!strcmp(o->mode, "rtl") && !o->sel.rtl) return cli_error(CMD, "--mode rtl needs --rtl MUL.v");
    if (strcmp(o->dataflow, "ws") && strcmp(o->dataflow, "os"))
        return cli_error(CMD, "--dataflow '%s': expected ws or os", o->dataflow);
    if (o->acc && o->fmaq) return cli_error(CMD, "give --acc ACC.v or --fmaq FMT, not both");
    return 0;
}

/* What the run opened; closed by close_all. */
typedef struct opened {
    mulhandle h;
    mts_rtl *acc;
    mts_provider p;
    char desc[160];
} opened;

static uint32_t acc_rtl(void *ud, uint32_t prod, uint32_t s) { return mts_rtl_acc(ud, prod, s); }

static void close_all(opened *x)
{
    mulhandle_close(&x->h);
    if (x->acc) mts_rtl_close(x->acc);
}

/* The multiplier as a provider: the design's LUT (lut mode), the Verilated
 * RTL per product (rtl mode), or the --mul / --lut selection. */
static int open_mul(const cosim_opts *o, opened *x, mts_err *err)
{
    int rc;
    memset(&x->p, 0, sizeof x->p);
    x->p.threads = 1;
    if (!o->sel.rtl) {
        if ((rc = mulsel_open(&o->sel, &x->h, err))) return rc;
        if (x->h.is_int) return mts_fail(err, MTS_EINVAL, "an integer table does not fit the float MAC array");
        if (x->h.lut.entry) {
            x->p.kind = MTS_PROV_LUT, x->p.lut = &x->h.lut;
            snprintf(x->desc, sizeof x->desc, "lut %s", o->sel.lut);
        } else {
            x->p.kind = MTS_PROV_MULOP, x->p.mul = &x->h.op;
            snprintf(x->desc, sizeof x->desc, "model %s", x->h.op.name);
        }
        return MTS_OK;
    }
    mts_rtl_opts ro;
    mts_rtl *r;
    if ((rc = mulsel_rtl_opts(&o->sel, &ro, err)) || (rc = mts_rtl_open(&ro, &r, err))) return rc;
    x->h.rtl = r;
    const mts_rtl_info *in = mts_rtl_get_info(r);
    if (in->kind != MTS_RTL_SIG && in->kind != MTS_RTL_FLOAT)
        return mts_fail(err, MTS_EINVAL, "%s: a design of kind %s (%s, %s -> %s) does not fit a PE's multiplier: it needs a "
                        "float or significand multiplier (docs/rtl.md)", o->sel.rtl, mts_rtl_kind_name(in->kind),
                        in->in0, in->in1, in->out);
    if (!strcmp(o->mode, "rtl")) {
        if ((rc = mts_rtl_mulop(r, &x->h.op, err))) return rc;
        x->p.kind = MTS_PROV_MULOP, x->p.mul = &x->h.op;
        snprintf(x->desc, sizeof x->desc, "rtl mode, %s", in->name);
    } else {
        if ((rc = mts_rtl_lut(r, &x->h.lut, err))) return rc;
        x->p.kind = MTS_PROV_LUT, x->p.lut = &x->h.lut;
        snprintf(x->desc, sizeof x->desc, "lut mode, %s", in->name);
    }
    return MTS_OK;
}

static int open_acc(const cosim_opts *o, opened *x, mts_cosim_config *c, mts_err *err)
{
    int rc;
    if (o->fmaq) {
        if ((rc = mts_qfmt_parse(o->fmaq, o->acc_bias, &x->p.qacc, err)) ||
            (rc = mts_qfmt_parse(o->fmaq_prod ? o->fmaq_prod : o->fmaq, o->prod_bias, &x->p.qprod, err)))
            return rc;
        x->p.fmaq = 1;
    } else if (o->acc) {
        mts_rtl_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.path = o->acc;
        if ((rc = mts_rtl_open(&ro, &x->acc, err))) return rc;
        const mts_rtl_info *in = mts_rtl_get_info(x->acc);
        if (in->kind != MTS_RTL_ACC)
            return mts_fail(err, MTS_EINVAL, "%s: a design of kind %s (%s, %s -> %s) does not fit a PE's accumulator: --acc "
                            "needs an FMAq accumulator (p, s -> y, docs/rtl.md)", o->acc, mts_rtl_kind_name(in->kind),
                            in->in0, in->in1, in->out);
        x->p.fmaq = 1, x->p.qprod = in->qprod, x->p.qacc = in->qacc;
        c->acc = acc_rtl, c->acc_ud = x->acc;
    }
    x->p.chunk = o->chunk;
    return MTS_OK;
}

static void write_json(FILE *f, void *ud)
{
    const void *const *v = ud;
    const cosim_opts *o = v[0];
    const mts_cosim_result *r = v[1];
    const double *e = v[2];
    const mts_gemmdump *g = v[3];
    const char *desc = v[4];
    int batch = o->batch ? o->batch : (g->batch ? g->batch : 1);
    char array[32];
    snprintf(array, sizeof array, "%dx%d", o->rows, o->cols);
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 1);
    mts_jw_str(&w, "gemm", o->gemm);
    mts_jw_str(&w, "layer", g->layer);
    mts_jw_int(&w, "m", r->m);
    mts_jw_int(&w, "n", r->n);
    mts_jw_int(&w, "k", r->k);
    mts_jw_int(&w, "batch", batch);
    mts_jw_str(&w, "array", array);
    mts_jw_str(&w, "dataflow", o->dataflow);
    mts_jw_str(&w, "mode", o->mode);
    mts_jw_str(&w, "multiplier", desc);
    mts_jw_bool(&w, "bit_exact", !r->mismatches);
    mts_jw_uint(&w, "mismatches", (unsigned long long)r->mismatches);
    mts_jw_uint(&w, "cycles", (unsigned long long)r->cycles);
    mts_jw_uint(&w, "fill", (unsigned long long)r->fill);
    mts_jw_uint(&w, "compute", (unsigned long long)r->compute);
    mts_jw_uint(&w, "drain", (unsigned long long)r->drain);
    mts_jw_num(&w, "cycles_per_inference", (double)r->cycles / batch, "%.3f");
    mts_jw_uint(&w, "macs", (unsigned long long)r->macs);
    mts_jw_num(&w, "pe_utilisation", r->utilisation, "%.6f");
    mts_jw_num(&w, "macs_per_cycle", r->macs_per_cycle, "%.4f");
    mts_jw_uint(&w, "toggles_a", (unsigned long long)r->toggles_a);
    mts_jw_uint(&w, "toggles_b", (unsigned long long)r->toggles_b);
    mts_jw_num(&w, "toggles_per_product",
               r->products ? (double)(r->toggles_a + r->toggles_b) / (double)r->products : 0.0, "%.4f");
    mts_jw_int(&w, "operand_bits", r->operand_bits);
    mts_jw_num(&w, "energy_pj", *e >= 0 ? *e : NAN, "%.4f"); /* null: no --synth, no energy */
    mts_jw_num(&w, "energy_pj_per_inference", *e >= 0 ? *e / batch : NAN, "%.4f");
    mts_jw_num(&w, "sim_seconds", r->seconds, "%.4f");
    mts_jw_num(&w, "pe_cycles_per_s", r->seconds > 0 ? (double)r->pe_cycles / r->seconds : 0.0, "%.1f");
    mts_jw_end(&w);
}

int cmd_cosim(int argc, char **argv)
{
    cosim_opts o;
    int help = 0, rc = parse(argc, argv, &o, &help);
    if (rc || help) return rc;
    mts_err err;
    if (!mts_cosim_available()) {
        cli_error(CMD, "built without SystemC (install libsystemc-dev and rebuild)");
        return cli_exit(MTS_EUNSUPPORTED);
    }
    mts_gemmdump g;
    if ((rc = mts_gemmdump_read(o.gemm, &g, &err))) return cli_fail(CMD, rc, &err);
    opened x;
    memset(&x, 0, sizeof x);
    mts_cosim_config c;
    memset(&c, 0, sizeof c);
    c.rows = o.rows, c.cols = o.cols, c.check = 1, c.vcd = o.vcd, c.p = &x.p;
    c.dataflow = !strcmp(o.dataflow, "os") ? MTS_COSIM_OS : MTS_COSIM_WS;
    mts_cosim_result r;
    double energy = -1;
    char vcdbase[1024];
    if (o.vcd) { /* SystemC appends ".vcd" itself */
        size_t n = strlen(o.vcd);
        snprintf(vcdbase, sizeof vcdbase, "%.*s", (int)(n > 4 && !strcmp(o.vcd + n - 4, ".vcd") ? n - 4 : n), o.vcd);
        c.vcd = vcdbase;
    }
    if (!(rc = open_mul(&o, &x, &err)) && !(rc = open_acc(&o, &x, &c, &err)))
        rc = mts_cosim_run(&c, &g, NULL, &r, &err);
    if (rc == MTS_OK && o.synth) rc = mts_cosim_energy(o.synth, &r, &energy, &err);
    if (rc != MTS_OK) {
        close_all(&x);
        mts_gemmdump_free(&g);
        return cli_fail(CMD, rc, &err);
    }
    int batch = o.batch ? o.batch : (g.batch ? g.batch : 1);
    char qn[64] = "FP32", qp[64];
    if (x.p.fmaq) {
        mts_qfmt_name(&x.p.qacc, qn, sizeof qn);
        mts_qfmt_name(&x.p.qprod, qp, sizeof qp);
    }
    FILE *t = cli_text(o.json, NULL); /* stderr when the JSON goes to stdout */
    fprintf(t, "cosim: %s GEMM %dx%dx%d (batch %d) on a %dx%d %s array, %s; accumulation %s%s%s%s\n",
           g.layer[0] ? g.layer : "?", g.m, g.n, g.k, batch, o.rows, o.cols, o.dataflow, x.desc,
           x.p.fmaq ? "FMAq acc " : "", qn, x.p.fmaq ? " prod " : "", x.p.fmaq ? qp : "");
    if (!r.mismatches) {
        fprintf(t, "check: bit-exact against mts_gemm (%d outputs)\n", g.m * g.n);
    } else {
        fprintf(t, "check: MISMATCH in %zu of %d outputs against mts_gemm; first:\n", r.mismatches, g.m * g.n);
        for (int i = 0; i < r.nshow; i++)
            fprintf(t, "  C[%d][%d]: array 0x%08X, mts_gemm 0x%08X\n", r.show_i[i], r.show_j[i], r.got[i], r.want[i]);
    }
    fprintf(t, "cycles: %llu (fill %llu, compute %llu, drain %llu); %.1f per inference\n", (unsigned long long)r.cycles,
           (unsigned long long)r.fill, (unsigned long long)r.compute, (unsigned long long)r.drain,
           (double)r.cycles / batch);
    fprintf(t, "PE utilisation %.1f%%, %.2f MACs/cycle\n", 100 * r.utilisation, r.macs_per_cycle);
    fprintf(t, "operand toggles: %.3f per product (a %.3f, b %.3f; codes of %d bits)\n",
           r.products ? (double)(r.toggles_a + r.toggles_b) / (double)r.products : 0.0,
           r.products ? (double)r.toggles_a / (double)r.products : 0.0,
           r.products ? (double)r.toggles_b / (double)r.products : 0.0, r.operand_bits);
    if (energy >= 0) fprintf(t, "energy: %.4g pJ per inference (multipliers, from %s)\n", energy / batch, o.synth);
    else fprintf(t, "energy: unavailable (give --synth FILE from `mantis synth --json`)\n");
    fprintf(t, "simulated %.3g M PE-cycles in %.2f s (%.2f M PE-cycles/s)\n", (double)r.pe_cycles / 1e6, r.seconds,
           r.seconds > 0 ? (double)r.pe_cycles / r.seconds / 1e6 : 0.0);
    if (o.vcd) fprintf(t, "waveforms: %s.vcd\n", vcdbase);
    const void *ud[5] = {&o, &r, &energy, &g, x.desc};
    int st = cli_output(CMD, o.json, write_json, (void *)ud);
    close_all(&x);
    mts_gemmdump_free(&g);
    if (st) return st;
    return r.mismatches ? cli_exit(MTS_EMISMATCH) : 0;
}
