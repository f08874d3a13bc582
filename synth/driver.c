/* driver.c - `mantis synth` as a library call (include/mantis/synth.h), as
 * a sequence of steps: resolve paths -> cache key -> cache lookup, else
 * (Yosys -> load netlist -> timing -> equivalence -> publish the entry) ->
 * cell report -> power -> result files. The steps live in cache.c, yosys.c,
 * netlist.c, sta.c, equiv.c and power.c. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/proc.h"
#include "mantis/rtl.h"
#include "mantis/synth.h"
#include "synth_int.h"

/* The first line of text holding one of markers, into line. 1 when found. */
static int text_find(const char *text, const char *const *markers, char *line, size_t cap)
{
    for (const char *l = text; *l;) {
        size_t len = strcspn(l, "\n");
        for (int i = 0; markers[i]; i++) {
            const char *m = strstr(l, markers[i]);
            if (m && m < l + len) {
                snprintf(line, cap, "%.*s", (int)len, l);
                return 1;
            }
        }
        l += len + (l[len] == '\n');
    }
    return 0;
}

int synth_tool_error(const synth_ctx *c, const char *tool, const char *log, const mts_proc_tail *tail,
                         const char *const *markers, mts_err *err)
{
    char line[400] = "", cut[160] = "";
    int cut_short = tail && tail->log_errno; /* a full disk ate the end of the log: what passed through */
    if (cut_short) snprintf(cut, sizeof cut, ", cut short: %s", strerror(tail->log_errno));
    /* a line that says the environment failed (a full disk, no memory) first: the tool's status cannot say it */
    int env = cut_short ? text_find(tail->text, mts_env_phrases, line, sizeof line)
                        : mts_proc_log_find(log, mts_env_phrases, line, sizeof line);
    int found = env || (cut_short ? text_find(tail->text, markers, line, sizeof line)
                                  : mts_proc_log_find(log, markers, line, sizeof line));
    if (!found) snprintf(line, sizeof line, "failed (no error line found)");
    /* The log lives in the work directory, which synth_keep_failed moves
     * to <entry>.failed (rewriting the path in this message). */
    return mts_fail(err, env ? mts_status_of_text(line) : MTS_ETOOL, "%s: %s: %s (full log: %s%s)", c->base, tool,
                    line, log, cut);
}

/* Free space below which a synthesis that failed is taken to have failed
 * for want of room: Verilator exits 0 after writing empty files, and the
 * logs the messages would be in lie on the same disk. */
#define SYNTH_DISK_LOW (1 << 20)

/* A failed synthesis (code rc) with less than SYNTH_DISK_LOW left on the
 * cache's disk failed for want of room: adds "; the cache's disk is full (N
 * KiB free): No space left on device" to err and returns MTS_ENOSPC. Else
 * rc as it was. */
static int note_full_disk(const synth_ctx *c, int rc, mts_err *err)
{
    if (rc == MTS_ENOSPC) return rc; /* said so already */
    long long left = mts_fs_free_bytes(c->root);
    if (left < 0 || left >= SYNTH_DISK_LOW) return rc;
    if (err) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "; the cache's disk is full (%lld KiB free): %s", left >> 10,
                 strerror(ENOSPC));
    }
    return MTS_ENOSPC;
}

/* A parameter enters the Yosys script (-chparam NAME VALUE) and the
 * equivalence wrapper (#(.NAME(VALUE))): NAME a Verilog identifier, VALUE a
 * number or sized literal (letters, digits, _ ' . + -). */
static int plain_param(const char *p)
{
    const char *eq = strchr(p, '=');
    if (!eq || eq == p || !eq[1]) return 0;
    if (!((*p | 32) >= 'a' && (*p | 32) <= 'z') && *p != '_') return 0;
    for (const char *s = p; s < eq; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '$')) return 0;
    for (const char *s = eq + 1; *s; s++)
        if (!(isalnum((unsigned char)*s) || strchr("_'.+-", *s))) return 0;
    return 1;
}

/* The design (realpath), its directory and base name. */
static int resolve_design(synth_ctx *c, mts_err *err)
{
    const char *rtl = c->o->rtl;
    if (!rtl) return mts_fail(err, MTS_EINVAL, "no design given (--rtl FILE.v)");
    if (!realpath(rtl, c->design)) return mts_fail(err, MTS_EIO, "%s: cannot open: %s", rtl, strerror(errno));
    snprintf(c->design_dir, sizeof c->design_dir, "%s", c->design);
    *strrchr(c->design_dir, '/') = 0;
    snprintf(c->base, sizeof c->base, "%s", strrchr(c->design, '/') + 1);
    char *dot = strrchr(c->base, '.');
    if (dot) *dot = 0;
    return MTS_OK;
}

