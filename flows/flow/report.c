/* report.c - the flow's results: one row per design x model x dataset in
 * results.csv / results.json, Pareto charts drawn by gnuplot (PNG and SVG),
 * and report.html, a single self-contained page (SVG charts inline). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"
#include "mantis/csv.h"
#include "mantis/json.h"
#include "mantis/fs.h"
#include "mantis/proc.h"

typedef enum { R_OK, R_FAILED, R_DIVERGED, R_SKIPPED } row_state;
static const char *const state_name[4] = {"ok", "failed", "diverged", "skipped"};

#define CURVE_MAX 64 /* epochs a training curve keeps */
#define CHANCE_PCT 10.0 /* test accuracy of a guess: 10 classes (MNIST, Fashion-MNIST, CIFAR-10) */

typedef struct row {
    char design[64], kind[16], format[24], verify[64], model[32], data[32], status[256];
    char int_bwd[8]; /* an integer design's backward (its trainings' "int_backward"), else "" */
    char device[24];  /* where its trainings (tests) ran: "cpu", "cuda", "cpu+cuda" when seeds differ */
    char gpu_path[256]; /* their JSON's "gpu_path" when it has one ("resident", "per-gemm: WHY") */
    double dev_peak;  /* the largest "device_peak_bytes" of their JSON (NaN: none) */
    row_state state;
    double mred, nmed, err_rate, bias, wce;
    double area, gates, delay, pw_uniform, pw_work, energy;
    double test_acc, test_std, train_acc; /* mean and sample std over the seeds that trained */
    double cosim_cycles, cosim_energy; /* per inference, step cosim (docs/cosim.md) */
    int baseline, trained;
    int nseeds, ndone, ndiverged;         /* seeds configured, trained to the end, diverged */
    double seed_acc[FLOW_MAX_LIST];       /* per seed (NaN: none) */
    double curve[CURVE_MAX];              /* mean test accuracy per epoch */
    int ncurve;
    int within_noise;                     /* |mean - best mean| < the combined std (docs/flow.md) */
    int how;                              /* 0: trained with the design; 1: infer, the fp32 checkpoint tested with it */
    double cross[FLOW_MAX_LIST], cross_std[FLOW_MAX_LIST]; /* its checkpoints tested with cfg->cross[k] */
} row;

static const char *const how_name[2] = {"train", "infer"};

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

/* The one-line error a failed command printed ("mantis CMD: ...", its last
 * such line: the ones before are progress, "mantis train: lenet5 on ..."),
 * else the step's own reason. */
