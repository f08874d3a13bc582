// eq_harness.cpp - main() of the gate-level equivalence simulator. The synth
// flow Verilates a wrapper `mts_eq` that feeds one input vector `vin` to both
// the RTL top and the mapped netlist (module mts_gl, cells from cells.v) and
// exposes their outputs o_rtl and o_gl; this program compares them.
//   eqsim exhaustive BITS        every vector 0 .. 2^BITS-1
//   eqsim file IN OUT            vectors (uint64, native order) from IN;
//                                writes (rtl, gl) uint64 pairs to OUT ("-": none)
// Random vectors are drawn by the flow (mts_rng) and passed in a file, so this
// standalone program (Verilator links it, not libmantis) has no generator.
// Prints "vectors N mismatches K" and the first mismatches; exit 1 on any.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "Vmts_eq.h"
#include "verilated.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: eqsim exhaustive BITS | file IN OUT\n");
        return 2;
    }
    auto ctx = std::make_unique<VerilatedContext>();
    auto m = std::make_unique<Vmts_eq>(ctx.get());
    uint64_t n = 0, bad = 0;
    auto run = [&](uint64_t v, uint64_t *r, uint64_t *g) {
        m->vin = v;
        m->eval();
        *r = (uint64_t)m->o_rtl;
        *g = (uint64_t)m->o_gl;
        n++;
        if (*r != *g) {
            if (bad < 5)
                std::printf("mismatch in=0x%llx rtl=0x%llx gl=0x%llx\n", (unsigned long long)v,
                            (unsigned long long)*r, (unsigned long long)*g);
            bad++;
        }
    };
    uint64_t r, g;
    if (!std::strcmp(argv[1], "exhaustive")) {
        int bits = std::atoi(argv[2]);
        for (uint64_t v = 0; v < (1ull << bits); v++) run(v, &r, &g);
    } else if (!std::strcmp(argv[1], "file") && argc >= 4) {
        bool keep = std::strcmp(argv[3], "-") != 0;
        FILE *in = std::fopen(argv[2], "rb"), *out = keep ? std::fopen(argv[3], "wb") : nullptr;
        if (!in || (keep && !out)) {
            std::fprintf(stderr, "eqsim: cannot open %s or %s\n", argv[2], argv[3]);
            return 2;
        }
        uint64_t v;
        while (std::fread(&v, sizeof v, 1, in) == 1) {
            run(v, &r, &g);
            uint64_t pair[2] = {r, g};
            if (keep) std::fwrite(pair, sizeof pair, 1, out);
        }
        std::fclose(in);
        if (keep && std::fclose(out)) return 2;
    } else {
        std::fprintf(stderr, "eqsim: bad mode %s\n", argv[1]);
        return 2;
    }
    m->final();
    std::printf("vectors %llu mismatches %llu\n", (unsigned long long)n, (unsigned long long)bad);
    return bad ? 1 : 0;
}
