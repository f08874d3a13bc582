// test_synth.cpp - the synthesis flow (include/mantis/synth.h), its liberty
// reader and gate-level simulator (synth/synth_int.h), and the operand trace
// format (include/mantis/trace.h).
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "test_util.h"
#include "mantis/json.h"
#include "mantis/rng.h"
#include "mantis/synth.h"
#include "mantis/trace.h"
#include "../synth/synth_int.h"
}

namespace {

const std::string kSrc = MANTIS_SOURCE_DIR;
const std::string kData = MANTIS_TEST_DATA;

#define REQUIRE_TOOLS()                                                              \
    do {                                                                             \
        if (!have_tool("yosys")) GTEST_SKIP() << "yosys not installed";               \
        if (!have_tool("verilator")) GTEST_SKIP() << "verilator not installed";       \
        if (!have_tool("sta")) GTEST_SKIP() << "sta (opensta) not installed";         \
    } while (0)

// A cache next to the test binaries: repeated test runs reuse syntheses.
std::string CacheDir()
{
    std::string bin = MANTIS_BIN;
    return bin.substr(0, bin.rfind('/')) + "/../synth-test-cache";
}

std::string TmpPath(const std::string &name)
{
    return "/tmp/mantis_test_synth_" + std::to_string(getpid()) + "_" + name;
}

struct SynthRun {
    int rc;
    std::string msg;
    mts_synth_result r;
};

// Synthesizes once per (file, params, stream) within this process.
const SynthRun &Synth(const std::string &file, std::vector<std::string> params = {}, uint64_t seed = 1,
                 const std::string &trace = "", const std::string &liberty = "", double ghz = 0)
{
    static std::map<std::string, SynthRun> memo;
    std::string key = file + "|" + trace + "|" + liberty + "|" + std::to_string(seed) + "|" + std::to_string(ghz);
    for (auto &p : params) key += "|" + p;
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
    static std::string cache = CacheDir();
    mts_synth_opts o{};
    o.rtl = file.c_str();
    o.nparams = (int)params.size();
    for (size_t i = 0; i < params.size(); i++) o.param[i] = params[i].c_str();
    o.cache_dir = cache.c_str();
    o.seed = seed;
    o.power_ops = 8192;
    o.clock_ghz = ghz;
    o.power_trace = trace.empty() ? nullptr : trace.c_str();
    o.liberty = liberty.empty() ? nullptr : liberty.c_str();
    SynthRun run{};
    mts_err err{};
    run.rc = mts_synth_run(&o, &run.r, &err);
    run.msg = err.msg;
    return memo[key] = run;
}

std::string Rtl(const std::string &name) { return kSrc + "/rtl/" + name; }

std::string RunCli(const std::string &args, int *status, const std::string &env = "");

const mts_synth_result &Ok(const SynthRun &run)
{
    EXPECT_EQ(run.rc, MTS_OK) << run.msg;
    return run.r;
}

// ---------------------------------------------------------------- liberty

// The result's JSON and CSV, written through base's writers, read back to
// the same fields: a design name with a comma and a quote, parameters
// "K=V,K=V", a cell name with a backslash, and a delay that is NaN (null in
// JSON, an empty CSV field; it used to print "nan" into the JSON).
TEST(SynthReport, JsonAndCsvReadBackWhateverTheNames)
{
    mts_synth_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.design, sizeof r.design, "my,mul \"v2\"");
    snprintf(r.top, sizeof r.top, "top");
    snprintf(r.params, sizeof r.params, "M=7,E=8");
    snprintf(r.hash, sizeof r.hash, "0123abcd");
    snprintf(r.stream, sizeof r.stream, "uniform");
    r.area_um2 = 12.5, r.delay_ps = NAN, r.total_uw = INFINITY, r.ntypes = 1, r.cells[0].count = 3;
    snprintf(r.cells[0].name, sizeof r.cells[0].name, "A\\B");
    char *buf = nullptr;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    mts_synth_print_json(f, &r);
    fclose(f);
    std::string js(buf, n);
    free(buf);
    mts_json *j = mts_json_parse(js.c_str(), nullptr);
    ASSERT_NE(j, nullptr) << js;
    EXPECT_STREQ(mts_json_str(j, "design", ""), r.design);
    EXPECT_STREQ(mts_json_str(j, "params", ""), "M=7,E=8");
    EXPECT_EQ(mts_json_num(j, "area_um2", 0), 12.5);
    EXPECT_EQ(mts_json_get(j, "delay_ps")->type, MTS_JNULL) << js;
    EXPECT_EQ(mts_json_get(mts_json_get(j, "power"), "total_uw")->type, MTS_JNULL) << js;
    EXPECT_EQ(mts_json_num(mts_json_get(j, "cell_counts"), "A\\B", 0), 3) << js;
    mts_json_free(j);
    f = open_memstream(&buf, &n);
    mts_synth_print_csv(f, &r);
    fclose(f);
    std::string csv(buf, n);
    free(buf);
    // RFC 4180 by hand: the header's columns, then the row's fields
    std::vector<std::vector<std::string>> rows(1);
    std::string cur;
    bool q = false;
    for (size_t i = 0; i < csv.size(); i++) {
        char c = csv[i];
        if (q && c == '"' && i + 1 < csv.size() && csv[i + 1] == '"') cur += '"', i++;
        else if (c == '"') q = !q;
        else if (c == ',' && !q) rows.back().push_back(cur), cur.clear();
        else if (c == '\n' && !q) rows.back().push_back(cur), cur.clear(), rows.emplace_back();
        else cur += c;
    }
    rows.pop_back(); // after the last newline
    ASSERT_EQ(rows.size(), 2u) << csv;
    ASSERT_EQ(rows[0].size(), rows[1].size()) << csv;
    std::map<std::string, std::string> col;
    for (size_t i = 0; i < rows[0].size(); i++) col[rows[0][i]] = rows[1][i];
    EXPECT_EQ(col["design"], r.design) << csv;
    EXPECT_EQ(col["params"], "M=7,E=8") << csv;
    EXPECT_EQ(col["delay_ps"], "") << csv;
    EXPECT_EQ(col["total_uw"], "") << csv;
    EXPECT_EQ(col["area_um2"], "12.5000") << csv;
    EXPECT_EQ(col["hash"], "0123abcd") << csv;
}

