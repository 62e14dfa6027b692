"""The verdicts on real programs (tests/data/captures: ordinary PyTorch programs profiled
on an H100, see tests/data/programs/*.py and each capture's manifest).

Each capture's verdict names its known problem, with its share of each iteration; the
healthy controls get a healthy verdict and no finding above info; the costs of the
findings in any scope never add up to more than the scope's wall time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpugap.analysis import Analysis, analyze
from gpugap.cli import main
from gpugap.report import load
from tests.conftest import analyze_report

CAPTURES = Path(__file__).parent / "data" / "captures"


def analysis(name: str, range_name: str | None = None) -> Analysis:
    """tests/data/captures/<name>.sqlite analyzed, once per session (shared with the
    rules' tests, tests/rules)."""
    return analyze_report(f"captures/{name}", range_name)


# capture -> (rule, cause) of the verdict, and the least share of each iteration it holds
BOTTLENECKS = {
    "train-workers0": ("launch-gap", "input", 60),          # DataLoader, num_workers=0
    "decode": ("launch-gap", "launch-bound", 70),           # token by token, batch 1
    "small-eager": ("launch-gap", "launch-bound", 60),      # tiny kernels, eagerly
    "sync-item": ("launch-gap", "sync-wait", 20),           # .item() + nonzero() a step
    "alloc-nocache": ("launch-gap", "allocation", 25),      # caching allocator off
    "eval-pageable": ("blocking-memcpy", "pageable-async", 60),   # .cpu() per batch
}
HEALTHY = ["train-workers", "sync-free", "alloc-cache", "eval-pinned", "gemm", "pipeline",
           "small-graph", "ddp-overlap"]


@pytest.mark.parametrize("name", sorted(BOTTLENECKS))
def test_verdict_names_the_known_problem(name):
    rule, cause, least = BOTTLENECKS[name]
    a = analysis(name)
    v = a.verdict
    assert v.kind == "bottleneck" and v.scope == "steady state"
    assert (v.rule, v.cause) == (rule, cause)
    assert v.share_pct >= least
    # It is the steady state's costliest finding, an error, with its evidence.
    top = a.findings[0]
    assert (top.rule, top.cause, top.phase, top.id) == (rule, cause, "steady", v.finding)
    assert top.severity == "error" and v.severity == "error"
    it = v.iteration
    assert it["count"] >= 20 and it["median_ns"] > it["cost_median_ns"] > 0
    # The share is of the steady state's total (the mean per iteration), the median and
    # p90 its distribution.
    assert it["without_ns"] == it["mean_ns"] - it["cost_mean_ns"]
    assert abs(v.share_pct - 100 * top.cost_ns / v.wall_ns) < 0.01
    rep = it["representative"]
    assert rep["calls"] and rep["end_ns"] > rep["start_ns"]
    assert top.per_iteration["with_cost"] >= 0.9 * top.per_iteration["iterations"]


def test_evidence_names_the_calls_behind_each_cause():
    calls = {name: {c["name"] for c in analysis(name).verdict.iteration["representative"]
                    ["calls"]} for name in BOTTLENECKS}
    assert "cudaStreamSynchronize" in calls["sync-item"]
    assert {"cudaMalloc", "cudaFree"} <= calls["alloc-nocache"]
    assert "cudaLaunchKernel" in calls["decode"]
    assert "cudaMemcpyAsync" in calls["eval-pageable"]
    # ...and how often per iteration: .item() and the nonzero() of a boolean mask each
    # wait once; the representative iteration shows the count.
    sync = next(c for c in analysis("sync-item").verdict.iteration["representative"]["calls"]
                if c["name"] == "cudaStreamSynchronize")
    assert sync["count"] >= 2


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_programs_get_a_healthy_verdict_and_no_warning(name):
    a = analysis(name)
    assert a.verdict.kind == "healthy", a.verdict.headline
    assert a.verdict.busy_pct >= 90
    assert "compute-bound" in a.verdict.headline
    assert [f for f in a.findings if f.severity != "info"] == []


def test_start_up_is_one_time_and_never_the_verdict():
    # The GEMM loop spends as long starting (cuBLAS loading, Python) as it runs: the
    # start-up is reported, as info, apart from a healthy steady state.
    a = analysis("gemm")
    one_time = [f for f in a.findings if f.phase == "start-up"]
    assert {f.cause for f in one_time} >= {"module-load"}
    assert all(f.severity == "info" for f in one_time)
    acc = a.devices[0]["accounting"]
    startup = acc["phases"]["start-up"]["ns"] + acc["phases"]["warm-up"]["ns"]
    assert startup > 0.3 * (acc["window_ns"][1] - acc["window_ns"][0])


@pytest.mark.parametrize("name", sorted(BOTTLENECKS) + HEALTHY
                         + ["ddp-manual", "small-compile", "small-graph-node"])
def test_costs_never_exceed_their_scope(name):
    a = analysis(name)
    for d in a.devices:
        acc = d["accounting"]
        phases = acc["phases"]
        walls = {"steady": phases["steady"]["ns"],
                 "start-up": phases["start-up"]["ns"] + phases["warm-up"]["ns"],
                 "tail": phases["tail"]["ns"]}
        for phase, wall in walls.items():
            cost = sum(f.cost_ns for f in a.findings
                       if f.device == d["device"] and f.phase == phase)
            assert cost <= wall, (name, phase, cost, wall)
        assert sum(acc["buckets_ns"]["steady"].values()) == phases["steady"]["ns"]


@pytest.mark.parametrize("scenario", ["h2d-copy", "default-stream", "grid-sweep",
                                      "cublas-warmup", "moe-experts", "prefetch-pipeline"])
@pytest.mark.parametrize("variant", ["bad", "good"])
def test_scenario_costs_never_exceed_the_measured_range(scenario, variant):
    a = analyze_report(f"{scenario}-{variant}", "measured")
    assert sum(f.cost_ns for f in a.findings) <= a.metrics.span_ns
    assert sum(f.share_pct or 0 for f in a.findings) <= 100.0 + 1e-6


def test_the_first_thing_said_is_the_verdict(capsys):
    """Terminal: the verdict panel opens the output; JSON: a top-level verdict."""
    path = str(CAPTURES / "decode.sqlite")
    assert main(["analyze", path, "--no-config"]) == 0
    out = capsys.readouterr().out
    # After the header (report, nsys, GPU): the verdict, before anything else.
    verdict = out.index("VERDICT BOTTLENECK")
    assert out.index("Launch-bound") > verdict
    assert verdict < out.index("Steady state") < out.index("Findings of the steady state")
    assert main(["analyze", path, "--no-config", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc).index("verdict") < list(doc).index("findings")
    assert doc["verdict"]["cause"] == "launch-bound"
    assert doc["devices"][0]["accounting"]["steady"]["buckets"]["launch-bound"]["pct"] > 70


def test_min_severity_hides_info_findings(capsys):
    path = str(CAPTURES / "sync-item.sqlite")
    main(["analyze", path, "--no-config", "--json", "--min-severity", "warning"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"] and {f["severity"] for f in doc["findings"]} <= {"warning", "error"}
    assert doc["verdict"]["cause"] == "sync-wait"


def test_one_problem_is_one_finding():
    """.cpu() of each of 35 batches: one finding for the steady state (and one for the
    warm-up batch), not one per NVTX range."""
    found = analysis("eval-pageable").findings_of("blocking-memcpy", "pageable-async")
    steady = [f for f in found if f.phase == "steady"]
    assert len(steady) == 1 and steady[0].count == 34
    assert steady[0].ranges == ["batch N"]
    assert sum(f.count for f in found if f.ranges == ["batch N"]) == 35


def test_iteration_option_names_the_range(capsys):
    path = CAPTURES / "decode.sqlite"
    a = analyze(load(path), iteration="generate")
    assert a.devices[0]["accounting"]["iterations"]["name"] == "generate"
    none = analyze(load(path), iteration="none")
    assert none.devices[0]["accounting"]["iterations"] is None
    assert main(["analyze", str(path), "--iteration", "nope", "--no-config"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no NVTX range named 'nope'" in err


@pytest.mark.slow
def test_copies_alone_cost_only_the_compute_they_could_hide_under():
    # NVIDIA's simpleStreams (a public program, tests/corpus): 64 MiB copies out of the
    # GPU are its work (91.6% of the steady state), its kernels 7.7%. Overlapping the
    # copies with compute could save at most the compute's time: the copies are not a
    # 91.6% bottleneck "with no overlap with compute", the GPU is busy moving data.
    # (Truth, tests/corpus/programs/pub-cuda-simplestreams/truth.json: busy 91.81% of
    # both loops, copies 88.49%, kernels 6.79%.)
    from tests.conftest import corpus_capture

    a = analyze(load(corpus_capture("pub-cuda-simplestreams")))
    assert a.verdict.kind == "healthy", a.verdict.headline
    assert "transfer-bound" in a.verdict.headline
    assert [f.id for f in a.findings if f.rule == "periodic-save"] == []
