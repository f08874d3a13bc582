"""Shared helpers of the Python layer's tests: the package from the tree,
seeded operands with special values, the references (mts_gemm_ref through
Multiplier.mm(ref=True), plus the data movement and fixed-order sums of the
C ops written out in PyTorch) and bit-for-bit comparison in hex."""
import os
import struct
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import mantis  # noqa: E402

DATA = os.path.join(ROOT, "python", "tests", "data")
MANTIS_BIN = os.environ.get("MANTIS_BIN", os.path.join(ROOT, "build", "bin", "mantis"))


def hexf(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0]


def bits(t):
    """The FP32 bit patterns, every NaN as 0x7FC00000: payloads and the sign of
    x86's default NaN depend on operand order inside the FPU and are not
    part of the contract (docs/gemm.md)."""
    t = t.detach().contiguous()
    return torch.where(torch.isnan(t), torch.full_like(t, float("nan")).view(torch.int32).abs(), t.view(torch.int32))


def assert_bits(got, want, what, inputs=()):
    """got and want equal bit for bit, else the first differing element,
    both results and the named inputs (first 8 values) in hex."""
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, tuple(got.shape), tuple(want.shape))
    d = (bits(got) != bits(want)).reshape(-1).nonzero()
    if d.numel():
        i = int(d[0])
        idx, r = [], i
        for n in reversed(got.shape):
            idx.insert(0, r % n)
            r //= n
        idx = tuple(idx)
        lines = ["%s: %d of %d elements differ; first at %s: got %s, expected %s"
                 % (what, d.numel(), got.numel(), idx, hexf(got.reshape(-1)[i]), hexf(want.reshape(-1)[i]))]
        for name, t in inputs:
            v = t.detach().reshape(-1)[:8]
            lines.append("  %s[:8] = %s" % (name, " ".join(hexf(x) for x in v)))
        pytest.fail("\n".join(lines))


SPECIALS = [0.0, -0.0, 1e-40, -3e-39, float("inf"), float("-inf"), float("nan"), 3.4028235e38, -1.1754944e-38,
            1.1754944e-38, 2.0 ** 100, -2.0 ** -100, 1.0, -1.0, 1.00390625, 0.99609375, 2.0 ** 63, 2.0 ** -63]


def operands(gen, *shape, special=0.0, scale=1.0):
    """Seeded normal operands; a fraction `special` of them replaced by
    zeros, subnormals, infinities, NaN and exponent boundaries."""
    t = torch.randn(*shape, generator=gen) * scale
    if special > 0 and t.numel():
        mask = torch.rand(*shape, generator=gen) < special
        pick = torch.randint(len(SPECIALS), tuple(shape), generator=gen)
        t = torch.where(mask, torch.tensor(SPECIALS)[pick], t)
    return t


def blocked_sum(v):
    """fmath.h's fixed blocked order of a long FP32 sum (bias gradients):
    chunks of 64 summed sequentially from +0, then adjacent pairs level by
    level, an odd one moving up unchanged. v: 1-D float32."""
    chunks = []
    for s in range(0, max(1, v.numel()), 64):
        acc = torch.zeros((), dtype=torch.float32)
        for x in v[s:s + 64]:
            acc = acc + x
        chunks.append(acc)
    while len(chunks) > 1:
        nxt = [chunks[i] + chunks[i + 1] for i in range(0, len(chunks) - 1, 2)]
        if len(chunks) % 2:
            nxt.append(chunks[-1])
        chunks = nxt
    return chunks[0]


def run_linear(layer_fn, x, w, b, dy):
    """y, dx, dw, db of layer_fn(x, w, b) with y's gradient dy (fresh leaves)."""
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    b = None if b is None else b.clone().requires_grad_()
    y = layer_fn(x, w, b)
    y.backward(dy)
    return y.detach(), x.grad, w.grad, None if b is None else b.grad


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def asym():
    """A non-commutative multiplier from a Verilog design (verified table)."""
    return mantis.Multiplier.from_verilog(os.path.join(DATA, "sig_asym.v"))
