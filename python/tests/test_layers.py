"""Each layer's forward pass and both gradients equal the naive reference
mts_gemm_ref (Multiplier.mm(ref=True)) bit for bit, in the operand order,
rounding and summation order of `mantis train` (docs/training.md, GEMM
mapping), on seeded ragged shapes with special values."""
import pytest
import torch
import torch.nn.functional as F

import mantis
import mantis.torch as mt
from conftest import assert_bits, blocked_sum, operands, run_linear


def multipliers(asym):
    """(name, forward, backward, test) sets the layers are checked with."""
    fmaq = mantis.Multiplier("mbm", man_bits=7).with_acc("M4E3", chunk=4)
    return [
        ("asym-lut", asym, asym, asym),  # non-commutative: operand order shows
        ("mbm-fmaq", fmaq, fmaq.without_acc(), fmaq),
        ("fp32", mantis.Multiplier("fp32"), mantis.Multiplier("fp32"), mantis.Multiplier("fp32")),
        ("asym-fwd-bf16-bwd", asym, mantis.Multiplier("bf16"), asym),
    ]


def int_mul():
    """A non-commutative 4-bit integer table: a * (b | 1)."""
    t = [a * (b | 1) for a in range(16) for b in range(16)]
    return mantis.Multiplier.from_int_table(t, bits=4, name="asym4")


# ----------------------------------------------------------------- Linear


def ref_linear(x, w, b, dy, fwd, bwd):
    y = fwd.mm(x, w.t(), ref=True)  # activation, weight; sum over in
    if b is not None:
        y = y + b
    dx = bwd.mm(dy, w, ref=True)  # gradient, weight; sum over out
    dw = bwd.mm(dy.t(), x, ref=True)  # gradient, activation; sum over the batch
    db = torch.stack([blocked_sum(dy[:, o]) for o in range(dy.shape[1])])
    return y, dx, dw, db


@pytest.mark.parametrize("shape", [(7, 13, 5), (1, 1, 1), (33, 70, 17), (64, 3, 100)])
@pytest.mark.parametrize("special", [0.0, 0.15])
def test_linear_equals_reference(asym, gen, shape, special):
    N, fin, out = shape
    for name, fwd, bwd, _ in multipliers(asym):
        x, w = operands(gen, N, fin, special=special), operands(gen, out, fin, special=special)
        b, dy = operands(gen, out, special=special), operands(gen, N, out, special=special)
        got = run_linear(lambda x, w, b: mt.linear(x, w, b, mul=fwd, mul_bwd=bwd), x, w, b, dy)
        want = ref_linear(x, w, b, dy, fwd, bwd)
        for g, r, what in zip(got, want, ("y", "dx", "dw", "db")):
            assert_bits(g, r, "linear %s %s %s" % (name, shape, what), [("x", x), ("w", w), ("dy", dy)])


def test_linear_module_batch_dims_and_no_bias(asym, gen):
    lin = mt.Linear(9, 4, bias=False, mul=asym)
    x = operands(gen, 2, 3, 9, special=0.1)
    dy = operands(gen, 2, 3, 4)
    got = run_linear(lambda x, w, b: lin(x), x, lin.weight.detach(), None, dy)
    # the module's own weight got the gradient
    want = ref_linear(x.reshape(6, 9), lin.weight.detach(), None, dy.reshape(6, 4), asym, asym)
    assert_bits(got[0].reshape(6, 4), want[0], "y")
    assert_bits(got[1].reshape(6, 9), want[1], "dx")
    assert_bits(lin.weight.grad, want[2], "dw")


def test_linear_ste_masks_overflowing_terms(gen):
    """With an FMAq forward and a non-identity STE the backward GEMMs see
    masked products (mts_dense_backward): no overflow gives Identity's
    gradients, accumulator overflow changes them."""
    fmaq = mantis.Multiplier("bf16").with_acc("M4E3", chunk=4)
    x, w, dy = operands(gen, 4, 8) * 0.1, operands(gen, 3, 8) * 0.1, operands(gen, 4, 3)
    ident = run_linear(lambda x, w, b: mt.linear(x, w, b, mul=fmaq), x, w, None, dy)
    small = run_linear(lambda x, w, b: mt.linear(x, w, b, mul=fmaq, ste="imm-of"), x, w, None, dy)
    for g, r, what in zip(small[1:3], ident[1:3], ("dx", "dw")):
        assert_bits(g, r, "imm-of without overflow: %s" % what)
    big = x * 1e4  # products far above M4E3's range: every accumulation overflows
    a = run_linear(lambda x, w, b: mt.linear(x, w, b, mul=fmaq), big, w, None, dy)
    o = run_linear(lambda x, w, b: mt.linear(x, w, b, mul=fmaq, ste="imm-of"), big, w, None, dy)
    assert not torch.equal(a[2], o[2])
    assert (o[2] == 0).sum() > (a[2] == 0).sum()


