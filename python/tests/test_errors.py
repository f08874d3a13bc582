"""Bad inputs give one-line errors (the library's status code where the
library decided), never a crash and never a silent exact fallback."""
import os

import pytest
import torch

import mantis
import mantis.torch as mt
from mantis import _lib
from conftest import operands


def one_line(excinfo, *words):
    msg = str(excinfo.value)
    assert "\n" not in msg and msg.startswith("mantis: "), msg
    for w in words:
        assert w in msg, msg


def test_dtype_layout_and_device_are_checked(asym, gen):
    x, w = operands(gen, 3, 4), operands(gen, 2, 4)
    with pytest.raises(TypeError) as e:
        mt.linear(x.double(), w, mul=asym)
    one_line(e, "float64", "float32")
    with pytest.raises(TypeError) as e:
        mt.linear(x.half(), w, mul=asym)
    one_line(e, "float16")
    with pytest.raises(TypeError) as e:
        mt.linear(x, w.to_sparse(), mul=asym)
    one_line(e, "sparse")
    with pytest.raises(TypeError) as e:
        mt.linear(x.to("meta"), w.to("meta"), mul=asym)
    one_line(e, "meta", "not supported")
    with pytest.raises(TypeError) as e:
        mt.conv2d(x.reshape(1, 1, 3, 4).to(torch.int32), w.reshape(2, 1, 2, 2), mul=asym)
    one_line(e, "int32")
    with pytest.raises(TypeError) as e:
        asym(x.double(), x.double())
    one_line(e, "float64")


def test_cuda_without_a_device_says_why():
    m = mantis.Multiplier("mbm")
    err = _lib.err_buf()
    rc = _lib.device_check(_lib.GPU_DEVICE_CUDA, m._h, None, err)
    assert rc == _lib.EUNSUPPORTED
    msg = err.value.decode()
    assert ("no CUDA device" in msg) if mantis.built_with_cuda() else ("built without CUDA" in msg), msg
    with pytest.raises(mantis.MantisError) as e:
        _lib.check(rc, err)
    assert e.value.code == _lib.EUNSUPPORTED and e.value.name == "MTS_EUNSUPPORTED"
    one_line(e)


def test_multiplier_errors_carry_the_library_status(tmp_path):
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier("no-such-model")
    assert e.value.code == _lib.EINVAL
    one_line(e, "no-such-model")
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier.from_lut(tmp_path / "missing.lut")
    assert e.value.code == _lib.EIO
    one_line(e, "missing.lut")
    bad = tmp_path / "bad.lut"
    bad.write_bytes(b"not a lut at all" * 10)
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier.from_lut(bad)
    assert e.value.code == _lib.EFORMAT
    one_line(e, "bad.lut")
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier("mbm").with_acc("M9")
    assert e.value.code == _lib.EINVAL
    one_line(e)
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier("mbm,unknown=3")
    one_line(e, "unknown")
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier("mbm", man_bits=40)
    one_line(e, "man-bits", "40")
    with pytest.raises(ValueError) as e:
        mantis.Multiplier("mbm,acc=M7E4", acc="M4E3")
    one_line(e, "not both")
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier.from_verilog(tmp_path / "missing.v")
    one_line(e)
    t = mantis.Multiplier.from_int_table([a * b for a in range(4) for b in range(4)], bits=2)
    with pytest.raises(mantis.MantisError) as e:
        t.with_acc("M7E4")
    one_line(e, "integer table")
    with pytest.raises(mantis.MantisError) as e:
        t(torch.ones(2), torch.ones(2))
    one_line(e, "integer table")
    with pytest.raises(ValueError) as e:
        mantis.Multiplier.from_int_table([1, 2, 3], bits=2)
    one_line(e, "16")
    with pytest.raises(TypeError) as e:
        mt.linear(torch.ones(2, 2), torch.ones(2, 2), mul=3)
    one_line(e, "Multiplier")
    with pytest.raises(mantis.MantisError) as e:
        mt.Linear(2, 2, mul="mbm", ste="sideways")
    one_line(e, "sideways")


def test_shapes_are_checked(asym, gen):
    with pytest.raises(ValueError) as e:
        mt.linear(operands(gen, 3, 4), operands(gen, 2, 5), mul=asym)
    one_line(e, "does not match")
    with pytest.raises(ValueError) as e:
        mt.conv2d(operands(gen, 1, 4, 5, 5), operands(gen, 6, 3, 3, 3), groups=2, mul=asym)
    one_line(e, "channels")
    with pytest.raises(mantis.MantisError) as e:
        mt.conv2d(operands(gen, 1, 1, 2, 2), operands(gen, 1, 1, 3, 3), mul=asym)
    one_line(e, "larger than padded input")
    with pytest.raises(ValueError) as e:
        mt.bmm(operands(gen, 2, 3, 4), operands(gen, 3, 4, 5), mul=asym)
    one_line(e, "bmm")
    with pytest.raises(ValueError) as e:
        mt.matmul(operands(gen, 3, 4), operands(gen, 5, 2), mul=asym)
    one_line(e, "do not multiply")
    with pytest.raises(TypeError) as e:
        mt.conv2d(operands(gen, 1, 1, 4, 4), operands(gen, 1, 1, 3, 3), stride=(1, 2, 3), mul=asym)
    one_line(e, "stride")


def test_double_backward_is_refused(asym, gen):
    x = operands(gen, 3, 4).requires_grad_()
    w = operands(gen, 2, 4).requires_grad_()
    y = mt.linear(x, w, mul=asym).square().sum()
    g, = torch.autograd.grad(y, x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_library_is_found_and_named():
    assert os.path.exists(mantis.library_path)
    assert mantis.gemm_isa() in ("avx512", "avx2", "scalar")


def test_passive_openmp_when_imported_first():
    """Imported before torch, the package sets OMP_WAIT_POLICY=PASSIVE (as
    mantis train does) unless the environment chose; after torch it cannot."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(mantis.__file__))
    code = "import os, %s; print(os.environ.get('OMP_WAIT_POLICY'))"
    run_env = lambda c, e: subprocess.run([sys.executable, "-c", c], env=e, capture_output=True, text=True,
                                          check=True).stdout.strip()
    run = lambda mods, e: run_env(code % mods, e)
    assert run("mantis, torch", env) == "PASSIVE"
    assert run("torch, mantis", env) == "None"
    assert run("mantis", dict(env, OMP_WAIT_POLICY="ACTIVE")) == "ACTIVE"
    # the brief spin: only beside the PASSIVE the package chose, only when a
    # core is idle (the same rule as the CLI's), never over a user's value
    env.pop("GOMP_SPINCOUNT", None)
    code = "import os, mantis, torch; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    policy, spin = run_env(code, env).split()
    assert policy == "PASSIVE" and spin in ("None", "10000")  # which one: the load average at the time
    code = "import os, mantis; print(os.environ.get('GOMP_SPINCOUNT'))"
    assert run_env(code, dict(env, GOMP_SPINCOUNT="7")) == "7"
    assert run_env(code, dict(env, OMP_WAIT_POLICY="PASSIVE")) == "None"
