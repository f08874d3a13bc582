/* fuzz_lut_crc.c - the LUT reader with both CRCs made right (payload CRC at
 * 56 over the bytes after the 128-byte header, header CRC at 60 over the
 * header with that field zero), so every header field reaches the parser.
 * A table that loads must describe a valid format and be usable: one
 * product through it (what `eval` does) must not trip a sanitizer. */
#include "fuzz_util.h"
#include "mantis/lut.h"
#include "mantis/mul.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *b = fuzz_copy(data, size, 128);
    size_t n = size > 128 ? size : 128;
    memcpy(b, "MTSLUT\r\n", 8);
    fuzz_fix_crc(b, 56, 128, n);
    mts_put_le32(b + 60, 0);
    fuzz_fix_crc(b, 60, 0, 128);
    mts_lut lut;
    mts_err err;
    if (mts_lut_load(fuzz_file(0, b, n), &lut, &err) == MTS_OK) {
        if (lut.kind == MTS_LUT_FLOAT) {
            if (mts_format_check(&lut.fmt, &err) != MTS_OK) abort(); /* the loader let a bad format through */
            mts_mulop op;
            mts_mulop_lut(&op, &lut);
            uint32_t a = mts_fmt_quantize(&lut.fmt, 0x3fc00000u, MTS_RNE), c = mts_fmt_quantize(&lut.fmt, 0xc0100000u, MTS_RNE);
            volatile uint32_t r = op.fn(&op, a, c); /* 1.5 * -2.25 */
            (void)r;
        }
        mts_lut_free(&lut);
    }
    free(b);
    return 0;
}
