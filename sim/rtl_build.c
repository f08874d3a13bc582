/* rtl_build.c - Verilates a detected design into a shared object with a
 * generated extern "C" shim, and caches it by content hash.
 *
 * Cache layout (root = opts->cache_dir, else $MANTIS_CACHE/rtl, else
 * $XDG_CACHE_HOME/mantis/rtl, else ~/.cache/mantis/rtl):
 *   root/runtime-<h>/verilated*.o  Verilator's runtime, compiled once per
 *                                  Verilator version and compiler
 *   root/<hash>/model.so           one design: sources + top + parameters +
 *                                  Mantis, Verilator and shim versions
 * Builds happen in root/build-<hash>-<pid> and are renamed into place under
 * an flock, so concurrent processes never see a half-built model. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "rtl_internal.h"

/* Compile flags of the runtime and of every model; part of the hashes. */
#define RTL_CXXFLAGS "-O2", "-fPIC", "-fvisibility=hidden", "-w"

/* 128-bit FNV-1a (two 64-bit lanes with different bases): a cache key, not a
 * security boundary. */
typedef struct {
    uint64_t h[2];
} hasher;

static void hash_init(hasher *s)
{
    s->h[0] = 0xcbf29ce484222325ull;
    s->h[1] = 0x84222325cbf29ce4ull;
}

static void hash_bytes(hasher *s, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        s->h[0] = (s->h[0] ^ b[i]) * 0x100000001b3ull;
        s->h[1] = (s->h[1] ^ b[i] ^ 0x5a) * 0x100000001b3ull;
    }
}

static void hash_str(hasher *s, const char *str) { hash_bytes(s, str, strlen(str) + 1); }

static void hash_hex(const hasher *s, char out[33])
{
    rtl_fmt(out, 33, "%016llx%016llx", (unsigned long long)s->h[0], (unsigned long long)s->h[1]);
}

static int cache_root(const mts_rtl_opts *o, char *buf, size_t n)
{
    const char *env;
    if (o->cache_dir && *o->cache_dir) return rtl_fmt(buf, n, "%s", o->cache_dir);
    if ((env = getenv("MANTIS_CACHE")) && *env) return rtl_fmt(buf, n, "%s/rtl", env);
    if ((env = getenv("XDG_CACHE_HOME")) && *env) return rtl_fmt(buf, n, "%s/mantis/rtl", env);
    if ((env = getenv("HOME")) && *env) return rtl_fmt(buf, n, "%s/.cache/mantis/rtl", env);
    return rtl_fmt(buf, n, "/tmp/mantis-cache/rtl");
}

/* The first line of a tool's --version, into the hash (a new Verilator or
 * compiler gives new objects). */
static void tool_version(const char *tool, const char *tmpdir, char *buf, size_t n)
{
    char log[1200];
    rtl_fmt(log, sizeof log, "%s/version.log", tmpdir);
    remove(log);
    char *argv[] = {(char *)tool, "--version", NULL};
    buf[0] = '\0';
    if (rtl_run(argv, log, 0) == 0) {
        char *t = rtl_read_file(log, NULL);
        if (t) {
            t[strcspn(t, "\n")] = '\0';
            rtl_fmt(buf, n, "%s", t);
            free(t);
        }
    }
    remove(log);
}

static int lock_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    return fd;
}

static void unlock_file(int fd)
{
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}

static int exists(const char *p) { return access(p, R_OK) == 0; }

/* Verilator's include directory, from `verilator --getenv VERILATOR_ROOT`. */
static int verilator_root(const char *tmp, char *buf, size_t n, mts_err *err)
{
    char log[1200];
    rtl_fmt(log, sizeof log, "%s/getenv.log", tmp);
    char *argv[] = {(char *)rtl_verilator(), "--getenv", "VERILATOR_ROOT", NULL};
    if (rtl_run(argv, log, 0) != 0) return mts_fail(err, MTS_ETOOL, "could not run '%s --getenv'", rtl_verilator());
    char *t = rtl_read_file(log, NULL);
    if (!t) return mts_fail(err, MTS_ETOOL, "verilator --getenv VERILATOR_ROOT printed nothing");
    t[strcspn(t, "\r\n")] = '\0';
    rtl_fmt(buf, n, "%s/include", t);
    free(t);
    return MTS_OK;
}

/* Runs cmd; on failure returns MTS_ETOOL quoting the log's first error. */
static int run_step(char *const argv[], const char *log, const char *what, int verbose, mts_err *err)
{
    int rc = rtl_run(argv, log, verbose);
    if (rc == 0) return MTS_OK;
    if (rc == 127) return mts_fail(err, MTS_ETOOL, "%s: could not run '%s'", what, argv[0]);
    char first[400];
    rtl_log_first_error(log, first, sizeof first);
    return mts_fail(err, MTS_ETOOL, "%s failed: %s (log: %s)", what, first[0] ? first : "no message", log);
}

