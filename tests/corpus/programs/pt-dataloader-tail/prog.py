"""A training loop whose DataLoader (num_workers=0) has a heavy tail: every 4th batch is a cache miss.

    python3 prog.py [--steps 60] [--miss-every 4] [--miss-ms 60] [--tiny 70] [--big 10]

The dataset serves ready-made batches (``batch_size=None``), 1024 rows x 256 float32
features each. Three batches out of four are cache hits: a slice of an in-memory shard,
normalised with numpy (~0.5-2 ms to prepare). Every 4th batch (index % 4 == 3) is a
cache miss: the shard is "decoded" with ~60 ms of numpy work (a fixed time budget of
real array passes, no sleeping). num_workers=0, so the training thread prepares each
batch itself while the GPU waits.

The model has a front of 70 tiny blocks (Linear 256x256 + ReLU, a few us of GPU work
each, ~30 us of Python each) and then 10 large fp32 layers (Linear 4096x4096 + ReLU,
~34 GFLOP each forward on 1024 rows). Each step ends with ``loss.item()`` (the usual
running-loss logging), so every step starts on an idle GPU: the tiny front is launched
while the GPU waits (~4-6 ms launch-bound, ~15-20 % of a normal step), the large layers
keep it busy (~20-25 ms forward + backward + SGD).

Designed numbers: normal step ~25-30 ms + ~1 ms of input; a miss adds ~60 ms of input.
Mean input per step ~16 ms = ~30-45 % of the steady state: the verdict is input. The
MEDIAN step is a cache hit, where the launch-bound front (~5 ms) outweighs the input
(~1 ms): ranking causes on the median iteration would wrongly say launch-bound.
NVTX: ``step N`` pushed inside ``for x, y in loader`` (the loading is between ranges).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

ROWS, FEATURES, CLASSES = 1024, 256, 10
TINY, BIG = 256, 4096


class ShardedBatches(Dataset):
    """Item i is batch i: a cache hit (slice + normalise) or, every Nth, a slow decode."""

    def __init__(self, n: int, miss_every: int, miss_ms: float) -> None:
        rng = np.random.default_rng(0)
        self.cache = rng.standard_normal((8, ROWS, FEATURES), dtype=np.float32)
        self.labels = rng.integers(0, CLASSES, (8, ROWS))
        self.mean = self.cache.mean(axis=(0, 1))
        self.inv_std = 1.0 / self.cache.std(axis=(0, 1))
        self.n, self.miss_every, self.miss_s = n, miss_every, miss_ms / 1e3

    def __len__(self) -> int:
        return self.n

    def decode(self, raw: np.ndarray) -> np.ndarray:
        """The cache miss: repeated passes over the shard until the time budget is spent."""
        deadline = time.perf_counter() + self.miss_s
        buf = raw.copy()
        while time.perf_counter() < deadline:
            buf = np.tanh(buf * np.float32(1.0001) + np.float32(1e-4))
        return buf

    def __getitem__(self, i: int):
        raw = self.cache[i % len(self.cache)]
        if i % self.miss_every == self.miss_every - 1:
            raw = self.decode(raw)
        x = (raw - self.mean) * self.inv_std
        return x.astype(np.float32, copy=False), self.labels[i % len(self.labels)]


def build(tiny: int, big: int) -> torch.nn.Sequential:
    mods: list[torch.nn.Module] = []
    for _ in range(tiny):                          # the launch-bound front
        mods += [torch.nn.Linear(FEATURES, TINY), torch.nn.ReLU()]
    mods += [torch.nn.Linear(TINY, BIG), torch.nn.ReLU()]
    for _ in range(big - 1):                       # the GPU-heavy part
        mods += [torch.nn.Linear(BIG, BIG), torch.nn.ReLU()]
    mods += [torch.nn.Linear(BIG, CLASSES)]
    return torch.nn.Sequential(*mods)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--miss-every", type=int, default=4)
    parser.add_argument("--miss-ms", type=float, default=60.0)
    parser.add_argument("--tiny", type=int, default=70)
    parser.add_argument("--big", type=int, default=10)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = build(args.tiny, args.big).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(ShardedBatches(args.steps, args.miss_every, args.miss_ms),
                        batch_size=None, num_workers=0)

    running = 0.0
    started = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        torch.cuda.nvtx.range_push(f"step {step}")
        x = x.to(device)
        y = y.to(device)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        running += loss.item()                     # per-step logging: one sync a step
        torch.cuda.nvtx.range_pop()
    wall = time.perf_counter() - started

    misses = sum(1 for i in range(args.steps) if i % args.miss_every == args.miss_every - 1)
    result = {"steps": args.steps, "misses": misses, "miss_ms": args.miss_ms,
              "tiny_blocks": args.tiny, "big_layers": args.big,
              "ms_per_step": round(wall / args.steps * 1e3, 3),
              "mean_loss": round(running / args.steps, 5)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
