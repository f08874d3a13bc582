/* slurm.c - the Slurm executor of the flow (docs/flow.md "Executors"): each
 * ready step becomes one `sbatch` job running the same command the local
 * executor runs, into the same content-addressed output. Jobs are submitted
 * when their step is ready (not with --dependency=afterok: whether a step
 * runs depends on its dependencies' exit statuses, e.g. training only after
 * verify exited 0, and phase 2 is planned from phase 1's outputs). The job
 * script writes an exit record beside the step's output; the coordinator
 * polls one `squeue` per interval for jobs that ended without one. sbatch and
 * squeue run through base/proc (argv vectors); the job script is the only
 * shell code, and every word in it is single-quoted. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow.h"
#include "mantis/clock.h"
#include "mantis/fs.h"
#include "mantis/parse.h"
#include "mantis/proc.h"

const char *const flow_kinds[FLOW_KINDS] = {"detect", "verify", "synth", "lutgen",
                                            "metrics", "trace", "power", "train"};

/* Built-in requests per kind (flow_kinds order): one CPU each (the flow's
 * parallelism is its steps), memory and time limits with room to spare for
 * the shipped designs and models. */
static const char *const default_res[FLOW_KINDS] = {
    "--cpus-per-task=1 --mem=2G --time=00:30:00", "--cpus-per-task=1 --mem=2G --time=01:00:00",
    "--cpus-per-task=1 --mem=4G --time=02:00:00", "--cpus-per-task=1 --mem=2G --time=01:00:00",
    "--cpus-per-task=1 --mem=1G --time=00:30:00", "--cpus-per-task=1 --mem=4G --time=01:00:00",
    "--cpus-per-task=1 --mem=4G --time=02:00:00", "--cpus-per-task=1 --mem=8G --time=08:00:00"};

/* Seconds an ended job may take to show its exit record (attribute caches of
 * network filesystems) before the step counts as failed. */
#define EXIT_RECORD_GRACE 30.0

int flow_step_kind(const char *name)
{
    size_t n = strcspn(name, "-");
    for (int k = 0; k < FLOW_KINDS; k++)
        if (strlen(flow_kinds[k]) == n && !strncmp(flow_kinds[k], name, n)) return k;
    /* steps that run a network (gemm dump, inference, cross evaluation) ask
     * for a training's resources; the co-simulation for a synthesis's */
    static const char *const alias[][2] = {{"gemm", "train"}, {"infer", "train"}, {"cross", "train"}, {"cosim", "synth"}};
    for (size_t a = 0; a < sizeof alias / sizeof alias[0]; a++)
        if (strlen(alias[a][0]) == n && !strncmp(alias[a][0], name, n)) return flow_step_kind(alias[a][1]);
    return -1;
}

void flow_cfg_exec_defaults(flow_cfg *c)
{
    snprintf(c->executor, sizeof c->executor, "local");
    c->slurm_partition[0] = c->slurm_account[0] = c->slurm_options[0] = '\0';
    for (int k = 0; k < FLOW_KINDS; k++) snprintf(c->slurm_res[k], sizeof c->slurm_res[k], "%s", default_res[k]);
    c->slurm_poll = 5;
}

/* sbatch options as the configuration gives them: words split at blanks,
 * each an option ("-..."), no quotes or shell characters (they reach sbatch
 * as argv words, never a shell). */
static int options_ok(const char *v)
{
    int word_start = 1;
    for (const char *p = v; *p; p++) {
        if (isspace((unsigned char)*p)) {
            word_start = 1;
            continue;
        }
        if (word_start && *p != '-') return 0;
        if (strchr("'\"`$;&|<>\\()", *p) || !isprint((unsigned char)*p)) return 0;
        word_start = 0;
    }
    return 1;
}

