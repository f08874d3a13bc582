/* synth_report.c - the synth result as JSON and as CSV, through the one
 * JSON and CSV writer (base/json.c, base/csv.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/csv.h"
#include "mantis/fs.h"
#include "mantis/json.h"
#include "mantis/synth.h"

void mts_synth_print_json(FILE *f, const mts_synth_result *r)
{
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 1);
    mts_jw_str(&w, "design", r->design);
    mts_jw_str(&w, "top", r->top);
    mts_jw_str(&w, "params", r->params);
    mts_jw_str(&w, "hash", r->hash);
    mts_jw_str(&w, "cache_dir", r->dir);
    mts_jw_bool(&w, "cache_hit", r->cache_hit);
    mts_jw_num(&w, "area_um2", r->area_um2, "%.4f");
    mts_jw_num(&w, "nand2_eq", r->nand2_eq, "%.2f");
    mts_jw_int(&w, "cells", r->ncells);
    mts_jw_obj(&w, "cell_counts", 0);
    for (int i = 0; i < r->ntypes; i++) mts_jw_int(&w, r->cells[i].name, r->cells[i].count);
    mts_jw_end(&w);
    mts_jw_num(&w, "delay_ps", r->delay_ps, "%.2f");
    mts_jw_str(&w, "delay_source", "opensta (liberty NLDM, every cell)");
    mts_jw_str(&w, "delay_from", r->delay_from);
    mts_jw_str(&w, "delay_to", r->delay_to);
    mts_jw_int(&w, "logic_depth", r->logic_depth);
    mts_jw_int(&w, "in_bits", r->in_bits);
    mts_jw_int(&w, "out_bits", r->out_bits);
    mts_jw_obj(&w, "equivalence", 0);
    mts_jw_bool(&w, "checked", r->eq_checked);
    mts_jw_bool(&w, "exhaustive", r->eq_exhaustive);
    mts_jw_uint(&w, "vectors", (unsigned long long)r->eq_vectors);
    mts_jw_int(&w, "mismatches", 0); /* a mismatch is an error, never a result */
    mts_jw_end(&w);
    mts_jw_obj(&w, "power", 0);
    mts_jw_str(&w, "stream", r->stream);
    mts_jw_uint(&w, "seed", (unsigned long long)r->seed);
    mts_jw_uint(&w, "ops", (unsigned long long)r->power_ops);
    mts_jw_num(&w, "toggles_per_op", r->toggles_per_op, "%.4f");
    mts_jw_num(&w, "energy_pj_per_op", r->energy_pj, "%.6f");
    mts_jw_num(&w, "clock_ghz", r->clock_ghz, "%.4f");
    mts_jw_num(&w, "dynamic_uw", r->dyn_uw, "%.4f");
    mts_jw_num(&w, "leakage_uw", r->leak_uw, "%.6f");
    mts_jw_num(&w, "total_uw", r->total_uw, "%.4f");
    mts_jw_end(&w);
    mts_jw_end(&w);
}

static void json_fn(FILE *f, void *r) { mts_synth_print_json(f, r); }

int mts_synth_write_json(const mts_synth_result *r, const char *path, mts_err *err)
{
    return mts_fs_write_stream(path, json_fn, (void *)r, err);
}

void mts_synth_print_csv(FILE *f, const mts_synth_result *r)
{
    static const char *const head[] = {"design", "params", "top", "area_um2", "nand2_eq", "cells", "delay_ps",
                                       "logic_depth", "eq_vectors", "eq_exhaustive", "stream", "seed", "ops",
                                       "toggles_per_op", "energy_pj", "clock_ghz", "dynamic_uw", "leakage_uw",
                                       "total_uw", "hash"};
    mts_csvw w;
    mts_csv_init(&w, f);
    mts_csv_row(&w, head, (int)(sizeof head / sizeof head[0]));
    mts_csv_str(&w, r->design);
    mts_csv_str(&w, r->params); /* "K=V,K=V": quoted by the writer, its commas stay inside */
    mts_csv_str(&w, r->top);
    mts_csv_num(&w, r->area_um2, "%.4f");
    mts_csv_num(&w, r->nand2_eq, "%.2f");
    mts_csv_int(&w, r->ncells);
    mts_csv_num(&w, r->delay_ps, "%.2f");
    mts_csv_int(&w, r->logic_depth);
    mts_csv_uint(&w, (unsigned long long)r->eq_vectors);
    mts_csv_int(&w, r->eq_exhaustive);
    mts_csv_str(&w, r->stream);
    mts_csv_uint(&w, (unsigned long long)r->seed);
    mts_csv_uint(&w, (unsigned long long)r->power_ops);
    mts_csv_num(&w, r->toggles_per_op, "%.4f");
    mts_csv_num(&w, r->energy_pj, "%.6f");
    mts_csv_num(&w, r->clock_ghz, "%.4f");
    mts_csv_num(&w, r->dyn_uw, "%.4f");
    mts_csv_num(&w, r->leak_uw, "%.6f");
    mts_csv_num(&w, r->total_uw, "%.4f");
    mts_csv_str(&w, r->hash);
    mts_csv_end(&w);
}

static void csv_fn(FILE *f, void *r) { mts_synth_print_csv(f, r); }

int mts_synth_write_csv(const mts_synth_result *r, const char *path, mts_err *err)
{
    return mts_fs_write_stream(path, csv_fn, (void *)r, err);
}
