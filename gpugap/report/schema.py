"""Every nsys table and column gpugap reads, declared once.

One line per column: nsys's name for it (and the names other nsys versions use), the
name gpugap gives it, what it holds, what it reads as when missing, the values it may
take, and which exports have it. Everything else is derived from these lines:

- the reads (gpugap.report.columns: the SQL of each column, its fill and dtype);
- the schema check (``SCHEMA``, ``REQUIRED``: presence and declared types, once per
  report) and the fuzz test's mutations;
- the frames' columns and their dtypes (``frame_columns``: the loader's empty frames,
  gpugap.report.trace's defaults);
- validation: the bounds each value is clamped, zeroed or dropped at
  (gpugap.report.loader applies ``bounds`` in declaration order);
- the in-memory builder (gpugap.report.builder writes each declared column of the GPU
  tables, by gpugap's name, with its ``default`` unless given);
- benchmarks/run.py's floor (it scans every declared column).

Adding an nsys column is one line here (see docs/architecture.md, "Adding an nsys
column") and a test. Free of pandas: reading starts before pandas is imported
(gpugap.report.prefetch).
"""

from __future__ import annotations

from gpugap.report.validate import MAX_BYTES, MAX_DEVICE, MAX_GTID, MAX_ID

TIME_FILL = -1      # what a NULL or non-integer time reads as: invalid (times are > 0)
ID_FILL = -1        # ... an id: invalid (ids are >= 0), repaired or dropped

# What a column holds, in the export (the first word) and in the frame:
#   time   int, ns on the session clock; validated with its row (validate.time_mask)
#   int    an integer (an id, a size, a count)
#   pid    the process id decoded (masked) from nsys's serialized globalPid
#   name   an id into StringIds; the frame holds the string (a categorical)
#   enum   an id into the ENUM_* table ``enum``; the frame holds its label
#   text   a string, cut at MAX_NAME characters
KINDS = ("time", "int", "pid", "name", "enum", "text")


class Column:
    """One column of an nsys table, as gpugap reads it.

    nsys: nsys's name; ``alt``: the names it has in other versions (or a column that
    stands in for it), tried in order when ``nsys`` is absent.
    name: gpugap's name: the frame column, or the read's column (``name + "_id"`` for
    ``name``/``enum`` kinds, which the loader turns into strings); "": not read.
    frame: whether the column stays in the frame (False: the loader uses it and drops
    it, or only a query reads it).
    dtype: the narrowest integer type the reader stores it in (gpugap.report.reader).
    fill: what a NULL or a value that is not an integer reads as.
    default: what it reads as when the table lacks it (None: ``fill``).
    bounds: (lo, hi) of a valid value, and ``invalid``: what becomes of one outside
    them: "clamp" to the bounds, "zero" (an id: 0, unknown), "drop" the row,
    "default" (the column's ``default``).
    required: without it the table is skipped, as if absent (with a warning).
    enum: the ENUM_* table of an ``enum`` column; label: how a problem line names it
    (default: its name); versions: which exports have it, where not all do.

    A plain class, not a dataclass: generating a dataclass's methods costs milliseconds
    at import, on the path that starts reading a report before pandas is imported.
    """

    __slots__ = ("nsys", "name", "kind", "alt", "frame", "dtype", "fill", "default",
                 "bounds", "invalid", "required", "enum", "label", "versions")

    def __init__(self, nsys: str, name: str = "", kind: str = "int", *,
                 alt: tuple[str, ...] = (), frame: bool = True, dtype: str = "int64",
                 fill: int = ID_FILL, default: int | None = None,
                 bounds: tuple[int, int] | None = None, invalid: str = "clamp",
                 required: bool = False, enum: str = "", label: str = "",
                 versions: str = "") -> None:
        assert kind in KINDS, kind
        self.nsys, self.name, self.kind, self.alt = nsys, name, kind, alt
        self.frame, self.dtype, self.fill, self.default = frame, dtype, fill, default
        self.bounds, self.invalid, self.required = bounds, invalid, required
        self.enum, self.label, self.versions = enum, label, versions

    def __repr__(self) -> str:
        return f"Column({self.nsys!r}, {self.name!r}, {self.kind!r})"

    @property
    def read_as(self) -> str:
        """The name of the column in what the reader returns ("": not read)."""
        if not self.name:
            return ""
        return self.name + "_id" if self.kind in ("name", "enum") else self.name

    @property
    def frame_dtype(self) -> str:
        """The dtype of the frame column (an empty frame's: the reader may narrow)."""
        return "str" if self.kind in ("name", "enum", "text") else "int64"

    @property
    def candidates(self) -> tuple[str, ...]:
        return (self.nsys, *self.alt)

    @property
    def export_type(self) -> str:
        """What the export must hold: "int" or "text" (declared type, checked once)."""
        return "text" if self.kind == "text" else "int"


