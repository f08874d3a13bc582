"""mantis.torch: PyTorch layers whose every product goes through a Mantis
multiplier (mts_gemm), forward and backward, bit for bit as `mantis train`.

Autograd functions: linear, conv2d, matmul, bmm. Modules: Linear, Conv2d
(subclasses of torch.nn's, same parameters and state_dict keys), MatMul.
approximate(model, mul=..., layers={pattern: mul}, exclude=[...]) swaps a
model's Linear and Conv2d layers in place; restore(model) swaps them back.
With library_ops=True it also runs nn.ReLU and nn.MaxPool2d through the
library's own ops (ReLU, MaxPool2d here: `mantis train`'s, faster on a CPU
than PyTorch 1.13's; no multiplier involved). SGD is `mantis train`'s
optimizer as a torch.optim.Optimizer (one library call per step).

Each layer has three multipliers, as `mantis train` (docs/training.md):
mul (the forward pass in training), mul_bwd (both backward GEMMs; default:
mul without FMAq) and mul_test (the forward pass in eval mode; default:
mul). The GEMMs are the library's layer ops (mts_dense_*, mts_conv2d_* /
mts_convg_*, mts_matmul_*): the same operand order, operand rounding, FMAq
STE and summation order. Everything between the GEMMs (reshapes, padding,
activations, losses, the optimizer) is PyTorch's own unless the model uses
the library ops above. See docs/python.md.
"""
import ctypes

import torch
import torch.nn.utils.parametrize
from torch import nn
from torch.autograd.function import once_differentiable

from . import _lib
from .multiplier import get_num_threads, resolve

__all__ = ["linear", "conv2d", "matmul", "bmm", "Linear", "Conv2d", "MatMul", "ReLU", "MaxPool2d", "SGD", "approximate",
           "restore", "layer_names"]

# ------------------------------------------------------------ checking


