/* synth_int.h - internals shared by the synth/ files (not a public header):
 * the liberty reader, the gate-level netlist simulator, and the steps of
 * mts_synth_run (driver.c) that live in cache.c, yosys.c, equiv.c and
 * power.c. */
#ifndef MANTIS_SYNTH_INT_H
#define MANTIS_SYNTH_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "mantis/hash.h"
#include "mantis/proc.h"
#include "mantis/status.h"
#include "mantis/synth.h"

#define SYNTH_LIB_MAX_CELLS 64
#define SYNTH_LIB_MAX_PINS 6
#define SYNTH_LIB_MAX_WL 16
#define SYNTH_LIB_MAX_OUTS 2          /* half and full adders: sum and carry */

/* One cell of the liberty file, as the flow needs it. */
typedef struct synth_lcell {
    char name[48];
    double area;                /* um^2 */
    double leak_nw;             /* cell_leakage_power, nW */
    double e_int_fj;            /* internal energy per transition of output 0 (mean of rise/fall), fJ,
                                   plus that of input pins (a flip-flop's clock) */
    int seq;                    /* 1: a flip-flop (ff group) */
    int nin;
    char in[SYNTH_LIB_MAX_PINS][16];
    double cap[SYNTH_LIB_MAX_PINS]; /* input pin capacitance, fF */
    char out[16];               /* output pin 0 */
    uint64_t tt;                /* truth table of out over in[] (bit m: in[j] = bit j of m) */
    int nout;                   /* output pins (1, or 2 for HA/FA) */
    char outs[SYNTH_LIB_MAX_OUTS][16]; /* outs[0] == out */
    uint64_t tts[SYNTH_LIB_MAX_OUTS];  /* tts[0] == tt */
    double e_outs_fj[SYNTH_LIB_MAX_OUTS]; /* internal energy per transition of each output; [0] == e_int_fj */
} synth_lcell;

typedef struct synth_lib {
    int ncells;
    synth_lcell cells[SYNTH_LIB_MAX_CELLS];
    double voltage;             /* nom_voltage, V */
    double wl_cap;              /* wire_load capacitance per unit length, fF */
    double wl_slope;            /* length per fanout beyond the table */
    int wl_n;
    int wl_fanout[SYNTH_LIB_MAX_WL];
    double wl_len[SYNTH_LIB_MAX_WL];
} synth_lib;

/* Reads the subset of liberty that Mantis uses (see mantis45.lib). */
int synth_lib_load(const char *path, synth_lib *lib, mts_err *err);
const synth_lcell *synth_lib_find(const synth_lib *lib, const char *name);
/* Estimated wire capacitance (fF) of a net with this many fanout pins. */
double synth_lib_wire_cap(const synth_lib *lib, int fanout);
/* Truth table of a liberty function over pins (exposed for tests). */
int synth_lib_function_tt(const char *expr, int npins, const char pins[][16], uint64_t *tt, mts_err *err);

/* A port of the netlist: bits [first, first+width) of the packed vector. */
typedef struct synth_gport {
    char name[64];
    int width, first;
} synth_gport;

#define SYNTH_GL_MAX_PORTS 16

/* A mapped, combinational gate-level netlist (Yosys write_blif) ready for
 * bit-parallel simulation: 64 operand vectors per machine word. */
typedef struct synth_gl {
    char model[128];
    int nnets;
    int nin_bits, nout_bits;    /* <= 64 each */
    int *in_net, *out_net;      /* packed bit i -> net */
    int nin_ports, nout_ports;
    synth_gport in_ports[SYNTH_GL_MAX_PORTS], out_ports[SYNTH_GL_MAX_PORTS];
    int nnodes;
    struct synth_gnode {
        int cell;               /* index into lib cells, -1: a .names cover */
        int oidx;               /* which output of the cell (a multi-output instance is one node per
                                   output; area, leakage, input load and the cell count go with oidx 0) */
        int nin;
        int in[SYNTH_LIB_MAX_PINS];
        int out;
        uint64_t tt;
    } *nodes;                   /* in topological order */
    int nseq;                   /* flip-flops found (the flow refuses them) */
    double *cap_ff;             /* per net: load capacitance, fF */
    double *e_tog_fj;           /* per net: energy per toggle, fJ */
    int *depth;                 /* per net: cells on the longest input path */
    int depth_max;
    double leak_nw, area;
} synth_gl;

int synth_gl_load(const char *blif_path, const synth_lib *lib, synth_gl *gl, mts_err *err);
void synth_gl_free(synth_gl *gl);

/* Evaluates n packed input vectors (bit i of vec = packed input bit i) in
 * order. outs (may be NULL) receives the packed outputs. When toggles is
 * non-NULL, per-net transitions between consecutive vectors are added to
 * toggles[net] (the first vector only sets the state). */
int synth_gl_sim(const synth_gl *gl, const uint64_t *vecs, uint64_t n, uint64_t *outs, uint64_t *toggles,
               mts_err *err);

