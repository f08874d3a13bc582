/* build.c - Verilates a detected design into a shared object with a
 * generated extern "C" shim, and caches it by content hash.
 *
 * Cache layout (root = opts->cache_dir, else $MANTIS_CACHE/rtl, else
 * $XDG_CACHE_HOME/mantis/rtl, else ~/.cache/mantis/rtl):
 *   root/runtime-<h>/verilated*.o  Verilator's runtime, compiled once per
 *                                  Verilator version and compiler
 *   root/<hash>/model.so           one design: sources + top + parameters +
 *                                  Mantis, Verilator and shim versions
 * Builds happen in root/build-<hash>-<pid> (build-runtime-<pid>) and are
 * renamed into place under an flock, so concurrent processes never see a
 * half-built model; a failed build removes its scratch and leaves only its
 * log, root/<hash>.log (runtime-<h>.log), which the next build replaces. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/hash.h"
#include "mantis/proc.h"
#include "rtl_internal.h"

/* Compile flags of the runtime and of every model; part of the hashes. */
#define RTL_CXXFLAGS "-O2", "-fPIC", "-fvisibility=hidden", "-w"

/* The cache root: opts->cache_dir, else the shared cache's "rtl". */
static int cache_root(const mts_rtl_opts *o, char *buf, size_t n, mts_err *err)
{
    if (o->cache_dir && *o->cache_dir)
        return mts_fs_pathf(buf, n, "%s", o->cache_dir) ? mts_fail(err, MTS_EINVAL, "RTL cache directory path too long")
                                                         : MTS_OK;
    return mts_fs_cache_dir("rtl", buf, n, err);
}

/* The first line of a tool's --version, into the hash (a new Verilator or
 * compiler gives new objects). */
