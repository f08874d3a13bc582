/* trace.c - operand trace files (include/mantis/trace.h, docs/trace-format.md). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/trace.h"

static const char trace_magic[8] = {'M', 'T', 'S', 'T', 'R', 'A', 'C', 'E'};

struct mts_trace_writer {
    FILE *f;
    char *path, *tmp;
    mts_trace_info info;
    uint32_t obytes;
    uint32_t crc;
};

const char *mts_trace_kind_name(uint32_t kind)
{
    switch (kind) {
    case MTS_TRACE_INT: return "int";
    case MTS_TRACE_SIG: return "significand";
    case MTS_TRACE_FLOAT: return "float";
    case MTS_TRACE_ACC: return "accumulator";
    default: return NULL;
    }
}

static uint32_t operand_bytes(uint32_t wa, uint32_t wb)
{
    uint32_t w = wa > wb ? wa : wb;
    return w <= 8 ? 1 : w <= 16 ? 2 : w <= 32 ? 4 : 8;
}

static uint64_t width_mask(uint32_t w) { return w >= 64 ? ~0ull : (1ull << w) - 1; }

static void put_operand(uint8_t *p, uint64_t v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_operand(const uint8_t *p, uint32_t n)
{
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int check_info(const char *path, const mts_trace_info *in, mts_err *err)
{
    if (!mts_trace_kind_name(in->kind))
        return mts_fail(err, MTS_EINVAL, "%s: trace kind %u unknown (expected 1..4)", path, in->kind);
    if (in->width_a < 1 || in->width_a > 64 || in->width_b < 1 || in->width_b > 64)
        return mts_fail(err, MTS_EINVAL, "%s: trace operand widths %u/%u (expected 1..64)", path,
                        in->width_a, in->width_b);
    return MTS_OK;
}

static void encode_header(uint8_t h[MTS_TRACE_HEADER_SIZE], const mts_trace_info *in, uint32_t obytes,
                          uint64_t count, uint32_t rec_crc)
{
    memset(h, 0, MTS_TRACE_HEADER_SIZE);
    memcpy(h, trace_magic, 8);
    mts_put_le32(h + 8, MTS_TRACE_VERSION);
    mts_put_le32(h + 12, MTS_TRACE_HEADER_SIZE);
    mts_put_le32(h + 16, in->kind);
    mts_put_le32(h + 20, in->width_a);
    mts_put_le32(h + 24, in->width_b);
    mts_put_le32(h + 28, in->exp_bits);
    mts_put_le32(h + 32, in->flags);
    mts_put_le32(h + 36, obytes);
    mts_put_le64(h + 40, count);
    mts_put_le32(h + 48, rec_crc);
    mts_put_le32(h + 52, mts_crc32(0, h, 52));
}

int mts_trace_writer_open(const char *path, const mts_trace_info *info, mts_trace_writer **out, mts_err *err)
{
    int rc = check_info(path, info, err);
    if (!rc) rc = mts_fs_check_output(path, err);
    if (rc) return rc;
    mts_trace_writer *w = calloc(1, sizeof *w);
    size_t n = strlen(path) + 32;
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(n))) {
        if (w) free(w->path);
        free(w);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    snprintf(w->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    w->info = *info;
    w->obytes = operand_bytes(info->width_a, info->width_b);
    w->f = fopen(w->tmp, "wb");
    uint8_t h[MTS_TRACE_HEADER_SIZE] = {0};
    if (!w->f || fwrite(h, 1, sizeof h, w->f) != sizeof h) {
        rc = mts_fail(err, MTS_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
        mts_trace_writer_abort(w);
        return rc;
    }
    *out = w;
    return MTS_OK;
}

int mts_trace_writer_add(mts_trace_writer *w, uint64_t a, uint64_t b, mts_err *err)
{
    if ((a & ~width_mask(w->info.width_a)) || (b & ~width_mask(w->info.width_b)))
        return mts_fail(err, MTS_EINVAL, "%s: record %llu operand wider than %u/%u bits", w->path,
                        (unsigned long long)w->info.count, w->info.width_a, w->info.width_b);
    uint8_t rec[16];
    uint32_t ob = w->obytes > 8 ? 8 : w->obytes; /* operands are at most 64 bits */
    put_operand(rec, a, ob);
    put_operand(rec + ob, b, ob);
    if (fwrite(rec, 1, 2 * w->obytes, w->f) != 2 * w->obytes)
        return mts_fail(err, MTS_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    w->crc = mts_crc32(w->crc, rec, 2 * w->obytes);
    w->info.count++;
    return MTS_OK;
}

