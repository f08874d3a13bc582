/* status.c - error reporting (include/mantis/status.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mantis/status.h"

int mts_fail(mts_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *mts_status_name(int code)
{
    switch (code) {
    case MTS_OK: return "MTS_OK";
    case MTS_EINVAL: return "MTS_EINVAL";
    case MTS_EIO: return "MTS_EIO";
    case MTS_EFORMAT: return "MTS_EFORMAT";
    case MTS_ENOMEM: return "MTS_ENOMEM";
    case MTS_ENOTLUT: return "MTS_ENOTLUT";
    case MTS_ETOOL: return "MTS_ETOOL";
    case MTS_EMISMATCH: return "MTS_EMISMATCH";
    case MTS_EUNSUPPORTED: return "MTS_EUNSUPPORTED";
    case MTS_ENOSPC: return "MTS_ENOSPC";
    case MTS_ENOTOOL: return "MTS_ENOTOOL";
    default: return "MTS_E?";
    }
}

int mts_status_exit(int code)
{
    switch (code) {
    case MTS_OK: return MTS_EXIT_OK;
    case MTS_EMISMATCH: return MTS_EXIT_MISMATCH;
    case MTS_EIO:
    case MTS_ENOMEM:
    case MTS_ENOSPC:
    case MTS_ENOTOOL: return MTS_EXIT_ENV;
    default: return MTS_EXIT_INPUT; /* EINVAL EFORMAT EUNSUPPORTED ENOTLUT ETOOL */
    }
}

int mts_exit_is_env(int st)
{
    return st == MTS_EXIT_ENV || st == MTS_EXIT_NOSTART || st >= MTS_EXIT_SIGNAL || st < 0;
}

int mts_status_of_errno(int e)
{
    return e == ENOSPC || e == EDQUOT ? MTS_ENOSPC : e == ENOMEM ? MTS_ENOMEM : MTS_EIO;
}

/* What tools print (strerror's English for the errno, and the compilers'
 * own words), and the code each means: two columns of one table. */
const char *const mts_env_phrases[] = {
    "No space left on device", "Disk quota exceeded",                                        /* MTS_ENOSPC */
    "Cannot allocate memory", "out of memory", "virtual memory exhausted",                   /* MTS_ENOMEM */
    "Input/output error", "Read-only file system", "Stale file handle", "Too many open files", /* MTS_EIO */
    NULL};
static const int env_codes[] = {MTS_ENOSPC, MTS_ENOSPC, MTS_ENOMEM, MTS_ENOMEM, MTS_ENOMEM,
                                MTS_EIO,    MTS_EIO,    MTS_EIO,    MTS_EIO};
_Static_assert(sizeof env_codes / sizeof env_codes[0] + 1 == sizeof mts_env_phrases / sizeof mts_env_phrases[0],
               "one code per phrase");

int mts_status_of_text(const char *line)
{
    for (int i = 0; line && mts_env_phrases[i]; i++)
        if (strstr(line, mts_env_phrases[i])) return env_codes[i];
    return 0;
}
