/* rtl_internal.h - pieces shared by the sim/rtl files (not public API):
 * the XML reader for Verilator's --xml-only output, tool invocation, design
 * detection, the build cache, and the loaded handle. */
#ifndef MANTIS_RTL_INTERNAL_H
#define MANTIS_RTL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mantis/par.h"
#include "mantis/fs.h"
#include "mantis/rtl.h"

/* ---- xml.c: a minimal reader for Verilator's XML (elements, attributes,
 * entities; no DTD, no mixed text needed). */
typedef struct rtl_xml_node {
    char *name;
    int parent;  /* index of the enclosing element, -1 at the root */
    int depth;
    int nattr;
    char **attr; /* 2*nattr strings: key, value, key, value ... */
} rtl_xml_node;

typedef struct rtl_xml {
    rtl_xml_node *node;
    int n, cap;
} rtl_xml;

int rtl_xml_parse(const char *text, rtl_xml *doc, const char *what, mts_err *err);
const char *rtl_xml_attr(const rtl_xml_node *n, const char *key);
void rtl_xml_free(rtl_xml *doc);

/* ---- tool.c: which tools run (running them is mts_proc_run's). */
/* The first "%Error" line of a Verilator log (without the prefix), or a
 * compiler's "error:" line, or the first non-empty line; "" when empty. A
 * line naming a full disk (or quota) comes before all of them. */
void rtl_log_first_error(const char *log_path, char *buf, size_t n);
/* The same, of text (split in place). */
void rtl_text_first_error(char *text, char *buf, size_t n);
/* The Verilator executable: $MANTIS_VERILATOR or "verilator". */
const char *rtl_verilator(void);
/* The C++ compiler: $MANTIS_CXX, else $CXX, else "g++". */
const char *rtl_cxx(void);
/* Appends the options every Verilator run of a design takes to argv[n..]:
 * warnings not fatal, several tops allowed, -y the design's directory, and
 * when top is non-NULL --top-module top with each of the nparams parameter
 * overrides as -G (formatted into gbuf). Returns the new n; argv needs
 * 6 + nparams more slots. */
int rtl_verilator_common(char **argv, int n, char gbuf[][300], int nparams, const char *const *params,
                         const char *dir, const char *top);


/* ---- detect.c: which drop-in shape the design has. */
typedef struct rtl_design {
    mts_rtl_info info;
    char path[1024];          /* the design file as given */
    char dir[1024];           /* its directory */
    char vpath[1100];         /* the design file as Verilator is given it (a link in the scratch
                                 directory when the real path is not mts_rtl_path_plain) */
    char vdir[1100];          /* its directory as Verilator is given it (-y) */
    int nvparams;             /* the overrides passed to Verilator as -G: opts->param less a
                                 MANTIS_SIGNED the top does not declare as a parameter */
    const char *vparam[MTS_RTL_MAX_PARAMS];
    int sign_param;           /* --param MANTIS_SIGNED=V: V (0/1), else -1 */
    int nfiles;
    char files[32][1024];     /* every source file Verilator read, for the hash */
} rtl_design;

/* Runs Verilator's front end twice (find the top, then elaborate it with the
 * overrides) and fills d. tmpdir is a scratch directory. */
int rtl_detect(const mts_rtl_opts *o, const char *tmpdir, rtl_design *d, mts_err *err);

/* ---- build.c: the shared object and its cache. */
/* Finds d's model in the cache or builds it there; fills d->info.hash,
 * so_path and cache_hit. A read-only cache that holds the model works:
 * nothing is written unless a build is needed. */
int rtl_build(const mts_rtl_opts *o, rtl_design *d, mts_err *err);

/* ---- the shim every generated model exports (ABI version 1). */
#define RTL_SHIM_ABI 1
typedef void *(*rtl_shim_new_fn)(void);
typedef void (*rtl_shim_free_fn)(void *h);
typedef void (*rtl_shim_eval_fn)(void *h, size_t n, const uint32_t *x0, const uint32_t *x1, uint64_t *y);
typedef void (*rtl_shim_grid_fn)(void *h, uint32_t i0, uint32_t n0, uint32_t or0, int bits1, uint32_t or1,
                                 uint64_t *y);


struct mts_rtl {
    mts_rtl_info info;
    void *dl;
    rtl_shim_new_fn snew;
    rtl_shim_free_fn sfree;
    rtl_shim_eval_fn seval;
    rtl_shim_grid_fn sgrid;
    struct {
        void *h;
        pthread_mutex_t mu;
    } inst[MTS_PAR_WORKERS];
};

#endif
