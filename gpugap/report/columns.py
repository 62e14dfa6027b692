"""What gpugap reads from the big tables of an nsys export, as reader columns.

Kept apart from the loader and free of pandas, so that reading can begin before pandas is
imported (gpugap.report.prefetch); the loader builds its frames from the same reads.
Every table and column is optional: a missing column reads as a documented default.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpugap.report.database import Database
from gpugap.report.reader import Col

# Serialized GlobalId: (hw/vm << 48) | (pid << 24) | tid. The high bits vary by version,
# so decode pid/tid by masking, never by position of the high byte.
PID_SHIFT, ID_MASK = 24, 0xFFFFFF

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPYS = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSETS = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNCS = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
API_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
GPU_WHERE = '"start" > 0 AND "end" >= "start"'


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
            return f'"{c}"'
    return default


def gpu_read(db: Database, table: str, extra: list[Col]) -> Read:
    """GPU activity rows (start > 0, end >= start): start, end, device, context, stream,
    corr, pid, then *extra*."""
    gpid = column(db, table, "globalPid", default="0")
    base = [Col("start", '"start"'), Col("end", '"end"'),
            Col("device", column(db, table, "deviceId"), dtype="int8"),
            Col("context", column(db, table, "contextId", default="0"), dtype="int8"),
            Col("stream", column(db, table, "streamId", default="0"), dtype="int8"),
            Col("corr", column(db, table, "correlationId", default="0"), dtype="int32"),
            # The process id, decoded in SQL: the serialized id itself is not needed.
            Col("pid", f"((ifnull({gpid}, 0) >> {PID_SHIFT}) & {ID_MASK})", dtype="int16")]
    return Read(table, tuple(base + extra), GPU_WHERE)


def kernel_read(db: Database) -> Read | None:
    t = KERNELS
    if t not in db.tables:
        return None
    # (name, column, default, narrowest type): sizes and sums of them stay in range.
    dims = [("grid_x", "gridX", "1", "int32"), ("grid_y", "gridY", "1", "int32"),
            ("grid_z", "gridZ", "1", "int32"), ("block_x", "blockX", "1", "int16"),
            ("block_y", "blockY", "1", "int16"), ("block_z", "blockZ", "1", "int16"),
            ("registers", "registersPerThread", "0", "int16"),
            ("shared_static", "staticSharedMemory", "0", "int32"),
            ("shared_dynamic", "dynamicSharedMemory", "0", "int32")]
    extra = ([Col("name_id", column(db, t, "shortName", "demangledName"), fill=-1,
                  dtype="int32")]
             + [Col(name, column(db, t, col, default=default), dtype=dtype)
                for name, col, default, dtype in dims]
             + [Col("graph_node", column(db, t, "graphNodeId"), kind="float")])
    return gpu_read(db, t, extra)


def memcpy_read(db: Database) -> Read | None:
    t = MEMCPYS
    if t not in db.tables:
        return None
    return gpu_read(db, t, [Col("bytes", column(db, t, "bytes", default="0")),
                            Col("kind_id", column(db, t, "copyKind"), fill=-1, dtype="int32"),
                            Col("src_id", column(db, t, "srcKind"), fill=-1, dtype="int32"),
                            Col("dst_id", column(db, t, "dstKind"), fill=-1, dtype="int32")])


def memset_read(db: Database) -> Read | None:
    t = MEMSETS
    if t not in db.tables:
        return None
    return gpu_read(db, t, [Col("bytes", column(db, t, "bytes", default="0")),
                            Col("mem_id", column(db, t, "memKind"), fill=-1, dtype="int32")])


def sync_read(db: Database) -> Read | None:
    t = SYNCS
    if t not in db.tables:
        return None
    return gpu_read(db, t, [
        Col("type_id", column(db, t, "syncType", "deprecatedSyncType"), fill=-1,
            dtype="int32"),
        Col("event", column(db, t, "eventId"), kind="float")])


def api_reads(db: Database) -> list[Read]:
    """The CUDA API tables (runtime and driver calls; the driver table exists only in
    old exports): start, end, gtid, corr, name_id, driver (0/1)."""
    driver_class = db.enum_id("ENUM_NSYS_EVENT_CLASS", "TRACE_PROCESS_EVENT_CUDA_DRIVER", 1)
    out = []
    for table in API_TABLES:
        if table not in db.tables:
            continue
        cls = column(db, table, "eventClass", default="0")
        driver = ("1" if table == "CUPTI_ACTIVITY_KIND_DRIVER"
                  else f"(ifnull({cls}, 0) = {int(driver_class)})")
        out.append(Read(table, (
            Col("start", '"start"'), Col("end", '"end"'),
            Col("gtid", column(db, table, "globalTid", default="0")),
            Col("corr", column(db, table, "correlationId", default="0"), dtype="int32"),
            Col("name_id", column(db, table, "nameId"), fill=-1, dtype="int32"),
            Col("driver", driver, dtype="int8"))))
    return out


def big_reads(db: Database) -> list[Read]:
    """The reads worth starting early: the tables with one row per kernel or API call."""
    return [r for r in [kernel_read(db), *api_reads(db)] if r is not None]
