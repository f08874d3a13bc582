#!/usr/bin/env python3
"""outfeed_random.py - seeded random Verilog designs whose output (and
internal vector) bits read each other, assigned in an order unlike their
dependency order, with constants and input copies: the designs Verilator
orders per variable, not per bit (docs/synth.md, equivalence). A measuring
tool, not part of the build or the tests.

    synth/tools/outfeed_random.py FIRST LAST OUT_DIR

writes OUT_DIR/rN/rN.v for seeds FIRST..LAST-1 (module rN; one directory
each, as `mantis synth` takes a design's directory for its submodules). Then
e.g. for d in OUT_DIR/r*; do mantis synth --rtl $d/$(basename $d).v; done
"""
import os
import random
import sys


def design(seed):
    rnd = random.Random(seed)
    nin, nout, nw = rnd.randint(4, 8), rnd.randint(4, 10), rnd.randint(0, 6)
    order = [("O", j) for j in range(nout)] + [("W", k) for k in range(nw)]
    rnd.shuffle(order)  # the dependency order: each bit reads bits before it
    avail = [("A", i) for i in range(nin)]
    defs = {}
    for sig in order:
        kind = rnd.random()

        def pick():
            return "%s[%d]" % rnd.choice(avail)

        if kind < 0.1:
            e = "1'b%d" % rnd.randint(0, 1)
        elif kind < 0.25:
            e = pick()
        elif kind < 0.4:
            e = "~" + pick()
        else:
            op = rnd.choice("^&|")
            e = "(%s %s %s)" % (pick(), op, pick())
            if rnd.random() < 0.3:
                e = "(%s %s %s)" % (e, rnd.choice("^&|"), pick())
        defs[sig] = e
        avail.append(sig)
    stmts = list(defs.items())
    rnd.shuffle(stmts)  # the order they are written in
    lines = ["module r%d (input wire [%d:0] A, output wire [%d:0] O);" % (seed, nin - 1, nout - 1)]
    if nw:
        lines.append("    wire [%d:0] W;" % (nw - 1))
    lines += ["    assign %s[%d] = %s;" % (v, i, e) for (v, i), e in stmts]
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: outfeed_random.py FIRST LAST OUT_DIR")
    first, last, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    for seed in range(first, last):
        d = os.path.join(out, "r%d" % seed)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "r%d.v" % seed), "w") as f:
            f.write(design(seed))


if __name__ == "__main__":
    main()
