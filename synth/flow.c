/* flow.c - `mantis synth` as a library call (include/mantis/synth.h):
 * content hash -> cache entry; Yosys run of synth/synth.ys; Verilator
 * equivalence of the mapped netlist against the RTL; C simulator checked
 * against Verilator; power from the switching activity of an operand stream. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mantis/hash.h"
#include "mantis/proc.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/synth.h"
#include "mantis/trace.h"
#include "synth_int.h"

#define FLOW_VERSION "mantis-synth-1"
#define EXHAUSTIVE_MAX_BITS 22
#define CSIM_CHECK_VECTORS 4096
#define EQ_SEED 0x5EEDull

static const char *const yosys_markers[] = {"ERROR:", "Error", NULL};
static const char *const verilator_markers[] = {"%Error", "error:", "Error", NULL};

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Two independent FNV-1a lanes = a 128-bit content key. */
typedef struct hash2 { uint64_t a, b; } hash2;

static void h_add(hash2 *h, const void *d, size_t n)
{
    uint64_t len = n;
    h->a = mts_hash_fnv1a(mts_hash_fnv1a(h->a, &len, sizeof len), d, n);
    h->b = mts_hash_fnv1a(mts_hash_fnv1a(h->b, d, n), &len, sizeof len);
}

static int h_file(hash2 *h, const char *path, mts_err *err)
{
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(path, &buf, &len, err);
    if (rc) return rc;
    h_add(h, buf, len);
    free(buf);
    return MTS_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every Verilog source in the design's directory can be a submodule (Yosys'
 * -libdir / Verilator's -y), so all of them enter the key, in name order. */
static int h_dir_sources(hash2 *h, const char *dir, mts_err *err)
{
    DIR *d = opendir(dir);
    if (!d) return mts_fail(err, MTS_EIO, "%s: cannot list: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, rc = MTS_OK;
    struct dirent *e;
    while ((e = readdir(d)) && !rc) {
        size_t l = strlen(e->d_name);
        if (!((l > 2 && !strcmp(e->d_name + l - 2, ".v")) || (l > 3 && !strcmp(e->d_name + l - 3, ".sv")))) continue;
        char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            if (nn) names = nn;
            rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", dir);
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (!rc) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n && !rc; i++) {
        char p[PATH_MAX];
        MTS_SNPRINTF(p, sizeof p, "%s/%s", dir, names[i]);
        h_add(h, names[i], strlen(names[i]));
        rc = h_file(h, p, err);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* Replaces every @KEY@ of tpl; keys/vals are parallel lists. */
static char *fill_template(const char *tpl, int n, const char *const *keys, const char *const *vals)
{
    size_t cap = strlen(tpl) + 1;
    for (int i = 0; i < n; i++) cap += 8 * strlen(vals[i]) + 8;
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    for (const char *s = tpl; *s;) {
        int hit = -1;
        for (int i = 0; i < n && hit < 0; i++)
            if (!strncmp(s, keys[i], strlen(keys[i]))) hit = i;
        if (hit >= 0) {
            size_t l = strlen(vals[hit]);
            if ((size_t)(o - out) + l + 1 >= cap) break;
            memcpy(o, vals[hit], l);
            o += l;
            s += strlen(keys[hit]);
        } else {
            if ((size_t)(o - out) + 2 >= cap) break;
            *o++ = *s++;
        }
    }
    *o = 0;
    return out;
}

static int read_text(const char *path, char **text, mts_err *err)
{
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(path, &buf, &len, err);
    if (rc) return rc;
    char *t = realloc(buf, len + 1);
    if (!t) {
        free(buf);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    t[len] = 0;
    *text = t;
    return MTS_OK;
}

static int safe_word(const char *s)
{
    for (; *s; s++)
        if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '"' || *s == ';' || *s == '\'') return 0;
    return 1;
}

/* Does the file declare `module NAME`? (Token scan, comments skipped.) */
static int declares_module(const char *text, const char *name)
{
    size_t nl = strlen(name);
    for (const char *s = text; *s; s++) {
        if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
            if (!*s) break;
            continue;
        }
        if (s[0] == '/' && s[1] == '*') {
            const char *e = strstr(s + 2, "*/");
            if (!e) break;
            s = e + 1;
            continue;
        }
        if (!strncmp(s, "module", 6) && (s == text || s[-1] == '\n' || s[-1] == ' ' || s[-1] == '\t' || s[-1] == ';')) {
            const char *p = s + 6;
            if (*p != ' ' && *p != '\t' && *p != '\n') continue;
            while (*p == ' ' || *p == '\t' || *p == '\n') p++;
            if (!strncmp(p, name, nl) && !(p[nl] == '_' || (p[nl] >= '0' && p[nl] <= '9') ||
                                           ((p[nl] | 32) >= 'a' && (p[nl] | 32) <= 'z')))
                return 1;
        }
    }
    return 0;
}

typedef struct ctx {
    const mts_synth_opts *o;
    char design[PATH_MAX], design_dir[PATH_MAX], base[256];
    char liberty[PATH_MAX], tpl[PATH_MAX], cells_v[PATH_MAX], harness[PATH_MAX];
    char root[PATH_MAX], entry[PATH_MAX], work[PATH_MAX];
    mts_lib lib;
} ctx;

static int tool_error(ctx *c, const char *tool, const char *log, const char *const *markers, mts_err *err)
{
    char line[400] = "";
    if (!mts_proc_log_find(log, markers, line, sizeof line)) snprintf(line, sizeof line, "failed (no error line found)");
    /* The log lives in the work directory, which mts_synth_run moves to
     * <entry>.failed (and rewrites paths in the message) on any failure. */
    return mts_fail(err, MTS_ETOOL, "%s: %s: %s (full log: %s)", c->base, tool, line, log);
}

/* Runs Yosys on the filled template; leaves stat.txt, netlist.v/.blif in work. */
static int run_yosys(ctx *c, char *top, size_t topcap, double *area, double *delay_ps, mts_err *err)
{
    char *tpl = NULL;
    int rc = read_text(c->tpl, &tpl, err);
    if (rc) return rc;
    char topsel[512], chparam[2048] = "";
    char *src = NULL;
    if ((rc = read_text(c->design, &src, err))) {
        free(tpl);
        return rc;
    }
    if (declares_module(src, c->base)) snprintf(topsel, sizeof topsel, "-top %s", c->base);
    else snprintf(topsel, sizeof topsel, "-auto-top");
    free(src);
    for (int i = 0; i < c->o->nparams; i++) {
        const char *eq = strchr(c->o->param[i], '=');
        size_t l = strlen(chparam);
        snprintf(chparam + l, sizeof chparam - l, " -chparam %.*s %s", (int)(eq - c->o->param[i]), c->o->param[i],
                 eq + 1);
    }
    const char *keys[] = {"@DESIGN@", "@DESIGNDIR@", "@TOPSEL@", "@CHPARAM@", "@LIBERTY@", "@OUT@"};
    const char *vals[] = {c->design, c->design_dir, topsel, chparam, c->liberty, c->work};
    char *script = fill_template(tpl, 6, keys, vals);
    free(tpl);
    if (!script) return mts_fail(err, MTS_ENOMEM, "out of memory");
    char path[PATH_MAX + 32], log[PATH_MAX + 32], cmd[3 * PATH_MAX];
    snprintf(path, sizeof path, "%s/flow.ys", c->work);
    snprintf(log, sizeof log, "%s/yosys.log", c->work);
    rc = mts_fs_write_text(path, script, err);
    free(script);
    if (rc) return rc;
    snprintf(cmd, sizeof cmd, "cd ");
    mts_shq(cmd, sizeof cmd, c->work);
    strncat(cmd, " && yosys -q -l yosys.log -s flow.ys", sizeof cmd - strlen(cmd) - 1);
    if (c->o->verbose) fprintf(stderr, "mantis synth: %s\n", cmd);
    int st = mts_run_logged(cmd, log);
    if (st) return tool_error(c, "yosys", log, yosys_markers, err);
    /* Top module, ABC delay, chip area from the log and stat output. */
    FILE *f = fopen(log, "r");
    char line[2048];
    *delay_ps = -1;
    top[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *p;
        if (!top[0] && (p = strstr(line, "Top module:"))) {
            p += 11;
            while (*p == ' ' || *p == '\\') p++;
            p[strcspn(p, " \r\n")] = 0;
            snprintf(top, topcap, "%s", p);
        }
        if (strstr(line, "WireLoad") && (p = strstr(line, "Delay =")))
            *delay_ps = atof(p + 7); /* the last stime report wins */
    }
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/stat.txt", c->work);
    f = fopen(path, "r");
    *area = -1;
    while (f && fgets(line, sizeof line, f)) {
        char *p = strstr(line, "Chip area for module");
        if (p && (p = strrchr(line, ':'))) *area = atof(p + 1);
    }
    if (f) fclose(f);
    if (!top[0] || *area < 0)
        return mts_fail(err, MTS_ETOOL, "%s: yosys: no top module or chip area in its output (log: %s)", c->base, log);
    return MTS_OK;
}

/* Writes the wrapper module mts_eq: the RTL and the netlist side by side. */
static int write_wrapper(ctx *c, const char *top, const mts_gl *gl, mts_err *err)
{
    size_t cap = 8192;
    char *w = malloc(cap);
    if (!w) return mts_fail(err, MTS_ENOMEM, "out of memory");
    size_t n = 0;
    n += (size_t)snprintf(w + n, cap - n,
                          "// generated by mantis synth: RTL and mapped netlist on the same inputs\n"
                          "module mts_eq(input [%d:0] vin, output [%d:0] o_rtl, output [%d:0] o_gl);\n",
                          gl->nin_bits - 1, gl->nout_bits - 1, gl->nout_bits - 1);
    for (int side = 0; side < 2; side++) {
        if (side == 0) {
            n += (size_t)snprintf(w + n, cap - n, "  %s", top);
            if (c->o->nparams) {
                n += (size_t)snprintf(w + n, cap - n, " #(");
                for (int i = 0; i < c->o->nparams; i++) {
                    const char *eq = strchr(c->o->param[i], '=');
                    n += (size_t)snprintf(w + n, cap - n, "%s.%.*s(%s)", i ? ", " : "",
                                          (int)(eq - c->o->param[i]), c->o->param[i], eq + 1);
                }
                n += (size_t)snprintf(w + n, cap - n, ")");
            }
            n += (size_t)snprintf(w + n, cap - n, " u_rtl(");
        } else {
            n += (size_t)snprintf(w + n, cap - n, "  mts_gl u_gl(");
        }
        const char *o = side ? "o_gl" : "o_rtl";
        int k = 0;
        for (int p = 0; p < gl->nin_ports; p++, k++)
            n += (size_t)snprintf(w + n, cap - n, "%s.%s(vin[%d:%d])", k ? ", " : "", gl->in_ports[p].name,
                                  gl->in_ports[p].first + gl->in_ports[p].width - 1, gl->in_ports[p].first);
        for (int p = 0; p < gl->nout_ports; p++, k++)
            n += (size_t)snprintf(w + n, cap - n, "%s.%s(%s[%d:%d])", k ? ", " : "", gl->out_ports[p].name, o,
                                  gl->out_ports[p].first + gl->out_ports[p].width - 1, gl->out_ports[p].first);
        n += (size_t)snprintf(w + n, cap - n, ");\n");
        if (n >= cap - 256) {
            free(w);
            return mts_fail(err, MTS_EINVAL, "%s: too many ports for the equivalence wrapper", c->base);
        }
    }
    snprintf(w + n, cap - n, "endmodule\n");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/eq/mts_eq.v", c->work);
    int rc = mts_fs_write_text(path, w, err);
    free(w);
    return rc;
}

static int parse_eq_output(const char *log, uint64_t *vectors, char *first, size_t cap)
{
    FILE *f = fopen(log, "r");
    char line[512];
    int ok = 0;
    first[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long v, m;
        if (!first[0] && !strncmp(line, "mismatch", 8)) {
            line[strcspn(line, "\r\n")] = 0;
            MTS_SNPRINTF(first, cap, "%s", line);
        }
        if (sscanf(line, "vectors %llu mismatches %llu", &v, &m) == 2) {
            *vectors = v;
            ok = 1;
        }
    }
    if (f) fclose(f);
    return ok;
}

/* Compiles the Verilated model. Verilator's runtime (verilated.o,
 * verilated_threads.o) is the same for every design and is most of the
 * compile time, so it is built once per Verilator installation and flow
 * version into <cache>/verilated-<key>/ and copied in (newer than its
 * sources, so make does not rebuild it). */
static int build_eqsim(ctx *c, const char *eqdir, mts_err *err)
{
    char mk[PATH_MAX + 32], line[1024], root[PATH_MAX] = "";
    MTS_SNPRINTF(mk, sizeof mk, "%s/obj/Vmts_eq.mk", eqdir);
    FILE *f = fopen(mk, "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VERILATOR_ROOT = ", 17)) {
            line[strcspn(line, "\r\n")] = 0;
            MTS_SNPRINTF(root, sizeof root, "%s", line + 17);
        }
    if (f) fclose(f);
    hash2 h = {1469598103934665603ull, 0x84222325cbf29ce4ull};
    h_add(&h, FLOW_VERSION, strlen(FLOW_VERSION));
    const char *srcs[] = {"verilated.cpp", "verilated_threads.cpp", "verilated.h", "verilated_config.h"};
    int known = root[0] != 0;
    for (int i = 0; i < 4 && known; i++) {
        char p[PATH_MAX + 64];
        MTS_SNPRINTF(p, sizeof p, "%s/include/%s", root, srcs[i]);
        mts_err ignore;
        if (h_file(&h, p, &ignore)) known = 0;
    }
    char shared[PATH_MAX + 64], cmd[4 * PATH_MAX], log[PATH_MAX + 32];
    MTS_SNPRINTF(shared, sizeof shared, "%s/verilated-%016llx", c->root, (unsigned long long)h.a);
    MTS_SNPRINTF(log, sizeof log, "%s/build.log", c->work);
    const char *objs[] = {"verilated.o", "verilated_threads.o"};
    int have = known;
    for (int i = 0; i < 2 && have; i++) {
        char p[PATH_MAX + 96];
        MTS_SNPRINTF(p, sizeof p, "%s/%s", shared, objs[i]);
        have = access(p, R_OK) == 0;
    }
    if (have) { /* cp gives the copies a fresh mtime */
        MTS_SNPRINTF(cmd, sizeof cmd, "cp ");
        for (int i = 0; i < 2; i++) {
            char p[PATH_MAX + 96];
            MTS_SNPRINTF(p, sizeof p, "%s/%s", shared, objs[i]);
            mts_shq(cmd, sizeof cmd, p);
            strcat(cmd, " ");
        }
        mts_shq(cmd, sizeof cmd, eqdir);
        strcat(cmd, "/obj/");
        have = mts_run_logged(cmd, log) == 0;
    }
    if (!have) {
        MTS_SNPRINTF(cmd, sizeof cmd, "make -C ");
        mts_shq(cmd, sizeof cmd, eqdir);
        strcat(cmd, "/obj -f Vmts_eq.mk verilated.o verilated_threads.o");
        if (c->o->verbose) fprintf(stderr, "mantis synth: %s\n", cmd);
        if (mts_run_logged(cmd, log)) return tool_error(c, "verilator runtime build", log, verilator_markers, err);
        if (known && mts_fs_mkdirs(shared, NULL) == MTS_OK) /* publish: copy to temp names, then rename */
            for (int i = 0; i < 2; i++) {
                char src[PATH_MAX + 96], tmp[PATH_MAX + 128], dst[PATH_MAX + 96];
                MTS_SNPRINTF(src, sizeof src, "%s/obj/%s", eqdir, objs[i]);
                MTS_SNPRINTF(dst, sizeof dst, "%s/%s", shared, objs[i]);
                MTS_SNPRINTF(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid());
                MTS_SNPRINTF(cmd, sizeof cmd, "cp ");
                mts_shq(cmd, sizeof cmd, src);
                strcat(cmd, " ");
                mts_shq(cmd, sizeof cmd, tmp);
                if (mts_run_logged(cmd, log) == 0 && rename(tmp, dst) != 0) unlink(tmp);
            }
    }
    MTS_SNPRINTF(cmd, sizeof cmd, "make -C ");
    mts_shq(cmd, sizeof cmd, eqdir);
    strcat(cmd, "/obj -f Vmts_eq.mk -j 2");
    if (c->o->verbose) fprintf(stderr, "mantis synth: %s\n", cmd);
    if (mts_run_logged(cmd, log)) return tool_error(c, "verilator model build", log, verilator_markers, err);
    return MTS_OK;
}

/* Verilates mts_eq + netlist + cells + RTL, runs the comparison, then checks
 * the C simulator against the Verilated netlist and RTL. */
static int run_equivalence(ctx *c, const char *top, const mts_gl *gl, mts_synth_result *r, mts_err *err)
{
    char eqdir[PATH_MAX + 8], log[PATH_MAX + 32], cmd[8 * PATH_MAX];
    snprintf(eqdir, sizeof eqdir, "%s/eq", c->work);
    int rc = mts_fs_mkdirs(eqdir, err);
    if (!rc) rc = write_wrapper(c, top, gl, err);
    if (rc) return rc;
    snprintf(log, sizeof log, "%s/verilator.log", c->work);
    snprintf(cmd, sizeof cmd, "cd ");
    mts_shq(cmd, sizeof cmd, eqdir);
    strcat(cmd, " && verilator --cc --exe -O1 -Wno-fatal -Wno-lint -Wno-style -Wno-MULTITOP"
                " --top-module mts_eq -Mdir obj -o eqsim +libext+.v+.sv -y ");
    mts_shq(cmd, sizeof cmd, c->design_dir);
    strcat(cmd, " mts_eq.v ../netlist.v ");
    mts_shq(cmd, sizeof cmd, c->cells_v);
    strcat(cmd, " ");
    mts_shq(cmd, sizeof cmd, c->design);
    strcat(cmd, " ");
    mts_shq(cmd, sizeof cmd, c->harness);
    strcat(cmd, " -CFLAGS -O1");
    if (c->o->verbose) fprintf(stderr, "mantis synth: %s\n", cmd);
    if (mts_run_logged(cmd, log)) return tool_error(c, "verilator", log, verilator_markers, err);
    if ((rc = build_eqsim(c, eqdir, err))) return rc;

    uint64_t samples = c->o->eq_samples ? c->o->eq_samples : (1ull << 20);
    r->eq_exhaustive = gl->nin_bits <= EXHAUSTIVE_MAX_BITS;
    snprintf(log, sizeof log, "%s/equivalence.log", c->work);
    snprintf(cmd, sizeof cmd, "cd ");
    mts_shq(cmd, sizeof cmd, eqdir);
    size_t l = strlen(cmd);
    if (r->eq_exhaustive) snprintf(cmd + l, sizeof cmd - l, " && obj/eqsim exhaustive %d", gl->nin_bits);
    else snprintf(cmd + l, sizeof cmd - l, " && obj/eqsim random %d %llu %llu", gl->nin_bits,
                  (unsigned long long)samples, (unsigned long long)EQ_SEED);
    int st = mts_run_logged(cmd, log);
    char first[400];
    uint64_t vectors = 0;
    int parsed = parse_eq_output(log, &vectors, first, sizeof first);
    if (st == 1 && first[0])
        return mts_fail(err, MTS_EMISMATCH, "%s: the mapped netlist differs from the RTL: %s (log: %s)", c->base, first,
                        log);
    if (st || !parsed)
        return mts_fail(err, MTS_ETOOL, "%s: equivalence simulator failed with status %d (log: %s)", c->base, st, log);
    r->eq_vectors = vectors;
    r->eq_checked = 1;

    /* The C simulator (used for power) must agree with Verilator too. */
    uint64_t nv = CSIM_CHECK_VECTORS, s = EQ_SEED ^ 1;
    uint64_t mask = gl->nin_bits >= 64 ? ~0ull : (1ull << gl->nin_bits) - 1;
    uint64_t *vec = malloc(nv * sizeof *vec), *out = malloc(nv * sizeof *out), *pairs = malloc(2 * nv * sizeof *pairs);
    if (!vec || !out || !pairs) rc = mts_fail(err, MTS_ENOMEM, "out of memory");
    char vin[PATH_MAX + 32], vout[PATH_MAX + 32];
    snprintf(vin, sizeof vin, "%s/csim_in.bin", eqdir);
    snprintf(vout, sizeof vout, "%s/csim_out.bin", eqdir);
    if (!rc) {
        for (uint64_t i = 0; i < nv; i++) vec[i] = i == 0 ? 0 : i == 1 ? mask : splitmix64(&s) & mask;
        const void *d[1] = {vec};
        size_t len[1] = {nv * sizeof *vec};
        rc = mts_fs_write_atomic(vin, 1, d, len, err);
    }
    if (!rc) {
        snprintf(cmd, sizeof cmd, "obj/eqsim file csim_in.bin csim_out.bin");
        char full[PATH_MAX * 2];
        snprintf(full, sizeof full, "cd ");
        mts_shq(full, sizeof full, eqdir);
        strncat(full, " && ", sizeof full - strlen(full) - 1);
        strncat(full, cmd, sizeof full - strlen(full) - 1);
        snprintf(log, sizeof log, "%s/csim_check.log", c->work);
        if (mts_run_logged(full, log)) rc = mts_fail(err, MTS_ETOOL, "%s: equivalence simulator failed (log: %s)", c->base, log);
    }
    if (!rc) rc = mts_gl_sim(gl, vec, nv, out, NULL, err);
    if (!rc) {
        FILE *f = fopen(vout, "rb");
        size_t got = f ? fread(pairs, 2 * sizeof *pairs, nv, f) : 0;
        if (f) fclose(f);
        if (got != nv) rc = mts_fail(err, MTS_ETOOL, "%s: %s: short output", c->base, vout);
        for (uint64_t i = 0; i < nv && !rc; i++)
            if (out[i] != pairs[2 * i + 1] || out[i] != pairs[2 * i])
                rc = mts_fail(err, MTS_EMISMATCH,
                              "%s: the C gate-level simulator disagrees with Verilator at in=0x%llx: "
                              "csim=0x%llx verilator gl=0x%llx rtl=0x%llx",
                              c->base, (unsigned long long)vec[i], (unsigned long long)out[i],
                              (unsigned long long)pairs[2 * i + 1], (unsigned long long)pairs[2 * i]);
    }
    free(vec);
    free(out);
    free(pairs);
    if (!rc) { /* the Verilator build is not needed once the check passed */
        char obj[PATH_MAX + 16];
        MTS_SNPRINTF(obj, sizeof obj, "%s/obj", eqdir);
        mts_fs_rmtree(obj);
    }
    return rc;
}

/* synth.txt: what the cache keeps besides the netlist (key value lines). */
static int save_meta(const char *dir, const char *top, const mts_synth_result *r, mts_err *err)
{
    char text[2048], path[PATH_MAX + 16];
    snprintf(text, sizeof text,
             "top %s\narea_um2 %.6f\ndelay_ps %.4f\neq_checked %d\neq_exhaustive %d\neq_vectors %llu\n", top,
             r->area_um2, r->delay_ps, r->eq_checked, r->eq_exhaustive, (unsigned long long)r->eq_vectors);
    snprintf(path, sizeof path, "%s/synth.txt", dir);
    return mts_fs_write_text(path, text, err);
}

static int load_meta(const char *dir, mts_synth_result *r)
{
    char path[PATH_MAX + 16], line[512];
    snprintf(path, sizeof path, "%s/synth.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        char key[64], val[400];
        if (sscanf(line, "%63s %399s", key, val) != 2) continue;
        if (!strcmp(key, "top")) MTS_SNPRINTF(r->top, sizeof r->top, "%s", val), got |= 1;
        else if (!strcmp(key, "area_um2")) r->area_um2 = atof(val), got |= 2;
        else if (!strcmp(key, "delay_ps")) r->delay_ps = atof(val), got |= 4;
        else if (!strcmp(key, "eq_checked")) r->eq_checked = atoi(val), got |= 8;
        else if (!strcmp(key, "eq_exhaustive")) r->eq_exhaustive = atoi(val);
        else if (!strcmp(key, "eq_vectors")) r->eq_vectors = strtoull(val, NULL, 10);
    }
    fclose(f);
    return got == 15;
}

static int resolve_paths(ctx *c, mts_err *err)
{
    const mts_synth_opts *o = c->o;
    if (!o->rtl) return mts_fail(err, MTS_EINVAL, "no design given (--rtl FILE.v)");
    if (!realpath(o->rtl, c->design)) return mts_fail(err, MTS_EIO, "%s: cannot open: %s", o->rtl, strerror(errno));
    snprintf(c->design_dir, sizeof c->design_dir, "%s", c->design);
    *strrchr(c->design_dir, '/') = 0;
    const char *b = strrchr(c->design, '/') + 1;
    snprintf(c->base, sizeof c->base, "%s", b);
    char *dot = strrchr(c->base, '.');
    if (dot) *dot = 0;
    const char *src = getenv("MANTIS_SOURCE_DIR");
    if (!src) src = MANTIS_SOURCE_DIR;
    if (o->liberty) {
        if (!realpath(o->liberty, c->liberty))
            return mts_fail(err, MTS_EIO, "%s: cannot open: %s", o->liberty, strerror(errno));
    } else {
        snprintf(c->liberty, sizeof c->liberty, "%s/synth/mantis45.lib", src);
    }
    snprintf(c->tpl, sizeof c->tpl, "%s/synth/synth.ys", src);
    snprintf(c->cells_v, sizeof c->cells_v, "%s/synth/cells.v", src);
    snprintf(c->harness, sizeof c->harness, "%s/synth/eq_harness.cpp", src);
    if (o->cache_dir) snprintf(c->root, sizeof c->root, "%s", o->cache_dir);
    else if (getenv("MANTIS_CACHE") && *getenv("MANTIS_CACHE")) snprintf(c->root, sizeof c->root, "%s/synth", getenv("MANTIS_CACHE"));
    else if (getenv("HOME")) snprintf(c->root, sizeof c->root, "%s/.cache/mantis/synth", getenv("HOME"));
    else snprintf(c->root, sizeof c->root, "/tmp/mantis-cache/synth");
    const char *paths[] = {c->design, c->design_dir, c->liberty, c->root, c->cells_v};
    for (int i = 0; i < 5; i++)
        if (!safe_word(paths[i]))
            return mts_fail(err, MTS_EINVAL, "%s: paths with spaces or quotes are not supported by the synth flow", paths[i]);
    for (int i = 0; i < o->nparams; i++) {
        const char *eq = strchr(o->param[i], '=');
        if (!eq || eq == o->param[i] || !eq[1] || !safe_word(o->param[i]))
            return mts_fail(err, MTS_EINVAL, "parameter '%s': expected NAME=VALUE", o->param[i]);
    }
    return MTS_OK;
}

/* Power of the operand stream through the netlist. */
static int measure_power(ctx *c, const mts_gl *gl, mts_synth_result *r, mts_err *err)
{
    const mts_synth_opts *o = c->o;
    uint64_t n;
    uint64_t *vec = NULL;
    r->clock_ghz = o->clock_ghz > 0 ? o->clock_ghz : 1.0;
    if (o->power_trace) {
        mts_trace t;
        int rc = mts_trace_read(o->power_trace, &t, err);
        if (rc) return rc;
        if (gl->nin_ports != 2 || (int)t.info.width_a != gl->in_ports[0].width ||
            (int)t.info.width_b != gl->in_ports[1].width) {
            rc = mts_fail(err, MTS_EINVAL, "%s: trace operands are %u and %u bits; design %s has %d input port(s)%s%d/%d bits",
                          o->power_trace, t.info.width_a, t.info.width_b, c->base, gl->nin_ports,
                          gl->nin_ports == 2 ? " of " : ", ", gl->in_ports[0].width,
                          gl->nin_ports > 1 ? gl->in_ports[1].width : 0);
            mts_trace_free(&t);
            return rc;
        }
        if (t.info.count < 2) {
            mts_trace_free(&t);
            return mts_fail(err, MTS_EINVAL, "%s: a power trace needs at least 2 records", o->power_trace);
        }
        n = t.info.count;
        vec = malloc(n * sizeof *vec);
        if (vec)
            for (uint64_t i = 0; i < n; i++) vec[i] = t.a[i] | (t.b[i] << gl->in_ports[1].first);
        mts_trace_free(&t);
        snprintf(r->stream, sizeof r->stream, "trace");
        r->seed = 0;
    } else {
        n = o->power_ops ? o->power_ops : 65536;
        if (n < 2) return mts_fail(err, MTS_EINVAL, "power stream of %llu operations (need >= 2)", (unsigned long long)n);
        uint64_t s = o->seed;
        uint64_t mask = gl->nin_bits >= 64 ? ~0ull : (1ull << gl->nin_bits) - 1;
        vec = malloc(n * sizeof *vec);
        if (vec)
            for (uint64_t i = 0; i < n; i++) vec[i] = splitmix64(&s) & mask;
        snprintf(r->stream, sizeof r->stream, "uniform");
        r->seed = o->seed;
    }
    uint64_t *tog = calloc((size_t)gl->nnets, sizeof *tog);
    if (!vec || !tog) {
        free(vec);
        free(tog);
        return mts_fail(err, MTS_ENOMEM, "out of memory for %llu operand vectors", (unsigned long long)n);
    }
    int rc = mts_gl_sim(gl, vec, n, NULL, tog, err);
    if (!rc) {
        double e_fj = 0, tsum = 0;
        for (int i = 0; i < gl->nnets; i++) {
            e_fj += (double)tog[i] * gl->e_tog_fj[i];
            tsum += (double)tog[i];
        }
        double trans = (double)(n - 1); /* the first vector only sets the state */
        r->power_ops = n;
        r->toggles_per_op = tsum / trans;
        r->energy_pj = e_fj / trans / 1000.0;
        r->dyn_uw = r->energy_pj * r->clock_ghz * 1000.0; /* 1 pJ x 1 GHz = 1 mW */
        r->leak_uw = gl->leak_nw / 1000.0;
        r->total_uw = r->dyn_uw + r->leak_uw;
    }
    free(vec);
    free(tog);
    return rc;
}

static int fill_cells(ctx *c, const mts_gl *gl, mts_synth_result *r)
{
    r->ncells = 0;
    r->ntypes = 0;
    for (int k = 0; k < gl->nnodes; k++) {
        if (gl->nodes[k].cell < 0) continue;
        const char *name = c->lib.cells[gl->nodes[k].cell].name;
        int t = 0;
        while (t < r->ntypes && strcmp(r->cells[t].name, name)) t++;
        if (t == r->ntypes && t < MTS_SYNTH_MAX_CELLTYPES) {
            snprintf(r->cells[t].name, sizeof r->cells[t].name, "%s", name);
            r->cells[t].count = 0;
            r->ntypes++;
        }
        if (t < r->ntypes) r->cells[t].count++;
        r->ncells++;
    }
    const mts_lcell *nand = NULL;
    for (int i = 0; i < c->lib.ncells && !nand; i++)
        if (strstr(c->lib.cells[i].name, "NAND2")) nand = &c->lib.cells[i];
    r->nand2_eq = nand && nand->area > 0 ? r->area_um2 / nand->area : 0;
    r->logic_depth = gl->depth_max;
    r->in_bits = gl->nin_bits;
    r->out_bits = gl->nout_bits;
    return MTS_OK;
}

int mts_synth_run(const mts_synth_opts *o, mts_synth_result *r, mts_err *err)
{
    memset(r, 0, sizeof *r);
    ctx *c = calloc(1, sizeof *c);
    if (!c) return mts_fail(err, MTS_ENOMEM, "out of memory");
    c->o = o;
    int rc = resolve_paths(c, err);
    if (!rc && o->nparams > MTS_SYNTH_MAX_PARAMS) rc = mts_fail(err, MTS_EINVAL, "too many --param (max %d)", MTS_SYNTH_MAX_PARAMS);
    if (!rc) rc = mts_lib_load(c->liberty, &c->lib, err);
    hash2 h = {1469598103934665603ull, 0x84222325cbf29ce4ull};
    if (!rc) {
        h_add(&h, FLOW_VERSION, strlen(FLOW_VERSION));
        h_add(&h, c->base, strlen(c->base));
        rc = h_file(&h, c->design, err);
    }
    if (!rc) rc = h_dir_sources(&h, c->design_dir, err);
    for (int i = 0; !rc && i < o->nparams; i++) h_add(&h, o->param[i], strlen(o->param[i]));
    if (!rc) rc = h_file(&h, c->liberty, err);
    if (!rc) rc = h_file(&h, c->tpl, err);
    if (!rc) rc = h_file(&h, c->cells_v, err);
    if (!rc) rc = h_file(&h, c->harness, err);
    if (!rc) {
        uint64_t extra[2] = {o->eq_samples, (uint64_t)(o->no_equiv != 0)};
        h_add(&h, extra, sizeof extra);
        snprintf(r->hash, sizeof r->hash, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
        MTS_SNPRINTF(c->entry, sizeof c->entry, "%s/%s", c->root, r->hash);
        MTS_SNPRINTF(r->dir, sizeof r->dir, "%s", c->entry);
        snprintf(r->design, sizeof r->design, "%s", strrchr(c->design, '/') + 1);
        for (int i = 0; i < o->nparams; i++) {
            size_t l = strlen(r->params);
            snprintf(r->params + l, sizeof r->params - l, "%s%s", i ? "," : "", o->param[i]);
        }
        rc = mts_fs_mkdirs(c->root, err);
    }
    mts_gl gl = {0};
    int have_gl = 0;
    if (!rc && load_meta(c->entry, r)) {
        r->cache_hit = 1;
        char blif[PATH_MAX + 16];
        snprintf(blif, sizeof blif, "%s/netlist.blif", c->entry);
        rc = mts_gl_load(blif, &c->lib, &gl, err);
        have_gl = !rc;
    } else if (!rc) {
        if (!mts_proc_which("yosys")) rc = mts_fail(err, MTS_ETOOL, "%s: yosys not found on PATH", c->base);
        else if (!o->no_equiv && !mts_proc_which("verilator"))
            rc = mts_fail(err, MTS_ETOOL, "%s: verilator not found on PATH (needed for the equivalence check)", c->base);
        MTS_SNPRINTF(c->work, sizeof c->work, "%s.tmp.%ld", c->entry, (long)getpid());
        if (!rc) {
            mts_fs_rmtree(c->work);
            rc = mts_fs_mkdirs(c->work, err);
        }
        char top[128];
        if (!rc) rc = run_yosys(c, top, sizeof top, &r->area_um2, &r->delay_ps, err);
        if (!rc) {
            char blif[PATH_MAX + 16];
            snprintf(blif, sizeof blif, "%s/netlist.blif", c->work);
            rc = mts_gl_load(blif, &c->lib, &gl, err);
            have_gl = !rc;
            if (rc && err) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", err->msg);
                rc = mts_fail(err, rc, "%s: %s", c->base, msg);
            }
        }
        if (!rc && gl.nseq)
            rc = mts_fail(err, MTS_EUNSUPPORTED, "%s: %d flip-flops after synthesis; the synth flow handles combinational designs only",
                          c->base, gl.nseq);
        if (!rc && (gl.nin_bits < 1 || gl.nout_bits < 1))
            rc = mts_fail(err, MTS_EUNSUPPORTED, "%s: design has no inputs or no outputs after synthesis", c->base);
        if (!rc && fabs(gl.area - r->area_um2) > 1e-3 * (1 + r->area_um2))
            rc = mts_fail(err, MTS_EFORMAT, "%s: netlist area %.3f um^2 disagrees with yosys stat %.3f um^2", c->base,
                          gl.area, r->area_um2);
        if (!rc) snprintf(r->top, sizeof r->top, "%s", top);
        if (!rc && !o->no_equiv) rc = run_equivalence(c, top, &gl, r, err);
        if (!rc) rc = save_meta(c->work, top, r, err);
        if (!rc) {
            if (rename(c->work, c->entry) != 0) { /* another process won the race: use its entry */
                mts_fs_rmtree(c->work);
                if (!load_meta(c->entry, r))
                    rc = mts_fail(err, MTS_EIO, "%s: cannot install cache entry: %s", c->entry, strerror(errno));
            }
        } else if (c->work[0]) {
            struct stat sb;
            if (stat(c->work, &sb) == 0) { /* keep the logs of a failed run where the message says */
                char failed[PATH_MAX + 16];
                MTS_SNPRINTF(failed, sizeof failed, "%s.failed", c->entry);
                mts_fs_rmtree(failed);
                if (rename(c->work, failed) == 0 && err) {
                    char msg[sizeof err->msg], *at = strstr(err->msg, c->work);
                    if (at) {
                        MTS_SNPRINTF(msg, sizeof msg, "%.*s%s%s", (int)(at - err->msg), err->msg, failed,
                                     at + strlen(c->work));
                        memcpy(err->msg, msg, sizeof msg);
                    }
                }
            }
        }
    }
    if (!rc) rc = fill_cells(c, &gl, r);
    if (!rc) rc = measure_power(c, &gl, r, err);
    if (!rc) {
        char path[PATH_MAX + 32], row[2048];
        snprintf(path, sizeof path, "%s/result.json", c->entry);
        rc = mts_synth_write_json(r, path, err);
        mts_synth_csv_row(r, row, sizeof row);
        size_t l = strlen(row);
        snprintf(path, sizeof path, "%s/result.csv", c->entry);
        const void *d[4] = {mts_synth_csv_header(), "\n", row, "\n"};
        size_t len[4] = {strlen(mts_synth_csv_header()), 1, l, 1};
        if (!rc) rc = mts_fs_write_atomic(path, 4, d, len, err);
    }
    if (have_gl) mts_gl_free(&gl);
    free(c);
    return rc;
}
