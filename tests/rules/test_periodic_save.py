"""periodic-save: checkpoints that stall the GPU. Fires on a PyTorch training loop that
saves its weights every few steps (the corpus's pt-checkpoint); silent where results are
read back every step (eval-pageable: not a checkpoint)."""

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

RULE = "periodic-save"

FIRES = [
    Fires("corpus:pt-checkpoint", "checkpoint", severity="error"),
]

SILENT = [
    Silent("captures/eval-pageable"),
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
