"""periodic-save: a checkpoint every N iterations.

A few steady iterations copy far more from the GPU than the others (the model's state:
a device-to-host burst of at least ``min_burst_mb`` and ``burst_factor`` times the
median iteration's), at least twice: the program saves a checkpoint. The files it
wrote meanwhile (OS runtime write calls of its process, when traced) are its evidence
too, and how regularly the saves recur (every N iterations).

A save stalls the GPU: the GPU idles for at least ``min_idle_share`` of the saves' time
(the host copying state out and writing it while nothing runs); bursts of busy copies
with the work going on around them are the loop's own traffic.

Cost (from the accounting): in each save iteration, from the first copy of the burst to
the end of the idle stretch after its last (the host writing the file before it launches
more work): the idle time and the copies' own time there. Settled before blocking-memcpy
and launch-gap, so a checkpoint's pageable copies and file writes are its consequences,
not "copies through pageable memory" or "host work" in other iterations.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import COPY_IDS, IDLE_IDS
from gpugap.accounting.labels import ranges_of
from gpugap.program import oscalls
from gpugap.report.table import Table
from gpugap.report.trace import NO_CALL, Trace
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.model import Band, Cause, Severity
from gpugap.units import fmt_bytes, fmt_ns

FIX = ("Checkpoint asynchronously and less often: copy the state into pinned host buffers "
       "on a side stream while training goes on, write the file from a background thread, "
       "and save every N steps with N chosen from what a save costs.")
FIXES = {
    "PyTorch": "Checkpoint asynchronously and less often: "
               "torch.distributed.checkpoint.async_save (or copy the state_dict into "
               "preallocated pinned CPU tensors with non_blocking=True and torch.save them "
               "from a background thread) so training goes on while the file is written; "
               "save every N steps with N chosen from what a save costs.",
    "JAX": "Checkpoint asynchronously and less often: orbax.checkpoint's CheckpointManager "
           "with async saving (the device-to-host copy overlaps the next steps, the file is "
           "written in the background); save every N steps with N chosen from what a save "
           "costs.",
    "CUDA C++": "Checkpoint asynchronously and less often: cudaMemcpyAsync the state into "
                "pinned buffers (cudaMallocHost) on a side stream, write the file from a "
                "background thread once the copy's event completes, and save less often.",
}
CAUSES = (Cause("checkpoint", "a device-to-host burst and file writes every N iterations",
                FIX, title="Periodic save (checkpoint)", fixes=FIXES),)


# What a save explains in its windows: the copies and every idle bucket but the next
# batch's loading (a data loader restarted after the epoch's save waits for its workers:
# that is input, counted once, as input).
CLAIMED = tuple(b for b in IDLE_IDS if b != "input") + COPY_IDS
# Device-to-host copies of at least this size are a save's tensors; smaller ones are
# scalar reads (where the iteration has both, the save starts at the first tensor).
BULK_BYTES = 1024

def _bursts(trace: Trace, device: int, lo: np.ndarray, hi: np.ndarray) -> Table:
    """Per iteration [lo, hi): the device-to-host bytes and copies, and where the
    copies began (first call) and ended (last copy); 0 for iterations without any."""
    size = np.zeros(lo.size, np.int64)
    copies = np.zeros(lo.size, np.int64)
    first = np.zeros(lo.size, np.int64)
    last = np.zeros(lo.size, np.int64)
    out = Table({"bytes": size, "copies": copies, "first": first, "last": last})
    m = trace.table("memcpys")
    if m.empty:
        return out
    d2h = m.rows((m["device"] == device) & m.labels("kind").isin(["Device-to-Host"]))
    if d2h.empty:
        return out
    start = d2h["start"]
    it = np.searchsorted(lo, start, side="right") - 1
    inside = (it >= 0) & (start < hi[np.maximum(it, 0)])
    if not inside.any():
        return out
    d2h, it = d2h.rows(inside), it[inside]
    launched = d2h["api_start"]
    began = np.where(launched == NO_CALL, d2h["start"], launched)
    # Per iteration (a small range of positions): sums, counts, least and greatest.
    np.add.at(size, it, d2h["bytes"])
    copies += np.bincount(it, minlength=lo.size)
    # Where the burst lies: its tensors' copies, not the scalar reads (.item(), a loss
    # logged) that an evaluation in the same iteration makes before it.
    bulk = d2h["bytes"] >= BULK_BYTES
    has_bulk = np.bincount(it[bulk], minlength=lo.size) > 0
    counted = bulk | ~has_bulk[it]
    any_copy = copies > 0
    first[any_copy] = np.iinfo(np.int64).max
    np.minimum.at(first, it[counted], began[counted])
    np.maximum.at(last, it[counted], d2h["end"][counted])
    return out


def _writes(context: Context, pids: list[int], windows: tl.Intervals) -> tuple[int, int]:
    """(calls, ns) of the processes' file writes inside *windows* (the program model's
    OS calls)."""
    program = context.accounting.program
    rows = oscalls.named(None if program is None else program.os_calls, oscalls.FILE_WRITES)
    if rows is None or not len(rows) or not windows[0].size:
        return 0, 0
    pid = np.asarray(rows["gtid"], dtype=np.int64) >> 24 & 0xFFFFFF
    start = np.asarray(rows["start"], dtype=np.int64)
    inside = np.isin(pid, pids) & tl.within(start, windows)
    return int(inside.sum()), int((np.asarray(rows["end"], np.int64) - start)[inside].sum())


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    findings = []
    for device, dev in context.accounting.devices.items():
        its = dev.phases.steady_iterations
        if len(its) < 3:
            continue
        lo, hi = dev.phases.iteration_windows(its)
        bursts = _bursts(trace, device, lo, hi)
        size = bursts["bytes"]
        floor = max(config["min_burst_mb"] * 2**20,
                    config["burst_factor"] * float(np.median(size)))
        saves = np.flatnonzero(size >= floor)
        if saves.size < 2 or saves.size > config["max_share_of_iterations"] * len(its):
            continue
        hit = bursts.rows(saves)
        # From the burst's first copy to the end of the idle stretch after its last.
        first, last = hit["first"], hit["last"]
        until = dev.gaps.end_or(last)
        until = np.maximum(np.minimum(until, hi[saves]), last)
        windows = tl.union(first, until)
        if context.scope.is_range:
            windows = tl.intersect(windows, context.scope.range_on(int(device)))
            if not windows[0].size:
                continue
        # A save stalls the GPU: its windows hold idle time (the host copying or
        # writing while nothing runs). Bursts that are only busy copies, with the work
        # going on around them, are the loop's own traffic (a copy benchmark's).
        held = dev.totals_in(windows)
        if sum(held[b] for b in IDLE_IDS) < config["min_idle_share"] * tl.total(windows):
            continue
        writes, write_ns = _writes(context, [int(p) for p in dev.work.pids], windows)
        index = np.asarray(its)[saves]
        every = np.diff(index)
        regular = int(np.median(every)) if every.size else 0
        labels = dev.phases.iterations.labels if dev.phases.iterations is not None else []
        total = int(hit["bytes"].sum())
        text = message(saves=saves.size, iterations=len(its), bytes_total=total,
                       copies=int(hit["copies"].sum()), writes=writes, write_ns=write_ns,
                       every=regular if every.size and bool((abs(every - regular) <= 1).all())
                       else None)
        findings.append(Finding(
            rule=RULE.id, cause="checkpoint", severity=Severity.INFO,
            start_ns=int(first.min()), end_ns=int(until.max()),
            cost_ns=int(tl.total(windows)), at_ns=int(first.min()), message=text,
            fix=RULE.causes["checkpoint"].fix_for(context.framework), device=int(device),
            count=int(saves.size), phase=context.whole_phase or "steady",
            ranges=ranges_of(trace, first), claim=Claim(int(device), windows,
                                                         CLAIMED),
            marks=[Band(int(a), int(b), int(device), label="checkpoint")
                   for a, b in zip(first.tolist(), until.tolist(), strict=True)],
            evidence={"iterations": [labels[i] if labels else f"#{i}" for i in index.tolist()],
                      "every": regular or None, "bytes_total": total,
                      "bytes_per_save": int(np.median(hit["bytes"])),
                      "median_iteration_bytes": int(np.median(size)),
                      "copies": int(hit["copies"].sum()), "file_writes": writes,
                      "file_write_ns": write_ns}))
    return findings


def message(*, saves: int, iterations: int, bytes_total: int, copies: int, writes: int,
            write_ns: int, every: int | None) -> str:
    how_often = f"every {every} iterations" if every else "irregularly"
    wrote = (f" and wrote files ({writes} write calls, {fmt_ns(write_ns)})" if writes
             else "")
    return (f"In {saves} of {iterations} steady iterations ({how_often}) the program copied "
            f"{fmt_bytes(bytes_total // max(saves, 1))} from the GPU each time ({copies} "
            f"copies in all){wrote} while the GPU waited: a periodic save (checkpoint).")


RULE = Rule(
    id="periodic-save",
    title="Checkpoints that stall the GPU",
    thresholds={
        "min_burst_mb": Threshold(16, "MiB", "an iteration copying at least this much from "
                                  "the GPU can be a save"),
        "burst_factor": Threshold(8, "x", "... and this many times what the median "
                                  "iteration copies"),
        "max_share_of_iterations": Threshold(0.5, "fraction", "saves hit at most this share "
                                             "of the steady iterations (else it is the "
                                             "loop's own traffic)"),
        "min_idle_share": Threshold(0.1, "fraction", "... and the GPU idles at least this "
                                    "share of the saves' time (else the copies stalled "
                                    "nothing)"),
    },
    rationale=("A checkpoint stops training while the state is copied off the GPU and "
               "written out; done synchronously every N steps it costs that much every "
               "time."),
    fix=FIX,
    causes=CAUSES,
    detect=detect,
    color="#17becf",
    priority=5,
)
