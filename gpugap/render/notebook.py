"""An Analysis as a Jupyter notebook shows it (``Analysis._repr_html_``): what the
terminal says first (the program, the verdict and its fix), the steady state's
breakdown, the findings as a table, then the timeline: the page of
:mod:`gpugap.render.html`, embedded whole in an iframe so that its script and style
stay its own and the notebook's stay untouched.
"""

from __future__ import annotations

import html

from gpugap.analysis import Analysis
from gpugap.render.html import render_html
from gpugap.render.timeline import build_panels
from gpugap.report.trace import Trace
from gpugap.units import fmt_ns

# Rows of the findings table (the rest are counted below it) and of the breakdown.
MAX_FINDINGS = 20
MAX_BUCKETS = 8
TIMELINE_HEIGHT_PX = 760

_STYLE = ("<style>.gpugap-nb table{border-collapse:collapse;margin:4px 0 10px}"
          ".gpugap-nb td,.gpugap-nb th{padding:2px 8px;text-align:left;"
          "border-bottom:1px solid #ddd;vertical-align:top}"
          ".gpugap-nb .nw{white-space:nowrap}"
          ".gpugap-nb .num{text-align:right}.gpugap-nb .sev-error{color:#c0392b}"
          ".gpugap-nb .sev-warning{color:#b9770e}.gpugap-nb .verdict{font-size:1.1em;"
          "font-weight:600}</style>")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _verdict(analysis: Analysis) -> str:
    parts = [f"<h3>gpugap: {_e(analysis.report)}"
             + (f" (range {_e(analysis.scope)})" if analysis.scope else "") + "</h3>"]
    if analysis.program is not None:
        parts.append(f"<p><b>Program:</b> {_e(analysis.program.line())}</p>")
    v = analysis.verdict
    if analysis.status != "ok":
        parts.append(f'<p class="verdict">{_e(analysis.status)}: {_e(analysis.error)}'
                     "</p>")
    elif v is not None:
        parts.append(f'<p class="verdict sev-{_e(v.severity)}">Verdict: {_e(v.headline)}'
                     "</p>")
        if v.fix:
            parts.append(f"<p><b>Fix:</b> {_e(v.fix)}</p>")
    return "".join(parts)


def _breakdown(analysis: Analysis) -> str:
    v = analysis.verdict
    if v is None or not v.breakdown:
        return ""
    rows = sorted(v.breakdown.items(), key=lambda kv: -kv[1])[:MAX_BUCKETS]
    body = "".join(f'<tr><td>{_e(bucket)}</td><td class="num">{pct:.1f}%</td></tr>'
                   for bucket, pct in rows)
    return (f"<h4>Where the time goes: {_e(v.scope)}"
            + (f" of GPU {v.device}" if v.device is not None else "") + "</h4>"
            f"<table><tr><th>bucket</th><th>share</th></tr>{body}</table>")


def _findings(analysis: Analysis) -> str:
    findings = analysis.findings
    if not findings:
        return "<h4>Findings</h4><p>none</p>"
    head = ("<tr><th>#</th><th>severity</th><th>rule [cause]</th><th>phase</th>"
            "<th>cost</th><th>share</th><th>what</th></tr>")
    body = "".join(
        f'<tr><td>{i}</td><td class="sev-{_e(f.severity)}">{_e(f.severity)}</td>'
        f'<td class="nw">{_e(f.rule)} [{_e(f.cause)}]</td>'
        f'<td class="nw">{_e(f.phase or "")}</td>'
        f'<td class="num nw">{_e(fmt_ns(f.cost_ns))}</td>'
        f'<td class="num">{"" if f.share_pct is None else f"{f.share_pct:.1f}%"}</td>'
        f"<td>{_e(f.message)}</td></tr>"
        for i, f in enumerate(findings[:MAX_FINDINGS], start=1))
    more = len(findings) - MAX_FINDINGS
    rest = (f"<p>... and {more} more: <code>analysis.frames()['findings']</code></p>"
            if more > 0 else "")
    return f"<h4>Findings ({len(findings)})</h4><table>{head}{body}</table>{rest}"


def _timeline(analysis: Analysis, trace: Trace) -> str:
    if analysis.status != "ok":
        return ""
    panels = build_panels(analysis, trace, range_name=analysis.scope)
    page = render_html(panels, title=f"gpugap: {analysis.report}")
    return (f'<iframe class="gpugap-timeline" srcdoc="{_e(page)}" '
            f'style="width:100%;height:{TIMELINE_HEIGHT_PX}px;border:1px solid #ddd" '
            'title="gpugap timeline"></iframe>')


def analysis_html(analysis: Analysis, trace: Trace, *, timeline: bool = True) -> str:
    """The notebook view of *analysis* (of *trace*): verdict, breakdown, findings and,
    with *timeline*, the interactive timeline."""
    return (f'<div class="gpugap-nb">{_STYLE}{_verdict(analysis)}{_breakdown(analysis)}'
            f"{_findings(analysis)}"
            f"{_timeline(analysis, trace) if timeline else ''}</div>")
