/* exec.c - the flow's step graph: content-hash keys, the executors (a local
 * process pool, or Slurm through slurm.c), checked and atomic outputs, the
 * results directory's lock and clean interruption, even by SIGKILL. */
#define _GNU_SOURCE /* pipe2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flow.h"
#include "mantis/clock.h"
#include "mantis/hash.h"
#include "mantis/fs.h"
#include "mantis/json.h"
#include "mantis/proc.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

void flow_step_file(const flow_step *s, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", s->out, suffix);
}

/* The record beside a step's output: its exit status, time, and the size and
 * SHA-256 of the output it vouches for. */
static void record_path(const flow_step *s, char *buf, size_t n) { flow_step_file(s, ".done", buf, n); }

/* A failed step's record: the same inputs fail the same way, so a
 * deterministic failure is a cached result too (until --retry-failed).
 * Failures caused by the environment get none (env_failure). */
static void fail_path(const flow_step *s, char *buf, size_t n) { flow_step_file(s, ".failed", buf, n); }

/* Where a running step writes its output before it is renamed into place. */
static void tmp_path(const flow_step *s, char *buf, size_t n) { flow_step_file(s, ".tmp", buf, n); }

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
}

static int write_record(const char *path, const flow_step *s, int with_output)
{
    char line[256], sha[65] = "-";
    long long size = -1;
    if (with_output) {
        size = file_size(s->out);
        if (size < 0 || mts_sha256_file_hex(s->out, sha, NULL)) return MTS_EIO;
    }
    size_t n = (size_t)snprintf(line, sizeof line, "exit %d seconds %.3f size %lld sha256 %s\n", s->exit_code,
                                s->seconds, size, sha);
    const void *parts[1] = {line};
    return mts_fs_write_atomic(path, 1, parts, &n, NULL);
}

static void set_failed_reason(flow_step *s)
{
    snprintf(s->reason, sizeof s->reason, "exit %d (log: logs/%s/%s.log)", s->exit_code, s->design, s->name);
}

/* A step output the report can read: a JSON output parses, anything else is
 * non-empty. 1 when good. */
static int output_parses(const flow_step *s)
{
    long long size = file_size(s->out);
    if (size <= 0) return 0;
    size_t n = strlen(s->out);
    if (n > 5 && !strcmp(s->out + n - 5, ".json")) {
        mts_json *j = mts_json_load(s->out);
        if (!j) return 0;
        mts_json_free(j);
    }
    return 1;
}

/* 1: done on record and its output is what the record vouches for (size,
 * SHA-256, parses), -1: failed on record, 0: nothing trustworthy on record
 * (a bad output and its record are deleted: the step runs again). */
static int read_record(flow_step *s)
{
    char rp[FLOW_PATH + 8], sha[65] = "";
    record_path(s, rp, sizeof rp);
    FILE *f = fopen(rp, "r");
    int done = 1;
    if (!f) {
        fail_path(s, rp, sizeof rp);
        f = fopen(rp, "r");
        done = -1;
    }
    if (!f) return 0;
    long long size = -2;
    int got = fscanf(f, "exit %d seconds %lf size %lld sha256 %64s", &s->exit_code, &s->seconds, &size, sha);
    fclose(f);
    if (got < 2) return 0;
    if (done < 0) {
        set_failed_reason(s);
        return -1;
    }
    char have[65];
    int good = got == 4 && file_size(s->out) == size && !mts_sha256_file_hex(s->out, have, NULL) &&
               !strcmp(have, sha) && output_parses(s);
    if (!good) { /* an older record without a checksum, or an output changed since: redo */
        unlink(rp);
        unlink(s->out);
    }
    return good;
}

/* arg with every "{DEPk}" (k < ndeps) replaced by piece[k] (a dependency's
 * output path when running, its key when hashing), into buf. Returns the
 * length the result needs (it fits when < n). */
static size_t subst_deps(const char *arg, const char *const *piece, int ndeps, char *buf, size_t n)
{
    size_t len = 0;
    for (const char *c = arg; *c;) {
        int k, used = 0;
        const char *add = NULL;
        if (c[0] == '{' && sscanf(c, "{DEP%d}%n", &k, &used) == 1 && used > 0 && k >= 0 && k < ndeps) {
            add = piece[k];
            c += used;
        }
        size_t an = add ? strlen(add) : 1;
        if (len + an < n) memcpy(buf + len, add ? add : c, an);
        if (!add) c++;
        len += an;
    }
    if (n) buf[len < n ? len : n - 1] = '\0';
    return len;
}

