"""Batch inference of an MLP replayed from one CUDA graph, inputs fed on the device (healthy).

    python3 prog.py [--replays 300] [--batch 2048] [--hidden 4096] [--layers 8]
                    [--pool 8] [--warmup 3]

The model: 8 x (``nn.Linear(4096, 4096)`` + ``nn.GELU()``), bf16, built directly on the
GPU (factory kwargs, no host weights), followed by an argmax over the 4096 outputs (the
predicted class of each row). A pool of 8 input batches of 2048 x 4096 bf16 (16 MiB
each) is generated on the GPU before the loop: no host data anywhere.

The way the PyTorch docs show it: a few warm-up runs on a side stream (cuBLAS handles,
lazy module loading, the caching allocator's blocks), then one capture with
``torch.cuda.graph`` into a ``torch.cuda.CUDAGraph`` that reads the static input
``static_x`` and writes ``static_y`` and ``static_pred``. Each of the 300 iterations:

    static_x.copy_(pool[i % 8])      # 16 MiB device-to-device cudaMemcpyAsync
    graph.replay()                   # one cudaGraphLaunch
    preds[i].copy_(static_pred)      # 16 KiB device-to-device copy into a
                                     # preallocated (300, 2048) int64 buffer

No host synchronisation, allocation or NVTX in the loop; one ``torch.cuda.synchronize()``
after it, then the checksums.

Why it is healthy: a replay is 8 x 2*2048*4096*4096 = 550 GFLOP of bf16 GEMMs (~0.83 ms
on an H100, plus GELU and the argmax) and the copies ~15 us, while the host spends
~20-30 us of Python and three CUDA calls per iteration: the host queues the whole loop
long before the GPU finishes it, and the GPU idles only for the few microseconds between
one queued operation and the next (designed: > 95 % busy over replays 3..300).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, hidden: int, layers: int, device: torch.device,
                 dtype: torch.dtype) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        for _ in range(layers):
            blocks += [nn.Linear(hidden, hidden, device=device, dtype=dtype), nn.GELU()]
        self.body = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replays", type=int, default=300)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--pool", type=int, default=8, help="input batches kept on the GPU")
    parser.add_argument("--warmup", type=int, default=3, help="side-stream warm-up runs")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    dtype = torch.bfloat16
    model = MLP(args.hidden, args.layers, device, dtype).eval()

    with torch.no_grad():
        # The data: already on the GPU, as if produced by an earlier stage.
        pool = torch.randn(args.pool, args.batch, args.hidden, device=device, dtype=dtype)
        static_x = torch.empty(args.batch, args.hidden, device=device, dtype=dtype)
        preds = torch.empty(args.replays, args.batch, device=device, dtype=torch.int64)
        static_x.copy_(pool[0])

        # Warm up on a side stream before capturing (torch.cuda.graphs docs).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(args.warmup):
                model(static_x).argmax(dim=-1)
        torch.cuda.current_stream().wait_stream(side)

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(static_x)
            static_pred = static_y.argmax(dim=-1)

        started = time.perf_counter()
        for i in range(args.replays):
            static_x.copy_(pool[i % args.pool])
            graph.replay()
            preds[i].copy_(static_pred)
        torch.cuda.synchronize()                # the one sync, after the loop
        wall = time.perf_counter() - started

        pred_sum = int(preds.sum().item())
        out_mean = float(static_y.float().abs().mean().item())

    flops = 2 * args.batch * args.hidden * args.hidden * args.layers
    result = {"replays": args.replays, "layers": args.layers, "batch": args.batch,
              "ms_per_replay": round(wall / args.replays * 1e3, 4),
              "gflop_per_replay": round(flops / 1e9, 1),
              "checksum": round(out_mean, 6), "pred_checksum": pred_sum}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
