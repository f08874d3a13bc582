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

/* Load of a primary output: one X1 inverter input (the next stage). */
#define PO_LOAD_FF 1.70

typedef struct nettab {
    char **names;
    int n, cap;
    int *slot; /* open addressing over names, -1 empty */
    int nslot;
} nettab;

static uint64_t hstr(const char *s) { return mts_hash_fnv1a(1469598103934665603ull, s, strlen(s)); }

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
static int make_ports(const char *path, char **names, int *ids, int nbits, mts_gport *ports, int *nports,
                      int **packed, mts_err *err)
{
    int np = 0;
    int lo[MTS_GL_MAX_PORTS], hi[MTS_GL_MAX_PORTS];
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
            if (np == MTS_GL_MAX_PORTS) {
                free(idx);
                free(port);
                return mts_fail(err, MTS_EINVAL, "%s: more than %d ports", path, MTS_GL_MAX_PORTS);
            }
            MTS_SNPRINTF(ports[np].name, sizeof ports[np].name, "%s", base);
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
    int cell, nin, in[MTS_LIB_MAX_PINS], out;
    uint64_t tt;
} rawnode;

int mts_gl_load(const char *path, const mts_lib *lib, mts_gl *gl, mts_err *err)
{
    memset(gl, 0, sizeof *gl);
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(path, &buf, &len, err);
    if (rc) return rc;
    char *text = realloc(buf, len + 1);
    if (!text) {
        free(buf);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    text[len] = 0;
    for (size_t i = 0; i + 1 < len; i++) /* join continuation lines */
        if (text[i] == '\\' && text[i + 1] == '\n') text[i] = text[i + 1] = ' ';

    nettab nt = {0};
    rawnode *nodes = NULL;
    int nnodes = 0, capn = 0;
    char **in_names = NULL, **out_names = NULL;
    int nin = 0, nout = 0, *in_ids = NULL, *out_ids = NULL;
    int *parent = NULL;
    int alias_cap = 0, nalias = 0, (*alias)[2] = NULL;
    rawnode *cur = NULL; /* the .names node receiving cover lines */
    int lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *tok[2 + MTS_LIB_MAX_PINS + 64];
        int nt_ = 0;
        char *s2 = NULL;
        for (char *w = strtok_r(line, " \t\r", &s2); w; w = strtok_r(NULL, " \t\r", &s2)) {
            if (w[0] == '#') break;
            if (nt_ < (int)(sizeof tok / sizeof tok[0])) tok[nt_++] = w;
        }
        if (!nt_) continue;
        if (tok[0][0] != '.') { /* a cover line of the current .names */
            if (!cur) {
                rc = mts_fail(err, MTS_EFORMAT, "%s: cover line outside .names", path);
                break;
            }
            const char *pat = cur->nin ? tok[0] : "";
            const char *val = cur->nin ? (nt_ > 1 ? tok[1] : "") : tok[0];
            if ((int)strlen(pat) != cur->nin || (val[0] != '0' && val[0] != '1')) {
                rc = mts_fail(err, MTS_EFORMAT, "%s: bad .names cover line", path);
                break;
            }
            for (unsigned m = 0; m < (1u << cur->nin); m++) {
                int hit = 1;
                for (int j = 0; j < cur->nin; j++)
                    if (pat[j] != '-' && (unsigned)(pat[j] - '0') != ((m >> j) & 1)) hit = 0;
                if (hit) cur->tt |= 1ull << m;
            }
            if (val[0] == '0') cur->cell = -2; /* OFF-set cover: complemented at the end */
            continue;
        }
        cur = NULL;
        if (!strcmp(tok[0], ".model")) {
            if (nt_ > 1) snprintf(gl->model, sizeof gl->model, "%s", tok[1]);
        } else if (!strcmp(tok[0], ".inputs") || !strcmp(tok[0], ".outputs")) {
            int isin = tok[0][1] == 'i';
            char ***names = isin ? &in_names : &out_names;
            int **ids = isin ? &in_ids : &out_ids, *cnt = isin ? &nin : &nout;
            char **nn = realloc(*names, (size_t)(*cnt + nt_) * sizeof *nn);
            int *ni = realloc(*ids, (size_t)(*cnt + nt_) * sizeof *ni);
            if (nn) *names = nn;
            if (ni) *ids = ni;
            if (!nn || !ni) {
                rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
                break;
            }
            for (int k = 1; k < nt_; k++) {
                (*ids)[*cnt] = net_id(&nt, tok[k]);
                (*names)[*cnt] = nt.names[(*ids)[*cnt]];
                (*cnt)++;
            }
        } else if (!strcmp(tok[0], ".names") || !strcmp(tok[0], ".subckt")) {
            if (nnodes == capn) {
                capn = capn ? capn * 2 : 1024;
                rawnode *nn = realloc(nodes, (size_t)capn * sizeof *nn);
                if (!nn) {
                    rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
                    break;
                }
                nodes = nn;
            }
            rawnode *n = &nodes[nnodes];
            memset(n, 0, sizeof *n);
            if (tok[0][1] == 'n') {
                if (nt_ < 2 || nt_ - 2 > MTS_LIB_MAX_PINS) {
                    rc = mts_fail(err, MTS_EFORMAT, "%s: .names with %d inputs (at most %d)", path, nt_ - 2,
                                  MTS_LIB_MAX_PINS);
                    break;
                }
                n->cell = -1;
                n->nin = nt_ - 2;
                for (int k = 0; k < n->nin; k++) n->in[k] = net_id(&nt, tok[1 + k]);
                n->out = net_id(&nt, tok[nt_ - 1]);
                cur = n;
                nnodes++;
            } else {
                const mts_lcell *c = nt_ > 1 ? mts_lib_find(lib, tok[1]) : NULL;
                if (!c) {
                    rc = mts_fail(err, MTS_EFORMAT, "%s: cell '%s' is not in the liberty file", path,
                                  nt_ > 1 ? tok[1] : "?");
                    break;
                }
                if (c->seq) {
                    gl->nseq++;
                    gl->area += c->area;
                    gl->leak_nw += c->leak_nw;
                    continue;
                }
                n->cell = (int)(c - lib->cells);
                n->nin = c->nin;
                n->out = -1;
                for (int k = 0; k < c->nin; k++) n->in[k] = -1;
                for (int k = 2; k < nt_; k++) {
                    char *eq = strchr(tok[k], '=');
                    if (!eq) continue;
                    *eq = 0;
                    int id = net_id(&nt, eq + 1);
                    if (!strcmp(tok[k], c->out)) n->out = id;
                    for (int j = 0; j < c->nin; j++)
                        if (!strcmp(tok[k], c->in[j])) n->in[j] = id;
                }
                int ok = n->out >= 0;
                for (int j = 0; j < c->nin; j++) ok &= n->in[j] >= 0;
                if (!ok) {
                    rc = mts_fail(err, MTS_EFORMAT, "%s: instance of %s with unconnected pins", path, c->name);
                    break;
                }
                n->tt = c->tt;
                nnodes++;
            }
        } else if (!strcmp(tok[0], ".latch")) {
            gl->nseq++;
        } else if (!strcmp(tok[0], ".end")) {
            break;
        }
    }
    if (!rc && nt.n == 0) rc = mts_fail(err, MTS_EFORMAT, "%s: empty netlist", path);
    if (!rc && !(parent = malloc((size_t)nt.n * sizeof *parent))) rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    if (!rc) {
        for (int i = 0; i < nt.n; i++) parent[i] = i;
        /* Finish covers; pure buffers (Yosys writes wire assignments as
         * `.names a b / 1 1`) become aliases of their input net. */
        int w = 0;
        for (int i = 0; i < nnodes; i++) {
            rawnode *n = &nodes[i];
            if (n->cell == -2) {
                n->cell = -1;
                n->tt = ~n->tt & (n->nin == 6 ? ~0ull : ((1ull << (1u << n->nin)) - 1));
            }
            if (n->cell == -1 && n->nin == 1 && n->tt == 2) {
                if (nalias == alias_cap) {
                    alias_cap = alias_cap ? alias_cap * 2 : 256;
                    void *na = realloc(alias, (size_t)alias_cap * sizeof *alias);
                    if (!na) {
                        rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
                        break;
                    }
                    alias = na;
                }
                alias[nalias][0] = n->out;
                alias[nalias++][1] = n->in[0];
                continue;
            }
            nodes[w++] = *n;
        }
        nnodes = w;
        for (int i = 0; i < nalias; i++) {
            int a = uf_find(parent, alias[i][0]), b = uf_find(parent, alias[i][1]);
            if (a != b) parent[a] = b;
        }
    }
    /* Resolve aliases, check single drivers, sort topologically. */
    int *driver = NULL, *state = NULL, *fanout = NULL, *order = NULL;
    if (!rc) {
        gl->nnets = nt.n;
        driver = malloc((size_t)nt.n * sizeof *driver);
        state = calloc((size_t)nt.n, sizeof *state);
        fanout = calloc((size_t)nt.n, sizeof *fanout);
        order = malloc((size_t)(nnodes ? nnodes : 1) * sizeof *order);
        gl->cap_ff = calloc((size_t)nt.n, sizeof *gl->cap_ff);
        gl->e_tog_fj = calloc((size_t)nt.n, sizeof *gl->e_tog_fj);
        gl->depth = calloc((size_t)nt.n, sizeof *gl->depth);
        gl->nodes = malloc((size_t)(nnodes ? nnodes : 1) * sizeof *gl->nodes);
        if (!driver || !state || !fanout || !order || !gl->cap_ff || !gl->e_tog_fj || !gl->depth || !gl->nodes)
            rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    if (!rc) {
        for (int i = 0; i < nt.n; i++) driver[i] = -1;
        for (int i = 0; i < nin; i++) in_ids[i] = uf_find(parent, in_ids[i]), driver[in_ids[i]] = -2;
        for (int i = 0; i < nout; i++) out_ids[i] = uf_find(parent, out_ids[i]);
        for (int i = 0; i < nnodes && !rc; i++) {
            rawnode *n = &nodes[i];
            n->out = uf_find(parent, n->out);
            for (int j = 0; j < n->nin; j++) n->in[j] = uf_find(parent, n->in[j]);
            if (driver[n->out] != -1)
                rc = mts_fail(err, MTS_EFORMAT, "%s: net %s has more than one driver", path, nt.names[n->out]);
            driver[n->out] = i;
        }
    }
    if (!rc) {
        /* Kahn-style DFS order; state: 0 new, 1 on stack, 2 done. Undriven
         * nets (Yosys $undef) read as constant 0. */
        int nord = 0;
        int *stack = malloc((size_t)(2 * nnodes + 2) * sizeof *stack);
        if (!stack) rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
        for (int root = 0; root < nnodes && !rc; root++) {
            if (state[nodes[root].out]) continue;
            int sp = 0;
            stack[sp++] = root;
            while (sp && !rc) {
                int i = stack[sp - 1];
                rawnode *n = &nodes[i];
                if (state[n->out] == 0) state[n->out] = 1;
                int pushed = 0;
                for (int j = 0; j < n->nin && !pushed; j++) {
                    int d = driver[n->in[j]];
                    if (d < 0 || state[n->in[j]] == 2) continue;
                    if (state[n->in[j]] == 1) {
                        rc = mts_fail(err, MTS_EUNSUPPORTED, "%s: combinational loop through net %s", path,
                                      nt.names[n->in[j]]);
                        break;
                    }
                    stack[sp++] = d;
                    pushed = 1;
                }
                if (!pushed && !rc) {
                    state[n->out] = 2;
                    order[nord++] = i;
                    sp--;
                }
            }
        }
        free(stack);
    }
    if (!rc) {
        gl->nnodes = nnodes;
        for (int k = 0; k < nnodes; k++) {
            const rawnode *n = &nodes[order[k]];
            struct mts_gnode *g = &gl->nodes[k];
            g->cell = n->cell;
            g->nin = n->nin;
            memcpy(g->in, n->in, sizeof g->in);
            g->out = n->out;
            g->tt = n->tt;
            int dmax = 0;
            for (int j = 0; j < n->nin; j++) {
                if (n->cell >= 0) {
                    gl->cap_ff[n->in[j]] += lib->cells[n->cell].cap[j];
                    fanout[n->in[j]]++;
                }
                if (gl->depth[n->in[j]] > dmax) dmax = gl->depth[n->in[j]];
            }
            gl->depth[n->out] = dmax + (n->cell >= 0);
            if (gl->depth[n->out] > gl->depth_max) gl->depth_max = gl->depth[n->out];
            if (n->cell >= 0) {
                gl->area += lib->cells[n->cell].area;
                gl->leak_nw += lib->cells[n->cell].leak_nw;
            }
        }
        for (int i = 0; i < nout; i++) {
            gl->cap_ff[out_ids[i]] += PO_LOAD_FF;
            fanout[out_ids[i]]++;
        }
        double v2 = lib->voltage * lib->voltage;
        for (int i = 0; i < nt.n; i++) {
            if (uf_find(parent, i) != i) continue;
            gl->cap_ff[i] += mts_lib_wire_cap(lib, fanout[i]);
            gl->e_tog_fj[i] = 0.5 * gl->cap_ff[i] * v2;
            int d = driver[i];
            if (d >= 0 && nodes[d].cell >= 0) gl->e_tog_fj[i] += lib->cells[nodes[d].cell].e_int_fj;
        }
        int r1 = make_ports(path, in_names, in_ids, nin, gl->in_ports, &gl->nin_ports, &gl->in_net, err);
        if (r1 < 0) rc = r1;
        else gl->nin_bits = r1;
    }
    if (!rc) {
        int r2 = make_ports(path, out_names, out_ids, nout, gl->out_ports, &gl->nout_ports, &gl->out_net, err);
        if (r2 < 0) rc = r2;
        else gl->nout_bits = r2;
    }
    if (!rc) /* gaps in a port's bit range read as the constant 0 net */
        for (int i = 0; i < gl->nin_bits; i++)
            if (gl->in_net[i] < 0) rc = mts_fail(err, MTS_EFORMAT, "%s: input port bits are not contiguous", path);
    free(driver);
    free(state);
    free(fanout);
    free(order);
    free(parent);
    free(alias);
    free(nodes);
    free(in_names);
    free(out_names);
    free(in_ids);
    free(out_ids);
    nettab_free(&nt);
    free(text);
    if (rc) mts_gl_free(gl);
    return rc;
}

void mts_gl_free(mts_gl *gl)
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

int mts_gl_sim(const mts_gl *gl, const uint64_t *vecs, uint64_t n, uint64_t *outs, uint64_t *toggles, mts_err *err)
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
            const struct mts_gnode *g = &gl->nodes[k];
            uint64_t x[MTS_LIB_MAX_PINS];
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
