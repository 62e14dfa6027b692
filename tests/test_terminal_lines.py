"""What `gpugap analyze` prints reads right, line by line (issue 40, items 7 and 11), on
real captures as a CI log shows them (no TTY, COLUMNS=80): no line ends in spaces, none
is wider than 80, a wrapped one-time cost stays under its text, and the numbers a
finding or a verdict gives agree with each other."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import gpugap
from gpugap.render.terminal import per_iteration_text

ROOT = Path(__file__).parent.parent
CAPTURES = ROOT / "tests" / "data" / "captures"
SHOWN = ["train-workers0", "ddp-manual", "gemm", "decode", "small-compile"]


@cache
def printed(name: str) -> list[str]:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gpugap", "analyze",
                           str(CAPTURES / f"{name}.sqlite"), "--no-config"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("name", SHOWN)
def test_no_trailing_spaces_and_80_columns(name):
    lines = printed(name)
    assert [ln for ln in lines if ln != ln.rstrip()] == []
    assert max(len(ln) for ln in lines) <= 80


@pytest.mark.parametrize("name", SHOWN)
def test_one_time_costs_wrap_under_their_text(name):
    lines = printed(name)
    at = next((i for i, ln in enumerate(lines)
               if ln.startswith("Start-up and other one-time costs")), None)
    if at is None:
        pytest.skip("no one-time costs")
    body = []
    for ln in lines[at + 1:]:
        if not ln.strip():
            break
        body.append(ln)
    # Each cost's first line after its label and severity, what it explains under it;
    # what wraps, under the text.
    for ln in body:
        assert re.match(r"  S\d+\. (INFO|WARNING|ERROR) \S", ln) \
            or re.match(r"    explains: S\d+[a-z]\. ", ln) or ln.startswith(" " * 6) \
            or ln.startswith("  GPU "), ln


def test_one_time_costs_of_two_gpus_are_said_summed():
    """ddp-manual: the one-time costs of both GPUs add up to more than the wall: the
    header says they are summed, and each GPU's share."""
    text = " ".join(" ".join(printed("ddp-manual")).split())
    analysis = gpugap.analyze(CAPTURES / "ddp-manual.sqlite")
    one_time = [f for f in analysis.findings if f.phase in ("start-up", "warm-up", "tail")
                and not f.consequence_of]
    per = {d: sum(f.cost_ns for f in one_time if f.device == d) for d in (0, 1)}
    assert sum(per.values()) > analysis.metrics.span_ns
    assert re.search(r"Start-up and other one-time costs \([\d.]+ s summed over 2 GPUs: "
                     r"GPU 0 [\d.]+ s, GPU 1 [\d.]+ s\)", text), text


def test_the_verdict_reads_its_median_as_the_time_lost():
    head = gpugap.analyze(CAPTURES / "train-workers0.sqlite").verdict.headline
    assert head.endswith("61.8 ms lost per iteration on average (median 58.3 ms, p90 "
                         "96.5 ms) of a 76.6 ms iteration, about 14.8 ms without it")


def test_a_warm_up_finding_says_the_cost_its_title_gives():
    """train-workers0's module load in step 2: the title's cost (what no other finding
    counted) is the message's, beside what the load took; a cost in one iteration of
    39 is not 'median 0 ns, p90 0 ns'."""
    analysis = gpugap.analyze(CAPTURES / "train-workers0.sqlite")
    (f,) = [f for f in analysis.findings if f.id == "warmup-latency/module-load@0:steady"]
    assert f.message.startswith(
        f"Warm-up cost {gpugap.units.fmt_ns(f.cost_ns)} of GPU idle time, of the 7.71 ms "
        "it took")
    assert per_iteration_text(f.per_iteration) == \
        "in 1 of 39 iterations only: 6.36 ms at most in one"
    text = "\n".join(printed("train-workers0"))
    assert "median 0 ns" not in text


def test_launch_bound_gaps_are_under_the_length_it_says():
    """'(gaps under X). Longest: Y': X is the length the accounting took for host work
    on that device (ten times the launching thread's pace in Python), so Y < X."""
    for name in ("decode", "small-compile"):
        for f in gpugap.analyze(CAPTURES / f"{name}.sqlite").findings:
            m = re.search(r"gaps under ([\d.]+) (us|ms)\)\. Longest: ([\d.]+) (ns|us|ms)",
                          f.message)
            if f.cause == "launch-bound":
                assert m, f.message
                scale = {"ns": 1, "us": 1e3, "ms": 1e6}
                assert float(m[3]) * scale[m[4]] < float(m[1]) * scale[m[2]], f.message


def test_findings_and_the_accounting_name_the_phases_alike():
    """A finding's phase is the accounting's: the module loads of step 0 (a warm-up
    iteration of train-workers0) are 'warm-up' in the finding's id and in the accounting
    frame, not start-up in one and warm-up in the other."""
    analysis = gpugap.analyze(CAPTURES / "train-workers0.sqlite")
    (load,) = [f for f in analysis.findings
               if (f.rule, f.cause) == ("launch-gap", "module-load")]
    assert (load.phase, load.id) == ("warm-up", "launch-gap/module-load@0:warm-up")
    acc = analysis.frames().accounting
    rows = acc[(acc["bucket"] == "module-load") & (acc["ns"] > 0)]
    assert set(rows["phase"].astype(str)) == {"warm-up", "steady"}
    in_warmup = int(rows[rows["phase"] == "warm-up"]["ns"].iloc[0])
    assert load.cost_ns <= in_warmup
    assert any(re.match(r"  S\d+\. INFO launch-gap \[module-load\] .* in warm-up", ln)
               for ln in printed("train-workers0"))
