"""shared-gpu: another process's work on the same GPU at the same time.

Two programs on one GPU (without MPS) time-slice it: each gets part of every second, and
every kernel of each runs slower than it does alone. A report shows it when it holds the
processes: their GPU operations run at the same time on one device. Per device and phase
(or ``--range``), the rule finds the time during which operations of two or more
processes ran at once, each process's share of the device's busy time, and how much
slower a kernel ran while another process's work ran beside it than when it ran alone
(each kernel by process and name: the median duration of its instances that overlapped
another process's work over the median of those that did not, where both exist).

Cost: of the time the processes ran side by side, the share sharing took from the work
that ran then: 1 - 1/slowdown (what the same work would have taken alone); where no kernel
ran both alone and shared, 1 - 1/n for n processes at once (an even time-slice). The
finding claims the busy buckets in that time, with that weight (as small-grid claims the
idle share of the SMs).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import BUSY_IDS
from gpugap.accounting.labels import ranges_of
from gpugap.report.trace import Trace
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.model import Band, Cause, Severity
from gpugap.units import fmt_ns

FIX = ("Give each process a GPU of its own (CUDA_VISIBLE_DEVICES), or run them one after "
       "the other: neither program is slow on its own, the GPU is divided between them. If "
       "they must share a GPU, NVIDIA MPS (nvidia-cuda-mps-control) lets small jobs run side "
       "by side instead of taking turns.")
CAUSES = (Cause("time-sliced", "other processes' work ran on the same GPU at the same time",
                FIX, title="GPU shared with another process"),)
MAX_BANDS = 5


def _per_process(dev, pids: np.ndarray, start: np.ndarray, end: np.ndarray
                 ) -> dict[int, tl.Intervals]:
    return {int(p): tl.union(start[pids == p], end[pids == p]) for p in np.unique(pids)}


def _side_by_side(unions: dict[int, tl.Intervals]) -> tuple[tl.Intervals, float]:
    """The time when two or more processes had work running, and the mean number of
    processes running then."""
    s = np.concatenate([u[0] for u in unions.values()])
    e = np.concatenate([u[1] for u in unions.values()])
    times, level = tl.coverage_profile(s, e)
    if times.size < 2:
        return tl.EMPTY, 0.0
    many = level[:-1] >= 2
    lo, hi = times[:-1][many], times[1:][many]
    weighted, length = tl.time_at_level(times, level, lambda lv: lv >= 2)
    return tl.union(lo, hi), (weighted / length if length else 0.0)


def _slowdown(names: np.ndarray, pids: np.ndarray, dur: np.ndarray, shared: np.ndarray
              ) -> tuple[float | None, dict | None]:
    """Median over kernels (by process and name) of their median duration when shared
    over alone, weighted by their shared time; and the kernel with the most shared time
    (name, process, alone, shared), as an example."""
    keys = np.char.add(pids.astype(str), np.char.add("\x1f", names.astype(str)))
    ratios, weights, example, best = [], [], None, 0
    for key in np.unique(keys):
        mine = keys == key
        a, b = dur[mine & ~shared], dur[mine & shared]
        if a.size == 0 or b.size == 0:
            continue
        alone, together = float(np.median(a)), float(np.median(b))
        if alone <= 0:
            continue
        ratios.append(together / alone)
        weights.append(float(b.sum()))
        if b.sum() > best:
            best = int(b.sum())
            pid, name = str(key).split("\x1f", 1)
            example = {"kernel": name, "pid": int(pid), "alone_ns": int(alone),
                       "shared_ns": int(together), "instances_shared": int(b.size)}
    if not ratios:
        return None, None
    order = np.argsort(ratios)
    cum = np.cumsum(np.asarray(weights)[order])
    median = float(np.asarray(ratios)[order][np.searchsorted(cum, cum[-1] / 2)])
    return median, example


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    findings = []
    for device, dev in context.accounting.devices.items():
        work = dev.work
        if work.pids.size < 2 or not len(work):
            continue
        every = np.arange(len(work))
        ops = work.take(every)
        pids = work.gather("pid", every).astype(np.int64)
        unions = _per_process(dev, pids, ops.start, ops.end)
        if len(unions) < 2:
            continue
        together, level = _side_by_side(unions)
        if not together[0].size:
            continue
        kernels = ops.source == 0
        names = np.asarray(work.names(trace, every[kernels]), dtype=object)
        kstart, kend = ops.start[kernels], ops.end[kernels]
        # A kernel ran shared when another process had work running during most of it.
        shared = np.zeros(kstart.size, dtype=bool)
        kpid = pids[kernels]
        for p, _ in unions.items():
            others = [u for q, u in unions.items() if q != p]
            other = tl.union(np.concatenate([u[0] for u in others]),
                             np.concatenate([u[1] for u in others]))
            mine = kpid == p
            inside = tl.overlap_each(kstart[mine], kend[mine], other)
            shared[mine] = 2 * inside > (kend[mine] - kstart[mine])
        slowdown, example = _slowdown(names, kpid, (kend - kstart).astype(np.float64),
                                      shared)
        lost = (1.0 - 1.0 / slowdown) if slowdown and slowdown > 1.0 else (
            1.0 - 1.0 / level if slowdown is None and level > 1.0 else 0.0)
        busy = {p: tl.total(u) for p, u in unions.items()}
        for phase, span, wall, _base in context.judged_phases(device):
            mine = tl.intersect(together, span)
            side_ns = tl.total(mine)
            if side_ns <= 0 or 100.0 * side_ns / wall < config["min_share_pct"]:
                continue
            cost = int(side_ns * lost)
            shares = {p: round(100.0 * tl.total(tl.intersect(u, span))
                               / max(sum(tl.total(tl.intersect(v, span))
                                         for v in unions.values()), 1), 1)
                      for p, u in unions.items()}
            findings.append(Finding(
                rule=RULE.id, cause="time-sliced", severity=Severity.INFO,
                start_ns=int(mine[0][0]), end_ns=int(mine[1][-1]), cost_ns=cost,
                at_ns=int(mine[0][0]), phase=phase,
                message=message(device=int(device), shares=shares, side_ns=side_ns,
                                wall_ns=wall, level=level, slowdown=slowdown,
                                example=example),
                fix=FIX, device=int(device), count=len(unions),
                ranges=ranges_of(trace, mine[0][:1]),
                marks=[Band(int(a), int(b), int(device), label="shared", cause="time-sliced")
                       for a, b in zip(*(x[:MAX_BANDS] for x in mine), strict=True)],
                evidence={"processes": {str(p): {"share_of_busy_pct": shares[p],
                                                 "busy_ns": busy[p]} for p in unions},
                          "side_by_side_ns": side_ns,
                          "side_by_side_pct": round(100.0 * side_ns / wall, 1),
                          "processes_at_once": round(level, 2),
                          "slowdown": None if slowdown is None else round(slowdown, 2),
                          "example": example, "lost_share": round(lost, 3),
                          "title_detail": _detail(shares, slowdown)},
                claim=Claim(int(device), mine, BUSY_IDS, weight=lost),
                min_share_pct=float(config["min_share_pct"])))
    return findings


def _detail(shares: dict[int, float], slowdown: float | None) -> str:
    """'with process 981: this one took 49.8% of it, its kernels ran 2.14x slower'."""
    who = ", ".join(f"{p} {s:.0f}%" for p, s in shares.items())
    return (f"{len(shares)} processes, by busy time: {who}"
            + (f"; kernels {slowdown:.2f}x slower than alone" if slowdown else ""))


def message(*, device: int, shares: dict[int, float], side_ns: int, wall_ns: int,
            level: float, slowdown: float | None, example: dict | None) -> str:
    """Who shares the GPU, how much of it each took, and how much slower work ran."""
    who = ", ".join(f"process {p}: {s:.1f}%" for p, s in shares.items())
    text = (f"GPU {device} is shared by {len(shares)} processes ({who} of its busy time): "
            f"their work ran side by side {fmt_ns(side_ns)} "
            f"({100.0 * side_ns / max(wall_ns, 1):.1f}% of the time, {level:.2f} processes "
            "at once on average)")
    if slowdown is not None and example is not None:
        text += (f"; a kernel ran {slowdown:.2f}x slower beside the other process's work "
                 f"than alone (e.g. '{example['kernel']}' of process {example['pid']}: "
                 f"{fmt_ns(example['alone_ns'])} alone, {fmt_ns(example['shared_ns'])} "
                 "shared)")
    return text + "."


RULE = Rule(
    id="shared-gpu",
    title="GPU shared with other processes",
    thresholds={
        "min_share_pct": Threshold(5, "%", "report processes that ran side by side on one "
                                   "GPU for at least this share of the scope"),
    },
    rationale=("A GPU shared by two programs is time-sliced: each gets part of it, and each "
               "kernel runs slower than alone, however well each program uses the GPU."),
    fix=FIX,
    causes=CAUSES,
    detect=detect,
    color="#6d4c41",
    priority=5,
)