class Table:
    """An nsys table: its columns in reading order, how problem lines name its rows
    (``what``), the frame columns the loader adds (``derived``, name -> dtype), the
    frame's column order where it differs from the reading order (``order``), and
    whether the schema check names it when a required column is missing (``checked``;
    else the read that needs the column checks, and the table is quietly left out)."""

    __slots__ = ("name", "columns", "what", "derived", "order", "versions", "checked")

    def __init__(self, name: str, columns: tuple[Column, ...], what: str = "", *,
                 derived: tuple[tuple[str, str], ...] = (), order: tuple[str, ...] = (),
                 versions: str = "", checked: bool = True) -> None:
        self.name, self.columns, self.what = name, columns, what
        self.derived, self.order, self.versions, self.checked = (derived, order, versions,
                                                                 checked)

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    def column(self, name: str) -> Column:
        """The column gpugap calls *name*."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} declares no column {name!r}")

    @property
    def required(self) -> tuple[str, ...]:
        """The nsys names of the columns it cannot be read without."""
        return tuple(c.nsys for c in self.columns if c.required)

    def read(self) -> tuple[Column, ...]:
        """The columns gpugap reads by its own name (those with a ``name``)."""
        return tuple(c for c in self.columns if c.name)


def _gpu(*extra: Column, context: bool = True) -> tuple[Column, ...]:
    """The columns every GPU activity table shares, then *extra* (*context*: whether
    the frame keeps the context id)."""
    return (Column("start", "start", "time", fill=TIME_FILL, required=True),
            Column("end", "end", "time", fill=TIME_FILL, required=True),
            Column("deviceId", "device", dtype="int32", default=0,
                   bounds=(0, MAX_DEVICE - 1), invalid="drop"),
            Column("contextId", "context", dtype="int32", default=0, bounds=(0, MAX_ID),
                   invalid="zero", frame=context),
            Column("streamId", "stream", dtype="int32", default=0, bounds=(0, MAX_ID),
                   invalid="zero"),
            Column("correlationId", "corr", dtype="int32", default=0, bounds=(0, MAX_ID),
                   invalid="zero"),
            Column("globalPid", "pid", "pid", dtype="int32", default=0, fill=0),
            *extra)


# The columns every GPU activity table begins with.
GPU_SHARED: tuple[Column, ...] = _gpu()


def own_columns(table: Table) -> tuple[Column, ...]:
    """A GPU activity table's columns after the shared ones (GPU_SHARED)."""
    return table.columns[len(GPU_SHARED):]


def _enum(name: str) -> Table:
    return Table(name, (Column("id"), Column("name", kind="text"),
                        Column("label", kind="text")),
                 versions="always written, even by a lazy export")


def _pairs(name: str, versions: str = "") -> Table:
    return Table(name, (Column("name", kind="text"), Column("value", kind="text")),
                 versions=versions)


def _limit(nsys: str, name: str, default: int, hi: int, *alt: str) -> Column:
    """A device limit: a positive integer; absent or out of range, the default (a
    Hopper-class GPU's)."""
    return Column(nsys, name, alt=alt, default=default, bounds=(1, hi), invalid="default")