TEST(SynthLiberty, CellFunctionsMatchAnIndependentTable)
{
    synth_lib lib;
    mts_err err{};
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, &err), MTS_OK) << err.msg;
    using F = std::function<int(int, int, int)>;
    const std::map<std::string, F> expect = {
        {"MTS45_INV", [](int a, int, int) { return !a; }},
        {"MTS45_BUF", [](int a, int, int) { return a; }},
        {"MTS45_NAND2", [](int a, int b, int) { return !(a && b); }},
        {"MTS45_NAND3", [](int a, int b, int c) { return !(a && b && c); }},
        {"MTS45_NOR2", [](int a, int b, int) { return !(a || b); }},
        {"MTS45_NOR3", [](int a, int b, int c) { return !(a || b || c); }},
        {"MTS45_AND2", [](int a, int b, int) { return a && b; }},
        {"MTS45_OR2", [](int a, int b, int) { return a || b; }},
        {"MTS45_XOR2", [](int a, int b, int) { return a != b; }},
        {"MTS45_XNOR2", [](int a, int b, int) { return a == b; }},
        {"MTS45_AOI21", [](int a1, int a2, int b) { return !((a1 && a2) || b); }},
        {"MTS45_OAI21", [](int a1, int a2, int b) { return !((a1 || a2) && b); }},
        {"MTS45_MUX2", [](int a, int b, int s) { return s ? b : a; }},
    };
    int combinational = 0;
    for (int i = 0; i < lib.ncells; i++) {
        const synth_lcell &c = lib.cells[i];
        EXPECT_GT(c.area, 0.0) << c.name;
        EXPECT_GT(c.leak_nw, 0.0) << c.name;
        EXPECT_GT(c.e_int_fj, 0.0) << c.name;
        for (int j = 0; j < c.nin; j++) EXPECT_GT(c.cap[j], 0.0) << c.name << " pin " << c.in[j];
        if (c.seq || c.nout > 1) continue;
        EXPECT_EQ(c.nout, 1) << c.name;
        auto f = expect.find(c.name);
        ASSERT_NE(f, expect.end()) << "unexpected cell " << c.name;
        for (unsigned m = 0; m < (1u << c.nin); m++)
            EXPECT_EQ((int)((c.tt >> m) & 1), f->second(m & 1, (m >> 1) & 1, (m >> 2) & 1))
                << c.name << " at inputs " << m;
        combinational++;
    }
    EXPECT_EQ(combinational, (int)expect.size());
    // the adders: two outputs each, sum and carry of an independent restatement
    const synth_lcell *ha = synth_lib_find(&lib, "MTS45_HA"), *fa = synth_lib_find(&lib, "MTS45_FA");
    ASSERT_NE(ha, nullptr);
    ASSERT_NE(fa, nullptr);
    ASSERT_EQ(ha->nout, 2);
    ASSERT_EQ(fa->nout, 2);
    EXPECT_STREQ(fa->outs[0], "S");
    EXPECT_STREQ(fa->outs[1], "CO");
    for (unsigned m = 0; m < 8; m++) {
        unsigned sum = (m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1);
        EXPECT_EQ((fa->tts[0] >> m) & 1, sum & 1) << "FA S at " << m;
        EXPECT_EQ((fa->tts[1] >> m) & 1, sum >> 1) << "FA CO at " << m;
        if (m < 4) {
            EXPECT_EQ((ha->tts[0] >> m) & 1, (m ^ (m >> 1)) & 1) << "HA S at " << m;
            EXPECT_EQ((ha->tts[1] >> m) & 1, m == 3 ? 1u : 0u) << "HA CO at " << m;
        }
    }
    EXPECT_GT(fa->e_outs_fj[1], 0.0);
    // the full adder is what makes adder trees smaller than their gates (NanGate FA_X1 < 2 XOR2 + carry)
    EXPECT_LT(fa->area, 2 * synth_lib_find(&lib, "MTS45_XOR2")->area + synth_lib_find(&lib, "MTS45_AOI21")->area +
                            synth_lib_find(&lib, "MTS45_INV")->area + synth_lib_find(&lib, "MTS45_NAND2")->area);
    EXPECT_NEAR(lib.voltage, 1.1, 1e-9);
    // NAND2 is the gate-equivalent unit and must be the smallest 2-input cell.
    EXPECT_LE(synth_lib_find(&lib, "MTS45_NAND2")->area, synth_lib_find(&lib, "MTS45_AND2")->area);
}

TEST(SynthLiberty, FunctionSyntaxVariants)
{
    const char pins[3][16] = {"A", "B", "C"};
    uint64_t t1, t2, t3;
    ASSERT_EQ(synth_lib_function_tt("!(A & B) | C", 3, pins, &t1, nullptr), MTS_OK);
    ASSERT_EQ(synth_lib_function_tt("(A B)' + C", 3, pins, &t2, nullptr), MTS_OK);
    ASSERT_EQ(synth_lib_function_tt("(A*B)'+C", 3, pins, &t3, nullptr), MTS_OK);
    EXPECT_EQ(t1, t2);
    EXPECT_EQ(t1, t3);
    for (unsigned m = 0; m < 8; m++) EXPECT_EQ((t1 >> m) & 1, (uint64_t)(!((m & 1) && (m & 2)) || (m & 4)));
    mts_err err{};
    EXPECT_NE(synth_lib_function_tt("A & D", 3, pins, &t1, &err), MTS_OK);
}

TEST(SynthLiberty, WireLoadFollowsTheTable)
{
    synth_lib lib;
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, nullptr), MTS_OK);
    EXPECT_NEAR(synth_lib_wire_cap(&lib, 1), 0.1774 * 1.7460, 1e-9);
    EXPECT_NEAR(synth_lib_wire_cap(&lib, 10), 0.1774 * (25.4842 + 27.0320) / 2, 1e-9);
    EXPECT_NEAR(synth_lib_wire_cap(&lib, 13), 0.1774 * (27.0320 + 2 * 5.0), 1e-9);
    for (int f = 1; f < 20; f++) EXPECT_LT(synth_lib_wire_cap(&lib, f), synth_lib_wire_cap(&lib, f + 1));
}

// ------------------------------------------------- gate-level simulator

TEST(SynthNetlist, TogglesAndEnergyMatchAHandComputedReference)
{
    synth_lib lib;
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, nullptr), MTS_OK);
    synth_gl gl;
    mts_err err{};
    ASSERT_EQ(synth_gl_load((kData + "/synth/tiny.blif").c_str(), &lib, &gl, &err), MTS_OK) << err.msg;
    ASSERT_EQ(gl.nin_bits, 2);
    ASSERT_EQ(gl.nout_bits, 2);
    EXPECT_EQ(gl.depth_max, 2);
    const synth_lcell *nand = synth_lib_find(&lib, "MTS45_NAND2"), *inv = synth_lib_find(&lib, "MTS45_INV");
    EXPECT_NEAR(gl.area, nand->area + inv->area, 1e-12);
    EXPECT_NEAR(gl.leak_nw, nand->leak_nw + inv->leak_nw, 1e-12);

    // 200 vectors (crosses 64-vector words), input bit 0 = a, bit 1 = b.
    const uint64_t pattern[] = {0, 3, 3, 1, 3, 2, 0, 1};
    std::vector<uint64_t> vec;
    for (int i = 0; i < 200; i++) vec.push_back(pattern[(i * 7 + i / 9) % 8]);
    std::vector<uint64_t> out(vec.size()), tog(gl.nnets, 0);
    ASSERT_EQ(synth_gl_sim(&gl, vec.data(), vec.size(), out.data(), tog.data(), &err), MTS_OK);

    // Slow reference: evaluate each vector by hand and count changes.
    uint64_t ta = 0, tb = 0, tn = 0, ty = 0;
    for (size_t i = 0; i < vec.size(); i++) {
        int a = vec[i] & 1, b = (vec[i] >> 1) & 1, n1 = !(a && b), y = !n1;
        ASSERT_EQ(out[i], (uint64_t)(y | (n1 << 1))) << i;
        if (i) {
            int pa = vec[i - 1] & 1, pb = (vec[i - 1] >> 1) & 1, pn = !(pa && pb);
            ta += a != pa, tb += b != pb, tn += n1 != pn, ty += n1 != pn;
        }
    }
    int nand_k = -1, inv_k = -1;
    for (int k = 0; k < gl.nnodes; k++) {
        if (gl.nodes[k].cell == (int)(nand - lib.cells)) nand_k = k;
        if (gl.nodes[k].cell == (int)(inv - lib.cells)) inv_k = k;
    }
    ASSERT_GE(nand_k, 0);
    ASSERT_GE(inv_k, 0);
    ASSERT_LT(nand_k, inv_k) << "topological order";
    int na = gl.nodes[nand_k].in[0], nb = gl.nodes[nand_k].in[1], nn = gl.nodes[nand_k].out, ny = gl.nodes[inv_k].out;
    EXPECT_EQ(tog[na], ta);
    EXPECT_EQ(tog[nb], tb);
    EXPECT_EQ(tog[nn], tn);
    EXPECT_EQ(tog[ny], ty);
    uint64_t total = 0;
    for (int i = 0; i < gl.nnets; i++) total += tog[i];
    EXPECT_EQ(total, ta + tb + tn + ty) << "the wire copy z must not count separately";

    // Energy per toggle: 0.5 C V^2 with C = pins + wire load + output load,
    // plus the driving cell's internal energy.
    const double v2 = 1.1 * 1.1, po = 1.70;
    EXPECT_NEAR(gl.e_tog_fj[na], 0.5 * (nand->cap[0] + synth_lib_wire_cap(&lib, 1)) * v2, 1e-9);
    EXPECT_NEAR(gl.e_tog_fj[nn], 0.5 * (inv->cap[0] + po + synth_lib_wire_cap(&lib, 2)) * v2 + nand->e_int_fj, 1e-9);
    EXPECT_NEAR(gl.e_tog_fj[ny], 0.5 * (po + synth_lib_wire_cap(&lib, 1)) * v2 + inv->e_int_fj, 1e-9);
    synth_gl_free(&gl);
}

