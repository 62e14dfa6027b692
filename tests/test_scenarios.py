"""The scenario suite: importable without torch/cuda-python, well-formed, and each
variant's expected diagnosis holds on the real reports captured from it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpugap import scenarios
from gpugap.analysis import analyze
from gpugap.rules import registry
from gpugap.run.runner import evaluate
from tests.conftest import SCENARIO_DATA, load_report

SUITE = scenarios.all_scenarios()


def test_suite_covers_every_seed_puzzle():
    assert [s.name for s in SUITE] == ["h2d-copy", "default-stream", "grid-sweep",
                                       "cublas-warmup", "moe-experts", "prefetch-pipeline"]
    assert {s.seed for s in SUITE} == {"000", "001", "002", "003", "004"}


@pytest.mark.parametrize("scenario", SUITE, ids=lambda s: s.name)
def test_scenario_module_is_well_formed(scenario):
    module = importlib.import_module(f"gpugap.scenarios.{scenario.module}")
    assert callable(module.run)
    assert set(scenario.variants) == {"bad", "good"}
    rules = registry()
    for variant in scenario.variants.values():
        assert variant.expect or variant.bounds, variant
        for exp in variant.expect:
            assert exp.rule in rules
            assert exp.cause is None or exp.cause in rules[exp.rule].causes
        for bound in variant.bounds:
            assert bound.metric in {"gpu_busy_pct", "gpu_idle_pct", "kernel_overlap_pct",
                                    "copy_compute_overlap_pct", "concurrency"}
    # Standalone use: python -m gpugap.scenarios.<module> --help
    with pytest.raises(SystemExit) as exc:
        module.main(scenario, module.run, ["--help"])
    assert exc.value.code == 0


@pytest.mark.parametrize("scenario", SUITE, ids=lambda s: s.name)
def test_scenario_runs_standalone_from_the_checkout(scenario):
    """python scenarios/<module>.py, as a script (gpugap installed, editable here): its
    options, and no GPU package imported to print them."""
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-X", "importtime", f"scenarios/{scenario.module}.py",
                           "--help"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: python -m gpugap.scenarios.{scenario.module} ")
    assert "--variant {bad,good}" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert not imported & {"torch", "cuda", "nvtx"}


def test_listing_the_suite_imports_no_gpu_package():
    code = ("import sys, gpugap.cli\nfrom gpugap import scenarios\n"
            "[s.variants for s in scenarios.all_scenarios()]\n"
            "print(sorted(m for m in ('torch', 'cuda', 'nvtx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


CASES = [(s, v) for s in SUITE for v in ("bad", "good")]


@pytest.mark.parametrize(("scenario", "variant"), CASES,
                         ids=[f"{s.name}-{v}" for s, v in CASES])
def test_expected_diagnosis_holds_on_the_captured_report(scenario, variant):
    name = f"{scenario.name}-{variant}"
    trace = load_report(name)
    result = json.loads((SCENARIO_DATA / f"{name}.result.json").read_text())
    scoped = {}
    checks = evaluate(scenario.variants[variant], analyze(trace), trace, result, scoped)
    failed = [(c.what, c.detail) for c in checks if not c.passed]
    assert not failed
    assert len(checks) == 1 + len(scenario.variants[variant].expect) + \
        len(scenario.variants[variant].bounds)
    # Each expectation's range (measured) is one scope (issue 23): never split into a
    # start-up and a steady finding of one cause, and the verdict's share is its
    # finding's, and the range breakdown's where that finding claims one whole bucket.
    assert set(scoped) == {"measured"}
    for scope in scoped.values():
        assert {f.phase for f in scope.findings} <= {"range"}
        keys = [(f.rule, f.cause, f.device, tuple(f.ranges)) for f in scope.findings]
        assert len(keys) == len(set(keys))
        v = scope.verdict
        if v.finding is None:
            continue
        (top,) = [f for f in scope.findings if f.id == v.finding]
        assert v.share_pct == round(top.share_pct, 2)
        if top.rule == "launch-gap":
            assert v.share_pct == v.breakdown[v.bucket]
