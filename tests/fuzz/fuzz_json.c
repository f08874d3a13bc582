/* fuzz_json.c - the JSON reader (base/json.c) on NUL-terminated text, then
 * the lookups the flow makes on what it read. */
#include "fuzz_util.h"
#include "mantis/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exactly size+1 bytes: a read past the NUL is caught by ASan */
    char *s = malloc(size + 1);
    if (!s) return 0;
    if (size) memcpy(s, data, size);
    s[size] = 0;
    size_t pos = 0;
    mts_json *j = mts_json_parse(s, &pos);
    if (j) {
        (void)mts_json_num(j, "a.b", 0);
        (void)mts_json_str(j, "kind", NULL);
        mts_json_free(j);
    } else if (pos > size) {
        abort(); /* the error offset lies outside the text */
    }
    free(s);
    return 0;
}
