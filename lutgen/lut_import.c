/* lut_import.c - conversion from and to the tables peers ship.
 *  - ApproxTrain NAME_M.bin (M <= 7): one byte per entry, index (ma << M) | mb,
 *    bit 7 the carry (exponent adjustment 0/1), the low M bits the product's
 *    mantissa. Older ApproxTrain revisions wrote 4-byte entries instead (bit 31
 *    carry, bits 22..0 the FP32 mantissa field). The importer reads the
 *    width it is given, or infers it only from a size that no other
 *    (width, M) pair shares, and refuses a zero-filled table. Neither layout
 *    can hold products below 1.0 or zero, so export refuses tables with them.
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

/* Whether a file of len bytes holds an ApproxTrain table of 2^(2M)
 * bytes-wide entries (1-byte entries have room for M <= 7 bits only). */
static int at_fits(size_t len, int M, int bytes)
{
    if (M < 1 || M > 11 || (bytes == 1 && M > 7)) return 0;
    return len == ((size_t)bytes << (2 * M));
}

/* Picks the entry width: the one asked for, or, when asked for none, the one
 * the size allows. A size that fits the other width at M+-1 too is ambiguous
 * (16384 bytes: 1-byte entries at M=7 or 4-byte entries at M=6), and the
 * caller must say which: the importer never guesses. */
static int at_layout(const char *path, size_t len, int M, int want, int *bytes, mts_err *err)
{
    size_t n = (size_t)1 << (2 * M);
    if (want == 1 && M > 7)
        return mts_fail(err, MTS_EINVAL, "%s: 1-byte ApproxTrain entries hold M <= 7 bits, not %d", path, M);
    if (want == 1 || want == 4) {
        if (!at_fits(len, M, want))
            return mts_fail(err, MTS_EFORMAT, "%s: %zu bytes: %zu %d-byte ApproxTrain entries at M=%d take %zu bytes",
                            path, len, n, want, M, n * (size_t)want);
        *bytes = want;
        return MTS_OK;
    }
    if (want != 0) return mts_fail(err, MTS_EINVAL, "%s: entry size %d: expected 1 or 4 bytes", path, want);
    int w = at_fits(len, M, 1) ? 1 : at_fits(len, M, 4) ? 4 : 0;
    if (!w) {
        if (M > 7)
            return mts_fail(err, MTS_EFORMAT,
                            "%s: %zu bytes: an ApproxTrain LUT at M=%d has %zu 4-byte entries (%zu bytes)", path, len,
                            M, n, 4 * n);
        return mts_fail(err, MTS_EFORMAT,
                        "%s: %zu bytes: an ApproxTrain LUT at M=%d has %zu entries: %zu bytes of 1-byte entries or "
                        "%zu bytes of 4-byte entries",
                        path, len, M, n, n, 4 * n);
    }
    int other = w == 1 ? M - 1 : M + 1; /* the other width's M for the same size */
    if (at_fits(len, other, 5 - w)) {
        int m1 = w == 1 ? M : other, m4 = w == 1 ? other : M;
        return mts_fail(err, MTS_EINVAL,
                        "%s: %zu bytes fit two ApproxTrain layouts: %zu 1-byte entries (M=%d) or %zu 4-byte entries "
                        "(M=%d); say which entry size (--entry-bytes 1|4) with the matching --man-bits",
                        path, len, len, m1, len / 4, m4);
    }
    *bytes = w;
    return MTS_OK;
}

/* Decodes entry i into Mantis form (adjustment 0/1 in bits 31..24, mantissa
 * in FP32 field position); -1 when it has bits the layout cannot have. */
static int64_t at_entry(const uint8_t *b, size_t i, int bytes, int M)
{
    uint32_t carry, man;
    if (bytes == 4) {
        uint32_t v = mts_get_le32(b + 4 * i);
        carry = v >> 31;
        man = v & MTS_LUT_MAN;
        if ((v & 0x7F800000u) || (man & ((1u << (23 - M)) - 1u))) return -1;
    } else {
        carry = b[i] >> 7;
        man = (uint32_t)(b[i] & 0x7F);
        if (man >> M) return -1;
        man <<= 23 - M;
    }
    return (int64_t)(carry << 24 | man);
}

int mts_lut_import_approxtrain(const char *path, int M, int *entry_bytes, mts_lut *lut, mts_err *err)
{
    if (M < 1 || M > 11) return mts_fail(err, MTS_EINVAL, "%s: mantissa bits %d: expected 1..11", path, M);
    uint8_t *b;
    size_t len;
    int rc = mts_fs_read(path, &b, &len, err);
    if (rc) return rc;
    int bytes = 0;
    rc = at_layout(path, len, M, *entry_bytes, &bytes, err);
    if (rc) {
        free(b);
        return rc;
    }
    size_t n = (size_t)1 << (2 * M);
    memset(lut, 0, sizeof *lut);
    lut->entry = malloc(n * sizeof *lut->entry);
    if (!lut->entry) {
        free(b);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t e = at_entry(b, i, bytes, M);
        if (e < 0) {
            rc = mts_fail(err, MTS_EFORMAT, "%s: entry %zu has bits set outside carry and %d mantissa bits", path, i,
                          M);
            break;
        }
        lut->entry[i] = (uint32_t)e;
        any |= (uint32_t)e;
    }
    free(b);
    /* All zero would say every product, (2-2^-M)^2 included, is exactly 1.0:
     * no multiplier does that; a blank or zero-filled file does. */
    if (!rc && !any)
        rc = mts_fail(err, MTS_EFORMAT,
                      "%s: every entry is 0 (no carry, mantissa 0), i.e. every product exactly 1.0, even "
                      "(2-2^-%d)^2: not a multiplier's table (a blank or zero-filled file?)",
                      path, M);
    if (rc) {
        mts_lut_free(lut);
        return rc;
    }
    lut->kind = MTS_LUT_FLOAT;
    lut->fmt = mts_format_e8(M);
    lut->n = n;
    snprintf(lut->model, sizeof lut->model, "approxtrain:%s", base(path));
    *entry_bytes = bytes;
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
