"""A JAX evaluation loop that post-processes every step's logits in numpy, serially.

What it does: a jitted evaluation step (an 8-layer 4096-wide bf16 MLP over 128 sequences
of 64 tokens = 8192 rows, mean-pooled, then a 4096 x 6144 output layer: float32 logits of
128 x 6144, 3 MB) runs over 4 device-resident batches in turn, 100 steps. After every step
the loop does ``jax.device_get(logits)`` (waits for the step, copies 3 MB back) and then
heavy numpy post-processing of the logits on the host: a softmax over the 6144 classes,
then for each of the 128 samples an argpartition for its 64 best classes, an argsort of
those and a small top-5 record (~5-8 ms of host work on a server CPU; 12 ms on the 2-core
VM this was written on). Only then does it dispatch the next step.

What is wrong with it (deliberately): the next step depends on nothing the host computes,
yet the program is written serially, so the GPU idles for the whole numpy work of every
step: each step is ~2.2 TFLOP of bf16 GEMMs, ~3-5 ms on an H100, followed by ~0.5 ms of
copy and ~5-8 ms of host work on the results just copied back (results-work): designed
for ~50-65 % of the steady state lost. Dispatching step i+1 before post-processing the
results of step i (JAX's async dispatch does the rest) would hide the host work.

Iterations: 100 calls of jit_eval_step (XlaModule ranges), each one XLA command buffer
(CUDA graph) once recorded, each followed by one device-to-host copy of the logits.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np


def init_params(key, width: int, layers: int, classes: int):
    keys = jax.random.split(key, layers + 1)
    scale = 1.0 / np.sqrt(width)
    body = [(jax.random.normal(k, (width, width), jnp.float32) * scale).astype(jnp.bfloat16)
            for k in keys[:-1]]
    head = (jax.random.normal(keys[-1], (width, classes), jnp.float32) * scale
            ).astype(jnp.bfloat16)
    return body, head


def make_batches(key, n: int, batch: int, seq: int, width: int):
    return [jax.random.normal(k, (batch, seq, width), jnp.bfloat16)
            for k in jax.random.split(key, n)]


@jax.jit
def eval_step(params, x):
    body, head = params
    h = x
    for w in body:
        h = jax.nn.gelu(h @ w)
    pooled = jnp.mean(h.astype(jnp.float32), axis=1).astype(jnp.bfloat16)
    return (pooled @ head).astype(jnp.float32)


def postprocess(logits: np.ndarray, k: int = 64) -> list[dict]:
    """Host-side work on one step's logits: a softmax over the classes, then per sample
    the k best classes (argpartition), ranked (argsort), and a small result record."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    records = []
    for row in p:
        cand = np.argpartition(row, -k)[-k:]
        top = cand[np.argsort(row[cand])[::-1]]
        records.append({"ids": top[:5].tolist(), "probs": row[top[:5]].tolist(),
                        "mass": float(row[cand].sum())})
    return records


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--classes", type=int, default=6144)
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "gpu" and not args.allow_cpu:
        raise SystemExit(f"no GPU backend (found {jax.default_backend()})")

    kp, kd = jax.random.split(jax.random.key(0))
    params = jax.jit(partial(init_params, width=args.width, layers=args.layers,
                             classes=args.classes))(kp)
    batches = jax.jit(partial(make_batches, n=4, batch=args.batch, seq=args.seq,
                              width=args.width))(kd)
    jax.block_until_ready((params, batches))

    started = time.perf_counter()
    host_s = 0.0
    records = None
    for step in range(args.steps):
        logits = eval_step(params, batches[step % len(batches)])
        host = jax.device_get(logits)             # waits for the step, copies 3 MB back
        t0 = time.perf_counter()
        records = postprocess(host)                 # the GPU idles meanwhile
        host_s += time.perf_counter() - t0
    wall = time.perf_counter() - started

    rows = args.batch * args.seq
    flop = 2 * rows * args.layers * args.width ** 2 + 2 * args.batch * args.width * args.classes
    result = {"program": "jax-host-loop", "steps": args.steps, "wall_s": round(wall, 3),
              "ms_per_step": round(wall / args.steps * 1e3, 3),
              "postprocess_ms_per_step": round(host_s / args.steps * 1e3, 3),
              "logits_bytes": args.batch * args.classes * 4, "flop_per_step": flop,
              "last": records[0] if records else None, "device": str(jax.devices()[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
