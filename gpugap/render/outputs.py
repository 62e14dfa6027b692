"""The timeline files an analysis was asked for (HTML, SVG, PNG), checked before the work
and written after it: the one place that knows all three formats."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpugap.analysis import Analysis
from gpugap.files import validate_outputs, write_atomic
from gpugap.render.html import render_html
from gpugap.render.timeline import DEFAULT_MAX_EVENTS, Written, build_panels
from gpugap.render.timeline_svg import find_chromium, render_svg, svg_to_png
from gpugap.report.trace import Trace
from gpugap.text import safe_text


@dataclass
class Outputs:
    """The timeline files the analyze command was asked for, checked up front so that a
    clash fails before the report is loaded."""

    html: Path | None = None
    svg: Path | None = None
    png: Path | None = None
    range_name: str | None = None
    force: bool = False
    max_events: int = DEFAULT_MAX_EVENTS     # per timeline (gpugap.render.decimate)

    @property
    def wanted(self) -> bool:
        return bool(self.html or self.svg or self.png)

    def write(self, analysis: Analysis, trace: Trace, report=None) -> list[Written]:
        """Write each requested file; one line per file to *report* (a callable)."""
        if not self.wanted:
            return []
        panels = build_panels(analysis, trace, range_name=self.range_name,
                              max_events=self.max_events)
        done: list[Written] = []
        if self.html:
            text = render_html(panels, title=f"gpugap: {panels[0].label}")
            write_atomic(self.html, text, force=self.force)
            done.append(Written(self.html, self.html.stat().st_size, panels[0].events,
                                len(panels[0].findings)))
        if self.svg or self.png:
            svg = render_svg(panels)
            if self.svg:
                write_atomic(self.svg, svg, force=self.force)
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
        find_chromium()
    return Outputs(html=html, svg=svg, png=png, range_name=range_name, force=force)