static void first_error(const flow_graph *g, const flow_step *s, char *buf, size_t n)
{
    char log[FLOW_PATH + 160], line[512] = "", got[512];
    FILE *f = mts_fs_pathf(log, sizeof log, "%s/logs/%s/%s.log", g->root, s->design, s->name) ? NULL : fopen(log, "r");
    if (f) {
        while (fgets(got, sizeof got, f))
            if (!strncmp(got, "mantis ", 7)) memcpy(line, got, sizeof line);
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    snprintf(buf, n, "%s", line[0] ? line : s->reason[0] ? s->reason : "no reason recorded");
}

/* Sets the row's status once: the first verdict (in step order) stands. */
static void verdict(row *r, row_state st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict(row *r, row_state st, const char *fmt, ...)
{
    if (r->state != R_OK) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->status, sizeof r->status, fmt, ap);
    va_end(ap);
    r->state = st;
}

/* A design step that failed (or could not start): "failed STEP: reason". */
static void step_failed(const flow_graph *g, const flow_step *s, row *r)
{
    char why[300];
    first_error(g, s, why, sizeof why);
    verdict(r, R_FAILED, "failed %s: %s", s->name, why);
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
        step_failed(g, det, r);
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
    /* the design's own steps, in plan order: the first failure is the status (a failed gemm or
     * cosim too: its columns are empty, so the row is not ok and the flow does not exit 0) */
    static const char *const steps[] = {"verify", "synth", "lutgen", "metrics", "trace", "power", "gemm", "cosim"};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        const flow_step *s = find(g, d, steps[k]);
        if (s && s->state == ST_FAILED) step_failed(g, s, r);
        if (s && s == ver && ver->state == ST_DONE && ver->exit_code != 0)
            verdict(r, R_SKIPPED, "skipped: verify failed (%s), not trained", r->verify);
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

/* Where step s ran: its JSON's "device" when it says, else its command's
 * --device (none: the CPU, the default of mantis train and test). */
static const char *step_device(const flow_step *s, const mts_json *j)
{
    const char *d = mts_json_str(j, "device", NULL);
    if (d && *d) return d;
    for (int i = 0; i + 1 < s->argc; i++)
        if (!strcmp(s->argv[i], "--device")) return s->argv[i + 1];
    return "cpu";
}

/* The device columns of row r from one of its finished steps. */
static void note_device(row *r, const flow_step *s, const mts_json *j)
{
    const char *d = step_device(s, j);
    size_t u = strlen(r->device), k = strlen(d);
    int seen = 0;
    for (const char *p = r->device; (p = strstr(p, d)); p++)
        seen |= (p == r->device || p[-1] == '+') && (p[k] == '+' || !p[k]);
    if (!seen) snprintf(r->device + u, sizeof r->device - u, "%s%s", u ? "+" : "", d);
    const char *path = mts_json_str(j, "gpu_path", "");
    if (*path && !r->gpu_path[0]) snprintf(r->gpu_path, sizeof r->gpu_path, "%s", path);
    double peak = mts_json_num(j, "device_peak_bytes", NAN);
    if (!isnan(peak) && (isnan(r->dev_peak) || peak > r->dev_peak)) r->dev_peak = peak;
}

/* The training steps of the row, one per seed: mean and sample standard
 * deviation of the final test accuracy over the seeds that trained to the
 * end, the mean curve, and the verdict of the ones that did not. */
static void fill_train(const flow_cfg *c, const flow_graph *g, row *r)
{
    double sum = 0, sq = 0, tr = 0, csum[CURVE_MAX] = {0};
    int cn[CURVE_MAX] = {0};
    char div[200] = "";
    r->test_acc = r->test_std = r->train_acc = r->dev_peak = NAN;
    r->nseeds = c->nseeds;
    for (int k = 0; k < c->nseeds; k++) {
        char name[80]; /* "train-" + model[32] + "-" + data[32] + "-s" + seed */
        snprintf(name, sizeof name, "%s-%s-%s-s%d", how_name[r->how], r->model, r->data, c->seeds[k]);
        const flow_step *s = find(g, r->design, name);
        r->seed_acc[k] = NAN;
        if (!s) continue;
        if (s->state == ST_FAILED) {
            step_failed(g, s, r);
            continue;
        }
        if (s->state != ST_DONE) continue; /* skipped: the design's verdict says why */
        mts_json *j = mts_json_load(s->out);
        if (j && !r->int_bwd[0]) snprintf(r->int_bwd, sizeof r->int_bwd, "%s", mts_json_str(j, "int_backward", ""));
        note_device(r, s, j);
        if (s->exit_code == MTS_EXIT_DIVERGED) { /* mantis train: diverged (docs/training.md) */
            size_t u = strlen(div);
            snprintf(div + u, sizeof div - u, "%sseed %d at epoch %.0f step %.0f", u ? ", " : "", c->seeds[k],
                     mts_json_num(j, "diverged_epoch", 0), mts_json_num(j, "diverged_step", 0));
            r->ndiverged++;
            mts_json_free(j);
            continue;
        }
        double acc = 100 * mts_json_num(j, "final_test_acc", mts_json_num(j, "test_acc", NAN)); /* train, test */
        if (!j || isnan(acc)) {
            verdict(r, R_FAILED, "failed %s: unreadable result %s", s->name, s->out);
            mts_json_free(j);
            continue;
        }
        const mts_json *ep = mts_json_get(j, "epochs");
        int e = 0;
        double last_train = NAN;
        for (const mts_json *x = ep ? ep->child : NULL; x; x = x->next, e++) {
            last_train = 100 * mts_json_num(x, "train_acc", NAN);
            if (e < CURVE_MAX) {
                csum[e] += 100 * mts_json_num(x, "test_acc", NAN);
                cn[e]++;
            }
        }
        r->seed_acc[k] = acc;
        sum += acc;
        sq += acc * acc;
        tr += last_train;
        r->ndone++;
        mts_json_free(j);
    }
    if (r->ndiverged) verdict(r, R_DIVERGED, "diverged (%d of %d seeds: %s)", r->ndiverged, r->nseeds, div);
    if (r->ndone && r->state != R_DIVERGED) { /* a diverged row has no accuracy, never a partial mean */
        r->trained = 1;
        r->test_acc = sum / r->ndone;
        r->train_acc = tr / r->ndone;
        if (r->ndone > 1) r->test_std = sqrt(fmax(0, (sq - sum * sum / r->ndone) / (r->ndone - 1)));
        for (int e = 0; e < CURVE_MAX && cn[e]; e++) r->curve[r->ncurve++] = csum[e] / cn[e];
    }
    if (r->state == R_OK) {
        /* a seed that ends near chance (10 classes in every data set the flow takes) trained without
           diverging but learned nothing: said in the status, as its mean and std alone hide why */
        char low[200] = "";
        int nlow = 0;
        for (int k = 0; k < c->nseeds; k++)
            if (!isnan(r->seed_acc[k]) && r->seed_acc[k] <= CHANCE_PCT + 5.0) {
                size_t u = strlen(low);
                snprintf(low + u, sizeof low - u, "%sseed %d %.2f%%", nlow++ ? ", " : "", c->seeds[k], r->seed_acc[k]);
            }
        if (nlow)
            snprintf(r->status, sizeof r->status, "ok; %d of %d seeds at chance (%s)", nlow, r->nseeds, low);
        else
            snprintf(r->status, sizeof r->status, "ok");
    }
    /* cross: every seed's checkpoint tested with each listed multiplier */
    for (int y = 0; y < c->ncross; y++) {
        double cs = 0, cq = 0;
        int cnt = 0;
        for (int k = 0; k < c->nseeds; k++) {
            char name[128];
            snprintf(name, sizeof name, "cross-%s-%s-s%d-%s", r->model, r->data, c->seeds[k], c->cross[y]);
            const flow_step *s = r->how ? NULL : find(g, r->design, name);
            if (s && s->state == ST_FAILED) step_failed(g, s, r);
            mts_json *j = load_done(s);
            double a = 100 * mts_json_num(j, "test_acc", NAN);
            mts_json_free(j);
            if (isnan(a)) continue;
            cs += a;
            cq += a * a;
            cnt++;
        }
        r->cross[y] = cnt ? cs / cnt : NAN;
        r->cross_std[y] = cnt > 1 ? sqrt(fmax(0, (cq - cs * cs / cnt) / (cnt - 1))) : NAN;
    }
}

/* The numeric columns of a row, in results.csv / results.json order. */
#define NCOLS 16
static const char *const col_names[NCOLS] = {
    "test_acc", "test_acc_std", "train_acc", "mred", "nmed", "error_rate", "bias", "wce",
    "area_um2", "nand2_eq", "delay_ps", "power_uniform_uw", "energy_pj_per_op", "power_workload_uw",
    "cosim_cycles_per_inference", "cosim_energy_pj_per_inference"};

static void row_values(const row *r, double v[NCOLS])
{
    const double x[NCOLS] = {r->test_acc, r->test_std, r->train_acc, r->mred, r->nmed, r->err_rate, r->bias, r->wce,
                             r->area, r->gates, r->delay, r->pw_uniform, r->energy, r->pw_work,
                             r->cosim_cycles, r->cosim_energy};
    memcpy(v, x, sizeof x);
}

/* x: 0 area, 1 workload power (uniform when absent), 2 MRED */
static double xval(const row *r, int x)
{
    return x == 0 ? r->area : x == 1 ? (isnan(r->pw_work) ? r->pw_uniform : r->pw_work) : r->mred;
}

/* Pareto-optimal on the mean accuracy: no other point has x <= and mean >=
 * with one strict. */
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

/* Sweep families (docs/flow.md "Sweeps"; defined with the report below):
 * the accuracy charts join each family's points in parameter order. */
typedef struct family family;
typedef struct famset {
    const family *f;  /* the families of one model x data set x run */
    int n;
    const row *rows;  /* the report's rows, which the families index */
} famset;
typedef struct frame frame;
/* Appends one block per family to an open chart data file (x axis x):
 * (x, mean) of its points in parameter order; drawn[k] 1 when family k
 * has two points or more there. */
static void family_blocks(FILE *f, const famset *fs, int x, const frame *fr, int *drawn);
/* The plot clauses of those blocks, the first at index `first`. */
static void family_clauses(FILE *f, const famset *fs, const char *dat, int block0, const int *drawn, int *first);

/* A chart's frame, decided here rather than by gnuplot so that label
 * placement knows where everything lands: x on a log axis (lx = log10 x),
 * a value 0 drawn in its own column left of the rest ("0" tic), y linear. */
struct frame {
    double lxlo, lxhi, lzero; /* log10 of the x range and of the "0" column */
    double lsep;              /* log10 of the rule between the "0" column and the rest */
    int has_zero;
    double lo, hi;            /* y range */
    char omitted[512];        /* designs below the y range, named instead */
};

static double fx(const frame *f, double x) { return x > 0 ? log10(x) : f->lzero; }

/* The points one chart can place: x known (>= 0), and an accuracy or a
 * divergence. */
static int plotted(const row *r, int x)
{
    double v = xval(r, x);
    return !isnan(v) && v >= 0 && (!isnan(r->test_acc) || r->state == R_DIVERGED);
}

static void chart_frame(const row *rows, int n, int x, frame *f)
{
    double lmin = 1e300, lmax = -1e300, best = -1, lo = 101, top = -1;
    memset(f, 0, sizeof *f);
    for (int i = 0; i < n; i++) {
        if (!plotted(&rows[i], x)) continue;
        double v = xval(&rows[i], x);
        if (v == 0) f->has_zero = 1;
        else {
            if (log10(v) < lmin) lmin = log10(v);
            if (log10(v) > lmax) lmax = log10(v);
        }
        if (rows[i].test_acc > best) best = rows[i].test_acc;
    }
    if (lmin > lmax) lmin = lmax = 0; /* only zeros */
    double span = lmax - lmin > 0.3 ? lmax - lmin : 0.3;
    f->lzero = lmin - (f->has_zero ? 0.35 * span + 0.3 : 0);
    f->lsep = (f->lzero + lmin) / 2;
    f->lxlo = (f->has_zero ? f->lzero : lmin) - 0.08 * span;
    f->lxhi = lmax + 0.35 * span; /* room for the labels of the rightmost points */
    /* y: the best mean and everything within 12 points of it (error bars
     * included), so one collapsed design does not flatten the others */
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        double a = r->test_acc, sd = isnan(r->test_std) ? 0 : r->test_std;
        if (!plotted(r, x) || isnan(a)) continue;
        if (a >= best - 12) {
            if (a - sd < lo) lo = a - sd;
            if (a + sd > top) top = a + sd;
        } else {
            size_t u = strlen(f->omitted);
            snprintf(f->omitted + u, sizeof f->omitted - u, "%s%.40s %.1f%%", u ? ", " : "below the range: ",
                     r->design, a);
        }
    }
    if (lo > top) lo = top = 50; /* nothing with an accuracy: only diverged markers */
    double pad = (top - lo) * 0.15 + 0.2;
    f->lo = lo - 2.2 * pad; /* the bottom strip holds the diverged markers */
    f->hi = top + 1.5 * pad;
}

/* Label placement, best effort: each label is a box right of its point (left
 * of it near the right edge), moved up or down by whole label heights until
 * it overlaps no other label and no point. Sizes are fractions of the plot
 * area of the SVG (about 560 x 360 px of 760 x 460; 8 pt labels). */
typedef struct lbox {
    double u0, u1, v0, v1;
} lbox;

static int overlaps(const lbox *a, const lbox *b)
{
    return a->u0 < b->u1 && b->u0 < a->u1 && a->v0 < b->v1 && b->v0 < a->v1;
}

typedef struct label {
    double x, y, ly;      /* point (data units) and the label's y */
    int right;            /* 1: text ends left of the point */
    const char *text;
} label;

static void place_labels(const frame *f, label *lab, int m)
{
    const double cw = 5.0 / 560, lh = 12.0 / 360, pw = 7.0 / 560, ph = 7.0 / 360;
    lbox *taken = malloc((size_t)(2 * m + 1) * sizeof *taken);
    if (!taken) return;
    int nt = 0;
    for (int i = 0; i < m; i++) { /* every point is taken first: labels never cover a point */
        double u = (fx(f, lab[i].x) - f->lxlo) / (f->lxhi - f->lxlo), v = (lab[i].y - f->lo) / (f->hi - f->lo);
        taken[nt++] = (lbox){u - pw, u + pw, v - ph, v + ph};
    }
    for (int i = 0; i < m; i++) {
        double u = (fx(f, lab[i].x) - f->lxlo) / (f->lxhi - f->lxlo), v = (lab[i].y - f->lo) / (f->hi - f->lo);
        double w = (double)strlen(lab[i].text) * cw + pw;
        lab[i].right = u + pw + w > 1.0;
        lbox b = {0};
        static const int tries[] = {0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5};
        int t;
        for (t = 0; t < (int)(sizeof tries / sizeof tries[0]); t++) {
            double vv = v + tries[t] * lh;
            b = lab[i].right ? (lbox){u - pw - w, u - pw, vv - lh / 2, vv + lh / 2}
                             : (lbox){u + pw, u + pw + w, vv - lh / 2, vv + lh / 2};
            if (b.v0 < 0 || b.v1 > 1) continue;
            int clash = 0;
            for (int k = 0; k < nt && !clash; k++) clash = overlaps(&b, &taken[k]);
            if (!clash) break;
        }
        if (t == (int)(sizeof tries / sizeof tries[0])) t = 0; /* crowded: keep it beside its point */
        lab[i].ly = lab[i].y + tries[t] * lh * (f->hi - f->lo);
        taken[nt++] = b;
    }
    free(taken);
}

/* The chart's data file, in blocks: 0 designs (x, mean, name, std), 1 the
 * Pareto front by mean sorted by x, 2 baselines, 3 diverged runs at the
 * bottom strip, 4 labels left-aligned (x, y, name, label y), 5 labels
 * right-aligned. Returns the number of points, -1 when unwritable. */
static int chart_data(const char *dat, const row *rows, int n, int x, const frame *fr, int cnt[6])
{
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    label *lab = malloc((size_t)(n + 1) * sizeof *lab);
    int pts = 0, nl = 0;
    double ydiv = fr->lo + 0.04 * (fr->hi - fr->lo);
    for (int pass = 0; pass < 4; pass++) {
        if (pass) fprintf(f, "\n\n");
        int idx[CHART_MAX], m = 0;
        for (int i = 0; i < n && m < CHART_MAX; i++) {
            const row *r = &rows[i];
            if (!plotted(r, x)) continue;
            if ((pass == 3) != (r->state == R_DIVERGED)) continue;
            if (pass < 3 && ((pass == 2) != r->baseline || r->test_acc < fr->lo)) continue;
            if (pass == 1 && !pareto(rows, n, i, x)) continue;
            idx[m++] = i;
        }
        for (int a = 1; a < m; a++) /* insertion sort by x */
            for (int b = a; b > 0 && xval(&rows[idx[b]], x) < xval(&rows[idx[b - 1]], x); b--) {
                int t = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = t;
            }
        for (int k = 0; k < m; k++) {
            const row *r = &rows[idx[k]];
            double px = pow(10, fx(fr, xval(r, x))), py = pass == 3 ? ydiv : r->test_acc;
            fprintf(f, "%.9g %.6f \"%s\" %.6f\n", px, py, r->design, isnan(r->test_std) ? 0 : r->test_std);
            if (pass != 1 && lab) lab[nl++] = (label){px, py, py, 0, r->design};
        }
        if (m == 0) fprintf(f, "nan nan \"-\" 0\n"); /* keeps the block numbering; never plotted */
        cnt[pass] = m;
        if (pass != 1) pts += m;
    }
    if (lab) place_labels(fr, lab, nl);
    for (int side = 0; side < 2; side++) {
        fprintf(f, "\n\n");
        int m = 0;
        for (int i = 0; lab && i < nl; i++)
            if (lab[i].right == side) {
                fprintf(f, "%.9g %.6f \"%s\" %.6f\n", lab[i].x, lab[i].y, lab[i].text, lab[i].ly);
                m++;
            }
        if (m == 0) fprintf(f, "nan nan \"-\" nan\n");
        cnt[4 + side] = m;
    }
    free(lab);
    fclose(f);
    return pts;
}

/* The gnuplot script: the same plot as PNG and as SVG. Error bars are the
 * seeds' standard deviation; diverged runs are red crosses on the bottom
 * strip, named, never at an accuracy. */
static int chart_script(const char *gp, const char *dir, const char *base, const char *dat, const char *title,
                        const char *xlabel, const frame *y, int nseeds, const int cnt[6], const famset *fs,
                        const int *fam_drawn)
{
    FILE *f = fopen(gp, "w");
    if (!f) return -1;
    for (int t = 0; t < 2; t++) {
        fprintf(f, t ? "set terminal svg size 760,460 dynamic font 'sans,11'\n"
                     : "set terminal pngcairo size 1000,600 font 'sans,11'\n");
        fprintf(f, "set output '%s/%s.%s'\n", dir, base, t ? "svg" : "png");
        fprintf(f, "set title \"%s\"\nset xlabel \"%s\"\nset ylabel 'test accuracy (%%%s)'\nset grid\n"
                   "set termoption noenhanced\nset key outside right top\nset logscale x\n"
                   "set xrange [%.9g:%.9g]\nset yrange [%g:%g]\n"
                   "set label 1 \"%s\" at graph 0.01, graph 0.96 left font 'sans,9' tc rgb '#b00020'\n"
                   "set label 2 'diverged runs' at graph 0.99, first %g right font 'sans,8' tc rgb '#b00020'\n",
                title, xlabel, nseeds > 1 ? ", mean +- std over seeds" : "", pow(10, y->lxlo), pow(10, y->lxhi),
                y->lo, y->hi, y->omitted, y->lo + 0.09 * (y->hi - y->lo));
        if (y->has_zero) /* the "0" column, set apart by a dotted rule */
            fprintf(f, "set xtics add (\"0\" %.9g)\nset arrow 1 from %.9g, graph 0 to %.9g, graph 1 nohead dt 3 "
                       "lc rgb '#888888'\n",
                    pow(10, y->lzero), pow(10, y->lsep), pow(10, y->lsep));
        /* only blocks with points: gnuplot 5.4 crashes on a label block whose values are all NaN */
        static const char *const clause[6][2] = {
            {"index 0 using 1:2:4 with yerrorbars pt 7 ps 1.0 lc rgb '#4477aa' title 'designs'", NULL},
            {"index 1 using 1:2 with linespoints pt 6 ps 2.2 lw 2 lc rgb '#cc3311' title 'Pareto-optimal'", NULL},
            {"index 2 using 1:2:4 with yerrorbars pt 9 ps 1.6 lc rgb '#228833' title 'baselines'", NULL},
            {"index 3 using 1:2 with points pt 2 ps 1.6 lw 2 lc rgb '#b00020' title 'diverged'", NULL},
            {"index 4 using 1:2:(0):($4-$2) with vectors nohead lc rgb '#bbbbbb' notitle",
             "index 4 using 1:4:3 with labels left offset 0.7,0 font 'sans,8' notitle"},
            {"index 5 using 1:2:(0):($4-$2) with vectors nohead lc rgb '#bbbbbb' notitle",
             "index 5 using 1:4:3 with labels right offset -0.7,0 font 'sans,8' notitle"}};
        int first = 1;
        family_clauses(f, fs, dat, 6, fam_drawn, &first); /* sweep families, under the points */
        for (int b = 0; b < 6; b++)
            for (int k = 0; k < 2 && cnt[b]; k++)
                if (clause[b][k]) {
                    if (first) fprintf(f, "plot '%s' %s", dat, clause[b][k]);
                    else fprintf(f, ", \\\n     '' %s", clause[b][k]);
                    first = 0;
                }
        fputc('\n', f);
    }
    return fclose(f) ? -1 : 0;
}

/* One chart, dir/base.{dat,gp,png,svg}: 0 drawn, 1 nothing to plot, -1
 * failed (the script stays in dir). */
static int chart(const char *dir, const char *base, const row *rows, int n, int x, const char *title,
                 const char *xlabel, int nseeds, const famset *fs)
{
    char dat[FLOW_PATH + 64], gp[FLOW_PATH + 64];
    if (mts_fs_pathf(dat, sizeof dat, "%s/%s.dat", dir, base) || mts_fs_pathf(gp, sizeof gp, "%s/%s.gp", dir, base))
        return -1;
    frame fr;
    chart_frame(rows, n, x, &fr);
    int cnt[6] = {0};
    int pts = chart_data(dat, rows, n, x, &fr, cnt);
    if (pts <= 0) return pts < 0 ? -1 : 1;
    int drawn[CHART_MAX] = {0};
    FILE *df = fs && fs->n ? fopen(dat, "a") : NULL;
    if (df) {
        family_blocks(df, fs, x, &fr, drawn);
        if (fclose(df)) return -1;
    }
    if (chart_script(gp, dir, base, dat, title, xlabel, &fr, nseeds, cnt, fs, drawn)) return -1;
    char *argv[] = {"gnuplot", gp, NULL}; /* its output is of no use: the files are the result */
    return mts_proc_run(argv, NULL) == 0 ? 0 : -1;
}

/* The training curves of one model x data set: mean test accuracy per epoch,
 * one line per trained design (baselines dashed). */
static int curves(const char *dir, const char *base, const row *rows, int n, const char *title)
{
    char dat[FLOW_PATH + 64], gp[FLOW_PATH + 64];
    if (mts_fs_pathf(dat, sizeof dat, "%s/%s.dat", dir, base) || mts_fs_pathf(gp, sizeof gp, "%s/%s.gp", dir, base))
        return -1;
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    int m = 0, idx[CHART_MAX];
    for (int i = 0; i < n && m < CHART_MAX; i++) {
        if (!rows[i].ncurve) continue;
        fprintf(f, "%s# %s\n", m ? "\n\n" : "", rows[i].design);
        for (int e = 0; e < rows[i].ncurve; e++) fprintf(f, "%d %.6f\n", e + 1, rows[i].curve[e]);
        idx[m++] = i;
    }
    fclose(f);
    if (!m) return 1;
    f = fopen(gp, "w");
    if (!f) return -1;
    int maxe = 1;
    for (int k = 0; k < m; k++) maxe = rows[idx[k]].ncurve > maxe ? rows[idx[k]].ncurve : maxe;
    for (int t = 0; t < 2; t++) {
        fprintf(f, t ? "set terminal svg size 760,460 dynamic font 'sans,11'\n"
                     : "set terminal pngcairo size 1000,600 font 'sans,11'\n");
        fprintf(f, "set output '%s/%s.%s'\nset title \"%s\"\nset xlabel 'epoch'\nset ylabel 'test accuracy (%%)'\n"
                   "set grid\nset termoption noenhanced\nset key outside right top\nset xrange [0.8:%g]\n"
                   "set xtics 1\nplot ",
                dir, base, t ? "svg" : "png", title, maxe + 0.2);
        for (int k = 0; k < m; k++)
            fprintf(f, "%s'%s' index %d using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 dt %d title \"%s\"",
                    k ? ", \\\n     " : "", dat, k, rows[idx[k]].baseline ? 2 : 1, rows[idx[k]].design);
        fputc('\n', f);
    }
    if (fclose(f)) return -1;
    char *argv[] = {"gnuplot", gp, NULL};
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
    int count[4];              /* rows per row_state */
    char cdir[FLOW_PATH + 16]; /* charts/ */
    int chart_rc[FLOW_MAX_LIST][FLOW_MAX_LIST][2][NAXES + 1]; /* chart()'s result per model, dataset, how, axis */
    family *fam;               /* sweep families, grouped by model x data set x run (find_families) */
    int nfam;
} report;

static const char *const axis_name[NAXES + 1] = {"area", "power", "mred", "curves"};
static const char *const axis_label[NAXES] = {
    "multiplier area (um^2, mantis45 liberty)",
    "multiplier power (uW at 1 GHz; workload trace, else uniform operands)",
    "mean relative error distance (MRED; exact designs in the 0 column)"};

static void chart_names(const report *rp, int m, int s, int h, int x, char base[128], char title[160])
{
    const flow_cfg *c = rp->c;
    snprintf(base, 128, "%s-%s-%s%s", axis_name[x], c->models[m], c->datasets[s], h ? "-infer" : "");
    if (x == NAXES)
        snprintf(title, 160, "%s on %s: test accuracy per epoch", c->models[m], c->datasets[s]);
    else
        snprintf(title, 160, "%s on %s%s: test accuracy vs %s", c->models[m], c->datasets[s],
                 h ? " (fp32-trained, tested with each design)" : "", axis_name[x]);
}

/* Which runs the configuration has: bit 0 train, bit 1 infer. */
static int hows(const flow_cfg *c)
{
    return !strcmp(c->mode, "infer") ? 2 : !strcmp(c->mode, "both") ? 3 : 1;
}

static int same_group(const row *a, const row *b)
{
    return !strcmp(a->model, b->model) && !strcmp(a->data, b->data) && a->how == b->how;
}

/* Which rows are within noise of the best mean of their model x data set:
 * |mean - best| < sqrt(std^2 + std_best^2) (needs two seeds or more). */
static void mark_noise(report *rp)
{
    for (int i = 0; i < rp->n; i++) {
        row *r = &rp->rows[i];
        const row *best = NULL;
        for (int k = 0; k < rp->n; k++) {
            const row *b = &rp->rows[k];
            if (same_group(b, r) && !isnan(b->test_acc) &&
                (!best || b->test_acc > best->test_acc))
                best = b;
        }
        r->within_noise = best && best != r && !isnan(r->test_std) && !isnan(best->test_std) &&
                          best->test_acc - r->test_acc < sqrt(r->test_std * r->test_std + best->test_std * best->test_std);
    }
}

static int find_families(report *rp, mts_err *err);

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
    rp->rows = calloc((size_t)(2 * rp->nd * c->nmodels * c->ndatasets + 1), sizeof *rp->rows);
    if (!rp->rows) return mts_fail(err, MTS_ENOMEM, "flow: out of memory");
    for (int h = 0; h < 2; h++)
        for (int pass = 0; pass < 2 && (hows(c) >> h & 1); pass++) /* designs, then baselines */
            for (int d = 0; d < rp->nd; d++)
                for (int m = 0; m < c->nmodels; m++)
                    for (int s = 0; s < c->ndatasets; s++) {
                if ((strncmp(rp->designs[d], "baseline-", 9) == 0) != pass) continue;
                row *r = &rp->rows[rp->n++];
                r->how = h;
                memcpy(r->design, rp->designs[d], sizeof r->design); /* same size, NUL-terminated */
                snprintf(r->model, sizeof r->model, "%s", c->models[m]);
                snprintf(r->data, sizeof r->data, "%s", c->datasets[s]);
                r->baseline = !strncmp(rp->designs[d], "baseline-", 9);
                fill_design(g, rp->designs[d], r);
                fill_train(c, g, r);
                rp->count[r->state]++;
            }
    mark_noise(rp);
    return find_families(rp, err);
}

