/* trace.h - operand traces: recorded operand pairs of real workloads (the
 * training engine writes them; `mantis synth --power-trace` replays them
 * through a gate-level netlist to measure switching power).
 *
 * File layout (little-endian; docs/trace-format.md):
 *   header, 64 bytes:
 *     0  char[8]  magic "MTSTRACE"
 *     8  u32      version (1)
 *    12  u32      header size (64)
 *    16  u32      kind (mts_trace_kind)
 *    20  u32      width_a: bits of operand a (1..64)
 *    24  u32      width_b: bits of operand b (1..64)
 *    28  u32      exp_bits: E of the float format (FLOAT, ACC; else 0)
 *    32  u32      flags (bit 0: operands are signed integers)
 *    36  u32      operand_bytes: 1, 2, 4 or 8, the smallest that holds
 *                 max(width_a, width_b)
 *    40  u64      count: number of records
 *    48  u32      CRC-32 of the record bytes
 *    52  u32      CRC-32 of header bytes 0..51
 *    56  u8[8]    reserved, zero
 *   records: count x (a, b), each operand operand_bytes little-endian bytes,
 *   the operand's code zero-extended (signed integers as two's complement
 *   codes of width_a / width_b bits). */
#ifndef MANTIS_TRACE_H
#define MANTIS_TRACE_H

#include <stdint.h>
#include <stdio.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MTS_TRACE_VERSION 1u
#define MTS_TRACE_HEADER_SIZE 64u

typedef enum {
    MTS_TRACE_INT = 1,   /* integer multiplier operands */
    MTS_TRACE_SIG = 2,   /* significand multiplier: M-bit mantissa fractions */
    MTS_TRACE_FLOAT = 3, /* float multiplier: 1+E+M-bit codes */
    MTS_TRACE_ACC = 4    /* accumulator: (product, partial sum) codes */
} mts_trace_kind;

typedef struct mts_trace_info {
    uint32_t kind;          /* mts_trace_kind */
    uint32_t width_a, width_b;
    uint32_t exp_bits;
    uint32_t flags;         /* bit 0: signed integers */
    uint64_t count;         /* records (filled by the reader / writer) */
} mts_trace_info;

/* A whole trace in memory: a[i], b[i] for i < info.count. */
typedef struct mts_trace {
    mts_trace_info info;
    uint64_t *a, *b;
} mts_trace;

/* "int", "significand", "float", "accumulator" (NULL for unknown kinds). */
const char *mts_trace_kind_name(uint32_t kind);

/* Reads and checks a trace file (magic, version, sizes, both CRCs, operands
 * within their widths). On success *t holds malloc'd arrays: free with
 * mts_trace_free. MTS_EIO / MTS_EFORMAT name the file and the bad field. */
int mts_trace_read(const char *path, mts_trace *t, mts_err *err);
void mts_trace_free(mts_trace *t);

/* Writes count records atomically (temp file + rename). info->count is
 * ignored. MTS_EINVAL for a bad kind/width or an operand wider than its width. */
int mts_trace_write(const char *path, const mts_trace_info *info, uint64_t count,
                    const uint64_t *a, const uint64_t *b, mts_err *err);

/* Streaming writer for producers that do not hold the whole trace: records
 * go to a temp file next to path; close fixes the header and renames it into
 * place (abort removes it). */
typedef struct mts_trace_writer mts_trace_writer;
int mts_trace_writer_open(const char *path, const mts_trace_info *info, mts_trace_writer **w, mts_err *err);
int mts_trace_writer_add(mts_trace_writer *w, uint64_t a, uint64_t b, mts_err *err);
int mts_trace_writer_close(mts_trace_writer *w, mts_err *err);
void mts_trace_writer_abort(mts_trace_writer *w);

#ifdef __cplusplus
}
#endif
#endif
