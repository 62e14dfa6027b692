"""A static SVG (and PNG) of the timeline, for pasting into issues and PR comments.

Same lanes, colours and finding markers as the HTML page (the model of
:mod:`gpugap.render.timeline`),
drawn for one window: the ``--range`` window when given, else the window the page opens
on (a few steady iterations, what comes before folded into a named column).
Events narrower than a pixel are merged into one rectangle per run of touching pixels,
so the file stays small however many events there are; a note under the title says how
many were merged. PNG is the SVG rendered by headless chromium
($GPUGAP_CHROMIUM, else chromium / chromium-browser / google-chrome on PATH).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gpugap.analysis import Analysis
from gpugap.errors import UsageError, option
from gpugap.files import write_atomic
from gpugap.render.numbering import head as finding_head
from gpugap.render.numbering import hidden_text, when
from gpugap.render.outputs import View
from gpugap.render.timeline import (
    CATEGORIES,
    CATEGORY_INDEX,
    DEFAULT_MAX_EVENTS,
    KERNEL_PALETTE,
    PAGEABLE,
    SEVERITY_COLORS,
    Panel,
    Timeline,
    Written,
    build_panels,
    output_args,
    rule_color,
    view_panels,
)
from gpugap.report.trace import Trace
from gpugap.text import safe_text
from gpugap.units import fmt_ns

GUTTER = 190
RIGHT = 12
AXIS_H = 20
TRACK_ROW = 13
GROUP_H = 16
PAD = 3
ROW_H = {"gpu": 16, "api": 12, "nvtx": 13}
CHAR_W = 6.2            # the widest average glyph width of the 10px fonts in FONT
FOLD_W = 110            # the column standing for the time folded before the window
TRACK_ROWS_OUTSIDE = 2  # findings track rows for findings outside the window
FONT = "system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif"
MAX_FINDINGS_LISTED = 12

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _esc(text: object) -> str:
    """Text for the SVG (XML): escaped; control and format characters (XML 1.0 forbids
    most; escape sequences of a hostile name) shown visibly (gpugap.text)."""
    text = str(text)
    if not text.isprintable():
        text = safe_text(text, None)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _text_w(text: str) -> float:
    """The width a 10px label takes, at most (no font metrics in Python: an upper
    bound from the widest of FONT's average glyphs, so a label never outgrows its box)."""
    return len(text) * CHAR_W


def _trunc(text: str, width_px: float) -> str | None:
    n = int((width_px - 6) / CHAR_W)
    if n < 3:
        return None
    return text if len(text) <= n else text[: n - 1] + "…"


def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _ticks(v0: float, v1: float, px: float) -> tuple[float, list[float]]:
    raw = (v1 - v0) / max(1.0, px / 125)
    p = 10 ** np.floor(np.log10(raw))
    m = raw / p
    step = (1 if m < 1.5 else 2 if m < 3.5 else 5 if m < 7.5 else 10) * p
    first = np.ceil(v0 / step) * step
    return float(step), [float(t) for t in np.arange(first, v1 + step * 1e-9, step)]


def _tick_label(t: float, step: float) -> str:
    """A tick at *t* ns on the report's clock (nsys's: every view gives times on it), in
    seconds with as many digits as *step* needs: '15.37 s', '15.3618 s'."""
    digits = max(0, min(9, int(np.ceil(-np.log10(step / 1e9) - 1e-9))))
    return f"{t / 1e9:.{digits}f} s"


class _Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        self.parts.append(text)

    def rect(self, x: float, y: float, w: float, h: float, cls: str = "", **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0.5))}" '
                          f'height="{_f(h)}"{c}{extra}/>')

    def text(self, x: float, y: float, text: str, cls: str = "", **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<text x="{_f(x)}" y="{_f(y)}"{c}{extra}>{_esc(text)}</text>')


def _track_texts(tl: Timeline, i: int) -> list[str]:
    f, n = tl.findings[i], tl.labels[i]
    return [f"#{n} {f.rule} [{f.cause}]", f"#{n} {f.rule}", f"#{n}"]


def _pack_track(tl: Timeline, x, x_lo: float, x_hi: float) -> list[int]:
    """Rows of the findings track for this window (x: time -> px): a finding in the
    window gets room for its label (in its bar or after it), the others only their bars,
    in at most TRACK_ROWS_OUTSIDE rows beyond what those in the window need."""
    items = []
    for i, f in enumerate(tl.findings):
        a, b = x(tl.rel(f.start_ns)), x(tl.rel(f.end_ns))
        if b - a < 4:
            a, b = (a + b) / 2 - 2, (a + b) / 2 + 2
        inside = b >= x_lo and a <= x_hi
        end = b + 4
        if inside:
            w = _text_w(_track_texts(tl, i)[0]) + 10
            end = b + 4 if b - max(a, x_lo) >= w else b + w
        items.append((not inside, a, i, end))
    rows = [0] * len(items)
    ends: list[float] = []
    for outside, a, i, end in sorted(items):
        free = next((r for r, e in enumerate(ends) if e <= a), None)
        if free is None and (not outside or len(ends) < max(TRACK_ROWS_OUTSIDE, 1)):
            ends.append(end)
            free = len(ends) - 1
        elif free is None:
            free = int(np.argmin(ends))
        ends[free] = max(ends[free], end)
        rows[i] = free
    return rows


class _Labels:
    """Every text on the plot is a candidate (texts longest first, where it starts, the
    box it must stay in, a priority); placed after the drawing in priority order, each
    in the first of its texts that fits its box and overlaps no label placed before it,
    or not at all. What is not drawn is still in the legend and the findings list."""

    def __init__(self, x_lo: float, x_hi: float) -> None:
        self.x_lo, self.x_hi = x_lo, x_hi
        self.cands: list[tuple] = []
        self.obstacles: list[tuple[float, float, float, float]] = []

    def add(self, prio: float, texts: Sequence[str], x: float, y: float, x0: float,
            x1: float, cls: str = "", fill: str = "", halo: bool = False,
            key: object = None) -> None:
        if x1 - x0 >= 8:
            self.cands.append((prio, len(self.cands), list(texts), x, y, x0, x1, cls, fill,
                               halo, key))

    def place(self, svg: _Svg) -> None:
        placed: list[tuple[float, float, float, float]] = []
        done: set[object] = set()

        def hits(box, boxes) -> bool:
            return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                       for b in boxes)

        for _, _, texts, x, y, x0, x1, cls, fill, halo, key in sorted(self.cands):
            if key is not None and key in done:
                continue
            for text in texts:
                w = _text_w(text)
                box = (x - 1, y - 9, x + w + 1, y + 3)
                if x < max(x0, self.x_lo) or x + w > min(x1, self.x_hi) - 2:
                    continue
                if hits(box, placed) or (halo and hits(box, self.obstacles)):
                    continue
                placed.append(box)
                extra = {"fill": fill} if fill else {}
                if halo:
                    extra |= {"stroke": "#fff", "stroke_width": "3",
                              "paint_order": "stroke", "stroke_linejoin": "round"}
                svg.text(x, y, text, cls, **extra)
                if key is not None:
                    done.add(key)
                break


