/* netlist.c - the mapped gate-level netlist (Yosys `write_blif` output) as a
 * bit-parallel simulator: every net holds 64 operand vectors in one machine
 * word, cells are evaluated through the truth tables read from the liberty
 * functions, and per-net transitions between consecutive vectors are counted
 * exactly (zero-delay model: glitches are not seen). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/hash.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "synth_int.h"

typedef struct nettab {
    char **names;
    int n, cap;
    int *slot; /* open addressing over names, -1 empty */
    int nslot;
} nettab;

static uint64_t hstr(const char *s) { return mts_hash_fnv1a(MTS_FNV64_BASIS, s, strlen(s)); }

static int net_id(nettab *t, const char *name)
{
    if (t->n * 2 >= t->nslot) { /* grow and rehash */
        int ns = t->nslot ? t->nslot * 2 : 1024;
        int *slot = malloc((size_t)ns * sizeof *slot);
        if (!slot) return -1;
        for (int i = 0; i < ns; i++) slot[i] = -1;
        for (int i = 0; i < t->n; i++) {
            size_t h = hstr(t->names[i]) & (size_t)(ns - 1);
            while (slot[h] >= 0) h = (h + 1) & (size_t)(ns - 1);
            slot[h] = i;
        }
        free(t->slot);
        t->slot = slot;
        t->nslot = ns;
    }
    size_t h = hstr(name) & (size_t)(t->nslot - 1);
    while (t->slot[h] >= 0) {
        if (!strcmp(t->names[t->slot[h]], name)) return t->slot[h];
        h = (h + 1) & (size_t)(t->nslot - 1);
    }
    if (t->n == t->cap) {
        int nc = t->cap ? t->cap * 2 : 1024;
        char **nn = realloc(t->names, (size_t)nc * sizeof *nn);
        if (!nn) return -1;
        t->names = nn;
        t->cap = nc;
    }
    if (!(t->names[t->n] = strdup(name))) return -1;
    t->slot[h] = t->n;
    return t->n++;
}

static void nettab_free(nettab *t)
{
    for (int i = 0; i < t->n; i++) free(t->names[i]);
    free(t->names);
    free(t->slot);
}