/* ---- Sweep families (docs/flow.md "Sweeps"). A family is the points of
 * one swept design that differ only in its first swept parameter (one
 * family per value of the others), in one model x data set x run. Its
 * exact design is its point with MRED 0 and the largest area (BREAK = 0 of
 * a broken-array multiplier, the most mantissa bits of an exact
 * multiplier), else the fp32 baseline. A point is within noise of it by the
 * rule that tells designs apart (mark_noise): the exact design's mean
 * exceeds the point's by less than sqrt(s^2 + s_exact^2). The knee is found
 * walking from the exact (or least approximate) end in parameter order
 * towards the most approximate: the last point within noise before the
 * first that is not (or that diverged); failed points are passed over. */
struct family {
    char design[FLOW_NAME];       /* the swept design */
    char param[64];               /* the parameter that varies */
    char fixed[160];              /* the other parameters' values, "B=1,C=2" ("" for one parameter) */
    char label[320];              /* "design (PARAM)" or "design (PARAM; B=1)": legend and headings */
    char base[256];               /* its chart's file name, charts/BASE.svg */
    int m, s, h;                  /* model, data set, run */
    int n;
    int row[FLOW_SWEEP_VALUES];   /* report rows, in parameter order */
    long val[FLOW_SWEEP_VALUES];
    int ref, knee, beyond;        /* rows: the exact design, the knee, the first point past it beyond
                                     noise (-1: none) */
    double area_save, power_save; /* fractions of the exact design's (NaN: not known) */
    int power_kind;               /* 1 workload power, 0 uniform operands */
    int chart_rc;                 /* family_chart()'s result */
    char sentence[1400];          /* the knee in words and numbers (UTF-8 text) */
};