def _layout(tl: Timeline, top: float, rows: int, drawn: set[int]
            ) -> tuple[list[float], list[float], list[tuple], float]:
    """Where each lane goes; lanes not in *drawn* take no room (height 0), and a group
    none of whose lanes is drawn gets no heading."""
    y = top + AXIS_H + (rows * TRACK_ROW + 2 * PAD if rows else 0)
    lane_y, lane_h, groups, prev = [], [], [], None
    for i, lane in enumerate(tl.lanes):
        if i not in drawn:
            lane_y.append(y)
            lane_h.append(0.0)
            continue
        if lane.group != prev:
            groups.append((y, lane.group))
            y += GROUP_H
            prev = lane.group
        h = lane.rows * ROW_H[lane.kind] + 2 * PAD
        lane_y.append(y)
        lane_h.append(h)
        y += h
    return lane_y, lane_h, groups, y


def _event_classes(tl: Timeline) -> np.ndarray:
    """Per event: the CSS class index (categories, then one per kernel palette colour)."""
    cls = tl.cat.astype(np.int32).copy()
    kernel = tl.cat == CATEGORY_INDEX["kernel"]
    cls[kernel] = len(CATEGORIES) + tl.name[kernel] % len(KERNEL_PALETTE)
    return cls


def _runs(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """Start index of each run to draw as one rectangle: a wide event alone, or touching
    events narrower than a pixel together."""
    narrow = (x1 - x0) < 1.0
    new = np.ones(x0.size, dtype=bool)
    if x0.size > 1:
        new[1:] = ~narrow[1:] | ~narrow[:-1] | (x0[1:] > x1[:-1] + 1.0)
    return np.flatnonzero(new)


def _draw_panel(svg: _Svg, tl: Timeline, top: float, width: int, view: tuple[float, float],
                stats: dict[str, int], folded: bool = False) -> float:
    v0, v1 = view
    left = GUTTER + (FOLD_W if folded else 0)       # where the plot starts
    plot = width - left - RIGHT
    scale = plot / max(1.0, v1 - v0)

    def x(t: float) -> float:
        return left + (t - v0) * scale

    def clampx(value: float) -> float:
        return min(max(value, left - 1), width - RIGHT + 1)

    track = _pack_track(tl, x, left, width - RIGHT)
    track_rows = max(track) + 1 if track else 0
    # Lanes with nothing in the window (threads busy only in start-up...) take no room.
    in_window = (tl.start + tl.dur >= v0) & (tl.start <= v1)
    drawn = set(np.unique(tl.lane[in_window]).tolist()) | {
        lane for m in tl.markers if m.kind in ("band", "span") and m.e >= v0 and m.s <= v1
        for lane in range(m.l0, m.l1 + 1)}
    drawn = drawn or set(range(len(tl.lanes)))
    stats["lanes_left_out"] += len(tl.lanes) - len(drawn)
    lane_y, lane_h, groups, bottom = _layout(tl, top, track_rows, drawn)
    labels = _Labels(left, width - RIGHT)

    for i, (y, h) in enumerate(zip(lane_y, lane_h, strict=True)):
        if h:
            svg.rect(0, y, width, h, "l1" if i % 2 else "l0")
    for y, _ in groups:
        svg.rect(0, y, width, GROUP_H, "grp")
    svg.add(f'<svg x="{left}" y="{_f(top)}" width="{plot}" height="{_f(bottom - top)}" '
            f'viewBox="{left} {_f(top)} {plot} {_f(bottom - top)}" overflow="hidden">')
    # Round times on the report's clock (the origin is the panel's, any nanosecond).
    step, ticks = _ticks(v0 + tl.origin_ns, v1 + tl.origin_ns, plot)
    ticks = [t - tl.origin_ns for t in ticks]
    for t in ticks:
        svg.add(f'<path class="grid" d="M{_f(x(t))} {_f(top + AXIS_H - 4)}V{_f(bottom)}"/>')
        text = _tick_label(tl.origin_ns + t, step)     # on the report's clock
        # Right of its line, or left of it where the plot ends: never cut at the edge.
        tx = x(t) + 3 if x(t) + 3 + _text_w(text) <= width - RIGHT - 2 \
            else x(t) - 3 - _text_w(text)
        labels.add(0, [text], tx, top + 12, left, width - RIGHT, "ax")

    # Finding markers behind the events: gap bands.
    marked: set[int] = set()
    for m in tl.markers:
        if m.kind == "band" and m.e >= v0 and m.s <= v1:
            x0, x1 = clampx(x(m.s)), clampx(x(m.e))
            color = m.color or rule_color(tl.findings[m.finding].rule)
            y0, y1 = lane_y[m.l0], lane_y[m.l1] + lane_h[m.l1]
            svg.rect(x0, y0, max(2.0, x1 - x0), y1 - y0, fill=color, fill_opacity="0.17")
            svg.rect(x0, y0, max(2.0, x1 - x0), 3, fill=color)
            if m.label:
                labels.add(2, [m.label, m.label.split(" ")[0]], x0 + 4, y0 + 13, x0, x1, "ml",
                           color, halo=True)
            marked.add(m.finding)

    # Events, one rectangle per wide event or per run of sub-pixel ones.
    classes = _event_classes(tl)
    names = tl.strings
    end = tl.start + tl.dur
    key = tl.lane.astype(np.int64) * 64 + tl.row
    bounds = np.flatnonzero(np.diff(key, prepend=-1, append=-1))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        s, e = tl.start[lo:hi], end[lo:hi]
        idx = np.flatnonzero((e >= v0) & (s <= v1)) + lo
        if idx.size == 0:
            continue
        lane = int(tl.lane[lo])
        kind = tl.lanes[lane].kind
        y = lane_y[lane] + PAD + int(tl.row[lo]) * ROW_H[kind]
        h = ROW_H[kind] - 2
        x0 = np.clip(left + (tl.start[idx] - v0) * scale, left - 1, width - RIGHT + 1)
        x1 = np.clip(left + (end[idx] - v0) * scale, left - 1, width - RIGHT + 1)
        starts = _runs(x0, x1)
        stops = np.r_[starts[1:], idx.size]
        stats["visible"] += int(idx.size)
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
            i = int(idx[a])
            rx0, rx1 = float(x0[a]), float(x1[a:b].max())
            if b - a > 1:
                stats["merged"] += b - a
                stats["spans"] += 1
                rx0, rx1 = np.floor(rx0), max(np.ceil(rx1), np.floor(rx0) + 1)
            w = rx1 - rx0
            svg.rect(rx0, y, w - 0.4 if w > 3 else max(w, 1.0), h, f"c{classes[i]}")
            if b - a == 1 and CATEGORIES[int(tl.cat[i])][0] in PAGEABLE:
                svg.rect(rx0, y, w, h, fill="url(#hatch)")
            if b - a == 1 and w > 30:
                light = CATEGORIES[int(tl.cat[i])][0].startswith(("api", "nvtx"))
                lx = max(rx0, left)
                labels.add(4, _short_names(names[int(tl.name[i])]), lx + 3, y + h / 2 + 3.5,
                           lx, rx1, "el" if light else "ew")

    def box(i: int) -> tuple[float, float, float, float]:
        lane = int(tl.lane[i])
        kind = tl.lanes[lane].kind
        bx0, bx1 = x(float(tl.start[i])), x(float(end[i]))
        if bx1 - bx0 < 4:
            c = (bx0 + bx1) / 2
            bx0, bx1 = c - 2, c + 2
        by = lane_y[lane] + PAD + int(tl.row[i]) * ROW_H[kind]
        return bx0, bx1, by, ROW_H[kind] - 2

    for m in tl.markers:
        color = m.color or rule_color(tl.findings[m.finding].rule)
        if m.kind == "span" and m.e >= v0 and m.s <= v1:
            x0, x1 = clampx(x(m.s)), clampx(x(m.e))
            y0, y1 = lane_y[m.l0] + 1, lane_y[m.l1] + lane_h[m.l1] - 1
            svg.rect(x0, y0, max(2.0, x1 - x0), y1 - y0, fill=color, fill_opacity="0.22",
                     stroke=color, stroke_width="1.5")
            if m.label:
                labels.add(3, [m.label, m.label.split(" ")[0]], x0 + 4, (y0 + y1) / 2 + 3.5,
                           x0, x1, "ml", color, halo=True)
            marked.add(m.finding)
        elif m.kind == "ev":
            bx0, bx1, by, bh = box(m.i)
            if bx1 >= left and bx0 <= width:
                svg.rect(bx0 - 1.5, by - 1.5, bx1 - bx0 + 3, bh + 3, fill="none", stroke=color,
                         stroke_width="2")
                marked.add(m.finding)
        elif m.kind == "link":
            ax0, ax1, ay, ah = box(m.a)
            zx0, zx1, zy, zh = box(m.b)
            ax = ax1 if m.ends[0] == "e" else ax0
            zx = zx1 if m.ends[1] == "e" else zx0
            ay, zy = ay + ah / 2, zy + zh / 2
            if min(ax, zx) < left - 40 or max(ax, zx) > width + 40:
                continue        # an end out of the window: an arrow across it says nothing
            d = 1 if zy >= ay else -1
            bend = min(60.0, abs(zy - ay) / 2 + 10) * d if zy != ay else -12
            svg.add(f'<path d="M{_f(ax)} {_f(ay)}C{_f(ax)} {_f(ay + bend)} {_f(zx)} '
                    f'{_f(zy - bend)} {_f(zx)} {_f(zy)}" fill="none" stroke="{color}" '
                    'stroke-width="1.5"/>')
            svg.add(f'<path d="M{_f(zx)} {_f(zy)}l-4 {_f(-7 * d)}h8z" fill="{color}"/>')
            marked.add(m.finding)

    # The findings track.
    ty = top + AXIS_H + PAD
    for i, f in enumerate(tl.findings):
        s, e = tl.rel(f.start_ns), tl.rel(f.end_ns)
        if e < v0 or s > v1:
            continue
        x0, x1 = clampx(x(s)), clampx(x(e))
        if x1 - x0 < 4:
            c = (x0 + x1) / 2
            x0, x1 = c - 2, c + 2
        y = ty + track[i] * TRACK_ROW
        svg.rect(x0, y, x1 - x0, TRACK_ROW - 3, fill=rule_color(f.rule))
        labels.obstacles.append((x0, y, x1, y + TRACK_ROW - 3))
        # In the bar where it fits, else just after it (its packing left room there).
        texts = _track_texts(tl, i)
        labels.add(1, texts, max(x0, left) + 3, y + TRACK_ROW - 5.5, max(x0, left), x1, "tw",
                   key=i)
        labels.add(1.5, texts, x1 + 3, y + TRACK_ROW - 5.5, x1, width - RIGHT, "ml",
                   rule_color(f.rule), halo=True, key=i)
        marked.add(i)
    labels.place(svg)
    svg.add("</svg>")
    if folded:
        _draw_fold(svg, tl, left, top, bottom)
    svg.add(f'<path class="axis" d="M{GUTTER} {_f(top + AXIS_H - 0.5)}H{width - RIGHT}"/>')
    stats["marked"] += len(marked)

    # Gutter: labels.
    svg.text(6, top + 12, _trunc(tl.label, GUTTER) or "", "pl")
    if track_rows:
        svg.rect(0, top + AXIS_H, GUTTER, track_rows * TRACK_ROW + 2 * PAD, "trk")
        svg.text(8, top + AXIS_H + 12, f"findings ({len(tl.findings)})", "tl")
    for y, group in groups:
        svg.text(6, y + GROUP_H - 4.5, _trunc(group, width - 12) or group, "gl")
    for lane, y, h in zip(tl.lanes, lane_y, lane_h, strict=True):
        if not h:
            continue
        svg.text(14, y + min(h, ROW_H[lane.kind] + 2 * PAD) / 2 + 3.5,
                 _trunc(lane.label, GUTTER - 14) or lane.label, "ll")
    svg.add(f'<path class="axis" d="M{GUTTER - 0.5} {_f(top)}V{_f(bottom)}"/>')
    return bottom


def _draw_fold(svg: _Svg, tl: Timeline, left: float, top: float, bottom: float) -> None:
    """The column standing for the time folded before the window (start-up...)."""
    svg.rect(GUTTER, top, FOLD_W, bottom - top, fill="#f2f4f7")
    svg.rect(GUTTER, top + AXIS_H, FOLD_W, bottom - top - AXIS_H, fill="url(#fold)")
    svg.add(f'<path d="M{_f(left - 0.5)} {_f(top)}V{_f(bottom)}" stroke="#98a2b3" '
            'stroke-dasharray="3 3"/>')
    for k, line in enumerate((tl.fold or {}).get("lines", [])):
        if _text_w(line) <= FOLD_W - 8:
            svg.text(GUTTER + 4, top + AXIS_H + 14 + 13 * k, line, "fl")


def _short_names(name: str) -> list[str]:
    """An event's name, then without its template arguments and argument list ('void
    ns::foo<...>(...)' -> 'foo')."""
    bare = name.split("(")[0].split("<")[0].removeprefix("void ").split("::")[-1]
    return [name, bare] if bare and bare != name else [name]


def _style() -> str:
    rules = [f".c{i}{{fill:{c[2]}}}" for i, c in enumerate(CATEGORIES)]
    rules += [f".c{len(CATEGORIES) + i}{{fill:{c}}}" for i, c in enumerate(KERNEL_PALETTE)]
    return ("<style>text{font-family:" + FONT + ";font-size:10px;fill:#1d2330}"
            ".ax{fill:#475467}.grid{stroke:#e9ecf2}.axis{stroke:#c0c6d2}"
            ".l0{fill:#fff}.l1{fill:#f7f8fa}.grp{fill:#eef1f6}.trk{fill:#fff7ed}"
            ".tl{fill:#9a3412}.gl{font-weight:600;fill:#344054}.ll{fill:#1d2330}"
            ".pl{fill:#475467}.ew{fill:#fff}.el{fill:#1d2330}.tw{fill:#fff}.ml{font-weight:600}"
            ".h1{font-size:13px;font-weight:600}.mu{fill:#667085}.sev{font-weight:700}"
            ".fl{fill:#344054}.vd{font-weight:600}"
            + "".join(rules) + "</style>")


def _legend(svg: _Svg, panels: list[Timeline], y: float, width: int,
            view: tuple[float, float]) -> float:
    """What the drawn window holds: the categories of its events, the rules of its
    findings (a --range window of a big report draws a fraction of either)."""
    v0, v1 = view
    used_cats = sorted(set().union(*(
        set(np.unique(tl.cat[(tl.start + tl.dur >= v0) & (tl.start <= v1)]).tolist())
        for tl in panels)))
    rules = sorted({f.rule for tl in panels for f in tl.findings
                    if tl.rel(f.end_ns) >= v0 and tl.rel(f.start_ns) <= v1})
    items: list[tuple[str, str, str]] = [(CATEGORIES[c][2], CATEGORIES[c][1],
                                          "hatch" if CATEGORIES[c][0] in PAGEABLE else "")
                                         for c in used_cats]
    items += [(rule_color(r), r, "outline") for r in rules]
    x = 8.0
    for color, label, style in items:
        w = 22 + len(label) * CHAR_W
        if x + w > width - 8:
            x, y = 8.0, y + 15
        if style == "outline":
            svg.rect(x, y - 8, 13, 9, fill="none", stroke=color, stroke_width="2")
        else:
            svg.rect(x, y - 8, 13, 9, fill=color)
            if style == "hatch":
                svg.rect(x, y - 8, 13, 9, fill="url(#hatch)")
        svg.text(x + 17, y, label, "mu")
        x += w + 10
    return y + 8


VERDICT_COLORS = {"bottleneck": "#b42318", "healthy": "#067647", "spread": "#b54708"}


def _wrap(text: str, width_px: float) -> list[str]:
    """*text* in lines of at most *width_px* (at whole words)."""
    lines, line = [], ""
    for word in text.split():
        if line and _text_w(f"{line} {word}") > width_px:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def render_svg(panels: list[Timeline], *, width: int = 1400, title: str | None = None,
               view: tuple[float, float] | None = None) -> str:
    """The SVG document: a title, each panel (same time scale), a legend, the top
    findings. *view* (relative ns) defaults to the union of the panels' initial views."""
    if view is None:
        view = (min(tl.view[0] for tl in panels), max(tl.view[1] for tl in panels))
    pad = max((view[1] - view[0]) * 0.01, 100)
    v = (view[0] - pad, view[1] + pad)
    # A window that starts where a panel's fold ends (a whole report opened on its
    # steady state) folds what came before into a named column.
    folded = any(tl.fold is not None and v[0] >= tl.fold["e"] - 0.05 * (v[1] - v[0])
                 for tl in panels)
    stats = {"visible": 0, "merged": 0, "spans": 0, "marked": 0, "lanes_left_out": 0}
    svg = _Svg()
    y = 8.0
    a0 = panels[0].analysis
    gpu = (a0.gpu or {}).get("name") or "unknown GPU"
    title = title or ("gpugap · " + " vs ".join(tl.label for tl in panels))
    svg.text(8, y + 12, title, "h1")
    scope = panels[0].scope
    sub = [gpu, f"range {scope}" if scope else (
               "whole report, steady state" if folded else "whole report (GPU span)"),
           f"window {fmt_ns(v[1] - v[0])}"]
    if len(panels) == 1 and a0.metrics is not None:
        m = a0.metrics
        sub.append(f"GPU busy {m.gpu_busy_pct:.1f}%" if m.gpu_busy_pct is not None else "")
    sub.append(f"{sum(len(tl.findings) for tl in panels)} findings")
    y += 20
    note_y = y + 10
    y += 18
    for tl in panels:
        verdict = tl.analysis.verdict
        if verdict is not None:           # the verdict line, as the page has it
            head = f"{tl.label}: " if len(panels) > 1 else ""
            text = f"{head}{verdict.kind.upper()} ({verdict.scope}): {verdict.headline}"
            for line in _wrap(text, width - 16):
                y += 14
                svg.text(8, y, line, "vd", fill=VERDICT_COLORS.get(verdict.kind, "#344054"))
            y += 8
    for tl in panels:
        y = _draw_panel(svg, tl, y, width, v, stats, folded) + 10
    y = _legend(svg, panels, y + 8, width, v) + 6
    for p, tl in enumerate(panels):
        # As the terminal lists them, in its words (gpugap.render.numbering).
        entries = tl.listing.entries if tl.listing is not None else []
        shown = entries[:MAX_FINDINGS_LISTED]
        hidden = len(entries) - len(shown)
        for e in shown:
            f = e.finding
            y += 14
            lead = f"{tl.label}: " if len(panels) > 1 else ""
            number, _, rest = finding_head(e).partition(" ")
            severity, _, rest = rest.partition(" ")
            svg.add(f'<text x="8" y="{_f(y)}"><tspan class="sev" '
                    f'fill="{SEVERITY_COLORS.get(f.severity, "#555")}">'
                    f"{_esc(lead)}{_esc(number)} {_esc(severity)}</tspan> {_esc(rest)}"
                    f'<tspan class="mu"> · {_esc(when(f))} · '
                    f'{_esc(_trunc(f.message, width - 560) or "")}</tspan></text>')
        more = [t for t in (hidden_text(hidden, len(shown), None),
                            tl.listing.left_out_text() if tl.listing else None) if t]
        for text in more:
            y += 14
            svg.text(8, y, text + (f" in {tl.label}" if len(panels) > 1 else ""), "mu")
        if p < len(panels) - 1:
            y += 4
    height = int(np.ceil(y + 10))
    merged = (f"; {stats['merged']:,} events narrower than a pixel merged into "
              f"{stats['spans']:,} spans" if stats["merged"] else "")
    sub_text = " · ".join(s for s in sub if s) + f" · {stats['visible']:,} events{merged}"
    cut = [tl.decimation for tl in panels if tl.decimation]
    if cut:                 # a report larger than a timeline draws (gpugap.render.decimate)
        sub_text += (f" · {sum(d['merged'] for d in cut):,} short events of the report "
                     f"merged into {sum(d['spans'] for d in cut):,} spans before drawing")
    if left_out := stats["lanes_left_out"]:
        sub_text += (f" · {left_out} lane{'s' if left_out > 1 else ''} with nothing in this "
                     "window left out")
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">'
            f"<title>{_esc(title)}</title>{_style()}"
            '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse">'
            '<path d="M0 6L6 0M-1 1L1 -1M5 7L7 5" stroke="#fff" stroke-opacity="0.6" '
            'stroke-width="1.5"/></pattern>'
            '<pattern id="fold" width="6" height="6" patternUnits="userSpaceOnUse">'
            '<path d="M0 6L6 0M-1 1L1 -1M5 7L7 5" stroke="#98a2b3" stroke-opacity="0.35" '
            'stroke-width="1.5"/></pattern></defs>'
            f'<rect width="{width}" height="{height}" fill="#fff"/>'
            f'<text x="8" y="{_f(note_y)}" class="mu">{_esc(sub_text)}</text>')
    return head + "".join(svg.parts) + "</svg>\n"


