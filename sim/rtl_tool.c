/* rtl_tool.c - running external tools (Verilator, the C++ compiler) without
 * a shell, so paths with spaces or quotes need no escaping, and small file
 * system helpers for the RTL cache. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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

int rtl_run(char *const argv[], const char *log_path, int verbose)
{
    if (verbose) {
        fprintf(stderr, "mantis rtl:");
        for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
        fprintf(stderr, "\n");
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
            close(nul);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return -1;
}

char *rtl_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
        }
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) return NULL;
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

void rtl_log_first_error(const char *log_path, char *buf, size_t n)
{
    buf[0] = '\0';
    char *text = rtl_read_file(log_path, NULL);
    if (!text) return;
    const char *pick = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "%Error", 6)) {
            pick = line;
            break;
        }
        if (!pick && line[strspn(line, " \t")] != '\0') pick = line;
        /* a compiler's "error:" line beats the first line of context */
        if (strstr(line, "error:") && (!pick || !strstr(pick, "error:"))) pick = line;
    }
    if (pick) {
        if (!strncmp(pick, "%Error: ", 8)) pick += 8;
        else if (!strncmp(pick, "%Error", 6)) pick += 6;
        snprintf(buf, n, "%s", pick);
    }
    free(text);
}

int rtl_fmt(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int rtl_mkdirs(const char *path)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void rtl_rmtree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Runs fn on n threads (t = 0..n-1); n = 1 runs inline. */
typedef struct {
    void (*fn)(void *, int);
    void *ctx;
    int t;
} par_arg;

static void *par_main(void *p)
{
    par_arg *a = p;
    a->fn(a->ctx, a->t);
    return NULL;
}

void rtl_par_run(int n, void (*fn)(void *ctx, int t), void *ctx)
{
    pthread_t th[RTL_NINST];
    par_arg arg[RTL_NINST];
    int started[RTL_NINST] = {0};
    if (n > RTL_NINST) n = RTL_NINST;
    for (int t = 1; t < n; t++) {
        arg[t] = (par_arg){fn, ctx, t};
        started[t] = pthread_create(&th[t], NULL, par_main, &arg[t]) == 0;
        if (!started[t]) fn(ctx, t); /* no thread: do its share here */
    }
    fn(ctx, 0);
    for (int t = 1; t < n; t++)
        if (started[t]) pthread_join(th[t], NULL);
}
