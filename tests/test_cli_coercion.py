"""gpugap.cli.coercion: typer's pydantic coercion is built only for values that need it
(an analyze of one report with default options imports no pydantic), and every value
reaches the command as typer would give it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpugap.cli import main

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "tests" / "data" / "captures" / "gemm.sqlite"


@pytest.mark.slow
def test_analyze_with_default_options_builds_no_pydantic_validator():
    probe = ("import io, contextlib, sys\n"
             "from gpugap.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             f"    code = main(['analyze', {str(GEMM)!r}, '--json'])\n"
             "print(code, 'pydantic' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.stdout.split() == ["0", "False"], done.stderr


@pytest.mark.parametrize("argv, given", [
    (["analyze", str(GEMM)], {"reports": [GEMM], "max_findings": 20, "rule": None, "range_": None,
                              "scheduler_timeout": 10.0, "no_config": False}),
    (["analyze", str(GEMM), str(GEMM), "--max-findings", "3", "--min-gap-us", "50",
      "--rule", "launch-gap", "--scheduler-timeout", "2"],
     {"reports": [GEMM, GEMM], "max_findings": 3, "min_gap_us": 50.0,
      "rule": ["launch-gap"], "scheduler_timeout": 2.0}),
])
def test_values_reach_the_command_as_typer_coerces_them(monkeypatch, argv, given):
    from gpugap.cli import root

    seen: dict = {}

    def analyze(**kwargs):
        seen.update(kwargs)
        return 0

    monkeypatch.setattr(root.analyze, "_command", analyze)
    assert main(argv) == 0
    for name, value in given.items():
        assert seen[name] == value and type(seen[name]) is type(value), name
    assert all(type(p) is type(GEMM) for p in seen["reports"])
    assert seen["outputs"].given["html"] is None and seen["outputs"].given["json"] is False
