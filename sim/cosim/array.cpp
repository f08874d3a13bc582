// array.cpp - the systolic MAC array as a SystemC model (docs/cosim.md).
//
// One SC_MODULE, `Array`, holds the R x C processing elements' registers and
// one clocked process. At every rising edge each PE reads its neighbours'
// registers as they were before the edge (left: activation, above: partial
// sum or, in OS, the weight operand) and writes its own. Updating the PEs in
// reverse order (bottom-right first) inside the one process gives exactly
// the two-phase semantics of per-PE sc_signals, without the kernel scheduling
// R*C processes per cycle (the speed goal: millions of PE-cycles per second).
//
// The SystemC kernel is process-wide and elaborates once: the module is
// created on the first run and reconfigured for each later one (sc_pause ends
// a run, the next sc_start continues the same simulation). A lock serialises
// runs.
#include <systemc>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "cosim_internal.h"
#include "mantis/amsim.h"
#include "mantis/fmaq.h"
#include "mantis/fpbits.h"
#include "mantis/nn_arith.h"

using namespace sc_core;

namespace {

// The product the provider's kernels form for operands already quantized
// (mts_prov_operand): AMSim through the LUT, or the mulop (C model or the
// Verilated RTL), or the native rule of mts_prov_mul.
inline uint32_t product(const mts_provider *p, uint32_t a, uint32_t b)
{
    switch (p->kind) {
    case MTS_PROV_LUT: return mts_amsim(p->lut, a, b);
    case MTS_PROV_MULOP: return p->mul->fn(p->mul, a, b);
    default: return mts_prov_mul(p, a, b);
    }
}

inline uint32_t fadd(uint32_t s, uint32_t p) { return mts_f2u(mts_u2f(s) + mts_u2f(p)); }

struct Run {
    cosim_job *j;
    const mts_cosim_config *c;
    const mts_provider *p;
    int R, C, M, N, K;
    bool fmaq, os, wrong;
    // PE registers, index r*C + c
    std::vector<uint32_t> w, wc;    // WS: stationary weight and its code
    std::vector<uint32_t> a, ac;    // activation moving right, its code
    std::vector<int32_t> am;        // activation's m (WS) or k (OS); -1: bubble
    std::vector<uint32_t> ps;       // WS: partial sum moving down
    std::vector<int32_t> pm;        // its m; -1: bubble
    std::vector<uint32_t> b, bc;    // OS: weight operand moving down
    std::vector<int32_t> bk;
    std::vector<uint32_t> acc, ysum; // OS: chunk sum and folded total
    std::vector<uint8_t> yfirst;
    std::vector<uint32_t> lastA, lastB; // each PE's multiplier inputs, for toggles
    // schedule
    int phase = 0, t = 0;  // WS: 0 load, 1 stream; OS: 1 stream, 2 shift out
    int t0 = 0, tn = 0;    // tile: WS (k, n), OS (m, n)
    int Rt = 0, Ct = 0;
    long captured = 0;
    uint64_t cycles = 0;
    bool done = false;

    void start_tile()
    {
        int k0 = t0 * R, n0 = tn * C, m0 = t0 * R;
        Rt = os ? std::min(R, M - m0) : std::min(R, K - k0);
        Ct = std::min(C, N - n0);
        captured = 0;
        t = 0;
        std::fill(am.begin(), am.end(), -1);
        std::fill(pm.begin(), pm.end(), -1);
        std::fill(bk.begin(), bk.end(), -1);
        if (os) {
            phase = 1;
            std::fill(acc.begin(), acc.end(), 0u);
            std::fill(ysum.begin(), ysum.end(), 0u);
            std::fill(yfirst.begin(), yfirst.end(), 1);
        } else {
            phase = 0;
        }
    }

    void next_tile()
    {
        int tiles0 = os ? (M + R - 1) / R : (K + R - 1) / R;
        if (++t0 == tiles0) {
            t0 = 0;
            if (++tn == (N + C - 1) / C) {
                done = true;
                return;
            }
        }
        start_tile();
    }

