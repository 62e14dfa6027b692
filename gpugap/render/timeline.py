"""The timeline as a drawing model, whatever draws it (the HTML page, the SVG/PNG export):
lanes (one per device and stream with GPU work; per host thread an NVTX lane and a CUDA
API lane), events in categories with their colours, the findings as markers placed from
their marks (gpugap.rules.model: bands, spans, outlined events, links), and the panels
(several analyses on one time scale, each aligned to its own start).

Times in the model are int64 ns relative to the panel's origin: the start of the
``--range`` window when one is given, else the panel's first GPU activity (the start of
the span gpugap's metrics use), so bad and good variants line up.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from gpugap.accounting import ranges as nvtx_ranges
from gpugap.accounting.api_names import DRAWN
from gpugap.analysis import Analysis
from gpugap.errors import UsageError
from gpugap.intervals import is_sorted
from gpugap.render import decimate
from gpugap.render.numbering import Listing, analysis_listing
from gpugap.render.outputs import View
from gpugap.report.trace import Trace, graph_label
from gpugap.rules import registry
from gpugap.rules.base import Finding
from gpugap.rules.model import Band, EventRef, Link, Mark, Outline, Severity, Span
from gpugap.units import fmt_bytes, fmt_ns

# The timeline reads the users' DataFrames: pandas is imported where it draws one, so
# that importing the renderers (an analysis does) costs none.
if TYPE_CHECKING:
    import pandas as pd

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
SEVERITY_COLORS = {Severity.ERROR: "#c62828", Severity.WARNING: "#e69500",
                   Severity.INFO: "#1f77b4"}
# Colours for rules that name none (gpugap.rules.base.Rule.color), picked by their id.
RULE_PALETTE = ("#6d4c41", "#00838f", "#ad1457", "#283593", "#558b2f", "#ef6c00",
                "#4527a0", "#37474f")

LANE_ROWS_MAX = {"gpu": 4, "api": 6, "nvtx": 8}


def rule_color(rule: str, cause: str | None = None) -> str:
    """The colour of a rule's findings, or of one of its causes: the cause's own
    (gpugap.rules.model.Cause.color), else the rule's (Rule.color), else one of
    RULE_PALETTE chosen by the rule's id (the same in every run)."""
    own = cause_color(rule, cause) if cause is not None else None
    if own is not None:
        return own
    found = registry().get(rule)
    if found is not None and found.color:
        return found.color
    return RULE_PALETTE[zlib.crc32(rule.encode()) % len(RULE_PALETTE)]


def cause_color(rule: str, cause: str) -> str | None:
    """A cause's own colour (gpugap.rules.model.Cause.color); None when it has none."""
    found = registry().get(rule)
    own = found.causes.get(cause) if found is not None else None
    return own.color if own is not None else None


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
    # Per finding (index in findings): its label, as the terminal numbers it ('3', '3a',
    # 'S1': gpugap.render.numbering); and the indices in the terminal's order. The
    # findings are those every view lists (gpugap.render.numbering.listing), in its
    # order; what it leaves out is counted in *listing*.
    labels: list[str] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    listing: Listing | None = None
    # What the initial view leaves out before it (a whole report opened on its steady
    # state): the folded span (relative ns) and its name, e.g. 'start-up 3.2 s'.
    fold: dict[str, Any] | None = None
    # A report with more events than the page draws (gpugap.render.decimate): per event,
    # how many it stands for (a merged span: >1); and the cut's summary (events, drawn,
    # spans, merged, quantum_ns, max_events). None when every event is drawn.
    merged: np.ndarray | None = None
    decimation: dict[str, Any] | None = None

    @property
    def events(self) -> int:
        return int(self.start.size)

    def rel(self, t: float | int) -> int:
        return int(t) - self.origin_ns


