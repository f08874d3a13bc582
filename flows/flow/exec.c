/* exec.c - the flow's step graph: content-hash keys, a process pool,
 * atomic outputs and clean interruption. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flow.h"
#include "mantis/clock.h"
#include "mantis/hash.h"
#include "mantis/fs.h"
#include "mantis/proc.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

/* The record beside a step's output: its exit status and time. */
static void record_path(const flow_step *s, char *buf, size_t n) { snprintf(buf, n, "%s.done", s->out); }

/* A failed step's record: the same inputs fail the same way, so a failure is
 * a cached result too (until --retry-failed). */
static void fail_path(const flow_step *s, char *buf, size_t n) { snprintf(buf, n, "%s.failed", s->out); }

/* Where a running step writes its output before it is renamed into place. */
static void tmp_path(const flow_step *s, char *buf, size_t n) { snprintf(buf, n, "%s.tmp", s->out); }

static int write_record(const char *path, const flow_step *s)
{
    char line[64];
    size_t n = (size_t)snprintf(line, sizeof line, "exit %d seconds %.3f\n", s->exit_code, s->seconds);
    const void *parts[1] = {line};
    return mts_fs_write_atomic(path, 1, parts, &n, NULL);
}

static void set_failed_reason(flow_step *s)
{
    snprintf(s->reason, sizeof s->reason, "exit %d (log: logs/%s/%s.log)", s->exit_code, s->design, s->name);
}

/* 1: done on record, -1: failed on record, 0: nothing on record. */
static int read_record(flow_step *s)
{
    char rp[FLOW_PATH + 8];
    record_path(s, rp, sizeof rp);
    FILE *f = fopen(rp, "r");
    int done = 1;
    if (!f) {
        fail_path(s, rp, sizeof rp);
        f = fopen(rp, "r");
        done = -1;
    }
    if (!f) return 0;
    int ok = fscanf(f, "exit %d seconds %lf", &s->exit_code, &s->seconds) == 2;
    fclose(f);
    if (!ok) return 0;
    if (done < 0) set_failed_reason(s);
    return done > 0 ? mts_fs_exists(s->out) : -1;
}

/* The text a step's key hashes: every argument (dependency placeholders
 * stand for the dependency's key), the input contents and the Mantis
 * version. Malloc'd (*len bytes), NULL when out of memory. */
static char *key_text(const flow_graph *g, const char *const *argv, const int *deps, int ndeps, const char *content,
                      size_t *len)
{
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    if (!text) return NULL;
    n += (size_t)snprintf(text, cap, "mantis %s|%s|", MANTIS_VERSION, content ? content : "");
    for (int i = 0; argv[i]; i++) {
        const char *piece = argv[i];
        int k;
        if (sscanf(argv[i], "{DEP%d}", &k) == 1 && k >= 0 && k < ndeps) piece = g->s[deps[k]].key;
        size_t need = strlen(piece) + 2;
        if (n + need >= cap) {
            char *nt = realloc(text, cap = 2 * (n + need));
            if (!nt) { free(text); return NULL; }
            text = nt;
        }
        n += (size_t)snprintf(text + n, cap - n, "%s|", piece);
    }
    *len = n;
    return text;
}

/* A fresh slot at the end of g->s (not yet counted in g->n). */
static flow_step *new_step(flow_graph *g, mts_err *err)
{
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        flow_step *ns = realloc(g->s, (size_t)cap * sizeof *ns);
        if (!ns) return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), NULL;
        g->s = ns;
        g->cap = cap;
    }
    flow_step *s = &g->s[g->n];
    memset(s, 0, sizeof *s);
    return s;
}

int flow_add(flow_graph *g, const char *design, const char *name, const char *ext, const char *const *argv,
             const int *deps, int ndeps, const char *content, mts_err *err)
{
    flow_step *s = new_step(g, err);
    if (!s) return -1;
    snprintf(s->design, sizeof s->design, "%s", design);
    snprintf(s->name, sizeof s->name, "%s", name);
    for (int i = 0; argv[i]; i++) {
        if (s->argc == STEP_MAX_ARGS - 1) return mts_fail(err, MTS_EINVAL, "flow: too many arguments"), -1;
        s->argv[s->argc++] = strdup(argv[i]);
    }
    size_t len;
    char *text = key_text(g, argv, deps, ndeps, content, &len);
    if (!text) return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), -1;
    mts_sha256_hex(text, len, s->key);
    free(text);
    for (int i = 0; i < ndeps && i < STEP_MAX_DEPS; i++) s->dep[s->ndeps++] = deps[i];
    s->ok_exit[s->nok++] = 0;
    char dir[FLOW_PATH];
    if (mts_fs_pathf(dir, sizeof dir, "%s/steps/%s", g->root, design) ||
        mts_fs_pathf(s->out, sizeof s->out, "%s/%s-%.16s.%s", dir, name, s->key, ext))
        return mts_fail(err, MTS_EINVAL, "%s: results path too long", g->root), -1;
    if (mts_fs_mkdirs(dir, err)) return -1;
    s->state = ST_PENDING;
    return g->n++;
}

