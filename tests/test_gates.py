"""gpugap check and gpugap.ci.gates on the real H200 reports: gates that the good variant of a
scenario holds and the bad one breaks, null metrics, CI outputs, one-line usage errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest

from gpugap.accounting.metrics import METRIC_NAMES
from gpugap.analysis import analyze
from gpugap.ci import gates
from gpugap.ci.check import evaluate
from gpugap.ci.measure import measure
from gpugap.cli import main
from gpugap.report import load
from gpugap.text import shown_path

SCENARIOS = Path(__file__).parent / "data" / "scenarios"


def report_path(name: str) -> Path:
    return SCENARIOS / f"{name}.sqlite"


@pytest.fixture(autouse=True)
def outside_ci(monkeypatch, tmp_path):
    """No GitHub Actions environment, and a directory without gpugap configuration."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


def run_json(capsys, *argv) -> tuple[int, dict]:
    rc = main(["check", *map(str, argv), "--json"])
    return rc, json.loads(capsys.readouterr().out)


@cache
def analyze_range(name: str, range_name: str | None):
    """What `gpugap analyze --range` says: the values every gate must read."""
    return analyze(load(report_path(name)), range_name=range_name)


def measured_metrics(name: str) -> dict:
    return analyze_range(name, "measured").metrics.to_dict()


def occurrences(findings, severities=("info", "warning", "error")) -> int:
    return sum(f.count for f in findings if f.severity in severities)


# --- the gates of the issue --------------------------------------------------------------

def test_copy_overlap_gate_pinned_passes_pageable_fails(capsys):
    pinned = measured_metrics("h2d-copy-good")["copy_compute_overlap_pct"]
    pageable = measured_metrics("h2d-copy-bad")["copy_compute_overlap_pct"]
    assert pageable < 50 <= pinned          # the scenario's point, as analyze measures it
    good, bad = report_path("h2d-copy-good"), report_path("h2d-copy-bad")
    rc, doc = run_json(capsys, good, bad, "--range", "measured",
                       "--min", "copy_compute_overlap_pct=50")
    assert rc == 1
    assert doc["passed"] is False
    assert doc["summary"] == {"gates": 2, "passed": 1, "failed": 1, "skipped": 0}
    good_gate, bad_gate = (r["gates"][0] for r in doc["reports"])
    assert (good_gate["status"], good_gate["value"]) == ("pass", pinned)
    assert (bad_gate["status"], bad_gate["value"]) == ("fail", pageable)
    assert bad_gate["name"] == "measured: copy_compute_overlap_pct >= 50"
    assert bad_gate["message"] == (
        f"copy_compute_overlap_pct = {gates.fmt_value('copy_compute_overlap_pct', pageable)}"
        f" in range 'measured' of {shown_path(bad)}, below the minimum 50%")
    # Each report alone: the exit code follows its own gates.
    assert main(["check", str(good), "--range", "measured",
                 "--min", "copy_compute_overlap_pct=50"]) == 0
    assert main(["check", str(bad), "--range", "measured",
                 "--min", "copy_compute_overlap_pct=50"]) == 1


def test_kernel_overlap_gate_per_thread_passes_legacy_fails(capsys):
    per_thread = measured_metrics("default-stream-good")
    legacy = measured_metrics("default-stream-bad")
    assert legacy["kernel_overlap_pct"] < 50 <= per_thread["kernel_overlap_pct"]
    rc, doc = run_json(capsys, report_path("default-stream-good"), "--range", "measured",
                       "--min", "kernel_overlap_pct=50", "--min", "concurrency=2")
    assert rc == 0
    assert [(g["metric"], g["status"], g["value"]) for g in doc["reports"][0]["gates"]] == [
        ("kernel_overlap_pct", "pass", per_thread["kernel_overlap_pct"]),
        ("concurrency", "pass", per_thread["concurrency"])]

    rc, doc = run_json(capsys, report_path("default-stream-bad"), "--range", "measured",
                       "--min", "kernel_overlap_pct=50", "--min", "concurrency=2")
    assert rc == 1
    assert [(g["metric"], g["status"], g["value"]) for g in doc["reports"][0]["gates"]] == [
        ("kernel_overlap_pct", "fail", legacy["kernel_overlap_pct"]),
        ("concurrency", "fail", legacy["concurrency"])]


