"""A self-contained HTML timeline of a report with every finding drawn on it.

``write_html(analysis, trace, path)`` writes one HTML file that needs no network: the
events are embedded as compact columnar JSON and drawn by a small vanilla-JS canvas
renderer (``assets/timeline.js``), so 100k+ events stay smooth. Several panels (e.g. the
bad and good variants of a scenario) stack on one time scale, each aligned to its own
start::

    write_html([Panel("bad", bad_trace, bad_analysis),
                Panel("good", good_trace, good_analysis)], path="compare.html")

The timeline model (:func:`build_timeline`) is shared with the static SVG/PNG export in
:mod:`gpugap.render.timeline_svg`.

What is drawn (see docs/html.md):

- lanes: one per device and stream with GPU work (kernels, copies by direction and
  memory kind, memsets); per host thread one NVTX lane and one CUDA API lane
  (overlapping calls/ranges stack into rows);
- findings: a track with each finding's extent, plus where it happens: launch gaps
  shaded across the device's lanes with their cause, serialized kernels outlined and
  linked, blocking copies outlined on both the host call and the GPU copy (linked),
  warm-up costs marked on the thread's lane, other evidence outlined by correlation id.

Times in the model are int64 ns relative to the panel's origin: the start of the
``--range`` window when one is given, else the panel's first GPU activity (the start of
the span gpugap's metrics use), so bad and good variants line up.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from gpugap import __version__
from gpugap import ranges as nvtx_ranges
from gpugap.analysis import Analysis
from gpugap.errors import UsageError
from gpugap.files import validate_outputs, write_atomic
from gpugap.render.safe import safe_text
from gpugap.report.trace import Trace
from gpugap.rules.base import Finding, fmt_bytes, fmt_ns

# --- categories and colours (shared with the SVG export) ----------------------------

# id, legend label, colour. Kernels are coloured per name from KERNEL_PALETTE.
CATEGORIES: tuple[tuple[str, str, str], ...] = (
    ("kernel", "kernel", "#4c78a8"),
    ("htod", "copy host→device", "#2ca02c"),
    ("htod-pageable", "copy host→device, pageable", "#2ca02c"),
    ("dtoh", "copy device→host", "#d62728"),
    ("dtoh-pageable", "copy device→host, pageable", "#d62728"),
    ("dtod", "copy device→device", "#bcbd22"),
    ("peer", "copy peer→peer", "#9467bd"),
    ("copy-other", "copy, other", "#8c564b"),
    ("memset", "memset", "#7f7f7f"),
    ("graph", "CUDA graph replay", "#e377c2"),
    ("api-launch", "API: launch", "#72b7b2"),
    ("api-copy", "API: copy / memset", "#98df8a"),
    ("api-sync", "API: synchronize", "#ff9896"),
    ("api-memory", "API: alloc / free / register", "#c5b0d5"),
    ("api-module", "API: module / library load", "#f7b6d2"),
    ("api-other", "API: other", "#c7c7c7"),
    ("nvtx", "NVTX range", "#f2cf5b"),
    ("nvtx-library", "NVTX range of a library", "#e0d6b8"),
)
CATEGORY_INDEX = {c[0]: i for i, c in enumerate(CATEGORIES)}
PAGEABLE = frozenset({"htod-pageable", "dtoh-pageable"})
KERNEL_PALETTE = ("#4c78a8", "#5b8ff9", "#3b5ba5", "#6f4e9e", "#1f77b4", "#17becf",
                  "#2a6f97", "#7b6fd6", "#4a90a4", "#386cb0", "#5e60ce", "#0f8b8d")
RULE_COLORS = {"launch-gap": "#e8890c", "serialized-streams": "#8e44ad",
               "blocking-memcpy": "#d62728", "warmup-latency": "#0b84a5",
               "small-grid": "#c2185b"}
CAUSE_COLORS = {"module-load": "#b5651d", "sync-wait": "#d62728",
                "host-blocked": "#c2185b", "host-launch-latency": "#e8890c",
                "queued-wait": "#6a3d9a", "unknown": "#7f7f7f"}
SEVERITY_COLORS = {"error": "#c62828", "warning": "#e69500", "info": "#1f77b4"}
DEFAULT_RULE_COLOR = "#555555"

LANE_ROWS_MAX = {"gpu": 4, "api": 6, "nvtx": 8}


def rule_color(rule: str) -> str:
    return RULE_COLORS.get(rule, DEFAULT_RULE_COLOR)


def kernel_color(name_index: int) -> str:
    return KERNEL_PALETTE[name_index % len(KERNEL_PALETTE)]


# --- inputs ------------------------------------------------------------------------

class Panel(NamedTuple):
    """One timeline in a (possibly stacked) view: a label, its trace and analysis."""

    label: str
    trace: Trace
    analysis: Analysis


def as_panels(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
              trace: Trace | None) -> list[Panel]:
    if isinstance(source, Analysis):
        if trace is None:
            raise TypeError("write_html(analysis, trace, path): the trace is required")
        return [Panel(Path(source.report).name, trace, source)]
    panels = [Panel(*p) for p in source]
    if not panels:
        raise TypeError("no panels to draw")
    return panels


# --- the model ---------------------------------------------------------------------

@dataclass
class Lane:
    kind: str              # gpu | api | nvtx
    group: str             # heading shared by neighbouring lanes ("GPU 0 · NVIDIA H200")
    label: str             # "stream 7 (legacy default)", "CUDA API", "NVTX"
    rows: int = 1
    device: int | None = None
    stream: int | None = None
    pid: int | None = None
    gtid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "group": self.group, "label": self.label,
                "rows": self.rows}


@dataclass
class Marker:
    """Where a finding is drawn. kind: band (time span across lanes l0..l1), ev (outline
    of event i), link (arrow from event a to event b; ends 's'tart or 'e'nd), span (a
    time span on lane l: host-side cost)."""

    finding: int
    kind: str
    s: int = 0
    e: int = 0
    l0: int = 0
    l1: int = 0
    i: int = -1
    a: int = -1
    b: int = -1
    ends: str = "es"
    label: str = ""
    color: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"f": self.finding, "t": self.kind}
        if self.kind in ("band", "span"):
            out |= {"s": self.s, "e": self.e, "l0": self.l0, "l1": self.l1}
        elif self.kind == "ev":
            out["i"] = self.i
        elif self.kind == "link":
            out |= {"a": self.a, "b": self.b, "ends": self.ends}
        if self.label:
            out["label"] = self.label
        if self.color:
            out["color"] = self.color
        return out


@dataclass
class Timeline:
    """One panel's drawable timeline. Event arrays are sorted by (lane, row, start)."""

    label: str
    analysis: Analysis
    origin_ns: int                      # absolute time of t=0
    lanes: list[Lane]
    lane: np.ndarray                    # per event: lane index
    row: np.ndarray                     # per event: row within the lane
    start: np.ndarray                   # per event: ns relative to origin
    dur: np.ndarray
    cat: np.ndarray                     # index into CATEGORIES
    name: np.ndarray                    # index into strings
    info: np.ndarray                    # index into strings (details for hover)
    corr: np.ndarray                    # correlation id, -1 when none
    nbytes: np.ndarray                  # bytes of copies/memsets, 0 otherwise
    strings: list[str]
    findings: list[Finding]
    markers: list[Marker]
    track_rows: list[int]               # per finding: its row in the findings track
    ranges: list[dict[str, Any]]        # NVTX ranges: label, s, e (relative), metrics
    view: tuple[int, int]               # initial view (relative ns)
    extent: tuple[int, int]             # first start .. last end (relative ns)
    scope: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def events(self) -> int:
        return int(self.start.size)

    def rel(self, t: float | int) -> int:
        return int(t) - self.origin_ns