void flow_free(flow_graph *g)
{
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < g->s[i].argc; k++) free(g->s[i].argv[k]);
    free(g->s);
    g->s = NULL;
    g->n = g->cap = 0;
}

/* One flow_run: the graph, the pool and where progress goes. */
typedef struct run_ctx {
    flow_graph *g;
    int jobs, running;
    FILE *progress;   /* NULL: silent */
    double t_start;
    double *t0;       /* per step: when it started */
} run_ctx;

/* One progress line: the elapsed time, then the message. */
static void say(const run_ctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const run_ctx *r, const char *fmt, ...)
{
    if (!r->progress) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(r->progress, "[%7.1fs] ", mts_clock_now() - r->t_start);
    vfprintf(r->progress, fmt, ap);
    va_end(ap);
    fflush(r->progress);
}

static const char *label(const flow_step *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", s->design, s->name);
    return buf;
}

/* Starts a step's command (this mantis binary) in its own process group,
 * stdout and stderr to its log; a command without {OUT} prints its result,
 * so its stdout alone goes to the temporary output. Returns the pid or -1
 * (errno says why). */
static int launch(flow_graph *g, flow_step *s)
{
    char tmp[FLOW_PATH + 16], logdir[FLOW_PATH], log[FLOW_PATH + 64];
    tmp_path(s, tmp, sizeof tmp);
    if (mts_fs_pathf(logdir, sizeof logdir, "%s/logs/%s", g->root, s->design) ||
        mts_fs_pathf(log, sizeof log, "%s/%s.log", logdir, s->name) || mts_fs_mkdirs(logdir, NULL)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *argv[STEP_MAX_ARGS + 1];
    char subst[STEP_MAX_ARGS][FLOW_PATH + 16];
    int to_out = 1;
    argv[0] = g->exe;
    for (int i = 0; i < s->argc; i++) {
        int k;
        if (!strcmp(s->argv[i], "{OUT}")) {
            snprintf(subst[i], sizeof subst[i], "%s", tmp);
            to_out = 0;
        } else if (sscanf(s->argv[i], "{DEP%d}", &k) == 1 && k >= 0 && k < s->ndeps) {
            snprintf(subst[i], sizeof subst[i], "%s", g->s[s->dep[k]].out);
        } else {
            snprintf(subst[i], sizeof subst[i], "%s", s->argv[i]);
        }
        argv[i + 1] = subst[i];
    }
    argv[s->argc + 1] = NULL;
    mts_proc_io io = {.log = log, .out = to_out ? tmp : NULL, .own_group = 1}; /* interrupt kills -pid */
    return mts_proc_start(argv, &io);
}

/* After a step exits: move its output into place, then write its record. */
static void finish(run_ctx *r, int i, int exit_code)
{
    flow_step *s = &r->g->s[i];
    char tmp[FLOW_PATH + 16], rp[FLOW_PATH + 8], lab[160];
    tmp_path(s, tmp, sizeof tmp);
    s->seconds = mts_clock_now() - r->t0[i];
    s->exit_code = exit_code;
    int ok = 0;
    for (int k = 0; k < s->nok; k++) ok |= s->exit_code == s->ok_exit[k];
    if (ok && !mts_fs_exists(tmp)) { /* a step that writes nothing still leaves a result */
        FILE *f = fopen(tmp, "w");
        if (f) fclose(f);
    }
    if (ok && rename(tmp, s->out) == 0) {
        record_path(s, rp, sizeof rp);
        ok = write_record(rp, s) == MTS_OK;
    } else {
        ok = 0;
        unlink(tmp);
        if (s->exit_code < 128) { /* a signal is no verdict on the inputs */
            fail_path(s, rp, sizeof rp);
            write_record(rp, s);
        }
    }
    s->state = ok ? ST_DONE : ST_FAILED;
    if (!ok) set_failed_reason(s);
    say(r, "%-7s %s (exit %d, %.1fs)\n", ok ? "done" : "FAILED", label(s, lab, sizeof lab), s->exit_code,
        s->seconds);
}

/* Marks the pending steps whose result (or failure) is already on record. */
static void load_records(flow_graph *g)
{
    for (int i = 0; i < g->n; i++) {
        flow_step *s = &g->s[i];
        if (s->state != ST_PENDING) continue;
        int rec = read_record(s);
        if (rec < 0 && g->retry_failed) {
            char fp[FLOW_PATH + 8];
            fail_path(s, fp, sizeof fp);
            unlink(fp);
            rec = 0;
        }
        if (rec) {
            s->state = rec > 0 ? ST_DONE : ST_FAILED;
            s->cached = 1;
        }
    }
}

/* 1 when every dependency of s is done, 0 while one is still to come, -1
 * when s can never run (s->reason names the last dependency that blocks it:
 * the report quotes it, so which one is part of the results). */
static int deps_ready(const flow_graph *g, flow_step *s)
{
    int ready = 1, blocked = 0;
    for (int d = 0; d < s->ndeps; d++) {
        const flow_step *dep = &g->s[s->dep[d]];
        if (dep->state == ST_FAILED || dep->state == ST_SKIPPED) {
            blocked = 1;
            snprintf(s->reason, sizeof s->reason, "skipped: %s %s", dep->name,
                     dep->state == ST_FAILED ? "failed" : "was skipped");
        } else if (dep->state != ST_DONE) {
            ready = 0;
        }
    }
    if (blocked) return -1;
    if (ready && s->need_pass) {
        const flow_step *gate = &g->s[s->dep[s->need_pass - 1]];
        if (gate->exit_code != 0) {
            snprintf(s->reason, sizeof s->reason, "skipped: %s did not pass (exit %d)", gate->name, gate->exit_code);
            return -1;
        }
    }
    return ready;
}

/* One pass over the pending steps: skips the blocked ones and starts the
 * ready ones while the pool has room. Returns 1 if anything changed. */
static int schedule(run_ctx *r)
{
    flow_graph *g = r->g;
    int progress = 0;
    char lab[160];
    for (int i = 0; i < g->n && !stop_signal; i++) {
        flow_step *s = &g->s[i];
        if (s->state != ST_PENDING) continue;
        int ready = deps_ready(g, s);
        if (ready < 0) {
            s->state = ST_SKIPPED;
            progress = 1;
            say(r, "skip    %s: %s\n", label(s, lab, sizeof lab), s->reason);
            continue;
        }
        if (!ready || r->running >= r->jobs) continue;
        int pid = launch(g, s);
        if (pid < 0) {
            s->state = ST_FAILED;
            snprintf(s->reason, sizeof s->reason, "cannot start: %s", strerror(errno));
            continue;
        }
        s->pid = pid;
        s->state = ST_RUNNING;
        r->t0[i] = mts_clock_now();
        r->running++;
        progress = 1;
        say(r, "start   %s\n", label(s, lab, sizeof lab));
    }
    return progress;
}

/* Waits for any step to exit and finishes it. Returns 0 to go on (also when
 * a signal interrupted the wait), -1 when there is nothing left to wait for. */
static int reap(run_ctx *r)
{
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < r->g->n; i++)
        if (r->g->s[i].state == ST_RUNNING && r->g->s[i].pid == pid) {
            finish(r, i, mts_proc_exit_code(status));
            r->running--;
        }
    return 0;
}