def test_findings_gates_count_occurrences_and_cost(capsys):
    blocking = analyze_range("h2d-copy-bad", "measured").findings_of("blocking-memcpy")
    pageable = analyze_range("h2d-copy-bad", "measured").findings_of("blocking-memcpy",
                                                                     "pageable-async")
    assert occurrences(pageable) > 0
    rc, doc = run_json(capsys, report_path("h2d-copy-bad"), "--range", "measured",
                       "--max", "findings.blocking-memcpy.count=0",
                       "--max", "findings.blocking-memcpy.pageable-async.count=0",
                       "--max", "findings.blocking-memcpy.cost_ms=1",
                       "--max", "findings.serialized-streams.count=0")
    assert rc == 1
    by_metric = {g["metric"]: g for g in doc["reports"][0]["gates"]}
    assert by_metric["findings.blocking-memcpy.count"]["value"] == occurrences(blocking)
    assert by_metric["findings.blocking-memcpy.pageable-async.count"]["value"] == \
        occurrences(pageable)
    assert by_metric["findings.blocking-memcpy.cost_ms"]["value"] == round(
        sum(f.cost_ns for f in blocking) / 1e6, 3)
    assert [g["status"] for g in by_metric.values()] == ["fail", "fail", "fail", "pass"]
    assert by_metric["findings.serialized-streams.count"]["value"] == 0
    assert by_metric["findings.blocking-memcpy.count"]["message"].endswith(
        "above the maximum 0")
    # The pinned variant has no blocking copy.
    assert analyze_range("h2d-copy-good", "measured").findings_of("blocking-memcpy") == []
    assert main(["check", str(report_path("h2d-copy-good")), "--range", "measured",
                 "--max", "findings.blocking-memcpy.count=0"]) == 0


def test_whole_report_gates_read_the_whole_report(capsys):
    whole = analyze_range("h2d-copy-bad", None).metrics
    rc, doc = run_json(capsys, report_path("h2d-copy-bad"),
                       "--max", f"gpu_idle_pct={whole.gpu_idle_pct}",
                       "--min", f"kernels={whole.kernels + 1}")
    assert rc == 1
    assert doc["reports"][0]["scope"] is None
    kernels, idle = doc["reports"][0]["gates"]      # --min gates first, then --max
    assert (idle["scope"], idle["status"], idle["value"]) == (None, "pass", whole.gpu_idle_pct)
    assert (kernels["status"], kernels["value"]) == ("fail", whole.kernels)
    assert kernels["name"] == f"whole: kernels >= {whole.kernels + 1}"


def test_null_metric_fails_with_the_reason_unless_allowed(capsys):
    assert measured_metrics("default-stream-good")["copies"] == 0
    report = report_path("default-stream-good")
    rc, doc = run_json(capsys, report, "--range", "measured",
                       "--min", "copy_compute_overlap_pct=50")
    assert rc == 1
    gate = doc["reports"][0]["gates"][0]
    assert (gate["status"], gate["value"]) == ("fail", None)
    assert gate["message"].startswith(
        f"copy_compute_overlap_pct is null in {shown_path(report)} (no copies in range "
        "'measured'); ")
    assert "--allow-missing" in gate["message"]

    rc, doc = run_json(capsys, report, "--range", "measured",
                       "--min", "copy_compute_overlap_pct=50", "--allow-missing")
    assert rc == 0
    assert doc["reports"][0]["gates"][0]["status"] == "skip"
    assert doc["summary"] == {"gates": 1, "passed": 0, "failed": 0, "skipped": 1}


def test_min_severity_leaves_info_findings_out(capsys):
    findings = analyze_range("grid-sweep-good", "measured").findings
    every, serious = occurrences(findings), occurrences(findings, ("warning", "error"))
    assert 0 < serious < every      # warnings (its per-iteration sync) and info findings
    for severity, expected in (("info", every), ("warning", serious)):
        rc, doc = run_json(capsys, report_path("grid-sweep-good"), "--range", "measured",
                           "--max", f"findings.count={serious}", "--min-severity", severity)
        assert doc["reports"][0]["gates"][0]["value"] == expected
        assert rc == (1 if expected > serious else 0)


# --- the library ----------------------------------------------------------------------------

def test_measure_equals_analyze_whole_and_per_range():
    trace = load(report_path("h2d-copy-bad"))
    measured = measure(trace, ranges=["measured", "iter"])
    assert set(measured.scopes) == {None, "measured", "iter"}
    for scope in (None, "measured", "iter"):
        expected = analyze_range("h2d-copy-bad", scope)
        assert {k: measured[scope].values[k] for k in METRIC_NAMES} == \
            expected.metrics.to_dict()
        assert [(f.rule, f.cause, f.count, f.cost_ns) for f in measured[scope].findings] == \
            [(f.rule, f.cause, f.count, f.cost_ns) for f in expected.findings]
        assert measured[scope].values["findings.count"] == occurrences(expected.findings)


