"""SQL -> typed frames, as gpugap.report.schema declares nsys's tables and columns.

Every table and column is optional: a missing table gives an empty frame, a missing
optional column a column of NaN (or a documented fallback), and what was missing is
noted in ``ReportInfo.warnings`` when it weakens a verdict.

Nothing read is trusted: values are validated as they are read, bad rows dropped or
repaired and counted (the rules are in gpugap.report.validate).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from gpugap import intervals as tl
from gpugap.errors import GpugapError, ReportError
from gpugap.memory import give_back
from gpugap.report import columns as reads
from gpugap.report import prefetch
from gpugap.report import schema as S
from gpugap.report import validate as V
from gpugap.report.cache import open_export
from gpugap.report.columns import ID_FILL, int_sql, text_sql
from gpugap.report.columns import ID_MASK as _ID_MASK
from gpugap.report.columns import PID_SHIFT as _PID_SHIFT
from gpugap.report.compressed import Decompressed
from gpugap.report.database import Database, quote_id
from gpugap.report.host import HostEvidenceSource
from gpugap.report.reader import Col
from gpugap.report.table import (
    Labels,
    SparseInts,
    Table,
    code_dtype,
    descending,
    distinct,
    factorize,
    inner_join,
)
from gpugap.report.trace import (
    EVENT_WAIT_COLUMNS,
    NO_CALL,
    NO_GRAPH_NODE,
    OSRT_COLUMNS,
    PROCESS_COLUMNS,
    ReportInfo,
    Trace,
)
from gpugap.report.validate import as_int

# Domains nsys creates itself for traced libraries (-t cublas, -t cudnn, ...).
LIBRARY_DOMAINS = frozenset({"cuBLAS", "cuDNN", "cuSPARSE", "cuFFT", "cuSOLVER", "CUDA"})

_API_SUFFIX = re.compile(r"(_v\d+)+$")
_PER_THREAD = re.compile(r"_pt(sz|ds)")
# Kernel launch calls (normalized names): each should leave a kernel with its
# correlation id, unless made while its stream was being captured into a graph.
_LAUNCH = re.compile(r"^cu(da)?Launch(Kernel(ExC?)?|CooperativeKernel(MultiDevice)?|Grid"
                     r"(Async)?)?$")
_CAPTURE_BEGIN = re.compile(r"^cu(da)?StreamBeginCapture(ToGraph)?$")
_CAPTURE_END = re.compile(r"^cu(da)?StreamEndCapture$")
_NO_EVENT = 0xFFFFFFFF      # a sync's eventId where it waited on no event (CUPTI)
MIN_LAUNCHES = 8            # launch calls needed before missing kernels mean lost data
LOST_SHARE = 0.5            # ... and the share of them without a kernel that does

# The frames' columns and dtypes (an empty frame's), declared in gpugap.report.schema.
KERNEL_COLUMNS = S.frame_columns(S.KERNEL)
LAUNCH_COLUMNS = S.LAUNCH_COLUMNS
MEMCPY_COLUMNS = S.frame_columns(S.MEMCPY)
MEMSET_COLUMNS = S.frame_columns(S.MEMSET)
GRAPH_COLUMNS = S.frame_columns(S.GRAPH)
API_COLUMNS = S.frame_columns(S.RUNTIME)
SYNC_COLUMNS = S.frame_columns(S.SYNC)
NVTX_COLUMNS = S.frame_columns(S.NVTX)
STREAM_COLUMNS = S.frame_columns(S.STREAMS)
THREAD_COLUMNS = S.frame_columns(S.THREADS)

# Device limits: (column, candidates in TARGET_INFO_GPU, default, largest valid value);
# the other numbers and the text of TARGET_INFO_GPU: column -> candidates.
DEVICE_LIMITS = {c.name: (c.candidates, int(c.default), c.bounds[1]) for c in S.GPUS.columns
                 if c.invalid == "default" and c.bounds is not None and c.default is not None}
DEVICE_INFO = {c.name: c.candidates for c in S.GPUS.columns
               if c.kind == "int" and c.name not in DEVICE_LIMITS and not c.required}
DEVICE_TEXT = {c.name: c.candidates for c in S.GPUS.columns if c.kind == "text"}



class Loader:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.problems = db.problems
        self.warnings: list[str] = []
        self._strings: tuple[np.ndarray, np.ndarray] | None = None
        self._limit: int | None = None
        self.capture: tuple[int, int] | None = None    # validated capture window
        self.capture_trusted = False
        self.emptied: list[str] = []       # tables that had rows and lost all of them

    # --- helpers ----------------------------------------------------------------------
    def limit(self, starts: np.ndarray) -> int:
        """The latest valid time (see validate.time_limit), fixed by the first table
        read: *starts* are its raw start times."""
        if self._limit is None:
            self._limit, self.capture_trusted = V.time_limit(
                self.capture, V.reference_time(starts), self.problems)
        return self._limit

    def read_capture(self) -> None:
        """ANALYSIS_DETAILS's capture window, when valid (0 <= start < stop)."""
        t = S.CAPTURE
        if not reads.usable(self.db, t.name):
            return
        row = self.db.rows(f'SELECT {", ".join(quote_id(c.nsys) for c in t.columns)} '
                           f"FROM {quote_id(t.name)} LIMIT 1")
        if not row:
            return
        lo, hi = (as_int(v, 0, V.MAX_TIME_NS - 1) for v in row[0])
        if lo is None or hi is None or hi <= lo:
            self.problems.note("ANALYSIS_DETAILS:invalid", "ANALYSIS_DETAILS holds no valid "
                               "capture start/stop time: ignored")
            return
        self.capture = (lo, hi)

    @property
    def strings(self) -> tuple[np.ndarray, np.ndarray]:
        """StringIds as (ids, values): ids sorted and distinct (the first row of an id
        wins), values str or None (NULL, BLOB or a number: shown as '<id>')."""
        if self._strings is None:
            ids, values = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
            if reads.usable(self.db, S.STRINGS.name):
                raw = self.db.frame(*reads.select_sql(self.db, S.STRINGS))
                ids = _ids(raw["id"]).astype(np.int64)
                flags = _ids(raw["value_flag"]).astype(np.int64)
                self.problems.add("StringIds:id", np.count_nonzero(ids < 0),
                                  "strings in StringIds without a valid id: ignored")
                self.problems.add("StringIds:value", np.count_nonzero(flags == 1),
                                  "strings in StringIds that are not text (NULL, BLOB or "
                                  "a number): shown as <id>")
                self.problems.add("StringIds:long", np.count_nonzero(flags == 2),
                                  f"strings longer than {V.MAX_NAME} characters: cut")
                keep = ids >= 0
                ids, first = np.unique(ids[keep], return_index=True)
                values = raw["value"].astype(object)[keep][first]
                values[~_present(values)] = None       # NULL may come back as NaN
            self._strings = (ids, values)
        return self._strings

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Strings of *ids* (object array; None where StringIds lacks a usable one)."""
        table, values = self.strings
        out = np.full(ids.shape, None, dtype=object)
        if table.size and ids.size:
            pos = np.minimum(np.searchsorted(table, ids), table.size - 1)
            hit = table[pos] == ids
            out[hit] = values[pos[hit]]
        return out

    def names(self, ids: np.ndarray, transform: Callable[[str], str] | None = None,
              what: str | None = None) -> Labels:
        """StringIds ids -> Labels of names (categories sorted; NULL -> '<unnamed>', an
        id without a usable string -> '<id>')."""
        return self._name_codes(ids, [transform], what)[0]

    def _name_codes(self, ids: np.ndarray, transforms: list[Callable[[str], str] | None],
                    what: str | None = None) -> list[Labels]:
        """One Labels per transform for the same ids, each distinct id mapped once
        through a lookup table (no sort of the rows). *what* names the rows, to count
        those whose name is missing."""
        ids = _ids(ids)
        if ids.size == 0:
            return [Labels(np.zeros(0, dtype=np.int8), []) for _ in transforms]
        lo, hi = int(ids.min()), int(ids.max())
        # StringIds ids are small: counted over [base, hi] instead of sorted; from 0
        # where that is small too (no shifted copy of the ids).
        base = 0 if 0 <= lo and hi < (1 << 24) else lo
        dense = hi - base < (1 << 24)
        if dense:
            shifted = ids if base == 0 else ids - base
            counts = np.bincount(shifted)
            present = np.flatnonzero(counts)
            counts = counts[present]
            present = present + base
        else:
            present, counts = np.unique(ids, return_counts=True)
        found = self.lookup(present)
        missing = np.fromiter((v is None for v in found), dtype=bool, count=found.size)
        if what is not None and missing.any():
            self.problems.add(f"{what}:name", int(counts[missing].sum()),
                              f"{what} whose name is missing (NULL, or an id StringIds "
                              "lacks or holds no text for): shown as '<unnamed>' or '<id>'")
        raw = [v if v is not None else ("<unnamed>" if i < 0 else f"<{i}>")
               for i, v in zip(present.tolist(), found.tolist(), strict=True)]
        out = []
        for transform in transforms:
            values = raw if transform is None else [transform(v) for v in raw]
            # Distinct ids may map to equal strings (after transform): fold them.
            cats, remap = np.unique(np.array(values, dtype=object), return_inverse=True)
            remap = remap.astype(code_dtype(cats.size))
            if dense:
                lut = np.zeros(hi - base + 1, dtype=remap.dtype)
                lut[present - base] = remap
                codes = np.take(lut, shifted)      # (faster than lut[shifted])
            else:
                codes = remap[np.searchsorted(present, ids)]
            out.append(Labels(codes, cats))
        return out

    def column(self, table: str, *candidates: str, default: str = "NULL") -> str:
        """The first of *candidates* that *table* has, quoted, else *default* (SQL)."""
        return reads.column(self.db, table, *candidates, default=default)

    def int_column(self, table: str, *candidates: str, fill: int, default: str | None = None
                   ) -> str:
        """SQL for an integer column: the first of *candidates* that *table* has, its
        values that are not integers read as *fill*; *default* (else *fill*) when the
        table has none of them."""
        col = self.column(table, *candidates, default="")
        return int_sql(col, fill) if col else str(fill if default is None else default)

    def enum_labels(self, table: str, values: np.ndarray) -> Labels:
        """Enum ids -> Labels of their labels (NULL/negative -> 'Unknown', an id the
        table lacks -> '<id>'), mapping each distinct id once."""
        labels = self.db.enum(table)
        present, inverse = np.unique(_ids(values), return_inverse=True)
        mapped = [labels.get(v, "Unknown" if v < 0 else f"<{v}>") for v in present.tolist()]
        cats, remap = np.unique(np.array(mapped, dtype=object), return_inverse=True)
        return Labels(remap[inverse.reshape(-1)].astype(code_dtype(cats.size)), cats)

    @staticmethod
    def pid_of(gid: np.ndarray) -> np.ndarray:
        return (_ids(gid, 0) >> _PID_SHIFT) & _ID_MASK

    def _checked(self, table: str, data: dict[str, np.ndarray], what: str
                 ) -> dict[str, np.ndarray]:
        """Event rows with valid times only (validate.time_mask); remembers a table
        that had rows and lost them all."""
        n = data["start"].size
        data = V.take(data, V.time_mask(data["start"], data["end"],
                                        self.limit(data["start"]), what, self.problems))
        if n and not data["start"].size:
            self.emptied.append(table)
        return data

    # --- tables -----------------------------------------------------------------------
    def run(self, read: reads.Read) -> dict[str, np.ndarray]:
        """The columns of *read*: read ahead by gpugap.report.prefetch, else now."""
        early = prefetch.take(self.db.path, read)
        return early if early is not None else read.run(self.db)

    def _fix_ids(self, data: dict[str, np.ndarray], table: S.Table
                 ) -> dict[str, np.ndarray]:
        """Ids outside their declared bounds set to 0 (unknown), counted."""
        for c in table.read():
            if c.invalid == "zero" and c.bounds is not None and c.read_as in data:
                data[c.read_as] = V.fix_ids(data[c.read_as], c.bounds[1], table.what,
                                            c.label or c.name, self.problems)
        return data

    def gpu_frame(self, read: reads.Read | None, table: S.Table) -> Table:
        """GPU activity rows (see columns.gpu_read) as *table* declares them: start,
        end, device, context, stream, corr, pid, then its own columns; an empty table
        without the table. Rows without valid times or with a value its declaration
        drops (an impossible device) are dropped; invalid ids become 0; names and enum
        labels are looked up, other values clamped to their bounds."""
        if read is None:
            return Table.empty_of(S.frame_columns(table) | LAUNCH_COLUMNS)
        what = table.what
        data = self.run(read)
        n = data["start"].size
        mask = V.time_mask(data["start"], data["end"], self.limit(data["start"]), what,
                           self.problems)
        for c in table.read():
            if c.invalid != "drop" or c.bounds is None:
                continue
            values, (lo, hi) = data[c.read_as], c.bounds
            if not V.in_range(values, lo, hi):
                bad = (values < lo) | (values > hi)
                self.problems.add(f"{what}:{c.name}",
                                  np.count_nonzero(bad if mask is None else bad & mask),
                                  f"{what} on an invalid {c.label or c.name} id (NULL, not "
                                  f"an integer, negative or >= {hi + 1}): dropped")
                mask = ~bad if mask is None else mask & ~bad
        data = V.take(data, mask)
        if n and not data["start"].size:
            self.emptied.append(read.table)
        columns: dict[str, Any] = dict(self._fix_ids(data, table))
        counted = False
        # Names and enum labels replace their ids, after the other columns (as ever).
        for c in table.read():
            if c.kind == "name":      # the first name's missing ones are counted
                columns[c.name] = self.names(columns.pop(c.read_as),
                                             what=None if counted else what)
                counted = True
            elif c.kind == "enum":
                columns[c.name] = self.enum_labels(c.enum, columns.pop(c.read_as))
        for c in table.read():
            if c.invalid == "clamp" and c.bounds is not None:
                columns[c.name] = V.clamp(columns[c.name], *c.bounds, what,
                                          c.label or c.name, self.problems)
        for c in table.read():
            if not c.frame:
                columns.pop(c.name, None)
        return Table(columns, int(data["start"].size))

    def kernels(self) -> Table:
        frame = self.gpu_frame(reads.kernel_read(self.db), S.KERNEL)
        graph = frame["graph_node"].astype(np.int64, copy=False)    # -1: not from a graph
        if graph.size and int(np.count_nonzero(graph >= 0)) * 10 < graph.size:
            # Few kernels come from CUDA graphs: store only those (a sparse column).
            graph_node: Any = SparseInts.of(graph, NO_GRAPH_NODE)
        else:
            graph_node = graph
        del graph

        def product(*cols: str) -> np.ndarray:
            # In int64: the factors are clamped to CUDA's limits, so it never overflows.
            out = frame[cols[0]].astype(np.int64)
            for c in cols[1:]:
                np.multiply(out, frame[c], out=out)
            return out

        return frame.with_columns(
            graph_node=graph_node,
            blocks=product("grid_x", "grid_y", "grid_z"),
            threads_per_block=product("block_x", "block_y", "block_z"))

    def memcpys(self) -> Table:
        read = reads.memcpy_read(self.db)
        if read is not None and not self.db.has("ENUM_CUDA_MEM_KIND"):
            self.warnings.append("no ENUM_CUDA_MEM_KIND table: memory kinds of copies "
                                 "unknown, pageable copies cannot be recognised")
        return self.gpu_frame(read, S.MEMCPY)

    def memsets(self) -> Table:
        return self.gpu_frame(reads.memset_read(self.db), S.MEMSET)

    def event_waits(self) -> Table:
        """Stream waits on an event recorded on another device: (start, end, pid,
        src_device: where the event was recorded, dst_device: whose stream waited), from
        the event records and the stream-wait syncs, paired by event and record."""
        records, waits = reads.event_link_reads(self.db)
        if records is None or waits is None:
            return Table.empty_of(EVENT_WAIT_COLUMNS)
        rec = records.run(self.db)
        wait = waits.run(self.db)
        stream_wait = reads.enum_id(self.db, "ENUM_CUPTI_SYNC_TYPE",
                                    "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT")
        on = wait["sync_type_id"] == stream_wait
        wait = {k: v[on] for k, v in wait.items()}
        if not rec["pid"].size or not wait["pid"].size:
            return Table.empty_of(EVENT_WAIT_COLUMNS)
        # Each wait with the records of its event (same process, event and record), in
        # the waits' order, then the device of the wait's own context (a sync row's
        # deviceId is not always its stream's): the first record of that context says.
        w, r = inner_join([wait["pid"], wait["event"], wait["sync"]],
                          [rec["pid"], rec["event"], rec["sync"]])
        _, first = np.unique(np.stack([rec["pid"].astype(np.int64),
                                       rec["context"].astype(np.int64)]),
                             axis=1, return_index=True)
        first.sort()
        w2, c = inner_join([wait["pid"][w], wait["context"][w]],
                           [rec["pid"][first], rec["context"][first]])
        src = rec["device"][r][w2].astype(np.int64)
        dst = rec["device"][first][c].astype(np.int64)
        keep = src != dst
        w = w[w2][keep]
        return Table({"start": wait["start"][w].astype(np.int64),
                      "end": wait["end"][w].astype(np.int64),
                      "pid": wait["pid"][w].astype(np.int64),
                      "src_device": src[keep], "dst_device": dst[keep]})

    def graphs(self, kernels: Table) -> Table:
        """Graph executions: the GRAPH_TRACE rows (graph-level tracing, ``nodes`` 0), or
        else, when kernels carry graph node ids (node-level tracing), one execution per
        cudaGraphLaunch (its correlation id, in its process) from its first node's start
        to its last node's end, with its node count."""
        frame = self.gpu_frame(reads.graph_read(self.db), S.GRAPH)
        if len(frame):
            return frame.with_columns(nodes=np.zeros(len(frame), dtype=np.int32))
        node = kernels.column("graph_node")
        rows = (node.positions if isinstance(node, SparseInts)
                else np.flatnonzero(kernels["graph_node"] >= 0))
        if not rows.size:
            return frame
        # A launch's kernels mostly come one after another: runs of one (pid, corr)
        # reduced first, then the runs of each launch (only the columns needed, of the
        # graph's kernels: 10M kernels, no copy of the table).
        pid, corr = kernels["pid"][rows], kernels["corr"][rows]
        runs = np.flatnonzero(np.r_[True, (pid[1:] != pid[:-1]) | (corr[1:] != corr[:-1])])
        run_start = np.minimum.reduceat(kernels["start"][rows], runs)
        run_end = np.maximum.reduceat(kernels["end"][rows], runs)
        run_size = np.diff(np.r_[runs, rows.size])
        # One execution per (pid, corr), numbered in order of first appearance.
        pid_code, _ = factorize(pid[runs])
        corr = corr[runs].astype(np.int64)
        launch, _ = factorize(pid_code * (int(corr.max()) + 1) + corr)
        del pid, pid_code, corr
        seen = np.maximum.accumulate(launch)
        first = runs[np.flatnonzero(np.r_[True, launch[1:] > seen[:-1]])]
        del seen
        n = first.size
        start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(start, launch, run_start)
        end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(end, launch, run_end)
        nodes = np.zeros(n, dtype=np.int64)
        np.add.at(nodes, launch, run_size)
        at = rows[first]
        # nsys's node ids hold the graph id in their upper 32 bits (2025.x exports).
        node_id = kernels["graph_node"][at].astype(np.int64)
        node_id = np.where((node_id >= 0) & (node_id < 2**62), node_id, 0)
        order = np.argsort(start, kind="stable")
        per = {"pid": kernels["pid"][at], "corr": kernels["corr"][at], "start": start,
               "end": end, "device": kernels["device"][at],
               "stream": kernels["stream"][at],
               "graph_id": (node_id // 2**32).astype(np.int64),
               "nodes": nodes}
        per = {k: v[order] for k, v in per.items()}
        per["context"] = per["graph_exec_id"] = np.zeros(n, dtype=np.int64)
        return Table({c: per[c] for c in GRAPH_COLUMNS})

    def api(self) -> Table:
        parts = [self.run(read) for read in reads.api_reads(self.db)]
        if not parts:
            return Table.empty_of(API_COLUMNS)
        data = ({k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                if len(parts) > 1 else parts[0])
        data = self._checked("CUDA API tables", data, "CUDA API calls")
        start = data["start"]
        if not tl.is_sorted(start):
            order = np.argsort(start, kind="stable")
            data = {k: v[order] for k, v in data.items()}
        data = self._fix_ids(data, S.RUNTIME)
        gtid, corr = data["gtid"], data["corr"]
        raw, name = self._name_codes(data.pop("name_id"), [None, normalize_api_name],
                                     "CUDA API calls")
        per_thread = np.array([bool(_PER_THREAD.search(c)) for c in raw.categories]
                              + [False], dtype=bool)
        return Table({
            "start": data["start"], "end": data["end"], "gtid": gtid,
            "pid": _id_field(gtid, _PID_SHIFT), "tid": _id_field(gtid, 0),
            "corr": corr, "name": name, "driver": data["driver"].astype(bool),
            "per_thread": np.take(per_thread, raw.codes)})

    def syncs(self) -> Table:
        read = reads.sync_read(self.db)
        frame = self.gpu_frame(read, S.SYNC)
        if read is not None:
            # -1 for no event: NULL, or CUPTI's "not applicable" (0xFFFFFFFF).
            event = frame["event"].astype(np.int64)
            frame = frame.with_columns(event=np.where(event == _NO_EVENT, -1, event))
        return frame

    def _nvtx_rows(self, ints: reads.Read | None, text: tuple[str, list[str]]
                   ) -> dict[str, np.ndarray]:
        """The NVTX rows' integer columns and their text, row for row
        (columns.nvtx_rows): read ahead by gpugap.report.prefetch, else now."""
        early = prefetch.take_nvtx(self.db.path, text[0])
        return early if early is not None else reads.nvtx_rows(self.db.path, ints, text)

    def nvtx(self, end_of_time: int) -> Table:
        t = S.NVTX.name
        found = reads.nvtx_reads(self.db)
        if found is None:
            return Table.empty_of(NVTX_COLUMNS)
        kinds, domain_create = reads.nvtx_kinds(self.db)
        raw = self._nvtx_rows(*found)
        if not raw["start"].size:
            return Table.empty_of(NVTX_COLUMNS)
        what = S.NVTX.what
        flags = raw["text_flag"].astype(np.int64)
        self.problems.add("NVTX:text", np.count_nonzero(flags == 1),
                          f"{what} whose text is not text (a BLOB or a number): ignored")
        self.problems.add("NVTX:long", np.count_nonzero(flags == 2),
                          f"{what} whose text is longer than {V.MAX_NAME} characters: cut")
        gtid = V.fix_ids(_ids(raw["gtid"]), V.MAX_GTID, what, "thread", self.problems)
        pid = self.pid_of(gtid)
        domain_id = V.fix_ids(_ids(raw["domain_id"]), V.MAX_ID, what, "domain", self.problems)
        # Names: inline text wins, else the registered string (nvtx's Python package
        # registers them: text NULL, name in textId).
        registered = self.lookup(_ids(raw["text_id"]))
        text = raw["text"]
        name = np.where(_present(text), text, registered)
        event = _ids(raw["type"])
        is_domain = event == domain_create
        domains = {(int(p), int(d)): n for p, d, n in
                   zip(pid[is_domain].tolist(), domain_id[is_domain].tolist(),
                       name[is_domain].tolist(), strict=True) if isinstance(n, str)}
        rows = np.flatnonzero(~is_domain)
        # Times: an invalid end (NULL, not an integer) is an open range; then the usual
        # rules (validate.time_mask).
        start = _ids(raw["start"])[rows]
        end = _ids(raw["end"])[rows]
        unclosed = (end < 0) & (start > 0)
        if unclosed.any():
            self.warnings.append(f"{int(unclosed.sum())} NVTX range(s) never closed: "
                                 "treated as ending with the capture")
            end = np.where(unclosed, np.maximum(start, end_of_time), end)
        data = self._checked(t, {"start": start, "end": end, "row": rows}, what)
        rows = data["row"]
        gtid, pid, domain_id = gtid[rows], pid[rows], domain_id[rows]
        # Domains and kinds looked up once per distinct (process, domain id) and event
        # type, not per range. (pid < 2^24 and domain ids < 2^32: one int64 key.)
        keys, key_of_row = np.unique((pid.astype(np.int64) << 32) | domain_id,
                                     return_inverse=True)
        key_of_row = key_of_row.reshape(-1)
        key_domains = np.array(
            [domains.get((k >> 32, k & 0xFFFFFFFF), "" if k & 0xFFFFFFFF == 0
                         else f"domain {k & 0xFFFFFFFF}") for k in keys.tolist()],
            dtype=object)
        domain = key_domains[key_of_row]
        types, type_of_row = np.unique(event[rows], return_inverse=True)
        type_kinds = np.array([kinds.get(k) for k in types.tolist()], dtype=object)
        name = name[rows]
        name[~_present(name)] = "<unnamed>"
        # Domains sorted by their strings: distinct keys of one name share a rank.
        _, key_rank = np.unique(key_domains.astype(str), return_inverse=True)
        columns = {"start": data["start"], "end": data["end"], "name": name, "domain": domain,
                   "gtid": gtid, "pid": pid, "tid": gtid & _ID_MASK,
                   "library": np.isin(key_domains, list(LIBRARY_DOMAINS))[key_of_row],
                   "kind": type_kinds[type_of_row.reshape(-1)]}
        # Depth within each (thread, domain) stack: ordered by thread, domain, start and
        # end (latest first); then the rows by start (stable: that order among equals).
        domain_rank = key_rank.reshape(-1)[key_of_row]
        order = np.lexsort((-columns["end"], columns["start"], domain_rank, gtid))
        depth = np.empty(rows.size, dtype=np.int64)
        depth[order] = nesting_depth(columns["start"][order], columns["end"][order],
                                     gtid[order], domain_rank[order])
        columns["depth"] = depth
        by_start = order[np.argsort(columns["start"][order], kind="stable")]
        return Table({c: columns[c][by_start] for c in NVTX_COLUMNS})

    def streams(self) -> Table:
        parts: list[dict[str, np.ndarray]] = []
        flag_names = self.db.enum("ENUM_CUPTI_STREAM_TYPE")
        null_flag = reads.enum_id(self.db, "ENUM_CUPTI_STREAM_TYPE",
                                  "CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL")
        if self.db.has(S.STREAMS.name, *S.STREAMS.required):
            s = self.db.frame(*reads.select_sql(self.db, S.STREAMS))
            flag = _ids(s.pop("flag_id"))
            s["legacy_default"] = flag == null_flag
            s["flag"] = np.array([flag_names.get(v, "Unknown") for v in flag.tolist()],
                                 dtype=object)
            parts.append(s)
        # The NULL stream id per context, from whichever table this version writes.
        for table in (S.CONTEXTS, S.NULL_STREAMS):
            if self.db.has(table.name, *table.required):
                n = self.db.frame(*reads.select_sql(self.db, table))
                size = len(next(iter(n.values())))
                n["flag"] = np.full(size, "Null stream", dtype=object)
                n["priority"] = np.zeros(size, dtype=np.int64)
                n["legacy_default"] = np.ones(size, dtype=bool)
                parts.append(n)
        if not parts:
            return Table.empty_of(STREAM_COLUMNS)
        names = list(dict.fromkeys(c for p in parts for c in p))
        frame = {c: np.concatenate([p[c] if c in p
                                    else np.full(len(p["pid"]), np.nan) for p in parts])
                 for c in names}
        for c in ("pid", "stream", "context", "priority"):
            frame[c] = _ids(frame[c])
        bad = ((frame["pid"] < 0) | (frame["pid"] > _ID_MASK) | (frame["stream"] < 0)
               | (frame["stream"] > V.MAX_ID))
        if bad.any():
            self.problems.add("streams:id", np.count_nonzero(bad), "streams described "
                              "without a valid process or stream id: ignored")
            frame = {c: v[~bad] for c, v in frame.items()}
        frame["context"] = V.fix_ids(frame["context"], V.MAX_ID, "streams", "context",
                                     self.problems)
        legacy = frame["legacy_default"].astype(bool)
        frame["legacy_default"] = legacy
        # Legacy default streams first (a stream described both ways is one), the first
        # row of each (pid, stream) kept.
        order = descending(legacy)
        key = np.stack([frame["pid"][order], frame["stream"][order]])
        _, first = np.unique(key, axis=1, return_index=True)
        keep = order[np.sort(first)]
        return Table({c: v[keep] for c, v in frame.items()})

    def devices(self) -> Table:
        t = S.GPUS.name
        cols = ["device", "name", *DEVICE_LIMITS, "cc_major", "cc_minor", "memory_bytes",
                "clock_hz", "bus", "uuid", "chip"]
        device_id = S.GPUS.column("device").nsys
        if t not in self.db.tables or device_id not in self.db.columns(t):
            if reads.KERNELS in self.db.tables:
                self.warnings.append("no TARGET_INFO_GPU table: device limits unknown, "
                                     "occupancy estimates assume a 132-SM Hopper GPU")
            return Table({c: np.zeros(0, dtype=object) for c in cols}, 0)
        select = {"device": int_sql(quote_id(device_id), ID_FILL)}
        select |= {c: self.int_column(t, *cands, fill=-1)
                   for c, (cands, _, _) in DEVICE_LIMITS.items()}
        select |= {c: self.int_column(t, *cands, fill=-1) for c, cands in DEVICE_INFO.items()}
        select |= {c: text_sql(self.column(t, *cands)) for c, cands in DEVICE_TEXT.items()}
        frame = self.db.frame(f'SELECT {", ".join(select.values())} FROM "{t}"',
                              list(select))
        ids = _ids(frame["device"])
        bad = (ids < 0) | (ids >= V.MAX_DEVICE)
        if bad.any():
            self.problems.add("devices:id", np.count_nonzero(bad), "GPUs in TARGET_INFO_GPU "
                              "without a valid device id: ignored")
            frame = {c: v[~bad] for c, v in frame.items()}
        rows = int((~bad).sum())
        missing, invalid = [], 0
        for c, (_, default, hi) in DEVICE_LIMITS.items():
            values = _ids(frame[c])
            wrong = (values < 1) | (values > hi)
            if rows and bool((values == -1).all()):
                missing.append(c)
            else:
                invalid += int(np.count_nonzero(wrong))
            frame[c] = np.where(wrong, default, values)
        if missing:
            self.warnings.append(f"device limits missing from the report ({', '.join(missing)})"
                                 ": occupancy estimates use Hopper-class defaults")
        self.problems.add("devices:limits", invalid, "device limits in TARGET_INFO_GPU out "
                          "of range (not positive integers, or absurd): Hopper-class "
                          "defaults used")
        frame["device"] = _ids(frame["device"])
        frame["max_threads_per_sm"] = frame["max_warps_per_sm"] * frame["warp_size"]
        major, minor = _ids(frame["cc_major"]), _ids(frame["cc_minor"])
        frame["compute_capability"] = np.array(
            [f"{a}.{b}" if 0 <= a < 100 and 0 <= b < 100 else None
             for a, b in zip(major.tolist(), minor.tolist(), strict=True)], dtype=object)
        for c in ("memory_bytes", "clock_hz"):
            values = _ids(frame[c])
            valid = (values >= 0) & (values < V.MAX_TIME_NS)
            frame[c] = (values if rows and bool(valid.all())
                        else np.where(valid, values.astype(np.float64), np.nan))
        _, first = np.unique(frame["device"], return_index=True)
        keep = np.sort(first)
        return Table({c: v[keep] for c, v in frame.items()})

    def known_devices(self, devices: Table, frames: list[Table]) -> Table:
        """*devices* plus a placeholder row (default limits) for each device id that GPU
        ops use but the device table does not list, counted: no op refers to a device
        the analysis cannot look up."""
        if devices.empty:
            return devices
        used = set()
        for f in frames:
            if len(f):
                used.update(distinct(f["device"]).tolist())
        unknown = sorted(used - set(devices["device"].tolist()))
        if not unknown:
            return devices
        ops = sum(int(np.isin(f["device"], unknown).sum()) for f in frames if len(f))
        self.problems.add("devices:unknown", ops, "GPU operations on device ids that "
                          f"TARGET_INFO_GPU does not list ({', '.join(map(str, unknown[:5]))}"
                          f"{', ...' if len(unknown) > 5 else ''}): device limits assumed "
                          "(Hopper-class defaults)")
        row: dict[str, Any] = {c: None for c in devices.columns}
        row |= {c: default for c, (_, default, _) in DEVICE_LIMITS.items()}
        row["max_threads_per_sm"] = row["max_warps_per_sm"] * row["warp_size"]
        row["memory_bytes"] = row["clock_hz"] = np.nan
        out: dict[str, np.ndarray] = {}
        for c in devices.columns:
            extra = np.array([d if c == "device" else row[c] for d in unknown])
            known = devices[c]
            if c in ("device", *DEVICE_LIMITS, "max_threads_per_sm"):
                out[c] = np.concatenate([known, extra]).astype(np.int64)
            elif known.dtype.kind in "iuf" and extra.dtype.kind in "iuf":
                out[c] = np.concatenate([known.astype(np.float64), extra.astype(np.float64)])
            else:
                out[c] = np.concatenate([known.astype(object), extra.astype(object)])
        return Table(out)

    def threads(self) -> Table:
        t = S.THREADS.name
        if not reads.usable(self.db, t):
            return Table.empty_of(THREAD_COLUMNS)
        frame = self.db.frame(*reads.select_sql(self.db, S.THREADS, ("gtid", "name")))
        gtid = _ids(frame["gtid"])
        ok = gtid >= 0
        gtid = gtid[ok]
        _, first = np.unique(gtid, return_index=True)
        keep = np.sort(first)
        name = self.names(_ids(frame["name_id"])[ok]).strings()
        return Table({"gtid": gtid[keep], "pid": self.pid_of(gtid[keep]),
                      "tid": gtid[keep] & _ID_MASK, "name": name[keep]})

    def processes(self) -> Table:
        """The processes nsys saw (pid, name: the executable as started, e.g. 'python3',
        '/usr/bin/ptxas'), one row per pid."""
        t = S.PROCESSES
        if not self.db.has(t.name, *t.required):
            return Table.empty_of(PROCESS_COLUMNS)
        frame = self.db.frame(*reads.select_sql(self.db, t, flags=False))
        pid = _ids(frame["pid"])
        ok = np.flatnonzero(pid >= 0)
        _, first = np.unique(pid[ok], return_index=True)
        keep = ok[np.sort(first)]
        name = frame["name"].astype(object)[keep]
        name[~_present(name)] = ""
        return Table({"pid": pid[keep], "name": name})

    def _osrt_cols(self, t: str) -> list[Col]:
        return list(reads.table_read(self.db, S.OSRT, tuple(OSRT_COLUMNS)).cols)

    def _osrt_gtid(self) -> str:
        """SQL: OSRT_API's thread column (0 where the table has none)."""
        c = S.OSRT.column("gtid")
        return self.column(S.OSRT.name, *c.candidates, default=str(c.default))

    def osrt(self) -> Table:
        t = S.OSRT.name
        if not reads.usable(self.db, t):
            return Table.empty_of(OSRT_COLUMNS)
        return self._osrt_frame(self.db.read(t, self._osrt_cols(t)))

    def osrt_overlapping(self, windows: dict[int, tuple[np.ndarray, np.ndarray]]
                         ) -> Table:
        """OS runtime calls of each thread that overlap one of its windows [lo, hi):
        one scan of OSRT_API, the test done by SQLite (see _window_test)."""
        t = S.OSRT.name
        if not reads.usable(self.db, t) or not windows:
            return Table.empty_of(OSRT_COLUMNS)
        gtid = self._osrt_gtid()
        cases = " ".join(f"WHEN {int(g)} THEN {_window_test(lo, hi)}"
                         for g, (lo, hi) in sorted(windows.items()) if len(lo))
        if not cases:
            return Table.empty_of(OSRT_COLUMNS)
        lo_all = min(int(lo.min()) for lo, _ in windows.values() if len(lo))
        hi_all = max(int(hi.max()) for lo, hi in windows.values() if len(lo))
        where = (f'"end" > {lo_all} AND "start" < {hi_all} AND '
                 f'(CASE ifnull({gtid}, 0) {cases} END) > "start"')
        return self._osrt_frame(self.db.read(t, self._osrt_cols(t), where=where))

    def osrt_named(self, pattern: re.Pattern[str], gtids: list[int] | None = None,
                   pids: list[int] | None = None) -> Table:
        """OS runtime calls whose name matches *pattern* (a waitpid, a write), of the
        threads *gtids* and processes *pids* only if given: the names are looked up in
        StringIds first, so SQLite hands over only their rows."""
        t = S.OSRT.name
        if not reads.usable(self.db, t) or gtids == [] or pids == []:
            return Table.empty_of(OSRT_COLUMNS)
        ids, values = self.strings
        hit = [int(i) for i, v in zip(ids.tolist(), values.tolist(), strict=True)
               if v is not None and pattern.search(v)]
        if not hit:
            return Table.empty_of(OSRT_COLUMNS)
        # The range first: SQLite tests it in a comparison or two, an IN list by a lookup
        # in a temporary B-tree per row (half the scan's time on millions of calls).
        name = quote_id(S.OSRT.column("name").nsys)
        where = (f"{name} BETWEEN {min(hit)} AND {max(hit)} AND "
                 f'{name} IN ({", ".join(map(str, hit))})')
        gtid = self._osrt_gtid()
        if gtids is not None:
            where += f" AND {gtid} IN ({', '.join(str(int(g)) for g in gtids)})"
        if pids is not None:
            where += (f" AND ((ifnull({gtid}, 0) >> {_PID_SHIFT}) & {_ID_MASK}) IN "
                      f"({', '.join(str(int(p)) for p in pids)})")
        return self._osrt_frame(self.db.read(t, self._osrt_cols(t), where=where))

    def _osrt_frame(self, data: dict[str, np.ndarray]) -> Table:
        data = self._fix_ids(self._checked(S.OSRT.name, data, S.OSRT.what), S.OSRT)
        calls = Table({"start": data["start"], "end": data["end"], "gtid": data["gtid"],
                       "name": self.names(data["name_id"])})
        start = data["start"]
        if not tl.is_sorted(start):
            calls = calls.rows(np.argsort(start, kind="stable"))
        return calls


def _id_field(gtid: np.ndarray, shift: int) -> np.ndarray:
    """(gtid >> shift) & ID_MASK as int32 (ID_MASK keeps 24 bits), a batch of rows at a
    time: no int64 array of every call in between (tens of millions of API calls)."""
    out = np.empty(gtid.size, dtype=np.int32)
    step = 1 << 22
    for i in range(0, gtid.size, step):
        out[i:i + step] = (gtid[i:i + step] >> shift) & _ID_MASK
    return out


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
    lo, hi = tl.union(lo, hi)

    def tree(i: int, j: int) -> str:
        if j - i == 1:
            return f'CASE WHEN "end" > {int(lo[i])} THEN {int(hi[i])} END'
        m = (i + j) // 2
        return f'CASE WHEN "end" > {int(lo[m])} THEN {tree(m, j)} ELSE {tree(i, m)} END'

    return tree(0, len(lo)) if len(lo) else "NULL"


class OsrtSource:
    """OS runtime calls, read only when needed: a long capture holds tens of millions of
    them and only the few windows a finding explains are ever looked at. Validated like
    the other events (with the report's time limit); what is dropped then is not
    counted in the report's warnings, which were given out already."""

    def __init__(self, path: Path, limit: int | None = None,
                 strings: tuple[np.ndarray, np.ndarray] | None = None, *,
                 held: Decompressed | None = None) -> None:
        self.path = path
        self.limit = limit
        # A compressed report's temporary export: there while this source is.
        self.held = held
        # StringIds as the loading read them (Loader.strings), if it did: each read of
        # the calls names them from these instead of reading the table again.
        self.strings = strings

    def _with_loader(self, work: Callable[[Loader], Table]) -> Table:
        db = Database(self.path)
        try:
            loader = Loader(db)
            loader._limit = self.limit
            loader._strings = self.strings
            return work(loader)
        finally:
            db.close()

    def all(self) -> Table:
        return self._with_loader(lambda loader: loader.osrt())

    def overlapping(self, windows: dict[int, tuple[np.ndarray, np.ndarray]]) -> Table:
        return self._with_loader(lambda loader: loader.osrt_overlapping(windows))

    def named(self, pattern: re.Pattern[str], gtids: list[int] | None = None,
              pids: list[int] | None = None) -> Table:
        return self._with_loader(lambda loader: loader.osrt_named(pattern, gtids, pids))


def normalize_api_name(name: str) -> str:
    """cudaMemcpyAsync_ptsz_v7000 -> cudaMemcpyAsync; cuMemcpyHtoDAsync_v2 -> cuMemcpyHtoDAsync."""
    return _PER_THREAD.sub("", _API_SUFFIX.sub("", name))


def nesting_depth(start: np.ndarray, end: np.ndarray, gtid: np.ndarray, domain: np.ndarray
                  ) -> np.ndarray:
    """Depth of each range within its (thread, domain) stack, for ranges sorted by
    (gtid, domain, start asc, end desc) (*domain*: a code per domain). Vectorised per
    group: a range's depth is the number of ranges that began at or before it (in that
    order) minus those that had already ended when it began, minus one."""
    depth = np.zeros(start.size, dtype=np.int64)
    if not start.size:
        return depth
    changes = (gtid[1:] != gtid[:-1]) | (domain[1:] != domain[:-1])
    boundaries = [0, *(np.flatnonzero(changes) + 1).tolist(), start.size]
    for lo, hi in zip(boundaries[:-1], boundaries[1:], strict=True):
        s, e = start[lo:hi], np.sort(end[lo:hi])
        ended_before = np.searchsorted(e, s, side="right")
        depth[lo:hi] = np.maximum(np.arange(hi - lo) - ended_before, 0)
    return depth


# GPU ops joined to their launch calls a batch at a time (a module setting: tests make it
# small).
OPS_BATCH = 1 << 20


def match_rows(op_pid: np.ndarray, op_corr: np.ndarray, api_pid: np.ndarray,
               api_corr: np.ndarray) -> np.ndarray:
    """For each GPU op: the row of the API call with the same process and correlation
    id (the first in API order when several match), -1 if none. API rows with a
    correlation id <= 0 match nothing."""
    return CallKeys(api_pid, api_corr).rows(op_pid, op_corr)


class CallKeys:
    """The API calls' (process, correlation id) keys, sorted, to find the call of each
    GPU op (``rows``): built once for the kernels, copies, memsets and graphs.

    Exports list API calls in time order, and correlation ids grow with time: when the
    keys are already strictly increasing (checked), no sort is needed."""

    def __init__(self, api_pid: np.ndarray, api_corr: np.ndarray) -> None:
        mask = 0xFFFFFFFF
        single = bool(api_pid.size) and int(api_pid.min()) == int(api_pid.max())
        # One process: the correlation id alone is the key (no key array to build).
        self.pid = int(api_pid[0]) if single else None
        self.by_corr = (single and int(api_corr.min(initial=1)) >= 0
                        and int(api_corr.max(initial=0)) <= mask)
        if self.by_corr:
            api_key = api_corr
        else:
            api_key = (api_pid.astype(np.int64) << 32) | (api_corr.astype(np.int64) & mask)
        valid = api_corr > 0
        rows = None if bool(valid.all()) else np.flatnonzero(valid)
        del valid
        keys = api_key if rows is None else api_key[rows]
        if not tl.is_sorted(keys, strict=True):
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            rows = order if rows is None else rows[order]
        self.keys = keys
        self.key_rows = rows            # the API row of each key; None: the same
        # The ops' ids searched as they are where they have the keys' type (int32, as
        # exports have them): keys are >= 1 and below 2^31, so an op id that is
        # negative (its 32 bits read as 2^31 or more) matches none either way.
        self.same_type = self.by_corr and keys.dtype.kind == "i" and keys.dtype.itemsize <= 4

    def rows(self, op_pid: np.ndarray, op_corr: np.ndarray) -> np.ndarray:
        """For each op: the row of its API call (match_rows), -1 if none."""
        # Runs of ops of one launch (a CUDA graph launch's kernels share its
        # correlation id, one after another): each run searched once.
        if op_pid.size > 1:
            change = (op_pid[1:] != op_pid[:-1]) | (op_corr[1:] != op_corr[:-1])
            if np.count_nonzero(change) * 2 < op_pid.size:
                starts = np.flatnonzero(np.r_[True, change])
                del change
                found = self.rows(op_pid[starts], op_corr[starts])
                return np.repeat(found, np.diff(np.r_[starts, op_pid.size]))
            del change
        mask = 0xFFFFFFFF
        keys, rows = self.keys, self.key_rows
        out = np.full(op_pid.size, -1, dtype=np.int64)
        if keys.size == 0:
            return out
        same_type = self.same_type and op_corr.dtype == keys.dtype
        # The ops a batch at a time: no key or position array of every op.
        step = OPS_BATCH
        for i in range(0, op_pid.size, step):
            pid, corr = op_pid[i:i + step], op_corr[i:i + step]
            if same_type:
                op_key = np.where(pid == self.pid, corr, -1)
            elif self.by_corr:
                op_key = np.where(pid == self.pid, corr.astype(np.int64) & mask, -1)
            else:
                op_key = (pid.astype(np.int64) << 32) | (corr.astype(np.int64) & mask)
            if keys.dtype != op_key.dtype:  # search in the keys' own type: no int64 copy
                info = np.iinfo(keys.dtype)
                op_key = np.where((op_key >= info.min) & (op_key <= info.max), op_key, -1
                                  ).astype(keys.dtype)
            pos = np.minimum(np.searchsorted(keys, op_key), keys.size - 1)
            hit = keys[pos] == op_key
            out[i:i + step] = np.where(hit, pos if rows is None else rows[pos], -1)
        return out


def attach_launches(ops: Table, api: Table, launched: np.ndarray | None = None,
                    calls: np.ndarray | None = None, keys: CallKeys | None = None
                    ) -> Table:
    """Add the launching API call's start/end/thread/name to GPU ops, joined on
    (process, correlation id): correlation ids are unique per process only. Marks the
    API rows that launched an op in *launched* (a bool array over api rows), if given;
    writes the api row of each op (-1: none) into *calls* (an int64 array over the
    ops), if given. *keys*: the API calls' CallKeys, if built already."""
    n = len(ops)
    api_start = np.full(n, NO_CALL, dtype=np.int64)
    api_end = np.full(n, NO_CALL, dtype=np.int64)
    gtid = np.full(n, NO_CALL, dtype=np.int64)
    names = api.labels("name") if len(api) else Labels(np.zeros(0, np.int8), [])
    codes = np.full(n, -1, dtype=code_dtype(names.categories.size))
    if n and len(api):
        if keys is None:
            keys = CallKeys(api["pid"], api["corr"])
        row = keys.rows(ops["pid"], ops["corr"])
        columns = ((api_start, api["start"], NO_CALL), (api_end, api["end"], NO_CALL),
                   (gtid, api["gtid"], NO_CALL),
                   (codes, names.codes.astype(codes.dtype, copy=False), -1))
        step = OPS_BATCH                # a batch of ops at a time: no copies of every row
        for i in range(0, n, step):
            rows = row[i:i + step]
            miss = rows < 0
            # Each column gathered for every op (row -1 clipped to row 0), then the ops
            # without a call given their fill: cheaper than selecting the matched ones.
            for out, values, fill in columns:
                np.take(values, rows, out=out[i:i + step], mode="clip")
                out[i:i + step][miss] = fill
            if launched is not None:
                launched[rows[~miss] if miss.any() else rows] = True
        if calls is not None:
            calls[:] = row
        del row
    return ops.with_columns(api_start=api_start, api_end=api_end, gtid=gtid,
                            api_name=Labels(codes, names.categories))


def _captured(api: Table, rows: np.ndarray) -> np.ndarray:
    """Which API *rows* their thread made while capturing a stream into a CUDA graph
    (between its cudaStreamBeginCapture and cudaStreamEndCapture): such launches run
    later, as part of a graph launch, so no kernel carries their correlation id."""
    names = api.labels("name")          # (the patterns are anchored: search is match)
    begin = names.matching(_CAPTURE_BEGIN)
    end = names.matching(_CAPTURE_END)
    out = np.zeros(rows.size, dtype=bool)
    if not begin.any():
        return out
    gtid, start = api["gtid"], api["start"]
    begins, ends = np.flatnonzero(begin), np.flatnonzero(end)     # (a few calls)
    row_gtid = gtid[rows]
    for thread in np.unique(gtid[begins]).tolist():
        b = np.sort(start[begins[gtid[begins] == thread]])
        e = np.sort(start[ends[gtid[ends] == thread]])
        # Each capture ends at the first EndCapture after it began (or never).
        stop = np.append(e, np.iinfo(np.int64).max)[np.searchsorted(e, b)]
        mine = np.flatnonzero(row_gtid == thread)
        t = start[rows[mine]]
        k = np.searchsorted(b, t, side="right") - 1
        out[mine] = (k >= 0) & (t <= stop[np.maximum(k, 0)])
    return out


def launches_without_kernels(api: Table, launched: np.ndarray) -> tuple[int, int]:
    """(kernel launch calls, those that left no kernel in the report), not counting
    launches made while capturing a CUDA graph."""
    if api.empty:
        return 0, 0
    rows = np.flatnonzero(api.labels("name").matching(_LAUNCH))
    if rows.size:
        rows = rows[~_captured(api, rows)]
    return int(rows.size), int(np.count_nonzero(~launched[rows]))


def _ids(values: np.ndarray, fill: int = -1) -> np.ndarray:
    """Integer ids from a column that may hold NULLs (NaN in a float column, None in an
    object one): those read *fill*. Integer columns as they are."""
    values = np.asarray(values)
    if values.dtype.kind in "iub":
        return values
    if values.dtype.kind == "f":
        return np.where(np.isnan(values), fill, values).astype(np.int64)
    return np.array([fill if v is None or v != v else int(v) for v in values.tolist()],
                    dtype=np.int64)


def _present(values: np.ndarray) -> np.ndarray:
    """Boolean per value: not NULL (None, NaN)."""
    values = np.asarray(values)
    if values.dtype != object:
        return ~np.isnan(values) if values.dtype.kind == "f" else np.ones(values.shape, bool)
    # Item by item, in C: v != None, and v == v (False for NaN only).
    return np.not_equal(values, np.array(None)) & np.equal(values, values)


def load_database(db: Database, shown_path: str, *,
                  held: Decompressed | None = None) -> Trace:
    loader = Loader(db)
    problems = loader.problems
    for line in reads.check_schema(db):
        problems.note(f"schema:{line}", line)
    meta = db.export_meta
    loader.read_capture()
    capture = db.capture_meta
    cuda_flags = [v for k, v in capture.items() if k.endswith("COLLECT_CUDA_TRACE")]
    cuda_traced = (any(v.strip().lower() in ("true", "1") for v in cuda_flags)
                   if cuda_flags else None)

    api = loader.api()
    launched = np.zeros(len(api), dtype=bool)
    keys = CallKeys(api["pid"], api["corr"])          # searched for each kind of op
    kernels = attach_launches(loader.kernels(), api, launched, keys=keys)
    memcpys = loader.memcpys()
    memcpy_calls = np.full(len(memcpys), -1, dtype=np.int64)
    memcpys = attach_launches(memcpys, api, launched, memcpy_calls, keys=keys)
    memsets = attach_launches(loader.memsets(), api, launched, keys=keys)
    graphs = attach_launches(loader.graphs(kernels), api, launched, keys=keys)
    syncs = loader.syncs()
    if loader._limit is None:
        loader.limit(np.zeros(0, dtype=np.int64))
    window = loader.capture if loader.capture_trusted else None
    capture_start, capture_end = window if window is not None else (None, None)
    ends = [int(f["end"].max()) for f in (kernels, memcpys, memsets, graphs, api) if len(f)]
    end_of_time = capture_end or (max(ends) if ends else 0)
    devices = loader.known_devices(loader.devices(),
                                   [kernels, memcpys, memsets, graphs, syncs])
    has_gpu = bool(len(kernels) or len(memcpys) or len(memsets) or len(graphs))
    if loader.emptied and not has_gpu:
        lines = problems.lines()
        raise ReportError(f"{shown_path} is too broken to analyze: every row of "
                          f"{', '.join(loader.emptied)} is invalid"
                          + (f" ({lines[0]})" if lines else "")
                          + "; export the report again (nsys export --type sqlite)")

    # Lost GPU data: launch calls without their kernels, or an nsys older than the CUDA
    # it traced (which loses GPU activity silently).
    launches, orphans = launches_without_kernels(api, launched)
    lost = launches >= MIN_LAUNCHES and orphans > LOST_SHARE * launches
    nsys_version = meta.get("EXPORT_PRODUCT_VERSION")
    cuda = V.cuda_version(db.system_env.get("CudaDriverVersion"))
    needed = V.nsys_too_old(V.version_tuple(nsys_version), cuda)
    if lost:
        loader.warnings.append(
            f"GPU data lost: {orphans} of {launches} kernel launch calls have no kernel in "
            "the report (nsys too old for this CUDA, or the capture was cut short); the "
            "diagnosis is incomplete: capture again with a current Nsight Systems")
    if needed is not None and cuda is not None:
        loader.warnings.append(
            f"the report was written by nsys {nsys_version}, older than the CUDA "
            f"{cuda[0]}.{cuda[1]} it traced (nsys {needed[0]}.{needed[1]} or newer needed):"
            " GPU activity may be missing; capture again with a newer Nsight Systems")
    info = ReportInfo(
        path=shown_path, sqlite_path=str(db.path),
        nsys_version=nsys_version,
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        capture_start_ns=capture_start, capture_end_ns=capture_end,
        cuda_traced=cuda_traced, tables=db.tables,
        cuda_version=None if cuda is None else f"{cuda[0]}.{cuda[1]}",
        host=db.system_env.get("Hostname"), program=db.program,
        launcher_env=V.launcher_env(db.system_env.get("DeviceEnvironment")),
        session_start_utc_ns=db.session_start_utc_ns,
        gpu_data_lost=bool(lost or (needed is not None and launches < MIN_LAUNCHES)),
        nsys_older_than_cuda=needed is not None)
    trace = Trace(info=info, kernels=kernels, memcpys=memcpys, memsets=memsets,
                  graphs=graphs, api=api,
                  syncs=syncs, nvtx=loader.nvtx(end_of_time),
                  streams=loader.streams(), devices=devices,
                  threads=loader.threads(), processes=loader.processes(),
                  # (one GPU: no stream can wait for another GPU's event)
                  event_waits=(loader.event_waits() if len(devices) > 1
                               else Table.empty_of(EVENT_WAIT_COLUMNS)),
                  osrt_source=OsrtSource(db.path, loader._limit, loader._strings,
                                           held=held),
                  memcpy_calls=memcpy_calls,
                  host_source=HostEvidenceSource(db.path, loader._limit, loader._strings,
                                                 nsys_version=nsys_version, held=held))
    if info.nsys_version is None:
        loader.warnings.append("the report does not say which nsys wrote it "
                               "(no META_DATA_EXPORT table)")
    info.problems = problems.counts
    info.warnings.extend(problems.lines() + loader.warnings)
    give_back()                                   # the reading's buffers, to the system
    return trace


def load_sqlite(path: str | Path, shown_path: str | None = None, *,
                held: Decompressed | None = None) -> Trace:
    """The Trace of an SQLite export; *held*: what keeps the export there (a compressed
    report's temporary copy), held by the trace as long as it may read the file."""
    path = Path(path)
    db = Database(path)
    try:
        return load_database(db, shown_path or str(path), held=held)
    finally:
        db.close()


def load(path: str | os.PathLike[str], *, nsys: str | None = None, cache: Path | None = None,
         status: Callable[[str], AbstractContextManager[Any]] | None = None) -> Trace:
    """Load any nsys report (.nsys-rep or .sqlite, either compressed: .sqlite.xz...)
    into a :class:`Trace`."""
    report = Path(path)
    sqlite_path, held = open_export(report, nsys=nsys, cache=cache, status=status)
    if held is None:
        return load_sqlite(sqlite_path, shown_path=str(report))
    try:
        return load_sqlite(sqlite_path, shown_path=str(report), held=held)
    except GpugapError as exc:
        held.remove()
        raise held.named(exc, report) from None
    except BaseException:
        held.remove()
        raise