static int name_ok(const char *v) { return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-,") == strlen(v) && *v != '-'; }

int flow_cfg_exec_set(flow_cfg *c, const char *k, const char *v)
{
    if (!strcmp(k, "executor")) {
        if (strcmp(v, "local") && strcmp(v, "slurm")) return -1;
        return snprintf(c->executor, sizeof c->executor, "%s", v), 0;
    }
    if (!strcmp(k, "slurm_partition") || !strcmp(k, "slurm_account")) {
        char *dst = k[6] == 'p' ? c->slurm_partition : c->slurm_account;
        if (!name_ok(v) || strlen(v) >= 64) return -1;
        return snprintf(dst, 64, "%s", v), 0;
    }
    if (!strcmp(k, "slurm_options"))
        return options_ok(v) && strlen(v) < sizeof c->slurm_options ? snprintf(c->slurm_options, 512, "%s", v), 0 : -1;
    if (!strcmp(k, "slurm_poll")) {
        long x;
        if (mts_parse_int(v, 1, 600, &x)) return -1;
        return c->slurm_poll = (int)x, 0;
    }
    if (!strncmp(k, "slurm_", 6)) {
        int kind = flow_step_kind(k + 6);
        if (kind < 0 || strcmp(flow_kinds[kind], k + 6)) return -2;
        return options_ok(v) && strlen(v) < 256 ? snprintf(c->slurm_res[kind], 256, "%s", v), 0 : -1;
    }
    return -2;
}

/* What one squeue said about a job. */
typedef struct sq_job {
    long id;
    char state[24], reason[96], name[32];
} sq_job;

struct flow_slurm {
    flow_graph *g;
    const flow_cfg *c;
    char cwd[FLOW_PATH];
    char jobs_dir[FLOW_PATH];                   /* OUT/jobs: scripts and the last squeue */
    char qout[FLOW_PATH + 32], qerr[FLOW_PATH + 32];
    sq_job *q;
    int nq, capq;
};

int flow_slurm_poll_seconds(const flow_slurm *sl) { return sl->c && sl->c->slurm_poll > 0 ? sl->c->slurm_poll : 5; }

int flow_slurm_open(flow_graph *g, flow_slurm **out)
{
    *out = NULL;
    if (!g->dry_run)
        for (const char *const *t = (const char *const[]){"sbatch", "squeue", NULL}; *t; t++)
            if (!mts_proc_which(*t))
                return snprintf(g->error, sizeof g->error,
                                "%s not found on PATH: the slurm executor needs Slurm's client commands "
                                "(Debian: slurm-client) on this machine, or use --executor local", *t), 2;
    flow_slurm *sl = calloc(1, sizeof *sl);
    if (!sl) return snprintf(g->error, sizeof g->error, "out of memory"), 2;
    sl->g = g;
    sl->c = g->cfg;
    if (!getcwd(sl->cwd, sizeof sl->cwd)) {
        free(sl);
        return snprintf(g->error, sizeof g->error, "cannot read the working directory: %s", strerror(errno)), 2;
    }
    /* absolute: a results directory named "-x" must not read as an sbatch option */
    if (mts_fs_pathf(sl->jobs_dir, sizeof sl->jobs_dir, "%s%s%s/jobs", g->root[0] == '/' ? "" : sl->cwd,
                     g->root[0] == '/' ? "" : "/", g->root) ||
        mts_fs_mkdirs(sl->jobs_dir, NULL)) {
        free(sl);
        return snprintf(g->error, sizeof g->error, "%.400s/jobs: cannot create the job directory", g->root), 2;
    }
    snprintf(sl->qout, sizeof sl->qout, "%s/squeue.out", sl->jobs_dir);
    snprintf(sl->qerr, sizeof sl->qerr, "%s/squeue.err", sl->jobs_dir);
    *out = sl;
    return g->dry_run ? 0 : flow_slurm_refresh(sl); /* the jobs already queued, by name (flow_slurm_submit) */
}

void flow_slurm_close(flow_slurm *sl)
{
    if (!sl) return;
    free(sl->q);
    free(sl);
}

/* The last non-empty line of a file (a tool's complaint), "" if none. */
static void last_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    char line[512];
    buf[0] = '\0';
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (*line) snprintf(buf, n, "%.255s", line);
    }
    fclose(f);
}