# --- the GPU activity tables ------------------------------------------------------------
KERNEL = Table("CUPTI_ACTIVITY_KIND_KERNEL", _gpu(
    # The short name ("gemm_kernel") for display, and the full demangled signature
    # ("void gemm_kernel<float, 128>(float const*, ...)") that tells instances apart.
    Column("shortName", "name", "name", alt=("demangledName",), dtype="int32"),
    Column("demangledName", "demangled", "name", alt=("shortName",), dtype="int32"),
    # Launch sizes: CUDA's own limits; sizes and sums of them stay in range.
    Column("gridX", "grid_x", dtype="int32", default=1, bounds=(1, 2**31 - 1)),
    Column("gridY", "grid_y", dtype="int32", default=1, bounds=(1, 65535)),
    Column("gridZ", "grid_z", dtype="int32", default=1, bounds=(1, 65535)),
    Column("blockX", "block_x", dtype="int32", default=1, bounds=(1, 1024)),
    Column("blockY", "block_y", dtype="int32", default=1, bounds=(1, 1024)),
    Column("blockZ", "block_z", dtype="int32", default=1, bounds=(1, 64)),
    Column("registersPerThread", "registers", dtype="int32", default=0, bounds=(0, 255)),
    Column("staticSharedMemory", "shared_static", dtype="int32", default=0,
           bounds=(0, 2**31 - 1)),
    Column("dynamicSharedMemory", "shared_dynamic", dtype="int32", default=0,
           bounds=(0, 2**31 - 1)),
    # The CUDA graph node a kernel ran as (node-level graph tracing); NULL: not from one.
    Column("graphNodeId", "graph_node", versions="schema 3.7+ (nsys 2023.4 on); not 3.1.7"),
    ), what="kernels", derived=(("blocks", "int64"), ("threads_per_block", "int64")))

MEMCPY = Table("CUPTI_ACTIVITY_KIND_MEMCPY", _gpu(
    Column("bytes", "bytes", default=0, bounds=(0, MAX_BYTES)),
    Column("copyKind", "kind", "enum", enum="ENUM_CUDA_MEMCPY_OPER", dtype="int32"),
    Column("srcKind", "src_kind", "enum", enum="ENUM_CUDA_MEM_KIND", dtype="int32"),
    Column("dstKind", "dst_kind", "enum", enum="ENUM_CUDA_MEM_KIND", dtype="int32"),
    # The devices of a peer copy (NULL, read as -1, for the others).
    Column("srcDeviceId", "src_device", dtype="int32"),
    Column("dstDeviceId", "dst_device", dtype="int32"),
    ), what="memory copies")

MEMSET = Table("CUPTI_ACTIVITY_KIND_MEMSET", _gpu(
    Column("bytes", "bytes", default=0, bounds=(0, MAX_BYTES)),
    Column("memKind", "mem_kind", "enum", enum="ENUM_CUDA_MEM_KIND", dtype="int32"),
    ), what="memsets")

SYNC = Table("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", _gpu(
    Column("syncType", "sync_type", "enum", alt=("deprecatedSyncType",),
           enum="ENUM_CUPTI_SYNC_TYPE", dtype="int32",
           versions="deprecatedSyncType beside it in 2025.x; the only one in older ones"),
    # The CUDA event waited for (CUPTI's 0xFFFFFFFF: none, read as -1).
    Column("eventId", "event"),
    # Which record of the event: read by the cross-GPU event waits only.
    Column("eventSyncId", "sync", frame=False),
    context=False), what="synchronizations")

# One row per CUDA graph execution (graph-level tracing, nsys's default): its nodes are
# not listed, the graph runs as one unit on its stream.
GRAPH = Table("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", _gpu(
    Column("graphId", "graph_id", dtype="int32", default=0, bounds=(0, MAX_ID),
           invalid="zero"),
    Column("graphExecId", "graph_exec_id", dtype="int32", default=0, bounds=(0, MAX_ID),
           invalid="zero"),
    ), what="CUDA graph executions", derived=(("nodes", "int64"),))

