"""A small model run step after step: eagerly, replayed as a CUDA graph, or torch.compile'd.

    python3 small_model.py --variant eager     # ~50 tiny kernels a step, each launched
    python3 small_model.py --variant graph     # the step captured once, replayed
    python3 small_model.py --variant compile   # torch.compile (Inductor), batch 8 then 16

The model is 4 pre-norm MLP blocks of width 512 on a batch of 8: every kernel lasts a
few microseconds, so eagerly the GPU waits on Python for most of each step. As a CUDA
graph the whole step is one launch (cudaGraphLaunch) and the replays queue up back to
back. torch.compile first spends seconds compiling on the host (Dynamo, Inductor, Triton
in worker processes), then runs fused Triton kernels; at step --recompile-at the batch
grows to 16, which makes Dynamo recompile in the middle of the run.
NVTX: one range ``step N`` per step.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

DIM, BATCH, BLOCKS = 512, 8, 4


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, 4 * DIM)
        self.down = torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["eager", "graph", "compile"], required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--recompile-at", type=int, default=120)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = torch.nn.Sequential(*[Block() for _ in range(BLOCKS)]).to(device).eval()
    x = torch.randn(BATCH, DIM, device=device)
    step_fn = model
    graph = None
    with torch.no_grad():
        if args.variant == "graph":
            static_in = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):               # warm-up before capture, as documented
                    model(static_in)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = model(static_in)
        elif args.variant == "compile":
            step_fn = torch.compile(model)

        started = time.perf_counter()
        total = torch.zeros((), device=device)
        for i in range(args.steps):
            torch.cuda.nvtx.range_push(f"step {i}")
            if graph is not None:
                graph.replay()
                total += static_out.sum()
            else:
                if args.variant == "compile" and i == args.recompile_at:
                    x = torch.randn(2 * BATCH, DIM, device=device)
                total += step_fn(x).sum()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        wall = time.perf_counter() - started
    result = {"variant": args.variant, "ms_per_step": round(wall / args.steps * 1e3, 4),
              "total": float(total)}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