/* The flow's own files (under MANTIS_SOURCE_DIR) and the liberty. */
static int resolve_flow_files(synth_ctx *c, mts_err *err)
{
    const char *src = getenv("MANTIS_SOURCE_DIR");
    if (!src) src = MANTIS_SOURCE_DIR;
    char dir[PATH_MAX];
    int rc = synth_path(dir, src, "synth", err);
    if (!rc && c->o->liberty && !realpath(c->o->liberty, c->liberty))
        rc = mts_fail(err, MTS_EIO, "%s: cannot open: %s", c->o->liberty, strerror(errno));
    if (!rc && !c->o->liberty) rc = synth_path(c->liberty, dir, "mantis45.lib", err);
    if (!rc) rc = synth_path(c->tpl, dir, "synth.ys", err);
    if (!rc) rc = synth_path(c->cells_v, dir, "cells.v", err);
    if (!rc) rc = synth_path(c->harness, dir, "eq_harness.cpp", err);
    if (!rc) rc = synth_path(c->adders, dir, "adders.v", err);
    if (!rc) rc = synth_path(c->equiv_vlt, dir, "equiv.vlt", err);
    return rc;
}

/* opts.cache_dir, else mts_fs_cache_dir("synth"); made absolute, because
 * the tools run inside the entry's work directory. */
static int resolve_cache_root(synth_ctx *c, mts_err *err)
{
    char root[PATH_MAX], cwd[PATH_MAX];
    const char *dir = c->o->cache_dir;
    if (!dir) {
        int rc = mts_fs_cache_dir("synth", root, sizeof root, err);
        if (rc) return rc;
        dir = root;
    }
    if (dir[0] != '/') {
        if (!getcwd(cwd, sizeof cwd)) return mts_fail(err, MTS_EIO, "current directory: %s", strerror(errno));
        return synth_path(c->root, cwd, dir, err);
    }
    if (mts_fs_pathf(c->root, sizeof c->root, "%s", dir))
        return mts_fail(err, MTS_EINVAL, "%s: path too long (over %d characters)", dir, PATH_MAX - 1);
    return MTS_OK;
}

static int check_options(const synth_ctx *c, mts_err *err)
{
    const mts_synth_opts *o = c->o;
    if (o->nparams < 0 || o->nparams > MTS_SYNTH_MAX_PARAMS)
        return mts_fail(err, MTS_EINVAL, "too many --param (max %d)", MTS_SYNTH_MAX_PARAMS);
    /* The design itself may have any name (it reaches the tools through links
     * in the work directory, see tool_paths); these are used as they are. */
    const char *paths[] = {c->liberty, c->root, c->cells_v, c->harness, c->tpl, c->adders, c->equiv_vlt};
    const char *what[] = {"the liberty", "the synth cache directory", "the cell models", "the equivalence harness",
                          "the flow script", "the adder map", "the Verilator control file"};
    for (int i = 0; i < 7; i++)
        if (!mts_rtl_path_plain(paths[i]))
            return mts_fail(err, MTS_EINVAL,
                            "%s: the path of %s may hold only letters, digits and ._/+,=@%%:~- (Yosys and Verilator "
                            "take it unquoted)",
                            paths[i], what[i]);
    for (int i = 0; i < o->nparams; i++)
        if (!plain_param(o->param[i]))
            return mts_fail(err, MTS_EINVAL,
                            "parameter '%s': expected NAME=VALUE, NAME a Verilog identifier and VALUE a number "
                            "(letters, digits, _ ' . + -)",
                            o->param[i]);
    return MTS_OK;
}

static int resolve_paths(synth_ctx *c, mts_err *err)
{
    int rc = resolve_design(c, err);
    if (!rc) rc = resolve_flow_files(c, err);
    if (!rc) rc = resolve_cache_root(c, err);
    if (!rc) rc = check_options(c, err);
    return rc;
}

