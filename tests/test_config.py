"""Configuration ([tool.gpugap] in pyproject.toml, gpugap.toml): discovery, the typed
Config, gpugap check driven by it on the real reports, one-line errors."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from gpugap.analysis import analyze
from gpugap.ci.config import Config, find_config, load_config
from gpugap.ci.gates import Gate, direction_of
from gpugap.cli import main
from gpugap.report import load

SCENARIOS = Path(__file__).parent / "data" / "scenarios"

PYPROJECT = """\
[project]
name = "demo"

[tool.gpugap]
range = "measured"
min_severity = "warning"

[tool.gpugap.gates]
min = { copy_compute_overlap_pct = 50 }
max = { "findings.blocking-memcpy.count" = 0 }

[tool.gpugap.ranges."h2d copy"]
max = { "findings.blocking-memcpy.pageable-async.count" = 0 }

[tool.gpugap.thresholds.launch-gap]
min_gap_us = 50

[tool.gpugap.directions]
kernels = "lower"
"""

BASELINE_TABLE = """
[tool.gpugap.baseline]
file = "ci/baseline.json"
tolerance = 2
noise_k = 4
cost_tolerance_ms = 0.5
metrics = ["copy_compute_overlap_pct", "findings.*.count"]
"""


def report_path(name: str) -> Path:
    return SCENARIOS / f"{name}.sqlite"


@cache
def analysis(name: str, range_name: str | None = "measured", min_gap_us: float = 100):
    return analyze(load(report_path(name)), range_name=range_name,
                   thresholds={"launch-gap": {"min_gap_us": min_gap_us}})


@pytest.fixture(autouse=True)
def outside_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project with [tool.gpugap] in its pyproject.toml; the cwd is a subdirectory."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "ci").mkdir()
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    return tmp_path


def test_typed_config_from_pyproject(project):
    (project / "pyproject.toml").write_text(PYPROJECT + BASELINE_TABLE)
    cfg = load_config()
    assert cfg.path == project / "pyproject.toml"
    assert (cfg.range, cfg.min_severity, cfg.allow_missing) == ("measured", "warning", False)
    source = "pyproject.toml [tool.gpugap.gates]"
    assert cfg.gates == (
        Gate("copy_compute_overlap_pct", "min", 50.0, None, f"{source} min"),
        Gate("findings.blocking-memcpy.count", "max", 0.0, None, f"{source} max"),
        Gate("findings.blocking-memcpy.pageable-async.count", "max", 0.0, "h2d copy",
             'pyproject.toml [tool.gpugap.ranges."h2d copy"] max'))
    assert cfg.gated_ranges == ["h2d copy"]
    assert cfg.thresholds == {"launch-gap": {"min_gap_us": 50.0}}
    assert cfg.baseline_file == project / "ci" / "baseline.json"
    policy = cfg.policy()
    assert (policy.tolerance, policy.noise_k, policy.cost_tolerance_ms, policy.metrics) == (
        2.0, 4.0, 0.5, ("copy_compute_overlap_pct", "findings.*.count"))
    assert direction_of("kernels", policy.directions) == "lower"
    assert cfg.overridden(range=None, tolerance=7).tolerance == 7
    assert cfg.overridden(range=None).range == "measured"


def test_discovery_order(tmp_path, project):
    # A pyproject.toml without [tool.gpugap] on the way up is skipped.
    (project / "src" / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    assert find_config() == project / "pyproject.toml"
    # gpugap.toml in the current directory wins, with its keys at the top level.
    (project / "src" / "gpugap.toml").write_text('range = "iter"\n')
    assert find_config() == project / "src" / "gpugap.toml"
    assert load_config().range == "iter"
    assert load_config(discover=False) == Config()
    assert load_config(project / "pyproject.toml").range == "measured"


def test_check_runs_on_the_configured_gates_alone(capsys, project):
    assert main(["check", str(report_path("h2d-copy-good"))]) == 0
    capsys.readouterr()
    assert main(["check", str(report_path("h2d-copy-bad")), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"] == str(project / "pyproject.toml")
    results = {(g["scope"], g["metric"]): (g["status"], g["value"])
               for g in doc["reports"][0]["gates"]}
    pageable_warmup = analysis("h2d-copy-bad", "h2d copy").findings_of("blocking-memcpy",
                                                                       "pageable-async")
    assert results == {
        ("measured", "copy_compute_overlap_pct"): (
            "fail", analysis("h2d-copy-bad").metrics.copy_compute_overlap_pct),
        ("measured", "findings.blocking-memcpy.count"): (
            "fail", sum(f.count for f in analysis("h2d-copy-bad").findings_of(
                "blocking-memcpy") if f.severity != "info")),
        ("h2d copy", "findings.blocking-memcpy.pageable-async.count"): (
            "fail", sum(f.count for f in pageable_warmup if f.severity != "info"))}
    # --no-config: no gates left.
    assert main(["check", str(report_path("h2d-copy-bad")), "--no-config"]) == 2


def test_configured_thresholds_reach_the_rules(capsys, tmp_path, monkeypatch):
    """[thresholds] changes what the rules find, as --set does: min_gap_us is where
    launch overhead ends and host work begins, so a lower one leaves less idle time
    launch-bound."""
    (tmp_path / "gpugap.toml").write_text(
        'range = "measured"\n[thresholds.launch-gap]\nmin_gap_us = 50\n')
    monkeypatch.chdir(tmp_path)
    metric = "findings.launch-gap.launch-bound.cost_ms"
    strict, default = (round(sum(f.cost_ns for f in analysis("cublas-warmup-good",
                                                              min_gap_us=gap)
                                 .findings_of("launch-gap", "launch-bound")) / 1e6, 3)
                       for gap in (50, 100))
    assert strict < default

    def launch_gaps(*argv) -> float:
        capsys.readouterr()
        main(["check", str(report_path("cublas-warmup-good")), "--max", f"{metric}=0",
              "--min-severity", "info", "--json", *argv])
        doc = json.loads(capsys.readouterr().out)
        return next(g["value"] for g in doc["reports"][0]["gates"] if g["metric"] == metric)

    assert launch_gaps() == strict
    assert launch_gaps("--set", "launch-gap.min_gap_us=100") == default
    assert launch_gaps("--no-config", "--range", "measured") == default


def test_allow_missing_and_baseline_file_from_config(capsys, tmp_path):
    (tmp_path / "gpugap.toml").write_text(
        'range = "measured"\nallow_missing = true\n'
        '[gates]\nmin = { copy_compute_overlap_pct = 50, kernel_overlap_pct = 50 }\n'
        '[baseline]\nfile = "base.json"\n')
    # The baseline goes where the config says, and check reads it from there.
    assert main(["baseline", "save", str(report_path("default-stream-good"))]) == 0
    assert (tmp_path / "base.json").is_file()
    capsys.readouterr()
    assert main(["check", str(report_path("default-stream-good")), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"] == str(tmp_path / "base.json")
    gates = {(g["kind"], g["metric"]): g["status"] for g in doc["reports"][0]["gates"]}
    assert gates[("min", "copy_compute_overlap_pct")] == "skip"       # no copies: allowed
    assert gates[("min", "kernel_overlap_pct")] == "pass"
    assert gates[("baseline", "kernel_overlap_pct")] == "pass"
    # The legacy stream loses the overlap: the configured gate and the baseline both fail.
    assert main(["check", str(report_path("default-stream-bad"))]) == 1


@pytest.mark.parametrize(("text", "expected"), [
    ("[gates]\nmin = { kernel_overlap = 5 }\n",
     "unknown metric 'kernel_overlap' in gpugap.toml [gates] min (did you mean "
     "kernel_overlap_pct?)"),
    ('[gates]\nmin = { kernel_overlap_pct = "5" }\n',
     "gpugap.toml [gates] min.kernel_overlap_pct must be a number, not '5'"),
    ("[gates]\nabove = { kernel_overlap_pct = 5 }\n",
     "unknown key 'above' in gpugap.toml [gates]; known: min, max"),
    ("[gate]\nmin = { kernel_overlap_pct = 5 }\n", "unknown key 'gate' in gpugap.toml;"),
    ("[gates\n", "is not valid TOML"),
    ("[thresholds.launch-gap]\nmin_gap = 5\n",
     "unknown key 'min_gap' in gpugap.toml [thresholds.launch-gap]; known: min_gap_us"),
    ("[thresholds.no-rule]\nx = 1\n", "unknown rule 'no-rule' in gpugap.toml [thresholds]"),
    ('[directions]\nkernels = "up"\n', "must be 'higher', 'lower' or 'none', not 'up'"),
    ("[baseline]\ntolerance = -1\n", "gpugap.toml [baseline] tolerance must be >= 0"),
    ("[baseline]\ncost_tolerance_ms = -1\n",
     "gpugap.toml [baseline] cost_tolerance_ms must be >= 0"),
    ('[baseline]\nmetrics = ["kernelz"]\n', "'kernelz' in gpugap.toml [baseline] matches no "
                                            "metric"),
    ('min_severity = "loud"\n', "min_severity must be one of info, warning, error"),
    ("allow_missing = 1\n", "allow_missing must be true or false"),
    ('[ranges."nope"]\nmin = { kernel_overlap_pct = 5 }\n', "no NVTX range named 'nope'"),
])
def test_bad_config_exits_2_with_one_line(capsys, tmp_path, text, expected):
    (tmp_path / "gpugap.toml").write_text(text)
    rc = main(["check", str(report_path("h2d-copy-good")), "--min", "kernels=0"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("gpugap: error: ")
    assert expected in err


def test_config_option_errors(capsys, tmp_path):
    argv = ["check", str(report_path("h2d-copy-good")), "--min", "kernels=0"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    for extra, expected in (
            (["--config", str(tmp_path / "missing.toml")], "no such config file"),
            (["--config", str(tmp_path / "pyproject.toml")], "has no [tool.gpugap] table"),
            (["--config", "a.toml", "--no-config"], "--config and --no-config contradict")):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err


def test_analyze_honours_configured_thresholds(tmp_path, monkeypatch, capsys):
    import json

    from gpugap.cli import main
    from tests.conftest import report_path

    (tmp_path / "gpugap.toml").write_text("[thresholds.launch-gap]\nmin_share_pct = 100\n")
    monkeypatch.chdir(tmp_path)
    report = str(report_path("cublas-warmup-bad"))
    assert main(["analyze", report, "--json"]) == 0
    configured = json.loads(capsys.readouterr().out)
    assert configured["thresholds"]["launch-gap"]["min_share_pct"] == 100
    assert not [f for f in configured["findings"] if f["rule"] == "launch-gap"]
    # The command line wins over the file; --no-config ignores it.
    assert main(["analyze", report, "--json", "--set", "launch-gap.min_share_pct=2"]) == 0
    assert [f for f in json.loads(capsys.readouterr().out)["findings"]
            if f["rule"] == "launch-gap"]
    assert main(["analyze", report, "--json", "--no-config"]) == 0
    assert json.loads(capsys.readouterr().out)["thresholds"]["launch-gap"]["min_share_pct"] == 2
