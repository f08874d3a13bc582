/* detect.c - the drop-in contract: which shape a Verilog design has.
 *
 * Verilator's front end (--xml-only) reads the design, so everything a real
 * parser knows is available: modules per file, who instantiates whom, port
 * directions and elaborated widths, parameter values after -G overrides.
 * Pass 1 (no top) finds the top module by the file rules; pass 2 elaborates
 * that top with the user's overrides and reads its ports. Rules: docs/rtl.md. */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/parse.h"
#include "mantis/proc.h"
#include "rtl_internal.h"

#define MAX_PORTS 16
#define MAX_PARAMS 64

typedef struct {
    char name[64];
    int dir;   /* 1 input, 2 output, 3 inout */
    int width; /* 0: not a plain packed vector */
    int pin;
} port;

typedef struct {
    char name[64];
    long long ival;
    int is_int;     /* fits an integer */
    char sval[64];  /* the value read as an ASCII string (string parameters) */
    int is_local;   /* a localparam (read like a parameter, but -G cannot set it) */
} param;

typedef struct {
    port port[MAX_PORTS];
    int nport;
    param par[MAX_PARAMS];
    int npar;
} elab;

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* A Verilator message with the linked path (d->vpath) shown as the user's. */
static void unlink_path(const char *msg, const rtl_design *d, char *out, size_t n)
{
    const char *hit = strcmp(d->vpath, d->path) ? strstr(msg, d->vpath) : NULL;
    if (!hit) snprintf(out, n, "%s", msg);
    else mts_fs_pathf(out, n, "%.*s%s%s", (int)(hit - msg), msg, d->path, hit + strlen(d->vpath)); /* cut if long */
}

/* Verilator's --xml-only into tmpdir/<tag>.xml, log in tmpdir/<tag>.log. */
static int run_front_end(const mts_rtl_opts *o, const char *tmpdir, const char *tag, const char *top,
                         const rtl_design *d, rtl_xml *doc, mts_err *err)
{
    char xml[1200], log[1200], mdir[1200];
    snprintf(xml, sizeof xml, "%s/%s.xml", tmpdir, tag);
    snprintf(log, sizeof log, "%s/%s.log", tmpdir, tag);
    snprintf(mdir, sizeof mdir, "%s/%s.obj", tmpdir, tag);
    char *argv[64];
    int n = 0;
    char gbuf[MTS_RTL_MAX_PARAMS][300];
    argv[n++] = (char *)rtl_verilator();
    argv[n++] = "--xml-only";
    argv[n++] = "--xml-output";
    argv[n++] = xml;
    argv[n++] = "-Mdir";
    argv[n++] = mdir;
    n = rtl_verilator_common(argv, n, gbuf, d->nvparams, d->vparam, d->vdir, top);
    argv[n++] = (char *)d->vpath;
    argv[n] = NULL;
    mts_proc_io io = {.log = log, .log_append = 1, .echo = o->verbose ? "mantis rtl" : NULL};
    int rc = mts_proc_run(argv, &io);
    if (rc == 127)
        return mts_fail(err, MTS_ENOTOOL, "%s: could not run '%s' (install Verilator 5 or set MANTIS_VERILATOR)",
                        d->path, rtl_verilator());
    if (rc != 0) {
        char first[400], shown[600];
        rtl_log_first_error(log, first, sizeof first);
        unlink_path(first, d, shown, sizeof shown);
        return mts_fail(err, MTS_ETOOL, "verilator: %s", shown[0] ? shown : "failed without a message");
    }
    uint8_t *raw;
    size_t len;
    if (mts_fs_read(xml, &raw, &len, NULL)) return mts_fail(err, MTS_ETOOL, "%s: Verilator wrote no XML (%s)", d->path, xml);
    char *text = (char *)raw;
    rc = rtl_xml_parse(text, doc, d->path, err);
    free(text);
    return rc;
}

/* The file id ("c") of the design file in <files>, "" if absent. */
static void design_file_id(const rtl_xml *doc, const char *path, char *id, size_t n)
{
    id[0] = '\0';
    /* Verilator records the name in its own spelling (a/../b.v, ./x.v): compare real paths */
    char want[PATH_MAX], got[PATH_MAX];
    int have_real = realpath(path, want) != NULL;
    for (int i = 0; i < doc->n; i++) {
        const rtl_xml_node *nd = &doc->node[i];
        if (strcmp(nd->name, "file") || nd->parent < 0 || strcmp(doc->node[nd->parent].name, "files")) continue;
        const char *fn = rtl_xml_attr(nd, "filename"), *fid = rtl_xml_attr(nd, "id");
        if (!fn || !fid) continue;
        if (!strcmp(fn, path) || (have_real && realpath(fn, got) && !strcmp(got, want))) snprintf(id, n, "%s", fid);
    }
}

