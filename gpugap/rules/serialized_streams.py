"""serialized-streams: kernels put on different streams that ran one after another.

Kernels are walked in start order per device. A *serialized transition* is a kernel B on
one stream that starts after every earlier kernel has (almost) finished, the last of them
being A on another stream. Runs of consecutive serialized transitions with the same cause
and at least ``min_transitions`` of them become findings. The cause of each transition:

- ``host-launch-bound``: B's launch call began after A had already finished, and no
  synchronisation explains it: every kernel ends before the host launches the next (tiny
  kernels, launch overhead bound). Cost: the GPU idle time between them.
- ``explicit-sync``: a stream/device/event synchronisation (host side, or a stream
  waiting on an event) between A's launch and B's launch.
- ``legacy-default-stream``: A or B ran on the legacy NULL stream, or NULL-stream work
  was launched between them, and neither stream is non-blocking: the legacy default
  stream implicitly synchronises with every blocking stream.
- ``resource-saturation``: B was already launched while A ran, but A's grid alone fills
  the GPU (blocks >= SMs x resident blocks per SM for its block size, registers and
  shared memory): B could start only in A's last wave. Expected; severity info.
- ``unknown``: B was launched in time and nothing above explains the serialisation.

Cost (from the accounting): host-launch-bound runs claim the idle time inside them;
the other causes claim the compute time of the kernels off the run's busiest stream (the
run's kernel time minus the busiest stream's), an upper bound of what overlap could have
saved; resource-saturation claims nothing. Runs stop at NVTX range boundaries; findings
fold the runs of one cause in each phase. Overlap helps only kernels that leave SMs
idle, small-grid's findings: the two settle as peers, the larger claim first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from gpugap import intervals as tl
from gpugap import scan
from gpugap.accounting.api_names import SYNCHRONIZE
from gpugap.accounting.labels import range_label_codes, ranges_of
from gpugap.accounting.occupancy import resident_blocks_per_sm, sm_counts
from gpugap.report.table import Table, factorize
from gpugap.report.trace import NO_CALL, Trace, demangled_name
from gpugap.rules.base import FINDING_PHASES, Claim, Context, Finding, Rule, Threshold
from gpugap.rules.groups import first_seen_codes, rows_of_codes
from gpugap.rules.model import Cause, EventRef, Link, Mark, Outline, Severity
from gpugap.units import fmt_ns

FIXES_LEGACY_STREAM = {
    "PyTorch": "Keep work off the legacy default stream between them: PyTorch's own streams "
               "(torch.cuda.Stream) do not synchronise with it, so look for what runs on "
               "the default stream between them (ops outside a `with torch.cuda.stream(s):` "
               "block, an extension launching on stream 0) and give it a stream of its own, "
               "ordered with events (torch.cuda.Event, Stream.wait_stream).",
    "JAX": "Keep work off the legacy default stream between them: XLA's own streams do "
           "not synchronise with it, so the work on stream 0 comes from a library or a "
           "custom call launching there: have it launch on the stream XLA passes it.",
    "CUDA Python": "Keep work off the legacy default stream between them: launch on "
                   "streams created non-blocking (cuda.core: "
                   "Device().create_stream(StreamOptions(nonblocking=True)); the driver: "
                   "cuStreamCreate with CU_STREAM_NON_BLOCKING), or run with the per-thread "
                   "default stream (CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1).",
    "CuPy": "Keep work off the legacy default stream between them: create the streams with "
            "cp.cuda.Stream(non_blocking=True) and run every operation inside a `with "
            "stream:` block (work outside one goes to the legacy null stream, which "
            "synchronises with every blocking stream).",
}
FIXES_LAUNCH_BOUND = {
    "PyTorch": "Launch fewer, larger kernels: one batched/grouped GEMM instead of many "
               "small ones (torch.bmm/baddbmm), fuse element-wise work (torch.compile), or "
               "capture the sequence once in a CUDA graph (torch.cuda.CUDAGraph, "
               "torch.compile(mode=\"reduce-overhead\")) and replay it.",
    "JAX": "Launch fewer, larger kernels: batch the small operations (jax.vmap) inside one "
           "jitted function, so that XLA fuses them and launches the step as one "
           "executable.",
    "CuPy": "Launch fewer, larger kernels: batch small arrays into one, fuse element-wise "
            "work (cupy.fuse, an ElementwiseKernel), or capture the sequence in a CUDA graph "
            "(stream.begin_capture() / end_capture(), then graph.launch()).",
}
CAUSE_LIST = (
    Cause("legacy-default-stream", "implicit synchronisation through the legacy NULL stream",
          "Keep work off the legacy default stream between them: compile with nvcc "
          "--default-stream per-thread (or use cudaStreamPerThread / CU_STREAM_PER_THREAD), "
          "or create the streams with cudaStreamNonBlocking.",
          title="Streams serialized by the legacy default stream",
          fixes=FIXES_LEGACY_STREAM),
    Cause("resource-saturation", "each kernel fills the GPU (expected)",
          "Nothing to fix: each kernel already fills the GPU, so overlap is neither possible "
          "nor needed. Overlap matters only for kernels that leave SMs idle."),
    Cause("host-launch-bound", "kernels finish before the host launches the next",
          "Launch fewer, larger kernels: one batched/grouped GEMM instead of many small ones "
          "(grouped GEMM in CUTLASS or cuBLASLt, cublasGemmBatchedEx), fuse kernels that "
          "run back to back, or capture the sequence once in a CUDA graph "
          "(cudaStreamBeginCapture / cudaStreamEndCapture) and replay it.",
          title="Launch-bound across streams", fixes=FIXES_LAUNCH_BOUND),
    Cause("explicit-sync", "stream/device/event synchronisation between them",
          "Remove synchronisation between independent work; order only what depends, with "
          "events (cudaEventRecord + cudaStreamWaitEvent), and synchronise the host once at "
          "the end.",
          title="Streams serialized by synchronisation",
          fixes={"PyTorch": "Remove synchronisation between independent work "
                            "(torch.cuda.synchronize, stream.synchronize, .item()); order "
                            "only what depends, with events (torch.cuda.Event.record, "
                            "stream.wait_event, or stream.wait_stream), and synchronise "
                            "the host once at the end.",
                 "CuPy": "Remove synchronisation between independent work "
                         "(stream.synchronize, cp.cuda.Device().synchronize, .get()); "
                         "order only what depends, with events (cp.cuda.Event.record, "
                         "stream.wait_event), and synchronise the host once at the end.",
                 "JAX": "Remove synchronisation between independent work "
                        "(block_until_ready, float(), np.asarray on results): put the "
                        "independent computations in one jitted function and let XLA "
                        "order them, and wait for results once at the end."}),
    Cause("unknown", "launched in time, yet serialized",
          "Check CUDA_DEVICE_MAX_CONNECTIONS (work from more streams than hardware queues "
          "falsely serialises), stream priorities, and cross-stream event waits.",
          title="Streams serialized for no visible reason"),
)

# A host synchronisation, or a stream waiting on an event: what _Between counts.
_SYNC_OR_WAIT = re.compile(f"{SYNCHRONIZE.pattern}|StreamWaitEvent")


# Transition causes as small integer codes: -1 not serialized (the kernels overlapped),
# 0 serialized on the same stream, then the causes.
_NONE, _SAME = -1, 0
CAUSES = ("", "explicit-sync", "host-launch-bound", "legacy-default-stream",
          "resource-saturation", "unknown")
_CODE = {c: i for i, c in enumerate(CAUSES)}


def _by_key(keys: np.ndarray, times: np.ndarray) -> dict[int, np.ndarray]:
    """The times of each key, sorted (grouped once, searched per batch of queries)."""
    if keys.size and keys.min() == keys.max():       # one thread or process: no grouping
        return {int(keys[0]): np.sort(times, kind="stable")}
    # Grouped by a stable sort of the keys, then each group's times sorted (both come in
    # long sorted runs, which a stable sort merges): the sort of (key, time) pairs.
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else keys
    bounds = np.r_[first, keys.size]
    return {int(keys[i]): np.sort(times[order[i:j]], kind="stable")
            for i, j in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)}


def _count_between(events: dict[int, np.ndarray], gtid: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> np.ndarray:
    """How many events of the same key (thread, process) fall in [lo, hi) for each
    query (0 when hi <= lo: B launched before A, or B's launch unknown and read as 0).
    *events*: each key's event times, sorted (_by_key)."""
    out = np.zeros(lo.size, dtype=np.int64)
    if not events or lo.size == 0:
        return out
    for g in np.unique(gtid).tolist():           # each key's queries: any order
        t = events.get(int(g))
        if t is None or not t.size:
            continue
        q = gtid == g
        if bool(q.all()):
            out = np.searchsorted(t, hi, "left") - np.searchsorted(t, lo, "left")
        else:
            out[q] = np.searchsorted(t, hi[q], "left") - np.searchsorted(t, lo[q], "left")
    return np.maximum(out, 0, out=out)


class _Kernels:
    """One device's kernels in (start, end) order, as arrays; full rows on demand."""

    def __init__(self, kernels: Table, positions: np.ndarray | None) -> None:
        self.table, self.positions = kernels, positions

        def col(name: str, dtype=None) -> np.ndarray:
            a = kernels[name] if dtype is None else kernels[name].astype(dtype, copy=False)
            return a if positions is None else a[positions]

        self.start = col("start", np.int64)
        self.end = col("end", np.int64)
        self.stream = col("stream")
        self.pid = col("pid")
        self.api_start = col("api_start", np.int64)        # NO_CALL: not known
        self.gtid = col("gtid", np.int64)
        self.blocks = col("blocks")
        self.size = self.start.size

    def position(self, i: int) -> int:
        """Kernel i's row in the kernels table."""
        return int(i) if self.positions is None else int(self.positions[i])

    def record(self, i: int) -> dict:
        """Kernel i's row, as Python values."""
        return next(self.table.rows(np.array([self.position(i)])).records())

    def at(self, i: np.ndarray) -> np.ndarray:
        """When kernels i were launched (their start when no launch call is known)."""
        launch = self.api_start[i]
        return np.where(launch == NO_CALL, self.start[i], launch)


def _index_dtype(n: int):
    return np.int32 if n < 2**31 - 1 else np.int64


class _Between:
    """What happened on the host between two launches: the synchronisations (host side,
    or a stream waiting on an event) of the later kernel's thread, and the launches onto
    the legacy default stream of its process."""

    def __init__(self, trace: Trace) -> None:
        api = trace.table("api")
        # No calls, no syncs (and an empty column of names is no Labels).
        sync_rows = (np.flatnonzero(api.labels("name").matching(_SYNC_OR_WAIT))
                     if len(api) else np.zeros(0, dtype=np.intp))
        self.syncs = _by_key(api["gtid"].astype(np.int64, copy=False)[sync_rows],
                             api["start"].astype(np.int64, copy=False)[sync_rows])
        # The legacy default stream: which kernels ran on it, and when work was launched
        # onto it (per process). Streams are keyed pid << 32 | stream id.
        streams = trace.table("streams")
        stream_keys = _keys(streams["pid"], streams["stream"])
        legacy = streams["legacy_default"].astype(bool)
        self.legacy_keys = stream_keys[legacy]
        self.nonblocking_keys = stream_keys[streams["flag"] == "Non-blocking stream"]
        legacy_pids, legacy_streams = streams["pid"][legacy], streams["stream"][legacy]
        # One legacy stream (one process, as a rule): the launches onto it are all its
        # process's, so no column of their processes is built to group them by.
        one = legacy_pids.size == 1
        legacy_pid, legacy_launch = [], []
        for f in (trace.table(name) for name in ("kernels", "memcpys", "memsets")):
            if not len(f) or not self.legacy_keys.size:
                continue
            launch = f["api_start"]
            on = np.flatnonzero(_on_streams(f["pid"], f["stream"], legacy_pids, legacy_streams)
                                & (launch != NO_CALL))
            if not one:
                legacy_pid.append(f["pid"][on].astype(np.int64))
            legacy_launch.append(launch[on].astype(np.int64, copy=False))
        launches = np.concatenate(legacy_launch) if legacy_launch else np.zeros(0, np.int64)
        self.legacy = (
            {int(legacy_pids[0]): np.sort(launches, kind="stable")} if one and launches.size
            else _by_key(np.concatenate(legacy_pid) if legacy_pid else np.zeros(0, np.int64),
                         launches))

    def counts(self, k: _Kernels, a: np.ndarray, b: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For kernel pairs (a, b): the syncs and the legacy-stream launches between
        their launches, and both launch times (0 when unknown)."""
        lo = np.maximum(k.api_start[a], 0)             # NO_CALL (-1) -> 0
        hi = np.maximum(k.api_start[b], 0)
        gtid_b = k.gtid[b]                              # NO_CALL: -1
        n_sync = _count_between(self.syncs, gtid_b, lo, hi)
        n_legacy = _count_between(self.legacy, k.pid[b].astype(np.int64), lo + 1, hi)
        return n_sync, n_legacy, lo, hi


def _keys(p: np.ndarray, st: np.ndarray) -> np.ndarray:
    return (p.astype(np.int64) << 32) | (st.astype(np.int64) & 0xFFFFFFFF)


def _on_streams(p: np.ndarray, st: np.ndarray, pids: np.ndarray, streams: np.ndarray
                ) -> np.ndarray:
    """Per op (process *p*, stream *st*): is it on one of the streams (pids[i],
    streams[i])? A batch of ops at a time (the keys of every kernel at once: 80 MB at
    10M kernels, twice in the making)."""
    if pids.size == 1:
        # One stream (one process's legacy stream, as a rule): process and stream
        # compared as they are, no key built per op.
        return (p == int(pids[0])) & (st == int(streams[0]))
    keys = _keys(pids, streams)
    return scan.fill(p.size, lambda ops: np.isin(_keys(p[ops], st[ops]), keys), bool)


def _transitions(k: _Kernels, cap: _Capacity, config: Mapping[str, float],
                 between: _Between) -> dict[str, np.ndarray]:
    """One entry per kernel B = i + 1 (after the first): its predecessor A (``a``) and
    the cause code of the pair (_SAME for same-stream, _NONE for overlapping). The idle
    time between them and the syncs / legacy-stream launches between their launches
    are recomputed where needed (_idle, _Between.counts): no per-kernel array of them."""
    start, end, stream, pid = k.start, k.end, k.stream, k.pid
    n = end.size
    index = _index_dtype(n)
    api_start = k.api_start
    m = max(n - 1, 0)
    a_all = np.empty(m, dtype=index)
    code = np.empty(m, dtype=np.int8)
    tolerance_share = config["overlap_tolerance"]

    def classify(pairs: slice, before: tuple[int, int]) -> tuple[int, int]:
        """Transitions *pairs*: A and the cause of each, written in place. *before*:
        the latest end among the kernels before them, and the kernel that set it."""
        reached, last = before
        # The running maximum of end times up to each kernel i, and A = the kernel that
        # set it (the last to finish).
        reach = np.maximum(np.maximum.accumulate(end[pairs]), reached)
        arg = np.where(end[pairs] == reach,
                       np.arange(pairs.start, pairs.stop, dtype=index), last)
        np.maximum.accumulate(arg, out=arg)
        a_all[pairs] = a = arg
        later = slice(pairs.start + 1, pairs.stop + 1)   # the kernels B: views, not gathers
        # A's end is the running maximum it set (reach): not gathered again.
        tolerance = tolerance_share * np.minimum(reach - start[a], end[later] - start[later])
        serial = start[later] >= reach - tolerance
        c = np.where(serial, np.int8(_SAME), np.int8(_NONE))
        # Only serialized pairs on two streams have a cause: the rest (most pairs, on
        # one stream or overlapping) need none of the lookups below.
        pair = np.flatnonzero(serial & (stream[a] != stream[later]))
        a, b = a[pair], pair + later.start
        late = api_start[b] >= end[a]                  # NO_CALL (-1): never late
        n_sync, n_legacy, _, _ = between.counts(k, a, b)
        ka, kb = _keys(pid[a], stream[a]), _keys(pid[b], stream[b])
        blocking_pair = (~np.isin(ka, between.nonblocking_keys)
                         & ~np.isin(kb, between.nonblocking_keys))
        implicit = blocking_pair & (np.isin(ka, between.legacy_keys)
                                    | np.isin(kb, between.legacy_keys) | (n_legacy > 0))
        saturated = k.blocks[a].astype(np.int64) >= cap[a]
        c[pair] = np.select(
            [late & (n_sync > 0), late, implicit, n_sync > 0, saturated],
            [_CODE["explicit-sync"], _CODE["host-launch-bound"],
             _CODE["legacy-default-stream"], _CODE["explicit-sync"],
             _CODE["resource-saturation"]], default=_CODE["unknown"])
        code[pairs] = c
        return int(reach[-1]), int(arg[-1])

    scan.fold(m, classify, (np.iinfo(np.int64).min, 0))
    return {"a": a_all, "code": code}


def _idle(k: _Kernels, a: np.ndarray, i: np.ndarray) -> np.ndarray:
    """The GPU idle time of transitions *i* (kernel B = i + 1 after A = a[i])."""
    return np.maximum(k.start[i + 1] - k.end[a[i]], 0)


def _idle_sums(k: _Kernels, a: np.ndarray, keep: np.ndarray, bounds: np.ndarray
               ) -> np.ndarray:
    """np.add.reduceat(_idle(k, a, keep), bounds), a batch of transitions at a time."""
    return scan.reduceat(np.add, lambda kept: _idle(k, a, keep[kept]), keep.size, bounds)


class _Capacity:
    """The blocks the whole device can hold at once (occupancy: sm_counts x
    resident_blocks_per_sm) of kernels (device, block size, registers, shared memory), on
    demand for the rows asked (``capacity[rows]``, rows of the kernel table, or of
    *positions* when given): computed once per distinct launch configuration. Only the
    predecessors of serialized cross-stream pairs need it, a few of all kernels."""

    COLUMNS = ("device", "threads_per_block", "registers", "shared_static",
               "shared_dynamic")

    def __init__(self, trace: Trace, positions: np.ndarray | None = None,
                 known: dict[tuple, int] | None = None) -> None:
        self.trace, self.positions = trace, positions
        self.values = [trace.table("kernels")[c] for c in self.COLUMNS]
        self.known = {} if known is None else known     # configuration -> capacity

    def at(self, positions: np.ndarray | None) -> _Capacity:
        """The same capacities, indexed by *positions* (one device's kernels)."""
        return _Capacity(self.trace, positions, self.known)

    def __getitem__(self, i) -> np.ndarray:
        rows = np.atleast_1d(np.asarray(i) if self.positions is None else self.positions[i])
        # Each row's configuration as a code, and a row of each configuration.
        code, first = first_seen_codes(*(v[rows] for v in self.values))
        found = list(zip(*(v[rows[first]].tolist() for v in self.values), strict=True))
        new = [c for c in found if c not in self.known]
        if new:
            configs = Table({c: np.array(v, dtype=np.int64) for c, v in
                             zip(self.COLUMNS, zip(*new, strict=True), strict=True)})
            devices = self.trace.table("devices")
            cap = sm_counts(configs, devices) * resident_blocks_per_sm(configs, devices)
            self.known.update(zip(new, cap.tolist(), strict=True))
        out = np.array([self.known[c] for c in found], dtype=np.int64)[code]
        return out if np.ndim(i) else out[0]


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    kernels = trace.table("kernels")
    if len(kernels) < 3:
        return []
    cap_all = _Capacity(trace)
    between = _Between(trace)
    findings: list[Finding] = []
    device_of = kernels["device"]
    devices = factorize(device_of)[1]
    for device in sorted(devices.tolist()):
        rows = None if len(devices) == 1 else np.flatnonzero(device_of == device)
        start = kernels["start"].astype(np.int64, copy=False)
        end = kernels["end"].astype(np.int64, copy=False)
        if rows is not None:
            start, end = start[rows], end[rows]
        if start.size < 2:              # one kernel on this device: nothing to serialize
            continue
        # Kernels in (start, end) order, stable: as a rule already so.
        order = None if tl.is_sorted(start, end) else np.lexsort((end, start))
        positions = (rows if order is None else order if rows is None else rows[order])
        k = _Kernels(kernels, positions)
        cap = cap_all.at(positions)
        t = _transitions(k, cap, config, between)
        t["new_range"] = _range_changes(trace, context, int(device), k)
        findings += _runs_to_findings(trace, int(device), k, cap, t, config, context,
                                      between)
    return findings


def _range_changes(trace: Trace, context: Context, device: int, k: _Kernels
                   ) -> np.ndarray:
    """Per transition (kernel B = i + 1): was B launched in another NVTX range, or did it
    run in another phase, than the kernel B before it? (A run does not cross from one
    range or phase into another.) A batch of transitions at a time."""
    out = np.zeros(max(k.start.size - 1, 0), dtype=bool)
    ids: dict[str, int] = {}          # label -> code, the same across batches

    def compare(pairs: slice, last: int | None) -> int | None:
        """Transitions *pairs*: B's code against the B before it, written in place.
        *last*: the code of the last B of the batch before."""
        b = np.arange(pairs.start + 1, pairs.stop + 1)
        part, labels = range_label_codes(trace, k.at(b))
        label_ids = np.array([ids.setdefault(str(s), len(ids)) for s in labels],
                             dtype=np.int64)
        code = (label_ids[part] * len(FINDING_PHASES)
                + context.phase_code(device, k.start[b]))
        if last is not None:
            out[pairs.start] = code[0] != last
        out[pairs.start + 1:pairs.stop] = code[1:] != code[:-1]
        return int(code[-1])

    scan.fold(out.size, compare, None)
    return out


class _Carry(NamedTuple):
    """What a batch of transitions hands the next in _runs."""
    streak: int           # the same-stream streak the batch ended in
    cause: int            # the cause carried out of it
    run_at: int           # the last run's number
    last_kept: int        # the number of the last run a kept transition is in
    kept: int             # transitions kept so far
    runs: int             # runs begun so far


def _runs(t: dict[str, np.ndarray], config: Mapping[str, float]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transitions -> runs. Same-stream transitions continue the current run; overlapping
    ones end it; a change of cause starts a new one; a long single-stream stretch (more
    than max_same_stream same-stream transitions in a row) is a phase of its own, not
    part of an alternation between streams. Returns the kept transitions (their
    indices), where each run begins among them (runs are contiguous stretches of them)
    and the cause carried into each run."""
    code = t["code"]
    m = code.size
    index = _index_dtype(m + 1)
    missing = -2
    new_range = t.get("new_range")
    if not m:
        return np.zeros(0, dtype=index), np.zeros(0, dtype=np.int64), np.zeros(0, np.int8)
    # Written in place batch by batch, never joined from parts: at most every transition
    # is kept, or begins a run (room left unwritten is never resident).
    keeps = np.empty(m, dtype=index)
    firsts = np.empty(m, dtype=np.int64)
    causes = np.empty(m, dtype=np.int8)
    # A batch at a time, with what carries over from the batch before (_Carry): the
    # length of the same-stream streak it ended in, the cause carried, the run numbers
    # (the last one, and the last one kept), the kept transitions and runs so far.

    def split(part: slice, before: _Carry) -> _Carry:
        """Transitions *part*: the kept ones and where runs begin, written in place."""
        c = code[part]
        idx = np.arange(part.stop - part.start, dtype=index)
        same = c == _SAME
        # Position of each same-stream transition within its streak.
        cs = np.cumsum(same, dtype=index)
        last_other = np.where(same, index(-1), idx)
        np.maximum.accumulate(last_other, out=last_other)
        streak_pos = np.where(last_other >= 0, cs - cs[np.maximum(last_other, 0)],
                              cs + before.streak)
        too_long = same & (streak_pos > config["max_same_stream"])
        streak = int(streak_pos[-1]) if same[-1] else 0
        del cs, last_other, streak_pos, same
        # The cause carried forward over same-stream and overlapping transitions.
        carrier = np.where(c > _SAME, idx, index(-1))
        np.maximum.accumulate(carrier, out=carrier)
        carried = np.where(carrier >= 0, c[np.maximum(carrier, 0)],
                           before.cause).astype(np.int8)
        del carrier, idx
        previous = np.empty_like(carried)
        previous[:1] = before.cause
        previous[1:] = carried[:-1]
        boundary = ((c == _NONE) | (carried != previous) | (carried == missing)
                    | (previous == missing) | too_long)
        if new_range is not None:
            boundary |= new_range[part]
        del previous
        run = np.cumsum(boundary, dtype=index) + index(before.run_at)
        run_at = int(run[-1])
        keep = np.flatnonzero((c != _NONE) & ~too_long & (carried != missing))
        run = run[keep]
        first = np.flatnonzero(np.r_[True, run[1:] != run[:-1]]) if run.size else keep
        if first.size and int(run[0]) == before.last_kept:   # the run goes on from before
            first = first[1:]
        last_kept = int(run[-1]) if run.size else before.last_kept
        kept, runs = before.kept, before.runs
        keeps[kept:kept + keep.size] = keep + part.start
        firsts[runs:runs + first.size] = first + kept
        causes[runs:runs + first.size] = carried[keep[first]]
        return _Carry(streak, int(carried[-1]), run_at, last_kept, kept + keep.size,
                      runs + first.size)

    done = scan.fold(m, split, _Carry(0, missing, 0, -1, 0, 0))
    return keeps[:done.kept], firsts[:done.runs], causes[:done.runs]


def _claim(device: int, k: _Kernels, cause: str, g: Table) -> Claim | None:
    """What a group of runs explains (see the module doc)."""
    first, last = g["first"].astype(np.int64, copy=False), g["last"].astype(np.int64, copy=False)
    if cause == "resource-saturation":
        return None
    if cause == "host-launch-bound":
        return Claim(device, tl.union(k.start[first], k.end[last]),
                     ("launch-bound", "host-work"))
    lengths = last - first + 1
    member = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths - first,
                                                       lengths)
    off = k.stream[member] != np.repeat(g["busiest_stream"], lengths)
    return Claim(device, tl.union(k.start[member[off]], k.end[member[off]]), ("compute",))


def _runs_to_findings(trace: Trace, device: int, k: _Kernels, cap: _Capacity,
                      t: dict[str, np.ndarray], config: Mapping[str, float],
                      context: Context, between: _Between) -> list[Finding]:
    keep, bounds, carried = _runs(t, config)
    del t["new_range"]
    if keep.size == 0:
        return []
    # Runs are contiguous stretches of the kept transitions: keep[bounds[j]:bounds[j+1]].
    transitions = scan.reduceat(np.add, lambda kept: t["code"][keep[kept]] != _SAME,
                                keep.size, bounds)
    good = transitions >= config["min_transitions"]
    if not good.any():
        return []
    stretch = np.flatnonzero(good)                  # each good run's stretch of keep
    stats = {"run": stretch, "cause": carried[good],
             "transitions": transitions[good],
             "first": scan.reduceat(np.minimum, lambda kept: t["a"][keep[kept]], keep.size,
                                    bounds)[good],
             "last": np.maximum.reduceat(keep, bounds)[good].astype(np.int64) + 1,
             # The first kernel B of the run: where (and in which range) it begins.
             "first_b": np.minimum.reduceat(keep, bounds)[good].astype(np.int64) + 1,
             "idle": _idle_sums(k, t["a"], keep, bounds)[good]}
    del carried
    ends = np.r_[bounds[1:], keep.size]
    members = _member_sums(k, stats["first"], stats["last"])
    cause_code = stats["cause"]
    cost = np.where(cause_code == _CODE["host-launch-bound"], stats["idle"],
                    np.where(cause_code == _CODE["resource-saturation"], 0,
                             members["kernel_ns"] - members["busiest"]))
    runs = Table({
        "run": stats["run"], "cause": cause_code, "transitions": stats["transitions"],
        "first": stats["first"], "last": stats["last"], "cost": cost.astype(np.int64),
        "streams": members["streams"], "kernel_ns": members["kernel_ns"],
        "busiest_stream": members["busiest_stream"], "idle": stats["idle"],
        "at": k.at(stats["first_b"]), "phase": context.phase_code(device,
                                                                  k.start[stats["first_b"]])})
    runs = runs.rows(context.in_scope(device, runs["at"]))
    findings = []
    # Findings per (cause, phase), in order of first appearance.
    group, first = first_seen_codes(runs["cause"], runs["phase"])
    for at_first, in_group in zip(first.tolist(), rows_of_codes(group, first.size),
                                  strict=True):
        g = runs.rows(in_group)
        cause = CAUSES[int(runs["cause"][at_first])]
        phase = FINDING_PHASES[int(runs["phase"][at_first])]
        # The run of most cost, then of most transitions (ties: the first).
        worst = int(np.lexsort((-g["transitions"], -g["cost"]))[0])
        members_w = np.arange(g["first"][worst], g["last"][worst] + 1)
        run = int(g["run"][worst])
        in_worst = keep[bounds[run]:ends[run]]
        in_worst = in_worst[t["code"][in_worst] != _SAME][:int(config["max_examples"])]
        a, b = t["a"][in_worst], in_worst.astype(np.int64) + 1     # those with a cause
        syncs, legacy_between, _, _ = between.counts(k, a, b)
        shown = Table(
            {"a": a, "b": b, "cause": np.array(CAUSES, dtype=object)[t["code"][in_worst]],
             "idle": _idle(k, t["a"], in_worst), "syncs": syncs,
             "legacy_between": legacy_between})
        examples = _examples(trace, k, cap, shown)
        streams = sorted({s for ss in g["streams"] for s in ss})
        n_kernels = int((g["last"] - g["first"] + 1).sum())
        cost_ns = int(g["cost"].sum())
        text = message(cause, kernels=n_kernels, streams=streams, runs=len(g),
                       switches=int(g["transitions"].sum()), cost_ns=cost_ns,
                       idle_ns=int(g["idle"].sum()),
                       **_cause_numbers(cause, k, cap, members_w, examples))
        findings.append(Finding(
            rule=RULE.id, cause=cause, severity=Severity.INFO,
            start_ns=int(k.start[int(g["first"].min())]),
            end_ns=int(k.end[int(g["last"].max())]), cost_ns=cost_ns,
            at_ns=int(g["at"].min()), message=text,
            fix=RULE.causes[cause].fix_for(context.framework),
            marks=_marks(k, shown, examples),
            streams=streams, device=device, count=int(g["transitions"].sum()),
            ranges=ranges_of(trace, g["at"]), phase=phase,
            claim=_claim(device, k, cause, g),
            evidence={"runs": len(g), "kernels": n_kernels,
                      "serialized_transitions": int(g["transitions"].sum()),
                      "kernel_ns": int(g["kernel_ns"].sum()), "idle_ns": int(g["idle"].sum()),
                      "transitions": examples}))
    return findings


def _member_sums(k: _Kernels, first: np.ndarray, last: np.ndarray) -> dict:
    """Per run (kernels first..last): total kernel time, the busiest stream's kernel
    time and id, and the streams present (sorted lists, in an object array). Runs are
    taken in batches of about a batch's rows of member kernels (scan.by_weight)."""
    ids = np.sort(factorize(k.stream)[1]) if k.size else np.zeros(0, np.int64)
    width = max(len(ids), 1)
    kernel_ns = np.zeros(first.size, dtype=np.int64)
    busiest = np.zeros(first.size, dtype=np.int64)
    busiest_stream = np.zeros(first.size, dtype=np.int64)
    streams = np.empty(first.size, dtype=object)
    id_list = [int(x) for x in ids.tolist()]
    lengths = last - first + 1

    def weigh(runs: slice) -> None:
        """Runs *runs*: their sums and streams, written in place."""
        a, b = runs.start, runs.stop
        ln = lengths[runs]
        total = int(ln.sum())
        run_of = np.repeat(np.arange(b - a), ln)
        member = np.arange(total) - np.repeat(np.cumsum(ln) - ln - first[runs], ln)
        key = run_of * width + np.searchsorted(ids, k.stream[member])
        del run_of
        # Kernel times are integers far below 2**53: float sums are exact.
        sums = np.bincount(key, weights=k.end[member] - k.start[member],
                           minlength=(b - a) * width).reshape(b - a, width)
        present = np.bincount(key, minlength=(b - a) * width).reshape(b - a, width) > 0
        kernel_ns[runs] = np.rint(sums.sum(axis=1)).astype(np.int64)
        busiest[runs] = np.rint(sums.max(axis=1)).astype(np.int64)
        busiest_stream[runs] = ids[sums.argmax(axis=1)] if len(ids) else 0
        # Runs alternate between a few sets of streams: each set listed once.
        sets, which = np.unique(present, axis=0, return_inverse=True)
        listed = [[id_list[j] for j in np.flatnonzero(row).tolist()] for row in sets]
        for run, at in enumerate(which.reshape(-1).tolist(), start=a):
            streams[run] = list(listed[at])

    scan.each(scan.by_weight(lengths), weigh)
    return {"kernel_ns": kernel_ns, "busiest": busiest, "busiest_stream": busiest_stream,
            "streams": streams}


def _op_ref(trace: Trace, k: _Kernels, i: int) -> dict:
    r = k.record(i)
    return {"name": str(r["name"]),
            "demangled": demangled_name(trace.table("kernels"), k.position(i)),
            "stream": int(r["stream"]), "correlation_id": int(r["corr"]),
            "start_ns": int(r["start"]), "end_ns": int(r["end"]),
            "launched_ns": None if r["api_start"] == NO_CALL else int(r["api_start"]),
            "grid": [int(r["grid_x"]), int(r["grid_y"]), int(r["grid_z"])],
            "block": [int(r["block_x"]), int(r["block_y"]), int(r["block_z"])]}


def _examples(trace: Trace, k: _Kernels, cap: _Capacity, shown: Table) -> list[dict]:
    out = []
    for r in shown.records():
        a, b, cause = r["a"], r["b"], r["cause"]
        item = {"cause": cause, "first": _op_ref(trace, k, a), "then": _op_ref(trace, k, b),
                "idle_ns": r["idle"]}
        if cause == "resource-saturation":
            item["first_blocks"] = int(k.blocks[a])
            item["device_capacity_blocks"] = int(cap[a])
        if cause == "legacy-default-stream":
            legacy = trace.legacy_streams()
            item["legacy_stream"] = sorted({s for p, s in legacy if p == int(k.pid[b])})
            item["legacy_ops_launched_between"] = r["legacy_between"]
        if cause == "explicit-sync":
            item["sync_calls_between"] = r["syncs"]
        out.append(item)
    return out


def _marks(k: _Kernels, shown: Table, examples: list[dict]) -> list[Mark]:
    """Each transition shown: both kernels outlined, an arrow from the end of the first
    to the start of the next."""
    marks: list[Mark] = []
    for a, b, item in zip(shown["a"].tolist(), shown["b"].tolist(), examples, strict=True):
        first, then = item["first"], item["then"]
        ra = EventRef("kernel", first["correlation_id"], stream=first["stream"],
                      pid=int(k.pid[a]), start_ns=first["start_ns"])
        rb = EventRef("kernel", then["correlation_id"], stream=then["stream"],
                      pid=int(k.pid[b]), start_ns=then["start_ns"])
        marks += [Outline(ra), Outline(rb), Link(ra, rb, "es")]
    return marks


def _cause_numbers(cause: str, k: _Kernels, cap: _Capacity, members: np.ndarray,
                   examples: list[dict]) -> dict:
    """What the message of *cause* quotes beside the run's counts (see message)."""
    if cause == "legacy-default-stream":
        return {"legacy_streams": next((e.get("legacy_stream") for e in examples
                                        if e.get("legacy_stream")), [])}
    if cause == "resource-saturation":
        first = examples[0] if examples else {}
        return {"blocks": first.get("first_blocks", int(k.blocks[members[0]])),
                "capacity_blocks": first.get("device_capacity_blocks", int(cap[members[0]]))}
    if cause == "host-launch-bound":
        launched = k.api_start[members].astype(np.float64)
        launched[launched == NO_CALL] = np.nan            # unknown launches: no gap
        launch_gap = np.diff(launched)
        return {"median_kernel_ns": float(np.median(k.end[members] - k.start[members])),
                "median_launch_gap_ns": (float(np.nanmedian(launch_gap)) if launch_gap.size
                                         else 0)}
    return {}


def message(cause: str, *, kernels: int, streams: list[int], runs: int, switches: int,
            cost_ns: int, idle_ns: int, legacy_streams: list[int] | None = None,
            blocks: int | None = None, capacity_blocks: int | None = None,
            median_kernel_ns: float | None = None, median_launch_gap_ns: float | None = None
            ) -> str:
    """What ran one after another, and why (per cause, what it quotes besides counts:
    legacy-default-stream the legacy streams, resource-saturation the grid's blocks and
    the device's capacity, host-launch-bound the median kernel and launch-to-launch
    times)."""
    head = (f"{kernels} kernels on {len(streams)} streams ({', '.join(map(str, streams[:8]))}"
            f"{'...' if len(streams) > 8 else ''}) ran one after another in {runs} "
            f"run{'s' if runs > 1 else ''} ({switches} serialized "
            "stream switches)")
    if cause == "legacy-default-stream":
        return (f"{head}: work on the legacy default stream {legacy_streams} sits between "
                "them, and the legacy stream implicitly synchronises with every blocking "
                f"stream. Overlap could have saved up to {fmt_ns(cost_ns)}.")
    if cause == "resource-saturation":
        return (f"{head}: each grid alone fills the GPU ({blocks} blocks vs "
                f"{capacity_blocks} the device holds at once), so the next kernel could "
                "start only in the last wave of the one before. Overlap is neither possible "
                "nor needed.")
    if cause == "host-launch-bound":
        return (f"{head}: each kernel (median {fmt_ns(median_kernel_ns)}) finished "
                "before the host even launched the next (median launch-to-launch "
                f"{fmt_ns(median_launch_gap_ns)}), so "
                f"the GPU waited on the host for {fmt_ns(idle_ns)}.")
    if cause == "explicit-sync":
        return (f"{head}: a synchronisation between the launches (stream/device/event sync "
                "or a stream waiting on an event) made each wait for the one before. "
                f"Overlap could have saved up to {fmt_ns(cost_ns)}.")
    return (f"{head}: the kernels were launched in time, used no legacy stream and no "
            "synchronisation, and did not fill the GPU, yet did not overlap. Overlap could "
            f"have saved up to {fmt_ns(cost_ns)}.")


RULE = Rule(
    id="serialized-streams",
    title="Work on different streams that did not overlap",
    thresholds={
        "min_transitions": Threshold(2, "switches", "serialized stream switches a run needs "
                                     "(one alone is just two batches in a row)"),
        "overlap_tolerance": Threshold(0.2, "fraction", "kernels overlapping less than this "
                                       "share of the shorter one count as serialized"),
        "max_same_stream": Threshold(8, "kernels", "a run ends after this many kernels in a "
                                     "row on one stream (a phase, not an alternation)"),
        "max_examples": Threshold(5, "transitions", "transitions listed as evidence"),
    },
    rationale=("Streams exist so independent work can run concurrently; when it does not, "
               "the cause decides whether anything can be gained."),
    fix=CAUSE_LIST[0].fix,
    causes=CAUSE_LIST,
    detect=detect,
    color="#8e44ad",
    priority=30,
    peer=True,
)