def _check_tensor(t, op, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("mantis: %s: %s must be a tensor, not %s" % (op, what, type(t).__name__))
    if t.layout != torch.strided:
        raise TypeError("mantis: %s: %s is a %s tensor; only dense (strided) tensors are supported"
                        % (op, what, str(t.layout).replace("torch.", "")))
    if t.dtype != torch.float32:
        raise TypeError("mantis: %s: %s is %s; approximate layers compute in float32 (convert with .float())"
                        % (op, what, str(t.dtype).replace("torch.", "")))


def _device(op, tensors, fwd, bwd):
    """0 (the CPU) or the CUDA device code; errors for anything else."""
    if all(t is None or t.is_cpu for t in tensors):  # the common case, without building device names
        return 0
    devs = sorted({str(t.device) for t in tensors if t is not None})
    if len(devs) > 1:
        raise ValueError("mantis: %s: tensors on different devices (%s)" % (op, ", ".join(devs)))
    dev = tensors[0].device
    if dev.type == "cpu":
        return 0
    if dev.type == "cuda":
        err = _lib.err_buf()
        _lib.check(_lib.device_check(_lib.GPU_DEVICE_CUDA, fwd._h, bwd._h if bwd is not None else None, err), err)
        return _lib.GPU_DEVICE_CUDA
    raise TypeError("mantis: %s: tensors on %s are not supported (cpu, or cuda through the library's GPU provider)"
                    % (op, dev))


def _gemm_operand(t):
    """(matrix, transposed, leading dimension) of a 2-D tensor for mts_gemm:
    row-major as it is, a transposed view as a transposed operand, else a
    contiguous copy."""
    r, c = t.shape
    if r > 1 and c > 1:
        if t.stride(1) == 1 and t.stride(0) >= c:
            return t, 0, t.stride(0)
        if t.stride(0) == 1 and t.stride(1) >= r:
            return t, 1, t.stride(1)
    t = t.contiguous()
    return t, 0, max(1, c)


def _ptr(t):
    return None if t is None else t.data_ptr()


_ste_codes = {}


def _ste_code(ste):
    if ste not in _ste_codes:
        code = ctypes.c_int()
        err = _lib.err_buf()
        _lib.check(_lib.mts_ste_parse(_lib.cstr(ste), ctypes.byref(code), err), err)
        _ste_codes[ste] = code.value
    return _ste_codes[ste]


_INT_BWD = {"ste": 0, "table": 1, "approx": 2}  # mts_int_bwd (nn_ops.h)


def _int_bwd_code(name):
    if not isinstance(name, str) or name not in _INT_BWD:
        raise ValueError("mantis: int_backward %r: expected ste, table or approx (mantis train --int-backward)"
                         % (name,))
    return _INT_BWD[name]


class _Muls:
    """A layer's three multipliers, STE and integer backward, resolved once."""

    def __init__(self, mul, mul_bwd=None, mul_test=None, ste="identity", int_backward="ste"):
        self.fwd = resolve(mul, "mul")
        if self.fwd is None:
            raise ValueError("mantis: a layer needs a multiplier (mul=...)")
        self.bwd = resolve(mul_bwd, "mul_bwd") or self.fwd.without_acc()
        self.test = resolve(mul_test, "mul_test") or self.fwd
        if not isinstance(ste, str):
            raise TypeError("mantis: ste must be a string (identity, rec-of, imm-of, imm-diff)")
        self.ste_name = ste
        self.ste = _ste_code(ste)
        self.int_bwd_name = int_backward
        self.int_bwd = _int_bwd_code(int_backward)
        self.fwd_int, self.test_int = self.fwd.kind == "int", self.test.kind == "int"

    def pick(self, training):
        return (self.fwd if training else self.test), self.bwd, self.ste

    def qat(self, module, training):
        """The quantization-aware state of a Linear or Conv2d call (_QAT),
        or None when neither the training nor the test multiplier is an
        integer table."""
        if not (self.fwd_int or self.test_int):
            return None
        return _QAT(module._buffers.get("mantis_qat_range"), training, self.int_bwd)

    def __repr__(self):
        s = "mul=%s" % self.fwd.desc
        if self.bwd is not self.fwd:
            s += ", mul_bwd=%s" % self.bwd.desc
        if self.test is not self.fwd:
            s += ", mul_test=%s" % self.test.desc
        if self.ste_name != "identity":
            s += ", ste=%s" % self.ste_name
        if (self.fwd_int or self.test_int) and self.int_bwd_name != "ste":
            s += ", int_backward=%s" % self.int_bwd_name
        return s


class _QAT:
    """How a dense or conv call with an integer table runs, as `mantis train`
    runs it (mts_front_qdense_* / qconv2d_*): st, the layer's range observer
    (3 floats, the module's buffer mantis_qat_range; None for the functional
    form: each call's own range), moved by a training forward; int_bwd the
    backward rule."""

    def __init__(self, st, train, int_bwd):
        self.st, self.train, self.int_bwd = st, train, int_bwd


def _qat_buffer(module, muls):
    """Gives a module whose multipliers include an integer table its range
    observer (a buffer, so state_dict() carries it as a checkpoint carries
    `mantis train`'s). A state_dict without it (the plain model's) still
    loads: the observer then starts unobserved."""
    if (muls.fwd_int or muls.test_int) and "mantis_qat_range" not in module._buffers:
        module.register_buffer("mantis_qat_range", torch.zeros(3, dtype=torch.float32))
        module._register_load_state_dict_pre_hook(_qat_range_default)


def _qat_range_default(state_dict, prefix, *_):
    state_dict.setdefault(prefix + "mantis_qat_range", torch.zeros(3, dtype=torch.float32))


def _host(t):
    return None if t is None or t.device.type == "cpu" else t.cpu()


# -------------------------------------------------- autograd functions


def _qat_runs(q, fwd):
    """Whether this call is quantization-aware (its multiplier is the integer table)."""
    return q is not None and fwd.kind == "int"


def _qat_observe(q, fwd, x):
    """A training call whose forward is not the integer table but whose test
    multiplier is: the observer still learns the range, as `mantis train`'s."""
    if q is not None and q.train and q.st is not None and not _qat_runs(q, fwd) and x.numel():
        _lib.qat_observe(q.st.data_ptr(), x.data_ptr(), x.numel())


def _qat_snapshot(q):
    """The observer as this forward left it: what its backward quantizes with
    (`mantis train` reads it after the step's forward, unchanged)."""
    return None if q.st is None else q.st.detach().clone()


class _LinearFn(torch.autograd.Function):
    """y[N][out] = x[N][in] w[out][in]^T + b: mts_dense_forward / backward."""

    @staticmethod
    def forward(ctx, x, w, b, fwd, bwd, ste, q, device):
        N, fin = x.shape
        out = w.shape[0]
        threads = get_num_threads()
        y = torch.empty(N, out, dtype=torch.float32)
        _qat_observe(q, fwd, x)
        st = None  # the observer as this forward leaves it, for the backward (quantization-aware calls)
        if N:
            err = _lib.err_buf()
            if _qat_runs(q, fwd):
                _lib.check(_lib.qdense_forward(fwd._h, threads, device, _ptr(q.st), int(q.train), N, fin, out,
                                               x.data_ptr(), w.data_ptr(), _ptr(b), y.data_ptr(), err), err)
                st = _qat_snapshot(q)
            else:
                _lib.check(_lib.dense_forward(fwd._h, threads, device, N, fin, out, x.data_ptr(), w.data_ptr(),
                                              _ptr(b), y.data_ptr(), err), err)
        ctx.save_for_backward(x, w, b)
        ctx.mantis = (fwd, bwd, ste, device, q if _qat_runs(q, fwd) else None, st)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, w, b = ctx.saved_tensors
        fwd, bwd, ste, device, q, st = ctx.mantis
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = torch.empty_like(x) if nx else None
        dw = torch.empty_like(w) if nw else None
        db = torch.empty_like(b) if nb and b is not None else None
        N, fin = x.shape
        if N == 0:  # no products: the sums of nothing
            return dx, dw.zero_() if dw is not None else None, db.zero_() if db is not None else None, None, None, \
                None, None, None
        if dx is not None or dw is not None or db is not None:
            dy = dy.contiguous()
            err = _lib.err_buf()
            if q is not None:
                _lib.check(_lib.qdense_backward(fwd._h, bwd._h, q.int_bwd, get_num_threads(), device, _ptr(st), N,
                                                fin, w.shape[0], x.data_ptr(), w.data_ptr(), dy.data_ptr(), _ptr(dx),
                                                _ptr(dw), _ptr(db), err), err)
            else:
                _lib.check(_lib.dense_backward(fwd._h, bwd._h, ste, get_num_threads(), device, N, fin, w.shape[0],
                                               x.data_ptr(), w.data_ptr(), dy.data_ptr(), _ptr(dx), _ptr(dw),
                                               _ptr(db), err), err)
        return dx, dw, db, None, None, None, None, None


class _Conv2dFn(torch.autograd.Function):
    """mts_front_conv2d_*: mts_conv2d_* or mts_convg_* (same bits)."""

    @staticmethod
    def forward(ctx, x, w, b, geom, fwd, bwd, q, device):
        N, cin, h, wd = x.shape
        cout, _, kh, kw = w.shape
        sh, sw, ph, pw, dh, dw, groups = geom
        g = (cin, h, wd, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups)
        oh, ow = ctypes.c_int(), ctypes.c_int()
        err = _lib.err_buf()
        _lib.check(_lib.conv2d_shape(*g, ctypes.byref(oh), ctypes.byref(ow), err), err)
        y = torch.empty(N, cout, oh.value, ow.value, dtype=torch.float32)
        _qat_observe(q, fwd, x)
        st = None  # as _LinearFn's
        if N:
            if _qat_runs(q, fwd):
                _lib.check(_lib.qconv2d_forward(fwd._h, get_num_threads(), device, _ptr(q.st), int(q.train), N, *g,
                                                x.data_ptr(), w.data_ptr(), _ptr(b), y.data_ptr(), err), err)
                st = _qat_snapshot(q)
            else:
                _lib.check(_lib.conv2d_forward(fwd._h, get_num_threads(), device, N, *g, x.data_ptr(), w.data_ptr(),
                                               _ptr(b), y.data_ptr(), err), err)
        ctx.save_for_backward(x, w, b)
        ctx.mantis = (g, fwd, bwd, device, q if _qat_runs(q, fwd) else None, st)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, w, b = ctx.saved_tensors
        g, fwd, bwd, device, q, st = ctx.mantis
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = torch.empty_like(x) if nx else None
        dw = torch.empty_like(w) if nw else None
        db = torch.empty_like(b) if nb and b is not None else None
        N = x.shape[0]
        if N == 0:
            return dx, dw.zero_() if dw is not None else None, db.zero_() if db is not None else None, None, None, \
                None, None, None
        if dx is not None or dw is not None or db is not None:
            dy = dy.contiguous()
            err = _lib.err_buf()
            if q is not None:
                _lib.check(_lib.qconv2d_backward(fwd._h, bwd._h, q.int_bwd, get_num_threads(), device, _ptr(st), N,
                                                 *g, x.data_ptr(), w.data_ptr(), dy.data_ptr(), _ptr(dx), _ptr(dw),
                                                 _ptr(db), err), err)
            else:
                _lib.check(_lib.conv2d_backward(fwd._h, bwd._h, get_num_threads(), device, N, *g, x.data_ptr(),
                                                w.data_ptr(), dy.data_ptr(), _ptr(dx), _ptr(dw), _ptr(db), err), err)
        return dx, dw, db, None, None, None, None, None


class _MatMulFn(torch.autograd.Function):
    """c[B][m][q] = a[B][m][k] b[B][k][q]: mts_matmul_forward / backward."""

    @staticmethod
    def forward(ctx, a, b, fwd, bwd, device):
        B, m, k = a.shape
        q = b.shape[2]
        c = torch.zeros(B, m, q, dtype=torch.float32)
        if B and m and q and k:
            err = _lib.err_buf()
            _lib.check(_lib.matmul_forward(fwd._h, get_num_threads(), device, B, m, k, q, a.data_ptr(), b.data_ptr(),
                                           c.data_ptr(), err), err)
        ctx.save_for_backward(a, b)
        ctx.mantis = (bwd, device)
        return c

    @staticmethod
    @once_differentiable
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        bwd, device = ctx.mantis
        na, nb = ctx.needs_input_grad[:2]
        da = torch.zeros_like(a) if na else None
        db = torch.zeros_like(b) if nb else None
        B, m, k = a.shape
        q = b.shape[2]
        if (da is not None or db is not None) and B and m and q and k:
            dc = dc.contiguous()
            err = _lib.err_buf()
            _lib.check(_lib.matmul_backward(bwd._h, get_num_threads(), device, B, m, k, q, a.data_ptr(), b.data_ptr(),
                                            dc.data_ptr(), _ptr(da), _ptr(db), err), err)
        return da, db, None, None, None


def _apply(fn, op, tensors, *rest, fwd, bwd):
    """Runs fn on CPU tensors: CUDA tensors go to the host, the library runs
    the GEMMs (and an integer table's quantization-aware layers) on the GPU
    (device code) and the result comes back. A range observer on the GPU
    travels the same way: a host copy for the call, written back after it."""
    device = _device(op, tensors, fwd, bwd)
    if device == 0:
        return fn.apply(*tensors, *rest, device)
    dev = tensors[0].device
    back = None
    for i, q in enumerate(rest):
        if isinstance(q, _QAT) and q.st is not None and q.st.device.type != "cpu":
            host = _QAT(q.st.detach().cpu(), q.train, q.int_bwd)
            rest = rest[:i] + (host,) + rest[i + 1:]
            back = (q.st, host.st)
    y = fn.apply(*[_host(t) for t in tensors], *rest, device)
    if back is not None:
        with torch.no_grad():
            back[0].copy_(back[1])
    return y.to(dev)


class _ReLUFn(torch.autograd.Function):
    """mts_front_relu_*: mantis train's ReLU (x > 0 ? x : +0)."""

    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        _lib.relu_forward(get_num_threads(), x.numel(), x.data_ptr(), y.data_ptr())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(y)
        _lib.relu_backward(get_num_threads(), y.numel(), y.data_ptr(), dy.data_ptr(), dx.data_ptr())
        return dx


class _MaxPool2dFn(torch.autograd.Function):
    """mts_front_maxpool_*: k x k windows at stride s, no padding."""

    @staticmethod
    def forward(ctx, x, k, s):
        N, C, H, W = x.shape
        oh, ow = (H - k) // s + 1, (W - k) // s + 1
        y = torch.empty(N, C, oh, ow, dtype=torch.float32)
        idx = torch.empty(N, C, oh, ow, dtype=torch.int32)
        err = _lib.err_buf()
        _lib.check(_lib.maxpool_forward(N, C, H, W, k, s, x.data_ptr(), y.data_ptr(), idx.data_ptr(), err), err)
        ctx.save_for_backward(idx)
        ctx.mantis = (N, C, H, W, k, s)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        (idx,) = ctx.saved_tensors
        N, C, H, W, k, s = ctx.mantis
        dy = dy.contiguous()
        dx = torch.empty(N, C, H, W, dtype=torch.float32)
        err = _lib.err_buf()
        _lib.check(_lib.maxpool_backward(N, C, H, W, k, s, dy.data_ptr(), idx.data_ptr(), dx.data_ptr(), err), err)
        return dx, None, None


def _library_op_takes(x):
    """The library's exact ops take float32 tensors on the CPU; anything else
    (CUDA tensors, other dtypes) runs PyTorch's own op, which gives the same
    values (no multiplier is involved)."""
    return x.device.type == "cpu" and x.dtype == torch.float32 and x.layout == torch.strided


# --------------------------------------------------------- functional


def _muls_of(mul, mul_bwd):
    fwd = resolve(mul, "mul")
    if fwd is None:
        raise ValueError("mantis: give a multiplier (mul=...)")
    return fwd, resolve(mul_bwd, "mul_bwd") or fwd.without_acc()


def _functional_qat(fwd, int_backward):
    """The functional form's quantization-aware state: no observer (each
    call quantizes the activations with their own range)."""
    code = _int_bwd_code(int_backward)
    return _QAT(None, False, code) if fwd.kind == "int" else None


def linear(input, weight, bias=None, *, mul, mul_bwd=None, ste="identity", int_backward="ste"):
    """torch.nn.functional.linear with every product through mul (backward
    GEMMs through mul_bwd, default mul without FMAq; ste: the FMAq STE of
    mts_dense_backward: identity, rec-of, imm-of, imm-diff). An integer
    table runs quantization-aware as `mantis train` does (the activations
    with this call's own range; int_backward: ste, table or approx)."""
    fwd, bwd = _muls_of(mul, mul_bwd)
    return _linear(input, weight, bias, fwd, bwd, _ste_code(ste), _functional_qat(fwd, int_backward))


def _linear(x, w, b, fwd, bwd, ste, q=None):
    _check_tensor(x, "linear", "input")
    _check_tensor(w, "linear", "weight")
    if b is not None:
        _check_tensor(b, "linear", "bias")
    if w.dim() != 2 or x.dim() < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError("mantis: linear: input %s does not match weight %s" % (tuple(x.shape), tuple(w.shape)))
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError("mantis: linear: bias %s for %d outputs" % (tuple(b.shape), w.shape[0]))
    if w.shape[1] == 0:
        raise ValueError("mantis: linear: zero input features (no products to approximate)")
    flat = x.dim() == 2  # no reshapes then: each would add a view node to the autograd graph, both ways
    x2 = (x if flat else x.reshape(-1, w.shape[1])).contiguous()
    y = _apply(_LinearFn, "linear", (x2, w.contiguous(), None if b is None else b.contiguous()), fwd, bwd, ste, q,
               fwd=fwd, bwd=bwd)
    return y if flat else y.reshape(*x.shape[:-1], w.shape[0])


def _pair(v, what):
    if isinstance(v, int) and not isinstance(v, bool):
        return v, v
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        return tuple(v)
    raise TypeError("mantis: conv2d: %s %r: expected an int or a pair of ints" % (what, v))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, mul, mul_bwd=None,
           int_backward="ste"):
    """torch.nn.functional.conv2d (zero padding: an int, a pair, 'valid' or
    'same') with every product through mul (backward: mul_bwd). An integer
    table runs quantization-aware as `mantis train` does (as linear())."""
    fwd, bwd = _muls_of(mul, mul_bwd)
    return _conv2d(input, weight, bias, stride, padding, dilation, groups, fwd, bwd,
                   _functional_qat(fwd, int_backward))


