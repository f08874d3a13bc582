"""Integer tables through the package run quantization-aware, as `mantis
train` runs every dense and conv layer of an integer design (sim/nn/qat.c,
docs/training.md "Integer multipliers"). Checked here against a readable
reference written in PyTorch ops: the quantizers in FP32 (qat.h's rules),
the table's products summed as exact integers, the zero-point correction
and one FP64 rescale; the STE backward as FP32 GEMMs (mts_gemm_ref) on the
fake-quantized operands with the clipped inputs' gradients cleared."""
import pytest
import torch
import torch.nn.functional as F

import mantis
import mantis.torch as mt
from conftest import assert_bits, blocked_sum, operands, run_linear as run

F32 = torch.float32
EPS = torch.tensor(torch.finfo(F32).eps, dtype=F32)
FMAX = torch.tensor(torch.finfo(F32).max, dtype=F32)


def f32(v):
    return torch.tensor(v, dtype=F32)


def table_of(bits, sg, fn):
    """(Multiplier, entries as int64 indexed (code(a) << bits) | code(b))."""
    n = 1 << bits
    val = (lambda c: c - n if sg and c >= n // 2 else c)
    t = [fn(val(a), val(b)) for a in range(n) for b in range(n)]
    return mantis.Multiplier.from_int_table(t, bits=bits, signed=sg, name="t"), torch.tensor(t, dtype=torch.int64)


def finite_range(t):
    v = t[torch.isfinite(t)]
    return (float(v.min()), float(v.max())) if v.numel() else (0.0, 0.0)


class Q:
    """A quantizer (qat.h's mts_qparam) from a range: affine, or symmetric."""

    def __init__(self, lo, hi, bits, sg, symmetric=False):
        if symmetric:
            self.qmax = (1 << (bits - 1)) - 1
            self.qmin = -self.qmax
            s = f32(max(abs(lo), abs(hi))) / f32(self.qmax)
            self.zp = 0
        else:
            self.qmin, self.qmax = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if sg else (0, (1 << bits) - 1)
            lo, hi = f32(min(lo, 0.0)), f32(max(hi, 0.0))
            s = (hi - lo) / f32(self.qmax - self.qmin)
        if not s >= EPS:
            s = EPS
        if torch.isinf(s):
            s = FMAX / f32(self.qmax - self.qmin)
        self.scale, self.inv = s, f32(1.0) / s
        if not symmetric:
            z = float(f32(self.qmin) - torch.round(lo / s))
            self.zp = int(min(max(z, self.qmin), self.qmax))

    def _t(self, x):
        return torch.round(x * self.inv)  # FP32 multiply, ties to even

    def values(self, x):
        t = self._t(x)
        nan = torch.isnan(t)
        t = torch.clamp(torch.where(nan, f32(0.0), t) + f32(self.zp), self.qmin, self.qmax)
        return torch.where(nan, torch.tensor(self.zp), t.to(torch.int64))

    def fake(self, x):
        return (self.values(x) - self.zp).to(F32) * self.scale

    def passes(self, x):
        t = self._t(x) + f32(self.zp)
        return (t >= self.qmin) & (t <= self.qmax)


def weight_qs(w, bits, sg):
    return [Q(*finite_range(w[o]), bits, sg, symmetric=sg) for o in range(w.shape[0])]


def ref_qgemm(a, qa, w, qws, T, bits):
    """y[i][o] = the code GEMM of rows a[i] (one quantizer) and w[o] (one
    each): exact integer sums, correction, (sa * sb) * acc in FP64."""
    mask = (1 << bits) - 1
    va = qa.values(a)
    y = torch.empty(a.shape[0], w.shape[0], dtype=F32)
    for o in range(w.shape[0]):
        qw = qws[o]
        vw = qw.values(w[o])
        s = T[((va & mask) << bits) | (vw & mask)].sum(1)
        acc = s - qw.zp * va.sum(1) - qa.zp * vw.sum() + a.shape[1] * qa.zp * qw.zp
        y[:, o] = ((float(qa.scale) * float(qw.scale)) * acc.to(torch.float64)).to(F32)
    return y


def ref_linear_qat(x, w, b, dy, T, bits, sg, act_range):
    qa, qws = Q(*act_range, bits, sg), weight_qs(w, bits, sg)
    y = ref_qgemm(x, qa, w, qws, T, bits)
    if b is not None:
        y = y + b
    xh = qa.fake(x)
    wh = torch.stack([qws[o].fake(w[o]) for o in range(w.shape[0])])
    fp32 = mantis.Multiplier("fp32")
    dx = fp32.mm(dy, wh, ref=True)
    dx = torch.where(qa.passes(x), dx, f32(0.0))
    dw = fp32.mm(dy.t(), xh, ref=True)
    db = torch.stack([blocked_sum(dy[:, o]) for o in range(dy.shape[1])])
    return y, dx, dw, db


TABLES = [("u4 asym", 4, False, lambda a, b: a * (b | 1)), ("s4 noisy", 4, True, lambda a, b: a * b + (a ^ b) % 3 - 1),
          ("u8 exact", 8, False, lambda a, b: a * b)]


@pytest.mark.parametrize("name,bits,sg,fn", TABLES)
def test_linear_int_table_runs_quantization_aware(gen, name, bits, sg, fn):
    m, T = table_of(bits, sg, fn)
    x, w, b, dy = operands(gen, 11, 37, special=0.1), operands(gen, 5, 37, special=0.05), operands(gen, 5), \
        operands(gen, 11, 5)
    got = run(lambda x, w, b: mt.linear(x, w, b, mul=m), x, w, b, dy)
    want = ref_linear_qat(x, w, b, dy, T, bits, sg, finite_range(x))
    for g, r, what in zip(got, want, ("y", "dx", "dw", "db")):
        assert_bits(g, r, "qat linear %s %s" % (name, what), [("x", x), ("w", w)])
    # approx: the quantization-aware forward, every backward product through the table (per GEMM)
    got = run(lambda x, w, b: mt.linear(x, w, b, mul=m, int_backward="approx"), x, w, b, dy)
    assert_bits(got[0], want[0], "approx y")
    for g, r, what in zip(got[1:3], (m.mm(dy, w, ref=True), m.mm(dy.t(), x, ref=True)), ("dx", "dw")):
        assert_bits(g, r, "qat linear %s approx %s" % (name, what))


def test_table_backward_of_the_exact_table_is_the_ste(gen):
    """The gradient tables of an exact table are exactly b and a (qat.h), so
    `table` gives the straight-through estimator's bits; an approximate
    table's do not."""
    m, _ = table_of(4, False, lambda a, b: a * b)
    x, w, dy = operands(gen, 9, 20), operands(gen, 6, 20), operands(gen, 9, 6)
    ste = run(lambda x, w, b: mt.linear(x, w, b, mul=m), x, w, None, dy)
    tab = run(lambda x, w, b: mt.linear(x, w, b, mul=m, int_backward="table"), x, w, None, dy)
    for g, r, what in zip(tab[:3], ste[:3], ("y", "dx", "dw")):
        assert_bits(g, r, "exact table: table vs ste %s" % what)
    a, _ = table_of(4, False, lambda a, b: a * b + (3 if a > 7 else 0))
    ste = run(lambda x, w, b: mt.linear(x, w, b, mul=a), x, w, None, dy)
    tab = run(lambda x, w, b: mt.linear(x, w, b, mul=a, int_backward="table"), x, w, None, dy)
    assert not torch.equal(tab[1], ste[1])


def test_module_observer_learns_the_range_and_freezes_in_eval(gen):
    m, T = table_of(4, False, lambda a, b: a * (b | 1))
    lin = mt.Linear(12, 4, mul=m)
    assert dict(lin.named_buffers())["mantis_qat_range"].tolist() == [0.0, 0.0, 0.0]
    x1, x2 = operands(gen, 6, 12), operands(gen, 6, 12) * 3.0
    lin(x1)
    lo1, hi1 = finite_range(x1)
    assert lin.mantis_qat_range.tolist() == [lo1, hi1, 1.0]
    x2g, dy = x2.clone().requires_grad_(), operands(gen, 6, 4)
    lin.zero_grad()
    y2 = lin(x2g)  # quantized with the observed range after this batch moved it
    lo2, hi2 = finite_range(x2)
    st = [f32(lo1) + f32(0.01) * (f32(lo2) - f32(lo1)), f32(hi1) + f32(0.01) * (f32(hi2) - f32(hi1))]
    assert_bits(lin.mantis_qat_range[:2], torch.stack(st), "EMA step of the observer")
    lin(x1 * 5.0)  # a later forward moves the observer again: the first call's backward keeps its own range
    y2.backward(dy)
    want = ref_linear_qat(x2, lin.weight.detach(), lin.bias.detach(), dy, T, 4, False, (float(st[0]), float(st[1])))
    for g, r, what in zip((y2.detach(), x2g.grad, lin.weight.grad, lin.bias.grad), want, ("y", "dx", "dw", "db")):
        assert_bits(g, r, "module with the observed range: %s" % what)
    lin.eval()
    before = lin.mantis_qat_range.clone()
    lin(x2 * 10.0)
    assert torch.equal(lin.mantis_qat_range, before), "evaluation must not move the observer"
    assert "mantis_qat_range" in lin.state_dict()


@pytest.mark.parametrize("k,stride,pad", [(3, 1, 1), (3, 2, 1), (1, 1, 0), (5, 1, 2)])
def test_conv2d_int_table_equals_reference(gen, k, stride, pad):
    m, T = table_of(4, True, lambda a, b: a * b + (a ^ b) % 3 - 1)
    N, cin, cout, h = 2, 3, 4, 7
    x, w, b = operands(gen, N, cin, h, h, special=0.05), operands(gen, cout, cin, k, k), operands(gen, cout)
    y = mt.conv2d(x, w, b, stride=stride, padding=pad, mul=m)
    # im2col with zero padding: the real 0 quantizes to the zero point, the pad code of qat.c
    cols = F.unfold(x, k, padding=pad, stride=stride)  # [N, K, P]
    qa = Q(*finite_range(x), 4, True)
    K, P = cols.shape[1], cols.shape[2]
    rows = cols.transpose(1, 2).reshape(N * P, K)
    want = ref_qgemm(rows, qa, w.reshape(cout, K), weight_qs(w.reshape(cout, K), 4, True), T, 4) + b
    oh = (h + 2 * pad - k) // stride + 1
    assert_bits(y, want.reshape(N, P, cout).permute(0, 2, 1).reshape(N, cout, oh, oh), "qat conv k%d s%d" % (k, stride),
                [("x", x)])


def test_approximate_gives_integer_layers_an_observer_and_restore_removes_it(gen):
    m, _ = table_of(4, False, lambda a, b: a * b)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8, 3))
    keys = set(model.state_dict())
    mt.approximate(model, mul=m, int_backward="table")
    assert {"0.mantis_qat_range", "3.mantis_qat_range"} <= set(model.state_dict())
    assert model[3].multipliers["int_backward"] == "table"
    x = operands(gen, 4, 1, 4, 4)
    model(x).sum().backward()
    assert model[0].mantis_qat_range[2] == 1.0 and model[3].mantis_qat_range[2] == 1.0
    observed = {k: v.clone() for k, v in model.state_dict().items()}
    plain = {k: v for k, v in observed.items() if "mantis_qat_range" not in k}
    model.load_state_dict(plain)  # a plain model's weights load: the observers start unobserved
    assert model[3].mantis_qat_range.tolist() == [0.0, 0.0, 0.0]
    model.load_state_dict(observed)
    assert model[3].mantis_qat_range[2] == 1.0
    mt.restore(model)
    assert set(model.state_dict()) == keys
    model.load_state_dict({k: v for k, v in plain.items()})


def test_errors_name_what_is_not_supported(gen):
    m, _ = table_of(4, False, lambda a, b: a * b)
    x = operands(gen, 2, 4, 5, 5)
    with pytest.raises(mantis.MantisError) as e:
        mt.conv2d(x, operands(gen, 4, 2, 3, 3), groups=2, mul=m)
    assert e.value.name == "MTS_EUNSUPPORTED" and "2 groups" in str(e.value)
    with pytest.raises(ValueError, match="int_backward 'bogus'"):
        mt.linear(operands(gen, 2, 3), operands(gen, 2, 3), mul=m, int_backward="bogus")
    with pytest.raises(ValueError, match="int_backward"):
        mt.Linear(3, 2, mul=m, int_backward="STE")
