/* cache.c - the synth cache: the content key of a run, the synth.txt
 * metadata an entry keeps besides its netlist, and publishing a finished
 * work directory as the entry (or keeping a failed one for its logs); with
 * the path helper the entry's files are named with. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mantis/fs.h"
#include "mantis/hash.h"
#include "mantis/proc.h"
#include "synth_int.h"

int synth_path(char path[PATH_MAX], const char *dir, const char *name, mts_err *err)
{
    if (mts_fs_pathf(path, PATH_MAX, "%s/%s", dir, name))
        return mts_fail(err, MTS_EINVAL, "%s/%s: path too long (over %d characters)", dir, name, PATH_MAX - 1);
    return MTS_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_verilog(const char *name)
{
    size_t l = strlen(name);
    return (l > 2 && !strcmp(name + l - 2, ".v")) || (l > 3 && !strcmp(name + l - 3, ".sv"));
}

/* The .v/.sv file names of dir, sorted (caller frees each and the list). */
static int list_sources(const char *dir, char ***out, int *count, mts_err *err)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return mts_fail(err, MTS_EIO, "%s: cannot list: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, rc = MTS_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (!is_verilog(e->d_name)) continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (nn) names = nn;
        if (!nn || !(names[n] = strdup(e->d_name))) rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", dir);
        else n++;
    }
    closedir(d);
    if (!rc) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out = names;
    *count = n;
    return rc;
}

/* Every Verilog source in the design's directory can be a submodule (Yosys'
 * -libdir / Verilator's -y), so all of them enter the key, in name order. */
static int hash_dir_sources(mts_hash128 *h, const char *dir, mts_err *err)
{
    char **names;
    int n;
    int rc = list_sources(dir, &names, &n, err);
    for (int i = 0; i < n && !rc; i++) {
        char p[PATH_MAX];
        mts_hash128_str(h, names[i]);
        rc = synth_path(p, dir, names[i], err);
        if (!rc) rc = mts_hash128_file(h, p, err);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int synth_key(const synth_ctx *c, char hex[33], mts_err *err)
{
    const mts_synth_opts *o = c->o;
    mts_hash128 h;
    mts_hash128_init(&h);
    mts_hash128_str(&h, SYNTH_FLOW_VERSION);
    mts_hash128_str(&h, c->base);
    int rc = mts_hash128_file(&h, c->design, err);
    if (!rc) rc = hash_dir_sources(&h, c->design_dir, err);
    for (int i = 0; !rc && i < o->nparams; i++) mts_hash128_str(&h, o->param[i]);
    const char *flow_files[] = {c->liberty, c->tpl, c->cells_v, c->harness, c->adders, c->equiv_vlt};
    for (int i = 0; !rc && i < 6; i++) rc = mts_hash128_file(&h, flow_files[i], err);
    if (rc) return rc;
    /* The timing script and the versions of the tools that make the numbers
     * (a tool that is not there reads ""; the run then stops at its check). */
    synth_sta_hash(&h);
    char *tools[][3] = {{"yosys", "-V", NULL}, {"sta", "-version", NULL}};
    for (int i = 0; i < 2; i++) {
        char version[256];
        mts_proc_first_line(tools[i], version, sizeof version);
        mts_hash128_str(&h, version);
    }
    uint64_t extra[2] = {o->eq_samples, (uint64_t)(o->no_equiv != 0)};
    mts_hash128_add(&h, extra, sizeof extra);
    mts_hash128_hex(&h, hex);
    return MTS_OK;
}

int synth_meta_save(const char *dir, const mts_synth_result *r, mts_err *err)
{
    char text[2048], path[PATH_MAX];
    snprintf(text, sizeof text,
             "top %s\narea_um2 %.6f\ndelay_ps %.4f\ndelay_from %s\ndelay_to %s\neq_checked %d\neq_exhaustive %d\n"
             "eq_vectors %llu\n",
             r->top, r->area_um2, r->delay_ps, r->delay_from, r->delay_to, r->eq_checked, r->eq_exhaustive,
             (unsigned long long)r->eq_vectors);
    int rc = synth_path(path, dir, "synth.txt", err);
    return rc ? rc : mts_fs_write_text(path, text, err);
}

int synth_meta_load(const char *dir, mts_synth_result *r)
{
    char path[PATH_MAX], line[512];
    if (synth_path(path, dir, "synth.txt", NULL)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        char key[64], val[400];
        if (sscanf(line, "%63s %399s", key, val) != 2) continue;
        if (!strcmp(key, "top")) snprintf(r->top, sizeof r->top, "%.*s", (int)sizeof r->top - 1, val), got |= 1;
        else if (!strcmp(key, "area_um2")) r->area_um2 = atof(val), got |= 2;
        else if (!strcmp(key, "delay_ps")) r->delay_ps = atof(val), got |= 4;
        else if (!strcmp(key, "delay_from")) snprintf(r->delay_from, sizeof r->delay_from, "%.63s", val);
        else if (!strcmp(key, "delay_to")) snprintf(r->delay_to, sizeof r->delay_to, "%.63s", val);
        else if (!strcmp(key, "eq_checked")) r->eq_checked = atoi(val), got |= 8;
        else if (!strcmp(key, "eq_exhaustive")) r->eq_exhaustive = atoi(val);
        else if (!strcmp(key, "eq_vectors")) r->eq_vectors = strtoull(val, NULL, 10);
    }
    fclose(f);
    return got == 15;
}

int synth_publish(synth_ctx *c, mts_synth_result *r, mts_err *err)
{
    char failed[PATH_MAX];
    if (!mts_fs_pathf(failed, sizeof failed, "%s.failed", c->entry))
        mts_fs_rmtree(failed); /* an earlier failure's logs */
    if (rename(c->work, c->entry) == 0) return MTS_OK;
    int e = errno; /* another process won the race: use its entry */
    mts_fs_rmtree(c->work);
    if (!synth_meta_load(c->entry, r))
        return mts_fail(err, MTS_EIO, "%s: cannot install cache entry: %s", c->entry, strerror(e));
    return MTS_OK;
}

void synth_keep_failed(synth_ctx *c, mts_err *err)
{
    struct stat sb;
    char failed[PATH_MAX];
    if (!c->work[0] || stat(c->work, &sb) != 0) return;
    if (mts_fs_pathf(failed, sizeof failed, "%s.failed", c->entry)) return; /* leave it where the message says */
    mts_fs_rmtree(failed);
    if (rename(c->work, failed) != 0 || !err) return;
    char *at = strstr(err->msg, c->work);
    if (at) { /* the message names the log inside the work directory */
        char msg[sizeof err->msg];
        int n = snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - err->msg), err->msg, failed, at + strlen(c->work));
        if (n > 0 && (size_t)n < sizeof msg) memcpy(err->msg, msg, sizeof msg);
    }
}
