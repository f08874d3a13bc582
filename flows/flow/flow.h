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
#define FLOW_ARG (2 * FLOW_PATH) /* one step argument after {DEPk} substitution */

/* Parameter sweeps (docs/flow.md "Sweeps"): `sweep = DESIGN: PARAM = VALUES[; PARAM = VALUES]`
 * makes every value (every combination, over several parameters) a design
 * point of its own, named "DESIGN[PARAM=VALUE,...]". */
#define FLOW_MAX_SWEEPS 16    /* swept designs */
#define FLOW_SWEEP_PARAMS 4   /* parameters of one swept design */
#define FLOW_SWEEP_VALUES 64  /* values of one parameter */
#define FLOW_MAX_POINTS 128   /* design points of all sweeps together */
#define FLOW_NAME 64          /* a design's or a point's name, NUL included */

typedef struct flow_sweep {
    char design[FLOW_NAME];   /* the design's name: its file's stem */
    int nparams;
    char param[FLOW_SWEEP_PARAMS][64]; /* in the order given; the first one varies within a family */
    int nvalues[FLOW_SWEEP_PARAMS];
    long value[FLOW_SWEEP_PARAMS][FLOW_SWEEP_VALUES];
    char where[FLOW_PATH + 16]; /* "FILE:LINE: sweep" or "--sweep": the prefix of later messages about it */
} flow_sweep;

typedef struct flow_cfg {
    char designs[FLOW_PATH];   /* directory of .v designs */
    char out[FLOW_PATH];       /* results directory */
    char data_dir[FLOW_PATH];  /* where `mantis data fetch` put the data sets */
    char models[FLOW_MAX_LIST][32];
    int nmodels;
    char datasets[FLOW_MAX_LIST][32];
    int ndatasets;
    int epochs, batch, subset;
    int test_subset;           /* trainings and tests evaluate the first N test images; 0: all */
    int seeds[FLOW_MAX_LIST];  /* every training runs once per seed; the report gives mean and std */
    int nseeds;
    char lr[16], opt[16];
    int trace_samples, trace_subset;
    int jobs;                  /* parallel steps; 0: cores */
    int quick;                 /* --quick profile applied */
    /* devices and profiles (docs/flow.md "Devices and the GPU profile") */
    char device[8];            /* device = cpu | cuda | auto (the key, or --device) */
    int cuda;                  /* resolved (flow_cmd.c): 1 when trainings and tests get --device cuda */
    char device_name[128];     /* the device the coordinator found ("" for the CPU) */
    char profile[8];           /* profile = auto | none | quick | gpu (the key, or --profile / --quick) */
    char profile_used[8];      /* the profile applied: "" (none), "quick" or "gpu" */
    int profile_auto;          /* 1: profile_used was picked by auto (device cuda, sizes not pinned) */
    unsigned pinned;           /* the size keys a configuration file set (FLOW_PIN_*); auto picks no profile
                                  when a user's file pinned one */
    char cifar_dir[FLOW_PATH]; /* CIFAR-10's binary files ("": DATA_DIR/cifar10) */
    char baselines[FLOW_MAX_LIST][32];
    int nbaselines;
    char cmodels[16][64];      /* "design=model": verify the design against C model `model` too */
    int ncmodels;
    char mode[8];              /* "train": every design trains; "infer": the FP32 baseline's checkpoint
                                  is evaluated with every design (mantis test); "both" */
    char cross[FLOW_MAX_LIST][32]; /* multipliers every trained checkpoint is also evaluated with */
    int ncross;
    char layers[16][256];      /* per-layer rules "PATTERN=SPEC" (SPEC "design": the row's own multiplier),
                                  passed as --mul-layer to the models they match (docs/flow.md) */
    int nlayers;
    unsigned layer_mask[FLOW_MAX_LIST][FLOW_MAX_LIST]; /* [model][dataset]: bit r when layers[r] matches
                                                          a multiplying layer of that net (flow_cmd.c) */
    flow_sweep sweep[FLOW_MAX_SWEEPS]; /* sweep = ... (and --sweep, flow_cmd.c) */
    int nsweep;
    char sign[16][72];         /* "+NAME" / "-NAME": integer design NAME is signed / unsigned (overrides the
                                  inference from its sweep) */
    int nsign;
    char int_bwd[8];           /* integer designs' backward: "ste", "table" or "approx" (--int-backward) */
    int int_row;               /* planning only: the trainings being added are an integer design's */
    /* executors (docs/flow.md "Executors"); set in slurm.c's flow_cfg_exec_set */
    char executor[16];         /* "local" or "slurm" */
    char slurm_partition[64], slurm_account[64];
    char slurm_options[512];   /* extra sbatch options, split at blanks */
    char slurm_res[8][256];    /* per step kind (flow_step_kind): sbatch resource options */
    int slurm_poll;            /* seconds between squeue polls */
} flow_cfg;

/* The step kinds whose Slurm resources the configuration can set
 * (`slurm_KIND = OPTIONS`), in flow_cfg.slurm_res order. */
