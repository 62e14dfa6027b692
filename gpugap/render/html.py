"""A self-contained HTML timeline of a report with every finding drawn on it.

``write_html(analysis, trace, path)`` writes one HTML file that needs no network: the
events are embedded as compact columnar JSON and drawn by a small vanilla-JS canvas
renderer (``assets/timeline.js``), so 100k+ events stay smooth. Several panels (e.g. the
bad and good variants of a scenario) stack on one time scale, each aligned to its own
start::

    write_html([Panel("bad", bad_trace, bad_analysis),
                Panel("good", good_trace, good_analysis)], path="compare.html")

The drawing model (lanes, events, markers, panels) is :mod:`gpugap.render.timeline`,
shared with the static SVG/PNG export (:mod:`gpugap.render.timeline_svg`).

What is drawn (see docs/html.md):

- lanes: one per device and stream with GPU work (kernels, copies by direction and
  memory kind, memsets); per host thread one NVTX lane and one CUDA API lane
  (overlapping calls/ranges stack into rows);
- findings: a track with each finding's extent, plus where it happens: the marks its
  rule attached (gpugap.rules.model: bands of GPU time across a device's lanes, spans
  of time on a host thread's lane, outlined events, arrows between events), drawn the
  same whatever the rule, in its colour (gpugap.render.timeline.rule_color); a finding
  none of whose marks is on the timeline gets its extent shaded on its streams.
"""

from __future__ import annotations

import html
import json
import os
import re
import unicodedata
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from gpugap import __version__
from gpugap.analysis import Analysis
from gpugap.files import write_atomic
from gpugap.jsonout import json_value
from gpugap.render.numbering import at, cost_text, when
from gpugap.render.outputs import View
from gpugap.render.timeline import (
    CATEGORIES,
    DEFAULT_MAX_EVENTS,
    KERNEL_PALETTE,
    PAGEABLE,
    SEVERITY_COLORS,
    Panel,
    Timeline,
    Written,
    build_panels,
    cause_color,
    output_args,
    range_label,
    rule_color,
    view_panels,
)
from gpugap.report.trace import Trace
from gpugap.rules.base import Finding
from gpugap.text import safe_text, shown_path
from gpugap.units import fmt_ns

# --- JSON payload ------------------------------------------------------------------

def _finding_json(f: Finding, tl: Timeline, index: int) -> dict[str, Any]:
    return {"rule": f.rule, "cause": f.cause, "severity": f.severity, "count": f.count,
            "cost": int(f.cost_ns), "s": tl.rel(f.start_ns), "e": tl.rel(f.end_ns),
            "streams": [int(s) for s in f.streams], "device": f.device,
            "ranges": list(f.ranges), "message": f.message, "row": tl.track_rows[index],
            "color": rule_color(f.rule), "num": tl.labels[index], "id": f.id,
            "when": when(f)}


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
        "fold": tl.fold,
    } | ({} if tl.decimation is None else {
        "decimation": tl.decimation,
        "merged": np.stack([nz := np.flatnonzero(tl.merged > 1), tl.merged[nz]], axis=1)
        .ravel().tolist()})                     # sparse: event index, events merged, ...


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
                      default=json_value)
    # Inside <script>: no '</script>' or '<!--' can appear once '<' is escaped. JSON
    # escapes C0 controls itself. DEL, C1 (ESC's 8-bit twin, U+009B CSI), bidi and other
    # format characters (U+202E turns a name around: 'Kernel2\u202egnp.exe' shows as
    # 'Kernel2exe.png') and line separators become visible text, '\u202e', as in the
    # terminal (gpugap.text): the page's strings hold an escaped backslash.
    text = text.replace("<", "\\u003c")
    return _NON_ASCII.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    if unicodedata.category(ch) in _INVISIBLE:
        return f"\\\\u{ord(ch):04x}"
    return ch


# --- HTML --------------------------------------------------------------------------

def _asset(name: str) -> str:
    return resources.files("gpugap.render").joinpath("assets", name).read_text("utf-8")


_NON_ASCII = re.compile("[^\x00-\x7e]")
_INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


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
    between = a.instances.between if a.instances is not None else None
    said = between.verdict_text() if between is not None else None
    if said:                            # the problem a --range leaves between its instances
        framework = a.program.framework if a.program is not None else None
        other = between.fix(framework)
        fix += (f'<p class="between"><b>between:</b> {_esc(said)}</p>'
                + (f'<p class="fix"><b>fix:</b> {_esc(other)}</p>' if other else ""))
    return (f'<div class="verdict {_esc(v.kind)}"><b>{_esc(v.kind.upper())}</b> '
            f'({_esc(v.scope)}): {_esc(v.headline)}{_host_html(v.host)}{fix}</div>')