int flow_slurm_refresh(flow_slurm *sl)
{
    char *argv[] = {"squeue", "--me", "--noheader", "--states=all", "--format=%i|%T|%r|%j", NULL};
    mts_proc_io io = {.out = sl->qout, .log = sl->qerr};
    int rc = mts_proc_run(argv, &io);
    if (rc) {
        char why[256];
        last_line(sl->qerr, why, sizeof why);
        return snprintf(sl->g->error, sizeof sl->g->error, "squeue failed (exit %d): %s", rc,
                        *why ? why : "no message"), 2;
    }
    FILE *f = fopen(sl->qout, "r");
    if (!f) return snprintf(sl->g->error, sizeof sl->g->error, "%.400s: cannot read squeue's output", sl->qout), 2;
    sl->nq = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *bar1 = strchr(line, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
        char *bar3 = bar2 ? strchr(bar2 + 1, '|') : NULL;
        if (!bar3) continue;
        *bar1 = *bar2 = *bar3 = '\0';
        if (sl->nq == sl->capq) {
            int cap = sl->capq ? 2 * sl->capq : 64;
            sq_job *nq = realloc(sl->q, (size_t)cap * sizeof *nq);
            if (!nq) break;
            sl->q = nq;
            sl->capq = cap;
        }
        sq_job *j = &sl->q[sl->nq++];
        j->id = strtol(line, NULL, 10);
        snprintf(j->state, sizeof j->state, "%s", bar1 + 1);
        snprintf(j->reason, sizeof j->reason, "%s", bar2 + 1);
        snprintf(j->name, sizeof j->name, "%.31s", bar3 + 1);
    }
    fclose(f);
    return 0;
}

static int terminal(const char *state)
{
    static const char *const end[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                                      "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", NULL};
    for (int i = 0; end[i]; i++)
        if (!strncmp(state, end[i], strlen(end[i]))) return 1;
    return 0;
}

/* `scontrol show job -o ID` for a job squeue no longer lists: its state and
 * reason, or "" when Slurm has forgotten it. */
static void scontrol_state(flow_slurm *sl, long id, char *state, size_t ns, char *reason, size_t nr)
{
    char ids[32];
    snprintf(ids, sizeof ids, "%ld", id);
    char *argv[] = {"scontrol", "show", "job", "-o", ids, NULL};
    mts_proc_io io = {.out = sl->qout, .log = sl->qerr};
    state[0] = reason[0] = '\0';
    if (mts_proc_run(argv, &io)) return;
    char line[4096] = "";
    FILE *f = fopen(sl->qout, "r");
    if (!f) return;
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    const char *p = strstr(line, "JobState="), *q = strstr(line, " Reason=");
    if (p) snprintf(state, ns, "%.*s", (int)strcspn(p + 9, " \n"), p + 9);
    if (q) snprintf(reason, nr, "%.*s", (int)strcspn(q + 8, " \n"), q + 8);
}

int flow_slurm_state(flow_slurm *sl, const flow_step *cs, int *code, char *reason, size_t n)
{
    flow_step *s = (flow_step *)cs;
    char ep[FLOW_PATH + 8];
    flow_step_file(s, ".exit", ep, sizeof ep);
    *code = -1;
    FILE *f = fopen(ep, "r");
    if (f) {
        int got = fscanf(f, "exit %d", code);
        fclose(f);
        if (got == 1) return 0;
        *code = -1;
    }
    const sq_job *j = NULL;
    for (int i = 0; i < sl->nq && !j; i++)
        if (sl->q[i].id == s->job) j = &sl->q[i];
    char state[32], why[96];
    if (j) {
        snprintf(state, sizeof state, "%s", j->state);
        snprintf(why, sizeof why, "%s", j->reason);
        if (!terminal(state)) {
            s->gone_since = 0;
            return 1;
        }
    } else {
        scontrol_state(sl, s->job, state, sizeof state, why, sizeof why);
        if (*state && !terminal(state)) return 1;
    }
    /* ended, or forgotten by Slurm, without an exit record (yet) */
    int normal = !*state || !strncmp(state, "COMPLETED", 9) || !strncmp(state, "FAILED", 6);
    if (normal) {
        if (s->gone_since == 0) s->gone_since = mts_clock_now();
        if (mts_clock_now() - s->gone_since < EXIT_RECORD_GRACE) return 1;
        snprintf(reason, n, "slurm job %ld %s%s without writing %s: the results directory must be on a filesystem "
                 "the compute nodes share (log: %s)", s->job, *state ? "ended " : "is gone", state, ep,
                 "logs/.../STEP.slurm.log");
        return 0;
    }
    if (!*why || !strcmp(why, "None")) snprintf(reason, n, "slurm job %ld %s", s->job, state);
    else snprintf(reason, n, "slurm job %ld %s (%s)", s->job, state, why);
    return 0;
}

