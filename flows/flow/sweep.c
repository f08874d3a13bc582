/* sweep.c - parameter sweeps of a design (docs/flow.md "Sweeps"): the
 * `sweep` key and `--sweep`, and the design points they stand for. A point
 * is a design of its own to the flow: its steps carry its overrides as
 * `--param P=V`, so its cache keys differ from every other point's. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

/* A design name as the flow takes it from a file name, and a Verilog
 * identifier: no character that would make a point's name ambiguous. */
static int good_design(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.+-", *s)) return 0;
    return 1;
}

static int good_param(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_') return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '$') return 0;
    return 1;
}

/* A whole decimal integer in Verilog's 32-bit signed range. */
static int integer(const char *s, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || *end || errno || x < INT32_MIN || x > INT32_MAX || isspace((unsigned char)*s)) return -1;
    *v = x;
    return 0;
}

static int add_value(flow_sweep *s, int p, long v, mts_err *err)
{
    for (int i = 0; i < s->nvalues[p]; i++)
        if (s->value[p][i] == v)
            return mts_fail(err, MTS_EINVAL, "%s: %s: value %ld given twice", s->design, s->param[p], v);
    if (s->nvalues[p] == FLOW_SWEEP_VALUES)
        return mts_fail(err, MTS_EINVAL, "%s: %s: more than %d values", s->design, s->param[p], FLOW_SWEEP_VALUES);
    s->value[p][s->nvalues[p]++] = v;
    return MTS_OK;
}

