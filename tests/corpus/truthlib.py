"""Plain sqlite3 + numpy readings of an nsys export, for the corpus's truth scripts.

Nothing here imports gpugap, on purpose: a truth script computes what a report really
shows, independently of the analyzer under test. Each function does one reading and
says what it counts. Times are integer nanoseconds on the report's session clock.

    from truthlib import Report
    r = Report(path)                               # .sqlite or .sqlite.xz
    steps = r.ranges(r"^step \\d+$")               # NVTX ranges (any domain)
    lo, hi = steps[2].start, steps[-1].end
    r.busy_ns(lo, hi, device=0)                    # union of GPU work in the window
"""

from __future__ import annotations

import lzma
import re
import shutil
import sqlite3
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

THREAD_MASK = 0xFFFFFF


@dataclass(frozen=True)
class Range:
    start: int
    end: int
    name: str
    domain: str
    gtid: int

    @property
    def ns(self) -> int:
        return self.end - self.start


def open_report(path: str | Path) -> sqlite3.Connection:
    """A read-only connection; a .xz file is decompressed into a temporary file first."""
    path = Path(path)
    if path.suffix == ".xz":
        tmp = Path(tempfile.mkdtemp(prefix="truth-")) / path.stem
        with lzma.open(path) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        path = tmp
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def union(intervals: np.ndarray) -> np.ndarray:
    """Disjoint sorted [start, end) rows covering the same time as *intervals* (N x 2)."""
    if len(intervals) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    iv = intervals[np.argsort(intervals[:, 0], kind="stable")]
    out = []
    s, e = int(iv[0, 0]), int(iv[0, 1])
    for a, b in iv[1:].tolist():
        if a > e:
            out.append((s, e))
            s, e = a, b
        else:
            e = max(e, b)
    out.append((s, e))
    return np.array(out, dtype=np.int64)


def iv(rows) -> np.ndarray:
    """[start, end) of *rows* whose first two fields are start and end (N x 2)."""
    return np.array([(a, b) for a, b, *_ in rows], dtype=np.int64).reshape(-1, 2)


def overlap_ns(a: np.ndarray, b: np.ndarray, lo: int | None = None,
               hi: int | None = None) -> int:
    """Time covered by both the union of *a* and the union of *b* (N x 2 and M x 2);
    given *lo* and *hi*, only inside [lo, hi)."""
    ua, ub = union(a), union(b)
    if lo is not None:
        ua = np.clip(ua, lo, hi) if len(ua) else ua
        ub = np.clip(ub, lo, hi) if len(ub) else ub
    i = j = total = 0
    while i < len(ua) and j < len(ub):
        s, e = max(ua[i, 0], ub[j, 0]), min(ua[i, 1], ub[j, 1])
        if e > s:
            total += int(e - s)
        if ua[i, 1] < ub[j, 1]:
            i += 1
        else:
            j += 1
    return total


def clipped_ns(intervals: np.ndarray, lo: int, hi: int) -> int:
    """Time of the union of *intervals* inside [lo, hi)."""
    u = union(intervals)
    if not len(u):
        return 0
    a = np.clip(u[:, 0], lo, hi)
    b = np.clip(u[:, 1], lo, hi)
    return int((b - a).sum())


KERNEL_LAUNCH = r"^(cudaLaunchKernel\w*|cuLaunchKernel\w*)$"


