/* json.h - a minimal JSON reader (the flow reads back the JSON that Mantis'
 * own commands write: verify, metrics, synth, train, rtl info) and the one
 * JSON string writer every report uses. */
#ifndef MANTIS_JSON_H
#define MANTIS_JSON_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MTS_JNULL, MTS_JBOOL, MTS_JNUM, MTS_JSTR, MTS_JARR, MTS_JOBJ } mts_jtype;

typedef struct mts_json {
    mts_jtype type;
    double num;            /* NUM, BOOL (0/1) */
    char *str;             /* STR */
    char *key;             /* member name when inside an object */
    struct mts_json *child, *next; /* ARR / OBJ children, in order */
} mts_json;

/* Parses text; NULL on malformed input (with the byte offset in *errpos). */
mts_json *mts_json_parse(const char *text, size_t *errpos);
void mts_json_free(mts_json *j);

/* Member `key` of object j (NULL if j is not an object or has none). */
const mts_json *mts_json_get(const mts_json *j, const char *key);
/* Follows a dotted path "a.b.c" of object members. */
const mts_json *mts_json_path(const mts_json *j, const char *path);
/* Number at path, or dflt when absent / not a number. */
double mts_json_num(const mts_json *j, const char *path, double dflt);
/* String at path, or dflt. */
const char *mts_json_str(const mts_json *j, const char *path, const char *dflt);
/* Reads and parses a file; NULL when missing or malformed. */
mts_json *mts_json_load(const char *path);

/* Writes s as a JSON string literal (with quotes, escaped) to f. */
void mts_json_write_str(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif

#endif
