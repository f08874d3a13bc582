"""Loading libmantis.so and declaring the C functions the package calls.

The package talks to the library through ctypes over the flat interface of
include/mantis/nn_front.h (opaque handles, ints, strings, float pointers), so
no struct layout is mirrored here; the one exception is mts_err, which is a
512-byte message buffer (include/mantis/status.h). ctypes releases the GIL
for the duration of every call.
"""
import ctypes
import ctypes.util as ctypes_util
import os
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))

# status.h codes, one meaning each (decisions are made on these, never on text)
OK, EINVAL, EIO, EFORMAT, ENOMEM, ENOTLUT, ETOOL, EMISMATCH, EUNSUPPORTED = 0, -1, -2, -3, -4, -5, -6, -7, -8
GPU_DEVICE_CUDA = 1  # MTS_GPU_DEVICE_CUDA (gpu.h)


class MantisError(RuntimeError):
    """A library call failed: `code` is the MTS_E* status (status.h), `name`
    its name, and the message is the library's one line."""

    def __init__(self, code, message):
        self.code = code
        self.name = _status_name(code)
        super().__init__(message)


def _candidates():
    env = os.environ.get("MANTIS_LIB")
    if env:
        return [env]
    return [os.path.join(_ROOT, d, "lib", "libmantis.so") for d in ("build", "build-test")]


def _gomp_loaded():
    try:
        with open("/proc/self/maps") as f:
            return "libgomp" in f.read()
    except OSError:
        return True  # cannot tell: change nothing


_BRIEF_SPIN = "10000"  # CLI_OMP_BRIEF_SPIN (flows/cli/cli_util.h)


def _idle_core():
    """cli_idle_core() of flows/cli/cli_util.c, the same rule (it has to be
    decided before libgomp loads, so before the library can be asked): the
    tasks of other processes running now (/proc/loadavg's fourth field less
    this process's running threads) leave a second core of this process's
    CPUs free; the least of five looks 2 ms apart."""
    def others():
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        own = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open("/proc/self/task/%s/stat" % tid) as f:
                    own += f.read().rpartition(")")[2][:2] == " R"
            except OSError:
                pass
        return running - max(own, 1)
    try:
        n = others()
        for _ in range(4):
            if n <= 0:
                break
            time.sleep(0.002)
            n = min(n, others())
        cpus = len(os.sched_getaffinity(0))
    except (OSError, ValueError, IndexError):
        return False
    return cpus > 0 and 0 <= n <= cpus - 2


def _passive_omp():
    """OMP_WAIT_POLICY=PASSIVE unless the environment sets it, as `mantis
    train` does (docs/training.md): spinning OpenMP threads are ruinous on a
    shared machine; plus a brief spin (GOMP_SPINCOUNT) when a core is idle,
    which saves a futex wake-up at each of the many hand-overs between
    PyTorch's ops and ours. libgomp reads both once, when it is loaded, so
    this only works when nothing loaded it yet (mantis imported before
    torch)."""
    if "OMP_WAIT_POLICY" not in os.environ and not _gomp_loaded():
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        if "GOMP_SPINCOUNT" not in os.environ and _idle_core():
            os.environ["GOMP_SPINCOUNT"] = _BRIEF_SPIN


