/* sta.c - the delay step of the synth flow: OpenSTA (`sta`, Debian's
 * opensta) times the mapped netlist with the liberty's NLDM tables, every
 * cell on every path (the full and half adders, which ABC cannot see,
 * included), and the critical path is read back from its log. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/hash.h"
#include "mantis/proc.h"
#include "synth_int.h"

/* The virtual clock's period, ns: longer than any combinational path, so
 * delay = period - worst slack. */
#define STA_PERIOD_NS 1000.0

/* The TCL script (printf format: liberty, period, driving-cell line, output
 * load). Inputs are driven by the liberty's smallest buffer (a register or
 * gate of the surrounding logic would drive them; without one, ideal edges),
 * every output carries one X1 inverter input (MTS_SYNTH_PO_LOAD_FF, as in the
 * power model), nets the liberty's default wire-load model. In the cache key
 * with the period and the load (synth_sta_hash); the driving cell follows
 * from the liberty, which is in the key too. */
static const char *const sta_script =
    "# sta.tcl - written by mantis synth (synth/sta.c): OpenSTA times netlist.v\n"
    "read_liberty {%s}\n"
    "read_verilog netlist.v\n"
    "link_design mts_gl\n"
    "create_clock -name mts_vclk -period %.1f\n"
    "set_input_delay 0 -clock mts_vclk [all_inputs]\n"
    "set_output_delay 0 -clock mts_vclk [all_outputs]\n"
    "%s"
    "set_load %.3f [all_outputs]\n"
    "report_checks -path_delay max -fields {cap slew fanout} -digits 4\n"
    "puts \"mantis-sta-worst-slack [sta::worst_slack -max]\"\n";

/* What OpenSTA says and then carries on (exit 0): an error ("Error: FILE,
 * line N ..."), or a cell the liberty lacks ("module X not found.  Creating
 * black box"), whose paths it would leave untimed. (Not a bare "error": a
 * port may be named so, and the report prints port names.) */
static const char *const sta_markers[] = {"Error:", "Creating black box", NULL};

/* The cheapest non-inverting one-input cell of the liberty; NULL if none. */
static const synth_lcell *driving_cell(const synth_lib *lib)
{
    const synth_lcell *best = NULL;
    for (int i = 0; i < lib->ncells; i++) {
        const synth_lcell *k = &lib->cells[i];
        if (!k->seq && k->nin == 1 && k->nout == 1 && k->tt == 2 && (!best || k->area < best->area)) best = k;
    }
    return best;
}

void synth_sta_hash(mts_hash128 *h)
{
    double nums[2] = {STA_PERIOD_NS, MTS_SYNTH_PO_LOAD_FF};
    mts_hash128_str(h, sta_script);
    mts_hash128_add(h, nums, sizeof nums);
}

int synth_sta_write(const synth_ctx *c, const char *path, mts_err *err)
{
    char drive[256] = "", script[4096];
    const synth_lcell *b = driving_cell(&c->lib);
    if (b) snprintf(drive, sizeof drive, "set_driving_cell -lib_cell %s -pin %s [all_inputs]\n", b->name, b->out);
    int n = snprintf(script, sizeof script, sta_script, c->liberty, STA_PERIOD_NS, drive,
                     MTS_SYNTH_PO_LOAD_FF);
    if (n < 0 || (size_t)n >= sizeof script) return mts_fail(err, MTS_EINVAL, "%s: sta script too long", c->base);
    return mts_fs_write_text(path, script, err);
}

/* The worst slack and the critical path's ends from the log. 1 when the
 * slack line is there. */
static int read_sta_log(const char *log, double *slack, char *from, char *to, size_t cap)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    int got = 0;
    from[0] = to[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *v;
        if (!from[0] && !strncmp(line, "Startpoint: ", 12)) snprintf(from, cap, "%.*s", (int)strcspn(line + 12, " "), line + 12);
        else if (!to[0] && !strncmp(line, "Endpoint: ", 10)) snprintf(to, cap, "%.*s", (int)strcspn(line + 10, " "), line + 10);
        else if ((v = strstr(line, "mantis-sta-worst-slack "))) {
            char *end;
            *slack = strtod(v + 23, &end);
            got = end != v + 23;
        }
    }
    if (f) fclose(f);
    return got;
}

int synth_sta(const synth_ctx *c, const char *dir, mts_synth_result *r, mts_err *err)
{
    char tcl[PATH_MAX], log[PATH_MAX], line[400];
    int rc = synth_path(tcl, dir, "sta.tcl", err);
    if (!rc) rc = synth_path(log, dir, "sta.log", err);
    if (!rc) rc = synth_sta_write(c, tcl, err);
    if (rc) return rc;
    char *argv[] = {"sta", "-no_init", "-no_splash", "-exit", "sta.tcl", NULL};
    mts_proc_tail tail;
    mts_proc_io io = {.cwd = dir, .log = log, .echo = c->o->verbose ? "mantis synth" : NULL, .tail = &tail};
    int st = mts_proc_run(argv, &io);
    if (st || mts_proc_log_find(log, sta_markers, line, sizeof line))
        return synth_tool_error(c, "sta", log, &tail, sta_markers, err);
    double slack = 0;
    if (!read_sta_log(log, &slack, r->delay_from, r->delay_to, sizeof r->delay_from) || isnan(slack))
        return mts_fail(err, MTS_ETOOL, "%s: sta: no worst slack in its output (log: %s)", c->base, log);
    /* No timed path (outputs constant or undriven): OpenSTA's slack is
     * infinite (1e30 or more), and the delay 0. */
    r->delay_ps = slack >= STA_PERIOD_NS ? 0 : (STA_PERIOD_NS - slack) * 1000.0;
    if (r->delay_ps == 0) r->delay_from[0] = r->delay_to[0] = 0;
    return MTS_OK;
}
