/* proc.h - running external tools (Verilator, the C++ compiler, Yosys,
 * gnuplot, npm, the flow's step commands) with fork/exec and an argv
 * vector: never through a shell, so no file name or design name can become
 * a command. Output goes to a log file that callers quote on failure. */
#ifndef MANTIS_PROC_H
#define MANTIS_PROC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The end of what a child printed, as mts_proc_run saw it pass on its way
 * to the log: a log on a full disk loses the very message that says so
 * ("ld: final link failed: No space left on device"), this copy does not. */
typedef struct mts_proc_tail {
    char text[2048]; /* the last bytes of its stdout and stderr, NUL-terminated */
    int log_errno;   /* 0, or why the log could not be opened or written whole */
} mts_proc_tail;

/* Where a child's streams go. stdin is always /dev/null. */
typedef struct mts_proc_io {
    const char *cwd;      /* working directory; NULL: the caller's */
    const char *log;      /* stdout and stderr; NULL: /dev/null */
    int log_append;       /* 1: append to log, 0: truncate it */
    const char *out;      /* non-NULL: stdout alone goes here (truncated) */
    int own_group;        /* 1: the child leads a new process group, so killing
                             -pid stops everything it started */
    const char *echo;     /* non-NULL: print "ECHO: argv..." to stderr first */
    mts_proc_tail *tail;  /* non-NULL (mts_proc_run only): stdout and stderr
                             pass through this process, which appends them to
                             log and keeps their end here */
} mts_proc_io;

/* Starts argv[0] (looked up in PATH unless it contains '/'). io may be
 * NULL (everything to /dev/null). Returns the child's pid, or -1 when fork
 * failed (an exec failure shows as exit status 127). */
int mts_proc_start(char *const argv[], const mts_proc_io *io);

/* The exit code of a waitpid status: the exit status, or 128 + the signal. */
int mts_proc_exit_code(int wstatus);

/* Waits for pid (EINTR retried); its exit code as above, -1 if it could not
 * be waited for. */
int mts_proc_wait(int pid);

/* Start + wait. The exit code; 127 when the tool could not be started.
 * With io->tail, the child's output is copied to the log by this process
 * (a log that cannot be opened or written does not stop the child; tail
 * says so) and its end is kept in io->tail. */
int mts_proc_run(char *const argv[], const mts_proc_io *io);

/* Runs argv with stdout to a pipe and copies its first line (no newline) into
 * buf; "" when it printed nothing or could not run. Returns the exit code. */
int mts_proc_first_line(char *const argv[], char *buf, size_t n);

/* The first line of log containing one of markers (NULL-terminated list),
 * without its newline. Returns 1 when found, else 0 (line untouched). */
int mts_proc_log_find(const char *log, const char *const *markers, char *line, size_t cap);

/* 1 if tool is an executable in PATH (or, with a '/', that file), else 0. */
int mts_proc_which(const char *tool);

/* 1 if a process with this pid runs on this host, 0 if none does. A zombie
 * (ended, not yet reaped by its parent: a killed flow's steps until init
 * gets to them, or for ever under a container's init that never reaps) has
 * ended: 0. Whoever owns scratch named after a pid asks this before
 * removing it. */
int mts_proc_alive(long pid);

#ifdef __cplusplus
}
#endif
#endif
