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
    MTS_EUNSUPPORTED = -8 /* well-formed, but outside what this build or flow handles (no OpenBLAS,
                             sequential logic, more than 64 port bits, ...) */
};

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