/* Appends the words of opts to argv (at *n, at most max), copying into buf. */
static void add_words(char **argv, int *n, int max, char *buf, size_t cap, const char *opts)
{
    snprintf(buf, cap, "%s", opts);
    for (char *save, *t = strtok_r(buf, " \t", &save); t && *n < max; t = strtok_r(NULL, " \t", &save))
        argv[(*n)++] = t;
}

/* 1 when a step's command asks for a GPU: it gets --gres=gpu:1. */
static int wants_gpu(const flow_step *s)
{
    for (int i = 0; i < s->argc; i++) {
        const char *a = s->argv[i];
        if (!strcmp(a, "--gpu") || !strcmp(a, "--device=cuda") || !strcmp(a, "--device=gpu")) return 1;
        if (!strcmp(a, "--device") && i + 1 < s->argc && (!strcmp(s->argv[i + 1], "cuda") || !strcmp(s->argv[i + 1], "gpu")))
            return 1;
    }
    return 0;
}

/* The job script: into the working directory, the step's command with its
 * output and log where the local executor puts them, then its exit status
 * into an exit record renamed into place. */
static int write_script(flow_slurm *sl, const flow_step *s, const char *path)
{
    char *argv[STEP_MAX_ARGS + 1], tmp[FLOW_PATH + 16], log[FLOW_PATH + 64], ep[FLOW_PATH + 8],
        ept[FLOW_PATH + 16];
    static char subst[STEP_MAX_ARGS][FLOW_ARG];
    int to_out;
    flow_step_argv(sl->g, s, argv, subst, &to_out);
    flow_step_file(s, ".tmp", tmp, sizeof tmp);
    flow_step_file(s, ".exit", ep, sizeof ep);
    flow_step_file(s, ".exit.tmp", ept, sizeof ept);
    if (flow_step_log(sl->g, s, log, sizeof log)) return -1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return -1;
    char *cd[] = {"cd", sl->cwd, NULL}, *tmpw[] = {tmp, NULL}, *logw[] = {log, NULL}, *eptw[] = {ept, NULL},
         *mv[] = {"mv", "-f", "--", ept, ep, NULL};
    char what[160];
    snprintf(what, sizeof what, "%s/%s", s->design, s->name);
    for (char *p = what; *p; p++)
        if (!isprint((unsigned char)*p)) *p = '?'; /* a newline in a design name must not end the comment */
    fprintf(f, "#!/bin/sh\n# mantis flow step %s, key %s (written by the coordinator; docs/flow.md)\n", what, s->key);
    flow_shell_quote(f, cd);
    fputs(" || exit 1\n", f);
    flow_shell_quote(f, argv);
    if (to_out) {
        fputs(" </dev/null >", f);
        flow_shell_quote(f, tmpw);
        fputs(" 2>", f);
        flow_shell_quote(f, logw);
    } else {
        fputs(" </dev/null >", f);
        flow_shell_quote(f, logw);
        fputs(" 2>&1", f);
    }
    fputs("\nrc=$?\nprintf 'exit %d\\n' \"$rc\" >", f);
    flow_shell_quote(f, eptw);
    fputs(" && ", f);
    flow_shell_quote(f, mv);
    fputs("\nexit \"$rc\"\n", f);
    if (fclose(f)) {
        free(text);
        return -1;
    }
    const void *parts[1] = {text};
    int rc = mts_fs_write_atomic(path, 1, parts, &len, NULL);
    free(text);
    return rc ? -1 : 0;
}

