"""A training loop that synchronises the host every step, against the same loop without.

    python3 sync_loop.py --variant sync     # .item() for logging, nonzero() via a mask
    python3 sync_loop.py --variant nosync   # the same maths, kept on the GPU

Each step: a 6-layer MLP forward, a selection of the rows whose activations are positive,
a loss, backward and an optimizer step, then some host bookkeeping (about 2 ms of
Python/numpy: the kind of per-step logging and statistics training scripts do).

- sync: the selection is boolean-mask indexing (``h[keep]``: a nonzero() that copies
  its count to the host and waits), and the loss is logged with ``loss.item()``: two
  synchronisations a step, each draining the GPU's queue, so the bookkeeping that
  follows runs while the GPU has nothing to do.
- nosync: the selection is a multiplication by the mask, and the loss is accumulated
  on the GPU and read once at the end; the bookkeeping overlaps the GPU's work.
NVTX: one range named ``iteration`` per step (the same name every time).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

HIDDEN, BATCH, LAYERS = 4096, 1024, 6


def bookkeeping(history: list[float], rng: np.random.Generator) -> None:
    """About 2 ms of host work per step (metrics, histograms)."""
    sample = rng.standard_normal(200_000)
    history.append(float(np.percentile(sample, 90)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["sync", "nosync"], required=True)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU()]
    body = torch.nn.Sequential(*layers).to(device)
    head = torch.nn.Linear(HIDDEN, 1).to(device)
    opt = torch.optim.SGD([*body.parameters(), *head.parameters()], lr=1e-4)
    x = torch.randn(BATCH, HIDDEN, device=device)
    target = torch.randn(BATCH, 1, device=device)
    rng = np.random.default_rng(0)
    history: list[float] = []
    losses: list[float] = []
    total = torch.zeros((), device=device)

    started = time.perf_counter()
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("iteration")
        h = body(x)
        keep = h[:, 0] > 0
        if args.variant == "sync":
            loss = ((head(h[keep]) - target[keep]) ** 2).mean()      # nonzero(): sync
        else:
            err = (head(h) - target) ** 2 * keep[:, None]
            loss = err.sum() / keep.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if args.variant == "sync":
            losses.append(loss.item())                                  # .item(): sync
        else:
            total += loss.detach()
        bookkeeping(history, rng)
        torch.cuda.nvtx.range_pop()
    mean_loss = (sum(losses) / len(losses)) if losses else float(total) / args.steps
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    result = {"variant": args.variant, "ms_per_step": round(wall / args.steps * 1e3, 3),
              "mean_loss": mean_loss}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