/* After SIGINT/SIGTERM: kill the running steps' process groups and drop
 * their partial outputs; they stay pending for the next run. */
static void stop_running(run_ctx *r, int sig)
{
    flow_graph *g = r->g;
    for (int i = 0; i < g->n; i++)
        if (g->s[i].state == ST_RUNNING) kill(-g->s[i].pid, SIGTERM);
    for (int i = 0; i < g->n; i++)
        if (g->s[i].state == ST_RUNNING) {
            char tmp[FLOW_PATH + 16];
            mts_proc_wait(g->s[i].pid);
            tmp_path(&g->s[i], tmp, sizeof tmp);
            unlink(tmp);
            g->s[i].state = ST_PENDING;
        }
    r->running = 0;
    say(r, "interrupted by signal %d; finished steps are kept, re-run to continue\n", sig);
}

int flow_run(flow_graph *g, int jobs, FILE *progress)
{
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    run_ctx r = {.g = g, .jobs = jobs, .progress = progress, .t_start = g->t_start ? g->t_start : mts_clock_now()};
    r.t0 = calloc((size_t)g->n + 1, sizeof *r.t0);
    load_records(g);
    while (!stop_signal) {
        int changed = schedule(&r);
        if (stop_signal) break;
        if (r.running == 0) {
            if (!changed) break;
            continue;
        }
        if (reap(&r)) break;
    }
    int sig = stop_signal;
    if (sig) stop_running(&r, sig);
    free(r.t0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return sig ? 128 + sig : 0;
}
