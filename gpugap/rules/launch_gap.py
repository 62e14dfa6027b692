"""launch-gap: the GPU ran nothing, and why.

The accounting (gpugap.accounting.attribution) has already put every idle nanosecond of
each device in a bucket, from what the thread that launched the next operation was doing
meanwhile. This rule reports each idle bucket that holds at least ``min_share_pct`` of a
phase (steady state, or the one-time start-up/tail; a ``--range`` is one scope), as one
finding per device, phase and cause, whatever the length of the gaps it is spread over:
a thousand gaps of 20 us cost as much as one of 20 ms. Causes (the bucket in brackets):

- ``launch-bound`` (launch-bound): gaps shorter than ``min_gap_us`` while the host
  launched back to back: each piece of work finished before the next arrived.
- ``sync-wait`` (synchronization): the host waited for the GPU (a synchronize call, a
  synchronous device-to-host copy: .item(), .cpu(), nonzero()), and the GPU drained.
- ``allocation`` (allocation): cudaMalloc/cudaFree or host allocations.
- ``host-blocked`` (blocking-copy): blocked in a copy call (pageable memory).
- ``module-load`` (module-load): loading kernels/libraries (lazy loading, first use).
- ``compilation`` (compilation): JIT compilation (torch.compile, Triton) on the host.
- ``input`` (input): outside CUDA before uploading a batch: data loading.
- ``host-launch-latency`` (host-work): outside CUDA for stretches of ``min_gap_us`` or
  more between launches: Python or CPU work, I/O.
- ``results-work`` (results): outside CUDA after a batch's output came back (a
  device-to-host copy of 64 KiB or more just before the gap, or one of any size when
  the gap ends in the next read back: values read one at a time): work on the results.
- ``thread-wait`` (thread-wait): blocked in an OS wait on another thread (a queue, a
  lock, a condition variable, a semaphore, poll) or asleep, while no launching thread
  of the process had work: the GPU had nothing to do (a server waiting for requests).
- ``queued-wait`` (queued-wait): the next operation was queued in time, but a dependency
  that is not GPU work held it (host function, another process's event).
- ``cross-device-wait`` (cross-device-wait): queued work that waited while a GPU it takes
  data from (peer copies) was busy: the stages of a pipeline run one after the other.
- ``library-churn`` (module-load): module loading or library handles created in most
  steady iterations (a cuBLAS handle created and destroyed around every GEMM): not a
  one-time load that a warm-up would remove.
- ``unknown`` (unknown): the next operation has no launch call in the report.

``min_gap_us`` (default 100 us) separates launch overhead from host work: a launch takes
about 5-10 us from call to execution and a synchronise-then-launch round trip 10-30 us,
so a gap of 100 us is an order of magnitude beyond launch latency. Where a Python
framework launches (PyTorch, JAX, CuPy), each operation costs tens to hundreds of
microseconds of interpreter time: there a gap is host work from ten times the launching
thread's own pace of launches (at least 100 us, at most 1 ms), unless ``min_gap_us`` is
set. Fixes speak the program's framework (PyTorch, JAX, CuPy, CUDA C++).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import BUCKETS, BY_ID, IDS, UNKNOWN, Bucket
from gpugap.accounting.labels import ranges_of
from gpugap.accounting.policy import D2H, MIN_GAP_US, jit_ops
from gpugap.accounting.work import SOURCES
from gpugap.report.table import Table, as_labels
from gpugap.report.trace import Trace, demangled_name
from gpugap.rules.base import Claim, Context, Finding, Rule, Threshold
from gpugap.rules.evidence import dependency_calls, host_calls
from gpugap.rules.model import Band, Cause, EventRef, Link, Mark, Outline, Severity
from gpugap.units import fmt_ns

# The idle buckets of the accounting, each the one description of its cause
# (gpugap.accounting.buckets.IdleCause): cause ids kept from earlier versions (users'
# gates name them).
IDLE_BUCKETS = tuple(b for b in BUCKETS if b.idle is not None)
# Accounting bucket -> cause.
BUCKET_CAUSE = {b.id: b.idle.id for b in IDLE_BUCKETS}


def _cause(bucket: Bucket) -> Cause:
    """The cause an idle bucket describes, as a rule's Cause."""
    idle = bucket.idle
    return Cause(idle.id, bucket.meaning, bucket.fix, color=idle.color, title=idle.title,
                 occasional_title=idle.occasional_title, priority=idle.priority,
                 call_category=bucket.call_category, fixes=bucket.fixes,
                 waits_for_device=idle.waits_for_device)


