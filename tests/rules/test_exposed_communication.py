"""exposed-communication: communication not hidden under compute. Fires on an
all-reduce issued after the backward pass (ddp-manual); silent where DDP overlaps it
(ddp-overlap)."""

from __future__ import annotations

from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "exposed-communication"

FIRES = [
    # 18.1% of the steady state since the job's phases start GPU 0's steady state once GPU
    # 1 is warm (issue 38): its first iteration after warm-up waited for GPU 1 (23.2%).
    Fires("captures/ddp-manual", "after-compute", severity="warning",
          share=(13.6, 23.2), fix="Overlap communication with"),
]

SILENT = [
    # DDP's bucketed all-reduces under the backward pass: what is left shows as info.
    Silent("captures/ddp-overlap", severity="warning"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)
