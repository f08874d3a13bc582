/* liberty.c - reads the subset of the liberty format that the synth flow
 * needs: per cell area, leakage, pin capacitances, the output function (as a
 * truth table), internal energy; per library the voltage and wire load. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "synth_int.h"

/* ---- tokenizer: words, strings, punctuation; comments and '\' newlines skipped ---- */
typedef struct lex {
    const char *s, *path;
    size_t i, n;
    int line;
    char tok[256];
    int kind; /* 'w' word, 's' string, punctuation char, 0 end */
} lex;

static void next(lex *L)
{
    for (;;) {
        while (L->i < L->n && (isspace((unsigned char)L->s[L->i]) || L->s[L->i] == '\\')) {
            if (L->s[L->i] == '\n') L->line++;
            L->i++;
        }
        if (L->i + 1 < L->n && L->s[L->i] == '/' && L->s[L->i + 1] == '*') {
            const char *e = strstr(L->s + L->i + 2, "*/");
            size_t end = e ? (size_t)(e - L->s) + 2 : L->n;
            for (size_t k = L->i; k < end; k++) L->line += L->s[k] == '\n';
            L->i = end;
            continue;
        }
        if (L->i + 1 < L->n && L->s[L->i] == '/' && L->s[L->i + 1] == '/') {
            while (L->i < L->n && L->s[L->i] != '\n') L->i++;
            continue;
        }
        break;
    }
    size_t k = 0;
    if (L->i >= L->n) {
        L->kind = 0;
        L->tok[0] = 0;
        return;
    }
    char c = L->s[L->i];
    if (c == '"') {
        L->i++;
        while (L->i < L->n && L->s[L->i] != '"') {
            if (L->s[L->i] == '\n') L->line++;
            if (k + 1 < sizeof L->tok && L->s[L->i] != '\\') L->tok[k++] = L->s[L->i];
            L->i++;
        }
        L->i++;
        L->kind = 's';
    } else if (strchr("(){}:;,", c)) {
        L->tok[k++] = c;
        L->i++;
        L->kind = c;
    } else {
        while (L->i < L->n && !isspace((unsigned char)L->s[L->i]) && !strchr("(){}:;,\"", L->s[L->i])) {
            if (k + 1 < sizeof L->tok) L->tok[k++] = L->s[L->i];
            L->i++;
        }
        L->kind = 'w';
    }
    L->tok[k] = 0;
}

/* ---- parse tree ---- */
typedef struct lnode {
    char name[64];
    int nargs;
    char args[4][256];
    char value[256];    /* simple attribute value */
    int is_group;
    struct lnode **kids;
    int nkids;
} lnode;

static void lnode_free(lnode *g)
{
    if (!g) return;
    for (int i = 0; i < g->nkids; i++) lnode_free(g->kids[i]);
    free(g->kids);
    free(g);
}

static int parse_stmt(lex *L, lnode **out, mts_err *err);

static int syntax(lex *L, mts_err *err, const char *what)
{
    return mts_fail(err, MTS_EFORMAT, "%s:%d: liberty syntax: expected %s near '%s'", L->path, L->line, what, L->tok);
}

static int parse_body(lex *L, lnode *g, mts_err *err)
{
    next(L);
    while (L->kind != '}') {
        if (L->kind == 0) return syntax(L, err, "'}'");
        lnode *k;
        int rc = parse_stmt(L, &k, err);
        if (rc) return rc;
        lnode **nk = realloc(g->kids, (size_t)(g->nkids + 1) * sizeof *nk);
        if (!nk) {
            lnode_free(k);
            return mts_fail(err, MTS_ENOMEM, "%s: out of memory", L->path);
        }
        g->kids = nk;
        g->kids[g->nkids++] = k;
    }
    next(L);
    return MTS_OK;
}

