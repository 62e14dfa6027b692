"""The host's own evidence in an nsys export, read on demand: what the CPU ran while the
GPU idled.

nsys records it where asked (``gpugap profile`` does by default,
gpugap.report.nsys.host_evidence_flags):

- CPU samples (``--sample=process-tree``): COMPOSITE_EVENTS, one row per sample of a
  running thread (time, thread, CPU), every process of the tree (DataLoader workers
  included); with a backtrace method, SAMPLING_CALLCHAINS holds each sample's stack
  (function and module per frame, StringIds; depth 0 the innermost).
- the GIL trace (``-t python-gil``): NVTX ranges 'Holding GIL' / 'Waiting for GIL' on
  every Python thread, in nsys's domain 'GIL Trace'.
- OS runtime calls' stacks: OSRT_CALLCHAINS, for calls longer than nsys's backtrace
  threshold (80 us by default): what a thread waited in.
- Python samples (``--python-sampling=true``, ``--python-backtrace=cuda``): NVTX marks
  in nsys's domains 'Python Periodic Sampling' / 'Python Backtrace on CUDA' (2023.4:
  'Python Backtrace'), whose payload (NVTX_EVENTS.binaryData, laid out as
  NVTX_PAYLOAD_SCHEMAS / NVTX_PAYLOAD_SCHEMA_ENTRIES describe) holds the Python stack:
  function, file and line per frame, the strings in StringIds. A default SQLite export
  leaves the payloads out (binaryData NULL; 2023.4 has no such column): newer nsys
  export them with ``nsys export --include-blobs=true``, which gpugap profile passes
  where the nsys has it. Where they are missing, ``python_samples`` says so.

None of it is read when a report is loaded: a capture with samples holds tens of rows
of stack per sample (60 MB of a 61 MB DataLoader capture), and only the GPU's idle
intervals that a verdict explains are ever looked at. ``HostEvidenceSource`` reads the
rows inside given windows, each table once per question, through SQLite.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpugap import forkjoin
from gpugap import intervals as tl
from gpugap.jsonout import Record
from gpugap.report import schema as S
from gpugap.report.columns import (
    ID_MASK,
    PID_SHIFT,
    column,
    enum_id,
    nsys_domain_test,
    nsys_domains,
    select_sql,
    table_read,
)
from gpugap.report.database import Database, quote_id
from gpugap.report.reader import Col, read_columns, row_bound
from gpugap.report.table import Labels, Table, sorted_codes
from gpugap.report.validate import MAX_TIME_NS, Problems, time_mask

# Frames read per stack: what names a sample's work is near its innermost frames (an
# interpreter's stack may be 128 deep: its outer frames only repeat the eval loop); each
# frame read is a random access through the table's index (35k frames: 80 ms).
MAX_DEPTH = 16
# Stacks read for at most this many samples (evenly spread over those asked for): the
# shares of 20,000 samples are within about a percent of all of them.
MAX_STACKS = 20_000
# Ids per IN list of a stack query.
_ID_CHUNK = 20_000
# Windows a query tests in SQL (the closest ones merged beyond): the rows are then
# tested exactly in numpy.
_SQL_WINDOWS = 256
# A sample of rows (os_waits): rowid times Knuth's multiplicative hash factor modulo a
# prime, a chance in a million (in SQLite's 64-bit integers for rowids up to three
# billion and calls up to a thousand seconds).
_HASH_FACTOR = 2654435761
_HASH_PRIME = 1_000_003
# The rows counted to size that sample: this many blocks of this many rowids each.
ESTIMATE_BLOCKS = 64
ESTIMATE_ROWS = 1024

SAMPLE_COLUMNS = {"id": "int64", "start": "int64", "gtid": "int64", "cpu": "int64",
                  "state": "str"}
FRAME_COLUMNS = {"id": "int64", "depth": "int64", "symbol": "str", "module": "str"}
GIL_COLUMNS = {"start": "int64", "end": "int64", "gtid": "int64", "holding": "bool"}
WAIT_COLUMNS = {"start": "int64", "end": "int64", "gtid": "int64", "name": "str",
                "callchain": "int64", "weight": "float64"}
PYTHON_FRAME_COLUMNS = {"sample": "int64", "depth": "int64", "function": "str",
                        "file": "str", "line": "int64"}

# NVTX payload entry types (nvToolsExtPayload.h) a Python sample's payload uses.
_INT_TYPES = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 8, 8: 8, 9: 8, 10: 8, 11: 1, 12: 1,
              13: 2, 14: 2, 15: 4, 16: 4, 17: 8, 18: 8, 22: 8, 23: 8}
_SIGNED = {1, 3, 5, 7, 9, 11, 13, 15, 17}
_STRING_HANDLE = 80             # NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE
_ARRAY_LENGTH_INDEX = 3 << 4    # NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_LENGTH_INDEX (0x30)
_ARRAY_FLAGS = 3 << 4


@dataclass
class HostInventory(Record):
    """What host evidence a report holds (and what its capture asked for).

    ``cpu_samples``: COMPOSITE_EVENTS is there; ``sampling_requested``: the capture
    asked for CPU samples (META_DATA_CAPTURE; None where it does not say);
    ``backtraces``: the samples have stacks; ``sample_period_ns``: the CPU time one
    sample stands for, where the capture says (a CPU-clock trigger), else estimated from
    the samples (``HostEvidenceSource.inventory``); ``context_switches``: SCHED_EVENTS;
    ``os_runtime`` / ``osrt_backtraces``: OS runtime calls and their stacks; ``gil``: a
    GIL trace; ``python_sampling``: Python samples (marks); ``python_stacks``: their
    payloads are in the export, with the schema that describes them;
    ``python_period_ns``: the time between two Python samples of a thread (the
    capture's sampling rate)."""

    cpu_samples: bool = False
    sampling_requested: bool | None = None
    backtraces: bool = False
    sample_period_ns: int | None = None
    context_switches: bool = False
    os_runtime: bool = False
    osrt_backtraces: bool = False
    gil: bool = False
    python_sampling: bool = False
    python_stacks: bool = False
    python_period_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.items())