/* The cache key names the entry; the result says what was synthesized. */
static int name_entry(synth_ctx *c, mts_synth_result *r, mts_err *err)
{
    int rc = synth_key(c, r->hash, err);
    if (!rc) rc = synth_path(c->entry, c->root, r->hash, err);
    if (!rc && mts_fs_pathf(r->dir, sizeof r->dir, "%s", c->entry))
        rc = mts_fail(err, MTS_EINVAL, "%s: cache path too long (over %zu characters)", c->entry, sizeof r->dir - 1);
    if (rc) return rc;
    snprintf(r->design, sizeof r->design, "%s", strrchr(c->design, '/') + 1);
    for (int i = 0; i < c->o->nparams; i++) {
        size_t l = strlen(r->params);
        snprintf(r->params + l, sizeof r->params - l, "%s%s", i ? "," : "", c->o->param[i]);
    }
    return mts_fs_mkdirs(c->root, err);
}

/* dir/netlist.blif; errors name the design. */
static int load_netlist(const synth_ctx *c, const char *dir, synth_gl *gl, mts_err *err)
{
    char blif[PATH_MAX];
    int rc = synth_path(blif, dir, "netlist.blif", err);
    if (!rc) rc = synth_gl_load(blif, &c->lib, gl, err);
    if (rc && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = mts_fail(err, rc, "%s: %s", c->base, msg);
    }
    return rc;
}

/* A cache hit (r already holds the entry's synth.txt): its netlist. */
static int use_entry(const synth_ctx *c, synth_gl *gl, mts_synth_result *r, mts_err *err)
{
    r->cache_hit = 1;
    return load_netlist(c, c->entry, gl, err);
}

static int check_tools(const synth_ctx *c, mts_err *err)
{
    if (!mts_proc_which("yosys")) return mts_fail(err, MTS_ENOTOOL, "%s: yosys not found on PATH", c->base);
    if (!mts_proc_which("sta"))
        return mts_fail(err, MTS_ENOTOOL,
                        "%s: sta not found on PATH (OpenSTA times the netlist for the delay: Debian package opensta, "
                        "flows/install-deps.sh)",
                        c->base);
    if (!c->o->no_equiv && !mts_proc_which("verilator"))
        return mts_fail(err, MTS_ENOTOOL, "%s: verilator not found on PATH (needed for the equivalence check)", c->base);
    return MTS_OK;
}

/* c->tool_design, c->tool_dir: the design as it is when its path is plain,
 * else links in the work directory: work/src -> its directory, and the file
 * as work/src/NAME or, when its own name is the problem, work/design.v. */
static int tool_paths(synth_ctx *c, mts_err *err)
{
    snprintf(c->tool_design, sizeof c->tool_design, "%s", c->design);
    snprintf(c->tool_dir, sizeof c->tool_dir, "%s", c->design_dir);
    if (mts_rtl_path_plain(c->design) && mts_rtl_path_plain(c->design_dir)) return MTS_OK;
    const char *bn = strrchr(c->design, '/') + 1;
    int rc = synth_path(c->tool_dir, c->work, "src", err);
    if (!rc && symlink(c->design_dir, c->tool_dir))
        rc = mts_fail(err, MTS_EIO, "%s: cannot create a link: %s", c->tool_dir, strerror(errno));
    if (!rc && mts_rtl_path_plain(bn)) return synth_path(c->tool_design, c->tool_dir, bn, err);
    if (!rc) rc = synth_path(c->tool_design, c->work, "design.v", err);
    if (!rc && symlink(c->design, c->tool_design))
        rc = mts_fail(err, MTS_EIO, "%s: cannot create a link: %s", c->tool_design, strerror(errno));
    return rc;
}

/* The links of tool_paths are not part of a cache entry. */
static void drop_tool_links(const synth_ctx *c)
{
    if (strcmp(c->tool_dir, c->design_dir)) unlink(c->tool_dir);
    char p[PATH_MAX];
    if (!synth_path(p, c->work, "design.v", NULL) && !strcmp(p, c->tool_design)) unlink(p);
}

/* <entry>.tmp.<pid>, empty: renamed into place only when everything passed. */
static int make_work(synth_ctx *c, mts_err *err)
{
    if (mts_fs_pathf(c->work, sizeof c->work, "%s.tmp.%ld", c->entry, (long)getpid())) {
        c->work[0] = 0;
        return mts_fail(err, MTS_EINVAL, "%s: cache path too long", c->entry);
    }
    mts_fs_rmtree(c->work);
    return mts_fs_mkdirs(c->work, err);
}

/* What the flow handles: combinational, with inputs and outputs, and the
 * netlist's own area agreeing with Yosys' report. */
