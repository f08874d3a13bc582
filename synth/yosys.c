/* yosys.c - the Yosys/ABC step of the synth flow: synth/synth.ys filled in
 * for the design, run in the work directory, and the top module, chip area
 * and ABC critical-path delay read back from its log and stat report. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/proc.h"
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
static int make_script(const mts_synth_ctx *c, char **script, mts_err *err)
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
    const char *keys[] = {"@DESIGN@", "@DESIGNDIR@", "@TOPSEL@", "@CHPARAM@", "@LIBERTY@", "@OUT@"};
    const char *vals[] = {c->tool_design, c->tool_dir, topsel, chparam, c->liberty, c->work};
    *script = fill_template((const char *)tpl, 6, keys, vals);
    free(tpl);
    return *script ? MTS_OK : mts_fail(err, MTS_ENOMEM, "out of memory");
}

/* Top module and ABC delay from the log (the last stime report wins). */
static void read_log(const char *log, char *top, size_t topcap, double *delay_ps)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    *delay_ps = -1;
    top[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *p;
        if (!top[0] && (p = strstr(line, "Top module:"))) {
            p += 11;
            while (*p == ' ' || *p == '\\') p++;
            p[strcspn(p, " \r\n")] = 0;
            snprintf(top, topcap, "%s", p);
        }
        if (strstr(line, "WireLoad") && (p = strstr(line, "Delay =")))
            *delay_ps = atof(p + 7);
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

int mts_synth_yosys(const mts_synth_ctx *c, char *top, size_t topcap, double *area_um2, double *delay_ps,
                    mts_err *err)
{
    char script_path[PATH_MAX], log[PATH_MAX], stat[PATH_MAX], *script;
    int rc = mts_synth_path(script_path, c->work, "flow.ys", err);
    if (!rc) rc = mts_synth_path(log, c->work, "yosys.log", err);
    if (!rc) rc = mts_synth_path(stat, c->work, "stat.txt", err);
    if (!rc) rc = make_script(c, &script, err);
    if (rc) return rc;
    rc = mts_fs_write_text(script_path, script, err);
    free(script);
    if (rc) return rc;
    /* Without -q Yosys writes its whole log to stdout: one file, in order. */
    char *argv[] = {"yosys", "-s", "flow.ys", NULL};
    mts_proc_io io = {.cwd = c->work, .log = log, .echo = c->o->verbose ? "mantis synth" : NULL};
    if (mts_proc_run(argv, &io)) return mts_synth_tool_error(c, "yosys", log, yosys_markers, err);
    read_log(log, top, topcap, delay_ps);
    for (const char *t = top; *t; t++) /* it goes into the generated wrapper */
        if (!is_ident_char(*t) && !(*t == '$' && t > top))
            return mts_fail(err, MTS_EUNSUPPORTED,
                            "%s: top module '%s' is not a plain Verilog identifier ([A-Za-z_][A-Za-z0-9_$]*), "
                            "which the equivalence wrapper needs",
                            c->base, top);
    *area_um2 = read_area(stat);
    if (*area_um2 == 0 && *delay_ps < 0) *delay_ps = 0; /* no cells (a constant design): no path */
    if (!top[0] || *area_um2 < 0)
        return mts_fail(err, MTS_ETOOL, "%s: yosys: no top module or chip area in its output (log: %s)", c->base, log);
    return MTS_OK;
}
