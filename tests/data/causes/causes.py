"""Real captures of the causes the canned scenarios do not produce, each beside a control.

Profiled on the GPU machine with gpugap's own settings (see README.md in this folder):

    gpugap profile --out DIR python3 tests/data/causes/causes.py --part streams
    CUDA_DEVICE_MAX_CONNECTIONS=1 gpugap profile --out DIR \\
        python3 tests/data/causes/causes.py --part connections

Each pattern runs in its own NVTX range (domain gpugap), next to a control range that
does the same work without the mistake:

- explicit-sync: kernels alternate over 2 streams, the host syncs after each
  -> serialized-streams/explicit-sync; control no-sync: one sync at the end, overlap.
- host-func-queued: a 1 ms host function between two kernels of a stream
  -> launch-gap/queued-wait.
- host-func-sync: the same, and the host syncs before launching the next kernel
  -> launch-gap/sync-wait.
- host-sleep (control of both): the host itself sleeps 1 ms between the launches
  -> launch-gap/host-launch-latency.
- single-buffer: copy and compute on 2 streams sharing one buffer, ordered by events
  -> copy-compute-serialized/dependency; control double-buffer: overlap.
- depth-first: 3 kernels per stream on 4 streams, stream by stream; record-after-each:
  round-robin with an event recorded after each kernel; breadth-first: round-robin.
  With the default 8 hardware queues all three overlap (97.8-99.0% on an H200). With
  CUDA_DEVICE_MAX_CONNECTIONS=1 (one queue) depth-first fell to 49.8%: each stream's
  second kernel waits in the one queue for its first, holding back the next stream's
  work, yet the last kernel of one stream still overlaps the first of the next, so there
  is no serialized chain for serialized-streams to report; record-after-each and
  breadth-first stayed at 97.8% / 98.9%. That run is not committed.

torch.cuda._sleep(cycles) is a one-thread spin kernel: long enough to see, tiny in
resources, so any serialization is the stream machinery's, never the GPU being full.
The host function is libc's usleep itself, handed to cuLaunchHostFunc with the
microseconds as its user data: it runs on the driver's thread without Python.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time

import nvtx
import torch

DOMAIN = "gpugap"
KERNEL_US = 300          # each spin kernel
HOST_FUNC_US = 1000      # each host function / host sleep


def spin_cycles(us: float) -> int:
    """Cycles of torch.cuda._sleep that take about *us* microseconds on this GPU."""
    probe = 2_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(probe)                       # loads the module first
    torch.cuda.synchronize()
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    per_us = probe / (start.elapsed_time(end) * 1e3)
    return int(us * per_us)


class HostFunc:
    """cuLaunchHostFunc(stream, usleep, us): a host function that sleeps in the stream."""

    def __init__(self) -> None:
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.cuda.cuLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                               ctypes.c_void_p]
        self.cuda.cuLaunchHostFunc.restype = ctypes.c_int
        libc = ctypes.CDLL("libc.so.6")
        self.usleep = ctypes.cast(libc.usleep, ctypes.c_void_p).value

    def __call__(self, stream: torch.cuda.Stream, us: int) -> None:
        rc = self.cuda.cuLaunchHostFunc(stream.cuda_stream, self.usleep, ctypes.c_void_p(us))
        if rc != 0:
            raise RuntimeError(f"cuLaunchHostFunc failed: CUresult {rc}")


def streams_part(cycles: int, results: dict) -> None:
    s = [torch.cuda.Stream() for _ in range(4)]
    host_func = HostFunc()
    n = 12

    with nvtx.annotate("explicit-sync", domain=DOMAIN):
        for i in range(n):
            with torch.cuda.stream(s[i % 2]):
                torch.cuda._sleep(cycles)
            s[i % 2].synchronize()          # the mistake: a host sync after every launch
    with nvtx.annotate("no-sync", domain=DOMAIN):
        for i in range(n):
            with torch.cuda.stream(s[i % 2]):
                torch.cuda._sleep(cycles)
        torch.cuda.synchronize()

    with nvtx.annotate("host-func-queued", domain=DOMAIN):
        for _ in range(6):
            with torch.cuda.stream(s[0]):
                torch.cuda._sleep(cycles)
                host_func(s[0], HOST_FUNC_US)
                torch.cuda._sleep(cycles)   # queued at once, held by the host function
        torch.cuda.synchronize()
    with nvtx.annotate("host-func-sync", domain=DOMAIN):
        for _ in range(6):
            with torch.cuda.stream(s[0]):
                torch.cuda._sleep(cycles)
                host_func(s[0], HOST_FUNC_US)
            s[0].synchronize()              # the host waits for the host function
            with torch.cuda.stream(s[0]):
                torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
    with nvtx.annotate("host-sleep", domain=DOMAIN):
        for _ in range(6):
            with torch.cuda.stream(s[0]):
                torch.cuda._sleep(cycles)
            s[0].synchronize()
            time.sleep(HOST_FUNC_US / 1e6)  # the host is late: nothing in the stream
            with torch.cuda.stream(s[0]):
                torch.cuda._sleep(cycles)
        torch.cuda.synchronize()

    copy_compute(results)
    launch_orders(cycles, s)


def copy_compute(results: dict) -> None:
    copy_s, compute_s = torch.cuda.Stream(), torch.cuda.Stream()
    batches = 8
    host = [torch.full((4096, 4096), float(b + 1)).pin_memory() for b in range(batches)]
    weight = torch.randn(4096, 4096, device="cuda") / 64
    bufs = [torch.empty(4096, 4096, device="cuda") for _ in range(2)]
    sums = {}
    for name, nbuf in (("single-buffer", 1), ("double-buffer", 2)):
        out = []
        freed: list[torch.cuda.Event | None] = [None] * nbuf   # compute done with buffer
        with nvtx.annotate(name, domain=DOMAIN):
            for b in range(batches):
                slot = b % nbuf
                with torch.cuda.stream(copy_s):
                    # The copy into a buffer waits until the compute reading it is done.
                    # One buffer: that is the previous batch's compute, so copy and
                    # compute take turns. Two: the batch before that, so they overlap.
                    if freed[slot] is not None:
                        copy_s.wait_event(freed[slot])
                    bufs[slot].copy_(host[b], non_blocking=True)
                    ready = torch.cuda.Event()
                    ready.record(copy_s)
                with torch.cuda.stream(compute_s):
                    compute_s.wait_event(ready)
                    out.append(torch.relu(bufs[slot] @ weight).sum())
                    freed[slot] = torch.cuda.Event()
                    freed[slot].record(compute_s)
            torch.cuda.synchronize()
        sums[name] = [float(v) for v in out]
    # Same inputs, same math: both orderings must give the same results.
    results["copy_compute_sums"] = sums["single-buffer"]
    results["copy_compute_match"] = all(
        abs(a - b) <= 1e-3 * max(1.0, abs(a))
        for a, b in zip(sums["single-buffer"], sums["double-buffer"], strict=True))


def launch_orders(cycles: int, s: list[torch.cuda.Stream]) -> None:
    with nvtx.annotate("depth-first", domain=DOMAIN):
        for stream in s:
            with torch.cuda.stream(stream):
                for _ in range(3):
                    torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
    with nvtx.annotate("record-after-each", domain=DOMAIN):
        # An event recorded after each kernel (for timing, or for a later wait). The
        # guess that a record holds a single hardware queue until its kernel is done
        # did not hold on an H200: this still overlapped with one queue (module doc).
        for _ in range(3):
            for stream in s:
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(cycles)
                    torch.cuda.Event().record(stream)
        torch.cuda.synchronize()
    with nvtx.annotate("breadth-first", domain=DOMAIN):
        for _ in range(3):
            for stream in s:
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(cycles)
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("streams", "connections"), default="streams")
    parser.add_argument("--result", help="write a JSON summary here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("causes.py needs a CUDA GPU", file=sys.stderr)
        return 2
    results: dict = {"part": args.part, "gpu": torch.cuda.get_device_name()}
    with nvtx.annotate("setup", domain=DOMAIN):
        cycles = spin_cycles(KERNEL_US)
        results["spin_cycles"] = cycles
        warm = torch.randn(4096, 4096, device="cuda")
        (warm @ warm).relu().sum().item()
        torch.cuda.synchronize()
    if args.part == "streams":
        streams_part(cycles, results)
        ok = results["copy_compute_match"]
    else:
        launch_orders(cycles, [torch.cuda.Stream() for _ in range(4)])
        ok = True
    results["check_ok"] = ok
    print(json.dumps(results))
    if args.result:
        with open(args.result, "w") as f:
            json.dump(results, f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
