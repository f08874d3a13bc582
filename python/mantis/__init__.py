"""Mantis from Python: multipliers verified against their RTL, in PyTorch.

    import mantis, mantis.torch
    m = mantis.Multiplier.from_verilog("rtl/mul_mbm.v")    # swept, verified, cached
    mantis.torch.approximate(model, mul=m)                 # every Linear and Conv2d
    ...train or evaluate as usual...
    mantis.torch.restore(model)

A thin layer over libmantis.so (ctypes, include/mantis/nn_front.h); the
library does the arithmetic. See docs/python.md.
"""
from . import _lib
from ._lib import MantisError
from .multiplier import Multiplier, get_num_threads, set_num_threads

__all__ = ["Multiplier", "MantisError", "set_num_threads", "get_num_threads", "library_path", "gemm_isa",
           "built_with_cuda"]
__version__ = "0.1.0"

library_path = _lib.path


def gemm_isa():
    """The SIMD family of the library's GEMM kernels: avx512, avx2 or scalar."""
    return _lib.mts_gemm_isa().decode()


def built_with_cuda():
    """True when libmantis was built with the CUDA providers (gpu/)."""
    return bool(_lib.mts_gpu_built())
