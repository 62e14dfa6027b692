"""copy-compute-serialized: copies and kernels taking turns instead of overlapping.
Fires on copies queued on the compute stream (prefetch-pipeline-bad) and on a copy
stream ordered behind compute (causes-streams' single-buffer pipeline); silent where
copies are pipelined (prefetch-pipeline-good, double buffers) and where they block
(blocking-memcpy's)."""

from __future__ import annotations

import json

from tests.conftest import DATA, analyze_report, load_report
from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "copy-compute-serialized"
CAUSES = "causes/causes-streams"

FIRES = [
    Fires("prefetch-pipeline-bad", "same-stream", "measured", severity="error",
          share=(31.8, 53.6), fix="Move the copies"),
    Fires(CAUSES, "dependency", "single-buffer",
          share=(18.5, 31.4), fix="Deepen the pipeline"),
]

SILENT = [
    Silent("prefetch-pipeline-good", range_name="measured"),
    # h2d-copy-bad's pageable copies overlap no kernel either, but are blocking-memcpy's:
    # not reported twice.
    Silent("h2d-copy-bad", range_name="measured"),
    # Two buffers let the copy of batch i+1 run under the compute of batch i.
    Silent(CAUSES, range_name="double-buffer"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_copies_taking_turns_with_compute_on_one_stream() -> None:
    (f,) = analyze_report("prefetch-pipeline-bad", "measured").findings_of(RULE)
    assert f.cause == "same-stream"
    trace = load_report("prefetch-pipeline-bad")
    batches = trace.nvtx[trace.nvtx["name"] == "batch"]
    assert len(batches) == 12
    # Every copy but the first sits between two compute kernels on the same stream.
    assert f.count == 11
    assert {c["kernel_streams"][0] for c in f.evidence["copies"]} == set(f.streams)
    assert f.cost_ns == f.evidence["copy_ns_alone"]
    assert all(c["alone_ns"] >= 0.8 * (c["end_ns"] - c["start_ns"])
               for c in f.evidence["copies"])
    # The pipelined variant overlaps them (silent there, see SILENT): its overlap shows it.
    good = analyze_report("prefetch-pipeline-good", "measured")
    assert good.metrics.copy_compute_overlap_pct > 80


def test_single_buffer_pipeline_is_a_dependency() -> None:
    a = analyze_report(CAUSES, "single-buffer")
    (f,) = a.findings_of(RULE)
    assert f.cause == "dependency" and f.count == 7                # 8 batches: 7 waits
    kernel_streams = {s for c in f.evidence["copies"] for s in c["kernel_streams"]}
    copies = load_report(CAUSES).memcpys.set_index("corr")
    copy_streams = {int(copies.loc[c["correlation_id"], "stream"])
                    for c in f.evidence["copies"]}
    assert len(copy_streams) == 1 and kernel_streams and not kernel_streams & copy_streams
    assert a.metrics.copy_compute_overlap_pct == 0.0
    assert analyze_report(CAUSES, "double-buffer").metrics.copy_compute_overlap_pct > 80


def test_the_causes_capture_checked_its_own_results() -> None:
    """causes-streams (tests/data/causes/causes.py, profiled on an H200 with `gpugap
    profile`; the source of this and other rules' cases) checked its kernels' results
    and its own copy/compute overlap as it ran."""
    result = json.loads((DATA / "causes" / "causes-streams.result.json").read_text())
    assert result["check_ok"] and result["copy_compute_match"]
    assert result["gpu"] == "NVIDIA H200"
