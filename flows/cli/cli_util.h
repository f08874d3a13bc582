/* cli_util.h - small helpers shared by the CLI commands. */
#ifndef MANTIS_CLI_UTIL_H
#define MANTIS_CLI_UTIL_H

#include <stdint.h>

#include "mantis/status.h"

/* 1 if s is "--help" or "-h". */
int mts_is_help(const char *s);

/* Prints "mantis CMD: message" on one line to stderr; returns 2. */
int mts_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The exit status for a library status code: 0 for MTS_OK, 1 for
 * MTS_EMISMATCH (a check ran and found a difference), 2 for anything that
 * kept the command from running. Decided on the code, never the message. */
int mts_cli_exit(int rc);

/* Parses a hex FP32 bit pattern ("3f800000" or "0x3F800000"); 0 on success. */
int mts_parse_hex32(const char *s, uint32_t *out);

/* Parses a decimal integer in [lo, hi]: the whole string, an optional '-',
 * digits, nothing else (no spaces, no '+', no trailing text); 0 on success. */
int mts_parse_int(const char *s, long lo, long hi, long *out);

/* The 1-minute load average (-1 if unknown), so a reader can tell a busy
 * machine's benchmark figures. */
double mts_cli_loadavg(void);

/* Parses an unsigned 64-bit integer (decimal, 0x hex or 0 octal, as strtoull
 * with base 0) that starts with a digit, has nothing after it and fits; 0 on
 * success. */
int mts_parse_u64(const char *s, uint64_t *out);

/* Parses a decimal floating-point number in [lo, hi] (the whole string; no
 * leading spaces, no trailing text, not NaN); 0 on success. */
int mts_parse_double(const char *s, double lo, double hi, double *out);

/* Called with a command's exit status when it returns: flushes stdout and
 * turns a failed write (ENOSPC, EIO, EPIPE) into one line and exit 2. */
int mts_cli_finish(const char *cmd, int rc);

#endif
