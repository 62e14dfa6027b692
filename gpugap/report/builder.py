"""Hand-built traces: a small Trace from a few lines of code, for edge cases no capture
holds (a gap just under a threshold, a copy from pinned memory beside the same copy from
pageable memory). Real captures stay the proof of each verdict; a built trace proves
what a rule does at its edges.

    from gpugap.report.builder import TraceBuilder
    b = TraceBuilder(gpu="NVIDIA H100 80GB HBM3", sm_count=132)
    side = b.stream(13, non_blocking=True)
    b.kernel("gemm", start_us=0, dur_us=50, grid=(264, 1, 1), block=(256, 1, 1))
    b.memcpy("H2D", bytes=1 << 20, start_us=60, dur_us=30, src="Pageable", stream=side)
    b.sync("cudaStreamSynchronize", start_us=20, end_us=95)
    b.nvtx("step 1", start_us=-20, end_us=100)
    trace = b.build()

The builder writes what nsys would export for these events (its tables and columns, as
``gpugap.report.schema`` declares them: every declared column of a GPU table, given by
its frame name or else its declared default) into a temporary SQLite file and loads it with the
loader itself (``load_database``), then removes the file: the frames, their columns,
dtypes, categoricals and derived columns (``blocks``, launch columns joined from the API
calls by correlation id, NVTX depth, legacy streams...) are the loader's by
construction, whatever the loader does now or later.

Times are microseconds (every time argument ends in ``_us``; floats give ns precision)
from the builder's origin, which lies ``origin_ns`` into the session: the trace's ns are
``b.ns(us)``. Every correlation id is automatic (numbered in the order the API calls
start, as nsys does); each GPU op gets its launching call unless ``api=None``. Defaults:
device 0, process ``pid`` (1), its main thread (tid = pid), the legacy default stream
(``null_stream``, 7, declared for each process and device with work, as nsys records
it); a stream not declared with ``stream()`` is an ordinary blocking stream. Inputs are
checked (end >= start, ids and launch sizes within CUDA's limits): ValueError, one line.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path

from gpugap.report import schema as S
from gpugap.report import validate as V
from gpugap.report.columns import PID_SHIFT
from gpugap.report.database import Database
from gpugap.report.loader import DEVICE_LIMITS, load_database
from gpugap.report.schema import ENUMS, GRAPH, KERNEL, MEMCPY, MEMSET, SYNC
from gpugap.report.trace import Trace

BUILT = "<built in memory>"
ORIGIN_NS = 1_000_000_000
VM = 1 << 48                   # the high bits of nsys's serialized global ids
RUNTIME = S.RUNTIME.name


def _labels(table: str) -> dict[int, str]:
    return {k: label for k, (_, label) in ENUMS[table].items()}


COPY_KINDS = _labels("ENUM_CUDA_MEMCPY_OPER")
MEM_KINDS = _labels("ENUM_CUDA_MEM_KIND")
SYNC_TYPES = _labels("ENUM_CUPTI_SYNC_TYPE")
COPY_SHORT = {"H2D": 1, "D2H": 2, "D2D": 8, "H2H": 9, "P2P": 10}
_EVENT_TYPE, _STREAM_TYPE = "ENUM_NSYS_EVENT_TYPE", "ENUM_CUPTI_STREAM_TYPE"
NVTX_KINDS: dict[str, int] = {}
for _name, _kind in S.NVTX_KINDS.items():
    NVTX_KINDS.setdefault(_kind, S.enum_fallback(_EVENT_TYPE, _name))
NVTX_DOMAIN_CREATE = S.enum_fallback(_EVENT_TYPE, S.NVTX_DOMAIN_CREATE)
FLAG_DEFAULT, FLAG_NON_BLOCKING, FLAG_NULL = (
    S.enum_fallback(_STREAM_TYPE, f"CUPTI_ACTIVITY_STREAM_CREATE_FLAG_{n}")
    for n in ("DEFAULT", "NON_BLOCKING", "NULL"))
EVENT_CLASS = {driver: S.enum_fallback("ENUM_NSYS_EVENT_CLASS",
                                       f"TRACE_PROCESS_EVENT_CUDA_{n}")
               for driver, n in ((False, "RUNTIME"), (True, "DRIVER"))}
# The rest of TARGET_INFO_GPU for a device (an H100 SXM's, as nsys records it).
H100 = {"max_warps_per_sm": 64, "warp_size": 32, "max_blocks_per_sm": 32,
        "max_regs_per_sm": 65536, "max_regs_per_block": 65536, "max_shmem_per_sm": 233472,
        "max_shmem_per_block": 232448, "cc_major": 9, "cc_minor": 0,
        "memory_bytes": 85017493504, "clock_hz": 1980000000, "bus": "0000:00:06.0",
        "uuid": None, "chip": "GH100"}
# Frame column -> TARGET_INFO_GPU column: the loader's own (first candidate).
DEVICE_COLUMNS = {c.name: c.nsys for c in S.GPUS.columns if c.name != "device"}
# The nsys columns written as TEXT (any other as INTEGER).
_TEXT = {c.nsys for t in S.TABLES for c in t.columns if c.kind == "text"}


def _label_id(labels: dict[int, str], value: str, what: str,
              short: dict[str, int] | None = None) -> int:
    if short and value in short:
        return short[value]
    for k, v in labels.items():
        if v == value:
            return k
    known = ", ".join(list(short or ()) + list(labels.values()))
    raise ValueError(f"unknown {what} {value!r}; use one of: {known}")


def _sync_type(name: str) -> str:
    for key, label in (("StreamWaitEvent", "Stream wait sync"), ("Event", "Event sync"),
                       ("Stream", "Stream sync"), ("Device", "Context sync"),
                       ("Ctx", "Context sync")):
        if key in name:
            return label
    return "Unknown"


class TraceBuilder:
    """Collects events (each method returns the builder, except ``stream``/``thread``,
    which return the id), then ``build()`` returns the Trace."""

    def __init__(self, gpu: str = "NVIDIA H100 80GB HBM3", sm_count: int = 132, *,
                 devices: int = 1, pid: int = 1, origin_ns: int = ORIGIN_NS,
                 null_stream: int = 7, cuda_traced: bool | None = True) -> None:
        self.origin_ns, self.pid, self.null_stream = origin_ns, pid, null_stream
        self.cuda_traced = cuda_traced
        self.devices: dict[int, dict] = {}
        for d in range(devices):
            self.device(d, name=gpu, sm_count=sm_count)
        self.threads: dict[int, tuple[int, str | None]] = {}  # tid -> (pid, name)
        self.contexts: dict[tuple[int, int], int] = {}       # (pid, device) -> context
        self.main = self.thread(pid, "python", pid=pid)
        self.streams: dict[tuple[int, int], tuple[int, int, int]] = {}  # -> ctx, flag, prio
        self.tables: dict[str, list[tuple]] = {}             # GPU tables' raw rows
        self.calls: list[list] = []        # [start, end, gtid, name, driver, corr]
        self.launched: list[tuple[str, int, int]] = []      # (GPU table, row, call)
        self.nvtx_rows: list[tuple] = []
        self.osrt_rows: list[tuple] = []

    # --- what the trace is about --------------------------------------------------------
    def device(self, device: int, *, name: str = "NVIDIA H100 80GB HBM3",
               sm_count: int = 132, **fields) -> TraceBuilder:
        """Declare (or redefine) a GPU; *fields* override the frame's other device columns
        (max_blocks_per_sm, cc_major, memory_bytes, bus, uuid, chip...)."""
        self._id(device, V.MAX_DEVICE - 1, "device")
        unknown = set(fields) - set(DEVICE_COLUMNS)
        if unknown:
            raise ValueError(f"unknown device field(s) {', '.join(sorted(unknown))}; use "
                             f"{', '.join(DEVICE_COLUMNS)}")
        values = H100 | {"name": self._name(name, "GPU"), "sm_count": sm_count} | fields
        for c, (_, _, hi) in DEVICE_LIMITS.items():      # what the loader accepts
            if self._id(values[c], hi, f"device {device} {c}") < 1:
                raise ValueError(f"invalid device {device} {c} 0: at least 1")
        self.devices[device] = values
        return self

    def thread(self, tid: int, name: str | None = None, *, pid: int | None = None) -> int:
        """Declare a thread (of process *pid*, default the builder's; unnamed: no
        ThreadNames row, as for a thread nsys saw no name of); returns its tid."""
        self._id(tid, 0xFFFFFF, "thread")
        self.threads[tid] = (self._id(self.pid if pid is None else pid, 0xFFFFFF, "pid"), name)
        return tid

    def stream(self, stream: int, *, non_blocking: bool = False, legacy: bool = False,
               priority: int = 0, device: int = 0, pid: int | None = None) -> int:
        """Declare a stream: blocking (cudaStreamCreate), non-blocking
        (cudaStreamNonBlocking) or the legacy NULL stream; returns its id."""
        self._id(stream, V.MAX_ID, "stream")
        pid = self.pid if pid is None else pid
        flag = FLAG_NULL if legacy else FLAG_NON_BLOCKING if non_blocking else FLAG_DEFAULT
        self.streams[(pid, stream)] = (self._context(pid, device), flag, priority)
        return stream

    def ns(self, us: float) -> int:
        """The trace time (ns) of *us* microseconds from the origin."""
        return self.origin_ns + round(us * 1000)

    # --- GPU work -----------------------------------------------------------------------
    def kernel(self, name: str, *, start_us: float, dur_us: float, stream: int | None = None,
               device: int = 0, grid: tuple[int, int, int] | None = None,
               block: tuple[int, int, int] = (256, 1, 1), registers: int = 32,
               shared_static: int = 0, shared_dynamic: int = 0,
               graph_node: int | None = None, demangled: str | None = None,
               thread: int | None = None, api: str | None = "cudaLaunchKernel",
               launch_us: float | None = None,
               api_us: tuple[float, float] | None = None, **columns: int) -> TraceBuilder:
        """A kernel (*name*: its short name; *demangled*: its full signature, default the
        name); *grid* defaults to one block per SM. Launched by *api* (None: no call
        recorded) at *launch_us* (default 10 us before it starts) for 3 us, or over
        *api_us* = (start, end). *columns*: any other kernel column the schema declares
        (gpugap.report.schema.KERNEL), by its frame name (default: its declared default)."""
        grid = grid or (self.devices.get(device, {}).get("sm_count", 132), 1, 1)
        values = {"name": self._name(name, "kernel"),
                  "demangled": self._name(demangled or name, "kernel"),
                  **dict(zip(("grid_x", "grid_y", "grid_z"), grid, strict=True)),
                  **dict(zip(("block_x", "block_y", "block_z"), block, strict=True)),
                  "registers": registers, "shared_static": shared_static,
                  "shared_dynamic": shared_dynamic, "graph_node": graph_node} | columns
        extra = self._own(KERNEL, values, f"kernel {name!r}")
        if launch_us is not None and api_us is None:
            api_us = (launch_us, launch_us + 3)
        return self._op(KERNEL.name, extra, start_us, dur_us, stream, device, thread, api,
                        api_us, blocking=False)

    def memcpy(self, kind: str, *, bytes: int, start_us: float, dur_us: float,
               src: str | None = None, dst: str | None = None, stream: int | None = None,
               device: int = 0, thread: int | None = None, api: str | None = "cudaMemcpyAsync",
               api_us: tuple[float, float] | None = None,
               peer: tuple[int, int] | None = None) -> TraceBuilder:
        """A copy: *kind* 'H2D', 'D2H', 'D2D', 'P2P', 'H2H' (or nsys's label); host memory
        is pinned unless *src*/*dst* say 'Pageable'; *peer*: (source device, destination
        device) of a copy between GPUs. The call defaults to covering the copy when it
        blocks (a synchronous API, or pageable memory), else to a 3 us launch 10 us
        before it."""
        code = _label_id(COPY_KINDS, kind, "copy kind", COPY_SHORT)
        label = COPY_KINDS.get(code, kind)
        src = src or ("Pinned" if label.startswith("Host") else "Device")
        dst = dst or ("Pinned" if label.endswith("Host") else "Device")
        src_device, dst_device = peer if peer is not None else (None, None)
        extra = self._own(MEMCPY, {
            "bytes": self._bytes(bytes), "kind": code,
            "src_kind": _label_id(MEM_KINDS, src, "memory kind"),
            "dst_kind": _label_id(MEM_KINDS, dst, "memory kind"),
            "src_device": src_device, "dst_device": dst_device}, f"{kind} copy")
        blocking = api is not None and ("Async" not in api or "Pageable" in (src, dst))
        return self._op(MEMCPY.name, extra, start_us, dur_us, stream, device, thread, api,
                        api_us, blocking)

    def memset(self, *, bytes: int, start_us: float, dur_us: float, memory: str = "Device",
               stream: int | None = None, device: int = 0, thread: int | None = None,
               api: str | None = "cudaMemsetAsync",
               api_us: tuple[float, float] | None = None) -> TraceBuilder:
        extra = self._own(MEMSET, {"bytes": self._bytes(bytes),
                                   "mem_kind": _label_id(MEM_KINDS, memory, "memory kind")},
                          "memset")
        return self._op(MEMSET.name, extra, start_us, dur_us, stream, device, thread, api,
                        api_us, blocking=False)

    def graph(self, graph_id: int, *, start_us: float, dur_us: float,
              exec_id: int | None = None, stream: int | None = None, device: int = 0,
              thread: int | None = None, api: str | None = "cudaGraphLaunch",
              api_us: tuple[float, float] | None = None) -> TraceBuilder:
        """A CUDA graph execution as graph-level tracing records it (its nodes unlisted);
        *exec_id*: its executable graph's id (default the graph's)."""
        extra = self._own(GRAPH, {
            "graph_id": self._id(graph_id, V.MAX_ID, "graph"),
            "graph_exec_id": self._id(graph_id if exec_id is None else exec_id, V.MAX_ID,
                                      "graph exec")}, f"graph {graph_id}")
        return self._op(GRAPH.name, extra, start_us, dur_us, stream, device, thread, api,
                        api_us, blocking=False)

    # --- the host -----------------------------------------------------------------------
    def call(self, name: str, *, start_us: float, end_us: float, thread: int | None = None,
             driver: bool | None = None) -> TraceBuilder:
        """A CUDA API call (runtime, or driver: by default a cu* name that is not cuda*)."""
        self._call(name, start_us, end_us, thread, driver)
        return self

    def sync(self, name: str = "cudaStreamSynchronize", *, start_us: float, end_us: float,
             stream: int | None = None, device: int = 0, thread: int | None = None,
             sync_type: str | None = None, gpu_us: tuple[float, float] | None = None,
             event: int = 0xFFFFFFFF) -> TraceBuilder:
        """A synchronisation call and the GPU-side record CUPTI makes of it (over
        *gpu_us*, default the call's time; *sync_type* from the name by default)."""
        call = self._call(name, start_us, end_us, thread, None)
        lo, hi = self._span(*(gpu_us or (start_us, end_us)), f"sync {name!r}")
        code = _label_id(SYNC_TYPES, sync_type or _sync_type(name), "sync type")
        row = self._gpu_row(lo, hi, stream, device, call[2] >> PID_SHIFT & 0xFFFFFF, op=False)
        self.tables.setdefault(SYNC.name, []).append(
            row + self._own(SYNC, {"sync_type": code, "event": event}, f"sync {name!r}"))
        self.launched.append((SYNC.name, len(self.tables[SYNC.name]) - 1, len(self.calls) - 1))
        return self

    def nvtx(self, name: str, *, start_us: float, end_us: float, domain: str = "",
             thread: int | None = None, kind: str = "push/pop") -> TraceBuilder:
        """An NVTX range; a *domain* such as 'cuBLAS' makes it a traced library's range."""
        lo, hi = self._span(start_us, end_us, f"NVTX range {self._name(name, 'NVTX')!r}")
        gtid = self._gtid(thread)
        self.nvtx_rows.append((lo, hi, _label_id({}, kind, "NVTX kind", NVTX_KINDS),
                               name, gtid, domain))
        return self

    def osrt(self, name: str, *, start_us: float, end_us: float,
             thread: int | None = None) -> TraceBuilder:
        """An OS runtime call (read, poll, sem_wait...)."""
        self._name(name, "OS call")
        self.osrt_rows.append((*self._span(start_us, end_us, f"OS call {name!r}"),
                               self._gtid(thread), name))
        return self

    # --- checks and rows ----------------------------------------------------------------
    @staticmethod
    def _own(table: S.Table, values: dict, what: str) -> tuple:
        """The row of *table*'s own columns (after the shared GPU ones), in its declared
        order: *values* by frame name, else each column's declared default; values
        checked against the declared bounds."""
        own = S.own_columns(table)
        unknown = set(values) - {c.name for c in own}
        if unknown:
            raise ValueError(f"{what}: unknown column(s) {', '.join(sorted(unknown))}; "
                             f"use {', '.join(c.name for c in own if c.name)}")
        row = []
        for c in own:
            value = values.get(c.name, c.default)
            if c.bounds is not None and value is not None:
                lo, hi = c.bounds
                if (isinstance(value, bool) or not isinstance(value, int)
                        or not lo <= value <= hi):
                    raise ValueError(f"{what}: {c.name} {value!r} is outside CUDA's "
                                     f"limits [{lo}, {hi}]")
            row.append(value)
        return tuple(row)

    @staticmethod
    def _id(value: int, hi: int, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= hi:
            raise ValueError(f"invalid {what} id {value!r}: an integer in [0, {hi}]")
        return value

    @staticmethod
    def _name(name: str, what: str) -> str:
        if not isinstance(name, str) or not name or len(name) > V.MAX_NAME:
            raise ValueError(f"invalid {what} name {name!r}: a string of 1 to {V.MAX_NAME} "
                             "characters")
        return name

    @staticmethod
    def _bytes(n: int) -> int:
        if not isinstance(n, int) or not 0 <= n <= V.MAX_BYTES:
            raise ValueError(f"invalid size {n!r} bytes: an integer in [0, {V.MAX_BYTES}]")
        return n

    def _span(self, start_us: float, end_us: float, what: str) -> tuple[int, int]:
        lo, hi = self.ns(start_us), self.ns(end_us)
        if hi < lo:
            raise ValueError(f"{what} ends ({end_us} us) before it starts ({start_us} us)")
        if lo <= 0 or hi >= V.MAX_TIME_NS:
            raise ValueError(f"{what} at {start_us} us lies before the session began "
                             f"(origin_ns {self.origin_ns}) or beyond 2^62 ns")
        return lo, hi

    def _gtid(self, thread: int | None) -> int:
        tid = self.main if thread is None else thread
        if tid not in self.threads:
            raise ValueError(f"unknown thread {tid}; declare it with thread({tid}, name)")
        return VM | self.threads[tid][0] << PID_SHIFT | tid

    def _call(self, name: str, start_us: float, end_us: float, thread: int | None,
              driver: bool | None) -> list:
        lo, hi = self._span(start_us, end_us, f"call {self._name(name, 'API')!r}")
        if driver is None:
            driver = name.startswith("cu") and not name.startswith("cuda")
        self.calls.append([lo, hi, self._gtid(thread), name, driver, 0])
        return self.calls[-1]

    def _context(self, pid: int, device: int) -> int:
        """A process's CUDA context on *device*: numbered from 1 per process, as nsys does."""
        if device not in self.devices:
            raise ValueError(f"unknown device {device}; declare it with device({device})")
        mine = sum(p == pid for p, _ in self.contexts)
        return self.contexts.setdefault((pid, device), mine + 1)

    def _gpu_row(self, lo: int, hi: int, stream: int | None, device: int, pid: int,
                 op: bool = True) -> tuple:
        """The columns every GPU table shares; an op's stream (and its process's legacy
        stream) declared when it was not (a sync record's stream need not be one)."""
        stream = self.null_stream if stream is None else self._id(stream, V.MAX_ID, "stream")
        if not op:
            if device not in self.devices:
                raise ValueError(f"unknown device {device}; declare it with device({device})")
            return (lo, hi, device, self.contexts.get((pid, device), 0), stream, 0,
                    VM | pid << PID_SHIFT)
        context = self._context(pid, device)
        self.streams.setdefault((pid, self.null_stream), (context, FLAG_NULL, 0))
        self.streams.setdefault((pid, stream), (context, FLAG_DEFAULT, 0))
        return (lo, hi, device, context, stream, 0, VM | pid << PID_SHIFT)

    def _op(self, table: str, extra: tuple, start_us: float, dur_us: float,
            stream: int | None, device: int, thread: int | None, api: str | None,
            api_us: tuple[float, float] | None, blocking: bool) -> TraceBuilder:
        if dur_us < 0:
            raise ValueError(f"{table} op at {start_us} us lasts {dur_us} us (< 0)")
        lo, hi = self._span(start_us, start_us + dur_us, table)
        gtid = self._gtid(thread)
        rows = self.tables.setdefault(table, [])
        rows.append(self._gpu_row(lo, hi, stream, device, gtid >> PID_SHIFT & 0xFFFFFF)
                    + extra)
        if api is not None:
            if api_us is None:
                api_us = ((start_us - 5, start_us + dur_us + 2) if blocking
                          else (start_us - 10, start_us - 7))
            self._call(api, *api_us, thread, None)
            self.launched.append((table, len(rows) - 1, len(self.calls) - 1))
        return self

    # --- the export, and the loader ------------------------------------------------------
    def build(self) -> Trace:
        """The Trace, loaded from a temporary export of the events (removed after)."""
        with tempfile.TemporaryDirectory(prefix="gpugap-built-") as tmp:
            path = Path(tmp) / "built.sqlite"
            tables = self._write(path)
            db = Database(path)
            try:
                trace = load_database(db, BUILT)
                trace.osrt_frame = trace.osrt          # read now: the file goes away
            finally:
                db.close()
        if trace.info.problems:     # the builder wrote something the loader had to repair
            raise AssertionError(f"TraceBuilder wrote rows the loader repaired: "
                                 f"{trace.info.warnings}")
        trace.osrt_source = None
        trace.host_source = None
        # The export's marker table is the builder's, not an nsys version.
        trace.info = replace(trace.info, sqlite_path=BUILT, nsys_version=None,
                             schema_version=None, cuda_traced=self.cuda_traced,
                             tables=frozenset(tables))
        return trace

    def _write(self, path: Path) -> list[str]:
        strings: dict[str, int] = {}

        def sid(text: str) -> int:
            return strings.setdefault(text, len(strings))

        # Correlation ids in the order the calls start (ties: the order they were made).
        order = sorted(range(len(self.calls)), key=lambda i: self.calls[i][0])
        for corr, i in enumerate(order, start=1):
            self.calls[i][5] = corr
        gpu = {t: [list(r) for r in rows] for t, rows in self.tables.items()}
        for table, row, call in self.launched:
            gpu[table][row][5] = self.calls[call][5]
        data: dict[str, tuple[tuple[str, ...], list]] = {}
        for table, rows in gpu.items():
            columns = S.BY_NAME[table].columns
            names = [i for i, c in enumerate(columns) if c.kind == "name"]
            for r in rows:                # the names, as StringIds ids
                for i in names:
                    r[i] = sid(r[i])
            data[table] = (tuple(c.nsys for c in columns), sorted(rows, key=lambda r: r[0]))
        if self.calls:
            data[RUNTIME] = (tuple(c.nsys for c in S.RUNTIME.columns),
                             [(s, e, EVENT_CLASS[bool(d)], g, c, sid(n))
                              for s, e, g, n, d, c in sorted(self.calls, key=lambda r: r[0])])
        domains: dict[tuple[int, str], int] = {}
        nvtx = []
        for lo, hi, kind, name, gtid, domain in sorted(self.nvtx_rows):
            key = (gtid >> PID_SHIFT & 0xFFFFFF, domain)
            if domain and key not in domains:
                domains[key] = len(domains) + 1
                nvtx.append((lo, None, NVTX_DOMAIN_CREATE, domain, gtid, domains[key]))
            nvtx.append((lo, hi, kind, name, gtid, domains.get(key, 0)))
        if nvtx:
            data["NVTX_EVENTS"] = (("start", "end", "eventType", "text", "globalTid",
                                    "domainId"), nvtx)
        if self.osrt_rows:
            data["OSRT_API"] = (("start", "end", "globalTid", "nameId"),
                                [(s, e, g, sid(n)) for s, e, g, n in sorted(self.osrt_rows)])
        data["ThreadNames"] = (("nameId", "globalTid"),
                               [(sid(name), VM | pid << PID_SHIFT | tid)
                                for tid, (pid, name) in self.threads.items() if name])
        cols = tuple(DEVICE_COLUMNS.values())
        data["TARGET_INFO_GPU"] = (("id",) + cols, [
            (d, *(f[c] for c in DEVICE_COLUMNS)) for d, f in self.devices.items()])
        if self.streams:
            data["TARGET_INFO_CUDA_STREAM"] = (
                ("streamId", "processId", "contextId", "priority", "flag"),
                [(s, p, ctx, prio, flag) for (p, s), (ctx, flag, prio) in self.streams.items()])
            device_of = {(p, ctx): d for (p, d), ctx in self.contexts.items()}
            legacy = [(s, p, device_of[(p, ctx)], ctx)
                      for (p, s), (ctx, flag, _) in self.streams.items() if flag == FLAG_NULL]
            if legacy:
                data["TARGET_INFO_CUDA_CONTEXT_INFO"] = (
                    ("nullStreamId", "processId", "deviceId", "contextId"), legacy)
        for table, members in ENUMS.items():
            data[table] = (("id", "name", "label"), [(k, *v) for k, v in members.items()])
        data["StringIds"] = (("id", "value"), [(i, s) for s, i in strings.items()])
        # An export's marker (the loader requires one), naming no nsys version.
        data["META_DATA_EXPORT"] = (("name", "value"),
                                    [("EXPORT_PRODUCT_VERSION", "gpugap TraceBuilder")])
        with sqlite3.connect(path) as conn:
            for table, (columns, rows) in data.items():
                types = ", ".join(f'"{c}" {"TEXT" if c in _TEXT else "INTEGER"}'
                                  for c in columns)
                conn.execute(f'CREATE TABLE "{table}" ({types})')
                conn.executemany(f'INSERT INTO "{table}" VALUES '
                                 f'({", ".join("?" * len(columns))})', rows)
        conn.close()
        return [t for t in data if t != "META_DATA_EXPORT"]