static void tool_version(const char *tool, char *buf, size_t n)
{
    char *argv[] = {(char *)tool, "--version", NULL};
    if (mts_proc_first_line(argv, buf, n) != 0) buf[0] = '\0';
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


/* Verilator's include directory, from `verilator --getenv VERILATOR_ROOT`. */
static int verilator_root(char *buf, size_t n, mts_err *err)
{
    char *argv[] = {(char *)rtl_verilator(), "--getenv", "VERILATOR_ROOT", NULL};
    char root[1024];
    if (mts_proc_first_line(argv, root, sizeof root) != 0)
        return mts_fail(err, MTS_ENOTOOL, "could not run '%s --getenv'", rtl_verilator());
    if (!root[0]) return mts_fail(err, MTS_ETOOL, "verilator --getenv VERILATOR_ROOT printed nothing");
    if (mts_fs_pathf(buf, n, "%s/include", root)) return mts_fail(err, MTS_ETOOL, "VERILATOR_ROOT path too long");
    return MTS_OK;
}

/* Free space below which a cache whose build failed is taken to be full:
 * the tool that ran out of room deleted what it had written (ld), or did
 * not notice at all (Verilator), so its message alone may not say so. */
#define RTL_DISK_LOW (1 << 20)

/* "; its disk is full (N KiB free): No space left on device" into buf when
 * the file system of dir has less than RTL_DISK_LOW left, else "". */
static void disk_note(const char *dir, char *buf, size_t n)
{
    long long left = mts_fs_free_bytes(dir);
    buf[0] = '\0';
    if (left >= 0 && left < RTL_DISK_LOW)
        snprintf(buf, n, "; its disk is full (%lld KiB free): %s", left >> 10, strerror(ENOSPC));
}

/* Runs cmd; on failure returns MTS_ETOOL quoting its first error, or the
 * environment's code when that line says the environment failed
 * (mts_status_of_text: "ld: final link failed: No space left on device"
 * is MTS_ENOSPC) or the disk is nearly full; MTS_ENOTOOL when cmd could not
 * be started or was killed. Its output is kept in memory too: the log lies
 * in the cache, and on a full disk it loses the very line that says so. */
static int run_step(char *const argv[], const char *log, const char *what, int verbose, mts_err *err)
{
    mts_proc_tail tail;
    mts_proc_io io = {.log = log, .log_append = 1, .echo = verbose ? "mantis rtl" : NULL, .tail = &tail};
    int rc = mts_proc_run(argv, &io);
    if (rc == 0) return MTS_OK;
    if (rc == 127) return mts_fail(err, MTS_ENOTOOL, "%s: could not run '%s'", what, argv[0]);
    char first[400], cut[160] = "", disk[160] = "";
    if (tail.log_errno) { /* the log is cut short: what passed through here */
        rtl_text_first_error(tail.text, first, sizeof first);
        if (!strstr(first, strerror(tail.log_errno)))
            snprintf(cut, sizeof cut, ", cut short: %s", strerror(tail.log_errno));
        else
            snprintf(cut, sizeof cut, ", cut short");
    } else {
        rtl_log_first_error(log, first, sizeof first);
    }
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", log);
    *strrchr(dir, '/') = '\0';
    int code = mts_status_of_text(first); /* the tool has no status that says why: its words do */
    if (!code && !cut[0]) disk_note(dir, disk, sizeof disk);
    if (!code) /* a nearly full disk, a log that could not take it all, a kill: not the design's */
        code = disk[0] ? MTS_ENOSPC : cut[0] ? mts_status_of_errno(tail.log_errno) : rc >= 128 ? MTS_ENOTOOL : MTS_ETOOL;
    if (rc >= 128 && code == MTS_ENOTOOL) snprintf(first, sizeof first, "killed by signal %d", rc - 128);
    return mts_fail(err, code, "%s failed: %s (log: %s%s)%s", what, first[0] ? first : "no message", log, cut,
                    disk);
}

/* Compiles Verilator's runtime once into root/runtime-<h>/. */
static int build_runtime(const mts_rtl_opts *o, const char *root, const char *vinc, const char *vver,
                         const char *cver, char *rtdir, size_t n, mts_err *err)
{
    mts_hash128 h;
    mts_hash128_init(&h);
    mts_hash128_str(&h, "mantis-rtl-runtime-1");
    mts_hash128_str(&h, vver);
    mts_hash128_str(&h, cver);
    mts_hash128_str(&h, vinc);
    const char *flags[] = {RTL_CXXFLAGS};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) mts_hash128_str(&h, flags[i]);
    char hex[33];
    mts_hash128_hex(&h, hex);
    mts_fs_pathf(rtdir, n, "%s/runtime-%s", root, hex);
    char done[1200];
    mts_fs_pathf(done, sizeof done, "%s/verilated_threads.o", rtdir);
    if (mts_fs_exists(done)) return MTS_OK;
    char lockp[1200];
    mts_fs_pathf(lockp, sizeof lockp, "%s/runtime-%s.lock", root, hex);
    int fd = lock_file(lockp);
    if (fd < 0) return mts_fail(err, MTS_EIO, "%s: cannot lock the RTL cache", lockp);
    int rc = MTS_OK;
    if (!mts_fs_exists(done)) {
        char tmp[1200], log[1200], keep[1300];
        mts_fs_pathf(tmp, sizeof tmp, "%s/build-runtime-%d", root, (int)getpid());
        mts_fs_pathf(log, sizeof log, "%s/runtime-%s.log", root, hex); /* stays there when the build fails */
        mts_fs_pathf(keep, sizeof keep, "%s/build.log", tmp);
        remove(log);
        mts_fs_rmtree(tmp);
        if (mts_fs_mkdirs(tmp, NULL))
            rc = mts_fail(err, MTS_EIO, "%s: cannot create directory: %s", tmp, strerror(errno));
        const char *units[] = {"verilated", "verilated_threads"};
        for (int u = 0; u < 2 && !rc; u++) {
            char src[1200], obj[1200], inc1[1200], inc2[1200];
            mts_fs_pathf(src, sizeof src, "%s/%s.cpp", vinc, units[u]);
            mts_fs_pathf(obj, sizeof obj, "%s/%s.o", tmp, units[u]);
            mts_fs_pathf(inc1, sizeof inc1, "-I%s", vinc);
            mts_fs_pathf(inc2, sizeof inc2, "-I%s/vltstd", vinc);
            char *argv[] = {(char *)rtl_cxx(), RTL_CXXFLAGS, inc1, inc2, "-c", src, "-o", obj, NULL};
            if (o->verbose) fprintf(stderr, "mantis rtl: compiling the Verilator runtime (once)\n");
            rc = run_step(argv, log, "compiling the Verilator runtime", o->verbose, err);
        }
        if (!rc) rename(log, keep);
        if (!rc && rename(tmp, rtdir)) {
            int e = errno;
            if (!mts_fs_exists(done))
                rc = mts_fail(err, MTS_EIO, "%s: cannot move the runtime into the cache: %s", rtdir, strerror(e));
        }
        mts_fs_rmtree(tmp); /* a failed build's objects, or the loser's of a race: the log says what happened */
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
            "// Generated by Mantis (sim/rtl/build.c) for top module %s; do not edit.\n"
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
            mts_fs_pathf(names[n++], sizeof names[0], "%s", e->d_name);
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
    mts_fs_pathf(objdir, sizeof objdir, "%s/obj", tmp);
    mts_fs_pathf(shim, sizeof shim, "%s/shim.cpp", tmp);
    mts_fs_pathf(unity, sizeof unity, "%s/unity.cpp", tmp);
    mts_fs_pathf(so, sizeof so, "%s/model.so", tmp);
    char *argv[80];
    int n = 0;
    char gbuf[MTS_RTL_MAX_PARAMS][300];
    argv[n++] = (char *)rtl_verilator();
    argv[n++] = "--cc";
    argv[n++] = "--prefix";
    argv[n++] = "Vmts";
    argv[n++] = "-Mdir";
    argv[n++] = objdir;
    n = rtl_verilator_common(argv, n, gbuf, d->nvparams, d->vparam, d->vdir, d->info.top);
    argv[n++] = "-O3";
    argv[n++] = "--x-assign";
    argv[n++] = "fast";
    argv[n++] = "--x-initial";
    argv[n++] = "fast";
    argv[n++] = "--no-timing";
    argv[n++] = (char *)d->vpath;
    argv[n] = NULL;
    int rc = run_step(argv, log, "verilator", o->verbose, err);
    if (rc) return rc;
    /* Verilator 5 exits 0 after writing empty files to a full disk: it left
     * the disk full (less than a write's worth), so look */
    long long left = mts_fs_free_bytes(tmp);
    if (left >= 0 && left < (64 << 10))
        return mts_fail(err, MTS_ENOSPC, "verilator: %s: its files may be cut short (%lld KiB free, and Verilator does "
                        "not check its writes): %s", objdir, left >> 10, strerror(ENOSPC));
    if (write_shim(d, shim) || write_unity(tmp, objdir, unity)) /* the cause: a full disk is not the design's */
        return mts_fail(err, MTS_EIO, "%s: cannot write the generated shim: %s", tmp, strerror(errno));
    char inc1[1200], inc2[1200], inc3[1200], rt1[1200], rt2[1200];
    mts_fs_pathf(inc1, sizeof inc1, "-I%s", vinc);
    mts_fs_pathf(inc2, sizeof inc2, "-I%s/vltstd", vinc);
    mts_fs_pathf(inc3, sizeof inc3, "-I%s", objdir);
    mts_fs_pathf(rt1, sizeof rt1, "%s/verilated.o", rtdir);
    mts_fs_pathf(rt2, sizeof rt2, "%s/verilated_threads.o", rtdir);
    char *cargv[] = {(char *)rtl_cxx(), RTL_CXXFLAGS, "-shared", "-Wl,-Bsymbolic", inc1, inc2, inc3,
                     unity, rt1, rt2, "-o", so, "-pthread", NULL};
    return run_step(cargv, log, "compiling the Verilated model", o->verbose, err);
}

int rtl_build(const mts_rtl_opts *o, rtl_design *d, mts_err *err)
{
    char root[1024];
    int rc0 = cache_root(o, root, sizeof root, err);
    if (rc0) return rc0;
    if (strlen(root) > 900) /* room for the names below it */
        return mts_fail(err, MTS_EINVAL, "RTL cache directory path too long (over 900 characters)");
    if (!mts_rtl_path_plain(root)) /* Verilator writes its model there (-Mdir) */
        return mts_fail(err, MTS_EINVAL,
                        "%s: the RTL cache directory may hold only letters, digits and ._/+,=@%%:~- (Verilator "
                        "cannot take spaces, quotes, $, `, ; or non-ASCII there); set MANTIS_CACHE or --cache",
                        root);
    if (mts_fs_mkdirs(root, NULL))
        return mts_fail(err, MTS_EIO, "%s: cannot create the RTL cache directory: %s", root, strerror(errno));
    char vver[256], cver[256];
    tool_version(rtl_verilator(), vver, sizeof vver);
    if (!vver[0])
        return mts_fail(err, MTS_ENOTOOL, "could not run '%s --version' (install Verilator 5 or set MANTIS_VERILATOR)",
                        rtl_verilator());
    tool_version(rtl_cxx(), cver, sizeof cver);
    if (!cver[0])
        return mts_fail(err, MTS_ENOTOOL, "could not run the C++ compiler '%s' (set MANTIS_CXX)", rtl_cxx());

    mts_hash128 h;
    mts_hash128_init(&h);
    mts_hash128_str(&h, "mantis-rtl-model");
    char abi[16];
    mts_fs_pathf(abi, sizeof abi, "%d", RTL_SHIM_ABI);
    mts_hash128_str(&h, abi);
    mts_hash128_str(&h, MANTIS_VERSION);
    mts_hash128_str(&h, vver);
    mts_hash128_str(&h, cver);
    const char *flags[] = {RTL_CXXFLAGS};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) mts_hash128_str(&h, flags[i]);
    mts_hash128_str(&h, d->info.top);
    mts_hash128_str(&h, d->info.in0);
    mts_hash128_str(&h, d->info.in1);
    mts_hash128_str(&h, d->info.out);
    for (int i = 0; i < d->nvparams; i++) mts_hash128_str(&h, d->vparam[i]);
    for (int i = 0; i < d->nfiles; i++) {
        const char *slash = strrchr(d->files[i], '/');
        mts_hash128_str(&h, slash ? slash + 1 : d->files[i]); /* content, not location, names a design */
        if (mts_hash128_file(&h, d->files[i], NULL))
            return mts_fail(err, MTS_EIO, "%s: cannot read (a source of %s)", d->files[i], d->path);
    }
    mts_hash128_hex(&h, d->info.hash);
    mts_fs_pathf(d->info.so_path, sizeof d->info.so_path, "%s/%s/model.so", root, d->info.hash);
    if (mts_fs_exists(d->info.so_path)) {
        d->info.cache_hit = 1;
        return MTS_OK;
    }

    char lockp[1200];
    mts_fs_pathf(lockp, sizeof lockp, "%s/%s.lock", root, d->info.hash);
    int fd = lock_file(lockp);
    if (fd < 0) return mts_fail(err, MTS_EIO, "%s: cannot lock the RTL cache", lockp);
    int rc = MTS_OK;
    if (mts_fs_exists(d->info.so_path)) { /* another process built it while we waited */
        d->info.cache_hit = 1;
        unlock_file(fd);
        return MTS_OK;
    }
    char tmp[1200], vinc[1024], rtdir[1200], final[1200], log[1200];
    mts_fs_pathf(tmp, sizeof tmp, "%s/build-%s-%d", root, d->info.hash, (int)getpid());
    mts_fs_pathf(log, sizeof log, "%s/%s.log", root, d->info.hash); /* stays there when the build fails */
    remove(log);
    mts_fs_pathf(final, sizeof final, "%s/%s", root, d->info.hash);
    mts_fs_rmtree(tmp);
    if (mts_fs_mkdirs(tmp, NULL)) rc = mts_fail(err, MTS_EIO, "%s: cannot create directory: %s", tmp, strerror(errno));
    if (!rc) rc = verilator_root(vinc, sizeof vinc, err);
    if (!rc) rc = build_runtime(o, root, vinc, vver, cver, rtdir, sizeof rtdir, err);
    if (o->verbose && !rc) fprintf(stderr, "mantis rtl: building %s (%s) into %s\n", d->path, d->info.top, final);
    if (!rc) rc = build_model(o, d, tmp, vinc, rtdir, log, err);
    if (!rc) {
        char keep[1300];
        mts_fs_pathf(keep, sizeof keep, "%s/build.log", tmp);
        rename(log, keep);
        mts_fs_rmtree(final); /* a stale directory without model.so */
        if (rename(tmp, final))
            rc = mts_fail(err, MTS_EIO, "%s: cannot move the model into the cache: %s", final, strerror(errno));
    }
    if (rc) mts_fs_rmtree(tmp);
    unlock_file(fd);
    d->info.cache_hit = 0;
    return rc;
}
