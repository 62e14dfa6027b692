"""What every rule's tests share: its cases as data, their checks, its message snapshot.

Each rule of the registry has one file, tests/rules/test_<module>.py (the module's name
in gpugap/rules/), holding:

- ``RULE``: the rule's id;
- ``FIRES``: a table of ``Fires`` cases, one line a case: the capture (a committed real
  one; a ``Built`` trace only for what no real run produces) and its range, the cause
  the rule must find there, at what severity, and optionally the range its share must
  fall in (``share=(lo, hi)``, percent of its scope) and a pattern its fix must match
  (``fix=``);
- ``SILENT``: ``Silent`` cases, captures (healthy ones, near misses) on which it must
  find nothing (or not that cause, or nothing that severe);
- one line that makes the four tests running them, ``test_fires``,
  ``test_stays_silent``, ``test_messages_match_the_snapshot`` and
  ``test_findings_are_marked`` (the marks its findings carry name events that exist):

      test_fires, test_stays_silent, test_messages_match_the_snapshot, \\
          test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)

- the rule's own tests of its evidence and costs, on the same captures.

The snapshot, tests/rules/snapshots/<rule-id>.txt, holds the text of every finding the
rule makes on its FIRES captures, as gpugap renders it: the title line of the terminal
(severity, rule, cause, cost, share, count), where, the message and the fix. A change of
wording, number or unit fails the test with a diff; where the change is meant, refresh:

    GPUGAP_UPDATE_SNAPSHOTS=1 python -m pytest -q -p no:cacheprovider tests/rules

and commit the snapshot with the change (its diff is the review of the new wording).

Captures are named as tests/conftest.py's report_path names them ('h2d-copy-bad': a
scenario; 'captures/ddp-manual': tests/data/captures; 'corpus:pt-checkpoint': the
corpus); each capture and each (capture, range) analysis is made once per session
(analyze_report), shared by every rule's file. tests/rules/test_completeness.py fails
while a rule of the registry lacks its file, a case either way or its snapshot.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpugap.analysis import Analysis, analyze
from gpugap.report.trace import Trace
from gpugap.rules import Finding
from gpugap.rules.model import EventRef
from tests.conftest import analyze_report, load_report

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "rules" / "snapshots"
UPDATE = "GPUGAP_UPDATE_SNAPSHOTS"
REFRESH = f"{UPDATE}=1 python -m pytest -q -p no:cacheprovider tests/rules"
SNAPSHOT_WIDTH = 88


@dataclass(frozen=True)
class Built:
    """A trace built in memory (gpugap's TraceBuilder) by *make*, for an edge case no
    real run produces; *name* says which."""

    name: str
    make: Callable[[], Trace]

    def __str__(self) -> str:
        return f"built:{self.name}"


@dataclass(frozen=True)
class Fires:
    """On *capture* (in its NVTX range *range_name*; None: the whole report) the rule
    finds *cause*, at least once at *severity* or above; with *share*, such a finding's
    share of its scope lies in [lo, hi] percent; with *fix*, its fix matches that
    pattern (re.search)."""

    capture: str | Built
    cause: str
    range_name: str | None = None
    severity: str = "info"
    share: tuple[float, float] | None = None
    fix: str | None = None

    def __str__(self) -> str:
        return f"{where(self)}:{self.cause}" + (
            f">={self.severity}" if self.severity != "info" else "")


@dataclass(frozen=True)
class Silent:
    """On *capture* (in its range *range_name*) the rule finds nothing at *severity* or
    above: no finding at all by default; with *cause*, no finding of that cause."""

    capture: str | Built
    cause: str | None = None
    range_name: str | None = None
    severity: str = "info"

    def __str__(self) -> str:
        return f"{where(self)}:{self.cause or 'any'}" + (
            f">={self.severity}" if self.severity != "info" else "")


def where(case: Fires | Silent) -> str:
    return str(case.capture) + (f"[{case.range_name}]" if case.range_name else "")


def analysis(case: Fires | Silent) -> Analysis:
    """The case's analysis, shared by every test of the session that reads it."""
    if isinstance(case.capture, Built):
        return _built_analysis(case.capture, case.range_name)
    return analyze_report(case.capture, case.range_name)


def trace_of(case: Fires | Silent) -> Trace:
    """The case's trace (loaded once per session, or built once)."""
    if isinstance(case.capture, Built):
        return _built(case.capture)
    return load_report(case.capture)


@functools.cache
def _built(built: Built) -> Trace:
    return built.make()


@functools.cache
def _built_analysis(built: Built, range_name: str | None) -> Analysis:
    return analyze(_built(built), range_name=range_name)


def _found(a: Analysis) -> str:
    return ", ".join(f"{f.rule} [{f.cause}] {f.severity}" for f in a.findings) or "nothing"


def check_fires(rule: str, case: Fires) -> list[Finding]:
    """The findings of *case* (its cause at its severity or above); fails naming what
    the analysis found instead."""
    a = analysis(case)
    found = [f for f in a.findings_of(rule, case.cause) if f.severity >= case.severity]
    assert found, (f"{rule} [{case.cause}] did not fire at {case.severity} or above on "
                   f"{where(case)}; found: {_found(a)}")
    if case.share is not None:
        lo, hi = case.share
        assert any(lo <= (f.share_pct or 0.0) <= hi for f in found), (
            f"{rule} [{case.cause}] on {where(case)}: share "
            f"{[f.share_pct for f in found]}, not within {lo}-{hi}%")
    if case.fix is not None:
        assert any(re.search(case.fix, f.fix) for f in found), (
            f"{rule} [{case.cause}] on {where(case)}: no fix matches {case.fix!r}: "
            f"{[f.fix for f in found]}")
    return found


def check_silent(rule: str, case: Silent) -> None:
    a = analysis(case)
    found = [f for f in a.findings_of(rule, case.cause) if f.severity >= case.severity]
    assert not found, (f"{rule} must stay silent on {where(case)} "
                       f"({case.cause or 'any cause'}, {case.severity} or above); it said:\n"
                       + "\n".join(f"  {f.id} {f.severity}: {f.message}" for f in found))


def check_marks(findings: list[Finding], trace: Trace, name: str) -> None:
    """Each of *findings* carries marks, and every event a mark names is one event of
    *trace* (kind, correlation id, stream, process and start agree)."""
    from gpugap.rules.model import Band, Link, Outline, Span

    frames = {kind: {c: frame[c].to_numpy() for c in ("corr", "stream", "pid", "start")
                     if c in frame}
              for kind, frame in (("kernel", trace.kernels), ("memcpy", trace.memcpys),
                                  ("memset", trace.memsets), ("graph", trace.graphs),
                                  ("api", trace.api))}
    threads = set(trace.api["gtid"].tolist()) | set(trace.nvtx["gtid"].tolist())
    for f in findings:
        assert f.marks, f"{name}: {f.id} has no marks"
        assert "marks" not in f.to_dict() and type(f.to_dict()["severity"]) is str
        for mark in f.marks:
            if isinstance(mark, Outline):
                assert _events_matching(frames, mark.event) == 1, (name, f.id, mark)
            elif isinstance(mark, Link):
                assert _events_matching(frames, mark.source) == 1, (name, f.id, mark)
                assert _events_matching(frames, mark.target) == 1, (name, f.id, mark)
            elif isinstance(mark, Band):
                assert mark.start_ns <= mark.end_ns and mark.device == f.device
            else:
                assert isinstance(mark, Span) and mark.gtid in threads
                assert mark.start_ns <= mark.end_ns and mark.lane in ("api", "nvtx")


def check_marks_of(rule: str, cases: list[Fires]) -> None:
    """check_marks on the findings of *rule* in each analysis of *cases*."""
    for case in cases:
        check_marks(analysis(case).findings_of(rule), trace_of(case), str(case))


def _events_matching(frames: dict, ref: EventRef) -> int:
    """How many events of the report (*frames*: kind -> column -> values) *ref* names."""
    f = frames[ref.kind]
    rows = np.flatnonzero(f["corr"] == ref.correlation_id)
    for column, wanted in (("stream", ref.stream), ("pid", ref.pid), ("start", ref.start_ns)):
        if wanted is not None:
            rows = rows[f[column][rows] == wanted]
    return int(rows.size)


def rendered(f: Finding, index: int) -> list[str]:
    """A finding's text as the terminal shows it (gpugap.render.terminal.finding_panel),
    without its borders, colours, wrapping, times and streams (those belong to the
    capture, not to the rule's wording)."""
    from gpugap.render.terminal import finding_title

    return [finding_title(f, index)[0].plain,
            f"where: {' > '.join(f.ranges) or 'outside NVTX ranges'}",
            *wrapped(f.message), *wrapped(f"fix: {f.fix}")]


def wrapped(text: str) -> list[str]:
    """*text* in lines of at most SNAPSHOT_WIDTH columns (continuations indented), so
    that a changed word shows as a changed line in a diff, not as a changed paragraph."""
    return textwrap.wrap(text, SNAPSHOT_WIDTH, subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False) or [""]


def snapshot_text(rule: str, cases: list[Fires]) -> str:
    """Every finding *rule* makes on the captures of *cases* (each capture and range
    once, in the order of the cases), numbered as in the analysis's list."""
    lines = [f"# {rule}: its findings on its FIRES captures (tests/rules), as rendered.",
             "# Refresh after a change meant:", f"# {REFRESH}"]
    seen = set()
    for case in cases:
        key = (str(case.capture), case.range_name)
        if key in seen:
            continue
        seen.add(key)
        a = analysis(case)
        lines += ["", f"== {where(case)} =="]
        for index, f in enumerate(a.findings, 1):
            if f.rule == rule:
                lines += ["", *rendered(f, index)]
    return "\n".join(lines) + "\n"


def check_snapshot(rule: str, cases: list[Fires]) -> None:
    """The rule's rendered findings equal tests/rules/snapshots/<rule>.txt; under
    GPUGAP_UPDATE_SNAPSHOTS=1 the file is written instead."""
    path = SNAPSHOTS / f"{rule}.txt"
    now = snapshot_text(rule, cases)
    if os.environ.get(UPDATE) == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != now:
            path.write_text(now, encoding="utf-8")
        return
    if not path.is_file():
        pytest.fail(f"{rule}: no snapshot {path.relative_to(ROOT)}; write it with: {REFRESH}",
                    pytrace=False)
    before = path.read_text(encoding="utf-8")
    if before != now:
        diff = "".join(difflib.unified_diff(
            before.splitlines(keepends=True), now.splitlines(keepends=True),
            f"{path.name} (committed)", f"{path.name} (now)", n=2))
        pytest.fail(f"{rule}: its findings' text changed (- committed, + now):\n{diff}\n"
                    f"Where the change is meant, refresh and commit the snapshot: {REFRESH}",
                    pytrace=False)


def rule_tests(rule: str, fires: list[Fires], silent: list[Silent]
               ) -> tuple[Callable[..., None], ...]:
    """The four tests of a rule's file, run on its tables of cases: test_fires,
    test_stays_silent (one test a case), test_messages_match_the_snapshot and
    test_findings_are_marked."""

    @pytest.mark.parametrize("case", fires, ids=str)
    def test_fires(case: Fires) -> None:
        check_fires(rule, case)

    @pytest.mark.parametrize("case", silent, ids=str)
    def test_stays_silent(case: Silent) -> None:
        check_silent(rule, case)

    def test_messages_match_the_snapshot() -> None:
        check_snapshot(rule, fires)

    def test_findings_are_marked() -> None:
        check_marks_of(rule, fires)

    return (test_fires, test_stays_silent, test_messages_match_the_snapshot,
            test_findings_are_marked)