static int loc_in_file(const rtl_xml_node *nd, const char *id)
{
    const char *loc = rtl_xml_attr(nd, "loc");
    size_t l = strlen(id);
    return loc && l && !strncmp(loc, id, l) && loc[l] == ',';
}

/* Pass 1: the top module of d->path by the file rules. */
static int choose_top(const rtl_xml *doc, const rtl_design *d, char *top, size_t n, mts_err *err)
{
    char id[16];
    design_file_id(doc, d->vpath, id, sizeof id);
    char stem[256];
    mts_fs_pathf(stem, sizeof stem, "%s", base_name(d->path)); /* a longer name cannot match a module anyway */
    char *dot = strrchr(stem, '.');
    if (dot) *dot = '\0';
    const char *mods[64];
    int nmods = 0;
    for (int i = 0; i < doc->n && nmods < 64; i++) {
        const rtl_xml_node *nd = &doc->node[i];
        if (strcmp(nd->name, "module") || !loc_in_file(nd, id)) continue;
        const char *on = rtl_xml_attr(nd, "origName");
        if (!on) on = rtl_xml_attr(nd, "name");
        if (!on) continue;
        int dup = 0;
        for (int k = 0; k < nmods; k++) dup |= !strcmp(mods[k], on);
        if (!dup) mods[nmods++] = on;
    }
    if (nmods == 0) return mts_fail(err, MTS_EINVAL, "%s: no module is defined in this file", d->path);
    for (int k = 0; k < nmods; k++)
        if (!strcmp(mods[k], stem)) {
            snprintf(top, n, "%s", mods[k]);
            return MTS_OK;
        }
    /* else: the one module of the file that no other module instantiates */
    const char *cand[64];
    int ncand = 0;
    for (int k = 0; k < nmods; k++) {
        int used = 0;
        for (int i = 0; i < doc->n && !used; i++) {
            const rtl_xml_node *nd = &doc->node[i];
            if (strcmp(nd->name, "cell") || nd->parent < 0 || strcmp(doc->node[nd->parent].name, "cell")) continue;
            const char *sub = rtl_xml_attr(nd, "submodname");
            /* parameterised copies are named orig__Wn...; compare the stem */
            if (sub && !strncmp(sub, mods[k], strlen(mods[k])) &&
                (sub[strlen(mods[k])] == '\0' || !strncmp(sub + strlen(mods[k]), "__", 2)))
                used = 1;
        }
        if (!used) cand[ncand++] = mods[k];
    }
    if (ncand == 1) {
        snprintf(top, n, "%s", cand[0]);
        return MTS_OK;
    }
    char list[400] = "";
    for (int k = 0; k < ncand; k++) {
        strncat(list, cand[k], sizeof list - strlen(list) - 3);
        if (k + 1 < ncand) strcat(list, ", ");
    }
    return mts_fail(err, MTS_EINVAL,
                    "%s: cannot choose the top module: no module is named '%s' and %d modules are not "
                    "instantiated by others (%s); rename the file after the top module",
                    d->path, stem, ncand, list);
}

/* Verilator constants look like 32'sh5, 40'h666c6f6174, 1'h1: read both as
 * an integer (when it fits) and as an ASCII string (string parameters). */
static void read_const(const char *s, param *p)
{
    p->is_int = 0;
    p->sval[0] = '\0';
    const char *q = strchr(s, '\'');
    if (!q) return;
    int width = atoi(s), is_signed = q[1] == 's';
    q += is_signed ? 2 : 1;
    if (*q != 'h') return;
    q++;
    size_t len = strlen(q);
    if (width <= 63 && len <= 16) {
        p->ival = (long long)strtoull(q, NULL, 16);
        if (is_signed && width > 0 && width < 63 && ((p->ival >> (width - 1)) & 1)) p->ival -= 1ll << width;
        p->is_int = 1;
    }
    /* string: two hex digits per character from the left, after padding to
     * an even count; leading zero bytes are padding of the declared width */
    char str[sizeof p->sval];
    size_t k = 0, odd = len % 2;
    for (size_t i = 0; i < (len + odd) / 2; i++) {
        char hb[3] = {0};
        if (odd && i == 0) hb[0] = q[0];
        else hb[0] = q[2 * i - odd], hb[1] = q[2 * i - odd + 1];
        int c = (int)strtol(hb, NULL, 16);
        if (c == 0 && k == 0) continue;
        if (!isprint(c) || k + 1 >= sizeof str) return;
        str[k++] = (char)c;
    }
    str[k] = '\0';
    memcpy(p->sval, str, k + 1);
}

