"""gpugap diff on the real H200 reports: pageable -> pinned fixes the blocking copy and
gains copy/compute overlap; legacy -> per-thread default stream gains kernel overlap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from gpugap.accounting.metrics import METRIC_NAMES
from gpugap.analysis import analyze
from gpugap.ci import diff as diffs
from gpugap.ci.gates import fmt_value
from gpugap.ci.measure import reported_range_names
from gpugap.cli import main
from gpugap.report import load
from gpugap.text import shown_path

SCENARIOS = Path(__file__).parent / "data" / "scenarios"
ROOT = Path(__file__).parent.parent


def report_path(name: str) -> Path:
    return SCENARIOS / f"{name}.sqlite"


@cache
def analysis(name: str, range_name: str | None = "measured"):
    return analyze(load(report_path(name)), range_name=range_name)


@pytest.fixture(autouse=True)
def outside_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


def diff_json(capsys, before: str, after: str, *argv) -> dict:
    capsys.readouterr()
    assert main(["diff", str(report_path(before)), str(report_path(after)), *argv,
                 "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def metric(doc: dict, scope: str | None, name: str) -> dict:
    found = next(s for s in doc["scopes"] if s["scope"] == scope)
    return next(m for m in found["metrics"] if m["metric"] == name)


def test_pageable_to_pinned_fixes_the_blocking_copy_and_gains_overlap(capsys):
    doc = diff_json(capsys, "h2d-copy-bad", "h2d-copy-good", "--range", "measured")
    before = analysis("h2d-copy-bad").metrics.copy_compute_overlap_pct
    after = analysis("h2d-copy-good").metrics.copy_compute_overlap_pct
    assert metric(doc, "measured", "copy_compute_overlap_pct") == {
        "metric": "copy_compute_overlap_pct", "before": before, "after": after,
        "delta": round(after - before, 6), "direction": "higher", "noise": 1.0,
        "change": "better"}
    assert after - before > 50

    blocking = analysis("h2d-copy-bad").findings_of("blocking-memcpy", "pageable-async")
    fixed = [f for f in doc["findings"] if f["rule"] == "blocking-memcpy"]
    # One entry per place (NVTX ranges) the copies happened, each fixed.
    by_where: dict[tuple, list] = {}
    for f in blocking:
        by_where.setdefault(tuple(f.ranges), []).append(f)
    assert len(fixed) == len(by_where)
    for entry in fixed:
        mine = by_where[tuple(entry["ranges"])]
        cost = round(sum(f.cost_ns for f in mine) / 1e6, 3)
        assert entry == {
            "rule": "blocking-memcpy", "cause": "pageable-async", "ranges": entry["ranges"],
            "status": "fixed", "severity_before": max(
                (f.severity for f in mine), key=["info", "warning", "error"].index),
            "severity_after": None, "count_before": sum(f.count for f in mine),
            "count_after": 0, "cost_ms_before": cost, "cost_ms_after": 0.0,
            "cost_ms_delta": -cost, "change": "fixed"}
    assert doc["summary"]["fixed"] >= 1
    assert metric(doc, "measured", "findings.blocking-memcpy.count")["change"] == "better"
    # Only the range asked for.
    assert [s["scope"] for s in doc["scopes"]] == ["measured"]


def test_the_reverse_change_is_new_and_worse(capsys):
    doc = diff_json(capsys, "h2d-copy-good", "h2d-copy-bad", "--range", "measured")
    assert metric(doc, "measured", "copy_compute_overlap_pct")["change"] == "worse"
    new = {(f["rule"], f["cause"], f["status"]) for f in doc["findings"]
           if f["rule"] == "blocking-memcpy"}
    assert new == {("blocking-memcpy", "pageable-async", "new")}


def test_legacy_to_per_thread_gains_kernel_overlap(capsys):
    doc = diff_json(capsys, "default-stream-bad", "default-stream-good", "--range",
                    "measured")
    overlap = metric(doc, "measured", "kernel_overlap_pct")
    assert (overlap["before"], overlap["after"], overlap["change"]) == (
        analysis("default-stream-bad").metrics.kernel_overlap_pct,
        analysis("default-stream-good").metrics.kernel_overlap_pct, "better")
    legacy = [f for f in doc["findings"] if f["cause"] == "legacy-default-stream"]
    assert [f["status"] for f in legacy] == ["fixed"]
    assert legacy[0]["count_before"] == sum(f.count for f in analysis(
        "default-stream-bad").findings_of("serialized-streams", "legacy-default-stream"))


def test_whole_report_diff_has_every_range(capsys):
    doc = diff_json(capsys, "h2d-copy-bad", "h2d-copy-good")
    ranges = reported_range_names(load(report_path("h2d-copy-bad")))
    assert [s["scope"] for s in doc["scopes"]] == [None, *ranges]
    whole = analysis("h2d-copy-good", None).metrics.to_dict()
    assert {m: metric(doc, None, m)["after"] for m in METRIC_NAMES} == whole
    # A range's numbers are analyze --range's.
    assert {m: metric(doc, "measured", m)["before"] for m in METRIC_NAMES} == \
        analysis("h2d-copy-bad").metrics.to_dict()
    # Findings of the whole report: the warm-up copies were pageable too.
    fixed_where = {tuple(f["ranges"]) for f in doc["findings"]
                   if f["rule"] == "blocking-memcpy" and f["status"] == "fixed"}
    assert tuple(analysis("h2d-copy-bad").findings_of("blocking-memcpy")[0].ranges) in \
        fixed_where


def test_a_report_against_itself_changes_nothing():
    trace = load(report_path("h2d-copy-bad"))
    result = diffs.diff(trace, trace, range_name="measured")
    assert {f.status for f in result.findings} == {diffs.UNCHANGED}
    # One entry per rule, cause and place (findings of several phases fold into it).
    assert len(result.findings) == len({(f.rule, f.cause, tuple(f.ranges))
                                        for f in analysis("h2d-copy-bad").findings})
    assert {m.change for m in result.scope("measured").metrics} <= {"unchanged", "n/a"}


def test_markdown_output(capsys, tmp_path):
    md = tmp_path / "diff.md"
    assert main(["diff", str(report_path("h2d-copy-bad")), str(report_path("h2d-copy-good")),
                 "--range", "measured", "--markdown", str(md)]) == 0
    text = md.read_text()
    before = analysis("h2d-copy-bad").metrics.copy_compute_overlap_pct
    after = analysis("h2d-copy-good").metrics.copy_compute_overlap_pct
    assert text.startswith(f"### gpugap diff: `{shown_path(report_path('h2d-copy-bad'))}` → ")
    row = next(ln for ln in text.splitlines() if ln.startswith("| `copy_compute_overlap_pct`"))
    assert row.endswith("| 🟢 better |")
    assert row.startswith(f"| `copy_compute_overlap_pct` | {fmt_value('x_pct', before)} | "
                          f"{fmt_value('x_pct', after)} |")
    assert "| ✅ fixed | blocking-memcpy \\[pageable-async\\] | measured > iter |" in text
    # The terminal output went to stdout as usual.
    assert "findings:" in capsys.readouterr().out


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    rc = main(["diff", str(report_path("h2d-copy-bad")), str(tmp_path / "missing.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "no such file" in err
    rc = main(["diff", str(report_path("h2d-copy-bad")), str(report_path("h2d-copy-good")),
               "--range", "nope"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "no NVTX range named 'nope'" in err


def test_a_3x_faster_run_is_not_worse_by_noise(capsys):
    """legacy -> per-thread default stream: the measured range runs 3.2x faster; its busy
    share moves -0.05 points and its synchronization share +0.65: within the 1-point
    floor, unchanged (they read 'worse'). Real gains and losses keep their name."""
    doc = diff_json(capsys, "default-stream-bad", "default-stream-good", "--range",
                    "measured")
    span = metric(doc, "measured", "span_ns")
    assert span["before"] / span["after"] > 3.1 and span["change"] == "better"
    busy = metric(doc, "measured", "gpu_busy_pct")
    assert (busy["delta"], busy["noise"], busy["change"]) == (-0.05, 1.0, "unchanged")
    sync = metric(doc, "measured", "steady.synchronization_pct")
    assert 0 < sync["delta"] < 1 and sync["change"] == "unchanged"
    assert metric(doc, "measured", "kernel_overlap_pct")["change"] == "better"

    # A bucket's share is judged by the time it stands for, the copies of every kind
    # together: pinned copies take 1.09% of the pinned run's range, 0% of the pageable
    # run's, whose pageable copies took 49%: copies that became pinned are no worse.
    doc = diff_json(capsys, "h2d-copy-bad", "h2d-copy-good", "--range", "measured")
    pinned = metric(doc, "measured", "steady.copy-h2d-pinned_pct")
    pageable = metric(doc, "measured", "steady.copy-h2d-pageable_pct")
    assert pinned["delta"] > 1 and pinned["change"] == "better"
    assert pageable["delta"] < -40 and pageable["change"] == "better"
    # Compute is the program's work, not time lost: changed, neither better nor worse.
    assert metric(doc, "measured", "steady.compute_pct")["change"] == "changed"
    assert doc["judgement"]["change"] == "better"


def test_relative_floor_for_times_counts_and_findings(capsys):
    """Metrics other than percentages: within 5% of the value before is unchanged, with
    or without a direction; findings whose count and cost stay within 5% too."""
    doc = diff_json(capsys, "default-stream-bad", "default-stream-good")
    span = metric(doc, None, "span_ns")
    assert 0 < -span["delta"] < 0.05 * span["before"] and span["change"] == "unchanged"
    assert span["noise"] == pytest.approx(0.05 * span["before"])
    kernels = metric(doc, None, "kernel_time_ns")              # +27%, no direction
    assert kernels["delta"] > 0.05 * kernels["before"] and kernels["change"] == "changed"
    assert diffs.noise_floor("kernels", 0) == 0.0           # from 0, any change counts
    by_key = {(f["rule"], f["cause"], tuple(f["ranges"])): f for f in doc["findings"]}
    copy = by_key[("blocking-memcpy", "synchronous", ("check",))]
    assert copy["count_before"] == copy["count_after"]
    assert 0 < abs(copy["cost_ms_delta"]) < 0.05 * copy["cost_ms_before"]
    assert copy["status"] == "unchanged"
    grid = by_key[("small-grid", "undersized-grid", ("setup",))]
    assert grid["cost_ms_delta"] > 0.05 * grid["cost_ms_before"]
    assert grid["status"] == "changed"


@pytest.mark.slow
def test_diff_fits_80_columns(tmp_path):
    """A CI log (no TTY, COLUMNS=80), --all: every table fits, names wrap at dots and
    dashes, 'before -> after' takes two lines where one would not fit."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gpugap", "diff",
                           str(report_path("default-stream-bad")),
                           str(report_path("default-stream-good")), "--no-config", "--all"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.split("│")[1:-1]]

    rows = {cells(ln)[0]: cells(ln) for ln in lines if ln.startswith("│")}
    assert rows["gpu_busy_pct"] == ["gpu_busy_pct", "66.976%", "65.462%", "-1.514 pts",
                                    "worse"]
    assert rows["kernel_overlap_pct"][1:] == ["0%", "93.851%", "+93.851 pts", "better"]
    assert rows["span_ns"][-1] == "unchanged"
    # A long name breaks after a dot, its numbers stay on its first line.
    at = next(i for i, ln in enumerate(lines) if "findings.serialized-streams." in ln
              and "cost" not in ln and cells(ln)[1] == "38")
    assert cells(lines[at + 1])[0] == "count"
    # NVTX ranges: each cell 'before' over '-> after'.
    at = next(i for i, ln in enumerate(lines) if ln.startswith("│ measured "))
    assert cells(lines[at])[:3] == ["measured", "93.021%", "0%"]
    assert cells(lines[at + 1])[:3] == ["", "-> 92.971%", "-> 97.8%"]
    # Findings: rule [cause] in its ranges, wrapped at spaces and dashes.
    at = next(i for i, ln in enumerate(lines) if "serialized-streams [legacy-" in ln)
    assert cells(lines[at])[0] == "fixed" and cells(lines[at])[2] == "29 -> 0"
    assert "default-stream] in measured" in lines[at + 1]
    # The result first, then the findings (unchanged ones too, with --all), then the
    # metrics (every one), then the ranges.
    # Better or worse first, by the time lost (the steady iteration's median).
    assert lines[2].startswith("better: the steady iteration's median went from 677 us "
                               "to 166 us (-75.5%);")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("findings:"))
    assert lines[at] == "findings: 3 fixed, 0 new, 2 changed (1 worse, 1 better), 3 " \
        "unchanged"
    assert lines[at + 1] == "metrics: 13 better, 2 worse, 2 changed; 42 within noise"
    titles = [ln.strip() for ln in lines if ln[:1] not in "┏┃┡│└"][at + 2:]
    assert titles == ["Findings", "Metrics, whole report", "NVTX ranges (before -> after)"]
    assert [cells(ln)[0] for ln in lines if ln.startswith("│ unchanged ")] != []


