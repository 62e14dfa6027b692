"""Baselines on the real H200 reports: save, load, check a regression against them, the
noise rule, and one-line errors for bad baseline files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from gpugap.analysis import analyze
from gpugap.ci import baseline
from gpugap.ci.check import evaluate
from gpugap.ci.measure import measure, reported_range_names
from gpugap.cli import main
from gpugap.report import load
from gpugap.text import shown_path

SCENARIOS = Path(__file__).parent / "data" / "scenarios"
ROOT = Path(__file__).parent.parent


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
    assert data["gpugap_baseline"] == 2
    assert data["min_severity"] == "warning"            # info findings are never gated
    assert data["reports"] == [str(report_path("h2d-copy-good"))]

    known = baseline.load(path)
    trace = load(report_path("h2d-copy-good"))
    assert list(known.scopes) == [None, *reported_range_names(trace)]
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
    assert [g["metric"] for g in doc["reports"][0]["gates"]][:4] == [
        "kernel_overlap_pct", "copy_compute_overlap_pct", "concurrency",
        "steady.iteration_ms"]                   # the order of baseline.DEFAULT_METRICS

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
    # The pageable copies are an error the pinned run never had: new, whatever its cost.
    blocking = gate_of(doc, "findings.blocking-memcpy.pageable-async.cost_ms")
    pageable = [f for f in measured("h2d-copy-bad").findings_of("blocking-memcpy")
                if f.severity in ("warning", "error")]
    assert pageable and blocking["status"] == "fail"
    assert blocking["value"] == pytest.approx(sum(f.cost_ns for f in pageable) / 1e6,
                                              abs=1e-3)
    assert blocking["limit"] == 0 and blocking["baseline"]["new"] is True
    assert blocking["baseline"]["count"] == sum(f.count for f in pageable)
    assert blocking["message"].startswith(
        "new error finding blocking-memcpy [pageable-async] in range 'measured' of ")
    assert blocking["message"].endswith("absent from all 1 baseline run")


def test_per_thread_baseline_catches_lost_kernel_overlap(capsys, tmp_path):
    path = save(tmp_path, "default-stream-good")
    rc, doc = check_json(capsys, "default-stream-bad", "--baseline", path)
    assert rc == 1
    failed = {g["metric"] for g in doc["reports"][0]["gates"] if g["status"] == "fail"}
    assert {"kernel_overlap_pct", "concurrency",
            "findings.serialized-streams.legacy-default-stream.cost_ms"} <= failed
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


@pytest.mark.slow
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
    runs = [measure(load(report_path(n)), ranges=["measured"])
            for n in ("h2d-copy-bad", "h2d-copy-good")]
    known = baseline.build(runs)
    strict = baseline.Policy(tolerance=5, noise_k=0)
    for run, status in zip(runs, ("fail", "pass"), strict=True):
        result = evaluate(run, range_name="measured", baseline=known, policy=strict)
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
    # Format 1 counted info findings: refused, with the way out.
    ('{"gpugap_baseline": 1, "whole": {}}', "is a gpugap baseline of format 1, which gated "
     "info findings; this gpugap reads format 2: save it again with gpugap baseline save"),
    ('{"gpugap_baseline": 2, "ranges": {"measured": {"kernels": {}}}}',
     "is a malformed gpugap baseline"),
    ('{"gpugap_baseline": 2, "min_severity": "info"}',
     "min_severity: must be one of warning, error"),
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


# --- noise: six good runs of one program (tests/data/captures/runs) -----------------------

RUNS = Path(__file__).parent / "data" / "captures" / "runs"
GOOD = [RUNS / f"good-{i}.sqlite" for i in range(1, 7)]
BAD = RUNS / "bad-1.sqlite"


@cache
def measured_run(path: Path):
    return measure(load(path))


def info_counts(path: Path) -> dict[str, int]:
    """Occurrences of info findings per rule (what a format-1 baseline gated)."""
    counts: dict[str, int] = {}
    for f in measured_run(path)[None].findings:
        if f.severity == "info":
            counts[f.rule] = counts.get(f.rule, 0) + f.count
    return counts


@pytest.mark.slow
def test_five_good_runs_do_not_flag_the_sixth_and_the_pageable_run_fails(capsys, tmp_path):
    """eval_copy.py --variant pinned profiled six times in a row on one H100: a baseline
    of runs 1-5 passes run 6 with nothing beyond the noise; --variant pageable (bad-1,
    same machine, same session) fails it."""
    out = tmp_path / "good.json"
    assert main(["baseline", "save", *map(str, GOOD[:5]), "-o", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"saved baseline {out} from 5 run(s)")
    known = baseline.load(out)
    assert known.reports == list(map(str, GOOD[:5])) and known.min_severity == "warning"

    rc = main(["check", str(GOOD[5]), "--baseline", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["passed"] is True
    results = doc["reports"][0]["gates"]
    assert {g["status"] for g in results} == {"pass"}
    assert [g["metric"] for g in results if g.get("baseline", {}).get("beyond_noise")] == []
    # Run 6 has its info findings (start-up gaps, the first pageable copies), in other
    # numbers than runs 1-5: none is gated, no findings.* gate is even listed.
    assert info_counts(GOOD[5])["launch-gap"] > 0
    assert {r: info_counts(p)["launch-gap"] for r, p in enumerate(GOOD)} != \
        dict.fromkeys(range(6), info_counts(GOOD[5])["launch-gap"])
    assert not [g for g in results if g["metric"].startswith("findings.")]
    steady = gate_of(doc, "steady.iteration_ms")
    assert steady["baseline"]["median"] == pytest.approx(1.41, abs=0.005)
    assert steady["value"] == pytest.approx(steady["baseline"]["median"], rel=0.002)

    rc = main(["check", str(BAD), "--baseline", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    failed = {g["metric"]: g for g in doc["reports"][0]["gates"] if g["status"] == "fail"}
    assert {"copy_compute_overlap_pct", "steady.iteration_ms", "steady.gpu_busy_pct",
            "steady.copy-d2h-pageable_pct",
            "findings.blocking-memcpy.pageable-async.cost_ms"} <= set(failed)
    assert failed["steady.iteration_ms"]["value"] > 10 * steady["baseline"]["median"]
    new = failed["findings.blocking-memcpy.pageable-async.cost_ms"]
    errors = [f for f in measured_run(BAD)[None].findings
              if f.rule == "blocking-memcpy" and f.severity == "error"]
    assert new["baseline"]["count"] == sum(f.count for f in errors) > 30
    assert new["message"].endswith("absent from all 5 baseline runs")


def test_no_good_run_is_flagged_by_a_baseline_of_the_other_five():
    """Leave one out, each of the six in turn, run 1 (a cold first run whose span the
    start-up made ~230 ms longer) included: the default gates see no regression."""
    runs = [measured_run(p) for p in GOOD]
    for i, run in enumerate(runs):
        known = baseline.build(runs[:i] + runs[i + 1:])
        result = evaluate(run, baseline=known)
        assert result.passed, (GOOD[i].name, [r.message for r in result.failures])
    # The start-up is what differs: the whole report's busy share (not gated by default)
    # spans several points across the six; the steady state's a tenth of one.
    busy = [r[None].value("gpu_busy_pct") for r in runs]
    steady = [r[None].value("steady.gpu_busy_pct") for r in runs]
    assert max(busy) - min(busy) > 5 and max(steady) - min(steady) < 0.1


@pytest.mark.slow
def test_info_findings_never_fail_a_single_run_baseline(capsys, tmp_path):
    """One run as the baseline (no spread: the tolerances alone decide) and another good
    run with more info findings (2 more occurrences of first calls): passes. Format 1
    gated findings.count and failed it (27 > 25 + 5%)."""
    counts = [measured_run(p)[None].value("findings.count") for p in (GOOD[4], GOOD[0])]
    assert counts == [25, 27]
    assert info_counts(GOOD[0])["warmup-latency"] == \
        info_counts(GOOD[4])["warmup-latency"] + 2
    out = tmp_path / "one.json"
    assert main(["baseline", "save", str(GOOD[4]), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["check", str(GOOD[0]), "--baseline", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] and not [g for g in doc["reports"][0]["gates"]
                                  if g["metric"].startswith("findings.")]


def test_a_findings_cost_is_held_to_the_larger_tolerance():
    """The pinned and pageable h2d-copy runs as two runs of one baseline: the error's
    cost has a median of half the pageable run's; without the noise allowance, the
    pageable run's cost is beyond 5% of it and beyond 1 ms, but within 50 ms or 101%."""
    runs = [measure(load(report_path(f"h2d-copy-{v}")), ranges=["measured"],
                          whole=False) for v in ("good", "bad")]
    known = baseline.build(runs)
    metric = "findings.blocking-memcpy.pageable-async.cost_ms"
    stats = known.scopes["measured"][metric]
    assert stats.min == 0 and stats.median == pytest.approx(stats.max / 2, abs=1e-3)

    def judged(policy):
        result = evaluate(runs[1], range_name="measured", baseline=known,
                                policy=policy)
        return next(r for r in result.results if r.metric == metric)

    strict = judged(baseline.Policy(noise_k=0))
    assert strict.status == "fail" and "new" not in strict.baseline
    assert strict.baseline["allowed"] == pytest.approx(0.05 * stats.median, abs=1e-6)
    assert "max(tolerance 5% of the median, 1 ms, 0 x stdev" in strict.message
    assert judged(baseline.Policy(noise_k=0, cost_tolerance_ms=50)).status == "pass"
    assert judged(baseline.Policy(noise_k=0, tolerance=101,
                                  cost_tolerance_ms=0)).status == "pass"
    assert judged(baseline.Policy()).status == "pass"     # 3 x stdev of the two runs
    # Info findings are left out of every findings.* metric of the baseline.
    assert known.scopes["measured"]["findings.launch-gap.count"].max == 0


