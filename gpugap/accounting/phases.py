"""A device's timeline as a program: start-up, warm-up iterations, steady state, tail.

Iterations, in order of preference:

1. ``--iteration NAME``: the user's NVTX range of that name (numbers at the end of
   instance names are ignored: ``step`` matches ``step 0``, ``step 1``...).
2. NVTX: ranges of the user's domains (not libraries') repeated at one nesting level of
   one thread, at least 3 times, one after another, most instances launching GPU work
   and all of them together at least 30% of the device's launches (a repeated 'setup'
   or 'log' range is not an iteration): the outermost such level (then the one with
   most instances). ``step 12``, ``iter_3``, ``batch#7`` are instances of one name.
3. The kernel sequence: the launching thread's operations in launch order repeat with a
   period P when some operation recurs every P operations; the one that recurs every P
   operations from earliest in the sequence starts each iteration.
4. None: start-up lasts until the end of the last module-load call before regular work
   (and at least until the first GPU operation); the rest is one steady window.

Host ranges run ahead of the GPU, so each iteration is mapped onto the GPU through the
work launched in it: iteration i starts on the GPU at b_i = max(its host start, the end
of everything launched before it). The boundaries tile the timeline: start-up is
[device start, b_0), iteration i is [b_i, b_i+1), the tail follows the last one.
Warm-up: the first iteration, and those right after it that took more than
``warmup_factor`` x the median iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpugap.accounting.host import MODULE_LOAD, name_mask
from gpugap.accounting.ranges import base_name, shown_name, user_ranges
from gpugap.accounting.work import DeviceWork
from gpugap.errors import UsageError, option
from gpugap.report.trace import Trace

PHASES = ("start-up", "warm-up", "steady", "tail")
MIN_ITERATIONS = 3
MIN_LAUNCH_SHARE = 0.3      # of the device's launches, inside a level's instances
WARMUP_FACTOR = 2.0


@dataclass
class Iterations:
    source: str                    # "nvtx" | "kernels"
    name: str                      # "step N", or the anchor kernel's name
    cpu_start: np.ndarray          # host time each iteration began
    cpu_end: np.ndarray
    bounds: np.ndarray             # GPU-side boundaries, one more than iterations
    labels: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return self.cpu_start.size

    @property
    def durations(self) -> np.ndarray:
        return np.diff(self.bounds)


@dataclass
class Phases:
    device: int
    window: tuple[int, int]
    iterations: Iterations | None
    warmup: int                    # leading iterations that are warm-up
    spans: dict[str, tuple[int, int]]     # phase -> [lo, hi) (empty phases: lo == hi)
    how: str                       # how the iterations / phases were found, for humans

    @property
    def steady_iterations(self) -> range:
        n = 0 if self.iterations is None else len(self.iterations)
        return range(self.warmup, n)

    def iteration_windows(self, which: range | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self.iterations is None:
            z = np.zeros(0, dtype=np.int64)
            return z, z
        b = self.iterations.bounds
        idx = np.arange(len(self.iterations)) if which is None else np.asarray(which)
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
            "window_ns": list(self.window),
            "phases": {p: {"start_ns": int(lo), "end_ns": int(hi), "ns": int(hi - lo)}
                       for p, (lo, hi) in self.spans.items()},
            "iterations": None if it is None else {
                "source": it.source, "name": it.name, "count": len(it),
                "warmup": self.warmup, "steady": len(steady),
                "median_ns": int(np.median(durations[self.warmup:]))
                if len(steady) else None,
                "durations_ns": [int(d) for d in durations]},
        }


def _user_ranges(trace: Trace, pids: np.ndarray) -> pd.DataFrame:
    nv = user_ranges(trace)
    return nv[nv["pid"].isin(pids.tolist())] if len(nv) else nv


def _sequential(start: np.ndarray, end: np.ndarray) -> bool:
    return start.size < 2 or bool((start[1:] >= end[:-1]).all())


def _nvtx_candidates(trace: Trace, work: DeviceWork, wanted: str | None) -> pd.DataFrame:
    """Groups of repeated ranges: one row per (thread, domain, base name, depth)."""
    nv = _user_ranges(trace, work.pids)
    if nv.empty:
        return pd.DataFrame()
    names = nv["name"].astype(str)
    distinct = pd.unique(names)
    base_of = {n: base_name(n) for n in distinct.tolist()}
    base = names.map(base_of)
    frame = pd.DataFrame({"gtid": nv["gtid"].to_numpy(), "domain": nv["domain"].astype(str),
                          "base": base.to_numpy(), "depth": nv["depth"].to_numpy(),
                          "start": nv["start"].to_numpy(), "end": nv["end"].to_numpy(),
                          "numbered": (base != names).to_numpy(),
                          "name": names.to_numpy()})
    if wanted is not None:
        want = base_name(wanted.removesuffix(" N"))
        full = frame["domain"] + ":" + frame["base"]
        frame = frame[(frame["base"] == want) | (full == wanted) | (frame["name"] == wanted)]
        if frame.empty:
            known = sorted(set(base.tolist()))[:12]
            raise UsageError(f"no NVTX range named '{wanted}' for {option('iteration')} in "
                             f"{trace.info.path} (ranges: {', '.join(known) or 'none'})")
    times = None            # the device's launch times, sorted: read for the first group
    rows = []
    if wanted is None:      # groups too small to repeat, left out before the loop over groups
        size = frame.groupby(["gtid", "domain", "base", "depth"], sort=False)["start"]
        frame = frame[size.transform("size").to_numpy() >= MIN_ITERATIONS]
    for key, g in frame.groupby(["gtid", "domain", "base", "depth"], sort=False):
        if len(g) < (1 if wanted else MIN_ITERATIONS):
            continue
        g = g.sort_values("start")
        s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
        if not _sequential(s, e):
            continue
        if times is None:
            times = work.launch_times()
        launches = np.searchsorted(times, e) - np.searchsorted(times, s)
        if wanted is None and ((launches > 0).mean() < 0.5
                               or launches.sum() < MIN_LAUNCH_SHARE * times.size):
            continue            # host-only or marginal ranges (logging, setup): not steps
        rows.append({"gtid": key[0], "domain": key[1], "base": key[2], "depth": key[3],
                     "count": len(g), "first": int(s[0]), "start": s, "end": e,
                     "labels": g["name"].tolist(), "numbered": bool(g["numbered"].any())})
    if not rows:
        if wanted is not None:
            raise UsageError(f"the NVTX range '{wanted}' never repeats one instance after "
                             "another on one thread; pick a range that marks one "
                             f"iteration with {option('iteration')}")
        return pd.DataFrame()
    out = pd.DataFrame(rows)
    return out.sort_values(["depth", "count", "first"], ascending=[True, False, True],
                           ignore_index=True)


def _op_codes(trace: Trace, work: DeviceWork, positions: np.ndarray) -> np.ndarray:
    """A code per op naming what it is (kernel name, copy kind, memset)."""
    kernels = trace.kernels["name"]
    if not isinstance(kernels.dtype, pd.CategoricalDtype):
        kernels = kernels.astype(str).astype("category")
    k_codes = kernels.cat.codes.to_numpy().astype(np.int64)
    width = len(kernels.cat.categories) + 1
    memcpy_kind = trace.memcpys["kind"]
    m_codes = (memcpy_kind.cat.codes.to_numpy().astype(np.int64)
               if isinstance(memcpy_kind.dtype, pd.CategoricalDtype)
               else pd.factorize(memcpy_kind.astype(str))[0].astype(np.int64))
    ops = work.take(positions)
    src, row = ops.source, ops.row
    out = np.full(positions.size, -1, dtype=np.int64)
    sel = src == 0
    out[sel] = k_codes[row[sel]]
    sel = src == 1
    out[sel] = width + m_codes[row[sel]]
    memset_code = 2 * width + 1 + (m_codes.max(initial=0) if m_codes.size else 0)
    out[src == 2] = memset_code
    sel = src == 3                  # graph executions: one code per graph
    out[sel] = memset_code + 1 + trace.graphs["graph_id"].to_numpy().astype(np.int64)[row[sel]]
    return out


def _period(codes: np.ndarray) -> int | None:
    """The smallest P such that codes[i] == codes[i + P] for nearly every i of the second
    half of the sequence (the steady part). Candidates come from the spacing of the most
    frequent codes: an operation that occurs k times an iteration (k <= 3) recurs every
    P operations when counted k occurrences apart."""
    n = codes.size
    by_code = np.argsort(codes, kind="stable")
    sorted_codes = codes[by_code]
    group_start = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    counts = np.diff(np.r_[group_start, n])
    candidates: set[int] = set()
    for gi in np.argsort(-counts, kind="stable")[:32].tolist():
        if counts[gi] < MIN_ITERATIONS:
            break
        pos = by_code[group_start[gi]:group_start[gi] + counts[gi]]
        for k in (1, 2, 3):
            if pos.size > k:
                values, freq = np.unique(pos[k:] - pos[:-k], return_counts=True)
                candidates.add(int(values[np.argmax(freq)]))
    tail = codes[n // 2:]
    for period in sorted(p for p in candidates if 1 <= p <= n // MIN_ITERATIONS):
        if tail.size <= period:
            break
        if float(np.mean(tail[period:] == tail[:-period])) >= 0.95:
            return period
    return None


def _kernel_sequence(trace: Trace, work: DeviceWork
                     ) -> tuple[np.ndarray, int, int, int] | None:
    """Iteration starts (op positions, in the main launching thread's launch order), the
    period, the first op of the first iteration and the last op of the last; None when
    the sequence does not repeat. The iterations cover where the sequence is periodic:
    from after the last operation in its first half that breaks the period (start-up
    work) to the first one in its second half that does (work after the loop)."""
    if len(work) < 2 * MIN_ITERATIONS:
        return None
    order = work.launch_order()
    if order.size < 2 * MIN_ITERATIONS:
        return None
    ops = work.take(order)
    gtid = work.threads_of(ops.source, ops.row)
    del ops
    main = pd.Series(gtid).value_counts().index[0]
    seq_pos = order[gtid == main]
    codes = _op_codes(trace, work, seq_pos)
    period = _period(codes)
    if period is None:
        return None
    n = codes.size
    breaks = np.flatnonzero(codes[period:] != codes[:-period])
    early, late = breaks[breaks < n // 2], breaks[breaks >= n // 2]
    first = int(early[-1]) + 1 if early.size else 0
    stop = int(late[0]) + period if late.size else n       # periodic up to here
    starts = np.arange(first, stop - period + 1, period)
    if starts.size < MIN_ITERATIONS:
        return None
    last = int(starts[-1]) + period - 1
    return seq_pos[starts], period, int(seq_pos[first]), int(seq_pos[last])


def _map_to_gpu(work: DeviceWork, cpu_start: np.ndarray, cpu_end_last: int,
                window: tuple[int, int]) -> np.ndarray:
    """GPU-side boundaries of iterations that began on the host at cpu_start."""
    lo, hi = window
    b = np.maximum(cpu_start, work.ends_launched_before(cpu_start))
    last = max(cpu_end_last, int(work.ends_launched_before([cpu_end_last])[0]))
    bounds = np.clip(np.r_[b, last], lo, hi).astype(np.int64)
    return np.maximum.accumulate(bounds)


def _warmup(durations: np.ndarray, factor: float) -> int:
    if durations.size == 0:
        return 0
    median = float(np.median(durations))
    w = 1
    while w < durations.size - 1 and durations[w] > factor * median:
        w += 1
    return w


def device_window(trace: Trace, work: DeviceWork) -> tuple[int, int]:
    """From the first CUDA call (or NVTX range) of the device's processes, or its first
    operation, to the end of its last operation or CUDA call."""
    pids = work.pids
    lo, hi = work.bounds()
    api = trace.api
    if len(api):
        mine = api["pid"].isin(pids.tolist()).to_numpy()
        if mine.any():
            lo = min(lo, int(api["start"].to_numpy()[mine].min()))
            hi = max(hi, int(api["end"].to_numpy()[mine].max()))
    nv = trace.nvtx
    if len(nv):
        mine = nv["pid"].isin(pids.tolist()).to_numpy()
        if mine.any():
            lo = min(lo, int(nv["start"].to_numpy()[mine].min()))
    return lo, hi


def detect(trace: Trace, work: DeviceWork, *, iteration: str | None = None,
           warmup_factor: float = WARMUP_FACTOR) -> Phases:
    window = device_window(trace, work)
    lo, hi = window
    iterations, how = None, ""
    if iteration != "none":
        cands = _nvtx_candidates(trace, work, iteration)
        if len(cands):
            c = cands.iloc[0]
            shown = shown_name(c["base"], c["numbered"])
            bounds = _map_to_gpu(work, c["start"], int(c["end"][-1]), window)
            iterations = Iterations("nvtx", shown, c["start"], c["end"], bounds,
                                    list(c["labels"]))
            how = (f"NVTX range '{shown}'" + (f" (domain {c['domain']})" if c["domain"] else "")
                   + f", {c['count']} instances")
        elif iteration is None:
            found = _kernel_sequence(trace, work)
            if found is not None:
                starts, period, anchor, last_op = found
                cpu_start = work.gather("api_start", starts).astype(np.int64)
                end_last = int(np.nan_to_num(work.gather("api_end", [last_op])[0]))
                bounds = _map_to_gpu(work, cpu_start, end_last, window)
                name = work.names(trace, np.array([anchor]))[0]
                cpu_end = np.r_[cpu_start[1:], end_last]
                iterations = Iterations("kernels", name, cpu_start, cpu_end, bounds)
                how = (f"repeating kernel sequence: {len(cpu_start)} repetitions of "
                       f"{period} operations starting at '{_short(name)}' (no NVTX ranges "
                       "mark the iterations; name one with --iteration)")
    if iterations is not None and len(iterations) >= 1:
        w = _warmup(iterations.durations, warmup_factor)
        b = iterations.bounds
        spans = {"start-up": (lo, int(b[0])), "warm-up": (int(b[0]), int(b[w])),
                 "steady": (int(b[w]), int(b[-1])), "tail": (int(b[-1]), hi)}
        return Phases(work.device, window, iterations, w, spans, how)
    # No iterations: start-up ends with the last module load before regular work.
    first_op = work.bounds()[0] if len(work) else lo
    end = first_op
    api = trace.api
    if len(api):
        loads = np.flatnonzero(_module_load_rows(trace) & api["pid"].isin(
            work.pids.tolist()).to_numpy())
        if loads.size:
            t = int(api["end"].to_numpy()[loads].max())
            end = max(end, t, int(work.ends_launched_before([t])[0]))
    end = min(max(end, lo), hi)
    spans = {"start-up": (lo, end), "warm-up": (end, end), "steady": (end, hi),
             "tail": (hi, hi)}
    return Phases(work.device, window, None, 0, spans,
                  "no repeated NVTX range or kernel sequence: start-up until the last "
                  "module load, the rest as one steady window")


def _module_load_rows(trace: Trace) -> np.ndarray:
    return name_mask(trace.api["name"], MODULE_LOAD)


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."