static int in_group(const report *rp, const row *r, int m, int s, int h);

static famset group_families(const report *rp, int m, int s, int h)
{
    famset fs = {NULL, 0, rp->rows};
    for (int i = 0; i < rp->nfam; i++)
        if (rp->fam[i].m == m && rp->fam[i].s == s && rp->fam[i].h == h) {
            if (!fs.f) fs.f = &rp->fam[i];
            fs.n++;
        }
    return fs;
}

/* A point at least as accurate as the exact design is within noise too. */
static int within_noise_of(const row *r, const row *ref)
{
    double gap = ref->test_acc - r->test_acc;
    return !isnan(r->test_acc) && !isnan(r->test_std) && !isnan(ref->test_std) &&
           (gap <= 0 || gap < sqrt(r->test_std * r->test_std + ref->test_std * ref->test_std));
}

static double combined_std(const row *a, const row *b)
{
    return sqrt(a->test_std * a->test_std + b->test_std * b->test_std);
}

/* Appends printf text to buf (size n). */
static void say_more(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say_more(char *buf, size_t n, const char *fmt, ...)
{
    size_t u = strlen(buf);
    if (u + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + u, n - u, fmt, ap);
    va_end(ap);
}

/* "83.91 ± 0.42%", or "83.91%" with one seed. */
static void acc_text(const row *r, char *buf, size_t n)
{
    if (isnan(r->test_std)) snprintf(buf, n, "%.2f%%", r->test_acc);
    else snprintf(buf, n, "%.2f ± %.2f%%", r->test_acc, r->test_std);
}

/* The exact design, the knee and the sentence of family f. */
static void family_knee(const report *rp, family *f)
{
    const row *rows = rp->rows;
    const flow_cfg *c = rp->c;
    f->ref = f->knee = f->beyond = -1;
    f->area_save = f->power_save = NAN;
    for (int i = 0; i < f->n; i++) { /* the exact point with the largest area */
        const row *r = &rows[f->row[i]];
        if (isnan(r->test_acc) || r->mred != 0) continue;
        if (f->ref < 0 || (!isnan(r->area) && (isnan(rows[f->ref].area) || r->area > rows[f->ref].area)))
            f->ref = f->row[i];
    }
    if (f->ref < 0)
        for (int i = 0; i < rp->n; i++)
            if (!strcmp(rows[i].design, "baseline-fp32") && !strcmp(rows[i].model, c->models[f->m]) &&
                !strcmp(rows[i].data, c->datasets[f->s]) && rows[i].how == f->h && !isnan(rows[i].test_acc))
                f->ref = i;
    /* the precise end: the larger area, else the smaller MRED, else the first value */
    int lo = -1, hi = -1;
    for (int i = 0; i < f->n; i++)
        if (!isnan(rows[f->row[i]].area)) {
            if (lo < 0) lo = i;
            hi = i;
        }
    int from_top = lo >= 0 && rows[f->row[hi]].area > rows[f->row[lo]].area;
    if (lo < 0 || rows[f->row[hi]].area == rows[f->row[lo]].area)
        from_top = !isnan(rows[f->row[0]].mred) && !isnan(rows[f->row[f->n - 1]].mred) &&
                   rows[f->row[f->n - 1]].mred < rows[f->row[0]].mred;
    char *w = f->sentence;
    size_t wn = sizeof f->sentence;
    int steps1 = 1; /* values 1 apart: LO..HI, else each value */
    for (int i = 1; i < f->n; i++) steps1 &= f->val[i] == f->val[i - 1] + 1;
    if (steps1) snprintf(w, wn, "%s, %s = %ld..%ld: ", f->label, f->param, f->val[0], f->val[f->n - 1]);
    else {
        snprintf(w, wn, "%s, %s = %ld", f->label, f->param, f->val[0]);
        for (int i = 1; i < f->n; i++) say_more(w, wn, ", %ld", f->val[i]);
        say_more(w, wn, ": ");
    }
    if (f->ref < 0) {
        say_more(w, wn, "no exact design to compare with (no point with MRED 0 trained, and no fp32 baseline), so "
                        "no knee is named.");
        return;
    }
    const row *ref = &rows[f->ref];
    char ra[64];
    acc_text(ref, ra, sizeof ra);
    if (c->nseeds < 2 || isnan(ref->test_std)) {
        say_more(w, wn, "one seed measures no noise, so no knee is named (seeds = 1, 2, 3 measure it); the exact "
                        "design %s reaches %s.", ref->design, ra);
        return;
    }
    int start = 0;
    for (int i = 0; i < f->n; i++) /* an exact point of the family: the walk starts there */
        if (f->row[from_top ? f->n - 1 - i : i] == f->ref) start = i;
    for (int i = start; i < f->n; i++) {
        int ri = f->row[from_top ? f->n - 1 - i : i];
        const row *r = &rows[ri];
        if (r->state == R_DIVERGED) {
            f->beyond = ri;
            break;
        }
        if (isnan(r->test_acc)) continue; /* failed or not verified: no accuracy to judge */
        if (ri == f->ref || within_noise_of(r, ref)) f->knee = ri;
        else {
            f->beyond = ri;
            break;
        }
    }
    char ba[64] = "";
    const row *by = f->beyond >= 0 ? &rows[f->beyond] : NULL;
    if (by && !isnan(by->test_acc)) acc_text(by, ba, sizeof ba);
    if (f->knee < 0 || f->knee == f->ref) {
        if (!by) {
            say_more(w, wn, "no point of the family could be judged against the exact design %s (%s).", ref->design,
                     ra);
            return;
        }
        say_more(w, wn, "no point %s the exact design %s (%s) stays within noise of it: ",
                 f->knee == f->ref ? "more approximate than" : "of the family is as accurate as", ref->design, ra);
        if (isnan(by->test_acc)) say_more(w, wn, "%s diverged.", by->design);
        else
            say_more(w, wn, "%s reaches %s, %.2f points below (more than their combined standard deviation, %.2f).",
                     by->design, ba, ref->test_acc - by->test_acc, combined_std(by, ref));
        return;
    }
    const row *k = &rows[f->knee];
    char ka[64];
    acc_text(k, ka, sizeof ka);
    say_more(w, wn, "the knee is %s, the most approximate point still within noise of the exact design %s: %s against "
                    "%s. Against %s it saves ",
             k->design, ref->design, ka, ra, ref->design);
    if (!isnan(k->area) && !isnan(ref->area) && ref->area > 0) {
        f->area_save = 1 - k->area / ref->area;
        say_more(w, wn, "%.0f%% of the area (%.1f → %.1f µm²)", 100 * f->area_save, ref->area, k->area);
    } else {
        say_more(w, wn, "an unknown share of the area (not synthesised)");
    }
    double pk = k->pw_work, pr = ref->pw_work;
    f->power_kind = 1;
    if (isnan(pk) || isnan(pr)) pk = k->pw_uniform, pr = ref->pw_uniform, f->power_kind = 0;
    if (!isnan(pk) && !isnan(pr) && pr > 0) {
        f->power_save = 1 - pk / pr;
        say_more(w, wn, " and %.0f%% of the power (%s: %.1f → %.1f µW).", 100 * f->power_save,
                 f->power_kind ? "workload trace" : "uniform operands", pr, pk);
    } else {
        say_more(w, wn, "; its power is not known.");
    }
    if (!by) say_more(w, wn, " Every more approximate point is within noise too: the sweep does not reach the fall.");
    else if (isnan(by->test_acc)) say_more(w, wn, " Beyond it, %s diverged.", by->design);
    else
        say_more(w, wn, " Beyond it, %s falls to %s, %.2f points below the exact design (more than their combined "
                        "standard deviation, %.2f).",
                 by->design, ba, ref->test_acc - by->test_acc, combined_std(by, ref));
}

/* A file-name-safe copy of s. */
static void safe_name(const char *s, char *buf, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++) buf[k++] = isalnum((unsigned char)*s) || strchr("_.-", *s) ? *s : '_';
    buf[k] = '\0';
}

