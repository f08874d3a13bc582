/* status.c - error reporting (see include/mantis/status.h). */
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