/* Compiles Verilator's runtime once into root/runtime-<h>/. */
static int build_runtime(const mts_rtl_opts *o, const char *root, const char *vinc, const char *vver,
                         const char *cver, char *rtdir, size_t n, mts_err *err)
{
    hasher h;
    hash_init(&h);
    hash_str(&h, "mantis-rtl-runtime-1");
    hash_str(&h, vver);
    hash_str(&h, cver);
    hash_str(&h, vinc);
    const char *flags[] = {RTL_CXXFLAGS};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) hash_str(&h, flags[i]);
    char hex[33];
    hash_hex(&h, hex);
    rtl_fmt(rtdir, n, "%s/runtime-%s", root, hex);
    char done[1200];
    rtl_fmt(done, sizeof done, "%s/verilated_threads.o", rtdir);
    if (exists(done)) return MTS_OK;
    char lockp[1200];
    rtl_fmt(lockp, sizeof lockp, "%s/runtime-%s.lock", root, hex);
    int fd = lock_file(lockp);
    if (fd < 0) return mts_fail(err, MTS_EIO, "%s: cannot lock the RTL cache", lockp);
    int rc = MTS_OK;
    if (!exists(done)) {
        char tmp[1200];
        rtl_fmt(tmp, sizeof tmp, "%s/build-runtime-%d", root, (int)getpid());
        rtl_rmtree(tmp);
        if (rtl_mkdirs(tmp)) rc = mts_fail(err, MTS_EIO, "%s: cannot create directory", tmp);
        const char *units[] = {"verilated", "verilated_threads"};
        for (int u = 0; u < 2 && !rc; u++) {
            char src[1200], obj[1200], inc1[1200], inc2[1200], log[1200];
            rtl_fmt(src, sizeof src, "%s/%s.cpp", vinc, units[u]);
            rtl_fmt(obj, sizeof obj, "%s/%s.o", tmp, units[u]);
            rtl_fmt(inc1, sizeof inc1, "-I%s", vinc);
            rtl_fmt(inc2, sizeof inc2, "-I%s/vltstd", vinc);
            rtl_fmt(log, sizeof log, "%s/build.log", tmp);
            char *argv[] = {(char *)rtl_cxx(), RTL_CXXFLAGS, inc1, inc2, "-c", src, "-o", obj, NULL};
            if (o->verbose) fprintf(stderr, "mantis rtl: compiling the Verilator runtime (once)\n");
            rc = run_step(argv, log, "compiling the Verilator runtime", o->verbose, err);
        }
        if (!rc && rename(tmp, rtdir)) {
            if (!exists(done)) rc = mts_fail(err, MTS_EIO, "%s: cannot move the runtime into the cache", rtdir);
            rtl_rmtree(tmp);
        }
    }
    unlock_file(fd);
    return rc;
}

/* The extern "C" shim: the same five entry points for every design; only
 * port names and masks differ. */
static int write_shim(const rtl_design *d, const char *path)
{
    const mts_rtl_info *in = &d->info;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    unsigned long long m0 = (1ull << in->w0) - 1, m1 = (1ull << in->w1) - 1;
    unsigned long long my = in->wout == 64 ? ~0ull : (1ull << in->wout) - 1;
    fprintf(f,
            "// Generated by Mantis (sim/rtl_build.c) for top module %s; do not edit.\n"
            "#include <cstddef>\n#include <cstdint>\n#include <new>\n"
            "#include \"verilated.h\"\n#include \"Vmts.h\"\n"
            "#define MTS_EXPORT extern \"C\" __attribute__((visibility(\"default\")))\n"
            "namespace {\n"
            "struct Inst {\n  VerilatedContext ctx;\n  Vmts model;\n  Inst() : model{&ctx, \"top\"} {}\n};\n"
            "}\n"
            "MTS_EXPORT int mts_shim_abi(void) { return %d; }\n"
            "MTS_EXPORT void *mts_shim_new(void) {\n"
            "  Inst *i = new (std::nothrow) Inst;\n  if (i) i->model.eval();\n  return i;\n}\n"
            "MTS_EXPORT void mts_shim_free(void *h) {\n"
            "  Inst *i = static_cast<Inst *>(h);\n  i->model.final();\n  delete i;\n}\n"
            "MTS_EXPORT void mts_shim_eval(void *h, size_t n, const uint32_t *x0, const uint32_t *x1, uint64_t *y) {\n"
            "  Vmts &m = static_cast<Inst *>(h)->model;\n"
            "  for (size_t i = 0; i < n; i++) {\n"
            "    m.%s = x0[i] & 0x%llxull;\n    m.%s = x1[i] & 0x%llxull;\n    m.eval();\n"
            "    y[i] = (uint64_t)m.%s & 0x%llxull;\n  }\n}\n"
            "MTS_EXPORT void mts_shim_grid(void *h, uint32_t i0, uint32_t n0, uint32_t or0, int bits1, uint32_t or1,\n"
            "                              uint64_t *y) {\n"
            "  Vmts &m = static_cast<Inst *>(h)->model;\n"
            "  const uint32_t n1 = 1u << bits1;\n"
            "  for (uint32_t i = 0; i < n0; i++) {\n"
            "    m.%s = ((i0 + i) | or0) & 0x%llxull;\n"
            "    for (uint32_t j = 0; j < n1; j++) {\n"
            "      m.%s = (j | or1) & 0x%llxull;\n      m.eval();\n      *y++ = (uint64_t)m.%s & 0x%llxull;\n"
            "    }\n  }\n}\n",
            in->top, RTL_SHIM_ABI, in->in0, m0, in->in1, m1, in->out, my, in->in0, m0, in->in1, m1, in->out, my);
    return fclose(f) ? -1 : 0;
}

