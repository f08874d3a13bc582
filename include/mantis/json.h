/* json.h - a minimal JSON reader (the flow reads back the JSON that Mantis'
 * own commands write: verify, metrics, synth, train, rtl info) and the one
 * JSON writer every report, command and the flow's results.json use
 * (mts_jw: it places the commas, quotes and escapes; a number that is NaN
 * or infinite is written null, the documented token for "no value"). */
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

/* Writes s as a JSON string literal (with quotes, escaped) to f: '"' and
 * '\\' backslashed, control characters as \n or \u00XX, other bytes as
 * they are (UTF-8 passes through). */
void mts_json_write_str(FILE *f, const char *s);

/* The JSON writer. Containers nest up to MTS_JW_DEPTH; a container opened
 * with lines = 1 puts each member on its own line, indented two spaces per
 * level (else members follow ", " on one line). key is the member's name
 * inside an object and NULL inside an array or at the top. The value that
 * closes the top level ends with a newline. Usage:
 *     mts_jw w; mts_jw_init(&w, f);
 *     mts_jw_obj(&w, NULL, 1); mts_jw_str(&w, "design", name); mts_jw_num(&w, "area_um2", a, "%.4f");
 *     mts_jw_end(&w);
 * Misuse (a key in an array, depth past MTS_JW_DEPTH, end without open)
 * sets w->bad and writes nothing more; ferror(f) tells write failures. */
#define MTS_JW_DEPTH 16
typedef struct mts_jw {
    FILE *f;
    int depth;                          /* open containers */
    int bad;                            /* misuse seen: the output is not to be trusted */
    unsigned char n[MTS_JW_DEPTH];      /* members written so far (0 or 1: any yet) */
    unsigned char lines[MTS_JW_DEPTH];  /* one member per line */
    unsigned char obj[MTS_JW_DEPTH];    /* an object (members need keys), else an array */
} mts_jw;

void mts_jw_init(mts_jw *w, FILE *f);
/* Opens an object / array (member key of the enclosing object, or NULL). */
void mts_jw_obj(mts_jw *w, const char *key, int lines);
void mts_jw_arr(mts_jw *w, const char *key, int lines);
/* Closes the innermost container. */
void mts_jw_end(mts_jw *w);
/* A string (NULL: null). */
void mts_jw_str(mts_jw *w, const char *key, const char *s);
/* A number printed with fmt (one double conversion, e.g. "%.4f"; NULL:
 * "%.17g", which reads back to the same double); NaN and +-inf: null. */
void mts_jw_num(mts_jw *w, const char *key, double v, const char *fmt);
void mts_jw_int(mts_jw *w, const char *key, long long v);
void mts_jw_uint(mts_jw *w, const char *key, unsigned long long v);
void mts_jw_bool(mts_jw *w, const char *key, int v);
void mts_jw_null(mts_jw *w, const char *key);

#ifdef __cplusplus
}
#endif

#endif
