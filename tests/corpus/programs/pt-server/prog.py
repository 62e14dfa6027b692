"""An inference "server": the GPU waits for requests that a producer thread queues every 20 ms.

    python3 prog.py [--requests 100] [--period-ms 20]

A producer thread makes a request (a 512 x 256 float32 CPU tensor) every 20 ms on a
fixed schedule (``time.sleep`` to the next tick) and puts it on a ``queue.Queue``. The
main thread loops ``req = q.get()`` (blocking: it sleeps in the queue's condition
variable until the producer notifies it), uploads the request, runs a ~2-3 ms forward
pass (Linear 256->4096, seven Linear 4096x4096 + GELU, head to 16 classes, fp32 on 512
rows: ~0.12 TFLOP) and brings the answer back with ``.cpu()`` (the sync that returns the
result). Then it waits for the next request. The GPU is idle ~85 % of the time, every
gap being the launching thread blocked on another thread (the producer): thread-wait.
That is how a lightly loaded server looks, not a defect of the code.
NVTX: one range ``request N`` around the handling of each request (after ``q.get()``).
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time

import torch

FEATURES, HIDDEN, LAYERS, CLASSES, ROWS = 256, 4096, 7, 16, 512


def producer(q: queue.Queue, n: int, period_s: float) -> None:
    gen = torch.Generator().manual_seed(1)
    tick = time.perf_counter()
    for _ in range(n):
        tick += period_s
        time.sleep(max(0.0, tick - time.perf_counter()))
        q.put(torch.randn(ROWS, FEATURES, generator=gen))
    q.put(None)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--period-ms", type=float, default=20.0)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    mods: list[torch.nn.Module] = [torch.nn.Linear(FEATURES, HIDDEN), torch.nn.GELU()]
    for _ in range(LAYERS):
        mods += [torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU()]
    mods += [torch.nn.Linear(HIDDEN, CLASSES)]
    model = torch.nn.Sequential(*mods).to(device).eval()
    with torch.no_grad():                          # warm-up before serving
        model(torch.randn(ROWS, FEATURES, device=device)).cpu()

    q: queue.Queue = queue.Queue()
    thread = threading.Thread(target=producer, args=(q, args.requests, args.period_ms / 1e3))
    handled, handle_s, answers = 0, 0.0, 0
    started = time.perf_counter()
    thread.start()
    with torch.no_grad():
        while True:
            req = q.get()                          # blocks until the producer's next request
            if req is None:
                break
            torch.cuda.nvtx.range_push(f"request {handled}")
            t = time.perf_counter()
            out = model(req.to(device)).argmax(-1).cpu()   # the answer, back on the host
            answers += int(out[0])
            handle_s += time.perf_counter() - t
            torch.cuda.nvtx.range_pop()
            handled += 1
    thread.join()
    wall = time.perf_counter() - started

    result = {"requests": handled, "period_ms": args.period_ms,
              "handle_ms_mean": round(handle_s / max(handled, 1) * 1e3, 3),
              "busy_fraction_host": round(handle_s / wall, 4), "wall_s": round(wall, 3),
              "answers": answers}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
