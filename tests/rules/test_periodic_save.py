"""periodic-save: checkpoints that stall the GPU. Fires on a PyTorch training loop that
saves its weights every few steps (the corpus's pt-checkpoint); silent where results are
read back every step (eval-pageable: not a checkpoint) and where 64 MiB copies out of
the GPU are the work itself, busy from end to end (NVIDIA's simpleStreams, a public
program: nothing waited for them)."""

from __future__ import annotations

from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "periodic-save"

FIRES = [
    Fires("corpus:pt-checkpoint", "checkpoint", severity="error",
          share=(39.2, 66), fix="Checkpoint asynchronously and"),
]

SILENT = [
    Silent("captures/eval-pageable"),
    Silent("h2d-copy-good", range_name="measured"),
    Silent("corpus:pub-cuda-simplestreams"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)