def _api_category(names: pd.Series) -> np.ndarray:
    """API call name -> category id, by what the call does (computed per distinct name)."""
    import pandas as pd

    codes, uniques = pd.factorize(names.astype(str))
    s = pd.Series(uniques, dtype=object)
    cat = np.full(len(s), CATEGORY_INDEX["api-other"], dtype=np.int16)
    # The classes of gpugap.accounting.api_names, the first that matches winning: the
    # last written.
    for cid, pattern in reversed(DRAWN):
        cat[s.str.contains(pattern.pattern, regex=True).to_numpy(dtype=bool)] = \
            CATEGORY_INDEX[cid]
    return cat[codes] if len(s) else np.zeros(len(names), dtype=np.int16)


def _per_distinct(frame: pd.DataFrame, columns: list[str], fmt) -> pd.Series:
    """fmt(distinct rows of *columns*) mapped back onto every row: string building per
    distinct launch configuration instead of per event."""
    import pandas as pd

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
    import pandas as pd

    codes, uniques = pd.factorize(frame["api_name"].astype(object), use_na_sentinel=True)
    text = np.array([" · launched by " + str(u) for u in uniques] + [""], dtype=object)
    return pd.Series(text[codes], index=frame.index)     # code -1 (no call) -> ""


def _bytes_labels(values: pd.Series) -> pd.Series:
    import pandas as pd

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
            "lane", "start", "end", "cat", "name", "info", "corr", "bytes", "gpu",
            "merged")}

    def add(self, lane, start, end, cat, name, info, corr, nbytes, gpu: bool,
            merged) -> None:
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
        self.cols["merged"].append(np.asarray(merged, dtype=np.int64))

    def arrays(self) -> dict[str, np.ndarray]:
        empty = {"lane": np.int32, "start": np.int64, "end": np.int64, "cat": np.int16,
                 "name": object, "info": object, "corr": np.int64, "bytes": np.int64,
                 "gpu": bool, "merged": np.int64}
        return {k: (np.concatenate(v) if v else np.zeros(0, dtype=empty[k]))
                for k, v in self.cols.items()}


def _gpu_lanes(trace: Trace) -> tuple[list[Lane], dict[tuple[int, int, int], int]]:
    import pandas as pd

    lanes: list[Lane] = []
    index: dict[tuple[int, int, int], int] = {}
    cols = ["device", "pid", "stream"]
    step = 1 << 20                  # a slice at a time: no copy of 10M kernels' columns
    ops = [f[cols].iloc[lo:lo + step].drop_duplicates()
           for f in (trace.kernels, trace.memcpys, trace.memsets, trace.graphs)
           for lo in range(0, len(f), step)]
    if not ops:
        return lanes, index
    keys = pd.concat(ops, ignore_index=True).astype("int64").drop_duplicates()
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


def _threads(frame: pd.DataFrame, rows: int = 1 << 20) -> pd.DataFrame:
    """Per thread (gtid) of *frame*: its first start and its pid (the last row's), a
    slice of *rows* rows at a time: 24M API calls need no column-sized temporaries."""
    import pandas as pd

    parts = [frame.iloc[lo:lo + rows].groupby("gtid", sort=False)
             .agg(first=("start", "min"), pid=("pid", "last"))
             for lo in range(0, len(frame), rows)]
    if not parts:
        return pd.DataFrame({"first": [], "pid": []}, dtype="int64")
    return pd.concat(parts).groupby(level=0, sort=False).agg(first=("first", "min"),
                                                             pid=("pid", "last"))


def _host_lanes(trace: Trace, first: int) -> tuple[list[Lane], dict[int, int], dict[int, int]]:
    """Per thread with NVTX ranges or CUDA API calls: its NVTX lane, then its API lane."""
    api, nvtx = _threads(trace.api), _threads(trace.nvtx)
    api_threads = {int(g) for g in api.index}
    nvtx_threads = {int(g) for g in nvtx.index}
    firsts: dict[int, int] = {}
    pids: dict[int, int] = {}
    for threads in (api, nvtx):
        for g, s, pid in zip(threads.index.tolist(), threads["first"].tolist(),
                             threads["pid"].tolist(), strict=True):
            firsts[int(g)] = min(firsts.get(int(g), s), int(s))
            pids[int(g)] = int(pid)
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