/* On entry L holds the statement's first token; on exit the token after it. */
static int parse_stmt(lex *L, lnode **out, mts_err *err)
{
    if (L->kind != 'w') return syntax(L, err, "an attribute or group name");
    lnode *g = calloc(1, sizeof *g);
    if (!g) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", L->path);
    snprintf(g->name, sizeof g->name, "%.*s", (int)sizeof g->name - 1, L->tok);
    int rc = MTS_OK;
    next(L);
    if (L->kind == ':') {
        next(L);
        snprintf(g->value, sizeof g->value, "%s", L->tok);
        next(L);
        while (L->kind == 'w' || L->kind == 's') next(L); /* e.g. unquoted multi-word values */
        if (L->kind == ';') next(L);
    } else if (L->kind == '(') {
        next(L);
        while (L->kind != ')') {
            if (L->kind == 0) {
                rc = syntax(L, err, "')'");
                break;
            }
            if (L->kind != ',' && g->nargs < 4) snprintf(g->args[g->nargs++], sizeof g->args[0], "%s", L->tok);
            next(L);
        }
        if (!rc) {
            next(L);
            if (L->kind == '{') {
                g->is_group = 1;
                rc = parse_body(L, g, err);
            } else if (L->kind == ';') {
                next(L);
            }
        }
    } else {
        rc = syntax(L, err, "':' or '('");
    }
    if (rc) {
        lnode_free(g);
        return rc;
    }
    *out = g;
    return MTS_OK;
}

/* ---- boolean functions: ! and postfix ' bind tightest, then ^, then & * or
 * juxtaposition, then | + (the liberty precedence). ---- */
typedef struct fparse {
    const char *s;
    int npins;
    const char (*pins)[16];
    unsigned m;  /* current assignment */
    int bad;
} fparse;

static void fskip(fparse *p) { while (*p->s == ' ' || *p->s == '\t') p->s++; }
static int f_or(fparse *p);

static int f_atom(fparse *p)
{
    fskip(p);
    int v = 0;
    if (*p->s == '!') {
        p->s++;
        v = !f_atom(p);
    } else if (*p->s == '(') {
        p->s++;
        v = f_or(p);
        fskip(p);
        if (*p->s == ')') p->s++;
        else p->bad = 1;
    } else if (*p->s == '0' || *p->s == '1') {
        v = *p->s++ == '1';
    } else if (isalpha((unsigned char)*p->s) || *p->s == '_') {
        const char *b = p->s;
        while (isalnum((unsigned char)*p->s) || *p->s == '_') p->s++;
        size_t len = (size_t)(p->s - b);
        int k = -1;
        for (int j = 0; j < p->npins; j++)
            if (strlen(p->pins[j]) == len && !strncmp(p->pins[j], b, len)) k = j;
        if (k < 0) p->bad = 1;
        else v = (int)((p->m >> k) & 1);
    } else {
        p->bad = 1;
    }
    fskip(p);
    while (*p->s == '\'') {
        v = !v;
        p->s++;
        fskip(p);
    }
    return v;
}

static int f_xor(fparse *p)
{
    int v = f_atom(p);
    while (fskip(p), *p->s == '^') {
        p->s++;
        v ^= f_atom(p);
    }
    return v;
}

static int f_and(fparse *p)
{
    int v = f_xor(p);
    for (;;) {
        fskip(p);
        if (*p->s == '&' || *p->s == '*') p->s++;
        else if (!(*p->s == '!' || *p->s == '(' || isalnum((unsigned char)*p->s) || *p->s == '_')) break;
        v &= f_xor(p);
    }
    return v;
}

static int f_or(fparse *p)
{
    int v = f_and(p);
    while (fskip(p), *p->s == '|' || *p->s == '+') {
        p->s++;
        v |= f_and(p);
    }
    return v;
}

int synth_lib_function_tt(const char *expr, int npins, const char pins[][16], uint64_t *tt, mts_err *err)
{
    if (npins < 0 || npins > SYNTH_LIB_MAX_PINS)
        return mts_fail(err, MTS_EINVAL, "function \"%s\": %d inputs (at most %d)", expr, npins, SYNTH_LIB_MAX_PINS);
    uint64_t t = 0;
    for (unsigned m = 0; m < (1u << npins); m++) {
        fparse p = {expr, npins, pins, m, 0};
        int v = f_or(&p);
        fskip(&p);
        if (p.bad || *p.s)
            return mts_fail(err, MTS_EFORMAT, "function \"%s\": cannot parse near '%s'", expr, p.s);
        t |= (uint64_t)v << m;
    }
    *tt = t;
    return MTS_OK;
}

