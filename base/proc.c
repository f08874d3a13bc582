/* proc.c - external tools through fork/exec (include/mantis/proc.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mantis/proc.h"

/* In the child: point fd at path (or /dev/null), or exit 127. */
static void redirect(int fd, const char *path, int flags)
{
    int f = open(path ? path : "/dev/null", flags, 0644);
    if (f < 0) _exit(127);
    if (f != fd) {
        dup2(f, fd);
        close(f);
    }
}

int mts_proc_start(char *const argv[], const mts_proc_io *io)
{
    static const mts_proc_io none = {0};
    if (!io) io = &none;
    if (io->echo) {
        fprintf(stderr, "%s:", io->echo);
        for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
        fputc('\n', stderr);
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0 && io->own_group) setpgid(pid, pid); /* both sides: no race with a kill */
        return pid < 0 ? -1 : (int)pid;
    }
    if (io->own_group) setpgid(0, 0);
    redirect(0, NULL, O_RDONLY);
    redirect(1, io->log, O_WRONLY | O_CREAT | (io->log_append ? O_APPEND : O_TRUNC));
    if (dup2(1, 2) < 0) _exit(127);
    if (io->out) redirect(1, io->out, O_WRONLY | O_CREAT | O_TRUNC);
    if (io->cwd && chdir(io->cwd)) _exit(127);
    execvp(argv[0], argv);
    _exit(127);
}

int mts_proc_exit_code(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

int mts_proc_wait(int pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return mts_proc_exit_code(st);
}

/* Keeps the last bytes of a stream: t->text holds *have of them. */
static void tail_add(mts_proc_tail *t, size_t *have, const char *buf, size_t n)
{
    size_t cap = sizeof t->text - 1;
    if (n >= cap) {
        memcpy(t->text, buf + n - cap, cap);
        *have = cap;
    } else {
        if (*have + n > cap) {
            size_t drop = *have + n - cap;
            memmove(t->text, t->text + drop, *have - drop);
            *have -= drop;
        }
        memcpy(t->text + *have, buf, n);
        *have += n;
    }
    for (size_t i = 0; i < *have; i++)
        if (!t->text[i]) t->text[i] = ' '; /* text, whatever the tool printed */
    t->text[*have] = '\0';
}

/* mts_proc_run with io->tail: the child writes into a pipe, this process
 * into the log. */
static int run_through(char *const argv[], const mts_proc_io *io)
{
    mts_proc_tail *t = io->tail;
    t->text[0] = '\0';
    t->log_errno = 0;
    int logfd = -1, p[2];
    if (io->log) {
        logfd = open(io->log, O_WRONLY | O_CREAT | O_CLOEXEC | (io->log_append ? O_APPEND : O_TRUNC), 0644);
        if (logfd < 0) t->log_errno = errno;
    }
    if (pipe2(p, O_CLOEXEC)) {
        if (logfd >= 0) close(logfd);
        return 127;
    }
    if (io->echo) {
        fprintf(stderr, "%s:", io->echo);
        for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
        fputc('\n', stderr);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (io->own_group) setpgid(0, 0);
        redirect(0, NULL, O_RDONLY);
        if (dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0) _exit(127); /* dup2 clears close-on-exec */
        if (io->out) redirect(1, io->out, O_WRONLY | O_CREAT | O_TRUNC);
        if (io->cwd && chdir(io->cwd)) _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pid > 0 && io->own_group) setpgid(pid, pid);
    close(p[1]);
    size_t have = 0;
    char buf[4096];
    ssize_t got;
    while (pid > 0 && (got = read(p[0], buf, sizeof buf)) != 0) { /* until every writer is gone */
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        tail_add(t, &have, buf, (size_t)got);
        for (ssize_t off = 0; logfd >= 0 && !t->log_errno && off < got;) {
            ssize_t w = write(logfd, buf + off, (size_t)(got - off));
            if (w > 0) off += w;
            else if (w == 0 || errno != EINTR) t->log_errno = w < 0 ? errno : ENOSPC; /* then only the tail */
        }
    }
    close(p[0]);
    if (logfd >= 0 && close(logfd) && !t->log_errno) t->log_errno = errno;
    if (pid < 0) return 127;
    int rc = mts_proc_wait(pid);
    return rc < 0 ? 127 : rc;
}

int mts_proc_run(char *const argv[], const mts_proc_io *io)
{
    if (io && io->tail) return run_through(argv, io);
    int pid = mts_proc_start(argv, io);
    if (pid < 0) return 127;
    int rc = mts_proc_wait(pid);
    return rc < 0 ? 127 : rc;
}

int mts_proc_first_line(char *const argv[], char *buf, size_t n)
{
    buf[0] = '\0';
    int fd[2];
    if (pipe(fd)) return 127;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return 127;
    }
    if (pid == 0) {
        close(fd[0]);
        redirect(0, NULL, O_RDONLY);
        redirect(2, NULL, O_WRONLY);
        dup2(fd[1], 1);
        close(fd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t have = 0;
    char tmp[512];
    ssize_t got;
    int line_done = 0;
    while ((got = read(fd[0], tmp, sizeof tmp)) != 0) {
        if (got < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (ssize_t i = 0; i < got && !line_done; i++) { /* keep draining so the child never blocks */
            if (tmp[i] == '\n' || tmp[i] == '\r') line_done = 1;
            else if (have + 1 < n) buf[have++] = tmp[i];
        }
    }
    close(fd[0]);
    if (n) buf[have < n ? have : n - 1] = '\0';
    int rc = mts_proc_wait((int)pid);
    return rc < 0 ? 127 : rc;
}

int mts_proc_log_find(const char *log, const char *const *markers, char *line, size_t cap)
{
    FILE *f = fopen(log, "r");
    if (!f) return 0;
    char buf[2048];
    int found = 0;
    while (!found && fgets(buf, sizeof buf, f))
        for (int i = 0; markers[i]; i++)
            if (strstr(buf, markers[i])) {
                buf[strcspn(buf, "\r\n")] = 0;
                snprintf(line, cap, "%s", buf);
                found = 1;
                break;
            }
    fclose(f);
    return found;
}

int mts_proc_which(const char *tool)
{
    if (strchr(tool, '/')) return access(tool, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) return 0;
    char dir[4096];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (n && n < sizeof dir - 256) {
            snprintf(dir, sizeof dir, "%.*s/%s", (int)n, p, tool);
            if (access(dir, X_OK) == 0) return 1;
        }
        p += n;
        if (*p == ':') p++;
    }
    return 0;
}

int mts_proc_alive(long pid)
{
    if (pid <= 0 || (pid_t)pid != pid) return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1; /* no /proc: it exists, as far as kill says */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the name may hold anything; the state follows the last ')' */
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}