def test_diff_opens_with_what_got_better_or_worse(monkeypatch):
    """Without --all: the summary, then findings fixed/new/worse/better, then only the
    metrics and ranges that moved beyond their noise floor; nothing within it."""
    import io

    from rich.console import Console

    from gpugap.cli import check as cli_check

    screen = io.StringIO()
    monkeypatch.setattr(cli_check, "stdout", Console(file=screen, width=80,
                                                     color_system=None))
    assert main(["diff", str(report_path("default-stream-bad")),
                 str(report_path("default-stream-good")), "--no-config"]) == 0
    lines = [ln.rstrip() for ln in screen.getvalue().splitlines()]
    assert max(len(ln) for ln in lines) <= 80
    assert lines[0].startswith("gpugap diff ") and lines[1].endswith("(whole report)")
    assert lines[2:5] == [
        "better: the steady iteration's median went from 677 us to 166 us (-75.5%);",
        "        before, Streams serialized by the legacy default stream took 516 us of",
        "        each iteration on average; after, healthy (GPU busy 100.0%)"]
    assert lines[5:7] == [
        "findings: 3 fixed, 0 new, 2 changed (1 worse, 1 better), 3 unchanged",
        "metrics: 13 better, 2 worse, 2 changed; 42 within noise"]
    assert lines[7] == "Findings fixed, new and changed"
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in lines if ln.startswith("│")]
    statuses = [r[0] for r in rows[:12] if r[0] in ("fixed", "new", "better", "worse")]
    assert statuses == ["fixed", "fixed", "fixed", "better", "worse"]
    names = [r[0] for r in rows if r[0]]
    assert "unchanged" not in {r[-1] for r in rows}
    assert "span_ns" not in names and "kernels" not in names           # within noise
    assert {"gpu_busy_pct", "kernel_overlap_pct", "steady.iteration_ms"} <= set(names)
    assert "NVTX ranges that moved (before -> after)" in lines
    assert lines[-1] == "--all lists every metric, range and finding"


