#!/usr/bin/env python3
"""lenet5_mnist.py - LeNet-5 on MNIST, defined in plain PyTorch, trained
with an approximate multiplier in every multiply of the forward and
backward passes through the Mantis Python package (docs/python.md).

The model, initialisation, data scaling and recipe are those of `mantis
train --model lenet5` (examples/models.c, docs/training.md): conv 6@5x5
pad 2, ReLU, max pool 2, conv 16@5x5, ReLU, max pool 2, dense 120-84-10
with ReLU; Kaiming uniform weights (bound sqrt(6/fan_in)), zero biases;
pixels scaled to [0, 1] and standardised (0.1307, 0.3081); SGD lr 0.01
momentum 0.9, batch 64, softmax cross-entropy. So its accuracy can be
compared with `mantis train` (the sample order and the initial weights come
from another RNG, and the ops between the GEMMs are PyTorch's).

    PYTHONPATH=python python3 examples/lenet5_mnist.py --rtl rtl/mul_mbm.v
    PYTHONPATH=python python3 examples/lenet5_mnist.py --mul mbm --epochs 1 --threads 2
    PYTHONPATH=python python3 examples/lenet5_mnist.py --mul mbm --library-ops  # ReLU/pooling/SGD: the library's
    PYTHONPATH=python python3 examples/lenet5_mnist.py --native      # PyTorch FP32, no Mantis

Prints one line per epoch and a JSON line {"mul", "epochs", "train",
"test", "seconds" (per epoch, training only), "test_acc", ...}.
"""
import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import mantis  # noqa: E402  (before torch: it sets OMP_WAIT_POLICY=PASSIVE unless set, docs/python.md)
import mantis.torch  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch  # noqa: E402  (the one MNIST reader of the examples)


def load_mnist(data_dir, split, limit=0):
    """(images [N, 1, 28, 28] standardised as Mantis does, labels [N]): bench_torch.py's reader."""
    prefix = "train" if split == "train" else "t10k"
    ipath = os.path.join(data_dir, prefix + "-images-idx3-ubyte")
    if not os.path.exists(ipath):
        raise SystemExit("lenet5_mnist.py: %s missing; fetch MNIST with `build/bin/mantis data fetch mnist`" % ipath)
    return bench_torch.load_mnist(torch, data_dir, limit, prefix)


def lenet5(seed):
    """LeNet-5 as examples/models.c builds it, initialised as mts_net_build does
    (Kaiming uniform, bound sqrt(6/fan_in); biases 0), from a torch RNG."""
    model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5),
                          nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
                          nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                bound = math.sqrt(6.0 / m.weight[0].numel())
                m.weight.copy_((torch.rand(m.weight.shape, generator=g) * 2 - 1) * bound)
                m.bias.zero_()
    return model


def train_epoch(model, opt, x, y, batch, seed, epoch):
    model.train()
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed * 1000 + epoch))
    loss_fn = nn.CrossEntropyLoss()
    total, correct = 0.0, 0
    for s in range(0, x.shape[0], batch):
        idx = order[s:s + batch]
        out = model(x[idx])
        loss = loss_fn(out, y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.item() * idx.numel()
        correct += int((out.argmax(1) == y[idx]).sum())
    return total / x.shape[0], 100.0 * correct / x.shape[0]


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, x.shape[0], batch):
            correct += int((model(x[s:s + batch]).argmax(1) == y[s:s + batch]).sum())
    return 100.0 * correct / x.shape[0]


def multiplier(args):
    if args.rtl:
        return mantis.Multiplier.from_verilog(args.rtl)
    return mantis.Multiplier(args.mul, man_bits=args.man_bits)


def run(args):
    torch.set_num_threads(args.threads)
    xtr, ytr = load_mnist(args.data_dir, "train", args.subset)
    xte, yte = load_mnist(args.data_dir, "test", args.test_subset)
    model = lenet5(args.seed)
    desc = "pytorch fp32"
    if not args.native:
        mantis.set_num_threads(args.threads)
        m = multiplier(args)
        desc = m.desc
        mantis.torch.approximate(model, mul=m, library_ops=args.library_ops)
    if args.library_ops and not args.native:  # mantis train's SGD, one library call per step
        opt = mantis.torch.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    hist = []
    for e in range(args.epochs):
        t0 = time.perf_counter()
        loss, acc = train_epoch(model, opt, xtr, ytr, args.batch, args.seed, e)
        sec = time.perf_counter() - t0
        test = evaluate(model, xte, yte)
        hist.append({"epoch": e + 1, "loss": loss, "train_acc": acc, "test_acc": test, "seconds": sec})
        if not args.quiet:
            print("epoch %d/%d loss %.4f train %.2f%% test %.2f%% %.2f s (%s)" % (e + 1, args.epochs, loss, acc, test,
                                                                                sec, desc), file=sys.stderr)
    return {"mul": desc, "epochs": args.epochs, "train": xtr.shape[0], "test": xte.shape[0], "threads": args.threads,
            "seed": args.seed, "seconds": [h["seconds"] for h in hist], "test_acc": hist[-1]["test_acc"],
            "history": hist}


def parse(argv=None):
    ap = argparse.ArgumentParser(description="LeNet-5 on MNIST with a Mantis multiplier (PyTorch model)")
    ap.add_argument("--rtl", help="a Verilog multiplier (swept, verified, cached), e.g. rtl/mul_mbm.v")
    ap.add_argument("--mul", default="mbm", help="a C model name or SPEC when no --rtl (default mbm)")
    ap.add_argument("--man-bits", type=int, default=None)
    ap.add_argument("--native", action="store_true", help="plain PyTorch FP32 (the baseline)")
    ap.add_argument("--library-ops", action="store_true",
                    help="ReLU and max pooling through the library too (approximate(..., library_ops=True)), "
                         "and mantis train's SGD (mantis.torch.SGD)")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "data", "mnist"))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--subset", type=int, default=0, help="first N training images (0: all)")
    ap.add_argument("--test-subset", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet", action="store_true")
    return ap.parse_args(argv)


if __name__ == "__main__":
    print(json.dumps(run(parse())))
