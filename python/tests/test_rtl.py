"""A Verilog design dropped in: Multiplier.from_verilog gives the products
`mantis eval --rtl` gives, its table was verified against the design and is
cached (and rebuilt when the cache entry is damaged)."""
import os
import struct
import subprocess

import pytest
import torch

import mantis
import mantis.torch as mt
from conftest import MANTIS_BIN, ROOT, assert_bits, operands

MBM = os.path.join(ROOT, "rtl", "mul_mbm.v")
INT8 = os.path.join(ROOT, "rtl", "int8_bam.v")


def eval_cli(design, lines):
    if not os.path.exists(MANTIS_BIN):
        pytest.skip("%s not built" % MANTIS_BIN)
    r = subprocess.run([MANTIS_BIN, "eval", "--rtl", design], input="".join(lines), capture_output=True, text=True,
                       check=True)
    return r.stdout.split()


def bf16_operands(gen, n):
    """bf16-representable operands (so `mantis eval`'s truncation and the
    GEMM's rounding agree) with zeros, subnormals, infinities, NaN and
    exponent extremes."""
    x = operands(gen, n, special=0.2, scale=4.0)
    b = x.view(torch.int32) & ~0xFFFF
    return b.view(torch.float32)


def test_verilog_products_equal_mantis_eval(gen):
    m = mantis.Multiplier.from_verilog(MBM)
    a, b = bf16_operands(gen, 4000), bf16_operands(gen, 4000)
    want = eval_cli(MBM, ["%08x %08x\n" % (struct.unpack("<I", struct.pack("<f", float(x)))[0],
                                           struct.unpack("<I", struct.pack("<f", float(y)))[0]) for x, y in zip(a, b)])
    want = torch.tensor([int(w, 16) for w in want], dtype=torch.int64).to(torch.int32).view(torch.float32)
    assert_bits(m(a, b), want, "from_verilog vs mantis eval --rtl", [("a", a), ("b", b)])
    # the same design through the Verilated model per product (mantis train --rtl)
    slow = mantis.Multiplier.from_verilog(MBM, per_product=True)
    assert slow.info["per_product"] and slow.kind == "mulop"
    assert_bits(slow(a[:500], b[:500]), want[:500], "per-product model vs mantis eval --rtl")
    # and the C model the design implements, through its own LUT
    assert_bits(mantis.Multiplier("mbm")(a, b), want, "C model mbm vs the design")


def test_verilog_table_is_verified_and_cached():
    m = mantis.Multiplier.from_verilog(MBM)
    info = m.info
    assert info["rtl_kind"] == "significand" and info["format"] == "bf16"
    assert info["verify_mismatches"] == 0 and info["verify_cases"] > 2 ** 14
    assert os.path.exists(info["lut_path"]) and os.path.exists(info["verify_report"])
    again = mantis.Multiplier.from_verilog(MBM)
    assert again.info["lut_cached"] and again.info["rtl_model_cached"]
    # a damaged entry is not trusted: rebuilt (swept and verified again)
    with open(info["lut_path"], "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x55]))
    rebuilt = mantis.Multiplier.from_verilog(MBM)
    assert not rebuilt.info["lut_cached"] and rebuilt.info["verify_cases"] == info["verify_cases"]
    x = torch.linspace(-3, 3, 64)
    assert_bits(rebuilt(x, x.flip(0)), m(x, x.flip(0)), "rebuilt table")


def test_integer_design_equals_its_eval_table(gen):
    """An integer design: its verified table equals the one `mantis eval
    --rtl` gives pair by pair, so a layer through either is the same."""
    m = mantis.Multiplier.from_verilog(INT8)
    info = m.info
    assert m.kind == "int" and info["verify_mismatches"] == 0
    lo, hi = (-128, 127) if info["int_signed"] else (0, 255)
    pairs = [(a, b) for a in range(lo, hi + 1) for b in range(lo, hi + 1)]
    out = eval_cli(INT8, ["%d %d\n" % p for p in pairs])
    table = [0] * 65536
    for (a, b), y in zip(pairs, out):
        table[((a & 255) << 8) | (b & 255)] = int(y)
    ref = mantis.Multiplier.from_int_table(table, bits=8, signed=info["int_signed"])
    x, w = operands(gen, 9, 20), operands(gen, 7, 20)
    assert_bits(mt.linear(x, w, mul=m), mt.linear(x, w, mul=ref), "int design vs eval table")


def test_accumulator_design_sets_the_accumulation(gen):
    """rtl/fmaq_acc.v (Q_prod M7E4 bias 8, Q_acc M7E4 bias 8) verified
    against FMAq on every code pair: a layer through it equals one through
    the same FMAq settings given by hand, and pickles reopen it."""
    import pickle
    base = mantis.Multiplier("bf16")
    m = base.with_acc_design(os.path.join(ROOT, "rtl", "fmaq_acc.v"))
    info = m.info
    assert info["fmaq"] and info["acc"] == "M7E4b8" and info["prod"] == "M7E4b8"
    assert info["acc_verify_mismatches"] == 0 and info["acc_verify_cases"] >= 2 ** 26
    assert os.path.exists(info["acc_verify_report"])
    by_hand = base.with_acc("M7E4", acc_bias=8, prod_bias=8)
    x, w = operands(gen, 6, 50, special=0.05), operands(gen, 4, 50)
    assert_bits(mt.linear(x, w, mul=m), mt.linear(x, w, mul=by_hand), "fmaq_acc.v vs M7E4")
    assert_bits(pickle.loads(pickle.dumps(m))(x[0], x[1]), m(x[0], x[1]), "pickled")
    with pytest.raises(mantis.MantisError) as e:
        base.with_acc_design(MBM)
    assert e.value.code == mantis._lib.EINVAL and "\n" not in str(e.value)


def test_design_that_is_not_a_table_is_refused():
    bad = os.path.join(ROOT, "tests", "data", "rtl", "exp_dependent.v")
    with pytest.raises(mantis.MantisError) as e:
        mantis.Multiplier.from_verilog(bad)
    assert e.value.code in (mantis._lib.ENOTLUT, mantis._lib.EINVAL) and "\n" not in str(e.value)


MNIST = os.environ.get("MANTIS_MNIST", os.path.join(ROOT, "data", "mnist"))


@pytest.mark.skipif(not os.path.exists(os.path.join(MNIST, "train-images-idx3-ubyte")), reason="MNIST not fetched")
def test_mantis_train_rtl_equals_its_verified_table(tmp_path):
    """`mantis train --rtl` (every product through the Verilated model, the
    library's mts_arith_open_rtl) and `--lut` of the table from_verilog
    verified give the same training: the same loss (to the JSON's 6 decimals)
    and test accuracy. Checks the CLI's opener, which now calls the library's."""
    table = mantis.Multiplier.from_verilog(MBM).info["lut_path"]
    runs = {}
    for how, sel in (("rtl", ["--rtl", MBM]), ("lut", ["--lut", table])):
        js = tmp_path / (how + ".json")
        subprocess.run([MANTIS_BIN, "train", "--model", "lenet300", "--data", "mnist", "--data-dir", MNIST, "--subset",
                        "32", "--test-subset", "32", "--batch", "16", "--epochs", "1", "--threads", "1", "--json",
                        str(js)] + sel, check=True, capture_output=True)
        import json
        e = json.loads(js.read_text())["epochs"][0]
        runs[how] = (e["train_loss"], e["test_acc"])
    assert runs["rtl"] == runs["lut"]