def write_svg(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
              trace: Trace | str | os.PathLike | None = None,
              path: str | os.PathLike | None = None, *,
              title: str | None = None, range_name: str | None = None,
              width: int = 1400, max_events: int = DEFAULT_MAX_EVENTS) -> Written:
    """Write the static SVG timeline; *source* as for :func:`gpugap.render.html.write_html`.
    The window is *range_name*'s (default: the analysis's scope), else the GPU span."""
    trace, out = output_args(source, trace, path)
    panels = build_panels(source, trace, range_name=range_name, max_events=max_events)
    text = render_svg(panels, width=width, title=title)
    write_atomic(out, text, force=True)
    return Written(out, out.stat().st_size, sum(tl.events for tl in panels),
                   sum(len(tl.findings) for tl in panels))


def write_png(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
              trace: Trace | str | os.PathLike | None = None,
              path: str | os.PathLike | None = None, *,
              title: str | None = None, range_name: str | None = None, width: int = 1400,
              scale: float = 2.0, max_events: int = DEFAULT_MAX_EVENTS) -> Written:
    """The SVG timeline rendered to PNG by headless chromium (UsageError without it)."""
    trace, out = output_args(source, trace, path)
    panels = build_panels(source, trace, range_name=range_name, max_events=max_events)
    svg_to_png(render_svg(panels, width=width, title=title), out, scale=scale)
    return Written(out, out.stat().st_size, sum(tl.events for tl in panels),
                   sum(len(tl.findings) for tl in panels))


