"""warmup-latency: first calls far slower than later ones. Fires on cuBLAS loaded inside
the measured range (cublas-warmup-bad); silent where it was warmed up before."""

from __future__ import annotations

from tests.conftest import analyze_report
from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "warmup-latency"

FIRES = [
    Fires("cublas-warmup-bad", "module-load", "measured",
          share=(0, 0.5), fix="Warm up outside"),
    Fires("cublas-warmup-bad", "library-init", "measured",
          share=(0, 0.5), fix="Warm up outside"),
    Fires("cublas-warmup-bad", "first-iteration", "measured",
          share=(0.1, 0.7), fix="Warm up outside"),
]

SILENT = [
    Silent("cublas-warmup-good", range_name="measured"),
    Silent("h2d-copy-good", range_name="measured"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_slow_first_iteration_is_the_module_load_gap_not_counted_again() -> None:
    a = analyze_report("cublas-warmup-bad", "measured")
    (gap,) = a.findings_of("launch-gap", "module-load")
    (first_iter,) = a.findings_of(RULE, "first-iteration")
    assert first_iter.evidence["items"][0]["first_ns"] > 100 * \
        first_iter.evidence["items"][0]["typical_ns"]
    assert first_iter.consequence_of is not None
    assert first_iter.cost_ns < 0.01 * gap.cost_ns
