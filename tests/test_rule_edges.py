"""Edge cases of every rule and cause, on hand-built traces (gpugap.report.builder): for
each cause of each rule in the registry, a trace where it must fire with that cause and a
near miss where it must stay silent (a gap just under a threshold, a copy from pinned
memory, overlapping streams, a grid covering half the SMs, an NCCL kernel...).

These traces are hand-built, not captured: they prove where each rule draws its lines.
That each verdict is right on real programs is proven on the real captures
(tests/rules/test_<rule>.py, tests/test_captures.py).

Times are in microseconds from the builder's origin. Each case is analyzed twice: with
``iteration="none"`` (no iterations: the steady state is everything from the first GPU
operation on, after the last module load, so the numbers are easy to follow), and with
iterations found as gpugap finds them (a repeating kernel sequence makes iterations, and
phases move): what a rule decides must not depend on that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from gpugap import rules
from gpugap.analysis import Analysis, analyze
from gpugap.report.builder import TraceBuilder

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


@dataclass
class Case:
    rule: str
    cause: str
    fires: bool
    build: Callable[[], TraceBuilder]
    why: str
    # A near miss: the (rule, cause) its time goes to instead, where there is one.
    instead: tuple[str, str] | None = None
    # The cause exists only with iterations (a save every N of them, loads in most of
    # them): without, silent.
    needs_iterations: bool = False

    @property
    def id(self) -> str:
        return f"{self.rule}/{self.cause}/{'fires' if self.fires else 'silent'}:{self.why}"


def back_to_back(b: TraceBuilder, start: float, n: int, dur: float, gap: float = 0.0,
                 name: str = "gemm", **kw) -> float:
    """n kernels of *dur* us, *gap* us apart, each launched (by default) 10 us before it
    starts; returns the end of the last."""
    t = start
    for _ in range(n):
        b.kernel(name, start_us=t, dur_us=dur, **kw)
        t += dur + gap
    return t - gap


# --- launch-gap -------------------------------------------------------------------------

def gaps_of(gap: float, n: int = 20, dur: float = 50.0) -> Callable[[], TraceBuilder]:
    """Kernels separated by idle gaps of *gap* us, the thread outside CUDA meanwhile (its
    launch call comes 10 us before each kernel)."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        back_to_back(b, 0, n, dur, gap)
        return b
    return build


def launch_bound_share(share_pct: float) -> Callable[[], TraceBuilder]:
    """Gaps of 20 us between kernels sized so the gaps hold *share_pct* of the time."""
    dur = 20.0 * (100.0 / share_pct - 1.0)
    return gaps_of(20.0, n=40, dur=dur)


def sync_wait(drains: bool) -> Callable[[], TraceBuilder]:
    """The host waits for each kernel: launched, then synchronized (the GPU drains, and
    the next kernel comes 15 us after the sync returned); or, not draining, each kernel
    is launched before the host waits for the one before it (cudaEventSynchronize)."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        for i in range(10):
            if drains:
                t = 130.0 * i
                b.kernel("step", start_us=t, dur_us=100, launch_us=t - 10)
                b.sync(start_us=t - 5, end_us=t + 102)
            else:
                t = 100.0 * i
                b.kernel("step", start_us=t, dur_us=100, launch_us=t - 95 if i else -10)
                if i:
                    b.sync("cudaEventSynchronize", start_us=t - 91, end_us=t + 2)
        return b
    return build


def held_in(call: str, overlapped: bool) -> Callable[[], TraceBuilder]:
    """The host sits in *call* for 250 us after launching each 100 us kernel; the next
    kernel comes after it. *overlapped*: a long kernel on another stream keeps the GPU
    busy meanwhile."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for _ in range(8):
            b.kernel("step", start_us=t, dur_us=100, launch_us=t - 10)
            b.call(call, start_us=t, end_us=t + 250)
            t += 270
        if overlapped:
            b.kernel("background", start_us=-5, dur_us=t + 10, stream=b.stream(13),
                     launch_us=-20)
        return b
    return build


