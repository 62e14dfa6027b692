"""serialized-streams: work on different streams that did not overlap. Fires on the
legacy default stream (default-stream-bad), a host launching too slowly for 8 streams
(moe-experts-bad), a host synchronizing after each launch (causes-streams' range
explicit-sync: there as the consequence of the small grids it serialised, their peer
finding) and, as info, grids that fill the GPU (grid-sweep-good); silent on streams that
overlap."""

from __future__ import annotations

import pytest

from gpugap.report.builder import TraceBuilder
from gpugap.report.trace import Trace
from tests.conftest import analyze_report, load_report
from tests.rules.kit import (
    Built,
    Fires,
    Silent,
    rule_tests,
)

RULE = "serialized-streams"
CAUSES = "causes/causes-streams"
# causes-streams' ranges of independent streams, launched in several orders: they overlap.
OVERLAPPING = ("no-sync", "depth-first", "record-after-each", "breadth-first")



def one_kernel_alone() -> Trace:
    """One kernel of one block, alone on its stream (an edge case no real run makes)."""
    b = TraceBuilder()
    b.kernel("alone", start_us=0, dur_us=1000, grid=(1, 1, 1))
    return b.build()


FIRES = [
    Fires("default-stream-bad", "legacy-default-stream", "measured", severity="error",
          share=(55.8, 93.6), fix="Keep work off"),
    Fires("moe-experts-bad", "host-launch-bound", "measured", severity="error",
          share=(53.6, 89.9), fix="Launch fewer, larger"),
    Fires("grid-sweep-good", "resource-saturation", "measured", fix="Nothing to fix"),
    Fires(CAUSES, "explicit-sync", "explicit-sync",
          share=(33.1, 55.7), fix="Remove synchronisation between"),
]

SILENT = [
    Silent("default-stream-good", range_name="measured"),
    Silent("moe-experts-good", range_name="measured"),
    # Undersized grids overlap: never 'serialized' (small-grid's, see its file).
    Silent("grid-sweep-bad", range_name="measured"),
    *(Silent(CAUSES, range_name=name) for name in OVERLAPPING),
    # One kernel has nothing to be serialized with.
    Silent(Built("one-kernel-alone", one_kernel_alone)),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_saturated_grids_are_serialized_by_saturation_as_info() -> None:
    good = analyze_report("grid-sweep-good", "measured")
    saturated = good.findings_of(RULE, "resource-saturation")
    assert saturated and all(f.severity == "info" and f.cost_ns == 0 for f in saturated)
    assert "neither possible nor needed" in saturated[0].message
    # Only saturation explains it.
    assert {f.cause for f in good.findings_of(RULE)} == {"resource-saturation"}


def test_legacy_default_stream_evidence() -> None:
    a = analyze_report("default-stream-bad", "measured")
    found = a.findings_of(RULE, "legacy-default-stream")
    legacy = sorted(s for _, s in load_report("default-stream-bad").legacy_streams())
    assert legacy == [7]
    # 3 rounds x 5 streams of add_one, each followed by a bump on the NULL stream, in
    # the measured range (one scope: its warm-up round included): one finding, one run.
    assert [f.phase for f in found] == ["range"]
    assert found[0].evidence["kernels"] == 3 * 5 * 2 and found[0].evidence["runs"] == 1
    for f in found:
        assert set(f.streams) == {7, 13, 14, 15, 16, 17}
        first = f.evidence["transitions"][0]
        assert 7 in (first["first"]["stream"], first["then"]["stream"])
    # >1 ms of lost overlap in a 2 ms region, and never more than the region.
    assert 1_000_000 < sum(f.cost_ns for f in found) <= a.metrics.span_ns


def test_host_launch_bound_evidence() -> None:
    a = analyze_report("moe-experts-bad", "measured")
    (f,) = a.findings_of(RULE, "host-launch-bound")
    assert len(f.streams) == 8 and f.phase == "range"
    assert f.evidence["runs"] == 20              # one run per measured forward
    # Per iteration, over the whole report's steady state.
    (steady,) = [g for g in analyze_report("moe-experts-bad").findings_of(
        RULE, "host-launch-bound") if g.phase == "steady"]
    assert steady.evidence["runs"] == 19
    assert steady.per_iteration["iterations"] == 19 and steady.per_iteration["with_cost"] == 19
    # The GPU waited on the host for most of the measured region: the verdict.
    assert f.cost_ns > 0.5 * a.metrics.span_ns
    assert a.verdict.finding == f.id


def test_host_sync_after_each_launch_is_explicit_sync() -> None:
    a = analyze_report(CAUSES, "explicit-sync")
    (run,) = a.findings_of(RULE)
    assert run.cause == "explicit-sync"
    assert run.evidence["serialized_transitions"] >= 11          # 12 kernels, 2 streams
    assert all(tr["sync_calls_between"] >= 1 for tr in run.evidence["transitions"])
    assert a.metrics.kernel_overlap_pct == 0.0


@pytest.mark.parametrize("range_name", OVERLAPPING)
def test_the_silent_streams_do_overlap(range_name: str) -> None:
    """The controls of SILENT: the same kernels with one sync at the end (no-sync), or
    launched in any order, overlap."""
    assert analyze_report(CAUSES, range_name).metrics.kernel_overlap_pct > 90


def test_small_grids_already_on_several_streams_settle_after_their_serialisation() -> None:
    """Small grids on streams that ran one after another have two remedies, bigger grids
    or overlap. Peers settle by what the program can change (issue 39): grids that
    already run on several streams defer to what serialises those streams
    (Finding.settles_after), whatever either claims, and the verdict names the grids
    next. On cpp-default-stream (8-block grids on two streams serialised by the legacy
    stream) and the default-stream puzzle the serialisation leads and the grids are its
    consequence; on causes-streams' explicit-sync range (a synchronisation after each
    launch) the serialisation settles first and keeps its whole claim."""
    def settled(name: str, range_name: str | None, serialized: str):
        analysis = analyze_report(name, range_name)
        (grid,) = [f for f in analysis.findings_of("small-grid")
                   if f.phase in ("steady", "range")]
        (serial,) = [f for f in analysis.findings_of(RULE, serialized)
                     if f.phase in ("steady", "range")]
        assert len(grid.streams) > 1 and grid.settles_after == (RULE,)
        assert serial.consequence_of is None
        return analysis, grid, serial

    analysis, grid, serial = settled("corpus:cpp-default-stream", None,
                                     "legacy-default-stream")
    assert grid.consequence_of == serial.id and analysis.verdict.finding == serial.id
    (then,) = [a for a in analysis.verdict.also if a["finding"] == grid.id]
    assert then["headline"].startswith("next, once this is fixed: Grids too small for the GPU")
    assert "already run on 3 streams" in grid.fix
    _, grid, serial = settled("default-stream-bad", "measured", "legacy-default-stream")
    assert grid.consequence_of == serial.id
    settled(CAUSES, "explicit-sync", "explicit-sync")
