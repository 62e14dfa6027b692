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

from gpugap.report import columns as reads
from gpugap.report.columns import ID_MASK as _ID_MASK
from gpugap.report.columns import PID_SHIFT as _PID_SHIFT
from gpugap.report.database import Database
from gpugap.report.reader import Col, narrow
from gpugap.report.trace import ReportInfo, Trace, empty_frame

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

    def names(self, ids: pd.Series | np.ndarray,
              transform: Callable[[str], str] | None = None) -> pd.Categorical:
        """StringIds ids -> a Categorical of names (categories sorted; NULL -> '<-1>')."""
        return self._name_codes(ids, [transform])[0]

    def _name_codes(self, ids: pd.Series | np.ndarray,
                    transforms: list[Callable[[str], str] | None]) -> list[pd.Categorical]:
        """One Categorical per transform for the same ids, each distinct id mapped once
        through a lookup table (no sort of the rows)."""
        if isinstance(ids, pd.Series):
            ids = ids.fillna(-1).to_numpy(dtype=np.int64)
        table = self.strings
        if ids.size == 0:
            return [pd.Categorical.from_codes(np.zeros(0, dtype=np.int8), categories=[])
                    for _ in transforms]
        lo, hi = int(ids.min()), int(ids.max())
        dense = hi - lo < (1 << 24)
        if dense:                 # StringIds ids are small: count them instead of sorting
            shifted = ids if lo == 0 else ids - lo
            present = np.flatnonzero(np.bincount(shifted)) + lo
        else:
            present = np.unique(ids)
        raw = [(table[i] if 0 <= i < len(table) and table[i] is not None else f"<{i}>")
               for i in present.tolist()]
        out = []
        for transform in transforms:
            values = raw if transform is None else [transform(v) for v in raw]
            # Distinct ids may map to equal strings (after transform); Categorical needs
            # unique categories, so fold them.
            cats, remap = np.unique(np.array(values, dtype=object), return_inverse=True)
            remap = remap.astype(np.int32)
            if dense:
                lut = np.zeros(hi - lo + 1, dtype=np.int32)
                lut[present - lo] = remap
                codes = lut[shifted]
            else:
                codes = remap[np.searchsorted(present, ids)]
            out.append(pd.Categorical.from_codes(codes, categories=cats, validate=False))
        return out

    def column(self, table: str, *candidates: str, default: str = "NULL") -> str:
        """The first of *candidates* that *table* has, quoted, else *default* (SQL)."""
        return reads.column(self.db, table, *candidates, default=default)

    def enum_labels(self, table: str, values: pd.Series | np.ndarray) -> pd.Categorical:
        """Enum ids -> a Categorical of their labels (NULL/negative -> 'Unknown', an id
        the table lacks -> '<id>'), mapping each distinct id once."""
        labels = self.db.enum(table)
        if isinstance(values, pd.Series):
            values = values.fillna(-1).to_numpy(dtype=np.int64)
        present, inverse = np.unique(values, return_inverse=True)
        mapped = [labels.get(v, "Unknown" if v < 0 else f"<{v}>") for v in present.tolist()]
        cats, remap = np.unique(np.array(mapped, dtype=object), return_inverse=True)
        return pd.Categorical.from_codes(remap[inverse].astype(np.int32), categories=cats,
                                         validate=False)

    @staticmethod
    def pid_of(gid: pd.Series) -> np.ndarray:
        return (gid.fillna(0).to_numpy(dtype=np.int64) >> _PID_SHIFT) & _ID_MASK

    # --- tables -----------------------------------------------------------------------
    def gpu_frame(self, read: reads.Read | None, columns: dict[str, str]) -> pd.DataFrame:
        """GPU activity rows (see columns.gpu_read): start, end, device, context, stream,
        corr, pid, then the read's extra columns; an empty frame without the table."""
        if read is None:
            return empty_frame(columns | LAUNCH_COLUMNS)
        return pd.DataFrame(read.run(self.db), copy=False)

    def kernels(self) -> pd.DataFrame:
        frame = self.gpu_frame(reads.kernel_read(self.db), KERNEL_COLUMNS)
        if "name_id" in frame:
            frame["name"] = self.names(frame.pop("name_id").to_numpy())
        graph = frame["graph_node"].to_numpy(dtype=np.float64)
        if graph.size and int(np.count_nonzero(~np.isnan(graph))) * 10 < graph.size:
            # Few kernels come from CUDA graphs: store only those (a sparse column).
            frame["graph_node"] = pd.arrays.SparseArray(graph, fill_value=np.nan)
        else:
            frame["graph_node"] = graph
        del graph

        def product(floor: str, *cols: str) -> np.ndarray:   # in int64: never overflows
            out = frame[cols[0]].to_numpy(dtype=np.int64)
            for c in cols[1:]:
                out = out * frame[c].to_numpy(dtype=np.int64)
            return narrow(out, np.dtype(floor))

        frame["blocks"] = product("int32", "grid_x", "grid_y", "grid_z")
        frame["threads_per_block"] = product("int16", "block_x", "block_y", "block_z")
        return frame

    def memcpys(self) -> pd.DataFrame:
        frame = self.gpu_frame(reads.memcpy_read(self.db), MEMCPY_COLUMNS)
        if "kind_id" in frame:
            frame["kind"] = self.enum_labels("ENUM_CUDA_MEMCPY_OPER", frame.pop("kind_id"))
            frame["src_kind"] = self.enum_labels("ENUM_CUDA_MEM_KIND", frame.pop("src_id"))
            frame["dst_kind"] = self.enum_labels("ENUM_CUDA_MEM_KIND", frame.pop("dst_id"))
            if not self.db.has("ENUM_CUDA_MEM_KIND"):
                self.warnings.append("no ENUM_CUDA_MEM_KIND table: memory kinds of copies "
                                     "unknown, pageable copies cannot be recognised")
        return frame

    def memsets(self) -> pd.DataFrame:
        frame = self.gpu_frame(reads.memset_read(self.db), MEMSET_COLUMNS)
        if "mem_id" in frame:
            frame["mem_kind"] = self.enum_labels("ENUM_CUDA_MEM_KIND", frame.pop("mem_id"))
        return frame

    def api(self) -> pd.DataFrame:
        parts = [read.run(self.db) for read in reads.api_reads(self.db)]
        if not parts:
            return empty_frame(API_COLUMNS)
        data = ({k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                if len(parts) > 1 else parts[0])
        start = data["start"]
        if start.size > 1 and not bool((start[1:] >= start[:-1]).all()):
            order = np.argsort(start, kind="stable")
            data = {k: v[order] for k, v in data.items()}
        gtid = data["gtid"]
        raw, name = self._name_codes(data.pop("name_id"), [None, normalize_api_name])
        per_thread = np.array([bool(_PER_THREAD.search(c)) for c in raw.categories]
                              + [False], dtype=bool)
        return pd.DataFrame({
            "start": data["start"], "end": data["end"], "gtid": gtid,
            "pid": narrow((gtid >> _PID_SHIFT) & _ID_MASK, np.dtype(np.int16)),
            "tid": narrow(gtid & _ID_MASK, np.dtype(np.int16)),
            "corr": data["corr"], "name": name, "driver": data["driver"].astype(bool),
            "per_thread": per_thread[raw.codes]}, copy=False)

    def syncs(self) -> pd.DataFrame:
        frame = self.gpu_frame(reads.sync_read(self.db), SYNC_COLUMNS)
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
        data = self.db.read(t, [Col("start", '"start"'), Col("end", '"end"'),
                                Col("gtid", self.column(t, "globalTid", default="0")),
                                Col("name_id", '"nameId"', fill=-1, dtype="int32")])
        return self._osrt_frame(data)

    def osrt_overlapping(self, windows: dict[int, tuple[np.ndarray, np.ndarray]]
                         ) -> pd.DataFrame:
        """OS runtime calls of each thread that overlap one of its windows [lo, hi):
        one scan of OSRT_API, the test done by SQLite (see _window_test)."""
        t = "OSRT_API"
        if not self.db.has(t, "start", "end", "nameId") or not windows:
            return empty_frame(OSRT_COLUMNS)
        gtid = self.column(t, "globalTid", default="0")
        cases = " ".join(f"WHEN {int(g)} THEN {_window_test(lo, hi)}"
                         for g, (lo, hi) in sorted(windows.items()) if len(lo))
        if not cases:
            return empty_frame(OSRT_COLUMNS)
        lo_all = min(int(lo.min()) for lo, _ in windows.values() if len(lo))
        hi_all = max(int(hi.max()) for lo, hi in windows.values() if len(lo))
        where = (f'"end" > {lo_all} AND "start" < {hi_all} AND '
                 f'(CASE ifnull({gtid}, 0) {cases} END) > "start"')
        data = self.db.read(t, [Col("start", '"start"'), Col("end", '"end"'),
                                Col("gtid", gtid), Col("name_id", '"nameId"', fill=-1,
                                                       dtype="int32")], where=where)
        return self._osrt_frame(data)

    def _osrt_frame(self, data: dict[str, np.ndarray]) -> pd.DataFrame:
        frame = pd.DataFrame({"start": data["start"], "end": data["end"],
                              "gtid": data["gtid"],
                              "name": self.names(data["name_id"])}, copy=False)
        start = data["start"]
        if start.size > 1 and not bool((start[1:] >= start[:-1]).all()):
            frame = frame.sort_values("start", kind="stable", ignore_index=True)
        return frame


def _window_test(lo: np.ndarray, hi: np.ndarray) -> str:
    """SQL giving, for a row, the end of the last window that starts before the row ends
    (NULL if none); the row overlaps a window exactly when that value is > its start.
    The windows are merged first (sorted, disjoint), so the last window starting before
    the row's end is the only candidate. A binary tree of CASEs: log2(windows) tests per
    row.

        windows:   [lo0, hi0)      [lo1, hi1)        [lo2, hi2)
        row:                    [start ........ end)
        last lo < end: lo1  ->  overlap iff hi1 > start
    """
    from gpugap import timeline as tl

    lo, hi = tl.union(lo, hi)

    def tree(i: int, j: int) -> str:
        if j - i == 1:
            return f'CASE WHEN "end" > {int(lo[i])} THEN {int(hi[i])} END'
        m = (i + j) // 2
        return f'CASE WHEN "end" > {int(lo[m])} THEN {tree(m, j)} ELSE {tree(i, m)} END'

    return tree(0, len(lo)) if len(lo) else "NULL"


class OsrtSource:
    """OS runtime calls, read only when needed: a long capture holds tens of millions of
    them and only the few windows a finding explains are ever looked at."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _with_loader(self, work):
        db = Database(self.path)
        try:
            return work(Loader(db))
        finally:
            db.close()

    def all(self) -> pd.DataFrame:
        return self._with_loader(lambda loader: loader.osrt())

    def overlapping(self, windows: dict[int, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
        return self._with_loader(lambda loader: loader.osrt_overlapping(windows))


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


def match_rows(op_pid: np.ndarray, op_corr: np.ndarray, api_pid: np.ndarray,
               api_corr: np.ndarray) -> np.ndarray:
    """For each GPU op: the row of the API call with the same process and correlation
    id (the first in API order when several match), -1 if none. API rows with a
    correlation id <= 0 match nothing.

    Exports list API calls in time order, and correlation ids grow with time: when the
    keys are already strictly increasing (checked), no sort is needed."""
    mask = 0xFFFFFFFF
    single = bool(api_pid.size) and int(api_pid.min()) == int(api_pid.max())
    if single and int(api_corr.min(initial=1)) >= 0 and int(api_corr.max(initial=0)) <= mask:
        # One process: the correlation id alone is the key (no key array to build).
        api_key = api_corr
        op_key = np.where(op_pid == int(api_pid[0]), op_corr.astype(np.int64) & mask, -1)
    else:
        api_key = (api_pid.astype(np.int64) << 32) | (api_corr.astype(np.int64) & mask)
        op_key = (op_pid.astype(np.int64) << 32) | (op_corr.astype(np.int64) & mask)
    valid = api_corr > 0
    rows = None if bool(valid.all()) else np.flatnonzero(valid)
    keys = api_key if rows is None else api_key[rows]
    if keys.size > 1 and not bool((keys[1:] > keys[:-1]).all()):
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        rows = order if rows is None else rows[order]
    if keys.size == 0:
        return np.full(op_key.size, -1, dtype=np.int64)
    if keys.dtype != np.int64:          # search in the keys' own type: no int64 copy
        info = np.iinfo(keys.dtype)
        op_key = np.where((op_key >= info.min) & (op_key <= info.max), op_key, -1
                          ).astype(keys.dtype)
    pos = np.searchsorted(keys, op_key)
    pos = np.minimum(pos, keys.size - 1)
    hit = keys[pos] == op_key
    found = pos if rows is None else rows[pos]
    return np.where(hit, found, -1)


def attach_launches(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Add the launching API call's start/end/thread/name to GPU ops, joined on
    (process, correlation id): correlation ids are unique per process only."""
    n = len(ops)
    api_start = np.full(n, np.nan)
    api_end = np.full(n, np.nan)
    gtid = np.full(n, np.nan)
    names = api["name"] if len(api) else pd.Series(pd.Categorical([]))
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype("category")
    codes = np.full(n, -1, dtype=np.int32)
    if n and len(api):
        row = match_rows(ops["pid"].to_numpy(), ops["corr"].to_numpy(),
                         api["pid"].to_numpy(), api["corr"].to_numpy())
        hit = row >= 0
        rows = row[hit]
        api_start[hit] = api["start"].to_numpy()[rows]
        api_end[hit] = api["end"].to_numpy()[rows]
        gtid[hit] = api["gtid"].to_numpy()[rows]
        codes[hit] = names.cat.codes.to_numpy()[rows]
    ops["api_start"] = api_start
    ops["api_end"] = api_end
    ops["gtid"] = gtid
    ops["api_name"] = pd.Categorical.from_codes(codes, categories=names.cat.categories,
                                                validate=False)
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
                  threads=loader.threads(), osrt_source=OsrtSource(db.path))
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