/* The text a step's key hashes: every argument (dependency placeholders,
 * whole or inside an argument, stand for the dependency's key), the input
 * contents and the Mantis version. Malloc'd (*len bytes), NULL when out of
 * memory. */
static char *key_text(const flow_graph *g, const char *const *argv, const int *deps, int ndeps, const char *content,
                      size_t *len)
{
    const char *keys[STEP_MAX_DEPS];
    for (int k = 0; k < ndeps && k < STEP_MAX_DEPS; k++) keys[k] = g->s[deps[k]].key;
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    if (!text) return NULL;
    n += (size_t)snprintf(text, cap, "mantis %s|%s|", MANTIS_VERSION, content ? content : "");
    for (int i = 0; argv[i]; i++) {
        size_t need = subst_deps(argv[i], keys, ndeps, NULL, 0) + 2;
        if (n + need >= cap) {
            char *nt = realloc(text, cap = 2 * (n + need));
            if (!nt) { free(text); return NULL; }
            text = nt;
        }
        n += subst_deps(argv[i], keys, ndeps, text + n, cap - n);
        text[n++] = '|';
        text[n] = '\0';
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

/* A step flow_add could not finish: its copied arguments go, it is not
 * counted; -1 (err says why). */
static int drop_step(flow_step *s)
{
    for (int k = 0; k < s->argc; k++) free(s->argv[k]);
    s->argc = 0;
    return -1;
}

int flow_add(flow_graph *g, const char *design, const char *name, const char *ext, const char *const *argv,
             const int *deps, int ndeps, const char *content, mts_err *err)
{
    flow_step *s = new_step(g, err);
    if (!s) return -1;
    snprintf(s->design, sizeof s->design, "%s", design);
    snprintf(s->name, sizeof s->name, "%s", name);
    if (ndeps > STEP_MAX_DEPS) return mts_fail(err, MTS_EINVAL, "flow: too many dependencies"), -1;
    const char *outs[STEP_MAX_DEPS];
    for (int k = 0; k < ndeps; k++) outs[k] = g->s[deps[k]].out;
    for (int i = 0; argv[i]; i++) {
        if (s->argc == STEP_MAX_ARGS - 1) return mts_fail(err, MTS_EINVAL, "flow: too many arguments"), drop_step(s);
        if (subst_deps(argv[i], outs, ndeps, NULL, 0) >= FLOW_ARG) /* flow_step_argv's storage */
            return mts_fail(err, MTS_EINVAL, "%s: results path too long", g->root), drop_step(s);
        if (!(s->argv[s->argc] = strdup(argv[i]))) return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), drop_step(s);
        s->argc++;
    }
    size_t len;
    char *text = key_text(g, argv, deps, ndeps, content, &len);
    if (!text) return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), drop_step(s);
    mts_sha256_hex(text, len, s->key);
    free(text);
    for (int i = 0; i < ndeps && i < STEP_MAX_DEPS; i++) s->dep[s->ndeps++] = deps[i];
    s->ok_exit[s->nok++] = 0;
    char dir[FLOW_PATH];
    if (mts_fs_pathf(dir, sizeof dir, "%s/steps/%s", g->root, design) ||
        mts_fs_pathf(s->out, sizeof s->out, "%s/%s-%.16s.%s", dir, name, s->key, ext))
        return mts_fail(err, MTS_EINVAL, "%s: results path too long", g->root), drop_step(s);
    if (mts_fs_mkdirs(dir, err)) return drop_step(s);
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

/* One flow_run: the graph, the executor and where progress goes. */
typedef struct run_ctx {
    flow_graph *g;
    int jobs, running;
    FILE *progress;   /* NULL: silent */
    double t_start;
    double *t0;       /* per step: when it started */
    int reaper_fd;    /* local: write end of the pipe to the reaper, -1: none */
    int reaper_pid;
    flow_slurm *sl;   /* slurm executor */
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

int flow_step_log(const flow_graph *g, const flow_step *s, char *buf, size_t n)
{
    char logdir[FLOW_PATH];
    if (mts_fs_pathf(logdir, sizeof logdir, "%s/logs/%s", g->root, s->design) ||
        mts_fs_pathf(buf, n, "%s/%s.log", logdir, s->name) || mts_fs_mkdirs(logdir, NULL))
        return -1;
    return 0;
}

void flow_step_argv(const flow_graph *g, const flow_step *s, char **argv, char subst[][FLOW_ARG], int *to_out)
{
    char tmp[FLOW_PATH + 16];
    tmp_path(s, tmp, sizeof tmp);
    const char *outs[STEP_MAX_DEPS];
    for (int k = 0; k < s->ndeps; k++) outs[k] = g->s[s->dep[k]].out;
    *to_out = 1;
    argv[0] = (char *)g->exe;
    for (int i = 0; i < s->argc; i++) {
        if (!strcmp(s->argv[i], "{OUT}")) {
            snprintf(subst[i], FLOW_ARG, "%s", tmp);
            *to_out = 0;
        } else {
            subst_deps(s->argv[i], outs, s->ndeps, subst[i], FLOW_ARG); /* fits: checked by flow_add */
        }
        argv[i + 1] = subst[i];
    }
    argv[s->argc + 1] = NULL;
}

void flow_shell_quote(FILE *f, char *const *argv)
{
    for (int i = 0; argv[i]; i++) {
        fputs(i ? " '" : "'", f);
        for (const char *c = argv[i]; *c; c++)
            if (*c == '\'') fputs("'\\''", f); /* close, an escaped quote, reopen */
            else fputc(*c, f);
        fputc('\'', f);
    }
}

/* Starts a step's command (this mantis binary) in its own process group,
 * stdout and stderr to its log; a command without {OUT} prints its result,
 * so its stdout alone goes to the temporary output. Returns the pid or -1
 * (errno says why). */
static int launch(flow_graph *g, flow_step *s)
{
    char tmp[FLOW_PATH + 16], log[FLOW_PATH + 64];
    tmp_path(s, tmp, sizeof tmp);
    if (flow_step_log(g, s, log, sizeof log)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *argv[STEP_MAX_ARGS + 1];
    static char subst[STEP_MAX_ARGS][FLOW_ARG];
    int to_out;
    flow_step_argv(g, s, argv, subst, &to_out);
    mts_proc_io io = {.log = log, .out = to_out ? tmp : NULL, .own_group = 1}; /* interrupt kills -pid */
    return mts_proc_start(argv, &io);
}

/* The step's own one-line message: the last line of its log that starts
 * with "mantis " (the ones before are progress). 1 when there is one. */
static int step_message(const flow_graph *g, const flow_step *s, char *line, size_t n)
{
    char log[FLOW_PATH + 64], got[1024];
    line[0] = '\0';
    FILE *f = flow_step_log(g, s, log, sizeof log) ? NULL : fopen(log, "r");
    if (!f) return 0;
    while (fgets(got, sizeof got, f))
        if (!strncmp(got, "mantis ", 7)) snprintf(line, n, "%.*s", (int)strcspn(got, "\n"), got);
    fclose(f);
    return line[0] != '\0';
}

/* Why a failure is the environment's and not the inputs' (NULL: the step's
 * own, deterministic), decided on the step's exit status
 * (mts_exit_is_env: MTS_EXIT_ENV, could not start, killed by a signal),
 * never on its text: those failures are not cached, the next run tries
 * again. One guard is not a status: a failure whose log holds no "mantis
 * CMD:" message at all (every command prints one) lost it on its way to
 * the log, so its cause is unknown and it is not cached either. */
static const char *env_failure(const flow_graph *g, const flow_step *s, char *line, size_t n)
{
    if (s->exit_code >= MTS_EXIT_SIGNAL) return snprintf(line, n, "killed by signal %d", s->exit_code - 128), line;
    if (s->exit_code == MTS_EXIT_NOSTART || s->exit_code < 0) return "could not start the step's command";
    int said = step_message(g, s, line, n);
    if (mts_exit_is_env(s->exit_code)) return said ? line : "exit 4 (environment) without a message";
    if (!said) return "it failed without a message in its log (was the log's disk full?)";
    return NULL;
}

/* text into buf, at most max characters: when longer, its start ("mantis
 * CMD:") and the part up to the end of the first marker in it ("...: No space
 * left on device"; the end of text when none is) are kept, and what is cut
 * (the middle of a long path, mostly) shows as "...". */
static void elide(const char *text, const char *const *markers, size_t max, char *buf, size_t n)
{
    size_t len = strlen(text), end = len;
    if (max + 1 > n) max = n - 1;
    if (len <= max || max < 32) {
        snprintf(buf, n, "%.*s", (int)max, text);
        return;
    }
    for (int i = 0; markers[i] && end == len; i++) {
        const char *m = strstr(text, markers[i]);
        if (m) end = (size_t)(m - text) + strlen(markers[i]);
    }
    size_t head = max / 4, win = max - head - 6, start = end > win ? end - win : 0;
    if (start <= head) { /* what is kept begins near the start: only the end is cut */
        snprintf(buf, n, "%.*s...", (int)(max - 3), text);
        return;
    }
    size_t stop = start + win < len ? start + win : len;
    snprintf(buf, n, "%.*s...%.*s%s", (int)head, text, (int)(stop - start), text + start, stop < len ? "..." : "");
}

/* After a step ends (exit_code; or slurm_reason when Slurm ended its job):
 * check and move its output into place, then write its record. */
static void finish(run_ctx *r, int i, int exit_code, const char *slurm_reason)
{
    flow_step *s = &r->g->s[i];
    char tmp[FLOW_PATH + 16], rp[FLOW_PATH + 8], lab[160], why[1024];
    tmp_path(s, tmp, sizeof tmp);
    s->seconds = mts_clock_now() - r->t0[i];
    s->exit_code = slurm_reason ? -1 : exit_code;
    int ok = 0;
    for (int k = 0; k < s->nok && !slurm_reason; k++) ok |= s->exit_code == s->ok_exit[k];
    if (ok && !mts_fs_exists(tmp)) { /* a step that writes nothing still leaves a result */
        FILE *f = fopen(tmp, "w");
        if (f) fclose(f);
    }
    const char *env = NULL;
    if (ok && rename(tmp, s->out) == 0) {
        if (!output_parses(s)) { /* exit 0 with an empty or torn output: a write that failed */
            unlink(s->out);
            ok = 0;
            env = "its output is empty or does not parse";
        } else {
            record_path(s, rp, sizeof rp);
            ok = write_record(rp, s, 1) == MTS_OK;
            if (!ok) env = "cannot write its record";
        }
    } else {
        if (ok) env = "cannot move its output into place";
        ok = 0;
        unlink(tmp);
    }
    if (!ok) {
        if (slurm_reason) env = slurm_reason;
        else if (!env) env = env_failure(r->g, s, why, sizeof why);
        s->env_fail = env != NULL;
        if (!env) {
            fail_path(s, rp, sizeof rp);
            write_record(rp, s, 0);
            set_failed_reason(s);
        } else {
            char shown[101]; /* with the rest, within s->reason */
            elide(env, mts_env_phrases, sizeof shown - 1, shown, sizeof shown);
            snprintf(s->reason, sizeof s->reason, "%s%s, not cached (log: logs/%.40s/%.40s.log)",
                     slurm_reason ? "" : "environment: ", shown, s->design, s->name);
        }
    }
    s->state = ok ? ST_DONE : ST_FAILED;
    if (ok) say(r, "done    %s (exit %d, %.1fs)\n", label(s, lab, sizeof lab), s->exit_code, s->seconds);
    else say(r, "FAILED  %s (%s, %.1fs)\n", label(s, lab, sizeof lab), s->reason, s->seconds);
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

/* Slurm: a pending step with a job on record (an earlier coordinator
 * submitted it) is followed again while the job is queued or running, and
 * finished from its exit record when it ended meanwhile: never submitted
 * twice. Returns 0, or 2 when squeue failed. */
static int adopt_jobs(run_ctx *r)
{
    flow_graph *g = r->g;
    int refreshed = 0;
    char lab[160];
    for (int i = 0; i < g->n; i++) {
        flow_step *s = &g->s[i];
        char jp[FLOW_PATH + 8], reason[256];
        flow_step_file(s, ".job", jp, sizeof jp);
        if (s->state != ST_PENDING) {
            if (s->state == ST_DONE) unlink(jp);
            continue;
        }
        FILE *f = fopen(jp, "r");
        if (!f) continue;
        long job = 0;
        int got = fscanf(f, "job %ld", &job);
        fclose(f);
        if (got != 1 || job <= 0) {
            unlink(jp);
            continue;
        }
        if (!refreshed && flow_slurm_refresh(r->sl)) return 2;
        refreshed = 1;
        s->job = job;
        int code;
        int st = flow_slurm_state(r->sl, s, &code, reason, sizeof reason);
        r->t0[i] = mts_clock_now();
        if (st == 1) {
            s->state = ST_RUNNING;
            r->running++;
            say(r, "follow  %s (slurm job %ld, submitted by an earlier run)\n", label(s, lab, sizeof lab), job);
        } else if (code >= 0) {
            s->state = ST_RUNNING; /* finished meanwhile: take its result */
            finish(r, i, code, NULL);
            unlink(jp);
        } else {
            unlink(jp); /* gone without a result: submit again */
            s->job = 0;
        }
    }
    return 0;
}

/* 1 if name is scratch: "X.tmp" (a step's output in the making) or
 * "X.tmp.PID", "build-...-PID", "build-runtime-PID" (atomic writes and
 * model builds, sim/rtl and synth); *pid gets the owner (0: none named). */
static int is_scratch(const char *name, long *pid)
{
    *pid = 0;
    size_t n = strlen(name);
    if (n > 4 && !strcmp(name + n - 4, ".tmp")) return 1;
    const char *dash = strrchr(name, '-'), *dot = strrchr(name, '.');
    const char *num = NULL;
    if (dot && dot - name >= 4 && !strncmp(dot - 4, ".tmp", 4)) num = dot + 1;
    else if (dash && !strncmp(name, "build-", 6)) num = dash + 1;
    if (!num || !*num || strspn(num, "0123456789") != strlen(num)) return 0;
    *pid = strtol(num, NULL, 10);
    return 1;
}

/* Removes the scratch a killed run left under dir (depth levels): in the
 * results (which this process has locked) everything but the outputs in
 * the making of steps with a Slurm job on record (it may still run), in the
 * shared cache only what belongs to a process that no longer exists on this
 * host. */
static int clean_scratch(const run_ctx *r, const char *dir, int depth, int in_results)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    char path[FLOW_PATH * 2];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        if (mts_fs_pathf(path, sizeof path, "%s/%s", dir, e->d_name)) continue;
        long pid;
        struct stat st;
        int is_dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        /* in the results, scratch is a file named X.tmp or X.tmp.PID (a design may be called build-1) */
        if (is_scratch(e->d_name, &pid) && (!in_results || (!is_dir && strstr(e->d_name, ".tmp")))) {
            int keep = 0;
            if (in_results) { /* a Slurm job on record (this phase's graph may not hold its step yet) */
                char job[FLOW_PATH * 2 + 8];
                snprintf(job, sizeof job, "%.*s.job", (int)(strstr(path, ".tmp") - path), path);
                keep = mts_fs_exists(job);
            } else keep = pid <= 0 || pid == getpid() || mts_proc_alive(pid); /* a zombie has ended */
            if (!keep && mts_fs_rmtree(path) == 0) removed++;
            continue;
        }
        if (depth > 1 && is_dir)
            removed += clean_scratch(r, path, depth - 1, in_results);
    }
    closedir(d);
    return removed;
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

/* Tells the reaper about a step's process group: +pgid started, -pgid reaped. */
static void reaper_note(const run_ctx *r, int pgid)
{
    if (r->reaper_fd < 0) return;
    ssize_t w;
    do w = write(r->reaper_fd, &pgid, sizeof pgid); /* <= PIPE_BUF: atomic */
    while (w < 0 && errno == EINTR);
}

/* Dry run: the step "succeeds" without running, so the steps after it are
 * printed too; its output does not exist, so the flow plans nothing from it. */
static void dry_step(run_ctx *r, flow_step *s)
{
    char *argv[STEP_MAX_ARGS + 1];
    static char subst[STEP_MAX_ARGS][FLOW_ARG];
    int to_out;
    flow_step_argv(r->g, s, argv, subst, &to_out);
    if (r->progress) {
        flow_shell_quote(r->progress, argv);
        fputc('\n', r->progress);
    }
    s->state = ST_DONE;
    s->exit_code = 0;
}

/* One pass over the pending steps: skips the blocked ones and starts the
 * ready ones while the pool has room. Returns 1 if anything changed, -1
 * when the executor refused (g->error). */
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
        if (g->dry_run && g->executor == FLOW_EXEC_LOCAL) {
            dry_step(r, s);
            progress = 1;
            continue;
        }
        if (g->executor == FLOW_EXEC_SLURM) {
            char tmp[FLOW_PATH + 16];
            tmp_path(s, tmp, sizeof tmp);
            unlink(tmp);
            if (flow_slurm_submit(r->sl, s, g->dry_run ? r->progress : NULL)) return -1;
            progress = 1;
            if (g->dry_run) {
                s->state = ST_DONE;
                s->exit_code = 0;
                continue;
            }
            s->state = ST_RUNNING;
            r->t0[i] = mts_clock_now();
            r->running++;
            say(r, "start   %s (slurm job %ld)\n", label(s, lab, sizeof lab), s->job);
            continue;
        }
        int pid = launch(g, s);
        if (pid < 0) {
            s->state = ST_FAILED;
            s->env_fail = 1;
            snprintf(s->reason, sizeof s->reason, "cannot start: %s, not cached", strerror(errno));
            continue;
        }
        reaper_note(r, pid);
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
            reaper_note(r, -pid);
            finish(r, i, mts_proc_exit_code(status), NULL);
            r->running--;
        }
    return 0;
}

/* Slurm: one squeue, then every followed job that ended is finished; sleeps
 * a poll interval when none did. Returns 0, or 2 (g->error). */
static int follow(run_ctx *r)
{
    if (flow_slurm_refresh(r->sl)) return 2;
    int ended = 0;
    for (int i = 0; i < r->g->n; i++) {
        flow_step *s = &r->g->s[i];
        if (s->state != ST_RUNNING) continue;
        int code;
        char reason[256], jp[FLOW_PATH + 8];
        if (flow_slurm_state(r->sl, s, &code, reason, sizeof reason) == 1) continue;
        finish(r, i, code, code < 0 ? reason : NULL);
        flow_step_file(s, ".job", jp, sizeof jp);
        unlink(jp);
        r->running--;
        ended++;
    }
    if (!ended) {
        struct timespec ts = {flow_slurm_poll_seconds(r->sl), 0};
        nanosleep(&ts, NULL); /* a signal ends it early */
    }
    return 0;
}

/* After SIGINT/SIGTERM: kill the running steps' process groups and drop
 * their partial outputs; they stay pending for the next run. Slurm jobs are
 * left to run: the next run follows them. */
static void stop_running(run_ctx *r, int sig)
{
    flow_graph *g = r->g;
    if (g->executor == FLOW_EXEC_SLURM) {
        say(r, "interrupted by signal %d; %d Slurm jobs keep running and the next run follows them "
               "(scancel them to stop them)\n", sig, r->running);
        return;
    }
    for (int i = 0; i < g->n; i++)
        if (g->s[i].state == ST_RUNNING) kill(-g->s[i].pid, SIGTERM);
    for (int i = 0; i < g->n; i++)
        if (g->s[i].state == ST_RUNNING) {
            char tmp[FLOW_PATH + 16];
            mts_proc_wait(g->s[i].pid);
            reaper_note(r, -g->s[i].pid);
            tmp_path(&g->s[i], tmp, sizeof tmp);
            unlink(tmp);
            g->s[i].state = ST_PENDING;
        }
    r->running = 0;
    say(r, "interrupted by signal %d; finished steps are kept, re-run to continue\n", sig);
}

/* The reaper: a process of its own session that holds the read end of a
 * pipe from the coordinator and learns every step's process group. When the
 * pipe closes (the coordinator ended, even by SIGKILL: the kernel closes its
 * end) it kills the groups still listed, so no step outlives the flow.
 * Returns its pid and sets *wfd, or -1. */
static int reaper_start(int *wfd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        setsid(); /* out of the flow's process group: a kill of the group leaves it to clean up */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        int null = open("/dev/null", O_RDWR);
        for (int fd = 0; fd < 3 && null >= 0; fd++) dup2(null, fd);
        long maxfd = sysconf(_SC_OPEN_MAX);
        for (int fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? maxfd : 1024); fd++)
            if (fd != p[0]) close(fd); /* no pipe or lock of the caller stays open here */
        int live[4096], n = 0, g;
        while (read(p[0], &g, sizeof g) == (ssize_t)sizeof g) {
            if (g > 0 && n < 4096) live[n++] = g;
            for (int i = 0; g < 0 && i < n; i++)
                if (live[i] == -g) {
                    live[i] = live[--n];
                    break;
                }
        }
        for (int i = 0; i < n; i++) kill(-live[i], SIGKILL);
        _exit(0);
    }
    close(p[0]);
    *wfd = p[1];
    return (int)pid;
}

