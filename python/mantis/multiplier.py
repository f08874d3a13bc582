"""Multipliers: one arithmetic provider of libmantis (docs/gemm.md) each.

A Multiplier is an opened multiplier (a C model swept into a LUT, a LUT
file, an integer table, a Verilog design) plus its accumulation (FP32, or
the quantized FMA of the lower-bit-width accumulator paper). Every product
that a mantis.torch layer forms goes through it, inside mts_gemm.
Opening is done by the library (nn_front.h, which calls the code
`mantis train` and `mantis flow` use); this module only carries the handle.
"""
import ctypes
import os
import threading

from . import _lib

_threads = [None]


def set_num_threads(n):
    """GEMM threads of every mantis call (0: all cores; None: follow
    torch.get_num_threads() at each call, the default). Results do not
    depend on it (docs/gemm.md)."""
    if n is not None and (not isinstance(n, int) or n < 0):
        raise ValueError("mantis: set_num_threads(%r): expected an integer >= 0 or None" % (n,))
    _threads[0] = n


def get_num_threads():
    if _threads[0] is not None:
        return _threads[0]
    try:
        import torch
        return torch.get_num_threads()
    except ImportError:  # the package without torch: all cores
        return 0


def _opt_int(v, what, default=-1):
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("mantis: %s must be an integer, not %s" % (what, type(v).__name__))
    return v


