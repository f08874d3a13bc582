/* flow_exec.c - the flow's step graph: content-hash keys, a process pool,
 * atomic outputs and clean interruption. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flow.h"
#include "mantis/hash.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/nn.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void hexify(const uint8_t h[32], char out[65])
{
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

void flow_file_hash(const char *path, char out[65])
{
    uint8_t *b, h[32];
    size_t n;
    out[0] = '\0';
    if (mts_fs_read(path, &b, &n, NULL)) return;
    mts_sha256(b, n, h);
    free(b);
    hexify(h, out);
}


static int mkdirs(const char *path)
{
    char buf[FLOW_PATH];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* The record beside a step's output: its exit status and time. */
static void record_path(const flow_step *s, char *buf, size_t n) { snprintf(buf, n, "%s.done", s->out); }

/* A failed step's record: the same inputs fail the same way, so a failure is
 * a cached result too (until --retry-failed). */
static void fail_path(const flow_step *s, char *buf, size_t n) { snprintf(buf, n, "%s.failed", s->out); }

static int write_record(const char *path, const flow_step *s)
{
    char line[64];
    size_t n = (size_t)snprintf(line, sizeof line, "exit %d seconds %.3f\n", s->exit_code, s->seconds);
    const void *parts[1] = {line};
    return mts_fs_write_atomic(path, 1, parts, &n, NULL);
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
    if (done < 0) snprintf(s->reason, sizeof s->reason, "exit %d (log: logs/%s/%s.log)", s->exit_code, s->design,
                           s->name);
    return done > 0 ? exists(s->out) : -1;
}

int flow_add(flow_graph *g, const char *design, const char *name, const char *ext, const char *const *argv,
             const int *deps, int ndeps, const char *content, mts_err *err)
{
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        flow_step *ns = realloc(g->s, (size_t)cap * sizeof *ns);
        if (!ns) return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), -1;
        g->s = ns;
        g->cap = cap;
    }
    flow_step *s = &g->s[g->n];
    memset(s, 0, sizeof *s);
    snprintf(s->design, sizeof s->design, "%s", design);
    snprintf(s->name, sizeof s->name, "%s", name);
    /* key: every argument (dependency placeholders stand for the dependency's
     * key), the input contents, and the Mantis version */
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    if (!text) return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), -1;
    len += (size_t)snprintf(text, cap, "mantis %s|%s|", MANTIS_VERSION, content ? content : "");
    for (int i = 0; argv[i]; i++) {
        if (s->argc == STEP_MAX_ARGS - 1) { free(text); return mts_fail(err, MTS_EINVAL, "flow: too many arguments"), -1; }
        s->argv[s->argc++] = strdup(argv[i]);
        const char *piece = argv[i];
        int k;
        if (sscanf(argv[i], "{DEP%d}", &k) == 1 && k >= 0 && k < ndeps) piece = g->s[deps[k]].key;
        size_t need = strlen(piece) + 2;
        if (len + need >= cap) {
            char *nt = realloc(text, cap = 2 * (len + need));
            if (!nt) { free(text); return mts_fail(err, MTS_ENOMEM, "flow: out of memory"), -1; }
            text = nt;
        }
        len += (size_t)snprintf(text + len, cap - len, "%s|", piece);
    }
    uint8_t h[32];
    mts_sha256(text, len, h);
    free(text);
    hexify(h, s->key);
    for (int i = 0; i < ndeps && i < STEP_MAX_DEPS; i++) s->dep[s->ndeps++] = deps[i];
    s->ok_exit[s->nok++] = 0;
    char dir[FLOW_PATH];
    if (mts_fs_pathf(dir, sizeof dir, "%s/steps/%s", g->root, design) ||
        mts_fs_pathf(s->out, sizeof s->out, "%s/%s-%.16s.%s", dir, name, s->key, ext))
        return mts_fail(err, MTS_EINVAL, "%s: results path too long", g->root), -1;
    if (mkdirs(dir)) return mts_fail(err, MTS_EIO, "%s: cannot create directory", dir), -1;
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

static const char *label(const flow_step *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", s->design, s->name);
    return buf;
}

static pid_t launch(flow_graph *g, flow_step *s)
{
    char tmp[FLOW_PATH + 16], logdir[FLOW_PATH], log[FLOW_PATH + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->out);
    if (mts_fs_pathf(logdir, sizeof logdir, "%s/logs/%s", g->root, s->design) ||
        mts_fs_pathf(log, sizeof log, "%s/%s.log", logdir, s->name) || mkdirs(logdir)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *argv[STEP_MAX_ARGS + 1];
    char subst[STEP_MAX_ARGS][FLOW_PATH + 16];
    argv[0] = g->exe;
    for (int i = 0; i < s->argc; i++) {
        int k;
        if (!strcmp(s->argv[i], "{OUT}"))
            snprintf(subst[i], sizeof subst[i], "%s", tmp);
        else if (sscanf(s->argv[i], "{DEP%d}", &k) == 1 && k >= 0 && k < s->ndeps)
            snprintf(subst[i], sizeof subst[i], "%s", g->s[s->dep[k]].out);
        else
            snprintf(subst[i], sizeof subst[i], "%s", s->argv[i]);
        argv[i + 1] = subst[i];
    }
    argv[s->argc + 1] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* own group: an interrupt kills the whole step */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644), to_out = 1;
        for (int i = 0; i < s->argc; i++) to_out &= strcmp(s->argv[i], "{OUT}") != 0;
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (to_out) { /* a command that prints its result: stdout is the output */
            int o = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (o >= 0) {
                dup2(o, 1);
                close(o);
            }
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        execv(g->exe, argv);
        _exit(127);
    }
    if (pid > 0) setpgid(pid, pid);
    return pid;
}

