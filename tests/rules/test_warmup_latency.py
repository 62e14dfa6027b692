"""warmup-latency: first calls far slower than later ones. Fires on cuBLAS loaded inside
the measured range (cublas-warmup-bad); silent where it was warmed up before."""

from __future__ import annotations

import pytest

from tests.conftest import analyze_report
from tests.rules.kit import (
    Fires,
    Silent,
    check_fires,
    check_marks_of,
    check_silent,
    check_snapshot,
)

RULE = "warmup-latency"

FIRES = [
    Fires("cublas-warmup-bad", "module-load", "measured"),
    Fires("cublas-warmup-bad", "library-init", "measured"),
    Fires("cublas-warmup-bad", "first-iteration", "measured"),
]

SILENT = [
    Silent("cublas-warmup-good", range_name="measured"),
    Silent("h2d-copy-good", range_name="measured"),
]


@pytest.mark.parametrize("case", FIRES, ids=str)
def test_fires(case: Fires) -> None:
    check_fires(RULE, case)


@pytest.mark.parametrize("case", SILENT, ids=str)
def test_stays_silent(case: Silent) -> None:
    check_silent(RULE, case)


def test_messages_match_the_snapshot() -> None:
    check_snapshot(RULE, FIRES)


def test_findings_are_marked() -> None:
    check_marks_of(RULE, FIRES)


def test_slow_first_iteration_is_the_module_load_gap_not_counted_again() -> None:
    a = analyze_report("cublas-warmup-bad", "measured")
    (gap,) = a.findings_of("launch-gap", "module-load")
    (first_iter,) = a.findings_of(RULE, "first-iteration")
    assert first_iter.evidence["items"][0]["first_ns"] > 100 * \
        first_iter.evidence["items"][0]["typical_ns"]
    assert first_iter.consequence_of is not None
    assert first_iter.cost_ns < 0.01 * gap.cost_ns