#define FLOW_KINDS 8
extern const char *const flow_kinds[FLOW_KINDS];
/* The kind of a step name ("train-lenet300-mnist" -> train's index), -1 if none. */
int flow_step_kind(const char *name);

/* Executor defaults into c (called by flow_cfg_load before the file). */
void flow_cfg_exec_defaults(flow_cfg *c);
/* One executor key of the configuration: 0 set, -1 bad value, -2 not an
 * executor key. */
int flow_cfg_exec_set(flow_cfg *c, const char *k, const char *v);

/* The C model configured for design `name`, or NULL. */
const char *flow_cmodel(const flow_cfg *c, const char *name);
/* For a layers rule "PATTERN=design[,key=value...]": what follows "design"
 * ("" or ",key=value..."); NULL when the rule's SPEC is not "design". */
const char *flow_rule_design_rest(const char *rule);

/* The signedness configured for design `name`: "--signed", "--unsigned" or
 * NULL (inferred). */
const char *flow_sign_opt(const flow_cfg *c, const char *name);

/* One sweep entry, "DESIGN: PARAM = VALUES[; PARAM = VALUES...]", VALUES a
 * comma-separated list of integers, ranges LO..HI and LO..HI:STEP. A design
 * already swept gets the parameters added (their product). `where` ("FILE:LINE:
 * sweep", "--sweep") is kept as the prefix of later messages. MTS_OK, or MTS_EINVAL with
 * one line naming the design and parameter (bad syntax, a bad or repeated
 * value, an empty range, a repeated parameter, too many values, parameters,
 * designs or points, a point name over FLOW_NAME - 1 characters). Whether
 * the design and its parameters exist is the planner's check (flow_cmd.c). */
int flow_sweep_add(flow_cfg *c, const char *spec, const char *where, mts_err *err);
/* The number of design points of s: the product of its value counts. */
int flow_sweep_points(const flow_sweep *s);
/* Point k (0 <= k < flow_sweep_points) of s, the first parameter varying
 * fastest (so a family's points are consecutive): its name
 * "DESIGN[P=V,Q=W]" into name (FLOW_NAME) and its overrides "P=V" into
 * params[0..s->nparams-1]; values[i] gets parameter i's value when non-NULL. */
void flow_sweep_point(const flow_sweep *s, int k, char name[FLOW_NAME], char params[][80], long *values);
/* The quick profile's sweeps: every swept parameter keeps at most `keep`
 * (>= 2) of its values, spread evenly over the list as given, its first and
 * its last among them (M = 1..7 keeps 1, 4, 7 with keep 3). */
void flow_sweep_thin(flow_cfg *c, int keep);
/* The sweep of the design named `design` (file stem), or NULL. */
const flow_sweep *flow_sweep_of(const flow_cfg *c, const char *design);

/* The size keys a profile sets (flow_cfg.pinned: the ones a file set). */
enum { FLOW_PIN_MODELS = 1, FLOW_PIN_DATASETS = 2, FLOW_PIN_EPOCHS = 4, FLOW_PIN_BATCH = 8, FLOW_PIN_SUBSET = 16,
       FLOW_PIN_SEEDS = 32, FLOW_PIN_LR = 64, FLOW_PIN_OPT = 128 };

/* The directory of data set `name` ("mnist", "cifar10", ...): DATA_DIR/name,
 * or cifar_dir for cifar10 when set, into buf. 0, or -1 when too long. */
int flow_data_path(const flow_cfg *c, const char *name, char *buf, size_t n);

/* The profile "auto" stands for: "gpu" when the trainings run on the GPU
 * (cuda) and no size key was pinned by a configuration of the user's
 * (c->pinned == 0), else "none". Any other name is returned as it is. */
const char *flow_profile_pick(const flow_cfg *c, const char *name, int cuda);

/* Applies profile `name` to c: "none" (nothing), "quick" (a first look in
 * minutes) or "gpu" (more data, epochs and seeds: LeNet-300-100 and LeNet-5
 * on the whole of Fashion-MNIST, or ResNet-20 on CIFAR-10 when cifar10 is
 * 1, i.e. its files were found). Each sets the size keys whatever the
 * configuration says; c->profile_used names it. MTS_OK, or MTS_EINVAL for
 * another name ("auto" included: pick first). docs/flow.md. */
int flow_cfg_profile(flow_cfg *c, const char *name, int cifar10, mts_err *err);

/* Defaults, then the file (NULL: none), then the quick profile if quick. A
 * config line is `key = value` (# comments); unknown keys, bad or partly
 * numeric values, lines over 1023 characters and a path that is not a
 * regular file are an error naming the file (and line). A relative data_dir
 * in the file is resolved against the file's directory. */
int flow_cfg_load(flow_cfg *c, const char *path, int quick, mts_err *err);

typedef enum { ST_PENDING, ST_RUNNING, ST_DONE, ST_FAILED, ST_SKIPPED } step_state;