/* One translation unit for shim + generated model: one parse of
 * verilated.h instead of one per file (the model builds in about a second). */
static int write_unity(const char *dir, const char *objdir, const char *path)
{
    DIR *dp = opendir(objdir);
    if (!dp) return -1;
    FILE *f = fopen(path, "w");
    if (!f) {
        closedir(dp);
        return -1;
    }
    fprintf(f, "#include \"%s/shim.cpp\"\n", dir);
    char names[256][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".cpp") && !strncmp(e->d_name, "Vmts", 4))
            rtl_fmt(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(dp);
    for (int i = 1; i < n; i++) /* sorted: the same unit on every machine */
        for (int k = i; k > 0 && strcmp(names[k], names[k - 1]) < 0; k--) {
            char t[256];
            memcpy(t, names[k], sizeof t);
            memcpy(names[k], names[k - 1], sizeof t);
            memcpy(names[k - 1], t, sizeof t);
        }
    for (int i = 0; i < n; i++) fprintf(f, "#include \"%s/%s\"\n", objdir, names[i]);
    return fclose(f) ? -1 : 0;
}

static int build_model(const mts_rtl_opts *o, const rtl_design *d, const char *tmp, const char *vinc,
                       const char *rtdir, const char *log, mts_err *err)
{
    char objdir[1200], shim[1200], unity[1200], so[1200];
    rtl_fmt(objdir, sizeof objdir, "%s/obj", tmp);
    rtl_fmt(shim, sizeof shim, "%s/shim.cpp", tmp);
    rtl_fmt(unity, sizeof unity, "%s/unity.cpp", tmp);
    rtl_fmt(so, sizeof so, "%s/model.so", tmp);
    char *argv[80];
    int n = 0;
    char gbuf[MTS_RTL_MAX_PARAMS][300];
    argv[n++] = (char *)rtl_verilator();
    argv[n++] = "--cc";
    argv[n++] = "--prefix";
    argv[n++] = "Vmts";
    argv[n++] = "-Mdir";
    argv[n++] = objdir;
    argv[n++] = "--top-module";
    argv[n++] = (char *)d->info.top;
    for (int i = 0; i < o->nparams; i++) {
        rtl_fmt(gbuf[i], sizeof gbuf[i], "-G%s", o->param[i]);
        argv[n++] = gbuf[i];
    }
    argv[n++] = "-y";
    argv[n++] = (char *)d->dir;
    argv[n++] = "-O3";
    argv[n++] = "--x-assign";
    argv[n++] = "fast";
    argv[n++] = "--x-initial";
    argv[n++] = "fast";
    argv[n++] = "--no-timing";
    argv[n++] = "-Wno-fatal";
    argv[n++] = "-Wno-MULTITOP";
    argv[n++] = (char *)d->path;
    argv[n] = NULL;
    int rc = run_step(argv, log, "verilator", o->verbose, err);
    if (rc) return rc;
    if (write_shim(d, shim) || write_unity(tmp, objdir, unity))
        return mts_fail(err, MTS_EIO, "%s: cannot write the generated shim", tmp);
    char inc1[1200], inc2[1200], inc3[1200], rt1[1200], rt2[1200];
    rtl_fmt(inc1, sizeof inc1, "-I%s", vinc);
    rtl_fmt(inc2, sizeof inc2, "-I%s/vltstd", vinc);
    rtl_fmt(inc3, sizeof inc3, "-I%s", objdir);
    rtl_fmt(rt1, sizeof rt1, "%s/verilated.o", rtdir);
    rtl_fmt(rt2, sizeof rt2, "%s/verilated_threads.o", rtdir);
    char *cargv[] = {(char *)rtl_cxx(), RTL_CXXFLAGS, "-shared", "-Wl,-Bsymbolic", inc1, inc2, inc3,
                     unity, rt1, rt2, "-o", so, "-pthread", NULL};
    return run_step(cargv, log, "compiling the Verilated model", o->verbose, err);
}