    uint32_t accumulate(uint32_t s, uint32_t prod)
    {
        if (!fmaq) return fadd(s, prod);
        if (c->acc) return c->acc(c->acc_ud, prod, s);
        return mts_fmaq(&p->qprod, &p->qacc, prod, s);
    }

    void toggles(int i, uint32_t ca, uint32_t cb)
    {
        uint32_t da = ca ^ lastA[i], db = cb ^ lastB[i];
        j->r->toggles_a += (uint64_t)__builtin_popcount(da);
        j->r->toggles_b += (uint64_t)__builtin_popcount(db);
        j->r->toggles_man += (uint64_t)__builtin_popcount(da & j->man_mask) +
                             (uint64_t)__builtin_popcount(db & j->man_mask);
        lastA[i] = ca;
        lastB[i] = cb;
        j->r->products++;
    }

    // WS, one edge of the weight preload: weights shift down one row; row 0
    // takes B row k0 + R-1-t, so after R edges row r holds B[k0+r].
    void ws_load()
    {
        int k0 = t0 * R, n0 = tn * C;
        for (int r = R - 1; r > 0; r--)
            for (int cc = 0; cc < C; cc++) {
                w[r * C + cc] = w[(r - 1) * C + cc];
                wc[r * C + cc] = wc[(r - 1) * C + cc];
            }
        int kr = k0 + R - 1 - t;
        for (int cc = 0; cc < C; cc++) {
            bool v = kr < K && cc < Ct;
            w[cc] = v ? j->B[(size_t)kr * N + n0 + cc] : 0u;
            wc[cc] = v ? j->Bcode[(size_t)kr * N + n0 + cc] : 0u;
        }
        j->r->fill++;
        if (++t == R) phase = 1, t = 0;
    }

    // WS, one edge of streaming: capture the column bottoms into the output
    // buffer, then every PE (bottom-right first) multiplies and passes on.
    void ws_stream()
    {
        int n0 = tn * C;
        int64_t ktile = t0;
        for (int cc = 0; cc < Ct; cc++) {
            int i = (R - 1) * C + cc;
            if (pm[i] < 0) continue;
            uint32_t *o = &j->out[(size_t)pm[i] * N + n0 + cc];
            if (fmaq != wrong) *o = ktile == 0 ? ps[i] : (fmaq ? mts_qadd(&p->qacc, *o, ps[i]) : fadd(*o, ps[i]));
            else *o = ps[i];
            captured++;
        }
        for (int r = R - 1; r >= 0; r--) {
            for (int cc = Ct - 1; cc >= 0; cc--) {
                int i = r * C + cc;
                int32_t m_in, p_in;
                uint32_t a_in, ac_in, s_in;
                if (cc == 0) {
                    m_in = t - r;
                    if (m_in >= M || r >= Rt) m_in = -1;
                    a_in = m_in >= 0 ? j->A[(size_t)m_in * K + (size_t)t0 * R + r] : 0u;
                    ac_in = m_in >= 0 ? j->Acode[(size_t)m_in * K + (size_t)t0 * R + r] : 0u;
                } else {
                    m_in = am[i - 1], a_in = a[i - 1], ac_in = ac[i - 1];
                }
                if (r == 0) {
                    p_in = t - cc;
                    if (p_in >= M) p_in = -1;
                    // the column top: +0, or the previous k-tile's sum fed back
                    bool feed = ktile > 0 && fmaq == wrong;
                    s_in = p_in >= 0 && feed ? j->out[(size_t)p_in * N + n0 + cc] : 0u;
                } else {
                    p_in = pm[i - C], s_in = ps[i - C];
                }
                if (m_in >= 0) { // a product (rows r >= Rt only pass the sum on)
                    toggles(i, ac_in, wc[i]);
                    s_in = accumulate(s_in, product(p, a_in, w[i]));
                }
                am[i] = m_in, a[i] = a_in, ac[i] = ac_in;
                pm[i] = p_in, ps[i] = s_in;
            }
        }
        t++;
        if (t <= M) j->r->compute++;
        else j->r->drain++;
        if (captured == (long)M * Ct) next_tile();
    }