# The most events a panel draws (events plus merged spans; gpugap.render.decimate): a
# page of this many stays a few MB and smooth; a larger report merges its short events
# into spans, except a finding's evidence and, where they fit in half of it, the events
# of the initial view.
DEFAULT_MAX_EVENTS = 250_000
_GPU_KINDS = ("kernel", "memcpy", "memset", "graph")


def _frames(trace: Trace) -> list[tuple[str, pd.DataFrame]]:
    """The frames the timeline draws, by kind (each sorted by start, as loaded)."""
    g = trace.graphs
    g = g[g["nodes"].to_numpy() == 0] if len(g) else g     # node-level: its kernels show
    return [("kernel", trace.kernels), ("memcpy", trace.memcpys), ("memset", trace.memsets),
            ("graph", g), ("api", trace.api), ("nvtx", trace.nvtx)]


def _lane_finder(gpu_index, nvtx_lane, api_lane):
    """kind, frame -> the lane of each row (vectorised: a hash lookup per row)."""
    import pandas as pd

    gpu_keys = (pd.MultiIndex.from_tuples(list(gpu_index)) if gpu_index else None)
    gpu_lut = np.array(list(gpu_index.values()) + [-1], dtype=np.int32)
    host = {"api": api_lane, "nvtx": nvtx_lane}
    host_keys = {k: pd.Index(np.array(list(v), dtype=np.int64)) for k, v in host.items()}
    host_lut = {k: np.array(list(v.values()) + [-1], dtype=np.int32)
                for k, v in host.items()}

    def lanes_of(kind: str, frame: pd.DataFrame) -> np.ndarray:
        if kind in _GPU_KINDS:
            if gpu_keys is None:
                return np.full(len(frame), -1, dtype=np.int32)
            at = gpu_keys.get_indexer(pd.MultiIndex.from_arrays(
                [frame["device"].to_numpy(), frame["pid"].to_numpy(),
                 frame["stream"].to_numpy()]))
            return gpu_lut[at]
        at = host_keys[kind].get_indexer(frame["gtid"].to_numpy(dtype=np.int64))
        return host_lut[kind][at]

    return lanes_of


def _evidence_corr(findings: Sequence[Finding]) -> np.ndarray:
    """The correlation ids of the events the findings' marks point at."""
    wanted = {int(r.correlation_id) for f in findings for r in _refs(f.marks)}
    return np.array(sorted(c for c in wanted if c >= 0), dtype=np.int64)


def _decimated(frames, lanes_of, n_lanes: int, max_events: int, evidence: np.ndarray,
               view: tuple[int, int] | None):
    """The frames cut down to at most *max_events* events and spans (decimate), as
    (kind, rows of the frame, span ends, span counts), with the cut's summary."""
    if view is not None:             # the initial view drawn in full where it fits
        inside = sum(int(np.searchsorted(f["start"].to_numpy(), view[1], "right")
                         - np.searchsorted(f["start"].to_numpy(), view[0], "left"))
                     for _, f in frames)
        view = view if inside <= max_events // 2 else None
    sources = []
    frames = [(kind, f if is_sorted(f["start"].to_numpy()) else
               f.sort_values("start", kind="stable")) for kind, f in frames]
    for kind, f in frames:
        start = f["start"].to_numpy(dtype=np.int64)
        end = (f["end"].where(f["end"].notna(), f["start"]) if kind == "nvtx"
               else f["end"]).to_numpy(dtype=np.int64)
        corr = f["corr"].to_numpy() if kind != "nvtx" else None

        def lanes(lo, hi, kind=kind, f=f):
            return lanes_of(kind, f.iloc[lo:hi])

        def protected(lo, hi, start=start, corr=corr):
            keep = (np.isin(corr[lo:hi], evidence) if corr is not None and evidence.size
                    else np.zeros(hi - lo, dtype=bool))
            if view is not None:
                keep |= (start[lo:hi] >= view[0]) & (start[lo:hi] <= view[1])
            return keep

        sources.append(decimate.Source(start, end, lanes, protected))
    kept = decimate.decimate(sources, n_lanes, max_events)
    parts = [(kind, f.iloc[rows], end, count) for (kind, f), rows, end, count
             in zip(frames, kept.rows, kept.end, kept.count, strict=True)]
    summary = {"events": kept.events, "drawn": kept.kept, "spans": kept.spans,
               "merged": int(sum(int(c[c > 1].sum()) for c in kept.count)),
               "quantum_ns": kept.quantum_ns if kept.quantum_ns < decimate.INF else None,
               "max_events": max_events}
    return parts, summary


