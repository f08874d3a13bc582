#!/usr/bin/env python3
"""bench_torch.py - the PyTorch baseline of `mantis bench train` (CPU, or the GPU with --device cuda).

Trains one epoch of the same model as `mantis train --model M` (as
examples/models.c builds it) on the first N training images of DATA_DIR,
with the same batch and optimizer (SGD lr 0.01 momentum 0.9), on T threads,
and prints one JSON line {"model": M, "samples": N, "seconds": S, "threads":
T, "torch": VERSION}. Only the epoch is timed (not data loading or model
construction), like the "seconds" of mantis train's JSON.

--device cuda: FP32 on the GPU with TF32 off (torch.backends.cuda.matmul.allow_tf32
and torch.backends.cudnn.allow_tf32 False), the model, the whole data set and the
batch order on the GPU before the clock starts, the device synchronised before
it starts and stops; the line adds "device" and "gpu". Without a CUDA device
(or a PyTorch built without CUDA) it prints {"error": ...} and exits 3.

Models and data (the inputs standardised as sim/nn/data.c does, so both sides
see the same dense inputs):
  lenet300, lenet5   MNIST idx files, scaled to [0, 1], mean 0.1307, deviation 0.3081
  vit-tiny           the same MNIST; 7x7 patches, width 64, 4 pre-LN blocks of
                     4-head attention (Q|K|V from one 64 -> 192 projection,
                     scores scaled by 1/4) and a tanh-GELU MLP 64-128-64, final
                     LayerNorm, mean over the 16 tokens, dense 10
  resnet20           CIFAR-10 binary files (data_batch_1.bin, ...; real or the
                     synthetic ones `mantis bench train` writes), per-channel
                     mean/deviation; 3x3 convolutions with biases, BatchNorm,
                     1x1 convolution + BatchNorm shortcuts where the shape
                     changes, global average pooling, dense 10

usage: bench_torch.py --model M --data-dir DIR [--subset N] [--threads T] [--batch B] [--seed S] [--device cpu|cuda]
"""
import argparse
import json
import os
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


def load_mnist(torch, d, subset, prefix="train"):
    """MNIST's prefix ("train" or "t10k") split of the idx files in d, its
    first subset images (0: all), standardised as sim/nn/data.c does."""
    (n, h, w), img = load_idx(d + "/" + prefix + "-images-idx3-ubyte")
    (_,), lab = load_idx(d + "/" + prefix + "-labels-idx1-ubyte")
    if subset > 0:
        n = min(n, subset)
    x = torch.frombuffer(bytearray(img[:n * h * w]), dtype=torch.uint8).reshape(n, 1, h, w).float() / 255.0
    x = (x - 0.1307) / 0.3081  # sim/nn/data.c's standardisation
    y = torch.frombuffer(bytearray(lab[:n]), dtype=torch.uint8).long()
    return x, y


def load_cifar(torch, d, subset):
    rec = 3073
    xs, ys, n = [], [], 0
    for i in range(1, 6):
        with open(os.path.join(d, "data_batch_%d.bin" % i), "rb") as f:
            data = f.read()
        k = len(data) // rec
        if subset > 0:
            k = min(k, subset - n)
        raw = torch.frombuffer(bytearray(data[:k * rec]), dtype=torch.uint8).reshape(k, rec)
        ys.append(raw[:, 0].long())
        xs.append(raw[:, 1:].reshape(k, 3, 32, 32).float() / 255.0)
        n += k
        if subset > 0 and n >= subset:
            break
    x, y = torch.cat(xs), torch.cat(ys)
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).reshape(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).reshape(1, 3, 1, 1)
    return (x - mean) / std, y


def resnet20(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, ch, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, ch, 3, stride, 1), nn.BatchNorm2d(ch)
            self.conv2, self.bn2 = nn.Conv2d(ch, ch, 3, 1, 1), nn.BatchNorm2d(ch)
            self.short = None
            if stride != 1 or cin != ch:  # "option B", as examples/models.c
                self.short = nn.Sequential(nn.Conv2d(cin, ch, 1, stride, 0), nn.BatchNorm2d(ch))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.short is None else self.short(x)))

    layers = [nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for s, ch in enumerate((16, 32, 64)):
        for b in range(3):
            layers.append(Block(cin, ch, 2 if s > 0 and b == 0 else 1))
            cin = ch
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def vit_tiny(torch):
    nn = torch.nn
    P, D, H, BLOCKS, MLP, T = 7, 64, 4, 4, 128, 16

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

        def forward(self, x):
            n = x.shape[0]
            q, k, v = self.qkv(x).split(D, dim=2)  # Q|K|V side by side, as mts_net_mhsa
            q, k, v = (t.reshape(n, T, H, D // H).transpose(1, 2) for t in (q, k, v))
            a = torch.softmax(q @ k.transpose(2, 3) * (1.0 / (D // H) ** 0.5), dim=-1)
            return self.proj((a @ v).transpose(1, 2).reshape(n, T, D))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(D), Attn(), nn.LayerNorm(D)
            self.mlp = nn.Sequential(nn.Linear(D, MLP), nn.GELU(approximate="tanh"), nn.Linear(MLP, D))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Linear(P * P, D)
            self.pos = nn.Parameter(torch.empty(T, D).uniform_(-0.02, 0.02))
            self.blocks = nn.Sequential(*[Block() for _ in range(BLOCKS)])
            self.norm, self.head = nn.LayerNorm(D), nn.Linear(D, 10)

        def forward(self, x):
            n = x.shape[0]  # patches in raster order, features (c, ky, kx): mts_patchify_forward
            x = x.reshape(n, 1, 4, P, 4, P).permute(0, 2, 4, 1, 3, 5).reshape(n, T, P * P)
            x = self.blocks(self.patch(x) + self.pos)
            return self.head(self.norm(x).mean(dim=1))

    return ViT()


def build(torch, model):
    nn = torch.nn
    if model == "lenet300":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 300), nn.ReLU(), nn.Linear(300, 100), nn.ReLU(),
                             nn.Linear(100, 10))
    if model == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5),
                             nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
                             nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    if model == "resnet20":
        return resnet20(torch)
    if model == "vit-tiny":
        return vit_tiny(torch)
    raise SystemExit("bench_torch.py: unknown model '%s' (lenet300 | lenet5 | resnet20 | vit-tiny)" % model)


def main():
    ap = argparse.ArgumentParser(description="PyTorch baseline of mantis bench train")
    ap.add_argument("--model", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--subset", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "python3-torch is not installed"}))
        return 3
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        why = "built without CUDA" if torch.version.cuda is None else "no CUDA device"
        print(json.dumps({"error": "PyTorch %s has no GPU (%s)" % (torch.__version__, why)}))
        return 3
    if cuda:  # FP32 as the anchors: no TF32 tensor-core rounding of the operands
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.model == "resnet20":
        x, y = load_cifar(torch, a.data_dir, a.subset)
    else:
        x, y = load_mnist(torch, a.data_dir, a.subset)
    n = x.shape[0]
    net = build(torch, a.model).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(a.seed)
    order = torch.randperm(n, generator=g)
    x, y, order = x.to(dev), y.to(dev), order.to(dev)  # the data set lives on the device, as ours does
    net.train()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in range(0, n, a.batch):
        idx = order[b:b + a.batch]
        opt.zero_grad()
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
    if cuda:
        torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    out = {"model": a.model, "samples": n, "seconds": round(sec, 4), "threads": a.threads, "batch": a.batch,
           "torch": torch.__version__, "device": a.device}
    if cuda:
        out["gpu"] = torch.cuda.get_device_name(0)
        out["tf32"] = False
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
