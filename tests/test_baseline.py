"""Baselines on the real H200 reports: save, load, check a regression against them, the
noise rule, and one-line errors for bad baseline files."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest

from gpugap import baseline, gates
from gpugap.analysis import analyze
from gpugap.cli import main
from gpugap.report import load

SCENARIOS = Path(__file__).parent / "data" / "scenarios"


def report_path(name: str) -> Path:
    return SCENARIOS / f"{name}.sqlite"


@cache
def measured(name: str):
    """analyze --range measured: the numbers the baseline must hold."""
    return analyze(load(report_path(name)), range_name="measured")


@pytest.fixture(autouse=True)
def outside_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


def save(tmp_path, *names: str) -> Path:
    out = tmp_path / "baseline.json"
    assert main(["baseline", "save", *(str(report_path(n)) for n in names),
                 "-o", str(out)]) == 0
    return out


def check_json(capsys, name: str, *argv) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(["check", str(report_path(name)), "--range", "measured", *map(str, argv),
               "--json"])
    return rc, json.loads(capsys.readouterr().out)


def gate_of(doc: dict, metric: str) -> dict:
    return next(g for g in doc["reports"][0]["gates"] if g["metric"] == metric)


def test_round_trip_whole_report_and_ranges(capsys, tmp_path):
    path = save(tmp_path, "h2d-copy-good")
    assert capsys.readouterr().out.startswith(f"saved baseline {path} from 1 run(s)")
    data = json.loads(path.read_text())
    assert data["gpugap_baseline"] == 1
    assert data["reports"] == [str(report_path("h2d-copy-good"))]

    known = baseline.load(path)
    trace = load(report_path("h2d-copy-good"))
    assert list(known.scopes) == [None, *gates.reported_range_names(trace)]
    assert "measured" in known.scopes
    whole = analyze(trace).metrics
    assert known.scopes[None]["gpu_idle_pct"].median == whole.gpu_idle_pct
    value = measured("h2d-copy-good").metrics.copy_compute_overlap_pct
    stats = known.scopes["measured"]["copy_compute_overlap_pct"]
    assert stats == baseline.Stats(median=value, min=value, max=value, stdev=0.0, n=1,
                                   runs=(value,))
    blocking = known.scopes["measured"]["findings.blocking-memcpy.count"]
    assert (blocking.median, blocking.n) == (0, 1)
    # What is saved is what is loaded.
    assert baseline.Baseline.from_dict(known.to_dict()).scopes == known.scopes
    assert known.thresholds == measured("h2d-copy-good").thresholds


def test_pinned_baseline_passes_pinned_and_fails_pageable(capsys, tmp_path):
    path = save(tmp_path, "h2d-copy-good")
    rc, doc = check_json(capsys, "h2d-copy-good", "--baseline", path)
    assert rc == 0
    assert {g["status"] for g in doc["reports"][0]["gates"]} == {"pass"}
    assert [g["metric"] for g in doc["reports"][0]["gates"]][:5] == [
        "kernel_overlap_pct", "copy_compute_overlap_pct", "gpu_busy_pct", "gpu_idle_pct",
        "concurrency"]                           # the order of baseline.DEFAULT_METRICS

    rc, doc = check_json(capsys, "h2d-copy-bad", "--baseline", path, "--tolerance", 5)
    assert rc == 1
    good = measured("h2d-copy-good").metrics.copy_compute_overlap_pct
    bad = measured("h2d-copy-bad").metrics.copy_compute_overlap_pct
    copy = gate_of(doc, "copy_compute_overlap_pct")
    assert copy["status"] == "fail" and copy["value"] == bad
    assert copy["baseline"]["delta"] == round(bad - good, 6)
    assert {k: copy["baseline"][k] for k in ("median", "allowed", "beyond_noise",
                                             "direction")} == {
        "median": good, "allowed": 5.0, "beyond_noise": True, "direction": "higher"}
    assert copy["message"].startswith("copy_compute_overlap_pct dropped from ")
    blocking = gate_of(doc, "findings.blocking-memcpy.count")
    assert blocking["status"] == "fail"
    assert blocking["value"] == sum(f.count for f in
                                    measured("h2d-copy-bad").findings_of("blocking-memcpy"))
    assert blocking["limit"] == 0                 # 5% of a median of 0 allows nothing


def test_per_thread_baseline_catches_lost_kernel_overlap(capsys, tmp_path):
    path = save(tmp_path, "default-stream-good")
    rc, doc = check_json(capsys, "default-stream-bad", "--baseline", path)
    assert rc == 1
    failed = {g["metric"] for g in doc["reports"][0]["gates"] if g["status"] == "fail"}
    assert {"kernel_overlap_pct", "concurrency",
            "findings.serialized-streams.count"} <= failed
    kernel = gate_of(doc, "kernel_overlap_pct")
    assert kernel["value"] == measured("default-stream-bad").metrics.kernel_overlap_pct
    assert kernel["baseline"]["median"] == \
        measured("default-stream-good").metrics.kernel_overlap_pct
    # No copies in either: nothing to compare, and no failure for it.
    copy = gate_of(doc, "copy_compute_overlap_pct")
    assert copy["status"] == "pass" and copy["value"] is None
    assert "the baseline has no value for it" in copy["message"]


def test_tolerance_decides_a_single_run_baseline(capsys, tmp_path):
    path = save(tmp_path, "h2d-copy-good")
    drop = (measured("h2d-copy-good").metrics.copy_compute_overlap_pct
            - measured("h2d-copy-bad").metrics.copy_compute_overlap_pct)
    assert drop > 2
    for tolerance, status in ((math.ceil(drop) + 1, "pass"), (math.floor(drop) - 1, "fail")):
        _, doc = check_json(capsys, "h2d-copy-bad", "--baseline", path,
                            "--tolerance", tolerance)
        copy = gate_of(doc, "copy_compute_overlap_pct")
        assert copy["status"] == status
        assert copy["baseline"]["allowed"] == tolerance


def test_repeated_runs_give_median_and_spread_and_noise_rule(tmp_path, capsys):
    # The pageable and pinned reports stand in for two very noisy runs of one program.
    a = measured("h2d-copy-bad").metrics.copy_compute_overlap_pct
    b = measured("h2d-copy-good").metrics.copy_compute_overlap_pct
    path = save(tmp_path, "h2d-copy-bad", "h2d-copy-good")
    stats = baseline.load(path).scopes["measured"]["copy_compute_overlap_pct"]
    assert (stats.n, stats.runs, stats.min, stats.max) == (2, (a, b), min(a, b), max(a, b))
    assert stats.median == pytest.approx((a + b) / 2)
    assert stats.stdev == pytest.approx(abs(a - b) / math.sqrt(2), abs=1e-6)

    # |delta| = |a - b| / 2 is well inside 3 x stdev: run-to-run noise, not a regression.
    rc, doc = check_json(capsys, "h2d-copy-bad", "--baseline", path)
    copy = gate_of(doc, "copy_compute_overlap_pct")
    assert copy["status"] == "pass" and copy["baseline"]["beyond_noise"] is False
    assert copy["baseline"]["allowed"] == pytest.approx(3 * stats.stdev, abs=1e-5)
    assert "within the noise" in copy["message"]

    # Without the noise allowance the same change is beyond it: a drop fails, a gain passes.
    runs = [gates.measure(load(report_path(n)), ranges=["measured"])
            for n in ("h2d-copy-bad", "h2d-copy-good")]
    known = baseline.build(runs)
    strict = baseline.Policy(tolerance=5, noise_k=0)
    for run, status in zip(runs, ("fail", "pass"), strict=True):
        result = gates.evaluate(run, range_name="measured", baseline=known, policy=strict)
        copy = next(r for r in result.results if r.metric == "copy_compute_overlap_pct")
        assert copy.status == status and copy.baseline["beyond_noise"] is True
    assert "improved" in copy.message


def test_other_thresholds_warn(capsys, tmp_path):
    path = save(tmp_path, "h2d-copy-good")
    _, doc = check_json(capsys, "h2d-copy-good", "--baseline", path,
                        "--set", "launch-gap.min_gap_us=50")
    assert any("other rule thresholds than the baseline" in w
               for w in doc["reports"][0]["warnings"])


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such baseline file"),
    ("{not json", "is not a gpugap baseline (invalid JSON"),
    ('{"metrics": {}}', "is not a gpugap baseline (no 'gpugap_baseline' key)"),
    ('{"gpugap_baseline": 7}', "is a gpugap baseline of format 7"),
    ('{"gpugap_baseline": 1, "ranges": {"measured": {"kernels": {}}}}',
     "is a malformed gpugap baseline"),
])
def test_bad_baseline_files_exit_2_with_one_line(capsys, tmp_path, content, expected):
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content)
    rc = main(["check", str(report_path("h2d-copy-good")), "--baseline", str(path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith(f"gpugap: error: {path}")
    assert expected in err


def test_baseline_without_the_checked_range_exits_2(capsys, tmp_path):
    path = save(tmp_path, "default-stream-good")       # ranges: measured, round
    rc = main(["check", str(report_path("h2d-copy-good")), "--range", "iter",
               "--baseline", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"baseline {path} has no range 'iter'" in err


def test_save_needs_an_output(capsys):
    rc = main(["baseline", "save", str(report_path("h2d-copy-good"))])
    assert rc == 2
    assert "give -o FILE" in capsys.readouterr().err
