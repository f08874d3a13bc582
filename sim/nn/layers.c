/* layers.c - per-layer multipliers (--mul-layer PATTERN=SPEC): parsing the
 * rules, matching them to the net's layer names, opening one provider set
 * per rule and the per-node contexts the net passes to its ops
 * (mts_nn_ctx.node_ctx). Shared by the train and test drivers. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/nn_train.h"
#include "mantis/parse.h"
#include "nn_internal.h"

static int int_value(const char *rule, const char *k, const char *v, int lo, int hi, int *out, mts_err *err)
{
    long l;
    if (mts_parse_int(v, lo, hi, &l))
        return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': %s '%s': expected an integer in [%d, %d]", rule, k, v, lo,
                        hi);
    *out = (int)l;
    return MTS_OK;
}

/* One "key=value" (or the flag no-underflow) of a SPEC. */
static int spec_item(const char *rule, char *kv, mts_arith_spec *s, mts_err *err)
{
    char *v = strchr(kv, '=');
    if (!strcmp(kv, "no-underflow")) {
        s->no_underflow = 1;
        return MTS_OK;
    }
    if (!v) return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': '%s' is not key=value", rule, kv);
    *v++ = 0;
    if (!strcmp(kv, "acc")) snprintf(s->acc, sizeof s->acc, "%s", v);
    else if (!strcmp(kv, "prod")) snprintf(s->prod, sizeof s->prod, "%s", v);
    else if (!strcmp(kv, "format")) snprintf(s->format, sizeof s->format, "%s", v);
    else if (!strcmp(kv, "acc-bias")) return int_value(rule, kv, v, 0, 126, &s->acc_bias, err);
    else if (!strcmp(kv, "prod-bias")) return int_value(rule, kv, v, 0, 126, &s->prod_bias, err);
    else if (!strcmp(kv, "chunk")) return int_value(rule, kv, v, 1, 1 << 20, &s->chunk, err);
    else if (!strcmp(kv, "man-bits")) return int_value(rule, kv, v, 1, 23, &s->man_bits, err);
    else
        return mts_fail(err, MTS_EINVAL,
                        "--mul-layer '%s': unknown key '%s' (acc, prod, acc-bias, prod-bias, chunk, man-bits, format, "
                        "no-underflow)",
                        rule, kv);
    return MTS_OK;
}