def _host_html(host: Any) -> str:
    """What the CPU ran while the GPU idled (gpugap.analysis.host_evidence): the summary,
    then per thread its share of the idle time and the stack frames that held it."""
    if host is None:
        return ""
    head = f'<p class="host"><b>host:</b> {_esc(host.summary or "")}</p>' \
        if host.summary else ""
    rows = []
    for t in host.threads:
        frames = "<br>".join(f"{_esc(f.frame)} <span class=\"muted\">{f.share_pct:.0f}% "
                             f"({_esc(f.work)})</span>" for f in (t.python or t.frames))
        rows.append(f"<tr><td>{_esc(t.who)}</td><td>{t.share_pct:.0f}%</td>"
                    f"<td>{frames}</td></tr>")
    table = ('<table class="metrics host-stacks"><thead><tr><th>thread</th><th>ran, '
             'of the idle time</th><th>top frames</th></tr></thead><tbody>'
             + "".join(rows) + "</tbody></table>") if rows else ""
    rest = [line for line in host.lines() if line != host.summary
            and not any(line.startswith(t.who) for t in host.threads)]
    notes = "".join(f'<p class="muted">{_esc(line)}</p>' for line in rest)
    return head + table + notes


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
    """The findings the terminal lists, in its order, with its numbers and words (main
    findings, each followed by those it explains, then the one-time costs: S1, S2...;
    gpugap.render.numbering), times on the report's clock, and what it leaves out."""
    left_out = tl.listing.left_out_text() if tl.listing is not None else None
    tail = f'<p class="muted">… {_esc(left_out)}</p>' if left_out else ""
    if not tl.findings:
        note = ("No findings: nothing on this timeline crossed a threshold."
                if tl.analysis.metrics is not None else "No findings.")
        return f'<p class="muted">{note}</p>{tail}'
    lists: dict[bool, list[str]] = {False: [], True: []}
    entries = tl.listing.entries if tl.listing is not None else []
    for i in tl.order:
        f = tl.findings[i]
        where = " › ".join(f.ranges) or "outside NVTX ranges"
        streams = ", ".join(map(str, f.streams[:8])) + ("…" if len(f.streams) > 8 else "")
        loc = f"{where} · {when(f)}"
        if f.phase:
            loc += f" · {f.phase}"
        if streams:
            loc += f" · streams {streams}"
        if f.device is not None:
            loc += f" · GPU {f.device}"
        entry = entries[i] if i < len(entries) else None
        one_time = entry.one_time if entry is not None else tl.labels[i].startswith("S")
        cost = cost_text(entry) if entry is not None else f"cost {fmt_ns(f.cost_ns)}"
        lists[one_time].append(
            f'<li class="finding sev-{_esc(f.severity)}" data-panel="{panel}" '
            f'data-finding="{i}" data-num="{_esc(tl.labels[i])}" data-id="{_esc(f.id)}" '
            f'style="--rule:{rule_color(f.rule)}">'
            f'<button type="button" class="finding-head" title="show on the timeline">'
            f'<span class="num">{_esc(tl.labels[i])}</span>'
            f'<span class="sev">{_esc(f.severity)}</span> '
            f'<b>{_esc(f.rule)}</b> <span class="cause">[{_esc(f.cause)}]</span> '
            f'<span class="cost">{_esc(cost)}</span></button>'
            f'<div class="where">{_esc(loc)}</div>'
            f'<p class="msg">{_esc(f.message)}</p>'
            f'<details><summary>fix</summary><p>{_esc(f.fix)}</p></details></li>')
    out = ""
    if lists[False]:
        out += f'<ol class="findings">{"".join(lists[False])}</ol>'
    if lists[True]:
        heading = ("Warm-up in the range and other one-time costs" if tl.analysis.scope.is_range
                   else "Start-up and other one-time costs")
        out += (f'<h4>{heading}</h4>'
                f'<ol class="findings one-time">{"".join(lists[True])}</ol>')
    return out + tail


def _metrics_line(a: Analysis) -> str:
    """The summary metrics in one line, over the panel's timeline (always in view)."""
    m = a.metrics
    if m is None:
        return ""
    parts = [f"span {fmt_ns(m.span_ns)}",
             f"GPU busy {_pct(m.gpu_busy_pct)} / idle {_pct(m.gpu_idle_pct)}",
             f"kernel overlap {_pct(m.kernel_overlap_pct)}",
             f"copy/compute overlap {_pct(m.copy_compute_overlap_pct)}",
             f"concurrency {_num(m.concurrency)}",
             f"{m.kernels:,} kernels · {m.copies:,} copies · {m.memsets:,} memsets"]
    scope = f"range {a.scope.range_name}" if a.scope.is_range else "whole report"
    return (f'<div class="panel-metrics" title="summary metrics of the {_esc(scope)}">'
            f'<span class="muted">{_esc(scope)}:</span>'
            + "".join(f"<span>{_esc(p)}</span>" for p in parts) + "</div>")


def _panel_header(tl: Timeline) -> str:
    a = tl.analysis
    gpu = a.gpu or {}
    gpu_text = gpu.get("name") or "unknown GPU"
    if gpu.get("sm_count"):
        gpu_text += f" ({gpu['sm_count']} SMs, cc {gpu.get('compute_capability')})"
    scope = f"range {tl.scope}" if tl.scope else "whole report"
    verdict = (f'<div class="panel-verdict verdict {_esc(a.verdict.kind)}">'
               f'{_esc(a.verdict.headline)}</div>' if a.verdict is not None else "")
    about = (f"{shown_path(a.report)} · nsys {a.nsys_version or 'unknown'} · {gpu_text} · "
             f"{scope} · times on the report's clock (nsys's), the view from "
             f"{at(tl.origin_ns)} · {tl.events:,} events")
    return (f'<div class="panel-title" title="{_esc(about)}"><b>{_esc(tl.label)}</b> '
            f'<span class="muted">{_esc(about)}</span></div>{verdict}{_metrics_line(a)}')


