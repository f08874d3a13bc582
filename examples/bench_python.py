#!/usr/bin/env python3
"""bench_python.py - the speed goals of the Python package (docs/python.md):
one LeNet-5 MNIST epoch (batch 64, SGD) four ways, alternating rounds so a
shared machine slows each alike:

  mantis       `mantis train --model lenet5 --mul mbm` (the bf16 MBM LUT), its JSON "seconds"
  package      examples/lenet5_mnist.py --mul mbm: the same LUT in a PyTorch LeNet-5
  package_ops  the same with --library-ops: its ReLU, max pooling and SGD the library's too
  torch        examples/lenet5_mnist.py --native: plain PyTorch FP32

each timing the epoch only (not loading or evaluation), on --threads threads,
with one OpenMP wait policy for all three (--wait: passive, OMP_WAIT_POLICY=
PASSIVE; spin, that plus GOMP_SPINCOUNT=10000; auto, the one `mantis train`
and the package pick by themselves on this machine now, decided once at the
start: docs/python.md). Prints every time, the best of each,
the ratios package/mantis (goal <= 1.3) and package/torch (goal <= 2.5), the
same for package_ops,
and the load average before and after.

usage: PYTHONPATH=python python3 examples/bench_python.py [--subset 12800] [--rounds 3] [--threads 2]
                                                          [--wait auto|passive|spin]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subset", type=int, default=12800)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mantis", default=os.path.join(ROOT, "build", "bin", "mantis"))
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "data", "mnist"))
    ap.add_argument("--wait", choices=("auto", "passive", "spin"), default="auto")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from mantis import _lib  # the package's own rule (this process runs no OpenMP itself)
    wait = a.wait if a.wait != "auto" else ("spin" if _lib._idle_core() else "passive")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop("GOMP_SPINCOUNT", None)
    if wait == "spin":
        env["GOMP_SPINCOUNT"] = _lib._BRIEF_SPIN
    ex = os.path.join(ROOT, "examples", "lenet5_mnist.py")
    common = ["--data-dir", a.data_dir, "--subset", str(a.subset), "--test-subset", "1000", "--threads",
              str(a.threads), "--quiet"]
    times = {"mantis": [], "package": [], "package_ops": [], "torch": []}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "train.json")
        for r in range(a.rounds):
            subprocess.run([a.mantis, "train", "--model", "lenet5", "--data", "mnist", "--data-dir", a.data_dir,
                            "--subset", str(a.subset), "--test-subset", "1000", "--epochs", "1", "--mul", "mbm",
                            "--threads", str(a.threads), "--json", js], check=True, env=env, capture_output=True)
            with open(js) as f:
                times["mantis"].append(json.load(f)["epochs"][0]["seconds"])
            for name, extra in (("package", ["--mul", "mbm"]), ("package_ops", ["--mul", "mbm", "--library-ops"]),
                                ("torch", ["--native"])):
                out = subprocess.run([sys.executable, ex] + common + extra, check=True, env=env, capture_output=True,
                                     text=True).stdout
                times[name].append(json.loads(out.splitlines()[-1])["seconds"][0])
            print("round %d: %s" % (r + 1, ", ".join("%s %.2f s" % (k, v[-1]) for k, v in times.items())),
                  file=sys.stderr)
    best = {k: min(v) for k, v in times.items()}
    res = {"subset": a.subset, "threads": a.threads, "rounds": a.rounds, "wait": wait, "times": times, "best": best,
           "package_over_mantis": best["package"] / best["mantis"], "package_over_torch": best["package"] / best["torch"],
           "package_ops_over_mantis": best["package_ops"] / best["mantis"],
           "package_ops_over_torch": best["package_ops"] / best["torch"],
           "mantis_over_torch": best["mantis"] / best["torch"], "load_before": load0, "load_after": os.getloadavg()[0]}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