def _api_category(names: pd.Series) -> np.ndarray:
    """API call name -> category id, by what the call does (computed per distinct name)."""
    codes, uniques = pd.factorize(names.astype(str))
    s = pd.Series(uniques, dtype=object)
    cat = np.full(len(s), CATEGORY_INDEX["api-other"], dtype=np.int16)
    rules = (("api-module", r"Module|Library|LinkComplete|GetProcAddress"),
             ("api-memory", r"Malloc|Free|MemAlloc|HostAlloc|HostRegister|MemPool|MemCreate|"
                            r"MemMap|MemRelease"),
             ("api-sync", r"Synchronize|WaitEvent|StreamWait|EventQuery|StreamQuery"),
             ("api-copy", r"Memcpy|Memset|MemPrefetch"),
             ("api-launch", r"Launch"))
    for cid, pattern in rules:
        cat[s.str.contains(pattern, regex=True).to_numpy(dtype=bool)] = CATEGORY_INDEX[cid]
    return cat[codes] if len(s) else np.zeros(len(names), dtype=np.int16)


def _per_distinct(frame: pd.DataFrame, columns: list[str], fmt) -> pd.Series:
    """fmt(distinct rows of *columns*) mapped back onto every row: string building per
    distinct launch configuration instead of per event."""
    keys = frame[columns]
    distinct = keys.drop_duplicates()
    text = fmt(distinct).astype(object)
    codes = pd.MultiIndex.from_frame(distinct).get_indexer(pd.MultiIndex.from_frame(keys))
    return pd.Series(text.to_numpy()[codes], index=frame.index)


def _copy_category(frame: pd.DataFrame) -> np.ndarray:
    kind = frame["kind"].astype(str)
    pageable = ((frame["src_kind"].astype(str) == "Pageable")
                | (frame["dst_kind"].astype(str) == "Pageable")).to_numpy()
    cat = np.full(len(frame), CATEGORY_INDEX["copy-other"], dtype=np.int16)
    htod, dtoh = (kind == "Host-to-Device").to_numpy(), (kind == "Device-to-Host").to_numpy()
    cat[htod] = CATEGORY_INDEX["htod"]
    cat[htod & pageable] = CATEGORY_INDEX["htod-pageable"]
    cat[dtoh] = CATEGORY_INDEX["dtoh"]
    cat[dtoh & pageable] = CATEGORY_INDEX["dtoh-pageable"]
    cat[(kind == "Device-to-Device").to_numpy()] = CATEGORY_INDEX["dtod"]
    cat[(kind == "Peer-to-Peer").to_numpy()] = CATEGORY_INDEX["peer"]
    return cat


def _pack_rows(start: np.ndarray, end: np.ndarray, cap: int) -> np.ndarray:
    """Rows for intervals sorted by start so that no two in a row overlap (greedy, like
    nested calls/ranges stacking); beyond *cap* rows, the row that frees up first."""
    n = start.size
    rows = np.zeros(n, dtype=np.int16)
    if n < 2:
        return rows
    reach = np.maximum.accumulate(end)
    if not (start[1:] < reach[:-1]).any():
        return rows                      # nothing overlaps: one row (the common case)
    row_end: list[int] = []
    starts, ends = start.tolist(), end.tolist()
    for k in range(n):
        s = starts[k]
        for r, free_at in enumerate(row_end):
            if free_at <= s:
                row_end[r] = ends[k]
                rows[k] = r
                break
        else:
            if len(row_end) < cap:
                row_end.append(ends[k])
                rows[k] = len(row_end) - 1
            else:
                r = int(np.argmin(row_end))
                row_end[r] = max(row_end[r], ends[k])
                rows[k] = r
    return rows


def _fmt_dims(x, y, z) -> pd.Series:
    return x.astype(str) + "×" + y.astype(str) + "×" + z.astype(str)


def _kernel_info(k: pd.DataFrame) -> pd.Series:
    def fmt(d: pd.DataFrame) -> pd.Series:
        return ("grid " + _fmt_dims(d["grid_x"], d["grid_y"], d["grid_z"])
                + " · block " + _fmt_dims(d["block_x"], d["block_y"], d["block_z"])
                + " · " + d["registers"].astype(str) + " regs/thread · shared "
                + (d["shared_static"] + d["shared_dynamic"]).astype(str) + " B")

    cols = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
            "shared_static", "shared_dynamic"]
    return _per_distinct(k, cols, fmt) + _launch_info(k)


def _launch_info(frame: pd.DataFrame) -> pd.Series:
    codes, uniques = pd.factorize(frame["api_name"].astype(object), use_na_sentinel=True)
    text = np.array([" · launched by " + str(u) for u in uniques] + [""], dtype=object)
    return pd.Series(text[codes], index=frame.index)     # code -1 (no call) -> ""


