/* yosys.c - the Yosys/ABC step of the synth flow: synth/synth.ys filled in
 * for the design, run in the work directory, and the top module and chip
 * area read back from its log and stat report (the delay is sta.c's). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/proc.h"
#include "mantis/rng.h"
#include "synth_int.h"

static const char *const yosys_markers[] = {"ERROR:", "Error", NULL};

/* Replaces every @KEY@ of tpl; keys/vals are parallel lists. */
static char *fill_template(const char *tpl, int n, const char *const *keys, const char *const *vals)
{
    size_t cap = strlen(tpl) + 1;
    for (int i = 0; i < n; i++) cap += 8 * strlen(vals[i]) + 8;
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    for (const char *s = tpl; *s;) {
        int hit = -1;
        for (int i = 0; i < n && hit < 0; i++)
            if (!strncmp(s, keys[i], strlen(keys[i]))) hit = i;
        if (hit >= 0) {
            size_t l = strlen(vals[hit]);
            if ((size_t)(o - out) + l + 1 >= cap) break;
            memcpy(o, vals[hit], l);
            o += l;
            s += strlen(keys[hit]);
        } else {
            if ((size_t)(o - out) + 2 >= cap) break;
            *o++ = *s++;
        }
    }
    *o = 0;
    return out;
}

static int is_ident_char(char ch)
{
    return ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
}

/* Does the file declare `module NAME`? (Token scan, comments skipped.) */
static int declares_module(const char *text, const char *name)
{
    size_t nl = strlen(name);
    for (const char *s = text; *s; s++) {
        if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
            if (!*s) break;
            continue;
        }
        if (s[0] == '/' && s[1] == '*') {
            const char *e = strstr(s + 2, "*/");
            if (!e) break;
            s = e + 1;
            continue;
        }
        if (!strncmp(s, "module", 6) && (s == text || s[-1] == '\n' || s[-1] == ' ' || s[-1] == '\t' || s[-1] == ';')) {
            const char *p = s + 6;
            if (*p != ' ' && *p != '\t' && *p != '\n') continue;
            while (*p == ' ' || *p == '\t' || *p == '\n') p++;
            if (!strncmp(p, name, nl) && !is_ident_char(p[nl])) return 1;
        }
    }
    return 0;
}

/* The Yosys script for this design: the template with its @FIELDS@ set. The
 * top is the module named like the file, else the one nothing instantiates. */
static int make_script(const synth_ctx *c, const char *out, int adders, char **script, mts_err *err)
{
    uint8_t *tpl, *src;
    size_t len;
    int rc = mts_fs_read(c->tpl, &tpl, &len, err);
    if (rc) return rc;
    if ((rc = mts_fs_read(c->design, &src, &len, err))) {
        free(tpl);
        return rc;
    }
    char topsel[512], chparam[2048] = "";
    if (declares_module((const char *)src, c->base)) snprintf(topsel, sizeof topsel, "-top %s", c->base);
    else snprintf(topsel, sizeof topsel, "-auto-top");
    free(src);
    for (int i = 0; i < c->o->nparams; i++) {
        const char *p = c->o->param[i], *eq = strchr(p, '=');
        size_t l = strlen(chparam);
        snprintf(chparam + l, sizeof chparam - l, " -chparam %.*s %s", (int)(eq - p), p, eq + 1);
    }
    char fa[2 * PATH_MAX + 300] = "synth -flatten -auto-top";
    if (adders) /* synth's own steps up to its ABC call, with the adders taken out first */
        snprintf(fa, sizeof fa,
                 "read_verilog -lib %s\nsynth -flatten -auto-top -run :fine\nopt -fast -full\nmemory_map\nopt -full\n"
                 "techmap\nopt -fast\nextract_fa -fa\nopt_clean\ntechmap -map %s\nopt_clean\nsynth -auto-top -run fine:",
                 c->cells_v, c->adders);
    const char *keys[] = {"@DESIGN@", "@DESIGNDIR@", "@TOPSEL@", "@CHPARAM@", "@LIBERTY@", "@OUT@", "@SYNTH@"};
    const char *vals[] = {c->tool_design, c->tool_dir, topsel, chparam, c->liberty, out, fa};
    *script = fill_template((const char *)tpl, 7, keys, vals);
    free(tpl);
    return *script ? MTS_OK : mts_fail(err, MTS_ENOMEM, "out of memory");
}

/* The top module from the log. */
static void read_log(const char *log, char *top, size_t topcap)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    top[0] = 0;
    while (f && !top[0] && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "Top module:");
        if (p) {
            p += 11;
            while (*p == ' ' || *p == '\\') p++;
            p[strcspn(p, " \r\n")] = 0;
            snprintf(top, topcap, "%s", p);
        }
    }
    if (f) fclose(f);
}

/* Chip area from `stat -liberty`; -1 when it is not there. Yosys prints no
 * area line for a module without cells (a constant design): area 0. */
static double read_area(const char *stat)
{
    FILE *f = fopen(stat, "r");
    char line[2048];
    double area = -1;
    int no_cells = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "Chip area for module");
        if (p && (p = strrchr(line, ':'))) area = atof(p + 1);
        if ((p = strstr(line, "Number of cells:")) && atol(p + 16) == 0) no_cells = 1;
    }
    if (area < 0 && no_cells) area = 0;
    if (f) fclose(f);
    return area;
}

