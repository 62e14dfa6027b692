"""The causes the canned scenarios do not produce, on a real capture with a control beside
each (tests/data/causes/causes.py, profiled on an H200 with `gpugap profile`).

Each pattern ran in its own NVTX range; the assertions check the diagnosis against what
the program did, and against the raw kernel/API tables where a cause makes a claim about
them (a kernel already queued, a sync call covering the gap)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpugap.analysis import analyze
from gpugap.report import load

CAUSES = Path(__file__).parent / "data" / "causes"
HOST_FUNC_NS = 1_000_000          # causes.py: HOST_FUNC_US


@cache
def trace():
    return load(CAUSES / "causes-streams.sqlite")


@cache
def in_range(name: str):
    return analyze(trace(), range_name=name)


def causes_of(name: str, rule: str) -> set[str]:
    return {f.cause for f in in_range(name).findings_of(rule)}


def test_the_capture_checked_its_own_results():
    result = json.loads((CAUSES / "causes-streams.result.json").read_text())
    assert result["check_ok"] and result["copy_compute_match"]
    assert result["gpu"] == "NVIDIA H200"


def test_host_sync_after_each_launch_is_explicit_sync():
    (run,) = in_range("explicit-sync").findings_of("serialized-streams")
    assert run.cause == "explicit-sync"
    assert run.evidence["serialized_transitions"] >= 11          # 12 kernels, 2 streams
    assert all(tr["sync_calls_between"] >= 1 for tr in run.evidence["transitions"])
    assert in_range("explicit-sync").metrics.kernel_overlap_pct == 0.0
    # Control: the same kernels with one sync at the end overlap and stay silent.
    assert causes_of("no-sync", "serialized-streams") == set()
    assert in_range("no-sync").metrics.kernel_overlap_pct > 90


def test_host_function_in_the_stream_is_queued_wait():
    a = in_range("host-func-queued")
    (gaps,) = a.findings_of("launch-gap", "queued-wait")
    assert gaps.count == 6 and a.verdict.finding == gaps.id
    kernels = trace().kernels.set_index("corr")
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
    a = in_range("host-func-sync")
    (gaps,) = a.findings_of("launch-gap", "sync-wait")
    assert gaps.count >= 6 and a.verdict.finding == gaps.id
    api = trace().api
    syncs = api[api["name"] == "cudaStreamSynchronize"]
    for g in gaps.evidence["gaps"]:
        inside = (np.minimum(syncs["end"], g["end_ns"])
                  - np.maximum(syncs["start"], g["start_ns"])).clip(lower=0).sum()
        assert inside >= 0.5 * g["gap_ns"]          # the thread sat in the sync call
        assert g["host_calls"][0]["name"] == "cudaStreamSynchronize"
    assert "queued-wait" not in causes_of("host-func-sync", "launch-gap")


def test_host_sleeping_is_a_wait_after_the_sync_it_follows():
    """The host syncs (waiting for its kernel), then sleeps 1 ms before the next launch.
    The sleep is the launching thread waiting (the OS runtime trace shows the sleep, and
    no other thread launched meanwhile: the GPU had nothing to do); the sync cost what it
    kept the host from doing meanwhile: its wait, no more (without it the host would have
    slept while the kernel ran)."""
    a = in_range("host-sleep")
    causes = causes_of("host-sleep", "launch-gap")
    assert {"thread-wait", "sync-wait"} <= causes <= {"thread-wait", "sync-wait",
                                                      "host-launch-latency"}
    # Python around each sleep (the call into it, the loop) is host work, and small.
    assert all(f.share_pct < 5 for f in a.findings_of("launch-gap", "host-launch-latency"))
    (work,) = a.findings_of("launch-gap", "thread-wait")
    (sync,) = a.findings_of("launch-gap", "sync-wait")
    # The sleeps are the range's first problem (before its single-block kernels).
    assert work.count >= 6 and a.verdict.finding == work.id
    api = trace().api
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


def test_single_buffer_pipeline_is_a_dependency():
    (f,) = in_range("single-buffer").findings_of("copy-compute-serialized")
    assert f.cause == "dependency" and f.count == 7                # 8 batches: 7 waits
    kernel_streams = {s for c in f.evidence["copies"] for s in c["kernel_streams"]}
    copies = trace().memcpys.set_index("corr")
    copy_streams = {int(copies.loc[c["correlation_id"], "stream"])
                    for c in f.evidence["copies"]}
    assert len(copy_streams) == 1 and kernel_streams and not kernel_streams & copy_streams
    assert in_range("single-buffer").metrics.copy_compute_overlap_pct == 0.0
    # Control: two buffers let the copy of batch i+1 run under the compute of batch i.
    assert causes_of("double-buffer", "copy-compute-serialized") == set()
    assert in_range("double-buffer").metrics.copy_compute_overlap_pct > 80


@pytest.mark.parametrize("name", ["depth-first", "record-after-each", "breadth-first"])
def test_independent_streams_overlap_and_stay_silent(name):
    assert causes_of(name, "serialized-streams") == set()
    assert in_range(name).metrics.kernel_overlap_pct > 90


@pytest.mark.parametrize("name", ["h2d-copy-bad", "default-stream-bad", "cublas-warmup-bad",
                                  "moe-experts-bad", "prefetch-pipeline-good"])
def test_no_queued_wait_where_no_stream_holds_work(name):
    from tests.conftest import analyze_report

    # No host functions or cross-device waits in the scenarios: every gap there is the
    # host's doing (or module loading), never an op held in its queue.
    assert "queued-wait" not in {f.cause for f in analyze_report(name).findings_of("launch-gap")}