/* ---- tree -> synth_lib ---- */
static double first_value(const lnode *g)
{
    for (int i = 0; i < g->nkids; i++)
        if (!strcmp(g->kids[i]->name, "values") && g->kids[i]->nargs) return atof(g->kids[i]->args[0]);
    return 0.0;
}

static int read_cell(const char *path, const lnode *c, synth_lcell *cell, mts_err *err)
{
    memset(cell, 0, sizeof *cell);
    snprintf(cell->name, sizeof cell->name, "%.*s", (int)sizeof cell->name - 1, c->nargs ? c->args[0] : "?");
    const char *functions[SYNTH_LIB_MAX_OUTS] = {NULL};
    int nout = 0;
    for (int i = 0; i < c->nkids; i++) {
        const lnode *k = c->kids[i];
        if (!strcmp(k->name, "area")) cell->area = atof(k->value);
        else if (!strcmp(k->name, "cell_leakage_power")) cell->leak_nw = atof(k->value);
        else if (!strcmp(k->name, "ff") || !strcmp(k->name, "latch")) cell->seq = 1;
        else if (!strcmp(k->name, "pin") && k->nargs) {
            const char *dir = "", *fn = NULL;
            double cap = 0, e = 0;
            int ne = 0;
            for (int j = 0; j < k->nkids; j++) {
                const lnode *a = k->kids[j];
                if (!strcmp(a->name, "direction")) dir = a->value;
                else if (!strcmp(a->name, "capacitance")) cap = atof(a->value);
                else if (!strcmp(a->name, "function")) fn = a->value;
                else if (!strcmp(a->name, "internal_power"))
                    for (int q = 0; q < a->nkids; q++)
                        if (!strcmp(a->kids[q]->name, "rise_power") || !strcmp(a->kids[q]->name, "fall_power")) {
                            e += first_value(a->kids[q]);
                            ne++;
                        }
            }
            if (!strcmp(dir, "input")) {
                if (cell->nin == SYNTH_LIB_MAX_PINS)
                    return mts_fail(err, MTS_EFORMAT, "%s: cell %s has more than %d inputs", path, cell->name,
                                    SYNTH_LIB_MAX_PINS);
                snprintf(cell->in[cell->nin], sizeof cell->in[0], "%.*s", (int)sizeof cell->in[0] - 1, k->args[0]);
                cell->cap[cell->nin++] = cap;
                if (ne) cell->e_int_fj += e / ne; /* e.g. a flip-flop's clock pin */
            } else if (!strcmp(dir, "output")) {
                if (nout == SYNTH_LIB_MAX_OUTS)
                    return mts_fail(err, MTS_EFORMAT, "%s: cell %s has more than %d outputs", path, cell->name,
                                    SYNTH_LIB_MAX_OUTS);
                snprintf(cell->outs[nout], sizeof cell->outs[0], "%.*s", (int)sizeof cell->outs[0] - 1, k->args[0]);
                functions[nout] = fn;
                cell->e_outs_fj[nout] = ne ? e / ne : 0;
                nout++;
            }
        }
    }
    if (nout < 1) return mts_fail(err, MTS_EFORMAT, "%s: cell %s has no output", path, cell->name);
    if (cell->seq && nout != 1)
        return mts_fail(err, MTS_EFORMAT, "%s: cell %s: sequential cells with %d outputs are not supported", path,
                        cell->name, nout);
    cell->nout = nout;
    memcpy(cell->out, cell->outs[0], sizeof cell->out);
    cell->e_int_fj += cell->e_outs_fj[0];
    cell->e_outs_fj[0] = cell->e_int_fj;
    if (cell->seq) return MTS_OK;
    for (int o = 0; o < nout; o++) {
        if (!functions[o])
            return mts_fail(err, MTS_EFORMAT, "%s: cell %s output %s has no function", path, cell->name, cell->outs[o]);
        int rc = synth_lib_function_tt(functions[o], cell->nin, (const char(*)[16])cell->in, &cell->tts[o], err);
        if (rc && err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return mts_fail(err, rc, "%s: cell %s: %s", path, cell->name, msg);
        }
    }
    cell->tt = cell->tts[0];
    return MTS_OK;
}