@dataclass
class PythonSamples:
    """Python samples inside some windows: ``samples`` (start, gtid, kind: 'periodic'
    or 'cuda') and, where the export holds their payloads, ``frames`` (sample: its row in
    ``samples``, depth 0 innermost, function, file, line); ``note`` says why there are
    no frames otherwise."""

    samples: Table
    frames: Table | None = None
    note: str | None = None


@dataclass
class _Domains:
    """nsys's own NVTX domains of a report: (pid, domain id) pairs by name."""

    by_name: dict[str, set[tuple[int, int]]] = field(default_factory=dict)

    def pairs(self, names: tuple[str, ...]) -> list[tuple[int, int]]:
        return sorted({p for n in names for p in self.by_name.get(n, ())})


def merged_windows(lo: np.ndarray, hi: np.ndarray, at_most: int = _SQL_WINDOWS
                   ) -> tl.Intervals:
    """The union of [lo, hi) windows, then at most *at_most* of them: the closest
    neighbours merged (a superset, for a query whose rows are tested exactly after)."""
    lo, hi = tl.union(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
    if lo.size <= at_most:
        return lo, hi
    gaps = lo[1:] - hi[:-1]
    keep = np.sort(np.argsort(gaps, kind="stable")[gaps.size - (at_most - 1):])
    return np.r_[lo[0], lo[keep + 1]], np.r_[hi[keep], hi[-1]]


def _inside_sql(column_sql: str, lo: np.ndarray, hi: np.ndarray, end_sql: str | None = None
                ) -> str:
    """SQL true for a row inside one of the (merged) windows: a point *column_sql* in
    [lo, hi), or with *end_sql* an interval [column, end) overlapping one. A binary tree
    of CASEs on the start: log2(windows) tests per row.

        windows:   [lo0, hi0)      [lo1, hi1)        [lo2, hi2)
        row:                    [start ........ end)
        last lo < end: lo1  ->  overlap iff hi1 > start
    """
    edge = end_sql or column_sql
    strict = ">" if end_sql else ">="

    def tree(i: int, j: int) -> str:
        if j - i == 1:
            return f"CASE WHEN {edge} {strict} {int(lo[i])} THEN {int(hi[i])} END"
        m = (i + j) // 2
        return (f"CASE WHEN {edge} {strict} {int(lo[m])} THEN {tree(m, j)} "
                f"ELSE {tree(i, m)} END")

    if not lo.size:
        return "0"
    return f"({tree(0, lo.size)}) > {column_sql}"


def _points_inside(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Boolean per time: inside one of the sorted disjoint windows [lo, hi)."""
    k = np.searchsorted(lo, t, side="right") - 1
    return (k >= 0) & (t < hi[np.maximum(k, 0)]) if lo.size else np.zeros(t.size, bool)


def _overlapping(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray
                 ) -> np.ndarray:
    """Boolean per interval [start, end): overlaps one of the sorted disjoint windows."""
    if not lo.size:
        return np.zeros(start.size, bool)
    k = np.searchsorted(lo, end, side="left") - 1        # last window starting before end
    return (k >= 0) & (hi[np.maximum(k, 0)] > start)


def _valid(start: np.ndarray, end: np.ndarray, limit: int, what: str) -> np.ndarray:
    """Boolean per row: valid times (gpugap.report.validate.time_mask; the problems are
    not counted: the report's warnings were given out when it was loaded)."""
    mask = time_mask(start, end, limit, what, Problems())
    return np.ones(start.size, dtype=bool) if mask is None else mask


def _estimate(db: Database, table: str, where: str, length_sql: str) -> tuple[int, int]:
    """About how many rows of *table* match *where*, and the total of *length_sql* over
    them: counted in ESTIMATE_BLOCKS blocks of rowids evenly spread (each a seek in the
    table's tree, not a scan of it), scaled to all its rows; counted whole in a table of
    fewer rows. The sample it sizes stays unbiased however far off the estimate is."""
    # Two queries: SQLite answers a lone min() or max() of the rowid from the tree.
    ((lo,),) = db.rows(f"SELECT min(rowid) FROM {quote_id(table)}")
    ((hi,),) = db.rows(f"SELECT max(rowid) FROM {quote_id(table)}")
    lo, hi = int(lo or 0), int(hi or 0)
    rows = hi - lo + 1
    if rows <= ESTIMATE_BLOCKS * ESTIMATE_ROWS:
        blocks = [(lo, hi)]
    else:
        firsts = np.linspace(lo, hi - ESTIMATE_ROWS + 1, ESTIMATE_BLOCKS).astype(np.int64)
        blocks = [(a, a + ESTIMATE_ROWS - 1) for a in firsts.tolist()]
    among = " OR ".join(f"rowid BETWEEN {a} AND {b}" for a, b in blocks)
    ((count, total),) = db.rows(f"SELECT count(*), total({length_sql}) FROM "
                                f"{quote_id(table)} WHERE ({among}) AND {where}")
    seen = sum(b - a + 1 for a, b in blocks)
    return int(round(count * rows / seen)), int(round(float(total) * rows / seen))


def evenly(ids: np.ndarray, at_most: int = MAX_STACKS) -> np.ndarray:
    """At most *at_most* of *ids*, evenly spread over them (all when fewer)."""
    if ids.size <= at_most:
        return ids
    return ids[np.linspace(0, ids.size - 1, at_most).astype(np.int64)]


class HostEvidenceSource:
    """Reads a report's host evidence where asked (module doc). *limit*: the report's
    latest valid time (gpugap.report.validate.time_limit); *strings*: StringIds as the
    loading read them (ids sorted, values), else read here once; *held*: what keeps a
    compressed report's temporary export there while this source is."""

    def __init__(self, path: Path, limit: int | None = None,
                 strings: tuple[np.ndarray, np.ndarray] | None = None, *,
                 nsys_version: str | None = None, held: Any = None) -> None:
        self.path = path
        self.limit = limit if limit is not None else MAX_TIME_NS - 1
        self.strings = strings
        self.nsys_version = nsys_version
        self.held = held
        self._inventory: HostInventory | None = None
        self._domains: _Domains | None = None

    # --- helpers ------------------------------------------------------------------------
    @contextmanager
    def _db(self) -> Iterator[Database]:
        # Page by page, not mapped: the GIL trace and the Python samples are found by a
        # scan of all of NVTX_EVENTS, whose mapped pages would count as the process's
        # memory (gpugap.report.database.MMAP_MAX_BYTES); the stacks are a few pages
        # each, through their index.
        db = Database(self.path, mapped=False)
        try:
            yield db
        finally:
            db.close()

    def _strings(self, db: Database) -> tuple[np.ndarray, np.ndarray]:
        if self.strings is None:
            ids, values = np.zeros(0, np.int64), np.zeros(0, object)
            if db.has(S.STRINGS.name, "id", "value"):
                raw = db.frame(*select_sql(db, S.STRINGS, flags=False))
                ok = np.asarray(raw["id"]).astype(np.int64) >= 0
                ids, first = np.unique(np.asarray(raw["id"]).astype(np.int64)[ok],
                                       return_index=True)
                values = np.asarray(raw["value"], dtype=object)[ok][first]
            self.strings = (ids, values)
        return self.strings

    def _names(self, db: Database, ids: np.ndarray) -> Labels:
        """StringIds ids -> Labels (an id without a string: '<id>'), each distinct id
        looked up once."""
        table, values = self._strings(db)
        present, codes = sorted_codes(np.asarray(ids, dtype=np.int64))
        found = np.full(present.size, None, dtype=object)
        if table.size and present.size:
            pos = np.minimum(np.searchsorted(table, present), table.size - 1)
            hit = table[pos] == present
            found[hit] = values[pos[hit]]
        names = [v if isinstance(v, str) else f"<{i}>"
                 for i, v in zip(present.tolist(), found.tolist(), strict=True)]
        return Labels(codes.reshape(-1).astype(np.int32), names)

    def _string_ids(self, db: Database, names: tuple[str, ...]) -> list[int]:
        table, values = self._strings(db)
        wanted = set(names)
        return [int(i) for i, v in zip(table.tolist(), values.tolist(), strict=True)
                if v in wanted]

    def _nvtx(self, db: Database, name: str) -> str:
        c = S.NVTX.column(name)
        return column(db, S.NVTX.name, *c.candidates, default="")

    def _domains_of(self, db: Database) -> _Domains:
        """nsys's own NVTX domains (S.INSTRUMENTATION_DOMAINS) by (pid, domain id)."""
        if self._domains is None:
            out = _Domains()
            for pair, name in nsys_domains(db).items():
                out.by_name.setdefault(name, set()).add(pair)
            self._domains = out
        return self._domains

    def _pair_sql(self, db: Database, pairs: list[tuple[int, int]]) -> str:
        return nsys_domain_test(db, pairs)

    # --- what the report holds -------------------------------------------------------
    def inventory(self) -> HostInventory:
        """What host evidence the report holds (HostInventory), read once."""
        if self._inventory is None:
            with self._db() as db:
                self._inventory = self._read_inventory(db)
        return self._inventory

    def _read_inventory(self, db: Database) -> HostInventory:
        meta = db.capture_meta
        usable = {t.name: t.name in db.tables and db.has(t.name, *t.required)
                  for t in (S.SAMPLES, S.SAMPLE_STACKS, S.OSRT_STACKS, S.OSRT)}
        requested = None
        if meta:
            requested = any(k.startswith("LINUX_PERF_OPTIONS:") for k in meta) and \
                meta.get("LINUX_PERF_OPTIONS:COLLECT_IP_BACKTRACE_SAMPLES", "true"
                         ).strip().lower() in ("true", "1")
        domains = self._domains_of(db)
        python = bool(domains.pairs(S.PYTHON_SAMPLE_DOMAINS))
        inv = HostInventory(
            cpu_samples=usable[S.SAMPLES.name], sampling_requested=requested,
            backtraces=usable[S.SAMPLE_STACKS.name],
            context_switches="SCHED_EVENTS" in db.tables,
            os_runtime=usable[S.OSRT.name], osrt_backtraces=usable[S.OSRT_STACKS.name],
            gil=bool(domains.pairs((S.GIL_DOMAIN,))),
            python_sampling=python or meta.get(
                "PYTHON_BACKTRACE_SAMPLING_OPTIONS:COLLECT_SAMPLES", "").strip().lower()
            in ("true", "1"),
            python_stacks=python and self._payloads_present(db))
        rate = meta.get("PYTHON_BACKTRACE_SAMPLING_OPTIONS:SAMPLING_RATE", "").strip()
        if inv.python_sampling and rate.isdigit() and 1 <= int(rate) <= 100_000:
            inv.python_period_ns = 10**9 // int(rate)
        inv.sample_period_ns = self._period(db, meta) if inv.cpu_samples else None
        return inv

    def _period(self, db: Database, meta: dict[str, str]) -> int | None:
        """The CPU time a sample stands for: the sampling period where its trigger is the
        CPU clock (counted in ns: nsys's default, 1 ms), else the median time between
        one busy thread's consecutive samples (a running thread is sampled once a
        period)."""
        trigger = meta.get("LINUX_PERF_OPTIONS:CPU_IP_TRIGGER_TYPE", "").strip().lower()
        period = meta.get("LINUX_PERF_OPTIONS:SAMPLING_PERIOD", "").strip()
        if trigger in ("software", "") and period.isdigit() and 1_000 <= int(period) \
                <= 10**9:
            return int(period)
        t = S.SAMPLES
        start, gtid = (column(db, t.name, *t.column(c).candidates, default="0")
                       for c in ("start", "gtid"))
        rows = db.rows(f"SELECT {gtid}, {start} FROM {quote_id(t.name)} "
                       f"ORDER BY {gtid}, {start} LIMIT 200000")
        if len(rows) < 20:
            return None
        a = np.asarray(rows, dtype=np.int64)
        same = a[1:, 0] == a[:-1, 0]
        gaps = np.diff(a[:, 1])[same]
        gaps = gaps[gaps > 0]
        return int(np.median(gaps)) if gaps.size >= 10 else None

    def _payloads_present(self, db: Database) -> bool:
        """Whether the Python samples' payloads are in the export, with their schema."""
        if not (db.has(S.NVTX.name, S.NVTX_PAYLOAD) and S.PAYLOAD_ENTRIES.name in db.tables):
            return False
        mark = enum_id(db, "ENUM_NSYS_EVENT_TYPE", S.NVTX_MARK)
        pairs = self._domains_of(db).pairs(S.PYTHON_SAMPLE_DOMAINS)
        # An export holds the payloads of all its marks or of none (nsys export
        # --include-blobs): the first Python sample tells, without scanning the rest.
        rows = db.rows(f"SELECT coalesce(length({quote_id(S.NVTX_PAYLOAD)}), 0) > 0 "
                       f"FROM {quote_id(S.NVTX.name)} WHERE "
                       f"{self._nvtx(db, 'type')} = {int(mark)} AND "
                       f"{self._pair_sql(db, pairs)} LIMIT 1")
        return bool(rows) and bool(rows[0][0])

    # --- CPU samples ------------------------------------------------------------------
    def samples(self, lo: np.ndarray, hi: np.ndarray) -> Table:
        """The CPU samples taken inside the windows [lo, hi) (id, start, gtid, cpu,
        state: ENUM_SAMPLING_THREAD_STATE's label), by time."""
        lo, hi = tl.union(np.asarray(lo, np.int64), np.asarray(hi, np.int64))
        t = S.SAMPLES
        with self._db() as db:
            if not (lo.size and t.name in db.tables and db.has(t.name, *t.required)):
                return Table.empty_of(SAMPLE_COLUMNS)
            read = table_read(db, t, ("id", "start", "gtid", "cpu", "state"))
            start = read.cols[1].sql
            qlo, qhi = merged_windows(lo, hi)
            where = (f"{start} >= {int(qlo[0])} AND {start} < {int(qhi[-1])} AND "
                     + _inside_sql(start, qlo, qhi))
            data = read_columns(db, t.name, list(read.cols), where)
            keep = _points_inside(data["start"], lo, hi)
            keep &= _valid(data["start"], data["start"], self.limit, t.what)
            data = {k: v[keep] for k, v in data.items()}
            order = np.argsort(data["start"], kind="stable")
            states = db.enum("ENUM_SAMPLING_THREAD_STATE")
            present, codes = np.unique(data["state_id"][order], return_inverse=True)
            labels = Labels(codes.reshape(-1).astype(np.int16),
                            [states.get(int(s), f"<{int(s)}>") for s in present.tolist()])
            return Table({"id": data["id"][order].astype(np.int64),
                          "start": data["start"][order].astype(np.int64),
                          "gtid": data["gtid"][order].astype(np.int64),
                          "cpu": data["cpu"][order].astype(np.int64), "state": labels})

    def sample_frames(self, ids: np.ndarray) -> Table:
        """The stacks of the samples *ids* (SAMPLING_CALLCHAINS): a row per frame (id,
        depth: 0 the innermost, symbol, module), at most MAX_DEPTH deep, sorted by id
        then depth."""
        return self._frames(S.SAMPLE_STACKS, ids)

    def osrt_frames(self, ids: np.ndarray) -> Table:
        """The stacks of OS runtime calls (their callchain ids): as sample_frames."""
        return self._frames(S.OSRT_STACKS, ids)

    def _frames(self, t: S.Table, ids: np.ndarray) -> Table:
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        ids = ids[ids >= 0]
        with self._db() as db:
            if not (ids.size and t.name in db.tables and db.has(t.name, *t.required)):
                return Table.empty_of(FRAME_COLUMNS)
            read = table_read(db, t)
            id_sql, depth_sql = read.cols[0].sql, read.cols[1].sql
            parts = []
            for i in range(0, ids.size, _ID_CHUNK):
                chunk = ids[i:i + _ID_CHUNK]
                where = (f"{id_sql} IN ({', '.join(map(str, chunk.tolist()))}) AND "
                         f"{depth_sql} < {MAX_DEPTH}")
                parts.append(read_columns(db, t.name, list(read.cols), where,
                                          capacity=chunk.size * MAX_DEPTH))
            data = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
            order = np.lexsort((data["depth"], data["id"]))
            return Table({"id": data["id"][order].astype(np.int64),
                          "depth": data["depth"][order].astype(np.int64),
                          "symbol": self._names(db, data["symbol_id"][order]),
                          "module": self._names(db, data["module_id"][order])})

    # --- the GIL ------------------------------------------------------------------------
    def gil_ahead(self, lo: np.ndarray, hi: np.ndarray, thread: int | None = None
                  ) -> Callable[[], Table]:
        """Begin ``gil(lo, hi, thread)`` beside the caller (gpugap.forkjoin.beside) and
        return what waits for its result: the GIL trace is read by a scan of all of
        NVTX_EVENTS, in SQLite, while the caller reads the CPU samples."""
        return forkjoin.beside(self.gil, lo, hi, thread, name="gpugap-gil")

    def gil(self, lo: np.ndarray, hi: np.ndarray, thread: int | None = None) -> Table:
        """The GIL trace's ranges overlapping the windows [lo, hi): start, end, gtid,
        holding (True: 'Holding GIL', False: 'Waiting for GIL'), by start. With
        *thread* (a gtid), those that tell who kept it waiting: its waits and the other
        threads' holds (a thread's own holds are most of the trace: a range per
        hand-over)."""
        lo, hi = tl.union(np.asarray(lo, np.int64), np.asarray(hi, np.int64))
        with self._db() as db:
            pairs = self._domains_of(db).pairs((S.GIL_DOMAIN,))
            if not (pairs and lo.size):
                return Table.empty_of(GIL_COLUMNS)
            n = {c: self._nvtx(db, c) for c in ("start", "end", "gtid", "text", "text_id",
                                               "type")}
            holding = self._string_ids(db, (S.GIL_HOLDING,))
            waiting = self._string_ids(db, (S.GIL_WAITING,))

            def named(text: str, ids: list[int]) -> str:
                by_id = f" OR {n['text_id']} IN ({', '.join(map(str, ids))})" \
                    if ids and n["text_id"] else ""
                by_text = f"{n['text']} = '{text}'" if n["text"] else "0"
                return f"({by_text}{by_id})"

            kinds = ", ".join(str(k) for k in _range_kinds(db))
            qlo, qhi = merged_windows(lo, hi)
            mine = "" if thread is None else (
                f"CASE WHEN ifnull({n['gtid']}, 0) = {int(thread)} THEN "
                f"{named(S.GIL_WAITING, waiting)} ELSE {named(S.GIL_HOLDING, holding)} "
                "END AND ")
            # The time bounds first: the cheapest test that most rows of a long capture
            # fail (SQLite tests a row's terms in the order written).
            where = (f"{n['end']} > {int(qlo[0])} AND {n['start']} < {int(qhi[-1])} AND "
                     f"{n['type']} IN ({kinds}) AND {self._pair_sql(db, pairs)} AND "
                     + mine + _inside_sql(n["start"], qlo, qhi, n["end"]))
            cols = [Col("start", n["start"], fill=-1), Col("end", n["end"], fill=-1),
                    Col("gtid", f"ifnull({n['gtid']}, 0)"),
                    Col("kind", f"CASE WHEN {named(S.GIL_HOLDING, holding)} THEN 1 "
                                f"WHEN {named(S.GIL_WAITING, waiting)} THEN 2 ELSE 0 END",
                        dtype="int8")]
            data = read_columns(db, S.NVTX.name, cols, where)
        keep = (data["kind"] > 0) & _valid(data["start"], data["end"], self.limit,
                                           "GIL ranges")
        keep &= _overlapping(data["start"], data["end"], lo, hi)
        order = np.flatnonzero(keep)[np.argsort(data["start"][keep], kind="stable")]
        return Table({"start": data["start"][order].astype(np.int64),
                      "end": data["end"][order].astype(np.int64),
                      "gtid": data["gtid"][order].astype(np.int64),
                      "holding": data["kind"][order] == 1})

    # --- what threads waited in ---------------------------------------------------------
    def os_waits(self, windows: dict[int, tuple[np.ndarray, np.ndarray]],
                 at_most: int | None = None) -> tuple[Table, int]:
        """The OS runtime calls of each thread (gtid) overlapping its windows: start,
        end, gtid, name, callchain (OSRT_CALLCHAINS id; -1: none), weight (how many calls
        the row stands for: 1 where every call is read), by start; and the D below (0:
        every call read).

        With *at_most*, where the threads made more calls than that between the windows'
        first start and last end (a million-kernel report's launching thread makes
        millions), a sample of about *at_most* of them: each call drawn with a chance of
        its length over D (twice their total length over *at_most*), or of half
        *at_most* over their count if more, every call of D or longer always, each
        weighing one over its chance. A name's time errs by about the square root of D
        times it, its count as a plain sample of that many; and a few long waits among
        millions of short calls are never sampled away.
        """
        t = S.OSRT
        windows = {int(g): tl.union(np.asarray(lo, np.int64), np.asarray(hi, np.int64))
                   for g, (lo, hi) in windows.items() if len(lo)}
        with self._db() as db:
            if not (windows and t.name in db.tables and db.has(t.name, *t.required)):
                return Table.empty_of(WAIT_COLUMNS), 0
            read = table_read(db, t, ("start", "end", "gtid", "name", "callchain"))
            start, end, gtid = (c.sql for c in read.cols[:3])
            everything = tl.union(np.concatenate([w[0] for w in windows.values()]),
                                  np.concatenate([w[1] for w in windows.values()]))
            qlo, qhi = merged_windows(*everything)
            span = (f"{gtid} IN ({', '.join(map(str, sorted(windows)))}) AND "
                    f"{end} > {int(qlo[0])} AND {start} < {int(qhi[-1])}")
            sample_ns, sample = 0, ""
            if (at_most is not None and db.has_rowid(t.name)
                    and row_bound(db, t.name) > at_most):
                calls, length = _estimate(db, t.name, span, f"max({end} - {start}, 0)")
                if calls > at_most:
                    sample_ns = max(1, int(-(-2 * length // at_most)))
                    floor = _HASH_PRIME * at_most // (2 * calls)
                    # The chance from a hash of the rowid (a loop's calls repeat in one
                    # order: every Nth row could be one call of it each time).
                    h = f"((rowid * {_HASH_FACTOR}) % {_HASH_PRIME})"
                    sample = (f"({h} * {sample_ns} < ({end} - {start}) * {_HASH_PRIME} "
                              f"OR {h} < {floor}) AND ")
            where = sample + span + " AND " + _inside_sql(start, qlo, qhi, end)
            data = read_columns(db, t.name, list(read.cols), where)
            keep = _valid(data["start"], data["end"], self.limit, t.what)
            for g, (lo, hi) in windows.items():
                on = data["gtid"] == g
                keep[on] &= _overlapping(data["start"][on], data["end"][on], lo, hi)
            keep &= np.isin(data["gtid"], list(windows))
            order = np.flatnonzero(keep)[np.argsort(data["start"][keep], kind="stable")]
            s, e = data["start"][order].astype(np.int64), data["end"][order].astype(np.int64)
            weight = np.ones(order.size)
            if sample_ns:
                chance = np.maximum((e - s) / sample_ns, floor / _HASH_PRIME)
                weight = 1.0 / np.minimum(chance, 1.0)
            return Table({"start": s, "end": e,
                          "gtid": data["gtid"][order].astype(np.int64),
                          "name": self._names(db, data["name_id"][order]),
                          "callchain": data["callchain"][order].astype(np.int64),
                          "weight": weight}), sample_ns

    # --- Python samples -----------------------------------------------------------------
    def python_samples(self, lo: np.ndarray, hi: np.ndarray) -> PythonSamples:
        """The Python samples inside the windows [lo, hi), with their stacks where the
        export holds them (PythonSamples)."""
        lo, hi = tl.union(np.asarray(lo, np.int64), np.asarray(hi, np.int64))
        empty = Table.empty_of({"start": "int64", "gtid": "int64", "kind": "str"})
        with self._db() as db:
            domains = self._domains_of(db)
            pairs = domains.pairs(S.PYTHON_SAMPLE_DOMAINS)
            if not (pairs and lo.size):
                return PythonSamples(empty, note="the report has no Python samples")
            cuda = set(domains.pairs(("Python Backtrace on CUDA",)))
            mark = enum_id(db, "ENUM_NSYS_EVENT_TYPE", S.NVTX_MARK)
            n = {c: self._nvtx(db, c) for c in ("start", "gtid", "type", "domain_id")}
            qlo, qhi = merged_windows(lo, hi)
            where = (f"{n['start']} >= {int(qlo[0])} AND {n['start']} < {int(qhi[-1])} AND "
                     f"{n['type']} = {int(mark)} AND {self._pair_sql(db, pairs)} AND "
                     + _inside_sql(n["start"], qlo, qhi))
            cols = [Col("start", n["start"], fill=-1), Col("gtid", f"ifnull({n['gtid']}, 0)"),
                    Col("domain", n["domain_id"]), Col("rowid", "rowid")]
            data = read_columns(db, S.NVTX.name, cols, where)
            keep = _points_inside(data["start"], lo, hi) & _valid(
                data["start"], data["start"], self.limit, "Python samples")
            order = np.flatnonzero(keep)[np.argsort(data["start"][keep], kind="stable")]
            pid = (data["gtid"][order] >> PID_SHIFT) & ID_MASK
            is_cuda = np.array([(int(p), int(d)) in cuda for p, d in
                                zip(pid.tolist(), data["domain"][order].tolist(),
                                    strict=True)], dtype=bool)
            samples = Table({"start": data["start"][order].astype(np.int64),
                             "gtid": data["gtid"][order].astype(np.int64),
                             "kind": Labels(is_cuda.astype(np.int8), ["periodic", "cuda"])})
            if not self.inventory().python_stacks:
                return PythonSamples(samples, note=(
                    "the export holds no payloads for its Python samples (a default "
                    "SQLite export leaves them out): re-export the .nsys-rep with an "
                    "nsys that has nsys export --include-blobs=true"))
            layouts = _layouts(db)
            rowids = data["rowid"][order]
            blobs: dict[int, tuple[int, bytes]] = {}
            payload = quote_id(S.NVTX_PAYLOAD)
            for i in range(0, rowids.size, _ID_CHUNK):
                chunk = ", ".join(map(str, rowids[i:i + _ID_CHUNK].tolist()))
                for rowid, domain, blob in db.rows(
                        f"SELECT rowid, {n['domain_id']}, {payload} FROM "
                        f"{quote_id(S.NVTX.name)} WHERE rowid IN ({chunk})"):
                    if isinstance(blob, bytes) and isinstance(domain, int):
                        blobs[int(rowid)] = (domain, blob)
            frames, undecoded = _decode_frames(rowids.tolist(), blobs, layouts,
                                               lambda ids: self._names(db, ids))
        note = (f"{undecoded} of {rowids.size} Python samples' payloads did not match "
                "their schema: left out") if undecoded else None
        return PythonSamples(samples, frames, note)


def _range_kinds(db: Database) -> list[int]:
    return [enum_id(db, "ENUM_NSYS_EVENT_TYPE", name) for name in S.NVTX_KINDS]


@dataclass
class _Layout:
    """Where a Python sample's payload keeps its frames: the count's offset and size, the
    frames' offset and element size, and each frame field's offset, size and type."""

    count_at: int
    count_size: int
    frames_at: int
    frame_size: int
    fields: dict[str, tuple[int, int, int]]      # name -> (offset, size, type)
    schema: int = -1                             # the sample's schema id (-1: unknown)


def _layouts(db: Database) -> dict[int, _Layout]:
    """Per NVTX domain, the layout of its Python samples' payload, from the export's
    schema tables: the schema with a 'Frames' array whose length another entry holds,
    its element schema's 'Function', 'File' and 'Line'."""
    if S.PAYLOAD_ENTRIES.name not in db.tables:
        return {}
    sql, names = select_sql(db, S.PAYLOAD_ENTRIES, flags=False)
    e = db.frame(sql, names)
    sizes = {}
    if S.PAYLOAD_SCHEMAS.name in db.tables:
        sql, names = select_sql(db, S.PAYLOAD_SCHEMAS, ("domain_id", "schema", "size"),
                                flags=False)
        s = db.frame(sql, names)
        sizes = {(int(d), int(k)): int(z) for d, k, z in
                 zip(s["domain_id"].tolist(), s["schema"].tolist(), s["size"].tolist(),
                     strict=True) if all(isinstance(v, int) for v in (d, k, z))}
    entries: dict[tuple[int, int], dict[int, tuple]] = {}
    for row in zip(*(e[c].tolist() for c in ("domain_id", "schema", "index", "flags", "type",
                                            "name", "detail", "offset")), strict=True):
        d, k, i, flags, kind, name, detail, offset = row
        if all(isinstance(v, int) for v in (d, k, i, flags, kind, detail, offset)):
            entries.setdefault((d, k), {})[i] = (name, flags, kind, detail, offset)
    # An entry without an offset (NULL: nsys leaves the first one out) lies where the
    # one before it ends, aligned to its own size (the C struct's layout).
    for fields in entries.values():
        end = 0
        for i in sorted(fields):
            name, flags, kind, detail, offset = fields[i]
            size = 8 if kind == _STRING_HANDLE else _INT_TYPES.get(kind, 0)
            if offset < 0:
                offset = -(-end // size) * size if size else end
                fields[i] = (name, flags, kind, detail, offset)
            end = offset + size
    out: dict[int, _Layout] = {}
    for (domain, schema), fields in entries.items():
        frames = next((f for f in fields.values() if f[0] == "Frames"
                       and f[1] & _ARRAY_FLAGS == _ARRAY_LENGTH_INDEX), None)
        if frames is None:
            continue
        count = fields.get(frames[3])
        element = entries.get((domain, frames[2]))
        if count is None or count[2] not in _INT_TYPES or not element:
            continue
        wanted = {}
        for name, _, kind, _, offset in element.values():
            size = 8 if kind == _STRING_HANDLE else _INT_TYPES.get(kind)
            if name in ("Function", "File", "Line") and size:
                wanted[name] = (offset, size, kind)
        if len(wanted) < 3:
            continue
        frame_size = sizes.get((domain, frames[2])) or max(o + z for o, z, _ in
                                                           wanted.values())
        out[domain] = _Layout(count[4], _INT_TYPES[count[2]], frames[4], frame_size, wanted,
                              schema)
    return out


def _integer(blob: bytes, at: int, size: int, signed: bool) -> int:
    return int.from_bytes(blob[at:at + size], "little", signed=signed)


# The payload data entries nsys writes ahead of a mark's payloads (nvtxPayloadData_t,
# nvToolsExtPayload.h, the pointer stored as an offset into the blob): a count, then
# per entry its schema id, size and offset, each 8 bytes.
_DATA_ENTRY = 24
_MAX_DATA_ENTRIES = 16


def _payload(blob: bytes, schema: int) -> bytes:
    """The payload of *schema* in a mark's blob: found through the data entries ahead
    of it (nsys 2025.3 writes them: a count, then schema id, size, offset per entry);
    a blob without such entries is the payload itself."""
    n = _integer(blob, 0, 8, False)
    table_end = 8 + n * _DATA_ENTRY
    if 1 <= n <= _MAX_DATA_ENTRIES and len(blob) >= table_end:
        for i in range(n):
            at = 8 + i * _DATA_ENTRY
            sid, size, offset = (_integer(blob, at + 8 * j, 8, False) for j in range(3))
            if sid == schema and offset >= table_end and offset + size <= len(blob):
                return blob[offset:offset + size]
    return blob


def _decode_frames(rowids: list[int], blobs: dict[int, tuple[int, bytes]],
                   layouts: dict[int, _Layout], names: Callable[[np.ndarray], Labels]
                   ) -> tuple[Table, int]:
    """The frames of each sample (its position in *rowids*) from its payload; and how
    many payloads did not fit their layout (a count beyond the blob, no layout)."""
    sample, depth, function, file, line = [], [], [], [], []
    undecoded = 0
    for k, rowid in enumerate(rowids):
        found = blobs.get(rowid)
        if found is None:
            undecoded += 1
            continue
        domain, blob = found
        lay = layouts.get(domain)
        if lay is not None:
            blob = _payload(blob, lay.schema)
        if lay is None or len(blob) < lay.count_at + lay.count_size:
            undecoded += 1
            continue
        count = _integer(blob, lay.count_at, lay.count_size, False)
        if count < 0 or lay.frames_at + count * lay.frame_size > len(blob):
            undecoded += 1
            continue
        for d in range(count):
            base = lay.frames_at + d * lay.frame_size
            values = {name: _integer(blob, base + o, z, kind in _SIGNED)
                      for name, (o, z, kind) in lay.fields.items()}
            sample.append(k)
            depth.append(d)
            function.append(values["Function"])
            file.append(values["File"])
            line.append(values["Line"])
    if not sample:
        return Table.empty_of(PYTHON_FRAME_COLUMNS), undecoded
    return Table({"sample": np.asarray(sample, np.int64), "depth": np.asarray(depth, np.int64),
                  "function": _unescaped(names(np.asarray(function, np.int64))),
                  "file": _unescaped(names(np.asarray(file, np.int64))),
                  "line": np.asarray(line, np.int64)}), undecoded


def _unescaped(labels: Labels) -> Labels:
    """Python names as Python spells them: nsys stores the Python samples' strings with
    XML entities ('&lt;module&gt;', '&lt;lambda&gt;')."""
    plain = [html.unescape(c) if isinstance(c, str) else c for c in labels.categories]
    if len(set(plain)) == len(plain):
        return Labels(labels.codes, plain)
    return Labels.of(np.asarray(plain, dtype=object)[labels.codes])
