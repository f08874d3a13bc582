/* cli_util.h - small helpers shared by the CLI commands. */
#ifndef MANTIS_CLI_UTIL_H
#define MANTIS_CLI_UTIL_H

#include <stdint.h>

/* 1 if s is "--help" or "-h". */
int mts_is_help(const char *s);

/* Prints "mantis CMD: message" on one line to stderr; returns 2. */
int mts_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a hex FP32 bit pattern ("3f800000" or "0x3F800000"); 0 on success. */
int mts_parse_hex32(const char *s, uint32_t *out);

/* Parses a decimal integer in [lo, hi]; 0 on success. */
int mts_parse_int(const char *s, long lo, long hi, long *out);

#endif
