/* synth_report.c - the synth result as JSON and as a CSV row. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/json.h"
#include "mantis/synth.h"

int mts_synth_write_json(const mts_synth_result *r, const char *path, mts_err *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    fputs("{\n  \"design\": ", f);
    mts_json_write_str(f, r->design);
    fputs(",\n  \"top\": ", f);
    mts_json_write_str(f, r->top);
    fputs(",\n  \"params\": ", f);
    mts_json_write_str(f, r->params);
    fprintf(f, ",\n  \"hash\": \"%s\",\n  \"cache_dir\": ", r->hash);
    mts_json_write_str(f, r->dir);
    fprintf(f, ",\n  \"cache_hit\": %s,\n", r->cache_hit ? "true" : "false");
    fprintf(f, "  \"area_um2\": %.4f,\n  \"nand2_eq\": %.2f,\n  \"cells\": %d,\n  \"cell_counts\": {", r->area_um2,
            r->nand2_eq, r->ncells);
    for (int i = 0; i < r->ntypes; i++) {
        fputs(i ? ", " : "", f);
        mts_json_write_str(f, r->cells[i].name);
        fprintf(f, ": %d", r->cells[i].count);
    }
    fprintf(f, "},\n  \"delay_ps\": %.2f,\n  \"delay_source\": \"abc stime (liberty NLDM)\",\n  \"logic_depth\": %d,\n",
            r->delay_ps, r->logic_depth);
    fprintf(f, "  \"in_bits\": %d,\n  \"out_bits\": %d,\n", r->in_bits, r->out_bits);
    fprintf(f, "  \"equivalence\": {\"checked\": %s, \"exhaustive\": %s, \"vectors\": %llu, \"mismatches\": 0},\n",
            r->eq_checked ? "true" : "false", r->eq_exhaustive ? "true" : "false", (unsigned long long)r->eq_vectors);
    fprintf(f, "  \"power\": {\"stream\": \"%s\", \"seed\": %llu, \"ops\": %llu, \"toggles_per_op\": %.4f, "
               "\"energy_pj_per_op\": %.6f, \"clock_ghz\": %.4f, \"dynamic_uw\": %.4f, \"leakage_uw\": %.6f, "
               "\"total_uw\": %.4f}\n}\n",
            r->stream, (unsigned long long)r->seed, (unsigned long long)r->power_ops, r->toggles_per_op, r->energy_pj,
            r->clock_ghz, r->dyn_uw, r->leak_uw, r->total_uw);
    int rc = ferror(f);
    if (fclose(f) || rc) rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory for the JSON report", path);
    const void *d[1] = {buf};
    if (!rc) rc = mts_fs_write_atomic(path, 1, d, &n, err);
    free(buf);
    return rc;
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