/* Width of dtype `id` if it is a plain packed vector or bit; 0 otherwise. */
static int dtype_width(const rtl_xml *doc, const char *id)
{
    for (int i = 0; i < doc->n; i++) {
        const rtl_xml_node *nd = &doc->node[i];
        const char *nid = rtl_xml_attr(nd, "id");
        if (!nid || strcmp(nid, id) || nd->parent < 0 || strcmp(doc->node[nd->parent].name, "typetable"))
            continue;
        if (strcmp(nd->name, "basicdtype")) return 0;
        const char *l = rtl_xml_attr(nd, "left"), *r = rtl_xml_attr(nd, "right");
        if (!l || !r) return 1;
        int w = atoi(l) - atoi(r);
        return (w < 0 ? -w : w) + 1;
    }
    return 0;
}

/* Pass 2: ports and parameters of the elaborated top; files read. */
static int read_top(const rtl_xml *doc, rtl_design *d, elab *el, mts_err *err)
{
    int topi = -1;
    for (int i = 0; i < doc->n; i++) {
        const char *t = rtl_xml_attr(&doc->node[i], "topModule");
        if (!strcmp(doc->node[i].name, "module") && t && !strcmp(t, "1")) topi = i;
    }
    if (topi < 0) return mts_fail(err, MTS_ETOOL, "%s: Verilator XML names no top module", d->path);
    memset(el, 0, sizeof *el);
    for (int i = topi + 1; i < doc->n && doc->node[i].depth > doc->node[topi].depth; i++) {
        const rtl_xml_node *nd = &doc->node[i];
        if (strcmp(nd->name, "var") || nd->parent != topi) continue;
        const char *nm = rtl_xml_attr(nd, "origName");
        if (!nm) nm = rtl_xml_attr(nd, "name");
        if (!nm) continue;
        const char *dir = rtl_xml_attr(nd, "dir"), *isp = rtl_xml_attr(nd, "param");
        const char *isl = rtl_xml_attr(nd, "localparam"); /* Verilator 5: localparam="true" */
        int is_local = isl && !strcmp(isl, "true");
        if (is_local) isp = isl;
        if (dir && el->nport < MAX_PORTS) {
            port *p = &el->port[el->nport++];
            snprintf(p->name, sizeof p->name, "%s", nm);
            p->dir = !strcmp(dir, "input") ? 1 : !strcmp(dir, "output") ? 2 : 3;
            const char *dt = rtl_xml_attr(nd, "dtype_id"), *pin = rtl_xml_attr(nd, "pinIndex");
            p->width = dt ? dtype_width(doc, dt) : 0;
            p->pin = pin ? atoi(pin) : el->nport;
        } else if (isp && !strcmp(isp, "true") && el->npar < MAX_PARAMS) {
            param *pr = &el->par[el->npar++];
            snprintf(pr->name, sizeof pr->name, "%s", nm);
            pr->is_local = is_local;
            if (i + 1 < doc->n && doc->node[i + 1].parent == i && !strcmp(doc->node[i + 1].name, "const")) {
                const char *v = rtl_xml_attr(&doc->node[i + 1], "name");
                if (v) read_const(v, pr);
            }
        }
    }
    /* order ports by pin index so "first input" means the declaration order */
    for (int i = 1; i < el->nport; i++)
        for (int k = i; k > 0 && el->port[k].pin < el->port[k - 1].pin; k--) {
            port t = el->port[k];
            el->port[k] = el->port[k - 1];
            el->port[k - 1] = t;
        }
    const char *tn = rtl_xml_attr(&doc->node[topi], "origName");
    snprintf(d->info.top, sizeof d->info.top, "%s", tn ? tn : rtl_xml_attr(&doc->node[topi], "name"));
    d->nfiles = 0;
    for (int i = 0; i < doc->n; i++) {
        const rtl_xml_node *nd = &doc->node[i];
        if (strcmp(nd->name, "file") || nd->parent < 0 || strcmp(doc->node[nd->parent].name, "files")) continue;
        const char *fn = rtl_xml_attr(nd, "filename");
        if (!fn || fn[0] == '<' || d->nfiles == 32) continue;
        snprintf(d->files[d->nfiles++], sizeof d->files[0], "%s", fn);
    }
    return MTS_OK;
}

/* A parameter by any of its accepted names (case-insensitive). */
static const param *find_param(const elab *el, const char *n1, const char *n2)
{
    for (int i = 0; i < el->npar; i++)
        if (!strcasecmp(el->par[i].name, n1) || (n2 && !strcasecmp(el->par[i].name, n2))) return &el->par[i];
    return NULL;
}

