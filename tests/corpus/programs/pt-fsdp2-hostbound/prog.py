"""FSDP2 on two GPUs, a host-bound small model, and rank 0 doing extra host work.

Started by torchrun (2 processes, one GPU each, NCCL). The model is 24 small blocks
(Linear(512, 512) + ReLU) and a head; each block is sharded with FSDP2's
``fully_shard`` and so is the root. Batch 16 per rank, 30 steps of forward, loss,
backward and SGD. NVTX: ``torch.cuda.nvtx.range_push(f"step {i}")`` / ``range_pop()``
per step on every rank.

What is wrong: two things, one of which is the designed cause.
  * The model is far too small for FSDP: every block costs an all-gather in forward and
    an all-gather and a reduce-scatter in backward, each with FSDP2's Python hooks and
    copy-in/copy-out kernels, so the step is host-bound (GPU work a few % of the step).
  * Rank 0 (only) computes "logging metrics" with numpy for 15 ms per step, after the
    loss and before ``loss.backward()``. Rank 1 reaches backward 15 ms earlier, and its
    first backward collective (all-gather / reduce-scatter on its NCCL stream) has to wait
    for rank 0: rank 1's GPU sits in NCCL kernels ~15 ms per step. Rank 0 is the late
    rank; rank 1's waiting in collectives is the symptom.
Designed: steady step ~ H + 15 ms, H (the FSDP host path per step) ~8-17 ms, rank 1
waiting ~15 ms of it (~45-65 %). The fix: move rank 0's metrics off the critical path
(a background thread, every N steps, or on every rank), then make the model worth FSDP
(fewer, larger units; or no FSDP for a model this small).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

WIDTH = 512


def log_metrics(buf: np.ndarray, ms: float) -> int:
    """Host-side 'metrics': numpy statistics over a buffer for *ms* milliseconds."""
    deadline = time.perf_counter() + ms / 1e3
    rounds = 0
    while time.perf_counter() < deadline:
        _ = (float(buf.mean()), float(buf.std()), float(np.percentile(buf, 99.0)))
        rounds += 1
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--metrics-ms", type=float, default=15.0, help="rank 0's host work")
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
    mesh = init_device_mesh(device.type, (world,))

    torch.manual_seed(0)                                   # same full weights on every rank
    model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH, device=device), nn.ReLU())
                            for _ in range(args.blocks)],
                          nn.Linear(WIDTH, WIDTH, device=device))
    for block in model[:-1]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=device).manual_seed(1 + rank)   # each rank its own data
    x = torch.randn(args.batch, WIDTH, device=device, generator=gen)
    target = torch.randn(args.batch, WIDTH, device=device, generator=gen)
    metrics_buf = np.random.default_rng(rank).standard_normal(1 << 16)

    rounds = 0
    started = time.perf_counter()
    for step in range(args.steps):
        push(f"step {step}")
        opt.zero_grad(set_to_none=True)
        loss = (model(x) - target).pow(2).mean()
        if rank == 0:
            rounds += log_metrics(metrics_buf, args.metrics_ms)   # only rank 0: late rank
        loss.backward()
        opt.step()
        pop()
    final = float(loss.detach())
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - started

    mine = {"rank": rank, "ms_per_step": round(wall / args.steps * 1e3, 3),
            "metric_rounds": rounds, "final_loss": final}
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    dist.destroy_process_group()
    ok = all(r["final_loss"] == r["final_loss"] for r in everyone)
    if rank == 0:
        result = {"steps": args.steps, "batch": args.batch, "blocks": args.blocks,
                  "width": WIDTH, "metrics_ms_rank0": args.metrics_ms, "world": world,
                  "ranks": everyone, "ok": ok}
        print("RESULT " + json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