FIX_CHURN = (
    "Create library contexts once and reuse them: make the handle (cublasCreate, "
    "cudnnCreate, cufftPlan*) once outside the loop (cublasSetStream switches its stream), "
    "load modules once (cuModuleLoad / cuModuleGetFunction outside the loop) and allocate "
    "workspaces once; warming up does not help, the cost recurs every iteration.")
FIX_CHURN_CUPY = (
    "Load the module once: create the RawModule / RawKernel (or cupy.cuda.Module) once "
    "outside the loop and fetch its functions once; loading and unloading a module every "
    "iteration pays the driver's load each time.")
# Module-load time in at least this share of the steady iterations recurs: churn, not a
# one-time load (which a warm-up would remove).
CHURN_ITERATIONS = 0.5
# Without iterations, loads in at least this many gaps before they can recur.
CHURN_MIN_GAPS = 6

# Module loading and compilation settle first (priority 0): they explain what other
# findings see of the same time (the warm-up latency of a lazily loaded module).
# library-churn is module loading that recurs, a cause of its own in the module-load
# bucket (before 'unknown', as the causes were always listed).
LIBRARY_CHURN = Cause(
    "library-churn", "library contexts or modules created and destroyed in the loop",
    FIX_CHURN, color="#795548", title="Library contexts created and destroyed in the "
    "loop", call_category="module-load", priority=0, fixes={"CuPy": FIX_CHURN_CUPY})
CAUSES = (*(_cause(b) for b in IDLE_BUCKETS if b.id != UNKNOWN), LIBRARY_CHURN,
          _cause(BY_ID[UNKNOWN]))
# Results read back one value at a time, host work between the reads: this share of the
# results gaps' time ends in the next device-to-host copy (the catalogue's
# results-read-by-value names it).
BY_VALUE_PCT = 50.0
# launch-bound, where the work already is compiled or runs as a CUDA graph.
FIX_LAUNCH_BOUND_COMPILED = (
    "The kernels are already compiled (torch.compile's Triton kernels) and still "
    "arrive one at a time: compile with mode='reduce-overhead' (or 'max-autotune') so "
    "the step replays as a CUDA graph, keep the graph from breaking (no .item(), "
    "no data-dependent Python control flow in the compiled region), or raise the "
    "batch size.")
FIX_LAUNCH_BOUND_GRAPH = (
    "The work already runs as a CUDA graph; the GPU waits between replays: queue "
    "replays back to back (read results and synchronise every N steps, not every "
    "step), capture more of the step into the graph (loss, optimizer step, input "
    "copies into static buffers), or capture several steps in one graph.")

FIX_LAUNCH_BOUND_OPTIMIZER = (
    "The optimizer updates each parameter with kernels of its own (a for-loop over "
    "parameters: foreach=False, or an optimizer without a multi-tensor path): use the "
    "multi-tensor or fused implementation, torch.optim.AdamW(params, foreach=True) or "
    "fused=True (a few kernels for all parameters), or torch.compile the optimizer step.")
# NVTX ranges around an optimizer step, as programs name them.
OPTIMIZER_RANGE = re.compile(r"optim|adam|sgd|lamb|lion|adagrad|rmsprop|param.*update",
                             re.IGNORECASE)
# ATen's element-wise kernels of Adam-like updates, one per parameter when not foreach.
PER_PARAMETER_UPDATE = re.compile(r"addcdiv|lerp_kernel|addcmul")


