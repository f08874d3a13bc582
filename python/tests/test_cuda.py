"""CUDA tensors through the package (docs/python.md, "Devices"): every layer
on a CUDA tensor gives the bits of the same layer on the CPU tensor - the
GEMMs on the GPU through the library's GPU provider, an integer table's
quantization-aware layers through gpu/qat.cu's twins, the range observer on
the GPU moved as on the CPU. Runs only where PyTorch sees a CUDA device and
libmantis was built with CUDA: on the device check's machine
(tests/gpu-check.sh run); skipped everywhere else."""
import copy

import pytest
import torch
from torch import nn

import mantis
import mantis.torch as mt
from conftest import assert_bits, operands

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and mantis.built_with_cuda()),
                                reason="needs a CUDA device and libmantis built with CUDA")

CUDA = torch.device("cuda")


def int8_table():
    """An approximate unsigned 8-bit table (exact products, every third off by a little)."""
    t = [a * b + ((a * 7 + b * 3) % 5 - 2 if (a * 256 + b) % 3 == 0 else 0) for a in range(256) for b in range(256)]
    return mantis.Multiplier.from_int_table(t, bits=8, signed=False, name="noisy8")


def multipliers():
    mbm = mantis.Multiplier("mbm", man_bits=7)
    return [("mbm", dict(mul=mbm)),
            ("mbm-fmaq", dict(mul=mbm.with_acc(acc="M7E4", prod="M7E4", acc_bias=10, prod_bias=12))),
            ("int8-ste", dict(mul=int8_table(), int_backward="ste")),
            ("int8-table", dict(mul=int8_table(), int_backward="table")),
            ("int8-approx", dict(mul=int8_table(), int_backward="approx"))]


def step(model, x, dy):
    """One forward and backward: (output, input gradient, parameter gradients, buffers)."""
    x = x.clone().requires_grad_()
    y = model(x)
    y.backward(dy)
    return y, x.grad, [p.grad for p in model.parameters()], [b for b in model.buffers()]


@pytest.mark.parametrize("name,kw", multipliers(), ids=[n for n, _ in multipliers()])
@pytest.mark.parametrize("layer", ["linear", "conv"])
def test_layer_on_cuda_equals_cpu(name, kw, layer):
    g = torch.Generator().manual_seed(5)
    if layer == "linear":
        model = nn.Sequential(nn.Linear(37, 11))
        x, dy = operands(g, 13, 37, special=0.05), operands(g, 13, 11)
    else:
        model = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1))
        x, dy = operands(g, 2, 3, 9, 8, special=0.05), operands(g, 2, 4, 5, 4)
    mt.approximate(model, **kw)
    gpu = copy.deepcopy(model).to(CUDA)
    for rnd in range(2):  # the second: an observer that has seen a range (integer tables)
        want = step(model, x, dy)
        got = step(gpu, x.to(CUDA), dy.to(CUDA))
        what = "%s %s round %d" % (layer, name, rnd)
        assert_bits(got[0].cpu(), want[0], what + " y")
        assert_bits(got[1].cpu(), want[1], what + " dx")
        for i, (a, b) in enumerate(zip(got[2], want[2])):
            assert_bits(a.cpu(), b, what + " parameter %d gradient" % i)
        for i, (a, b) in enumerate(zip(got[3], want[3])):
            assert_bits(a.cpu(), b, what + " buffer %d" % i)
        for m in (model, gpu):
            m.zero_grad(set_to_none=True)
    model.eval(), gpu.eval()
    with torch.no_grad():
        assert_bits(gpu(x.to(CUDA)).cpu(), model(x), "%s %s eval" % (layer, name))


def test_matmul_on_cuda_equals_cpu():
    g = torch.Generator().manual_seed(6)
    m = mantis.Multiplier("mbm", man_bits=7)
    a, b, dc = operands(g, 2, 5, 7, special=0.05), operands(g, 2, 7, 3), operands(g, 2, 5, 3)
    out = []
    for dev in ("cpu", CUDA):
        # clone: a.to("cpu") is a itself, which must stay a leaf without a grad
        ta, tb = a.to(dev).clone().requires_grad_(), b.to(dev).clone().requires_grad_()
        c = mt.matmul(ta, tb, mul=m)
        c.backward(dc.to(dev))
        out.append((c.detach().cpu(), ta.grad.cpu(), tb.grad.cpu()))
    for i, what in enumerate(("c", "da", "db")):
        assert_bits(out[1][i], out[0][i], "matmul " + what)


def test_unsupported_provider_on_cuda_says_why():
    model = mt.approximate(nn.Sequential(nn.Linear(4, 2)), mul=mantis.Multiplier("mbm", man_bits=23))  # a C model
    with pytest.raises(mantis.MantisError) as e:
        model.to(CUDA)(torch.ones(1, 4, device=CUDA))
    assert "not available on the GPU" in str(e.value)