static int int_param(const elab *el, const char *n1, const char *n2, int dflt)
{
    const param *p = find_param(el, n1, n2);
    return p && p->is_int ? (int)p->ival : dflt;
}

static void describe_ports(const elab *el, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < el->nport; i++) {
        const port *p = &el->port[i];
        char one[128];
        snprintf(one, sizeof one, "%s%s %s[%d]", i ? ", " : "", p->dir == 1 ? "input" : p->dir == 2 ? "output" : "inout",
                 p->name, p->width);
        strncat(buf, one, n - strlen(buf) - 1);
    }
    if (!el->nport) snprintf(buf, n, "none");
}

static int no_shape(const rtl_design *d, const elab *el, const char *why, mts_err *err)
{
    char ports[300];
    describe_ports(el, ports, sizeof ports);
    return mts_fail(err, MTS_EINVAL,
                    "%s: top module '%s' fits no drop-in shape (%s); its ports: %s. Shapes: significand "
                    "a[M], b[M] -> p[2M+2]; float a, b, y[1+E+M]; integer a[n], b[n] -> y[2n] (n<=8); "
                    "accumulator p, s -> y (docs/rtl.md)",
                    d->path, d->info.top, why, ports);
}

static int q_from_params(const elab *el, const char *m, const char *e, const char *b, int uf, mts_qfmt *q)
{
    char n1[32], n2[32];
    snprintf(n1, sizeof n1, "MANTIS_%s", m);
    q->M = int_param(el, n1, m, -1);
    snprintf(n1, sizeof n1, "MANTIS_%s", e);
    q->E = int_param(el, n1, e, -1);
    snprintf(n1, sizeof n1, "MANTIS_%s", b);
    snprintf(n2, sizeof n2, "%s", b);
    q->bias = int_param(el, n1, n2, q->E > 0 ? 1 << (q->E - 1) : 0);
    q->underflow = uf;
    q->rnd = MTS_RTZ;
    return q->M >= 1 && q->E >= 1;
}

/* Prefixes err's message with "path: what: " (copying, since mts_fail writes err). */
static int prefix_err(mts_err *err, int rc, const char *path, const char *what)
{
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
    return mts_fail(err, rc, "%s: %s: %s", path, what, msg);
}

/* The three ports in contract order (x0, x1: the inputs, a before b and p
 * before s by name, else as declared; y: the output), checked for count,
 * direction and width, and recorded in d->info. */
static int pick_ports(rtl_design *d, const elab *el, const port **px0, const port **px1, const port **py,
                      mts_err *err)
{
    mts_rtl_info *in = &d->info;
    const port *ins[MAX_PORTS], *outs[MAX_PORTS];
    int ni = 0, no = 0;
    for (int i = 0; i < el->nport; i++) {
        if (el->port[i].dir == 1) ins[ni++] = &el->port[i];
        else if (el->port[i].dir == 2) outs[no++] = &el->port[i];
        else return no_shape(d, el, "inout ports are not supported", err);
    }
    if (ni != 2 || no != 1) return no_shape(d, el, "expected exactly two inputs and one output", err);
    const port *x0 = ins[0], *x1 = ins[1], *y = outs[0];
    if (!strcasecmp(x0->name, "b") && !strcasecmp(x1->name, "a")) x0 = ins[1], x1 = ins[0];
    if (!strcasecmp(x0->name, "s") && !strcasecmp(x1->name, "p")) x0 = ins[1], x1 = ins[0];
    for (int i = 0; i < 2; i++)
        if (ins[i]->width < 1 || ins[i]->width > 32)
            return no_shape(d, el, "inputs must be packed vectors of 1..32 bits", err);
    if (y->width < 1 || y->width > 64) return no_shape(d, el, "the output must be a packed vector of 1..64 bits", err);
    snprintf(in->in0, sizeof in->in0, "%s", x0->name);
    snprintf(in->in1, sizeof in->in1, "%s", x1->name);
    snprintf(in->out, sizeof in->out, "%s", y->name);
    in->w0 = x0->width;
    in->w1 = x1->width;
    in->wout = y->width;
    *px0 = x0;
    *px1 = x1;
    *py = y;
    return MTS_OK;
}

/* The kind: --kind, else parameter MANTIS_KIND, else guessed from port names
 * (p, s: accumulator) and widths (integer whenever that reading fits). */