def test_evaluate_from_python():
    legacy = analyze_range("default-stream-bad", "measured").findings_of(
        "serialized-streams", "legacy-default-stream")
    round_span = analyze_range("default-stream-bad", "round").metrics.span_ns
    result = evaluate(load(report_path("default-stream-bad")),
                            [gates.Gate("kernel_overlap_pct", "min", 50),
                             gates.Gate("findings.serialized-streams.legacy-default-stream"
                                        ".count", "max", 0),
                             gates.Gate("span_ns", "max", round_span, range="round")],
                            range_name="measured")
    assert not result.passed
    assert [(r.metric, r.scope, r.status) for r in result.results] == [
        ("kernel_overlap_pct", "measured", "fail"),
        ("findings.serialized-streams.legacy-default-stream.count", "measured", "fail"),
        ("span_ns", "round", "pass")]
    assert result.results[1].value == occurrences(legacy) > 0
    assert result.results[2].value == round_span
    assert [r.metric for r in result.failures] == [
        "kernel_overlap_pct", "findings.serialized-streams.legacy-default-stream.count"]


def test_directions_table_and_patterns():
    assert gates.direction_of("kernel_overlap_pct") == "higher"
    assert gates.direction_of("copy_compute_overlap_pct") == "higher"
    assert gates.direction_of("concurrency") == "higher"
    assert gates.direction_of("gpu_idle_pct") == "lower"
    assert gates.direction_of("findings.launch-gap.host-blocked.cost_ms") == "lower"
    assert gates.direction_of("kernels") == "none"
    assert gates.direction_of("kernels", {"kernels": "lower"}) == "lower"
    assert gates.matches("findings.*.count", "findings.launch-gap.count")
    assert not gates.matches("findings.*.count", "findings.launch-gap.host-blocked.count")
    assert gates.matches("findings.**", "findings.launch-gap.host-blocked.count")


# --- CI outputs ---------------------------------------------------------------------------

def test_junit_has_one_case_per_gate(capsys, tmp_path):
    junit = tmp_path / "junit.xml"
    rc = main(["check", str(report_path("h2d-copy-good")), str(report_path("h2d-copy-bad")),
               "--range", "measured", "--min", "copy_compute_overlap_pct=50",
               "--max", "findings.blocking-memcpy.count=0", "--junit", str(junit)])
    assert rc == 1
    root = ET.parse(junit).getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "4", "2")
    good, bad = root.findall("testsuite")
    assert good.get("name") == shown_path(report_path("h2d-copy-good"))
    assert [c.get("name") for c in good.iter("testcase")] == [
        "measured: copy_compute_overlap_pct >= 50",
        "measured: findings.blocking-memcpy.count <= 0"]
    assert good.find("testcase/failure") is None
    failures = bad.findall("testcase/failure")
    blocking = occurrences(analyze_range("h2d-copy-bad", "measured").findings_of(
        "blocking-memcpy"))
    overlap = measured_metrics("h2d-copy-bad")["copy_compute_overlap_pct"]
    assert [f.get("message") for f in failures] == [
        f"copy_compute_overlap_pct = {gates.fmt_value('copy_compute_overlap_pct', overlap)} "
        f"in range 'measured' of {shown_path(report_path('h2d-copy-bad'))}, below the "
        "minimum 50%",
        f"findings.blocking-memcpy.count = {blocking} in range 'measured' of "
        f"{shown_path(report_path('h2d-copy-bad'))}, above the maximum 0"]
    assert bad.find("testcase").get("classname") == "gpugap.check.h2d-copy-bad"