def _bytes_labels(values: pd.Series) -> pd.Series:
    uniq = pd.unique(values)
    labels = {v: fmt_bytes(v) for v in uniq.tolist()}
    return values.map(labels)


def _copy_info(m: pd.DataFrame) -> pd.Series:
    return (m["kind"].astype(str) + " · " + _bytes_labels(m["bytes"]) + " · "
            + m["src_kind"].astype(str) + " → " + m["dst_kind"].astype(str)
            + _launch_info(m))


def _memset_info(m: pd.DataFrame) -> pd.Series:
    return (_bytes_labels(m["bytes"]) + " of " + m["mem_kind"].astype(str) + " memory"
            + _launch_info(m))


class _Parts:
    """Accumulates event columns from the frames before they are sorted and encoded."""

    def __init__(self) -> None:
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in (
            "lane", "start", "end", "cat", "name", "info", "corr", "bytes", "gpu")}

    def add(self, lane, start, end, cat, name, info, corr, nbytes, gpu: bool) -> None:
        n = len(start)
        self.cols["lane"].append(np.asarray(lane, dtype=np.int32))
        self.cols["start"].append(np.asarray(start, dtype=np.int64))
        self.cols["end"].append(np.asarray(end, dtype=np.int64))
        self.cols["cat"].append(np.asarray(cat, dtype=np.int16))
        self.cols["name"].append(np.asarray(name, dtype=object))
        self.cols["info"].append(np.asarray(info, dtype=object))
        self.cols["corr"].append(np.asarray(corr, dtype=np.int64))
        self.cols["bytes"].append(np.asarray(nbytes, dtype=np.int64))
        self.cols["gpu"].append(np.full(n, gpu, dtype=bool))

    def arrays(self) -> dict[str, np.ndarray]:
        empty = {"lane": np.int32, "start": np.int64, "end": np.int64, "cat": np.int16,
                 "name": object, "info": object, "corr": np.int64, "bytes": np.int64,
                 "gpu": bool}
        return {k: (np.concatenate(v) if v else np.zeros(0, dtype=empty[k]))
                for k, v in self.cols.items()}


def _gpu_lanes(trace: Trace) -> tuple[list[Lane], dict[tuple[int, int, int], int]]:
    ops = trace.gpu_ops
    lanes: list[Lane] = []
    index: dict[tuple[int, int, int], int] = {}
    if ops.empty:
        return lanes, index
    keys = ops[["device", "pid", "stream"]].drop_duplicates()
    legacy = trace.legacy_streams()
    multi_pid = keys["pid"].nunique() > 1
    keys = keys.assign(legacy=[(int(p), int(s)) in legacy
                               for p, s in zip(keys["pid"], keys["stream"], strict=True)])
    keys = keys.sort_values(["device", "pid", "legacy", "stream"],
                            ascending=[True, True, False, True])
    for dev, pid, stream, is_legacy in keys.itertuples(index=False):
        row = trace.device_row(int(dev))
        gpu_name = "" if row is None else f" · {row['name']}"
        label = (f"pid {pid} " if multi_pid else "") + f"stream {stream}"
        if is_legacy:
            label += " (legacy default)"
        index[(int(dev), int(pid), int(stream))] = len(lanes)
        lanes.append(Lane("gpu", f"GPU {dev}{gpu_name}", label, device=int(dev),
                          stream=int(stream), pid=int(pid)))
    return lanes, index


def _host_lanes(trace: Trace, first: int) -> tuple[list[Lane], dict[int, int], dict[int, int]]:
    """Per thread with NVTX ranges or CUDA API calls: its NVTX lane, then its API lane."""
    api_threads = set(trace.api["gtid"].astype("int64").unique().tolist()) \
        if len(trace.api) else set()
    nvtx_threads = set(trace.nvtx["gtid"].astype("int64").unique().tolist()) \
        if len(trace.nvtx) else set()
    firsts: dict[int, int] = {}
    for frame in (trace.api, trace.nvtx):
        if len(frame):
            for g, s in frame.groupby("gtid")["start"].min().items():
                firsts[int(g)] = min(firsts.get(int(g), s), int(s))
    pids: dict[int, int] = {}
    for frame in (trace.api, trace.nvtx):
        if len(frame):
            pids |= dict(zip(frame["gtid"].astype("int64").tolist(),
                             frame["pid"].astype("int64").tolist(), strict=True))
    multi_pid = len(set(pids.values())) > 1
    lanes: list[Lane] = []
    nvtx_lane: dict[int, int] = {}
    api_lane: dict[int, int] = {}
    for gtid in sorted(api_threads | nvtx_threads, key=lambda g: (firsts.get(g, 0), g)):
        pid = pids.get(gtid)
        group = trace.thread_name(gtid) + (f" · pid {pid}" if multi_pid else "")
        if gtid in nvtx_threads:
            nvtx_lane[gtid] = first + len(lanes)
            lanes.append(Lane("nvtx", group, "NVTX", gtid=gtid, pid=pid))
        if gtid in api_threads:
            api_lane[gtid] = first + len(lanes)
            lanes.append(Lane("api", group, "CUDA API", gtid=gtid, pid=pid))
    return lanes, nvtx_lane, api_lane


