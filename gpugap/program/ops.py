"""A device's GPU operations as arrays, in start order, with their launches.

The program model reads them to find iterations (what repeats, when it was launched);
the accounting (gpugap.accounting.work.DeviceWork) adds each op's busy bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

from gpugap.memory import isin
from gpugap.report.table import Table
from gpugap.report.trace import NO_CALL, OpOrder, Trace, graph_label

# The columns of the CUDA call that launched an op (NO_CALL where none matched).
LAUNCH_COLUMNS = ("api_start", "api_end", "gtid")

CHUNK_OPS = 1 << 18       # ops walked at a time (a module setting: tests make it small)


class DeviceOps:
    """One device's operations in start order (ties: kernels, copies, memsets): what the
    program model and the accounting read of each op. No per-op array is held for the
    whole device: the ops are walked in slices (``slices``, ``slice``) or read at given
    positions (``take``, ``gather``), their columns built from the tables for those ops
    only (report.trace.OpOrder), so a report of millions of kernels holds no second copy of
    them. ``start``, ``end``... build a column for every op at once, for
    small reports and tests."""

    def __init__(self, device: int, order: OpOrder, pids: np.ndarray) -> None:
        self.device = device
        self.order = order
        self.tables = order.frames          # the trace's Tables of ops (OP_TABLES)
        self.pids = pids            # the processes that launched them (distinct)

    def __len__(self) -> int:
        return len(self.order)

    def slices(self, size: int | None = None):
        """(o0, o1): the positions of the ops, a slice at a time."""
        n, size = len(self), size or CHUNK_OPS
        for o0 in range(0, n, size):
            yield o0, min(o0 + size, n)

    def slice(self, o0: int, o1: int) -> OpRows:
        """The ops at positions [o0, o1)."""
        return self._ops(*self.order.slice(o0, o1))

    def take(self, at) -> OpRows:
        """The ops at positions *at*."""
        return self._ops(*self.order.take(at))

    def _ops(self, start, end, source, row) -> OpRows:
        return OpRows(start, np.maximum(end, start), source, row)

    def searchsorted(self, times, side: Literal["left", "right"] = "left") -> np.ndarray:
        """np.searchsorted over the ops' starts."""
        return self.order.searchsorted(times, side)

    def bounds(self) -> tuple[int, int]:
        """First start and last end of the ops ((0, 0) without ops)."""
        return self.order.bounds()

    def gather(self, name: str, at) -> np.ndarray:
        """Column *name* of the ops at positions *at* (from their tables)."""
        ops = self.order.take(at)
        return self.gather_rows(name, ops[2], ops[3])

    def gather_rows(self, name: str, source: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Column *name* of the ops given by (source, row): float64 with NaN where a kind
        lacks it, when the column is float anywhere. A launch column (api_start, api_end,
        gtid: -1 in the frames where no call matched) comes as float64 with NaN there,
        so that the arithmetic on launches carries the unknown along."""
        launch = name in LAUNCH_COLUMNS
        out = self._column_rows(name, source, row, np.float64 if launch else None)
        if launch:
            out[out == NO_CALL] = np.nan
        return out

    def threads_of(self, source: np.ndarray, row: np.ndarray) -> np.ndarray:
        """The launching thread (int64) of the ops given by (source, row), -1 when
        unknown (NO_CALL is -1: the column as it is, no float round trip)."""
        return self._column_rows("gtid", source, row, np.int64)

    def _column_rows(self, name: str, source: np.ndarray, row: np.ndarray,
                     dtype: type | None) -> np.ndarray:
        """Column *name* of the ops given by (source, row), as *dtype* (None: the
        columns' common type); float64 with NaN where a kind lacks a float column, 0
        where it lacks another."""
        parts = [t[name] if name in t else None for t in self.tables]
        common = np.result_type(*[p for p in parts if p is not None])
        if common.kind == "f":
            return by_kind(parts, source, row, self.largest_kind, np.float64, np.nan)
        return by_kind(parts, source, row, self.largest_kind, dtype or common, 0)

    @property
    def largest_kind(self) -> int:
        """The kind (index in report.trace.OP_KINDS) with the most rows: the kernels,
        mostly."""
        return max(range(len(self.tables)), key=lambda k: len(self.tables[k]))

    # Every op at once: for small reports and tests.
    @property
    def start(self) -> np.ndarray:
        return self.slice(0, len(self)).start

    @property
    def end(self) -> np.ndarray:
        return self.slice(0, len(self)).end

    @property
    def source(self) -> np.ndarray:
        return self.slice(0, len(self)).source

    @property
    def row(self) -> np.ndarray:
        return self.slice(0, len(self)).row

    @property
    def api_start(self) -> np.ndarray:
        """float64, NaN when no launch call matched."""
        return self.gather("api_start", np.arange(len(self)))

    @property
    def gtid(self) -> np.ndarray:
        """The launching thread of each op (int64), -1 when unknown."""
        ops = self.slice(0, len(self))
        return self.threads_of(ops.source, ops.row)

    def launch_order(self) -> np.ndarray:
        """Positions of the ops with a known launch, sorted by launch time (ties: in
        position order). Built for every op: where the whole order is needed."""
        return self.launch_sorted(self.api_start)

    @staticmethod
    def launch_sorted(launched: np.ndarray) -> np.ndarray:
        """launch_order from every op's launch time (NaN: unknown)."""
        unknown = np.isnan(launched)
        if not unknown.any():
            return np.argsort(launched, kind="stable")
        known = np.flatnonzero(~unknown)
        return known[np.argsort(launched[known], kind="stable")]

    def launched_by(self, t) -> tuple[np.ndarray, np.ndarray]:
        """For each time t: how many ops were launched before t, and the latest end of
        them (-1 if none). One walk over the ops: in each slice, sorted by launch, the
        ops launched before t are a prefix, their latest end a running maximum; only the
        times among the slice's launches are searched, the later ones take all of it."""
        t = np.asarray(t, dtype=np.float64)
        order = np.argsort(t, kind="stable")
        times = t[order]
        lowest = np.iinfo(np.int64).min
        # Per time, from the slices it falls among; at index i, from the slices launched
        # wholly before times[i:] (carried on to the later times at the end).
        count, count_from = np.zeros(t.size, np.int64), np.zeros(t.size + 1, np.int64)
        reach = np.full(t.size + 1, lowest, dtype=np.int64)
        for o0, o1 in self.slices():
            ops = self.slice(o0, o1)
            launched = self.gather_rows("api_start", ops.source, ops.row)
            known = ~np.isnan(launched)
            by_launch = np.argsort(launched[known], kind="stable")  # nearly sorted: quick
            if not by_launch.size:
                continue
            launched = launched[known][by_launch]
            latest = np.maximum.accumulate(ops.end[known][by_launch])
            # times[i0:i1]: after the first launch, not after the last.
            i0, i1 = np.searchsorted(times, launched[[0, -1]], side="right").tolist()
            before = np.searchsorted(launched, times[i0:i1], side="left")  # launched < t
            count[i0:i1] += before
            reach[i0:i1] = np.maximum(reach[i0:i1], latest[before - 1])
            count_from[i1] += launched.size
            reach[i1] = max(reach[i1], latest[-1])
        count += np.cumsum(count_from[:-1])
        reach = np.maximum.accumulate(reach[:-1])
        out_count, out_reach = np.empty_like(count), np.empty_like(reach)
        out_count[order] = count
        out_reach[order] = np.where(reach == lowest, -1, reach)
        return out_count, out_reach

    def ends_launched_before(self, t) -> np.ndarray:
        """For each time t: the latest end of the ops launched before t (-1 if none)."""
        return self.launched_by(t)[1]

    def launched_before(self, at) -> np.ndarray:
        """For each op at positions *at*: the position of the op its thread launched
        just before it (launch order: launch time, then position), -1 when there is none
        or its own launch is unknown. One walk over the ops per launching thread."""
        at = np.asarray(at, dtype=np.int64)
        out = np.full(at.size, -1, dtype=np.int64)
        if not at.size:
            return out
        ops = self.take(at)
        launched = self.gather_rows("api_start", ops.source, ops.row)
        thread = self.threads_of(ops.source, ops.row)
        known = ~np.isnan(launched)
        for g in np.unique(thread[known]).tolist():
            qi = np.flatnonzero(known & (thread == g))
            qi = qi[np.lexsort((at[qi], launched[qi]))]          # in launch order
            out[qi] = self._before(int(g), launched[qi], at[qi])
        return out

    def _before(self, gtid: int, q_time: np.ndarray, q_pos: np.ndarray) -> np.ndarray:
        """launched_before for queries of one thread, in launch order ((q_time, q_pos)
        increasing): per query, the greatest (launch time, position) of the thread's
        ops below its own. Each op goes to the first query above it (a bucket); the
        answer of query q is the greatest of buckets 0..q."""
        n_q = q_time.size
        # Ties of launch time are broken by position: a key that orders the queries of
        # one launch time by position (block of equal times, then position).
        block = np.searchsorted(q_time, q_time, side="left")
        tie_key = (block << 32) | q_pos
        best_t = np.full(n_q + 1, -np.inf)
        best_p = np.full(n_q + 1, -1, dtype=np.int64)
        for o0, o1 in self.slices():
            ops = self.order.slice(o0, o1)
            source, row = ops[2], ops[3]
            del ops
            mine = np.flatnonzero(self.threads_of(source, row) == gtid)
            t = self.gather_rows("api_start", source[mine], row[mine])
            keep = ~np.isnan(t)
            t, p = t[keep], o0 + mine[keep]
            k = np.searchsorted(q_time, t, side="left")
            tie = np.flatnonzero(k < n_q)
            tie = tie[q_time[k[tie]] == t[tie]]
            k[tie] = np.searchsorted(tie_key, (k[tie] << 32) | p[tie], side="right")
            top_t = np.full(n_q + 1, -np.inf)
            np.maximum.at(top_t, k, t)
            top = t == top_t[k]
            top_p = np.full(n_q + 1, -1, dtype=np.int64)
            np.maximum.at(top_p, k[top], p[top])
            better = (top_t > best_t) | ((top_t == best_t) & (top_p > best_p))
            best_t[better], best_p[better] = top_t[better], top_p[better]
        # Running greatest (time, position) over buckets 0..q.
        run_t = np.maximum.accumulate(best_t)
        level = np.cumsum(np.r_[True, run_t[1:] != run_t[:-1]])
        value = np.where(best_t == run_t, best_p, -1) + 1
        scale = int(value.max()) + 1                 # levels apart, values within them
        run_p = np.maximum.accumulate(level * scale + value) - level * scale - 1
        return run_p[:n_q]

    def names(self, trace: Trace, at: np.ndarray) -> list[str]:
        ops = self.take(at)
        kernels, memcpys, _, graphs = self.tables
        return [str(kernels["name"][r]) if s == 0 else str(memcpys["kind"][r]) if s == 1
                else "memset" if s == 2 else graph_label(graphs["graph_id"][r])
                for s, r in zip(ops.source.tolist(), ops.row.tolist(), strict=True)]


def by_kind(parts: Sequence[np.ndarray | None], source: np.ndarray, row: np.ndarray,
            big: int, dtype, missing=0) -> np.ndarray:
    """Per op given by (source, row): parts[source][row] as *dtype*, *missing* where
    parts[source] is None. The kind *big* (the most common) is taken for every op at
    once, the rows of the other kinds clipped into its range; then the few ops of the
    other kinds are put in their places: a mask over every op per kind, or a filled
    array written over, costs more."""
    if parts[big] is not None and source.size:
        out = parts[big].take(row, mode="clip").astype(dtype, copy=False)
    else:
        out = np.full(source.size, missing, dtype=dtype)
    other = np.flatnonzero(source != big)
    for k, part in enumerate(parts):
        at = other[source[other] == k]
        if at.size:
            out[at] = missing if part is None else part[row[at]]
    return out


# Ops of a device up to which Launches answers launched_by from every op's launch
# sorted (two columns held while the program model looks for its loop: 160 MB at ten
# million ops); past it, by DeviceOps' walk over the ops a slice at a time.
SORTED_MAX = 1 << 22


class Launches:
    """A device's ops read once for the program model's search for its loop: every op
    in position order (``every``), its launch time (``launched``, float64, NaN where no
    call matched), and, built on first use, the launch times sorted with the latest end
    of the ops launched up to each: DeviceOps.launched_by for any times, by a search
    (not a walk over the ops for each set of times), on a device of up to SORTED_MAX
    ops."""

    def __init__(self, ops: DeviceOps) -> None:
        self.ops = ops
        self.every: OpRows | None = ops.slice(0, len(ops))
        self.launched: np.ndarray | None = ops.gather_rows("api_start", self.every.source,
                                                           self.every.row)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def release(self) -> None:
        """Drop every op's columns once only launched_by is asked (the sorted launches
        kept): a few hundred megabytes at ten million ops."""
        if len(self.ops) <= SORTED_MAX:
            self._sort()
        self.every = self.launched = None

    def _sort(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sorted is None:
            every, launched = self.every, self.launched
            if every is None or launched is None:       # (release sorts first)
                raise RuntimeError("Launches released before they were sorted")
            known = np.flatnonzero(~np.isnan(launched))
            by = known[np.argsort(launched[known], kind="stable")]
            self._sorted = (launched[by], np.maximum.accumulate(every.end[by]))
        return self._sorted

    def launched_by(self, t) -> tuple[np.ndarray, np.ndarray]:
        """DeviceOps.launched_by: for each time t, how many ops were launched before t,
        and the latest end of them (-1 if none)."""
        if len(self.ops) > SORTED_MAX:
            return self.ops.launched_by(t)
        times, latest = self._sort()
        t = np.asarray(t, dtype=np.float64)
        count = np.searchsorted(times, t, side="left").astype(np.int64)
        if not times.size:
            return count, np.full(t.size, -1, dtype=np.int64)
        reach = np.where(count > 0, latest[np.maximum(count - 1, 0)], -1).astype(np.int64)
        return count, reach


class OpRows(NamedTuple):
    """Some ops of a device: start, end (never below start), source (index in
    report.trace.OP_KINDS) and row (in its frame)."""

    start: np.ndarray
    end: np.ndarray
    source: np.ndarray
    row: np.ndarray


def device_pids(tables: tuple[Table, ...], device: int) -> np.ndarray:
    """The processes that launched the ops of *device* (distinct, int64)."""
    # Ops come in long runs of one process: the first pid of each run is sorted (a few),
    # not every op's.
    firsts = []
    for t in tables:
        pid = t["pid"][t["device"] == device] if len(t) else None
        if pid is not None and pid.size:
            firsts.append(pid[np.r_[True, pid[1:] != pid[:-1]]])
    return np.unique(np.concatenate(firsts or [np.zeros(0, np.int64)]).astype(np.int64))


def device_ops(trace: Trace, device: int) -> DeviceOps:
    """The ops of *device*."""
    order = trace.op_index.order(device)
    return DeviceOps(device, order, device_pids(order.frames, device))


def device_window(trace: Trace, ops: DeviceOps) -> tuple[int, int]:
    """From the first CUDA call (or NVTX range) of the device's processes, or its first
    operation, to the end of its last operation or CUDA call."""
    pids = ops.pids
    lo, hi = ops.bounds()
    api = trace.table("api")
    if len(api):
        # One process (most reports): compared to it, not looked up.
        mine = api["pid"] == pids[0] if pids.size == 1 else isin(api["pid"], pids)
        start, end = api["start"], api["end"]
        if mine.all():                  # every call: plain reductions, faster than masked
            lo, hi = min(lo, int(start.min())), max(hi, int(end.max()))
        elif mine.any():
            # Reduced where mine, not over copies of the calls' times (190 MB each at
            # 24M calls).
            lo = min(lo, int(np.min(start, where=mine, initial=np.iinfo(start.dtype).max)))
            hi = max(hi, int(np.max(end, where=mine, initial=np.iinfo(end.dtype).min)))
    nv = trace.table("nvtx")
    if len(nv):
        mine = np.isin(nv["pid"], pids)
        if mine.any():
            lo = min(lo, int(nv["start"][mine].min()))
    return lo, hi



def group_sums(keys: Sequence[np.ndarray], values: np.ndarray | None = None
               ) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct rows of *keys* (arrays of one length) sorted as pandas' groupby sorts
    them (by the first key, then the next...), and the sum of *values* (int) over each
    (None: how many rows). Equal keys are summed run by run first: ops come in long runs
    of one thread, process and device, so what is sorted is the runs, not every op."""
    if not keys[0].size:
        return [k[:0] for k in keys], np.zeros(0, dtype=np.int64)
    keys, sums = _run_sums(keys, values)
    order = np.lexsort(keys[::-1])
    return _run_sums([k[order] for k in keys], sums[order])


def _run_sums(keys: Sequence[np.ndarray], values: np.ndarray | None
              ) -> tuple[list[np.ndarray], np.ndarray]:
    """The keys of each run of equal rows of *keys* and the sum of *values* over it."""
    change = np.zeros(keys[0].size, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    first = np.flatnonzero(change)
    sums = (np.diff(np.r_[first, keys[0].size]) if values is None
            else np.add.reduceat(values, first))
    return [k[first] for k in keys], sums
