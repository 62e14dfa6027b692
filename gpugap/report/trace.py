"""The loaded report: one typed Table per kind of event (gpugap.report.table: numpy
columns, names as Labels), plus what we know of the report itself. Rules and metrics
read only this (``Trace.table``); they never touch SQL. Users read the same events as
pandas DataFrames (``trace.kernels``...), built from the Tables when asked for.

Times are int64 nanoseconds on the report's session clock. ``pid``/``tid`` are the plain
process and thread ids decoded from nsys's serialized ``globalTid``; ``gtid`` keeps the
serialized value (unique across hosts/VMs) for joins.

The events and their columns (all present even when the report lacks the table, then
empty).
The columns read from nsys, with their nsys names, dtypes, defaults and bounds, are
declared in gpugap.report.schema, where a new one is one line (``frame_columns`` gives
each frame's full list); the main ones, and those the loader derives:

- ``kernels``: start, end, device, context, stream, corr, pid, name (the short name,
  e.g. "gemm_kernel"), demangled (the full demangled signature, e.g. "void
  gemm_kernel<float, 128>(float const*, ...)": template instances apart), grid_x/y/z,
  block_x/y/z, blocks, threads_per_block, registers, shared_static, shared_dynamic,
  graph_node (the CUDA graph node, int64; -1 when not launched from a CUDA graph; a
  sparse column, Sparse[int64, -1], when few kernels are), + launch columns
- ``memcpys``: start, end, device, stream, corr, pid, bytes, kind (e.g. "Host-to-Device"),
  src_kind, dst_kind (e.g. "Pageable", "Pinned", "Device"), src_device, dst_device (the
  devices of a peer copy, -1 for other copies), + launch columns
- ``memsets``: start, end, device, stream, corr, pid, bytes, mem_kind, + launch columns
- ``graphs``: start, end, device, stream, corr, pid, graph_id, graph_exec_id, nodes, +
  launch columns: one row per CUDA graph execution, launched by the cudaGraphLaunch
  with its correlation id. Graph-level tracing (nsys's default) lists executions only
  (``nodes`` 0); node-level tracing (``--cuda-graph-trace=node``) lists the graph's
  kernels instead, each with its ``graph_node`` and the cudaGraphLaunch's correlation
  id: the loader then builds each execution from its nodes (first start to last end,
  ``nodes`` = how many), so both modes show the same executions.
- launch columns (from the CUDA API call with the same correlation id in the same
  process): api_start, api_end, gtid (int64; -1, ``NO_CALL``, when no call matched:
  times are > 0 and thread ids >= 0, so ``frame[frame["gtid"] >= 0]`` keeps the matched
  ones), api_name (NaN when no call matched)
- ``api``: start, end, gtid, pid, tid, corr, name (version suffix stripped, e.g.
  "cudaMemcpyAsync"), driver (bool), per_thread (bool: a ``_ptsz``/``_ptds`` variant)
- ``syncs``: start, end, device, stream, corr, pid, sync_type (e.g. "Stream sync"),
  event (the CUDA event waited for, int64; -1 where none is recorded)
- ``nvtx``: start, end, name, domain, gtid, pid, tid, depth (per thread and domain),
  library (bool: a range nsys made for a traced library such as cuBLAS), kind
- ``streams``: pid, stream, context, flag (label), priority, legacy_default (bool)
- ``devices``: device, name, sm_count, max_threads_per_sm, max_blocks_per_sm,
  max_regs_per_sm, max_shmem_per_sm, reg_alloc_unit, compute_capability, ...
- ``threads``: gtid, pid, tid, name
- ``processes``: pid, name (the executable nsys saw start: 'python3', 'ptxas'...)
- ``event_waits``: start, end, pid, src_device, dst_device: a stream of one device that
  waited (cudaStreamWaitEvent) for an event recorded on another
- ``osrt``: start, end, gtid, name (OS runtime calls, when traced). Read from the export
  on first use (there can be tens of millions); ``osrt_calls_overlapping`` reads only the
  calls inside given windows.

Every value has been validated (gpugap.report.validate): times satisfy 0 < start <= end
< 2^62, ids are non-negative, launch dimensions within CUDA's limits, names are str;
rows that could not be repaired were dropped and counted in ``ReportInfo.problems``.

No time or id column is a float: where a value can be missing (an op whose launch call
is not in the report, a kernel not from a graph, a sync on no event) it reads -1, an
impossible value, never NaN. Integer columns are wide enough for arithmetic: times,
``gtid``, ``graph_node``, ``bytes``, ``blocks`` and ``threads_per_block`` are int64
(products of sizes stay exact); the small ids (device, context, stream, corr, pid, tid)
and launch dimensions, registers and shared memory are at least int32 (int64 when a
value needs it), so that a 10-million-kernel report fits in memory; names are Labels
(categoricals in the DataFrames) for the same reason.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol, SupportsInt, TypeVar, Union

import numpy as np
from numpy.typing import ArrayLike

from gpugap import intervals as tl
from gpugap.jsonout import Record
from gpugap.report import schema
from gpugap.report.table import Labels, Table, distinct

if TYPE_CHECKING:                 # pandas: only for the users' DataFrames, when asked for
    import pandas as pd

PROCESS_COLUMNS = schema.frame_columns(schema.PROCESSES)
EVENT_WAIT_COLUMNS = {"start": "int64", "end": "int64", "pid": "int64", "src_device": "int64",
                      "dst_device": "int64"}


def demangled_name(kernels: Table | pd.DataFrame, row: int) -> str:
    """The full demangled name of the kernel at position *row* of the kernels (its
    short name where the report has no demangled one)."""
    column = "demangled" if "demangled" in kernels else "name"
    if isinstance(kernels, Table):
        return str(kernels.labels(column)[int(row)])
    return str(kernels[column].iloc[int(row)])


class OsrtSource(Protocol):
    """Where a Trace reads its OS runtime calls from on first use (the loader's)."""

    def all(self) -> Table: ...

    def overlapping(self, windows: dict[int, tuple[np.ndarray, np.ndarray]]) -> Table: ...

    def named(self, pattern: re.Pattern[str], gtids: list[int] | None = None,
              pids: list[int] | None = None) -> Table: ...


class HostSource(Protocol):
    """Where a Trace reads the host's own evidence from, on demand: CPU samples and
    their stacks, the GIL trace, the OS runtime calls' stacks, Python samples
    (gpugap.report.host.HostEvidenceSource, the loader's)."""

    def inventory(self) -> Any: ...

    def samples(self, lo: np.ndarray, hi: np.ndarray) -> Table: ...

    def sample_frames(self, ids: np.ndarray) -> Table: ...

    def gil(self, lo: np.ndarray, hi: np.ndarray, thread: int | None = None
            ) -> Table: ...

    def os_waits(self, windows: dict[int, tuple[np.ndarray, np.ndarray]],
                 at_most: int | None = None) -> tuple[Table, int]: ...

    def osrt_frames(self, ids: np.ndarray) -> Table: ...

    def python_samples(self, lo: np.ndarray, hi: np.ndarray) -> Any: ...


@dataclass
class ReportInfo(Record):
    """What is known of the report itself.

    ``warnings``: one line each, for the user (what was missing, dropped, repaired).
    ``problems``: what validation dropped or repaired while loading, machine-readable:
    a key per kind of problem ('<what>:<problem>', e.g. 'kernels:no-time',
    'CUDA API calls:backwards', 'kernels:grid_x', 'devices:unknown') -> how many rows or
    values; each also has its line in ``warnings`` (gpugap.report.validate has the
    rules). Empty for a sound report.
    ``gpu_data_lost``: True when the report is missing GPU activity it should hold, so
    that every verdict on it is suspect (``gpugap check`` can fail on it): more than half
    of at least 8 kernel launch calls (cudaLaunchKernel, cuLaunchKernel, ... not made
    while capturing a CUDA graph) have no kernel with their correlation id; or the nsys
    that wrote the report is older than the CUDA it traced (``nsys_older_than_cuda``)
    and fewer than 8 launch calls are there to show that the kernels arrived. Either
    case has its line in ``warnings``.
    ``nsys_older_than_cuda``: the nsys that wrote the report is older than the first
    nsys released with the CUDA major version the report records (an nsys 2023.4 export
    of a CUDA 13 program): set whatever the launches say.
    ``cuda_version``: the CUDA version of the driver the report was captured with
    (TARGET_INFO_SYSTEM_ENV CudaDriverVersion, e.g. '13.0'), when recorded.
    ``host``: the profiled machine's name (TARGET_INFO_SYSTEM_ENV Hostname), when recorded.
    ``program``: the program nsys launched ('python3 train.py', 'app'; META_DATA_CAPTURE,
    gpugap.report.database.program_of), when recorded.
    ``launcher_env``: the variables a distributed launcher sets (RANK, LOCAL_RANK,
    WORLD_SIZE, SLURM_PROCID, OMPI_COMM_WORLD_RANK, ...), read from the environment nsys
    recorded (TARGET_INFO_SYSTEM_ENV DeviceEnvironment): nsys run by torchrun or srun sees
    its rank's variables. Empty when none is there.
    ``session_start_utc_ns``: when the session began (ns since the Unix epoch); the
    report's timestamps count from it, so adding it puts reports on one clock
    (gpugap.analysis.job).
    ``capture_start_ns``/``capture_end_ns``: ANALYSIS_DETAILS's window, when valid and
    consistent with the events (else None).
    """

    path: str                       # what the user passed
    sqlite_path: str                # the export actually read
    nsys_version: str | None        # the nsys that wrote the export
    schema_version: str | None
    capture_start_ns: int | None
    capture_end_ns: int | None
    cuda_traced: bool | None        # from META_DATA_CAPTURE when present
    tables: frozenset[str]
    warnings: list[str] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)
    gpu_data_lost: bool = False
    nsys_older_than_cuda: bool = False
    cuda_version: str | None = None
    host: str | None = None
    program: str | None = None
    launcher_env: dict[str, str] = field(default_factory=dict)
    session_start_utc_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: sorted(v) if isinstance(v, frozenset) else v for k, v in self.items()}


