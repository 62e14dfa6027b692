"""exposed-communication: collectives the GPU waited on with no compute to hide them.

Communication kernels (NCCL, NVSHMEM) that run while compute runs on the same device cost
nothing; the accounting puts the rest, communication with nothing else running, in its
``communication`` bucket. This rule reports that bucket per device and phase (or
``--range``) when it holds at least ``min_share_pct`` of the scope, with its cause:

- ``waiting-for-peer``: most of the exposed time passed before the last peer started the
  same collective (collectives matched in order across the devices of the report): this
  device arrived early and waited inside the collective for a late rank.
- ``after-compute``: most of the exposed collectives ran once at least
  ``after_compute_pct`` of their iteration's compute was done: they were issued after
  the compute they could have hidden under (all-reduce after the whole backward pass:
  DDP's overlap not in use, or a manual all_reduce loop).
- ``same-stream``: they ran in the middle of the compute, but on a stream that also runs
  the compute, so they could only run between compute kernels.
- otherwise ``after-compute`` too: compute followed, on other streams, yet waited for
  the collectives (it needs their result).

Collective names and counts come from NCCL's own NVTX ranges (``ncclAllReduce``...) when
the report has them, else from the kernels' names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import CODE
from gpugap.accounting.labels import ranges_of
from gpugap.accounting.work import SOURCES
from gpugap.report.table import as_labels, factorize
from gpugap.report.trace import Trace
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.model import Band, Cause, EventRef, Mark, Outline, Severity
from gpugap.units import fmt_ns

CAUSES = (
    Cause("after-compute", "collectives issued after the compute they could hide under",
          "Overlap communication with the backward pass: wrap the model in "
          "DistributedDataParallel (its bucketed all-reduce starts as soon as a bucket of "
          "gradients is ready; tune bucket_cap_mb) or FSDP. Reducing gradients by hand, "
          "launch each all_reduce(async_op=True) from a gradient hook "
          "(register_post_accumulate_grad_hook) during backward, not in a loop after it, "
          "and wait on the handles before the optimizer step.",
          title="Exposed communication (collectives after compute)"),
    Cause("same-stream", "communication serialized with compute on one stream",
          "Run collectives on their own stream so compute can proceed beside them (NCCL's "
          "default in PyTorch: don't force them onto the compute stream), ordered with "
          "events rather than by sharing one stream.",
          title="Exposed communication (on the compute stream)",
          fixes={"JAX": "Let XLA schedule the collectives beside compute: keep the step one "
                        "jitted, sharded program (jax.jit with NamedSharding, or shard_map) "
                        "so its latency-hiding scheduler overlaps each collective with "
                        "independent work, and avoid host syncs between the pieces.",
                 "CUDA C++": "Issue the collectives (ncclAllReduce...) on a stream of their "
                             "own, ordered with events, so compute kernels run beside them."}),
    Cause("waiting-for-peer", "a collective lasting far longer than needed: a peer is late",
          "Another rank is late: this one waits inside the collective. Analyze the late "
          "rank's report (its own verdict says why: data loading, host work, a slower GPU) "
          "and balance the work: even batches, data loading in workers, no extra host work "
          "on one rank (logging, checkpointing) inside the step.",
          title="Waiting for a late rank inside collectives",
          waits_for_device="collective"),
)
# after-compute when most communication already hides under compute (what is left is
# the step's tail).
FIX_AFTER_COMPUTE_TAIL = (
    "Most communication already runs under compute; what is left are the last "
    "collectives of the step, issued when backward is over: make the last gradient "
    "buckets smaller (DDP bucket_cap_mb, or a smaller first bucket), start the "
    "optimizer on buckets already reduced, or overlap the tail with the next step's "
    "forward (FSDP's prefetching).")
# A wait for another rank's start-up: nothing in the steady state to change.
FIX_STARTUP = (
    "Nothing to change in the steady state: the other rank was still starting up (loading, "
    "compiling, warming up). If the job's start-up matters, look at that rank's own "
    "start-up costs; otherwise profile from the steady state on (nsys --capture-range).")
MAX_MARKED = 5          # exposed stretches and collectives drawn per finding
# NCCL's NVTX ranges of collectives (ncclAllReduce...): named nccl*, and not the
# communicator's set-up or the group calls around them (no Comm or Group in the name).
NCCL_COLLECTIVE = re.compile(r"^nccl(?!.*(?:Comm|Group))", re.DOTALL)

WHY = {
    "after-compute": "the collectives were issued after the compute they could have hidden "
                     "under",
    "same-stream": "the collectives share a stream with the compute, so they run between "
                   "compute kernels, never beside them",
    "waiting-for-peer": "this device started its collectives before a peer did and waited "
                        "inside them for the late rank",
}


def _comm_ops(dev) -> np.ndarray:
    """Positions of the device's communication ops (start order)."""
    return dev.work.positions(CODE["communication"])