// Loads BLIF text with the shipped liberty; MTS_OK or the loader's code.
int LoadBlifText(const std::string &text, const synth_lib &lib, synth_gl *gl, mts_err *err)
{
    static int n = 0;
    std::string p = TmpPath("net" + std::to_string(n++) + ".blif");
    std::ofstream(p) << text;
    int rc = synth_gl_load(p.c_str(), &lib, gl, err);
    unlink(p.c_str());
    return rc;
}

// Every vector of nin input bits through gl; outs[v] the packed outputs.
std::vector<uint64_t> SimAll(const synth_gl &gl, int nin)
{
    std::vector<uint64_t> vec(1ull << nin), out(vec.size());
    for (size_t v = 0; v < vec.size(); v++) vec[v] = v;
    mts_err err{};
    EXPECT_EQ(synth_gl_sim(&gl, vec.data(), vec.size(), out.data(), nullptr, &err), MTS_OK) << err.msg;
    return out;
}

TEST(SynthNetlist, OutputsReadingOutputsSettleInAnyLineOrder)
{
    synth_lib lib;
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, nullptr), MTS_OK);
    // Each line one net, as Yosys writes them: an output bit that is the XOR of two
    // others, one that repeats it, an output feeding an internal net that feeds
    // another output, constants, a full adder reading outputs, an input copy.
    std::vector<std::string> lines = {
        ".subckt MTS45_AND2 A=a[0] B=a[1] Y=O[0]\n",
        ".subckt MTS45_OR2 A=a[2] B=a[3] Y=O[1]\n",
        ".subckt MTS45_XOR2 A=O[0] B=O[1] Y=O[2]\n",
        ".names O[2] O[3]\n1 1\n",
        ".subckt MTS45_NAND2 A=O[3] B=a[0] Y=t\n",
        ".subckt MTS45_INV A=t Y=O[4]\n",
        ".names $true O[5]\n1 1\n",
        ".subckt MTS45_FA A=O[4] B=O[2] CI=a[3] S=O[6] CO=O[7]\n",
        ".names $false O[8]\n1 1\n",
        ".names O[10] O[9]\n1 1\n", // a chain of copies: O[9] = O[10] = O[11] = a[1]
        ".names O[11] O[10]\n1 1\n",
        ".names a[1] O[11]\n1 1\n",
        ".subckt MTS45_XNOR2 A=O[9] B=O[7] Y=O[12]\n",
    };
    auto expect = [](unsigned v) {
        int a0 = v & 1, a1 = v >> 1 & 1, a2 = v >> 2 & 1, a3 = v >> 3 & 1;
        int o0 = a0 & a1, o1 = a2 | a3, o2 = o0 ^ o1, o3 = o2, o4 = o3 & a0, o6 = o4 ^ o2 ^ a3;
        int o7 = (o4 & o2) | (a3 & (o4 | o2)), o9 = a1, o12 = !(o9 ^ o7);
        return (uint64_t)(o0 | o1 << 1 | o2 << 2 | o3 << 3 | o4 << 4 | 1 << 5 | o6 << 6 | o7 << 7 | o9 << 9 |
                          o9 << 10 | o9 << 11 | o12 << 12);
    };
    std::string head = ".model m\n.inputs a[0] a[1] a[2] a[3]\n.outputs";
    for (int i = 0; i <= 12; i++) head += " O[" + std::to_string(i) + "]";
    head += "\n.names $false\n.names $true\n1\n";
    uint64_t s = 7;
    for (int order = 0; order < 12; order++) {
        std::vector<std::string> l = lines;
        if (order == 1) std::reverse(l.begin(), l.end()); // every reader before its driver
        for (size_t i = l.size() - 1; order > 1 && i > 0; i--) std::swap(l[i], l[mts_rng_splitmix64(&s) % (i + 1)]);
        std::string text = head;
        for (auto &x : l) text += x;
        text += ".end\n";
        synth_gl gl;
        mts_err err{};
        ASSERT_EQ(LoadBlifText(text, lib, &gl, &err), MTS_OK) << err.msg << "\n" << text;
        ASSERT_EQ(gl.nout_bits, 13);
        std::vector<uint64_t> out = SimAll(gl, 4);
        for (unsigned v = 0; v < 16; v++)
            ASSERT_EQ(out[v], expect(v)) << std::hex << "in=0x" << v << " order " << order << "\n" << text;
        synth_gl_free(&gl);
    }
}

// A random mapped netlist, its own slow evaluator as the reference: nets are
// evaluated gate by gate in file order, pass after pass, until nothing changes
// (a fixed point: no ordering assumed), with the cells' functions written here
// independently of the liberty.
struct RandNet {
    struct Gate {
        std::string cell;
        std::vector<std::string> pins, in; // input pin names and nets
        std::vector<std::string> opins, out;
    };
    int nin = 0, nout = 0;
    std::vector<Gate> gates; // file order (shuffled)
    std::vector<std::pair<std::string, std::string>> copies; // out = in (a .names buffer)

    static std::vector<int> Eval(const std::string &cell, const std::vector<int> &x)
    {
        if (cell == "MTS45_INV") return {!x[0]};
        if (cell == "MTS45_NAND2") return {!(x[0] && x[1])};
        if (cell == "MTS45_NOR2") return {!(x[0] || x[1])};
        if (cell == "MTS45_XOR2") return {x[0] ^ x[1]};
        if (cell == "MTS45_XNOR2") return {!(x[0] ^ x[1])};
        if (cell == "MTS45_AOI21") return {!((x[0] && x[1]) || x[2])};
        if (cell == "MTS45_OAI21") return {!((x[0] || x[1]) && x[2])};
        if (cell == "MTS45_MUX2") return {x[2] ? x[1] : x[0]};
        if (cell == "MTS45_HA") return {x[0] ^ x[1], x[0] && x[1]};
        if (cell == "MTS45_FA") return {x[0] ^ x[1] ^ x[2], (x[0] + x[1] + x[2]) >= 2};
        ADD_FAILURE() << cell;
        return {0};
    }

    RandNet(uint64_t seed)
    {
        uint64_t s = seed;
        auto rnd = [&](uint64_t n) { return mts_rng_splitmix64(&s) % n; };
        struct Kind { const char *cell; std::vector<std::string> pins, opins; };
        static const std::vector<Kind> kinds = {
            {"MTS45_INV", {"A"}, {"Y"}},           {"MTS45_NAND2", {"A", "B"}, {"Y"}},
            {"MTS45_NOR2", {"A", "B"}, {"Y"}},     {"MTS45_XOR2", {"A", "B"}, {"Y"}},
            {"MTS45_XNOR2", {"A", "B"}, {"Y"}},    {"MTS45_AOI21", {"A1", "A2", "B"}, {"Y"}},
            {"MTS45_OAI21", {"A1", "A2", "B"}, {"Y"}}, {"MTS45_MUX2", {"A", "B", "S"}, {"Y"}},
            {"MTS45_HA", {"A", "B"}, {"S", "CO"}}, {"MTS45_FA", {"A", "B", "CI"}, {"S", "CO"}}};
        nin = 2 + (int)rnd(7);
        nout = 3 + (int)rnd(12);
        std::vector<std::string> avail = {"$true", "$false"};
        for (int i = 0; i < nin; i++) avail.push_back("x[" + std::to_string(i) + "]");
        // outputs and internal wires get drivers in a random order; each reads nets defined before it
        std::vector<std::string> targets;
        for (int j = 0; j < nout; j++) targets.push_back("y[" + std::to_string(j) + "]");
        int nw = (int)rnd(8);
        for (int k = 0; k < nw; k++) targets.push_back("w" + std::to_string(k));
        for (size_t i = targets.size() - 1; i > 0; i--) std::swap(targets[i], targets[rnd(i + 1)]);
        for (size_t t = 0; t < targets.size(); t++) {
            if (rnd(5) == 0) { // a copy of an earlier net: an input, a constant, an output
                copies.push_back({targets[t], avail[rnd(avail.size())]});
            } else {
                const Kind &k = kinds[rnd(kinds.size())];
                Gate g{k.cell, k.pins, {}, {}, {}};
                for (size_t p = 0; p < k.pins.size(); p++) g.in.push_back(avail[2 + rnd(avail.size() - 2)]);
                g.opins.push_back(k.opins[0]);
                g.out.push_back(targets[t]);
                if (k.opins.size() == 2 && t + 1 < targets.size() && rnd(2)) { // both outputs used
                    g.opins.push_back(k.opins[1]);
                    g.out.push_back(targets[++t]);
                    avail.push_back(g.out[0]);
                }
                gates.push_back(g);
            }
            avail.push_back(targets[t]);
        }
        for (size_t i = gates.size(); i > 1; i--) std::swap(gates[i - 1], gates[rnd(i)]);
        for (size_t i = copies.size(); i > 1; i--) std::swap(copies[i - 1], copies[rnd(i)]);
    }