# One row per cudaEventRecord that the GPU executed: where (device, context, stream) and
# which record of which event (eventId, eventSyncId) a stream-wait sync waited for.
EVENT = Table("CUPTI_ACTIVITY_KIND_CUDA_EVENT", (
    Column("deviceId", "device", dtype="int32", required=True),
    Column("contextId", "context", dtype="int32", default=0),
    Column("streamId"),
    Column("globalPid", "pid", "pid", dtype="int32", default=0, fill=0),
    Column("eventId", "event", required=True),
    Column("eventSyncId", "sync", required=True),
    ), checked=False)

# --- the host ---------------------------------------------------------------------------
RUNTIME = Table("CUPTI_ACTIVITY_KIND_RUNTIME", (
    Column("start", "start", "time", fill=TIME_FILL, required=True),
    Column("end", "end", "time", fill=TIME_FILL, required=True),
    # Runtime or driver call (ENUM_NSYS_EVENT_CLASS): exports with no driver table.
    Column("eventClass", "driver", dtype="int8", default=0),
    Column("globalTid", "gtid", default=0, bounds=(0, MAX_GTID), invalid="zero",
           label="thread"),
    Column("correlationId", "corr", dtype="int32", default=0, bounds=(0, MAX_ID),
           invalid="zero"),
    Column("nameId", "name", "name", dtype="int32"),
    ), what="CUDA API calls", derived=(("driver", "bool"), ("pid", "int64"),
                                       ("tid", "int64"), ("per_thread", "bool")),
    order=("start", "end", "gtid", "pid", "tid", "corr", "name", "driver", "per_thread"))

DRIVER = Table("CUPTI_ACTIVITY_KIND_DRIVER", tuple(
    c for c in RUNTIME.columns if c.nsys != "eventClass"), what="CUDA API calls",
    versions="old exports only (later: rows of CUPTI_ACTIVITY_KIND_RUNTIME)")

NVTX = Table("NVTX_EVENTS", (
    Column("start", "start", "time", fill=TIME_FILL, required=True),
    # NULL or not an integer: a range never closed.
    Column("end", "end", "time", fill=TIME_FILL),
    Column("eventType", "type", required=True, frame=False),
    Column("text", "text", "text", frame=False),
    # The registered string (nvtx's Python package): text NULL, name in textId.
    Column("textId", "text_id", frame=False),
    Column("domainId", "domain_id", default=0, bounds=(0, MAX_ID), invalid="zero",
           label="domain", frame=False),
    Column("globalTid", "gtid", default=0, bounds=(0, MAX_GTID), invalid="zero",
           label="thread"),
    ), what="NVTX ranges",
    derived=(("name", "str"), ("domain", "str"), ("pid", "int64"), ("tid", "int64"),
             ("depth", "int64"), ("library", "bool"), ("kind", "str")),
    order=("start", "end", "name", "domain", "gtid", "pid", "tid", "depth", "library",
           "kind"))

OSRT = Table("OSRT_API", (
    Column("start", "start", "time", fill=TIME_FILL, required=True),
    Column("end", "end", "time", fill=TIME_FILL, required=True),
    Column("globalTid", "gtid", default=0, bounds=(0, MAX_GTID), invalid="zero",
           label="thread"),
    Column("nameId", "name", "name", dtype="int32", required=True),
    # The call's stack (OSRT_CALLCHAINS.id; NULL: none, a short call): gpugap.report.host.
    Column("callchainId", "callchain", default=-1, frame=False),
    ), what="OS runtime calls")

# --- the host's own evidence (gpugap.report.host reads it on demand) ----------------------
# CPU samples (nsys --sample=process-tree): one row per sample of a running thread.
SAMPLES = Table("COMPOSITE_EVENTS", (
    Column("id", "id", required=True),
    Column("start", "start", "time", fill=TIME_FILL, required=True),
    Column("globalTid", "gtid", default=0, bounds=(0, MAX_GTID), invalid="zero",
           label="thread"),
    Column("cpu", "cpu", dtype="int32", default=-1),
    Column("threadState", "state", "enum", enum="ENUM_SAMPLING_THREAD_STATE", dtype="int8",
           default=0),
    ), what="CPU samples", versions="with --sample; nsys 2023.4 and 2025.3 alike")