@pytest.mark.slow
def test_check_and_save_fit_80_columns(tmp_path):
    """A CI log (no TTY, COLUMNS=80): no line is wider than 80, names break at their
    dots and dashes, the numbers are all there."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_ACTIONS", None)
    env.pop("GITHUB_STEP_SUMMARY", None)

    def gpugap(*argv) -> tuple[int, list[str]]:
        done = subprocess.run([sys.executable, "-m", "gpugap", *map(str, argv),
                               "--no-config"], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)
        assert "Traceback" not in done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, done.stdout
        return done.returncode, lines

    rc, lines = gpugap("baseline", "save", *GOOD[:5], "-o", "b.json")
    assert rc == 0 and lines[0] == "saved baseline b.json from 5 run(s): the whole report " \
        "and 35 NVTX range(s)"
    assert lines[1].startswith("ranges: batch 0, batch 1,") and "and 27 more)" not in lines[1]
    assert "and 27 more" in " ".join(lines[1:])

    rc, lines = gpugap("check", BAD, "--baseline", "b.json")
    text = "\n".join(lines)
    assert rc == 1
    row = next(i for i, ln in enumerate(lines) if "findings.blocking-memcpy." in ln)
    assert [c.strip() for c in lines[row].split("│")[1:6]] == [
        "FAIL", "findings.blocking-memcpy.pageable-", "442.223", "0", "≤ 0"]
    assert [c.strip() for c in lines[row + 1].split("│")[1:6]] == [
        "", "async.cost_ms", "", "", ""]
    steady = next(ln for ln in lines if "steady.iteration_ms" in ln and "│" in ln)
    assert [c.strip() for c in steady.split("│")[1:6]] == [
        "FAIL", "steady.iteration_ms", "14.809", "1.41", "≤ 1.481"]
    fails = [ln for ln in lines if ln.startswith("FAIL ")]
    assert len(fails) == 8 and fails[-1].startswith("FAIL new error finding blocking-memcpy")
    assert "absent from all 5 baseline runs" in text.replace("\n     ", " ")
    assert lines[-1] == "gpugap check failed: 8 of 33 gates failed in 1 report(s)"


@pytest.mark.slow
def test_a_baseline_of_another_program_warns(capsys, tmp_path):
    """Saved from the h2d-copy scenario, checked on default-stream: compared, with a
    warning naming both programs (the gates decide pass or fail, as always)."""
    path = save(tmp_path, "h2d-copy-good")
    assert json.loads(path.read_text())["program"] == "python3 -m scenarios.h2d_copy"
    _, same = check_json(capsys, "h2d-copy-bad", "--baseline", path)
    assert not any("another program" in w for w in same["reports"][0]["warnings"])
    _, other = check_json(capsys, "default-stream-good", "--baseline", path)
    assert [w for w in other["reports"][0]["warnings"] if "another program" in w] == [
        f"{shown_path(report_path('default-stream-good'))} is a run of 'python3 -m "
        "scenarios.default_stream', the baseline of 'python3 -m scenarios.h2d_copy': "
        "another program's baseline; save one from this program's runs (gpugap baseline "
        "save)"]