static int uf_find(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* Splits "a[3]" into base "a" and index 3; plain names get index -1. */
static int split_bit(const char *name, char *base, size_t cap)
{
    snprintf(base, cap, "%s", name);
    size_t n = strlen(base);
    if (n < 3 || base[n - 1] != ']') return -1;
    char *lb = strrchr(base, '[');
    if (!lb) return -1;
    int idx = atoi(lb + 1);
    *lb = 0;
    return idx;
}

/* Groups the .inputs/.outputs bits into ports in order of first appearance
 * and fills bit -> net in packed order (port 0 in the low bits). */
static int make_ports(const char *path, char **names, int *ids, int nbits, synth_gport *ports, int *nports,
                      int **packed, mts_err *err)
{
    int np = 0;
    int lo[SYNTH_GL_MAX_PORTS], hi[SYNTH_GL_MAX_PORTS];
    int *idx = malloc((size_t)(nbits ? nbits : 1) * sizeof *idx), *port = malloc((size_t)(nbits ? nbits : 1) * sizeof *port);
    if (!idx || !port) {
        free(idx);
        free(port);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < nbits; i++) {
        char base[256];
        idx[i] = split_bit(names[i], base, sizeof base);
        int p = 0;
        while (p < np && strcmp(ports[p].name, base)) p++;
        if (p == np) {
            if (np == SYNTH_GL_MAX_PORTS) {
                free(idx);
                free(port);
                return mts_fail(err, MTS_EINVAL, "%s: more than %d ports", path, SYNTH_GL_MAX_PORTS);
            }
            snprintf(ports[np].name, sizeof ports[np].name, "%s", base);
            lo[np] = hi[np] = idx[i] < 0 ? 0 : idx[i];
            np++;
        }
        int v = idx[i] < 0 ? 0 : idx[i];
        if (v < lo[p]) lo[p] = v;
        if (v > hi[p]) hi[p] = v;
        port[i] = p;
    }
    int total = 0;
    for (int p = 0; p < np; p++) {
        ports[p].width = hi[p] - lo[p] + 1;
        ports[p].first = total;
        total += ports[p].width;
    }
    int rc = MTS_OK;
    if (total > 64) rc = mts_fail(err, MTS_EUNSUPPORTED, "%s: %d input or output bits (the flow handles up to 64)", path, total);
    int *pk = rc ? NULL : malloc((size_t)(total ? total : 1) * sizeof *pk);
    if (!rc && !pk) rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    if (!rc) {
        for (int i = 0; i < total; i++) pk[i] = -1;
        for (int i = 0; i < nbits; i++)
            pk[ports[port[i]].first + (idx[i] < 0 ? 0 : idx[i]) - lo[port[i]]] = ids[i];
        *packed = pk;
        *nports = np;
    }
    free(idx);
    free(port);
    return rc ? rc : total;
}

typedef struct rawnode {
    int cell, oidx, nin, in[SYNTH_LIB_MAX_PINS], out;
    uint64_t tt;
} rawnode;

/* What synth_gl_load builds on the way to the synth_gl. */
typedef struct loader {
    const char *path;
    const synth_lib *lib;
    synth_gl *gl;
    char *text;                 /* the BLIF file, tokenised in place */
    nettab nt;
    rawnode *nodes;             /* cells and covers in file order, then without buffers */
    int nnodes, capn;
    rawnode *cur;               /* the .names node receiving cover lines */
    char **in_names, **out_names;
    int nin, nout, *in_ids, *out_ids;
    int *parent;                /* union-find over nets: buffer outputs alias their input */
    int (*alias)[2];
    int nalias, alias_cap;
    int *driver;                /* per net: driving node, -2 primary input, -1 none */
    int *state, *fanout, *order;
} loader;

static void loader_free(loader *L)
{
    free(L->driver);
    free(L->state);
    free(L->fanout);
    free(L->order);
    free(L->parent);
    free(L->alias);
    free(L->nodes);
    free(L->in_names);
    free(L->out_names);
    free(L->in_ids);
    free(L->out_ids);
    nettab_free(&L->nt);
    free(L->text);
}

static int oom(const loader *L, mts_err *err) { return mts_fail(err, MTS_ENOMEM, "%s: out of memory", L->path); }

/* Reads the file and joins its continuation lines. */
static int read_blif(loader *L, mts_err *err)
{
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(L->path, &buf, &len, err);
    if (rc) return rc;
    char *text = (char *)buf;
    for (size_t i = 0; i + 1 < len; i++)
        if (text[i] == '\\' && text[i + 1] == '\n') text[i] = text[i + 1] = ' ';
    L->text = text;
    return MTS_OK;
}

/* A cover line ("01- 1") of the current .names: ORs its cubes into tt. */
static int parse_cover(loader *L, char **tok, int ntok, mts_err *err)
{
    rawnode *cur = L->cur;
    if (!cur) return mts_fail(err, MTS_EFORMAT, "%s: cover line outside .names", L->path);
    const char *pat = cur->nin ? tok[0] : "";
    const char *val = cur->nin ? (ntok > 1 ? tok[1] : "") : tok[0];
    if ((int)strlen(pat) != cur->nin || (val[0] != '0' && val[0] != '1'))
        return mts_fail(err, MTS_EFORMAT, "%s: bad .names cover line", L->path);
    for (unsigned m = 0; m < (1u << cur->nin); m++) {
        int hit = 1;
        for (int j = 0; j < cur->nin; j++)
            if (pat[j] != '-' && (unsigned)(pat[j] - '0') != ((m >> j) & 1)) hit = 0;
        if (hit) cur->tt |= 1ull << m;
    }
    if (val[0] == '0') cur->cell = -2; /* OFF-set cover: complemented in resolve_aliases */
    return MTS_OK;
}

/* .inputs / .outputs: the port bits, in order. */
static int parse_ports(loader *L, int isin, char **tok, int ntok, mts_err *err)
{
    char ***names = isin ? &L->in_names : &L->out_names;
    int **ids = isin ? &L->in_ids : &L->out_ids, *cnt = isin ? &L->nin : &L->nout;
    char **nn = realloc(*names, (size_t)(*cnt + ntok) * sizeof *nn);
    if (nn) *names = nn;
    int *ni = realloc(*ids, (size_t)(*cnt + ntok) * sizeof *ni);
    if (ni) *ids = ni;
    if (!nn || !ni) return oom(L, err);
    for (int k = 1; k < ntok; k++) {
        (*ids)[*cnt] = net_id(&L->nt, tok[k]);
        (*names)[*cnt] = L->nt.names[(*ids)[*cnt]];
        (*cnt)++;
    }
    return MTS_OK;
}

/* A zeroed slot at the end of nodes (not yet counted in nnodes). */
static rawnode *new_node(loader *L)
{
    if (L->nnodes == L->capn) {
        int cap = L->capn ? L->capn * 2 : 1024;
        rawnode *nn = realloc(L->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return NULL;
        L->nodes = nn;
        L->capn = cap;
    }
    rawnode *n = &L->nodes[L->nnodes];
    memset(n, 0, sizeof *n);
    return n;
}

/* ".names in... out": a cover whose lines follow. */
static int parse_names(loader *L, char **tok, int ntok, mts_err *err)
{
    rawnode *n = new_node(L);
    if (!n) return oom(L, err);
    if (ntok < 2 || ntok - 2 > SYNTH_LIB_MAX_PINS)
        return mts_fail(err, MTS_EFORMAT, "%s: .names with %d inputs (at most %d)", L->path, ntok - 2, SYNTH_LIB_MAX_PINS);
    n->cell = -1;
    n->nin = ntok - 2;
    for (int k = 0; k < n->nin; k++) n->in[k] = net_id(&L->nt, tok[1 + k]);
    n->out = net_id(&L->nt, tok[ntok - 1]);
    L->cur = n;
    L->nnodes++;
    return MTS_OK;
}

/* ".subckt CELL PIN=net...": a liberty cell. Flip-flops are only counted
 * (with their area and leakage): the flow refuses sequential designs. */
static int parse_subckt(loader *L, char **tok, int ntok, mts_err *err)
{
    rawnode *n = new_node(L);
    if (!n) return oom(L, err);
    const synth_lcell *c = ntok > 1 ? synth_lib_find(L->lib, tok[1]) : NULL;
    if (!c)
        return mts_fail(err, MTS_EFORMAT, "%s: cell '%s' is not in the liberty file", L->path, ntok > 1 ? tok[1] : "?");
    if (c->seq) {
        L->gl->nseq++;
        L->gl->area += c->area;
        L->gl->leak_nw += c->leak_nw;
        return MTS_OK;
    }
    n->cell = (int)(c - L->lib->cells);
    n->nin = c->nin;
    int outs[SYNTH_LIB_MAX_OUTS];
    for (int o = 0; o < SYNTH_LIB_MAX_OUTS; o++) outs[o] = -1;
    for (int k = 0; k < c->nin; k++) n->in[k] = -1;
    for (int k = 2; k < ntok; k++) {
        char *eq = strchr(tok[k], '=');
        if (!eq) continue;
        *eq = 0;
        int id = net_id(&L->nt, eq + 1);
        for (int o = 0; o < c->nout; o++)
            if (!strcmp(tok[k], c->outs[o])) outs[o] = id;
        for (int j = 0; j < c->nin; j++)
            if (!strcmp(tok[k], c->in[j])) n->in[j] = id;
    }
    int ok = outs[0] >= 0;
    for (int j = 0; j < c->nin; j++) ok &= n->in[j] >= 0;
    if (!ok) return mts_fail(err, MTS_EFORMAT, "%s: instance of %s with unconnected pins", L->path, c->name);
    n->out = outs[0];
    n->tt = c->tts[0];
    n->oidx = 0;
    int first = L->nnodes++;
    /* a multi-output cell (HA, FA): one node per connected output, the same inputs */
    for (int o = 1; o < c->nout; o++) {
        if (outs[o] < 0) continue; /* an unused carry or sum */
        rawnode *m = new_node(L); /* may move the array: copy the instance's first node by index */
        if (!m) return oom(L, err);
        *m = L->nodes[first];
        m->out = outs[o];
        m->tt = c->tts[o];
        m->oidx = o;
        L->nnodes++;
    }
    return MTS_OK;
}

#define MAX_TOKENS (2 + SYNTH_LIB_MAX_PINS + 64)

/* Splits a line into words up to a '#' comment; the number of words. */
static int tokenise(char *line, char **tok)
{
    int n = 0;
    char *save = NULL;
    for (char *w = strtok_r(line, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
        if (w[0] == '#') break;
        if (n < MAX_TOKENS) tok[n++] = w;
    }
    return n;
}

/* One line: a cover line or a dot command. 1 at .end. */
static int parse_line(loader *L, char *line, mts_err *err)
{
    char *tok[MAX_TOKENS];
    int ntok = tokenise(line, tok);
    if (!ntok) return MTS_OK;
    if (tok[0][0] != '.') return parse_cover(L, tok, ntok, err);
    L->cur = NULL;
    if (!strcmp(tok[0], ".model")) {
        if (ntok > 1) snprintf(L->gl->model, sizeof L->gl->model, "%s", tok[1]);
    } else if (!strcmp(tok[0], ".inputs") || !strcmp(tok[0], ".outputs")) {
        return parse_ports(L, tok[0][1] == 'i', tok, ntok, err);
    } else if (!strcmp(tok[0], ".names")) {
        return parse_names(L, tok, ntok, err);
    } else if (!strcmp(tok[0], ".subckt")) {
        return parse_subckt(L, tok, ntok, err);
    } else if (!strcmp(tok[0], ".latch")) {
        L->gl->nseq++;
    } else if (!strcmp(tok[0], ".end")) {
        return 1;
    }
    return MTS_OK;
}

static int parse_blif(loader *L, mts_err *err)
{
    char *save = NULL;
    int rc = MTS_OK;
    for (char *line = strtok_r(L->text, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save))
        rc = parse_line(L, line, err);
    if (rc > 0) rc = MTS_OK;
    if (!rc && L->nt.n == 0) rc = mts_fail(err, MTS_EFORMAT, "%s: empty netlist", L->path);
    return rc;
}

/* Finishes covers; pure buffers (Yosys writes wire assignments as
 * `.names a b / 1 1`) are dropped and their output becomes an alias of their
 * input net (union-find in parent). */
static int resolve_aliases(loader *L, mts_err *err)
{
    if (!(L->parent = malloc((size_t)L->nt.n * sizeof *L->parent))) return oom(L, err);
    for (int i = 0; i < L->nt.n; i++) L->parent[i] = i;
    int w = 0;
    for (int i = 0; i < L->nnodes; i++) {
        rawnode *n = &L->nodes[i];
        if (n->cell == -2) {
            n->cell = -1;
            n->tt = ~n->tt & (n->nin == 6 ? ~0ull : ((1ull << (1u << n->nin)) - 1));
        }
        if (n->cell == -1 && n->nin == 1 && n->tt == 2) {
            if (L->nalias == L->alias_cap) {
                L->alias_cap = L->alias_cap ? L->alias_cap * 2 : 256;
                void *na = realloc(L->alias, (size_t)L->alias_cap * sizeof *L->alias);
                if (!na) return oom(L, err);
                L->alias = na;
            }
            L->alias[L->nalias][0] = n->out;
            L->alias[L->nalias++][1] = n->in[0];
            continue;
        }
        L->nodes[w++] = *n;
    }
    L->nnodes = w;
    for (int i = 0; i < L->nalias; i++) {
        int a = uf_find(L->parent, L->alias[i][0]), b = uf_find(L->parent, L->alias[i][1]);
        if (a != b) L->parent[a] = b;
    }
    return MTS_OK;
}

/* The per-net and per-node arrays of the later steps and of the synth_gl. */
static int alloc_arrays(loader *L, mts_err *err)
{
    int nn = L->nt.n, nodes = L->nnodes ? L->nnodes : 1;
    synth_gl *gl = L->gl;
    gl->nnets = nn;
    L->driver = malloc((size_t)nn * sizeof *L->driver);
    L->state = calloc((size_t)nn, sizeof *L->state);
    L->fanout = calloc((size_t)nn, sizeof *L->fanout);
    L->order = malloc((size_t)nodes * sizeof *L->order);
    gl->cap_ff = calloc((size_t)nn, sizeof *gl->cap_ff);
    gl->e_tog_fj = calloc((size_t)nn, sizeof *gl->e_tog_fj);
    gl->depth = calloc((size_t)nn, sizeof *gl->depth);
    gl->nodes = malloc((size_t)nodes * sizeof *gl->nodes);
    if (!L->driver || !L->state || !L->fanout || !L->order || !gl->cap_ff || !gl->e_tog_fj || !gl->depth || !gl->nodes)
        return oom(L, err);
    return MTS_OK;
}

/* Replaces aliased nets by their representative and records each net's
 * single driver. */
static int connect_drivers(loader *L, mts_err *err)
{
    for (int i = 0; i < L->nt.n; i++) L->driver[i] = -1;
    for (int i = 0; i < L->nin; i++) L->in_ids[i] = uf_find(L->parent, L->in_ids[i]), L->driver[L->in_ids[i]] = -2;
    for (int i = 0; i < L->nout; i++) L->out_ids[i] = uf_find(L->parent, L->out_ids[i]);
    for (int i = 0; i < L->nnodes; i++) {
        rawnode *n = &L->nodes[i];
        n->out = uf_find(L->parent, n->out);
        for (int j = 0; j < n->nin; j++) n->in[j] = uf_find(L->parent, n->in[j]);
        if (L->driver[n->out] != -1)
            return mts_fail(err, MTS_EFORMAT, "%s: net %s has more than one driver", L->path, L->nt.names[n->out]);
        L->driver[n->out] = i;
    }
    return MTS_OK;
}

/* Depth-first topological order of the nodes into order[]; state per net:
 * 0 new, 1 on the stack, 2 done. Undriven nets (Yosys $undef) read as 0. */
static int topo_sort(loader *L, mts_err *err)
{
    int nord = 0, rc = MTS_OK;
    int *stack = malloc((size_t)(2 * L->nnodes + 2) * sizeof *stack);
    if (!stack) return oom(L, err);
    for (int root = 0; root < L->nnodes && !rc; root++) {
        if (L->state[L->nodes[root].out]) continue;
        int sp = 0;
        stack[sp++] = root;
        while (sp && !rc) {
            int i = stack[sp - 1];
            rawnode *n = &L->nodes[i];
            if (L->state[n->out] == 0) L->state[n->out] = 1;
            int pushed = 0;
            for (int j = 0; j < n->nin && !pushed; j++) {
                int in = n->in[j], d = L->driver[in];
                if (d < 0 || L->state[in] == 2) continue;
                if (L->state[in] == 1) {
                    rc = mts_fail(err, MTS_EUNSUPPORTED, "%s: combinational loop through net %s", L->path,
                                  L->nt.names[in]);
                    break;
                }
                stack[sp++] = d;
                pushed = 1;
            }
            if (!pushed && !rc) {
                L->state[n->out] = 2;
                L->order[nord++] = i;
                sp--;
            }
        }
    }
    free(stack);
    return rc;
}

/* Copies the nodes into the synth_gl in topological order and annotates the
 * nets: load capacitance (fanout pins, primary-output load, wire load),
 * energy per toggle (0.5 C V^2 + the driving cell's internal energy),
 * logic depth; and the cells' area and leakage. */
static void annotate(loader *L)
{
    synth_gl *gl = L->gl;
    const synth_lib *lib = L->lib;
    gl->nnodes = L->nnodes;
    for (int k = 0; k < L->nnodes; k++) {
        const rawnode *n = &L->nodes[L->order[k]];
        struct synth_gnode *g = &gl->nodes[k];
        g->cell = n->cell;
        g->oidx = n->oidx;
        g->nin = n->nin;
        memcpy(g->in, n->in, sizeof g->in);
        g->out = n->out;
        g->tt = n->tt;
        int dmax = 0;
        for (int j = 0; j < n->nin; j++) {
            if (n->cell >= 0 && n->oidx == 0) { /* a multi-output instance loads its inputs once */
                gl->cap_ff[n->in[j]] += lib->cells[n->cell].cap[j];
                L->fanout[n->in[j]]++;
            }
            if (gl->depth[n->in[j]] > dmax) dmax = gl->depth[n->in[j]];
        }
        gl->depth[n->out] = dmax + (n->cell >= 0);
        if (gl->depth[n->out] > gl->depth_max) gl->depth_max = gl->depth[n->out];
        if (n->cell >= 0 && n->oidx == 0) {
            gl->area += lib->cells[n->cell].area;
            gl->leak_nw += lib->cells[n->cell].leak_nw;
        }
    }
    for (int i = 0; i < L->nout; i++) {
        gl->cap_ff[L->out_ids[i]] += MTS_SYNTH_PO_LOAD_FF;
        L->fanout[L->out_ids[i]]++;
    }
    double v2 = lib->voltage * lib->voltage;
    for (int i = 0; i < L->nt.n; i++) {
        if (uf_find(L->parent, i) != i) continue;
        gl->cap_ff[i] += synth_lib_wire_cap(lib, L->fanout[i]);
        gl->e_tog_fj[i] = 0.5 * gl->cap_ff[i] * v2;
        int d = L->driver[i];
        if (d >= 0 && L->nodes[d].cell >= 0) gl->e_tog_fj[i] += lib->cells[L->nodes[d].cell].e_outs_fj[L->nodes[d].oidx];
    }
}

/* The input and output ports and their packed bit -> net maps. */
static int build_ports(loader *L, mts_err *err)
{
    synth_gl *gl = L->gl;
    int bits = make_ports(L->path, L->in_names, L->in_ids, L->nin, gl->in_ports, &gl->nin_ports, &gl->in_net, err);
    if (bits < 0) return bits;
    gl->nin_bits = bits;
    bits = make_ports(L->path, L->out_names, L->out_ids, L->nout, gl->out_ports, &gl->nout_ports, &gl->out_net, err);
    if (bits < 0) return bits;
    gl->nout_bits = bits;
    /* A gap in an output port's bit range reads as the constant 0; an input
     * port may not have one. */
    for (int i = 0; i < gl->nin_bits; i++)
        if (gl->in_net[i] < 0) return mts_fail(err, MTS_EFORMAT, "%s: input port bits are not contiguous", L->path);
    return MTS_OK;
}

int synth_gl_load(const char *path, const synth_lib *lib, synth_gl *gl, mts_err *err)
{
    memset(gl, 0, sizeof *gl);
    loader L = {.path = path, .lib = lib, .gl = gl};
    int rc = read_blif(&L, err);
    if (!rc) rc = parse_blif(&L, err);
    if (!rc) rc = resolve_aliases(&L, err);
    if (!rc) rc = alloc_arrays(&L, err);
    if (!rc) rc = connect_drivers(&L, err);
    if (!rc) rc = topo_sort(&L, err);
    if (!rc) annotate(&L);
    if (!rc) rc = build_ports(&L, err);
    loader_free(&L);
    if (rc) synth_gl_free(gl);
    return rc;
}

void synth_gl_free(synth_gl *gl)
{
    free(gl->in_net);
    free(gl->out_net);
    free(gl->nodes);
    free(gl->cap_ff);
    free(gl->e_tog_fj);
    free(gl->depth);
    memset(gl, 0, sizeof *gl);
}

/* Bit-parallel evaluation of a truth table: a mux tree over the inputs. */
static uint64_t eval_tt(uint64_t tt, int k, const uint64_t *x)
{
    uint64_t v[64];
    int n = 1 << k;
    for (int m = 0; m < n; m++) v[m] = ((tt >> m) & 1) ? ~0ull : 0;
    for (int j = 0; j < k; j++) {
        n >>= 1;
        for (int i = 0; i < n; i++) v[i] = (v[2 * i] & ~x[j]) | (v[2 * i + 1] & x[j]);
    }
    return v[0];
}

int synth_gl_sim(const synth_gl *gl, const uint64_t *vecs, uint64_t n, uint64_t *outs, uint64_t *toggles, mts_err *err)
{
    uint64_t *val = calloc((size_t)gl->nnets, sizeof *val);
    uint64_t *last = calloc((size_t)gl->nnets, sizeof *last);
    if (!val || !last) {
        free(val);
        free(last);
        return mts_fail(err, MTS_ENOMEM, "gate-level simulation: out of memory for %d nets", gl->nnets);
    }
    for (uint64_t base = 0; base < n; base += 64) {
        int cnt = n - base < 64 ? (int)(n - base) : 64;
        for (int b = 0; b < gl->nin_bits; b++) { /* transpose vectors -> per-bit words */
            uint64_t w = 0;
            for (int v = 0; v < cnt; v++) w |= ((vecs[base + v] >> b) & 1) << v;
            val[gl->in_net[b]] = w;
        }
        for (int k = 0; k < gl->nnodes; k++) {
            const struct synth_gnode *g = &gl->nodes[k];
            uint64_t x[SYNTH_LIB_MAX_PINS];
            for (int j = 0; j < g->nin; j++) x[j] = val[g->in[j]];
            val[g->out] = eval_tt(g->tt, g->nin, x);
        }
        if (outs)
            for (int v = 0; v < cnt; v++) {
                uint64_t o = 0;
                for (int b = 0; b < gl->nout_bits; b++)
                    if (gl->out_net[b] >= 0) o |= ((val[gl->out_net[b]] >> v) & 1) << b;
                outs[base + v] = o;
            }
        if (toggles) {
            /* bit v of t: vector base+v differs from its predecessor. */
            uint64_t mask = cnt == 64 ? ~0ull : (1ull << cnt) - 1;
            if (base == 0) mask &= ~1ull;
            for (int i = 0; i < gl->nnets; i++) {
                uint64_t w = val[i];
                uint64_t t = (w ^ ((w << 1) | last[i])) & mask;
                toggles[i] += (uint64_t)__builtin_popcountll(t);
                last[i] = (w >> (cnt - 1)) & 1;
            }
        }
    }
    free(val);
    free(last);
    return MTS_OK;
}