def _peer_wait(context: Context, device: int, ops: np.ndarray) -> np.ndarray | None:
    """Per communication op of *device*: how long after its start the last peer started
    the same collective (the k-th communication op of every device with as many),
    or None when the report has no peer to compare with."""
    starts = {}
    for d, dev in context.accounting.devices.items():
        mine = _comm_ops(dev)
        if mine.size == ops.size and ops.size:
            starts[d] = dev.work.take(mine).start
    if len(starts) < 2 or device not in starts:
        return None
    latest = np.max(np.vstack(list(starts.values())), axis=0)
    return latest - starts[device]


def _collectives(trace: Trace, work, ops: np.ndarray) -> dict[str, int]:
    """Collective -> how many of *ops* it launched: the NCCL NVTX range (ncclAllReduce,
    ncclBroadcast...) of the launching process around each op's launch call, when the
    report has them; else the kernels' own names."""
    nv = trace.table("nvtx")
    launched = work.gather("api_start", ops)
    pid = work.gather("pid", ops).astype(np.int64)
    if len(nv) and ops.size:
        names = as_labels(nv["name"])
        ranges = np.flatnonzero(names.matching(NCCL_COLLECTIVE))
        range_pid = nv["pid"][ranges]
        label = np.full(ops.size, None, dtype=object)
        for p in np.unique(pid).tolist():
            own = ranges[range_pid == p]
            if not own.size:
                continue
            own = own[np.argsort(nv["start"][own], kind="stable")]
            start, end = nv["start"][own], nv["end"][own]
            mine = np.flatnonzero((pid == p) & ~np.isnan(launched))
            k = np.searchsorted(start, launched[mine], side="right") - 1
            inside = (k >= 0) & (launched[mine] <= end[np.maximum(k, 0)])
            label[mine[inside]] = names.take(own[k[inside]]).strings()
        if any(v is not None for v in label.tolist()):
            return _by_count([v for v in label.tolist() if v is not None])
    return _by_count(work.names(trace, ops))


def _by_count(names: list[str]) -> dict[str, int]:
    """How many times each of *names* occurs, the commonest first (ties: in order of first
    appearance, as pandas' value_counts)."""
    codes, distinct = factorize(np.array(names, dtype=object))
    counts = np.bincount(codes)
    return {str(distinct[i]): int(counts[i])
            for i in np.argsort(-counts, kind="stable").tolist()}


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    findings = []
    for device, dev in context.accounting.devices.items():
        ops = _comm_ops(dev)
        if not ops.size:
            continue
        exposed = dev.by_bucket.get("communication", tl.EMPTY)
        if not exposed[0].size:
            continue
        wait = _peer_wait(context, device, ops)
        for phase, span, _, base in context.judged_phases(device):
            mine = tl.intersect(exposed, span)
            cost = tl.total(mine)
            # (A wait for another rank's start-up is named whatever its share: it is why
            # the first steps were slow, and the job's late rank at start-up.)
            held = dev.phases.held_by is not None and phase in ("start-up", "warm-up")
            if cost <= 0 or (100.0 * cost / base < config["min_share_pct"] and not held):
                continue
            findings.append(_finding(trace, config, context, dev, phase, span, mine, ops,
                                     wait, cost))
    return findings


