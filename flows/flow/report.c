/* report.c - the flow's results: one row per design x model x dataset in
 * results.csv / results.json, Pareto charts drawn by gnuplot (PNG and SVG),
 * and report.html, a single self-contained page (SVG charts inline). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"
#include "mantis/json.h"
#include "mantis/fs.h"
#include "mantis/proc.h"

typedef struct row {
    char design[64], kind[16], format[24], verify[64], model[32], data[32], status[256];
    double mred, nmed, err_rate, bias, wce;
    double area, gates, delay, pw_uniform, pw_work, energy;
    double test_acc, train_acc;
    double cosim_cycles, cosim_energy; /* per inference, step cosim (docs/cosim.md) */
    int baseline, trained;
    char curve[256];     /* per-epoch test accuracy (no timings: results must not depend on the run) */
} row;

static const flow_step *find(const flow_graph *g, const char *design, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->s[i].design, design) && !strcmp(g->s[i].name, name)) return &g->s[i];
    return NULL;
}

static mts_json *load_done(const flow_step *s)
{
    return s && s->state == ST_DONE ? mts_json_load(s->out) : NULL;
}

/* First line of a step's log: the one-line error a failed command printed. */
static void first_error(const flow_graph *g, const flow_step *s, char *buf, size_t n)
{
    char log[FLOW_PATH + 160], line[512] = "";
    FILE *f = mts_fs_pathf(log, sizeof log, "%s/logs/%s/%s.log", g->root, s->design, s->name) ? NULL : fopen(log, "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strstr(line, "mantis ")) break;
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    snprintf(buf, n, "%s", line[0] ? line : s->reason);
}

static void fill_design(const flow_graph *g, const char *d, row *r)
{
    const flow_step *det = find(g, d, "detect"), *ver = find(g, d, "verify");
    mts_json *j = load_done(det);
    snprintf(r->kind, sizeof r->kind, "%s", j ? mts_json_str(j, "kind", "?") : "-");
    snprintf(r->format, sizeof r->format, "%s", j ? mts_json_str(j, "format", "") : "");
    if (j && !r->format[0]) {
        if (!strcmp(r->kind, "int"))
            snprintf(r->format, sizeof r->format, "%s%d", mts_json_num(j, "int_signed", 0) ? "s" : "u",
                     (int)mts_json_num(j, "int_bits", 8));
        else if (!strcmp(r->kind, "accumulator"))
            snprintf(r->format, sizeof r->format, "%s", mts_json_str(j, "acc.acc", ""));
    }
    mts_json_free(j);
    if (det && det->state != ST_DONE) {
        first_error(g, det, r->status, sizeof r->status);
        snprintf(r->verify, sizeof r->verify, "does not fit the drop-in contract");
    } else if (!ver) {
        snprintf(r->verify, sizeof r->verify, "-");
    } else if (ver->state != ST_DONE) {
        snprintf(r->verify, sizeof r->verify, "could not run");
    } else if (ver->exit_code == 0) {
        snprintf(r->verify, sizeof r->verify, "bit-exact");
    } else {
        mts_json *v = mts_json_load(ver->out);
        if (mts_json_num(v, "lut_representable", 1) == 0)
            snprintf(r->verify, sizeof r->verify, "not LUT-representable");
        else
            snprintf(r->verify, sizeof r->verify, "MISMATCH (%.0f)", mts_json_num(v, "mismatches", -1));
        mts_json_free(v);
    }
    j = load_done(find(g, d, "metrics"));
    r->mred = mts_json_num(j, "mred", NAN);
    r->nmed = mts_json_num(j, "nmed", NAN);
    r->err_rate = mts_json_num(j, "error_rate", NAN);
    r->bias = mts_json_num(j, "bias", NAN);
    r->wce = mts_json_num(j, "wce", NAN);
    mts_json_free(j);
    j = load_done(find(g, d, "synth"));
    r->area = mts_json_num(j, "area_um2", NAN);
    r->gates = mts_json_num(j, "nand2_eq", NAN);
    r->delay = mts_json_num(j, "delay_ps", NAN);
    r->pw_uniform = mts_json_num(j, "power.total_uw", NAN);
    r->energy = mts_json_num(j, "power.energy_pj_per_op", NAN);
    mts_json_free(j);
    j = load_done(find(g, d, "power"));
    r->pw_work = mts_json_num(j, "power.total_uw", NAN);
    mts_json_free(j);
    j = load_done(find(g, d, "cosim"));
    r->cosim_cycles = mts_json_num(j, "cycles_per_inference", NAN);
    r->cosim_energy = mts_json_num(j, "energy_pj_per_inference", NAN);
    mts_json_free(j);
}

static void fill_train(const flow_graph *g, row *r)
{
    char name[80]; /* "train-" + model[32] + "-" + data[32] */
    snprintf(name, sizeof name, "train-%s-%s", r->model, r->data);
    const flow_step *s = find(g, r->design, name);
    r->test_acc = r->train_acc = NAN;
    if (!s) return;
    if (s->state != ST_DONE) {
        if (!r->status[0]) {
            if (s->state == ST_SKIPPED) snprintf(r->status, sizeof r->status, "%s", s->reason);
            else first_error(g, s, r->status, sizeof r->status);
        }
        return;
    }
    mts_json *j = mts_json_load(s->out);
    r->test_acc = 100 * mts_json_num(j, "final_test_acc", NAN);
    const mts_json *ep = mts_json_get(j, "epochs");
    size_t used = 0;
    for (const mts_json *e = ep ? ep->child : NULL; e; e = e->next) {
        r->train_acc = 100 * mts_json_num(e, "train_acc", NAN);
        used += (size_t)snprintf(r->curve + used, sizeof r->curve - used, "%s%.2f", used ? " " : "",
                                 100 * mts_json_num(e, "test_acc", NAN));
        if (used >= sizeof r->curve) break;
    }
    r->trained = 1;
    mts_json_free(j);
}

/* The numeric columns of a row, in results.csv / results.json order. */
#define NCOLS 15
static const char *const col_names[NCOLS] = {
    "test_acc", "train_acc", "mred", "nmed", "error_rate", "bias", "wce",
    "area_um2", "nand2_eq", "delay_ps", "power_uniform_uw", "energy_pj_per_op", "power_workload_uw",
    "cosim_cycles_per_inference", "cosim_energy_pj_per_inference"};

static void row_values(const row *r, double v[NCOLS])
{
    const double x[NCOLS] = {r->test_acc, r->train_acc, r->mred, r->nmed, r->err_rate, r->bias, r->wce,
                             r->area, r->gates, r->delay, r->pw_uniform, r->energy, r->pw_work,
                             r->cosim_cycles, r->cosim_energy};
    memcpy(v, x, sizeof x);
}

static void num(FILE *f, double v, const char *fmt)
{
    if (isnan(v)) fputs("", f); else fprintf(f, fmt, v);
}

static void jnum(FILE *f, const char *k, double v)
{
    if (isnan(v)) fprintf(f, "\"%s\": null", k); else fprintf(f, "\"%s\": %.9g", k, v);
}

/* x: 0 area, 1 workload power (uniform when absent), 2 MRED */
static double xval(const row *r, int x)
{
    return x == 0 ? r->area : x == 1 ? (isnan(r->pw_work) ? r->pw_uniform : r->pw_work) : r->mred;
}

/* Pareto-optimal: no other point has x <= and accuracy >= with one strict. */
static int pareto(const row *rows, int n, int i, int x)
{
    double xi = xval(&rows[i], x), ai = rows[i].test_acc;
    for (int k = 0; k < n; k++) {
        double xk = xval(&rows[k], x), ak = rows[k].test_acc;
        if (k == i || isnan(xk) || isnan(ak)) continue;
        if (xk <= xi && ak >= ai && (xk < xi || ak > ai)) return 0;
    }
    return 1;
}

#define CHART_MAX 256 /* rows one chart plots */

/* The chart's data file: three blocks (0 designs, 1 the Pareto front sorted
 * by x, 2 baselines). Returns the number of points, -1 when unwritable. */
static int chart_data(const char *dat, const row *rows, int n, int x)
{
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    int pts = 0;
    for (int pass = 0; pass < 3; pass++) {
        if (pass) fprintf(f, "\n\n");
        int idx[CHART_MAX], m = 0;
        for (int i = 0; i < n && m < CHART_MAX; i++) {
            if (isnan(xval(&rows[i], x)) || isnan(rows[i].test_acc)) continue;
            if ((pass == 2) != rows[i].baseline) continue;
            if (pass == 1 && !pareto(rows, n, i, x)) continue;
            idx[m++] = i;
        }
        for (int a = 1; a < m; a++) /* insertion sort by x */
            for (int b = a; b > 0 && xval(&rows[idx[b]], x) < xval(&rows[idx[b - 1]], x); b--) {
                int t = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = t;
            }
        for (int k = 0; k < m; k++)
            fprintf(f, "%.9g %.6f \"%s\"\n", xval(&rows[idx[k]], x), rows[idx[k]].test_acc, rows[idx[k]].design);
        if (m == 0) fprintf(f, "nan nan \"\"\n");
        pts += m;
    }
    fclose(f);
    return pts;
}

/* The chart's y range: the best accuracy and everything within 12 points of
 * it, so one collapsed design does not flatten the others; those below are
 * named in `omitted` instead. */
typedef struct yrange {
    double lo, hi;
    char omitted[512];
} yrange;

static void chart_range(const row *rows, int n, int x, yrange *y)
{
    double best = -1, lo = 101;
    for (int i = 0; i < n; i++)
        if (!isnan(xval(&rows[i], x)) && rows[i].test_acc > best) best = rows[i].test_acc;
    y->omitted[0] = '\0';
    for (int i = 0; i < n; i++) {
        double a = rows[i].test_acc;
        if (isnan(xval(&rows[i], x)) || isnan(a)) continue;
        if (a >= best - 12) {
            if (a < lo) lo = a;
        } else {
            size_t u = strlen(y->omitted);
            snprintf(y->omitted + u, sizeof y->omitted - u, "%s%.40s %.1f%%", u ? ", " : "below the range: ",
                     rows[i].design, a);
        }
    }
    double pad = (best - lo) * 0.15 + 0.2;
    y->lo = lo - pad;
    y->hi = best + 2.5 * pad;
}

/* The gnuplot script: the same plot as PNG and as SVG. */
static int chart_script(const char *gp, const char *dir, const char *base, const char *dat, const char *title,
                        const char *xlabel, const yrange *y)
{
    FILE *f = fopen(gp, "w");
    if (!f) return -1;
    for (int t = 0; t < 2; t++) {
        fprintf(f, t ? "set terminal svg size 760,460 dynamic font 'sans,11'\n"
                     : "set terminal pngcairo size 1000,600 font 'sans,11'\n");
        fprintf(f, "set output '%s/%s.%s'\n", dir, base, t ? "svg" : "png");
        fprintf(f, "set title \"%s\"\nset xlabel \"%s\"\nset ylabel 'test accuracy (%%)'\nset grid\n"
                   "set termoption noenhanced\nset key outside right top\nset logscale x\n"
                   "set offsets graph 0.05, graph 0.15, 0, 0\nset yrange [%g:%g]\n"
                   "set label 1 \"%s\" at graph 0.01, graph 0.96 left font 'sans,9' tc rgb '#b00020'\n"
                   "plot '%s' index 0 using 1:2 with points pt 7 ps 1.2 lc rgb '#4477aa' title 'designs', \\\n"
                   "     '' index 1 using 1:2 with linespoints pt 6 ps 2.2 lw 2 lc rgb '#cc3311' title 'Pareto-optimal', \\\n"
                   "     '' index 2 using 1:2 with points pt 9 ps 1.8 lc rgb '#228833' title 'baselines', \\\n"
                   "     '' index 0 using 1:2:3 with labels rotate by 35 left offset 0.6,0.4 font 'sans,8' notitle, \\\n"
                   "     '' index 2 using 1:2:3 with labels rotate by 35 left offset 0.6,0.4 font 'sans,8' notitle\n",
                title, xlabel, y->lo, y->hi, y->omitted, dat);
    }
    return fclose(f) ? -1 : 0;
}

/* One chart, dir/base.{dat,gp,png,svg}: 0 drawn, 1 nothing to plot, -1
 * failed (the script stays in dir). */
static int chart(const char *dir, const char *base, const row *rows, int n, int x, const char *title,
                 const char *xlabel)
{
    char dat[FLOW_PATH + 64], gp[FLOW_PATH + 64];
    if (mts_fs_pathf(dat, sizeof dat, "%s/%s.dat", dir, base) || mts_fs_pathf(gp, sizeof gp, "%s/%s.gp", dir, base))
        return -1;
    int pts = chart_data(dat, rows, n, x);
    if (pts <= 0) return pts < 0 ? -1 : 1;
    yrange y;
    chart_range(rows, n, x, &y);
    if (chart_script(gp, dir, base, dat, title, xlabel, &y)) return -1;
    char *argv[] = {"gnuplot", gp, NULL}; /* its output is of no use: the files are the result */
    return mts_proc_run(argv, NULL) == 0 ? 0 : -1;
}

static void html_esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

static void inline_file(FILE *out, const char *path)
{
    uint8_t *b;
    size_t n;
    if (mts_fs_read(path, &b, &n, NULL)) return;
    const char *s = (const char *)b, *start = strstr(s, "<svg"); /* drop the XML prolog */
    fwrite(start ? start : s, 1, n - (size_t)(start ? start - s : 0), out);
    free(b);
}

/* The first line `tool flag` prints, "not found" when it printed nothing. */
static void tool_version(const char *tool, const char *flag, char *buf, size_t n)
{
    char *argv[] = {(char *)tool, (char *)flag, NULL};
    mts_proc_first_line(argv, buf, n);
    if (!buf[0]) snprintf(buf, n, "not found");
}

static void cell(FILE *h, double v, const char *fmt)
{
    fputs("<td>", h);
    if (isnan(v)) fputs("&ndash;", h); else fprintf(h, fmt, v);
    fputs("</td>", h);
}

/* Everything one report is made from. */
#define NAXES 3
typedef struct report {
    const flow_cfg *c;
    const flow_graph *g;
    const char *cmdline;
    char designs[256][64];     /* in step order */
    int nd;
    row *rows;                 /* design x model x dataset */
    int n;
    char cdir[FLOW_PATH + 16]; /* charts/ */
    int chart_rc[FLOW_MAX_LIST][FLOW_MAX_LIST][NAXES]; /* chart()'s result per model, dataset, axis */
} report;

static const char *const axis_name[NAXES] = {"area", "power", "mred"};
static const char *const axis_label[NAXES] = {
    "multiplier area (um^2, mantis45 liberty)",
    "multiplier power (uW at 1 GHz; workload trace, else uniform operands)",
    "mean relative error distance (MRED)"};

static void chart_names(const report *rp, int m, int s, int x, char base[128], char title[160])
{
    const flow_cfg *c = rp->c;
    snprintf(base, 128, "%s-%s-%s", axis_name[x], c->models[m], c->datasets[s]);
    snprintf(title, 160, "%s on %s: test accuracy vs %s", c->models[m], c->datasets[s], axis_name[x]);
}

/* Step 1: the designs in step order, then one row per design x model x
 * dataset with its figures from the step outputs. */
static int collect_rows(report *rp, mts_err *err)
{
    const flow_cfg *c = rp->c;
    const flow_graph *g = rp->g;
    for (int i = 0; i < g->n && rp->nd < 256; i++) {
        int seen = 0;
        for (int k = 0; k < rp->nd; k++) seen |= !strcmp(rp->designs[k], g->s[i].design);
        if (!seen) snprintf(rp->designs[rp->nd++], 64, "%s", g->s[i].design);
    }
    rp->rows = calloc((size_t)(rp->nd * c->nmodels * c->ndatasets + 1), sizeof *rp->rows);
    if (!rp->rows) return mts_fail(err, MTS_ENOMEM, "flow: out of memory");
    for (int d = 0; d < rp->nd; d++)
        for (int m = 0; m < c->nmodels; m++)
            for (int s = 0; s < c->ndatasets; s++) {
                row *r = &rp->rows[rp->n++];
                memcpy(r->design, rp->designs[d], sizeof r->design); /* same size, NUL-terminated */
                snprintf(r->model, sizeof r->model, "%s", c->models[m]);
                snprintf(r->data, sizeof r->data, "%s", c->datasets[s]);
                r->baseline = !strncmp(rp->designs[d], "baseline-", 9);
                fill_design(g, rp->designs[d], r);
                fill_train(g, r);
            }
    return MTS_OK;
}

static void write_csv(FILE *f, const report *rp)
{
    fprintf(f, "design,kind,format,verify,model,dataset");
    for (int k = 0; k < NCOLS; k++) fprintf(f, ",%s", col_names[k]);
    fprintf(f, ",status\n");
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        fprintf(f, "%s,%s,%s,%s,%s,%s,", r->design, r->kind, r->format, r->verify, r->model, r->data);
        double v[NCOLS];
        row_values(r, v);
        for (int k = 0; k < NCOLS; k++) {
            num(f, v[k], "%.9g");
            fputc(',', f);
        }
        fputc('"', f);
        for (const char *p = r->status; *p; p++) fputs(*p == '"' ? "\"\"" : (char[]){*p, 0}, f);
        fputs("\"\n", f);
    }
}

