/* synth_int.h - internals shared by the synth/ files (not a public header):
 * the liberty reader, the gate-level netlist simulator and small process and
 * file helpers. */
#ifndef MANTIS_SYNTH_INT_H
#define MANTIS_SYNTH_INT_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/hash.h"
#include "mantis/proc.h"
#include "mantis/fs.h"
#include "mantis/status.h"

/* snprintf for places where truncation is acceptable (names cut short;
 * over-long paths are refused before they get here). Returns snprintf's value. */
int mts_bprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define MTS_SNPRINTF mts_bprintf

#define MTS_LIB_MAX_CELLS 64
#define MTS_LIB_MAX_PINS 6
#define MTS_LIB_MAX_WL 16

/* One cell of the liberty file, as the flow needs it. */
typedef struct mts_lcell {
    char name[48];
    double area;                /* um^2 */
    double leak_nw;             /* cell_leakage_power, nW */
    double e_int_fj;            /* internal energy per output transition (mean of rise/fall), fJ */
    int seq;                    /* 1: a flip-flop (ff group) */
    int nin;
    char in[MTS_LIB_MAX_PINS][16];
    double cap[MTS_LIB_MAX_PINS]; /* input pin capacitance, fF */
    char out[16];               /* the single output pin */
    uint64_t tt;                /* truth table of out over in[] (bit m: in[j] = bit j of m) */
} mts_lcell;

typedef struct mts_lib {
    int ncells;
    mts_lcell cells[MTS_LIB_MAX_CELLS];
    double voltage;             /* nom_voltage, V */
    double wl_cap;              /* wire_load capacitance per unit length, fF */
    double wl_slope;            /* length per fanout beyond the table */
    int wl_n;
    int wl_fanout[MTS_LIB_MAX_WL];
    double wl_len[MTS_LIB_MAX_WL];
} mts_lib;

/* Reads the subset of liberty that Mantis uses (see mantis45.lib). */
int mts_lib_load(const char *path, mts_lib *lib, mts_err *err);
const mts_lcell *mts_lib_find(const mts_lib *lib, const char *name);
/* Estimated wire capacitance (fF) of a net with this many fanout pins. */
double mts_lib_wire_cap(const mts_lib *lib, int fanout);
/* Truth table of a liberty function over pins (exposed for tests). */
int mts_lib_function_tt(const char *expr, int npins, const char pins[][16], uint64_t *tt, mts_err *err);

/* A port of the netlist: bits [first, first+width) of the packed vector. */
typedef struct mts_gport {
    char name[64];
    int width, first;
} mts_gport;

#define MTS_GL_MAX_PORTS 16

/* A mapped, combinational gate-level netlist (Yosys write_blif) ready for
 * bit-parallel simulation: 64 operand vectors per machine word. */
typedef struct mts_gl {
    char model[128];
    int nnets;
    int nin_bits, nout_bits;    /* <= 64 each */
    int *in_net, *out_net;      /* packed bit i -> net */
    int nin_ports, nout_ports;
    mts_gport in_ports[MTS_GL_MAX_PORTS], out_ports[MTS_GL_MAX_PORTS];
    int nnodes;
    struct mts_gnode {
        int cell;               /* index into lib cells, -1: a .names cover */
        int nin;
        int in[MTS_LIB_MAX_PINS];
        int out;
        uint64_t tt;
    } *nodes;                   /* in topological order */
    int nseq;                   /* flip-flops found (the flow refuses them) */
    double *cap_ff;             /* per net: load capacitance, fF */
    double *e_tog_fj;           /* per net: energy per toggle, fJ */
    int *depth;                 /* per net: cells on the longest input path */
    int depth_max;
    double leak_nw, area;
} mts_gl;

int mts_gl_load(const char *blif_path, const mts_lib *lib, mts_gl *gl, mts_err *err);
void mts_gl_free(mts_gl *gl);

/* Evaluates n packed input vectors (bit i of vec = packed input bit i) in
 * order. outs (may be NULL) receives the packed outputs. When toggles is
 * non-NULL, per-net transitions between consecutive vectors are added to
 * toggles[net] (the first vector only sets the state). */
int mts_gl_sim(const mts_gl *gl, const uint64_t *vecs, uint64_t n, uint64_t *outs, uint64_t *toggles,
               mts_err *err);

/* Helpers (synth_util.c). */
/* Runs `sh -c cmd` with stdout+stderr to log_path; returns the exit status
 * (127 when the shell could not run the tool). */
int mts_run_logged(const char *cmd, const char *log_path);
/* Appends a single-quoted shell word for s to buf (size cap). */
void mts_shq(char *buf, size_t cap, const char *s);

#endif
