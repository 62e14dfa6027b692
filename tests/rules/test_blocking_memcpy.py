"""blocking-memcpy: copies that held their CPU thread. Fires on pageable
cudaMemcpyAsync (h2d-copy-bad, eval-pageable) and synchronous copies (default-stream);
silent on pinned copies, which never block (h2d-copy-good, prefetch-pipeline)."""

from __future__ import annotations

from tests.conftest import analyze_report, load_report
from tests.rules.kit import (
    Fires,
    Silent,
    check_fires,
    rule_tests,
)

RULE = "blocking-memcpy"

FIRES = [
    Fires("h2d-copy-bad", "pageable-async", "measured", severity="error",
          share=(37.7, 63.4), fix="Uploads from pageable"),
    Fires("captures/eval-pageable", "pageable-async", severity="error",
          share=(65.8, 100), fix="Results copied back"),
    # The result read back once, by cudaMemcpy: info, a one-time cost.
    Fires("default-stream-bad", "synchronous",
          share=(7.5, 13.1), fix="Use cudaMemcpyAsync from"),
]

SILENT = [
    Silent("h2d-copy-good", range_name="measured"),
    Silent("prefetch-pipeline-bad", range_name="measured"),
    Silent("prefetch-pipeline-good", range_name="measured"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_blocking_copy_evidence_names_the_copies() -> None:
    (f,) = check_fires(RULE, FIRES[0])
    a = analyze_report("h2d-copy-bad", "measured")
    # The measured range is one scope (its warm-up iteration included): one finding.
    assert f.phase == "range" and f.count == 8     # one per measured iteration
    # The whole report: the steady iterations' copies apart from the warm-up's.
    (steady,) = [g for g in analyze_report("h2d-copy-bad").findings_of(RULE, "pageable-async")
                 if g.phase == "steady"]
    assert steady.count == 7 and steady.per_iteration["iterations"] == 7
    copies = load_report("h2d-copy-bad").memcpys
    assert f.evidence["api"] == "cudaMemcpyAsync"
    assert f.evidence["memory"] == "Pageable -> Device"
    assert f.evidence["bytes_total"] == 8 * 64 * 2**20
    # The cost is the GPU time the copies explain: their own time with nothing beside
    # them (the host, held in the call, could launch no GEMM) and the idle time they
    # left. About the time the thread sat in the calls, never more than the range.
    assert 0.8 * f.evidence["blocked_ns_total"] < f.cost_ns
    assert f.cost_ns <= f.evidence["blocked_ns_total"] + f.evidence["copy_ns_total"]
    assert f.cost_ns <= a.metrics.span_ns
    for c in f.evidence["copies"]:
        row = copies[copies["corr"] == c["correlation_id"]].iloc[0]
        assert c["bytes"] == row["bytes"] == 64 * 2**20
        assert c["copy_ns"] == row["end"] - row["start"]
        assert c["blocked_ns"] == row["api_end"] - row["api_start"]
        # ...and a pageable copy holds the thread about as long as the copy itself runs,
        assert c["blocked_ns"] >= 0.8 * c["copy_ns"]
        # at the bandwidth of a staged copy, far below a pinned one's.
        assert c["gbps"] < 25
