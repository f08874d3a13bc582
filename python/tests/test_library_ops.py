"""approximate(..., library_ops=True): nn.ReLU and nn.MaxPool2d through the
library's own ops (mantis train's). Their values and gradients equal
PyTorch's bit for bit but for the documented NaN and -0 rules; unsupported
pooling configurations stay PyTorch's; restore() puts the originals back."""
import pytest
import torch
from torch import nn

import mantis
import mantis.torch as mt
from conftest import assert_bits, operands


def no_nan(t):
    return torch.where(torch.isnan(t), torch.ones_like(t), t)


def tied(gen, *shape):
    """Values on a coarse grid (many ties inside pooling windows), a few
    specials (infinities, subnormals, signed zeros), no NaN."""
    return no_nan(operands(gen, *shape, special=0.08).mul(2).round().div(2))


def grads(mod, x, g):
    x = x.clone().requires_grad_()
    y = mod(x)
    (dx,) = torch.autograd.grad(y, x, g)
    return y, dx


@pytest.mark.parametrize("k,s,shape", [(2, 2, (3, 4, 12, 10)), (2, 2, (2, 3, 13, 35)), (3, 2, (2, 5, 11, 9)),
                                       (3, 1, (1, 2, 7, 8)), (2, 3, (2, 2, 10, 11)), (1, 1, (2, 1, 3, 3)),
                                       (4, 4, (2, 3, 4, 4))])
def test_maxpool_equals_pytorch(gen, k, s, shape):
    x = tied(gen, *shape)
    torch_pool, ours = nn.MaxPool2d(k, s), mt.MaxPool2d(k, s)
    y0 = torch_pool(x)
    g = operands(gen, *y0.shape, special=0.05)  # incoming gradients with specials, -0 among them
    y0, dx0 = grads(torch_pool, x, g)
    y1, dx1 = grads(ours, x, g)
    what = "maxpool k=%d s=%d %s" % (k, s, shape)
    assert_bits(y1, y0, what, [("x", x)])
    assert_bits(dx1, dx0, what + " dx", [("x", x), ("dy", g)])
    assert_bits(ours(x[0]), torch_pool(x[0]), what + " unbatched")


def test_relu_equals_pytorch_but_nan_and_negative_zero(gen):
    x = no_nan(operands(gen, 4, 3, 9, 7, special=0.15))
    x = torch.where(x == 0, torch.zeros_like(x), x)  # +0 only: PyTorch keeps a -0
    g = operands(gen, *x.shape, special=0.15)
    y0, dx0 = grads(nn.ReLU(), x, g)
    y1, dx1 = grads(mt.ReLU(), x, g)
    assert_bits(y1, y0, "relu", [("x", x)])
    assert_bits(dx1, dx0, "relu dx", [("x", x), ("dy", g)])
    # the documented differences: a NaN or -0 input gives +0 here
    z = torch.tensor([float("nan"), -0.0, 2.0, -1.0])
    assert mt.ReLU()(z).tolist() == [0.0, 0.0, 2.0, 0.0]
    assert torch.signbit(mt.ReLU()(z)[1]).item() is False
    assert torch.signbit(nn.ReLU()(z)[1]).item() is True and torch.isnan(nn.ReLU()(z)[0])


def test_maxpool_nan_rule():
    """A NaN is never greater than the running maximum: kept first in its
    window, ignored later; PyTorch's maximum is the NaN wherever it lies."""
    later = torch.tensor([[[[1.0, float("nan")], [3.0, 2.0]]]])
    first = torch.tensor([[[[float("nan"), 1.0], [3.0, 2.0]]]])
    assert mt.MaxPool2d(2)(later).item() == 3.0
    assert torch.isnan(mt.MaxPool2d(2)(first)).item()
    assert torch.isnan(nn.MaxPool2d(2)(later)).item()


def lenet():
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 32), nn.ReLU(), nn.Linear(32, 10))


def train(model, x, y, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_training_with_library_ops_equals_pytorch_ops(gen):
    """The same model trained with PyTorch's ReLU/pooling and with the
    library's: every parameter equal bit for bit (inputs without NaN)."""
    x, y = operands(gen, 16, 1, 28, 28), torch.randint(10, (16,), generator=gen)
    a = mt.approximate(lenet(), mul="mbm")
    b = mt.approximate(lenet(), mul="mbm", library_ops=True)
    assert [type(m).__name__ for m in b].count("ReLU") == 3 and type(b[1]) is mt.ReLU and type(b[5]) is mt.MaxPool2d
    for i, (pa, pb) in enumerate(zip(train(a, x, y), train(b, x, y))):
        assert_bits(pb, pa, "parameter %d after 3 steps" % i)


def test_library_ops_swap_only_what_they_run_and_restore():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1), nn.MaxPool2d((2, 2)),
                          nn.Sequential(nn.ReLU(inplace=True), nn.MaxPool2d(2)), nn.MaxPool2d(2, ceil_mode=True))
    x = torch.randn(2, 3, 21, 21)
    with torch.no_grad():
        before = model(x)
    originals = list(model.modules())
    mt.approximate(model, mul="bf16", exclude=["4"], library_ops=True)
    assert type(model[1]) is mt.ReLU and type(model[3]) is mt.MaxPool2d
    assert type(model[2]) is nn.MaxPool2d and type(model[5]) is nn.MaxPool2d  # padding, ceil_mode: PyTorch's
    assert type(model[4][0]) is nn.ReLU and type(model[4][1]) is nn.MaxPool2d  # excluded
    mt.approximate(model, mul="bf16")  # without library_ops nothing else changes
    assert type(model[1]) is mt.ReLU
    mt.restore(model)
    assert list(model.modules()) == originals
    with torch.no_grad():
        assert torch.equal(model(x), before)