/* `"key": "value", ` with the value a JSON string. */
static void jstr(FILE *f, const char *k, const char *v)
{
    fprintf(f, "\"%s\": ", k);
    mts_json_write_str(f, v);
    fputs(", ", f);
}

static void write_json(FILE *f, const report *rp)
{
    fputc('{', f);
    jstr(f, "mantis", MANTIS_VERSION);
    fprintf(f, "\"rows\": [");
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        fprintf(f, "%s\n  {", i ? "," : "");
        jstr(f, "design", r->design);
        jstr(f, "kind", r->kind);
        jstr(f, "format", r->format);
        jstr(f, "verify", r->verify);
        jstr(f, "model", r->model);
        jstr(f, "dataset", r->data);
        double v[NCOLS];
        row_values(r, v);
        for (int k = 0; k < NCOLS; k++) {
            jnum(f, col_names[k], v[k]);
            fputs(", ", f);
        }
        fprintf(f, "\"baseline\": %s, \"status\": ", r->baseline ? "true" : "false");
        mts_json_write_str(f, r->status);
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
}

/* Step: the charts of every model x dataset into charts/ (their results go
 * into the page). */
static void draw_charts(report *rp)
{
    const flow_cfg *c = rp->c;
    snprintf(rp->cdir, sizeof rp->cdir, "%s/charts", rp->g->root);
    mts_fs_mkdirs(rp->cdir, NULL); /* a failure shows as failed charts */
    row *sub = malloc(CHART_MAX * sizeof *sub);
    for (int m = 0; m < c->nmodels; m++)
        for (int s = 0; s < c->ndatasets; s++) {
            int ns = 0;
            for (int i = 0; sub && i < rp->n && ns < CHART_MAX; i++)
                if (!strcmp(rp->rows[i].model, c->models[m]) && !strcmp(rp->rows[i].data, c->datasets[s]))
                    sub[ns++] = rp->rows[i];
            for (int x = 0; x < NAXES; x++) {
                char base[128], title[160];
                chart_names(rp, m, s, x, base, title);
                rp->chart_rc[m][s][x] = sub ? chart(rp->cdir, base, sub, ns, x, title, axis_label[x]) : -1;
            }
        }
    free(sub);
}

