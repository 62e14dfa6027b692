"""SQL -> typed frames. The only module that knows nsys's table and column names.

Every table and column is optional: a missing table gives an empty frame, a missing
optional column a column of NaN (or a documented fallback), and what was missing is
noted in ``ReportInfo.warnings`` when it weakens a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from gpugap.report.database import Database
from gpugap.report.trace import ReportInfo, Trace, empty_frame

# Serialized GlobalId: (hw/vm << 48) | (pid << 24) | tid. The high bits vary by version,
# so decode pid/tid by masking, never by position of the high byte.
_PID_SHIFT, _ID_MASK = 24, 0xFFFFFF

# Domains nsys creates itself for traced libraries (-t cublas, -t cudnn, ...).
LIBRARY_DOMAINS = frozenset({"cuBLAS", "cuDNN", "cuSPARSE", "cuFFT", "cuSOLVER", "CUDA"})

_API_SUFFIX = re.compile(r"(_v\d+)+$")
_PER_THREAD = re.compile(r"_pt(sz|ds)")

KERNEL_COLUMNS = {
    "start": "int64", "end": "int64", "device": "int64", "context": "int64",
    "stream": "int64", "corr": "int64", "pid": "int64", "name": "str",
    "grid_x": "int64", "grid_y": "int64", "grid_z": "int64",
    "block_x": "int64", "block_y": "int64", "block_z": "int64",
    "registers": "int64", "shared_static": "int64", "shared_dynamic": "int64",
    "graph_node": "float64", "blocks": "int64", "threads_per_block": "int64",
}
LAUNCH_COLUMNS = {"api_start": "float64", "api_end": "float64", "gtid": "float64",
                  "api_name": "str"}
MEMCPY_COLUMNS = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64",
                  "corr": "int64", "pid": "int64", "bytes": "int64", "kind": "str",
                  "src_kind": "str", "dst_kind": "str"}
MEMSET_COLUMNS = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64",
                  "corr": "int64", "pid": "int64", "bytes": "int64", "mem_kind": "str"}
API_COLUMNS = {"start": "int64", "end": "int64", "gtid": "int64", "pid": "int64",
               "tid": "int64", "corr": "int64", "name": "str", "driver": "bool",
               "per_thread": "bool"}
SYNC_COLUMNS = {"start": "int64", "end": "int64", "device": "int64", "stream": "int64",
                "corr": "int64", "pid": "int64", "sync_type": "str", "event": "float64"}
NVTX_COLUMNS = {"start": "int64", "end": "int64", "name": "str", "domain": "str",
                "gtid": "int64", "pid": "int64", "tid": "int64", "depth": "int64",
                "library": "bool", "kind": "str"}
STREAM_COLUMNS = {"pid": "int64", "stream": "int64", "context": "int64", "flag": "str",
                  "priority": "int64", "legacy_default": "bool"}
THREAD_COLUMNS = {"gtid": "int64", "pid": "int64", "tid": "int64", "name": "str"}
OSRT_COLUMNS = {"start": "int64", "end": "int64", "gtid": "int64", "name": "str"}


class Loader:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.warnings: list[str] = []
        self._strings: np.ndarray | None = None

    # --- helpers ----------------------------------------------------------------------
    @property
    def strings(self) -> np.ndarray:
        """StringIds as an object array indexed by id (None where an id is unused)."""
        if self._strings is None:
            if not self.db.has("StringIds", "id", "value"):
                self._strings = np.array([], dtype=object)
            else:
                ids = self.db.frame("SELECT id, value FROM StringIds", ["id", "value"])
                table = np.full(int(ids["id"].max()) + 1 if len(ids) else 0, None,
                                dtype=object)
                table[ids["id"].to_numpy(dtype=np.int64)] = ids["value"].to_numpy()
                self._strings = table
        return self._strings

    def names(self, ids: pd.Series, transform: Callable[[str], str] | None = None
              ) -> pd.Categorical:
        """StringIds ids -> a Categorical of names, mapping each distinct id once."""
        ids = ids.fillna(-1).to_numpy(dtype=np.int64)
        uniq, codes = np.unique(ids, return_inverse=True)
        table = self.strings
        values = [(table[i] if 0 <= i < len(table) and table[i] is not None else f"<{i}>")
                  for i in uniq.tolist()]
        if transform is not None:
            values = [transform(v) for v in values]
        # Distinct ids may map to equal strings (after transform); Categorical needs
        # unique categories, so fold them.
        cats, remap = np.unique(np.array(values, dtype=object), return_inverse=True)
        return pd.Categorical.from_codes(remap[codes], categories=cats)

    def column(self, table: str, *candidates: str, default: str = "NULL") -> str:
        """The first of *candidates* that *table* has, quoted, else *default* (SQL)."""
        have = self.db.columns(table)
        for c in candidates:
            if c in have:
                return f'"{c}"'
        return default

    def enum_labels(self, table: str, values: pd.Series) -> pd.Categorical:
        labels = self.db.enum(table)
        ints = values.fillna(-1).astype(np.int64)
        mapped = ints.map(lambda v: labels.get(int(v), "Unknown" if v < 0 else f"<{v}>"))
        return pd.Categorical(mapped)

    @staticmethod
    def pid_of(gid: pd.Series) -> np.ndarray:
        return (gid.fillna(0).to_numpy(dtype=np.int64) >> _PID_SHIFT) & _ID_MASK

    # --- tables -----------------------------------------------------------------------
    def gpu_frame(self, table: str, extra: dict[str, str], columns: dict[str, str]
                  ) -> pd.DataFrame:
        if table not in self.db.tables:
            return empty_frame(columns | LAUNCH_COLUMNS)
        base = {"start": '"start"', "end": '"end"', "device": self.column(table, "deviceId"),
                "context": self.column(table, "contextId", default="0"),
                "stream": self.column(table, "streamId", default="0"),
                "corr": self.column(table, "correlationId", default="0"),
                "gpid": self.column(table, "globalPid", default="0")}
        select = base | extra
        sql = (f"SELECT {', '.join(f'{expr} AS {name}' for name, expr in select.items())} "
               f'FROM "{table}" WHERE "start" > 0 AND "end" >= "start"')
        frame = self.db.frame(sql, list(select))
        frame["pid"] = self.pid_of(frame.pop("gpid"))
        for col in ("device", "context", "stream", "corr"):
            frame[col] = frame[col].fillna(0).astype(np.int64)
        return frame

    def kernels(self) -> pd.DataFrame:
        t = "CUPTI_ACTIVITY_KIND_KERNEL"
        extra = {"name_id": self.column(t, "shortName", "demangledName"),
                 "grid_x": self.column(t, "gridX", default="1"),
                 "grid_y": self.column(t, "gridY", default="1"),
                 "grid_z": self.column(t, "gridZ", default="1"),
                 "block_x": self.column(t, "blockX", default="1"),
                 "block_y": self.column(t, "blockY", default="1"),
                 "block_z": self.column(t, "blockZ", default="1"),
                 "registers": self.column(t, "registersPerThread", default="0"),
                 "shared_static": self.column(t, "staticSharedMemory", default="0"),
                 "shared_dynamic": self.column(t, "dynamicSharedMemory", default="0"),
                 "graph_node": self.column(t, "graphNodeId")}
        frame = self.gpu_frame(t, extra, KERNEL_COLUMNS)
        if "name_id" in frame:
            frame["name"] = self.names(frame.pop("name_id"))
        for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                  "registers", "shared_static", "shared_dynamic"):
            frame[c] = frame[c].fillna(0).astype(np.int64)
        frame["graph_node"] = frame["graph_node"].astype(np.float64)
        frame["blocks"] = frame["grid_x"] * frame["grid_y"] * frame["grid_z"]
        frame["threads_per_block"] = frame["block_x"] * frame["block_y"] * frame["block_z"]
        return frame

    def memcpys(self) -> pd.DataFrame:
        t = "CUPTI_ACTIVITY_KIND_MEMCPY"
        extra = {"bytes": self.column(t, "bytes", default="0"),
                 "kind_id": self.column(t, "copyKind"),
                 "src_id": self.column(t, "srcKind"), "dst_id": self.column(t, "dstKind")}
        frame = self.gpu_frame(t, extra, MEMCPY_COLUMNS)
        if "kind_id" in frame:
            frame["kind"] = self.enum_labels("ENUM_CUDA_MEMCPY_OPER", frame.pop("kind_id"))
            frame["src_kind"] = self.enum_labels("ENUM_CUDA_MEM_KIND", frame.pop("src_id"))
            frame["dst_kind"] = self.enum_labels("ENUM_CUDA_MEM_KIND", frame.pop("dst_id"))
            frame["bytes"] = frame["bytes"].fillna(0).astype(np.int64)
            if not self.db.has("ENUM_CUDA_MEM_KIND"):
                self.warnings.append("no ENUM_CUDA_MEM_KIND table: memory kinds of copies "
                                     "unknown, pageable copies cannot be recognised")
        return frame

    def memsets(self) -> pd.DataFrame:
        t = "CUPTI_ACTIVITY_KIND_MEMSET"
        extra = {"bytes": self.column(t, "bytes", default="0"),
                 "mem_id": self.column(t, "memKind")}
        frame = self.gpu_frame(t, extra, MEMSET_COLUMNS)
        if "mem_id" in frame:
            frame["mem_kind"] = self.enum_labels("ENUM_CUDA_MEM_KIND", frame.pop("mem_id"))
            frame["bytes"] = frame["bytes"].fillna(0).astype(np.int64)
        return frame

    def api(self) -> pd.DataFrame:
        parts = []
        driver_class = self.db.enum_id("ENUM_NSYS_EVENT_CLASS",
                                       "TRACE_PROCESS_EVENT_CUDA_DRIVER", 1)
        for table, force_driver in (("CUPTI_ACTIVITY_KIND_RUNTIME", None),
                                    ("CUPTI_ACTIVITY_KIND_DRIVER", True)):
            if table not in self.db.tables:
                continue
            cls = self.column(table, "eventClass", default="0")
            sql = (f'SELECT "start", "end", {self.column(table, "globalTid", default="0")}, '
                   f'{self.column(table, "correlationId", default="0")}, '
                   f'{self.column(table, "nameId")}, {cls} FROM "{table}"')
            part = self.db.frame(sql, ["start", "end", "gtid", "corr", "name_id", "cls"])
            part["driver"] = (True if force_driver else
                              part["cls"].fillna(0).astype(np.int64) == driver_class)
            parts.append(part.drop(columns="cls"))
        if not parts:
            return empty_frame(API_COLUMNS)
        frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        frame["gtid"] = frame["gtid"].fillna(0).astype(np.int64)
        frame["corr"] = frame["corr"].fillna(0).astype(np.int64)
        frame["pid"] = self.pid_of(frame["gtid"])
        frame["tid"] = frame["gtid"].to_numpy(dtype=np.int64) & _ID_MASK
        name_ids = frame.pop("name_id")
        raw = self.names(name_ids)
        per_thread_names = [c for c in raw.categories if _PER_THREAD.search(c)]
        frame["per_thread"] = np.asarray(raw.isin(per_thread_names))
        frame["name"] = self.names(name_ids, transform=normalize_api_name)
        return frame.sort_values("start", kind="stable", ignore_index=True)

    def syncs(self) -> pd.DataFrame:
        t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        extra = {"type_id": self.column(t, "syncType", "deprecatedSyncType"),
                 "event": self.column(t, "eventId")}
        frame = self.gpu_frame(t, extra, SYNC_COLUMNS)
        if "type_id" in frame:
            frame["sync_type"] = self.enum_labels("ENUM_CUPTI_SYNC_TYPE", frame.pop("type_id"))
            frame["event"] = frame["event"].astype(np.float64)
            frame = frame.drop(columns=[c for c in ("context",) if c in frame])
        return frame

    def nvtx(self, end_of_time: int) -> pd.DataFrame:
        t = "NVTX_EVENTS"
        if t not in self.db.tables:
            return empty_frame(NVTX_COLUMNS)
        ev = "ENUM_NSYS_EVENT_TYPE"
        kinds = {}
        for name, fallback, label in (("NvtxPushPopRange", 59, "push/pop"),
                                      ("NvtxStartEndRange", 60, "start/end"),
                                      ("NvtxtPushPopRange", 70, "push/pop"),
                                      ("NvtxtStartEndRange", 71, "start/end")):
            kinds[self.db.enum_id(ev, name, fallback)] = label
        domain_create = self.db.enum_id(ev, "NvtxDomainCreate", 75)
        text = self.column(t, "text")
        text_id = self.column(t, "textId")
        domain = self.column(t, "domainId", default="0")
        sql = (f'SELECT "start", "end", "eventType", {text}, {text_id}, {domain}, '
               f'{self.column(t, "globalTid", default="0")} FROM "{t}" '
               f'WHERE "eventType" IN ({", ".join(str(k) for k in kinds)}, {domain_create})')
        raw = self.db.frame(sql, ["start", "end", "type", "text", "text_id", "domain_id",
                                  "gtid"])
        if raw.empty:
            return empty_frame(NVTX_COLUMNS)
        raw["gtid"] = raw["gtid"].fillna(0).astype(np.int64)
        raw["pid"] = self.pid_of(raw["gtid"])
        raw["domain_id"] = raw["domain_id"].fillna(0).astype(np.int64)
        # Names: inline text wins, else the registered string (nvtx's Python package
        # registers them: text NULL, name in textId).
        ids = raw["text_id"].fillna(-1).to_numpy(dtype=np.int64)
        strings = self.strings
        registered = np.where((ids >= 0) & (ids < len(strings)),
                              strings[np.clip(ids, 0, max(len(strings) - 1, 0))]
                              if len(strings) else None, None)
        raw["name"] = raw["text"].where(raw["text"].notna(), pd.Series(registered,
                                                                        index=raw.index))
        is_domain = raw["type"] == domain_create
        domains = {(int(p), int(d)): n for p, d, n in
                   raw.loc[is_domain, ["pid", "domain_id", "name"]].itertuples(index=False)}
        frame = raw.loc[~is_domain].copy()
        frame["domain"] = [domains.get((p, d), "" if d == 0 else f"domain {d}")
                           for p, d in zip(frame["pid"].tolist(), frame["domain_id"].tolist(),
                                           strict=True)]
        frame["kind"] = frame["type"].map(kinds)
        unclosed = frame["end"].isna()
        if unclosed.any():
            self.warnings.append(f"{int(unclosed.sum())} NVTX range(s) never closed: "
                                 "treated as ending with the capture")
        frame["end"] = frame["end"].fillna(end_of_time).astype(np.int64)
        frame["start"] = frame["start"].astype(np.int64)
        frame["tid"] = frame["gtid"].to_numpy(dtype=np.int64) & _ID_MASK
        frame["name"] = frame["name"].fillna("<unnamed>").astype(object)
        frame["library"] = frame["domain"].isin(LIBRARY_DOMAINS)
        frame = frame.sort_values(["gtid", "domain", "start", "end"],
                                  ascending=[True, True, True, False], ignore_index=True)
        frame["depth"] = nesting_depth(frame)
        return frame[list(NVTX_COLUMNS)].sort_values("start", kind="stable",
                                                     ignore_index=True)

    def streams(self) -> pd.DataFrame:
        parts = []
        flag_names = self.db.enum("ENUM_CUPTI_STREAM_TYPE")
        null_flag = self.db.enum_id("ENUM_CUPTI_STREAM_TYPE",
                                    "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL", 3)
        t = "TARGET_INFO_CUDA_STREAM"
        if t in self.db.tables:
            s = self.db.frame(
                f'SELECT {self.column(t, "processId", default="0")}, "streamId", '
                f'{self.column(t, "contextId", default="0")}, {self.column(t, "flag")}, '
                f'{self.column(t, "priority", default="0")} FROM "{t}"',
                ["pid", "stream", "context", "flag_id", "priority"])
            s["legacy_default"] = s["flag_id"] == null_flag
            s["flag"] = s["flag_id"].map(lambda v: flag_names.get(int(v), "Unknown")
                                         if pd.notna(v) else "Unknown")
            parts.append(s.drop(columns="flag_id"))
        # The NULL stream id per context, from whichever table this version writes.
        for table, col in (("TARGET_INFO_CUDA_CONTEXT_INFO", "nullStreamId"),
                           ("TARGET_INFO_CUDA_NULL_STREAM", "streamId")):
            if self.db.has(table, col, "processId"):
                n = self.db.frame(f'SELECT "processId", "{col}", '
                                  f'{self.column(table, "contextId", default="0")} '
                                  f'FROM "{table}"', ["pid", "stream", "context"])
                n["flag"], n["priority"], n["legacy_default"] = "Null stream", 0, True
                parts.append(n)
        if not parts:
            return empty_frame(STREAM_COLUMNS)
        frame = pd.concat(parts, ignore_index=True)
        for c in ("pid", "stream", "context", "priority"):
            frame[c] = frame[c].fillna(0).astype(np.int64)
        frame["legacy_default"] = frame["legacy_default"].astype(bool)
        frame = frame.sort_values("legacy_default", ascending=False)
        return frame.drop_duplicates(["pid", "stream"], ignore_index=True)

    def devices(self) -> pd.DataFrame:
        t = "TARGET_INFO_GPU"
        cols = {"device": ("id",), "name": ("name",), "sm_count": ("smCount",),
                "max_warps_per_sm": ("maxWarpsPerSm",), "warp_size": ("threadsPerWarp",),
                "max_blocks_per_sm": ("maxBlocksPerSm",),
                "max_regs_per_sm": ("maxRegistersPerSm",),
                "max_regs_per_block": ("maxRegistersPerBlock",),
                "max_shmem_per_sm": ("maxShmemPerSm",),
                "max_shmem_per_block": ("maxShmemPerBlockOptin", "maxShmemPerBlock"),
                "cc_major": ("computeMajor", "smMajor"), "cc_minor": ("computeMinor", "smMinor"),
                "memory_bytes": ("totalMemory",), "clock_hz": ("clockRate",),
                "bus": ("busLocation",), "uuid": ("uuid",), "chip": ("chipName",)}
        if t not in self.db.tables:
            if "CUPTI_ACTIVITY_KIND_KERNEL" in self.db.tables:
                self.warnings.append("no TARGET_INFO_GPU table: device limits unknown, "
                                     "occupancy estimates assume a 132-SM Hopper GPU")
            return pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        select = ", ".join(self.column(t, *cands) for cands in cols.values())
        frame = self.db.frame(f'SELECT {select} FROM "{t}"', list(cols))
        missing = [c for c in ("sm_count", "max_warps_per_sm", "max_blocks_per_sm",
                               "max_regs_per_sm", "max_shmem_per_sm") if frame[c].isna().all()]
        if missing and len(frame):
            self.warnings.append(f"device limits missing from the report ({', '.join(missing)})"
                                 ": occupancy estimates use Hopper-class defaults")
        defaults = {"sm_count": 132, "max_warps_per_sm": 64, "warp_size": 32,
                    "max_blocks_per_sm": 32, "max_regs_per_sm": 65536,
                    "max_regs_per_block": 65536, "max_shmem_per_sm": 233472,
                    "max_shmem_per_block": 232448}
        for c, d in defaults.items():
            frame[c] = frame[c].fillna(d).astype(np.int64)
        frame["device"] = frame["device"].fillna(0).astype(np.int64)
        frame["max_threads_per_sm"] = frame["max_warps_per_sm"] * frame["warp_size"]
        frame["compute_capability"] = [f"{int(a)}.{int(b)}" if pd.notna(a) else None
                                       for a, b in zip(frame["cc_major"], frame["cc_minor"],
                                                       strict=True)]
        return frame.drop_duplicates("device", ignore_index=True)

    def threads(self) -> pd.DataFrame:
        t = "ThreadNames"
        if not self.db.has(t, "nameId", "globalTid"):
            return empty_frame(THREAD_COLUMNS)
        frame = self.db.frame(f'SELECT "globalTid", "nameId" FROM "{t}"', ["gtid", "name_id"])
        frame["gtid"] = frame["gtid"].fillna(0).astype(np.int64)
        frame["pid"] = self.pid_of(frame["gtid"])
        frame["tid"] = frame["gtid"].to_numpy(dtype=np.int64) & _ID_MASK
        frame["name"] = self.names(frame.pop("name_id")).astype(object)
        return frame.drop_duplicates("gtid", ignore_index=True)

    def osrt(self) -> pd.DataFrame:
        t = "OSRT_API"
        if not self.db.has(t, "start", "end", "nameId"):
            return empty_frame(OSRT_COLUMNS)
        frame = self.db.frame(f'SELECT "start", "end", {self.column(t, "globalTid", default="0")},'
                              f' "nameId" FROM "{t}"', ["start", "end", "gtid", "name_id"])
        frame["gtid"] = frame["gtid"].fillna(0).astype(np.int64)
        frame["name"] = self.names(frame.pop("name_id"))
        return frame.sort_values("start", kind="stable", ignore_index=True)


def normalize_api_name(name: str) -> str:
    """cudaMemcpyAsync_ptsz_v7000 -> cudaMemcpyAsync; cuMemcpyHtoDAsync_v2 -> cuMemcpyHtoDAsync."""
    return _PER_THREAD.sub("", _API_SUFFIX.sub("", name))


def nesting_depth(frame: pd.DataFrame) -> np.ndarray:
    """Depth of each range within its (thread, domain) stack, for a frame sorted by
    (gtid, domain, start asc, end desc). Vectorised per group: a range's depth is the
    number of ranges that began at or before it (in that order) minus those that had
    already ended when it began, minus one."""
    depth = np.zeros(len(frame), dtype=np.int64)
    if frame.empty:
        return depth
    starts = frame["start"].to_numpy(dtype=np.int64)
    ends = frame["end"].to_numpy(dtype=np.int64)
    keys = pd.MultiIndex.from_arrays([frame["gtid"], frame["domain"]])
    boundaries = np.flatnonzero(~keys.duplicated(keep="first")).tolist() + [len(frame)]
    for lo, hi in zip(boundaries[:-1], boundaries[1:], strict=True):
        s, e = starts[lo:hi], np.sort(ends[lo:hi])
        ended_before = np.searchsorted(e, s, side="right")
        depth[lo:hi] = np.maximum(np.arange(hi - lo) - ended_before, 0)
    return depth


def attach_launches(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Add the launching API call's start/end/thread/name to GPU ops, joined on
    (process, correlation id): correlation ids are unique per process only."""
    for col, dtype in LAUNCH_COLUMNS.items():
        ops[col] = pd.Series(np.nan if dtype != "str" else None, index=ops.index,
                             dtype="float64" if dtype != "str" else object)
    if ops.empty or api.empty:
        return ops
    api_key = (api["pid"].to_numpy(np.int64) << 32) | (api["corr"].to_numpy(np.int64) & 0xFFFFFFFF)
    valid = api["corr"].to_numpy() > 0
    order = np.argsort(api_key[valid], kind="stable")
    sorted_keys = api_key[valid][order]
    api_rows = np.flatnonzero(valid)[order]
    op_key = (ops["pid"].to_numpy(np.int64) << 32) | (ops["corr"].to_numpy(np.int64) & 0xFFFFFFFF)
    pos = np.searchsorted(sorted_keys, op_key)
    pos_clipped = np.minimum(pos, max(len(sorted_keys) - 1, 0))
    hit = (pos < len(sorted_keys)) & (sorted_keys[pos_clipped] == op_key) if len(sorted_keys) \
        else np.zeros(len(ops), dtype=bool)
    rows = api_rows[pos_clipped[hit]]
    ops.loc[hit, "api_start"] = api["start"].to_numpy()[rows].astype(np.float64)
    ops.loc[hit, "api_end"] = api["end"].to_numpy()[rows].astype(np.float64)
    ops.loc[hit, "gtid"] = api["gtid"].to_numpy()[rows].astype(np.float64)
    ops.loc[hit, "api_name"] = api["name"].astype(object).to_numpy()[rows]
    return ops