def _conv2d(x, w, b, stride, padding, dilation, groups, fwd, bwd, q=None):
    _check_tensor(x, "conv2d", "input")
    _check_tensor(w, "conv2d", "weight")
    if b is not None:
        _check_tensor(b, "conv2d", "bias")
    if w.dim() != 4:
        raise ValueError("mantis: conv2d: weight %s: expected [out, in/groups, kh, kw]" % (tuple(w.shape),))
    unbatched = x.dim() == 3
    if unbatched:
        x = x.unsqueeze(0)
    if x.dim() != 4:
        raise ValueError("mantis: conv2d: input %s: expected [N, C, H, W] or [C, H, W]" % (tuple(x.shape),))
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError("mantis: conv2d: groups %r: expected a positive integer" % (groups,))
    if x.shape[1] != w.shape[1] * groups:
        raise ValueError("mantis: conv2d: input has %d channels, weight %s with %d groups expects %d"
                         % (x.shape[1], tuple(w.shape), groups, w.shape[1] * groups))
    if w.shape[0] % groups:
        raise ValueError("mantis: conv2d: %d output channels are not divisible by %d groups" % (w.shape[0], groups))
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError("mantis: conv2d: bias %s for %d output channels" % (tuple(b.shape), w.shape[0]))
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            ph = pw = 0
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError("mantis: conv2d: padding='same' needs stride 1")
            th, tw = dh * (w.shape[2] - 1), dw * (w.shape[3] - 1)
            if th % 2 or tw % 2:  # PyTorch pads the extra row/column at the end: a copy, then no padding
                x = torch.nn.functional.pad(x, (tw // 2, tw - tw // 2, th // 2, th - th // 2))
                ph = pw = 0
            else:
                ph, pw = th // 2, tw // 2
        else:
            raise ValueError("mantis: conv2d: padding %r: expected an int, a pair, 'valid' or 'same'" % (padding,))
    else:
        ph, pw = _pair(padding, "padding")
    y = _apply(_Conv2dFn, "conv2d", (x.contiguous(), w.contiguous(), None if b is None else b.contiguous()),
               (sh, sw, ph, pw, dh, dw, groups), fwd, bwd, q, fwd=fwd, bwd=bwd)
    return y.squeeze(0) if unbatched else y


def matmul(input, other, *, mul, mul_bwd=None):
    """torch.matmul with every product through mul (backward: mul_bwd).
    Batch dimensions broadcast as in torch.matmul; the gradient of a
    broadcast operand is then PyTorch's sum over the broadcast dimensions
    (outside the GEMMs). An N-D input times a 2-D other is one GEMM over all
    rows (as a token dense layer), so its gradient sums in the GEMM."""
    fwd, bwd = _muls_of(mul, mul_bwd)
    return _matmul(input, other, fwd, bwd)


def bmm(input, mat2, *, mul, mul_bwd=None):
    """torch.bmm ([B, m, k] x [B, k, q]) with every product through mul."""
    fwd, bwd = _muls_of(mul, mul_bwd)
    _check_tensor(input, "bmm", "input")
    _check_tensor(mat2, "bmm", "mat2")
    if input.dim() != 3 or mat2.dim() != 3 or input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise ValueError("mantis: bmm: shapes %s and %s: expected [B, m, k] and [B, k, q]"
                         % (tuple(input.shape), tuple(mat2.shape)))
    return _apply(_MatMulFn, "bmm", (input.contiguous(), mat2.contiguous()), fwd, bwd, fwd=fwd, bwd=bwd)


def _matmul(a, b, fwd, bwd):
    _check_tensor(a, "matmul", "input")
    _check_tensor(b, "matmul", "other")
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError("mantis: matmul: both arguments need at least one dimension")
    va, vb = a.dim() == 1, b.dim() == 1
    if va:
        a = a.unsqueeze(0)
    if vb:
        b = b.unsqueeze(1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError("mantis: matmul: shapes %s and %s do not multiply" % (tuple(a.shape), tuple(b.shape)))
    m, k, q = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.dim() == 2:  # [..., m, k] x [k, q]: one GEMM over every row
        lead = a.shape[:-2]
        c = _apply(_MatMulFn, "matmul", (a.reshape(1, -1, k).contiguous(), b.unsqueeze(0).contiguous()), fwd, bwd,
                   fwd=fwd, bwd=bwd).reshape(*lead, m, q)
    else:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a3 = a.expand(*batch, m, k).reshape(-1, m, k).contiguous()
        b3 = b.expand(*batch, k, q).reshape(-1, k, q).contiguous()
        c = _apply(_MatMulFn, "matmul", (a3, b3), fwd, bwd, fwd=fwd, bwd=bwd).reshape(*batch, m, q)
    if va:
        c = c.squeeze(-2)
    if vb:
        c = c.squeeze(-1)
    return c


# ------------------------------------------------------------- modules


class _Approx:
    """What the approximate modules share: their multipliers."""

    def set_multipliers(self, mul, mul_bwd=None, mul_test=None, ste="identity", int_backward="ste"):
        """Sets the layer's forward, backward and test multipliers (defaults
        as `mantis train`: mul_bwd = mul without FMAq, mul_test = mul), the
        FMAq STE and the integer tables' backward (ste, table, approx)."""
        muls = _Muls(mul, mul_bwd, mul_test, ste, int_backward)
        object.__setattr__(self, "_mantis", muls)
        if isinstance(self, (nn.Linear, nn.Conv2d)):
            _qat_buffer(self, muls)
        return self

    @property
    def multipliers(self):
        m = self.__dict__.get("_mantis")
        return None if m is None else {"mul": m.fwd, "mul_bwd": m.bwd, "mul_test": m.test, "ste": m.ste_name,
                                       "int_backward": m.int_bwd_name}


class Linear(_Approx, nn.Linear):
    """nn.Linear whose products go through Mantis multipliers."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, *, mul, mul_bwd=None,
                 mul_test=None, ste="identity", int_backward="ste"):
        nn.Linear.__init__(self, in_features, out_features, bias, device, dtype)
        self.set_multipliers(mul, mul_bwd, mul_test, ste, int_backward)

    def forward(self, input):
        fwd, bwd, ste = self._mantis.pick(self.training)
        return _linear(input, self.weight, self.bias, fwd, bwd, ste, self._mantis.qat(self, self.training))

    def extra_repr(self):
        return nn.Linear.extra_repr(self) + ", " + repr(self._mantis)


class Conv2d(_Approx, nn.Conv2d):
    """nn.Conv2d (groups, stride, padding, dilation, any padding_mode)
    whose products go through Mantis multipliers. A padding_mode other than
    'zeros' pads with torch.nn.functional.pad first, as nn.Conv2d does."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, *, mul, mul_bwd=None, mul_test=None,
                 int_backward="ste"):
        nn.Conv2d.__init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                           padding_mode, device, dtype)
        self.set_multipliers(mul, mul_bwd, mul_test, int_backward=int_backward)

    def forward(self, input):
        fwd, bwd, _ = self._mantis.pick(self.training)
        q = self._mantis.qat(self, self.training)
        if self.padding_mode != "zeros":
            input = torch.nn.functional.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return _conv2d(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups, fwd, bwd, q)
        return _conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups, fwd, bwd,
                       q)

    def extra_repr(self):
        return nn.Conv2d.extra_repr(self) + ", " + repr(self._mantis)


