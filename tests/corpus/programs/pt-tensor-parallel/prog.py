"""Tensor parallelism (Megatron-style MLP) on two GPUs with torch.distributed.tensor.parallel.

Started by torchrun (2 processes, one GPU each, NCCL). The model is 4 MLP blocks
(Linear(8192, 6144) -> GELU -> Linear(6144, 8192), bf16); ``parallelize_module`` over
``init_device_mesh("cuda", (2,))`` makes each block's first Linear ``ColwiseParallel``
and its second ``RowwiseParallel``. The input is a batch of 32 sequences x 128 tokens x
hidden 8192 (the same on both ranks, as TP requires). Each of 40 steps is forward +
backward (no optimizer: the step is the model's compute and its communication). NVTX:
``torch.cuda.nvtx.range_push(f"step {i}")`` / ``range_pop()`` on every rank.

What it shows: the all-reduces of tensor parallelism sit on the critical path. Every
block all-reduces its output in forward (RowwiseParallel: partial sums -> replicated)
and blocks 1-3 all-reduce the gradient of their input in backward (ColwiseParallel; the
model input needs no gradient): 7 all-reduces of 64 MB (4096 tokens x 8192, bf16) per
step; the next layer needs each result, so nothing hides them. Per step and rank the
GEMMs are ~4.7 TFLOP (forward 8 x 2 x 4096 x 8192 x 3072, backward 15 more of the same
size): ~7.9 ms at ~600 TFLOPS; the all-reduces ~7 x 0.24 ms at ~270 GB/s = ~1.7 ms.
Designed: exposed communication ~18 % of the step (12-24 % for cuBLAS's and NCCL's real
rates). The work per step is large enough (~9.6 ms) to stay ahead of DTensor's host
overhead (~100 DTensor ops a step, ~3-5 ms). The fix: overlap the all-reduces with
compute (async TP / sequence parallelism: reduce-scatter + all-gather overlapped with
the GEMMs), or give each rank more compute per byte communicated.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, ffn, device=device, dtype=dtype)
        self.act = nn.GELU()
        self.down = nn.Linear(ffn, hidden, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--ffn", type=int, default=6144)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: logic check
    args = parser.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(local)
        device, dtype = torch.device("cuda", local), torch.bfloat16
        dist.init_process_group("nccl", device_id=device)
        push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    else:
        device, dtype = torch.device("cpu"), torch.float32
        dist.init_process_group("gloo")
        push, pop = (lambda name: None), (lambda: None)
    mesh = init_device_mesh(device.type, (world,))

    torch.manual_seed(0)                          # same full weights and input on every rank
    model = nn.Sequential(*[MLP(args.hidden, args.ffn, device, dtype)
                            for _ in range(args.blocks)])
    plan = {}
    for i in range(args.blocks):
        plan[f"{i}.up"] = ColwiseParallel()
        plan[f"{i}.down"] = RowwiseParallel()
    model = parallelize_module(model, mesh, plan)
    x = torch.randn(args.batch, args.seq, args.hidden, device=device, dtype=dtype)

    started = time.perf_counter()
    for step in range(args.steps):
        push(f"step {step}")
        model.zero_grad(set_to_none=True)
        out = model(x)
        loss = out.float().pow(2).mean()
        loss.backward()
        pop()
    final = float(loss.detach())
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - started

    mine = {"rank": rank, "ms_per_step": round(wall / args.steps * 1e3, 3), "final_loss": final}
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    dist.destroy_process_group()
    ok = all(abs(r["final_loss"] - everyone[0]["final_loss"]) <= 1e-3 * abs(everyone[0]["final_loss"])
             for r in everyone)                 # replicated output: the same loss on every rank
    if rank == 0:
        result = {"steps": args.steps, "tokens": args.batch * args.seq, "hidden": args.hidden,
                  "ffn": args.ffn, "blocks": args.blocks, "dtype": str(dtype), "world": world,
                  "allreduce_mb": round(args.batch * args.seq * args.hidden
                                        * (2 if cuda else 4) / 2**20, 1),
                  "ranks": everyone, "ok": ok}
        print("RESULT " + json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
