"""Every option that names something in a report fails with one line when it matches
nothing there, on every kind of report (issue 40): a typo must never change the
answer silently. gemm has no NVTX range, train-workers0 has 'step N', ddp-manual two
processes with 'step N'; two reports make a job view."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_USAGE

CAPTURES = Path(__file__).parent / "data" / "captures"
KINDS = {"no-nvtx": ["gemm"], "nvtx": ["train-workers0"], "two-processes": ["ddp-manual"],
         "several-reports": ["ddp-manual", "ddp-overlap"]}


def reports(kind: str) -> list[str]:
    return [str(CAPTURES / f"{name}.sqlite") for name in KINDS[kind]]


def one_line_error(capsys, argv: list[str]) -> str:
    """The command's one line on stderr (exit 2, nothing on stdout, no traceback)."""
    capsys.readouterr()
    code = main([*argv, "--no-config"])
    out, err = capsys.readouterr()
    assert (code, out) == (EXIT_USAGE, ""), (code, out, err)
    assert err.count("\n") == 1 and err.startswith("gpugap: error: "), err
    return err


@pytest.mark.parametrize("kind", KINDS)
def test_an_iteration_that_names_no_range(capsys, kind):
    err = one_line_error(capsys, ["analyze", *reports(kind), "--iteration", "stpe"])
    assert "no NVTX range named 'stpe' for --iteration NAME" in err
    if kind == "no-nvtx":
        assert "has no NVTX ranges; leave the option out" in err
    else:
        assert "(ranges: step)" in err
    if kind == "several-reports":
        assert err.rstrip().endswith("; the other report has none either")


def test_an_iteration_some_reports_have_is_no_usage_error(capsys):
    """Named by one report of two: that one is analyzed with it, the other cannot be
    (exit 7, some reports not analyzed), and says why."""
    code = main(["analyze", *reports("no-nvtx"), *reports("nvtx"), "--iteration", "step",
                 "--no-config", "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 7
    assert "not analyzed: no NVTX range named 'step' for --iteration NAME: " in \
        " ".join(out.split())


def test_iteration_none_and_a_named_range_still_work(capsys):
    assert main(["analyze", *reports("no-nvtx"), "--iteration", "none", "--no-config"]) == 0
    assert main(["analyze", *reports("nvtx"), "--iteration", "step N", "--no-config"]) == 0
    assert "40 iterations: NVTX range 'step N'" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("kind", ["no-nvtx", "nvtx", "two-processes"])
def test_a_range_that_names_nothing(capsys, kind):
    for argv in (["analyze", *reports(kind)], ["check", *reports(kind), "--max",
                                               "gpu_busy_pct=100"],
                 ["diff", *reports(kind), *reports(kind)]):
        err = one_line_error(capsys, [*argv, "--range", "stpe"])
        assert "no NVTX range named 'stpe'" in err
        if kind == "no-nvtx":
            assert "has no NVTX ranges of its own; leave --range NAME out" in err
        else:
            assert "(ranges: step N" in err and "pick one of those with --range" in err


@pytest.mark.parametrize("kind", KINDS)
def test_a_rule_that_names_nothing(capsys, kind):
    err = one_line_error(capsys, ["analyze", *reports(kind), "--rule", "launch-gaps"])
    assert "unknown rule launch-gaps; rules: " in err and "none either" not in err


@pytest.mark.parametrize("metric", ["gpu_busy", "steady.input", "steady.inputs_pct",
                                    "findings.launch-gaps.count",
                                    "findings.launch-gap.inputs.count", "job.skews_pct"])
def test_a_metric_that_names_nothing(capsys, metric):
    err = one_line_error(capsys, ["check", *reports("no-nvtx"), "--max", f"{metric}=1"])
    assert f"'{metric}'" in err


def test_a_directory_of_folders_says_it_does_not_look_into_them(capsys):
    err = one_line_error(capsys, ["analyze", str(CAPTURES.parent)])
    assert err.rstrip().endswith(
        "is a directory without reports in it; pass a .nsys-rep or .sqlite file, or a "
        "directory that holds them (gpugap does not look into subfolders: captures, "
        f"causes, cpu-only... hold reports; pass {CAPTURES} or the reports themselves)")