# --- chromium ----------------------------------------------------------------------

def find_chromium() -> str:
    """$GPUGAP_CHROMIUM, else the first of chromium, chromium-browser, google-chrome on
    PATH; UsageError when there is none."""
    env = os.environ.get("GPUGAP_CHROMIUM")
    if env:
        found = shutil.which(env)
        if not found:
            raise UsageError(f"GPUGAP_CHROMIUM={env} is not an executable; point it at "
                             "chromium or unset it")
        return found
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise UsageError(f"PNG export needs chromium: install it or write {option('svg')}")


def chromium_flags(profile: str) -> list[str]:
    """Flags for a quiet, isolated, offline headless chromium (as root too)."""
    flags = ["--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", "--mute-audio",
             f"--user-data-dir={profile}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--no-sandbox")          # chromium refuses to run as root otherwise
    return flags


def analysis_svg(analysis: Analysis, view: View) -> str:
    """The --svg format (gpugap.render.outputs): the timeline of *analysis*, drawn once
    for --svg and --png."""
    return view.once("svg", lambda: render_svg(view_panels(analysis, view)))


def analysis_png(analysis: Analysis, view: View) -> bytes:
    """The --png format: --svg's picture, rendered by chromium."""
    return png_bytes(analysis_svg(analysis, view))


