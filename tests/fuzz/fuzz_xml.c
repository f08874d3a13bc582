/* fuzz_xml.c - the reader of Verilator's --xml-only output that drop-in
 * detection uses (sim/rtl/xml.c); it takes NUL-terminated text. */
#include "fuzz_util.h"
#include "rtl_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = (char *)fuzz_copy(data, size, size + 1);
    s[size] = 0;
    rtl_xml doc;
    mts_err err;
    if (rtl_xml_parse(s, &doc, "fuzz", &err) == MTS_OK) {
        for (int i = 0; i < doc.n; i++) {
            if (doc.node[i].parent >= i) abort(); /* parents come first */
            (void)rtl_xml_attr(&doc.node[i], "name");
        }
        rtl_xml_free(&doc);
    }
    free(s);
    return 0;
}