# --- issue 40: better or worse by the time lost; ranges as analyze groups them; two
# programs said ---------------------------------------------------------------------

CAPTURES = ROOT / "tests" / "data" / "captures"


@cache
def captures_diff(before: str, after: str) -> dict:
    """`gpugap diff --json` of two committed captures (tests/data/captures)."""
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["diff", str(CAPTURES / f"{before}.sqlite"),
                     str(CAPTURES / f"{after}.sqlite"), "--json", "--no-config"]) == 0
    return json.loads(out.getvalue())


def test_workers_and_pinned_memory_are_better_by_the_time_lost():
    """train-workers0 -> train-workers (DataLoader workers, pinned memory): better,
    because the steady iteration's median fell from 72.4 to 11.9 ms and the input-bound
    verdict (61.8 ms lost per iteration) is gone, whatever else moved."""
    doc = captures_diff("train-workers0", "train-workers")
    judged = doc["judgement"]
    assert (judged["change"], judged["measure"]) == ("better", "steady.iteration_ms")
    assert (round(judged["before_ms"], 1), round(judged["after_ms"], 1)) == (72.4, 11.9)
    assert judged["verdict_before"]["title"] == "Input-bound (data loading)"
    assert round(judged["verdict_before"]["lost_ms"], 1) == 61.8
    assert judged["verdict_after"]["kind"] == "healthy"
    # The copies moved from pageable to pinned memory: no worse, judged together.
    assert metric(doc, None, "steady.copy-h2d-pinned_pct")["change"] == "better"
    assert metric(doc, None, "steady.copy-h2d-pageable_pct")["change"] == "better"
    assert "worse" not in {m["change"] for m in next(
        s for s in doc["scopes"] if s["scope"] is None)["metrics"]
        if m["metric"].startswith("steady.")}
    # A finding whose cost stays 0 while its count moves is neither better nor worse.
    init = next(f for f in doc["findings"]
                if (f["rule"], f["cause"]) == ("warmup-latency", "library-init"))
    assert (init["count_before"], init["count_after"], init["cost_ms_after"]) == (1, 2, 0)
    assert (init["status"], init["change"]) == ("changed", "changed")
    assert doc["same_program"] is True and doc["warnings"] == []