def blocked_copy(src: str) -> Callable[[], TraceBuilder]:
    """A cudaMemcpyAsync from *src* host memory after each kernel: pageable memory holds
    the thread until the copy (staged at the end of the call) is done; pinned returns."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for _ in range(8):
            b.kernel("step", start_us=t, dur_us=50, launch_us=t - 10)
            if src == "Pageable":
                b.memcpy("H2D", bytes=4 << 20, src=src, start_us=t + 250, dur_us=50,
                         api_us=(t + 10, t + 302))
                t += 310
            else:
                b.memcpy("H2D", bytes=4 << 20, src=src, start_us=t + 50, dur_us=50,
                         api_us=(t + 10, t + 13))
                t += 100
        return b
    return build


def sync_copy(kind: str, bytes_: int, held_us: float) -> Callable[[], TraceBuilder]:
    """A synchronous cudaMemcpy after each kernel, holding the thread *held_us*; the copy
    itself runs in the last 20 us of the call."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for _ in range(8):
            b.kernel("step", start_us=t, dur_us=50, launch_us=t - 10)
            b.memcpy(kind, bytes=bytes_, start_us=t + 10 + held_us - 20, dur_us=20,
                     api="cudaMemcpy", api_us=(t + 10, t + 10 + held_us))
            t += held_us + 20
        return b
    return build


def module_load(overlapped: bool) -> Callable[[], TraceBuilder]:
    """The thread loads a module for 2 ms between two kernels (lazy loading), or while a
    long kernel keeps the GPU busy."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        first = 2500.0 if overlapped else 100.0
        b.kernel("init", start_us=0, dur_us=first, launch_us=-10)
        b.call("cuLibraryLoadData", start_us=110, end_us=2110)
        back_to_back(b, 2600, 10, 100)
        return b
    return build


def compiled(kernel: str) -> Callable[[], TraceBuilder]:
    """1 ms outside CUDA (compiling), loading the new module, then launching *kernel*:
    a Triton kernel makes the gap compilation, any other kernel module loading."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        b.kernel("init", start_us=0, dur_us=100, launch_us=-10)
        b.call("cuModuleLoadData", start_us=1100, end_us=1300)
        b.kernel(kernel, start_us=1320, dur_us=100, launch_us=1305)
        back_to_back(b, 1420, 10, 100)
        return b
    return build


def input_upload(bytes_: int) -> Callable[[], TraceBuilder]:
    """300 us outside CUDA before each batch's host-to-device copy of *bytes_* bytes
    (65536: a batch, gpugap.accounting.Settings.input_min_bytes)."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for _ in range(8):
            b.memcpy("H2D", bytes=bytes_, start_us=t, dur_us=20)
            b.kernel("step", start_us=t + 25, dur_us=100)
            t += 125 + 300
        return b
    return build


def queued(held_us: float) -> Callable[[], TraceBuilder]:
    """The next kernel is launched long before the GPU is free, yet starts *held_us*
    after the one before ends (a host function in its stream holds it)."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for i in range(10):
            # The first launched just in time, the others while it runs.
            launch = -10.0 if i == 0 else 5.0 * i
            b.kernel("step", start_us=t, dur_us=100, launch_us=launch)
            b.call("cudaLaunchHostFunc", start_us=launch + 3.5, end_us=launch + 4.5)
            t += 100 + held_us
        return b
    return build


