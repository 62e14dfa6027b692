"""launch-gap: the GPU idle, by cause. Fires on cuBLAS's lazy module loading
(cublas-warmup-bad), launch-bound tiny GEMMs (cublas-warmup-good), synchronizations
(default-stream-good, sync-item), and in the ranges of causes-streams (tests/data/causes/
causes.py, each pattern in its own range) on a host function queued in the stream, a
host waiting on it, a host sleeping; silent where the GPU is kept fed."""

from __future__ import annotations

import numpy as np

from tests.conftest import analyze_report, load_report
from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "launch-gap"
CAUSES = "causes/causes-streams"
HOST_FUNC_NS = 1_000_000          # tests/data/causes/causes.py: HOST_FUNC_US

FIRES = [
    Fires("cublas-warmup-bad", "module-load", "measured", severity="error",
          share=(61.5, 100), fix="Warm up before"),
    Fires("cublas-warmup-good", "launch-bound", "measured", severity="error",
          share=(31, 52.3), fix="Launch fewer, larger"),
    Fires("default-stream-good", "sync-wait", "measured", severity="warning",
          share=(5.2, 9.3), fix="Synchronise less often"),
    Fires("captures/sync-item", "sync-wait", severity="error",
          share=(21.1, 35.7), fix="4 small read"),
    Fires(CAUSES, "queued-wait", "host-func-queued", severity="error",
          share=(49.3, 82.7), fix="Keep non-GPU work"),
    Fires(CAUSES, "sync-wait", "host-func-sync", severity="error",
          share=(51.5, 86.5), fix="Keep values on"),
    Fires(CAUSES, "thread-wait", "host-sleep", severity="error",
          share=(46.7, 78.5), fix="The GPU had"),
]

SILENT = [
    # cuBLAS loaded before the measured range: no load stalls it.
    Silent("cublas-warmup-good", "module-load", "measured"),
    Silent("h2d-copy-good", range_name="measured"),
    Silent("prefetch-pipeline-good", range_name="measured"),
    Silent("grid-sweep-bad", range_name="measured"),
    # The host waits in cudaStreamSynchronize for the host function: its wait, not an op
    # held in the queue.
    Silent(CAUSES, "queued-wait", "host-func-sync"),
    # No host functions or cross-device waits in the scenarios: every gap there is the
    # host's doing (or module loading), never an op held in its queue.
    *(Silent(name, "queued-wait") for name in (
        "h2d-copy-bad", "default-stream-bad", "cublas-warmup-bad", "moe-experts-bad",
        "prefetch-pipeline-good")),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_module_load_gap_points_at_cublas_loading() -> None:
    a = analyze_report("cublas-warmup-bad", "measured")
    (gap,) = a.findings_of(RULE, "module-load")
    assert gap.cost_ns > 50e6           # tens of cuLibraryLoadData calls, cuBLAS between
    names = {h["name"] for g in gap.evidence["gaps"] for h in g["host_calls"]}
    assert "cuLibraryLoadData" in names
    assert a.verdict.finding == gap.id and a.verdict.share_pct > 50
    assert sum(f.cost_ns for f in a.findings) <= a.metrics.span_ns


def test_host_function_in_the_stream_is_queued_wait():
    a = analyze_report(CAUSES, "host-func-queued")
    (gaps,) = a.findings_of("launch-gap", "queued-wait")
    assert gaps.count == 6 and a.verdict.finding == gaps.id
    kernels = load_report(CAUSES).kernels.set_index("corr")
    for g in gaps.evidence["gaps"]:
        assert g["gap_ns"] >= HOST_FUNC_NS                       # the 1 ms usleep
        nxt = kernels.loc[g["next"]["correlation_id"]]
        # The claim, checked on the raw table: the launch call had returned, and the
        # kernel sat queued from then (or the gap's start) until the gap ended.
        queued = g["end_ns"] - max(nxt["api_end"], g["start_ns"])
        assert nxt["start"] == g["end_ns"] and queued == g["cause_ns"] >= 0.5 * g["gap_ns"]
        assert g["stream_dependencies"] == [{"name": "cuLaunchHostFunc", "calls": 1}]
    assert "cuLaunchHostFunc" in gaps.message


def test_host_waiting_on_the_host_function_is_sync_wait():
    a = analyze_report(CAUSES, "host-func-sync")
    (gaps,) = a.findings_of("launch-gap", "sync-wait")
    assert gaps.count >= 6 and a.verdict.finding == gaps.id
    api = load_report(CAUSES).api
    syncs = api[api["name"] == "cudaStreamSynchronize"]
    for g in gaps.evidence["gaps"]:
        inside = (np.minimum(syncs["end"], g["end_ns"])
                  - np.maximum(syncs["start"], g["start_ns"])).clip(lower=0).sum()
        assert inside >= 0.5 * g["gap_ns"]          # the thread sat in the sync call
        assert g["host_calls"][0]["name"] == "cudaStreamSynchronize"


def test_host_sleeping_is_a_wait_after_the_sync_it_follows():
    """The host syncs (waiting for its kernel), then sleeps 1 ms before the next launch.
    The sleep is the launching thread waiting (the OS runtime trace shows the sleep, and
    no other thread launched meanwhile: the GPU had nothing to do); the sync cost what it
    kept the host from doing meanwhile: its wait, no more (without it the host would have
    slept while the kernel ran)."""
    a = analyze_report(CAUSES, "host-sleep")
    causes = causes_in("host-sleep", "launch-gap")
    assert {"thread-wait", "sync-wait"} <= causes <= {"thread-wait", "sync-wait",
                                                      "host-launch-latency"}
    # Python around each sleep (the call into it, the loop) is host work, and small.
    assert all(f.share_pct < 5 for f in a.findings_of("launch-gap", "host-launch-latency"))
    (work,) = a.findings_of("launch-gap", "thread-wait")
    (sync,) = a.findings_of("launch-gap", "sync-wait")
    # The sleeps are the range's first problem (before its single-block kernels).
    assert work.count >= 6 and a.verdict.finding == work.id
    api = load_report(CAUSES).api
    # The calls that make the host wait for the GPU (synchronize, synchronous copies).
    names = api["name"].astype(str)
    syncs = api[names.str.endswith("Synchronize")
                | (names.str.contains("Memcpy") & ~names.str.contains("Async"))]
    for g in sync.evidence["gaps"]:
        # The sync part of a gap never exceeds how long the host sat in the syncs that
        # reach into it (its wait inside the gap, and the lead it lost before).
        mine = syncs[(syncs["start"] <= g["end_ns"]) & (syncs["end"] >= g["start_ns"])]
        assert len(mine)
        assert g["cause_ns"] <= int((mine["end"] - mine["start"]).sum())


def causes_in(range_name: str, rule: str) -> set[str]:
    return {f.cause for f in analyze_report(CAUSES, range_name).findings_of(rule)}