int mts_layer_rule_parse(const char *text, mts_layer_rule *r, mts_err *err)
{
    memset(r, 0, sizeof *r);
    mts_arith_spec_init(&r->spec);
    const char *eq = strchr(text, '=');
    if (strlen(text) >= sizeof r->text) return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': too long", text);
    for (const char *c = text; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n' || !isprint((unsigned char)*c))
            return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': quotes, backslashes and control characters are not allowed",
                            text);
    if (!eq || eq == text || !eq[1])
        return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': expected PATTERN=SPEC (e.g. 'block*.attn.qk=fp32')", text);
    if ((size_t)(eq - text) >= sizeof r->pattern) return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': pattern too long", text);
    snprintf(r->text, sizeof r->text, "%s", text);
    memcpy(r->pattern, text, (size_t)(eq - text));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", eq + 1);
    char *save = NULL, *mul = strtok_r(buf, ",", &save);
    if (!mul) return mts_fail(err, MTS_EINVAL, "--mul-layer '%s': no multiplier after '='", text);
    if (strchr(mul, '/') || strstr(mul, ".lut")) {
        snprintf(r->spec.lut, sizeof r->spec.lut, "%s", mul);
        r->spec.mul[0] = 0;
    } else {
        snprintf(r->spec.mul, sizeof r->spec.mul, "%s", mul);
    }
    for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        int rc = spec_item(text, kv, &r->spec, err);
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

void nn_layers_close(nn_layers *L)
{
    for (int i = 0; i < L->n; i++)
        for (int j = 0; j < 3; j++) mts_arith_close(&L->arith[i][j]);
    free(L->arith);
    free(L->assign);
    free(L->train_nodes);
    free(L->eval_nodes);
    memset(L, 0, sizeof *L);
}

int nn_layers_open(nn_layers *L, const mts_net *net, const char *const *texts, int n, int train, int int_bwd,
                     mts_arith_open_fn open, void *ud, int threads, mts_err *err)
{
    memset(L, 0, sizeof *L);
    if (n > MTS_MAX_LAYER_RULES) return mts_fail(err, MTS_EINVAL, "at most %d --mul-layer rules", MTS_MAX_LAYER_RULES);
    L->arith = calloc((size_t)(n ? n : 1), sizeof *L->arith);
    L->assign = malloc(sizeof(int) * (size_t)net->n);
    int *match = calloc((size_t)net->n, sizeof(int));
    L->train_nodes = calloc((size_t)net->n, sizeof *L->train_nodes);
    L->eval_nodes = calloc((size_t)net->n, sizeof *L->eval_nodes);
    int rc = MTS_OK;
    if (!L->arith || !L->assign || !match || !L->train_nodes || !L->eval_nodes) {
        rc = mts_fail(err, MTS_ENOMEM, "--mul-layer: out of memory");
        goto done;
    }
    for (int i = 0; i < net->n; i++) L->assign[i] = -1;
    for (int r = 0; r < n && rc == MTS_OK; r++) {
        if ((rc = mts_layer_rule_parse(texts[r], &L->rule[r], err)) != MTS_OK) break;
        memset(match, 0, sizeof(int) * (size_t)net->n);
        if (!mts_net_match(net, L->rule[r].pattern, match)) {
            rc = mts_fail(err, MTS_EINVAL, "--mul-layer '%s': no multiplying layer of %s is named like '%s' (see "
                          "mantis train --model %s --list-layers)", texts[r], net->name, L->rule[r].pattern, net->name);
            break;
        }
        for (int i = 0; i < net->n; i++)
            if (match[i]) L->assign[i] = r; /* the last matching rule wins */
        /* forward and test: SPEC; backward: SPEC without FMAq, as the run's own */
        mts_arith_spec spec[3] = {L->rule[r].spec, L->rule[r].spec, L->rule[r].spec};
        spec[1].acc[0] = 0;
        static const char *const what[3] = {"forward", "backward", "test"};
        L->n = r + 1; /* closed by nn_layers_close even if half open (zeroed by calloc) */
        for (int j = train ? 0 : 2; j < 3; j++) {
            mts_err e2;
            rc = nn_open_arith(open, ud, &spec[j], threads, &L->arith[r][j], &e2);
            if (rc == MTS_OK && j == 1) rc = nn_int_bwd_arith(&L->arith[r][0], int_bwd, threads, &L->arith[r][1], &e2);
            if (rc == MTS_OK && j != 1) rc = mts_arith_int_prepare(&L->arith[r][j], j == 0 && int_bwd == MTS_INT_BWD_TABLE, &e2);
            if (rc != MTS_OK) {
                rc = mts_fail(err, rc, "--mul-layer '%s': %s multiplier: %s", texts[r], what[j], e2.msg);
                break;
            }
        }
    }
    /* what each rule ended up with, for the report */
    size_t len = 0;
    for (int r = 0; r < L->n && rc == MTS_OK; r++) {
        int count = 0;
        for (int i = 0; i < net->n; i++) count += L->assign[i] == r;
        if (len < sizeof L->desc)
            len += (size_t)snprintf(L->desc + len, sizeof L->desc - len, "%s%s: %d layers (%s)", r ? "; " : "",
                                    L->rule[r].text, count, L->arith[r][train ? 0 : 2].desc);
    }
done:
    free(match);
    if (rc != MTS_OK) nn_layers_close(L);
    return rc;
}

void nn_layers_bind(nn_layers *L, int nnodes, const mts_nn_ctx *train, const mts_nn_ctx *eval)
{
    for (int r = 0; r < L->n; r++) {
        if (train) {
            L->train[r] = *train;
            L->train[r].fwd = &L->arith[r][0].p;
            L->train[r].bwd = &L->arith[r][1].p;
            L->train[r].node_ctx = NULL;
            L->train[r].qtab = &L->arith[r][0].qtab;
            L->train[r].igrad = &L->arith[r][0].igrad;
        }
        if (eval) {
            L->eval[r] = *eval;
            L->eval[r].fwd = &L->arith[r][2].p;
            L->eval[r].bwd = NULL;
            L->eval[r].node_ctx = NULL;
            L->eval[r].qtab = &L->arith[r][2].qtab;
        }
    }
    for (int i = 0; i < nnodes; i++) {
        int r = L->assign[i];
        L->train_nodes[i] = r >= 0 && train ? &L->train[r] : NULL;
        L->eval_nodes[i] = r >= 0 && eval ? &L->eval[r] : NULL;
    }
}