def _full_name(kernels: Table) -> str:
    """The column of the kernels' full (demangled) names: their short names where the
    report has none."""
    return "demangled" if "demangled" in kernels else "name"


def _per_parameter_optimizer(trace: Trace, where: list[str]) -> bool:
    """Does the launch-bound time sit in an optimizer step made of per-parameter kernels:
    an NVTX range named like an optimizer step, or (without one) Adam's element-wise
    update kernels with no multi-tensor kernel (multi_tensor_apply) in the report?"""
    if any(OPTIMIZER_RANGE.search(name) for name in where):
        return True
    kernels = trace.table("kernels")
    if not len(kernels) or where:
        return False
    names = as_labels(kernels[_full_name(kernels)])
    # The names some kernel has (counted per code: no string per kernel).
    distinct = names.categories[np.bincount(names.codes + 1,
                                            minlength=names.categories.size + 1)[1:] > 0]
    update = sum(bool(PER_PARAMETER_UPDATE.search(n)) for n in distinct)
    multi = any("multi_tensor_apply" in n for n in distinct)
    return update >= 2 and not multi


# What a finding says the launching thread was doing, per cause.
WHY = {b.idle.id: b.idle.why for b in IDLE_BUCKETS} | {
    "library-churn": "the launching thread created library contexts or loaded modules "
                     "again and again: in {churn} of the steady iterations",
}


def _launch_windows(work, ops: np.ndarray) -> list[tuple[int, int]]:
    """Per op at positions *ops*: from the launch before it (same thread, launch order)
    to its own, where the calls that could hold it in its stream were made; (0, 0) for
    no op (-1) or one whose launch is unknown."""
    out = [(0, 0)] * ops.size
    real = np.flatnonzero(ops >= 0)
    launched = work.gather("api_start", ops[real])
    known = ~np.isnan(launched)
    real, launched = real[known], launched[known].astype(np.int64)
    before = work.launched_before(ops[real])
    had = before >= 0
    since = launched.copy()
    since[had] = work.gather("api_start", before[had]).astype(np.int64)
    for i, a, b in zip(real.tolist(), since.tolist(), launched.tolist(), strict=True):
        out[i] = (a, b)
    return out


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    """One finding per device, phase and idle bucket holding at least min_share_pct of
    its scope (the phase, or a --range); settling drops those that fall under it once
    other findings have taken their part (costs only shrink there)."""
    findings = []
    for device, dev in context.accounting.devices.items():
        for phase, span, wall, base in context.judged_phases(device):
            totals = dev.totals_in(span)
            for bucket, cause in BUCKET_CAUSE.items():
                ns = totals.get(bucket, 0)
                if bucket in HOST_PACED and ns > 0:
                    ns -= _already_queued(dev, bucket, span)
                if ns > 0 and 100.0 * ns / base >= config["min_share_pct"]:
                    churn = None
                    if bucket == "module-load" and phase == "steady":
                        churn = _recurring_share(dev, bucket,
                                                 context.scope.steady_span(device))
                        if churn >= CHURN_ITERATIONS:
                            cause = "library-churn"
                    f = _finding(trace, config, dev, phase, span, bucket, cause, ns, wall,
                                 context.framework)
                    if cause == "library-churn":
                        f.evidence["iterations_with_loads"] = round(float(churn or 0), 3)
                        f.claim = _churn_claim(dev, span)
                    if cause == "cross-device-wait":
                        f.evidence["awaited_devices"] = _awaited(context, device)
                    findings.append(f)
    _read_host_calls(trace, findings)
    return findings


# Buckets that say the host set the GPU's pace (it synchronized, or launched too slowly):
# not where the next operation was queued before the gap even began.
HOST_PACED = ("synchronization", "launch-bound")