# ----------------------------------------------------------------- Conv2d


def ref_conv(x, w, b, dy, stride, padding, dilation, groups, fwd, bwd):
    """im2col (F.unfold: taps in (c, ky, kx) order), the three GEMMs through
    mts_gemm_ref per group, col2im adding taps in (ky, kx) order from +0."""
    N, cin, H, W = x.shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    og = cout // groups
    oh, ow = dy.shape[2], dy.shape[3]
    L, K = oh * ow, cg * kh * kw
    ys, dxs, dws = [], [], []
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og].reshape(og, K)
        col = F.unfold(xg, (kh, kw), dilation=(dh, dw), padding=(ph, pw), stride=(sh, sw))  # [N, K, L]
        A = col.permute(0, 2, 1).reshape(N * L, K)  # rows (n, p)
        ys.append(fwd.mm(A, wg.t(), ref=True).reshape(N, L, og).permute(0, 2, 1))
        dyg = dy[:, g * og:(g + 1) * og].permute(1, 0, 2, 3).reshape(og, N * L)
        dws.append(bwd.mm(dyg, A, ref=True).reshape(og, cg, kh, kw))
        dcol = bwd.mm(dyg.t(), wg, ref=True).reshape(N, oh, ow, cg, kh, kw)
        acc = torch.zeros(N, cg, H + 2 * ph, W + 2 * pw)
        rows = torch.arange(oh) * sh
        cols = torch.arange(ow) * sw
        for ky in range(kh):
            for kx in range(kw):
                r = (rows + ky * dh)[:, None]
                c = (cols + kx * dw)[None, :]
                acc[:, :, r, c] += dcol[:, :, :, :, ky, kx].permute(0, 3, 1, 2)
        dxs.append(acc[:, :, ph:ph + H, pw:pw + W])
    y = torch.cat(ys, 1).reshape(N, cout, oh, ow) + (b.reshape(1, cout, 1, 1) if b is not None else 0.0)
    db = torch.stack([blocked_sum(dy[:, c].reshape(-1)) for c in range(cout)])
    return y, torch.cat(dxs, 1), torch.cat(dws, 0), db


