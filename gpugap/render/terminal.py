"""Rich terminal rendering of an Analysis: summary, findings by cost, per-range table."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpugap.analysis import Analysis
from gpugap.metrics import Metrics
from gpugap.rules.base import Finding, fmt_ns

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def metrics_table(m: Metrics, title: str) -> Table:
    table = Table(title=title, show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("span", fmt_ns(m.span_ns)),
        ("GPU busy / idle", f"{pct(m.gpu_busy_pct)} / {pct(m.gpu_idle_pct)}"),
        ("kernel overlap", pct(m.kernel_overlap_pct)),
        ("copy/compute overlap", pct(m.copy_compute_overlap_pct)),
        ("concurrency", _num(m.concurrency)),
        ("kernels / copies / memsets", f"{m.kernels} / {m.copies} / {m.memsets}"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


def finding_panel(f: Finding, index: int) -> Panel:
    where = " > ".join(f.ranges) or "outside NVTX ranges"
    streams = ", ".join(map(str, f.streams[:8])) + ("..." if len(f.streams) > 8 else "")
    head = Text.assemble(
        (f"{index}. ", "bold"), (f"{f.severity.upper()} ", SEVERITY_STYLE.get(f.severity, "")),
        (f"{f.rule}", "bold"), (f" [{f.cause}]", "magenta"),
        f"  cost {fmt_ns(f.cost_ns)}", f"  x{f.count}" if f.count > 1 else "")
    body = Text()
    body.append(f"where: {where}; t={f.start_ns / 1e9:.6f}s..{f.end_ns / 1e9:.6f}s", style="dim")
    if streams:
        body.append(f"; streams {streams}", style="dim")
    if f.device is not None:
        body.append(f"; GPU {f.device}", style="dim")
    body.append("\n")
    body.append(f.message + "\n")
    body.append("fix: ", style="bold green")
    body.append(f.fix)
    return Panel(body, title=head, title_align="left", border_style=SEVERITY_STYLE.get(
        f.severity, "white"))


def ranges_table(analysis: Analysis) -> Table:
    table = Table(title="NVTX ranges", title_justify="left")
    table.add_column("range", no_wrap=True, overflow="ellipsis", min_width=12, max_width=40)
    for col in ("count", "span", "busy", "k-overlap", "copy/comp", "conc."):
        table.add_column(col, justify="right", no_wrap=True)
    several_domains = len({r.domain for r in analysis.ranges}) > 1
    for r in analysis.ranges:
        m = r.metrics
        name = ("  " * r.depth) + (f"{r.domain}:" if several_domains and r.domain else "") \
            + r.name
        table.add_row(name, str(r.count), fmt_ns(m.span_ns), pct(m.gpu_busy_pct),
                      pct(m.kernel_overlap_pct), pct(m.copy_compute_overlap_pct),
                      _num(m.concurrency))
    return table


def render(analysis: Analysis, console: Console, max_findings: int = 20) -> None:
    gpu = analysis.gpu
    header = Text.assemble(
        ("gpugap ", "bold"), analysis.report, "\n",
        ("nsys ", "dim"), analysis.nsys_version or "unknown",
        (" | GPU ", "dim"),
        f"{gpu.get('name') or 'unknown'}"
        + (f" ({gpu['sm_count']} SMs, cc {gpu['compute_capability']})"
           if gpu.get("sm_count") else ""),
        ((" | range ", "dim")), analysis.scope or "whole report")
    console.print(header)
    if analysis.error:
        console.print(Text(analysis.error, style="bold red"))
    if analysis.metrics is not None:
        console.print(metrics_table(analysis.metrics, "Summary"))
    shown = analysis.findings[:max_findings]
    if shown:
        console.print(Text(f"\nFindings ({len(analysis.findings)}), largest cost first",
                           style="bold"))
        for i, f in enumerate(shown, 1):
            console.print(finding_panel(f, i))
        if len(analysis.findings) > len(shown):
            console.print(f"... and {len(analysis.findings) - len(shown)} more "
                          "(--json lists all)")
    elif analysis.metrics is not None:
        console.print(Text("\nNo findings: nothing on this timeline crossed a threshold.",
                           style="green"))
    if analysis.ranges:
        console.print(ranges_table(analysis))
    for w in analysis.warnings:
        console.print(Text(f"warning: {w}", style="yellow"))