def _collect(trace: Trace, gpu_index, nvtx_lane, api_lane, parts: _Parts) -> None:
    def lanes_of(frame: pd.DataFrame) -> np.ndarray:
        keys = zip(frame["device"].tolist(), frame["pid"].tolist(), frame["stream"].tolist(),
                   strict=True)
        return np.array([gpu_index[(int(d), int(p), int(s))] for d, p, s in keys],
                        dtype=np.int32)

    k = trace.kernels
    if len(k):
        parts.add(lanes_of(k), k["start"], k["end"], np.full(len(k), CATEGORY_INDEX["kernel"]),
                  k["name"].astype(str), _kernel_info(k), k["corr"], np.zeros(len(k)), True)
    m = trace.memcpys
    if len(m):
        parts.add(lanes_of(m), m["start"], m["end"], _copy_category(m),
                  "memcpy " + m["kind"].astype(str), _copy_info(m), m["corr"], m["bytes"],
                  True)
    s = trace.memsets
    if len(s):
        parts.add(lanes_of(s), s["start"], s["end"], np.full(len(s), CATEGORY_INDEX["memset"]),
                  np.full(len(s), "memset", dtype=object), _memset_info(s), s["corr"],
                  s["bytes"], True)
    g = trace.graphs
    g = g[g["nodes"].to_numpy() == 0] if len(g) else g     # node-level: its kernels show
    if len(g):
        parts.add(lanes_of(g), g["start"], g["end"], np.full(len(g), CATEGORY_INDEX["graph"]),
                  "CUDA graph " + g["graph_id"].astype(str),
                  "graph exec " + g["graph_exec_id"].astype(str), g["corr"], np.zeros(len(g)),
                  True)
    api = trace.api
    if len(api):
        launched = _launched_info(trace)
        info = api["corr"].map(launched).fillna("")
        info = np.where(api["driver"].to_numpy(), "driver API", "runtime API") + info
        parts.add([api_lane[int(g)] for g in api["gtid"].tolist()], api["start"], api["end"],
                  _api_category(api["name"]), api["name"].astype(str), info, api["corr"],
                  np.zeros(len(api)), False)
    nv = trace.nvtx
    if len(nv):
        end = nv["end"].where(nv["end"].notna(), nv["start"]).astype("int64")
        cat = np.where(nv["library"].to_numpy(), CATEGORY_INDEX["nvtx-library"],
                       CATEGORY_INDEX["nvtx"])
        info = ("domain " + nv["domain"].astype(str).replace("", "(default)") + " · "
                + nv["kind"].astype(str))
        parts.add([nvtx_lane[int(g)] for g in nv["gtid"].tolist()], nv["start"], end, cat,
                  nv["name"].astype(str), info, np.full(len(nv), -1), np.zeros(len(nv)),
                  False)


def _launched_info(trace: Trace) -> dict[int, str]:
    """corr -> ' · launched memcpy Host-to-Device on stream 13' for API calls with GPU work
    (only the first process's ids when several collide: hover text only)."""
    ops = trace.gpu_ops
    if ops.empty:
        return {}
    text = (" · → " + ops["kind"].astype(str) + " " + ops["name"].astype(str)
            + " on stream " + ops["stream"].astype(str))
    return dict(zip(ops["corr"].astype("int64").tolist(), text.tolist(), strict=True))


def _origin_and_view(trace: Trace, starts: np.ndarray, ends: np.ndarray,
                     range_name: str | None) -> tuple[int, tuple[int, int] | None]:
    """t=0 and the initial view (absolute ns): the range's windows when one is given, else
    the report's span as gpugap's metrics define it (first to last GPU activity), else
    (no GPU work) the first event."""
    if range_name:
        win = nvtx_ranges.window(trace, range_name)
        if win[0].size:
            lo, hi = int(win[0].min()), int(win[1].max())
            return lo, (lo, hi)
    span = trace.span()
    if span is not None:
        return span[0], span
    return (int(starts.min()) if starts.size else 0), None


def build_timeline(trace: Trace, analysis: Analysis, *, label: str | None = None,
                   range_name: str | None = None) -> Timeline:
    """Lanes, events and finding markers of one report, times relative to its origin.

    *range_name* (default: the analysis's scope) sets the origin (t=0 at the range's
    first instance) and the initial view (the range's windows); without it t=0 is the
    first GPU activity and the view is the report's GPU span (the span of its metrics).
    Host events before t=0 get negative times.
    """
    range_name = range_name if range_name is not None else analysis.scope
    gpu_lanes, gpu_index = _gpu_lanes(trace)
    host_lanes, nvtx_lane, api_lane = _host_lanes(trace, len(gpu_lanes))
    lanes = gpu_lanes + host_lanes
    parts = _Parts()
    _collect(trace, gpu_index, nvtx_lane, api_lane, parts)
    a = parts.arrays()

    origin, view_abs = _origin_and_view(trace, a["start"], a["end"], range_name)
    order = np.lexsort((a["end"], a["start"], a["lane"]))
    a = {k: v[order] for k, v in a.items()}
    a["end"] = np.maximum(a["end"], a["start"])
    rows = np.zeros(a["start"].size, dtype=np.int16)
    bounds = np.flatnonzero(np.diff(a["lane"], prepend=-1, append=-1))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        lane = lanes[int(a["lane"][lo])]
        rows[lo:hi] = _pack_rows(a["start"][lo:hi], a["end"][lo:hi], LANE_ROWS_MAX[lane.kind])
        lane.rows = int(rows[lo:hi].max()) + 1
    order = np.lexsort((a["start"], rows, a["lane"]))
    a = {k: v[order] for k, v in a.items()}
    rows = rows[order]

    codes, uniques = pd.factorize(pd.Series(np.concatenate([a["name"], a["info"]]),
                                            dtype=object))
    n = a["start"].size
    strings = [str(u) for u in uniques]

    start = a["start"] - origin
    extent = (int(start.min()), int((a["end"] - origin).max())) if n else (0, 1)
    view = ((view_abs[0] - origin, view_abs[1] - origin) if view_abs else extent)

    tl = Timeline(label=label or Path(analysis.report).name, analysis=analysis,
                  origin_ns=origin, lanes=lanes, lane=a["lane"], row=rows, start=start,
                  dur=a["end"] - a["start"], cat=a["cat"], name=codes[:n].astype(np.int32),
                  info=codes[n:].astype(np.int32), corr=a["corr"], nbytes=a["bytes"],
                  strings=strings, findings=list(analysis.findings), markers=[],
                  track_rows=[], ranges=[], view=view, extent=extent, scope=range_name)
    _place_findings(tl, trace, a["gpu"])
    tl.ranges = _range_windows(tl, trace)
    return tl


def _range_windows(tl: Timeline, trace: Trace) -> list[dict[str, Any]]:
    """One entry per row of the range table, in its order (the row's extent: from the
    first of its windows to the last), for the range select box and the zoom links."""
    out = []
    for row, r in enumerate(tl.analysis.ranges):
        label = range_label(r)
        if r.extent is not None:
            lo, hi = r.extent
        else:                    # an Analysis built elsewhere: the name's windows
            try:
                win = nvtx_ranges.window(trace, f"{r.domain}:{r.name}" if r.domain
                                         else r.name)
            except UsageError:
                continue
            if not win[0].size:
                continue
            lo, hi = int(win[0].min()), int(win[1].max())
        out.append({"label": label, "depth": r.depth, "count": r.count,
                    "row": row, "s": tl.rel(lo), "e": tl.rel(hi)})
    return out