/* The families of every swept design, per model x data set x run (the
 * order of group_families: grouped). */
static int find_families(report *rp, mts_err *err)
{
    const flow_cfg *c = rp->c;
    int cap = 0;
    for (int i = 0; i < c->nsweep; i++) cap += flow_sweep_points(&c->sweep[i]) / c->sweep[i].nvalues[0];
    cap *= 2 * c->nmodels * c->ndatasets;
    if (!cap) return MTS_OK;
    rp->fam = calloc((size_t)cap, sizeof *rp->fam);
    if (!rp->fam) return mts_fail(err, MTS_ENOMEM, "flow: out of memory");
    for (int h = 0; h < 2; h++)
        for (int m = 0; m < c->nmodels && (hows(c) >> h & 1); m++)
            for (int s = 0; s < c->ndatasets; s++)
                for (int w = 0; w < c->nsweep; w++) {
                    const flow_sweep *sw = &c->sweep[w];
                    int nv = sw->nvalues[0], ncombo = flow_sweep_points(sw) / nv;
                    for (int combo = 0; combo < ncombo; combo++) {
                        family *f = &rp->fam[rp->nfam];
                        memset(f, 0, sizeof *f);
                        f->m = m, f->s = s, f->h = h;
                        snprintf(f->design, sizeof f->design, "%s", sw->design);
                        snprintf(f->param, sizeof f->param, "%s", sw->param[0]);
                        for (int j = 0; j < nv; j++) {
                            char name[FLOW_NAME], prm[FLOW_SWEEP_PARAMS][80];
                            long vals[FLOW_SWEEP_PARAMS];
                            flow_sweep_point(sw, combo * nv + j, name, prm, vals);
                            if (j == 0)
                                for (int p = 1; p < sw->nparams; p++)
                                    say_more(f->fixed, sizeof f->fixed, "%s%s", p > 1 ? "," : "", prm[p]);
                            for (int i = 0; i < rp->n; i++)
                                if (!strcmp(rp->rows[i].design, name) && in_group(rp, &rp->rows[i], m, s, h)) {
                                    int at = f->n++; /* insertion by value */
                                    while (at > 0 && f->val[at - 1] > vals[0]) {
                                        f->val[at] = f->val[at - 1];
                                        f->row[at] = f->row[at - 1];
                                        at--;
                                    }
                                    f->val[at] = vals[0];
                                    f->row[at] = i;
                                }
                        }
                        if (!f->n) continue;
                        snprintf(f->label, sizeof f->label, "%s (%s%s%s)", f->design, f->param, f->fixed[0] ? "; " : "",
                                 f->fixed);
                        char tail[256];
                        safe_name(f->fixed, tail, sizeof tail);
                        snprintf(f->base, sizeof f->base, "family-%s-%s%s-%.60s-%.60s%s%.30s", c->models[m],
                                 c->datasets[s], h ? "-infer" : "", f->design, f->param, tail[0] ? "-" : "", tail);
                        family_knee(rp, f);
                        rp->nfam++;
                    }
                }
    return MTS_OK;
}

static const char *const family_colour[6] = {"#ee7733", "#009988", "#aa3377", "#0077bb", "#997700", "#555555"};

static void family_blocks(FILE *f, const famset *fs, int x, const frame *fr, int *drawn)
{
    for (int k = 0; k < fs->n; k++) {
        const family *fa = &fs->f[k];
        fprintf(f, "\n\n# %s\n", fa->label);
        int m = 0;
        for (int i = 0; i < fa->n; i++) {
            const row *r = &fs->rows[fa->row[i]];
            double v = xval(r, x);
            if (isnan(v) || v < 0 || isnan(r->test_acc)) continue; /* diverged and failed points: no accuracy */
            fprintf(f, "%.9g %.6f\n", pow(10, fx(fr, v)), r->test_acc);
            m++;
        }
        if (!m) fprintf(f, "nan nan\n");
        drawn[k] = m >= 2;
    }
}

static void family_clauses(FILE *f, const famset *fs, const char *dat, int block0, const int *drawn, int *first)
{
    for (int k = 0; fs && k < fs->n; k++) {
        if (!drawn[k]) continue;
        fprintf(f, *first ? "plot '%s' " : ", \\\n     '' ", dat);
        /* a wide translucent band, so a family that is also the Pareto front stays visible under it */
        fprintf(f, "index %d using 1:2 with lines lw 7 lc rgb '#70%s' title \"%s\"", block0 + k,
                family_colour[k % 6] + 1, fs->f[k].label);
        *first = 0;
    }
}

/* Per family: test accuracy (error bars: the seeds' std; the exact design's
 * mean dashed, the knee circled, diverged points as red crosses at the
 * bottom) and area (right axis) against the parameter. 0 drawn, 1 nothing
 * to draw, -1 failed. */
