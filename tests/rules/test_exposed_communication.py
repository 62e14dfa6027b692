"""exposed-communication: communication not hidden under compute. Fires on an
all-reduce issued after the backward pass (ddp-manual); silent where DDP overlaps it
(ddp-overlap)."""

from __future__ import annotations

import pytest

from tests.rules.kit import (
    Fires,
    Silent,
    check_fires,
    check_marks_of,
    check_silent,
    check_snapshot,
)

RULE = "exposed-communication"

FIRES = [
    # 18.1% of the steady state since the job's phases start GPU 0's steady state once GPU
    # 1 is warm (issue 38): its first iteration after warm-up waited for GPU 1 (23.2%).
    Fires("captures/ddp-manual", "after-compute", severity="warning"),
]

SILENT = [
    # DDP's bucketed all-reduces under the backward pass: what is left shows as info.
    Silent("captures/ddp-overlap", severity="warning"),
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
