"""Refresh what each committed sample (reports/SCENARIO/h200-sample/) derives from its
exports, with the gpugap of this checkout: VARIANT.analysis.json and timeline.html (bad
above good), as `gpugap run` writes them, the reports named by their paths in the
repository. The captures themselves (.sqlite, .nsys-rep, .log, .result.json) and the
run's records (manifest.json, summary.json) stay as the run left them.

    python reports/refresh.py        # from the repository root
"""

from __future__ import annotations

from pathlib import Path

from gpugap.analysis import analyze
from gpugap.render.html import write_html
from gpugap.report import load_sqlite
from gpugap.run.runner import write_json

VARIANTS = ("bad", "good")


def refresh(sample: Path) -> None:
    scenario = sample.parent.name
    panels = []
    for variant in VARIANTS:
        trace = load_sqlite(sample / f"{variant}.sqlite")
        analysis = analyze(trace, require_gpu=False)
        write_json(sample / f"{variant}.analysis.json", analysis.to_dict())
        panels.append((f"{scenario} {variant}", trace, analysis))
    written = write_html(panels, sample / "timeline.html", title=f"gpugap: {scenario}")
    print(f"{sample}: {written.events:,} events, {written.findings} findings, "
          f"timeline.html {written.size_bytes / 1024:,.0f} KiB")


if __name__ == "__main__":
    for sample in sorted(Path("reports").glob("*/h200-sample")):
        refresh(sample)