def test_numbered_ranges_are_one_scope_as_analyze_shows_them():
    doc = captures_diff("train-workers0", "train-workers")
    assert [s["scope"] for s in doc["scopes"]] == [None, "step N"]


def test_the_terminal_says_better_first_and_one_row_per_range(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["diff", str(CAPTURES / "train-workers0.sqlite"),
                 str(CAPTURES / "train-workers.sqlite"), "--no-config"]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert ("better: the steady iteration's median went from 72.4 ms to 11.9 ms "
            "(-83.6%); before, Input-bound (data loading) took 61.8 ms of each iteration "
            "on average; after, healthy (GPU busy 97.5%)") in text
    assert "6 changed (3 worse, 2 better, 1 in count only)" in text
    ranges = [ln.split("│")[1].strip() for ln in out.splitlines()
              if ln.startswith("│ step")]
    assert ranges == ["step N"]
    assert not any(ln.endswith(" ") for ln in out.splitlines())


def test_two_different_programs_are_said_first():
    doc = captures_diff("gemm", "decode")
    assert doc["same_program"] is False
    assert doc["programs"] == ["python3 /work/main/tests/data/programs/gemm_loop.py",
                               "python3 /work/main/tests/data/programs/decode.py"]
    assert doc["warnings"][0].startswith(
        "the two reports are different programs ('python3 gemm_loop.py' and 'python3 "
        "decode.py')")
    # One program in two clones is one program.
    same = diffs.Diff("a", "b", None, [], [], programs=("python3 /x/train.py",
                                                         "python3 /y/train.py"))
    assert same.same_program is True