static int family_chart(const report *rp, const family *fa, const char *title, const char *colour)
{
    char dat[FLOW_PATH + 300], gp[FLOW_PATH + 300];
    if (mts_fs_pathf(dat, sizeof dat, "%s/%s.dat", rp->cdir, fa->base) ||
        mts_fs_pathf(gp, sizeof gp, "%s/%s.gp", rp->cdir, fa->base))
        return -1;
    const row *rows = rp->rows;
    double lo = 101, hi = -1;
    int nacc = 0, narea = 0;
    for (int i = 0; i < fa->n; i++) {
        const row *r = &rows[fa->row[i]];
        double sd = isnan(r->test_std) ? 0 : r->test_std;
        if (!isnan(r->test_acc)) {
            lo = fmin(lo, r->test_acc - sd), hi = fmax(hi, r->test_acc + sd);
            nacc++;
        }
        narea += !isnan(r->area);
    }
    const row *ref = fa->ref >= 0 ? &rows[fa->ref] : NULL;
    if (ref) lo = fmin(lo, ref->test_acc), hi = fmax(hi, ref->test_acc);
    if (!nacc && !narea) return 1;
    if (lo > hi) lo = 0, hi = 100;
    double pad = (hi - lo) * 0.12 + 0.3, ylo = lo - 2 * pad, yhi = hi + pad;
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    /* blocks: 0 points (value, mean, std, area), 1 the knee, 2 diverged points at the bottom */
    int cnt[3] = {0};
    for (int b = 0; b < 3; b++) {
        if (b) fprintf(f, "\n\n");
        for (int i = 0; i < fa->n; i++) {
            const row *r = &rows[fa->row[i]];
            if ((b == 0 && (!isnan(r->test_acc) || !isnan(r->area))) || (b == 1 && fa->row[i] == fa->knee) ||
                (b == 2 && r->state == R_DIVERGED)) {
                double y = b == 2 ? ylo + 0.05 * (yhi - ylo) : r->test_acc;
                fprintf(f, "%ld %.6f %.6f %.6f\n", fa->val[i], y, isnan(r->test_std) ? 0 : r->test_std, r->area);
                cnt[b]++;
            }
        }
        if (!cnt[b]) fprintf(f, "nan nan nan nan\n");
    }
    fclose(f);
    f = fopen(gp, "w");
    if (!f) return -1;
    for (int t = 0; t < 2; t++) {
        fprintf(f, t ? "set terminal svg size 760,460 dynamic font 'sans,11'\n"
                     : "set terminal pngcairo size 1000,600 font 'sans,11'\n");
        fprintf(f, "set output '%s/%s.%s'\nset title \"%s\"\nset xlabel \"%s\"\n"
                   "set ylabel 'test accuracy (%%%s)'\nset y2label 'area (um^2)'\nset ytics nomirror\nset y2tics\n"
                   "set grid\nset termoption noenhanced\nset key outside right top\nset yrange [%g:%g]\n"
                   "set xrange [%g:%g]\nset offsets 0, 0, 0, 0\n",
                rp->cdir, fa->base, t ? "svg" : "png", title, fa->param, rp->c->nseeds > 1 ? ", mean +- std" : "",
                ylo, yhi, fa->val[0] - 0.5, fa->val[fa->n - 1] + 0.5);
        if (ref)
            fprintf(f, "set arrow 1 from graph 0, first %.6f to graph 1, first %.6f nohead dt 2 lc rgb '#228833'\n"
                       "set label 1 \"exact: %s\" at graph 0.01, first %.6f left offset 0,0.6 font 'sans,8' "
                       "tc rgb '#228833'\n",
                    ref->test_acc, ref->test_acc, ref->design, ref->test_acc);
        int first = 1;
#define CLAUSE(...) (fprintf(f, first ? "plot '%s' " : ", \\\n     '' ", dat), fprintf(f, __VA_ARGS__), first = 0)
        if (narea) CLAUSE("index 0 using 1:4 axes x1y2 with linespoints pt 5 ps 0.8 lw 1.5 lc rgb '#999999' "
                          "title 'area'");
        if (nacc) {
            CLAUSE("index 0 using 1:2 with lines lw 2 lc rgb '%s' notitle", colour);
            CLAUSE("index 0 using 1:2:3 with yerrorbars pt 7 ps 1.0 lc rgb '%s' title 'test accuracy'", colour);
        }
        if (cnt[1]) CLAUSE("index 1 using 1:2 with points pt 6 ps 2.6 lw 2 lc rgb '#cc3311' title 'knee'");
        if (cnt[2]) CLAUSE("index 2 using 1:2 with points pt 2 ps 1.6 lw 2 lc rgb '#b00020' title 'diverged'");
#undef CLAUSE
        fputc('\n', f);
    }
    if (fclose(f)) return -1;
    char *argv[] = {"gnuplot", gp, NULL};
    return mts_proc_run(argv, NULL) == 0 ? 0 : -1;
}

static void draw_family_charts(report *rp, const famset *fs)
{
    for (int k = 0; k < fs->n; k++) {
        family *fa = (family *)&fs->f[k];
        char title[600];
        snprintf(title, sizeof title, "%s on %s%s: %s, test accuracy and area vs %s", rp->c->models[fa->m],
                 rp->c->datasets[fa->s], fa->h ? " (inference only)" : "", fa->label, fa->param);
        fa->chart_rc = family_chart(rp, fa, title, family_colour[k % 6]); /* its colour on the other charts */
    }
}

/* results.csv through the one CSV writer (base/csv.c: RFC 4180 quoting, a
 * value that is not a number an empty field). */
static void write_csv(FILE *f, const report *rp)
{
    mts_csvw w;
    mts_csv_init(&w, f);
    static const char *const head[] = {"design", "kind", "format", "verify", "model", "dataset", "run", "state",
                                       "status", "seeds"};
    for (int k = 0; k < 10; k++) mts_csv_str(&w, head[k]);
    for (int k = 0; k < NCOLS; k++) mts_csv_str(&w, col_names[k]);
    mts_csv_str(&w, "within_noise_of_best");
    mts_csv_str(&w, "test_acc_per_seed");
    mts_csv_str(&w, "test_acc_per_epoch");
    mts_csv_str(&w, "int_backward");
    mts_csv_str(&w, "device");
    mts_csv_str(&w, "gpu_path");
    mts_csv_str(&w, "device_peak_bytes");
    mts_csv_end(&w);
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        const char *text[] = {r->design, r->kind, r->format, r->verify, r->model, r->data, how_name[r->how],
                              state_name[r->state], r->status};
        for (size_t k = 0; k < sizeof text / sizeof text[0]; k++) mts_csv_str(&w, text[k]);
        mts_csv_int(&w, r->ndone);
        double v[NCOLS];
        row_values(r, v);
        for (int k = 0; k < NCOLS; k++) mts_csv_num(&w, v[k], "%.9g");
        mts_csv_str(&w, r->within_noise ? "yes" : "");
        char list[2048];
        size_t len = 0;
        list[0] = '\0';
        for (int k = 0; k < r->nseeds && len < sizeof list; k++)
            len += (size_t)(isnan(r->seed_acc[k]) ? snprintf(list + len, sizeof list - len, "%s-", k ? " " : "")
                                                  : snprintf(list + len, sizeof list - len, "%s%.2f", k ? " " : "",
                                                             r->seed_acc[k]));
        mts_csv_str(&w, list);
        len = 0;
        list[0] = '\0';
        for (int e = 0; e < r->ncurve && len < sizeof list; e++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%.2f", e ? " " : "", r->curve[e]);
        mts_csv_str(&w, list);
        mts_csv_str(&w, r->int_bwd);
        mts_csv_str(&w, r->device);
        mts_csv_str(&w, r->gpu_path);
        mts_csv_num(&w, r->dev_peak, "%.0f");
        mts_csv_end(&w);
    }
}

static void jarr(mts_jw *w, const char *k, const double *v, int n)
{
    mts_jw_arr(w, k, 0);
    for (int i = 0; i < n; i++) mts_jw_num(w, NULL, v[i], "%.6g"); /* NaN: null */
    mts_jw_end(w);
}

/* "families": every sweep family with its points, exact design and knee. */
static void write_json_families(mts_jw *w, const report *rp)
{
    mts_jw_arr(w, "families", 1);
    for (int k = 0; k < rp->nfam; k++) {
        const family *fa = &rp->fam[k];
        const row *rows = rp->rows;
        mts_jw_obj(w, NULL, 0);
        mts_jw_str(w, "design", fa->design);
        mts_jw_str(w, "param", fa->param);
        mts_jw_str(w, "fixed", fa->fixed);
        mts_jw_str(w, "label", fa->label);
        mts_jw_str(w, "model", rp->c->models[fa->m]);
        mts_jw_str(w, "dataset", rp->c->datasets[fa->s]);
        mts_jw_str(w, "run", how_name[fa->h]);
        mts_jw_arr(w, "points", 0);
        for (int i = 0; i < fa->n; i++) mts_jw_str(w, NULL, rows[fa->row[i]].design);
        mts_jw_end(w);
        mts_jw_arr(w, "values", 0);
        for (int i = 0; i < fa->n; i++) mts_jw_int(w, NULL, fa->val[i]);
        mts_jw_end(w);
        const int who[3] = {fa->ref, fa->knee, fa->beyond};
        static const char *const key[3] = {"exact", "knee", "beyond"};
        for (int i = 0; i < 3; i++) {
            if (who[i] < 0) mts_jw_null(w, key[i]);
            else mts_jw_str(w, key[i], rows[who[i]].design);
        }
        mts_jw_num(w, "area_saving", fa->area_save, "%.9g");
        mts_jw_num(w, "power_saving", fa->power_save, "%.9g");
        mts_jw_str(w, "power_kind", fa->power_kind ? "workload" : "uniform");
        mts_jw_str(w, "chart", fa->chart_rc == 0 ? fa->base : "");
        mts_jw_str(w, "sentence", fa->sentence);
        mts_jw_end(w);
    }
    mts_jw_end(w);
}

