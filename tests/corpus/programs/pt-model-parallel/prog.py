"""Naive model parallelism: one process, a model split in two halves over two GPUs.

The first half (8 x Linear(8192, 8192) + ReLU, bf16) lives on cuda:0, the second half
(7 x the same + a Linear(8192, 8192) head) on cuda:1. Each of 40 training steps runs the
first half on cuda:0, moves the activation with ``.to("cuda:1")``, runs the second half
and the loss on cuda:1, then ``loss.backward()`` goes back through both halves (the
gradient crosses back to cuda:0) and SGD updates both. No sync in the loop (one after
it). NVTX: ``torch.cuda.nvtx.range_push(f"step {i}")`` / ``range_pop()`` per step.

What is wrong: the halves can only run one after the other. Each half costs about the
same GPU time (~1.8 ms forward, ~3.6 ms backward and ~1 ms of SGD on 1 GB of bf16
weights per half at batch 1024), so per step:

    cuda:0  | fwd0 |.....waiting for cuda:1.....| bwd0 | sgd0 |
    cuda:1  |..... | fwd1 |  bwd1  | sgd1 |.......waiting.....|

each GPU idles ~45 % of every step with its next work queued behind the other GPU
(cross-device wait). The fix is pipelining: cut the batch into micro-batches so both
halves work at once (GPipe/1F1B), or use data parallelism instead.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

HIDDEN = 8192


def half(layers: int, head: bool, device: torch.device, dtype: torch.dtype) -> nn.Sequential:
    """Built directly on its device (no 2 GB detour through host memory)."""
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(HIDDEN, HIDDEN, device=device, dtype=dtype), nn.ReLU()]
    if head:
        mods.append(nn.Linear(HIDDEN, HIDDEN, device=device, dtype=dtype))
    return nn.Sequential(*mods)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8, help="Linear layers per half")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: logic check
    args = parser.parse_args()

    if args.device == "cuda":
        d0, d1, dtype = torch.device("cuda:0"), torch.device("cuda:1"), torch.bfloat16
    else:
        d0 = d1 = torch.device("cpu")
        dtype = torch.float32
    torch.manual_seed(0)
    first = half(args.layers, False, d0, dtype)
    second = half(args.layers - 1, True, d1, dtype)
    if args.device == "cuda":
        push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    else:
        push, pop = (lambda name: None), (lambda: None)
    params = list(first.parameters()) + list(second.parameters())
    opt = torch.optim.SGD(params, lr=1e-4)
    x = torch.randn(args.batch, HIDDEN, device=d0, dtype=dtype)
    target = torch.randn(args.batch, HIDDEN, device=d1, dtype=dtype)

    started = time.perf_counter()
    for step in range(args.steps):
        push(f"step {step}")
        opt.zero_grad(set_to_none=True)
        h = first(x)
        out = second(h.to(d1))
        loss = (out.float() - target.float()).pow(2).mean()
        loss.backward()
        opt.step()
        pop()
    final = float(loss.detach())                # the one sync, after the loop
    if args.device == "cuda":
        torch.cuda.synchronize(d0)
        torch.cuda.synchronize(d1)
    wall = time.perf_counter() - started

    result = {"steps": args.steps, "batch": args.batch, "layers_per_half": args.layers,
              "hidden": HIDDEN, "dtype": str(dtype), "wall_s": round(wall, 3),
              "ms_per_step": round(wall / args.steps * 1e3, 3), "final_loss": final,
              "ok": final == final}
    print("RESULT " + json.dumps(result))
    return 0 if final == final else 1


if __name__ == "__main__":
    raise SystemExit(main())
