"""Op-by-op JAX with no jit: 200 iterations of 23 tiny ops each, launch-bound.

What it does: a loop of 200 iterations over (256, 256) float32 arrays, each doing 23
jnp operations one after another in plain Python (2 matmuls, tanh, cos, sin, exp, adds,
multiplies, maximum, 2 means, ...). Without jax.jit every operation is dispatched on its
own: JAX looks up (and on first use compiles) a one-op XLA executable and PjRt launches
its kernel, one small kernel (or one small GEMM) per op: ~23-26 kernels an iteration,
~5,000 in all, each below XLA's minimum command-buffer size (no CUDA graphs).
All constants are device arrays made before the loop, so no op uploads a Python scalar,
and nothing reads a result back until the one block_until_ready at the end (the checksum
is then taken on the host, so no new op is compiled after the loop).

What is wrong with it (deliberately): each kernel works on 64K elements (a 256^3 GEMM at
most) and lasts ~2-6 us on an H100, while dispatching one eager op costs the host
~10-30 us (Python, JAX's dispatch, PjRt, cuLaunchKernel). The GPU therefore sits idle
between kernels waiting for the next launch most of the time: launch-bound, designed for
a steady-state GPU busy of roughly 10-40 %. Wrapping the iteration body in jax.jit would
fuse it into a few kernels launched by one call.

Iterations: exactly one jnp.cos per iteration (on nothing else), so the cosine kernel
marks the iterations (200). The first iteration compiles each op's executable
(XlaCompile ranges: start-up); the later ones reuse them.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

N = 256
OPS = 23      # jnp operations (eager dispatches) per iteration


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "gpu" and not args.allow_cpu:
        raise SystemExit(f"no GPU backend (found {jax.default_backend()})")

    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    w1 = jax.random.normal(k1, (N, N), jnp.float32) / 16.0
    w2 = jax.random.normal(k2, (N, N), jnp.float32) / 16.0
    b = jax.random.normal(k3, (N, N), jnp.float32)
    x = jax.random.normal(k4, (N, N), jnp.float32)
    half = jnp.full((N, N), 0.5, jnp.float32)     # device constants: no scalar uploads
    zero = jnp.zeros((N, N), jnp.float32)
    lr = jnp.full((N, N), 1e-3, jnp.float32)
    jax.block_until_ready((w1, w2, b, x, half, zero, lr))

    started = time.perf_counter()
    ops = 0
    for _ in range(args.iters):
        h = x @ w1                      # 1  GEMM
        h = h + b                       # 2
        h = jnp.tanh(h)                 # 3
        g = h * half                    # 4
        c = jnp.cos(g)                  # 5  the one cosine of the iteration (marker)
        h = h + c                       # 6
        m = jnp.mean(h)                 # 7  reduction
        h = h - m                       # 8
        h = jnp.maximum(h, zero)        # 9
        h = h @ w2                      # 10 GEMM
        s = jnp.sin(h)                  # 11
        h = h * s                       # 12
        e = jnp.exp(-jnp.abs(h))        # 13 abs, 14 neg, 15 exp
        h = h + e                       # 16
        v = jnp.mean(h * h)             # 17 mul, 18 reduction
        h = h / (jnp.sqrt(v) + half)    # 19 sqrt, 20 add, 21 div
        x = x - lr * h                  # 22 mul, 23 sub
        ops += OPS
    jax.block_until_ready(x)
    wall = time.perf_counter() - started

    result = {"program": "jax-eager", "iters": args.iters, "ops_per_iter": OPS,
              "ops": ops, "wall_s": round(wall, 3),
              "ms_per_iter": round(wall / args.iters * 1e3, 3),
              "us_per_op": round(wall / ops * 1e6, 2),
              "checksum": float(np.asarray(x).sum()), "device": str(jax.devices()[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