def _callchain(name: str, what: str) -> Table:
    """A table of stack frames: a row per frame of the stack *id*, depth 0 the
    innermost; function and module as StringIds."""
    return Table(name, (Column("id", "id", required=True),
                        Column("stackDepth", "depth", dtype="int32", required=True),
                        Column("symbol", "symbol", "name", dtype="int32"),
                        Column("module", "module", "name", dtype="int32")), what=what)


SAMPLE_STACKS = _callchain("SAMPLING_CALLCHAINS", "CPU sample frames")
OSRT_STACKS = _callchain("OSRT_CALLCHAINS", "OS runtime call frames")
# The payload of an NVTX mark (a BLOB: a Python sample's frames, where the export kept
# it), read by gpugap.report.host.
NVTX_PAYLOAD = "binaryData"
# NVTX extended payloads: the layout of a mark's binaryData (a struct per schema; an
# entry is a field: its type, a schema id for a nested struct, its offset).
PAYLOAD_SCHEMAS = Table("NVTX_PAYLOAD_SCHEMAS", (
    Column("domainId", "domain_id", required=True),
    Column("schemaId", "schema", required=True),
    Column("name", "name", "text"),
    Column("payloadSize", "size", default=0),
    ), versions="nsys 2024 on (not 2023.4)")
PAYLOAD_ENTRIES = Table("NVTX_PAYLOAD_SCHEMA_ENTRIES", (
    Column("domainId", "domain_id", required=True),
    Column("schemaId", "schema", required=True),
    Column("idx", "index", required=True),
    Column("flags", "flags", default=0),
    Column("type", "type", required=True),
    Column("name", "name", "text"),
    Column("arrayOrUnionDetail", "detail", default=0),
    Column("offset", "offset", default=0),
    ), versions="nsys 2024 on (not 2023.4)")

STRINGS = Table("StringIds", (Column("id", "id", required=True),
                              Column("value", "value", "text", required=True)))
THREADS = Table("ThreadNames", (Column("nameId", "name", "name", required=True),
                                Column("globalTid", "gtid", required=True)),
                derived=(("pid", "int64"), ("tid", "int64")),
                order=("gtid", "pid", "tid", "name"))
PROCESSES = Table("PROCESSES", (Column("pid", "pid", required=True),
                                Column("name", "name", "text", required=True)),
                  checked=False)

# --- the devices and streams ------------------------------------------------------------
GPUS = Table("TARGET_INFO_GPU", (
    Column("id", "device", required=True),
    Column("name", "name", "text"),
    # Limits for occupancy: (default, largest valid value).
    _limit("smCount", "sm_count", 132, 4096),
    _limit("maxWarpsPerSm", "max_warps_per_sm", 64, 4096),
    _limit("threadsPerWarp", "warp_size", 32, 1024),
    _limit("maxBlocksPerSm", "max_blocks_per_sm", 32, 4096),
    _limit("maxRegistersPerSm", "max_regs_per_sm", 65536, 2**31 - 1),
    _limit("maxRegistersPerBlock", "max_regs_per_block", 65536, 2**31 - 1),
    _limit("maxShmemPerSm", "max_shmem_per_sm", 233472, 2**40),
    _limit("maxShmemPerBlockOptin", "max_shmem_per_block", 232448, 2**40,
           "maxShmemPerBlock"),
    Column("computeMajor", "cc_major", alt=("smMajor",)),
    Column("computeMinor", "cc_minor", alt=("smMinor",)),
    Column("totalMemory", "memory_bytes"),
    Column("clockRate", "clock_hz"),
    Column("busLocation", "bus", "text"),
    Column("uuid", "uuid", "text"),
    Column("chipName", "chip", "text"),
    ), checked=False)