/* After a step exits: move its output into place, then write its record. */
static void finish(flow_graph *g, flow_step *s, int status, double t0, double t_start)
{
    char tmp[FLOW_PATH + 16], rp[FLOW_PATH + 8], lab[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->out);
    s->seconds = now() - t0;
    s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    int ok = 0;
    for (int i = 0; i < s->nok; i++) ok |= s->exit_code == s->ok_exit[i];
    if (ok && !exists(tmp)) { /* a step that writes nothing still leaves a result */
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
    if (!ok) snprintf(s->reason, sizeof s->reason, "exit %d (log: logs/%s/%s.log)", s->exit_code, s->design, s->name);
    printf("[%7.1fs] %-7s %s (exit %d, %.1fs)\n", now() - t_start, ok ? "done" : "FAILED", label(s, lab, sizeof lab),
           s->exit_code, s->seconds);
    fflush(stdout);
    (void)g;
}

int flow_run(flow_graph *g, int jobs)
{
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    double t_start = now(), *t0 = calloc((size_t)g->n + 1, sizeof *t0);
    int running = 0;
    char lab[160];
    for (int i = 0; i < g->n; i++) {
        if (g->s[i].state != ST_PENDING) continue;
        int rec = read_record(&g->s[i]);
        if (rec < 0 && g->retry_failed) {
            char fp[FLOW_PATH + 8];
            fail_path(&g->s[i], fp, sizeof fp);
            unlink(fp);
            rec = 0;
        }
        if (rec) {
            g->s[i].state = rec > 0 ? ST_DONE : ST_FAILED;
            g->s[i].cached = 1;
        }
    }
    for (;;) {
        int progress = 0;
        for (int i = 0; i < g->n && !stop_signal; i++) {
            flow_step *s = &g->s[i];
            if (s->state != ST_PENDING) continue;
            int ready = 1, blocked = 0;
            for (int d = 0; d < s->ndeps; d++) {
                flow_step *dep = &g->s[s->dep[d]];
                if (dep->state == ST_FAILED || dep->state == ST_SKIPPED) {
                    blocked = 1;
                    snprintf(s->reason, sizeof s->reason, "skipped: %s %s", dep->name,
                             dep->state == ST_FAILED ? "failed" : "was skipped");
                } else if (dep->state != ST_DONE) {
                    ready = 0;
                }
            }
            if (!blocked && ready && s->need_pass && g->s[s->dep[s->need_pass - 1]].exit_code != 0) {
                blocked = 1;
                snprintf(s->reason, sizeof s->reason, "skipped: %s did not pass (exit %d)",
                         g->s[s->dep[s->need_pass - 1]].name, g->s[s->dep[s->need_pass - 1]].exit_code);
            }
            if (blocked) {
                s->state = ST_SKIPPED;
                progress = 1;
                printf("[%7.1fs] skip    %s: %s\n", now() - t_start, label(s, lab, sizeof lab), s->reason);
                continue;
            }
            if (!ready || running >= jobs) continue;
            pid_t pid = launch(g, s);
            if (pid < 0) {
                s->state = ST_FAILED;
                snprintf(s->reason, sizeof s->reason, "cannot start: %s", strerror(errno));
                continue;
            }
            s->pid = pid;
            s->state = ST_RUNNING;
            t0[i] = now();
            running++;
            progress = 1;
            printf("[%7.1fs] start   %s\n", now() - t_start, label(s, lab, sizeof lab));
            fflush(stdout);
        }
        if (stop_signal) break;
        if (running == 0) {
            if (!progress) break;
            continue;
        }
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < g->n; i++)
            if (g->s[i].state == ST_RUNNING && g->s[i].pid == pid) {
                finish(g, &g->s[i], status, t0[i], t_start);
                running--;
            }
    }
    int sig = stop_signal;
    if (sig) { /* kill the running steps and drop their partial outputs */
        for (int i = 0; i < g->n; i++)
            if (g->s[i].state == ST_RUNNING) kill(-g->s[i].pid, SIGTERM);
        while (running > 0 && waitpid(-1, NULL, 0) > 0) running--;
        for (int i = 0; i < g->n; i++)
            if (g->s[i].state == ST_RUNNING) {
                char tmp[FLOW_PATH + 16];
                snprintf(tmp, sizeof tmp, "%s.tmp", g->s[i].out);
                unlink(tmp);
                g->s[i].state = ST_PENDING;
            }
        printf("[%7.1fs] interrupted by signal %d; finished steps are kept, re-run to continue\n",
               now() - t_start, sig);
    }
    free(t0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return sig ? 128 + sig : 0;
}