def _collect(parts_in, lanes_of, trace: Trace, parts: _Parts) -> None:
    """Event columns of each (kind, frame, span ends or None, span counts or None): a
    merged span is drawn as its first event, to the span's end, with its count."""
    for kind, f, span_end, count in parts_in:
        if not len(f):
            continue
        end = f["end"] if span_end is None else span_end
        merged = np.ones(len(f), dtype=np.int64) if count is None else count
        lane = lanes_of(kind, f)
        if kind == "kernel":
            parts.add(lane, f["start"], end, np.full(len(f), CATEGORY_INDEX["kernel"]),
                      f["name"].astype(str), _kernel_info(f), f["corr"], np.zeros(len(f)),
                      True, merged)
        elif kind == "memcpy":
            parts.add(lane, f["start"], end, _copy_category(f),
                      "memcpy " + f["kind"].astype(str), _copy_info(f), f["corr"],
                      f["bytes"], True, merged)
        elif kind == "memset":
            parts.add(lane, f["start"], end, np.full(len(f), CATEGORY_INDEX["memset"]),
                      np.full(len(f), "memset", dtype=object), _memset_info(f), f["corr"],
                      f["bytes"], True, merged)
        elif kind == "graph":
            parts.add(lane, f["start"], end, np.full(len(f), CATEGORY_INDEX["graph"]),
                      "CUDA graph " + f["graph_id"].astype(str),
                      "graph exec " + f["graph_exec_id"].astype(str), f["corr"],
                      np.zeros(len(f)), True, merged)
        elif kind == "api":
            launched = _launched_info(trace, f["corr"].to_numpy())
            info = f["corr"].map(launched).fillna("")
            info = np.where(f["driver"].to_numpy(), "driver API", "runtime API") + info
            parts.add(lane, f["start"], end, _api_category(f["name"]), f["name"].astype(str),
                      info, f["corr"], np.zeros(len(f)), False, merged)
        elif kind == "nvtx":
            if span_end is None:
                end = f["end"].where(f["end"].notna(), f["start"]).astype("int64")
            cat = np.where(f["library"].to_numpy(), CATEGORY_INDEX["nvtx-library"],
                           CATEGORY_INDEX["nvtx"])
            info = ("domain " + f["domain"].astype(str).replace("", "(default)") + " · "
                    + f["kind"].astype(str))
            parts.add(lane, f["start"], end, cat, f["name"].astype(str), info,
                      np.full(len(f), -1), np.zeros(len(f)), False, merged)


def _launched_info(trace: Trace, corr: np.ndarray) -> dict[int, str]:
    """corr -> ' · launched memcpy Host-to-Device on stream 13' for API calls (of *corr*)
    with GPU work (only one process's ids when several collide: hover text only)."""
    import pandas as pd

    found = []
    for kind, f in (("kernel", trace.kernels), ("memcpy", trace.memcpys),
                    ("memset", trace.memsets), ("graph", trace.graphs)):
        if not len(f):
            continue
        hit = f[f["corr"].isin(corr).to_numpy()]     # a hash of the few *corr*
        if not len(hit):
            continue
        name = (hit["name"].astype(str) if kind == "kernel"
                else hit["kind"].astype(str) if kind == "memcpy"
                else pd.Series("memset", index=hit.index) if kind == "memset"
                else hit["graph_id"].map(graph_label))
        found.append(pd.DataFrame({"start": hit["start"].to_numpy(),
                                   "corr": hit["corr"].to_numpy(dtype=np.int64),
                                   "text": (f" · → {kind} " + name.astype(str)
                                            + " on stream " + hit["stream"].astype(str)
                                            ).to_numpy()}))
    if not found:
        return {}
    ops = pd.concat(found, ignore_index=True).sort_values("start", kind="stable")
    return dict(zip(ops["corr"].tolist(), ops["text"].tolist(), strict=True))