class MatMul(_Approx, nn.Module):
    """torch.matmul as a module, so a model's activation products (attention
    Q K^T and A V) have a name that approximate() can give a multiplier.
    Without a multiplier it is torch.matmul; approximate() or
    set_multipliers() gives it one."""

    def __init__(self, mul=None, mul_bwd=None, mul_test=None):
        nn.Module.__init__(self)
        object.__setattr__(self, "_mantis", None)
        if mul is not None:
            self.set_multipliers(mul, mul_bwd, mul_test)

    def forward(self, input, other):
        if self._mantis is None:
            return torch.matmul(input, other)
        fwd, bwd, _ = self._mantis.pick(self.training)
        return _matmul(input, other, fwd, bwd)

    def extra_repr(self):
        return "exact torch.matmul" if self._mantis is None else repr(self._mantis)


class ReLU(nn.ReLU):
    """nn.ReLU through the library (`mantis train`'s op): the same values
    as PyTorch's but a NaN or -0 input gives +0 where PyTorch keeps it, and
    the output is always a new tensor (inplace=True is not honoured). Tensors
    the library does not take (CUDA, not float32) run PyTorch's ReLU."""

    def forward(self, input):
        if not _library_op_takes(input):
            return nn.ReLU.forward(self, input)
        return _ReLUFn.apply(input.contiguous())


