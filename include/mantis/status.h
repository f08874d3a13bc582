/* status.h - how every Mantis library function reports failure.
 *
 * Functions that can fail return an int: MTS_OK (0) on success, a negative
 * MTS_E* code otherwise, and fill the caller's mts_err with one line of text
 * that names what was wrong (the file, the field, what was expected).
 * Each code has one meaning, so callers (the CLI's exit status, the flow's
 * step status) decide on the code, never on the message text.
 * The library never prints, exits or aborts on bad input; the CLI prints the
 * message and exits non-zero. */
#ifndef MANTIS_STATUS_H
#define MANTIS_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MTS_OK = 0,
    MTS_EINVAL = -1,      /* bad argument or option value */
    MTS_EIO = -2,         /* file could not be opened, read or written */
    MTS_EFORMAT = -3,     /* file content malformed (magic, version, size, checksum, value out of range) */
    MTS_ENOMEM = -4,      /* allocation failed */
    MTS_ENOTLUT = -5,     /* a multiplier whose mantissa product depends on more than the mantissas:
                             it cannot be represented as a mantissa LUT */
    MTS_ETOOL = -6,       /* an external tool (verilator, yosys, compiler) failed or is missing */
    MTS_EMISMATCH = -7,   /* a check ran and found a difference (e.g. netlist vs RTL) */
    MTS_EUNSUPPORTED = -8, /* well-formed, but outside what this build or flow handles (no OpenBLAS,
                             sequential logic, more than 64 port bits, ...) */
    MTS_ENOSPC = -9,      /* a file system is full or over its quota (ENOSPC, EDQUOT) */
    MTS_ENOTOOL = -10     /* an external tool is missing or could not be started (not on PATH, exec
                             failed) or was killed by a signal: the tool never said anything about
                             the input */
};

/* The classes of failure as process exit statuses: every `mantis` command
 * exits with one of these (docs/reliability.md, "Exit statuses"), so that a
 * caller (the flow, a script) decides on the status, never on the text. */
enum {
    MTS_EXIT_OK = 0,       /* did what was asked */
    MTS_EXIT_MISMATCH = 1, /* a check ran and found a difference (verify, equivalence, cosim) */
    MTS_EXIT_INPUT = 2,    /* could not run because of what was given: a bad option, a malformed or
                              unsupported file or design, a tool that rejected the design. The same
                              inputs fail the same way again: a flow records the failure */
    MTS_EXIT_DIVERGED = 3, /* mantis train: the run diverged (docs/training.md) */
    MTS_EXIT_ENV = 4,      /* could not run because of the environment: a file that cannot be
                              opened, read or written, a full disk, out of memory, a missing or
                              killed tool. A retry may pass: a flow never records it */
    MTS_EXIT_NOSTART = 127, /* the command could not be started (exec failed; the shells' status) */
    MTS_EXIT_SIGNAL = 128  /* 128 + N: killed by signal N */
};

/* The exit status of a library status code: MTS_OK 0, MTS_EMISMATCH 1,
 * EINVAL EFORMAT EUNSUPPORTED ENOTLUT ETOOL 2, EIO ENOMEM ENOSPC ENOTOOL 4
 * (a command that reports MTS_ENOTLUT as a finding exits 1 itself). */
int mts_status_exit(int code);

/* 1 when a process exit status says the environment failed, not the inputs
 * (MTS_EXIT_ENV, MTS_EXIT_NOSTART, killed by a signal, or not an exit
 * status at all (< 0)): such a failure is never cached as a result. */
int mts_exit_is_env(int exit_status);

/* The code of a failed system call's errno: MTS_ENOSPC for ENOSPC and
 * EDQUOT, MTS_ENOMEM for ENOMEM, else MTS_EIO. */
int mts_status_of_errno(int e);

/* For tools that have no status of their own to say why they failed (ld,
 * Verilator, Yosys, make): the code a line of their output means when it
 * names an environment failure, else 0: MTS_ENOSPC for "No space left on
 * device" / "Disk quota exceeded", MTS_ENOMEM for "Cannot allocate memory"
 * / "out of memory" / "virtual memory exhausted", MTS_EIO for
 * "Input/output error" / "Read-only file system" / "Stale file handle" /
 * "Too many open files". The phrases live only here (mts_env_phrases,
 * NULL-terminated, to find such a line in a log). */
int mts_status_of_text(const char *line);
extern const char *const mts_env_phrases[];

typedef struct mts_err {
    char msg[512];
} mts_err;

/* Formats a message into err (err may be NULL) and returns code. */
int mts_fail(mts_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The code's name, e.g. "MTS_EMISMATCH" (for logs and tests). */
const char *mts_status_name(int code);

#ifdef __cplusplus
}
#endif
#endif
