"""small-grid: grids too small to occupy the GPU. Fires on 5 streams of 1- and 8-block
grids (grid-sweep-bad); silent where grids fill the SMs (grid-sweep-good) and on rare
tiny kernels (prefetch-pipeline's 'check' range)."""

from __future__ import annotations

from gpugap.accounting.labels import range_labels
from tests.conftest import analyze_report, load_report
from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "small-grid"

FIRES = [
    Fires("grid-sweep-bad", "undersized-grid", "measured", severity="error",
          share=(59.2, 99.3), fix="small grids already run on"),
]

SILENT = [
    Silent("grid-sweep-good", range_name="measured"),
    Silent("moe-experts-good", range_name="measured"),
    # 15 tiny kernels, about 0.1% of the range's kernel time (threshold 5%).
    Silent("prefetch-pipeline-bad", range_name="check"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_small_grid_weighs_by_time_share() -> None:
    bad = analyze_report("grid-sweep-bad", "measured")
    by_range = {tuple(f.ranges): f for f in bad.findings_of(RULE)}
    # 5 concurrent grids of 1 or 8 blocks leave most of the 132 SMs idle; 5 x 32 = 160
    # blocks running together cover them all, so grid=32 stays silent.
    assert set(by_range) == {("measured", "grid=1"), ("measured", "grid=8")}
    one = by_range[("measured", "grid=1")]
    assert one.evidence["kernels"][0]["blocks"] == 1
    assert one.evidence["kernels"][0]["sms_used"] == 1
    assert one.evidence["sm_count"] == 132
    assert one.evidence["idle_sm_pct"] > 95                 # 5 of 132 SMs busy
    # 5 x 8 = 40 of 132 SMs busy while all five run: about 70% idle.
    assert 65 < by_range[("measured", "grid=8")].evidence["idle_sm_pct"] < 80
    # Idle SM time is counted once per instant, not once per concurrent kernel: it
    # cannot exceed the time the kernels were running.
    for f in by_range.values():
        assert f.cost_ns <= f.end_ns - f.start_ns


def test_the_silent_check_range_does_launch_tiny_kernels() -> None:
    """The near miss of SILENT: prefetch-pipeline's 'check' range launches 15 kernels
    of under half the SMs' blocks, too rare to matter."""
    trace = load_report("prefetch-pipeline-bad")
    k = trace.kernels
    in_check = range_labels(trace, k["api_start"].where(k["api_start"] >= 0, k["start"])) == "check"
    assert (k["blocks"][in_check] < 66).sum() == 15