    std::string Blif() const
    {
        std::string t = ".model r\n.inputs";
        for (int i = 0; i < nin; i++) t += " x[" + std::to_string(i) + "]";
        t += "\n.outputs";
        for (int j = 0; j < nout; j++) t += " y[" + std::to_string(j) + "]";
        t += "\n.names $false\n.names $true\n1\n";
        size_t c = 0;
        for (size_t g = 0; g < gates.size(); g++) { // copies interleaved with the cells
            while (c < copies.size() && c * gates.size() <= g * copies.size())
                t += ".names " + copies[c].second + " " + copies[c].first + "\n1 1\n", c++;
            t += ".subckt " + gates[g].cell;
            for (size_t p = 0; p < gates[g].pins.size(); p++) t += " " + gates[g].pins[p] + "=" + gates[g].in[p];
            for (size_t p = 0; p < gates[g].out.size(); p++) t += " " + gates[g].opins[p] + "=" + gates[g].out[p];
            t += "\n";
        }
        for (; c < copies.size(); c++) t += ".names " + copies[c].second + " " + copies[c].first + "\n1 1\n";
        return t + ".end\n";
    }

    uint64_t Reference(uint64_t v) const
    {
        std::map<std::string, int> val = {{"$true", 1}, {"$false", 0}};
        for (int i = 0; i < nin; i++) val["x[" + std::to_string(i) + "]"] = v >> i & 1;
        for (bool changed = true; changed;) {
            changed = false;
            auto set = [&](const std::string &n, int x) {
                if (!val.count(n) || val[n] != x) changed = true;
                val[n] = x;
            };
            for (auto &g : gates) {
                std::vector<int> x;
                for (auto &n : g.in) x.push_back(val.count(n) ? val[n] : 0);
                std::vector<int> y = Eval(g.cell, x);
                for (size_t p = 0; p < g.out.size(); p++) set(g.out[p], y[p == 0 ? 0 : 1]);
            }
            for (auto &cp : copies) set(cp.first, val.count(cp.second) ? val[cp.second] : 0);
        }
        uint64_t o = 0;
        for (int j = 0; j < nout; j++) o |= (uint64_t)val["y[" + std::to_string(j) + "]"] << j;
        return o;
    }
};

TEST(SynthNetlist, RandomNetlistsMatchAFixedPointReference)
{
    synth_lib lib;
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, nullptr), MTS_OK);
    int out_reads_out = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        RandNet n(seed);
        for (auto &g : n.gates)
            for (auto &i : g.in) out_reads_out += i[0] == 'y';
        std::string text = n.Blif();
        synth_gl gl;
        mts_err err{};
        ASSERT_EQ(LoadBlifText(text, lib, &gl, &err), MTS_OK) << err.msg << "\n" << text;
        ASSERT_EQ(gl.nin_bits, n.nin);
        ASSERT_EQ(gl.nout_bits, n.nout);
        std::vector<uint64_t> out = SimAll(gl, n.nin);
        for (uint64_t v = 0; v < out.size(); v++)
            ASSERT_EQ(out[v], n.Reference(v)) << std::hex << "seed " << seed << " in=0x" << v << " C sim=0x"
                                              << out[v] << " reference=0x" << n.Reference(v) << "\n" << text;
        synth_gl_free(&gl);
    }
    EXPECT_GT(out_reads_out, 200) << "the generator must make outputs read outputs";
}