static void html_head(FILE *f, const report *rp)
{
    const flow_cfg *c = rp->c;
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Mantis report</title>\n<style>"
               "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;"
               "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
               "td:first-child,th:first-child{text-align:left}.ok{color:#176d1b;font-weight:bold}"
               ".bad{color:#b00020;font-weight:bold}.st{text-align:left;font-size:12px;color:#555}"
               "figure{display:inline-block;margin:0 1em 1em 0}</style></head><body>\n"
               "<h1>Mantis report</h1>\n<p>%d designs and %d baselines; models: ", rp->nd - c->nbaselines,
            c->nbaselines);
    for (int m = 0; m < c->nmodels; m++) fprintf(f, "%s%s", m ? ", " : "", c->models[m]);
    fprintf(f, "; data sets: ");
    for (int s = 0; s < c->ndatasets; s++) fprintf(f, "%s%s", s ? ", " : "", c->datasets[s]);
    fprintf(f, "; %d epoch(s)%s.</p>\n", c->epochs, c->quick ? ", quick profile (subset of the training data)" : "");
}

/* The charts inline (SVG), or why one is missing. */
static void html_charts(FILE *f, const report *rp)
{
    const flow_cfg *c = rp->c;
    for (int m = 0; m < c->nmodels; m++)
        for (int s = 0; s < c->ndatasets; s++) {
            fprintf(f, "<h2>%s on %s</h2>\n", c->models[m], c->datasets[s]);
            for (int x = 0; x < NAXES; x++) {
                char base[128], title[160];
                chart_names(rp, m, s, x, base, title);
                int rc = rp->chart_rc[m][s][x];
                fprintf(f, "<figure>");
                if (rc == 0) {
                    char svg[FLOW_PATH + 200];
                    snprintf(svg, sizeof svg, "%s/%s.svg", rp->cdir, base);
                    inline_file(f, svg);
                } else {
                    fprintf(f, "<p>%s: %s</p>", title, rc > 0 ? "no trained design has this figure yet" :
                                                                 "gnuplot failed (charts/ has the script)");
                }
                fprintf(f, "</figure>\n");
            }
        }
}