STREAMS = Table("TARGET_INFO_CUDA_STREAM", (
    Column("processId", "pid", required=True),
    Column("streamId", "stream", required=True),
    Column("contextId", "context", default=0),
    # ENUM_CUPTI_STREAM_TYPE: default, non-blocking, or the legacy NULL stream; the
    # frame holds its label and whether it is the legacy one.
    Column("flag", "flag_id", frame=False),
    Column("priority", "priority", fill=0),
    ), derived=(("flag", "str"), ("legacy_default", "bool")),
    order=("pid", "stream", "context", "flag", "priority", "legacy_default"), checked=False)
# The legacy NULL stream of each context, from whichever table the version writes.
CONTEXTS = Table("TARGET_INFO_CUDA_CONTEXT_INFO", (
    Column("processId", "pid", required=True),
    Column("nullStreamId", "stream", required=True),
    Column("contextId", "context", default=0),
    ), versions="schema 3.7+ (nsys 2023.4 on)", checked=False)
NULL_STREAMS = Table("TARGET_INFO_CUDA_NULL_STREAM", (
    Column("processId", "pid", required=True),
    Column("streamId", "stream", required=True),
    Column("contextId", "context", default=0),
    ), versions="schema 3.1.7 (nsys 2023.2); replaced by TARGET_INFO_CUDA_CONTEXT_INFO",
    checked=False)

# --- the report itself ------------------------------------------------------------------
CAPTURE = Table("ANALYSIS_DETAILS", (Column("startTime", required=True),
                                     Column("stopTime", required=True)))

TABLES: tuple[Table, ...] = (
    KERNEL, MEMCPY, MEMSET, SYNC, EVENT, GRAPH, RUNTIME, DRIVER, NVTX, OSRT, STRINGS,
    THREADS, PROCESSES, GPUS, STREAMS, CONTEXTS, NULL_STREAMS,
    SAMPLES, SAMPLE_STACKS, OSRT_STACKS, PAYLOAD_SCHEMAS, PAYLOAD_ENTRIES,
    _pairs("TARGET_INFO_SYSTEM_ENV"), CAPTURE,
    _pairs("META_DATA_EXPORT", "nsys 2023.4 on"),
    _pairs("EXPORT_META_DATA", "nsys 2023.2 (schema 3.1.7)"),
    _pairs("META_DATA_CAPTURE", "nsys 2023.4 on"),
    _enum("ENUM_CUDA_MEMCPY_OPER"), _enum("ENUM_CUDA_MEM_KIND"),
    _enum("ENUM_CUPTI_SYNC_TYPE"), _enum("ENUM_CUPTI_STREAM_TYPE"),
    _enum("ENUM_NSYS_EVENT_TYPE"), _enum("ENUM_NSYS_EVENT_CLASS"),
    _enum("ENUM_SAMPLING_THREAD_STATE"),
)
BY_NAME = {t.name: t for t in TABLES}


def _schema(table: Table) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in table.columns:
        for n in c.candidates:
            out.setdefault(n, c.export_type)
    return out


# Every table and column gpugap reads, and what each must hold ("int": an integer,
# "text": a string). Checked once when a report is opened (columns.check_schema): a
# column missing here is never named in SQL, a declared type that disagrees is a
# warning, and every value is validated as it is read (see gpugap.report.validate).
SCHEMA: dict[str, dict[str, str]] = {t.name: _schema(t) for t in TABLES}
# Without these a table is skipped (as if absent), with a warning.
REQUIRED: dict[str, tuple[str, ...]] = {t.name: t.required for t in TABLES
                                         if t.checked and t.required}
# Names read only when the column they stand in for is absent: table -> {alt: primary}.
FALLBACKS: dict[str, dict[str, str]] = {
    t.name: {a: c.nsys for c in t.columns for a in c.alt
             if a not in {d.nsys for d in t.columns}}
    for t in TABLES}


def frame_columns(table: Table) -> dict[str, str]:
    """The frame the loader makes of *table*: column -> dtype ("int64", "str", "bool"),
    in the frame's order (a derived column's dtype wins over the read one's)."""
    cols = {c.name: c.frame_dtype for c in table.columns if c.name and c.frame}
    cols |= dict(table.derived)
    return {c: cols[c] for c in table.order} if table.order else cols