TEST(SynthNetlist, CombinationalLoopIsNamed)
{
    synth_lib lib;
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, nullptr), MTS_OK);
    const char *head = ".model m\n.inputs a\n.outputs O[0] O[1]\n";
    // through two outputs; through an internal net and a wire copy
    const std::string loops[] = {
        std::string(head) + ".subckt MTS45_INV A=O[1] Y=O[0]\n.subckt MTS45_NAND2 A=O[0] B=a Y=O[1]\n.end\n",
        std::string(head) + ".subckt MTS45_XOR2 A=a B=u Y=t\n.names t u\n1 1\n.subckt MTS45_INV A=t Y=O[0]\n"
                            ".names a O[1]\n1 1\n.end\n"};
    const char *named[] = {"through net O[", "through net "};
    for (int i = 0; i < 2; i++) {
        synth_gl gl;
        mts_err err{};
        EXPECT_EQ(LoadBlifText(loops[i], lib, &gl, &err), MTS_EUNSUPPORTED) << loops[i];
        std::string msg = err.msg;
        EXPECT_NE(msg.find("combinational loop"), std::string::npos) << msg;
        EXPECT_NE(msg.find(named[i]), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

// ------------------------------------------------------------------ timing

// The timing step alone (synth/sta.c) on a hand-written netlist.v in a fresh
// directory: OpenSTA with the shipped liberty.
struct StaRun {
    int rc;
    std::string msg, dir;
    mts_synth_result r;
};

StaRun RunSta(const std::string &name, const std::string &netlist)
{
    static synth_ctx c; // large: not on the stack
    static mts_synth_opts o{};
    c.o = &o;
    snprintf(c.liberty, sizeof c.liberty, "%s/synth/mantis45.lib", kSrc.c_str());
    snprintf(c.base, sizeof c.base, "%s", name.c_str());
    StaRun run{};
    mts_err err{};
    EXPECT_EQ(synth_lib_load(c.liberty, &c.lib, &err), MTS_OK) << err.msg;
    run.dir = tmpdir() + "/sta-" + name;
    mkdir(run.dir.c_str(), 0755);
    std::ofstream(run.dir + "/netlist.v") << netlist;
    run.rc = synth_sta(&c, run.dir.c_str(), &run.r, &err);
    run.msg = err.msg;
    return run;
}

// k full adders in a ripple chain (CO -> CI), as the flow's netlists write them.
std::string FaChain(int k)
{
    std::ostringstream v;
    v << "module mts_gl(A, B, C, S, CO);\n  input [" << k - 1 << ":0] A;\n  input [" << k - 1 << ":0] B;\n"
      << "  input C;\n  output [" << k - 1 << ":0] S;\n  output CO;\n  wire [" << k << ":0] c;\n"
      << "  assign c[0] = C;\n";
    for (int i = 0; i < k; i++)
        v << "  MTS45_FA f" << i << " (.A(A[" << i << "]), .B(B[" << i << "]), .CI(c[" << i << "]), .S(S[" << i
          << "]), .CO(c[" << i + 1 << "]));\n";
    v << "  assign CO = c[" << k << "];\nendmodule\n";
    return v.str();
}

TEST(SynthDelay, FullAdderChainIsSlowerThanOneCell)
{
    if (!have_tool("sta")) GTEST_SKIP() << "sta (opensta) not installed";
    double prev = 0, d[9] = {0};
    for (int k : {1, 2, 4, 8}) {
        StaRun run = RunSta("fa" + std::to_string(k), FaChain(k));
        ASSERT_EQ(run.rc, MTS_OK) << run.msg;
        d[k] = run.r.delay_ps;
        EXPECT_GT(d[k], prev) << k << " full adders";
        prev = d[k];
        if (k == 8) { // the path runs through every carry: one line per cell in the report
            std::string log = slurp(run.dir + "/sta.log");
            size_t cells = 0;
            for (size_t at = log.find("(MTS45_FA)"); at != std::string::npos; at = log.find("(MTS45_FA)", at + 1))
                cells++;
            EXPECT_EQ(cells, 8u) << log;
            EXPECT_TRUE(!std::strcmp(run.r.delay_to, "CO") || !std::strcmp(run.r.delay_to, "S[7]")) << run.r.delay_to;
            EXPECT_NE(slurp(run.dir + "/sta.tcl").find("set_load"), std::string::npos);
        }
    }
    // each carry stage costs at least the smallest CI->CO entry of the liberty (50 ps)
    EXPECT_GE(d[8] - d[4], 4 * 50.0);
    EXPECT_GE(d[2] - d[1], 50.0);
    EXPECT_LT(d[1], 300.0) << "one cell and its input driver";
}

TEST(SynthDelay, StaErrorsAreToolErrors)
{
    if (!have_tool("sta")) GTEST_SKIP() << "sta (opensta) not installed";
    // a cell the liberty does not have (OpenSTA would time around a black box); a
    // netlist OpenSTA cannot parse
    const std::string bad[] = {"module mts_gl(a, y);\n input a;\n output y;\n NO_SUCH_CELL u (.A(a), .Y(y));\nendmodule\n",
                               "module mts_gl(a, y);\n input a;\n output y;\n assign {y} = {a};\nendmodule\n"};
    for (int i = 0; i < 2; i++) {
        StaRun run = RunSta("bad" + std::to_string(i), bad[i]);
        EXPECT_EQ(run.rc, MTS_ETOOL) << run.msg;
        EXPECT_EQ(run.msg.rfind("bad" + std::to_string(i) + ": sta: ", 0), 0u) << run.msg;
        EXPECT_NE(run.msg.find("full log: " + run.dir + "/sta.log"), std::string::npos) << run.msg;
        EXPECT_EQ(run.msg.find('\n'), std::string::npos) << run.msg;
    }
    // ports named like the words an error line has are not errors
    StaRun ok = RunSta("named", "module mts_gl(error, found);\n input error;\n output found;\n"
                                " MTS45_INV u (.A(error), .Y(found));\nendmodule\n");
    EXPECT_EQ(ok.rc, MTS_OK) << ok.msg;
    EXPECT_STREQ(ok.r.delay_from, "error");
    EXPECT_STREQ(ok.r.delay_to, "found");
    EXPECT_GT(ok.r.delay_ps, 0.0);
}

TEST(SynthDelay, RippleAndExactMultiplierRankAboveShallowDesigns)
{
    REQUIRE_TOOLS();
    // a ripple-carry adder (full adders in a chain) against a one-cell-deep design of the same ports
    const mts_synth_result &ripple = Ok(Synth(kData + "/synth/ripple16.v"));
    const mts_synth_result &flat = Ok(Synth(kData + "/synth/xortree16.v"));
    int fa = 0;
    for (int t = 0; t < ripple.ntypes; t++)
        if (!std::strcmp(ripple.cells[t].name, "MTS45_FA")) fa = ripple.cells[t].count;
    EXPECT_GE(fa, 6) << "the chain maps to full adders";
    EXPECT_GT(ripple.delay_ps, 3 * flat.delay_ps);
    EXPECT_GT(flat.delay_ps, 0.0);
    // the exact 8x8 multiplier (about 40 full adders; ABC's timing saw none of them and
    // reported 63 ps) against an exact 4x4 one
    const mts_synth_result &exact8 = Ok(Synth(Rtl("int8_exact.v")));
    const mts_synth_result &mul4 = Ok(Synth(kData + "/synth/mul4.v"));
    EXPECT_GT(exact8.delay_ps, 1.5 * mul4.delay_ps);
    EXPECT_GT(exact8.delay_ps, 800.0);
    EXPECT_STRNE(exact8.delay_from, "");
    EXPECT_STRNE(exact8.delay_to, "");
    std::string log = slurp(std::string(exact8.dir) + "/sta.log");
    EXPECT_NE(log.find("(MTS45_FA)"), std::string::npos) << "the critical path runs through full adders";
}

TEST(SynthDelay, MissingStaIsAClearError)
{
    REQUIRE_TOOLS();
    // PATH with yosys and verilator but no sta; a design new to the cache
    std::string bin = tmpdir() + "/nosta-bin";
    ASSERT_EQ(sh("mkdir -p " + bin + " && ln -sf \"$(command -v yosys)\" \"$(command -v verilator)\" " + bin), 0);
    std::string dir = tmpdir() + "/nosta";
    mkdir(dir.c_str(), 0755);
    std::string file = dir + "/nosta.v";
    std::ofstream(file) << slurp(kData + "/synth/mul4.v") << "// " << getpid() << " " << time(nullptr) << "\n";
    std::string path = getenv("PATH");
    setenv("PATH", bin.c_str(), 1);
    std::string cache = CacheDir();
    mts_synth_opts o{};
    o.rtl = file.c_str();
    o.cache_dir = cache.c_str();
    o.seed = 1;
    mts_synth_result r;
    mts_err err{};
    int rc = mts_synth_run(&o, &r, &err);
    setenv("PATH", path.c_str(), 1);
    EXPECT_EQ(rc, MTS_ENOTOOL) << err.msg; // the environment's, like a missing yosys
    EXPECT_NE(std::string(err.msg).find("nosta: sta not found on PATH"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("opensta"), std::string::npos) << err.msg;
    // the command: exit status 4 (the environment's: a tool is missing), one line
    int st;
    std::string out = RunCli("--rtl " + file + " --cache " + cache, &st, "PATH=" + bin + " ");
    EXPECT_EQ(st, 4) << out;
    EXPECT_EQ(out, "mantis synth: " + std::string(err.msg) + "\n");
}

// ----------------------------------------------------------------- traces

TEST(SynthTrace, RoundTripAllOperandSizes)
{
    const uint32_t widths[][2] = {{8, 8}, {7, 7}, {16, 16}, {12, 9}, {32, 32}, {64, 40}};
    uint64_t s = 99;
    for (auto &w : widths) {
        std::vector<uint64_t> a(257), b(257);
        for (size_t i = 0; i < a.size(); i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            a[i] = (s >> 3) & (w[0] == 64 ? ~0ull : (1ull << w[0]) - 1);
            b[i] = (s >> 11) & ((1ull << w[1]) - 1);
        }
        a[0] = w[0] == 64 ? ~0ull : (1ull << w[0]) - 1; // extremes survive
        mts_trace_info info{MTS_TRACE_FLOAT, w[0], w[1], 8, 0, 0};
        std::string p = TmpPath("rt.trace");
        mts_err err{};
        ASSERT_EQ(mts_trace_write(p.c_str(), &info, a.size(), a.data(), b.data(), &err), MTS_OK) << err.msg;
        mts_trace t;
        ASSERT_EQ(mts_trace_read(p.c_str(), &t, &err), MTS_OK) << err.msg;
        EXPECT_EQ(t.info.count, a.size());
        EXPECT_EQ(t.info.width_a, w[0]);
        EXPECT_EQ(t.info.width_b, w[1]);
        EXPECT_EQ(t.info.exp_bits, 8u);
        for (size_t i = 0; i < a.size(); i++) {
            ASSERT_EQ(t.a[i], a[i]) << i;
            ASSERT_EQ(t.b[i], b[i]) << i;
        }
        mts_trace_free(&t);
        unlink(p.c_str());
    }
}

TEST(SynthTrace, StreamingWriterAndRejections)
{
    std::string p = TmpPath("st.trace");
    mts_trace_info info{MTS_TRACE_INT, 8, 8, 0, 1, 0};
    mts_trace_writer *w;
    mts_err err{};
    ASSERT_EQ(mts_trace_writer_open(p.c_str(), &info, &w, &err), MTS_OK) << err.msg;
    for (uint64_t i = 0; i < 100; i++) ASSERT_EQ(mts_trace_writer_add(w, i, 255 - i, &err), MTS_OK);
    EXPECT_EQ(mts_trace_writer_add(w, 256, 0, &err), MTS_EINVAL); // wider than 8 bits
    ASSERT_EQ(access(p.c_str(), F_OK), -1) << "file must not appear before close";
    ASSERT_EQ(mts_trace_writer_close(w, &err), MTS_OK) << err.msg;
    mts_trace t;
    ASSERT_EQ(mts_trace_read(p.c_str(), &t, &err), MTS_OK) << err.msg;
    EXPECT_EQ(t.info.count, 100u);
    EXPECT_EQ(t.info.flags, 1u);
    EXPECT_EQ(t.b[7], 248u);
    mts_trace_free(&t);

    std::vector<char> bytes;
    {
        std::ifstream f(p, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    ASSERT_EQ(bytes.size(), 64u + 200u);
    auto write_variant = [&](std::vector<char> v) {
        std::ofstream f(p, std::ios::binary | std::ios::trunc);
        f.write(v.data(), (std::streamsize)v.size());
    };
    std::vector<char> v = bytes;
    v[64 + 17] ^= 1; // a record byte
    write_variant(v);
    EXPECT_EQ(mts_trace_read(p.c_str(), &t, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("checksum"), std::string::npos) << err.msg;
    v = bytes;
    v[20] = 9; // width_a in the header
    write_variant(v);
    EXPECT_EQ(mts_trace_read(p.c_str(), &t, &err), MTS_EFORMAT);
    v = bytes;
    v.resize(v.size() - 2);
    write_variant(v);
    EXPECT_EQ(mts_trace_read(p.c_str(), &t, &err), MTS_EFORMAT);
    v = bytes;
    v[0] = 'X';
    write_variant(v);
    EXPECT_EQ(mts_trace_read(p.c_str(), &t, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("magic"), std::string::npos) << err.msg;
    unlink(p.c_str());
}

// ------------------------------------------------------ shipped designs

TEST(SynthShipped, ApproximateSignificandMultipliersAreSmallerThanExact)
{
    REQUIRE_TOOLS();
    double exact = Ok(Synth(Rtl("mul_exact.v"))).area_um2;
    EXPECT_LT(Ok(Synth(Rtl("mul_trunc.v"))).area_um2, exact);
    EXPECT_LT(Ok(Synth(Rtl("mul_mitchell.v"))).area_um2, exact);
    EXPECT_LT(Ok(Synth(Rtl("mul_mbm.v"))).area_um2, exact);
}

TEST(SynthShipped, ApproximateInt8IsSmallerThanExact)
{
    REQUIRE_TOOLS();
    const mts_synth_result &exact = Ok(Synth(Rtl("int8_exact.v")));
    const mts_synth_result &approx = Ok(Synth(Rtl("int8_bam.v")));
    EXPECT_LT(approx.area_um2, exact.area_um2);
    EXPECT_LT(approx.energy_pj, exact.energy_pj);
}

TEST(SynthShipped, AdderTreesMapToFullAddersAndStayEquivalent)
{
    REQUIRE_TOOLS();
    // int8_exact's partial-product sum is an adder tree: the full-adder variant
    // is the smaller netlist, and it passed Verilator equivalence (exhaustive)
    // and the C-simulator cross-check with the FA cells in it
    const mts_synth_result &r = Ok(Synth(Rtl("int8_exact.v")));
    int fa = 0, cells = 0;
    for (int t = 0; t < r.ntypes; t++) {
        if (!std::strcmp(r.cells[t].name, "MTS45_FA")) fa = r.cells[t].count;
        cells += r.cells[t].count;
    }
    EXPECT_GE(fa, 30) << "an 8x8 array multiplier has about 40 full adders";
    EXPECT_EQ(cells, r.ncells); // a two-output instance counts once
    EXPECT_TRUE(r.eq_exhaustive);
    EXPECT_EQ(r.eq_vectors, 65536u);
    std::string netlist = slurp(std::string(r.dir) + "/netlist.v");
    EXPECT_NE(netlist.find("MTS45_FA"), std::string::npos);
    // the netlist's own area (every FA once) equals Yosys' figure: check_netlist compares them
    EXPECT_GT(r.area_um2, 0.0);
    EXPECT_GT(r.energy_pj, 0.0);
}

TEST(SynthShipped, ExactSignificandAreaGrowsWithM)
{
    REQUIRE_TOOLS();
    double prev = 0;
    for (int m : {3, 5, 7, 10}) {
        const mts_synth_result &r = Ok(Synth(Rtl("mul_exact.v"), {"M=" + std::to_string(m)}));
        EXPECT_EQ(r.in_bits, 2 * m);
        EXPECT_EQ(r.out_bits, 2 * m + 2);
        EXPECT_GT(r.area_um2, prev) << "M=" << m;
        prev = r.area_um2;
    }
}

TEST(SynthShipped, GateLevelEquivalenceForEveryShippedDesign)
{
    REQUIRE_TOOLS();
    DIR *d = opendir((kSrc + "/rtl").c_str());
    if (!d) GTEST_SKIP() << "no rtl/ directory";
    std::vector<std::string> files;
    while (dirent *e = readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 2 && n.compare(n.size() - 2, 2, ".v") == 0) files.push_back(n);
    }
    closedir(d);
    ASSERT_FALSE(files.empty());
    for (auto &f : files) {
        const SynthRun &run = Synth(Rtl(f));
        ASSERT_EQ(run.rc, MTS_OK) << f << ": " << run.msg;
        EXPECT_TRUE(run.r.eq_checked) << f;
        if (run.r.in_bits <= 22) {
            EXPECT_TRUE(run.r.eq_exhaustive) << f;
            EXPECT_EQ(run.r.eq_vectors, 1ull << run.r.in_bits) << f;
        } else {
            EXPECT_EQ(run.r.eq_vectors, 1ull << 20) << f;
        }
        EXPECT_GT(run.r.delay_ps, 0) << f;
        EXPECT_GE(run.r.logic_depth, 1) << f;
        int sum = 0;
        for (int i = 0; i < run.r.ntypes; i++) sum += run.r.cells[i].count;
        EXPECT_EQ(sum, run.r.ncells) << f;
    }
}

// ---------------------------------------------------------------- power

std::string WriteTrace(const std::string &name, uint32_t w, const std::vector<uint64_t> &a,
                       const std::vector<uint64_t> &b)
{
    std::string p = TmpPath(name);
    mts_trace_info info{MTS_TRACE_INT, w, w, 0, 0, 0};
    mts_err err{};
    EXPECT_EQ(mts_trace_write(p.c_str(), &info, a.size(), a.data(), b.data(), &err), MTS_OK) << err.msg;
    return p;
}

TEST(SynthPower, ZeroTraceIsLeakageOnlyAndUniformIsHigher)
{
    REQUIRE_TOOLS();
    std::vector<uint64_t> zeros(1000, 0);
    std::string p = WriteTrace("zero.trace", 8, zeros, zeros);
    const mts_synth_result &z = Ok(Synth(Rtl("int8_exact.v"), {}, 1, p));
    const mts_synth_result &u = Ok(Synth(Rtl("int8_exact.v")));
    unlink(p.c_str());
    EXPECT_STREQ(z.stream, "trace");
    EXPECT_EQ(z.power_ops, 1000u);
    EXPECT_EQ(z.toggles_per_op, 0.0);
    EXPECT_EQ(z.dyn_uw, 0.0);
    EXPECT_GT(z.leak_uw, 0.0);
    EXPECT_DOUBLE_EQ(z.total_uw, z.leak_uw);
    EXPECT_STREQ(u.stream, "uniform");
    EXPECT_GT(u.toggles_per_op, 1.0);
    EXPECT_GT(u.total_uw, z.total_uw);
    EXPECT_DOUBLE_EQ(u.leak_uw, z.leak_uw);
}

TEST(SynthPower, AlternatingOneBitTraceCountsItsToggles)
{
    REQUIRE_TOOLS();
    // a alternates 0,1,0,1 with b = 1: the product's bit 0 and input a[0]
    // toggle on every operation, nothing else can change on the inputs.
    std::vector<uint64_t> a, b;
    for (int i = 0; i < 501; i++) a.push_back(i & 1), b.push_back(1);
    std::string p = WriteTrace("alt.trace", 8, a, b);
    const mts_synth_result &r = Ok(Synth(Rtl("int8_exact.v"), {}, 1, p));
    unlink(p.c_str());
    EXPECT_GE(r.toggles_per_op, 2.0); // at least a[0] and y[0]
    EXPECT_DOUBLE_EQ(r.toggles_per_op, std::floor(r.toggles_per_op)); // every op toggles the same nets
    EXPECT_GT(r.energy_pj, 0.0);
}

TEST(SynthPower, SameSeedSameNumbersOtherSeedOtherStream)
{
    REQUIRE_TOOLS();
    SynthRun a = Synth(Rtl("int8_bam.v"), {}, 7);
    // A second, independent computation (not the memo): through the cache.
    mts_synth_opts o{};
    std::string file = Rtl("int8_bam.v"), cache = CacheDir();
    o.rtl = file.c_str();
    o.cache_dir = cache.c_str();
    o.seed = 7;
    o.power_ops = 8192;
    mts_synth_result b;
    mts_err err{};
    ASSERT_EQ(mts_synth_run(&o, &b, &err), MTS_OK) << err.msg;
    ASSERT_EQ(a.rc, MTS_OK) << a.msg;
    EXPECT_TRUE(b.cache_hit);
    EXPECT_EQ(a.r.area_um2, b.area_um2);
    EXPECT_EQ(a.r.delay_ps, b.delay_ps);
    EXPECT_EQ(a.r.energy_pj, b.energy_pj);
    EXPECT_EQ(a.r.toggles_per_op, b.toggles_per_op);
    EXPECT_EQ(a.r.total_uw, b.total_uw);
    const mts_synth_result &c = Ok(Synth(Rtl("int8_bam.v"), {}, 8));
    EXPECT_NE(a.r.toggles_per_op, c.toggles_per_op);
    EXPECT_EQ(a.r.area_um2, c.area_um2);
}

TEST(SynthPower, DynamicPowerScalesWithClock)
{
    REQUIRE_TOOLS();
    const mts_synth_result &g1 = Ok(Synth(Rtl("int8_bam.v"), {}, 7, "", "", 1.0));
    const mts_synth_result &g2 = Ok(Synth(Rtl("int8_bam.v"), {}, 7, "", "", 2.5));
    EXPECT_DOUBLE_EQ(g2.energy_pj, g1.energy_pj);
    EXPECT_NEAR(g2.dyn_uw, 2.5 * g1.dyn_uw, 1e-9 * g2.dyn_uw);
    EXPECT_NEAR(g1.dyn_uw, g1.energy_pj * 1000.0, 1e-9 * g1.dyn_uw); // 1 pJ at 1 GHz = 1 mW
}

TEST(SynthPower, TraceMustFitTheDesignPorts)
{
    REQUIRE_TOOLS();
    std::vector<uint64_t> v(10, 3);
    std::string p = WriteTrace("narrow.trace", 4, v, v);
    const SynthRun &r = Synth(Rtl("int8_exact.v"), {}, 1, p);
    unlink(p.c_str());
    EXPECT_EQ(r.rc, MTS_EINVAL);
    EXPECT_NE(r.msg.find("4 and 4 bits"), std::string::npos) << r.msg;
}

// ---------------------------------------------------- errors and the CLI

// A liberty whose NAND2 claims to be an AND (cheaper than AND2, so ABC uses
// it as one): the netlist, simulated with the true cell models of cells.v,
// then differs from the RTL. Returns its path ("" if the NAND2 was not found).
std::string WriteWrongLiberty(const std::string &name)
{
    std::ifstream in(kSrc + "/synth/mantis45.lib");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string lib = ss.str();
    size_t at = lib.find("function : \"!(A & B)\"");
    if (at == std::string::npos) return "";
    lib.replace(at, std::strlen("function : \"!(A & B)\""), "function : \"(A & B)\"");
    std::string p = TmpPath(name);
    std::ofstream(p) << lib;
    return p;
}

TEST(SynthFlow, WrongCellModelIsCaughtByEquivalence)
{
    REQUIRE_TOOLS();
    std::string p = WriteWrongLiberty("wrong.lib");
    ASSERT_NE(p, "");
    const SynthRun &r = Synth(kData + "/synth/mul4.v", {}, 1, "", p);
    unlink(p.c_str());
    EXPECT_EQ(r.rc, MTS_EMISMATCH) << r.msg;
    EXPECT_NE(r.msg.find("differs from the RTL"), std::string::npos) << r.msg;
}

TEST(SynthFlow, TopIsTheUninstantiatedModuleWhenNoneIsNamedLikeTheFile)
{
    REQUIRE_TOOLS();
    const mts_synth_result &r = Ok(Synth(kData + "/synth/autotop.v"));
    EXPECT_STREQ(r.top, "sat_mul");
    EXPECT_EQ(r.in_bits, 6);
    EXPECT_EQ(r.out_bits, 3);
    EXPECT_TRUE(r.eq_exhaustive);
    EXPECT_EQ(r.eq_vectors, 64u);
}

TEST(SynthFlow, OutputsDrivenFromOutputsPassEquivalence)
{
    REQUIRE_TOOLS();
    // alias8.v maps to a netlist with `assign {O[6], O[4], O[2:1]} = {O[7], 1'h0, O[3], 1'h0}`
    const mts_synth_result &r = Ok(Synth(kData + "/synth/alias8.v"));
    std::string netlist = slurp(std::string(r.dir) + "/netlist.v");
    EXPECT_NE(netlist.find("O[7]"), std::string::npos);
    bool aliased = false; // some output bit assigned from another output bit
    for (size_t at = netlist.find("assign"); at != std::string::npos; at = netlist.find("assign", at + 1)) {
        std::string line = netlist.substr(at, netlist.find(';', at) - at);
        size_t eq = line.find('=');
        aliased |= eq != std::string::npos && line.find("O[", eq) != std::string::npos;
    }
    EXPECT_TRUE(aliased) << netlist;
    EXPECT_TRUE(r.eq_checked);
    EXPECT_EQ(r.eq_vectors, 256u);
}

// Designs whose outputs are computed from other outputs (issue 30: the flow
// rejected right netlists of such designs as differing from the RTL). Each must
// pass the exhaustive equivalence check, and the netlist it accepted must compute
// what the RTL says by a reference written here, not by Verilator.
TEST(SynthFlow, OutputsFeedingOutputsAreNotRejected)
{
    REQUIRE_TOOLS();
    auto bit = [](uint64_t v, int i) { return (int)(v >> i & 1); };
    struct Case {
        const char *file;
        std::function<uint64_t(uint64_t)> ref; // packed inputs (first port low) -> packed outputs
    };
    const Case cases[] = {
        {"outfeed_xor.v",
         [&](uint64_t v) {
             int a0 = bit(v, 0), a1 = bit(v, 1), a2 = bit(v, 2), a3 = bit(v, 3), b0 = bit(v, 4), b1 = bit(v, 5),
                 b3 = bit(v, 7);
             int o0 = a0 & b1, o1 = a1 & b0, o2 = o0 ^ o1, o3 = o2, o4 = o3 & a2, o5 = o4 ^ o0, o6 = o5,
                 o7 = o6 | (a3 & b3);
             return (uint64_t)(o0 | o1 << 1 | o2 << 2 | o3 << 3 | o4 << 4 | o5 << 5 | o6 << 6 | o7 << 7);
         }},
        {"outfeed_ports.v",
         [&](uint64_t v) {
             uint64_t a = v & 15, b = v >> 4 & 15, p = (a + b) & 15;
             int q0 = bit(p, 3) ^ bit(p, 0), q1 = q0 & bit(p, 1), q3 = bit(a, 3), q4 = q3 ^ q1;
             return p | (uint64_t)(q0 | q1 << 1 | q3 << 3 | q4 << 4) << 4;
         }},
        {"outfeed_wire.v",
         [&](uint64_t v) {
             int o0 = bit(v, 0) ^ bit(v, 5), o1 = bit(v, 1) & bit(v, 6), u = (o0 | o1) ^ bit(v, 4), o2 = u,
                 o3 = u & o2 & bit(v, 9), o4 = !o3, o5 = o4 ^ o3 ^ o0;
             return (uint64_t)(o0 | o1 << 1 | o2 << 2 | o3 << 3 | o4 << 4 | o5 << 5);
         }},
        {"outfeed_chain.v",
         [&](uint64_t v) {
             int o0 = bit(v, 0) ^ bit(v, 1), o5 = bit(v, 3) ^ o0, o1 = o5, o2 = !bit(v, 2), o4 = !o5,
                 o6 = o1 & bit(v, 1);
             return (uint64_t)(o0 | o1 << 1 | o2 << 2 | 1 << 3 | o4 << 4 | o5 << 5 | o6 << 6);
         }},
        {"outfeed_mesh.v",
         [&](uint64_t v) {
             int a0 = bit(v, 0), a2 = bit(v, 2), a3 = bit(v, 3);
             int w0 = 1, w1 = a0 & a2, o0 = a0 ^ w1, o2 = o0 ^ a0, o3 = a0, o5 = o2 | w0, o6 = o5 | a2, o7 = o0 ^ a3,
                 o4 = (a3 ^ o0) ^ o7, o8 = a3 & w0, w2 = (o4 | o2) & o2, w3 = o2 & w1, o1 = w2 & w3, o9 = 0;
             return (uint64_t)(o0 | o1 << 1 | o2 << 2 | o3 << 3 | o4 << 4 | o5 << 5 | o6 << 6 | o7 << 7 | o8 << 8 |
                               o9 << 9);
         }},
    };
    synth_lib lib;
    ASSERT_EQ(synth_lib_load((kSrc + "/synth/mantis45.lib").c_str(), &lib, nullptr), MTS_OK);
    for (const Case &k : cases) {
        const SynthRun &run = Synth(kData + "/synth/" + k.file);
        ASSERT_EQ(run.rc, MTS_OK) << k.file << ": " << run.msg;
        EXPECT_TRUE(run.r.eq_exhaustive) << k.file;
        EXPECT_EQ(run.r.eq_vectors, 1ull << run.r.in_bits) << k.file;
        synth_gl gl;
        mts_err err{};
        ASSERT_EQ(synth_gl_load((std::string(run.r.dir) + "/netlist.blif").c_str(), &lib, &gl, &err), MTS_OK) << err.msg;
        std::vector<uint64_t> out = SimAll(gl, gl.nin_bits);
        for (uint64_t v = 0; v < out.size(); v++)
            ASSERT_EQ(out[v], k.ref(v)) << std::hex << k.file << " in=0x" << v << " netlist=0x" << out[v]
                                        << " reference=0x" << k.ref(v);
        synth_gl_free(&gl);
    }
}

TEST(SynthFlow, ConstantDesignHasAreaZero)
{
    REQUIRE_TOOLS();
    const mts_synth_result &r = Ok(Synth(kData + "/synth/const8.v"));
    EXPECT_EQ(r.area_um2, 0.0);
    EXPECT_EQ(r.ncells, 0);
    EXPECT_EQ(r.delay_ps, 0.0);
    EXPECT_EQ(r.eq_vectors, 256u);
}

TEST(SynthFlow, HostileDesignNamesWorkAndRunNothing)
{
    REQUIRE_TOOLS();
    // one synthesis covers the classes: the directory has a space, $(...) and a quote,
    // the file a leading '-', ';', a backquote and non-ASCII letters
    std::string root = TmpPath("hostile");
    std::string dir = root + "/d $(touch PWNED) 'q";
    ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
    std::string file = dir + "/-x;`touch PWNED`\xc3\xa9.v";
    // content unique to this process: the tools must really run on these names (a cache
    // hit would not), while the shared cache keeps Verilator's runtime objects
    std::ofstream(file) << slurp(kData + "/synth/mul4.v") << "// " << getpid() << " " << time(nullptr) << "\n";
    std::string cache = CacheDir();
    mts_synth_opts o{};
    o.rtl = file.c_str();
    o.cache_dir = cache.c_str();
    o.seed = 1;
    o.power_ops = 1024;
    SynthRun run{};
    mts_err err{};
    run.rc = mts_synth_run(&o, &run.r, &err);
    run.msg = err.msg;
    EXPECT_EQ(run.rc, MTS_OK) << run.msg;
    EXPECT_EQ(run.r.cache_hit, 0);
    EXPECT_EQ(run.r.eq_vectors, 256u);
    EXPECT_STREQ(run.r.top, "mul4");
    EXPECT_NE(access((root + "/PWNED").c_str(), F_OK), 0);
    EXPECT_NE(access((dir + "/PWNED").c_str(), F_OK), 0);
    EXPECT_NE(access("PWNED", F_OK), 0);
    sh("rm -rf '" + root + "'");
    // parameters enter the Yosys script and the wrapper: refused unless IDENT=number
    for (const char *bad : {"M=1);", "M=1 -top x", "M=\"a\"", "1M=2", "M$(x)=1"}) {
        const SynthRun &b = Synth(kData + "/synth/mul4.v", {bad});
        EXPECT_EQ(b.rc, MTS_EINVAL) << bad;
        EXPECT_NE(b.msg.find("Verilog identifier"), std::string::npos) << b.msg;
    }
}

std::string RunCli(const std::string &args, int *status, const std::string &env)
{
    std::string cmd = env + std::string(MANTIS_BIN) + " synth " + args + " 2>&1";
    FILE *f = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (f && fgets(buf, sizeof buf, f)) out += buf;
    int st = f ? pclose(f) : -1;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

TEST(SynthFlow, BrokenDesignGivesOneLineError)
{
    REQUIRE_TOOLS();
    int st;
    std::string out = RunCli("--rtl " + kData + "/synth/broken.v --cache " + CacheDir(), &st);
    EXPECT_EQ(st, 2);
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(out.rfind("mantis synth: broken: yosys: ", 0), 0u) << out;
    EXPECT_NE(out.find("ERROR"), std::string::npos) << out;
    size_t at = out.find("full log: ");
    ASSERT_NE(at, std::string::npos) << out;
    std::string log = out.substr(at + 10, out.find(')', at) - at - 10);
    EXPECT_EQ(access(log.c_str(), R_OK), 0) << log;
}

TEST(SynthFlow, CliExitsOneOnMismatchAndFourOnAMissingFile)
{
    REQUIRE_TOOLS();
    std::string lib = WriteWrongLiberty("wrong_cli.lib");
    ASSERT_NE(lib, "");
    int st;
    std::string out = RunCli("--rtl " + kData + "/synth/mul4.v --liberty " + lib + " --cache " + CacheDir(), &st);
    unlink(lib.c_str());
    EXPECT_EQ(st, 1) << out; // a check ran and found a difference
    EXPECT_NE(out.find("differs from the RTL"), std::string::npos) << out;
    out = RunCli("--rtl " + kData + "/synth/no_such_design.v --cache " + CacheDir(), &st);
    EXPECT_EQ(st, MTS_EXIT_ENV) << out; // nothing was checked: a file that is not there
    EXPECT_NE(out.find("no_such_design.v: cannot open"), std::string::npos) << out;
}

TEST(SynthFlow, CliPrintsTableAndWritesJson)
{
    REQUIRE_TOOLS();
    std::string json = TmpPath("r.json");
    int st;
    std::string out = RunCli("--rtl " + kData + "/synth/mul4.v --cache " + CacheDir() + " --ops 1000 --json " + json, &st);
    EXPECT_EQ(st, 0) << out;
    EXPECT_NE(out.find("area"), std::string::npos) << out;
    EXPECT_NE(out.find("exhaustive: 256 vectors"), std::string::npos) << out;
    std::ifstream f(json);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_NE(ss.str().find("\"area_um2\""), std::string::npos);
    EXPECT_NE(ss.str().find("\"energy_pj_per_op\""), std::string::npos);
    unlink(json.c_str());
    out = RunCli("--rtl " + kData + "/synth/mul4.v --param", &st);
    EXPECT_EQ(st, 2);
    out = RunCli("--rtl " + kData + "/synth/mul4.v --param NOVALUE --cache " + CacheDir(), &st);
    EXPECT_EQ(st, 2);
    EXPECT_NE(out.find("NAME=VALUE"), std::string::npos) << out;
}

} // namespace