class Multiplier:
    """One multiplier and its accumulation.

    Multiplier("mbm", man_bits=7)       a registered C model at (1,8,7), swept into a LUT
    Multiplier("bf16"), ("fp32"), ("blas")  exact bfloat16 products, native FP32, OpenBLAS
    Multiplier("mbm,acc=M7E4,chunk=16")  a --mul-layer SPEC (MUL[,key=value...])
    Multiplier.from_lut("x.lut")         a Mantis LUT file (float or integer table)
    Multiplier.from_verilog("rtl/mul_mbm.v")   swept, verified and cached (mantis flow's way)
    Multiplier.from_int_table(t, bits=8)  an integer product table (TFApprox style)

    Accumulation: the keyword arguments acc="M7E4", prod=..., acc_bias=...,
    prod_bias=..., chunk=16, underflow=True (FMAq, docs/fmaq.md), or
    m.with_acc(...) / m.without_acc(). Handles are immutable; deep copies
    share them."""

    def __init__(self, name, *, man_bits=None, format=None, acc=None, prod=None, acc_bias=None, prod_bias=None,
                 chunk=None, underflow=True):
        if not isinstance(name, (str, os.PathLike)):
            raise TypeError("mantis: Multiplier(name): expected a multiplier name, SPEC or LUT path, not %s"
                            % type(name).__name__)
        name = os.fspath(name)
        # One grammar for names, LUT paths and SPECs: the library's --mul-layer rule parser
        # (mts_layer_rule_parse) decides what the text is; the keywords are its keys.
        spec = name
        if man_bits is not None:
            spec += ",man-bits=%d" % _opt_int(man_bits, "man_bits")
        if format is not None:
            spec += ",format=%s" % format
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_open_rule(_lib.cstr("*=" + spec), ctypes.byref(h), err), err)
        self._h = h
        self._recipe = ("init", (name,), dict(man_bits=man_bits, format=format))
        if acc is not None or prod is not None:
            if self.fmaq:
                raise ValueError("mantis: Multiplier(%r): give the accumulator in the SPEC or as keywords, not both"
                                 % name)
            self._set_acc(acc, prod, acc_bias, prod_bias, chunk, underflow)
            self._recipe[2].update(acc=acc, prod=prod, acc_bias=acc_bias, prod_bias=prod_bias, chunk=chunk,
                                   underflow=underflow)

    # ---------------------------------------------------------- openers
    @classmethod
    def _adopt(cls, h, recipe):
        m = cls.__new__(cls)
        m._h = h
        m._recipe = recipe
        return m

    @classmethod
    def from_lut(cls, path, **acc):
        """A Mantis LUT file (docs/lut-format.md): a float LUT runs the LUT
        GEMM, an integer table the INT provider."""
        path = os.fspath(path)
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_open(None, _lib.cstr(path), None, -1, ctypes.byref(h), err), err)
        m = cls._adopt(h, ("from_lut", (path,), {}))
        return m.with_acc(**acc) if acc else m

    @classmethod
    def from_verilog(cls, path, *, params=None, kind=None, signed=None, per_product=False, **acc):
        """A Verilog design dropped in (docs/rtl.md). By default the library
        Verilates it (model cached by content hash), sweeps it into a table,
        verifies the design against that table bit for bit and caches the
        verified table under $MANTIS_CACHE/lut (mts_rtl_lut_verified): the
        table is what `mantis flow` trains with. per_product=True multiplies
        every product through the Verilated model instead (`mantis train
        --rtl`: ground truth, slow, one thread). params: {NAME: VALUE}
        parameter overrides; kind: "sig", "float" or "int" when the ports are
        ambiguous; signed: True/False for integer designs (None: declared or
        inferred). .info has the verification facts."""
        path = os.fspath(path)
        params = dict(params or {})
        plist = [_lib.cstr("%s=%s" % (k, v)) for k, v in params.items()]
        arr = (ctypes.c_char_p * max(1, len(plist)))(*plist)
        sign = 0 if signed is None else 1 if signed else 2
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_open_rtl(_lib.cstr(path), arr, len(plist), _lib.cstr(kind), sign, 1 if per_product else 0,
                                     ctypes.byref(h), err), err)
        m = cls._adopt(h, ("from_verilog", (path,), dict(params=params, kind=kind, signed=signed,
                                                         per_product=per_product)))
        return m.with_acc(**acc) if acc else m

    @classmethod
    def from_int_table(cls, table, bits, signed=False, name="table"):
        """An n-bit integer multiplier from its products: table[(a << bits) | b]
        for operand codes a, b (two's complement codes when signed), 4^bits
        entries (a sequence, NumPy array or tensor of integers). Layers then
        quantize each operand tensor affinely per call (docs/gemm.md, INT)."""
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8:
            raise ValueError("mantis: from_int_table: bits %r: expected an integer 1..8" % (bits,))
        vals = table.tolist() if hasattr(table, "tolist") else list(table)
        if len(vals) != 1 << (2 * bits):
            raise ValueError("mantis: from_int_table: %d entries for %d-bit operands (expected %d)"
                             % (len(vals), bits, 1 << (2 * bits)))
        try:
            arr = (ctypes.c_int32 * len(vals))(*[int(v) for v in vals])
        except (OverflowError, TypeError, ValueError):
            raise ValueError("mantis: from_int_table: entries must be 32-bit integers") from None
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_open_int(ctypes.addressof(arr), bits, 1 if signed else 0, _lib.cstr(name),
                                     ctypes.byref(h), err), err)
        return cls._adopt(h, ("from_int_table", (vals, bits, bool(signed), name), {}))

    # ----------------------------------------------------- accumulation
    def _set_acc(self, acc, prod, acc_bias, prod_bias, chunk, underflow):
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_acc(self._h, _lib.cstr(acc), _lib.cstr(prod), _opt_int(acc_bias, "acc_bias"),
                                _opt_int(prod_bias, "prod_bias"), _opt_int(chunk, "chunk", 0),
                                0 if underflow else 1, ctypes.byref(h), err), err)
        old, self._h = self._h, h
        _lib.mul_free(old)

    def with_acc(self, acc=None, prod=None, acc_bias=None, prod_bias=None, chunk=None, underflow=True):
        """The same multiplier with FMAq accumulation (acc "M7E4": 7 mantissa
        and 4 exponent bits; prod the product format, default acc; biases
        default 2^(E-1); chunk default 16; underflow False flushes nothing)."""
        m = Multiplier._adopt(None, self._recipe)
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_acc(self._h, _lib.cstr(acc), _lib.cstr(prod), _opt_int(acc_bias, "acc_bias"),
                                _opt_int(prod_bias, "prod_bias"), _opt_int(chunk, "chunk", 0),
                                0 if underflow else 1, ctypes.byref(h), err), err)
        m._h = h
        m._recipe = ("with_acc", (self._recipe,), dict(acc=acc, prod=prod, acc_bias=acc_bias, prod_bias=prod_bias,
                                                       chunk=chunk, underflow=underflow))
        return m

    def with_acc_design(self, path, *, params=None, chunk=None):
        """The same multiplier accumulating as a Verilog accumulator design
        (ports p, s -> y = Q_acc(p + s), docs/rtl.md) does: the library
        verifies the design against the FMAq model (every code pair up to
        13 + 13 bits, else seeded samples; cached like from_verilog's tables)
        and takes its formats (Q_prod, Q_acc, biases, underflow) as this
        multiplier's FMAq settings, as `mantis flow` trains an accumulator
        design. .info has acc_verify_cases, acc_verify_mismatches,
        acc_verify_report."""
        path = os.fspath(path)
        params = dict(params or {})
        plist = [_lib.cstr("%s=%s" % (k, v)) for k, v in params.items()]
        arr = (ctypes.c_char_p * max(1, len(plist)))(*plist)
        h = ctypes.c_void_p()
        err = _lib.err_buf()
        _lib.check(_lib.mul_acc_rtl(self._h, _lib.cstr(path), arr, len(plist), _opt_int(chunk, "chunk", 0),
                                    ctypes.byref(h), err), err)
        return Multiplier._adopt(h, ("with_acc_design", (self._recipe, path), dict(params=params, chunk=chunk)))

    def without_acc(self):
        """The same multiplier with FP32 accumulation (what `mantis train`
        uses for the backward GEMMs by default)."""
        return self.with_acc() if self.fmaq else self

    # ------------------------------------------------------ inspection
    @property
    def desc(self):
        return _lib.mul_desc(self._h).decode()

    @property
    def info(self):
        """A dict: kind (native, blas, lut, mulop, int), format, fmaq and its
        formats, the table's name, and for Verilog designs the detection,
        cache and verification facts (verify_cases, verify_mismatches,
        verify_report)."""
        import json
        n = _lib.mul_info(self._h, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        _lib.mul_info(self._h, buf, n + 1)
        return json.loads(buf.value.decode())

    @property
    def kind(self):
        k = self.__dict__.get("_kind")  # fixed for a handle: asked once (the layers ask per call)
        if k is None:
            k = self.__dict__["_kind"] = self.info["kind"]
        return k

    @property
    def fmaq(self):
        return self.info["fmaq"]

    def __repr__(self):
        return "Multiplier(%s)" % self.desc

    # --------------------------------------------------------- products
    def __call__(self, a, b):
        """Elementwise products a*b as this multiplier's GEMM forms them
        (operands rounded as mts_gemm rounds them; mts_prov_mul). float32
        tensors of one shape, on the CPU."""
        import torch
        from .torch import _check_tensor
        _check_tensor(a, "Multiplier", "a")
        _check_tensor(b, "Multiplier", "b")
        if a.shape != b.shape or a.device.type != "cpu" or b.device.type != "cpu":
            raise ValueError("mantis: Multiplier(a, b): CPU tensors of one shape, got %s and %s on %s and %s"
                             % (tuple(a.shape), tuple(b.shape), a.device, b.device))
        a = a.contiguous()
        b = b.contiguous()
        y = torch.empty_like(a)
        err = _lib.err_buf()
        _lib.check(_lib.mul_products(self._h, a.numel(), a.data_ptr(), b.data_ptr(), y.data_ptr(), err), err)
        return y

    def mm(self, a, b, *, ref=False):
        """a @ b (2-D float32 CPU tensors) through mts_gemm, or mts_gemm_ref
        (the naive reference) with ref=True. A transposed view is passed as
        a transposed operand (no copy)."""
        import torch
        from .torch import _check_tensor, _gemm_operand
        _check_tensor(a, "mm", "a")
        _check_tensor(b, "mm", "b")
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
            raise ValueError("mantis: mm: shapes %s and %s do not multiply" % (tuple(a.shape), tuple(b.shape)))
        if a.device.type != "cpu" or b.device.type != "cpu":
            raise ValueError("mantis: mm: CPU tensors only")
        (a, ta, lda), (b, tb, ldb) = _gemm_operand(a), _gemm_operand(b)
        m, k, n = a.shape[0], a.shape[1], b.shape[1]  # logical shapes; ta/tb say how they are stored
        c = torch.empty(m, n, dtype=torch.float32)
        if m == 0 or n == 0:
            return c
        if k == 0:
            return c.zero_()
        err = _lib.err_buf()
        _lib.check(_lib.gemm(self._h, 1 if ref else 0, get_num_threads(), 0, ta, tb, m, n, k, a.data_ptr(), lda,
                             b.data_ptr(), ldb, 0.0, c.data_ptr(), n, err), err)
        return c

    # ------------------------------------------------ copies and pickles
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self  # immutable: deep copies of a model share the handle

    def __reduce__(self):
        return (_rebuild, (self._recipe,))

    def __del__(self):
        h = getattr(self, "_h", None)
        if h is not None and _lib is not None and _lib.mul_free is not None:
            _lib.mul_free(h)
            self._h = None


def _rebuild(recipe):
    how, args, kw = recipe
    if how == "init":
        return Multiplier(*args, **kw)
    if how == "with_acc":
        return _rebuild(args[0]).with_acc(**kw)
    if how == "with_acc_design":
        return _rebuild(args[0]).with_acc_design(args[1], **kw)
    return getattr(Multiplier, how)(*args, **kw)


_cache_lock = threading.Lock()
_cache = {}


def resolve(mul, what="mul"):
    """A Multiplier from a Multiplier or a name/SPEC string (opened once per
    string and kept: a C model's sweep then happens once per process)."""
    if mul is None or isinstance(mul, Multiplier):
        return mul
    if isinstance(mul, (str, os.PathLike)):
        key = os.fspath(mul)
        with _cache_lock:
            m = _cache.get(key)
            if m is None:
                m = _cache[key] = Multiplier(key)
            return m
    raise TypeError("mantis: %s must be a Multiplier or a multiplier name/SPEC, not %s" % (what, type(mul).__name__))