class MaxPool2d(nn.MaxPool2d):
    """nn.MaxPool2d through the library (`mantis train`'s op) for square
    windows and strides without padding, dilation, ceil_mode or
    return_indices (other configurations are not swapped by approximate();
    constructing one here is a ValueError): the same values and gradients
    as PyTorch's (the first maximum in raster order takes the gradient) but
    a NaN is never greater than the running maximum (first in its window it
    is kept, later it is ignored), where PyTorch's maximum is the NaN
    wherever it lies. Tensors the library does not take run PyTorch's op."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        nn.MaxPool2d.__init__(self, kernel_size, stride, padding, dilation, return_indices, ceil_mode)
        if _pool_geom(self) is None:
            raise ValueError("mantis: MaxPool2d(%s): the library pools square windows at a square stride without "
                             "padding, dilation, ceil_mode or return_indices" % nn.MaxPool2d.extra_repr(self))

    def forward(self, input):
        k, s = _pool_geom(self)
        if not _library_op_takes(input) or input.dim() not in (3, 4) or min(input.shape[-2:]) < k:
            return nn.MaxPool2d.forward(self, input)  # PyTorch's op (and its error for a too-small input)
        x = input.contiguous()
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        if x.numel() == 0:
            return nn.MaxPool2d.forward(self, input)
        y = _MaxPool2dFn.apply(x, k, s)
        return y.squeeze(0) if unbatched else y


def _pool_geom(mod):
    """(k, s) when the library's max pooling runs mod's configuration, else None."""
    def one(v):
        if isinstance(v, (tuple, list)):
            return v[0] if len(v) == 2 and v[0] == v[1] else None
        return v
    k, s, p, d = one(mod.kernel_size), one(mod.stride), one(mod.padding), one(mod.dilation)
    if None in (k, s, p, d) or p != 0 or d != 1 or mod.ceil_mode or mod.return_indices or k < 1 or s < 1:
        return None
    return int(k), int(s)


# ------------------------------------------------------------ optimizer


class SGD(torch.optim.Optimizer):
    """SGD with momentum and weight decay by `mantis train`'s own update
    (sim/nn/optim.c, mts_sgd_update), all parameters in one library call
    per step: m = momentum * m + (g + weight_decay * p) (without the decay
    term where a group's weight_decay is 0), then p -= lr * m, each
    operation rounded once. torch.optim.SGD's arithmetic differs in its
    last bits (its first step copies g into the buffer, so a -0 gradient
    stays -0 where m starts at +0 here, and its p += -lr * m may be one
    fused multiply-add); no dampening, nesterov or maximize. Parameters and
    gradients: contiguous float32 CPU tensors (anything else is a TypeError:
    use torch.optim.SGD). After each step, `nonfinite` is True when some
    parameter became inf or NaN (`mantis train` stops there with exit 3)."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        for name, v in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0.0:
                raise ValueError("mantis: SGD: %s %r: expected a number >= 0" % (name, v))
        super().__init__(params, dict(lr=float(lr), momentum=float(momentum), weight_decay=float(weight_decay)))
        self.nonfinite = False

    @staticmethod
    def _check(t, what):
        if t.device.type != "cpu" or t.dtype != torch.float32 or t.layout != torch.strided or not t.is_contiguous():
            raise TypeError("mantis: SGD: a %s is a %s %s %s tensor; mantis.torch.SGD takes contiguous float32 CPU "
                            "tensors (use torch.optim.SGD)" % (what, t.device.type, str(t.dtype).replace("torch.", ""),
                                                               "contiguous" if t.is_contiguous() else "non-contiguous"))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        bad = 0
        for group in self.param_groups:
            ps, gs, bs, ns = [], [], [], []
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                self._check(p, "parameter")
                self._check(g, "gradient")
                if g.shape != p.shape:
                    raise ValueError("mantis: SGD: a gradient of shape %s for a parameter of shape %s"
                                     % (tuple(g.shape), tuple(p.shape)))
                st = self.state[p]
                buf = st.get("momentum_buffer")
                if buf is None:
                    buf = st["momentum_buffer"] = torch.zeros_like(p)
                ps.append(p.data_ptr())
                gs.append(g.data_ptr())
                bs.append(buf.data_ptr())
                ns.append(p.numel())
            if not ps:
                continue
            count, arr = len(ps), ctypes.c_void_p * len(ps)
            bad |= _lib.sgd_step(count, arr(*ps), arr(*gs), arr(*bs), (ctypes.c_size_t * count)(*ns),
                                 int(group["weight_decay"] != 0.0), group["lr"], group["momentum"],
                                 group["weight_decay"])
        self.nonfinite = bool(bad)
        return loss


# ------------------------------------------------- approximate / restore

# Layers that multiply but that mantis.torch cannot run: approximate() refuses
# to leave them exact silently (exclude them explicitly).
_UNSUPPORTED = (nn.Conv1d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d, nn.Bilinear,
                nn.MultiheadAttention, nn.RNNBase, nn.RNNCellBase)


def _kind(mod):
    """'linear', 'conv', 'mantis' (ours), 'unsupported' or None (does not multiply)."""
    if isinstance(mod, (Linear, Conv2d, MatMul)):
        return "mantis"
    if isinstance(mod, nn.modules.lazy.LazyModuleMixin) and mod.has_uninitialized_params():
        return "unsupported"
    if torch.nn.utils.parametrize.is_parametrized(mod):  # its weight is computed: a swap would lose that
        return "unsupported" if isinstance(mod, (nn.Linear, nn.Conv2d)) else None
    if isinstance(mod, nn.Linear):
        return "linear" if type(mod).forward is nn.Linear.forward else "unsupported"
    if isinstance(mod, nn.Conv2d):
        return "conv" if type(mod).forward is nn.Conv2d.forward else "unsupported"
    if isinstance(mod, _UNSUPPORTED):
        return "unsupported"
    return None


def layer_names(model):
    """The names approximate() patterns are matched against: every Linear,
    Conv2d and MatMul module of model, with its kind."""
    return [(name, type(mod).__name__) for name, mod in model.named_modules() if name and _kind(mod)]


def _match(pattern, name):
    return bool(_lib.match(_lib.cstr(pattern), _lib.cstr(name)))


def _swap(orig, cls, muls):
    """A module of class cls sharing orig's parameters, state and hooks."""
    new = cls.__new__(cls)
    new.__dict__.update(orig.__dict__)  # the same _parameters dict: one set of weights
    for k in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_state_dict_hooks",
              "_load_state_dict_pre_hooks", "_modules", "_buffers"):  # (_buffers: a range observer is new's only)
        if k in orig.__dict__:
            new.__dict__[k] = type(orig.__dict__[k])(orig.__dict__[k])
    object.__setattr__(new, "_mantis", muls)
    object.__setattr__(new, "_mantis_original", orig)
    if muls is not None and isinstance(new, (nn.Linear, nn.Conv2d)):
        _qat_buffer(new, muls)
    return new