/* Load of a primary output, fF: one X1 inverter input (the next stage), in
 * the power model (netlist.c) and the timing (sta.c) alike. */
#define MTS_SYNTH_PO_LOAD_FF 1.70

/* ---- the synth flow (driver.c and its steps) ---- */

/* Bumped when the flow changes what it produces: part of every cache key. */
#define SYNTH_FLOW_VERSION "mantis-synth-3"

/* One mts_synth_run: its options, the absolute paths it works with and the
 * loaded liberty. */
typedef struct synth_ctx {
    const mts_synth_opts *o;
    char design[PATH_MAX];      /* the design file (realpath) */
    char design_dir[PATH_MAX];  /* its directory: submodules are found there */
    char base[256];             /* its file name without extension: names the design in messages */
    char liberty[PATH_MAX], tpl[PATH_MAX], cells_v[PATH_MAX], harness[PATH_MAX], adders[PATH_MAX];
    char equiv_vlt[PATH_MAX];   /* the Verilator control file of the equivalence model */
    char root[PATH_MAX];        /* the cache directory */
    char entry[PATH_MAX];       /* root/<key>: the finished cache entry */
    char work[PATH_MAX];        /* entry.tmp.<pid>: where a run builds it ("" before) */
    char tool_design[PATH_MAX]; /* design and design_dir as Yosys and Verilator are given them: */
    char tool_dir[PATH_MAX];    /* the same, or links in work when not mts_rtl_path_plain */
    synth_lib lib;
} synth_ctx;

/* path = dir/name; MTS_EINVAL when it does not fit in PATH_MAX (a path is
 * never cut short). */
int synth_path(char path[PATH_MAX], const char *dir, const char *name, mts_err *err);

/* MTS_ETOOL "<design>: <tool>: <first error line of log> (full log: <log>)";
 * when a line of the log says the environment failed (mts_status_of_text:
 * a full disk, no memory, an I/O error), that line and its code
 * (MTS_ENOSPC, MTS_ENOMEM, MTS_EIO). tail (may be NULL): the tool's output
 * as mts_proc_run kept it; when the log could not take it all (a full
 * disk), the line comes from there. */
int synth_tool_error(const synth_ctx *c, const char *tool, const char *log, const mts_proc_tail *tail,
                         const char *const *markers, mts_err *err);

/* cache.c: the content key of the run (FLOW_VERSION, design name, design
 * file, every .v/.sv beside it, parameters, liberty, flow files, the timing
 * script, the versions of yosys and sta, options that change the result)
 * as 32 hex digits. */
int synth_key(const synth_ctx *c, char hex[33], mts_err *err);
/* Writes synth.txt (top, area, delay, equivalence figures) into dir. */
int synth_meta_save(const char *dir, const mts_synth_result *r, mts_err *err);
/* Reads dir/synth.txt into r; 1 when it is there and complete, else 0. */
int synth_meta_load(const char *dir, mts_synth_result *r);
/* Renames the finished work directory to the cache entry; when another
 * process got there first, its entry is used (r reloaded from it). */
int synth_publish(synth_ctx *c, mts_synth_result *r, mts_err *err);
/* After a failed run: keeps the work directory as <entry>.failed with its
 * logs and rewrites the work path in err to point there. */
void synth_keep_failed(synth_ctx *c, mts_err *err);

/* yosys.c: fills synth/synth.ys for the design, runs Yosys in c->work
 * (netlist.v, netlist.blif, stat.txt, yosys.log there) and reads the top
 * module and chip area. */
int synth_yosys(const synth_ctx *c, char *top, size_t topcap, double *area_um2, mts_err *err);

/* sta.c: adds what the timing depends on besides the liberty and the
 * netlist (the TCL script OpenSTA runs, its clock period, the output load)
 * to a cache key. */
void synth_sta_hash(mts_hash128 *h);
/* Writes that script, filled in for this run's liberty, to path. */
int synth_sta_write(const synth_ctx *c, const char *path, mts_err *err);
/* Times dir/netlist.v with `sta` (argv, never a shell; its script in
 * dir/sta.tcl, its report in dir/sta.log): r->delay_ps = the critical path
 * through every cell, r->delay_from/to its ends ("" and 0 when no path is
 * timed: a constant design). MTS_ETOOL when sta fails or reports an error. */
int synth_sta(const synth_ctx *c, const char *dir, mts_synth_result *r, mts_err *err);

/* equiv.c: Verilates the RTL and the netlist side by side in c->work/eq,
 * compares them (exhaustively up to 22 input bits, else on seeded random
 * vectors) and checks the C simulator against both. MTS_EMISMATCH on any
 * difference; fills r->eq_*. */
int synth_equiv(const synth_ctx *c, const char *top, const synth_gl *gl, mts_synth_result *r, mts_err *err);

/* power.c: switching power of the operand stream (uniform or trace) through
 * gl; fills r's power fields. */
int synth_power(const synth_ctx *c, const synth_gl *gl, mts_synth_result *r, mts_err *err);

#endif