# The CUDA call that launched a GPU op (joined by correlation id; -1, NO_CALL, where
# none matched): every GPU op frame has these too.
LAUNCH_COLUMNS = {"api_start": "int64", "api_end": "int64", "gtid": "int64",
                  "api_name": "str"}


# --- the enums --------------------------------------------------------------------------
# nsys's enum members gpugap uses (the ENUM_* tables of an nsys 2025.3 export): table ->
# {id: (name, label)}. The loader looks each id up by name in the report's own table;
# these ids stand in only where a report lacks the table; the builder writes them.
ENUMS: dict[str, dict[int, tuple[str, str]]] = {
    "ENUM_CUDA_MEMCPY_OPER": {
        1: ("CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        2: ("CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        8: ("CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        9: ("CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        10: ("CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer")},
    "ENUM_CUDA_MEM_KIND": {k: (f"CUDA_MEMOPR_MEMORY_KIND_{v.upper().replace(' ', '_')}", v)
                           for k, v in enumerate(("Pageable", "Pinned", "Device", "Array",
                                                  "Managed", "Device Static",
                                                  "Managed Static", "Unknown"))},
    "ENUM_CUPTI_SYNC_TYPE": {k: (f"CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_{n}", v) for k, (n, v)
                             in enumerate((("UNKNOWN", "Unknown"),
                                           ("EVENT_SYNCHRONIZE", "Event sync"),
                                           ("STREAM_WAIT_EVENT", "Stream wait sync"),
                                           ("STREAM_SYNCHRONIZE", "Stream sync"),
                                           ("CONTEXT_SYNCHRONIZE", "Context sync")))},
    "ENUM_CUPTI_STREAM_TYPE": {
        1: ("CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT", "Default stream"),
        2: ("CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING", "Non-blocking stream"),
        3: ("CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL", "Null stream")},
    "ENUM_NSYS_EVENT_TYPE": {n: (name, name) for n, name in (
        (34, "NvtxMark"), (59, "NvtxPushPopRange"), (60, "NvtxStartEndRange"),
        (70, "NvtxtPushPopRange"),
        (71, "NvtxtStartEndRange"), (75, "NvtxDomainCreate"))},
    "ENUM_NSYS_EVENT_CLASS": {0: ("TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
                              1: ("TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver")},
}


# How the loader names the NVTX ranges of each ENUM_NSYS_EVENT_TYPE member it reads.
# NVTX domains nsys writes itself, not the program: the GIL trace (-t python-gil: ranges
# 'Holding GIL' / 'Waiting for GIL' on every Python thread) and the Python samples
# (--python-sampling, --python-backtrace: marks whose payload holds the stack; 2023.4
# names the periodic one 'Python Backtrace'). Not read as NVTX ranges: gpugap.report.host
# reads them as the host's evidence.
GIL_DOMAIN = "GIL Trace"
PYTHON_SAMPLE_DOMAINS = ("Python Periodic Sampling", "Python Backtrace on CUDA",
                         "Python Backtrace")
INSTRUMENTATION_DOMAINS = (GIL_DOMAIN, *PYTHON_SAMPLE_DOMAINS)
GIL_HOLDING, GIL_WAITING = "Holding GIL", "Waiting for GIL"

NVTX_KINDS = {"NvtxPushPopRange": "push/pop", "NvtxStartEndRange": "start/end",
              "NvtxtPushPopRange": "push/pop", "NvtxtStartEndRange": "start/end"}
NVTX_DOMAIN_CREATE = "NvtxDomainCreate"       # the row that names a domain
NVTX_MARK = "NvtxMark"                        # a mark (a Python sample)


def enum_fallback(table: str, name: str) -> int:
    """The id nsys 2025.3 gives enum member *name* of *table* (ENUMS)."""
    for k, (n, _) in ENUMS[table].items():
        if n == name:
            return k
    raise KeyError(f"{table} declares no member {name!r}")
