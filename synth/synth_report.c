/* synth_report.c - the synth result as JSON and as a CSV row. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/synth.h"

/* Appends s as a JSON string literal. */
static void jstr(char *buf, size_t cap, size_t *n, const char *s)
{
    if (*n < cap) buf[(*n)++] = '"';
    for (; *s && *n + 8 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') *n += (size_t)snprintf(buf + *n, cap - *n, "\\%c", ch);
        else if (ch < 0x20) *n += (size_t)snprintf(buf + *n, cap - *n, "\\u%04x", ch);
        else buf[(*n)++] = (char)ch;
    }
    if (*n < cap) buf[(*n)++] = '"';
    if (*n < cap) buf[*n] = 0;
}

#define APPEND(...) (n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, __VA_ARGS__))

int mts_synth_write_json(const mts_synth_result *r, const char *path, mts_err *err)
{
    char buf[16384];
    size_t n = 0;
    APPEND("{\n  \"design\": ");
    jstr(buf, sizeof buf, &n, r->design);
    APPEND(",\n  \"top\": ");
    jstr(buf, sizeof buf, &n, r->top);
    APPEND(",\n  \"params\": ");
    jstr(buf, sizeof buf, &n, r->params);
    APPEND(",\n  \"hash\": \"%s\",\n  \"cache_dir\": ", r->hash);
    jstr(buf, sizeof buf, &n, r->dir);
    APPEND(",\n  \"cache_hit\": %s,\n", r->cache_hit ? "true" : "false");
    APPEND("  \"area_um2\": %.4f,\n  \"nand2_eq\": %.2f,\n  \"cells\": %d,\n  \"cell_counts\": {", r->area_um2,
           r->nand2_eq, r->ncells);
    for (int i = 0; i < r->ntypes; i++) {
        APPEND("%s", i ? ", " : "");
        jstr(buf, sizeof buf, &n, r->cells[i].name);
        APPEND(": %d", r->cells[i].count);
    }
    APPEND("},\n  \"delay_ps\": %.2f,\n  \"delay_source\": \"abc stime (liberty NLDM)\",\n  \"logic_depth\": %d,\n",
           r->delay_ps, r->logic_depth);
    APPEND("  \"in_bits\": %d,\n  \"out_bits\": %d,\n", r->in_bits, r->out_bits);
    APPEND("  \"equivalence\": {\"checked\": %s, \"exhaustive\": %s, \"vectors\": %llu, \"mismatches\": 0},\n",
           r->eq_checked ? "true" : "false", r->eq_exhaustive ? "true" : "false", (unsigned long long)r->eq_vectors);
    APPEND("  \"power\": {\"stream\": \"%s\", \"seed\": %llu, \"ops\": %llu, \"toggles_per_op\": %.4f, "
           "\"energy_pj_per_op\": %.6f, \"clock_ghz\": %.4f, \"dynamic_uw\": %.4f, \"leakage_uw\": %.6f, "
           "\"total_uw\": %.4f}\n}\n",
           r->stream, (unsigned long long)r->seed, (unsigned long long)r->power_ops, r->toggles_per_op, r->energy_pj,
           r->clock_ghz, r->dyn_uw, r->leak_uw, r->total_uw);
    if (n >= sizeof buf) return mts_fail(err, MTS_EINVAL, "%s: JSON report too long", path);
    const void *d[1] = {buf};
    size_t len[1] = {n};
    return mts_fs_write_atomic(path, 1, d, len, err);
}

const char *mts_synth_csv_header(void)
{
    return "design,params,top,area_um2,nand2_eq,cells,delay_ps,logic_depth,eq_vectors,eq_exhaustive,stream,seed,ops,"
           "toggles_per_op,energy_pj,clock_ghz,dynamic_uw,leakage_uw,total_uw,hash";
}

void mts_synth_csv_row(const mts_synth_result *r, char *buf, size_t cap)
{
    /* params are "K=V,K=V": quote the field so its commas stay inside it. */
    snprintf(buf, cap, "%s,\"%s\",%s,%.4f,%.2f,%d,%.2f,%d,%llu,%d,%s,%llu,%llu,%.4f,%.6f,%.4f,%.4f,%.6f,%.4f,%s",
             r->design, r->params, r->top, r->area_um2, r->nand2_eq, r->ncells, r->delay_ps, r->logic_depth,
             (unsigned long long)r->eq_vectors, r->eq_exhaustive, r->stream, (unsigned long long)r->seed,
             (unsigned long long)r->power_ops, r->toggles_per_op, r->energy_pj, r->clock_ghz, r->dyn_uw, r->leak_uw,
             r->total_uw, r->hash);
}

int mts_synth_write_csv(const mts_synth_result *r, const char *path, mts_err *err)
{
    char row[2048];
    mts_synth_csv_row(r, row, sizeof row);
    const char *head = mts_synth_csv_header();
    const void *d[4] = {head, "\n", row, "\n"};
    size_t len[4] = {strlen(head), 1, strlen(row), 1};
    return mts_fs_write_atomic(path, 4, d, len, err);
}
