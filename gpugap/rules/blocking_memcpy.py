"""blocking-memcpy: a copy whose API call held its CPU thread.

Causes:
- ``pageable-async``: cudaMemcpyAsync (or a driver *Async copy) touching pageable host
  memory. The driver stages the data through its own pinned buffers and the call
  returns only when the last chunk is staged: asynchronous in name only.
- ``synchronous``: a synchronous copy (cudaMemcpy, cuMemcpyDtoH, ...), which returns only
  when the copy, and all work queued before it, is done. Like NVIDIA's cuda_memcpy_sync
  rule, small host-to-device copies (<= 64000 B, staged and returned at once) and
  device-to-device copies (no host synchronisation) are left out.

Device-to-host copies of less than ``min_d2h_bytes`` (a scalar read back) are left to
launch-gap's sync-wait: the call waits for the GPU, not for the copy.

Cost (from the accounting): the GPU time the copies explain, bounded by their evidence:
the time the accounting put in blocking-copy or synchronization from each call to the
end of the idle stretch it left behind (the thread held in the call, and the lead it
lost there), and the copy's own time when nothing ran beside it; not what the thread
did after the call returned (working on the results, loading the next batch). One
finding per thread, API, direction and memory kinds in each phase, however many
iterations repeat it. Evidence: bytes, the achieved copy bandwidth on the GPU, memory
kinds, correlation ids.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.api_names import ASYNC
from gpugap.accounting.buckets import COPY_IDS
from gpugap.accounting.labels import ranges_of
from gpugap.report.table import Table
from gpugap.report.trace import NO_CALL, Trace
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.evidence import group_ids, rows_by_group
from gpugap.rules.model import Cause, EventRef, Link, Mark, Outline, Severity
from gpugap.units import fmt_bytes, fmt_ns

FIX_PAGEABLE = (
    "Put the host buffer in pinned (page-locked) memory so cudaMemcpyAsync returns at once "
    "and the copy overlaps compute: torch tensor.pin_memory() / DataLoader(pin_memory=True) "
    "then .to(device, non_blocking=True); in CUDA cudaMallocHost/cudaHostAlloc, or "
    "cudaHostRegister on an existing buffer. Issue it on a non-default stream.")
FIX_SYNC = (
    "Use cudaMemcpyAsync from pinned memory on a non-default stream and synchronise only "
    "where the data is needed (torch: non_blocking=True with pinned memory; keep .item(), "
    ".cpu() and .tolist() out of the hot loop).")
FIXES_PAGEABLE = {
    "JAX": "Stage transfers through pinned memory and overlap them: jax.device_put the next "
           "batch ahead of use (a prefetching input pipeline), and fetch results with "
           "jax.device_get only every N steps.",
    "CuPy": "Use pinned host buffers (cupyx.empty_pinned / cupy.cuda.alloc_pinned_memory) "
            "and copy asynchronously on a non-default stream (ndarray.set / ndarray.get "
            "with stream= and out=).",
    "CUDA C++": "Put the host buffers in pinned memory (cudaMallocHost / cudaHostAlloc, or "
                "cudaHostRegister an existing buffer) so cudaMemcpyAsync returns at once "
                "and the copy overlaps kernels; issue it on a non-default stream.",
}
FIXES_SYNC = {
    "JAX": "Read results back rarely: jax.device_get every N steps, not every step.",
    "CuPy": "Read results back rarely, asynchronously into pinned memory "
            "(ndarray.get(stream=..., out=pinned)), and wait on an event later.",
    "CUDA C++": "Use cudaMemcpyAsync from pinned memory on a non-default stream and "
                "synchronise (cudaEventSynchronize) only where the data is needed.",
}
CAUSES = (Cause("pageable-async", "async copy API on pageable host memory", FIX_PAGEABLE,
                title="Copies through pageable memory", fixes=FIXES_PAGEABLE),
          Cause("synchronous", "synchronous copy API", FIX_SYNC,
                title="Synchronous copies", fixes=FIXES_SYNC))
# What a blocked copy explains: the time its thread was held in it, waiting for the GPU
# or staging the data, and the copy itself where nothing ran beside it. Not what the
# thread did after the call returned (the work on the results, the next batch).
CLAIMED = ("blocking-copy", "synchronization", *COPY_IDS)


def _claim(context: Context, device: int, g: Table) -> Claim | None:
    dev = context.accounting.devices.get(int(device))
    if dev is None:
        return None
    held_until = dev.gaps.end_or(g["api_end"])
    lo = np.r_[g["api_start"], g["start"]]
    hi = np.r_[held_until, g["end"]]
    return Claim(int(device), tl.union(lo, hi), CLAIMED)


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    m = trace.table("memcpys")
    if m.empty:
        return []
    m = m.rows(m["api_start"] != NO_CALL)
    m = m.rows(context.in_scope(m["device"], m["api_start"]))
    if m.empty:
        return []
    blocked = (m["api_end"] - m["api_start"]).astype(np.int64)
    is_async = m.labels("api_name").matching(ASYNC)
    pageable = m.labels("src_kind").isin(["Pageable"]) | m.labels("dst_kind").isin(["Pageable"])
    kind = m.labels("kind")
    small_h2d = kind.isin(["Host-to-Device"]) & (m["bytes"] <= config["sync_h2d_max_bytes"])
    # Reading back a few bytes (.item(), .get() of a scalar) holds the thread to wait for
    # the GPU, not to stage data: a synchronisation (launch-gap's sync-wait), whatever
    # the memory kind.
    small_d2h = kind.isin(["Device-to-Host"]) & (m["bytes"] < config["min_d2h_bytes"])
    d2d = kind.isin(["Device-to-Device", "Peer-to-Peer"])
    cause = np.where(small_d2h, "",
                     np.where(is_async & pageable, "pageable-async",
                              np.where(~is_async & ~small_h2d & ~d2d, "synchronous", "")))
    kept = (cause != "") & (blocked >= config["min_blocked_us"] * 1e3)
    if not kept.any():
        return []
    m = m.rows(kept).with_columns(blocked=blocked[kept], cause=cause[kept])
    m = m.with_columns(copy_ns=(m["end"] - m["start"]).astype(np.int64),
                       phase=context.phases_of(m["device"], m["start"]))
    names = ["api_name", "kind", "src_kind", "dst_kind"]
    group = group_ids([m[k] for k in ["device", "phase", "gtid", "cause", *names]])
    findings = []
    for rows in rows_by_group(group):
        g = m.rows(rows)
        device, phase, gtid, cause = (g[k][0] for k in ("device", "phase", "gtid", "cause"))
        api_name, direction, src, dst = (g.labels(k)[0] for k in names)
        cost = int(g["blocked"].sum())
        total_bytes = int(g["bytes"].sum())
        gbps = total_bytes / max(int(g["copy_ns"].sum()), 1)  # bytes/ns == GB/s
        thread = trace.thread_name(int(gtid))
        # The five that blocked longest (ties: the first in the report), as nlargest.
        examples = g.rows(np.argsort(-g["blocked"], kind="stable")[:5])
        text = message(cause=str(cause), copies=len(g), api=str(api_name),
                       direction=str(direction), src=str(src), dst=str(dst),
                       total_bytes=total_bytes, thread=thread, blocked_ns=cost,
                       worst_ns=int(examples["blocked"][0]), gbps=gbps)
        findings.append(Finding(
            rule=RULE.id, cause=str(cause), severity=Severity.INFO,
            start_ns=int(g["api_start"].min()), end_ns=int(max(g["api_end"].max(), g["end"].max())),
            cost_ns=cost, at_ns=int(g["api_start"].min()), message=text,
            fix=RULE.causes[str(cause)].fix_for(context.framework), marks=_marks(examples),
            streams=sorted(set(g["stream"].tolist())), device=int(device), count=len(g),
            ranges=ranges_of(trace, g["api_start"]), phase=str(phase),
            pid=int(g["pid"][0]), claim=_claim(context, device, g),
            evidence={
                "api": api_name, "thread": thread, "direction": direction,
                "memory": f"{src} -> {dst}", "bytes_total": total_bytes,
                "blocked_ns_total": cost, "copy_ns_total": int(g["copy_ns"].sum()),
                "achieved_gbps": round(gbps, 3),
                "copies": [{"correlation_id": r["corr"], "api_start_ns": r["api_start"],
                            "blocked_ns": r["blocked"], "bytes": r["bytes"],
                            "copy_start_ns": r["start"], "copy_ns": r["copy_ns"],
                            "gbps": round(r["bytes"] / max(r["copy_ns"], 1), 3)}
                           for r in examples.records()],
            }))
    return findings


def _marks(examples: Table) -> list[Mark]:
    """Each copy outlined on its thread (the call) and on the GPU, linked."""
    marks: list[Mark] = []
    for r in examples.records():
        call = EventRef("api", r["corr"], pid=r["pid"], start_ns=r["api_start"])
        copy = EventRef("memcpy", r["corr"], stream=r["stream"], pid=r["pid"],
                        start_ns=r["start"])
        marks += [Outline(call), Outline(copy), Link(call, copy, "ss")]
    return marks


def message(*, cause: str, copies: int, api: str, direction: str, src: str, dst: str,
            total_bytes: int, thread: str, blocked_ns: int, worst_ns: int,
            gbps: float) -> str:
    """What the copies of one finding did and why they blocked."""
    what = (("staged through the driver's pinned buffer: the call returns only when "
             "the last chunk is staged" if src == "Pageable" else
             "bounced through the driver's pinned buffer: the call returns only once "
             "the data has landed in pageable memory")
            + ", so it blocks like a synchronous copy"
            if cause == "pageable-async" else
            "a synchronous copy returns only when it and all earlier work are done")
    return (f"{copies} {api} {direction} cop{'y' if copies == 1 else 'ies'} "
            f"({src} -> {dst}, {fmt_bytes(total_bytes)}) held {thread} for "
            f"{fmt_ns(blocked_ns)} in total (worst {fmt_ns(worst_ns)}); "
            f"{what}. The copy engine ran at {gbps:.3g} GB/s while the host could "
            "queue no other work.")


RULE = Rule(
    id="blocking-memcpy",
    title="Copy that blocked its CPU thread",
    thresholds={
        "min_blocked_us": Threshold(
            50, "us", "report copies whose API call held the thread at least this long; "
            "a pinned cudaMemcpyAsync returns in about 3-25 us"),
        "sync_h2d_max_bytes": Threshold(
            64000, "B", "synchronous host-to-device copies up to this size return once "
            "staged and are not reported (NVIDIA's cuda_memcpy_sync uses 64000)"),
        "min_d2h_bytes": Threshold(
            65536, "B", "device-to-host copies smaller than this (a scalar read back by "
            ".item() or .get()) hold the thread to wait for the GPU, not to copy: they are "
            "synchronisation (launch-gap's sync-wait), not reported here"),
    },
    rationale=("While a copy call blocks, the thread cannot launch anything else: kernels "
               "queued after it start late and the copy cannot overlap with them."),
    fix=FIX_PAGEABLE,
    causes=CAUSES,
    detect=detect,
    color="#d62728",
    priority=10,
)