def _finding(trace, config, context, dev, phase, span, mine, ops, wait, cost) -> Finding:
    work = dev.work
    start, end = work.take(ops)[:2]
    exposed_each = tl.overlap_each(start, end, mine)
    hit = exposed_each > 0
    total = max(int(exposed_each.sum()), 1)
    # Waiting for a peer: the exposed time before the last peer started the collective.
    waited = 0
    if wait is not None:
        # Once, however many collectives waited at the same time (their waits overlap).
        before = tl.union(start[hit], start[hit] + np.maximum(wait[hit], 0))
        waited = tl.total(tl.intersect(before, mine))
    # Same stream as the compute: exposed collectives on streams that also run compute.
    stream = work.gather("stream", ops).astype(np.int64)
    compute_streams = np.unique(work.gather(
        "stream", work.positions(CODE["compute"])).astype(np.int64))
    shared = np.isin(stream, compute_streams)
    shared_ns = int(exposed_each[shared].sum())
    # How much of its iteration's (or phase's) compute was done when each began.
    if phase == "steady" and len(dev.phases.steady_iterations):
        lo, hi = dev.phases.iteration_windows(dev.phases.steady_iterations)
    else:
        lo, hi = span
    compute = dev.by_bucket.get("compute", tl.EMPTY)
    k = np.clip(np.searchsorted(lo, start, side="right") - 1, 0, max(lo.size - 1, 0))
    first = np.minimum(lo[k], start)
    done = tl.overlap_each(first, start, compute)
    whole_it = np.maximum(tl.overlap_each(lo, hi, compute)[k], 1)
    late = 100.0 * done / whole_it >= config["after_compute_pct"]
    late_ns = int(exposed_each[hit & late].sum())
    if waited >= 0.5 * total:
        cause = "waiting-for-peer"
    elif late_ns < 0.5 * total and shared_ns >= 0.5 * total:
        cause = "same-stream"
    else:
        cause = "after-compute"
    # A few percent of waiting is the ranks' skew (launcher threads, clocks), not a late
    # rank: context, not the verdict (late_rank_pct).
    skew = (cause == "waiting-for-peer" and phase == "steady"
            and 100.0 * cost / max(tl.total(span), 1) < config["late_rank_pct"])
    collectives = _collectives(trace, work, ops[hit])
    comm_ns = int(tl.overlap_each(start, end, span).sum())
    union = tl.total(tl.intersect(tl.union(start, end), span))
    hidden_pct = round(100.0 * (1 - cost / union), 1) if union > 0 else None
    at = int(start[hit][0]) if hit.any() else int(span[0][0])
    evidence = {"exposed_ns": cost, "comm_time_ns": union, "comm_kernel_ns": comm_ns,
                "comm_compute_overlap_pct": hidden_pct,
                "collectives": collectives, "kernels": int(hit.sum()),
                "waiting_for_peer_ns": waited, "on_compute_stream_ns": shared_ns,
                "after_most_compute_ns": late_ns,
                "streams": sorted(set(stream[hit].tolist()))}
    top = max(collectives.items(), key=lambda kv: kv[1], default=("", 0))
    # A wait in the warm-up that the job's phases gave this device because another was
    # still starting up (gpugap.accounting.phases.align): that device's start-up.
    held = dev.phases.held_by if phase in ("start-up", "warm-up") else None
    program = context.accounting.program
    if held is not None and held["device"] is None and wait is None and \
            start[hit].size and int(start[hit][0]) < held["until_ns"]:
        # One rank's report alone: its phases found a collective that waited once, early,
        # far longer than any later one (phases._peer_start_up): a peer's start-up.
        cause = "waiting-for-peer"
    starting = None
    if held is not None and cause == "waiting-for-peer" and start[hit].size and \
            int(start[hit][0]) < held["until_ns"]:
        starting = held["who"] or (program.who(held["device"]) if program is not None
                                   else f"GPU {held['device']}")
        evidence |= {"waiting_for_startup_of": starting,
                     "note": f"waiting for {starting}'s start-up"}
    fix = (FIX_AFTER_COMPUTE_TAIL if cause == "after-compute" and hidden_pct is not None
           and hidden_pct >= 50 else RULE.causes[cause].fix)
    return Finding(
        rule=RULE.id, cause=cause, severity=Severity.INFO, start_ns=int(mine[0][0]),
        end_ns=int(mine[1][-1]), cost_ns=int(cost), at_ns=at, phase=phase,
        message=message(cause, device=dev.device, exposed_ns=cost, kernels=int(hit.sum()),
                        collective=top[0], calls=top[1], hidden_pct=hidden_pct,
                        waited_ns=waited, starting=starting),
        fix=FIX_STARTUP if starting else fix, marks=_marks(dev, cause, mine, ops, exposed_each),
        device=dev.device, count=int(hit.sum()),
        streams=sorted(set(stream[hit].tolist())),
        ranges=ranges_of(trace, start[hit], weights=exposed_each[hit].astype(np.float64)),
        evidence=evidence | ({"note": "a skew between the ranks, under "
                                       f"{config['late_rank_pct']:g}% of the steady state"}
                             if skew else {}),
        claim=Claim(dev.device, span, ("communication",)),
        max_severity=Severity.INFO if skew else None,
        min_share_pct=None if starting else float(config["min_share_pct"]))