def load_database(db: Database, shown_path: str) -> Trace:
    loader = Loader(db)
    meta = db.export_meta
    capture_start = capture_end = None
    if db.has("ANALYSIS_DETAILS", "startTime", "stopTime"):
        row = db.rows("SELECT startTime, stopTime FROM ANALYSIS_DETAILS LIMIT 1")
        if row:
            capture_start, capture_end = (int(x) if x is not None else None for x in row[0])
    capture = db.capture_meta
    cuda_flags = [v for k, v in capture.items() if k.endswith("COLLECT_CUDA_TRACE")]
    cuda_traced = (any(v.lower() in ("true", "1") for v in cuda_flags) if cuda_flags else None)

    api = loader.api()
    kernels = attach_launches(loader.kernels(), api)
    memcpys = attach_launches(loader.memcpys(), api)
    memsets = attach_launches(loader.memsets(), api)
    ends = [int(f["end"].max()) for f in (kernels, memcpys, memsets, api) if len(f)]
    end_of_time = capture_end or (max(ends) if ends else 0)
    info = ReportInfo(
        path=shown_path, sqlite_path=str(db.path),
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        capture_start_ns=capture_start, capture_end_ns=capture_end,
        cuda_traced=cuda_traced, tables=db.tables)
    trace = Trace(info=info, kernels=kernels, memcpys=memcpys, memsets=memsets, api=api,
                  syncs=loader.syncs(), nvtx=loader.nvtx(end_of_time),
                  streams=loader.streams(), devices=loader.devices(),
                  threads=loader.threads(), osrt=loader.osrt())
    if info.nsys_version is None:
        loader.warnings.append("the report does not say which nsys wrote it "
                               "(no META_DATA_EXPORT table)")
    info.warnings.extend(loader.warnings)
    return trace


def load_sqlite(path: str | Path, shown_path: str | None = None) -> Trace:
    path = Path(path)
    db = Database(path)
    try:
        return load_database(db, shown_path or str(path))
    finally:
        db.close()