    // OS, one edge: A rows enter from the left, B columns from the top, both
    // skewed; every PE accumulates its own output over k.
    void os_stream()
    {
        int m0 = t0 * R, n0 = tn * C;
        bool last = false;
        for (int r = Rt - 1; r >= 0; r--) {
            for (int cc = Ct - 1; cc >= 0; cc--) {
                int i = r * C + cc;
                int32_t ka, kb;
                uint32_t a_in, ac_in, b_in, bc_in;
                if (cc == 0) {
                    ka = t - r;
                    if (ka >= K) ka = -1;
                    a_in = ka >= 0 ? j->A[(size_t)(m0 + r) * K + ka] : 0u;
                    ac_in = ka >= 0 ? j->Acode[(size_t)(m0 + r) * K + ka] : 0u;
                } else {
                    ka = am[i - 1], a_in = a[i - 1], ac_in = ac[i - 1];
                }
                if (r == 0) {
                    kb = t - cc;
                    if (kb >= K) kb = -1;
                    b_in = kb >= 0 ? j->B[(size_t)kb * N + n0 + cc] : 0u;
                    bc_in = kb >= 0 ? j->Bcode[(size_t)kb * N + n0 + cc] : 0u;
                } else {
                    kb = bk[i - C], b_in = b[i - C], bc_in = bc[i - C];
                }
                if (ka >= 0) {
                    toggles(i, ac_in, bc_in);
                    uint32_t s = accumulate(acc[i], product(p, a_in, b_in));
                    if (fmaq && ((ka + 1) % j->chunk == 0 || ka == K - 1)) {
                        ysum[i] = yfirst[i] ? s : mts_qadd(&p->qacc, ysum[i], s);
                        yfirst[i] = 0;
                        s = 0u;
                    }
                    acc[i] = s;
                    if (ka == K - 1 && r == Rt - 1 && cc == Ct - 1) last = true;
                }
                am[i] = ka, a[i] = a_in, ac[i] = ac_in;
                bk[i] = kb, b[i] = b_in, bc[i] = bc_in;
            }
        }
        t++;
        if (t <= K) j->r->compute++;
        else j->r->drain++;
        if (last) phase = 2, t = 0;
    }

    // OS, one edge of the shift-out: the results move down one row; the
    // bottom row enters the output buffer. R edges empty the array.
    void os_shift()
    {
        int m0 = t0 * R, n0 = tn * C;
        int r = R - 1 - t; // the row whose results reach the buffer at this edge
        if (r < Rt)
            for (int cc = 0; cc < Ct; cc++) {
                int i = r * C + cc;
                j->out[(size_t)(m0 + r) * N + n0 + cc] = fmaq ? ysum[i] : acc[i];
            }
        j->r->drain++;
        if (++t == R) next_tile();
    }

    // One rising edge; true when the whole GEMM is in the output buffer.
    bool step()
    {
        cycles++;
        if (os) {
            if (phase == 1) os_stream();
            else os_shift();
        } else {
            if (phase == 0) ws_load();
            else ws_stream();
        }
        return done;
    }
};

SC_MODULE(Array)
{
    sc_in<bool> clk;
    Run *run = nullptr;
    void tick()
    {
        if (run && run->step()) {
            run = nullptr;
            sc_pause(); // sc_start returns; the next run continues this simulation
        }
    }
    SC_CTOR(Array)
    {
        SC_METHOD(tick);
        sensitive << clk.pos();
        dont_initialize();
    }
};

std::mutex lock;
sc_clock *clk;
Array *top;

void elaborate()
{
    if (top) return;
    // the kernel prints a banner and info messages to stdout; the library must not
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
    sc_report_handler::set_actions(SC_INFO, SC_DO_NOTHING);
    sc_report_handler::set_actions(SC_WARNING, SC_DO_NOTHING);
    clk = new sc_clock("mantis_clk", 1, SC_NS);
    top = new Array("mantis_array");
    top->clk(*clk);
}

} // namespace

