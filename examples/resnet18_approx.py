#!/usr/bin/env python3
"""resnet18_approx.py - a torchvision ResNet-18 evaluated with an
approximate multiplier in every convolution and linear layer, through the
Mantis Python package (docs/python.md).

No weights ship with Mantis, so by default the network has seeded random
weights (torchvision's initialisation; --weights loads a state_dict) and
the input is a seeded batch of CIFAR-sized images (3x32x32). The forward
pass is timed with plain PyTorch FP32 and approximated, alternating (the
machine may be shared: compare the ratio), and the output is compared with
FP32's (top-1 agreement, largest logit difference).

    PYTHONPATH=python python3 examples/resnet18_approx.py --rtl rtl/mul_mbm.v --batch 8 --threads 2
    PYTHONPATH=python python3 examples/resnet18_approx.py --mul "mbm,acc=M7E4"

Prints a JSON line {"mul", "batch", "threads", "fp32_s", "approx_s" (best
of --reps), "ratio", "top1_agree", "max_abs_diff", "layers"}.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import mantis  # noqa: E402  (before torch: it sets OMP_WAIT_POLICY=PASSIVE unless set, docs/python.md)
import mantis.torch  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="torchvision ResNet-18 with a Mantis multiplier in every conv and linear")
    ap.add_argument("--rtl", help="a Verilog multiplier (swept, verified, cached)")
    ap.add_argument("--mul", default="mbm", help="a C model name or SPEC when no --rtl (default mbm)")
    ap.add_argument("--weights", help="a state_dict for torchvision.models.resnet18(num_classes=--classes)")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=32, help="image side (CIFAR: 32)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    mantis.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = torchvision.models.resnet18(num_classes=a.classes).eval()
    if a.weights:
        model.load_state_dict(torch.load(a.weights, map_location="cpu"))
    x = torch.randn(a.batch, 3, a.size, a.size, generator=torch.Generator().manual_seed(a.seed))
    m = mantis.Multiplier.from_verilog(a.rtl) if a.rtl else mantis.Multiplier(a.mul)
    fp32 = model
    approx = mantis.torch.approximate(__import__("copy").deepcopy(model), mul=m)
    layers = len(mantis.torch.layer_names(approx))
    times = {"fp32": [], "approx": []}
    with torch.no_grad():
        ref, out = fp32(x), approx(x)  # warm-up (and the outputs compared)
        for _ in range(a.reps):  # alternating: a busy machine slows both alike
            for name, net in (("fp32", fp32), ("approx", approx)):
                t0 = time.perf_counter()
                net(x)
                times[name].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    res = {"mul": m.desc, "batch": a.batch, "size": a.size, "threads": a.threads, "layers": layers,
           "fp32_s": best["fp32"], "approx_s": best["approx"], "ratio": best["approx"] / best["fp32"],
           "fp32_all": times["fp32"], "approx_all": times["approx"],
           "top1_agree": float((ref.argmax(1) == out.argmax(1)).float().mean()),
           "max_abs_diff": float((ref - out).abs().max()), "load": os.getloadavg()[0]}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
