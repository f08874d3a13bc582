/* json.c - a minimal recursive-descent JSON reader and the JSON writer
 * (include/mantis/json.h). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/json.h"

typedef struct {
    const char *s;
    size_t i;
    int depth;
} parser;

static void ws(parser *p)
{
    while (isspace((unsigned char)p->s[p->i])) p->i++;
}

static mts_json *node(mts_jtype t)
{
    mts_json *j = calloc(1, sizeof *j);
    if (j) j->type = t;
    return j;
}

static char *string(parser *p)
{
    if (p->s[p->i] != '"') return NULL;
    p->i++;
    size_t cap = 32, n = 0;
    char *out = malloc(cap);
    while (out && p->s[p->i] && p->s[p->i] != '"') {
        char c = p->s[p->i++];
        if (c == '\\') {
            char e = p->s[p->i];
            if (e == '\0') break; /* a backslash at the end: stop on the NUL, never step past it */
            p->i++;
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
            if (e == 'u') { /* keep ASCII, replace the rest */
                unsigned v = 0;
                for (int k = 0; k < 4 && isxdigit((unsigned char)p->s[p->i]); k++, p->i++)
                    v = v * 16 + (unsigned)(isdigit((unsigned char)p->s[p->i]) ? p->s[p->i] - '0'
                                                                                : (p->s[p->i] | 32) - 'a' + 10);
                c = v < 128 ? (char)v : '?';
            }
        }
        if (n + 2 > cap) {
            char *nb = realloc(out, cap *= 2);
            if (!nb) { free(out); return NULL; }
            out = nb;
        }
        out[n++] = c;
    }
    if (!out || p->s[p->i] != '"') { free(out); return NULL; }
    p->i++;
    out[n] = '\0';
    return out;
}

static mts_json *value(parser *p);

static mts_json *container(parser *p, int obj)
{
    mts_json *j = node(obj ? MTS_JOBJ : MTS_JARR), **tail = j ? &j->child : NULL;
    if (!j) return NULL;
    p->i++;
    ws(p);
    if (p->s[p->i] == (obj ? '}' : ']')) { p->i++; return j; }
    for (;;) {
        char *key = NULL;
        ws(p);
        if (obj) {
            key = string(p);
            ws(p);
            if (!key || p->s[p->i] != ':') { free(key); mts_json_free(j); return NULL; }
            p->i++;
        }
        mts_json *v = value(p);
        if (!v) { free(key); mts_json_free(j); return NULL; }
        v->key = key;
        *tail = v;
        tail = &v->next;
        ws(p);
        if (p->s[p->i] == ',') { p->i++; continue; }
        if (p->s[p->i] == (obj ? '}' : ']')) { p->i++; return j; }
        mts_json_free(j);
        return NULL;
    }
}

static mts_json *value(parser *p)
{
    ws(p);
    if (++p->depth > 64) return NULL;
    mts_json *j = NULL;
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        j = container(p, c == '{');
    } else if (c == '"') {
        char *s = string(p);
        if (s && (j = node(MTS_JSTR))) j->str = s; else free(s);
    } else if (!strncmp(p->s + p->i, "true", 4) || !strncmp(p->s + p->i, "false", 5)) {
        if ((j = node(MTS_JBOOL))) j->num = c == 't';
        p->i += c == 't' ? 4 : 5;
    } else if (!strncmp(p->s + p->i, "null", 4)) {
        j = node(MTS_JNULL);
        p->i += 4;
    } else {
        char *end;
        double v = strtod(p->s + p->i, &end);
        if (end != p->s + p->i && (j = node(MTS_JNUM))) {
            j->num = v;
            p->i = (size_t)(end - p->s);
        }
    }
    p->depth--;
    return j;
}

mts_json *mts_json_parse(const char *text, size_t *errpos)
{
    parser p = {text, 0, 0};
    mts_json *j = value(&p);
    ws(&p);
    if (j && p.s[p.i] != '\0') {
        mts_json_free(j);
        j = NULL;
    }
    if (!j && errpos) *errpos = p.i;
    return j;
}

void mts_json_free(mts_json *j)
{
    while (j) {
        mts_json *next = j->next;
        mts_json_free(j->child);
        free(j->str);
        free(j->key);
        free(j);
        j = next;
    }
}

const mts_json *mts_json_get(const mts_json *j, const char *key)
{
    if (!j || j->type != MTS_JOBJ) return NULL;
    for (const mts_json *c = j->child; c; c = c->next)
        if (c->key && !strcmp(c->key, key)) return c;
    return NULL;
}

