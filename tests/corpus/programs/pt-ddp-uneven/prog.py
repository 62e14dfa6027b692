"""DDP on two GPUs with uneven data: rank 1's batch is twice rank 0's.

Started by torchrun (2 processes, one GPU each, NCCL). The model is 4 x
Linear(4096, 4096) + ReLU and a Linear(4096, 4096) head in float32, wrapped in
``DistributedDataParallel``. Rank 0 trains on 1024 rows per step, rank 1 on 2048 (a
sharding bug or an unbalanced sampler: the last shard got two shards' data). 40 steps of
forward, loss, backward (DDP all-reduces gradient buckets during backward) and SGD.
NVTX: ``torch.cuda.nvtx.range_push(f"step {i}")`` / ``range_pop()`` on every rank.

What is wrong: rank 1 computes twice as long as rank 0, and DDP's gradient all-reduces
cannot finish before both ranks contribute, so rank 0's NCCL kernels start as soon as
rank 0's buckets are ready and spin until rank 1 catches up: every step rank 0's GPU
waits for rank 1's extra compute. Designed: fp32 GEMMs (no TF32) at ~40-55 TFLOPS; per
step rank 0 does 5 Linears x ~103 GFLOP (forward + backward at batch 1024) = ~0.5 TFLOP,
~9-12 ms, rank 1 twice that, ~18-24 ms; the all-reduce of 335 MB of gradients (~1.2 ms,
mostly under rank 1's backward) and SGD (~0.4 ms) come on top. Rank 0 waits ~9-12 ms of
a ~20-26 ms step (~40-50 %). Rank 1 is the late rank (its larger batch is the cause,
rank 0's waiting the symptom). The fix: balance the data (equal batches per rank).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WIDTH = 4096


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=1024, help="rank 0's batch")
    parser.add_argument("--factor", type=int, default=2, help="rank 1's batch / rank 0's")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: logic check
    args = parser.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
        push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        push, pop = (lambda name: None), (lambda: None)

    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(args.layers):
        layers += [nn.Linear(WIDTH, WIDTH, device=device), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, WIDTH, device=device))
    model = DDP(nn.Sequential(*layers), device_ids=[local] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    batch = args.batch * (args.factor if rank == 1 else 1)       # the uneven shard
    gen = torch.Generator(device=device).manual_seed(1 + rank)
    x = torch.randn(batch, WIDTH, device=device, generator=gen)
    target = torch.randn(batch, WIDTH, device=device, generator=gen)

    started = time.perf_counter()
    for step in range(args.steps):
        push(f"step {step}")
        opt.zero_grad(set_to_none=True)
        loss = (model(x) - target).pow(2).mean()
        loss.backward()
        opt.step()
        pop()
    final = float(loss.detach())
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - started

    mine = {"rank": rank, "batch": batch, "ms_per_step": round(wall / args.steps * 1e3, 3),
            "final_loss": final}
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    dist.destroy_process_group()
    ok = all(r["final_loss"] == r["final_loss"] for r in everyone)
    if rank == 0:
        result = {"steps": args.steps, "width": WIDTH, "layers": args.layers + 1,
                  "batches": [r["batch"] for r in everyone], "world": world,
                  "ranks": everyone, "ok": ok}
        print("RESULT " + json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
