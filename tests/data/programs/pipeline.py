"""A healthy control: a correct two-stream copy/compute pipeline in PyTorch.

    python3 pipeline.py

Batches live in pinned host memory (allocated up front: a start-up cost). Batch i+1 is
copied to the GPU on a copy stream while batch i is processed on the default stream;
events order each copy before its compute, and record_stream tells the caching
allocator about the cross-stream use. Copies hide under compute.
NVTX: one range ``iter N`` per batch.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

ROWS, DIM = 8192, 4096           # one batch: 8192 x 4096 float32 = 128 MiB


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    host = [torch.randn(ROWS, DIM).pin_memory() for _ in range(4)]
    weight = torch.randn(DIM, DIM, device=device) / DIM ** 0.5
    copy_stream = torch.cuda.Stream()
    compute = torch.cuda.current_stream()
    sums = torch.zeros((), device=device)

    def fetch(i: int):
        with torch.cuda.stream(copy_stream):
            x = host[i % len(host)].to(device, non_blocking=True)
            done = torch.cuda.Event()
            done.record(copy_stream)
        return x, done

    started = time.perf_counter()
    nxt = fetch(0)
    for i in range(args.iters):
        torch.cuda.nvtx.range_push(f"iter {i}")
        x, ready = nxt
        if i + 1 < args.iters:
            nxt = fetch(i + 1)           # the next copy starts now, beside this compute
        compute.wait_event(ready)
        x.record_stream(compute)
        y = x
        for _ in range(6):
            y = torch.tanh(y @ weight)
        sums += y.mean()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    result = {"ms_per_iter": round(wall / args.iters * 1e3, 3), "sum": float(sums)}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
