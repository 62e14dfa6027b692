"""No claim contradicts another (gpugap.analysis.claims, issue 38): the checker finds
nothing on any committed capture (the corpus's captures: tests/test_corpus.py), and finds
each kind of contradiction planted in a real analysis."""

from __future__ import annotations

import copy

import pytest

from gpugap.analysis.claims import contradictions
from tests.conftest import DATA, analyze_report

ROOT = DATA.parent.parent
# Every capture with GPU work (cpu-only/ and nsys-failures/ hold none, by design).
CAPTURES = sorted(str(p.relative_to(DATA).with_suffix(""))
                  for folder in ("captures", "causes", "scenarios")
                  for p in (DATA / folder).rglob("*.sqlite"))
SAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "reports").rglob("*.sqlite"))


def _name(path: str) -> str:
    """report_path's name of a tests/data capture: scenarios by their bare name."""
    return path.removeprefix("scenarios/")


@pytest.mark.parametrize("name", CAPTURES)
def test_no_contradiction_on_a_committed_capture(name):
    analysis = analyze_report(_name(name))
    assert contradictions(analysis) == []
    assert not [w for w in analysis.warnings if w.startswith("contradiction")]


@pytest.mark.parametrize("path", SAMPLES)
def test_no_contradiction_on_a_scenario_sample(path):
    from gpugap.analysis import analyze
    from gpugap.report import load

    # The samples are judged on their measured range, as `gpugap run` shows them.
    for range_name in (None, "measured"):
        assert contradictions(analyze(load(ROOT / path), range_name=range_name)) == []


def test_planted_contradictions_are_found():
    analysis = copy.deepcopy(analyze_report("captures/train-workers0"))
    assert contradictions(analysis) == []
    finding = analysis.findings[0]
    finding.message += " It struck in 7 of 3 iterations, 120.5% of the steady state."
    finding.share_pct = 130.0
    finding.evidence |= {"waiting_for_peer_ns": 10**9, "comm_time_ns": 10**6}
    found = contradictions(analysis)
    assert any("'7 of 3'" in c for c in found)
    assert any("120.5%" in c for c in found)
    assert any("share 130.0%" in c for c in found)
    assert any("waiting_for_peer_ns" in c for c in found)
    # Costs of one phase adding up to more than its wall time.
    finding.cost_ns = 10**13
    assert any("findings cost" in c for c in contradictions(analysis))
