"""A jitted JAX training loop whose every batch is built on the host in numpy first.

What it does: a 3-layer fp32 MLP classifier (1024 -> 5120 -> 5120 -> 16, ReLU, 31.5 M
parameters, 126 MB; matmuls at ``Precision.HIGHEST``, i.e. true fp32, no TF32) is
trained by one ``jax.jit`` step (``jax.value_and_grad`` of a softmax cross-entropy, then
a hand-written SGD update, parameters donated). Each of the 120 steps, serially:

  1. the host builds the next batch in numpy (``make_batch``): 256 "images" of 40 x 40
     drawn with ``Generator.standard_normal(dtype=float32)`` (the stand-in for decoding),
     one random 32 x 32 crop for the batch, a horizontal flip of a random half of the
     images (``np.where`` over a reversed view), per-image normalisation (mean and
     standard deviation over the pixels), flattened to a 256 x 1024 float32 array, plus
     256 int32 labels: ~4-8 ms of single-threaded numpy (median 6-8 ms on the noisy
     2-core VM this was written on, which ran the numpy post-processing of jax-host-loop
     ~1.3x slower than the capture machine did: ~5-6.5 ms expected there);
  2. uploads it with ``jax.device_put((x, y))`` (1 MB host-to-device);
  3. calls the jitted step, and does not wait for it: no ``float()``, no
     ``device_get``, no ``block_until_ready`` inside the loop (one ``block_until_ready``
     after it).

What is wrong with it: the input pipeline runs on the training thread. JAX dispatches
asynchronously, so the GPU runs step i while the host builds batch i + 1, but the step
(~1.0-1.8 ms of GPU work: ~46 GFLOP of fp32 GEMMs at ~30-45 TFLOP/s for a 256-row batch,
plus a ~0.15 ms SGD update over 126 MB of parameters) is much shorter than building a
batch, so the GPU finishes and waits for the next upload most of every step: input-bound.
Designed figures: steady period ~ the host's batch time + upload + dispatch ~5-7.5 ms
(4.5-8.5 at the extremes), GPU busy ~1.0-1.8 ms of it: idle waiting for input ~65-85 %
of the steady state (widest plausible 50-90 %), 120 steps (~0.6-0.9 s of loop). The
fix is to prepare batches ahead in a background thread or process (a prefetching
loader), or on the GPU.

Nothing else is wrong: no sync, no device-to-host copy and no recompilation in the loop
(every batch has the same shape and dtype); XLA compiles the step at the first call
(start-up). Iterations: 120 calls of the jitted train step (one XLA executable, likely
run as a command buffer / CUDA graph once warmed up), each preceded by two small
host-to-device copies. No NVTX from the program.
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

LR = 1e-2
HIGHEST = jax.lax.Precision.HIGHEST


def init_params(key, sizes: tuple[int, ...]):
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for k, fan_in, fan_out in zip(keys, sizes[:-1], sizes[1:]):
        w = jax.random.normal(k, (fan_in, fan_out), jnp.float32) * np.sqrt(2.0 / fan_in)
        params.append((w, jnp.zeros((fan_out,), jnp.float32)))
    return params


def loss_fn(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(jnp.dot(h, w, precision=HIGHEST) + b)
    w, b = params[-1]
    logits = jnp.dot(h, w, precision=HIGHEST) + b
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


@partial(jax.jit, donate_argnums=(0,))
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    new = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
    return new, loss


def make_batch(rng: np.random.Generator, batch: int, raw: int, crop: int, classes: int):
    """Host-side input pipeline: 'decode', random crop, random flip, normalise."""
    images = rng.standard_normal((batch, raw, raw), dtype=np.float32)
    oy, ox = rng.integers(0, raw - crop + 1, size=2)
    view = images[:, oy:oy + crop, ox:ox + crop]
    flip = rng.random(batch) < 0.5
    view = np.where(flip[:, None, None], view[:, :, ::-1], view)
    mean = view.mean(axis=(1, 2), keepdims=True)
    std = view.std(axis=(1, 2), keepdims=True)
    x = ((view - mean) / (std + np.float32(1e-5))).reshape(batch, crop * crop)
    y = rng.integers(0, classes, size=batch, dtype=np.int32)
    return np.ascontiguousarray(x, dtype=np.float32), y


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--raw", type=int, default=40, help="side of a generated image")
    parser.add_argument("--crop", type=int, default=32, help="side of the model's input")
    parser.add_argument("--hidden", type=int, default=5120)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if jax.default_backend() != "gpu" and not args.allow_cpu:
        raise SystemExit(f"no GPU backend (found {jax.default_backend()})")

    sizes = (args.crop * args.crop, args.hidden, args.hidden, args.classes)
    params = jax.jit(partial(init_params, sizes=sizes))(jax.random.key(0))
    jax.block_until_ready(params)
    n_params = sum(int(w.size) + int(b.size) for w, b in params)

    rng = np.random.default_rng(0)
    prep_s = 0.0
    loss = None
    started = time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        x_host, y_host = make_batch(rng, args.batch, args.raw, args.crop, args.classes)
        prep_s += time.perf_counter() - t0
        x, y = jax.device_put((x_host, y_host))         # host-to-device upload
        params, loss = train_step(params, x, y)         # async dispatch, no wait
    jax.block_until_ready((params, loss))               # the one sync of the loop
    wall = time.perf_counter() - started

    flop = 6 * args.batch * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    checksum = float(jnp.sum(params[-1][0]))
    result = {"program": "jax-host-input", "steps": args.steps, "batch": args.batch,
              "wall_s": round(wall, 3), "ms_per_step": round(wall / args.steps * 1e3, 3),
              "prep_ms_per_step": round(prep_s / args.steps * 1e3, 3),
              "params": n_params, "flop_per_step": flop,
              "final_loss": round(float(loss), 6), "checksum": round(checksum, 6),
              "device": str(jax.devices()[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