/* results.json through the one JSON writer (base/json.c). */
static void write_json(FILE *f, const report *rp)
{
    const flow_cfg *c = rp->c;
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 0);
    mts_jw_str(&w, "mantis", MANTIS_VERSION);
    mts_jw_obj(&w, "summary", 0);
    mts_jw_int(&w, "ok", rp->count[R_OK]);
    mts_jw_int(&w, "failed", rp->count[R_FAILED]);
    mts_jw_int(&w, "diverged", rp->count[R_DIVERGED]);
    mts_jw_int(&w, "skipped", rp->count[R_SKIPPED]);
    mts_jw_end(&w);
    mts_jw_arr(&w, "seeds", 0);
    for (int k = 0; k < c->nseeds; k++) mts_jw_int(&w, NULL, c->seeds[k]);
    mts_jw_end(&w);
    mts_jw_arr(&w, "layers", 0);
    for (int r = 0; r < c->nlayers; r++) mts_jw_str(&w, NULL, c->layers[r]);
    mts_jw_end(&w);
    mts_jw_str(&w, "device", c->cuda ? "cuda" : "cpu"); /* where this run sent its trainings and tests */
    mts_jw_str(&w, "device_name", c->device_name);
    mts_jw_str(&w, "profile", c->profile_used[0] ? c->profile_used : "none");
    mts_jw_bool(&w, "profile_auto", c->profile_auto);
    mts_jw_arr(&w, "rows", 1);
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        mts_jw_obj(&w, NULL, 0);
        mts_jw_str(&w, "design", r->design);
        mts_jw_str(&w, "kind", r->kind);
        mts_jw_str(&w, "format", r->format);
        mts_jw_str(&w, "verify", r->verify);
        mts_jw_str(&w, "model", r->model);
        mts_jw_str(&w, "dataset", r->data);
        mts_jw_str(&w, "run", how_name[r->how]);
        mts_jw_str(&w, "state", state_name[r->state]);
        mts_jw_str(&w, "status", r->status);
        mts_jw_str(&w, "int_backward", r->int_bwd);
        mts_jw_str(&w, "device", r->device);
        mts_jw_str(&w, "gpu_path", r->gpu_path);
        mts_jw_num(&w, "device_peak_bytes", r->dev_peak, "%.0f"); /* NaN: null */
        double v[NCOLS];
        row_values(r, v);
        for (int k = 0; k < NCOLS; k++) mts_jw_num(&w, col_names[k], v[k], "%.9g");
        jarr(&w, "test_acc_per_seed", r->seed_acc, r->nseeds);
        jarr(&w, "test_acc_per_epoch", r->curve, r->ncurve);
        if (c->ncross && !r->how) {
            mts_jw_obj(&w, "cross", 0);
            for (int y = 0; y < c->ncross; y++) mts_jw_num(&w, c->cross[y], r->cross[y], "%.6g");
            mts_jw_end(&w);
        }
        mts_jw_int(&w, "seeds_trained", r->ndone);
        mts_jw_int(&w, "seeds_diverged", r->ndiverged);
        mts_jw_bool(&w, "within_noise_of_best", r->within_noise);
        mts_jw_bool(&w, "baseline", r->baseline);
        mts_jw_end(&w);
    }
    mts_jw_end(&w);
    write_json_families(&w, rp);
    mts_jw_end(&w);
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
        for (int s = 0; s < c->ndatasets; s++)
        for (int h = 0; h < 2; h++) {
            if (!(hows(c) >> h & 1)) continue;
            int ns = 0;
            for (int i = 0; sub && i < rp->n && ns < CHART_MAX; i++)
                if (!strcmp(rp->rows[i].model, c->models[m]) && !strcmp(rp->rows[i].data, c->datasets[s]) &&
                    rp->rows[i].how == h)
                    sub[ns++] = rp->rows[i];
            famset fs = group_families(rp, m, s, h);
            draw_family_charts(rp, &fs);
            for (int x = 0; x <= NAXES; x++) {
                char base[128], title[160];
                chart_names(rp, m, s, h, x, base, title);
                rp->chart_rc[m][s][h][x] = !sub ? -1 : x == NAXES ? (h ? 1 : curves(rp->cdir, base, sub, ns, title))
                                                               : chart(rp->cdir, base, sub, ns, x, title, axis_label[x],
                                                                       c->nseeds, &fs);
            }
        }
    free(sub);
}

/* The counts, then what they mean for the exit status: a diverged training
 * is a result of its design; a failed step or verification is not. */
static void summary_line(char *buf, size_t n, const report *rp)
{
    int bad = rp->count[R_FAILED] + rp->count[R_SKIPPED];
    snprintf(buf, n, "%d ok, %d failed, %d diverged, %d skipped (rows: design x model x data set); %s", rp->count[R_OK],
             rp->count[R_FAILED], rp->count[R_DIVERGED], rp->count[R_SKIPPED],
             bad ? "exit status 1: a step failed or a design failed verification"
             : rp->count[R_DIVERGED] ? "every step ran (exit status 0: a diverged training is a result of its design)"
                                     : "every step ran");
}

static void html_head(FILE *f, const report *rp)
{
    const flow_cfg *c = rp->c;
    /* charts: a grid of figures as wide as the window allows, each SVG scaled
     * to its figure's width (gnuplot's SVG has a viewBox and no size) */
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Mantis report</title>\n<style>"
               "body{font-family:sans-serif;margin:2em;max-width:1600px}table{border-collapse:collapse;"
               "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
               "td:first-child,th:first-child{text-align:left}.ok{color:#176d1b;font-weight:bold}"
               ".bad{color:#b00020;font-weight:bold}.st{text-align:left;font-size:12px;min-width:18em}.nw{white-space:nowrap}"
               ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%%,560px),1fr));gap:1em}"
               "figure.chart{margin:0;min-width:0}figure.chart svg{display:block;width:100%%;height:auto}"
               ".summary{font-size:1.1em;font-weight:bold}</style></head>\n<body>\n"
               "<h1>Mantis report</h1>\n<p>%d designs and %d baselines; models: ", rp->nd - c->nbaselines,
            c->nbaselines);
    for (int m = 0; m < c->nmodels; m++) fprintf(f, "%s%s", m ? ", " : "", c->models[m]);
    fprintf(f, "; data sets: ");
    for (int s = 0; s < c->ndatasets; s++) fprintf(f, "%s%s", s ? ", " : "", c->datasets[s]);
    fprintf(f, "; %d epoch(s); seeds ", c->epochs);
    for (int k = 0; k < c->nseeds; k++) fprintf(f, "%s%d", k ? ", " : "", c->seeds[k]);
    fprintf(f, "%s", c->quick ? "; quick profile (subset of the training data)" : "");
    if (c->test_subset) /* the accuracy axis is then over part of the test set: say so */
        fprintf(f, "; test accuracy on the first %d test images only", c->test_subset);
    if (!strcmp(c->profile_used, "gpu"))
        fprintf(f, "; GPU profile%s (%s images per epoch)",
                c->profile_auto ? ", picked because the trainings run on a GPU and no size was pinned" : "",
                c->subset ? "a subset of the" : "all training");
    fputs(".</p>\n<p>Trainings and tests ran on ", f);
    if (c->cuda) {
        fputs("<b>cuda</b> (", f);
        html_esc(f, c->device_name);
        fputs(")", f);
    } else {
        fputs("<b>the CPU</b>", f);
    }
    fputs(" (column <em>device</em>: where each row's ran); operand traces and the GEMM dump run on the CPU.</p>\n",
          f);
    if (c->nlayers) { /* per-layer multipliers (layers = ...): every training and test of the matching models */
        fprintf(f, "<p>Per-layer multipliers, last match wins (<code>design</code>: the row's own multiplier): ");
        for (int r = 0; r < c->nlayers; r++) {
            fputs(r ? "; <code>" : "<code>", f);
            html_esc(f, c->layers[r]);
            fputs("</code>", f);
        }
        fputs(".</p>\n", f);
    }
    char sum[256];
    summary_line(sum, sizeof sum, rp);
    fprintf(f, "<p class=\"summary\">%s</p>\n", sum);
    if (c->nseeds > 1)
        fprintf(f, "<p>Accuracies are the mean &plusmn; sample standard deviation over the %d seeds (error bars). Two "
                   "designs are <em>not distinguishable</em> when their means differ by less than "
                   "&radic;(s&#8321;&sup2; + s&#8322;&sup2;), their combined standard deviation. Pareto "
                   "optimality uses the mean.</p>\n", c->nseeds);
    else
        fprintf(f, "<p>One seed: no uncertainty is measured, so accuracy differences of a point or two may be "
                   "noise (use <code>seeds = 1, 2, 3</code>).</p>\n");
}

/* Per model x data set: which designs the best one cannot be told apart from. */
static int in_group(const report *rp, const row *r, int m, int s, int h)
{
    return !strcmp(r->model, rp->c->models[m]) && !strcmp(r->data, rp->c->datasets[s]) && r->how == h;
}

static void html_noise(FILE *f, const report *rp, int m, int s, int h)
{
    const flow_cfg *c = rp->c;
    if (c->nseeds < 2) return;
    const row *best = NULL;
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        if (in_group(rp, r, m, s, h) && !isnan(r->test_acc) && (!best || r->test_acc > best->test_acc)) best = r;
    }
    if (!best) return;
    fprintf(f, "<p>Most accurate: <b>%s</b> %.2f &plusmn; %.2f%%. Not distinguishable from it: ", best->design,
            best->test_acc, best->test_std);
    int k = 0;
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        if (in_group(rp, r, m, s, h) && r->within_noise)
            fprintf(f, "%s%s (%.2f &plusmn; %.2f)", k++ ? ", " : "", r->design, r->test_acc, r->test_std);
    }
    fprintf(f, "%s.</p>\n", k ? "" : "none");
}

