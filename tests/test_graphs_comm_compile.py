"""CUDA graphs, communication, several processes and torch.compile, on real captures
(tests/data/captures: an H100 for the graph and compile ones, two H200s for DDP).

Figures are checked against values computed here straight from the SQLite with plain
sqlite3 and numpy (no gpugap code), as the issue asks.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from gpugap.accounting import metrics
from gpugap.analysis import Analyzer
from gpugap.ci.measure import measure
from gpugap.report import load

CAPTURES = Path(__file__).parent / "data" / "captures"


def _rows(path: Path, sql: str) -> np.ndarray:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return np.array(con.execute(sql).fetchall(), dtype=np.int64).reshape(-1, 3)
    finally:
        con.close()


def _union_len(iv: np.ndarray) -> tuple[int, np.ndarray]:
    """Length of the union of [start, end) rows, and the union itself (plain loop)."""
    merged: list[list[int]] = []
    for s, e in sorted(iv.tolist()):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return sum(e - s for s, e in merged), np.array(merged, dtype=np.int64).reshape(-1, 2)


def _overlap(a: np.ndarray, b: np.ndarray) -> int:
    total = 0
    for s, e in a.tolist():
        lo = np.maximum(b[:, 0], s)
        hi = np.minimum(b[:, 1], e)
        total += int(np.clip(hi - lo, 0, None).sum())
    return total


def _gpu_work(path: Path, *, graphs: bool) -> np.ndarray:
    """start, end, device of every kernel, copy, memset (and graph execution)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()
    kinds = ["KERNEL", "MEMCPY", "MEMSET"] + (["GRAPH_TRACE"] if graphs else [])
    tables = [f"CUPTI_ACTIVITY_KIND_{k}" for k in kinds]
    return _rows(path, " UNION ALL ".join(f"SELECT start, end, deviceId FROM {t}"
                                          for t in tables if t in have))


# --- CUDA graphs --------------------------------------------------------------------

