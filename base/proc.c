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

int mts_proc_run(char *const argv[], const mts_proc_io *io)
{
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
