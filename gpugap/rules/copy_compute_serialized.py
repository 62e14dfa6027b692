"""copy-compute-serialized: copies that ran while no kernel did, between kernels.

The copy engines and the SMs can work at the same time. When a copy overlaps no kernel
although kernels ran right before and after it, copy and compute are taking turns:

- ``same-stream``: the copy shares a stream with the kernels around it, so the stream
  orders them: a batch is copied, then computed, then the next is copied...
- ``dependency``: the copy is on its own stream, yet waits for (or is waited on by) the
  neighbouring compute: an event or sync orders them; the pipeline is too shallow.

Copies whose call blocked the host are left to blocking-memcpy (the host, not the stream
order, is the cause there). Cost (from the accounting): the copies' time that nothing
else overlapped, an upper bound of what a copy stream with double buffering could hide.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import COPY_IDS
from gpugap.accounting.labels import ranges_of
from gpugap.report.table import Table, factorize
from gpugap.report.trace import NO_CALL, Trace
from gpugap.rules.base import FINDING_PHASES, Claim, Context, Finding, Rule, Threshold
from gpugap.rules.groups import first_seen_codes, rows_of_codes
from gpugap.rules.model import Cause, EventRef, Link, Mark, Outline, Severity
from gpugap.units import fmt_bytes, fmt_ns

CAUSES = (
    Cause("same-stream", "copy on the same stream as the kernels around it",
          "Move the copies to a dedicated copy stream and double-buffer: copy batch i+1 while "
          "batch i computes, ordered with events (cudaEventRecord/cudaStreamWaitEvent), "
          "from pinned host memory.",
          title="Copies and compute taking turns (same stream)",
          fixes={"PyTorch": "Move the copies to a dedicated copy stream and double-buffer: "
                            "copy batch i+1 while batch i computes (x.to('cuda', "
                            "non_blocking=True) inside `with torch.cuda.stream(copy):`), "
                            "ordered with events (torch.cuda.Event + stream.wait_event), "
                            "from pinned host memory (pin_memory()).",
                 "CuPy": "Move the copies to a dedicated copy stream and double-buffer: "
                         "copy batch i+1 while batch i computes "
                         "(ndarray.set(pinned, stream=copy_stream)), ordered with events "
                         "(cp.cuda.Event, stream.wait_event), from pinned host memory "
                         "(cupyx.empty_pinned).",
                 "JAX": "Let the next batch's transfer overlap this step: jax.device_put "
                        "batch i+1 before dispatching step i (keep a batch or two in "
                        "flight, e.g. in a small deque), so the step never waits for its "
                        "input."}),
    Cause("dependency", "copy on its own stream but ordered against the kernels",
          "Deepen the pipeline: issue the copy for the next batch before the compute of this "
          "one and keep one more buffer in flight, so the event that orders them is already "
          "satisfied when the copy runs.",
          title="Copies and compute taking turns (ordered by events)"),
)


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    copies, kernels = trace.table("memcpys"), trace.table("kernels")
    if copies.empty or kernels.empty:
        return []
    findings = []
    device_of = kernels["device"]
    one_device = bool((device_of == device_of[0]).all())
    # The copies that could qualify first: often none, and then the kernels (maybe
    # millions) need no work at all.
    api_start = copies["api_start"]
    blocked = (((copies["api_end"] - api_start) >= config["blocked_us"] * 1e3)
               & (api_start != NO_CALL))
    qualifies = ((copies["end"] - copies["start"]) >= config["min_copy_us"] * 1e3) & ~blocked
    copy_device, devices = factorize(copies["device"])
    for i, device in enumerate(devices.tolist()):       # in order of first appearance
        c = copies.rows(qualifies & (copy_device == i))
        if c.empty:
            continue
        # This device's kernels in start order (stable), as positions: no table copy.
        rows = (np.arange(len(kernels)) if one_device and device_of[0] == device
                else np.flatnonzero(device_of == device))
        if not rows.size:
            continue
        ks = kernels["start"].astype(np.int64, copy=False)[rows]
        if not tl.is_sorted(ks):
            order = np.argsort(ks, kind="stable")
            rows, ks = rows[order], ks[order]
        ke = kernels["end"].astype(np.int64, copy=False)[rows]
        union = tl.union(ks, ke)
        cs, ce = c["start"].astype(np.int64, copy=False), c["end"].astype(np.int64, copy=False)
        dur = ce - cs
        alone = dur - tl.overlap_each(cs, ce, union)
        del union
        # The kernels right before and right after each copy on this device.
        end_order = np.argsort(ke, kind="stable")
        before = np.searchsorted(ke[end_order], cs, side="right") - 1
        after = np.searchsorted(ks, ce, side="left")
        reach = config["max_distance_us"] * 1e3
        has_before = before >= 0
        has_after = after < ks.size
        b_idx = end_order[np.maximum(before, 0)]
        a_idx = np.minimum(after, ks.size - 1)
        del end_order
        near_before = has_before & (cs - ke[b_idx] <= reach)
        near_after = has_after & (ks[a_idx] - ce <= reach)
        between = near_before & near_after
        turns = between & (alone >= config["min_alone_share"] * dur)
        if not turns.any():
            continue
        k = kernels.rows(rows[np.r_[b_idx, a_idx]])
        b_idx, a_idx = np.arange(b_idx.size), b_idx.size + np.arange(a_idx.size)
        streams = k["stream"]
        copy_stream = c["stream"]
        names = k.labels("name").strings()
        same = (streams[b_idx] == copy_stream) | (streams[a_idx] == copy_stream)
        launch = c["api_start"]
        turn = Table({
            "same": same, "alone": alone, "start": cs, "end": ce, "bytes": c["bytes"],
            "stream": copy_stream, "kind": c.labels("kind").strings(), "corr": c["corr"],
            "at": np.where(launch != NO_CALL, launch, c["start"]).astype(np.int64),
            "before": names[b_idx], "after": names[a_idx],
            "before_stream": streams[b_idx], "after_stream": streams[a_idx],
            "pid": c["pid"],
            # The neighbours as events (marks only).
            "before_corr": k["corr"][b_idx], "after_corr": k["corr"][a_idx],
            "before_pid": k["pid"][b_idx], "after_pid": k["pid"][a_idx],
            "before_start": k["start"][b_idx], "after_start": k["start"][a_idx]}).rows(turns)
        turn = turn.rows(context.in_scope(int(device), turn["at"]))
        phase = context.phase_code(int(device), turn["start"])
        # Findings per (cause, stream, phase), in order of first appearance.
        group, first = first_seen_codes(turn["same"], turn["stream"], phase)
        for at_first, members in zip(first.tolist(), rows_of_codes(group, first.size),
                                     strict=True):
            g = turn.rows(members)
            cause = "same-stream" if turn["same"][at_first] else "dependency"
            stream = int(turn["stream"][at_first])
            cost = int(g["alone"].sum())
            if cost < config["min_cost_us"] * 1e3:
                continue
            # The longest alone first (ties: first seen first, as nlargest keeps them).
            worst = g.rows(np.argsort(-g["alone"], kind="stable")[:int(config["max_examples"])])
            kinds = ", ".join(sorted(set(g["kind"].tolist())))
            findings.append(Finding(
                rule=RULE.id, cause=cause, severity=Severity.INFO,
                start_ns=int(g["start"].min()), end_ns=int(g["end"].max()), cost_ns=cost,
                at_ns=int(g["at"].min()),
                message=message(cause=cause, copies=len(g), kinds=kinds,
                                total_bytes=int(g["bytes"].sum()), stream=stream,
                                alone_ns=cost),
                marks=_marks(worst),
                fix=RULE.causes[cause].fix_for(context.framework),
                streams=sorted({stream} | set(g["before_stream"].tolist())
                               | set(g["after_stream"].tolist())),
                device=int(device), count=len(g), phase=FINDING_PHASES[int(phase[at_first])],
                ranges=ranges_of(trace, g["at"]),
                claim=Claim(int(device), tl.union(g["start"].astype(np.int64, copy=False),
                                                  g["end"].astype(np.int64, copy=False)),
                            COPY_IDS),
                evidence={"copy_ns_alone": cost, "bytes_total": int(g["bytes"].sum()),
                          "copies": [{"correlation_id": int(r["corr"]),
                                      "start_ns": int(r["start"]), "end_ns": int(r["end"]),
                                      "alone_ns": int(r["alone"]), "bytes": int(r["bytes"]),
                                      "kernel_before": r["before"],
                                      "kernel_after": r["after"],
                                      "kernel_streams": [int(r["before_stream"]),
                                                         int(r["after_stream"])]}
                                     for r in worst.records()]}))
    return findings


def _marks(worst: Table) -> list[Mark]:
    """The copies outlined; then each linked from the kernel before it and to the kernel
    after it (the turns they took)."""
    def copy(r: dict) -> EventRef:
        return EventRef("memcpy", int(r["corr"]), stream=int(r["stream"]), pid=int(r["pid"]),
                        start_ns=int(r["start"]))

    shown = list(worst.records())
    marks: list[Mark] = [Outline(copy(r)) for r in shown]
    for r in shown:
        before = EventRef("kernel", int(r["before_corr"]), stream=int(r["before_stream"]),
                          pid=int(r["before_pid"]), start_ns=int(r["before_start"]))
        after = EventRef("kernel", int(r["after_corr"]), stream=int(r["after_stream"]),
                         pid=int(r["after_pid"]), start_ns=int(r["after_start"]))
        marks += [Outline(before), Outline(after), Link(before, copy(r), "es"),
                  Link(copy(r), after, "es")]
    return marks


def message(*, cause: str, copies: int, kinds: str, total_bytes: int, stream: int,
            alone_ns: int) -> str:
    """What the copies of one finding did, and what ordered them."""
    where = ("on the same stream as the kernels around them, which orders them"
             if cause == "same-stream" else
             "on their own stream, yet ordered against the neighbouring kernels "
             "(an event or sync)")
    return (f"{copies} {kinds} cop{'y' if copies == 1 else 'ies'} "
            f"({fmt_bytes(total_bytes)}) on stream {stream} ran for "
            f"{fmt_ns(alone_ns)} while no kernel ran, between kernels: copy and "
            f"compute took turns instead of overlapping. The copies are {where}.")


RULE = Rule(
    id="copy-compute-serialized",
    title="Copies and kernels taking turns instead of overlapping",
    thresholds={
        "min_copy_us": Threshold(20, "us", "ignore copies shorter than this"),
        "min_alone_share": Threshold(0.8, "fraction", "a copy counts when at least this "
                                     "share of it overlapped no kernel"),
        "max_distance_us": Threshold(200, "us", "kernels this close before and after a copy "
                                     "are its neighbours"),
        "blocked_us": Threshold(50, "us", "copies whose call blocked the host this long are "
                                "left to blocking-memcpy"),
        "min_cost_us": Threshold(100, "us", "report groups costing at least this much"),
        "max_examples": Threshold(5, "copies", "copies listed as evidence per finding"),
    },
    rationale=("Copy engines run beside the SMs; a copy between two kernels that overlaps "
               "neither is time the GPU spent on one of the two only."),
    fix=CAUSES[0].fix,
    causes=CAUSES,
    detect=detect,
    color="#b8860b",
    priority=20,
)