def _already_queued(dev, bucket: str, span: tl.Intervals) -> int:
    """The time of *bucket* in gaps whose next operation was launched before the gap began:
    the GPU did not wait for the host there, whatever call the host sat in (kernels
    queued on streams that the legacy default stream serializes, a few microseconds of
    the GPU's own between them). The accounting keeps the thread's state; the rule does
    not claim the host made those gaps."""
    held, per_gap, _ = dev.held_gaps(bucket, span)
    if not held.size:
        return 0
    nxt = np.asarray(dev.gaps.next_ops(held))
    known = nxt >= 0
    api_end = np.full(held.size, np.nan)
    api_end[known] = dev.work.gather("api_end", nxt[known])
    starts = np.asarray(dev.gaps.starts(held), dtype=np.float64)
    return int(np.asarray(per_gap)[~np.isnan(api_end) & (api_end <= starts)].sum())


def _read_host_calls(trace: Trace, findings: list[Finding]) -> None:
    """What the threads were doing in the example gaps of every finding (host_calls, one
    read of the OS runtime calls for them all), added to each finding's pending work:
    read here, in the detection, which runs beside the other rules' (forkjoin), rather
    than in finish, which runs alone once the findings are settled."""
    windows, counts = [], []
    for f in findings:
        dev, worst = f.pending[0], f.pending[1]
        known = [(g, gtid) for g, gtid in zip(worst.tolist(), dev.gaps.thread(worst).tolist(),
                                              strict=True) if gtid >= 0]
        windows += [(gtid, int(dev.gaps.starts(g)), int(dev.gaps.ends(g))) for g, gtid in known]
        counts.append(len(known))
    calls = iter(host_calls(trace, windows))
    for f, n in zip(findings, counts, strict=True):
        f.pending = (*f.pending, [next(calls) for _ in range(n)])


# What a library context's creation and destruction does in the gap it opens besides
# loading modules: allocating its workspace, freeing it (cudaFree synchronizes the
# device), synchronizing, its own host work (cublasCreate/cublasDestroy, cudnnCreate).
CHURN_BUCKETS = ("module-load", "allocation", "synchronization", "host-work")


def _churn_claim(dev, span: tl.Intervals) -> Claim:
    """Library churn claims the whole of each gap it loaded modules in (CHURN_BUCKETS):
    one problem, counted once and whole, not its module loads here and its allocations
    and synchronizations as findings of their own."""
    held, _, ends = dev.held_gaps("module-load", span)
    if not held.size:
        return Claim(dev.device, span, ("module-load",))
    starts = np.asarray(dev.gaps.starts(held), dtype=np.int64)
    return Claim(dev.device, tl.intersect(tl.union(starts, np.asarray(ends, np.int64)),
                                          span), CHURN_BUCKETS)


def _recurring_share(dev, bucket: str, steady: tuple[int, int]) -> float:
    """The share of the steady iterations holding time of *bucket*; without iterations,
    of tenths of the *steady* span (a one-time load sits in one)."""
    if len(dev.phases.steady_iterations) >= 3:
        return float((dev.steady_iteration_sums()[:, IDS.index(bucket)] > 0).mean())
    a, b = steady
    if b <= a:
        return 0.0
    # (Without iterations there are no first uses: the steady span is the steady state.)
    # Recurrence needs many gaps: one long lazy load can span half of the tenths.
    held, _, _ = dev.held_gaps(bucket, tl.as_intervals([a], [b]))
    if held.size < CHURN_MIN_GAPS:
        return 0.0
    edges = np.linspace(a, b, 11).astype(np.int64)
    return float((dev.bucket_sums(edges[:-1], edges[1:])[:, IDS.index(bucket)] > 0).mean())


def _awaited(context: Context, device: int) -> list[int]:
    """The GPUs *device* takes data from (the program model's links)."""
    program = context.accounting.program
    if program is None:
        return []
    return sorted({link.src for link in program.links if link.dst == device})


