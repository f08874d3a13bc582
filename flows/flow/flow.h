/* flow.h - internals of `mantis flow`: configuration, the step graph and its
 * executor, and the report. The flow orchestrates the other commands as
 * child processes (detect, verify, lutgen, metrics, synth, train); it never
 * re-implements them. Every step's output is keyed by a content hash of its
 * inputs and written atomically, so re-runs redo only what changed and a
 * killed flow leaves nothing half-written (docs/flow.md). */
#ifndef MANTIS_FLOW_H
#define MANTIS_FLOW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mantis/fs.h"
#include "mantis/status.h"

#define FLOW_MAX_LIST 8
#define FLOW_PATH 1024

typedef struct flow_cfg {
    char designs[FLOW_PATH];   /* directory of .v designs */
    char out[FLOW_PATH];       /* results directory */
    char data_dir[FLOW_PATH];  /* where `mantis data fetch` put the data sets */
    char models[FLOW_MAX_LIST][32];
    int nmodels;
    char datasets[FLOW_MAX_LIST][32];
    int ndatasets;
    int epochs, batch, subset;
    int seeds[FLOW_MAX_LIST];  /* every training runs once per seed; the report gives mean and std */
    int nseeds;
    char lr[16], opt[16];
    int trace_samples, trace_subset;
    int jobs;                  /* parallel steps; 0: cores */
    int quick;                 /* --quick profile applied */
    char baselines[FLOW_MAX_LIST][32];
    int nbaselines;
    char cmodels[16][64];      /* "design=model": verify the design against C model `model` too */
    int ncmodels;
    char mode[8];              /* "train": every design trains; "infer": the FP32 baseline's checkpoint
                                  is evaluated with every design (mantis test); "both" */
    char cross[FLOW_MAX_LIST][32]; /* multipliers every trained checkpoint is also evaluated with */
    int ncross;
} flow_cfg;

/* The C model configured for design `name`, or NULL. */
const char *flow_cmodel(const flow_cfg *c, const char *name);

/* Defaults, then the file (NULL: none), then the quick profile if quick. A
 * config line is `key = value` (# comments); unknown keys, bad or partly
 * numeric values, lines over 1023 characters and a path that is not a
 * regular file are an error naming the file (and line). A relative data_dir
 * in the file is resolved against the file's directory. */
int flow_cfg_load(flow_cfg *c, const char *path, int quick, mts_err *err);

typedef enum { ST_PENDING, ST_RUNNING, ST_DONE, ST_FAILED, ST_SKIPPED } step_state;

#define STEP_MAX_ARGS 48
#define STEP_MAX_DEPS 4

typedef struct flow_step {
    char design[64];           /* design (or baseline) this step belongs to */
    char name[80];             /* "verify", "train-lenet300-mnist", ... */
    int argc;
    char *argv[STEP_MAX_ARGS]; /* child command; "{OUT}" and "{DEPk}" are substituted */
    int ndeps, dep[STEP_MAX_DEPS];
    int need_pass;             /* dependency dep[need_pass-1] must have exited 0 */
    int ok_exit[3], nok;       /* exit statuses that count as a result */
    char key[65];              /* content hash of the inputs */
    char out[FLOW_PATH];       /* final output file */
    step_state state;
    int exit_code;
    double seconds;
    char reason[256];          /* why it failed or was skipped */
    int cached;
    int pid;
} flow_step;

typedef struct flow_graph {
    flow_step *s;
    int n, cap;
    char root[FLOW_PATH];      /* results dir */
    char exe[FLOW_PATH];       /* this mantis binary */
    int retry_failed;          /* 1: re-run steps whose failure is on record */
    double t_start;            /* mts_clock_now() of the flow's start (0: each flow_run's own) */
} flow_graph;

/* Adds a step: argv is NULL-terminated; the key is derived from argv, the
 * dependencies' keys and `content` (hashes of input files). Returns its index
 * or -1 (message in err). */
int flow_add(flow_graph *g, const char *design, const char *name, const char *ext, const char *const *argv,
             const int *deps, int ndeps, const char *content, mts_err *err);

/* Runs every pending step, at most `jobs` at once, each in its own process
 * group. Writes one progress line per start, finish and skip to `progress`
 * (NULL: none; the library never prints on its own). Returns 0, or 130/143
 * when interrupted (children killed, nothing half-written). */
int flow_run(flow_graph *g, int jobs, FILE *progress);
void flow_free(flow_graph *g);

/* Writes results.csv, results.json, charts/ and report.html into g->root,
 * then the summary table and the report's path to `out` (NULL: none);
 * *not_ok (NULL: not wanted) gets the number of rows whose status is not
 * "ok". MTS_EIO/MTS_EINVAL naming the file that could not be written,
 * MTS_ENOMEM. */
int flow_report(const flow_cfg *c, const flow_graph *g, const char *cmdline, FILE *out, int *not_ok, mts_err *err);

#endif