def svg_to_png(svg: str, path: str | os.PathLike, *, scale: float = 2.0,
               timeout: float = 120.0, force: bool = True) -> Path:
    """Render SVG text to a PNG file with headless chromium (``--screenshot``); an
    existing *path* is replaced unless not *force* (see gpugap.files.write_atomic)."""
    out = Path(path)
    write_atomic(out, png_bytes(svg, scale=scale, timeout=timeout), force=force)
    return out


def png_bytes(svg: str, *, scale: float = 2.0, timeout: float = 120.0) -> bytes:
    """SVG text rendered to PNG by headless chromium (``--screenshot``)."""
    exe = find_chromium()
    head = svg[:400]
    try:
        width = int(head.split('width="', 1)[1].split('"', 1)[0])
        height = int(head.split('height="', 1)[1].split('"', 1)[0])
    except (IndexError, ValueError):
        raise ValueError("svg_to_png needs an SVG with integer width and height") from None
    with tempfile.TemporaryDirectory(prefix="gpugap-png-") as tmp:
        src = Path(tmp) / "timeline.svg"
        src.write_text(svg, encoding="utf-8")
        shot = Path(tmp) / "timeline.png"
        cmd = [exe, *chromium_flags(str(Path(tmp) / "profile")),
               f"--force-device-scale-factor={scale:g}", f"--window-size={width},{height}",
               f"--screenshot={shot}", src.as_uri()]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise UsageError(f"chromium ({exe}) took over {timeout:.0f} s to render the PNG; "
                             f"write {option('svg')} instead") from None
        except OSError as exc:
            raise UsageError(f"cannot run chromium ({exe}): {exc.strerror or exc}") from None
        if proc.returncode != 0 or not shot.is_file() or shot.stat().st_size == 0:
            last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"])
            raise UsageError(f"chromium ({exe}) failed to render the PNG (exit "
                             f"{proc.returncode}): {last[-1][:200]}; write {option('svg')} instead")
        return shot.read_bytes()