def range_label(r) -> str:
    """'measured > iter > gemms' (domain-prefixed when it has one)."""
    path = " > ".join(r.path or [r.name])
    return f"{r.domain}:{path}" if r.domain else path


# --- findings -> markers -----------------------------------------------------------

def _corr_refs(value: Any) -> Iterable[int]:
    """Every correlation id named anywhere in a finding's evidence."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k.endswith("correlation_id") and isinstance(v, (int, np.integer)):
                yield int(v)
            else:
                yield from _corr_refs(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _corr_refs(v)


class _Placer:
    def __init__(self, tl: Timeline, trace: Trace, is_gpu: np.ndarray) -> None:
        self.tl, self.trace = tl, trace
        wanted: set[int] = set()
        for f in tl.findings:
            wanted.update(_corr_refs(f.evidence))
        self.gpu: dict[int, list[int]] = {}
        self.api: dict[int, list[int]] = {}
        hit = np.flatnonzero(np.isin(tl.corr, np.fromiter(wanted, dtype=np.int64))) \
            if wanted else np.zeros(0, dtype=np.int64)
        for i in hit.tolist():
            (self.gpu if is_gpu[i] else self.api).setdefault(int(tl.corr[i]), []).append(i)
        self.device_lanes: dict[int | None, tuple[int, int]] = {}
        gpu = [i for i, lane in enumerate(tl.lanes) if lane.kind == "gpu"]
        for i in gpu:
            d = tl.lanes[i].device
            lo, hi = self.device_lanes.get(d, (i, i))
            self.device_lanes[d] = (min(lo, i), max(hi, i))
        self.all_gpu = (min(gpu), max(gpu)) if gpu else None

    def gpu_event(self, corr: Any, stream: Any = None) -> int | None:
        if corr is None:
            return None
        found = self.gpu.get(int(corr), [])
        if stream is not None:
            on_stream = [i for i in found if self.tl.lanes[int(self.tl.lane[i])].stream
                         == int(stream)]
            found = on_stream or found
        return found[0] if found else None

    def api_event(self, corr: Any) -> int | None:
        found = self.api.get(int(corr), []) if corr is not None else []
        return found[0] if found else None

    def host_lane(self, gtid: Any, prefer: str) -> int | None:
        if gtid is None:
            return None
        lanes = [i for i, lane in enumerate(self.tl.lanes)
                 if lane.gtid == int(gtid) and lane.kind in ("api", "nvtx")]
        pref = [i for i in lanes if self.tl.lanes[i].kind == prefer]
        return (pref or lanes or [None])[0]

    def lanes_for(self, f: Finding) -> tuple[int, int] | None:
        if f.device in self.device_lanes:
            return self.device_lanes[f.device]
        return self.all_gpu


def _place_findings(tl: Timeline, trace: Trace, is_gpu: np.ndarray) -> None:
    place = _Placer(tl, trace, is_gpu)
    markers: list[Marker] = []
    for fi, f in enumerate(tl.findings):
        color = rule_color(f.rule)
        mine: list[Marker] = []
        ev = f.evidence or {}

        def outline(i: int | None, _fi=fi, _mine=mine, _color=color) -> int | None:
            if i is not None:
                _mine.append(Marker(_fi, "ev", i=i, color=_color))
            return i

        def link(a: int | None, b: int | None, ends: str, _fi=fi, _mine=mine,
                 _color=color) -> None:
            if a is not None and b is not None:
                _mine.append(Marker(_fi, "link", a=a, b=b, ends=ends, color=_color))

        if f.rule == "launch-gap":
            lanes = place.lanes_for(f)
            for g in ev.get("gaps", []):
                if lanes and "start_ns" in g and "end_ns" in g:
                    mine.append(Marker(fi, "band", s=tl.rel(g["start_ns"]),
                                       e=tl.rel(g["end_ns"]), l0=lanes[0], l1=lanes[1],
                                       label=f"{f.cause} {fmt_ns(g['end_ns'] - g['start_ns'])}",
                                       color=CAUSE_COLORS.get(f.cause, color)))
                nxt = g.get("next") or {}
                op = outline(place.gpu_event(nxt.get("correlation_id"), nxt.get("stream")))
                call = outline(place.api_event(nxt.get("correlation_id")))
                link(call, op, "ss")
        elif f.rule == "serialized-streams":
            for t in ev.get("transitions", []):
                first, then = t.get("first") or {}, t.get("then") or {}
                a = outline(place.gpu_event(first.get("correlation_id"), first.get("stream")))
                b = outline(place.gpu_event(then.get("correlation_id"), then.get("stream")))
                link(a, b, "es")
        elif f.rule == "blocking-memcpy":
            for c in ev.get("copies", []):
                corr = c.get("correlation_id")
                call = outline(place.api_event(corr))
                copy = outline(place.gpu_event(corr, f.streams[0] if len(f.streams) == 1
                                               else None))
                link(call, copy, "ss")
        elif f.rule == "warmup-latency":
            for item in ev.get("items", []):
                prefer = "nvtx" if item.get("cause") == "first-iteration" else "api"
                lane = place.host_lane(item.get("gtid"), prefer)
                if lane is not None and "start" in item and "end" in item:
                    mine.append(Marker(fi, "span", s=tl.rel(item["start"]),
                                       e=tl.rel(item["end"]), l0=lane, l1=lane,
                                       label=str(item.get("what", f.cause)), color=color))
        else:
            seen: set[int] = set()
            for corr in _corr_refs(ev):
                i = place.gpu_event(corr)
                if i is not None and i not in seen:
                    seen.add(i)
                    outline(i)
        if not mine:
            # Nothing specific resolved: shade the finding's extent on its lanes.
            lanes = place.lanes_for(f)
            if lanes:
                if f.streams:
                    mine_lanes = [i for i in range(lanes[0], lanes[1] + 1)
                                  if tl.lanes[i].stream in set(f.streams)]
                    if mine_lanes:
                        lanes = (min(mine_lanes), max(mine_lanes))
                mine.append(Marker(fi, "band", s=tl.rel(f.start_ns), e=tl.rel(f.end_ns),
                                   l0=lanes[0], l1=lanes[1], label=f.cause, color=color))
        markers.extend(mine)
    tl.markers = markers
    tl.track_rows = _pack_track([(tl.rel(f.start_ns), tl.rel(f.end_ns))
                                 for f in tl.findings], tl.extent)


def _pack_track(spans: list[tuple[int, int]], extent: tuple[int, int]) -> list[int]:
    """Rows for the findings track: spans that overlap (or nearly: 0.4% of the report,
    room for a label) go to separate rows."""
    pad = max(1, (extent[1] - extent[0]) // 250)
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    row_end: list[int] = []
    rows = [0] * len(spans)
    for i in order:
        s, e = spans[i]
        for r, free in enumerate(row_end):
            if free <= s:
                row_end[r] = max(e, s) + pad
                rows[i] = r
                break
        else:
            row_end.append(max(e, s) + pad)
            rows[i] = len(row_end) - 1
    return rows


# --- JSON payload ------------------------------------------------------------------

def _finding_json(f: Finding, tl: Timeline, index: int) -> dict[str, Any]:
    return {"rule": f.rule, "cause": f.cause, "severity": f.severity, "count": f.count,
            "cost": int(f.cost_ns), "s": tl.rel(f.start_ns), "e": tl.rel(f.end_ns),
            "streams": [int(s) for s in f.streams], "device": f.device,
            "ranges": list(f.ranges), "message": f.message, "row": tl.track_rows[index],
            "color": rule_color(f.rule)}


def timeline_json(tl: Timeline) -> dict[str, Any]:
    """The panel as compact columnar JSON: events grouped by (lane, row), starts and
    correlation ids delta-encoded, names and details in one string table."""
    change = np.flatnonzero(np.diff(tl.lane.astype(np.int64) * 64 + tl.row, prepend=-1))
    counts = np.diff(np.append(change, tl.start.size))
    groups = np.stack([tl.lane[change], tl.row[change], counts], axis=1) \
        if change.size else np.zeros((0, 3), dtype=np.int64)
    return {
        "label": tl.label, "origin_ns": tl.origin_ns, "scope": tl.scope,
        "extent": list(tl.extent), "view": [int(tl.view[0]), int(tl.view[1])],
        "lanes": [lane.to_json() for lane in tl.lanes],
        "groups": groups.astype(np.int64).tolist(),
        "start": np.diff(tl.start, prepend=0).tolist(), "dur": tl.dur.tolist(),
        "cat": tl.cat.tolist(), "name": tl.name.tolist(), "info": tl.info.tolist(),
        "corr": np.diff(tl.corr, prepend=0).tolist(),
        "bytes": np.stack([nz := np.flatnonzero(tl.nbytes), tl.nbytes[nz]], axis=1)
        .ravel().tolist(),                      # sparse: event index, bytes, ...
        "strings": tl.strings,
        "findings": [_finding_json(f, tl, i) for i, f in enumerate(tl.findings)],
        "markers": [m.to_json() for m in tl.markers],
        "ranges": tl.ranges,
        "phases": _phases_json(tl),
        "verdict": None if tl.analysis.verdict is None else tl.analysis.verdict.headline,
    }


def _phases_json(tl: Timeline) -> list[dict[str, Any]]:
    """Each device's start-up, warm-up, steady state and tail (relative times)."""
    out = []
    for d in tl.analysis.devices:
        for name, span in ((d.get("accounting") or {}).get("phases") or {}).items():
            if span["end_ns"] > span["start_ns"]:
                out.append({"device": d["device"], "name": name,
                            "s": tl.rel(span["start_ns"]), "e": tl.rel(span["end_ns"])})
    return out


