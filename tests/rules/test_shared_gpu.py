"""shared-gpu: two processes time-slicing one GPU. Fires on two copies of a GEMM loop
started at once on one H100 (shared/external batch4 share_gpu: each GEMM 21-22 ms alone,
47-49 ms shared); silent where each process has a GPU of its own (DDP) or one process
runs alone."""

from __future__ import annotations

from tests.conftest import analyze_report
from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "shared-gpu"

FIRES = [
    Fires("corpus:ext-b4-share_gpu", "time-sliced", severity="error",
          share=(39.6, 66.5), fix="Give each process"),
]

SILENT = [
    Silent("captures/ddp-overlap"),
    Silent("captures/gemm"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_who_shares_how_much_and_how_much_slower():
    """The README's truth: two pids on GPU 0, each about half of it, each GEMM 21-22 ms
    alone and 47-49 ms shared (about 2.2x), their kernels overlapping about 1.95x."""
    a = analyze_report("corpus:ext-b4-share_gpu")
    [f] = a.findings_of(RULE)
    ev = f.evidence
    shares = [p["share_of_busy_pct"] for p in ev["processes"].values()]
    assert len(shares) == 2 and all(45 <= s <= 55 for s in shares)
    assert 2.0 <= ev["slowdown"] <= 2.4
    assert 20e6 <= ev["example"]["alone_ns"] <= 23e6
    assert 46e6 <= ev["example"]["shared_ns"] <= 50e6
    assert 1.9 <= ev["processes_at_once"] <= 2.0
    assert a.verdict.rule == RULE and "2 processes" in a.verdict.headline
    # The timeline's metrics count the other process's kernels as overlapping.
    assert a.metrics.concurrency > 1.9 and a.metrics.kernel_overlap_pct > 90
