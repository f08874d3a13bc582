"""LeNet-5 defined in PyTorch and trained through the package (the bf16 MBM
LUT in every multiply) reaches the accuracy `mantis train --model lenet5`
reaches with the same multiplier and recipe. The CI form: the first 4,000
training and 2,000 test images, one epoch, one seed each (the 3-seed full-epoch
comparison is a measurement: docs/python.md). Skipped without MNIST."""
import json
import os
import subprocess
import sys

import pytest

from conftest import MANTIS_BIN, ROOT

DATA = os.environ.get("MANTIS_MNIST", os.path.join(ROOT, "data", "mnist"))
sys.path.insert(0, os.path.join(ROOT, "examples"))


@pytest.mark.skipif(not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte")),
                    reason="MNIST not fetched (build/bin/mantis data fetch mnist)")
def test_lenet5_through_the_package_matches_mantis_train(tmp_path):
    import lenet5_mnist
    args = lenet5_mnist.parse(["--mul", "mbm", "--data-dir", DATA, "--subset", "4000", "--test-subset", "2000",
                               "--threads", "2", "--quiet"])
    py = lenet5_mnist.run(args)["test_acc"]
    js = tmp_path / "train.json"
    subprocess.run([MANTIS_BIN, "train", "--model", "lenet5", "--data", "mnist", "--data-dir", DATA, "--subset",
                    "4000", "--test-subset", "2000", "--epochs", "1", "--mul", "mbm", "--threads", "2", "--seed", "1",
                    "--json", str(js)], check=True, capture_output=True)
    ref = 100.0 * json.loads(js.read_text())["final_test_acc"]
    assert py > 80.0 and ref > 80.0, (py, ref)
    assert abs(py - ref) < 5.0, "package %.2f%% vs mantis train %.2f%%" % (py, ref)
