"""A ResNet-style conv net trained with cudnn.benchmark on a fixed shape (healthy).

    python3 prog.py [--steps 40] [--batch 256]

Stem (Conv 3->64, stride 2) then three stages of two residual blocks (Conv3x3 + BN +
ReLU, twice, plus the skip) at 64, 128 and 256 channels (64x64, 32x32, 16x16), global
average pooling and a linear head; batch 256 of 3x128x128 images generated on the GPU
once (no data loading), SGD with momentum, fp32 (cuDNN uses TF32 for convolutions by
default), ``torch.backends.cudnn.benchmark = True``.

The first step is slow: cuDNN times several algorithms for every new convolution
shape, forward and backward (warm-up). After that each step is ~0.65 TFLOP of
convolutions plus ~150 M batch-norm activations of memory traffic (~7-12 ms of GPU
work) for ~60 Python-level forward ops and ~100-200 backward/cuDNN kernels (~3-4 ms of
host time): the host stays ahead, there is no synchronisation in the loop (one after
it), and the GPU is busy (designed: > 90 %).
Nothing is wrong with it.
NVTX: the ``nvtx`` package, ``nvtx.annotate("train_step", domain="trainer")`` around
each step: every step has the same name, no number.
"""

from __future__ import annotations

import argparse
import json
import time

import nvtx
import torch
from torch import nn


class Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


def resnet(classes: int = 100) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        Basic(64, 64, 1), Basic(64, 64, 1),
        Basic(64, 128, 2), Basic(128, 128, 1),
        Basic(128, 256, 2), Basic(256, 256, 1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, classes))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    device = torch.device(args.device)
    model = resnet().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    images = torch.randn(args.batch, 3, 128, 128, device=device)
    labels = torch.randint(0, 100, (args.batch,), device=device)

    started = time.perf_counter()
    for _ in range(args.steps):
        with nvtx.annotate("train_step", domain="trainer"):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
    final = loss.item()                            # the one sync, after the loop
    wall = time.perf_counter() - started

    result = {"steps": args.steps, "batch": args.batch,
              "ms_per_step": round(wall / args.steps * 1e3, 3), "final_loss": round(final, 5)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