static int choose_kind(const mts_rtl_opts *o, const rtl_design *d, const elab *el, const port *x0, const port *x1,
                       const port *y, mts_rtl_kind *kind, mts_err *err)
{
    mts_rtl_kind k = o->kind;
    if (k == MTS_RTL_AUTO) {
        const param *kp = find_param(el, "MANTIS_KIND", NULL);
        if (kp && kp->sval[0]) {
            int rc = mts_rtl_kind_parse(kp->sval, &k, err);
            if (rc) return prefix_err(err, rc, d->path, "parameter MANTIS_KIND");
        }
    }
    int canon_ps = !strcasecmp(x0->name, "p") && !strcasecmp(x1->name, "s");
    int w = x0->width;
    if (k == MTS_RTL_AUTO) {
        if (canon_ps)
            k = MTS_RTL_ACC;
        else if (x0->width != x1->width)
            return no_shape(d, el, "the two inputs differ in width", err);
        else if (y->width == 2 * w && w <= 8)
            k = MTS_RTL_INT; /* the default when an integer reading fits */
        else if (y->width == 2 * w + 2)
            k = MTS_RTL_SIG;
        else if (y->width == w)
            k = MTS_RTL_FLOAT;
        else
            return no_shape(d, el, "the output width matches no shape", err);
    }
    *kind = k;
    return MTS_OK;
}

/* a[M], b[M] -> p[2M+2]; the format around it from MANTIS_E/BIAS/IEEE. */
static int shape_sig(rtl_design *d, const elab *el, const port *x1, const port *y, int w, mts_err *err)
{
    mts_format *f = &d->info.fmt;
    if (x1->width != w || y->width != 2 * w + 2)
        return no_shape(d, el, "a significand multiplier needs a[M], b[M], p[2M+2]", err);
    if (w > 23) return no_shape(d, el, "a significand multiplier needs M <= 23", err);
    f->E = int_param(el, "MANTIS_E", NULL, 8);
    f->M = w;
    f->bias = int_param(el, "MANTIS_BIAS", NULL, (1 << (f->E - 1)) - 1);
    f->ieee = int_param(el, "MANTIS_IEEE", NULL, 1);
    int rc = mts_format_check(f, err);
    return rc ? prefix_err(err, rc, d->path, "format from MANTIS_E/MANTIS_BIAS") : MTS_OK;
}

/* a, b, y of 1+E+M bits; E from MANTIS_E (or E), M what is left. */
static int shape_float(rtl_design *d, const elab *el, const port *x1, const port *y, int w, mts_err *err)
{
    mts_format *f = &d->info.fmt;
    if (x1->width != w || y->width != w) return no_shape(d, el, "a float multiplier needs a, b, y of equal width", err);
    f->E = int_param(el, "MANTIS_E", "E", 8);
    f->M = w - 1 - f->E;
    f->bias = int_param(el, "MANTIS_BIAS", "BIAS", (1 << (f->E - 1)) - 1);
    f->ieee = int_param(el, "MANTIS_IEEE", NULL, 1);
    if (f->M < 1)
        return mts_fail(err, MTS_EINVAL,
                        "%s: float design '%s' is %d bits wide but E=%d leaves no mantissa; declare "
                        "parameter MANTIS_E",
                        d->path, d->info.top, w, f->E);
    int rc = mts_format_check(f, err);
    return rc ? prefix_err(err, rc, d->path, "float format from MANTIS_E/MANTIS_BIAS") : MTS_OK;
}

/* a[n], b[n] -> y[2n], n <= 8. Signed: as forced (--signed/--unsigned, then
 * --param MANTIS_SIGNED=V), else as declared (MANTIS_SIGNED or SIGNED), else
 * left to the sweep in mts_rtl_open (sign_src DEFAULT until then). */
static int shape_int(const mts_rtl_opts *o, rtl_design *d, const elab *el, const port *x1, const port *y, int w,
                     mts_err *err)
{
    if (x1->width != w || w > 8 || y->width != 2 * w)
        return no_shape(d, el, "an integer multiplier needs a[n], b[n], y[2n] with n <= 8", err);
    mts_rtl_info *in = &d->info;
    in->int_bits = w;
    const param *sp = find_param(el, "MANTIS_SIGNED", "SIGNED");
    if (o->int_sign != MTS_RTL_SIGN_AUTO) {
        in->int_signed = o->int_sign == MTS_RTL_SIGN_SIGNED;
        in->sign_src = MTS_RTL_SIGNSRC_OPTION;
    } else if (d->sign_param >= 0) {
        in->int_signed = d->sign_param;
        in->sign_src = MTS_RTL_SIGNSRC_OPTION;
    } else if (sp && sp->is_int) {
        in->int_signed = sp->ival != 0;
        in->sign_src = MTS_RTL_SIGNSRC_DECLARED;
    } else {
        in->int_signed = 0;
        in->sign_src = MTS_RTL_SIGNSRC_DEFAULT;
    }
    return MTS_OK;
}

