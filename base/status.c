/* status.c - error reporting (include/mantis/status.h). */
#include <stdarg.h>
#include <stdio.h>

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
    default: return "MTS_E?";
    }
}