extern "C" int cosim_have_systemc(void) { return 1; }

extern "C" int cosim_sim(cosim_job *j, mts_err *err)
{
    std::lock_guard<std::mutex> guard(lock);
    Run run;
    run.j = j;
    run.c = j->c;
    run.p = j->c->p;
    run.R = j->R, run.C = j->C, run.M = j->M, run.N = j->N, run.K = j->K;
    run.fmaq = j->c->p->fmaq != 0;
    run.os = j->c->dataflow == MTS_COSIM_OS;
    run.wrong = j->c->test_wrong_order != 0 && !run.os;
    size_t pes = (size_t)j->R * (size_t)j->C;
    try {
        for (auto *v : {&run.w, &run.wc, &run.a, &run.ac, &run.ps, &run.b, &run.bc, &run.acc, &run.ysum,
                        &run.lastA, &run.lastB})
            v->assign(pes, 0u);
        for (auto *v : {&run.am, &run.pm, &run.bk}) v->assign(pes, -1);
        run.yfirst.assign(pes, 1);
    } catch (const std::bad_alloc &) {
        return mts_fail(err, MTS_ENOMEM, "cosim: out of memory for a %dx%d array", j->R, j->C);
    }
    try {
        elaborate();
        sc_trace_file *tf = nullptr;
        if (j->c->vcd) {
            // SystemC opens the file only once simulating, and a failure then
            // would leave the trace registered in the kernel: check first
            std::string path = std::string(j->c->vcd) + ".vcd";
            FILE *f = fopen(path.c_str(), "w");
            if (!f) return mts_fail(err, MTS_EIO, "%s: cannot create the waveform file", path.c_str());
            fclose(f);
            tf = sc_create_vcd_trace_file(j->c->vcd);
            tf->set_time_unit(1, SC_NS);
            sc_trace(tf, run.cycles, "cycle");
            sc_trace(tf, run.phase, "phase");
            for (int r = 0; r < j->R; r++)
                for (int c = 0; c < j->C; c++) {
                    size_t i = (size_t)r * j->C + c;
                    std::string pe = "pe_" + std::to_string(r) + "_" + std::to_string(c) + ".";
                    sc_trace(tf, run.am[i], pe + "a_idx");
                    sc_trace(tf, run.a[i], pe + "a");
                    if (run.os) {
                        sc_trace(tf, run.b[i], pe + "b");
                        sc_trace(tf, run.acc[i], pe + "acc");
                    } else {
                        sc_trace(tf, run.w[i], pe + "w");
                        sc_trace(tf, run.ps[i], pe + "psum");
                        sc_trace(tf, run.pm[i], pe + "psum_idx");
                    }
                }
        }
        run.start_tile();
        auto t0 = std::chrono::steady_clock::now();
        top->run = &run;
        sc_start();
        auto t1 = std::chrono::steady_clock::now();
        if (tf) sc_close_vcd_trace_file(tf);
        j->r->seconds = std::chrono::duration<double>(t1 - t0).count();
        j->r->cycles = run.cycles;
    } catch (const std::exception &e) {
        if (top) top->run = nullptr;
        return mts_fail(err, MTS_EIO, "cosim: SystemC: %.400s", e.what());
    }
    if (!run.done) return mts_fail(err, MTS_EIO, "cosim: the simulation stopped before the GEMM was complete");
    return MTS_OK;
}

// libsystemc's own main() calls sc_main; Mantis has its own main, but the
// shared library still needs the symbol to link.
extern "C" int sc_main(int, char **) { return 0; }
