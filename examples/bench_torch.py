#!/usr/bin/env python3
"""bench_torch.py - the PyTorch CPU baseline of `mantis bench train`.

Trains one epoch of the same model as `mantis train --model M` (LeNet-300-100
or LeNet-5, ReLU, as examples/models.c builds them) on the first N MNIST
training images (the idx files of DATA_DIR, scaled to [0, 1] and
standardised with mean 0.1307 and deviation 0.3081 as Mantis does), batch 64, SGD lr 0.01 momentum 0.9, on T threads, and prints one JSON
line {"model": M, "samples": N, "seconds": S, "threads": T, "torch": VERSION}.
Only the epoch is timed (not data loading or model construction), like the
"seconds" of mantis train's JSON.

usage: bench_torch.py --model lenet300|lenet5 --data-dir DIR [--subset N] [--threads T] [--seed S]
"""
import argparse
import json
import struct
import sys
import time


def load_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def build(torch, model):
    nn = torch.nn
    if model == "lenet300":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 300), nn.ReLU(), nn.Linear(300, 100), nn.ReLU(),
                             nn.Linear(100, 10))
    if model == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5),
                             nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
                             nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    raise SystemExit("bench_torch.py: unknown model '%s' (lenet300 | lenet5)" % model)


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU baseline of mantis bench train")
    ap.add_argument("--model", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--subset", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "python3-torch is not installed"}))
        return 3
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    (n, h, w), img = load_idx(a.data_dir + "/train-images-idx3-ubyte")
    (_,), lab = load_idx(a.data_dir + "/train-labels-idx1-ubyte")
    if a.subset > 0:
        n = min(n, a.subset)
    x = torch.frombuffer(bytearray(img[:n * h * w]), dtype=torch.uint8).reshape(n, 1, h, w).float() / 255.0
    x = (x - 0.1307) / 0.3081  # sim/nn/data.c's standardisation: the same dense inputs
    y = torch.frombuffer(bytearray(lab[:n]), dtype=torch.uint8).long()
    net = build(torch, a.model)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(a.seed)
    order = torch.randperm(n, generator=g)
    net.train()
    t0 = time.perf_counter()
    for b in range(0, n, a.batch):
        idx = order[b:b + a.batch]
        opt.zero_grad()
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
    sec = time.perf_counter() - t0
    print(json.dumps({"model": a.model, "samples": n, "seconds": round(sec, 4), "threads": a.threads,
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
