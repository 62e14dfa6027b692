"""Every view tells the same truth: one model of findings (gpugap.render.numbering) feeds
the terminal, JSON, Markdown, HTML and SVG (the PNG is that SVG drawn by chromium), so
each lists the same findings with the same labels, ids, costs and times (on the report's
clock), and counts what it leaves out.

A property over every committed capture (tests/data and the reports/ samples), each in
every view: the issue's disagreements (terminal 2 findings where the pictures had 3, a
finding at t=15.36 s in the terminal and at t=-1.58 s in the page, findings costing 0 ns
listed in the pictures only) break it. Captures larger than BIG_BYTES are left out to
keep the suite fast; the ones the issue names are run with their --range as well.
"""

from __future__ import annotations

import html
import io
import json
import re
from functools import cache
from pathlib import Path

import pytest
from rich.console import Console

import gpugap
from gpugap.render.html import analysis_html
from gpugap.render.markdown import analysis_markdown
from gpugap.render.numbering import analysis_listing, cost_text, head, when
from gpugap.render.outputs import View
from gpugap.render.terminal import render
from gpugap.render.timeline_svg import MAX_FINDINGS_LISTED, analysis_svg

ROOT = Path(__file__).resolve().parents[1]
# Captures larger than this are left out (the suite stays fast; the property is the
# same on them).
BIG_BYTES = 2_500_000


def committed_captures() -> list[str]:
    """The SQLite exports under tests/data and reports/ (paths from the repository's
    root). Found on disk, not asked of git: CI runs the suite in a copy of the tree that
    is not a repository."""
    found = sorted(p for folder in ("tests/data", "reports")
                   for p in (ROOT / folder).rglob("*.sqlite"))
    return [p.relative_to(ROOT).as_posix() for p in found if p.stat().st_size <= BIG_BYTES]


CASES = [(p, None) for p in committed_captures()] + [
    ("reports/default-stream/h200-sample/bad.sqlite", "measured"),
    ("tests/data/captures/train-workers0.sqlite", "step"),
]


@cache
def _loaded(path: str):
    return gpugap.load(ROOT / path)


@cache
def _analyzed(path: str, range_name: str | None):
    trace = _loaded(path)
    # A CPU-only capture too: rendered as its analysis without GPU work.
    return trace, gpugap.analyze(trace, range=range_name, require_gpu=False)


def _plain(text: str) -> str:
    """Markup stripped, entities resolved, runs of white space one space."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def _terminal(analysis) -> str:
    console = Console(file=io.StringIO(), width=250, record=True, color_system=None)
    render(analysis, console, max_findings=10_000)
    return re.sub(r"[ ─│╭╮╰╯]+", " ", console.export_text())


@pytest.mark.slow          # every committed capture in every view
@pytest.mark.parametrize(("path", "range_name"), CASES,
                         ids=[p + (f"--range={r}" if r else "") for p, r in CASES])
def test_every_view_lists_the_same_findings(path, range_name):
    trace, analysis = _analyzed(path, range_name)
    listed = analysis_listing(analysis)
    entries = listed.entries
    labels = [e.label for e in entries]
    view = View(trace=trace, range_name=range_name)

    # JSON: every finding (what the others leave out included), the same ids and costs.
    document = json.loads(analysis.to_json())
    by_id = {f["id"]: f["cost_ns"] for f in document["findings"]}
    assert {e.finding.id: e.finding.cost_ns for e in entries}.items() <= by_id.items()
    assert len(document["findings"]) == len(entries) + listed.minor

    # Terminal: each listed finding once, in the same words; the main ones at their time.
    term = _terminal(analysis)
    said = re.findall(r"(?<![\w.])(S?\d+[a-z]?)\. (?:ERROR|WARNING|INFO) ", term)
    assert sorted(said) == sorted(labels), term
    for e in entries:
        assert head(e) in term, (head(e), term)
    for e in listed.main:
        if e.root:
            assert when(e.finding) in term
    if listed.left_out_text():
        assert listed.left_out_text() in term

    # Markdown: one table row per listed finding, its label, cost and time.
    md = analysis_markdown(analysis, view)
    rows = re.findall(r"^\| (S?\d+[a-z]?) \|", md, flags=re.M)
    assert rows == labels
    for e in entries:
        assert when(e.finding) in md and cost_text(e) in md.replace("\\", "")

    # HTML: the sidebar lists the same labels and ids in the same order, same costs and
    # times; the page says what it leaves out.
    page = analysis_html(analysis, view)
    items = re.findall(r'data-num="([^"]*)" data-id="([^"]*)"', page)
    assert items == [(e.label, e.finding.id) for e in entries]
    plain = _plain(page)
    for e in entries:
        assert cost_text(e) in plain and when(e.finding) in plain
    assert "t=-" not in plain                 # no time before the report's clock began
    if listed.left_out_text():
        assert listed.left_out_text() in plain

    # SVG (and so the PNG): the first MAX_FINDINGS_LISTED in the same words, the rest
    # counted, the leftovers counted; its count of findings the same.
    svg = _plain(analysis_svg(analysis, view))
    for e in entries[:MAX_FINDINGS_LISTED]:
        assert head(e) in svg and when(e.finding) in svg
    if len(entries) > MAX_FINDINGS_LISTED:
        assert f"and {len(entries) - MAX_FINDINGS_LISTED} more hidden" in svg
    if listed.left_out_text():
        assert listed.left_out_text() in svg
    assert f"{len(entries)} findings" in svg

    # What is listed costs something, or is what a verdict names, or is listed under
    # what it explains; nothing said contradicts anything else.
    for e in entries:
        f = e.finding
        assert f.cost_ns > 0 or not e.root or f.severity != "info" or any(
            f.id in json.dumps(d) for d in (document["verdict"], document["devices"])), f.id
    assert not [w for w in analysis.warnings if w.startswith("contradiction")]


@pytest.mark.parametrize("path", ["tests/data/captures/train-workers0.sqlite"])
def test_range_keeps_warm_up_apart_and_says_what_is_between(path):
    """``--range step`` on train-workers0 (issue 40, point 3): step 0's module loading is
    warm-up, listed apart, not the verdict; the data loading between the steps is said
    in the verdict, with its fix."""
    _, analysis = _analyzed(path, "step")
    inst = analysis.instances
    assert (inst.count, inst.warm_up, inst.steady) == (40, 1, 39)
    assert inst.warm_up_names == ["step 0"]
    assert "module-load" not in (analysis.verdict.finding or "")
    between = inst.between
    assert between.gaps == 39 and between.share_pct > 50
    said = between.verdict_text()
    assert said is not None and "input" in said and "data loading" in said
    assert "num_workers" in between.fix("pytorch")
    term = _terminal(analysis)
    assert "between: outside the range, between its instances" in term
    # The module loading of step 0 is a one-time cost of the range, apart.
    one_time = [e.finding for e in analysis_listing(analysis).one_time]
    assert any(f.cause == "module-load" and f.phase == "warm-up" for f in one_time)
