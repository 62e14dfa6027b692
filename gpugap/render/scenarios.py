"""Terminal rendering of scenario runs: bad vs good side by side, then PASS/FAIL."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpugap.accounting import metrics
from gpugap.accounting import ranges as nvtx_ranges
from gpugap.errors import UsageError
from gpugap.render.terminal import pct
from gpugap.rules.model import Severity
from gpugap.text import MESSAGE_LIMIT, safe_text
from gpugap.units import fmt_ns


def _measured_metrics(run: Any) -> Any:

    if run.trace is None or not run.trace.has_gpu_activity:
        return None
    try:
        return metrics.compute(run.trace, nvtx_ranges.window(run.trace, "measured"))
    except UsageError:
        return None


def _measured(run: Any) -> Any:
    """The analysis of the measured range (gpugap analyze --range measured)."""
    return (getattr(run, "scoped", None) or {}).get("measured")


def _findings(run: Any) -> Text:
    measured = _measured(run)
    if measured is None:
        return Text("-")
    inside = [f for f in measured.findings
              if Severity(f.severity) > Severity.INFO and not f.consequence_of]
    if not inside:
        return Text("none above info")
    lines = [safe_text(f"{f.rule}/{f.cause} x{f.count} ({fmt_ns(f.cost_ns)})")
             for f in inside[:4]]
    return Text("\n".join(lines) + (f"\n+{len(inside) - 4} more" if len(inside) > 4
                                    else ""))


def _gpugap_verdict(run: Any) -> Text:
    measured = _measured(run)
    if measured is None or measured.verdict is None:
        return Text("-")
    v = measured.verdict
    style = {"bottleneck": "red", "healthy": "green", "spread": "yellow"}.get(v.kind, "")
    return Text(safe_text(v.headline, MESSAGE_LIMIT), style=style)


def _phases(run: Any) -> Text:
    if run.analysis is None or not run.analysis.devices:
        return Text("-")
    acc = run.analysis.devices[0].get("accounting") or {}
    it = acc.get("iterations")
    startup = sum((acc.get("phases") or {}).get(p, {}).get("ns", 0)
                  for p in ("start-up", "warm-up"))
    if not it:
        return Text(f"start-up {fmt_ns(startup)}; no iterations found")
    return Text(safe_text(f"{it['count']} x '{it['name']}' ({it['warmup']} warm-up); "
                          f"start-up {fmt_ns(startup)}", MESSAGE_LIMIT))


def _verdict(run: Any) -> Text:
    # Text, never markup: a check's detail quotes the report (gpugap.text).
    if run.error:
        return Text("ERROR", "bold red")
    failed = [c for c in run.checks if not c.passed]
    if failed:
        return Text.assemble(("FAIL", "bold red"), *(
            "\n" + safe_text(f"{c.what}: {c.detail}", MESSAGE_LIMIT) for c in failed))
    return Text.assemble(("PASS", "bold green"), f" ({len(run.checks)} checks)")


def time_per_iter(run: Any) -> float | None:
    return (run.result or {}).get("time_per_iter_ms")


def render_runs(results: list[tuple[Any, Any, dict[str, Any]]], console: Console,
                gpu: str | None = None) -> None:
    for scenario, target, runs in results:
        table = Table(title=Text(f"{scenario.name} (seed {scenario.seed}): "
                                 f"{scenario.title}"), title_justify="left", show_lines=True)
        table.add_column("measured range")
        for variant in runs:
            table.add_column(variant)
        rows: list[tuple[str, list[str]]] = []
        ms = {v: _measured_metrics(r) for v, r in runs.items()}
        rows.append(("time / iteration", [f"{t:.3f} ms" if (t := time_per_iter(r)) is not None
                                          else "-" for r in runs.values()]))
        for label, key, fmt in (("span", "span_ns", fmt_ns), ("GPU busy", "gpu_busy_pct", pct),
                                ("kernel overlap", "kernel_overlap_pct", pct),
                                ("copy/compute overlap", "copy_compute_overlap_pct", pct),
                                ("concurrency", "concurrency",
                                 lambda v: "-" if v is None else f"{v:.2f}")):
            rows.append((label, [fmt(getattr(m, key)) if m is not None else "-"
                                 for m in ms.values()]))
        rows.append(("verdict", [_gpugap_verdict(r) for r in runs.values()]))
        rows.append(("phases", [_phases(r) for r in runs.values()]))
        rows.append(("findings", [_findings(r) for r in runs.values()]))
        rows.append(("expected diagnosis", [_verdict(r) for r in runs.values()]))
        for label, cells in rows:
            table.add_row(label, *cells)
        console.print(table)
        console.print(Text(f"output: {safe_text(target, MESSAGE_LIMIT)}", "dim"))
    summary = Table(title="Summary" + (f" on {gpu}" if gpu else ""), title_justify="left")
    for col in ("scenario", "bad ms/iter", "good ms/iter", "speed-up", "result"):
        summary.add_column(col, justify="left" if col in ("scenario", "result") else "right")
    for scenario, _, runs in results:
        bad, good = time_per_iter(runs.get("bad")) if "bad" in runs else None, \
            time_per_iter(runs.get("good")) if "good" in runs else None
        speedup = f"{bad / good:.1f}x" if bad and good else "-"
        ok = all(r.passed for r in runs.values())
        summary.add_row(Text(scenario.name), f"{bad:.3f}" if bad else "-",
                        f"{good:.3f}" if good else "-", speedup,
                        Text("PASS", "bold green") if ok else Text("FAIL", "bold red"))
    console.print(summary)