def test_graph_executions_are_gpu_work_as_the_sqlite_says():
    path = CAPTURES / "small-graph.sqlite"
    rows = _gpu_work(path, graphs=True)
    busy, _ = _union_len(rows[:, :2])
    span = int(rows[:, 1].max() - rows[:, 0].min())
    graphs = _rows(path, "SELECT start, end, deviceId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    trace = load(path)
    m = metrics.compute(trace)
    assert m.graphs == len(graphs) == 200
    assert m.gpu_busy_ns == busy
    assert m.gpu_busy_pct == pytest.approx(100.0 * busy / span, abs=0.01)
    assert m.graph_time_ns == _union_len(graphs[:, :2])[0]
    # Without the graph executions the GPU would look nearly idle.
    assert 100.0 * _union_len(_gpu_work(path, graphs=False)[:, :2])[0] / span \
        < m.gpu_busy_pct / 2


def test_graph_replays_account_as_graph_work_and_are_healthy():
    analysis = Analyzer(load(CAPTURES / "small-graph.sqlite")).analyze()
    v = analysis.verdict
    assert v.kind == "healthy"
    assert v.breakdown["graph"] > 85.0
    assert v.busy_pct > 90.0


def test_node_level_tracing_builds_the_same_replays_and_never_prescribes_graphs():
    path = CAPTURES / "small-graph-node.sqlite"
    trace = load(path)
    nodes = _rows(path, "SELECT correlationId, count(*), 0 FROM CUPTI_ACTIVITY_KIND_KERNEL "
                  "WHERE graphNodeId IS NOT NULL GROUP BY correlationId")
    assert len(trace.graphs) == len(nodes) == 200
    assert sorted(trace.graphs["nodes"].tolist()) == sorted(nodes[:, 1].tolist())
    assert set(trace.graphs["api_name"].astype(str)) == {"cudaGraphLaunch"}
    analysis = Analyzer(trace).analyze()
    assert analysis.verdict.breakdown["graph"] > 80.0
    for f in analysis.findings:
        if f.rule == "launch-gap" and f.cause == "launch-bound":
            assert "capture the step in a CUDA graph" not in f.fix
            assert "already runs as a CUDA graph" in f.fix
            assert f.evidence["before_cuda_graph_work_pct"] >= 50


def test_eager_model_is_still_told_about_cuda_graphs():
    analysis = Analyzer(load(CAPTURES / "small-eager.sqlite")).analyze()
    assert analysis.verdict.cause == "launch-bound"
    assert "CUDA graph" in analysis.verdict.fix


# --- communication ------------------------------------------------------------------

def _independent_overlap(path: Path) -> float:
    """Share of NCCL kernel time (union per device) with another kernel running."""
    comm_sql = ("SELECT k.start, k.end, k.deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
                "StringIds s ON s.id = k.shortName WHERE s.value {} 'nccl%'")
    comm_all = _rows(path, comm_sql.format("LIKE"))
    other_all = _rows(path, comm_sql.format("NOT LIKE"))
    total = hidden = 0
    for device in np.unique(comm_all[:, 2]).tolist():
        length, comm = _union_len(comm_all[comm_all[:, 2] == device][:, :2])
        _, other = _union_len(other_all[other_all[:, 2] == device][:, :2])
        total += length
        hidden += _overlap(comm, other)
    return 100.0 * hidden / total


@pytest.mark.parametrize("name", ["ddp-overlap", "ddp-manual"])
def test_comm_overlap_matches_an_independent_figure(name):
    path = CAPTURES / f"{name}.sqlite"
    m = metrics.compute(load(path))
    assert m.comm_compute_overlap_pct == pytest.approx(_independent_overlap(path), abs=2.0)
    assert m.exposed_comm_ns == pytest.approx(
        m.comm_time_ns * (1 - m.comm_compute_overlap_pct / 100), rel=1e-3)


def test_ddp_hides_communication_and_a_manual_all_reduce_does_not():
    overlap = measure(load(CAPTURES / "ddp-overlap.sqlite")).scopes[None].values
    manual = measure(load(CAPTURES / "ddp-manual.sqlite")).scopes[None].values
    assert overlap["steady.comm_compute_overlap_pct"] > 75.0
    assert manual["steady.comm_compute_overlap_pct"] < 5.0
    assert manual["steady.exposed_comm_ms"] > 4 * overlap["steady.exposed_comm_ms"]
    # 35 ms since the job's phases start GPU 0's steady state once GPU 1 is warm (issue 38).
    assert manual["findings.exposed-communication.after-compute.cost_ms"] > 30
    # DDP's steady state exposes little; what waited for a peer did so at start-up only
    # (a wait for another rank's start-up is named whatever its share: issue 38).
    assert overlap["findings.exposed-communication.after-compute.cost_ms"] < 10
    waits = Analyzer(load(CAPTURES / "ddp-overlap.sqlite")).analyze().findings_of(
        "exposed-communication")
    assert {f.phase for f in waits if f.cause == "waiting-for-peer"} <= {"start-up",
                                                                         "warm-up"}


def test_manual_all_reduce_verdict_per_device_and_process():
    trace = load(CAPTURES / "ddp-manual.sqlite")
    analysis = Analyzer(trace).analyze()
    v = analysis.verdict
    assert v.rule == "exposed-communication" and v.cause == "after-compute"
    assert "DistributedDataParallel" in v.fix
    devices = {d["device"]: d for d in analysis.devices}
    assert sorted(devices) == [0, 1]
    pids = {int(d["pids"][0]) for d in devices.values()}
    assert len(pids) == 2 and all(len(d["pids"]) == 1 for d in devices.values())
    for d in devices.values():
        assert d["verdict"]["rule"] == "exposed-communication"
    exposed = [f for f in analysis.findings if f.rule == "exposed-communication"
               and f.phase == "steady"]
    assert {f.device for f in exposed} == {0, 1}
    for f in analysis.findings:
        # Nothing mixed across devices: each finding's process is its device's.
        if f.device is not None:
            assert f.pid == devices[f.device]["pids"][0]
    # Collectives named from NCCL's own NVTX ranges.
    assert all("ncclAllReduce" in f.evidence["collectives"] for f in exposed)


def test_healthy_ddp_overlap_gets_no_warning():
    analysis = Analyzer(load(CAPTURES / "ddp-overlap.sqlite")).analyze()
    assert analysis.verdict.kind == "healthy"
    assert not [f for f in analysis.findings if f.severity != "info"]
    # NCCL kernels are small by design: not small-grid findings.
    assert not [f for f in analysis.findings if f.rule == "small-grid"
                and "nccl" in str(f.evidence["kernels"][0]["name"]).lower()]


# --- torch.compile --------------------------------------------------------------------

def test_compilation_is_named_with_its_cost_and_the_recompile_flagged():
    analysis = Analyzer(load(CAPTURES / "small-compile.sqlite")).analyze()
    compiles = {f.phase: f for f in analysis.findings
                if f.rule == "launch-gap" and f.cause == "compilation"}
    # The first call's compile, in step 0: a warm-up iteration, as the accounting says.
    assert compiles["warm-up"].cost_ns > 1e9
    assert set(compiles) == {"warm-up"}
    for f in compiles.values():
        assert "torch.compile(" not in f.fix and "reduce-overhead" not in f.fix
        assert "cache" in f.fix and "recompile" in f.fix
    # The recompile at step 70 (batch 8 -> 16) is the first use of the new shape (issue
    # 38): warm-up of that shape, out of the steady state, named with its compile time
    # and a fix for shapes that change.
    (first,) = analysis.findings_of("first-use")
    assert (first.cause, first.phase) == ("compilation", "warm-up")
    assert first.evidence["iterations"] == ["step 70"]
    assert 2.5e9 < first.evidence["compiled_ns"] < 3e9 and first.cost_ns > 2e9
    assert "mark_dynamic" in first.fix and "every" not in first.message
    dev = analysis.accounting.devices[0]
    assert len(dev.phases.steady_iterations) == 97
    v = analysis.verdict
    # It cost more than the 97 steady iterations together (2.8 s against 0.08 s): said
    # first, as a one-time cost; the steady state's own cause beside it.
    assert (v.finding, v.cause) == (first.id, "compilation")
    assert v.headline.startswith("Recompilation for new shapes (compiling 2.69 s): ")
    assert "in 1 of 98 iterations (step 70)" in v.headline
    assert "left out of the steady state" in v.headline
    assert [a["finding"] for a in v.also][:1] == ["launch-gap/launch-bound@0:steady"]


def test_module_loading_without_a_jit_is_not_compilation():
    for name in ("gemm", "small-eager", "decode"):
        analysis = Analyzer(load(CAPTURES / f"{name}.sqlite")).analyze()
        assert not [f for f in analysis.findings if f.cause == "compilation"], name


@pytest.mark.slow
def test_a_compile_reaches_back_to_the_loops_last_launch_not_an_autotuners():
    # pub-jax-mnist-classifier (JAX's examples/mnist_classifier.py, a public program):
    # the evaluation after step 99 compiles un-jitted ops for 5.4 s; the thread that kept
    # the device busiest is one of XLA's autotuning threads, whose last kernel came at
    # start-up. The compile reached back to it and called epoch 1's steps (2..99, whose
    # graphs the main thread launched throughout) compiling: 26.7% of the steady state.
    # It reaches back to the main thread's last graph launch, and stays a first use.
    from tests.conftest import corpus_capture

    trace = load(corpus_capture("pub-jax-mnist-classifier"))
    analysis = Analyzer(trace).analyze()
    steady = [f for f in analysis.findings if f.phase == "steady"]
    assert not [f.id for f in steady if f.cause == "compilation"]
    first = [f for f in analysis.findings if f.rule == "first-use"]
    assert [f.cause for f in first] == ["compilation"]