int rtl_build(const mts_rtl_opts *o, rtl_design *d, const char *tmpdir, mts_err *err)
{
    char root[1024];
    if (cache_root(o, root, sizeof root) || strlen(root) > 900) /* room for the names below it */
        return mts_fail(err, MTS_EINVAL, "RTL cache directory path too long (over 900 characters)");
    if (rtl_mkdirs(root)) return mts_fail(err, MTS_EIO, "%s: cannot create the RTL cache directory", root);
    char vver[256], cver[256];
    tool_version(rtl_verilator(), tmpdir, vver, sizeof vver);
    if (!vver[0])
        return mts_fail(err, MTS_ETOOL, "could not run '%s --version' (install Verilator 5 or set MANTIS_VERILATOR)",
                        rtl_verilator());
    tool_version(rtl_cxx(), tmpdir, cver, sizeof cver);
    if (!cver[0])
        return mts_fail(err, MTS_ETOOL, "could not run the C++ compiler '%s' (set MANTIS_CXX)", rtl_cxx());

    hasher h;
    hash_init(&h);
    hash_str(&h, "mantis-rtl-model");
    char abi[16];
    rtl_fmt(abi, sizeof abi, "%d", RTL_SHIM_ABI);
    hash_str(&h, abi);
    hash_str(&h, MANTIS_VERSION);
    hash_str(&h, vver);
    hash_str(&h, cver);
    const char *flags[] = {RTL_CXXFLAGS};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) hash_str(&h, flags[i]);
    hash_str(&h, d->info.top);
    hash_str(&h, d->info.in0);
    hash_str(&h, d->info.in1);
    hash_str(&h, d->info.out);
    for (int i = 0; i < o->nparams; i++) hash_str(&h, o->param[i]);
    for (int i = 0; i < d->nfiles; i++) {
        const char *slash = strrchr(d->files[i], '/');
        hash_str(&h, slash ? slash + 1 : d->files[i]); /* content, not location, names a design */
        size_t len = 0;
        char *text = rtl_read_file(d->files[i], &len);
        if (!text) return mts_fail(err, MTS_EIO, "%s: cannot read (a source of %s)", d->files[i], d->path);
        hash_bytes(&h, text, len);
        free(text);
    }
    hash_hex(&h, d->info.hash);
    rtl_fmt(d->info.so_path, sizeof d->info.so_path, "%s/%s/model.so", root, d->info.hash);
    if (exists(d->info.so_path)) {
        d->info.cache_hit = 1;
        return MTS_OK;
    }

    char lockp[1200];
    rtl_fmt(lockp, sizeof lockp, "%s/%s.lock", root, d->info.hash);
    int fd = lock_file(lockp);
    if (fd < 0) return mts_fail(err, MTS_EIO, "%s: cannot lock the RTL cache", lockp);
    int rc = MTS_OK;
    if (exists(d->info.so_path)) { /* another process built it while we waited */
        d->info.cache_hit = 1;
        unlock_file(fd);
        return MTS_OK;
    }
    char tmp[1200], vinc[1024], rtdir[1200], final[1200], log[1200];
    rtl_fmt(tmp, sizeof tmp, "%s/build-%s-%d", root, d->info.hash, (int)getpid());
    rtl_fmt(log, sizeof log, "%s/%s.log", root, d->info.hash); /* stays there when the build fails */
    remove(log);
    rtl_fmt(final, sizeof final, "%s/%s", root, d->info.hash);
    rtl_rmtree(tmp);
    if (rtl_mkdirs(tmp)) rc = mts_fail(err, MTS_EIO, "%s: cannot create directory", tmp);
    if (!rc) rc = verilator_root(tmp, vinc, sizeof vinc, err);
    if (!rc) rc = build_runtime(o, root, vinc, vver, cver, rtdir, sizeof rtdir, err);
    if (o->verbose && !rc) fprintf(stderr, "mantis rtl: building %s (%s) into %s\n", d->path, d->info.top, final);
    if (!rc) rc = build_model(o, d, tmp, vinc, rtdir, log, err);
    if (!rc) {
        char keep[1300];
        rtl_fmt(keep, sizeof keep, "%s/build.log", tmp);
        rename(log, keep);
        rtl_rmtree(final); /* a stale directory without model.so */
        if (rename(tmp, final)) rc = mts_fail(err, MTS_EIO, "%s: cannot move the model into the cache", final);
    }
    if (rc) rtl_rmtree(tmp);
    unlock_file(fd);
    d->info.cache_hit = 0;
    return rc;
}