#define STEP_MAX_ARGS 96
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
    long job;                  /* Slurm job id (slurm executor) */
    int env_fail;              /* failed because of the environment: not cached */
    double gone_since;         /* slurm: when its ended job was first seen without an exit record */
} flow_step;

enum { FLOW_EXEC_LOCAL = 0, FLOW_EXEC_SLURM = 1 };

typedef struct flow_graph {
    flow_step *s;
    int n, cap;
    char root[FLOW_PATH];      /* results dir */
    char exe[FLOW_PATH];       /* this mantis binary */
    int retry_failed;          /* 1: re-run steps whose failure is on record */
    double t_start;            /* mts_clock_now() of the flow's start (0: each flow_run's own) */
    int executor;              /* FLOW_EXEC_LOCAL or FLOW_EXEC_SLURM */
    int dry_run;               /* print the commands (sbatch lines) instead of running them */
    const flow_cfg *cfg;       /* Slurm options (slurm executor) */
    char error[512];           /* why flow_run returned 2 */
} flow_graph;

/* Takes the lock of results directory root (created if missing) for this
 * process: returns the lock's fd (kept open, close-on-exec, released when the
 * process ends), or -1 with "ROOT is in use by pid N ..." in err. */
int flow_lock(const char *root, mts_err *err);

/* Adds a step: argv is NULL-terminated; the key is derived from argv, the
 * dependencies' keys and `content` (hashes of input files). Returns its index
 * or -1 (message in err). */
int flow_add(flow_graph *g, const char *design, const char *name, const char *ext, const char *const *argv,
             const int *deps, int ndeps, const char *content, mts_err *err);

/* Runs every pending step, at most `jobs` at once: locally each in its own
 * process group (killed with the coordinator, even by SIGKILL), or as Slurm
 * jobs (g->executor). Outputs on record are checked before they are trusted;
 * scratch a killed run left in the results and the cache is removed first.
 * Writes one progress line per start, finish and skip to `progress` (NULL:
 * none; the library never prints on its own). Returns 0, 2 when it could not
 * run (g->error says why: sbatch missing or refusing, squeue failing), or
 * 130/143 when interrupted (local children killed, Slurm jobs left to run,
 * nothing half-written). */
int flow_run(flow_graph *g, int jobs, FILE *progress);
void flow_free(flow_graph *g);

/* Between exec.c and the Slurm executor (slurm.c). */
/* s->out + suffix (".tmp", ".done", ".job", ".exit"...). */
void flow_step_file(const flow_step *s, const char *suffix, char *buf, size_t n);
/* The step's log, OUT/logs/DESIGN/STEP.log (directory made). -1 if too long. */
int flow_step_log(const flow_graph *g, const flow_step *s, char *buf, size_t n);
/* The step's command with {OUT} (a whole argument) and {DEPk} (anywhere in an
 * argument, e.g. "block*.attn.*={DEP0}") substituted: argv[0] is this
 * mantis, NULL-terminated; subst is the storage. *to_out: 1 when stdout is
 * the output. */
void flow_step_argv(const flow_graph *g, const flow_step *s, char **argv, char subst[][FLOW_ARG], int *to_out);
/* Writes "'arg' 'arg' ..." (POSIX shell single quotes) for argv to f. */
void flow_shell_quote(FILE *f, char *const *argv);

typedef struct flow_slurm flow_slurm;
/* Checks sbatch and squeue; 0, or 2 with g->error. */
int flow_slurm_open(flow_graph *g, flow_slurm **out);
void flow_slurm_close(flow_slurm *sl);
/* One squeue call for every job of this user; 0, or 2 with g->error. */
int flow_slurm_refresh(flow_slurm *sl);
/* A step's job (s->job): 1 still queued or running; 0 ended, *code its exit
 * status from the job's exit record, or -1 with Slurm's reason in reason
 * (cancelled, timed out, node failure, no exit record). */
int flow_slurm_state(flow_slurm *sl, const flow_step *s, int *code, char *reason, size_t n);
/* Writes the job script and submits s (s->job set); with dry, prints the
 * sbatch command line to dry instead. 0, or 2 with g->error (sbatch refused). */
int flow_slurm_submit(flow_slurm *sl, flow_step *s, FILE *dry);
/* Seconds between polls. */
int flow_slurm_poll_seconds(const flow_slurm *sl);

/* Writes results.csv, results.json, charts/ and report.html into g->root,
 * then the summary table and the report's path to `out` (NULL: none);
 * *failed (NULL: not wanted) gets the number of rows that failed (a step
 * failed) or were skipped (verification failed): the flow exits 1 when it
 * is not 0. A diverged training is a result of its design, not counted.
 * MTS_EIO/MTS_EINVAL naming the file that could not be written,
 * MTS_ENOMEM. */
int flow_report(const flow_cfg *c, const flow_graph *g, const char *cmdline, FILE *out, int *failed, mts_err *err);

#endif
