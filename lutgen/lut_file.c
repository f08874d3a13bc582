/* lut_file.c - the Mantis LUT file: a 128-byte little-endian header with its
 * own CRC, then the payload of uint32 entries with a CRC (docs/lut-format.md).
 * The loader names precisely what is wrong with a bad file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/lut.h"

#define MAGIC "MTSLUT\r\n" /* \r\n catches text-mode mangling, as PNG does */
#define VERSION 1u
#define HDR 128

enum {
    O_MAGIC = 0, O_VERSION = 8, O_HDRSIZE = 12, O_KIND = 16, O_E = 20, O_BIAS = 24, O_IEEE = 28,
    O_BITS = 32, O_SIGNED = 36, O_ENTRY = 40, O_COUNT = 48, O_PCRC = 56, O_HCRC = 60, O_MODEL = 64
};

int mts_lut_save(const mts_lut *lut, const char *path, mts_err *err)
{
    uint8_t h[HDR] = {0};
    memcpy(h + O_MAGIC, MAGIC, 8);
    mts_put_le32(h + O_VERSION, VERSION);
    mts_put_le32(h + O_HDRSIZE, HDR);
    mts_put_le32(h + O_KIND, (uint32_t)lut->kind);
    if (lut->kind == MTS_LUT_FLOAT) {
        mts_put_le32(h + O_E, (uint32_t)lut->fmt.E);
        mts_put_le32(h + O_BIAS, (uint32_t)lut->fmt.bias);
        mts_put_le32(h + O_IEEE, (uint32_t)lut->fmt.ieee);
        mts_put_le32(h + O_BITS, (uint32_t)lut->fmt.M);
    } else {
        mts_put_le32(h + O_BITS, (uint32_t)lut->int_bits);
        mts_put_le32(h + O_SIGNED, (uint32_t)lut->int_signed);
    }
    mts_put_le32(h + O_ENTRY, 4);
    mts_put_le64(h + O_COUNT, lut->n);
    snprintf((char *)h + O_MODEL, 64, "%s", lut->model);
    uint8_t *pay = malloc(lut->n * 4 + 1);
    if (!pay) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < lut->n; i++) mts_put_le32(pay + 4 * i, lut->entry[i]);
    mts_put_le32(h + O_PCRC, mts_crc32(0, pay, lut->n * 4));
    mts_put_le32(h + O_HCRC, mts_crc32(0, h, HDR));
    const void *parts[2] = {h, pay};
    size_t lens[2] = {HDR, lut->n * 4};
    int rc = mts_fs_write_atomic(path, 2, parts, lens, err);
    free(pay);
    return rc;
}

static int parse(const char *path, const uint8_t *b, size_t len, mts_lut *lut, mts_err *err)
{
    if (len < 8 || memcmp(b, MAGIC, 8) != 0)
        return mts_fail(err, MTS_EFORMAT, "%s: not a Mantis LUT file (bad magic; expected \"MTSLUT\\r\\n\")",
                        path);
    if (len < HDR)
        return mts_fail(err, MTS_EFORMAT, "%s: truncated header: %zu of %d bytes", path, len, HDR);
    uint32_t ver = mts_get_le32(b + O_VERSION);
    if (ver != VERSION)
        return mts_fail(err, MTS_EFORMAT, "%s: unsupported LUT format version %u (this Mantis reads %u)", path,
                        ver, VERSION);
    uint8_t h[HDR];
    memcpy(h, b, HDR);
    uint32_t hcrc = mts_get_le32(h + O_HCRC);
    mts_put_le32(h + O_HCRC, 0);
    if (mts_crc32(0, h, HDR) != hcrc)
        return mts_fail(err, MTS_EFORMAT, "%s: header checksum mismatch (header corrupted)", path);
    if (mts_get_le32(b + O_HDRSIZE) != HDR || mts_get_le32(b + O_ENTRY) != 4)
        return mts_fail(err, MTS_EFORMAT, "%s: header size %u / entry size %u: expected %d / 4", path,
                        mts_get_le32(b + O_HDRSIZE), mts_get_le32(b + O_ENTRY), HDR);
    memset(lut, 0, sizeof *lut);
    uint32_t kind = mts_get_le32(b + O_KIND), bits = mts_get_le32(b + O_BITS);
    size_t want;
    if (kind == MTS_LUT_FLOAT) {
        lut->fmt.E = (int)mts_get_le32(b + O_E);
        lut->fmt.M = (int)bits;
        lut->fmt.bias = (int)mts_get_le32(b + O_BIAS);
        lut->fmt.ieee = mts_get_le32(b + O_IEEE) != 0;
        mts_err fe;
        if (mts_format_check(&lut->fmt, &fe) || bits > 11)
            return mts_fail(err, MTS_EFORMAT, "%s: invalid float format in header (E=%d, M=%u, bias=%d)", path,
                            lut->fmt.E, bits, lut->fmt.bias);
    } else if (kind == MTS_LUT_INT) {
        if (bits < 1 || bits > 8)
            return mts_fail(err, MTS_EFORMAT, "%s: integer table of %u-bit operands: expected 1..8", path, bits);
        lut->int_bits = (int)bits;
        lut->int_signed = mts_get_le32(b + O_SIGNED) != 0;
    } else {
        return mts_fail(err, MTS_EFORMAT, "%s: unknown table kind %u (expected 1 float or 2 integer)", path, kind);
    }
    lut->kind = (mts_lut_kind)kind;
    want = (size_t)1 << (2 * bits);
    uint64_t count = mts_get_le64(b + O_COUNT);
    if (count != want)
        return mts_fail(err, MTS_EFORMAT, "%s: header says %llu entries; %u-bit operands need %zu", path,
                        (unsigned long long)count, bits, want);
    if (len - HDR < want * 4)
        return mts_fail(err, MTS_EFORMAT, "%s: truncated payload: %zu of %zu bytes", path, len - HDR, want * 4);
    if (len - HDR > want * 4)
        return mts_fail(err, MTS_EFORMAT, "%s: size mismatch: %zu trailing bytes after the payload", path,
                        len - HDR - want * 4);
    if (mts_crc32(0, b + HDR, want * 4) != mts_get_le32(b + O_PCRC))
        return mts_fail(err, MTS_EFORMAT, "%s: payload checksum mismatch (table corrupted)", path);
    if (memchr(b + O_MODEL, 0, 64) == NULL)
        return mts_fail(err, MTS_EFORMAT, "%s: model name not terminated", path);
    lut->entry = malloc(want * 4);
    if (!lut->entry) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < want; i++) lut->entry[i] = mts_get_le32(b + HDR + 4 * i);
    lut->n = want;
    snprintf(lut->model, sizeof lut->model, "%s", (const char *)b + O_MODEL);
    return MTS_OK;
}

int mts_lut_load(const char *path, mts_lut *lut, mts_err *err)
{
    uint8_t *b;
    size_t len;
    int rc = mts_fs_read(path, &b, &len, err);
    if (rc) return rc;
    rc = parse(path, b, len, lut, err);
    free(b);
    return rc;
}