def _marks(dev, cause: str, mine: tl.Intervals, ops: np.ndarray, exposed_each: np.ndarray
           ) -> list[Mark]:
    """The longest exposed stretches shaded across the device, and the communication
    kernels exposed longest outlined."""
    lo, hi = mine
    longest = np.sort(np.argsort(-(hi - lo), kind="stable")[:MAX_MARKED])
    marks: list[Mark] = [Band(int(lo[i]), int(hi[i]), dev.device,
                              label=f"exposed {fmt_ns(int(hi[i] - lo[i]))}", cause=cause)
                         for i in longest.tolist()]
    order = np.argsort(-exposed_each, kind="stable")[:MAX_MARKED]
    worst = ops[order[exposed_each[order] > 0]]
    work = dev.work
    corr, stream, pid = (work.gather(c, worst) for c in ("corr", "stream", "pid"))
    shown = work.take(worst)
    marks += [Outline(EventRef(SOURCES[int(s)], int(c), stream=int(st), pid=int(p),
                               start_ns=int(t)))
              for s, c, st, p, t in zip(shown.source.tolist(), corr.tolist(),
                                        stream.tolist(), pid.tolist(),
                                        shown.start.tolist(), strict=True)]
    return marks


def message(cause: str, *, device: int, exposed_ns: int, kernels: int, collective: str,
            calls: int, hidden_pct: float | None, waited_ns: int,
            starting: str | None = None) -> str:
    """How long communication ran exposed, the commonest collective, and why."""
    if starting:
        return (f"GPU {device} waited {fmt_ns(waited_ns)} inside {kernels} communication "
                f"kernels (e.g. {collective} x{calls}) for {starting} to finish starting "
                "up: a start-up cost of the job, not of the steady state.")
    return (f"Communication on GPU {device} ran exposed for {fmt_ns(exposed_ns)}: "
            f"{kernels} communication kernels (e.g. {collective} x{calls}) ran "
            f"with no compute beside them; only {hidden_pct}% of the communication "
            f"time was hidden under compute. Why: {WHY[cause]}"
            + (f" (waited {fmt_ns(waited_ns)} for the last peer)." if waited_ns else "."))


RULE = Rule(
    id="exposed-communication",
    title="Communication not hidden under compute",
    thresholds={
        "min_share_pct": Threshold(2, "%", "report exposed communication holding at least "
                                   "this share of its scope (steady state, --range, or "
                                   "the whole timeline for one-time costs)"),
        "late_rank_pct": Threshold(10, "%", "waiting for a peer below this share of the "
                                   "steady state is the ranks' skew (launcher threads, "
                                   "clocks), context rather than a late rank"),
        "after_compute_pct": Threshold(80, "%", "a collective that starts once this share "
                                       "of its iteration's compute is done was issued "
                                       "after the compute (cause after-compute)"),
    },
    rationale=("A collective that runs beside compute costs nothing; one the GPU waits on "
               "adds its whole length to every step, and grows with the model and the "
               "number of ranks."),
    fix=CAUSES[0].fix,
    causes=CAUSES,
    detect=detect,
    color="#00897b",
    priority=15,
)
