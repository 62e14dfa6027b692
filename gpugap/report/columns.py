"""What gpugap reads from the big tables of an nsys export, as reader columns.

Kept apart from the loader and free of pandas, so that reading can begin before pandas is
imported (gpugap.report.prefetch); the loader builds its frames from the same reads.
Every table and column is optional: a missing column reads as a documented default.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpugap.report.database import Database, quote_id
from gpugap.report.reader import Col
from gpugap.report.validate import MAX_NAME

# Serialized GlobalId: (hw/vm << 48) | (pid << 24) | tid. The high bits vary by version,
# so decode pid/tid by masking, never by position of the high byte.
PID_SHIFT, ID_MASK = 24, 0xFFFFFF

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPYS = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSETS = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNCS = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
# One row per CUDA graph execution (graph-level tracing, nsys's default): its nodes are
# not listed, the graph runs as one unit on its stream.
GRAPHS = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
# One row per cudaEventRecord that the GPU executed: where (device, context, stream) and
# which record of which event (eventId, eventSyncId) a stream-wait sync waited for.
EVENTS = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
API_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")

_GPU = {"start": "int", "end": "int", "deviceId": "int", "contextId": "int",
        "streamId": "int", "correlationId": "int", "globalPid": "int"}
_ENUM = {"id": "int", "name": "text", "label": "text"}
# Every table and column gpugap reads, and what each must hold ("int": an integer,
# "text": a string). Checked once when a report is opened (Loader.check_schema): a column
# missing here is never named in SQL, a declared type that disagrees is a warning, and
# every value is validated as it is read (see gpugap.report.validate).
SCHEMA: dict[str, dict[str, str]] = {
    KERNELS: _GPU | {
        "shortName": "int", "demangledName": "int", "gridX": "int", "gridY": "int",
        "gridZ": "int", "blockX": "int", "blockY": "int", "blockZ": "int",
        "registersPerThread": "int", "staticSharedMemory": "int",
        "dynamicSharedMemory": "int", "graphNodeId": "int"},
    MEMCPYS: _GPU | {"bytes": "int", "copyKind": "int", "srcKind": "int", "dstKind": "int",
                     "srcDeviceId": "int", "dstDeviceId": "int"},
    MEMSETS: _GPU | {"bytes": "int", "memKind": "int"},
    SYNCS: _GPU | {"syncType": "int", "deprecatedSyncType": "int", "eventId": "int",
                   "eventSyncId": "int"},
    EVENTS: {"deviceId": "int", "contextId": "int", "streamId": "int", "globalPid": "int",
             "eventId": "int", "eventSyncId": "int"},
    GRAPHS: _GPU | {"graphId": "int", "graphExecId": "int"},
    "CUPTI_ACTIVITY_KIND_RUNTIME": {"start": "int", "end": "int", "eventClass": "int",
                                    "globalTid": "int", "correlationId": "int",
                                    "nameId": "int"},
    "CUPTI_ACTIVITY_KIND_DRIVER": {"start": "int", "end": "int", "globalTid": "int",
                                   "correlationId": "int", "nameId": "int"},
    "NVTX_EVENTS": {"start": "int", "end": "int", "eventType": "int", "text": "text",
                    "textId": "int", "domainId": "int", "globalTid": "int"},
    "OSRT_API": {"start": "int", "end": "int", "globalTid": "int", "nameId": "int"},
    "StringIds": {"id": "int", "value": "text"},
    "ThreadNames": {"nameId": "int", "globalTid": "int"},
    "PROCESSES": {"pid": "int", "name": "text"},
    "TARGET_INFO_GPU": {
        "id": "int", "name": "text", "smCount": "int", "maxWarpsPerSm": "int",
        "threadsPerWarp": "int", "maxBlocksPerSm": "int", "maxRegistersPerSm": "int",
        "maxRegistersPerBlock": "int", "maxShmemPerSm": "int",
        "maxShmemPerBlockOptin": "int", "maxShmemPerBlock": "int", "computeMajor": "int",
        "computeMinor": "int", "smMajor": "int", "smMinor": "int", "totalMemory": "int",
        "clockRate": "int", "busLocation": "text", "uuid": "text", "chipName": "text"},
    "TARGET_INFO_CUDA_STREAM": {"processId": "int", "streamId": "int", "contextId": "int",
                                "flag": "int", "priority": "int"},
    "TARGET_INFO_CUDA_CONTEXT_INFO": {"processId": "int", "nullStreamId": "int",
                                      "contextId": "int"},
    "TARGET_INFO_CUDA_NULL_STREAM": {"processId": "int", "streamId": "int",
                                     "contextId": "int"},
    "TARGET_INFO_SYSTEM_ENV": {"name": "text", "value": "text"},
    "ANALYSIS_DETAILS": {"startTime": "int", "stopTime": "int"},
    "META_DATA_EXPORT": {"name": "text", "value": "text"},
    "EXPORT_META_DATA": {"name": "text", "value": "text"},
    "META_DATA_CAPTURE": {"name": "text", "value": "text"},
    "ENUM_CUDA_MEMCPY_OPER": _ENUM, "ENUM_CUDA_MEM_KIND": _ENUM,
    "ENUM_CUPTI_SYNC_TYPE": _ENUM, "ENUM_CUPTI_STREAM_TYPE": _ENUM,
    "ENUM_NSYS_EVENT_TYPE": _ENUM, "ENUM_NSYS_EVENT_CLASS": _ENUM,
}


# Without these a table is skipped (as if absent), with a warning.
REQUIRED: dict[str, tuple[str, ...]] = {
    KERNELS: ("start", "end"), MEMCPYS: ("start", "end"), MEMSETS: ("start", "end"),
    SYNCS: ("start", "end"), GRAPHS: ("start", "end"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end"),
    "CUPTI_ACTIVITY_KIND_DRIVER": ("start", "end"), "OSRT_API": ("start", "end", "nameId"),
    "NVTX_EVENTS": ("start", "eventType"), "StringIds": ("id", "value"),
    "ThreadNames": ("nameId", "globalTid"), "ANALYSIS_DETAILS": ("startTime", "stopTime"),
}
TIME_FILL = -1      # what a NULL or non-integer time reads as: invalid (times are > 0)
ID_FILL = -1        # ... an id: invalid (ids are >= 0), repaired or dropped


def usable(db: Database, table: str) -> bool:
    """Whether *table* is there with every column gpugap cannot do without."""
    return table in db.tables and db.has(table, *REQUIRED.get(table, ()))


def check_schema(db: Database) -> list[str]:
    """Presence and declared type of every column gpugap reads, once per report: one
    line per table that lacks a required column (it is skipped) and per column declared
    with a type other than the one it must hold (its values are still checked one by
    one as they are read)."""
    lines = []
    for table, columns in SCHEMA.items():
        if table not in db.tables:
            continue
        have = db.columns(table)
        missing = [c for c in REQUIRED.get(table, ()) if c not in have]
        if missing:
            lines.append(f"{table} lacks column(s) {', '.join(missing)}: table ignored")
            continue
        wrong = []
        for c, kind in columns.items():
            declared = db.declared_type(table, c).upper() if c in have else ""
            if not declared:
                continue            # no declared type: values are checked as read
            if (kind == "int") != ("INT" in declared):
                wrong.append(f"{c} {declared or 'untyped'}")
        if wrong:
            lines.append(f"{table} declares {', '.join(wrong)}, not the type gpugap "
                         "expects: values of another type are treated as missing")
    return lines


def int_sql(expr: str, fill: int) -> str:
    """SQL: *expr* when it is an integer, else *fill* (NULL, text, BLOB, REAL)."""
    return f"CASE WHEN typeof({expr}) = 'integer' THEN {expr} ELSE {int(fill)} END"


def text_sql(expr: str) -> str:
    """SQL: *expr* cut to MAX_NAME characters when it is text, else NULL."""
    return f"CASE WHEN typeof({expr}) = 'text' THEN substr({expr}, 1, {MAX_NAME}) END"


def text_flags_sql(expr: str) -> str:
    """SQL: 1 when *expr* is neither text nor NULL (a BLOB, a number), 2 when it is text
    longer than MAX_NAME characters, else 0."""
    return (f"(CASE WHEN typeof({expr}) NOT IN ('text', 'null') THEN 1 "
            f"WHEN typeof({expr}) = 'text' AND length({expr}) > {MAX_NAME} THEN 2 "
            "ELSE 0 END)")


@dataclass(frozen=True)
class Read:
    table: str
    cols: tuple[Col, ...]
    where: str = ""

    def run(self, db: Database) -> dict:
        return db.read(self.table, list(self.cols), self.where)


def column(db: Database, table: str, *candidates: str, default: str = "NULL") -> str:
    """The first of *candidates* that *table* has, quoted, else *default* (SQL)."""
    have = db.columns(table)
    for c in candidates:
        if c in have:
            return quote_id(c)
    return default


def gpu_read(db: Database, table: str, extra: list[Col]) -> Read | None:
    """GPU activity rows: start, end, device, context, stream, corr, pid, then *extra*
    (None when the table is not usable). Times and ids read as TIME_FILL / ID_FILL when
    NULL or not integers: the loader drops or repairs those rows (validate.py)."""
    if not usable(db, table):
        return None
    gpid = column(db, table, "globalPid", default="0")
    base = [Col("start", '"start"', fill=TIME_FILL), Col("end", '"end"', fill=TIME_FILL),
            Col("device", column(db, table, "deviceId", default="0"), fill=ID_FILL,
                dtype="int32"),
            Col("context", column(db, table, "contextId", default="0"), fill=ID_FILL,
                dtype="int32"),
            Col("stream", column(db, table, "streamId", default="0"), fill=ID_FILL,
                dtype="int32"),
            Col("corr", column(db, table, "correlationId", default="0"), fill=ID_FILL,
                dtype="int32"),
            # The process id, decoded in SQL: the serialized id itself is not needed.
            Col("pid", f"((ifnull({gpid}, 0) >> {PID_SHIFT}) & {ID_MASK})", dtype="int32")]
    return Read(table, tuple(base + extra))


def kernel_read(db: Database) -> Read | None:
    t = KERNELS
    if not usable(db, t):
        return None
    # (name, column, default, narrowest type): sizes and sums of them stay in range.
    dims = [("grid_x", "gridX", "1", "int32"), ("grid_y", "gridY", "1", "int32"),
            ("grid_z", "gridZ", "1", "int32"), ("block_x", "blockX", "1", "int32"),
            ("block_y", "blockY", "1", "int32"), ("block_z", "blockZ", "1", "int32"),
            ("registers", "registersPerThread", "0", "int32"),
            ("shared_static", "staticSharedMemory", "0", "int32"),
            ("shared_dynamic", "dynamicSharedMemory", "0", "int32")]
    # The short name ("gemm_kernel") for display, and the full demangled signature
    # ("void gemm_kernel<float, 128>(float const*, ...)") that tells instances apart.
    extra = ([Col("name_id", column(db, t, "shortName", "demangledName"), fill=-1,
                  dtype="int32"),
              Col("demangled_id", column(db, t, "demangledName", "shortName"), fill=-1,
                  dtype="int32")]
             + [Col(name, column(db, t, col, default=default), fill=ID_FILL, dtype=dtype)
                for name, col, default, dtype in dims]
             + [Col("graph_node", column(db, t, "graphNodeId"), fill=-1)])
    return gpu_read(db, t, extra)


def memcpy_read(db: Database) -> Read | None:
    t = MEMCPYS
    return gpu_read(db, t, [Col("bytes", column(db, t, "bytes", default="0"), fill=ID_FILL),
                            Col("kind_id", column(db, t, "copyKind"), fill=-1, dtype="int32"),
                            Col("src_id", column(db, t, "srcKind"), fill=-1, dtype="int32"),
                            Col("dst_id", column(db, t, "dstKind"), fill=-1, dtype="int32"),
                            # The devices of a peer copy (NULL, read as -1, for the others).
                            Col("src_device", column(db, t, "srcDeviceId"), fill=-1,
                                dtype="int32"),
                            Col("dst_device", column(db, t, "dstDeviceId"), fill=-1,
                                dtype="int32")])


def memset_read(db: Database) -> Read | None:
    t = MEMSETS
    return gpu_read(db, t, [Col("bytes", column(db, t, "bytes", default="0"), fill=ID_FILL),
                            Col("mem_id", column(db, t, "memKind"), fill=-1, dtype="int32")])


def graph_read(db: Database) -> Read | None:
    t = GRAPHS
    return gpu_read(db, t, [
        Col("graph_id", column(db, t, "graphId", default="0"), fill=ID_FILL, dtype="int32"),
        Col("graph_exec_id", column(db, t, "graphExecId", default="0"), fill=ID_FILL,
            dtype="int32")])


def event_link_reads(db: Database) -> tuple[Read | None, Read | None]:
    """The event records (pid, device, context, event, sync) and the stream-wait syncs
    (pid, context, event, sync) that tell one GPU's stream waited for another's event:
    small tables, read whole (None where a table or a needed column is missing)."""
    pid = "((ifnull({}, 0) >> {}) & {})"
    records = waits = None
    if EVENTS in db.tables and db.has(EVENTS, "eventId", "eventSyncId", "deviceId"):
        records = Read(EVENTS, (
            Col("pid", pid.format(column(db, EVENTS, "globalPid", default="0"), PID_SHIFT,
                                  ID_MASK), dtype="int32"),
            Col("device", '"deviceId"', fill=ID_FILL, dtype="int32"),
            Col("context", column(db, EVENTS, "contextId", default="0"), fill=ID_FILL,
                dtype="int32"),
            Col("event", '"eventId"', fill=ID_FILL), Col("sync", '"eventSyncId"',
                                                          fill=ID_FILL)))
    if usable(db, SYNCS) and db.has(SYNCS, "eventId", "eventSyncId", "contextId"):
        waits = Read(SYNCS, (
            Col("start", '"start"', fill=TIME_FILL), Col("end", '"end"', fill=TIME_FILL),
            Col("pid", pid.format(column(db, SYNCS, "globalPid", default="0"), PID_SHIFT,
                                  ID_MASK), dtype="int32"),
            Col("context", '"contextId"', fill=ID_FILL, dtype="int32"),
            Col("type_id", column(db, SYNCS, "syncType", "deprecatedSyncType"), fill=-1,
                dtype="int32"),
            Col("event", '"eventId"', fill=ID_FILL), Col("sync", '"eventSyncId"',
                                                          fill=ID_FILL)))
    return records, waits


def sync_read(db: Database) -> Read | None:
    t = SYNCS
    return gpu_read(db, t, [
        Col("type_id", column(db, t, "syncType", "deprecatedSyncType"), fill=-1,
            dtype="int32"),
        Col("event", column(db, t, "eventId"), fill=-1)])


def api_reads(db: Database) -> list[Read]:
    """The CUDA API tables (runtime and driver calls; the driver table exists only in
    old exports): start, end, gtid, corr, name_id, driver (0/1)."""
    driver_class = db.enum_id("ENUM_NSYS_EVENT_CLASS", "TRACE_PROCESS_EVENT_CUDA_DRIVER", 1)
    out = []
    for table in API_TABLES:
        if not usable(db, table):
            continue
        cls = column(db, table, "eventClass", default="0")
        driver = ("1" if table == "CUPTI_ACTIVITY_KIND_DRIVER"
                  else f"(ifnull({cls}, 0) = {int(driver_class)})")
        out.append(Read(table, (
            Col("start", '"start"', fill=TIME_FILL), Col("end", '"end"', fill=TIME_FILL),
            Col("gtid", column(db, table, "globalTid", default="0"), fill=ID_FILL),
            Col("corr", column(db, table, "correlationId", default="0"), fill=ID_FILL,
                dtype="int32"),
            Col("name_id", column(db, table, "nameId"), fill=-1, dtype="int32"),
            Col("driver", driver, dtype="int8"))))
    return out


def big_reads(db: Database) -> list[Read]:
    """The reads worth starting early: the tables with one row per kernel or API call."""
    return [r for r in [kernel_read(db), *api_reads(db)] if r is not None]