/* p, s -> y: the FMAq formats from PM/PE/PB, AM/AE/AB and UF; the port
 * widths must be those of their fmaq.h codes. */
static int shape_acc(rtl_design *d, const elab *el, const port *x0, const port *x1, const port *y, mts_err *err)
{
    mts_rtl_info *in = &d->info;
    int uf = int_param(el, "MANTIS_UF", "UF", 1) != 0;
    if (!q_from_params(el, "PM", "PE", "PB", uf, &in->qprod) || !q_from_params(el, "AM", "AE", "AB", uf, &in->qacc))
        return mts_fail(err, MTS_EINVAL,
                        "%s: accumulator '%s' must declare parameters PM, PE (product format) and AM, AE "
                        "(accumulator format); PB, AB (biases) and UF are optional",
                        d->path, in->top);
    int rc = mts_qfmt_check(&in->qprod, err);
    if (!rc) rc = mts_qfmt_check(&in->qacc, err);
    if (rc) return prefix_err(err, rc, d->path, "accumulator formats from PM/PE/PB, AM/AE/AB");
    if (x0->width != mts_q_width(&in->qprod) || x1->width != mts_q_width(&in->qacc) ||
        y->width != mts_q_width(&in->qacc))
        return no_shape(d, el, "accumulator ports must be p[2+PE+PM], s[2+AE+AM], y[2+AE+AM] (fmaq.h codes)", err);
    return MTS_OK;
}

/* Decides the shape from names, widths, MANTIS_KIND and --kind. */
static int classify(const mts_rtl_opts *o, rtl_design *d, const elab *el, mts_err *err)
{
    const port *x0 = NULL, *x1 = NULL, *y = NULL;
    int rc = pick_ports(d, el, &x0, &x1, &y, err);
    if (!rc) rc = choose_kind(o, d, el, x0, x1, y, &d->info.kind, err);
    if (rc) return rc;
    int w = x0->width;
    switch (d->info.kind) {
    case MTS_RTL_SIG: rc = shape_sig(d, el, x1, y, w, err); break;
    case MTS_RTL_FLOAT: rc = shape_float(d, el, x1, y, w, err); break;
    case MTS_RTL_INT: rc = shape_int(o, d, el, x1, y, w, err); break;
    case MTS_RTL_ACC: rc = shape_acc(d, el, x0, x1, y, err); break;
    default: return mts_fail(err, MTS_EINVAL, "%s: unknown kind", d->path);
    }
    if (rc) return rc;
    mts_fs_pathf(d->info.name, sizeof d->info.name, "rtl:%s", d->info.top); /* a label; long names are cut */
    return MTS_OK;
}

/* d->vpath, d->vdir: the design as Verilator can take it. A path it would
 * mangle goes through links in tmpdir: tmpdir/src -> the real directory (-y),
 * and the file itself as tmpdir/src/NAME, or tmpdir/design.v when its own
 * name is the problem. */
static int verilator_paths(rtl_design *d, const char *tmpdir, mts_err *err)
{
    if (d->path[0] == '-') /* relative, but would read as an option */
        snprintf(d->vpath, sizeof d->vpath, "./%s", d->path);
    else
        snprintf(d->vpath, sizeof d->vpath, "%s", d->path);
    snprintf(d->vdir, sizeof d->vdir, "%s", d->dir);
    if (mts_rtl_path_plain(d->vpath) && mts_rtl_path_plain(d->vdir)) return MTS_OK;
    if (!mts_rtl_path_plain(tmpdir))
        return mts_fail(err, MTS_EINVAL,
                        "%s: the name holds characters Verilator cannot take (spaces, quotes, $, `, ;, non-ASCII, a "
                        "leading '-'), and so does the scratch directory %s that would link to it; set TMPDIR",
                        d->path, tmpdir);
    char rdir[PATH_MAX], rfile[PATH_MAX];
    if (!realpath(d->dir, rdir) || !realpath(d->path, rfile))
        return mts_fail(err, MTS_EIO, "%s: cannot resolve the path", d->path);
    snprintf(d->vdir, sizeof d->vdir, "%s/src", tmpdir);
    if (symlink(rdir, d->vdir)) return mts_fail(err, MTS_EIO, "%s: cannot create a link in the scratch directory", d->vdir);
    const char *bn = base_name(d->path);
    if (mts_rtl_path_plain(bn)) {
        if (mts_fs_pathf(d->vpath, sizeof d->vpath, "%s/%s", d->vdir, bn))
            return mts_fail(err, MTS_EINVAL, "%s: path too long", d->path);
    } else {
        snprintf(d->vpath, sizeof d->vpath, "%s/design.v", tmpdir);
        if (symlink(rfile, d->vpath))
            return mts_fail(err, MTS_EIO, "%s: cannot create a link in the scratch directory", d->vpath);
    }
    return MTS_OK;
}