def test_github_annotations_only_under_actions(capsys, monkeypatch, tmp_path):
    argv = ["check", str(report_path("default-stream-bad")), "--range", "measured",
            "--min", "kernel_overlap_pct=50"]
    assert main(argv) == 1
    assert "::error" not in capsys.readouterr().out

    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(argv) == 1
    errors = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("::")]
    shown = gates.fmt_value("kernel_overlap_pct",
                            measured_metrics("default-stream-bad")["kernel_overlap_pct"])
    assert errors == [
        "::error title=gpugap check failed%3A measured%3A kernel_overlap_pct >= 50::"
        f"kernel_overlap_pct = {shown.replace('%', '%25')} in range 'measured' of "
        f"{shown_path(report_path('default-stream-bad'))}, below the minimum 50%25"]
    text = summary.read_text()
    assert text.startswith("earlier step\n### gpugap check: ❌ 1 of 1 gates failed")
    assert f"| ❌ | `measured: kernel_overlap_pct >= 50` | {shown} | ≥ 50% |" in text

    # With --json the annotations go to stderr and stdout stays one JSON document.
    assert main([*argv, "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["passed"] is False
    assert err.startswith("::error title=gpugap check failed%3A measured%3A")


def test_markdown_file_lists_failures_first(capsys, tmp_path):
    md = tmp_path / "check.md"
    rc = main(["check", str(report_path("h2d-copy-bad")), "--range", "measured",
               "--max", "findings.serialized-streams.count=0",
               "--max", "findings.blocking-memcpy.count=0", "--markdown", str(md)])
    assert rc == 1
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("| ")][2:]
    blocking = occurrences(analyze_range("h2d-copy-bad", "measured").findings_of(
        "blocking-memcpy"))
    assert rows[0].startswith(
        f"| ❌ | `measured: findings.blocking-memcpy.count <= 0` | {blocking} |")
    assert rows[1].startswith("| ✅ | `measured: findings.serialized-streams.count <= 0` | 0 |")


def test_human_output_summarises(capsys):
    rc = main(["check", str(report_path("h2d-copy-good")), "--range", "measured",
               "--min", "copy_compute_overlap_pct=50"])
    out = capsys.readouterr().out
    assert rc == 0
    pinned = measured_metrics("h2d-copy-good")["copy_compute_overlap_pct"]
    assert gates.fmt_value("copy_compute_overlap_pct", pinned) in out
    assert out.rstrip().endswith("gpugap check passed: 1 of 1 gates held in 1 report(s)")


def test_human_output_opens_with_the_result_then_the_failed_gates(capsys, monkeypatch):
    """The result first (failed, how many), then every failed gate, then the tables;
    the result again on the last line, for a CI log read from its end."""
    monkeypatch.setenv("COLUMNS", "80")
    rc = main(["check", str(report_path("h2d-copy-good")), str(report_path("h2d-copy-bad")),
               "--range", "measured", "--min", "copy_compute_overlap_pct=50",
               "--max", "findings.serialized-streams.count=0"])
    lines = [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]
    assert rc == 1
    assert max(len(ln) for ln in lines) <= 80
    result = "gpugap check failed: 1 of 4 gates failed in 2 report(s)"
    assert lines[0] == result and lines[-1] == result
    assert lines[1].startswith("FAIL copy_compute_overlap_pct = ")
    # The report as every view names it (gpugap.text.shown_path), whole.
    assert f"of {shown_path(report_path('h2d-copy-bad'))}, below" in \
        " ".join(ln.strip() for ln in lines[1:4])
    first_table = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    assert all(not ln.startswith("FAIL") for ln in lines[first_table:])
    assert [ln.split("│")[1].strip() for ln in lines if ln.startswith("│ ")
            and ln.split("│")[1].strip()] == ["PASS", "PASS", "FAIL", "PASS"]


def test_escaping_of_workflow_commands():
    from gpugap.render.github import command, escape_property

    assert escape_property("a: b, 5%\n") == "a%3A b%2C 5%25%0A"
    assert command("error", "100% done\nnext", title="x:y") == \
        "::error title=x%3Ay::100%25 done%0Anext"


# --- bad input: exit 2, one line ------------------------------------------------------------

@pytest.mark.parametrize(("args", "expected"), [
    (["--min", "kernel_overlap=50"],
     "unknown metric 'kernel_overlap' in --min (did you mean kernel_overlap_pct?)"),
    (["--min", "kernel_overlap_pct"], "bad --min 'kernel_overlap_pct'; write METRIC=VALUE"),
    (["--max", "gpu_idle_pct=lots"], "bad --max 'gpu_idle_pct=lots': 'lots' is not a number"),
    (["--max", "findings.no-such-rule.count=0"], "unknown rule 'no-such-rule' in metric"),
    (["--max", "findings.launch-gap.nope.count=0"], "rule launch-gap has no cause 'nope'"),
    (["--max", "findings.launch-gap.total=0"], "bad findings metric 'findings.launch-gap."),
    (["--min", "kernel_overlap_pct=50", "--range", "nope"],
     "no NVTX range named 'nope' in"),
    ([], "no gates to check"),
    (["--min", "kernel_overlap_pct=50", "--tolerance", "3"], "--tolerance applies to a "
                                                             "baseline"),
    (["--min", "kernel_overlap_pct=50", "--min-severity", "loud"],
     "bad --min-severity 'loud'"),
    (["--min", "kernel_overlap_pct=50", "--set", "launch-gap.nope=1"],
     "rule launch-gap has no threshold nope"),
])
def test_bad_gates_exit_2_with_one_line(capsys, args, expected):
    rc = main(["check", str(report_path("h2d-copy-good")), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("gpugap: error: ")
    assert expected in err


def test_bad_report_files_exit_2_with_one_line(capsys, tmp_path):
    junk = tmp_path / "notes.sqlite"
    junk.write_text("not a database")
    for path, expected in ((tmp_path / "missing.sqlite", "no such file"),
                           (junk, "is neither an nsys report")):
        rc = main(["check", str(report_path("h2d-copy-good")), str(path),
                   "--min", "kernel_overlap_pct=0"])
        err = capsys.readouterr().err
        assert rc == 2
        assert err.count("\n") == 1 and expected in err


# --- the steady state ----------------------------------------------------------------------

CAPTURES = Path(__file__).parent / "data" / "captures"


def test_steady_state_figures_gate_a_sync_per_step(capsys):
    """steady.* metrics: the share of each bucket in the steady state, the iteration
    time, the busy share, as the verdict's accounting measures them."""
    synced, free = CAPTURES / "sync-item.sqlite", CAPTURES / "sync-free.sqlite"
    rc, doc = run_json(capsys, synced, free, "--max", "steady.synchronization_pct=5",
                       "--min", "steady.gpu_busy_pct=90", "--max", "steady.iteration_ms=20")
    assert rc == 1
    results = {(r["report"], g["metric"]): (g["status"], g["value"])
               for r in doc["reports"] for g in r["gates"]}
    bad = analyze(load(synced))
    steady = bad.devices[0]["accounting"]["steady"]
    assert results[(str(synced), "steady.synchronization_pct")] == (
        "fail", round(steady["buckets"]["synchronization"]["pct"], 3))
    assert results[(str(synced), "steady.gpu_busy_pct")] == ("fail", steady["gpu_busy_pct"])
    assert results[(str(synced), "steady.iteration_ms")] == (
        "fail", round(steady["iteration_median_ns"] / 1e6, 6))
    assert {results[(str(free), m)][0] for m in ("steady.synchronization_pct",
                                                 "steady.gpu_busy_pct",
                                                 "steady.iteration_ms")} == {"pass"}


@pytest.mark.slow
def test_diff_and_baseline_follow_the_steady_state(capsys, tmp_path):
    synced, free = CAPTURES / "sync-item.sqlite", CAPTURES / "sync-free.sqlite"
    assert main(["diff", str(synced), str(free), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (whole,) = [s for s in doc["scopes"] if s["scope"] is None]
    changes = {m["metric"]: m for m in whole["metrics"]}
    assert changes["steady.synchronization_pct"]["change"] == "better"
    assert changes["steady.iteration_ms"]["change"] == "better"
    assert changes["steady.gpu_busy_pct"]["change"] == "better"
    # A baseline of the sync-free loop catches the sync coming back.
    base = tmp_path / "base.json"
    assert main(["baseline", "save", str(free), "-o", str(base)]) == 0
    capsys.readouterr()
    rc, doc = run_json(capsys, synced, "--baseline", base)
    assert rc == 1
    failed = {g["metric"] for g in doc["reports"][0]["gates"] if g["status"] == "fail"}
    assert {"steady.synchronization_pct", "steady.iteration_ms"} <= failed


def test_unknown_steady_metric_is_named(capsys):
    rc = main(["check", str(CAPTURES / "sync-item.sqlite"), "--max",
               "steady.sync_pct=1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown metric 'steady.sync_pct'" in err


def test_baseline_save_help_names_the_severity_the_file_records(capsys, tmp_path):
    """`baseline save --help` and the file agree: warning by default, info taken as
    warning (issue 23)."""
    import re

    assert main(["baseline", "save", "--help"]) == 0
    # The words only: typer draws the help in boxes, whose sides cut wrapped phrases.
    help_text = " ".join(re.sub("[│╭╮╰╯─]", " ", capsys.readouterr().out).split())
    assert "warning (default) or error" in help_text and "info (default)" not in help_text
    for given, recorded in ((None, "warning"), ("info", "warning")):
        out = tmp_path / f"{given}.json"
        argv = ["baseline", "save", str(SCENARIOS.parent / "captures" / "gemm.sqlite"), "-o",
                str(out), "--no-config", *(["--min-severity", given] if given else [])]
        assert main(argv) == 0
        assert re.search(r'"min_severity":\s*"(\w+)"', out.read_text()).group(1) == recorded