static void html_table(FILE *f, const report *rp)
{
    fprintf(f, "<h2>Designs</h2>\n<table><tr><th>design</th><th>kind</th><th>format</th><th>verification</th>"
               "<th>model</th><th>data</th><th>test acc %%</th><th>train acc %%</th><th>test acc per epoch</th>"
               "<th>MRED</th><th>NMED</th><th>error rate</th><th>bias</th><th>area um&sup2;</th><th>NAND2 eq</th>"
               "<th>delay ps</th><th>power uW (uniform)</th><th>pJ/op</th><th>power uW (workload)</th>"
               "<th>cosim cycles / inference</th><th>cosim pJ / inference</th>"
               "<th>notes</th></tr>\n");
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        int ok = !strcmp(r->verify, "bit-exact");
        fprintf(f, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s%s</td><td>%s</td><td>%s</td>",
                r->design, r->kind, r->format, ok ? "ok" : r->baseline ? "" : "bad", ok ? "&#10004; " : "",
                r->baseline ? "C model" : r->verify, r->model, r->data);
        cell(f, r->test_acc, "%.2f");
        cell(f, r->train_acc, "%.2f");
        fprintf(f, "<td>%s</td>", r->curve);
        cell(f, r->mred, "%.3g");
        cell(f, r->nmed, "%.3g");
        cell(f, r->err_rate, "%.3f");
        cell(f, r->bias, "%.3g");
        cell(f, r->area, "%.1f");
        cell(f, r->gates, "%.0f");
        cell(f, r->delay, "%.0f");
        cell(f, r->pw_uniform, "%.1f");
        cell(f, r->energy, "%.4f");
        cell(f, r->pw_work, "%.1f");
        cell(f, r->cosim_cycles, "%.0f");
        cell(f, r->cosim_energy, "%.4g");
        fprintf(f, "<td class=\"st\">");
        html_esc(f, r->status);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n");
}

