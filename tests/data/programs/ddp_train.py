"""Two-GPU data-parallel training: DDP's overlapped all-reduce vs a manual one after backward.

    torchrun --nproc_per_node 2 ddp_train.py --variant overlap   # DistributedDataParallel
    torchrun --nproc_per_node 2 ddp_train.py --variant manual    # all_reduce each grad
    torchrun --nproc_per_node 2 ddp_train.py --variant overlap --late-rank 1   # a straggler

- overlap: DistributedDataParallel buckets the gradients (25 MB) and starts each bucket's
  all-reduce on NCCL's stream as soon as backward has produced it, so most of the
  communication runs while backward still computes.
- manual: plain backward, then one dist.all_reduce per parameter: every collective is
  issued after the backward pass, nothing left to hide it under.
- --late-rank R: rank R does --late-ms of extra host work (a busy loop, as a slow data
  loader or logging would) before each forward pass; the other rank then waits for it
  inside the first all-reduce of each step.
NVTX: one range ``step N`` per step in each rank. NVLink multicast stays off
(NCCL_NVLS_ENABLE=0 and friends are set here too, in case the launcher did not).
"""

from __future__ import annotations

import argparse
import json
import os
import time

for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

HIDDEN, BATCH, LAYERS = 4096, 2048, 8


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["overlap", "manual"], required=True)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--late-rank", type=int, default=-1)
    parser.add_argument("--late-ms", type=float, default=30.0)
    parser.add_argument("--result")
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(HIDDEN, 1)).to(device)
    if args.variant == "overlap":
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    torch.manual_seed(1 + rank)
    x = torch.randn(args.batch, HIDDEN, device=device)
    y = torch.randn(args.batch, 1, device=device)
    world = dist.get_world_size()

    dist.barrier()
    started = time.perf_counter()
    for step in range(args.steps):
        torch.cuda.nvtx.range_push(f"step {step}")
        opt.zero_grad(set_to_none=True)
        if rank == args.late_rank:
            busy_until = time.perf_counter() + args.late_ms / 1e3
            while time.perf_counter() < busy_until:
                pass
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        if args.variant == "manual":
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    final = float(loss)
    result = {"variant": args.variant, "late_rank": args.late_rank, "rank": rank, "ms_per_step":
              round(wall / args.steps * 1e3, 3), "loss": final}
    print(json.dumps(result))
    if args.result and rank == 0:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
