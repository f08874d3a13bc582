/* parse.h - the one strict parser of numbers and number lists written as
 * text: command-line options, flow configuration values, specs. Every
 * function takes the whole string or nothing: no leading or trailing
 * spaces, no '+', no trailing text ("5x"), no overflow, no NaN
 * (docs/reliability.md, "Options"). Callers print their own one-line error
 * naming the option and the accepted range. */
#ifndef MANTIS_PARSE_H
#define MANTIS_PARSE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A decimal integer in [lo, hi]: an optional '-', digits, nothing else.
 * 0 on success (*out set), -1 otherwise (*out untouched). */
int mts_parse_int(const char *s, long lo, long hi, long *out);

/* An unsigned 64-bit integer: decimal digits, or "0x" and hex digits, that
 * fits; no sign. 0 on success, -1 otherwise. */
int mts_parse_u64(const char *s, uint64_t *out);

/* A hex FP32 bit pattern ("3f800000" or "0x3F800000": 1 to 8 hex digits).
 * 0 on success, -1 otherwise. */
int mts_parse_hex32(const char *s, uint32_t *out);

/* A decimal floating-point number in [lo, hi]: an optional '-', then a
 * digit or '.' and the rest as strtod reads it (fraction, exponent "1e-3");
 * not "inf" or "nan", no hex floats, not out of double's range.
 * 0 on success, -1 otherwise. */
int mts_parse_double(const char *s, double lo, double hi, double *out);

/* Flags of mts_parse_int_list. */
enum {
    MTS_LIST_SPACES = 1 /* spaces and tabs around an item are allowed (a configuration file's "1, 2, 3") */
};

/* A comma-separated list of integers in [lo, hi], each as mts_parse_int
 * takes it, into out[0..max). No empty items ("1,,2", "1,", ""). Nothing is
 * dropped: returns the number of items (1..max), -1 when an item is
 * malformed or out of range (its 0-based index in *bad when bad is not
 * NULL), -2 when the list holds more than max items. */
int mts_parse_int_list(const char *s, int flags, long lo, long hi, long *out, int max, int *bad);

#ifdef __cplusplus
}
#endif
#endif