int flow_lock(const char *root, mts_err *err)
{
    char path[FLOW_PATH + 16];
    if (mts_fs_mkdirs(root, err)) return -1;
    if (mts_fs_pathf(path, sizeof path, "%s/.lock", root))
        return mts_fail(err, MTS_EINVAL, "%s: results path too long", root), -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return mts_fail(err, MTS_EIO, "%s: cannot open: %s", path, strerror(errno)), -1;
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        close(fd);
        long pid = strtol(buf, NULL, 10);
        if (pid > 0)
            return mts_fail(err, MTS_EIO, "%s is in use by pid %ld (another mantis flow): wait for it, or use "
                            "another --out", root, pid), -1;
        return mts_fail(err, MTS_EIO, "%s is in use by another mantis flow: wait for it, or use another --out",
                        root), -1;
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)n, 0) != n) { /* the pid is only for the message */
    }
    return fd;
}

int flow_run(flow_graph *g, int jobs, FILE *progress)
{
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    run_ctx r = {.g = g, .jobs = jobs, .progress = progress, .t_start = g->t_start ? g->t_start : mts_clock_now(),
                 .reaper_fd = -1};
    r.t0 = calloc((size_t)g->n + 1, sizeof *r.t0);
    int rc = r.t0 ? 0 : (snprintf(g->error, sizeof g->error, "out of memory"), 2);
    if (!rc && g->executor == FLOW_EXEC_SLURM) rc = flow_slurm_open(g, &r.sl);
    if (!rc) load_records(g);
    if (!rc && g->executor == FLOW_EXEC_SLURM && !g->dry_run) rc = adopt_jobs(&r);
    if (!rc && !g->dry_run) {
        char dir[FLOW_PATH + 16], cache[FLOW_PATH];
        mts_fs_pathf(dir, sizeof dir, "%s", g->root);
        int n = clean_scratch(&r, dir, 3, 1);
        /* a job on another node may be writing into the cache: its pid means nothing here */
        if (g->executor == FLOW_EXEC_LOCAL && !mts_fs_cache_dir("", cache, sizeof cache, NULL))
            n += clean_scratch(&r, cache, 3, 0);
        if (n) say(&r, "removed %d temporary files left by an interrupted run\n", n);
        if (g->executor == FLOW_EXEC_LOCAL) r.reaper_pid = reaper_start(&r.reaper_fd);
    }
    while (!rc && !stop_signal) {
        int changed = schedule(&r);
        if (changed < 0) {
            rc = 2;
            break;
        }
        if (stop_signal) break;
        if (r.running == 0) {
            if (!changed) break;
            continue;
        }
        if (g->executor == FLOW_EXEC_SLURM) {
            if ((rc = follow(&r))) break;
        } else if (reap(&r)) {
            break;
        }
    }
    int sig = stop_signal;
    if (sig) stop_running(&r, sig);
    if (r.reaper_fd >= 0) {
        close(r.reaper_fd); /* nothing is listed any more: it just exits */
        if (r.reaper_pid > 0) waitpid(r.reaper_pid, NULL, 0);
    }
    if (r.sl) flow_slurm_close(r.sl);
    free(r.t0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return sig ? 128 + sig : rc;
}