/* The train-with-X / test-with-Y matrix of one model x data set. */
static void html_cross(FILE *f, const report *rp, int m, int s)
{
    const flow_cfg *c = rp->c;
    if (!c->ncross) return;
    fprintf(f, "<h3>Trained with X (rows), tested with Y (columns): test accuracy %%%s</h3>\n<table><tr>"
               "<th>trained with</th><th>itself</th>",
            c->nseeds > 1 ? ", mean &plusmn; std over seeds" : "");
    for (int y = 0; y < c->ncross; y++) fprintf(f, "<th>%s</th>", c->cross[y]);
    fputs("</tr>\n", f);
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        if (!in_group(rp, r, m, s, 0)) continue;
        fprintf(f, "<tr><td>%s</td>", r->design);
        for (int y = -1; y < c->ncross; y++) {
            double a = y < 0 ? r->test_acc : r->cross[y], sd = y < 0 ? r->test_std : r->cross_std[y];
            if (isnan(a)) fputs("<td>&ndash;</td>", f);
            else if (isnan(sd)) fprintf(f, "<td>%.2f</td>", a);
            else fprintf(f, "<td class=\"nw\">%.2f &plusmn; %.2f</td>", a, sd);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* Per family of a model x data set: the knee in words and numbers. */
static void html_knees(FILE *f, const famset *fs)
{
    if (!fs->n) return;
    fputs("<p>Sweeps: each family's points are joined in parameter order on the charts. A point is <em>within "
          "noise</em> of the family's exact design (its point with MRED 0 and the largest area, else the fp32 "
          "baseline) when their means differ by less than their combined standard deviation; the knee is the "
          "most approximate point still within noise, walking from the exact end.</p>\n<ul class=\"knees\">\n", f);
    for (int k = 0; k < fs->n; k++) {
        fputs("<li class=\"knee\">", f);
        html_esc(f, fs->f[k].sentence);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
}

static void html_family_charts(FILE *f, const report *rp, const famset *fs)
{
    for (int k = 0; k < fs->n; k++) {
        const family *fa = &fs->f[k];
        if (fa->chart_rc == 0) {
            char svg[FLOW_PATH + 300];
            snprintf(svg, sizeof svg, "%s/%s.svg", rp->cdir, fa->base);
            fprintf(f, "<figure class=\"chart\" id=\"%s\">", fa->base);
            inline_file(f, svg);
            fprintf(f, "</figure>\n");
        } else {
            fprintf(f, "<p class=\"nochart\">%s against %s: %s</p>\n", fa->label, fa->param,
                    fa->chart_rc > 0 ? "no point has a figure yet" : "gnuplot failed (charts/ has the script)");
        }
    }
}

/* The charts inline (SVG), or why one is missing. */
static void html_charts(FILE *f, const report *rp)
{
    const flow_cfg *c = rp->c;
    for (int m = 0; m < c->nmodels; m++)
        for (int s = 0; s < c->ndatasets; s++)
            for (int h = 0; h < 2; h++) {
                if (!(hows(c) >> h & 1)) continue;
                fprintf(f, "<h2>%s on %s%s</h2>\n", c->models[m], c->datasets[s],
                        h ? ": inference only (the fp32 baseline's checkpoint tested with each design)" : "");
                html_noise(f, rp, m, s, h);
                famset fs = group_families(rp, m, s, h);
                html_knees(f, &fs);
                fprintf(f, "<div class=\"charts\">\n");
                for (int x = 0; x <= NAXES; x++) {
                    char base[128], title[160];
                    chart_names(rp, m, s, h, x, base, title);
                    int rc = rp->chart_rc[m][s][h][x];
                    if (rc == 0) {
                        char svg[FLOW_PATH + 200];
                        snprintf(svg, sizeof svg, "%s/%s.svg", rp->cdir, base);
                        fprintf(f, "<figure class=\"chart\" id=\"%s\">", base);
                        inline_file(f, svg);
                        fprintf(f, "</figure>\n");
                    } else if (!(h && x == NAXES)) {
                        fprintf(f, "<p class=\"nochart\">%s: %s</p>\n", title,
                                rc > 0 ? "no trained design has this figure yet"
                                       : "gnuplot failed (charts/ has the script)");
                    }
                }
                html_family_charts(f, rp, &fs);
                fprintf(f, "</div>\n");
                if (!h) html_cross(f, rp, m, s);
            }
}

static void html_table(FILE *f, const report *rp)
{
    fprintf(f, "<h2>Designs</h2>\n<table><tr><th>design</th><th>status</th><th>kind</th><th>format</th>"
               "<th>verification</th><th>model</th><th>data</th><th>run</th><th>test acc %%</th><th>seeds</th><th>train acc %%</th>"
               "<th>device</th><th>test acc per epoch</th><th>MRED</th><th>NMED</th><th>error rate</th><th>bias</th><th>area um&sup2;</th>"
               "<th>NAND2 eq</th><th>delay ps</th><th>power uW (uniform)</th><th>pJ/op</th><th>power uW (workload)</th>"
               "<th>cosim cycles / inference</th><th>cosim pJ / inference</th>"
               "</tr>\n");
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        int ok = !strcmp(r->verify, "bit-exact");
        fprintf(f, "<tr><td>%s</td><td class=\"st %s\">", r->design, r->state == R_OK ? "ok" : "bad");
        html_esc(f, r->status);
        fprintf(f, "</td><td>%s%s%s%s</td><td>%s</td><td class=\"%s\">%s%s</td><td>%s</td><td>%s</td>", r->kind,
                r->int_bwd[0] ? " (backward: " : "", r->int_bwd[0] ? r->int_bwd : "", r->int_bwd[0] ? ")" : "",
                r->format, ok ? "ok" : r->baseline ? "" : "bad", ok ? "&#10004; " : "",
                r->baseline ? "C model" : r->verify, r->model, r->data);
        fprintf(f, "<td>%s</td>", how_name[r->how]);
        if (isnan(r->test_acc)) fputs("<td>&ndash;</td>", f);
        else if (isnan(r->test_std)) fprintf(f, "<td>%.2f</td>", r->test_acc);
        else fprintf(f, "<td class=\"nw\">%.2f &plusmn; %.2f%s</td>", r->test_acc, r->test_std, r->within_noise ? " &asymp;best" : "");
        fprintf(f, "<td>%d/%d</td>", r->ndone, r->nseeds);
        cell(f, r->train_acc, "%.2f");
        fputs("<td>", f);
        if (r->device[0]) html_esc(f, r->device);
        else fputs("&ndash;", f);
        if (r->gpu_path[0] || !isnan(r->dev_peak)) {
            fputs("<br><small>", f);
            html_esc(f, r->gpu_path);
            if (!isnan(r->dev_peak)) fprintf(f, "%s%.1f MiB peak", r->gpu_path[0] ? ", " : "", r->dev_peak / 1048576.0);
            fputs("</small>", f);
        }
        fputs("</td><td>", f);
        for (int e = 0; e < r->ncurve; e++) fprintf(f, "%s%.2f", e ? " " : "", r->curve[e]);
        fputs("</td>", f);
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
        fprintf(f, "</tr>\n");
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
               "(synth/mantis45.lib) for ranking designs, not sign-off numbers.</p>\n");
}

static void write_html(FILE *f, const report *rp)
{
    html_head(f, rp);
    html_charts(f, rp);
    html_table(f, rp);
    html_provenance(f, rp);
    fputs("</body>\n</html>\n", f);
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
    fprintf(out, "\n%-22s %-9s %-22s %-18s %15s %10s %10s %9s  %s\n", "design", "format", "verification", "model/data",
            "test% (+-std)", "area um2", "uW(work)", "MRED", "status");
    for (int i = 0; i < rp->n; i++) {
        const row *r = &rp->rows[i];
        char md[72], acc[32];
        snprintf(md, sizeof md, "%.31s/%.31s%s", r->model, r->data, r->how ? " infer" : "");
        if (isnan(r->test_acc)) snprintf(acc, sizeof acc, "-");
        else if (isnan(r->test_std)) snprintf(acc, sizeof acc, "%.2f", r->test_acc);
        else snprintf(acc, sizeof acc, "%.2f +-%.2f", r->test_acc, r->test_std);
        fprintf(out, "%-22s %-9s %-22s %-18s %15s %10.1f %10.1f %9.3g  %s\n", r->design, r->format,
                r->baseline ? "C model" : r->verify, md, acc, r->area, isnan(r->pw_work) ? r->pw_uniform : r->pw_work,
                r->mred, r->status);
    }
    char sum[256];
    summary_line(sum, sizeof sum, rp);
    fprintf(out, "\n%s\nreport: %s\n", sum, html);
}

int flow_report(const flow_cfg *c, const flow_graph *g, const char *cmdline, FILE *out, int *failed, mts_err *err)
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
    if (failed) *failed = rp->count[R_FAILED] + rp->count[R_SKIPPED]; /* diverged rows are results */
    free(rp->fam);
    free(rp->rows);
    free(rp);
    return rc;
}