const mts_json *mts_json_path(const mts_json *j, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save, *tok = strtok_r(buf, ".", &save);
    while (tok && j) {
        j = mts_json_get(j, tok);
        tok = strtok_r(NULL, ".", &save);
    }
    return j;
}

double mts_json_num(const mts_json *j, const char *path, double dflt)
{
    const mts_json *v = mts_json_path(j, path);
    return v && (v->type == MTS_JNUM || v->type == MTS_JBOOL) ? v->num : dflt;
}

const char *mts_json_str(const mts_json *j, const char *path, const char *dflt)
{
    const mts_json *v = mts_json_path(j, path);
    return v && v->type == MTS_JSTR ? v->str : dflt;
}

mts_json *mts_json_load(const char *path)
{
    uint8_t *b;
    size_t n;
    if (mts_fs_read(path, &b, &n, NULL)) return NULL; /* NUL-terminated */
    mts_json *j = mts_json_parse((const char *)b, NULL);
    free(b);
    return j;
}

void mts_json_write_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void mts_jw_init(mts_jw *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
}

/* Before a value: the separator, the indent and the key, as the enclosing
 * container wants them. 0 to go on, -1 on misuse (w->bad set). */
static int jw_member(mts_jw *w, const char *key)
{
    if (w->bad) return -1;
    int d = w->depth;
    if (d == 0) {
        if (key) return w->bad = 1, -1; /* the top level has no key */
        return 0;
    }
    if (!key != !w->obj[d - 1]) return w->bad = 1, -1; /* a key in an array, none in an object */
    if (w->n[d - 1]) fputc(',', w->f);
    if (w->lines[d - 1]) fprintf(w->f, "\n%*s", 2 * d, "");
    else if (w->n[d - 1]) fputc(' ', w->f);
    w->n[d - 1] = 1;
    if (key) {
        mts_json_write_str(w->f, key);
        fputs(": ", w->f);
    }
    return 0;
}

/* After a value: the newline that ends the document. */
static void jw_done(mts_jw *w)
{
    if (w->depth == 0) fputc('\n', w->f);
}

static void jw_open(mts_jw *w, const char *key, int lines, int obj)
{
    if (w->depth == MTS_JW_DEPTH) w->bad = 1;
    if (jw_member(w, key)) return;
    fputc(obj ? '{' : '[', w->f);
    w->n[w->depth] = 0;
    w->lines[w->depth] = (unsigned char)!!lines;
    w->obj[w->depth] = (unsigned char)obj;
    w->depth++;
}

void mts_jw_obj(mts_jw *w, const char *key, int lines) { jw_open(w, key, lines, 1); }
void mts_jw_arr(mts_jw *w, const char *key, int lines) { jw_open(w, key, lines, 0); }

void mts_jw_end(mts_jw *w)
{
    if (w->bad) return;
    if (w->depth == 0) {
        w->bad = 1;
        return;
    }
    int d = --w->depth;
    if (w->lines[d] && w->n[d]) fprintf(w->f, "\n%*s", 2 * d, "");
    fputc(w->obj[d] ? '}' : ']', w->f);
    jw_done(w);
}

void mts_jw_str(mts_jw *w, const char *key, const char *s)
{
    if (jw_member(w, key)) return;
    if (s) mts_json_write_str(w->f, s);
    else fputs("null", w->f);
    jw_done(w);
}

void mts_jw_num(mts_jw *w, const char *key, double v, const char *fmt)
{
    if (jw_member(w, key)) return;
    if (isfinite(v)) fprintf(w->f, fmt ? fmt : "%.17g", v);
    else fputs("null", w->f);
    jw_done(w);
}

void mts_jw_int(mts_jw *w, const char *key, long long v)
{
    if (jw_member(w, key)) return;
    fprintf(w->f, "%lld", v);
    jw_done(w);
}

void mts_jw_uint(mts_jw *w, const char *key, unsigned long long v)
{
    if (jw_member(w, key)) return;
    fprintf(w->f, "%llu", v);
    jw_done(w);
}

void mts_jw_bool(mts_jw *w, const char *key, int v)
{
    if (jw_member(w, key)) return;
    fputs(v ? "true" : "false", w->f);
    jw_done(w);
}

void mts_jw_null(mts_jw *w, const char *key)
{
    if (jw_member(w, key)) return;
    fputs("null", w->f);
    jw_done(w);
}