/* How this was made: the command, the tool versions, every step's command. */
static void html_provenance(FILE *f, const report *rp)
{
    static const char *const tools[3][2] = {{"verilator", "--version"}, {"yosys", "-V"}, {"gnuplot", "--version"}};
    fprintf(f, "<h2>How this was made</h2>\n<pre>");
    html_esc(f, rp->cmdline);
    fprintf(f, "\nmantis %s", MANTIS_VERSION);
    for (int t = 0; t < 3; t++) {
        char ver[256];
        tool_version(tools[t][0], tools[t][1], ver, sizeof ver);
        fputc('\n', f);
        html_esc(f, ver);
    }
    fprintf(f, "</pre>\n<p>Step commands (each output is keyed by a hash of its inputs; logs in logs/):</p><pre>");
    const flow_graph *g = rp->g;
    for (int i = 0; i < g->n; i++) {
        fprintf(f, "%s/%s: mantis", g->s[i].design, g->s[i].name);
        for (int a = 0; a < g->s[i].argc; a++) {
            fputc(' ', f);
            html_esc(f, g->s[i].argv[a]);
        }
        fputc('\n', f);
    }
    fprintf(f, "</pre>\n<p>Area, delay and power are relative 45 nm estimates from the project's own liberty "
               "(synth/mantis45.lib) for ranking designs, not sign-off numbers.</p>\n</body></html>\n");
}