def _between_iterations(dev, held: np.ndarray, ends: np.ndarray) -> float:
    """The share of the gaps *held* (ending at *ends*) that falls outside the host's
    iterations, where they are marked by NVTX ranges (a server between its requests:
    waiting for work, not doing it); 0 where iterations tile the timeline."""
    it = dev.phases.iterations
    if it is None or it.source != "nvtx" or not held.size:
        return 0.0
    gaps = tl.union(dev.gaps.starts(held), ends)
    inside = tl.intersect(gaps, tl.union(it.cpu_start, it.cpu_end))
    whole = tl.total(gaps)
    return round(100.0 * (whole - tl.total(inside)) / whole, 1) if whole else 0.0


def _finding(trace, config, dev, phase, span, bucket, cause, ns, wall,
             framework: str | None) -> Finding:
    """The finding of one bucket in one phase; its examples' host calls and its message
    are completed by finish() for the findings settling keeps."""
    held, per_gap, ends = dev.held_gaps(bucket, span)
    fix = RULE.causes[cause].fix_for(framework)
    evidence = {"bucket": bucket, "gap_count": int(held.size)}
    if cause == "launch-bound" and held.size:
        # Never prescribe CUDA graphs to work that already runs in one.
        nxt = dev.gaps.next_after(ends)
        in_graph = np.zeros(held.size, dtype=bool)
        in_graph[nxt >= 0] = dev.work.in_graph(nxt[nxt >= 0])
        total = max(float(per_gap.sum()), 1.0)
        graph_pct = 100.0 * float(per_gap[in_graph].sum()) / total
        jit = np.zeros(held.size, dtype=bool)
        jit[nxt >= 0] = jit_ops(trace, dev.work, nxt[nxt >= 0])
        jit_pct = 100.0 * float(per_gap[jit].sum()) / total
        evidence |= {"before_cuda_graph_work_pct": round(graph_pct, 1),
                     "before_jit_kernels_pct": round(jit_pct, 1)}
        optimizer = _per_parameter_optimizer(trace, ranges_of(trace, ends, weights=per_gap))
        evidence["per_parameter_optimizer"] = optimizer
        if graph_pct >= 50.0:
            fix = FIX_LAUNCH_BOUND_GRAPH
        elif optimizer and framework == "PyTorch":
            fix = FIX_LAUNCH_BOUND_OPTIMIZER
        elif jit_pct >= 50.0 and framework == "PyTorch":
            fix = FIX_LAUNCH_BOUND_COMPILED
    if cause == "results-work" and held.size:
        # Read back value by value: the gaps end in the next read, not in new work.
        nxt = dev.gaps.next_after(ends)
        reads = np.zeros(held.size, dtype=bool)
        reads[nxt >= 0] = np.isin(dev.work.take(nxt[nxt >= 0]).bucket, D2H)
        by_value = 100.0 * float(per_gap[reads].sum()) / max(float(per_gap.sum()), 1.0)
        evidence |= {"between_reads_pct": round(by_value, 1),
                     "reads_between": int(reads.sum())}
    spare = False
    if cause == "thread-wait" and held.size and phase == "steady":
        evidence["between_iterations_pct"] = _between_iterations(dev, held, ends)
        # Waiting between the marked iterations (a server between requests): idle
        # capacity, context beside the verdict, not its bottleneck.
        spare = evidence["between_iterations_pct"] >= 50
        if spare:
            evidence["note"] = "idle capacity: waiting between iterations for work"
    top = np.argsort(-per_gap, kind="stable")[: int(config["max_examples"])]
    worst, worst_ns = held[top], per_gap[top]
    gaps = dev.gaps
    at = int(gaps.starts(worst[0])) if worst.size else int(span[0][0])
    first = max(int(gaps.starts(held[0])), int(span[0][0])) if held.size else at
    last = min(int(ends[-1]), int(span[1][-1])) if held.size else at
    return Finding(
        rule=RULE.id, cause=cause, severity=Severity.INFO, start_ns=first, end_ns=last,
        cost_ns=int(ns), message="",
        fix=fix, device=dev.device, count=int(held.size), at_ns=at, phase=phase,
        ranges=ranges_of(trace, ends, weights=per_gap), evidence=evidence,
        claim=Claim(dev.device, span, (bucket,)),
        max_severity=Severity.INFO if spare else None,
        min_share_pct=float(config["min_share_pct"]),
        pending=(dev, worst, worst_ns, float(config["min_gap_us"])))


