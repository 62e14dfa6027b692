"""A device's timeline as phases: start-up, warm-up iterations, steady state, tail.

The iterations come from the program model (gpugap.program.iterations: NVTX ranges, CUDA
graph replays, repeating GPU work); their GPU-side boundaries tile the timeline:
start-up is [device start, b_0), iteration i is [b_i, b_i+1), the tail follows the last
one. Warm-up: the first iteration, and those right after it that took more than
``warmup_factor`` x the median iteration. Without iterations, start-up lasts until the
end of the last module-load call before regular work (and at least until the first GPU
operation); the rest is one steady window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpugap.accounting.host import MODULE_LOAD
from gpugap.accounting.work import DeviceWork
from gpugap.memory import isin
from gpugap.program import DeviceProgram
from gpugap.program.iterations import Iterations
from gpugap.report.trace import Trace

PHASES = ("start-up", "warm-up", "steady", "tail")
WARMUP_FACTOR = 2.0


@dataclass
class Phases:
    device: int
    window: tuple[int, int]
    iterations: Iterations | None
    warmup: int                    # leading iterations that are warm-up
    spans: dict[str, tuple[int, int]]     # phase -> [lo, hi) (empty phases: lo == hi)
    how: str                       # how the iterations / phases were found, for humans
    # What kept this device from being steady sooner (align): {'device': a device of this
    # report, or None, 'who': another report's rank ('rank 1'), or None, 'until_ns': when
    # it was warm, GPU time}; None when its own warm-up decided.
    held_by: dict | None = None

    @property
    def steady_iterations(self) -> range:
        n = 0 if self.iterations is None else len(self.iterations)
        return range(self.warmup, n)

    def iteration_windows(self, which: range | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self.iterations is None:
            z = np.zeros(0, dtype=np.int64)
            return z, z
        b = self.iterations.bounds
        if which is None:
            which = range(len(self.iterations))
        # (np.asarray of a range reads its numbers one by one.)
        idx = (np.arange(which.start, which.stop, which.step) if isinstance(which, range)
               else np.asarray(which))
        return b[idx], b[idx + 1]

    def phase_codes(self, times) -> np.ndarray:
        """Index into PHASES of the phase each time falls in (-1 outside the window)."""
        t = np.asarray(times, dtype=np.int64)
        out = np.full(t.shape, -1, dtype=np.int8)
        for code, phase in enumerate(PHASES):
            lo, hi = self.spans[phase]
            out[(t >= lo) & (t < hi)] = code
        lo, hi = self.window
        out[t == hi] = PHASES.index("tail") if self.spans["tail"][1] > self.spans["tail"][0] \
            else PHASES.index("steady")
        return out

    def to_dict(self) -> dict:
        it = self.iterations
        steady = self.steady_iterations
        durations = it.durations if it is not None else np.zeros(0)
        return {
            "device": self.device, "how": self.how,
            "window_ns": list(self.window), "held_by": self.held_by,
            "phases": {p: {"start_ns": int(lo), "end_ns": int(hi), "ns": int(hi - lo)}
                       for p, (lo, hi) in self.spans.items()},
            "iterations": None if it is None else {
                "source": it.source, "name": it.name, "count": len(it),
                "warmup": self.warmup, "steady": len(steady),
                "median_ns": int(np.median(durations[self.warmup:]))
                if len(steady) else None,
                "durations_ns": durations.astype(np.int64, copy=False).tolist()},
        }


def _warmup(durations: np.ndarray, factor: float) -> int:
    if durations.size == 0:
        return 0
    median = float(np.median(durations))
    w = 1
    while w < durations.size - 1 and durations[w] > factor * median:
        w += 1
    return w


def detect(trace: Trace, work: DeviceWork, device: DeviceProgram, *,
           warmup_factor: float = WARMUP_FACTOR) -> Phases:
    """The phases of *device* (the program model's view of it: window, iterations)."""
    window = device.window
    lo, hi = window
    iterations = device.iterations
    if iterations is not None and len(iterations) >= 1:
        w = _warmup(iterations.durations, warmup_factor)
        b = iterations.bounds
        spans = {"start-up": (lo, int(b[0])), "warm-up": (int(b[0]), int(b[w])),
                 "steady": (int(b[w]), int(b[-1])), "tail": (int(b[-1]), hi)}
        return Phases(work.device, window, iterations, w, spans, iterations.how)
    # No iterations: start-up ends with the last module load before regular work.
    first_op = work.bounds()[0] if len(work) else lo
    end = first_op
    api = trace.table("api")
    if len(api):
        loads = np.flatnonzero(api.labels("name").matching(MODULE_LOAD)
                               & isin(api["pid"], work.pids))
        if loads.size:
            t = int(api["end"][loads].max())
            end = max(end, t, int(work.ends_launched_before([t])[0]))
    end = min(max(end, lo), hi)
    spans = {"start-up": (lo, end), "warm-up": (end, end), "steady": (end, hi),
             "tail": (hi, hi)}
    return Phases(work.device, window, None, 0, spans,
                  "no repeated NVTX range or GPU work: start-up until the last module load, "
                  "the rest as one steady window")


def align(phases: dict[int, Phases], peers: dict[int, set[int]],
          not_before: tuple[int, str] | None = None) -> None:
    """Job-wide phases (module doc), in place: each device's steady state starts no
    earlier than the end of the warm-up of every device in ``peers[device]``, nor (for
    a report that is one rank of a job of several reports: gpugap.analysis.job) before
    *not_before* = (time on this report's clock, who was warm last then: 'rank 1')."""
    warm = {d: ph.spans["steady"][0] for d, ph in phases.items()}
    for device, ph in phases.items():
        others = [(warm[p], p, None) for p in peers.get(device, ()) if p in warm]
        if not_before is not None:
            others.append((not_before[0], None, not_before[1]))
        if not others:
            continue
        ready, last, who = max(others, key=lambda o: o[0])
        if ready <= ph.spans["steady"][0]:
            continue
        lo, hi = ph.window
        it = ph.iterations
        if it is not None and len(it):
            b = it.bounds
            # The first iteration that starts once the last peer is warm (at most the last
            # one: a device keeps one steady iteration if it has any).
            w = min(max(int(np.searchsorted(b[:-1], ready, side="left")), ph.warmup),
                    len(it) - 1)
            if w <= ph.warmup:
                continue
            ph.warmup = w
            ph.spans["warm-up"] = (ph.spans["warm-up"][0], int(b[w]))
            ph.spans["steady"] = (int(b[w]), ph.spans["steady"][1])
        else:
            end = min(max(ready, lo), hi)
            ph.spans["start-up"] = (ph.spans["start-up"][0], end)
            ph.spans["warm-up"] = (end, end)
            ph.spans["steady"] = (end, ph.spans["steady"][1])
        ph.held_by = {"device": None if last is None else int(last), "who": who,
                      "until_ns": int(ready)}