def legend_entries(panels: list[Timeline]) -> list[tuple[str, str, str]]:
    """(kind, label, colour) of what the panels draw, in CATEGORIES order: the event
    categories they have ('category', or 'pageable' for hatched copies), the rules of
    their findings ('rule') and the causes whose bands are shaded in their own colour
    ('band', labelled 'rule [cause]')."""
    present = set().union(*(np.unique(tl.cat).tolist() for tl in panels))
    entries = [("pageable" if cid in PAGEABLE else "category", label, color)
               for i, (cid, label, color) in enumerate(CATEGORIES) if i in present]
    rules = sorted({f.rule for tl in panels for f in tl.findings})
    entries += [("rule", rule, rule_color(rule)) for rule in rules]
    shaded = {(f.rule, f.cause) for tl in panels for m in tl.markers if m.kind == "band"
              for f in [tl.findings[m.finding]] if m.color == cause_color(f.rule, f.cause)}
    entries += [("band", f"{rule} [{cause}]", cause_color(rule, cause))
                for rule, cause in sorted(shaded)]
    return entries


def _legend_html(panels: list[Timeline]) -> str:
    swatch = {"category": '<i class="sw" style="background:{}"></i>',
              "pageable": '<i class="sw pageable" style="background:{}"></i>',
              "rule": '<i class="sw finding" style="border-color:{}"></i>',
              "band": '<i class="sw band" style="background:{}"></i>'}
    items = [f'<span class="key">{swatch[kind].format(color)}{_esc(label)}</span>'
             for kind, label, color in legend_entries(panels)]
    return f'<div class="legend">{"".join(items)}</div>'


def _range_select(panels: list[Timeline]) -> str:
    """The menu of NVTX ranges to zoom to (none without ranges): its first entry says
    what it is for, the others are the ranges with their spans."""
    options = [(f"{p}:{i}", (f"{tl.label}: " if len(panels) > 1 else "")
                + f"{r['label']} ({fmt_ns(r['e'] - r['s'])})")
               for p, tl in enumerate(panels) for i, r in enumerate(tl.ranges)]
    if not options:
        return ""
    items = "".join(f'<option value="{_esc(v)}">{_esc(text)}</option>' for v, text in options)
    return ('<select id="range-select" aria-label="zoom to an NVTX range">'
            f'<option value="" selected>zoom to a range ({len(options)})…</option>'
            f"{items}</select>")


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
{_range_select(panels)}
<span id="status" role="status"></span>
</div>
<canvas id="overview" height="36" aria-label="overview: drag to pick the time window">
</canvas>
<div id="panels">{lanes}</div>
<div id="tooltip" hidden></div>
{_legend_html(panels)}
<div id="summaries">{summaries}</div>
</div>
<aside id="sidebar"><h2>Findings</h2>{findings}</aside>
</main>
<script type="application/json" id="gpugap-data">{_script_json(data)}</script>
<script>{_asset("timeline.js")}</script>
</body></html>
"""


def analysis_html(analysis: Analysis, view: View) -> str:
    """The --html format (gpugap.render.outputs): the timeline of *analysis*."""
    panels = view_panels(analysis, view)
    return render_html(panels, title=f"gpugap: {panels[0].label}")


def write_html(source: Analysis | Sequence[Panel | tuple[str, Trace, Analysis]],
               trace: Trace | str | os.PathLike | None = None,
               path: str | os.PathLike | None = None, *,
               title: str | None = None, range_name: str | None = None,
               max_events: int = DEFAULT_MAX_EVENTS) -> Written:
    """Write the self-contained HTML timeline.

    *source* is an Analysis (then *trace* is its Trace) or a list of
    ``Panel(label, trace, analysis)`` (or plain tuples) drawn one above the other on one
    time scale, each aligned to its own start: the start of *range_name* (default: each
    analysis's scope) when given, else its first GPU activity. With a list, the path may
    come second: ``write_html(panels, path)``. Replaces *path* (atomically; a symlink
    there is replaced, not followed); callers that must not (the CLI without --force)
    check first with :func:`gpugap.files.validate_outputs`. A timeline of more than
    *max_events* events draws that many: short events merged into spans, a finding's
    evidence kept (gpugap.render.decimate).
    """
    trace, out = output_args(source, trace, path)
    panels = build_panels(source, trace, range_name=range_name, max_events=max_events)
    if title is None:
        title = ("gpugap: " + " vs ".join(tl.label for tl in panels))
    text = render_html(panels, title=title)
    write_atomic(out, text, force=True)
    return Written(out, out.stat().st_size, sum(tl.events for tl in panels),
                   sum(len(tl.findings) for tl in panels))