/* 2: module `top` of the pass-1 XML declares parameter `name`, 1: as a
 * localparam, 0: not at all. */
static int top_declares(const rtl_xml *doc, const char *top, const char *name)
{
    for (int m = 0; m < doc->n; m++) {
        const rtl_xml_node *mod = &doc->node[m];
        const char *mn = rtl_xml_attr(mod, "origName");
        if (!mn) mn = rtl_xml_attr(mod, "name");
        if (strcmp(mod->name, "module") || !mn || strcmp(mn, top)) continue;
        for (int i = m + 1; i < doc->n && doc->node[i].depth > mod->depth; i++) {
            const rtl_xml_node *nd = &doc->node[i];
            const char *vn = rtl_xml_attr(nd, "origName");
            if (!vn) vn = rtl_xml_attr(nd, "name");
            if (nd->parent != m || strcmp(nd->name, "var") || !vn || strcmp(vn, name)) continue;
            const char *pa = rtl_xml_attr(nd, "param"), *lp = rtl_xml_attr(nd, "localparam");
            if (pa && !strcmp(pa, "true")) return 2;
            if (lp && !strcmp(lp, "true")) return 1;
        }
    }
    return 0;
}

/* The -G overrides: opts->param, less MANTIS_SIGNED=V when the top does not
 * declare it as an overridable parameter (then it only says how to read the
 * operands; d->sign_param). */
static int verilator_params(const mts_rtl_opts *o, const rtl_xml *doc, const char *top, rtl_design *d, mts_err *err)
{
    d->nvparams = 0;
    d->sign_param = -1;
    for (int i = 0; i < o->nparams; i++) {
        const char *p = o->param[i], *eq = strchr(p, '=');
        if ((size_t)(eq - p) == strlen("MANTIS_SIGNED") && !strncmp(p, "MANTIS_SIGNED", (size_t)(eq - p))) {
            long v;
            if (mts_parse_int(eq + 1, 0, 1, &v))
                return mts_fail(err, MTS_EINVAL, "--param '%s': MANTIS_SIGNED takes 0 or 1", p);
            d->sign_param = (int)v;
            if (top_declares(doc, top, "MANTIS_SIGNED") != 2) continue;
        }
        d->vparam[d->nvparams++] = p;
    }
    return MTS_OK;
}

int rtl_detect(const mts_rtl_opts *o, const char *tmpdir, rtl_design *d, mts_err *err)
{
    memset(d, 0, sizeof *d);
    if (!o->path || !*o->path) return mts_fail(err, MTS_EINVAL, "no design file given (--rtl FILE.v)");
    if (snprintf(d->path, sizeof d->path, "%s", o->path) >= (int)sizeof d->path)
        return mts_fail(err, MTS_EINVAL, "%s: path too long", o->path);
    FILE *f = fopen(o->path, "r");
    if (!f) return mts_fail(err, MTS_EIO, "%s: cannot open the design file", o->path);
    fclose(f);
    snprintf(d->dir, sizeof d->dir, "%s", o->path);
    char *slash = strrchr(d->dir, '/');
    if (slash) *slash = '\0';
    else snprintf(d->dir, sizeof d->dir, ".");
    for (int i = 0; i < o->nparams; i++)
        if (!o->param[i] || !strchr(o->param[i], '=') || o->param[i][0] == '=')
            return mts_fail(err, MTS_EINVAL, "--param '%s': expected NAME=VALUE", o->param[i] ? o->param[i] : "");

    int rc = verilator_paths(d, tmpdir, err);
    if (rc) return rc;
    d->sign_param = -1;
    rtl_xml doc;
    rc = run_front_end(o, tmpdir, "find-top", NULL, d, &doc, err);
    if (rc) return rc;
    char top[128];
    rc = choose_top(&doc, d, top, sizeof top, err);
    if (!rc) rc = verilator_params(o, &doc, top, d, err);
    rtl_xml_free(&doc);
    if (rc) return rc;
    rc = run_front_end(o, tmpdir, "elaborate", top, d, &doc, err);
    if (rc) return rc;
    elab *el = malloc(sizeof *el);
    if (!el) {
        rtl_xml_free(&doc);
        return mts_fail(err, MTS_ENOMEM, "out of memory");
    }
    rc = read_top(&doc, d, el, err);
    rtl_xml_free(&doc);
    if (!rc) rc = classify(o, d, el, err);
    free(el);
    return rc;
}

