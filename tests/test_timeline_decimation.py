"""A timeline of more events than a page draws (gpugap.render.decimate): short events
merge into spans, every event is accounted for once, and a finding's evidence stays
drawn as itself. A small cap on a committed capture exercises what a 1M-kernel report
gets with the default cap."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_USAGE
from gpugap.render import decimate
from gpugap.render.html import timeline_json
from gpugap.render.timeline import DEFAULT_MAX_EVENTS, build_timeline
from tests.conftest import analyze_report, load_report, report_path
from tests.test_html import page_data

NAME = "moe-experts-bad"
CAP = 5_000


@pytest.fixture(scope="module")
def timelines():
    trace, analysis = load_report(NAME), analyze_report(NAME)
    return (build_timeline(trace, analysis),
            build_timeline(trace, analysis, max_events=CAP), analysis)


def test_a_report_within_the_cap_is_drawn_whole(timelines):
    full, _, _ = timelines
    assert full.decimation is None and full.merged is None
    assert full.events > 3 * CAP


def test_a_capped_timeline_draws_at_most_the_cap_and_accounts_for_every_event(timelines):
    full, capped, _ = timelines
    d = capped.decimation
    assert capped.events == d["drawn"] <= CAP
    assert d["events"] == full.events == int(capped.merged.sum())
    spans = capped.merged > 1
    assert spans.sum() == d["spans"] > 0 and capped.merged[spans].sum() == d["merged"]
    assert d["quantum_ns"] > 0
    # A span is drawn as its first event to the end of its last: the lanes' extents stay.
    assert capped.extent == full.extent
    assert [lane.label for lane in capped.lanes] == [lane.label for lane in full.lanes]
    # Each span starts at an event of the full timeline, on the same lane, and is no
    # shorter than it; spans carry no correlation id or bytes (they stand for several).
    full_keys = set(zip(full.lane.tolist(), full.start.tolist(), strict=True))
    for i in np.flatnonzero(spans)[:200].tolist():
        assert (int(capped.lane[i]), int(capped.start[i])) in full_keys
    assert (capped.corr[spans] == -1).all() and (capped.nbytes[spans] == 0).all()


def test_every_findings_evidence_is_drawn_as_itself(timelines):
    full, capped, analysis = timelines
    from gpugap.render.numbering import analysis_listing

    assert len(capped.findings) == len(full.findings) == \
        len(analysis_listing(analysis).entries)
    evidence = [m for m in full.markers if m.kind in ("ev", "link")]
    assert evidence, "the capture's findings point at events"
    assert [(m.finding, m.kind) for m in capped.markers] == \
        [(m.finding, m.kind) for m in full.markers]

    def event(tl, i):
        return (tl.lanes[int(tl.lane[i])].label, int(tl.start[i]), int(tl.dur[i]),
                int(tl.cat[i]), int(tl.corr[i]), tl.strings[int(tl.name[i])],
                int(1 if tl.merged is None else tl.merged[i]))

    for a, b in zip(full.markers, capped.markers, strict=True):
        ends = {"ev": ("i",), "link": ("a", "b")}.get(a.kind, ())
        for end in ends:
            assert event(capped, getattr(b, end)) == event(full, getattr(a, end))
            assert capped.merged[getattr(b, end)] == 1
        if a.kind in ("band", "span"):
            assert (a.s, a.e, a.l0, a.l1) == (b.s, b.e, b.l0, b.l1)


def test_the_initial_view_keeps_its_events_when_they_fit(timelines):
    full, capped, _ = timelines
    v0, v1 = full.view

    def in_view(tl):
        at = (tl.start >= v0) & (tl.start <= v1)
        return sorted(zip(tl.lane[at].tolist(), tl.start[at].tolist(), tl.dur[at].tolist(),
                          strict=True))

    inside = in_view(full)
    assert 0 < len(inside) <= CAP // 2
    assert in_view(capped) == inside


def test_the_page_carries_the_spans_counts():
    capped = build_timeline(load_report(NAME), analyze_report(NAME), max_events=CAP)
    data = timeline_json(capped)
    merged = np.array(data["merged"], dtype=np.int64).reshape(-1, 2)
    assert merged[:, 1].sum() == capped.decimation["merged"]
    assert (merged[:, 1] > 1).all()
    assert data["decimation"]["max_events"] == CAP


def test_the_command_line_sets_the_budget(tmp_path, capsys):
    """`analyze --html --max-events N` writes the page build_timeline(max_events=N)
    gives; without a timeline output the option is refused (exit 2, one line)."""
    page = tmp_path / "capped.html"
    report = str(report_path(NAME))
    assert main(["analyze", report, "--html", str(page), "--max-events", str(CAP)]) == 0
    (panel,) = page_data(page)["panels"]
    capped = build_timeline(load_report(NAME), analyze_report(NAME), max_events=CAP)
    assert panel["decimation"] == capped.decimation
    assert capped.decimation["drawn"] <= CAP
    capsys.readouterr()
    assert main(["analyze", report, "--json", "--max-events", str(CAP)]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err == ("gpugap: error: --max-events is the timeline's budget: "
                                 "give it with --html, --svg or --png\n")
    assert main(["analyze", "--help"]) == 0
    # The help's words, without the panel's borders where rich wraps a line.
    words = " ".join(re.sub(r"[│╭╮╰╯─]", " ", capsys.readouterr().out).split())
    assert f"(default {DEFAULT_MAX_EVENTS})" in words


def test_decimate_merges_runs_of_short_events_and_keeps_long_and_protected_ones():
    """The rule itself on events no real run produces in this layout (built by hand):
    one lane, three short events close together, a long one, two short ones, a
    protected short one between them."""
    start = np.array([0, 2, 4, 100, 300, 302, 304, 306], dtype=np.int64)
    end = np.array([1, 3, 5, 250, 301, 303, 305, 307], dtype=np.int64)
    protected = np.array([0, 0, 0, 0, 0, 0, 1, 0], dtype=bool)
    source = decimate.Source(start, end, lambda lo, hi: np.zeros(hi - lo, dtype=np.int32),
                             lambda lo, hi: protected[lo:hi])
    kept = decimate.decimate([source], lanes=1, max_events=5, chunk=4)
    assert kept.events == 8
    assert kept.rows[0].tolist() == [0, 3, 4, 6, 7]
    assert kept.end[0].tolist() == [5, 250, 303, 305, 307]
    assert kept.count[0].tolist() == [3, 1, 2, 1, 1]
    assert kept.quantum_ns == 2          # the smallest quantum that leaves 5