def finish(trace: Trace, findings: list[Finding]) -> None:
    """Examples (the longest gaps, what their thread was doing, read in the detection:
    _read_host_calls) and messages, with the settled costs."""
    dep_windows, threads = [], {}
    for f in findings:
        dev, worst = f.pending[0], f.pending[1]
        gaps = dev.gaps
        threads[f.id] = dev.gaps.thread(worst)
        if f.cause != "queued-wait":
            continue
        launches = _launch_windows(dev.work, gaps.next_ops(worst).astype(np.int64))
        for i, gtid in enumerate(threads[f.id].tolist()):
            if gtid >= 0:
                dep_windows.append((gtid, *launches[i]))
    deps = iter(dependency_calls(trace, dep_windows))
    for f in findings:
        dev, worst, cause_ns, min_gap_us, host = f.pending
        calls = iter(host)
        f.pending = None
        gaps, work = dev.gaps, dev.work
        examples, marks = [], []
        # The ops that ended the gaps, read for all of them at once.
        nxt_all = np.asarray(gaps.next_ops(worst), dtype=np.int64)
        at = nxt_all[nxt_all >= 0]
        launched, op = work.gather("api_start", at), work.take(at)
        stream, corr, pid = (work.gather(c, at).tolist() for c in ("stream", "corr", "pid"))
        names = work.names(trace, at)
        kernels = trace.table("kernels")
        j = 0                                           # the next op's place in *at*
        for g, part, gtid, nxt in zip(worst.tolist(), cause_ns.tolist(),
                                      threads[f.id].tolist(), nxt_all.tolist(), strict=True):
            known = gtid >= 0
            item = {"start_ns": int(gaps.starts(g)), "end_ns": int(gaps.ends(g)),
                    "gap_ns": int(gaps.ends(g) - gaps.starts(g)), "cause_ns": int(part),
                    "thread": trace.thread_name(gtid) if known else None,
                    "host_calls": next(calls) if known else []}
            next_op = None
            if nxt >= 0:
                source, row = int(op.source[j]), int(op.row[j])
                item["next"] = {"name": names[j],
                                "demangled": (demangled_name(kernels, row)
                                              if source == 0 else None),
                                "kind": SOURCES[source],
                                "stream": int(stream[j]), "correlation_id": int(corr[j]),
                                "launched_ns": (None if np.isnan(launched[j])
                                                else int(launched[j]))}
                next_op = (int(pid[j]), int(op.start[j]))
                j += 1
            if f.cause == "queued-wait" and known:
                item["stream_dependencies"] = next(deps)
            examples.append(item)
            marks += _marks(f, item, next_op)
        f.evidence |= {"idle_ns": f.cost_ns, "gaps": examples}
        f.marks = marks
        # The length the accounting took for host work on this device (min_gap_us, or
        # in a Python framework up to ten times the thread's pace): launch-bound gaps
        # are shorter than it, and the message says so with the number it used.
        f.message = message(f.cause, device=f.device, phase=f.phase, idle_ns=f.cost_ns,
                            share_pct=f.share_pct, gaps=f.count,
                            min_gap_us=max(min_gap_us, dev.host_work_gap_ns / 1e3),
                            longest=examples[0] if examples else None, evidence=f.evidence)


def _marks(f: Finding, gap: dict, next_op: tuple[int, int] | None) -> list[Mark]:
    """A gap shaded across its device, labelled with its cause; the operation after it
    (*next_op*: its process and start) outlined, with an arrow from the call that
    launched it."""
    marks: list[Mark] = [Band(gap["start_ns"], gap["end_ns"], f.device,
                              label=f"{f.cause} {fmt_ns(gap['end_ns'] - gap['start_ns'])}",
                              cause=f.cause)]
    nxt = gap.get("next")
    if nxt is not None and next_op is not None:
        pid, start = next_op
        op = EventRef(nxt["kind"], nxt["correlation_id"], stream=nxt["stream"], pid=pid,
                      start_ns=start)
        call = EventRef("api", nxt["correlation_id"], pid=pid, start_ns=nxt["launched_ns"])
        marks += [Outline(op), Outline(call), Link(call, op, "ss")]
    return marks


