"""A training loop fed by a DataLoader whose samples take CPU work to prepare.

    python3 train_loader.py --variant workers0   # num_workers=0, pageable batches
    python3 train_loader.py --variant workers    # 8 workers, pin_memory, non_blocking

Each sample is produced on the CPU (random data, then two passes of np.tanh over it,
as an augmentation pipeline would), about 0.6 ms a sample, 64 samples a batch. With
num_workers=0 the training thread prepares every batch itself while the GPU waits; with
8 worker processes and pinned memory the batches are ready before they are needed.
NVTX: one range ``step N`` per step, pushed *inside* the for loop, so the data loading
of ``for x, y in loader`` happens between the ranges, as in most training scripts.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

DIM = 3 * 128 * 128
BATCH = 64
HIDDEN = 8192


class Synthetic(Dataset):
    def __init__(self, n: int, passes: int) -> None:
        self.n, self.passes = n, passes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        rng = np.random.default_rng(i)
        x = rng.standard_normal(DIM, dtype=np.float32)
        for _ in range(self.passes):
            x = np.tanh(x * np.float32(1.01))
        return torch.from_numpy(x), int(i % 10)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["workers0", "workers"], required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(DIM, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = Synthetic(args.steps * BATCH, args.passes)
    if args.variant == "workers0":
        loader = DataLoader(data, batch_size=BATCH, num_workers=0)
        non_blocking = False
    else:
        loader = DataLoader(data, batch_size=BATCH, num_workers=8, pin_memory=True,
                            prefetch_factor=4, persistent_workers=True)
        non_blocking = True

    started = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        torch.cuda.nvtx.range_push(f"step {step}")
        x = x.to(device, non_blocking=non_blocking)
        y = y.to(device, non_blocking=non_blocking)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.nvtx.range_pop()
    final = float(loss)          # one sync, after the loop
    wall = time.perf_counter() - started
    result = {"variant": args.variant, "steps": args.steps, "wall_s": round(wall, 3),
              "ms_per_step": round(wall / args.steps * 1e3, 3), "final_loss": final}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