class Report:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.db = open_report(path)
        self.tables = {r[0] for r in self.db.execute(
            "select name from sqlite_master where type='table'")}
        self.strings = dict(self.db.execute("select id, value from StringIds")) \
            if "StringIds" in self.tables else {}

    def q(self, sql: str, *args) -> list[tuple]:
        return self.db.execute(sql, args).fetchall()

    def has(self, table: str) -> bool:
        return table in self.tables

    # -- NVTX ---------------------------------------------------------------------------
    def domains(self) -> dict[int, str]:
        """NVTX domain id -> name (eventType 75 rows name a domain)."""
        if not self.has("NVTX_EVENTS"):
            return {}
        out = {}
        for dom, text, tid in self.q("select domainId, text, textId from NVTX_EVENTS "
                                     "where eventType = 75"):
            out[dom] = text if text is not None else self.strings.get(tid, "")
        return out

    def ranges(self, pattern: str = ".", domain: str | None = None) -> list[Range]:
        """Push/pop and start/end NVTX ranges whose name matches *pattern* (re.search),
        sorted by start; *domain*: only that domain's ('' = the default domain)."""
        if not self.has("NVTX_EVENTS"):
            return []
        doms = self.domains()
        rx = re.compile(pattern)
        out = []
        for a, b, text, tid, dom, g in self.q(
                "select start, end, text, textId, domainId, globalTid from NVTX_EVENTS "
                "where end is not null and eventType in (59, 60)"):
            name = text if text is not None else self.strings.get(tid, "")
            d = doms.get(dom, "") if dom else ""
            if name and rx.search(name) and (domain is None or d == domain):
                out.append(Range(a, b, name, d, g))
        return sorted(out, key=lambda r: r.start)

    # -- GPU work -----------------------------------------------------------------------
    def devices(self) -> list[int]:
        found: set[int] = set()
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
            if self.has(t):
                found |= {r[0] for r in self.q(f"select distinct deviceId from {t}")}
        return sorted(found)

    def kernels(self, device: int | None = None) -> list[tuple[int, int, str, int, int]]:
        """(start, end, short name, stream, correlationId) of every kernel, by start."""
        if not self.has("CUPTI_ACTIVITY_KIND_KERNEL"):
            return []
        where = "" if device is None else f" where deviceId = {int(device)}"
        rows = self.q("select start, end, shortName, streamId, correlationId from "
                      f"CUPTI_ACTIVITY_KIND_KERNEL{where} order by start")
        return [(a, b, self.strings.get(n, str(n)), s, c) for a, b, n, s, c in rows]

    def memcpys(self, device: int | None = None) -> list[dict]:
        """Copies with their kind and memory kinds resolved through the ENUM tables."""
        if not self.has("CUPTI_ACTIVITY_KIND_MEMCPY"):
            return []
        kinds = self.enum("ENUM_CUDA_MEMCPY_OPER")
        mem = self.enum("ENUM_CUDA_MEM_KIND")
        where = "" if device is None else f" where deviceId = {int(device)}"
        rows = self.q("select start, end, bytes, copyKind, srcKind, dstKind, streamId, "
                      f"correlationId, deviceId from CUPTI_ACTIVITY_KIND_MEMCPY{where} "
                      "order by start")
        return [{"start": a, "end": b, "bytes": n, "kind": kinds.get(k, str(k)),
                 "src": mem.get(s, str(s)), "dst": mem.get(d, str(d)), "stream": st,
                 "corr": c, "device": dev} for a, b, n, k, s, d, st, c, dev in rows]

    def enum(self, table: str) -> dict[int, str]:
        if not self.has(table):
            return {}
        cols = [r[1] for r in self.q(f"pragma table_info({table})")]
        label = "label" if "label" in cols else cols[-1]
        return dict(self.q(f"select id, {label} from {table}"))

    def graph_launches(self, device: int | None = None) -> list[tuple[int, int, int]]:
        """(start, end, graphId) of every CUDA graph execution (graph-level tracing)."""
        if not self.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
            return []
        where = "" if device is None else f" where deviceId = {int(device)}"
        return self.q(f"select start, end, graphId from CUPTI_ACTIVITY_KIND_GRAPH_TRACE{where} "
                      "order by start")

    def gpu_intervals(self, device: int | None = None) -> np.ndarray:
        """[start, end) of every kernel, copy, memset and graph execution (N x 2)."""
        rows: list[tuple[int, int]] = []
        where = "" if device is None else f" where deviceId = {int(device)}"
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
            if self.has(t):
                rows += self.q(f"select start, end from {t}{where}")
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def busy_ns(self, lo: int, hi: int, device: int | None = None) -> int:
        return clipped_ns(self.gpu_intervals(device), lo, hi)

    def idle_gaps(self, lo: int, hi: int, device: int | None = None) -> np.ndarray:
        """The idle stretches [start, end) of the device inside [lo, hi)."""
        u = union(self.gpu_intervals(device))
        u = u[(u[:, 1] > lo) & (u[:, 0] < hi)]
        edges = np.clip(u, lo, hi)
        starts = np.r_[lo, edges[:, 1]]
        ends = np.r_[edges[:, 0], hi]
        keep = ends > starts
        return np.stack([starts[keep], ends[keep]], axis=1)

    # -- host ---------------------------------------------------------------------------
    def api_calls(self, pattern: str = ".", lo: int | None = None, hi: int | None = None
                  ) -> list[tuple[int, int, str, int]]:
        """(start, end, name without its _vNNNN suffix, globalTid) of CUDA runtime and
        driver calls whose name matches *pattern*, starting in [lo, hi)."""
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            return []
        rx = re.compile(pattern)
        out = []
        for a, b, n, g in self.q("select start, end, nameId, globalTid from "
                                 "CUPTI_ACTIVITY_KIND_RUNTIME order by start"):
            if lo is not None and (a < lo or a >= hi):
                continue
            name = re.sub(r"_v\d+$", "", self.strings.get(n, str(n)))
            if rx.search(name):
                out.append((a, b, name, g))
        return out

    def launch_calls(self) -> list[tuple[int, int, str, int, int]]:
        """(start, end, name without its _vNNNN suffix, globalTid, correlationId) of every
        kernel launch call (cudaLaunchKernel*, cuLaunchKernel*), by start: the launch of
        a kernel is the call with its correlationId in the same process."""
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            return []
        rx = re.compile(KERNEL_LAUNCH)
        out = []
        for a, b, n, g, c in self.q("select start, end, nameId, globalTid, correlationId "
                                    "from CUPTI_ACTIVITY_KIND_RUNTIME order by start"):
            name = re.sub(r"_v\d+$", "", self.strings.get(n, str(n)))
            if rx.search(name):
                out.append((a, b, name, g, c))
        return out

    def osrt_calls(self, pattern: str = ".", lo: int | None = None, hi: int | None = None
                   ) -> list[tuple[int, int, str, int]]:
        """(start, end, name, globalTid) of OS runtime calls (the committed captures keep
        only calls of 10 us or more)."""
        if not self.has("OSRT_API"):
            return []
        rx = re.compile(pattern)
        out = []
        for a, b, n, g in self.q("select start, end, nameId, globalTid from OSRT_API "
                                 "order by start"):
            if lo is not None and (a < lo or a >= hi):
                continue
            name = self.strings.get(n, str(n))
            if rx.search(name):
                out.append((a, b, name, g))
        return out

    def call_time_by_name(self, table_rows: list[tuple[int, int, str, int]]
                          ) -> dict[str, tuple[int, int]]:
        """{name: (count, total ns)} of rows from api_calls / osrt_calls."""
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for a, b, name, _ in table_rows:
            out[name][0] += 1
            out[name][1] += b - a
        return {k: (v[0], v[1]) for k, v in out.items()}

    def processes_with_gpu_work(self) -> list[int]:
        """pids whose CUDA calls launched GPU work (kernels, copies, memsets, graphs)."""
        pids: set[int] = set()
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
            if self.has(t):
                pids |= {(g >> 24) & THREAD_MASK
                         for (g,) in self.q(f"select distinct globalPid from {t}")}
        return sorted(pids)

    def thread_of_launches(self) -> dict[int, int]:
        """globalTid -> how many kernel launch calls it made (the launching threads)."""
        out: dict[int, int] = defaultdict(int)
        for *_, g in self.api_calls(r"(Launch|GraphLaunch)"):
            out[g] += 1
        return dict(out)


def window_of(ranges: list[Range], skip: int = 0) -> tuple[int, int]:
    """From the start of the first kept range to the end of the last."""
    kept = ranges[skip:]
    return kept[0].start, max(r.end for r in kept)


def pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def ms(ns: float) -> float:
    """Nanoseconds as milliseconds, rounded to the microsecond."""
    return round(ns / 1e6, 3)
