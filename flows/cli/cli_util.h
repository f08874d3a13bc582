/* cli_util.h - small helpers shared by the CLI commands. */
#ifndef MANTIS_CLI_UTIL_H
#define MANTIS_CLI_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "mantis/parse.h" /* mts_parse_int, _u64, _double, _hex32, _int_list */
#include "mantis/status.h"

/* 1 if s is "--help" or "-h". */
int cli_is_help(const char *s);

/* Prints "mantis CMD: message" on one line to stderr; returns 2
 * (MTS_EXIT_INPUT: for errors in the options and arguments). */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The exit status for a library status code (mts_status_exit, status.h):
 * 0 MTS_OK, 1 MTS_EMISMATCH, 2 the input's fault, 4 the environment's.
 * Decided on the code, never the message. */
int cli_exit(int rc);

/* A library call failed with code: prints "mantis CMD: err->msg" and
 * returns the exit status of code. */
int cli_fail(const char *cmd, int code, const mts_err *err);

/* The one convention for a command's machine-readable outputs (--json
 * OUT|-, --csv OUT|-): fn(f, ctx) goes to OUT atomically
 * (mts_fs_write_stream), or to stdout when OUT is "-". 0, or the exit
 * status of the one-line error it printed. */
int cli_output(const char *cmd, const char *out, void (*fn)(FILE *f, void *ctx), void *ctx);

/* Where a command prints its text for people: stderr when one of its
 * outputs is "-" (stdout then holds that output alone), else stdout. */
FILE *cli_text(const char *out1, const char *out2);

/* The 1-minute load average (-1 if unknown), so a reader can tell a busy
 * machine's benchmark figures. */
double cli_loadavg(void);

/* 1 when the machine looks idle enough for OpenMP's idle threads to spin
 * briefly: the tasks of other processes running now (/proc/loadavg's fourth
 * field less this process's running threads) leave a second core of the
 * CPUs this process may use free; the least of five looks 2 ms apart (the
 * process that started this one may still be running for a moment). A
 * snapshot, not the 1-minute average, which still counts the runs that just
 * ended (a benchmark's previous step). python/mantis/_lib.py's _idle_core()
 * is the same rule (it must decide before libgomp loads). */
int cli_idle_core(void);
#define CLI_OMP_BRIEF_SPIN "10000" /* GOMP_SPINCOUNT then (main.c) */

/* Called with a command's exit status when it returns: flushes stdout and
 * turns a failed write (ENOSPC, EIO, EPIPE) into one line and exit 4
 * (MTS_EXIT_ENV) when the command had succeeded. */
int cli_finish(const char *cmd, int rc);

#endif