def _script_json(document: Any) -> str:
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=_json_default)
    # Inside <script>: no '</script>' or '<!--' can appear once '<' is escaped. JSON
    # escapes C0 controls itself; DEL and C1 (ESC's 8-bit twin, U+009B CSI) too here.
    text = text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029",
                                                                            "\\u2029")
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if np.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return str(value)


# --- HTML --------------------------------------------------------------------------

def _asset(name: str) -> str:
    return resources.files("gpugap.render").joinpath("assets", name).read_text("utf-8")


_C1 = re.compile("[\x7f-\x9f]")


def _esc(value: Any) -> str:
    """Text for HTML: escaped, and its control/format characters (escape sequences of a
    hostile name; invalid in HTML) shown visibly as in the terminal (safe_text), except
    the newlines and tabs of a message."""
    text = str(value)
    if not text.isprintable():
        text = "\n".join("\t".join(safe_text(part, None) for part in line.split("\t"))
                         for line in text.split("\n"))
    return html.escape(text, quote=True)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _metrics_html(a: Analysis) -> str:
    m = a.metrics
    if m is None:
        return f'<p class="error">{_esc(a.error or "no metrics")}</p>'
    rows = [("span", fmt_ns(m.span_ns)),
            ("GPU busy / idle", f"{_pct(m.gpu_busy_pct)} / {_pct(m.gpu_idle_pct)}"),
            ("kernel overlap", _pct(m.kernel_overlap_pct)),
            ("copy/compute overlap", _pct(m.copy_compute_overlap_pct)),
            ("concurrency", _num(m.concurrency)),
            ("kernels / copies / memsets", f"{m.kernels} / {m.copies} / {m.memsets}")]
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows)
    return f'<table class="metrics"><tbody>{body}</tbody></table>'


def _verdict_html(a: Analysis) -> str:
    v = a.verdict
    if v is None:
        return ""
    fix = f'<p class="fix"><b>fix:</b> {_esc(v.fix)}</p>' if v.fix else ""
    return (f'<div class="verdict {_esc(v.kind)}"><b>{_esc(v.kind.upper())}</b> '
            f'({_esc(v.scope)}): {_esc(v.headline)}{fix}</div>')


