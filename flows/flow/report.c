/* flow_report.c - the flow's results: one row per design x model x dataset in
 * results.csv / results.json, Pareto charts drawn by gnuplot (PNG and SVG),
 * and report.html, a single self-contained page (SVG charts inline). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flow.h"
#include "mantis/json.h"
#include "mantis/fs.h"
#include "mantis/binio.h"

typedef struct row {
    char design[64], kind[16], format[24], verify[64], model[32], data[32], status[256];
    double mred, nmed, err_rate, bias, wce;
    double area, gates, delay, pw_uniform, pw_work, energy;
    double test_acc, train_acc;
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

static int chart(const char *dir, const char *base, const row *rows, int n, int x, const char *title,
                 const char *xlabel)
{
    char dat[FLOW_PATH + 64], gp[FLOW_PATH + 64];
    if (mts_fs_pathf(dat, sizeof dat, "%s/%s.dat", dir, base) || mts_fs_pathf(gp, sizeof gp, "%s/%s.gp", dir, base))
        return -1;
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    int pts = 0;
    for (int pass = 0; pass < 3; pass++) { /* 0 designs, 1 Pareto front (sorted by x), 2 baselines */
        if (pass) fprintf(f, "\n\n");
        int idx[256], m = 0;
        for (int i = 0; i < n && m < 256; i++) {
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
    if (!pts) return 1;
    /* y range: the best accuracy and everything within 12 points of it, so one
     * collapsed design does not flatten the others; it is named instead */
    double best = -1, lo = 101;
    for (int i = 0; i < n; i++)
        if (!isnan(xval(&rows[i], x)) && rows[i].test_acc > best) best = rows[i].test_acc;
    char omitted[512] = "";
    for (int i = 0; i < n; i++) {
        double a = rows[i].test_acc;
        if (isnan(xval(&rows[i], x)) || isnan(a)) continue;
        if (a >= best - 12) {
            if (a < lo) lo = a;
        } else {
            size_t u = strlen(omitted);
            snprintf(omitted + u, sizeof omitted - u, "%s%.40s %.1f%%", u ? ", " : "below the range: ", rows[i].design, a);
        }
    }
    double pad = (best - lo) * 0.15 + 0.2;
    f = fopen(gp, "w");
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
                title, xlabel, lo - pad, best + 2.5 * pad, omitted, dat);
    }
    fclose(f);
    char cmd[3 * FLOW_PATH];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' >/dev/null 2>&1", gp);
    return system(cmd) == 0 ? 0 : -1;
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

static void tool_version(const char *cmd, char *buf, size_t n)
{
    FILE *p = popen(cmd, "r");
    buf[0] = '\0';
    if (p) {
        if (!fgets(buf, (int)n, p)) buf[0] = '\0';
        pclose(p);
    }
    buf[strcspn(buf, "\n")] = '\0';
    if (!buf[0]) snprintf(buf, n, "not found");
}

/* Writes a whole text file atomically from a memory stream. */
static int commit(const char *path, char *buf, size_t len, mts_err *err)
{
    const void *parts[1] = {buf};
    int rc = mts_fs_write_atomic(path, 1, parts, &len, err);
    free(buf);
    return rc;
}

static void cell(FILE *h, double v, const char *fmt)
{
    fputs("<td>", h);
    if (isnan(v)) fputs("&ndash;", h); else fprintf(h, fmt, v);
    fputs("</td>", h);
}