static int check_netlist(const synth_ctx *c, const synth_gl *gl, const mts_synth_result *r, mts_err *err)
{
    if (gl->nseq)
        return mts_fail(err, MTS_EUNSUPPORTED,
                        "%s: %d flip-flops after synthesis; the synth flow handles combinational designs only", c->base,
                        gl->nseq);
    if (gl->nin_bits < 1 || gl->nout_bits < 1)
        return mts_fail(err, MTS_EUNSUPPORTED, "%s: design has no inputs or no outputs after synthesis", c->base);
    if (fabs(gl->area - r->area_um2) > 1e-3 * (1 + r->area_um2))
        return mts_fail(err, MTS_EFORMAT, "%s: netlist area %.3f um^2 disagrees with yosys stat %.3f um^2", c->base,
                        gl->area, r->area_um2);
    return MTS_OK;
}

/* A cache miss: synthesize and check in the work directory, then publish it
 * as the entry; a failed run keeps its logs in <entry>.failed. */
static int synthesize(synth_ctx *c, synth_gl *gl, mts_synth_result *r, mts_err *err)
{
    char top[128];
    int rc = check_tools(c, err);
    if (!rc) rc = make_work(c, err);
    if (!rc) rc = tool_paths(c, err);
    if (!rc) rc = synth_yosys(c, top, sizeof top, &r->area_um2, err);
    if (!rc) rc = load_netlist(c, c->work, gl, err);
    if (!rc) rc = check_netlist(c, gl, r, err);
    if (!rc) rc = synth_sta(c, c->work, r, err);
    if (!rc) snprintf(r->top, sizeof r->top, "%s", top);
    if (!rc && !c->o->no_equiv) rc = synth_equiv(c, top, gl, r, err);
    if (!rc) drop_tool_links(c);
    if (!rc) rc = synth_meta_save(c->work, r, err);
    if (!rc) rc = synth_publish(c, r, err);
    else synth_keep_failed(c, err);
    return rc ? note_full_disk(c, rc, err) : rc;
}

/* Cell counts by type, NAND2 equivalents, depth and widths. */
static void report_cells(const synth_ctx *c, const synth_gl *gl, mts_synth_result *r)
{
    r->ncells = 0;
    r->ntypes = 0;
    for (int k = 0; k < gl->nnodes; k++) {
        if (gl->nodes[k].cell < 0 || gl->nodes[k].oidx) continue; /* an instance once, not per output */
        const char *name = c->lib.cells[gl->nodes[k].cell].name;
        int t = 0;
        while (t < r->ntypes && strcmp(r->cells[t].name, name)) t++;
        if (t == r->ntypes && t < MTS_SYNTH_MAX_CELLTYPES) {
            snprintf(r->cells[t].name, sizeof r->cells[t].name, "%s", name);
            r->cells[t].count = 0;
            r->ntypes++;
        }
        if (t < r->ntypes) r->cells[t].count++;
        r->ncells++;
    }
    const synth_lcell *nand = NULL;
    for (int i = 0; i < c->lib.ncells && !nand; i++)
        if (strstr(c->lib.cells[i].name, "NAND2")) nand = &c->lib.cells[i];
    r->nand2_eq = nand && nand->area > 0 ? r->area_um2 / nand->area : 0;
    r->logic_depth = gl->depth_max;
    r->in_bits = gl->nin_bits;
    r->out_bits = gl->nout_bits;
}

/* result.json and result.csv in the entry (this call's power figures). */
static int write_results(const synth_ctx *c, const mts_synth_result *r, mts_err *err)
{
    char json[PATH_MAX], csv[PATH_MAX];
    int rc = synth_path(json, c->entry, "result.json", err);
    if (!rc) rc = synth_path(csv, c->entry, "result.csv", err);
    if (!rc) rc = mts_synth_write_json(r, json, err);
    if (!rc) rc = mts_synth_write_csv(r, csv, err);
    return rc;
}

int mts_synth_run(const mts_synth_opts *o, mts_synth_result *r, mts_err *err)
{
    memset(r, 0, sizeof *r);
    synth_ctx *c = calloc(1, sizeof *c);
    if (!c) return mts_fail(err, MTS_ENOMEM, "out of memory");
    c->o = o;
    synth_gl gl = {0};
    int rc = resolve_paths(c, err);
    if (!rc) rc = synth_lib_load(c->liberty, &c->lib, err);
    if (!rc) rc = name_entry(c, r, err);
    if (!rc) rc = synth_meta_load(c->entry, r) ? use_entry(c, &gl, r, err) : synthesize(c, &gl, r, err);
    if (!rc) report_cells(c, &gl, r);
    if (!rc) rc = synth_power(c, &gl, r, err);
    if (!rc) rc = write_results(c, r, err);
    synth_gl_free(&gl);
    free(c);
    return rc;
}