def _ranges_html(tl: Timeline, panel: int) -> str:
    a = tl.analysis
    if not a.ranges:
        return '<p class="muted">No NVTX ranges.</p>'
    zoomable = {w["row"]: i for i, w in enumerate(tl.ranges)}    # table row -> entry
    head = ("<tr><th>range</th><th>count</th><th>span</th><th>GPU busy</th>"
            "<th>kernel overlap</th><th>copy/compute</th><th>concurrency</th></tr>")
    several_domains = len({r.domain for r in a.ranges}) > 1
    top = min(r.depth for r in a.ranges)
    rows = []
    for row, r in enumerate(a.ranges):
        m = r.metrics
        label = f"{r.domain}:{r.name}" if several_domains and r.domain else r.name
        name = _esc(label)
        if row in zoomable:
            name = (f'<button type="button" class="range-link" data-panel="{panel}" '
                    f'data-range="{zoomable[row]}" title="{_esc(range_label(r))}: zoom to '
                    f'this range">{name}</button>')
        rows.append(f'<tr><td style="padding-left:{0.4 + 1.2 * (r.depth - top)}em">{name}</td>'
                    f"<td>{r.count}</td><td>{_esc(fmt_ns(m.span_ns))}</td>"
                    f"<td>{_pct(m.gpu_busy_pct)}</td><td>{_pct(m.kernel_overlap_pct)}</td>"
                    f"<td>{_pct(m.copy_compute_overlap_pct)}</td>"
                    f"<td>{_num(m.concurrency)}</td></tr>")
    if a.ranges_omitted:
        rows.append(f'<tr><td colspan="7" class="muted">{a.ranges_omitted} more range '
                    "paths not listed (the table keeps the ones with the most CPU time)"
                    "</td></tr>")
    return (f'<table class="ranges"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            "</table>")


def _findings_html(tl: Timeline, panel: int) -> str:
    if not tl.findings:
        note = ("No findings: nothing on this timeline crossed a threshold."
                if tl.analysis.metrics is not None else "No findings.")
        return f'<p class="muted">{note}</p>'
    items = []
    for i, f in enumerate(tl.findings):
        where = " › ".join(f.ranges) or "outside NVTX ranges"
        streams = ", ".join(map(str, f.streams[:8])) + ("…" if len(f.streams) > 8 else "")
        loc = f"{where} · t={fmt_ns(tl.rel(f.start_ns))}…{fmt_ns(tl.rel(f.end_ns))}"
        if streams:
            loc += f" · streams {streams}"
        if f.device is not None:
            loc += f" · GPU {f.device}"
        count = f" ×{f.count}" if f.count > 1 else ""
        items.append(
            f'<li class="finding sev-{_esc(f.severity)}" data-panel="{panel}" '
            f'data-finding="{i}" style="--rule:{rule_color(f.rule)}">'
            f'<button type="button" class="finding-head" title="show on the timeline">'
            f'<span class="num">{i + 1}</span><span class="sev">{_esc(f.severity)}</span> '
            f'<b>{_esc(f.rule)}</b> <span class="cause">[{_esc(f.cause)}]</span> '
            f'<span class="cost">cost {_esc(fmt_ns(f.cost_ns))}{count}</span></button>'
            f'<div class="where">{_esc(loc)}</div>'
            f'<p class="msg">{_esc(f.message)}</p>'
            f'<details><summary>fix</summary><p>{_esc(f.fix)}</p></details></li>')
    return f'<ol class="findings">{"".join(items)}</ol>'


def _panel_header(tl: Timeline) -> str:
    a = tl.analysis
    gpu = a.gpu or {}
    gpu_text = gpu.get("name") or "unknown GPU"
    if gpu.get("sm_count"):
        gpu_text += f" ({gpu['sm_count']} SMs, cc {gpu.get('compute_capability')})"
    scope = f"range {tl.scope}" if tl.scope else "whole report"
    verdict = (f'<div class="panel-verdict verdict {_esc(a.verdict.kind)}">'
               f'{_esc(a.verdict.headline)}</div>' if a.verdict is not None else "")
    return (f"<b>{_esc(tl.label)}</b> <span class=\"muted\">{_esc(a.report)} · nsys "
            f"{_esc(a.nsys_version or 'unknown')} · {_esc(gpu_text)} · {_esc(scope)} · "
            f"t=0 at {tl.origin_ns / 1e9:.6f} s of the session · {tl.events:,} events</span>"
            f"{verdict}")


def _legend_html() -> str:
    items = []
    for cid, label, color in CATEGORIES:
        cls = " pageable" if cid in PAGEABLE else ""
        items.append(f'<span class="key"><i class="sw{cls}" style="background:{color}"></i>'
                     f"{_esc(label)}</span>")
    for rule, color in RULE_COLORS.items():
        items.append(f'<span class="key"><i class="sw finding" style="border-color:{color}">'
                     f"</i>{_esc(rule)}</span>")
    for cause, color in CAUSE_COLORS.items():
        items.append(f'<span class="key"><i class="sw band" style="background:{color}"></i>'
                     f"gap: {_esc(cause)}</span>")
    return f'<div class="legend">{"".join(items)}</div>'


def render_html(panels: list[Timeline], *, title: str) -> str:
    """The whole page for one or more panels (stacked on one time scale)."""
    data = {"version": __version__, "title": title,
            "categories": [{"id": c[0], "label": c[1], "color": c[2]} for c in CATEGORIES],
            "kernel_palette": list(KERNEL_PALETTE), "severity_colors": SEVERITY_COLORS,
            "panels": [timeline_json(tl) for tl in panels]}
    findings = "".join(
        (f'<h3>{_esc(tl.label)}</h3>' if len(panels) > 1 else "")
        + _findings_html(tl, p) for p, tl in enumerate(panels))
    summaries = "".join(
        f'<section class="summary"><h3>{_esc(tl.label)}</h3>{_verdict_html(tl.analysis)}'
        f'{_metrics_html(tl.analysis)}'
        f"<h4>NVTX ranges</h4>{_ranges_html(tl, p)}"
        + "".join(f'<p class="warn">warning: {_esc(w)}</p>' for w in tl.analysis.warnings)
        + "</section>" for p, tl in enumerate(panels))
    lanes = "".join(f'<div class="panel" data-panel="{p}"><div class="panel-head">'
                    f'{_panel_header(tl)}</div><canvas class="lanes" data-panel="{p}" '
                    f'aria-label="timeline of {_esc(tl.label)}"></canvas></div>'
                    for p, tl in enumerate(panels))
    total = sum(tl.events for tl in panels)
    n_findings = sum(len(tl.findings) for tl in panels)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="gpugap {_esc(__version__)}">
<title>{_esc(title)}</title>
<style>{_asset("timeline.css")}</style>
</head><body>
<header><h1>{_esc(title)}</h1>
<div class="muted">gpugap {_esc(__version__)} · {len(panels)} timeline(s) ·
{total:,} events · {n_findings} finding(s) · wheel: zoom · drag: pan · drag on the
overview: pick a window · W/S/A/D keys · double-click: whole report</div>
<noscript><p class="error">The timeline needs JavaScript; the findings and tables below
do not.</p></noscript></header>
<main>
<div id="timeline">
<div class="controls">
<button type="button" id="zoom-in" title="zoom in (W)">+</button>
<button type="button" id="zoom-out" title="zoom out (S)">−</button>
<button type="button" id="zoom-reset" title="whole report (double-click)">whole</button>
<button type="button" id="zoom-initial" title="initial view">initial</button>
<label>range <select id="range-select"><option value="">—</option></select></label>
<span id="status" role="status"></span>
</div>
<canvas id="overview" height="36" aria-label="overview: drag to pick the time window">
</canvas>
<div id="panels">{lanes}</div>
<div id="tooltip" hidden></div>
{_legend_html()}
</div>
<aside id="sidebar"><h2>Findings</h2>{findings}</aside>
</main>
<div id="summaries">{summaries}</div>
<script type="application/json" id="gpugap-data">{_script_json(data)}</script>
<script>{_asset("timeline.js")}</script>
</body></html>
"""


@dataclass
class Written:
    path: Path
    size_bytes: int
    events: int
    findings: int


def build_panels(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
                 trace: Trace | None = None, *, range_name: str | None = None
                 ) -> list[Timeline]:
    return [build_timeline(p.trace, p.analysis, label=p.label, range_name=range_name)
            for p in as_panels(source, trace)]


def output_args(source, trace, path) -> tuple[Trace | None, Path]:
    """(trace, path) of the writers' ``(source, trace, path)`` arguments, where a list of
    panels may also be followed directly by the path: ``write_html(panels, "t.html")``."""
    if path is None and isinstance(trace, (str, os.PathLike)):
        trace, path = None, trace
    if path is None:
        raise TypeError("no output path given")
    return trace, Path(path)


def write_html(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
               trace: Trace | str | os.PathLike | None = None,
               path: str | os.PathLike | None = None, *,
               title: str | None = None, range_name: str | None = None) -> Written:
    """Write the self-contained HTML timeline.

    *source* is an Analysis (then *trace* is its Trace) or a list of
    ``Panel(label, trace, analysis)`` (or plain tuples) drawn one above the other on one
    time scale, each aligned to its own start: the start of *range_name* (default: each
    analysis's scope) when given, else its first GPU activity. With a list, the path may
    come second: ``write_html(panels, path)``. Replaces *path* (atomically; a symlink
    there is replaced, not followed); callers that must not (the CLI without --force)
    check first with :func:`check_outputs`.
    """
    trace, out = output_args(source, trace, path)
    panels = build_panels(source, trace, range_name=range_name)
    if title is None:
        title = ("gpugap: " + " vs ".join(tl.label for tl in panels))
    text = render_html(panels, title=title)
    _write_text(out, text)
    return Written(out, out.stat().st_size, sum(tl.events for tl in panels),
                   sum(len(tl.findings) for tl in panels))


def _write_text(path: Path, text: str, force: bool = True) -> None:
    write_atomic(path, text, force=force)


# --- the CLI's entry point ---------------------------------------------------------

def check_outputs(paths: Iterable[str | os.PathLike | None], *, force: bool,
                  inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """UsageError unless every output path can be (over)written as asked and none is an
    input (see :func:`gpugap.files.validate_outputs`)."""
    validate_outputs([("output", None if p is None else Path(p)) for p in paths],
                     [None if p is None else Path(p) for p in inputs], force=force)


@dataclass
class Outputs:
    """The timeline files the analyze command was asked for, checked up front so that a
    clash fails before the report is loaded."""

    html: Path | None = None
    svg: Path | None = None
    png: Path | None = None
    range_name: str | None = None
    force: bool = False

    @property
    def wanted(self) -> bool:
        return bool(self.html or self.svg or self.png)

    def write(self, analysis: Analysis, trace: Trace, report=None) -> list[Written]:
        """Write each requested file; one line per file to *report* (a callable)."""
        if not self.wanted:
            return []
        from gpugap.render.timeline_svg import render_svg, svg_to_png

        panels = build_panels(analysis, trace, range_name=self.range_name)
        done: list[Written] = []
        if self.html:
            text = render_html(panels, title=f"gpugap: {panels[0].label}")
            _write_text(self.html, text, self.force)
            done.append(Written(self.html, self.html.stat().st_size, panels[0].events,
                                len(panels[0].findings)))
        if self.svg or self.png:
            svg = render_svg(panels)
            if self.svg:
                _write_text(self.svg, svg, self.force)
                done.append(Written(self.svg, self.svg.stat().st_size, panels[0].events,
                                    len(panels[0].findings)))
            if self.png:
                svg_to_png(svg, self.png, force=self.force)
                done.append(Written(self.png, self.png.stat().st_size, panels[0].events,
                                    len(panels[0].findings)))
        if report is not None:
            for w in done:
                report(safe_text(f"wrote {w.path} ({w.size_bytes / 1024:,.0f} KiB)", None))
        return done


def timeline_outputs(html: Path | None, svg: Path | None, png: Path | None, *,
                     force: bool = False, range_name: str | None = None,
                     inputs: Iterable[Path | None] = ()) -> Outputs:
    """Validate --html/--svg/--png (an input, exists without --force, PNG without
    chromium) and return what to write once the analysis is done."""
    validate_outputs([("--html", html), ("--svg", svg), ("--png", png)], inputs,
                     force=force)
    if png is not None:
        from gpugap.render.timeline_svg import find_chromium

        find_chromium()
    return Outputs(html=html, svg=svg, png=png, range_name=range_name, force=force)