/* VALUES: "0, 2, 4", "2..7", "0..10:2", mixed. */
static int values(flow_sweep *s, int p, char *text, mts_err *err)
{
    static const char forms[] = "integers, LO..HI or LO..HI:STEP, comma separated";
    if (!*trim(text)) return mts_fail(err, MTS_EINVAL, "%s: %s: no values (%s)", s->design, s->param[p], forms);
    for (char *save, *t = strtok_r(text, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        t = trim(t);
        char *dots = strstr(t, "..");
        long lo, hi, step = 1;
        if (!dots) {
            if (integer(t, &lo))
                return mts_fail(err, MTS_EINVAL, "%s: %s: '%s' is not an integer (%s)", s->design, s->param[p], t,
                                forms);
            if (add_value(s, p, lo, err)) return MTS_EINVAL;
            continue;
        }
        *dots = '\0';
        char *hs = dots + 2, *colon = strchr(hs, ':');
        if (colon) *colon = '\0';
        if (integer(trim(t), &lo) || integer(trim(hs), &hi) || (colon && integer(trim(colon + 1), &step)))
            return mts_fail(err, MTS_EINVAL, "%s: %s: '%s..%s%s%s' is not a range (%s)", s->design, s->param[p], t, hs,
                            colon ? ":" : "", colon ? colon + 1 : "", forms);
        if (step < 1 || lo > hi)
            return mts_fail(err, MTS_EINVAL, "%s: %s: range %ld..%ld%s%s is empty (LO <= HI, STEP >= 1)", s->design,
                            s->param[p], lo, hi, colon ? ":" : "", colon ? colon + 1 : "");
        if ((hi - lo) / step >= FLOW_SWEEP_VALUES)
            return mts_fail(err, MTS_EINVAL, "%s: %s: more than %d values", s->design, s->param[p], FLOW_SWEEP_VALUES);
        for (long v = lo; v <= hi; v += step)
            if (add_value(s, p, v, err)) return MTS_EINVAL;
    }
    return MTS_OK;
}

int flow_sweep_points(const flow_sweep *s)
{
    int n = 1;
    for (int p = 0; p < s->nparams; p++) n *= s->nvalues[p];
    return s->nparams ? n : 0;
}

void flow_sweep_point(const flow_sweep *s, int k, char name[FLOW_NAME], char params[][80], long *vals)
{
    size_t len = (size_t)snprintf(name, FLOW_NAME, "%s[", s->design);
    for (int p = 0; p < s->nparams; p++) {
        long v = s->value[p][k % s->nvalues[p]];
        k /= s->nvalues[p];
        snprintf(params[p], 80, "%s=%ld", s->param[p], v);
        if (len < FLOW_NAME) len += (size_t)snprintf(name + len, FLOW_NAME - len, "%s%s", p ? "," : "", params[p]);
        if (vals) vals[p] = v;
    }
    if (len < FLOW_NAME) snprintf(name + len, FLOW_NAME - len, "]");
}

const flow_sweep *flow_sweep_of(const flow_cfg *c, const char *design)
{
    for (int i = 0; i < c->nsweep; i++)
        if (!strcmp(c->sweep[i].design, design)) return &c->sweep[i];
    return NULL;
}

/* The longest name a point of s can have. */
static size_t longest_name(const flow_sweep *s)
{
    size_t len = strlen(s->design) + 2;
    for (int p = 0; p < s->nparams; p++) {
        size_t w = 0;
        for (int i = 0; i < s->nvalues[p]; i++) {
            char b[24];
            size_t l = (size_t)snprintf(b, sizeof b, "%ld", s->value[p][i]);
            w = l > w ? l : w;
        }
        len += strlen(s->param[p]) + 1 + w + (p ? 1 : 0);
    }
    return len;
}

int flow_sweep_add(flow_cfg *c, const char *spec, const char *where, mts_err *err)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) return mts_fail(err, MTS_EINVAL, "too long");
    char *colon = strchr(buf, ':');
    if (!colon)
        return mts_fail(err, MTS_EINVAL, "'%s': expected 'DESIGN: PARAM = VALUES' (e.g. 'int8_bam: BREAK = 0..8:2')",
                        trim(buf));
    *colon = '\0';
    char *design = trim(buf);
    if (!good_design(design) || strlen(design) >= FLOW_NAME)
        return mts_fail(err, MTS_EINVAL, "'%s': not a design name (the stem of a .v file: letters, digits, _ . + -)",
                        design);
    flow_sweep *s = (flow_sweep *)flow_sweep_of(c, design), fresh;
    int is_new = s == NULL;
    if (is_new) {
        if (c->nsweep == FLOW_MAX_SWEEPS)
            return mts_fail(err, MTS_EINVAL, "%s: more than %d swept designs", design, FLOW_MAX_SWEEPS);
        memset(&fresh, 0, sizeof fresh);
        snprintf(fresh.design, sizeof fresh.design, "%s", design);
        s = &fresh;
    }
    flow_sweep work = *s; /* changed only when the whole entry is good */
    int had = work.nparams;
    for (char *save, *t = strtok_r(colon + 1, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return mts_fail(err, MTS_EINVAL, "%s: '%s': expected PARAM = VALUES (e.g. BREAK = 0..8:2)", design,
                            trim(t));
        *eq = '\0';
        char *param = trim(t);
        if (!good_param(param) || strlen(param) >= sizeof work.param[0])
            return mts_fail(err, MTS_EINVAL, "%s: '%s' is not a parameter name", design, param);
        for (int p = 0; p < work.nparams; p++)
            if (!strcmp(work.param[p], param))
                return mts_fail(err, MTS_EINVAL, "%s: parameter %s swept twice", design, param);
        if (work.nparams == FLOW_SWEEP_PARAMS)
            return mts_fail(err, MTS_EINVAL, "%s: more than %d swept parameters", design, FLOW_SWEEP_PARAMS);
        int p = work.nparams++;
        snprintf(work.param[p], sizeof work.param[p], "%s", param);
        if (values(&work, p, eq + 1, err)) return MTS_EINVAL;
    }
    if (work.nparams == had) return mts_fail(err, MTS_EINVAL, "%s: no parameter (expected PARAM = VALUES)", design);
    if (longest_name(&work) >= FLOW_NAME)
        return mts_fail(err, MTS_EINVAL, "%s: point names such as %s[...] would be longer than %d characters", design,
                        design, FLOW_NAME - 1);
    int total = flow_sweep_points(&work);
    for (int i = 0; i < c->nsweep; i++)
        if (strcmp(c->sweep[i].design, design)) total += flow_sweep_points(&c->sweep[i]);
    if (total > FLOW_MAX_POINTS)
        return mts_fail(err, MTS_EINVAL, "%s: %d design points in all, more than %d", design, total, FLOW_MAX_POINTS);
    snprintf(work.where, sizeof work.where, "%s", where ? where : "sweep");
    if (is_new) c->sweep[c->nsweep++] = work;
    else *(flow_sweep *)flow_sweep_of(c, design) = work;
    return MTS_OK;
}

void flow_sweep_thin(flow_cfg *c, int keep)
{
    for (int i = 0; i < c->nsweep; i++)
        for (int p = 0; p < c->sweep[i].nparams; p++) {
            flow_sweep *s = &c->sweep[i];
            int n = s->nvalues[p];
            if (n <= keep || keep < 2) continue;
            long kept[FLOW_SWEEP_VALUES];
            for (int k = 0; k < keep; k++) kept[k] = s->value[p][(int)((long)k * (n - 1) / (keep - 1))];
            memcpy(s->value[p], kept, (size_t)keep * sizeof kept[0]);
            s->nvalues[p] = keep;
        }
}