CONVS = [  # N, cin, H, W, cout, kernel, stride, padding, dilation, groups
    (3, 4, 9, 7, 6, (3, 2), (2, 1), (1, 2), (1, 2), 2),  # everything general
    (2, 3, 8, 8, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # mts_conv2d_* (the fast op)
    (5, 6, 7, 9, 4, (1, 1), (2, 2), (0, 0), (1, 1), 1),  # 1x1 stride 2 (ResNet's shortcut)
    (2, 6, 6, 5, 6, (3, 3), (1, 1), (2, 2), (2, 2), 6),  # depthwise, dilated
    (1, 1, 5, 4, 1, (5, 4), (1, 1), (0, 0), (1, 1), 1),  # the kernel covers the input
    (13, 2, 28, 28, 3, (5, 5), (1, 1), (2, 2), (1, 1), 1),  # several sample chunks
]


@pytest.mark.parametrize("geom", CONVS)
@pytest.mark.parametrize("special", [0.0, 0.1])
def test_conv2d_equals_reference(asym, gen, geom, special):
    N, cin, H, W, cout, k, s, p, d, groups = geom
    for name, fwd, bwd, _ in multipliers(asym):
        x = operands(gen, N, cin, H, W, special=special)
        w = operands(gen, cout, cin // groups, *k, special=special)
        b = operands(gen, cout)
        y0 = F.conv2d(x, w, None, s, p, d, groups)  # for the output shape only
        dy = operands(gen, *y0.shape, special=special)
        xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
        y = mt.conv2d(xg, wg, bg, s, p, d, groups, mul=fwd, mul_bwd=bwd)
        y.backward(dy)
        want = ref_conv(x, w, b, dy, s, p, d, groups, fwd, bwd)
        for g, r, what in zip((y, xg.grad, wg.grad, bg.grad), want, ("y", "dx", "dw", "db")):
            assert_bits(g.detach(), r, "conv2d %s %s %s" % (name, geom, what), [("x", x), ("w", w), ("dy", dy)])


def test_conv2d_module_padding_modes_and_threads(asym, gen):
    """padding_mode='reflect' pads first (PyTorch's data movement), then the
    same GEMMs; 1 and 2 threads give the same bits."""
    x = operands(gen, 2, 4, 10, 9, special=0.05)
    conv = mt.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, padding_mode="reflect", mul=asym)
    xp = F.pad(x, (1, 1, 1, 1), mode="reflect")
    w, b = conv.weight.detach(), conv.bias.detach()
    outs = []
    for t in (1, 2):
        mantis.set_num_threads(t)
        outs.append(conv(x).detach())
    mantis.set_num_threads(None)
    assert_bits(outs[0], outs[1], "threads 1 vs 2")
    dy = operands(gen, *outs[0].shape)
    want = ref_conv(xp, w, b, dy, (2, 2), (0, 0), (1, 1), 2, asym, asym)
    assert_bits(outs[0], want[0], "reflect y")


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv2d_same_padding_even_kernel(asym, gen):
    x = operands(gen, 2, 2, 6, 7)
    w = operands(gen, 3, 2, 2, 4)
    y = mt.conv2d(x, w, None, padding="same", mul=asym)
    xp = F.pad(x, (1, 2, 0, 1))
    dy = operands(gen, *y.shape)
    assert y.shape == F.conv2d(x, w, padding="same").shape
    assert_bits(y, ref_conv(xp, w, None, dy, (1, 1), (0, 0), (1, 1), 1, asym, asym)[0], "same y")


# ------------------------------------------------------------ matmul/bmm


def ref_matmul(a, b, dc, fwd, bwd):
    c = torch.stack([fwd.mm(a[i], b[i], ref=True) for i in range(a.shape[0])])
    da = torch.stack([bwd.mm(dc[i], b[i].t(), ref=True) for i in range(a.shape[0])])  # gradient, b
    db = torch.stack([bwd.mm(a[i].t(), dc[i], ref=True) for i in range(a.shape[0])])  # a, gradient
    return c, da, db


@pytest.mark.parametrize("shape", [(3, 5, 7, 4), (1, 1, 1, 1), (8, 16, 16, 16), (2, 33, 3, 9)])
@pytest.mark.parametrize("special", [0.0, 0.1])
def test_bmm_equals_reference(asym, gen, shape, special):
    B, m, k, q = shape
    for name, fwd, bwd, _ in multipliers(asym) + [("int", int_mul(), int_mul(), None)]:
        a, b, dc = operands(gen, B, m, k, special=special), operands(gen, B, k, q, special=special), \
            operands(gen, B, m, q, special=special)
        ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
        c = mt.bmm(ag, bg, mul=fwd, mul_bwd=bwd)
        c.backward(dc)
        for g, r, what in zip((c, ag.grad, bg.grad), ref_matmul(a, b, dc, fwd, bwd), ("c", "da", "db")):
            assert_bits(g.detach(), r, "bmm %s %s %s" % (name, shape, what), [("a", a), ("b", b)])


def test_matmul_transposed_views_and_broadcast(asym, gen):
    """Attention's Q K^T with K a transposed view, 4-D operands, and a 2-D
    right operand (one GEMM over all rows)."""
    q, kk = operands(gen, 2, 3, 5, 4, special=0.1), operands(gen, 2, 3, 5, 4, special=0.1)
    s = mt.matmul(q, kk.transpose(-1, -2), mul=asym)
    want = ref_matmul(q.reshape(6, 5, 4), kk.transpose(-1, -2).reshape(6, 4, 5), torch.zeros(6, 5, 5), asym, asym)[0]
    assert_bits(s.reshape(6, 5, 5), want, "q k^T")
    x, w, dc = operands(gen, 3, 40, 6), operands(gen, 6, 5), operands(gen, 3, 40, 5)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    c = mt.matmul(xg, wg, mul=asym)
    c.backward(dc)
    want = ref_matmul(x.reshape(1, 120, 6), w.unsqueeze(0), dc.reshape(1, 120, 5), asym, asym)
    assert_bits(c.reshape(1, 120, 5), want[0], "x w")
    assert_bits(wg.grad.unsqueeze(0), want[2], "dw summed in the GEMM")
    v = operands(gen, 6)
    assert_bits(mt.matmul(x, v, mul=asym), torch.stack([asym.mm(x[i], v[:, None], ref=True)[:, 0] for i in range(3)]),
                "matrix x vector")


def test_mm_transposed_operands_equal_reference(asym, gen):
    for m_ in (asym, mantis.Multiplier("mbm").with_acc("M7E4", chunk=5)):
        a, b = operands(gen, 9, 17, special=0.1), operands(gen, 23, 17, special=0.1)
        assert_bits(m_.mm(a, b.t()), m_.mm(a.contiguous(), b.t().contiguous(), ref=True), "a b^T")
        at = operands(gen, 17, 9)
        assert_bits(m_.mm(at.t(), b.t()), m_.mm(at.t().contiguous(), b.t().contiguous(), ref=True), "a^T b^T")


def test_products_are_the_gemms(asym, gen):
    """Multiplier(a, b) gives what a 1x1x1 GEMM gives, in the caller's order."""
    a, b = operands(gen, 200, special=0.2), operands(gen, 200, special=0.2)
    p = asym(a, b)
    g = torch.stack([asym.mm(a[i].reshape(1, 1), b[i].reshape(1, 1), ref=True)[0, 0] for i in range(200)])
    assert_bits(p + 0.0, g, "products")  # a GEMM's sum starts at +0: a -0 product stores +0
    assert not torch.equal(asym(a, b), asym(b, a))


# ---------------------------------------------------- train / eval roles


def test_modules_use_test_multiplier_in_eval(asym, gen):
    bf16 = mantis.Multiplier("bf16")
    lin = mt.Linear(8, 4, mul=asym, mul_test=bf16)
    x = operands(gen, 3, 8)
    w, b = lin.weight.detach(), lin.bias.detach()
    assert_bits(lin(x).detach(), asym.mm(x, w.t(), ref=True) + b, "train: mul")
    lin.eval()
    assert_bits(lin(x).detach(), bf16.mm(x, w.t(), ref=True) + b, "eval: mul_test")
    mm = mt.MatMul()
    a, c = operands(gen, 2, 3, 4), operands(gen, 2, 4, 5)
    assert torch.equal(mm(a, c), torch.matmul(a, c))
    mm.set_multipliers(asym)
    assert_bits(mm(a, c), ref_matmul(a, c, torch.zeros(2, 3, 5), asym, asym)[0], "MatMul")


@pytest.mark.parametrize("geom", CONVS)
def test_fp32_layers_agree_with_pytorch_numerically(gen, geom):
    """With native FP32 products the layers are PyTorch's up to summation
    order: an independent check of the geometry (padding, stride, dilation,
    groups) and of which gradient goes where."""
    fp32 = mantis.Multiplier("fp32")
    N, cin, H, W, cout, k, s, p, d, groups = geom
    x, w, b = operands(gen, N, cin, H, W), operands(gen, cout, cin // groups, *k), operands(gen, cout)
    grads, dy = [], None
    for fn in (lambda x, w, b: mt.conv2d(x, w, b, s, p, d, groups, mul=fp32),
               lambda x, w, b: F.conv2d(x, w, b, s, p, d, groups)):
        xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
        y = fn(xg, wg, bg)
        dy = operands(gen, *y.shape) if dy is None else dy
        y.backward(dy)
        grads.append((y.detach(), xg.grad, wg.grad, bg.grad))
    for g, r, what in zip(grads[0], grads[1], ("y", "dx", "dw", "db")):
        tol = 1e-5 * max(1.0, float(r.abs().max())) * 10
        assert torch.allclose(g, r, rtol=1e-4, atol=tol), "conv2d %s %s: %g" % (geom, what, (g - r).abs().max())
    a, c = operands(gen, 3, 5, 7), operands(gen, 3, 7, 4)
    ag, cg = a.clone().requires_grad_(), c.clone().requires_grad_()
    mt.matmul(ag, cg, mul=fp32).sum().backward()
    assert torch.allclose(ag.grad, torch.ones(3, 5, 4) @ c.transpose(1, 2), atol=1e-5)
    assert torch.allclose(cg.grad, a.transpose(1, 2) @ torch.ones(3, 5, 4), atol=1e-5)
