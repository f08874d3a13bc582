/* rtl_xml.c - reads the XML that `verilator --xml-only` writes: a flat list
 * of elements with their parent, depth and attributes. Text content is not
 * needed (Verilator puts everything in attributes) and is skipped. */
#include <stdlib.h>
#include <string.h>

#include "rtl_internal.h"

static char *decode_entities(const char *s, size_t len)
{
    char *out = malloc(len + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        if (s[i] == '&') {
            static const struct { const char *ent; char c; } ents[] = {
                {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&apos;", '\''}, {"&quot;", '"'}};
            int done = 0;
            for (size_t k = 0; k < sizeof ents / sizeof ents[0]; k++) {
                size_t el = strlen(ents[k].ent);
                if (i + el <= len && !strncmp(s + i, ents[k].ent, el)) {
                    *o++ = ents[k].c;
                    i += el;
                    done = 1;
                    break;
                }
            }
            if (done) continue;
        }
        *o++ = s[i++];
    }
    *o = '\0';
    return out;
}

static int push_node(rtl_xml *doc, rtl_xml_node *nd)
{
    if (doc->n == doc->cap) {
        int cap = doc->cap ? doc->cap * 2 : 256;
        rtl_xml_node *p = realloc(doc->node, (size_t)cap * sizeof *p);
        if (!p) return -1;
        doc->node = p;
        doc->cap = cap;
    }
    doc->node[doc->n++] = *nd;
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int rtl_xml_parse(const char *text, rtl_xml *doc, const char *what, mts_err *err)
{
    memset(doc, 0, sizeof *doc);
    int stack[256], depth = 0;
    const char *p = text;
    while ((p = strchr(p, '<')) != NULL) {
        if (!strncmp(p, "<?", 2) || !strncmp(p, "<!--", 4) || !strncmp(p, "<!", 2)) {
            const char *end = !strncmp(p, "<!--", 4) ? strstr(p, "-->") : strchr(p, '>');
            if (!end) goto malformed;
            p = end + 1;
            continue;
        }
        if (p[1] == '/') { /* closing tag */
            if (depth == 0) goto malformed;
            depth--;
            p = strchr(p, '>');
            if (!p) goto malformed;
            p++;
            continue;
        }
        p++;
        const char *nm = p;
        while (*p && !is_space(*p) && *p != '>' && *p != '/') p++;
        rtl_xml_node nd = {0};
        nd.name = decode_entities(nm, (size_t)(p - nm));
        nd.parent = depth ? stack[depth - 1] : -1;
        nd.depth = depth;
        if (!nd.name) goto nomem;
        int selfclose = 0, cap = 0;
        for (;;) {
            while (is_space(*p)) p++;
            if (*p == '\0') goto malformed_node;
            if (*p == '/' && p[1] == '>') { selfclose = 1; p += 2; break; }
            if (*p == '>') { p++; break; }
            const char *k = p;
            while (*p && *p != '=' && !is_space(*p) && *p != '>') p++;
            size_t klen = (size_t)(p - k);
            while (is_space(*p)) p++;
            if (*p != '=') goto malformed_node;
            p++;
            while (is_space(*p)) p++;
            char q = *p;
            if (q != '"' && q != '\'') goto malformed_node;
            const char *v = ++p;
            while (*p && *p != q) p++;
            if (!*p) goto malformed_node;
            if (nd.nattr == cap) {
                cap = cap ? cap * 2 : 8;
                char **a = realloc(nd.attr, (size_t)cap * 2 * sizeof *a);
                if (!a) goto nomem_node;
                nd.attr = a;
            }
            nd.attr[2 * nd.nattr] = decode_entities(k, klen);
            nd.attr[2 * nd.nattr + 1] = decode_entities(v, (size_t)(p - v));
            nd.nattr++;
            if (!nd.attr[2 * nd.nattr - 2] || !nd.attr[2 * nd.nattr - 1]) goto nomem_node;
            p++;
        }
        if (push_node(doc, &nd)) goto nomem_node;
        if (!selfclose) {
            if (depth == (int)(sizeof stack / sizeof stack[0])) goto malformed;
            stack[depth++] = doc->n - 1;
        }
        continue;
    malformed_node:
        for (int i = 0; i < 2 * nd.nattr; i++) free(nd.attr[i]);
        free(nd.attr);
        free(nd.name);
        goto malformed;
    nomem_node:
        for (int i = 0; i < 2 * nd.nattr; i++) free(nd.attr[i]);
        free(nd.attr);
        free(nd.name);
        goto nomem;
    }
    if (depth != 0) goto malformed;
    return MTS_OK;
malformed:
    rtl_xml_free(doc);
    return mts_fail(err, MTS_ETOOL, "%s: Verilator XML output is malformed", what);
nomem:
    rtl_xml_free(doc);
    return mts_fail(err, MTS_ENOMEM, "%s: out of memory reading Verilator XML", what);
}

const char *rtl_xml_attr(const rtl_xml_node *n, const char *key)
{
    for (int i = 0; i < n->nattr; i++)
        if (!strcmp(n->attr[2 * i], key)) return n->attr[2 * i + 1];
    return NULL;
}

void rtl_xml_free(rtl_xml *doc)
{
    for (int i = 0; i < doc->n; i++) {
        for (int k = 0; k < 2 * doc->node[i].nattr; k++) free(doc->node[i].attr[k]);
        free(doc->node[i].attr);
        free(doc->node[i].name);
    }
    free(doc->node);
    memset(doc, 0, sizeof *doc);
}