int synth_lib_load(const char *path, synth_lib *lib, mts_err *err)
{
    memset(lib, 0, sizeof *lib);
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(path, &buf, &len, err);
    if (rc) return rc;
    lex L = {(const char *)buf, path, 0, len, 1, {0}, 0};
    next(&L);
    lnode *root = NULL;
    rc = parse_stmt(&L, &root, err);
    free(buf);
    if (rc) return rc;
    if (!root->is_group || strcmp(root->name, "library")) {
        lnode_free(root);
        return mts_fail(err, MTS_EFORMAT, "%s: expected a liberty 'library (...) { }' group", path);
    }
    lib->voltage = 1.0;
    char wl_default[256] = "";
    for (int i = 0; i < root->nkids && !rc; i++) {
        const lnode *k = root->kids[i];
        if (!strcmp(k->name, "nom_voltage")) lib->voltage = atof(k->value);
        else if (!strcmp(k->name, "default_wire_load")) snprintf(wl_default, sizeof wl_default, "%s", k->value);
        else if (!strcmp(k->name, "cell") && k->is_group) {
            if (lib->ncells == SYNTH_LIB_MAX_CELLS)
                rc = mts_fail(err, MTS_EFORMAT, "%s: more than %d cells", path, SYNTH_LIB_MAX_CELLS);
            else if (!(rc = read_cell(path, k, &lib->cells[lib->ncells], err)))
                lib->ncells++;
        }
    }
    for (int i = 0; i < root->nkids && !rc; i++) {
        const lnode *k = root->kids[i];
        if (strcmp(k->name, "wire_load") || !k->nargs || strcmp(k->args[0], wl_default)) continue;
        for (int j = 0; j < k->nkids; j++) {
            const lnode *a = k->kids[j];
            if (!strcmp(a->name, "capacitance")) lib->wl_cap = atof(a->value);
            else if (!strcmp(a->name, "slope")) lib->wl_slope = atof(a->value);
            else if (!strcmp(a->name, "fanout_length") && a->nargs == 2 && lib->wl_n < SYNTH_LIB_MAX_WL) {
                lib->wl_fanout[lib->wl_n] = atoi(a->args[0]);
                lib->wl_len[lib->wl_n++] = atof(a->args[1]);
            }
        }
    }
    lnode_free(root);
    if (!rc && !lib->ncells) rc = mts_fail(err, MTS_EFORMAT, "%s: no cells", path);
    return rc;
}

const synth_lcell *synth_lib_find(const synth_lib *lib, const char *name)
{
    for (int i = 0; i < lib->ncells; i++)
        if (!strcmp(lib->cells[i].name, name)) return &lib->cells[i];
    return NULL;
}

double synth_lib_wire_cap(const synth_lib *lib, int fanout)
{
    if (fanout <= 0 || !lib->wl_n) return 0.0;
    /* Liberty semantics: interpolate the fanout_length table, extrapolate
     * beyond its last entry with `slope` length units per extra fanout. */
    int last = lib->wl_n - 1;
    double len;
    if (fanout >= lib->wl_fanout[last]) {
        len = lib->wl_len[last] + lib->wl_slope * (fanout - lib->wl_fanout[last]);
    } else if (fanout <= lib->wl_fanout[0]) {
        len = lib->wl_len[0] * fanout / lib->wl_fanout[0];
    } else {
        int j = 0;
        while (lib->wl_fanout[j + 1] < fanout) j++;
        double f0 = lib->wl_fanout[j], f1 = lib->wl_fanout[j + 1];
        len = lib->wl_len[j] + (lib->wl_len[j + 1] - lib->wl_len[j]) * (fanout - f0) / (f1 - f0);
    }
    return len * lib->wl_cap;
}
