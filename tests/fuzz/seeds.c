/* seeds.c - writes the seed corpus of every fuzz target into DIR/<target>/,
 * valid files made by Mantis' own writers (LUTs, tables, checkpoints,
 * traces, GEMM dumps) or in the documented layouts (IDX, CIFAR, Verilator XML, JSON,
 * flow config). Usage: fuzz_seeds DIR MANTIS_SOURCE_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mantis/binio.h"
#include "mantis/fs.h"
#include "mantis/gemmdump.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/nn_ckpt.h"
#include "mantis/trace.h"

static const char *dir;

static void put(const char *target, const char *name, const void *a, size_t na, const void *b, size_t nb)
{
    char p[4096];
    mts_err err;
    snprintf(p, sizeof p, "%s/%s", dir, target);
    if (mts_fs_mkdirs(p, &err)) { fprintf(stderr, "%s\n", err.msg); exit(2); }
    snprintf(p, sizeof p, "%s/%s/%s", dir, target, name);
    const void *parts[2] = {a, b};
    size_t lens[2] = {na, nb};
    if (mts_fs_write_atomic(p, b ? 2 : 1, parts, lens, &err)) { fprintf(stderr, "%s\n", err.msg); exit(2); }
}

static void put_file(const char *target, const char *name, const char *path, uint8_t prefix, int with_prefix)
{
    uint8_t *b;
    size_t n;
    mts_err err;
    if (mts_fs_read(path, &b, &n, &err)) { fprintf(stderr, "%s\n", err.msg); exit(2); }
    if (with_prefix) put(target, name, &prefix, 1, b, n);
    else put(target, name, b, n, NULL, 0);
    free(b);
}

static int32_t mul_int(void *ctx, int32_t a, int32_t b) { (void)ctx; return a * b; }

static void be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: fuzz_seeds DIR MANTIS_SOURCE_DIR\n"); return 2; }
    dir = argv[1];
    mts_err err;
    char tmp[4096], tmp2[4096];
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    snprintf(tmp2, sizeof tmp2, "%s/.tmp2", dir);
    mts_fs_mkdirs(dir, &err);

    /* LUT files: float tables of the exact and mbm models, one integer table */
    const char *models[] = {"exact", "mbm"};
    for (int m = 0; m < 2; m++)
        for (int M = 2; M <= 4; M++) {
            mts_format f = mts_format_e8(M);
            mts_mulop op;
            mts_lut lut;
            if (mts_mulop_model(&op, models[m], &f, &err) || mts_lut_generate(&op, &lut, &err)) continue;
            char name[64];
            snprintf(name, sizeof name, "%s_m%d.lut", models[m], M);
            if (mts_lut_save(&lut, tmp, &err) == MTS_OK) {
                put_file("lut", name, tmp, 0, 0);
                put_file("lut_crc", name, tmp, 0, 0);
            }
            /* ApproxTrain: the first byte picks M = 1 + b % 11 and the entry size (b >> 4) % 3 = 1: 1-byte */
            if (mts_lut_export_approxtrain(&lut, tmp, &err) == MTS_OK) {
                snprintf(name, sizeof name, "%s_%d.bin", models[m], M);
                int pick = 0;
                while (pick % 11 != M - 1 || (pick >> 4) % 3 != 1) pick++;
                put_file("approxtrain", name, tmp, (uint8_t)pick, 1);
            }
            mts_lut_free(&lut);
        }
    mts_lut il;
    if (mts_lut_generate_int(3, 1, mul_int, NULL, "mul3s", &il, &err) == MTS_OK) {
        if (mts_lut_save(&il, tmp, &err) == MTS_OK) {
            put_file("lut", "int3s.lut", tmp, 0, 0);
            put_file("lut_crc", "int3s.lut", tmp, 0, 0);
        }
        mts_lut_free(&il);
    }
    if (mts_lut_generate_int(8, 0, mul_int, NULL, "mul8u", &il, &err) == MTS_OK) {
        if (mts_lut_export_8bit(&il, tmp, &err) == MTS_OK) put_file("import8bit", "mul8u.bin", tmp, 0, 1);
        mts_lut_free(&il);
    }

    /* IDX: 3 images of 2x2 and their labels, behind the image length */
    uint8_t img[16 + 12], lab[8 + 3], idx[4 + sizeof img + sizeof lab];
    be32(img, 0x803); be32(img + 4, 3); be32(img + 8, 2); be32(img + 12, 2);
    for (int i = 0; i < 12; i++) img[16 + i] = (uint8_t)(i * 20);
    be32(lab, 0x801); be32(lab + 4, 3);
    lab[8] = 1, lab[9] = 9, lab[10] = 0;
    mts_put_le32(idx, sizeof img);
    memcpy(idx + 4, img, sizeof img);
    memcpy(idx + 4 + sizeof img, lab, sizeof lab);
    put("idx", "three_2x2", idx, sizeof idx, NULL, 0);

    /* CIFAR: two records (first byte 1 = two records) */
    static uint8_t cif[1 + 2 * 3073];
    cif[0] = 1;
    for (size_t i = 1; i < sizeof cif; i++) cif[i] = (uint8_t)(i * 7);
    cif[1] = 3, cif[1 + 3073] = 9;
    put("cifar", "two_records", cif, sizeof cif, NULL, 0);

    /* checkpoint of a 5-parameter, 2-state net after 2 epochs */
    float param[5] = {1, -2, 0.5f, 3, 0}, state[2] = {0.25f, 4}, m[5] = {0}, v[5] = {0.1f, 0, 0, 0, 0};
    mts_net net;
    memset(&net, 0, sizeof net);
    net.param = param, net.nparam = 5, net.state = state, net.nstate = 2;
    mts_opt opt;
    memset(&opt, 0, sizeof opt);
    opt.m = m, opt.v = v, opt.n = 5, opt.t = 7;
    static mts_ckpt_meta meta;
    snprintf(meta.config, sizeof meta.config, "model=lenet300;mul=fp32");
    meta.epoch = 2;
    meta.nhist = 2;
    meta.hist[0].train_loss = 1.5, meta.hist[1].test_acc = 90;
    if (mts_ckpt_save(tmp, &net, &opt, &meta, &err) == MTS_OK) {
        put_file("ckpt", "small.mtsckpt", tmp, 0, 0);
        put_file("ckpt_crc", "small.mtsckpt", tmp, 0, 0);
    }

    /* traces: significand pairs and float codes */
    uint64_t a[6] = {0, 1, 5, 127, 64, 3}, b[6] = {7, 0, 127, 1, 2, 99};
    mts_trace_info ti = {MTS_TRACE_SIG, 7, 7, 0, 0, 0};
    if (mts_trace_write(tmp, &ti, 6, a, b, &err) == MTS_OK) {
        put_file("trace", "sig7.trace", tmp, 0, 0);
        put_file("trace_crc", "sig7.trace", tmp, 0, 0);
    }
    mts_trace_info tf = {MTS_TRACE_FLOAT, 16, 16, 8, 0, 0};
    uint64_t fa[2] = {0x3f80, 0xc000}, fb[2] = {0x4049, 0x7f80};
    if (mts_trace_write(tmp, &tf, 2, fa, fb, &err) == MTS_OK) put_file("trace_crc", "bf16.trace", tmp, 0, 0);

    /* GEMM dumps: a 2x3x4 GEMM with edge values (zero, -0, subnormal, inf,
     * NaN), and a 1x1x1 one with an empty layer name */
    float ga[8] = {0, -0.0f, 1e-45f, 1.0f / 0.0f, -1.5f, 3e38f, 0.0f / 0.0f, 7},
          gb[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -12};
    mts_gemmdump gd;
    memset(&gd, 0, sizeof gd);
    gd.m = 2, gd.n = 3, gd.k = 4, gd.batch = 2, gd.A = ga, gd.B = gb;
    snprintf(gd.layer, sizeof gd.layer, "conv1");
    if (mts_gemmdump_write(tmp, &gd, &err) == MTS_OK) {
        put_file("gemmdump", "conv1_2x3x4.gemm", tmp, 0, 0);
        put_file("gemmdump_crc", "conv1_2x3x4.gemm", tmp, 0, 0);
    }
    gd.m = gd.n = gd.k = 1, gd.batch = 0, gd.layer[0] = 0;
    if (mts_gemmdump_write(tmp, &gd, &err) == MTS_OK) {
        put_file("gemmdump", "unnamed_1x1x1.gemm", tmp, 0, 0);
        put_file("gemmdump_crc", "unnamed_1x1x1.gemm", tmp, 0, 0);
    }

    /* flow configs: the shipped default (first byte 0: full profile, 1: quick) */
    snprintf(tmp2, sizeof tmp2, "%s/flows/default.flow", argv[2]);
    put_file("flow_cfg", "default.flow", tmp2, 1, 1);
    const char *cfg = "\001# small\ndesigns = rtl\nout = results\nepochs = 1\nlr = 0.05\n";
    put("flow_cfg", "small.flow", cfg, strlen(cfg), NULL, 0);

    /* Verilator --xml-only output, in the shape detection reads */
    const char *xml =
        "<?xml version=\"1.0\" ?>\n<!-- DESCRIPTION: Verilator output -->\n<verilator_xml>\n"
        "  <files><file id=\"a\" filename=\"m.v\" language=\"1800-2017\"/></files>\n"
        "  <netlist>\n    <module loc=\"a,1,8,1,9\" name=\"mul\" origName=\"mul\" topModule=\"1\">\n"
        "      <var loc=\"a,2,20,2,21\" name=\"a\" dtype_id=\"1\" dir=\"input\" pinIndex=\"1\" vartype=\"logic\" "
        "origName=\"a\"/>\n"
        "      <var loc=\"a,3,21,3,22\" name=\"y\" dtype_id=\"2\" dir=\"output\" pinIndex=\"2\" vartype=\"logic\" "
        "origName=\"y\"/>\n      <var name=\"W\" dtype_id=\"3\" vartype=\"logic\" origName=\"W\" param=\"true\">\n"
        "        <const name=\"32&apos;sh7\" dtype_id=\"3\"/>\n      </var>\n    </module>\n"
        "    <typetable><basicdtype id=\"1\" name=\"logic\" left=\"7\" right=\"0\"/></typetable>\n  </netlist>\n"
        "</verilator_xml>\n";
    put("xml", "mul.xml", xml, strlen(xml), NULL, 0);

    /* JSON as Mantis' commands write it */
    const char *js[] = {"{\"kind\":\"float\",\"fmt\":{\"E\":8,\"M\":7},\"mred\":1.25e-3,\"ok\":true,\"x\":null}",
                        "[1,-2.5,\"a\\\"b\\\\c\\u0041\\n\",[],{}]",
                        "{\"epochs\":[{\"train_loss\":0.5,\"test_acc\":97.1}],\"name\":\"lenet300\"}"};
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "doc%d.json", i);
        put("json", name, js[i], strlen(js[i]), NULL, 0);
    }

    /* mapped netlists as Yosys writes them (fuzz_blif.c): the test netlist, and
     * outputs read by outputs, copies, constants and a full adder */
    snprintf(tmp2, sizeof tmp2, "%s/tests/data/synth/tiny.blif", argv[2]);
    put_file("blif", "tiny.blif", tmp2, 0, 0);
    const char *blif =
        ".model mts_gl\n.inputs A[0] A[1] B[0]\n.outputs O[0] O[1] O[2] O[3] O[4]\n.names $false\n.names $true\n1\n"
        ".subckt MTS45_XOR2 A=O[0] B=O[3] Y=O[1]\n.subckt MTS45_NAND2 A=A[0] B=B[0] Y=n1\n"
        ".subckt MTS45_INV A=n1 Y=O[0]\n.names O[1] O[2]\n1 1\n.names $true O[3]\n1 1\n"
        ".subckt MTS45_FA A=O[2] B=A[1] CI=O[0] S=O[4] CO=c\n.names c n2\n0 1\n.end\n";
    put("blif", "outfeed.blif", blif, strlen(blif), NULL, 0);

    /* strings: first byte picks the parser (fuzz_parsers.c) */
    const char *strs[] = {"\000bf16", "\000e8m5", "\000fp8e4m3", "\001M7E4", "\001m23e8",
                          "\002mul=mbm;format=bf16;man_bits=7;acc=M7E4;acc_bias=8;chunk=16",
                          "\003-17", "\004123456789", "\0050x3F800000", "\0060.05", "\007 5"};
    for (int i = 0; i < (int)(sizeof strs / sizeof strs[0]); i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        put("parsers", name, strs[i], 1 + strlen(strs[i] + 1), NULL, 0);
    }
    remove(tmp);
    return 0;
}