def _load():
    _passive_omp()
    tried = _candidates()
    if not os.environ.get("MANTIS_LIB"):
        found = ctypes_util.find_library("mantis")  # an installed libmantis.so
        if found:
            tried.append(found)
    for path in tried:
        if os.path.exists(path) or not os.path.dirname(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:  # e.g. an ASan build loaded without LD_PRELOAD of libasan
                raise ImportError("mantis: cannot load %s: %s" % (path, str(e).splitlines()[0])) from None
    raise ImportError("mantis: libmantis.so not found (tried %s); build it with `cmake --build build --target "
                      "mantis_shared` or set MANTIS_LIB to its path" % ", ".join(tried))


lib, path = _load()

_P = ctypes.c_void_p
_I = ctypes.c_int
_S = ctypes.c_char_p
_F = ctypes.c_float
_FP = ctypes.c_void_p  # float arrays are passed as addresses (tensor.data_ptr())
_ERR = ctypes.c_char_p  # mts_err: char msg[512]
_Z = ctypes.c_size_t


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


mts_status_name = _fn("mts_status_name", _S, _I)
mts_gemm_isa = _fn("mts_gemm_isa", _S)
mts_gemm_have_blas = _fn("mts_gemm_have_blas", _I)
mts_gpu_built = _fn("mts_gpu_built", _I)
mts_ste_parse = _fn("mts_ste_parse", _I, _S, ctypes.POINTER(_I), _ERR)

mul_open = _fn("mts_front_mul_open", _I, _S, _S, _S, _I, ctypes.POINTER(_P), _ERR)
mul_open_rule = _fn("mts_front_mul_open_rule", _I, _S, ctypes.POINTER(_P), _ERR)
mul_open_int = _fn("mts_front_mul_open_int", _I, _P, _I, _I, _S, ctypes.POINTER(_P), _ERR)
mul_open_rtl = _fn("mts_front_mul_open_rtl", _I, _S, ctypes.POINTER(_S), _I, _S, _I, _I, ctypes.POINTER(_P), _ERR)
mul_acc = _fn("mts_front_mul_acc", _I, _P, _S, _S, _I, _I, _I, _I, ctypes.POINTER(_P), _ERR)
mul_acc_rtl = _fn("mts_front_mul_acc_rtl", _I, _P, _S, ctypes.POINTER(_S), _I, _I, ctypes.POINTER(_P), _ERR)
mul_free = _fn("mts_front_mul_free", None, _P)
mul_desc = _fn("mts_front_mul_desc", _S, _P)
mul_info = _fn("mts_front_mul_info", _Z, _P, ctypes.c_char_p, _Z)
mul_products = _fn("mts_front_mul_products", _I, _P, _Z, _FP, _FP, _FP, _ERR)
gemm = _fn("mts_front_gemm", _I, _P, _I, _I, _I, _I, _I, _I, _I, _I, _FP, _I, _FP, _I, _F, _FP, _I, _ERR)
device_check = _fn("mts_front_device_check", _I, _I, _P, _P, _ERR)
match = _fn("mts_front_match", _I, _S, _S)
dense_forward = _fn("mts_front_dense_forward", _I, _P, _I, _I, _I, _I, _I, _FP, _FP, _FP, _FP, _ERR)
dense_backward = _fn("mts_front_dense_backward", _I, _P, _P, _I, _I, _I, _I, _I, _I, _FP, _FP, _FP, _FP, _FP, _FP,
                     _ERR)
_G = [_I] * 13  # cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups
conv2d_forward = _fn("mts_front_conv2d_forward", _I, _P, _I, _I, _I, *_G, _FP, _FP, _FP, _FP, _ERR)
conv2d_backward = _fn("mts_front_conv2d_backward", _I, _P, _P, _I, _I, _I, *_G, _FP, _FP, _FP, _FP, _FP, _FP, _ERR)
conv2d_shape = _fn("mts_front_conv2d_shape", _I, *_G, ctypes.POINTER(_I), ctypes.POINTER(_I), _ERR)
matmul_forward = _fn("mts_front_matmul_forward", _I, _P, _I, _I, _I, _I, _I, _I, _FP, _FP, _FP, _ERR)
matmul_backward = _fn("mts_front_matmul_backward", _I, _P, _I, _I, _I, _I, _I, _I, _FP, _FP, _FP, _FP, _FP, _ERR)
relu_forward = _fn("mts_front_relu_forward", None, _I, _Z, _FP, _FP)
relu_backward = _fn("mts_front_relu_backward", None, _I, _Z, _FP, _FP, _FP)
maxpool_forward = _fn("mts_front_maxpool_forward", _I, _I, _I, _I, _I, _I, _I, _FP, _FP, _FP, _ERR)
maxpool_backward = _fn("mts_front_maxpool_backward", _I, _I, _I, _I, _I, _I, _I, _FP, _FP, _FP, _ERR)
qdense_forward = _fn("mts_front_qdense_forward", _I, _P, _I, _I, _FP, _I, _I, _I, _I, _FP, _FP, _FP, _FP, _ERR)
qdense_backward = _fn("mts_front_qdense_backward", _I, _P, _P, _I, _I, _I, _FP, _I, _I, _I, _FP, _FP, _FP, _FP, _FP,
                      _FP, _ERR)
qconv2d_forward = _fn("mts_front_qconv2d_forward", _I, _P, _I, _I, _FP, _I, _I, *_G, _FP, _FP, _FP, _FP, _ERR)
qconv2d_backward = _fn("mts_front_qconv2d_backward", _I, _P, _P, _I, _I, _I, _FP, _I, *_G, _FP, _FP, _FP, _FP, _FP,
                       _FP, _ERR)
qat_observe = _fn("mts_front_qat_observe", None, _FP, _FP, _Z)
_PA = ctypes.POINTER(ctypes.c_void_p)  # arrays of float addresses
sgd_step = _fn("mts_front_sgd_step", _I, _I, _PA, _PA, _PA, ctypes.POINTER(_Z), _I, _F, _F, _F)


def _status_name(code):
    s = mts_status_name(code)
    return s.decode() if s else str(code)


def err_buf():
    return ctypes.create_string_buffer(512)


def check(rc, err):
    """Raises MantisError for a failed call (rc != MTS_OK)."""
    if rc != OK:
        raise MantisError(rc, "mantis: " + err.value.decode("utf-8", "replace"))


def cstr(s):
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()