int flow_slurm_submit(flow_slurm *sl, flow_step *s, FILE *dry)
{
    flow_graph *g = sl->g;
    const flow_cfg *c = sl->c;
    char dir[FLOW_PATH + 80], script[FLOW_PATH + 200], ep[FLOW_PATH + 8], log[FLOW_PATH + 64];
    char name[96], output[FLOW_PATH + 96], chdir_opt[FLOW_PATH + 16], part[96], acct[96];
    char resbuf[256], optbuf[512];
    if (mts_fs_pathf(dir, sizeof dir, "%s/%s", sl->jobs_dir, s->design) ||
        mts_fs_pathf(script, sizeof script, "%s/%s-%.16s.sh", dir, s->name, s->key) || mts_fs_mkdirs(dir, NULL) ||
        flow_step_log(g, s, log, sizeof log) || write_script(sl, s, script))
        return snprintf(g->error, sizeof g->error, "%.300s: cannot write the job script of %.64s/%.80s", dir, s->design,
                        s->name), 2;
    snprintf(name, sizeof name, "--job-name=mantis-%.16s", s->key);
    long id = 0;
    for (int i = 0; i < sl->nq && !dry && !id; i++) /* submitted by a coordinator killed before it recorded the id */
        if (!strcmp(sl->q[i].name, name + 11) && !terminal(sl->q[i].state)) id = sl->q[i].id;
    if (!id) {
        flow_step_file(s, ".exit", ep, sizeof ep);
        unlink(ep); /* a record of an earlier job of this step is no verdict on this one */
    }
    snprintf(output, sizeof output, "--output=%.*s.slurm.log", (int)(strlen(log) - 4), log);
    snprintf(chdir_opt, sizeof chdir_opt, "--chdir=%s", sl->cwd);
    char *argv[96];
    int n = 0;
    argv[n++] = "sbatch";
    argv[n++] = "--parsable";
    argv[n++] = name;
    argv[n++] = output;
    argv[n++] = chdir_opt;
    if (c && *c->slurm_partition) snprintf(part, sizeof part, "--partition=%s", c->slurm_partition), argv[n++] = part;
    if (c && *c->slurm_account) snprintf(acct, sizeof acct, "--account=%s", c->slurm_account), argv[n++] = acct;
    int kind = flow_step_kind(s->name);
    add_words(argv, &n, 80, resbuf, sizeof resbuf, c && kind >= 0 ? c->slurm_res[kind] : "");
    int has_gres = 0;
    for (int i = 0; i < n; i++) has_gres |= !strncmp(argv[i], "--gres", 6);
    if (!has_gres && wants_gpu(s)) argv[n++] = "--gres=gpu:1";
    add_words(argv, &n, 92, optbuf, sizeof optbuf, c ? c->slurm_options : "");
    argv[n++] = script;
    argv[n] = NULL;
    if (dry) {
        flow_shell_quote(dry, argv);
        fputc('\n', dry);
        return 0;
    }
    int rc = 0;
    if (!id) {
        mts_proc_io io = {.out = sl->qout, .log = sl->qerr};
        rc = mts_proc_run(argv, &io);
        char first[256] = "";
        FILE *f = fopen(sl->qout, "r");
        if (f) {
            if (!fgets(first, sizeof first, f)) first[0] = '\0';
            fclose(f);
        }
        id = strtol(first, NULL, 10);
    }
    if (rc || id <= 0) {
        char why[256];
        last_line(sl->qerr, why, sizeof why);
        return snprintf(g->error, sizeof g->error, "sbatch refused %s/%s (exit %d): %s", s->design, s->name, rc,
                        *why ? why : "no job id printed"), 2;
    }
    s->job = id;
    s->gone_since = 0;
    char jp[FLOW_PATH + 8], line[48];
    flow_step_file(s, ".job", jp, sizeof jp);
    size_t len = (size_t)snprintf(line, sizeof line, "job %ld\n", id);
    const void *parts[1] = {line};
    if (mts_fs_write_atomic(jp, 1, parts, &len, NULL))
        return snprintf(g->error, sizeof g->error, "%.400s: cannot record slurm job %ld", jp, id), 2;
    return 0;
}
