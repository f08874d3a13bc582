/* synth.h - synthesis of a Verilog design to Mantis' 45 nm cell library
 * (synth/mantis45.lib) with Yosys + ABC: area, cell counts, NAND2
 * equivalents; critical-path delay with OpenSTA; a gate-level equivalence check of the
 * mapped netlist against the RTL with Verilator; and dynamic power from the
 * switching activity of an operand stream (uniform random or a trace file,
 * trace.h). Figures are relative estimates for ranking designs, not sign-off
 * numbers (docs/synth.md). Synthesis and equivalence results are cached by a
 * content hash of the design directory's sources, parameters, liberty, flow
 * script and cell models; power is recomputed per call (milliseconds). */
#ifndef MANTIS_SYNTH_H
#define MANTIS_SYNTH_H

#include <stdint.h>
#include <stdio.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MTS_SYNTH_MAX_PARAMS 16
#define MTS_SYNTH_MAX_CELLTYPES 32

typedef struct mts_synth_opts {
    const char *rtl;            /* the design's Verilog file; submodules found in its directory */
    int nparams;
    const char *param[MTS_SYNTH_MAX_PARAMS]; /* each "NAME=VALUE" */
    const char *liberty;        /* NULL: <source>/synth/mantis45.lib */
    const char *cache_dir;      /* NULL: mts_fs_cache_dir("synth") ($MANTIS_CACHE/synth,
                                   $XDG_CACHE_HOME/mantis/synth or ~/.cache/mantis/synth) */
    const char *power_trace;    /* NULL: uniform random operands */
    uint64_t seed;              /* uniform stream seed (used as given; the CLI defaults to 1) */
    uint64_t power_ops;         /* uniform stream length; 0: 65536 */
    double clock_ghz;           /* 0: 1.0 */
    uint64_t eq_samples;        /* random equivalence vectors above 22 input bits; 0: 2^20 */
    int no_equiv;               /* 1: skip the Verilator check (the result says so) */
    int verbose;                /* 1: print tool commands to stderr */
} mts_synth_opts;

typedef struct mts_synth_result {
    char design[256];           /* file name of the design */
    char top[128];              /* its top module */
    char params[256];           /* "K=V,K=V" as given */
    char hash[33];              /* cache key */
    char dir[1024];             /* cache entry: netlist.v/.blif, yosys.log, verilator.log, result.json/.csv */
    int cache_hit;              /* 1: synthesis and equivalence came from the cache */
    /* area and timing */
    double area_um2;            /* Yosys `stat -liberty` chip area */
    double nand2_eq;            /* area / area of the library's NAND2 */
    int ncells;
    int ntypes;
    struct { char name[48]; int count; } cells[MTS_SYNTH_MAX_CELLTYPES];
    double delay_ps;            /* critical path, OpenSTA with the liberty's NLDM tables: every cell timed */
    char delay_from[64], delay_to[64]; /* its start and end ports ("" without a timed path) */
    int logic_depth;            /* cells on the longest input-to-output path */
    int in_bits, out_bits;
    /* equivalence (gate-level vs RTL, Verilator) */
    int eq_checked;             /* 0 when opts.no_equiv */
    int eq_exhaustive;          /* 1: all 2^in_bits input vectors, else seeded random samples */
    uint64_t eq_vectors;        /* vectors compared (all matched: a mismatch is an error) */
    /* power */
    char stream[32];            /* "uniform" or "trace" */
    uint64_t seed;
    uint64_t power_ops;         /* operand vectors simulated */
    double toggles_per_op;      /* net transitions per operation */
    double energy_pj;           /* dynamic energy per operation */
    double clock_ghz;
    double dyn_uw;              /* energy_pj x clock */
    double leak_uw;             /* sum of cell leakage */
    double total_uw;
} mts_synth_result;

/* Synthesizes (or finds in the cache), checks equivalence and measures power;
 * also writes result.json and result.csv into the cache entry (res->dir).
 * MTS_ETOOL: yosys/verilator/sta missing or failing: one line naming the design
 * and the tool's first error line, with the path of the full log.
 * MTS_EMISMATCH: the mapped netlist differs from the RTL (first mismatching
 * vector in the message), or the C gate-level simulator disagrees with
 * Verilator. MTS_EUNSUPPORTED: the design is sequential, has more than 64
 * input or output bits, or a combinational loop. MTS_EINVAL: bad options,
 * a parameter that is not IDENT=number, a liberty/cache path that is not
 * mts_rtl_path_plain (the design may have any name: the tools get links to
 * it), or a trace that does not fit the design's two
 * input ports. MTS_EIO: the design or liberty cannot be read. */
int mts_synth_run(const mts_synth_opts *opts, mts_synth_result *res, mts_err *err);

/* The result as JSON (docs/synth.md; a number that is not finite is null)
 * into f, or into path atomically. */
void mts_synth_print_json(FILE *f, const mts_synth_result *res);
int mts_synth_write_json(const mts_synth_result *res, const char *path, mts_err *err);

/* The result as CSV (RFC 4180, base/csv.c: the header line and res's row;
 * a number that is not finite is an empty field) into f, or into path
 * atomically. */
void mts_synth_print_csv(FILE *f, const mts_synth_result *res);
int mts_synth_write_csv(const mts_synth_result *res, const char *path, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
