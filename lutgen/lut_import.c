/* lut_import.c - conversion from and to the tables peers ship.
 *  - ApproxTrain NAME_M.bin (M <= 7): one byte per entry, index (ma << M) | mb,
 *    bit 7 the carry (exponent adjustment 0/1), the low M bits the product's
 *    mantissa. Some ApproxTrain revisions wrote 4-byte entries instead (bit 31
 *    carry, bits 22..0 the FP32 mantissa field); the importer accepts both,
 *    telling them apart by size. Neither can hold products below 1.0 or zero,
 *    so export refuses tables that have them.
 *  - TFApprox / EvoApprox 8-bit tables: 65,536 little-endian uint16 products,
 *    index (a << 8) | b; signed tables hold the two's complement of the
 *    16-bit product. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/lut.h"

static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int mts_lut_import_approxtrain(const char *path, int M, mts_lut *lut, mts_err *err)
{
    if (M < 1 || M > 11) return mts_fail(err, MTS_EINVAL, "%s: mantissa bits %d: expected 1..11", path, M);
    uint8_t *b;
    size_t len;
    int rc = mts_fs_read(path, &b, &len, err);
    if (rc) return rc;
    size_t n = (size_t)1 << (2 * M);
    int wide = len == 4 * n;
    if (len != n && !wide) {
        free(b);
        return mts_fail(err, MTS_EFORMAT,
                        "%s: %zu bytes: an ApproxTrain LUT at M=%d has %zu (1-byte) or %zu (4-byte) entries", path,
                        len, M, n, 4 * n);
    }
    if (!wide && M > 7) {
        free(b);
        return mts_fail(err, MTS_EFORMAT, "%s: 1-byte ApproxTrain entries hold M <= 7 bits, not %d", path, M);
    }
    memset(lut, 0, sizeof *lut);
    lut->entry = malloc(n * sizeof *lut->entry);
    if (!lut->entry) {
        free(b);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    uint32_t low = (1u << (23 - M)) - 1u; /* mantissa bits the format cannot have */
    for (size_t i = 0; i < n; i++) {
        uint32_t carry, man;
        if (wide) {
            uint32_t v = mts_get_le32(b + 4 * i);
            carry = v >> 31;
            man = v & MTS_LUT_MAN;
            if ((v & 0x7F800000u) || (man & low)) rc = 1;
        } else {
            carry = b[i] >> 7;
            man = (uint32_t)(b[i] & 0x7F);
            if (man >> M) rc = 1;
            man <<= 23 - M;
        }
        if (rc) {
            free(b);
            mts_lut_free(lut);
            return mts_fail(err, MTS_EFORMAT, "%s: entry %zu has bits set outside carry and %d mantissa bits", path,
                            i, M);
        }
        lut->entry[i] = (carry << 24) | man;
    }
    free(b);
    lut->kind = MTS_LUT_FLOAT;
    lut->fmt = mts_format_e8(M);
    lut->n = n;
    snprintf(lut->model, sizeof lut->model, "approxtrain:%s", base(path));
    return MTS_OK;
}

int mts_lut_export_approxtrain(const mts_lut *lut, const char *path, mts_err *err)
{
    if (lut->kind != MTS_LUT_FLOAT || lut->fmt.M > 7)
        return mts_fail(err, MTS_EINVAL, "%s: ApproxTrain tables hold float LUTs with M <= 7", path);
    int M = lut->fmt.M;
    uint8_t *b = malloc(lut->n);
    if (!b) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < lut->n; i++) {
        uint32_t e = lut->entry[i], man = e & MTS_LUT_MAN;
        int adj = mts_lut_adj(e);
        if ((e & MTS_LUT_ZERO) || adj < 0 || adj > 1 || (man & ((1u << (23 - M)) - 1u))) {
            free(b);
            return mts_fail(err, MTS_EUNSUPPORTED,
                            "%s: entry %zu (ma=%zu, mb=%zu) has %s, which ApproxTrain's format cannot hold", path, i,
                            i >> M, i & ((1u << M) - 1u),
                            (e & MTS_LUT_ZERO) ? "a zero product"
                            : (adj < 0 || adj > 1) ? "an exponent adjustment other than 0/1"
                                                   : "more than M mantissa bits");
        }
        b[i] = (uint8_t)((uint32_t)adj << 7 | man >> (23 - M));
    }
    const void *parts[1] = {b};
    size_t lens[1] = {lut->n};
    int rc = mts_fs_write_atomic(path, 1, parts, lens, err);
    free(b);
    return rc;
}

int mts_lut_import_8bit(const char *path, int is_signed, mts_lut *lut, mts_err *err)
{
    uint8_t *b;
    size_t len;
    int rc = mts_fs_read(path, &b, &len, err);
    if (rc) return rc;
    if (len != 65536 * 2) {
        free(b);
        return mts_fail(err, MTS_EFORMAT, "%s: %zu bytes: an 8-bit table has 65536 uint16 entries (131072 bytes)",
                        path, len);
    }
    memset(lut, 0, sizeof *lut);
    lut->entry = malloc(65536 * sizeof *lut->entry);
    if (!lut->entry) {
        free(b);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < 65536; i++) {
        uint32_t v = (uint32_t)b[2 * i] | (uint32_t)b[2 * i + 1] << 8;
        lut->entry[i] = is_signed ? (uint32_t)(int32_t)(int16_t)v : v;
    }
    free(b);
    lut->kind = MTS_LUT_INT;
    lut->int_bits = 8;
    lut->int_signed = is_signed;
    lut->n = 65536;
    snprintf(lut->model, sizeof lut->model, "8bit:%s", base(path));
    return MTS_OK;
}

int mts_lut_export_8bit(const mts_lut *lut, const char *path, mts_err *err)
{
    if (lut->kind != MTS_LUT_INT || lut->int_bits != 8)
        return mts_fail(err, MTS_EINVAL, "%s: 8-bit export needs an integer table of 8-bit operands", path);
    uint8_t *b = malloc(65536 * 2);
    if (!b) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < 65536; i++) {
        int32_t v = (int32_t)lut->entry[i];
        if (lut->int_signed ? (v < -32768 || v > 32767) : (v < 0 || v > 65535)) {
            free(b);
            return mts_fail(err, MTS_EUNSUPPORTED, "%s: entry %zu = %d does not fit a %s 16-bit product", path, i, v,
                            lut->int_signed ? "signed" : "unsigned");
        }
        b[2 * i] = (uint8_t)v;
        b[2 * i + 1] = (uint8_t)((uint32_t)v >> 8);
    }
    const void *parts[1] = {b};
    size_t lens[1] = {65536 * 2};
    int rc = mts_fs_write_atomic(path, 1, parts, lens, err);
    free(b);
    return rc;
}