def _parents(model):
    """{id(module): [(parent, attribute, name), ...]} over every path."""
    out = {}
    for pname, parent in model.named_modules(remove_duplicate=False):
        for attr, child in parent._modules.items():
            if child is not None:
                out.setdefault(id(child), []).append((parent, attr, (pname + "." + attr) if pname else attr))
    return out


def approximate(model, mul=None, layers=None, exclude=(), *, mul_bwd=None, mul_test=None, ste="identity",
                int_backward="ste", library_ops=False):
    """Swaps model's Linear and Conv2d layers (and gives mantis.torch.MatMul
    modules a multiplier) in place, and returns model.

    mul: the multiplier of every such layer (a Multiplier or a name/SPEC
    such as "mbm" or "mbm,acc=M7E4"), with mul_bwd, mul_test and ste (the
    FMAq STE of Linear layers) as in `mantis train`. layers: {pattern: mul}
    rules as --mul-layer: the layers whose names (model.named_modules(),
    e.g. "layer1.0.conv1") match the glob pattern take that multiplier
    (backward: it without FMAq; test: it), the last matching rule wins, and a
    pattern that names no layer is an error. exclude: patterns of modules
    left as they are, with everything inside them.

    A layer that multiplies but cannot be approximated (Conv1d, Conv3d,
    transposed convolutions, Bilinear, MultiheadAttention, RNNs, subclasses
    with their own forward, parametrized layers, uninitialized lazy layers)
    is an error unless
    excluded: nothing is left exact silently. Nothing changes when it
    raises. The new layers share the originals' parameters (optimizers keep
    working); restore(model) puts the originals back.

    library_ops=True also swaps every nn.ReLU and every nn.MaxPool2d that
    the library can run (mantis.torch.ReLU and MaxPool2d: `mantis train`'s
    exact ops, faster than PyTorch 1.13's on a CPU; NaN rules differ, see
    their doc) outside excluded modules; other pooling configurations stay
    PyTorch's."""
    if not isinstance(model, nn.Module):
        raise TypeError("mantis: approximate(): model must be a torch.nn.Module, not %s" % type(model).__name__)
    rules = list((layers or {}).items())
    if isinstance(exclude, str):
        exclude = [exclude]
    for p in [p for p, _ in rules] + list(exclude):
        if not isinstance(p, str) or not p:
            raise TypeError("mantis: approximate(): patterns must be non-empty strings, not %r" % (p,))
    if mul is None and not rules:
        raise ValueError("mantis: approximate(): give mul= (every layer) or layers={pattern: mul}")
    if _kind(model) in ("linear", "conv", "mantis", "unsupported"):
        raise TypeError("mantis: approximate(): the model is itself a %s; approximate() swaps the layers inside a "
                        "model (use mantis.torch.%s directly)" % (type(model).__name__,
                                                                 "Conv2d" if _kind(model) == "conv" else "Linear"))
    default = _Muls(mul, mul_bwd, mul_test, ste, int_backward) if mul is not None else None
    rule_muls = [_Muls(spec, None, None, ste, int_backward) for _, spec in rules]
    used = [False] * len(rules)
    plan, skip = [], []
    for name, mod in model.named_modules():
        if not name or any(name == s or name.startswith(s + ".") for s in skip):
            continue
        if any(_match(p, name) for p in exclude):
            skip.append(name)
            continue
        kind = _kind(mod)
        if kind is None:
            continue
        chosen = default
        for i, (p, _) in enumerate(rules):
            if _match(p, name):
                used[i] = True
                chosen = rule_muls[i]
        if kind == "unsupported":
            skip.append(name)
            if chosen is not None:
                raise TypeError("mantis: approximate(): layer '%s' (%s) multiplies but cannot be approximated "
                                "(mantis.torch runs Linear, Conv2d and MatMul); exclude it with exclude=['%s']"
                                % (name, type(mod).__name__, name))
            continue
        if chosen is not None:
            plan.append((name, mod, kind, chosen))
    for i, (p, _) in enumerate(rules):
        if not used[i]:
            names = [n for n, _ in layer_names(model)]
            raise ValueError("mantis: approximate(): pattern '%s' names no Linear, Conv2d or MatMul layer (layers: "
                             "%s%s)" % (p, ", ".join(names[:8]), ", ..." if len(names) > 8 else ""))
    if library_ops:
        for name, mod in model.named_modules():
            if not name or any(name == s or name.startswith(s + ".") for s in skip):
                continue
            if any(_match(p, name) for p in exclude):
                continue
            if type(mod) is nn.ReLU:
                plan.append((name, mod, "relu", None))
            elif type(mod) is nn.MaxPool2d and _pool_geom(mod) is not None:
                plan.append((name, mod, "maxpool", None))
    parents = _parents(model)
    swap_to = {"linear": Linear, "conv": Conv2d, "relu": ReLU, "maxpool": MaxPool2d}
    for name, mod, kind, muls in plan:
        if kind == "mantis":
            if "_mantis_previous" not in mod.__dict__:
                object.__setattr__(mod, "_mantis_previous", mod.__dict__.get("_mantis"))
            object.__setattr__(mod, "_mantis", muls)
            if isinstance(mod, (nn.Linear, nn.Conv2d)):
                _qat_buffer(mod, muls)
            continue
        new = _swap(mod, swap_to[kind], muls)
        for parent, attr, _ in parents.get(id(mod), []):
            parent._modules[attr] = new
    return model


def restore(model):
    """Puts back the layers approximate() swapped (they share the
    parameters, so training since then is kept) and the multipliers it gave
    existing mantis modules; returns model."""
    if not isinstance(model, nn.Module):
        raise TypeError("mantis: restore(): model must be a torch.nn.Module, not %s" % type(model).__name__)
    for pname, parent in list(model.named_modules(remove_duplicate=False)):
        for attr, child in list(parent._modules.items()):
            orig = None if child is None else child.__dict__.get("_mantis_original")
            if orig is not None:
                orig.train(child.training)
                parent._modules[attr] = orig
    for _, mod in model.named_modules():
        if "_mantis_previous" in mod.__dict__:
            object.__setattr__(mod, "_mantis", mod.__dict__.pop("_mantis_previous"))
    return model