static void write_html(FILE *f, const report *rp)
{
    html_head(f, rp);
    html_charts(f, rp);
    html_table(f, rp);
    html_provenance(f, rp);
}

/* Writes root/name atomically from what fn prints; its path into path. */
typedef struct emit_ctx {
    void (*fn)(FILE *, const report *);
    const report *rp;
} emit_ctx;

static void emit_fn(FILE *f, void *ctx)
{
    const emit_ctx *ec = ctx;
    ec->fn(f, ec->rp);
}

static int emit(const report *rp, const char *name, void (*fn)(FILE *, const report *), char *path, size_t cap,
                mts_err *err)
{
    if (mts_fs_pathf(path, cap, "%s/%s", rp->g->root, name))
        return mts_fail(err, MTS_EINVAL, "%s: results path too long", rp->g->root);
    emit_ctx ec = {fn, rp};
    return mts_fs_write_stream(path, emit_fn, &ec, err);
}

/* The summary table on the progress stream. */
static void print_summary(FILE *out, const report *rp, const char *html)
{
    fprintf(out, "\n%-22s %-12s %-9s %-22s %-18s %8s %10s %10s %9s\n", "design", "kind", "format", "verification",
            "model/data", "test%", "area um2", "uW(work)", "MRED");
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        char md[72];
        snprintf(md, sizeof md, "%.31s/%.31s", r->model, r->data);
        fprintf(out, "%-22s %-12s %-9s %-22s %-18s %8.2f %10.1f %10.1f %9.3g\n", r->design, r->kind, r->format,
                r->baseline ? "C model" : r->verify, md, r->test_acc, r->area,
                isnan(r->pw_work) ? r->pw_uniform : r->pw_work, r->mred);
    }
    fprintf(out, "\nreport: %s\n", html);
}

int flow_report(const flow_cfg *c, const flow_graph *g, const char *cmdline, FILE *out, mts_err *err)
{
    report *rp = calloc(1, sizeof *rp);
    if (!rp) return mts_fail(err, MTS_ENOMEM, "flow: out of memory");
    rp->c = c;
    rp->g = g;
    rp->cmdline = cmdline;
    char path[FLOW_PATH + 64];
    int rc = collect_rows(rp, err);
    if (!rc) rc = emit(rp, "results.csv", write_csv, path, sizeof path, err);
    if (!rc) rc = emit(rp, "results.json", write_json, path, sizeof path, err);
    if (!rc) {
        draw_charts(rp);
        rc = emit(rp, "report.html", write_html, path, sizeof path, err);
        if (out) print_summary(out, rp, path); /* the table is worth seeing even when the page failed */
    }
    free(rp->rows);
    free(rp);
    return rc;
}
