// eq_harness.cpp - main() of the gate-level equivalence simulator. The synth
// flow Verilates a wrapper `mts_eq` that feeds one input vector `vin` to both
// the RTL top and the mapped netlist (module mts_gl, cells from cells.v) and
// exposes their outputs o_rtl and o_gl; this program compares them.
//   eqsim exhaustive BITS        every vector 0 .. 2^BITS-1
//   eqsim random BITS N SEED     N seeded random vectors (splitmix64)
//   eqsim file IN OUT            vectors (uint64, native order) from IN;
//                                writes (rtl, gl) uint64 pairs to OUT
// Prints "vectors N mismatches K" and the first mismatches; exit 1 on any.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "Vmts_eq.h"
#include "verilated.h"

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: eqsim exhaustive BITS | random BITS N SEED | file IN OUT\n");
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
    } else if (!std::strcmp(argv[1], "random") && argc >= 5) {
        int bits = std::atoi(argv[2]);
        uint64_t count = std::strtoull(argv[3], nullptr, 0), s = std::strtoull(argv[4], nullptr, 0);
        uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
        for (uint64_t i = 0; i < count; i++) run(splitmix64(&s) & mask, &r, &g);
    } else if (!std::strcmp(argv[1], "file") && argc >= 4) {
        FILE *in = std::fopen(argv[2], "rb"), *out = std::fopen(argv[3], "wb");
        if (!in || !out) {
            std::fprintf(stderr, "eqsim: cannot open %s or %s\n", argv[2], argv[3]);
            return 2;
        }
        uint64_t v;
        while (std::fread(&v, sizeof v, 1, in) == 1) {
            run(v, &r, &g);
            uint64_t pair[2] = {r, g};
            std::fwrite(pair, sizeof pair, 1, out);
        }
        std::fclose(in);
        if (std::fclose(out)) return 2;
    } else {
        std::fprintf(stderr, "eqsim: bad mode %s\n", argv[1]);
        return 2;
    }
    m->final();
    std::printf("vectors %llu mismatches %llu\n", (unsigned long long)n, (unsigned long long)bad);
    return bad ? 1 : 0;
}