/* One Yosys run of the flow into dir (flow.ys, yosys.log, stat.txt, netlists). */
static int run_variant(const synth_ctx *c, const char *dir, int adders, char *top, size_t topcap,
                       double *area_um2, mts_err *err)
{
    char script_path[PATH_MAX], log[PATH_MAX], stat[PATH_MAX], *script;
    int rc = synth_path(script_path, dir, "flow.ys", err);
    if (!rc) rc = synth_path(log, dir, "yosys.log", err);
    if (!rc) rc = synth_path(stat, dir, "stat.txt", err);
    if (!rc) rc = make_script(c, dir, adders, &script, err);
    if (rc) return rc;
    rc = mts_fs_write_text(script_path, script, err);
    free(script);
    if (rc) return rc;
    /* Without -q Yosys writes its whole log to stdout: one file, in order. */
    char *argv[] = {"yosys", "-s", "flow.ys", NULL};
    mts_proc_tail tail;
    mts_proc_io io = {.cwd = dir, .log = log, .echo = c->o->verbose ? "mantis synth" : NULL, .tail = &tail};
    if (mts_proc_run(argv, &io)) return synth_tool_error(c, "yosys", log, &tail, yosys_markers, err);
    read_log(log, top, topcap);
    *area_um2 = read_area(stat);
    return MTS_OK;
}

/* 1 when dir/netlist.blif computes what work/netlist.blif does, by the C
 * gate-level simulator: every input vector up to 22 input bits, else 2^16
 * seeded ones. (The equivalence check against the RTL still follows.) */
static int same_function(const synth_ctx *c, const char *dir)
{
    char a[PATH_MAX], b[PATH_MAX];
    synth_gl ga = {0}, gb = {0};
    int same = !synth_path(a, c->work, "netlist.blif", NULL) && !synth_path(b, dir, "netlist.blif", NULL) &&
               !synth_gl_load(a, &c->lib, &ga, NULL) && !synth_gl_load(b, &c->lib, &gb, NULL) &&
               ga.nin_bits == gb.nin_bits && ga.nout_bits == gb.nout_bits && ga.nin_bits <= 64;
    uint64_t n = same && ga.nin_bits <= 22 ? 1ull << ga.nin_bits : 1ull << 16, s = 0xFA;
    uint64_t *v = same ? malloc(3 * n * sizeof *v) : NULL;
    same = same && v;
    if (same) {
        uint64_t mask = ga.nin_bits >= 64 ? ~0ull : (1ull << ga.nin_bits) - 1;
        for (uint64_t i = 0; i < n; i++) v[i] = ga.nin_bits <= 22 ? i : mts_rng_splitmix64(&s) & mask;
        same = !synth_gl_sim(&ga, v, n, v + n, NULL, NULL) && !synth_gl_sim(&gb, v, n, v + 2 * n, NULL, NULL) &&
               !memcmp(v + n, v + 2 * n, n * sizeof *v);
    }
    free(v);
    synth_gl_free(&ga);
    synth_gl_free(&gb);
    return same;
}

/* extract_fa enumerates logic cones: seconds on an 8x8 multiplier, minutes on
 * the 26-input accumulator. The variant is tried up to ADDERS_MAX_IN_BITS
 * input bits (every multiplier up to 12x12). */
#define ADDERS_MAX_IN_BITS 24
static int adders_worth_trying(const synth_ctx *c)
{
    char blif[PATH_MAX];
    synth_gl gl = {0};
    int ok = !synth_path(blif, c->work, "netlist.blif", NULL) && !synth_gl_load(blif, &c->lib, &gl, NULL) &&
             gl.nin_bits <= ADDERS_MAX_IN_BITS;
    synth_gl_free(&gl);
    return ok;
}

/* The full-adder variant in work/fa: when its area is smaller, its files
 * replace the plain ones. Full adders pay off in adder trees (NanGate's FA
 * is smaller than its gates) but cut ABC's optimisation across them, so the
 * smaller netlist is kept (docs/synth.md). */
static int try_adders(const synth_ctx *c, double *area_um2, mts_err *err)
{
    char dir[PATH_MAX], top[128];
    double area = -1;
    int rc = synth_path(dir, c->work, "fa", err);
    if (!rc) rc = mts_fs_mkdirs(dir, err);
    if (!rc) rc = run_variant(c, dir, 1, top, sizeof top, &area, err);
    if (!rc && area >= 0 && area < *area_um2 - 1e-9 && same_function(c, dir)) {
        static const char *const files[] = {"flow.ys", "yosys.log", "stat.txt", "netlist.v", "netlist.blif"};
        for (size_t i = 0; i < sizeof files / sizeof files[0] && !rc; i++) {
            char from[PATH_MAX], to[PATH_MAX];
            rc = synth_path(from, dir, files[i], err);
            if (!rc) rc = synth_path(to, c->work, files[i], err);
            if (!rc && rename(from, to)) rc = mts_fail(err, MTS_EIO, "%s: cannot move into place", to);
        }
        if (!rc) *area_um2 = area;
    }
    if (!rc) mts_fs_rmtree(dir); /* else kept: the error message points at its log */
    return rc;
}

int synth_yosys(const synth_ctx *c, char *top, size_t topcap, double *area_um2, mts_err *err)
{
    char log[PATH_MAX];
    int rc = synth_path(log, c->work, "yosys.log", err);
    if (!rc) rc = run_variant(c, c->work, 0, top, topcap, area_um2, err);
    if (rc) return rc;
    for (const char *t = top; *t; t++) /* it goes into the generated wrapper */
        if (!is_ident_char(*t) && !(*t == '$' && t > top))
            return mts_fail(err, MTS_EUNSUPPORTED,
                            "%s: top module '%s' is not a plain Verilog identifier ([A-Za-z_][A-Za-z0-9_$]*), "
                            "which the equivalence wrapper needs",
                            c->base, top);
    if (!top[0] || *area_um2 < 0)
        return mts_fail(err, MTS_ETOOL, "%s: yosys: no top module or chip area in its output (log: %s)", c->base, log);
    return *area_um2 > 0 && adders_worth_trying(c) ? try_adders(c, area_um2, err) : MTS_OK;
}
