"""A training loop with PyTorch's caching allocator turned off, against the same loop with it.

    python3 alloc_loop.py --variant nocache   # PYTORCH_NO_CUDA_MEMORY_CACHING=1
    python3 alloc_loop.py --variant cache     # the default caching allocator

With caching off every tensor is a cudaMalloc and every release a cudaFree, and
cudaFree waits for the whole device: the host stalls in the allocator and the GPU
drains between kernels. No NVTX ranges at all (many scripts have none): gpugap has to
find the iterations from the repetition of the kernel sequence.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HIDDEN, BATCH, LAYERS = 4096, 512, 4


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["nocache", "cache"], required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--result")
    args = parser.parse_args()
    if args.variant == "nocache" and os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") != "1":
        # The allocator reads the variable when torch initialises CUDA: re-run with it set.
        os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])

    import torch

    torch.manual_seed(0)
    device = torch.device("cuda")
    layers = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(HIDDEN, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(BATCH, HIDDEN, device=device)
    y = torch.randint(0, 10, (BATCH,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    started = time.perf_counter()
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    result = {"variant": args.variant, "ms_per_step": round(wall / args.steps * 1e3, 3),
              "loss": float(loss)}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