int mts_rtl_kind_parse(const char *s, mts_rtl_kind *k, mts_err *err)
{
    static const struct { const char *n; mts_rtl_kind k; } names[] = {
        {"auto", MTS_RTL_AUTO}, {"sig", MTS_RTL_SIG}, {"significand", MTS_RTL_SIG}, {"float", MTS_RTL_FLOAT},
        {"int", MTS_RTL_INT}, {"integer", MTS_RTL_INT}, {"acc", MTS_RTL_ACC}, {"accumulator", MTS_RTL_ACC}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(s, names[i].n)) {
            *k = names[i].k;
            return MTS_OK;
        }
    return mts_fail(err, MTS_EINVAL, "unknown design kind '%s': expected sig, float, int or acc", s);
}

const char *mts_rtl_signsrc_name(mts_rtl_signsrc s)
{
    switch (s) {
    case MTS_RTL_SIGNSRC_DECLARED: return "declared";
    case MTS_RTL_SIGNSRC_OPTION: return "option";
    case MTS_RTL_SIGNSRC_INFERRED: return "inferred";
    default: return "default";
    }
}

const char *mts_rtl_kind_name(mts_rtl_kind k)
{
    switch (k) {
    case MTS_RTL_SIG: return "significand";
    case MTS_RTL_FLOAT: return "float";
    case MTS_RTL_INT: return "int";
    case MTS_RTL_ACC: return "accumulator";
    default: return "auto";
    }
}

/* The overridable parameters of the top module: pass 1 only (the file rules
 * choose the top; nothing is elaborated or built). */
int mts_rtl_params(const char *path, char (*names)[64], int max, int *n, mts_err *err)
{
    *n = 0;
    mts_rtl_opts o = {.path = path};
    rtl_design *d = calloc(1, sizeof *d);
    if (!d) return mts_fail(err, MTS_ENOMEM, "out of memory");
    const char *tdir = getenv("TMPDIR");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/mantis-rtl-XXXXXX", tdir && *tdir ? tdir : "/tmp");
    int rc = MTS_OK;
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f) rc = mts_fail(err, MTS_EIO, "%s: cannot open the design file", path ? path : "");
    else fclose(f);
    if (!rc && !mkdtemp(tmp)) {
        rc = mts_fail(err, MTS_EIO, "%s: cannot create a scratch directory", tmp);
        tmp[0] = '\0';
    }
    if (rc) {
        free(d);
        return rc;
    }
    snprintf(d->path, sizeof d->path, "%s", path);
    snprintf(d->dir, sizeof d->dir, "%s", path);
    char *slash = strrchr(d->dir, '/');
    if (slash) *slash = '\0';
    else snprintf(d->dir, sizeof d->dir, ".");
    rtl_xml doc;
    rc = verilator_paths(d, tmp, err);
    if (!rc) rc = run_front_end(&o, tmp, "find-top", NULL, d, &doc, err);
    if (!rc) {
        char top[128];
        rc = choose_top(&doc, d, top, sizeof top, err);
        for (int m = 0; !rc && m < doc.n; m++) { /* the top's <var param="true"> children */
            const rtl_xml_node *mod = &doc.node[m];
            const char *mn = rtl_xml_attr(mod, "origName");
            if (!mn) mn = rtl_xml_attr(mod, "name");
            if (strcmp(mod->name, "module") || !mn || strcmp(mn, top)) continue;
            for (int i = m + 1; i < doc.n && doc.node[i].depth > mod->depth; i++) {
                const rtl_xml_node *nd = &doc.node[i];
                const char *vn = rtl_xml_attr(nd, "origName"), *pa = rtl_xml_attr(nd, "param");
                const char *lp = rtl_xml_attr(nd, "localparam");
                if (!vn) vn = rtl_xml_attr(nd, "name");
                if (nd->parent != m || strcmp(nd->name, "var") || !vn || !pa || strcmp(pa, "true") ||
                    (lp && !strcmp(lp, "true")))
                    continue;
                int dup = 0;
                for (int k = 0; k < *n; k++) dup |= !strcmp(names[k], vn);
                if (!dup && *n < max) snprintf(names[(*n)++], 64, "%s", vn);
            }
            break;
        }
        rtl_xml_free(&doc);
    }
    mts_fs_rmtree(tmp);
    free(d);
    return rc;
}