int mts_trace_writer_close(mts_trace_writer *w, mts_err *err)
{
    uint8_t h[MTS_TRACE_HEADER_SIZE];
    encode_header(h, &w->info, w->obytes, w->info.count, w->crc);
    int ok = fflush(w->f) == 0 && fseek(w->f, 0, SEEK_SET) == 0 && fwrite(h, 1, sizeof h, w->f) == sizeof h &&
             fflush(w->f) == 0 && fsync(fileno(w->f)) == 0;
    ok = (fclose(w->f) == 0) && ok;
    w->f = NULL;
    if (!ok || rename(w->tmp, w->path) != 0) {
        int rc = mts_fail(err, MTS_EIO, "%s: cannot write trace: %s", w->path, strerror(errno));
        mts_trace_writer_abort(w);
        return rc;
    }
    free(w->tmp);
    free(w->path);
    free(w);
    return MTS_OK;
}

void mts_trace_writer_abort(mts_trace_writer *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    free(w);
}

int mts_trace_write(const char *path, const mts_trace_info *info, uint64_t count, const uint64_t *a,
                    const uint64_t *b, mts_err *err)
{
    mts_trace_writer *w;
    mts_trace_info in = *info;
    in.count = 0;
    int rc = mts_trace_writer_open(path, &in, &w, err);
    for (uint64_t i = 0; !rc && i < count; i++) rc = mts_trace_writer_add(w, a[i], b[i], err);
    if (rc) {
        mts_trace_writer_abort(w);
        return rc;
    }
    return mts_trace_writer_close(w, err);
}

int mts_trace_read(const char *path, mts_trace *t, mts_err *err)
{
    memset(t, 0, sizeof *t);
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(path, &buf, &len, err);
    if (rc) return rc;
    mts_trace_info in = {0};
    uint32_t obytes = 0;
    if (len < MTS_TRACE_HEADER_SIZE || memcmp(buf, trace_magic, 8)) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: not a Mantis trace (expected magic MTSTRACE)", path);
        goto out;
    }
    if (mts_get_le32(buf + 52) != mts_crc32(0, buf, 52)) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: trace header checksum mismatch", path);
        goto out;
    }
    if (mts_get_le32(buf + 8) != MTS_TRACE_VERSION || mts_get_le32(buf + 12) != MTS_TRACE_HEADER_SIZE) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: trace version %u / header size %u (expected %u / %u)", path,
                      mts_get_le32(buf + 8), mts_get_le32(buf + 12), MTS_TRACE_VERSION, MTS_TRACE_HEADER_SIZE);
        goto out;
    }
    in.kind = mts_get_le32(buf + 16);
    in.width_a = mts_get_le32(buf + 20);
    in.width_b = mts_get_le32(buf + 24);
    in.exp_bits = mts_get_le32(buf + 28);
    in.flags = mts_get_le32(buf + 32);
    obytes = mts_get_le32(buf + 36);
    in.count = mts_get_le64(buf + 40);
    if ((rc = check_info(path, &in, err))) {
        rc = MTS_EFORMAT;
        goto out;
    }
    if (obytes != operand_bytes(in.width_a, in.width_b)) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: operand_bytes %u does not fit widths %u/%u", path, obytes,
                      in.width_a, in.width_b);
        goto out;
    }
    if (in.count > (len - MTS_TRACE_HEADER_SIZE) / (2 * obytes) ||
        len != MTS_TRACE_HEADER_SIZE + in.count * 2 * obytes) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: size %zu bytes does not match %llu records of %u bytes", path, len,
                      (unsigned long long)in.count, 2 * obytes);
        goto out;
    }
    const uint8_t *rec = buf + MTS_TRACE_HEADER_SIZE;
    if (mts_crc32(0, rec, len - MTS_TRACE_HEADER_SIZE) != mts_get_le32(buf + 48)) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: trace record checksum mismatch", path);
        goto out;
    }
    size_t n = in.count ? (size_t)in.count : 1;
    t->a = malloc(n * sizeof *t->a);
    t->b = malloc(n * sizeof *t->b);
    if (!t->a || !t->b) {
        mts_trace_free(t);
        rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory for %llu records", path, (unsigned long long)in.count);
        goto out;
    }
    for (uint64_t i = 0; i < in.count; i++) {
        t->a[i] = get_operand(rec + 2 * obytes * i, obytes);
        t->b[i] = get_operand(rec + 2 * obytes * i + obytes, obytes);
        if ((t->a[i] & ~width_mask(in.width_a)) || (t->b[i] & ~width_mask(in.width_b))) {
            mts_trace_free(t);
            rc = mts_fail(err, MTS_EFORMAT, "%s: record %llu has an operand wider than %u/%u bits", path,
                          (unsigned long long)i, in.width_a, in.width_b);
            goto out;
        }
    }
    t->info = in;
out:
    free(buf);
    return rc;
}

void mts_trace_free(mts_trace *t)
{
    free(t->a);
    free(t->b);
    t->a = t->b = NULL;
}
