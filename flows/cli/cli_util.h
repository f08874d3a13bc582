/* cli_util.h - small helpers shared by the CLI commands. */
#ifndef MANTIS_CLI_UTIL_H
#define MANTIS_CLI_UTIL_H

#include <stdint.h>

#include "mantis/parse.h" /* mts_parse_int, _u64, _double, _hex32, _int_list */
#include "mantis/status.h"

/* 1 if s is "--help" or "-h". */
int mts_is_help(const char *s);

/* Prints "mantis CMD: message" on one line to stderr; returns 2. */
int mts_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The exit status for a library status code: 0 for MTS_OK, 1 for
 * MTS_EMISMATCH (a check ran and found a difference), 2 for anything that
 * kept the command from running. Decided on the code, never the message. */
int mts_cli_exit(int rc);

/* The 1-minute load average (-1 if unknown), so a reader can tell a busy
 * machine's benchmark figures. */
double mts_cli_loadavg(void);

/* Called with a command's exit status when it returns: flushes stdout and
 * turns a failed write (ENOSPC, EIO, EPIPE) into one line and exit 2. */
int mts_cli_finish(const char *cmd, int rc);

#endif