int flow_report(const flow_cfg *c, const flow_graph *g, const char *cmdline, mts_err *err)
{
    /* the designs in step order, then rows design x model x dataset */
    char designs[256][64];
    int nd = 0;
    for (int i = 0; i < g->n && nd < 256; i++) {
        int seen = 0;
        for (int k = 0; k < nd; k++) seen |= !strcmp(designs[k], g->s[i].design);
        if (!seen) snprintf(designs[nd++], 64, "%s", g->s[i].design);
    }
    int cap = nd * c->nmodels * c->ndatasets + 1, n = 0;
    row *rows = calloc((size_t)cap, sizeof *rows);
    if (!rows) return mts_fail(err, MTS_ENOMEM, "flow: out of memory");
    for (int d = 0; d < nd; d++)
        for (int m = 0; m < c->nmodels; m++)
            for (int s = 0; s < c->ndatasets; s++) {
                row *r = &rows[n++];
                memcpy(r->design, designs[d], sizeof r->design); /* same size, NUL-terminated */
                snprintf(r->model, sizeof r->model, "%s", c->models[m]);
                snprintf(r->data, sizeof r->data, "%s", c->datasets[s]);
                r->baseline = !strncmp(designs[d], "baseline-", 9);
                fill_design(g, designs[d], r);
                fill_train(g, r);
            }
    /* results.csv and results.json */
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "design,kind,format,verify,model,dataset,test_acc,train_acc,mred,nmed,error_rate,"
               "bias,wce,area_um2,nand2_eq,delay_ps,power_uniform_uw,energy_pj_per_op,power_workload_uw,status\n");
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
        fprintf(f, "%s,%s,%s,%s,%s,%s,", r->design, r->kind, r->format, r->verify, r->model, r->data);
        double v[] = {r->test_acc, r->train_acc, r->mred, r->nmed, r->err_rate, r->bias, r->wce,
                      r->area, r->gates, r->delay, r->pw_uniform, r->energy, r->pw_work};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            num(f, v[k], "%.9g");
            fputc(',', f);
        }
        fputc('"', f);
        for (const char *p = r->status; *p; p++) fputs(*p == '"' ? "\"\"" : (char[]){*p, 0}, f);
        fputs("\"\n", f);
    }
    fclose(f);
    char path[FLOW_PATH + 64];
    snprintf(path, sizeof path, "%s/results.csv", g->root);
    if (commit(path, buf, len, err)) { free(rows); return MTS_EIO; }
    f = open_memstream(&buf, &len);
    fprintf(f, "{\"mantis\": \"%s\", \"rows\": [", MANTIS_VERSION);
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
        fprintf(f, "%s\n  {\"design\": ", i ? "," : "");
        mts_json_write_str(f, r->design);
        fprintf(f, ", \"kind\": \"%s\", \"format\": \"%s\", \"verify\": \"%s\", \"model\": \"%s\", \"dataset\": \"%s\", ",
                r->kind, r->format, r->verify, r->model, r->data);
        const char *k[] = {"test_acc", "train_acc", "mred", "nmed", "error_rate", "bias", "wce",
                           "area_um2", "nand2_eq", "delay_ps", "power_uniform_uw", "energy_pj_per_op",
                           "power_workload_uw"};
        double v[] = {r->test_acc, r->train_acc, r->mred, r->nmed, r->err_rate, r->bias, r->wce,
                      r->area, r->gates, r->delay, r->pw_uniform, r->energy, r->pw_work};
        for (size_t q = 0; q < sizeof v / sizeof v[0]; q++) {
            jnum(f, k[q], v[q]);
            fputs(", ", f);
        }
        fprintf(f, "\"baseline\": %s, \"status\": ", r->baseline ? "true" : "false");
        mts_json_write_str(f, r->status);
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/results.json", g->root);
    if (commit(path, buf, len, err)) { free(rows); return MTS_EIO; }
    /* charts per model x dataset */
    char cdir[FLOW_PATH + 16];
    snprintf(cdir, sizeof cdir, "%s/charts", g->root);
    mkdir(cdir, 0755);
    static const char *xn[] = {"area", "power", "mred"};
    static const char *xl[] = {"multiplier area (um^2, mantis45 liberty)",
                               "multiplier power (uW at 1 GHz; workload trace, else uniform operands)",
                               "mean relative error distance (MRED)"};
    f = open_memstream(&buf, &len);
    char ver[3][256];
    tool_version("verilator --version 2>/dev/null", ver[0], sizeof ver[0]);
    tool_version("yosys -V 2>/dev/null", ver[1], sizeof ver[1]);
    tool_version("gnuplot --version 2>/dev/null", ver[2], sizeof ver[2]);
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Mantis report</title>\n<style>"
               "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;"
               "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
               "td:first-child,th:first-child{text-align:left}.ok{color:#176d1b;font-weight:bold}"
               ".bad{color:#b00020;font-weight:bold}.st{text-align:left;font-size:12px;color:#555}"
               "figure{display:inline-block;margin:0 1em 1em 0}</style></head><body>\n"
               "<h1>Mantis report</h1>\n<p>%d designs and %d baselines; models: ", nd - c->nbaselines,
            c->nbaselines);
    for (int m = 0; m < c->nmodels; m++) fprintf(f, "%s%s", m ? ", " : "", c->models[m]);
    fprintf(f, "; data sets: ");
    for (int s = 0; s < c->ndatasets; s++) fprintf(f, "%s%s", s ? ", " : "", c->datasets[s]);
    fprintf(f, "; %d epoch(s)%s.</p>\n", c->epochs, c->quick ? ", quick profile (subset of the training data)" : "");
    for (int m = 0; m < c->nmodels; m++)
        for (int s = 0; s < c->ndatasets; s++) {
            row sub[256];
            int ns = 0;
            for (int i = 0; i < n && ns < 256; i++)
                if (!strcmp(rows[i].model, c->models[m]) && !strcmp(rows[i].data, c->datasets[s])) sub[ns++] = rows[i];
            fprintf(f, "<h2>%s on %s</h2>\n", c->models[m], c->datasets[s]);
            for (int x = 0; x < 3; x++) {
                char base[128], title[160];
                snprintf(base, sizeof base, "%s-%s-%s", xn[x], c->models[m], c->datasets[s]);
                snprintf(title, sizeof title, "%s on %s: test accuracy vs %s", c->models[m], c->datasets[s], xn[x]);
                int rc = chart(cdir, base, sub, ns, x, title, xl[x]);
                fprintf(f, "<figure>");
                if (rc == 0) {
                    char svg[FLOW_PATH + 200];
                    snprintf(svg, sizeof svg, "%s/%s.svg", cdir, base);
                    inline_file(f, svg);
                } else {
                    fprintf(f, "<p>%s: %s</p>", title, rc > 0 ? "no trained design has this figure yet" :
                                                                 "gnuplot failed (charts/ has the script)");
                }
                fprintf(f, "</figure>\n");
            }
        }
    fprintf(f, "<h2>Designs</h2>\n<table><tr><th>design</th><th>kind</th><th>format</th><th>verification</th>"
               "<th>model</th><th>data</th><th>test acc %%</th><th>train acc %%</th><th>test acc per epoch</th>"
               "<th>MRED</th><th>NMED</th><th>error rate</th><th>bias</th><th>area um&sup2;</th><th>NAND2 eq</th>"
               "<th>delay ps</th><th>power uW (uniform)</th><th>pJ/op</th><th>power uW (workload)</th>"
               "<th>notes</th></tr>\n");
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
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
        fprintf(f, "<td class=\"st\">");
        html_esc(f, r->status);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n<h2>How this was made</h2>\n<pre>");
    html_esc(f, cmdline);
    fprintf(f, "\nmantis %s\n", MANTIS_VERSION);
    html_esc(f, ver[0]);
    fputc('\n', f);
    html_esc(f, ver[1]);
    fputc('\n', f);
    html_esc(f, ver[2]);
    fprintf(f, "</pre>\n<p>Step commands (each output is keyed by a hash of its inputs; logs in logs/):</p><pre>");
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
    fclose(f);
    snprintf(path, sizeof path, "%s/report.html", g->root);
    int rc = commit(path, buf, len, err);
    /* summary table */
    printf("\n%-22s %-12s %-9s %-22s %-18s %8s %10s %10s %9s\n", "design", "kind", "format", "verification",
           "model/data", "test%", "area um2", "uW(work)", "MRED");
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
        char md[72];
        snprintf(md, sizeof md, "%.31s/%.31s", r->model, r->data);
        printf("%-22s %-12s %-9s %-22s %-18s %8.2f %10.1f %10.1f %9.3g\n", r->design, r->kind, r->format,
               r->baseline ? "C model" : r->verify, md, r->test_acc, r->area,
               isnan(r->pw_work) ? r->pw_uniform : r->pw_work, r->mred);
    }
    printf("\nreport: %s\n", path);
    free(rows);
    return rc;
}