def test_library_op_errors():
    with pytest.raises(ValueError) as e:
        mt.MaxPool2d(2, padding=1)
    assert "mantis: MaxPool2d" in str(e.value) and "\n" not in str(e.value)
    err = mantis._lib.err_buf()
    x = torch.zeros(1, 1, 2, 2)
    rc = mantis._lib.maxpool_forward(1, 1, 2, 2, 3, 1, x.data_ptr(), x.data_ptr(), x.data_ptr(), err)
    assert rc == mantis._lib.EINVAL and b"larger than" in err.value
    rc = mantis._lib.maxpool_backward(1, 1, 2, 2, 2, 0, x.data_ptr(), x.data_ptr(), x.data_ptr(), err)
    assert rc == mantis._lib.EINVAL
    # a window larger than the input: PyTorch's own error, as nn.MaxPool2d gives it
    with pytest.raises(RuntimeError):
        mt.MaxPool2d(3)(torch.zeros(1, 1, 2, 2))


def sgd_reference(p, g, m, lr, mom, wd):
    """mantis train's SGD step (sim/nn/optim.c) one rounded torch op at a time."""
    t = g + p * wd if wd else g
    m = m * mom + t
    return p - m * lr, m


def test_sgd_equals_mantis_train_update(gen):
    """mantis.torch.SGD: every parameter and momentum buffer equal, bit for
    bit, to the rule of sim/nn/optim.c written out in torch ops (two groups,
    one with weight decay; gradients with signed zeros, subnormals and
    exponent boundaries; a parameter without a gradient stays as it is)."""
    ws = [operands(gen, 7, 5), operands(gen, 33), operands(gen, 2, 3, 4)]
    idle = torch.randn(3, generator=gen)
    params = [w.clone().requires_grad_() for w in ws] + [idle.clone().requires_grad_()]
    opt = mt.SGD([{"params": params[:2], "weight_decay": 5e-4}, {"params": params[2:]}], lr=0.05, momentum=0.9)
    ref = [(w.clone(), torch.zeros_like(w)) for w in ws]
    for step in range(4):
        gs = [no_nan(operands(gen, *w.shape, special=0.2, scale=1e-2)) for w in ws]
        for p, g in zip(params, gs):
            p.grad = g.clone()
        params[3].grad = None
        opt.step()
        for i, (g, (p, m)) in enumerate(zip(gs, ref)):
            ref[i] = sgd_reference(p, g, m, 0.05, 0.9, 5e-4 if i < 2 else 0.0)
            assert_bits(params[i].detach(), ref[i][0], "parameter %d after step %d" % (i, step + 1))
            assert_bits(opt.state[params[i]]["momentum_buffer"], ref[i][1], "buffer %d after step %d" % (i, step + 1))
        assert opt.nonfinite == any(not torch.isfinite(p).all() for p, _ in ref)
    assert torch.equal(params[3].detach(), idle) and params[3] not in opt.state


def test_sgd_flags_nonfinite_and_refuses_what_it_cannot_run():
    p = torch.tensor([1.0, 3e38], requires_grad=True)
    opt = mt.SGD([p], lr=1.0)
    p.grad = torch.tensor([0.5, -3e38])
    assert opt.step(closure=lambda: torch.tensor(7.0)).item() == 7.0
    assert opt.nonfinite is True and torch.isinf(p[1]) and p[0].item() == 0.5
    p.data = torch.tensor([1.0, 2.0])  # a fresh tensor: its own (new) state
    opt.state.clear()
    p.grad = torch.tensor([1.0, 1.0])
    opt.step()
    assert opt.nonfinite is False
    for bad, kw in ((torch.zeros(2, dtype=torch.float64, requires_grad=True), {}),
                    (torch.zeros(4, 4).t().requires_grad_(), {})):
        o = mt.SGD([bad], lr=0.1, **kw)
        bad.grad = torch.zeros_like(bad)
        with pytest.raises(TypeError) as e:
            o.step()
        assert str(e.value).startswith("mantis: SGD:") and "\n" not in str(e.value)
    for kw in ({"lr": -1.0}, {"lr": 0.1, "momentum": float("nan")}, {"lr": 0.1, "weight_decay": True}):
        with pytest.raises(ValueError):
            mt.SGD([torch.zeros(1, requires_grad=True)], **kw)
