"""A training loop whose AdamW runs one tensor at a time (foreach=False): launch-bound.

    python3 prog.py [--steps 30] [--blocks 50]

The model: 50 residual blocks of LayerNorm(256) (all blocks but every 5th) + Linear(256,
256) + ReLU + Linear(256, 256), and a Linear(256, 10) head: 101 Linear layers with bias
and 40 LayerNorms = 282 small parameter tensors (~6.6 M parameters), on a batch of 64
rows generated on the GPU. ``torch.optim.AdamW(foreach=False)`` updates the 282 tensors
one by one: 8 tiny element-wise kernels each (weight decay, two moment updates, sqrt,
div, add, addcdiv), ~2,250 launches a step from Python, each a few microseconds of GPU
work against ~30 us of host time. Forward (~250 kernels) and backward (~500) are tiny
too. The GPU waits for launches most of the step (designed: ~75-95 % idle), and the
optimizer is ~3/4 of the step: the fix is the multi-tensor path (foreach=True, the
default) or fused=True, which do the same update in a handful of launches.
NVTX: ``step N`` per step, holding ``forward``, ``backward`` and ``optimizer``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

DIM, ROWS = 256, 64


class Block(torch.nn.Module):
    def __init__(self, norm: bool) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM) if norm else torch.nn.Identity()
        self.fc1 = torch.nn.Linear(DIM, DIM)
        self.fc2 = torch.nn.Linear(DIM, DIM)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--blocks", type=int, default=50)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    # a LayerNorm in every block but each 5th: 40 norms, 100 Linear, 282 tensors with the head
    model = torch.nn.Sequential(*[Block(i % 5 != 4) for i in range(args.blocks)],
                                torch.nn.Linear(DIM, 10)).to(device)
    tensors = sum(1 for _ in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(ROWS, DIM, device=device)
    y = torch.randint(0, 10, (ROWS,), device=device)

    started = time.perf_counter()
    for step in range(args.steps):
        torch.cuda.nvtx.range_push(f"step {step}")
        torch.cuda.nvtx.range_push("forward")
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        loss.backward()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("optimizer")
        opt.step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
    final = loss.item()                            # the one sync, after the loop
    wall = time.perf_counter() - started

    result = {"steps": args.steps, "param_tensors": tensors,
              "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 3),
              "ms_per_step": round(wall / args.steps * 1e3, 3), "final_loss": round(final, 5)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