class _Events:
    """A Trace's events of one kind as a pandas DataFrame (``trace.kernels``...): the
    users' view, built from the Table on first use and kept (the analysis reads the
    Tables: ``Trace.table``). Setting it replaces the Table (a DataFrame or a Table)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, trace: Trace | None, owner: type) -> Any:
        if trace is None:
            return self
        frame = trace._frames.get(self.name)
        if frame is None:
            frame = trace._frames[self.name] = trace.table(self.name).to_pandas()
        return frame

    def __set__(self, trace: Trace, value: Table | pd.DataFrame) -> None:
        trace._set_table(self.name, value)


class Trace:
    """The loaded report: its events, one Table per kind (``table``; as DataFrames:
    ``kernels``, ``api``...), and what is known of the report itself (``info``).

    OS runtime calls are read on first use (``osrt``), from ``osrt_source`` (the
    loader's), unless given; the host's own evidence (CPU samples, the GIL trace...)
    only where asked for, from ``host_source`` (gpugap.report.host; None: the trace has
    none, as a built one). ``memcpy_calls``: the row of ``api`` that launched each
    memcpy (-1: none), as the loader joined them (attach_launches), for what needs the
    call of a copy; None: not joined (a trace not made by the loader, or a copy with
    other memcpys). ``derived``: the derived indexes of the layers above (see Derived),
    one per kind, built on first use; a copy (``replace``) starts with none."""

    # What a Trace holds (set in __init__ only): these and its cached properties.
    info: ReportInfo
    tables: dict[str, Table]
    _frames: dict[str, pd.DataFrame]
    osrt_source: OsrtSource | None
    host_source: HostSource | None
    memcpy_calls: np.ndarray | None
    derived: dict[type, Derived]

    kernels = _Events()
    memcpys = _Events()
    memsets = _Events()
    api = _Events()
    syncs = _Events()
    nvtx = _Events()
    streams = _Events()
    devices = _Events()
    threads = _Events()
    graphs = _Events()
    processes = _Events()
    event_waits = _Events()

    def __init__(self, info: ReportInfo, *, kernels: Events, memcpys: Events, memsets: Events,
                 api: Events, syncs: Events, nvtx: Events, streams: Events, devices: Events,
                 threads: Events, graphs: Events | None = None,
                 processes: Events | None = None, event_waits: Events | None = None,
                 osrt: Events | None = None, osrt_source: OsrtSource | None = None,
                 memcpy_calls: np.ndarray | None = None,
                 host_source: HostSource | None = None) -> None:
        self.info = info
        self.tables = {}
        self._frames = {}
        given = {"kernels": kernels, "memcpys": memcpys, "memsets": memsets, "api": api,
                 "syncs": syncs, "nvtx": nvtx, "streams": streams, "devices": devices,
                 "threads": threads, "graphs": graphs, "processes": processes,
                 "event_waits": event_waits, "osrt": osrt}
        for name, events in given.items():
            if events is not None:
                self._set_table(name, events)
            elif name != "osrt":
                self.tables[name] = Table.empty_of(_EMPTY_COLUMNS[name])
        self.osrt_source = osrt_source
        self.host_source = host_source
        self.memcpy_calls = memcpy_calls
        self.derived = {}

    def _set_table(self, name: str, events: Events) -> None:
        self.tables[name] = events if isinstance(events, Table) else Table.from_pandas(events)
        self._frames.pop(name, None)

    def replace(self, **changes: Any) -> Trace:
        """A copy with the events of *changes* (by name: ``nvtx=...``, a Table or a
        DataFrame) replaced, the others shared; its derived indexes are built anew.
        ``memcpy_calls`` is kept only while the memcpys are (or given)."""
        unknown = set(changes) - set(TABLE_NAMES) - {"memcpy_calls"}
        if unknown:
            raise TypeError(f"Trace has no events {sorted(unknown)}")
        calls = changes.pop("memcpy_calls",
                            None if "memcpys" in changes else self.memcpy_calls)
        return Trace(self.info, **{n: changes.get(n, self.tables.get(n)) for n in TABLE_NAMES},
                     osrt_source=self.osrt_source, memcpy_calls=calls,
                     host_source=self.host_source)

    def table(self, name: str) -> Table:
        """The events of *name* ('kernels', 'api', 'osrt'...: the frames' names) as a
        Table: the columns the analysis reads, without pandas."""
        found = self.tables.get(name)
        if found is None:
            if name != "osrt":
                raise KeyError(f"no table {name!r}: one of {', '.join(TABLE_NAMES)}")
            source = self.osrt_source
            found = self.tables["osrt"] = (source.all() if source is not None
                                           else Table.empty_of(OSRT_COLUMNS))
        return found

    @property
    def osrt(self) -> pd.DataFrame:
        """OS runtime calls (start, end, gtid, name), read on first use."""
        frame = self._frames.get("osrt")
        if frame is None:
            frame = self._frames["osrt"] = self.table("osrt").to_pandas()
        return frame

    @property
    def osrt_traced(self) -> bool:
        """Whether the report traced OS runtime calls (it has their table), read yet or
        not: without it, no call's absence says anything."""
        return schema.OSRT.name in self.info.tables

    @property
    def osrt_read(self) -> bool:
        """Whether the OS runtime calls are held (read, or given)."""
        return "osrt" in self.tables

    def osrt_calls_overlapping(self, windows: dict[int, tuple[np.ndarray, np.ndarray]]
                               ) -> Table:
        """OS runtime calls of each thread (gtid) that overlap one of its windows
        [lo, hi) (arrays of window starts and ends), without reading the others."""
        if not self.osrt_read and self.osrt_source is not None:
            return self.osrt_source.overlapping(windows)
        calls = self.table("osrt")
        keep = np.zeros(len(calls), dtype=bool)
        gtid, start, end = calls["gtid"], calls["start"], calls["end"]
        for g, (lo, hi) in windows.items():
            on = gtid == g
            for a, b in zip(np.asarray(lo).tolist(), np.asarray(hi).tolist(), strict=True):
                keep |= on & (end > a) & (start < b)
        return calls.rows(keep)

    def osrt_calls_named(self, pattern: re.Pattern[str], gtids: list[int] | None = None,
                         pids: list[int] | None = None) -> Table:
        """OS runtime calls whose name matches *pattern* (sorted by start), of the
        threads *gtids* and processes *pids* only if given, without reading the
        others."""
        if not self.osrt_read and self.osrt_source is not None:
            return self.osrt_source.named(pattern, gtids, pids)
        calls = self.table("osrt")
        keep = calls.labels("name").matching(pattern)
        if gtids is not None:
            keep &= np.isin(calls["gtid"], gtids)
        if pids is not None:
            keep &= np.isin(calls["gtid"].astype(np.int64) >> 24 & 0xFFFFFF, pids)
        return calls.rows(keep)

    @property
    def has_gpu_activity(self) -> bool:
        return any(len(self.tables[n]) for n in ("kernels", "memcpys", "memsets", "graphs"))

    @cached_property
    def op_index(self) -> OpIndex:
        """Kernels, copies, memsets and CUDA graph executions as one sequence of GPU
        ops (see OpIndex)."""
        return OpIndex(tuple(self.tables[n] for n in OP_TABLES))

    @cached_property
    def gpu_ops(self) -> pd.DataFrame:
        """Kernels, copies, memsets and graph executions in one frame (kind: kernel/
        memcpy/memset/graph), sorted by start: the GPU's activity for idle/busy and gap
        math."""
        cols = ["start", "end", "device", "stream", "pid", "corr", "api_start", "api_end",
                "gtid"]
        if not self.has_gpu_activity:
            data: dict[str, Any] = {c: np.zeros(0, np.int64) for c in cols}
            return Table(data | {"kind": Labels(np.zeros(0, np.int8), []),
                                 "name": Labels(np.zeros(0, np.int32), [])}).to_pandas()
        ops = self.op_index.merged()
        data = {c: ops.column(c) for c in cols}
        data["kind"] = Labels(ops.source.astype(np.int8), list(OP_KINDS))
        data["name"] = ops.names()
        return Table(data).to_pandas()

    def legacy_streams(self) -> set[tuple[int, int]]:
        """(pid, stream) of every legacy default (NULL) stream."""
        s = self.table("streams")
        on = s["legacy_default"].astype(bool)
        return set(zip(s["pid"][on].tolist(), s["stream"][on].tolist(), strict=True))

    def device_row(self, device: int) -> dict[str, Any] | None:
        """The device's row of ``devices`` (column -> Python value), None if unknown."""
        d = self.table("devices")
        at = np.flatnonzero(d["device"] == device) if len(d) else np.zeros(0, np.intp)
        return next(d.rows(at[:1]).records(), None)

    @cached_property
    def thread_names(self) -> dict[int, str]:
        """The first name of each thread (gtid), looked up once."""
        t = self.table("threads")
        gtid, name = t["gtid"].astype(np.int64), t["name"]
        names = name.strings() if isinstance(name, Labels) else name
        _, first = np.unique(gtid, return_index=True)
        first.sort()
        return dict(zip(gtid[first].tolist(), names[first].tolist(), strict=True))

    def thread_name(self, gtid: int) -> str:
        tid = int(gtid) & 0xFFFFFF
        name = self.thread_names.get(int(gtid))
        return f"{name} (tid {tid})" if name is not None else f"tid {tid}"

    def span(self) -> tuple[int, int] | None:
        """First to last GPU activity, or None without GPU activity."""
        ix = self.op_index
        if not ix.devices:
            return None
        return ix.span()


Events = Union[Table, "pd.DataFrame"]     # what a Trace is given


# The events a Trace holds, by name (``Trace.table``).
TABLE_NAMES = ("kernels", "memcpys", "memsets", "api", "syncs", "nvtx", "streams", "devices",
               "threads", "graphs", "processes", "event_waits", "osrt")
OSRT_COLUMNS: dict[str, str] = schema.frame_columns(schema.OSRT)
GRAPH_COLUMNS: dict[str, str] = schema.frame_columns(schema.GRAPH) | schema.LAUNCH_COLUMNS
# The events a Trace may be built without (empty then).
_EMPTY_COLUMNS = {"graphs": GRAPH_COLUMNS, "processes": PROCESS_COLUMNS,
                  "event_waits": EVENT_WAIT_COLUMNS}
# The GPU ops' tables, in OpIndex's source order (OP_KINDS).
OP_TABLES = ("kernels", "memcpys", "memsets", "graphs")
# What a launch column (api_start, api_end, gtid) of a GPU op holds when no CUDA call
# matched it, and graph_node for a kernel not launched from a graph: impossible values
# (times are > 0, ids >= 0), so that the columns stay int64.
NO_CALL = -1
NO_GRAPH_NODE = -1
# The kinds of GPU op, in OpIndex's source order.
OP_KINDS = ("kernel", "memcpy", "memset", "graph")


def graph_label(graph_id: SupportsInt) -> str:
    """How a CUDA graph execution is named where a kernel would show its name."""
    return f"CUDA graph {int(graph_id)}"


class OpIndex:
    """Kernels, copies, memsets and graph executions as one sequence of GPU ops, in
    start order (ties: in that order of kinds, each in its frame's order). Holds no per-op
    arrays: ``merged`` builds them (for one device) when needed, and the caller lets
    them go, so a report of millions of kernels does not keep a second copy of them."""

    def __init__(self, frames: tuple[Table, ...]) -> None:
        self.frames = frames

    @cached_property
    def devices(self) -> list[int]:
        """Devices with ops, sorted (counted, not sorted, over the ops: table.distinct)."""
        found: set[int] = set()
        for f in self.frames:
            found.update(distinct(f["device"]).tolist())
        return sorted(int(d) for d in found)

    def span(self, device: int | None = None) -> tuple[int, int]:
        """First start and last end of the ops (of one device)."""
        lo, hi = [], []
        for f in self.frames:
            if not len(f):
                continue
            start, end = f["start"], f["end"]
            if device is not None and len(self.devices) > 1:
                on = f["device"] == device
                start, end = start[on], end[on]
            if start.size:
                lo.append(int(start.min()))
                hi.append(int(end.max()))
        return min(lo), max(hi)

    def device_span(self, device: int) -> tuple[int, int]:
        return self.span(device)

    def merged(self, device: int | None = None) -> MergedOps:
        """The ops (of one device) in start order, as arrays."""
        return self.order(device).materialize()

    def order(self, device: int | None = None) -> OpOrder:
        """The ops (of one device) in start order, without per-op arrays where the largest
        kind needs none (see OpOrder)."""
        starts, ends, sources, rows = [], [], [], []
        indexes = []
        for k, f in enumerate(self.frames):
            start = f["start"].astype(np.int64, copy=False)
            end = f["end"].astype(np.int64, copy=False)
            row: np.ndarray | None = None
            if device is not None and len(self.devices) > 1:
                row = np.flatnonzero(f["device"] == device)
                start, end = start[row], end[row]
            if not start.size:
                continue
            index = np.int32 if len(f) < 2**31 else np.int64
            if row is not None:
                row = row.astype(index)
            starts.append(start)
            ends.append(end)
            sources.append(k)
            rows.append(row)
            indexes.append(index)
        if not starts:
            z = np.zeros(0, dtype=np.int64)
            return OpOrder(self.frames, -1, np.int64, None, z, z, _small_ops(z, z))
        parts = []
        for start, end, source, row, index in zip(starts, ends, sources, rows, indexes,
                                                  strict=True):
            if not tl.is_sorted(start):
                order = np.argsort(start, kind="stable")
                start, end = start[order], end[order]
                row = order.astype(index) if row is None else row[order]
            parts.append((start, end, source, row, index))
        del starts, ends, sources, rows
        # The largest kind (kernels) stays as it is; the others are merged among
        # themselves, then inserted after equal starts: the stable order by start with
        # ties in kind order, without sorting or copying the largest part.
        big = max(range(len(parts)), key=lambda i: parts[i][0].size)
        b_start, b_end, b_source, b_row, b_index = parts[big]
        rest = [p for i, p in enumerate(parts) if i != big]
        if not rest:
            return OpOrder(self.frames, b_source, b_index, b_row, b_start, b_end,
                           _small_ops(np.zeros(0, dtype=np.int64), np.zeros(0, np.int64)))
        small_start = np.concatenate([p[0] for p in rest])
        small_end = np.concatenate([p[1] for p in rest])
        small_source = np.concatenate([np.full(p[0].size, p[2], dtype=np.int8)
                                       for p in rest])
        small_row = np.concatenate([np.arange(p[0].size, dtype=np.int64) if p[3] is None
                                    else p[3].astype(np.int64) for p in rest])
        order = np.lexsort((small_source, small_start))     # by start, then kind (stable)
        small_start, small_end = small_start[order], small_end[order]
        small_source, small_row = small_source[order], small_row[order]
        # Kinds before the big one come first (compared with its place among the kinds
        # present, as ever: the same as its kind unless an earlier kind has no ops).
        before = small_source < big
        at = np.empty(small_start.size, dtype=np.intp)      # each op searched on its side
        at[before] = np.searchsorted(b_start, small_start[before], side="left")
        at[~before] = np.searchsorted(b_start, small_start[~before], side="right")
        return OpOrder(self.frames, b_source, b_index, b_row, b_start, b_end,
                       _small_ops(small_start, small_end, small_source, small_row,
                                  at + np.arange(at.size)))


@dataclass
class _SmallOps:
    """The ops of the kinds other than the largest, in order, and their positions."""

    start: np.ndarray
    end: np.ndarray
    source: np.ndarray      # int8
    row: np.ndarray         # int64
    position: np.ndarray    # int64, in the merged order (increasing)


def _small_ops(start: np.ndarray, end: np.ndarray, source: np.ndarray | None = None,
               row: np.ndarray | None = None, position: np.ndarray | None = None
               ) -> _SmallOps:
    z = np.zeros(0, dtype=np.int64)
    return _SmallOps(start, end, np.zeros(0, np.int8) if source is None else source,
                     z if row is None else row, z if position is None else position)


class OpOrder:
    """GPU ops (of one device) in start order (ties: in kind order, each in its frame's
    order), as MergedOps holds them, without per-op arrays for the largest kind (the
    kernels) when it is alone on the device and already in start order, as exports are:
    the frame's own columns serve, and the few ops of the other kinds sit at known
    positions among them. Columns are built for a slice of positions (``slice``) or at
    given positions (``take``), so a device of millions of kernels is walked slice by
    slice without a second copy of it."""

    def __init__(self, frames: tuple[Table, ...], big: int, big_index: type,
                 big_row: np.ndarray | None, big_start: np.ndarray, big_end: np.ndarray,
                 small: _SmallOps) -> None:
        self.frames = frames
        self._big = big                   # source of the largest kind (-1: no ops)
        self._big_index = big_index       # dtype of row numbers (the largest kind's)
        self._big_row = big_row           # rows of the largest kind in order; None: all
        self._big_start, self._big_end = big_start, big_end
        self._small = small

    def __len__(self) -> int:
        return self._big_start.size + self._small.start.size

    def slice(self, o0: int, o1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                               np.ndarray]:
        """(start, end, source, row) of the ops at positions [o0, o1)."""
        o1 = max(o0, o1)
        sm = self._small
        j0, j1 = np.searchsorted(sm.position, [o0, o1], side="left").tolist()
        b0, b1 = o0 - j0, o1 - j1
        start, end = self._big_start[b0:b1], self._big_end[b0:b1]
        source = np.full(o1 - o0, self._big, dtype=np.int8)
        row = (np.arange(b0, b1, dtype=self._big_index) if self._big_row is None
               else self._big_row[b0:b1])
        if j1 > j0:
            # Each column filled from its two parts at places found once (np.insert
            # would find them anew for each column).
            at = sm.position[j0:j1] - o0                     # places in the slice
            big = np.ones(o1 - o0, dtype=bool)
            big[at] = False

            def merged(big_part: np.ndarray, small_part: np.ndarray) -> np.ndarray:
                out = np.empty(o1 - o0, dtype=big_part.dtype)
                out[big] = big_part
                out[at] = small_part
                return out

            start, end = merged(start, sm.start[j0:j1]), merged(end, sm.end[j0:j1])
            source[at] = sm.source[j0:j1]
            row = merged(row, sm.row[j0:j1])
        return start, end, source, row

    def take(self, at: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, source, row) of the ops at positions *at*."""
        at = np.asarray(at, dtype=np.int64)
        sm = self._small
        before = np.searchsorted(sm.position, at, side="left")   # small ops before each
        small = np.zeros(at.shape, dtype=bool)
        if sm.position.size:
            small = sm.position[np.minimum(before, sm.position.size - 1)] == at
        big = ~small
        b = at[big] - before[big]
        j = before[small]
        start = np.empty(at.shape, dtype=np.int64)
        end = np.empty(at.shape, dtype=np.int64)
        source = np.full(at.shape, self._big, dtype=np.int8)
        row: np.ndarray = np.empty(at.shape, dtype=self._big_index)
        start[big], end[big] = self._big_start[b], self._big_end[b]
        row[big] = b if self._big_row is None else self._big_row[b]
        start[small], end[small] = sm.start[j], sm.end[j]
        source[small], row[small] = sm.source[j], sm.row[j]
        return start, end, source, row

    def searchsorted(self, values: ArrayLike, side: Literal["left", "right"] = "left"
                     ) -> np.ndarray:
        """np.searchsorted over the ops' starts (in start order)."""
        v = np.asarray(values, dtype=np.int64)
        return (np.searchsorted(self._big_start, v, side=side)
                + np.searchsorted(self._small.start, v, side=side))

    def bounds(self) -> tuple[int, int]:
        """The first start and the last end (an end below its start reads as the
        start); (0, 0) without ops."""
        sm = self._small
        if not len(self):
            return 0, 0
        lo = [int(a[0]) for a in (self._big_start, sm.start) if a.size]
        hi = [int(a.max()) for a in (self._big_end, self._big_start[-1:], sm.end, sm.start)
              if a.size]
        return min(lo), max(hi)

    def materialize(self) -> MergedOps:
        """Every op at once (MergedOps)."""
        if self._big < 0:
            z = np.zeros(0, dtype=np.int64)
            return MergedOps(self.frames, z, z, np.zeros(0, np.int8), z)
        return MergedOps(self.frames, *self.slice(0, len(self)))


@dataclass
class MergedOps:
    """GPU ops in start order: ``source`` (index in OP_KINDS: 0 kernel, 1 memcpy,
    2 memset, 3 graph) and ``row`` (its position in that frame) lead back to the full
    rows."""

    frames: tuple[Table, ...]
    start: np.ndarray
    end: np.ndarray
    source: np.ndarray
    row: np.ndarray

    def __len__(self) -> int:
        return self.start.size

    def column(self, name: str, at: np.ndarray | None = None) -> np.ndarray:
        """Column *name* of the frames, in op order (or at op positions *at* only)."""
        # A kind without the column (graph executions have no bytes) reads as NaN.
        parts = [f[name] if name in f else None for f in self.frames]
        src, row = (self.source, self.row) if at is None else (self.source[at], self.row[at])
        dtype = np.result_type(*[p for p in parts if p is not None])
        if any(p is None and (src == k).any() for k, p in enumerate(parts)):
            dtype = np.result_type(dtype, np.float64) if dtype.kind in "iufb" else dtype
        out = np.empty(src.size, dtype=dtype)
        for k, part in enumerate(parts):
            sel = src == k
            if sel.any():
                out[sel] = np.nan if part is None else part[row[sel]]
        return out

    def names(self, at: np.ndarray | None = None) -> Labels:
        """Kernel names, copy kinds ('Host-to-Device'...), 'memset' and 'CUDA graph N',
        as op names (categories sorted)."""
        kernels, memcpys, memsets, *rest = self.frames
        values = [kernels.labels("name"), memcpys.labels("kind"),
                  Labels(np.zeros(len(memsets), np.int32), ["memset"] if len(memsets) else [])]
        if rest:
            ids, codes = np.unique(rest[0]["graph_id"], return_inverse=True)
            values.append(Labels(codes.reshape(-1).astype(np.int32),
                                 [graph_label(g) for g in ids.tolist()]))
        cats = sorted(set().union(*(set(v.categories.tolist()) for v in values)))
        index = {c: i for i, c in enumerate(cats)}
        src, row = (self.source, self.row) if at is None else (self.source[at], self.row[at])
        codes = np.full(src.size, -1, dtype=np.int32)
        for k, v in enumerate(values):
            sel = src == k
            if sel.any():
                lut = np.array([index[c] for c in v.categories.tolist()] + [-1], dtype=np.int32)
                codes[sel] = lut[v.codes[row[sel]]]
        return Labels(codes, cats)


_Index = TypeVar("_Index", bound="Derived")


class Derived:
    """A layer's derived index of one Trace: what that layer computes from the trace
    once and reads many times (the accounting's categories of calls and buckets of
    ops, the rules' NVTX labels...), declared as the fields of one subclass that the
    layer owns, each computed on first use (``functools.cached_property``: nothing is
    computed that is not read).

    ``Index.of(trace)`` is the trace's one instance of a subclass, kept in
    ``trace.derived`` (keyed by the subclass) so that every caller shares it; the
    report layer declares that slot and knows nothing of what the layers above keep
    there. Nothing else of a Trace is set from above report/ (a test checks). The index
    holds its trace weakly: no reference cycle keeps a dropped trace's frames alive."""

    def __init__(self, trace: Trace) -> None:
        self._trace = weakref.ref(trace)

    @property
    def trace(self) -> Trace:
        trace = self._trace()
        if trace is None:
            raise ReferenceError(f"{type(self).__name__}: its trace is gone")
        return trace

    @classmethod
    def of(cls: type[_Index], trace: Trace) -> _Index:
        """The index of *trace* (built, empty, on first use)."""
        index = trace.derived.get(cls)
        if not isinstance(index, cls):
            index = cls(trace)
            trace.derived[cls] = index
        return index