def unlaunched(api: str | None) -> Callable[[], TraceBuilder]:
    """Kernels 200 us apart whose launch calls are missing from the report (api=None),
    or present."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        for i in range(10):
            b.kernel("step", start_us=300.0 * i, dur_us=100, api=api)
        return b
    return build


def results(read_back: int) -> Callable[[], TraceBuilder]:
    """Each 500 us kernel's output copied back (*read_back* bytes, cudaMemcpy into
    pageable memory), then 400 us outside CUDA before the next launch: work on results
    (a batch's output), or after a scalar read back (.item()) host work."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for _ in range(10):
            b.kernel("step", start_us=t, dur_us=500, launch_us=t - 10)
            b.memcpy("D2H", bytes=read_back, start_us=t + 500, dur_us=20, dst="Pageable",
                     api="cudaMemcpy", api_us=(t - 5, t + 522))
            t += 520 + 400
        return b
    return build


def waiting(osrt: str | None) -> Callable[[], TraceBuilder]:
    """Kernels of 300 us, 2 ms apart: meanwhile the launching thread waits in *osrt* (an
    OS runtime call: a condition variable, a sleep), or (None) works outside CUDA."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for _ in range(10):
            b.kernel("step", start_us=t, dur_us=300, launch_us=t - 10)
            if osrt is not None:
                b.osrt(osrt, start_us=t + 300, end_us=t + 2200)
            t += 2300
        return b
    return build


def peer_wait(linked: bool) -> Callable[[], TraceBuilder]:
    """Two GPUs: GPU 1's kernels are launched early but start only after GPU 0's (200 us)
    end; *linked*: GPU 0 sends its output to GPU 1 (a peer copy) each time."""
    def build() -> TraceBuilder:
        b = TraceBuilder(devices=2)
        s1 = b.stream(14, device=1)
        t = 0.0
        for i in range(10):
            b.kernel("stage1", start_us=t, dur_us=200, launch_us=max(t - 10, 1.0 * i))
            if linked:
                b.memcpy("P2P", bytes=1 << 20, start_us=t + 200, dur_us=10,
                         peer=(0, 1), api_us=(1.0 * i + 0.2, 1.0 * i + 0.5))
            b.kernel("stage2", start_us=t + 215, dur_us=200, device=1, stream=s1,
                     launch_us=1.0 * i + 0.6)
            t += 430
        return b
    return build


def churn(every: bool) -> Callable[[], TraceBuilder]:
    """12 steps of 4 kernels; a module load of 300 us before the first kernel of every
    step (*every*), or of the first step only (a one-time lazy load)."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for i in range(12):
            b.nvtx(f"step {i}", start_us=t - 20, end_us=t + 700)
            if every or i == 0:
                b.call("cuModuleLoadData", start_us=t - 15, end_us=t + 300)
                t += 310
            back_to_back(b, t, 4, 100)
            t += 450
        return b
    return build


def saves(read_back_mib: int) -> Callable[[], TraceBuilder]:
    """12 steps of 1 ms; every 4th copies *read_back_mib* MiB off the GPU and writes it to
    a file (3 ms) before the next step."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for i in range(12):
            b.nvtx(f"step {i}", start_us=t - 20, end_us=t + 1000)
            back_to_back(b, t, 4, 240)
            t += 1000
            if i % 4 == 3:
                b.memcpy("D2H", bytes=read_back_mib << 20, start_us=t, dur_us=800,
                         dst="Pageable", api="cudaMemcpy", api_us=(t - 10, t + 810))
                b.osrt("write", start_us=t + 820, end_us=t + 3800)
                t += 3850
        return b
    return build


# --- first-use --------------------------------------------------------------------------

def first_use(kind: str | None, near_miss: bool = False) -> Callable[[], TraceBuilder]:
    """12 steps of 4 'gemm' kernels (100 us each); step 8 is slow and, per *kind*:
    'autotuning' runs 40 'gemm' kernels with a cudaDeviceSynchronize after every fourth
    (10; a near miss: 2 syncs and 2 extra kernels); 'compilation' compiles for 2 ms (XLA's
    XlaCompile range) before its kernels (a near miss: in every step, 100 us); 'module-load'
    loads a module, then runs 4 kernels never run before, 'fresh0' to 'fresh3' (a near
    miss: 2 of them); 'new-work' runs the 4 new kernels after a 2 ms pause (a near miss:
    2 'gemm' kernels more, 2 ms late: the same work, late)."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        t = 0.0
        for i in range(12):
            start = t
            if kind == "compilation" and (i == 8 or near_miss):
                b.nvtx("XlaCompile:#module=step#", start_us=t, end_us=t + (100 if near_miss
                                                                          else 2000),
                       domain="TSL")
                t += 100 if near_miss else 2000
            if i == 8 and kind in ("module-load", "new-work"):
                if kind == "module-load":
                    b.call("cuModuleLoadData", start_us=t, end_us=t + 300)
                t += 2000
                for k in range(2 if near_miss else 4):
                    b.kernel("gemm" if near_miss and kind == "new-work" else f"fresh{k}",
                             start_us=t, dur_us=100)
                    t += 100
            if i == 8 and kind == "autotuning":
                for k in range(6 if near_miss else 40):
                    b.kernel("gemm", start_us=t, dur_us=100)
                    t += 100
                    if k % 4 == 3 and (not near_miss or k < 8):
                        b.sync("cudaDeviceSynchronize", start_us=t - 50, end_us=t + 30)
                        t += 40
                t += 1000
            t = back_to_back(b, t, 4, 100) + 50
            b.nvtx(f"step {i}", start_us=start - 20, end_us=t - 25)
        return b
    return build


# --- serialized-streams -----------------------------------------------------------------

def alternating(n: int = 6, *, late: bool = False, overlap: bool = False,
                streams: tuple[int, int] = (13, 14), non_blocking: bool = False,
                grid: tuple[int, int, int] | None = None, between: str | None = None
                ) -> Callable[[], TraceBuilder]:
    """n kernels of 100 us alternating between two streams. *late*: each launched only
    after the one before ended; else all launched while the first runs. *overlap*: they
    run concurrently instead of one after another. *between*: a call made between
    launches."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        for s in streams:
            if s != b.null_stream:
                b.stream(s, non_blocking=non_blocking)
        for i in range(n):
            start = 50.0 * i if overlap else 110.0 * i
            # Late: launched once the one before ended; else while the first runs.
            launch = start - 8 if late or i == 0 else 5.0 * i
            b.kernel("expert", start_us=start, dur_us=100, stream=streams[i % 2], grid=grid,
                     launch_us=launch)
            if between and i < n - 1:
                b.call(between, start_us=launch + 3.5, end_us=launch + 4.5)
        return b
    return build


# --- shared-gpu -------------------------------------------------------------------------

def two_processes(side_by_side: bool) -> Callable[[], TraceBuilder]:
    """Two processes on GPU 0, 'gemm' kernels of 100 us each when alone: four of each
    alone first, then twenty rounds where, side by side, both processes' kernels run at
    once and take 200 us (the GPU time-sliced); else they take turns, 100 us each."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        other = b.thread(2000, "python", pid=2)
        t = 0.0
        for thread in (None, other):
            for _ in range(4):
                b.kernel("gemm", start_us=t, dur_us=100, thread=thread)
                t += 110
        for _ in range(20):
            if side_by_side:
                b.kernel("gemm", start_us=t, dur_us=200)
                b.kernel("gemm", start_us=t + 1, dur_us=200, thread=other)
                t += 210
            else:
                b.kernel("gemm", start_us=t, dur_us=100)
                b.kernel("gemm", start_us=t + 105, dur_us=100, thread=other)
                t += 210
        return b
    return build


# --- small-grid -------------------------------------------------------------------------

def grids(blocks: int, *, name: str = "tiny", streams: int = 1) -> Callable[[], TraceBuilder]:
    """20 rounds of kernels of *blocks* blocks, one per stream, running side by side."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        for i in range(20):
            for s in range(streams):
                b.kernel(name, start_us=110.0 * i, dur_us=100, grid=(blocks, 1, 1),
                         stream=b.stream(13 + s, non_blocking=True),
                         launch_us=-400 + 4.0 * (i * streams + s))
        return b
    return build


# --- warmup-latency ---------------------------------------------------------------------

def with_work(add: Callable[[TraceBuilder], None]) -> Callable[[], TraceBuilder]:
    """GPU work from 0 to 10 ms (so the trace has a device), plus *add*'s host events."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        back_to_back(b, 0, 20, 500)
        add(b)
        return b
    return build


def loads(total_us: float) -> Callable[[TraceBuilder], None]:
    def add(b: TraceBuilder) -> None:
        for i in range(4):
            start = 100.0 * i - 1000
            b.call("cuLibraryLoadData", start_us=start, end_us=start + total_us / 4)
    return add


def library_range(name: str, domain: str, dur: float) -> Callable[[TraceBuilder], None]:
    def add(b: TraceBuilder) -> None:
        b.nvtx(name, start_us=-3000, end_us=-3000 + dur, domain=domain)
    return add


def first_call(name: str, first: float, later: float) -> Callable[[TraceBuilder], None]:
    def add(b: TraceBuilder) -> None:
        b.call(name, start_us=-5000, end_us=-5000 + first)
        for i in range(3):
            b.call(name, start_us=1000.0 * i + 200, end_us=1000.0 * i + 200 + later)
    return add


def steps(count: int, first: float) -> Callable[[TraceBuilder], None]:
    """NVTX 'step' ranges of 500 us (the first lasting *first* us)."""
    def add(b: TraceBuilder) -> None:
        t = 0.0
        for i in range(count):
            dur = first if i == 0 else 500.0
            b.nvtx("step", start_us=t - 20, end_us=t - 20 + dur)
            t += dur
    return add


# --- copy-compute-serialized ------------------------------------------------------------

def turns(copy_stream: int | None, copy_us: float = 60.0, n: int = 5,
          overlapped: bool = False) -> Callable[[], TraceBuilder]:
    """Kernel, copy, kernel... on the legacy stream, the copies on *copy_stream* (None:
    the kernels' stream). *overlapped*: a kernel on another stream runs beside each copy."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        if copy_stream is not None:
            b.stream(copy_stream)
        t = 0.0
        for _ in range(n):
            b.kernel("compute", start_us=t, dur_us=100)
            b.memcpy("H2D", bytes=1 << 20, start_us=t + 110, dur_us=copy_us,
                     stream=copy_stream)
            if overlapped:
                b.kernel("side", start_us=t + 105, dur_us=copy_us + 10,
                         stream=b.stream(20, non_blocking=True))
            t += 120 + copy_us
        b.kernel("compute", start_us=t, dur_us=100)
        return b
    return build


# --- exposed-communication --------------------------------------------------------------

def collectives(comm_stream: int | None, *, hidden: bool = False, middle: bool = False
                ) -> Callable[[], TraceBuilder]:
    """1 ms of compute and an all-reduce of 300 us, four times; the all-reduce on
    *comm_stream* (None: the compute's stream) after the compute, or in the *middle* of
    it (between two halves), or *hidden* under it."""
    def build() -> TraceBuilder:
        b = TraceBuilder()
        if comm_stream is not None:
            b.stream(comm_stream, non_blocking=True)
        t = 0.0
        for _ in range(4):
            if middle:
                b.kernel("backward", start_us=t, dur_us=500)
                b.kernel(NCCL, start_us=t + 500, dur_us=300, stream=comm_stream,
                         grid=(4, 1, 1))
                b.kernel("backward", start_us=t + 800, dur_us=500)
            else:
                b.kernel("backward", start_us=t, dur_us=1000)
                b.kernel(NCCL, start_us=t + (300 if hidden else 1000), dur_us=300,
                         stream=comm_stream, grid=(4, 1, 1))
            t += 1000 if hidden else 1300
        return b
    return build


def two_ranks(late_by: float) -> Callable[[], TraceBuilder]:
    """Two processes on two GPUs, each computing then all-reducing; rank 1 computes
    *late_by* us longer, and both all-reduces end together."""
    def build() -> TraceBuilder:
        b = TraceBuilder(devices=2)
        ranks = [(0, b.main), (1, b.thread(2, "rank 1", pid=2))]
        for device, pid in ((0, 1), (1, 2)):
            b.stream(20, non_blocking=True, device=device, pid=pid)
        t = 0.0
        for _ in range(4):
            for device, thread in ranks:
                compute = 1000 + (late_by if device else 0)
                b.kernel("backward", start_us=t, dur_us=compute, device=device,
                         thread=thread)
                b.kernel(NCCL, start_us=t + compute, dur_us=1000 + late_by - compute + 200,
                         device=device, thread=thread, stream=20, grid=(4, 1, 1))
            t += 1000 + late_by + 200
        return b
    return build


CASES = [
    # blocking-memcpy
    Case("blocking-memcpy", "pageable-async", True, blocked_copy("Pageable"),
         "cudaMemcpyAsync from pageable memory"),
    Case("blocking-memcpy", "pageable-async", False, blocked_copy("Pinned"),
         "the same from pinned memory",
         instead=("copy-compute-serialized", "same-stream")),
    Case("blocking-memcpy", "synchronous", True, sync_copy("D2H", 1 << 20, 50.0),
         "cudaMemcpy D2H held 50us"),
    Case("blocking-memcpy", "synchronous", False, sync_copy("D2H", 1 << 20, 49.0),
         "held 49us under min_blocked_us"),
    Case("blocking-memcpy", "synchronous", False, sync_copy("H2D", 64000, 250.0),
         "H2D of 64000 B, staged at once",
         instead=("launch-gap", "host-blocked")),
    Case("blocking-memcpy", "synchronous", False, sync_copy("D2D", 1 << 20, 250.0),
         "device to device",
         instead=("launch-gap", "sync-wait")),
    # launch-gap: one cause per idle bucket of the accounting.
    Case("launch-gap", "launch-bound", True, launch_bound_share(20), "20us gaps 20%"),
    Case("launch-gap", "launch-bound", False, launch_bound_share(1.8),
         "gaps 1.8% under min_share_pct 2"),
    Case("launch-gap", "host-launch-latency", True, gaps_of(100.0), "gaps of 100us"),
    Case("launch-gap", "host-launch-latency", False, gaps_of(99.0),
         "gaps of 99us under min_gap_us",
         instead=("launch-gap", "launch-bound")),
    Case("launch-gap", "sync-wait", True, sync_wait(True), "sync drains the GPU"),
    Case("launch-gap", "sync-wait", False, sync_wait(False), "next kernel queued before the wait"),
    Case("launch-gap", "allocation", True, held_in("cudaFree", False), "cudaFree"),
    Case("launch-gap", "allocation", False, held_in("cudaFree", True),
         "cudaFree beside a busy GPU"),
    # (a copy blocking-memcpy reports takes this idle time first: a small one it leaves)
    Case("launch-gap", "host-blocked", True, sync_copy("H2D", 64000, 250.0),
         "small synchronous H2D"),
    Case("launch-gap", "host-blocked", False, blocked_copy("Pinned"), "pinned copy",
         instead=("copy-compute-serialized", "same-stream")),
    Case("launch-gap", "module-load", True, module_load(False), "lazy load"),
    Case("launch-gap", "module-load", False, module_load(True), "load beside a busy GPU"),
    Case("launch-gap", "compilation", True, compiled("triton_poi_fused_add_0"),
         "before a Triton kernel"),
    Case("launch-gap", "compilation", False, compiled("gemm"), "before an ordinary kernel",
         instead=("launch-gap", "module-load")),
    Case("launch-gap", "input", True, input_upload(65536), "upload of 64 KiB"),
    Case("launch-gap", "input", False, input_upload(65535), "upload under 64 KiB",
         instead=("launch-gap", "host-launch-latency")),
    Case("launch-gap", "queued-wait", True, queued(30.0), "held 30us"),
    # (queued before the gap began, 29 us: no dependency worth a finding, and the host
    # did not pace it either: nothing is said)
    Case("launch-gap", "queued-wait", False, queued(29.0), "held 29us"),
    Case("launch-gap", "results-work", True, results(1 << 20), "after 1 MiB read back"),
    Case("launch-gap", "results-work", False, results(4), "after a scalar read back",
         instead=("launch-gap", "sync-wait")),
    Case("launch-gap", "thread-wait", True, waiting("pthread_cond_wait"),
         "in a condition variable"),
    Case("launch-gap", "thread-wait", False, waiting(None), "outside CUDA, not waiting",
         instead=("launch-gap", "host-launch-latency")),
    Case("launch-gap", "cross-device-wait", True, peer_wait(True), "after a peer's copy"),
    Case("launch-gap", "cross-device-wait", False, peer_wait(False), "no link between them",
         instead=("launch-gap", "queued-wait")),
    # (without iterations, loads in many gaps spread over the run recur all the same)
    Case("launch-gap", "library-churn", True, churn(True), "a load every step"),
    Case("launch-gap", "library-churn", False, churn(False), "a load in the first step"),
    Case("periodic-save", "checkpoint", True, saves(32), "32 MiB every 4 steps",
         needs_iterations=True),
    Case("periodic-save", "checkpoint", False, saves(8), "8 MiB under min_burst_mb",
         instead=("blocking-memcpy", "synchronous")),
    Case("launch-gap", "unknown", True, unlaunched(None), "no launch calls"),
    Case("launch-gap", "unknown", False, unlaunched("cudaLaunchKernel"), "launch calls",
         instead=("launch-gap", "host-launch-latency")),
    # serialized-streams: the cause of each serialized stream switch.
    Case("serialized-streams", "host-launch-bound", True, alternating(late=True),
         "launched after the previous ended"),
    Case("serialized-streams", "host-launch-bound", False, alternating(late=True, n=2),
         "one switch under min_transitions"),
    Case("serialized-streams", "explicit-sync", True,
         alternating(between="cudaStreamWaitEvent"), "event wait between launches"),
    Case("serialized-streams", "explicit-sync", False, alternating(), "nothing between",
         instead=("serialized-streams", "unknown")),
    Case("serialized-streams", "legacy-default-stream", True, alternating(streams=(7, 13)),
         "legacy stream and a blocking one"),
    Case("serialized-streams", "legacy-default-stream", False,
         alternating(streams=(7, 13), non_blocking=True), "legacy and a non-blocking one",
         instead=("serialized-streams", "unknown")),
    Case("serialized-streams", "resource-saturation", True, alternating(grid=(1056, 1, 1)),
         "grid fills the GPU (132 SMs x 8)"),
    Case("serialized-streams", "resource-saturation", False,
         alternating(grid=(1055, 1, 1)), "grid one block short",
         instead=("serialized-streams", "unknown")),
    Case("serialized-streams", "unknown", True, alternating(), "launched in time"),
    Case("serialized-streams", "unknown", False, alternating(overlap=True), "overlapping"),
    # first-use: a slow step that runs new work (a new shape's autotuning, compile, load)
    Case("first-use", "autotuning", True, first_use("autotuning"),
         "40 launches and 10 syncs in one step", needs_iterations=True),
    Case("first-use", "autotuning", False, first_use("autotuning", True),
         "6 launches and 1 sync more: not enough"),
    Case("first-use", "compilation", True, first_use("compilation"),
         "XLA compiles 2 ms in one step", needs_iterations=True),
    Case("first-use", "compilation", False, first_use("compilation", True),
         "a compile in every step: recurring"),
    Case("first-use", "module-load", True, first_use("module-load"),
         "a load and 4 new kernels in one step", needs_iterations=True),
    Case("first-use", "module-load", False, first_use("module-load", True),
         "a load and 2 new kernels: not enough"),
    Case("first-use", "new-work", True, first_use("new-work"),
         "4 new kernels after a 2 ms pause", needs_iterations=True),
    Case("first-use", "new-work", False, first_use("new-work", True),
         "the same kernels 2 ms late: the same work",
         instead=("launch-gap", "host-launch-latency")),
    # shared-gpu
    Case("shared-gpu", "time-sliced", True, two_processes(True),
         "two processes' kernels at once, each 2x slower"),
    Case("shared-gpu", "time-sliced", False, two_processes(False),
         "two processes taking turns on the GPU"),
    # small-grid
    Case("small-grid", "undersized-grid", True, grids(1), "1 block on 132 SMs"),
    Case("small-grid", "undersized-grid", False, grids(66), "66 blocks, half the SMs"),
    Case("small-grid", "undersized-grid", False, grids(1, name=NCCL), "NCCL kernel",
         instead=("exposed-communication", "after-compute")),
    Case("small-grid", "undersized-grid", False, grids(33, streams=4),
         "4 streams fill the SMs"),
    # warmup-latency
    Case("warmup-latency", "module-load", True, with_work(loads(1000)), "1ms of loads"),
    Case("warmup-latency", "module-load", False, with_work(loads(996)), "under 1ms"),
    Case("warmup-latency", "library-init", True,
         with_work(library_range("cublasCreate_v2", "cuBLAS", 1000)), "cublasCreate 1ms"),
    Case("warmup-latency", "library-init", False,
         with_work(library_range("cublasCreate_v2", "", 5000)), "a user range so named"),
    Case("warmup-latency", "first-call", True,
         with_work(first_call("cudaMalloc", 1250, 250)), "first 5x the later"),
    Case("warmup-latency", "first-call", False,
         with_work(first_call("cudaMalloc", 1245, 250)), "first under 5x the later"),
    Case("warmup-latency", "first-call", False,
         with_work(first_call("cudaStreamSynchronize", 5000, 10)), "syncs left out",
         instead=("launch-gap", "sync-wait")),
    Case("warmup-latency", "first-iteration", True, with_work(steps(4, 2500)),
         "first step 5x the later"),
    Case("warmup-latency", "first-iteration", False, with_work(steps(4, 2450)),
         "first step 4.9x the later"),
    Case("warmup-latency", "first-iteration", False, with_work(steps(2, 5000)),
         "two steps only"),
    # copy-compute-serialized
    Case("copy-compute-serialized", "same-stream", True, turns(None), "copy on the stream"),
    Case("copy-compute-serialized", "same-stream", False, turns(None, overlapped=True),
         "a kernel beside each copy",
         instead=("serialized-streams", "unknown")),
    Case("copy-compute-serialized", "dependency", True, turns(13), "copy stream, ordered"),
    Case("copy-compute-serialized", "dependency", False, turns(13, copy_us=19.0, n=8),
         "copies under min_copy_us"),
    # exposed-communication
    Case("exposed-communication", "after-compute", True, collectives(20), "after compute"),
    Case("exposed-communication", "after-compute", False, collectives(20, hidden=True),
         "under compute"),
    Case("exposed-communication", "same-stream", True, collectives(None, middle=True),
         "amid the compute, on its stream"),
    Case("exposed-communication", "same-stream", False, collectives(20, middle=True),
         "amid the compute, on its own stream",
         instead=("exposed-communication", "after-compute")),
    Case("exposed-communication", "waiting-for-peer", True, two_ranks(800.0),
         "peer 800us late"),
    Case("exposed-communication", "waiting-for-peer", False, two_ranks(0.0), "peers in time",
         instead=("exposed-communication", "after-compute")),
]


def within_scope(a: Analysis) -> None:
    """Every finding costs at most its scope's wall (its phase, or the whole timeline for
    one-time costs), and a device's findings together at most its window."""
    per_device: dict[int, int] = {}
    for f in a.findings:
        dev = a.accounting.devices[f.device]
        lo, hi = dev.phases.spans.get(f.phase or "steady", dev.window)
        wall = hi - lo if f.phase == "steady" else dev.window[1] - dev.window[0]
        assert 0 <= f.cost_ns <= wall, (f.id, f.cost_ns, wall)
        assert f.share_pct is None or 0 <= f.share_pct <= 100, f.id
        per_device[f.device] = per_device.get(f.device, 0) + f.cost_ns
    for device, cost in per_device.items():
        lo, hi = a.accounting.devices[device].window
        assert cost <= hi - lo


def test_every_cause_of_every_rule_has_a_handbuilt_case_each_way() -> None:
    wanted = {(r.id, c) for r in rules.registry().values() for c in r.causes}
    for fires in (True, False):
        have = {(c.rule, c.cause) for c in CASES if c.fires is fires}
        assert have == wanted, (fires, wanted ^ have)


@pytest.mark.parametrize("iteration", ["none", None], ids=["no-iterations", "found"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_handbuilt_edge_case(case: Case, iteration: str | None) -> None:
    a = analyze(case.build().build(), iteration=iteration)
    found = a.findings_of(case.rule, case.cause)
    within_scope(a)
    if case.needs_iterations and iteration == "none":
        assert found == [], [f.message for f in found]
        return
    if not case.fires:
        assert found == [], [f.message for f in found]
        if case.instead is not None:
            assert a.findings_of(*case.instead), [(f.rule, f.cause) for f in a.findings]
        return
    assert found, [(f.rule, f.cause, f.cost_ns) for f in a.findings]
    for f in found:
        assert (f.rule, f.cause) == (case.rule, case.cause)
        # A cost, unless it claims nothing (resource-saturation is expected) or another
        # finding explains the same time (warm-up inside a module-load gap).
        assert (f.cost_ns > 0 or case.cause == "resource-saturation"
                or f.consequence_of is not None), f.id


def test_handbuilt_no_gpu_work_no_findings() -> None:
    """Without GPU work (no events, or CUDA calls only) no rule has anything to say."""
    for b in (TraceBuilder(), TraceBuilder().call("cudaMalloc", start_us=0, end_us=5000)):
        a = analyze(b.build(), require_gpu=False)
        assert a.status == "no-cuda-activity" and a.findings == []


def test_handbuilt_idle_device_is_not_judged() -> None:
    """A second GPU with no work: nothing is said about it (its idleness is no gap)."""
    b = TraceBuilder(devices=2)
    back_to_back(b, 0, 10, 100, gap=200)
    a = analyze(b.build(), iteration="none")
    assert a.gpu["count"] == 2 and list(a.accounting.devices) == [0]
    assert [d["device"] for d in a.devices] == [0]
    assert a.findings and {f.device for f in a.findings} == {0}
    within_scope(a)


def test_handbuilt_single_kernel_is_small() -> None:
    """(Never serialized: tests/rules/test_serialized_streams.py's one-kernel-alone.)"""
    b = TraceBuilder()
    b.kernel("alone", start_us=0, dur_us=1000, grid=(1, 1, 1))
    a = analyze(b.build(), iteration="none")
    within_scope(a)
    # One block on 132 SMs for its whole life: the one rule that must speak.
    (small,) = a.findings_of("small-grid")
    assert small.cost_ns == pytest.approx(1_000_000 * 131 / 132, abs=1)
    assert np.isclose(small.evidence["idle_sm_pct"], 100 * 131 / 132, atol=0.01)
