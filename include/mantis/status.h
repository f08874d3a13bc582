/* status.h - how every Mantis library function reports failure.
 *
 * Functions that can fail return an int: MTS_OK (0) on success, a negative
 * MTS_E* code otherwise, and fill the caller's mts_err with one line of text
 * that names what was wrong (the file, the field, what was expected).
 * The library never prints, exits or aborts on bad input; the CLI prints the
 * message and exits non-zero. */
#ifndef MANTIS_STATUS_H
#define MANTIS_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MTS_OK = 0,
    MTS_EINVAL = -1,   /* bad argument or option value */
    MTS_EIO = -2,      /* file could not be opened, read or written */
    MTS_EFORMAT = -3,  /* file content malformed (magic, version, size, checksum) */
    MTS_ENOMEM = -4,   /* allocation failed */
    MTS_EREFUSED = -5, /* request well-formed but would misrepresent (e.g. non-LUT-able model) */
    MTS_ETOOL = -6     /* an external tool (verilator, yosys, compiler) failed */
};

typedef struct mts_err {
    char msg[512];
} mts_err;

/* Format a message into err (err may be NULL) and return code. */
int mts_fail(mts_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