def message(cause: str, *, device: int | None, phase: str | None, idle_ns: int,
            share_pct: float | None, gaps: int, min_gap_us: float,
            longest: dict | None, evidence: dict | None = None) -> str:
    """How long the GPU sat idle for *cause* and why, with the *longest* gap (its
    evidence record: its length, the operation after it, the host's calls meanwhile)."""
    top = longest or {}
    share = "" if share_pct is None else f"{share_pct:.1f}% of "
    where = {"steady": f"{share}the steady state",
             "start-up": "before the steady state (one-time)",
             "warm-up": "in the warm-up iterations (one-time)",
             "tail": "after the steady state",
             "range": f"{share}the range"}.get(phase or "steady", "")
    awaited = (evidence or {}).get("awaited_devices") or []
    other = (" and ".join(f"GPU {d}" for d in awaited) if awaited else "another GPU")
    churn = (evidence or {}).get("iterations_with_loads")
    why = WHY[cause].format(min_gap=fmt_ns(min_gap_us * 1e3), other=other,
                            churn=f"{100 * churn:.0f}%" if churn is not None else "most")
    busy_with = ", ".join(f"{h['name']} x{h['calls']} ({fmt_ns(h['ns'])})"
                          for h in top.get("host_calls", [])[:3])
    text = ""
    if top:
        text = (f" Longest: {fmt_ns(top['cause_ns'])}"
                + (f" before {top['next']['kind']} '{_short(top['next']['name'])}'"
                   if "next" in top else "")
                + (f"; the host was in {busy_with}." if busy_with else "."))
    if cause == "queued-wait" and top.get("stream_dependencies"):
        text += (" The launching thread had put "
                 + ", ".join(f"{d['name']} x{d['calls']}" for d in top["stream_dependencies"])
                 + " into streams before it.")
    by_value = (evidence or {}).get("between_reads_pct")
    if cause == "results-work" and by_value is not None and by_value >= BY_VALUE_PCT:
        text += (f" {by_value:.0f}% of it lay between one read back and the next: the "
                 "host read the results value by value.")
    lead = ""
    if cause == "compilation" and phase == "steady":
        # Compiling after the loop has settled: new shapes or guards made it recompile.
        lead = ("Recompilation inside the steady state (a new input shape, dtype or guard "
                "failure made the JIT compile again). ")
    return (lead + f"GPU {device} sat idle {fmt_ns(idle_ns)} ({where}) over {gaps} "
            f"gap{'s' if gaps != 1 else ''}: {why}." + text)


RULE = Rule(
    id="launch-gap",
    title="GPU idle, by cause",
    thresholds={
        # The accounting's own threshold (policy.MIN_GAP_US): a value set here reaches it
        # by its name (gpugap.rules.thresholds.accounting_settings).
        "min_gap_us": Threshold(MIN_GAP_US, "us", "idle gaps shorter than this, spent "
                                "launching and between launches, are launch-bound; longer "
                                "ones are host work (10x a launch's latency)",
                                setting="min_gap_us"),
        "min_share_pct": Threshold(2, "%", "report a cause holding at least this share of "
                                   "its scope: the steady state, the --range, or for "
                                   "one-time costs the whole timeline"),
        "max_examples": Threshold(5, "gaps", "gaps listed as evidence per finding"),
    },
    rationale=("Idle time is time the GPU could have worked; its cause is on the host, in "
               "what the thread that launched the next work was doing meanwhile."),
    fix=BY_ID["host-work"].fix,
    causes=CAUSES,
    detect=detect,
    finish=finish,
    color="#e8890c",
    priority=40,
)
