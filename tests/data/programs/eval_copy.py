"""An evaluation loop that brings each batch's outputs back to the host.

    python3 eval_copy.py --variant pageable   # outs.append(y.cpu())
    python3 eval_copy.py --variant pinned     # async copies into pinned buffers

- pageable: ``y.cpu()`` allocates pageable memory and copies synchronously: the GPU
  copies through the driver's staging buffer at a few GB/s while nothing else runs,
  and the host waits for it before it can launch the next batch.
- pinned: each output goes into a preallocated pinned buffer with
  ``copy_(non_blocking=True)`` on a copy stream that waits for the batch's event: the
  copy of batch i overlaps the compute of batch i+1; the host synchronises once.
NVTX: one range ``batch N`` per batch.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

BATCH, DIM, OUT = 512, 4096, 8192        # outputs: 512 x 8192 float32 = 16 MiB a batch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["pageable", "pinned"], required=True)
    parser.add_argument("--batches", type=int, default=35)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(DIM, DIM), torch.nn.GELU(), torch.nn.Linear(DIM, DIM),
        torch.nn.GELU(), torch.nn.Linear(DIM, OUT)).to(device).eval()
    inputs = [torch.randn(BATCH, DIM, device=device) for _ in range(4)]
    outs = []
    if args.variant == "pinned":
        buffers = [torch.empty(BATCH, OUT, pin_memory=True) for _ in range(args.batches)]
        copy_stream = torch.cuda.Stream()
    torch.cuda.synchronize()

    started = time.perf_counter()
    with torch.no_grad():
        for i in range(args.batches):
            torch.cuda.nvtx.range_push(f"batch {i}")
            y = model(inputs[i % len(inputs)])
            if args.variant == "pageable":
                outs.append(y.cpu())
            else:
                ready = torch.cuda.Event()
                ready.record()
                with torch.cuda.stream(copy_stream):
                    copy_stream.wait_event(ready)
                    buffers[i].copy_(y, non_blocking=True)
                    y.record_stream(copy_stream)
                outs.append(buffers[i])
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    checksum = float(sum(o[0, :8].sum() for o in outs))
    result = {"variant": args.variant, "ms_per_batch": round(wall / args.batches * 1e3, 3),
              "checksum": checksum}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
