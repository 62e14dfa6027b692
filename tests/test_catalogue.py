"""The catalogue of causes (gpugap.rules.catalogue, issue 39): every entry that names a
capture is what gpugap says on it (a finding of the entry's cause names the entry, its
fix read from the evidence), and the fixes speak the program's framework."""

from __future__ import annotations

import pytest

from gpugap.rules.catalogue import BY_ID, CATALOGUE
from tests.conftest import DATA, analyze_report
from tests.corpus import score


def _report(capture: str) -> str:
    """A catalogue entry's capture as tests.conftest names it: a tests/data capture or
    scenario by its path, else a corpus program."""
    if (DATA / f"{capture}.sqlite").exists() or (DATA / "scenarios" /
                                                 f"{capture}.sqlite").exists():
        return capture
    assert (score.PROGRAMS / capture).is_dir(), f"no capture named {capture}"
    return f"corpus:{capture}"


@pytest.mark.slow
@pytest.mark.parametrize("entry", [p for p in CATALOGUE if p.capture], ids=lambda p: p.id)
def test_each_entry_names_a_finding_on_its_capture(entry):
    analysis = analyze_report(_report(entry.capture))
    named = [f for f in analysis.findings if f.evidence.get("pitfall") == entry.id]
    assert named, [(f.id, f.evidence.get("pitfall")) for f in analysis.findings]
    for f in named:
        assert (f.rule, f.cause) in entry.refines
        framework = analysis.program.framework if analysis.program else None
        facts = f.evidence.get("pitfall_facts") or {}
        # A general entry leaves the rule's own fix; the others read it from the evidence.
        assert f.fix == (entry.fix(framework, facts) or f.fix) and f.fix
        assert "{" not in f.fix, f.fix          # every placeholder filled


def test_the_catalogue_is_wide_and_mostly_shown():
    """As wide as the field's guides: each entry cites one, and most are shown by a
    capture (the rest are counted in docs/causes.md)."""
    assert len(CATALOGUE) >= 35 and len(BY_ID) == len(CATALOGUE)
    assert all(p.guide and p.signature for p in CATALOGUE)
    # An entry without fixes of its own names its rule's (a general entry, or the rule
    # already reads that evidence); the others speak at least one framework.
    assert all(p.fixes is None or p.fixes for p in CATALOGUE)
    assert sum(1 for p in CATALOGUE if p.capture) >= 30


def test_fixes_read_from_the_evidence():
    """The fix quotes what the report shows: the kernel and its launches per iteration
    (a Triton row loop: one launch over all rows, not CUDA graphs), the calls (pinned
    host memory allocated every batch: allocate it once; not device cudaMalloc)."""
    rowloop = analyze_report("corpus:ext-b4-triton_rowloop").verdict
    assert "'norm_row' is launched 4096 times per iteration" in rowloop.fix
    assert "tl.program_id(0)" in rowloop.fix and "torch.compile" not in rowloop.fix
    churn = analyze_report("corpus:ext-b4-hostalloc_churn").verdict
    assert "cudaHostAlloc" in churn.fix and "once" in churn.fix
    assert "cudaMallocAsync" not in churn.fix
    replay = analyze_report("corpus:ext-b4-graph_sync").verdict
    assert "synchronize once" in replay.fix and "cudaStreamSynchronize" in replay.fix
