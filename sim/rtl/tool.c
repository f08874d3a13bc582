/* tool.c - which Verilator and compiler the RTL bridge runs, and the first
 * error of their logs (running them is base/proc.c's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "rtl_internal.h"

const char *rtl_verilator(void)
{
    const char *v = getenv("MANTIS_VERILATOR");
    return v && *v ? v : "verilator";
}

const char *rtl_cxx(void)
{
    const char *v = getenv("MANTIS_CXX");
    if (v && *v) return v;
    v = getenv("CXX");
    return v && *v ? v : "g++";
}

void rtl_text_first_error(char *text, char *buf, size_t n)
{
    buf[0] = '\0';
    const char *pick = NULL, *full = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        /* the cause, when the environment is: "ld: final link failed: No space left on device" */
        if (!full && mts_status_of_text(line)) full = line;
        if (pick && !strncmp(pick, "%Error", 6)) continue;
        if (!strncmp(line, "%Error", 6)) {
            pick = line;
            continue;
        }
        if (!pick && line[strspn(line, " \t")] != '\0') pick = line;
        /* a compiler's "error:" line beats the first line of context */
        if (strstr(line, "error:") && (!pick || !strstr(pick, "error:"))) pick = line;
    }
    if (full) pick = full;
    if (pick) {
        if (!strncmp(pick, "%Error: ", 8)) pick += 8;
        else if (!strncmp(pick, "%Error", 6)) pick += 6;
        snprintf(buf, n, "%s", pick);
    }
}

void rtl_log_first_error(const char *log_path, char *buf, size_t n)
{
    buf[0] = '\0';
    uint8_t *raw;
    size_t len;
    if (mts_fs_read(log_path, &raw, &len, NULL)) return;
    rtl_text_first_error((char *)raw, buf, n);
    free(raw);
}

int mts_rtl_path_plain(const char *path)
{
    if (!path || !*path) return 0;
    for (const char *s = path; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '-' && (s == path || s[-1] == '/')) return 0;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) continue;
        if (!strchr("._/+,=@%:~-", c)) return 0;
    }
    return 1;
}

int rtl_verilator_common(char **argv, int n, char gbuf[][300], int nparams, const char *const *params,
                         const char *dir, const char *top)
{
    argv[n++] = "-Wno-fatal";
    argv[n++] = "-Wno-MULTITOP";
    argv[n++] = "-y";
    argv[n++] = (char *)dir;
    if (top) {
        argv[n++] = "--top-module";
        argv[n++] = (char *)top;
        for (int i = 0; i < nparams; i++) {
            snprintf(gbuf[i], 300, "-G%s", params[i]);
            argv[n++] = gbuf[i];
        }
    }
    return n;
}