# A whole report opens on this many steady iterations from the middle of its steady
# state: enough to see the pattern repeat, few enough that each one reads.
VIEW_ITERATIONS = 3
# Time before the steady state shorter than this share of the view is drawn, not folded.
FOLD_MIN_SHARE = 0.25


def _steady_view(analysis: Analysis, span: tuple[int, int], first_event: int
                 ) -> tuple[tuple[int, int], list[str] | None]:
    """The initial view of a whole report (absolute ns): VIEW_ITERATIONS iterations from
    the middle of its steady state (the device with the most steady iterations), else
    its whole steady state (else from the end of start-up on); and the lines
    that name what it leaves out before it, from the report's *first_event* ('start-up
    3.21 s', '+ 40 iterations'), None when it leaves out too little to fold."""
    acc = analysis.accounting
    if acc is None or not acc.devices:
        return span, None
    phases = max((d.phases for d in acc.devices.values()),
                 key=lambda p: (len(p.steady_iterations), -p.device))
    steady = phases.steady_iterations
    startup_end, steady_end = analysis.scope.steady_span(phases.device)
    if len(steady) > VIEW_ITERATIONS:
        first = int(steady[(len(steady) - VIEW_ITERATIONS) // 2])
        lo, hi = phases.iteration_windows(range(first, first + VIEW_ITERATIONS))
        view = (int(lo[0]), int(hi[-1]))
        skipped = first - int(steady[0])
    else:                   # the whole steady state (what the verdict judged)
        lo, hi = startup_end, steady_end
        view = (int(lo), int(hi)) if hi > lo else (max(span[0], int(startup_end)), span[1])
        skipped = 0
    if view[1] <= view[0] or view[0] - span[0] < FOLD_MIN_SHARE * (view[1] - view[0]):
        return (span[0], max(span[1], view[1])), None
    # Start-up as the page shows it: from the report's first event (host start-up
    # included) to the steady state.
    lines = ["◀ folded:", f"start-up {fmt_ns(max(0, int(startup_end) - first_event))}"]
    if skipped:
        lines.append(f"+ {skipped} iteration{'s' if skipped > 1 else ''}")
    return view, lines


def _origin_and_view(trace: Trace, analysis: Analysis, starts: np.ndarray,
                     range_name: str | None
                     ) -> tuple[int, tuple[int, int] | None, list[str] | None]:
    """t=0, the initial view (absolute ns) and the name of what it folds before it: the
    range's windows when one is given; else a few steady iterations of the report (t=0
    at the first of them; _steady_view), or its GPU span when there is no start-up to
    fold (t=0 at the first GPU activity); else (no GPU work) the first event."""
    if range_name:
        win = nvtx_ranges.window(trace, range_name)
        if win[0].size:
            lo, hi = int(win[0].min()), int(win[1].max())
            return lo, (lo, hi), None
    span = trace.span()
    if span is not None:
        view, fold = _steady_view(analysis, span,
                                  int(starts.min()) if starts.size else span[0])
        return view[0], view, fold
    return (int(starts.min()) if starts.size else 0), None, None


def build_timeline(trace: Trace, analysis: Analysis, *, label: str | None = None,
                   range_name: str | None = None,
                   max_events: int = DEFAULT_MAX_EVENTS,
                   min_severity: Severity | str | None = None) -> Timeline:
    """Lanes, events and finding markers of one report, times relative to its origin.

    *range_name* (default: the analysis's scope) sets the origin (t=0 at the range's
    first instance) and the initial view (the range's windows); without it the view is
    a few iterations from the middle of the steady state, t=0 at the first of them, and
    what comes before is folded (``Timeline.fold``); a report with no start-up worth
    folding opens on its GPU span (the span of its metrics), t=0 at its first GPU
    activity. Events before t=0 get negative times.

    A report of more than *max_events* events draws at most that many: short events
    merged into spans on each lane (gpugap.render.decimate; ``Timeline.merged``,
    ``Timeline.decimation``), the findings' evidence and, where they fit, the initial
    view's events kept as they are.

    The findings drawn and listed are those the terminal lists, from *min_severity*
    up (gpugap.render.numbering.listing), with its labels.
    """
    import pandas as pd

    range_name = range_name if range_name is not None else analysis.scope.range_name
    gpu_lanes, gpu_index = _gpu_lanes(trace)
    host_lanes, nvtx_lane, api_lane = _host_lanes(trace, len(gpu_lanes))
    lanes = gpu_lanes + host_lanes
    frames = [(kind, f) for kind, f in _frames(trace) if len(f)]
    firsts = np.array([int(f["start"].min()) for _, f in frames], dtype=np.int64)
    origin, view_abs, fold = _origin_and_view(trace, analysis, firsts, range_name)
    lanes_of = _lane_finder(gpu_index, nvtx_lane, api_lane)
    decimation = None
    if sum(len(f) for _, f in frames) > max_events:
        chosen, decimation = _decimated(frames, lanes_of, len(lanes), max_events,
                                        _evidence_corr(analysis.findings), view_abs)
    else:
        chosen = [(kind, f, None, None) for kind, f in frames]
    parts = _Parts()
    _collect(chosen, lanes_of, trace, parts)
    del chosen
    a = parts.arrays()
    span = a["merged"] > 1              # a span stands for several: no id, no bytes
    a["corr"][span] = -1
    a["bytes"][span] = 0

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
                  strings=strings, findings=[], markers=[],
                  track_rows=[], ranges=[], view=view, extent=extent, scope=range_name,
                  merged=a["merged"] if decimation else None, decimation=decimation)
    floor = None if min_severity is None or Severity(min_severity) <= Severity.INFO \
        else min_severity
    tl.listing = analysis_listing(analysis, floor)
    tl.findings = [e.finding for e in tl.listing.entries]
    tl.labels = [e.label for e in tl.listing.entries]
    tl.order = list(range(len(tl.findings)))
    if fold is not None:
        tl.fold = {"s": extent[0], "e": view[0], "lines": fold,
                   "label": " ".join(fold[1:]).replace(" + ", " and ")}
    _place_findings(tl, a["gpu"])
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

# The operation kind (gpugap.rules.model.EventRef.kind) of each event category.
CATEGORY_KIND = tuple("kernel" if c == "kernel" else "memset" if c == "memset"
                      else "graph" if c == "graph" else "api" if c.startswith("api")
                      else "nvtx" if c.startswith("nvtx") else "memcpy"
                      for c, _, _ in CATEGORIES)


def _refs(marks: Iterable[Mark]) -> Iterable[EventRef]:
    for m in marks:
        if isinstance(m, Outline):
            yield m.event
        elif isinstance(m, Link):
            yield m.source
            yield m.target


class _Placer:
    """Finds where marks go on one timeline: events by reference, lanes by device and
    thread."""

    def __init__(self, tl: Timeline, is_gpu: np.ndarray) -> None:
        self.tl = tl
        wanted = {r.correlation_id for f in tl.findings for r in _refs(f.marks)}
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

    def event(self, ref: EventRef) -> int | None:
        """The event *ref* names: among those with its correlation id, the first of its
        kind, on its stream, of its process, starting when it says, as far as any is."""
        found = (self.api if ref.kind == "api" else self.gpu).get(int(ref.correlation_id), [])
        tl = self.tl
        start = None if ref.start_ns is None else tl.rel(ref.start_ns)
        for wanted, have in (
                (ref.kind, lambda i: CATEGORY_KIND[int(tl.cat[i])]),
                (ref.stream, lambda i: tl.lanes[int(tl.lane[i])].stream),
                (ref.pid, lambda i: tl.lanes[int(tl.lane[i])].pid),
                (start, lambda i: int(tl.start[i]))):
            if wanted is not None and len(found) > 1:
                found = [i for i in found if have(i) == wanted] or found
        return found[0] if found else None

    def host_lane(self, gtid: int, prefer: str) -> int | None:
        lanes = [i for i, lane in enumerate(self.tl.lanes)
                 if lane.gtid == int(gtid) and lane.kind in ("api", "nvtx")]
        pref = [i for i in lanes if self.tl.lanes[i].kind == prefer]
        return (pref or lanes or [None])[0]

    def gpu_lanes(self, device: int | None, streams: Iterable[int] = ()
                  ) -> tuple[int, int] | None:
        """The lanes of *device* (all GPU lanes when it has none), narrowed to those of
        *streams* where it has any."""
        lanes = self.device_lanes.get(device, self.all_gpu)
        wanted = set(streams)
        if lanes and wanted:
            mine = [i for i in range(lanes[0], lanes[1] + 1) if self.tl.lanes[i].stream in wanted]
            if mine:
                lanes = (min(mine), max(mine))
        return lanes

    def markers(self, index: int, f: Finding, mark: Mark) -> list[Marker]:
        """What one mark of finding *index* draws (nothing when what it names is not on
        this timeline)."""
        tl, color = self.tl, rule_color(f.rule)
        if isinstance(mark, Band):
            lanes = self.gpu_lanes(mark.device, mark.streams)
            return [Marker(index, "band", s=tl.rel(mark.start_ns), e=tl.rel(mark.end_ns),
                           l0=lanes[0], l1=lanes[1], label=mark.label,
                           color=rule_color(f.rule, mark.cause))] if lanes else []
        if isinstance(mark, Span):
            lane = self.host_lane(mark.gtid, mark.lane)
            return [Marker(index, "span", s=tl.rel(mark.start_ns), e=tl.rel(mark.end_ns),
                           l0=lane, l1=lane, label=mark.label, color=color)
                    ] if lane is not None else []
        if isinstance(mark, Outline):
            i = self.event(mark.event)
            return [Marker(index, "ev", i=i, color=color)] if i is not None else []
        if isinstance(mark, Link):
            a, b = self.event(mark.source), self.event(mark.target)
            return [Marker(index, "link", a=a, b=b, ends=mark.ends, color=color)
                    ] if a is not None and b is not None else []
        raise TypeError(f"not a mark: {mark!r}")


def _place_findings(tl: Timeline, is_gpu: np.ndarray) -> None:
    """Markers for every finding, from the marks its rule attached; a finding none of
    whose marks is on this timeline gets its extent shaded on its device's streams."""
    place = _Placer(tl, is_gpu)
    markers: list[Marker] = []
    for index, f in enumerate(tl.findings):
        mine = [m for mark in f.marks for m in place.markers(index, f, mark)]
        if not mine:
            mine = place.markers(index, f, Band(f.start_ns, f.end_ns, f.device,
                                                tuple(f.streams), label=f.cause))
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




@dataclass
class Written:
    path: Path
    size_bytes: int
    events: int
    findings: int


def build_panels(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
                 trace: Trace | None = None, *, range_name: str | None = None,
                 max_events: int = DEFAULT_MAX_EVENTS,
                 min_severity: Severity | str | None = None) -> list[Timeline]:
    return [build_timeline(p.trace, p.analysis, label=p.label, range_name=range_name,
                           max_events=max_events, min_severity=min_severity)
            for p in as_panels(source, trace)]


def view_panels(analysis: Analysis, view: View) -> list[Timeline]:
    """The timeline of *analysis* as the output formats draw it (--html, --svg, --png):
    built once per view, for all of them."""
    return view.once("panels", lambda: build_panels(
        analysis, view.trace, range_name=view.range_name,
        max_events=DEFAULT_MAX_EVENTS if view.max_events is None else view.max_events,
        min_severity=view.min_severity))


def output_args(source, trace, path) -> tuple[Trace | None, Path]:
    """(trace, path) of the writers' ``(source, trace, path)`` arguments, where a list of
    panels may also be followed directly by the path: ``write_html(panels, "t.html")``."""
    if path is None and isinstance(trace, (str, os.PathLike)):
        trace, path = None, trace
    if path is None:
        raise TypeError("no output path given")
    return trace, Path(path)
